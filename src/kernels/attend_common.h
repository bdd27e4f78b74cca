/* Shared by the tiled attention kernels (attend_avx2.c, attend_avx512.c,
 * attend_neon.c): the layout of their scratch. Private to src/kernels.
 *
 * The tiled kernels (kernels.h, attend_fn) keep a running maximum, a running
 * sum of exps in vector lanes and the output rows as accumulators, and visit
 * the keys in tiles of ATTEND_TILE_KEYS positions starting at multiples of
 * ATTEND_TILE_KEYS. Per tile: the tile's keys are converted to f32 once (rows
 * padded with zeros to a multiple of 16 floats, so the dot products need no
 * tail), each query's scores come from lanes-over-dimensions products reduced
 * per key in a fixed tree, the maximum is raised and the old sums and outputs
 * scaled by e^(old - new), and the values are added in position order with
 * every query's accumulators in registers (the value rows converted to f32
 * once per tile into the same buffer, the keys being done with). Which tiles a query visits and
 * what it does in each depends only on its own key range, so its bits do not
 * depend on the other queries of a job or on the jobs around it. */
#ifndef BMOE_KERNELS_ATTEND_COMMON_H
#define BMOE_KERNELS_ATTEND_COMMON_H

#include <stdint.h>

#include "kernels.h"

/* Key and query rows in scratch are padded to this many floats, 64 bytes. */
#define ATTEND_ROW_ALIGN 16

typedef struct attend_layout {
    int64_t padded_dim; /* head_dim_k rounded up to ATTEND_ROW_ALIGN */
    float *queries;     /* ATTEND_MAX_QUERIES rows of padded_dim */
    float *keys;        /* ATTEND_TILE_KEYS rows of padded_dim */
    float *weights;     /* ATTEND_MAX_QUERIES rows of ATTEND_TILE_KEYS: a tile's e^(s - max) */
} attend_layout;

static inline int64_t attend_padded_dim(int head_dim_k)
{
    return ((int64_t)head_dim_k + ATTEND_ROW_ALIGN - 1) / ATTEND_ROW_ALIGN * ATTEND_ROW_ALIGN;
}

/* Floats the tiled kernels use, the alignment slack included. */
static inline int64_t attend_tiled_scratch_floats(int head_dim_k)
{
    return ATTEND_ROW_ALIGN + (ATTEND_MAX_QUERIES + ATTEND_TILE_KEYS) * attend_padded_dim(head_dim_k) +
           (int64_t)ATTEND_MAX_QUERIES * ATTEND_TILE_KEYS;
}

static inline attend_layout attend_layout_of(float *scratch, int head_dim_k)
{
    attend_layout layout;
    uintptr_t address = (uintptr_t)scratch;
    uintptr_t aligned = (address + ATTEND_ROW_ALIGN * sizeof(float) - 1) & ~(uintptr_t)(ATTEND_ROW_ALIGN * sizeof(float) - 1);
    layout.padded_dim = attend_padded_dim(head_dim_k);
    layout.queries = scratch + (aligned - address) / sizeof(float);
    layout.keys = layout.queries + ATTEND_MAX_QUERIES * layout.padded_dim;
    layout.weights = layout.keys + ATTEND_TILE_KEYS * layout.padded_dim;
    return layout;
}

/* The positions a job reads: from its queries' smallest first to their
 * largest last. */
static inline void attend_job_range(const attend_job *job, int32_t *first, int32_t *last)
{
    *first = job->queries[0].first;
    *last = job->queries[0].last;
    for (int g = 1; g < job->n_queries; g++) {
        if (job->queries[g].first < *first)
            *first = job->queries[g].first;
        if (job->queries[g].last > *last)
            *last = job->queries[g].last;
    }
}

/* What a tile does for each query. A query whose range covers the whole
 * visited part [low, high] of the tile is "full": the full queries take the
 * values together. Any other query that sees part of the tile takes them
 * alone over its own part, which is what it does in a job of its own (where
 * its part is the whole visited part): either way a query's value sums are
 * the same operations over its own keys. */
typedef struct attend_tile {
    int32_t start, low, high;           /* first position; visited part: the job's range within the tile */
    int32_t query_low[ATTEND_MAX_QUERIES], query_high[ATTEND_MAX_QUERIES]; /* each query's part */
    int present[ATTEND_MAX_QUERIES];    /* the query sees some of the tile */
    int n_full, full[ATTEND_MAX_QUERIES];
    int n_partial, partial[ATTEND_MAX_QUERIES];
} attend_tile;

static inline void attend_tile_plan(const attend_job *job, int32_t start, int32_t job_first, int32_t job_last,
                                    attend_tile *tile)
{
    int32_t end = start + ATTEND_TILE_KEYS - 1;
    tile->start = start;
    tile->low = job_first > start ? job_first : start;
    tile->high = job_last < end ? job_last : end;
    tile->n_full = tile->n_partial = 0;
    for (int g = 0; g < job->n_queries; g++) {
        const attend_query *query = &job->queries[g];
        int32_t low = query->first > start ? query->first : start;
        int32_t high = query->last < end ? query->last : end;
        tile->query_low[g] = low;
        tile->query_high[g] = high;
        tile->present[g] = low <= high;
        if (!tile->present[g])
            continue;
        if (low == tile->low && high == tile->high)
            tile->full[tile->n_full++] = g;
        else
            tile->partial[tile->n_partial++] = g;
    }
}

/* Keys ahead whose rows a tile asks for while it converts its own: a job
 * reads one head's part of each position (key_stride apart), four positions
 * per page, which the hardware prefetchers pick up late; asking for the rows
 * two tiles ahead, a row at a time as the tile's own rows are read, cut decode
 * attention at 512-2048 positions by 15-20 % (bench-attention's shape, KV
 * streamed from memory). */
#define ATTEND_PREFETCH_KEYS (2 * ATTEND_TILE_KEYS)

/* Asks for row position + ATTEND_PREFETCH_KEYS (bytes long) when the job
 * reads it. */
static inline void attend_prefetch(const void *rows, size_t stride, int32_t position, int32_t last, size_t bytes)
{
    if (position + ATTEND_PREFETCH_KEYS > last)
        return;
    const char *row = (const char *)rows + (size_t)(position + ATTEND_PREFETCH_KEYS) * stride;
    for (size_t offset = 0; offset < bytes; offset += 64)
        __builtin_prefetch(row + offset);
}

#endif
