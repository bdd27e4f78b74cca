/* Replacement policy of the expert cache, behind a small interface so that
 * policies can be compared on the same slots (and, in bmoe-analyze, on
 * recorded routing). The cache calls it with slot indices and the entry a
 * slot holds; the policy orders the slots and names a victim among those the
 * cache says may go (not pinned by the current layer, not being read).
 * Owns: its own ordering state (created for a fixed number of slots and
 * entries). Libc and libm only, so the analyzer can drive the same code. */
#ifndef BMOE_STREAM_CACHE_POLICY_H
#define BMOE_STREAM_CACHE_POLICY_H

#include <stdbool.h>
#include <stdint.h>

typedef bool (*cache_slot_predicate)(void *user, int slot);

typedef struct cache_policy_params {
    int n_slots;
    int n_keys;              /* entries that may ever be held: keys 0 .. n_keys - 1 */
    double half_life;        /* frequency: ticks after which a use counts half */
} cache_policy_params;

typedef struct cache_policy_ops {
    const char *name;
    void *(*create)(const cache_policy_params *params);
    void (*destroy)(void *state);
    /* slot, holding entry key, was used at tick now (a hit, or just filled
     * on demand); ticks never go back */
    void (*touch)(void *state, int slot, int key, uint64_t now);
    /* slot was filled speculatively: the first to go unless it is used */
    void (*insert_cold)(void *state, int slot);
    /* slot holds nothing any more */
    void (*remove)(void *state, int slot);
    /* the slot to evict among those the predicate allows; -1 if none */
    int (*victim)(void *state, cache_slot_predicate may_evict, void *user);
    /* Use counts, for the expert profile (NULL in a policy that keeps
     * none): the weight of key's uses at tick now (0: never used); key's
     * uses set to weight as of tick now (its past forgotten); slot, just
     * filled with key, ordered by key's uses without counting one more. */
    double (*weight)(const void *state, int key, uint64_t now);
    void (*seed)(void *state, int key, double weight, uint64_t now);
    void (*admit)(void *state, int slot, int key);
} cache_policy_ops;

/* The frequency policy's half-life, in tokens (passes over the MoE layers;
 * the expert store ticks once per layer it is asked for): on the three phone
 * routing traces (shared/data/route-traces, bmoe-analyze route) 8 to 32
 * tokens hit within a point of each other at every budget, 4 up to 3 points
 * less. */
#define CACHE_FREQUENCY_HALF_LIFE_TOKENS 16

/* Least recently used. */
extern const cache_policy_ops cache_policy_lru;
/* Least often used, each use's weight halving every half_life ticks, with a
 * history of entries no longer held (an entry read again starts from its
 * past uses, not from zero). */
extern const cache_policy_ops cache_policy_frequency;

#endif
