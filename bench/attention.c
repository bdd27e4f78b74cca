/* bench-attention: decode attention time per token on the Qwen3-30B-A3B
 * attention shape (48 layers, 32 query heads, 4 KV heads, head dim 128, f16
 * KV cache) at depths 0, 512 and 2048, for the engine's attention (the kernel
 * set's tiled attend) and for the row-at-a-time path it replaced (per query
 * head: one dot_rows over the visible keys, a scalar expf softmax, one axpy
 * over the values), written out here as the baseline. A benchmark, never a
 * test: it prints a markdown table and checks nothing.
 *
 * Each layer has its own cache, so a token streams 48 layers' keys and values
 * as decode does (at depth 2048 that is 200 MB: on a machine with a large L3
 * part of it stays in cache, as it would in the engine). The machine may be
 * shared: the two paths are timed alternately, a token of one then a token of
 * the other, and the table gives the median ratio of the pairs and its
 * spread (min..max), which the noise of other processes moves much less than
 * the absolute times.
 *
 * Two more tables: the attention of a 512-token prefill (positions 0..511 in
 * one batch), per token; and the elementwise ops of a decode step (SiLU-GLU
 * of 8 experts x 768, RMSNorm of 2048, the router's softmax of 128) against
 * the scalar libm-expf loops they replaced, written out here too.
 *
 * Usage: bench-attention [rounds, default 15] [threads, default 1]
 * BMOE_ISA=scalar|avx2|avx512|neon picks the kernel set (kernels.h). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/fp16.h"
#include "kernels/kernels.h"
#include "kernels/matmul.h"
#include "kernels/thread_pool.h"
#include "ops/ops.h"

enum { LAYERS = 48, HEADS = 32, KV_HEADS = 4, HEAD_DIM = 128, MAX_ROUNDS = 200 };

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t random_state = 0x243f6a8885a308d3ull;

static float random_float(void) /* in [-1, 1) */
{
    random_state ^= random_state << 13;
    random_state ^= random_state >> 7;
    random_state ^= random_state << 17;
    return (float)((double)(random_state >> 11) / 9007199254740992.0 * 2 - 1);
}

/* ---- the row-at-a-time baseline ---- */

typedef struct baseline_run {
    const attention_params *params;
    dot_rows_fn dot;
    axpy_fn axpy;
} baseline_run;

static void baseline_head(const baseline_run *run, int token, int head, float *scratch)
{
    const attention_params *p = run->params;
    int kv_head = head / (p->n_head / p->n_head_kv);
    int32_t count = p->positions[token] + 1;
    size_t k_row_bytes = (size_t)p->n_head_kv * (size_t)p->head_dim_k * 2;
    size_t v_row_bytes = (size_t)p->n_head_kv * (size_t)p->head_dim_v * 2;
    float *scores = scratch;
    void *query = scratch + (p->scratch_per_thread - p->head_dim_k);
    activation_convert(p->kernels, TYPE_F16, p->q + (int64_t)token * p->q_stride + (int64_t)head * p->head_dim_k,
                       p->head_dim_k, query);
    const uint8_t *k = (const uint8_t *)p->k_cache + (size_t)kv_head * (size_t)p->head_dim_k * 2;
    run->dot(p->head_dim_k, k, k_row_bytes, count, query, scores);
    float max = -INFINITY;
    for (int32_t j = 0; j < count; j++) {
        scores[j] *= p->kq_scale;
        if (scores[j] > max)
            max = scores[j];
    }
    double sum = 0.0;
    for (int32_t j = 0; j < count; j++) {
        scores[j] = expf(scores[j] - max);
        sum += scores[j];
    }
    float inverse = (float)(1.0 / sum);
    for (int32_t j = 0; j < count; j++)
        scores[j] *= inverse;
    float *out = p->out + (int64_t)token * p->out_stride + (int64_t)head * p->head_dim_v;
    memset(out, 0, (size_t)p->head_dim_v * sizeof(float));
    const uint8_t *v = (const uint8_t *)p->v_cache + (size_t)kv_head * (size_t)p->head_dim_v * 2;
    run->axpy(p->head_dim_v, count, scores, v, v_row_bytes, out);
}

static void baseline_task(void *context, int thread_index, int n_threads)
{
    const baseline_run *run = context;
    const attention_params *p = run->params;
    int64_t n_items = (int64_t)p->n_tokens * p->n_head;
    float *scratch = p->scratch + (int64_t)thread_index * p->scratch_per_thread;
    for (int64_t item = n_items * thread_index / n_threads; item < n_items * (thread_index + 1) / n_threads; item++)
        baseline_head(run, (int)(item / p->n_head), (int)(item % p->n_head), scratch);
}

static void baseline_attention(thread_pool *pool, const attention_params *params)
{
    baseline_run run = {
        .params = params,
        .dot = kernels_dot_rows(params->kernels, TYPE_F16),
        .axpy = kernels_axpy(params->kernels, TYPE_F16),
    };
    thread_pool_run(pool, baseline_task, &run);
}

/* ---- the elementwise loops the kernels replaced ---- */

static void baseline_silu_glu(float *out, const float *gate, const float *up, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float g = gate[i];
        out[i] = (g / (1.0f + expf(-g))) * up[i];
    }
}

static void baseline_rmsnorm(float *out, const float *x, const float *weight, int64_t n, float eps)
{
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        float square = x[i] * x[i];
        sum += square;
    }
    float scale = 1.0f / sqrtf((float)(sum / (double)n) + eps);
    for (int64_t i = 0; i < n; i++)
        out[i] = (x[i] * scale) * weight[i];
}

static void baseline_softmax(float *x, int64_t n)
{
    float max = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        if (x[i] > max)
            max = x[i];
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += x[i];
    }
    float inverse = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++)
        x[i] *= inverse;
}

/* ---- timing ---- */

typedef struct bench_state {
    uint16_t *k_cache, *v_cache; /* [LAYERS] of KV_HEADS x n_ctx x HEAD_DIM: the engine's format (kernels.h) */
    int n_ctx;
    float *q, *out;
    float *scratch;
    int64_t scratch_per_thread;
    const kernel_set *kernels;
    thread_pool *pool;
} bench_state;

/* Seconds for one token at position depth through every layer. */
static double time_token(bench_state *b, int depth, int baseline)
{
    int32_t position = depth;
    size_t layer_elements = (size_t)b->n_ctx * KV_HEADS * HEAD_DIM;
    double start = now_seconds();
    for (int layer = 0; layer < LAYERS; layer++) {
        attention_params params = {
            .n_tokens = 1,
            .positions = &position,
            .q = b->q + (size_t)layer * HEADS * HEAD_DIM,
            .q_stride = HEADS * HEAD_DIM,
            .n_head = HEADS,
            .n_head_kv = KV_HEADS,
            .head_dim_k = HEAD_DIM,
            .head_dim_v = HEAD_DIM,
            .k_cache = b->k_cache + (size_t)layer * layer_elements,
            .v_cache = b->v_cache + (size_t)layer * layer_elements,
            .k_head_stride = attend_key_head_elements(b->n_ctx, HEAD_DIM),
            .v_head_stride = (int64_t)b->n_ctx * HEAD_DIM,
            .cache_f16 = true,
            .kq_scale = 1.0f / sqrtf((float)HEAD_DIM),
            .out = b->out,
            .out_stride = HEADS * HEAD_DIM,
            .scratch = b->scratch,
            .scratch_per_thread = b->scratch_per_thread,
            .kernels = b->kernels,
        };
        if (baseline)
            baseline_attention(b->pool, &params);
        else
            attention(b->pool, &params);
    }
    return now_seconds() - start;
}

/* Seconds per token for a prefill of n_tokens at positions 0..n_tokens-1
 * through every layer. */
static double time_prefill(bench_state *b, int n_tokens, const int32_t *positions, const float *q, float *out,
                           int baseline)
{
    size_t layer_elements = (size_t)b->n_ctx * KV_HEADS * HEAD_DIM;
    double start = now_seconds();
    for (int layer = 0; layer < LAYERS; layer++) {
        attention_params params = {
            .n_tokens = n_tokens,
            .positions = positions,
            .q = q,
            .q_stride = HEADS * HEAD_DIM,
            .n_head = HEADS,
            .n_head_kv = KV_HEADS,
            .head_dim_k = HEAD_DIM,
            .head_dim_v = HEAD_DIM,
            .k_cache = b->k_cache + (size_t)layer * layer_elements,
            .v_cache = b->v_cache + (size_t)layer * layer_elements,
            .k_head_stride = attend_key_head_elements(b->n_ctx, HEAD_DIM),
            .v_head_stride = (int64_t)b->n_ctx * HEAD_DIM,
            .cache_f16 = true,
            .kq_scale = 1.0f / sqrtf((float)HEAD_DIM),
            .out = out,
            .out_stride = HEADS * HEAD_DIM,
            .scratch = b->scratch,
            .scratch_per_thread = b->scratch_per_thread,
            .kernels = b->kernels,
        };
        if (baseline)
            baseline_attention(b->pool, &params);
        else
            attention(b->pool, &params);
    }
    return (now_seconds() - start) / n_tokens;
}

/* Microseconds per call of one elementwise op, old (which = 0) or new, over
 * repeats calls. */
enum { SILU_N = 8 * 768, NORM_N = 2048, ROUTER_N = 128 };

static double time_elementwise(int op, int which, float *x, float *y, float *out, int repeats)
{
    const kernel_set *set = kernels_best();
    double start = now_seconds();
    for (int r = 0; r < repeats; r++) {
        if (op == 0) {
            if (which)
                kernels_silu_glu(set)(out, x, y, SILU_N);
            else
                baseline_silu_glu(out, x, y, SILU_N);
        } else if (op == 1) {
            if (which)
                kernels_rmsnorm(set)(out, x, y, NORM_N, 1e-6f);
            else
                baseline_rmsnorm(out, x, y, NORM_N, 1e-6f);
        } else {
            memcpy(out, x, ROUTER_N * sizeof(float));
            if (which)
                kernels_softmax(set)(out, ROUTER_N);
            else
                baseline_softmax(out, ROUTER_N);
        }
    }
    return (now_seconds() - start) / repeats * 1e6;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 15;
    int threads = argc > 2 ? atoi(argv[2]) : 1;
    if (rounds < 1 || rounds > MAX_ROUNDS || threads < 1 || threads > 64) {
        fprintf(stderr, "bench-attention: usage: bench-attention [rounds 1..%d] [threads 1..64]\n", MAX_ROUNDS);
        return 2;
    }
    static const int depths[] = {0, 512, 2048};
    enum { N_DEPTHS = 3 };
    bench_state b = {.n_ctx = 2080, .kernels = kernels_best()}; /* depth 2048, whole tiles of keys */
    bmoe_error err;
    b.pool = thread_pool_create(threads, &err);
    size_t cache_elements = (size_t)LAYERS * (size_t)b.n_ctx * KV_HEADS * HEAD_DIM;
    b.k_cache = malloc(cache_elements * sizeof(uint16_t));
    b.v_cache = malloc(cache_elements * sizeof(uint16_t));
    b.q = malloc((size_t)LAYERS * HEADS * HEAD_DIM * sizeof(float));
    b.out = malloc((size_t)HEADS * HEAD_DIM * sizeof(float));
    b.scratch_per_thread = attention_scratch_floats(b.n_ctx, HEAD_DIM);
    b.scratch = malloc((size_t)threads * (size_t)b.scratch_per_thread * sizeof(float));
    if (!b.pool || !b.k_cache || !b.v_cache || !b.q || !b.out || !b.scratch) {
        fprintf(stderr, "bench-attention: out of memory or threads\n");
        return 1;
    }
    /* keys and queries of a few units so the softmax is neither flat nor one-hot */
    for (size_t i = 0; i < cache_elements; i++) {
        b.k_cache[i] = fp32_to_fp16(2.0f * random_float());
        b.v_cache[i] = fp32_to_fp16(random_float());
    }
    for (size_t i = 0; i < (size_t)LAYERS * HEADS * HEAD_DIM; i++)
        b.q[i] = 2.0f * random_float();

    printf("# bench-attention\n\n");
    printf("kernel set: %s; %d thread(s); Qwen3-30B-A3B attention: %d layers, %d/%d heads of %d, f16 KV; "
           "%d alternating rounds per depth\n\n",
           b.kernels->name, threads, LAYERS, HEADS, KV_HEADS, HEAD_DIM, rounds);
    printf("| depth | row-at-a-time ms/token (median) | tiled ms/token (median) | speed-up median | "
           "speed-up min..max |\n");
    printf("|---:|---:|---:|---:|---:|\n");
    for (int d = 0; d < N_DEPTHS; d++) {
        double old_ms[MAX_ROUNDS], new_ms[MAX_ROUNDS], ratio[MAX_ROUNDS];
        time_token(&b, depths[d], 1); /* warm-up: caches, page faults, thread wake-up */
        time_token(&b, depths[d], 0);
        for (int r = 0; r < rounds; r++) {
            /* alternate which path goes first, so neither always follows the other */
            if (r % 2 == 0) {
                old_ms[r] = time_token(&b, depths[d], 1) * 1e3;
                new_ms[r] = time_token(&b, depths[d], 0) * 1e3;
            } else {
                new_ms[r] = time_token(&b, depths[d], 0) * 1e3;
                old_ms[r] = time_token(&b, depths[d], 1) * 1e3;
            }
            ratio[r] = old_ms[r] / new_ms[r];
        }
        qsort(old_ms, (size_t)rounds, sizeof(double), compare_doubles);
        qsort(new_ms, (size_t)rounds, sizeof(double), compare_doubles);
        qsort(ratio, (size_t)rounds, sizeof(double), compare_doubles);
        printf("| %d | %.3f | %.3f | %.2fx | %.2f..%.2fx |\n", depths[d], old_ms[rounds / 2], new_ms[rounds / 2],
               ratio[rounds / 2], ratio[0], ratio[rounds - 1]);
        fflush(stdout);
    }

    /* prefill: 512 tokens in one batch from position 0 */
    enum { PREFILL = 512 };
    int32_t positions[PREFILL];
    for (int t = 0; t < PREFILL; t++)
        positions[t] = t;
    float *prefill_q = malloc((size_t)PREFILL * HEADS * HEAD_DIM * sizeof(float));
    float *prefill_out = malloc((size_t)PREFILL * HEADS * HEAD_DIM * sizeof(float));
    if (!prefill_q || !prefill_out)
        return 1;
    for (size_t i = 0; i < (size_t)PREFILL * HEADS * HEAD_DIM; i++)
        prefill_q[i] = 2.0f * random_float();
    printf("\n| prefill | row-at-a-time ms/token (median) | tiled ms/token (median) | speed-up median | "
           "speed-up min..max |\n");
    printf("|---|---:|---:|---:|---:|\n");
    {
        int prefill_rounds = rounds < 5 ? rounds : 5;
        double old_ms[MAX_ROUNDS], new_ms[MAX_ROUNDS], ratio[MAX_ROUNDS];
        for (int r = 0; r < prefill_rounds; r++) {
            if (r % 2 == 0) {
                old_ms[r] = time_prefill(&b, PREFILL, positions, prefill_q, prefill_out, 1) * 1e3;
                new_ms[r] = time_prefill(&b, PREFILL, positions, prefill_q, prefill_out, 0) * 1e3;
            } else {
                new_ms[r] = time_prefill(&b, PREFILL, positions, prefill_q, prefill_out, 0) * 1e3;
                old_ms[r] = time_prefill(&b, PREFILL, positions, prefill_q, prefill_out, 1) * 1e3;
            }
            ratio[r] = old_ms[r] / new_ms[r];
        }
        qsort(old_ms, (size_t)prefill_rounds, sizeof(double), compare_doubles);
        qsort(new_ms, (size_t)prefill_rounds, sizeof(double), compare_doubles);
        qsort(ratio, (size_t)prefill_rounds, sizeof(double), compare_doubles);
        printf("| %d tokens from 0 | %.3f | %.3f | %.2fx | %.2f..%.2fx |\n", PREFILL, old_ms[prefill_rounds / 2],
               new_ms[prefill_rounds / 2], ratio[prefill_rounds / 2], ratio[0], ratio[prefill_rounds - 1]);
    }
    free(prefill_q);
    free(prefill_out);

    /* elementwise ops of a decode step, one thread */
    static float x[SILU_N], y[SILU_N], out[SILU_N];
    for (int i = 0; i < SILU_N; i++) {
        x[i] = 4.0f * random_float();
        y[i] = random_float();
    }
    static const char *names[] = {"silu_glu 8 x 768", "rmsnorm 2048", "softmax 128"};
    printf("\n| op (%s) | libm-expf loop us/call (median) | kernel us/call (median) | speed-up median | "
           "speed-up min..max |\n", b.kernels->name);
    printf("|---|---:|---:|---:|---:|\n");
    for (int op = 0; op < 3; op++) {
        double old_us[MAX_ROUNDS], new_us[MAX_ROUNDS], ratio[MAX_ROUNDS];
        for (int r = 0; r < rounds; r++) {
            old_us[r] = time_elementwise(op, 0, x, y, out, 2000);
            new_us[r] = time_elementwise(op, 1, x, y, out, 2000);
            ratio[r] = old_us[r] / new_us[r];
        }
        qsort(old_us, (size_t)rounds, sizeof(double), compare_doubles);
        qsort(new_us, (size_t)rounds, sizeof(double), compare_doubles);
        qsort(ratio, (size_t)rounds, sizeof(double), compare_doubles);
        printf("| %s | %.3f | %.3f | %.2fx | %.2f..%.2fx |\n", names[op], old_us[rounds / 2], new_us[rounds / 2],
               ratio[rounds / 2], ratio[0], ratio[rounds - 1]);
    }
    thread_pool_destroy(b.pool);
    free(b.k_cache);
    free(b.v_cache);
    free(b.q);
    free(b.out);
    free(b.scratch);
    return 0;
}
