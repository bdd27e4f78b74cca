/* The expert cache's replacement policies (src/stream/cache_policy.h): LRU
 * and the aged frequency policy on hand-worked sequences, then the frequency
 * policy's heap against a brute-force count of every slot's uses over a long
 * random sequence of touches, cold inserts, removals and pinned slots. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../../src/stream/cache_policy.h"
#include "test.h"

/* The predicate: slots whose flag is set may not go. */
static bool not_held(void *user, int slot)
{
    const bool *held = user;
    return !held[slot];
}

static int victim(const cache_policy_ops *ops, void *state, bool *held)
{
    return ops->victim(state, not_held, held);
}

static void *create(const cache_policy_ops *ops, int n_slots, int n_keys, double half_life)
{
    cache_policy_params params = {.n_slots = n_slots, .n_keys = n_keys, .half_life = half_life};
    void *state = ops->create(&params);
    CHECK(state != NULL);
    return state;
}

static void test_lru(void)
{
    const cache_policy_ops *ops = &cache_policy_lru;
    bool held[4] = {false};
    void *lru = create(ops, 4, 16, 0.0);
    if (!lru)
        return;
    CHECK(victim(ops, lru, held) == -1); /* nothing held */
    /* slot s holds key 10 + s; a key's uses count for nothing here */
    for (int s = 0; s < 3; s++)
        ops->touch(lru, s, 10 + s, (uint64_t)s + 1);
    for (int i = 0; i < 5; i++)
        ops->touch(lru, 1, 11, 4); /* many uses, but not the most recent */
    ops->touch(lru, 0, 10, 5);
    ops->touch(lru, 2, 12, 6);
    CHECK(victim(ops, lru, held) == 1); /* least recent: 1 (at 4), then 0 (5), then 2 (6) */
    held[1] = true;
    CHECK(victim(ops, lru, held) == 0);
    held[0] = held[2] = true;
    CHECK(victim(ops, lru, held) == -1);
    held[0] = held[1] = held[2] = false;
    ops->insert_cold(lru, 3); /* speculative: first to go */
    CHECK(victim(ops, lru, held) == 3);
    ops->touch(lru, 3, 13, 7); /* used: now the most recent */
    CHECK(victim(ops, lru, held) == 1);
    ops->remove(lru, 1);
    CHECK(victim(ops, lru, held) == 0);
    ops->destroy(lru);
}

static void test_frequency(void)
{
    const cache_policy_ops *ops = &cache_policy_frequency;
    enum { A = 0, B = 1, C = 2, D = 3, E = 4 };
    bool held[4] = {false};
    void *f = create(ops, 4, 8, 10.0);
    if (!f)
        return;
    CHECK(victim(ops, f, held) == -1);

    /* A used three times, B and C once each, C last: B's single use is older,
     * so it counts less than C's (2^(-1/10) against 1); A counts about 2.4. */
    ops->touch(f, 0, A, 1);
    ops->touch(f, 0, A, 2);
    ops->touch(f, 0, A, 3);
    ops->touch(f, 1, B, 4);
    ops->touch(f, 2, C, 5);
    CHECK(victim(ops, f, held) == 1);
    held[1] = true; /* B held: C goes, not A */
    CHECK(victim(ops, f, held) == 2);
    held[1] = false;

    /* One more use each at 6: B 2^(-0.2) + 1 = 1.87, C 2^(-0.1) + 1 = 1.93,
     * A 2^(-0.5) + 2^(-0.4) + 2^(-0.3) = 2.28. */
    ops->touch(f, 1, B, 6);
    ops->touch(f, 2, C, 6);
    CHECK(victim(ops, f, held) == 1);

    /* Aging: a hundred ticks later one new use outweighs A's old three. */
    ops->remove(f, 1);
    ops->remove(f, 2);
    ops->touch(f, 1, D, 103);
    CHECK(victim(ops, f, held) == 0);

    /* Ties: D and E first used at the same tick count the same; the one
     * touched first goes first. */
    ops->remove(f, 0);
    ops->touch(f, 2, E, 103);
    CHECK(victim(ops, f, held) == 1);

    /* A speculative fill goes first until it is used; of two, the later
     * (prefetches are issued nearest layer first). */
    ops->insert_cold(f, 0);
    ops->insert_cold(f, 3);
    CHECK(victim(ops, f, held) == 3);
    held[3] = true;
    CHECK(victim(ops, f, held) == 0);
    held[3] = false;
    ops->remove(f, 0);
    CHECK(victim(ops, f, held) == 3);
    held[3] = true;
    CHECK(victim(ops, f, held) == 1);
    held[3] = false;
    ops->touch(f, 3, C, 104); /* C: 1.93 x 2^(-9.8) + 1, just above D and E */
    CHECK(victim(ops, f, held) == 1);
    ops->remove(f, 1);
    ops->remove(f, 2);
    ops->remove(f, 3);
    CHECK(victim(ops, f, held) == -1);

    /* History: A used five times, evicted, then read again and used once:
     * it counts its past uses (about 5.5), so B, used twice since, goes
     * first. Counting A from zero it would be 1 and go first. */
    for (uint64_t t = 200; t < 205; t++)
        ops->touch(f, 0, A, t);
    ops->remove(f, 0);
    ops->touch(f, 1, B, 205);
    ops->touch(f, 1, B, 205);
    ops->touch(f, 2, A, 206);
    CHECK(victim(ops, f, held) == 1);
    ops->remove(f, 1);
    ops->remove(f, 2);

    /* out-of-range slots and keys change nothing */
    ops->touch(f, 4, A, 207);
    ops->touch(f, 0, 8, 207);
    ops->touch(f, -1, A, 207);
    ops->insert_cold(f, 4);
    ops->remove(f, -1);
    CHECK(victim(ops, f, held) == -1);
    ops->destroy(f);
}

/* xorshift64 */
static uint64_t next_random(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

enum { N_SLOTS = 48, N_KEYS = 160, MAX_USES = 4096, STEPS = 20000 };

/* Every use of every key, to count them the long way. */
typedef struct brute_force {
    uint64_t uses[N_KEYS][MAX_USES];
    int n_uses[N_KEYS];
    int slot_key[N_SLOTS];   /* -1: empty; -2: inserted cold */
    uint64_t order[N_SLOTS]; /* when touched or inserted */
} brute_force;

static double count_now(const brute_force *b, int key, uint64_t now, double half_life)
{
    double count = 0.0;
    for (int i = 0; i < b->n_uses[key]; i++)
        count += exp2(-(double)(now - b->uses[key][i]) / half_life);
    return count;
}

static void test_frequency_against_brute_force(void)
{
    const double half_life = 96.0;
    const cache_policy_ops *ops = &cache_policy_frequency;
    static brute_force b;
    memset(&b, 0, sizeof b);
    for (int s = 0; s < N_SLOTS; s++)
        b.slot_key[s] = -1;
    void *f = create(ops, N_SLOTS, N_KEYS, half_life);
    if (!f)
        return;
    bool held[N_SLOTS] = {false};
    uint64_t random = 0x9e3779b97f4a7c15ull, now = 1, sequence = 0;
    int checked = 0, mismatches = 0;
    for (int step = 0; step < STEPS; step++) {
        uint64_t r = next_random(&random);
        int slot = (int)(r % N_SLOTS);
        /* skewed keys: low keys are used far more often */
        int key = (int)((next_random(&random) % N_KEYS) * (next_random(&random) % N_KEYS) / N_KEYS);
        now += (r >> 20) % 3 == 0;
        int action = (int)((r >> 8) % 10);
        if (action < 6) {
            if (b.n_uses[key] >= MAX_USES)
                continue;
            /* as in the store, an entry is in one slot at most */
            for (int other = 0; other < N_SLOTS; other++)
                if (other != slot && b.slot_key[other] == key) {
                    ops->remove(f, other);
                    b.slot_key[other] = -1;
                }
            ops->touch(f, slot, key, now);
            b.uses[key][b.n_uses[key]++] = now;
            b.slot_key[slot] = key;
            b.order[slot] = sequence++;
        } else if (action == 6) {
            ops->insert_cold(f, slot);
            b.slot_key[slot] = -2;
            b.order[slot] = sequence++;
        } else if (action == 7) {
            ops->remove(f, slot);
            b.slot_key[slot] = -1;
        } else if (action == 8) {
            held[slot] = !held[slot];
        } else {
            /* the victim must be a slot not held with the least count now,
             * ties to the earliest touched; cold ones first, the latest first */
            int got = victim(ops, f, held);
            int want = -1;
            double want_count = 0.0;
            for (int s = 0; s < N_SLOTS; s++) {
                if (b.slot_key[s] == -1 || held[s])
                    continue;
                double c = b.slot_key[s] == -2 ? -1.0 : count_now(&b, b.slot_key[s], now, half_life);
                bool earlier = want >= 0 && (c < 0 ? b.order[s] > b.order[want] : b.order[s] < b.order[want]);
                if (want < 0 || c < want_count || (c == want_count && earlier)) {
                    want = s;
                    want_count = c;
                }
            }
            checked++;
            if (got == want)
                continue;
            /* the heap compares logs of counts: a near-tie may round either way */
            bool near_tie = got >= 0 && want >= 0 && b.slot_key[got] >= 0 && b.slot_key[want] >= 0 &&
                            !held[got] &&
                            fabs(count_now(&b, b.slot_key[got], now, half_life) - want_count) <= 1e-9 * want_count;
            if (!near_tie) {
                mismatches++;
                if (mismatches <= 5)
                    CHECK_MSG(false, "step %d: victim %d (key %d), want %d (key %d, count %.12g)", step, got,
                              got >= 0 ? b.slot_key[got] : -1, want, want >= 0 ? b.slot_key[want] : -1, want_count);
            }
        }
    }
    CHECK_MSG(mismatches == 0, "%d of %d victims differ from the brute-force count", mismatches, checked);
    CHECK(checked > 1000);
    ops->destroy(f);
}

int main(void)
{
    test_lru();
    test_frequency();
    test_frequency_against_brute_force();
    return test_finish();
}
