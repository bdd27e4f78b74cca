/* glm4moe (GLM-4.5, GLM-4.5-Air, GLM-4.6): no section of architectures.md;
 * the facts are llama.cpp's (its glm4-moe graph and loader). Pre-norm blocks
 * whose attention has q/k/v biases, per-head q/k RMSNorm where the file has
 * the norms (the 355B model; Air has none), and NEOX RoPE on the first
 * rope.dimension_count dims of each head; the FFN input norm is the tensor
 * named post_attention_norm. The first leading_dense_block_count layers end
 * in a dense SiLU-GLU FFN, the others in routed experts (sigmoid unless
 * expert_gating_func says otherwise, a required selection bias that chooses
 * but never weighs, the keys' normalization and scale, expert groups when
 * the keys ask) plus expert_shared_count ungated shared experts of the
 * experts' width as one. The output head may be tied.
 *
 * The first of the trailing nextn_predict_layers blocks is the draft head
 * (--mtp): after the input fusion of head_forward_layers, one MoE layer like
 * the others, then nextn.shared_head_norm and the head's logits. GLM-4.5
 * files carry the block's own nextn.embed_tokens and nextn.shared_head_head
 * (copies of the model's, which stand in where they are absent); llama.cpp's
 * glm4-moe MTP graph reads them so. */
#include "bind.h"
#include "model.h"

/* llama.cpp switches to multi-axis RoPE when rope.dimension_sections holds
 * anything but zeros (the vision variants); bmoe has text positions only. */
static int refuse_rope_sections(const model *m, bmoe_error *err)
{
    const gguf_kv *sections = gguf_find_kv(m->file, "glm4moe.rope.dimension_sections");
    if (!sections || sections->type != GGUF_TYPE_ARRAY || sections->array_type == GGUF_TYPE_STRING ||
        sections->array_type == GGUF_TYPE_ARRAY)
        return 0;
    for (uint64_t i = 0; i < sections->array_count; i++)
        if (gguf_array_int(sections, i) != 0)
            return error_set(err, "model: glm4moe.rope.dimension_sections asks for multi-axis RoPE (a vision "
                             "model), which bmoe does not run");
    return 0;
}

int glm4moe_bind(model *m, bmoe_error *err)
{
    if (model_read_common_hparams(m, ROPE_NEOX, err) != 0)
        return -1;
    model_hparams *hp = &m->hparams;
    int32_t leading_dense, shared_count;
    if (model_require_positive(m, "expert_count", hp->n_expert, err) ||
        model_read_u32(m, "expert_feed_forward_length", true, 0, 1, 1u << 20, &hp->n_ff_exp, err) ||
        model_read_u32(m, "expert_shared_count", true, 0, 0, 64, &shared_count, err) ||
        model_read_u32(m, "leading_dense_block_count", false, 0, 0, (uint32_t)hp->n_layer, &leading_dense, err) ||
        model_read_expert_weighting(m, false, EXPERT_GATING_SIGMOID, EXPERT_GATINGS_SOFTMAX_SIGMOID, err) || refuse_rope_sections(m, err))
        return -1;
    if (hp->head_dim_k != hp->head_dim_v)
        return error_set(err, "model: glm4moe needs key_length == value_length (have %d, %d)", hp->head_dim_k,
                         hp->head_dim_v);
    hp->n_ff_shexp = hp->n_ff_exp * shared_count;
    int64_t n_embd = hp->n_embd, d = hp->head_dim_k;
    if (model_bind_globals(m, true, "output_norm.weight", err) != 0 ||
        model_bind_head(m, "nextn.shared_head_norm.weight", BIND_OPTIONAL, err) != 0)
        return -1;
    for (int il = 0; il < hp->n_layer + hp->n_layer_head; il++) {
        layer_weights *l = &m->weights.layers[il];
        hp->layer[il].ffn = il < leading_dense ? FFN_DENSE : FFN_MOE;
        if (model_bind_attention(m, il, false, err) ||
            model_bind(m, &l->attn_q_norm, BIND_OPTIONAL, TENSOR_VECTOR, 1, (int64_t[]){d}, err,
                       "blk.%d.attn_q_norm.weight", il) ||
            model_bind(m, &l->attn_k_norm, BIND_OPTIONAL, TENSOR_VECTOR, 1, (int64_t[]){d}, err,
                       "blk.%d.attn_k_norm.weight", il) ||
            model_bind(m, &l->ffn_norm, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){n_embd}, err,
                       "blk.%d.post_attention_norm.weight", il))
            return -1;
        if (hp->layer[il].ffn == FFN_DENSE) {
            if (model_refuse_tensor(m, il, "ffn_gate_inp.weight", "a dense layer", "below leading_dense_block_count",
                                    err) ||
                model_bind_dense_ffn(m, il, err))
                return -1;
            continue;
        }
        if (model_refuse_tensor(m, il, "ffn_gate.weight", "an MoE layer", "not below leading_dense_block_count",
                                err) ||
            model_bind_experts(m, il, err) ||
            model_bind(m, &l->exp_probs_b, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){hp->n_expert}, err,
                       "blk.%d.exp_probs_b.bias", il) ||
            (shared_count > 0 && model_bind_shared_expert(m, il, err)))
            return -1;
    }
    return 0;
}
