/* The end-of-run lines of tm_report.h. */
#include "tm_report.h"

#include <inttypes.h>

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
                             "mode: resident baseline, dense %s: without --moe-stream the experts are used from the "
                             "file mapping and no moe-* line follows, so this is not a measurement of expert "
                             "streaming\n",
                             dense);
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
    tm_buffer_printf(out, ", dense %s%s\n", dense, c->overlap ? ", overlap" : "");
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
    tm_report_mode_line(out, c);
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
    if (c->prefetch > 0 || c->predict_prefetch)
        tm_buffer_printf(out, "moe-prefetch: %.2f MiB speculative, %" PRIu64 "/%" PRIu64 " experts useful (%.1f%%)%s\n",
                         (double)d->prefetch_bytes / TM_MIB, d->prefetch_useful, d->prefetched,
                         d->prefetched > 0 ? 100.0 * (double)d->prefetch_useful / (double)d->prefetched : 0.0,
                         c->predict_prefetch ? " [stale-gate]" : "");
}
