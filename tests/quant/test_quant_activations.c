/* The activation quantizers follow quant-formats.md 5.2 (Q8_0, Q8_1) and 5.3
 * (Q8_K) exactly, on hand-made inputs whose results are worked out from the
 * spec: rounding of ties, zero blocks, which element sets the scale, and the
 * sign of the Q8_K scale. */
#include "base/fp16.h"
#include "quant/quant.h"
#include "quant/quant_blocks.h"
#include "test.h"

#include <math.h>

static void test_q8_k(const quant_format *q8k)
{
    float x[QK_K];
    block_q8_k block;

    /* Zero block: d = 0, all quants and sums zero (memory pre-filled with junk). */
    memset(x, 0, sizeof x);
    memset(&block, 0x5a, sizeof block);
    q8k->quantize_row(x, &block, QK_K);
    CHECK(block.d == 0.0f);
    int nonzero = 0;
    for (int j = 0; j < QK_K; j++)
        nonzero += block.qs[j] != 0;
    for (int g = 0; g < 16; g++)
        nonzero += block.bsums[g] != 0;
    CHECK(nonzero == 0);

    /* max = -127 gives iscale = -127/-127 = 1 exactly and d = 1: the quants are
     * x rounded half to even. */
    memset(x, 0, sizeof x);
    x[0] = -127.0f;
    x[1] = 2.5f;   /* tie -> 2 */
    x[2] = 3.5f;   /* tie -> 4 */
    x[3] = -2.5f;  /* tie -> -2 */
    x[4] = 0.5f;   /* tie -> 0 */
    x[5] = 1.5f;   /* tie -> 2 */
    x[6] = 2.51f;  /* -> 3 */
    x[7] = 127.0f; /* equal magnitude after the max: 127 */
    x[16] = -9.5f; /* tie -> -10, second group */
    x[255] = 100.49f;
    q8k->quantize_row(x, &block, QK_K);
    CHECK(block.d == 1.0f);
    CHECK(block.qs[0] == -127);
    CHECK(block.qs[1] == 2);
    CHECK(block.qs[2] == 4);
    CHECK(block.qs[3] == -2);
    CHECK(block.qs[4] == 0);
    CHECK(block.qs[5] == 2);
    CHECK(block.qs[6] == 3);
    CHECK(block.qs[7] == 127);
    CHECK(block.qs[16] == -10);
    CHECK(block.qs[255] == 100);
    CHECK(block.bsums[0] == -127 + 2 + 4 - 2 + 0 + 2 + 3 + 127);
    CHECK(block.bsums[1] == -10);
    CHECK(block.bsums[15] == 100);
    for (int g = 2; g < 15; g++)
        CHECK(block.bsums[g] == 0);

    /* A positive max gives a negative d and maps the max to -127; the first
     * of two equal magnitudes sets the sign. */
    memset(x, 0, sizeof x);
    x[10] = 2.0f;
    x[20] = -2.0f;
    x[30] = 1.0f; /* 1 * -63.5 = -63.5: tie to even -> -64 */
    q8k->quantize_row(x, &block, QK_K);
    CHECK(block.d < 0.0f);
    CHECK(block.d == 1.0f / (-127.0f / 2.0f));
    CHECK(block.qs[10] == -127);
    CHECK(block.qs[20] == 127);
    CHECK(block.qs[30] == -64);
    float y[QK_K];
    q8k->dequantize_row(&block, y, QK_K);
    CHECK(fabsf(y[10] - 2.0f) < 1e-6f && fabsf(y[20] + 2.0f) < 1e-6f);

    memset(x, 0, sizeof x);
    x[20] = -2.0f;
    x[40] = 2.0f;
    q8k->quantize_row(x, &block, QK_K);
    CHECK(block.d > 0.0f);
    CHECK(block.qs[20] == -127 && block.qs[40] == 127);

    /* Blocks are independent: the second block's scale ignores the first. */
    float two[2 * QK_K];
    block_q8_k blocks[2];
    memset(two, 0, sizeof two);
    two[0] = 1000.0f;
    two[QK_K] = -127.0f;
    two[QK_K + 1] = 1.0f;
    q8k->quantize_row(two, blocks, 2 * QK_K);
    CHECK(blocks[1].d == 1.0f && blocks[1].qs[1] == 1);

    /* Non-finite input must not crash or trip the sanitizers. */
    memset(x, 0, sizeof x);
    x[3] = NAN;
    x[4] = 1.0f;
    q8k->quantize_row(x, &block, QK_K);
    CHECK(block.qs[4] == -127);
}

static void test_q8_0(const quant_format *q8_0, const quant_format *q8_1)
{
    float x[64];
    block_q8_0 blocks[2];

    /* amax = 127 gives d = 1 and id = 1 exactly: quants are x rounded half
     * away from zero; the scale is positive whatever the sign of the max. */
    memset(x, 0, sizeof x);
    x[0] = -127.0f;
    x[1] = 2.5f;   /* -> 3 */
    x[2] = -2.5f;  /* -> -3 */
    x[3] = 0.5f;   /* -> 1 */
    x[4] = 3.5f;   /* -> 4 */
    x[5] = 126.6f; /* -> 127 */
    x[31] = -0.49f;/* -> 0 */
    /* Second block all zero. */
    memset(&blocks, 0x5a, sizeof blocks);
    q8_0->quantize_row(x, blocks, 64);
    CHECK(fp16_to_fp32(blocks[0].d) == 1.0f);
    CHECK(blocks[0].qs[0] == -127);
    CHECK(blocks[0].qs[1] == 3);
    CHECK(blocks[0].qs[2] == -3);
    CHECK(blocks[0].qs[3] == 1);
    CHECK(blocks[0].qs[4] == 4);
    CHECK(blocks[0].qs[5] == 127);
    CHECK(blocks[0].qs[31] == 0);
    CHECK(blocks[1].d == 0);
    int nonzero = 0;
    for (int j = 0; j < 32; j++)
        nonzero += blocks[1].qs[j] != 0;
    CHECK(nonzero == 0);

    /* amax = 1: d = 1/127 is stored rounded to f16, while the quants use the
     * unrounded scale, so the max still maps to exactly 127. */
    memset(x, 0, sizeof x);
    x[7] = 1.0f;
    x[8] = -1.0f;
    q8_0->quantize_row(x, blocks, 32);
    CHECK(blocks[0].d == fp32_to_fp16(1.0f / 127.0f));
    CHECK(blocks[0].qs[7] == 127 && blocks[0].qs[8] == -127);

    /* Q8_1: same quants and d, plus s = fp16(d * Σq). */
    block_q8_1 q1[2];
    memset(x, 0, sizeof x);
    x[0] = -127.0f;
    x[1] = 2.5f;
    x[2] = 100.0f;
    x[32] = 63.5f; /* amax 63.5: d = 0.5, id = 2 */
    x[33] = 0.25f; /* 0.5 -> 1 */
    x[34] = -0.75f; /* -1.5 -> -2 */
    q8_1->quantize_row(x, q1, 64);
    CHECK(fp16_to_fp32(q1[0].d) == 1.0f);
    CHECK(q1[0].qs[0] == -127 && q1[0].qs[1] == 3 && q1[0].qs[2] == 100);
    CHECK(fp16_to_fp32(q1[0].s) == -24.0f);
    CHECK(fp16_to_fp32(q1[1].d) == 0.5f);
    CHECK(q1[1].qs[0] == 127 && q1[1].qs[1] == 1 && q1[1].qs[2] == -2);
    CHECK(fp16_to_fp32(q1[1].s) == 0.5f * 126);
}

int main(void)
{
    const quant_format *q8k = quant_format_of(TYPE_Q8_K);
    const quant_format *q8_0 = quant_format_of(TYPE_Q8_0);
    const quant_format *q8_1 = quant_format_of(TYPE_Q8_1);
    CHECK(q8k && q8k->quantize_row && q8k->dequantize_row);
    CHECK(q8_0 && q8_0->quantize_row && q8_1 && q8_1->quantize_row);
    if (q8k && q8k->quantize_row && q8k->dequantize_row)
        test_q8_k(q8k);
    if (q8_0 && q8_0->quantize_row && q8_1 && q8_1->quantize_row)
        test_q8_0(q8_0, q8_1);
    return test_finish();
}
