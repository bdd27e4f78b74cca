/* AVX2 dot-product kernels of the grid i-quants IQ2_XXS, IQ2_XS, IQ2_S,
 * IQ3_XXS, IQ3_S, IQ1_S and IQ1_M against Q8_K (dot_iq_common.h looks up the
 * grid points; a block's signs and multipliers are unpacked here, in vectors).
 * A sub-block is one ymm of 32 unsigned grid values; its signs negate the
 * activation's quants (xor and subtract with a byte mask), maddubs forms
 * the exact pair sums (at most 2 x 62 x 127, inside 16 bits), and madd
 * applies the multipliers of the two 16-value halves, one per 128-bit lane.
 * Each row sums its blocks into f32 lanes in increasing order; rows never
 * share accumulators, so a row's bits do not depend on its group. */
#include <immintrin.h>

#include "dot_iq_common.h"
#include "kernels_dispatch.h"

KERNEL_INLINE float iq_avx2_hsum(__m256 v)
{
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

/* ---- a block's signs and multipliers, all eight sub-blocks at once ----
 * Unpacking them per sub-block with scalar table lookups cost more than the
 * maddubs work; in vectors a block's eight sign words and eight multiplier
 * pairs take a few instructions each, and a sub-block then picks its own
 * with one shuffle. Only the grid points stay scalar lookups. */

/* The high dword of each of the eight 8-byte words at p, dword s from word s
 * (IQ2_XXS: each sub-block's sign and scale word). shuffle_ps leaves them in
 * the order 0 1 4 5 | 2 3 6 7; permute4x64 restores it. */
KERNEL_INLINE __m256i iq_avx2_high_dwords(const uint8_t *p)
{
    __m256 first = _mm256_castsi256_ps(_mm256_loadu_si256((const __m256i *)p));
    __m256 second = _mm256_castsi256_ps(_mm256_loadu_si256((const __m256i *)(p + 32)));
    __m256i high = _mm256_castps_si256(_mm256_shuffle_ps(first, second, 0xdd));
    return _mm256_permute4x64_epi64(high, 0xd8);
}

/* Four 7-bit sign codes at bits 0, 7, 14, 21 of each dword, as four bytes. */
KERNEL_INLINE __m256i iq_avx2_spread_codes(__m256i codes)
{
    __m256i halves = _mm256_or_si256(_mm256_and_si256(codes, _mm256_set1_epi32(0x3fff)),
                                     _mm256_and_si256(_mm256_slli_epi32(codes, 2), _mm256_set1_epi32(0x3fff0000)));
    return _mm256_or_si256(_mm256_and_si256(halves, _mm256_set1_epi32(0x007f007f)),
                           _mm256_and_si256(_mm256_slli_epi32(halves, 1), _mm256_set1_epi32(0x7f007f00)));
}

/* Bytes holding a 7-bit sign code (bit 7 clear) as sign bytes: bit 7 set
 * when the code has an odd count, making the count even (the format's
 * implied eighth sign). Three xor-shifts fold bits 0-6 of each byte into
 * its bit 7; the bits shifted into the next byte land below its bit 4 and
 * never reach its bit 7. */
KERNEL_INLINE __m256i iq_avx2_with_parity(__m256i codes)
{
    __m256i fold = _mm256_xor_si256(codes, _mm256_slli_epi32(codes, 4));
    fold = _mm256_xor_si256(fold, _mm256_slli_epi32(fold, 2));
    fold = _mm256_xor_si256(fold, _mm256_slli_epi32(fold, 1));
    return _mm256_or_si256(codes, _mm256_and_si256(fold, _mm256_set1_epi8((char)0x80)));
}

/* Eight scale bytes at p (two 4-bit scales each, low nibble first) as
 * iq_sub.scales, dword s from byte s. */
KERNEL_INLINE __m256i iq_avx2_scale_pairs(const uint8_t *p)
{
    __m256i bytes = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
    __m256i pairs = _mm256_or_si256(_mm256_and_si256(bytes, _mm256_set1_epi32(0x0f)),
                                    _mm256_slli_epi32(_mm256_srli_epi32(bytes, 4), 16));
    return _mm256_add_epi32(_mm256_add_epi32(pairs, pairs), _mm256_set1_epi32(0x00010001));
}

/* A block's sign bytes and multipliers, dword s for sub-block s, as
 * iq_sub.signs and iq_sub.scales. */
typedef struct iq_avx2_codes {
    __m256i signs;
    __m256i scales;
} iq_avx2_codes;

KERNEL_INLINE iq_avx2_codes iq_avx2_block_codes(const enum iq_kind kind, const uint8_t *block)
{
    iq_avx2_codes codes;
    switch (kind) {
    case IQ_KIND_2XXS:
    case IQ_KIND_3XXS: {
        /* 28 bits of sign codes and a 4-bit scale a word */
        __m256i words = kind == IQ_KIND_2XXS ? iq_avx2_high_dwords(block + 2)
                                             : _mm256_loadu_si256((const __m256i *)(block + 66));
        codes.signs = iq_avx2_with_parity(iq_avx2_spread_codes(words));
        __m256i scale = _mm256_or_si256(_mm256_srli_epi32(words, 27), _mm256_set1_epi32(1));
        codes.scales = _mm256_or_si256(scale, _mm256_slli_epi32(scale, 16));
        break;
    }
    case IQ_KIND_2XS: {
        /* 16-bit codes, the sign code in the top 7 bits; packus leaves the
         * bytes in the order of iq_avx2_high_dwords's shuffle */
        __m256i first = _mm256_srli_epi16(_mm256_loadu_si256((const __m256i *)(block + 2)), 9);
        __m256i second = _mm256_srli_epi16(_mm256_loadu_si256((const __m256i *)(block + 34)), 9);
        __m256i bytes = _mm256_permute4x64_epi64(_mm256_packus_epi16(first, second), 0xd8);
        codes.signs = iq_avx2_with_parity(bytes);
        codes.scales = iq_avx2_scale_pairs(block + 66);
        break;
    }
    case IQ_KIND_2S:
        codes.signs = _mm256_loadu_si256((const __m256i *)(block + 34));
        codes.scales = iq_avx2_scale_pairs(block + 74);
        break;
    default: {
        /* one 4-bit scale a sub-block, sub-block s at bit 4s of bytes 106-109 */
        __m256i nibbles = _mm256_set1_epi32((int)iq_le32(block + 106));
        __m256i scale = _mm256_srlv_epi32(nibbles, _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
        scale = _mm256_and_si256(scale, _mm256_set1_epi32(0x0f));
        scale = _mm256_add_epi32(_mm256_add_epi32(scale, scale), _mm256_set1_epi32(1));
        codes.signs = _mm256_loadu_si256((const __m256i *)(block + 74));
        codes.scales = _mm256_or_si256(scale, _mm256_slli_epi32(scale, 16));
        break;
    }
    }
    return codes;
}

/* The 128-bit lane of v holding sub-block s's dword, in both lanes. */
KERNEL_INLINE __m256i iq_avx2_lane_of(__m256i v, int s)
{
    return s < 4 ? _mm256_permute2x128_si256(v, v, 0x00) : _mm256_permute2x128_si256(v, v, 0x11);
}

/* 0xff in byte 8g + j where bit j of byte g of dword s % 4 of lane is set. */
KERNEL_INLINE __m256i iq_avx2_sign_mask(__m256i lane, int s)
{
    const int j = 4 * (s % 4);
    const __m256i spread = _mm256_setr_epi8(j, j, j, j, j, j, j, j, j + 1, j + 1, j + 1, j + 1, j + 1, j + 1, j + 1,
                                            j + 1, j + 2, j + 2, j + 2, j + 2, j + 2, j + 2, j + 2, j + 2, j + 3,
                                            j + 3, j + 3, j + 3, j + 3, j + 3, j + 3, j + 3);
    const __m256i bits = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i bytes = _mm256_shuffle_epi8(lane, spread);
    return _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bits), bits);
}

/* The multipliers of dword s % 4 of lane (packed as iq_sub.scales) as words:
 * the first 16 values' in the low 128-bit lane, the last 16 values' in the
 * high one (where maddubs leaves their pair sums). */
KERNEL_INLINE __m256i iq_avx2_multipliers(__m256i lane, int s)
{
    const int j = 4 * (s % 4);
    const __m256i spread = _mm256_setr_epi8(j, j + 1, j, j + 1, j, j + 1, j, j + 1, j, j + 1, j, j + 1, j, j + 1, j,
                                            j + 1, j + 2, j + 3, j + 2, j + 3, j + 2, j + 3, j + 2, j + 3, j + 2,
                                            j + 3, j + 2, j + 3, j + 2, j + 3, j + 2, j + 3);
    return _mm256_shuffle_epi8(lane, spread);
}

KERNEL_INLINE __m256i iq_avx2_points(const uint64_t points[4])
{
    return _mm256_set_epi64x((long long)points[3], (long long)points[2], (long long)points[1],
                             (long long)points[0]);
}

/* IQ3's eight 4-value grid entries of sub-block s, inserted one by one from
 * the table: cheaper than pairing them into 8-byte points in scalar. */
KERNEL_INLINE __m256i iq3_avx2_points(const enum iq_kind kind, const uint8_t *block, int s)
{
    uint32_t index[8];
    const uint32_t *grid = kind == IQ_KIND_3XXS ? quant_iq3xxs_grid : quant_iq3s_grid;
    uint64_t bytes = iq_le64(block + 2 + 8 * s);
    if (kind == IQ_KIND_3XXS) {
        KERNEL_UNROLLED for (int k = 0; k < 8; k++)
            index[k] = (uint32_t)((bytes >> (8 * k)) & 0xff);
    } else {
        /* IQ3_S: bit k of byte 66 + s is bit 8 of index k; interleaved with
         * the low bytes in a vector, the eight indices come back as words */
        const __m128i bits = _mm_set1_epi64x((long long)0x8040201008040201ull);
        __m128i high = _mm_and_si128(_mm_set1_epi8((char)block[66 + s]), bits);
        high = _mm_min_epu8(high, _mm_set1_epi8(1));
        __m128i words = _mm_unpacklo_epi8(_mm_cvtsi64_si128((long long)bytes), high);
        uint64_t first = (uint64_t)_mm_cvtsi128_si64(words), second = (uint64_t)_mm_extract_epi64(words, 1);
        KERNEL_UNROLLED for (int k = 0; k < 8; k++)
            index[k] = (uint32_t)(((k < 4 ? first : second) >> (16 * (k % 4))) & 0xffff);
    }
    __m128i low = _mm_cvtsi32_si128((int)grid[index[0]]);
    __m128i top = _mm_cvtsi32_si128((int)grid[index[4]]);
    low = _mm_insert_epi32(low, (int)grid[index[1]], 1);
    top = _mm_insert_epi32(top, (int)grid[index[5]], 1);
    low = _mm_insert_epi32(low, (int)grid[index[2]], 2);
    top = _mm_insert_epi32(top, (int)grid[index[6]], 2);
    low = _mm_insert_epi32(low, (int)grid[index[3]], 3);
    top = _mm_insert_epi32(top, (int)grid[index[7]], 3);
    return _mm256_inserti128_si256(_mm256_castsi128_si256(low), top, 1);
}

/* One block's scaled integer sum in eight int32 lanes. */
KERNEL_INLINE __m256i iq_avx2_block(const uint8_t *block, const block_q8_k *y, const enum iq_kind kind)
{
    iq_avx2_codes codes = iq_avx2_block_codes(kind, block);
    __m256i sum = _mm256_setzero_si256();
    KERNEL_UNROLLED for (int s = 0; s < 8; s++) {
        __m256i grid;
        if (kind == IQ_KIND_3XXS || kind == IQ_KIND_3S) {
            grid = iq3_avx2_points(kind, block, s);
        } else {
            uint64_t points[4];
            iq_sub_points(kind, block, s, points);
            grid = iq_avx2_points(points);
        }
        __m256i mask = iq_avx2_sign_mask(iq_avx2_lane_of(codes.signs, s), s);
        __m256i q = _mm256_loadu_si256((const __m256i *)(y->qs + 32 * s));
        q = _mm256_sub_epi8(_mm256_xor_si256(q, mask), mask);
        __m256i pairs = _mm256_maddubs_epi16(grid, q);
        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(pairs, iq_avx2_multipliers(iq_avx2_lane_of(codes.scales, s), s)));
    }
    return sum;
}

KERNEL_INLINE void iq_avx2_group(const int R, int64_t n, const uint8_t *rows, size_t row_bytes,
                                 const void *activation, float *out, const enum iq_kind kind)
{
    const block_q8_k *a = activation;
    const int64_t nb = n / QK_K;
    const size_t block_bytes = iq_block_bytes(kind);
    __m256 acc[KERNEL_GROUP_ROWS];
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        KERNEL_UNROLLED for (int r = 0; r < R; r++) {
            const uint8_t *row = rows + (size_t)r * row_bytes;
            __builtin_prefetch(row + (size_t)(b + KERNEL_PREFETCH_BLOCKS) * block_bytes);
            const uint8_t *block = row + (size_t)b * block_bytes;
            __m256i sum = iq_avx2_block(block, a + b, kind);
            float d = _cvtsh_ss(iq_d_bits(block)) * a[b].d;
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_set1_ps(d), acc[r]);
        }
    }
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        out[r] = iq_factor(kind) * iq_avx2_hsum(acc[r]);
}

/* IQ1: a block's delta signs and multipliers in vectors, as for the other
 * grid formats (iq_avx2_codes): the 16 bytes holding the delta signs in
 * both 128-bit lanes, and iq_sub.scales of sub-block s in dword s. */
typedef struct iq1_avx2_codes {
    __m256i high; /* IQ1_S: qh words (delta sign at bit 15); IQ1_M: qh nibbles (delta sign at bit 3) */
    __m256i scales;
} iq1_avx2_codes;

KERNEL_INLINE iq1_avx2_codes iq1_avx2_block_codes(const enum iq1_kind kind, const uint8_t *block)
{
    iq1_avx2_codes codes;
    if (kind == IQ1_KIND_S) {
        __m128i words = _mm_loadu_si128((const __m128i *)(block + 34));
        codes.high = _mm256_broadcastsi128_si256(words);
        __m256i scale = _mm256_and_si256(_mm256_srli_epi32(_mm256_cvtepu16_epi32(words), 11), _mm256_set1_epi32(0x0e));
        scale = _mm256_or_si256(scale, _mm256_set1_epi32(1));
        codes.scales = _mm256_or_si256(scale, _mm256_slli_epi32(scale, 16));
    } else {
        codes.high = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(block + 32)));
        /* word s / 2 of the four scale words, shifted by 6 for odd s: 3 bits a half */
        __m128i words = _mm_loadl_epi64((const __m128i *)(block + 48));
        __m256i scale = _mm256_srlv_epi32(_mm256_cvtepu16_epi32(_mm_unpacklo_epi16(words, words)),
                                          _mm256_setr_epi32(0, 6, 0, 6, 0, 6, 0, 6));
        __m256i pairs = _mm256_or_si256(_mm256_and_si256(scale, _mm256_set1_epi32(7)),
                                        _mm256_and_si256(_mm256_slli_epi32(scale, 13), _mm256_set1_epi32(0x70000)));
        codes.scales = _mm256_add_epi32(_mm256_add_epi32(pairs, pairs), _mm256_set1_epi32(0x00010001));
    }
    return codes;
}

/* The deltas of sub-block s: -1 or +1 in each byte of a group. */
KERNEL_INLINE __m256i iq1_avx2_deltas(const enum iq1_kind kind, __m256i high, int s)
{
    __m256i spread, bit;
    if (kind == IQ1_KIND_S) {
        spread = _mm256_set1_epi8((char)(2 * s + 1));
        bit = _mm256_set1_epi8((char)0x80);
    } else {
        const int j = 2 * s;
        spread = _mm256_setr_epi8(j, j, j, j, j, j, j, j, j, j, j, j, j, j, j, j, j + 1, j + 1, j + 1, j + 1, j + 1,
                                  j + 1, j + 1, j + 1, j + 1, j + 1, j + 1, j + 1, j + 1, j + 1, j + 1, j + 1);
        bit = _mm256_setr_epi64x(0x0808080808080808ll, (long long)0x8080808080808080ull, 0x0808080808080808ll,
                                 (long long)0x8080808080808080ull);
    }
    __m256i negative = _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(high, spread), bit), bit);
    return _mm256_or_si256(negative, _mm256_set1_epi8(1));
}

/* IQ1: one block's integer sum, 8 times the reference's plus its delta sum
 * (dot_iq_common.h), in eight int32 lanes. sign() forms 8g from g in
 * -1, 0, 1; maddubs takes |w| and the quants with w's sign (w is odd, never
 * 0; the pair sums are at most 2 x 9 x 127). */
KERNEL_INLINE __m256i iq1_avx2_block(const uint8_t *block, const block_q8_k *y, const enum iq1_kind kind)
{
    const __m256i eight = _mm256_set1_epi8(8);
    iq1_avx2_codes codes = iq1_avx2_block_codes(kind, block);
    __m256i sum = _mm256_setzero_si256();
    KERNEL_UNROLLED for (int s = 0; s < 8; s++) {
        uint64_t points[4];
        iq1_sub_points(kind, block, s, points);
        __m256i g8 = _mm256_sign_epi8(eight, iq_avx2_points(points));
        __m256i w = _mm256_add_epi8(g8, iq1_avx2_deltas(kind, codes.high, s));
        __m256i q = _mm256_loadu_si256((const __m256i *)(y->qs + 32 * s));
        __m256i pairs = _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(q, w));
        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(pairs, iq_avx2_multipliers(iq_avx2_lane_of(codes.scales, s), s)));
    }
    return sum;
}

KERNEL_INLINE void iq1_avx2_group(const int R, int64_t n, const uint8_t *rows, size_t row_bytes,
                                  const void *activation, float *out, const enum iq1_kind kind)
{
    const block_q8_k *a = activation;
    const int64_t nb = n / QK_K;
    const size_t block_bytes = iq1_block_bytes(kind);
    __m256 acc[KERNEL_GROUP_ROWS];
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        KERNEL_UNROLLED for (int r = 0; r < R; r++) {
            const uint8_t *row = rows + (size_t)r * row_bytes;
            __builtin_prefetch(row + (size_t)(b + KERNEL_PREFETCH_BLOCKS) * block_bytes);
            const uint8_t *block = row + (size_t)b * block_bytes;
            __m256i sum = iq1_avx2_block(block, a + b, kind);
            float d = _cvtsh_ss(iq1_d_bits(kind, block)) * a[b].d;
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_set1_ps(d), acc[r]);
        }
    }
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        out[r] = 0.125f * iq_avx2_hsum(acc[r]);
}

#define IQ_AVX2_KERNELS(name, group_fn, kind)                                                        \
    KERNEL_INLINE void name##_group(const int R, int64_t n, const uint8_t *rows, size_t row_bytes,    \
                                    const void *activation, float *out)                              \
    {                                                                                                \
        group_fn(R, n, rows, row_bytes, activation, out, kind);                                      \
    }                                                                                                \
    KERNEL_DEFINE_DOT_ROWS(name##_rows, name##_group)                                                \
    KERNEL_DEFINE_DOT_DECODE_GROUP(name##_decode, name##_group)                                      \
    void avx2_dot_rows_##name(int64_t n, const void *weights, size_t row_bytes, int64_t n_rows,      \
                              const void *activation, float *out)                                    \
    {                                                                                                \
        name##_rows(n, weights, row_bytes, n_rows, activation, out);                                 \
    }                                                                                                \
    void avx2_dot_decode_##name(int64_t n, const void *weights, size_t row_bytes, int64_t n_rows,    \
                                const void *activation, float *out)                                  \
    {                                                                                                \
        name##_decode(n, weights, row_bytes, n_rows, activation, out);                               \
    }

IQ_AVX2_KERNELS(iq2_xxs, iq_avx2_group, IQ_KIND_2XXS)
IQ_AVX2_KERNELS(iq2_xs, iq_avx2_group, IQ_KIND_2XS)
IQ_AVX2_KERNELS(iq2_s, iq_avx2_group, IQ_KIND_2S)
IQ_AVX2_KERNELS(iq3_xxs, iq_avx2_group, IQ_KIND_3XXS)
IQ_AVX2_KERNELS(iq3_s, iq_avx2_group, IQ_KIND_3S)
IQ_AVX2_KERNELS(iq1_s, iq1_avx2_group, IQ1_KIND_S)
IQ_AVX2_KERNELS(iq1_m, iq1_avx2_group, IQ1_KIND_M)
