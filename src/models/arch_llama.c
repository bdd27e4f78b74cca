/* llama (Llama 1/2/3, TinyStories, and Mixtral-style MoE files that use this
 * architecture name): pre-norm blocks, RoPE NORM (GPT-J pairs) with optional
 * per-pair frequency divisors (rope_freqs), plain causal attention, and a
 * dense SiLU-GLU FFN, or a softmax-routed MoE with renormalized weights when
 * expert_count > 0. */
#include "model.h"

static const moe_config llama_moe = {
    .gating = MOE_GATING_SOFTMAX,
    .normalize_weights = true,
    .weights_scale = 0.0f,
    .activation = MOE_SILU_GLU,
};

int llama_bind(model *m, bmoe_error *err)
{
    if (model_read_common_hparams(m, ROPE_NORM, err) != 0)
        return -1;
    model_hparams *hp = &m->hparams;
    int64_t n_embd = hp->n_embd, ff = hp->n_ff, e = hp->n_expert;
    if ((e == 0 && model_require_positive(m, "feed_forward_length", hp->n_ff, err)) ||
        (e > 0 && model_require_positive(m, "expert_feed_forward_length", hp->n_ff_exp, err)))
        return -1;
    tensor_view rope_freqs;
    if (model_bind_globals(m, true, "output_norm.weight", err) != 0 ||
        model_bind(m, &rope_freqs, BIND_OPTIONAL, TENSOR_VECTOR, 1, (int64_t[]){hp->n_rot / 2}, err,
                   "rope_freqs.weight", 0))
        return -1;
    hp->rope.freq_factors = rope_freqs.data;
    hp->rope_swa.freq_factors = rope_freqs.data;
    for (int il = 0; il < hp->n_layer; il++) {
        layer_weights *l = &m->weights.layers[il];
        if (model_bind_attention(m, il, false, err) ||
            model_bind(m, &l->ffn_norm, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){n_embd}, err,
                       "blk.%d.ffn_norm.weight", il))
            return -1;
        if (e == 0) {
            if (model_bind(m, &l->ffn_gate, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){n_embd, ff}, err,
                           "blk.%d.ffn_gate.weight", il) ||
                model_bind(m, &l->ffn_up, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){n_embd, ff}, err,
                           "blk.%d.ffn_up.weight", il) ||
                model_bind(m, &l->ffn_down, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){ff, n_embd}, err,
                           "blk.%d.ffn_down.weight", il))
                return -1;
        } else if (model_bind_experts(m, il, err) != 0) {
            return -1;
        }
    }
    return 0;
}

int llama_forward(const model *m, run_state *s, const forward_batch *batch, bmoe_error *err)
{
    const model_hparams *hp = &m->hparams;
    int n = batch->n_tokens;
    int64_t n_embd = hp->n_embd;
    static const tensor_view no_norm;

    if (embed_batch(m, s, batch, err) != 0)
        return -1;
    rope_cache_batch(&hp->rope, s->positions, n, s->rope_cache);

    for (int il = 0; il < hp->n_layer; il++) {
        const layer_weights *l = &m->weights.layers[il];
        if (forward_check_abort(s, il, err) != 0)
            return -1;

        /* attention: x = norm(h); q, k, v = W x + b; rope; attend */
        attention_qkv(s, hp, l, n);
        norm_rope_heads(s->q, &no_norm, &hp->rope, s->rope_cache, n, hp->n_head, hp->head_dim_k, hp->rms_eps);
        norm_rope_heads(s->k, &no_norm, &hp->rope, s->rope_cache, n, hp->n_head_kv, hp->head_dim_k, hp->rms_eps);
        kv_cache_store(s, hp, il, n);
        attention_layer(s, hp, il, n, NULL);

        /* the last layer goes on with the rows that give logits only */
        int first = forward_first_row(s, batch, il, hp->n_layer), rows = n - first;
        if (rows == 0)
            continue;
        float *h = s->h + (int64_t)first * n_embd;

        /* h = h + attn_output . attn */
        attention_output(s, hp, l, first, rows);
        vector_add(h, s->block_out, rows * n_embd);

        /* h = h + ffn(norm(h)) */
        rmsnorm_rows(s->x, h, &l->ffn_norm, rows, n_embd, hp->rms_eps);
        if (hp->n_expert > 0) {
            if (moe_layer(s, m, l, il, &llama_moe, s->x, NULL, s->positions + first, rows, s->block_out, err) != 0)
                return -1;
        } else {
            ffn_glu(s, &l->ffn_gate, &l->ffn_up, &l->ffn_down, MOE_SILU_GLU, s->x, rows, s->block_out);
        }
        vector_add(h, s->block_out, rows * n_embd);
    }
    output_logits(m, s, batch);
    return 0;
}
