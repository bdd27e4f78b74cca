/* The gate on an option that changes only speed (option_gate.h). */
#include "option_gate.h"

/* How much an older step weighs against the next one: plain steps vary
 * little (only with the cache's warmth), drafted ones with each step's
 * acceptance, so those with the option are averaged over more steps. */
#define OPTION_GATE_PLAIN_DECAY 0.75
#define OPTION_GATE_USED_DECAY 0.875

void option_gate_init(option_gate *gate)
{
    *gate = (option_gate){.state = OPTION_GATE_ON, .probe_interval = OPTION_GATE_FIRST_PROBE};
}

bool option_gate_allows(option_gate *gate, bool *paused)
{
    *paused = false;
    switch (gate->state) {
    case OPTION_GATE_PAUSED:
        if (++gate->declined <= gate->probe_interval) {
            *paused = true;
            return false;
        }
        /* a probe: its own measurement, not the one that paused */
        gate->state = OPTION_GATE_PROBING;
        gate->since_verdict = 0;
        gate->used_seconds = gate->used_tokens = 0.0;
        return true;
    case OPTION_GATE_PROBING:
        return true;
    case OPTION_GATE_ON:
        break;
    }
    /* a plain step is due: the option was measured but plain decoding not
     * enough yet, or not for a while */
    int32_t every = gate->plain_steps < OPTION_GATE_FIRST_PLAIN ? 2 : OPTION_GATE_REFRESH;
    return !(gate->used_tokens > 0 && (gate->plain_tokens == 0 || gate->since_plain >= every));
}

static void pause(option_gate *gate, int32_t interval)
{
    gate->state = OPTION_GATE_PAUSED;
    gate->declined = 0;
    gate->probe_interval = interval;
}

void option_gate_record(option_gate *gate, bool used, double seconds, int32_t tokens)
{
    if (tokens < 1 || !(seconds >= 0))
        return;
    if (!used) {
        gate->plain_seconds = gate->plain_seconds * OPTION_GATE_PLAIN_DECAY + seconds;
        gate->plain_tokens = gate->plain_tokens * OPTION_GATE_PLAIN_DECAY + tokens;
        gate->since_plain = 0;
        if (gate->plain_steps < OPTION_GATE_FIRST_PLAIN)
            gate->plain_steps++;
        return;
    }
    gate->used_seconds = gate->used_seconds * OPTION_GATE_USED_DECAY + seconds;
    gate->used_tokens = gate->used_tokens * OPTION_GATE_USED_DECAY + tokens;
    gate->since_plain++;
    gate->since_verdict++;
    bool probing = gate->state == OPTION_GATE_PROBING;
    int32_t verdict_after = probing ? OPTION_GATE_PROBE_STEPS : OPTION_GATE_JUDGE_STEPS;
    if (gate->plain_steps < OPTION_GATE_FIRST_PLAIN || gate->since_verdict < verdict_after)
        return;
    gate->since_verdict = 0;
    bool slower = gate->used_seconds / gate->used_tokens > gate->plain_seconds / gate->plain_tokens;
    if (!slower) {
        gate->state = OPTION_GATE_ON;
        gate->probe_interval = OPTION_GATE_FIRST_PROBE;
    } else if (probing) {
        int32_t longer = gate->probe_interval * 2;
        pause(gate, longer < OPTION_GATE_LONGEST_PROBE ? longer : OPTION_GATE_LONGEST_PROBE);
    } else {
        pause(gate, OPTION_GATE_FIRST_PROBE);
    }
}
