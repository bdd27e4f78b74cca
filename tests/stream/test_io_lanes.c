/* The I/O lanes' scheduling, through a read function that records every
 * read and can hold one until the test lets it go: a speculative read never
 * starts while a demand read is queued or running, at most
 * IO_SPECULATIVE_DEPTH run at once, one yields between pieces to demand that
 * came in, a promoted one is read at once and whole, a cancelled one is not
 * read (queued), stops after its piece (running) or keeps its pieces counted
 * (cancelled after yielding), and the bytes of a read in pieces land where a
 * whole read puts them, direct and buffered; a long demand read is read in
 * pieces by several lanes at once, and when one piece fails the job fails
 * only once no piece of it is being read; trusted guesses have none of the
 * guesses' limits but the yield to queued demand. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "stream/io_lanes.h"
#include "test.h"

#define FILE_BYTES (8u << 20)
#define MAX_JOBS 8

/* One job's file range: [offset, offset + length). */
typedef struct range {
    uint64_t offset, length;
} range;

typedef struct recorder {
    pthread_mutex_t mutex;
    pthread_cond_t changed;
    bool armed;                 /* record and hold only the test's reads, not the open's check */
    range ranges[MAX_JOBS];
    int n_ranges;
    bool hold[MAX_JOBS];        /* reads of range i wait while this is set */
    int reads[MAX_JOBS];        /* reads started, by range */
    int order[256];             /* ranges in the order their reads started */
    int n_order;
    int in_flight, max_in_flight;
    int64_t fail_offset;        /* a read starting here fails (EIO) at once; -1: none */
} recorder;

static int range_of(const recorder *r, int64_t offset)
{
    for (int i = 0; i < r->n_ranges; i++) {
        uint64_t start = r->ranges[i].offset & ~(uint64_t)(SHARD_READ_ALIGNMENT - 1);
        if ((uint64_t)offset >= start && (uint64_t)offset < r->ranges[i].offset + r->ranges[i].length)
            return i;
    }
    return -1;
}

static int64_t recording_pread(void *user, int fd, void *buffer, size_t length, int64_t offset)
{
    recorder *r = user;
    pthread_mutex_lock(&r->mutex);
    int which = r->armed ? range_of(r, offset) : -1;
    if (which >= 0 && offset == r->fail_offset) {
        r->reads[which]++;
        pthread_cond_broadcast(&r->changed);
        pthread_mutex_unlock(&r->mutex);
        errno = EIO;
        return -1;
    }
    if (which >= 0) {
        r->reads[which]++;
        if (r->n_order < (int)(sizeof r->order / sizeof r->order[0]))
            r->order[r->n_order++] = which;
        if (++r->in_flight > r->max_in_flight)
            r->max_in_flight = r->in_flight;
        pthread_cond_broadcast(&r->changed);
        while (r->hold[which])
            pthread_cond_wait(&r->changed, &r->mutex);
    }
    pthread_mutex_unlock(&r->mutex);
    int64_t got = pread(fd, buffer, length, (off_t)offset);
    int saved = errno;
    pthread_mutex_lock(&r->mutex);
    if (which >= 0)
        r->in_flight--;
    pthread_cond_broadcast(&r->changed);
    pthread_mutex_unlock(&r->mutex);
    errno = saved;
    return got;
}

static void set_hold(recorder *r, int which, bool hold)
{
    pthread_mutex_lock(&r->mutex);
    r->hold[which] = hold;
    pthread_cond_broadcast(&r->changed);
    pthread_mutex_unlock(&r->mutex);
}

/* Waits (up to 5 s) until range which has had at least n reads started. */
static bool wait_reads(recorder *r, int which, int n)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 5;
    pthread_mutex_lock(&r->mutex);
    int status = 0;
    while (r->reads[which] < n && status == 0)
        status = pthread_cond_timedwait(&r->changed, &r->mutex, &deadline);
    bool reached = r->reads[which] >= n;
    pthread_mutex_unlock(&r->mutex);
    return reached;
}

static int reads_of(recorder *r, int which)
{
    pthread_mutex_lock(&r->mutex);
    int n = r->reads[which];
    pthread_mutex_unlock(&r->mutex);
    return n;
}

static void settle(void)
{
    struct timespec pause = {0, 50 * 1000 * 1000};
    nanosleep(&pause, NULL);
}

static uint8_t file_byte(uint64_t position)
{
    return (uint8_t)((position * 2654435761u) >> 13);
}

typedef struct fixture {
    recorder rec;
    io_lanes *lanes;
    io_job jobs[MAX_JOBS];
    _Atomic uint32_t states[MAX_JOBS];
    uint8_t *regions[MAX_JOBS];
} fixture;

static const char *model_path;

/* Lanes over the test file; job i reads ranges[i] (speculative or not). */
static bool fixture_open(fixture *f, bool direct, const range *ranges, const bool *speculative, int n)
{
    memset(f, 0, sizeof *f);
    f->rec.fail_offset = -1;
    pthread_mutex_init(&f->rec.mutex, NULL);
    pthread_cond_init(&f->rec.changed, NULL);
    shard_io io = {recording_pread, &f->rec};
    uint64_t size = FILE_BYTES;
    bmoe_error err;
    error_clear(&err);
    f->lanes = io_lanes_create(4, &model_path, &size, 1, direct, &io, &err);
    CHECK_MSG(f->lanes != NULL, "io_lanes_create: %s", err.message);
    if (!f->lanes)
        return false;
    for (int i = 0; i < n; i++) {
        f->rec.ranges[i] = ranges[i];
        f->regions[i] = aligned_alloc(SHARD_READ_ALIGNMENT, shard_region_bytes(ranges[i].length));
        io_job *job = &f->jobs[i];
        job->region = f->regions[i];
        job->shard = 0;
        job->offset = ranges[i].offset;
        job->length = ranges[i].length;
        job->state = &f->states[i];
        job->speculative = speculative[i];
        job->layer = job->expert = job->projection = 0;
        atomic_init(&f->states[i], IO_PENDING);
    }
    f->rec.n_ranges = n;
    pthread_mutex_lock(&f->rec.mutex);
    f->rec.armed = true;
    pthread_mutex_unlock(&f->rec.mutex);
    return true;
}

static void submit(fixture *f, int which)
{
    io_job *job = &f->jobs[which];
    io_lanes_submit(f->lanes, &job, 1);
}

/* Submits job which with its reads held, and waits until its first one has
 * started. */
static void start_held(fixture *f, int which)
{
    set_hold(&f->rec, which, true);
    submit(f, which);
    CHECK(wait_reads(&f->rec, which, 1));
}

/* The bytes of job which are the file's, where a whole read puts them. */
static bool bytes_right(const fixture *f, int which)
{
    const io_job *job = &f->jobs[which];
    const uint8_t *interior = job->region + shard_region_offset(job->offset);
    for (uint64_t i = 0; i < job->length; i++)
        if (interior[i] != file_byte(job->offset + i))
            return false;
    return true;
}

static void fixture_close(fixture *f)
{
    for (int i = 0; i < MAX_JOBS; i++)
        set_hold(&f->rec, i, false);
    io_lanes_destroy(f->lanes);
    for (int i = 0; i < MAX_JOBS; i++)
        free(f->regions[i]);
    pthread_cond_destroy(&f->rec.changed);
    pthread_mutex_destroy(&f->rec.mutex);
}

/* Unaligned ranges read whole (demand) and in pieces (speculative). */
static void test_bytes(bool direct)
{
    range ranges[4] = {{12345, IO_SPECULATIVE_PIECE * 3 + 777},
                       {2u << 20, IO_SPECULATIVE_PIECE * 2},
                       {(3u << 20) + 4095, 100},
                       {(5u << 20) + 1, IO_SPECULATIVE_PIECE + 5000}};
    bool speculative[4] = {true, true, true, false};
    fixture f;
    if (!fixture_open(&f, direct, ranges, speculative, 4))
        return;
    for (int i = 0; i < 4; i++)
        submit(&f, i);
    for (int i = 0; i < 4; i++) {
        CHECK(io_lanes_wait(f.lanes, &f.states[i], false) == 0);
        CHECK_MSG(bytes_right(&f, i), "%s, job %d: bytes differ from the file's", direct ? "direct" : "buffered", i);
        uint64_t window = ((ranges[i].offset + ranges[i].length + SHARD_READ_ALIGNMENT - 1) &
                           ~(uint64_t)(SHARD_READ_ALIGNMENT - 1)) -
                          (ranges[i].offset & ~(uint64_t)(SHARD_READ_ALIGNMENT - 1));
        if (io_lanes_direct(f.lanes))
            CHECK_MSG(f.jobs[i].device_bytes == window, "job %d: %llu device bytes, window %llu", i,
                      (unsigned long long)f.jobs[i].device_bytes, (unsigned long long)window);
        else
            CHECK(f.jobs[i].device_bytes == ranges[i].length);
    }
    /* the first job is 4 pieces long; the demand one is read in one go */
    CHECK_MSG(reads_of(&f.rec, 0) == 4, "speculative job in %d reads, not 4 pieces", reads_of(&f.rec, 0));
    CHECK(reads_of(&f.rec, 3) == 1);
    io_lanes_counters counters;
    io_lanes_get_counters(f.lanes, &counters);
    CHECK(counters.reads == 4);
    CHECK(counters.speculative_bytes ==
          f.jobs[0].device_bytes + f.jobs[1].device_bytes + f.jobs[2].device_bytes);
    fixture_close(&f);
}

/* A demand read of four pieces: all four are read at once (each held until
 * all have started: read one after another, the second would never start),
 * and the bytes land as one read puts them. */
static void test_demand_pieces(bool direct)
{
    range ranges[1] = {{12345, 4 * (uint64_t)IO_DEMAND_PIECE + 777}};
    bool speculative[1] = {false};
    fixture f;
    if (!fixture_open(&f, direct, ranges, speculative, 1))
        return;
    start_held(&f, 0);
    CHECK_MSG(wait_reads(&f.rec, 0, 4), "%d pieces of a demand read started at once, not 4", reads_of(&f.rec, 0));
    CHECK(atomic_load(&f.states[0]) == IO_PENDING);
    set_hold(&f.rec, 0, false);
    CHECK(io_lanes_wait(f.lanes, &f.states[0], false) == 0);
    CHECK_MSG(bytes_right(&f, 0), "%s: the pieces' bytes differ from the file's", direct ? "direct" : "buffered");
    CHECK(reads_of(&f.rec, 0) == 4);
    uint64_t first = ranges[0].offset & ~(uint64_t)(SHARD_READ_ALIGNMENT - 1);
    uint64_t last = (ranges[0].offset + ranges[0].length + SHARD_READ_ALIGNMENT - 1) &
                    ~(uint64_t)(SHARD_READ_ALIGNMENT - 1);
    if (io_lanes_direct(f.lanes))
        CHECK_MSG(f.jobs[0].device_bytes == last - first, "%llu device bytes, window %llu",
                  (unsigned long long)f.jobs[0].device_bytes, (unsigned long long)(last - first));
    else
        CHECK(f.jobs[0].device_bytes == ranges[0].length);
    CHECK(f.jobs[0].latency_ns > 0);
    io_lanes_counters counters;
    io_lanes_get_counters(f.lanes, &counters);
    CHECK(counters.reads == 1 && counters.bytes == f.jobs[0].device_bytes && counters.speculative_bytes == 0);
    fixture_close(&f);
}

/* The second piece of a demand read fails while the first is held: the job
 * stays pending until the first is over, then fails naming the offset. */
static void test_demand_piece_fails(void)
{
    range ranges[1] = {{12345, 4 * (uint64_t)IO_DEMAND_PIECE + 777}};
    bool speculative[1] = {false};
    fixture f;
    if (!fixture_open(&f, false, ranges, speculative, 1))
        return;
    uint64_t second = (ranges[0].offset & ~(uint64_t)(SHARD_READ_ALIGNMENT - 1)) + IO_DEMAND_PIECE;
    f.rec.fail_offset = (int64_t)second;
    start_held(&f, 0);
    CHECK(wait_reads(&f.rec, 0, 2));
    settle();
    CHECK_MSG(atomic_load(&f.states[0]) == IO_PENDING, "the job ended while a piece of it was still being read");
    set_hold(&f.rec, 0, false);
    CHECK(io_lanes_wait(f.lanes, &f.states[0], false) == -1);
    CHECK(atomic_load(&f.states[0]) == IO_FAILED);
    pthread_mutex_lock(&f.rec.mutex);
    int in_flight = f.rec.in_flight;
    pthread_mutex_unlock(&f.rec.mutex);
    CHECK_MSG(in_flight == 0, "%d pieces still being read when the job failed", in_flight);
    char offset[32];
    snprintf(offset, sizeof offset, "%llu", (unsigned long long)second);
    CHECK_MSG(strstr(f.jobs[0].error.message, offset) != NULL, "error '%s' does not name offset %s",
              f.jobs[0].error.message, offset);
    io_lanes_counters counters;
    io_lanes_get_counters(f.lanes, &counters);
    CHECK(counters.reads == 1 && counters.bytes == 0);
    fixture_close(&f);
}

/* A guess waits while a demand read runs, and never more than the depth run. */
static void test_gating(void)
{
    range ranges[6] = {{0, 65536}, {1u << 20, 65536}, {2u << 20, 65536},
                       {3u << 20, 65536}, {4u << 20, 65536}, {5u << 20, 65536}};
    bool speculative[6] = {false, true, true, true, true, true};
    fixture f;
    if (!fixture_open(&f, true, ranges, speculative, 6))
        return;
    start_held(&f, 0);
    for (int i = 1; i < 6; i++) {
        set_hold(&f.rec, i, true);
        submit(&f, i);
    }
    settle();
    int started = 0;
    for (int i = 1; i < 6; i++)
        started += reads_of(&f.rec, i);
    CHECK_MSG(started == 0, "%d speculative reads started while a demand read ran", started);
    set_hold(&f.rec, 0, false);
    CHECK(io_lanes_wait(f.lanes, &f.states[0], false) == 0);
    /* the first guesses start once the disk has no demand, in queue order */
    CHECK(wait_reads(&f.rec, IO_SPECULATIVE_DEPTH, 1));
    settle();
    pthread_mutex_lock(&f.rec.mutex);
    int in_flight = f.rec.in_flight;
    pthread_mutex_unlock(&f.rec.mutex);
    CHECK_MSG(in_flight == IO_SPECULATIVE_DEPTH, "%d speculative reads at once, depth %d", in_flight,
              IO_SPECULATIVE_DEPTH);
    for (int i = 1; i < 6; i++)
        set_hold(&f.rec, i, false);
    for (int i = 1; i < 6; i++)
        CHECK(io_lanes_wait(f.lanes, &f.states[i], false) == 0 && bytes_right(&f, i));
    CHECK(f.rec.max_in_flight == IO_SPECULATIVE_DEPTH);
    CHECK(f.rec.order[0] == 0);
    for (int k = 1; k <= IO_SPECULATIVE_DEPTH; k++)
        CHECK(f.rec.order[k] >= 1 && f.rec.order[k] <= IO_SPECULATIVE_DEPTH);
    fixture_close(&f);
}

/* Job 0 (a guess of several pieces) starts, job 1 (demand) starts while
 * job 0's first piece is held; that piece ends while job 1 is still held: the
 * guess must then wait, one piece read. */
static void yield_to_demand(fixture *f)
{
    start_held(f, 0);
    start_held(f, 1);
    set_hold(&f->rec, 0, false);
    settle();
    CHECK_MSG(reads_of(&f->rec, 0) == 1, "the guess read %d pieces while a demand read ran", reads_of(&f->rec, 0));
    CHECK(atomic_load(&f->states[0]) == IO_PENDING);
}

/* A guess in the middle of its pieces yields to a demand read that started,
 * and goes on after it. */
static void test_yield(void)
{
    range ranges[2] = {{1u << 20, IO_SPECULATIVE_PIECE * 4}, {4u << 20, 65536}};
    bool speculative[2] = {true, false};
    fixture f;
    if (!fixture_open(&f, true, ranges, speculative, 2))
        return;
    yield_to_demand(&f);
    set_hold(&f.rec, 1, false);
    CHECK(io_lanes_wait(f.lanes, &f.states[1], false) == 0);
    CHECK(io_lanes_wait(f.lanes, &f.states[0], false) == 0);
    CHECK(reads_of(&f.rec, 0) == 4);
    CHECK(bytes_right(&f, 0) && bytes_right(&f, 1));
    fixture_close(&f);
}

/* Job 0, a guess of three pieces, has read one and waits behind job 1, a
 * demand read still held (yield_to_demand). */
static bool open_yielded(fixture *f)
{
    range ranges[2] = {{1u << 20, IO_SPECULATIVE_PIECE * 3}, {5u << 20, 65536}};
    bool speculative[2] = {true, false};
    if (!fixture_open(f, true, ranges, speculative, 2))
        return false;
    yield_to_demand(f);
    return true;
}

/* A guess cancelled after it yielded: the pieces it read count as read. */
static void test_cancel_yielded(void)
{
    fixture f;
    if (!open_yielded(&f))
        return;
    io_job *yielded = &f.jobs[0];
    io_lanes_cancel(f.lanes, &yielded, 1);
    CHECK(atomic_load(&f.states[0]) == IO_CANCELLED);
    set_hold(&f.rec, 1, false);
    CHECK(io_lanes_wait(f.lanes, &f.states[1], false) == 0);
    settle();
    CHECK(reads_of(&f.rec, 0) == 1);
    io_lanes_counters counters;
    io_lanes_get_counters(f.lanes, &counters);
    CHECK(f.jobs[0].device_bytes == IO_SPECULATIVE_PIECE);
    CHECK_MSG(counters.speculative_bytes == IO_SPECULATIVE_PIECE && counters.reads == 2 &&
                  counters.bytes == IO_SPECULATIVE_PIECE + f.jobs[1].device_bytes,
              "counters: %llu reads, %llu bytes, %llu speculative", (unsigned long long)counters.reads,
              (unsigned long long)counters.bytes, (unsigned long long)counters.speculative_bytes);
    fixture_close(&f);
}

/* A queued guess promoted is read at once, whole, though a demand read runs;
 * a queued one cancelled is never read; a running one cancelled stops after
 * its piece; cancelling a demand read does nothing. */
static void test_promote_cancel(void)
{
    range ranges[5] = {{0, 65536},
                       {1u << 20, IO_SPECULATIVE_PIECE * 3},
                       {3u << 20, 65536},
                       {4u << 20, IO_SPECULATIVE_PIECE * 3},
                       {6u << 20, 65536}};
    bool speculative[5] = {false, true, true, true, false};
    fixture f;
    if (!fixture_open(&f, true, ranges, speculative, 5))
        return;
    start_held(&f, 0);
    submit(&f, 1);
    submit(&f, 2);
    settle();
    CHECK(reads_of(&f.rec, 1) == 0 && reads_of(&f.rec, 2) == 0);
    io_job *promoted = &f.jobs[1], *cancelled = &f.jobs[2];
    io_lanes_promote(f.lanes, &promoted, 1);
    CHECK(io_lanes_wait(f.lanes, &f.states[1], false) == 0);
    CHECK(bytes_right(&f, 1));
    CHECK_MSG(reads_of(&f.rec, 1) == 1, "a promoted read took %d reads, not one", reads_of(&f.rec, 1));
    CHECK(!f.jobs[1].speculative);
    io_lanes_cancel(f.lanes, &cancelled, 1);
    CHECK(atomic_load(&f.states[2]) == IO_CANCELLED);
    CHECK(io_lanes_wait(f.lanes, &f.states[2], false) == -1);
    set_hold(&f.rec, 0, false);
    CHECK(io_lanes_wait(f.lanes, &f.states[0], false) == 0);
    settle();
    CHECK(reads_of(&f.rec, 2) == 0);

    /* running: cancelled while its first piece is held */
    start_held(&f, 3);
    io_job *running = &f.jobs[3];
    io_lanes_cancel(f.lanes, &running, 1);
    set_hold(&f.rec, 3, false);
    CHECK(io_lanes_wait(f.lanes, &f.states[3], false) == -1);
    CHECK(atomic_load(&f.states[3]) == IO_CANCELLED);
    CHECK(reads_of(&f.rec, 3) == 1);

    io_job *demand = &f.jobs[4];
    set_hold(&f.rec, 4, true);
    submit(&f, 4);
    io_lanes_cancel(f.lanes, &demand, 1);
    set_hold(&f.rec, 4, false);
    CHECK(io_lanes_wait(f.lanes, &f.states[4], false) == 0 && bytes_right(&f, 4));
    io_lanes_counters counters;
    io_lanes_get_counters(f.lanes, &counters);
    CHECK(counters.speculative_bytes == f.jobs[3].device_bytes); /* the promoted job counts as demand */
    fixture_close(&f);
}

/* A guess promoted while its first piece is read: that piece counts as
 * speculative, the rest (read whole, as demand) does not. */
static void test_promote_running(void)
{
    range ranges[1] = {{1u << 20, IO_SPECULATIVE_PIECE * 3}};
    bool speculative[1] = {true};
    fixture f;
    if (!fixture_open(&f, true, ranges, speculative, 1))
        return;
    start_held(&f, 0);
    io_job *running = &f.jobs[0];
    io_lanes_promote(f.lanes, &running, 1);
    set_hold(&f.rec, 0, false);
    CHECK(io_lanes_wait(f.lanes, &f.states[0], false) == 0 && bytes_right(&f, 0));
    CHECK_MSG(reads_of(&f.rec, 0) == 2, "a guess promoted while running took %d reads, not two",
              reads_of(&f.rec, 0));
    CHECK(f.jobs[0].speculative_device_bytes == IO_SPECULATIVE_PIECE);
    /* the range starts on a block boundary: the piece is the range's first bytes */
    CHECK(f.jobs[0].speculative_done == IO_SPECULATIVE_PIECE);
    CHECK(f.jobs[0].speculative_latency_ns > 0 && f.jobs[0].speculative_latency_ns < f.jobs[0].latency_ns);
    io_lanes_counters counters;
    io_lanes_get_counters(f.lanes, &counters);
    CHECK_MSG(counters.speculative_bytes == IO_SPECULATIVE_PIECE && counters.bytes == f.jobs[0].device_bytes,
              "counters: %llu bytes, %llu speculative", (unsigned long long)counters.bytes,
              (unsigned long long)counters.speculative_bytes);
    fixture_close(&f);
}

/* A guess promoted while it waits after yielding: the same split. */
static void test_promote_yielded(void)
{
    fixture f;
    if (!open_yielded(&f))
        return;
    io_job *yielded = &f.jobs[0];
    io_lanes_promote(f.lanes, &yielded, 1);
    set_hold(&f.rec, 1, false);
    CHECK(io_lanes_wait(f.lanes, &f.states[1], false) == 0 && bytes_right(&f, 1));
    CHECK(io_lanes_wait(f.lanes, &f.states[0], false) == 0 && bytes_right(&f, 0));
    CHECK(f.jobs[0].speculative_device_bytes == IO_SPECULATIVE_PIECE);
    CHECK(f.jobs[0].speculative_done == IO_SPECULATIVE_PIECE);
    io_lanes_counters counters;
    io_lanes_get_counters(f.lanes, &counters);
    CHECK_MSG(counters.speculative_bytes == IO_SPECULATIVE_PIECE, "%llu speculative bytes, not one piece",
              (unsigned long long)counters.speculative_bytes);
    fixture_close(&f);
}

/* A long guess promoted after one piece: the rest is read as a demand read,
 * in pieces that the idle lanes (three: one is held on the demand job) read
 * at once, after the piece it read as a guess. */
static void test_promote_yielded_long(void)
{
    range ranges[2] = {{1u << 20, 4 * (uint64_t)IO_DEMAND_PIECE + IO_SPECULATIVE_PIECE}, {6u << 20, 65536}};
    bool speculative[2] = {true, false};
    fixture f;
    if (!fixture_open(&f, true, ranges, speculative, 2))
        return;
    yield_to_demand(&f);
    set_hold(&f.rec, 0, true);
    io_job *yielded = &f.jobs[0];
    io_lanes_promote(f.lanes, &yielded, 1);
    CHECK_MSG(wait_reads(&f.rec, 0, 1 + 3), "%d reads of the promoted job, not its guessed piece and 3 at once",
              reads_of(&f.rec, 0));
    set_hold(&f.rec, 0, false);
    set_hold(&f.rec, 1, false);
    CHECK(io_lanes_wait(f.lanes, &f.states[1], false) == 0 && bytes_right(&f, 1));
    CHECK(io_lanes_wait(f.lanes, &f.states[0], false) == 0 && bytes_right(&f, 0));
    CHECK_MSG(reads_of(&f.rec, 0) == 5, "%d reads, not 1 guessed piece and 4 demand pieces", reads_of(&f.rec, 0));
    CHECK(f.jobs[0].speculative_done == IO_SPECULATIVE_PIECE);
    CHECK(f.jobs[0].speculative_device_bytes == IO_SPECULATIVE_PIECE);
    if (io_lanes_direct(f.lanes))
        CHECK(f.jobs[0].device_bytes == ranges[0].length); /* aligned at both ends */
    io_lanes_counters counters;
    io_lanes_get_counters(f.lanes, &counters);
    CHECK(counters.reads == 2 && counters.speculative_bytes == IO_SPECULATIVE_PIECE);
    fixture_close(&f);
}

static int in_flight_now(recorder *r)
{
    pthread_mutex_lock(&r->mutex);
    int n = r->in_flight;
    pthread_mutex_unlock(&r->mutex);
    return n;
}

/* Trusted guesses start beside a running demand read on every free lane
 * (trusting wakes the lanes for guesses already queued) and read
 * IO_DEMAND_PIECE pieces; distrusted, they wait again. */
static void test_trusted(void)
{
    range ranges[5] = {{0, 65536},
                       {1u << 20, 2 * (uint64_t)IO_DEMAND_PIECE + 777},
                       {4u << 20, 65536},
                       {5u << 20, 65536},
                       {6u << 20, 65536}};
    bool speculative[5] = {false, true, true, true, true};
    fixture f;
    if (!fixture_open(&f, true, ranges, speculative, 5))
        return;
    start_held(&f, 0);
    for (int i = 1; i < 4; i++) {
        set_hold(&f.rec, i, true);
        submit(&f, i);
    }
    settle();
    CHECK_MSG(in_flight_now(&f.rec) == 1, "untrusted: %d reads beside a running demand read",
              in_flight_now(&f.rec) - 1);
    io_lanes_trust_guesses(f.lanes, true);
    for (int i = 1; i < 4; i++)
        CHECK_MSG(wait_reads(&f.rec, i, 1), "trusted guess %d did not start beside the demand read", i);
    CHECK(in_flight_now(&f.rec) == 4);
    set_hold(&f.rec, 1, false);
    CHECK(io_lanes_wait(f.lanes, &f.states[1], false) == 0 && bytes_right(&f, 1));
    CHECK_MSG(reads_of(&f.rec, 1) == 3, "a trusted guess of 2 MiB + 777 bytes in %d reads, not 3",
              reads_of(&f.rec, 1));
    CHECK(atomic_load(&f.states[0]) == IO_PENDING);
    io_lanes_trust_guesses(f.lanes, false);
    set_hold(&f.rec, 4, true);
    submit(&f, 4);
    settle();
    CHECK_MSG(reads_of(&f.rec, 4) == 0, "a guess started beside a demand read once distrusted");
    for (int i = 0; i < 5; i++)
        set_hold(&f.rec, i, false);
    for (int i = 0; i < 5; i++)
        CHECK(io_lanes_wait(f.lanes, &f.states[i], false) == 0 && bytes_right(&f, i));
    fixture_close(&f);
}

/* Trusted guesses on every lane, a demand read queued behind them: the
 * first guess to end a piece gives its lane to the demand read and waits. */
static void test_trusted_yield(void)
{
    range ranges[5] = {{0, IO_DEMAND_PIECE + 4096},
                       {2u << 20, IO_DEMAND_PIECE + 4096},
                       {4u << 20, IO_DEMAND_PIECE + 4096},
                       {6u << 20, IO_DEMAND_PIECE + 4096},
                       {(7u << 20) + (512u << 10), 65536}};
    bool speculative[5] = {true, true, true, true, false};
    fixture f;
    if (!fixture_open(&f, true, ranges, speculative, 5))
        return;
    io_lanes_trust_guesses(f.lanes, true);
    for (int i = 0; i < 4; i++)
        start_held(&f, i);
    set_hold(&f.rec, 4, true);
    submit(&f, 4);
    settle();
    CHECK_MSG(reads_of(&f.rec, 4) == 0, "a demand read started with every lane reading");
    set_hold(&f.rec, 0, false);
    CHECK_MSG(wait_reads(&f.rec, 4, 1), "the demand read did not take the lane of the guess that ended a piece");
    settle();
    CHECK_MSG(reads_of(&f.rec, 0) == 1, "the guess read %d pieces with a demand read queued", reads_of(&f.rec, 0));
    for (int i = 0; i < 5; i++)
        set_hold(&f.rec, i, false);
    for (int i = 0; i < 5; i++)
        CHECK(io_lanes_wait(f.lanes, &f.states[i], false) == 0 && bytes_right(&f, i));
    CHECK(reads_of(&f.rec, 0) == 2);
    fixture_close(&f);
}

int main(void)
{
    char path[] = "test_io_lanes.XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0)
        return test_finish();
    model_path = path;
    uint8_t *data = malloc(FILE_BYTES);
    for (uint64_t i = 0; i < FILE_BYTES; i++)
        data[i] = file_byte(i);
    CHECK(write(fd, data, FILE_BYTES) == (ssize_t)FILE_BYTES);
    free(data);
    close(fd);
    test_bytes(true);
    test_bytes(false);
    test_demand_pieces(true);
    test_demand_pieces(false);
    test_demand_piece_fails();
    test_gating();
    test_yield();
    test_cancel_yielded();
    test_promote_cancel();
    test_promote_running();
    test_promote_yielded();
    test_promote_yielded_long();
    test_trusted();
    test_trusted_yield();
    unlink(path);
    return test_finish();
}
