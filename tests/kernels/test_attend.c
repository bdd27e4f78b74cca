/* Attention kernels (kernels.h, attend_fn): every set the CPU runs, F32 and
 * F16 caches, against a float64 softmax attention written here (within a
 * stated tolerance), over head sizes with and without vector tails, GQA
 * groups of 1 to 8 queries, short and long key ranges (up to 4096 keys) that
 * start and end off the tiles, sliding windows and sinks. And the properties
 * batch invariance rests on, bit for bit: a query's output is the same alone
 * or with any other queries in the job; cache rows outside [first, last]
 * (NaN here) change nothing; nothing is written outside the output rows or
 * past the scratch the kernel asked for; a ring cache (a sliding window's,
 * attend_job.ring) holding the positions at p % ring gives the very bits of
 * the whole cache, its tiles on both sides of the wrap. */
#include "kernels/kernels.h"
#include "kernels/kernels_dispatch.h"
#include "base/fp16.h"
#include "test.h"

#include <math.h>
#include <stdint.h>

#define N_KV_HEADS 3 /* the job reads KV head 1, between the others as in the engine's cache */
#define OUT_GAP 5    /* floats between output rows, checked untouched */
#define SENTINEL -777.0f

static uint64_t rng_state = 0x6a09e667f3bcc909ull;

static uint32_t rng_next(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 32);
}

static float rng_float(float lo, float hi)
{
    return lo + (hi - lo) * (float)(rng_next() >> 8) * (1.0f / 16777216.0f);
}

/* Query g sees first + g * step .. last + g * step (first stays 0 when it
 * is 0: causal), as consecutive tokens do; step 0: the heads of one token. */
typedef struct attend_case {
    int dk, dv, n_queries, n_ctx;
    int32_t first, last;
    float scale;
    int sinks;
    int step;
} attend_case;

static int32_t case_first(const attend_case *c, int g)
{
    return c->first == 0 ? 0 : c->first + g * c->step;
}

static int32_t case_last(const attend_case *c, int g)
{
    return c->last + g * c->step;
}

/* A cache of n_ctx positions x N_KV_HEADS heads in both formats holding the
 * same f16-exact values, queries, sinks and the output buffers. */
typedef struct attend_data {
    attend_case c;
    uint16_t *k16, *v16;
    float *k32, *v32;
    float *queries; /* n_queries rows of dk */
    float sinks[ATTEND_MAX_QUERIES];
    float *out;     /* n_queries rows of dv + OUT_GAP */
    int64_t out_stride;
    float *scratch;
    int64_t scratch_floats;
} attend_data;

/* Where element i of head h's key or value at position p is (kernels.h: the
 * cache format). */
static size_t k_index(const attend_case *c, int h, int32_t p, int i)
{
    return (size_t)(h * attend_key_head_elements(c->n_ctx, c->dk) + attend_key_index(p, i, c->dk));
}

static size_t v_index(const attend_case *c, int h, int32_t p, int i)
{
    return ((size_t)h * (size_t)c->n_ctx + (size_t)p) * (size_t)c->dv + (size_t)i;
}

static void data_create(attend_data *d, const attend_case *c)
{
    d->c = *c;
    size_t k_elements = (size_t)attend_key_head_elements(c->n_ctx, c->dk) * N_KV_HEADS;
    size_t v_elements = (size_t)c->n_ctx * N_KV_HEADS * (size_t)c->dv;
    d->k16 = malloc(k_elements * sizeof(uint16_t));
    d->v16 = malloc(v_elements * sizeof(uint16_t));
    d->k32 = malloc(k_elements * sizeof(float));
    d->v32 = malloc(v_elements * sizeof(float));
    for (size_t i = 0; i < k_elements; i++) {
        d->k16[i] = fp32_to_fp16(rng_float(-1.0f, 1.0f));
        d->k32[i] = fp16_to_fp32(d->k16[i]);
    }
    for (size_t i = 0; i < v_elements; i++) {
        d->v16[i] = fp32_to_fp16(rng_float(-1.0f, 1.0f));
        d->v32[i] = fp16_to_fp32(d->v16[i]);
    }
    d->queries = malloc((size_t)c->n_queries * (size_t)c->dk * sizeof(float));
    for (int i = 0; i < c->n_queries * c->dk; i++)
        d->queries[i] = rng_float(-1.0f, 1.0f); /* not f16-exact: the kernel rounds them for an f16 cache */
    for (int g = 0; g < ATTEND_MAX_QUERIES; g++)
        d->sinks[g] = rng_float(-2.0f, 3.0f);
    d->out_stride = c->dv + OUT_GAP;
    d->out = malloc((size_t)c->n_queries * (size_t)d->out_stride * sizeof(float));
    d->scratch_floats = attend_scratch_floats(c->n_ctx, c->dk);
    d->scratch = malloc((size_t)d->scratch_floats * sizeof(float));
}

static void data_destroy(attend_data *d)
{
    free(d->k16);
    free(d->v16);
    free(d->k32);
    free(d->v32);
    free(d->queries);
    free(d->out);
    free(d->scratch);
}

/* The job for queries [begin, begin + count) of the case, output rows from out. */
static attend_job data_job(attend_data *d, int f16, int begin, int count, float *out)
{
    const attend_case *c = &d->c;
    size_t element = f16 ? 2 : 4;
    const uint8_t *k = f16 ? (const uint8_t *)d->k16 : (const uint8_t *)d->k32;
    const uint8_t *v = f16 ? (const uint8_t *)d->v16 : (const uint8_t *)d->v32;
    attend_job job = {
        .n_queries = count,
        .head_dim_k = c->dk,
        .head_dim_v = c->dv,
        .keys = k + k_index(c, 1, 0, 0) * element,
        .values = v + v_index(c, 1, 0, 0) * element,
        .value_stride = (size_t)c->dv * element,
        .scale = c->scale,
        .sinks = c->sinks,
        .scratch = d->scratch,
    };
    for (int i = 0; i < count; i++) {
        int g = begin + i;
        job.queries[i] = (attend_query){
            .q = d->queries + (int64_t)g * c->dk,
            .out = out + (int64_t)i * d->out_stride,
            .first = case_first(c, g),
            .last = case_last(c, g),
            .sink = d->sinks[g],
        };
    }
    return job;
}

static void reset_out(attend_data *d, float *out, int count)
{
    for (int64_t i = 0; i < (int64_t)count * d->out_stride; i++)
        out[i] = SENTINEL;
}

static int gaps_intact(const attend_data *d, const float *out, int count)
{
    for (int g = 0; g < count; g++)
        for (int i = d->c.dv; i < d->out_stride; i++)
            if (out[(int64_t)g * d->out_stride + i] != SENTINEL)
                return 0;
    return 1;
}

/* Float64 attention of query g (rounded to f16 first for an f16 cache). */
static void reference(const attend_data *d, int f16, int g, double *out)
{
    const attend_case *c = &d->c;
    int32_t first = case_first(c, g), last = case_last(c, g);
    int count = last - first + 1;
    double *scores = malloc((size_t)count * sizeof(double));
    double max = c->sinks ? d->sinks[g] : -INFINITY;
    for (int j = 0; j < count; j++) {
        double s = 0.0;
        for (int i = 0; i < c->dk; i++) {
            float q = d->queries[g * c->dk + i];
            if (f16)
                q = fp16_to_fp32(fp32_to_fp16(q));
            s += (double)q * d->k32[k_index(c, 1, first + j, i)];
        }
        scores[j] = s * c->scale;
        if (scores[j] > max)
            max = scores[j];
    }
    double sum = c->sinks ? exp(d->sinks[g] - max) : 0.0;
    for (int j = 0; j < count; j++)
        sum += exp(scores[j] - max);
    for (int i = 0; i < c->dv; i++)
        out[i] = 0.0;
    for (int j = 0; j < count; j++) {
        double w = exp(scores[j] - max) / sum;
        for (int i = 0; i < c->dv; i++)
            out[i] += w * d->v32[v_index(c, 1, first + j, i)];
    }
    free(scores);
}

/* Tolerance against float64: the outputs are weighted means of values in
 * [-1, 1]; a score's float dot product of up to 200 terms is off by a few
 * 1e-7, and the weights with it (the 1e-6 floor). The tiled kernels' value
 * sums (lanes, then tiles) drift like
 * sqrt(keys) roundings; the scalar set's sequential float sums (its dot
 * products, the value sum) like keys roundings. The largest differences seen
 * are printed with each set's summary line. */
static double tolerance(const attend_case *c, int scalar)
{
    double keys = (double)(c->last - c->first + 1 + (c->first == 0 ? c->step * (c->n_queries - 1) : 0));
    return scalar ? 1.5e-6 + 1e-9 * keys : 1e-6 + 2e-8 * sqrt(keys);
}

static int checked_cases;
static double worst_error, worst_ratio; /* per set: largest difference, and largest difference / tolerance */

static void check_case(const kernel_set *set, const attend_case *c)
{
    attend_data d;
    data_create(&d, c);
    int scalar = set == kernels_scalar();
    float *alone = malloc((size_t)d.out_stride * sizeof(float));
    double *expected = malloc((size_t)c->dv * sizeof(double));
    for (int f16 = 0; f16 < 2; f16++) {
        attend_fn attend = kernels_attend(set, f16 ? TYPE_F16 : TYPE_F32);
        CHECK(attend != NULL);
        if (!attend)
            continue;
        /* the scratch is exactly what attend_scratch_floats asked for: ASan sees an overrun */
        reset_out(&d, d.out, c->n_queries);
        attend_job job = data_job(&d, f16, 0, c->n_queries, d.out);
        attend(&job);
        CHECK_MSG(gaps_intact(&d, d.out, c->n_queries), "%s f16 %d dk %d dv %d: wrote between output rows", set->name,
                  f16, c->dk, c->dv);
        double worst = 0.0;
        for (int g = 0; g < c->n_queries; g++) {
            reference(&d, f16, g, expected);
            for (int i = 0; i < c->dv; i++) {
                double diff = fabs(expected[i] - d.out[(int64_t)g * d.out_stride + i]);
                if (!(diff <= worst))
                    worst = isnan(diff) ? INFINITY : diff;
            }
        }
        if (worst > worst_error)
            worst_error = worst;
        if (worst / tolerance(c, scalar) > worst_ratio)
            worst_ratio = worst / tolerance(c, scalar);
        CHECK_MSG(worst <= tolerance(c, scalar),
                  "%s f16 %d: dk %d dv %d queries %d keys %d..%d step %d scale %g sinks %d: differs from float64 by %g (tolerance %g)",
                  set->name, f16, c->dk, c->dv, c->n_queries, c->first, c->last, c->step, (double)c->scale, c->sinks, worst,
                  tolerance(c, scalar));

        /* each query alone: the same bits */
        int same = 1;
        for (int g = 0; g < c->n_queries; g++) {
            reset_out(&d, alone, 1);
            attend_job single = data_job(&d, f16, g, 1, alone);
            attend(&single);
            same &= memcmp(alone, d.out + (int64_t)g * d.out_stride, (size_t)c->dv * sizeof(float)) == 0;
        }
        /* and split in two jobs at every point */
        float *split = malloc((size_t)c->n_queries * (size_t)d.out_stride * sizeof(float));
        for (int cut = 1; cut < c->n_queries; cut++) {
            reset_out(&d, split, c->n_queries);
            attend_job head = data_job(&d, f16, 0, cut, split);
            attend_job tail = data_job(&d, f16, cut, c->n_queries - cut, split + (int64_t)cut * d.out_stride);
            attend(&tail);
            attend(&head);
            same &= memcmp(split, d.out, (size_t)c->n_queries * (size_t)d.out_stride * sizeof(float)) == 0;
        }
        free(split);
        CHECK_MSG(same, "%s f16 %d dk %d dv %d queries %d keys %d..%d step %d: a query's bits depend on its job",
                  set->name, f16, c->dk, c->dv, c->n_queries, c->first, c->last, c->step);
        checked_cases++;
    }

    /* rows outside [first, last] never matter: NaN there changes no bit */
    float *clean = malloc((size_t)c->n_queries * (size_t)d.out_stride * sizeof(float));
    for (int f16 = 0; f16 < 2; f16++) {
        attend_fn attend = kernels_attend(set, f16 ? TYPE_F16 : TYPE_F32);
        reset_out(&d, clean, c->n_queries);
        attend_job job = data_job(&d, f16, 0, c->n_queries, clean);
        attend(&job);
        size_t k_elements = (size_t)attend_key_head_elements(c->n_ctx, c->dk) * N_KV_HEADS;
        size_t v_elements = (size_t)c->n_ctx * N_KV_HEADS * (size_t)c->dv;
        uint16_t *k_saved = malloc(k_elements * sizeof(uint16_t));
        uint16_t *v_saved = malloc(v_elements * sizeof(uint16_t));
        float *k32_saved = malloc(k_elements * sizeof(float));
        float *v32_saved = malloc(v_elements * sizeof(float));
        memcpy(k_saved, d.k16, k_elements * sizeof(uint16_t));
        memcpy(v_saved, d.v16, v_elements * sizeof(uint16_t));
        memcpy(k32_saved, d.k32, k_elements * sizeof(float));
        memcpy(v32_saved, d.v32, v_elements * sizeof(float));
        /* the tail of the last tile too, which the cache's size rounds up to */
        int32_t n_rounded = (int32_t)(attend_key_head_elements(c->n_ctx, c->dk) / c->dk);
        for (int p = 0; p < n_rounded; p++) {
            int seen = 0;
            for (int g = 0; g < c->n_queries; g++)
                seen |= p >= case_first(c, g) && p <= case_last(c, g);
            if (seen)
                continue;
            for (int h = 0; h < N_KV_HEADS; h++) {
                for (int i = 0; i < c->dk; i++) {
                    d.k16[k_index(c, h, p, i)] = 0x7e00; /* NaN */
                    d.k32[k_index(c, h, p, i)] = NAN;
                }
                for (int i = 0; p < c->n_ctx && i < c->dv; i++) {
                    d.v16[v_index(c, h, p, i)] = 0x7e00;
                    d.v32[v_index(c, h, p, i)] = NAN;
                }
            }
        }
        /* other heads of the visible rows too */
        for (int p = case_first(c, 0); p <= case_last(c, c->n_queries - 1); p++)
            for (int h = 0; h < N_KV_HEADS; h += 2) {
                for (int i = 0; i < c->dk; i++) {
                    d.k32[k_index(c, h, p, i)] = NAN;
                    d.k16[k_index(c, h, p, i)] = 0x7e00;
                }
                for (int i = 0; i < c->dv; i++) {
                    d.v32[v_index(c, h, p, i)] = NAN;
                    d.v16[v_index(c, h, p, i)] = 0x7e00;
                }
            }
        reset_out(&d, d.out, c->n_queries);
        job = data_job(&d, f16, 0, c->n_queries, d.out);
        attend(&job);
        CHECK_MSG(memcmp(clean, d.out, (size_t)c->n_queries * (size_t)d.out_stride * sizeof(float)) == 0,
                  "%s f16 %d dk %d dv %d keys %d..%d: rows outside the range change the result", set->name, f16,
                  c->dk, c->dv, c->first, c->last);
        memcpy(d.k16, k_saved, k_elements * sizeof(uint16_t));
        memcpy(d.v16, v_saved, v_elements * sizeof(uint16_t));
        memcpy(d.k32, k32_saved, k_elements * sizeof(float));
        memcpy(d.v32, v32_saved, v_elements * sizeof(float));
        free(k_saved);
        free(v_saved);
        free(k32_saved);
        free(v32_saved);
    }
    free(clean);
    free(alone);
    free(expected);
    data_destroy(&d);
}

/* The case's queries on a ring of ring positions holding the latest ones
 * of head 1 (the others NaN) give the bits of the whole cache. */
static void check_ring(const kernel_set *set, const attend_case *c, int32_t ring)
{
    attend_data d;
    data_create(&d, c);
    size_t k_elements = (size_t)attend_key_head_elements(ring, c->dk), v_elements = (size_t)ring * (size_t)c->dv;
    uint16_t *k16 = malloc(k_elements * sizeof *k16), *v16 = malloc(v_elements * sizeof *v16);
    float *k32 = malloc(k_elements * sizeof *k32), *v32 = malloc(v_elements * sizeof *v32);
    float *whole = malloc((size_t)c->n_queries * (size_t)d.out_stride * sizeof *whole);
    for (size_t i = 0; i < k_elements; i++) {
        k32[i] = NAN;
        k16[i] = 0x7e00;
    }
    for (size_t i = 0; i < v_elements; i++) {
        v32[i] = NAN;
        v16[i] = 0x7e00;
    }
    int32_t newest = case_last(c, c->n_queries - 1);
    for (int32_t p = newest - ring + 1; p <= newest; p++) {
        for (int i = 0; i < c->dk; i++) {
            size_t at = (size_t)attend_key_index(p % ring, i, c->dk);
            k32[at] = d.k32[k_index(c, 1, p, i)];
            k16[at] = d.k16[k_index(c, 1, p, i)];
        }
        for (int i = 0; i < c->dv; i++) {
            v32[(size_t)(p % ring) * (size_t)c->dv + (size_t)i] = d.v32[v_index(c, 1, p, i)];
            v16[(size_t)(p % ring) * (size_t)c->dv + (size_t)i] = d.v16[v_index(c, 1, p, i)];
        }
    }
    for (int f16 = 0; f16 < 2; f16++) {
        attend_fn attend = kernels_attend(set, f16 ? TYPE_F16 : TYPE_F32);
        reset_out(&d, whole, c->n_queries);
        attend_job job = data_job(&d, f16, 0, c->n_queries, whole);
        attend(&job);
        reset_out(&d, d.out, c->n_queries);
        job = data_job(&d, f16, 0, c->n_queries, d.out);
        job.keys = f16 ? (const void *)k16 : (const void *)k32;
        job.values = f16 ? (const void *)v16 : (const void *)v32;
        job.ring = ring;
        attend(&job);
        CHECK_MSG(memcmp(whole, d.out, (size_t)c->n_queries * (size_t)d.out_stride * sizeof *whole) == 0,
                  "%s f16 %d dk %d, %d queries %d..%d step %d: the ring of %d gives other bits than the whole cache",
                  set->name, f16, c->dk, c->n_queries, c->first, c->last, c->step, ring);
    }
    free(k16);
    free(v16);
    free(k32);
    free(v32);
    free(whole);
    data_destroy(&d);
}

static void test_set(const kernel_set *set)
{
    static const int dims[][2] = {{128, 128}, {64, 64}, {8, 8}, {72, 40}, {16, 136}, {200, 100}, {3, 5}, {32, 64}};
    static const int groups[] = {8, 1, 3, 2, 5};
    int before = checked_cases;
    worst_error = worst_ratio = 0.0;
    /* under the sanitizer not the first two: {32, 64} has no tails either,
     * and the long cases below run those head sizes */
    for (size_t s = TEST_SANITIZED ? 2 : 0; s < sizeof dims / sizeof dims[0]; s++) {
        /* under the sanitizer: 8, 1 and 3 queries (a full, a single, an odd group) */
        for (size_t g = 0; g < (TEST_SANITIZED ? 3 : sizeof groups / sizeof groups[0]); g++) {
            int dk = dims[s][0], dv = dims[s][1], n = groups[g];
            float scale = 1.0f / sqrtf((float)dk);
            /* position 0 alone; a partial first tile; a window off the tiles; within
             * one tile; then queries of consecutive tokens (causal, windowed, and
             * windows 40 apart that share no key) */
            attend_case cases[] = {
                {dk, dv, n, 40, 0, 0, scale, 0, 0},
                {dk, dv, n, 100, 0, 70, scale, (int)(g % 2), 0},
                {dk, dv, n, 300, 37, 236, scale * 4.0f, 1, 0},
                {dk, dv, n, 300, 64, 95, scale, 0, 0},
                {dk, dv, n, 300, 250, 251, scale * 8.0f, 1, 0},
                {dk, dv, n, 120, 0, 60, scale, 0, 1},
                {dk, dv, n, 300, 37, 236, scale * 4.0f, 1, 1},
                {dk, dv, n, 300, 10, 40, scale, 0, 5},
                {dk, dv, n, 400, 100, 110, scale * 2.0f, 1, 40},
            };
            for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
                check_case(set, &cases[i]);
        }
    }
    /* long contexts on the Qwen3, gpt-oss and stories shapes: 2048 and 4096 keys, a 128-key window at the end */
    attend_case long_cases[] = {
        {128, 128, 8, 4096, 0, 4095, 1.0f / sqrtf(128.0f), 0, 0},
        {128, 128, 8, 2100, 0, 2047, 0.3f, 0, 0},
        {64, 64, 8, 4096, 3968, 4095, 0.125f, 1, 0},
        {64, 64, 3, 2500, 5, 2499, 0.5f, 1, 0},
        {8, 8, 8, 4100, 0, 4000, 0.35f, 0, 1}, /* stories260K's heads, 4 tokens x 2 heads */
    };
    /* under the sanitizer: the longest range and the window at its end */
    for (size_t i = 0; i < sizeof long_cases / sizeof long_cases[0]; i++)
        if (!TEST_SANITIZED || i == 0 || i == 2)
            check_case(set, &long_cases[i]);
    /* rings: windows across the wrap at 192 (ring 96) and 256 (ring 128), one query and tokens of a group;
     * a window ending right before the wrap; sinks */
    attend_case ring_cases[] = {
        {64, 64, 8, 300, 170, 200, 0.125f, 0, 2},
        {128, 128, 1, 300, 180, 250, 0.09f, 1, 0},
        {72, 40, 3, 300, 130, 191, 0.2f, 1, 0},
        {64, 64, 8, 400, 230, 258, 0.125f, 1, 8},
    };
    const int32_t rings[] = {96, 96, 96, 128};
    for (size_t i = 0; i < sizeof ring_cases / sizeof ring_cases[0]; i++)
        check_ring(set, &ring_cases[i], rings[i]);
    printf("set %s: %d attention cases, largest difference from float64 %.3g (%.0f %% of its tolerance)\n",
           set->name, checked_cases - before, worst_error, 100.0 * worst_ratio);
}

int main(void)
{
    cpu_features features;
    cpu_features_detect(&features);
    CHECK(kernels_attend(NULL, TYPE_F16) == kernels_scalar()->attend[TYPE_F16]);
    CHECK(kernels_attend(NULL, TYPE_Q8_0) == NULL);
    CHECK(attend_scratch_floats(10, 128) >= 10 + 128);
    /* the cache format: tiles of 32 keys, dimension by dimension */
    CHECK(ATTEND_TILE_KEYS == 32);
    CHECK(attend_key_index(0, 0, 128) == 0);
    CHECK(attend_key_index(5, 0, 128) == 5);
    CHECK(attend_key_index(5, 3, 128) == 3 * 32 + 5);
    CHECK(attend_key_index(33, 2, 128) == 32 * 128 + 2 * 32 + 1);
    CHECK(attend_key_head_elements(33, 128) == 64 * 128);
    CHECK(attend_key_head_elements(64, 8) == 64 * 8);

    test_set(kernels_scalar());
    const kernel_set *sets[] = {kernels_avx2(), kernels_avx512(), kernels_neon()};
    const char *names[] = {"avx2", "avx512", "neon"};
    for (int i = 0; i < 3; i++) {
        if (!sets[i]) {
            printf("set %s: not compiled for this architecture\n", names[i]);
            continue;
        }
        if (!kernels_set_supported(sets[i], &features)) {
            printf("set %s: NOT RUN on this CPU (lacks the instructions); not counted as passed\n", names[i]);
            continue;
        }
        CHECK(kernels_attend(sets[i], TYPE_F32) == sets[i]->attend[TYPE_F32]);
        test_set(sets[i]);
    }
    return test_finish();
}
