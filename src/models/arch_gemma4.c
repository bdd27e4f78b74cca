/* gemma4 (Gemma-4, e.g. Gemma-4-26B-A4B): architectures.md section 6.
 * Sliding-window and full-attention layers of different head sizes and KV
 * head counts (the full ones with proportional RoPE through rope_freqs, and
 * V = K where attn_v is absent), attention scale 1 with q/k RMSNorm and a
 * weightless V norm, norms after the attention and around the FFN branch, a
 * dense GELU MLP in every layer and beside it, where ffn_gate_inp is
 * present, a softmax-routed GELU MoE whose router reads its own input
 * (rmsnorm(h) / sqrt(n_embd) * ffn_gate_inp.scale) and whose experts' outputs
 * carry per-expert scales; embeddings scaled by sqrt(n_embd), an optional
 * per-layer output scale, and the final logits soft-capped. The small dense
 * models add KV sharing (the last shared_kv_layers layers attend over the
 * cache of the last earlier layer of their kind) and per-layer embeddings
 * (a vector per token and layer, from a second embedding table and a
 * projection of the embedding, gating a small residual branch). */
#include <math.h>
#include <stdio.h>

#include "bind.h"
#include "model.h"

static const moe_config gemma4_moe = {
    .gating = MOE_GATING_SOFTMAX,
    .normalize_weights = true,
    .weights_scale = 0.0f,
    .activation = MOE_GELU_GLU,
};

/* A norm weight {n_embd} of layer il. */
static int bind_norm(model *m, tensor_view *view, bool required, const char *format, int il, bmoe_error *err)
{
    return model_bind(m, view, required, TENSOR_VECTOR, 1, (int64_t[]){m->hparams.n_embd}, err, format, il);
}

/* KV sharing (architectures.md 6.4): layer il, one of the last shared_kv,
 * attends over the cache of layer n_layer - shared_kv - 2 if it is
 * sliding-window, else n_layer - shared_kv - 1, which must be of its kind
 * and sizes (that layer's sizes are already read: it comes before il). */
static int share_kv_cache(model *m, int il, int shared_kv, bmoe_error *err)
{
    model_hparams *hp = &m->hparams;
    layer_hparams *lh = &hp->layer[il];
    bool swa = hp->layer_is_swa[il];
    int source = hp->n_layer - shared_kv - (swa ? 2 : 1);
    const char *kind = swa ? "sliding-window" : "full-attention";
    if (source < 0)
        return error_set(err, "model: gemma4.attention.shared_kv_layers = %d: %s layer %d would attend over the KV "
                         "cache of layer %d, which does not exist (block_count %d)", shared_kv, kind, il, source,
                         hp->n_layer);
    const layer_hparams *from = &hp->layer[source];
    if (hp->layer_is_swa[source] != swa)
        return error_set(err, "model: gemma4.attention.shared_kv_layers = %d: %s layer %d would attend over the KV "
                         "cache of layer %d, a %s layer", shared_kv, kind, il, source,
                         swa ? "full-attention" : "sliding-window");
    if (from->n_head_kv != lh->n_head_kv || from->head_dim_k != lh->head_dim_k)
        return error_set(err, "model: gemma4.attention.shared_kv_layers = %d: layer %d (%d KV heads of %d) would "
                         "attend over the KV cache of layer %d (%d KV heads of %d)", shared_kv, il, lh->n_head_kv,
                         lh->head_dim_k, source, from->n_head_kv, from->head_dim_k);
    lh->kv_source = source;
    return 0;
}

/* The per-layer embeddings' global tensors (architectures.md 6.6), Dp per
 * layer: a second embedding table of a row per token and the projection of
 * the embedding, each Dp * n_layer wide, and the norm of a layer's slice. */
static int bind_per_layer_embeddings(model *m, bmoe_error *err)
{
    const model_hparams *hp = &m->hparams;
    model_weights *w = &m->weights;
    int64_t dp = hp->n_per_layer_input, all_layers = dp * hp->n_layer;
    if (model_bind(m, &w->per_layer_token_embd, BIND_REQUIRED, TENSOR_EMBEDDING, 2,
                   (int64_t[]){all_layers, hp->n_vocab}, err, "per_layer_token_embd.weight", 0) ||
        model_bind(m, &w->per_layer_model_proj, BIND_REQUIRED, TENSOR_MATRIX, 2,
                   (int64_t[]){hp->n_embd, all_layers}, err, "per_layer_model_proj.weight", 0) ||
        model_bind(m, &w->per_layer_proj_norm, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){dp}, err,
                   "per_layer_proj_norm.weight", 0))
        return -1;
    return 0;
}

int gemma4_bind(model *m, bmoe_error *err)
{
    if (model_read_common_hparams(m, ROPE_NEOX, err) != 0 || model_read_swa_pattern(m, 0, err) != 0)
        return -1;
    model_hparams *hp = &m->hparams;
    int32_t head_k_swa, head_v_swa, n_rot_swa, shared_kv, per_layer_input;
    /* a layer with a router is a MoE layer; the small Gemma 4 models have none */
    bool any_moe = false;
    for (int il = 0; il < hp->n_layer; il++) {
        char router[64];
        snprintf(router, sizeof router, "blk.%d.ffn_gate_inp.weight", il);
        hp->layer[il].ffn = gguf_find_tensor(m->file, router) ? FFN_MOE : FFN_DENSE;
        any_moe |= hp->layer[il].ffn == FFN_MOE;
    }
    if ((any_moe && (model_require_positive(m, "expert_count", hp->n_expert, err) ||
                     model_require_positive(m, "expert_feed_forward_length", hp->n_ff_exp, err))) ||
        model_require_positive(m, "attention.sliding_window", hp->n_swa, err) ||
        model_read_u32(m, "attention.key_length_swa", false, (uint32_t)hp->head_dim_k, 1, 1u << 16, &head_k_swa,
                       err) ||
        model_read_u32(m, "attention.value_length_swa", false, (uint32_t)head_k_swa, 1, 1u << 16, &head_v_swa,
                       err) ||
        model_read_u32(m, "rope.dimension_count_swa", false, (uint32_t)head_k_swa, 2, 1u << 16, &n_rot_swa, err) ||
        model_read_u32(m, "attention.shared_kv_layers", false, 0, 0, MODEL_MAX_LAYERS, &shared_kv, err) ||
        model_read_u32(m, "embedding_length_per_layer_input", false, 0, 0, 1u << 20, &per_layer_input, err) ||
        model_read_f32(m, "final_logit_softcapping", false, 30.0f, &hp->final_softcap, err))
        return -1;
    if (hp->head_dim_k != hp->head_dim_v || head_k_swa != head_v_swa)
        return error_set(err, "model: gemma4 needs key_length == value_length (have %d, %d) and key_length_swa == "
                         "value_length_swa (have %d, %d)", hp->head_dim_k, hp->head_dim_v, head_k_swa, head_v_swa);
    if (n_rot_swa % 2 != 0 || n_rot_swa > head_k_swa || n_rot_swa > hp->n_rot)
        return error_set(err, "model: gemma4 rope.dimension_count_swa %d must be even and at most the SWA head size "
                         "%d and rope.dimension_count %d", n_rot_swa, head_k_swa, hp->n_rot);
    if (shared_kv >= hp->n_layer)
        return error_set(err, "model: gemma4.attention.shared_kv_layers = %d leaves no layer with a KV cache of "
                         "its own (block_count %d)", shared_kv, hp->n_layer);
    hp->n_per_layer_input = per_layer_input;
    hp->kq_scale = 1.0f; /* q and k are RMS-normalized instead */
    float base_swa; /* the common keys default it to rope.freq_base; gemma4's default is 10000 */
    if (model_read_f32(m, "rope.freq_base_swa", false, 10000.0f, &base_swa, err) != 0)
        return -1;
    hp->rope_swa = rope_config_default(ROPE_NEOX, n_rot_swa, base_swa);
    if (head_k_swa > hp->head_dim_k)
        hp->head_dim_k = hp->head_dim_v = head_k_swa; /* buffers are sized by the largest */

    tensor_view rope_freqs;
    if (model_bind_globals(m, true, "output_norm.weight", err) != 0 ||
        model_bind(m, &rope_freqs, BIND_OPTIONAL, TENSOR_VECTOR, 1, (int64_t[]){hp->n_rot / 2}, err,
                   "rope_freqs.weight", 0))
        return -1;
    hp->rope.freq_factors = rope_freqs.data; /* full-attention layers only */
    if (per_layer_input > 0 && bind_per_layer_embeddings(m, err) != 0)
        return -1;

    int64_t e = hp->n_expert;
    for (int il = 0; il < hp->n_layer; il++) {
        layer_hparams *lh = &hp->layer[il];
        layer_weights *l = &m->weights.layers[il];
        if (hp->layer_is_swa[il])
            lh->head_dim_k = lh->head_dim_v = head_k_swa;
        if (il >= hp->n_layer - shared_kv && share_kv_cache(m, il, shared_kv, err) != 0)
            return -1;
        int64_t d = lh->head_dim_k;
        bool own_kv = lh->kv_source == il;
        if (model_bind_attention(m, il, true, err) ||
            model_bind(m, &l->attn_q_norm, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){d}, err,
                       "blk.%d.attn_q_norm.weight", il) ||
            /* a KV-shared layer has no keys to normalize; a norm there is accepted unused */
            model_bind(m, &l->attn_k_norm, own_kv, TENSOR_VECTOR, 1, (int64_t[]){d}, err,
                       "blk.%d.attn_k_norm.weight", il) ||
            bind_norm(m, &l->attn_post_norm, BIND_REQUIRED, "blk.%d.post_attention_norm.weight", il, err) ||
            bind_norm(m, &l->ffn_norm, BIND_REQUIRED, "blk.%d.ffn_norm.weight", il, err) ||
            model_bind_dense_ffn(m, il, err) ||
            bind_norm(m, &l->ffn_post_norm, BIND_REQUIRED, "blk.%d.post_ffw_norm.weight", il, err) ||
            model_bind(m, &l->layer_output_scale, BIND_OPTIONAL, TENSOR_VECTOR, 1, (int64_t[]){1}, err,
                       "blk.%d.layer_output_scale.weight", il))
            return -1;
        if (per_layer_input > 0 &&
            (model_bind(m, &l->per_layer_inp_gate, BIND_REQUIRED, TENSOR_MATRIX, 2,
                        (int64_t[]){hp->n_embd, per_layer_input}, err, "blk.%d.inp_gate.weight", il) ||
             model_bind(m, &l->per_layer_proj, BIND_REQUIRED, TENSOR_MATRIX, 2,
                        (int64_t[]){per_layer_input, hp->n_embd}, err, "blk.%d.proj.weight", il) ||
             bind_norm(m, &l->per_layer_post_norm, BIND_REQUIRED, "blk.%d.post_norm.weight", il, err)))
            return -1;
        if (lh->ffn == FFN_MOE &&
            (model_bind_experts(m, il, err) ||
             bind_norm(m, &l->ffn_gate_inp_scale, BIND_REQUIRED, "blk.%d.ffn_gate_inp.scale", il, err) ||
             bind_norm(m, &l->ffn_pre_norm_2, BIND_REQUIRED, "blk.%d.pre_ffw_norm_2.weight", il, err) ||
             bind_norm(m, &l->ffn_post_norm_1, BIND_REQUIRED, "blk.%d.post_ffw_norm_1.weight", il, err) ||
             bind_norm(m, &l->ffn_post_norm_2, BIND_REQUIRED, "blk.%d.post_ffw_norm_2.weight", il, err) ||
             model_bind(m, &l->ffn_down_exps_scale, BIND_OPTIONAL, TENSOR_VECTOR, 1, (int64_t[]){e}, err,
                        "blk.%d.ffn_down_exps.scale", il)))
            return -1;
    }
    return 0;
}

/* The per-layer inputs P of every layer for the batch's tokens (6.6), from
 * the scaled embeddings in s->h: P = (norm(per_layer_model_proj . h /
 * sqrt(n_embd); per_layer_proj_norm) + per_layer_token_embd[token] *
 * sqrt(Dp)) / sqrt(2), the norm over each layer's Dp-slice. Every layer but
 * the last reads every row, so all are computed here once. */
static void per_layer_inputs(const model *m, run_state *s, const forward_batch *batch)
{
    const model_hparams *hp = &m->hparams;
    const model_weights *w = &m->weights;
    int n = batch->n_tokens;
    int64_t dp = hp->n_per_layer_input, all_layers = dp * hp->n_layer;
    const tensor_view *projection = &w->per_layer_model_proj;
    linear(s, s->h, hp->n_embd, n, 1, &projection, &s->per_layer_input, NULL);
    vector_scale(s->per_layer_input, s->per_layer_input, 1.0f / sqrtf((float)hp->n_embd), n * all_layers);
    rmsnorm_rows(s->per_layer_input, s->per_layer_input, &w->per_layer_proj_norm, n * hp->n_layer, dp,
                 hp->rms_eps);
    float token_scale = sqrtf((float)dp), mix_scale = 1.0f / sqrtf(2.0f);
    for (int t = 0; t < n; t++) {
        float *p = s->per_layer_input + (int64_t)t * all_layers;
        /* embed_batch has checked the token */
        embedding_row(&w->per_layer_token_embd, batch->tokens[t], s->per_layer_token_row);
        vector_scale(s->per_layer_token_row, s->per_layer_token_row, token_scale, all_layers);
        vector_add(p, s->per_layer_token_row, all_layers);
        vector_scale(p, p, mix_scale, all_layers);
    }
}

/* h rows first.. += norm(proj . (gelu(inp_gate . h) * P[il]); post_norm):
 * layer il's per-layer embedding branch, P[il] the rows' slices of
 * per_layer_inputs. */
static void per_layer_residual(const model *m, run_state *s, int il, int first, int rows)
{
    const model_hparams *hp = &m->hparams;
    const layer_weights *l = &m->weights.layers[il];
    int64_t n_embd = hp->n_embd, dp = hp->n_per_layer_input;
    float *h = s->h + (int64_t)first * n_embd;
    const tensor_view *gate = &l->per_layer_inp_gate, *projection = &l->per_layer_proj;
    linear(s, h, n_embd, rows, 1, &gate, &s->per_layer_gate, NULL);
    for (int t = 0; t < rows; t++) {
        float *g = s->per_layer_gate + (int64_t)t * dp;
        const float *p = s->per_layer_input + ((int64_t)(first + t) * hp->n_layer + il) * dp;
        gelu_glu_f16(g, g, p, dp);
    }
    linear(s, s->per_layer_gate, dp, rows, 1, &projection, &s->block_out, NULL);
    rmsnorm_rows(s->block_out, s->block_out, &l->per_layer_post_norm, rows, n_embd, hp->rms_eps);
    vector_add(h, s->block_out, rows * n_embd);
    forward_trace_op(s, "MUL_MAT", "per_layer_embd");
}

/* One layer: attention with its post-norm, then the MLP and (MoE layers)
 * the experts beside it, each normalized, the per-layer embedding branch
 * (when the model has one), times the layer's output scale. */
static int gemma4_layer(const model *m, run_state *s, const forward_batch *batch, int il, bmoe_error *err)
{
    const model_hparams *hp = &m->hparams;
    int n = batch->n_tokens;
    int64_t n_embd = hp->n_embd;
    static const tensor_view no_weight;
    const layer_hparams *lh = &hp->layer[il];
    const layer_weights *l = &m->weights.layers[il];
    bool swa = hp->layer_is_swa[il];
    const rope_config *rope = swa ? &hp->rope_swa : &hp->rope;
    const float *rope_cache = swa ? s->rope_cache_swa : s->rope_cache;

    /* attention: x = norm(h); q, k, v (v = k without attn_v); q/k head
     * norms and rope, v normalized without weight; attend with scale 1.
     * A KV-shared layer makes q only and attends over its source's cache. */
    attention_qkv(s, hp, l, n);
    norm_rope_heads(s->q, &l->attn_q_norm, rope, rope_cache, n, lh->n_head, lh->head_dim_k, hp->rms_eps);
    if (lh->kv_source == il) {
        norm_rope_heads(s->k, &l->attn_k_norm, rope, rope_cache, n, lh->n_head_kv, lh->head_dim_k, hp->rms_eps);
        for (int t = 0; t < n; t++)
            rmsnorm_heads(s->v + (int64_t)t * lh->n_head_kv * lh->head_dim_v, NULL, lh->head_dim_v,
                          lh->n_head_kv, hp->rms_eps);
    }
    kv_cache_store(s, hp, il, n);
    attention_layer(s, hp, il, n, NULL);

    /* the last layer goes on with the rows that give logits only */
    int first = forward_first_row(s, batch, il, hp->n_layer), rows = n - first;
    if (rows == 0)
        return 0;
    float *h = s->h + (int64_t)first * n_embd;

    /* h1 = h + norm(attn_output . attn; post_attention_norm) */
    attention_output(s, hp, l, first, rows);
    rmsnorm_rows(s->block_out, s->block_out, &l->attn_post_norm, rows, n_embd, hp->rms_eps);
    vector_add(h, s->block_out, rows * n_embd);

    /* f = mlp(norm(h1; ffn_norm)), GELU */
    rmsnorm_rows(s->x, h, &l->ffn_norm, rows, n_embd, hp->rms_eps);
    ffn_glu(s, &l->ffn_gate, &l->ffn_up, &l->ffn_down, MOE_GELU_GLU, s->x, rows, s->block_out);
    if (lh->ffn == FFN_MOE) {
        /* f = norm(f; post_ffw_norm_1) + norm(moe(norm(h1; pre_ffw_norm_2)); post_ffw_norm_2),
         * the router reading norm(h1) / sqrt(n_embd) * ffn_gate_inp.scale */
        rmsnorm_rows(s->block_out, s->block_out, &l->ffn_post_norm_1, rows, n_embd, hp->rms_eps);
        rmsnorm_rows(s->x2, h, &no_weight, rows, n_embd, hp->rms_eps);
        float router_scale = 1.0f / sqrtf((float)n_embd);
        for (int t = 0; t < rows; t++) {
            float *r = s->x2 + (int64_t)t * n_embd;
            vector_scale(r, r, router_scale, n_embd);
            for (int64_t i = 0; i < n_embd; i++)
                r[i] *= ((const float *)l->ffn_gate_inp_scale.data)[i];
        }
        rmsnorm_rows(s->x, h, &l->ffn_pre_norm_2, rows, n_embd, hp->rms_eps);
        if (moe_layer(s, m, l, il, &gemma4_moe, s->x, s->x2, s->positions + first, rows, s->block_out2, err) != 0)
            return -1;
        rmsnorm_rows(s->block_out2, s->block_out2, &l->ffn_post_norm_2, rows, n_embd, hp->rms_eps);
        vector_add(s->block_out, s->block_out2, rows * n_embd);
    }

    /* h = h1 + norm(f; post_ffw_norm) */
    rmsnorm_rows(s->block_out, s->block_out, &l->ffn_post_norm, rows, n_embd, hp->rms_eps);
    vector_add(h, s->block_out, rows * n_embd);
    if (hp->n_per_layer_input > 0)
        per_layer_residual(m, s, il, first, rows);
    /* times the layer's output scale */
    if (l->layer_output_scale.data)
        vector_scale(h, h, *(const float *)l->layer_output_scale.data, rows * n_embd);
    return 0;
}

int gemma4_forward(const model *m, run_state *s, const forward_batch *batch, bmoe_error *err)
{
    const model_hparams *hp = &m->hparams;
    int n = batch->n_tokens;
    int64_t n_embd = hp->n_embd;

    /* h = token_embd[token] * sqrt(n_embd) */
    if (embed_batch(m, s, batch, err) != 0)
        return -1;
    vector_scale(s->h, s->h, sqrtf((float)n_embd), n * n_embd);
    if (hp->n_per_layer_input > 0)
        per_layer_inputs(m, s, batch);
    rope_cache_batch(&hp->rope, s->positions, n, s->rope_cache);
    rope_cache_batch(&hp->rope_swa, s->positions, n, s->rope_cache_swa);
    return forward_layers(m, s, batch, gemma4_layer, err);
}
