/* What a turn cost, for the CSV trailer and BMOE_DONE (session_internal.h):
 * the decode totals from the meter, the prefill's own split and the
 * drafting counters from the generation, the cache picture now; the keys
 * of features bmoe does not have (the prefill device) at their off values. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "session_internal.h"
#include "tm_json.h"
#include "tm_token.h"

#define SESSION_MIB 1048576.0

void session_summary(const session *s, const bmoe_generation *generation, const tm_totals *totals,
                     const tm_lookups *before, double tail_ms, tm_summary *summary)
{
    bmoe_stream_state state;
    bmoe_model_get_stream_state(s->model, &state);
    tm_summary_fill(summary, &s->telemetry, &s->layout, &state,
                    generation ? bmoe_generation_prefill_stats(generation) : NULL, totals, before);
    summary->turn = s->turn;
    summary->load_s = s->load_s;
    if (generation)
        tm_summary_take_generation(summary, generation);
    summary->tail_ms = tail_ms;
}

static void key_number(tm_buffer *out, const char *key, double value, int decimals, double fallback)
{
    tm_buffer_printf(out, ",\"%s\":", key);
    tm_json_number(out, value, decimals, fallback);
}

void session_format_done(tm_buffer *out, int64_t id, bool cancelled, const tm_summary *s, int32_t tokens,
                         int32_t n_past, const char *reasoning, size_t reasoning_length, const char *text,
                         size_t text_length)
{
    const tm_totals *d = &s->decode;
    double wall_s = d->wall_ms * 1e-3, prefill_s = s->prefill.wall_ms * 1e-3;
    tm_buffer_printf(out, "BMOE_DONE {\"id\":%" PRId64 ",\"cancelled\":%s,\"tokens\":%" PRId32, id,
                     cancelled ? "true" : "false", tokens);
    key_number(out, "tok_s", wall_s > 0 ? d->decoded / wall_s : 0.0, 3, 0.0);
    key_number(out, "prefill_s", prefill_s, 4, 0.0);
    key_number(out, "prefill_tps", prefill_s > 0 ? s->prefill.n_tokens / prefill_s : 0.0, 2, 0.0);
    key_number(out, "load_s", s->load_s, 3, 0.0);
    key_number(out, "ttft_s", s->ttft_s, 4, 0.0);
    key_number(out, "cache_hit_pct", s->cache_hit_pct, 2, -1.0);
    tm_buffer_printf(out, ",\"n_prompt\":%" PRId32 ",\"n_past\":%" PRId32, s->n_prompt, n_past);
    key_number(out, "compute_s_tok", tm_totals_per_token(d, d->compute_ms * 1e-3), 4, 0.0);
    key_number(out, "io_s_tok", tm_totals_per_token(d, d->io_ms * 1e-3), 4, 0.0);
    key_number(out, "cache_resident_mib", s->cache_resident_mib, 1, 0.0);
    key_number(out, "cache_budget_mib", s->cache_budget_mib, 1, 0.0);
    key_number(out, "read_mib", (double)d->read_bytes / SESSION_MIB, 3, 0.0);
    key_number(out, "stall_s_tok", tm_totals_per_token(d, d->stall_ms * 1e-3), 4, 0.0);
    key_number(out, "mgmt_s_tok", tm_totals_per_token(d, d->mgmt_ms * 1e-3), 4, 0.0);
    key_number(out, "majflt_tok", tm_totals_per_token(d, (double)d->majflt), 2, 0.0);
    key_number(out, "cpu_s_tok", tm_totals_per_token(d, d->cpu_ms * 1e-3), 4, 0.0);
    key_number(out, "prefill_cpu_s", s->prefill.cpu_ms * 1e-3, 4, 0.0);
    key_number(out, "prefill_read_mib", (double)s->prefill.read_bytes / SESSION_MIB, 3, 0.0);
    key_number(out, "prefill_io_s", s->prefill.io_ms * 1e-3, 4, 0.0);
    key_number(out, "prefill_stall_s", s->prefill.stall_ms * 1e-3, 4, 0.0);
    key_number(out, "prefill_mgmt_s", s->prefill.mgmt_ms * 1e-3, 4, 0.0);
    /* no prefill device */
    tm_buffer_append_string(out, ",\"prefill_dev_tokens\":0,\"prefill_dev_nodes\":0,\"prefill_dev_read_mib\":0.000"
                                 ",\"prefill_dev_stall_s\":0.0000");
    key_number(out, "token_demand_mib", s->token_demand_mib, 3, -1.0);
    /* the drafting counters, all 0 without it (whichever source drafted) */
    tm_buffer_printf(out, ",\"mtp_drafted\":%" PRId64 ",\"mtp_accepted\":%" PRId64 ",\"mtp_decodes\":%" PRId32,
                     s->drafting ? s->spec.drafted : 0, s->drafting ? s->spec.accepted : 0,
                     s->drafting ? d->decodes : 0);
    key_number(out, "mtp_draft_s_tok", s->drafting ? tm_totals_per_token(d, d->draft_ms * 1e-3) : 0.0, 6, 0.0);
    tm_buffer_printf(out, ",\"drafted_steps\":%" PRId64, s->drafting ? s->spec.verify_batches : 0);
    tm_buffer_printf(out,
                     ",\"experts_routed\":%" PRIu64 ",\"experts_dropped\":%" PRIu64 ",\"experts_reranked\":%" PRIu64
                     ",\"experts_substituted\":%" PRIu64 ",\"ra_committed\":%" PRIu64 ",\"ra_passthrough\":%" PRIu64,
                     d->experts_routed, d->experts_dropped, d->experts_reranked, d->experts_substituted,
                     d->ra_committed, d->ra_passthrough);
    key_number(out, "loop_overhead_s_tok", tm_totals_per_token(d, (d->loop_overhead_ms + s->tail_ms) * 1e-3), 4,
               0.0);
    tm_buffer_append_string(out, ",\"reasoning\":");
    tm_json_string(out, reasoning ? reasoning : "", reasoning ? reasoning_length : 0);
    tm_buffer_append_string(out, ",\"text\":");
    tm_json_string(out, text ? text : "", text ? text_length : 0);
    tm_buffer_append_string(out, "}\n");
}
