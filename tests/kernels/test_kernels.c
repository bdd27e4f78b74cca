/* Dot-product kernel sets: every compiled set the CPU runs, every type it
 * provides, against the scalar reference (quant_format.vec_dot) and against a
 * float64 dot of the dequantized rows, for several row lengths and 1..9 rows,
 * and for rows whose in-block integer sums are as large as each format allows;
 * bit-identical results whatever the grouping of rows (batch invariance); and
 * the dispatch (kernels_select, BMOE_ISA through kernels_best, fallbacks).
 * Tile kernels: every element bit-identical to dot_rows for its row and
 * token, over many tile shapes, strides and offsets, nothing written outside
 * the tile. axpy: each element exactly one fused multiply-add (fmaf). */
#include "kernels/kernels.h"
#include "kernels/kernels_dispatch.h"
#include "base/fp16.h"
#include "test.h"

#include <math.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_ROWS 9

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint32_t rng_next(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 32);
}

/* Uniform in [lo, hi). */
static float rng_float(float lo, float hi)
{
    return lo + (hi - lo) * (float)(rng_next() >> 8) * (1.0f / 16777216.0f);
}

static void put_f16(uint8_t *p, float value)
{
    uint16_t h = fp32_to_fp16(value);
    memcpy(p, &h, 2);
}

/* Random floats with a spread of magnitudes, as activations and weights have. */
static void random_floats(float *x, int64_t n)
{
    float scale = rng_float(0.1f, 4.0f);
    for (int64_t i = 0; i < n; i++) {
        x[i] = rng_float(-1.0f, 1.0f) * scale;
        if (rng_next() % 64 == 0)
            x[i] *= 8.0f; /* an outlier now and then, as real rows have */
    }
}

/* The f16 block scale of a grid i-quant block: IQ1_M spreads it over the top
 * nibbles of its four scale words (bytes 48-55), the others start with it. */
static void put_iq_scale(uint32_t type, uint8_t *block, float value)
{
    uint16_t h = fp32_to_fp16(value);
    if (type != TYPE_IQ1_M) {
        memcpy(block, &h, 2);
        return;
    }
    for (int k = 0; k < 4; k++)
        block[49 + 2 * k] = (uint8_t)((block[49 + 2 * k] & 0x0f) | (((h >> (4 * k)) & 0x0f) << 4));
}

/* Random block bytes, then every scale field overwritten with a sane value so
 * the row's numbers stay finite and of ordinary size. */
static void random_block_bytes(uint32_t type, uint8_t *row, int64_t n)
{
    const quant_format *format = quant_format_of(type);
    size_t bytes = quant_row_bytes(type, n);
    for (size_t i = 0; i < bytes; i++)
        row[i] = (uint8_t)rng_next();
    int64_t blocks = n / format->block_elems;
    for (int64_t b = 0; b < blocks; b++) {
        uint8_t *block = row + b * format->block_bytes;
        switch (type) {
        case TYPE_F32: {
            float value = rng_float(-2.0f, 2.0f);
            memcpy(block, &value, 4);
            break;
        }
        case TYPE_F16:
            put_f16(block, rng_float(-2.0f, 2.0f));
            break;
        case TYPE_BF16: {
            uint16_t h = fp32_to_bf16(rng_float(-2.0f, 2.0f));
            memcpy(block, &h, 2);
            break;
        }
        case TYPE_Q8_0:
        case TYPE_Q4_0:
        case TYPE_IQ4_NL:
            put_f16(block, rng_float(-0.05f, 0.05f));
            break;
        case TYPE_MXFP4:
            block[0] = (uint8_t)(118 + rng_next() % 16);
            break;
        case TYPE_Q4_K:
        case TYPE_Q5_K:
            put_f16(block, rng_float(0.0005f, 0.01f));
            put_f16(block + 2, rng_float(0.0f, 0.01f));
            break;
        case TYPE_Q6_K:
            put_f16(block + 208, rng_float(-0.01f, 0.01f));
            break;
        case TYPE_IQ2_XXS:
        case TYPE_IQ2_XS:
        case TYPE_IQ2_S:
        case TYPE_IQ3_XXS:
        case TYPE_IQ3_S:
        case TYPE_IQ1_S:
        case TYPE_IQ1_M:
            put_iq_scale(type, block, rng_float(-0.01f, 0.01f));
            break;
        case TYPE_TQ1_0:
        case TYPE_TQ2_0: /* d last */
            put_f16(block + format->block_bytes - 2, rng_float(-0.01f, 0.01f));
            break;
        default: /* other types: scales stay random only if a set adds them */
            break;
        }
    }
}

/* Every quant of the row at its format's largest magnitude, all of one
 * sign (Q4_K/Q5_K: sub-block scales and mins at 63 too; the block scales d
 * stay small so the sums stay finite): the integer sums inside a block as
 * large as they get, where kernels that add products in 16 bits
 * (dot_avx2.c) would overflow first. Only block formats are made extreme;
 * others get random bytes. */
static void extreme_block_bytes(uint32_t type, uint8_t *row, int64_t n)
{
    const quant_format *format = quant_format_of(type);
    uint8_t fill;
    switch (type) {
    case TYPE_Q4_K:
    case TYPE_Q5_K:
    case TYPE_Q6_K:
        fill = 0xff; /* 4-6 bit quants all ones (Q6_K's int8 sub-block scales -1) */
        break;
    case TYPE_MXFP4:
        fill = 0x77; /* +6 (as 12 in half units) */
        break;
    case TYPE_Q4_0:
    case TYPE_IQ4_NL:
        fill = 0x00; /* -8, -127 */
        break;
    case TYPE_Q8_0:
        fill = 0x80; /* -128 */
        break;
    case TYPE_IQ2_XXS:
    case TYPE_IQ2_XS:
    case TYPE_IQ2_S:
    case TYPE_IQ3_XXS:
    case TYPE_IQ3_S:
    case TYPE_IQ1_S:
    case TYPE_IQ1_M:
        fill = 0xff; /* the last grid points, every sign negative, the largest scales */
        break;
    case TYPE_TQ1_0:
        fill = 0xff; /* every digit 2: every value +1 */
        break;
    case TYPE_TQ2_0:
        fill = 0xaa; /* code 2: every value +1 */
        break;
    default:
        random_block_bytes(type, row, n);
        return;
    }
    memset(row, fill, quant_row_bytes(type, n));
    for (int64_t b = 0; b < n / format->block_elems; b++) {
        uint8_t *block = row + b * format->block_bytes;
        switch (type) {
        case TYPE_Q4_K:
        case TYPE_Q5_K:
            put_f16(block, 0.004f);
            put_f16(block + 2, 0.002f);
            break;
        case TYPE_Q6_K:
            put_f16(block + 208, 0.004f);
            break;
        case TYPE_MXFP4:
            block[0] = 120;
            break;
        case TYPE_IQ2_XXS:
        case TYPE_IQ2_XS:
        case TYPE_IQ2_S:
        case TYPE_IQ3_XXS:
        case TYPE_IQ3_S:
        case TYPE_IQ1_S:
        case TYPE_IQ1_M:
            put_iq_scale(type, block, 0.004f);
            break;
        case TYPE_TQ1_0:
        case TYPE_TQ2_0:
            put_f16(block + format->block_bytes - 2, 0.004f);
            break;
        default:
            put_f16(block, 0.004f);
            break;
        }
    }
}

/* The grid i-quants whose sign bytes are 7-bit codes and an implied parity
 * bit (IQ2_XXS, IQ2_XS, IQ3_XXS): random bytes, then code (t + 32g) % 128 in
 * group g of the row's sub-block t (and scale t % 16 where the scale shares
 * the codes' word), so a row of 128 sub-blocks holds every code in every
 * group. */
static int has_sign_codes(uint32_t type)
{
    return type == TYPE_IQ2_XXS || type == TYPE_IQ2_XS || type == TYPE_IQ3_XXS;
}

static void every_sign_code_bytes(uint32_t type, uint8_t *row, int64_t n)
{
    random_block_bytes(type, row, n);
    const size_t block_bytes = (size_t)quant_format_of(type)->block_bytes;
    for (int64_t t = 0; t < n / 32; t++) {
        uint8_t *block = row + (size_t)(t / 8) * block_bytes;
        int s = (int)(t % 8);
        if (type == TYPE_IQ2_XS) {
            for (int g = 0; g < 4; g++) {
                uint8_t *code = block + 2 + 8 * s + 2 * g; /* 9 index bits, then the sign code */
                code[1] = (uint8_t)((code[1] & 1) | ((t + 32 * g) % 128) << 1);
            }
            continue;
        }
        uint32_t word = (uint32_t)(t % 16) << 28;
        for (int g = 0; g < 4; g++)
            word |= (uint32_t)((t + 32 * g) % 128) << (7 * g);
        uint8_t *at = block + (type == TYPE_IQ2_XXS ? 6 + 8 * s : 66 + 4 * s);
        for (int k = 0; k < 4; k++)
            at[k] = (uint8_t)(word >> (8 * k));
    }
}

typedef struct case_data {
    uint32_t type;
    int64_t n;
    size_t row_bytes;
    uint8_t *weights;         /* MAX_ROWS rows */
    uint8_t *reversed;        /* the same rows in reverse order */
    uint8_t *activation;
    float scalar[MAX_ROWS];   /* quant_format.vec_dot per row */
    double exact[MAX_ROWS];   /* float64 dot of the dequantized values */
    double magnitude[MAX_ROWS]; /* sum |w_j * a_j|: the scale of rounding errors */
} case_data;

/* How case_create fills a case. */
enum case_kind {
    CASE_RANDOM,        /* rows of random bytes and quantized random floats */
    CASE_EXTREME_PLUS,  /* extreme_block_bytes rows, every activation +1 */
    CASE_EXTREME_MINUS, /* extreme_block_bytes rows, every activation -1 */
    CASE_SIGN_CODES,    /* every_sign_code_bytes rows (has_sign_codes types), random activation */
};

/* Builds rows (random: even rows from random bytes, odd rows quantized from
 * random floats where the format has a quantizer; extreme: see
 * extreme_block_bytes) and an activation quantized with the activation
 * format's own quantizer. Returns 0 when a needed function is missing
 * (reported as a failure by the caller). */
static int case_create(case_data *data, uint32_t type, int64_t n, enum case_kind kind)
{
    memset(data, 0, sizeof *data);
    const quant_format *format = quant_format_of(type);
    const quant_format *act_format = quant_format_of(format->activation_type);
    if (!act_format || !act_format->quantize_row || !format->dequantize_row ||
        !act_format->dequantize_row || !format->vec_dot)
        return 0;
    data->type = type;
    data->n = n;
    data->row_bytes = quant_row_bytes(type, n);
    data->weights = malloc(data->row_bytes * MAX_ROWS);
    data->reversed = malloc(data->row_bytes * MAX_ROWS);
    data->activation = malloc(quant_row_bytes(format->activation_type, n));
    float *values = malloc(sizeof(float) * (size_t)n);
    float *act_values = malloc(sizeof(float) * (size_t)n);
    for (int r = 0; r < MAX_ROWS; r++) {
        uint8_t *row = data->weights + r * data->row_bytes;
        if (kind == CASE_SIGN_CODES) {
            every_sign_code_bytes(type, row, n);
        } else if (kind != CASE_RANDOM) {
            extreme_block_bytes(type, row, n);
        } else if (r % 2 == 1 && format->quantize_row) {
            random_floats(values, n);
            format->quantize_row(values, row, n);
        } else {
            random_block_bytes(type, row, n);
        }
        memcpy(data->reversed + (MAX_ROWS - 1 - r) * data->row_bytes, row, data->row_bytes);
    }
    if (kind == CASE_RANDOM || kind == CASE_SIGN_CODES) {
        random_floats(values, n);
    } else {
        for (int64_t i = 0; i < n; i++)
            values[i] = kind == CASE_EXTREME_PLUS ? 1.0f : -1.0f;
    }
    act_format->quantize_row(values, data->activation, n);
    act_format->dequantize_row(data->activation, act_values, n);
    for (int r = 0; r < MAX_ROWS; r++) {
        const uint8_t *row = data->weights + r * data->row_bytes;
        data->scalar[r] = format->vec_dot(n, row, data->activation);
        format->dequantize_row(row, values, n);
        double exact = 0, magnitude = 0;
        for (int64_t i = 0; i < n; i++) {
            exact += (double)values[i] * act_values[i];
            magnitude += fabs((double)values[i] * act_values[i]);
        }
        data->exact[r] = exact;
        data->magnitude[r] = magnitude;
    }
    free(values);
    free(act_values);
    return 1;
}

static void case_destroy(case_data *data)
{
    free(data->weights);
    free(data->reversed);
    free(data->activation);
}

static int close_enough(double got, double want, double magnitude)
{
    return fabs(got - want) <= 1e-5 * magnitude + 1e-30 && isfinite(got);
}

static int checked_cases;
static int checked_decodes;

/* One set, one type, one n: accuracy and batch invariance. */
static void check_case(const kernel_set *set, dot_rows_fn dot, const case_data *data)
{
    const char *type_name = quant_format_of(data->type)->name;
    float full[MAX_ROWS];
    dot(data->n, data->weights, data->row_bytes, MAX_ROWS, data->activation, full);
    for (int r = 0; r < MAX_ROWS; r++) {
        CHECK_MSG(close_enough(full[r], data->scalar[r], data->magnitude[r]),
                  "%s %s n=%lld row %d: %.9g vs scalar %.9g (sum|terms| %.6g)", set->name,
                  type_name, (long long)data->n, r, full[r], data->scalar[r], data->magnitude[r]);
        CHECK_MSG(close_enough(full[r], data->exact[r], data->magnitude[r]),
                  "%s %s n=%lld row %d: %.9g vs float64 %.9g (sum|terms| %.6g)", set->name,
                  type_name, (long long)data->n, r, full[r], data->exact[r], data->magnitude[r]);
    }
    /* Every run of consecutive rows, of every length 1..9: same bits. */
    int mismatches = 0;
    for (int count = 1; count <= MAX_ROWS; count++) {
        for (int start = 0; start + count <= MAX_ROWS; start++) {
            float part[MAX_ROWS];
            dot(data->n, data->weights + start * data->row_bytes, data->row_bytes, count,
                data->activation, part);
            if (memcmp(part, full + start, sizeof(float) * (size_t)count) != 0)
                mismatches++;
        }
    }
    CHECK_MSG(mismatches == 0, "%s %s n=%lld: %d row groupings changed a result's bits", set->name,
              type_name, (long long)data->n, mismatches);
    /* The same rows in another order, so each has other neighbours. */
    float reversed[MAX_ROWS];
    dot(data->n, data->reversed, data->row_bytes, MAX_ROWS, data->activation, reversed);
    int reorder_mismatches = 0;
    for (int r = 0; r < MAX_ROWS; r++)
        if (memcmp(&reversed[MAX_ROWS - 1 - r], &full[r], sizeof(float)) != 0)
            reorder_mismatches++;
    CHECK_MSG(reorder_mismatches == 0, "%s %s n=%lld: %d rows changed bits when reordered",
              set->name, type_name, (long long)data->n, reorder_mismatches);
    /* The decode kernel (rows read as interleaved streams, the activation
     * prepared once per call): the bits of dot_rows for every run of rows. */
    dot_rows_fn decode = set->dot_decode[data->type];
    if (decode) {
        int decode_mismatches = 0;
        for (int count = 1; count <= MAX_ROWS; count++) {
            for (int start = 0; start + count <= MAX_ROWS; start++) {
                float part[MAX_ROWS + 1];
                part[count] = -12345.5f;
                decode(data->n, data->weights + start * data->row_bytes, data->row_bytes, count,
                       data->activation, part);
                if (memcmp(part, full + start, sizeof(float) * (size_t)count) != 0 || part[count] != -12345.5f)
                    decode_mismatches++;
            }
        }
        CHECK_MSG(decode_mismatches == 0, "%s %s n=%lld: %d row runs differ between dot_decode and dot_rows",
                  set->name, type_name, (long long)data->n, decode_mismatches);
        checked_decodes++;
    }
    checked_cases++;
}


/* ---- tile kernels -------------------------------------------------------- */

#define TILE_ROWS 9
#define TILE_TOKENS 13

static int checked_tiles;

/* One set, one type, one n: the tile kernel over every run of rows and many
 * token counts, against dot_rows called for one row and one token at a time. */
static void check_tile(const kernel_set *set, uint32_t type, int64_t n)
{
    const quant_format *format = quant_format_of(type);
    dot_rows_fn dot = kernels_dot_rows(set, type);
    dot_tile_fn tile = kernels_dot_tile(set, type);
    const quant_format *act_format = quant_format_of(format->activation_type);
    CHECK_MSG(dot && tile && act_format && act_format->quantize_row, "%s %s: missing functions",
              set->name, format->name);
    if (!dot || !tile || !act_format || !act_format->quantize_row)
        return;
    size_t row_bytes = quant_row_bytes(type, n);
    /* Activation rows padded (keeping the blocks aligned): the stride is the
     * caller's, not the row size. */
    size_t act_bytes = quant_row_bytes(format->activation_type, n);
    size_t act_stride = act_bytes + 16;
    uint8_t *weights = malloc(row_bytes * TILE_ROWS);
    uint8_t *acts = malloc(act_stride * TILE_TOKENS);
    float *values = malloc(sizeof(float) * (size_t)n);
    for (int r = 0; r < TILE_ROWS; r++) {
        uint8_t *row = weights + r * row_bytes;
        if (r % 2 == 1 && format->quantize_row) {
            random_floats(values, n);
            format->quantize_row(values, row, n);
        } else {
            random_block_bytes(type, row, n);
        }
    }
    memset(acts, 0xa5, act_stride * TILE_TOKENS);
    for (int t = 0; t < TILE_TOKENS; t++) {
        random_floats(values, n);
        act_format->quantize_row(values, acts + t * act_stride, n);
    }
    float want[TILE_TOKENS][TILE_ROWS];
    for (int t = 0; t < TILE_TOKENS; t++)
        for (int r = 0; r < TILE_ROWS; r++)
            dot(n, weights + r * row_bytes, row_bytes, 1, acts + t * act_stride, &want[t][r]);

    static const int token_counts[] = {1, 2, 3, 4, 5, 7, 8, 9, 13};
    const int out_stride = TILE_ROWS + 3;
    const float sentinel = -12345.5f;
    int mismatches = 0, overwrites = 0, shapes = 0;
    for (int count = 1; count <= TILE_ROWS; count++) {
        for (int start = 0; start + count <= TILE_ROWS; start += (count > 4 ? 1 : 2)) {
            for (size_t k = 0; k < sizeof token_counts / sizeof token_counts[0]; k++) {
                int n_tokens = token_counts[k];
                int first_token = TILE_TOKENS - n_tokens; /* vary which tokens too */
                first_token = (start + count) % (first_token + 1);
                float out[TILE_TOKENS * (TILE_ROWS + 3)];
                for (size_t i = 0; i < sizeof out / sizeof out[0]; i++)
                    out[i] = sentinel;
                /* Output columns start at 1: the tile must write only its own. */
                tile(n, weights + start * row_bytes, row_bytes, count,
                     acts + first_token * act_stride, act_stride, n_tokens, out + 1, out_stride);
                for (int t = 0; t < TILE_TOKENS; t++) {
                    for (int c = 0; c < out_stride; c++) {
                        float got = out[t * out_stride + c];
                        int inside = t < n_tokens && c >= 1 && c <= count;
                        if (inside) {
                            float expect = want[first_token + t][start + c - 1];
                            if (memcmp(&got, &expect, sizeof got) != 0) {
                                if (mismatches == 0)
                                    fprintf(stderr, "%s %s n=%lld rows %d+%d tokens %d+%d: "
                                            "(%d,%d) %.9g vs dot_rows %.9g\n", set->name,
                                            format->name, (long long)n, start, count, first_token,
                                            n_tokens, start + c - 1, first_token + t, got, expect);
                                mismatches++;
                            }
                        } else if (memcmp(&got, &sentinel, sizeof got) != 0) {
                            overwrites++;
                        }
                    }
                }
                shapes++;
            }
        }
    }
    CHECK_MSG(mismatches == 0, "%s %s n=%lld: %d tile elements differ from dot_rows", set->name,
              format->name, (long long)n, mismatches);
    CHECK_MSG(overwrites == 0, "%s %s n=%lld: %d elements written outside the tile", set->name,
              format->name, (long long)n, overwrites);
    CHECK(shapes > 100);
    checked_tiles += shapes;
    free(weights);
    free(acts);
    free(values);
}

/* Types whose tile kernels each SIMD set must have: the prefill hot spots.
 * NEON has the first NEON_TILE_TYPES so far (matmul runs dot_rows per token
 * for the rest). */
static const uint32_t required_tile_types[] = {TYPE_Q4_K, TYPE_Q6_K, TYPE_Q5_K, TYPE_Q8_0, TYPE_MXFP4};
enum { NEON_TILE_TYPES = 3 };

static void test_tiles(const kernel_set *set)
{
    size_t tiles_required = sizeof required_tile_types / sizeof required_tile_types[0];
    if (strcmp(set->name, "neon") == 0)
        tiles_required = NEON_TILE_TYPES;
    for (size_t i = 0; i < tiles_required; i++)
        CHECK_MSG(set->dot_tile[required_tile_types[i]] != NULL, "set %s lacks a %s tile kernel",
                  set->name, quant_format_of(required_tile_types[i])->name);
    int types_run = 0;
    for (uint32_t type = 0; type < TYPE_COUNT; type++) {
        if (!set->dot_tile[type])
            continue;
        CHECK_MSG(set->dot_rows[type] != NULL, "%s: a %s tile kernel without dot_rows", set->name,
                  quant_format_of(type)->name);
        const quant_format *format = quant_format_of(type);
        /* 40 blocks: a row too long for eight tokens' prepared activations
         * (the AVX-512 K4 tiles take six at a time); 257 blocks: too long
         * for one token's, so dot_rows token by token. */
        int64_t sizes_k[] = {256, 1024, 40 * 256, 257 * 256};
        /* 160 blocks: too long for eight tokens' prepared steps of four
         * blocks (AVX-512 takes six); 1028 blocks: too long for one token's. */
        int64_t sizes_32[] = {32, 2880, 160 * 32, 1028 * 32};
        int64_t sizes_1[] = {7, 33, 2048};
        const int64_t *sizes = sizes_1;
        int count = 3;
        if (format->block_elems == QK_K) {
            sizes = sizes_k;
            count = 4;
        } else if (format->block_elems == 32) {
            sizes = sizes_32;
            count = 4;
        }
        for (int s = 0; s < count; s++)
            check_tile(set, type, sizes[s]);
        types_run++;
    }
    printf("set %s: %d tile kernels checked against dot_rows\n", set->name, types_run);
}

/* ---- axpy ----------------------------------------------------------------- */

/* Every element y[i] becomes fmaf(a, x[i], y[i]) exactly, for lengths around
 * every vector width; y beyond n is untouched. The scalar set (a multiply
 * then an add) is held to one rounding of the product. */
/* axpy over several rows equals the rows' multiply-adds in row order: exactly
 * one fmaf per element and row for the SIMD sets (exact), within rounding of
 * the separate multiply and add for the scalar set; rows read at a stride
 * wider than n, nothing written past y[n - 1]. */
static void test_axpy(const kernel_set *set, int exact)
{
    static const int64_t lengths[] = {0, 1, 3, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 128, 200, 1000};
    static const int64_t row_counts[] = {0, 1, 2, 5, 9};
    enum { MAX_N = 1000, MAX_AXPY_ROWS = 9, PAD = 8, STRIDE = MAX_N + 24 };
    const uint32_t types[] = {TYPE_F32, TYPE_F16};
    static float x[MAX_AXPY_ROWS][STRIDE];
    static uint16_t h[MAX_AXPY_ROWS][STRIDE];
    float y[MAX_N + PAD], y0[MAX_N + PAD], a[MAX_AXPY_ROWS];
    for (int k = 0; k < 2; k++) {
        uint32_t type = types[k];
        axpy_fn axpy = kernels_axpy(set, type);
        CHECK_MSG(axpy != NULL, "%s: no axpy for %s", set->name, quant_format_of(type)->name);
        if (!axpy)
            continue;
        if (exact)
            CHECK_MSG(set->axpy[type] == axpy, "%s: axpy for %s is not its own", set->name,
                      quant_format_of(type)->name);
        int bad = 0;
        for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++) {
            for (size_t c = 0; c < sizeof row_counts / sizeof row_counts[0]; c++) {
                int64_t n = lengths[l], n_rows = row_counts[c];
                for (int r = 0; r < MAX_AXPY_ROWS; r++) {
                    random_floats(x[r], STRIDE);
                    for (int64_t i = 0; i < STRIDE; i++) {
                        h[r][i] = fp32_to_fp16(x[r][i]);
                        if (type == TYPE_F16)
                            x[r][i] = fp16_to_fp32(h[r][i]);
                    }
                    a[r] = rng_float(-3.0f, 3.0f);
                }
                random_floats(y0, n + PAD);
                memcpy(y, y0, sizeof(float) * (size_t)(n + PAD));
                if (type == TYPE_F16)
                    axpy(n, n_rows, a, h, sizeof h[0], y);
                else
                    axpy(n, n_rows, a, x, sizeof x[0], y);
                for (int64_t i = 0; i < n + PAD; i++) {
                    float want = y0[i], bound = 0.0f;
                    for (int64_t r = 0; i < n && r < n_rows; r++) {
                        bound += 0x1p-22f * (fabsf(a[r] * x[r][i]) + fabsf(want));
                        want = fmaf(a[r], x[r][i], want);
                    }
                    int ok = exact || i >= n ? memcmp(&y[i], &want, sizeof want) == 0 : fabsf(y[i] - want) <= bound;
                    if (!ok) {
                        if (bad == 0)
                            fprintf(stderr, "%s axpy %s n=%lld rows=%lld i=%lld: %.9g, want %.9g\n", set->name,
                                    quant_format_of(type)->name, (long long)n, (long long)n_rows, (long long)i,
                                    y[i], want);
                        bad++;
                    }
                }
            }
        }
        CHECK_MSG(bad == 0, "%s axpy %s: %d elements wrong", set->name, quant_format_of(type)->name, bad);
    }
    CHECK(kernels_axpy(set, TYPE_Q4_K) == NULL);
    CHECK(kernels_axpy(set, TYPE_COUNT) == NULL);
}

/* Inputs for the activation quantizers: ordinary rows, and blocks built to
 * hit every branch of the reference: all zeros, a NaN-only or tied largest
 * magnitude (+a before -a and the reverse), one value far above the rest,
 * values that land exactly on .5 after scaling (round half even), infinities,
 * NaNs and subnormals. `kind` picks one; n is a multiple of 256. */
static void quantizer_input(float *x, int64_t n, int kind)
{
    random_floats(x, n);
    for (int64_t b = 0; b < n / 256; b++) {
        float *block = x + 256 * b;
        switch ((kind + b) % 9) {
        case 0:
            break;
        case 1:
            memset(block, 0, 256 * sizeof(float));
            break;
        case 2: /* ties: the first of equal magnitudes sets the sign */
            block[17] = 3.0f;
            block[200] = -3.0f;
            break;
        case 3:
            block[5] = -3.0f;
            block[90] = 3.0f;
            break;
        case 4: /* max 127 -> scale -1: every k + 0.5 is a tie */
            for (int j = 0; j < 256; j++)
                block[j] = (float)((j % 254) - 127) * 0.5f;
            block[0] = 127.0f;
            break;
        case 5:
            block[33] = 1e30f;
            block[34] = -1e-30f;
            break;
        case 6:
            block[7] = INFINITY;
            block[8] = -INFINITY;
            block[9] = NAN;
            break;
        case 7: /* NaNs among zeros only: an all-zero block */
            memset(block, 0, 256 * sizeof(float));
            block[100] = NAN;
            break;
        case 8: /* subnormals: the scale overflows to infinity */
            for (int j = 0; j < 256; j++)
                block[j] = (float)(j - 128) * 1e-42f;
            break;
        }
    }
}

/* A set's activation quantizers give the quant table reference's bytes. */
static void test_quantizers(const kernel_set *set)
{
    const uint32_t types[] = {TYPE_Q8_K, TYPE_Q8_0, TYPE_F16};
    static const int64_t lengths[] = {256, 512, 768, 2048, 4096};
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        uint32_t type = types[k];
        quantize_row_fn quantize = kernels_quantize_row(set, type);
        quantize_row_fn reference = quant_format_of(type)->quantize_row;
        CHECK_MSG(quantize != NULL && reference != NULL, "%s: no quantizer for %s", set->name,
                  quant_format_of(type)->name);
        if (!quantize || !reference)
            continue;
        int bad = 0, runs = 0;
        for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++) {
            for (int kind = 0; kind < 9; kind++) {
                /* F16 also at lengths that leave a partial vector. */
                int64_t n = lengths[l] + (type == TYPE_F16 ? kind : 0);
                size_t bytes = quant_row_bytes(type, n);
                float *x = malloc(sizeof(float) * (size_t)(n + 16));
                uint8_t *got = malloc(bytes + 64), *want = malloc(bytes + 64);
                quantizer_input(x, lengths[l], kind);
                for (int64_t i = lengths[l]; i < n; i++)
                    x[i] = rng_float(-2.0f, 2.0f);
                memset(got, 0xa5, bytes + 64);
                memset(want, 0xa5, bytes + 64);
                quantize(x, got, n);
                reference(x, want, n);
                if (memcmp(got, want, bytes + 64) != 0) {
                    if (bad == 0) {
                        size_t at = 0;
                        while (got[at] == want[at])
                            at++;
                        fprintf(stderr, "%s quantize %s n=%lld kind %d: byte %zu is %02x, want %02x\n", set->name,
                                quant_format_of(type)->name, (long long)n, kind, at, got[at], want[at]);
                    }
                    bad++;
                }
                runs++;
                free(x);
                free(got);
                free(want);
            }
        }
        CHECK_MSG(bad == 0, "%s quantize %s: %d of %d rows differ from the reference", set->name,
                  quant_format_of(type)->name, bad, runs);
    }
    CHECK(kernels_quantize_row(set, TYPE_COUNT) == NULL);
    CHECK(kernels_quantize_row(set, TYPE_Q4_K) == quant_format_of(TYPE_Q4_K)->quantize_row ||
          kernels_quantize_row(set, TYPE_Q4_K) == set->quantize_row[TYPE_Q4_K]);
}

static const uint32_t required_types[] = {TYPE_Q8_0,    TYPE_Q4_K,   TYPE_Q5_K,  TYPE_Q6_K,    TYPE_MXFP4,
                                          TYPE_F16,     TYPE_BF16,   TYPE_IQ2_XXS, TYPE_IQ2_XS, TYPE_IQ2_S,
                                          TYPE_IQ3_XXS, TYPE_IQ3_S,  TYPE_IQ1_S,   TYPE_IQ1_M, TYPE_TQ1_0,
                                          TYPE_TQ2_0};

static void test_set(const kernel_set *set)
{
    /* Required types first, so a set that drops one is caught. */
    for (size_t i = 0; i < sizeof required_types / sizeof required_types[0]; i++)
        CHECK_MSG(set->dot_rows[required_types[i]] != NULL && set->dot_decode[required_types[i]] != NULL,
                  "set %s lacks %s", set->name, quant_format_of(required_types[i])->name);
    for (uint32_t type = 0; type < TYPE_COUNT; type++)
        CHECK_MSG(!set->dot_decode[type] || set->dot_rows[type], "%s: a %s decode kernel without dot_rows",
                  set->name, quant_format_of(type)->name);
    int types_run = 0;
    for (uint32_t type = 0; type < TYPE_COUNT; type++) {
        dot_rows_fn dot = set->dot_rows[type];
        if (!dot)
            continue;
        const quant_format *format = quant_format_of(type);
        /* 65 blocks of 256 and 257 of 32: longer than the rows whose
         * activation the SIMD decode kernels prepare once per call. */
        int64_t sizes_k[] = {256, 512, 768, 2048, 4096, 65 * 256};
        int64_t sizes_32[] = {32, 64, 96, 2048, 2880, 4096, 257 * 32};
        int64_t sizes_1[] = {1, 7, 16, 33, 2048, 4101};
        const int64_t *sizes = sizes_1;
        int count = 6;
        if (format->block_elems == QK_K) {
            sizes = sizes_k;
            count = 6;
        } else if (format->block_elems == 32) {
            sizes = sizes_32;
            count = 7;
        }
        for (int s = 0; s < count; s++) {
            for (int kind = CASE_RANDOM; kind <= CASE_EXTREME_MINUS; kind++) {
                if (kind != CASE_RANDOM && sizes[s] != 2048)
                    continue;
                case_data data;
                int ok = case_create(&data, type, sizes[s], (enum case_kind)kind);
                CHECK_MSG(ok, "%s: quant table lacks a function the test needs", format->name);
                if (ok)
                    check_case(set, dot, &data);
                case_destroy(&data);
            }
        }
        /* Every sign code in every group: the SIMD kernels expand the
         * codes and their parity bit in vectors, not from the table. */
        if (has_sign_codes(type)) {
            case_data data;
            if (case_create(&data, type, 128 * 32, CASE_SIGN_CODES))
                check_case(set, dot, &data);
            case_destroy(&data);
        }
        types_run++;
    }
    printf("set %s: %d types checked against scalar\n", set->name, types_run);
}

/* The scalar set is the reference itself: bit-identical to vec_dot. */
static void test_scalar_set(void)
{
    const kernel_set *scalar = kernels_scalar();
    CHECK(strcmp(scalar->name, "scalar") == 0);
    for (size_t i = 0; i < sizeof required_types / sizeof required_types[0]; i++) {
        uint32_t type = required_types[i];
        CHECK(scalar->dot_rows[type] != NULL);
        case_data data;
        int ok = case_create(&data, type, 512, CASE_RANDOM);
        CHECK(ok);
        if (ok) {
            float out[MAX_ROWS];
            scalar->dot_rows[type](data.n, data.weights, data.row_bytes, MAX_ROWS, data.activation, out);
            CHECK(memcmp(out, data.scalar, sizeof out) == 0);
            check_case(scalar, scalar->dot_rows[type], &data);
        }
        case_destroy(&data);
    }
    /* No dot product: integer tensors and the activation-only Q8_K. */
    CHECK(scalar->dot_rows[TYPE_I32] == NULL);
    CHECK(scalar->dot_rows[TYPE_Q8_K] == NULL);
    CHECK(kernels_dot_rows(scalar, TYPE_I32) == NULL);
    CHECK(kernels_dot_rows(scalar, TYPE_COUNT) == NULL);
    CHECK(kernels_dot_rows(scalar, 4) == NULL); /* removed id */
    CHECK(kernels_dot_rows(NULL, TYPE_Q4_K) == scalar->dot_rows[TYPE_Q4_K]);
    /* The scalar set has no tiles: callers run dot_rows per token. */
    CHECK(kernels_dot_tile(scalar, TYPE_Q4_K) == NULL);
    CHECK(kernels_dot_tile(NULL, TYPE_Q4_K) == NULL);
    CHECK(kernels_dot_tile(scalar, TYPE_COUNT) == NULL);
    CHECK(kernels_axpy(NULL, TYPE_F32) == scalar->axpy[TYPE_F32]);
    test_axpy(scalar, 0);
}

static void test_fallback(const kernel_set *set)
{
    const kernel_set *scalar = kernels_scalar();
    for (uint32_t type = 0; type < TYPE_COUNT; type++) {
        dot_rows_fn expected = set->dot_rows[type] ? set->dot_rows[type] : scalar->dot_rows[type];
        CHECK_MSG(kernels_dot_rows(set, type) == expected, "%s: fallback for type %u", set->name, type);
    }
    /* Q2_K has no SIMD kernel here: the scalar one stands in. */
    if (!set->dot_rows[TYPE_Q2_K])
        CHECK(kernels_dot_rows(set, TYPE_Q2_K) == scalar->dot_rows[TYPE_Q2_K] &&
              scalar->dot_rows[TYPE_Q2_K] != NULL);
}

static void test_select(void)
{
    cpu_features none;
    memset(&none, 0, sizeof none);
    CHECK(kernels_select(NULL, &none) == kernels_scalar());
    CHECK(kernels_select("avx512", &none) == kernels_scalar());
    CHECK(kernels_select("neon", &none) == kernels_scalar());

    cpu_features avx2_only = none;
    avx2_only.avx2 = avx2_only.fma = avx2_only.f16c = 1;
    cpu_features avx512 = avx2_only;
    avx512.avx512f = avx512.avx512bw = avx512.avx512vl = avx512.avx512vnni = 1;
    cpu_features avx512_no_vnni = avx512;
    avx512_no_vnni.avx512vnni = 0;
    cpu_features arm = none;
    arm.neon = arm.neon_dotprod = 1;
    cpu_features arm_no_dot = none;
    arm_no_dot.neon = 1;
#if defined(__x86_64__)
    CHECK(kernels_select(NULL, &avx2_only) == kernels_avx2());
    CHECK(kernels_select("", &avx2_only) == kernels_avx2());
    CHECK(kernels_select("avx512", &avx2_only) == kernels_avx2());
    CHECK(kernels_select(NULL, &avx512) == kernels_avx512());
    CHECK(kernels_select("avx2", &avx512) == kernels_avx2());
    CHECK(kernels_select("scalar", &avx512) == kernels_scalar());
    CHECK(kernels_select("neon", &avx512) == kernels_avx512());
    CHECK(kernels_select("bogus", &avx512) == kernels_avx512());
    CHECK(kernels_select(NULL, &avx512_no_vnni) == kernels_avx2());
    CHECK(kernels_neon() == NULL);
    CHECK(strcmp(kernels_avx2()->name, "avx2") == 0);
    CHECK(strcmp(kernels_avx512()->name, "avx512") == 0);
#elif defined(__aarch64__)
    CHECK(kernels_select(NULL, &arm) == kernels_neon());
    CHECK(kernels_select("avx2", &arm) == kernels_neon());
    CHECK(kernels_select("scalar", &arm) == kernels_scalar());
    CHECK(kernels_select(NULL, &arm_no_dot) == kernels_scalar());
    CHECK(kernels_avx2() == NULL && kernels_avx512() == NULL);
    CHECK(strcmp(kernels_neon()->name, "neon") == 0);
#endif
    (void)arm;
    (void)arm_no_dot;
    (void)avx512_no_vnni;
}

/* kernels_best() in a fresh child process with BMOE_ISA set (or unset):
 * returns the set's name, or "" if the child failed. */
static void best_in_child(const char *isa, char *name, size_t size)
{
    int pipe_fds[2];
    name[0] = '\0';
    if (pipe(pipe_fds) != 0)
        return;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        close(pipe_fds[0]);
        if (isa)
            setenv("BMOE_ISA", isa, 1);
        else
            unsetenv("BMOE_ISA");
        const kernel_set *first = kernels_best();
        const kernel_set *second = kernels_best();
        const char *result = first == second ? first->name : "";
        ssize_t written = write(pipe_fds[1], result, strlen(result));
        _exit(written == (ssize_t)strlen(result) ? 0 : 1);
    }
    close(pipe_fds[1]);
    if (pid > 0) {
        ssize_t got = read(pipe_fds[0], name, size - 1);
        name[got > 0 ? got : 0] = '\0';
        int status = 0;
        waitpid(pid, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            name[0] = '\0';
    }
    close(pipe_fds[0]);
}

static void test_best(const cpu_features *features)
{
    char name[64];
    const kernel_set *best = kernels_select(NULL, features);
    best_in_child(NULL, name, sizeof name);
    CHECK_MSG(strcmp(name, best->name) == 0, "unset BMOE_ISA gave '%s', want '%s'", name, best->name);
    best_in_child("scalar", name, sizeof name);
    CHECK_MSG(strcmp(name, "scalar") == 0, "BMOE_ISA=scalar gave '%s'", name);
    best_in_child("no-such-isa", name, sizeof name);
    CHECK_MSG(strcmp(name, best->name) == 0, "BMOE_ISA=no-such-isa gave '%s'", name);
    const kernel_set *sets[] = {kernels_avx2(), kernels_avx512(), kernels_neon()};
    for (int i = 0; i < 3; i++) {
        if (!sets[i])
            continue;
        best_in_child(sets[i]->name, name, sizeof name);
        const char *want = kernels_set_supported(sets[i], features) ? sets[i]->name : best->name;
        CHECK_MSG(strcmp(name, want) == 0, "BMOE_ISA=%s gave '%s', want '%s'", sets[i]->name, name, want);
    }
    printf("kernels_best() on this CPU: %s\n", best->name);
}

int main(void)
{
    cpu_features features;
    cpu_features_detect(&features);
    printf("cpu: avx2 %d fma %d f16c %d avx512f %d bw %d vl %d vnni %d bf16 %d avxvnni %d neon %d dotprod %d\n",
           features.avx2, features.fma, features.f16c, features.avx512f, features.avx512bw,
           features.avx512vl, features.avx512vnni, features.avx512bf16, features.avxvnni,
           features.neon, features.neon_dotprod);
#if defined(__aarch64__)
    /* Every aarch64 CPU has Advanced SIMD; the cross tests run under
     * qemu -cpu max, which has dotprod, so NEON must be found there. */
    CHECK(features.neon);
#endif

    test_best(&features); /* first: children must not inherit a cached choice */
    test_select();
    test_scalar_set();
    test_quantizers(kernels_scalar());

    const kernel_set *sets[] = {kernels_avx2(), kernels_avx512(), kernels_neon()};
    const char *names[] = {"avx2", "avx512", "neon"};
    int sets_run = 0;
    for (int i = 0; i < 3; i++) {
        if (!sets[i]) {
            printf("set %s: not compiled for this architecture\n", names[i]);
            continue;
        }
        test_fallback(sets[i]);
        if (!kernels_set_supported(sets[i], &features)) {
            printf("set %s: NOT RUN on this CPU (lacks the instructions); not counted as passed\n",
                   names[i]);
            continue;
        }
        test_set(sets[i]);
        test_tiles(sets[i]);
        test_axpy(sets[i], 1);
        test_quantizers(sets[i]);
        sets_run++;
    }
    printf("%d SIMD sets run, %d cases (%d with a decode kernel), %d tile shapes\n", sets_run, checked_cases,
           checked_decodes, checked_tiles);
    return test_finish();
}
