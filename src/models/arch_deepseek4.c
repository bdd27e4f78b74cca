/* deepseek4 (DeepSeek-V4): architectures.md section 11. The residual stream
 * is hc_count copies of the hidden state ("hyper-connections"); before the
 * attention and before the FFN a learned, per-token mix collapses them into
 * the block's input, and after the block they are remixed by a
 * Sinkhorn-normalized matrix plus the block's output. The attention has
 * low-rank queries (attn_q_a, its norm, attn_q_b) normalized per head
 * without a weight, one shared KV head (attn_kv) that is both key and value,
 * NORM RoPE on the last n_rot dimensions of each head, attention sinks and a
 * sliding window; the rotation is undone on the output's rotated part before
 * a grouped low-rank output projection. The FFN routes by sqrt(softplus)
 * scores with a selection bias, plus one shared expert, both with a clamped
 * SwiGLU; the first hash_layer_count layers take their experts from a fixed
 * token-id table instead (weighed by the router's scores of them, without
 * the bias). The output head collapses the streams with its own mix.
 *
 * Compressed KV (attention.compress_ratios): a ratio-0 layer attends over
 * the raw sliding window only. A compressed layer also pools every block of
 * `ratio` tokens into one compressed entry once the block is complete (a
 * per-dimension softmax over the tokens' gate scores weighs their kv
 * values, then the compressor's norm, its tail rotated at the block's first
 * position) and attends over the window plus the compressed entries of the
 * complete blocks; its RoPE uses compress_rope_freq_base (and the file's
 * YaRN). Ratio 128 pools the block's own 128 tokens and attends to every
 * complete block. Ratio 4 pools 8 tokens, the previous block's through the
 * first half of the compressor's kv and gate and this block's through the
 * second, and attends to at most indexer.top_k entries: the ones the
 * lightning indexer scores highest, sum over its heads h of w_h * relu(q_h .
 * k) with its own compressor's keys (the same pooling over indexer.key_length
 * dimensions), its queries from the low-rank query through
 * indexer.attn_q_b, the weights w from indexer.proj. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bind.h"
#include "model.h"

/* the RoPE pairing: NORM, on each head's last n_rot dimensions */
#define DEEPSEEK4_ROPE ROPE_NORM

/* Clamps at or below this are no clamp (the reference's rule). */
#define SWIGLU_CLAMP_EPS 1e-6f

/* Largest hc_count: a token's mixing weights live on the stack. */
#define HC_MAX 8

/* A float key given as a scalar (every layer) or as an array of at least
 * n_layer values; fallback for every layer when absent. */
static int read_layer_f32(const model *m, const char *suffix, bool required, const float *fallback, float *out,
                          bmoe_error *err)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", m->hparams.architecture, suffix);
    int n_layer = m->hparams.n_layer;
    const gguf_kv *kv = gguf_find_kv(m->file, key);
    if (!kv) {
        if (required)
            return error_set(err, "model: missing key '%s'", key);
        for (int il = 0; il < n_layer; il++)
            out[il] = fallback[il];
        return 0;
    }
    if (kv->type != GGUF_TYPE_ARRAY) {
        float value;
        if (!gguf_get_float(m->file, key, &value))
            return error_set(err, "model: key '%s' is not a number", key);
        for (int il = 0; il < n_layer; il++)
            out[il] = value;
    } else {
        if (kv->array_type == GGUF_TYPE_STRING || kv->array_type == GGUF_TYPE_ARRAY ||
            kv->array_count < (uint64_t)n_layer)
            return error_set(err, "model: key '%s' must be a number or an array of at least %d numbers", key,
                             n_layer);
        for (int il = 0; il < n_layer; il++)
            out[il] = (float)gguf_array_float(kv, (uint64_t)il);
    }
    for (int il = 0; il < n_layer; il++)
        if (!isfinite(out[il]) || out[il] < 0.0f)
            return error_set(err, "model: key '%s' = %g (layer %d) must be finite and not negative", key,
                             (double)out[il], il);
    return 0;
}

/* attention.compress_ratios: an array with a ratio for every block (0, 4
 * or 128). */
static int read_compress_ratios(model *m, bmoe_error *err)
{
    model_hparams *hp = &m->hparams;
    char key[128];
    snprintf(key, sizeof key, "%s.attention.compress_ratios", hp->architecture);
    const gguf_kv *kv = gguf_find_kv(m->file, key);
    int n_blocks = hp->n_layer + hp->n_layer_nextn;
    if (!kv)
        return error_set(err, "model: missing key '%s'", key);
    if (kv->type != GGUF_TYPE_ARRAY || kv->array_type == GGUF_TYPE_STRING || kv->array_type == GGUF_TYPE_ARRAY ||
        kv->array_count < (uint64_t)n_blocks)
        return error_set(err, "model: key '%s' must be an array of at least %d integers (one per block)", key,
                         n_blocks);
    for (int il = 0; il < hp->n_layer; il++) {
        int64_t ratio = gguf_array_int(kv, (uint64_t)il);
        if (ratio != 0 && ratio != 4 && ratio != 128)
            return error_set(err, "model: %s[%d] = %lld: the compress ratios are 0, 4 or 128", key, il,
                             (long long)ratio);
        hp->compress_ratio[il] = (int32_t)ratio;
    }
    return 0;
}

static int read_deepseek4_hparams(model *m, bmoe_error *err)
{
    model_hparams *hp = &m->hparams;
    const char *a = hp->architecture;
    int32_t n_shared;
    float compress_base;
    if (model_require_positive(m, "expert_count", hp->n_expert, err) ||
        model_read_u32(m, "expert_feed_forward_length", true, 0, 1, 1u << 20, &hp->n_ff_exp, err) ||
        model_read_u32(m, "expert_shared_count", true, 0, 1, 64, &n_shared, err) ||
        model_read_u32(m, "attention.q_lora_rank", true, 0, 1, 1u << 16, &hp->mla_q_lora, err) ||
        model_read_u32(m, "attention.output_group_count", true, 0, 1, 1u << 10, &hp->o_groups, err) ||
        model_read_u32(m, "attention.output_lora_rank", true, 0, 1, 1u << 16, &hp->o_lora, err) ||
        model_read_u32(m, "hyper_connection.count", true, 0, 1, HC_MAX, &hp->hc_count, err) ||
        model_read_u32(m, "hyper_connection.sinkhorn_iterations", true, 0, 1, 1000, &hp->hc_sinkhorn_iterations,
                       err) ||
        model_read_f32(m, "hyper_connection.epsilon", true, 0.0f, &hp->hc_eps, err) ||
        model_read_u32(m, "hash_layer_count", false, 0, 0, (uint32_t)hp->n_layer, &hp->hash_layer_count, err) ||
        model_read_expert_weighting(m, true, EXPERT_GATING_SQRT_SOFTPLUS,
                                    EXPERT_GATING_BIT(EXPERT_GATING_SQRT_SOFTPLUS), err) ||
        read_layer_f32(m, "swiglu_clamp_exp", true, NULL, hp->swiglu_clamp_exp, err) ||
        read_layer_f32(m, "swiglu_clamp_shexp", false, hp->swiglu_clamp_exp, hp->swiglu_clamp_shexp, err) ||
        read_compress_ratios(m, err) ||
        model_read_f32(m, "attention.compress_rope_freq_base", true, 0.0f, &compress_base, err) ||
        model_read_u32(m, "attention.indexer.head_count", true, 0, 1, 1u << 10, &hp->indexer_heads, err) ||
        model_read_u32(m, "attention.indexer.key_length", true, 0, 2, 1u << 16, &hp->indexer_dim, err) ||
        model_read_u32(m, "attention.indexer.top_k", true, 0, 1, 1u << 24, &hp->indexer_top_k, err))
        return -1;
    if (!(compress_base > 0.0f))
        return error_set(err, "model: %s.attention.compress_rope_freq_base %g must be positive", a,
                         (double)compress_base);
    if (hp->n_expert_group > 1)
        return error_set(err, "model: %s.expert_group_count %d: deepseek4 routes without expert groups", a,
                         hp->n_expert_group);
    hp->n_ff_shexp = hp->n_ff_exp * n_shared;

    int32_t d = hp->head_dim_k, r = hp->n_rot;
    if (hp->n_head_kv != 1 || hp->head_dim_v != d)
        return error_set(err, "model: deepseek4 has one KV head that is both key and value: needs "
                         "%s.attention.head_count_kv 1 and value_length = key_length (%d); have %d and %d", a, d,
                         hp->n_head_kv, hp->head_dim_v);
    if (r <= 0 || r >= d || r > 2 * MODEL_MAX_ROPE_PAIRS)
        return error_set(err, "model: deepseek4 needs %s.rope.dimension_count in (0, %d) (the rotated part of each "
                         "head); have %d", a, d, r);
    if (hp->n_head % hp->o_groups != 0)
        return error_set(err, "model: %s.attention.output_group_count %d does not divide head_count %d", a,
                         hp->o_groups, hp->n_head);
    if (model_require_positive(m, "attention.sliding_window", hp->n_swa, err) != 0)
        return -1;
    if (!(hp->hc_eps >= 0.0f))
        return error_set(err, "model: %s.hyper_connection.epsilon %g is negative", a, (double)hp->hc_eps);
    for (int il = 0; il < hp->n_layer; il++)
        hp->layer_is_swa[il] = true;
    /* the raw layers rotate without any scaling, whatever YaRN keys the file
     * has; the compressed layers (rope_swa here) with the file's YaRN at
     * compress_rope_freq_base, its magnitude cancelled as the reference does */
    rope_config file_rope = hp->rope;
    hp->rope = rope_config_default(DEEPSEEK4_ROPE, r, hp->rope.freq_base);
    hp->rope_swa = file_rope;
    hp->rope_swa.freq_base = compress_base;
    hp->rope_swa.attn_factor =
        file_rope.ext_factor != 0.0f ? 1.0f / (1.0f + 0.1f * logf(1.0f / file_rope.freq_scale)) : 1.0f;
    hp->kq_scale = 1.0f / sqrtf((float)d);
    /* rows of run_state.mixer: see deepseek4_rows */
    int64_t hc = hp->hc_count, n_embd = hp->n_embd;
    hp->n_mixer_floats = 2 * hc * n_embd + (2 + hc) * hc + hc + hc * hc + hc + hp->mla_q_lora +
                         (int64_t)hp->o_groups * hp->o_lora;
    return 0;
}

/* The hyper-connection tensors of one mix ("attn" or "ffn") of layer il. */
static int bind_hc(model *m, int il, const char *which, tensor_view *fn, tensor_view *base, tensor_view *scale,
                   bmoe_error *err)
{
    const model_hparams *hp = &m->hparams;
    int64_t hc = hp->hc_count, mix = (2 + hc) * hc;
    char name[64];
    snprintf(name, sizeof name, "blk.%%d.hc_%s_fn.weight", which);
    if (model_bind(m, fn, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){hc * hp->n_embd, mix}, err, name, il))
        return -1;
    snprintf(name, sizeof name, "blk.%%d.hc_%s_base.weight", which);
    if (model_bind(m, base, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){mix}, err, name, il))
        return -1;
    snprintf(name, sizeof name, "blk.%%d.hc_%s_scale.weight", which);
    return model_bind(m, scale, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){3}, err, name, il);
}

static int bind_layer(model *m, int il, bmoe_error *err)
{
    const model_hparams *hp = &m->hparams;
    layer_weights *l = &m->weights.layers[il];
    int64_t n_embd = hp->n_embd, h = hp->n_head, d = hp->head_dim_k, q_lora = hp->mla_q_lora;
    int64_t groups = hp->o_groups, o_lora = hp->o_lora;
    if (model_bind(m, &l->attn_norm, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){n_embd}, err,
                   "blk.%d.attn_norm.weight", il) ||
        model_bind(m, &l->attn_sinks, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){h}, err,
                   "blk.%d.attn_sinks.weight", il) ||
        model_bind(m, &l->attn_q_a, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){n_embd, q_lora}, err,
                   "blk.%d.attn_q_a.weight", il) ||
        model_bind(m, &l->attn_q_a_norm, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){q_lora}, err,
                   "blk.%d.attn_q_a_norm.weight", il) ||
        model_bind(m, &l->attn_q_b, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){q_lora, h * d}, err,
                   "blk.%d.attn_q_b.weight", il) ||
        model_bind(m, &l->attn_kv, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){n_embd, d}, err,
                   "blk.%d.attn_kv.weight", il) ||
        model_bind(m, &l->attn_kv_a_norm, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){d}, err,
                   "blk.%d.attn_kv_a_norm.weight", il) ||
        model_bind(m, &l->attn_output_a, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){h * d / groups, groups * o_lora},
                   err, "blk.%d.attn_output_a.weight", il) ||
        model_bind(m, &l->attn_output_b, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){groups * o_lora, n_embd}, err,
                   "blk.%d.attn_output_b.weight", il) ||
        bind_hc(m, il, "attn", &l->hc_attn_fn, &l->hc_attn_base, &l->hc_attn_scale, err) ||
        bind_hc(m, il, "ffn", &l->hc_ffn_fn, &l->hc_ffn_base, &l->hc_ffn_scale, err) ||
        model_bind(m, &l->ffn_norm, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){n_embd}, err,
                   "blk.%d.ffn_norm.weight", il) ||
        model_bind_experts(m, il, err) ||
        model_bind_shared_expert(m, il, err))
        return -1;
    int64_t ratio = hp->compress_ratio[il], overlap = ratio == 4 ? 2 : 1;
    if (ratio != 0 &&
        (model_bind(m, &l->attn_compressor_kv, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){n_embd, overlap * d}, err,
                    "blk.%d.attn_compressor_kv.weight", il) ||
         model_bind(m, &l->attn_compressor_gate, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){n_embd, overlap * d},
                    err, "blk.%d.attn_compressor_gate.weight", il) ||
         model_bind(m, &l->attn_compressor_ape, BIND_REQUIRED, TENSOR_VECTOR, 2, (int64_t[]){overlap * d, ratio}, err,
                    "blk.%d.attn_compressor_ape.weight", il) ||
         model_bind(m, &l->attn_compressor_norm, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){d}, err,
                    "blk.%d.attn_compressor_norm.weight", il)))
        return -1;
    if (ratio == 4) {
        int64_t hi = hp->indexer_heads, di = hp->indexer_dim;
        if (di < hp->n_rot)
            return error_set(err, "model: %s.attention.indexer.key_length %lld is shorter than rope.dimension_count "
                             "%d (the rotated part of each indexer head)", hp->architecture, (long long)di, hp->n_rot);
        if (model_bind(m, &l->indexer_proj, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){n_embd, hi}, err,
                       "blk.%d.indexer.proj.weight", il) ||
            model_bind(m, &l->indexer_attn_q_b, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){q_lora, hi * di}, err,
                       "blk.%d.indexer.attn_q_b.weight", il) ||
            model_bind(m, &l->indexer_compressor_kv, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){n_embd, 2 * di},
                       err, "blk.%d.indexer_compressor_kv.weight", il) ||
            model_bind(m, &l->indexer_compressor_gate, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){n_embd, 2 * di},
                       err, "blk.%d.indexer_compressor_gate.weight", il) ||
            model_bind(m, &l->indexer_compressor_ape, BIND_REQUIRED, TENSOR_VECTOR, 2, (int64_t[]){2 * di, 4}, err,
                       "blk.%d.indexer_compressor_ape.weight", il) ||
            model_bind(m, &l->indexer_compressor_norm, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){di}, err,
                       "blk.%d.indexer_compressor_norm.weight", il))
            return -1;
    }
    if (il < hp->hash_layer_count) {
        /* the reference has no selection bias on a hash layer */
        if (model_refuse_tensor(m, il, "exp_probs_b.bias", "a hash-routed layer", "below hash_layer_count", err) ||
            model_bind(m, &l->ffn_gate_tid2eid, BIND_REQUIRED, TENSOR_TABLE, 2,
                       (int64_t[]){hp->n_expert_used, hp->n_vocab}, err, "blk.%d.ffn_gate_tid2eid.weight", il))
            return -1;
        const int32_t *table = l->ffn_gate_tid2eid.data;
        for (int64_t i = 0; i < (int64_t)hp->n_expert_used * hp->n_vocab; i++)
            if (table[i] < 0 || table[i] >= hp->n_expert)
                return error_set(err, "model: tensor 'blk.%d.ffn_gate_tid2eid.weight' names expert %d for token %lld, "
                                 "outside [0, %d)", il, (int)table[i], (long long)(i / hp->n_expert_used),
                                 hp->n_expert);
    } else if (model_refuse_tensor(m, il, "ffn_gate_tid2eid.weight", "a router-chosen layer",
                                   "not below hash_layer_count", err) ||
               model_bind(m, &l->exp_probs_b, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){hp->n_expert}, err,
                          "blk.%d.exp_probs_b.bias", il)) {
        return -1;
    }
    /* linear_per_head converts one token's input of every group at once */
    size_t group_inputs = (size_t)groups * activation_row_bytes(l->attn_output_a.type, h * d / groups);
    if (group_inputs > m->head_activation_bytes)
        m->head_activation_bytes = group_inputs;
    return 0;
}

int deepseek4_bind(model *m, bmoe_error *err)
{
    if (model_read_common_hparams(m, DEEPSEEK4_ROPE, err) != 0 || read_deepseek4_hparams(m, err) != 0)
        return -1;
    model_hparams *hp = &m->hparams;
    model_weights *w = &m->weights;
    int64_t hc = hp->hc_count;
    if (model_bind_globals(m, false, "output_norm.weight", err) != 0 ||
        model_bind(m, &w->output_hc_fn, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){hc * hp->n_embd, hc}, err,
                   "output_hc_fn.weight", 0) ||
        model_bind(m, &w->output_hc_base, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){hc}, err,
                   "output_hc_base.weight", 0) ||
        model_bind(m, &w->output_hc_scale, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){1}, err,
                   "output_hc_scale.weight", 0))
        return -1;
    for (int il = 0; il < hp->n_layer; il++)
        if (bind_layer(m, il, err) != 0)
            return -1;
    return 0;
}

/* ---- Forward ------------------------------------------------------------ */

/* A token's row of s->mixer (read_deepseek4_hparams sized it): the hc
 * streams (hc*n_embd, the residual state), their normalized copy
 * (hc*n_embd), the mix's raw values ((2+hc)*hc), the block's post weights
 * (hc) and comb matrix (hc*hc, element [src*hc + dst]), the head's mix (hc),
 * the low-rank query (q_lora) and the grouped output's low-rank values
 * (G*o_lora). */
typedef struct deepseek4_rows {
    float *streams, *flat, *mixes, *post, *comb, *head_mixes, *q_a, *o_a;
} deepseek4_rows;

static deepseek4_rows deepseek4_rows_of(const model_hparams *hp, float *row)
{
    int64_t hc = hp->hc_count, n_embd = hp->n_embd;
    deepseek4_rows r;
    r.streams = row;
    r.flat = r.streams + hc * n_embd;
    r.mixes = r.flat + hc * n_embd;
    r.post = r.mixes + (2 + hc) * hc;
    r.comb = r.post + hc;
    r.head_mixes = r.comb + hc * hc;
    r.q_a = r.head_mixes + hc;
    r.o_a = r.q_a + hp->mla_q_lora;
    return r;
}

/* The doubly stochastic comb of one token from its raw values (in place,
 * element [src*hc + dst]): a softmax over dst for each src, plus eps, then
 * each dst divided by its sum over src; iterations - 1 more rounds of
 * dividing each src by its sum over dst, then each dst by its sum over src.
 * Every sum (in double, as the reference sums rows) has eps added. */
/* Divides each of the hc lines of comb (line i's element j at i * across +
 * j * along) by its sum plus eps. */
static void normalize_lines(float *comb, int hc, int across, int along, float eps)
{
    for (int i = 0; i < hc; i++) {
        double total = 0.0;
        for (int j = 0; j < hc; j++)
            total += comb[i * across + j * along];
        float sum = (float)total + eps;
        for (int j = 0; j < hc; j++)
            comb[i * across + j * along] /= sum;
    }
}

static void sinkhorn(float *comb, int hc, int iterations, float eps)
{
    for (int src = 0; src < hc; src++)
        softmax(comb + src * hc, hc);
    for (int i = 0; i < hc * hc; i++)
        comb[i] += eps;
    for (int round = 0; round < iterations; round++) {
        if (round > 0)
            normalize_lines(comb, hc, hc, 1, eps); /* each src over dst */
        normalize_lines(comb, hc, 1, hc, eps);     /* each dst over src */
    }
}

static float sigmoid_of(float x)
{
    return 1.0f / (1.0f + expf(-x));
}

/* mixes rows (n_mix each) = fn . rmsnorm(streams) for the n tokens. */
static void hc_mixes(run_state *s, const model_hparams *hp, const tensor_view *fn, int n, float *mixes)
{
    int64_t stride = s->mixer_floats, hc_dim = (int64_t)hp->hc_count * hp->n_embd;
    for (int t = 0; t < n; t++) {
        deepseek4_rows r = deepseek4_rows_of(hp, s->mixer + t * stride);
        rmsnorm(r.flat, r.streams, NULL, hc_dim, hp->rms_eps);
    }
    float *flat = deepseek4_rows_of(hp, s->mixer).flat;
    linear(s, flat, stride, n, 1, &fn, &mixes, &stride);
}

/* out row (n_embd) = sum over the streams h of weight[h] * stream h. */
static void hc_collapse(const model_hparams *hp, const float *streams, const float *weight, float *out)
{
    int64_t n_embd = hp->n_embd;
    for (int64_t i = 0; i < n_embd; i++) {
        float sum = streams[i] * weight[0];
        for (int h = 1; h < hp->hc_count; h++)
            sum += streams[h * n_embd + i] * weight[h];
        out[i] = sum;
    }
}

/* Before a block: each token's mix of its streams (fn, scale, base): s->h
 * rows = the streams collapsed by pre = sigmoid(scale0 m + base) + eps; the
 * post weights 2 sigmoid(scale1 m + base) and the Sinkhorn comb kept for
 * hc_post. */
static void hc_pre(run_state *s, const model_hparams *hp, const tensor_view *fn, const tensor_view *base,
                   const tensor_view *scale, int n)
{
    int hc = hp->hc_count;
    int64_t stride = s->mixer_floats;
    hc_mixes(s, hp, fn, n, deepseek4_rows_of(hp, s->mixer).mixes);
    const float *b = base->data, *sc = scale->data;
    for (int t = 0; t < n; t++) {
        deepseek4_rows r = deepseek4_rows_of(hp, s->mixer + t * stride);
        float pre[HC_MAX];
        for (int h = 0; h < hc; h++) {
            pre[h] = sigmoid_of(r.mixes[h] * sc[0] + b[h]) + hp->hc_eps;
            r.post[h] = 2.0f * sigmoid_of(r.mixes[hc + h] * sc[1] + b[hc + h]);
        }
        for (int i = 0; i < hc * hc; i++)
            r.comb[i] = r.mixes[2 * hc + i] * sc[2] + b[2 * hc + i];
        sinkhorn(r.comb, hc, hp->hc_sinkhorn_iterations, hp->hc_eps);
        hc_collapse(hp, r.streams, pre, s->h + (int64_t)t * hp->n_embd);
    }
    forward_trace_op(s, "MUL_MAT", "hc_pre");
}

/* After a block: stream dst = post[dst] * block_out + sum over src of
 * comb[src][dst] * stream src, for the n tokens (in place: each element's
 * old values are read before any is written). */
static void hc_post(run_state *s, const model_hparams *hp, const float *block_out, int n)
{
    int hc = hp->hc_count;
    int64_t n_embd = hp->n_embd, stride = s->mixer_floats;
    for (int t = 0; t < n; t++) {
        deepseek4_rows r = deepseek4_rows_of(hp, s->mixer + t * stride);
        const float *x = block_out + t * n_embd;
        for (int64_t i = 0; i < n_embd; i++) {
            float old[HC_MAX];
            for (int src = 0; src < hc; src++)
                old[src] = r.streams[src * n_embd + i];
            for (int dst = 0; dst < hc; dst++) {
                float sum = x[i] * r.post[dst];
                for (int src = 0; src < hc; src++)
                    sum += old[src] * r.comb[src * hc + dst];
                r.streams[dst * n_embd + i] = sum;
            }
        }
    }
    forward_trace_op(s, "ADD", "hc_post");
}

/* Most tokens one compressed entry pools: a ratio-128 block. */
#define COMPRESS_MAX_POOL 128

/* One compressor of a compressed layer: its ratio, the width of its entries
 * (D for the attention's, Di for the indexer's), where its kv values and
 * gate scores start in row(p) (2*dim of each at ratio 4, the previous
 * block's half then this block's; dim at ratio 128) and its norm. */
typedef struct compressor {
    int64_t ratio, dim, kv, score;
    const float *norm;
} compressor;

/* Entry b of compressor c from the rows of its tokens (row(p) at rows + p *
 * row_floats): for each dimension i, a softmax over the pooled tokens'
 * scores[i] weighs their kv values[i]: at ratio 4 the 8 tokens 4b-4..4b+3
 * (the previous block's through the first half, -inf before position 0),
 * at ratio 128 the block's own 128; then the norm, and RoPE of the tail at
 * the block's first position. */
static void compress_block(const model_hparams *hp, const float *rows, int64_t row_floats, const compressor *c,
                           int64_t b, float *out)
{
    int64_t ratio = c->ratio, dim = c->dim, pooled = ratio == 4 ? 2 * ratio : ratio;
    int64_t first = (b + 1) * ratio - pooled;
    float weights[COMPRESS_MAX_POOL];
    for (int64_t i = 0; i < dim; i++) {
        for (int64_t j = 0; j < pooled; j++) {
            int64_t p = first + j, half = pooled > ratio && j >= ratio ? dim : 0;
            weights[j] = p < 0 ? -INFINITY : rows[p * row_floats + c->score + half + i];
        }
        softmax(weights, pooled);
        double sum = 0.0;
        for (int64_t j = 0; j < pooled; j++) {
            int64_t p = first + j, half = pooled > ratio && j >= ratio ? dim : 0;
            if (p >= 0)
                sum += rows[p * row_floats + c->kv + half + i] * weights[j];
        }
        out[i] = (float)sum;
    }
    rmsnorm(out, out, c->norm, dim, hp->rms_eps);
    float cache[2 * MODEL_MAX_ROPE_PAIRS];
    rope_cache_fill(&hp->rope_swa, (int32_t)(b * ratio), cache);
    rope_apply(&hp->rope_swa, out + dim - hp->n_rot, (int)dim, 1, cache);
}

/* The reference's CPU top-k is std::partial_sort, whose first phase
 * (libstdc++'s heap selection) decides which of equal scores are kept: a
 * token whose indexer weights are all negative scores many entries exactly
 * 0. These three steps follow that selection's sifting order exactly;
 * `above(a, b)` is its comparison, entry a scoring higher than b. */
static bool above(const float *scores, int32_t a, int32_t b)
{
    return scores[a] > scores[b];
}

/* Moves the hole at `hole` of heap[0..length) down to a leaf along the
 * children that rank first, then `value` up from there (libstdc++'s
 * __adjust_heap then __push_heap). */
static void heap_adjust(int32_t *heap, int64_t hole, int64_t length, int32_t value, const float *scores)
{
    int64_t top = hole, child = hole;
    while (child < (length - 1) / 2) {
        child = 2 * (child + 1);
        if (above(scores, heap[child], heap[child - 1]))
            child--;
        heap[hole] = heap[child];
        hole = child;
    }
    if ((length & 1) == 0 && child == (length - 2) / 2) {
        child = 2 * (child + 1);
        heap[hole] = heap[child - 1];
        hole = child - 1;
    }
    int64_t parent = (hole - 1) / 2;
    while (hole > top && above(scores, heap[parent], value)) {
        heap[hole] = heap[parent];
        hole = parent;
        parent = (hole - 1) / 2;
    }
    heap[hole] = value;
}

/* chosen[0..k) = the k of entries 0..n-1 (n > k) the reference's top-k
 * keeps: a heap of the first k with the lowest-ranking one on top, which
 * each later entry scoring strictly higher replaces. */
static void select_top_k(const float *scores, int64_t n, int64_t k, int32_t *chosen)
{
    for (int64_t j = 0; j < k; j++)
        chosen[j] = (int32_t)j;
    for (int64_t parent = (k - 2) / 2; k >= 2 && parent >= 0; parent--)
        heap_adjust(chosen, parent, k, chosen[parent], scores);
    for (int64_t j = k; j < n; j++)
        if (above(scores, (int32_t)j, chosen[0]))
            heap_adjust(chosen, 0, k, (int32_t)j, scores);
}

static int compare_entries(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* One token's work of a compressed layer on the pool, split by thread: the
 * indexer's scores of the visible entries, or the attention of its heads
 * (the one and the other scale with the context: a long one is most of a
 * token's time on a single thread). */
typedef struct compressed_token_run {
    run_state *s;
    const model_hparams *hp;
    int t;
    int64_t p;
    /* the indexer's scores: keys of n_visible entries into s->indexer_scores */
    const float *keys;
    int64_t n_visible;
    /* the heads: over the window's rows and the chosen entries, with the sinks */
    const float *rows, *entries, *sinks;
    int64_t row_floats, n_chosen;
    const int32_t *chosen;
} compressed_token_run;

static void indexer_scores_task(void *context, int thread_index, int n_threads)
{
    const compressed_token_run *r = context;
    int64_t hi = r->hp->indexer_heads, di = r->hp->indexer_dim, n = r->n_visible;
    const float *q = r->s->indexer_q + r->t * hi * di, *w = r->s->indexer_weights + r->t * hi;
    for (int64_t e = n * thread_index / n_threads; e < n * (thread_index + 1) / n_threads; e++) {
        double score = 0.0;
        for (int64_t head = 0; head < hi; head++) {
            double dot = 0.0;
            for (int64_t i = 0; i < di; i++)
                dot += (double)q[head * di + i] * r->keys[e * di + i];
            float relu = dot > 0.0 ? (float)dot : 0.0f;
            score += relu * w[head];
        }
        r->s->indexer_scores[e] = (float)score;
    }
}

/* The compressed entries a ratio-4 layer's token t (at position p) attends
 * to, ascending, into chosen; returns how many. Each of the n_visible
 * entries scores sum over the indexer heads h of w_h * relu(q_h . k): all of
 * them while they are at most top_k, else the top_k highest. */
static int64_t indexer_choose(run_state *s, const model_hparams *hp, const float *keys, int t, int64_t n_visible,
                              int32_t *chosen)
{
    int64_t k = hp->indexer_top_k;
    if (n_visible <= k) {
        for (int64_t e = 0; e < n_visible; e++)
            chosen[e] = (int32_t)e;
        return n_visible;
    }
    compressed_token_run run = {.s = s, .hp = hp, .t = t, .keys = keys, .n_visible = n_visible};
    thread_pool_run(s->pool, indexer_scores_task, &run);
    select_top_k(s->indexer_scores, n_visible, k, chosen);
    qsort(chosen, (size_t)k, sizeof *chosen, compare_entries);
    return k;
}

/* The key (and value) j of a token at position p attending over the raw
 * window from `first` (n_raw rows) and then its compressed entries (those in
 * chosen, or all of them when chosen is NULL). */
static const float *compressed_layer_key(const model_hparams *hp, const float *rows, int64_t row_floats,
                                         int64_t first, int64_t n_raw, const float *entries, const int32_t *chosen,
                                         int64_t j)
{
    if (j < n_raw)
        return rows + (first + j) * row_floats;
    return entries + (chosen ? chosen[j - n_raw] : j - n_raw) * hp->head_dim_k;
}

/* Attention of one head's query q (at position p) over the raw window's
 * keys (the first D floats of each row) and n_chosen compressed entries
 * (chosen, or the first n_chosen when NULL), K = V, with the head's sink,
 * into out (D floats). */
static void attend_compressed(const model_hparams *hp, const float *q, int64_t p, const float *rows,
                              int64_t row_floats, const float *entries, const int32_t *chosen, int64_t n_chosen,
                              float sink, float *scores, float *out)
{
    int64_t d = hp->head_dim_k;
    int64_t first = p - hp->n_swa + 1 > 0 ? p - hp->n_swa + 1 : 0, n_raw = p - first + 1;
    float top = sink;
    for (int64_t j = 0; j < n_raw + n_chosen; j++) {
        const float *k = compressed_layer_key(hp, rows, row_floats, first, n_raw, entries, chosen, j);
        double dot = 0.0;
        for (int64_t i = 0; i < d; i++)
            dot += (double)q[i] * k[i];
        scores[j] = (float)dot * hp->kq_scale;
        if (scores[j] > top)
            top = scores[j];
    }
    double total = exp((double)sink - top);
    for (int64_t i = 0; i < d; i++)
        out[i] = 0.0f;
    for (int64_t j = 0; j < n_raw + n_chosen; j++) {
        const float *v = compressed_layer_key(hp, rows, row_floats, first, n_raw, entries, chosen, j);
        float w = expf(scores[j] - top);
        total += w;
        vector_add_scaled(out, v, w, d);
    }
    vector_scale(out, out, (float)(1.0 / total), d);
}

static void compressed_heads_task(void *context, int thread_index, int n_threads)
{
    const compressed_token_run *r = context;
    int64_t h = r->hp->n_head, d = r->hp->head_dim_k;
    float *scratch = r->s->attention_scratch + (int64_t)thread_index * r->s->attention_scratch_per_thread;
    for (int64_t head = h * thread_index / n_threads; head < h * (thread_index + 1) / n_threads; head++)
        attend_compressed(r->hp, r->s->q + (r->t * h + head) * d, r->p, r->rows, r->row_floats, r->entries,
                          r->chosen, r->n_chosen, r->sinks[head], scratch, r->s->attn + (r->t * h + head) * d);
}

/* The compressed layer il's attention of the n tokens (their queries in
 * s->q, their KV head in s->k) into s->attn: their rows (the KV head, the
 * compressors' projections with ape), the entries their positions
 * complete, and at ratio 4 the indexer's queries and weights; then each
 * token over its window and its compressed entries. */
static void attend_compressed_layer(run_state *s, const model_hparams *hp, const layer_weights *l, int il, int n)
{
    int64_t d = hp->head_dim_k, r = hp->n_rot, ratio = hp->compress_ratio[il];
    int64_t row_floats = s->compress_row_floats[il], overlap = ratio == 4 ? 2 : 1;
    int64_t hi = hp->indexer_heads, di = hp->indexer_dim;
    bool indexed = ratio == 4;
    compressor attention = {ratio, d, d, d + overlap * d, l->attn_compressor_norm.data};
    compressor indexer = {ratio, di, d + 2 * overlap * d, d + 2 * overlap * d + 2 * di,
                          l->indexer_compressor_norm.data};
    /* the batch's positions are consecutive: their rows are one strided run */
    float *layer_rows = s->compress_rows + s->compress_offset[il];
    float *entries = s->compressed + s->compressed_offset[il], *keys = s->compressed + s->indexer_offset[il];
    float *first_row = layer_rows + (int64_t)s->positions[0] * row_floats;
    const tensor_view *w[5] = {&l->attn_compressor_kv, &l->attn_compressor_gate, &l->indexer_compressor_kv,
                               &l->indexer_compressor_gate, &l->indexer_proj};
    float *outs[5] = {first_row + attention.kv, first_row + attention.score, first_row + indexer.kv,
                      first_row + indexer.score, s->indexer_weights};
    linear(s, s->x, hp->n_embd, n, indexed ? 5 : 2, w, outs,
           (int64_t[]){row_floats, row_floats, row_floats, row_floats, hi});
    if (indexed) {
        const tensor_view *q_b = &l->indexer_attn_q_b;
        linear(s, deepseek4_rows_of(hp, s->mixer).q_a, s->mixer_floats, n, 1, &q_b, &s->indexer_q, NULL);
        vector_scale(s->indexer_weights, s->indexer_weights, 1.0f / sqrtf((float)(di * hi)), n * hi);
    }
    for (int t = 0; t < n; t++) {
        int64_t p = s->positions[t];
        float *row = layer_rows + p * row_floats;
        memcpy(row, s->k + t * d, (size_t)d * sizeof(float));
        vector_add(row + attention.score, (const float *)l->attn_compressor_ape.data + (p % ratio) * overlap * d,
                   overlap * d);
        if (indexed) {
            vector_add(row + indexer.score, (const float *)l->indexer_compressor_ape.data + (p % ratio) * 2 * di,
                       2 * di);
            rope_apply(&hp->rope_swa, s->indexer_q + t * hi * di + di - r, (int)di, (int)hi,
                       s->rope_cache_swa + t * r);
        }
        if ((p + 1) % ratio == 0) {
            compress_block(hp, layer_rows, row_floats, &attention, p / ratio, entries + (p / ratio) * d);
            if (indexed)
                compress_block(hp, layer_rows, row_floats, &indexer, p / ratio, keys + (p / ratio) * di);
        }
    }
    for (int t = 0; t < n; t++) {
        int64_t p = s->positions[t], n_visible = (p + 1) / ratio, n_chosen = n_visible;
        int32_t *chosen = s->indexer_chosen;
        if (indexed)
            n_chosen = indexer_choose(s, hp, keys, t, n_visible, chosen);
        compressed_token_run run = {.s = s, .hp = hp, .t = t, .p = p, .rows = layer_rows, .entries = entries,
                                    .sinks = l->attn_sinks.data, .row_floats = row_floats, .n_chosen = n_chosen,
                                    .chosen = indexed ? chosen : NULL};
        thread_pool_run(s->pool, compressed_heads_task, &run);
    }
}

/* The attention of layer il over s->h (the collapsed streams) into
 * s->block_out, for the n tokens: over the raw window (ratio 0, through the
 * KV cache), or over the window and the compressed entries. */
static void deepseek4_attention(run_state *s, const model_hparams *hp, const layer_weights *l, int il, int n)
{
    int64_t stride = s->mixer_floats, h = hp->n_head, d = hp->head_dim_k, r = hp->n_rot, nope = d - r;
    int64_t q_lora = hp->mla_q_lora, groups = hp->o_groups, o_lora = hp->o_lora;
    bool compressed = hp->compress_ratio[il] != 0;
    const rope_config *rope = compressed ? &hp->rope_swa : &hp->rope;
    const float *rope_cache = compressed ? s->rope_cache_swa : s->rope_cache;
    deepseek4_rows rows = deepseek4_rows_of(hp, s->mixer);
    rmsnorm_rows(s->x, s->h, &l->attn_norm, n, hp->n_embd, hp->rms_eps);
    const tensor_view *w[2] = {&l->attn_q_a, &l->attn_kv};
    float *outs[2] = {rows.q_a, s->k};
    linear(s, s->x, hp->n_embd, n, 2, w, outs, (int64_t[]){stride, d});
    for (int t = 0; t < n; t++)
        rmsnorm(rows.q_a + t * stride, rows.q_a + t * stride, l->attn_q_a_norm.data, q_lora, hp->rms_eps);
    const tensor_view *q_b = &l->attn_q_b;
    linear(s, rows.q_a, stride, n, 1, &q_b, &s->q, NULL);
    for (int t = 0; t < n; t++) {
        const float *cache = rope_cache + t * r;
        float *q = s->q + t * h * d, *kv = s->k + t * d;
        rmsnorm_heads(q, NULL, d, h, hp->rms_eps);
        rope_apply(rope, q + nope, (int)d, (int)h, cache);
        rmsnorm(kv, kv, l->attn_kv_a_norm.data, d, hp->rms_eps);
        rope_apply(rope, kv + nope, (int)d, 1, cache);
        memcpy(s->v + t * d, kv, (size_t)d * sizeof(float));
    }
    forward_trace_op(s, "MUL_MAT", "q_kv");
    if (!compressed) {
        kv_cache_store(s, hp, il, n);
        attention_layer(s, hp, il, n, l->attn_sinks.data);
    } else {
        attend_compressed_layer(s, hp, l, il, n);
        forward_trace_op(s, "FLASH_ATTN_EXT", "attention_compressed");
    }
    for (int t = 0; t < n; t++)
        rope_undo(rope, s->attn + t * h * d + nope, (int)d, (int)h, rope_cache + t * r);
    /* group g's heads (H/G of them, consecutive) through rows g*o_lora.. of attn_output_a */
    tensor_view grouped = l->attn_output_a;
    grouped.ne[1] = o_lora;
    grouped.ne[2] = groups;
    linear_per_head(s, &grouped, s->attn, h * d, h * d / groups, n, rows.o_a, stride, o_lora);
    const tensor_view *wo_b = &l->attn_output_b;
    linear(s, rows.o_a, stride, n, 1, &wo_b, &s->block_out, NULL);
    forward_trace_op(s, "MUL_MAT", "attn_output");
}

/* The routed experts and the shared expert of layer il on s->x into
 * s->block_out, for the n tokens. */
static int deepseek4_ffn(const model *m, run_state *s, const forward_batch *batch, const layer_weights *l, int il,
                         bmoe_error *err)
{
    int n = batch->n_tokens;
    const model_hparams *hp = &m->hparams;
    float clamp = hp->swiglu_clamp_exp[il], clamp_shared = hp->swiglu_clamp_shexp[il];
    moe_config routing = {
        .gating = MOE_GATING_SQRT_SOFTPLUS,
        .normalize_weights = hp->expert_weights_norm,
        .weights_scale = hp->expert_weights_scale,
        .activation = clamp > SWIGLU_CLAMP_EPS ? MOE_SILU_GLU_CLAMPED : MOE_SILU_GLU,
        .clamp = clamp,
        .expert_table = l->ffn_gate_tid2eid.data,
        .tokens = batch->tokens,
    };
    if (moe_layer(s, m, l, il, &routing, s->x, NULL, s->positions, n, s->block_out, err) != 0)
        return -1;
    const tensor_view *gate_up[2] = {&l->ffn_gate_shexp, &l->ffn_up_shexp};
    float *outs[2] = {s->ffn_gate, s->ffn_up};
    linear(s, s->x, hp->n_embd, n, 2, gate_up, outs, NULL);
    int64_t fs = hp->n_ff_shexp;
    if (clamp_shared > SWIGLU_CLAMP_EPS)
        moe_clamp_glu_inputs(s->ffn_gate, s->ffn_up, n * fs, clamp_shared);
    silu_glu(s->ffn_gate, s->ffn_gate, s->ffn_up, n * fs);
    const tensor_view *down = &l->ffn_down_shexp;
    linear(s, s->ffn_gate, fs, n, 1, &down, &s->block_out2, NULL);
    vector_add(s->block_out, s->block_out2, n * hp->n_embd);
    forward_trace_op(s, "MUL_MAT", "ffn_shexp");
    return 0;
}

static int deepseek4_layer(const model *m, run_state *s, const forward_batch *batch, int il, bmoe_error *err)
{
    const model_hparams *hp = &m->hparams;
    const layer_weights *l = &m->weights.layers[il];
    int n = batch->n_tokens;
    hc_pre(s, hp, &l->hc_attn_fn, &l->hc_attn_base, &l->hc_attn_scale, n);
    deepseek4_attention(s, hp, l, il, n);
    hc_post(s, hp, s->block_out, n);
    hc_pre(s, hp, &l->hc_ffn_fn, &l->hc_ffn_base, &l->hc_ffn_scale, n);
    rmsnorm_rows(s->x, s->h, &l->ffn_norm, n, hp->n_embd, hp->rms_eps);
    if (deepseek4_ffn(m, s, batch, l, il, err) != 0)
        return -1;
    hc_post(s, hp, s->block_out, n);
    return 0;
}

/* The output head's collapse of the streams into s->h: weights sigmoid(
 * scale m + base) + eps of the head's own mix m. */
static void hc_head(const model *m, run_state *s, int n)
{
    const model_hparams *hp = &m->hparams;
    const model_weights *w = &m->weights;
    int hc = hp->hc_count;
    int64_t stride = s->mixer_floats;
    hc_mixes(s, hp, &w->output_hc_fn, n, deepseek4_rows_of(hp, s->mixer).head_mixes);
    const float *base = w->output_hc_base.data, scale = *(const float *)w->output_hc_scale.data;
    for (int t = 0; t < n; t++) {
        deepseek4_rows r = deepseek4_rows_of(hp, s->mixer + t * stride);
        float pre[HC_MAX];
        for (int h = 0; h < hc; h++)
            pre[h] = sigmoid_of(r.head_mixes[h] * scale + base[h]) + hp->hc_eps;
        hc_collapse(hp, r.streams, pre, s->h + (int64_t)t * hp->n_embd);
    }
}

int deepseek4_forward(const model *m, run_state *s, const forward_batch *batch, bmoe_error *err)
{
    const model_hparams *hp = &m->hparams;
    int n = batch->n_tokens;
    int64_t n_embd = hp->n_embd, stride = s->mixer_floats;
    if (embed_batch(m, s, batch, err) != 0)
        return -1;
    rope_cache_batch(&hp->rope, s->positions, n, s->rope_cache);
    rope_cache_batch(&hp->rope_swa, s->positions, n, s->rope_cache_swa);
    /* every stream starts as the token's embedding */
    for (int t = 0; t < n; t++) {
        float *streams = deepseek4_rows_of(hp, s->mixer + t * stride).streams;
        for (int h = 0; h < hp->hc_count; h++)
            memcpy(streams + h * n_embd, s->h + t * n_embd, (size_t)n_embd * sizeof(float));
    }
    for (int il = 0; il < hp->n_layer; il++)
        if (forward_check_abort(s, il, err) != 0 || deepseek4_layer(m, s, batch, il, err) != 0)
            return -1;
    hc_head(m, s, n);
    output_logits(m, s, batch);
    return 0;
}
