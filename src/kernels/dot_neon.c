/* NEON + dotprod dot-product kernels (aarch64): Q8_0, Q4_0, IQ4_NL, MXFP4
 * against Q8_0; Q4_K, Q5_K, Q6_K against Q8_K; F16, BF16 and F32; axpy for
 * F32 and F16; tile kernels for the K-quants (the other types run dot_rows
 * per token in a batch). sdot (vdotq_s32)
 * does the exact integer sums inside a block; nibble formats go through a
 * 16-entry table lookup (vqtbl1q); across blocks each row accumulates in f32
 * lanes in increasing block order.
 * The grid i-quants' and the ternary formats' kernels are in dot_iq_neon.c and
 * dot_ternary_neon.c; this set lists them. */
#include <arm_neon.h>
#include <math.h>

#include "dot_common.h"
#include "kernels_dispatch.h"

KERNEL_INLINE float neon_f16(uint16_t h)
{
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

KERNEL_INLINE void neon_prefetch(const uint8_t *row, int64_t block, size_t block_bytes)
{
    __builtin_prefetch(row + (size_t)(block + KERNEL_PREFETCH_BLOCKS) * block_bytes);
}

/* ---- 32-element blocks against Q8_0 activations ------------------------ */

enum small_kind { SMALL_Q8_0, SMALL_Q4_0, SMALL_IQ4_NL, SMALL_MXFP4 };

static const int8_t q4_0_values[16] = {-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7};

KERNEL_INLINE size_t small_block_bytes(enum small_kind kind)
{
    return kind == SMALL_Q8_0 ? sizeof(block_q8_0) : kind == SMALL_MXFP4 ? sizeof(block_mxfp4) : sizeof(block_q4_0);
}

KERNEL_INLINE int8x16_t small_table(enum small_kind kind)
{
    return vld1q_s8(kind == SMALL_MXFP4 ? quant_mxfp4_values : kind == SMALL_IQ4_NL ? quant_iq4nl_values : q4_0_values);
}

/* One row's block b against the activation block (values y0, y1, scale da):
 * the per-row work of small_group, shared with the decode kernel so that
 * both round alike. */
KERNEL_INLINE void small_row_block(const uint8_t *row, int64_t b, size_t block_bytes, int8x16_t table,
                                   const enum small_kind kind, int8x16_t y0, int8x16_t y1, float da,
                                   float32x4_t *acc)
{
    neon_prefetch(row, b, block_bytes);
    const uint8_t *block = row + (size_t)b * block_bytes;
    int8x16_t w0, w1;
    float dw;
    if (kind == SMALL_Q8_0) {
        w0 = vld1q_s8((const int8_t *)block + 2);
        w1 = vld1q_s8((const int8_t *)block + 18);
    } else {
        uint8x16_t q = vld1q_u8(block + (kind == SMALL_MXFP4 ? 1 : 2));
        w0 = vqtbl1q_s8(table, vandq_u8(q, vdupq_n_u8(0x0f)));
        w1 = vqtbl1q_s8(table, vshrq_n_u8(q, 4));
    }
    if (kind == SMALL_MXFP4) {
        dw = kernel_e8m0_half(block[0]);
    } else {
        uint16_t bits;
        memcpy(&bits, block, 2);
        dw = neon_f16(bits);
    }
    int32x4_t sum = vdotq_s32(vdotq_s32(vdupq_n_s32(0), w0, y0), w1, y1);
    *acc = vfmaq_n_f32(*acc, vcvtq_f32_s32(sum), kind == SMALL_MXFP4 ? da * dw : dw * da);
}

KERNEL_INLINE void small_group(const int R, int64_t n, const uint8_t *rows, size_t row_bytes,
                               const void *activation, float *out, const enum small_kind kind)
{
    const block_q8_0 *a = activation;
    const int64_t nb = n / 32;
    const size_t block_bytes = small_block_bytes(kind);
    const int8x16_t table = small_table(kind);
    float32x4_t acc[KERNEL_GROUP_ROWS];
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        acc[r] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        int8x16_t y0 = vld1q_s8(a[b].qs), y1 = vld1q_s8(a[b].qs + 16);
        float da = neon_f16(a[b].d);
        KERNEL_UNROLLED for (int r = 0; r < R; r++)
            small_row_block(rows + (size_t)r * row_bytes, b, block_bytes, table, kind, y0, y1, da, &acc[r]);
    }
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        out[r] = vaddvq_f32(acc[r]);
}

/* Decode: every row of a call takes the same activation blocks, so their
 * scales are converted once per call (rows of up to SMALL_DECODE_BLOCKS
 * blocks; longer ones convert them per row as dot_rows does). The values are
 * loaded as they are: sdot takes them unchanged. */
#define SMALL_DECODE_BLOCKS 256

typedef struct small_decode_state {
    int prepared; /* 0: rows too long */
    float d[SMALL_DECODE_BLOCKS];
} small_decode_state;

KERNEL_INLINE void small_decode_init(small_decode_state *state, int64_t n, const void *activation)
{
    const block_q8_0 *a = activation;
    const int64_t nb = n / 32;
    state->prepared = nb <= SMALL_DECODE_BLOCKS;
    if (!state->prepared)
        return;
    for (int64_t b = 0; b < nb; b++)
        state->d[b] = neon_f16(a[b].d);
}

/* The operations of small_group for one row, on the converted scales. */
KERNEL_INLINE void small_decode_row(small_decode_state *state, int64_t n, const uint8_t *row,
                                    const void *activation, float *out, const enum small_kind kind)
{
    if (!state->prepared) {
        small_group(1, n, row, 0, activation, out, kind);
        return;
    }
    const block_q8_0 *a = activation;
    const int64_t nb = n / 32;
    const size_t block_bytes = small_block_bytes(kind);
    const int8x16_t table = small_table(kind);
    float32x4_t acc = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++)
        small_row_block(row, b, block_bytes, table, kind, vld1q_s8(a[b].qs), vld1q_s8(a[b].qs + 16),
                        state->d[b], &acc);
    *out = vaddvq_f32(acc);
}

#define SMALL_DECODE(prefix, kind)                                                                 \
    KERNEL_INLINE void prefix##_decode_init(small_decode_state *state, int64_t n, const void *a)  \
    {                                                                                             \
        small_decode_init(state, n, a);                                                           \
    }                                                                                             \
    KERNEL_INLINE void prefix##_decode_row(small_decode_state *state, int64_t n, const uint8_t *row, \
                                           const void *a, float *out)                             \
    {                                                                                             \
        small_decode_row(state, n, row, a, out, kind);                                            \
    }

SMALL_DECODE(q8_0, SMALL_Q8_0)
SMALL_DECODE(q4_0, SMALL_Q4_0)
SMALL_DECODE(iq4_nl, SMALL_IQ4_NL)
SMALL_DECODE(mxfp4, SMALL_MXFP4)

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

/* One row's Q4_K or Q5_K block unpacked: what depends on the weights only,
 * computed once and used for every activation row of a tile. */
typedef struct k4_weights {
    uint8x16_t w[4][4];  /* per 64 elements c: low nibbles (two halves), high nibbles (two halves) */
    uint8_t scale[16];   /* sc[0..7] then m[0..7] */
    int16x8_t mins;
    float d, dmin;
} k4_weights;

/* high_bits: NULL for Q4_K, qh for Q5_K. */
KERNEL_INLINE void k4_unpack(const uint8_t *header, const uint8_t *qs, const uint8_t *high_bits,
                             k4_weights *out)
{
    uint16_t d_bits, dmin_bits;
    memcpy(&d_bits, header, 2);
    memcpy(&dmin_bits, header + 2, 2);
    kernel_k4_unpack_scales(header + 4, out->scale);
    out->mins = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(out->scale + 8)));
    const uint8x16_t low4 = vdupq_n_u8(0x0f);
    const uint8x16_t sixteen = vdupq_n_u8(0x10);
    uint8x16_t qh0 = vdupq_n_u8(0), qh1 = vdupq_n_u8(0);
    if (high_bits) {
        qh0 = vld1q_u8(high_bits);
        qh1 = vld1q_u8(high_bits + 16);
    }
    KERNEL_UNROLLED for (int c = 0; c < 4; c++) {
        uint8x16_t q0 = vld1q_u8(qs + 32 * c), q1 = vld1q_u8(qs + 32 * c + 16);
        uint8x16_t l0 = vandq_u8(q0, low4), l1 = vandq_u8(q1, low4);
        uint8x16_t h0 = vshrq_n_u8(q0, 4), h1 = vshrq_n_u8(q1, 4);
        if (high_bits) {
            uint8x16_t bit_low = vdupq_n_u8((uint8_t)(1 << (2 * c)));
            uint8x16_t bit_high = vdupq_n_u8((uint8_t)(1 << (2 * c + 1)));
            l0 = vorrq_u8(l0, vandq_u8(vtstq_u8(qh0, bit_low), sixteen));
            l1 = vorrq_u8(l1, vandq_u8(vtstq_u8(qh1, bit_low), sixteen));
            h0 = vorrq_u8(h0, vandq_u8(vtstq_u8(qh0, bit_high), sixteen));
            h1 = vorrq_u8(h1, vandq_u8(vtstq_u8(qh1, bit_high), sixteen));
        }
        out->w[c][0] = l0;
        out->w[c][1] = l1;
        out->w[c][2] = h0;
        out->w[c][3] = h1;
    }
    out->d = neon_f16(d_bits);
    out->dmin = neon_f16(dmin_bits);
}

/* One row's unpacked block against one activation block. */
KERNEL_INLINE void k4_accumulate(const k4_weights *x, const block_q8_k *y, int16x8_t bsum_pairs,
                                 float32x4_t *acc, float32x4_t *acc_min)
{
    int32x4_t min_sum = vmull_s16(vget_low_s16(x->mins), vget_low_s16(bsum_pairs));
    min_sum = vmlal_s16(min_sum, vget_high_s16(x->mins), vget_high_s16(bsum_pairs));
    int32x4_t sum = vdupq_n_s32(0);
    KERNEL_UNROLLED for (int c = 0; c < 4; c++) {
        const int8_t *yq = y->qs + 64 * c;
        int32x4_t dot_low = vdotq_s32(vdotq_s32(vdupq_n_s32(0), vreinterpretq_s8_u8(x->w[c][0]), vld1q_s8(yq)),
                                      vreinterpretq_s8_u8(x->w[c][1]), vld1q_s8(yq + 16));
        int32x4_t dot_high = vdotq_s32(vdotq_s32(vdupq_n_s32(0), vreinterpretq_s8_u8(x->w[c][2]), vld1q_s8(yq + 32)),
                                       vreinterpretq_s8_u8(x->w[c][3]), vld1q_s8(yq + 48));
        sum = vmlaq_n_s32(sum, dot_low, x->scale[2 * c]);
        sum = vmlaq_n_s32(sum, dot_high, x->scale[2 * c + 1]);
    }
    float d = x->d * y->d;
    float dmin = x->dmin * y->d;
    *acc = vfmaq_n_f32(*acc, vcvtq_f32_s32(sum), d);
    *acc_min = vfmaq_n_f32(*acc_min, vcvtq_f32_s32(min_sum), dmin);
}

KERNEL_INLINE void k4_block(const uint8_t *header, const uint8_t *qs, const uint8_t *high_bits,
                            const block_q8_k *y, int16x8_t bsum_pairs, float32x4_t *acc,
                            float32x4_t *acc_min)
{
    k4_weights x;
    k4_unpack(header, qs, high_bits, &x);
    k4_accumulate(&x, y, bsum_pairs, acc, acc_min);
}

KERNEL_INLINE int16x8_t k4_bsum_pairs(const block_q8_k *y)
{
    return vpaddq_s16(vld1q_s16(y->bsums), vld1q_s16(y->bsums + 8));
}

/* Decode: every row of a call takes the same activation blocks, so their
 * pair sums are formed once per call (rows of up to K4_DECODE_BLOCKS blocks;
 * longer ones form them per row as dot_rows does). */
#define K4_DECODE_BLOCKS 64

typedef struct k4_decode_state {
    int prepared; /* 0: rows too long */
    int16x8_t bsum_pairs[K4_DECODE_BLOCKS];
} k4_decode_state;

KERNEL_INLINE void k4_decode_init(k4_decode_state *state, int64_t n, const void *activation)
{
    const int64_t nb = n / QK_K;
    state->prepared = nb <= K4_DECODE_BLOCKS;
    if (!state->prepared)
        return;
    for (int64_t b = 0; b < nb; b++)
        state->bsum_pairs[b] = k4_bsum_pairs((const block_q8_k *)activation + b);
}

/* name##_row_block: a row's block b against activation block y, the per-row
 * work of the group, shared with the decode kernel so that both round alike. */
#define K4_GROUP(name, block_type, high_bits_field)                                              \
    KERNEL_INLINE void name##_row_block(const uint8_t *row, int64_t b, const block_q8_k *y,      \
                                        int16x8_t pairs, float32x4_t *acc, float32x4_t *acc_min) \
    {                                                                                            \
        neon_prefetch(row, b, sizeof(block_type));                                               \
        const block_type *x = (const block_type *)row + b;                                       \
        k4_block((const uint8_t *)x, x->qs, high_bits_field, y, pairs, acc, acc_min);            \
    }                                                                                            \
                                                                                                 \
    KERNEL_INLINE void name(const int R, int64_t n, const uint8_t *rows, size_t row_bytes,       \
                            const void *activation, float *out)                                  \
    {                                                                                            \
        const block_q8_k *a = activation;                                                        \
        const int64_t nb = n / QK_K;                                                             \
        float32x4_t acc[KERNEL_GROUP_ROWS], acc_min[KERNEL_GROUP_ROWS];                          \
        KERNEL_UNROLLED for (int r = 0; r < R; r++) {                                            \
            acc[r] = vdupq_n_f32(0.0f);                                                          \
            acc_min[r] = vdupq_n_f32(0.0f);                                                      \
        }                                                                                        \
        for (int64_t b = 0; b < nb; b++) {                                                       \
            const block_q8_k *y = a + b;                                                         \
            int16x8_t pairs = k4_bsum_pairs(y);                                                  \
            KERNEL_UNROLLED for (int r = 0; r < R; r++)                                          \
                name##_row_block(rows + (size_t)r * row_bytes, b, y, pairs, &acc[r], &acc_min[r]); \
        }                                                                                        \
        KERNEL_UNROLLED for (int r = 0; r < R; r++)                                              \
            out[r] = vaddvq_f32(acc[r]) - vaddvq_f32(acc_min[r]);                                \
    }                                                                                            \
                                                                                                 \
    /* The operations of the group for one row, on the prepared pair sums. */                   \
    KERNEL_INLINE void name##_decode_row(k4_decode_state *state, int64_t n, const uint8_t *row,  \
                                         const void *activation, float *out)                     \
    {                                                                                            \
        if (!state->prepared) {                                                                  \
            name(1, n, row, 0, activation, out);                                                 \
            return;                                                                              \
        }                                                                                        \
        const block_q8_k *a = activation;                                                        \
        const int64_t nb = n / QK_K;                                                             \
        float32x4_t acc = vdupq_n_f32(0.0f), acc_min = vdupq_n_f32(0.0f);                        \
        for (int64_t b = 0; b < nb; b++)                                                         \
            name##_row_block(row, b, a + b, state->bsum_pairs[b], &acc, &acc_min);               \
        *out = vaddvq_f32(acc) - vaddvq_f32(acc_min);                                            \
    }                                                                                            \
                                                                                                 \
    /* R rows x T tokens: each row's block unpacked once for the T. */                          \
    KERNEL_INLINE void name##_tile(const int R, const int T, int64_t n, const uint8_t *rows,     \
                                   size_t row_bytes, const uint8_t *acts, size_t act_stride,     \
                                   float *out, int64_t out_stride)                               \
    {                                                                                            \
        const int64_t nb = n / QK_K;                                                             \
        float32x4_t acc[KERNEL_TILE_MAX_ROWS][KERNEL_TILE_MAX_TOKENS];                           \
        float32x4_t acc_min[KERNEL_TILE_MAX_ROWS][KERNEL_TILE_MAX_TOKENS];                       \
        KERNEL_UNROLLED for (int r = 0; r < R; r++)                                              \
            KERNEL_UNROLLED for (int t = 0; t < T; t++) {                                        \
                acc[r][t] = vdupq_n_f32(0.0f);                                                   \
                acc_min[r][t] = vdupq_n_f32(0.0f);                                               \
            }                                                                                    \
        for (int64_t b = 0; b < nb; b++) {                                                       \
            k4_weights w[KERNEL_TILE_MAX_ROWS];                                                  \
            KERNEL_UNROLLED for (int r = 0; r < R; r++) {                                        \
                const block_type *x = (const block_type *)(rows + (size_t)r * row_bytes) + b;    \
                k4_unpack((const uint8_t *)x, x->qs, high_bits_field, &w[r]);                    \
            }                                                                                    \
            KERNEL_UNROLLED for (int t = 0; t < T; t++) {                                        \
                const block_q8_k *y = (const block_q8_k *)(acts + (size_t)t * act_stride) + b;   \
                int16x8_t pairs = k4_bsum_pairs(y);                                              \
                KERNEL_UNROLLED for (int r = 0; r < R; r++)                                      \
                    k4_accumulate(&w[r], y, pairs, &acc[r][t], &acc_min[r][t]);                  \
            }                                                                                    \
        }                                                                                        \
        KERNEL_UNROLLED for (int t = 0; t < T; t++)                                              \
            KERNEL_UNROLLED for (int r = 0; r < R; r++)                                          \
                out[t * out_stride + r] = vaddvq_f32(acc[r][t]) - vaddvq_f32(acc_min[r][t]);     \
    }

K4_GROUP(q4_k_group, block_q4_k, NULL)
K4_GROUP(q5_k_group, block_q5_k, x->qh)

/* Q6_K: 6-bit weights made signed (-32) before sdot; one sdot per
 * 16-element sub-block, scaled by its int8 scale. One row's block unpacked:
 * w[2 * h + half][k] holds elements 128 h + 32 k + 16 half .. + 15, whose
 * scale is scales[8 h + 2 k + half]. */
typedef struct q6_weights {
    int8x16_t w[4][4];
    const int8_t *scales;
    float d;
} q6_weights;

KERNEL_INLINE void q6_unpack(const block_q6_k *x, q6_weights *out)
{
    const uint8x16_t low4 = vdupq_n_u8(0x0f);
    const uint8x16_t bits45 = vdupq_n_u8(0x30);
    const int8x16_t thirty_two = vdupq_n_s8(32);
    KERNEL_UNROLLED for (int h = 0; h < 2; h++) {
        const uint8_t *ql = x->ql + 64 * h;
        const uint8_t *qh = x->qh + 32 * h;
        KERNEL_UNROLLED for (int half = 0; half < 2; half++) { /* l in 0..15, then 16..31 */
            uint8x16_t l0 = vld1q_u8(ql + 16 * half), l1 = vld1q_u8(ql + 32 + 16 * half);
            uint8x16_t hb = vld1q_u8(qh + 16 * half);
            uint8x16_t q[4];
            q[0] = vorrq_u8(vandq_u8(l0, low4), vandq_u8(vshlq_n_u8(hb, 4), bits45));
            q[1] = vorrq_u8(vandq_u8(l1, low4), vandq_u8(vshlq_n_u8(hb, 2), bits45));
            q[2] = vorrq_u8(vshrq_n_u8(l0, 4), vandq_u8(hb, bits45));
            q[3] = vorrq_u8(vshrq_n_u8(l1, 4), vandq_u8(vshrq_n_u8(hb, 2), bits45));
            KERNEL_UNROLLED for (int k = 0; k < 4; k++)
                out->w[2 * h + half][k] = vsubq_s8(vreinterpretq_s8_u8(q[k]), thirty_two);
        }
    }
    out->scales = x->scales;
    out->d = neon_f16(x->d);
}

KERNEL_INLINE void q6_accumulate(const q6_weights *x, const block_q8_k *y, float32x4_t *acc)
{
    int32x4_t sum = vdupq_n_s32(0);
    KERNEL_UNROLLED for (int h = 0; h < 2; h++)
        KERNEL_UNROLLED for (int half = 0; half < 2; half++)
            KERNEL_UNROLLED for (int k = 0; k < 4; k++) {
                const int8_t *yq = y->qs + 128 * h + 32 * k + 16 * half;
                int32x4_t dot = vdotq_s32(vdupq_n_s32(0), x->w[2 * h + half][k], vld1q_s8(yq));
                sum = vmlaq_n_s32(sum, dot, x->scales[8 * h + 2 * k + half]);
            }
    *acc = vfmaq_n_f32(*acc, vcvtq_f32_s32(sum), x->d * y->d);
}

KERNEL_INLINE void q6_k_group(const int R, int64_t n, const uint8_t *rows, size_t row_bytes,
                              const void *activation, float *out)
{
    const block_q8_k *a = activation;
    const int64_t nb = n / QK_K;
    float32x4_t acc[KERNEL_GROUP_ROWS];
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        acc[r] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        KERNEL_UNROLLED for (int r = 0; r < R; r++) {
            const uint8_t *row = rows + (size_t)r * row_bytes;
            neon_prefetch(row, b, sizeof(block_q6_k));
            q6_weights x;
            q6_unpack((const block_q6_k *)row + b, &x);
            q6_accumulate(&x, a + b, &acc[r]);
        }
    }
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        out[r] = vaddvq_f32(acc[r]);
}

/* R rows x T tokens: each row's block unpacked once for the T. */
KERNEL_INLINE void q6_k_tile(const int R, const int T, int64_t n, const uint8_t *rows, size_t row_bytes,
                             const uint8_t *acts, size_t act_stride, float *out, int64_t out_stride)
{
    const int64_t nb = n / QK_K;
    float32x4_t acc[KERNEL_TILE_MAX_ROWS][KERNEL_TILE_MAX_TOKENS];
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        KERNEL_UNROLLED for (int t = 0; t < T; t++)
            acc[r][t] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        q6_weights x[KERNEL_TILE_MAX_ROWS];
        KERNEL_UNROLLED for (int r = 0; r < R; r++)
            q6_unpack((const block_q6_k *)(rows + (size_t)r * row_bytes) + b, &x[r]);
        KERNEL_UNROLLED for (int t = 0; t < T; t++) {
            const block_q8_k *y = (const block_q8_k *)(acts + (size_t)t * act_stride) + b;
            KERNEL_UNROLLED for (int r = 0; r < R; r++)
                q6_accumulate(&x[r], y, &acc[r][t]);
        }
    }
    KERNEL_UNROLLED for (int t = 0; t < T; t++)
        KERNEL_UNROLLED for (int r = 0; r < R; r++)
            out[t * out_stride + r] = vaddvq_f32(acc[r][t]);
}

/* ---- F16 and BF16 against activations of the same type ---------------- */

KERNEL_INLINE float32x4_t neon_load_f16(const uint8_t *p)
{
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)(const void *)p)));
}

KERNEL_INLINE float32x4_t neon_load_bf16(const uint8_t *p)
{
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16((const uint16_t *)(const void *)p), 16));
}

/* 8 elements per step into two accumulators per row; a tail shorter than 8
 * is zero-padded into local buffers and takes the same path. */
#define HALF_GROUP(name, load)                                                                   \
    KERNEL_INLINE void name(const int R, int64_t n, const uint8_t *rows, size_t row_bytes,       \
                            const void *activation, float *out)                                  \
    {                                                                                            \
        const uint8_t *a = activation;                                                           \
        float32x4_t acc0[KERNEL_GROUP_ROWS], acc1[KERNEL_GROUP_ROWS];                            \
        KERNEL_UNROLLED for (int r = 0; r < R; r++) {                                            \
            acc0[r] = vdupq_n_f32(0.0f);                                                         \
            acc1[r] = vdupq_n_f32(0.0f);                                                         \
        }                                                                                        \
        int64_t i = 0;                                                                           \
        for (; i + 8 <= n; i += 8) {                                                             \
            float32x4_t a0 = load(a + 2 * i), a1 = load(a + 2 * i + 8);                          \
            KERNEL_UNROLLED for (int r = 0; r < R; r++) {                                        \
                const uint8_t *x = rows + (size_t)r * row_bytes + 2 * i;                         \
                __builtin_prefetch(x + 256);                                                     \
                acc0[r] = vfmaq_f32(acc0[r], load(x), a0);                                       \
                acc1[r] = vfmaq_f32(acc1[r], load(x + 8), a1);                                   \
            }                                                                                    \
        }                                                                                        \
        if (i < n) {                                                                             \
            uint16_t a_tail[8] = {0};                                                            \
            memcpy(a_tail, a + 2 * i, (size_t)(n - i) * 2);                                      \
            float32x4_t a0 = load((const uint8_t *)a_tail), a1 = load((const uint8_t *)(a_tail + 4)); \
            KERNEL_UNROLLED for (int r = 0; r < R; r++) {                                        \
                uint16_t x[8] = {0};                                                             \
                memcpy(x, rows + (size_t)r * row_bytes + 2 * i, (size_t)(n - i) * 2);            \
                acc0[r] = vfmaq_f32(acc0[r], load((const uint8_t *)x), a0);                      \
                acc1[r] = vfmaq_f32(acc1[r], load((const uint8_t *)(x + 4)), a1);                \
            }                                                                                    \
        }                                                                                        \
        KERNEL_UNROLLED for (int r = 0; r < R; r++)                                              \
            out[r] = vaddvq_f32(vaddq_f32(acc0[r], acc1[r]));                                    \
    }

HALF_GROUP(f16_group, neon_load_f16)
HALF_GROUP(bf16_group, neon_load_bf16)

/* F32: 8 elements per step into two accumulators per row; a tail shorter
 * than 8 is zero-padded and takes the same path. */
KERNEL_INLINE void f32_group(const int R, int64_t n, const uint8_t *rows, size_t row_bytes,
                             const void *activation, float *out)
{
    const float *a = activation;
    float32x4_t acc0[KERNEL_GROUP_ROWS], acc1[KERNEL_GROUP_ROWS];
    KERNEL_UNROLLED for (int r = 0; r < R; r++) {
        acc0[r] = vdupq_n_f32(0.0f);
        acc1[r] = vdupq_n_f32(0.0f);
    }
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        float32x4_t a0 = vld1q_f32(a + i), a1 = vld1q_f32(a + i + 4);
        KERNEL_UNROLLED for (int r = 0; r < R; r++) {
            const float *x = (const float *)(rows + (size_t)r * row_bytes) + i;
            __builtin_prefetch(x + 128);
            acc0[r] = vfmaq_f32(acc0[r], vld1q_f32(x), a0);
            acc1[r] = vfmaq_f32(acc1[r], vld1q_f32(x + 4), a1);
        }
    }
    if (i < n) {
        float a_tail[8] = {0};
        memcpy(a_tail, a + i, (size_t)(n - i) * sizeof(float));
        float32x4_t a0 = vld1q_f32(a_tail), a1 = vld1q_f32(a_tail + 4);
        KERNEL_UNROLLED for (int r = 0; r < R; r++) {
            float x[8] = {0};
            memcpy(x, (const float *)(rows + (size_t)r * row_bytes) + i, (size_t)(n - i) * sizeof(float));
            acc0[r] = vfmaq_f32(acc0[r], vld1q_f32(x), a0);
            acc1[r] = vfmaq_f32(acc1[r], vld1q_f32(x + 4), a1);
        }
    }
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        out[r] = vaddvq_f32(vaddq_f32(acc0[r], acc1[r]));
}

/* ---- axpy: y += a * x, one fused multiply-add per element -------------- */

KERNEL_INLINE float32x4_t neon_axpy_load_f32(const uint8_t *p)
{
    return vld1q_f32((const float *)p);
}

KERNEL_INLINE float32x4_t neon_axpy_load_f16(const uint8_t *p)
{
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)p)));
}

/* 16 elements of y in four registers over all rows, then 4 at a time, then
 * one at a time (fmaf: the same single rounding as the vector lanes). */
#define AXPY(name, load, size)                                                            \
    static void name(int64_t n, int64_t n_rows, const float *a, const void *x, size_t x_stride,  \
                     float *y)                                                                   \
    {                                                                                            \
        const uint8_t *rows = x;                                                                 \
        int64_t i = 0;                                                                           \
        for (; i + 16 <= n; i += 16) {                                                           \
            float32x4_t y0 = vld1q_f32(y + i), y1 = vld1q_f32(y + i + 4);                        \
            float32x4_t y2 = vld1q_f32(y + i + 8), y3 = vld1q_f32(y + i + 12);                   \
            const uint8_t *row = rows + (size) * i;                                              \
            for (int64_t r = 0; r < n_rows; r++, row += x_stride) {                              \
                y0 = vfmaq_n_f32(y0, load(row), a[r]);                                           \
                y1 = vfmaq_n_f32(y1, load(row + (size) * 4), a[r]);                              \
                y2 = vfmaq_n_f32(y2, load(row + (size) * 8), a[r]);                              \
                y3 = vfmaq_n_f32(y3, load(row + (size) * 12), a[r]);                             \
            }                                                                                    \
            vst1q_f32(y + i, y0);                                                                \
            vst1q_f32(y + i + 4, y1);                                                            \
            vst1q_f32(y + i + 8, y2);                                                            \
            vst1q_f32(y + i + 12, y3);                                                           \
        }                                                                                        \
        for (; i + 4 <= n; i += 4) {                                                             \
            float32x4_t sum = vld1q_f32(y + i);                                                  \
            const uint8_t *row = rows + (size) * i;                                              \
            for (int64_t r = 0; r < n_rows; r++, row += x_stride)                                \
                sum = vfmaq_n_f32(sum, load(row), a[r]);                                         \
            vst1q_f32(y + i, sum);                                                               \
        }                                                                                        \
        kernel_axpy_tail(i, n, n_rows, a, rows, x_stride, (size), y);                            \
    }

AXPY(neon_axpy_f32, neon_axpy_load_f32, 4)
AXPY(neon_axpy_f16, neon_axpy_load_f16, 2)

KERNEL_DEFINE_DOT_ROWS(neon_dot_rows_q8_0, q8_0_group)
KERNEL_DEFINE_DOT_ROWS(neon_dot_rows_q4_0, q4_0_group)
KERNEL_DEFINE_DOT_ROWS(neon_dot_rows_iq4_nl, iq4_nl_group)
KERNEL_DEFINE_DOT_ROWS(neon_dot_rows_mxfp4, mxfp4_group)
KERNEL_DEFINE_DOT_ROWS(neon_dot_rows_q4_k, q4_k_group)
KERNEL_DEFINE_DOT_ROWS(neon_dot_rows_q5_k, q5_k_group)
KERNEL_DEFINE_DOT_ROWS(neon_dot_rows_q6_k, q6_k_group)
KERNEL_DEFINE_DOT_ROWS(neon_dot_rows_f16, f16_group)
KERNEL_DEFINE_DOT_ROWS(neon_dot_rows_bf16, bf16_group)
KERNEL_DEFINE_DOT_ROWS(neon_dot_rows_f32, f32_group)

/* Tiles: one row at a time against four tokens, the tokens outer (an
 * unpacked K-quant block takes 16 of the 32 vector registers). */
KERNEL_DEFINE_DOT_TILE_TOKENS_OUTER(neon_dot_tile_q4_k, q4_k_group_tile, 1, 4)
KERNEL_DEFINE_DOT_TILE_TOKENS_OUTER(neon_dot_tile_q5_k, q5_k_group_tile, 1, 4)
KERNEL_DEFINE_DOT_TILE_TOKENS_OUTER(neon_dot_tile_q6_k, q6_k_tile, 1, 4)

KERNEL_DEFINE_DOT_DECODE(neon_dot_decode_q8_0, small_decode_state, q8_0_decode_init, q8_0_decode_row)
KERNEL_DEFINE_DOT_DECODE(neon_dot_decode_q4_0, small_decode_state, q4_0_decode_init, q4_0_decode_row)
KERNEL_DEFINE_DOT_DECODE(neon_dot_decode_iq4_nl, small_decode_state, iq4_nl_decode_init, iq4_nl_decode_row)
KERNEL_DEFINE_DOT_DECODE(neon_dot_decode_mxfp4, small_decode_state, mxfp4_decode_init, mxfp4_decode_row)
KERNEL_DEFINE_DOT_DECODE(neon_dot_decode_q4_k, k4_decode_state, k4_decode_init, q4_k_group_decode_row)
KERNEL_DEFINE_DOT_DECODE(neon_dot_decode_q5_k, k4_decode_state, k4_decode_init, q5_k_group_decode_row)
/* Q6_K: its rows share only plain loads of the activation values and three
 * constants set by immediate moves: nothing worth preparing. */
KERNEL_DEFINE_DOT_DECODE_GROUP(neon_dot_decode_q6_k, q6_k_group)
KERNEL_DEFINE_DOT_DECODE_GROUP(neon_dot_decode_f16, f16_group)
KERNEL_DEFINE_DOT_DECODE_GROUP(neon_dot_decode_bf16, bf16_group)
KERNEL_DEFINE_DOT_DECODE_GROUP(neon_dot_decode_f32, f32_group)

static const kernel_set neon_set = {
    .name = "neon",
    .dot_rows = {
        [TYPE_Q8_0] = neon_dot_rows_q8_0,
        [TYPE_Q4_0] = neon_dot_rows_q4_0,
        [TYPE_IQ4_NL] = neon_dot_rows_iq4_nl,
        [TYPE_MXFP4] = neon_dot_rows_mxfp4,
        [TYPE_Q4_K] = neon_dot_rows_q4_k,
        [TYPE_Q5_K] = neon_dot_rows_q5_k,
        [TYPE_Q6_K] = neon_dot_rows_q6_k,
        [TYPE_F16] = neon_dot_rows_f16,
        [TYPE_BF16] = neon_dot_rows_bf16,
        [TYPE_F32] = neon_dot_rows_f32,
        KERNELS_IQ_ROWS(neon),
        KERNELS_TERNARY_ROWS(neon),
    },
    .dot_decode = {
        [TYPE_Q8_0] = neon_dot_decode_q8_0,
        [TYPE_Q4_0] = neon_dot_decode_q4_0,
        [TYPE_IQ4_NL] = neon_dot_decode_iq4_nl,
        [TYPE_MXFP4] = neon_dot_decode_mxfp4,
        [TYPE_Q4_K] = neon_dot_decode_q4_k,
        [TYPE_Q5_K] = neon_dot_decode_q5_k,
        [TYPE_Q6_K] = neon_dot_decode_q6_k,
        [TYPE_F16] = neon_dot_decode_f16,
        [TYPE_BF16] = neon_dot_decode_bf16,
        [TYPE_F32] = neon_dot_decode_f32,
        KERNELS_IQ_DECODE(neon),
        KERNELS_TERNARY_DECODE(neon),
    },
    .dot_tile = {
        [TYPE_Q4_K] = neon_dot_tile_q4_k,
        [TYPE_Q5_K] = neon_dot_tile_q5_k,
        [TYPE_Q6_K] = neon_dot_tile_q6_k,
    },
    .axpy = {
        [TYPE_F32] = neon_axpy_f32,
        [TYPE_F16] = neon_axpy_f16,
    },
    .quantize_row = {
        [TYPE_Q8_K] = neon_quantize_row_q8_k,
        [TYPE_Q8_0] = neon_quantize_row_q8_0,
        [TYPE_F16] = neon_quantize_row_f16,
    },
    .attend = {
        [TYPE_F32] = neon_attend_f32,
        [TYPE_F16] = neon_attend_f16,
    },
    .exponential = neon_exponential,
    .silu_glu = neon_silu_glu,
    .swiglu_oai = neon_swiglu_oai,
    .softmax = neon_softmax,
    .rmsnorm = neon_rmsnorm,
};

const kernel_set *kernels_neon(void)
{
    return &neon_set;
}
