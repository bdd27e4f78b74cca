/* olmoe (OLMoE-1B-7B): architectures.md section 4. Pre-norm blocks whose
 * q and k projections are RMS-normalized over their whole width (all heads
 * jointly, one weight per element) before NEOX RoPE, plain causal attention,
 * and a softmax-routed MoE whose top-K probabilities are used as they are
 * (never renormalized). feed_forward_length is the experts' width; the
 * output head is never tied. */
#include "bind.h"
#include "model.h"

static const moe_config olmoe_moe = {
    .gating = MOE_GATING_SOFTMAX,
    .normalize_weights = false, /* fixed for this arch */
    .weights_scale = 0.0f,
    .activation = MOE_SILU_GLU,
};

int olmoe_bind(model *m, bmoe_error *err)
{
    if (model_read_common_hparams(m, ROPE_NEOX, err) != 0)
        return -1;
    model_hparams *hp = &m->hparams;
    if (hp->head_dim_k != hp->head_dim_v || hp->head_dim_k != hp->n_rot)
        return error_set(err, "model: olmoe needs key_length == value_length == rope.dimension_count "
                         "(have %d, %d, %d)", hp->head_dim_k, hp->head_dim_v, hp->n_rot);
    if (model_require_positive(m, "expert_count", hp->n_expert, err) ||
        model_require_positive(m, "feed_forward_length", hp->n_ff, err))
        return -1;
    /* the experts' width is feed_forward_length; there is no dense FFN */
    hp->n_ff_exp = hp->n_ff;
    int64_t n_embd = hp->n_embd;
    int64_t q_dim = (int64_t)hp->n_head * hp->head_dim_k, k_dim = (int64_t)hp->n_head_kv * hp->head_dim_k;
    if (model_bind_globals(m, false, "output_norm.weight", err) != 0)
        return -1;
    for (int il = 0; il < hp->n_layer; il++) {
        layer_weights *l = &m->weights.layers[il];
        if (model_bind_attention(m, il, false, err) ||
            model_bind(m, &l->attn_q_norm, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){q_dim}, err,
                       "blk.%d.attn_q_norm.weight", il) ||
            model_bind(m, &l->attn_k_norm, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){k_dim}, err,
                       "blk.%d.attn_k_norm.weight", il) ||
            model_bind(m, &l->ffn_norm, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){n_embd}, err,
                       "blk.%d.ffn_norm.weight", il) ||
            model_bind_experts(m, il, err))
            return -1;
    }
    return 0;
}

/* h += attn_output . attention(q, k normalized over their whole width);
 * h += moe(norm(h; ffn_norm)) */
static int olmoe_layer(const model *m, run_state *s, const forward_batch *batch, int il, bmoe_error *err)
{
    static const tensor_view no_head_norm = {0};
    const model_hparams *hp = &m->hparams;
    const layer_hparams *lh = &hp->layer[il];
    const layer_weights *l = &m->weights.layers[il];
    int n = batch->n_tokens;
    int64_t q_dim = (int64_t)lh->n_head * lh->head_dim_k, k_dim = (int64_t)lh->n_head_kv * lh->head_dim_k;
    attention_qkv(s, hp, l, n);
    rmsnorm_rows(s->q, s->q, &l->attn_q_norm, n, q_dim, hp->rms_eps);
    rmsnorm_rows(s->k, s->k, &l->attn_k_norm, n, k_dim, hp->rms_eps);
    norm_rope_heads(s->q, &no_head_norm, &hp->rope, s->rope_cache, n, lh->n_head, lh->head_dim_k, hp->rms_eps);
    norm_rope_heads(s->k, &no_head_norm, &hp->rope, s->rope_cache, n, lh->n_head_kv, lh->head_dim_k, hp->rms_eps);
    kv_cache_store(s, hp, il, n);
    attention_layer(s, hp, il, n, NULL);
    /* the last layer goes on with the rows that give logits only */
    int first = forward_first_row(s, batch, il, hp->n_layer), rows = n - first;
    if (rows == 0)
        return 0;
    attention_output(s, hp, l, first, rows);
    vector_add(s->h + (int64_t)first * hp->n_embd, s->block_out, rows * hp->n_embd);
    return ffn_residual(s, m, l, il, &olmoe_moe, first, rows, err);
}

int olmoe_forward(const model *m, run_state *s, const forward_batch *batch, bmoe_error *err)
{
    if (embed_batch(m, s, batch, err) != 0)
        return -1;
    rope_cache_batch(&m->hparams.rope, s->positions, batch->n_tokens, s->rope_cache);
    return forward_layers(m, s, batch, olmoe_layer, err);
}
