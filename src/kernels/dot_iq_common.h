/* Shared by the SIMD dot-product kernels of the grid i-quants (dot_iq_avx2.c,
 * dot_iq_neon.c): the ISA-independent reading of a block.
 * Private to src/kernels.
 *
 * Every kernel takes a 32-value sub-block (iq_sub) as four 8-byte grid points
 * (IQ3's 4-value points in pairs) whose values are unsigned (at most 62),
 * four sign bytes (set bit: negative value) that the kernel applies to the
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

KERNEL_INLINE uint64_t iq_le64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* Four sign bytes from four 7-bit codes at bits 0, 7, 14, 21. */
KERNEL_INLINE uint32_t iq_sign_bytes4(uint32_t codes)
{
    return (uint32_t)quant_iq_sign_bytes[codes & 127] | (uint32_t)quant_iq_sign_bytes[(codes >> 7) & 127] << 8 |
           (uint32_t)quant_iq_sign_bytes[(codes >> 14) & 127] << 16 |
           (uint32_t)quant_iq_sign_bytes[(codes >> 21) & 127] << 24;
}

/* One 32-value sub-block as every kernel takes it. */
typedef struct iq_sub {
    uint64_t points[4]; /* values 8g .. 8g + 7 in points[g], value 8g lowest */
    uint32_t signs;     /* the sign byte of group g in byte g */
    uint32_t scales;    /* multiplier of the first 16 values in bits 0-15, of the last 16 above */
} iq_sub;

/* The multipliers 2s + 1 of a byte's two 4-bit scales (low nibble: first
 * 16 values), packed as iq_sub.scales. */
KERNEL_INLINE uint32_t iq_scale_pair(uint32_t byte)
{
    return (2 * (byte & 0x0f) + 1) | (2 * (byte >> 4) + 1) << 16;
}

/* One multiplier for all 32 values, packed as iq_sub.scales. */
KERNEL_INLINE uint32_t iq_scale_same(uint32_t scale)
{
    return (2 * scale + 1) * 0x00010001u;
}

/* The four grid points of sub-block s (0..7) of a block, as iq_sub.points.
 * Index bytes standing alone are read one by one: taken apart from a word
 * they went through the high-byte registers and stack spills, costing more
 * than a read each. Fields sharing bytes are read in words and taken apart
 * with shifts. */
KERNEL_INLINE void iq_sub_points(const enum iq_kind kind, const uint8_t *block, int s, uint64_t points[4])
{
    switch (kind) {
    case IQ_KIND_2XXS: {
        KERNEL_UNROLLED for (int g = 0; g < 4; g++)
            points[g] = quant_iq2xxs_grid[block[2 + 8 * s + g]];
        break;
    }
    case IQ_KIND_2XS: {
        uint64_t codes = iq_le64(block + 2 + 8 * s); /* four 16-bit codes: 9 index bits, 7 sign bits */
        KERNEL_UNROLLED for (int g = 0; g < 4; g++)
            points[g] = quant_iq2xs_grid[(codes >> (16 * g)) & 511];
        break;
    }
    case IQ_KIND_2S: {
        uint32_t high = block[66 + s];
        KERNEL_UNROLLED for (int g = 0; g < 4; g++)
            points[g] = quant_iq2s_grid[block[2 + 4 * s + g] | ((high >> (2 * g)) & 3) << 8];
        break;
    }
    case IQ_KIND_3XXS: {
        uint64_t indices = iq_le64(block + 2 + 8 * s);
        KERNEL_UNROLLED for (int g = 0; g < 4; g++)
            points[g] = quant_iq3xxs_grid[(indices >> (16 * g)) & 0xff] |
                        (uint64_t)quant_iq3xxs_grid[(indices >> (16 * g + 8)) & 0xff] << 32;
        break;
    }
    default: {
        uint64_t low = iq_le64(block + 2 + 8 * s);
        uint64_t high = (uint64_t)block[66 + s] << 8; /* bit k: bit 8 of index k */
        KERNEL_UNROLLED for (int g = 0; g < 4; g++) {
            int k = 2 * g;
            uint32_t first = (uint32_t)(((low >> (8 * k)) & 0xff) | ((high >> k) & 0x100));
            uint32_t second = (uint32_t)(((low >> (8 * k + 8)) & 0xff) | ((high >> (k + 1)) & 0x100));
            points[g] = quant_iq3s_grid[first] | (uint64_t)quant_iq3s_grid[second] << 32;
        }
        break;
    }
    }
}

/* Sub-block s (0..7) of a block. */
KERNEL_INLINE iq_sub iq_sub_block(const enum iq_kind kind, const uint8_t *block, int s)
{
    iq_sub sub;
    iq_sub_points(kind, block, s, sub.points);
    switch (kind) {
    case IQ_KIND_2XXS: {
        uint32_t signs_scale = iq_le32(block + 6 + 8 * s);
        sub.signs = iq_sign_bytes4(signs_scale);
        sub.scales = iq_scale_same(signs_scale >> 28);
        break;
    }
    case IQ_KIND_2XS: {
        uint64_t codes = iq_le64(block + 2 + 8 * s);
        uint32_t signs = 0;
        KERNEL_UNROLLED for (int g = 0; g < 4; g++)
            signs |= (uint32_t)quant_iq_sign_bytes[(codes >> (16 * g + 9)) & 127] << (8 * g);
        sub.signs = signs;
        sub.scales = iq_scale_pair(block[66 + s]);
        break;
    }
    case IQ_KIND_2S:
        sub.signs = iq_le32(block + 34 + 4 * s);
        sub.scales = iq_scale_pair(block[74 + s]);
        break;
    case IQ_KIND_3XXS: {
        uint32_t signs_scale = iq_le32(block + 66 + 4 * s);
        sub.signs = iq_sign_bytes4(signs_scale);
        sub.scales = iq_scale_same(signs_scale >> 28);
        break;
    }
    default:
        sub.signs = iq_le32(block + 74 + 4 * s);
        sub.scales = iq_scale_same((block[106 + s / 2] >> (4 * (s % 2))) & 0x0f);
        break;
    }
    return sub;
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

/* Sub-block s: the grid points of its four groups (int8 bytes, value 0
 * lowest), the delta of each as 8 bytes of -1 or +1, and the multipliers
 * of its halves packed as iq_sub.scales. */
typedef struct iq1_sub {
    uint64_t points[4];
    uint64_t deltas[4];
    uint32_t scales;
} iq1_sub;

/* The grid points of sub-block s, as iq1_sub.points. */
KERNEL_INLINE void iq1_sub_points(const enum iq1_kind kind, const uint8_t *block, int s, uint64_t points[4])
{
    const uint8_t *low = block + (kind == IQ1_KIND_S ? 2 : 0) + 4 * s;
    /* The 16-bit word of high bits (IQ1_S: 4 x 3 index bits, then the scale
     * and the delta's sign; IQ1_M: a nibble a group, 3 index bits and the
     * delta's sign) read inside a 32-bit one that stays within the block,
     * IQ1_S's in its top half: a 16-bit variable was spilled as 16 bits and
     * reloaded as 32, a store the load could not be forwarded from. */
    uint32_t high = iq_le32(block + 32 + 2 * s);
    const int first = kind == IQ1_KIND_S ? 16 : 0, stride = kind == IQ1_KIND_S ? 3 : 4;
    KERNEL_UNROLLED for (int g = 0; g < 4; g++)
        points[g] = quant_iq1s_grid[low[g] | ((high >> (first + stride * g)) & 7) << 8];
}

KERNEL_INLINE iq1_sub iq1_sub_block(const enum iq1_kind kind, const uint8_t *block, int s)
{
    const uint64_t plus = 0x0101010101010101ull, minus = ~0ull;
    iq1_sub sub;
    iq1_sub_points(kind, block, s, sub.points);
    if (kind == IQ1_KIND_S) {
        uint16_t word;
        memcpy(&word, block + 34 + 2 * s, 2);
        uint32_t high = word;
        KERNEL_UNROLLED for (int g = 0; g < 4; g++)
            sub.deltas[g] = high >> 15 ? minus : plus;
        sub.scales = iq_scale_same((high >> 12) & 7);
    } else {
        uint16_t word;
        memcpy(&word, block + 32 + 2 * s, 2);
        uint32_t high = word;
        KERNEL_UNROLLED for (int g = 0; g < 4; g++)
            sub.deltas[g] = (high >> (4 * g + 3)) & 1 ? minus : plus;
        uint16_t words[4];
        iq1_m_words(block, words);
        uint32_t scales = (uint32_t)words[s / 2] >> (6 * (s % 2)); /* 3 bits a half */
        sub.scales = (2 * (scales & 7) + 1) | (2 * ((scales >> 3) & 7) + 1) << 16;
    }
    return sub;
}

#endif
