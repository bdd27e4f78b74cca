/* I/O lanes: a few threads, each with its own shard descriptors, that pull
 * read jobs from two queues (demand, speculative) and publish each slice's
 * arrival in its readiness flag. Compute threads that need a slice wait on
 * that flag alone (a brief spin, then sleep), so an expert's matmul starts
 * the moment its bytes are in; the time during which at least one thread
 * waits is the stall (a union of intervals, not a sum over threads).
 * A long demand read is cut into pieces of IO_DEMAND_PIECE that idle lanes
 * read at once, so one projection of a large expert keeps the queue deep.
 * Speculative reads only fill the time the disk would stand idle: at most
 * IO_SPECULATIVE_DEPTH at a time, only while no demand read is queued or
 * running, in pieces of IO_SPECULATIVE_PIECE bytes with a check for demand
 * between pieces. On a disk that is the bottleneck, a guess read while demand
 * waits costs its whole length whenever it is wrong. Guesses the expert store
 * trusts (io_lanes_trust_guesses: measured right) are read like demand reads
 * ranked behind them instead: a right guess read slowly is late where the
 * reads bound the token.
 * Owns: the lane threads, their readers, the queues and the wait state. A job
 * is the lanes' from io_lanes_submit until its state says it is done. */
#ifndef BMOE_STREAM_IO_LANES_H
#define BMOE_STREAM_IO_LANES_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "shard_reader.h"

/* IO_CANCELLED: a speculative read dropped before it finished (its bytes
 * must not be used, as for a failed one). */
enum io_state { IO_PENDING = 0, IO_READY = 1, IO_FAILED = 2, IO_CANCELLED = 3 };

/* A speculative read yields to demand reads between pieces of this size: it
 * bounds how long a demand read waits behind a guess and what a guess
 * dropped midway still costs. Some disks read small pieces more slowly, but
 * larger pieces made a real predictor's wrong guesses dearer without making
 * it faster. */
#define IO_SPECULATIVE_PIECE (256u * 1024u)
/* Speculative reads at once: one alone leaves this disk below its rate. */
#define IO_SPECULATIVE_DEPTH 2
/* A demand read of at least two of these is read in pieces of this size,
 * several lanes at once: a disk serves one large read more slowly than the
 * same bytes in reads of about 1 MiB at the lanes' queue depth, and a layer's
 * few large reads would otherwise leave lanes idle while the last ones run. */
#define IO_DEMAND_PIECE (1024u * 1024u)

typedef struct io_job {
    uint8_t *region;            /* destination (aligned), shard_region_bytes(length) long */
    uint32_t shard;
    uint64_t offset, length;
    _Atomic uint32_t *state;    /* IO_READY, IO_FAILED or IO_CANCELLED once done */
    int32_t layer, expert;      /* for traces */
    int32_t projection;
    bool speculative;           /* until io_lanes_promote */
    /* the lanes' own (under their lock) */
    int32_t where;              /* queued, running or neither */
    bool cancel;
    uint64_t done;              /* bytes of the range read so far (in pieces: once all are in) */
    uint64_t handed;            /* demand: bytes of the range given to lanes */
    int32_t pieces_running;     /* demand: pieces being read now */
    bool piece_failed;
    int64_t demand_start_ns;    /* when its first demand piece started */
    /* filled by the lane */
    uint64_t device_bytes;
    /* the part read while the job was speculative: always a prefix (a job
     * promoted stays demand), its bytes of the range, device bytes, time */
    uint64_t speculative_done, speculative_device_bytes;
    int64_t speculative_latency_ns;
    int64_t latency_ns;
    int32_t lane;
    bmoe_error error;           /* when the state is IO_FAILED */
} io_job;

typedef struct io_lanes io_lanes;

/* The lanes' counters, cumulative since creation. */
typedef struct io_lanes_counters {
    uint64_t reads;             /* jobs done */
    uint64_t bytes;             /* device bytes (aligned windows) */
    uint64_t speculative_bytes; /* device bytes read while their job was speculative (a promoted
                                 * job's pieces before its promotion) */
    int64_t busy_ns;            /* summed over lanes */
    int64_t stall_ns;           /* union of the intervals some thread waited in io_lanes_wait */
} io_lanes_counters;

/* n_lanes threads, each opening every shard (want_direct: O_DIRECT where
 * the file system serves it right). Returns NULL with err filled. */
io_lanes *io_lanes_create(int n_lanes, const char *const *paths, const uint64_t *sizes, uint32_t n_files,
                          bool want_direct, const shard_io *io, bmoe_error *err);
void io_lanes_destroy(io_lanes *lanes);
bool io_lanes_direct(const io_lanes *lanes);
int io_lanes_count(const io_lanes *lanes);

/* Queues jobs (their states must be IO_PENDING): demand reads at once,
 * speculative ones when the disk has no demand read to serve. A job must stay
 * valid until its state says it is done. */
void io_lanes_submit(io_lanes *lanes, io_job *const *jobs, int n_jobs);

/* Speculative jobs that turned out to be needed become demand reads: queued
 * ones move to the end of the demand queue, a running one stops yielding.
 * Jobs that are done or already demand are left alone. */
void io_lanes_promote(io_lanes *lanes, io_job *const *jobs, int n_jobs);

/* Speculative jobs no longer wanted: a queued one ends IO_CANCELLED at once,
 * a running one after its current piece. Demand jobs are left alone. */
void io_lanes_cancel(io_lanes *lanes, io_job *const *jobs, int n_jobs);

/* Trusted: the guesses come from a predictor measured right (the expert
 * store decides). A trusted guess starts whenever no demand read is queued,
 * on any free lane, reads IO_DEMAND_PIECE pieces and yields only to demand
 * reads queued. Untrusted (the default): the limits above. */
void io_lanes_trust_guesses(io_lanes *lanes, bool trusted);

/* Waits until *state is no longer IO_PENDING (any thread). stall: the wait
 * counts in the stall figure (a compute thread waiting for its weights).
 * Returns 0 when the bytes arrived, -1 when their read failed or was
 * cancelled. */
int io_lanes_wait(io_lanes *lanes, _Atomic uint32_t *state, bool stall);

void io_lanes_get_counters(io_lanes *lanes, io_lanes_counters *counters);

#endif
