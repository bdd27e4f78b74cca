/* route --profile: an expert profile built from a route trace, so that a
 * profile can ship beside a model. The counts are the expert cache's own
 * frequency policy run over the trace's routings on the store's clock (one
 * tick per layer a step passes, each expert counted once per tick, as one
 * acquire counts it), so a decode's trace gives the profile the run that
 * recorded it would have written. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze.h"
#include "cache_policy.h"
#include "expert_profile.h"
#include "gguf/gguf.h"

/* The model's (layers, experts): the store's key space. -1 with a message. */
static int model_shape(const gguf_model *model, const char *path, int64_t *n_layer, int64_t *n_expert)
{
    gguf_string arch;
    if (!gguf_get_string(model, "general.architecture", &arch) || arch.length == 0 || arch.length > 64) {
        analyze_error("%s: no general.architecture", path);
        return -1;
    }
    char key[128];
    snprintf(key, sizeof key, "%.*s.block_count", (int)arch.length, arch.data);
    bool layers = gguf_get_int(model, key, n_layer) && *n_layer > 0 && *n_layer <= 4096;
    snprintf(key, sizeof key, "%.*s.expert_count", (int)arch.length, arch.data);
    bool experts = gguf_get_int(model, key, n_expert) && *n_expert > 0 && *n_expert <= 65536;
    if (!layers || !experts) {
        analyze_error("%s: not a mixture-of-experts model (no valid %.*s.block_count and .expert_count)", path,
                      (int)arch.length, arch.data);
        return -1;
    }
    return 0;
}

typedef struct {
    uint64_t tick;
    size_t index;
} timed_request;

/* by tick, then as the trace has them */
static int by_tick(const void *a, const void *b)
{
    const timed_request *x = a, *y = b;
    if (x->tick != y->tick)
        return x->tick < y->tick ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

int route_profile_write(const char *profile_path, const char *model_path, const int64_t *layers,
                        const int64_t *experts, const uint64_t *ticks, size_t n, double half_life)
{
    bmoe_error err = {0};
    gguf_model *model = gguf_open(model_path, &err);
    if (!model) {
        analyze_error("%s", err.message);
        return -1;
    }
    int64_t n_layer = 0, n_expert = 0;
    if (model_shape(model, model_path, &n_layer, &n_expert) != 0) {
        gguf_close(model);
        return -1;
    }
    size_t n_keys = (size_t)n_layer * (size_t)n_expert;
    for (size_t i = 0; i < n; i++) {
        if (layers[i] < 0 || layers[i] >= n_layer || experts[i] < 0 || experts[i] >= n_expert) {
            analyze_error("the trace routes layer %lld expert %lld: %s has %lld layers of %lld experts (a trace "
                          "of another model?)",
                          (long long)layers[i], (long long)experts[i], model_path, (long long)n_layer,
                          (long long)n_expert);
            gguf_close(model);
            return -1;
        }
    }
    cache_policy_params params = {.n_slots = (int)n_keys, .n_keys = (int)n_keys, .half_life = half_life};
    void *state = cache_policy_frequency.create(&params);
    uint64_t *counted_at = calloc(n_keys, sizeof *counted_at); /* the tick a key was last counted at */
    float *counts = malloc(n_keys * sizeof *counts);
    timed_request *order = malloc((n + 1) * sizeof *order);
    int status = -1;
    if (!state || !counted_at || !counts || !order) {
        analyze_error("out of memory");
    } else {
        /* in the store's order: by tick (a prompt's rows come token by token,
         * the store takes them layer by layer) */
        for (size_t i = 0; i < n; i++)
            order[i] = (timed_request){.tick = ticks[i], .index = i};
        qsort(order, n, sizeof *order, by_tick);
        uint64_t now = 0;
        for (size_t j = 0; j < n; j++) {
            size_t i = order[j].index;
            size_t key = (size_t)layers[i] * (size_t)n_expert + (size_t)experts[i];
            if (counted_at[key] == ticks[i])
                continue; /* a prompt's second token on the same expert: one acquire */
            counted_at[key] = ticks[i];
            cache_policy_frequency.touch(state, (int)key, (int)key, ticks[i]);
            now = ticks[i];
        }
        for (size_t key = 0; key < n_keys; key++)
            counts[key] = (float)cache_policy_frequency.weight(state, (int)key, now);
        status = expert_profile_write(profile_path, gguf_identity(model), (int32_t)n_layer, (int32_t)n_expert,
                                      counts, &err);
        if (status != 0)
            analyze_error("%s", err.message);
    }
    if (state)
        cache_policy_frequency.destroy(state);
    free(counted_at);
    free(counts);
    free(order);
    gguf_close(model);
    return status;
}
