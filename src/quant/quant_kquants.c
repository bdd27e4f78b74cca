/* The K-quants Q2_K, Q3_K, Q4_K, Q5_K and Q6_K (spec section 4) and their
 * activation format Q8_K (spec 5.3): dequantization, the Q8_K quantizer, and
 * the super-block dot products of spec 5.4. Each format first unpacks a
 * super-block into 256 small integers plus per-sub-block scales; dequantize
 * and vec_dot share that step so they cannot disagree on the bit layout.
 * The weight quantizers live in quant_kquants_quantize.c. */
#include "quant_blocks.h"

#include <math.h>

/* Round half to even (the default rounding mode), then min(127, q) as spec
 * 5.3 requires. Finite input never reaches -128; that clamp and the NaN case
 * only keep the conversion defined for non-finite input. */
static int8_t nearest_int8(float value)
{
    float rounded = nearbyintf(value);
    if (!(rounded >= -128.0f))
        return rounded != rounded ? 0 : -128;
    if (rounded > 127.0f)
        return 127;
    return (int8_t)rounded;
}

/* ---- Q8_K ---- */

void quantize_row_q8_k(const float *src, void *dst, int64_t n)
{
    block_q8_k *blocks = dst;
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float *x = src + QK_K * b;
        block_q8_k *block = &blocks[b];
        float max = 0.0f, amax = 0.0f;
        for (int j = 0; j < QK_K; j++) {
            float a = fabsf(x[j]);
            if (a > amax) { /* strict: the first of equal magnitudes wins */
                amax = a;
                max = x[j];
            }
        }
        if (amax == 0.0f) {
            block->d = 0.0f;
            memset(block->qs, 0, sizeof block->qs);
            memset(block->bsums, 0, sizeof block->bsums);
            continue;
        }
        /* The negative scale is the reference engine's convention: the
         * largest-magnitude value always maps to -127. */
        float iscale = -127.0f / max;
        for (int j = 0; j < QK_K; j++)
            block->qs[j] = nearest_int8(iscale * x[j]);
        for (int g = 0; g < QK_K / 16; g++) {
            int sum = 0;
            for (int j = 0; j < 16; j++)
                sum += block->qs[16 * g + j];
            block->bsums[g] = (int16_t)sum;
        }
        block->d = 1.0f / iscale;
    }
}

void dequantize_row_q8_k(const void *src, float *dst, int64_t n)
{
    const block_q8_k *blocks = src;
    for (int64_t b = 0; b < n / QK_K; b++)
        for (int j = 0; j < QK_K; j++)
            dst[QK_K * b + j] = blocks[b].d * blocks[b].qs[j];
}

/* ---- Q2_K: 16 sub-blocks of 16, 4-bit scale and min each ---- */

static void q2k_unpack(const block_q2_k *block, int8_t q[QK_K])
{
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < 32; l++)
                q[128 * h + 32 * k + l] = (int8_t)((block->qs[32 * h + l] >> (2 * k)) & 3);
}

void dequantize_row_q2_k(const void *src, float *dst, int64_t n)
{
    const block_q2_k *blocks = src;
    int8_t q[QK_K];
    for (int64_t b = 0; b < n / QK_K; b++) {
        float d = fp16_to_fp32(blocks[b].d);
        float dmin = fp16_to_fp32(blocks[b].dmin);
        q2k_unpack(&blocks[b], q);
        for (int sub = 0; sub < 16; sub++) {
            float scale = d * (blocks[b].scales[sub] & 0x0f);
            float min = dmin * (blocks[b].scales[sub] >> 4);
            for (int j = 0; j < 16; j++)
                dst[QK_K * b + 16 * sub + j] = scale * q[16 * sub + j] - min;
        }
    }
}

float vec_dot_q2_k(int64_t n, const void *weights, const void *activations)
{
    const block_q2_k *w = weights;
    const block_q8_k *a = activations;
    int8_t q[QK_K];
    float sum = 0.0f;
    for (int64_t b = 0; b < n / QK_K; b++) {
        q2k_unpack(&w[b], q);
        int isum = 0, msum = 0;
        for (int sub = 0; sub < 16; sub++) {
            isum += (w[b].scales[sub] & 0x0f) * quant_dot_i8(q + 16 * sub, a[b].qs + 16 * sub, 16);
            msum += (w[b].scales[sub] >> 4) * a[b].bsums[sub];
        }
        float scale = fp16_to_fp32(w[b].d) * a[b].d;
        float min = fp16_to_fp32(w[b].dmin) * a[b].d;
        sum += scale * (float)isum - min * (float)msum;
    }
    return sum;
}

/* ---- Q3_K: 16 sub-blocks of 16, signed 6-bit scales, quants -4..3 ---- */

static void q3k_unpack(const block_q3_k *block, int8_t q[QK_K])
{
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < 32; l++) {
                int low = (block->qs[32 * h + l] >> (2 * k)) & 3;
                int high = block->hmask[l] & (1 << (4 * h + k));
                q[128 * h + 32 * k + l] = (int8_t)(low - (high ? 0 : 4));
            }
}

void dequantize_row_q3_k(const void *src, float *dst, int64_t n)
{
    const block_q3_k *blocks = src;
    int8_t q[QK_K], scales[16];
    for (int64_t b = 0; b < n / QK_K; b++) {
        float d = fp16_to_fp32(blocks[b].d);
        q3k_unpack(&blocks[b], q);
        quant_q3k_scales(blocks[b].scales, scales);
        for (int sub = 0; sub < 16; sub++) {
            float scale = d * scales[sub];
            for (int j = 0; j < 16; j++)
                dst[QK_K * b + 16 * sub + j] = scale * q[16 * sub + j];
        }
    }
}

float vec_dot_q3_k(int64_t n, const void *weights, const void *activations)
{
    const block_q3_k *w = weights;
    const block_q8_k *a = activations;
    int8_t q[QK_K], scales[16];
    float sum = 0.0f;
    for (int64_t b = 0; b < n / QK_K; b++) {
        q3k_unpack(&w[b], q);
        quant_q3k_scales(w[b].scales, scales);
        int isum = 0;
        for (int sub = 0; sub < 16; sub++)
            isum += scales[sub] * quant_dot_i8(q + 16 * sub, a[b].qs + 16 * sub, 16);
        sum += (fp16_to_fp32(w[b].d) * a[b].d) * (float)isum;
    }
    return sum;
}

/* ---- Q4_K and Q5_K: 8 sub-blocks of 32, 6-bit scales and mins ---- */

static void q4k_unpack(const uint8_t *qs, int8_t q[QK_K])
{
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            q[64 * c + l] = (int8_t)(qs[32 * c + l] & 0x0f);
            q[64 * c + 32 + l] = (int8_t)(qs[32 * c + l] >> 4);
        }
}

static void q5k_unpack(const block_q5_k *block, int8_t q[QK_K])
{
    q4k_unpack(block->qs, q);
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            q[64 * c + l] = (int8_t)(q[64 * c + l] + ((block->qh[l] >> (2 * c)) & 1) * 16);
            q[64 * c + 32 + l] = (int8_t)(q[64 * c + 32 + l] + ((block->qh[l] >> (2 * c + 1)) & 1) * 16);
        }
}

/* y = (d*sc)*q - (dmin*m) per sub-block of 32: the products are formed first,
 * as the reference does, so results match it bit for bit. */
static void dequantize_scaled_mins(const int8_t *q, const uint8_t *packed, float d, float dmin,
                                   float *dst)
{
    for (int sub = 0; sub < 8; sub++) {
        uint8_t sc, m;
        quant_k4_scale_min(sub, packed, &sc, &m);
        float scale = d * sc, min = dmin * m;
        for (int j = 0; j < 32; j++)
            dst[32 * sub + j] = scale * q[32 * sub + j] - min;
    }
}

/* D * Σ sc*dot - Dmin * Σ m*bsums for one super-block of Q4_K or Q5_K. */
static float dot_scaled_mins(const int8_t *q, const uint8_t *packed, uint16_t d, uint16_t dmin,
                             const block_q8_k *a)
{
    int isum = 0, msum = 0;
    for (int sub = 0; sub < 8; sub++) {
        uint8_t sc, m;
        quant_k4_scale_min(sub, packed, &sc, &m);
        isum += sc * quant_dot_i8(q + 32 * sub, a->qs + 32 * sub, 32);
        msum += m * (a->bsums[2 * sub] + a->bsums[2 * sub + 1]);
    }
    float scale = fp16_to_fp32(d) * a->d;
    float min = fp16_to_fp32(dmin) * a->d;
    return scale * (float)isum - min * (float)msum;
}

void dequantize_row_q4_k(const void *src, float *dst, int64_t n)
{
    const block_q4_k *blocks = src;
    int8_t q[QK_K];
    for (int64_t b = 0; b < n / QK_K; b++) {
        q4k_unpack(blocks[b].qs, q);
        dequantize_scaled_mins(q, blocks[b].scales, fp16_to_fp32(blocks[b].d),
                               fp16_to_fp32(blocks[b].dmin), dst + QK_K * b);
    }
}

float vec_dot_q4_k(int64_t n, const void *weights, const void *activations)
{
    const block_q4_k *w = weights;
    const block_q8_k *a = activations;
    int8_t q[QK_K];
    float sum = 0.0f;
    for (int64_t b = 0; b < n / QK_K; b++) {
        q4k_unpack(w[b].qs, q);
        sum += dot_scaled_mins(q, w[b].scales, w[b].d, w[b].dmin, &a[b]);
    }
    return sum;
}

void dequantize_row_q5_k(const void *src, float *dst, int64_t n)
{
    const block_q5_k *blocks = src;
    int8_t q[QK_K];
    for (int64_t b = 0; b < n / QK_K; b++) {
        q5k_unpack(&blocks[b], q);
        dequantize_scaled_mins(q, blocks[b].scales, fp16_to_fp32(blocks[b].d),
                               fp16_to_fp32(blocks[b].dmin), dst + QK_K * b);
    }
}

float vec_dot_q5_k(int64_t n, const void *weights, const void *activations)
{
    const block_q5_k *w = weights;
    const block_q8_k *a = activations;
    int8_t q[QK_K];
    float sum = 0.0f;
    for (int64_t b = 0; b < n / QK_K; b++) {
        q5k_unpack(&w[b], q);
        sum += dot_scaled_mins(q, w[b].scales, w[b].d, w[b].dmin, &a[b]);
    }
    return sum;
}

/* ---- Q6_K: 16 sub-blocks of 16, int8 scales, quants -32..31 ---- */

static void q6k_unpack(const block_q6_k *block, int8_t q[QK_K])
{
    for (int h = 0; h < 2; h++) {
        const uint8_t *low = block->ql + 64 * h;
        const uint8_t *high = block->qh + 32 * h;
        int8_t *out = q + 128 * h;
        for (int l = 0; l < 32; l++) {
            out[l] = (int8_t)(((low[l] & 0x0f) | (((high[l] >> 0) & 3) << 4)) - 32);
            out[l + 32] = (int8_t)(((low[l + 32] & 0x0f) | (((high[l] >> 2) & 3) << 4)) - 32);
            out[l + 64] = (int8_t)(((low[l] >> 4) | (((high[l] >> 4) & 3) << 4)) - 32);
            out[l + 96] = (int8_t)(((low[l + 32] >> 4) | (((high[l] >> 6) & 3) << 4)) - 32);
        }
    }
}

void dequantize_row_q6_k(const void *src, float *dst, int64_t n)
{
    const block_q6_k *blocks = src;
    int8_t q[QK_K];
    for (int64_t b = 0; b < n / QK_K; b++) {
        float d = fp16_to_fp32(blocks[b].d);
        q6k_unpack(&blocks[b], q);
        for (int sub = 0; sub < 16; sub++) {
            float scale = d * blocks[b].scales[sub];
            for (int j = 0; j < 16; j++)
                dst[QK_K * b + 16 * sub + j] = scale * q[16 * sub + j];
        }
    }
}

float vec_dot_q6_k(int64_t n, const void *weights, const void *activations)
{
    const block_q6_k *w = weights;
    const block_q8_k *a = activations;
    int8_t q[QK_K];
    float sum = 0.0f;
    for (int64_t b = 0; b < n / QK_K; b++) {
        q6k_unpack(&w[b], q);
        int isum = 0;
        for (int sub = 0; sub < 16; sub++)
            isum += w[b].scales[sub] * quant_dot_i8(q + 16 * sub, a[b].qs + 16 * sub, 16);
        sum += (fp16_to_fp32(w[b].d) * a[b].d) * (float)isum;
    }
    return sum;
}
