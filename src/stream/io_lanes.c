#include "io_lanes.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Checks of a readiness flag before a waiting thread sleeps: a slice that
 * is nearly in costs a spin of about a microsecond, not a wake-up. */
#define IO_WAIT_SPINS 1024

#if defined(__x86_64__) || defined(__i386__)
#define CPU_RELAX() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ volatile("isb" ::: "memory")
#else
#define CPU_RELAX() ((void)0)
#endif

typedef struct io_lane {
    io_lanes *lanes;
    int index;
    shard_reader reader;
    pthread_t thread;
    bool started;
} io_lane;

/* io_job.where */
enum { JOB_IDLE = 0, JOB_QUEUED = 1, JOB_RUNNING = 2 };
enum { QUEUE_DEMAND = 0, QUEUE_SPECULATIVE = 1 };

struct io_lanes {
    int n_lanes;
    io_lane *lane;
    pthread_mutex_t mutex;
    pthread_cond_t work;       /* lanes: a job may be taken now, or stop */
    pthread_cond_t arrived;    /* io_lanes_wait: a job finished */
    io_job **queue[2];         /* rings of queued jobs: demand, speculative */
    int capacity[2];
    int head[2], count[2];     /* ring position and queued jobs */
    int running[2];            /* reads being made, by kind (demand: pieces) */
    int sleepers;              /* threads asleep in io_lanes_wait */
    bool guesses_trusted;      /* io_lanes_trust_guesses */
    bool stopping;
    _Atomic uint64_t reads, bytes, speculative_bytes;
    _Atomic int64_t busy_ns;
    pthread_mutex_t stall_mutex;
    int stalled;               /* threads waiting now */
    int64_t stall_start_ns, stall_ns;
};

static int64_t now_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

static io_job *ring_at(const io_lanes *lanes, int q, int i)
{
    return lanes->queue[q][(lanes->head[q] + i) % lanes->capacity[q]];
}

static io_job *ring_pop(io_lanes *lanes, int q)
{
    io_job *job = ring_at(lanes, q, 0);
    lanes->head[q] = (lanes->head[q] + 1) % lanes->capacity[q];
    lanes->count[q]--;
    return job;
}

/* Room for n more jobs in ring q (the rings only grow, rarely). */
static bool reserve(io_lanes *lanes, int q, int n)
{
    if (lanes->count[q] + n <= lanes->capacity[q])
        return true;
    int capacity = lanes->capacity[q];
    while (capacity < lanes->count[q] + n)
        capacity *= 2;
    io_job **ring = malloc((size_t)capacity * sizeof *ring);
    if (!ring)
        return false;
    for (int i = 0; i < lanes->count[q]; i++)
        ring[i] = ring_at(lanes, q, i);
    free(lanes->queue[q]);
    lanes->queue[q] = ring;
    lanes->capacity[q] = capacity;
    lanes->head[q] = 0;
    return true;
}

/* Appends job to ring q; out of memory growing the ring, the job fails
 * rather than vanish. */
static void ring_push(io_lanes *lanes, int q, io_job *job)
{
    if (!reserve(lanes, q, 1)) {
        error_set_status(&job->error, BMOE_ERR_OUT_OF_MEMORY, "stream: out of memory queueing reads");
        job->where = JOB_IDLE;
        atomic_store(job->state, IO_FAILED);
        return;
    }
    lanes->queue[q][(lanes->head[q] + lanes->count[q]) % lanes->capacity[q]] = job;
    lanes->count[q]++;
    job->where = JOB_QUEUED;
}

/* Takes job out of ring q, keeping the others' order. */
static void ring_remove(io_lanes *lanes, int q, const io_job *job)
{
    int kept = 0;
    for (int i = 0; i < lanes->count[q]; i++) {
        io_job *queued = ring_at(lanes, q, i);
        if (queued != job)
            lanes->queue[q][(lanes->head[q] + kept++) % lanes->capacity[q]] = queued;
    }
    lanes->count[q] = kept;
}

/* Where a piece of at most `piece` bytes that starts at position ends: on
 * the block grid, so that each lands where the whole read would have put
 * it, and never past end. */
static uint64_t piece_end(uint64_t position, uint64_t end, uint64_t piece)
{
    uint64_t bound = (position & ~((uint64_t)SHARD_READ_ALIGNMENT - 1)) + piece;
    return bound < end ? bound : end;
}

/* A job about to be read for the first time since it was submitted. */
static void reset_job(io_job *job)
{
    error_clear(&job->error);
    job->device_bytes = 0;
    job->speculative_done = 0;
    job->speculative_device_bytes = 0;
    job->speculative_latency_ns = 0;
    job->latency_ns = 0;
    job->pieces_running = 0;
    job->piece_failed = false;
    job->demand_start_ns = 0;
}

/* The next piece of the demand job at the head of the queue: all that is
 * left, or IO_DEMAND_PIECE of it while two or more are left. The job leaves
 * the queue with its last piece. */
static io_job *take_demand(io_lanes *lanes, uint64_t *begin, uint64_t *end)
{
    io_job *job = ring_at(lanes, QUEUE_DEMAND, 0);
    if (job->handed == 0 && job->done == 0 && job->pieces_running == 0)
        reset_job(job);
    uint64_t position = job->offset + job->handed, stop = job->offset + job->length;
    *begin = position;
    *end = stop - position >= 2 * (uint64_t)IO_DEMAND_PIECE ? piece_end(position, stop, IO_DEMAND_PIECE) : stop;
    job->handed = *end - job->offset;
    job->pieces_running++;
    if (job->handed >= job->length) {
        ring_pop(lanes, QUEUE_DEMAND);
        job->where = JOB_RUNNING;
    }
    return job;
}

/* Whether a queued guess may start now, the demand queue being empty
 * (take_job serves it first). */
static bool guess_may_start(const io_lanes *lanes)
{
    if (lanes->guesses_trusted || lanes->stopping)
        return true;
    return lanes->running[QUEUE_DEMAND] == 0 && lanes->running[QUEUE_SPECULATIVE] < IO_SPECULATIVE_DEPTH;
}

/* Whether a running guess stops between pieces for demand that came in. */
static bool guess_must_yield(const io_lanes *lanes)
{
    return lanes->count[QUEUE_DEMAND] > 0 || (!lanes->guesses_trusted && lanes->running[QUEUE_DEMAND] > 0);
}

/* The next job a lane may start, or NULL: a piece of a demand read first
 * (begin and end bound it); a speculative job only while the disk serves no
 * demand read and few other guesses, unless the guesses are trusted. */
static io_job *take_job(io_lanes *lanes, uint64_t *begin, uint64_t *end)
{
    if (lanes->count[QUEUE_DEMAND] > 0)
        return take_demand(lanes, begin, end);
    if (lanes->count[QUEUE_SPECULATIVE] > 0 && guess_may_start(lanes))
        return ring_pop(lanes, QUEUE_SPECULATIVE);
    return NULL;
}

/* Reads [begin, end) of job's range into its place in the region. */
static int read_range(io_lane *lane, const io_job *job, uint64_t begin, uint64_t end, uint64_t *device_bytes,
                      bmoe_error *err)
{
    uint64_t window = job->offset & ~((uint64_t)SHARD_READ_ALIGNMENT - 1);
    uint8_t *region = job->region + ((begin & ~((uint64_t)SHARD_READ_ALIGNMENT - 1)) - window);
    return shard_reader_read(&lane->reader, job->shard, begin, end - begin, region, device_bytes, err);
}

/* A speculative job's next part: one piece of `piece` bytes, or all that is
 * left once it is promoted (whole; only this lane touches the job while it
 * runs). */
static int read_part(io_lane *lane, io_job *job, bool whole, uint64_t piece)
{
    uint64_t position = job->offset + job->done, end = job->offset + job->length;
    uint64_t stop = whole ? end : piece_end(position, end, piece);
    uint64_t device_bytes = 0;
    int64_t start = now_ns();
    int status = read_range(lane, job, position, stop, &device_bytes, &job->error);
    int64_t elapsed = now_ns() - start;
    job->latency_ns += elapsed;
    job->device_bytes += device_bytes;
    job->done = stop - job->offset;
    atomic_fetch_add(&lane->lanes->busy_ns, elapsed);
    return status;
}

/* Wakes what a finished or yielded job may unblock: lanes that can start a
 * guess now, and threads waiting for a state. Called with the lock held. */
static void wake_after(io_lanes *lanes)
{
    if (lanes->count[QUEUE_SPECULATIVE] > 0 && guess_may_start(lanes))
        pthread_cond_broadcast(&lanes->work);
    if (lanes->sleepers > 0)
        pthread_cond_broadcast(&lanes->arrived);
}

/* Ends a job whose reads are over (called with the lock held; returns with
 * it held): counts it and publishes its state. */
static void finish_job(io_lanes *lanes, io_lane *lane, io_job *job, bool failed, bool cancelled)
{
    job->where = JOB_IDLE;
    job->lane = lane->index;
    atomic_fetch_add(&lanes->reads, 1);
    if (!failed) {
        atomic_fetch_add(&lanes->bytes, job->device_bytes);
        atomic_fetch_add(&lanes->speculative_bytes, job->speculative_device_bytes);
    }
    pthread_mutex_unlock(&lanes->mutex);
    /* the job is the store's again from here on */
    atomic_store(job->state, cancelled ? IO_CANCELLED : failed ? IO_FAILED : IO_READY);
    pthread_mutex_lock(&lanes->mutex);
    wake_after(lanes);
}

/* Reads one piece of a demand job, [begin, end); the lane that ends its last
 * piece ends the job. Its latency is the span from its first demand piece's
 * start to its last one's end (after what it read while speculative). A
 * failed piece stops the handing out of the others; the job fails once none
 * is being read, as nothing may use the region before. Called with the lock
 * held; returns with it held. */
static void read_demand_piece(io_lanes *lanes, io_lane *lane, io_job *job, uint64_t begin, uint64_t end)
{
    lanes->running[QUEUE_DEMAND]++;
    int64_t start = now_ns();
    if (job->demand_start_ns == 0)
        job->demand_start_ns = start;
    pthread_mutex_unlock(&lanes->mutex);
    bmoe_error error;
    error_clear(&error);
    uint64_t device_bytes = 0;
    int status = read_range(lane, job, begin, end, &device_bytes, &error);
    int64_t finish = now_ns();
    atomic_fetch_add(&lanes->busy_ns, finish - start);
    pthread_mutex_lock(&lanes->mutex);
    lanes->running[QUEUE_DEMAND]--;
    job->pieces_running--;
    job->device_bytes += device_bytes;
    if (status != 0 && !job->piece_failed) {
        job->piece_failed = true;
        job->error = error;
        if (job->where == JOB_QUEUED)
            ring_remove(lanes, QUEUE_DEMAND, job);
        job->handed = job->length;
    }
    /* not the last piece: nothing a waiter or a guess waits for has changed */
    if (job->pieces_running > 0 || job->handed < job->length)
        return;
    job->done = job->length;
    job->latency_ns += finish - job->demand_start_ns;
    finish_job(lanes, lane, job, job->piece_failed, false);
}

static void *lane_main(void *argument)
{
    io_lane *lane = argument;
    io_lanes *lanes = lane->lanes;
    pthread_mutex_lock(&lanes->mutex);
    for (;;) {
        io_job *job;
        uint64_t begin = 0, end = 0;
        while (!(job = take_job(lanes, &begin, &end)) &&
               !(lanes->stopping && lanes->count[0] == 0 && lanes->count[1] == 0))
            pthread_cond_wait(&lanes->work, &lanes->mutex);
        if (!job)
            break;
        if (!job->speculative) {
            read_demand_piece(lanes, lane, job, begin, end);
            continue;
        }
        job->where = JOB_RUNNING;
        lanes->running[QUEUE_SPECULATIVE]++;
        if (job->done == 0)
            reset_job(job);
        int status = 0;
        bool finished = false, yielded = false, cancelled = false;
        while (!finished) {
            bool guess = job->speculative;
            uint64_t piece = lanes->guesses_trusted ? IO_DEMAND_PIECE : IO_SPECULATIVE_PIECE;
            uint64_t before = job->device_bytes;
            int64_t latency_before = job->latency_ns;
            pthread_mutex_unlock(&lanes->mutex);
            status = read_part(lane, job, !guess, piece);
            pthread_mutex_lock(&lanes->mutex);
            if (guess) {
                job->speculative_done = job->done;
                job->speculative_device_bytes += job->device_bytes - before;
                job->speculative_latency_ns += job->latency_ns - latency_before;
            }
            finished = status != 0 || job->done >= job->length;
            if (finished)
                break;
            if (job->cancel) {
                cancelled = true;
                break;
            }
            if (job->speculative && guess_must_yield(lanes) && reserve(lanes, QUEUE_SPECULATIVE, 1)) {
                /* demand came in: the guess waits at the front of its queue */
                lanes->head[QUEUE_SPECULATIVE] =
                    (lanes->head[QUEUE_SPECULATIVE] + lanes->capacity[QUEUE_SPECULATIVE] - 1) %
                    lanes->capacity[QUEUE_SPECULATIVE];
                lanes->queue[QUEUE_SPECULATIVE][lanes->head[QUEUE_SPECULATIVE]] = job;
                lanes->count[QUEUE_SPECULATIVE]++;
                job->where = JOB_QUEUED;
                yielded = true;
                break;
            }
        }
        lanes->running[QUEUE_SPECULATIVE]--;
        if (yielded) {
            wake_after(lanes);
            continue;
        }
        finish_job(lanes, lane, job, status != 0, cancelled);
    }
    pthread_mutex_unlock(&lanes->mutex);
    return NULL;
}

io_lanes *io_lanes_create(int n_lanes, const char *const *paths, const uint64_t *sizes, uint32_t n_files,
                          bool want_direct, const shard_io *io, bmoe_error *err)
{
    if (n_lanes < 1)
        n_lanes = 1;
    io_lanes *lanes = calloc(1, sizeof *lanes);
    if (!lanes) {
        error_set_status(err, BMOE_ERR_OUT_OF_MEMORY, "stream: out of memory for the I/O lanes");
        return NULL;
    }
    pthread_mutex_init(&lanes->mutex, NULL);
    pthread_mutex_init(&lanes->stall_mutex, NULL);
    pthread_cond_init(&lanes->work, NULL);
    pthread_cond_init(&lanes->arrived, NULL);
    for (int q = 0; q < 2; q++) {
        lanes->capacity[q] = 1024;
        lanes->queue[q] = calloc((size_t)lanes->capacity[q], sizeof *lanes->queue[q]);
    }
    lanes->lane = calloc((size_t)n_lanes, sizeof *lanes->lane);
    if (!lanes->queue[0] || !lanes->queue[1] || !lanes->lane) {
        io_lanes_destroy(lanes);
        error_set_status(err, BMOE_ERR_OUT_OF_MEMORY, "stream: out of memory for the I/O lanes");
        return NULL;
    }
    for (int i = 0; i < n_lanes; i++) {
        io_lane *lane = &lanes->lane[i];
        lane->lanes = lanes;
        lane->index = i;
        lanes->n_lanes = i + 1;
        if (shard_reader_open(&lane->reader, paths, sizes, n_files, want_direct, io, err) != 0) {
            io_lanes_destroy(lanes);
            return NULL;
        }
        if (pthread_create(&lane->thread, NULL, lane_main, lane) != 0) {
            io_lanes_destroy(lanes);
            error_set_status(err, BMOE_ERR_OUT_OF_MEMORY, "stream: cannot start I/O lane %d", i);
            return NULL;
        }
        lane->started = true;
    }
    return lanes;
}

void io_lanes_destroy(io_lanes *lanes)
{
    if (!lanes)
        return;
    pthread_mutex_lock(&lanes->mutex);
    lanes->stopping = true;
    pthread_cond_broadcast(&lanes->work);
    pthread_mutex_unlock(&lanes->mutex);
    for (int i = 0; i < lanes->n_lanes; i++) {
        if (lanes->lane[i].started)
            pthread_join(lanes->lane[i].thread, NULL);
        shard_reader_close(&lanes->lane[i].reader);
    }
    pthread_cond_destroy(&lanes->work);
    pthread_cond_destroy(&lanes->arrived);
    pthread_mutex_destroy(&lanes->mutex);
    pthread_mutex_destroy(&lanes->stall_mutex);
    free(lanes->lane);
    free(lanes->queue[0]);
    free(lanes->queue[1]);
    free(lanes);
}

bool io_lanes_direct(const io_lanes *lanes)
{
    return lanes->n_lanes > 0 && shard_reader_direct(&lanes->lane[0].reader);
}

int io_lanes_count(const io_lanes *lanes)
{
    return lanes->n_lanes;
}

void io_lanes_submit(io_lanes *lanes, io_job *const *jobs, int n_jobs)
{
    if (n_jobs <= 0)
        return;
    pthread_mutex_lock(&lanes->mutex);
    for (int i = 0; i < n_jobs; i++) {
        jobs[i]->cancel = false;
        jobs[i]->done = 0;
        jobs[i]->handed = 0;
        jobs[i]->pieces_running = 0;
        ring_push(lanes, jobs[i]->speculative ? QUEUE_SPECULATIVE : QUEUE_DEMAND, jobs[i]);
    }
    pthread_cond_broadcast(&lanes->work);
    pthread_mutex_unlock(&lanes->mutex);
}

void io_lanes_trust_guesses(io_lanes *lanes, bool trusted)
{
    pthread_mutex_lock(&lanes->mutex);
    lanes->guesses_trusted = trusted;
    wake_after(lanes);
    pthread_mutex_unlock(&lanes->mutex);
}

void io_lanes_promote(io_lanes *lanes, io_job *const *jobs, int n_jobs)
{
    pthread_mutex_lock(&lanes->mutex);
    for (int i = 0; i < n_jobs; i++) {
        io_job *job = jobs[i];
        if (!job->speculative || job->where == JOB_IDLE)
            continue;
        job->speculative = false;
        if (job->where != JOB_QUEUED)
            continue; /* running: the lane reads the rest without yielding */
        ring_remove(lanes, QUEUE_SPECULATIVE, job);
        job->handed = job->done; /* the pieces it read as a guess stay read */
        ring_push(lanes, QUEUE_DEMAND, job);
    }
    pthread_cond_broadcast(&lanes->work);
    pthread_mutex_unlock(&lanes->mutex);
}

void io_lanes_cancel(io_lanes *lanes, io_job *const *jobs, int n_jobs)
{
    pthread_mutex_lock(&lanes->mutex);
    for (int i = 0; i < n_jobs; i++) {
        io_job *job = jobs[i];
        if (!job->speculative || job->where == JOB_IDLE)
            continue;
        if (job->where == JOB_RUNNING) {
            job->cancel = true;
            continue;
        }
        ring_remove(lanes, QUEUE_SPECULATIVE, job);
        job->where = JOB_IDLE;
        if (job->done > 0) { /* it had yielded after some pieces: those were read */
            atomic_fetch_add(&lanes->reads, 1);
            atomic_fetch_add(&lanes->bytes, job->device_bytes);
            atomic_fetch_add(&lanes->speculative_bytes, job->speculative_device_bytes);
        }
        atomic_store(job->state, IO_CANCELLED);
    }
    if (lanes->sleepers > 0)
        pthread_cond_broadcast(&lanes->arrived);
    pthread_mutex_unlock(&lanes->mutex);
}

static void stall_begin(io_lanes *lanes)
{
    pthread_mutex_lock(&lanes->stall_mutex);
    if (lanes->stalled++ == 0)
        lanes->stall_start_ns = now_ns();
    pthread_mutex_unlock(&lanes->stall_mutex);
}

static void stall_end(io_lanes *lanes)
{
    pthread_mutex_lock(&lanes->stall_mutex);
    if (--lanes->stalled == 0)
        lanes->stall_ns += now_ns() - lanes->stall_start_ns;
    pthread_mutex_unlock(&lanes->stall_mutex);
}

int io_lanes_wait(io_lanes *lanes, _Atomic uint32_t *state, bool stall)
{
    uint32_t value = atomic_load_explicit(state, memory_order_acquire);
    if (value != IO_PENDING)
        return value == IO_READY ? 0 : -1;
    /* the interval opens with the spin: a thread spinning is a thread stalled */
    if (stall)
        stall_begin(lanes);
    for (int spin = 0; spin < IO_WAIT_SPINS && value == IO_PENDING; spin++) {
        CPU_RELAX();
        value = atomic_load_explicit(state, memory_order_acquire);
    }
    if (value == IO_PENDING) {
        pthread_mutex_lock(&lanes->mutex);
        lanes->sleepers++;
        while ((value = atomic_load_explicit(state, memory_order_acquire)) == IO_PENDING)
            pthread_cond_wait(&lanes->arrived, &lanes->mutex);
        lanes->sleepers--;
        pthread_mutex_unlock(&lanes->mutex);
    }
    if (stall)
        stall_end(lanes);
    return value == IO_READY ? 0 : -1;
}

void io_lanes_get_counters(io_lanes *lanes, io_lanes_counters *counters)
{
    counters->reads = atomic_load(&lanes->reads);
    counters->bytes = atomic_load(&lanes->bytes);
    counters->speculative_bytes = atomic_load(&lanes->speculative_bytes);
    counters->busy_ns = atomic_load(&lanes->busy_ns);
    pthread_mutex_lock(&lanes->stall_mutex);
    counters->stall_ns = lanes->stall_ns + (lanes->stalled > 0 ? now_ns() - lanes->stall_start_ns : 0);
    pthread_mutex_unlock(&lanes->stall_mutex);
}
