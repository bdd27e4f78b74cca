/* Reading the hyperparameters from the GGUF metadata: the keys every
 * architecture here shares (model_read_common_hparams) and the readers an
 * architecture's bind function calls for its own. Each key is range-checked
 * here and named in the error, so that the buffer sizes and the forward pass
 * can trust every value. */
#include "hparams.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/text.h"
#include "model.h"

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

/* "softmax (1) or sigmoid (2)": the gatings of the mask accepted, none left out */
static void name_gatings(uint32_t accepted, char *out, size_t size)
{
    static const char *const names[] = {"none", "softmax", "sigmoid", "softmax of the chosen", "sqrt(softplus)"};
    size_t used = 0;
    out[0] = '\0';
    for (int gating = 1; gating < (int)(sizeof names / sizeof names[0]); gating++)
        if (accepted & EXPERT_GATING_BIT(gating) && used < size)
            used += (size_t)snprintf(out + used, size - used, "%s%s (%d)", used > 0 ? " or " : "", names[gating],
                                     gating);
}

int model_read_expert_weighting(model *m, bool gating_required, int32_t gating_default, uint32_t accepted,
                                bmoe_error *err)
{
    model_hparams *hp = &m->hparams;
    char key[128];
    arch_key(m, "expert_weights_norm", key, sizeof key);
    hp->expert_weights_norm = false;
    if (gguf_find_kv(m->file, key) && !gguf_get_bool(m->file, key, &hp->expert_weights_norm))
        return error_set(err, "model: key '%s' is not a boolean", key);
    if (read_f32(m, "expert_weights_scale", false, 0.0f, &hp->expert_weights_scale, err) ||
        read_u32(m, "expert_gating_func", gating_required, (uint32_t)gating_default, 0, 31, &hp->expert_gating_func,
                 err))
        return -1;
    if (!(accepted & EXPERT_GATING_BIT(hp->expert_gating_func))) {
        char names[128];
        name_gatings(accepted, names, sizeof names);
        arch_key(m, "expert_gating_func", key, sizeof key);
        return error_set(err, "model: key '%s' = %d: %s routes by %s", key, hp->expert_gating_func,
                         hp->architecture, names);
    }
    if (hp->expert_gating_func == EXPERT_GATING_NONE)
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
