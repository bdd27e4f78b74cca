/* Helpers of the streaming tests: generate models with bmoe-mkmodel, run a
 * fixed greedy workload (a prompt prefilled with every row's logits, then
 * decode steps with each step's logits) under given parameters, and keep
 * everything it produced for byte comparison. Header-only. */
#ifndef BMOE_TESTS_STREAM_SUPPORT_H
#define BMOE_TESTS_STREAM_SUPPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bmoe.h"
#include "test.h"

#define WORKLOAD_PROMPT 40
#define WORKLOAD_STEPS 12

typedef struct workload_result {
    bool ok;
    char error[BMOE_ERROR_MAX + 16];
    float *logits;           /* prompt rows, then one row per step */
    int n_rows, n_vocab;
    int32_t tokens[WORKLOAD_STEPS];
    bmoe_stats prefill, decode;
} workload_result;

static inline void workload_free(workload_result *r)
{
    free(r->logits);
    memset(r, 0, sizeof *r);
}

/* The test's scratch directory, name under the tests' temporary one. */
static inline void stream_test_dir(char *dir, size_t size, const char *name)
{
    snprintf(dir, size, "%s/%s", test_tmp_dir(), name);
    mkdir(dir, 0755);
}

/* Writes a model with bmoe-mkmodel ARGS into path (once per test run). */
static inline bool stream_make_model(const char *path, const char *args)
{
    char command[2048];
    snprintf(command, sizeof command, "'%s/bmoe-mkmodel' --quiet %s -o '%s' > /dev/null", BMOE_BIN_DIR, args, path);
    int status = system(command);
    CHECK_MSG(status == 0, "mkmodel %s failed (%d)", args, status);
    return status == 0;
}

/* The prompt: ids spread over the vocabulary. */
static inline void workload_prompt(int32_t *ids, int n_vocab)
{
    for (int i = 0; i < WORKLOAD_PROMPT; i++)
        ids[i] = (int32_t)((i * 37 + 11) % n_vocab);
}

/* Runs the workload generations times on context (the later ones reuse the
 * warm cache and start from an empty KV cache); the result is the last. */
static inline void workload_run_on(bmoe_context *context, int generations, workload_result *r)
{
    memset(r, 0, sizeof *r);
    bmoe_error error = {0};
    r->n_vocab = bmoe_model_n_vocab(bmoe_context_model(context));
    r->n_rows = WORKLOAD_PROMPT + WORKLOAD_STEPS;
    r->logits = calloc((size_t)r->n_rows * (size_t)r->n_vocab, sizeof(float));
    int32_t prompt[WORKLOAD_PROMPT];
    workload_prompt(prompt, r->n_vocab);
    bool ok = r->logits != NULL;
    for (int g = 0; ok && g < generations; g++) {
        bmoe_context_truncate(context, 0);
        memset(&r->prefill, 0, sizeof r->prefill);
        memset(&r->decode, 0, sizeof r->decode);
        /* the prompt's rows in one prefill */
        ok = bmoe_eval(context, prompt, WORKLOAD_PROMPT, r->logits, true, &r->prefill, &error) == 0;
        int32_t next = 0;
        for (int s = 0; ok && s < WORKLOAD_STEPS; s++) {
            const float *row = r->logits + (size_t)(WORKLOAD_PROMPT - 1 + s) * (size_t)r->n_vocab;
            next = 0;
            for (int v = 1; v < r->n_vocab; v++)
                if (row[v] > row[next])
                    next = v;
            r->tokens[s] = next;
            bmoe_stats step;
            ok = bmoe_eval(context, &next, 1, r->logits + (size_t)(WORKLOAD_PROMPT + s) * (size_t)r->n_vocab, false,
                           &step, &error) == 0;
            bmoe_stats_add(&r->decode, &step);
        }
    }
    if (!ok)
        snprintf(r->error, sizeof r->error, "%s", error.message);
    r->ok = ok;
}

/* A context of the workload's size on model (NULL with error filled). */
static inline bmoe_context *workload_context(bmoe_model *model, int n_threads, bmoe_error *error)
{
    bmoe_context_params context_params = bmoe_context_default_params();
    context_params.n_ctx = 128;
    context_params.n_ubatch = 16;
    context_params.n_threads = n_threads;
    return bmoe_context_create(model, &context_params, error);
}

/* Loads the model at path with params and runs the workload generations
 * times on one context of it. */
static inline void workload_run(const char *path, const bmoe_model_params *params, int n_threads, int generations,
                                workload_result *r)
{
    memset(r, 0, sizeof *r);
    bmoe_error error = {0};
    bmoe_model *model = bmoe_model_load(path, params, &error);
    if (!model) {
        snprintf(r->error, sizeof r->error, "load: %s", error.message);
        return;
    }
    bmoe_context *context = workload_context(model, n_threads, &error);
    if (context)
        workload_run_on(context, generations, r);
    else
        snprintf(r->error, sizeof r->error, "context: %s", error.message);
    bmoe_context_free(context);
    bmoe_model_free(model);
}

/* Byte equality of two workloads' logits and tokens. */
static inline bool workload_same(const workload_result *a, const workload_result *b)
{
    return a->ok && b->ok && a->n_rows == b->n_rows && a->n_vocab == b->n_vocab &&
           memcmp(a->tokens, b->tokens, sizeof a->tokens) == 0 &&
           memcmp(a->logits, b->logits, sizeof(float) * (size_t)a->n_rows * (size_t)a->n_vocab) == 0;
}

#endif
