/* `bmoe-analyze route`: a --route-trace read as a request stream for an
 * expert cache. Each routed (layer, expert) is one request, in trace order
 * (turn, step, layer, slot), costing its layer's expert_bytes (the
 * "# layer=" preamble lines, else the largest expert_bytes a row of that
 * layer carries). Reports per-layer popularity, reuse distance, and the hit
 * rates of the expert cache's policies (LRU and aged frequency, the engine's
 * own code) and of Belady's MIN (cache.c) over a sweep of byte budgets,
 * and with --drop the dropping replay of route_drop.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyze.h"

#define MIB 1048576.0
#define HISTOGRAM_BUCKETS 34 /* 0, then [2^(b-1), 2^b) for b = 1..33 */

static const double default_budgets[] = {500, 1000, 2000, 3000, 4000, 6000, 8000};

typedef struct {
    int64_t turn, step, layer, slot, expert, phase;
    size_t row;
} request;

typedef struct {
    int64_t layer;
    uint64_t preamble_bytes; /* 0: no "# layer=" line */
    uint64_t row_bytes;      /* largest expert_bytes on the layer's rows */
} layer_size;

static int compare_requests(const void *a, const void *b)
{
    const request *x = a, *y = b;
    if (x->turn != y->turn)
        return x->turn < y->turn ? -1 : 1;
    if (x->step != y->step)
        return x->step < y->step ? -1 : 1;
    if (x->layer != y->layer)
        return x->layer < y->layer ? -1 : 1;
    if (x->slot != y->slot)
        return x->slot < y->slot ? -1 : 1;
    return (x->row > y->row) - (x->row < y->row);
}

static int compare_layer_sizes(const void *a, const void *b)
{
    const layer_size *x = a, *y = b;
    return (x->layer > y->layer) - (x->layer < y->layer);
}

/* Whether the kept rows are already in the order the engine routed them:
 * within a turn, prefill rows before decode rows, and decode rows by
 * (step, layer, slot). Prefill rows keep the file's order, which lists a
 * batch layer by layer as it is served. */
static bool in_routing_order(const request *requests, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        const request *a = &requests[i - 1], *b = &requests[i];
        if (a->turn != b->turn) {
            if (a->turn > b->turn)
                return false;
            continue;
        }
        if (a->phase == 1 && b->phase == 0)
            return false;
        if (a->phase != 0 && b->phase != 0 && compare_requests(a, b) >= 0)
            return false;
    }
    return true;
}

/* ---- (layer, expert) -> dense key ------------------------------------------ */

typedef struct {
    uint64_t *slots; /* packed pair + 1; 0 = empty */
    uint32_t *ids;
    size_t capacity;
    uint32_t count;
} key_map;

static uint64_t hash_pair(uint64_t packed)
{
    packed ^= packed >> 33;
    packed *= 0xff51afd7ed558ccdull;
    packed ^= packed >> 33;
    return packed;
}

static int key_map_grow(key_map *map)
{
    size_t capacity = map->capacity ? map->capacity * 2 : 1024;
    uint64_t *slots = calloc(capacity, sizeof *slots);
    uint32_t *ids = malloc(capacity * sizeof *ids);
    if (!slots || !ids) {
        free(slots);
        free(ids);
        return -1;
    }
    for (size_t i = 0; i < map->capacity; i++) {
        if (!map->slots[i])
            continue;
        size_t j = hash_pair(map->slots[i]) & (capacity - 1);
        while (slots[j])
            j = (j + 1) & (capacity - 1);
        slots[j] = map->slots[i];
        ids[j] = map->ids[i];
    }
    free(map->slots);
    free(map->ids);
    map->slots = slots;
    map->ids = ids;
    map->capacity = capacity;
    return 0;
}

/* The key of (layer, expert), numbered in order of first request. */
static int key_map_get(key_map *map, int64_t layer, int64_t expert, uint32_t *id)
{
    if ((size_t)map->count * 2 >= map->capacity && key_map_grow(map) != 0)
        return -1;
    uint64_t packed = ((uint64_t)layer << 32 | (uint64_t)expert) + 1;
    size_t j = hash_pair(packed) & (map->capacity - 1);
    while (map->slots[j] && map->slots[j] != packed)
        j = (j + 1) & (map->capacity - 1);
    if (!map->slots[j]) {
        map->slots[j] = packed;
        map->ids[j] = map->count++;
    }
    *id = map->ids[j];
    return 0;
}

/* ---- the view -------------------------------------------------------------- */

typedef struct {
    table t;
    request *requests;
    size_t n_requests, n_dropped, n_engine_hits, n_residency;
    layer_size *layers;
    size_t n_layers;
    uint32_t *keys;
    uint64_t *ticks; /* one per layer of a step: the expert store's clock */
    int64_t *key_layer, *key_expert;
    uint64_t *key_bytes, *key_count;
    uint32_t n_keys;
    key_map map;
    size_t *next_use;
    uint32_t *reuse_entries;
    uint64_t *reuse_bytes;
    int n_budgets;
    double budgets[ANALYZE_MAX_BUDGETS];
    uint64_t lru_hits[ANALYZE_MAX_BUDGETS], freq_hits[ANALYZE_MAX_BUDGETS];
    uint64_t belady_hits[ANALYZE_MAX_BUDGETS];
    uint64_t histogram[HISTOGRAM_BUCKETS];
    int64_t n_layer_meta, n_expert_meta, n_expert_used_meta;
    char arch[64];
    enum phase_filter phase;
    bool sorted_by_tool; /* the file was not in routing order */
    key_map layer_map; /* layer -> index into row_layer / row_bytes */
    int64_t *row_layer;
    uint64_t *row_bytes;
    size_t row_layer_capacity;
} route_state;

static void route_free(route_state *r)
{
    table_free(&r->t);
    free(r->requests);
    free(r->layers);
    free(r->keys);
    free(r->ticks);
    free(r->key_layer);
    free(r->key_expert);
    free(r->key_bytes);
    free(r->key_count);
    free(r->map.slots);
    free(r->map.ids);
    free(r->layer_map.slots);
    free(r->layer_map.ids);
    free(r->row_layer);
    free(r->row_bytes);
    free(r->next_use);
    free(r->reuse_entries);
    free(r->reuse_bytes);
}

static layer_size *find_layer(const route_state *r, int64_t layer)
{
    layer_size probe = {.layer = layer};
    return bsearch(&probe, r->layers, r->n_layers, sizeof *r->layers, compare_layer_sizes);
}

/* The "# layer=L expert_bytes=B" lines and the model line. */
static int read_preamble(route_state *r)
{
    char value[128], bytes_text[128];
    r->n_layer_meta = r->n_expert_meta = r->n_expert_used_meta = -1;
    if (table_meta(&r->t, "n_layer", value, sizeof value))
        r->n_layer_meta = strtoll(value, NULL, 10);
    if (table_meta(&r->t, "n_expert", value, sizeof value))
        r->n_expert_meta = strtoll(value, NULL, 10);
    if (table_meta(&r->t, "n_expert_used", value, sizeof value))
        r->n_expert_used_meta = strtoll(value, NULL, 10);
    if (!table_meta(&r->t, "arch", r->arch, sizeof r->arch))
        strcpy(r->arch, "?");
    r->layers = malloc((r->t.n_preamble + 1) * sizeof *r->layers);
    if (!r->layers) {
        analyze_error("out of memory");
        return -1;
    }
    for (size_t i = 0; i < r->t.n_preamble; i++) {
        const table_comment *c = &r->t.comments[i];
        if (strncmp(c->text, "layer=", 6) != 0)
            continue;
        if (!comment_value(c->text, "layer", value, sizeof value) ||
            !comment_value(c->text, "expert_bytes", bytes_text, sizeof bytes_text)) {
            analyze_error("%s:%d: a '# layer=' line without expert_bytes=", r->t.path, c->line);
            return -1;
        }
        char *end_layer, *end_bytes;
        long long layer = strtoll(value, &end_layer, 10);
        double bytes = strtod(bytes_text, &end_bytes);
        if (*end_layer || end_layer == value || layer < 0 || layer > INT32_MAX || *end_bytes ||
            end_bytes == bytes_text || !(bytes >= 0 && bytes < 1e15) || bytes != floor(bytes)) {
            analyze_error("%s:%d: bad '# layer=' line: %.80s", r->t.path, c->line, c->text);
            return -1;
        }
        r->layers[r->n_layers++] = (layer_size){.layer = layer, .preamble_bytes = (uint64_t)bytes};
    }
    qsort(r->layers, r->n_layers, sizeof *r->layers, compare_layer_sizes);
    for (size_t i = 1; i < r->n_layers; i++)
        if (r->layers[i].layer == r->layers[i - 1].layer &&
            r->layers[i].preamble_bytes != r->layers[i - 1].preamble_bytes) {
            analyze_error("%s: two '# layer=%lld' lines disagree on expert_bytes", r->t.path,
                          (long long)r->layers[i].layer);
            return -1;
        }
    return 0;
}

/* Notes that a row of LAYER carries BYTES in its expert_bytes column. */
static int note_row_layer(route_state *r, int64_t layer, uint64_t bytes)
{
    uint32_t id, known = r->layer_map.count;
    if (key_map_get(&r->layer_map, layer, 0, &id) != 0)
        return -1;
    if (id >= r->row_layer_capacity) {
        size_t capacity = r->row_layer_capacity ? r->row_layer_capacity * 2 : 64;
        int64_t *layers = realloc(r->row_layer, capacity * sizeof *layers);
        if (layers)
            r->row_layer = layers;
        uint64_t *sizes = realloc(r->row_bytes, capacity * sizeof *sizes);
        if (sizes)
            r->row_bytes = sizes;
        if (!layers || !sizes)
            return -1;
        r->row_layer_capacity = capacity;
    }
    if (id == known) { /* first seen now */
        r->row_layer[id] = layer;
        r->row_bytes[id] = 0;
    }
    if (bytes > r->row_bytes[id])
        r->row_bytes[id] = bytes;
    return 0;
}

/* Merges the layers seen on rows into the preamble's sorted list. */
static int merge_row_layers(route_state *r)
{
    size_t preamble_layers = r->n_layers;
    layer_size *grown =
        realloc(r->layers, (preamble_layers + r->layer_map.count + 1) * sizeof *r->layers);
    if (!grown)
        return -1;
    r->layers = grown;
    for (uint32_t id = 0; id < r->layer_map.count; id++) {
        layer_size probe = {.layer = r->row_layer[id]};
        layer_size *entry =
            bsearch(&probe, r->layers, preamble_layers, sizeof *r->layers, compare_layer_sizes);
        if (entry)
            entry->row_bytes = r->row_bytes[id];
        else
            r->layers[r->n_layers++] =
                (layer_size){.layer = r->row_layer[id], .row_bytes = r->row_bytes[id]};
    }
    qsort(r->layers, r->n_layers, sizeof *r->layers, compare_layer_sizes);
    return 0;
}

static int read_requests(route_state *r, enum phase_filter phase)
{
    table *t = &r->t;
    int c_layer = table_column(t, "layer"), c_expert = table_column(t, "expert");
    int c_turn = table_column(t, "turn"), c_phase = table_column(t, "phase");
    int c_step = table_column(t, "step"), c_slot = table_column(t, "slot");
    int c_residency = table_column(t, "residency"), c_bytes = table_column(t, "expert_bytes");
    int c_dropped = table_column(t, "dropped");
    r->requests = malloc((t->n_rows + 1) * sizeof *r->requests);
    if (!r->requests) {
        analyze_error("out of memory");
        return -1;
    }
    for (size_t row = 0; row < t->n_rows; row++) {
        /* Without step or slot columns the file's order stands. */
        request q = {.row = row, .slot = (int64_t)row, .step = (int64_t)row, .phase = -1};
        int64_t bytes = 0, dropped = 0, residency = -1;
        if (table_integer(t, row, c_layer, 0, INT32_MAX, &q.layer) != 0 ||
            table_integer(t, row, c_expert, 0, INT32_MAX, &q.expert) != 0 ||
            (c_turn >= 0 && table_integer(t, row, c_turn, INT32_MIN, INT32_MAX, &q.turn) != 0) ||
            (c_phase >= 0 && table_integer(t, row, c_phase, 0, 1, &q.phase) != 0) ||
            (c_step >= 0 && table_integer(t, row, c_step, INT64_MIN / 2, INT64_MAX / 2,
                                          &q.step) != 0) ||
            (c_slot >= 0 && table_integer(t, row, c_slot, 0, INT32_MAX, &q.slot) != 0) ||
            (c_bytes >= 0 && table_integer(t, row, c_bytes, 0, INT64_MAX / 4, &bytes) != 0) ||
            (c_dropped >= 0 && table_integer(t, row, c_dropped, 0, 1, &dropped) != 0) ||
            (c_residency >= 0 && table_integer(t, row, c_residency, 0, 2, &residency) != 0))
            return -1;
        if (note_row_layer(r, q.layer, (uint64_t)bytes) != 0) {
            analyze_error("out of memory");
            return -1;
        }
        if (!phase_keep(phase, q.phase))
            continue;
        if (dropped) {
            r->n_dropped++;
            continue;
        }
        if (residency >= 0) {
            r->n_residency++;
            if (residency > 0)
                r->n_engine_hits++;
        }
        r->requests[r->n_requests++] = q;
    }
    if (merge_row_layers(r) != 0) {
        analyze_error("out of memory");
        return -1;
    }
    if (!in_routing_order(r->requests, r->n_requests)) {
        r->sorted_by_tool = true;
        qsort(r->requests, r->n_requests, sizeof *r->requests, compare_requests);
    }
    return 0;
}

static int build_keys(route_state *r)
{
    size_t n = r->n_requests;
    r->keys = malloc((n + 1) * sizeof *r->keys);
    r->ticks = malloc((n + 1) * sizeof *r->ticks);
    if (!r->keys || !r->ticks)
        goto out_of_memory;
    uint64_t tick = 0;
    for (size_t i = 0; i < n; i++) {
        if (key_map_get(&r->map, r->requests[i].layer, r->requests[i].expert, &r->keys[i]) != 0)
            goto out_of_memory;
        const request *q = &r->requests[i], *previous = i > 0 ? &r->requests[i - 1] : NULL;
        if (!previous || q->turn != previous->turn || q->step != previous->step ||
            q->layer != previous->layer)
            tick++;
        r->ticks[i] = tick;
    }
    r->n_keys = r->map.count;
    size_t k = (size_t)r->n_keys + 1;
    r->key_layer = malloc(k * sizeof *r->key_layer);
    r->key_expert = malloc(k * sizeof *r->key_expert);
    r->key_bytes = malloc(k * sizeof *r->key_bytes);
    r->key_count = calloc(k, sizeof *r->key_count);
    if (!r->key_layer || !r->key_expert || !r->key_bytes || !r->key_count)
        goto out_of_memory;
    for (size_t i = 0; i < n; i++) {
        uint32_t key = r->keys[i];
        r->key_layer[key] = r->requests[i].layer;
        r->key_expert[key] = r->requests[i].expert;
        r->key_count[key]++;
    }
    for (uint32_t key = 0; key < r->n_keys; key++) {
        layer_size *size = find_layer(r, r->key_layer[key]);
        uint64_t bytes = size->preamble_bytes ? size->preamble_bytes : size->row_bytes;
        if (bytes == 0) {
            analyze_error("%s: layer %lld has no expert_bytes (no '# layer=' line and no row "
                          "carrying it)",
                          r->t.path, (long long)r->key_layer[key]);
            return -1;
        }
        r->key_bytes[key] = bytes;
    }
    return 0;
out_of_memory:
    analyze_error("out of memory");
    return -1;
}

/* The store's half-life: the tokens times the layers a token passes. */
static double store_half_life(const route_state *r)
{
    return (double)CACHE_FREQUENCY_HALF_LIFE_TOKENS * (double)(r->n_layers > 0 ? r->n_layers : 1);
}

static int simulate(route_state *r, const analyze_options *options)
{
    if (options->n_budgets > 0) {
        r->n_budgets = options->n_budgets;
        memcpy(r->budgets, options->budgets_mib, sizeof r->budgets);
    } else {
        r->n_budgets = (int)(sizeof default_budgets / sizeof default_budgets[0]);
        memcpy(r->budgets, default_budgets, sizeof default_budgets);
    }
    size_t n = r->n_requests + 1;
    r->next_use = malloc(n * sizeof *r->next_use);
    r->reuse_entries = malloc(n * sizeof *r->reuse_entries);
    r->reuse_bytes = malloc(n * sizeof *r->reuse_bytes);
    cache_trace trace = {.keys = r->keys, .ticks = r->ticks, .n = r->n_requests,
                         .key_bytes = r->key_bytes, .n_keys = r->n_keys};
    double half_life = store_half_life(r);
    if (!r->next_use || !r->reuse_entries || !r->reuse_bytes ||
        cache_next_uses(&trace, r->next_use) != 0 ||
        cache_reuse_distances(&trace, r->reuse_entries, r->reuse_bytes) != 0)
        goto out_of_memory;
    for (int b = 0; b < r->n_budgets; b++) {
        uint64_t capacity = (uint64_t)floor(r->budgets[b] * MIB);
        if (cache_policy_hits(&trace, &cache_policy_lru, 0.0, capacity, &r->lru_hits[b]) != 0 ||
            cache_policy_hits(&trace, &cache_policy_frequency, half_life, capacity,
                              &r->freq_hits[b]) != 0 ||
            cache_belady_hits(&trace, r->next_use, capacity, &r->belady_hits[b]) != 0)
            goto out_of_memory;
    }
    for (size_t i = 0; i < r->n_requests; i++) {
        uint32_t d = r->reuse_entries[i];
        if (d == UINT32_MAX)
            continue;
        int bucket = 0;
        while (d) {
            bucket++;
            d >>= 1;
        }
        r->histogram[bucket]++;
    }
    return 0;
out_of_memory:
    analyze_error("out of memory");
    return -1;
}

static double percent(double part, double whole)
{
    return whole > 0 ? 100.0 * part / whole : 0.0;
}

static int compare_turn_steps(const void *a, const void *b)
{
    const int64_t *x = a, *y = b;
    if (x[0] != y[0])
        return x[0] < y[0] ? -1 : 1;
    return (x[1] > y[1]) - (x[1] < y[1]);
}

/* Distinct (turn, step) pairs; 0 when there is no memory to count them. */
static size_t count_steps(const request *requests, size_t n)
{
    int64_t *pairs = malloc((n + 1) * 2 * sizeof *pairs);
    if (!pairs)
        return 0;
    for (size_t i = 0; i < n; i++) {
        pairs[2 * i] = requests[i].turn;
        pairs[2 * i + 1] = requests[i].step;
    }
    qsort(pairs, n, 2 * sizeof *pairs, compare_turn_steps);
    size_t steps = 0;
    for (size_t i = 0; i < n; i++)
        if (i == 0 || pairs[2 * i] != pairs[2 * i - 2] || pairs[2 * i + 1] != pairs[2 * i - 1])
            steps++;
    free(pairs);
    return steps;
}

static void print_header(route_state *r, const analyze_options *options)
{
    size_t steps = count_steps(r->requests, r->n_requests);
    printf("route trace: %s\n", r->t.path);
    printf("model: arch=%s n_layer=%lld n_expert=%lld n_expert_used=%lld (from the preamble; -1 = "
           "absent)\n",
           r->arch, (long long)r->n_layer_meta, (long long)r->n_expert_meta,
           (long long)r->n_expert_used_meta);
    if (table_column(&r->t, "phase") < 0)
        printf("phase: the file has no phase column, so every row is used\n");
    else
        printf("phase: %s (%s; --phase decode|prefill|all)\n", phase_name(options->phase),
               options->phase == PHASE_DEFAULT ? "the default" : "as asked");
    if (table_column(&r->t, "step") < 0)
        printf("requests: %zu routed (layer, expert) entries in file order (no step column)",
               r->n_requests);
    else if (r->sorted_by_tool)
        printf("requests: %zu routed (layer, expert) entries over %zu steps, sorted by (turn, "
               "step, layer, slot): the file's rows were not in routing order",
               r->n_requests, steps);
    else
        printf("requests: %zu routed (layer, expert) entries over %zu steps, in trace order "
               "(turn, step, layer, slot; a prefill batch layer by layer, as the file lists it)",
               r->n_requests, steps);
    if (r->n_dropped)
        printf("; %zu dropped routings left out (never looked up)", r->n_dropped);
    printf("\n");
    if (r->n_residency)
        printf("the traced run's own cache: %.2f %% of these requests hit (residency column; its "
               "budget is not in the trace)\n",
               percent((double)r->n_engine_hits, (double)r->n_residency));
}

/* Per-layer sizes: uniform or not, and whether the rows agree. */
static void print_sizes(route_state *r)
{
    uint64_t low = UINT64_MAX, high = 0;
    size_t distinct = 0, from_rows = 0, disagree = 0;
    uint64_t seen[8];
    for (size_t i = 0; i < r->n_layers; i++) {
        const layer_size *size = &r->layers[i];
        uint64_t bytes = size->preamble_bytes ? size->preamble_bytes : size->row_bytes;
        if (!bytes)
            continue;
        if (!size->preamble_bytes)
            from_rows++;
        else if (size->row_bytes && size->row_bytes != size->preamble_bytes)
            disagree++;
        low = bytes < low ? bytes : low;
        high = bytes > high ? bytes : high;
        bool known = false;
        for (size_t j = 0; j < distinct && j < 8; j++)
            known |= seen[j] == bytes;
        if (!known) {
            if (distinct < 8)
                seen[distinct] = bytes;
            distinct++;
        }
    }
    if (distinct <= 1)
        printf("expert_bytes: uniform, %.3f MiB per expert, so Belady's MIN below is the exact "
               "optimum for demand caching\n",
               high / MIB);
    else
        printf("expert_bytes: NOT uniform: %zu distinct sizes per layer, %.3f to %.3f MiB; "
               "Belady below is the evict-farthest-next-use heuristic, exact only for uniform "
               "sizes\n",
               distinct, low / MIB, high / MIB);
    if (from_rows)
        printf("  %zu layer(s) had no '# layer=' line: their size is the largest expert_bytes on "
               "their rows\n",
               from_rows);
    if (disagree)
        printf("  warning: on %zu layer(s) the rows' expert_bytes differ from the preamble's; the "
               "preamble is used\n",
               disagree);
}

/* Orders keys by layer, then by request count, most requested first. */
static const route_state *sorting_state;
static int compare_keys_by_layer(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    const route_state *r = sorting_state;
    if (r->key_layer[x] != r->key_layer[y])
        return r->key_layer[x] < r->key_layer[y] ? -1 : 1;
    if (r->key_count[x] != r->key_count[y])
        return r->key_count[x] > r->key_count[y] ? -1 : 1;
    return (x > y) - (x < y);
}

static int print_popularity(route_state *r)
{
    uint32_t *order = malloc(((size_t)r->n_keys + 1) * sizeof *order);
    if (!order) {
        analyze_error("out of memory");
        return -1;
    }
    int64_t n_expert = r->n_expert_meta;
    for (uint32_t k = 0; k < r->n_keys; k++) {
        order[k] = k;
        if (r->key_expert[k] + 1 > n_expert)
            n_expert = r->key_expert[k] + 1;
    }
    sorting_state = r;
    qsort(order, r->n_keys, sizeof *order, compare_keys_by_layer);
    printf("\nper-layer expert popularity (shares of the layer's routings; H = entropy of the "
           "expert distribution, evenness = H / log2(%lld experts))\n",
           (long long)n_expert);
    printf("  %5s %10s %9s %9s %7s %7s %7s %7s %9s\n", "layer", "MiB/expert", "routings",
           "distinct", "top1%", "top8%", "top32%", "H_bits", "evenness");
    double sum_distinct = 0, sum_top8 = 0, sum_h = 0;
    size_t layers_seen = 0;
    for (uint32_t begin = 0, end; begin < r->n_keys; begin = end) {
        int64_t layer = r->key_layer[order[begin]];
        uint64_t total = 0, top1 = r->key_count[order[begin]], top8 = 0, top32 = 0;
        for (end = begin; end < r->n_keys && r->key_layer[order[end]] == layer; end++) {
            uint64_t count = r->key_count[order[end]];
            total += count;
            if (end - begin < 8)
                top8 += count;
            if (end - begin < 32)
                top32 += count;
        }
        double h = 0;
        for (uint32_t i = begin; i < end; i++) {
            double p = (double)r->key_count[order[i]] / (double)total;
            h -= p * log2(p);
        }
        size_t distinct = end - begin;
        double evenness = n_expert > 1 ? h / log2((double)n_expert) : 0;
        printf("  %5lld %10.3f %9llu %9zu %7.2f %7.2f %7.2f %7.3f %9.3f\n", (long long)layer,
               r->key_bytes[order[begin]] / MIB, (unsigned long long)total, distinct,
               percent((double)top1, (double)total), percent((double)top8, (double)total),
               percent((double)top32, (double)total), h, evenness);
        sum_distinct += (double)distinct;
        sum_top8 += percent((double)top8, (double)total);
        sum_h += h;
        layers_seen++;
    }
    if (layers_seen)
        printf("  mean over %zu layers: %.1f distinct experts, top-8 share %.2f %%, H %.3f bits "
               "(%.1f equally used experts)\n",
               layers_seen, sum_distinct / (double)layers_seen, sum_top8 / (double)layers_seen,
               sum_h / (double)layers_seen, pow(2, sum_h / (double)layers_seen));
    free(order);
    return 0;
}

static int print_reuse(route_state *r)
{
    size_t reuses = 0;
    double *entries = malloc((r->n_requests + 1) * sizeof *entries);
    double *mib = malloc((r->n_requests + 1) * sizeof *mib);
    if (!entries || !mib) {
        free(entries);
        free(mib);
        analyze_error("out of memory");
        return -1;
    }
    uint64_t working_set = 0;
    for (uint32_t k = 0; k < r->n_keys; k++)
        working_set += r->key_bytes[k];
    for (size_t i = 0; i < r->n_requests; i++)
        if (r->reuse_entries[i] != UINT32_MAX) {
            entries[reuses] = r->reuse_entries[i];
            mib[reuses++] = (double)r->reuse_bytes[i] / MIB;
        }
    stats_sort(entries, reuses);
    stats_sort(mib, reuses);
    printf("\nreuse distance: distinct other (layer, expert) entries requested between two "
           "requests of one entry\n");
    printf("  working set: %u distinct entries, %.1f MiB; first uses (compulsory misses): %u = "
           "%.2f %% of requests, so no cache can hit more than %.2f %%\n",
           r->n_keys, working_set / MIB, r->n_keys,
           percent((double)r->n_keys, (double)r->n_requests),
           100.0 - percent((double)r->n_keys, (double)r->n_requests));
    if (reuses) {
        printf("  reuses: %zu; distance in entries p50 %.0f p90 %.0f p99 %.0f max %.0f\n", reuses,
               stats_percentile(entries, reuses, 50), stats_percentile(entries, reuses, 90),
               stats_percentile(entries, reuses, 99), entries[reuses - 1]);
        printf("  the same in MiB (an LRU cache of B MiB hits a reuse when this plus the entry's "
               "own size fits in B): p50 %.1f p90 %.1f p99 %.1f max %.1f\n",
               stats_percentile(mib, reuses, 50), stats_percentile(mib, reuses, 90),
               stats_percentile(mib, reuses, 99), mib[reuses - 1]);
        printf("  %-15s %9s %8s %8s\n", "entries", "reuses", "share%", "cumul%");
        uint64_t cumulative = 0;
        for (int b = 0; b < HISTOGRAM_BUCKETS; b++) {
            if (!r->histogram[b])
                continue;
            cumulative += r->histogram[b];
            char range[32];
            if (b == 0)
                snprintf(range, sizeof range, "0");
            else if (b == 1)
                snprintf(range, sizeof range, "1");
            else
                snprintf(range, sizeof range, "%llu-%llu", 1ull << (b - 1), (1ull << b) - 1);
            printf("  %-15s %9llu %8.2f %8.2f\n", range, (unsigned long long)r->histogram[b],
                   percent((double)r->histogram[b], (double)reuses),
                   percent((double)cumulative, (double)reuses));
        }
    } else {
        printf("  no entry is requested twice\n");
    }
    free(entries);
    free(mib);
    return 0;
}

static void print_cache(route_state *r)
{
    printf("\ncache simulation (hit = the routed entry is resident when requested; each entry "
           "costs its layer's expert_bytes; every miss that fits is admitted; the caches start "
           "empty at the first request shown, so --phase all warms them with the prefill; 1 MiB "
           "= 2^20 bytes; LRU and freq are the expert cache's --cache-policy lru|freq)\n");
    printf("  %10s %9s %10s %12s %10s %10s %12s %9s\n", "budget_MiB", "LRU_hit%", "freq_hit%",
           "Belady_hit%", "LRU_hits", "freq_hits", "Belady_hits", "requests");
    for (int b = 0; b < r->n_budgets; b++)
        printf("  %10g %9.2f %10.2f %12.2f %10llu %10llu %12llu %9zu\n", r->budgets[b],
               percent((double)r->lru_hits[b], (double)r->n_requests),
               percent((double)r->freq_hits[b], (double)r->n_requests),
               percent((double)r->belady_hits[b], (double)r->n_requests),
               (unsigned long long)r->lru_hits[b], (unsigned long long)r->freq_hits[b],
               (unsigned long long)r->belady_hits[b], r->n_requests);
}

/* ---- SVG ------------------------------------------------------------------- */

static int write_reuse_svg(route_state *r, const char *dir)
{
    char name[512];
    svg_name_for(r->t.path, "-reuse.svg", name, sizeof name);
    svg s;
    if (svg_begin(&s, dir, name, 760, 420, "Reuse distance of (layer, expert) requests") != 0)
        return -1;
    int last = 0;
    uint64_t reuses = 0, peak = 0;
    for (int b = 0; b < HISTOGRAM_BUCKETS; b++)
        if (r->histogram[b]) {
            last = b;
            reuses += r->histogram[b];
            peak = r->histogram[b] > peak ? r->histogram[b] : peak;
        }
    svg_plot plot = {.x_min = 0, .x_max = last + 1, .y_min = 0,
                     .y_max = reuses ? percent((double)peak, (double)reuses) * 1.1 : 1,
                     .left = 80, .top = 40, .width = 650, .height = 300,
                     .x_labels_by_caller = true};
    svg_axes(&s, &plot, "distinct entries touched between two uses (power-of-two buckets)",
             "share of reuses (%)");
    for (int b = 0; b <= last; b++) {
        double x0 = svg_x(&plot, b + 0.1), x1 = svg_x(&plot, b + 0.9);
        double share = percent((double)r->histogram[b], (double)reuses);
        svg_rect(&s, x0, svg_y(&plot, share), x1 - x0, svg_y(&plot, 0) - svg_y(&plot, share),
                 "#4a7ab5");
        char label[32];
        if (b <= 1)
            snprintf(label, sizeof label, "%d", b);
        else
            snprintf(label, sizeof label, "%llu", 1ull << (b - 1));
        svg_text(&s, (x0 + x1) / 2, plot.top + plot.height + 16, "middle", 10, "%s", label);
    }
    svg_text(&s, plot.left + plot.width, plot.top + 16, "end", 11,
             "%s phase: %zu requests, %u first uses (not shown)", phase_name(r->phase),
             r->n_requests, r->n_keys);
    return svg_end(&s);
}

static int write_hit_svg(route_state *r, const char *dir)
{
    char name[512];
    svg_name_for(r->t.path, "-hit.svg", name, sizeof name);
    /* The budgets in increasing order. */
    int order[ANALYZE_MAX_BUDGETS];
    for (int i = 0; i < r->n_budgets; i++)
        order[i] = i;
    for (int i = 1; i < r->n_budgets; i++)
        for (int j = i; j > 0 && r->budgets[order[j]] < r->budgets[order[j - 1]]; j--) {
            int swap = order[j];
            order[j] = order[j - 1];
            order[j - 1] = swap;
        }
    double x[ANALYZE_MAX_BUDGETS], lru[ANALYZE_MAX_BUDGETS], freq[ANALYZE_MAX_BUDGETS],
        belady[ANALYZE_MAX_BUDGETS];
    for (int i = 0; i < r->n_budgets; i++) {
        x[i] = r->budgets[order[i]];
        lru[i] = percent((double)r->lru_hits[order[i]], (double)r->n_requests);
        freq[i] = percent((double)r->freq_hits[order[i]], (double)r->n_requests);
        belady[i] = percent((double)r->belady_hits[order[i]], (double)r->n_requests);
    }
    svg s;
    if (svg_begin(&s, dir, name, 760, 420, "Cache hit rate vs budget") != 0)
        return -1;
    svg_plot plot = {.x_min = 0, .x_max = x[r->n_budgets - 1] > 0 ? x[r->n_budgets - 1] : 1,
                     .y_min = 0, .y_max = 100, .left = 80, .top = 40, .width = 650, .height = 300};
    svg_axes(&s, &plot, "cache budget (MiB)", "hit rate (%)");
    double bound = 100.0 - percent((double)r->n_keys, (double)r->n_requests);
    svg_line(&s, plot.left, svg_y(&plot, bound), plot.left + plot.width, svg_y(&plot, bound),
             "#888", 1, true);
    svg_text(&s, plot.left + 6, svg_y(&plot, bound) - 5, "start", 10,
             "compulsory-miss bound %.1f %%", bound);
    svg_polyline(&s, &plot, x, lru, (size_t)r->n_budgets, "#c0504d", true);
    svg_polyline(&s, &plot, x, freq, (size_t)r->n_budgets, "#9bbb59", true);
    svg_polyline(&s, &plot, x, belady, (size_t)r->n_budgets, "#4a7ab5", true);
    const char *labels[] = {"LRU", "freq", "Belady (MIN)"};
    const char *colors[] = {"#c0504d", "#9bbb59", "#4a7ab5"};
    svg_legend(&s, plot.left + plot.width - 130, plot.top + plot.height - 65, labels, colors, 3);
    return svg_end(&s);
}

/* The expert store's clock at each request: a decode step's layers one tick
 * each, as build_keys counts; a prompt is evaluated layer by layer for all
 * its tokens at once, one tick per layer (exact for a prompt within one
 * ubatch, 512 tokens by default). */
static void store_ticks(const route_state *r, uint64_t *ticks)
{
    uint64_t tick = 0, prompt_start = 0;
    for (size_t i = 0; i < r->n_requests; i++) {
        const request *q = &r->requests[i], *previous = i > 0 ? &r->requests[i - 1] : NULL;
        bool same_turn_phase = previous && previous->turn == q->turn && previous->phase == q->phase;
        if (q->phase == 0) {
            if (!same_turn_phase)
                prompt_start = tick;
            uint64_t at = prompt_start + 1 + (uint64_t)(find_layer(r, q->layer) - r->layers);
            ticks[i] = at;
            tick = at > tick ? at : tick;
        } else {
            if (!same_turn_phase || q->step != previous->step || q->layer != previous->layer)
                tick++;
            ticks[i] = tick;
        }
    }
}

static int write_profile(const route_state *r, const analyze_options *options)
{
    size_t n = r->n_requests;
    int64_t *layers = malloc((n + 1) * sizeof *layers), *experts = malloc((n + 1) * sizeof *experts);
    uint64_t *ticks = malloc((n + 1) * sizeof *ticks);
    int status = -1;
    if (!layers || !experts || !ticks) {
        analyze_error("out of memory");
    } else {
        for (size_t i = 0; i < n; i++) {
            layers[i] = r->requests[i].layer;
            experts[i] = r->requests[i].expert;
        }
        store_ticks(r, ticks);
        status = route_profile_write(options->profile_path, options->model_path, layers, experts, ticks, n,
                                     store_half_life(r));
    }
    if (status == 0)
        printf("\nprofile: %s, for %s\n", options->profile_path, options->model_path);
    free(layers);
    free(experts);
    free(ticks);
    return status;
}

int view_route(const analyze_options *options)
{
    route_state r;
    memset(&r, 0, sizeof r);
    /* a profile is what the cache learns from the prompt and the answer */
    enum phase_filter phase = options->phase != PHASE_DEFAULT ? options->phase
                              : options->profile_path   ? PHASE_ALL
                                                        : PHASE_DECODE;
    r.phase = phase;
    int status = -1;
    if (table_read(&r.t, options->file) != 0)
        return -1;
    if (table_expect_kind(&r.t, KIND_ROUTE) != 0 || read_preamble(&r) != 0 ||
        read_requests(&r, phase) != 0)
        goto done;
    if (r.n_requests == 0) {
        analyze_error("%s: no %s rows to analyse", r.t.path, phase_name(phase));
        goto done;
    }
    /* Computed before anything is printed, so that a trace the replay
     * refuses prints only its one-line error. */
    drop_replay drops;
    if (options->n_drops > 0 && drop_replay_run(&r.t, options, &drops) != 0)
        goto done;
    if (build_keys(&r) != 0 || simulate(&r, options) != 0)
        goto done;
    print_header(&r, options);
    print_sizes(&r);
    if (print_popularity(&r) != 0 || print_reuse(&r) != 0)
        goto done;
    print_cache(&r);
    if (options->n_drops > 0)
        drop_replay_print(&drops);
    if (options->svg_dir &&
        (write_reuse_svg(&r, options->svg_dir) != 0 || write_hit_svg(&r, options->svg_dir) != 0))
        goto done;
    if (options->profile_path && write_profile(&r, options) != 0)
        goto done;
    status = 0;
done:
    route_free(&r);
    return status;
}
