/* Every oracle quant vector (shared/oracle/quant-vectors, written by the
 * reference engine's own quantizer) dequantizes to the oracle's values bit for
 * bit, and the index agrees with our table's block sizes. Then, for every
 * format with a dot product, using those real blocks as weights:
 *   vec_dot(w, act(x)) == Σ dequant(w)_i * dequant(act(x))_i   (tight), and
 *   vec_dot(w, act(x)) ~= Σ dequant(w)_i * x_i   (within the activation
 *   rounding bound derived from the activation format's step size). */
#include "base/fp16.h"
#include "quant/quant.h"
#include "quant_test_util.h"

#include <math.h>
#include <string.h>

#define N_ELEMENTS 4096

static const struct { const char *name; const char *stem; } oracle_types[] = {
    {"F16", "f16"},     {"BF16", "bf16"},   {"Q4_0", "q4_0"},     {"Q4_1", "q4_1"},
    {"Q5_0", "q5_0"},   {"Q5_1", "q5_1"},   {"Q8_0", "q8_0"},     {"Q2_K", "q2_k"},
    {"Q3_K", "q3_k"},   {"Q4_K", "q4_k"},   {"Q5_K", "q5_k"},     {"Q6_K", "q6_k"},
    {"IQ4_NL", "iq4_nl"}, {"IQ4_XS", "iq4_xs"}, {"MXFP4", "mxfp4"},
};

/* The integer after "key": in the index entry that starts at entry. */
static long index_field(const char *entry, const char *key)
{
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\":", key);
    const char *at = strstr(entry, pattern);
    return at ? strtol(at + strlen(pattern), NULL, 10) : -1;
}

static void check_index(const char *index, const char *name, const quant_format *format)
{
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"type\": \"%s\"", name);
    const char *entry = strstr(index, pattern);
    CHECK_MSG(entry != NULL, "%s missing from index.json", name);
    if (!entry)
        return;
    CHECK_MSG(index_field(entry, "ggml_type_id") == (long)format->type, "%s id", name);
    CHECK_MSG(index_field(entry, "block_elements") == format->block_elems, "%s elems", name);
    CHECK_MSG(index_field(entry, "block_bytes") == format->block_bytes, "%s bytes", name);
    CHECK_MSG(index_field(entry, "n_elements") == N_ELEMENTS, "%s n_elements", name);
}

/* Largest error of one activation element after conversion to format act:
 * half a quantization step, where an 8-bit step is amax/127 of its block
 * (Q8_0/Q8_1 also round the stored scale to f16, relative error 2^-11, or
 * absolute 2^-25 when the scale is an f16 subnormal, times |q| <= 127). */
static void activation_error_bounds(uint32_t act, const float *x, int64_t n, float *bound)
{
    int block = act == TYPE_Q8_K ? QK_K : 32;
    for (int64_t i = 0; i < n; i++) {
        if (act == TYPE_F32)
            bound[i] = 0;
        else if (act == TYPE_F16)
            bound[i] = fabsf(x[i]) * 0x1p-11f + 0x1p-25f;
        else if (act == TYPE_BF16)
            bound[i] = fabsf(x[i]) * 0x1p-8f;
    }
    if (act == TYPE_F32 || act == TYPE_F16 || act == TYPE_BF16)
        return;
    for (int64_t b = 0; b < n / block; b++) {
        float amax = 0;
        for (int j = 0; j < block; j++)
            amax = fmaxf(amax, fabsf(x[b * block + j]));
        float step = amax / 127.0f;
        float slack = act == TYPE_Q8_K ? 1e-6f * amax : 127.0f * fmaxf(step * 0x1p-11f, 0x1p-25f);
        for (int j = 0; j < block; j++)
            bound[b * block + j] = 0.5f * step + slack;
    }
}

static void check_dot(const quant_format *format, const void *weights, const float *dequantized,
                      quant_test_random *random, float scale)
{
    const quant_format *act = quant_format_of(format->activation_type);
    float x[N_ELEMENTS], x_dequantized[N_ELEMENTS], bound[N_ELEMENTS];
    static unsigned char activation[N_ELEMENTS * 4 + 4096];
    for (int i = 0; i < N_ELEMENTS; i++)
        x[i] = scale * quant_test_normal(random);
    act->quantize_row(x, activation, N_ELEMENTS);
    act->dequantize_row(activation, x_dequantized, N_ELEMENTS);
    activation_error_bounds(act->type, x, N_ELEMENTS, bound);

    double exact_quantized = 0, exact_float = 0, magnitude = 0, rounding = 0;
    int outside = 0;
    for (int i = 0; i < N_ELEMENTS; i++) {
        exact_quantized += (double)dequantized[i] * x_dequantized[i];
        exact_float += (double)dequantized[i] * x[i];
        magnitude += fabs((double)dequantized[i] * x[i]);
        rounding += fabs((double)dequantized[i]) * bound[i];
        if (!(fabsf(x_dequantized[i] - x[i]) <= bound[i]) && outside++ == 0)
            fprintf(stderr, "%s: activation %d off by %g > %g\n", act->name, i,
                    fabsf(x_dequantized[i] - x[i]), bound[i]);
    }
    CHECK_MSG(outside == 0, "%s: %d activations outside their rounding bound", act->name, outside);
    /* Q8_1 carries s = fp16(d * Σq): the min term m*s is off by up to 2^-11
     * relative to m * Σ dequantized activations. */
    double min_term_slack = 0;
    if (act->type == TYPE_Q8_1) {
        const unsigned char *w = weights;
        for (int b = 0; b < N_ELEMENTS / 32; b++) {
            uint16_t m_bits = (uint16_t)(w[b * format->block_bytes + 2] |
                                         w[b * format->block_bytes + 3] << 8);
            double block_sum = 0;
            for (int j = 0; j < 32; j++)
                block_sum += x_dequantized[32 * b + j];
            min_term_slack += fabs(fp16_to_fp32(m_bits) * block_sum) * 0x1p-10;
        }
    }
    float dot = format->vec_dot(N_ELEMENTS, weights, activation);
    double tight = 2e-5 * magnitude + min_term_slack + 1e-6;
    CHECK_MSG(fabs(dot - exact_quantized) <= tight, "%s: vec_dot %.9g vs quantized-exact %.9g (tol %g)",
              format->name, dot, exact_quantized, tight);
    double loose = rounding + 2e-5 * magnitude + min_term_slack + 1e-6;
    CHECK_MSG(fabs(dot - exact_float) <= loose, "%s: vec_dot %.9g vs float-exact %.9g (tol %g)",
              format->name, dot, exact_float, loose);
    /* The activation rounding must matter less than the dot itself. */
    CHECK_MSG(rounding < 0.05 * magnitude, "%s: activation rounding bound %g vs magnitude %g",
              format->name, rounding, magnitude);

    /* One block alone gives the first block's share. */
    int elems = format->block_elems < 32 ? 32 : format->block_elems;
    double first = 0, first_magnitude = 0;
    for (int i = 0; i < elems; i++) {
        first += (double)dequantized[i] * x_dequantized[i];
        first_magnitude += fabs((double)dequantized[i] * x_dequantized[i]);
    }
    float dot_first = format->vec_dot(elems, weights, activation);
    CHECK_MSG(fabs(dot_first - first) <= 2e-5 * first_magnitude + min_term_slack + 1e-6,
              "%s: first-block dot %.9g vs %.9g", format->name, dot_first, first);
}

int main(void)
{
    size_t index_size;
    char *index = quant_test_read_shared("oracle/quant-vectors/index.json", &index_size);
    char *terminated = malloc(index_size + 1);
    memcpy(terminated, index, index_size);
    terminated[index_size] = '\0';
    free(index);

    quant_test_random random = {0x9e3779b97f4a7c15ull};
    int n_types = (int)(sizeof oracle_types / sizeof oracle_types[0]);
    for (int t = 0; t < n_types; t++) {
        int type = quant_type_from_name(oracle_types[t].name);
        const quant_format *format = type >= 0 ? quant_format_of((uint32_t)type) : NULL;
        CHECK_MSG(format && format->dequantize_row, "%s has no dequantize", oracle_types[t].name);
        if (!format || !format->dequantize_row)
            continue;
        check_index(terminated, oracle_types[t].name, format);

        char path[256];
        size_t raw_size, expected_size;
        snprintf(path, sizeof path, "oracle/quant-vectors/%s.bin", oracle_types[t].stem);
        void *raw = quant_test_read_shared(path, &raw_size);
        snprintf(path, sizeof path, "oracle/quant-vectors/%s.f32", oracle_types[t].stem);
        float *expected = quant_test_read_shared(path, &expected_size);
        CHECK_MSG(raw_size == quant_row_bytes((uint32_t)type, N_ELEMENTS), "%s raw size %zu",
                  format->name, raw_size);
        CHECK(expected_size == N_ELEMENTS * sizeof(float));
        if (raw_size == quant_row_bytes((uint32_t)type, N_ELEMENTS) &&
            expected_size == N_ELEMENTS * sizeof(float)) {
            float *got = malloc(N_ELEMENTS * sizeof(float));
            format->dequantize_row(raw, got, N_ELEMENTS);
            int mismatches = 0, first_bad = -1;
            for (int i = 0; i < N_ELEMENTS; i++)
                if (memcmp(&got[i], &expected[i], sizeof(float)) != 0) {
                    if (first_bad < 0)
                        first_bad = i;
                    mismatches++;
                }
            CHECK_MSG(mismatches == 0, "%s: %d values differ from the oracle, first at %d: %.9g vs %.9g",
                      format->name, mismatches, first_bad, first_bad >= 0 ? got[first_bad] : 0.0,
                      first_bad >= 0 ? expected[first_bad] : 0.0);
            if (format->vec_dot) {
                check_dot(format, raw, expected, &random, 1.0f);
                check_dot(format, raw, expected, &random, 1e-3f);
            }
            free(got);
        }
        free(raw);
        free(expected);
    }
    free(terminated);

    /* The grid i-quants and the ternary formats have no oracle vectors (the
     * reference quantizer of most i-quants needs an importance matrix):
     * random blocks (every bit pattern decodes, given a finite scale)
     * against their own dequantization. */
    static const char *grid_types[] = {"IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M",
                                       "TQ1_0",   "TQ2_0"};
    for (size_t t = 0; t < sizeof grid_types / sizeof grid_types[0]; t++) {
        const quant_format *format = quant_format_of((uint32_t)quant_type_from_name(grid_types[t]));
        CHECK_MSG(format && format->dequantize_row && format->vec_dot, "%s: no dot", grid_types[t]);
        if (!format || !format->dequantize_row || !format->vec_dot)
            continue;
        size_t bytes = quant_row_bytes(format->type, N_ELEMENTS);
        unsigned char *blocks = malloc(bytes);
        for (size_t i = 0; i < bytes; i++)
            blocks[i] = (unsigned char)quant_test_next(&random);
        for (int b = 0; b < N_ELEMENTS / QK_K; b++) {
            unsigned char *block = blocks + (size_t)b * (size_t)format->block_bytes;
            uint16_t d = fp32_to_fp16(0.01f + 0.001f * (float)b);
            if (format->type == TYPE_IQ1_M) { /* the f16 scale is the top nibble of four words */
                for (int k = 0; k < 4; k++)
                    block[49 + 2 * k] = (unsigned char)((block[49 + 2 * k] & 0x0f) | ((d >> (4 * k)) & 0x0f) << 4);
            } else if (format->type == TYPE_TQ1_0 || format->type == TYPE_TQ2_0) { /* d last */
                block[format->block_bytes - 2] = (unsigned char)(d & 0xff);
                block[format->block_bytes - 1] = (unsigned char)(d >> 8);
            } else {
                block[0] = (unsigned char)(d & 0xff);
                block[1] = (unsigned char)(d >> 8);
            }
        }
        float *values = malloc(N_ELEMENTS * sizeof(float));
        format->dequantize_row(blocks, values, N_ELEMENTS);
        check_dot(format, blocks, values, &random, 1.0f);
        check_dot(format, blocks, values, &random, 1e-3f);
        free(values);
        free(blocks);
    }

    /* F32 has no oracle file: its dot against itself is a plain f32 dot. */
    const quant_format *f32 = quant_format_of(TYPE_F32);
    float w[N_ELEMENTS];
    for (int i = 0; i < N_ELEMENTS; i++)
        w[i] = quant_test_normal(&random);
    check_dot(f32, w, w, &random, 1.0f);
    return test_finish();
}
