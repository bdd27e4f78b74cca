/* Shared by the tiled attention kernels (attend_avx2.c, attend_avx512.c,
 * attend_neon.c): the layout of their scratch. Private to src/kernels.
 *
 * The tiled kernels (kernels.h, attend_fn) keep a running maximum, a running
 * sum of exps in vector lanes and the output rows as accumulators, and visit
 * the keys in tiles of ATTEND_TILE_KEYS positions starting at multiples of
 * ATTEND_TILE_KEYS, the cache's own tiles (kernels.h: the format). Per tile:
 * every query's scores with keys over lanes (each dimension of the tile's
 * keys is a contiguous run of the cache, multiplied by that dimension of
 * each query, so a key's score is one sum in dimension order), the maximum
 * raised and the old sums and outputs scaled by e^(old - new), and the
 * values added in position order with every query's accumulators in
 * registers. Which tiles a query visits and what it does in each depends
 * only on its own key range, so its bits do not depend on the other queries
 * of a job or on the jobs around it. */
#ifndef BMOE_KERNELS_ATTEND_COMMON_H
#define BMOE_KERNELS_ATTEND_COMMON_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"

/* Key rows and the queries' dimensions in scratch are padded to this many
 * floats, 64 bytes. */
#define ATTEND_ROW_ALIGN 16

/* The queries are kept dimension by dimension (element d of query g at
 * queries[d * ATTEND_MAX_QUERIES + g]) and the full queries' weights as one
 * block of rows, so that the scores and values loops reach every query's
 * operand from one pointer at fixed offsets: with a pointer per query they
 * ran out of registers and spilled inside the loop. */
typedef struct attend_layout {
    int64_t padded_dim;  /* head_dim_k rounded up to ATTEND_ROW_ALIGN */
    float *queries;      /* padded_dim groups of ATTEND_MAX_QUERIES */
    float *keys;         /* ATTEND_TILE_KEYS rows of padded_dim; before the first tile, the row
                          * a kernel converts a query into for attend_put_query */
    float *weights;      /* ATTEND_MAX_QUERIES rows of ATTEND_TILE_KEYS: a tile's e^(s - max) */
    float *full_weights; /* the same, the tile's full queries' rows in order (attend_full_queries) */
} attend_layout;

static inline int64_t attend_padded_dim(int head_dim_k)
{
    return ((int64_t)head_dim_k + ATTEND_ROW_ALIGN - 1) / ATTEND_ROW_ALIGN * ATTEND_ROW_ALIGN;
}

/* Floats the tiled kernels use, the alignment slack included. */
static inline int64_t attend_tiled_scratch_floats(int head_dim_k)
{
    return ATTEND_ROW_ALIGN + (ATTEND_MAX_QUERIES + ATTEND_TILE_KEYS) * attend_padded_dim(head_dim_k) +
           2 * (int64_t)ATTEND_MAX_QUERIES * ATTEND_TILE_KEYS;
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
    layout.full_weights = layout.weights + ATTEND_MAX_QUERIES * ATTEND_TILE_KEYS;
    return layout;
}

/* Query g's row of padded_dim floats, which the kernel has just converted
 * into layout->keys (no tile has used it yet), into the dimension-major
 * queries. */
static inline void attend_put_query(const attend_layout *layout, int g)
{
    for (int64_t d = 0; d < layout->padded_dim; d++)
        layout->queries[d * ATTEND_MAX_QUERIES + g] = layout->keys[d];
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

/* The tile's full queries as the values step takes them, in tile->full
 * order: their output rows and scales, and their rows of the tile's
 * weights, returned as one block of rows ATTEND_TILE_KEYS floats apart
 * (layout->weights itself when the full queries are the job's first ones,
 * else a copy in layout->full_weights). */
static inline const float *attend_full_queries(const attend_job *job, const attend_tile *tile,
                                               const attend_layout *layout, const float *scale, float **outs,
                                               float *scales)
{
    bool leading = true;
    for (int i = 0; i < tile->n_full; i++) {
        int g = tile->full[i];
        outs[i] = job->queries[g].out;
        scales[i] = scale[g];
        leading = leading && g == i;
    }
    if (leading)
        return layout->weights;
    for (int i = 0; i < tile->n_full; i++)
        memcpy(layout->full_weights + i * ATTEND_TILE_KEYS, layout->weights + tile->full[i] * ATTEND_TILE_KEYS,
               ATTEND_TILE_KEYS * sizeof(float));
    return layout->full_weights;
}

/* Expands to CALL(Q) with Q the constant count (1..ATTEND_MAX_QUERIES), so
 * that a kernel's loops over the job's queries unroll for each count. */
#define ATTEND_FOR_QUERIES(count, CALL) \
    do { \
        switch (count) { \
        case 1: CALL(1); break; \
        case 2: CALL(2); break; \
        case 3: CALL(3); break; \
        case 4: CALL(4); break; \
        case 5: CALL(5); break; \
        case 6: CALL(6); break; \
        case 7: CALL(7); break; \
        case 8: CALL(8); break; \
        default: break; \
        } \
    } while (0)

_Static_assert(ATTEND_MAX_QUERIES == 8, "ATTEND_FOR_QUERIES covers 1..8 queries");

/* How far ahead a tile asks for the cache's lines. A job streams its head's
 * keys and values from memory, and each load of a tile's data asks for the
 * same line ATTEND_PREFETCH_TILES tiles on, so the requests spread over the
 * tile's arithmetic: asked for all at once at the tile's start, they fill
 * the core's few outstanding-miss slots and stall it until most of the next
 * tile has arrived. */
#define ATTEND_PREFETCH_TILES 1

/* The distance in bytes from a place in this tile's keys (values) to the
 * same place in the tile ATTEND_PREFETCH_TILES on; 0 when that tile is past
 * the job's last position: nothing to ask for. */
typedef struct attend_ahead {
    size_t keys, values;
} attend_ahead;

static inline attend_ahead attend_ahead_of(const attend_job *job, int32_t tile_start, int32_t job_last,
                                           size_t element)
{
    attend_ahead ahead = {0, 0};
    bool wraps = job->ring && attend_index(job, tile_start) + ATTEND_PREFETCH_TILES * ATTEND_TILE_KEYS >= job->ring;
    if (tile_start + ATTEND_PREFETCH_TILES * ATTEND_TILE_KEYS <= job_last && !wraps) {
        ahead.keys = (size_t)ATTEND_PREFETCH_TILES * ATTEND_TILE_KEYS * (size_t)job->head_dim_k * element;
        ahead.values = (size_t)ATTEND_PREFETCH_TILES * ATTEND_TILE_KEYS * job->value_stride;
    }
    return ahead;
}

/* Asks for the line at p + ahead, when there is one. */
static inline void attend_prefetch_ahead(const void *p, size_t ahead)
{
    if (ahead)
        __builtin_prefetch((const char *)p + ahead);
}

/* Asks for every line of the bytes at p, ahead bytes on. */
static inline void attend_prefetch_span_ahead(const void *p, size_t bytes, size_t ahead)
{
    if (!ahead)
        return;
    for (size_t offset = 0; offset < bytes; offset += 64)
        __builtin_prefetch((const char *)p + ahead + offset);
}

#endif
