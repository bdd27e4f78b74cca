/* The grid-based i-quants (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S,
 * IQ1_M): the structure of their grids and sign table, a few grid points
 * typed in by hand from the formats' definition (llama.cpp's ggml-common.h),
 * and blocks built here byte by byte whose values the test works out from
 * the block layout and those points, not from quant_iq_grid.c. The same for
 * the ternary TQ1_0 and TQ2_0, whose bytes the test encodes itself. */
#include "base/fp16.h"
#include "quant/quant.h"
#include "quant/quant_blocks.h"
#include "test.h"

#include <stdint.h>
#include <string.h>

/* ---- grids ---------------------------------------------------------------- */

/* The level index of each byte value, or -1 when the byte is no level. */
static int level_of(const int *levels, int n_levels, int byte)
{
    for (int i = 0; i < n_levels; i++)
        if (levels[i] == byte)
            return i;
    return -1;
}

/* Every point's values are levels, and the points are in strictly
 * increasing order of their level indices read from the last value to the
 * first (which also makes them distinct). */
static void check_grid(const char *name, const void *table, int count, int values, const int *levels,
                       int n_levels)
{
    const uint8_t *bytes = table; /* little-endian: value j of point i at i * values + j */
    int bad_levels = 0, unordered = 0;
    for (int i = 0; i < count; i++) {
        for (int j = 0; j < values; j++)
            bad_levels += level_of(levels, n_levels, bytes[i * values + j]) < 0;
        if (i == 0)
            continue;
        int order = 0;
        for (int j = values - 1; j >= 0 && order == 0; j--) {
            int now = level_of(levels, n_levels, bytes[i * values + j]);
            int before = level_of(levels, n_levels, bytes[(i - 1) * values + j]);
            order = now > before ? 1 : now < before ? -1 : 0;
        }
        unordered += order <= 0;
    }
    CHECK_MSG(bad_levels == 0, "%s: %d values are not levels of the grid", name, bad_levels);
    CHECK_MSG(unordered == 0, "%s: %d points out of order or repeated", name, unordered);
}

static void test_grids(void)
{
    CHECK(sizeof quant_iq2xxs_grid / sizeof quant_iq2xxs_grid[0] == 256);
    CHECK(sizeof quant_iq2xs_grid / sizeof quant_iq2xs_grid[0] == 512);
    CHECK(sizeof quant_iq2s_grid / sizeof quant_iq2s_grid[0] == 1024);
    CHECK(sizeof quant_iq3xxs_grid / sizeof quant_iq3xxs_grid[0] == 256);
    CHECK(sizeof quant_iq3s_grid / sizeof quant_iq3s_grid[0] == 512);
    CHECK(sizeof quant_iq1s_grid / sizeof quant_iq1s_grid[0] == 2048);
    static const int iq2_levels[] = {8, 25, 43};
    static const int iq3xxs_levels[] = {4, 12, 20, 28, 36, 44, 52, 62};
    static const int iq3s_levels[] = {1, 3, 5, 7, 9, 11, 13, 15};
    static const int iq1_levels[] = {0xff, 0x00, 0x01}; /* -1, 0, 1 */
    check_grid("IQ2_XXS", quant_iq2xxs_grid, 256, 8, iq2_levels, 3);
    check_grid("IQ2_XS", quant_iq2xs_grid, 512, 8, iq2_levels, 3);
    check_grid("IQ2_S", quant_iq2s_grid, 1024, 8, iq2_levels, 3);
    check_grid("IQ3_XXS", quant_iq3xxs_grid, 256, 4, iq3xxs_levels, 8);
    check_grid("IQ3_S", quant_iq3s_grid, 512, 4, iq3s_levels, 8);
    check_grid("IQ1", quant_iq1s_grid, 2048, 8, iq1_levels, 3);

    /* Points as ggml-common.h writes them (value 0 in the lowest byte). */
    CHECK(quant_iq2xxs_grid[0] == 0x0808080808080808ull);
    CHECK(quant_iq2xxs_grid[1] == 0x080808080808082bull);
    CHECK(quant_iq2xxs_grid[127] == 0x082b192b2b190808ull);
    CHECK(quant_iq2xxs_grid[255] == 0x2b2b2b1908081908ull);
    CHECK(quant_iq2xs_grid[7] == 0x080808080819192bull);
    CHECK(quant_iq2xs_grid[351] == 0x1919082b2b2b2b2bull);
    CHECK(quant_iq2s_grid[819] == 0x2b08080808080808ull);
    CHECK(quant_iq2s_grid[1023] == 0x2b2b2b2b2b2b2b2bull);
    CHECK(quant_iq3xxs_grid[5] == 0x04040c3eu);
    CHECK(quant_iq3xxs_grid[97] == 0x14040404u);
    CHECK(quant_iq3xxs_grid[255] == 0x3e341c04u);
    CHECK(quant_iq3s_grid[0] == 0x01010101u);
    CHECK(quant_iq3s_grid[256] == 0x05090507u);
    CHECK(quant_iq3s_grid[511] == 0x0f0f0101u);
    CHECK(quant_iq1s_grid[0] == 0xffffffffffffffffull);
    CHECK(quant_iq1s_grid[1] == 0xffffffffffffff01ull);
    CHECK(quant_iq1s_grid[2] == 0xffffffffffff0000ull);
    CHECK(quant_iq1s_grid[45] == 0xffffff00010000ffull);

    /* Sign bytes: the 7 stored bits, and bit 7 making the count even. */
    int bad_signs = 0;
    for (int i = 0; i < 128; i++) {
        uint8_t s = quant_iq_sign_bytes[i];
        bad_signs += (s & 127) != i || __builtin_popcount(s) % 2 != 0;
    }
    CHECK_MSG(bad_signs == 0, "%d sign bytes wrong", bad_signs);
}

/* ---- hand-built blocks ------------------------------------------------------ */

/* A point's 8 values from its ggml-common.h hex (value 0 in the low byte),
 * negated where the sign byte has a bit, times m, into out. IQ1 points are
 * int8 bytes. */
static void expect_group(float *out, uint64_t point, uint8_t signs, float m, int signed_bytes, float delta)
{
    for (int j = 0; j < 8; j++) {
        int byte = (int)((point >> (8 * j)) & 0xff);
        int value = signed_bytes ? (int8_t)byte : byte;
        if ((signs >> j) & 1)
            value = -value;
        out[j] = m * ((float)value + delta);
    }
}

static void put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v & 0xff);
    p[1] = (uint8_t)(v >> 8);
}

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int k = 0; k < 4; k++)
        p[k] = (uint8_t)(v >> (8 * k));
}

static void compare(const char *name, const uint8_t *block, const float *want)
{
    int type = quant_type_from_name(name);
    const quant_format *format = type >= 0 ? quant_format_of((uint32_t)type) : NULL;
    CHECK_MSG(format && format->dequantize_row, "%s: no dequantize", name);
    if (!format || !format->dequantize_row)
        return;
    float got[QK_K];
    format->dequantize_row(block, got, QK_K);
    int bad = 0, first = -1;
    for (int i = 0; i < QK_K; i++)
        if (got[i] != want[i] && bad++ == 0)
            first = i;
    CHECK_MSG(bad == 0, "%s: %d values differ, first %d: %g, want %g", name, bad, first,
              first >= 0 ? got[first] : 0.0, first >= 0 ? want[first] : 0.0);
}

#define F16_ONE 0x3c00
#define F16_HALF 0x3800

static void test_iq2_xxs(void)
{
    uint8_t b[66] = {0};
    float want[QK_K];
    put_u16(b, F16_HALF);
    /* sub-block 0: points 1 and 255, then 0 and 0; sign codes 3 (values 0
     * and 1; even count) and 1 (value 0, parity adds value 7); scale 5 */
    b[2] = 1;
    b[3] = 255;
    put_u32(b + 6, 3u | 1u << 7 | 5u << 28);
    float m = 0.5f * 11.0f / 8.0f;
    expect_group(want, 0x080808080808082bull, 0x03, m, 0, 0);
    expect_group(want + 8, 0x2b2b2b1908081908ull, 0x81, m, 0, 0);
    expect_group(want + 16, 0x0808080808080808ull, 0, m, 0, 0);
    expect_group(want + 24, 0x0808080808080808ull, 0, m, 0, 0);
    /* the other sub-blocks: point 0, no signs, scale 0 (multiplier 1/8) */
    for (int g = 4; g < 32; g++)
        expect_group(want + 8 * g, 0x0808080808080808ull, 0, 0.5f / 8.0f, 0, 0);
    compare("IQ2_XXS", b, want);
}

static void test_iq2_xs(void)
{
    uint8_t b[74] = {0};
    float want[QK_K];
    put_u16(b, F16_ONE);
    put_u16(b + 2, 7 | 3 << 9);      /* group 0: point 7, sign code 3 */
    put_u16(b + 6, 351 | 64 << 9);   /* group 2: point 351, sign code 64 (+ parity) */
    b[66] = 0x52;                    /* sub-block 0: scales 2 (first 16) and 5 */
    expect_group(want, 0x080808080819192bull, 0x03, 5.0f / 8.0f, 0, 0);
    expect_group(want + 8, 0x0808080808080808ull, 0, 5.0f / 8.0f, 0, 0);
    expect_group(want + 16, 0x1919082b2b2b2b2bull, 0xc0, 11.0f / 8.0f, 0, 0);
    expect_group(want + 24, 0x0808080808080808ull, 0, 11.0f / 8.0f, 0, 0);
    for (int g = 4; g < 32; g++)
        expect_group(want + 8 * g, 0x0808080808080808ull, 0, 1.0f / 8.0f, 0, 0);
    compare("IQ2_XS", b, want);
}

static void test_iq2_s(void)
{
    uint8_t b[82] = {0};
    float want[QK_K];
    put_u16(b, F16_ONE);
    b[2 + 0] = 0x33;  /* group 0: low bits of 819 */
    b[2 + 3] = 0xff;  /* group 3: low bits of 1023 */
    b[34 + 0] = 0x80; /* sign bytes: 8 bits stored, no parity */
    b[34 + 3] = 0x01;
    b[66] = 0x03 | 0xc0; /* index bits 8-9: 3 for group 0 and group 3 */
    b[74] = 0x31;        /* scales 1 and 3 */
    expect_group(want, 0x2b08080808080808ull, 0x80, 3.0f / 8.0f, 0, 0);
    expect_group(want + 8, 0x0808080808080808ull, 0, 3.0f / 8.0f, 0, 0);
    expect_group(want + 16, 0x0808080808080808ull, 0, 7.0f / 8.0f, 0, 0);
    expect_group(want + 24, 0x2b2b2b2b2b2b2b2bull, 0x01, 7.0f / 8.0f, 0, 0);
    for (int g = 4; g < 32; g++)
        expect_group(want + 8 * g, 0x0808080808080808ull, 0, 1.0f / 8.0f, 0, 0);
    compare("IQ2_S", b, want);
}

static void test_iq3_xxs(void)
{
    uint8_t b[98] = {0};
    float want[QK_K];
    put_u16(b, F16_ONE);
    b[2] = 5;   /* group 0: points 5 and 255 (4 values each) */
    b[3] = 255;
    put_u32(b + 66, 0x7fu | 6u << 28); /* sign code 127 (+ parity: all 8), scale 6 */
    expect_group(want, 0x3e341c0404040c3eull, 0xff, 13.0f / 4.0f, 0, 0);
    for (int g = 1; g < 4; g++)
        expect_group(want + 8 * g, 0x0404040404040404ull, 0, 13.0f / 4.0f, 0, 0);
    for (int g = 4; g < 32; g++)
        expect_group(want + 8 * g, 0x0404040404040404ull, 0, 1.0f / 4.0f, 0, 0);
    compare("IQ3_XXS", b, want);
}

static void test_iq3_s(void)
{
    uint8_t b[110] = {0};
    float want[QK_K];
    put_u16(b, F16_ONE);
    b[2 + 0] = 0x00;    /* point 256 = 0 | bit 0 of qh */
    b[2 + 1] = 0xff;    /* point 511 = 255 | bit 1 of qh */
    b[66] = 0x03;       /* qh of sub-block 0 */
    b[74] = 0x21;       /* sign byte of group 0 */
    b[106] = 0x72;      /* scales of sub-blocks 0 (2) and 1 (7) */
    expect_group(want, 0x0f0f010105090507ull, 0x21, 5.0f, 0, 0);
    for (int g = 1; g < 4; g++)
        expect_group(want + 8 * g, 0x0101010101010101ull, 0, 5.0f, 0, 0);
    for (int g = 4; g < 8; g++)
        expect_group(want + 8 * g, 0x0101010101010101ull, 0, 15.0f, 0, 0);
    for (int g = 8; g < 32; g++)
        expect_group(want + 8 * g, 0x0101010101010101ull, 0, 1.0f, 0, 0);
    compare("IQ3_S", b, want);
}

static void test_iq1_s(void)
{
    uint8_t b[50] = {0};
    float want[QK_K];
    put_u16(b, F16_ONE);
    b[2 + 0] = 1;
    b[2 + 1] = 2;
    put_u16(b + 34, 3 << 12 | 0x8000); /* sub-block 0: scale 3, delta -1/8 */
    expect_group(want, 0xffffffffffffff01ull, 0, 7.0f, 1, -0.125f);
    expect_group(want + 8, 0xffffffffffff0000ull, 0, 7.0f, 1, -0.125f);
    for (int g = 2; g < 4; g++)
        expect_group(want + 8 * g, 0xffffffffffffffffull, 0, 7.0f, 1, -0.125f);
    for (int g = 4; g < 32; g++)
        expect_group(want + 8 * g, 0xffffffffffffffffull, 0, 1.0f, 1, 0.125f);
    compare("IQ1_S", b, want);
}

static void test_iq1_m(void)
{
    uint8_t b[56] = {0};
    float want[QK_K];
    b[0] = 1;
    b[1] = 2;
    b[32] = 0x08; /* groups 0 and 1: delta -1/8 and +1/8 */
    b[33] = 0x80; /* groups 2 and 3: +1/8 and -1/8 */
    /* scale words: sub-block 0's 3-bit scales 2 and 4 in word 0; the f16
     * 1.0 (0x3c00) in the top nibbles, word 0 holding its lowest */
    put_u16(b + 48, 2 | 4 << 3);
    put_u16(b + 50, 0x0000);
    put_u16(b + 52, 0xc000);
    put_u16(b + 54, 0x3000);
    expect_group(want, 0xffffffffffffff01ull, 0, 5.0f, 1, -0.125f);
    expect_group(want + 8, 0xffffffffffff0000ull, 0, 5.0f, 1, 0.125f);
    expect_group(want + 16, 0xffffffffffffffffull, 0, 9.0f, 1, 0.125f);
    expect_group(want + 24, 0xffffffffffffffffull, 0, 9.0f, 1, -0.125f);
    for (int g = 4; g < 32; g++)
        expect_group(want + 8 * g, 0xffffffffffffffffull, 0, 1.0f, 1, 0.125f);
    compare("IQ1_M", b, want);
}

/* ---- ternary formats ------------------------------------------------------- */

/* A TQ1_0 byte as the format defines it: the digits (0, 1, 2; first most
 * significant) as a base-3 number, scaled from 3^5 to 2^8 rounding up. */
static uint8_t tq1_byte(const int digits[5])
{
    int v = 0;
    for (int i = 0; i < 5; i++)
        v = 3 * v + digits[i];
    return (uint8_t)((v * 256 + 242) / 243);
}

static void test_tq1_0(void)
{
    uint8_t b[54] = {0};
    float want[QK_K];
    /* every digit 0 (value -1) unless set below; d = 0.5 at the end */
    for (int i = 0; i < QK_K; i++)
        want[i] = -0.5f;
    put_u16(b + 52, F16_HALF);
    static const int first[5] = {2, 0, 1, 2, 1}, middle[5] = {0, 1, 2, 0, 0}, last[5] = {1, 2, 0, 2, 0};
    b[0] = tq1_byte(first);   /* values 32n of the first 160 */
    b[32] = tq1_byte(middle); /* values 160 + 16n */
    b[49] = tq1_byte(last);   /* qh byte 1: values 240 + 4l + 1, four digits */
    for (int n = 0; n < 5; n++) {
        want[32 * n] = 0.5f * (float)(first[n] - 1);
        want[160 + 16 * n] = 0.5f * (float)(middle[n] - 1);
    }
    for (int l = 0; l < 4; l++)
        want[240 + 4 * l + 1] = 0.5f * (float)(last[l] - 1);
    compare("TQ1_0", b, want);
    /* every byte an encoder can write decodes to its own digits */
    int wrong = 0;
    for (int v = 0; v < 243; v++) {
        int digits[5] = {v / 81, v / 27 % 3, v / 9 % 3, v / 3 % 3, v % 3};
        uint8_t block[54] = {0};
        block[5] = tq1_byte(digits);
        put_u16(block + 52, F16_ONE);
        float got[QK_K];
        quant_format_of(TYPE_TQ1_0)->dequantize_row(block, got, QK_K);
        for (int n = 0; n < 5; n++)
            wrong += got[32 * n + 5] != (float)(digits[n] - 1);
    }
    CHECK_MSG(wrong == 0, "TQ1_0: %d digits of the 243 encodings decode wrong", wrong);
}

static void test_tq2_0(void)
{
    uint8_t b[66] = {0};
    float want[QK_K];
    for (int i = 0; i < QK_K; i++)
        want[i] = -0.5f; /* code 0 */
    put_u16(b + 64, F16_HALF);
    b[0] = 2 | 0 << 2 | 1 << 4 | 2 << 6;  /* values 0, 32, 64, 96 */
    b[33] = 0 | 1 << 2 | 2 << 4 | 1 << 6; /* values 129, 161, 193, 225 */
    static const int codes0[4] = {2, 0, 1, 2}, codes33[4] = {0, 1, 2, 1};
    for (int l = 0; l < 4; l++) {
        want[32 * l] = 0.5f * (float)(codes0[l] - 1);
        want[128 + 1 + 32 * l] = 0.5f * (float)(codes33[l] - 1);
    }
    compare("TQ2_0", b, want);
}

int main(void)
{
    test_grids();
    test_iq2_xxs();
    test_iq2_xs();
    test_iq2_s();
    test_iq3_xxs();
    test_iq3_s();
    test_iq1_s();
    test_iq1_m();
    test_tq1_0();
    test_tq2_0();
    return test_finish();
}
