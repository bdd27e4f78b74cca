/* Tests of matmul_run and the activation conversion: products agree with a
 * naive double-precision product of the dequantized weights and the f32
 * inputs within the activation-rounding bound; results are bit-identical for
 * 1, 2 and 3 threads and for a batch versus one token at a time; several jobs
 * run in one step; odd row counts; strides are honoured. Weights are real
 * llama.cpp blocks from shared/oracle/quant-vectors, rearranged into matrices. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/matmul.h"
#include "test.h"

#define N_IN 512
#define N_TOKENS 5
#define OUT_PAD 3         /* extra floats between output rows: checks out_stride */
#define ACTIVATION_PAD 40 /* extra bytes between activation rows */
#define SENTINEL -12345.0f

typedef struct type_case {
    const char *name; /* quant_type_from_name */
    const char *file; /* in oracle/quant-vectors; NULL: synthesized (F32) */
    int required;     /* formats the first quant delivery provides */
} type_case;

static const type_case type_cases[] = {
    {"F32", NULL, 1},           {"F16", "f16.bin", 1},       {"BF16", "bf16.bin", 1},
    {"Q8_0", "q8_0.bin", 1},    {"Q4_K", "q4_k.bin", 1},     {"Q5_K", "q5_k.bin", 1},
    {"Q6_K", "q6_k.bin", 1},    {"MXFP4", "mxfp4.bin", 1},   {"Q4_0", "q4_0.bin", 0},
    {"Q4_1", "q4_1.bin", 0},    {"Q5_0", "q5_0.bin", 0},     {"Q5_1", "q5_1.bin", 0},
    {"Q2_K", "q2_k.bin", 0},    {"Q3_K", "q3_k.bin", 0},     {"IQ4_NL", "iq4_nl.bin", 0},
    {"IQ4_XS", "iq4_xs.bin", 0},
};

static uint64_t random_state = 0x9e3779b97f4a7c15ull;

static float random_uniform(void) /* in [-1, 1) */
{
    random_state ^= random_state << 13;
    random_state ^= random_state >> 7;
    random_state ^= random_state << 17;
    return (float)((random_state >> 40) * (2.0 / 16777216.0) - 1.0);
}

/* A weight matrix of one type, its dequantized copy, and its size. */
typedef struct matrix {
    uint32_t type;
    int64_t n_in, n_out;
    size_t row_bytes;
    unsigned char *data;
    float *dequantized; /* n_out x n_in */
} matrix;

static void matrix_free(matrix *m)
{
    free(m->data);
    free(m->dequantized);
    memset(m, 0, sizeof *m);
}

/* Builds n_out rows of N_IN elements from the blocks of a vector file, each
 * matrix block taken from a different place so rows differ. Returns 0 on
 * success. */
static int matrix_make(matrix *m, const type_case *tc, uint32_t type, int64_t n_out)
{
    memset(m, 0, sizeof *m);
    const quant_format *format = quant_format_of(type);
    m->type = type;
    m->n_in = N_IN;
    m->n_out = n_out;
    m->row_bytes = quant_row_bytes(type, N_IN);
    m->data = malloc(m->row_bytes * (size_t)n_out);
    m->dequantized = malloc(sizeof(float) * (size_t)(n_out * N_IN));
    if (!m->data || !m->dequantized || m->row_bytes == 0)
        return -1;
    if (!tc->file) {
        float *w = (float *)m->data;
        for (int64_t i = 0; i < n_out * N_IN; i++)
            w[i] = random_uniform();
    } else {
        char path[1024], relative[256];
        snprintf(relative, sizeof relative, "oracle/quant-vectors/%s", tc->file);
        size_t size = 0;
        unsigned char *source = test_read_file(test_shared_path(path, sizeof path, relative), &size);
        size_t block_bytes = (size_t)format->block_bytes;
        size_t source_blocks = size / block_bytes;
        int64_t blocks_per_row = N_IN / format->block_elems;
        if (!source || source_blocks == 0) {
            free(source);
            return -1;
        }
        for (int64_t r = 0; r < n_out; r++)
            for (int64_t b = 0; b < blocks_per_row; b++) {
                size_t pick = (size_t)(r * 7 + b * 3 + r * b * 5) % source_blocks;
                memcpy(m->data + (size_t)r * m->row_bytes + (size_t)b * block_bytes,
                       source + pick * block_bytes, block_bytes);
            }
        free(source);
    }
    for (int64_t r = 0; r < n_out; r++)
        format->dequantize_row(m->data + (size_t)r * m->row_bytes, m->dequantized + r * N_IN, N_IN);
    return 0;
}

/* Inputs: N_TOKENS rows of N_IN floats with different magnitudes per token
 * and a few outliers, as real hidden states have. */
static void make_inputs(float *x)
{
    for (int t = 0; t < N_TOKENS; t++) {
        float scale = t == 0 ? 1.0f : (float)t * 0.37f + 0.05f;
        for (int i = 0; i < N_IN; i++)
            x[t * N_IN + i] = random_uniform() * scale;
        x[t * N_IN + (t * 97) % N_IN] = 8.0f * scale;
    }
}

/* Worst-case error of one converted activation element, as a fraction of its
 * block's largest magnitude (8-bit formats) or of its own magnitude (floats):
 * derived from the formats (quant-formats.md 5.2, 5.3), not measured. */
static void activation_error_model(uint32_t activation_type, int *block, double *of_block_max,
                                   double *of_value)
{
    *block = 1;
    *of_block_max = 0;
    *of_value = 0;
    switch (activation_type) {
    case TYPE_Q8_0: /* half a step of amax/127, plus d rounded to f16 */
        *block = 32;
        *of_block_max = 0.5 / 127 + 1.0 / 2048;
        break;
    case TYPE_Q8_1: /* as Q8_0, plus the block sum s rounded to f16 (up to 32 values) */
        *block = 32;
        *of_block_max = 0.5 / 127 + 1.0 / 2048 + 32.0 / 2048;
        break;
    case TYPE_Q8_K: /* d is f32: half a step only */
        *block = 256;
        *of_block_max = 0.5 / 127 * 1.0001;
        break;
    case TYPE_F16:
        *of_value = 1.0 / 2048;
        break;
    case TYPE_BF16:
        *of_value = 1.0 / 256;
        break;
    default: /* F32: exact */
        break;
    }
}

/* Checks out (n_tokens x n_out at out_stride) against the double product of
 * the dequantized weights with x, within the activation-rounding bound plus
 * f32 accumulation slack. Returns the number of elements out of bounds. */
static int check_against_reference(const matrix *m, const float *x, int64_t n_tokens,
                                   const float *out, int64_t out_stride, const char *what)
{
    const quant_format *format = quant_format_of(m->type);
    int block;
    double of_block_max, of_value;
    activation_error_model(format->activation_type, &block, &of_block_max, &of_value);
    int bad = 0;
    for (int64_t t = 0; t < n_tokens; t++) {
        const float *xt = x + t * m->n_in;
        for (int64_t r = 0; r < m->n_out; r++) {
            const float *w = m->dequantized + r * m->n_in;
            double exact = 0, magnitude = 0, bound = 0;
            for (int64_t b = 0; b < m->n_in; b += block) {
                double block_max = 0;
                for (int64_t i = b; i < b + block; i++)
                    block_max = fmax(block_max, fabs(xt[i]));
                for (int64_t i = b; i < b + block; i++) {
                    exact += (double)w[i] * xt[i];
                    magnitude += fabs((double)w[i] * xt[i]);
                    bound += fabs(w[i]) * (of_block_max * block_max + of_value * fabs(xt[i]));
                }
            }
            bound += 1e-5 * magnitude + 1e-6;
            double got = out[t * out_stride + r];
            if (!(fabs(got - exact) <= bound)) {
                if (bad < 3)
                    fprintf(stderr, "%s %s: token %lld row %lld: got %.7g, exact %.7g, bound %.3g\n",
                            format->name, what, (long long)t, (long long)r, got, exact, bound);
                bad++;
            }
        }
    }
    return bad;
}

/* Converted activations for all tokens, ACTIVATION_PAD bytes apart. */
static unsigned char *convert_inputs(uint32_t type, const float *x, int64_t n_tokens, size_t *stride)
{
    size_t row = activation_row_bytes(type, N_IN);
    *stride = row + ACTIVATION_PAD;
    unsigned char *a = calloc((size_t)n_tokens, *stride);
    if (!a)
        return NULL;
    for (int64_t t = 0; t < n_tokens; t++)
        activation_convert(NULL, type, x + t * N_IN, N_IN, a + (size_t)t * *stride);
    return a;
}

static float *new_output(int64_t n_tokens, int64_t stride)
{
    float *out = malloc(sizeof(float) * (size_t)(n_tokens * stride));
    if (out)
        for (int64_t i = 0; i < n_tokens * stride; i++)
            out[i] = SENTINEL;
    return out;
}

static int padding_untouched(const float *out, int64_t n_tokens, int64_t n_out, int64_t stride)
{
    for (int64_t t = 0; t < n_tokens; t++)
        for (int64_t r = n_out; r < stride; r++)
            if (out[t * stride + r] != SENTINEL)
                return 0;
    return 1;
}

static matmul_job make_job(const matrix *m, const unsigned char *activations, size_t stride,
                           int64_t n_tokens, float *out, int64_t out_stride)
{
    matmul_job job = {
        .weights = m->data,
        .type = m->type,
        .n_in = m->n_in,
        .n_out = m->n_out,
        .weight_row_bytes = m->row_bytes,
        .activations = activations,
        .activation_stride = stride,
        .n_tokens = n_tokens,
        .out = out,
        .out_stride = out_stride,
    };
    return job;
}

/* One type, one row count: reference, thread counts, batching, kernel sets. */
static void test_type_rows(const type_case *tc, uint32_t type, int64_t n_out, thread_pool *pools[4],
                           const float *x)
{
    matrix m;
    if (matrix_make(&m, tc, type, n_out) != 0) {
        CHECK_MSG(0, "%s: could not build a %lld-row matrix", tc->name, (long long)n_out);
        matrix_free(&m);
        return;
    }
    size_t stride;
    unsigned char *activations = convert_inputs(type, x, N_TOKENS, &stride);
    int64_t out_stride = n_out + OUT_PAD;
    const kernel_set *best = kernels_best();

    /* Batched, 1 thread, best kernels: the baseline. */
    float *base = new_output(N_TOKENS, out_stride);
    matmul_job job = make_job(&m, activations, stride, N_TOKENS, base, out_stride);
    matmul_run(pools[1], best, &job, 1);
    CHECK_MSG(check_against_reference(&m, x, N_TOKENS, base, out_stride, best->name) == 0,
              "%s, %lld rows: product outside the activation-rounding bound", tc->name,
              (long long)n_out);
    CHECK_MSG(padding_untouched(base, N_TOKENS, n_out, out_stride), "%s: wrote past n_out",
              tc->name);

    /* Same product on 2 and 3 threads and with the NULL pool: bit-identical. */
    for (int p = 0; p < 4; p++) {
        if (p == 1)
            continue;
        float *out = new_output(N_TOKENS, out_stride);
        job.out = out;
        matmul_run(pools[p], best, &job, 1);
        CHECK_MSG(memcmp(out, base, sizeof(float) * (size_t)(N_TOKENS * out_stride)) == 0,
                  "%s, %lld rows: %d threads differ from 1 thread", tc->name, (long long)n_out,
                  thread_pool_size(pools[p]));
        free(out);
    }

    /* One token at a time (on 3 threads): bit-identical to the batch. */
    float *single = new_output(N_TOKENS, out_stride);
    for (int64_t t = 0; t < N_TOKENS; t++) {
        matmul_job one = make_job(&m, activations + (size_t)t * stride, stride, 1,
                                  single + t * out_stride, out_stride);
        matmul_run(pools[3], best, &one, 1);
    }
    CHECK_MSG(memcmp(single, base, sizeof(float) * (size_t)(N_TOKENS * out_stride)) == 0,
              "%s, %lld rows: one token at a time differs from the batch", tc->name,
              (long long)n_out);
    free(single);

    /* The scalar definition, and the NULL kernel set (= best), also agree. */
    float *scalar = new_output(N_TOKENS, out_stride);
    job.out = scalar;
    matmul_run(pools[2], kernels_scalar(), &job, 1);
    CHECK_MSG(check_against_reference(&m, x, N_TOKENS, scalar, out_stride, "scalar") == 0,
              "%s, %lld rows: scalar product outside the bound", tc->name, (long long)n_out);
    job.out = scalar;
    matmul_run(pools[2], NULL, &job, 1);
    CHECK_MSG(memcmp(scalar, base, sizeof(float) * (size_t)(N_TOKENS * out_stride)) == 0,
              "%s: the NULL kernel set is not the best set", tc->name);
    free(scalar);

    free(base);
    free(activations);
    matrix_free(&m);
}

/* Several jobs of different types and sizes in one step equal each job run
 * alone, bit for bit, and nothing is written outside each job's output.
 * one_token: every job has one token and enough rows (megabytes in all) that
 * the decode schedule cuts jobs into pieces shared by the threads; otherwise
 * the jobs have different batch sizes. */
static void test_several_jobs(thread_pool *pools[4], const float *x, int one_token)
{
    const char *names[] = {"Q4_K", "Q8_0", "F32", "Q6_K", "MXFP4"};
    const int64_t batch_rows[] = {33, 7, 1, 130, 64};
    const int64_t decode_rows[] = {1500, 7, 901, 1302, 260};
    const int64_t *rows = one_token ? decode_rows : batch_rows;
    enum { N_JOBS = 5 };
    matrix m[N_JOBS];
    unsigned char *activations[N_JOBS];
    size_t strides[N_JOBS];
    float *together[N_JOBS], *alone[N_JOBS];
    matmul_job jobs[N_JOBS];
    int ready = 1;
    for (int j = 0; j < N_JOBS; j++) {
        uint32_t type = (uint32_t)quant_type_from_name(names[j]);
        const type_case *tc = NULL;
        for (size_t k = 0; k < sizeof type_cases / sizeof type_cases[0]; k++)
            if (strcmp(type_cases[k].name, names[j]) == 0)
                tc = &type_cases[k];
        if (matrix_make(&m[j], tc, type, rows[j]) != 0)
            ready = 0;
        activations[j] = convert_inputs(type, x, N_TOKENS, &strides[j]);
        together[j] = new_output(N_TOKENS, rows[j] + OUT_PAD);
        alone[j] = new_output(N_TOKENS, rows[j] + OUT_PAD);
        /* Job j uses the last N_TOKENS - j % 3 tokens: different batch sizes. */
        int64_t n_tokens = one_token ? 1 : N_TOKENS - j % 3;
        jobs[j] = make_job(&m[j], activations[j], strides[j], n_tokens, together[j],
                           rows[j] + OUT_PAD);
    }
    CHECK(ready);
    for (int p = 0; p < 4 && ready; p++) {
        for (int j = 0; j < N_JOBS; j++)
            for (int64_t i = 0; i < N_TOKENS * (rows[j] + OUT_PAD); i++)
                together[j][i] = SENTINEL;
        matmul_run(pools[p], NULL, jobs, N_JOBS);
        for (int j = 0; j < N_JOBS; j++) {
            matmul_job solo = jobs[j];
            solo.out = alone[j];
            matmul_run(NULL, NULL, &solo, 1);
            size_t bytes = sizeof(float) * (size_t)(N_TOKENS * (rows[j] + OUT_PAD));
            CHECK_MSG(memcmp(together[j], alone[j], bytes) == 0,
                      "job %d (%s) in a %d-job %s step on %d threads differs from running it alone", j,
                      names[j], N_JOBS, one_token ? "one-token" : "batch", thread_pool_size(pools[p]));
            CHECK(padding_untouched(together[j], jobs[j].n_tokens, rows[j], rows[j] + OUT_PAD));
            CHECK(check_against_reference(&m[j], x, jobs[j].n_tokens, together[j],
                                          rows[j] + OUT_PAD, "multi-job") == 0);
        }
    }
    for (int j = 0; j < N_JOBS; j++) {
        matrix_free(&m[j]);
        free(activations[j]);
        free(together[j]);
        free(alone[j]);
    }
}

static void test_activation_sizes(void)
{
    /* From the spec's block sizes: Q8_K 292 bytes / 256, Q8_0 34 / 32. */
    CHECK(activation_row_bytes(TYPE_Q4_K, 512) == 2 * 292);
    CHECK(activation_row_bytes(TYPE_Q6_K, 2048) == 8 * 292);
    CHECK(activation_row_bytes(TYPE_Q8_0, 512) == 16 * 34);
    CHECK(activation_row_bytes(TYPE_MXFP4, 2048) == 64 * 34);
    CHECK(activation_row_bytes(TYPE_F32, 100) == 400);
    CHECK(activation_row_bytes(TYPE_F16, 100) == 200);
    CHECK(activation_row_bytes(TYPE_BF16, 64) == 128);
    CHECK(activation_row_bytes(4, 512) == 0);          /* removed type id */
    CHECK(activation_row_bytes(TYPE_COUNT, 512) == 0); /* out of range */
    CHECK(activation_row_bytes(TYPE_Q4_K, 100) == 0);  /* not a whole block */

    float x[64];
    for (int i = 0; i < 64; i++)
        x[i] = random_uniform();
    float copy[64];
    activation_convert(NULL, TYPE_F32, x, 64, copy);
    CHECK(memcmp(copy, x, sizeof x) == 0);
}

/* Zero jobs, zero tokens and zero rows write nothing. */
static void test_empty(thread_pool *pool)
{
    float out[8];
    for (int i = 0; i < 8; i++)
        out[i] = SENTINEL;
    matmul_run(pool, NULL, NULL, 0);
    matmul_job job = {.weights = NULL, .type = TYPE_F32, .n_in = 8, .n_out = 8,
                      .weight_row_bytes = 32, .activations = NULL, .activation_stride = 32,
                      .n_tokens = 0, .out = out, .out_stride = 8};
    matmul_run(pool, NULL, &job, 1);
    job.n_tokens = 1;
    job.n_out = 0;
    matmul_run(pool, NULL, &job, 1);
    int untouched = 1;
    for (int i = 0; i < 8; i++)
        untouched &= out[i] == SENTINEL;
    CHECK(untouched);
}

int main(void)
{
    bmoe_error err;
    thread_pool *pools[4] = {NULL, NULL, NULL, NULL}; /* index = thread count; 0 = NULL pool */
    for (int n = 1; n <= 3; n++) {
        pools[n] = thread_pool_create(n, &err);
        if (!pools[n]) {
            CHECK_MSG(0, "thread_pool_create(%d): %s", n, err.message);
            return test_finish();
        }
    }
    printf("kernel set: %s\n", kernels_best()->name);

    float *x = malloc(sizeof(float) * N_TOKENS * N_IN);
    make_inputs(x);

    test_activation_sizes();
    test_empty(pools[2]);
    const int64_t row_counts[] = {1, 7, 33, 130};
    for (size_t k = 0; k < sizeof type_cases / sizeof type_cases[0]; k++) {
        const type_case *tc = &type_cases[k];
        int type = quant_type_from_name(tc->name);
        const quant_format *format = type >= 0 ? quant_format_of((uint32_t)type) : NULL;
        const quant_format *activation = format ? quant_format_of(format->activation_type) : NULL;
        int usable = format && format->dequantize_row &&
                     kernels_dot_rows(kernels_scalar(), (uint32_t)type) &&
                     (format->activation_type == TYPE_F32 || (activation && activation->quantize_row));
        if (!usable) {
            if (tc->required)
                CHECK_MSG(0, "%s: no dequantize, dot kernel or activation quantizer", tc->name);
            else
                printf("%s: not implemented by the quant module yet, not tested\n", tc->name);
            continue;
        }
        for (size_t r = 0; r < sizeof row_counts / sizeof row_counts[0]; r++)
            test_type_rows(tc, (uint32_t)type, row_counts[r], pools, x);
    }
    test_several_jobs(pools, x, 0);
    test_several_jobs(pools, x, 1);

    free(x);
    for (int n = 1; n <= 3; n++)
        thread_pool_destroy(pools[n]);
    return test_finish();
}
