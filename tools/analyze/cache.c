/* Cache simulators over a stream of requests for keys of known byte sizes:
 * the expert cache's own replacement policies (src/stream/cache_policy.h:
 * LRU, aged frequency), Belady's MIN (a max-heap on next use
 * with stale entries skipped), and reuse distances (Fenwick trees over
 * request positions marking each key's latest request, so the distinct keys
 * between two uses, and their bytes, are a range sum). Every simulator is
 * O(n log n) or better; nothing here knows the route-trace format. */
#include <stdlib.h>
#include <string.h>

#include "analyze.h"

/* The policy of the expert store over the trace: each key has a slot of its
 * own (the policy orders keys), the budget is counted in bytes here. */
static bool any_slot(void *user, int slot)
{
    (void)user;
    (void)slot;
    return true;
}

int cache_policy_hits(const cache_trace *trace, const cache_policy_ops *ops, double half_life,
                      uint64_t capacity, uint64_t *hits_out)
{
    cache_policy_params params = {.n_slots = (int)trace->n_keys, .n_keys = (int)trace->n_keys,
                                  .half_life = half_life};
    void *state = ops->create(&params);
    bool *resident = calloc((size_t)trace->n_keys + 1, sizeof *resident);
    if (!state || !resident) {
        if (state)
            ops->destroy(state);
        free(resident);
        return -1;
    }
    uint64_t used = 0, hits = 0;
    for (size_t i = 0; i < trace->n; i++) {
        uint32_t key = trace->keys[i];
        uint64_t bytes = trace->key_bytes[key];
        if (resident[key]) {
            hits++;
        } else {
            if (bytes > capacity)
                continue;
            while (used + bytes > capacity) {
                int victim = ops->victim(state, any_slot, NULL);
                if (victim < 0)
                    break; /* cannot happen: something is resident while used > 0 */
                ops->remove(state, victim);
                resident[victim] = false;
                used -= trace->key_bytes[victim];
            }
            resident[key] = true;
            used += bytes;
        }
        ops->touch(state, (int)key, (int)key, trace->ticks ? trace->ticks[i] : (uint64_t)i + 1);
    }
    ops->destroy(state);
    free(resident);
    *hits_out = hits;
    return 0;
}

int cache_next_uses(const cache_trace *trace, size_t *next_use)
{
    size_t *upcoming = malloc((size_t)trace->n_keys * sizeof *upcoming);
    if (!upcoming)
        return -1;
    for (uint32_t k = 0; k < trace->n_keys; k++)
        upcoming[k] = CACHE_NEVER;
    for (size_t i = trace->n; i-- > 0;) {
        next_use[i] = upcoming[trace->keys[i]];
        upcoming[trace->keys[i]] = i;
    }
    free(upcoming);
    return 0;
}

/* A max-heap of (next use, key): the top is the entry to evict. Entries go
 * stale when their key is evicted or used again; a stale one is recognised
 * by its next use no longer matching the key's and skipped when popped. */
typedef struct {
    size_t when;
    uint32_t key;
} heap_entry;

static bool heap_above(heap_entry a, heap_entry b)
{
    return a.when > b.when || (a.when == b.when && a.key > b.key);
}

static void heap_push(heap_entry *heap, size_t *count, heap_entry entry)
{
    size_t i = (*count)++;
    while (i > 0 && heap_above(entry, heap[(i - 1) / 2])) {
        heap[i] = heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    heap[i] = entry;
}

static heap_entry heap_pop(heap_entry *heap, size_t *count)
{
    heap_entry top = heap[0], last = heap[--*count];
    size_t i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= *count)
            break;
        if (child + 1 < *count && heap_above(heap[child + 1], heap[child]))
            child++;
        if (!heap_above(heap[child], last))
            break;
        heap[i] = heap[child];
        i = child;
    }
    if (*count > 0)
        heap[i] = last;
    return top;
}

int cache_belady_hits(const cache_trace *trace, const size_t *next_use, uint64_t capacity,
                      uint64_t *hits_out)
{
    size_t *current = malloc(((size_t)trace->n_keys + 1) * sizeof *current);
    bool *resident = calloc((size_t)trace->n_keys + 1, sizeof *resident);
    /* One push per request bounds the heap. */
    heap_entry *heap = malloc((trace->n + 1) * sizeof *heap);
    if (!current || !resident || !heap) {
        free(current);
        free(resident);
        free(heap);
        return -1;
    }
    size_t count = 0;
    uint64_t used = 0, hits = 0;
    for (size_t i = 0; i < trace->n; i++) {
        uint32_t key = trace->keys[i];
        uint64_t bytes = trace->key_bytes[key];
        if (resident[key]) {
            hits++;
        } else {
            if (bytes > capacity)
                continue;
            while (used + bytes > capacity && count > 0) {
                heap_entry victim = heap_pop(heap, &count);
                if (!resident[victim.key] || current[victim.key] != victim.when)
                    continue; /* stale */
                resident[victim.key] = false;
                used -= trace->key_bytes[victim.key];
            }
            resident[key] = true;
            used += bytes;
        }
        current[key] = next_use[i];
        heap_push(heap, &count, (heap_entry){.when = next_use[i], .key = key});
    }
    free(current);
    free(resident);
    free(heap);
    *hits_out = hits;
    return 0;
}

/* Fenwick trees over positions 1..n. */
static void fenwick_add(int32_t *counts, uint64_t *bytes, size_t n, size_t position, int32_t count,
                        uint64_t size)
{
    for (size_t i = position; i <= n; i += i & (~i + 1)) {
        counts[i] += count;
        bytes[i] += size; /* wraps back exactly when a mark is removed */
    }
}

static void fenwick_prefix(const int32_t *counts, const uint64_t *bytes, size_t position,
                           int64_t *count_out, uint64_t *bytes_out)
{
    int64_t count = 0;
    uint64_t total = 0;
    for (size_t i = position; i > 0; i -= i & (~i + 1)) {
        count += counts[i];
        total += bytes[i];
    }
    *count_out = count;
    *bytes_out = total;
}

int cache_reuse_distances(const cache_trace *trace, uint32_t *entries, uint64_t *bytes)
{
    size_t n = trace->n;
    int32_t *counts = calloc(n + 1, sizeof *counts);
    uint64_t *sizes = calloc(n + 1, sizeof *sizes);
    size_t *last = malloc((size_t)trace->n_keys * sizeof *last);
    if (!counts || !sizes || !last) {
        free(counts);
        free(sizes);
        free(last);
        return -1;
    }
    for (uint32_t k = 0; k < trace->n_keys; k++)
        last[k] = CACHE_NEVER;
    for (size_t i = 0; i < n; i++) {
        uint32_t key = trace->keys[i];
        uint64_t size = trace->key_bytes[key];
        size_t position = i + 1;
        if (last[key] == CACHE_NEVER) {
            entries[i] = UINT32_MAX;
            bytes[i] = UINT64_MAX;
        } else {
            /* Marks strictly between the previous use and now: each is the
             * latest request of one distinct other key. */
            int64_t count_now, count_then;
            uint64_t bytes_now, bytes_then;
            fenwick_prefix(counts, sizes, position - 1, &count_now, &bytes_now);
            fenwick_prefix(counts, sizes, last[key], &count_then, &bytes_then);
            entries[i] = (uint32_t)(count_now - count_then);
            bytes[i] = bytes_now - bytes_then;
            fenwick_add(counts, sizes, n, last[key], -1, (uint64_t)0 - size);
        }
        fenwick_add(counts, sizes, n, position, 1, size);
        last[key] = position;
    }
    free(counts);
    free(sizes);
    free(last);
    return 0;
}
