/* Causal GQA attention over the KV cache, with sliding windows and attention
 * sinks. One (query token, head) pair is one unit of work; pairs are split
 * over the pool's threads in contiguous ranges. Each pair's result depends
 * only on its own query and the keys it sees, visited in increasing position
 * order, so a token's output is the same in any batch and on any thread.
 *
 * The products run on the kernel set: the visible K rows of a head are the
 * "weight rows" of one dot_rows call against the query (rounded to f16 once
 * for an f16 cache, which is also what the reference does), and the values
 * are accumulated in position order by one call of the set's axpy. */
#include <math.h>

#include "../kernels/matmul.h"
#include "ops.h"

int64_t attention_scratch_floats(int n_ctx, int head_dim_k)
{
    /* scores for every visible position, then the query head in the cache's
     * format (f16 takes half of the head_dim_k floats) */
    return (int64_t)n_ctx + head_dim_k;
}

static void attention_one_head(const attention_params *p, dot_rows_fn dot, axpy_fn axpy, int token, int head,
                               float *scratch)
{
    int group = p->n_head / p->n_head_kv;
    int kv_head = head / group;
    int32_t position = p->positions[token];
    int32_t first = 0;
    if (p->n_swa > 0 && position - p->n_swa + 1 > 0)
        first = position - p->n_swa + 1;
    int32_t count = position - first + 1;
    size_t element = p->cache_f16 ? 2 : sizeof(float);
    size_t k_row_bytes = (size_t)p->n_head_kv * (size_t)p->head_dim_k * element;
    size_t v_row_bytes = (size_t)p->n_head_kv * (size_t)p->head_dim_v * element;
    float *scores = scratch;
    const float *q = p->q + (int64_t)token * p->q_stride + (int64_t)head * p->head_dim_k;

    /* f32 queries are their own activation format; f16 ones are converted */
    const void *query = q;
    if (p->cache_f16) {
        void *converted = scratch + (p->scratch_per_thread - p->head_dim_k); /* after the scores */
        activation_convert(p->kernels ? p->kernels : kernels_scalar(), TYPE_F16, q, p->head_dim_k, converted);
        query = converted;
    }

    const uint8_t *k = (const uint8_t *)p->k_cache + (size_t)first * k_row_bytes +
                       (size_t)kv_head * (size_t)p->head_dim_k * element;
    dot(p->head_dim_k, k, k_row_bytes, count, query, scores);

    float max = p->sinks ? p->sinks[head] : -INFINITY;
    for (int32_t j = 0; j < count; j++) {
        float s = scores[j] * p->kq_scale;
        scores[j] = s;
        if (s > max)
            max = s;
    }
    double sum = 0.0;
    for (int32_t j = 0; j < count; j++) {
        float e = expf(scores[j] - max);
        scores[j] = e;
        sum += e;
    }
    if (p->sinks)
        sum += expf(p->sinks[head] - max);
    float inverse = (float)(1.0 / sum);

    float *out = p->out + (int64_t)token * p->out_stride + (int64_t)head * p->head_dim_v;
    for (int i = 0; i < p->head_dim_v; i++)
        out[i] = 0.0f;
    const uint8_t *v = (const uint8_t *)p->v_cache + (size_t)first * v_row_bytes +
                       (size_t)kv_head * (size_t)p->head_dim_v * element;
    for (int32_t j = 0; j < count; j++)
        scores[j] *= inverse;
    axpy(p->head_dim_v, count, scores, v, v_row_bytes, out);
}

/* The parameters and the kernels chosen for them, once per call. */
typedef struct attention_run {
    const attention_params *params;
    dot_rows_fn dot;
    axpy_fn axpy;
} attention_run;

static void attention_task(void *context, int thread_index, int n_threads)
{
    const attention_run *run = context;
    const attention_params *p = run->params;
    int64_t n_items = (int64_t)p->n_tokens * p->n_head;
    int64_t begin = n_items * thread_index / n_threads;
    int64_t end = n_items * (thread_index + 1) / n_threads;
    float *scratch = p->scratch + (int64_t)thread_index * p->scratch_per_thread;
    for (int64_t item = begin; item < end; item++)
        attention_one_head(p, run->dot, run->axpy, (int)(item / p->n_head), (int)(item % p->n_head), scratch);
}

void attention(thread_pool *pool, const attention_params *params)
{
    uint32_t type = params->cache_f16 ? TYPE_F16 : TYPE_F32;
    attention_run run = {
        .params = params,
        .dot = kernels_dot_rows(params->kernels, type),
        .axpy = kernels_axpy(params->kernels, type),
    };
    thread_pool_run(pool, attention_task, &run);
}
