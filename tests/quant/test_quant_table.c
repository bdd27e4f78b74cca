/* The format table against quant-formats.md section 1: sizes of every valid
 * id, invalid ids, name lookup, row sizes, the activation formats of section
 * 5.4, and the worked examples of sections 6 (Q4_K) and 7 (MXFP4). */
#include "quant/quant.h"
#include "quant/quant_blocks.h"
#include "test.h"

#include <math.h>
#include <stdint.h>

/* Section 1 of the spec, typed in by hand. */
static const struct { int id; const char *name; int elems, bytes; } spec_types[] = {
    {0, "F32", 1, 4},        {1, "F16", 1, 2},         {2, "Q4_0", 32, 18},
    {3, "Q4_1", 32, 20},     {6, "Q5_0", 32, 22},      {7, "Q5_1", 32, 24},
    {8, "Q8_0", 32, 34},     {9, "Q8_1", 32, 36},      {10, "Q2_K", 256, 84},
    {11, "Q3_K", 256, 110},  {12, "Q4_K", 256, 144},   {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210},  {15, "Q8_K", 256, 292},   {16, "IQ2_XXS", 256, 66},
    {17, "IQ2_XS", 256, 74}, {18, "IQ3_XXS", 256, 98}, {19, "IQ1_S", 256, 50},
    {20, "IQ4_NL", 32, 18},  {21, "IQ3_S", 256, 110},  {22, "IQ2_S", 256, 82},
    {23, "IQ4_XS", 256, 136}, {24, "I8", 1, 1},        {25, "I16", 1, 2},
    {26, "I32", 1, 4},       {27, "I64", 1, 8},        {28, "F64", 1, 8},
    {29, "IQ1_M", 256, 56},  {30, "BF16", 1, 2},       {34, "TQ1_0", 256, 54},
    {35, "TQ2_0", 256, 66},  {39, "MXFP4", 32, 17},    {40, "NVFP4", 64, 36},
    {41, "Q1_0", 128, 18},   {42, "Q2_0", 64, 18},
};

static void check_worked_examples(void)
{
    unsigned char q4k[144] = {0x00, 0x24, 0x00, 0x1C, 0x8C, 0x21, 0x47, 0xFF,
                              0xC3, 0x40, 0x0F, 0x88, 0xC8, 0x11, 0x26, 0x12};
    q4k[16 + 0] = 0x5A;
    q4k[16 + 1] = 0xF0;
    q4k[16 + 32] = 0x3C;
    q4k[16 + 127] = 0x7C;
    float y[256];
    quant_format_of(TYPE_Q4_K)->dequantize_row(q4k, y, 256);
    CHECK(y[0] == 1.86328125f);
    CHECK(y[1] == -0.01171875f);
    CHECK(y[32] == 2.578125f);
    CHECK(y[33] == 7.734375f);
    CHECK(y[64] == 1.25390625f);
    CHECK(y[255] == 5.33984375f);

    unsigned char mxfp4[17] = {0x7E, 0x2B, 0x9F};
    mxfp4[16] = 0x70;
    quant_format_of(TYPE_MXFP4)->dequantize_row(mxfp4, y, 32);
    CHECK(y[0] == -0.75f);
    CHECK(y[16] == 0.5f);
    CHECK(y[1] == -3.0f);
    CHECK(y[17] == -0.25f);
    CHECK(y[15] == 0.0f && y[2] == 0.0f && y[30] == 0.0f);
    CHECK(y[31] == 3.0f);
    /* Exponent extremes: code 1 (E2M1 0.5) decodes to exactly 2^(e-128). */
    static const int exponents[] = {0, 1, 2, 127, 254, 255};
    for (int i = 0; i < 6; i++) {
        unsigned char block[17] = {(unsigned char)exponents[i], 0x01};
        quant_format_of(TYPE_MXFP4)->dequantize_row(block, y, 32);
        CHECK_MSG(y[0] == ldexpf(1.0f, exponents[i] - 128), "e = %d gives %g", exponents[i], y[0]);
    }
    /* The kernels' table of the scales: every exponent. */
    int table_mismatches = 0;
    for (int e = 0; e < 256; e++) {
        float want = ldexpf(1.0f, e - 128);
        uint32_t want_bits;
        memcpy(&want_bits, &want, sizeof want_bits);
        table_mismatches += quant_e8m0_half_bits[e] != want_bits;
    }
    CHECK_MSG(table_mismatches == 0, "%d E8M0 table entries are not 2^(e-128)", table_mismatches);
}

int main(void)
{
    check_worked_examples();
    int n_spec = (int)(sizeof spec_types / sizeof spec_types[0]);
    int valid[64] = {0};
    for (int i = 0; i < n_spec; i++) {
        int id = spec_types[i].id;
        valid[id] = 1;
        const quant_format *format = quant_format_of((uint32_t)id);
        CHECK_MSG(format != NULL, "no row for id %d", id);
        if (!format)
            continue;
        CHECK_MSG((int)format->type == id, "row %d says type %d", id, (int)format->type);
        CHECK_MSG(strcmp(format->name, spec_types[i].name) == 0, "id %d named %s", id, format->name);
        CHECK_MSG(format->block_elems == spec_types[i].elems, "%s block elems %d", format->name,
                  format->block_elems);
        CHECK_MSG(format->block_bytes == spec_types[i].bytes, "%s block bytes %d", format->name,
                  format->block_bytes);
        CHECK(quant_type_from_name(spec_types[i].name) == id);
        /* A row that can be dotted must say how its activations are stored,
         * and that format must be able to quantize f32 activations. */
        if (format->vec_dot) {
            const quant_format *act = quant_format_of(format->activation_type);
            CHECK_MSG(act && act->quantize_row && act->dequantize_row,
                      "%s: activation format unusable", format->name);
            CHECK_MSG(format->dequantize_row != NULL, "%s: dot without dequantize", format->name);
        }
    }
    for (uint32_t id = 0; id < 64; id++)
        if (!valid[id])
            CHECK_MSG(quant_format_of(id) == NULL, "id %u should be invalid", id);
    CHECK(quant_format_of(UINT32_MAX) == NULL);

    /* Section 5.4: the format each weight type's activations are converted to. */
    static const struct { int weight, activation; } pairs[] = {
        {TYPE_F32, TYPE_F32},     {TYPE_F16, TYPE_F16},     {TYPE_BF16, TYPE_BF16},
        {TYPE_Q4_0, TYPE_Q8_0},   {TYPE_Q4_1, TYPE_Q8_1},   {TYPE_Q5_0, TYPE_Q8_0},
        {TYPE_Q5_1, TYPE_Q8_1},   {TYPE_Q8_0, TYPE_Q8_0},   {TYPE_IQ4_NL, TYPE_Q8_0},
        {TYPE_MXFP4, TYPE_Q8_0},  {TYPE_Q2_K, TYPE_Q8_K},   {TYPE_Q3_K, TYPE_Q8_K},
        {TYPE_Q4_K, TYPE_Q8_K},   {TYPE_Q5_K, TYPE_Q8_K},   {TYPE_Q6_K, TYPE_Q8_K},
        {TYPE_IQ4_XS, TYPE_Q8_K},   {TYPE_IQ2_XXS, TYPE_Q8_K}, {TYPE_IQ2_XS, TYPE_Q8_K},
        {TYPE_IQ2_S, TYPE_Q8_K},    {TYPE_IQ3_XXS, TYPE_Q8_K}, {TYPE_IQ3_S, TYPE_Q8_K},
        {TYPE_IQ1_S, TYPE_Q8_K},    {TYPE_IQ1_M, TYPE_Q8_K},   {TYPE_TQ1_0, TYPE_Q8_K},
        {TYPE_TQ2_0, TYPE_Q8_K},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        const quant_format *format = quant_format_of((uint32_t)pairs[i].weight);
        CHECK_MSG(format && (int)format->activation_type == pairs[i].activation,
                  "activation type of %d", pairs[i].weight);
        CHECK_MSG(format && format->vec_dot && format->dequantize_row, "type %d lacks dot",
                  pairs[i].weight);
    }

    CHECK(quant_type_from_name("q4_k") == TYPE_Q4_K);
    CHECK(quant_type_from_name("Mxfp4") == TYPE_MXFP4);
    CHECK(quant_type_from_name("Q4_K_M") == -1);
    CHECK(quant_type_from_name("Q4") == -1);
    CHECK(quant_type_from_name("") == -1);
    CHECK(quant_type_from_name(NULL) == -1);

    CHECK(quant_row_bytes(TYPE_Q4_K, 512) == 288);
    CHECK(quant_row_bytes(TYPE_MXFP4, 2880) == 1530); /* spec 7.3 */
    CHECK(quant_row_bytes(TYPE_F32, 7) == 28);
    CHECK(quant_row_bytes(TYPE_Q4_K, 255) == 0);
    CHECK(quant_row_bytes(TYPE_Q8_0, -32) == 0);
    CHECK(quant_row_bytes(4, 32) == 0);
    CHECK(quant_row_bytes(TYPE_COUNT, 32) == 0);
    CHECK(quant_row_bytes(TYPE_I64, INT64_MAX) == 0); /* would overflow size_t */
    CHECK(quant_row_bytes(TYPE_Q8_0, 0) == 0);
    return test_finish();
}
