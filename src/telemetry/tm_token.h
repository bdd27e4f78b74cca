/* The per-token record of the telemetry contract: what one generated token
 * cost, in the units the BMOE_PROGRESS line and the CSV row carry, and the
 * rules that derive its figures (the compute residual, the hit rate). */
#ifndef BMOE_TM_TOKEN_H
#define BMOE_TM_TOKEN_H

#include <stdbool.h>
#include <stdint.h>

typedef struct tm_token {
    int32_t step;               /* 1-based index of the generated token */
    int32_t steps;              /* the target token count */
    bool decoded;               /* a decode ran for it (the last token of a full context has none) */
    double wall_ms;             /* the decode's wall time (plus the dense probe, see tm_meter.h) */
    double io_ms;               /* serial: wall blocked on reads; overlap: summed lane busy time */
    double compute_ms;          /* the residual, clamped at 0 (tm_compute_residual) */
    double mgmt_ms;             /* cache management (plus the dense probe) */
    double stall_ms;            /* overlap: union of stalled intervals; 0 in serial */
    uint64_t read_bytes;        /* expert bytes read from flash for this token */
    double cache_hit_pct;       /* cumulative over the generation; -1 when no cache is used */
    int64_t majflt;             /* major faults in the decode; 0: unmeasured */
    double cpu_ms;              /* process CPU time in the decode; 0: unmeasured */
    double dense_resident_frac; /* the latest sample; -1: unmeasured */
    double loop_overhead_ms;    /* wall time since the previous decode ended */
    double ra_issue_ms;         /* route-ahead: issuing the early reads (inside compute) */
    double ra_wd_ms;            /* route-ahead: the watchdog's comparison (inside compute) */
    int32_t batch;              /* mtp_batch: tokens the decode of this row confirmed (1: a plain decode, or
                                   none; n: the first of a verify decode's n tokens, which carries its whole
                                   cost; 0: a later token of such a group) */
    double draft_ms;            /* drafting for this row's decode (outside wall_ms, inside loop_overhead_ms) */
} tm_token;

/* compute = wall - io - mgmt (serial) or wall - stall - mgmt (overlap),
 * clamped at 0: a residual, never a measurement. */
double tm_compute_residual(double wall_ms, double io_ms, double stall_ms, double mgmt_ms, bool overlap);

/* 100 hits / (hits + misses), or -1 when no cache is used or nothing was
 * routed yet. */
double tm_hit_pct(uint64_t hits, uint64_t misses, bool cache_used);

#endif
