/* Shared by the SIMD dot-product files (dot_avx2.c, dot_avx512.c, dot_neon.c):
 * the row-group driver and the ISA-independent unpacking of K-quant scales.
 * Private to src/kernels.
 *
 * Every SIMD kernel computes rows in groups of 4 and the remainder one by one
 * with the same per-row code, so a row's operations (and thus its bits) do not
 * depend on the group it lands in: batch invariance. Float multiply-adds in
 * the kernels are explicit fused intrinsics, never left to the compiler's
 * contraction, so every instantiation rounds identically. */
#ifndef BMOE_KERNELS_DOT_COMMON_H
#define BMOE_KERNELS_DOT_COMMON_H

#include <stdint.h>
#include <string.h>

#include "kernels.h"
#include "quant/quant_blocks.h"

#define KERNEL_INLINE static inline __attribute__((always_inline))

/* Rows per group: enough to share each activation load and its unpacking,
 * few enough that every row's accumulators stay in registers. */
#define KERNEL_GROUP_ROWS 4

/* A loop over the rows of a group (or another short constant-count loop),
 * fully unrolled so that per-row accumulators live in registers. */
#define KERNEL_UNROLLED _Pragma("GCC unroll 8")

/* Blocks ahead to prefetch in each row of a group. */
#define KERNEL_PREFETCH_BLOCKS 4

/* Defines dot_rows_fn `name` from `group(R, n, rows, row_bytes, activation,
 * out)`, an always-inline function that computes R consecutive rows. */
#define KERNEL_DEFINE_DOT_ROWS(name, group)                                                  \
    static void name(int64_t n, const void *weights, size_t row_bytes, int64_t n_rows,       \
                     const void *activation, float *out)                                     \
    {                                                                                        \
        const uint8_t *rows = weights;                                                       \
        int64_t r = 0;                                                                       \
        for (; r + KERNEL_GROUP_ROWS <= n_rows; r += KERNEL_GROUP_ROWS)                      \
            group(KERNEL_GROUP_ROWS, n, rows + (size_t)r * row_bytes, row_bytes, activation, \
                  out + r);                                                                  \
        for (; r < n_rows; r++)                                                              \
            group(1, n, rows + (size_t)r * row_bytes, row_bytes, activation, out + r);       \
    }

/* The 12-byte scale/min packing of Q4_K and Q5_K (quant-formats.md 4.1)
 * unpacked into 16 bytes: sc[0..7] then m[0..7], four at a time. */
KERNEL_INLINE void kernel_k4_unpack_scales(const uint8_t *packed, uint8_t out[16])
{
    uint32_t a, b, c;
    memcpy(&a, packed, 4);
    memcpy(&b, packed + 4, 4);
    memcpy(&c, packed + 8, 4);
    uint32_t words[4];
    words[0] = a & 0x3f3f3f3fu;
    words[1] = (c & 0x0f0f0f0fu) | (((a >> 6) & 0x03030303u) << 4);
    words[2] = b & 0x3f3f3f3fu;
    words[3] = ((c >> 4) & 0x0f0f0f0fu) | (((b >> 6) & 0x03030303u) << 4);
    memcpy(out, words, 16);
}

#endif
