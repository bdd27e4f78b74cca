/* The format table: one row per valid ggml type id, with its block geometry,
 * its activation format and its scalar functions, plus lookups by id and name.
 *
 * Activation quantization. A quantized weight row is never dotted against f32
 * activations: the activation vector is first converted to the row's
 * activation_type, once per input row, and the dot product of a block is then
 * an integer sum scaled once. Activations are quantized to 8 bits exactly as
 * the reference engine (llama.cpp's CPU backend) does it: Q8_K (f32 scale per
 * 256 values, round half to even, negative scale convention of spec 5.3) for
 * the K-quants and the 256-element i-quants and ternary formats, Q8_1 for
 * Q4_1/Q5_1 (whose min term needs the block sum), and Q8_0 (round half away
 * from zero, spec 5.2) for the other 32-element formats. This is both fast
 * (integer dot products vectorize well) and the closest we can get to the
 * oracle logits, which were computed that way. Float weights are dotted in
 * their own type: F16 against F16, BF16 against BF16.
 *
 * Every vec_dot sums whole blocks in increasing order into one f32
 * accumulator, so a result depends only on the two rows, never on batching. */
#include "quant.h"
#include "quant_blocks.h"

#include <ctype.h>
#include <stdint.h>

#define ROW(id, text, elems, bytes, act, deq, quant, dot) \
    [id] = { text, id, elems, bytes, act, deq, quant, dot }

/* Rows whose data bmoe cannot decode (Q1_0, Q2_0, NVFP4, plain integers)
 * still carry their sizes so that a GGUF file using them can be walked and
 * reported on. Where no dot product exists the activation type is the
 * reference engine's when the spec names it, else the type itself. */
static const quant_format quant_formats[TYPE_COUNT] = {
    ROW(TYPE_F32, "F32", 1, 4, TYPE_F32, dequantize_row_f32, quantize_row_f32, vec_dot_f32),
    ROW(TYPE_F16, "F16", 1, 2, TYPE_F16, dequantize_row_f16, quantize_row_f16, vec_dot_f16),
    ROW(TYPE_Q4_0, "Q4_0", 32, 18, TYPE_Q8_0, dequantize_row_q4_0, quantize_row_q4_0, vec_dot_q4_0),
    ROW(TYPE_Q4_1, "Q4_1", 32, 20, TYPE_Q8_1, dequantize_row_q4_1, NULL, vec_dot_q4_1),
    ROW(TYPE_Q5_0, "Q5_0", 32, 22, TYPE_Q8_0, dequantize_row_q5_0, NULL, vec_dot_q5_0),
    ROW(TYPE_Q5_1, "Q5_1", 32, 24, TYPE_Q8_1, dequantize_row_q5_1, NULL, vec_dot_q5_1),
    ROW(TYPE_Q8_0, "Q8_0", 32, 34, TYPE_Q8_0, dequantize_row_q8_0, quantize_row_q8_0, vec_dot_q8_0),
    ROW(TYPE_Q8_1, "Q8_1", 32, 36, TYPE_Q8_1, dequantize_row_q8_1, quantize_row_q8_1, NULL),
    ROW(TYPE_Q2_K, "Q2_K", QK_K, 84, TYPE_Q8_K, dequantize_row_q2_k, NULL, vec_dot_q2_k),
    ROW(TYPE_Q3_K, "Q3_K", QK_K, 110, TYPE_Q8_K, dequantize_row_q3_k, NULL, vec_dot_q3_k),
    ROW(TYPE_Q4_K, "Q4_K", QK_K, 144, TYPE_Q8_K, dequantize_row_q4_k, quantize_row_q4_k, vec_dot_q4_k),
    ROW(TYPE_Q5_K, "Q5_K", QK_K, 176, TYPE_Q8_K, dequantize_row_q5_k, quantize_row_q5_k, vec_dot_q5_k),
    ROW(TYPE_Q6_K, "Q6_K", QK_K, 210, TYPE_Q8_K, dequantize_row_q6_k, quantize_row_q6_k, vec_dot_q6_k),
    ROW(TYPE_Q8_K, "Q8_K", QK_K, 292, TYPE_Q8_K, dequantize_row_q8_k, quantize_row_q8_k, NULL),
    ROW(TYPE_IQ2_XXS, "IQ2_XXS", QK_K, 66, TYPE_Q8_K, dequantize_row_iq2_xxs, NULL, vec_dot_iq2_xxs),
    ROW(TYPE_IQ2_XS, "IQ2_XS", QK_K, 74, TYPE_Q8_K, dequantize_row_iq2_xs, NULL, vec_dot_iq2_xs),
    ROW(TYPE_IQ3_XXS, "IQ3_XXS", QK_K, 98, TYPE_Q8_K, dequantize_row_iq3_xxs, NULL, vec_dot_iq3_xxs),
    ROW(TYPE_IQ1_S, "IQ1_S", QK_K, 50, TYPE_Q8_K, dequantize_row_iq1_s, NULL, vec_dot_iq1_s),
    ROW(TYPE_IQ4_NL, "IQ4_NL", 32, 18, TYPE_Q8_0, dequantize_row_iq4_nl, quantize_row_iq4_nl, vec_dot_iq4_nl),
    ROW(TYPE_IQ3_S, "IQ3_S", QK_K, 110, TYPE_Q8_K, dequantize_row_iq3_s, NULL, vec_dot_iq3_s),
    ROW(TYPE_IQ2_S, "IQ2_S", QK_K, 82, TYPE_Q8_K, dequantize_row_iq2_s, NULL, vec_dot_iq2_s),
    ROW(TYPE_IQ4_XS, "IQ4_XS", QK_K, 136, TYPE_Q8_K, dequantize_row_iq4_xs, NULL, vec_dot_iq4_xs),
    ROW(TYPE_I8, "I8", 1, 1, TYPE_I8, NULL, NULL, NULL),
    ROW(TYPE_I16, "I16", 1, 2, TYPE_I16, NULL, NULL, NULL),
    ROW(TYPE_I32, "I32", 1, 4, TYPE_I32, NULL, NULL, NULL),
    ROW(TYPE_I64, "I64", 1, 8, TYPE_I64, NULL, NULL, NULL),
    ROW(TYPE_F64, "F64", 1, 8, TYPE_F64, NULL, NULL, NULL),
    ROW(TYPE_IQ1_M, "IQ1_M", QK_K, 56, TYPE_Q8_K, dequantize_row_iq1_m, NULL, vec_dot_iq1_m),
    ROW(TYPE_BF16, "BF16", 1, 2, TYPE_BF16, dequantize_row_bf16, quantize_row_bf16, vec_dot_bf16),
    ROW(TYPE_TQ1_0, "TQ1_0", QK_K, 54, TYPE_Q8_K, dequantize_row_tq1_0, NULL, vec_dot_tq1_0),
    ROW(TYPE_TQ2_0, "TQ2_0", QK_K, 66, TYPE_Q8_K, dequantize_row_tq2_0, NULL, vec_dot_tq2_0),
    ROW(TYPE_MXFP4, "MXFP4", 32, 17, TYPE_Q8_0, dequantize_row_mxfp4, quantize_row_mxfp4, vec_dot_mxfp4),
    ROW(TYPE_NVFP4, "NVFP4", 64, 36, TYPE_Q8_0, NULL, NULL, NULL),
    ROW(TYPE_Q1_0, "Q1_0", 128, 18, TYPE_Q1_0, NULL, NULL, NULL),
    ROW(TYPE_Q2_0, "Q2_0", 64, 18, TYPE_Q2_0, NULL, NULL, NULL),
};

const quant_format *quant_format_of(uint32_t type)
{
    if (type >= TYPE_COUNT)
        return NULL;
    const quant_format *format = &quant_formats[type];
    /* Removed ids (4, 5, 31-33, 36-38) are the table's empty rows. */
    return format->name ? format : NULL;
}

size_t quant_row_bytes(uint32_t type, int64_t n)
{
    const quant_format *format = quant_format_of(type);
    if (!format || n < 0 || n % format->block_elems != 0)
        return 0;
    if ((uint64_t)(n / format->block_elems) > SIZE_MAX / (size_t)format->block_bytes)
        return 0;
    return (size_t)(n / format->block_elems) * (size_t)format->block_bytes;
}

int quant_type_from_name(const char *name)
{
    if (!name)
        return -1;
    for (int type = 0; type < TYPE_COUNT; type++) {
        const char *candidate = quant_formats[type].name;
        if (!candidate)
            continue;
        size_t i = 0;
        while (candidate[i] && name[i] &&
               toupper((unsigned char)name[i]) == (unsigned char)candidate[i])
            i++;
        if (!candidate[i] && !name[i])
            return type;
    }
    return -1;
}
