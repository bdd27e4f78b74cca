/* lfm2moe (LFM2-8B-A1B, LFM2-24B-A2B): architectures.md section 7. A hybrid
 * whose layers mix positions either by attention (per-head q/k RMSNorm, NEOX
 * RoPE) or by a gated short convolution: attention.head_count_kv holds one
 * value per layer and 0 marks a convolution layer. The first
 * leading_dense_block_count layers end in a dense SiLU-GLU FFN, the others in
 * a sigmoid-routed MoE whose selection bias chooses the experts but never
 * weighs them. The final norm is the tensor named token_embd_norm. */
#include "bind.h"
#include "model.h"

static const moe_config lfm2moe_moe = {
    .gating = MOE_GATING_SIGMOID,
    .normalize_weights = true, /* fixed for this arch */
    .weights_scale = 0.0f,     /* expert_weights_scale is not read */
    .activation = MOE_SILU_GLU,
};

int lfm2moe_bind(model *m, bmoe_error *err)
{
    if (model_read_common_hparams(m, ROPE_NEOX, err) != 0)
        return -1;
    model_hparams *hp = &m->hparams;
    int32_t gating, leading_dense;
    if (model_require_positive(m, "expert_count", hp->n_expert, err) ||
        model_require_positive(m, "expert_feed_forward_length", hp->n_ff_exp, err) ||
        model_read_u32(m, "expert_gating_func", true, 0, 2, 2, &gating, err) ||
        model_read_u32(m, "leading_dense_block_count", false, 0, 0, (uint32_t)hp->n_layer, &leading_dense, err) ||
        model_read_u32(m, "shortconv.l_cache", false, 3, 2, 64, &hp->n_conv_taps, err))
        return -1;
    if (hp->head_dim_k != hp->head_dim_v || hp->head_dim_k != hp->n_rot)
        return error_set(err, "model: lfm2moe needs key_length == value_length == rope.dimension_count "
                         "(have %d, %d, %d)", hp->head_dim_k, hp->head_dim_v, hp->n_rot);
    int64_t n_embd = hp->n_embd, d = hp->head_dim_k, taps = hp->n_conv_taps;
    if (model_bind_globals(m, true, "token_embd_norm.weight", err) != 0)
        return -1;
    for (int il = 0; il < hp->n_layer; il++) {
        layer_hparams *lh = &hp->layer[il];
        layer_weights *l = &m->weights.layers[il];
        lh->mixer = lh->n_head_kv == 0 ? MIXER_SHORTCONV : MIXER_ATTENTION;
        lh->ffn = il < leading_dense ? FFN_DENSE : FFN_MOE;
        if (lh->mixer == MIXER_SHORTCONV) {
            if (model_refuse_tensor(m, il, "attn_q.weight", "a convolution layer", "attention.head_count_kv is 0 there",
                                    err) ||
                model_bind(m, &l->attn_norm, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){n_embd}, err,
                           "blk.%d.attn_norm.weight", il) ||
                model_bind(m, &l->shortconv_in_proj, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){n_embd, 3 * n_embd},
                           err, "blk.%d.shortconv.in_proj.weight", il) ||
                model_bind(m, &l->shortconv_conv, BIND_REQUIRED, TENSOR_VECTOR, 2, (int64_t[]){taps, n_embd}, err,
                           "blk.%d.shortconv.conv.weight", il) ||
                model_bind(m, &l->shortconv_out_proj, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){n_embd, n_embd},
                           err, "blk.%d.shortconv.out_proj.weight", il))
                return -1;
        } else if (model_refuse_tensor(m, il, "shortconv.in_proj.weight", "an attention layer",
                              "attention.head_count_kv is not 0 there", err) ||
                   model_bind_attention(m, il, false, err) ||
                   model_bind(m, &l->attn_q_norm, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){d}, err,
                              "blk.%d.attn_q_norm.weight", il) ||
                   model_bind(m, &l->attn_k_norm, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){d}, err,
                              "blk.%d.attn_k_norm.weight", il)) {
            return -1;
        }
        if (model_bind(m, &l->ffn_norm, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){n_embd}, err,
                       "blk.%d.ffn_norm.weight", il))
            return -1;
        if (lh->ffn == FFN_DENSE) {
            if (model_refuse_tensor(m, il, "ffn_gate_inp.weight", "a dense layer", "below leading_dense_block_count",
                                    err) ||
                model_bind_dense_ffn(m, il, err))
                return -1;
        } else if (model_refuse_tensor(m, il, "ffn_gate.weight", "an MoE layer", "not below leading_dense_block_count",
                                       err) ||
                   model_bind_experts(m, il, err) ||
                   model_bind(m, &l->exp_probs_b, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){hp->n_expert}, err,
                              "blk.%d.exp_probs_b.bias", il)) {
            return -1;
        }
    }
    return 0;
}

/* h += attention(norm(h)) or shortconv(norm(h)); h += ffn(norm(h)), dense in
 * the leading layers, experts after */
static int lfm2moe_layer(const model *m, run_state *s, const forward_batch *batch, int il, bmoe_error *err)
{
    const model_hparams *hp = &m->hparams;
    const layer_weights *l = &m->weights.layers[il];
    int n = batch->n_tokens;
    /* the last layer goes on with the rows that give logits only */
    int first = forward_first_row(s, batch, il, hp->n_layer), rows = n - first;
    /* the mixer runs on every row (the cache and the window need them all),
     * its output for the rows kept */
    if (hp->layer[il].mixer == MIXER_ATTENTION) {
        attention_mixer(s, hp, l, il, n, NULL);
        if (rows > 0)
            attention_output(s, hp, l, first, rows);
    } else {
        rmsnorm_rows(s->x, s->h, &l->attn_norm, n, hp->n_embd, hp->rms_eps);
        shortconv_block(s, m, il, n, first, s->block_out);
    }
    if (rows == 0)
        return 0;
    vector_add(s->h + (int64_t)first * hp->n_embd, s->block_out, rows * hp->n_embd);
    return ffn_residual(s, m, l, il, &lfm2moe_moe, first, rows, err);
}

int lfm2moe_forward(const model *m, run_state *s, const forward_batch *batch, bmoe_error *err)
{
    if (embed_batch(m, s, batch, err) != 0)
        return -1;
    rope_cache_batch(&m->hparams.rope, s->positions, batch->n_tokens, s->rope_cache);
    return forward_layers(m, s, batch, lfm2moe_layer, err);
}
