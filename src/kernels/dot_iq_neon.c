/* NEON + dotprod dot-product kernels of the grid i-quants IQ2_XXS, IQ2_XS,
 * IQ2_S, IQ3_XXS, IQ3_S, IQ1_S and IQ1_M against Q8_K (dot_iq_common.h
 * reads the blocks). A sub-block is two q registers of 16 grid values (at most 62, so
 * they are valid int8); its signs negate the activation's quants (xor and
 * subtract with a byte mask from vtst), sdot forms the exact sums of four
 * products, and a multiply-accumulate applies the multiplier of each
 * 16-value half. Each row sums its blocks into f32 lanes in increasing
 * order; rows never share accumulators. */
#include <arm_neon.h>

#include "dot_iq_common.h"
#include "kernels_dispatch.h"

KERNEL_INLINE float iq_neon_f16(uint16_t h)
{
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

/* The activation's 16 quants with the values of sign bytes `low` (first
 * 8) and `high` (last 8) applied. */
KERNEL_INLINE int8x16_t iq_neon_apply_signs(int8x16_t q, uint8_t low, uint8_t high)
{
    static const uint8_t bit_values[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    uint8x16_t bytes = vcombine_u8(vdup_n_u8(low), vdup_n_u8(high));
    int8x16_t mask = vreinterpretq_s8_u8(vtstq_u8(bytes, vld1q_u8(bit_values)));
    return vsubq_s8(veorq_s8(q, mask), mask);
}

KERNEL_INLINE int8x16_t iq_neon_points(uint64_t first, uint64_t second)
{
    return vreinterpretq_s8_u64(vcombine_u64(vcreate_u64(first), vcreate_u64(second)));
}

/* One block's scaled integer sum in four int32 lanes. */
KERNEL_INLINE int32x4_t iq_neon_block(const uint8_t *block, const block_q8_k *y, const enum iq_kind kind)
{
    int32x4_t sum = vdupq_n_s32(0);
    KERNEL_UNROLLED for (int s = 0; s < 8; s++) {
        iq_sub sub = iq_sub_block(kind, block, s);
        int8x16_t q_low = iq_neon_apply_signs(vld1q_s8(y->qs + 32 * s), (uint8_t)sub.signs, (uint8_t)(sub.signs >> 8));
        int8x16_t q_high = iq_neon_apply_signs(vld1q_s8(y->qs + 32 * s + 16), (uint8_t)(sub.signs >> 16),
                                               (uint8_t)(sub.signs >> 24));
        int32x4_t low = vdotq_s32(vdupq_n_s32(0), iq_neon_points(sub.points[0], sub.points[1]), q_low);
        int32x4_t high = vdotq_s32(vdupq_n_s32(0), iq_neon_points(sub.points[2], sub.points[3]), q_high);
        sum = vmlaq_n_s32(sum, low, (int32_t)(sub.scales & 0xffff));
        sum = vmlaq_n_s32(sum, high, (int32_t)(sub.scales >> 16));
    }
    return sum;
}

KERNEL_INLINE void iq_neon_group(const int R, int64_t n, const uint8_t *rows, size_t row_bytes,
                                 const void *activation, float *out, const enum iq_kind kind)
{
    const block_q8_k *a = activation;
    const int64_t nb = n / QK_K;
    const size_t block_bytes = iq_block_bytes(kind);
    float32x4_t acc[KERNEL_GROUP_ROWS];
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        acc[r] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        KERNEL_UNROLLED for (int r = 0; r < R; r++) {
            const uint8_t *row = rows + (size_t)r * row_bytes;
            __builtin_prefetch(row + (size_t)(b + KERNEL_PREFETCH_BLOCKS) * block_bytes);
            const uint8_t *block = row + (size_t)b * block_bytes;
            int32x4_t sum = iq_neon_block(block, a + b, kind);
            float d = iq_neon_f16(iq_d_bits(block)) * a[b].d;
            acc[r] = vfmaq_n_f32(acc[r], vcvtq_f32_s32(sum), d);
        }
    }
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        out[r] = iq_factor(kind) * vaddvq_f32(acc[r]);
}

/* IQ1: one block's integer sum, 8 times the reference's plus its delta sum
 * (dot_iq_common.h), in four int32 lanes; the weights 8g + e are signed
 * bytes, so sdot takes them as they are. */
KERNEL_INLINE int32x4_t iq1_neon_block(const uint8_t *block, const block_q8_k *y, const enum iq1_kind kind)
{
    int32x4_t sum = vdupq_n_s32(0);
    KERNEL_UNROLLED for (int s = 0; s < 8; s++) {
        iq1_sub sub = iq1_sub_block(kind, block, s);
        int8x16_t w_low = vaddq_s8(vshlq_n_s8(iq_neon_points(sub.points[0], sub.points[1]), 3),
                                   iq_neon_points(sub.deltas[0], sub.deltas[1]));
        int8x16_t w_high = vaddq_s8(vshlq_n_s8(iq_neon_points(sub.points[2], sub.points[3]), 3),
                                    iq_neon_points(sub.deltas[2], sub.deltas[3]));
        int32x4_t low = vdotq_s32(vdupq_n_s32(0), w_low, vld1q_s8(y->qs + 32 * s));
        int32x4_t high = vdotq_s32(vdupq_n_s32(0), w_high, vld1q_s8(y->qs + 32 * s + 16));
        sum = vmlaq_n_s32(sum, low, (int32_t)(sub.scales & 0xffff));
        sum = vmlaq_n_s32(sum, high, (int32_t)(sub.scales >> 16));
    }
    return sum;
}

KERNEL_INLINE void iq1_neon_group(const int R, int64_t n, const uint8_t *rows, size_t row_bytes,
                                  const void *activation, float *out, const enum iq1_kind kind)
{
    const block_q8_k *a = activation;
    const int64_t nb = n / QK_K;
    const size_t block_bytes = iq1_block_bytes(kind);
    float32x4_t acc[KERNEL_GROUP_ROWS];
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        acc[r] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        KERNEL_UNROLLED for (int r = 0; r < R; r++) {
            const uint8_t *row = rows + (size_t)r * row_bytes;
            __builtin_prefetch(row + (size_t)(b + KERNEL_PREFETCH_BLOCKS) * block_bytes);
            const uint8_t *block = row + (size_t)b * block_bytes;
            int32x4_t sum = iq1_neon_block(block, a + b, kind);
            float d = iq_neon_f16(iq1_d_bits(kind, block)) * a[b].d;
            acc[r] = vfmaq_n_f32(acc[r], vcvtq_f32_s32(sum), d);
        }
    }
    KERNEL_UNROLLED for (int r = 0; r < R; r++)
        out[r] = 0.125f * vaddvq_f32(acc[r]);
}

#define IQ_NEON_KERNELS(name, group_fn, kind)                                                        \
    KERNEL_INLINE void name##_group(const int R, int64_t n, const uint8_t *rows, size_t row_bytes,    \
                                    const void *activation, float *out)                              \
    {                                                                                                \
        group_fn(R, n, rows, row_bytes, activation, out, kind);                                      \
    }                                                                                                \
    KERNEL_DEFINE_DOT_ROWS(name##_rows, name##_group)                                                \
    KERNEL_DEFINE_DOT_DECODE_GROUP(name##_decode, name##_group)                                      \
    void neon_dot_rows_##name(int64_t n, const void *weights, size_t row_bytes, int64_t n_rows,      \
                              const void *activation, float *out)                                    \
    {                                                                                                \
        name##_rows(n, weights, row_bytes, n_rows, activation, out);                                 \
    }                                                                                                \
    void neon_dot_decode_##name(int64_t n, const void *weights, size_t row_bytes, int64_t n_rows,    \
                                const void *activation, float *out)                                  \
    {                                                                                                \
        name##_decode(n, weights, row_bytes, n_rows, activation, out);                               \
    }

IQ_NEON_KERNELS(iq2_xxs, iq_neon_group, IQ_KIND_2XXS)
IQ_NEON_KERNELS(iq2_xs, iq_neon_group, IQ_KIND_2XS)
IQ_NEON_KERNELS(iq2_s, iq_neon_group, IQ_KIND_2S)
IQ_NEON_KERNELS(iq3_xxs, iq_neon_group, IQ_KIND_3XXS)
IQ_NEON_KERNELS(iq3_s, iq_neon_group, IQ_KIND_3S)
IQ_NEON_KERNELS(iq1_s, iq1_neon_group, IQ1_KIND_S)
IQ_NEON_KERNELS(iq1_m, iq1_neon_group, IQ1_KIND_M)
