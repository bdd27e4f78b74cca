/* The drafting gate (draft_gate.h). */
#include "draft_gate.h"

/* How much an older step weighs against the next one: plain steps vary
 * little (only with the cache's warmth), drafted ones with each step's
 * acceptance, so these are averaged over more steps. */
#define DRAFT_GATE_PLAIN_DECAY 0.75
#define DRAFT_GATE_DRAFTED_DECAY 0.875

void draft_gate_init(draft_gate *gate)
{
    *gate = (draft_gate){.state = DRAFT_GATE_DRAFTING, .probe_interval = DRAFT_GATE_FIRST_PROBE};
}

bool draft_gate_allows(draft_gate *gate, bool *paused)
{
    *paused = false;
    switch (gate->state) {
    case DRAFT_GATE_PAUSED:
        if (++gate->declined <= gate->probe_interval) {
            *paused = true;
            return false;
        }
        /* a probe: its own measurement, not the one that paused */
        gate->state = DRAFT_GATE_PROBING;
        gate->since_verdict = 0;
        gate->drafted_seconds = gate->drafted_tokens = 0.0;
        return true;
    case DRAFT_GATE_PROBING:
        return true;
    case DRAFT_GATE_DRAFTING:
        break;
    }
    /* a plain step is due: drafting was measured but plain decoding not
     * yet, or not for a while */
    return !(gate->drafted_tokens > 0 && (gate->plain_tokens == 0 || gate->since_plain >= DRAFT_GATE_REFRESH));
}

static void pause(draft_gate *gate, int32_t interval)
{
    gate->state = DRAFT_GATE_PAUSED;
    gate->declined = 0;
    gate->probe_interval = interval;
}

void draft_gate_record(draft_gate *gate, bool drafted, double seconds, int32_t tokens)
{
    if (tokens < 1 || !(seconds >= 0))
        return;
    if (!drafted) {
        gate->plain_seconds = gate->plain_seconds * DRAFT_GATE_PLAIN_DECAY + seconds;
        gate->plain_tokens = gate->plain_tokens * DRAFT_GATE_PLAIN_DECAY + tokens;
        gate->since_plain = 0;
        return;
    }
    gate->drafted_seconds = gate->drafted_seconds * DRAFT_GATE_DRAFTED_DECAY + seconds;
    gate->drafted_tokens = gate->drafted_tokens * DRAFT_GATE_DRAFTED_DECAY + tokens;
    gate->since_plain++;
    gate->since_verdict++;
    bool probing = gate->state == DRAFT_GATE_PROBING;
    if (gate->plain_tokens == 0 || gate->since_verdict < (probing ? DRAFT_GATE_PROBE_STEPS : DRAFT_GATE_JUDGE_STEPS))
        return;
    gate->since_verdict = 0;
    bool slower = gate->drafted_seconds / gate->drafted_tokens > gate->plain_seconds / gate->plain_tokens;
    if (!slower) {
        gate->state = DRAFT_GATE_DRAFTING;
        gate->probe_interval = DRAFT_GATE_FIRST_PROBE;
    } else if (probing) {
        int32_t longer = gate->probe_interval * 2;
        pause(gate, longer < DRAFT_GATE_LONGEST_PROBE ? longer : DRAFT_GATE_LONGEST_PROBE);
    } else {
        pause(gate, DRAFT_GATE_FIRST_PROBE);
    }
}
