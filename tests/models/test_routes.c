/* Routing, what streaming depends on: for the float32 chat cases that have a
 * trace (qwen3moe, gpt-oss), the experts the route callback reports for every
 * (layer, token) of the token stream -- prompt and greedy ids in one batch,
 * every row's logits asked for so the last layer routes every token -- are
 * the trace's, in rank order (shared/oracle/traces, from an independent
 * float64 forward pass). */
#include <stdbool.h>
#include <string.h>

#include "bmoe.h"
#include "oracle_support.h"

enum { MAX_TOKENS = 128, MAX_LAYERS = 8, MAX_USED = 8 };

typedef struct routes {
    int32_t experts[MAX_LAYERS][MAX_TOKENS][MAX_USED];
    int seen[MAX_LAYERS][MAX_TOKENS];
    int n_used;
} routes;

static void on_route(void *user, const bmoe_route_event *event)
{
    routes *r = user;
    if (event->layer < 0 || event->layer >= MAX_LAYERS || event->position < 0 || event->position >= MAX_TOKENS ||
        event->n_experts_used > MAX_USED)
        return;
    r->n_used = event->n_experts_used;
    r->seen[event->layer][event->position]++;
    memcpy(r->experts[event->layer][event->position], event->experts,
           (size_t)event->n_experts_used * sizeof(int32_t));
}

static void check_trace(const char *model_name)
{
    char relative[256], path[1024];
    snprintf(relative, sizeof relative, "oracle/traces/%s.chat.trace.json", model_name);
    test_shared_path(path, sizeof path, relative);
    size_t size;
    char *text = test_read_file(path, &size);
    cJSON *json = text ? cJSON_Parse(text) : NULL;
    free(text);
    CHECK_MSG(json != NULL, "cannot parse %s", path);
    if (!json)
        return;
    int n_tokens = 0;
    int32_t *tokens = oracle_int_array(json, "tokens", &n_tokens);
    const cJSON *experts = cJSON_GetObjectItemCaseSensitive(json, "experts");
    int n_layer = cJSON_GetArraySize(experts);
    CHECK(n_tokens > 0 && n_tokens <= MAX_TOKENS && n_layer > 0 && n_layer <= MAX_LAYERS);

    bmoe_error error = {0};
    bmoe_model *model = oracle_model_load(model_name);
    static routes r;
    memset(&r, 0, sizeof r);
    bmoe_context_params params = bmoe_context_default_params();
    params.n_ctx = 256;
    params.n_threads = 2;
    params.kv_type = BMOE_KV_F32;
    params.route_callback = on_route;
    params.route_user = &r;
    bmoe_context *context = model ? bmoe_context_create(model, &params, &error) : NULL;
    float *logits = model ? calloc((size_t)n_tokens * (size_t)bmoe_model_n_vocab(model), sizeof(float)) : NULL;
    CHECK_MSG(context && bmoe_eval(context, tokens, n_tokens, logits, true, NULL, &error) == 0, "eval: %s",
              error.message);
    int differing = 0, missing = 0;
    for (int il = 0; il < n_layer && il < MAX_LAYERS; il++) {
        const cJSON *layer = cJSON_GetArrayItem(experts, il);
        for (int t = 0; t < n_tokens && t < MAX_TOKENS; t++) {
            const cJSON *chosen = cJSON_GetArrayItem(layer, t);
            int n_used = cJSON_GetArraySize(chosen);
            if (r.seen[il][t] != 1 || n_used != r.n_used) {
                missing++;
                continue;
            }
            bool same = true;
            for (int k = 0; k < n_used; k++)
                same &= r.experts[il][t][k] == (int32_t)cJSON_GetArrayItem(chosen, k)->valuedouble;
            if (!same && differing++ < 5) {
                fprintf(stderr, "%s: layer %d token %d: experts", model_name, il, t);
                for (int k = 0; k < n_used; k++)
                    fprintf(stderr, " %d/%d", r.experts[il][t][k], (int)cJSON_GetArrayItem(chosen, k)->valuedouble);
                fprintf(stderr, " (ours/trace)\n");
            }
        }
    }
    printf("%s: %d layers x %d tokens, %d routings differ, %d missing\n", model_name, n_layer, n_tokens, differing,
           missing);
    CHECK_MSG(missing == 0, "%s: %d (layer, token) routings not reported once", model_name, missing);
    CHECK_MSG(differing == 0, "%s: %d routings differ from the trace", model_name, differing);
    free(logits);
    free(tokens);
    bmoe_context_free(context);
    bmoe_model_free(model);
    cJSON_Delete(json);
}

int main(void)
{
    check_trace("qwen3moe-tiny-f32");
    check_trace("gptoss-tiny-f32");
    return test_finish();
}
