/* AVX-512 tiled attention (attend_common.h) for F32 and F16 caches.
 *
 * Scores: 16 keys at a time, one accumulator per key with 16 dimensions per
 * lane (a query and 16 key rows from the tile stay in L1), reduced to one
 * register of 16 scores by a transpose tree that adds the same lanes of
 * every key in the same order. Values: 32 dimensions at a time for all the
 * job's queries (up to 16 accumulators), each value row loaded and converted
 * once per tile, through the buffer the tile's keys used. */
#include "attend_common.h"
#include "exp_avx512.h"
#include "kernels_dispatch.h"

#define AVX512_BLOCK_KEYS 16
#define AVX512_TILE_BLOCKS (ATTEND_TILE_KEYS / AVX512_BLOCK_KEYS)

_Static_assert(ATTEND_TILE_KEYS % AVX512_BLOCK_KEYS == 0, "tiles hold whole blocks of 16 keys");

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

/* A cache row of dim elements into a zero-padded f32 row of padded floats;
 * round: to f16 precision first (a query against an f16 cache). */
KERNEL_INLINE void attend512_row(float *dst, const uint8_t *src, int dim, int64_t padded, const int f16,
                                 const int round)
{
    size_t element = f16 ? 2 : 4;
    for (int64_t i = 0; i < padded; i += 16) {
        __m512 v = attend512_load(src + element * (size_t)i, attend512_mask(dim - i), f16);
        if (round)
            v = _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        _mm512_store_ps(dst + i, v);
    }
}

/* Lane 4k + s of the result is the sum of the lanes of in[k + 4s]: pairs of
 * registers exchange halves, then quarters, then pairs and single lanes,
 * adding at each step, so every key's 16 lanes meet in the same tree. */
KERNEL_INLINE __m512 attend512_transpose_sum(const __m512 in[16])
{
    __m512 halves[8], quarters[4], pairs[2];
    KERNEL_UNROLLED for (int m = 0; m < 8; m++)
        halves[m] = _mm512_add_ps(_mm512_shuffle_f32x4(in[2 * m], in[2 * m + 1], 0x44),
                                  _mm512_shuffle_f32x4(in[2 * m], in[2 * m + 1], 0xee));
    KERNEL_UNROLLED for (int m = 0; m < 4; m++)
        quarters[m] = _mm512_add_ps(_mm512_shuffle_f32x4(halves[2 * m], halves[2 * m + 1], 0x88),
                                    _mm512_shuffle_f32x4(halves[2 * m], halves[2 * m + 1], 0xdd));
    KERNEL_UNROLLED for (int m = 0; m < 2; m++)
        pairs[m] = _mm512_add_ps(_mm512_shuffle_ps(quarters[2 * m], quarters[2 * m + 1], 0x44),
                                 _mm512_shuffle_ps(quarters[2 * m], quarters[2 * m + 1], 0xee));
    return _mm512_add_ps(_mm512_shuffle_ps(pairs[0], pairs[1], 0x88), _mm512_shuffle_ps(pairs[0], pairs[1], 0xdd));
}

/* q.k for the 16 key rows at keys (padded floats apart), lane j for row j. */
KERNEL_INLINE __m512 attend512_scores(const float *query, const float *keys, int64_t padded)
{
    __m512 acc[16];
    _Pragma("GCC unroll 16") for (int j = 0; j < 16; j++) acc[j] = _mm512_setzero_ps();
    for (int64_t i = 0; i < padded; i += 16) {
        __m512 q = _mm512_load_ps(query + i);
        _Pragma("GCC unroll 16") for (int j = 0; j < 16; j++)
            acc[j] = _mm512_fmadd_ps(_mm512_load_ps(keys + (int64_t)j * padded + i), q, acc[j]);
    }
    /* feed row 4k + s as input k + 4s, so that lane j of the sum is row j */
    __m512 in[16];
    _Pragma("GCC unroll 16") for (int i = 0; i < 16; i++) in[i] = acc[4 * (i % 4) + i / 4];
    return attend512_transpose_sum(in);
}

/* For Q queries: out[d0 .. d0 + width) = out * scale + the sum over positions
 * low..high of weight * value, 32 dimensions at a time and the last 16 or
 * fewer in one register under a mask (a lane's operations are the same in
 * both). weights[g] is query g's row of tile weights (index: position -
 * tile_start); the values come converted from the tile buffer (rows of padded
 * floats, row 0 at tile_start). */
KERNEL_INLINE void attend512_values(const int Q, float *const *outs, const float *const *weights,
                                    const float *scales, int32_t low, int32_t high, int32_t tile_start,
                                    const float *tile, int64_t padded, int64_t d0, int64_t width)
{
    int64_t d = 0;
    for (; d + 16 < width; d += 32) {
        __mmask16 mask1 = attend512_mask(width - d - 16);
        __m512 acc[ATTEND_MAX_QUERIES][2];
        KERNEL_UNROLLED for (int g = 0; g < Q; g++) {
            const float *out = outs[g] + d0 + d;
            __m512 factor = _mm512_set1_ps(scales[g]);
            acc[g][0] = _mm512_mul_ps(_mm512_loadu_ps(out), factor);
            acc[g][1] = _mm512_mul_ps(_mm512_maskz_loadu_ps(mask1, out + 16), factor);
        }
        for (int32_t j = low; j <= high; j++) {
            const float *row = tile + (int64_t)(j - tile_start) * padded + d;
            __m512 v0 = _mm512_load_ps(row), v1 = _mm512_load_ps(row + 16);
            KERNEL_UNROLLED for (int g = 0; g < Q; g++) {
                __m512 weight = _mm512_set1_ps(weights[g][j - tile_start]);
                acc[g][0] = _mm512_fmadd_ps(v0, weight, acc[g][0]);
                acc[g][1] = _mm512_fmadd_ps(v1, weight, acc[g][1]);
            }
        }
        KERNEL_UNROLLED for (int g = 0; g < Q; g++) {
            _mm512_storeu_ps(outs[g] + d0 + d, acc[g][0]);
            _mm512_mask_storeu_ps(outs[g] + d0 + d + 16, mask1, acc[g][1]);
        }
    }
    if (d < width) {
        __mmask16 mask = attend512_mask(width - d);
        __m512 acc[ATTEND_MAX_QUERIES];
        KERNEL_UNROLLED for (int g = 0; g < Q; g++)
            acc[g] = _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, outs[g] + d0 + d), _mm512_set1_ps(scales[g]));
        for (int32_t j = low; j <= high; j++) {
            __m512 v = _mm512_load_ps(tile + (int64_t)(j - tile_start) * padded + d);
            KERNEL_UNROLLED for (int g = 0; g < Q; g++)
                acc[g] = _mm512_fmadd_ps(v, _mm512_set1_ps(weights[g][j - tile_start]), acc[g]);
        }
        KERNEL_UNROLLED for (int g = 0; g < Q; g++)
            _mm512_mask_storeu_ps(outs[g] + d0 + d, mask, acc[g]);
    }
}

static void attend512_values_of(int count, float *const *outs, const float *const *weights, const float *scales,
                                int32_t low, int32_t high, int32_t tile_start, const float *tile, int64_t padded,
                                int64_t d0, int64_t width)
{
#define ATTEND512_VALUES(Q) attend512_values(Q, outs, weights, scales, low, high, tile_start, tile, padded, d0, width)
    switch (count) {
    case 1: ATTEND512_VALUES(1); break;
    case 2: ATTEND512_VALUES(2); break;
    case 3: ATTEND512_VALUES(3); break;
    case 4: ATTEND512_VALUES(4); break;
    case 5: ATTEND512_VALUES(5); break;
    case 6: ATTEND512_VALUES(6); break;
    case 7: ATTEND512_VALUES(7); break;
    case 8: ATTEND512_VALUES(8); break;
    default: break;
    }
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

    float max[ATTEND_MAX_QUERIES], scale[ATTEND_MAX_QUERIES];
    __m512 sums[ATTEND_MAX_QUERIES];
    float *outs[ATTEND_MAX_QUERIES];
    const float *weights[ATTEND_MAX_QUERIES];
    for (int g = 0; g < n_queries; g++) {
        const attend_query *query = &job->queries[g];
        attend512_row(layout.queries + g * padded, (const uint8_t *)query->q, job->head_dim_k, padded, 0, f16);
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
        int used[AVX512_TILE_BLOCKS];
        for (int b = 0; b < AVX512_TILE_BLOCKS; b++) {
            int32_t block_start = tile_start + b * AVX512_BLOCK_KEYS;
            used[b] = block_start <= tile.high && block_start + AVX512_BLOCK_KEYS - 1 >= tile.low;
            if (!used[b])
                continue;
            /* rows outside the visited part are zeros: their scores are replaced by -inf */
            for (int j = 0; j < AVX512_BLOCK_KEYS; j++) {
                int32_t position = block_start + j;
                float *row = layout.keys + (int64_t)(b * AVX512_BLOCK_KEYS + j) * padded;
                attend_prefetch(keys, job->key_stride, position, job_last, (size_t)job->head_dim_k * element);
                if (position >= tile.low && position <= tile.high)
                    attend512_row(row, keys + (size_t)position * job->key_stride, job->head_dim_k, padded, f16, 0);
                else
                    memset(row, 0, (size_t)padded * sizeof(float));
            }
        }

        for (int g = 0; g < n_queries; g++) {
            if (!tile.present[g])
                continue;
            __m512 scores[AVX512_TILE_BLOCKS];
            __m512 tile_max = _mm512_set1_ps(-INFINITY);
            for (int b = 0; b < AVX512_TILE_BLOCKS; b++) {
                int32_t block_start = tile_start + b * AVX512_BLOCK_KEYS;
                __mmask16 visible = (__mmask16)(attend512_mask(tile.query_high[g] - block_start + 1) &
                                                ~attend512_mask(tile.query_low[g] - block_start));
                scores[b] = _mm512_set1_ps(-INFINITY);
                if (!visible)
                    continue;
                __m512 s = attend512_scores(layout.queries + g * padded,
                                            layout.keys + (int64_t)b * AVX512_BLOCK_KEYS * padded, padded);
                scores[b] = _mm512_mask_mul_ps(scores[b], visible, s, _mm512_set1_ps(job->scale));
                tile_max = _mm512_max_ps(tile_max, scores[b]);
            }
            float tile_maximum = _mm512_reduce_max_ps(tile_max);
            float new_max = tile_maximum > max[g] ? tile_maximum : max[g];
            scale[g] = elementwise_exp(max[g] - new_max);
            max[g] = new_max;
            __m512 shift = _mm512_set1_ps(new_max);
            __m512 sum = _mm512_mul_ps(sums[g], _mm512_set1_ps(scale[g]));
            for (int b = 0; b < AVX512_TILE_BLOCKS; b++) {
                __m512 weight = avx512_exp(_mm512_sub_ps(scores[b], shift));
                _mm512_store_ps(layout.weights + g * ATTEND_TILE_KEYS + b * AVX512_BLOCK_KEYS, weight);
                sum = _mm512_add_ps(sum, weight);
            }
            sums[g] = sum;
        }

        /* the values, a strip of up to padded dimensions at a time, through
         * the tile buffer the keys are done with: rows read once, in order,
         * instead of once per 32 dimensions at the cache's stride */
        for (int64_t d0 = 0; d0 < job->head_dim_v; d0 += padded) {
            int64_t width = job->head_dim_v - d0 < padded ? job->head_dim_v - d0 : padded;
            for (int32_t j = tile.low; j <= tile.high; j++) {
                attend_prefetch(values + element * (size_t)d0, job->value_stride, j, job_last, (size_t)width * element);
                attend512_row(layout.keys + (int64_t)(j - tile_start) * padded,
                              values + (size_t)j * job->value_stride + element * (size_t)d0, (int)width,
                              attend_padded_dim((int)width), f16, 0);
            }
            float full_scales[ATTEND_MAX_QUERIES];
            for (int i = 0; i < tile.n_full; i++) {
                int g = tile.full[i];
                outs[i] = job->queries[g].out;
                weights[i] = layout.weights + g * ATTEND_TILE_KEYS;
                full_scales[i] = scale[g];
            }
            attend512_values_of(tile.n_full, outs, weights, full_scales, tile.low, tile.high, tile_start, layout.keys,
                                padded, d0, width);
            for (int i = 0; i < tile.n_partial; i++) {
                int g = tile.partial[i];
                float *out = job->queries[g].out;
                const float *row = layout.weights + g * ATTEND_TILE_KEYS;
                attend512_values_of(1, &out, &row, &scale[g], tile.query_low[g], tile.query_high[g], tile_start,
                                    layout.keys, padded, d0, width);
            }
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
