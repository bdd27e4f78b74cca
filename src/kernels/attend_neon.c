/* NEON tiled attention (attend_common.h) for F32 and F16 caches.
 *
 * Scores: keys over lanes, 8 keys at a time: each dimension of the block's
 * keys is two loads (the cache keeps them side by side, kernels.h) that every
 * query of the job multiplies by its own element of that dimension. Values: 8
 * dimensions at a time for all the job's queries (up to 16 accumulators of
 * the 32 registers), each value row converted once per tile into the buffer
 * the tile's keys used; the last dimensions (head_dim_v mod 8) 4 and then 1
 * at a time with the same fused multiply-adds. */
#include "attend_common.h"
#include "exp_neon.h"
#include "kernels_dispatch.h"

#define NEON_BLOCK_KEYS 16
#define NEON_TILE_BLOCKS (ATTEND_TILE_KEYS / NEON_BLOCK_KEYS)
#define NEON_TILE_VECTORS (ATTEND_TILE_KEYS / 4)

_Static_assert(ATTEND_TILE_KEYS % NEON_BLOCK_KEYS == 0, "tiles hold whole blocks of 16 keys");

KERNEL_INLINE float32x4_t attend_neon_load(const uint8_t *p, const int f16)
{
    if (f16)
        return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)(const void *)p)));
    return vld1q_f32((const float *)(const void *)p);
}

KERNEL_INLINE float attend_neon_element(const uint8_t *p, const int f16)
{
    if (f16) {
        uint16_t h;
        memcpy(&h, p, sizeof h);
        return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
    }
    float value;
    memcpy(&value, p, sizeof value);
    return value;
}

KERNEL_INLINE float32x4_t attend_neon_round_f16(float32x4_t v)
{
    return vcvt_f32_f16(vcvt_f16_f32(v));
}

/* A cache row of dim elements into a zero-padded f32 row of padded floats;
 * round: to f16 precision first (a query against an f16 cache). */
KERNEL_INLINE void attend_neon_row(float *dst, const uint8_t *src, int dim, int64_t padded, const int f16,
                                   const int round)
{
    size_t element = f16 ? 2 : 4;
    int64_t i = 0;
    for (; i + 4 <= dim; i += 4) {
        float32x4_t v = attend_neon_load(src + element * (size_t)i, f16);
        vst1q_f32(dst + i, round ? attend_neon_round_f16(v) : v);
    }
    for (; i < dim; i++) {
        float v = attend_neon_element(src + element * (size_t)i, f16);
        dst[i] = round ? vgetq_lane_f32(attend_neon_round_f16(vdupq_n_f32(v)), 0) : v;
    }
    for (; i < padded; i++)
        dst[i] = 0.0f;
}

/* q.k for Q queries (dimension-major, attend_layout) and the 8 keys at block
 * (kernels.h: dimension d of the tile's keys side by side, ATTEND_TILE_KEYS
 * elements apart): scores[g * ATTEND_TILE_KEYS + j] for key j, each one sum
 * in dimension order; with ahead (a block that starts a line), each
 * dimension's line asked for ahead bytes on. */
KERNEL_INLINE void attend_neon_scores(const int Q, const float *queries, const uint8_t *block,
                                      int dim, const int f16, size_t ahead, float *scores)
{
    size_t element = f16 ? 2 : 4, step = (size_t)ATTEND_TILE_KEYS * element;
    float32x4_t acc[ATTEND_MAX_QUERIES][2];
    KERNEL_UNROLLED for (int g = 0; g < Q; g++) acc[g][0] = acc[g][1] = vdupq_n_f32(0.0f);
    for (int d = 0; d < dim; d++) {
        const uint8_t *row = block + (size_t)d * step;
        float32x4_t k0 = attend_neon_load(row, f16), k1 = attend_neon_load(row + 4 * element, f16);
        attend_prefetch_ahead(row, ahead);
        KERNEL_UNROLLED for (int g = 0; g < Q; g++) {
            float q = queries[(int64_t)d * ATTEND_MAX_QUERIES + g];
            acc[g][0] = vfmaq_n_f32(acc[g][0], k0, q);
            acc[g][1] = vfmaq_n_f32(acc[g][1], k1, q);
        }
    }
    KERNEL_UNROLLED for (int g = 0; g < Q; g++) {
        vst1q_f32(scores + g * ATTEND_TILE_KEYS, acc[g][0]);
        vst1q_f32(scores + g * ATTEND_TILE_KEYS + 4, acc[g][1]);
    }
}

KERNEL_INLINE void attend_neon_scores_of(int count, const float *queries, const uint8_t *block, int dim,
                                         const int f16, size_t ahead, float *scores)
{
#define ATTEND_NEON_SCORES(Q) attend_neon_scores(Q, queries, block, dim, f16, ahead, scores)
    ATTEND_FOR_QUERIES(count, ATTEND_NEON_SCORES);
#undef ATTEND_NEON_SCORES
}

/* For Q queries: out[d0 .. d0 + width) = out * scale + the sum over positions
 * low..high of weight * value, 8 dimensions at a time, then 4, then one at a
 * time (fmaf: the same single rounding). weights: the queries' rows of tile
 * weights, ATTEND_TILE_KEYS apart (index: position - tile_start); the values
 * come converted from the tile buffer (rows of padded floats, row 0 at
 * tile_start). */
KERNEL_INLINE void attend_neon_values(const int Q, float *const *outs, const float *weights,
                                      const float *scales, int32_t low, int32_t high, int32_t tile_start,
                                      const float *tile, int64_t padded, int64_t d0, int64_t width)
{
    int64_t d = 0;
    for (; d + 8 <= width; d += 8) {
        float32x4_t acc[ATTEND_MAX_QUERIES][2];
        KERNEL_UNROLLED for (int g = 0; g < Q; g++) {
            const float *out = outs[g] + d0 + d;
            acc[g][0] = vmulq_n_f32(vld1q_f32(out), scales[g]);
            acc[g][1] = vmulq_n_f32(vld1q_f32(out + 4), scales[g]);
        }
        for (int32_t j = low; j <= high; j++) {
            const float *row = tile + (int64_t)(j - tile_start) * padded + d;
            float32x4_t v0 = vld1q_f32(row), v1 = vld1q_f32(row + 4);
            KERNEL_UNROLLED for (int g = 0; g < Q; g++) {
                float weight = weights[g * ATTEND_TILE_KEYS + (j - tile_start)];
                acc[g][0] = vfmaq_n_f32(acc[g][0], v0, weight);
                acc[g][1] = vfmaq_n_f32(acc[g][1], v1, weight);
            }
        }
        KERNEL_UNROLLED for (int g = 0; g < Q; g++) {
            vst1q_f32(outs[g] + d0 + d, acc[g][0]);
            vst1q_f32(outs[g] + d0 + d + 4, acc[g][1]);
        }
    }
    for (; d + 4 <= width; d += 4)
        for (int g = 0; g < Q; g++) {
            float *out = outs[g] + d0 + d;
            float32x4_t acc = vmulq_n_f32(vld1q_f32(out), scales[g]);
            for (int32_t j = low; j <= high; j++)
                acc = vfmaq_n_f32(acc, vld1q_f32(tile + (int64_t)(j - tile_start) * padded + d),
                                  weights[g * ATTEND_TILE_KEYS + (j - tile_start)]);
            vst1q_f32(out, acc);
        }
    for (; d < width; d++)
        for (int g = 0; g < Q; g++) {
            float *out = outs[g] + d0 + d;
            float sum = *out * scales[g];
            for (int32_t j = low; j <= high; j++)
                sum = fmaf(tile[(int64_t)(j - tile_start) * padded + d],
                           weights[g * ATTEND_TILE_KEYS + (j - tile_start)], sum);
            *out = sum;
        }
}

static void attend_neon_values_of(int count, float *const *outs, const float *weights, const float *scales,
                                  int32_t low, int32_t high, int32_t tile_start, const float *tile, int64_t padded,
                                  int64_t d0, int64_t width)
{
#define ATTEND_NEON_VALUES(Q) \
    attend_neon_values(Q, outs, weights, scales, low, high, tile_start, tile, padded, d0, width)
    ATTEND_FOR_QUERIES(count, ATTEND_NEON_VALUES);
#undef ATTEND_NEON_VALUES
}

/* The lanes of 4 keys at start that are positions low..high. */
KERNEL_INLINE uint32x4_t attend_neon_visible(int32_t start, int32_t low, int32_t high)
{
    const int32_t lanes[4] = {0, 1, 2, 3};
    int32x4_t position = vaddq_s32(vdupq_n_s32(start), vld1q_s32(lanes));
    return vandq_u32(vcgeq_s32(position, vdupq_n_s32(low)), vcleq_s32(position, vdupq_n_s32(high)));
}

KERNEL_INLINE void attend_neon(const attend_job *job, const int f16)
{
    attend_layout layout = attend_layout_of(job->scratch, job->head_dim_k);
    int64_t padded = layout.padded_dim;
    int n_queries = job->n_queries;
    size_t element = f16 ? 2 : 4;
    const uint8_t *keys = job->keys, *values = job->values;
    int32_t job_first, job_last;
    attend_job_range(job, &job_first, &job_last);

    float max[ATTEND_MAX_QUERIES], scale[ATTEND_MAX_QUERIES];
    float32x4_t sums[ATTEND_MAX_QUERIES];
    float *outs[ATTEND_MAX_QUERIES];
    for (int g = 0; g < n_queries; g++) {
        const attend_query *query = &job->queries[g];
        attend_neon_row(layout.keys, (const uint8_t *)query->q, job->head_dim_k, padded, 0, f16);
        attend_put_query(&layout, g);
        /* the sink is the first logit seen: e^(sink - sink) = 1 in lane 0 */
        max[g] = job->sinks ? query->sink : -INFINITY;
        sums[g] = vsetq_lane_f32(job->sinks ? 1.0f : 0.0f, vdupq_n_f32(0.0f), 0);
        memset(query->out, 0, (size_t)job->head_dim_v * sizeof(float));
    }

    for (int32_t tile_start = job_first - job_first % ATTEND_TILE_KEYS; tile_start <= job_last;
         tile_start += ATTEND_TILE_KEYS) {
        attend_tile tile;
        attend_tile_plan(job, tile_start, job_first, job_last, &tile);
        if (tile.n_full + tile.n_partial == 0)
            continue;
        /* every query's scores of the whole tile, also in lanes a query does
         * not see (rows outside the job's range may hold anything): those
         * become -inf below */
        int32_t tile_index = attend_index(job, tile_start);
        const uint8_t *tile_keys = keys + (size_t)attend_key_index(tile_index, 0, job->head_dim_k) * element;
        const uint8_t *tile_values = values + (size_t)tile_index * job->value_stride;
        attend_ahead ahead = attend_ahead_of(job, tile_start, job_last, element);
        for (int b = 0; b < ATTEND_TILE_KEYS / 8; b++) {
            size_t offset = (size_t)b * 8 * element;
            attend_neon_scores_of(n_queries, layout.queries, tile_keys + offset, job->head_dim_k, f16,
                                  offset % 64 == 0 ? ahead.keys : 0, layout.weights + b * 8);
        }

        const float32x4_t minus_infinity = vdupq_n_f32(-INFINITY);
        for (int g = 0; g < n_queries; g++) {
            if (!tile.present[g])
                continue;
            float32x4_t scores[NEON_TILE_VECTORS];
            float32x4_t tile_max = minus_infinity;
            for (int b = 0; b < NEON_TILE_BLOCKS; b++) {
                int32_t block_start = tile_start + b * NEON_BLOCK_KEYS;
                float32x4_t *block = scores + 4 * b;
                if (block_start > tile.query_high[g] || block_start + NEON_BLOCK_KEYS - 1 < tile.query_low[g]) {
                    for (int m = 0; m < 4; m++)
                        block[m] = minus_infinity;
                    continue;
                }
                for (int m = 0; m < 4; m++) {
                    block[m] = vld1q_f32(layout.weights + g * ATTEND_TILE_KEYS + b * NEON_BLOCK_KEYS + 4 * m);
                    uint32x4_t visible = attend_neon_visible(block_start + 4 * m, tile.query_low[g], tile.query_high[g]);
                    block[m] = vbslq_f32(visible, vmulq_n_f32(block[m], job->scale), minus_infinity);
                    tile_max = vmaxq_f32(tile_max, block[m]);
                }
            }
            float tile_maximum = vmaxvq_f32(tile_max);
            float new_max = tile_maximum > max[g] ? tile_maximum : max[g];
            scale[g] = elementwise_exp(max[g] - new_max);
            max[g] = new_max;
            float32x4_t shift = vdupq_n_f32(new_max);
            float32x4_t sum = vmulq_n_f32(sums[g], scale[g]);
            for (int v = 0; v < NEON_TILE_VECTORS; v++) {
                float32x4_t weight = neon_exp(vsubq_f32(scores[v], shift));
                vst1q_f32(layout.weights + g * ATTEND_TILE_KEYS + 4 * v, weight);
                sum = vaddq_f32(sum, weight);
            }
            sums[g] = sum;
        }

        /* the values, a strip of up to padded dimensions at a time, through
         * the tile buffer the keys are done with: rows read once, in order,
         * instead of once per 8 dimensions at the cache's stride */
        float full_scales[ATTEND_MAX_QUERIES];
        const float *full_weights = attend_full_queries(job, &tile, &layout, scale, outs, full_scales);
        for (int64_t d0 = 0; d0 < job->head_dim_v; d0 += padded) {
            int64_t width = job->head_dim_v - d0 < padded ? job->head_dim_v - d0 : padded;
            for (int32_t j = tile.low; j <= tile.high; j++) {
                const uint8_t *row = tile_values + (size_t)(j - tile_start) * job->value_stride + element * (size_t)d0;
                attend_neon_row(layout.keys + (int64_t)(j - tile_start) * padded, row, (int)width,
                                attend_padded_dim((int)width), f16, 0);
                attend_prefetch_span_ahead(row, (size_t)width * element, ahead.values);
            }
            attend_neon_values_of(tile.n_full, outs, full_weights, full_scales, tile.low, tile.high, tile_start,
                                  layout.keys, padded, d0, width);
            for (int i = 0; i < tile.n_partial; i++) {
                int g = tile.partial[i];
                float *out = job->queries[g].out;
                const float *row = layout.weights + g * ATTEND_TILE_KEYS;
                attend_neon_values_of(1, &out, row, &scale[g], tile.query_low[g], tile.query_high[g], tile_start,
                                      layout.keys, padded, d0, width);
            }
        }
    }

    for (int g = 0; g < n_queries; g++) {
        float inverse = 1.0f / vaddvq_f32(sums[g]);
        float *out = job->queries[g].out;
        int64_t d = 0;
        for (; d + 4 <= job->head_dim_v; d += 4)
            vst1q_f32(out + d, vmulq_n_f32(vld1q_f32(out + d), inverse));
        for (; d < job->head_dim_v; d++)
            out[d] *= inverse;
    }
}

void neon_attend_f32(const attend_job *job)
{
    attend_neon(job, 0);
}

void neon_attend_f16(const attend_job *job)
{
    attend_neon(job, 1);
}
