/* Building blocks of the forward pass shared by the architectures: embedding
 * lookup, grouped linear layers (inputs converted once per activation format,
 * all matrices in one parallel step), norms, RoPE over a batch, the KV cache
 * and the output head. The machinery (threads, kernels) stays in here so that
 * each architecture file reads as the math. */
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "../quant/quant.h"
#include "model.h"

int embedding_lookup(const model *m, int32_t token, float *out, bmoe_error *err)
{
    const tensor_view *embd = &m->weights.token_embd;
    if (token < 0 || token >= m->hparams.n_vocab)
        return error_set(err, "eval: token id %d is outside the vocabulary [0, %d)", token, m->hparams.n_vocab);
    const quant_format *format = quant_format_of(embd->type);
    format->dequantize_row((const uint8_t *)embd->data + (size_t)token * embd->row_bytes, out, embd->ne[0]);
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
    for (int t = 0; t < batch->n_tokens; t++) {
        s->positions[t] = batch->position + t;
        if (embedding_lookup(m, batch->tokens[t], s->h + t * m->hparams.n_embd, err) != 0)
            return -1;
    }
    return 0;
}

void linear(run_state *s, const float *x, int64_t x_stride, int n_tokens, int n_matrices,
            const tensor_view *const *weights, float *const *outs, const int64_t *out_strides)
{
    /* slot i holds x converted for weights of activation format slot_format[i]
     * and input length slot_n[i] */
    uint32_t slot_format[3];
    int64_t slot_n[3];
    size_t slot_bytes[3];
    int n_slots = 0;
    matmul_job jobs[3];
    for (int i = 0; i < n_matrices && i < 3; i++) {
        const tensor_view *w = weights[i];
        uint32_t format = quant_format_of(w->type)->activation_type;
        int slot = 0;
        while (slot < n_slots && !(slot_format[slot] == format && slot_n[slot] == w->ne[0]))
            slot++;
        if (slot == n_slots) {
            slot_format[slot] = format;
            slot_n[slot] = w->ne[0];
            slot_bytes[slot] = activation_row_bytes(w->type, w->ne[0]);
            for (int t = 0; t < n_tokens; t++)
                activation_convert(s->kernels, w->type, x + (int64_t)t * x_stride, w->ne[0],
                                   s->activations[slot] + (size_t)t * slot_bytes[slot]);
            n_slots++;
        }
        jobs[i] = (matmul_job){
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
    matmul_run(s->pool, s->kernels, jobs, n_matrices < 3 ? n_matrices : 3);
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
    int64_t q_dim = (int64_t)hp->n_head * hp->head_dim_k, k_dim = (int64_t)hp->n_head_kv * hp->head_dim_k;
    int64_t v_dim = (int64_t)hp->n_head_kv * hp->head_dim_v;
    rmsnorm_rows(s->x, s->h, &layer->attn_norm, n_tokens, n_embd, hp->rms_eps);
    const tensor_view *qkv[3] = {&layer->attn_q, &layer->attn_k, &layer->attn_v};
    float *qkv_out[3] = {s->q, s->k, s->v};
    linear(s, s->x, n_embd, n_tokens, 3, qkv, qkv_out, NULL);
    add_bias(s->q, &layer->attn_q_bias, n_tokens, q_dim);
    add_bias(s->k, &layer->attn_k_bias, n_tokens, k_dim);
    add_bias(s->v, &layer->attn_v_bias, n_tokens, v_dim);
    forward_trace_op(s, "MUL_MAT", "attn_norm_qkv");
}

void attention_output(run_state *s, const model_hparams *hp, const layer_weights *layer, int first, int rows)
{
    int64_t attn_dim = (int64_t)hp->n_head * hp->head_dim_v;
    const tensor_view *wo = &layer->attn_output;
    linear(s, s->attn + (int64_t)first * attn_dim, attn_dim, rows, 1, &wo, &s->block_out, NULL);
    add_bias(s->block_out, &layer->attn_output_bias, rows, hp->n_embd);
    forward_trace_op(s, "MUL_MAT", "attn_output");
}

void kv_cache_store(run_state *s, const model_hparams *hp, int layer, int n_tokens)
{
    int64_t k_dim = (int64_t)hp->n_head_kv * hp->head_dim_k;
    int64_t v_dim = (int64_t)hp->n_head_kv * hp->head_dim_v;
    int64_t k_base = (int64_t)layer * s->n_ctx * k_dim;
    int64_t v_base = (int64_t)layer * s->n_ctx * v_dim;
    quantize_row_fn to_f16 = kernels_quantize_row(s->kernels, TYPE_F16);
    for (int t = 0; t < n_tokens; t++) {
        int64_t position = s->positions[t];
        const float *k = s->k + t * k_dim;
        const float *v = s->v + t * v_dim;
        if (s->kv_f16) {
            to_f16(k, (uint16_t *)s->k_cache + k_base + position * k_dim, k_dim);
            to_f16(v, (uint16_t *)s->v_cache + v_base + position * v_dim, v_dim);
        } else {
            memcpy((float *)s->k_cache + k_base + position * k_dim, k, (size_t)k_dim * sizeof(float));
            memcpy((float *)s->v_cache + v_base + position * v_dim, v, (size_t)v_dim * sizeof(float));
        }
    }
    /* the segment since the projections: the head norms, RoPE and the store */
    forward_trace_op(s, "ROPE", "qk_norm_rope_kv_store");
}

void attention_layer(run_state *s, const model_hparams *hp, int layer, int n_tokens, const float *sinks)
{
    int64_t k_dim = (int64_t)hp->n_head_kv * hp->head_dim_k;
    int64_t v_dim = (int64_t)hp->n_head_kv * hp->head_dim_v;
    size_t element = s->kv_f16 ? sizeof(uint16_t) : sizeof(float);
    attention_params params = {
        .n_tokens = n_tokens,
        .positions = s->positions,
        .q = s->q,
        .q_stride = (int64_t)hp->n_head * hp->head_dim_k,
        .n_head = hp->n_head,
        .n_head_kv = hp->n_head_kv,
        .head_dim_k = hp->head_dim_k,
        .head_dim_v = hp->head_dim_v,
        .k_cache = (const uint8_t *)s->k_cache + (size_t)layer * (size_t)s->n_ctx * (size_t)k_dim * element,
        .v_cache = (const uint8_t *)s->v_cache + (size_t)layer * (size_t)s->n_ctx * (size_t)v_dim * element,
        .cache_f16 = s->kv_f16,
        .kq_scale = hp->kq_scale,
        .n_swa = hp->layer_is_swa[layer] ? hp->n_swa : 0,
        .sinks = sinks,
        .out = s->attn,
        .out_stride = (int64_t)hp->n_head * hp->head_dim_v,
        .scratch = s->attention_scratch,
        .scratch_per_thread = s->attention_scratch_per_thread,
        .kernels = s->kernels,
    };
    attention(s->pool, &params);
    forward_trace_op(s, "FLASH_ATTN_EXT", "attention");
}

int forward_first_row(const run_state *s, const forward_batch *batch, int layer, int n_layer)
{
    (void)s;
    if (layer != n_layer - 1)
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
    }
    if (s->trace_callback) {
        forward_trace(s, -1, "post");
        forward_trace_op(s, "MUL_MAT", "output");
    }
}

void ffn_silu_glu(run_state *s, const layer_weights *layer, const float *x, int n_tokens, int n_embd,
                  float *out)
{
    const tensor_view *gate_up[2] = {&layer->ffn_gate, &layer->ffn_up};
    float *outs[2] = {s->ffn_gate, s->ffn_up};
    linear(s, x, n_embd, n_tokens, 2, gate_up, outs, NULL);
    int64_t n_ff = layer->ffn_gate.ne[1];
    silu_glu(s->ffn_gate, s->ffn_gate, s->ffn_up, (int64_t)n_tokens * n_ff);
    const tensor_view *down = &layer->ffn_down;
    linear(s, s->ffn_gate, n_ff, n_tokens, 1, &down, &out, NULL);
    forward_trace_op(s, "MUL_MAT", "ffn");
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
