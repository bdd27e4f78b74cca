/* The cache simulators of bmoe-analyze (tools/analyze/cache.c) on tiny
 * traces whose hit counts are worked out by hand below, then against
 * brute force: Belady's MIN must equal the best eviction schedule an
 * exhaustive search finds on small uniform-size traces, and LRU must hit
 * exactly the reuses whose byte reuse distance plus own size fits. */
#include <stdint.h>
#include <stdlib.h>

#include "analyze.h"
#include "test.h"

enum { A, B, C, X };

static uint64_t lru(const uint32_t *keys, size_t n, const uint64_t *sizes, uint32_t n_keys,
                    uint64_t capacity)
{
    cache_trace trace = {.keys = keys, .n = n, .key_bytes = sizes, .n_keys = n_keys};
    uint64_t hits = UINT64_MAX;
    CHECK(cache_policy_hits(&trace, &cache_policy_lru, 0.0, capacity, &hits) == 0);
    return hits;
}

/* The frequency policy with a half-life of 1000 requests (ticks i + 1). */
static uint64_t frequency(const uint32_t *keys, size_t n, const uint64_t *sizes, uint32_t n_keys,
                          uint64_t capacity)
{
    cache_trace trace = {.keys = keys, .n = n, .key_bytes = sizes, .n_keys = n_keys};
    uint64_t hits = UINT64_MAX;
    CHECK(cache_policy_hits(&trace, &cache_policy_frequency, 1000.0, capacity, &hits) == 0);
    return hits;
}

static uint64_t belady(const uint32_t *keys, size_t n, const uint64_t *sizes, uint32_t n_keys,
                       uint64_t capacity)
{
    cache_trace trace = {.keys = keys, .n = n, .key_bytes = sizes, .n_keys = n_keys};
    size_t *next = malloc((n + 1) * sizeof *next);
    uint64_t hits = UINT64_MAX;
    CHECK(next && cache_next_uses(&trace, next) == 0);
    CHECK(cache_belady_hits(&trace, next, capacity, &hits) == 0);
    free(next);
    return hits;
}

static void test_hand_worked(void)
{
    static const uint64_t unit[] = {1, 1, 1, 1};

    /* A B C A B C, room for 2 entries.
     * LRU: A, B miss; C evicts A; A evicts B; B evicts C; C evicts A: 0 hits.
     * MIN: A, B miss; C misses and evicts B (next use 5, A's is 4); A hits
     * (never used again now); B misses and evicts A (never used again); C
     * hits: 2 hits. Belady beats LRU by 2. */
    static const uint32_t cyclic[] = {A, B, C, A, B, C};
    CHECK(lru(cyclic, 6, unit, 3, 2) == 0);
    CHECK(belady(cyclic, 6, unit, 3, 2) == 2);

    /* Budget 0: nothing fits, nothing hits. */
    CHECK(lru(cyclic, 6, unit, 3, 0) == 0);
    CHECK(belady(cyclic, 6, unit, 3, 0) == 0);

    /* Room for everything: only the 3 compulsory misses, 6 - 3 = 3 hits. */
    CHECK(lru(cyclic, 6, unit, 3, 3) == 3);
    CHECK(belady(cyclic, 6, unit, 3, 3) == 3);
    CHECK(lru(cyclic, 6, unit, 3, 1000) == 3);
    CHECK(belady(cyclic, 6, unit, 3, 1000) == 3);

    /* A B A C A B, room for 2.
     * LRU: A, B miss; A hits; C evicts B (A is more recent); A hits; B
     * misses: 2 hits. MIN: A, B miss; A hits; C evicts B (next use 6 vs
     * A's 5); A hits; B misses: 2 hits. Equal here. */
    static const uint32_t recency[] = {A, B, A, C, A, B};
    CHECK(lru(recency, 6, unit, 3, 2) == 2);
    CHECK(belady(recency, 6, unit, 3, 2) == 2);

    /* Variable sizes: A = 2, B = 1, C = 1 bytes, room for 3. A B C A.
     * LRU: A (2), B (3 used) miss; C needs 1 more: evicts A, the least
     * recent (used 2); A needs 2: evicts B (used 1), fits: 0 hits.
     * MIN: C evicts B (never used again) instead; A hits: 1 hit. */
    static const uint64_t mixed[] = {2, 1, 1};
    static const uint32_t sized[] = {A, B, C, A};
    CHECK(lru(sized, 4, mixed, 3, 3) == 0);
    CHECK(belady(sized, 4, mixed, 3, 3) == 1);

    /* A A A B C A, room for 2: a burst of new entries.
     * LRU: C evicts A (the least recent), A misses: 2 hits. Frequency: C
     * evicts B (1 use against A's 3), A hits: 3, as MIN. */
    static const uint32_t burst[] = {A, A, A, B, C, A};
    CHECK(lru(burst, 6, unit, 3, 2) == 2);
    CHECK(frequency(burst, 6, unit, 3, 2) == 3);
    CHECK(belady(burst, 6, unit, 3, 2) == 3);
    /* The cyclic trace: frequency counts tie, the oldest goes, as in LRU. */
    CHECK(frequency(cyclic, 6, unit, 3, 2) == 0);
    CHECK(frequency(cyclic, 6, unit, 3, 3) == 3);
    CHECK(frequency(cyclic, 6, unit, 3, 0) == 0);

    /* An entry larger than the budget is never cached and evicts nothing:
     * X = 5 bytes, A = 1, room for 3. X A X A: X misses twice, A misses
     * then hits: 1 hit for both. */
    static const uint64_t big[] = {1, 0, 0, 5};
    static const uint32_t oversized[] = {X, A, X, A};
    CHECK(lru(oversized, 4, big, 4, 3) == 1);
    CHECK(frequency(oversized, 4, big, 4, 3) == 1);
    CHECK(belady(oversized, 4, big, 4, 3) == 1);

    /* Reuse distances of A B A C A B: the first uses have none; A at 3 saw
     * {B} = 1; A at 5 saw {C} = 1; B at 6 saw {A, C} = 2 (A twice counts
     * once). Bytes with unit sizes equal the counts. */
    cache_trace trace = {.keys = recency, .n = 6, .key_bytes = unit, .n_keys = 3};
    uint32_t entries[6];
    uint64_t bytes[6];
    CHECK(cache_reuse_distances(&trace, entries, bytes) == 0);
    CHECK(entries[0] == UINT32_MAX && entries[1] == UINT32_MAX && entries[3] == UINT32_MAX);
    CHECK(entries[2] == 1 && entries[4] == 1 && entries[5] == 2);
    CHECK(bytes[2] == 1 && bytes[4] == 1 && bytes[5] == 2);
    /* The same with sizes A = 2, B = 1, C = 4: B at 6 saw A and C, 6 bytes. */
    static const uint64_t weights[] = {2, 1, 4};
    trace.key_bytes = weights;
    CHECK(cache_reuse_distances(&trace, entries, bytes) == 0);
    CHECK(bytes[2] == 1 && bytes[4] == 4 && bytes[5] == 6 && entries[5] == 2);

    /* next use: A B A C A B -> 2, 5, 4, never, never, never. */
    size_t next[6];
    trace.key_bytes = unit;
    CHECK(cache_next_uses(&trace, next) == 0);
    CHECK(next[0] == 2 && next[1] == 5 && next[2] == 4);
    CHECK(next[3] == CACHE_NEVER && next[4] == CACHE_NEVER && next[5] == CACHE_NEVER);
}

/* The most hits any demand cache of `room` entries can get from request i
 * on, trying every eviction choice. Keys < 32, a bit set of what is held. */
static int best_hits(const uint32_t *keys, size_t n, size_t i, uint32_t held, int room)
{
    if (i == n)
        return 0;
    uint32_t bit = 1u << keys[i];
    if (held & bit)
        return 1 + best_hits(keys, n, i + 1, held, room);
    if (__builtin_popcount(held) < room)
        return best_hits(keys, n, i + 1, held | bit, room);
    int best = 0;
    for (uint32_t victim = 0; victim < 32; victim++)
        if (held & (1u << victim)) {
            int hits = best_hits(keys, n, i + 1, (held & ~(1u << victim)) | bit, room);
            best = hits > best ? hits : best;
        }
    return best;
}

static void test_belady_is_optimal_for_uniform_sizes(void)
{
    static const uint64_t unit[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    uint64_t state = 12345;
    int mismatches = 0, lru_above = 0, frequency_above = 0;
    for (int round = 0; round < 300; round++) {
        uint32_t keys[13];
        uint32_t n_keys = 3 + (uint32_t)(stats_random(&state) % 4);
        for (size_t i = 0; i < 13; i++)
            keys[i] = (uint32_t)(stats_random(&state) % n_keys);
        int room = 1 + (int)(stats_random(&state) % 3);
        int best = best_hits(keys, 13, 0, 0, room);
        if (belady(keys, 13, unit, n_keys, (uint64_t)room) != (uint64_t)best)
            mismatches++;
        if (lru(keys, 13, unit, n_keys, (uint64_t)room) > (uint64_t)best)
            lru_above++;
        if (frequency(keys, 13, unit, n_keys, (uint64_t)room) > (uint64_t)best)
            frequency_above++;
    }
    CHECK_MSG(mismatches == 0, "%d traces where MIN missed the optimum", mismatches);
    CHECK_MSG(lru_above == 0, "%d traces where LRU beat the optimum", lru_above);
    CHECK_MSG(frequency_above == 0, "%d traces where the frequency policy beat the optimum",
              frequency_above);
}

/* LRU with byte sizes keeps the most recent entries that fit, so it hits a
 * reuse exactly when the bytes of the distinct entries touched since, plus
 * its own, fit the capacity (for capacities that hold the largest entry). */
static void test_lru_matches_reuse_distance(void)
{
    enum { N = 3000, KEYS = 60 };
    uint32_t *keys = malloc(N * sizeof *keys);
    uint32_t *entries = malloc(N * sizeof *entries);
    uint64_t *bytes = malloc(N * sizeof *bytes);
    uint64_t sizes[KEYS];
    uint64_t state = 777, total = 0;
    CHECK(keys && entries && bytes);
    if (!keys || !entries || !bytes)
        goto done;
    for (int k = 0; k < KEYS; k++) {
        sizes[k] = 1 + stats_random(&state) % 5;
        total += sizes[k];
    }
    /* Skewed popularity, like routing: low keys far more often. */
    for (size_t i = 0; i < N; i++) {
        uint64_t r = stats_random(&state);
        keys[i] = (uint32_t)((r % KEYS) * ((r >> 32) % KEYS) / KEYS);
    }
    cache_trace trace = {.keys = keys, .n = N, .key_bytes = sizes, .n_keys = KEYS};
    CHECK(cache_reuse_distances(&trace, entries, bytes) == 0);
    int mismatches = 0, belady_below = 0;
    uint64_t previous_lru = 0;
    bool monotone = true;
    for (uint64_t capacity = 5; capacity <= total + 5; capacity += 3) {
        uint64_t expected = 0;
        for (size_t i = 0; i < N; i++)
            if (entries[i] != UINT32_MAX && bytes[i] + sizes[keys[i]] <= capacity)
                expected++;
        uint64_t got = lru(keys, N, sizes, KEYS, capacity);
        if (got != expected)
            mismatches++;
        if (got < previous_lru)
            monotone = false;
        previous_lru = got;
        /* With unit sizes MIN is optimal, so it never falls below LRU. */
        static uint64_t unit[KEYS];
        for (int k = 0; k < KEYS; k++)
            unit[k] = 1;
        if (capacity <= KEYS &&
            belady(keys, N, unit, KEYS, capacity) < lru(keys, N, unit, KEYS, capacity))
            belady_below++;
    }
    CHECK_MSG(mismatches == 0, "%d capacities where LRU disagrees with the reuse distances",
              mismatches);
    CHECK(monotone);
    CHECK(belady_below == 0);
    /* Holding everything: only first uses miss. */
    uint64_t distinct = 0;
    for (size_t i = 0; i < N; i++)
        distinct += entries[i] == UINT32_MAX;
    CHECK(lru(keys, N, sizes, KEYS, total) == N - distinct);
    CHECK(belady(keys, N, sizes, KEYS, total) == N - distinct);
done:
    free(keys);
    free(entries);
    free(bytes);
}

/* stats.c is linked too: the percentile and bootstrap definitions. */
static void test_stats(void)
{
    double sorted[] = {1, 2, 3, 4};
    CHECK(stats_percentile(sorted, 4, 0) == 1);
    CHECK(stats_percentile(sorted, 4, 100) == 4);
    CHECK(stats_percentile(sorted, 4, 50) == 2.5);   /* rank 1.5 */
    CHECK(stats_percentile(sorted, 4, 25) == 1.75);  /* rank 0.75 */
    double same[] = {100, 100, 100};
    double low, high;
    CHECK(stats_bootstrap_rate(same, 3, 1000, 500, 1, &low, &high) == 0);
    CHECK(low == 10 && high == 10); /* every resample is 3 x 1000 / 300 */
    double spread[] = {100, 200, 400, 800, 50};
    double low2, high2;
    CHECK(stats_bootstrap_rate(spread, 5, 1000, 500, 1, &low, &high) == 0);
    CHECK(stats_bootstrap_rate(spread, 5, 1000, 500, 1, &low2, &high2) == 0);
    CHECK(low == low2 && high == high2); /* same seed, same interval */
    double rate = 5 * 1000.0 / 1550;
    CHECK(low < rate && rate < high);
}

int main(void)
{
    test_hand_worked();
    test_belady_is_optimal_for_uniform_sizes();
    test_lru_matches_reuse_distance();
    test_stats();
    return test_finish();
}
