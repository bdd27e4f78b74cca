/* A model serves several contexts (bmoe.h), each on its own thread: on a
 * streamed model they share one expert cache, and every context's logits
 * and tokens stay byte-identical to the resident run's while the others
 * evaluate at the same time (with a cache too small for one token, every
 * layer evicts what another context may be about to use); on the resident
 * model too. */
#include <pthread.h>

#include "stream_support.h"

#define CONTEXTS 3
/* Sanitized: one generation on the warm cache after the first; a third
 * repeats the second's paths. */
#define GENERATIONS (TEST_SANITIZED ? 2 : 3)

typedef struct context_run {
    bmoe_context *context;
    workload_result result;
} context_run;

static void *run_context(void *user)
{
    context_run *run = user;
    workload_run_on(run->context, GENERATIONS, &run->result);
    return NULL;
}

/* cache_mb -2: the resident model */
static void check_concurrent(const char *path, const workload_result *reference, int64_t cache_mb, bool overlap)
{
    bmoe_model_params params = bmoe_model_default_params();
    params.stream.auto_enable = false;
    params.stream.enabled = cache_mb != -2;
    params.stream.cache_mb = cache_mb;
    params.stream.overlap = overlap;
    params.stream.io_threads = 4;
    bmoe_error error = {0};
    bmoe_model *model = bmoe_model_load(path, &params, &error);
    CHECK_MSG(model != NULL, "load: %s", error.message);
    if (!model)
        return;
    context_run runs[CONTEXTS];
    memset(runs, 0, sizeof runs);
    pthread_t threads[CONTEXTS];
    bool started[CONTEXTS] = {false};
    for (int i = 0; i < CONTEXTS; i++) {
        runs[i].context = workload_context(model, 1, &error);
        CHECK_MSG(runs[i].context != NULL, "context %d: %s", i, error.message);
    }
    for (int i = 0; i < CONTEXTS; i++)
        if (runs[i].context)
            started[i] = pthread_create(&threads[i], NULL, run_context, &runs[i]) == 0;
    for (int i = 0; i < CONTEXTS; i++) {
        if (started[i])
            pthread_join(threads[i], NULL);
        if (!runs[i].context)
            continue;
        CHECK_MSG(runs[i].result.ok, "cache %lld MiB%s, context %d: %s", (long long)cache_mb,
                  overlap ? ", overlap" : "", i, runs[i].result.error);
        CHECK_MSG(workload_same(&runs[i].result, reference),
                  "cache %lld MiB%s, context %d: logits or tokens differ from the resident run's", (long long)cache_mb,
                  overlap ? ", overlap" : "", i);
        workload_free(&runs[i].result);
        bmoe_context_free(runs[i].context);
    }
    bmoe_model_free(model);
}

int main(void)
{
    char dir[1100], path[1200];
    stream_test_dir(dir, sizeof dir, "stream-contexts");
    snprintf(path, sizeof path, "%s/qwen3moe.gguf", dir);
    if (!stream_make_model(path, "--shape tiny-qwen3moe --experts 32 --expert-ff 512 --type q4_k_m --fill blocks "
                                 "--seed 3"))
        return test_finish();
    bmoe_model_params resident = bmoe_model_default_params();
    resident.stream.auto_enable = false;
    workload_result reference;
    workload_run(path, &resident, 1, 1, &reference);
    CHECK_MSG(reference.ok, "resident: %s", reference.error);
    if (reference.ok) {
        check_concurrent(path, &reference, -2, false);
        check_concurrent(path, &reference, 1, false);
        check_concurrent(path, &reference, 1, true);
        check_concurrent(path, &reference, 0, true);
        check_concurrent(path, &reference, 64, true);
    }
    workload_free(&reference);
    return test_finish();
}
