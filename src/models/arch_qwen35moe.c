/* qwen35moe (Qwen3.5 / Qwen3.6 MoE, e.g. Qwen3.5-35B-A3B): architectures.md
 * section 8. A hybrid of Gated-DeltaNet layers (a causal convolution over
 * the q/k/v projection, then a decaying delta-rule state per V head, output
 * gated by silu(z)) and, every full_attention_interval-th layer, gated full
 * attention (query and output gate interleaved per head in attn_q, IMROPE,
 * which for text is NEOX on the first R dims). Every layer ends in a
 * softmax-routed MoE (renormalized) beside a shared expert gated by a
 * sigmoid; the FFN input norm is the tensor named post_attention_norm.
 *
 * The first nextn block (Qwen3.5's MTP module) is bound as the draft head:
 * a gated full-attention layer like the others after the input fusion of
 * head_forward_layers, with its own KV cache and experts. */
#include <math.h>
#include <stdio.h>

#include "bind.h"
#include "model.h"

static const moe_config qwen35moe_moe = {
    .gating = MOE_GATING_SOFTMAX,
    .normalize_weights = true, /* fixed for this arch */
    .weights_scale = 0.0f,
    .activation = MOE_SILU_GLU,
};

/* IMROPE for text (architectures.md 1.5): pair i rotates with the position
 * unless its sector maps to stream 3, whose position is 0 for text: an
 * infinite divisor gives it angle 0, the identity. */
static int read_imrope(model *m, bmoe_error *err)
{
    model_hparams *hp = &m->hparams;
    char key[128];
    snprintf(key, sizeof key, "%s.rope.dimension_sections", hp->architecture);
    const gguf_kv *kv = gguf_find_kv(m->file, key);
    if (!kv || kv->type != GGUF_TYPE_ARRAY || kv->array_count != 4 || kv->array_type == GGUF_TYPE_STRING ||
        kv->array_type == GGUF_TYPE_ARRAY)
        return error_set(err, "model: key '%s' must be 4 integers", key);
    int64_t sections[4], total = 0;
    for (int i = 0; i < 4; i++) {
        sections[i] = gguf_array_int(kv, (uint64_t)i);
        if (sections[i] < 0 || sections[i] > MODEL_MAX_ROPE_PAIRS)
            return error_set(err, "model: key '%s' holds %lld, out of range", key, (long long)sections[i]);
        total += sections[i];
    }
    if (total == 0)
        return error_set(err, "model: key '%s' is all zeros", key);
    if (hp->n_rot / 2 > MODEL_MAX_ROPE_PAIRS)
        return error_set(err, "model: rope.dimension_count %d exceeds %d pairs", hp->n_rot, MODEL_MAX_ROPE_PAIRS);
    for (int i = 0; i < hp->n_rot / 2; i++) {
        int64_t sector = i % total;
        bool text_stream = (sector % 3 == 1 && sector < 3 * sections[1]) ||
                           (sector % 3 == 2 && sector < 3 * sections[2]) ||
                           (sector % 3 == 0 && sector < 3 * sections[0]);
        hp->rope_pair_factors[i] = text_stream ? 1.0f : INFINITY;
    }
    hp->rope.freq_factors = hp->rope_pair_factors;
    return 0;
}

/* Which layers are Gated DeltaNet: attention.recurrent_layers (bools, true =
 * linear) or else every full_attention_interval-th layer attends. */
static int read_layer_pattern(model *m, bmoe_error *err)
{
    model_hparams *hp = &m->hparams;
    char key[128];
    snprintf(key, sizeof key, "%s.attention.recurrent_layers", hp->architecture);
    const gguf_kv *kv = gguf_find_kv(m->file, key);
    if (kv) {
        if (kv->type != GGUF_TYPE_ARRAY || kv->array_count != (uint64_t)hp->n_layer ||
            kv->array_type == GGUF_TYPE_STRING || kv->array_type == GGUF_TYPE_ARRAY)
            return error_set(err, "model: key '%s' must be %d booleans", key, hp->n_layer);
        for (int il = 0; il < hp->n_layer; il++)
            hp->layer[il].mixer = gguf_array_int(kv, (uint64_t)il) ? MIXER_DELTANET : MIXER_ATTENTION;
        return 0;
    }
    int32_t interval;
    if (model_read_u32(m, "full_attention_interval", false, 4, 1, MODEL_MAX_LAYERS, &interval, err) != 0)
        return -1;
    for (int il = 0; il < hp->n_layer; il++)
        hp->layer[il].mixer = (il + 1) % interval == 0 ? MIXER_ATTENTION : MIXER_DELTANET;
    return 0;
}

#define LAYER_PATTERN_KEYS "full_attention_interval / attention.recurrent_layers"

static int bind_gated_attention(model *m, int il, bmoe_error *err)
{
    const layer_hparams *lh = &m->hparams.layer[il];
    layer_weights *l = &m->weights.layers[il];
    int64_t n_embd = m->hparams.n_embd, d = lh->head_dim_k;
    int64_t q_dim = (int64_t)lh->n_head * d, kv_dim = (int64_t)lh->n_head_kv * d;
    if (model_refuse_tensor(m, il, "attn_qkv.weight", "a full-attention layer", LAYER_PATTERN_KEYS, err) ||
        model_bind(m, &l->attn_q, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){n_embd, 2 * q_dim}, err,
                   "blk.%d.attn_q.weight", il) ||
        model_bind(m, &l->attn_k, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){n_embd, kv_dim}, err,
                   "blk.%d.attn_k.weight", il) ||
        model_bind(m, &l->attn_v, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){n_embd, kv_dim}, err,
                   "blk.%d.attn_v.weight", il) ||
        model_bind(m, &l->attn_q_norm, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){d}, err,
                   "blk.%d.attn_q_norm.weight", il) ||
        model_bind(m, &l->attn_k_norm, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){d}, err,
                   "blk.%d.attn_k_norm.weight", il) ||
        model_bind(m, &l->attn_output, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){q_dim, n_embd}, err,
                   "blk.%d.attn_output.weight", il))
        return -1;
    return 0;
}

static int bind_deltanet(model *m, int il, bmoe_error *err)
{
    const model_hparams *hp = &m->hparams;
    layer_weights *l = &m->weights.layers[il];
    int64_t n_embd = hp->n_embd, hv = hp->ssm_v_heads, dv = hp->ssm_dv;
    int64_t kd = (int64_t)hp->ssm_k_heads * hp->ssm_dk, vd = hv * dv, channels = 2 * kd + vd;
    if (model_refuse_tensor(m, il, "attn_q.weight", "a Gated-DeltaNet layer", LAYER_PATTERN_KEYS, err) ||
        model_bind(m, &l->attn_qkv, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){n_embd, channels}, err,
                   "blk.%d.attn_qkv.weight", il) ||
        model_bind(m, &l->attn_gate, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){n_embd, vd}, err,
                   "blk.%d.attn_gate.weight", il) ||
        model_bind(m, &l->ssm_conv1d, BIND_REQUIRED, TENSOR_VECTOR, 2, (int64_t[]){hp->ssm_conv_taps, channels},
                   err, "blk.%d.ssm_conv1d.weight", il) ||
        model_bind(m, &l->ssm_dt_bias, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){hv}, err, "blk.%d.ssm_dt.bias",
                   il) ||
        model_bind(m, &l->ssm_a, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){hv}, err, "blk.%d.ssm_a", il) ||
        model_bind(m, &l->ssm_beta, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){n_embd, hv}, err,
                   "blk.%d.ssm_beta.weight", il) ||
        model_bind(m, &l->ssm_alpha, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){n_embd, hv}, err,
                   "blk.%d.ssm_alpha.weight", il) ||
        model_bind(m, &l->ssm_norm, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){dv}, err, "blk.%d.ssm_norm.weight",
                   il) ||
        model_bind(m, &l->ssm_out, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){vd, n_embd}, err,
                   "blk.%d.ssm_out.weight", il))
        return -1;
    return 0;
}

int qwen35moe_bind(model *m, bmoe_error *err)
{
    if (model_read_common_hparams(m, ROPE_NEOX, err) != 0 || read_imrope(m, err) != 0 ||
        read_layer_pattern(m, err) != 0)
        return -1;
    model_hparams *hp = &m->hparams;
    int32_t inner;
    if (model_require_positive(m, "expert_count", hp->n_expert, err) ||
        model_require_positive(m, "expert_feed_forward_length", hp->n_ff_exp, err) ||
        model_read_u32(m, "expert_shared_feed_forward_length", true, 0, 1, 1u << 20, &hp->n_ff_shexp, err) ||
        model_read_u32(m, "ssm.conv_kernel", true, 0, 2, 64, &hp->ssm_conv_taps, err) ||
        model_read_u32(m, "ssm.state_size", true, 0, 1, DELTANET_MAX_HEAD, &hp->ssm_dk, err) ||
        model_read_u32(m, "ssm.group_count", true, 0, 1, 1u << 12, &hp->ssm_k_heads, err) ||
        model_read_u32(m, "ssm.time_step_rank", true, 0, 1, 1u << 12, &hp->ssm_v_heads, err) ||
        model_read_u32(m, "ssm.inner_size", true, 0, 1, 1u << 20, &inner, err))
        return -1;
    if (hp->head_dim_k != hp->head_dim_v)
        return error_set(err, "model: qwen35moe needs key_length == value_length (have %d, %d)", hp->head_dim_k,
                         hp->head_dim_v);
    if (inner % hp->ssm_v_heads != 0 || inner / hp->ssm_v_heads != hp->ssm_dk)
        return error_set(err, "model: qwen35moe ssm.inner_size %d must be ssm.time_step_rank %d x ssm.state_size %d",
                         inner, hp->ssm_v_heads, hp->ssm_dk);
    hp->ssm_dv = hp->ssm_dk;
    if (hp->ssm_v_heads % hp->ssm_k_heads != 0)
        return error_set(err, "model: qwen35moe ssm.time_step_rank %d is not a multiple of ssm.group_count %d",
                         hp->ssm_v_heads, hp->ssm_k_heads);
    int64_t n_embd = hp->n_embd;
    if (model_bind_globals(m, true, "output_norm.weight", err) != 0)
        return -1;
    if (model_bind_head(m, "nextn.shared_head_norm.weight", BIND_OPTIONAL, err) != 0)
        return -1;
    if (hp->n_layer_head > 0) /* the head's block is a full-attention one */
        hp->layer[hp->n_layer].mixer = MIXER_ATTENTION;
    for (int il = 0; il < hp->n_layer + hp->n_layer_head; il++) {
        layer_weights *l = &m->weights.layers[il];
        hp->layer[il].ffn = FFN_MOE;
        if (model_bind(m, &l->attn_norm, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){n_embd}, err,
                       "blk.%d.attn_norm.weight", il) ||
            (hp->layer[il].mixer == MIXER_ATTENTION ? bind_gated_attention(m, il, err) : bind_deltanet(m, il, err)) ||
            model_bind(m, &l->ffn_norm, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){n_embd}, err,
                       "blk.%d.post_attention_norm.weight", il) ||
            model_bind_experts(m, il, err) ||
            model_bind(m, &l->ffn_gate_inp_shexp, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){n_embd}, err,
                       "blk.%d.ffn_gate_inp_shexp.weight", il) ||
            model_bind_shared_expert(m, il, err))
            return -1;
    }
    return 0;
}

/* One layer: gated attention or Gated DeltaNet, then the experts and the
 * gated shared expert. */
static int qwen35moe_layer(const model *m, run_state *s, const forward_batch *batch, int il, bmoe_error *err)
{
    const model_hparams *hp = &m->hparams;
    int n = batch->n_tokens;
    int64_t n_embd = hp->n_embd;
    const layer_hparams *lh = &hp->layer[il];
    const layer_weights *l = &m->weights.layers[il];
    /* the last layer goes on with the rows that give logits only */
    int first = forward_first_row(s, batch, il, hp->n_layer), rows = n - first;

    /* o = gated attention(norm(h)) or Gated DeltaNet(norm(h)), every row
     * (the cache and the state need them all), o for the rows kept */
    if (lh->mixer == MIXER_ATTENTION) {
        attention_qkv_gated(s, hp, l, il, n);
        norm_rope_heads(s->q, &l->attn_q_norm, &hp->rope, s->rope_cache, n, lh->n_head, lh->head_dim_k,
                        hp->rms_eps);
        norm_rope_heads(s->k, &l->attn_k_norm, &hp->rope, s->rope_cache, n, lh->n_head_kv, lh->head_dim_k,
                        hp->rms_eps);
        kv_cache_store(s, hp, il, n);
        attention_layer(s, hp, il, n, NULL);
        attention_gate(s, hp, il, n);
        if (rows > 0)
            attention_output(s, hp, l, first, rows);
    } else {
        rmsnorm_rows(s->x, s->h, &l->attn_norm, n, n_embd, hp->rms_eps);
        deltanet_block(s, m, il, n, first, s->block_out);
    }
    if (rows == 0)
        return 0;
    float *h = s->h + (int64_t)first * n_embd;
    vector_add(h, s->block_out, rows * n_embd);

    /* h = h + moe(x) + sigmoid(gate . x) shared(x), x = norm(h; post_attention_norm) */
    rmsnorm_rows(s->x, h, &l->ffn_norm, rows, n_embd, hp->rms_eps);
    if (moe_layer(s, m, l, il, &qwen35moe_moe, s->x, NULL, s->positions + first, rows, s->block_out, err) != 0)
        return -1;
    shared_expert_gated(s, l, s->x, rows, s->block_out2);
    vector_add(s->block_out, s->block_out2, rows * n_embd);
    vector_add(h, s->block_out, rows * n_embd);
    return 0;
}

int qwen35moe_forward(const model *m, run_state *s, const forward_batch *batch, bmoe_error *err)
{
    const model_hparams *hp = &m->hparams;
    int n = batch->n_tokens;

    if (embed_batch(m, s, batch, err) != 0)
        return -1;
    rope_cache_batch(&hp->rope, s->positions, n, s->rope_cache);
    return forward_layers(m, s, batch, qwen35moe_layer, err);
}

int qwen35moe_head_forward(const model *m, run_state *s, const forward_batch *batch, const float *hidden,
                           float *hidden_out, bmoe_error *err)
{
    return head_forward_layers(m, s, batch, hidden, qwen35moe_layer, hidden_out, err);
}
