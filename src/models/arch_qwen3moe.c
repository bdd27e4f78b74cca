/* qwen3moe (Qwen3-30B-A3B, Qwen3-235B-A22B): architectures.md section 2.
 * Pre-norm blocks with per-head q/k RMSNorm before NEOX RoPE, plain causal
 * attention, and a softmax-routed MoE whose top-K weights are always
 * renormalized. */
#include <math.h>

#include "bind.h"
#include "model.h"

static const moe_config qwen3moe_moe = {
    .gating = MOE_GATING_SOFTMAX,
    .normalize_weights = true, /* fixed for this arch, whatever the file says */
    .weights_scale = 0.0f,
    .activation = MOE_SILU_GLU,
};

int qwen3moe_bind(model *m, bmoe_error *err)
{
    if (model_read_common_hparams(m, ROPE_NEOX, err) != 0)
        return -1;
    model_hparams *hp = &m->hparams;
    if (hp->head_dim_k != hp->head_dim_v || hp->head_dim_k != hp->n_rot)
        return error_set(err, "model: qwen3moe needs key_length == value_length == rope.dimension_count "
                         "(have %d, %d, %d)", hp->head_dim_k, hp->head_dim_v, hp->n_rot);
    if (model_require_positive(m, "expert_count", hp->n_expert, err) ||
        model_require_positive(m, "expert_feed_forward_length", hp->n_ff_exp, err))
        return -1;
    int64_t n_embd = hp->n_embd, d = hp->head_dim_k;
    if (model_bind_globals(m, true, "output_norm.weight", err) != 0)
        return -1;
    for (int il = 0; il < hp->n_layer; il++) {
        layer_weights *l = &m->weights.layers[il];
        if (model_bind_attention(m, il, false, err) ||
            model_bind(m, &l->attn_q_norm, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){d}, err,
                       "blk.%d.attn_q_norm.weight", il) ||
            model_bind(m, &l->attn_k_norm, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){d}, err,
                       "blk.%d.attn_k_norm.weight", il) ||
            model_bind(m, &l->ffn_norm, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){n_embd}, err,
                       "blk.%d.ffn_norm.weight", il) ||
            model_bind_experts(m, il, err))
            return -1;
    }
    return 0;
}

/* h += attn_output . attention(norm(h)) with q/k head norms; h += moe(norm(h)) */
static int qwen3moe_layer(const model *m, run_state *s, const forward_batch *batch, int il, bmoe_error *err)
{
    return transformer_layer(m, s, batch, il, &qwen3moe_moe, NULL, err);
}

int qwen3moe_forward(const model *m, run_state *s, const forward_batch *batch, bmoe_error *err)
{
    if (embed_batch(m, s, batch, err) != 0)
        return -1;
    rope_cache_batch(&m->hparams.rope, s->positions, batch->n_tokens, s->rope_cache);
    return forward_layers(m, s, batch, qwen3moe_layer, err);
}
