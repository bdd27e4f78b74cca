/* Sums over the generated tokens of one generation: what the end-of-run
 * lines, the CSV trailer and BMOE_DONE average. Per-token means divide by
 * the decoded tokens (a token whose decode never ran costs nothing and is
 * not a sample of the decode; a token a verify batch decoded is one, its
 * cost on the batch's first token). */
#ifndef BMOE_TM_TOTALS_H
#define BMOE_TM_TOTALS_H

#include <stdint.h>

#include "bmoe.h"
#include "tm_token.h"

/* Expert-cache lookups: the contract's hit rate is cumulative over every
 * lookup since the run (the session) began, the prompts' included. */
typedef struct tm_lookups {
    uint64_t hits, misses;
} tm_lookups;

/* Adds an evaluation's lookups (its stats record's cache counters). */
void tm_lookups_add(tm_lookups *lookups, const bmoe_stats *stats);

typedef struct tm_totals {
    int32_t tokens;             /* generated tokens (rows) */
    int32_t decoded;            /* of those, decoded (alone, or in a verify batch) */
    int32_t decodes;            /* evaluations that produced them (a verify batch is one) */
    double draft_ms;            /* speculative decoding's drafting (outside wall_ms) */
    double wall_ms, io_ms, compute_ms, stall_ms, mgmt_ms, cpu_ms, loop_overhead_ms;
    double probe_ms;            /* the dense probes' share of wall_ms and mgmt_ms */
    int32_t probes;
    int64_t majflt;
    uint64_t read_bytes;
    /* the expert store's counters over the decodes */
    uint64_t hits, misses, evictions, rereads;
    uint64_t prefetch_bytes, prefetched, prefetch_useful, prefetch_trusted;
    uint64_t guesses_judged, guesses_right;
    uint64_t predict_paused; /* decode steps whose read-ahead the gate paused */
    /* the routing and the lossy levers over the decodes */
    uint64_t experts_routed, experts_dropped, experts_reranked, experts_substituted;
    uint64_t ra_committed, ra_passthrough, ra_slots, ra_agree_slots, ra_disarmed;
    double ra_gemv_ms, ra_issue_ms, ra_wd_ms;
} tm_totals;

/* Adds one token (its record and the stats record it came from). */
void tm_totals_add(tm_totals *totals, const tm_token *token, const bmoe_stats *stats);

/* value / decoded tokens, 0 when none was decoded. */
double tm_totals_per_token(const tm_totals *totals, double value);

#endif
