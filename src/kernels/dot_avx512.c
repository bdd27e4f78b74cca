/* AVX-512 (F, BW, VL, VNNI) dot-product kernels: Q8_0, Q4_0, IQ4_NL, MXFP4
 * against Q8_0; Q4_K, Q5_K, Q6_K against Q8_K; F16 and BF16. 32-element
 * blocks use 256-bit vpdpbusd on weights made unsigned by an offset that is
 * taken back out with the activation's block sum (exact for every byte
 * value); K-quants unpack 64 weights per zmm and apply the sub-block scales
 * with vpdpwssd. Integer sums inside a block are exact; across blocks each
 * row accumulates in f32 lanes in increasing block order. */
#include <immintrin.h>

#include "dot_common.h"

KERNEL_INLINE float avx512_hsum256(__m256 v)
{
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

KERNEL_INLINE float avx512_hsum(__m512 v)
{
    return avx512_hsum256(_mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)));
}

KERNEL_INLINE float avx512_hsum128(__m128 x)
{
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

KERNEL_INLINE float avx512_f16(uint16_t h)
{
    return _cvtsh_ss(h);
}

KERNEL_INLINE void avx512_prefetch(const uint8_t *row, int64_t block, size_t block_bytes)
{
    __builtin_prefetch(row + (size_t)(block + KERNEL_PREFETCH_BLOCKS) * block_bytes);
}

/* ---- 32-element blocks against Q8_0 activations ------------------------ */

/* How each format's 32 weights of a block become unsigned bytes (weight +
 * offset) for vpdpbusd. */
enum small_kind { SMALL_Q8_0, SMALL_Q4_0, SMALL_IQ4_NL, SMALL_MXFP4 };

static const int8_t q4_0_values[16] = {-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7};

KERNEL_INLINE int small_offset(enum small_kind kind)
{
    switch (kind) {
    case SMALL_Q8_0: return 128;
    case SMALL_Q4_0: return 8;
    case SMALL_IQ4_NL: return 128;
    case SMALL_MXFP4: return 12;
    }
    return 0;
}

KERNEL_INLINE size_t small_block_bytes(enum small_kind kind)
{
    return kind == SMALL_Q8_0 ? sizeof(block_q8_0) : kind == SMALL_MXFP4 ? sizeof(block_mxfp4) : sizeof(block_q4_0);
}

/* The nibble table plus the offset, in both 128-bit lanes. */
KERNEL_INLINE __m256i small_table(enum small_kind kind)
{
    const int8_t *values = kind == SMALL_MXFP4 ? quant_mxfp4_values
                           : kind == SMALL_IQ4_NL ? quant_iq4nl_values : q4_0_values;
    __m128i table = _mm_add_epi8(_mm_loadu_si128((const __m128i *)values),
                                 _mm_set1_epi8((char)small_offset(kind)));
    return _mm256_broadcastsi128_si256(table);
}

KERNEL_INLINE void small_group(const int R, int64_t n, const uint8_t *rows, size_t row_bytes,
                               const void *activation, float *out, const enum small_kind kind)
{
    const block_q8_0 *a = activation;
    const int64_t nb = n / 32;
    const size_t block_bytes = small_block_bytes(kind);
    const __m256i table = small_table(kind);
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    const __m256i ones = _mm256_set1_epi8(1);
    const __m256i offset = _mm256_set1_epi32(-small_offset(kind));
    __m256 acc[KERNEL_GROUP_ROWS];
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m256i y = _mm256_loadu_si256((const __m256i *)a[b].qs);
        /* -offset * (sum of each 4 activations): the start of every row's sum. */
        __m256i base = _mm256_mullo_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), ones, y), offset);
        float da = avx512_f16(a[b].d);
        KERNEL_UNROLLED for (int r = 0; r < R; r++) {
            const uint8_t *row = rows + (size_t)r * row_bytes;
            avx512_prefetch(row, b, block_bytes);
            const uint8_t *block = row + (size_t)b * block_bytes;
            __m256i w;
            float dw;
            if (kind == SMALL_Q8_0) {
                w = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(block + 2)), _mm256_set1_epi8((char)0x80));
            } else {
                const uint8_t *qs = block + (kind == SMALL_MXFP4 ? 1 : 2);
                __m128i q = _mm_loadu_si128((const __m128i *)qs);
                __m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(q), _mm_srli_epi16(q, 4), 1);
                w = _mm256_shuffle_epi8(table, _mm256_and_si256(both, low4));
            }
            if (kind == SMALL_MXFP4) {
                dw = quant_e8m0_half(block[0]);
            } else {
                uint16_t bits;
                memcpy(&bits, block, 2);
                dw = avx512_f16(bits);
            }
            __m256i sum = _mm256_dpbusd_epi32(base, w, y);
            __m256 d = _mm256_set1_ps(kind == SMALL_MXFP4 ? da * dw : dw * da);
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), d, acc[r]);
        }
    }
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        out[r] = avx512_hsum256(acc[r]);
}

KERNEL_INLINE void q8_0_group(const int R, int64_t n, const uint8_t *rows, size_t row_bytes,
                              const void *activation, float *out)
{
    small_group(R, n, rows, row_bytes, activation, out, SMALL_Q8_0);
}

KERNEL_INLINE void q4_0_group(const int R, int64_t n, const uint8_t *rows, size_t row_bytes,
                              const void *activation, float *out)
{
    small_group(R, n, rows, row_bytes, activation, out, SMALL_Q4_0);
}

KERNEL_INLINE void iq4_nl_group(const int R, int64_t n, const uint8_t *rows, size_t row_bytes,
                                const void *activation, float *out)
{
    small_group(R, n, rows, row_bytes, activation, out, SMALL_IQ4_NL);
}

KERNEL_INLINE void mxfp4_group(const int R, int64_t n, const uint8_t *rows, size_t row_bytes,
                               const void *activation, float *out)
{
    small_group(R, n, rows, row_bytes, activation, out, SMALL_MXFP4);
}

/* ---- K-quants against Q8_K activations --------------------------------- */

/* Two 256-bit halves as one zmm. */
KERNEL_INLINE __m512i avx512_join(__m256i low, __m256i high)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(low), high, 1);
}

/* A Q8_K block's activations reordered to match how Q4_K/Q5_K weights
 * unpack (shared by every row of a group): 64 weight bytes hold sub-blocks
 * 0 | 2 in their low nibbles and 1 | 3 in their high nibbles, the next 64
 * bytes 4 | 6 and 5 | 7; y[v] holds the activations of that pair. */
typedef struct k4_activation {
    __m512i y[4];
    __m128i bsum_pairs;
    float d;
} k4_activation;

KERNEL_INLINE void k4_activation_load(const block_q8_k *y, k4_activation *out)
{
    const __m256i *q = (const __m256i *)y->qs;
    out->y[0] = avx512_join(_mm256_loadu_si256(q + 0), _mm256_loadu_si256(q + 2));
    out->y[1] = avx512_join(_mm256_loadu_si256(q + 1), _mm256_loadu_si256(q + 3));
    out->y[2] = avx512_join(_mm256_loadu_si256(q + 4), _mm256_loadu_si256(q + 6));
    out->y[3] = avx512_join(_mm256_loadu_si256(q + 5), _mm256_loadu_si256(q + 7));
    __m256i pairs = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums), _mm256_set1_epi16(1));
    out->bsum_pairs = _mm_packs_epi32(_mm256_castsi256_si128(pairs), _mm256_extracti128_si256(pairs, 1));
    out->d = y->d;
}

/* vpshufb controls picking, per 128-bit lane, the scales of the packed
 * vpdpbusd sums below: sub-blocks 0,1 | 0,1 | 2,3 | 2,3 and 4,5 | 4,5 | 6,7 | 6,7. */
#define K4_WORDS4(w) 2 * (w), 2 * (w) + 1, 2 * (w), 2 * (w) + 1, 2 * (w), 2 * (w) + 1, 2 * (w), 2 * (w) + 1
#define K4_LANE(a, b) K4_WORDS4(a), K4_WORDS4(b)
static const uint8_t k4_scale_pick[2][64] = {
    {K4_LANE(0, 1), K4_LANE(0, 1), K4_LANE(2, 3), K4_LANE(2, 3)},
    {K4_LANE(4, 5), K4_LANE(4, 5), K4_LANE(6, 7), K4_LANE(6, 7)},
};
#undef K4_LANE
#undef K4_WORDS4

/* Q4_K and Q5_K, one row's block. high_bits: NULL for Q4_K, qh for Q5_K. */
KERNEL_INLINE void k4_block(const uint8_t *header, const uint8_t *qs, const uint8_t *high_bits,
                            const k4_activation *y, __m512 *acc, __m128 *acc_min)
{
    uint16_t d_bits, dmin_bits;
    memcpy(&d_bits, header, 2);
    memcpy(&dmin_bits, header + 2, 2);
    uint8_t unpacked[16];
    kernel_k4_unpack_scales(header + 4, unpacked);
    __m128i scale_min = _mm_loadu_si128((const __m128i *)unpacked);
    __m128i mins = _mm_cvtepu8_epi16(_mm_srli_si128(scale_min, 8));
    __m128i min_sum = _mm_madd_epi16(mins, y->bsum_pairs);
    __m512i scales = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(scale_min));

    const __m512i low4 = _mm512_set1_epi8(0x0f);
    __m512i w01 = _mm512_loadu_si512((const void *)qs);
    __m512i w23 = _mm512_loadu_si512((const void *)(qs + 64));
    __m512i w[4];
    w[0] = _mm512_and_si512(w01, low4);                        /* sub-blocks 0 | 2 */
    w[1] = _mm512_and_si512(_mm512_srli_epi16(w01, 4), low4);  /* 1 | 3 */
    w[2] = _mm512_and_si512(w23, low4);                        /* 4 | 6 */
    w[3] = _mm512_and_si512(_mm512_srli_epi16(w23, 4), low4);  /* 5 | 7 */
    if (high_bits) {
        const __m512i sixteen = _mm512_set1_epi8(0x10);
        __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)high_bits));
        KERNEL_UNROLLED for (int v = 0; v < 4; v++) {
            /* Sub-block s takes bit s of qh. */
            int s0 = (v & 1) + 4 * (v >> 1), s1 = s0 + 2;
            __m512i bits = avx512_join(_mm256_set1_epi8((char)(1 << s0)), _mm256_set1_epi8((char)(1 << s1)));
            __mmask64 set = _mm512_test_epi8_mask(qh, bits);
            w[v] = _mm512_mask_add_epi8(w[v], set, w[v], sixteen);
        }
    }
    /* Each 32-bit lane of a vpdpbusd sum holds 4 products (at most
     * 4 * 31 * 128 in magnitude), so two such sums pack losslessly into 16-bit
     * lanes; vpdpwssd then applies the sub-block scales. After packing, each
     * 128-bit lane holds 4 words of one sub-block and 4 of the next. */
    const __m512i zero = _mm512_setzero_si512();
    __m512i packed01 = _mm512_packs_epi32(_mm512_dpbusd_epi32(zero, w[0], y->y[0]),
                                          _mm512_dpbusd_epi32(zero, w[1], y->y[1]));
    __m512i packed23 = _mm512_packs_epi32(_mm512_dpbusd_epi32(zero, w[2], y->y[2]),
                                          _mm512_dpbusd_epi32(zero, w[3], y->y[3]));
    __m512i sum = _mm512_dpwssd_epi32(zero, packed01,
                                      _mm512_shuffle_epi8(scales, _mm512_loadu_si512((const void *)k4_scale_pick[0])));
    sum = _mm512_dpwssd_epi32(sum, packed23,
                              _mm512_shuffle_epi8(scales, _mm512_loadu_si512((const void *)k4_scale_pick[1])));
    float d = avx512_f16(d_bits) * y->d;
    float dmin = avx512_f16(dmin_bits) * y->d;
    *acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(d), *acc);
    *acc_min = _mm_fmadd_ps(_mm_cvtepi32_ps(min_sum), _mm_set1_ps(dmin), *acc_min);
}

#define K4_GROUP(name, block_type, high_bits_field)                                              \
    KERNEL_INLINE void name(const int R, int64_t n, const uint8_t *rows, size_t row_bytes,       \
                            const void *activation, float *out)                                  \
    {                                                                                            \
        const block_q8_k *a = activation;                                                        \
        const int64_t nb = n / QK_K;                                                             \
        __m512 acc[KERNEL_GROUP_ROWS];                                                           \
        __m128 acc_min[KERNEL_GROUP_ROWS];                                                       \
        KERNEL_UNROLLED for (int r = 0; r < R; r++) {                                                            \
            acc[r] = _mm512_setzero_ps();                                                        \
            acc_min[r] = _mm_setzero_ps();                                                       \
        }                                                                                        \
        for (int64_t b = 0; b < nb; b++) {                                                       \
            k4_activation y;                                                                     \
            k4_activation_load(a + b, &y);                                                       \
            KERNEL_UNROLLED for (int r = 0; r < R; r++) {                                                        \
                const uint8_t *row = rows + (size_t)r * row_bytes;                               \
                avx512_prefetch(row, b, sizeof(block_type));                                     \
                const block_type *x = (const block_type *)row + b;                               \
                k4_block((const uint8_t *)x, x->qs, high_bits_field, &y, &acc[r], &acc_min[r]);  \
            }                                                                                    \
        }                                                                                        \
        KERNEL_UNROLLED for (int r = 0; r < R; r++)                                                              \
            out[r] = avx512_hsum(acc[r]) - avx512_hsum128(acc_min[r]);                           \
    }

K4_GROUP(q4_k_group, block_q4_k, NULL)
K4_GROUP(q5_k_group, block_q5_k, x->qh)

/* vpermw controls: word i of the result takes scale (first + i / 8). */
static const int16_t q6_scale_index[4][32] = {
#define Q6_ROW(f) {f, f, f, f, f, f, f, f, f + 1, f + 1, f + 1, f + 1, f + 1, f + 1, f + 1, f + 1, \
                   f + 2, f + 2, f + 2, f + 2, f + 2, f + 2, f + 2, f + 2, f + 3, f + 3, f + 3, f + 3, f + 3, f + 3, f + 3, f + 3}
    Q6_ROW(0), Q6_ROW(4), Q6_ROW(8), Q6_ROW(12)
#undef Q6_ROW
};

/* Q6_K: unsigned 6-bit weights through maddubs, scales through vpdpwssd, the
 * -32 offset taken back out with 32 * sum(scale * bsum). */
KERNEL_INLINE void q6_k_group(const int R, int64_t n, const uint8_t *rows, size_t row_bytes,
                              const void *activation, float *out)
{
    const block_q8_k *a = activation;
    const int64_t nb = n / QK_K;
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    const __m512i bits45 = _mm512_set1_epi8(0x30);
    /* 16-bit shift counts: low nibbles of 64 bytes take qh bits 0-1 (<< 4)
     * then 2-3 (<< 2); high nibbles take bits 4-5 (>> 0) then 6-7 (>> 2). */
    const __m512i shift_low = avx512_join(_mm256_set1_epi16(4), _mm256_set1_epi16(2));
    const __m512i shift_high = avx512_join(_mm256_set1_epi16(0), _mm256_set1_epi16(2));
    __m512i index[4];
    KERNEL_UNROLLED for (int i = 0; i < 4; i++)
        index[i] = _mm512_loadu_si512((const void *)q6_scale_index[i]);
    __m512 acc[KERNEL_GROUP_ROWS];
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        acc[r] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const block_q8_k *y = a + b;
        __m256i bsums = _mm256_loadu_si256((const __m256i *)y->bsums);
        __m512i ya[4];
        KERNEL_UNROLLED for (int i = 0; i < 4; i++)
            ya[i] = _mm512_loadu_si512((const void *)(y->qs + 64 * i));
        KERNEL_UNROLLED for (int r = 0; r < R; r++) {
            const uint8_t *row = rows + (size_t)r * row_bytes;
            avx512_prefetch(row, b, sizeof(block_q6_k));
            const block_q6_k *x = (const block_q6_k *)row + b;
            __m256i scales16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x->scales));
            __m512i scales = _mm512_castsi256_si512(scales16);
            __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(scales16, bsums), 5);
            __m512i sum = _mm512_zextsi256_si512(_mm256_sub_epi32(_mm256_setzero_si256(), offset));
            KERNEL_UNROLLED for (int h = 0; h < 2; h++) {
                __m512i l = _mm512_loadu_si512((const void *)(x->ql + 64 * h));
                __m512i hb = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(x->qh + 32 * h)));
                __m512i q_low = _mm512_or_si512(_mm512_and_si512(l, low4),
                                                _mm512_and_si512(_mm512_sllv_epi16(hb, shift_low), bits45));
                __m512i q_high = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), low4),
                                                 _mm512_and_si512(_mm512_srlv_epi16(hb, shift_high), bits45));
                __m512i p_low = _mm512_maddubs_epi16(q_low, ya[2 * h]);
                __m512i p_high = _mm512_maddubs_epi16(q_high, ya[2 * h + 1]);
                sum = _mm512_dpwssd_epi32(sum, p_low, _mm512_permutexvar_epi16(index[2 * h], scales));
                sum = _mm512_dpwssd_epi32(sum, p_high, _mm512_permutexvar_epi16(index[2 * h + 1], scales));
            }
            float d = avx512_f16(x->d) * y->d;
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(d), acc[r]);
        }
    }
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        out[r] = avx512_hsum(acc[r]);
}

/* ---- F16 and BF16 against activations of the same type ---------------- */

KERNEL_INLINE __m512 avx512_load_f16(const uint8_t *p)
{
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}

KERNEL_INLINE __m512 avx512_load_bf16(const uint8_t *p)
{
    __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
}

/* 32 elements per step into two accumulators per row; a tail shorter than
 * 32 is zero-padded into local buffers and takes the same path. */
#define HALF_GROUP(name, load)                                                                   \
    KERNEL_INLINE void name(const int R, int64_t n, const uint8_t *rows, size_t row_bytes,       \
                            const void *activation, float *out)                                  \
    {                                                                                            \
        const uint8_t *a = activation;                                                           \
        __m512 acc0[KERNEL_GROUP_ROWS], acc1[KERNEL_GROUP_ROWS];                                 \
        KERNEL_UNROLLED for (int r = 0; r < R; r++) {                                                            \
            acc0[r] = _mm512_setzero_ps();                                                       \
            acc1[r] = _mm512_setzero_ps();                                                       \
        }                                                                                        \
        int64_t i = 0;                                                                           \
        for (; i + 32 <= n; i += 32) {                                                           \
            __m512 a0 = load(a + 2 * i), a1 = load(a + 2 * i + 32);                              \
            KERNEL_UNROLLED for (int r = 0; r < R; r++) {                                                        \
                const uint8_t *x = rows + (size_t)r * row_bytes + 2 * i;                         \
                __builtin_prefetch(x + 512);                                                     \
                acc0[r] = _mm512_fmadd_ps(load(x), a0, acc0[r]);                                 \
                acc1[r] = _mm512_fmadd_ps(load(x + 32), a1, acc1[r]);                            \
            }                                                                                    \
        }                                                                                        \
        if (i < n) {                                                                             \
            uint8_t a_tail[64] = {0};                                                            \
            memcpy(a_tail, a + 2 * i, (size_t)(n - i) * 2);                                      \
            __m512 a0 = load(a_tail), a1 = load(a_tail + 32);                                    \
            KERNEL_UNROLLED for (int r = 0; r < R; r++) {                                                        \
                uint8_t x[64] = {0};                                                             \
                memcpy(x, rows + (size_t)r * row_bytes + 2 * i, (size_t)(n - i) * 2);            \
                acc0[r] = _mm512_fmadd_ps(load(x), a0, acc0[r]);                                 \
                acc1[r] = _mm512_fmadd_ps(load(x + 32), a1, acc1[r]);                            \
            }                                                                                    \
        }                                                                                        \
        KERNEL_UNROLLED for (int r = 0; r < R; r++)                                                              \
            out[r] = avx512_hsum(_mm512_add_ps(acc0[r], acc1[r]));                               \
    }

HALF_GROUP(f16_group, avx512_load_f16)
HALF_GROUP(bf16_group, avx512_load_bf16)

KERNEL_DEFINE_DOT_ROWS(avx512_dot_rows_q8_0, q8_0_group)
KERNEL_DEFINE_DOT_ROWS(avx512_dot_rows_q4_0, q4_0_group)
KERNEL_DEFINE_DOT_ROWS(avx512_dot_rows_iq4_nl, iq4_nl_group)
KERNEL_DEFINE_DOT_ROWS(avx512_dot_rows_mxfp4, mxfp4_group)
KERNEL_DEFINE_DOT_ROWS(avx512_dot_rows_q4_k, q4_k_group)
KERNEL_DEFINE_DOT_ROWS(avx512_dot_rows_q5_k, q5_k_group)
KERNEL_DEFINE_DOT_ROWS(avx512_dot_rows_q6_k, q6_k_group)
KERNEL_DEFINE_DOT_ROWS(avx512_dot_rows_f16, f16_group)
KERNEL_DEFINE_DOT_ROWS(avx512_dot_rows_bf16, bf16_group)

static const kernel_set avx512_set = {
    .name = "avx512",
    .dot_rows = {
        [TYPE_Q8_0] = avx512_dot_rows_q8_0,
        [TYPE_Q4_0] = avx512_dot_rows_q4_0,
        [TYPE_IQ4_NL] = avx512_dot_rows_iq4_nl,
        [TYPE_MXFP4] = avx512_dot_rows_mxfp4,
        [TYPE_Q4_K] = avx512_dot_rows_q4_k,
        [TYPE_Q5_K] = avx512_dot_rows_q5_k,
        [TYPE_Q6_K] = avx512_dot_rows_q6_k,
        [TYPE_F16] = avx512_dot_rows_f16,
        [TYPE_BF16] = avx512_dot_rows_bf16,
    },
};

const kernel_set *kernels_avx512(void)
{
    return &avx512_set;
}
