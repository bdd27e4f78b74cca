/* The ternary formats TQ1_0 and TQ2_0 (256-element blocks of values -1, 0,
 * 1 times one f16 scale, the BitNet b1.58 / TriLM files): dequantization
 * and dot products against Q8_K, the scalar reference of their kernels.
 *
 * TQ2_0 stores each value as a 2-bit code c (value c - 1): byte k of a
 * 32-byte half holds values k, k + 32, k + 64, k + 96 of its 128 in bits
 * 0-1, 2-3, 4-5, 6-7. TQ1_0 packs five values into a byte as a base-3
 * fraction (the byte is the 5-digit number scaled from 3^5 to 2^8, rounded
 * up), so multiplying by 3^n modulo 256 brings digit n to the top, where
 * (q * 3) >> 8 reads it: bytes 0-31 give values 32n + m, bytes 32-47 the
 * next 80 as 16n + m, and the 4 bytes of qh four digits each for the last
 * 16 (digit l of byte j: value 4l + j). */
#include "quant_blocks.h"

/* Digit n (0 = most significant) of a byte's base-3 fraction. */
static int ternary_digit(uint8_t byte, int n)
{
    static const uint8_t powers[5] = {1, 3, 9, 27, 81};
    uint8_t q = (uint8_t)(byte * powers[n]);
    return (q * 3) >> 8;
}

/* The 256 values (-1, 0, 1) of a block. */
static void tq1_0_unpack(const block_tq1_0 *x, int8_t q[QK_K])
{
    int at = 0;
    for (int n = 0; n < 5; n++)
        for (int m = 0; m < 32; m++)
            q[at + 32 * n + m] = (int8_t)(ternary_digit(x->qs[m], n) - 1);
    at += 160;
    for (int n = 0; n < 5; n++)
        for (int m = 0; m < 16; m++)
            q[at + 16 * n + m] = (int8_t)(ternary_digit(x->qs[32 + m], n) - 1);
    at += 80;
    for (int l = 0; l < 4; l++)
        for (int j = 0; j < 4; j++)
            q[at + 4 * l + j] = (int8_t)(ternary_digit(x->qh[j], l) - 1);
}

static void tq2_0_unpack(const block_tq2_0 *x, int8_t q[QK_K])
{
    for (int half = 0; half < 2; half++)
        for (int l = 0; l < 4; l++)
            for (int k = 0; k < 32; k++)
                q[128 * half + 32 * l + k] = (int8_t)(((x->qs[32 * half + k] >> (2 * l)) & 3) - 1);
}

#define TERNARY_FUNCTIONS(name, block_type)                                              \
    void dequantize_row_##name(const void *src, float *dst, int64_t n)                    \
    {                                                                                     \
        const block_type *blocks = src;                                                   \
        int8_t q[QK_K];                                                                   \
        for (int64_t b = 0; b < n / QK_K; b++) {                                          \
            float d = fp16_to_fp32(blocks[b].d);                                          \
            name##_unpack(&blocks[b], q);                                                 \
            for (int j = 0; j < QK_K; j++)                                                \
                dst[QK_K * b + j] = (float)q[j] * d;                                      \
        }                                                                                 \
    }                                                                                     \
                                                                                          \
    float vec_dot_##name(int64_t n, const void *weights, const void *activations)         \
    {                                                                                     \
        const block_type *w = weights;                                                    \
        const block_q8_k *a = activations;                                                \
        int8_t q[QK_K];                                                                   \
        float sum = 0.0f;                                                                 \
        for (int64_t b = 0; b < n / QK_K; b++) {                                          \
            name##_unpack(&w[b], q);                                                      \
            int isum = quant_dot_i8(q, a[b].qs, QK_K);                                    \
            sum += (float)isum * (fp16_to_fp32(w[b].d) * a[b].d);                         \
        }                                                                                 \
        return sum;                                                                       \
    }

TERNARY_FUNCTIONS(tq1_0, block_tq1_0)
TERNARY_FUNCTIONS(tq2_0, block_tq2_0)
