/* AVX2 dot-product kernels of the ternary formats TQ1_0 and TQ2_0 against
 * Q8_K (layouts in quant_ternary.c). Both unpack to unsigned digits
 * c = value + 1 (TQ2_0's 2-bit codes; TQ1_0's base-3 digits), so maddubs
 * takes them as they are and the block's sum is sum(c * a) - sum(a), the
 * second term from the activation's 16-value sums: exact for any bit
 * pattern. TQ1_0's digit n of a byte b: m = b * 3^n modulo 256 (byte adds
 * wrap the same way), then floor(3m / 256), which is (m >= 86) + (m >= 171).
 * The AVX-512 set lists these kernels too: the work is in the unpacking,
 * which wider registers do not shorten. Each row sums its blocks into f32
 * lanes in increasing order; rows never share accumulators. */
#include <immintrin.h>

#include "dot_common.h"
#include "kernels_dispatch.h"

KERNEL_INLINE float ternary_hsum(__m256 v)
{
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

/* Pair sums of digits times quants, widened and added into eight int32 lanes. */
KERNEL_INLINE __m256i ternary_dot32(__m256i digits, const int8_t *q, __m256i sum)
{
    __m256i pairs = _mm256_maddubs_epi16(digits, _mm256_loadu_si256((const __m256i *)q));
    return _mm256_add_epi32(sum, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
}

KERNEL_INLINE __m128i ternary_dot16(__m128i digits, const int8_t *q, __m128i sum)
{
    __m128i pairs = _mm_maddubs_epi16(digits, _mm_loadu_si128((const __m128i *)q));
    return _mm_add_epi32(sum, _mm_madd_epi16(pairs, _mm_set1_epi16(1)));
}

/* The base-3 digit (0, 1, 2) at the top of each byte. */
KERNEL_INLINE __m256i ternary_top_digit(__m256i m)
{
    __m256i ge86 = _mm256_cmpeq_epi8(_mm256_max_epu8(m, _mm256_set1_epi8(86)), m);
    __m256i ge171 = _mm256_cmpeq_epi8(_mm256_max_epu8(m, _mm256_set1_epi8((char)171)), m);
    return _mm256_sub_epi8(_mm256_setzero_si256(), _mm256_add_epi8(ge86, ge171));
}

KERNEL_INLINE __m128i ternary_top_digit128(__m128i m)
{
    __m128i ge86 = _mm_cmpeq_epi8(_mm_max_epu8(m, _mm_set1_epi8(86)), m);
    __m128i ge171 = _mm_cmpeq_epi8(_mm_max_epu8(m, _mm_set1_epi8((char)171)), m);
    return _mm_sub_epi8(_mm_setzero_si128(), _mm_add_epi8(ge86, ge171));
}

KERNEL_INLINE __m256i times3(__m256i m)
{
    return _mm256_add_epi8(m, _mm256_add_epi8(m, m));
}

KERNEL_INLINE __m128i times3_128(__m128i m)
{
    return _mm_add_epi8(m, _mm_add_epi8(m, m));
}

/* sum(c * a) over a TQ1_0 block, in eight int32 lanes (four used twice). */
KERNEL_INLINE __m256i tq1_0_block(const block_tq1_0 *x, const block_q8_k *y)
{
    __m256i sum = _mm256_setzero_si256();
    __m256i m = _mm256_loadu_si256((const __m256i *)x->qs);
    KERNEL_UNROLLED for (int n = 0; n < 5; n++) {
        sum = ternary_dot32(ternary_top_digit(m), y->qs + 32 * n, sum);
        m = times3(m);
    }
    __m128i sum16 = _mm_setzero_si128();
    __m128i m16 = _mm_loadu_si128((const __m128i *)(x->qs + 32));
    KERNEL_UNROLLED for (int n = 0; n < 5; n++) {
        sum16 = ternary_dot16(ternary_top_digit128(m16), y->qs + 160 + 16 * n, sum16);
        m16 = times3_128(m16);
    }
    /* the four qh bytes, digit l of byte j at 4l + j: word l holds the
     * bytes times 3^l */
    uint32_t high;
    memcpy(&high, x->qh, 4);
    __m128i h0 = _mm_set1_epi32((int)high);
    __m128i h1 = times3_128(h0), h2 = times3_128(h1), h3 = times3_128(h2);
    __m128i h = _mm_blend_epi32(_mm_blend_epi32(h0, h1, 0x2), _mm_blend_epi32(h2, h3, 0x8), 0xc);
    sum16 = ternary_dot16(ternary_top_digit128(h), y->qs + 240, sum16);
    return _mm256_add_epi32(sum, _mm256_set_m128i(_mm_setzero_si128(), sum16));
}

/* sum(c * a) over a TQ2_0 block. */
KERNEL_INLINE __m256i tq2_0_block(const block_tq2_0 *x, const block_q8_k *y)
{
    const __m256i low2 = _mm256_set1_epi8(3);
    __m256i sum = _mm256_setzero_si256();
    KERNEL_UNROLLED for (int half = 0; half < 2; half++) {
        __m256i codes = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * half));
        KERNEL_UNROLLED for (int l = 0; l < 4; l++) {
            __m256i c = _mm256_and_si256(_mm256_srli_epi16(codes, 2 * l), low2);
            sum = ternary_dot32(c, y->qs + 128 * half + 32 * l, sum);
        }
    }
    return sum;
}

/* sum(a) over the block, in eight int32 lanes. */
KERNEL_INLINE __m256i ternary_activation_sum(const block_q8_k *y)
{
    return _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums), _mm256_set1_epi16(1));
}

#define TERNARY_AVX2_KERNELS(name, block_type)                                                         \
    KERNEL_INLINE void name##_group(const int R, int64_t n, const uint8_t *rows, size_t row_bytes,      \
                                    const void *activation, float *out)                                \
    {                                                                                                  \
        const block_q8_k *a = activation;                                                              \
        const int64_t nb = n / QK_K;                                                                   \
        __m256 acc[KERNEL_GROUP_ROWS];                                                                 \
        KERNEL_UNROLLED for (int r = 0; r < R; r++)                                                    \
            acc[r] = _mm256_setzero_ps();                                                              \
        for (int64_t b = 0; b < nb; b++) {                                                             \
            __m256i offset = ternary_activation_sum(a + b);                                            \
            KERNEL_UNROLLED for (int r = 0; r < R; r++) {                                              \
                const block_type *x = (const block_type *)(rows + (size_t)r * row_bytes) + b;          \
                __builtin_prefetch(x + KERNEL_PREFETCH_BLOCKS);                                        \
                __m256i sum = _mm256_sub_epi32(name##_block(x, a + b), offset);                        \
                float d = _cvtsh_ss(x->d) * a[b].d;                                                    \
                acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_set1_ps(d), acc[r]);          \
            }                                                                                          \
        }                                                                                              \
        KERNEL_UNROLLED for (int r = 0; r < R; r++)                                                    \
            out[r] = ternary_hsum(acc[r]);                                                             \
    }                                                                                                  \
    KERNEL_DEFINE_DOT_ROWS(name##_rows, name##_group)                                                  \
    KERNEL_DEFINE_DOT_DECODE_GROUP(name##_decode, name##_group)                                        \
    void avx2_dot_rows_##name(int64_t n, const void *weights, size_t row_bytes, int64_t n_rows,        \
                              const void *activation, float *out)                                      \
    {                                                                                                  \
        name##_rows(n, weights, row_bytes, n_rows, activation, out);                                   \
    }                                                                                                  \
    void avx2_dot_decode_##name(int64_t n, const void *weights, size_t row_bytes, int64_t n_rows,      \
                                const void *activation, float *out)                                    \
    {                                                                                                  \
        name##_decode(n, weights, row_bytes, n_rows, activation, out);                                 \
    }

TERNARY_AVX2_KERNELS(tq1_0, block_tq1_0)
TERNARY_AVX2_KERNELS(tq2_0, block_tq2_0)
