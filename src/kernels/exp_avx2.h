/* The engine's exponential (elementwise_common.h) on 8 AVX2 lanes, bit
 * for bit the scalar elementwise_exp of each lane. Private to the *_avx2.c
 * files, which are compiled with -mavx2 -mfma -mf16c. */
#ifndef BMOE_KERNELS_EXP_AVX2_H
#define BMOE_KERNELS_EXP_AVX2_H

#include <immintrin.h>

#include "elementwise_common.h"

KERNEL_INLINE __m256 avx2_exp(__m256 x)
{
    /* min/max return their second operand when one is NaN: x's NaN passes */
    x = _mm256_min_ps(_mm256_set1_ps(EXP_INPUT_MAX), x);
    x = _mm256_max_ps(_mm256_set1_ps(EXP_INPUT_MIN), x);
    __m256 rounded = _mm256_fmadd_ps(x, _mm256_set1_ps(EXP_LOG2E), _mm256_set1_ps(EXP_ROUNDER));
    __m256 n = _mm256_sub_ps(rounded, _mm256_set1_ps(EXP_ROUNDER));
    __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-EXP_LN2_HIGH), x);
    r = _mm256_fmadd_ps(n, _mm256_set1_ps(EXP_LN2_LOW_NEG), r);
    __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(EXP_C6), r, _mm256_set1_ps(EXP_C5));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_C4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_C3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_C2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    __m256i biased = _mm256_sub_epi32(_mm256_castps_si256(rounded),
                                      _mm256_set1_epi32((int)(EXP_ROUNDER_BITS - EXP_N_OFFSET)));
    __m256i low_half = _mm256_srli_epi32(biased, 1);
    __m256i bias = _mm256_set1_epi32((int)EXP_HALF_BIAS);
    __m256 first = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(low_half, bias), 23));
    __m256 second =
        _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(biased, low_half), bias), 23));
    /* x < EXP_ZERO_BELOW: 0; a NaN x keeps its power and stays NaN */
    second = _mm256_andnot_ps(_mm256_cmp_ps(x, _mm256_set1_ps(EXP_ZERO_BELOW), _CMP_LT_OQ), second);
    return _mm256_mul_ps(_mm256_mul_ps(p, first), second);
}

#endif
