/* MXFP4 (OCP microscaling FP4, spec 3.7): 32 E2M1 codes sharing one E8M0
 * exponent. Dequantization and the dot product against Q8_0 activations; the
 * code table is doubled so that the block dot is an integer sum. */
#include "quant_blocks.h"

const int8_t quant_mxfp4_values[16] = {
    0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12,
};

static void mxfp4_unpack(const uint8_t *qs, int8_t out[32])
{
    for (int j = 0; j < 16; j++) {
        out[j] = quant_mxfp4_values[qs[j] & 0x0f];
        out[j + 16] = quant_mxfp4_values[qs[j] >> 4];
    }
}

void dequantize_row_mxfp4(const void *src, float *dst, int64_t n)
{
    const block_mxfp4 *blocks = src;
    int8_t q[32];
    for (int64_t b = 0; b < n / 32; b++) {
        float d = quant_e8m0_half(blocks[b].e);
        mxfp4_unpack(blocks[b].qs, q);
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
        mxfp4_unpack(w[b].qs, q);
        int isum = 0;
        for (int j = 0; j < 32; j++)
            isum += q[j] * a[b].qs[j];
        sum += (fp16_to_fp32(a[b].d) * quant_e8m0_half(w[b].e)) * (float)isum;
    }
    return sum;
}
