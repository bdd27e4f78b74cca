/* The end-of-run lines of tm_report.h. */
#include "tm_report.h"

#include <inttypes.h>
#include <string.h>

#define TM_MIB 1048576.0

void tm_report_streaming_line(tm_buffer *out, const tm_config *c)
{
    if (!c->moe_stream)
        return;
    tm_buffer_printf(out,
                     "bmoe: expert streaming ON  n_expert=%d o_direct=%d n_expert_used=%d cache_mb=%" PRId64
                     " io_threads=%d overlap=%d\n",
                     (int)c->n_expert, c->o_direct, (int)c->n_expert_used, c->cache_mb, (int)c->io_threads,
                     c->overlap);
}

void tm_report_mode_line(tm_buffer *out, const tm_config *c)
{
    const char *dense = tm_config_dense_name(c);
    if (!c->moe_stream) {
        if (c->n_moe_layers > 0)
            tm_buffer_printf(out,
                             "mode: resident baseline, dense %s%s%s: without --moe-stream the experts are used from "
                             "the file mapping and no moe-* line follows, so this is not a measurement of expert "
                             "streaming\n",
                             dense, c->regime ? ", regime " : "", c->regime ? c->regime : "");
        else
            tm_buffer_printf(out, "mode: resident, dense %s: %s has no routed experts, not an architecture this "
                                  "build streams\n",
                             dense, c->arch ? c->arch : "the model");
        return;
    }
    tm_buffer_append_string(out, "mode: expert streaming, cache ");
    if (c->cache_auto)
        tm_buffer_append_string(out, "auto");
    else if (c->cache_mb > 0)
        tm_buffer_printf(out, "%" PRId64 " MiB", c->cache_mb);
    else
        tm_buffer_append_string(out, "off");
    tm_buffer_printf(out, ", dense %s%s", dense, c->overlap ? ", overlap" : "");
    if (c->regime)
        tm_buffer_printf(out, ", regime %s", c->regime);
    if (tm_config_lossy(c)) {
        /* the levers that change the output, named so no one takes the run for an exact one */
        tm_buffer_append_string(out, "; LOSSY:");
        if (c->lossy.drop_cold_frac > 0.0f)
            tm_buffer_printf(out, " drop-cold-experts %g%s%s", (double)c->lossy.drop_cold_frac,
                             c->lossy.drop_no_renorm ? " (no renorm)" : "",
                             c->lossy.drop_in_prefill ? " (prefill too)" : "");
        if (c->lossy.substitute_lambda > 0.0f)
            tm_buffer_printf(out, " expert-substitute %g", (double)c->lossy.substitute_lambda);
        if (c->lossy.route_ahead > 0)
            tm_buffer_printf(out, " route-ahead %d", (int)c->lossy.route_ahead);
        if (c->n_expert_used < c->n_expert_used_file)
            tm_buffer_printf(out, " n-expert-used %d of %d", (int)c->n_expert_used, (int)c->n_expert_used_file);
    }
    tm_buffer_append_string(out, "\n");
}

/* A share as "<pct>%", or "-" without data (never 0.0 for nothing scored). */
static void tm_report_share(tm_buffer *out, uint64_t part, uint64_t whole, const char *width)
{
    if (whole > 0)
        tm_buffer_printf(out, width[0] ? "%7.1f%%" : "%.1f%%", 100.0 * (double)part / (double)whole);
    else
        tm_buffer_append_string(out, width[0] ? "       -" : "-");
}

/* Speculative decoding's lines, prefixed with the source that drafted:
 * what was accepted and what it bought, what drafting cost outside the
 * decode, and (for a source that may abstain: n-gram, replay, the head
 * under a probability floor, or any source the gate paused) how often it
 * drafted. */
static void tm_report_drafting(tm_buffer *out, const tm_config *c, const tm_summary *s)
{
    const tm_totals *d = &s->decode;
    const char *source = c->spec;
    tm_buffer_printf(out, "%s: %" PRId64 "/%" PRId64 " drafts accepted (", source, s->spec.accepted, s->spec.drafted);
    tm_report_share(out, (uint64_t)s->spec.accepted, (uint64_t)s->spec.drafted, "");
    tm_buffer_printf(out, "), %.2f tokens per verify decode (%" PRId32 " decodes for %" PRId32 " tokens)\n",
                     d->decodes > 0 ? (double)d->tokens / d->decodes : 0.0, d->decodes, d->tokens);
    double wall_s = d->wall_ms * 1e-3, draft_s = d->draft_ms * 1e-3;
    tm_buffer_printf(out, "%s: drafting costs %.6f s/token on top of decode -> %.2f tok/s effective (vs %.2f "
                          "reported)\n",
                     source, tm_totals_per_token(d, draft_s), wall_s + draft_s > 0 ? d->decoded / (wall_s + draft_s) : 0.0,
                     wall_s > 0 ? d->decoded / wall_s : 0.0);
    if (s->spec.paused_steps > 0)
        tm_buffer_printf(out, "%s: drafting paused on %" PRId64 " steps, where it measured more seconds per token "
                              "than plain decoding (--draft-always drafts anyway)\n",
                         source, s->spec.paused_steps);
    if (strcmp(source, "mtp") == 0 && c->mtp_p_min <= 0.0f && s->spec.paused_steps == 0)
        return; /* the head drafts at every step (no floor to stop it) */
    tm_buffer_printf(out, "%s: drafted on %" PRId64 " of %" PRId32 " steps (", source, s->spec.verify_batches,
                     d->decodes);
    tm_report_share(out, (uint64_t)s->spec.verify_batches, (uint64_t)d->decodes, "");
    tm_buffer_append_string(out, "); the rest decoded plainly\n");
}

void tm_report_format(tm_buffer *out, const tm_config *c, const tm_summary *s)
{
    const tm_totals *d = &s->decode;
    double s_tok = tm_totals_per_token(d, d->wall_ms * 1e-3);
    double wall_s = d->wall_ms * 1e-3;
    tm_buffer_printf(out, "generation: %" PRId32 " tokens, %.4f s/token (%.2f tok/s)\n", d->tokens, s_tok,
                     wall_s > 0 ? d->decoded / wall_s : 0.0);
    if (d->cpu_ms > 0.0 && c->threads > 0) {
        double cpu_tok = tm_totals_per_token(d, d->cpu_ms * 1e-3);
        double occupancy = s_tok > 0 ? 100.0 * cpu_tok / (s_tok * c->threads) : 0.0;
        tm_buffer_printf(out, "compute: %.1f%% CPU occupancy (%.4f cpu-s/token over %d threads), %.2f major "
                              "faults/token\n",
                         occupancy, cpu_tok, (int)c->threads, tm_totals_per_token(d, (double)d->majflt));
    }
    double prefill_s = s->prefill.wall_ms * 1e-3;
    tm_buffer_printf(out, "prefill: %" PRId32 " tokens, %.3f s (%.2f tok/s), load %.3f s\n", s->prefill.n_tokens,
                     prefill_s, prefill_s > 0 ? s->prefill.n_tokens / prefill_s : 0.0, s->load_s);
    if (s->ttft_s > 0)
        tm_buffer_printf(out, "ttft: %.3f s from the prompt to its first generated token (prefill %.3f s, then its "
                              "sampling and decode)\n",
                         s->ttft_s, prefill_s);
    tm_report_mode_line(out, c);
    if (s->drafting && c->spec)
        tm_report_drafting(out, c, s);
    if (!c->moe_stream)
        return;
    double read_mib = (double)d->read_bytes / TM_MIB;
    double io_s = d->io_ms * 1e-3;
    tm_buffer_printf(out,
                     "moe-stream: read %.2f MiB (%.3f MiB/token), decode %.4f s/token (compute %.4f + cache mgmt "
                     "%.4f + flash I/O %.4f s/token, %.1f MiB/s)",
                     read_mib, tm_totals_per_token(d, read_mib), s_tok, tm_totals_per_token(d, d->compute_ms * 1e-3),
                     tm_totals_per_token(d, d->mgmt_ms * 1e-3), tm_totals_per_token(d, io_s),
                     io_s > 0 ? read_mib / io_s : 0.0);
    if (c->overlap)
        tm_buffer_printf(out, ", stall_s/tok=%.4f", tm_totals_per_token(d, d->stall_ms * 1e-3));
    tm_buffer_append_string(out, "\n");
    if (c->cache_mb > 0) {
        tm_buffer_printf(out, "moe-cache: %.1f%% hit, resident %.1f MiB", s->cache_hit_pct < 0 ? 0.0 : s->cache_hit_pct,
                         s->cache_resident_mib);
        if (c->cache_auto)
            tm_buffer_printf(out, ", budget %" PRId64 " MiB", c->cache_mb);
        tm_buffer_printf(out, "\nmoe-cache: %" PRIu64 " evictions, %" PRIu64 " re-reads (%.2f/token)\n",
                         d->evictions, d->rereads, tm_totals_per_token(d, (double)d->rereads));
    }
    bool ahead = c->lossy.route_ahead > 0;
    if (c->prefetch > 0 || c->predict_prefetch || ahead) {
        tm_buffer_printf(out, "moe-prefetch: %.2f MiB speculative, %" PRIu64 "/%" PRIu64 " experts useful (%.1f%%)%s",
                         (double)d->prefetch_bytes / TM_MIB, d->prefetch_useful, d->prefetched,
                         d->prefetched > 0 ? 100.0 * (double)d->prefetch_useful / (double)d->prefetched : 0.0,
                         ahead ? " [route-ahead]" : c->predict_prefetch ? " [stale-gate]" : "");
        /* after the contract's fields of a tagged line: parsers that know only those still match (the
         * contract gives --prefetch K's untagged line no more) */
        bool tagged = ahead || c->predict_prefetch;
        if (tagged && d->guesses_judged > 0)
            tm_buffer_printf(out, ", %" PRIu64 "/%" PRIu64 " guesses right as their layers routed (%.1f%%)",
                             d->guesses_right, d->guesses_judged,
                             100.0 * (double)d->guesses_right / (double)d->guesses_judged);
        if (tagged && d->prefetch_trusted > 0)
            tm_buffer_printf(out, ", %" PRIu64 " read at the disk's full rate (guesses measured right)",
                             d->prefetch_trusted);
        if (d->predict_paused > 0)
            tm_buffer_printf(out, ", paused on %" PRIu64 "/%" PRId32 " decodes (measured slower)", d->predict_paused,
                             d->decodes);
        tm_buffer_printf(out, "\n");
    }
    if (c->lossy.drop_cold_frac > 0.0f)
        tm_buffer_printf(out, "moe-drop: %" PRIu64 "/%" PRIu64 " routed experts dropped (%.1f%%), threshold %g x uniform\n",
                         d->experts_dropped, d->experts_routed,
                         d->experts_routed > 0 ? 100.0 * (double)d->experts_dropped / (double)d->experts_routed : 0.0,
                         (double)c->lossy.drop_cold_frac);
    if (c->lossy.substitute_lambda > 0.0f)
        tm_buffer_printf(out, "moe-substitute: %" PRIu64 "/%" PRIu64 " slots moved to a cached expert (%.1f%%), lambda %g\n",
                         d->experts_substituted, d->experts_reranked,
                         d->experts_reranked > 0 ? 100.0 * (double)d->experts_substituted / (double)d->experts_reranked
                                                 : 0.0,
                         (double)c->lossy.substitute_lambda);
    if (ahead) {
        tm_buffer_printf(out, "moe-route-ahead: %d layers early - %" PRIu64 " routings committed, %" PRIu64
                              " passed through; committed selection agreed with the router on ",
                         (int)c->lossy.route_ahead, d->ra_committed, d->ra_passthrough);
        if (d->ra_slots > 0)
            tm_buffer_printf(out, "%.1f%% of slots", 100.0 * (double)d->ra_agree_slots / (double)d->ra_slots);
        else
            tm_buffer_append_string(out, "- (nothing committed)");
        tm_buffer_printf(out, "; router products %.3f ms/token, issue %.3f ms/token, watchdog %.3f ms/token%s\n",
                         tm_totals_per_token(d, d->ra_gemv_ms), tm_totals_per_token(d, d->ra_issue_ms),
                         tm_totals_per_token(d, d->ra_wd_ms),
                         d->ra_disarmed ? "; DISARMED by the watchdog (agreement under 50 %)" : "");
    }
}

void tm_report_predict(tm_buffer *out, const bmoe_predict_score *scores, int32_t n_layer)
{
    bmoe_predict_score all = {0};
    for (int32_t il = 0; il < n_layer; il++) {
        for (int p = 0; p < BMOE_PREDICTORS; p++) {
            all.rows[p] += scores[il].rows[p];
            all.slots[p] += scores[il].slots[p];
            all.slot_hits[p] += scores[il].slot_hits[p];
            all.exact[p] += scores[il].exact[p];
        }
        all.unranked += scores[il].unranked;
    }
    static const char *const names[BMOE_PREDICTORS] = {"stale-gate", "prev-token", "fresh-gate control"};
    tm_buffer_append_string(out, "moe-predict:");
    for (int p = 0; p < BMOE_PREDICTORS; p++) {
        tm_buffer_printf(out, "%s %s ", p ? " |" : "", names[p]);
        tm_report_share(out, all.slot_hits[p], all.slots[p], "");
        tm_buffer_append_string(out, p ? " (" : " of routed slots (");
        tm_report_share(out, all.exact[p], all.rows[p], "");
        tm_buffer_append_string(out, p ? ")" : " whole routings)");
    }
    tm_buffer_printf(out,
                     "\nmoe-predict: scored - stale-gate %" PRIu64 " routings/%" PRIu64 " slots, prev-token %" PRIu64
                     "/%" PRIu64 ", control %" PRIu64 "/%" PRIu64 "; %" PRIu64
                     " routings the stale-gate could not rank\n",
                     all.rows[0], all.slots[0], all.rows[1], all.slots[1], all.rows[2], all.slots[2], all.unranked);
    tm_buffer_append_string(out, "  layer   stale    prev    ctrl   routings\n");
    for (int32_t il = 0; il < n_layer; il++) {
        const bmoe_predict_score *s = &scores[il];
        uint64_t routings = s->rows[BMOE_PREDICT_CONTROL];
        if (routings == 0 && s->unranked == 0)
            continue;
        tm_buffer_printf(out, "  %5d ", (int)il);
        for (int p = 0; p < BMOE_PREDICTORS; p++)
            tm_report_share(out, s->slot_hits[p], s->slots[p], "w");
        tm_buffer_printf(out, " %10" PRIu64 "\n", routings);
    }
}
