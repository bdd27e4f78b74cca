/* Block layouts of the quantized formats (quant-formats.md sections 3-5), the
 * lookup tables and scale unpacking they share, and the per-format scalar
 * functions that quant_table.c puts into rows. Private to src/quant and to the
 * SIMD kernels in src/kernels, which read the same blocks. Every struct is
 * byte-exact with the file format (checked by static asserts below); blocks
 * inside a row are only as aligned as their size allows (2 bytes for most). */
#ifndef BMOE_QUANT_QUANT_BLOCKS_H
#define BMOE_QUANT_QUANT_BLOCKS_H

#include <stdint.h>
#include <string.h>

#include "base/fp16.h"
#include "quant.h"

#define QK4_0 32
#define QK8_0 32

typedef struct block_q4_0 { uint16_t d; uint8_t qs[16]; } block_q4_0;
typedef struct block_q4_1 { uint16_t d, m; uint8_t qs[16]; } block_q4_1;
typedef struct block_q5_0 { uint16_t d; uint8_t qh[4]; uint8_t qs[16]; } block_q5_0;
typedef struct block_q5_1 { uint16_t d, m; uint8_t qh[4]; uint8_t qs[16]; } block_q5_1;
typedef struct block_q8_0 { uint16_t d; int8_t qs[32]; } block_q8_0;
typedef struct block_q8_1 { uint16_t d, s; int8_t qs[32]; } block_q8_1;
typedef struct block_iq4_nl { uint16_t d; uint8_t qs[16]; } block_iq4_nl;
typedef struct block_mxfp4 { uint8_t e; uint8_t qs[16]; } block_mxfp4;

typedef struct block_q2_k {
    uint8_t scales[16]; /* low nibble scale, high nibble min */
    uint8_t qs[64];
    uint16_t d, dmin;
} block_q2_k;

typedef struct block_q3_k {
    uint8_t hmask[32];
    uint8_t qs[64];
    uint8_t scales[12];
    uint16_t d;
} block_q3_k;

typedef struct block_q4_k {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qs[128];
} block_q4_k;

typedef struct block_q5_k {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qh[32];
    uint8_t qs[128];
} block_q5_k;

typedef struct block_q6_k {
    uint8_t ql[128];
    uint8_t qh[64];
    int8_t scales[16];
    uint16_t d;
} block_q6_k;

typedef struct block_iq4_xs {
    uint16_t d;
    uint16_t scales_h;
    uint8_t scales_l[4];
    uint8_t qs[128];
} block_iq4_xs;

/* The grid-based i-quants (256-element super-blocks of 8 sub-blocks of 32).
 * Their grids are in quant_iq_grids.c; "signs" are 8 sign bits, one per
 * value of a group of 8 (set: negative), or 7 of them with the eighth
 * implied by even parity (quant_iq_sign_bytes). */
typedef struct block_iq2_xxs {
    uint16_t d;
    uint16_t qs[32]; /* per sub-block 4 words: 4 grid indices (bytes), then 4 x 7 sign bits and a 4-bit scale */
} block_iq2_xxs;

typedef struct block_iq2_xs {
    uint16_t d;
    uint16_t qs[32];   /* per group of 8: 9-bit grid index, 7 sign bits above it */
    uint8_t scales[8]; /* per sub-block: 4-bit scale of its first 16 values, then of its last 16 */
} block_iq2_xs;

typedef struct block_iq2_s {
    uint16_t d;
    uint8_t qs[32];    /* low 8 bits of each group's 10-bit grid index */
    uint8_t signs[32]; /* one sign byte per group */
    uint8_t qh[8];     /* per sub-block: bits 8-9 of its 4 indices, 2 bits each */
    uint8_t scales[8]; /* as IQ2_XS */
} block_iq2_s;

typedef struct block_iq3_xxs {
    uint16_t d;
    uint8_t qs[64];          /* one grid index per group of 4 */
    uint8_t signs_scale[32]; /* per sub-block a 32-bit word: 4 x 7 sign bits, a 4-bit scale */
} block_iq3_xxs;

typedef struct block_iq3_s {
    uint16_t d;
    uint8_t qs[64];    /* low 8 bits of each group-of-4's 9-bit grid index */
    uint8_t qh[8];     /* per sub-block: bit 8 of its 8 indices */
    uint8_t signs[32]; /* one sign byte per 8 values */
    uint8_t scales[4]; /* 4-bit scales, two sub-blocks a byte (low nibble first) */
} block_iq3_s;

typedef struct block_iq1_s {
    uint16_t d;
    uint8_t qs[32]; /* low 8 bits of each group's 11-bit grid index */
    uint16_t qh[8]; /* per sub-block: 4 x 3 index bits, a 3-bit scale, the delta's sign (bit 15) */
} block_iq1_s;

typedef struct block_iq1_m {
    uint8_t qs[32];    /* low 8 bits of each group's 11-bit grid index */
    uint8_t qh[16];    /* per pair of groups: 3 index bits and the delta's sign, per group a nibble */
    uint8_t scales[8]; /* four 16-bit words: 3-bit scales of each 16 values, and the f16 scale in their top nibbles */
} block_iq1_m;

/* The ternary formats (values -1, 0, 1 times d; quant_ternary.c). */
typedef struct block_tq1_0 {
    uint8_t qs[48]; /* five values a byte, base 3 */
    uint8_t qh[4];  /* four values a byte, base 3 */
    uint16_t d;
} block_tq1_0;

typedef struct block_tq2_0 {
    uint8_t qs[64]; /* four 2-bit codes a byte (value: code - 1) */
    uint16_t d;
} block_tq2_0;

typedef struct block_q8_k {
    float d;
    int8_t qs[256];
    int16_t bsums[16]; /* sum of each group of 16 quants */
} block_q8_k;

_Static_assert(sizeof(block_q4_0) == 18, "Q4_0 block");
_Static_assert(sizeof(block_q4_1) == 20, "Q4_1 block");
_Static_assert(sizeof(block_q5_0) == 22, "Q5_0 block");
_Static_assert(sizeof(block_q5_1) == 24, "Q5_1 block");
_Static_assert(sizeof(block_q8_0) == 34, "Q8_0 block");
_Static_assert(sizeof(block_q8_1) == 36, "Q8_1 block");
_Static_assert(sizeof(block_iq4_nl) == 18, "IQ4_NL block");
_Static_assert(sizeof(block_mxfp4) == 17, "MXFP4 block");
_Static_assert(sizeof(block_q2_k) == 84, "Q2_K block");
_Static_assert(sizeof(block_q3_k) == 110, "Q3_K block");
_Static_assert(sizeof(block_q4_k) == 144, "Q4_K block");
_Static_assert(sizeof(block_q5_k) == 176, "Q5_K block");
_Static_assert(sizeof(block_q6_k) == 210, "Q6_K block");
_Static_assert(sizeof(block_iq4_xs) == 136, "IQ4_XS block");
_Static_assert(sizeof(block_q8_k) == 292, "Q8_K block");
_Static_assert(sizeof(block_iq2_xxs) == 66, "IQ2_XXS block");
_Static_assert(sizeof(block_iq2_xs) == 74, "IQ2_XS block");
_Static_assert(sizeof(block_iq2_s) == 82, "IQ2_S block");
_Static_assert(sizeof(block_iq3_xxs) == 98, "IQ3_XXS block");
_Static_assert(sizeof(block_iq3_s) == 110, "IQ3_S block");
_Static_assert(sizeof(block_iq1_s) == 50, "IQ1_S block");
_Static_assert(sizeof(block_iq1_m) == 56, "IQ1_M block");
_Static_assert(sizeof(block_tq1_0) == 54, "TQ1_0 block");
_Static_assert(sizeof(block_tq2_0) == 66, "TQ2_0 block");

/* Non-linear 4-bit grid of IQ4_NL and IQ4_XS (spec 3.6). */
extern const int8_t quant_iq4nl_values[16];
/* E2M1 values times two, so that they are integers (spec 3.7). */
extern const int8_t quant_mxfp4_values[16];
/* Grids of the i-quants (quant_iq_grids.c): each point's values one per
 * byte, value j in byte j; IQ1's as int8 (-1, 0, 1), the others unsigned. */
extern const uint64_t quant_iq2xxs_grid[256];
extern const uint64_t quant_iq2xs_grid[512];
extern const uint64_t quant_iq2s_grid[1024];
extern const uint32_t quant_iq3xxs_grid[256];
extern const uint32_t quant_iq3s_grid[512];
extern const uint64_t quant_iq1s_grid[2048];
/* The sign byte of 7 stored sign bits: the formats that store 7 keep an
 * even number of negative values in every group of 8, so bit 7 is their
 * parity. */
extern const uint8_t quant_iq_sign_bytes[128];
/* The magnitude of the delta IQ1_S and IQ1_M add to every grid value of a
 * group (its sign is stored per sub-block resp. per group). */
#define QUANT_IQ1_DELTA 0.125f
/* QUANT_E8M0_HALF_BITS(e) for every e: one load for the SIMD kernels, where
 * the compare, shifts and select would cost several instructions per block. */
extern const uint32_t quant_e8m0_half_bits[256];

/* Integer dot of count weight quants with count activation quants. */
static inline int quant_dot_i8(const int8_t *w, const int8_t *a, int count)
{
    int sum = 0;
    for (int j = 0; j < count; j++)
        sum += w[j] * a[j];
    return sum;
}

/* The 32 grid values named by the nibbles of a 16-byte array, element j from
 * the low nibble of byte j and element j + 16 from its high nibble. */
static inline void quant_unpack_grid(const int8_t grid[16], const uint8_t *qs, int8_t out[32])
{
    for (int j = 0; j < 16; j++) {
        out[j] = grid[qs[j] & 0x0f];
        out[j + 16] = grid[qs[j] >> 4];
    }
}

/* Scale and min of sub-block j (0..7) from the 12-byte packing of Q4_K and
 * Q5_K (spec 4.1). */
static inline void quant_k4_scale_min(int j, const uint8_t *scales, uint8_t *scale, uint8_t *min)
{
    if (j < 4) {
        *scale = scales[j] & 63;
        *min = scales[j + 4] & 63;
    } else {
        *scale = (uint8_t)((scales[j + 4] & 0x0f) | ((scales[j - 4] >> 6) << 4));
        *min = (uint8_t)((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
    }
}

/* The sixteen signed 6-bit scales of Q3_K (spec 4.3), each in -32..31. */
static inline void quant_q3k_scales(const uint8_t *packed, int8_t scales[16])
{
    for (int j = 0; j < 16; j++) {
        int low = j < 8 ? (packed[j] & 0x0f) : (packed[j - 8] >> 4);
        int high = (packed[8 + (j % 4)] >> (2 * (j / 4))) & 3;
        scales[j] = (int8_t)((low | (high << 4)) - 32);
    }
}

/* The bits of 2^(e-128) exactly (e in 0..255): half the E8M0 scale, matching
 * the doubled E2M1 table. A constant expression, so it also builds the table
 * quant_e8m0_half_bits. */
#define QUANT_E8M0_HALF_BITS(e) ((e) == 0 ? 0x00200000u : (e) == 1 ? 0x00400000u : (uint32_t)((e) - 1) << 23)

static inline float quant_e8m0_half(uint8_t e)
{
    return fp32_from_bits(QUANT_E8M0_HALF_BITS(e));
}

/* Quantizer searches shared by the weight quantizers (quant_search.c). All
 * take unweighted squared error as the objective. */

/* x[i] rounded to the nearest integer, clamped to [low, high]; NaN gives low. */
int quant_round_clamp(float x, int low, int high);

/* The scale s minimizing Σ (x_i − s·q_i)² over q_i in [qmin, qmax] (qmin < 0
 * < qmax), searched around the scales that map the largest-magnitude value to
 * either end, each refined by least squares. Fills q with the quants for s;
 * returns 0 with all q 0 when x is all zero. */
float quant_search_symmetric(const float *x, int n, int qmin, int qmax, int8_t *q);

/* The scale a >= 0 and offset b >= 0 minimizing Σ (x_i − (a·q_i − b))² over
 * q_i in [0, qmax], searched around the min-max fit and refined by least
 * squares. b is 0 when every x is non-negative. */
void quant_search_affine(const float *x, int n, int qmax, float *scale, float *offset);

/* For a non-uniform grid of 16 integer levels (sorted ascending): the scale s
 * minimizing Σ (x_i − s·grid[code_i])², codes filled. Returns 0 for zero x. */
float quant_search_grid(const float *x, int n, const int8_t *sorted_grid, uint8_t *codes);

/* Index into sorted_grid (16 levels) of the level nearest to value. */
int quant_nearest_grid(const int8_t *sorted_grid, float value);

/* Per-format scalar functions, one family per file. */
void dequantize_row_f32(const void *src, float *dst, int64_t n);
void quantize_row_f32(const float *src, void *dst, int64_t n);
float vec_dot_f32(int64_t n, const void *weights, const void *activations);
void dequantize_row_f16(const void *src, float *dst, int64_t n);
void quantize_row_f16(const float *src, void *dst, int64_t n);
float vec_dot_f16(int64_t n, const void *weights, const void *activations);
void dequantize_row_bf16(const void *src, float *dst, int64_t n);
void quantize_row_bf16(const float *src, void *dst, int64_t n);
float vec_dot_bf16(int64_t n, const void *weights, const void *activations);

void dequantize_row_q4_0(const void *src, float *dst, int64_t n);
void quantize_row_q4_0(const float *src, void *dst, int64_t n);
float vec_dot_q4_0(int64_t n, const void *weights, const void *activations);
void dequantize_row_q4_1(const void *src, float *dst, int64_t n);
float vec_dot_q4_1(int64_t n, const void *weights, const void *activations);
void dequantize_row_q5_0(const void *src, float *dst, int64_t n);
float vec_dot_q5_0(int64_t n, const void *weights, const void *activations);
void dequantize_row_q5_1(const void *src, float *dst, int64_t n);
float vec_dot_q5_1(int64_t n, const void *weights, const void *activations);
void dequantize_row_q8_0(const void *src, float *dst, int64_t n);
void quantize_row_q8_0(const float *src, void *dst, int64_t n);
float vec_dot_q8_0(int64_t n, const void *weights, const void *activations);
void dequantize_row_q8_1(const void *src, float *dst, int64_t n);
void quantize_row_q8_1(const float *src, void *dst, int64_t n);

void dequantize_row_q2_k(const void *src, float *dst, int64_t n);
float vec_dot_q2_k(int64_t n, const void *weights, const void *activations);
void dequantize_row_q3_k(const void *src, float *dst, int64_t n);
float vec_dot_q3_k(int64_t n, const void *weights, const void *activations);
void dequantize_row_q4_k(const void *src, float *dst, int64_t n);
void quantize_row_q4_k(const float *src, void *dst, int64_t n);
float vec_dot_q4_k(int64_t n, const void *weights, const void *activations);
void dequantize_row_q5_k(const void *src, float *dst, int64_t n);
void quantize_row_q5_k(const float *src, void *dst, int64_t n);
float vec_dot_q5_k(int64_t n, const void *weights, const void *activations);
void dequantize_row_q6_k(const void *src, float *dst, int64_t n);
void quantize_row_q6_k(const float *src, void *dst, int64_t n);
float vec_dot_q6_k(int64_t n, const void *weights, const void *activations);
void dequantize_row_q8_k(const void *src, float *dst, int64_t n);
void quantize_row_q8_k(const float *src, void *dst, int64_t n);

void dequantize_row_iq4_nl(const void *src, float *dst, int64_t n);
void quantize_row_iq4_nl(const float *src, void *dst, int64_t n);
float vec_dot_iq4_nl(int64_t n, const void *weights, const void *activations);
void dequantize_row_iq4_xs(const void *src, float *dst, int64_t n);
float vec_dot_iq4_xs(int64_t n, const void *weights, const void *activations);

void dequantize_row_iq2_xxs(const void *src, float *dst, int64_t n);
float vec_dot_iq2_xxs(int64_t n, const void *weights, const void *activations);
void dequantize_row_iq2_xs(const void *src, float *dst, int64_t n);
float vec_dot_iq2_xs(int64_t n, const void *weights, const void *activations);
void dequantize_row_iq2_s(const void *src, float *dst, int64_t n);
float vec_dot_iq2_s(int64_t n, const void *weights, const void *activations);
void dequantize_row_iq3_xxs(const void *src, float *dst, int64_t n);
float vec_dot_iq3_xxs(int64_t n, const void *weights, const void *activations);
void dequantize_row_iq3_s(const void *src, float *dst, int64_t n);
float vec_dot_iq3_s(int64_t n, const void *weights, const void *activations);
void dequantize_row_iq1_s(const void *src, float *dst, int64_t n);
float vec_dot_iq1_s(int64_t n, const void *weights, const void *activations);
void dequantize_row_iq1_m(const void *src, float *dst, int64_t n);
float vec_dot_iq1_m(int64_t n, const void *weights, const void *activations);

void dequantize_row_tq1_0(const void *src, float *dst, int64_t n);
float vec_dot_tq1_0(int64_t n, const void *weights, const void *activations);
void dequantize_row_tq2_0(const void *src, float *dst, int64_t n);
float vec_dot_tq2_0(int64_t n, const void *weights, const void *activations);

void dequantize_row_mxfp4(const void *src, float *dst, int64_t n);
void quantize_row_mxfp4(const float *src, void *dst, int64_t n);
float vec_dot_mxfp4(int64_t n, const void *weights, const void *activations);

#endif
