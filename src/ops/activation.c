/* Softmax, GLU activations and small vector helpers. Formulas follow the
 * reference engine's float expressions (silu = x / (1 + exp(-x))) so that
 * results agree to the last bits where cheap to do so. */
#include <math.h>

#include "ops.h"

void softmax(float *x, int64_t n)
{
    float max = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        if (x[i] > max)
            max = x[i];
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        float e = expf(x[i] - max);
        x[i] = e;
        sum += e;
    }
    float inverse = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++)
        x[i] *= inverse;
}

void silu_glu(float *out, const float *gate, const float *up, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float g = gate[i];
        out[i] = (g / (1.0f + expf(-g))) * up[i];
    }
}

void swiglu_oai(float *out, const float *gate, const float *up, int64_t n, float alpha, float limit)
{
    for (int64_t i = 0; i < n; i++) {
        float g = fminf(gate[i], limit);
        float u = fmaxf(fminf(up[i], limit), -limit);
        float glu = g / (1.0f + expf(alpha * -g));
        out[i] = glu * (u + 1.0f);
    }
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
