/* Least often used with exponential aging. Each entry (key) has a use count
 * in which a use made d ticks ago weighs 2^(-d / half_life); the victim is
 * the evictable slot whose entry has the lowest count now, ties to the one
 * used least recently; slots filled speculatively and not used yet go
 * before all others. Counts are kept for entries no longer held, so an
 * entry evicted and needed again is judged by its whole history: without
 * that history a re-read entry would count as new and go first again
 * (bmoe-analyze on the phone routing traces: the policy then hits less
 * than LRU).
 *
 * All counts decay at the same rate, so their order only changes on a use.
 * Each entry stores log(count at its last use) + lambda * (tick of that use)
 * (lambda = ln 2 / half_life): subtracting lambda * now from every value
 * gives the log of the count now, so comparing the stored values compares
 * the counts now, and a binary heap on them stays valid between uses. */
#include <math.h>
#include <stdlib.h>

#include "cache_policy.h"

typedef struct freq_state {
    double lambda;
    double *history;    /* [n_keys]: the stored value of each entry's last use; -inf: never used */
    double *value;      /* [n_slots]: the order of the slot's entry (-inf: inserted cold) */
    uint64_t *sequence; /* [n_slots]: when it was last touched or inserted, for ties */
    int *heap;          /* slots held, a binary min-heap on (value, sequence) */
    int *position;      /* [n_slots]: index in heap, -1 when not held */
    int *aside;         /* victim: slots taken off the heap and put back */
    int count, n_slots, n_keys;
    uint64_t next_sequence;
} freq_state;

static void freq_destroy(void *state)
{
    freq_state *f = state;
    if (!f)
        return;
    free(f->history);
    free(f->value);
    free(f->sequence);
    free(f->heap);
    free(f->position);
    free(f->aside);
    free(f);
}

static void *freq_create(const cache_policy_params *params)
{
    freq_state *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    size_t slots = params->n_slots > 0 ? (size_t)params->n_slots : 1;
    size_t keys = params->n_keys > 0 ? (size_t)params->n_keys : 1;
    f->n_slots = params->n_slots;
    f->n_keys = params->n_keys;
    f->lambda = params->half_life > 0.0 ? log(2.0) / params->half_life : 0.0;
    f->history = malloc(keys * sizeof *f->history);
    f->value = malloc(slots * sizeof *f->value);
    f->sequence = malloc(slots * sizeof *f->sequence);
    f->heap = malloc(slots * sizeof *f->heap);
    f->position = malloc(slots * sizeof *f->position);
    f->aside = malloc(slots * sizeof *f->aside);
    if (!f->history || !f->value || !f->sequence || !f->heap || !f->position || !f->aside) {
        freq_destroy(f);
        return NULL;
    }
    for (size_t k = 0; k < keys; k++)
        f->history[k] = -INFINITY;
    for (size_t s = 0; s < slots; s++)
        f->position[s] = -1;
    return f;
}

/* Slot a goes before slot b. Of two speculative fills the later goes first,
 * as in LRU: prefetches are issued nearest layer first, so the later one is
 * needed later. */
static bool goes_first(const freq_state *f, int a, int b)
{
    if (f->value[a] != f->value[b])
        return f->value[a] < f->value[b];
    if (isinf(f->value[a]))
        return f->sequence[a] > f->sequence[b];
    return f->sequence[a] < f->sequence[b];
}

static void heap_place(freq_state *f, int index, int slot)
{
    f->heap[index] = slot;
    f->position[slot] = index;
}

static void sift_up(freq_state *f, int index)
{
    int slot = f->heap[index];
    while (index > 0 && goes_first(f, slot, f->heap[(index - 1) / 2])) {
        heap_place(f, index, f->heap[(index - 1) / 2]);
        index = (index - 1) / 2;
    }
    heap_place(f, index, slot);
}

static void sift_down(freq_state *f, int index)
{
    int slot = f->heap[index];
    for (;;) {
        int child = 2 * index + 1;
        if (child >= f->count)
            break;
        if (child + 1 < f->count && goes_first(f, f->heap[child + 1], f->heap[child]))
            child++;
        if (!goes_first(f, f->heap[child], slot))
            break;
        heap_place(f, index, f->heap[child]);
        index = child;
    }
    heap_place(f, index, slot);
}

static void heap_remove(freq_state *f, int slot)
{
    int index = f->position[slot];
    if (index < 0)
        return;
    f->position[slot] = -1;
    int last = f->heap[--f->count];
    if (last == slot)
        return;
    heap_place(f, index, last);
    sift_up(f, index);
    sift_down(f, f->position[last]);
}

/* Gives slot a new order, adding it if it is not held. */
static void heap_set(freq_state *f, int slot, double value)
{
    heap_remove(f, slot);
    f->value[slot] = value;
    f->sequence[slot] = f->next_sequence++;
    heap_place(f, f->count++, slot);
    sift_up(f, f->count - 1);
}

static void freq_touch(void *state, int slot, int key, uint64_t now)
{
    freq_state *f = state;
    if (slot < 0 || slot >= f->n_slots || key < 0 || key >= f->n_keys)
        return;
    double aging = f->lambda * (double)now;
    double past = f->history[key];
    double count = isinf(past) ? 0.0 : exp(past - aging);
    f->history[key] = log(count + 1.0) + aging;
    heap_set(f, slot, f->history[key]);
}

static void freq_insert_cold(void *state, int slot)
{
    freq_state *f = state;
    if (slot >= 0 && slot < f->n_slots)
        heap_set(f, slot, -INFINITY);
}

static void freq_remove(void *state, int slot)
{
    freq_state *f = state;
    if (slot >= 0 && slot < f->n_slots)
        heap_remove(f, slot);
}

static double freq_weight(const void *state, int key, uint64_t now)
{
    const freq_state *f = state;
    if (key < 0 || key >= f->n_keys || isinf(f->history[key]))
        return 0.0;
    return exp(f->history[key] - f->lambda * (double)now);
}

static void freq_seed(void *state, int key, double weight, uint64_t now)
{
    freq_state *f = state;
    if (key < 0 || key >= f->n_keys)
        return;
    f->history[key] = weight > 0.0 ? log(weight) + f->lambda * (double)now : -INFINITY;
}

static void freq_admit(void *state, int slot, int key)
{
    freq_state *f = state;
    if (slot >= 0 && slot < f->n_slots && key >= 0 && key < f->n_keys)
        heap_set(f, slot, f->history[key]);
}

/* Takes slots off the heap in order until one may go, then puts them all
 * back: the skipped ones are the current layer's, a handful. */
static int freq_victim(void *state, cache_slot_predicate may_evict, void *user)
{
    freq_state *f = state;
    int victim = -1, n_aside = 0;
    while (f->count > 0) {
        int slot = f->heap[0];
        heap_remove(f, slot);
        f->aside[n_aside++] = slot;
        if (may_evict(user, slot)) {
            victim = slot;
            break;
        }
    }
    for (int i = 0; i < n_aside; i++) {
        int slot = f->aside[i];
        heap_place(f, f->count++, slot);
        sift_up(f, f->count - 1);
    }
    return victim;
}

const cache_policy_ops cache_policy_frequency = {
    .name = "freq",
    .create = freq_create,
    .destroy = freq_destroy,
    .touch = freq_touch,
    .insert_cold = freq_insert_cold,
    .remove = freq_remove,
    .victim = freq_victim,
    .weight = freq_weight,
    .seed = freq_seed,
    .admit = freq_admit,
};
