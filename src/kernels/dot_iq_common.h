/* Shared by the SIMD dot-product kernels of the grid i-quants (dot_iq_avx2.c,
 * dot_iq_avx512.c, dot_iq_neon.c): the ISA-independent reading of a block.
 * Private to src/kernels.
 *
 * Every kernel takes a 32-value sub-block as four 8-byte grid points (IQ3's
 * 4-value points in pairs) whose values are unsigned (at most 62), four sign
 * bytes (set bit: negative value) that the kernel applies to the
 * activation's quants, which are never -128 (Q8_K scales its largest
 * magnitude to 127), and an odd integer multiplier per 16 values. The
 * integer sum of a block is then exact in every ISA, and
 *   dot = factor * sum over blocks of (d * a.d) * sum,
 * as in the scalar reference (quant_iq_grid.c). The point lookups are
 * scalar loads: the grids are too large for a register table. */
#ifndef BMOE_KERNELS_DOT_IQ_COMMON_H
#define BMOE_KERNELS_DOT_IQ_COMMON_H

#include "dot_common.h"

enum iq_kind { IQ_KIND_2XXS, IQ_KIND_2XS, IQ_KIND_2S, IQ_KIND_3XXS, IQ_KIND_3S };

KERNEL_INLINE size_t iq_block_bytes(const enum iq_kind kind)
{
    switch (kind) {
    case IQ_KIND_2XXS: return sizeof(block_iq2_xxs);
    case IQ_KIND_2XS: return sizeof(block_iq2_xs);
    case IQ_KIND_2S: return sizeof(block_iq2_s);
    case IQ_KIND_3XXS: return sizeof(block_iq3_xxs);
    default: return sizeof(block_iq3_s);
    }
}

/* The power of two the block sums are scaled by (IQ2: (2s + 1) / 8 is the
 * multiplier; IQ3_XXS: / 4; IQ3_S: 1). */
KERNEL_INLINE float iq_factor(const enum iq_kind kind)
{
    return kind == IQ_KIND_3XXS ? 0.25f : kind == IQ_KIND_3S ? 1.0f : 0.125f;
}

/* Every one of these formats starts with its f16 scale. */
KERNEL_INLINE uint16_t iq_d_bits(const uint8_t *block)
{
    uint16_t d;
    memcpy(&d, block, 2);
    return d;
}

KERNEL_INLINE uint32_t iq_le32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Four sign bytes from four 7-bit codes at bits 0, 7, 14, 21. */
KERNEL_INLINE uint32_t iq_sign_bytes4(uint32_t codes)
{
    return (uint32_t)quant_iq_sign_bytes[codes & 127] | (uint32_t)quant_iq_sign_bytes[(codes >> 7) & 127] << 8 |
           (uint32_t)quant_iq_sign_bytes[(codes >> 14) & 127] << 16 |
           (uint32_t)quant_iq_sign_bytes[(codes >> 21) & 127] << 24;
}

/* The multipliers 2s + 1 of the block's 16 halves of sub-blocks. */
KERNEL_INLINE void iq_scales(const enum iq_kind kind, const uint8_t *block, uint8_t scale[16])
{
    for (int s = 0; s < 8; s++) {
        int low, high;
        switch (kind) {
        case IQ_KIND_2XXS:
            low = high = (int)(iq_le32(block + 2 + 8 * s + 4) >> 28);
            break;
        case IQ_KIND_2XS:
            low = block[66 + s] & 0x0f;
            high = block[66 + s] >> 4;
            break;
        case IQ_KIND_2S:
            low = block[74 + s] & 0x0f;
            high = block[74 + s] >> 4;
            break;
        case IQ_KIND_3XXS:
            low = high = (int)(iq_le32(block + 66 + 4 * s) >> 28);
            break;
        default:
            low = high = (block[106 + s / 2] >> (4 * (s % 2))) & 0x0f;
            break;
        }
        scale[2 * s] = (uint8_t)(2 * low + 1);
        scale[2 * s + 1] = (uint8_t)(2 * high + 1);
    }
}

/* Sub-block s (0..7): its four points (values 8g..8g + 7 in points[g]) and
 * their sign bytes (group g in byte g). */
KERNEL_INLINE void iq_sub_block(const enum iq_kind kind, const uint8_t *block, int s, uint64_t points[4],
                                uint32_t *signs)
{
    switch (kind) {
    case IQ_KIND_2XXS: {
        const uint8_t *q = block + 2 + 8 * s;
        for (int g = 0; g < 4; g++)
            points[g] = quant_iq2xxs_grid[q[g]];
        *signs = iq_sign_bytes4(iq_le32(q + 4));
        break;
    }
    case IQ_KIND_2XS: {
        uint32_t bytes = 0;
        for (int g = 0; g < 4; g++) {
            uint16_t code;
            memcpy(&code, block + 2 + 8 * s + 2 * g, 2);
            points[g] = quant_iq2xs_grid[code & 511];
            bytes |= (uint32_t)quant_iq_sign_bytes[code >> 9] << (8 * g);
        }
        *signs = bytes;
        break;
    }
    case IQ_KIND_2S: {
        const uint8_t *q = block + 2 + 4 * s;
        int high = block[66 + s];
        for (int g = 0; g < 4; g++)
            points[g] = quant_iq2s_grid[q[g] | ((high >> (2 * g)) & 3) << 8];
        *signs = iq_le32(block + 34 + 4 * s);
        break;
    }
    case IQ_KIND_3XXS: {
        const uint8_t *q = block + 2 + 8 * s;
        for (int g = 0; g < 4; g++)
            points[g] = quant_iq3xxs_grid[q[2 * g]] | (uint64_t)quant_iq3xxs_grid[q[2 * g + 1]] << 32;
        *signs = iq_sign_bytes4(iq_le32(block + 66 + 4 * s));
        break;
    }
    default: {
        const uint8_t *q = block + 2 + 8 * s;
        int high = block[66 + s];
        for (int g = 0; g < 4; g++) {
            int k = 2 * g;
            points[g] = quant_iq3s_grid[q[k] | ((high >> k) & 1) << 8] |
                        (uint64_t)quant_iq3s_grid[q[k + 1] | ((high >> (k + 1)) & 1) << 8] << 32;
        }
        *signs = iq_le32(block + 74 + 4 * s);
        break;
    }
    }
}

/* ---- IQ1_S and IQ1_M ----
 * Their grid values g are -1, 0, 1 and every group of 8 adds a delta of
 * +-1/8, so a kernel takes the odd integers w = 8g + e (e = +-1, the
 * delta's sign; w in -9 .. 9) as its weights: the block's integer sum is
 * then 8 times the scalar reference's sum plus its delta sum, exact, and
 * the result is scaled by 1/8 (the reference adds the two in f32: a
 * rounding apart). */

enum iq1_kind { IQ1_KIND_S, IQ1_KIND_M };

KERNEL_INLINE size_t iq1_block_bytes(const enum iq1_kind kind)
{
    return kind == IQ1_KIND_S ? sizeof(block_iq1_s) : sizeof(block_iq1_m);
}

/* IQ1_M's four little-endian scale words (bytes 48-55). */
KERNEL_INLINE void iq1_m_words(const uint8_t *block, uint16_t words[4])
{
    memcpy(words, block + 48, 8);
}

KERNEL_INLINE uint16_t iq1_d_bits(const enum iq1_kind kind, const uint8_t *block)
{
    if (kind == IQ1_KIND_S)
        return iq_d_bits(block);
    uint16_t w[4];
    iq1_m_words(block, w);
    return (uint16_t)((w[0] >> 12) | ((w[1] >> 8) & 0x00f0) | ((w[2] >> 4) & 0x0f00) | (w[3] & 0xf000));
}

KERNEL_INLINE void iq1_scales(const enum iq1_kind kind, const uint8_t *block, uint8_t scale[16])
{
    if (kind == IQ1_KIND_S) {
        for (int s = 0; s < 8; s++) {
            uint16_t high;
            memcpy(&high, block + 34 + 2 * s, 2);
            scale[2 * s] = scale[2 * s + 1] = (uint8_t)(2 * ((high >> 12) & 7) + 1);
        }
        return;
    }
    uint16_t w[4];
    iq1_m_words(block, w);
    for (int h = 0; h < 16; h++)
        scale[h] = (uint8_t)(2 * ((w[h / 4] >> (6 * ((h / 2) % 2) + 3 * (h % 2))) & 7) + 1);
}

/* Sub-block s: the grid points of its four groups (int8 bytes, value 0
 * lowest) and the delta of each as 8 bytes of -1 or +1. */
KERNEL_INLINE void iq1_sub_block(const enum iq1_kind kind, const uint8_t *block, int s, uint64_t points[4],
                                 uint64_t deltas[4])
{
    const uint64_t plus = 0x0101010101010101ull, minus = ~0ull;
    for (int g = 0; g < 4; g++) {
        int index, negative;
        if (kind == IQ1_KIND_S) {
            uint16_t high;
            memcpy(&high, block + 34 + 2 * s, 2);
            index = block[2 + 4 * s + g] | ((high >> (3 * g)) & 7) << 8;
            negative = high >> 15;
        } else {
            int nibble = (block[32 + 2 * s + g / 2] >> (4 * (g % 2))) & 0x0f;
            index = block[4 * s + g] | (nibble & 7) << 8;
            negative = nibble >> 3;
        }
        points[g] = quant_iq1s_grid[index];
        deltas[g] = negative ? minus : plus;
    }
}

#endif
