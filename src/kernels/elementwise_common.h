/* The definition of the engine's exponential and of the lane layout of its
 * double sums, shared by the scalar elementwise kernels (elementwise.c) and
 * the SIMD ones (elementwise_*.c, attend_*.c, exp_*.h), so that every set
 * computes the same bits. Private to src/kernels.
 *
 * e^x = 2^n * e^r with n = round(x / ln 2) and r = x - n ln 2 (|r| <= ln2/2),
 * e^r from a degree-6 polynomial. Every step is an explicit fused
 * multiply-add, a multiply or an add, which each instruction set rounds the
 * same way (IEEE single, round to nearest even), so a vector lane and this
 * scalar code agree to the bit:
 *  - x is clamped to [-104, 89] first (NaN passes through): below -104 e^x
 *    rounds to 0, above 88.73 it overflows, and both ends still do so after
 *    the clamp;
 *  - adding 1.5 * 2^23 in a fused multiply-add rounds x * log2(e) to the
 *    nearest integer n once, and leaves n + 2^22 * 3 in the float's bits, read
 *    back with integer arithmetic (no float-to-int conversion of a NaN);
 *  - r = x - n ln 2 in two fused steps with ln 2 split in a float and the
 *    float of its remainder;
 *  - the polynomial 1 + r + r^2 (c2 + c3 r + ... + c6 r^4) is a minimax fit
 *    of e^r's relative error on [-ln2/2, ln2/2] (3.1e-9, far below an ulp),
 *    fitted for this file by iteratively reweighted least squares and rounded
 *    to float; Horner's rule in fused steps;
 *  - 2^n is applied as two exact powers 2^floor(n/2) and 2^(n - floor(n/2)),
 *    both normal floats for n in [-150, 128] (2^128 is not a float);
 *  - results below the smallest normal float are flushed to 0: below
 *    EXP_ZERO_BELOW (ln 2^-126) the second power is replaced by 0, so that no
 *    lane underflows. An underflow costs a microcode assist of ~150 cycles
 *    per instruction on x86: the -inf scores of masked keys made a tile's
 *    masked lanes cost more than the rest of it, and the peaked softmax of a
 *    real model (stories260K prefill) spent half its exps in assists. A
 *    weight below 1.2e-38 is lost next to the 1 of the maximum anyway.
 * Measured over every float in [-87.34, 89] against double exp: at most
 * 0.91 ulp, 99.5 % correctly rounded; e^0 = 1 exactly, e^-inf = 0,
 * e^inf = inf, e^NaN = NaN.
 *
 * Double sums (softmax, rmsnorm): element i goes to lane i mod 16, each lane
 * adds its elements in index order, and the 16 lanes are combined by
 * elementwise_sum_lanes. 16 lanes is what AVX-512 holds in two registers,
 * AVX2 in four and NEON in eight, so every set keeps the lanes in registers. */
#ifndef BMOE_KERNELS_ELEMENTWISE_COMMON_H
#define BMOE_KERNELS_ELEMENTWISE_COMMON_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "dot_common.h"

#define EXP_INPUT_MAX 89.0f
#define EXP_INPUT_MIN -104.0f
#define EXP_ZERO_BELOW -0x1.5d589ep+6f /* the float just above ln 2^-126 = -87.336545 */
#define EXP_LOG2E 0x1.715476p+0f
#define EXP_ROUNDER 0x1.8p+23f /* 1.5 * 2^23: adding it rounds to an integer */
#define EXP_ROUNDER_BITS 0x4b400000u
#define EXP_LN2_HIGH 0x1.62e430p-1f    /* float(ln 2), above ln 2 */
#define EXP_LN2_LOW_NEG 0x1.05c610p-29f /* float(float(ln 2) - ln 2) */
#define EXP_C6 0x1.6a245ap-10f
#define EXP_C5 0x1.1239d8p-7f
#define EXP_C4 0x1.5558f2p-5f
#define EXP_C3 0x1.555492p-3f
#define EXP_C2 0x1.fffffcp-2f
/* n + 150 is in [0, 278] after the clamp; the two exponents of 2^n are
 * (n + 150) / 2 + 52 and (n + 150) - (n + 150) / 2 + 52 (52 = 127 - 75). */
#define EXP_N_OFFSET 150u
#define EXP_HALF_BIAS 52u

#define ELEMENTWISE_SUM_LANES 16

KERNEL_INLINE float elementwise_exp(float x)
{
    if (x > EXP_INPUT_MAX)
        x = EXP_INPUT_MAX;
    if (x < EXP_INPUT_MIN)
        x = EXP_INPUT_MIN;
    float rounded = fmaf(x, EXP_LOG2E, EXP_ROUNDER);
    float n = rounded - EXP_ROUNDER;
    float r = fmaf(n, -EXP_LN2_HIGH, x);
    r = fmaf(n, EXP_LN2_LOW_NEG, r);
    float p = fmaf(EXP_C6, r, EXP_C5);
    p = fmaf(p, r, EXP_C4);
    p = fmaf(p, r, EXP_C3);
    p = fmaf(p, r, EXP_C2);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    uint32_t bits;
    memcpy(&bits, &rounded, sizeof bits);
    uint32_t biased = bits - EXP_ROUNDER_BITS + EXP_N_OFFSET;
    uint32_t low_half = biased >> 1;
    uint32_t first_bits = (low_half + EXP_HALF_BIAS) << 23;
    uint32_t second_bits = (biased - low_half + EXP_HALF_BIAS) << 23;
    if (x < EXP_ZERO_BELOW)
        second_bits = 0;
    float first, second;
    memcpy(&first, &first_bits, sizeof first);
    memcpy(&second, &second_bits, sizeof second);
    return (p * first) * second;
}

/* The fixed combining tree of the 16 lane sums: halves added pairwise,
 * lane i with lane i + 8, then i + 4, i + 2, i + 1. */
KERNEL_INLINE double elementwise_sum_lanes(double lanes[ELEMENTWISE_SUM_LANES])
{
    for (int width = ELEMENTWISE_SUM_LANES / 2; width >= 1; width /= 2)
        for (int i = 0; i < width; i++)
            lanes[i] += lanes[i + width];
    return lanes[0];
}

/* The scale rmsnorm applies, from the sum of squares (shared so the float
 * steps after the sum are written once). */
KERNEL_INLINE float elementwise_rms_scale(double sum_of_squares, int64_t n, float eps)
{
    float mean = (float)(sum_of_squares / (double)n);
    return 1.0f / sqrtf(mean + eps);
}

#endif
