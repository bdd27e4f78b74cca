/* Tests of src/ops against values derived by hand or by a plain double
 * precision implementation written here from the formulas in the spec. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/fp16.h"
#include "kernels/thread_pool.h"
#include "ops/ops.h"
#include "test.h"

static uint64_t random_state = 0x9e3779b97f4a7c15ull;

static float random_uniform(void) /* in [-1, 1) */
{
    random_state ^= random_state << 13;
    random_state ^= random_state >> 7;
    random_state ^= random_state << 17;
    return (float)((random_state >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static void test_rmsnorm(void)
{
    float x[4] = {1, 2, 3, 4};
    float w[4] = {1, 0.5f, 2, -1};
    float out[4];
    rmsnorm(out, x, w, 4, 1e-5f);
    double scale = 1.0 / sqrt(7.5 + 1e-5); /* mean of 1, 4, 9, 16 */
    for (int i = 0; i < 4; i++)
        CHECK_MSG(fabs(out[i] - x[i] * w[i] * scale) < 1e-6, "rmsnorm[%d] = %g", i, out[i]);
    float heads[8] = {1, 2, 3, 4, 10, 20, 30, 40};
    float ones[4] = {1, 1, 1, 1};
    rmsnorm_heads(heads, ones, 4, 2, 0.0f);
    /* scaling a vector does not change its normalized value */
    for (int i = 0; i < 4; i++)
        CHECK(fabsf(heads[i] - heads[4 + i]) < 1e-6f);
    CHECK(fabs(heads[0] - 1.0 / sqrt(7.5)) < 1e-6);
}

static void test_rope(void)
{
    /* position 0 is the identity without YaRN */
    rope_config neox = rope_config_default(ROPE_NEOX, 8, 10000.0f);
    float cache[8];
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    float y[8];
    memcpy(y, x, sizeof x);
    rope_cache_fill(&neox, 0, cache);
    rope_apply(&neox, y, 8, 1, cache);
    CHECK(memcmp(x, y, sizeof x) == 0);

    /* position 3, head_dim 6 with 4 rotated dims: pair i has angle 3 * base^(-2i/4) */
    int position = 3;
    double angle[2] = {3.0, 3.0 * pow(10000.0, -0.5)};
    float v[6] = {1, 2, 3, 4, 5, 6};
    rope_config config = rope_config_default(ROPE_NEOX, 4, 10000.0f);
    rope_cache_fill(&config, position, cache);
    rope_apply(&config, v, 6, 1, cache);
    /* NEOX pairs (0,2) and (1,3) */
    CHECK(fabs(v[0] - (1 * cos(angle[0]) - 3 * sin(angle[0]))) < 1e-5);
    CHECK(fabs(v[2] - (1 * sin(angle[0]) + 3 * cos(angle[0]))) < 1e-5);
    CHECK(fabs(v[1] - (2 * cos(angle[1]) - 4 * sin(angle[1]))) < 1e-5);
    CHECK(fabs(v[3] - (2 * sin(angle[1]) + 4 * cos(angle[1]))) < 1e-5);
    CHECK(v[4] == 5 && v[5] == 6);

    float u[6] = {1, 2, 3, 4, 5, 6};
    config.type = ROPE_NORM; /* pairs (0,1) and (2,3) */
    rope_apply(&config, u, 6, 1, cache);
    CHECK(fabs(u[0] - (1 * cos(angle[0]) - 2 * sin(angle[0]))) < 1e-5);
    CHECK(fabs(u[1] - (1 * sin(angle[0]) + 2 * cos(angle[0]))) < 1e-5);
    CHECK(fabs(u[2] - (3 * cos(angle[1]) - 4 * sin(angle[1]))) < 1e-5);
    CHECK(fabs(u[3] - (3 * sin(angle[1]) + 4 * cos(angle[1]))) < 1e-5);

    /* YaRN as in gpt-oss-20b: R 64, base 150000, factor 32, original context
     * 4096: correction range [8, 18], magnitude 1 + 0.1 ln 32 on q and k. */
    rope_config yarn = rope_config_default(ROPE_NEOX, 64, 150000.0f);
    yarn.freq_scale = 1.0f / 32.0f;
    yarn.ext_factor = 1.0f;
    yarn.n_ctx_orig = 4096;
    float table[64];
    rope_cache_fill(&yarn, 0, table);
    CHECK_MSG(fabs(table[0] - 1.3465736) < 1e-5, "yarn magnitude %g", table[0]);
    rope_cache_fill(&yarn, 100, table);
    double magnitude = 1.0 + 0.1 * log(32.0);
    /* pair 0: below low, pure extrapolation (angle = position) */
    CHECK(fabs(table[0] - cos(100.0) * magnitude) < 1e-4);
    /* pair 30: above high, pure interpolation */
    double theta30 = 100.0 / 32.0 * pow(150000.0, -2.0 * 30 / 64);
    CHECK(fabs(table[30] - cos(theta30) * magnitude) < 1e-4);
    CHECK(fabs(table[32 + 30] - sin(theta30) * magnitude) < 1e-4);
    /* pair 13: ramp (13 - 8) / 10 = 0.5 -> halfway mix */
    double extrap13 = 100.0 * pow(150000.0, -2.0 * 13 / 64);
    double theta13 = 0.5 * extrap13 + 0.5 * extrap13 / 32.0;
    CHECK(fabs(table[13] - cos(theta13) * magnitude) < 1e-4);

    /* frequency divisors divide the angle */
    float factors[2] = {1.0f, 4.0f};
    rope_config divided = rope_config_default(ROPE_NEOX, 4, 10000.0f);
    divided.freq_factors = factors;
    rope_cache_fill(&divided, 3, cache);
    CHECK(fabs(cache[1] - cos(angle[1] / 4.0)) < 1e-5);
}

static void test_softmax_and_activations(void)
{
    float x[3] = {0.0f, logf(2.0f), -INFINITY};
    softmax(x, 3);
    CHECK(fabsf(x[0] - 1.0f / 3) < 1e-6f && fabsf(x[1] - 2.0f / 3) < 1e-6f && x[2] == 0.0f);

    float gate[3] = {1.0f, -2.0f, 0.0f};
    float up[3] = {2.0f, 1.0f, 5.0f};
    float out[3];
    silu_glu(out, gate, up, 3);
    CHECK(fabs(out[0] - 2.0 / (1.0 + exp(-1.0))) < 1e-6);
    CHECK(fabs(out[1] - -2.0 / (1.0 + exp(2.0))) < 1e-6);
    CHECK(out[2] == 0.0f);

    float g2[3] = {10.0f, 1.0f, -3.0f};
    float u2[3] = {-20.0f, 20.0f, 0.5f};
    swiglu_oai(out, g2, u2, 3, 1.702f, 7.0f);
    CHECK(fabs(out[0] - 7.0 / (1.0 + exp(-1.702 * 7.0)) * (-7.0 + 1.0)) < 1e-5);
    CHECK(fabs(out[1] - 1.0 / (1.0 + exp(-1.702)) * 8.0) < 1e-5);
    CHECK(fabs(out[2] - -3.0 / (1.0 + exp(1.702 * 3.0)) * 1.5) < 1e-5);

    float y[2] = {1, 2}, z[2] = {3, 4};
    vector_add(y, z, 2);
    CHECK(y[0] == 4 && y[1] == 6);
    vector_add_scaled(y, z, 0.5f, 2);
    CHECK(y[0] == 5.5f && y[1] == 8);
    vector_scale(y, z, 2.0f, 2);
    CHECK(y[0] == 6 && y[1] == 8);
}

/* Plain double-precision attention for one (token, head), from spec 1.6. */
static void reference_attention(const attention_params *p, const float *k_cache, const float *v_cache,
                                int token, int head, double *out)
{
    int kv_head = head / (p->n_head / p->n_head_kv);
    int position = p->positions[token];
    double scores[256];
    double max = p->sinks ? p->sinks[head] : -INFINITY;
    for (int j = 0; j <= position; j++) {
        scores[j] = -INFINITY;
        if (p->n_swa > 0 && position - j >= p->n_swa)
            continue;
        double s = 0;
        for (int i = 0; i < p->head_dim_k; i++)
            s += (double)p->q[token * p->q_stride + head * p->head_dim_k + i] *
                 k_cache[kv_head * p->k_head_stride + attend_key_index(j, i, p->head_dim_k)];
        scores[j] = s * p->kq_scale;
        if (scores[j] > max)
            max = scores[j];
    }
    double sum = p->sinks ? exp(p->sinks[head] - max) : 0.0;
    for (int j = 0; j <= position; j++)
        sum += exp(scores[j] - max);
    for (int i = 0; i < p->head_dim_v; i++)
        out[i] = 0;
    for (int j = 0; j <= position; j++) {
        double w = exp(scores[j] - max) / sum;
        for (int i = 0; i < p->head_dim_v; i++)
            out[i] += w * v_cache[kv_head * p->v_head_stride + j * p->head_dim_v + i];
    }
}

static void test_attention(void)
{
    enum { N_CTX = 40, H = 4, HKV = 2, DK = 16, DV = 8, T = 5 };
    enum { K_HEAD = 2 * ATTEND_TILE_KEYS * DK }; /* 40 positions round up to 2 tiles of keys */
    CHECK(attend_key_head_elements(N_CTX, DK) == K_HEAD);
    static float k_cache[HKV * K_HEAD], v_cache[N_CTX * HKV * DV];
    static uint16_t k16[HKV * K_HEAD], v16[N_CTX * HKV * DV];
    static float q[T * H * DK], out[T * H * DV], out_threads[T * H * DV], out16[T * H * DV];
    int64_t scratch_per_thread = attention_scratch_floats(N_CTX, DK);
    float *scratch = malloc(4 * (size_t)scratch_per_thread * sizeof(float));
    /* values exactly representable in f16 so both cache types see the same numbers */
    for (int i = 0; i < HKV * K_HEAD; i++) {
        k16[i] = fp32_to_fp16(random_uniform());
        k_cache[i] = fp16_to_fp32(k16[i]);
    }
    for (int i = 0; i < N_CTX * HKV * DV; i++) {
        v16[i] = fp32_to_fp16(random_uniform());
        v_cache[i] = fp16_to_fp32(v16[i]);
    }
    for (int i = 0; i < T * H * DK; i++)
        q[i] = fp16_to_fp32(fp32_to_fp16(2.0f * random_uniform()));
    int32_t positions[T] = {0, 1, 17, 30, 39};
    float sinks[H] = {0.5f, -1.0f, 2.0f, 0.0f};

    /* every kernel set compiled in and usable here: NULL is the scalar set */
    const kernel_set *sets[2] = {NULL, kernels_best()};
    for (int set = 0; set < 2; set++)
        for (int variant = 0; variant < 3; variant++) {
            attention_params p = {
                .n_tokens = T, .positions = positions, .q = q, .q_stride = H * DK,
                .n_head = H, .n_head_kv = HKV, .head_dim_k = DK, .head_dim_v = DV,
                .k_cache = k_cache, .v_cache = v_cache, .cache_f16 = false,
                .k_head_stride = K_HEAD, .v_head_stride = N_CTX * DV,
                .kq_scale = 1.0f / sqrtf((float)DK),
                .n_swa = variant == 1 ? 8 : 0,
                .sinks = variant == 2 ? sinks : NULL,
                .out = out, .out_stride = H * DV,
                .scratch = scratch, .scratch_per_thread = scratch_per_thread,
                .kernels = sets[set],
            };
            attention(NULL, &p);
            double worst = 0;
            for (int t = 0; t < T; t++)
                for (int h = 0; h < H; h++) {
                    double expected[DV];
                    reference_attention(&p, k_cache, v_cache, t, h, expected);
                    for (int i = 0; i < DV; i++) {
                        double d = fabs(expected[i] - out[t * H * DV + h * DV + i]);
                        if (d > worst)
                            worst = d;
                    }
                }
            CHECK_MSG(worst < 1e-5, "attention set %d variant %d differs by %g", set, variant, worst);

            /* the thread split changes nothing */
            bmoe_error err;
            thread_pool *pool = thread_pool_create(3, &err);
            CHECK(pool != NULL);
            p.out = out_threads;
            attention(pool, &p);
            thread_pool_destroy(pool);
            CHECK(memcmp(out, out_threads, sizeof out) == 0);

            /* an f16 cache holding the same values gives the same result up to
             * the accumulation order of the f16 and f32 kernels */
            p.k_cache = k16;
            p.v_cache = v16;
            p.cache_f16 = true;
            p.out = out16;
            attention(NULL, &p);
            worst = 0;
            for (int i = 0; i < T * H * DV; i++)
                if (fabs((double)out[i] - out16[i]) > worst)
                    worst = fabs((double)out[i] - out16[i]);
            CHECK_MSG(worst < 1e-6, "attention set %d variant %d: f16 cache differs by %g", set, variant, worst);
            if (set == 0) /* both scalar kernels sum in the same order */
                CHECK(memcmp(out, out16, sizeof out) == 0);

            /* the f16 cache on threads too */
            pool = thread_pool_create(2, &err);
            CHECK(pool != NULL);
            p.out = out_threads;
            attention(pool, &p);
            thread_pool_destroy(pool);
            CHECK(memcmp(out16, out_threads, sizeof out) == 0);
        }
    free(scratch);
}

/* Long contexts through attention(): tokens at positions 2000..2063 of a
 * 2100-position cache, computed in one call on one thread, then in calls of
 * 7 tokens (the last ones first) on 2 threads and one token per call on 3
 * threads: every output bit the same, for f16 and f32 caches, plain causal
 * and with a sliding window and sinks, with GQA groups of 4 (one job per
 * token and KV head) and of 12 (split in two jobs of 6). */
static void test_attention_long(void)
{
    enum { N_CTX = 2100, FIRST_POSITION = 2000, T = 64, MAX_HEADS = 12, MAX_DIM = 64 };
    static const int shapes[][3] = {{8, 2, 64}, {12, 1, 32}}; /* heads, KV heads, head size */
    size_t cache_elements = (size_t)attend_key_head_elements(N_CTX, MAX_DIM) * 2;
    uint16_t *k16 = malloc(cache_elements * sizeof(uint16_t)), *v16 = malloc(cache_elements * sizeof(uint16_t));
    float *k32 = malloc(cache_elements * sizeof(float)), *v32 = malloc(cache_elements * sizeof(float));
    float *q = malloc((size_t)T * MAX_HEADS * MAX_DIM * sizeof(float));
    float *reference = malloc((size_t)T * MAX_HEADS * MAX_DIM * sizeof(float));
    float *out = malloc((size_t)T * MAX_HEADS * MAX_DIM * sizeof(float));
    int64_t scratch_per_thread = attention_scratch_floats(N_CTX, MAX_DIM);
    float *scratch = malloc(3 * (size_t)scratch_per_thread * sizeof(float));
    for (size_t i = 0; i < cache_elements; i++) {
        k16[i] = fp32_to_fp16(random_uniform());
        k32[i] = fp16_to_fp32(k16[i]);
        v16[i] = fp32_to_fp16(random_uniform());
        v32[i] = fp16_to_fp32(v16[i]);
    }
    for (int i = 0; i < T * MAX_HEADS * MAX_DIM; i++)
        q[i] = 3.0f * random_uniform();
    int32_t positions[T];
    for (int t = 0; t < T; t++)
        positions[t] = FIRST_POSITION + t;
    float sinks[MAX_HEADS];
    for (int h = 0; h < MAX_HEADS; h++)
        sinks[h] = 4.0f * random_uniform();
    bmoe_error err;
    thread_pool *two = thread_pool_create(2, &err), *three = thread_pool_create(3, &err);
    CHECK(two && three);

    for (int shape = 0; shape < 2; shape++)
        for (int f16 = 0; f16 < 2; f16++)
            for (int variant = 0; variant < 2; variant++) {
                int heads = shapes[shape][0], kv_heads = shapes[shape][1], dim = shapes[shape][2];
                attention_params p = {
                    .n_tokens = T, .positions = positions, .q = q, .q_stride = heads * dim,
                    .n_head = heads, .n_head_kv = kv_heads, .head_dim_k = dim, .head_dim_v = dim,
                    .k_cache = f16 ? (const void *)k16 : (const void *)k32,
                    .v_cache = f16 ? (const void *)v16 : (const void *)v32,
                    .k_head_stride = attend_key_head_elements(N_CTX, dim), .v_head_stride = N_CTX * dim,
                    .cache_f16 = f16, .kq_scale = 1.0f / sqrtf((float)dim),
                    .n_swa = variant ? 300 : 0, .sinks = variant ? sinks : NULL,
                    .out = reference, .out_stride = heads * dim,
                    .scratch = scratch, .scratch_per_thread = scratch_per_thread,
                    .kernels = kernels_best(),
                };
                size_t bytes = (size_t)T * heads * dim * sizeof(float);
                attention(NULL, &p);

                /* calls of 7 tokens, the last call first, on 2 threads */
                memset(out, 0, bytes);
                for (int begin = (T - 1) / 7 * 7; begin >= 0; begin -= 7) {
                    attention_params part = p;
                    part.n_tokens = begin + 7 <= T ? 7 : T - begin;
                    part.positions = positions + begin;
                    part.q = q + (int64_t)begin * p.q_stride;
                    part.out = out + (int64_t)begin * p.out_stride;
                    attention(two, &part);
                }
                CHECK_MSG(memcmp(out, reference, bytes) == 0, "shape %d f16 %d variant %d: calls of 7 differ", shape,
                          f16, variant);

                /* one token per call on 3 threads */
                memset(out, 0, bytes);
                for (int t = 0; t < T; t++) {
                    attention_params part = p;
                    part.n_tokens = 1;
                    part.positions = positions + t;
                    part.q = q + (int64_t)t * p.q_stride;
                    part.out = out + (int64_t)t * p.out_stride;
                    attention(three, &part);
                }
                CHECK_MSG(memcmp(out, reference, bytes) == 0, "shape %d f16 %d variant %d: single tokens differ",
                          shape, f16, variant);

                /* the scalar set agrees within float tolerance */
                if (shape == 0 && variant == 1) {
                    p.kernels = NULL;
                    p.out = out;
                    attention(two, &p);
                    double worst = 0;
                    for (int i = 0; i < T * heads * dim; i++)
                        if (fabs((double)out[i] - reference[i]) > worst)
                            worst = fabs((double)out[i] - reference[i]);
                    CHECK_MSG(worst < 5e-6, "f16 %d: scalar and %s sets differ by %g", f16, kernels_best()->name,
                              worst);
                }
            }
    thread_pool_destroy(two);
    thread_pool_destroy(three);
    free(k16);
    free(v16);
    free(k32);
    free(v32);
    free(q);
    free(reference);
    free(out);
    free(scratch);
}

static void test_sigmoid(void)
{
    float x[5] = {0.0f, 2.0f, -2.0f, 30.0f, -30.0f};
    float expected[5];
    for (int i = 0; i < 5; i++)
        expected[i] = (float)(1.0 / (1.0 + exp(-(double)x[i])));
    sigmoid(x, 5);
    for (int i = 0; i < 5; i++)
        CHECK_MSG(fabsf(x[i] - expected[i]) <= 1e-6f * expected[i] + 1e-30f, "sigmoid[%d] = %g, expected %g", i,
                  x[i], expected[i]);
}

/* The f16 GELU (architectures.md 1.8): outputs are f16 values, equal to
 * f16(gelu(f16(z))) computed in double but for the last f16 bit where float
 * and double land on either side of a rounding boundary, and for the
 * negative tail, where 1 + tanh in float cancels to an absolute error of
 * about |z| 2^-24 (the reference's table carries the same); the thresholds. */
static void test_gelu_f16(void)
{
    CHECK(gelu_f16(-10.0f) == 0.0f && gelu_f16(-25.0f) == 0.0f);
    CHECK(gelu_f16(10.0f) == 10.0f && gelu_f16(12.345f) == 12.345f);
    int mismatched = 0;
    for (int i = -4000; i <= 4000; i++) {
        float z = (float)i * 0.00249f;
        float got = gelu_f16(z);
        double x = fp16_to_fp32(fp32_to_fp16(z));
        double exact = 0.5 * x * (1.0 + tanh(0.7978845608 * x * (1.0 + 0.044715 * x * x)));
        float want = fp16_to_fp32(fp32_to_fp16((float)exact));
        CHECK_MSG(fp16_to_fp32(fp32_to_fp16(got)) == got, "gelu_f16(%g) = %g is not an f16 value", z, got);
        if (got != want) {
            mismatched++;
            float ulp = fabsf(want) * (1.0f / 1024.0f) + 1e-6f;
            CHECK_MSG(fabsf(got - want) <= ulp, "gelu_f16(%g) = %g, expected %g", z, got, want);
        }
    }
    CHECK_MSG(mismatched < 800, "%d of 8001 GELU values off by an f16 ulp", mismatched);
    float gate[3] = {1.0f, -1.0f, 0.5f}, up[3] = {2.0f, 3.0f, -1.0f}, out[3];
    gelu_glu_f16(out, gate, up, 3);
    for (int i = 0; i < 3; i++)
        CHECK(out[i] == gelu_f16(gate[i]) * up[i]);
}

/* Causal depthwise convolution: against the whole sequence's convolution in
 * double (zeros before the first input), and bit-identical whatever the
 * split of the tokens over calls, the state carrying the window. */
static void test_causal_conv1d(void)
{
    enum { T = 11, C = 5, L = 4 };
    float in[T][C], taps[C][L], whole[T][C], split[T][C];
    for (int t = 0; t < T; t++)
        for (int c = 0; c < C; c++)
            in[t][c] = random_uniform();
    for (int c = 0; c < C; c++)
        for (int k = 0; k < L; k++)
            taps[c][k] = random_uniform();
    float state[C][L - 1];
    memset(state, 0, sizeof state);
    causal_conv1d(&whole[0][0], C, &in[0][0], C, T, C, &taps[0][0], L, &state[0][0]);
    for (int t = 0; t < T; t++)
        for (int c = 0; c < C; c++) {
            double sum = 0.0;
            for (int k = 0; k < L; k++) {
                int source = t - (L - 1) + k; /* tap 0 multiplies the oldest input */
                sum += source >= 0 ? (double)taps[c][k] * in[source][c] : 0.0;
            }
            CHECK_MSG(fabs(whole[t][c] - sum) < 1e-5, "conv[%d][%d] = %g, expected %g", t, c, whole[t][c], sum);
        }
    /* the state holds the last L-1 inputs, oldest first */
    for (int c = 0; c < C; c++)
        for (int k = 0; k < L - 1; k++)
            CHECK(state[c][k] == in[T - (L - 1) + k][c]);
    static const int pieces[] = {1, 3, 2, 1, 4};
    memset(state, 0, sizeof state);
    int t = 0;
    for (int p = 0; p < 5; p++) {
        causal_conv1d(&split[t][0], C, &in[t][0], C, pieces[p], C, &taps[0][0], L, &state[0][0]);
        t += pieces[p];
    }
    CHECK(t == T && memcmp(whole, split, sizeof whole) == 0);
    /* in place, as the mixers run it */
    memset(state, 0, sizeof state);
    causal_conv1d(&in[0][0], C, &in[0][0], C, T, C, &taps[0][0], L, &state[0][0]);
    CHECK(memcmp(whole, in, sizeof whole) == 0);
}

static void test_l2norm_softplus(void)
{
    float x[3] = {3.0f, 0.0f, -4.0f};
    l2norm(x, 3, 1e-6f);
    CHECK(fabsf(x[0] - 0.6f) < 1e-7f && x[1] == 0.0f && fabsf(x[2] + 0.8f) < 1e-7f);
    /* below eps the norm is eps: a tiny vector is scaled by 1/eps, not blown up to length 1 */
    float tiny[2] = {3e-8f, 4e-8f};
    l2norm(tiny, 2, 1e-6f);
    CHECK(fabsf(tiny[0] - 0.03f) < 1e-6f && fabsf(tiny[1] - 0.04f) < 1e-6f);
    CHECK(fabsf(softplus(0.0f) - logf(2.0f)) < 1e-7f);
    CHECK(fabsf(softplus(-5.0f) - (float)log1p(exp(-5.0))) < 1e-7f);
    CHECK(softplus(25.0f) == 25.0f);
    CHECK(fabsf(softplus(19.0f) - 19.0f) < 1e-5f);
}

/* Gated DeltaNet recurrence against the formulas of architectures.md 8.4 in
 * double over a few tokens. */
static void test_deltanet_step(void)
{
    enum { DK = 6, DV = 5, T = 4 };
    float state[DK * DV] = {0};
    double reference[DK][DV] = {{0}};
    for (int t = 0; t < T; t++) {
        float q[DK], k[DK], v[DV], out[DV];
        for (int a = 0; a < DK; a++) {
            q[a] = random_uniform();
            k[a] = random_uniform();
        }
        for (int b = 0; b < DV; b++)
            v[b] = random_uniform();
        float beta = 0.5f + 0.1f * (float)t, decay = 0.9f - 0.1f * (float)t;
        deltanet_step(state, q, k, v, beta, decay, DK, DV, out);
        double delta[DV];
        for (int b = 0; b < DV; b++) {
            double sk = 0.0;
            for (int a = 0; a < DK; a++) {
                reference[a][b] *= decay;
                sk += reference[a][b] * k[a];
            }
            delta[b] = (v[b] - sk) * beta;
        }
        for (int b = 0; b < DV; b++) {
            double o = 0.0;
            for (int a = 0; a < DK; a++) {
                reference[a][b] += (double)k[a] * delta[b];
                o += reference[a][b] * q[a];
            }
            o /= sqrt((double)DK);
            CHECK_MSG(fabs(out[b] - o) < 1e-5, "token %d: out[%d] = %g, expected %g", t, b, out[b], o);
        }
        for (int a = 0; a < DK; a++)
            for (int b = 0; b < DV; b++)
                CHECK(fabs(state[a * DV + b] - reference[a][b]) < 1e-5);
    }
}

int main(void)
{
    test_l2norm_softplus();
    test_deltanet_step();
    test_sigmoid();
    test_gelu_f16();
    test_causal_conv1d();
    test_rmsnorm();
    test_rope();
    test_softmax_and_activations();
    test_attention();
    test_attention_long();
    return test_finish();
}
