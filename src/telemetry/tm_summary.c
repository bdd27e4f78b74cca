/* Filling the run summary of tm_summary.h. */
#include "tm_summary.h"

#include <string.h>

#include "tm_token.h"

#define TM_MIB 1048576.0

void tm_summary_fill(tm_summary *summary, const tm_config *config, const tm_layout *layout,
                     const bmoe_stream_state *state, const bmoe_stats *prefill, const tm_totals *decode,
                     const tm_lookups *before)
{
    memset(summary, 0, sizeof *summary);
    if (prefill)
        summary->prefill = *prefill;
    if (decode)
        summary->decode = *decode;
    const tm_totals *d = &summary->decode;
    bool cache_used = state->streaming && state->cache_budget_bytes > 0;
    summary->cache_hit_pct = tm_hit_pct(before->hits + d->hits, before->misses + d->misses, cache_used);
    summary->cache_resident_mib = (double)state->cache_resident_bytes / TM_MIB;
    summary->cache_budget_mib = (double)state->cache_budget_bytes / TM_MIB;
    uint64_t token_demand = tm_layout_token_demand(layout, config->n_expert_used);
    if (token_demand == 0 && state->streaming)
        token_demand = state->cycle_bytes; /* k experts of every MoE layer, priced by the store */
    summary->token_demand_mib = token_demand > 0 ? (double)token_demand / TM_MIB : -1.0;
    uint64_t layer_demand = tm_layout_layer_demand(layout, config->n_expert_used);
    summary->layer_demand_mib = layer_demand > 0 ? (double)layer_demand / TM_MIB : -1.0;
    summary->experts_routed = d->experts_routed;
    summary->drafting = config->spec != NULL;
}

void tm_summary_take_generation(tm_summary *summary, const bmoe_generation *generation)
{
    summary->n_prompt = bmoe_generation_n_prompt(generation) - bmoe_generation_n_reused(generation);
    summary->ttft_s = bmoe_generation_ttft_ms(generation) * 1e-3;
    bmoe_generation_spec_stats(generation, &summary->spec);
}
