/* The engine's exponential (elementwise_common.h) on 4 NEON lanes, bit for
 * bit the scalar elementwise_exp of each lane. Private to the *_neon.c
 * files. */
#ifndef BMOE_KERNELS_EXP_NEON_H
#define BMOE_KERNELS_EXP_NEON_H

#include <arm_neon.h>

#include "elementwise_common.h"

KERNEL_INLINE float32x4_t neon_exp(float32x4_t x)
{
    /* FMIN/FMAX return NaN when an operand is NaN: x's NaN passes */
    x = vminq_f32(vdupq_n_f32(EXP_INPUT_MAX), x);
    x = vmaxq_f32(vdupq_n_f32(EXP_INPUT_MIN), x);
    float32x4_t rounded = vfmaq_f32(vdupq_n_f32(EXP_ROUNDER), x, vdupq_n_f32(EXP_LOG2E));
    float32x4_t n = vsubq_f32(rounded, vdupq_n_f32(EXP_ROUNDER));
    float32x4_t r = vfmaq_f32(x, n, vdupq_n_f32(-EXP_LN2_HIGH));
    r = vfmaq_f32(r, n, vdupq_n_f32(EXP_LN2_LOW_NEG));
    float32x4_t p = vfmaq_f32(vdupq_n_f32(EXP_C5), vdupq_n_f32(EXP_C6), r);
    p = vfmaq_f32(vdupq_n_f32(EXP_C4), p, r);
    p = vfmaq_f32(vdupq_n_f32(EXP_C3), p, r);
    p = vfmaq_f32(vdupq_n_f32(EXP_C2), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    uint32x4_t biased = vsubq_u32(vreinterpretq_u32_f32(rounded), vdupq_n_u32(EXP_ROUNDER_BITS - EXP_N_OFFSET));
    uint32x4_t low_half = vshrq_n_u32(biased, 1);
    uint32x4_t bias = vdupq_n_u32(EXP_HALF_BIAS);
    float32x4_t first = vreinterpretq_f32_u32(vshlq_n_u32(vaddq_u32(low_half, bias), 23));
    uint32x4_t second_bits = vshlq_n_u32(vaddq_u32(vsubq_u32(biased, low_half), bias), 23);
    /* x < EXP_ZERO_BELOW: 0; a NaN x keeps its power and stays NaN */
    second_bits = vbicq_u32(second_bits, vcltq_f32(x, vdupq_n_f32(EXP_ZERO_BELOW)));
    float32x4_t second = vreinterpretq_f32_u32(second_bits);
    return vmulq_f32(vmulq_f32(p, first), second);
}

#endif
