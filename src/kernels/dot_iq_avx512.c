/* AVX-512 (F, BW, VL, VNNI) dot-product kernels of the grid i-quants
 * IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S and IQ1_M against Q8_K
 * (dot_iq_common.h reads the blocks). Two sub-blocks per zmm: their 64 sign
 * bits are a byte mask as they stand, so one masked subtract negates the
 * activation's quants; maddubs forms the exact pair sums and vpdpwssd
 * applies the multipliers of the four 16-value halves (one per 128-bit
 * lane) while accumulating. Each row sums its blocks into f32 lanes in
 * increasing order; rows never share accumulators. */
#include <immintrin.h>

#include "dot_iq_common.h"
#include "kernels_dispatch.h"

KERNEL_INLINE float iq_avx512_hsum(__m512 v)
{
    __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

/* The multipliers of two sub-blocks (iq_sub.scales of each) as words,
 * each 128-bit lane holding one half's (where maddubs leaves its pair
 * sums): lane L takes word L of the broadcast 64 bits. */
KERNEL_INLINE __m512i iq_avx512_multipliers(uint32_t first, uint32_t second)
{
    const __m512i spread = _mm512_set_epi64(0x0706070607060706ll, 0x0706070607060706ll, 0x0504050405040504ll,
                                            0x0504050405040504ll, 0x0302030203020302ll, 0x0302030203020302ll,
                                            0x0100010001000100ll, 0x0100010001000100ll);
    return _mm512_shuffle_epi8(_mm512_set1_epi64((long long)((uint64_t)first | (uint64_t)second << 32)), spread);
}

KERNEL_INLINE __m512i iq_avx512_points(const uint64_t low[4], const uint64_t high[4])
{
    return _mm512_set_epi64((long long)high[3], (long long)high[2], (long long)high[1], (long long)high[0],
                            (long long)low[3], (long long)low[2], (long long)low[1], (long long)low[0]);
}

/* One block's scaled integer sum in sixteen int32 lanes. */
KERNEL_INLINE __m512i iq_avx512_block(const uint8_t *block, const block_q8_k *y, const enum iq_kind kind)
{
    __m512i sum = _mm512_setzero_si512();
    KERNEL_UNROLLED for (int p = 0; p < 4; p++) {
        iq_sub first = iq_sub_block(kind, block, 2 * p);
        iq_sub second = iq_sub_block(kind, block, 2 * p + 1);
        __mmask64 negative = (__mmask64)((uint64_t)first.signs | (uint64_t)second.signs << 32);
        __m512i q = _mm512_loadu_si512((const void *)(y->qs + 64 * p));
        q = _mm512_mask_sub_epi8(q, negative, _mm512_setzero_si512(), q);
        __m512i pairs = _mm512_maddubs_epi16(iq_avx512_points(first.points, second.points), q);
        sum = _mm512_dpwssd_epi32(sum, pairs, iq_avx512_multipliers(first.scales, second.scales));
    }
    return sum;
}

KERNEL_INLINE void iq_avx512_group(const int R, int64_t n, const uint8_t *rows, size_t row_bytes,
                                   const void *activation, float *out, const enum iq_kind kind)
{
    const block_q8_k *a = activation;
    const int64_t nb = n / QK_K;
    const size_t block_bytes = iq_block_bytes(kind);
    __m512 acc[KERNEL_GROUP_ROWS];
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        acc[r] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        KERNEL_UNROLLED for (int r = 0; r < R; r++) {
            const uint8_t *row = rows + (size_t)r * row_bytes;
            __builtin_prefetch(row + (size_t)(b + KERNEL_PREFETCH_BLOCKS) * block_bytes);
            const uint8_t *block = row + (size_t)b * block_bytes;
            __m512i sum = iq_avx512_block(block, a + b, kind);
            float d = _cvtsh_ss(iq_d_bits(block)) * a[b].d;
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(d), acc[r]);
        }
    }
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        out[r] = iq_factor(kind) * iq_avx512_hsum(acc[r]);
}

/* IQ1: one block's integer sum, 8 times the reference's plus its delta sum
 * (dot_iq_common.h), in sixteen int32 lanes. 8g by three doublings of g
 * in -1, 0, 1 (no byte shifts); maddubs takes |w| and the quants negated
 * where w is (w is odd, never 0). */
KERNEL_INLINE __m512i iq1_avx512_block(const uint8_t *block, const block_q8_k *y, const enum iq1_kind kind)
{
    __m512i sum = _mm512_setzero_si512();
    KERNEL_UNROLLED for (int p = 0; p < 4; p++) {
        iq1_sub first = iq1_sub_block(kind, block, 2 * p);
        iq1_sub second = iq1_sub_block(kind, block, 2 * p + 1);
        __m512i g = iq_avx512_points(first.points, second.points);
        g = _mm512_add_epi8(g, g);
        g = _mm512_add_epi8(g, g);
        g = _mm512_add_epi8(g, g);
        __m512i w = _mm512_add_epi8(g, iq_avx512_points(first.deltas, second.deltas));
        __m512i q = _mm512_loadu_si512((const void *)(y->qs + 64 * p));
        q = _mm512_mask_sub_epi8(q, _mm512_movepi8_mask(w), _mm512_setzero_si512(), q);
        __m512i pairs = _mm512_maddubs_epi16(_mm512_abs_epi8(w), q);
        sum = _mm512_dpwssd_epi32(sum, pairs, iq_avx512_multipliers(first.scales, second.scales));
    }
    return sum;
}

KERNEL_INLINE void iq1_avx512_group(const int R, int64_t n, const uint8_t *rows, size_t row_bytes,
                                    const void *activation, float *out, const enum iq1_kind kind)
{
    const block_q8_k *a = activation;
    const int64_t nb = n / QK_K;
    const size_t block_bytes = iq1_block_bytes(kind);
    __m512 acc[KERNEL_GROUP_ROWS];
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        acc[r] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        KERNEL_UNROLLED for (int r = 0; r < R; r++) {
            const uint8_t *row = rows + (size_t)r * row_bytes;
            __builtin_prefetch(row + (size_t)(b + KERNEL_PREFETCH_BLOCKS) * block_bytes);
            const uint8_t *block = row + (size_t)b * block_bytes;
            __m512i sum = iq1_avx512_block(block, a + b, kind);
            float d = _cvtsh_ss(iq1_d_bits(kind, block)) * a[b].d;
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(d), acc[r]);
        }
    }
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        out[r] = 0.125f * iq_avx512_hsum(acc[r]);
}

#define IQ_AVX512_KERNELS(name, group_fn, kind)                                                      \
    KERNEL_INLINE void name##_group(const int R, int64_t n, const uint8_t *rows, size_t row_bytes,    \
                                    const void *activation, float *out)                              \
    {                                                                                                \
        group_fn(R, n, rows, row_bytes, activation, out, kind);                                      \
    }                                                                                                \
    KERNEL_DEFINE_DOT_ROWS(name##_rows, name##_group)                                                \
    KERNEL_DEFINE_DOT_DECODE_GROUP(name##_decode, name##_group)                                      \
    void avx512_dot_rows_##name(int64_t n, const void *weights, size_t row_bytes, int64_t n_rows,    \
                                const void *activation, float *out)                                  \
    {                                                                                                \
        name##_rows(n, weights, row_bytes, n_rows, activation, out);                                 \
    }                                                                                                \
    void avx512_dot_decode_##name(int64_t n, const void *weights, size_t row_bytes, int64_t n_rows,  \
                                  const void *activation, float *out)                                \
    {                                                                                                \
        name##_decode(n, weights, row_bytes, n_rows, activation, out);                               \
    }

IQ_AVX512_KERNELS(iq2_xxs, iq_avx512_group, IQ_KIND_2XXS)
IQ_AVX512_KERNELS(iq2_xs, iq_avx512_group, IQ_KIND_2XS)
IQ_AVX512_KERNELS(iq2_s, iq_avx512_group, IQ_KIND_2S)
IQ_AVX512_KERNELS(iq3_xxs, iq_avx512_group, IQ_KIND_3XXS)
IQ_AVX512_KERNELS(iq3_s, iq_avx512_group, IQ_KIND_3S)
IQ_AVX512_KERNELS(iq1_s, iq1_avx512_group, IQ1_KIND_S)
IQ_AVX512_KERNELS(iq1_m, iq1_avx512_group, IQ1_KIND_M)
