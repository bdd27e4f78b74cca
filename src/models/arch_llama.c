/* llama (Llama 1/2/3, TinyStories, and Mixtral-style MoE files that use this
 * architecture name): pre-norm blocks, RoPE NORM (GPT-J pairs) with optional
 * per-pair frequency divisors (rope_freqs), plain causal attention, and a
 * dense SiLU-GLU FFN, or, when expert_count > 0, a softmax-routed MoE whose
 * top-K weights are renormalized (a softmax over the K chosen logits). */
#include "bind.h"
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
    /* Mixtral-style files give the experts' width as feed_forward_length
     * (there is no dense FFN) and have no expert_feed_forward_length */
    if ((e == 0 && model_require_positive(m, "feed_forward_length", hp->n_ff, err)) ||
        (e > 0 && (model_read_u32(m, "expert_feed_forward_length", false, (uint32_t)hp->n_ff, 0, 1u << 20,
                                  &hp->n_ff_exp, err) ||
                   model_require_positive(m, "expert_feed_forward_length", hp->n_ff_exp, err))))
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

/* h += attn_output . attention(norm(h)); h += ffn(norm(h)), dense or experts */
static int llama_layer(const model *m, run_state *s, const forward_batch *batch, int il, bmoe_error *err)
{
    return transformer_layer(m, s, batch, il, &llama_moe, NULL, err);
}

int llama_forward(const model *m, run_state *s, const forward_batch *batch, bmoe_error *err)
{
    if (embed_batch(m, s, batch, err) != 0)
        return -1;
    rope_cache_batch(&m->hparams.rope, s->positions, batch->n_tokens, s->rope_cache);
    return forward_layers(m, s, batch, llama_layer, err);
}
