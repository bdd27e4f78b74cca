/* AVX-512 tiled attention (attend_common.h) for F32 and F16 caches.
 *
 * Scores: keys over lanes. The cache keeps a tile's keys dimension by
 * dimension (kernels.h), so for each dimension two loads give it for the
 * tile's 32 keys, and every query of the job multiplies them by its own
 * element of that dimension: one accumulator per query and 16 keys, each
 * key's score one sum in dimension order, with no transpose or reduction.
 * Values: 32 dimensions at a time for all the job's queries (up to 16
 * accumulators), each value row loaded and converted once per tile straight
 * from the cache. */
#include "attend_common.h"
#include "exp_avx512.h"
#include "kernels_dispatch.h"

#define AVX512_TILE_HALVES (ATTEND_TILE_KEYS / 16)

_Static_assert(ATTEND_TILE_KEYS == 32, "a tile's keys are two registers");
_Static_assert(ATTEND_MAX_QUERIES <= 16, "the queries' maxima are one register");

KERNEL_INLINE __mmask16 attend512_mask(int64_t count)
{
    return count >= 16 ? (__mmask16)0xffff : count <= 0 ? (__mmask16)0 : (__mmask16)((1u << count) - 1u);
}

/* 16 (or fewer, under the mask) elements of a cache row as floats. */
KERNEL_INLINE __m512 attend512_load(const uint8_t *p, __mmask16 mask, const int f16)
{
    if (f16)
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, p));
    return _mm512_maskz_loadu_ps(mask, p);
}

KERNEL_INLINE __m512 attend512_load_full(const uint8_t *p, const int f16)
{
    if (f16)
        return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
    return _mm512_loadu_ps(p);
}

/* A query row of dim floats into a zero-padded row of padded floats; round:
 * to f16 precision first (a query against an f16 cache). */
KERNEL_INLINE void attend512_query(float *dst, const float *src, int dim, int64_t padded, const int round)
{
    for (int64_t i = 0; i < padded; i += 16) {
        __m512 v = _mm512_maskz_loadu_ps(attend512_mask(dim - i), src + i);
        if (round)
            v = _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        _mm512_store_ps(dst + i, v);
    }
}

/* q.k for Q queries (dimension-major, attend_layout) and the 32 keys of a tile:
 * scores[g * ATTEND_TILE_KEYS + j] for query g and the tile's key j. Each
 * dimension's keys are one line (f16) or two (f32): asked for ahead bytes on. */
KERNEL_INLINE void attend512_scores(const int Q, const float *queries, const uint8_t *tile, int dim,
                                    const int f16, size_t ahead, float *scores)
{
    size_t element = f16 ? 2 : 4;
    __m512 acc[ATTEND_MAX_QUERIES][AVX512_TILE_HALVES];
    KERNEL_UNROLLED for (int g = 0; g < Q; g++)
        acc[g][0] = acc[g][1] = _mm512_setzero_ps();
    for (int d = 0; d < dim; d++) {
        const uint8_t *row = tile + (size_t)d * ATTEND_TILE_KEYS * element;
        __m512 k0 = attend512_load_full(row, f16), k1 = attend512_load_full(row + 16 * element, f16);
        attend_prefetch_span_ahead(row, ATTEND_TILE_KEYS * element, ahead);
        KERNEL_UNROLLED for (int g = 0; g < Q; g++) {
            __m512 q = _mm512_set1_ps(queries[(int64_t)d * ATTEND_MAX_QUERIES + g]);
            acc[g][0] = _mm512_fmadd_ps(k0, q, acc[g][0]);
            acc[g][1] = _mm512_fmadd_ps(k1, q, acc[g][1]);
        }
    }
    KERNEL_UNROLLED for (int g = 0; g < Q; g++) {
        _mm512_store_ps(scores + g * ATTEND_TILE_KEYS, acc[g][0]);
        _mm512_store_ps(scores + g * ATTEND_TILE_KEYS + 16, acc[g][1]);
    }
}

KERNEL_INLINE void attend512_scores_of(int count, const float *queries, const uint8_t *tile, int dim, const int f16,
                                       size_t ahead, float *scores)
{
#define ATTEND512_SCORES(Q) attend512_scores(Q, queries, tile, dim, f16, ahead, scores)
    ATTEND_FOR_QUERIES(count, ATTEND512_SCORES);
#undef ATTEND512_SCORES
}

/* For Q queries: out[0 .. width) = out * scale + the sum over positions
 * low..high of weight * value, 32 dimensions at a time and the last 16 or
 * fewer in one register under a mask (a lane's operations are the same in
 * both). weights: the queries' rows of tile weights, ATTEND_TILE_KEYS
 * apart (index: position - tile_start); value rows value_stride bytes apart
 * from tile_start's, each load that starts a line asking for the line ahead
 * bytes on. */
KERNEL_INLINE void attend512_values(const int Q, float *const *outs, const float *weights,
                                    const float *scales, int32_t low, int32_t high, int32_t tile_start,
                                    const uint8_t *values, size_t value_stride, int64_t width, const int f16,
                                    size_t ahead)
{
    size_t element = f16 ? 2 : 4;
    int64_t d = 0;
    for (; d + 16 < width; d += 32) {
        __mmask16 mask1 = attend512_mask(width - d - 16);
        __m512 acc[ATTEND_MAX_QUERIES][2];
        KERNEL_UNROLLED for (int g = 0; g < Q; g++) {
            const float *out = outs[g] + d;
            __m512 factor = _mm512_set1_ps(scales[g]);
            acc[g][0] = _mm512_mul_ps(_mm512_loadu_ps(out), factor);
            acc[g][1] = _mm512_mul_ps(_mm512_maskz_loadu_ps(mask1, out + 16), factor);
        }
        const uint8_t *row = values + (size_t)(low - tile_start) * value_stride + (size_t)d * element;
        for (int32_t j = low; j <= high; j++, row += value_stride) {
            __m512 v0 = attend512_load_full(row, f16), v1 = attend512_load(row + 16 * element, mask1, f16);
            attend_prefetch_span_ahead(row, 32 * element, ahead);
            KERNEL_UNROLLED for (int g = 0; g < Q; g++) {
                __m512 weight = _mm512_set1_ps(weights[g * ATTEND_TILE_KEYS + (j - tile_start)]);
                acc[g][0] = _mm512_fmadd_ps(v0, weight, acc[g][0]);
                acc[g][1] = _mm512_fmadd_ps(v1, weight, acc[g][1]);
            }
        }
        KERNEL_UNROLLED for (int g = 0; g < Q; g++) {
            _mm512_storeu_ps(outs[g] + d, acc[g][0]);
            _mm512_mask_storeu_ps(outs[g] + d + 16, mask1, acc[g][1]);
        }
    }
    if (d < width) {
        __mmask16 mask = attend512_mask(width - d);
        __m512 acc[ATTEND_MAX_QUERIES];
        KERNEL_UNROLLED for (int g = 0; g < Q; g++)
            acc[g] = _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, outs[g] + d), _mm512_set1_ps(scales[g]));
        const uint8_t *row = values + (size_t)(low - tile_start) * value_stride + (size_t)d * element;
        for (int32_t j = low; j <= high; j++, row += value_stride) {
            __m512 v = attend512_load(row, mask, f16);
            attend_prefetch_ahead(row, ahead);
            KERNEL_UNROLLED for (int g = 0; g < Q; g++)
                acc[g] = _mm512_fmadd_ps(v, _mm512_set1_ps(weights[g * ATTEND_TILE_KEYS + (j - tile_start)]), acc[g]);
        }
        KERNEL_UNROLLED for (int g = 0; g < Q; g++)
            _mm512_mask_storeu_ps(outs[g] + d, mask, acc[g]);
    }
}

KERNEL_INLINE void attend512_values_of(int count, float *const *outs, const float *weights, const float *scales,
                                int32_t low, int32_t high, int32_t tile_start, const uint8_t *values,
                                size_t value_stride, int64_t width, const int f16, size_t ahead)
{
#define ATTEND512_VALUES(Q) \
    attend512_values(Q, outs, weights, scales, low, high, tile_start, values, value_stride, width, f16, ahead)
    ATTEND_FOR_QUERIES(count, ATTEND512_VALUES);
#undef ATTEND512_VALUES
}

KERNEL_INLINE void attend512(const attend_job *job, const int f16)
{
    attend_layout layout = attend_layout_of(job->scratch, job->head_dim_k);
    int64_t padded = layout.padded_dim;
    int n_queries = job->n_queries;
    size_t element = f16 ? 2 : 4;
    const uint8_t *keys = job->keys, *values = job->values;
    int32_t job_first, job_last;
    attend_job_range(job, &job_first, &job_last);

    /* 16 floats each: the softmax step reads and writes them as one vector */
    float max[16], scale[16];
    __m512 sums[ATTEND_MAX_QUERIES];
    float *outs[ATTEND_MAX_QUERIES];
    for (int g = 0; g < 16; g++)
        max[g] = -INFINITY;
    for (int g = 0; g < n_queries; g++) {
        const attend_query *query = &job->queries[g];
        attend512_query(layout.keys, query->q, job->head_dim_k, padded, f16);
        attend_put_query(&layout, g);
        /* the sink is the first logit seen: e^(sink - sink) = 1 in lane 0 */
        max[g] = job->sinks ? query->sink : -INFINITY;
        sums[g] = job->sinks ? _mm512_maskz_mov_ps(1, _mm512_set1_ps(1.0f)) : _mm512_setzero_ps();
        memset(query->out, 0, (size_t)job->head_dim_v * sizeof(float));
    }

    for (int32_t tile_start = job_first - job_first % ATTEND_TILE_KEYS; tile_start <= job_last;
         tile_start += ATTEND_TILE_KEYS) {
        attend_tile tile;
        attend_tile_plan(job, tile_start, job_first, job_last, &tile);
        if (tile.n_full + tile.n_partial == 0)
            continue;
        /* every query's scores, also in lanes it does not see (rows outside
         * the job's range may hold anything): those become -inf below */
        int32_t tile_index = attend_index(job, tile_start);
        const uint8_t *tile_keys = keys + (size_t)attend_key_index(tile_index, 0, job->head_dim_k) * element;
        const uint8_t *tile_values = values + (size_t)tile_index * job->value_stride;
        attend_ahead ahead = attend_ahead_of(job, tile_start, job_last, element);
        attend512_scores_of(n_queries, layout.queries, tile_keys, job->head_dim_k, f16, ahead.keys, layout.weights);

        /* the softmax step in three passes, so that the rescale factors of
         * all the queries are one vector exp: each query's scaled, masked
         * scores and their maximum; e^(old - new maximum) in a lane per
         * query; each query's weights and sum */
        float tile_maximum[16];
        __mmask16 present = 0;
        for (int g = 0; g < 16; g++)
            tile_maximum[g] = -INFINITY;
        for (int g = 0; g < n_queries; g++) {
            if (!tile.present[g])
                continue;
            present |= (__mmask16)(1u << g);
            float *row = layout.weights + g * ATTEND_TILE_KEYS;
            bool whole = tile.query_low[g] == tile_start && tile.query_high[g] == tile_start + ATTEND_TILE_KEYS - 1;
            __m512 tile_max = _mm512_set1_ps(-INFINITY);
            for (int b = 0; b < AVX512_TILE_HALVES; b++) {
                int32_t block_start = tile_start + b * 16;
                __mmask16 visible = whole ? (__mmask16)0xffff
                                          : (__mmask16)(attend512_mask(tile.query_high[g] - block_start + 1) &
                                                        ~attend512_mask(tile.query_low[g] - block_start));
                __m512 scores = _mm512_mask_mul_ps(_mm512_set1_ps(-INFINITY), visible, _mm512_load_ps(row + b * 16),
                                                   _mm512_set1_ps(job->scale));
                _mm512_store_ps(row + b * 16, scores);
                tile_max = _mm512_max_ps(tile_max, scores);
            }
            tile_maximum[g] = _mm512_reduce_max_ps(tile_max);
        }
        __m512 old_max = _mm512_loadu_ps(max), new_max = _mm512_loadu_ps(tile_maximum);
        /* tile_maximum > max ? tile_maximum : max, lane by lane */
        new_max = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(new_max, old_max, _CMP_GT_OQ), old_max, new_max);
        _mm512_storeu_ps(scale, avx512_exp(_mm512_sub_ps(old_max, new_max)));
        _mm512_mask_storeu_ps(max, present, new_max);
        for (int g = 0; g < n_queries; g++) {
            if (!tile.present[g])
                continue;
            float *row = layout.weights + g * ATTEND_TILE_KEYS;
            __m512 shift = _mm512_set1_ps(max[g]);
            __m512 sum = _mm512_mul_ps(sums[g], _mm512_set1_ps(scale[g]));
            for (int b = 0; b < AVX512_TILE_HALVES; b++) {
                __m512 weight = avx512_exp(_mm512_sub_ps(_mm512_load_ps(row + b * 16), shift));
                _mm512_store_ps(row + b * 16, weight);
                sum = _mm512_add_ps(sum, weight);
            }
            sums[g] = sum;
        }

        float full_scales[ATTEND_MAX_QUERIES];
        const float *full_weights = attend_full_queries(job, &tile, &layout, scale, outs, full_scales);
        attend512_values_of(tile.n_full, outs, full_weights, full_scales, tile.low, tile.high, tile_start, tile_values,
                            job->value_stride, job->head_dim_v, f16, ahead.values);
        for (int i = 0; i < tile.n_partial; i++) {
            int g = tile.partial[i];
            float *out = job->queries[g].out;
            const float *row = layout.weights + g * ATTEND_TILE_KEYS;
            attend512_values_of(1, &out, row, &scale[g], tile.query_low[g], tile.query_high[g], tile_start, tile_values,
                                job->value_stride, job->head_dim_v, f16, ahead.values);
        }
    }

    for (int g = 0; g < n_queries; g++) {
        __m512 inverse = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sums[g]));
        float *out = job->queries[g].out;
        for (int64_t d = 0; d < job->head_dim_v; d += 16) {
            __mmask16 mask = attend512_mask(job->head_dim_v - d);
            _mm512_mask_storeu_ps(out + d, mask, _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, out + d), inverse));
        }
    }
}

void avx512_attend_f32(const attend_job *job)
{
    attend512(job, 0);
}

void avx512_attend_f16(const attend_job *job)
{
    attend512(job, 1);
}
