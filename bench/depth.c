/* bench-depth: decode speed at a long context against decode at the start
 * of one, in one process. Two contexts share the model: one holds a prompt
 * of DEPTH token ids, the other a single id. The rounds alternate between
 * them (shallow, deep, deep, shallow, ...: a drift that is linear in time
 * cancels), each round going back to its context's start (truncate) and
 * decoding TOKENS greedy tokens. The machine's speed drifts by tens of
 * percent within minutes; two runs of bmoe-cli minutes apart (the long
 * prompt's prefill alone takes a minute) compare those minutes, this
 * compares the depths. A benchmark, not a test: it prints figures and checks
 * nothing.
 *
 * Usage: bench-depth MODEL [depth, default 2048] [rounds, default 8]
 *        [tokens per round, default 16] [threads, default 2] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bmoe.h"

enum { MAX_ROUNDS = 64 };

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *values, int n)
{
    qsort(values, (size_t)n, sizeof *values, compare_doubles);
    return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

static int argmax(const float *row, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (row[i] > row[best])
            best = i;
    return best;
}

/* Decodes tokens greedy steps after the context's first `start` positions
 * (the rest forgotten); returns tokens per second, or -1 (message printed). */
static double decode_round(bmoe_context *context, int32_t start, int tokens, float *logits, int32_t first_token)
{
    bmoe_error error = {0};
    int32_t n_vocab = bmoe_model_n_vocab(bmoe_context_model(context));
    bmoe_context_truncate(context, start);
    int32_t token = first_token;
    double begin = now_seconds();
    for (int i = 0; i < tokens; i++) {
        if (bmoe_eval(context, &token, 1, logits, false, NULL, &error) != 0) {
            fprintf(stderr, "bench-depth: decode: %s\n", error.message);
            return -1;
        }
        token = argmax(logits, n_vocab);
    }
    return tokens / (now_seconds() - begin);
}

static bmoe_context *context_with(bmoe_model *model, int32_t n_ctx, int threads, const int32_t *ids, int32_t n,
                                  float *logits)
{
    bmoe_error error = {0};
    bmoe_context_params params = bmoe_context_default_params();
    params.n_ctx = n_ctx;
    params.n_threads = threads;
    params.swa_cache = BMOE_SWA_FULL; /* each round cuts back to its depth: a ring would replay the prefix */
    bmoe_context *context = bmoe_context_create(model, &params, &error);
    if (!context) {
        fprintf(stderr, "bench-depth: context: %s\n", error.message);
        return NULL;
    }
    if (bmoe_eval(context, ids, n, logits, false, NULL, &error) != 0) {
        fprintf(stderr, "bench-depth: prompt: %s\n", error.message);
        bmoe_context_free(context);
        return NULL;
    }
    return context;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench-depth MODEL [depth] [rounds] [tokens per round] [threads]\n");
        return 2;
    }
    int depth = argc > 2 ? atoi(argv[2]) : 2048;
    int rounds = argc > 3 ? atoi(argv[3]) : 8;
    int tokens = argc > 4 ? atoi(argv[4]) : 16;
    int threads = argc > 5 ? atoi(argv[5]) : 2;
    if (depth < 2 || depth > 1 << 20 || rounds < 1 || rounds > MAX_ROUNDS || tokens < 1 || tokens > 4096 ||
        threads < 1 || threads > 256) {
        fprintf(stderr, "bench-depth: depth 2.., rounds 1..%d, tokens 1..4096, threads 1..256\n", MAX_ROUNDS);
        return 2;
    }

    bmoe_error error = {0};
    bmoe_model *model = bmoe_model_load(argv[1], NULL, &error);
    if (!model) {
        fprintf(stderr, "bench-depth: %s\n", error.message);
        return 1;
    }
    int32_t n_vocab = bmoe_model_n_vocab(model);
    float *logits = malloc(sizeof(float) * (size_t)n_vocab);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)depth);
    if (!logits || !ids)
        return 1;
    /* the benchmarks' usual fixed ids, kept inside the vocabulary */
    for (int i = 0; i < depth; i++)
        ids[i] = (int32_t)((1000 + (int64_t)i * 7919 % 140000) % n_vocab);

    double start = now_seconds();
    bmoe_context *deep = context_with(model, depth + tokens + 8, threads, ids, depth, logits);
    double prefill = now_seconds() - start;
    int32_t deep_next = argmax(logits, n_vocab);
    bmoe_context *shallow = deep ? context_with(model, tokens + 8, threads, ids, 1, logits) : NULL;
    if (!shallow)
        return 1;
    int32_t shallow_next = argmax(logits, n_vocab);

    printf("# bench-depth\n\n%s, %d threads: prefill of %d ids %.1f s; %d rounds of %d decode tokens at "
           "depth 1 and at depth %d, alternated\n\n",
           argv[1], threads, depth, prefill, rounds, tokens, depth);
    printf("| round | depth 1 tok/s | depth %d tok/s | slower by |\n|---:|---:|---:|---:|\n", depth);
    double shallow_rate[MAX_ROUNDS], deep_rate[MAX_ROUNDS], slowdown[MAX_ROUNDS];
    for (int r = 0; r < rounds; r++) {
        /* ABBA: even rounds shallow first, odd rounds deep first */
        if (r % 2 == 0) {
            shallow_rate[r] = decode_round(shallow, 1, tokens, logits, shallow_next);
            deep_rate[r] = decode_round(deep, depth, tokens, logits, deep_next);
        } else {
            deep_rate[r] = decode_round(deep, depth, tokens, logits, deep_next);
            shallow_rate[r] = decode_round(shallow, 1, tokens, logits, shallow_next);
        }
        if (shallow_rate[r] < 0 || deep_rate[r] < 0)
            return 1;
        slowdown[r] = 100 * (1 - deep_rate[r] / shallow_rate[r]);
        printf("| %d | %.2f | %.2f | %.1f %% |\n", r + 1, shallow_rate[r], deep_rate[r], slowdown[r]);
        fflush(stdout);
    }
    double s = median(shallow_rate, rounds), d = median(deep_rate, rounds), x = median(slowdown, rounds);
    printf("\nmedians: depth 1 %.2f tok/s, depth %d %.2f tok/s; per round, depth %d is slower by %.1f %% "
           "(median of the rounds' own ratios)\n",
           s, depth, d, depth, x);
    bmoe_context_free(shallow);
    bmoe_context_free(deep);
    bmoe_model_free(model);
    free(logits);
    free(ids);
    return 0;
}
