/* NEON activation quantizers (aarch64): Q8_K, Q8_0 and F16, byte-identical to
 * the quant table's reference quantize_row; see quantize_avx512.c for why they
 * exist. vrndnq rounds half to even (nearbyintf), vrndaq half away from zero
 * (roundf); vmaxnmq skips NaNs as the reference's comparisons do. Private to
 * src/kernels; tested against the reference in test_kernels (under qemu). */
#include <arm_neon.h>

#include "dot_common.h"
#include "kernels_dispatch.h"

/* Rounded values to int8 with the reference's clamp: NaN -> 0, then
 * [-128, 127]. */
KERNEL_INLINE int32x4_t neon_clamp_quant(float32x4_t rounded)
{
    uint32x4_t ordered = vceqq_f32(rounded, rounded);
    float32x4_t clamped = vminq_f32(vmaxq_f32(rounded, vdupq_n_f32(-128.0f)), vdupq_n_f32(127.0f));
    return vandq_s32(vcvtq_s32_f32(clamped), vreinterpretq_s32_u32(ordered));
}

/* Sixteen int32 quants (already in int8 range) stored as int8. */
KERNEL_INLINE void neon_store_quants(int8_t *out, const int32x4_t q[4])
{
    int16x8_t low = vcombine_s16(vmovn_s32(q[0]), vmovn_s32(q[1]));
    int16x8_t high = vcombine_s16(vmovn_s32(q[2]), vmovn_s32(q[3]));
    vst1q_s8(out, vcombine_s8(vmovn_s16(low), vmovn_s16(high)));
}

void neon_quantize_row_q8_k(const float *src, void *dst, int64_t n)
{
    block_q8_k *blocks = dst;
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float *x = src + QK_K * b;
        block_q8_k *block = &blocks[b];
        float32x4_t amax_v = vdupq_n_f32(0.0f);
        for (int j = 0; j < QK_K; j += 4)
            amax_v = vmaxnmq_f32(amax_v, vabsq_f32(vld1q_f32(x + j)));
        float amax = vmaxnmvq_f32(amax_v);
        if (amax == 0.0f) {
            memset(block, 0, sizeof *block);
            continue;
        }
        float max = 0.0f;
        for (int j = 0; j < QK_K; j++) {
            if (fabsf(x[j]) == amax) { /* the first of equal magnitudes */
                max = x[j];
                break;
            }
        }
        float iscale = -127.0f / max;
        for (int j = 0; j < QK_K; j += 16) {
            int32x4_t q[4];
            for (int k = 0; k < 4; k++)
                q[k] = neon_clamp_quant(vrndnq_f32(vmulq_n_f32(vld1q_f32(x + j + 4 * k), iscale)));
            neon_store_quants(block->qs + j, q);
            block->bsums[j / 16] = (int16_t)vaddvq_s32(vaddq_s32(vaddq_s32(q[0], q[1]), vaddq_s32(q[2], q[3])));
        }
        block->d = 1.0f / iscale;
    }
}

void neon_quantize_row_q8_0(const float *src, void *dst, int64_t n)
{
    block_q8_0 *blocks = dst;
    for (int64_t b = 0; b < n / 32; b++) {
        const float *x = src + 32 * b;
        float32x4_t v[8];
        float32x4_t amax_v = vdupq_n_f32(0.0f);
        for (int k = 0; k < 8; k++) {
            v[k] = vld1q_f32(x + 4 * k);
            amax_v = vmaxnmq_f32(amax_v, vabsq_f32(v[k]));
        }
        float d = vmaxnmvq_f32(amax_v) / 127.0f;
        float inverse = d != 0.0f ? 1.0f / d : 0.0f;
        for (int h = 0; h < 2; h++) {
            int32x4_t q[4];
            for (int k = 0; k < 4; k++)
                q[k] = neon_clamp_quant(vrndaq_f32(vmulq_n_f32(v[4 * h + k], inverse)));
            neon_store_quants(blocks[b].qs + 16 * h, q);
        }
        blocks[b].d = fp32_to_fp16(d);
    }
}

void neon_quantize_row_f16(const float *src, void *dst, int64_t n)
{
    uint16_t *h = dst;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1_u16(h + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(src + i))));
    for (; i < n; i++)
        h[i] = fp32_to_fp16(src[i]);
}
