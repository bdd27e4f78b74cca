/* AVX-512 elementwise kernels: the scalar definitions of elementwise.c on 16
 * lanes, bit for bit. The last elements go through the same vector code under
 * a mask (masked-off lanes are neither stored nor summed). */
#include "exp_avx512.h"
#include "kernels_dispatch.h"

KERNEL_INLINE __mmask16 avx512_tail_mask(int64_t remaining)
{
    return remaining >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << remaining) - 1u);
}

KERNEL_INLINE __m512 avx512_negate(__m512 x)
{
    return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN)));
}

/* The 16 double lanes of elementwise_common.h: elements 0-7 of a step in
 * `low`, 8-15 in `high`. */
KERNEL_INLINE void avx512_add_lanes(__m512 values, __m512d *low, __m512d *high)
{
    *low = _mm512_add_pd(*low, _mm512_cvtps_pd(_mm512_castps512_ps256(values)));
    *high = _mm512_add_pd(*high, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(values), 1))));
}

KERNEL_INLINE double avx512_sum_lanes(__m512d low, __m512d high)
{
    double lanes[ELEMENTWISE_SUM_LANES];
    _mm512_storeu_pd(lanes, low);
    _mm512_storeu_pd(lanes + 8, high);
    return elementwise_sum_lanes(lanes);
}

void avx512_exponential(float *y, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 mask = avx512_tail_mask(n - i);
        _mm512_mask_storeu_ps(y + i, mask, avx512_exp(_mm512_maskz_loadu_ps(mask, x + i)));
    }
}

void avx512_silu_glu(float *out, const float *gate, const float *up, int64_t n)
{
    __m512 one = _mm512_set1_ps(1.0f);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 mask = avx512_tail_mask(n - i);
        __m512 g = _mm512_maskz_loadu_ps(mask, gate + i);
        __m512 u = _mm512_maskz_loadu_ps(mask, up + i);
        __m512 silu = _mm512_div_ps(g, _mm512_add_ps(one, avx512_exp(avx512_negate(g))));
        _mm512_mask_storeu_ps(out + i, mask, _mm512_mul_ps(silu, u));
    }
}

void avx512_swiglu_oai(float *out, const float *gate, const float *up, int64_t n, float alpha, float limit)
{
    __m512 one = _mm512_set1_ps(1.0f), high = _mm512_set1_ps(limit), low = _mm512_set1_ps(-limit);
    __m512 scale = _mm512_set1_ps(alpha);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 mask = avx512_tail_mask(n - i);
        /* a NaN first operand gives the second, as fminf/fmaxf give the number */
        __m512 g = _mm512_min_ps(_mm512_maskz_loadu_ps(mask, gate + i), high);
        __m512 u = _mm512_max_ps(_mm512_min_ps(_mm512_maskz_loadu_ps(mask, up + i), high), low);
        __m512 glu = _mm512_div_ps(g, _mm512_add_ps(one, avx512_exp(_mm512_mul_ps(scale, avx512_negate(g)))));
        _mm512_mask_storeu_ps(out + i, mask, _mm512_mul_ps(glu, _mm512_add_ps(u, one)));
    }
}

void avx512_softmax(float *x, int64_t n)
{
    /* a NaN element gives the running maximum back, as the scalar comparison skips it */
    __m512 max = _mm512_set1_ps(-INFINITY);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 mask = avx512_tail_mask(n - i);
        max = _mm512_mask_max_ps(max, mask, _mm512_maskz_loadu_ps(mask, x + i), max);
    }
    __m512 maximum = _mm512_set1_ps(_mm512_reduce_max_ps(max));
    __m512d low = _mm512_setzero_pd(), high = _mm512_setzero_pd();
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 mask = avx512_tail_mask(n - i);
        __m512 e = _mm512_maskz_mov_ps(mask, avx512_exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(mask, x + i), maximum)));
        _mm512_mask_storeu_ps(x + i, mask, e);
        avx512_add_lanes(e, &low, &high);
    }
    __m512 inverse = _mm512_set1_ps((float)(1.0 / avx512_sum_lanes(low, high)));
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 mask = avx512_tail_mask(n - i);
        _mm512_mask_storeu_ps(x + i, mask, _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, x + i), inverse));
    }
}

void avx512_rmsnorm(float *out, const float *x, const float *weight, int64_t n, float eps)
{
    __m512d low = _mm512_setzero_pd(), high = _mm512_setzero_pd();
    for (int64_t i = 0; i < n; i += 16) {
        __m512 v = _mm512_maskz_loadu_ps(avx512_tail_mask(n - i), x + i);
        avx512_add_lanes(_mm512_mul_ps(v, v), &low, &high);
    }
    __m512 scale = _mm512_set1_ps(elementwise_rms_scale(avx512_sum_lanes(low, high), n, eps));
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 mask = avx512_tail_mask(n - i);
        __m512 scaled = _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, x + i), scale);
        if (weight)
            scaled = _mm512_mul_ps(scaled, _mm512_maskz_loadu_ps(mask, weight + i));
        _mm512_mask_storeu_ps(out + i, mask, scaled);
    }
}
