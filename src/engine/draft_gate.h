/* Whether drafting pays, decided from what the generation measures as it
 * runs: the wall seconds per generated token of the steps that drafted (the
 * drafting, the verify batch and any rollback) against those of plain
 * steps. A verify batch is exact whatever it costs, so this decides speed
 * only; acceptance alone cannot, because what a wider batch costs depends
 * on the machine, the model and, when experts stream, on how many of the
 * drafts' experts the cache lacks (a verify batch of 4 cost 2.8 plain steps
 * on one host's random-routing model, 1.2 on the trained one).
 *
 * While drafting measures slower the gate pauses it and lets a step draft
 * again now and then (a probe), at intervals that double while probes keep
 * confirming the pause, so a text that starts repeating, or a cache that
 * warmed, is noticed and a lasting loss costs a few probes per hundred
 * steps. While drafting pays, a plain step every so often keeps the
 * comparison current (the MTP head always proposes, so plain steps would
 * otherwise stop). A pure state machine over the times it is given, so the
 * rules are tested on made-up timings. */
#ifndef BMOE_ENGINE_DRAFT_GATE_H
#define BMOE_ENGINE_DRAFT_GATE_H

#include <stdbool.h>
#include <stdint.h>

/* Declined steps between two probes: the first interval and the longest
 * (a probe at 0 % acceptance with 3 drafts costs about 7 plain steps on a
 * random-routing 30B model: under 3 % of 256). */
#define DRAFT_GATE_FIRST_PROBE 16
#define DRAFT_GATE_LONGEST_PROBE 256
/* Drafted steps a probe measures before its verdict, and between two
 * verdicts while drafting: a step's acceptance is nearly all or nothing,
 * so one step says little. */
#define DRAFT_GATE_PROBE_STEPS 3
#define DRAFT_GATE_JUDGE_STEPS 6
/* While drafting pays, one plain step after this many drafted ones. */
#define DRAFT_GATE_REFRESH 32

enum draft_gate_state { DRAFT_GATE_DRAFTING, DRAFT_GATE_PAUSED, DRAFT_GATE_PROBING };

typedef struct draft_gate {
    /* decayed sums of seconds and generated tokens, of plain steps and of
     * drafted ones; a kind with no tokens has not been measured yet */
    double plain_seconds, plain_tokens;
    double drafted_seconds, drafted_tokens;
    enum draft_gate_state state;
    int32_t declined;       /* paused: steps declined since the pause began */
    int32_t probe_interval; /* paused: declined steps before the next probe */
    int32_t since_verdict;  /* drafting or probing: drafted steps since the last verdict or the probe's start */
    int32_t since_plain;    /* drafted steps since the last plain one */
} draft_gate;

void draft_gate_init(draft_gate *gate);
/* Whether the coming step may draft. false: it decodes plainly (paused, or
 * a plain step is due to measure plain decoding); *paused then says whether
 * because drafting measured slower. */
bool draft_gate_allows(draft_gate *gate, bool *paused);
/* What a step cost: drafted (a verify batch ran) or plain, its seconds and
 * the tokens it generated (a verify batch's accepted drafts plus one). */
void draft_gate_record(draft_gate *gate, bool drafted, double seconds, int32_t tokens);

#endif
