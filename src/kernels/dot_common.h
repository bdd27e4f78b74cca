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

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "base/fp16.h"
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

/* Decode (one token over many rows) is memory-bound: the rows are read as
 * KERNEL_DECODE_STREAMS sequential streams in turn (row i of each, then row
 * i + 1 of each), and each row's lines are requested
 * KERNEL_DECODE_PREFETCH_BYTES ahead. Two streams keep more requests in
 * flight than one for the 4-bit formats; more streams than two break the
 * runs the hardware prefetchers follow into pieces too short to train them,
 * which costs more than the extra requests gain (both chosen by
 * measurement; the figures are in the commit history). */
#define KERNEL_DECODE_STREAMS 2
#define KERNEL_DECODE_PREFETCH_BYTES 2048
#define KERNEL_CACHE_LINE 64

/* Defines dot_rows_fn `name` for decode: `state_init(&state, n, activation)`
 * once per call prepares what every row shares (activation blocks rearranged
 * for the unpacked weights, constants), then `row_fn(&state, n, row,
 * activation, out)` computes one row with the same operations as the group
 * function of dot_rows for that type, so the bits are those of dot_rows. */
#define KERNEL_DEFINE_DOT_DECODE(name, state_type, state_init, row_fn)                          \
    static void name(int64_t n, const void *weights, size_t row_bytes, int64_t n_rows,          \
                     const void *activation, float *out)                                        \
    {                                                                                           \
        state_type state;                                                                       \
        state_init(&state, n, activation);                                                      \
        const uint8_t *rows = weights;                                                          \
        int64_t per_stream = (n_rows + KERNEL_DECODE_STREAMS - 1) / KERNEL_DECODE_STREAMS;      \
        for (int64_t i = 0; i < per_stream; i++) {                                              \
            for (int64_t r = i; r < n_rows; r += per_stream) {                                  \
                const uint8_t *row = rows + (size_t)r * row_bytes;                              \
                for (size_t line = 0; line < row_bytes; line += KERNEL_CACHE_LINE)              \
                    __builtin_prefetch(row + KERNEL_DECODE_PREFETCH_BYTES + line, 0, 3);        \
                row_fn(&state, n, row, activation, out + r);                                    \
            }                                                                                   \
        }                                                                                       \
    }

/* For types whose rows share nothing worth preparing: each row is the
 * group function on one row. */
typedef struct kernel_no_state {
    char unused;
} kernel_no_state;

KERNEL_INLINE void kernel_no_state_init(kernel_no_state *state, int64_t n, const void *activation)
{
    (void)state, (void)n, (void)activation;
}

#define KERNEL_DEFINE_DOT_DECODE_GROUP(name, group)                                             \
    KERNEL_INLINE void name##_row(kernel_no_state *state, int64_t n, const uint8_t *row,        \
                                  const void *activation, float *out)                           \
    {                                                                                           \
        (void)state;                                                                            \
        group(1, n, row, 0, activation, out);                                                   \
    }                                                                                           \
    KERNEL_DEFINE_DOT_DECODE(name, kernel_no_state, kernel_no_state_init, name##_row)

/* Defines dot_tile_fn `name` from `tile(R, T, n, rows, row_bytes, activations,
 * activation_stride, out, out_stride)`, an always-inline function that
 * computes R consecutive rows for T consecutive activation rows, unpacking
 * each weight block once for the T tokens. Tiles of ROWS x TOKENS (at most
 * 4 x 8) cover what they can; the rest is covered by tiles of 2 and 1 rows
 * and of the remaining token count, so that a few tokens (an expert's share
 * of a batch) still share the unpacking. Rows outer: a tile's weight rows stay in L1 while
 * every token passes over them. An element's operations are those of the
 * group function of dot_rows for the same type (the tile calls the same
 * per-row, per-token block code), so its bits are too. */
#define KERNEL_TILE_CALL(tile, R, T)                                                          \
    tile((R), (T), n, rows + (size_t)r * row_bytes, row_bytes,                                \
         acts + (size_t)t * activation_stride, activation_stride, out + t * out_stride + r,   \
         out_stride)

/* The remainder of fewer than TOKENS tokens as one tile of its own count. */
#define KERNEL_TILE_TOKENS(tile, R, TOKENS)                                                   \
    do {                                                                                      \
        int64_t t = 0;                                                                        \
        for (; t + (TOKENS) <= n_tokens; t += (TOKENS))                                       \
            KERNEL_TILE_CALL(tile, R, TOKENS);                                                \
        switch ((TOKENS) > 1 ? n_tokens - t : 0) {                                            \
        case 7: KERNEL_TILE_CALL(tile, R, ((TOKENS) > 7 ? 7 : 1)); break;                     \
        case 6: KERNEL_TILE_CALL(tile, R, ((TOKENS) > 6 ? 6 : 1)); break;                     \
        case 5: KERNEL_TILE_CALL(tile, R, ((TOKENS) > 5 ? 5 : 1)); break;                     \
        case 4: KERNEL_TILE_CALL(tile, R, ((TOKENS) > 4 ? 4 : 1)); break;                     \
        case 3: KERNEL_TILE_CALL(tile, R, ((TOKENS) > 3 ? 3 : 1)); break;                     \
        case 2: KERNEL_TILE_CALL(tile, R, ((TOKENS) > 2 ? 2 : 1)); break;                     \
        case 1: KERNEL_TILE_CALL(tile, R, 1); break;                                          \
        default: break;                                                                       \
        }                                                                                     \
    } while (0)

#define KERNEL_DEFINE_DOT_TILE(name, tile, ROWS, TOKENS)                                      \
    _Static_assert((ROWS) >= 1 && (ROWS) <= KERNEL_TILE_MAX_ROWS && (TOKENS) >= 1 &&          \
                   (TOKENS) <= KERNEL_TILE_MAX_TOKENS, "tile shape");                         \
    static void name(int64_t n, const void *weights, size_t row_bytes, int64_t n_rows,        \
                     const void *activations, size_t activation_stride, int64_t n_tokens,     \
                     float *out, int64_t out_stride)                                          \
    {                                                                                         \
        const uint8_t *rows = weights;                                                        \
        const uint8_t *acts = activations;                                                    \
        int64_t r = 0;                                                                        \
        for (; r + (ROWS) <= n_rows; r += (ROWS))                                             \
            KERNEL_TILE_TOKENS(tile, ROWS, TOKENS);                                           \
        if ((ROWS) > 2 && n_rows - r >= 2) {                                                  \
            KERNEL_TILE_TOKENS(tile, ((ROWS) > 2 ? 2 : 1), TOKENS);                           \
            r += 2;                                                                           \
        }                                                                                     \
        for (; r < n_rows; r++)                                                               \
            KERNEL_TILE_TOKENS(tile, 1, TOKENS);                                              \
    }

/* Tiles with the tokens outer: for each run of up to TOKENS tokens, every
 * row of the call in turn, ROWS at a time (the last few one at a time). The
 * call's rows (a chunk that matmul sizes to stay in L1/L2) pass under each
 * run of tokens, so a token's activations are read once per call, not once
 * per tile of rows, which matters when a batch's activations do not fit in
 * L2. KERNEL_TILE_ALL_ROWS runs `tile` over every row for T tokens
 * (1 <= T <= TOKENS, known at run time) at acts_ with stride stride_, which
 * may be activations the caller prepared in the tile's own layout. Same bits
 * as the rows-outer order: each element is one tile's work either way. */
#define KERNEL_TILE_ROW_RUN(tile, ROWS, T, acts_, stride_, out_)                               \
    do {                                                                                       \
        int64_t r = 0;                                                                         \
        for (; r + (ROWS) <= n_rows; r += (ROWS))                                              \
            tile((ROWS), (T), n, rows + (size_t)r * row_bytes, row_bytes, (acts_), (stride_),  \
                 (out_) + r, out_stride);                                                      \
        for (; r < n_rows; r++)                                                                \
            tile(1, (T), n, rows + (size_t)r * row_bytes, row_bytes, (acts_), (stride_),       \
                 (out_) + r, out_stride);                                                      \
    } while (0)

#define KERNEL_TILE_ALL_ROWS(tile, ROWS, TOKENS, T, acts_, stride_, out_)                            \
    do {                                                                                       \
        switch (T) {                                                                           \
        case 8: KERNEL_TILE_ROW_RUN(tile, ROWS, ((TOKENS) > 7 ? 8 : 1), acts_, stride_, out_); break; \
        case 7: KERNEL_TILE_ROW_RUN(tile, ROWS, ((TOKENS) > 6 ? 7 : 1), acts_, stride_, out_); break; \
        case 6: KERNEL_TILE_ROW_RUN(tile, ROWS, ((TOKENS) > 5 ? 6 : 1), acts_, stride_, out_); break; \
        case 5: KERNEL_TILE_ROW_RUN(tile, ROWS, ((TOKENS) > 4 ? 5 : 1), acts_, stride_, out_); break; \
        case 4: KERNEL_TILE_ROW_RUN(tile, ROWS, ((TOKENS) > 3 ? 4 : 1), acts_, stride_, out_); break; \
        case 3: KERNEL_TILE_ROW_RUN(tile, ROWS, ((TOKENS) > 2 ? 3 : 1), acts_, stride_, out_); break; \
        case 2: KERNEL_TILE_ROW_RUN(tile, ROWS, ((TOKENS) > 1 ? 2 : 1), acts_, stride_, out_); break; \
        default: KERNEL_TILE_ROW_RUN(tile, ROWS, 1, acts_, stride_, out_); break;                    \
        }                                                                                      \
    } while (0)

#define KERNEL_DEFINE_DOT_TILE_TOKENS_OUTER(name, tile, ROWS, TOKENS)                          \
    _Static_assert((ROWS) >= 1 && (ROWS) <= KERNEL_TILE_MAX_ROWS && (TOKENS) >= 1 &&          \
                   (TOKENS) <= KERNEL_TILE_MAX_TOKENS, "tile shape");                         \
    static void name(int64_t n, const void *weights, size_t row_bytes, int64_t n_rows,         \
                     const void *activations, size_t activation_stride, int64_t n_tokens,      \
                     float *out, int64_t out_stride)                                           \
    {                                                                                          \
        const uint8_t *rows = weights;                                                         \
        const uint8_t *acts = activations;                                                     \
        for (int64_t t = 0; t < n_tokens; t += (TOKENS)) {                                     \
            int64_t T = n_tokens - t < (TOKENS) ? n_tokens - t : (TOKENS);                     \
            KERNEL_TILE_ALL_ROWS(tile, ROWS, TOKENS, T, acts + (size_t)t * activation_stride,  \
                                 activation_stride, out + t * out_stride);                     \
        }                                                                                      \
    }

/* Largest tile dimensions any set uses (sizes of the accumulator arrays). */
#define KERNEL_TILE_MAX_ROWS 4
#define KERNEL_TILE_MAX_TOKENS 8

/* quant_e8m0_half(e) by table (the same bits). */
KERNEL_INLINE float kernel_e8m0_half(uint8_t e)
{
    float d;
    memcpy(&d, &quant_e8m0_half_bits[e], sizeof d);
    return d;
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

/* The last elements of an axpy (fewer than a vector) one at a time, from i
 * to n: fmaf rounds once, as the vector lanes' fused multiply-adds do.
 * element_bytes: 4 for F32 rows, 2 for F16 rows. */
KERNEL_INLINE void kernel_axpy_tail(int64_t i, int64_t n, int64_t n_rows, const float *a, const uint8_t *rows,
                                    size_t x_stride, size_t element_bytes, float *y)
{
    for (; i < n; i++) {
        float sum = y[i];
        const uint8_t *row = rows + element_bytes * (size_t)i;
        for (int64_t r = 0; r < n_rows; r++, row += x_stride) {
            float value;
            if (element_bytes == 2) {
                uint16_t h;
                memcpy(&h, row, sizeof h);
                value = fp16_to_fp32(h);
            } else {
                memcpy(&value, row, sizeof value);
            }
            sum = fmaf(a[r], value, sum);
        }
        y[i] = sum;
    }
}

#endif
