/* The worker pool behind every parallel step (thread_pool.h). Owns the worker
 * threads, created once in thread_pool_create and joined in destroy, and the
 * start/finish handshake of one job at a time.
 *
 * Handshake. The caller publishes a job by bumping `generation`; a worker that
 * sees a new generation runs the task once and decrements `remaining`; the
 * last one to finish wakes the caller if it went to sleep. The generation
 * word also carries how many threads the job runs on, so that a worker left
 * out of a job (it may look late, while the caller already prepares the
 * next one) learns so from the word it saw and touches nothing else; a
 * worker in the job holds the caller back until it has finished. Both sides first
 * spin for a few microseconds, because in decode the next job usually comes
 * (or the last worker finishes) within that time and a futex wake costs tens
 * of microseconds; only then do they sleep on a condition variable.
 *
 * Sleeping without lost wake-ups: a sleeper announces itself in a counter
 * (`sleeping_workers`, `caller_sleeping`) and then re-checks the condition,
 * while the waker changes the condition and then reads the counter, all with
 * sequentially consistent atomics. Whichever order they run in, either the
 * sleeper sees the change or the waker sees the sleeper and signals it under
 * the mutex. A run therefore touches the mutex only when someone sleeps. */
#include "thread_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* How long a thread spins on the handshake before it sleeps. Decode runs many
 * small jobs separated by short serial steps (norms, routing), which fit in
 * this window; anything longer is better spent asleep on a shared machine. */
#define THREAD_POOL_SPIN_NS 20000
#define THREAD_POOL_MAX_THREADS 1024
/* The generation word: a job count above ACTIVE_BITS bits of threads - 1. */
#define THREAD_POOL_ACTIVE_BITS 10
#define THREAD_POOL_ACTIVE_MASK ((1u << THREAD_POOL_ACTIVE_BITS) - 1u)
#define THREAD_POOL_CACHE_LINE 64

typedef struct thread_pool_worker {
    thread_pool *pool;
    int index;
    pthread_t thread;
} thread_pool_worker;

struct thread_pool {
    /* Written by the caller per run, read by workers. Each counter that one
     * side polls while the other writes sits on its own cache line. */
    _Alignas(THREAD_POOL_CACHE_LINE) atomic_uint generation;
    atomic_int stop;
    thread_pool_task_fn task;
    void *context;

    _Alignas(THREAD_POOL_CACHE_LINE) atomic_int remaining;

    _Alignas(THREAD_POOL_CACHE_LINE) atomic_int sleeping_workers;
    atomic_int caller_sleeping;
    pthread_mutex_t mutex;
    pthread_cond_t job_started;  /* workers wait here for a new generation */
    pthread_cond_t job_finished; /* the caller waits here for remaining == 0 */

    int n_threads;
    int n_active;  /* the threads of the next jobs (the caller's; workers read the generation word) */
    int n_started; /* workers actually created (create may fail half way) */
    thread_pool_worker *workers; /* n_threads - 1 entries */
};

static inline void thread_pool_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static uint64_t thread_pool_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Spins until *generation differs from seen or the time is up; returns the
 * last value read. The clock is read only every 64 pauses to stay cheap. */
static unsigned thread_pool_spin_for_generation(thread_pool *pool, unsigned seen)
{
    uint64_t deadline = 0;
    for (int i = 0;; i++) {
        unsigned now = atomic_load_explicit(&pool->generation, memory_order_acquire);
        if (now != seen || atomic_load_explicit(&pool->stop, memory_order_relaxed))
            return now;
        thread_pool_cpu_relax();
        if ((i & 63) == 63) {
            uint64_t t = thread_pool_now_ns();
            if (deadline == 0)
                deadline = t + THREAD_POOL_SPIN_NS;
            else if (t >= deadline)
                return now;
        }
    }
}

static void *thread_pool_worker_main(void *argument)
{
    thread_pool_worker *worker = argument;
    thread_pool *pool = worker->pool;
    unsigned seen = 0;
    for (;;) {
        unsigned generation = thread_pool_spin_for_generation(pool, seen);
        if (generation == seen && !atomic_load(&pool->stop)) {
            pthread_mutex_lock(&pool->mutex);
            atomic_fetch_add(&pool->sleeping_workers, 1);
            while ((generation = atomic_load(&pool->generation)) == seen && !atomic_load(&pool->stop))
                pthread_cond_wait(&pool->job_started, &pool->mutex);
            atomic_fetch_sub(&pool->sleeping_workers, 1);
            pthread_mutex_unlock(&pool->mutex);
        }
        if (atomic_load(&pool->stop))
            break;
        seen = generation;
        int n_active = (int)(generation & THREAD_POOL_ACTIVE_MASK) + 1;
        if (worker->index >= n_active)
            continue;
        pool->task(pool->context, worker->index, n_active);
        if (atomic_fetch_sub(&pool->remaining, 1) == 1 && atomic_load(&pool->caller_sleeping)) {
            pthread_mutex_lock(&pool->mutex);
            pthread_cond_signal(&pool->job_finished);
            pthread_mutex_unlock(&pool->mutex);
        }
    }
    return NULL;
}

/* Stops and joins the started workers and frees the pool. */
static void thread_pool_free(thread_pool *pool)
{
    if (pool->n_started > 0) {
        pthread_mutex_lock(&pool->mutex);
        atomic_store(&pool->stop, 1);
        pthread_cond_broadcast(&pool->job_started);
        pthread_mutex_unlock(&pool->mutex);
        for (int i = 0; i < pool->n_started; i++)
            pthread_join(pool->workers[i].thread, NULL);
    }
    pthread_cond_destroy(&pool->job_finished);
    pthread_cond_destroy(&pool->job_started);
    pthread_mutex_destroy(&pool->mutex);
    free(pool->workers);
    free(pool);
}

thread_pool *thread_pool_create(int n_threads, bmoe_error *err)
{
    if (n_threads < 1 || n_threads > THREAD_POOL_MAX_THREADS) {
        error_set(err, "thread_pool_create: thread count %d is outside 1..%d", n_threads,
                  THREAD_POOL_MAX_THREADS);
        return NULL;
    }
    size_t size = (sizeof(thread_pool) + THREAD_POOL_CACHE_LINE - 1) / THREAD_POOL_CACHE_LINE *
                  THREAD_POOL_CACHE_LINE;
    thread_pool *pool = aligned_alloc(THREAD_POOL_CACHE_LINE, size);
    if (!pool) {
        error_set(err, "thread_pool_create: out of memory for the pool");
        return NULL;
    }
    memset(pool, 0, sizeof *pool);
    atomic_init(&pool->generation, 0);
    atomic_init(&pool->stop, 0);
    atomic_init(&pool->remaining, 0);
    atomic_init(&pool->sleeping_workers, 0);
    atomic_init(&pool->caller_sleeping, 0);
    pool->n_threads = n_threads;
    pool->n_active = n_threads;
    if (pthread_mutex_init(&pool->mutex, NULL) != 0) {
        free(pool);
        error_set(err, "thread_pool_create: pthread_mutex_init failed");
        return NULL;
    }
    if (pthread_cond_init(&pool->job_started, NULL) != 0) {
        pthread_mutex_destroy(&pool->mutex);
        free(pool);
        error_set(err, "thread_pool_create: pthread_cond_init failed");
        return NULL;
    }
    if (pthread_cond_init(&pool->job_finished, NULL) != 0) {
        pthread_cond_destroy(&pool->job_started);
        pthread_mutex_destroy(&pool->mutex);
        free(pool);
        error_set(err, "thread_pool_create: pthread_cond_init failed");
        return NULL;
    }
    if (n_threads > 1) {
        pool->workers = calloc((size_t)n_threads - 1, sizeof *pool->workers);
        if (!pool->workers) {
            thread_pool_free(pool);
            error_set(err, "thread_pool_create: out of memory for %d workers", n_threads - 1);
            return NULL;
        }
    }
    for (int i = 0; i < n_threads - 1; i++) {
        thread_pool_worker *worker = &pool->workers[i];
        worker->pool = pool;
        worker->index = i + 1;
        int status = pthread_create(&worker->thread, NULL, thread_pool_worker_main, worker);
        if (status != 0) {
            thread_pool_free(pool);
            error_set(err, "thread_pool_create: could not start worker %d of %d (error %d)", i + 1,
                      n_threads - 1, status);
            return NULL;
        }
        pool->n_started = i + 1;
    }
    return pool;
}

void thread_pool_destroy(thread_pool *pool)
{
    if (pool)
        thread_pool_free(pool);
}

int thread_pool_size(const thread_pool *pool)
{
    return pool ? pool->n_active : 1;
}

int thread_pool_capacity(const thread_pool *pool)
{
    return pool ? pool->n_threads : 1;
}

void thread_pool_set_active(thread_pool *pool, int n)
{
    if (pool)
        pool->n_active = n < 1 ? 1 : n > pool->n_threads ? pool->n_threads : n;
}

void thread_pool_run(thread_pool *pool, thread_pool_task_fn task, void *context)
{
    if (!pool || pool->n_active == 1) {
        task(context, 0, 1);
        return;
    }
    pool->task = task;
    pool->context = context;
    atomic_store_explicit(&pool->remaining, pool->n_active - 1, memory_order_relaxed);
    unsigned jobs = (atomic_load_explicit(&pool->generation, memory_order_relaxed) >> THREAD_POOL_ACTIVE_BITS) + 1;
    /* seq_cst: orders the publication before the read of sleeping_workers. */
    atomic_store(&pool->generation, jobs << THREAD_POOL_ACTIVE_BITS | (unsigned)(pool->n_active - 1));
    if (atomic_load(&pool->sleeping_workers) > 0) {
        pthread_mutex_lock(&pool->mutex);
        pthread_cond_broadcast(&pool->job_started);
        pthread_mutex_unlock(&pool->mutex);
    }

    task(context, 0, pool->n_active);

    uint64_t deadline = 0;
    for (int i = 0; atomic_load_explicit(&pool->remaining, memory_order_acquire) != 0; i++) {
        thread_pool_cpu_relax();
        if ((i & 63) != 63)
            continue;
        uint64_t t = thread_pool_now_ns();
        if (deadline == 0) {
            deadline = t + THREAD_POOL_SPIN_NS;
        } else if (t >= deadline) {
            pthread_mutex_lock(&pool->mutex);
            atomic_store(&pool->caller_sleeping, 1);
            /* The store must be seen before remaining is read (the
             * handshake above). Sequentially consistent atomics promise
             * that, but qemu-user on an x86 host lets an aarch64 release
             * store pass a later acquire load (the arm64 tests hung here
             * once in a while); a full fence holds under emulation too and
             * costs nothing next to going to sleep. */
            atomic_thread_fence(memory_order_seq_cst);
            while (atomic_load(&pool->remaining) != 0)
                pthread_cond_wait(&pool->job_finished, &pool->mutex);
            atomic_store(&pool->caller_sleeping, 0);
            pthread_mutex_unlock(&pool->mutex);
            break;
        }
    }
}
