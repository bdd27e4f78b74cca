/* RMSNorm, whole-vector and per head, on the kernels' rmsnorm (kernels.h):
 * the sum of squares in double (each square computed in float first, summed
 * in 16 interleaved lanes) and the scale applied as (x * scale) * weight, the
 * reference engine's order (architectures.md 1.2). Every set gives the same
 * bits. */
#include "ops.h"

void rmsnorm(float *out, const float *x, const float *weight, int64_t n, float eps)
{
    kernels_rmsnorm(kernels_best())(out, x, weight, n, eps);
}

void rmsnorm_heads(float *x, const float *weight, int64_t head_dim, int64_t n_heads, float eps)
{
    for (int64_t h = 0; h < n_heads; h++)
        rmsnorm(x + h * head_dim, x + h * head_dim, weight, head_dim, eps);
}
