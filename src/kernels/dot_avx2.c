/* AVX2 + FMA + F16C dot-product kernels: Q8_0, Q4_0, IQ4_NL, MXFP4 (32-element
 * blocks against Q8_0), Q4_K, Q5_K, Q6_K (against Q8_K), F16 and BF16.
 * Integer sums inside a block are exact (maddubs on unsigned 4-6 bit weights,
 * or sign-extended 16-bit madd where both sides are signed); across blocks
 * each row accumulates in f32 lanes in increasing block order. */
#include <immintrin.h>

#include "dot_common.h"

KERNEL_INLINE float avx2_hsum(__m256 v)
{
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

KERNEL_INLINE float avx2_hsum128(__m128 x)
{
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

KERNEL_INLINE float avx2_f16(uint16_t h)
{
    return _cvtsh_ss(h);
}

KERNEL_INLINE void avx2_prefetch(const uint8_t *row, int64_t block, size_t block_bytes)
{
    __builtin_prefetch(row + (size_t)(block + KERNEL_PREFETCH_BLOCKS) * block_bytes);
}

/* ---- 32-element blocks against Q8_0 activations ------------------------ */

/* Exact signed dot of 32 int8 weights (as two halves of 16) with the block's
 * activations already widened to 16 bits. */
KERNEL_INLINE __m256i avx2_dot_s8_halves(__m128i w_low, __m128i w_high, __m256i a_low, __m256i a_high)
{
    __m256i p0 = _mm256_madd_epi16(_mm256_cvtepi8_epi16(w_low), a_low);
    __m256i p1 = _mm256_madd_epi16(_mm256_cvtepi8_epi16(w_high), a_high);
    return _mm256_add_epi32(p0, p1);
}

KERNEL_INLINE void q8_0_group(const int R, int64_t n, const uint8_t *rows, size_t row_bytes,
                              const void *activation, float *out)
{
    const block_q8_0 *a = activation;
    const int64_t nb = n / QK8_0;
    __m256 acc[KERNEL_GROUP_ROWS];
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m256i a_low = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)a[b].qs));
        __m256i a_high = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(a[b].qs + 16)));
        float da = avx2_f16(a[b].d);
        KERNEL_UNROLLED for (int r = 0; r < R; r++) {
            const uint8_t *row = rows + (size_t)r * row_bytes;
            avx2_prefetch(row, b, sizeof(block_q8_0));
            const block_q8_0 *x = (const block_q8_0 *)row + b;
            __m256i sum = avx2_dot_s8_halves(_mm_loadu_si128((const __m128i *)x->qs),
                                             _mm_loadu_si128((const __m128i *)(x->qs + 16)), a_low,
                                             a_high);
            __m256 d = _mm256_set1_ps(avx2_f16(x->d) * da);
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), d, acc[r]);
        }
    }
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        out[r] = avx2_hsum(acc[r]);
}

/* Nibble formats: byte j holds element j (low) and j + 16 (high); a 16-entry
 * table maps each nibble to its signed 8-bit value. */
KERNEL_INLINE __m256i avx2_dot_nibbles(const uint8_t *qs, __m128i table, __m256i a_low, __m256i a_high)
{
    const __m128i low4 = _mm_set1_epi8(0x0f);
    __m128i q = _mm_loadu_si128((const __m128i *)qs);
    __m128i w_low = _mm_shuffle_epi8(table, _mm_and_si128(q, low4));
    __m128i w_high = _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(q, 4), low4));
    return avx2_dot_s8_halves(w_low, w_high, a_low, a_high);
}

/* Q4_0 and IQ4_NL share a layout (f16 d, 16 bytes of nibbles). */
KERNEL_INLINE void nibble_f16_group(const int R, int64_t n, const uint8_t *rows, size_t row_bytes,
                                    const void *activation, float *out, const int8_t *values)
{
    const block_q8_0 *a = activation;
    const int64_t nb = n / QK8_0;
    const __m128i table = _mm_loadu_si128((const __m128i *)values);
    __m256 acc[KERNEL_GROUP_ROWS];
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m256i a_low = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)a[b].qs));
        __m256i a_high = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(a[b].qs + 16)));
        float da = avx2_f16(a[b].d);
        KERNEL_UNROLLED for (int r = 0; r < R; r++) {
            const uint8_t *row = rows + (size_t)r * row_bytes;
            avx2_prefetch(row, b, sizeof(block_q4_0));
            const block_q4_0 *x = (const block_q4_0 *)row + b;
            __m256i sum = avx2_dot_nibbles(x->qs, table, a_low, a_high);
            __m256 d = _mm256_set1_ps(avx2_f16(x->d) * da);
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), d, acc[r]);
        }
    }
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        out[r] = avx2_hsum(acc[r]);
}

static const int8_t q4_0_values[16] = {-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7};

KERNEL_INLINE void q4_0_group(const int R, int64_t n, const uint8_t *rows, size_t row_bytes,
                              const void *activation, float *out)
{
    nibble_f16_group(R, n, rows, row_bytes, activation, out, q4_0_values);
}

KERNEL_INLINE void iq4_nl_group(const int R, int64_t n, const uint8_t *rows, size_t row_bytes,
                                const void *activation, float *out)
{
    nibble_f16_group(R, n, rows, row_bytes, activation, out, quant_iq4nl_values);
}

KERNEL_INLINE void mxfp4_group(const int R, int64_t n, const uint8_t *rows, size_t row_bytes,
                               const void *activation, float *out)
{
    const block_q8_0 *a = activation;
    const int64_t nb = n / 32;
    const __m128i table = _mm_loadu_si128((const __m128i *)quant_mxfp4_values);
    __m256 acc[KERNEL_GROUP_ROWS];
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m256i a_low = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)a[b].qs));
        __m256i a_high = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(a[b].qs + 16)));
        float da = avx2_f16(a[b].d);
        KERNEL_UNROLLED for (int r = 0; r < R; r++) {
            const uint8_t *row = rows + (size_t)r * row_bytes;
            avx2_prefetch(row, b, sizeof(block_mxfp4));
            const block_mxfp4 *x = (const block_mxfp4 *)row + b;
            __m256i sum = avx2_dot_nibbles(x->qs, table, a_low, a_high);
            __m256 d = _mm256_set1_ps(da * quant_e8m0_half(x->e));
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), d, acc[r]);
        }
    }
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        out[r] = avx2_hsum(acc[r]);
}

/* ---- K-quants against Q8_K activations --------------------------------- */

/* Shuffle control that broadcasts 16-bit word j of each 128-bit lane. */
KERNEL_INLINE __m256i avx2_word_broadcast(int j)
{
    return _mm256_set1_epi16((short)(0x0100 + 0x0202 * j));
}

/* Pairwise sums of the activation's 16-element partial sums: one per
 * 32-element sub-block, as eight 16-bit values. */
KERNEL_INLINE __m128i avx2_bsum_pairs(const block_q8_k *y)
{
    __m256i pairs = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums), _mm256_set1_epi16(1));
    return _mm_packs_epi32(_mm256_castsi256_si128(pairs), _mm256_extracti128_si256(pairs, 1));
}

/* Q4_K and Q5_K: per row and block, the scaled integer sum and the min term.
 * high_bits is NULL for Q4_K, the qh array for Q5_K. */
KERNEL_INLINE void k4_block(const uint8_t *header, const uint8_t *qs, const uint8_t *high_bits,
                            const block_q8_k *y, __m128i bsum_pairs, float dy, __m256 *acc, __m128 *acc_min)
{
    uint16_t d_bits, dmin_bits;
    memcpy(&d_bits, header, 2);
    memcpy(&dmin_bits, header + 2, 2);
    uint8_t unpacked[16];
    kernel_k4_unpack_scales(header + 4, unpacked);
    __m128i scale_min = _mm_loadu_si128((const __m128i *)unpacked);
    __m128i scales = _mm_cvtepu8_epi16(scale_min);
    __m128i mins = _mm_cvtepu8_epi16(_mm_srli_si128(scale_min, 8));
    __m128i min_sum = _mm_madd_epi16(mins, bsum_pairs);
    __m256i scales_both = _mm256_broadcastsi128_si256(scales);

    const __m256i low4 = _mm256_set1_epi8(0x0f);
    const __m256i sixteen = _mm256_set1_epi8(0x10);
    __m256i qh = _mm256_setzero_si256();
    if (high_bits)
        qh = _mm256_loadu_si256((const __m256i *)high_bits);
    __m256i sum = _mm256_setzero_si256();
    KERNEL_UNROLLED for (int c = 0; c < 4; c++) {
        __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
        __m256i low = _mm256_and_si256(q, low4);
        __m256i high = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
        if (high_bits) {
            __m256i bit_low = _mm256_set1_epi8((char)(1 << (2 * c)));
            __m256i bit_high = _mm256_set1_epi8((char)(1 << (2 * c + 1)));
            low = _mm256_or_si256(low, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bit_low), bit_low), sixteen));
            high = _mm256_or_si256(high, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bit_high), bit_high), sixteen));
        }
        __m256i p_low = _mm256_maddubs_epi16(low, _mm256_loadu_si256((const __m256i *)(y->qs + 64 * c)));
        __m256i p_high = _mm256_maddubs_epi16(high, _mm256_loadu_si256((const __m256i *)(y->qs + 64 * c + 32)));
        p_low = _mm256_madd_epi16(p_low, _mm256_shuffle_epi8(scales_both, avx2_word_broadcast(2 * c)));
        p_high = _mm256_madd_epi16(p_high, _mm256_shuffle_epi8(scales_both, avx2_word_broadcast(2 * c + 1)));
        sum = _mm256_add_epi32(sum, _mm256_add_epi32(p_low, p_high));
    }
    float d = avx2_f16(d_bits) * dy;
    float dmin = avx2_f16(dmin_bits) * dy;
    *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_set1_ps(d), *acc);
    *acc_min = _mm_fmadd_ps(_mm_cvtepi32_ps(min_sum), _mm_set1_ps(dmin), *acc_min);
}

KERNEL_INLINE void q4_k_group(const int R, int64_t n, const uint8_t *rows, size_t row_bytes,
                              const void *activation, float *out)
{
    const block_q8_k *a = activation;
    const int64_t nb = n / QK_K;
    __m256 acc[KERNEL_GROUP_ROWS];
    __m128 acc_min[KERNEL_GROUP_ROWS];
    KERNEL_UNROLLED for (int r = 0; r < R; r++) {
        acc[r] = _mm256_setzero_ps();
        acc_min[r] = _mm_setzero_ps();
    }
    for (int64_t b = 0; b < nb; b++) {
        const block_q8_k *y = a + b;
        __m128i pairs = avx2_bsum_pairs(y);
        KERNEL_UNROLLED for (int r = 0; r < R; r++) {
            const uint8_t *row = rows + (size_t)r * row_bytes;
            avx2_prefetch(row, b, sizeof(block_q4_k));
            const block_q4_k *x = (const block_q4_k *)row + b;
            k4_block((const uint8_t *)x, x->qs, NULL, y, pairs, y->d, &acc[r], &acc_min[r]);
        }
    }
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        out[r] = avx2_hsum(acc[r]) - avx2_hsum128(acc_min[r]);
}

KERNEL_INLINE void q5_k_group(const int R, int64_t n, const uint8_t *rows, size_t row_bytes,
                              const void *activation, float *out)
{
    const block_q8_k *a = activation;
    const int64_t nb = n / QK_K;
    __m256 acc[KERNEL_GROUP_ROWS];
    __m128 acc_min[KERNEL_GROUP_ROWS];
    KERNEL_UNROLLED for (int r = 0; r < R; r++) {
        acc[r] = _mm256_setzero_ps();
        acc_min[r] = _mm_setzero_ps();
    }
    for (int64_t b = 0; b < nb; b++) {
        const block_q8_k *y = a + b;
        __m128i pairs = avx2_bsum_pairs(y);
        KERNEL_UNROLLED for (int r = 0; r < R; r++) {
            const uint8_t *row = rows + (size_t)r * row_bytes;
            avx2_prefetch(row, b, sizeof(block_q5_k));
            const block_q5_k *x = (const block_q5_k *)row + b;
            k4_block((const uint8_t *)x, x->qs, x->qh, y, pairs, y->d, &acc[r], &acc_min[r]);
        }
    }
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        out[r] = avx2_hsum(acc[r]) - avx2_hsum128(acc_min[r]);
}

/* Q6_K: weights taken unsigned (0..63) so maddubs applies; the -32 offset is
 * folded back with the activation's 16-element sums: sum sc*32*bsum. */
KERNEL_INLINE void q6_k_group(const int R, int64_t n, const uint8_t *rows, size_t row_bytes,
                              const void *activation, float *out)
{
    const block_q8_k *a = activation;
    const int64_t nb = n / QK_K;
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    const __m256i bits45 = _mm256_set1_epi8(0x30);
    __m256 acc[KERNEL_GROUP_ROWS];
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const block_q8_k *y = a + b;
        __m256i bsums = _mm256_loadu_si256((const __m256i *)y->bsums);
        KERNEL_UNROLLED for (int r = 0; r < R; r++) {
            const uint8_t *row = rows + (size_t)r * row_bytes;
            avx2_prefetch(row, b, sizeof(block_q6_k));
            const block_q6_k *x = (const block_q6_k *)row + b;
            __m128i scales8 = _mm_loadu_si128((const __m128i *)x->scales);
            __m256i offset = _mm256_madd_epi16(_mm256_cvtepi8_epi16(scales8), bsums);
            __m256i sum = _mm256_setzero_si256();
            KERNEL_UNROLLED for (int h = 0; h < 2; h++) {
                __m256i l0 = _mm256_loadu_si256((const __m256i *)(x->ql + 64 * h));
                __m256i l1 = _mm256_loadu_si256((const __m256i *)(x->ql + 64 * h + 32));
                __m256i hb = _mm256_loadu_si256((const __m256i *)(x->qh + 32 * h));
                __m256i q[4];
                q[0] = _mm256_or_si256(_mm256_and_si256(l0, low4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), bits45));
                q[1] = _mm256_or_si256(_mm256_and_si256(l1, low4), _mm256_and_si256(_mm256_slli_epi16(hb, 2), bits45));
                q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low4), _mm256_and_si256(hb, bits45));
                q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low4),
                                       _mm256_and_si256(_mm256_srli_epi16(hb, 2), bits45));
                KERNEL_UNROLLED for (int k = 0; k < 4; k++) {
                    int pair = 4 * h + k; /* sub-blocks 2*pair and 2*pair + 1 */
                    __m128i pick = _mm_set_epi64x((long long)(0x0101010101010101ull * (uint64_t)(2 * pair + 1)),
                                                  (long long)(0x0101010101010101ull * (uint64_t)(2 * pair)));
                    __m256i scale = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales8, pick));
                    __m256i p = _mm256_maddubs_epi16(q[k], _mm256_loadu_si256((const __m256i *)(y->qs + 128 * h + 32 * k)));
                    sum = _mm256_add_epi32(sum, _mm256_madd_epi16(p, scale));
                }
            }
            sum = _mm256_sub_epi32(sum, _mm256_slli_epi32(offset, 5));
            float d = avx2_f16(x->d) * y->d;
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_set1_ps(d), acc[r]);
        }
    }
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        out[r] = avx2_hsum(acc[r]);
}

/* ---- F16 and BF16 against activations of the same type ---------------- */

KERNEL_INLINE __m256 avx2_load_f16(const uint8_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

KERNEL_INLINE __m256 avx2_load_bf16(const uint8_t *p)
{
    __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}

/* 16 elements per step into two accumulators per row; a tail shorter than
 * 16 is zero-padded into local buffers and takes the same path. */
#define HALF_GROUP(name, load)                                                                   \
    KERNEL_INLINE void name(const int R, int64_t n, const uint8_t *rows, size_t row_bytes,       \
                            const void *activation, float *out)                                  \
    {                                                                                            \
        const uint8_t *a = activation;                                                           \
        __m256 acc0[KERNEL_GROUP_ROWS], acc1[KERNEL_GROUP_ROWS];                                 \
        KERNEL_UNROLLED for (int r = 0; r < R; r++) {                                                            \
            acc0[r] = _mm256_setzero_ps();                                                       \
            acc1[r] = _mm256_setzero_ps();                                                       \
        }                                                                                        \
        int64_t i = 0;                                                                           \
        for (; i + 16 <= n; i += 16) {                                                           \
            __m256 a0 = load(a + 2 * i), a1 = load(a + 2 * i + 16);                              \
            KERNEL_UNROLLED for (int r = 0; r < R; r++) {                                                        \
                const uint8_t *x = rows + (size_t)r * row_bytes + 2 * i;                         \
                __builtin_prefetch(x + 256);                                                     \
                acc0[r] = _mm256_fmadd_ps(load(x), a0, acc0[r]);                                 \
                acc1[r] = _mm256_fmadd_ps(load(x + 16), a1, acc1[r]);                            \
            }                                                                                    \
        }                                                                                        \
        if (i < n) {                                                                             \
            uint8_t a_tail[32] = {0};                                                            \
            memcpy(a_tail, a + 2 * i, (size_t)(n - i) * 2);                                      \
            __m256 a0 = load(a_tail), a1 = load(a_tail + 16);                                    \
            KERNEL_UNROLLED for (int r = 0; r < R; r++) {                                                        \
                uint8_t x[32] = {0};                                                             \
                memcpy(x, rows + (size_t)r * row_bytes + 2 * i, (size_t)(n - i) * 2);            \
                acc0[r] = _mm256_fmadd_ps(load(x), a0, acc0[r]);                                 \
                acc1[r] = _mm256_fmadd_ps(load(x + 16), a1, acc1[r]);                            \
            }                                                                                    \
        }                                                                                        \
        KERNEL_UNROLLED for (int r = 0; r < R; r++)                                                              \
            out[r] = avx2_hsum(_mm256_add_ps(acc0[r], acc1[r]));                                 \
    }

HALF_GROUP(f16_group, avx2_load_f16)
HALF_GROUP(bf16_group, avx2_load_bf16)

KERNEL_DEFINE_DOT_ROWS(avx2_dot_rows_q8_0, q8_0_group)
KERNEL_DEFINE_DOT_ROWS(avx2_dot_rows_q4_0, q4_0_group)
KERNEL_DEFINE_DOT_ROWS(avx2_dot_rows_iq4_nl, iq4_nl_group)
KERNEL_DEFINE_DOT_ROWS(avx2_dot_rows_mxfp4, mxfp4_group)
KERNEL_DEFINE_DOT_ROWS(avx2_dot_rows_q4_k, q4_k_group)
KERNEL_DEFINE_DOT_ROWS(avx2_dot_rows_q5_k, q5_k_group)
KERNEL_DEFINE_DOT_ROWS(avx2_dot_rows_q6_k, q6_k_group)
KERNEL_DEFINE_DOT_ROWS(avx2_dot_rows_f16, f16_group)
KERNEL_DEFINE_DOT_ROWS(avx2_dot_rows_bf16, bf16_group)

static const kernel_set avx2_set = {
    .name = "avx2",
    .dot_rows = {
        [TYPE_Q8_0] = avx2_dot_rows_q8_0,
        [TYPE_Q4_0] = avx2_dot_rows_q4_0,
        [TYPE_IQ4_NL] = avx2_dot_rows_iq4_nl,
        [TYPE_MXFP4] = avx2_dot_rows_mxfp4,
        [TYPE_Q4_K] = avx2_dot_rows_q4_k,
        [TYPE_Q5_K] = avx2_dot_rows_q5_k,
        [TYPE_Q6_K] = avx2_dot_rows_q6_k,
        [TYPE_F16] = avx2_dot_rows_f16,
        [TYPE_BF16] = avx2_dot_rows_bf16,
    },
};

const kernel_set *kernels_avx2(void)
{
    return &avx2_set;
}
