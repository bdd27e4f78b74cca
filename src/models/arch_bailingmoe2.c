/* bailingmoe2 (Ling/Ring 2.0, e.g. Ling-mini-2.0): architectures.md section
 * 10. Pre-norm blocks whose attention projects q, k and v with one fused
 * matrix (no biases), normalizes q and k per head and rotates only the first
 * rope.dimension_count dims of each head (NEOX pairs). The first
 * leading_dense_block_count layers end in a dense SiLU-GLU FFN, the others in
 * routed experts (gating, normalization and scale from the keys; the
 * selection bias and the expert groups choose, never weigh) plus an ungated
 * shared expert. The output head is never tied.
 *
 * The first of the trailing nextn_predict_layers blocks is the draft head
 * (--mtp): after the input fusion of head_forward_layers, one MoE layer like
 * the others, then the block's layer_output_norm (Ling's MTP layer ends in
 * its final_layernorm, which the converter names so) and the model's output
 * matrix. That norm is the head's last: its logits read it, as a
 * nextn.shared_head_norm elsewhere, so it is bound in that role; Ling's
 * checkpoints have no shared_head norm (a nextn.shared_head_norm tensor would
 * stay unread). nextn.shared_head_head and nextn.embed_tokens are read where
 * a file has them, as llama.cpp's loader allows. */
#include <stdio.h>

#include "bind.h"
#include "model.h"

/* The shared expert's width. llama.cpp expects expert_shared_feed_forward_length
 * (or the experts' width) times expert_shared_count, while the converter
 * writes the total into the key: the two agree for one shared expert only,
 * so the tensor says which, and any other width is an error. */
static int read_shared_width(model *m, int layer, int32_t shared_count, bmoe_error *err)
{
    model_hparams *hp = &m->hparams;
    int32_t per_expert;
    if (model_read_u32(m, "expert_shared_feed_forward_length", false, (uint32_t)hp->n_ff_exp, 1, 1u << 20,
                       &per_expert, err))
        return -1;
    char name[64];
    snprintf(name, sizeof name, "blk.%d.ffn_gate_shexp.weight", layer);
    const gguf_tensor *gate = gguf_find_tensor(m->file, name);
    if (!gate)
        return error_set(err, "model: bailingmoe2 layer %d lacks tensor '%s'", layer, name);
    int64_t width = gate->ne[1];
    if (width != (int64_t)per_expert * shared_count && width != per_expert)
        return error_set(err, "model: tensor '%s' is %lld wide, but bailingmoe2.expert_shared_feed_forward_length %d "
                         "and expert_shared_count %d give %lld", name, (long long)width, per_expert, shared_count,
                         (long long)per_expert * shared_count);
    hp->n_ff_shexp = (int32_t)width;
    return 0;
}

int bailingmoe2_bind(model *m, bmoe_error *err)
{
    if (model_read_common_hparams(m, ROPE_NEOX, err) != 0)
        return -1;
    model_hparams *hp = &m->hparams;
    int32_t leading_dense, shared_count;
    if (model_require_positive(m, "expert_count", hp->n_expert, err) ||
        model_read_u32(m, "expert_feed_forward_length", true, 0, 1, 1u << 20, &hp->n_ff_exp, err) ||
        model_read_u32(m, "expert_shared_count", true, 0, 1, 64, &shared_count, err) ||
        model_read_u32(m, "leading_dense_block_count", false, 0, 0, (uint32_t)hp->n_layer, &leading_dense, err) ||
        model_read_expert_weighting(m, true, EXPERT_GATING_SIGMOID, EXPERT_GATINGS_SOFTMAX_SIGMOID, err))
        return -1;
    if (hp->head_dim_k != hp->head_dim_v)
        return error_set(err, "model: bailingmoe2 needs key_length == value_length (have %d, %d)", hp->head_dim_k,
                         hp->head_dim_v);
    if (leading_dense < hp->n_layer && read_shared_width(m, leading_dense, shared_count, err) != 0)
        return -1;
    int64_t n_embd = hp->n_embd, d = hp->head_dim_k;
    if (model_bind_globals(m, false, "output_norm.weight", err) != 0 ||
        model_bind_head(m, "layer_output_norm.weight", BIND_REQUIRED, err) != 0)
        return -1;
    for (int il = 0; il < hp->n_layer + hp->n_layer_head; il++) {
        layer_weights *l = &m->weights.layers[il];
        hp->layer[il].ffn = il < leading_dense ? FFN_DENSE : FFN_MOE;
        if (model_bind_fused_qkv(m, il, err) ||
            model_bind(m, &l->attn_q_norm, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){d}, err,
                       "blk.%d.attn_q_norm.weight", il) ||
            model_bind(m, &l->attn_k_norm, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){d}, err,
                       "blk.%d.attn_k_norm.weight", il) ||
            model_bind(m, &l->ffn_norm, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){n_embd}, err,
                       "blk.%d.ffn_norm.weight", il))
            return -1;
        if (hp->layer[il].ffn == FFN_DENSE) {
            if (model_refuse_tensor(m, il, "ffn_gate_inp.weight", "a dense layer", "below leading_dense_block_count",
                                    err) ||
                model_bind_dense_ffn(m, il, err))
                return -1;
        } else if (model_refuse_tensor(m, il, "ffn_gate.weight", "an MoE layer", "not below leading_dense_block_count",
                                       err) ||
                   model_bind_experts(m, il, err) ||
                   model_bind(m, &l->exp_probs_b, BIND_OPTIONAL, TENSOR_VECTOR, 1, (int64_t[]){hp->n_expert}, err,
                              "blk.%d.exp_probs_b.bias", il) ||
                   model_bind_shared_expert(m, il, err)) {
            return -1;
        }
    }
    return 0;
}
