/* bmoe-mkmodel weight generator: a seeded PRNG (splitmix64 seeding
 * xoshiro256**, no rand()), random values per tensor, and their encoding
 * into the tensor's type. Two ways: FILL_QUANTIZE draws floats and converts
 * them with the format's quantize_row (the same seed gives the same floats
 * whatever the type, so an F32 and a Q8_0 file of one seed hold the same
 * model); FILL_BLOCKS writes random valid blocks directly (random quant bits,
 * scale fields chosen for the tensor's standard deviation), which is what
 * makes the 18-60 GB presets fast, and the only way for the grid i-quants
 * and the ternary formats, which have no quantizer. Only arithmetic on integers and floats,
 * no libm, so the bytes are the same on every machine. Owns the scratch row. */
#include <stdlib.h>
#include <string.h>

#include "base/fp16.h"
#include "base/hash.h"
#include "mkmodel.h"
#include "quant/quant.h"

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void mkmodel_rng_seed(mkmodel_rng *rng, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        rng->state[i] = splitmix64(&seed);
}

static inline uint64_t rotate_left(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t mkmodel_rng_next(mkmodel_rng *rng)
{
    uint64_t *s = rng->state;
    uint64_t result = rotate_left(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotate_left(s[3], 45);
    return result;
}

void mkmodel_rng_for_tensor(mkmodel_rng *rng, uint64_t seed, const char *name)
{
    mkmodel_rng_seed(rng, seed ^ fnv1a_text(FNV1A_START, name));
}

/* Approximately N(0,1): the sum of four 16-bit uniforms, centred and scaled
 * (Irwin-Hall, variance 4/12). Bounded at about +-3.46. */
static inline float noise_normal(mkmodel_rng *rng)
{
    uint64_t r = mkmodel_rng_next(rng);
    uint32_t sum = (uint32_t)(r & 0xffff) + (uint32_t)((r >> 16) & 0xffff) +
                   (uint32_t)((r >> 32) & 0xffff) + (uint32_t)(r >> 48);
    return ((float)sum * (1.0f / 65536.0f) - 2.0f) * 1.7320508f;
}

/* Uniform in [-1, 1). */
static inline float noise_uniform(mkmodel_rng *rng)
{
    return (float)(mkmodel_rng_next(rng) >> 40) * (1.0f / 8388608.0f) - 1.0f;
}

static void draw_row(mkmodel_filler *filler, float *out)
{
    const mkmodel_tensor *t = filler->tensor;
    if (t->noise == MKMODEL_NOISE_NORMAL)
        for (int64_t i = 0; i < filler->row_elems; i++)
            out[i] = t->offset + t->scale * noise_normal(&filler->rng);
    else
        for (int64_t i = 0; i < filler->row_elems; i++)
            out[i] = t->offset + t->scale * noise_uniform(&filler->rng);
}

static void random_bytes(mkmodel_rng *rng, uint8_t *out, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t r = mkmodel_rng_next(rng);
        memcpy(out + i, &r, 8);
    }
    if (i < n) {
        uint64_t r = mkmodel_rng_next(rng);
        memcpy(out + i, &r, n - i);
    }
}

static void store_f16(uint8_t *out, float value)
{
    uint16_t h = fp32_to_fp16(value);
    out[0] = (uint8_t)(h & 0xff);
    out[1] = (uint8_t)(h >> 8);
}

/* Packs eight 6-bit scales and mins the way Q4_K / Q5_K store them. */
static void pack_scales_k4(uint8_t *s, const uint8_t *scale, const uint8_t *min)
{
    for (int j = 0; j < 4; j++) {
        s[j] = (uint8_t)(scale[j] | ((scale[j + 4] >> 4) << 6));
        s[j + 4] = (uint8_t)(min[j] | ((min[j + 4] >> 4) << 6));
        s[j + 8] = (uint8_t)((scale[j + 4] & 0x0f) | ((min[j + 4] & 0x0f) << 4));
    }
}

/* Random Q4_K / Q5_K sub-block scales in [16, 63] with mins that centre the
 * values (q is uniform, so its mean is (levels-1)/2). */
static void random_scales_k4(mkmodel_rng *rng, uint8_t *packed, int levels)
{
    uint8_t scale[8], min[8];
    uint64_t r = mkmodel_rng_next(rng);
    for (int j = 0; j < 8; j++) {
        scale[j] = (uint8_t)(16 + ((r >> (8 * j)) & 0xff) % 48);
        /* value = d*sc*q - dmin*m with dmin = (levels/2)*d: m = sc*(levels-1)/levels. */
        min[j] = (uint8_t)((scale[j] * (levels - 1) + levels / 2) / levels);
    }
    pack_scales_k4(packed, scale, min);
}

/* The root mean square of a grid i-quant's values over its block scale d,
 * for uniformly random blocks: that of the sub-block multiplier (2s + 1
 * times the format's power of two; 4-bit s: E[(2s + 1)^2] = 341, 3-bit:
 * 85) times that of the grid values (over all points of the grid; IQ1
 * with its +-1/8 delta). */
static float iq_value_rms(uint32_t type)
{
    switch (type) {
    case TYPE_IQ2_XXS:
        return 53.4f;
    case TYPE_IQ2_XS:
        return 55.9f;
    case TYPE_IQ2_S:
        return 56.4f;
    case TYPE_IQ3_XXS:
        return 142.4f;
    case TYPE_IQ3_S:
        return 140.2f;
    default: /* IQ1_S, IQ1_M */
        return 7.2f;
    }
}

/* The RMS of uniformly random ternary values (-1, 0, 1): sqrt(2/3). */
#define TERNARY_VALUE_RMS 0.8165f

/* Standard deviations of the uniform quant codes of each format, used to
 * pick block scales that give the tensor's standard deviation:
 * Q8_0 int8 73.9; Q4_K 0..15 4.61; Q5_K 0..31 9.23; Q6_K -32..31 18.47;
 * MXFP4 E2M1 codes (doubled table) rms 5.85. Average 6-bit scale ~40. */
static void random_blocks(mkmodel_filler *filler, uint8_t *row)
{
    const mkmodel_tensor *t = filler->tensor;
    const quant_format *format = quant_format_of(t->type);
    int64_t blocks = filler->row_elems / format->block_elems;
    float sigma = t->scale;
    mkmodel_rng *rng = &filler->rng;
    random_bytes(rng, row, filler->row_bytes);
    switch (t->type) {
    case TYPE_Q8_0:
        for (int64_t b = 0; b < blocks; b++)
            store_f16(row + b * 34, sigma / 73.9f);
        break;
    case TYPE_Q4_K:
        for (int64_t b = 0; b < blocks; b++) {
            uint8_t *block = row + b * 144;
            float d = sigma / (4.61f * 40.0f);
            store_f16(block, d);
            store_f16(block + 2, 8.0f * d);
            random_scales_k4(rng, block + 4, 16);
        }
        break;
    case TYPE_Q5_K:
        for (int64_t b = 0; b < blocks; b++) {
            uint8_t *block = row + b * 176;
            float d = sigma / (9.23f * 40.0f);
            store_f16(block, d);
            store_f16(block + 2, 16.0f * d);
            random_scales_k4(rng, block + 4, 32);
        }
        break;
    case TYPE_Q6_K:
        for (int64_t b = 0; b < blocks; b++) {
            uint8_t *block = row + b * 210;
            for (int j = 0; j < 16; j++)
                block[192 + j] = (uint8_t)(16 + block[192 + j] % 48);
            store_f16(block + 208, sigma / (18.47f * 40.0f));
        }
        break;
    case TYPE_MXFP4: {
        /* Block scales 2^(e-128) of two neighbouring exponents, mixed so that
         * the mean square scale is (sigma / 5.85)^2; found without libm:
         * target = r * 2^(e-128) with r in [1, 2), the larger exponent taken
         * with probability (r^2 - 1) / 3. */
        float r = sigma / 5.85f;
        int e = 128;
        while (r < 1.0f && e > 1) {
            r *= 2.0f;
            e--;
        }
        while (r >= 2.0f && e < 253) {
            r *= 0.5f;
            e++;
        }
        int threshold = (int)((r * r - 1.0f) / 3.0f * 256.0f);
        for (int64_t b = 0; b < blocks; b++) {
            uint8_t *block = row + b * 17;
            block[0] = (uint8_t)(block[0] < threshold ? e + 1 : e);
        }
        break;
    }
    case TYPE_IQ4_NL:
        /* 67.4: the RMS of its 16-value table */
        for (int64_t b = 0; b < blocks; b++)
            store_f16(row + b * 18, sigma / 67.4f);
        break;
    case TYPE_IQ2_XXS:
    case TYPE_IQ2_XS:
    case TYPE_IQ2_S:
    case TYPE_IQ3_XXS:
    case TYPE_IQ3_S:
    case TYPE_IQ1_S:
        /* every bit pattern of these blocks is valid: only the f16 scale in
         * front is chosen */
        for (int64_t b = 0; b < blocks; b++)
            store_f16(row + b * format->block_bytes, sigma / iq_value_rms(t->type));
        break;
    case TYPE_IQ1_M: {
        /* the f16 scale sits in the top nibbles of the four scale words
         * (bytes 48-55), its lowest nibble in word 0 */
        uint16_t h = fp32_to_fp16(sigma / iq_value_rms(t->type));
        for (int64_t b = 0; b < blocks; b++) {
            uint8_t *words = row + b * 56 + 48;
            for (int k = 0; k < 4; k++)
                words[2 * k + 1] = (uint8_t)((words[2 * k + 1] & 0x0f) | ((h >> (4 * k)) & 0x0f) << 4);
        }
        break;
    }
    case TYPE_TQ1_0:
        /* five base-3 digits a byte (four in the last 4), written as the
         * format scales them: ceil(v * 256 / 243) */
        for (int64_t b = 0; b < blocks; b++) {
            uint8_t *block = row + b * 54;
            for (int j = 0; j < 52; j++) {
                int v = j < 48 ? block[j] % 243 : block[j] % 81 * 3;
                block[j] = (uint8_t)((v * 256 + 242) / 243);
            }
            store_f16(block + 52, sigma / TERNARY_VALUE_RMS);
        }
        break;
    case TYPE_TQ2_0:
        /* four 2-bit codes 0..2 a byte: the random byte's base-3 digits */
        for (int64_t b = 0; b < blocks; b++) {
            uint8_t *block = row + b * 66;
            for (int j = 0; j < 64; j++) {
                int v = block[j] % 81, codes = 0;
                for (int l = 0; l < 4; l++, v /= 3)
                    codes |= (v % 3) << (2 * l);
                block[j] = (uint8_t)codes;
            }
            store_f16(block + 64, sigma / TERNARY_VALUE_RMS);
        }
        break;
    default:
        break; /* never reached: only the types above are quantized here */
    }
}

/* A row of n distinct ids in [0, n_ids): a partial Fisher-Yates shuffle. */
static int expert_ids_row(mkmodel_filler *filler, int32_t *out, int64_t n, int n_ids, bmoe_error *err)
{
    int32_t ids[1024];
    if (n_ids > 1024 || n > n_ids)
        return error_set(err, "tensor %s: %lld distinct ids of %d do not exist", filler->tensor->name, (long long)n,
                         n_ids);
    for (int i = 0; i < n_ids; i++)
        ids[i] = i;
    for (int64_t i = 0; i < n; i++) {
        int64_t j = i + (int64_t)(mkmodel_rng_next(&filler->rng) % (uint64_t)(n_ids - i));
        int32_t id = ids[j];
        ids[j] = ids[i];
        ids[i] = id;
    }
    memcpy(out, ids, (size_t)n * sizeof *out);
    return 0;
}

static int encode_row(mkmodel_filler *filler, uint8_t *out, bmoe_error *err)
{
    const mkmodel_tensor *t = filler->tensor;
    int64_t n = filler->row_elems;
    if (t->noise == MKMODEL_NOISE_EXPERT_IDS) {
        int32_t row[1024];
        if (n > 1024 || expert_ids_row(filler, row, n, (int)t->scale, err) != 0)
            return n > 1024 ? error_set(err, "tensor %s: rows of %lld ids", t->name, (long long)n) : -1;
        memcpy(out, row, (size_t)n * sizeof *row);
        return 0;
    }
    bool floats = t->type == TYPE_F32 || t->type == TYPE_F16 || t->type == TYPE_BF16;
    const quant_format *format = quant_format_of(t->type);
    /* formats without a quantizer (the grid i-quants) always get blocks */
    if (!floats && (filler->fill == MKMODEL_FILL_BLOCKS || (format && !format->quantize_row))) {
        random_blocks(filler, out);
        return 0;
    }
    draw_row(filler, filler->scratch);
    switch (t->type) {
    case TYPE_F32:
        memcpy(out, filler->scratch, (size_t)n * sizeof(float));
        return 0;
    case TYPE_F16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = fp32_to_fp16(filler->scratch[i]);
            memcpy(out + 2 * i, &h, 2);
        }
        return 0;
    case TYPE_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = fp32_to_bf16(filler->scratch[i]);
            memcpy(out + 2 * i, &h, 2);
        }
        return 0;
    default: {
        if (!format || !format->quantize_row)
            return error_set(err, "no quantizer for %s (tensor %s); use --fill blocks",
                             format ? format->name : "?", t->name);
        format->quantize_row(filler->scratch, out, n);
        return 0;
    }
    }
}

int mkmodel_filler_init(mkmodel_filler *filler, const mkmodel_tensor *tensor, enum mkmodel_fill fill,
                        uint64_t seed, bmoe_error *err)
{
    memset(filler, 0, sizeof *filler);
    filler->tensor = tensor;
    filler->fill = fill;
    filler->row_elems = tensor->ne[0];
    filler->rows_total = tensor->ne[1] * tensor->ne[2] * tensor->ne[3];
    filler->row_bytes = quant_row_bytes(tensor->type, tensor->ne[0]);
    if (filler->row_bytes == 0)
        return error_set(err, "tensor %s: no row size", tensor->name);
    mkmodel_rng_for_tensor(&filler->rng, seed, tensor->name);
    filler->scratch = malloc((size_t)filler->row_elems * sizeof(float));
    if (!filler->scratch)
        return error_set(err, "out of memory for a row of %s", tensor->name);
    return 0;
}

int64_t mkmodel_filler_next(mkmodel_filler *filler, void *buffer, size_t capacity, bmoe_error *err)
{
    if (capacity < filler->row_bytes)
        return error_set(err, "internal error: buffer smaller than a row of %s",
                         filler->tensor->name);
    uint8_t *out = buffer;
    size_t used = 0;
    while (filler->rows_done < filler->rows_total && used + filler->row_bytes <= capacity) {
        if (encode_row(filler, out + used, err) != 0)
            return -1;
        used += filler->row_bytes;
        filler->rows_done++;
    }
    return (int64_t)used;
}

void mkmodel_filler_destroy(mkmodel_filler *filler)
{
    free(filler->scratch);
    filler->scratch = NULL;
}
