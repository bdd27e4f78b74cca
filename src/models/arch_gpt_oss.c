/* gpt-oss (gpt-oss-20b / 120b): architectures.md section 5. Attention with
 * q/k/v/output biases, NEOX RoPE with YaRN, alternating sliding-window and
 * full layers, and per-head attention sinks; the FFN input norm is the tensor
 * named post_attention_norm; the MoE picks the top-K raw router logits (router
 * bias included) and softmaxes only those, experts with biases and the
 * clamped SwiGLU. */
#include "bind.h"
#include "model.h"

static const moe_config gpt_oss_moe = {
    .gating = MOE_GATING_SOFTMAX_WEIGHT,
    .normalize_weights = false,
    .weights_scale = 0.0f,
    .activation = MOE_SWIGLU_OAI,
};

int gpt_oss_bind(model *m, bmoe_error *err)
{
    if (model_read_common_hparams(m, ROPE_NEOX, err) != 0 || model_read_swa_pattern(m, 2, err) != 0)
        return -1;
    model_hparams *hp = &m->hparams;
    if (model_require_positive(m, "attention.sliding_window", hp->n_swa, err) ||
        model_require_positive(m, "expert_count", hp->n_expert, err) ||
        model_require_positive(m, "expert_feed_forward_length", hp->n_ff_exp, err))
        return -1;
    int64_t n_embd = hp->n_embd, e = hp->n_expert, ff = hp->n_ff_exp;
    if (model_bind_globals(m, false, "output_norm.weight", err) != 0)
        return -1;
    for (int il = 0; il < hp->n_layer; il++) {
        layer_weights *l = &m->weights.layers[il];
        if (model_bind_attention(m, il, false, err) ||
            model_bind(m, &l->attn_output_bias, BIND_OPTIONAL, TENSOR_VECTOR, 1, (int64_t[]){n_embd}, err,
                       "blk.%d.attn_output.bias", il) ||
            model_bind(m, &l->attn_sinks, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){hp->n_head}, err,
                       "blk.%d.attn_sinks.weight", il) ||
            model_bind(m, &l->ffn_norm, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){n_embd}, err,
                       "blk.%d.post_attention_norm.weight", il) ||
            model_bind_experts(m, il, err) ||
            model_bind(m, &l->ffn_gate_inp_bias, BIND_OPTIONAL, TENSOR_VECTOR, 1, (int64_t[]){e}, err,
                       "blk.%d.ffn_gate_inp.bias", il) ||
            model_bind(m, &l->ffn_gate_exps_bias, BIND_OPTIONAL, TENSOR_VECTOR, 2, (int64_t[]){ff, e}, err,
                       "blk.%d.ffn_gate_exps.bias", il) ||
            model_bind(m, &l->ffn_up_exps_bias, BIND_OPTIONAL, TENSOR_VECTOR, 2, (int64_t[]){ff, e}, err,
                       "blk.%d.ffn_up_exps.bias", il) ||
            model_bind(m, &l->ffn_down_exps_bias, BIND_OPTIONAL, TENSOR_VECTOR, 2, (int64_t[]){n_embd, e}, err,
                       "blk.%d.ffn_down_exps.bias", il))
            return -1;
    }
    return 0;
}

/* h += attn_output . attention(norm(h)) + bias, with biases, YaRN RoPE and
 * sinks; h += moe(norm(h; post_attention_norm)) */
static int gpt_oss_layer(const model *m, run_state *s, const forward_batch *batch, int il, bmoe_error *err)
{
    return transformer_layer(m, s, batch, il, &gpt_oss_moe, m->weights.layers[il].attn_sinks.data, err);
}

int gpt_oss_forward(const model *m, run_state *s, const forward_batch *batch, bmoe_error *err)
{
    const model_hparams *hp = &m->hparams;
    if (embed_batch(m, s, batch, err) != 0)
        return -1;
    /* full and sliding-window layers rotate with different bases */
    rope_cache_batch(&hp->rope, s->positions, batch->n_tokens, s->rope_cache);
    rope_cache_batch(&hp->rope_swa, s->positions, batch->n_tokens, s->rope_cache_swa);
    return forward_layers(m, s, batch, gpt_oss_layer, err);
}
