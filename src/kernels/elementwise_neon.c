/* NEON elementwise kernels: the scalar definitions of elementwise.c on 4
 * lanes, bit for bit. The last elements are copied into a zero-padded block
 * and take the same vector code; padding lanes are neither stored nor
 * summed. The double sums take 16 elements per step (eight registers of 2
 * doubles: the 16 lanes of elementwise_common.h). */
#include "exp_neon.h"
#include "kernels_dispatch.h"

#define NEON_BLOCK 16

typedef struct neon_lanes {
    float64x2_t sum[8];
} neon_lanes;

KERNEL_INLINE void neon_lanes_zero(neon_lanes *lanes)
{
    for (int i = 0; i < 8; i++)
        lanes->sum[i] = vdupq_n_f64(0.0);
}

/* 16 consecutive float values at p into lanes 0..15. */
KERNEL_INLINE void neon_lanes_add(neon_lanes *lanes, const float *p)
{
    for (int i = 0; i < 4; i++) {
        float32x4_t v = vld1q_f32(p + 4 * i);
        lanes->sum[2 * i] = vaddq_f64(lanes->sum[2 * i], vcvt_f64_f32(vget_low_f32(v)));
        lanes->sum[2 * i + 1] = vaddq_f64(lanes->sum[2 * i + 1], vcvt_high_f64_f32(v));
    }
}

KERNEL_INLINE double neon_lanes_total(const neon_lanes *lanes)
{
    double values[ELEMENTWISE_SUM_LANES];
    for (int i = 0; i < 8; i++)
        vst1q_f64(values + 2 * i, lanes->sum[i]);
    return elementwise_sum_lanes(values);
}

KERNEL_INLINE void neon_tail_load(float block[NEON_BLOCK], const float *x, int64_t count)
{
    memset(block, 0, NEON_BLOCK * sizeof(float));
    memcpy(block, x, (size_t)count * sizeof(float));
}

KERNEL_INLINE float32x4_t neon_silu_glu_step(float32x4_t g, float32x4_t u)
{
    float32x4_t silu = vdivq_f32(g, vaddq_f32(vdupq_n_f32(1.0f), neon_exp(vnegq_f32(g))));
    return vmulq_f32(silu, u);
}

KERNEL_INLINE float32x4_t neon_swiglu_oai_step(float32x4_t gate, float32x4_t up, float32x4_t scale,
                                               float32x4_t high, float32x4_t low)
{
    /* FMINNM/FMAXNM give the number when one operand is NaN, as fminf/fmaxf */
    float32x4_t g = vminnmq_f32(gate, high);
    float32x4_t u = vmaxnmq_f32(vminnmq_f32(up, high), low);
    float32x4_t one = vdupq_n_f32(1.0f);
    float32x4_t glu = vdivq_f32(g, vaddq_f32(one, neon_exp(vmulq_f32(scale, vnegq_f32(g)))));
    return vmulq_f32(glu, vaddq_f32(u, one));
}

void neon_exponential(float *y, const float *x, int64_t n)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(y + i, neon_exp(vld1q_f32(x + i)));
    if (i < n) {
        float block[NEON_BLOCK];
        neon_tail_load(block, x + i, n - i);
        vst1q_f32(block, neon_exp(vld1q_f32(block)));
        memcpy(y + i, block, (size_t)(n - i) * sizeof(float));
    }
}

void neon_silu_glu(float *out, const float *gate, const float *up, int64_t n)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(out + i, neon_silu_glu_step(vld1q_f32(gate + i), vld1q_f32(up + i)));
    if (i < n) {
        float g[NEON_BLOCK], u[NEON_BLOCK];
        neon_tail_load(g, gate + i, n - i);
        neon_tail_load(u, up + i, n - i);
        vst1q_f32(g, neon_silu_glu_step(vld1q_f32(g), vld1q_f32(u)));
        memcpy(out + i, g, (size_t)(n - i) * sizeof(float));
    }
}

void neon_swiglu_oai(float *out, const float *gate, const float *up, int64_t n, float alpha, float limit)
{
    float32x4_t scale = vdupq_n_f32(alpha), high = vdupq_n_f32(limit), low = vdupq_n_f32(-limit);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(out + i, neon_swiglu_oai_step(vld1q_f32(gate + i), vld1q_f32(up + i), scale, high, low));
    if (i < n) {
        float g[NEON_BLOCK], u[NEON_BLOCK];
        neon_tail_load(g, gate + i, n - i);
        neon_tail_load(u, up + i, n - i);
        vst1q_f32(g, neon_swiglu_oai_step(vld1q_f32(g), vld1q_f32(u), scale, high, low));
        memcpy(out + i, g, (size_t)(n - i) * sizeof(float));
    }
}

void neon_softmax(float *x, int64_t n)
{
    /* FMAXNM skips a NaN element, as the scalar comparison does */
    float32x4_t max = vdupq_n_f32(-INFINITY);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        max = vmaxnmq_f32(vld1q_f32(x + i), max);
    float maximum = vmaxnmvq_f32(max);
    for (; i < n; i++)
        if (x[i] > maximum)
            maximum = x[i];

    float32x4_t shift = vdupq_n_f32(maximum);
    neon_lanes sums;
    neon_lanes_zero(&sums);
    for (i = 0; i + NEON_BLOCK <= n; i += NEON_BLOCK) {
        for (int j = 0; j < NEON_BLOCK; j += 4)
            vst1q_f32(x + i + j, neon_exp(vsubq_f32(vld1q_f32(x + i + j), shift)));
        neon_lanes_add(&sums, x + i);
    }
    if (i < n) {
        float block[NEON_BLOCK];
        neon_tail_load(block, x + i, n - i);
        for (int j = 0; j < NEON_BLOCK; j += 4)
            vst1q_f32(block + j, neon_exp(vsubq_f32(vld1q_f32(block + j), shift)));
        for (int64_t j = n - i; j < NEON_BLOCK; j++)
            block[j] = 0.0f;
        neon_lanes_add(&sums, block);
        memcpy(x + i, block, (size_t)(n - i) * sizeof(float));
    }
    float inverse = (float)(1.0 / neon_lanes_total(&sums));
    for (i = 0; i + 4 <= n; i += 4)
        vst1q_f32(x + i, vmulq_n_f32(vld1q_f32(x + i), inverse));
    for (; i < n; i++)
        x[i] *= inverse;
}

void neon_rmsnorm(float *out, const float *x, const float *weight, int64_t n, float eps)
{
    neon_lanes sums;
    neon_lanes_zero(&sums);
    float squares[NEON_BLOCK];
    int64_t i = 0;
    for (; i < n; i += NEON_BLOCK) {
        float block[NEON_BLOCK];
        const float *p = x + i;
        if (i + NEON_BLOCK > n) {
            neon_tail_load(block, x + i, n - i);
            p = block;
        }
        for (int j = 0; j < NEON_BLOCK; j += 4) {
            float32x4_t v = vld1q_f32(p + j);
            vst1q_f32(squares + j, vmulq_f32(v, v));
        }
        neon_lanes_add(&sums, squares);
    }
    float scale = elementwise_rms_scale(neon_lanes_total(&sums), n, eps);
    for (i = 0; i + 4 <= n; i += 4) {
        float32x4_t scaled = vmulq_n_f32(vld1q_f32(x + i), scale);
        if (weight)
            scaled = vmulq_f32(scaled, vld1q_f32(weight + i));
        vst1q_f32(out + i, scaled);
    }
    for (; i < n; i++)
        out[i] = weight ? (x[i] * scale) * weight[i] : x[i] * scale;
}
