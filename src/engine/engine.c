/* The public library (include/bmoe.h): loading a model (GGUF file, the
 * architecture's weights, the tokenizer), contexts (thread pool, run state,
 * KV cache) and evaluation in micro-batches. The forward pass itself lives in
 * src/models; the sampler in sampler.c.
 *
 * Owns: the gguf_model mapping and the tokenizer (per bmoe_model), the thread
 * pool and the run state (per bmoe_context). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../models/model.h"
#include "../tokenizer/tokenizer.h"
#include "bmoe.h"

/* Default and cap of the context size when the caller gives none. */
#define ENGINE_DEFAULT_MAX_CTX 4096
#define ENGINE_DEFAULT_UBATCH 512

struct bmoe_model {
    gguf_model *file;
    model model;
    tokenizer *tokenizer; /* NULL when the file has no vocabulary */
};

struct bmoe_context {
    bmoe_model *model;
    thread_pool *pool;
    run_state state;
    int32_t n_ctx;
    int32_t n_ubatch;
    int32_t position; /* tokens in the KV cache */
};

static void copy_error(const bmoe_error *err, char *error, size_t error_size)
{
    if (error && error_size > 0)
        snprintf(error, error_size, "%s", err->message);
}

/* ---- Model -------------------------------------------------------------- */

bmoe_model_params bmoe_model_default_params(void)
{
    bmoe_model_params params = {.dense_weights = BMOE_DENSE_WEIGHTS_ANON};
    return params;
}

bmoe_model *bmoe_model_load(const char *path, char *error, size_t error_size)
{
    bmoe_model_params params = bmoe_model_default_params();
    return bmoe_model_load_with_params(path, &params, error, error_size);
}

bmoe_model *bmoe_model_load_with_params(const char *path, const bmoe_model_params *params,
                                        char *error, size_t error_size)
{
    bmoe_error err;
    error_clear(&err);
    if (!path) {
        error_set(&err, "model: no path given");
        copy_error(&err, error, error_size);
        return NULL;
    }
    bmoe_model *result = calloc(1, sizeof *result);
    if (!result) {
        error_set(&err, "model: out of memory");
        copy_error(&err, error, error_size);
        return NULL;
    }
    result->file = gguf_open(path, &err);
    if (!result->file)
        goto fail;
    if (params && params->dense_weights == BMOE_DENSE_WEIGHTS_ANON &&
        gguf_copy_dense_weights(result->file, &err) != 0)
        goto fail;
    if (model_init(&result->model, result->file, &err) != 0)
        goto fail;
    if (gguf_find_kv(result->file, "tokenizer.ggml.model")) {
        result->tokenizer = tokenizer_create_from_gguf(result->file, &err);
        if (!result->tokenizer)
            goto fail;
    }
    return result;
fail:
    copy_error(&err, error, error_size);
    bmoe_model_free(result);
    return NULL;
}

int bmoe_model_prefault(bmoe_model *model_handle, char *error, size_t error_size)
{
    bmoe_error err;
    error_clear(&err);
    /* Pre-faulting a model larger than RAM would read it all and evict the
     * part just mapped: leave such a model to demand paging. */
    uint64_t model_bytes = 0;
    for (uint32_t shard = 0; shard < gguf_shard_count(model_handle->file); shard++)
        model_bytes += gguf_shard_size(model_handle->file, shard);
    long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page_size > 0 && model_bytes > (uint64_t)pages * (uint64_t)page_size)
        return 0;
    if (gguf_prefault(model_handle->file, &err) != 0) {
        copy_error(&err, error, error_size);
        return -1;
    }
    return 0;
}

void bmoe_model_free(bmoe_model *model_handle)
{
    if (!model_handle)
        return;
    if (model_handle->tokenizer)
        tokenizer_destroy(model_handle->tokenizer);
    model_release(&model_handle->model);
    if (model_handle->file)
        gguf_close(model_handle->file);
    free(model_handle);
}

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

/* ---- Tokenizer ---------------------------------------------------------- */

int32_t bmoe_tokenize(const bmoe_model *m, const char *text, size_t text_length, bool add_special,
                      bool parse_special, int32_t *tokens, int32_t max_tokens)
{
    if (!m->tokenizer || (!text && text_length > 0) || max_tokens < 0)
        return -1;
    return tokenizer_encode(m->tokenizer, text ? text : "", text_length, add_special, parse_special, tokens,
                            max_tokens, NULL);
}

int32_t bmoe_token_to_piece(const bmoe_model *m, int32_t token, bool render_special, char *buf,
                            int32_t buf_size)
{
    if (!m->tokenizer)
        return -1;
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

/* ---- Context ------------------------------------------------------------ */

bmoe_context_params bmoe_context_default_params(void)
{
    bmoe_context_params params = {
        .n_ctx = 0,
        .n_ubatch = 0,
        .n_threads = 0,
        .kv_type = BMOE_KV_F16,
        .route_callback = NULL,
        .route_user = NULL,
    };
    return params;
}

bmoe_context *bmoe_context_create(bmoe_model *m, const bmoe_context_params *params, char *error,
                                  size_t error_size)
{
    bmoe_error err;
    error_clear(&err);
    bmoe_context_params p = params ? *params : bmoe_context_default_params();
    if (!m) {
        error_set(&err, "context: no model");
        copy_error(&err, error, error_size);
        return NULL;
    }
    if (p.n_ctx < 0 || p.n_ubatch < 0 || p.n_threads < 0 || (p.kv_type != BMOE_KV_F16 && p.kv_type != BMOE_KV_F32)) {
        error_set(&err, "context: invalid parameters (n_ctx %d, n_ubatch %d, n_threads %d, kv_type %d)", p.n_ctx,
                  p.n_ubatch, p.n_threads, (int)p.kv_type);
        copy_error(&err, error, error_size);
        return NULL;
    }
    int32_t n_ctx = p.n_ctx;
    if (n_ctx == 0) {
        n_ctx = m->model.hparams.n_ctx_train;
        if (n_ctx > ENGINE_DEFAULT_MAX_CTX)
            n_ctx = ENGINE_DEFAULT_MAX_CTX;
    }
    int32_t n_ubatch = p.n_ubatch ? p.n_ubatch : ENGINE_DEFAULT_UBATCH;
    if (n_ubatch > n_ctx)
        n_ubatch = n_ctx;
    int n_threads = p.n_threads;
    if (n_threads == 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = cores > 0 ? (int)cores : 1;
    }

    bmoe_context *context = calloc(1, sizeof *context);
    if (!context) {
        error_set(&err, "context: out of memory");
        copy_error(&err, error, error_size);
        return NULL;
    }
    context->model = m;
    context->n_ctx = n_ctx;
    context->n_ubatch = n_ubatch;
    context->pool = thread_pool_create(n_threads, &err);
    if (!context->pool ||
        run_state_create(&context->state, &m->model, n_ctx, n_ubatch, p.kv_type == BMOE_KV_F16, context->pool,
                         &err) != 0) {
        copy_error(&err, error, error_size);
        if (context->pool)
            thread_pool_destroy(context->pool);
        free(context);
        return NULL;
    }
    context->state.route_callback = p.route_callback;
    context->state.route_user = p.route_user;
    return context;
}

void bmoe_context_free(bmoe_context *context)
{
    if (!context)
        return;
    run_state_destroy(&context->state);
    thread_pool_destroy(context->pool);
    free(context);
}

int32_t bmoe_context_n_ctx(const bmoe_context *context)
{
    return context->n_ctx;
}

int32_t bmoe_context_position(const bmoe_context *context)
{
    return context->position;
}

int bmoe_eval(bmoe_context *context, const int32_t *tokens, int32_t n_tokens, float *logits, bool all_logits,
              char *error, size_t error_size)
{
    bmoe_error err;
    error_clear(&err);
    const model *m = &context->model->model;
    int32_t n_vocab = m->hparams.n_vocab;
    if (n_tokens <= 0 || !tokens) {
        error_set(&err, "eval: no tokens given");
        copy_error(&err, error, error_size);
        return -1;
    }
    if (n_tokens > context->n_ctx - context->position) {
        error_set(&err, "eval: context overflow: %d tokens at position %d exceed the context size %d", n_tokens,
                  context->position, context->n_ctx);
        copy_error(&err, error, error_size);
        return -1;
    }
    /* checked up front so that a bad id never leaves a half-written cache */
    for (int32_t i = 0; i < n_tokens; i++) {
        if (tokens[i] < 0 || tokens[i] >= n_vocab) {
            error_set(&err, "eval: token %d (index %d) is outside the vocabulary [0, %d)", tokens[i], i, n_vocab);
            copy_error(&err, error, error_size);
            return -1;
        }
    }
    for (int32_t start = 0; start < n_tokens; start += context->n_ubatch) {
        int32_t count = n_tokens - start < context->n_ubatch ? n_tokens - start : context->n_ubatch;
        bool last = start + count == n_tokens;
        forward_batch batch = {
            .tokens = tokens + start,
            .n_tokens = count,
            .position = context->position,
            .first_output = count,
            .logits = NULL,
        };
        if (logits && all_logits) {
            batch.first_output = 0;
            batch.logits = logits + (size_t)start * (size_t)n_vocab;
        } else if (logits && last) {
            batch.first_output = count - 1;
            batch.logits = logits;
        }
        if (m->arch->forward(m, &context->state, &batch, &err) != 0) {
            copy_error(&err, error, error_size);
            return -1;
        }
        context->position += count;
    }
    return 0;
}

void bmoe_context_truncate(bmoe_context *context, int32_t position)
{
    if (position < 0)
        position = 0;
    if (position < context->position)
        context->position = position;
}
