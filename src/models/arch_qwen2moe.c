/* qwen2moe (Qwen1.5-MoE-A2.7B, Qwen2-57B-A14B): architectures.md section 3.
 * Pre-norm blocks whose attention has q/k/v biases and no head norms, NEOX
 * RoPE, plain causal attention. The FFN is a softmax-routed MoE whose top-K
 * probabilities are used as they are (never renormalized, whatever the file
 * says), beside a shared expert scaled by sigmoid(ffn_gate_inp_shexp . x).
 * The output head is never tied. */
#include "bind.h"
#include "model.h"

static const moe_config qwen2moe_moe = {
    .gating = MOE_GATING_SOFTMAX,
    .normalize_weights = false, /* fixed for this arch */
    .weights_scale = 0.0f,
    .activation = MOE_SILU_GLU,
};

int qwen2moe_bind(model *m, bmoe_error *err)
{
    if (model_read_common_hparams(m, ROPE_NEOX, err) != 0)
        return -1;
    model_hparams *hp = &m->hparams;
    if (hp->head_dim_k != hp->head_dim_v || hp->head_dim_k != hp->n_rot)
        return error_set(err, "model: qwen2moe needs key_length == value_length == rope.dimension_count "
                         "(have %d, %d, %d)", hp->head_dim_k, hp->head_dim_v, hp->n_rot);
    /* the shared expert is as wide as the dense FFN when the key is absent */
    if (model_require_positive(m, "expert_count", hp->n_expert, err) ||
        model_require_positive(m, "expert_feed_forward_length", hp->n_ff_exp, err) ||
        model_read_u32(m, "expert_shared_feed_forward_length", false, (uint32_t)hp->n_ff, 0, 1u << 20,
                       &hp->n_ff_shexp, err) ||
        model_require_positive(m, "expert_shared_feed_forward_length", hp->n_ff_shexp, err))
        return -1;
    int64_t n_embd = hp->n_embd;
    if (model_bind_globals(m, false, "output_norm.weight", err) != 0)
        return -1;
    for (int il = 0; il < hp->n_layer; il++) {
        layer_weights *l = &m->weights.layers[il];
        if (model_bind_attention(m, il, false, err) != 0)
            return -1;
        const tensor_view *biases[3] = {&l->attn_q_bias, &l->attn_k_bias, &l->attn_v_bias};
        const char *names[3] = {"attn_q.bias", "attn_k.bias", "attn_v.bias"};
        for (int i = 0; i < 3; i++)
            if (!biases[i]->name)
                return error_set(err, "model: qwen2moe layer %d lacks tensor 'blk.%d.%s'", il, il, names[i]);
        if (model_bind(m, &l->ffn_norm, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){n_embd}, err,
                       "blk.%d.ffn_norm.weight", il) ||
            model_bind_experts(m, il, err) ||
            model_bind(m, &l->ffn_gate_inp_shexp, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){n_embd}, err,
                       "blk.%d.ffn_gate_inp_shexp.weight", il) ||
            model_bind_shared_expert(m, il, err))
            return -1;
    }
    return 0;
}

/* h += attn_output . attention(norm(h)) with q/k/v biases;
 * h += moe(x) + sigmoid(gate_shexp . x) shared(x), x = norm(h; ffn_norm) */
static int qwen2moe_layer(const model *m, run_state *s, const forward_batch *batch, int il, bmoe_error *err)
{
    const model_hparams *hp = &m->hparams;
    const layer_weights *l = &m->weights.layers[il];
    int n = batch->n_tokens;
    int64_t n_embd = hp->n_embd;
    attention_mixer(s, hp, l, il, n, NULL);
    /* the last layer goes on with the rows that give logits only */
    int first = forward_first_row(s, batch, il, hp->n_layer), rows = n - first;
    if (rows == 0)
        return 0;
    attention_output(s, hp, l, first, rows);
    float *h = s->h + (int64_t)first * n_embd;
    vector_add(h, s->block_out, rows * n_embd);

    rmsnorm_rows(s->x, h, &l->ffn_norm, rows, n_embd, hp->rms_eps);
    if (moe_layer(s, m, l, il, &qwen2moe_moe, s->x, NULL, s->positions + first, rows, s->block_out, err) != 0)
        return -1;
    shared_expert_gated(s, l, s->x, rows, s->block_out2);
    vector_add(s->block_out, s->block_out2, rows * n_embd);
    vector_add(h, s->block_out, rows * n_embd);
    return 0;
}

int qwen2moe_forward(const model *m, run_state *s, const forward_batch *batch, bmoe_error *err)
{
    if (embed_batch(m, s, batch, err) != 0)
        return -1;
    rope_cache_batch(&m->hparams.rope, s->positions, batch->n_tokens, s->rope_cache);
    return forward_layers(m, s, batch, qwen2moe_layer, err);
}
