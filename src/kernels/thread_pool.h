/* The one pool of worker threads: created once per engine, reused by every
 * parallel job (matmul, attention). The calling thread takes part as thread 0,
 * so a pool of n threads starts n - 1 workers. Workers spin briefly on a job
 * counter, then sleep on a condition variable. */
#ifndef BMOE_KERNELS_THREAD_POOL_H
#define BMOE_KERNELS_THREAD_POOL_H

#include "../base/error.h"

typedef struct thread_pool thread_pool;

/* Runs once on each thread with thread_index in [0, n_threads). */
typedef void (*thread_pool_task_fn)(void *context, int thread_index, int n_threads);

thread_pool *thread_pool_create(int n_threads, bmoe_error *err);
void thread_pool_destroy(thread_pool *pool);
/* The threads a job runs on now (what thread_pool_set_active left, at first
 * all of them). */
int thread_pool_size(const thread_pool *pool);
/* The threads the pool was created with. */
int thread_pool_capacity(const thread_pool *pool);
/* Runs the next jobs on the first n threads (clamped to 1..capacity); the
 * others wait. A prefill and a decode may want different counts. */
void thread_pool_set_active(thread_pool *pool, int n);

/* Runs task on every thread of the pool and returns when all have finished.
 * Not reentrant: one job at a time, from one calling thread. A NULL pool runs
 * the task inline as thread 0 of 1. */
void thread_pool_run(thread_pool *pool, thread_pool_task_fn task, void *context);

#endif
