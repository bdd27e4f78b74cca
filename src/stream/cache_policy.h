/* Replacement policy of the expert cache, behind a small interface so that a
 * better policy can be compared against LRU on the same slots. The cache
 * calls it with slot indices; the policy orders them and names a victim
 * among the slots the cache says may go (not pinned by the current layer).
 * Owns: its own ordering state (created for a fixed number of slots). */
#ifndef BMOE_STREAM_CACHE_POLICY_H
#define BMOE_STREAM_CACHE_POLICY_H

#include <stdbool.h>

typedef struct cache_policy cache_policy;

typedef bool (*cache_slot_predicate)(void *user, int slot);

typedef struct cache_policy_ops {
    const char *name;
    void *(*create)(int n_slots);
    void (*destroy)(void *state);
    /* slot was used now (a hit, or just filled on demand) */
    void (*touch)(void *state, int slot);
    /* slot was filled speculatively: the first to go unless it is used */
    void (*insert_cold)(void *state, int slot);
    /* slot holds nothing any more */
    void (*remove)(void *state, int slot);
    /* the slot to evict among those the predicate allows; -1 if none */
    int (*victim)(void *state, cache_slot_predicate may_evict, void *user);
} cache_policy_ops;

extern const cache_policy_ops cache_policy_lru;

#endif
