/* The --csv pieces on hand-built records: the preamble's keys (every key
 * the contract lists, with the resolved values), the row (the contract's 29
 * columns in order, the off values of features this engine lacks), the
 * "# summary" trailer, the /proc parsers, the per-layer layout parser and
 * the safe sink (publish on commit, nothing touched on discard, devices
 * refused). Expected values are worked out by hand. */
#include <unistd.h>

#include "test.h"
#include "tm_csv.h"
#include "tm_layout.h"

/* The value of key in a "k=v k=v" text (whitespace separated), or NULL. */
static const char *value_of(const char *text, const char *key, char *value, size_t size)
{
    size_t key_length = strlen(key);
    for (const char *c = text; *c; c++) {
        if ((c == text || c[-1] == ' ' || c[-1] == '\n') && strncmp(c, key, key_length) == 0 && c[key_length] == '=') {
            const char *start = c + key_length + 1;
            size_t length = strcspn(start, " \n");
            if (length >= size)
                return NULL;
            memcpy(value, start, length);
            value[length] = '\0';
            return value;
        }
    }
    return NULL;
}

static void check_key(const char *text, const char *key, const char *want)
{
    char value[256];
    const char *got = value_of(text, key, value, sizeof value);
    CHECK_MSG(got && strcmp(got, want) == 0, "%s=%s, want %s", key, got ? got : "(absent)", want);
}

static tm_config hand_config(void)
{
    tm_config c;
    memset(&c, 0, sizeof c);
    c.model_path = "/models/my model.gguf";
    c.arch = "qwen3moe";
    c.n_layer = 48;
    c.n_moe_layers = 48;
    c.n_expert = 128;
    c.n_expert_used = 6;
    c.threads = 4;
    c.n_ctx = 2048;
    c.n_ubatch = 512;
    c.moe_stream = true;
    c.cache_mb = 4000;
    c.cache_auto = true;
    c.cache_floor_mb = 1536;
    c.cache_ceil_mb = 0;
    c.cache_cycle_mb = 250.4;
    c.cache_budget_mib = 4000.0;
    c.io_threads = 4;
    c.o_direct = true;
    c.overlap = true;
    c.prefetch = 2;
    c.dense_anon = true;
    c.temp = 0.0f;
    c.top_k = 40;
    c.top_p = 0.95f;
    c.seed = 42;
    c.compute_trace_layers = true;
    c.engine = "0.2.0";
    return c;
}

static void test_preamble(void)
{
    tm_config c = hand_config();
    tm_buffer out;
    tm_buffer_init(&out);
    tm_csv_format_preamble(&out, &c);
    const char *text = tm_buffer_text(&out);
    CHECK(strncmp(text, "# bmoe_metrics v2\n# engine=0.2.0\n# model=", 40) == 0);
    /* every line is a comment line */
    for (const char *line = text; *line; line = strchr(line, '\n') + 1)
        CHECK(line[0] == '#');
    /* the file name (the app names a run by it), one value whatever it holds */
    check_key(text, "model", "my%20model.gguf");
    check_key(text, "arch", "qwen3moe");
    check_key(text, "n_layer", "48");
    check_key(text, "n_expert", "128");
    check_key(text, "n_expert_used", "6");
    check_key(text, "threads", "4");
    check_key(text, "n_ctx", "2048");
    check_key(text, "n_ubatch", "512");
    check_key(text, "chatml", "0");
    check_key(text, "moe_stream", "1");
    check_key(text, "cache_mb", "4000");
    check_key(text, "cache_auto", "1");
    check_key(text, "cache_floor_mb", "1536");
    check_key(text, "cache_ceil_mb", "0");
    check_key(text, "cache_cycle_mb", "251"); /* rounded up: a budget under it cannot hold a token */
    check_key(text, "force_cache", "0");
    check_key(text, "load_all", "0");
    check_key(text, "preload_experts", "0");
    check_key(text, "io_threads", "4");
    check_key(text, "o_direct", "1");
    check_key(text, "overlap", "1");
    check_key(text, "io_two_wave", "0");
    check_key(text, "prefetch", "2");
    check_key(text, "route_ahead", "0");
    check_key(text, "predict_prefetch", "0");
    check_key(text, "predict_log", "0");
    check_key(text, "predict_spec_max", "0");
    check_key(text, "prefetch_sync", "0");
    check_key(text, "dense_weights", "anon");
    check_key(text, "drop_cold_frac", "0");
    check_key(text, "drop_renorm", "0");
    check_key(text, "drop_prefill", "0");
    check_key(text, "substitute_lambda", "0");
    check_key(text, "temp", "0");
    check_key(text, "top_k", "40");
    check_key(text, "top_p", "0.95");
    check_key(text, "seed", "42");
    check_key(text, "compute_trace_layers", "1");
    check_key(text, "spec", "off");
    check_key(text, "spec_draft_max", "0");
    check_key(text, "mtp_p_min", "0");
    check_key(text, "ngram_min_match", "0");
    check_key(text, "route_trace", "0");
    check_key(text, "io_trace", "0");
    check_key(text, "compute_trace", "0");
    check_key(text, "cache_policy", "lru");
    tm_buffer_free(&out);
    /* the frequency policy, as --cache-policy freq names it */
    c.cache_frequency = true;
    tm_buffer_init(&out);
    tm_csv_format_preamble(&out, &c);
    check_key(tm_buffer_text(&out), "cache_policy", "freq");
    tm_buffer_free(&out);
    /* drafting: the source, its draft width and, for n-gram, its shortest match */
    c.spec = "ngram";
    c.spec_draft_max = 4;
    c.ngram_min_match = 5;
    tm_buffer_init(&out);
    tm_csv_format_preamble(&out, &c);
    check_key(tm_buffer_text(&out), "spec", "ngram");
    check_key(tm_buffer_text(&out), "spec_draft_max", "4");
    check_key(tm_buffer_text(&out), "ngram_min_match", "5");
    check_key(tm_buffer_text(&out), "mtp_p_min", "0");
    tm_buffer_free(&out);
    /* the head's probability floor, as --mtp-p-min gave it */
    c.spec = "mtp";
    c.ngram_min_match = 0;
    c.mtp_p_min = 0.25f;
    tm_buffer_init(&out);
    tm_csv_format_preamble(&out, &c);
    check_key(tm_buffer_text(&out), "spec", "mtp");
    check_key(tm_buffer_text(&out), "mtp_p_min", "0.25");
    check_key(tm_buffer_text(&out), "ngram_min_match", "0");
    tm_buffer_free(&out);
}

static void test_row(void)
{
    /* the contract's header, column by column */
    const char *want_header =
        "step,steps,wall_ms,io_ms,compute_ms,read_bytes,cache_hit_pct,stall_ms,mgmt_ms,majflt,cpu_ms,"
        "dense_resident_frac,turn,majflt_mib,cache_budget_mib,rss_mib,rss_anon_mib,rss_file_mib,swap_mib,"
        "mem_available_mib,mem_free_mib,swap_free_mib,loop_overhead_ms,mtp_batch,mtp_draft_ms,drain_ms,"
        "adopt_ms,ra_issue_ms,ra_wd_ms";
    CHECK(strcmp(tm_csv_header, want_header) == 0);
    tm_token t = {.step = 3, .steps = 128, .decoded = true, .wall_ms = 12.5, .io_ms = 7.25, .compute_ms = 4.0,
                  .mgmt_ms = 1.25, .stall_ms = 0.0, .read_bytes = 1048576, .cache_hit_pct = 62.5, .majflt = 256,
                  .cpu_ms = 30.0, .dense_resident_frac = 0.75, .loop_overhead_ms = 0.125,
                  .ra_issue_ms = 0.5, .ra_wd_ms = 0.25, .batch = 1};
    tm_memory m = {.rss_mib = 100.5, .rss_anon_mib = 60.0, .rss_file_mib = 40.5, .swap_mib = 0.0,
                   .mem_available_mib = 5000.0, .mem_free_mib = 1000.0, .swap_free_mib = 2048.0};
    tm_buffer out;
    tm_buffer_init(&out);
    tm_csv_format_row(&out, 0, &t, &m, 4000.0, 4096);
    /* majflt_mib = 256 x 4096 / 2^20 = 1 */
    const char *want = "3,128,12.500,7.250,4.000,1048576,62.50,0.000,1.250,256,30.000,0.750,0,1.000,4000.0,100.5,60.0,"
                       "40.5,0.0,5000.0,1000.0,2048.0,0.125,1,0.000,0,0,0.500,0.250\n";
    CHECK_MSG(strcmp(tm_buffer_text(&out), want) == 0, "row:\n%s\nwant:\n%s", tm_buffer_text(&out), want);
    size_t commas = 0;
    for (const char *c = want_header; *c; c++)
        commas += *c == ',';
    size_t row_commas = 0;
    for (const char *c = tm_buffer_text(&out); *c; c++)
        row_commas += *c == ',';
    CHECK(commas == 28 && row_commas == commas);
    /* no cache: the sentinel as the readers compare it */
    tm_buffer_clear(&out);
    t.cache_hit_pct = -1.0;
    tm_csv_format_row(&out, 0, &t, &m, 4000.0, 4096);
    CHECK_MSG(strncmp(tm_buffer_text(&out), "3,128,12.500,7.250,4.000,1048576,-1.0,0.000,", 44) == 0, "row: %s",
              tm_buffer_text(&out));
    /* a verify decode's first token: the group's size and its drafting
     * time (columns 24 and 25); a later token of the group: 0 */
    tm_buffer_clear(&out);
    t.batch = 3;
    t.draft_ms = 0.25;
    tm_csv_format_row(&out, 0, &t, &m, 4000.0, 4096);
    CHECK_MSG(strstr(tm_buffer_text(&out), ",2048.0,0.125,3,0.250,0,0,0.500,0.250\n") != NULL, "row: %s",
              tm_buffer_text(&out));
    tm_buffer_clear(&out);
    t.batch = 0;
    t.draft_ms = 0.0;
    tm_csv_format_row(&out, 0, &t, &m, 4000.0, 4096);
    CHECK_MSG(strstr(tm_buffer_text(&out), ",2048.0,0.125,0,0.000,0,0,0.500,0.250\n") != NULL, "row: %s",
              tm_buffer_text(&out));
    tm_buffer_free(&out);
}

static void test_summary(void)
{
    tm_summary s;
    memset(&s, 0, sizeof s);
    s.turn = 0;
    s.n_prompt = 10;
    s.load_s = 1.5;
    s.prefill.n_tokens = 10;
    s.prefill.wall_ms = 200.0;
    s.prefill.cpu_ms = 700.0;
    s.prefill.read_bytes = 5u << 20;
    s.prefill.io_ms = 120.0;
    s.prefill.stall_ms = 0.0;
    s.prefill.mgmt_ms = 8.0;
    s.decode.tokens = 4;
    s.decode.decoded = 4;
    s.decode.wall_ms = 500.0;
    s.decode.io_ms = 200.0;
    s.decode.compute_ms = 260.0;
    s.decode.mgmt_ms = 40.0;
    s.decode.cpu_ms = 1600.0;
    s.decode.majflt = 6;
    s.decode.read_bytes = 8u << 20;
    s.decode.loop_overhead_ms = 3.0;
    s.decode.evictions = 9;
    s.decode.rereads = 2;
    s.decode.prefetch_bytes = 1u << 20;
    s.decode.prefetched = 4;
    s.decode.prefetch_useful = 3;
    s.tail_ms = 1.0;
    s.ttft_s = 0.25;
    s.cache_hit_pct = 80.0;
    s.cache_resident_mib = 3990.5;
    s.cache_budget_mib = 4000.0;
    s.token_demand_mib = 250.25;
    s.layer_demand_mib = 5.5;
    s.experts_routed = 1152;
    tm_buffer out;
    tm_buffer_init(&out);
    tm_csv_format_summary(&out, &s);
    const char *text = tm_buffer_text(&out);
    CHECK(strncmp(text, "# summary ", 10) == 0 && text[out.length - 1] == '\n' && !strchr(text, '\n')[1]);
    check_key(text, "tokens", "4");
    check_key(text, "s/tok", "0.1250");        /* 0.5 s / 4 */
    check_key(text, "tok/s", "8.000");
    check_key(text, "read_MiB", "8.000");
    check_key(text, "io_s", "0.2000");
    check_key(text, "compute_s/tok", "0.0650");
    check_key(text, "io_s/tok", "0.0500");
    check_key(text, "cache_hit_pct", "80.00");
    check_key(text, "n_prompt", "10");
    check_key(text, "load_s", "1.500");
    check_key(text, "prefill_s", "0.2000");
    check_key(text, "prefill_tps", "50.00");
    check_key(text, "ttft_s", "0.2500");
    check_key(text, "stall_s/tok", "0.0000");
    check_key(text, "mgmt_s/tok", "0.0100");
    check_key(text, "cache_resident_MiB", "3990.5");
    check_key(text, "cache_budget_MiB", "4000.0");
    check_key(text, "majflt/tok", "1.50");
    check_key(text, "cpu_s/tok", "0.4000");
    check_key(text, "token_demand_MiB", "250.250");
    check_key(text, "layer_demand_MiB", "5.500");
    check_key(text, "experts_routed", "1152");
    check_key(text, "loop_overhead_s/tok", "0.0010"); /* (3 + the 1 ms tail) / 4 */
    check_key(text, "evictions", "9");
    check_key(text, "rereads", "2");
    check_key(text, "spec_read_MiB", "1.000"); /* the readers' names */
    check_key(text, "spec_experts", "4");
    check_key(text, "spec_useful", "3");
    check_key(text, "prefetch_MiB", "1.000");
    check_key(text, "prefetched", "4");
    check_key(text, "prefetch_useful", "3");
    check_key(text, "prefill_cpu_s", "0.7000");
    check_key(text, "prefill_read_mib", "5.000");
    check_key(text, "prefill_io_s", "0.1200");
    check_key(text, "prefill_stall_s", "0.0000");
    check_key(text, "prefill_mgmt_s", "0.0080");
    check_key(text, "turn", "0");
    /* features this engine does not have: their off values */
    const char *zero[] = {"experts_dropped", "experts_reranked", "experts_substituted", "row_table_MiB",
                          "row_resident_MiB", "row_rows", "row_reads", "row_read_MiB", "row_evictions",
                          "row_io_errors", "drain_s/tok", "adopt_s/tok", "ra_committed", "ra_passthrough",
                          "ra_gemv_ms/tok", "ra_issue_ms/tok", "ra_wd_ms/tok", "prefill_dev_tokens",
                          "prefill_dev_nodes", "prefill_dev_read_mib", "prefill_dev_stall_s"};
    for (size_t i = 0; i < sizeof zero / sizeof zero[0]; i++)
        check_key(text, zero[i], "0");
    check_key(text, "ra_agree_pct", "-1");
    tm_buffer_clear(&out);
    s.cache_hit_pct = -1.0;
    tm_csv_format_summary(&out, &s);
    check_key(tm_buffer_text(&out), "cache_hit_pct", "-1.0");
    text = tm_buffer_text(&out);
    /* the speculation keys exist only under --mtp / --ngram */
    char value[64];
    CHECK(!value_of(text, "mtp_drafted", value, sizeof value) && !value_of(text, "drafted_steps", value, sizeof value));
    /* with drafting: 4 tokens from 3 decodes, 2 of them verify batches of
     * 5 drafts with 1 accepted; 0.5 ms of drafting over 4 tokens */
    tm_buffer_clear(&out);
    s.drafting = true;
    s.spec.verify_batches = 2;
    s.spec.drafted = 5;
    s.spec.accepted = 1;
    s.decode.decodes = 3;
    s.decode.draft_ms = 0.5;
    tm_csv_format_summary(&out, &s);
    text = tm_buffer_text(&out);
    check_key(text, "mtp_drafted", "5");
    check_key(text, "mtp_accepted", "1");
    check_key(text, "mtp_decodes", "3");
    check_key(text, "mtp_draft_s/tok", "0.000125");
    check_key(text, "drafted_steps", "2");
    check_key(text, "turn", "0");
    tm_buffer_free(&out);
}

static void test_memory(void)
{
    tm_memory m;
    memset(&m, 0, sizeof m);
    tm_memory_parse_status("Name:\tbmoe-cli\nVmPeak:\t  9000 kB\nVmRSS:\t  2048 kB\nRssAnon:\t  1536 kB\n"
                           "RssFile:\t   512 kB\nRssShmem:\t 0 kB\nVmSwap:\t  1024 kB\n",
                           &m);
    CHECK(m.rss_mib == 2.0 && m.rss_anon_mib == 1.5 && m.rss_file_mib == 0.5 && m.swap_mib == 1.0);
    tm_memory_parse_meminfo("MemTotal:  16384000 kB\nMemFree:    1024000 kB\nMemAvailable:  8192000 kB\n"
                            "SwapTotal: 0 kB\nSwapFree:    512 kB\n",
                            &m);
    CHECK(m.mem_free_mib == 1000.0 && m.mem_available_mib == 8000.0 && m.swap_free_mib == 0.5);
    tm_memory live;
    tm_memory_sample(&live);
    CHECK(live.rss_mib > 0.0 && live.mem_available_mib > 0.0); /* Linux reports both */
}

static void test_layout(void)
{
    /* two layers: 400 bytes per expert in layer 0, none in layer 1 */
    uint64_t experts[2] = {400, 0}, dense[2] = {1016, 2000};
    tm_layout layout = {true, 2, experts, dense};
    CHECK(tm_layout_token_demand(&layout, 2) == 800 && tm_layout_layer_demand(&layout, 2) == 800);
    layout.known = false;
    CHECK(tm_layout_token_demand(&layout, 2) == 0 && tm_layout_layer_demand(&layout, 2) == 0);
}

static void test_sink(void)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tm-csv-%d.csv", test_tmp_dir(), (int)getpid());
    FILE *old = fopen(path, "wb");
    fputs("old content\n", old);
    fclose(old);
    tm_csv csv;
    bmoe_error error = {0};
    CHECK(tm_csv_open(&csv, path, &error) == 0);
    tm_config c = hand_config();
    CHECK(tm_csv_begin(&csv, &c) == 0);
    CHECK(tm_csv_begin(&csv, &c) == 0); /* once per file */
    tm_csv_discard(&csv);
    char *kept = test_read_file(path, NULL);
    CHECK(kept && strcmp(kept, "old content\n") == 0); /* discarding touches nothing */
    free(kept);

    CHECK(tm_csv_open(&csv, path, &error) == 0);
    tm_csv_begin(&csv, &c);
    tm_csv_begin(&csv, &c);
    tm_token t = {.step = 1, .steps = 1, .cache_hit_pct = -1, .dense_resident_frac = -1};
    tm_memory m = {0};
    CHECK(tm_csv_row(&csv, 0, &t, &m, 0.0, 4096) == 0);
    CHECK(tm_csv_commit(&csv, &error) == 0);
    char *text = test_read_file(path, NULL);
    CHECK(text && strncmp(text, "# bmoe_metrics v2\n", 18) == 0);
    int preambles = 0, headers = 0;
    for (const char *p = text; p && (p = strstr(p, "# bmoe_metrics v2")); p++)
        preambles++;
    for (const char *p = text; p && (p = strstr(p, "\nstep,steps,")); p++)
        headers++;
    CHECK(preambles == 1 && headers == 1);
    free(text);
    unlink(path);

    CHECK(tm_csv_open(&csv, "/dev/null", &error) != 0 && error.message[0]); /* a device is refused */
    char missing[1100];
    snprintf(missing, sizeof missing, "%s/no-such-folder/x.csv", test_tmp_dir());
    CHECK(tm_csv_open(&csv, missing, &error) != 0 && error.message[0]);
}

int main(void)
{
    test_preamble();
    test_row();
    test_summary();
    test_memory();
    test_layout();
    test_sink();
    return test_finish();
}
