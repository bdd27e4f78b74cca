/* NEON + dotprod dot-product kernels of the ternary formats TQ1_0 and
 * TQ2_0 against Q8_K (layouts in quant_ternary.c). Both unpack to the
 * values -1, 0, 1 as int8 and sdot takes them with the activation's quants.
 * TQ1_0's digit n of a byte b: m = b * 3^n modulo 256 (a byte multiply),
 * then floor(3m / 256), which is (m >= 86) + (m >= 171). Each row sums its
 * blocks into f32 lanes in increasing order; rows never share
 * accumulators. */
#include <arm_neon.h>

#include "dot_common.h"
#include "kernels_dispatch.h"

KERNEL_INLINE float ternary_f16(uint16_t h)
{
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

/* The value (digit - 1: -1, 0, 1) at the top of each byte. */
KERNEL_INLINE int8x16_t ternary_top_value(uint8x16_t m)
{
    /* each compare is 0 or -1: -1 - (-[m >= 86]) - (-[m >= 171]) */
    int8x16_t ge86 = vreinterpretq_s8_u8(vcgeq_u8(m, vdupq_n_u8(86)));
    int8x16_t ge171 = vreinterpretq_s8_u8(vcgeq_u8(m, vdupq_n_u8(171)));
    return vsubq_s8(vsubq_s8(vdupq_n_s8(-1), ge86), ge171);
}

KERNEL_INLINE int32x4_t tq1_0_block(const block_tq1_0 *x, const block_q8_k *y)
{
    int32x4_t sum = vdupq_n_s32(0);
    uint8x16_t m_low = vld1q_u8(x->qs), m_high = vld1q_u8(x->qs + 16), m_tail = vld1q_u8(x->qs + 32);
    const uint8x16_t three = vdupq_n_u8(3);
    KERNEL_UNROLLED for (int n = 0; n < 5; n++) {
        sum = vdotq_s32(sum, ternary_top_value(m_low), vld1q_s8(y->qs + 32 * n));
        sum = vdotq_s32(sum, ternary_top_value(m_high), vld1q_s8(y->qs + 32 * n + 16));
        sum = vdotq_s32(sum, ternary_top_value(m_tail), vld1q_s8(y->qs + 160 + 16 * n));
        m_low = vmulq_u8(m_low, three);
        m_high = vmulq_u8(m_high, three);
        m_tail = vmulq_u8(m_tail, three);
    }
    /* the four qh bytes, digit l of byte j at 4l + j: word l holds the
     * bytes times 3^l */
    static const uint8_t powers[16] = {1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27};
    uint32_t high;
    memcpy(&high, x->qh, 4);
    uint8x16_t h = vmulq_u8(vreinterpretq_u8_u32(vdupq_n_u32(high)), vld1q_u8(powers));
    return vdotq_s32(sum, ternary_top_value(h), vld1q_s8(y->qs + 240));
}

KERNEL_INLINE int32x4_t tq2_0_block(const block_tq2_0 *x, const block_q8_k *y)
{
    const uint8x16_t low2 = vdupq_n_u8(3);
    int32x4_t sum = vdupq_n_s32(0);
    KERNEL_UNROLLED for (int half = 0; half < 2; half++) {
        KERNEL_UNROLLED for (int k = 0; k < 2; k++) {
            uint8x16_t codes = vld1q_u8(x->qs + 32 * half + 16 * k);
            KERNEL_UNROLLED for (int l = 0; l < 4; l++) {
                uint8x16_t c = vandq_u8(vshlq_u8(codes, vdupq_n_s8((int8_t)(-2 * l))), low2);
                int8x16_t v = vsubq_s8(vreinterpretq_s8_u8(c), vdupq_n_s8(1));
                sum = vdotq_s32(sum, v, vld1q_s8(y->qs + 128 * half + 32 * l + 16 * k));
            }
        }
    }
    return sum;
}

#define TERNARY_NEON_KERNELS(name, block_type)                                                         \
    KERNEL_INLINE void name##_group(const int R, int64_t n, const uint8_t *rows, size_t row_bytes,      \
                                    const void *activation, float *out)                                \
    {                                                                                                  \
        const block_q8_k *a = activation;                                                              \
        const int64_t nb = n / QK_K;                                                                   \
        float32x4_t acc[KERNEL_GROUP_ROWS];                                                            \
        KERNEL_UNROLLED for (int r = 0; r < R; r++)                                                    \
            acc[r] = vdupq_n_f32(0.0f);                                                                \
        for (int64_t b = 0; b < nb; b++) {                                                             \
            KERNEL_UNROLLED for (int r = 0; r < R; r++) {                                              \
                const block_type *x = (const block_type *)(rows + (size_t)r * row_bytes) + b;          \
                __builtin_prefetch(x + KERNEL_PREFETCH_BLOCKS);                                        \
                int32x4_t sum = name##_block(x, a + b);                                                \
                float d = ternary_f16(x->d) * a[b].d;                                                  \
                acc[r] = vfmaq_n_f32(acc[r], vcvtq_f32_s32(sum), d);                                   \
            }                                                                                          \
        }                                                                                              \
        KERNEL_UNROLLED for (int r = 0; r < R; r++)                                                    \
            out[r] = vaddvq_f32(acc[r]);                                                               \
    }                                                                                                  \
    KERNEL_DEFINE_DOT_ROWS(name##_rows, name##_group)                                                  \
    KERNEL_DEFINE_DOT_DECODE_GROUP(name##_decode, name##_group)                                        \
    void neon_dot_rows_##name(int64_t n, const void *weights, size_t row_bytes, int64_t n_rows,        \
                              const void *activation, float *out)                                      \
    {                                                                                                  \
        name##_rows(n, weights, row_bytes, n_rows, activation, out);                                   \
    }                                                                                                  \
    void neon_dot_decode_##name(int64_t n, const void *weights, size_t row_bytes, int64_t n_rows,      \
                                const void *activation, float *out)                                    \
    {                                                                                                  \
        name##_decode(n, weights, row_bytes, n_rows, activation, out);                                 \
    }

TERNARY_NEON_KERNELS(tq1_0, block_tq1_0)
TERNARY_NEON_KERNELS(tq2_0, block_tq2_0)
