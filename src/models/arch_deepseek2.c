/* deepseek2 (DeepSeek-V2, V2-Lite, V2.5, V3 and Kimi-K2 files use this
 * name): architectures.md section 9. Pre-norm blocks with multi-head latent
 * attention: queries directly (attn_q) or through a low-rank bottleneck
 * (attn_q_a, its norm, attn_q_b); keys and values from one normalized latent
 * per token (attn_kv_a_mqa's first kv_lora outputs) plus one rotated key
 * part shared by all heads (its last n_rot outputs, not normalized). RoPE is
 * the NORM kind on the rotated parts only; YaRN's magnitude moves from the
 * rotation into the attention scale (9.4). The first
 * leading_dense_block_count layers end in a dense SiLU-GLU FFN, the others
 * in routed experts (softmax or sigmoid with a selection bias, per the file)
 * plus an ungated shared expert.
 *
 * Files with attn_k_b and attn_v_b (key_length_mla present) keep the
 * compressed cache the reference keeps: per token the latent and the rotated
 * key, one KV head of kv_lora + n_rot whose values are the latent; each
 * head's query absorbs attn_k_b and its attention output is decompressed by
 * attn_v_b. Older files with attn_kv_b run plain multi-head attention over
 * every head's decompressed key and value, as the reference does for them.
 *
 * The first of the trailing nextn_predict_layers blocks (DeepSeek-V3's MTP
 * module, kept by a conversion that carries it) is the draft head (--mtp):
 * after the input fusion of head_forward_layers, one layer like the MoE
 * layers (MLA with a cache of its own, in the file's layout, the routed
 * experts with their selection bias and groups, the shared expert), then
 * nextn.shared_head_norm and the head's logits. The checkpoint's MTP layer
 * carries its own embed_tokens and shared_head.head (copies of the model's),
 * which a conversion names nextn.embed_tokens and nextn.shared_head_head, as
 * GLM-4.5's (whose module is DeepSeek-V3's); each is read where the file
 * has it, the model's token_embd, output and output_norm where not. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bind.h"
#include "model.h"

/* The queries, latent and routing keys, their agreement with the head sizes
 * of the common keys, and the attention scale (9.4). */
static int read_deepseek2_hparams(model *m, bmoe_error *err)
{
    model_hparams *hp = &m->hparams;
    int32_t k_mla, v_mla, n_shared;
    float log_multiplier;
    if (model_require_positive(m, "expert_count", hp->n_expert, err) ||
        model_read_u32(m, "expert_feed_forward_length", true, 0, 1, 1u << 20, &hp->n_ff_exp, err) ||
        model_read_u32(m, "expert_shared_count", true, 0, 1, 64, &n_shared, err) ||
        model_read_u32(m, "attention.kv_lora_rank", true, 0, 1, 1u << 16, &hp->mla_kv_lora, err) ||
        model_read_u32(m, "attention.q_lora_rank", false, 0, 0, 1u << 16, &hp->mla_q_lora, err) ||
        model_read_u32(m, "attention.key_length_mla", false, 0, 0, 1u << 16, &k_mla, err) ||
        model_read_u32(m, "attention.value_length_mla", false, 0, 0, 1u << 16, &v_mla, err) ||
        model_read_f32(m, "rope.scaling.yarn_log_multiplier", false, 0.0f, &log_multiplier, err) ||
        /* files from before the gating key route by softmax (V2, V2.5); the
         * groups (V3, Kimi-K2) are read and applied for every architecture */
        model_read_expert_weighting(m, false, EXPERT_GATING_SOFTMAX, EXPERT_GATINGS_SOFTMAX_SIGMOID, err))
        return -1;
    hp->n_ff_shexp = hp->n_ff_exp * n_shared;

    int32_t r = hp->n_rot, kv_lora = hp->mla_kv_lora;
    if (r <= 0)
        return error_set(err, "model: deepseek2 needs a positive rope.dimension_count (the rotated key part)");
    if ((k_mla == 0) != (v_mla == 0))
        return error_set(err, "model: deepseek2.attention.key_length_mla %d and value_length_mla %d: both or "
                         "neither", k_mla, v_mla);
    hp->mla_absorbed = k_mla > 0;
    if (hp->mla_absorbed) {
        /* the cache's one KV head: [latent | rotated key], values the latent */
        if (hp->n_head_kv != 1 || hp->head_dim_k != kv_lora + r || hp->head_dim_v != kv_lora)
            return error_set(err, "model: deepseek2 with key_length_mla needs head_count_kv 1, key_length "
                             "kv_lora_rank + rope.dimension_count (%d) and value_length kv_lora_rank (%d); "
                             "have %d, %d, %d", kv_lora + r, kv_lora, hp->n_head_kv, hp->head_dim_k,
                             hp->head_dim_v);
        hp->mla_qk_nope = k_mla - r;
        hp->mla_v_dim = v_mla;
    } else {
        if (hp->n_head_kv != hp->n_head)
            return error_set(err, "model: deepseek2 without key_length_mla (attn_kv_b) needs head_count_kv = "
                             "head_count %d, have %d", hp->n_head, hp->n_head_kv);
        hp->mla_qk_nope = hp->head_dim_k - r;
        hp->mla_v_dim = hp->head_dim_v;
    }
    if (hp->mla_qk_nope <= 0)
        return error_set(err, "model: deepseek2's query and key heads (%d) leave nothing beside the %d rotated "
                         "dimensions (rope.dimension_count)", hp->mla_qk_nope + r, r);

    /* 9.4: the reference sets YaRN's rotation magnitude to about 1 for this
     * architecture and moves mscale^2 into the attention scale instead; each
     * factor is computed as it computes it, so the rounding agrees */
    const rope_config *rope = &hp->rope;
    float file_attn_factor = rope->attn_factor; /* rope.scaling.attn_factor */
    float mscale_all_dims = log_multiplier / 0.1f;
    float attn_factor = 1.0f;
    if (rope->ext_factor != 0.0f) {
        float factor = 1.0f / rope->freq_scale;
        if (log_multiplier == 0.0f && factor > 1.0f)
            attn_factor = 0.1f * logf(factor) + 1.0f;
        attn_factor *= 1.0f / (1.0f + 0.1f * logf(factor));
    }
    attn_factor *= file_attn_factor;
    hp->rope.attn_factor = attn_factor;
    float log_scale = logf(1.0f / rope->freq_scale);
    float mscale = attn_factor * (1.0f + 0.1f * log_scale) * (1.0f + 0.1f * mscale_all_dims * log_scale);
    hp->kq_scale = 1.0f * mscale * mscale / sqrtf((float)(hp->mla_qk_nope + r));

    int64_t q_dim = (int64_t)hp->n_head * (hp->mla_qk_nope + r);
    hp->n_mixer_floats = hp->mla_q_lora +
                         (hp->mla_absorbed ? q_dim + (int64_t)hp->n_head * hp->mla_v_dim
                                           : (int64_t)hp->n_head * (hp->mla_qk_nope + hp->mla_v_dim) + kv_lora + r);
    return 0;
}

/* The attention tensors of layer il (9.2). */
static int bind_mla(model *m, int il, bmoe_error *err)
{
    model_hparams *hp = &m->hparams;
    layer_weights *l = &m->weights.layers[il];
    int64_t n_embd = hp->n_embd, h = hp->n_head, r = hp->n_rot, kv_lora = hp->mla_kv_lora;
    int64_t q_lora = hp->mla_q_lora, nope = hp->mla_qk_nope, v_dim = hp->mla_v_dim, q_dim = h * (nope + r);
    if (model_bind(m, &l->attn_norm, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){n_embd}, err,
                   "blk.%d.attn_norm.weight", il))
        return -1;
    if (q_lora > 0) {
        if (model_refuse_tensor(m, il, "attn_q.weight", "a low-rank query layer", "attention.q_lora_rank > 0",
                                err) ||
            model_bind(m, &l->attn_q_a, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){n_embd, q_lora}, err,
                       "blk.%d.attn_q_a.weight", il) ||
            model_bind(m, &l->attn_q_a_norm, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){q_lora}, err,
                       "blk.%d.attn_q_a_norm.weight", il) ||
            model_bind(m, &l->attn_q_b, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){q_lora, q_dim}, err,
                       "blk.%d.attn_q_b.weight", il))
            return -1;
    } else if (model_refuse_tensor(m, il, "attn_q_a.weight", "a full-rank query layer",
                                   "attention.q_lora_rank is absent or 0", err) ||
               model_bind(m, &l->attn_q, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){n_embd, q_dim}, err,
                          "blk.%d.attn_q.weight", il)) {
        return -1;
    }
    if (model_bind(m, &l->attn_kv_a_mqa, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){n_embd, kv_lora + r}, err,
                   "blk.%d.attn_kv_a_mqa.weight", il) ||
        model_bind(m, &l->attn_kv_a_norm, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){kv_lora}, err,
                   "blk.%d.attn_kv_a_norm.weight", il) ||
        model_bind(m, &l->attn_output, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){h * v_dim, n_embd}, err,
                   "blk.%d.attn_output.weight", il))
        return -1;
    if (!hp->mla_absorbed) {
        if (model_refuse_tensor(m, il, "attn_k_b.weight", "a layer of decompressed heads",
                                "attention.key_length_mla is absent", err) ||
            model_bind(m, &l->attn_kv_b, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){kv_lora, h * (nope + v_dim)},
                       err, "blk.%d.attn_kv_b.weight", il))
            return -1;
        return 0;
    }
    if (model_refuse_tensor(m, il, "attn_kv_b.weight", "a latent-cache layer", "attention.key_length_mla is set",
                            err) ||
        model_bind(m, &l->attn_k_b, BIND_REQUIRED, TENSOR_MATRIX, 3, (int64_t[]){nope, kv_lora, h}, err,
                   "blk.%d.attn_k_b.weight", il) ||
        model_bind(m, &l->attn_v_b, BIND_REQUIRED, TENSOR_MATRIX, 3, (int64_t[]){kv_lora, v_dim, h}, err,
                   "blk.%d.attn_v_b.weight", il))
        return -1;
    /* linear_per_head converts one token's input of every head at once */
    size_t k_inputs = (size_t)h * activation_row_bytes(l->attn_k_b.type, nope);
    size_t v_inputs = (size_t)h * activation_row_bytes(l->attn_v_b.type, kv_lora);
    size_t most = k_inputs > v_inputs ? k_inputs : v_inputs;
    if (most > m->head_activation_bytes)
        m->head_activation_bytes = most;
    return 0;
}

/* The FFN tensors of layer il: dense below leading_dense_block_count, else
 * the router (with its optional selection bias), the experts and the shared
 * expert. */
static int bind_ffn(model *m, int il, bmoe_error *err)
{
    model_hparams *hp = &m->hparams;
    layer_weights *l = &m->weights.layers[il];
    int64_t n_embd = hp->n_embd;
    if (model_bind(m, &l->ffn_norm, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){n_embd}, err,
                   "blk.%d.ffn_norm.weight", il))
        return -1;
    if (hp->layer[il].ffn == FFN_DENSE) {
        if (model_refuse_tensor(m, il, "ffn_gate_inp.weight", "a dense layer", "below leading_dense_block_count",
                                err) ||
            model_bind_dense_ffn(m, il, err))
            return -1;
        return 0;
    }
    if (model_refuse_tensor(m, il, "ffn_gate.weight", "an MoE layer", "not below leading_dense_block_count", err) ||
        model_bind_experts(m, il, err) ||
        model_bind(m, &l->exp_probs_b, BIND_OPTIONAL, TENSOR_VECTOR, 1, (int64_t[]){hp->n_expert}, err,
                   "blk.%d.exp_probs_b.bias", il) ||
        model_bind_shared_expert(m, il, err))
        return -1;
    return 0;
}

int deepseek2_bind(model *m, bmoe_error *err)
{
    if (model_read_common_hparams(m, ROPE_NORM, err) != 0 || read_deepseek2_hparams(m, err) != 0)
        return -1;
    model_hparams *hp = &m->hparams;
    int32_t leading_dense;
    if (model_read_u32(m, "leading_dense_block_count", false, 0, 0, (uint32_t)hp->n_layer, &leading_dense, err))
        return -1;
    if (model_bind_globals(m, true, "output_norm.weight", err) != 0 ||
        model_bind_head(m, "nextn.shared_head_norm.weight", BIND_OPTIONAL, err) != 0)
        return -1;
    /* the head's block (n_layer, when bound) as one more layer */
    for (int il = 0; il < hp->n_layer + hp->n_layer_head; il++) {
        hp->layer[il].ffn = il < leading_dense ? FFN_DENSE : FFN_MOE;
        if (bind_mla(m, il, err) != 0 || bind_ffn(m, il, err) != 0)
            return -1;
    }
    return 0;
}

/* ---- Forward ------------------------------------------------------------ */

/* Rows of s->mixer, s->mixer_floats apart (read_deepseek2_hparams sized them):
 * absorbed [q_a (q_lora) | q (H*Dq) | heads' outputs (H*v_dim)],
 * decompressed [q_a (q_lora) | k_nope and v per head (H*(qk_nope + v_dim)) |
 * latent and rope key (kv_lora + n_rot)]. */
typedef struct mla_rows {
    float *q_a, *q, *out;  /* absorbed */
    float *kv, *latent;    /* decompressed */
} mla_rows;

static mla_rows mla_rows_of(const model_hparams *hp, float *mixer)
{
    int64_t h = hp->n_head, q_dim = h * (hp->mla_qk_nope + hp->n_rot);
    mla_rows rows = {.q_a = mixer};
    float *after_q_a = mixer + hp->mla_q_lora;
    if (hp->mla_absorbed) {
        rows.q = after_q_a;
        rows.out = after_q_a + q_dim;
    } else {
        rows.kv = after_q_a;
        rows.latent = after_q_a + h * (hp->mla_qk_nope + hp->mla_v_dim);
    }
    return rows;
}

/* x = rmsnorm(h; attn_norm); the queries (H heads of qk_nope + n_rot, not yet
 * rotated) into q (q_stride floats a row), and attn_kv_a_mqa . x into kv_a
 * (kv_a_stride), for n rows. */
static void mla_project(run_state *s, const model_hparams *hp, const layer_weights *l, int n, float *q,
                        int64_t q_stride, float *kv_a, int64_t kv_a_stride)
{
    int64_t stride = s->mixer_floats;
    rmsnorm_rows(s->x, s->h, &l->attn_norm, n, hp->n_embd, hp->rms_eps);
    if (hp->mla_q_lora == 0) {
        const tensor_view *w[2] = {&l->attn_q, &l->attn_kv_a_mqa};
        float *outs[2] = {q, kv_a};
        linear(s, s->x, hp->n_embd, n, 2, w, outs, (int64_t[]){q_stride, kv_a_stride});
        return;
    }
    float *q_a = mla_rows_of(hp, s->mixer).q_a;
    const tensor_view *w[2] = {&l->attn_q_a, &l->attn_kv_a_mqa};
    float *outs[2] = {q_a, kv_a};
    linear(s, s->x, hp->n_embd, n, 2, w, outs, (int64_t[]){stride, kv_a_stride});
    for (int t = 0; t < n; t++)
        rmsnorm(q_a + t * stride, q_a + t * stride, l->attn_q_a_norm.data, hp->mla_q_lora, hp->rms_eps);
    const tensor_view *q_b = &l->attn_q_b;
    linear(s, q_a, stride, n, 1, &q_b, &q, &q_stride);
}

/* In place on n rows of [latent (kv_lora) | rope key (n_rot)], stride apart:
 * the latent normalized, the key rotated. */
static void mla_latent(run_state *s, const model_hparams *hp, const layer_weights *l, int n, float *kv_a,
                       int64_t stride)
{
    int kv_lora = hp->mla_kv_lora;
    for (int t = 0; t < n; t++) {
        float *row = kv_a + t * stride;
        rmsnorm(row, row, l->attn_kv_a_norm.data, kv_lora, hp->rms_eps);
        rope_apply(&hp->rope, row + kv_lora, hp->n_rot, 1, s->rope_cache + (int64_t)t * hp->n_rot);
    }
}

/* The latent-cache form: the cache's one KV head per token is s->k's row
 * [latent | rope key] and s->v's the latent; head h's query becomes
 * [attn_k_b[h] . q_nope_h | rotated q_rope_h] (kv_lora + n_rot), so its
 * scores over the cache are the decompressed ones; s->attn gets each head's
 * attention-weighted latent (kv_lora). */
static void mla_attention_absorbed(run_state *s, const model_hparams *hp, const layer_weights *l, int il, int n)
{
    int64_t stride = s->mixer_floats, h = hp->n_head, r = hp->n_rot, kv_lora = hp->mla_kv_lora;
    int64_t nope = hp->mla_qk_nope, dq = nope + r, dk = kv_lora + r;
    mla_rows rows = mla_rows_of(hp, s->mixer);
    mla_project(s, hp, l, n, rows.q, stride, s->k, dk);
    mla_latent(s, hp, l, n, s->k, dk);
    for (int t = 0; t < n; t++) {
        memcpy(s->v + t * kv_lora, s->k + t * dk, (size_t)kv_lora * sizeof(float));
        float *absorbed = s->q + t * h * dk;
        for (int64_t head = 0; head < h; head++)
            memcpy(absorbed + head * dk + kv_lora, rows.q + t * stride + head * dq + nope, (size_t)r * sizeof(float));
        rope_apply(&hp->rope, absorbed + kv_lora, (int)dk, (int)h, s->rope_cache + (int64_t)t * r);
    }
    linear_per_head(s, &l->attn_k_b, rows.q, stride, dq, n, s->q, h * dk, dk);
    forward_trace_op(s, "MUL_MAT", "mla_q_kv");
    kv_cache_store(s, hp, il, n);
    attention_layer(s, hp, il, n, NULL);
}

/* block_out rows = attn_output . [attn_v_b[h] . latent output of head h]
 * for rows first..first+count-1 of s->attn. */
static void mla_output_absorbed(run_state *s, const model_hparams *hp, const layer_weights *l, int first, int count)
{
    int64_t stride = s->mixer_floats, h = hp->n_head, kv_lora = hp->mla_kv_lora, v_dim = hp->mla_v_dim;
    float *out = mla_rows_of(hp, s->mixer).out;
    linear_per_head(s, &l->attn_v_b, s->attn + (int64_t)first * h * kv_lora, h * kv_lora, kv_lora, count, out,
                    stride, v_dim);
    const tensor_view *wo = &l->attn_output;
    linear(s, out, stride, count, 1, &wo, &s->block_out, NULL);
    forward_trace_op(s, "MUL_MAT", "attn_output");
}

/* The decompressed form: attn_kv_b . latent gives each head's key part and
 * value; head h's key is [k_nope_h | the shared rotated key], its query
 * [q_nope_h | rotated q_rope_h]; plain attention over H KV heads. */
static void mla_attention_decompressed(run_state *s, const model_hparams *hp, const layer_weights *l, int il, int n)
{
    int64_t stride = s->mixer_floats, h = hp->n_head, r = hp->n_rot, kv_lora = hp->mla_kv_lora;
    int64_t nope = hp->mla_qk_nope, dq = nope + r, v_dim = hp->mla_v_dim;
    mla_rows rows = mla_rows_of(hp, s->mixer);
    mla_project(s, hp, l, n, s->q, h * dq, rows.latent, stride);
    mla_latent(s, hp, l, n, rows.latent, stride);
    const tensor_view *kv_b = &l->attn_kv_b;
    linear(s, rows.latent, stride, n, 1, &kv_b, &rows.kv, &stride);
    for (int t = 0; t < n; t++) {
        const float *kv = rows.kv + t * stride, *rope_key = rows.latent + t * stride + kv_lora;
        for (int64_t head = 0; head < h; head++) {
            float *k = s->k + (t * h + head) * dq;
            memcpy(k, kv + head * (nope + v_dim), (size_t)nope * sizeof(float));
            memcpy(k + nope, rope_key, (size_t)r * sizeof(float));
            memcpy(s->v + (t * h + head) * v_dim, kv + head * (nope + v_dim) + nope, (size_t)v_dim * sizeof(float));
        }
        rope_apply(&hp->rope, s->q + t * h * dq + nope, (int)dq, (int)h, s->rope_cache + (int64_t)t * r);
    }
    forward_trace_op(s, "MUL_MAT", "mla_q_kv");
    kv_cache_store(s, hp, il, n);
    attention_layer(s, hp, il, n, NULL);
}

/* h += attn_output . mla(norm(h)); h += ffn(x) with x = norm(h; ffn_norm):
 * dense, or routed experts + the shared expert. Layer n_layer is the draft
 * head's block (model.h: test_mtp_head runs the head around it). */
int deepseek2_layer(const model *m, run_state *s, const forward_batch *batch, int il, bmoe_error *err)
{
    const model_hparams *hp = &m->hparams;
    const layer_weights *l = &m->weights.layers[il];
    int n = batch->n_tokens;
    int64_t n_embd = hp->n_embd;
    if (hp->mla_absorbed)
        mla_attention_absorbed(s, hp, l, il, n);
    else
        mla_attention_decompressed(s, hp, l, il, n);
    /* the last layer goes on with the rows that give logits only */
    int first = forward_first_row(s, batch, il, hp->n_layer), rows = n - first;
    if (rows == 0)
        return 0;
    if (hp->mla_absorbed)
        mla_output_absorbed(s, hp, l, first, rows);
    else
        attention_output(s, hp, l, first, rows);
    float *h = s->h + (int64_t)first * n_embd;
    vector_add(h, s->block_out, rows * n_embd);

    rmsnorm_rows(s->x, h, &l->ffn_norm, rows, n_embd, hp->rms_eps);
    if (hp->layer[il].ffn == FFN_DENSE) {
        ffn_glu(s, &l->ffn_gate, &l->ffn_up, &l->ffn_down, MOE_SILU_GLU, s->x, rows, s->block_out);
    } else {
        moe_config routing = model_moe_config(hp);
        if (moe_layer(s, m, l, il, &routing, s->x, NULL, s->positions + first, rows, s->block_out, err) != 0)
            return -1;
        ffn_glu(s, &l->ffn_gate_shexp, &l->ffn_up_shexp, &l->ffn_down_shexp, MOE_SILU_GLU, s->x, rows,
                s->block_out2);
        vector_add(s->block_out, s->block_out2, rows * n_embd);
    }
    vector_add(h, s->block_out, rows * n_embd);
    return 0;
}

int deepseek2_forward(const model *m, run_state *s, const forward_batch *batch, bmoe_error *err)
{
    if (embed_batch(m, s, batch, err) != 0)
        return -1;
    rope_cache_batch(&m->hparams.rope, s->positions, batch->n_tokens, s->rope_cache);
    return forward_layers(m, s, batch, deepseek2_layer, err);
}

int deepseek2_head_forward(const model *m, run_state *s, const forward_batch *batch, const float *hidden,
                           float *hidden_out, bmoe_error *err)
{
    return head_forward_layers(m, s, batch, hidden, deepseek2_layer, hidden_out, err);
}
