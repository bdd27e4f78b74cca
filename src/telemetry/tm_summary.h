/* What one generation cost, as a whole: the decode totals, the prefill's
 * own split and the cache picture at the end. The CSV's "# summary"
 * trailer, the end-of-run lines and the session's BMOE_DONE are formatted
 * from it. */
#ifndef BMOE_TM_SUMMARY_H
#define BMOE_TM_SUMMARY_H

#include <stdint.h>

#include "bmoe.h"
#include "tm_config.h"
#include "tm_layout.h"
#include "tm_totals.h"

typedef struct tm_summary {
    int32_t turn;              /* 0 for a one-shot run */
    int32_t n_prompt;          /* tokens prefilled this turn */
    double load_s;
    double ttft_s;             /* the prompt handed in to the first token handed back; 0: no token */
    bmoe_stats prefill;
    tm_totals decode;
    double tail_ms;            /* after the last decode (no row carries it) */
    double cache_hit_pct;      /* cumulative since the run (session) began, prompts included; -1 without a cache */
    double cache_resident_mib, cache_budget_mib;
    double token_demand_mib;   /* one decode token's routed expert bytes; -1 unknown */
    double layer_demand_mib;   /* the widest layer's; -1 unknown */
    uint64_t experts_routed;   /* routed (layer, expert) slots in the decode */
    bool drafting;             /* speculative decoding was on (the config names a source) */
    bmoe_spec_stats spec;      /* its counters (the generation's; zeros without drafting) */
} tm_summary;

/* Fills everything but turn, n_prompt, ttft_s, load_s, tail_ms and spec (zeroed): the
 * prefill's stats (NULL: none completed), the decode's totals (NULL: none),
 * the hit rate over before (the lookups before the decode: earlier turns'
 * and this prompt's) and the decode's, the cache and demand figures from the
 * store's state and the layout (priced by the store when the layout is not
 * known). */
void tm_summary_fill(tm_summary *summary, const tm_config *config, const tm_layout *layout,
                     const bmoe_stream_state *state, const bmoe_stats *prefill, const tm_totals *decode,
                     const tm_lookups *before);

/* n_prompt (the tokens prefilled: the prompt less its reused prefix),
 * ttft_s and spec, from the generation. */
void tm_summary_take_generation(tm_summary *summary, const bmoe_generation *generation);

#endif
