/* MXFP4 (OCP microscaling FP4, spec 3.7): 32 E2M1 codes sharing one E8M0
 * exponent. Dequantization, the dot product against Q8_0 activations (the
 * code table is doubled so that the block dot is an integer sum), and the
 * weight quantizer. */
#include "quant_blocks.h"

#include <float.h>
#include <math.h>

const int8_t quant_mxfp4_values[16] = {
    0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12,
};

#define E8M0_1(e) QUANT_E8M0_HALF_BITS(e)
#define E8M0_4(e) E8M0_1(e), E8M0_1((e) + 1), E8M0_1((e) + 2), E8M0_1((e) + 3)
#define E8M0_16(e) E8M0_4(e), E8M0_4((e) + 4), E8M0_4((e) + 8), E8M0_4((e) + 12)
#define E8M0_64(e) E8M0_16(e), E8M0_16((e) + 16), E8M0_16((e) + 32), E8M0_16((e) + 48)
const uint32_t quant_e8m0_half_bits[256] = {E8M0_64(0), E8M0_64(64), E8M0_64(128), E8M0_64(192)};
#undef E8M0_64
#undef E8M0_16
#undef E8M0_4
#undef E8M0_1

void dequantize_row_mxfp4(const void *src, float *dst, int64_t n)
{
    const block_mxfp4 *blocks = src;
    int8_t q[32];
    for (int64_t b = 0; b < n / 32; b++) {
        float d = quant_e8m0_half(blocks[b].e);
        quant_unpack_grid(quant_mxfp4_values, blocks[b].qs, q);
        for (int j = 0; j < 32; j++)
            dst[32 * b + j] = q[j] * d;
    }
}

float vec_dot_mxfp4(int64_t n, const void *weights, const void *activations)
{
    const block_mxfp4 *w = weights;
    const block_q8_0 *a = activations;
    int8_t q[32];
    float sum = 0.0f;
    for (int64_t b = 0; b < n / 32; b++) {
        quant_unpack_grid(quant_mxfp4_values, w[b].qs, q);
        int isum = quant_dot_i8(q, a[b].qs, 32);
        sum += (fp16_to_fp32(a[b].d) * quant_e8m0_half(w[b].e)) * (float)isum;
    }
    return sum;
}

/* The doubled E2M1 levels in ascending order and the code of each (both
 * zeros use code 0). */
static const int8_t mxfp4_sorted_values[16] = {-12, -8, -6, -4, -3, -2, -1, 0,
                                               0,   1,  2,  3,  4,  6,  8,  12};
static const uint8_t mxfp4_sorted_codes[16] = {15, 14, 13, 12, 11, 10, 9, 0, 0, 1, 2, 3, 4, 5, 6, 7};

/* Nearest code for each value at scale d, and the squared error. */
static double mxfp4_codes(const float *x, float d, uint8_t *codes)
{
    double error = 0;
    for (int j = 0; j < 32; j++) {
        int index = quant_nearest_grid(mxfp4_sorted_values, x[j] / d);
        codes[j] = mxfp4_sorted_codes[index];
        double diff = (double)x[j] - (double)d * mxfp4_sorted_values[index];
        error += diff * diff;
    }
    return error;
}

/* Weight quantizer. The scale can only be a power of two, so the search is
 * over the few exponents that put the largest value near the top level
 * (12, i.e. E2M1 6.0): one below may clip it but serve the rest better. */
void quantize_row_mxfp4(const float *src, void *dst, int64_t n)
{
    block_mxfp4 *blocks = dst;
    uint8_t codes[32], best_codes[32];
    for (int64_t b = 0; b < n / 32; b++) {
        const float *x = src + 32 * b;
        float amax = 0.0f;
        for (int j = 0; j < 32; j++)
            amax = fmaxf(amax, fabsf(x[j]));
        int best_e = 0;
        memset(best_codes, 0, sizeof best_codes);
        if (amax > 0.0f && amax <= FLT_MAX) {
            int exponent;
            frexpf(amax / 12.0f, &exponent);
            double best_error = DBL_MAX;
            for (int e = 128 + exponent - 2; e <= 128 + exponent + 1; e++) {
                if (e < 0 || e > 255)
                    continue;
                double error = mxfp4_codes(x, quant_e8m0_half((uint8_t)e), codes);
                if (error < best_error) {
                    best_error = error;
                    best_e = e;
                    memcpy(best_codes, codes, sizeof codes);
                }
            }
        }
        blocks[b].e = (uint8_t)best_e;
        for (int j = 0; j < 16; j++)
            blocks[b].qs[j] = (uint8_t)(best_codes[j] | (best_codes[j + 16] << 4));
    }
}
