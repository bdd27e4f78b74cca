/* AVX2 tiled attention (attend_common.h) for F32 and F16 caches.
 *
 * Scores: keys over lanes, 8 keys at a time: each dimension of the block's
 * keys is one load (the cache keeps them side by side, kernels.h) that every
 * query of the job multiplies by its own element of that dimension. Values: 8 dimensions at a
 * time for all the job's queries (up to 8 accumulators of the 16 registers),
 * each value row converted once per tile into the buffer the tile's keys
 * used; the last dimensions (head_dim_v mod 8) one at a time with fmaf, the
 * same single rounding. */
#include "attend_common.h"
#include "exp_avx2.h"
#include "kernels_dispatch.h"

#define AVX2_BLOCK_KEYS 8
#define AVX2_TILE_BLOCKS (ATTEND_TILE_KEYS / AVX2_BLOCK_KEYS)

_Static_assert(ATTEND_TILE_KEYS % AVX2_BLOCK_KEYS == 0, "tiles hold whole blocks of 8 keys");

KERNEL_INLINE __m256 attend256_load(const uint8_t *p, const int f16)
{
    if (f16)
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
    return _mm256_loadu_ps((const float *)p);
}

KERNEL_INLINE float attend256_element(const uint8_t *p, const int f16)
{
    if (f16) {
        uint16_t h;
        memcpy(&h, p, sizeof h);
        return _cvtsh_ss(h);
    }
    float value;
    memcpy(&value, p, sizeof value);
    return value;
}

/* A cache row of dim elements into a zero-padded f32 row of padded floats;
 * round: to f16 precision first (a query against an f16 cache). */
KERNEL_INLINE void attend256_row(float *dst, const uint8_t *src, int dim, int64_t padded, const int f16,
                                 const int round)
{
    size_t element = f16 ? 2 : 4;
    int64_t i = 0;
    for (; i + 8 <= dim; i += 8) {
        __m256 v = attend256_load(src + element * (size_t)i, f16);
        if (round)
            v = _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        _mm256_store_ps(dst + i, v);
    }
    for (; i < dim; i++) {
        float v = attend256_element(src + element * (size_t)i, f16);
        dst[i] = round ? _cvtsh_ss(_cvtss_sh(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)) : v;
    }
    for (; i < padded; i++)
        dst[i] = 0.0f;
}

/* q.k for Q queries (dimension-major, attend_layout) and the 8 keys of a block
 * (kernels.h: dimension d of the block's keys side by side, ATTEND_TILE_KEYS
 * elements apart): lane j of scores[g * ATTEND_TILE_KEYS ..] for key j, each
 * one sum in dimension order; with ahead (a block that starts a line), each
 * dimension's line asked for ahead bytes on. */
KERNEL_INLINE void attend256_scores(const int Q, const float *queries, const uint8_t *block, int dim,
                                    const int f16, size_t ahead, float *scores)
{
    size_t step = (size_t)ATTEND_TILE_KEYS * (f16 ? 2 : 4);
    __m256 acc[ATTEND_MAX_QUERIES];
    KERNEL_UNROLLED for (int g = 0; g < Q; g++) acc[g] = _mm256_setzero_ps();
    for (int d = 0; d < dim; d++) {
        __m256 k = attend256_load(block + (size_t)d * step, f16);
        attend_prefetch_ahead(block + (size_t)d * step, ahead);
        KERNEL_UNROLLED for (int g = 0; g < Q; g++)
            acc[g] = _mm256_fmadd_ps(k, _mm256_broadcast_ss(queries + (int64_t)d * ATTEND_MAX_QUERIES + g), acc[g]);
    }
    KERNEL_UNROLLED for (int g = 0; g < Q; g++) _mm256_store_ps(scores + g * ATTEND_TILE_KEYS, acc[g]);
}

KERNEL_INLINE void attend256_scores_of(int count, const float *queries, const uint8_t *block, int dim, const int f16,
                                       size_t ahead, float *scores)
{
#define ATTEND256_SCORES(Q) attend256_scores(Q, queries, block, dim, f16, ahead, scores)
    ATTEND_FOR_QUERIES(count, ATTEND256_SCORES);
#undef ATTEND256_SCORES
}

/* For Q queries: out[d0 .. d0 + width) = out * scale + the sum over positions
 * low..high of weight * value, 8 dimensions at a time and the last width mod
 * 8 one at a time (fmaf: the same single rounding). weights: the queries'
 * rows of tile weights, ATTEND_TILE_KEYS apart (index: position -
 * tile_start); the values come converted from the tile buffer (rows of
 * padded floats, row 0 at tile_start). */
KERNEL_INLINE void attend256_values(const int Q, float *const *outs, const float *weights,
                                    const float *scales, int32_t low, int32_t high, int32_t tile_start,
                                    const float *tile, int64_t padded, int64_t d0, int64_t width)
{
    int64_t d = 0;
    for (; d + 8 <= width; d += 8) {
        __m256 acc[ATTEND_MAX_QUERIES];
        KERNEL_UNROLLED for (int g = 0; g < Q; g++)
            acc[g] = _mm256_mul_ps(_mm256_loadu_ps(outs[g] + d0 + d), _mm256_set1_ps(scales[g]));
        for (int32_t j = low; j <= high; j++) {
            __m256 v = _mm256_load_ps(tile + (int64_t)(j - tile_start) * padded + d);
            const float *weight = weights + (j - tile_start);
            KERNEL_UNROLLED for (int g = 0; g < Q; g++)
                acc[g] = _mm256_fmadd_ps(v, _mm256_broadcast_ss(weight + g * ATTEND_TILE_KEYS), acc[g]);
        }
        KERNEL_UNROLLED for (int g = 0; g < Q; g++)
            _mm256_storeu_ps(outs[g] + d0 + d, acc[g]);
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

static void attend256_values_of(int count, float *const *outs, const float *weights, const float *scales,
                                int32_t low, int32_t high, int32_t tile_start, const float *tile, int64_t padded,
                                int64_t d0, int64_t width)
{
#define ATTEND256_VALUES(Q) attend256_values(Q, outs, weights, scales, low, high, tile_start, tile, padded, d0, width)
    ATTEND_FOR_QUERIES(count, ATTEND256_VALUES);
#undef ATTEND256_VALUES
}

KERNEL_INLINE float attend256_max(__m256 v)
{
    __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_max_ps(x, _mm_movehl_ps(x, x));
    x = _mm_max_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

KERNEL_INLINE float attend256_sum(__m256 v)
{
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

/* The lanes of an 8-key block at block_start that are positions low..high. */
KERNEL_INLINE __m256 attend256_visible(int32_t block_start, int32_t low, int32_t high)
{
    __m256i position = _mm256_add_epi32(_mm256_set1_epi32(block_start), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    __m256i outside = _mm256_or_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(low), position),
                                      _mm256_cmpgt_epi32(position, _mm256_set1_epi32(high)));
    return _mm256_castsi256_ps(_mm256_xor_si256(outside, _mm256_set1_epi32(-1)));
}

KERNEL_INLINE void attend256(const attend_job *job, const int f16)
{
    attend_layout layout = attend_layout_of(job->scratch, job->head_dim_k);
    int64_t padded = layout.padded_dim;
    int n_queries = job->n_queries;
    size_t element = f16 ? 2 : 4;
    const uint8_t *keys = job->keys, *values = job->values;
    int32_t job_first, job_last;
    attend_job_range(job, &job_first, &job_last);

    float max[ATTEND_MAX_QUERIES], scale[ATTEND_MAX_QUERIES];
    __m256 sums[ATTEND_MAX_QUERIES];
    float *outs[ATTEND_MAX_QUERIES];
    for (int g = 0; g < n_queries; g++) {
        const attend_query *query = &job->queries[g];
        attend256_row(layout.keys, (const uint8_t *)query->q, job->head_dim_k, padded, 0, f16);
        attend_put_query(&layout, g);
        /* the sink is the first logit seen: e^(sink - sink) = 1 in lane 0 */
        max[g] = job->sinks ? query->sink : -INFINITY;
        sums[g] = _mm256_setr_ps(job->sinks ? 1.0f : 0.0f, 0, 0, 0, 0, 0, 0, 0);
        memset(query->out, 0, (size_t)job->head_dim_v * sizeof(float));
    }

    for (int32_t tile_start = job_first - job_first % ATTEND_TILE_KEYS; tile_start <= job_last;
         tile_start += ATTEND_TILE_KEYS) {
        attend_tile tile;
        attend_tile_plan(job, tile_start, job_first, job_last, &tile);
        if (tile.n_full + tile.n_partial == 0)
            continue;
        /* every query's scores of the blocks the job sees, also in lanes a
         * query does not see (rows outside the job's range may hold
         * anything): those become -inf below */
        int32_t tile_index = attend_index(job, tile_start);
        const uint8_t *tile_keys = keys + (size_t)attend_key_index(tile_index, 0, job->head_dim_k) * element;
        const uint8_t *tile_values = values + (size_t)tile_index * job->value_stride;
        attend_ahead ahead = attend_ahead_of(job, tile_start, job_last, element);
        for (int b = 0; b < AVX2_TILE_BLOCKS; b++) {
            int32_t block_start = tile_start + b * AVX2_BLOCK_KEYS;
            size_t offset = (size_t)b * AVX2_BLOCK_KEYS * element;
            if (block_start <= tile.high && block_start + AVX2_BLOCK_KEYS - 1 >= tile.low)
                attend256_scores_of(n_queries, layout.queries, tile_keys + offset, job->head_dim_k, f16,
                                    offset % 64 == 0 ? ahead.keys : 0, layout.weights + b * AVX2_BLOCK_KEYS);
        }

        const __m256 minus_infinity = _mm256_set1_ps(-INFINITY);
        for (int g = 0; g < n_queries; g++) {
            if (!tile.present[g])
                continue;
            __m256 scores[AVX2_TILE_BLOCKS];
            __m256 tile_max = minus_infinity;
            for (int b = 0; b < AVX2_TILE_BLOCKS; b++) {
                int32_t block_start = tile_start + b * AVX2_BLOCK_KEYS;
                scores[b] = minus_infinity;
                if (block_start > tile.query_high[g] || block_start + AVX2_BLOCK_KEYS - 1 < tile.query_low[g])
                    continue;
                __m256 s = _mm256_load_ps(layout.weights + g * ATTEND_TILE_KEYS + b * AVX2_BLOCK_KEYS);
                s = _mm256_mul_ps(s, _mm256_set1_ps(job->scale));
                scores[b] = _mm256_blendv_ps(minus_infinity, s,
                                             attend256_visible(block_start, tile.query_low[g], tile.query_high[g]));
                tile_max = _mm256_max_ps(tile_max, scores[b]);
            }
            float tile_maximum = attend256_max(tile_max);
            float new_max = tile_maximum > max[g] ? tile_maximum : max[g];
            scale[g] = elementwise_exp(max[g] - new_max);
            max[g] = new_max;
            __m256 shift = _mm256_set1_ps(new_max);
            __m256 sum = _mm256_mul_ps(sums[g], _mm256_set1_ps(scale[g]));
            for (int b = 0; b < AVX2_TILE_BLOCKS; b++) {
                __m256 weight = avx2_exp(_mm256_sub_ps(scores[b], shift));
                _mm256_store_ps(layout.weights + g * ATTEND_TILE_KEYS + b * AVX2_BLOCK_KEYS, weight);
                sum = _mm256_add_ps(sum, weight);
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
                attend256_row(layout.keys + (int64_t)(j - tile_start) * padded, row, (int)width,
                              attend_padded_dim((int)width), f16, 0);
                attend_prefetch_span_ahead(row, (size_t)width * element, ahead.values);
            }
            attend256_values_of(tile.n_full, outs, full_weights, full_scales, tile.low, tile.high, tile_start,
                                layout.keys, padded, d0, width);
            for (int i = 0; i < tile.n_partial; i++) {
                int g = tile.partial[i];
                float *out = job->queries[g].out;
                const float *row = layout.weights + g * ATTEND_TILE_KEYS;
                attend256_values_of(1, &out, row, &scale[g], tile.query_low[g], tile.query_high[g], tile_start,
                                    layout.keys, padded, d0, width);
            }
        }
    }

    for (int g = 0; g < n_queries; g++) {
        float inverse = 1.0f / attend256_sum(sums[g]);
        float *out = job->queries[g].out;
        int64_t d = 0;
        for (; d + 8 <= job->head_dim_v; d += 8)
            _mm256_storeu_ps(out + d, _mm256_mul_ps(_mm256_loadu_ps(out + d), _mm256_set1_ps(inverse)));
        for (; d < job->head_dim_v; d++)
            out[d] *= inverse;
    }
}

void avx2_attend_f32(const attend_job *job)
{
    attend256(job, 0);
}

void avx2_attend_f16(const attend_job *job)
{
    attend256(job, 1);
}
