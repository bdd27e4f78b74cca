/* Causal GQA attention over the KV cache, with sliding windows and attention
 * sinks. One (query token, head) pair is one unit of work; pairs are split
 * over the pool's threads in contiguous ranges. Each pair's result depends
 * only on its own query and the keys it sees, visited in increasing position
 * order, so a token's output is the same in any batch and on any thread. */
#include <math.h>

#include "../base/fp16.h"
#include "ops.h"

int64_t attention_scratch_floats(int n_ctx, int head_dim_k)
{
    /* scores for every visible position, then the (rounded) query head */
    return (int64_t)n_ctx + head_dim_k;
}

static float dot_f32(const float *a, const float *b, int n)
{
    float sum = 0.0f;
    for (int i = 0; i < n; i++)
        sum += a[i] * b[i];
    return sum;
}

static float dot_f16(const float *a, const uint16_t *b, int n)
{
    float sum = 0.0f;
    for (int i = 0; i < n; i++)
        sum += a[i] * fp16_to_fp32(b[i]);
    return sum;
}

static void attention_one_head(const attention_params *p, int token, int head, float *scratch)
{
    int group = p->n_head / p->n_head_kv;
    int kv_head = head / group;
    int32_t position = p->positions[token];
    int32_t first = 0;
    if (p->n_swa > 0 && position - p->n_swa + 1 > 0)
        first = position - p->n_swa + 1;
    int64_t k_row = (int64_t)p->n_head_kv * p->head_dim_k;
    int64_t v_row = (int64_t)p->n_head_kv * p->head_dim_v;
    float *scores = scratch;
    float *query = scratch + (p->scratch_per_thread - p->head_dim_k); /* after the scores */
    const float *q = p->q + (int64_t)token * p->q_stride + (int64_t)head * p->head_dim_k;

    /* K is stored in f16, and the reference rounds Q to f16 for q.k too. */
    if (p->cache_f16) {
        for (int i = 0; i < p->head_dim_k; i++)
            query[i] = fp16_to_fp32(fp32_to_fp16(q[i]));
    } else {
        for (int i = 0; i < p->head_dim_k; i++)
            query[i] = q[i];
    }

    float max = p->sinks ? p->sinks[head] : -INFINITY;
    for (int32_t j = first; j <= position; j++) {
        float s;
        if (p->cache_f16) {
            const uint16_t *k = (const uint16_t *)p->k_cache + j * k_row + (int64_t)kv_head * p->head_dim_k;
            s = dot_f16(query, k, p->head_dim_k);
        } else {
            const float *k = (const float *)p->k_cache + j * k_row + (int64_t)kv_head * p->head_dim_k;
            s = dot_f32(query, k, p->head_dim_k);
        }
        s *= p->kq_scale;
        scores[j - first] = s;
        if (s > max)
            max = s;
    }

    int32_t count = position - first + 1;
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
    for (int32_t j = 0; j < count; j++) {
        float weight = scores[j] * inverse;
        int64_t row = (int64_t)(first + j) * v_row + (int64_t)kv_head * p->head_dim_v;
        if (p->cache_f16) {
            const uint16_t *v = (const uint16_t *)p->v_cache + row;
            for (int i = 0; i < p->head_dim_v; i++)
                out[i] += weight * fp16_to_fp32(v[i]);
        } else {
            const float *v = (const float *)p->v_cache + row;
            for (int i = 0; i < p->head_dim_v; i++)
                out[i] += weight * v[i];
        }
    }
}

static void attention_task(void *context, int thread_index, int n_threads)
{
    const attention_params *p = context;
    int64_t n_items = (int64_t)p->n_tokens * p->n_head;
    int64_t begin = n_items * thread_index / n_threads;
    int64_t end = n_items * (thread_index + 1) / n_threads;
    float *scratch = p->scratch + (int64_t)thread_index * p->scratch_per_thread;
    for (int64_t item = begin; item < end; item++)
        attention_one_head(p, (int)(item / p->n_head), (int)(item % p->n_head), scratch);
}

void attention(thread_pool *pool, const attention_params *params)
{
    thread_pool_run(pool, attention_task, (void *)params);
}
