/* What one generation cost, as a whole: the decode totals, the prefill's
 * own split and the cache picture at the end. The CSV's "# summary" trailer
 * is formatted from it (and, later, the session's BMOE_DONE). */
#ifndef BMOE_TM_SUMMARY_H
#define BMOE_TM_SUMMARY_H

#include <stdint.h>

#include "bmoe.h"
#include "tm_totals.h"

typedef struct tm_summary {
    int32_t turn;              /* 0 for a one-shot run */
    int32_t n_prompt;          /* tokens prefilled this turn */
    double load_s;
    bmoe_stats prefill;
    tm_totals decode;
    double tail_ms;            /* after the last decode (no row carries it) */
    double cache_hit_pct;      /* cumulative over the decode; -1 without a cache */
    double cache_resident_mib, cache_budget_mib;
    double token_demand_mib;   /* one decode token's routed expert bytes; -1 unknown */
    double layer_demand_mib;   /* the widest layer's; -1 unknown */
    uint64_t experts_routed;   /* routed (layer, expert) slots in the decode */
} tm_summary;

#endif
