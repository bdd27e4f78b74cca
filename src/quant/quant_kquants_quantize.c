/* Weight quantizers for Q4_K, Q5_K and Q6_K (used by the model generator).
 * Each sub-block first gets its own best float scale (and offset) from the
 * searches in quant_search.c; the super-block scale is then set from the
 * largest of them, the sub-block scales are rounded to their 6 or 8 bits, and
 * each rounded scale is improved by trying its neighbours, with the values
 * re-rounded against exactly what will be stored. Quality, not speed, is the
 * goal here; these never run at inference time. */
#include "quant_blocks.h"

#include <float.h>
#include <math.h>

/* Best stored (scale, min) pair for one 32-element sub-block of Q4_K/Q5_K,
 * starting from the rounded float fit and trying each neighbour. */
static void choose_scale_min(const float *x, float d, float dmin, float scale, float offset, int qmax,
                             uint8_t *best_scale, uint8_t *best_min, int8_t *q)
{
    int scale0 = d > 0.0f ? quant_round_clamp(scale / d, 0, 63) : 0;
    int min0 = dmin > 0.0f ? quant_round_clamp(offset / dmin, 0, 63) : 0;
    double best_error = DBL_MAX;
    for (int ds = -1; ds <= 1; ds++) {
        int sc = scale0 + ds;
        if (sc < 0 || sc > 63)
            continue;
        for (int dm = -1; dm <= 1; dm++) {
            int m = min0 + dm;
            if (m < 0 || m > 63)
                continue;
            float a = d * (float)sc, b = dmin * (float)m;
            double error = 0;
            for (int i = 0; i < 32; i++) {
                int v = a > 0.0f ? quant_round_clamp((x[i] + b) / a, 0, qmax) : 0;
                double diff = (double)x[i] - ((double)a * v - b);
                error += diff * diff;
            }
            if (error < best_error) {
                best_error = error;
                *best_scale = (uint8_t)sc;
                *best_min = (uint8_t)m;
            }
        }
    }
    float a = d * (float)*best_scale, b = dmin * (float)*best_min;
    for (int i = 0; i < 32; i++)
        q[i] = (int8_t)(a > 0.0f ? quant_round_clamp((x[i] + b) / a, 0, qmax) : 0);
}

/* Packs eight 6-bit scales and mins as spec 4.1 describes. */
static void pack_scale_min(const uint8_t *sc, const uint8_t *m, uint8_t *packed)
{
    for (int j = 0; j < 4; j++) {
        packed[j] = sc[j];
        packed[j + 4] = m[j];
    }
    for (int j = 4; j < 8; j++) {
        packed[j + 4] = (uint8_t)((sc[j] & 0x0f) | ((m[j] & 0x0f) << 4));
        packed[j - 4] |= (uint8_t)((sc[j] >> 4) << 6);
        packed[j] |= (uint8_t)((m[j] >> 4) << 6);
    }
}

/* Shared by Q4_K (qmax 15) and Q5_K (qmax 31): scales, mins and the 256
 * quants of one super-block. */
static void quantize_scaled_mins(const float *x, int qmax, uint16_t *d_bits, uint16_t *dmin_bits,
                                 uint8_t *packed, int8_t q[QK_K])
{
    float scales[8], offsets[8], max_scale = 0.0f, max_offset = 0.0f;
    for (int sub = 0; sub < 8; sub++) {
        quant_search_affine(x + 32 * sub, 32, qmax, &scales[sub], &offsets[sub]);
        max_scale = fmaxf(max_scale, scales[sub]);
        max_offset = fmaxf(max_offset, offsets[sub]);
    }
    *d_bits = fp32_to_fp16(max_scale / 63.0f);
    *dmin_bits = fp32_to_fp16(max_offset / 63.0f);
    float d = fp16_to_fp32(*d_bits), dmin = fp16_to_fp32(*dmin_bits);
    uint8_t sc[8], m[8];
    for (int sub = 0; sub < 8; sub++)
        choose_scale_min(x + 32 * sub, d, dmin, scales[sub], offsets[sub], qmax, &sc[sub], &m[sub],
                         q + 32 * sub);
    pack_scale_min(sc, m, packed);
}

void quantize_row_q4_k(const float *src, void *dst, int64_t n)
{
    block_q4_k *blocks = dst;
    int8_t q[QK_K];
    for (int64_t b = 0; b < n / QK_K; b++) {
        block_q4_k *block = &blocks[b];
        quantize_scaled_mins(src + QK_K * b, 15, &block->d, &block->dmin, block->scales, q);
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++)
                block->qs[32 * c + l] = (uint8_t)(q[64 * c + l] | (q[64 * c + 32 + l] << 4));
    }
}

void quantize_row_q5_k(const float *src, void *dst, int64_t n)
{
    block_q5_k *blocks = dst;
    int8_t q[QK_K];
    for (int64_t b = 0; b < n / QK_K; b++) {
        block_q5_k *block = &blocks[b];
        quantize_scaled_mins(src + QK_K * b, 31, &block->d, &block->dmin, block->scales, q);
        memset(block->qh, 0, sizeof block->qh);
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) {
                int low = q[64 * c + l], high = q[64 * c + 32 + l];
                block->qs[32 * c + l] = (uint8_t)((low & 0x0f) | ((high & 0x0f) << 4));
                block->qh[l] |= (uint8_t)(((low >> 4) << (2 * c)) | ((high >> 4) << (2 * c + 1)));
            }
    }
}

void quantize_row_q6_k(const float *src, void *dst, int64_t n)
{
    block_q6_k *blocks = dst;
    int8_t q[QK_K];
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float *x = src + QK_K * b;
        block_q6_k *block = &blocks[b];
        float scales[16], max_scale = 0.0f;
        for (int sub = 0; sub < 16; sub++) {
            scales[sub] = quant_search_symmetric(x + 16 * sub, 16, -32, 31, q + 16 * sub);
            max_scale = fmaxf(max_scale, fabsf(scales[sub]));
        }
        block->d = fp32_to_fp16(max_scale / 127.0f);
        float d = fp16_to_fp32(block->d);
        for (int sub = 0; sub < 16; sub++) {
            const float *xs = x + 16 * sub;
            int scale0 = d > 0.0f ? quant_round_clamp(scales[sub] / d, -128, 127) : 0;
            double best_error = DBL_MAX;
            int best = scale0;
            for (int delta = -1; delta <= 1; delta++) {
                int sc = scale0 + delta;
                if (sc < -128 || sc > 127)
                    continue;
                float a = d * (float)sc;
                double error = 0;
                for (int i = 0; i < 16; i++) {
                    int v = a != 0.0f ? quant_round_clamp(xs[i] / a, -32, 31) : 0;
                    double diff = (double)xs[i] - (double)a * v;
                    error += diff * diff;
                }
                if (error < best_error) {
                    best_error = error;
                    best = sc;
                }
            }
            block->scales[sub] = (int8_t)best;
            float a = d * (float)best;
            for (int i = 0; i < 16; i++)
                q[16 * sub + i] = (int8_t)(a != 0.0f ? quant_round_clamp(xs[i] / a, -32, 31) : 0);
        }
        for (int h = 0; h < 2; h++) {
            const int8_t *qh = q + 128 * h;
            for (int l = 0; l < 32; l++) {
                int q1 = qh[l] + 32, q2 = qh[l + 32] + 32, q3 = qh[l + 64] + 32, q4 = qh[l + 96] + 32;
                block->ql[64 * h + l] = (uint8_t)((q1 & 0x0f) | ((q3 & 0x0f) << 4));
                block->ql[64 * h + l + 32] = (uint8_t)((q2 & 0x0f) | ((q4 & 0x0f) << 4));
                block->qh[32 * h + l] =
                    (uint8_t)((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
            }
        }
    }
}
