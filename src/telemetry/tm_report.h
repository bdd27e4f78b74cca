/* The end-of-run lines of the telemetry contract, one per line:
 *   generation: <n> tokens, <s> s/token (<t> tok/s)
 *   compute: <pct>% CPU occupancy (<c> cpu-s/token over <n> threads), <f> major faults/token
 *   prefill: <n> tokens, <s> s (<t> tok/s), load <s> s
 *   mode: ...                   (every run; names a resident baseline as one)
 *   <source>: <a>/<d> drafts accepted (<pct>%), <t> tokens per verify decode (<n> decodes for <m> tokens)
 *   <source>: drafting costs <s> s/token on top of decode -> <t> tok/s effective (vs <t> reported)
 *   <source>: drafted on <d> of <n> steps (<pct>%); the rest decoded plainly
 *                               (speculative decoding; <source> is ngram, mtp or replay; no third
 *                               line for mtp without --mtp-p-min, which drafts at every step)
 *   moe-stream: read ...        (streaming only; ", stall_s/tok=<s>" under overlap)
 *   moe-cache: <pct>% hit, resident <mib> MiB[, budget <n> MiB]   (a cache in use; budget when auto)
 *   moe-cache: <n> evictions, <m> re-reads (<x>/token)
 *   moe-prefetch: <mib> MiB speculative, <useful>/<prefetched> experts useful (<pct>%)   (--prefetch;
 *                 with --predict-prefetch tagged [stale-gate])
 * compute: is left out when CPU time was not measured (0). Per-token means
 * are over the decoded tokens; decode s/token = compute + cache mgmt +
 * flash I/O in serial mode (with stall in place of I/O under overlap). */
#ifndef BMOE_TM_REPORT_H
#define BMOE_TM_REPORT_H

#include "tm_buffer.h"
#include "tm_config.h"
#include "tm_summary.h"

void tm_report_format(tm_buffer *out, const tm_config *config, const tm_summary *summary);

/* The prediction probe's lines (--predict-log): the two moe-predict: lines
 * and the per-layer table, from scores[0..n_layer) (a layer without experts:
 * all zero, not printed). */
void tm_report_predict(tm_buffer *out, const bmoe_predict_score *scores, int32_t n_layer);
/* The load-time line the app reads the read mode from, on streamed runs
 * only (nothing otherwise): "bmoe: expert streaming ON  n_expert=<n>
 * o_direct=<0|1>" and more key=value pairs. */
void tm_report_streaming_line(tm_buffer *out, const tm_config *config);
/* The mode: line alone (with its newline). */
void tm_report_mode_line(tm_buffer *out, const tm_config *config);

#endif
