/* AVX2 dot-product kernels of the grid i-quants IQ2_XXS, IQ2_XS, IQ2_S,
 * IQ3_XXS, IQ3_S, IQ1_S and IQ1_M against Q8_K (dot_iq_common.h reads the
 * blocks). A sub-block is one ymm of 32 unsigned grid values; its signs negate the
 * activation's quants (xor and subtract with a byte mask), maddubs forms
 * the exact pair sums (at most 2 x 62 x 127, inside 16 bits), and madd
 * applies the multipliers of the two 16-value halves, one per 128-bit lane.
 * Each row sums its blocks into f32 lanes in increasing order; rows never
 * share accumulators, so a row's bits do not depend on its group. */
#include <immintrin.h>

#include "dot_iq_common.h"
#include "kernels_dispatch.h"

KERNEL_INLINE float iq_avx2_hsum(__m256 v)
{
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

/* 0xff in byte 8g + j where bit j of sign byte g is set. */
KERNEL_INLINE __m256i iq_avx2_sign_mask(uint32_t signs)
{
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2,
                                            3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bits = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32((int)signs), spread);
    return _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bits), bits);
}

/* The multipliers of iq_sub.scales as words: the first 16 values' in the
 * low 128-bit lane, the last 16 values' in the high one (where maddubs
 * leaves their pair sums). */
KERNEL_INLINE __m256i iq_avx2_multipliers(uint32_t scales)
{
    const __m256i spread = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3,
                                            2, 3, 2, 3, 2, 3, 2, 3);
    return _mm256_shuffle_epi8(_mm256_set1_epi32((int)scales), spread);
}

KERNEL_INLINE __m256i iq_avx2_points(const uint64_t points[4])
{
    return _mm256_set_epi64x((long long)points[3], (long long)points[2], (long long)points[1],
                             (long long)points[0]);
}

/* One block's scaled integer sum in eight int32 lanes. */
KERNEL_INLINE __m256i iq_avx2_block(const uint8_t *block, const block_q8_k *y, const enum iq_kind kind)
{
    __m256i sum = _mm256_setzero_si256();
    KERNEL_UNROLLED for (int s = 0; s < 8; s++) {
        iq_sub sub = iq_sub_block(kind, block, s);
        __m256i mask = iq_avx2_sign_mask(sub.signs);
        __m256i q = _mm256_loadu_si256((const __m256i *)(y->qs + 32 * s));
        q = _mm256_sub_epi8(_mm256_xor_si256(q, mask), mask);
        __m256i pairs = _mm256_maddubs_epi16(iq_avx2_points(sub.points), q);
        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(pairs, iq_avx2_multipliers(sub.scales)));
    }
    return sum;
}

KERNEL_INLINE void iq_avx2_group(const int R, int64_t n, const uint8_t *rows, size_t row_bytes,
                                 const void *activation, float *out, const enum iq_kind kind)
{
    const block_q8_k *a = activation;
    const int64_t nb = n / QK_K;
    const size_t block_bytes = iq_block_bytes(kind);
    __m256 acc[KERNEL_GROUP_ROWS];
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        KERNEL_UNROLLED for (int r = 0; r < R; r++) {
            const uint8_t *row = rows + (size_t)r * row_bytes;
            __builtin_prefetch(row + (size_t)(b + KERNEL_PREFETCH_BLOCKS) * block_bytes);
            const uint8_t *block = row + (size_t)b * block_bytes;
            __m256i sum = iq_avx2_block(block, a + b, kind);
            float d = _cvtsh_ss(iq_d_bits(block)) * a[b].d;
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_set1_ps(d), acc[r]);
        }
    }
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        out[r] = iq_factor(kind) * iq_avx2_hsum(acc[r]);
}

/* IQ1: one block's integer sum, 8 times the reference's plus its delta sum
 * (dot_iq_common.h), in eight int32 lanes. sign() forms 8g from g in
 * -1, 0, 1; maddubs takes |w| and the quants with w's sign (w is odd, never
 * 0; the pair sums are at most 2 x 9 x 127). */
KERNEL_INLINE __m256i iq1_avx2_block(const uint8_t *block, const block_q8_k *y, const enum iq1_kind kind)
{
    const __m256i eight = _mm256_set1_epi8(8);
    __m256i sum = _mm256_setzero_si256();
    KERNEL_UNROLLED for (int s = 0; s < 8; s++) {
        iq1_sub sub = iq1_sub_block(kind, block, s);
        __m256i w = _mm256_add_epi8(_mm256_sign_epi8(eight, iq_avx2_points(sub.points)), iq_avx2_points(sub.deltas));
        __m256i q = _mm256_loadu_si256((const __m256i *)(y->qs + 32 * s));
        __m256i pairs = _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(q, w));
        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(pairs, iq_avx2_multipliers(sub.scales)));
    }
    return sum;
}

KERNEL_INLINE void iq1_avx2_group(const int R, int64_t n, const uint8_t *rows, size_t row_bytes,
                                  const void *activation, float *out, const enum iq1_kind kind)
{
    const block_q8_k *a = activation;
    const int64_t nb = n / QK_K;
    const size_t block_bytes = iq1_block_bytes(kind);
    __m256 acc[KERNEL_GROUP_ROWS];
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        KERNEL_UNROLLED for (int r = 0; r < R; r++) {
            const uint8_t *row = rows + (size_t)r * row_bytes;
            __builtin_prefetch(row + (size_t)(b + KERNEL_PREFETCH_BLOCKS) * block_bytes);
            const uint8_t *block = row + (size_t)b * block_bytes;
            __m256i sum = iq1_avx2_block(block, a + b, kind);
            float d = _cvtsh_ss(iq1_d_bits(kind, block)) * a[b].d;
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_set1_ps(d), acc[r]);
        }
    }
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        out[r] = 0.125f * iq_avx2_hsum(acc[r]);
}

#define IQ_AVX2_KERNELS(name, group_fn, kind)                                                        \
    KERNEL_INLINE void name##_group(const int R, int64_t n, const uint8_t *rows, size_t row_bytes,    \
                                    const void *activation, float *out)                              \
    {                                                                                                \
        group_fn(R, n, rows, row_bytes, activation, out, kind);                                      \
    }                                                                                                \
    KERNEL_DEFINE_DOT_ROWS(name##_rows, name##_group)                                                \
    KERNEL_DEFINE_DOT_DECODE_GROUP(name##_decode, name##_group)                                      \
    void avx2_dot_rows_##name(int64_t n, const void *weights, size_t row_bytes, int64_t n_rows,      \
                              const void *activation, float *out)                                    \
    {                                                                                                \
        name##_rows(n, weights, row_bytes, n_rows, activation, out);                                 \
    }                                                                                                \
    void avx2_dot_decode_##name(int64_t n, const void *weights, size_t row_bytes, int64_t n_rows,    \
                                const void *activation, float *out)                                  \
    {                                                                                                \
        name##_decode(n, weights, row_bytes, n_rows, activation, out);                               \
    }

IQ_AVX2_KERNELS(iq2_xxs, iq_avx2_group, IQ_KIND_2XXS)
IQ_AVX2_KERNELS(iq2_xs, iq_avx2_group, IQ_KIND_2XS)
IQ_AVX2_KERNELS(iq2_s, iq_avx2_group, IQ_KIND_2S)
IQ_AVX2_KERNELS(iq3_xxs, iq_avx2_group, IQ_KIND_3XXS)
IQ_AVX2_KERNELS(iq3_s, iq_avx2_group, IQ_KIND_3S)
IQ_AVX2_KERNELS(iq1_s, iq1_avx2_group, IQ1_KIND_S)
IQ_AVX2_KERNELS(iq1_m, iq1_avx2_group, IQ1_KIND_M)
