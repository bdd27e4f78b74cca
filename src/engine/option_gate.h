/* Whether an option that changes only speed pays, decided from what the
 * generation measures as it runs: the wall seconds per generated token of
 * the steps that used it against those of plain steps. Two options use it:
 * drafting (a step that drafts runs the drafting, a verify batch and any
 * rollback; acceptance alone cannot decide, because what a wider batch
 * costs depends on the machine, the model and, when experts stream, on how
 * many of the drafts' experts the cache lacks: a verify batch of 4 cost 2.8
 * plain steps on one host's random-routing model, 1.2 on the trained one)
 * and the predictive read-ahead of streamed decode (a guess that is wrong
 * costs a read the disk could have spent on a miss; what is right depends on
 * the model's routing, the disk and the cache).
 *
 * While the option measures slower the gate pauses it and lets a step use it
 * again now and then (a probe), at intervals that double while probes keep
 * confirming the pause, so a text that starts repeating, or a cache that
 * warmed, is noticed and a lasting loss costs a few probes per hundred
 * steps. While the option pays, a plain step every so often keeps the
 * comparison current (the MTP head always proposes, so plain steps would
 * otherwise stop). A pure state machine over the times it is given, so the
 * rules are tested on made-up timings. */
#ifndef BMOE_ENGINE_OPTION_GATE_H
#define BMOE_ENGINE_OPTION_GATE_H

#include <stdbool.h>
#include <stdint.h>

/* Declined steps between two probes: the first interval and the longest
 * (a probe at 0 % acceptance with 3 drafts costs about 7 plain steps on a
 * random-routing 30B model: under 3 % of 256). */
#define OPTION_GATE_FIRST_PROBE 16
#define OPTION_GATE_LONGEST_PROBE 256
/* Steps with the option a probe measures before its verdict, and between
 * two verdicts while it is on: a drafted step's acceptance is nearly all or
 * nothing, and a streamed step's misses vary, so one step says little. */
#define OPTION_GATE_PROBE_STEPS 3
#define OPTION_GATE_JUDGE_STEPS 6
/* While the option pays, one plain step after this many with it. */
#define OPTION_GATE_REFRESH 32
/* Plain steps measured before the first verdict, one after every two with
 * the option: a single plain step is too noisy a baseline (one streamed
 * step that happened to hit the cache paused a read-ahead that paid). */
#define OPTION_GATE_FIRST_PLAIN 3

enum option_gate_state { OPTION_GATE_ON, OPTION_GATE_PAUSED, OPTION_GATE_PROBING };

typedef struct option_gate {
    /* decayed sums of seconds and generated tokens, of plain steps and of
     * those with the option; a kind with no tokens has not been measured yet */
    double plain_seconds, plain_tokens;
    double used_seconds, used_tokens;
    enum option_gate_state state;
    int32_t declined;       /* paused: steps declined since the pause began */
    int32_t probe_interval; /* paused: declined steps before the next probe */
    int32_t since_verdict;  /* on or probing: steps with it since the last verdict or the probe's start */
    int32_t since_plain;    /* steps with it since the last plain one */
    int32_t plain_steps;    /* plain steps measured (up to OPTION_GATE_FIRST_PLAIN) */
} option_gate;

void option_gate_init(option_gate *gate);
/* Whether the coming step may use the option. false: it decodes plainly
 * (paused, or a plain step is due to measure plain decoding); *paused then
 * says whether because the option measured slower. */
bool option_gate_allows(option_gate *gate, bool *paused);
/* What a step cost: with the option (for drafting: a verify batch ran) or
 * plain, its seconds and the tokens it generated (a verify batch's accepted
 * drafts plus one). */
void option_gate_record(option_gate *gate, bool used, double seconds, int32_t tokens);

#endif
