/* Float formats F32, F16 and BF16 (spec section 2): conversion to and from f32
 * and the dot products the reference engine uses for them (f16 x f16 and
 * bf16 x bf16 products, each exact in f32, summed in f32 in index order). */
#include "quant_blocks.h"

void dequantize_row_f32(const void *src, float *dst, int64_t n)
{
    memcpy(dst, src, (size_t)n * sizeof(float));
}

void quantize_row_f32(const float *src, void *dst, int64_t n)
{
    memcpy(dst, src, (size_t)n * sizeof(float));
}

float vec_dot_f32(int64_t n, const void *weights, const void *activations)
{
    const float *w = weights, *a = activations;
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++)
        sum += w[i] * a[i];
    return sum;
}

void dequantize_row_f16(const void *src, float *dst, int64_t n)
{
    const uint16_t *h = src;
    for (int64_t i = 0; i < n; i++)
        dst[i] = fp16_to_fp32(h[i]);
}

void quantize_row_f16(const float *src, void *dst, int64_t n)
{
    uint16_t *h = dst;
    for (int64_t i = 0; i < n; i++)
        h[i] = fp32_to_fp16(src[i]);
}

float vec_dot_f16(int64_t n, const void *weights, const void *activations)
{
    const uint16_t *w = weights, *a = activations;
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++)
        sum += fp16_to_fp32(w[i]) * fp16_to_fp32(a[i]);
    return sum;
}

void dequantize_row_bf16(const void *src, float *dst, int64_t n)
{
    const uint16_t *b = src;
    for (int64_t i = 0; i < n; i++)
        dst[i] = bf16_to_fp32(b[i]);
}

void quantize_row_bf16(const float *src, void *dst, int64_t n)
{
    uint16_t *b = dst;
    for (int64_t i = 0; i < n; i++)
        b[i] = fp32_to_bf16(src[i]);
}

float vec_dot_bf16(int64_t n, const void *weights, const void *activations)
{
    const uint16_t *w = weights, *a = activations;
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++)
        sum += bf16_to_fp32(w[i]) * bf16_to_fp32(a[i]);
    return sum;
}
