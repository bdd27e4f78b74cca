/* Building blocks of the forward pass shared by the architectures: embedding
 * lookup, grouped linear layers (inputs converted once per activation format,
 * the matrices in as few parallel steps as the activation slots allow),
 * norms, RoPE over a batch, the KV cache, the dense and shared-expert FFNs,
 * the recurrent mixers (short convolution, Gated DeltaNet) and gated
 * attention, and the output head. The machinery (threads, kernels) stays in
 * here so that each architecture file reads as the math. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "../base/fp16.h"
#include "../quant/quant.h"
#include "model.h"

void embedding_row(const tensor_view *embd, int64_t row, float *out)
{
    const quant_format *format = quant_format_of(embd->type);
    format->dequantize_row((const uint8_t *)embd->data + (size_t)row * embd->row_bytes, out, embd->ne[0]);
}

/* Positions of the batch's tokens into s->positions, their rows of embd
 * (n_vocab of them) into s->h. */
static int embed_rows(const model *m, const tensor_view *embd, run_state *s, const forward_batch *batch,
                      bmoe_error *err)
{
    for (int t = 0; t < batch->n_tokens; t++) {
        int32_t token = batch->tokens[t];
        s->positions[t] = batch->position + t;
        if (token < 0 || token >= m->hparams.n_vocab)
            return error_set(err, "eval: token id %d is outside the vocabulary [0, %d)", token, m->hparams.n_vocab);
        embedding_row(embd, token, s->h + (int64_t)t * m->hparams.n_embd);
    }
    return 0;
}

int embed_batch(const model *m, run_state *s, const forward_batch *batch, bmoe_error *err)
{
    if (s->trace_callback) {
        forward_trace(s, -1, NULL); /* the "pre" segment starts here */
        s->trace_layer = -1;
        s->trace_op_last_ns = s->trace_last_ns;
        s->trace_op_last_majflt = s->trace_last_majflt;
    }
    return embed_rows(m, &m->weights.token_embd, s, batch, err);
}

/* Matrices of one linear() step: enough for every projection group here. */
#define LINEAR_STEP_MATRICES 8

void linear(run_state *s, const float *x, int64_t x_stride, int n_tokens, int n_matrices,
            const tensor_view *const *weights, float *const *outs, const int64_t *out_strides)
{
    /* slot i holds x converted for weights of activation format slot_format[i]
     * and input length slot_n[i]; a matrix needing a fourth slot, or a ninth
     * matrix, starts another step */
    enum { SLOTS = sizeof s->activations / sizeof s->activations[0] };
    uint32_t slot_format[SLOTS];
    int64_t slot_n[SLOTS];
    size_t slot_bytes[SLOTS];
    int n_slots = 0, n_jobs = 0;
    matmul_job jobs[LINEAR_STEP_MATRICES];
    for (int i = 0; i < n_matrices; i++) {
        const tensor_view *w = weights[i];
        uint32_t format = quant_format_of(w->type)->activation_type;
        int slot = 0;
        while (slot < n_slots && !(slot_format[slot] == format && slot_n[slot] == w->ne[0]))
            slot++;
        if (slot == n_slots && (n_slots == SLOTS || n_jobs == LINEAR_STEP_MATRICES)) {
            matmul_run(s->pool, s->kernels, jobs, n_jobs);
            n_jobs = n_slots = slot = 0;
        } else if (n_jobs == LINEAR_STEP_MATRICES) {
            matmul_run(s->pool, s->kernels, jobs, n_jobs);
            n_jobs = 0;
        }
        if (slot == n_slots) {
            slot_format[slot] = format;
            slot_n[slot] = w->ne[0];
            slot_bytes[slot] = activation_row_bytes(w->type, w->ne[0]);
            for (int t = 0; t < n_tokens; t++)
                activation_convert(s->kernels, w->type, x + (int64_t)t * x_stride, w->ne[0],
                                   s->activations[slot] + (size_t)t * slot_bytes[slot]);
            n_slots++;
        }
        jobs[n_jobs++] = (matmul_job){
            .weights = w->data,
            .type = w->type,
            .n_in = w->ne[0],
            .n_out = w->ne[1],
            .weight_row_bytes = w->row_bytes,
            .activations = s->activations[slot],
            .activation_stride = slot_bytes[slot],
            .n_tokens = n_tokens,
            .out = outs[i],
            .out_stride = out_strides ? out_strides[i] : w->ne[1],
        };
    }
    matmul_run(s->pool, s->kernels, jobs, n_jobs);
}

void linear_per_head(run_state *s, const tensor_view *w, const float *x, int64_t x_stride, int64_t x_head_stride,
                     int n_tokens, float *out, int64_t out_stride, int64_t out_head_stride)
{
    int64_t n_in = w->ne[0], n_out = w->ne[1];
    int n_heads = (int)w->ne[2];
    size_t bytes = activation_row_bytes(w->type, n_in);
    /* token t's heads side by side, so that head h's rows are one strided run */
    for (int t = 0; t < n_tokens; t++)
        for (int h = 0; h < n_heads; h++)
            activation_convert(s->kernels, w->type, x + (int64_t)t * x_stride + (int64_t)h * x_head_stride, n_in,
                               s->head_inputs + ((size_t)t * (size_t)n_heads + (size_t)h) * bytes);
    for (int h = 0; h < n_heads; h++)
        s->head_jobs[h] = (matmul_job){
            .weights = (const uint8_t *)w->data + (size_t)h * (size_t)n_out * w->row_bytes,
            .type = w->type,
            .n_in = n_in,
            .n_out = n_out,
            .weight_row_bytes = w->row_bytes,
            .activations = s->head_inputs + (size_t)h * bytes,
            .activation_stride = (size_t)n_heads * bytes,
            .n_tokens = n_tokens,
            .out = out + (int64_t)h * out_head_stride,
            .out_stride = out_stride,
        };
    matmul_run(s->pool, s->kernels, s->head_jobs, n_heads);
}

void add_bias(float *x, const tensor_view *bias, int n_tokens, int64_t stride)
{
    if (!bias->data)
        return;
    for (int t = 0; t < n_tokens; t++)
        vector_add(x + (int64_t)t * stride, bias->data, bias->ne[0]);
}

void rmsnorm_rows(float *out, const float *x, const tensor_view *weight, int n_tokens, int64_t n, float eps)
{
    for (int t = 0; t < n_tokens; t++)
        rmsnorm(out + (int64_t)t * n, x + (int64_t)t * n, weight->data, n, eps);
}

void rope_cache_batch(const rope_config *config, const int32_t *positions, int n_tokens, float *cache)
{
    for (int t = 0; t < n_tokens; t++)
        rope_cache_fill(config, positions[t], cache + (int64_t)t * config->n_rot);
}

void norm_rope_heads(float *x, const tensor_view *norm, const rope_config *rope, const float *rope_cache,
                     int n_tokens, int n_heads, int head_dim, float eps)
{
    int64_t stride = (int64_t)n_heads * head_dim;
    for (int t = 0; t < n_tokens; t++) {
        float *row = x + (int64_t)t * stride;
        if (norm->data)
            rmsnorm_heads(row, norm->data, head_dim, n_heads, eps);
        rope_apply(rope, row, head_dim, n_heads, rope_cache + (int64_t)t * rope->n_rot);
    }
}

void attention_qkv(run_state *s, const model_hparams *hp, const layer_weights *layer, int n_tokens)
{
    int64_t n_embd = hp->n_embd;
    /* the layer's own sizes */
    int64_t q_dim = layer->attn_q.ne[1], k_dim = layer->attn_k.ne[1], v_dim = layer->attn_v.ne[1];
    rmsnorm_rows(s->x, s->h, &layer->attn_norm, n_tokens, n_embd, hp->rms_eps);
    const tensor_view *qkv[3] = {&layer->attn_q, &layer->attn_k, &layer->attn_v};
    float *qkv_out[3] = {s->q, s->k, s->v};
    if (!layer->attn_k.name) {
        /* a KV-shared layer (gemma4): its keys and values are in another layer's cache */
        linear(s, s->x, n_embd, n_tokens, 1, qkv, qkv_out, NULL);
    } else if (layer->attn_v.name) {
        linear(s, s->x, n_embd, n_tokens, 3, qkv, qkv_out, NULL);
    } else {
        /* a layer without attn_v (gemma4's full layers): V is the raw K projection */
        v_dim = k_dim;
        linear(s, s->x, n_embd, n_tokens, 2, qkv, qkv_out, NULL);
        memcpy(s->v, s->k, (size_t)n_tokens * (size_t)k_dim * sizeof(float));
    }
    add_bias(s->q, &layer->attn_q_bias, n_tokens, q_dim);
    add_bias(s->k, &layer->attn_k_bias, n_tokens, k_dim);
    add_bias(s->v, &layer->attn_v_bias, n_tokens, v_dim);
    forward_trace_op(s, "MUL_MAT", "attn_norm_qkv");
}

void attention_output(run_state *s, const model_hparams *hp, const layer_weights *layer, int first, int rows)
{
    int64_t attn_dim = layer->attn_output.ne[0];
    const tensor_view *wo = &layer->attn_output;
    linear(s, s->attn + (int64_t)first * attn_dim, attn_dim, rows, 1, &wo, &s->block_out, NULL);
    add_bias(s->block_out, &layer->attn_output_bias, rows, hp->n_embd);
    forward_trace_op(s, "MUL_MAT", "attn_output");
}

int32_t kv_positions(const run_state *s, const model_hparams *hp, int il)
{
    bool ringed = il < hp->n_layer && hp->layer_is_swa[il] && hp->compress_ratio[il] == 0;
    return s->swa_ring > 0 && ringed ? s->swa_ring : s->n_ctx;
}

void kv_head_strides(const run_state *s, const model_hparams *hp, int il, int64_t *k_head, int64_t *v_head)
{
    const layer_hparams *lh = &hp->layer[il];
    int32_t positions = kv_positions(s, hp, il);
    *k_head = attend_key_head_elements(positions, lh->head_dim_k);
    *v_head = (int64_t)positions * lh->head_dim_v;
}

void kv_cache_store(run_state *s, const model_hparams *hp, int layer, int n_tokens)
{
    const layer_hparams *lh = &hp->layer[layer];
    if (lh->kv_source != layer) { /* the segment still ends here: the trace keeps its blocks */
        forward_trace_op(s, "ROPE", "qk_norm_rope_kv_store");
        return;
    }
    int dk = lh->head_dim_k, dv = lh->head_dim_v;
    int64_t k_head, v_head;
    kv_head_strides(s, hp, layer, &k_head, &v_head);
    int32_t positions = kv_positions(s, hp, layer);
    quantize_row_fn to_f16 = kernels_quantize_row(s->kernels, TYPE_F16);
    uint16_t *k16 = (uint16_t *)s->k_cache + s->kv_k_offset[layer], *v16 = (uint16_t *)s->v_cache + s->kv_v_offset[layer];
    float *k32 = (float *)s->k_cache + s->kv_k_offset[layer], *v32 = (float *)s->v_cache + s->kv_v_offset[layer];
    for (int t = 0; t < n_tokens; t++) {
        int64_t index = s->positions[t] % positions; /* a ring keeps the latest positions */
        for (int h = 0; h < lh->n_head_kv; h++) {
            const float *k = s->k + ((int64_t)t * lh->n_head_kv + h) * dk;
            const float *v = s->v + ((int64_t)t * lh->n_head_kv + h) * dv;
            int64_t k_base = h * k_head + attend_key_index(index, 0, dk);
            int64_t v_base = h * v_head + index * dv;
            if (s->kv_f16) {
                /* a key's dimensions are ATTEND_TILE_KEYS apart: rounded one by one as
                 * the F16 row quantizer does */
                for (int i = 0; i < dk; i++)
                    k16[k_base + (int64_t)i * ATTEND_TILE_KEYS] = fp32_to_fp16(k[i]);
                to_f16(v, v16 + v_base, dv);
            } else {
                for (int i = 0; i < dk; i++)
                    k32[k_base + (int64_t)i * ATTEND_TILE_KEYS] = k[i];
                memcpy(v32 + v_base, v, (size_t)dv * sizeof(float));
            }
        }
    }
    /* the segment since the projections: the head norms, RoPE and the store */
    forward_trace_op(s, "ROPE", "qk_norm_rope_kv_store");
}

void attention_layer(run_state *s, const model_hparams *hp, int layer, int n_tokens, const float *sinks)
{
    const layer_hparams *lh = &hp->layer[layer];
    /* a layer reading another's cache (kv_source) has that layer's offsets
     * (layout_caches) and, as bind checked, its head sizes */
    size_t element = s->kv_f16 ? sizeof(uint16_t) : sizeof(float);
    int64_t k_head, v_head;
    kv_head_strides(s, hp, layer, &k_head, &v_head);
    int32_t positions = kv_positions(s, hp, layer);
    attention_params params = {
        .n_tokens = n_tokens,
        .positions = s->positions,
        .q = s->q,
        .q_stride = (int64_t)lh->n_head * lh->head_dim_k,
        .n_head = lh->n_head,
        .n_head_kv = lh->n_head_kv,
        .head_dim_k = lh->head_dim_k,
        .head_dim_v = lh->head_dim_v,
        .k_cache = (const uint8_t *)s->k_cache + s->kv_k_offset[layer] * element,
        .v_cache = (const uint8_t *)s->v_cache + s->kv_v_offset[layer] * element,
        .k_head_stride = k_head,
        .v_head_stride = v_head,
        .cache_f16 = s->kv_f16,
        .kq_scale = hp->kq_scale,
        .n_swa = hp->layer_is_swa[layer] ? hp->n_swa : 0,
        .ring = positions < s->n_ctx ? positions : 0,
        .sinks = sinks,
        .out = s->attn,
        .out_stride = (int64_t)lh->n_head * lh->head_dim_v,
        .scratch = s->attention_scratch,
        .scratch_per_thread = s->attention_scratch_per_thread,
        .kernels = s->kernels,
    };
    attention(s->pool, &params);
    forward_trace_op(s, "FLASH_ATTN_EXT", "attention");
}

void attention_mixer(run_state *s, const model_hparams *hp, const layer_weights *layer, int il, int n_tokens,
                     const float *sinks)
{
    const layer_hparams *lh = &hp->layer[il];
    bool swa = hp->layer_is_swa[il];
    const rope_config *rope = swa ? &hp->rope_swa : &hp->rope;
    const float *rope_cache = swa ? s->rope_cache_swa : s->rope_cache;
    attention_qkv(s, hp, layer, n_tokens);
    norm_rope_heads(s->q, &layer->attn_q_norm, rope, rope_cache, n_tokens, lh->n_head, lh->head_dim_k, hp->rms_eps);
    norm_rope_heads(s->k, &layer->attn_k_norm, rope, rope_cache, n_tokens, lh->n_head_kv, lh->head_dim_k,
                    hp->rms_eps);
    kv_cache_store(s, hp, il, n_tokens);
    attention_layer(s, hp, il, n_tokens, sinks);
}

int transformer_layer(const model *m, run_state *s, const forward_batch *batch, int il, const moe_config *config,
                      const float *sinks, bmoe_error *err)
{
    const model_hparams *hp = &m->hparams;
    const layer_weights *layer = &m->weights.layers[il];
    int n = batch->n_tokens;
    attention_mixer(s, hp, layer, il, n, sinks);
    /* the last layer goes on with the rows that give logits only */
    int first = forward_first_row(s, batch, il, hp->n_layer), rows = n - first;
    if (rows == 0)
        return 0;
    attention_output(s, hp, layer, first, rows);
    vector_add(s->h + (int64_t)first * hp->n_embd, s->block_out, rows * hp->n_embd);
    return ffn_residual(s, m, layer, il, config, first, rows, err);
}

int forward_layers(const model *m, run_state *s, const forward_batch *batch, forward_layer_fn layer, bmoe_error *err)
{
    for (int il = 0; il < m->hparams.n_layer; il++)
        if (forward_check_abort(s, il, err) != 0 || layer(m, s, batch, il, err) != 0)
            return -1;
    if (s->hidden_rows) /* what the output matrix reads: after the final norm */
        rmsnorm_rows(s->hidden_rows + (int64_t)batch->position * m->hparams.n_embd, s->h, &m->weights.output_norm,
                     batch->n_tokens, m->hparams.n_embd, m->hparams.rms_eps);
    output_logits(m, s, batch);
    return 0;
}

int head_forward_layers(const model *m, run_state *s, const forward_batch *batch, const float *hidden,
                        forward_layer_fn layer, float *hidden_out, bmoe_error *err)
{
    const model_hparams *hp = &m->hparams;
    int il = hp->n_layer, n = batch->n_tokens;
    int64_t n_embd = hp->n_embd;
    const layer_weights *l = &m->weights.layers[il];
    if (!s->head_input)
        return error_set_status(err, BMOE_ERR_INVALID_ARGUMENT,
                                "draft head: the context holds no cache for it (run_state_enable_head)");
    /* the observers and the prediction probe know the n_layer layers the
     * forward pass runs; the head is the drafter's business */
    bmoe_route_callback route_callback = s->route_callback;
    bmoe_trace_callback trace_callback = s->trace_callback;
    bmoe_route_override route_override = s->route_override, route_guess = s->route_guess;
    bmoe_predict_score *probe = s->probe;
    s->route_callback = NULL;
    s->trace_callback = NULL;
    s->route_override = NULL;
    s->route_guess = NULL;
    s->probe = NULL;
    const tensor_view *embd = l->nextn_embed_tokens.name ? &l->nextn_embed_tokens : &m->weights.token_embd;
    int status = embed_rows(m, embd, s, batch, err);
    if (status == 0) {
        rope_cache_batch(&hp->rope, s->positions, n, s->rope_cache);
        /* h = eh_proj . [enorm(embedding), hnorm(hidden)] */
        for (int t = 0; t < n; t++) {
            float *row = s->head_input + (int64_t)t * 2 * n_embd;
            rmsnorm_rows(row, s->h + (int64_t)t * n_embd, &l->nextn_enorm, 1, n_embd, hp->rms_eps);
            rmsnorm_rows(row + n_embd, hidden + (int64_t)t * n_embd, &l->nextn_hnorm, 1, n_embd, hp->rms_eps);
        }
        const tensor_view *eh_proj = &l->nextn_eh_proj;
        linear(s, s->head_input, 2 * n_embd, n, 1, &eh_proj, &s->h, NULL);
        status = layer(m, s, batch, il, err);
    }
    s->route_callback = route_callback;
    s->trace_callback = trace_callback;
    s->route_override = route_override;
    s->route_guess = route_guess;
    s->probe = probe;
    if (status != 0)
        return -1;
    const tensor_view *norm = l->nextn_shared_head_norm.name ? &l->nextn_shared_head_norm : &m->weights.output_norm;
    rmsnorm_rows(s->x, s->h, norm, n, n_embd, hp->rms_eps);
    if (hidden_out)
        memcpy(hidden_out, s->x, (size_t)n * (size_t)n_embd * sizeof *s->x);
    int count = n - batch->first_output;
    if (count > 0 && batch->logits) {
        const tensor_view *head = l->nextn_shared_head_head.name ? &l->nextn_shared_head_head : &m->weights.output;
        linear(s, s->x + (int64_t)batch->first_output * n_embd, n_embd, count, 1, &head, &batch->logits, NULL);
    }
    return 0;
}

int forward_first_row(const run_state *s, const forward_batch *batch, int layer, int n_layer)
{
    /* the draft head reads the last layer's output at every position */
    if (layer != n_layer - 1 || s->hidden_rows)
        return 0;
    if (!batch->logits)
        return batch->n_tokens;
    return batch->first_output;
}

void output_logits(const model *m, run_state *s, const forward_batch *batch)
{
    if (s->trace_callback) {
        forward_trace(s, m->hparams.n_layer - 1, "blk");
        forward_trace_op(s, "ADD", "ffn_residual");
        s->trace_layer = -1;
    }
    int count = batch->n_tokens - batch->first_output;
    if (count > 0 && batch->logits) {
        int64_t n_embd = m->hparams.n_embd;
        const float *h = s->h + (int64_t)batch->first_output * n_embd;
        rmsnorm_rows(s->x, h, &m->weights.output_norm, count, n_embd, m->hparams.rms_eps);
        const tensor_view *output = &m->weights.output;
        linear(s, s->x, n_embd, count, 1, &output, &batch->logits, NULL);
        float cap = m->hparams.final_softcap;
        if (cap > 0.0f) {
            int64_t n = (int64_t)count * m->hparams.n_vocab;
            for (int64_t i = 0; i < n; i++)
                batch->logits[i] = cap * tanhf(batch->logits[i] / cap);
        }
    }
    if (s->trace_callback) {
        forward_trace(s, -1, "post");
        forward_trace_op(s, "MUL_MAT", "output");
    }
}

void shortconv_block(run_state *s, const model *m, int il, int n_tokens, int first, float *out)
{
    const layer_weights *layer = &m->weights.layers[il];
    int64_t n_embd = m->hparams.n_embd, stride = s->mixer_floats;
    const tensor_view *in_proj = &layer->shortconv_in_proj, *out_proj = &layer->shortconv_out_proj;
    linear(s, s->x, n_embd, n_tokens, 1, &in_proj, &s->mixer, &stride);
    /* per row [B | C | X]: B becomes B * X, then the convolution of it, then C * conv */
    for (int t = 0; t < n_tokens; t++) {
        float *b = s->mixer + (int64_t)t * stride;
        const float *x = b + 2 * n_embd;
        for (int64_t i = 0; i < n_embd; i++)
            b[i] *= x[i];
    }
    causal_conv1d(s->mixer, stride, s->mixer, stride, n_tokens, n_embd, layer->shortconv_conv.data,
                  m->hparams.n_conv_taps, s->recurrent + s->recurrent_offset[il]);
    for (int t = 0; t < n_tokens; t++) {
        float *y = s->mixer + (int64_t)t * stride;
        const float *c = y + n_embd;
        for (int64_t i = 0; i < n_embd; i++)
            y[i] *= c[i];
    }
    if (first < n_tokens)
        linear(s, s->mixer + (int64_t)first * stride, stride, n_tokens - first, 1, &out_proj, &out, NULL);
    forward_trace_op(s, "SSM_CONV", "shortconv");
}

void ffn_glu(run_state *s, const tensor_view *gate, const tensor_view *up, const tensor_view *down,
             enum moe_activation activation, const float *x, int n_tokens, float *out)
{
    const tensor_view *gate_up[2] = {gate, up};
    float *outs[2] = {s->ffn_gate, s->ffn_up};
    linear(s, x, gate->ne[0], n_tokens, 2, gate_up, outs, NULL);
    int64_t n_ff = gate->ne[1];
    if (activation == MOE_GELU_GLU)
        gelu_glu_f16(s->ffn_gate, s->ffn_gate, s->ffn_up, (int64_t)n_tokens * n_ff);
    else
        silu_glu(s->ffn_gate, s->ffn_gate, s->ffn_up, (int64_t)n_tokens * n_ff);
    linear(s, s->ffn_gate, n_ff, n_tokens, 1, &down, &out, NULL);
    forward_trace_op(s, "MUL_MAT", "ffn");
}

int ffn_residual(run_state *s, const model *m, const layer_weights *layer, int il, const moe_config *config,
                 int first, int rows, bmoe_error *err)
{
    const model_hparams *hp = &m->hparams;
    float *h = s->h + (int64_t)first * hp->n_embd;
    rmsnorm_rows(s->x, h, &layer->ffn_norm, rows, hp->n_embd, hp->rms_eps);
    if (hp->layer[il].ffn == FFN_MOE) {
        if (moe_layer(s, m, layer, il, config, s->x, NULL, s->positions + first, rows, s->block_out, err) != 0)
            return -1;
        if (layer->ffn_gate_shexp.data) {
            /* llama.cpp adds the shared expert to the routed sum, then the sum to h */
            if (layer->ffn_gate_inp_shexp.data)
                shared_expert_gated(s, layer, s->x, rows, s->block_out2);
            else
                ffn_glu(s, &layer->ffn_gate_shexp, &layer->ffn_up_shexp, &layer->ffn_down_shexp, MOE_SILU_GLU,
                        s->x, rows, s->block_out2);
            vector_add(s->block_out, s->block_out2, rows * hp->n_embd);
        }
    } else {
        ffn_glu(s, &layer->ffn_gate, &layer->ffn_up, &layer->ffn_down, MOE_SILU_GLU, s->x, rows, s->block_out);
    }
    vector_add(h, s->block_out, rows * hp->n_embd);
    return 0;
}

void shared_expert_gated(run_state *s, const layer_weights *layer, const float *x, int n_tokens, float *out)
{
    ffn_glu(s, &layer->ffn_gate_shexp, &layer->ffn_up_shexp, &layer->ffn_down_shexp, MOE_SILU_GLU, x, n_tokens,
            out);
    int64_t n_embd = layer->ffn_gate_inp_shexp.ne[0];
    const float *w = layer->ffn_gate_inp_shexp.data;
    for (int t = 0; t < n_tokens; t++) {
        const float *row = x + (int64_t)t * n_embd;
        float logit = 0.0f;
        for (int64_t i = 0; i < n_embd; i++)
            logit += w[i] * row[i];
        sigmoid(&logit, 1);
        vector_scale(out + (int64_t)t * n_embd, out + (int64_t)t * n_embd, logit, n_embd);
    }
}

/* One token's DeltaNet heads: each is its own state, recurrence, norm and
 * gate, so they run on the pool's threads in any split with the same bits. */
typedef struct deltanet_heads_run {
    const model_hparams *hp;
    const layer_weights *layer;
    float *heads, *row;
    const float *q, *k, *v;
    int64_t z_at, beta_at, alpha_at, o_at;
} deltanet_heads_run;

static void deltanet_heads_task(void *context, int thread_index, int n_threads)
{
    const deltanet_heads_run *r = context;
    const model_hparams *hp = r->hp;
    int hk = hp->ssm_k_heads, hv = hp->ssm_v_heads, dk = hp->ssm_dk, dv = hp->ssm_dv;
    const float *dt_bias = r->layer->ssm_dt_bias.data, *a = r->layer->ssm_a.data;
    float *row = r->row;
    for (int j = hv * thread_index / n_threads; j < hv * (thread_index + 1) / n_threads; j++) {
        /* V head j pairs with K head j mod Hk (the converter's tiled order) */
        int i = j % hk;
        float decay = expf(softplus(row[r->alpha_at + j] + dt_bias[j]) * a[j]);
        float *o = row + r->o_at + (int64_t)j * dv;
        deltanet_step(r->heads + (int64_t)j * dk * dv, r->q + (int64_t)i * dk, r->k + (int64_t)i * dk,
                      r->v + (int64_t)j * dv, row[r->beta_at + j], decay, dk, dv, o);
        /* o = rmsnorm(o; ssm_norm) * silu(z) */
        rmsnorm(o, o, r->layer->ssm_norm.data, dv, hp->rms_eps);
        silu_glu(o, row + r->z_at + (int64_t)j * dv, o, dv);
    }
}

void deltanet_block(run_state *s, const model *m, int il, int n_tokens, int first, float *out)
{
    const model_hparams *hp = &m->hparams;
    const layer_weights *layer = &m->weights.layers[il];
    int64_t n_embd = hp->n_embd, stride = s->mixer_floats;
    int hk = hp->ssm_k_heads, hv = hp->ssm_v_heads, dk = hp->ssm_dk, dv = hp->ssm_dv;
    int64_t kd = (int64_t)hk * dk, vd = (int64_t)hv * dv, channels = 2 * kd + vd;
    /* a mixer row: [q k v (C) | z (vd) | beta (Hv) | alpha (Hv) | o (vd)] */
    int64_t z_at = channels, beta_at = z_at + vd, alpha_at = beta_at + hv, o_at = alpha_at + hv;
    const tensor_view *projections[4] = {&layer->attn_qkv, &layer->attn_gate, &layer->ssm_beta, &layer->ssm_alpha};
    float *outs[4] = {s->mixer, s->mixer + z_at, s->mixer + beta_at, s->mixer + alpha_at};
    const int64_t strides[4] = {stride, stride, stride, stride};
    linear(s, s->x, n_embd, n_tokens, 4, projections, outs, strides);
    forward_trace_op(s, "MUL_MAT", "ssm_in");

    float *conv_state = s->recurrent + s->recurrent_offset[il];
    float *heads = conv_state + (int64_t)(hp->ssm_conv_taps - 1) * channels; /* Hv matrices dk x dv */
    causal_conv1d(s->mixer, stride, s->mixer, stride, n_tokens, channels, layer->ssm_conv1d.data,
                  hp->ssm_conv_taps, conv_state);
    for (int t = 0; t < n_tokens; t++) {
        float *row = s->mixer + (int64_t)t * stride;
        for (int64_t c = 0; c < channels; c++)
            row[c] = row[c] / (1.0f + expf(-row[c])); /* silu */
        float *q = row, *k = row + kd, *v = row + 2 * kd;
        for (int i = 0; i < hk; i++) {
            l2norm(q + (int64_t)i * dk, dk, hp->rms_eps);
            l2norm(k + (int64_t)i * dk, dk, hp->rms_eps);
        }
        sigmoid(row + beta_at, hv);
        deltanet_heads_run run = {.hp = hp, .layer = layer, .heads = heads, .row = row,
                                  .q = q, .k = k, .v = v, .z_at = z_at, .beta_at = beta_at, .alpha_at = alpha_at,
                                  .o_at = o_at};
        thread_pool_run(s->pool, deltanet_heads_task, &run);
    }
    forward_trace_op(s, "GATED_DELTA_NET", "deltanet");
    if (first < n_tokens) {
        const tensor_view *ssm_out = &layer->ssm_out;
        linear(s, s->mixer + (int64_t)first * stride + o_at, stride, n_tokens - first, 1, &ssm_out, &out, NULL);
    }
    forward_trace_op(s, "MUL_MAT", "ssm_out");
}

void attention_qkv_gated(run_state *s, const model_hparams *hp, const layer_weights *layer, int il, int n_tokens)
{
    const layer_hparams *lh = &hp->layer[il];
    int64_t n_embd = hp->n_embd, d = lh->head_dim_k, stride = s->mixer_floats;
    int64_t q_dim = (int64_t)lh->n_head * d;
    rmsnorm_rows(s->x, s->h, &layer->attn_norm, n_tokens, n_embd, hp->rms_eps);
    const tensor_view *qkv[3] = {&layer->attn_q, &layer->attn_k, &layer->attn_v};
    float *qkv_out[3] = {s->mixer, s->k, s->v};
    const int64_t strides[3] = {stride, layer->attn_k.ne[1], layer->attn_v.ne[1]};
    linear(s, s->x, n_embd, n_tokens, 3, qkv, qkv_out, strides);
    /* per head [query | gate]: queries to s->q, gates packed to the row's start */
    for (int t = 0; t < n_tokens; t++) {
        float *row = s->mixer + (int64_t)t * stride;
        for (int h = 0; h < lh->n_head; h++) {
            memcpy(s->q + (int64_t)t * q_dim + h * d, row + 2 * h * d, (size_t)d * sizeof(float));
            memmove(row + h * d, row + 2 * h * d + d, (size_t)d * sizeof(float));
        }
    }
    forward_trace_op(s, "MUL_MAT", "attn_norm_qkv");
}

void attention_gate(run_state *s, const model_hparams *hp, int il, int n_tokens)
{
    const layer_hparams *lh = &hp->layer[il];
    int64_t attn_dim = (int64_t)lh->n_head * lh->head_dim_v;
    for (int t = 0; t < n_tokens; t++) {
        float *gate = s->mixer + (int64_t)t * s->mixer_floats;
        float *o = s->attn + (int64_t)t * attn_dim;
        sigmoid(gate, attn_dim);
        for (int64_t i = 0; i < attn_dim; i++)
            o[i] *= gate[i];
    }
}

static void trace_now(int64_t *ns, int64_t *majflt)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    *ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
    struct rusage usage;
    *majflt = getrusage(RUSAGE_SELF, &usage) == 0 ? usage.ru_majflt : 0;
}

void forward_trace(run_state *s, int layer, const char *name)
{
    int64_t ns, majflt;
    trace_now(&ns, &majflt);
    if (name) {
        char label[32];
        if (strcmp(name, "blk") == 0)
            snprintf(label, sizeof label, "blk.%d", layer);
        else
            snprintf(label, sizeof label, "%s", name);
        bmoe_trace_event event = {
            .layer = strcmp(name, "blk") == 0 ? layer : -1,
            .name = label,
            .wall_ns = ns - s->trace_last_ns,
            .majflt = majflt - s->trace_last_majflt,
        };
        s->trace_callback(s->trace_user, &event);
    }
    s->trace_last_ns = ns;
    s->trace_last_majflt = majflt;
}

void forward_trace_op(run_state *s, const char *op, const char *name)
{
    if (!s->trace_callback || !s->trace_ops)
        return;
    int64_t ns, majflt;
    trace_now(&ns, &majflt);
    char label[48];
    if (s->trace_layer >= 0)
        snprintf(label, sizeof label, "%s-%d", name, s->trace_layer);
    else
        snprintf(label, sizeof label, "%s", name);
    bmoe_trace_event event = {
        .layer = s->trace_layer,
        .name = label,
        .op = op,
        .wall_ns = ns - s->trace_op_last_ns,
        .majflt = majflt - s->trace_op_last_majflt,
    };
    s->trace_callback(s->trace_user, &event);
    s->trace_op_last_ns = ns;
    s->trace_op_last_majflt = majflt;
}

int forward_check_abort(run_state *s, int layer, bmoe_error *err)
{
    if (s->trace_callback) {
        forward_trace(s, layer - 1, layer == 0 ? "pre" : "blk");
        if (layer == 0)
            forward_trace_op(s, "GET_ROWS", "embd");
        s->trace_layer = layer;
    }
    if (s->abort_requested && s->abort_requested(s->abort_user))
        return error_set_status(err, BMOE_ERR_ABORTED, "forward: aborted before layer %d", layer);
    return 0;
}

int keyed_transformer_layer(const model *m, run_state *s, const forward_batch *batch, int il, bmoe_error *err)
{
    moe_config config = model_moe_config(&m->hparams);
    return transformer_layer(m, s, batch, il, &config, NULL, err);
}

int keyed_transformer_forward(const model *m, run_state *s, const forward_batch *batch, bmoe_error *err)
{
    if (embed_batch(m, s, batch, err) != 0)
        return -1;
    rope_cache_batch(&m->hparams.rope, s->positions, batch->n_tokens, s->rope_cache);
    return forward_layers(m, s, batch, keyed_transformer_layer, err);
}

int keyed_transformer_head_forward(const model *m, run_state *s, const forward_batch *batch, const float *hidden,
                                   float *hidden_out, bmoe_error *err)
{
    return head_forward_layers(m, s, batch, hidden, keyed_transformer_layer, hidden_out, err);
}
