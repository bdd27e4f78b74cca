/* Model setup shared by every architecture: finding the architecture, the
 * common hyperparameter keys, binding tensors with shape and type checks, and
 * the run state (buffers and KV cache, allocated once per context). */
#include "model.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/pages.h"
#include "../base/text.h"
#include "../quant/quant.h"
#include "../stream/expert_store.h"

/* The layer of a tensor named blk.<layer>.*, or -1. */
static long layer_of_tensor(const char *name)
{
    if (strncmp(name, "blk.", 4) != 0 || name[4] < '0' || name[4] > '9')
        return -1;
    char *end = NULL;
    long layer = strtol(name + 4, &end, 10);
    return *end == '.' ? layer : -1;
}

bool model_tensor_in_nextn(const model *m, const char *name)
{
    long layer = layer_of_tensor(name);
    return layer >= m->hparams.n_layer && layer < m->hparams.n_layer + m->hparams.n_layer_nextn;
}

/* Tensors the architecture left unbound: a block_count smaller than the
 * layers present would otherwise run the first layers only, silently. */
static int check_every_tensor_used(const model *m, bmoe_error *err)
{
    const model_hparams *hp = &m->hparams;
    int32_t block_count = hp->n_layer + hp->n_layer_nextn;
    uint64_t unused = 0;
    const gguf_tensor *first = NULL;
    for (uint64_t i = 0; i < gguf_tensor_count(m->file); i++) {
        if (m->tensor_used[i])
            continue;
        const gguf_tensor *tensor = gguf_tensor_at(m->file, i);
        /* the multi-token-prediction layers nextn_predict_layers declares */
        if (model_tensor_in_nextn(m, tensor->name))
            continue;
        if (unused++ == 0)
            first = tensor;
    }
    if (unused == 0)
        return 0;
    char shown[128], more[64] = "";
    text_escape_string(first->name, shown, sizeof shown);
    if (unused > 1)
        snprintf(more, sizeof more, " (and %llu more unused tensors)", (unsigned long long)(unused - 1));
    long layer = layer_of_tensor(first->name);
    if (layer >= block_count)
        return error_set(err, "model: tensor '%s' belongs to layer %ld, but %s.block_count is %d%s", shown, layer,
                         hp->architecture, block_count, more);
    return error_set(err, "model: tensor '%s' is not used by the %s architecture%s", shown, hp->architecture,
                     more);
}

int model_init(model *m, const gguf_model *file, bmoe_error *err)
{
    memset(m, 0, sizeof *m);
    m->file = file;
    gguf_string name;
    if (!gguf_get_string(file, "general.architecture", &name))
        return error_set(err, "model: missing or non-string key 'general.architecture'");
    char shown[160];
    text_escape(name.data, (size_t)name.length, shown, sizeof shown);
    if (name.length == 0 || name.length >= sizeof m->hparams.architecture || memchr(name.data, 0, name.length))
        return error_set(err, "model: general.architecture '%s' (%llu bytes) is not an architecture name", shown,
                         (unsigned long long)name.length);
    memcpy(m->hparams.architecture, name.data, name.length);
    m->hparams.architecture[name.length] = '\0';
    m->arch = model_arch_find(m->hparams.architecture);
    if (!m->arch)
        return error_set(err, "model: unknown architecture '%s' (supported: %s)", shown, model_arch_names());
    uint64_t count = gguf_tensor_count(file);
    m->tensor_used = calloc(count ? count : 1, 1);
    if (!m->tensor_used)
        return error_set(err, "model: out of memory for %llu tensors", (unsigned long long)count);
    int status = m->arch->bind(m, err);
    if (status == 0)
        status = check_every_tensor_used(m, err);
    free(m->tensor_used);
    m->tensor_used = NULL;
    if (status != 0) {
        model_release(m);
        return -1;
    }
    return 0;
}

void model_release(model *m)
{
    free(m->weights.layers);
    m->weights.layers = NULL;
}

/* ---- Hyperparameters ---------------------------------------------------- */

static const char *arch_key(const model *m, const char *suffix, char *buffer, size_t size)
{
    snprintf(buffer, size, "%s.%s", m->hparams.architecture, suffix);
    return buffer;
}

/* A u32 key: required or with a default. Values must lie in [minimum, maximum]. */
static int read_u32(const model *m, const char *suffix, bool required, uint32_t fallback, uint32_t minimum,
                    uint32_t maximum, int32_t *out, bmoe_error *err)
{
    char key[128];
    arch_key(m, suffix, key, sizeof key);
    int64_t value;
    if (!gguf_find_kv(m->file, key)) {
        if (required)
            return error_set(err, "model: missing key '%s'", key);
        value = fallback;
    } else if (!gguf_get_int(m->file, key, &value)) {
        return error_set(err, "model: key '%s' is not an integer", key);
    }
    if ((value < minimum || value > maximum) && !gguf_find_kv(m->file, key))
        return error_set(err, "model: key '%s' is absent and its default, %lld, is out of range [%u, %u]", key,
                         (long long)value, minimum, maximum);
    if (value < minimum || value > maximum)
        return error_set(err, "model: key '%s' = %lld is out of range [%u, %u]", key, (long long)value,
                         minimum, maximum);
    *out = (int32_t)value;
    return 0;
}

int model_require_positive(const model *m, const char *suffix, int32_t value, bmoe_error *err)
{
    if (value > 0)
        return 0;
    char key[128];
    arch_key(m, suffix, key, sizeof key);
    if (!gguf_find_kv(m->file, key))
        return error_set(err, "model: %s needs key '%s', which is absent", m->hparams.architecture, key);
    return error_set(err, "model: %s needs a positive '%s' (it is %d)", m->hparams.architecture, key, (int)value);
}

static int read_f32(const model *m, const char *suffix, bool required, float fallback, float *out,
                    bmoe_error *err)
{
    char key[128];
    arch_key(m, suffix, key, sizeof key);
    if (!gguf_find_kv(m->file, key)) {
        if (required)
            return error_set(err, "model: missing key '%s'", key);
        *out = fallback;
        return 0;
    }
    if (!gguf_get_float(m->file, key, out))
        return error_set(err, "model: key '%s' is not a number", key);
    if (!isfinite(*out))
        return error_set(err, "model: key '%s' = %g is not finite", key, (double)*out);
    return 0;
}

int model_read_u32(const model *m, const char *suffix, bool required, uint32_t fallback, uint32_t minimum,
                   uint32_t maximum, int32_t *out, bmoe_error *err)
{
    return read_u32(m, suffix, required, fallback, minimum, maximum, out, err);
}

int model_read_f32(const model *m, const char *suffix, bool required, float fallback, float *out, bmoe_error *err)
{
    return read_f32(m, suffix, required, fallback, out, err);
}

int model_read_layer_u32(const model *m, const char *suffix, uint32_t fallback, uint32_t maximum, int32_t *out,
                         bmoe_error *err)
{
    char key[128];
    arch_key(m, suffix, key, sizeof key);
    uint32_t values[MODEL_MAX_LAYERS];
    int32_t n_layer = m->hparams.n_layer;
    int found = gguf_get_per_layer_uint32(m->file, key, (uint32_t)n_layer, values, err);
    if (found < 0)
        return -1;
    for (int32_t il = 0; il < n_layer; il++) {
        uint32_t value = found ? values[il] : fallback;
        if (value > maximum)
            return error_set(err, "model: key '%s' = %u (layer %d) is out of range [0, %u]", key, value, (int)il,
                             maximum);
        out[il] = (int32_t)value;
    }
    return 0;
}

/* A head count or FFN width, per layer (fallback: the layer's value in
 * fallback, or 0). Architectures with uniform layers need one value in every
 * layer; largest gets the largest. */
static int read_layer_sizes(const model *m, const char *suffix, const int32_t *fallback, int32_t *per_layer,
                            int32_t *largest, bmoe_error *err)
{
    int32_t n_layer = m->hparams.n_layer;
    if (model_read_layer_u32(m, suffix, 0, 1u << 20, per_layer, err) != 0)
        return -1;
    char key[128];
    if (!gguf_find_kv(m->file, arch_key(m, suffix, key, sizeof key)))
        for (int32_t il = 0; il < n_layer; il++)
            per_layer[il] = fallback ? fallback[il] : 0;
    *largest = 0;
    for (int32_t il = 0; il < n_layer; il++) {
        if (!m->arch->per_layer_hparams && per_layer[il] != per_layer[0])
            return error_set(err, "model: key '%s' differs between layers (%d in layer 0, %d in layer %d), "
                             "not supported for %s", key, per_layer[0], per_layer[il], (int)il,
                             m->hparams.architecture);
        if (per_layer[il] > *largest)
            *largest = per_layer[il];
    }
    return 0;
}

/* expert_group_count and expert_group_used_count (architectures.md 1.9 step
 * 4), which llama.cpp reads for every architecture. A run's score is the sum
 * of its two highest keys, so a run needs two experts; the runs kept must
 * hold the experts a token uses. */
static int read_expert_groups(model *m, bmoe_error *err)
{
    model_hparams *hp = &m->hparams;
    if (read_u32(m, "expert_group_count", false, 0, 0, MODEL_MAX_EXPERTS, &hp->n_expert_group, err) ||
        read_u32(m, "expert_group_used_count", false, 0, 0, MODEL_MAX_EXPERTS, &hp->n_expert_group_used, err))
        return -1;
    int32_t groups = hp->n_expert_group, used = hp->n_expert_group_used;
    if (hp->n_expert == 0 || groups <= 1)
        return 0;
    const char *a = hp->architecture;
    if (groups >= hp->n_expert || hp->n_expert % groups != 0 || hp->n_expert / groups < 2)
        return error_set(err, "model: %s.expert_group_count %d does not split %s.expert_count %d into groups of at "
                         "least 2 experts", a, groups, a, hp->n_expert);
    if (used <= 0 || used >= groups)
        return error_set(err, "model: %s.expert_group_used_count %d must be in [1, %d) with %d expert groups", a,
                         used, groups, groups);
    if (hp->n_expert_used > used * (hp->n_expert / groups))
        return error_set(err, "model: %s.expert_used_count %d exceeds the %d experts of the %d expert groups used", a,
                         hp->n_expert_used, used * (hp->n_expert / groups), used);
    return 0;
}

int model_read_expert_weighting(model *m, bool gating_required, int32_t gating_default, bmoe_error *err)
{
    model_hparams *hp = &m->hparams;
    char key[128];
    arch_key(m, "expert_weights_norm", key, sizeof key);
    hp->expert_weights_norm = false;
    if (gguf_find_kv(m->file, key) && !gguf_get_bool(m->file, key, &hp->expert_weights_norm))
        return error_set(err, "model: key '%s' is not a boolean", key);
    if (read_f32(m, "expert_weights_scale", false, 0.0f, &hp->expert_weights_scale, err) ||
        read_u32(m, "expert_gating_func", gating_required, (uint32_t)gating_default, 0, 2, &hp->expert_gating_func,
                 err))
        return -1;
    /* 0 is llama.cpp's "none": the architecture's default */
    if (hp->expert_gating_func == 0)
        hp->expert_gating_func = gating_default;
    return 0;
}

int model_read_common_hparams(model *m, enum rope_type rope_type, bmoe_error *err)
{
    model_hparams *hp = &m->hparams;
    int32_t block_count, nextn;
    if (read_u32(m, "block_count", true, 0, 1, MODEL_MAX_LAYERS, &block_count, err) ||
        read_u32(m, "nextn_predict_layers", false, 0, 0, MODEL_MAX_LAYERS, &nextn, err))
        return -1;
    if (nextn >= block_count)
        return error_set(err, "model: nextn_predict_layers %d leaves no layers of %d", nextn, block_count);
    hp->n_layer = block_count - nextn;
    hp->n_layer_nextn = nextn;
    int32_t heads[MODEL_MAX_LAYERS], heads_kv[MODEL_MAX_LAYERS], ff[MODEL_MAX_LAYERS];
    if (read_u32(m, "context_length", true, 0, 1, 1u << 30, &hp->n_ctx_train, err) ||
        read_u32(m, "embedding_length", true, 0, 1, 1u << 20, &hp->n_embd, err) ||
        read_layer_sizes(m, "attention.head_count", NULL, heads, &hp->n_head, err))
        return -1;
    if (hp->n_head <= 0)
        return error_set(err, "model: missing or zero key '%s.attention.head_count'", hp->architecture);
    if (read_layer_sizes(m, "attention.head_count_kv", heads, heads_kv, &hp->n_head_kv, err))
        return -1;
    /* a layer with no KV heads has no attention (lfm2moe's convolution
     * layers); only an architecture that has such layers may say so */
    for (int32_t il = 0; il < hp->n_layer; il++) {
        bool mixerless = heads_kv[il] == 0 && m->arch->per_layer_hparams;
        if (!mixerless && (heads_kv[il] <= 0 || heads[il] % heads_kv[il] != 0))
            return error_set(err, "model: head_count %d is not a multiple of head_count_kv %d", heads[il],
                             heads_kv[il]);
    }
    char key[128];
    const char *head_key = NULL;
    if (!gguf_find_kv(m->file, arch_key(m, "attention.key_length", key, sizeof key)))
        head_key = "key_length";
    else if (!gguf_find_kv(m->file, arch_key(m, "attention.value_length", key, sizeof key)))
        head_key = "value_length";
    if (head_key && hp->n_embd % hp->n_head != 0)
        return error_set(err, "model: %s.attention.%s is absent, and the head size it defaults to does not exist:"
                         " %s.embedding_length %d is not a multiple of %s.attention.head_count %d",
                         hp->architecture, head_key, hp->architecture, hp->n_embd, hp->architecture, hp->n_head);
    uint32_t default_head = (uint32_t)(hp->n_embd / hp->n_head);
    if (read_u32(m, "attention.key_length", false, default_head, 1, 1u << 16, &hp->head_dim_k, err) ||
        read_u32(m, "attention.value_length", false, default_head, 1, 1u << 16, &hp->head_dim_v, err) ||
        read_u32(m, "rope.dimension_count", false, (uint32_t)hp->head_dim_k, 0, 1u << 16, &hp->n_rot, err))
        return -1;
    if (hp->n_rot % 2 != 0 || hp->n_rot > hp->head_dim_k)
        return error_set(err, "model: rope.dimension_count %d must be even and at most the head size %d",
                         hp->n_rot, hp->head_dim_k);
    if (read_f32(m, "attention.layer_norm_rms_epsilon", true, 0, &hp->rms_eps, err))
        return -1;
    if (hp->rms_eps < 0)
        return error_set(err, "model: key '%s.attention.layer_norm_rms_epsilon' = %g is negative",
                         hp->architecture, (double)hp->rms_eps);

    /* feed-forward and experts */
    if (read_layer_sizes(m, "feed_forward_length", NULL, ff, &hp->n_ff, err) ||
        read_u32(m, "expert_count", false, 0, 0, MODEL_MAX_EXPERTS, &hp->n_expert, err) ||
        read_u32(m, "expert_used_count", false, 0, 0, MODEL_MAX_EXPERTS, &hp->n_expert_used, err))
        return -1;
    if (hp->n_expert_used > hp->n_expert)
        return error_set(err, "model: %s.expert_used_count %d exceeds expert_count %d", hp->architecture,
                         hp->n_expert_used, hp->n_expert);
    if (hp->n_expert > 0 && model_require_positive(m, "expert_used_count", hp->n_expert_used, err) != 0)
        return -1;
    uint32_t default_ff_exp = hp->n_expert_used > 0 ? (uint32_t)(hp->n_ff / hp->n_expert_used) : 0;
    if (read_u32(m, "expert_feed_forward_length", false, default_ff_exp, 0, 1u << 20, &hp->n_ff_exp, err) ||
        read_expert_groups(m, err))
        return -1;

    /* RoPE (gguf.md 10) */
    float freq_base, factor, attn_factor;
    if (read_f32(m, "rope.freq_base", false, 10000.0f, &freq_base, err) ||
        read_f32(m, "rope.scaling.factor", false, 0.0f, &factor, err) ||
        read_f32(m, "rope.scaling.attn_factor", false, 1.0f, &attn_factor, err))
        return -1;
    if (freq_base <= 0)
        return error_set(err, "model: key '%s.rope.freq_base' = %g must be positive", hp->architecture,
                         (double)freq_base);
    char shown[96];
    gguf_string scaling = {"linear", 6};
    if (gguf_find_kv(m->file, arch_key(m, "rope.scaling.type", key, sizeof key)) &&
        !gguf_get_string(m->file, key, &scaling))
        return error_set(err, "model: key '%s' is not a string", key);
    bool yarn = scaling.length == 4 && memcmp(scaling.data, "yarn", 4) == 0;
    bool none = scaling.length == 4 && memcmp(scaling.data, "none", 4) == 0;
    bool linear_type = scaling.length == 6 && memcmp(scaling.data, "linear", 6) == 0;
    if (!yarn && !none && !linear_type)
        return error_set(err, "model: unsupported %s '%s' (linear, yarn or none)", key,
                         text_escape(scaling.data, (size_t)scaling.length, shown, sizeof shown));
    if (factor < 0)
        return error_set(err, "model: key '%s.rope.scaling.factor' = %g is negative", hp->architecture,
                         (double)factor);
    float freq_scale = (factor == 0.0f || none) ? 1.0f : 1.0f / factor;
    int32_t n_ctx_orig;
    if (read_u32(m, "rope.scaling.original_context_length", false, (uint32_t)hp->n_ctx_train, 1, 1u << 30,
                 &n_ctx_orig, err))
        return -1;
    hp->rope = rope_config_default(rope_type, hp->n_rot, freq_base);
    hp->rope.freq_scale = freq_scale;
    hp->rope.ext_factor = yarn ? 1.0f : 0.0f;
    hp->rope.attn_factor = attn_factor;
    hp->rope.n_ctx_orig = n_ctx_orig;
    hp->rope_swa = hp->rope;
    float freq_base_swa;
    if (read_f32(m, "rope.freq_base_swa", false, freq_base, &freq_base_swa, err))
        return -1;
    if (freq_base_swa <= 0)
        return error_set(err, "model: key '%s.rope.freq_base_swa' = %g must be positive", hp->architecture,
                         (double)freq_base_swa);
    hp->rope_swa.freq_base = freq_base_swa;

    if (read_u32(m, "attention.sliding_window", false, 0, 0, 1u << 30, &hp->n_swa, err))
        return -1;
    hp->kq_scale = 1.0f / sqrtf((float)hp->head_dim_k);

    /* the vocabulary is the embedding's row count; the tokenizer must agree */
    const gguf_tensor *embd = gguf_find_tensor(m->file, "token_embd.weight");
    if (!embd)
        return error_set(err, "model: missing tensor 'token_embd.weight'");
    if (embd->ne[1] <= 0 || embd->ne[1] > INT32_MAX)
        return error_set(err, "model: tensor 'token_embd.weight' has %lld rows, not a vocabulary size",
                         (long long)embd->ne[1]);
    hp->n_vocab = (int32_t)embd->ne[1];
    const gguf_kv *tokens = gguf_find_kv(m->file, "tokenizer.ggml.tokens");
    if (tokens && tokens->type == GGUF_TYPE_ARRAY && tokens->array_count != (uint64_t)hp->n_vocab)
        return error_set(err, "model: tokenizer has %llu tokens but token_embd.weight has %d rows",
                         (unsigned long long)tokens->array_count, hp->n_vocab);

    for (int32_t il = 0; il < hp->n_layer; il++)
        hp->layer[il] = (layer_hparams){
            .mixer = MIXER_ATTENTION,
            .ffn = hp->n_expert > 0 ? FFN_MOE : FFN_DENSE,
            .n_head = heads[il],
            .n_head_kv = heads_kv[il],
            .head_dim_k = hp->head_dim_k,
            .head_dim_v = hp->head_dim_v,
            .n_ff = ff[il],
            .kv_source = il,
        };

    /* the nextn blocks' rows too: an architecture may bind the first as its draft head */
    m->weights.layers = calloc((size_t)(hp->n_layer + hp->n_layer_nextn), sizeof *m->weights.layers);
    if (!m->weights.layers)
        return error_set(err, "model: out of memory for %d layers", hp->n_layer);
    return 0;
}

/* Sliding-window pattern (architectures.md 1.6.1): a period P (layer il is
 * SWA iff il mod P < P - 1) or an array of per-layer bools. */
int model_read_swa_pattern(model *m, uint32_t default_period, bmoe_error *err)
{
    model_hparams *hp = &m->hparams;
    char key[128];
    arch_key(m, "attention.sliding_window_pattern", key, sizeof key);
    const gguf_kv *kv = gguf_find_kv(m->file, key);
    if (kv && kv->type == GGUF_TYPE_ARRAY) {
        if (kv->array_count != (uint64_t)hp->n_layer || kv->array_type == GGUF_TYPE_STRING ||
            kv->array_type == GGUF_TYPE_ARRAY)
            return error_set(err, "model: key '%s' must be %d booleans", key, hp->n_layer);
        for (int32_t il = 0; il < hp->n_layer; il++)
            hp->layer_is_swa[il] = gguf_array_int(kv, (uint64_t)il) != 0;
        return 0;
    }
    int32_t period;
    if (read_u32(m, "attention.sliding_window_pattern", false, default_period, 0, MODEL_MAX_LAYERS, &period,
                 err))
        return -1;
    for (int32_t il = 0; il < hp->n_layer; il++)
        hp->layer_is_swa[il] = period == 0 ? true : (il % period < period - 1);
    return 0;
}

/* ---- Tensors ------------------------------------------------------------ */

static void format_shape(char *buffer, size_t size, const int64_t *ne, int n_dims)
{
    size_t used = (size_t)snprintf(buffer, size, "{");
    for (int i = 0; i < n_dims && used < size; i++)
        used += (size_t)snprintf(buffer + used, size - used, i ? ", %lld" : "%lld", (long long)ne[i]);
    if (used < size)
        snprintf(buffer + used, size - used, "}");
}

/* The alignment a type's data needs: a block's size is a multiple of its
 * alignment and no block holds a field wider than 8 bytes, so the largest
 * power of two dividing the block size, at most 8, covers every load (f32:
 * 4; f16, Q8_0: 2; MXFP4: 1; K-quants: 8, more than their f16 fields need,
 * which costs nothing on files with the usual 32-byte alignment). */
static uint64_t data_alignment(const quant_format *format)
{
    uint64_t bytes = (uint64_t)format->block_bytes;
    uint64_t lowest_bit = bytes & (~bytes + 1);
    return lowest_bit > 8 ? 8 : lowest_bit;
}

int model_bind(model *m, tensor_view *view, bool required, enum tensor_kind kind, int n_dims,
               const int64_t *ne, bmoe_error *err, const char *name_format, int layer)
{
    char name[160];
    snprintf(name, sizeof name, name_format, layer);
    memset(view, 0, sizeof *view);
    const gguf_tensor *tensor = gguf_find_tensor(m->file, name);
    if (!tensor) {
        if (required)
            return error_set(err, "model: missing tensor '%s' (architecture %s)", name, m->hparams.architecture);
        return 0;
    }
    int64_t expected[4] = {1, 1, 1, 1};
    for (int i = 0; i < n_dims; i++)
        expected[i] = ne[i];
    for (int i = 0; i < 4; i++) {
        if (tensor->ne[i] != expected[i]) {
            char want[96], have[96];
            format_shape(want, sizeof want, expected, n_dims);
            format_shape(have, sizeof have, tensor->ne, (int)tensor->n_dims);
            return error_set(err, "model: tensor '%s' has shape %s, expected %s", name, have, want);
        }
    }
    const quant_format *format = quant_format_of(tensor->type);
    const char *type_name = format ? format->name : "invalid";
    switch (kind) {
    case TENSOR_VECTOR:
        if (tensor->type != TYPE_F32)
            return error_set(err, "model: tensor '%s' has type %s, expected F32", name, type_name);
        break;
    case TENSOR_MATRIX:
        if (!format || !format->vec_dot || format->block_elems <= 0 || ne[0] % format->block_elems != 0)
            return error_set(err, "model: tensor '%s' has type %s, which bmoe cannot multiply", name, type_name);
        break;
    case TENSOR_EMBEDDING:
        if (!format || !format->dequantize_row || format->block_elems <= 0 || ne[0] % format->block_elems != 0)
            return error_set(err, "model: tensor '%s' has type %s, which bmoe cannot decode", name, type_name);
        break;
    }
    /* Kernels load a type's data as its blocks' fields (f32 values, f16
     * scales): a file whose general.alignment is 1 or 2 can place a tensor
     * where those loads would be misaligned. Refused whatever the dense
     * weights mode, since the file offset decides it. */
    uint64_t alignment = data_alignment(format);
    if (tensor->file_offset % alignment != 0 || (uintptr_t)tensor->data % alignment != 0)
        return error_set(err, "model: tensor '%s' (%s) starts at file offset %llu, not a multiple of the %llu bytes"
                         " bmoe needs for %s data (general.alignment is %u)", name, type_name,
                         (unsigned long long)tensor->file_offset, (unsigned long long)alignment, type_name,
                         (unsigned)gguf_alignment(m->file));
    view->name = tensor->name;
    view->type = tensor->type;
    memcpy(view->ne, tensor->ne, sizeof view->ne);
    view->row_bytes = quant_row_bytes(tensor->type, tensor->ne[0]);
    view->data = tensor->data;
    view->shard = tensor->shard;
    view->file_offset = tensor->file_offset;
    if ((uint64_t)view->row_bytes * (uint64_t)(tensor->ne[1] * tensor->ne[2] * tensor->ne[3]) > tensor->nbytes)
        return error_set(err, "model: tensor '%s' is smaller than its shape", name);
    if (kind == TENSOR_MATRIX) {
        size_t bytes = activation_row_bytes(tensor->type, tensor->ne[0]);
        if (bytes > m->max_activation_bytes)
            m->max_activation_bytes = bytes;
    }
    if (m->tensor_used)
        m->tensor_used[gguf_tensor_index(m->file, tensor)] = 1;
    return 0;
}

int model_bind_globals(model *m, bool tied_output, const char *output_norm_name, bmoe_error *err)
{
    int64_t n_embd = m->hparams.n_embd, n_vocab = m->hparams.n_vocab;
    model_weights *w = &m->weights;
    if (model_bind(m, &w->token_embd, BIND_REQUIRED, TENSOR_EMBEDDING, 2, (int64_t[]){n_embd, n_vocab}, err,
                   "token_embd.weight", 0) ||
        model_bind(m, &w->output_norm, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){n_embd}, err,
                   output_norm_name, 0) ||
        model_bind(m, &w->output, !tied_output, TENSOR_MATRIX, 2, (int64_t[]){n_embd, n_vocab}, err,
                   "output.weight", 0))
        return -1;
    if (!w->output.data && /* tied output head */
        model_bind(m, &w->output, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){n_embd, n_vocab}, err,
                   "token_embd.weight", 0))
        return -1;
    return 0;
}

int model_bind_attention(model *m, int layer, bool value_optional, bmoe_error *err)
{
    const layer_hparams *lh = &m->hparams.layer[layer];
    int64_t n_embd = m->hparams.n_embd;
    int64_t q_dim = (int64_t)lh->n_head * lh->head_dim_k, k_dim = (int64_t)lh->n_head_kv * lh->head_dim_k;
    int64_t v_dim = (int64_t)lh->n_head_kv * lh->head_dim_v, attn_dim = (int64_t)lh->n_head * lh->head_dim_v;
    layer_weights *l = &m->weights.layers[layer];
    bool own_kv = lh->kv_source == layer;
    if (model_bind(m, &l->attn_norm, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){n_embd}, err,
                   "blk.%d.attn_norm.weight", layer) ||
        model_bind(m, &l->attn_q, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){n_embd, q_dim}, err,
                   "blk.%d.attn_q.weight", layer))
        return -1;
    if (own_kv &&
        (model_bind(m, &l->attn_k, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){n_embd, k_dim}, err,
                    "blk.%d.attn_k.weight", layer) ||
         model_bind(m, &l->attn_v, !value_optional, TENSOR_MATRIX, 2, (int64_t[]){n_embd, v_dim}, err,
                    "blk.%d.attn_v.weight", layer)))
        return -1;
    if (!own_kv) {
        /* its keys and values are the source layer's: K/V weights here mean
         * the file and the key that made the layer share disagree */
        char because[64];
        snprintf(because, sizeof because, "it attends over layer %d's KV cache", lh->kv_source);
        const char *own[] = {"attn_k.weight", "attn_v.weight", "attn_k.bias", "attn_v.bias"};
        for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
            if (model_refuse_tensor(m, layer, own[i], "KV-shared", because, err) != 0)
                return -1;
    }
    if (model_bind(m, &l->attn_q_bias, BIND_OPTIONAL, TENSOR_VECTOR, 1, (int64_t[]){q_dim}, err,
                   "blk.%d.attn_q.bias", layer) ||
        (own_kv &&
         (model_bind(m, &l->attn_k_bias, BIND_OPTIONAL, TENSOR_VECTOR, 1, (int64_t[]){k_dim}, err,
                     "blk.%d.attn_k.bias", layer) ||
          model_bind(m, &l->attn_v_bias, BIND_OPTIONAL, TENSOR_VECTOR, 1, (int64_t[]){v_dim}, err,
                     "blk.%d.attn_v.bias", layer))) ||
        model_bind(m, &l->attn_output, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){attn_dim, n_embd}, err,
                   "blk.%d.attn_output.weight", layer))
        return -1;
    return 0;
}

/* Rows first..first+count-1 of a bound matrix as a matrix of their own. */
static tensor_view matrix_rows(const tensor_view *whole, int64_t first, int64_t count)
{
    tensor_view part = *whole;
    uint64_t skipped = (uint64_t)first * (uint64_t)whole->row_bytes;
    part.ne[1] = count;
    part.data = (const uint8_t *)whole->data + skipped;
    part.file_offset += skipped;
    return part;
}

int model_bind_fused_qkv(model *m, int layer, bmoe_error *err)
{
    const layer_hparams *lh = &m->hparams.layer[layer];
    int64_t n_embd = m->hparams.n_embd;
    int64_t q_dim = (int64_t)lh->n_head * lh->head_dim_k, k_dim = (int64_t)lh->n_head_kv * lh->head_dim_k;
    int64_t v_dim = (int64_t)lh->n_head_kv * lh->head_dim_v, attn_dim = (int64_t)lh->n_head * lh->head_dim_v;
    layer_weights *l = &m->weights.layers[layer];
    tensor_view qkv;
    if (model_bind(m, &l->attn_norm, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){n_embd}, err,
                   "blk.%d.attn_norm.weight", layer) ||
        model_bind(m, &qkv, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){n_embd, q_dim + k_dim + v_dim}, err,
                   "blk.%d.attn_qkv.weight", layer) ||
        model_bind(m, &l->attn_output, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){attn_dim, n_embd}, err,
                   "blk.%d.attn_output.weight", layer))
        return -1;
    /* a row is whole blocks, so every part starts as aligned as the tensor
     * (model_bind's check) */
    l->attn_q = matrix_rows(&qkv, 0, q_dim);
    l->attn_k = matrix_rows(&qkv, q_dim, k_dim);
    l->attn_v = matrix_rows(&qkv, q_dim + k_dim, v_dim);
    return 0;
}

int model_bind_experts(model *m, int layer, bmoe_error *err)
{
    const model_hparams *hp = &m->hparams;
    int64_t n_embd = hp->n_embd, e = hp->n_expert, ff = hp->n_ff_exp;
    layer_weights *l = &m->weights.layers[layer];
    if (model_bind(m, &l->ffn_gate_inp, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){n_embd, e}, err,
                   "blk.%d.ffn_gate_inp.weight", layer) ||
        model_bind(m, &l->ffn_gate_up_exps, BIND_OPTIONAL, TENSOR_MATRIX, 3, (int64_t[]){n_embd, 2 * ff, e}, err,
                   "blk.%d.ffn_gate_up_exps.weight", layer))
        return -1;
    /* gate and up fused in one matrix, or two */
    if (!l->ffn_gate_up_exps.name &&
        (model_bind(m, &l->ffn_gate_exps, BIND_REQUIRED, TENSOR_MATRIX, 3, (int64_t[]){n_embd, ff, e}, err,
                    "blk.%d.ffn_gate_exps.weight", layer) ||
         model_bind(m, &l->ffn_up_exps, BIND_REQUIRED, TENSOR_MATRIX, 3, (int64_t[]){n_embd, ff, e}, err,
                    "blk.%d.ffn_up_exps.weight", layer)))
        return -1;
    if (model_bind(m, &l->ffn_down_exps, BIND_REQUIRED, TENSOR_MATRIX, 3, (int64_t[]){ff, n_embd, e}, err,
                   "blk.%d.ffn_down_exps.weight", layer))
        return -1;
    return 0;
}

int model_refuse_tensor(const model *m, int layer, const char *suffix, const char *layer_kind, const char *because,
                        bmoe_error *err)
{
    char name[160];
    snprintf(name, sizeof name, "blk.%d.%s", layer, suffix);
    if (!gguf_find_tensor(m->file, name))
        return 0;
    return error_set(err, "model: %s layer %d is %s (%s), but the file has tensor '%s'", m->hparams.architecture,
                     layer, layer_kind, because, name);
}

int model_bind_shared_expert(model *m, int layer, bmoe_error *err)
{
    int64_t n_embd = m->hparams.n_embd, fs = m->hparams.n_ff_shexp;
    layer_weights *l = &m->weights.layers[layer];
    if (model_bind(m, &l->ffn_gate_shexp, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){n_embd, fs}, err,
                   "blk.%d.ffn_gate_shexp.weight", layer) ||
        model_bind(m, &l->ffn_up_shexp, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){n_embd, fs}, err,
                   "blk.%d.ffn_up_shexp.weight", layer) ||
        model_bind(m, &l->ffn_down_shexp, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){fs, n_embd}, err,
                   "blk.%d.ffn_down_shexp.weight", layer))
        return -1;
    return 0;
}

int model_bind_dense_ffn(model *m, int layer, bmoe_error *err)
{
    int64_t n_embd = m->hparams.n_embd, ff = m->hparams.layer[layer].n_ff;
    layer_weights *l = &m->weights.layers[layer];
    if (ff <= 0)
        return error_set(err, "model: %s layer %d has a dense FFN but %s.feed_forward_length is 0 there",
                         m->hparams.architecture, layer, m->hparams.architecture);
    if (model_bind(m, &l->ffn_gate, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){n_embd, ff}, err,
                   "blk.%d.ffn_gate.weight", layer) ||
        model_bind(m, &l->ffn_up, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){n_embd, ff}, err,
                   "blk.%d.ffn_up.weight", layer) ||
        model_bind(m, &l->ffn_down, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){ff, n_embd}, err,
                   "blk.%d.ffn_down.weight", layer))
        return -1;
    return 0;
}

/* ---- Run state ---------------------------------------------------------- */

static void *allocate_counted(size_t count, size_t size, bool *failed, size_t *total)
{
    if (count == 0)
        count = 1;
    void *p = calloc(count, size);
    if (!p)
        *failed = true;
    *total += count * size;
    return p;
}

#define allocate(count, size, failed) allocate_counted(count, size, failed, &s->buffer_bytes)

/* Lays out the KV cache (a layer's own size, none without attention or
 * for a layer attending over another's: its offsets are its source's) and
 * the recurrent state (a short-convolution layer's window of L-1 inputs per
 * channel); returns the elements of K and V of the main layers, and with
 * the draft head's block (laid out after them, so that adding its rows
 * moves no other layer's), and the floats of state. */
static void layout_caches(run_state *s, const model *m, size_t k_elements[2], size_t v_elements[2])
{
    const model_hparams *hp = &m->hparams;
    size_t k = 0, v = 0, state = 0, k_main = 0, v_main = 0;
    int64_t mixer = hp->n_mixer_floats;
    for (int32_t il = 0; il < hp->n_layer + hp->n_layer_head; il++) {
        if (il == hp->n_layer) {
            k_main = k;
            v_main = v;
        }
        const layer_hparams *lh = &hp->layer[il];
        bool own_kv = lh->kv_source == il;
        s->kv_k_offset[il] = own_kv ? k : s->kv_k_offset[lh->kv_source];
        s->kv_v_offset[il] = own_kv ? v : s->kv_v_offset[lh->kv_source];
        s->recurrent_offset[il] = state;
        int64_t need = 0;
        if (lh->mixer == MIXER_ATTENTION && own_kv) {
            int64_t k_head, v_head;
            kv_head_strides(s, lh, &k_head, &v_head);
            k += (size_t)k_head * (size_t)lh->n_head_kv;
            v += (size_t)v_head * (size_t)lh->n_head_kv;
            /* gated attention: attn_q gives each head's query and gate */
            if (m->weights.layers[il].attn_q.ne[1] > (int64_t)lh->n_head * lh->head_dim_k)
                need = m->weights.layers[il].attn_q.ne[1];
        } else if (lh->mixer == MIXER_SHORTCONV) {
            state += (size_t)(hp->n_conv_taps - 1) * (size_t)hp->n_embd;
            need = 3 * (int64_t)hp->n_embd;
        } else { /* MIXER_DELTANET: conv window of C channels, then Hv matrices dk x dv */
            int64_t kd = (int64_t)hp->ssm_k_heads * hp->ssm_dk, vd = (int64_t)hp->ssm_v_heads * hp->ssm_dv;
            int64_t channels = 2 * kd + vd;
            state += (size_t)((hp->ssm_conv_taps - 1) * channels + (int64_t)hp->ssm_v_heads * hp->ssm_dk * hp->ssm_dv);
            need = channels + 2 * vd + 2 * (int64_t)hp->ssm_v_heads; /* see deltanet_block */
        }
        if (need > mixer)
            mixer = need;
    }
    s->mixer_floats = mixer;
    k_elements[0] = hp->n_layer_head > 0 ? k_main : k;
    v_elements[0] = hp->n_layer_head > 0 ? v_main : v;
    k_elements[1] = k;
    v_elements[1] = v;
    s->recurrent_floats = state;
}

int run_state_create(run_state *s, const model *m, int32_t n_ctx, int32_t n_ubatch, bool kv_f16,
                     thread_pool *pool, bmoe_error *err)
{
    const model_hparams *hp = &m->hparams;
    memset(s, 0, sizeof *s);
    s->n_ctx = n_ctx;
    s->n_ubatch = n_ubatch;
    s->kv_f16 = kv_f16;
    s->pool = pool;
    s->kernels = kernels_best();
    size_t nu = (size_t)n_ubatch;
    size_t k_used = hp->n_expert_used > 0 ? (size_t)hp->n_expert_used : 1;
    size_t q_dim = (size_t)hp->n_head * (size_t)hp->head_dim_k;
    size_t k_dim = (size_t)hp->n_head_kv * (size_t)hp->head_dim_k;
    size_t v_dim = (size_t)hp->n_head_kv * (size_t)hp->head_dim_v;
    size_t attn_dim = (size_t)hp->n_head * (size_t)hp->head_dim_v;
    size_t n_embd = (size_t)hp->n_embd;
    int n_threads = pool ? thread_pool_capacity(pool) : 1; /* per-thread buffers: for the most threads a job may use */
    bool failed = false;
    bool any_fused = false, separate_router_input = false;
    for (int32_t il = 0; il < hp->n_layer; il++) {
        any_fused |= m->weights.layers[il].ffn_gate_up_exps.name != NULL;
        /* gemma4's router input and MoE beside the MLP; a shared expert beside the MoE */
        separate_router_input |= m->weights.layers[il].ffn_gate_inp_scale.name != NULL ||
                                 m->weights.layers[il].ffn_gate_shexp.name != NULL;
    }

    s->positions = allocate(nu, sizeof(int32_t), &failed);
    s->h = allocate(nu * n_embd, sizeof(float), &failed);
    s->x = allocate(nu * n_embd, sizeof(float), &failed);
    s->q = allocate(nu * q_dim, sizeof(float), &failed);
    s->k = allocate(nu * k_dim, sizeof(float), &failed);
    s->v = allocate(nu * v_dim, sizeof(float), &failed);
    s->attn = allocate(nu * attn_dim, sizeof(float), &failed);
    s->block_out = allocate(nu * n_embd, sizeof(float), &failed);
    s->rope_cache = allocate(nu * (size_t)hp->n_rot, sizeof(float), &failed);
    s->rope_cache_swa = allocate(nu * (size_t)hp->n_rot, sizeof(float), &failed);
    size_t ffn_width = (size_t)(hp->n_ff > hp->n_ff_shexp ? hp->n_ff : hp->n_ff_shexp);
    s->ffn_gate = allocate(nu * ffn_width, sizeof(float), &failed);
    s->ffn_up = allocate(nu * ffn_width, sizeof(float), &failed);
    s->attention_scratch_per_thread = attention_scratch_floats(n_ctx, hp->head_dim_k);
    s->attention_scratch = allocate((size_t)n_threads * (size_t)s->attention_scratch_per_thread, sizeof(float),
                                    &failed);
    for (int i = 0; i < 3; i++)
        s->activations[i] = allocate(nu * m->max_activation_bytes, 1, &failed);
    if (hp->n_expert > 0) {
        size_t rows = nu * k_used;
        size_t e = (size_t)hp->n_expert;
        for (int i = 0; i < 2; i++)
            s->expert_inputs[i] = allocate(rows * m->max_activation_bytes, 1, &failed);
        s->expert_down_inputs = allocate(rows * m->max_activation_bytes, 1, &failed);
        s->router_logits = allocate(nu * e, sizeof(float), &failed);
        s->selected = allocate(rows, sizeof(int32_t), &failed);
        s->selected_weights = allocate(rows, sizeof(float), &failed);
        s->expert_count = allocate(e, sizeof(int32_t), &failed);
        s->expert_first = allocate(e + 1, sizeof(int32_t), &failed);
        s->sorted_token = allocate(rows, sizeof(int32_t), &failed);
        s->row_of = allocate(rows, sizeof(int32_t), &failed);
        s->expert_gate = allocate(rows * (size_t)hp->n_ff_exp * (any_fused ? 2 : 1), sizeof(float), &failed);
        s->expert_up = allocate(rows * (size_t)hp->n_ff_exp, sizeof(float), &failed);
        s->expert_down = allocate(rows * n_embd, sizeof(float), &failed);
        s->jobs = allocate(2 * e, sizeof(matmul_job), &failed);
        s->distinct_experts = allocate(e, sizeof(int32_t), &failed);
        s->expert_residency = allocate(e, sizeof(uint8_t), &failed);
        s->expert_read_bytes = allocate(e, sizeof(uint64_t), &failed);
        s->slot_residency = allocate(k_used, sizeof(uint8_t), &failed);
        s->slot_read_bytes = allocate(k_used, sizeof(uint64_t), &failed);
        s->slot_dropped = allocate(rows, sizeof(uint8_t), &failed);
        if (m->lossy.route_ahead > 0) {
            s->ahead_experts = allocate((size_t)hp->n_layer * k_used, sizeof(int32_t), &failed);
            s->ahead_ready = allocate((size_t)hp->n_layer, sizeof(bool), &failed);
        }
        s->expert_handles = allocate(e, sizeof(expert_handle), &failed);
    }
    if (m->head_activation_bytes > 0) {
        s->head_inputs = allocate(nu * m->head_activation_bytes, 1, &failed);
        s->head_jobs = allocate((size_t)hp->n_head, sizeof(matmul_job), &failed);
    }
    if (separate_router_input) {
        s->x2 = allocate(nu * n_embd, sizeof(float), &failed);
        s->block_out2 = allocate(nu * n_embd, sizeof(float), &failed);
    }
    if (hp->n_per_layer_input > 0) {
        size_t dp = (size_t)hp->n_per_layer_input, all_layers = dp * (size_t)hp->n_layer;
        s->per_layer_input = allocate(nu * all_layers, sizeof(float), &failed);
        s->per_layer_token_row = allocate(all_layers, sizeof(float), &failed);
        s->per_layer_gate = allocate(nu * dp, sizeof(float), &failed);
    }
    /* the draft head's block and input: run_state_enable_head */
    size_t k_elements[2], v_elements[2];
    layout_caches(s, m, k_elements, v_elements);
    if (s->mixer_floats > 0)
        s->mixer = allocate(nu * (size_t)s->mixer_floats, sizeof(float), &failed);
    size_t element = kv_f16 ? sizeof(uint16_t) : sizeof(float);
    size_t cache_bytes = 0; /* reported as kv_bytes and recurrent_floats */
    s->k_cache = allocate_counted(k_elements[0], element, &failed, &cache_bytes);
    s->v_cache = allocate_counted(v_elements[0], element, &failed, &cache_bytes);
    s->kv_bytes = (k_elements[0] + v_elements[0]) * element;
    s->kv_k_bytes = k_elements[0] * element;
    s->head_k_bytes = (k_elements[1] - k_elements[0]) * element;
    s->head_v_bytes = (v_elements[1] - v_elements[0]) * element;
    s->recurrent = allocate_counted(s->recurrent_floats, sizeof(float), &failed, &cache_bytes);
    if (failed) {
        run_state_destroy(s);
        return error_set_status(err, BMOE_ERR_OUT_OF_MEMORY,
                                "context: out of memory for buffers and KV cache (n_ctx %d, n_ubatch %d)", n_ctx,
                         n_ubatch);
    }
    return 0;
}

int run_state_enable_probe(run_state *s, const model *m)
{
    const model_hparams *hp = &m->hparams;
    bool failed = false;
    size_t layers = (size_t)hp->n_layer, k_used = hp->n_expert_used > 0 ? (size_t)hp->n_expert_used : 1;
    s->probe = allocate(layers, sizeof *s->probe, &failed);
    s->probe_input = allocate((size_t)hp->n_embd, sizeof(float), &failed);
    s->probe_previous = allocate(layers * k_used, sizeof(int32_t), &failed);
    s->probe_previous_ready = allocate(layers, sizeof(bool), &failed);
    s->probe_input_layer = -1;
    return failed ? -1 : 0;
}

/* The KV buffer of kept bytes grown by added ones, zeroed: the head's rows
 * before a generation's first evaluated position are never computed (a
 * reused prefix) and are read as they are. NULL when out of memory (the
 * old buffer stays). Its first allocation may be one element for an empty
 * cache (allocate_counted): kept is then 0. */
static void *grow_cache(void *cache, size_t kept, size_t added)
{
    uint8_t *grown = realloc(cache, kept + added);
    if (grown)
        memset(grown + kept, 0, added);
    return grown;
}

int run_state_enable_head(run_state *s, const model *m, bmoe_error *err)
{
    if (s->head_input || m->hparams.n_layer_head == 0)
        return 0;
    size_t input_bytes = (size_t)s->n_ubatch * 2 * (size_t)m->hparams.n_embd * sizeof(float);
    size_t k_bytes = s->kv_k_bytes, v_bytes = s->kv_bytes - s->kv_k_bytes;
    float *input = malloc(input_bytes);
    void *k_cache = input ? grow_cache(s->k_cache, k_bytes, s->head_k_bytes) : NULL;
    if (k_cache)
        s->k_cache = k_cache; /* larger than kv_k_bytes says until V grows too: harmless */
    void *v_cache = k_cache ? grow_cache(s->v_cache, v_bytes, s->head_v_bytes) : NULL;
    if (!v_cache) {
        free(input);
        return error_set_status(err, BMOE_ERR_OUT_OF_MEMORY,
                                "context: out of memory for the draft head's KV cache (%zu bytes for %d positions)",
                                s->head_k_bytes + s->head_v_bytes, s->n_ctx);
    }
    s->v_cache = v_cache;
    s->head_input = input;
    s->buffer_bytes += input_bytes;
    s->kv_k_bytes += s->head_k_bytes;
    s->kv_bytes += s->head_k_bytes + s->head_v_bytes;
    return 0;
}

void run_state_destroy(run_state *s)
{
    void *buffers[] = {s->positions, s->h, s->x, s->q, s->k, s->v, s->attn, s->block_out, s->rope_cache,
                       s->rope_cache_swa, s->ffn_gate, s->ffn_up, s->attention_scratch, s->activations[0],
                       s->activations[1], s->activations[2], s->expert_inputs[0], s->expert_inputs[1], s->expert_down_inputs,
                       s->router_logits, s->selected, s->selected_weights, s->expert_count, s->expert_first,
                       s->sorted_token, s->row_of, s->expert_gate, s->expert_up, s->expert_down, s->jobs,
                       s->distinct_experts, s->expert_handles, s->expert_residency, s->expert_read_bytes,
                       s->slot_residency, s->slot_read_bytes, s->slot_dropped, s->ahead_experts, s->ahead_ready, s->probe, s->probe_input,
                       s->probe_previous, s->probe_previous_ready, s->k_cache, s->v_cache, s->recurrent,
                       s->mixer, s->x2, s->block_out2, s->per_layer_input, s->per_layer_token_row,
                       s->per_layer_gate, s->head_inputs, s->head_jobs, s->head_input};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++)
        free(buffers[i]);
    memset(s, 0, sizeof *s);
}

void run_state_commit(run_state *s)
{
    pages_touch(s->k_cache, s->kv_k_bytes);
    pages_touch(s->v_cache, s->kv_bytes - s->kv_k_bytes);
    pages_touch(s->recurrent, s->recurrent_floats * sizeof(float));
}

void run_state_clear_recurrent(run_state *s)
{
    if (s->recurrent_floats > 0)
        memset(s->recurrent, 0, s->recurrent_floats * sizeof *s->recurrent);
}

/* ---- The experts' place in the file ----------------------------------- */

static void expert_projection_of(const tensor_view *view, expert_projection_source *out)
{
    out->resident = view->data;
    out->shard = view->shard;
    out->file_offset = view->file_offset;
    out->expert_bytes = (uint64_t)view->row_bytes * (uint64_t)view->ne[1];
}

void model_expert_sources(const model *m, expert_layer_source *layers)
{
    for (int il = 0; il < m->hparams.n_layer + m->hparams.n_layer_head; il++) {
        const layer_weights *l = &m->weights.layers[il];
        memset(&layers[il], 0, sizeof layers[il]);
        if (l->ffn_gate_up_exps.name) {
            /* fused: gate_up, then down (the order moe.c asks for them) */
            layers[il].n_projections = 2;
            expert_projection_of(&l->ffn_gate_up_exps, &layers[il].projections[0]);
            expert_projection_of(&l->ffn_down_exps, &layers[il].projections[1]);
            continue;
        }
        if (!l->ffn_gate_exps.name)
            continue;
        const tensor_view *views[3] = {&l->ffn_gate_exps, &l->ffn_up_exps, &l->ffn_down_exps};
        layers[il].n_projections = 3;
        for (int p = 0; p < 3; p++)
            expert_projection_of(views[p], &layers[il].projections[p]);
    }
}

void model_detach_expert_data(model *m)
{
    for (int il = 0; il < m->hparams.n_layer + m->hparams.n_layer_head; il++) {
        layer_weights *l = &m->weights.layers[il];
        l->ffn_gate_exps.data = l->ffn_up_exps.data = l->ffn_gate_up_exps.data = l->ffn_down_exps.data = NULL;
    }
}

void model_each_view(model *m, void (*visit)(void *user, tensor_view *view), void *user)
{
    tensor_view *globals[] = {&m->weights.token_embd, &m->weights.output_norm, &m->weights.output,
                              &m->weights.per_layer_token_embd, &m->weights.per_layer_model_proj,
                              &m->weights.per_layer_proj_norm};
    for (size_t i = 0; i < sizeof globals / sizeof globals[0]; i++)
        if (globals[i]->name)
            visit(user, globals[i]);
    /* layer_weights is tensor views only */
    _Static_assert(sizeof(layer_weights) % sizeof(tensor_view) == 0, "layer_weights holds tensor views only");
    size_t per_layer = sizeof(layer_weights) / sizeof(tensor_view);
    for (int il = 0; il < m->hparams.n_layer; il++) {
        tensor_view *views = (tensor_view *)&m->weights.layers[il];
        for (size_t i = 0; i < per_layer; i++)
            if (views[i].name)
                visit(user, &views[i]);
    }
}

typedef struct relocation {
    model_locate_fn locate;
    void *user;
} relocation;

static void relocate_view(void *user, tensor_view *view)
{
    const relocation *r = user;
    if (!view->data)
        return;
    const void *copy = r->locate(r->user, view->shard, view->file_offset);
    if (copy)
        view->data = copy;
}

void model_relocate_views(model *m, model_locate_fn locate, void *user)
{
    relocation r = {locate, user};
    model_each_view(m, relocate_view, &r);
}
