/* RMSNorm, whole-vector and per head. The sum of squares is accumulated in
 * double (each square computed in float first) and the scale applied as
 * (x * scale) * weight, the reference engine's order (architectures.md 1.2). */
#include <math.h>

#include "ops.h"

void rmsnorm(float *out, const float *x, const float *weight, int64_t n, float eps)
{
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        float square = x[i] * x[i];
        sum += square;
    }
    float mean = (float)(sum / (double)n);
    float scale = 1.0f / sqrtf(mean + eps);
    if (weight) {
        for (int64_t i = 0; i < n; i++)
            out[i] = (x[i] * scale) * weight[i];
    } else {
        for (int64_t i = 0; i < n; i++)
            out[i] = x[i] * scale;
    }
}

void rmsnorm_heads(float *x, const float *weight, int64_t head_dim, int64_t n_heads, float eps)
{
    for (int64_t h = 0; h < n_heads; h++)
        rmsnorm(x + h * head_dim, x + h * head_dim, weight, head_dim, eps);
}
