/* The expert store (expert_store.h): the resident pass-through, and the
 * streamed cache of fixed slots filled by the I/O lanes.
 *
 * A slot holds one (layer, expert) entry: one region per projection, each
 * aligned for direct reads and sized for the aligned window around the
 * largest layer's slice. The slots are one anonymous mapping made once (2 MiB
 * pages where the kernel gives them) and touched at creation, so nothing is
 * mapped, unmapped or advised per eviction and the hot path never allocates.
 * An acquire pins its entries; eviction takes the policy's victim among the
 * unpinned ones, so a layer's experts stay put until its matmuls are done.
 * With no cache the same slots are a staging area emptied at each release. */
#include "expert_store.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "../base/pages.h"
#include "cache_policy.h"
#include "guess_trust.h"
#include "io_lanes.h"

/* Slots of the staging area without a cache, per routing slot: one token's
 * experts with room for the prefill groups to stay a few experts wide. */
#define STORE_STAGING_PER_USED 2
#define STORE_STAGING_MIN 16

typedef struct cache_slot {
    int32_t layer, expert; /* -1: empty */
    bool pinned;           /* held by the current acquire */
    bool speculative;      /* filled by a prefetch and not used since */
    bool prefetch_read;    /* its current reads are a prefetch's */
    bool listed;           /* in speculative_slots */
    bool cancelled;        /* its prefetch was dropped: wait for its reads before any use */
    bool reported;         /* its reads went to the read observer */
    bool warm;             /* filled by the warm-up from a profile, its reads not counted yet */
    bool warm_listed;      /* in warm_slots */
    bool judged;           /* its guess counted in the store's guess_trust (read-aheads are not guesses) */
    bool trusted;          /* its guess was admitted while the guesses were trusted */
} cache_slot;

struct expert_store {
    expert_store_config config;
    int n_layer, n_expert;
    expert_layer_source *layers;
    matmul_waiter waiter;
    pthread_mutex_t turn;      /* held from expert_store_begin to expert_store_end */
    bool turn_ready;

    /* streaming */
    io_lanes *lanes;
    uint8_t *memory;
    size_t memory_bytes;
    size_t region_offset[EXPERT_MAX_PROJECTIONS];
    size_t slot_bytes;
    int n_slots;
    bool retain;               /* a cache (false: staging only) */
    cache_slot *slots;
    _Atomic uint32_t *state;   /* [n_slots][EXPERT_MAX_PROJECTIONS] enum io_state */
    int32_t *entry_slot;       /* [n_layer][n_expert]: slot or -1 */
    uint8_t *ever_held;        /* [n_layer][n_expert] */
    int *free_slots;
    int n_free;
    const cache_policy_ops *policy;
    void *policy_state;
    uint64_t acquires;         /* the policy's clock: one tick per streamed acquire */
    int *pinned;               /* slots of the current acquire */
    int n_pinned;
    int *miss_index;           /* [n_expert] indices of an acquire's entries to read */
    io_job *jobs;              /* [n_slots][EXPERT_MAX_PROJECTIONS]: each slot's reads */
    io_job **submit;           /* [n_slots * EXPERT_MAX_PROJECTIONS] jobs of one submission */
    int32_t *last_routed;      /* [n_layer][n_expert_used]: each layer's last decode routing */
    int32_t *n_last_routed;    /* [n_layer] */
    int *speculative_slots;    /* [n_slots] slots a prefetch filled, not yet reported */
    int n_speculative;
    guess_trust trust;         /* of the guesses, judged as their layers route */
    /* the warm-up from a profile: entries to read, hottest first, a few at a time */
    int32_t *warm_queue;       /* keys (layer * n_expert + expert) */
    int n_warm_queue, warm_next;
    int *warm_slots;           /* [n_slots] slots the warm-up is reading */
    int n_warm;
    expert_read_observer read_observer;
    void *read_observer_user;
    uint64_t resident_bytes;

    /* eval-thread counters */
    uint64_t hits, misses, evictions, rereads;
    uint64_t prefetched, prefetch_useful, prefetch_trusted;
    uint64_t guesses_judged, guesses_right;
    uint64_t warmed;
    double serial_io_ms, mgmt_ms;
};

/* Entries the warm-up reads at once: the lanes read guesses two at a time
 * when no demand read waits, and slots being read cannot be evicted. */
#define STORE_WARM_DEPTH 4

static double now_ms(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec * 1e3 + (double)now.tv_nsec * 1e-6;
}

static int store_wait(void *user, void *ready)
{
    expert_store *store = user;
    return io_lanes_wait(store->lanes, ready, true);
}

static uint64_t entry_bytes(const expert_layer_source *layer)
{
    uint64_t bytes = 0;
    for (int p = 0; p < layer->n_projections; p++)
        bytes += layer->projections[p].expert_bytes;
    return bytes;
}

void expert_store_destroy(expert_store *store)
{
    if (!store)
        return;
    if (store->lanes)
        io_lanes_destroy(store->lanes);
    if (store->turn_ready)
        pthread_mutex_destroy(&store->turn);
    if (store->memory)
        munmap(store->memory, store->memory_bytes);
    if (store->policy && store->policy_state)
        store->policy->destroy(store->policy_state);
    free(store->layers);
    free(store->slots);
    free((void *)store->state);
    free(store->entry_slot);
    free(store->ever_held);
    free(store->free_slots);
    free(store->pinned);
    free(store->miss_index);
    free(store->jobs);
    free(store->submit);
    free(store->last_routed);
    free(store->n_last_routed);
    free(store->speculative_slots);
    free(store->warm_queue);
    free(store->warm_slots);
    free(store);
}

/* The slot memory: one mapping, huge pages where the kernel gives them,
 * every page touched now so that the budget is memory the process holds. */
static int create_slots(expert_store *store, bmoe_error *err)
{
    size_t bytes = (size_t)store->n_slots * store->slot_bytes;
    void *memory = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED)
        return error_set_status(err, BMOE_ERR_OUT_OF_MEMORY, "stream: cannot map %zu bytes for %d cache slots",
                                bytes, store->n_slots);
    store->memory = memory;
    store->memory_bytes = bytes;
#ifdef MADV_HUGEPAGE
    madvise(memory, bytes, MADV_HUGEPAGE);
#endif
    pages_touch(store->memory, bytes);
    size_t n = (size_t)store->n_slots;
    store->slots = calloc(n, sizeof *store->slots);
    store->state = calloc(n * EXPERT_MAX_PROJECTIONS, sizeof *store->state);
    store->free_slots = malloc(n * sizeof *store->free_slots);
    store->pinned = malloc(n * sizeof *store->pinned);
    store->miss_index = malloc((size_t)store->n_expert * sizeof *store->miss_index);
    store->jobs = calloc(n * EXPERT_MAX_PROJECTIONS, sizeof *store->jobs);
    store->submit = calloc(n * EXPERT_MAX_PROJECTIONS, sizeof *store->submit);
    size_t used = store->config.n_expert_used > 0 ? (size_t)store->config.n_expert_used : 1;
    store->last_routed = calloc((size_t)store->n_layer * used, sizeof *store->last_routed);
    store->n_last_routed = calloc((size_t)store->n_layer, sizeof *store->n_last_routed);
    store->speculative_slots = calloc(n, sizeof *store->speculative_slots);
    size_t entries = (size_t)store->n_layer * (size_t)store->n_expert;
    store->entry_slot = malloc(entries * sizeof *store->entry_slot);
    store->ever_held = calloc(entries, 1);
    int n_moe_layers = 0;
    for (int il = 0; il < store->n_layer; il++)
        n_moe_layers += store->layers[il].n_projections > 0;
    cache_policy_params policy = {
        .n_slots = store->n_slots,
        .n_keys = (int)entries,
        .half_life = (double)CACHE_FREQUENCY_HALF_LIFE_TOKENS * (n_moe_layers > 0 ? n_moe_layers : 1),
    };
    store->policy = store->config.policy ? store->config.policy : &cache_policy_lru;
    store->policy_state = store->policy->create(&policy);
    if (!store->slots || !store->state || !store->free_slots || !store->pinned || !store->miss_index || !store->jobs ||
        !store->submit || !store->last_routed || !store->n_last_routed || !store->speculative_slots ||
        !store->entry_slot || !store->ever_held || !store->policy_state)
        return error_set_status(err, BMOE_ERR_OUT_OF_MEMORY, "stream: out of memory for the cache index");
    for (size_t i = 0; i < entries; i++)
        store->entry_slot[i] = -1;
    for (size_t i = 0; i < n * EXPERT_MAX_PROJECTIONS; i++)
        atomic_init(&store->state[i], IO_READY); /* an empty slot waits for nothing */
    for (int i = 0; i < store->n_slots; i++) {
        store->slots[i].layer = store->slots[i].expert = -1;
        store->free_slots[i] = store->n_slots - 1 - i;
    }
    store->n_free = store->n_slots;
    return 0;
}

/* The slots of the staging area of no cache, and the fewest a cache keeps. */
static int staging_slots(const expert_store *store)
{
    int staging = store->config.n_expert_used * STORE_STAGING_PER_USED;
    if (staging < STORE_STAGING_MIN)
        staging = STORE_STAGING_MIN;
    return staging < store->n_expert ? staging : store->n_expert;
}

expert_store *expert_store_create(const expert_store_config *config, const expert_layer_source *layers, int n_layer,
                                  int n_expert, const char *const *paths, const uint64_t *sizes, uint32_t n_files,
                                  bmoe_error *err)
{
    expert_store *store = calloc(1, sizeof *store);
    if (!store) {
        error_set_status(err, BMOE_ERR_OUT_OF_MEMORY, "stream: out of memory");
        return NULL;
    }
    store->config = *config;
    store->n_layer = n_layer;
    store->n_expert = n_expert;
    store->waiter.wait = store_wait;
    store->waiter.user = store;
    store->layers = calloc(n_layer > 0 ? (size_t)n_layer : 1, sizeof *store->layers);
    if (!store->layers) {
        expert_store_destroy(store);
        error_set_status(err, BMOE_ERR_OUT_OF_MEMORY, "stream: out of memory");
        return NULL;
    }
    memcpy(store->layers, layers, (size_t)n_layer * sizeof *layers);
    if (!config->streaming)
        return store;
    /* recursive: a report asked for from an evaluation's callback, on its
     * thread, reads the counters inside that evaluation's turn */
    pthread_mutexattr_t recursive;
    pthread_mutexattr_init(&recursive);
    pthread_mutexattr_settype(&recursive, PTHREAD_MUTEX_RECURSIVE);
    int failed = pthread_mutex_init(&store->turn, &recursive);
    pthread_mutexattr_destroy(&recursive);
    if (failed) {
        expert_store_destroy(store);
        error_set_status(err, BMOE_ERR_OUT_OF_MEMORY, "stream: cannot create the cache's lock");
        return NULL;
    }
    store->turn_ready = true;

    if (config->io_threads < 1 || config->io_threads > 16 || config->cache_bytes < 0 || n_expert <= 0) {
        expert_store_destroy(store);
        error_set_status(err, BMOE_ERR_INVALID_ARGUMENT,
                         "stream: invalid configuration (%d I/O threads, cache %" PRId64 " bytes, %d experts)",
                         config->io_threads, config->cache_bytes, n_expert);
        return NULL;
    }
    /* one region per projection, sized for the largest layer's slice */
    size_t offset = 0;
    for (int p = 0; p < EXPERT_MAX_PROJECTIONS; p++) {
        uint64_t largest = 0;
        for (int il = 0; il < n_layer; il++)
            if (p < layers[il].n_projections && layers[il].projections[p].expert_bytes > largest)
                largest = layers[il].projections[p].expert_bytes;
        store->region_offset[p] = offset;
        if (largest > 0)
            offset += shard_region_bytes(largest);
    }
    store->slot_bytes = offset;
    if (store->slot_bytes == 0) {
        expert_store_destroy(store);
        error_set_status(err, BMOE_ERR_INVALID_ARGUMENT, "stream: the model has no routed experts to stream");
        return NULL;
    }
    store->retain = config->cache_bytes > 0;
    if (store->retain) {
        /* a budget covering the experts' bytes holds them all (the slots'
         * page rounding is not charged to it) */
        int64_t whole_entries = 0;
        uint64_t whole_bytes = 0;
        for (int il = 0; il < n_layer; il++)
            if (layers[il].n_projections > 0) {
                whole_entries += n_expert;
                whole_bytes += entry_bytes(&layers[il]) * (uint64_t)n_expert;
            }
        int64_t slots = config->cache_bytes / (int64_t)store->slot_bytes;
        if ((uint64_t)config->cache_bytes >= whole_bytes || slots > whole_entries)
            slots = whole_entries;
        store->n_slots = (int)(slots < 1 ? 1 : slots);
    } else {
        store->n_slots = staging_slots(store);
    }
    if (create_slots(store, err) != 0) {
        expert_store_destroy(store);
        return NULL;
    }
    store->lanes = io_lanes_create(config->io_threads, paths, sizes, n_files, config->direct, &config->io, err);
    if (!store->lanes) {
        expert_store_destroy(store);
        return NULL;
    }
    return store;
}

void expert_store_begin(expert_store *store)
{
    if (store->turn_ready)
        pthread_mutex_lock(&store->turn);
}

void expert_store_end(expert_store *store)
{
    if (store->turn_ready)
        pthread_mutex_unlock(&store->turn);
}

void expert_store_set_read_observer(expert_store *store, expert_read_observer observer, void *user)
{
    store->read_observer = observer;
    store->read_observer_user = user;
}

bool expert_store_streaming(const expert_store *store)
{
    return store->config.streaming;
}

int expert_store_capacity(const expert_store *store)
{
    if (!store->config.streaming || store->n_slots > store->n_expert)
        return store->n_expert;
    return store->n_slots;
}

const matmul_waiter *expert_store_waiter(const expert_store *store)
{
    return store->config.streaming ? &store->waiter : NULL;
}

static _Atomic uint32_t *slot_state(const expert_store *store, int slot, int projection)
{
    return &store->state[(size_t)slot * EXPERT_MAX_PROJECTIONS + (size_t)projection];
}

/* Any read into slot still running. */
static bool slot_reading(const expert_store *store, int slot)
{
    for (int p = 0; p < EXPERT_MAX_PROJECTIONS; p++)
        if (atomic_load(slot_state(store, slot, p)) == IO_PENDING)
            return true;
    return false;
}

/* Waits until no read into slot is running or queued (whatever their outcome). */
static void wait_slot_reads(expert_store *store, int slot)
{
    for (int p = 0; p < EXPERT_MAX_PROJECTIONS; p++)
        io_lanes_wait(store->lanes, slot_state(store, slot, p), false);
}

/* Some read into slot failed or was cancelled: its bytes are not all there. */
static bool slot_failed(const expert_store *store, int slot)
{
    for (int p = 0; p < EXPERT_MAX_PROJECTIONS; p++) {
        uint32_t state = atomic_load(slot_state(store, slot, p));
        if (state == IO_FAILED || state == IO_CANCELLED)
            return true;
    }
    return false;
}

/* Neither held by the current acquire nor being read into. */
static bool slot_evictable(void *user, int slot)
{
    const expert_store *store = user;
    return !store->slots[slot].pinned && !slot_reading(store, slot);
}

/* Whether s holds a guess its layer has not judged yet (judge_guess). */
static bool awaits_verdict(const cache_slot *s)
{
    return s->speculative && !s->judged;
}

/* For a guess: also not a guess still waiting for its layer's verdict (the
 * one guessed first is for the nearer layer). */
static bool slot_evictable_for_guess(void *user, int slot)
{
    const expert_store *store = user;
    return slot_evictable(user, slot) && !awaits_verdict(&store->slots[slot]);
}

static void report_reads(expert_store *store, int slot);

/* A prefetch whose reads are over: they go to the observer, and it counts
 * as prefetched if they all arrived. Returns whether they did. */
static bool count_prefetch(expert_store *store, int slot)
{
    cache_slot *s = &store->slots[slot];
    s->prefetch_read = false;
    report_reads(store, slot);
    bool arrived = !slot_failed(store, slot);
    if (s->warm)
        store->warmed += arrived;
    else {
        store->prefetched += arrived;
        store->prefetch_trusted += arrived && s->trusted;
    }
    s->warm = false;
    return arrived;
}

/* Empties slot (its entry is no longer cached). */
static void empty_slot(expert_store *store, int slot)
{
    cache_slot *s = &store->slots[slot];
    /* a guess that finished since the last release and goes unused: counted
     * here, or never (scan_prefetches only sees slots still holding it) */
    if (s->prefetch_read)
        count_prefetch(store, slot);
    if (s->layer >= 0) {
        store->entry_slot[(size_t)s->layer * (size_t)store->n_expert + (size_t)s->expert] = -1;
        store->resident_bytes -= entry_bytes(&store->layers[s->layer]);
    }
    s->layer = s->expert = -1;
    s->speculative = false;
    s->cancelled = false;
    s->warm = false;
    for (int p = 0; p < EXPERT_MAX_PROJECTIONS; p++)
        atomic_store(slot_state(store, slot, p), IO_READY); /* an empty slot waits for nothing */
    store->policy->remove(store->policy_state, slot);
    store->free_slots[store->n_free++] = slot;
}

static void cancel_prefetch(expert_store *store, int slot);

/* A slot for a new entry: a free one, else the policy's victim. demand: when
 * every unheld slot is being filled by a prefetch, drop those guesses and
 * take one of their slots rather than fail. */
/* Guesses no demand read waits for, among slots[0..n): their reads are
 * dropped and waited out, so their slots may be evicted. */
static void drop_guesses(expert_store *store, const int *slots, int n)
{
    for (int i = 0; i < n; i++) {
        int slot = slots[i];
        /* one refilled on demand has its reads not queued yet */
        if (store->slots[slot].pinned || !store->slots[slot].prefetch_read)
            continue;
        cancel_prefetch(store, slot);
        wait_slot_reads(store, slot);
    }
}

static int take_slot(expert_store *store, bool demand)
{
    if (store->n_free == 0) {
        int victim = store->policy->victim(store->policy_state, demand ? slot_evictable : slot_evictable_for_guess,
                                           store);
        if (victim < 0 && demand && store->n_speculative > 0) {
            drop_guesses(store, store->speculative_slots, store->n_speculative);
            victim = store->policy->victim(store->policy_state, slot_evictable, store);
        }
        if (victim < 0 && demand && store->n_warm > 0) {
            /* the warm-up reads only what no demand needs: it gives way */
            drop_guesses(store, store->warm_slots, store->n_warm);
            victim = store->policy->victim(store->policy_state, slot_evictable, store);
        }
        if (victim < 0)
            return -1;
        empty_slot(store, victim);
        store->evictions++;
    }
    return store->free_slots[--store->n_free];
}

static const uint8_t *slot_data(const expert_store *store, int slot, int layer, int expert, int projection)
{
    const expert_projection_source *source = &store->layers[layer].projections[projection];
    uint64_t offset = source->file_offset + (uint64_t)expert * source->expert_bytes;
    return store->memory + (size_t)slot * store->slot_bytes + store->region_offset[projection] +
           shard_region_offset(offset);
}

static int acquire_resident(expert_store *store, int layer, const int32_t *experts, int n, expert_handle *handles)
{
    const expert_layer_source *source = &store->layers[layer];
    for (int i = 0; i < n; i++) {
        memset(&handles[i], 0, sizeof handles[i]);
        handles[i].hit = true;
        for (int p = 0; p < source->n_projections; p++)
            handles[i].data[p] =
                source->projections[p].resident + (size_t)experts[i] * (size_t)source->projections[p].expert_bytes;
    }
    return 0;
}

/* Puts (layer, expert) into a free or evicted slot and prepares its reads;
 * returns the slot, -1 when every slot is held. The jobs go to
 * store->submit from *n_submit on, projection p at a stride of stride. */
static int fill_slot(expert_store *store, int layer, int expert, bool speculative)
{
    int slot = take_slot(store, !speculative);
    if (slot < 0)
        return -1;
    const expert_layer_source *source = &store->layers[layer];
    size_t key = (size_t)layer * (size_t)store->n_expert + (size_t)expert;
    if (store->ever_held[key])
        store->rereads++;
    store->ever_held[key] = 1;
    store->entry_slot[key] = slot;
    cache_slot *s = &store->slots[slot];
    s->layer = layer;
    s->expert = expert;
    s->speculative = speculative;
    s->prefetch_read = speculative;
    s->cancelled = false;
    s->reported = false;
    store->resident_bytes += entry_bytes(source);
    for (int p = 0; p < source->n_projections; p++) {
        const expert_projection_source *projection = &source->projections[p];
        io_job *job = &store->jobs[(size_t)slot * EXPERT_MAX_PROJECTIONS + (size_t)p];
        memset(job, 0, sizeof *job);
        job->region = store->memory + (size_t)slot * store->slot_bytes + store->region_offset[p];
        job->shard = projection->shard;
        job->offset = projection->file_offset + (uint64_t)expert * projection->expert_bytes;
        job->length = projection->expert_bytes;
        job->state = slot_state(store, slot, p);
        job->layer = layer;
        job->expert = expert;
        job->projection = p;
        job->speculative = speculative;
        atomic_store(job->state, IO_PENDING);
    }
    return slot;
}

/* The read jobs of slot's entry; returns how many. */
static int slot_jobs(expert_store *store, int slot, io_job **jobs)
{
    int n = store->slots[slot].layer >= 0 ? store->layers[store->slots[slot].layer].n_projections : 0;
    for (int p = 0; p < n; p++)
        jobs[p] = &store->jobs[(size_t)slot * EXPERT_MAX_PROJECTIONS + (size_t)p];
    return n;
}

/* A guess no longer wanted: what of it is not read yet is not read. */
static void cancel_prefetch(expert_store *store, int slot)
{
    cache_slot *s = &store->slots[slot];
    /* a read-ahead (expert_store_read_ahead) is read to its end */
    if (!s->prefetch_read || !slot_reading(store, slot) ||
        !store->jobs[(size_t)slot * EXPERT_MAX_PROJECTIONS].speculative)
        return;
    s->cancelled = true;
    io_job *jobs[EXPERT_MAX_PROJECTIONS];
    io_lanes_cancel(store->lanes, jobs, slot_jobs(store, slot, jobs));
}

/* Reads of slot, to the observer, once. */
static void report_reads(expert_store *store, int slot)
{
    cache_slot *s = &store->slots[slot];
    if (s->reported || s->layer < 0)
        return;
    s->reported = true;
    if (!store->read_observer)
        return;
    for (int p = 0; p < store->layers[s->layer].n_projections; p++) {
        const io_job *job = &store->jobs[(size_t)slot * EXPERT_MAX_PROJECTIONS + (size_t)p];
        /* a guess cancelled before it started was never a read */
        if (atomic_load(job->state) != IO_CANCELLED || job->device_bytes > 0)
            store->read_observer(store->read_observer_user, job);
    }
}

/* A slot for a guess at (layer, expert), not cached: admitted at the cold
 * end and listed with the guesses; its jobs are prepared, not submitted.
 * Returns the slot, or -1 when none is free. */
static int admit_guess(expert_store *store, int layer, int expert)
{
    int slot = fill_slot(store, layer, expert, true);
    if (slot < 0)
        return -1;
    store->policy->insert_cold(store->policy_state, slot);
    if (!store->slots[slot].listed) {
        store->slots[slot].listed = true;
        store->speculative_slots[store->n_speculative++] = slot;
    }
    return slot;
}

/* Whether a read ahead of experts[0..n) of layer can be served: a cache, a
 * layer with experts, valid and at most n_expert indices. */
static bool ahead_request_valid(const expert_store *store, int layer, const int32_t *experts, int n)
{
    if (!expert_store_caches(store) || layer < 0 || layer >= store->n_layer ||
        store->layers[layer].n_projections == 0 || n < 0 || n > store->n_expert)
        return false;
    for (int k = 0; k < n; k++)
        if (experts[k] < 0 || experts[k] >= store->n_expert)
            return false;
    return true;
}

/* Speculative reads of up to max_misses experts of layer not in the cache,
 * in the order given, admitted at the cold end so wrong guesses go first;
 * their jobs go to store->submit from *n_jobs on. Returns how many. */
static int prefetch_entries(expert_store *store, int layer, const int32_t *experts, int n, int max_misses,
                            int *n_jobs)
{
    int read = 0;
    for (int k = 0; k < n && read < max_misses; k++) {
        if (store->entry_slot[(size_t)layer * (size_t)store->n_expert + (size_t)experts[k]] >= 0)
            continue;
        int slot = admit_guess(store, layer, experts[k]);
        if (slot < 0)
            break;
        read++;
        store->slots[slot].judged = false;
        store->slots[slot].trusted = store->trust.trusted;
        for (int p = 0; p < store->layers[layer].n_projections; p++)
            store->submit[(*n_jobs)++] = &store->jobs[(size_t)slot * EXPERT_MAX_PROJECTIONS + (size_t)p];
    }
    return read;
}

/* --prefetch K: after layer's demand reads, read what the previous token
 * routed in the next K MoE layers, on idle lanes (the lanes serve demand
 * reads first). */
static void prefetch_after(expert_store *store, int layer)
{
    int n_jobs = 0;
    int used = store->config.n_expert_used;
    for (int next = layer + 1, ahead = 0; next < store->n_layer && ahead < store->config.prefetch; next++) {
        if (store->layers[next].n_projections == 0)
            continue;
        ahead++;
        prefetch_entries(store, next, store->last_routed + (size_t)next * (size_t)used, store->n_last_routed[next],
                         store->n_last_routed[next], &n_jobs);
    }
    io_lanes_submit(store->lanes, store->submit, n_jobs);
}

bool expert_store_caches(const expert_store *store)
{
    return store->config.streaming && store->config.cache_bytes > 0;
}

bool expert_store_holds(const expert_store *store, int layer, int expert)
{
    if (!store->config.streaming)
        return true;
    if (layer < 0 || layer >= store->n_layer || expert < 0 || expert >= store->n_expert)
        return false;
    int slot = store->entry_slot[(size_t)layer * (size_t)store->n_expert + (size_t)expert];
    return slot >= 0 && store->retain && !store->slots[slot].cancelled && (slot_reading(store, slot) || !slot_failed(store, slot));
}

bool expert_store_stages_all(const expert_store *store)
{
    return store->config.streaming && store->config.stage_all;
}

int expert_store_predict_max(const expert_store *store)
{
    if (!store->config.streaming || store->config.cache_bytes == 0)
        return -1;
    return store->config.predict_spec_max;
}

int expert_store_prefetch(expert_store *store, int layer, const int32_t *experts, int n, int max_misses)
{
    if (!ahead_request_valid(store, layer, experts, n))
        return 0;
    int n_jobs = 0;
    int read = prefetch_entries(store, layer, experts, n, max_misses, &n_jobs);
    io_lanes_submit(store->lanes, store->submit, n_jobs);
    return read;
}

/* The read of projection p of (layer, expert), which holds a slot. */
static io_job *entry_job(expert_store *store, int layer, int expert, int p)
{
    int slot = store->entry_slot[(size_t)layer * (size_t)store->n_expert + (size_t)expert];
    return &store->jobs[(size_t)slot * EXPERT_MAX_PROJECTIONS + (size_t)p];
}

/* The misses' reads in the order the matmuls consume them (expert_store.h):
 * the projections before the last one expert by expert, then the last
 * projection expert by expert. The lanes serve a submission in order, so
 * the first expert's compute can start once its own bytes are in rather
 * than once one projection of every expert is. */
static void submit_misses(expert_store *store, int layer, const int32_t *experts, const int *misses, int n_misses)
{
    int n_jobs = 0;
    int last = store->layers[layer].n_projections - 1;
    for (int m = 0; m < n_misses; m++)
        for (int p = 0; p < last; p++)
            store->submit[n_jobs++] = entry_job(store, layer, experts[misses[m]], p);
    for (int m = 0; m < n_misses; m++)
        store->submit[n_jobs++] = entry_job(store, layer, experts[misses[m]], last);
    io_lanes_submit(store->lanes, store->submit, n_jobs);
}

int expert_store_read_ahead(expert_store *store, int layer, const int32_t *experts, int n)
{
    if (!ahead_request_valid(store, layer, experts, n))
        return 0;
    int *read = store->miss_index; /* free between acquires */
    int n_read = 0;
    for (int k = 0; k < n; k++) {
        if (store->entry_slot[(size_t)layer * (size_t)store->n_expert + (size_t)experts[k]] >= 0)
            continue;
        int slot = admit_guess(store, layer, experts[k]);
        if (slot < 0)
            break;
        store->slots[slot].judged = true;
        store->slots[slot].trusted = false;
        /* demand reads behind those queued: the full depth of the lanes, no yielding, no cancelling */
        for (int p = 0; p < store->layers[layer].n_projections; p++)
            store->jobs[(size_t)slot * EXPERT_MAX_PROJECTIONS + (size_t)p].speculative = false;
        read[n_read++] = k;
    }
    submit_misses(store, layer, experts, read, n_read);
    return n_read;
}

/* Counts the guess in slot once: used by its layer's routing, or not. */
static void judge_guess(expert_store *store, int slot, bool right)
{
    /* --load-all acquires a layer's unrouted experts before its routed ones: no verdict there */
    if (store->slots[slot].judged || store->config.stage_all)
        return;
    store->slots[slot].judged = true;
    store->guesses_judged++;
    store->guesses_right += right;
    if (guess_trust_judge(&store->trust, right))
        io_lanes_trust_guesses(store->lanes, store->trust.trusted);
}

/* Pins slot, holding (layer, expert), for the acquire and points handle at
 * its projections. */
static void pin_entry(expert_store *store, int layer, int expert, int slot, expert_handle *handle)
{
    size_t key = (size_t)layer * (size_t)store->n_expert + (size_t)expert;
    store->slots[slot].pinned = true;
    store->pinned[store->n_pinned++] = slot;
    store->policy->touch(store->policy_state, slot, (int)key, store->acquires);
    for (int p = 0; p < store->layers[layer].n_projections; p++) {
        handle->data[p] = slot_data(store, slot, layer, expert, p);
        /* a miss, or a prefetch still reading: the matmul waits for it */
        if (store->config.overlap && atomic_load(slot_state(store, slot, p)) != IO_READY)
            handle->ready[p] = (void *)slot_state(store, slot, p);
    }
}

int expert_store_acquire(expert_store *store, int layer, const int32_t *experts, int n, expert_handle *handles,
                         bmoe_error *err)
{
    if (layer < 0 || layer >= store->n_layer || store->layers[layer].n_projections == 0 || n < 0 ||
        n > expert_store_capacity(store))
        return error_set_status(err, BMOE_ERR_INVALID_ARGUMENT, "stream: bad request (layer %d, %d experts)", layer,
                                n);
    if (!store->config.streaming)
        return acquire_resident(store, layer, experts, n, handles);

    double start = now_ms();
    store->acquires++;
    const expert_layer_source *source = &store->layers[layer];
    int n_projections = source->n_projections;
    int *misses = store->miss_index;
    int n_misses = 0;
    /* the hits are pinned before any miss takes a slot: a miss's victim is
     * never an entry this same acquire is about to use (a guess read ahead
     * for this layer waits at the cold end, the first victim otherwise) */
    for (int i = 0; i < n; i++) {
        size_t key = (size_t)layer * (size_t)store->n_expert + (size_t)experts[i];
        int slot = store->entry_slot[key];
        /* a dropped guess may still be finishing a piece */
        if (slot >= 0 && store->slots[slot].cancelled)
            wait_slot_reads(store, slot);
        /* a prefetch whose read failed holds nothing: read it on demand */
        if (slot >= 0 && !slot_reading(store, slot) && slot_failed(store, slot)) {
            empty_slot(store, slot);
            slot = -1;
        }
        memset(&handles[i], 0, sizeof handles[i]);
        if (slot < 0) {
            misses[n_misses++] = i;
            continue;
        }
        store->hits++;
        handles[i].hit = true;
        if (store->slots[slot].speculative) {
            store->slots[slot].speculative = false;
            store->prefetch_useful++;
            handles[i].prefetched = true;
            judge_guess(store, slot, true);
        }
        /* a guess still being read is needed now: its reads become demand reads */
        if (store->slots[slot].prefetch_read && slot_reading(store, slot)) {
            io_job *jobs[EXPERT_MAX_PROJECTIONS];
            io_lanes_promote(store->lanes, jobs, slot_jobs(store, slot, jobs));
        }
        pin_entry(store, layer, experts[i], slot, &handles[i]);
    }
    /* guesses for this layer that it did not route to, or for an earlier
     * one: judged before a miss may evict them (they wait at the cold end) */
    for (int i = 0; i < store->n_speculative; i++) {
        int slot = store->speculative_slots[i];
        if (store->slots[slot].pinned || store->slots[slot].layer > layer)
            continue;
        if (store->slots[slot].speculative)
            judge_guess(store, slot, false);
        cancel_prefetch(store, slot);
    }
    for (int m = 0; m < n_misses; m++) {
        int i = misses[m];
        int slot = fill_slot(store, layer, experts[i], false);
        if (slot < 0) {
            /* what was prepared must still be read: the release waits on it */
            submit_misses(store, layer, experts, misses, m);
            return error_set(err, "stream: no cache slot free for layer %d expert %d", layer, experts[i]);
        }
        store->misses++;
        handles[i].read_bytes = entry_bytes(source);
        pin_entry(store, layer, experts[i], slot, &handles[i]);
    }
    submit_misses(store, layer, experts, misses, n_misses);
    if (n <= store->config.n_expert_used) { /* one token's routing: the next one's guess */
        memcpy(store->last_routed + (size_t)layer * (size_t)store->config.n_expert_used, experts,
               (size_t)n * sizeof *experts);
        store->n_last_routed[layer] = n;
        if (store->config.prefetch > 0)
            prefetch_after(store, layer);
    }
    double waited = 0.0;
    int status = 0;
    if (!store->config.overlap) {
        double wait_start = now_ms();
        for (int i = 0; i < store->n_pinned; i++)
            for (int p = 0; p < n_projections; p++)
                if (io_lanes_wait(store->lanes, slot_state(store, store->pinned[i], p), false) != 0 && status == 0)
                    status = error_set_status(err, BMOE_ERR_IO, "%s",
                                              store->jobs[(size_t)store->pinned[i] * EXPERT_MAX_PROJECTIONS +
                                                          (size_t)p].error.message);
        waited = now_ms() - wait_start;
        store->serial_io_ms += waited;
    }
    store->mgmt_ms += now_ms() - start - waited;
    return status;
}

/* The warm-up's reads that finished are counted (a failed one's slot
 * emptied), then as many entries of its queue are read as it has room for:
 * on idle lanes, after every demand read. Entries already held are skipped. */
static void warm_continue(expert_store *store)
{
    int kept = 0;
    for (int i = 0; i < store->n_warm; i++) {
        int slot = store->warm_slots[i];
        cache_slot *s = &store->slots[slot];
        if (s->warm && slot_reading(store, slot)) {
            store->warm_slots[kept++] = slot;
            continue;
        }
        s->warm_listed = false;
        if (s->warm && !count_prefetch(store, slot) && !s->pinned)
            empty_slot(store, slot);
    }
    store->n_warm = kept;
    int n_jobs = 0;
    while (store->n_warm < STORE_WARM_DEPTH && store->warm_next < store->n_warm_queue) {
        int32_t key = store->warm_queue[store->warm_next];
        int layer = key / store->n_expert, expert = key % store->n_expert;
        if (store->entry_slot[key] >= 0) {
            store->warm_next++;
            continue;
        }
        int slot = fill_slot(store, layer, expert, true);
        if (slot < 0)
            break; /* every slot is held now: the next release tries again */
        store->warm_next++;
        cache_slot *s = &store->slots[slot];
        s->speculative = false; /* not a guess for the coming layers: kept by its uses */
        s->warm = true;
        store->policy->admit(store->policy_state, slot, key);
        if (!s->warm_listed) {
            s->warm_listed = true;
            store->warm_slots[store->n_warm++] = slot;
        }
        for (int p = 0; p < store->layers[layer].n_projections; p++)
            store->submit[n_jobs++] = &store->jobs[(size_t)slot * EXPERT_MAX_PROJECTIONS + (size_t)p];
    }
    io_lanes_submit(store->lanes, store->submit, n_jobs);
}

void expert_store_shape(const expert_store *store, int *n_layer, int *n_expert)
{
    *n_layer = store->n_layer;
    *n_expert = store->n_expert;
}

int expert_store_profile_check(const expert_store *store, bmoe_error *err)
{
    if (!store->config.streaming || !store->retain)
        return error_set_status(err, BMOE_ERR_INVALID_ARGUMENT,
                                "an expert profile needs the experts streamed through a cache (--moe-stream, a "
                                "cache budget above 0)");
    if (!store->policy->weight || !store->policy->seed || !store->policy->admit)
        return error_set_status(err, BMOE_ERR_INVALID_ARGUMENT,
                                "an expert profile needs a cache policy that counts uses (freq, not %s)",
                                store->policy->name);
    return 0;
}

int expert_store_use_counts(const expert_store *store, float *counts, bmoe_error *err)
{
    if (expert_store_profile_check(store, err) != 0)
        return -1;
    size_t n_keys = (size_t)store->n_layer * (size_t)store->n_expert;
    for (size_t key = 0; key < n_keys; key++)
        counts[key] = (float)store->policy->weight(store->policy_state, (int)key, store->acquires);
    return 0;
}

typedef struct warm_entry {
    float count;
    int32_t key;
} warm_entry;

/* counts descending, ties to the lower key */
static int warm_order(const void *a, const void *b)
{
    const warm_entry *x = a, *y = b;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    return (x->key > y->key) - (x->key < y->key);
}

int expert_store_warm(expert_store *store, const float *counts, bmoe_error *err)
{
    if (expert_store_profile_check(store, err) != 0)
        return -1;
    size_t n_keys = (size_t)store->n_layer * (size_t)store->n_expert;
    warm_entry *entries = malloc(n_keys * sizeof *entries);
    int32_t *queue = malloc(n_keys * sizeof *queue);
    int *slots = store->warm_slots ? store->warm_slots : malloc((size_t)store->n_slots * sizeof *slots);
    if (!entries || !queue || !slots) {
        free(entries);
        free(queue);
        if (slots != store->warm_slots)
            free(slots);
        return error_set_status(err, BMOE_ERR_OUT_OF_MEMORY, "stream: out of memory for the warm-up");
    }
    int n = 0;
    for (size_t key = 0; key < n_keys; key++) {
        int layer = (int)(key / (size_t)store->n_expert);
        float count = counts[key];
        if (!(count > 0.0f) || store->layers[layer].n_projections == 0)
            continue;
        store->policy->seed(store->policy_state, (int)key, count, store->acquires);
        entries[n++] = (warm_entry){count, (int32_t)key};
    }
    qsort(entries, (size_t)n, sizeof *entries, warm_order);
    for (int i = 0; i < n; i++)
        queue[i] = entries[i].key;
    free(entries);
    /* a token's layer's worth of slots stays free for demand, beside those
     * the warm-up reads into: a full cache would evict the warm-up's
     * coldest entries at the first token */
    int room = store->n_slots - store->config.n_expert_used - STORE_WARM_DEPTH;
    if (n > room)
        n = room > 0 ? room : 0;
    free(store->warm_queue);
    store->warm_queue = queue;
    store->warm_slots = slots;
    store->n_warm_queue = n;
    store->warm_next = 0;
    warm_continue(store);
    return n;
}

/* Prefetches that finished: count them and report their reads. A guess
 * stays listed until its layer's acquire has judged it, read or not. */
static void scan_prefetches(expert_store *store)
{
    int kept = 0;
    for (int i = 0; i < store->n_speculative; i++) {
        int slot = store->speculative_slots[i];
        cache_slot *s = &store->slots[slot];
        if (s->prefetch_read && slot_reading(store, slot)) {
            store->speculative_slots[kept++] = slot;
            continue;
        }
        /* (not prefetch_read: counted before, or emptied and filled again on demand) */
        if (s->prefetch_read && !count_prefetch(store, slot) && !s->pinned)
            empty_slot(store, slot);
        if (s->layer >= 0 && awaits_verdict(s)) {
            store->speculative_slots[kept++] = slot;
            continue;
        }
        s->listed = false;
    }
    store->n_speculative = kept;
}

int expert_store_release(expert_store *store, bmoe_error *err)
{
    if (!store->config.streaming)
        return 0;
    double start = now_ms();
    int status = 0;
    for (int i = 0; i < store->n_pinned; i++) {
        int slot = store->pinned[i];
        cache_slot *s = &store->slots[slot];
        /* overlap: the matmuls waited for every read they used, but a
         * failed one left its neighbours' reads running */
        for (int p = 0; p < EXPERT_MAX_PROJECTIONS; p++)
            if (io_lanes_wait(store->lanes, slot_state(store, slot, p), false) != 0 && status == 0)
                status = error_set_status(err, BMOE_ERR_IO, "%s",
                                          store->jobs[(size_t)slot * EXPERT_MAX_PROJECTIONS + (size_t)p].error.message);
        report_reads(store, slot);
        s->pinned = false;
        if (slot_failed(store, slot) || !store->retain)
            empty_slot(store, slot);
    }
    store->n_pinned = 0;
    scan_prefetches(store);
    warm_continue(store);
    store->mgmt_ms += now_ms() - start;
    return status;
}

void expert_store_settle(expert_store *store)
{
    if (!store->config.streaming || store->n_speculative == 0)
        return;
    double start = now_ms();
    for (int i = 0; i < store->n_speculative; i++)
        wait_slot_reads(store, store->speculative_slots[i]);
    scan_prefetches(store);
    store->mgmt_ms += now_ms() - start;
}

int64_t expert_store_smallest_budget(const expert_store *store)
{
    if (!store->config.streaming || !store->retain)
        return 0;
    int n = staging_slots(store) < store->n_slots ? staging_slots(store) : store->n_slots;
    return (int64_t)n * (int64_t)store->slot_bytes;
}

int64_t expert_store_shrink(expert_store *store, int64_t budget_bytes)
{
    if (!store->config.streaming || !store->retain)
        return expert_store_cache_budget(store);
    int64_t n = budget_bytes / (int64_t)store->slot_bytes;
    if (n < staging_slots(store))
        n = staging_slots(store);
    if (n >= store->n_slots)
        return expert_store_cache_budget(store);
    store->warm_next = store->n_warm_queue; /* the slots it was filling are going */
    expert_store_settle(store);
    for (int slot = (int)n; slot < store->n_slots; slot++) {
        wait_slot_reads(store, slot);
        if (store->slots[slot].layer >= 0)
            empty_slot(store, slot);
    }
    int kept = 0;
    for (int i = 0; i < store->n_free; i++)
        if (store->free_slots[i] < n)
            store->free_slots[kept++] = store->free_slots[i];
    store->n_free = kept;
    size_t unit = page_bytes();
    size_t keep = ((size_t)n * store->slot_bytes + unit - 1) / unit * unit;
    if (keep < store->memory_bytes && munmap(store->memory + keep, store->memory_bytes - keep) == 0)
        store->memory_bytes = keep;
    store->n_slots = (int)n;
    return expert_store_cache_budget(store);
}

void expert_store_get_counters(expert_store *store, expert_store_counters *counters)
{
    memset(counters, 0, sizeof *counters);
    counters->hits = store->hits;
    counters->misses = store->misses;
    counters->evictions = store->evictions;
    counters->rereads = store->rereads;
    counters->mgmt_ms = store->mgmt_ms;
    counters->prefetched = store->prefetched;
    counters->prefetch_useful = store->prefetch_useful;
    counters->prefetch_trusted = store->prefetch_trusted;
    counters->guesses_judged = store->guesses_judged;
    counters->guesses_right = store->guesses_right;
    counters->warmed = store->warmed;
    counters->warm_pending = (uint64_t)(store->n_warm_queue - store->warm_next + store->n_warm);
    if (!store->lanes)
        return;
    io_lanes_counters lanes;
    io_lanes_get_counters(store->lanes, &lanes);
    counters->read_bytes = lanes.bytes;
    counters->reads = lanes.reads;
    counters->prefetch_bytes = lanes.speculative_bytes;
    counters->io_ms = store->config.overlap ? (double)lanes.busy_ns * 1e-6 : store->serial_io_ms;
    counters->stall_ms = (double)lanes.stall_ns * 1e-6;
}

int64_t expert_store_cache_budget(const expert_store *store)
{
    return store->config.streaming && store->retain ? (int64_t)store->n_slots * (int64_t)store->slot_bytes : 0;
}

uint64_t expert_store_resident_bytes(const expert_store *store)
{
    return store->resident_bytes;
}

bool expert_store_direct(const expert_store *store)
{
    return store->lanes && io_lanes_direct(store->lanes);
}

uint64_t expert_store_cycle_bytes(const expert_store *store, int n_expert_used)
{
    uint64_t bytes = 0;
    for (int il = 0; il < store->n_layer; il++)
        bytes += entry_bytes(&store->layers[il]);
    return bytes * (uint64_t)(n_expert_used > 0 ? n_expert_used : 0);
}
