/* The CSV sink of tm_csv.h. Keys and columns are the contract's; those of
 * features this engine does not have carry the contract's off values (0,
 * or -1 where 0 would be a measurement); the trailer's speculation keys
 * appear only when drafting was on, as the contract has it. */
#include "tm_csv.h"

#include <inttypes.h>
#include <math.h>

#define TM_MIB 1048576.0

const char tm_csv_header[] =
    "step,steps,wall_ms,io_ms,compute_ms,read_bytes,cache_hit_pct,stall_ms,mgmt_ms,majflt,cpu_ms,"
    "dense_resident_frac,turn,majflt_mib,cache_budget_mib,rss_mib,rss_anon_mib,rss_file_mib,swap_mib,"
    "mem_available_mib,mem_free_mib,swap_free_mib,loop_overhead_ms,mtp_batch,mtp_draft_ms,drain_ms,"
    "adopt_ms,ra_issue_ms,ra_wd_ms";

/* A finite value ("%.*f"), or fallback. */
static double tm_finite(double value, double fallback)
{
    return isfinite(value) ? value : fallback;
}

void tm_csv_format_preamble(tm_buffer *out, const tm_config *c)
{
    tm_buffer_append_string(out, "# bmoe_metrics v2\n# engine=");
    tm_config_value(out, c->engine && c->engine[0] ? c->engine : "unknown");
    tm_buffer_append_string(out, "\n# ");
    tm_config_model_keys(out, c, true);
    tm_buffer_printf(out, " threads=%d n_ctx=%d n_ubatch=%d chatml=%d\n", (int)c->threads, (int)c->n_ctx,
                     (int)c->n_ubatch, c->chatml);
    tm_buffer_printf(out,
                     "# moe_stream=%d cache_mb=%" PRId64 " cache_auto=%d cache_floor_mb=%" PRId64
                     " cache_ceil_mb=%" PRId64 " cache_cycle_mb=%.0f force_cache=0 load_all=%d io_threads=%d"
                     " o_direct=%d overlap=%d io_two_wave=0 prefetch=%d route_ahead=%d predict_prefetch=%d"
                     " predict_log=0 predict_spec_max=%d prefetch_sync=0 dense_weights=%s drop_cold_frac=%g"
                     " drop_renorm=%d drop_prefill=%d substitute_lambda=%g cache_policy=%s preload_experts=%d\n",
                     c->moe_stream, c->cache_mb, c->cache_auto, c->cache_floor_mb, c->cache_ceil_mb,
                     ceil(tm_finite(c->cache_cycle_mb, 0.0)), c->load_all, (int)c->io_threads, c->o_direct,
                     c->overlap, (int)c->prefetch, (int)c->lossy.route_ahead, c->predict_prefetch,
                     (int)c->predict_spec_max, tm_config_dense_name(c), (double)c->lossy.drop_cold_frac,
                     c->lossy.drop_cold_frac > 0.0f && !c->lossy.drop_no_renorm,
                     c->lossy.drop_cold_frac > 0.0f && c->lossy.drop_in_prefill, (double)c->lossy.substitute_lambda,
                     c->cache_frequency ? "freq" : "lru", c->preload_experts);
    tm_buffer_printf(out,
                     "# temp=%g top_k=%d top_p=%g seed=%" PRIu64 " compute_trace_layers=%d spec=%s"
                     " spec_draft_max=%d mtp_p_min=%g ngram_min_match=%d\n",
                     (double)c->temp, (int)c->top_k, (double)c->top_p, c->seed, c->compute_trace_layers,
                     c->spec ? c->spec : "off", c->spec ? (int)c->spec_draft_max : 0,
                     c->spec ? (double)c->mtp_p_min : 0.0, c->spec ? (int)c->ngram_min_match : 0);
    tm_buffer_append_string(out, "# ");
    tm_config_instrument_keys(out, c);
    tm_buffer_append_string(out, "\n");
}

/* The hit rate, or the contract's no-cache sentinel as its readers compare
 * it, the text "-1.0". */
static void tm_csv_hit_pct(tm_buffer *out, double value)
{
    if (isfinite(value) && value >= 0.0)
        tm_buffer_printf(out, "%.2f", value);
    else
        tm_buffer_append_string(out, "-1.0");
}

void tm_csv_format_row(tm_buffer *out, int32_t turn, const tm_token *t, const tm_memory *m,
                       double cache_budget_mib, int64_t page_bytes)
{
    tm_buffer_printf(out, "%" PRId32 ",%" PRId32 ",%.3f,%.3f,%.3f,%" PRIu64 ",", t->step, t->steps,
                     tm_finite(t->wall_ms, 0), tm_finite(t->io_ms, 0), tm_finite(t->compute_ms, 0), t->read_bytes);
    tm_csv_hit_pct(out, t->cache_hit_pct);
    tm_buffer_printf(out, ",%.3f,%.3f,%" PRId64 ",%.3f,%.3f,", tm_finite(t->stall_ms, 0), tm_finite(t->mgmt_ms, 0),
                     t->majflt, tm_finite(t->cpu_ms, 0), tm_finite(t->dense_resident_frac, -1));
    tm_buffer_printf(out, "%" PRId32 ",%.3f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.3f,%" PRId32 ",%.3f,0,0,%.3f,%.3f\n",
                     turn, (double)t->majflt * (double)page_bytes / TM_MIB, tm_finite(cache_budget_mib, 0),
                     m->rss_mib, m->rss_anon_mib, m->rss_file_mib, m->swap_mib, m->mem_available_mib,
                     m->mem_free_mib, m->swap_free_mib, tm_finite(t->loop_overhead_ms, 0), t->batch,
                     tm_finite(t->draft_ms, 0), tm_finite(t->ra_issue_ms, 0), tm_finite(t->ra_wd_ms, 0));
}

void tm_csv_format_summary(tm_buffer *out, const tm_summary *s)
{
    const tm_totals *d = &s->decode;
    double wall_s = d->wall_ms * 1e-3;
    double prefill_s = s->prefill.wall_ms * 1e-3;
    tm_buffer_printf(out, "# summary tokens=%" PRId32 " s/tok=%.4f tok/s=%.3f read_MiB=%.3f io_s=%.4f", d->tokens,
                     tm_totals_per_token(d, wall_s), wall_s > 0 ? d->decoded / wall_s : 0.0,
                     (double)d->read_bytes / TM_MIB, d->io_ms * 1e-3);
    tm_buffer_printf(out, " compute_s/tok=%.4f io_s/tok=%.4f cache_hit_pct=",
                     tm_totals_per_token(d, d->compute_ms * 1e-3), tm_totals_per_token(d, d->io_ms * 1e-3));
    tm_csv_hit_pct(out, s->cache_hit_pct);
    tm_buffer_printf(out, " n_prompt=%" PRId32 " load_s=%.3f prefill_s=%.4f prefill_tps=%.2f ttft_s=%.4f", s->n_prompt,
                     s->load_s, prefill_s, prefill_s > 0 ? s->prefill.n_tokens / prefill_s : 0.0, s->ttft_s);
    tm_buffer_printf(out, " stall_s/tok=%.4f mgmt_s/tok=%.4f cache_resident_MiB=%.1f cache_budget_MiB=%.1f"
                     " majflt/tok=%.2f cpu_s/tok=%.4f",
                     tm_totals_per_token(d, d->stall_ms * 1e-3), tm_totals_per_token(d, d->mgmt_ms * 1e-3),
                     s->cache_resident_mib, s->cache_budget_mib, tm_totals_per_token(d, (double)d->majflt),
                     tm_totals_per_token(d, d->cpu_ms * 1e-3));
    tm_buffer_printf(out, " token_demand_MiB=%.3f layer_demand_MiB=%.3f experts_routed=%" PRIu64
                     " experts_dropped=%" PRIu64 " experts_reranked=%" PRIu64 " experts_substituted=%" PRIu64,
                     tm_finite(s->token_demand_mib, -1), tm_finite(s->layer_demand_mib, -1), s->experts_routed,
                     d->experts_dropped, d->experts_reranked, d->experts_substituted);
    tm_buffer_append_string(out, " row_table_MiB=0 row_resident_MiB=0 row_rows=0 row_reads=0 row_read_MiB=0"
                                 " row_evictions=0 row_io_errors=0");
    tm_buffer_printf(out, " loop_overhead_s/tok=%.4f drain_s/tok=0 adopt_s/tok=0",
                     tm_totals_per_token(d, (d->loop_overhead_ms + s->tail_ms) * 1e-3));
    tm_buffer_printf(out, " ra_committed=%" PRIu64 " ra_passthrough=%" PRIu64 " ra_agree_pct=", d->ra_committed,
                     d->ra_passthrough);
    if (d->ra_slots > 0)
        tm_buffer_printf(out, "%.2f", 100.0 * (double)d->ra_agree_slots / (double)d->ra_slots);
    else
        tm_buffer_append_string(out, "-1"); /* nothing committed: no agreement to measure */
    tm_buffer_printf(out, " ra_gemv_ms/tok=%.4g ra_issue_ms/tok=%.4g ra_wd_ms/tok=%.4g",
                     tm_totals_per_token(d, d->ra_gemv_ms), tm_totals_per_token(d, d->ra_issue_ms),
                     tm_totals_per_token(d, d->ra_wd_ms));
    /* the readers' names for the speculative reads, then bmoe's earlier ones */
    tm_buffer_printf(out, " evictions=%" PRIu64 " rereads=%" PRIu64 " spec_read_MiB=%.3f spec_experts=%" PRIu64
                     " spec_useful=%" PRIu64 " prefetch_MiB=%.3f prefetched=%" PRIu64 " prefetch_useful=%" PRIu64,
                     d->evictions, d->rereads, (double)d->prefetch_bytes / TM_MIB, d->prefetched, d->prefetch_useful,
                     (double)d->prefetch_bytes / TM_MIB, d->prefetched, d->prefetch_useful);
    tm_buffer_printf(out, " prefill_cpu_s=%.4f prefill_read_mib=%.3f prefill_io_s=%.4f prefill_stall_s=%.4f"
                     " prefill_mgmt_s=%.4f",
                     s->prefill.cpu_ms * 1e-3, (double)s->prefill.read_bytes / TM_MIB, s->prefill.io_ms * 1e-3,
                     s->prefill.stall_ms * 1e-3, s->prefill.mgmt_ms * 1e-3);
    tm_buffer_append_string(out, " prefill_dev_tokens=0 prefill_dev_nodes=0 prefill_dev_read_mib=0"
                                 " prefill_dev_stall_s=0");
    if (s->drafting)
        tm_buffer_printf(out, " mtp_drafted=%" PRId64 " mtp_accepted=%" PRId64 " mtp_decodes=%" PRId32
                         " mtp_draft_s/tok=%.6f drafted_steps=%" PRId64,
                         s->spec.drafted, s->spec.accepted, d->decodes, tm_totals_per_token(d, d->draft_ms * 1e-3),
                         s->spec.verify_batches);
    tm_buffer_printf(out, " turn=%" PRId32 "\n", s->turn);
}

int tm_csv_open(tm_csv *csv, const char *path, bmoe_error *error)
{
    tm_buffer_init(&csv->buffer);
    csv->preamble_written = false;
    return tm_sink_open(&csv->sink, path, error);
}

int tm_csv_begin(tm_csv *csv, const tm_config *config)
{
    if (csv->preamble_written)
        return 0;
    csv->preamble_written = true;
    tm_csv_format_preamble(&csv->buffer, config);
    tm_buffer_append_string(&csv->buffer, tm_csv_header);
    tm_buffer_append_string(&csv->buffer, "\n");
    return tm_sink_write(&csv->sink, &csv->buffer);
}

int tm_csv_row(tm_csv *csv, int32_t turn, const tm_token *token, const tm_memory *memory, double cache_budget_mib,
               int64_t page_bytes)
{
    tm_csv_format_row(&csv->buffer, turn, token, memory, cache_budget_mib, page_bytes);
    return tm_sink_write(&csv->sink, &csv->buffer);
}

int tm_csv_summary(tm_csv *csv, const tm_summary *summary)
{
    tm_csv_format_summary(&csv->buffer, summary);
    return tm_sink_write(&csv->sink, &csv->buffer);
}

int tm_csv_commit(tm_csv *csv, bmoe_error *error)
{
    int status = tm_sink_commit(&csv->sink, error);
    tm_buffer_free(&csv->buffer);
    return status;
}

void tm_csv_discard(tm_csv *csv)
{
    tm_sink_discard(&csv->sink);
    tm_buffer_free(&csv->buffer);
}
