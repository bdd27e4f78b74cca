/* The grid-based i-quants IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S and
 * IQ1_M (256-element super-blocks; grids in quant_iq_grids.c): scalar
 * dequantization and dot products against Q8_K activations, the reference
 * the SIMD kernels are tested against. No quantizers: bmoe reads these
 * formats, it does not write them.
 *
 * Every format first unpacks a super-block into the same form, so that
 * dequantize and vec_dot share one reading of each bit layout:
 *   value = d * scale[k] * factor * (q[j] + delta)
 * with q[j] the signed grid value, scale[k] the odd multiplier 2s + 1 of
 * the 16 values k (s the stored 3- or 4-bit scale), factor 1/8 (IQ2), 1/4
 * (IQ3_XXS) or 1 (IQ3_S, IQ1), and delta +-1/8 per group of 8 for IQ1, 0
 * for the others. The dot product sums q * a exactly in integers per 16
 * values, scales them in integers, and applies d, the activation's scale
 * and the factor once per block in f32 (the delta term, for IQ1, through
 * the activation's sums), as the reference engine does. */
#include "quant_blocks.h"

/* x ^ (x >> 1) ^ ... folded into bit 0: the parity of the low 7 bits. */
#define PARITY7(i) ((((i) >> 0) ^ ((i) >> 1) ^ ((i) >> 2) ^ ((i) >> 3) ^ ((i) >> 4) ^ ((i) >> 5) ^ ((i) >> 6)) & 1)
#define SIGN_BYTE(i) (uint8_t)((i) | (PARITY7(i) << 7))
#define SIGNS4(i) SIGN_BYTE(i), SIGN_BYTE((i) + 1), SIGN_BYTE((i) + 2), SIGN_BYTE((i) + 3)
#define SIGNS16(i) SIGNS4(i), SIGNS4((i) + 4), SIGNS4((i) + 8), SIGNS4((i) + 12)

const uint8_t quant_iq_sign_bytes[128] = {
    SIGNS16(0), SIGNS16(16), SIGNS16(32), SIGNS16(48), SIGNS16(64), SIGNS16(80), SIGNS16(96), SIGNS16(112),
};

typedef struct iq_block {
    float d;
    int8_t q[QK_K];    /* grid values with their signs */
    uint8_t scale[16]; /* 2s + 1 of each 16 values */
    int8_t delta[32];  /* IQ1: the delta's sign (+1, -1) of each group of 8; 0 otherwise */
} iq_block;

static uint32_t load_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Eight values from a point's bytes, negated where the sign byte says. */
static void put_group(int8_t *q, uint64_t point, uint8_t signs)
{
    for (int j = 0; j < 8; j++) {
        int value = (int)((point >> (8 * j)) & 0xff);
        q[j] = (int8_t)((signs >> j) & 1 ? -value : value);
    }
}

/* The two scales of a byte holding two 4-bit ones (IQ2_XS, IQ2_S). */
static void put_scale_pair(uint8_t *scale, uint8_t packed)
{
    scale[0] = (uint8_t)(2 * (packed & 0x0f) + 1);
    scale[1] = (uint8_t)(2 * (packed >> 4) + 1);
}

static void iq2_xxs_unpack(const block_iq2_xxs *x, iq_block *u)
{
    u->d = fp16_to_fp32(x->d);
    for (int sub = 0; sub < 8; sub++) {
        uint8_t bytes[8];
        memcpy(bytes, x->qs + 4 * sub, 8);
        uint32_t signs_scale = load_le32(bytes + 4);
        u->scale[2 * sub] = u->scale[2 * sub + 1] = (uint8_t)(2 * (signs_scale >> 28) + 1);
        for (int g = 0; g < 4; g++)
            put_group(u->q + 32 * sub + 8 * g, quant_iq2xxs_grid[bytes[g]],
                      quant_iq_sign_bytes[(signs_scale >> (7 * g)) & 127]);
    }
    memset(u->delta, 0, sizeof u->delta);
}

static void iq2_xs_unpack(const block_iq2_xs *x, iq_block *u)
{
    u->d = fp16_to_fp32(x->d);
    for (int group = 0; group < 32; group++) {
        uint16_t code = x->qs[group];
        put_group(u->q + 8 * group, quant_iq2xs_grid[code & 511], quant_iq_sign_bytes[code >> 9]);
    }
    for (int sub = 0; sub < 8; sub++)
        put_scale_pair(u->scale + 2 * sub, x->scales[sub]);
    memset(u->delta, 0, sizeof u->delta);
}

static void iq2_s_unpack(const block_iq2_s *x, iq_block *u)
{
    u->d = fp16_to_fp32(x->d);
    for (int group = 0; group < 32; group++) {
        int high = (x->qh[group / 4] >> (2 * (group % 4))) & 3;
        put_group(u->q + 8 * group, quant_iq2s_grid[x->qs[group] | high << 8], x->signs[group]);
    }
    for (int sub = 0; sub < 8; sub++)
        put_scale_pair(u->scale + 2 * sub, x->scales[sub]);
    memset(u->delta, 0, sizeof u->delta);
}

static void iq3_xxs_unpack(const block_iq3_xxs *x, iq_block *u)
{
    u->d = fp16_to_fp32(x->d);
    for (int sub = 0; sub < 8; sub++) {
        uint32_t signs_scale = load_le32(x->signs_scale + 4 * sub);
        u->scale[2 * sub] = u->scale[2 * sub + 1] = (uint8_t)(2 * (signs_scale >> 28) + 1);
        for (int g = 0; g < 4; g++) {
            const uint8_t *index = x->qs + 8 * sub + 2 * g;
            uint64_t point = quant_iq3xxs_grid[index[0]] | (uint64_t)quant_iq3xxs_grid[index[1]] << 32;
            put_group(u->q + 32 * sub + 8 * g, point, quant_iq_sign_bytes[(signs_scale >> (7 * g)) & 127]);
        }
    }
    memset(u->delta, 0, sizeof u->delta);
}

static void iq3_s_unpack(const block_iq3_s *x, iq_block *u)
{
    u->d = fp16_to_fp32(x->d);
    for (int sub = 0; sub < 8; sub++) {
        int scale = (x->scales[sub / 2] >> (4 * (sub % 2))) & 0x0f;
        u->scale[2 * sub] = u->scale[2 * sub + 1] = (uint8_t)(2 * scale + 1);
        for (int g = 0; g < 4; g++) {
            int k = 2 * g; /* the group's two points: indices k and k + 1 of the sub-block */
            int first = x->qs[8 * sub + k] | ((x->qh[sub] >> k) & 1) << 8;
            int second = x->qs[8 * sub + k + 1] | ((x->qh[sub] >> (k + 1)) & 1) << 8;
            uint64_t point = quant_iq3s_grid[first] | (uint64_t)quant_iq3s_grid[second] << 32;
            put_group(u->q + 32 * sub + 8 * g, point, x->signs[4 * sub + g]);
        }
    }
    memset(u->delta, 0, sizeof u->delta);
}

/* An IQ1 grid point's eight int8 values. */
static void put_iq1_group(int8_t *q, int index)
{
    uint64_t point = quant_iq1s_grid[index];
    for (int j = 0; j < 8; j++)
        q[j] = (int8_t)(uint8_t)(point >> (8 * j));
}

static void iq1_s_unpack(const block_iq1_s *x, iq_block *u)
{
    u->d = fp16_to_fp32(x->d);
    for (int sub = 0; sub < 8; sub++) {
        uint16_t high = x->qh[sub];
        u->scale[2 * sub] = u->scale[2 * sub + 1] = (uint8_t)(2 * ((high >> 12) & 7) + 1);
        for (int g = 0; g < 4; g++) {
            put_iq1_group(u->q + 32 * sub + 8 * g, x->qs[4 * sub + g] | ((high >> (3 * g)) & 7) << 8);
            u->delta[4 * sub + g] = (int8_t)(high & 0x8000 ? -1 : 1);
        }
    }
}

/* IQ1_M's four little-endian scale words. */
static void iq1_m_scale_words(const block_iq1_m *x, uint16_t words[4])
{
    for (int k = 0; k < 4; k++)
        words[k] = (uint16_t)(x->scales[2 * k] | x->scales[2 * k + 1] << 8);
}

static void iq1_m_unpack(const block_iq1_m *x, iq_block *u)
{
    uint16_t words[4];
    iq1_m_scale_words(x, words);
    /* the block's f16 scale: the top nibble of each word, word 0 lowest */
    uint16_t d = (uint16_t)((words[0] >> 12) | ((words[1] >> 8) & 0x00f0) | ((words[2] >> 4) & 0x0f00) |
                            (words[3] & 0xf000));
    u->d = fp16_to_fp32(d);
    for (int half = 0; half < 16; half++) {
        int shift = 6 * ((half / 2) % 2) + 3 * (half % 2);
        u->scale[half] = (uint8_t)(2 * ((words[half / 4] >> shift) & 7) + 1);
    }
    for (int group = 0; group < 32; group++) {
        int nibble = (x->qh[group / 2] >> (4 * (group % 2))) & 0x0f;
        put_iq1_group(u->q + 8 * group, x->qs[group] | (nibble & 7) << 8);
        u->delta[group] = (int8_t)(nibble & 8 ? -1 : 1);
    }
}

/* value = d * scale * factor * (q + delta / 8); (d * scale) * factor is
 * the reference engine's per-sub-block multiplier (factor a power of two,
 * so the order of the two products does not change the bits). */
static void iq_dequantize(const iq_block *u, float factor, float *dst)
{
    for (int half = 0; half < 16; half++) {
        float scale = u->d * (float)u->scale[half] * factor;
        for (int j = 0; j < 16; j++) {
            int k = 16 * half + j;
            float delta = u->delta[k / 8] ? QUANT_IQ1_DELTA * (float)u->delta[k / 8] : 0.0f;
            dst[k] = scale * ((float)u->q[k] + delta);
        }
    }
}

/* Sum of scale * (q . a) over the block, and, for IQ1, of scale * delta
 * sign * (sum of a) per group of 8. Exact in 32 bits: at most 256 x 62 x
 * 127 x 31. */
static void iq_dot_block(const iq_block *u, const block_q8_k *a, int32_t *sum, int32_t *delta_sum)
{
    int32_t total = 0, deltas = 0;
    for (int half = 0; half < 16; half++) {
        int32_t dot = quant_dot_i8(u->q + 16 * half, a->qs + 16 * half, 16);
        int32_t delta = 0;
        for (int g = 2 * half; g < 2 * half + 2; g++) {
            int32_t group_sum = 0;
            for (int j = 0; j < 8; j++)
                group_sum += a->qs[8 * g + j];
            delta += u->delta[g] * group_sum;
        }
        total += u->scale[half] * dot;
        deltas += u->scale[half] * delta;
    }
    *sum = total;
    *delta_sum = deltas;
}

/* The dequantize and vec_dot of one format from its unpack function and
 * factor. The dot's f32 steps are the reference engine's: per block
 * (d * a.d) * sum, the factor once at the end; IQ1 adds delta/8 times the
 * delta sum inside the block's parentheses. */
#define IQ_FUNCTIONS(name, block_type, factor, with_delta)                                       \
    void dequantize_row_##name(const void *src, float *dst, int64_t n)                            \
    {                                                                                             \
        const block_type *blocks = src;                                                           \
        iq_block u;                                                                               \
        for (int64_t b = 0; b < n / QK_K; b++) {                                                  \
            name##_unpack(&blocks[b], &u);                                                        \
            iq_dequantize(&u, factor, dst + QK_K * b);                                            \
        }                                                                                         \
    }                                                                                             \
                                                                                                  \
    float vec_dot_##name(int64_t n, const void *weights, const void *activations)                 \
    {                                                                                             \
        const block_type *w = weights;                                                            \
        const block_q8_k *a = activations;                                                        \
        iq_block u;                                                                               \
        float sum = 0.0f;                                                                         \
        for (int64_t b = 0; b < n / QK_K; b++) {                                                  \
            name##_unpack(&w[b], &u);                                                             \
            int32_t isum, delta_sum;                                                              \
            iq_dot_block(&u, &a[b], &isum, &delta_sum);                                           \
            if (with_delta)                                                                       \
                sum += u.d * a[b].d * ((float)isum + QUANT_IQ1_DELTA * (float)delta_sum);         \
            else                                                                                  \
                sum += (u.d * a[b].d) * (float)isum;                                              \
        }                                                                                         \
        return (factor) * sum;                                                                    \
    }

IQ_FUNCTIONS(iq2_xxs, block_iq2_xxs, 0.125f, 0)
IQ_FUNCTIONS(iq2_xs, block_iq2_xs, 0.125f, 0)
IQ_FUNCTIONS(iq2_s, block_iq2_s, 0.125f, 0)
IQ_FUNCTIONS(iq3_xxs, block_iq3_xxs, 0.25f, 0)
IQ_FUNCTIONS(iq3_s, block_iq3_s, 1.0f, 0)
IQ_FUNCTIONS(iq1_s, block_iq1_s, 1.0f, 1)
IQ_FUNCTIONS(iq1_m, block_iq1_m, 1.0f, 1)
