/* The order a prompt's expert reads reach the file: per layer, the experts
 * most of the prompt's tokens routed to first (ties: the lower index), every
 * expert's gate and up before any down, as the layer computes them. Seen
 * through the stream parameters' read function with one read lane (which
 * serves a submission in order), no cache (so nothing is read ahead or
 * found) and a model whose 16 experts one acquire holds; the routing comes
 * from the route callback, the (layer, projection, expert) of each read
 * from the file's tensor table. */
#include <pthread.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "stream_support.h"

#define N_EXPERT 16
#define MAX_LAYERS 8
#define MAX_READS 4096

typedef struct expert_range {
    int layer, projection; /* 0 gate, 1 up, 2 down */
    uint64_t begin, expert_bytes;
} expert_range;

typedef struct read_log {
    pthread_mutex_t lock;
    bool recording;
    int64_t offsets[MAX_READS];
    int n;
} read_log;

typedef struct route_counts {
    int counts[MAX_LAYERS][N_EXPERT];
    int n_layer;
} route_counts;

static int64_t logging_pread(void *user, int fd, void *buffer, size_t length, int64_t offset)
{
    read_log *log = user;
    pthread_mutex_lock(&log->lock);
    if (log->recording && log->n < MAX_READS)
        log->offsets[log->n++] = offset;
    pthread_mutex_unlock(&log->lock);
    return pread(fd, buffer, length, (off_t)offset);
}

static void count_routes(void *user, const bmoe_route_event *event)
{
    route_counts *routes = user;
    if (!event->batch || event->layer < 0 || event->layer >= MAX_LAYERS)
        return;
    for (int k = 0; k < event->n_experts_used; k++)
        routes->counts[event->layer][event->experts[k]]++;
    if (event->layer + 1 > routes->n_layer)
        routes->n_layer = event->layer + 1;
}

/* The expert tensors of the file as byte ranges. */
static int expert_ranges(const char *path, expert_range *ranges, int max)
{
    bmoe_error error = {0};
    gguf_model *file = gguf_open(path, &error);
    CHECK_MSG(file != NULL, "%s", error.message);
    if (!file)
        return 0;
    const char *projections[] = {"ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight"};
    int n = 0;
    for (uint64_t i = 0; i < gguf_tensor_count(file) && n < max; i++) {
        const gguf_tensor *t = gguf_tensor_at(file, i);
        int layer = -1, used = 0;
        if (sscanf(t->name, "blk.%d.%n", &layer, &used) != 1 || used == 0)
            continue;
        for (int p = 0; p < 3; p++)
            if (strcmp(t->name + used, projections[p]) == 0)
                ranges[n++] = (expert_range){layer, p, t->file_offset, t->nbytes / (uint64_t)t->ne[2]};
    }
    gguf_close(file);
    return n;
}

/* Which (layer, projection, expert) a read at offset serves; false for
 * reads of other tensors. */
static bool locate(const expert_range *ranges, int n_ranges, int64_t offset, int *layer, int *projection, int *expert)
{
    for (int i = 0; i < n_ranges; i++) {
        const expert_range *r = &ranges[i];
        if ((uint64_t)offset >= r->begin && (uint64_t)offset < r->begin + N_EXPERT * r->expert_bytes) {
            *layer = r->layer;
            *projection = r->projection;
            *expert = (int)(((uint64_t)offset - r->begin) / r->expert_bytes);
            return true;
        }
    }
    return false;
}

int main(void)
{
    char dir[1100], path[1200];
    stream_test_dir(dir, sizeof dir, "stream-order");
    snprintf(path, sizeof path, "%s/model.gguf", dir);
    if (!stream_make_model(path, "--shape tiny-qwen3moe --experts 16 --expert-ff 512 --type q4_k_m --fill blocks "
                                 "--seed 12"))
        return test_finish();
    expert_range ranges[3 * MAX_LAYERS];
    int n_ranges = expert_ranges(path, ranges, 3 * MAX_LAYERS);
    CHECK(n_ranges >= 6 && n_ranges % 3 == 0);

    static read_log log = {.lock = PTHREAD_MUTEX_INITIALIZER};
    bmoe_model_params params = bmoe_model_default_params();
    params.stream.enabled = true;
    params.stream.cache_mb = 0;
    params.stream.io_threads = 1;
    params.stream.direct = false; /* reads start where the expert starts */
    params.stream.pread = logging_pread;
    params.stream.pread_user = &log;
    bmoe_error error = {0};
    bmoe_model *model = bmoe_model_load(path, &params, &error);
    CHECK_MSG(model != NULL, "load: %s", error.message);
    route_counts routes = {0};
    bmoe_context_params context_params = bmoe_context_default_params();
    context_params.n_ctx = 64;
    context_params.n_ubatch = 64;
    context_params.route_callback = count_routes;
    context_params.route_user = &routes;
    bmoe_context *context = model ? bmoe_context_create(model, &context_params, &error) : NULL;
    CHECK_MSG(context != NULL, "context: %s", error.message);
    int32_t prompt[WORKLOAD_PROMPT];
    /* every row's logits: the last layer then runs every token's experts too */
    float *logits = model ? calloc((size_t)WORKLOAD_PROMPT * (size_t)bmoe_model_n_vocab(model), sizeof *logits) : NULL;
    workload_prompt(prompt, model ? bmoe_model_n_vocab(model) : 1);
    log.recording = true;
    CHECK(context && logits && bmoe_eval(context, prompt, WORKLOAD_PROMPT, logits, true, NULL, &error) == 0);
    log.recording = false;

    /* the reads of each layer, one entry per job (a job may be read in pieces) */
    int seen_layers = 0, previous_key = -1;
    int sequence[MAX_LAYERS][3 * N_EXPERT], length[MAX_LAYERS] = {0};
    for (int i = 0; i < log.n; i++) {
        int layer, projection, expert;
        if (!locate(ranges, n_ranges, log.offsets[i], &layer, &projection, &expert))
            continue;
        int key = (layer * 3 + projection) * N_EXPERT + expert;
        if (key == previous_key)
            continue;
        previous_key = key;
        CHECK_MSG(layer < MAX_LAYERS && length[layer] < 3 * N_EXPERT, "read of layer %d past the expected", layer);
        if (layer < MAX_LAYERS && length[layer] < 3 * N_EXPERT)
            sequence[layer][length[layer]++] = projection * N_EXPERT + expert;
        seen_layers = layer + 1 > seen_layers ? layer + 1 : seen_layers;
    }
    CHECK_MSG(seen_layers == routes.n_layer && seen_layers >= 2, "reads of %d layers, routes of %d", seen_layers,
              routes.n_layer);

    for (int layer = 0; layer < routes.n_layer && layer < MAX_LAYERS; layer++) {
        /* expected: the experts by use, most first, then lower index */
        int order[N_EXPERT], n = 0;
        for (int e = 0; e < N_EXPERT; e++)
            if (routes.counts[layer][e] > 0)
                order[n++] = e;
        for (int i = 1; i < n; i++)
            for (int j = i; j > 0 && routes.counts[layer][order[j - 1]] < routes.counts[layer][order[j]]; j--) {
                int swap = order[j];
                order[j] = order[j - 1];
                order[j - 1] = swap;
            }
        CHECK_MSG(n >= 2 && routes.counts[layer][order[0]] > routes.counts[layer][order[n - 1]],
                  "layer %d: the prompt's routing does not tell the order (%d experts)", layer, n);
        int want[3 * N_EXPERT], w = 0;
        for (int k = 0; k < n; k++) {
            want[w++] = 0 * N_EXPERT + order[k];
            want[w++] = 1 * N_EXPERT + order[k];
        }
        for (int k = 0; k < n; k++)
            want[w++] = 2 * N_EXPERT + order[k];
        bool same = w == length[layer] && memcmp(want, sequence[layer], (size_t)w * sizeof *want) == 0;
        CHECK_MSG(same, "layer %d: %d reads in another order than most used first, gate and up before down (%d "
                  "wanted); first read: projection %d expert %d, wanted projection %d expert %d",
                  layer, length[layer], w, length[layer] ? sequence[layer][0] / N_EXPERT : -1,
                  length[layer] ? sequence[layer][0] % N_EXPERT : -1, want[0] / N_EXPERT, want[0] % N_EXPERT);
    }
    free(logits);
    bmoe_context_free(context);
    bmoe_model_free(model);
    return test_finish();
}
