/* Parallel products of weight matrices with batches of activation rows
 * (matmul.h): activation conversion, and the split of every job's rows over
 * the pool's threads in one parallel step.
 *
 * Work split. The rows of each job are cut into chunks; all chunks of all jobs
 * are numbered in one sequence and threads take the next chunk from a shared
 * counter until none is left. Taking chunks dynamically keeps the threads
 * balanced when one of them is slowed (another process, a busy sibling
 * hyper-thread), which a fixed split cannot.
 *
 * A batch (prefill) without a tile kernel: a chunk is a few cache lines of
 * weight blocks (a multiple of 4 rows, so register-blocked kernels stay full),
 * small enough to stay in L1/L2 while it is reused across the batch's tokens:
 * rows outer, tokens inner (matmul_chunk_rows says when chunks are whole jobs). Where the kernel set has a tile kernel for the type,
 * one call covers the chunk's rows for all tokens, unpacking each weight block
 * once per few tokens; it gives the same bits as dot_rows per token.
 *
 * One token (decode) is memory-bound: what matters is that each thread reads
 * long sequential runs, which the hardware prefetchers follow. A step's rows
 * are then taken in pieces that start as large as whole expert matrices and
 * shrink towards the end of the step (MATMUL_DECODE_GUIDE); a piece's rows are
 * read in order from a few sequential streams, one row per kernel call, with
 * a software prefetch a little ahead.
 * Measured with bench-kernels (Q4_K 2048x768, weights streamed from memory):
 * 4-row groups reading four rows at once reach 56-60 % of the single-thread
 * streaming bandwidth, one row at a time 74-78 %; on two threads, 32 KiB
 * chunks taken alternately by the threads 37 %, two contiguous chunks per
 * thread 61-66 %. Each (row, token) is one call of the same dot
 * kernel whatever the chunking, so results do not depend on the thread count
 * or on how tokens are batched (kernels.h: batch invariance). */
#include "matmul.h"

#include <math.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <string.h>

/* Bytes of weights per chunk: a chunk should stay in L1/L2 while every token
 * of a batch passes over it, and be large enough that taking it from the
 * shared counter costs little next to the work. */
#define MATMUL_CHUNK_BYTES (32 * 1024)
/* Rows per chunk are a multiple of this (kernels process 2-4 rows at a time). */
#define MATMUL_ROW_GRAIN 4
/* Each job is cut into at least this many chunks per thread when it has the
 * rows, so that the last chunks even out the threads' finishing times. */
#define MATMUL_CHUNKS_PER_THREAD 4
/* One-token jobs in a batch step (an expert that got one token of the batch):
 * chunks per thread per job (long sequential runs, some balance). */
#define MATMUL_DECODE_CHUNKS_PER_THREAD 2
/* Decode schedule (guided self-scheduling): a thread takes 1 / (GUIDE x
 * threads) of the step's remaining weights, cut at its job's end. Pieces are
 * whole expert matrices while many remain and shrink towards the end of the
 * step, so the threads finish together even when one reads slower memory.
 * Before, with whole jobs (or two shares per thread) to the end, the threads
 * sat idle for 13 % of the decode matmul time (qwen3-30b-a3b, -t 2: 20 % in
 * the experts' down step); with the last jobs cut in four, 6-7 % (decode
 * 7.5 -> 8.0 tok/s); this schedule, A/B over five rounds: 7.55 -> 7.91 tok/s
 * median, faster in four of five. */
#define MATMUL_DECODE_GUIDE 2
/* Decode: the smallest piece, in bytes of weights (shorter runs stream badly). */
#define MATMUL_DECODE_MIN_PIECE_BYTES (64 * 1024)

size_t activation_row_bytes(uint32_t weight_type, int64_t n)
{
    const quant_format *format = quant_format_of(weight_type);
    if (!format || n < 0)
        return 0;
    if (format->activation_type == TYPE_F32)
        return (size_t)n * sizeof(float);
    return quant_row_bytes(format->activation_type, n);
}

void activation_convert(const kernel_set *kernels, uint32_t weight_type, const float *x, int64_t n, void *dst)
{
    const quant_format *format = quant_format_of(weight_type);
    if (!format || n <= 0)
        return;
    if (format->activation_type == TYPE_F32) {
        memcpy(dst, x, (size_t)n * sizeof(float));
        return;
    }
    quantize_row_fn quantize = kernels_quantize_row(kernels ? kernels : kernels_best(), format->activation_type);
    if (quantize)
        quantize(x, dst, n);
}

typedef struct matmul_step {
    const kernel_set *kernels;
    const matmul_job *jobs;
    int n_jobs;
    int n_threads;       /* the split is computed for this many threads */
    int64_t n_chunks;    /* over all jobs (batch steps) */
    int64_t n_rows;      /* over all jobs (decode steps) */
    const matmul_waiter *waiter;
    _Atomic int64_t skipped; /* pieces whose weights never arrived */
    _Alignas(64) atomic_llong next_chunk;
    _Alignas(64) _Atomic int64_t next_row;
} matmul_step;

/* Rows per chunk for one job of a step.
 *
 * Whole jobs when the step has enough of them to keep every thread busy (the
 * experts of a MoE layer) and the work on a chunk does not depend on its size
 * for cache reuse (one token, or a tile kernel, which blocks rows and tokens
 * itself): each thread then streams whole expert matrices. The
 * experts' gate+up of a decode token, 2 threads: 9.3-11.5 -> 10.7-12.9 GB/s
 * (decode 5.74 -> 6.26 tok/s); 64-token prefill 20.2 -> 23.0 tok/s.
 *
 * Otherwise, one token (an expert that got one token of a batch):
 * MATMUL_DECODE_CHUNKS_PER_THREAD shares per thread; batch
 * without a tile kernel: about MATMUL_CHUNK_BYTES of weights, fewer when that
 * would leave too few chunks for the threads to balance. */
/* rows rounded up to a whole number of MATMUL_ROW_GRAIN, at least one grain. */
static int64_t matmul_round_rows(int64_t rows)
{
    rows = (rows + MATMUL_ROW_GRAIN - 1) / MATMUL_ROW_GRAIN * MATMUL_ROW_GRAIN;
    return rows < MATMUL_ROW_GRAIN ? MATMUL_ROW_GRAIN : rows;
}

static int64_t matmul_chunk_rows(const matmul_step *step, const matmul_job *job)
{
    int n_threads = step->n_threads;
    int64_t shares = (int64_t)n_threads * MATMUL_DECODE_CHUNKS_PER_THREAD;
    bool size_free = job->n_tokens == 1 || kernels_dot_tile(step->kernels, job->type) != NULL;
    if (size_free && step->n_jobs >= shares)
        return matmul_round_rows(job->n_out);
    if (job->n_tokens == 1)
        return matmul_round_rows((job->n_out + shares - 1) / shares);
    size_t row_bytes = job->weight_row_bytes ? job->weight_row_bytes : 1;
    int64_t rows = (int64_t)(MATMUL_CHUNK_BYTES / row_bytes);
    int64_t balanced = (job->n_out + (int64_t)n_threads * MATMUL_CHUNKS_PER_THREAD - 1) /
                       ((int64_t)n_threads * MATMUL_CHUNKS_PER_THREAD);
    if (n_threads > 1 && balanced < rows)
        rows = balanced;
    return matmul_round_rows(rows);
}

static int64_t matmul_job_chunks(const matmul_step *step, const matmul_job *job)
{
    if (job->n_out <= 0 || job->n_tokens <= 0)
        return 0;
    int64_t rows = matmul_chunk_rows(step, job);
    return (job->n_out + rows - 1) / rows;
}


/* Rows [row_begin, row_end) of one job for every token, rows outer. */
static void matmul_rows(const kernel_set *kernels, const matmul_job *job, int64_t row_begin,
                        int64_t row_end)
{
    dot_rows_fn dot_rows = kernels_dot_rows(kernels, job->type);
    int64_t n_rows = row_end - row_begin;
    if (!dot_rows) {
        /* No dot product for this type: the loader rejects such tensors, so
         * this is a caller bug; make it loud rather than plausible. */
        for (int64_t t = 0; t < job->n_tokens; t++)
            for (int64_t r = row_begin; r < row_end; r++)
                job->out[t * job->out_stride + r] = NAN;
        return;
    }
    const unsigned char *weights =
        (const unsigned char *)job->weights + (size_t)row_begin * job->weight_row_bytes;
    size_t row_bytes = job->weight_row_bytes;
    if (job->n_tokens == 1) {
        /* Decode: the kernel reads the piece's rows in the order that
         * streams best (kernels.h: dot_decode). */
        kernels_dot_decode(kernels, job->type)(job->n_in, weights, row_bytes, n_rows, job->activations,
                                               job->out + row_begin);
        return;
    }
    /* A batch: arithmetic-bound. The chunk's rows stay in cache while every
     * token passes over them; a tile kernel also unpacks each weight block
     * once for several tokens (same bits as dot_rows per token) and is given
     * the whole chunk, so that what it prepares per token serves every row. */
    dot_tile_fn dot_tile = kernels_dot_tile(kernels, job->type);
    if (dot_tile && dot_rows == kernels->dot_rows[job->type]) {
        dot_tile(job->n_in, weights, row_bytes, n_rows, job->activations, job->activation_stride,
                 job->n_tokens, job->out + row_begin, job->out_stride);
        return;
    }
    const unsigned char *activation = job->activations;
    for (int64_t t = 0; t < job->n_tokens; t++) {
        dot_rows(job->n_in, weights, row_bytes, n_rows, activation,
                 job->out + t * job->out_stride + row_begin);
        activation += job->activation_stride;
    }
}

/* Rows [row_begin, row_end) of job once its weights are in. */
static void matmul_piece(matmul_step *step, const matmul_job *job, int64_t row_begin, int64_t row_end)
{
    if (job->ready && step->waiter && step->waiter->wait(step->waiter->user, job->ready) != 0) {
        atomic_fetch_add_explicit(&step->skipped, 1, memory_order_relaxed);
        return;
    }
    matmul_rows(step->kernels, job, row_begin, row_end);
}

static void matmul_task(void *context, int thread_index, int n_threads)
{
    (void)thread_index;
    (void)n_threads;
    matmul_step *step = context;
    /* Chunk numbers taken by one thread only grow, so the job cursor only
     * moves forward: walking the jobs costs O(n_jobs) per thread in total. */
    int job_index = 0;
    int64_t job_first_chunk = 0;
    int64_t job_chunks = step->n_jobs > 0 ? matmul_job_chunks(step, &step->jobs[0]) : 0;
    for (;;) {
        int64_t chunk = atomic_fetch_add_explicit(&step->next_chunk, 1, memory_order_relaxed);
        if (chunk >= step->n_chunks)
            return;
        while (chunk >= job_first_chunk + job_chunks) {
            job_first_chunk += job_chunks;
            job_index++;
            job_chunks = matmul_job_chunks(step, &step->jobs[job_index]);
        }
        const matmul_job *job = &step->jobs[job_index];
        int64_t rows = matmul_chunk_rows(step, job);
        int64_t row_begin = (chunk - job_first_chunk) * rows;
        int64_t row_end = row_begin + rows < job->n_out ? row_begin + rows : job->n_out;
        matmul_piece(step, job, row_begin, row_end);
    }
}

/* Decode: bytes of weights from global row `row` (in job `job_index`, whose
 * first global row is `job_first`) to the end of the step. */
static uint64_t matmul_decode_bytes_left(const matmul_step *step, int job_index, int64_t job_first, int64_t row)
{
    const matmul_job *job = &step->jobs[job_index];
    uint64_t bytes = (uint64_t)(job_first + job->n_out - row) * job->weight_row_bytes;
    for (int j = job_index + 1; j < step->n_jobs; j++)
        bytes += (uint64_t)step->jobs[j].n_out * step->jobs[j].weight_row_bytes;
    return bytes;
}

/* Decode: where the piece a thread takes at global row `row` ends: a
 * 1 / (MATMUL_DECODE_GUIDE x threads) share of the step's remaining weights,
 * at least MATMUL_DECODE_MIN_PIECE_BYTES, never past the end of its job. */
static int64_t matmul_decode_piece_end(const matmul_step *step, int job_index, int64_t job_first, int64_t row)
{
    const matmul_job *job = &step->jobs[job_index];
    uint64_t want = matmul_decode_bytes_left(step, job_index, job_first, row) /
                    ((uint64_t)MATMUL_DECODE_GUIDE * (uint64_t)step->n_threads);
    if (want < MATMUL_DECODE_MIN_PIECE_BYTES)
        want = MATMUL_DECODE_MIN_PIECE_BYTES;
    int64_t rows = matmul_round_rows((int64_t)(want / (job->weight_row_bytes ? job->weight_row_bytes : 1)));
    int64_t job_end = job_first + job->n_out;
    return rows < job_end - row ? row + rows : job_end;
}

/* Decode: threads take pieces of the step's rows (all jobs end to end) from
 * one shared cursor; see MATMUL_DECODE_GUIDE. The cursor only grows, so each
 * thread's job cursor only moves forward. */
static void matmul_decode_task(void *context, int thread_index, int n_threads)
{
    (void)thread_index;
    (void)n_threads;
    matmul_step *step = context;
    int job_index = 0;
    int64_t job_first = 0;
    for (;;) {
        int64_t begin = atomic_load_explicit(&step->next_row, memory_order_relaxed);
        int64_t end;
        do {
            if (begin >= step->n_rows)
                return;
            while (begin >= job_first + step->jobs[job_index].n_out) {
                job_first += step->jobs[job_index].n_out;
                job_index++;
            }
            end = matmul_decode_piece_end(step, job_index, job_first, begin);
        } while (!atomic_compare_exchange_weak_explicit(&step->next_row, &begin, end, memory_order_relaxed,
                                                        memory_order_relaxed));
        matmul_piece(step, &step->jobs[job_index], begin - job_first, end - job_first);
    }
}

/* One token per job: the decode schedule. */
static bool matmul_is_decode(const matmul_job *jobs, int n_jobs)
{
    for (int j = 0; j < n_jobs; j++)
        if (jobs[j].n_tokens != 1 || jobs[j].n_out < 0)
            return false;
    return true;
}

void matmul_run(thread_pool *pool, const kernel_set *kernels, const matmul_job *jobs, int n_jobs)
{
    matmul_run_waiting(pool, kernels, jobs, n_jobs, NULL);
}

int64_t matmul_run_waiting(thread_pool *pool, const kernel_set *kernels, const matmul_job *jobs, int n_jobs,
                           const matmul_waiter *waiter)
{
    if (!jobs || n_jobs <= 0)
        return 0;
    if (!kernels)
        kernels = kernels_best();
    matmul_step step;
    step.kernels = kernels;
    step.jobs = jobs;
    step.n_jobs = n_jobs;
    step.n_threads = thread_pool_size(pool);
    step.waiter = waiter;
    atomic_init(&step.skipped, 0);
    if (matmul_is_decode(jobs, n_jobs)) {
        step.n_rows = 0;
        uint64_t bytes = 0;
        for (int j = 0; j < n_jobs; j++) {
            step.n_rows += jobs[j].n_out;
            bytes += (uint64_t)jobs[j].n_out * jobs[j].weight_row_bytes;
        }
        atomic_init(&step.next_row, 0);
        if (step.n_threads == 1 || bytes <= MATMUL_DECODE_MIN_PIECE_BYTES)
            matmul_decode_task(&step, 0, 1); /* waking the workers would cost more */
        else
            thread_pool_run(pool, matmul_decode_task, &step);
        return atomic_load(&step.skipped);
    }
    step.n_chunks = 0;
    for (int j = 0; j < n_jobs; j++)
        step.n_chunks += matmul_job_chunks(&step, &jobs[j]);
    atomic_init(&step.next_chunk, 0);
    if (step.n_chunks == 0)
        return 0;
    if (step.n_chunks == 1) {
        /* One chunk: waking the workers would cost more than the product. */
        matmul_task(&step, 0, 1);
        return atomic_load(&step.skipped);
    }
    thread_pool_run(pool, matmul_task, &step);
    return atomic_load(&step.skipped);
}
