/* The 32-element block formats Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 (spec 3.1-3.5)
 * and the Q8_0/Q8_1 activation formats (spec 5.2): dequantization, the
 * activation quantizers, the block dot products against them, and the Q4_0
 * weight quantizer (Q8_0 weights use the activation quantizer). */
#include "quant_blocks.h"

#include <math.h>

/* The 32 nibbles of a 16-byte nibble array, element j in the low nibble of
 * byte j and element j + 16 in the high nibble (shared 32-element order). */
static void unpack_nibbles(const uint8_t *qs, int offset, int8_t out[32])
{
    for (int j = 0; j < 16; j++) {
        out[j] = (int8_t)((qs[j] & 0x0f) - offset);
        out[j + 16] = (int8_t)((qs[j] >> 4) - offset);
    }
}

/* Five-bit quants: nibbles plus bit i of the little-endian qh word. */
static void unpack_five_bits(const uint8_t *qs, const uint8_t *qh_bytes, int offset, int8_t out[32])
{
    uint32_t qh = (uint32_t)qh_bytes[0] | (uint32_t)qh_bytes[1] << 8 |
                  (uint32_t)qh_bytes[2] << 16 | (uint32_t)qh_bytes[3] << 24;
    for (int j = 0; j < 16; j++) {
        int high0 = (qh >> j) & 1;
        int high1 = (qh >> (j + 16)) & 1;
        out[j] = (int8_t)(((qs[j] & 0x0f) | (high0 << 4)) - offset);
        out[j + 16] = (int8_t)(((qs[j] >> 4) | (high1 << 4)) - offset);
    }
}

/* Q8_0 reference rounding: half away from zero. The clamp only matters for
 * non-finite input, where it keeps the int8 conversion defined. */
static int8_t round_to_int8(float value)
{
    float rounded = roundf(value);
    if (!(rounded >= -128.0f))
        return rounded != rounded ? 0 : -128;
    if (rounded > 127.0f)
        return 127;
    return (int8_t)rounded;
}

/* Fills qs with the spec 5.2 quants of 32 values; returns the unrounded d. */
static float quantize_block_8bit(const float *x, int8_t *qs)
{
    float amax = 0.0f;
    for (int j = 0; j < 32; j++) {
        float a = fabsf(x[j]);
        if (a > amax)
            amax = a;
    }
    float d = amax / 127.0f;
    float inverse = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < 32; j++)
        qs[j] = round_to_int8(x[j] * inverse);
    return d;
}

/* ---- Q8_0 ---- */

void dequantize_row_q8_0(const void *src, float *dst, int64_t n)
{
    const block_q8_0 *blocks = src;
    for (int64_t b = 0; b < n / 32; b++) {
        float d = fp16_to_fp32(blocks[b].d);
        for (int j = 0; j < 32; j++)
            dst[32 * b + j] = blocks[b].qs[j] * d;
    }
}

/* Also the weight quantizer: for 8 bits the max-abs scale is already within a
 * fraction of a step of the least-squares optimum. */
void quantize_row_q8_0(const float *src, void *dst, int64_t n)
{
    block_q8_0 *blocks = dst;
    for (int64_t b = 0; b < n / 32; b++) {
        float d = quantize_block_8bit(src + 32 * b, blocks[b].qs);
        blocks[b].d = fp32_to_fp16(d);
    }
}

float vec_dot_q8_0(int64_t n, const void *weights, const void *activations)
{
    const block_q8_0 *w = weights;
    const block_q8_0 *a = activations;
    float sum = 0.0f;
    for (int64_t b = 0; b < n / 32; b++) {
        int isum = quant_dot_i8(w[b].qs, a[b].qs, 32);
        sum += (float)isum * (fp16_to_fp32(w[b].d) * fp16_to_fp32(a[b].d));
    }
    return sum;
}

/* ---- Q8_1 (activations only) ---- */

void dequantize_row_q8_1(const void *src, float *dst, int64_t n)
{
    const block_q8_1 *blocks = src;
    for (int64_t b = 0; b < n / 32; b++) {
        float d = fp16_to_fp32(blocks[b].d);
        for (int j = 0; j < 32; j++)
            dst[32 * b + j] = blocks[b].qs[j] * d;
    }
}

void quantize_row_q8_1(const float *src, void *dst, int64_t n)
{
    block_q8_1 *blocks = dst;
    for (int64_t b = 0; b < n / 32; b++) {
        float d = quantize_block_8bit(src + 32 * b, blocks[b].qs);
        int sum = 0;
        for (int j = 0; j < 32; j++)
            sum += blocks[b].qs[j];
        blocks[b].d = fp32_to_fp16(d);
        blocks[b].s = fp32_to_fp16((float)sum * d);
    }
}

/* ---- Q4_0 ---- */

void dequantize_row_q4_0(const void *src, float *dst, int64_t n)
{
    const block_q4_0 *blocks = src;
    int8_t q[32];
    for (int64_t b = 0; b < n / 32; b++) {
        float d = fp16_to_fp32(blocks[b].d);
        unpack_nibbles(blocks[b].qs, 8, q);
        for (int j = 0; j < 32; j++)
            dst[32 * b + j] = q[j] * d;
    }
}

float vec_dot_q4_0(int64_t n, const void *weights, const void *activations)
{
    const block_q4_0 *w = weights;
    const block_q8_0 *a = activations;
    int8_t q[32];
    float sum = 0.0f;
    for (int64_t b = 0; b < n / 32; b++) {
        unpack_nibbles(w[b].qs, 8, q);
        int isum = quant_dot_i8(q, a[b].qs, 32);
        sum += (float)isum * (fp16_to_fp32(w[b].d) * fp16_to_fp32(a[b].d));
    }
    return sum;
}

/* ---- Q4_1 ---- */

void dequantize_row_q4_1(const void *src, float *dst, int64_t n)
{
    const block_q4_1 *blocks = src;
    int8_t q[32];
    for (int64_t b = 0; b < n / 32; b++) {
        float d = fp16_to_fp32(blocks[b].d);
        float m = fp16_to_fp32(blocks[b].m);
        unpack_nibbles(blocks[b].qs, 0, q);
        for (int j = 0; j < 32; j++)
            dst[32 * b + j] = q[j] * d + m;
    }
}

float vec_dot_q4_1(int64_t n, const void *weights, const void *activations)
{
    const block_q4_1 *w = weights;
    const block_q8_1 *a = activations;
    int8_t q[32];
    float sum = 0.0f;
    for (int64_t b = 0; b < n / 32; b++) {
        unpack_nibbles(w[b].qs, 0, q);
        int isum = quant_dot_i8(q, a[b].qs, 32);
        sum += (float)isum * (fp16_to_fp32(w[b].d) * fp16_to_fp32(a[b].d)) +
               fp16_to_fp32(w[b].m) * fp16_to_fp32(a[b].s);
    }
    return sum;
}

/* ---- Q5_0 ---- */

void dequantize_row_q5_0(const void *src, float *dst, int64_t n)
{
    const block_q5_0 *blocks = src;
    int8_t q[32];
    for (int64_t b = 0; b < n / 32; b++) {
        float d = fp16_to_fp32(blocks[b].d);
        unpack_five_bits(blocks[b].qs, blocks[b].qh, 16, q);
        for (int j = 0; j < 32; j++)
            dst[32 * b + j] = q[j] * d;
    }
}

float vec_dot_q5_0(int64_t n, const void *weights, const void *activations)
{
    const block_q5_0 *w = weights;
    const block_q8_0 *a = activations;
    int8_t q[32];
    float sum = 0.0f;
    for (int64_t b = 0; b < n / 32; b++) {
        unpack_five_bits(w[b].qs, w[b].qh, 16, q);
        int isum = quant_dot_i8(q, a[b].qs, 32);
        sum += (float)isum * (fp16_to_fp32(w[b].d) * fp16_to_fp32(a[b].d));
    }
    return sum;
}

/* ---- Q5_1 ---- */

void dequantize_row_q5_1(const void *src, float *dst, int64_t n)
{
    const block_q5_1 *blocks = src;
    int8_t q[32];
    for (int64_t b = 0; b < n / 32; b++) {
        float d = fp16_to_fp32(blocks[b].d);
        float m = fp16_to_fp32(blocks[b].m);
        unpack_five_bits(blocks[b].qs, blocks[b].qh, 0, q);
        for (int j = 0; j < 32; j++)
            dst[32 * b + j] = q[j] * d + m;
    }
}

float vec_dot_q5_1(int64_t n, const void *weights, const void *activations)
{
    const block_q5_1 *w = weights;
    const block_q8_1 *a = activations;
    int8_t q[32];
    float sum = 0.0f;
    for (int64_t b = 0; b < n / 32; b++) {
        unpack_five_bits(w[b].qs, w[b].qh, 0, q);
        int isum = quant_dot_i8(q, a[b].qs, 32);
        sum += (float)isum * (fp16_to_fp32(w[b].d) * fp16_to_fp32(a[b].d)) +
               fp16_to_fp32(w[b].m) * fp16_to_fp32(a[b].s);
    }
    return sum;
}

/* Weight quantizer: the searched least-squares scale, stored as f16, then
 * every value re-rounded against the stored scale. */
void quantize_row_q4_0(const float *src, void *dst, int64_t n)
{
    block_q4_0 *blocks = dst;
    int8_t q[32];
    for (int64_t b = 0; b < n / 32; b++) {
        const float *x = src + 32 * b;
        float scale = quant_search_symmetric(x, 32, -8, 7, q);
        blocks[b].d = fp32_to_fp16(scale);
        float d = fp16_to_fp32(blocks[b].d);
        for (int j = 0; j < 32; j++)
            q[j] = (int8_t)(d != 0.0f ? quant_round_clamp(x[j] / d, -8, 7) : 0);
        for (int j = 0; j < 16; j++)
            blocks[b].qs[j] = (uint8_t)((q[j] + 8) | ((q[j + 16] + 8) << 4));
    }
}
