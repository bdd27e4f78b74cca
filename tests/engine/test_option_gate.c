/* The option gate's rules on made-up timings (option_gate.h), told as
 * drafting's (the read-ahead's steps are the same with one token each): it
 * pauses drafting that measures slower per token than plain decoding, probes it
 * again after intervals that double while probes confirm the pause, resumes
 * when a probe measures faster, keeps measuring plain decoding while
 * drafting pays, and ignores steps that generated nothing. */
#include <math.h>

#include "engine/option_gate.h"
#include "test.h"

/* One step as the generation runs it: ask, then record what the step cost
 * (plain_ms per token when it decoded plainly, drafted_ms for the step and
 * its tokens when it drafted). Returns whether it drafted; *paused says
 * whether the gate declined because drafting measured slower. */
static bool step(option_gate *gate, double plain_ms, double drafted_ms, int32_t used_tokens, bool *paused)
{
    bool drafts = option_gate_allows(gate, paused);
    if (drafts)
        option_gate_record(gate, true, drafted_ms * 1e-3, used_tokens);
    else
        option_gate_record(gate, false, plain_ms * 1e-3, 1);
    return drafts;
}

/* A gate that paused: drafted steps at 30 ms for one token against plain
 * ones at 10 ms until it does. */
static void pause_gate(option_gate *gate)
{
    option_gate_init(gate);
    bool paused;
    for (int steps = 0; gate->state != OPTION_GATE_PAUSED && steps < 100; steps++)
        step(gate, 10, 30, 1, &paused);
    CHECK(gate->state == OPTION_GATE_PAUSED);
}

/* Drafting that never pays: 30 ms for one token against 10 ms plain. */
static void check_pause_and_probes(void)
{
    option_gate gate;
    option_gate_init(&gate);
    bool paused;
    /* the first step drafts, the second measures plain decoding, then a
     * plain step after every two drafted ones until FIRST_PLAIN plain steps
     * are measured; the verdict at the JUDGE_STEPS-th drafted step */
    CHECK(step(&gate, 10, 30, 1, &paused) && !paused);
    CHECK(!step(&gate, 10, 30, 1, &paused) && !paused);
    int drafted_steps = 1, plain_steps = 1;
    while (gate.state == OPTION_GATE_ON && drafted_steps + plain_steps < 50) {
        bool drafted = step(&gate, 10, 30, 1, &paused);
        CHECK(!paused);
        CHECK_MSG(drafted == ((drafted_steps + plain_steps) % 3 != 1), "step %d: %s", drafted_steps + plain_steps + 1,
                  drafted ? "drafted" : "plain");
        drafted_steps += drafted;
        plain_steps += !drafted;
    }
    CHECK_MSG(gate.state == OPTION_GATE_PAUSED && drafted_steps == OPTION_GATE_JUDGE_STEPS &&
                  plain_steps == OPTION_GATE_FIRST_PLAIN,
              "paused after %d drafted and %d plain steps", drafted_steps, plain_steps);
    /* the first interval declined, a probe of PROBE_STEPS drafted steps,
     * then twice the interval, and so on up to the longest */
    int32_t interval = OPTION_GATE_FIRST_PROBE;
    for (int round = 0; round < 8; round++) {
        int declined = 0;
        while (!step(&gate, 10, 30, 1, &paused)) {
            CHECK(paused);
            declined++;
            if (declined > OPTION_GATE_LONGEST_PROBE)
                break;
        }
        CHECK_MSG(declined == interval, "round %d: %d steps declined, want %d", round, declined, interval);
        for (int i = 1; i < OPTION_GATE_PROBE_STEPS; i++)
            CHECK_MSG(step(&gate, 10, 30, 1, &paused), "round %d: probe step %d declined", round, i + 1);
        CHECK(gate.state == OPTION_GATE_PAUSED);
        interval = interval * 2 < OPTION_GATE_LONGEST_PROBE ? interval * 2 : OPTION_GATE_LONGEST_PROBE;
    }
    CHECK(interval == OPTION_GATE_LONGEST_PROBE);
}

/* A pause ends at the first probe that measures faster: 10 ms for 3 tokens
 * against 10 ms for one; then drafting goes on, with a plain step after
 * every REFRESH drafted ones. */
static void check_resume(void)
{
    option_gate gate;
    pause_gate(&gate);
    bool paused;
    for (int i = 0; i < OPTION_GATE_FIRST_PROBE; i++)
        CHECK(!step(&gate, 10, 10, 3, &paused) && paused);
    /* the probe measures alone: the slow steps that paused it are forgotten */
    for (int i = 0; i < OPTION_GATE_PROBE_STEPS; i++)
        CHECK(step(&gate, 10, 10, 3, &paused));
    CHECK(gate.state == OPTION_GATE_ON);
    int drafted = 0, plain = 0;
    for (int i = 0; i < 10 * (OPTION_GATE_REFRESH + 1); i++) {
        if (step(&gate, 10, 10, 3, &paused))
            drafted++;
        else
            plain++;
        CHECK(!paused);
    }
    CHECK_MSG(plain == 10 && drafted == 10 * OPTION_GATE_REFRESH, "%d plain and %d drafted steps", plain, drafted);
}

/* Drafting that pays from the start is never paused; a slightly slower
 * plain step does not matter, an equal cost per token does not pause. */
static void check_paying(void)
{
    option_gate gate;
    option_gate_init(&gate);
    bool paused;
    int declined = 0;
    for (int i = 0; i < 500; i++)
        if (!step(&gate, 10, 20, 2, &paused) && paused)
            declined++;
    CHECK_MSG(declined == 0 && gate.state == OPTION_GATE_ON, "%d steps paused at equal cost", declined);
}

/* A step that generated nothing, or whose time is not a number, is not a
 * measurement: the gate stays as it was. */
static void check_ignored(void)
{
    option_gate gate;
    option_gate_init(&gate);
    option_gate_record(&gate, false, 0.01, 0);
    option_gate_record(&gate, true, NAN, 2);
    option_gate_record(&gate, true, -1.0, 2);
    CHECK(gate.plain_tokens == 0 && gate.used_tokens == 0 && gate.state == OPTION_GATE_ON);
    bool paused;
    CHECK(option_gate_allows(&gate, &paused) && !paused);
}

/* While probing, steps where the source proposed nothing are plain: they
 * neither end the probe nor count towards it. */
static void check_probe_with_plain_steps(void)
{
    option_gate gate;
    pause_gate(&gate);
    bool paused;
    for (int i = 0; i <= OPTION_GATE_FIRST_PROBE; i++)
        option_gate_allows(&gate, &paused);
    CHECK(gate.state == OPTION_GATE_PROBING);
    for (int i = 0; i < 5; i++) {
        CHECK(option_gate_allows(&gate, &paused) && !paused);
        option_gate_record(&gate, false, 0.01, 1);
    }
    CHECK(gate.state == OPTION_GATE_PROBING);
    for (int i = 0; i < OPTION_GATE_PROBE_STEPS; i++)
        option_gate_record(&gate, true, 0.03, 1);
    CHECK(gate.state == OPTION_GATE_PAUSED && gate.probe_interval == 2 * OPTION_GATE_FIRST_PROBE);
}

int main(void)
{
    check_pause_and_probes();
    check_resume();
    check_paying();
    check_ignored();
    check_probe_with_plain_steps();
    return test_finish();
}
