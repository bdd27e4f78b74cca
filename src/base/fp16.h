/* Half-precision (IEEE binary16) and bfloat16 conversions, exact and portable.
 * f32 -> f16 rounds to nearest even like F16C hardware; bf16 follows
 * quant-formats.md section 2.3 (quiet NaN, round to nearest even). */
#ifndef BMOE_BASE_FP16_H
#define BMOE_BASE_FP16_H

#include <stdint.h>
#include <string.h>

static inline uint32_t fp32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float fp32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline float fp16_to_fp32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exponent = (h >> 10) & 0x1f;
    uint32_t mantissa = h & 0x3ff;
    if (exponent == 0x1f) /* inf or NaN */
        return fp32_from_bits(sign | 0x7f800000u | (mantissa << 13));
    if (exponent == 0) {
        if (mantissa == 0)
            return fp32_from_bits(sign);
        /* subnormal: value = mantissa * 2^-24, exact in f32 */
        float v = (float)mantissa * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    return fp32_from_bits(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

static inline uint16_t fp32_to_fp16(float f)
{
    uint32_t u = fp32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000;
    uint32_t abs = u & 0x7fffffffu;
    if (abs > 0x7f800000u) /* NaN: keep it a quiet NaN */
        return (uint16_t)(sign | 0x7e00 | ((abs >> 13) & 0x3ff));
    if (abs >= 0x477ff000u) /* rounds to >= 65520: infinity */
        return (uint16_t)(sign | 0x7c00);
    if (abs < 0x38800000u) { /* below the smallest normal half: subnormal or zero */
        if (abs < 0x33000000u) /* below half the smallest subnormal */
            return (uint16_t)sign;
        uint32_t exponent = abs >> 23;
        uint32_t mantissa = (abs & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - exponent; /* 14..24 */
        uint32_t half = mantissa >> shift;
        uint32_t remainder = mantissa & ((1u << shift) - 1);
        uint32_t halfway = 1u << (shift - 1);
        if (remainder > halfway || (remainder == halfway && (half & 1)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = ((abs >> 13) - (112u << 10));
    uint32_t remainder = abs & 0x1fff;
    if (remainder > 0x1000 || (remainder == 0x1000 && (half & 1)))
        half++;
    return (uint16_t)(sign | half);
}

static inline float bf16_to_fp32(uint16_t b)
{
    return fp32_from_bits((uint32_t)b << 16);
}

static inline uint16_t fp32_to_bf16(float f)
{
    uint32_t u = fp32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

#endif
