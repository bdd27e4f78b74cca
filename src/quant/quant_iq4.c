/* The non-linear 4-bit formats IQ4_NL (32-element blocks, spec 3.6) and
 * IQ4_XS (256-element super-blocks with 6-bit sub-block scales, spec 4.7):
 * dequantization and dot products against Q8_0 resp. Q8_K activations, and
 * the IQ4_NL weight quantizer. */
#include "quant_blocks.h"

const int8_t quant_iq4nl_values[16] = {
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
};

/* ---- IQ4_NL ---- */

void dequantize_row_iq4_nl(const void *src, float *dst, int64_t n)
{
    const block_iq4_nl *blocks = src;
    int8_t q[32];
    for (int64_t b = 0; b < n / 32; b++) {
        float d = fp16_to_fp32(blocks[b].d);
        quant_unpack_grid(quant_iq4nl_values, blocks[b].qs, q);
        for (int j = 0; j < 32; j++)
            dst[32 * b + j] = d * q[j];
    }
}

float vec_dot_iq4_nl(int64_t n, const void *weights, const void *activations)
{
    const block_iq4_nl *w = weights;
    const block_q8_0 *a = activations;
    int8_t q[32];
    float sum = 0.0f;
    for (int64_t b = 0; b < n / 32; b++) {
        quant_unpack_grid(quant_iq4nl_values, w[b].qs, q);
        int isum = quant_dot_i8(q, a[b].qs, 32);
        sum += (fp16_to_fp32(w[b].d) * fp16_to_fp32(a[b].d)) * (float)isum;
    }
    return sum;
}

/* ---- IQ4_XS ---- */

/* The signed scale (-32..31) of sub-block b. */
static int iq4xs_scale(const block_iq4_xs *block, int b)
{
    int low = (block->scales_l[b / 2] >> (4 * (b % 2))) & 0x0f;
    int high = (block->scales_h >> (2 * b)) & 3;
    return (low | (high << 4)) - 32;
}

void dequantize_row_iq4_xs(const void *src, float *dst, int64_t n)
{
    const block_iq4_xs *blocks = src;
    int8_t q[32];
    for (int64_t b = 0; b < n / QK_K; b++) {
        float d = fp16_to_fp32(blocks[b].d);
        for (int sub = 0; sub < 8; sub++) {
            float scale = d * (float)iq4xs_scale(&blocks[b], sub);
            quant_unpack_grid(quant_iq4nl_values, blocks[b].qs + 16 * sub, q);
            for (int j = 0; j < 32; j++)
                dst[QK_K * b + 32 * sub + j] = scale * q[j];
        }
    }
}

float vec_dot_iq4_xs(int64_t n, const void *weights, const void *activations)
{
    const block_iq4_xs *w = weights;
    const block_q8_k *a = activations;
    int8_t q[32];
    float sum = 0.0f;
    for (int64_t b = 0; b < n / QK_K; b++) {
        int isum = 0;
        for (int sub = 0; sub < 8; sub++) {
            quant_unpack_grid(quant_iq4nl_values, w[b].qs + 16 * sub, q);
            isum += iq4xs_scale(&w[b], sub) * quant_dot_i8(q, a[b].qs + 32 * sub, 32);
        }
        sum += (fp16_to_fp32(w[b].d) * a[b].d) * (float)isum;
    }
    return sum;
}

/* Weight quantizer: searched scale on the (ascending) IQ4_NL grid, stored as
 * f16, then every code re-chosen against the stored scale. */
void quantize_row_iq4_nl(const float *src, void *dst, int64_t n)
{
    block_iq4_nl *blocks = dst;
    uint8_t codes[32];
    for (int64_t b = 0; b < n / 32; b++) {
        const float *x = src + 32 * b;
        float scale = quant_search_grid(x, 32, quant_iq4nl_values, codes);
        blocks[b].d = fp32_to_fp16(scale);
        float d = fp16_to_fp32(blocks[b].d);
        if (d != 0.0f)
            for (int j = 0; j < 32; j++)
                codes[j] = (uint8_t)quant_nearest_grid(quant_iq4nl_values, x[j] / d);
        for (int j = 0; j < 16; j++)
            blocks[b].qs[j] = (uint8_t)(codes[j] | (codes[j + 16] << 4));
    }
}
