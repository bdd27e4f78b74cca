/* The model half of the public library: loading (GGUF file, dense-weight
 * residency, the architecture's weights, the tokenizer), what a model says
 * about itself, the tokenizer entry points, status names and the log. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"

const char *bmoe_status_name(bmoe_status status)
{
    switch (status) {
    case BMOE_OK: return "ok";
    case BMOE_ERR_INVALID_ARGUMENT: return "invalid argument";
    case BMOE_ERR_CONTEXT_FULL: return "context full";
    case BMOE_ERR_IO: return "I/O error";
    case BMOE_ERR_BAD_MODEL: return "bad model";
    case BMOE_ERR_OUT_OF_MEMORY: return "out of memory";
    case BMOE_ERR_ABORTED: return "aborted";
    case BMOE_ERR_NUMERIC: return "non-finite values";
    }
    return "unknown status";
}

void engine_log(const bmoe_model *m, enum bmoe_log_level level, const char *fmt, ...)
{
    if (!m || !m->log_callback)
        return;
    char line[BMOE_ERROR_MAX];
    va_list args;
    va_start(args, fmt);
    vsnprintf(line, sizeof line, fmt, args);
    va_end(args);
    m->log_callback(m->log_user, level, line);
}

int engine_report(bmoe_error *err, bmoe_status fallback, bmoe_error *out)
{
    bmoe_status status = error_classify(err, fallback);
    if (out)
        *out = *err;
    return (int)status;
}

/* ---- Loading ------------------------------------------------------------ */

bmoe_model_params bmoe_model_default_params(void)
{
    bmoe_model_params params = {
        .dense_weights = BMOE_DENSE_WEIGHTS_ANON,
        .prefault = true,
        .log_callback = NULL,
        .log_user = NULL,
    };
    return params;
}

static uint64_t model_file_bytes(const gguf_model *file)
{
    uint64_t bytes = 0;
    for (uint32_t shard = 0; shard < gguf_shard_count(file); shard++)
        bytes += gguf_shard_size(file, shard);
    return bytes;
}

/* Maps every page now, so the first tokens pay no page faults. A model larger
 * than RAM is left to demand paging: pre-faulting it would read it all and
 * evict the part just mapped. A failure is a warning, the model works. */
static void model_prefault(bmoe_model *m)
{
    long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page_size > 0 && model_file_bytes(m->file) > (uint64_t)pages * (uint64_t)page_size)
        return;
    bmoe_error err;
    error_clear(&err);
    if (gguf_prefault(m->file, &err) != 0)
        engine_log(m, BMOE_LOG_WARNING, "%s", err.message);
}

static int copy_chat_template(bmoe_model *m, bmoe_error *err)
{
    gguf_string text;
    if (!gguf_get_string(m->file, "tokenizer.chat_template", &text))
        return 0;
    m->chat_template = malloc((size_t)text.length + 1);
    if (!m->chat_template)
        return error_set_status(err, BMOE_ERR_OUT_OF_MEMORY, "model: out of memory for the chat template");
    memcpy(m->chat_template, text.data, (size_t)text.length);
    m->chat_template[text.length] = '\0';
    return 0;
}

bmoe_model *bmoe_model_load(const char *path, const bmoe_model_params *params, bmoe_error *error)
{
    bmoe_error err;
    error_clear(&err);
    bmoe_model_params p = params ? *params : bmoe_model_default_params();
    if (!path) {
        error_set_status(&err, BMOE_ERR_INVALID_ARGUMENT, "model: no path given");
        engine_report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
        return NULL;
    }
    if (p.dense_weights != BMOE_DENSE_WEIGHTS_ANON && p.dense_weights != BMOE_DENSE_WEIGHTS_MMAP) {
        error_set_status(&err, BMOE_ERR_INVALID_ARGUMENT, "model: unknown dense-weights policy %d",
                         (int)p.dense_weights);
        engine_report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
        return NULL;
    }
    bmoe_model *result = calloc(1, sizeof *result);
    if (!result) {
        error_set_status(&err, BMOE_ERR_OUT_OF_MEMORY, "model: out of memory");
        engine_report(&err, BMOE_ERR_OUT_OF_MEMORY, error);
        return NULL;
    }
    result->log_callback = p.log_callback;
    result->log_user = p.log_user;
    result->file = gguf_open(path, &err);
    if (!result->file)
        goto fail;
    if (p.dense_weights == BMOE_DENSE_WEIGHTS_ANON && gguf_copy_dense_weights(result->file, &err) != 0)
        goto fail;
    if (model_init(&result->model, result->file, &err) != 0)
        goto fail;
    if (gguf_find_kv(result->file, "tokenizer.ggml.model")) {
        result->tokenizer = tokenizer_create_from_gguf(result->file, &err);
        if (!result->tokenizer)
            goto fail;
    }
    if (copy_chat_template(result, &err) != 0)
        goto fail;
    if (p.prefault)
        model_prefault(result);
    return result;
fail:
    engine_report(&err, BMOE_ERR_BAD_MODEL, error);
    bmoe_model_free(result);
    return NULL;
}

void bmoe_model_free(bmoe_model *m)
{
    if (!m)
        return;
    if (m->tokenizer)
        tokenizer_destroy(m->tokenizer);
    model_release(&m->model);
    if (m->file)
        gguf_close(m->file);
    free(m->chat_template);
    free(m);
}

/* ---- What a model says about itself --------------------------------------- */

const char *bmoe_model_architecture(const bmoe_model *m)
{
    return m->model.hparams.architecture;
}

int32_t bmoe_model_n_vocab(const bmoe_model *m)
{
    return m->model.hparams.n_vocab;
}

int32_t bmoe_model_n_ctx_train(const bmoe_model *m)
{
    return m->model.hparams.n_ctx_train;
}

int32_t bmoe_model_n_layer(const bmoe_model *m)
{
    return m->model.hparams.n_layer;
}

static uint64_t matrix_bytes(const tensor_view *view)
{
    return view->data ? view->row_bytes * (uint64_t)view->ne[1] : 0;
}

void bmoe_model_get_info(const bmoe_model *m, bmoe_model_info *info)
{
    memset(info, 0, sizeof *info);
    const model_hparams *hp = &m->model.hparams;
    info->file_bytes = model_file_bytes(m->file);
    info->n_shards = gguf_shard_count(m->file);
    for (uint64_t i = 0; i < gguf_tensor_count(m->file); i++) {
        const gguf_tensor *tensor = gguf_tensor_at(m->file, i);
        info->tensor_bytes += tensor->nbytes;
        if (gguf_tensor_is_expert(tensor))
            info->expert_bytes += tensor->nbytes;
    }
    info->dense_bytes = info->tensor_bytes - info->expert_bytes;
    info->n_layer = hp->n_layer;
    for (int il = 0; il < hp->n_layer; il++) {
        const layer_weights *l = &m->model.weights.layers[il];
        if (!l->ffn_gate_inp.data)
            continue;
        info->n_moe_layers++;
        uint64_t slice = matrix_bytes(&l->ffn_gate_exps) + matrix_bytes(&l->ffn_up_exps) +
                         matrix_bytes(&l->ffn_down_exps);
        if (slice > info->expert_slice_bytes)
            info->expert_slice_bytes = slice;
    }
    if (info->n_moe_layers > 0) {
        info->n_expert = hp->n_expert;
        info->n_expert_used = hp->n_expert_used;
    }
}

int64_t bmoe_model_meta_string(const bmoe_model *m, const char *key, char *buf, size_t buf_size)
{
    gguf_string text;
    if (!key || !gguf_get_string(m->file, key, &text))
        return -1;
    if (buf && buf_size > 0) {
        size_t copied = text.length < buf_size - 1 ? (size_t)text.length : buf_size - 1;
        memcpy(buf, text.data, copied);
        buf[copied] = '\0';
    }
    return (int64_t)text.length;
}

const char *bmoe_model_chat_template(const bmoe_model *m)
{
    return m->chat_template;
}

/* ---- Tokenizer ---------------------------------------------------------- */

static int no_tokenizer(bmoe_error *error)
{
    bmoe_error err;
    error_set_status(&err, BMOE_ERR_BAD_MODEL, "tokenizer: the model has no vocabulary (tokenizer.ggml.model)");
    return engine_report(&err, BMOE_ERR_BAD_MODEL, error);
}

int32_t bmoe_tokenize(const bmoe_model *m, const char *text, size_t text_length, bool add_special,
                      bool parse_special, int32_t *tokens, int32_t max_tokens, bmoe_error *error)
{
    bmoe_error err;
    error_clear(&err);
    if (!m->tokenizer)
        return no_tokenizer(error);
    if ((!text && text_length > 0) || max_tokens < 0 || (!tokens && max_tokens > 0)) {
        error_set_status(&err, BMOE_ERR_INVALID_ARGUMENT, "tokenize: bad arguments (text %s, %zu bytes, %d tokens)",
                         text ? "given" : "NULL", text_length, max_tokens);
        return engine_report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
    }
    int32_t count = tokenizer_encode(m->tokenizer, text ? text : "", text_length, add_special, parse_special, tokens,
                                     max_tokens, &err);
    if (count < 0)
        return engine_report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
    return count;
}

int32_t bmoe_token_to_piece(const bmoe_model *m, int32_t token, bool render_special, char *buf, int32_t buf_size,
                            bmoe_error *error)
{
    bmoe_error err;
    error_clear(&err);
    if (!m->tokenizer)
        return no_tokenizer(error);
    if (token < 0 || token >= tokenizer_n_vocab(m->tokenizer) || buf_size < 0 || (!buf && buf_size > 0)) {
        error_set_status(&err, BMOE_ERR_INVALID_ARGUMENT, "token_to_piece: token %d outside the vocabulary [0, %d)",
                         token, tokenizer_n_vocab(m->tokenizer));
        if (token >= 0 && token < tokenizer_n_vocab(m->tokenizer))
            error_set_status(&err, BMOE_ERR_INVALID_ARGUMENT, "token_to_piece: bad buffer (%d bytes)", buf_size);
        return engine_report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
    }
    return tokenizer_token_to_piece(m->tokenizer, token, render_special, buf, buf_size);
}

bool bmoe_token_is_end_of_generation(const bmoe_model *m, int32_t token)
{
    return m->tokenizer && tokenizer_is_end_of_generation(m->tokenizer, token);
}

int32_t bmoe_token_bos(const bmoe_model *m)
{
    return m->tokenizer ? tokenizer_bos(m->tokenizer) : -1;
}

int32_t bmoe_token_eos(const bmoe_model *m)
{
    return m->tokenizer ? tokenizer_eos(m->tokenizer) : -1;
}

int32_t bmoe_token_end_of_generation_list(const bmoe_model *m, int32_t *tokens, int32_t max_tokens)
{
    if (!m->tokenizer)
        return 0;
    int32_t count = 0, n_vocab = tokenizer_n_vocab(m->tokenizer);
    for (int32_t id = 0; id < n_vocab; id++) {
        if (!tokenizer_is_end_of_generation(m->tokenizer, id))
            continue;
        if (tokens && count < max_tokens)
            tokens[count] = id;
        count++;
    }
    return count;
}

/* ---- Files -------------------------------------------------------------- */

int bmoe_describe_file(const char *path, void *out, bmoe_error *error)
{
    bmoe_error err;
    error_clear(&err);
    if (!path || !out) {
        error_set_status(&err, BMOE_ERR_INVALID_ARGUMENT, "describe: no path or no output stream");
        return engine_report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
    }
    gguf_model *file = gguf_open(path, &err);
    if (!file)
        return engine_report(&err, BMOE_ERR_BAD_MODEL, error);
    gguf_print_info(file, (FILE *)out);
    gguf_close(file);
    return 0;
}
