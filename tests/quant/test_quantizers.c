/* Weight quantizers: round trips of f32 rows stay within error bounds derived
 * from each format's bits (the rounding noise of a plain uniform quantizer
 * over the group's range, step²/12 per value), quantizing an already
 * dequantized row reproduces it closely, and odd rows (zeros, constants,
 * outliers, NaN) are handled. */
#include "base/fp16.h"
#include "quant/quant.h"
#include "quant_test_util.h"

#include <math.h>
#include <string.h>

#define N 4096

/* Sum over the row of the squared-error allowance of a uniform quantizer with
 * `levels` levels spread over each group's range; symmetric formats span
 * [-amax, amax], affine ones [min(x, 0), max(x)]. */
static double uniform_noise(const float *x, int n, int group, int levels, int affine)
{
    double total = 0;
    for (int g = 0; g < n / group; g++) {
        float low = 0, high = 0, amax = 0;
        for (int j = 0; j < group; j++) {
            float v = x[g * group + j];
            low = fminf(low, v);
            high = fmaxf(high, v);
            amax = fmaxf(amax, fabsf(v));
        }
        double range = affine ? high - low : 2.0 * amax;
        double step = range / (levels - 1);
        total += group * step * step / 12.0;
    }
    return total;
}

static double squared_error(const float *a, const float *b, int n)
{
    double total = 0;
    for (int i = 0; i < n; i++)
        total += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    return total;
}

typedef struct format_case {
    int type;
    int group;   /* values sharing one scale */
    int levels;  /* distinct levels of the uniform model */
    int affine;
} format_case;

/* Allowances from the bits: Q4_0 has 16 levels symmetric over 32 values,
 * Q4_K/Q5_K 16/32 levels with a min over 32, Q6_K 64 levels over 16, Q8_0 256
 * over 32. IQ4_NL has 16 non-uniform levels spanning 240 of its 254-wide
 * range. MXFP4's power-of-two scale can leave the top level at up to twice
 * the largest value, and its levels are 1, 2 or 4 apart on a 24-wide span:
 * modelled as 8 uniform levels over the block. */
static const format_case cases[] = {
    {TYPE_Q8_0, 32, 255, 0},  {TYPE_Q4_0, 32, 16, 0}, {TYPE_Q4_K, 32, 16, 1},
    {TYPE_Q5_K, 32, 32, 1},   {TYPE_Q6_K, 16, 64, 0}, {TYPE_IQ4_NL, 32, 16, 0},
    {TYPE_MXFP4, 32, 8, 0},
};

static void fill_row(float *x, quant_test_random *random, int shifted)
{
    for (int b = 0; b < N / 256; b++) {
        /* Magnitudes vary over four decades between super-blocks. */
        float amplitude = powf(10.0f, 2.0f * quant_test_uniform(random) - 1.0f);
        float shift = shifted ? amplitude * 0.7f : 0.0f;
        for (int j = 0; j < 256; j++)
            x[256 * b + j] = amplitude * quant_test_normal(random) + shift;
    }
}

static void check_format(const format_case *c, quant_test_random *random)
{
    const quant_format *format = quant_format_of((uint32_t)c->type);
    CHECK_MSG(format && format->quantize_row && format->dequantize_row, "type %d: no quantizer", c->type);
    if (!format || !format->quantize_row || !format->dequantize_row)
        return;
    static float x[N], y[N], y2[N];
    static unsigned char packed[N * 4];
    for (int shifted = 0; shifted < 2; shifted++) {
        fill_row(x, random, shifted);
        format->quantize_row(x, packed, N);
        format->dequantize_row(packed, y, N);
        double error = squared_error(x, y, N);
        double allowance = uniform_noise(x, N, c->group, c->levels, c->affine);
        printf("%-6s %s: rmse/allowance %.3f\n", format->name, shifted ? "shifted" : "centred",
               sqrt(error / allowance));
        CHECK_MSG(error <= allowance, "%s: squared error %g over the %d-level allowance %g",
                  format->name, error, c->levels, allowance);

        /* Re-quantizing representable values must stay close to them. */
        format->quantize_row(y, packed, N);
        format->dequantize_row(packed, y2, N);
        double again = squared_error(y, y2, N);
        CHECK_MSG(again <= 0.05 * error, "%s: re-quantizing moved values by %g (first pass %g)",
                  format->name, again, error);
    }

    /* Zeros stay zeros; a constant row is kept to within its format's step. */
    for (int i = 0; i < N; i++)
        x[i] = 0.0f;
    format->quantize_row(x, packed, N);
    format->dequantize_row(packed, y, N);
    CHECK_MSG(squared_error(x, y, N) == 0, "%s: zeros not kept", format->name);
    for (int i = 0; i < N; i++)
        x[i] = 0.3f;
    format->quantize_row(x, packed, N);
    format->dequantize_row(packed, y, N);
    double constant_error = 0;
    for (int i = 0; i < N; i++)
        if (fabs(y[i] - 0.3) > constant_error)
            constant_error = fabs(y[i] - 0.3);
    CHECK_MSG(constant_error <= 0.3 * 2.0 / (c->levels - 1), "%s: constant off by %g", format->name,
              constant_error);

    /* One large outlier: itself kept within a step, the row still decodes. */
    fill_row(x, random, 0);
    x[100] = 1000.0f;
    format->quantize_row(x, packed, N);
    format->dequantize_row(packed, y, N);
    CHECK_MSG(fabsf(y[100] - 1000.0f) <= 2000.0f / (c->levels - 1), "%s: outlier became %g",
              format->name, y[100]);
    int finite = 1;
    for (int i = 0; i < N; i++)
        if (!isfinite(y[i]))
            finite = 0;
    CHECK_MSG(finite, "%s: outlier row decodes to non-finite values", format->name);

    /* NaN input must not crash (the sanitizer build checks the conversions). */
    x[7] = NAN;
    format->quantize_row(x, packed, N);
    format->dequantize_row(packed, y, N);
}

static void check_float(int type, float relative)
{
    const quant_format *format = quant_format_of((uint32_t)type);
    float x[1024], y[1024];
    uint16_t packed[1024];
    quant_test_random random = {12345};
    for (int i = 0; i < 1024; i++)
        x[i] = quant_test_normal(&random) * powf(10.0f, 4.0f * quant_test_uniform(&random));
    format->quantize_row(x, packed, 1024);
    format->dequantize_row(packed, y, 1024);
    int outside = 0;
    for (int i = 0; i < 1024; i++)
        if (!(fabsf(y[i] - x[i]) <= relative * fabsf(x[i]) + 0x1p-25f))
            outside++;
    CHECK_MSG(outside == 0, "%s: %d values rounded further than %g relative", format->name, outside,
              relative);
}

int main(void)
{
    quant_test_random random = {0x243f6a8885a308d3ull};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_format(&cases[i], &random);
    check_float(TYPE_F16, 0x1p-11f);
    check_float(TYPE_BF16, 0x1p-8f);

    /* Q8_0 weights: every value within half a step (plus the f16 scale). */
    const quant_format *q8 = quant_format_of(TYPE_Q8_0);
    static float x[N], y[N];
    static unsigned char packed[N * 2];
    fill_row(x, &random, 0);
    q8->quantize_row(x, packed, N);
    q8->dequantize_row(packed, y, N);
    int outside = 0;
    for (int b = 0; b < N / 32; b++) {
        float amax = 0;
        for (int j = 0; j < 32; j++)
            amax = fmaxf(amax, fabsf(x[32 * b + j]));
        float bound = 0.5f * amax / 127 + amax * 0x1p-11f;
        for (int j = 0; j < 32; j++)
            if (!(fabsf(y[32 * b + j] - x[32 * b + j]) <= bound)) {
                if (outside++ == 0)
                    fprintf(stderr, "Q8_0: value %d off by %g\n", 32 * b + j,
                            fabsf(y[32 * b + j] - x[32 * b + j]));
            }
    }
    CHECK_MSG(outside == 0, "Q8_0: %d values beyond half a step", outside);
    return test_finish();
}
