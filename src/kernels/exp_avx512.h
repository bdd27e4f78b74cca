/* The engine's exponential (elementwise_common.h) on 16 AVX-512 lanes, bit
 * for bit the scalar elementwise_exp of each lane. Private to the *_avx512.c
 * files, which are compiled with the AVX-512 flags. */
#ifndef BMOE_KERNELS_EXP_AVX512_H
#define BMOE_KERNELS_EXP_AVX512_H

#include <immintrin.h>

#include "elementwise_common.h"

KERNEL_INLINE __m512 avx512_exp(__m512 x)
{
    /* min/max return their second operand when one is NaN: x's NaN passes */
    x = _mm512_min_ps(_mm512_set1_ps(EXP_INPUT_MAX), x);
    x = _mm512_max_ps(_mm512_set1_ps(EXP_INPUT_MIN), x);
    __m512 rounded = _mm512_fmadd_ps(x, _mm512_set1_ps(EXP_LOG2E), _mm512_set1_ps(EXP_ROUNDER));
    __m512 n = _mm512_sub_ps(rounded, _mm512_set1_ps(EXP_ROUNDER));
    __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-EXP_LN2_HIGH), x);
    r = _mm512_fmadd_ps(n, _mm512_set1_ps(EXP_LN2_LOW_NEG), r);
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(EXP_C6), r, _mm512_set1_ps(EXP_C5));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_C4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_C3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_C2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    __m512i biased = _mm512_sub_epi32(_mm512_castps_si512(rounded),
                                      _mm512_set1_epi32((int)(EXP_ROUNDER_BITS - EXP_N_OFFSET)));
    __m512i low_half = _mm512_srli_epi32(biased, 1);
    __m512i bias = _mm512_set1_epi32((int)EXP_HALF_BIAS);
    __m512 first = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(low_half, bias), 23));
    __m512 second =
        _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_sub_epi32(biased, low_half), bias), 23));
    /* x < EXP_ZERO_BELOW: 0; a NaN x keeps its power and stays NaN */
    second = _mm512_mask_mov_ps(second, _mm512_cmp_ps_mask(x, _mm512_set1_ps(EXP_ZERO_BELOW), _CMP_LT_OQ),
                                _mm512_setzero_ps());
    return _mm512_mul_ps(_mm512_mul_ps(p, first), second);
}

#endif
