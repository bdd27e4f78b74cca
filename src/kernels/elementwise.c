/* The scalar elementwise kernels: the definitions the SIMD sets reproduce bit
 * for bit (elementwise_common.h has the exponential and the lane layout of
 * the double sums). Formulas follow the reference engine's float expressions
 * (silu = x / (1 + e^-x), RMSNorm's (x * scale) * weight) so that results
 * agree with it to the last bits where cheap to do so. */
#include "elementwise_common.h"
#include "kernels_dispatch.h"

void scalar_exponential(float *y, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = elementwise_exp(x[i]);
}

void scalar_silu_glu(float *out, const float *gate, const float *up, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float g = gate[i];
        out[i] = (g / (1.0f + elementwise_exp(-g))) * up[i];
    }
}

void scalar_swiglu_oai(float *out, const float *gate, const float *up, int64_t n, float alpha, float limit)
{
    for (int64_t i = 0; i < n; i++) {
        float g = fminf(gate[i], limit);
        float u = fmaxf(fminf(up[i], limit), -limit);
        float glu = g / (1.0f + elementwise_exp(alpha * -g));
        out[i] = glu * (u + 1.0f);
    }
}

void scalar_softmax(float *x, int64_t n)
{
    float max = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        if (x[i] > max)
            max = x[i];
    double lanes[ELEMENTWISE_SUM_LANES] = {0};
    for (int64_t i = 0; i < n; i++) {
        float e = elementwise_exp(x[i] - max);
        x[i] = e;
        lanes[i % ELEMENTWISE_SUM_LANES] += e;
    }
    float inverse = (float)(1.0 / elementwise_sum_lanes(lanes));
    for (int64_t i = 0; i < n; i++)
        x[i] *= inverse;
}

void scalar_rmsnorm(float *out, const float *x, const float *weight, int64_t n, float eps)
{
    double lanes[ELEMENTWISE_SUM_LANES] = {0};
    for (int64_t i = 0; i < n; i++) {
        float square = x[i] * x[i];
        lanes[i % ELEMENTWISE_SUM_LANES] += square;
    }
    float scale = elementwise_rms_scale(elementwise_sum_lanes(lanes), n, eps);
    if (weight) {
        for (int64_t i = 0; i < n; i++)
            out[i] = (x[i] * scale) * weight[i];
    } else {
        for (int64_t i = 0; i < n; i++)
            out[i] = x[i] * scale;
    }
}
