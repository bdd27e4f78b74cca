/* The end-of-run lines and the trace rows on hand-built records: the exact
 * text of generation:, compute:, prefill:, mode:, moe-stream:, moe-cache:,
 * moe-prefetch: and the drafting lines with values worked out by hand; the
 * mode: line naming a resident baseline; the route, io and compute trace
 * preambles and rows. */
#include "test.h"
#include "tm_compute_trace.h"
#include "tm_io_trace.h"
#include "tm_report.h"
#include "tm_route_trace.h"

static tm_config streaming_config(void)
{
    tm_config c;
    memset(&c, 0, sizeof c);
    c.model_path = "m.gguf";
    c.arch = "qwen3moe";
    c.n_layer = 2;
    c.n_moe_layers = 2;
    c.n_expert = 8;
    c.n_expert_used = 2;
    c.threads = 4;
    c.moe_stream = true;
    c.cache_mb = 64;
    c.io_threads = 4;
    c.o_direct = true;
    c.dense_anon = true;
    c.engine = "0.2.0";
    return c;
}

/* 4 decoded tokens: wall 40 ms, io 10, compute 26, mgmt 4, cpu 80 ms, 8
 * faults, 8 MiB read, 6 evictions, 2 re-reads; 1 MiB prefetched over 4
 * experts of which 3 were used. */
static tm_summary hand_summary(void)
{
    tm_summary s;
    memset(&s, 0, sizeof s);
    s.decode.tokens = 4;
    s.decode.decoded = 4;
    s.decode.wall_ms = 40.0;
    s.decode.io_ms = 10.0;
    s.decode.compute_ms = 26.0;
    s.decode.mgmt_ms = 4.0;
    s.decode.cpu_ms = 80.0;
    s.decode.majflt = 8;
    s.decode.read_bytes = 8u << 20;
    s.decode.evictions = 6;
    s.decode.rereads = 2;
    s.decode.prefetch_bytes = 1u << 20;
    s.decode.prefetched = 4;
    s.decode.prefetch_useful = 3;
    s.cache_hit_pct = 62.5;
    s.cache_resident_mib = 63.5;
    s.cache_budget_mib = 64.0;
    s.prefill.n_tokens = 12;
    s.prefill.wall_ms = 300.0;
    s.load_s = 1.25;
    return s;
}

static bool starts_with(const char *text, const char *prefix)
{
    return strncmp(text, prefix, strlen(prefix)) == 0;
}

static void check_text(const char *what, const tm_buffer *out, const char *want)
{
    CHECK_MSG(strcmp(tm_buffer_text(out), want) == 0, "%s:\n%s\nwant:\n%s", what, tm_buffer_text(out), want);
}

static void test_streaming_serial(void)
{
    tm_config c = streaming_config();
    c.prefetch = 1;
    tm_summary s = hand_summary();
    s.ttft_s = 0.3125;
    /* --prefetch K's line is untagged: the contract gives it nothing after the share, verdicts or not */
    s.decode.guesses_judged = 5;
    s.decode.guesses_right = 3;
    s.decode.prefetch_trusted = 1;
    tm_buffer out;
    tm_buffer_init(&out);
    tm_report_format(&out, &c, &s);
    /* s/token = 0.040 / 4 = 0.0100 (100 tok/s); cpu 0.0200 s/token over 4
     * threads = 0.0200 / (0.0100 x 4) = 50 %; 2 faults/token; 8 MiB read is
     * 2 MiB/token; 8 MiB in 0.010 s of reads = 800 MiB/s */
    check_text("serial", &out,
               "generation: 4 tokens, 0.0100 s/token (100.00 tok/s)\n"
               "compute: 50.0% CPU occupancy (0.0200 cpu-s/token over 4 threads), 2.00 major faults/token\n"
               "prefill: 12 tokens, 0.300 s (40.00 tok/s), load 1.250 s\n"
               "ttft: 0.312 s from the prompt to its first generated token (prefill 0.300 s, then its sampling and "
               "decode)\n"
               "mode: expert streaming, cache 64 MiB, dense anon\n"
               "moe-stream: read 8.00 MiB (2.000 MiB/token), decode 0.0100 s/token (compute 0.0065 + cache mgmt "
               "0.0010 + flash I/O 0.0025 s/token, 800.0 MiB/s)\n"
               "moe-cache: 62.5% hit, resident 63.5 MiB\n"
               "moe-cache: 6 evictions, 2 re-reads (0.50/token)\n"
               "moe-prefetch: 1.00 MiB speculative, 3/4 experts useful (75.0%)\n");
    tm_buffer_free(&out);
}

static void test_streaming_variants(void)
{
    tm_buffer out;
    tm_buffer_init(&out);
    tm_config c = streaming_config();
    c.overlap = true;
    c.cache_auto = true;
    c.cache_mb = 3000;
    c.dense_anon = false;
    tm_summary s = hand_summary();
    s.decode.stall_ms = 6.0;
    s.decode.cpu_ms = 0.0; /* unmeasured: no compute: line */
    tm_report_format(&out, &c, &s);
    const char *text = tm_buffer_text(&out);
    CHECK(strstr(text, "compute:") == NULL);
    CHECK(strstr(text, "mode: expert streaming, cache auto, dense mmap, overlap\n") != NULL);
    CHECK(strstr(text, "s/token, 800.0 MiB/s), stall_s/tok=0.0015\n") != NULL);
    CHECK(strstr(text, "moe-cache: 62.5% hit, resident 63.5 MiB, budget 3000 MiB\n") != NULL);
    CHECK(strstr(text, "moe-prefetch:") == NULL); /* no --prefetch */

    /* the read-ahead gate paused 3 of the 4 decodes: after the contract's fields */
    tm_buffer_clear(&out);
    c = streaming_config();
    c.predict_prefetch = true;
    s = hand_summary();
    s.decode.decodes = 4;
    s.decode.predict_paused = 3;
    tm_report_format(&out, &c, &s);
    text = tm_buffer_text(&out);
    CHECK_MSG(strstr(text, "moe-prefetch: 1.00 MiB speculative, 3/4 experts useful (75.0%) [stale-gate], paused on "
                           "3/4 decodes (measured slower)\n") != NULL,
              "paused read-ahead:\n%s", text);
    /* the verdicts on the guesses, those read trusted, then the pause */
    s.decode.guesses_judged = 8;
    s.decode.guesses_right = 3;
    s.decode.prefetch_trusted = 2;
    tm_buffer_clear(&out);
    tm_report_format(&out, &c, &s);
    CHECK_MSG(strstr(tm_buffer_text(&out), "[stale-gate], 3/8 guesses right as their layers routed (37.5%), 2 read at "
                                           "the disk's full rate (guesses measured right), paused on 3/4 decodes") != NULL,
              "trusted guesses:\n%s", tm_buffer_text(&out));
    s.decode.guesses_judged = s.decode.guesses_right = 0;
    s.decode.prefetch_trusted = 0;
    s.decode.predict_paused = 0;
    tm_buffer_clear(&out);
    tm_report_format(&out, &c, &s);
    CHECK(strstr(tm_buffer_text(&out), "(75.0%) [stale-gate]\n") != NULL);

    tm_buffer_clear(&out);
    c = streaming_config();
    c.cache_mb = 0;
    s = hand_summary();
    s.cache_hit_pct = -1.0;
    tm_report_format(&out, &c, &s);
    text = tm_buffer_text(&out);
    CHECK(strstr(text, "mode: expert streaming, cache off, dense anon\n") != NULL);
    CHECK(strstr(text, "moe-stream: ") != NULL && strstr(text, "moe-cache:") == NULL); /* no cache, no line */
    tm_buffer_free(&out);
}

static void test_resident(void)
{
    tm_buffer out;
    tm_buffer_init(&out);
    tm_config c = streaming_config();
    c.moe_stream = false;
    c.cache_mb = 0;
    tm_summary s = hand_summary();
    tm_report_format(&out, &c, &s);
    const char *text = tm_buffer_text(&out);
    const char *mode = strstr(text, "\nmode: ");
    CHECK(mode && strstr(mode, "without --moe-stream") && strstr(mode, "not a measurement"));
    CHECK(strstr(text, "\nmoe-") == NULL);

    tm_buffer_clear(&out);
    c.arch = "llama";
    c.n_moe_layers = 0;
    c.n_expert = 0;
    tm_report_mode_line(&out, &c);
    check_text("dense model", &out,
               "mode: resident, dense anon: llama has no routed experts, not an architecture this build streams\n");
    tm_buffer_free(&out);
}

/* Speculative decoding's lines, resident (they do not depend on
 * streaming): 4 tokens from 3 decodes, 2 of them verify batches that
 * drafted 5 tokens and kept 1; 40 ms of decode and 8 ms of drafting. */
static void test_drafting(void)
{
    tm_buffer out;
    tm_buffer_init(&out);
    tm_config c = streaming_config();
    c.moe_stream = false;
    c.cache_mb = 0;
    c.spec = "ngram";
    tm_summary s = hand_summary();
    s.drafting = true;
    s.spec.verify_batches = 2;
    s.spec.drafted = 5;
    s.spec.accepted = 1;
    s.decode.decodes = 3;
    s.decode.draft_ms = 8.0;
    tm_report_format(&out, &c, &s);
    const char *text = tm_buffer_text(&out);
    /* 1/5 = 20 %; 4 tokens / 3 decodes = 1.33; 0.008 s / 4 tokens = 0.002
     * s/token; effective 4 / 0.048 s = 83.33 tok/s against 4 / 0.040 = 100;
     * 2 of 3 steps drafted = 66.7 % */
    const char *lines = strstr(text, "\nngram: ");
    CHECK_MSG(lines && strcmp(lines + 1,
                              "ngram: 1/5 drafts accepted (20.0%), 1.33 tokens per verify decode (3 decodes for 4 "
                              "tokens)\n"
                              "ngram: drafting costs 0.002000 s/token on top of decode -> 83.33 tok/s effective (vs "
                              "100.00 reported)\n"
                              "ngram: drafted on 2 of 3 steps (66.7%); the rest decoded plainly\n") == 0,
              "drafting lines:\n%s", text);
    /* the model's head drafts at every step: no coverage line; nothing drafted: no share */
    tm_buffer_clear(&out);
    c.spec = "mtp";
    s.spec.drafted = 0;
    s.spec.accepted = 0;
    tm_report_format(&out, &c, &s);
    text = tm_buffer_text(&out);
    CHECK_MSG(strstr(text, "\nmtp: 0/0 drafts accepted (-), ") && !strstr(text, "drafted on"), "mtp lines:\n%s",
              text);
    /* the gate paused the head on 1 step: the pause, and then how often it drafted */
    tm_buffer_clear(&out);
    s.spec.paused_steps = 1;
    tm_report_format(&out, &c, &s);
    text = tm_buffer_text(&out);
    CHECK_MSG(strstr(text, "\nmtp: drafting paused on 1 steps, where it measured more seconds per token than plain "
                           "decoding (--draft-always drafts anyway)\n"
                           "mtp: drafted on 2 of 3 steps (66.7%); the rest decoded plainly\n"),
              "paused mtp lines:\n%s", text);
    s.spec.paused_steps = 0;
    /* no drafting: no such line */
    tm_buffer_clear(&out);
    s.drafting = false;
    tm_report_format(&out, &c, &s);
    CHECK(!strstr(tm_buffer_text(&out), "mtp:") && !strstr(tm_buffer_text(&out), "drafts accepted"));
    tm_buffer_free(&out);
}

static void test_traces(void)
{
    tm_config c = streaming_config();
    c.route_trace = true;
    tm_layout layout = {0};
    uint64_t expert[2] = {3059712, 2654208}, dense[2] = {11953152, 11682816};
    layout.known = true;
    layout.n_layer = 2;
    layout.expert_bytes = expert;
    layout.dense_bytes = dense;
    tm_buffer out;
    tm_buffer_init(&out);
    tm_route_trace_format_preamble(&out, &c, &layout);
    check_text("route preamble", &out,
               "# route_trace v1\n"
               "# model=m.gguf arch=qwen3moe n_layer=2 n_expert=8 n_expert_used=2\n"
               "# route_trace=1 io_trace=0 compute_trace=0 compute_trace_layers=0\n"
               "# layer=0 expert_bytes=3059712 dense_bytes=11953152\n"
               "# layer=1 expert_bytes=2654208 dense_bytes=11682816\n"
               "turn,phase,step,layer,slot,expert,weight,residency,expert_bytes,dropped\n");
    tm_buffer_clear(&out);
    int32_t experts[2] = {5, 1};
    float weights[2] = {0.75f, 0.25f};
    uint8_t residency[2] = {0, 2};
    uint64_t read[2] = {3059712, 0};
    bmoe_route_event event = {.layer = 1, .position = 37, .n_experts_used = 2, .experts = experts,
                              .weights = weights, .residency = residency, .read_bytes = read};
    tm_stamp stamp = {0, TM_PHASE_DECODE, 99};
    tm_route_trace_format_event(&out, &stamp, &event);
    check_text("route rows (step is the event's position)", &out,
               "0,1,37,1,0,5,0.75,0,3059712,0\n0,1,37,1,1,1,0.25,2,0,0\n");
    tm_buffer_clear(&out);
    event.weights = NULL; /* no weight: nan, never 0 */
    tm_route_trace_format_event(&out, &stamp, &event);
    CHECK(strstr(tm_buffer_text(&out), ",nan,") != NULL);

    tm_buffer_clear(&out);
    bmoe_io_event io = {.layer = 0, .expert = 87, .projection = 1, .lane = 2, .speculative = true,
                        .offset = 1526304, .requested_bytes = 65536, .device_bytes = 69632, .latency_ns = 416800};
    tm_stamp decode = {0, TM_PHASE_DECODE, 29};
    tm_io_trace_format_event(&out, &decode, &io);
    check_text("io row", &out, "0,1,29,0,87,1,2,1,1526304,65536,69632,416800\n");
    /* a guess needed after its first 256 KiB piece: that piece a spec row,
     * the rest a demand row; bytes and time add up to the read's */
    tm_buffer_clear(&out);
    bmoe_io_event promoted = {.layer = 2, .expert = 5, .projection = 0, .lane = 1, .speculative = false,
                              .offset = 1000000, .requested_bytes = 900000, .device_bytes = 905216,
                              .latency_ns = 400000, .speculative_requested_bytes = 262144 - 1000000 % 4096,
                              .speculative_device_bytes = 262144, .speculative_latency_ns = 100000};
    tm_io_trace_format_event(&out, &decode, &promoted);
    check_text("io rows of a promoted guess", &out,
               "0,1,29,2,5,0,1,1,1000000,261568,262144,100000\n"
               "0,1,29,2,5,0,1,0,1261568,638432,643072,300000\n");
    /* promoted before any piece: a demand row */
    tm_buffer_clear(&out);
    promoted.speculative_requested_bytes = promoted.speculative_device_bytes = 0;
    promoted.speculative_latency_ns = 0;
    tm_io_trace_format_event(&out, &decode, &promoted);
    check_text("io row of a guess promoted before its first piece", &out,
               "0,1,29,2,5,0,1,0,1000000,900000,905216,400000\n");
    tm_buffer_clear(&out);
    tm_io_trace_format_preamble(&out, &c);
    CHECK(starts_with(tm_buffer_text(&out), "# io_trace v1\n# model=m.gguf "));
    CHECK(strstr(tm_buffer_text(&out),
                 "\nturn,phase,step,layer,expert,proj,lane,spec,offset,req_bytes,read_bytes,latency_ns\n") != NULL);

    tm_buffer_clear(&out);
    bmoe_trace_event layer = {.layer = 3, .name = "blk.3", .wall_ns = 428500, .majflt = 2};
    tm_compute_trace_format_event(&out, &decode, 4, &layer);
    bmoe_trace_event post = {.layer = -1, .name = "post", .wall_ns = 1000, .majflt = 0};
    tm_compute_trace_format_event(&out, &decode, 5, &post);
    bmoe_trace_event block = {.layer = 3, .name = "ffn_moe_experts-3", .op = "MUL_MAT_ID", .wall_ns = 900, .majflt = 0};
    tm_compute_trace_format_event(&out, &decode, 6, &block);
    check_text("compute rows", &out,
               "0,1,29,4,3,LAYER,blk.3,428500,2\n0,1,29,5,-1,LAYER,post,1000,0\n"
               "0,1,29,6,3,MUL_MAT_ID,ffn_moe_experts-3,900,0\n");
    tm_buffer_clear(&out);
    tm_compute_trace_format_preamble(&out, &c, false);
    const char *text = tm_buffer_text(&out);
    CHECK(starts_with(text, "# compute_trace v1\n# model=m.gguf arch=qwen3moe n_layer=2 "));
    CHECK(strstr(text, " n_threads=4 io_threads=4 o_direct=1 overlap=0\n") != NULL);
    CHECK(strstr(text, "# granularity=block requested=nodes\n") != NULL); /* says what the rows are */
    tm_buffer_clear(&out);
    tm_compute_trace_format_preamble(&out, &c, true);
    CHECK(strstr(tm_buffer_text(&out), "# granularity=layer requested=layers\n") != NULL);
    text = tm_buffer_text(&out);
    CHECK(strstr(text, "\nturn,phase,step,seq,layer,op,name,wall_ns,majflt\n") != NULL);
    tm_buffer_free(&out);
}

int main(void)
{
    test_streaming_serial();
    test_streaming_variants();
    test_resident();
    test_drafting();
    test_traces();
    return test_finish();
}
