/* The scalar attention kernel: the straightforward two-pass softmax the tiled
 * kernels are tested against. For each query: every visible key's q.k with
 * the quant table's vec_dot of the cache type over the key gathered into a
 * row (the query rounded to f16 for an f16 cache, as the reference engine
 * does), the exact maximum, exps in
 * float (libm expf) summed in double in position order, and the weighted
 * values added in position order. */
#include <math.h>

#include "attend_common.h"
#include "base/fp16.h"
#include "kernels_dispatch.h"

int64_t attend_scratch_floats(int64_t n_ctx, int head_dim_k)
{
    /* scalar: a score per visible position, then the query and a key row in
     * the cache's format; tiled: attend_common.h */
    int64_t scalar = n_ctx + 2 * (int64_t)head_dim_k;
    int64_t tiled = attend_tiled_scratch_floats(head_dim_k);
    return scalar > tiled ? scalar : tiled;
}

static void scalar_attend(const attend_job *job, uint32_t type)
{
    vec_dot_fn dot = quant_format_of(type)->vec_dot;
    int f16 = type == TYPE_F16;
    for (int g = 0; g < job->n_queries; g++) {
        const attend_query *query = &job->queries[g];
        int32_t count = query->last - query->first + 1;
        float *scores = job->scratch;
        uint16_t *query16 = (uint16_t *)(scores + count);
        float *key_row = scores + count + job->head_dim_k;
        const uint8_t *keys = job->keys;
        const uint8_t *values = job->values;
        const void *q = query->q;
        if (f16) {
            for (int i = 0; i < job->head_dim_k; i++)
                query16[i] = fp32_to_fp16(query->q[i]);
            q = query16;
        }
        float max = job->sinks ? query->sink : -INFINITY;
        for (int32_t j = 0; j < count; j++) {
            for (int i = 0; i < job->head_dim_k; i++) {
                size_t index = (size_t)attend_key_index(attend_index(job, query->first + j), i, job->head_dim_k);
                if (f16)
                    memcpy((uint16_t *)key_row + i, keys + 2 * index, sizeof(uint16_t));
                else
                    memcpy(key_row + i, keys + 4 * index, sizeof(float));
            }
            float s = dot(job->head_dim_k, key_row, q) * job->scale;
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
        if (job->sinks)
            sum += expf(query->sink - max);
        float inverse = (float)(1.0 / sum);

        float *out = query->out;
        for (int i = 0; i < job->head_dim_v; i++)
            out[i] = 0.0f;
        for (int32_t j = 0; j < count; j++) {
            float weight = scores[j] * inverse;
            const uint8_t *row = values + (size_t)attend_index(job, query->first + j) * job->value_stride;
            for (int i = 0; i < job->head_dim_v; i++) {
                float value;
                if (f16) {
                    uint16_t h;
                    memcpy(&h, row + 2 * (size_t)i, sizeof h);
                    value = fp16_to_fp32(h);
                } else {
                    memcpy(&value, row + 4 * (size_t)i, sizeof value);
                }
                out[i] += weight * value;
            }
        }
    }
}

void scalar_attend_f32(const attend_job *job)
{
    scalar_attend(job, TYPE_F32);
}

void scalar_attend_f16(const attend_job *job)
{
    scalar_attend(job, TYPE_F16);
}
