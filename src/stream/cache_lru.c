/* Least recently used: a doubly linked list of the slots in use, most recent
 * at the head; the victim is the first evictable slot from the tail. */
#include <stdlib.h>

#include "cache_policy.h"

typedef struct lru_state {
    int *prev, *next;  /* [n_slots]; -1 ends the list */
    bool *listed;
    int head, tail;
} lru_state;

static void *lru_create(const cache_policy_params *params)
{
    lru_state *lru = calloc(1, sizeof *lru);
    if (!lru)
        return NULL;
    size_t count = params->n_slots > 0 ? (size_t)params->n_slots : 1;
    lru->prev = malloc(count * sizeof *lru->prev);
    lru->next = malloc(count * sizeof *lru->next);
    lru->listed = calloc(count, sizeof *lru->listed);
    if (!lru->prev || !lru->next || !lru->listed) {
        free(lru->prev);
        free(lru->next);
        free(lru->listed);
        free(lru);
        return NULL;
    }
    lru->head = lru->tail = -1;
    return lru;
}

static void lru_destroy(void *state)
{
    lru_state *lru = state;
    if (!lru)
        return;
    free(lru->prev);
    free(lru->next);
    free(lru->listed);
    free(lru);
}

static void lru_unlink(lru_state *lru, int slot)
{
    if (!lru->listed[slot])
        return;
    int p = lru->prev[slot], n = lru->next[slot];
    if (p >= 0)
        lru->next[p] = n;
    else
        lru->head = n;
    if (n >= 0)
        lru->prev[n] = p;
    else
        lru->tail = p;
    lru->listed[slot] = false;
}

static void lru_touch(void *state, int slot, int key, uint64_t now)
{
    (void)key;
    (void)now;
    lru_state *lru = state;
    lru_unlink(lru, slot);
    lru->prev[slot] = -1;
    lru->next[slot] = lru->head;
    if (lru->head >= 0)
        lru->prev[lru->head] = slot;
    lru->head = slot;
    if (lru->tail < 0)
        lru->tail = slot;
    lru->listed[slot] = true;
}

static void lru_insert_cold(void *state, int slot)
{
    lru_state *lru = state;
    lru_unlink(lru, slot);
    lru->next[slot] = -1;
    lru->prev[slot] = lru->tail;
    if (lru->tail >= 0)
        lru->next[lru->tail] = slot;
    lru->tail = slot;
    if (lru->head < 0)
        lru->head = slot;
    lru->listed[slot] = true;
}

static void lru_remove(void *state, int slot)
{
    lru_unlink(state, slot);
}

static int lru_victim(void *state, cache_slot_predicate may_evict, void *user)
{
    lru_state *lru = state;
    for (int slot = lru->tail; slot >= 0; slot = lru->prev[slot])
        if (may_evict(user, slot))
            return slot;
    return -1;
}

const cache_policy_ops cache_policy_lru = {
    .name = "lru",
    .create = lru_create,
    .destroy = lru_destroy,
    .touch = lru_touch,
    .insert_cold = lru_insert_cold,
    .remove = lru_remove,
    .victim = lru_victim,
};
