/* Tests of the worker pool: every thread runs every job exactly once with the
 * right index, the caller is thread 0, results written by workers are seen by
 * the caller, both sleeping paths (idle workers, a waiting caller) wake up,
 * bad sizes are refused, destroy works with idle or never-used workers, and
 * jobs on part of the pool run on exactly their threads. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "kernels/thread_pool.h"
#include "test.h"

#define MAX_THREADS 8

typedef struct run_record {
    atomic_int calls[MAX_THREADS]; /* how often each index ran in this job */
    atomic_int bad_count;          /* n_threads argument differed from the pool size */
    int expected_threads;
    pthread_t caller;
    atomic_int caller_not_thread0;
    long written[MAX_THREADS]; /* plain writes, read by the caller after the run */
    long job_number;
    int slow_thread; /* this index sleeps for a while, or -1 */
} run_record;

static void sleep_microseconds(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static void record_task(void *context, int thread_index, int n_threads)
{
    run_record *record = context;
    if (n_threads != record->expected_threads || thread_index < 0 || thread_index >= n_threads ||
        thread_index >= MAX_THREADS) {
        atomic_fetch_add(&record->bad_count, 1);
        return;
    }
    if (thread_index == 0 && !pthread_equal(pthread_self(), record->caller))
        atomic_store(&record->caller_not_thread0, 1);
    if (thread_index == record->slow_thread)
        sleep_microseconds(2000);
    record->written[thread_index] = record->job_number * 100 + thread_index;
    atomic_fetch_add(&record->calls[thread_index], 1);
}

static void record_reset(run_record *record, int n_threads, long job_number)
{
    for (int i = 0; i < MAX_THREADS; i++) {
        atomic_store(&record->calls[i], 0);
        record->written[i] = -1;
    }
    atomic_store(&record->bad_count, 0);
    atomic_store(&record->caller_not_thread0, 0);
    record->expected_threads = n_threads;
    record->caller = pthread_self();
    record->job_number = job_number;
    record->slow_thread = -1;
}

/* Checks one finished job; returns 1 when it ran exactly once per thread. */
static int record_ok(run_record *record, int n_threads)
{
    if (atomic_load(&record->bad_count) != 0 || atomic_load(&record->caller_not_thread0))
        return 0;
    for (int i = 0; i < MAX_THREADS; i++) {
        int expected = i < n_threads ? 1 : 0;
        if (atomic_load(&record->calls[i]) != expected)
            return 0;
        if (i < n_threads && record->written[i] != record->job_number * 100 + i)
            return 0;
    }
    return 1;
}

/* Many back-to-back jobs: the spinning fast path. */
static void test_many_runs(int n_threads, int n_jobs)
{
    bmoe_error err;
    error_clear(&err);
    thread_pool *pool = thread_pool_create(n_threads, &err);
    CHECK_MSG(pool != NULL, "create(%d): %s", n_threads, err.message);
    if (!pool)
        return;
    CHECK(thread_pool_size(pool) == n_threads);
    run_record record;
    int failures = 0;
    for (int job = 0; job < n_jobs; job++) {
        record_reset(&record, n_threads, job);
        thread_pool_run(pool, record_task, &record);
        if (!record_ok(&record, n_threads))
            failures++;
    }
    CHECK_MSG(failures == 0, "%d of %d jobs on %d threads did not run exactly once per thread",
              failures, n_jobs, n_threads);
    thread_pool_destroy(pool);
}

/* Jobs separated by pauses longer than the spin window, so workers sleep and
 * must be woken; and jobs where a worker is slow, so the caller sleeps. */
static void test_sleeping_paths(int n_threads)
{
    bmoe_error err;
    thread_pool *pool = thread_pool_create(n_threads, &err);
    CHECK(pool != NULL);
    if (!pool)
        return;
    run_record record;
    int failures = 0;
    for (int job = 0; job < 20; job++) {
        sleep_microseconds(1000 + 300 * (job % 4));
        record_reset(&record, n_threads, job);
        if (job % 2 == 1)
            record.slow_thread = 1 + job % (n_threads - 1);
        thread_pool_run(pool, record_task, &record);
        if (!record_ok(&record, n_threads))
            failures++;
    }
    CHECK_MSG(failures == 0, "%d jobs with sleeping threads failed on %d threads", failures,
              n_threads);
    thread_pool_destroy(pool);
}

/* Jobs on fewer threads than the pool has, the count changing from job to
 * job (a prefill's and a decode's): each runs exactly once on each of its
 * first n threads and on no other, told n; a thread left out of one job
 * may be slow to notice and must not run the next job twice or late. */
static void test_active_threads(int n_threads)
{
    bmoe_error err;
    thread_pool *pool = thread_pool_create(n_threads, &err);
    CHECK(pool != NULL);
    if (!pool)
        return;
    CHECK(thread_pool_capacity(pool) == n_threads && thread_pool_size(pool) == n_threads);
    thread_pool_set_active(pool, 0);
    CHECK(thread_pool_size(pool) == 1);
    thread_pool_set_active(pool, n_threads + 5);
    CHECK(thread_pool_size(pool) == n_threads);
    run_record record;
    int failures = 0;
    for (int job = 0; job < 3000; job++) {
        int active = 1 + (job * 7 + job / 3) % n_threads;
        thread_pool_set_active(pool, active);
        record_reset(&record, active, job);
        if (job % 500 == 499)
            sleep_microseconds(1000); /* the workers fall asleep */
        if (job % 97 == 0 && active > 1)
            record.slow_thread = active - 1;
        thread_pool_run(pool, record_task, &record);
        if (!record_ok(&record, active))
            failures++;
    }
    CHECK_MSG(failures == 0, "%d jobs on part of a %d-thread pool did not run exactly once per active thread",
              failures, n_threads);
    thread_pool_destroy(pool);
}

static void test_null_and_single(void)
{
    run_record record;
    record_reset(&record, 1, 7);
    thread_pool_run(NULL, record_task, &record);
    CHECK(record_ok(&record, 1));
    CHECK(thread_pool_size(NULL) == 1);
    thread_pool_destroy(NULL); /* a no-op, like free(NULL) */

    bmoe_error err;
    thread_pool *pool = thread_pool_create(1, &err);
    CHECK(pool != NULL);
    CHECK(thread_pool_size(pool) == 1);
    for (int job = 0; job < 100; job++) {
        record_reset(&record, 1, job);
        thread_pool_run(pool, record_task, &record);
        CHECK(record_ok(&record, 1));
    }
    thread_pool_destroy(pool);
}

static void test_bad_sizes(void)
{
    int sizes[] = {0, -1, -1000, 1 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        bmoe_error err;
        error_clear(&err);
        thread_pool *pool = thread_pool_create(sizes[i], &err);
        CHECK_MSG(pool == NULL, "create(%d) should fail", sizes[i]);
        CHECK_MSG(strstr(err.message, "thread count") != NULL, "create(%d): message '%s'", sizes[i],
                  err.message);
        thread_pool_destroy(pool);
    }
}

static void test_destroy_idle(void)
{
    bmoe_error err;
    /* Never used: workers may not even have started waiting yet. */
    for (int i = 0; i < 20; i++) {
        thread_pool *pool = thread_pool_create(4, &err);
        CHECK(pool != NULL);
        thread_pool_destroy(pool);
    }
    /* Used, then idle long enough for the workers to be asleep. */
    thread_pool *pool = thread_pool_create(3, &err);
    CHECK(pool != NULL);
    if (!pool)
        return;
    run_record record;
    record_reset(&record, 3, 1);
    thread_pool_run(pool, record_task, &record);
    CHECK(record_ok(&record, 3));
    sleep_microseconds(50000);
    thread_pool_destroy(pool);
    /* Used, then destroyed at once, while the workers still spin. */
    pool = thread_pool_create(3, &err);
    CHECK(pool != NULL);
    if (!pool)
        return;
    record_reset(&record, 3, 2);
    thread_pool_run(pool, record_task, &record);
    CHECK(record_ok(&record, 3));
    thread_pool_destroy(pool);
}

/* Two pools used alternately from one thread: no shared hidden state. */
static void test_two_pools(void)
{
    bmoe_error err;
    thread_pool *a = thread_pool_create(2, &err);
    thread_pool *b = thread_pool_create(3, &err);
    CHECK(a != NULL && b != NULL);
    if (!a || !b) {
        thread_pool_destroy(a);
        thread_pool_destroy(b);
        return;
    }
    run_record record;
    int failures = 0;
    for (int job = 0; job < 500; job++) {
        thread_pool *pool = job % 2 ? a : b;
        int n = thread_pool_size(pool);
        record_reset(&record, n, job);
        thread_pool_run(pool, record_task, &record);
        if (!record_ok(&record, n))
            failures++;
    }
    CHECK(failures == 0);
    thread_pool_destroy(a);
    thread_pool_destroy(b);
}

int main(void)
{
    test_null_and_single();
    test_active_threads(4);
    test_active_threads(MAX_THREADS);
    test_bad_sizes();
    test_many_runs(2, 5000);
    test_many_runs(3, 3000);
    test_many_runs(MAX_THREADS, 1000); /* more threads than cores */
    test_sleeping_paths(2);
    test_sleeping_paths(4);
    test_destroy_idle();
    test_two_pools();
    return test_finish();
}
