/* gpt-oss (gpt-oss-20b / 120b): architectures.md section 5. Attention with
 * q/k/v/output biases, NEOX RoPE with YaRN, alternating sliding-window and
 * full layers, and per-head attention sinks; the FFN input norm is the tensor
 * named post_attention_norm; the MoE picks the top-K raw router logits (router
 * bias included) and softmaxes only those, experts with biases and the
 * clamped SwiGLU. */
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

int gpt_oss_forward(const model *m, run_state *s, const forward_batch *batch, bmoe_error *err)
{
    const model_hparams *hp = &m->hparams;
    int n = batch->n_tokens;
    int64_t n_embd = hp->n_embd;
    static const tensor_view no_norm;

    if (embed_batch(m, s, batch, err) != 0)
        return -1;
    /* full and sliding-window layers rotate with different bases */
    rope_cache_batch(&hp->rope, s->positions, n, s->rope_cache);
    rope_cache_batch(&hp->rope_swa, s->positions, n, s->rope_cache_swa);

    for (int il = 0; il < hp->n_layer; il++) {
        const layer_weights *l = &m->weights.layers[il];
        if (forward_check_abort(s, il, err) != 0)
            return -1;
        bool swa = hp->layer_is_swa[il];
        const rope_config *rope = swa ? &hp->rope_swa : &hp->rope;
        const float *rope_cache = swa ? s->rope_cache_swa : s->rope_cache;

        /* attention with biases, YaRN rope and sinks */
        attention_qkv(s, hp, l, n);
        norm_rope_heads(s->q, &no_norm, rope, rope_cache, n, hp->n_head, hp->head_dim_k, hp->rms_eps);
        norm_rope_heads(s->k, &no_norm, rope, rope_cache, n, hp->n_head_kv, hp->head_dim_k, hp->rms_eps);
        kv_cache_store(s, hp, il, n);
        attention_layer(s, hp, il, n, l->attn_sinks.data);

        /* the last layer goes on with the rows that give logits only */
        int first = forward_first_row(s, batch, il, hp->n_layer), rows = n - first;
        if (rows == 0)
            continue;
        float *h = s->h + (int64_t)first * n_embd;

        /* h = h + attn_output . attn + bias */
        attention_output(s, hp, l, first, rows);
        vector_add(h, s->block_out, rows * n_embd);

        /* h = h + moe(norm(h; post_attention_norm)) */
        rmsnorm_rows(s->x, h, &l->ffn_norm, rows, n_embd, hp->rms_eps);
        if (moe_layer(s, m, l, il, &gpt_oss_moe, s->x, NULL, s->positions + first, rows, s->block_out, err) != 0)
            return -1;
        vector_add(h, s->block_out, rows * n_embd);
    }
    output_logits(m, s, batch);
    return 0;
}
