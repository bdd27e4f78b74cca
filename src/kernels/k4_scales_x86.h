/* The Q4_K/Q5_K scale and minimum unpacking in one SSE register, shared by
 * the AVX2 and AVX-512 kernel sets (each file is compiled for its own set;
 * everything here needs only AVX2). */
#ifndef BMOE_KERNELS_K4_SCALES_X86_H
#define BMOE_KERNELS_K4_SCALES_X86_H

#include <immintrin.h>
#include <stdint.h>

#include "dot_common.h"

/* kernel_k4_unpack_scales in one register: the 12 packed bytes are words
 * a, b, c; the result's words are a & 0x3f.., (c & 0x0f..) | top bits of a,
 * b & 0x3f.., (c >> 4 & 0x0f..) | top bits of b, where a byte's top two
 * bits land in bits 4-5 ((x >> 2) & 0x30 per byte). Reads 16 bytes: the
 * block goes on past the scales. */
KERNEL_INLINE __m128i x86_k4_unpack_scales(const uint8_t *packed)
{
    __m128i v = _mm_loadu_si128((const __m128i *)packed);
    __m128i low = _mm_srlv_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(2, 1, 2, 0)), _mm_setr_epi32(0, 0, 0, 4));
    low = _mm_and_si128(low, _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
    __m128i high = _mm_srli_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(1, 1, 0, 0)), 2);
    high = _mm_and_si128(high, _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
    return _mm_or_si128(low, high);
}

/* The eight minimums of the unpacked bytes (x86_k4_unpack_scales) as
 * 16-bit words: one shuffle, whose control bytes with the top bit set write
 * the zero high bytes. */
KERNEL_INLINE __m128i x86_k4_mins(__m128i scale_min)
{
    return _mm_shuffle_epi8(scale_min, _mm_setr_epi8(8, -128, 9, -128, 10, -128, 11, -128, 12, -128, 13, -128, 14,
                                                     -128, 15, -128));
}

/* A block's d and dmin (two f16 at its start) as floats in lanes 0 and 1. */
KERNEL_INLINE __m128 x86_k4_d_dmin(const uint8_t *header)
{
    uint32_t bits;
    memcpy(&bits, header, 4);
    return _mm_cvtph_ps(_mm_cvtsi32_si128((int)bits));
}

#endif
