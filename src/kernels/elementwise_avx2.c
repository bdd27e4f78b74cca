/* AVX2 elementwise kernels: the scalar definitions of elementwise.c on 8
 * lanes, bit for bit. The last elements are copied into a zero-padded block
 * and take the same vector code; padding lanes are neither stored nor
 * summed. The double sums take 16 elements per step (four registers of 4
 * doubles: the 16 lanes of elementwise_common.h). */
#include "exp_avx2.h"
#include "kernels_dispatch.h"

#define AVX2_BLOCK 16

KERNEL_INLINE __m256 avx2_negate(__m256 x)
{
    return _mm256_xor_ps(x, _mm256_set1_ps(-0.0f));
}

typedef struct avx2_lanes {
    __m256d sum[4];
} avx2_lanes;

KERNEL_INLINE void avx2_lanes_zero(avx2_lanes *lanes)
{
    for (int i = 0; i < 4; i++)
        lanes->sum[i] = _mm256_setzero_pd();
}

/* Elements 0-7 of a block in `first`, 8-15 in `second`. */
KERNEL_INLINE void avx2_lanes_add(avx2_lanes *lanes, __m256 first, __m256 second)
{
    lanes->sum[0] = _mm256_add_pd(lanes->sum[0], _mm256_cvtps_pd(_mm256_castps256_ps128(first)));
    lanes->sum[1] = _mm256_add_pd(lanes->sum[1], _mm256_cvtps_pd(_mm256_extractf128_ps(first, 1)));
    lanes->sum[2] = _mm256_add_pd(lanes->sum[2], _mm256_cvtps_pd(_mm256_castps256_ps128(second)));
    lanes->sum[3] = _mm256_add_pd(lanes->sum[3], _mm256_cvtps_pd(_mm256_extractf128_ps(second, 1)));
}

KERNEL_INLINE double avx2_lanes_total(const avx2_lanes *lanes)
{
    double values[ELEMENTWISE_SUM_LANES];
    for (int i = 0; i < 4; i++)
        _mm256_storeu_pd(values + 4 * i, lanes->sum[i]);
    return elementwise_sum_lanes(values);
}

/* The n - i < 16 last elements of x, zero-padded to a block. */
KERNEL_INLINE void avx2_tail_load(float block[AVX2_BLOCK], const float *x, int64_t count)
{
    memset(block, 0, AVX2_BLOCK * sizeof(float));
    memcpy(block, x, (size_t)count * sizeof(float));
}

KERNEL_INLINE __m256 avx2_silu_glu_step(__m256 g, __m256 u)
{
    __m256 silu = _mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), avx2_exp(avx2_negate(g))));
    return _mm256_mul_ps(silu, u);
}

KERNEL_INLINE __m256 avx2_swiglu_oai_step(__m256 gate, __m256 up, __m256 scale, __m256 high, __m256 low)
{
    /* a NaN first operand gives the second, as fminf/fmaxf give the number */
    __m256 g = _mm256_min_ps(gate, high);
    __m256 u = _mm256_max_ps(_mm256_min_ps(up, high), low);
    __m256 one = _mm256_set1_ps(1.0f);
    __m256 glu = _mm256_div_ps(g, _mm256_add_ps(one, avx2_exp(_mm256_mul_ps(scale, avx2_negate(g)))));
    return _mm256_mul_ps(glu, _mm256_add_ps(u, one));
}

void avx2_exponential(float *y, const float *x, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, avx2_exp(_mm256_loadu_ps(x + i)));
    if (i < n) {
        float block[AVX2_BLOCK];
        avx2_tail_load(block, x + i, n - i);
        _mm256_storeu_ps(block, avx2_exp(_mm256_loadu_ps(block)));
        memcpy(y + i, block, (size_t)(n - i) * sizeof(float));
    }
}

void avx2_silu_glu(float *out, const float *gate, const float *up, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, avx2_silu_glu_step(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
    if (i < n) {
        float g[AVX2_BLOCK], u[AVX2_BLOCK];
        avx2_tail_load(g, gate + i, n - i);
        avx2_tail_load(u, up + i, n - i);
        _mm256_storeu_ps(g, avx2_silu_glu_step(_mm256_loadu_ps(g), _mm256_loadu_ps(u)));
        memcpy(out + i, g, (size_t)(n - i) * sizeof(float));
    }
}

void avx2_swiglu_oai(float *out, const float *gate, const float *up, int64_t n, float alpha, float limit)
{
    __m256 scale = _mm256_set1_ps(alpha), high = _mm256_set1_ps(limit), low = _mm256_set1_ps(-limit);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, avx2_swiglu_oai_step(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i), scale,
                                                       high, low));
    if (i < n) {
        float g[AVX2_BLOCK], u[AVX2_BLOCK];
        avx2_tail_load(g, gate + i, n - i);
        avx2_tail_load(u, up + i, n - i);
        _mm256_storeu_ps(g, avx2_swiglu_oai_step(_mm256_loadu_ps(g), _mm256_loadu_ps(u), scale, high, low));
        memcpy(out + i, g, (size_t)(n - i) * sizeof(float));
    }
}

void avx2_softmax(float *x, int64_t n)
{
    /* a NaN element gives the running maximum back, as the scalar comparison skips it */
    __m256 max = _mm256_set1_ps(-INFINITY);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        max = _mm256_max_ps(_mm256_loadu_ps(x + i), max);
    float lanes[8];
    _mm256_storeu_ps(lanes, max);
    float maximum = -INFINITY;
    for (int lane = 0; lane < 8; lane++)
        if (lanes[lane] > maximum)
            maximum = lanes[lane];
    for (; i < n; i++)
        if (x[i] > maximum)
            maximum = x[i];

    __m256 shift = _mm256_set1_ps(maximum);
    avx2_lanes sums;
    avx2_lanes_zero(&sums);
    for (i = 0; i + AVX2_BLOCK <= n; i += AVX2_BLOCK) {
        __m256 first = avx2_exp(_mm256_sub_ps(_mm256_loadu_ps(x + i), shift));
        __m256 second = avx2_exp(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), shift));
        _mm256_storeu_ps(x + i, first);
        _mm256_storeu_ps(x + i + 8, second);
        avx2_lanes_add(&sums, first, second);
    }
    if (i < n) {
        float block[AVX2_BLOCK];
        avx2_tail_load(block, x + i, n - i);
        _mm256_storeu_ps(block, avx2_exp(_mm256_sub_ps(_mm256_loadu_ps(block), shift)));
        _mm256_storeu_ps(block + 8, avx2_exp(_mm256_sub_ps(_mm256_loadu_ps(block + 8), shift)));
        for (int64_t j = n - i; j < AVX2_BLOCK; j++)
            block[j] = 0.0f;
        avx2_lanes_add(&sums, _mm256_loadu_ps(block), _mm256_loadu_ps(block + 8));
        memcpy(x + i, block, (size_t)(n - i) * sizeof(float));
    }
    __m256 inverse = _mm256_set1_ps((float)(1.0 / avx2_lanes_total(&sums)));
    for (i = 0; i + 8 <= n; i += 8)
        _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), inverse));
    for (; i < n; i++)
        x[i] *= _mm256_cvtss_f32(inverse);
}

void avx2_rmsnorm(float *out, const float *x, const float *weight, int64_t n, float eps)
{
    avx2_lanes sums;
    avx2_lanes_zero(&sums);
    int64_t i = 0;
    for (; i + AVX2_BLOCK <= n; i += AVX2_BLOCK) {
        __m256 first = _mm256_loadu_ps(x + i), second = _mm256_loadu_ps(x + i + 8);
        avx2_lanes_add(&sums, _mm256_mul_ps(first, first), _mm256_mul_ps(second, second));
    }
    if (i < n) {
        float block[AVX2_BLOCK];
        avx2_tail_load(block, x + i, n - i);
        __m256 first = _mm256_loadu_ps(block), second = _mm256_loadu_ps(block + 8);
        avx2_lanes_add(&sums, _mm256_mul_ps(first, first), _mm256_mul_ps(second, second));
    }
    float scale = elementwise_rms_scale(avx2_lanes_total(&sums), n, eps);
    __m256 scales = _mm256_set1_ps(scale);
    for (i = 0; i + 8 <= n; i += 8) {
        __m256 scaled = _mm256_mul_ps(_mm256_loadu_ps(x + i), scales);
        if (weight)
            scaled = _mm256_mul_ps(scaled, _mm256_loadu_ps(weight + i));
        _mm256_storeu_ps(out + i, scaled);
    }
    for (; i < n; i++)
        out[i] = weight ? (x[i] * scale) * weight[i] : x[i] * scale;
}
