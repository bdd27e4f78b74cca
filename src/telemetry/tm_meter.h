/* The per-token meter: turns each generated token's stats record (the
 * decode the engine measured) into the contract's per-token record, and
 * keeps the generation's totals and cumulative hit rate.
 *
 * The dense-residency probe is sampled here, throttled (the first token and
 * then every probe_every tokens; the rows between carry the latest sample).
 * The probe runs between decodes, so its time is charged as the contract
 * says, to mgmt_ms, and to wall_ms of the same row so that the residual
 * keeps its meaning (wall = io|stall + compute + mgmt); the engine measures
 * the same interval again in the next decode's loop_overhead_ms, so it is
 * taken out of that one: every millisecond is counted once. */
#ifndef BMOE_TM_METER_H
#define BMOE_TM_METER_H

#include <stdbool.h>
#include <stdint.h>

#include "bmoe.h"
#include "tm_token.h"
#include "tm_totals.h"

/* The dense residency now: a fraction, or -1 when it cannot be measured. */
typedef double (*tm_probe_fn)(void *user);

typedef struct tm_meter_params {
    bool overlap;          /* the residual subtracts stall_ms instead of io_ms */
    bool cache_used;       /* a cache budget > 0 (else cache_hit_pct is -1) */
    tm_lookups before;     /* lookups before this generation (earlier turns') */
    int32_t steps;         /* the target token count */
    int32_t probe_every;   /* tokens between dense probes (>= 1) */
    tm_probe_fn probe;     /* NULL: dense_resident_frac is -1 */
    void *probe_user;
} tm_meter_params;

typedef struct tm_meter tm_meter;

tm_meter *tm_meter_create(const tm_meter_params *params);
void tm_meter_destroy(tm_meter *meter);
/* One generated token (its 1-based index and its step's stats record). */
void tm_meter_token(tm_meter *meter, int32_t index, const bmoe_stats *stats, tm_token *token);
/* The same under speculative decoding: batch is the token's mtp_batch
 * (tm_token.h; a token of batch 0 was decoded in its group's verify batch
 * and counts as decoded at no cost of its own), draft_ms the drafting
 * charged to it (tm_draft.h). */
void tm_meter_token_drafted(tm_meter *meter, int32_t index, const bmoe_stats *stats, int32_t batch, double draft_ms,
                            tm_token *token);
const tm_totals *tm_meter_totals(const tm_meter *meter);
/* Counts an evaluation before the first token (the prompt's prefill) in the
 * hit rate. */
void tm_meter_add_lookups(tm_meter *meter, const bmoe_stats *stats);
/* The lookups before the first token: params.before and what was added. */
const tm_lookups *tm_meter_lookups_before(const tm_meter *meter);

#endif
