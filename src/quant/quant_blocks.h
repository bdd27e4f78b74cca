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

/* Non-linear 4-bit grid of IQ4_NL and IQ4_XS (spec 3.6). */
extern const int8_t quant_iq4nl_values[16];
/* E2M1 values times two, so that they are integers (spec 3.7). */
extern const int8_t quant_mxfp4_values[16];
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

void dequantize_row_mxfp4(const void *src, float *dst, int64_t n);
void quantize_row_mxfp4(const float *src, void *dst, int64_t n);
float vec_dot_mxfp4(int64_t n, const void *weights, const void *activations);

#endif
