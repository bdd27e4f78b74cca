/* Softmax, GLU activations and small vector helpers. Softmax and the GLUs
 * are the kernels' elementwise functions (kernels.h): every set computes the
 * scalar definition's bits, so the set kernels_best() picks changes the speed
 * and never the result. */
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
