/* AVX2 + FMA + F16C dot-product kernels: Q8_0, Q4_0, IQ4_NL, MXFP4 (32-element
 * blocks against Q8_0), Q4_K, Q5_K, Q6_K (against Q8_K), F16, BF16 and F32;
 * their tile (rows x tokens) forms, and axpy for F32 and F16.
 * Integer sums inside a block are exact (maddubs on unsigned 4-6 bit weights,
 * or on |w| and the activation with w's sign where both sides are signed);
 * across blocks each row accumulates in f32 lanes in increasing block order.
 * The grid i-quants' and the ternary formats' kernels are in dot_iq_avx2.c and
 * dot_ternary_avx2.c; this set lists them. */
#include <immintrin.h>

#include "dot_common.h"
#include "k4_scales_x86.h"
#include "kernels_dispatch.h"

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

/* The 16-bit lanes of a and b added so that the 64-bit halves of each
 * 128-bit lane fold together: per lane, [a0..3 + a4..7, b0..3 + b4..7]. */
KERNEL_INLINE __m256i avx2_fold64_epi16(__m256i a, __m256i b)
{
    return _mm256_add_epi16(_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b));
}

/* Per lane, the even and the odd 32-bit words of a, then of b, added as
 * pairs of 16-bit sums: [a0 + a1, a2 + a3, b0 + b1, b2 + b3]. */
KERNEL_INLINE __m256i avx2_fold32_epi16(__m256i a, __m256i b)
{
    __m256 fa = _mm256_castsi256_ps(a), fb = _mm256_castsi256_ps(b);
    __m256i even = _mm256_castps_si256(_mm256_shuffle_ps(fa, fb, _MM_SHUFFLE(2, 0, 2, 0)));
    __m256i odd = _mm256_castps_si256(_mm256_shuffle_ps(fa, fb, _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm256_add_epi16(even, odd);
}

/* ---- 32-element blocks against Q8_0 activations ------------------------ */

/* One row's 32-element block as 32 signed 8-bit weights in element order,
 * and its scale. */
typedef struct small_weights {
    __m256i w;
    float d;
} small_weights;

/* Which 32-element format a block is in. */
enum small_kind { SMALL_Q8_0, SMALL_Q4_0, SMALL_IQ4_NL, SMALL_MXFP4 };

static const int8_t q4_0_values[16] = {-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7};

KERNEL_INLINE size_t small_block_bytes(enum small_kind kind)
{
    return kind == SMALL_Q8_0 ? sizeof(block_q8_0) : kind == SMALL_MXFP4 ? sizeof(block_mxfp4) : sizeof(block_q4_0);
}

/* Whether blocks are taken four at a time: the formats whose values are at
 * most 12 in magnitude have pair products small enough to add four blocks'
 * in 16 bits (|sum| <= 4 x 2 x 12 x 127 = 12192), so one multiply forms the
 * four blocks' sums where there were four, and one conversion and one
 * multiply-add scale them. */
KERNEL_INLINE bool small_takes_four(enum small_kind kind)
{
    return kind == SMALL_MXFP4 || kind == SMALL_Q4_0;
}

KERNEL_INLINE __m256i small_table(enum small_kind kind)
{
    const int8_t *values = kind == SMALL_MXFP4 ? quant_mxfp4_values
                           : kind == SMALL_IQ4_NL ? quant_iq4nl_values : q4_0_values;
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)values));
}

/* Nibble formats: byte j holds element j (low) and j + 16 (high); a 16-entry
 * table maps each nibble to its signed 8-bit value. */
KERNEL_INLINE void small_unpack(const uint8_t *block, __m256i table, const enum small_kind kind,
                                small_weights *out)
{
    if (kind == SMALL_Q8_0) {
        out->w = _mm256_loadu_si256((const __m256i *)(block + 2));
    } else {
        const __m128i low4 = _mm_set1_epi8(0x0f);
        __m128i q = _mm_loadu_si128((const __m128i *)(block + (kind == SMALL_MXFP4 ? 1 : 2)));
        __m256i nibbles = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), low4), _mm_and_si128(q, low4));
        out->w = _mm256_shuffle_epi8(table, nibbles);
    }
    if (kind == SMALL_MXFP4) {
        out->d = kernel_e8m0_half(block[0]);
    } else {
        uint16_t bits;
        memcpy(&bits, block, 2);
        out->d = avx2_f16(bits);
    }
}

/* The sixteen pair sums of a block's weights times an activation block's
 * quants, exact in 16 bits. maddubs takes |w| unsigned (128 for -128) and the
 * quants with w's sign; activation quants are max-abs scaled to 127, so
 * never -128, which sign() could not negate. */
KERNEL_INLINE __m256i small_products(__m256i w, const block_q8_0 *y)
{
    __m256i q = _mm256_loadu_si256((const __m256i *)y->qs);
    return _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(q, w));
}

KERNEL_INLINE float small_scale(const small_weights *x, float y_d)
{
    return x->d * y_d;
}

/* One block: its exact integer sum in eight lanes, one multiply-add with the
 * two scales. */
KERNEL_INLINE void small_accumulate(const small_weights *x, const block_q8_0 *y, float y_d, __m256 *acc)
{
    __m256i sum = _mm256_madd_epi16(small_products(x->w, y), _mm256_set1_epi16(1));
    *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_set1_ps(small_scale(x, y_d)), *acc);
}

/* Four consecutive blocks (small_takes_four): lanes [b0 b1 b2 b3] in
 * both halves, each lane scaled by its block's scales. */
KERNEL_INLINE void small_accumulate4(const small_weights x[4], const block_q8_0 *y, const float y_d[4], __m256 *acc)
{
    __m256i folded = avx2_fold32_epi16(avx2_fold64_epi16(small_products(x[0].w, y), small_products(x[1].w, y + 1)),
                                       avx2_fold64_epi16(small_products(x[2].w, y + 2), small_products(x[3].w, y + 3)));
    __m256i sum = _mm256_madd_epi16(folded, _mm256_set1_epi16(1));
    __m128 d = _mm_setr_ps(small_scale(&x[0], y_d[0]), small_scale(&x[1], y_d[1]), small_scale(&x[2], y_d[2]),
                           small_scale(&x[3], y_d[3]));
    *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_set_m128(d, d), *acc);
}

/* One row against one activation row, blocks [0, nb): in steps of
 * four where small_takes_four, then one at a time. y_d: the activation
 * blocks' scales as floats. Every form (rows, decode, tile) computes an element
 * with these operations in this order, so they give the same bits. */
KERNEL_INLINE void small_row(const uint8_t *row, const block_q8_0 *a, const float *y_d, int64_t nb,
                             __m256i table, const enum small_kind kind, __m256 *acc)
{
    const size_t block_bytes = small_block_bytes(kind);
    int64_t b = 0;
    if (small_takes_four(kind)) {
        for (; b + 4 <= nb; b += 4) {
            small_weights x[4];
            KERNEL_UNROLLED for (int k = 0; k < 4; k++) {
                avx2_prefetch(row, b + k, block_bytes);
                small_unpack(row + (size_t)(b + k) * block_bytes, table, kind, &x[k]);
            }
            small_accumulate4(x, a + b, y_d + b, acc);
        }
    }
    for (; b < nb; b++) {
        avx2_prefetch(row, b, block_bytes);
        small_weights x;
        small_unpack(row + (size_t)b * block_bytes, table, kind, &x);
        small_accumulate(&x, a + b, y_d[b], acc);
    }
}

/* Activation scales of up to SMALL_SCALE_BLOCKS blocks as floats, formed
 * once per call; longer rows take them in slices of that many blocks. */
#define SMALL_SCALE_BLOCKS 256

KERNEL_INLINE void small_activation_scales(const block_q8_0 *a, int64_t nb, float *y_d)
{
    for (int64_t b = 0; b < nb; b++)
        y_d[b] = avx2_f16(a[b].d);
}

KERNEL_INLINE void small_group(const int R, int64_t n, const uint8_t *rows, size_t row_bytes,
                               const void *activation, float *out, const enum small_kind kind)
{
    const block_q8_0 *a = activation;
    const int64_t nb = n / 32;
    const size_t block_bytes = small_block_bytes(kind);
    const __m256i table = small_table(kind);
    __m256 acc[KERNEL_GROUP_ROWS];
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        acc[r] = _mm256_setzero_ps();
    float y_d[SMALL_SCALE_BLOCKS];
    for (int64_t first = 0; first < nb; first += SMALL_SCALE_BLOCKS) {
        int64_t count = nb - first < SMALL_SCALE_BLOCKS ? nb - first : SMALL_SCALE_BLOCKS;
        small_activation_scales(a + first, count, y_d);
        KERNEL_UNROLLED for (int r = 0; r < R; r++)
            small_row(rows + (size_t)r * row_bytes + (size_t)first * block_bytes, a + first, y_d, count, table,
                      kind, &acc[r]);
    }
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        out[r] = avx2_hsum(acc[r]);
}

/* Decode: every row of a call takes the same activation blocks, so their
 * scales are converted once per call (rows of up to SMALL_SCALE_BLOCKS
 * blocks; longer ones as small_group does). */
typedef struct small_decode_state {
    int prepared; /* 0: rows too long */
    float d[SMALL_SCALE_BLOCKS];
} small_decode_state;

KERNEL_INLINE void small_decode_init(small_decode_state *state, int64_t n, const void *activation)
{
    const int64_t nb = n / 32;
    state->prepared = nb <= SMALL_SCALE_BLOCKS;
    if (state->prepared)
        small_activation_scales(activation, nb, state->d);
}

/* The operations of small_group for one row, on the converted scales. */
KERNEL_INLINE void small_decode_row(small_decode_state *state, int64_t n, const uint8_t *row,
                                    const void *activation, float *out, const enum small_kind kind)
{
    if (!state->prepared) {
        small_group(1, n, row, 0, activation, out, kind);
        return;
    }
    __m256 acc = _mm256_setzero_ps();
    small_row(row, activation, state->d, n / 32, small_table(kind), kind, &acc);
    *out = avx2_hsum(acc);
}

/* Rows x tokens: each step's weights unpacked once for every token, the
 * per-element operations those of small_row. */
KERNEL_INLINE void small_tile(const int R, const int T, int64_t n, const uint8_t *rows, size_t row_bytes,
                              const uint8_t *acts, size_t act_stride, float *out, int64_t out_stride,
                              const enum small_kind kind)
{
    const int64_t nb = n / 32;
    const size_t block_bytes = small_block_bytes(kind);
    const __m256i table = small_table(kind);
    __m256 acc[KERNEL_TILE_MAX_ROWS][KERNEL_TILE_MAX_TOKENS];
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        KERNEL_UNROLLED for (int t = 0; t < T; t++)
            acc[r][t] = _mm256_setzero_ps();
    int64_t b = 0;
    if (small_takes_four(kind)) {
        for (; b + 4 <= nb; b += 4) {
            small_weights x[KERNEL_TILE_MAX_ROWS][4];
            KERNEL_UNROLLED for (int r = 0; r < R; r++)
                KERNEL_UNROLLED for (int k = 0; k < 4; k++)
                    small_unpack(rows + (size_t)r * row_bytes + (size_t)(b + k) * block_bytes, table, kind, &x[r][k]);
            KERNEL_UNROLLED for (int t = 0; t < T; t++) {
                const block_q8_0 *y = (const block_q8_0 *)(acts + (size_t)t * act_stride) + b;
                float y_d[4];
                small_activation_scales(y, 4, y_d);
                KERNEL_UNROLLED for (int r = 0; r < R; r++)
                    small_accumulate4(x[r], y, y_d, &acc[r][t]);
            }
        }
    }
    for (; b < nb; b++) {
        small_weights x[KERNEL_TILE_MAX_ROWS];
        KERNEL_UNROLLED for (int r = 0; r < R; r++)
            small_unpack(rows + (size_t)r * row_bytes + (size_t)b * block_bytes, table, kind, &x[r]);
        KERNEL_UNROLLED for (int t = 0; t < T; t++) {
            const block_q8_0 *y = (const block_q8_0 *)(acts + (size_t)t * act_stride) + b;
            float y_d = avx2_f16(y->d);
            KERNEL_UNROLLED for (int r = 0; r < R; r++)
                small_accumulate(&x[r], y, y_d, &acc[r][t]);
        }
    }
    KERNEL_UNROLLED for (int t = 0; t < T; t++)
        KERNEL_UNROLLED for (int r = 0; r < R; r++)
            out[t * out_stride + r] = avx2_hsum(acc[r][t]);
}

#define SMALL_KERNELS(prefix, kind)                                                                \
    KERNEL_INLINE void prefix##_group(const int R, int64_t n, const uint8_t *rows, size_t row_bytes, \
                                      const void *activation, float *out)                         \
    {                                                                                             \
        small_group(R, n, rows, row_bytes, activation, out, kind);                                \
    }                                                                                             \
    KERNEL_INLINE void prefix##_tile(const int R, const int T, int64_t n, const uint8_t *rows,    \
                                     size_t row_bytes, const uint8_t *acts, size_t act_stride,    \
                                     float *out, int64_t out_stride)                              \
    {                                                                                             \
        small_tile(R, T, n, rows, row_bytes, acts, act_stride, out, out_stride, kind);            \
    }                                                                                             \
    KERNEL_INLINE void prefix##_decode_init(small_decode_state *state, int64_t n, const void *a)  \
    {                                                                                             \
        small_decode_init(state, n, a);                                                           \
    }                                                                                             \
    KERNEL_INLINE void prefix##_decode_row(small_decode_state *state, int64_t n, const uint8_t *row, \
                                           const void *a, float *out)                             \
    {                                                                                             \
        small_decode_row(state, n, row, a, out, kind);                                            \
    }

SMALL_KERNELS(q8_0, SMALL_Q8_0)
SMALL_KERNELS(q4_0, SMALL_Q4_0)
SMALL_KERNELS(iq4_nl, SMALL_IQ4_NL)
SMALL_KERNELS(mxfp4, SMALL_MXFP4)

/* ---- K-quants against Q8_K activations --------------------------------- */

/* Pairwise sums of the activation's 16-element partial sums: one per
 * 32-element sub-block, as eight 16-bit values. */
KERNEL_INLINE __m128i avx2_bsum_pairs(const block_q8_k *y)
{
    __m256i pairs = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums), _mm256_set1_epi16(1));
    return _mm_packs_epi32(_mm256_castsi256_si128(pairs), _mm256_extracti128_si256(pairs, 1));
}

/* One row's Q4_K or Q5_K block unpacked: weights of sub-block s in w[s];
 * scale[h] holds the scales of sub-blocks 4h..4h+3, each in two adjacent
 * words, repeated in both 128-bit lanes (the layout of k4_accumulate's
 * folded sums). */
typedef struct k4_weights {
    __m256i w[8];
    __m256i scale[2];
    __m128i mins;
    __m128 d_dmin; /* the block's d and dmin in lanes 0 and 1 */
} k4_weights;

/* Shuffle table mapping a nibble x to 16 when its bit `bit` is set, else 0. */
KERNEL_INLINE __m256i avx2_nibble_bit_table(int bit)
{
    int8_t table[16];
    for (int x = 0; x < 16; x++)
        table[x] = (int8_t)(((x >> bit) & 1) << 4);
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)table));
}

/* high_bits is NULL for Q4_K, the qh array for Q5_K. */
KERNEL_INLINE void k4_unpack(const uint8_t *header, const uint8_t *qs, const uint8_t *high_bits, k4_weights *out)
{
    __m128i scale_min = x86_k4_unpack_scales(header + 4);
    __m256i scales_both = _mm256_broadcastsi128_si256(scale_min);
    out->mins = x86_k4_mins(scale_min);

    const __m256i low4 = _mm256_set1_epi8(0x0f);
    /* Q5_K: bit 2c (2c + 1) of a high-bit byte is bit 4 of the low (high)
     * weight of pair c; taken by table lookup on the byte's nibble, one
     * shuffle each, where a test and mask took four operations. */
    __m256i qh_nibble[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    if (high_bits) {
        __m256i qh = _mm256_loadu_si256((const __m256i *)high_bits);
        qh_nibble[0] = _mm256_and_si256(qh, low4);
        qh_nibble[1] = _mm256_and_si256(_mm256_srli_epi16(qh, 4), low4);
    }
    KERNEL_UNROLLED for (int c = 0; c < 4; c++) {
        __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
        __m256i low = _mm256_and_si256(q, low4);
        __m256i high = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
        if (high_bits) {
            low = _mm256_or_si256(low, _mm256_shuffle_epi8(avx2_nibble_bit_table(2 * (c % 2)), qh_nibble[c / 2]));
            high = _mm256_or_si256(high, _mm256_shuffle_epi8(avx2_nibble_bit_table(2 * (c % 2) + 1), qh_nibble[c / 2]));
        }
        out->w[2 * c] = low;
        out->w[2 * c + 1] = high;
    }
    /* each scale byte as a word, twice (a control byte with its top bit set
     * writes the zero high byte) */
#define K4_SCALE_PICK(s) (s), -128, (s), -128, (s) + 1, -128, (s) + 1, -128, (s) + 2, -128, (s) + 2, -128, \
                         (s) + 3, -128, (s) + 3, -128
    out->scale[0] = _mm256_shuffle_epi8(scales_both, _mm256_setr_epi8(K4_SCALE_PICK(0), K4_SCALE_PICK(0)));
    out->scale[1] = _mm256_shuffle_epi8(scales_both, _mm256_setr_epi8(K4_SCALE_PICK(4), K4_SCALE_PICK(4)));
#undef K4_SCALE_PICK
    out->d_dmin = x86_k4_d_dmin(header);
}

/* Per row and block: the scaled integer sum and the min term.
 *
 * The vector multiplier is what limits this loop (the AMD machines it was
 * measured on issue a 256-bit integer multiply every other cycle), so
 * maddubs' 16-bit products are summed in 16 bits before the scales are
 * applied: each sub-block's products fold four to a word (|sum| <= 4 x 2 x
 * 31 x 128 = 31744 with Q5_K's largest weight), and two multiplies apply the
 * eight scales, where eight did. */
KERNEL_INLINE void k4_accumulate(const k4_weights *x, const block_q8_k *y, __m128i bsum_pairs,
                                 __m256 *acc, __m128 *acc_min)
{
    __m128i min_sum = _mm_madd_epi16(x->mins, bsum_pairs);
    __m256i folded[4];
    KERNEL_UNROLLED for (int c = 0; c < 4; c++) {
        __m256i p_low = _mm256_maddubs_epi16(x->w[2 * c], _mm256_loadu_si256((const __m256i *)(y->qs + 64 * c)));
        __m256i p_high = _mm256_maddubs_epi16(x->w[2 * c + 1], _mm256_loadu_si256((const __m256i *)(y->qs + 64 * c + 32)));
        folded[c] = avx2_fold64_epi16(p_low, p_high);
    }
    __m256i sum = _mm256_add_epi32(_mm256_madd_epi16(avx2_fold32_epi16(folded[0], folded[1]), x->scale[0]),
                                   _mm256_madd_epi16(avx2_fold32_epi16(folded[2], folded[3]), x->scale[1]));
    /* both products at once: lane for lane the scalar d * y->d, dmin * y->d */
    __m128 scaled = _mm_mul_ps(x->d_dmin, _mm_set1_ps(y->d));
    *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_broadcastss_ps(scaled), *acc);
    *acc_min = _mm_fmadd_ps(_mm_cvtepi32_ps(min_sum), _mm_permute_ps(scaled, 0x55), *acc_min);
}

/* Decode: every row of a call takes the same activation blocks, so their
 * pair sums are formed once per call (rows of up to K4_DECODE_BLOCKS blocks;
 * longer ones form them per row as dot_rows does). */
#define K4_DECODE_BLOCKS 64

typedef struct k4_decode_state {
    int prepared; /* 0: rows too long */
    __m128i bsum_pairs[K4_DECODE_BLOCKS];
} k4_decode_state;

KERNEL_INLINE void k4_decode_init(k4_decode_state *state, int64_t n, const void *activation)
{
    const int64_t nb = n / QK_K;
    state->prepared = nb <= K4_DECODE_BLOCKS;
    if (!state->prepared)
        return;
    for (int64_t b = 0; b < nb; b++)
        state->bsum_pairs[b] = avx2_bsum_pairs((const block_q8_k *)activation + b);
}

/* A row's block b against activation block y: the per-row work of the group,
 * shared with the decode kernel so that both round alike. */
#define K4_KERNELS(prefix, block_type, high_bits_field)                                          \
    KERNEL_INLINE void prefix##_row_block(const uint8_t *row, int64_t b, const block_q8_k *y,    \
                                          __m128i pairs, __m256 *acc, __m128 *acc_min)           \
    {                                                                                            \
        avx2_prefetch(row, b, sizeof(block_type));                                               \
        const block_type *x = (const block_type *)row + b;                                       \
        k4_weights w;                                                                            \
        k4_unpack((const uint8_t *)x, x->qs, high_bits_field, &w);                               \
        k4_accumulate(&w, y, pairs, acc, acc_min);                                               \
    }                                                                                            \
                                                                                                 \
    KERNEL_INLINE void prefix##_group(const int R, int64_t n, const uint8_t *rows, size_t row_bytes, \
                                      const void *activation, float *out)                        \
    {                                                                                            \
        const block_q8_k *a = activation;                                                        \
        const int64_t nb = n / QK_K;                                                             \
        __m256 acc[KERNEL_GROUP_ROWS];                                                           \
        __m128 acc_min[KERNEL_GROUP_ROWS];                                                       \
        KERNEL_UNROLLED for (int r = 0; r < R; r++) {                                            \
            acc[r] = _mm256_setzero_ps();                                                        \
            acc_min[r] = _mm_setzero_ps();                                                       \
        }                                                                                        \
        for (int64_t b = 0; b < nb; b++) {                                                       \
            const block_q8_k *y = a + b;                                                         \
            __m128i pairs = avx2_bsum_pairs(y);                                                  \
            KERNEL_UNROLLED for (int r = 0; r < R; r++)                                          \
                prefix##_row_block(rows + (size_t)r * row_bytes, b, y, pairs, &acc[r], &acc_min[r]); \
        }                                                                                        \
        KERNEL_UNROLLED for (int r = 0; r < R; r++)                                              \
            out[r] = avx2_hsum(acc[r]) - avx2_hsum128(acc_min[r]);                               \
    }                                                                                            \
                                                                                                 \
    /* The operations of the group for one row, on the prepared pair sums. */                   \
    KERNEL_INLINE void prefix##_decode_row(k4_decode_state *state, int64_t n, const uint8_t *row, \
                                           const void *activation, float *out)                   \
    {                                                                                            \
        if (!state->prepared) {                                                                  \
            prefix##_group(1, n, row, 0, activation, out);                                       \
            return;                                                                              \
        }                                                                                        \
        const block_q8_k *a = activation;                                                        \
        const int64_t nb = n / QK_K;                                                             \
        __m256 acc = _mm256_setzero_ps();                                                        \
        __m128 acc_min = _mm_setzero_ps();                                                       \
        for (int64_t b = 0; b < nb; b++)                                                         \
            prefix##_row_block(row, b, a + b, state->bsum_pairs[b], &acc, &acc_min);             \
        *out = avx2_hsum(acc) - avx2_hsum128(acc_min);                                           \
    }                                                                                            \
                                                                                                 \
    KERNEL_INLINE void prefix##_tile(const int R, const int T, int64_t n, const uint8_t *rows,   \
                                     size_t row_bytes, const uint8_t *acts, size_t act_stride,   \
                                     float *out, int64_t out_stride)                             \
    {                                                                                            \
        const int64_t nb = n / QK_K;                                                             \
        __m256 acc[KERNEL_TILE_MAX_ROWS][KERNEL_TILE_MAX_TOKENS];                                \
        __m128 acc_min[KERNEL_TILE_MAX_ROWS][KERNEL_TILE_MAX_TOKENS];                            \
        KERNEL_UNROLLED for (int r = 0; r < R; r++)                                              \
            KERNEL_UNROLLED for (int t = 0; t < T; t++) {                                        \
                acc[r][t] = _mm256_setzero_ps();                                                 \
                acc_min[r][t] = _mm_setzero_ps();                                                \
            }                                                                                    \
        for (int64_t b = 0; b < nb; b++) {                                                       \
            k4_weights w[KERNEL_TILE_MAX_ROWS];                                                  \
            KERNEL_UNROLLED for (int r = 0; r < R; r++) {                                        \
                const block_type *x = (const block_type *)(rows + (size_t)r * row_bytes) + b;    \
                k4_unpack((const uint8_t *)x, x->qs, high_bits_field, &w[r]);                    \
            }                                                                                    \
            KERNEL_UNROLLED for (int t = 0; t < T; t++) {                                        \
                const block_q8_k *y = (const block_q8_k *)(acts + (size_t)t * act_stride) + b;   \
                __m128i pairs = avx2_bsum_pairs(y);                                              \
                KERNEL_UNROLLED for (int r = 0; r < R; r++)                                      \
                    k4_accumulate(&w[r], y, pairs, &acc[r][t], &acc_min[r][t]);                  \
            }                                                                                    \
        }                                                                                        \
        KERNEL_UNROLLED for (int t = 0; t < T; t++)                                              \
            KERNEL_UNROLLED for (int r = 0; r < R; r++)                                          \
                out[t * out_stride + r] = avx2_hsum(acc[r][t]) - avx2_hsum128(acc_min[r][t]);    \
    }

K4_KERNELS(q4_k, block_q4_k, NULL)
K4_KERNELS(q5_k, block_q5_k, x->qh)

/* One row's Q6_K block unpacked: weights taken unsigned (0..63) so maddubs
 * applies, 32 per ymm in sub-block pairs (sub-block 2p in the low lane of
 * q[p], 2p + 1 in the high one); scale[k], in the layout of q6_accumulate's
 * folded sums, holds the scales of sub-blocks 4k, 4k + 2 (low lane) and
 * 4k + 1, 4k + 3 (high lane), each in four words. */
typedef struct q6_weights {
    __m256i q[8];
    __m256i scale[4];
    __m256i scales16;
    float d;
} q6_weights;

KERNEL_INLINE void q6_unpack(const block_q6_k *x, q6_weights *out)
{
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    const __m256i bits45 = _mm256_set1_epi8(0x30);
    /* Bits 0-1 and 2-3 of a high-bit byte moved to bits 4-5 by table lookup:
     * vector shifts issue at half the rate of shuffles on the AMD machines
     * this was measured on. */
    const __m256i bits01_up = _mm256_setr_epi8(0x00, 0x10, 0x20, 0x30, 0x00, 0x10, 0x20, 0x30,
                                               0x00, 0x10, 0x20, 0x30, 0x00, 0x10, 0x20, 0x30,
                                               0x00, 0x10, 0x20, 0x30, 0x00, 0x10, 0x20, 0x30,
                                               0x00, 0x10, 0x20, 0x30, 0x00, 0x10, 0x20, 0x30);
    const __m256i bits23_up = _mm256_setr_epi8(0x00, 0x00, 0x00, 0x00, 0x10, 0x10, 0x10, 0x10,
                                               0x20, 0x20, 0x20, 0x20, 0x30, 0x30, 0x30, 0x30,
                                               0x00, 0x00, 0x00, 0x00, 0x10, 0x10, 0x10, 0x10,
                                               0x20, 0x20, 0x20, 0x20, 0x30, 0x30, 0x30, 0x30);
    __m128i scales8 = _mm_loadu_si128((const __m128i *)x->scales);
    out->scales16 = _mm256_cvtepi8_epi16(scales8);
    KERNEL_UNROLLED for (int h = 0; h < 2; h++) {
        __m256i l0 = _mm256_loadu_si256((const __m256i *)(x->ql + 64 * h));
        __m256i l1 = _mm256_loadu_si256((const __m256i *)(x->ql + 64 * h + 32));
        __m256i hb = _mm256_loadu_si256((const __m256i *)(x->qh + 32 * h));
        __m256i hb_low = _mm256_and_si256(hb, low4);
        __m256i *q = out->q + 4 * h;
        q[0] = _mm256_or_si256(_mm256_and_si256(l0, low4), _mm256_shuffle_epi8(bits01_up, hb_low));
        q[1] = _mm256_or_si256(_mm256_and_si256(l1, low4), _mm256_shuffle_epi8(bits23_up, hb_low));
        q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low4), _mm256_and_si256(hb, bits45));
        q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low4),
                               _mm256_and_si256(_mm256_srli_epi16(hb, 2), bits45));
    }
    const __m128i pick = _mm_setr_epi8(0, 0, 0, 0, 2, 2, 2, 2, 1, 1, 1, 1, 3, 3, 3, 3);
    KERNEL_UNROLLED for (int k = 0; k < 4; k++)
        out->scale[k] = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales8, _mm_add_epi8(pick, _mm_set1_epi8((char)(4 * k)))));
    out->d = avx2_f16(x->d);
}

/* The -32 offset is folded back with the activation's 16-element sums:
 * sum sc*32*bsum. As in k4_accumulate, products are summed in 16 bits
 * before the scales apply, two to a word (|sum| <= 2 x 2 x 63 x 128 =
 * 32256): four multiplies for the scales instead of eight. */
KERNEL_INLINE void q6_accumulate(const q6_weights *x, const block_q8_k *y, __m256i bsums, __m256 *acc)
{
    __m256i offset = _mm256_madd_epi16(x->scales16, bsums);
    __m256i sum = _mm256_setzero_si256();
    KERNEL_UNROLLED for (int k = 0; k < 4; k++) {
        __m256i p_even = _mm256_maddubs_epi16(x->q[2 * k], _mm256_loadu_si256((const __m256i *)(y->qs + 64 * k)));
        __m256i p_odd = _mm256_maddubs_epi16(x->q[2 * k + 1], _mm256_loadu_si256((const __m256i *)(y->qs + 64 * k + 32)));
        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(avx2_fold64_epi16(p_even, p_odd), x->scale[k]));
    }
    sum = _mm256_sub_epi32(sum, _mm256_slli_epi32(offset, 5));
    float d = x->d * y->d;
    *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_set1_ps(d), *acc);
}

KERNEL_INLINE void q6_k_group(const int R, int64_t n, const uint8_t *rows, size_t row_bytes,
                              const void *activation, float *out)
{
    const block_q8_k *a = activation;
    const int64_t nb = n / QK_K;
    __m256 acc[KERNEL_GROUP_ROWS];
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const block_q8_k *y = a + b;
        __m256i bsums = _mm256_loadu_si256((const __m256i *)y->bsums);
        KERNEL_UNROLLED for (int r = 0; r < R; r++) {
            const uint8_t *row = rows + (size_t)r * row_bytes;
            avx2_prefetch(row, b, sizeof(block_q6_k));
            q6_weights x;
            q6_unpack((const block_q6_k *)row + b, &x);
            q6_accumulate(&x, y, bsums, &acc[r]);
        }
    }
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        out[r] = avx2_hsum(acc[r]);
}

KERNEL_INLINE void q6_k_tile(const int R, const int T, int64_t n, const uint8_t *rows, size_t row_bytes,
                             const uint8_t *acts, size_t act_stride, float *out, int64_t out_stride)
{
    const int64_t nb = n / QK_K;
    __m256 acc[KERNEL_TILE_MAX_ROWS][KERNEL_TILE_MAX_TOKENS];
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        KERNEL_UNROLLED for (int t = 0; t < T; t++)
            acc[r][t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        q6_weights x[KERNEL_TILE_MAX_ROWS];
        KERNEL_UNROLLED for (int r = 0; r < R; r++)
            q6_unpack((const block_q6_k *)(rows + (size_t)r * row_bytes) + b, &x[r]);
        KERNEL_UNROLLED for (int t = 0; t < T; t++) {
            const block_q8_k *y = (const block_q8_k *)(acts + (size_t)t * act_stride) + b;
            __m256i bsums = _mm256_loadu_si256((const __m256i *)y->bsums);
            KERNEL_UNROLLED for (int r = 0; r < R; r++)
                q6_accumulate(&x[r], y, bsums, &acc[r][t]);
        }
    }
    KERNEL_UNROLLED for (int t = 0; t < T; t++)
        KERNEL_UNROLLED for (int r = 0; r < R; r++)
            out[t * out_stride + r] = avx2_hsum(acc[r][t]);
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

KERNEL_INLINE __m256 avx2_load_f32(const uint8_t *p)
{
    return _mm256_loadu_ps((const float *)p);
}

/* 16 elements (of `size` bytes) per step into two accumulators per row; a
 * tail shorter than 16 is zero-padded into local buffers and takes the same
 * path. */
#define FLOAT_GROUP(name, load, size)                                                            \
    KERNEL_INLINE void name(const int R, int64_t n, const uint8_t *rows, size_t row_bytes,       \
                            const void *activation, float *out)                                  \
    {                                                                                            \
        const uint8_t *a = activation;                                                           \
        __m256 acc0[KERNEL_GROUP_ROWS], acc1[KERNEL_GROUP_ROWS];                                 \
        KERNEL_UNROLLED for (int r = 0; r < R; r++) {                                            \
            acc0[r] = _mm256_setzero_ps();                                                       \
            acc1[r] = _mm256_setzero_ps();                                                       \
        }                                                                                        \
        int64_t i = 0;                                                                           \
        for (; i + 16 <= n; i += 16) {                                                           \
            __m256 a0 = load(a + (size) * i), a1 = load(a + (size) * i + 8 * (size));            \
            KERNEL_UNROLLED for (int r = 0; r < R; r++) {                                        \
                const uint8_t *x = rows + (size_t)r * row_bytes + (size) * i;                    \
                __builtin_prefetch(x + 128 * (size));                                            \
                acc0[r] = _mm256_fmadd_ps(load(x), a0, acc0[r]);                                 \
                acc1[r] = _mm256_fmadd_ps(load(x + 8 * (size)), a1, acc1[r]);                    \
            }                                                                                    \
        }                                                                                        \
        if (i < n) {                                                                             \
            uint8_t a_tail[16 * (size)] = {0};                                                   \
            memcpy(a_tail, a + (size) * i, (size_t)(n - i) * (size));                            \
            __m256 a0 = load(a_tail), a1 = load(a_tail + 8 * (size));                            \
            KERNEL_UNROLLED for (int r = 0; r < R; r++) {                                        \
                uint8_t x[16 * (size)] = {0};                                                    \
                memcpy(x, rows + (size_t)r * row_bytes + (size) * i, (size_t)(n - i) * (size));  \
                acc0[r] = _mm256_fmadd_ps(load(x), a0, acc0[r]);                                 \
                acc1[r] = _mm256_fmadd_ps(load(x + 8 * (size)), a1, acc1[r]);                    \
            }                                                                                    \
        }                                                                                        \
        KERNEL_UNROLLED for (int r = 0; r < R; r++)                                              \
            out[r] = avx2_hsum(_mm256_add_ps(acc0[r], acc1[r]));                                 \
    }

FLOAT_GROUP(f16_group, avx2_load_f16, 2)
FLOAT_GROUP(bf16_group, avx2_load_bf16, 2)
FLOAT_GROUP(f32_group, avx2_load_f32, 4)

/* ---- axpy: y += a * x, one fused multiply-add per element -------------- */

/* 32 elements of y in four registers over all rows, then 8 at a time, then
 * one at a time (fmaf: the same single rounding as the vector lanes). */
#define AXPY(name, load, size)                                                            \
    static void name(int64_t n, int64_t n_rows, const float *a, const void *x, size_t x_stride,  \
                     float *y)                                                                   \
    {                                                                                            \
        const uint8_t *rows = x;                                                                 \
        int64_t i = 0;                                                                           \
        for (; i + 32 <= n; i += 32) {                                                           \
            __m256 y0 = _mm256_loadu_ps(y + i), y1 = _mm256_loadu_ps(y + i + 8);                \
            __m256 y2 = _mm256_loadu_ps(y + i + 16), y3 = _mm256_loadu_ps(y + i + 24);          \
            const uint8_t *row = rows + (size) * i;                                              \
            for (int64_t r = 0; r < n_rows; r++, row += x_stride) {                              \
                __m256 scale = _mm256_set1_ps(a[r]);                                             \
                y0 = _mm256_fmadd_ps(load(row), scale, y0);                                      \
                y1 = _mm256_fmadd_ps(load(row + (size) * 8), scale, y1);                         \
                y2 = _mm256_fmadd_ps(load(row + (size) * 16), scale, y2);                        \
                y3 = _mm256_fmadd_ps(load(row + (size) * 24), scale, y3);                        \
            }                                                                                    \
            _mm256_storeu_ps(y + i, y0);                                                         \
            _mm256_storeu_ps(y + i + 8, y1);                                                     \
            _mm256_storeu_ps(y + i + 16, y2);                                                    \
            _mm256_storeu_ps(y + i + 24, y3);                                                    \
        }                                                                                        \
        for (; i + 8 <= n; i += 8) {                                                             \
            __m256 sum = _mm256_loadu_ps(y + i);                                                 \
            const uint8_t *row = rows + (size) * i;                                              \
            for (int64_t r = 0; r < n_rows; r++, row += x_stride)                                \
                sum = _mm256_fmadd_ps(load(row), _mm256_set1_ps(a[r]), sum);                     \
            _mm256_storeu_ps(y + i, sum);                                                        \
        }                                                                                        \
        kernel_axpy_tail(i, n, n_rows, a, rows, x_stride, (size), y);                            \
    }

AXPY(avx2_axpy_f32, avx2_load_f32, 4)
AXPY(avx2_axpy_f16, avx2_load_f16, 2)

/* Tiles with the tokens outer (a batch's activations read once per call):
 * the K-quants one row at a time (an unpacked block takes most of the 16 ymm
 * registers), the 32-element formats four rows, whose unpacked blocks are
 * small. No float tiles: with two accumulators per element they spill, and
 * measured slower than dot_rows per token. */
KERNEL_DEFINE_DOT_TILE_TOKENS_OUTER(avx2_dot_tile_q4_k, q4_k_tile, 1, 8)
KERNEL_DEFINE_DOT_TILE_TOKENS_OUTER(avx2_dot_tile_q5_k, q5_k_tile, 1, 8)
KERNEL_DEFINE_DOT_TILE_TOKENS_OUTER(avx2_dot_tile_q6_k, q6_k_tile, 1, 8)
KERNEL_DEFINE_DOT_TILE_TOKENS_OUTER(avx2_dot_tile_q8_0, q8_0_tile, 4, 8)
KERNEL_DEFINE_DOT_TILE_TOKENS_OUTER(avx2_dot_tile_q4_0, q4_0_tile, 4, 8)
KERNEL_DEFINE_DOT_TILE_TOKENS_OUTER(avx2_dot_tile_iq4_nl, iq4_nl_tile, 4, 8)
KERNEL_DEFINE_DOT_TILE_TOKENS_OUTER(avx2_dot_tile_mxfp4, mxfp4_tile, 4, 8)

KERNEL_DEFINE_DOT_ROWS(avx2_dot_rows_q8_0, q8_0_group)
KERNEL_DEFINE_DOT_ROWS(avx2_dot_rows_q4_0, q4_0_group)
KERNEL_DEFINE_DOT_ROWS(avx2_dot_rows_iq4_nl, iq4_nl_group)
KERNEL_DEFINE_DOT_ROWS(avx2_dot_rows_mxfp4, mxfp4_group)
KERNEL_DEFINE_DOT_ROWS(avx2_dot_rows_q4_k, q4_k_group)
KERNEL_DEFINE_DOT_ROWS(avx2_dot_rows_q5_k, q5_k_group)
KERNEL_DEFINE_DOT_ROWS(avx2_dot_rows_q6_k, q6_k_group)
KERNEL_DEFINE_DOT_ROWS(avx2_dot_rows_f16, f16_group)
KERNEL_DEFINE_DOT_ROWS(avx2_dot_rows_bf16, bf16_group)
KERNEL_DEFINE_DOT_ROWS(avx2_dot_rows_f32, f32_group)

KERNEL_DEFINE_DOT_DECODE(avx2_dot_decode_q8_0, small_decode_state, q8_0_decode_init, q8_0_decode_row)
KERNEL_DEFINE_DOT_DECODE(avx2_dot_decode_q4_0, small_decode_state, q4_0_decode_init, q4_0_decode_row)
KERNEL_DEFINE_DOT_DECODE(avx2_dot_decode_iq4_nl, small_decode_state, iq4_nl_decode_init, iq4_nl_decode_row)
KERNEL_DEFINE_DOT_DECODE(avx2_dot_decode_mxfp4, small_decode_state, mxfp4_decode_init, mxfp4_decode_row)
KERNEL_DEFINE_DOT_DECODE(avx2_dot_decode_q4_k, k4_decode_state, k4_decode_init, q4_k_decode_row)
KERNEL_DEFINE_DOT_DECODE(avx2_dot_decode_q5_k, k4_decode_state, k4_decode_init, q5_k_decode_row)
/* Q6_K: its rows share only plain loads of the activation (values, sums)
 * and constants, which a state would hold no cheaper than the constant pool
 * does: nothing worth preparing. */
KERNEL_DEFINE_DOT_DECODE_GROUP(avx2_dot_decode_q6_k, q6_k_group)
KERNEL_DEFINE_DOT_DECODE_GROUP(avx2_dot_decode_f16, f16_group)
KERNEL_DEFINE_DOT_DECODE_GROUP(avx2_dot_decode_bf16, bf16_group)
KERNEL_DEFINE_DOT_DECODE_GROUP(avx2_dot_decode_f32, f32_group)

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
        [TYPE_F32] = avx2_dot_rows_f32,
        KERNELS_IQ_ROWS(avx2),
        KERNELS_TERNARY_ROWS(avx2),
    },
    .dot_decode = {
        [TYPE_Q8_0] = avx2_dot_decode_q8_0,
        [TYPE_Q4_0] = avx2_dot_decode_q4_0,
        [TYPE_IQ4_NL] = avx2_dot_decode_iq4_nl,
        [TYPE_MXFP4] = avx2_dot_decode_mxfp4,
        [TYPE_Q4_K] = avx2_dot_decode_q4_k,
        [TYPE_Q5_K] = avx2_dot_decode_q5_k,
        [TYPE_Q6_K] = avx2_dot_decode_q6_k,
        [TYPE_F16] = avx2_dot_decode_f16,
        [TYPE_BF16] = avx2_dot_decode_bf16,
        [TYPE_F32] = avx2_dot_decode_f32,
        KERNELS_IQ_DECODE(avx2),
        KERNELS_TERNARY_DECODE(avx2),
    },
    .dot_tile = {
        [TYPE_Q8_0] = avx2_dot_tile_q8_0,
        [TYPE_Q4_0] = avx2_dot_tile_q4_0,
        [TYPE_IQ4_NL] = avx2_dot_tile_iq4_nl,
        [TYPE_MXFP4] = avx2_dot_tile_mxfp4,
        [TYPE_Q4_K] = avx2_dot_tile_q4_k,
        [TYPE_Q5_K] = avx2_dot_tile_q5_k,
        [TYPE_Q6_K] = avx2_dot_tile_q6_k,
    },
    .axpy = {
        [TYPE_F32] = avx2_axpy_f32,
        [TYPE_F16] = avx2_axpy_f16,
    },
    .quantize_row = {
        [TYPE_Q8_K] = avx2_quantize_row_q8_k,
        [TYPE_Q8_0] = avx2_quantize_row_q8_0,
        [TYPE_F16] = avx2_quantize_row_f16,
    },
    .attend = {
        [TYPE_F32] = avx2_attend_f32,
        [TYPE_F16] = avx2_attend_f16,
    },
    .exponential = avx2_exponential,
    .silu_glu = avx2_silu_glu,
    .swiglu_oai = avx2_swiglu_oai,
    .softmax = avx2_softmax,
    .rmsnorm = avx2_rmsnorm,
};

const kernel_set *kernels_avx2(void)
{
    return &avx2_set;
}
