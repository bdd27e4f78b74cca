/* The per-token record and its lines, on hand-built stats records: the
 * compute residual (serial: wall - io - mgmt; overlap: wall - stall - mgmt;
 * clamped at 0), the cumulative hit rate (-1 without a cache), the
 * throttled dense probe charged to mgmt_ms, and the exact BMOE_LOAD /
 * BMOE_PROGRESS text the contract specifies. Every expected value is worked
 * out by hand from the contract. */
#include <cjson/cJSON.h>
#include <math.h>
#include <time.h>

#include "test.h"
#include "tm_draft.h"
#include "tm_meter.h"
#include "tm_progress.h"

static bmoe_stats stats_of(double wall, double io, double stall, double mgmt, uint64_t read, uint64_t hits,
                           uint64_t misses)
{
    bmoe_stats s;
    memset(&s, 0, sizeof s);
    s.n_tokens = 1;
    s.wall_ms = wall;
    s.io_ms = io;
    s.stall_ms = stall;
    s.mgmt_ms = mgmt;
    s.read_bytes = read;
    s.cache_hits = hits;
    s.cache_misses = misses;
    return s;
}

static bool near(double a, double b)
{
    return fabs(a - b) < 1e-9;
}

static void test_residual(void)
{
    CHECK(near(tm_compute_residual(10, 4, 0, 1.5, false), 4.5));
    CHECK(near(tm_compute_residual(10, 25, 3, 1, true), 6.0)); /* overlap ignores io (lane busy time) */
    CHECK(tm_compute_residual(5, 7, 0, 0.5, false) == 0.0);     /* clamped: never negative */
    CHECK(tm_compute_residual(5, 0, 9, 0, true) == 0.0);
    CHECK(tm_hit_pct(3, 1, true) == 75.0);
    CHECK(tm_hit_pct(3, 1, false) == -1.0);
    CHECK(tm_hit_pct(0, 0, true) == -1.0);
}

/* Serial, with a cache, no probe: two tokens and their lines. */
static void test_serial_lines(void)
{
    tm_meter_params params = {.overlap = false, .cache_used = true, .steps = 8, .probe_every = 1, .probe = NULL};
    tm_meter *meter = tm_meter_create(&params);
    bmoe_stats a = stats_of(10.0, 4.0, 0.0, 1.5, 3u << 20, 3, 1);
    a.cpu_ms = 15.0;
    a.majflt = 2;
    a.loop_overhead_ms = 0.7;
    tm_token token;
    tm_meter_token(meter, 1, &a, &token);
    CHECK(token.step == 1 && token.steps == 8 && token.decoded);
    CHECK(near(token.compute_ms, 4.5));
    CHECK(token.cache_hit_pct == 75.0);
    CHECK(token.dense_resident_frac == -1.0);
    CHECK(near(token.loop_overhead_ms, 0.7));

    tm_buffer out;
    tm_buffer_init(&out);
    CHECK(tm_progress_load_line(&out, &token));
    tm_deltas deltas = {.text = "a\"b\n", .text_length = 4};
    tm_progress_line(&out, &token, &deltas);
    const char *want =
        "BMOE_LOAD {\"mb\":3.000,\"ms\":4.000}\n"
        "BMOE_PROGRESS {\"step\":1,\"steps\":8,\"wall_ms\":10.000,\"io_ms\":4.000,\"compute_ms\":4.500,"
        "\"mgmt_ms\":1.500,\"stall_ms\":0.000,\"read_mb\":3.000,\"cache_hit_pct\":75.00,\"majflt\":2,"
        "\"cpu_ms\":15.000,\"dense_resident_frac\":-1.000,\"delta_reasoning\":\"\",\"delta_text\":\"a\\\"b\\n\"}\n";
    CHECK_MSG(strcmp(tm_buffer_text(&out), want) == 0, "got:\n%s\nwant:\n%s", tm_buffer_text(&out), want);

    /* io above wall: compute clamps at 0; hits accumulate over the generation: 4 of 8 */
    tm_buffer_clear(&out);
    bmoe_stats b = stats_of(5.0, 7.0, 0.0, 0.5, 0, 1, 3);
    tm_meter_token(meter, 2, &b, &token);
    CHECK(token.compute_ms == 0.0);
    CHECK(token.cache_hit_pct == 50.0);
    /* read nothing, no read time: no BMOE_LOAD */
    bmoe_stats c = stats_of(2.0, 0.0, 0.0, 0.0, 0, 4, 0);
    tm_meter_token(meter, 3, &c, &token);
    CHECK(!tm_progress_load_line(&out, &token) && out.length == 0);
    /* lane time without a byte read (a cancelled guess) is not a load either */
    tm_token lane_time = token;
    lane_time.io_ms = 0.0004;
    CHECK(!tm_progress_load_line(&out, &lane_time) && out.length == 0);
    CHECK(near(token.cache_hit_pct, 100.0 * 8 / 12));
    tm_progress_line(&out, &token, NULL);
    CHECK(strstr(tm_buffer_text(&out), "\"cache_hit_pct\":66.67,") != NULL);
    CHECK(strstr(tm_buffer_text(&out), "\"delta_reasoning\":\"\",\"delta_text\":\"\"}\n") != NULL);

    const tm_totals *totals = tm_meter_totals(meter);
    CHECK(totals->tokens == 3 && totals->decoded == 3);
    CHECK(near(totals->wall_ms, 17.0) && near(totals->io_ms, 11.0) && near(totals->compute_ms, 4.5 + 0 + 2.0));
    CHECK(totals->read_bytes == 3u << 20 && totals->hits == 8 && totals->misses == 4);
    CHECK(near(tm_totals_per_token(totals, totals->wall_ms), 17.0 / 3));
    tm_buffer_free(&out);
    tm_meter_destroy(meter);
}

/* Overlap: the residual subtracts the stall; resident runs report -1. */
static void test_overlap_and_resident(void)
{
    tm_meter_params params = {.overlap = true, .cache_used = false, .steps = 2, .probe_every = 1};
    tm_meter *meter = tm_meter_create(&params);
    bmoe_stats a = stats_of(10.0, 25.0, 3.0, 1.0, 1u << 20, 0, 0);
    tm_token token;
    tm_meter_token(meter, 1, &a, &token);
    CHECK(near(token.compute_ms, 6.0));
    CHECK(token.cache_hit_pct == -1.0);
    tm_buffer out;
    tm_buffer_init(&out);
    tm_progress_line(&out, &token, NULL);
    cJSON *json = cJSON_Parse(tm_buffer_text(&out) + strlen("BMOE_PROGRESS "));
    CHECK(json != NULL);
    CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(json, "cache_hit_pct")) == -1.0);
    CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(json, "io_ms")) == 25.0);
    CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(json, "stall_ms")) == 3.0);
    CHECK(cJSON_GetObjectItem(json, "reset") == NULL);
    cJSON_Delete(json);

    /* reset appears only as "reset":1, before the deltas */
    tm_buffer_clear(&out);
    tm_deltas snapshot = {.reasoning = "think", .reasoning_length = 5, .text = "x", .text_length = 1, .reset = true};
    tm_progress_line(&out, &token, &snapshot);
    CHECK(strstr(tm_buffer_text(&out), ",\"reset\":1,\"delta_reasoning\":\"think\",\"delta_text\":\"x\"}") != NULL);
    /* a token whose decode never ran costs nothing */
    bmoe_stats none;
    memset(&none, 0, sizeof none);
    tm_meter_token(meter, 2, &none, &token);
    CHECK(!token.decoded && token.wall_ms == 0.0 && token.compute_ms == 0.0);
    CHECK(tm_meter_totals(meter)->tokens == 2 && tm_meter_totals(meter)->decoded == 1);
    tm_buffer_free(&out);
    tm_meter_destroy(meter);
}

typedef struct probe_state {
    int calls;
} probe_state;

/* A probe that takes a measurable time (about 2 ms) and returns 0.5. */
static double slow_probe(void *user)
{
    probe_state *state = user;
    state->calls++;
    struct timespec pause = {0, 2000000};
    nanosleep(&pause, NULL);
    return 0.5;
}

/* The probe: the first token and every probe_every tokens; its time goes to
 * mgmt_ms and wall_ms of its row (the residual does not move) and leaves the
 * next row's loop overhead, where the engine measured it again. */
static void test_probe(void)
{
    probe_state state = {0};
    tm_meter_params params = {.overlap = false, .cache_used = true, .steps = 7, .probe_every = 3,
                              .probe = slow_probe, .probe_user = &state};
    tm_meter *meter = tm_meter_create(&params);
    double charged[8] = {0};
    bool ok_residual = true, ok_carry = true, ok_loop = true;
    for (int i = 1; i <= 7; i++) {
        bmoe_stats s = stats_of(10.0, 4.0, 0.0, 1.0, 0, 1, 1);
        /* what the engine saw between the decodes, probe included; far above the
         * probe's time however slow the machine, so no clamp can fire */
        s.loop_overhead_ms = 1000.0;
        tm_token token;
        tm_meter_token(meter, i, &s, &token);
        charged[i] = token.wall_ms - 10.0;
        ok_residual &= near(token.mgmt_ms - 1.0, charged[i]) && near(token.compute_ms, 5.0);
        ok_carry &= token.dense_resident_frac == 0.5;
        ok_loop &= near(token.loop_overhead_ms, 1000.0 - charged[i - 1]);
    }
    CHECK_MSG(state.calls == 3, "probe called %d times, want 3 (tokens 1, 4, 7)", state.calls);
    CHECK(charged[1] >= 1.5 && charged[4] >= 1.5 && charged[7] >= 1.5);
    CHECK(charged[2] == 0.0 && charged[3] == 0.0 && charged[5] == 0.0 && charged[6] == 0.0);
    CHECK_MSG(ok_residual, "the probe moved the compute residual or was not charged to mgmt_ms");
    CHECK(ok_carry);
    CHECK_MSG(ok_loop, "the probe's time was counted again in the next loop overhead");
    CHECK(tm_meter_totals(meter)->probes == 3);
    CHECK(near(tm_meter_totals(meter)->probe_ms, charged[1] + charged[4] + charged[7]));
    tm_meter_destroy(meter);
}

/* Speculative decoding's rows, from the generation's counters after each
 * step: a plain decode (the n-gram source found nothing), a verify batch
 * of 3 drafts keeping 2 (a group of 3 rows), a verify batch keeping none
 * (a group of 1); what each step drafted is charged to its row. The meter
 * counts the group's later rows as decoded at no cost, the decodes apart. */
static void test_drafted_rows(void)
{
    tm_draft draft;
    tm_draft_init(&draft);
    bmoe_spec_stats now;
    memset(&now, 0, sizeof now);
    int32_t batch[5];
    double draft_ms[5];
    now.draft_ms = 0.25; /* step 1: drafted nothing, decoded alone */
    tm_draft_row(&draft, &now, &batch[0], &draft_ms[0]);
    now.verify_batches = 1; /* step 2: 3 drafts, 2 accepted */
    now.drafted = 3;
    now.accepted = 2;
    now.draft_ms = 0.75;
    tm_draft_row(&draft, &now, &batch[1], &draft_ms[1]);
    tm_draft_row(&draft, &now, &batch[2], &draft_ms[2]); /* steps 3 and 4: the accepted drafts */
    tm_draft_row(&draft, &now, &batch[3], &draft_ms[3]);
    now.verify_batches = 2; /* step 5: 3 drafts, none accepted */
    now.drafted = 6;
    now.draft_ms = 1.0;
    tm_draft_row(&draft, &now, &batch[4], &draft_ms[4]);
    CHECK(batch[0] == 1 && batch[1] == 3 && batch[2] == 0 && batch[3] == 0 && batch[4] == 1);
    CHECK(near(draft_ms[0], 0.25) && near(draft_ms[1], 0.5) && draft_ms[2] == 0.0 && draft_ms[3] == 0.0 &&
          near(draft_ms[4], 0.25));

    tm_meter_params params = {.overlap = false, .cache_used = false, .steps = 5, .probe_every = 1, .probe = NULL};
    tm_meter *meter = tm_meter_create(&params);
    bmoe_stats one = stats_of(10.0, 0.0, 0.0, 0.0, 0, 0, 0), group = stats_of(16.0, 0.0, 0.0, 0.0, 0, 0, 0), none;
    group.n_tokens = 4; /* the token and its 3 drafts */
    memset(&none, 0, sizeof none);
    const bmoe_stats *steps[5] = {&one, &group, &none, &none, &group};
    tm_token token;
    for (int i = 0; i < 5; i++) {
        tm_meter_token_drafted(meter, i + 1, steps[i], batch[i], draft_ms[i], &token);
        CHECK(token.batch == batch[i] && token.draft_ms == draft_ms[i] && token.decoded);
    }
    const tm_totals *totals = tm_meter_totals(meter);
    CHECK(totals->tokens == 5 && totals->decoded == 5 && totals->decodes == 3);
    CHECK(near(totals->wall_ms, 42.0) && near(totals->draft_ms, 1.0));
    CHECK(near(tm_totals_per_token(totals, totals->wall_ms), 8.4)); /* 42 ms over 5 tokens */
    tm_meter_destroy(meter);
}

int main(void)
{
    test_residual();
    test_drafted_rows();
    test_serial_lines();
    test_overlap_and_resident();
    test_probe();
    return test_finish();
}
