/* AVX-512 (F, BW, VL, VNNI) dot-product kernels: Q8_0, Q4_0, IQ4_NL, MXFP4
 * against Q8_0; Q4_K, Q5_K, Q6_K against Q8_K; F16 and BF16. 32-element
 * blocks use 512-bit vpdpbusd, two blocks per zmm and four per step, on
 * weights made unsigned by an offset that is taken back out with the
 * activation's block sums (exact for every byte value); K-quants unpack 64
 * weights per zmm and apply the sub-block scales with vpdpwssd. Integer
 * sums inside a block are exact; across blocks (or steps) each row
 * accumulates in f32 lanes in increasing order.
 * The grid i-quants' and the ternary formats' kernels are the AVX2 ones
 * (dot_iq_avx2.c, dot_ternary_avx2.c), which this set lists: their cost is
 * the grid and sign lookups, not the multiply width, and 512-bit versions
 * ran slower (bench-kernels with BMOE_ISA=avx2 and avx512 compares). */
#include <immintrin.h>

#include "dot_common.h"
#include "k4_scales_x86.h"
#include "kernels_dispatch.h"

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

/* Two 256-bit halves as one zmm. */
KERNEL_INLINE __m512i avx512_join(__m256i low, __m256i high)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(low), high, 1);
}

/* ---- 32-element blocks against Q8_0 activations ------------------------ */

/* How each format's 32 weights of a block become unsigned bytes (weight +
 * offset) for vpdpbusd.
 *
 * Blocks go four per step, so that one row alone (decode) keeps the 512-bit
 * units busy instead of waiting on one accumulator. Q8_0 takes two blocks
 * per zmm (the first of a pair in lanes 0-7, the second in lanes 8-15). The
 * 4-bit formats keep each byte's two weights (j and j + 16) apart instead of
 * interleaving them back into order: one zmm holds the four blocks' low
 * nibbles (block k in lanes 4k-4k+3), another their high nibbles, against
 * activations laid out the same way (values 0-15 of each block, then 16-31),
 * so both products add into one block sum per lane group before one
 * conversion and one scaling. A step's sums are scaled and added once to the
 * row's accumulator. A short last step takes zero blocks for the missing
 * ones, which add exactly zero. Rows and tiles run the same step code, so
 * their bits agree. */
enum small_kind { SMALL_Q8_0, SMALL_Q4_0, SMALL_IQ4_NL, SMALL_MXFP4 };

#define SMALL_STEP_BLOCKS 4

static const int8_t q4_0_values[16] = {-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7};

/* Stands in for the blocks past the end of a row or activation: every
 * format reads it as a zero scale, and its activation values are zero. */
static const uint8_t small_zero_block[sizeof(block_q8_0)];

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

/* The nibble table plus the offset, in every 128-bit lane. */
KERNEL_INLINE __m512i small_table(enum small_kind kind)
{
    const int8_t *values = kind == SMALL_MXFP4 ? quant_mxfp4_values
                           : kind == SMALL_IQ4_NL ? quant_iq4nl_values : q4_0_values;
    __m128i table = _mm_add_epi8(_mm_loadu_si128((const __m128i *)values),
                                 _mm_set1_epi8((char)small_offset(kind)));
    return _mm512_broadcast_i32x4(table);
}

/* Block `b + k` of a row of `nb` blocks, or the zero block past its end
 * (`valid` blocks of the step are real; a constant 4 outside the last step). */
KERNEL_INLINE const uint8_t *small_block(const uint8_t *row, int64_t b, int k, int valid, size_t block_bytes)
{
    return k < valid ? row + (size_t)(b + k) * block_bytes : small_zero_block;
}

/* One row's step of four blocks as unsigned bytes (weight + offset): Q8_0
 * two blocks per zmm, the 4-bit formats their low then high nibbles; and the
 * blocks' scales. */
typedef struct small_weights {
    __m512i w[2];
    __m128 d; /* MXFP4: the scale's power of two; others: the scale */
} small_weights;

/* One activation step in the weights' layout, offset * (sum of each 4
 * values) to take back out of every row's sum (4-bit formats: of both
 * halves, in base[0]), and the blocks' scales. */
typedef struct small_activation {
    __m512i y[2], base[2];
    __m128 d;
} small_activation;

/* The f16 scales at the start of four blocks as four floats: gathered in a
 * general register, so that building the vector costs one move. */
KERNEL_INLINE __m128 small_f16_scales(const uint8_t *const blocks[SMALL_STEP_BLOCKS])
{
    uint64_t bits = 0;
    KERNEL_UNROLLED for (int k = 0; k < SMALL_STEP_BLOCKS; k++) {
        uint16_t h;
        memcpy(&h, blocks[k], 2);
        bits |= (uint64_t)h << (16 * k);
    }
    return _mm_cvtph_ps(_mm_cvtsi64_si128((long long)bits));
}

/* MXFP4 scales are quant_e8m0_half(e) = 2^(e - 128) for every byte e, so
 * they are kept as the exponent e - 128 and applied with vscalefps, which
 * rounds y * 2^k exactly as the product with that power of two would. */
KERNEL_INLINE __m128 small_scales(const uint8_t *const blocks[SMALL_STEP_BLOCKS], const enum small_kind kind)
{
    if (kind != SMALL_MXFP4)
        return small_f16_scales(blocks);
    uint32_t bytes = 0;
    KERNEL_UNROLLED for (int k = 0; k < SMALL_STEP_BLOCKS; k++)
        bytes |= (uint32_t)blocks[k][0] << (8 * k);
    __m128i e = _mm_cvtepu8_epi32(_mm_cvtsi32_si128((int)bytes));
    return _mm_cvtepi32_ps(_mm_sub_epi32(e, _mm_set1_epi32(128)));
}

/* Two Q8_0 blocks' values as unsigned bytes. */
KERNEL_INLINE __m512i small_q8_0_pair(const uint8_t *first, const uint8_t *second)
{
    __m512i both = avx512_join(_mm256_loadu_si256((const __m256i *)(first + 2)),
                               _mm256_loadu_si256((const __m256i *)(second + 2)));
    return _mm512_xor_si512(both, _mm512_set1_epi8((char)0x80));
}

KERNEL_INLINE void small_unpack(const uint8_t *row, int64_t b, int valid, size_t block_bytes, __m512i table,
                                const enum small_kind kind, small_weights *out)
{
    const uint8_t *blocks[SMALL_STEP_BLOCKS];
    KERNEL_UNROLLED for (int k = 0; k < SMALL_STEP_BLOCKS; k++)
        blocks[k] = small_block(row, b, k, valid, block_bytes);
    out->d = small_scales(blocks, kind);
    if (kind == SMALL_Q8_0) {
        out->w[0] = small_q8_0_pair(blocks[0], blocks[1]);
        out->w[1] = small_q8_0_pair(blocks[2], blocks[3]);
        return;
    }
    /* the four blocks' 16 bytes of nibbles, block k in 128-bit lane k */
    const size_t skip = kind == SMALL_MXFP4 ? 1 : 2;
    __m256i low = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(blocks[0] + skip))),
                                          _mm_loadu_si128((const __m128i *)(blocks[1] + skip)), 1);
    __m256i high = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(blocks[2] + skip))),
                                           _mm_loadu_si128((const __m128i *)(blocks[3] + skip)), 1);
    __m512i q = avx512_join(low, high);
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    out->w[0] = _mm512_shuffle_epi8(table, _mm512_and_si512(q, low4));
    out->w[1] = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(q, 4), low4));
}

KERNEL_INLINE void small_activation_load(const uint8_t *act, int64_t b, int valid, const enum small_kind kind,
                                         small_activation *out)
{
    const block_q8_0 *blocks[SMALL_STEP_BLOCKS];
    const uint8_t *bytes[SMALL_STEP_BLOCKS];
    KERNEL_UNROLLED for (int k = 0; k < SMALL_STEP_BLOCKS; k++) {
        bytes[k] = small_block(act, b, k, valid, sizeof(block_q8_0));
        blocks[k] = (const block_q8_0 *)bytes[k];
    }
    out->d = small_f16_scales(bytes);
    const __m512i offset = _mm512_set1_epi8((char)small_offset(kind));
    __m512i pairs[2];
    KERNEL_UNROLLED for (int p = 0; p < 2; p++)
        pairs[p] = avx512_join(_mm256_loadu_si256((const __m256i *)blocks[2 * p]->qs),
                               _mm256_loadu_si256((const __m256i *)blocks[2 * p + 1]->qs));
    if (kind == SMALL_Q8_0) {
        KERNEL_UNROLLED for (int p = 0; p < 2; p++) {
            out->y[p] = pairs[p];
            out->base[p] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), offset, out->y[p]);
        }
        return;
    }
    /* values 0-15 of the four blocks, then 16-31: the nibbles' layout */
    out->y[0] = _mm512_shuffle_i64x2(pairs[0], pairs[1], _MM_SHUFFLE(2, 0, 2, 0));
    out->y[1] = _mm512_shuffle_i64x2(pairs[0], pairs[1], _MM_SHUFFLE(3, 1, 3, 1));
    out->base[0] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), offset, out->y[0]), offset,
                                       out->y[1]);
    out->base[1] = _mm512_setzero_si512();
}

KERNEL_INLINE void small_accumulate(const small_weights *x, const small_activation *y, const enum small_kind kind,
                                    __m512 *acc)
{
    /* The four blocks' scale products, then each spread over its lanes. */
    __m512 scales = _mm512_castps128_ps512(kind == SMALL_MXFP4 ? _mm_scalef_ps(y->d, x->d) : _mm_mul_ps(y->d, x->d));
    if (kind != SMALL_Q8_0) {
        __m512i exact = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), x->w[0], y->y[0]), x->w[1],
                                            y->y[1]);
        __m512 d = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3), scales);
        *acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(exact, y->base[0])), d, *acc);
        return;
    }
    __m512 sum[2], d[2];
    KERNEL_UNROLLED for (int p = 0; p < 2; p++) {
        __m512i exact = _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), x->w[p], y->y[p]), y->base[p]);
        sum[p] = _mm512_cvtepi32_ps(exact);
        d[p] = _mm512_permutexvar_ps(_mm512_setr_epi32(2 * p, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p,
                                                        2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1,
                                                        2 * p + 1, 2 * p + 1, 2 * p + 1),
                                     scales);
    }
    *acc = _mm512_add_ps(*acc, _mm512_fmadd_ps(sum[0], d[0], _mm512_mul_ps(sum[1], d[1])));
}

/* R rows; `prepared`: the activation steps loaded by the caller (decode,
 * whose driver also requests the rows' lines), or NULL to load each step
 * here and prefetch the rows' blocks. */
KERNEL_INLINE void small_rows(const int R, int64_t n, const uint8_t *rows, size_t row_bytes,
                              const void *activation, float *out, const enum small_kind kind,
                              const small_activation *prepared)
{
    const uint8_t *a = activation;
    const int64_t nb = n / 32;
    const size_t block_bytes = small_block_bytes(kind);
    const __m512i table = small_table(kind);
    __m512 acc[KERNEL_GROUP_ROWS];
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        acc[r] = _mm512_setzero_ps();
    int64_t b = 0, step = 0;
    for (; b + SMALL_STEP_BLOCKS <= nb; b += SMALL_STEP_BLOCKS, step++) {
        small_activation loaded;
        if (!prepared)
            small_activation_load(a, b, SMALL_STEP_BLOCKS, kind, &loaded);
        const small_activation *y = prepared ? &prepared[step] : &loaded;
        KERNEL_UNROLLED for (int r = 0; r < R; r++) {
            const uint8_t *row = rows + (size_t)r * row_bytes;
            if (!prepared)
                avx512_prefetch(row, b, block_bytes * SMALL_STEP_BLOCKS / 2);
            small_weights x;
            small_unpack(row, b, SMALL_STEP_BLOCKS, block_bytes, table, kind, &x);
            small_accumulate(&x, y, kind, &acc[r]);
        }
    }
    if (b < nb) {
        const int valid = (int)(nb - b);
        small_activation loaded;
        if (!prepared)
            small_activation_load(a, b, valid, kind, &loaded);
        const small_activation *y = prepared ? &prepared[step] : &loaded;
        KERNEL_UNROLLED for (int r = 0; r < R; r++) {
            small_weights x;
            small_unpack(rows + (size_t)r * row_bytes, b, valid, block_bytes, table, kind, &x);
            small_accumulate(&x, y, kind, &acc[r]);
        }
    }
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        out[r] = avx512_hsum(acc[r]);
}

KERNEL_INLINE void small_group(const int R, int64_t n, const uint8_t *rows, size_t row_bytes,
                               const void *activation, float *out, const enum small_kind kind)
{
    small_rows(R, n, rows, row_bytes, activation, out, kind, NULL);
}

/* Activation steps per activation row, and one row's steps prepared (once
 * per call for decode, once per run of tokens for the tiles). */
KERNEL_INLINE int64_t small_steps(int64_t n)
{
    return (n / 32 + SMALL_STEP_BLOCKS - 1) / SMALL_STEP_BLOCKS;
}

KERNEL_INLINE void small_prepare(const uint8_t *activation, int64_t n, const enum small_kind kind,
                                 small_activation *out)
{
    const int64_t nb = n / 32;
    for (int64_t b = 0, step = 0; b < nb; b += SMALL_STEP_BLOCKS, step++) {
        int valid = nb - b < SMALL_STEP_BLOCKS ? (int)(nb - b) : SMALL_STEP_BLOCKS;
        small_activation_load(activation, b, valid, kind, &out[step]);
    }
}

/* Decode: every row of a call takes the same activation steps, so they are
 * loaded once per call (rows of up to SMALL_DECODE_STEPS steps; longer ones
 * load them per row as dot_rows does). */
#define SMALL_DECODE_STEPS 64

typedef struct small_decode_state {
    const small_activation *prepared; /* NULL: rows too long */
    small_activation steps[SMALL_DECODE_STEPS];
} small_decode_state;

KERNEL_INLINE void small_decode_init(small_decode_state *state, int64_t n, const void *activation,
                                     const enum small_kind kind)
{
    state->prepared = NULL;
    if (small_steps(n) > SMALL_DECODE_STEPS)
        return;
    small_prepare(activation, n, kind, state->steps);
    state->prepared = state->steps;
}

KERNEL_INLINE void small_decode_row(small_decode_state *state, int64_t n, const uint8_t *row,
                                    const void *activation, float *out, const enum small_kind kind)
{
    /* two inlined copies: the prepared one without the per-step checks */
    if (state->prepared)
        small_rows(1, n, row, 0, activation, out, kind, state->prepared);
    else
        small_group(1, n, row, 0, activation, out, kind);
}

#define SMALL_DECODE(name, kind)                                                                 \
    KERNEL_INLINE void name##_decode_init(small_decode_state *state, int64_t n, const void *a)   \
    {                                                                                            \
        small_decode_init(state, n, a, kind);                                                    \
    }                                                                                            \
    KERNEL_INLINE void name##_decode_row(small_decode_state *state, int64_t n, const uint8_t *row, \
                                         const void *a, float *out)                              \
    {                                                                                            \
        small_decode_row(state, n, row, a, out, kind);                                           \
    }

SMALL_DECODE(q8_0, SMALL_Q8_0)
SMALL_DECODE(q4_0, SMALL_Q4_0)
SMALL_DECODE(iq4_nl, SMALL_IQ4_NL)
SMALL_DECODE(mxfp4, SMALL_MXFP4)

/* One step of R rows x T tokens whose activation steps are prepared
 * already: token t's step `step` at (const small_activation *)(acts + t *
 * act_stride) + step. */
KERNEL_INLINE void small_tile_step(const int R, const int T, const uint8_t *rows, size_t row_bytes,
                                   const uint8_t *acts, size_t act_stride, int64_t b, int64_t step, int valid,
                                   __m512i table, const enum small_kind kind,
                                   __m512 acc[KERNEL_TILE_MAX_ROWS][KERNEL_TILE_MAX_TOKENS])
{
    const size_t block_bytes = small_block_bytes(kind);
    small_weights x[KERNEL_TILE_MAX_ROWS];
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        small_unpack(rows + (size_t)r * row_bytes, b, valid, block_bytes, table, kind, &x[r]);
    KERNEL_UNROLLED for (int t = 0; t < T; t++) {
        const small_activation *y = (const small_activation *)(acts + (size_t)t * act_stride) + step;
        KERNEL_UNROLLED for (int r = 0; r < R; r++)
            small_accumulate(&x[r], y, kind, &acc[r][t]);
    }
}

KERNEL_INLINE void small_tile(const int R, const int T, int64_t n, const uint8_t *rows, size_t row_bytes,
                              const uint8_t *acts, size_t act_stride, float *out, int64_t out_stride,
                              const enum small_kind kind)
{
    const int64_t nb = n / 32;
    const __m512i table = small_table(kind);
    __m512 acc[KERNEL_TILE_MAX_ROWS][KERNEL_TILE_MAX_TOKENS];
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        KERNEL_UNROLLED for (int t = 0; t < T; t++)
            acc[r][t] = _mm512_setzero_ps();
    int64_t b = 0, step = 0;
    for (; b + SMALL_STEP_BLOCKS <= nb; b += SMALL_STEP_BLOCKS, step++)
        small_tile_step(R, T, rows, row_bytes, acts, act_stride, b, step, SMALL_STEP_BLOCKS, table, kind, acc);
    if (b < nb)
        small_tile_step(R, T, rows, row_bytes, acts, act_stride, b, step, (int)(nb - b), table, kind, acc);
    KERNEL_UNROLLED for (int t = 0; t < T; t++)
        KERNEL_UNROLLED for (int r = 0; r < R; r++)
            out[t * out_stride + r] = avx512_hsum(acc[r][t]);
}

#define SMALL_TILE(name, kind)                                                                     \
    KERNEL_INLINE void name(const int R, const int T, int64_t n, const uint8_t *rows,            \
                            size_t row_bytes, const uint8_t *acts, size_t act_stride, float *out, \
                            int64_t out_stride)                                                   \
    {                                                                                             \
        small_tile(R, T, n, rows, row_bytes, acts, act_stride, out, out_stride, kind);            \
    }                                                                                             \
    KERNEL_INLINE void name##_prepare(const uint8_t *activation, int64_t n, small_activation *out) \
    {                                                                                             \
        small_prepare(activation, n, kind, out);                                                  \
    }

SMALL_TILE(q8_0_tile, SMALL_Q8_0)
SMALL_TILE(q4_0_tile, SMALL_Q4_0)
SMALL_TILE(iq4_nl_tile, SMALL_IQ4_NL)
SMALL_TILE(mxfp4_tile, SMALL_MXFP4)

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


/* A Q8_K block's activations reordered to match how Q4_K/Q5_K weights
 * unpack (shared by every row of a group): 64 weight bytes hold sub-blocks
 * 0 | 2 in their low nibbles and 1 | 3 in their high nibbles, the next 64
 * bytes 4 | 6 and 5 | 7; y[v] holds the activations of that pair. */
typedef struct k4_activation {
    __m512i y[4];
    __m128i bsum_pairs;
    __m128 d;           /* the block's scale in every lane */
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
    out->d = _mm_set1_ps(y->d);
}

/* vpshufb controls that take, per 128-bit lane, the unpacked scale bytes
 * (x86_k4_unpack_scales) as 16-bit words (a control byte with its top bit
 * set writes a zero): the scales of the packed vpdpbusd sums below,
 * sub-blocks 0,1 | 0,1 | 2,3 | 2,3 and 4,5 | 4,5 | 6,7 | 6,7. */
#define K4_WORDS4(w) (w), 0x80, (w), 0x80, (w), 0x80, (w), 0x80
#define K4_LANE(a, b) K4_WORDS4(a), K4_WORDS4(b)
static const uint8_t k4_scale_pick[2][64] = {
    {K4_LANE(0, 1), K4_LANE(0, 1), K4_LANE(2, 3), K4_LANE(2, 3)},
    {K4_LANE(4, 5), K4_LANE(4, 5), K4_LANE(6, 7), K4_LANE(6, 7)},
};
#undef K4_LANE
#undef K4_WORDS4

/* One row's Q4_K or Q5_K block unpacked: what depends on the weights only,
 * computed once and used for every activation row of a tile. */
typedef struct k4_weights {
    __m512i w[4];       /* sub-blocks 0 | 2, 1 | 3, 4 | 6, 5 | 7 */
    __m512i scale[2];   /* sub-block scales in the word order of the packed sums */
    __m128i mins;       /* eight 16-bit minimums */
    __m128 d_dmin;      /* the block's d and dmin in lanes 0 and 1 */
} k4_weights;

/* high_bits: NULL for Q4_K, qh for Q5_K. */
KERNEL_INLINE void k4_unpack(const uint8_t *header, const uint8_t *qs, const uint8_t *high_bits,
                             k4_weights *out)
{
    __m128i scale_min = x86_k4_unpack_scales(header + 4);
    out->mins = x86_k4_mins(scale_min);
    __m512i scales = _mm512_broadcast_i32x4(scale_min);
    out->scale[0] = _mm512_shuffle_epi8(scales, _mm512_loadu_si512((const void *)k4_scale_pick[0]));
    out->scale[1] = _mm512_shuffle_epi8(scales, _mm512_loadu_si512((const void *)k4_scale_pick[1]));

    const __m512i low4 = _mm512_set1_epi8(0x0f);
    __m512i w01 = _mm512_loadu_si512((const void *)qs);
    __m512i w23 = _mm512_loadu_si512((const void *)(qs + 64));
    out->w[0] = _mm512_and_si512(w01, low4);
    out->w[1] = _mm512_and_si512(_mm512_srli_epi16(w01, 4), low4);
    out->w[2] = _mm512_and_si512(w23, low4);
    out->w[3] = _mm512_and_si512(_mm512_srli_epi16(w23, 4), low4);
    if (high_bits) {
        const __m512i sixteen = _mm512_set1_epi8(0x10);
        __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)high_bits));
        KERNEL_UNROLLED for (int v = 0; v < 4; v++) {
            /* Sub-block s takes bit s of qh. */
            int s0 = (v & 1) + 4 * (v >> 1), s1 = s0 + 2;
            __m512i bits = avx512_join(_mm256_set1_epi8((char)(1 << s0)), _mm256_set1_epi8((char)(1 << s1)));
            __mmask64 set = _mm512_test_epi8_mask(qh, bits);
            out->w[v] = _mm512_mask_add_epi8(out->w[v], set, out->w[v], sixteen);
        }
    }
    out->d_dmin = x86_k4_d_dmin(header);
}

/* One row's unpacked block against one activation block. */
KERNEL_INLINE void k4_accumulate(const k4_weights *x, const k4_activation *y, __m512 *acc, __m128 *acc_min)
{
    __m128i min_sum = _mm_madd_epi16(x->mins, y->bsum_pairs);
    /* Each 32-bit lane of a vpdpbusd sum holds 4 products (at most
     * 4 * 31 * 128 in magnitude), so two such sums pack losslessly into 16-bit
     * lanes; vpdpwssd then applies the sub-block scales. After packing, each
     * 128-bit lane holds 4 words of one sub-block and 4 of the next. */
    const __m512i zero = _mm512_setzero_si512();
    __m512i packed01 = _mm512_packs_epi32(_mm512_dpbusd_epi32(zero, x->w[0], y->y[0]),
                                          _mm512_dpbusd_epi32(zero, x->w[1], y->y[1]));
    __m512i packed23 = _mm512_packs_epi32(_mm512_dpbusd_epi32(zero, x->w[2], y->y[2]),
                                          _mm512_dpbusd_epi32(zero, x->w[3], y->y[3]));
    __m512i sum = _mm512_dpwssd_epi32(zero, packed01, x->scale[0]);
    sum = _mm512_dpwssd_epi32(sum, packed23, x->scale[1]);
    /* both products at once: lane for lane the scalar d * y->d, dmin * y->d */
    __m128 scaled = _mm_mul_ps(x->d_dmin, y->d);
    *acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_broadcastss_ps(scaled), *acc);
    *acc_min = _mm_fmadd_ps(_mm_cvtepi32_ps(min_sum), _mm_permute_ps(scaled, 0x55), *acc_min);
}

KERNEL_INLINE void k4_block(const uint8_t *header, const uint8_t *qs, const uint8_t *high_bits,
                            const k4_activation *y, __m512 *acc, __m128 *acc_min)
{
    k4_weights x;
    k4_unpack(header, qs, high_bits, &x);
    k4_accumulate(&x, y, acc, acc_min);
}

/* name##_rows: R rows; `prepared`: the activation blocks rearranged by the
 * caller (decode, whose driver also requests the rows' lines), or NULL to
 * rearrange each block here and prefetch the rows' blocks. */
#define K4_GROUP(name, block_type, high_bits_field)                                              \
    KERNEL_INLINE void name##_rows(const int R, int64_t n, const uint8_t *rows, size_t row_bytes,\
                                   const void *activation, float *out,                           \
                                   const k4_activation *prepared)                                \
    {                                                                                            \
        const block_q8_k *a = activation;                                                        \
        const int64_t nb = n / QK_K;                                                             \
        __m512 acc[KERNEL_GROUP_ROWS];                                                           \
        __m128 acc_min[KERNEL_GROUP_ROWS];                                                       \
        KERNEL_UNROLLED for (int r = 0; r < R; r++) {                                            \
            acc[r] = _mm512_setzero_ps();                                                        \
            acc_min[r] = _mm_setzero_ps();                                                       \
        }                                                                                        \
        for (int64_t b = 0; b < nb; b++) {                                                       \
            k4_activation loaded;                                                                \
            if (!prepared)                                                                       \
                k4_activation_load(a + b, &loaded);                                              \
            const k4_activation *y = prepared ? &prepared[b] : &loaded;                          \
            KERNEL_UNROLLED for (int r = 0; r < R; r++) {                                        \
                const uint8_t *row = rows + (size_t)r * row_bytes;                               \
                if (!prepared)                                                                   \
                    avx512_prefetch(row, b, sizeof(block_type));                                 \
                const block_type *x = (const block_type *)row + b;                               \
                k4_block((const uint8_t *)x, x->qs, high_bits_field, y, &acc[r], &acc_min[r]);   \
            }                                                                                    \
        }                                                                                        \
        KERNEL_UNROLLED for (int r = 0; r < R; r++)                                              \
            out[r] = avx512_hsum(acc[r]) - avx512_hsum128(acc_min[r]);                           \
    }                                                                                            \
                                                                                                 \
    KERNEL_INLINE void name(const int R, int64_t n, const uint8_t *rows, size_t row_bytes,       \
                            const void *activation, float *out)                                  \
    {                                                                                            \
        name##_rows(R, n, rows, row_bytes, activation, out, NULL);                               \
    }                                                                                            \
                                                                                                 \
    /* R rows x T tokens whose activation blocks are rearranged already:   \
     * token t's block b at (const k4_activation *)(acts + t * act_stride) + b. \
     * Each row's block unpacked once for the T. */                          \
    KERNEL_INLINE void name##_tile(const int R, const int T, int64_t n, const uint8_t *rows,     \
                                   size_t row_bytes, const uint8_t *acts, size_t act_stride,     \
                                   float *out, int64_t out_stride)                               \
    {                                                                                            \
        const int64_t nb = n / QK_K;                                                             \
        __m512 acc[KERNEL_TILE_MAX_ROWS][KERNEL_TILE_MAX_TOKENS];                                \
        __m128 acc_min[KERNEL_TILE_MAX_ROWS][KERNEL_TILE_MAX_TOKENS];                            \
        KERNEL_UNROLLED for (int r = 0; r < R; r++)                                              \
            KERNEL_UNROLLED for (int t = 0; t < T; t++) {                                        \
                acc[r][t] = _mm512_setzero_ps();                                                 \
                acc_min[r][t] = _mm_setzero_ps();                                                \
            }                                                                                    \
        for (int64_t b = 0; b < nb; b++) {                                                       \
            k4_weights w[KERNEL_TILE_MAX_ROWS];                                                  \
            KERNEL_UNROLLED for (int r = 0; r < R; r++) {                                        \
                const block_type *x = (const block_type *)(rows + (size_t)r * row_bytes) + b;    \
                k4_unpack((const uint8_t *)x, x->qs, high_bits_field, &w[r]);                    \
            }                                                                                    \
            KERNEL_UNROLLED for (int t = 0; t < T; t++) {                                        \
                const k4_activation *y = (const k4_activation *)(acts + (size_t)t * act_stride) + b; \
                KERNEL_UNROLLED for (int r = 0; r < R; r++)                                      \
                    k4_accumulate(&w[r], y, &acc[r][t], &acc_min[r][t]);                         \
            }                                                                                    \
        }                                                                                        \
        KERNEL_UNROLLED for (int t = 0; t < T; t++)                                              \
            KERNEL_UNROLLED for (int r = 0; r < R; r++)                                          \
                out[t * out_stride + r] = avx512_hsum(acc[r][t]) - avx512_hsum128(acc_min[r][t]); \
    }

K4_GROUP(q4_k_group, block_q4_k, NULL)
K4_GROUP(q5_k_group, block_q5_k, x->qh)

/* Prefill: the activations of up to TILE_TOKENS tokens are prepared once per
 * call into the layout the tile takes (prepared_type, units(n) of them per
 * token, by prepare(row, n, out)), then every row of the call passes under
 * them, ROWS at a time (KERNEL_TILE_ALL_ROWS): the preparing is shared by all
 * the call's rows instead of redone for each tile of rows. Rows too long for
 * TILE_TOKENS tokens in TILE_PREPARED_BYTES take fewer at a time; a row too
 * long for one goes token by token through dot_rows (the same block code, so
 * the same bits either way). */
#define TILE_TOKENS 8
#define TILE_PREPARED_BYTES (80 * 1024) /* of stack */
#define SMALL_TILE_ROWS 4

#define PREPARED_DEFINE_DOT_TILE(name, tile, ROWS, dot_rows, prepared_type, units, prepare)        \
    _Static_assert((ROWS) >= 1 && (ROWS) <= KERNEL_TILE_MAX_ROWS, "tile shape");                 \
    static void name(int64_t n, const void *weights, size_t row_bytes, int64_t n_rows,           \
                     const void *activations, size_t activation_stride, int64_t n_tokens,        \
                     float *out, int64_t out_stride)                                             \
    {                                                                                            \
        enum { CAPACITY = TILE_PREPARED_BYTES / sizeof(prepared_type) };                         \
        const uint8_t *rows = weights;                                                           \
        const uint8_t *acts = activations;                                                       \
        const int64_t per_token = units(n);                                                      \
        const int64_t fit = per_token > 0 ? CAPACITY / per_token : 0;                            \
        if (fit == 0) {                                                                          \
            for (int64_t t = 0; t < n_tokens; t++)                                               \
                dot_rows(n, weights, row_bytes, n_rows, acts + (size_t)t * activation_stride,    \
                         out + t * out_stride);                                                  \
            return;                                                                              \
        }                                                                                        \
        const int64_t run = fit < TILE_TOKENS ? fit : TILE_TOKENS;                               \
        prepared_type prepared[CAPACITY];                                                        \
        for (int64_t t = 0; t < n_tokens; t += run) {                                            \
            int64_t T = n_tokens - t < run ? n_tokens - t : run;                                 \
            for (int64_t i = 0; i < T; i++)                                                      \
                prepare(acts + (size_t)(t + i) * activation_stride, n, &prepared[i * per_token]); \
            KERNEL_TILE_ALL_ROWS(tile, ROWS, TILE_TOKENS, T, (const uint8_t *)prepared,          \
                                 (size_t)per_token * sizeof(prepared_type), out + t * out_stride); \
        }                                                                                        \
    }

/* Activation blocks per activation row, and one row's blocks rearranged
 * (once per call for decode, once per run of tokens for the tiles). */
KERNEL_INLINE int64_t k4_units(int64_t n)
{
    return n / QK_K;
}

KERNEL_INLINE void k4_prepare(const uint8_t *activation, int64_t n, k4_activation *out)
{
    for (int64_t b = 0; b < n / QK_K; b++)
        k4_activation_load((const block_q8_k *)activation + b, &out[b]);
}

/* Decode: every row of a call takes the same activation blocks, so they are
 * rearranged once per call instead of once per row (rows of up to
 * K4_DECODE_BLOCKS blocks; longer ones rearrange per row as dot_rows does). */
#define K4_DECODE_BLOCKS 64

typedef struct k4_decode_state {
    const k4_activation *prepared; /* NULL: rows too long, rearrange per row */
    k4_activation blocks[K4_DECODE_BLOCKS];
} k4_decode_state;

KERNEL_INLINE void k4_decode_init(k4_decode_state *state, int64_t n, const void *activation)
{
    state->prepared = NULL;
    if (k4_units(n) > K4_DECODE_BLOCKS)
        return;
    k4_prepare(activation, n, state->blocks);
    state->prepared = state->blocks;
}

#define K4_DECODE_ROW(name, group)                                                                 \
    KERNEL_INLINE void name(k4_decode_state *state, int64_t n, const uint8_t *row,                \
                            const void *activation, float *out)                                   \
    {                                                                                             \
        /* two inlined copies: the prepared one without the per-block checks */                \
        if (state->prepared)                                                                      \
            group##_rows(1, n, row, 0, activation, out, state->prepared);                         \
        else                                                                                      \
            group(1, n, row, 0, activation, out);                                                 \
    }

K4_DECODE_ROW(q4_k_decode_row, q4_k_group)
K4_DECODE_ROW(q5_k_decode_row, q5_k_group)

/* vpermw controls: word i of the result takes scale (first + i / 8). */
static const int16_t q6_scale_index[4][32] = {
#define Q6_ROW(f) {f, f, f, f, f, f, f, f, f + 1, f + 1, f + 1, f + 1, f + 1, f + 1, f + 1, f + 1, \
                   f + 2, f + 2, f + 2, f + 2, f + 2, f + 2, f + 2, f + 2, f + 3, f + 3, f + 3, f + 3, f + 3, f + 3, f + 3, f + 3}
    Q6_ROW(0), Q6_ROW(4), Q6_ROW(8), Q6_ROW(12)
#undef Q6_ROW
};

/* One row's Q6_K block unpacked: unsigned 6-bit weights (sub-blocks 0-3,
 * 4-7, 8-11, 12-15 per zmm), each sub-block's scale under its words. */
typedef struct q6_weights {
    __m512i q[4];
    __m512i scale[4];
    __m256i scales16;
    float d;
} q6_weights;

/* Constants of the Q6_K unpacking, set up once per call. */
typedef struct q6_constants {
    __m512i low4, bits45, shift_low, shift_high, index[4];
} q6_constants;

KERNEL_INLINE void q6_constants_init(q6_constants *c)
{
    c->low4 = _mm512_set1_epi8(0x0f);
    c->bits45 = _mm512_set1_epi8(0x30);
    /* 16-bit shift counts: low nibbles of 64 bytes take qh bits 0-1 (<< 4)
     * then 2-3 (<< 2); high nibbles take bits 4-5 (>> 0) then 6-7 (>> 2). */
    c->shift_low = avx512_join(_mm256_set1_epi16(4), _mm256_set1_epi16(2));
    c->shift_high = avx512_join(_mm256_set1_epi16(0), _mm256_set1_epi16(2));
    KERNEL_UNROLLED for (int i = 0; i < 4; i++)
        c->index[i] = _mm512_loadu_si512((const void *)q6_scale_index[i]);
}

KERNEL_INLINE void q6_unpack(const block_q6_k *x, const q6_constants *c, q6_weights *out)
{
    out->scales16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x->scales));
    __m512i scales = _mm512_castsi256_si512(out->scales16);
    KERNEL_UNROLLED for (int h = 0; h < 2; h++) {
        __m512i l = _mm512_loadu_si512((const void *)(x->ql + 64 * h));
        __m512i hb = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(x->qh + 32 * h)));
        out->q[2 * h] = _mm512_or_si512(_mm512_and_si512(l, c->low4),
                                        _mm512_and_si512(_mm512_sllv_epi16(hb, c->shift_low), c->bits45));
        out->q[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), c->low4),
                                            _mm512_and_si512(_mm512_srlv_epi16(hb, c->shift_high), c->bits45));
    }
    KERNEL_UNROLLED for (int i = 0; i < 4; i++)
        out->scale[i] = _mm512_permutexvar_epi16(c->index[i], scales);
    out->d = avx512_f16(x->d);
}

/* One row's unpacked block against one activation block (its 256 values in
 * four zmm, its 16-value sums). */
KERNEL_INLINE void q6_accumulate(const q6_weights *x, const __m512i ya[4], __m256i bsums, float dy, __m512 *acc)
{
    __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(x->scales16, bsums), 5);
    __m512i sum = _mm512_zextsi256_si512(_mm256_sub_epi32(_mm256_setzero_si256(), offset));
    KERNEL_UNROLLED for (int i = 0; i < 4; i++)
        sum = _mm512_dpwssd_epi32(sum, _mm512_maddubs_epi16(x->q[i], ya[i]), x->scale[i]);
    float d = x->d * dy;
    *acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(d), *acc);
}

/* Q6_K: unsigned 6-bit weights through maddubs, scales through vpdpwssd, the
 * -32 offset taken back out with 32 * sum(scale * bsum). */
/* R rows on constants set up by the caller; `prefetch`: request each row's
 * blocks a little ahead (decode rows have theirs requested by the driver). */
KERNEL_INLINE void q6_k_rows(const int R, int64_t n, const uint8_t *rows, size_t row_bytes, const void *activation,
                             float *out, const q6_constants *c, const bool prefetch)
{
    const block_q8_k *a = activation;
    const int64_t nb = n / QK_K;
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
            if (prefetch)
                avx512_prefetch(row, b, sizeof(block_q6_k));
            q6_weights x;
            q6_unpack((const block_q6_k *)row + b, c, &x);
            q6_accumulate(&x, ya, bsums, y->d, &acc[r]);
        }
    }
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        out[r] = avx512_hsum(acc[r]);
}

KERNEL_INLINE void q6_k_group(const int R, int64_t n, const uint8_t *rows, size_t row_bytes,
                              const void *activation, float *out)
{
    q6_constants c;
    q6_constants_init(&c);
    q6_k_rows(R, n, rows, row_bytes, activation, out, &c, true);
}

/* Decode: the unpacking constants set up once per call, not once per row. */
KERNEL_INLINE void q6_decode_init(q6_constants *c, int64_t n, const void *activation)
{
    (void)n, (void)activation;
    q6_constants_init(c);
}

KERNEL_INLINE void q6_k_decode_row(q6_constants *c, int64_t n, const uint8_t *row, const void *activation,
                                   float *out)
{
    q6_k_rows(1, n, row, 0, activation, out, c, false);
}

KERNEL_INLINE void q6_k_tile(const int R, const int T, int64_t n, const uint8_t *rows, size_t row_bytes,
                             const uint8_t *acts, size_t act_stride, float *out, int64_t out_stride)
{
    const int64_t nb = n / QK_K;
    q6_constants c;
    q6_constants_init(&c);
    __m512 acc[KERNEL_TILE_MAX_ROWS][KERNEL_TILE_MAX_TOKENS];
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        KERNEL_UNROLLED for (int t = 0; t < T; t++)
            acc[r][t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        q6_weights x[KERNEL_TILE_MAX_ROWS];
        KERNEL_UNROLLED for (int r = 0; r < R; r++)
            q6_unpack((const block_q6_k *)(rows + (size_t)r * row_bytes) + b, &c, &x[r]);
        KERNEL_UNROLLED for (int t = 0; t < T; t++) {
            const block_q8_k *y = (const block_q8_k *)(acts + (size_t)t * act_stride) + b;
            __m256i bsums = _mm256_loadu_si256((const __m256i *)y->bsums);
            __m512i ya[4];
            KERNEL_UNROLLED for (int i = 0; i < 4; i++)
                ya[i] = _mm512_loadu_si512((const void *)(y->qs + 64 * i));
            KERNEL_UNROLLED for (int r = 0; r < R; r++)
                q6_accumulate(&x[r], ya, bsums, y->d, &acc[r][t]);
        }
    }
    KERNEL_UNROLLED for (int t = 0; t < T; t++)
        KERNEL_UNROLLED for (int r = 0; r < R; r++)
            out[t * out_stride + r] = avx512_hsum(acc[r][t]);
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

KERNEL_INLINE __m512 avx512_load_f32(const uint8_t *p)
{
    return _mm512_loadu_ps((const float *)p);
}

/* 32 elements (of `size` bytes) per step into two accumulators per row; a
 * tail shorter than 32 is zero-padded into local buffers and takes the same
 * path. */
#define FLOAT_GROUP(name, load, size)                                                            \
    KERNEL_INLINE void name(const int R, int64_t n, const uint8_t *rows, size_t row_bytes,       \
                            const void *activation, float *out)                                  \
    {                                                                                            \
        const uint8_t *a = activation;                                                           \
        __m512 acc0[KERNEL_GROUP_ROWS], acc1[KERNEL_GROUP_ROWS];                                 \
        KERNEL_UNROLLED for (int r = 0; r < R; r++) {                                            \
            acc0[r] = _mm512_setzero_ps();                                                       \
            acc1[r] = _mm512_setzero_ps();                                                       \
        }                                                                                        \
        int64_t i = 0;                                                                           \
        for (; i + 32 <= n; i += 32) {                                                           \
            __m512 a0 = load(a + (size) * i), a1 = load(a + (size) * i + 16 * (size));           \
            KERNEL_UNROLLED for (int r = 0; r < R; r++) {                                        \
                const uint8_t *x = rows + (size_t)r * row_bytes + (size) * i;                    \
                __builtin_prefetch(x + 256 * (size));                                            \
                acc0[r] = _mm512_fmadd_ps(load(x), a0, acc0[r]);                                 \
                acc1[r] = _mm512_fmadd_ps(load(x + 16 * (size)), a1, acc1[r]);                   \
            }                                                                                    \
        }                                                                                        \
        if (i < n) {                                                                             \
            uint8_t a_tail[32 * (size)] = {0};                                                   \
            memcpy(a_tail, a + (size) * i, (size_t)(n - i) * (size));                            \
            __m512 a0 = load(a_tail), a1 = load(a_tail + 16 * (size));                           \
            KERNEL_UNROLLED for (int r = 0; r < R; r++) {                                        \
                uint8_t x[32 * (size)] = {0};                                                    \
                memcpy(x, rows + (size_t)r * row_bytes + (size) * i, (size_t)(n - i) * (size));  \
                acc0[r] = _mm512_fmadd_ps(load(x), a0, acc0[r]);                                 \
                acc1[r] = _mm512_fmadd_ps(load(x + 16 * (size)), a1, acc1[r]);                   \
            }                                                                                    \
        }                                                                                        \
        KERNEL_UNROLLED for (int r = 0; r < R; r++)                                              \
            out[r] = avx512_hsum(_mm512_add_ps(acc0[r], acc1[r]));                               \
    }                                                                                            \
                                                                                                 \
    KERNEL_INLINE void name##_tile(const int R, const int T, int64_t n, const uint8_t *rows,     \
                                   size_t row_bytes, const uint8_t *acts, size_t act_stride,     \
                                   float *out, int64_t out_stride)                               \
    {                                                                                            \
        __m512 acc0[KERNEL_TILE_MAX_ROWS][KERNEL_TILE_MAX_TOKENS];                               \
        __m512 acc1[KERNEL_TILE_MAX_ROWS][KERNEL_TILE_MAX_TOKENS];                               \
        KERNEL_UNROLLED for (int r = 0; r < R; r++)                                              \
            KERNEL_UNROLLED for (int t = 0; t < T; t++) {                                        \
                acc0[r][t] = _mm512_setzero_ps();                                                \
                acc1[r][t] = _mm512_setzero_ps();                                                \
            }                                                                                    \
        int64_t i = 0;                                                                           \
        for (; i + 32 <= n; i += 32) {                                                           \
            __m512 x0[KERNEL_TILE_MAX_ROWS], x1[KERNEL_TILE_MAX_ROWS];                           \
            KERNEL_UNROLLED for (int r = 0; r < R; r++) {                                        \
                const uint8_t *x = rows + (size_t)r * row_bytes + (size) * i;                    \
                x0[r] = load(x);                                                                 \
                x1[r] = load(x + 16 * (size));                                                   \
            }                                                                                    \
            KERNEL_UNROLLED for (int t = 0; t < T; t++) {                                        \
                const uint8_t *a = acts + (size_t)t * act_stride + (size) * i;                   \
                __m512 a0 = load(a), a1 = load(a + 16 * (size));                                 \
                KERNEL_UNROLLED for (int r = 0; r < R; r++) {                                    \
                    acc0[r][t] = _mm512_fmadd_ps(x0[r], a0, acc0[r][t]);                         \
                    acc1[r][t] = _mm512_fmadd_ps(x1[r], a1, acc1[r][t]);                         \
                }                                                                                \
            }                                                                                    \
        }                                                                                        \
        if (i < n) {                                                                             \
            __m512 x0[KERNEL_TILE_MAX_ROWS], x1[KERNEL_TILE_MAX_ROWS];                           \
            KERNEL_UNROLLED for (int r = 0; r < R; r++) {                                        \
                uint8_t x[32 * (size)] = {0};                                                    \
                memcpy(x, rows + (size_t)r * row_bytes + (size) * i, (size_t)(n - i) * (size));  \
                x0[r] = load(x);                                                                 \
                x1[r] = load(x + 16 * (size));                                                   \
            }                                                                                    \
            KERNEL_UNROLLED for (int t = 0; t < T; t++) {                                        \
                uint8_t a[32 * (size)] = {0};                                                    \
                memcpy(a, acts + (size_t)t * act_stride + (size) * i, (size_t)(n - i) * (size)); \
                __m512 a0 = load(a), a1 = load(a + 16 * (size));                                 \
                KERNEL_UNROLLED for (int r = 0; r < R; r++) {                                    \
                    acc0[r][t] = _mm512_fmadd_ps(x0[r], a0, acc0[r][t]);                         \
                    acc1[r][t] = _mm512_fmadd_ps(x1[r], a1, acc1[r][t]);                         \
                }                                                                                \
            }                                                                                    \
        }                                                                                        \
        KERNEL_UNROLLED for (int t = 0; t < T; t++)                                              \
            KERNEL_UNROLLED for (int r = 0; r < R; r++)                                          \
                out[t * out_stride + r] = avx512_hsum(_mm512_add_ps(acc0[r][t], acc1[r][t]));    \
    }

FLOAT_GROUP(f16_group, avx512_load_f16, 2)
FLOAT_GROUP(bf16_group, avx512_load_bf16, 2)
FLOAT_GROUP(f32_group, avx512_load_f32, 4)

/* ---- axpy: y += a * x, one fused multiply-add per element -------------- */

KERNEL_INLINE __m512 avx512_load_partial_f32(const uint8_t *p, __mmask16 mask)
{
    return _mm512_maskz_loadu_ps(mask, p);
}

KERNEL_INLINE __m512 avx512_load_partial_f16(const uint8_t *p, __mmask16 mask)
{
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, p));
}

/* 64 elements of y in four registers over all rows, then 16 at a time. */
#define AXPY(name, load, load_partial, size)                                                     \
    static void name(int64_t n, int64_t n_rows, const float *a, const void *x, size_t x_stride,  \
                     float *y)                                                                   \
    {                                                                                            \
        const uint8_t *rows = x;                                                                 \
        int64_t i = 0;                                                                           \
        for (; i + 64 <= n; i += 64) {                                                           \
            __m512 y0 = _mm512_loadu_ps(y + i), y1 = _mm512_loadu_ps(y + i + 16);               \
            __m512 y2 = _mm512_loadu_ps(y + i + 32), y3 = _mm512_loadu_ps(y + i + 48);          \
            const uint8_t *row = rows + (size) * i;                                              \
            for (int64_t r = 0; r < n_rows; r++, row += x_stride) {                              \
                __m512 scale = _mm512_set1_ps(a[r]);                                             \
                y0 = _mm512_fmadd_ps(load(row), scale, y0);                                      \
                y1 = _mm512_fmadd_ps(load(row + (size) * 16), scale, y1);                        \
                y2 = _mm512_fmadd_ps(load(row + (size) * 32), scale, y2);                        \
                y3 = _mm512_fmadd_ps(load(row + (size) * 48), scale, y3);                        \
            }                                                                                    \
            _mm512_storeu_ps(y + i, y0);                                                         \
            _mm512_storeu_ps(y + i + 16, y1);                                                    \
            _mm512_storeu_ps(y + i + 32, y2);                                                    \
            _mm512_storeu_ps(y + i + 48, y3);                                                    \
        }                                                                                        \
        for (; i < n; i += 16) {                                                                 \
            __mmask16 mask = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1); \
            __m512 sum = _mm512_maskz_loadu_ps(mask, y + i);                                     \
            const uint8_t *row = rows + (size) * i;                                              \
            for (int64_t r = 0; r < n_rows; r++, row += x_stride)                                \
                sum = _mm512_fmadd_ps(load_partial(row, mask), _mm512_set1_ps(a[r]), sum);       \
            _mm512_mask_storeu_ps(y + i, mask, sum);                                             \
        }                                                                                        \
    }

AXPY(avx512_axpy_f32, avx512_load_f32, avx512_load_partial_f32, 4)
AXPY(avx512_axpy_f16, avx512_load_f16, avx512_load_partial_f16, 2)

KERNEL_DEFINE_DOT_ROWS(avx512_dot_rows_q8_0, q8_0_group)
KERNEL_DEFINE_DOT_ROWS(avx512_dot_rows_q4_0, q4_0_group)
KERNEL_DEFINE_DOT_ROWS(avx512_dot_rows_iq4_nl, iq4_nl_group)
KERNEL_DEFINE_DOT_ROWS(avx512_dot_rows_mxfp4, mxfp4_group)
KERNEL_DEFINE_DOT_ROWS(avx512_dot_rows_q4_k, q4_k_group)
KERNEL_DEFINE_DOT_ROWS(avx512_dot_rows_q5_k, q5_k_group)
KERNEL_DEFINE_DOT_ROWS(avx512_dot_rows_q6_k, q6_k_group)
KERNEL_DEFINE_DOT_ROWS(avx512_dot_rows_f16, f16_group)
KERNEL_DEFINE_DOT_ROWS(avx512_dot_rows_bf16, bf16_group)
KERNEL_DEFINE_DOT_ROWS(avx512_dot_rows_f32, f32_group)

/* Tiles: the K-quants one row at a time (an unpacked block fills the
 * registers), the 32-element formats four rows at a time (an unpacked step
 * is small); those on activations prepared once per call, Q6_K on its
 * activations as stored (it needs no preparing). */
PREPARED_DEFINE_DOT_TILE(avx512_dot_tile_q4_k, q4_k_group_tile, 1, avx512_dot_rows_q4_k, k4_activation,
                         k4_units, k4_prepare)
PREPARED_DEFINE_DOT_TILE(avx512_dot_tile_q5_k, q5_k_group_tile, 1, avx512_dot_rows_q5_k, k4_activation,
                         k4_units, k4_prepare)
KERNEL_DEFINE_DOT_TILE_TOKENS_OUTER(avx512_dot_tile_q6_k, q6_k_tile, 1, 8)
PREPARED_DEFINE_DOT_TILE(avx512_dot_tile_q8_0, q8_0_tile, SMALL_TILE_ROWS, avx512_dot_rows_q8_0,
                         small_activation, small_steps, q8_0_tile_prepare)
PREPARED_DEFINE_DOT_TILE(avx512_dot_tile_q4_0, q4_0_tile, SMALL_TILE_ROWS, avx512_dot_rows_q4_0,
                         small_activation, small_steps, q4_0_tile_prepare)
PREPARED_DEFINE_DOT_TILE(avx512_dot_tile_iq4_nl, iq4_nl_tile, SMALL_TILE_ROWS, avx512_dot_rows_iq4_nl,
                         small_activation, small_steps, iq4_nl_tile_prepare)
PREPARED_DEFINE_DOT_TILE(avx512_dot_tile_mxfp4, mxfp4_tile, SMALL_TILE_ROWS, avx512_dot_rows_mxfp4,
                         small_activation, small_steps, mxfp4_tile_prepare)
KERNEL_DEFINE_DOT_TILE(avx512_dot_tile_f32, f32_group_tile, 4, 8)
KERNEL_DEFINE_DOT_TILE(avx512_dot_tile_f16, f16_group_tile, 4, 8)
KERNEL_DEFINE_DOT_TILE(avx512_dot_tile_bf16, bf16_group_tile, 4, 8)

KERNEL_DEFINE_DOT_DECODE(avx512_dot_decode_q4_k, k4_decode_state, k4_decode_init, q4_k_decode_row)
KERNEL_DEFINE_DOT_DECODE(avx512_dot_decode_q5_k, k4_decode_state, k4_decode_init, q5_k_decode_row)
KERNEL_DEFINE_DOT_DECODE(avx512_dot_decode_q6_k, q6_constants, q6_decode_init, q6_k_decode_row)
KERNEL_DEFINE_DOT_DECODE(avx512_dot_decode_q8_0, small_decode_state, q8_0_decode_init, q8_0_decode_row)
KERNEL_DEFINE_DOT_DECODE(avx512_dot_decode_q4_0, small_decode_state, q4_0_decode_init, q4_0_decode_row)
KERNEL_DEFINE_DOT_DECODE(avx512_dot_decode_iq4_nl, small_decode_state, iq4_nl_decode_init, iq4_nl_decode_row)
KERNEL_DEFINE_DOT_DECODE(avx512_dot_decode_mxfp4, small_decode_state, mxfp4_decode_init, mxfp4_decode_row)
KERNEL_DEFINE_DOT_DECODE_GROUP(avx512_dot_decode_f16, f16_group)
KERNEL_DEFINE_DOT_DECODE_GROUP(avx512_dot_decode_bf16, bf16_group)
KERNEL_DEFINE_DOT_DECODE_GROUP(avx512_dot_decode_f32, f32_group)

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
        [TYPE_F32] = avx512_dot_rows_f32,
        KERNELS_IQ_ROWS(avx2),
        KERNELS_TERNARY_ROWS(avx2),
    },
    .dot_decode = {
        [TYPE_Q8_0] = avx512_dot_decode_q8_0,
        [TYPE_Q4_0] = avx512_dot_decode_q4_0,
        [TYPE_IQ4_NL] = avx512_dot_decode_iq4_nl,
        [TYPE_MXFP4] = avx512_dot_decode_mxfp4,
        [TYPE_Q4_K] = avx512_dot_decode_q4_k,
        [TYPE_Q5_K] = avx512_dot_decode_q5_k,
        [TYPE_Q6_K] = avx512_dot_decode_q6_k,
        [TYPE_F16] = avx512_dot_decode_f16,
        [TYPE_BF16] = avx512_dot_decode_bf16,
        [TYPE_F32] = avx512_dot_decode_f32,
        KERNELS_IQ_DECODE(avx2),
        KERNELS_TERNARY_DECODE(avx2),
    },
    .dot_tile = {
        [TYPE_Q8_0] = avx512_dot_tile_q8_0,
        [TYPE_Q4_0] = avx512_dot_tile_q4_0,
        [TYPE_IQ4_NL] = avx512_dot_tile_iq4_nl,
        [TYPE_MXFP4] = avx512_dot_tile_mxfp4,
        [TYPE_Q4_K] = avx512_dot_tile_q4_k,
        [TYPE_Q5_K] = avx512_dot_tile_q5_k,
        [TYPE_Q6_K] = avx512_dot_tile_q6_k,
        [TYPE_F16] = avx512_dot_tile_f16,
        [TYPE_BF16] = avx512_dot_tile_bf16,
        [TYPE_F32] = avx512_dot_tile_f32,
    },
    .axpy = {
        [TYPE_F32] = avx512_axpy_f32,
        [TYPE_F16] = avx512_axpy_f16,
    },
    .quantize_row = {
        [TYPE_Q8_K] = avx512_quantize_row_q8_k,
        [TYPE_Q8_0] = avx512_quantize_row_q8_0,
        [TYPE_F16] = avx512_quantize_row_f16,
    },
    .attend = {
        [TYPE_F32] = avx512_attend_f32,
        [TYPE_F16] = avx512_attend_f16,
    },
    .exponential = avx512_exponential,
    .silu_glu = avx512_silu_glu,
    .swiglu_oai = avx512_swiglu_oai,
    .softmax = avx512_softmax,
    .rmsnorm = avx512_rmsnorm,
};

const kernel_set *kernels_avx512(void)
{
    return &avx512_set;
}
