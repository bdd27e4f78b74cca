/* The sums of tm_totals.h. */
#include "tm_totals.h"

void tm_totals_add(tm_totals *totals, const tm_token *token, const bmoe_stats *stats)
{
    totals->tokens++;
    if (token->decoded)
        totals->decoded++;
    if (stats->n_tokens > 0)
        totals->decodes++;
    totals->draft_ms += token->draft_ms;
    totals->wall_ms += token->wall_ms;
    totals->io_ms += token->io_ms;
    totals->compute_ms += token->compute_ms;
    totals->stall_ms += token->stall_ms;
    totals->mgmt_ms += token->mgmt_ms;
    totals->cpu_ms += token->cpu_ms;
    totals->loop_overhead_ms += token->loop_overhead_ms;
    totals->majflt += token->majflt;
    totals->read_bytes += token->read_bytes;
    totals->hits += stats->cache_hits;
    totals->misses += stats->cache_misses;
    totals->evictions += stats->evictions;
    totals->rereads += stats->rereads;
    totals->prefetch_bytes += stats->prefetch_bytes;
    totals->prefetched += stats->prefetched;
    totals->prefetch_useful += stats->prefetch_useful;
    totals->prefetch_trusted += stats->prefetch_trusted;
    totals->guesses_judged += stats->guesses_judged;
    totals->guesses_right += stats->guesses_right;
    totals->predict_paused += stats->predict_paused;
    totals->experts_routed += stats->experts_routed;
    totals->experts_dropped += stats->experts_dropped;
    totals->experts_reranked += stats->experts_reranked;
    totals->experts_substituted += stats->experts_substituted;
    totals->ra_committed += stats->ra_committed;
    totals->ra_passthrough += stats->ra_passthrough;
    totals->ra_slots += stats->ra_slots;
    totals->ra_agree_slots += stats->ra_agree_slots;
    totals->ra_disarmed += stats->ra_disarmed;
    totals->ra_gemv_ms += stats->ra_gemv_ms;
    totals->ra_issue_ms += stats->ra_issue_ms;
    totals->ra_wd_ms += stats->ra_wd_ms;
}

void tm_lookups_add(tm_lookups *lookups, const bmoe_stats *stats)
{
    lookups->hits += stats->cache_hits;
    lookups->misses += stats->cache_misses;
}

double tm_totals_per_token(const tm_totals *totals, double value)
{
    return totals->decoded > 0 ? value / (double)totals->decoded : 0.0;
}
