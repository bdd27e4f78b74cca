/* Softmax, GLU activations and small vector helpers. Softmax and the GLUs
 * are the kernels' elementwise functions (kernels.h): every set computes the
 * scalar definition's bits, so the set kernels_best() picks changes the speed
 * and never the result. */
#include <math.h>

#include "../base/fp16.h"
#include "ops.h"

void softmax(float *x, int64_t n)
{
    kernels_softmax(kernels_best())(x, n);
}

void silu_glu(float *out, const float *gate, const float *up, int64_t n)
{
    kernels_silu_glu(kernels_best())(out, gate, up, n);
}

void swiglu_oai(float *out, const float *gate, const float *up, int64_t n, float alpha, float limit)
{
    kernels_swiglu_oai(kernels_best())(out, gate, up, n, alpha, limit);
}

void vector_add(float *y, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] += x[i];
}

void vector_add_scaled(float *y, const float *x, float a, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] += a * x[i];
}

void vector_scale(float *y, const float *x, float a, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = a * x[i];
}

void sigmoid(float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = 1.0f / (1.0f + expf(-x[i]));
}

float gelu_f16(float z)
{
    if (z <= -10.0f)
        return 0.0f;
    if (z >= 10.0f)
        return z;
    float x = fp16_to_fp32(fp32_to_fp16(z));
    float y = 0.5f * x * (1.0f + tanhf(0.7978845608f * x * (1.0f + 0.044715f * x * x)));
    return fp16_to_fp32(fp32_to_fp16(y));
}

void gelu_glu_f16(float *out, const float *gate, const float *up, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        out[i] = gelu_f16(gate[i]) * up[i];
}
