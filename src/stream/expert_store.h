/* The expert store: where the MoE layer gets the bytes of the routed experts.
 * The models ask it, once per layer per batch (in groups no larger than
 * expert_store_capacity), for "these experts of this layer" and get, per
 * expert and projection, a pointer and (under overlap) a readiness handle
 * the matmul waits on. Resident, the pointers are into the file mapping and
 * nothing is read. Streaming, the experts live in a bounded cache of fixed
 * slots (anonymous memory allocated once) filled from the file by the I/O
 * lanes; no expert byte is read through the mapping.
 *
 * The store knows byte ranges of (layer, expert, projection) and nothing of
 * the model's math; the models know nothing of files, lanes or slots.
 * Owns: the slots, the cache index and policy, the lanes, the counters. */
#ifndef BMOE_STREAM_EXPERT_STORE_H
#define BMOE_STREAM_EXPERT_STORE_H

#include <stdbool.h>
#include <stdint.h>

#include "../base/error.h"
#include "../kernels/matmul.h"
#include "cache_policy.h"
#include "io_lanes.h"

/* Gate, up and down, or a fused gate_up and down. */
#define EXPERT_MAX_PROJECTIONS 3

/* Where one projection of one layer's experts is: expert e is the byte range
 * [file_offset + e * expert_bytes, + expert_bytes) of shard. */
typedef struct expert_projection_source {
    const uint8_t *resident;   /* expert 0 in the mapping; unused when streaming */
    uint32_t shard;
    uint64_t file_offset;
    uint64_t expert_bytes;
} expert_projection_source;

typedef struct expert_layer_source {
    int n_projections;         /* 0: the layer has no routed experts */
    expert_projection_source projections[EXPERT_MAX_PROJECTIONS];
} expert_layer_source;

typedef struct expert_store_config {
    bool streaming;            /* false: resident (pointers into the mapping) */
    int64_t cache_bytes;       /* streaming: the cache budget; 0: no cache (re-read every token) */
    const cache_policy_ops *policy; /* which entries the cache keeps (NULL: LRU) */
    int io_threads;            /* read lanes, 1..16 */
    bool direct;               /* O_DIRECT where the file system serves it right */
    bool overlap;              /* compute resident experts while the missing ones are read */
    int n_expert_used;         /* the routing width (sizes the staging area of cache 0) */
    int prefetch;              /* read the previous token's experts this many MoE layers ahead */
    bool stage_all;            /* read every expert of a layer at each evaluation (a debugging A/B) */
    int predict_spec_max;      /* predicted misses per layer a decode step may read ahead (-1: no prediction) */
    shard_io io;               /* the read seam (tests) */
} expert_store_config;

typedef struct expert_store expert_store;

/* One expert of an acquire: its bytes per projection, and the handle a
 * matmul job waits on (NULL: ready now). */
typedef struct expert_handle {
    const uint8_t *data[EXPERT_MAX_PROJECTIONS];
    void *ready[EXPERT_MAX_PROJECTIONS];
    bool hit;                  /* was already resident (or is resident mode) */
    bool prefetched;           /* a hit on an entry a prefetch read, its first use */
    uint64_t read_bytes;       /* what this acquire reads for it (0 on a hit) */
} expert_handle;

/* Cumulative counters (since the store was created). */
typedef struct expert_store_counters {
    uint64_t read_bytes;       /* device bytes read for experts */
    uint64_t reads;
    double io_ms;              /* serial: wall time waiting for reads; overlap: lane busy time */
    double stall_ms;           /* overlap: union of compute threads' waits */
    double mgmt_ms;            /* acquire/release bookkeeping, waits excluded */
    uint64_t hits, misses, evictions, rereads;
    uint64_t prefetch_bytes, prefetched, prefetch_useful;
    uint64_t prefetch_trusted; /* guesses admitted while trusted (guess_trust.h) */
    uint64_t guesses_judged, guesses_right; /* guesses their layer's routing judged, and the right ones */
    uint64_t warmed;           /* entries the warm-up from a profile read */
    uint64_t warm_pending;     /* entries it has still to read (or is reading) */
} expert_store_counters;

/* paths/sizes: the model's shards (the paths must outlive the store). */
expert_store *expert_store_create(const expert_store_config *config, const expert_layer_source *layers, int n_layer,
                                  int n_expert, const char *const *paths, const uint64_t *sizes, uint32_t n_files,
                                  bmoe_error *err);
void expert_store_destroy(expert_store *store);

/* One evaluation at a time uses a streamed store (its slots, pins, lanes and
 * counters are one state): a model's contexts take turns, a whole evaluation
 * each, so that the counters an evaluation reads before and after are its
 * own. begin waits for the turn, end passes it on; everything below, the
 * read observer and the reports included, is called between the two (the
 * turn may be taken again on the thread that holds it). Resident, both do
 * nothing: acquires only compute pointers into the mapping. */
void expert_store_begin(expert_store *store);
void expert_store_end(expert_store *store);

bool expert_store_streaming(const expert_store *store);
/* The most experts one acquire may hold. */
int expert_store_capacity(const expert_store *store);
/* Whether every expert of a layer is to be read at each evaluation (the
 * stage_all switch, streaming only). */
bool expert_store_stages_all(const expert_store *store);

/* Makes experts[0..n) of layer (distinct) available; fills handles[0..n).
 * Serial: returns once their bytes are in. Overlap: returns at once; each
 * projection's handle says when its bytes are in. The misses are read in
 * the order a MoE layer computes: experts in the order given, every
 * projection but the last (gate and up) first, then the last (down).
 * Returns 0 or -1. */
int expert_store_acquire(expert_store *store, int layer, const int32_t *experts, int n, expert_handle *handles,
                         bmoe_error *err);
/* Ends the acquire (every acquire, a failed one too): waits for its reads,
 * lets its experts be evicted again. Returns -1 if any of its reads failed
 * (what was computed from them must be discarded). */
int expert_store_release(expert_store *store, bmoe_error *err);

/* Reads ahead (predictive prefetch, route-ahead; needs a cache): experts of
 * layer predicted or chosen for the coming routing, best first. The first max_misses of them not in the cache are read on idle
 * lanes (after every demand read), admitted at the cold end and counted with
 * the prefetches; the others are left alone. Returns how many it read. */
int expert_store_prefetch(expert_store *store, int layer, const int32_t *experts, int n, int max_misses);
/* Reads ahead what is all but certain to be asked for next (a prompt's
 * predicted union for the next layer): the experts of layer not in the
 * cache, best first, as demand reads queued behind those already queued, at
 * the lanes' full depth, in the order an acquire reads (gate and up, then
 * down), admitted at the cold end and counted with the prefetches; unlike a
 * prefetch, never yielded or cancelled. Needs a cache. Returns how many it
 * read. */
int expert_store_read_ahead(expert_store *store, int layer, const int32_t *experts, int n);
/* What a caller may pass as max_misses: the configured predict_spec_max
 * (-1: prediction is off, or the store is resident or has no cache). */
int expert_store_predict_max(const expert_store *store);

/* Whether an acquire of layer's expert now would find it in the cache (its
 * reads done or under way): what the lossy levers call resident. Always
 * true for a resident store; without a cache, false. */
bool expert_store_holds(const expert_store *store, int layer, int expert);
/* Streaming with a cache budget above 0. */
bool expert_store_caches(const expert_store *store);

/* Whether the store can keep a profile: streaming through a cache whose
 * policy counts uses. Returns 0, or -1 with err saying what is missing. */
int expert_store_profile_check(const expert_store *store, bmoe_error *err);

/* The expert profile's counts: counts[layer * n_expert + expert] is that
 * entry's uses as the cache policy weighs them now (recent uses weigh
 * more). Returns 0, or -1 with err as expert_store_profile_check. */
int expert_store_use_counts(const expert_store *store, float *counts, bmoe_error *err);
/* The layers and experts the counts above are laid out by. */
void expert_store_shape(const expert_store *store, int *n_layer, int *n_expert);

/* Warms the cache from a profile's counts (as above): the policy takes them
 * as the entries' past uses, and the hottest entries, as many as the cache
 * holds beside an acquire's worth of free slots, are read in the background:
 * a few at a time on idle lanes (after every demand read), topped up at
 * each release, so neither the load nor the first token waits for them;
 * an entry needed while it is being read is read on demand from there. A
 * warm-up under way is replaced. Within a turn. Returns how many entries
 * were queued, or -1 with err as expert_store_profile_check. */
int expert_store_warm(expert_store *store, const float *counts, bmoe_error *err);

/* Waits for the prefetches still reading (the wrong guesses of a token's
 * last layers) and counts them, so each evaluation's counters are complete. */
void expert_store_settle(expert_store *store);

/* Lowers the cache's budget to budget_bytes, never below the staging area
 * of no cache (2 x n_expert_used slots, at least 16): the entries of the
 * slots given up are dropped and their memory returned to the system. Within
 * a turn, between evaluations. Returns the budget now (unchanged when it was
 * already no larger, or without a cache). */
int64_t expert_store_shrink(expert_store *store, int64_t budget_bytes);
/* The budget the cache can shrink to (0 without a cache). */
int64_t expert_store_smallest_budget(const expert_store *store);

/* What the matmul calls to wait on a handle. */
const matmul_waiter *expert_store_waiter(const expert_store *store);

void expert_store_get_counters(expert_store *store, expert_store_counters *counters);

/* Called on the evaluating thread for each read of an acquire, once the
 * reads are done (at release). */
typedef void (*expert_read_observer)(void *user, const io_job *job);
void expert_store_set_read_observer(expert_store *store, expert_read_observer observer, void *user);

/* Facts for reports: the budget in bytes (0: no cache), the slots' bytes in
 * use now, whether every shard is read with O_DIRECT, one token's worst-case
 * routed bytes (k x the sum over MoE layers of one expert's bytes). */
int64_t expert_store_cache_budget(const expert_store *store);
uint64_t expert_store_resident_bytes(const expert_store *store);
bool expert_store_direct(const expert_store *store);
uint64_t expert_store_cycle_bytes(const expert_store *store, int n_expert_used);

#endif
