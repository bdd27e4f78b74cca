/* The reference system's own command lines run against bmoe-cli: every
 * flag of the reference CLI (seed-system.md section 2, HEAD and LATER) is
 * either accepted and does what it says, or refused in one line that names
 * it and says why (never as an unknown flag); the reference's exit status
 * (2 for contradictory switches and a bad --dense-weights value, 1 for the
 * rest); the environment overrides, a typed flag winning even when it says
 * the default. Expected values come from the flags' definitions (a CSV
 * preamble states the resolved configuration), never from the runs being
 * checked. */
#include <math.h>
#include <sys/stat.h>

#include "cli_run.h"

static char dir[1100], model[1200], csv[1200];

/* stderr without the load-time streaming line. */
static const char *error_line(const cli_result *r)
{
    if (strncmp(r->err, CLI_STREAMING_LINE, strlen(CLI_STREAMING_LINE)) == 0 && strchr(r->err, '\n'))
        return strchr(r->err, '\n') + 1;
    return r->err;
}

/* Flags bmoe does not have: refused with exit 1, one line naming the flag,
 * and no "unknown". */
static void test_refused_flags(void)
{
    static const struct {
        const char *flag, *value, *says;
    } refused[] = {
        {"--io-two-wave", NULL, "not implemented"},        {"--prefetch-sync", NULL, "not implemented"},
        {"--release-mmap", NULL, "not implemented"},       {"--row-stream", NULL, "not implemented"},
        {"--row-stream-mb", "64", "not implemented"},      {"--tensor-overrides", "x", "needs"},
        {"--dense-on-device", NULL, "needs"},              {"--prefill-device", "npu", "needs"},
        {"--prefill-min-tokens", "32", "needs"},           {"--prefill-loaders", "8", "needs"},
        {"--prefill-routed", NULL, "needs"},               {"--no-prefill-routed", NULL, "needs"},
        {"--decide-probe", NULL, "needs"},                 {"--gpu-layers", "4", "needs"},
        {"--dense-weights", "ahwb", "Android"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        const char *args[12] = {"-m", model, "-p", "hi", "-n", "1", refused[i].flag, refused[i].value, NULL};
        cli_result r;
        if (cli_run(args, &r) != 0) {
            CHECK(0);
            continue;
        }
        CHECK_MSG(r.exit_code == 1 && cli_one_line_error(&r) && strstr(r.err, refused[i].flag) &&
                      strstr(r.err, refused[i].says) && !strstr(r.err, "unknown") && r.out_length == 0,
                  "%s: exit %d, stderr %s", refused[i].flag, r.exit_code, r.err);
        cli_result_free(&r);
    }
}

/* A run that must succeed; its stdout text (the end-of-run lines cut off,
 * kept in report when asked). */
static char *run_text(const char *const *args, char **report)
{
    cli_result r;
    if (cli_run(args, &r) != 0) {
        CHECK(0);
        return NULL;
    }
    CHECK_MSG(r.exit_code == 0, "%s %s ...: exit %d: %s", args[0], args[1], r.exit_code, r.err);
    cli_cut_report(&r);
    char *text = r.out;
    r.out = NULL;
    if (report) {
        *report = r.report;
        r.report = NULL;
    }
    cli_result_free(&r);
    return text;
}

/* "key=<value>" of the CSV's preamble, as a string (or ""). */
static void preamble_value(const char *key, char *value, size_t size)
{
    value[0] = '\0';
    char *text = test_read_file(csv, NULL);
    char pattern[64];
    snprintf(pattern, sizeof pattern, " %s=", key);
    const char *at = text ? strstr(text, pattern) : NULL;
    if (at) {
        at += strlen(pattern);
        size_t n = strcspn(at, " \n");
        snprintf(value, size, "%.*s", (int)(n < size ? n : size - 1), at);
    }
    free(text);
}

/* The reference's flags bmoe has, and what each does. */
static void test_accepted_flags(void)
{
    const char *plain[] = {"-m", model, "-p", "Hello", "-n", "6", "-t", "1", NULL};
    char *want = run_text(plain, NULL);
    /* --force-cache, --devices, --gpu-layers 0, --n-expert-used 0: the same run */
    const char *same[][16] = {
        {"-m", model, "-p", "Hello", "-n", "6", "-t", "1", "--force-cache", NULL},
        {"-m", model, "-p", "Hello", "-n", "6", "-t", "1", "--devices", "cpu", "--gpu-layers", "0", NULL},
        {"-m", model, "-p", "Hello", "-n", "6", "-t", "1", "--devices", "all", NULL},
        {"-m", model, "-p", "Hello", "-n", "6", "-t", "1", "--n-expert-used", "0", NULL},
        {"-m", model, "-p", "Hello", "-n", "6", "-t", "1", "--threads-batch", "2", NULL},
        {"-m", model, "-p", "Hello", "-n", "6", "-t", "1", "--no-warm-dense", NULL},
        {"-m", model, "-p", "Hello", "-n", "6", "-t", "1", "--dense-odirect", NULL},
        {"-m", model, "-p", "Hello", "-n", "6", "-t", "1", "--moe-stream", "--cache-mb", "0", "--load-all", NULL},
        {"-m", model, "-p", "Hello", "-n", "6", "-t", "1", "--moe-stream", "--preload-experts", NULL},
    };
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        char *got = run_text(same[i], NULL);
        CHECK_MSG(want && got && strcmp(want, got) == 0, "%s %s: the text changed", same[i][8], same[i][9]);
        free(got);
    }
    free(want);

    /* the dense aliases are the reference's mmap and anon */
    const char *mmap_alias[] = {"-m", model, "-p", "Hi", "-n", "1", "--no-warm-dense", "--csv", csv, NULL};
    char value[64];
    free(run_text(mmap_alias, NULL));
    preamble_value("dense_weights", value, sizeof value);
    CHECK_MSG(strcmp(value, "mmap") == 0, "--no-warm-dense: dense_weights=%s", value);
    const char *stage[] = {"-m", model, "-p", "Hi", "-n", "1", "--moe-stream", "--load-all", "--csv", csv, NULL};
    free(run_text(stage, NULL));
    preamble_value("load_all", value, sizeof value);
    CHECK_MSG(strcmp(value, "1") == 0, "--load-all: load_all=%s", value);
    const char *preload[] = {"-m", model, "-p", "Hi", "-n", "1", "--moe-stream", "--preload-experts", "--csv", csv,
                             NULL};
    free(run_text(preload, NULL));
    preamble_value("load_all", value, sizeof value);
    CHECK_MSG(strcmp(value, "0") == 0, "--preload-experts: load_all=%s", value);
    preamble_value("preload_experts", value, sizeof value);
    CHECK_MSG(strcmp(value, "1") == 0, "--preload-experts: preload_experts=%s", value);

    /* --load-all reads every expert of every layer at each token: with no
     * cache a token reads n_expert / n_used times what routing alone reads */
    char *routed_report = NULL, *all_report = NULL;
    const char *routed[] = {"-m", model, "-p", "Hi", "-n", "4", "--moe-stream", "--cache-mb", "0", NULL};
    const char *all[] = {"-m", model, "-p", "Hi", "-n", "4", "--moe-stream", "--cache-mb", "0", "--load-all", NULL};
    free(run_text(routed, &routed_report));
    free(run_text(all, &all_report));
    double routed_mib = -1, all_mib = -1;
    const char *a = routed_report ? strstr(routed_report, "MiB (") : NULL;
    const char *b = all_report ? strstr(all_report, "MiB (") : NULL;
    if (a && b) {
        routed_mib = atof(a + 5);
        all_mib = atof(b + 5);
    }
    /* tiny-qwen3moe with 16 experts, 4 used */
    CHECK_MSG(routed_mib > 0 && fabs(all_mib / routed_mib - 4.0) < 0.01, "--load-all: %.3f MiB/token, routed %.3f",
              all_mib, routed_mib);
    free(routed_report);
    free(all_report);

    /* --list-archs: every architecture, one a line */
    const char *list[] = {"--list-archs", NULL};
    cli_result r;
    if (cli_run(list, &r) == 0) {
        CHECK(r.exit_code == 0 &&
              strcmp(r.out, "qwen3moe\ngpt-oss\nllama\nlfm2moe\ngemma4\nqwen35moe\nqwen2moe\nolmoe\nbailingmoe2\nglm4moe\n"
                            "deepseek2\ndeepseek4\n") == 0);
        cli_result_free(&r);
    }
}

/* --threads-batch: the prompt's prefill on another thread count gives the
 * same logits bit for bit (bmoe's logits do not depend on the threads). */
static void test_threads_batch(void)
{
    char one[1300], two[1300];
    snprintf(one, sizeof one, "%s/threads-1.f32", dir);
    snprintf(two, sizeof two, "%s/threads-batch-2.f32", dir);
    const char *a[] = {"-m", model, "--prompt-ids", "1,2,3,4,5,6,7,8", "--force-ids", "9,10", "-t", "1",
                       "--logits-out", one, NULL};
    const char *b[] = {"-m", model, "--prompt-ids", "1,2,3,4,5,6,7,8", "--force-ids", "9,10", "-t", "1",
                       "--threads-batch", "2", "--logits-out", two, NULL};
    free(run_text(a, NULL));
    free(run_text(b, NULL));
    size_t la = 0, lb = 0;
    char *x = test_read_file(one, &la), *y = test_read_file(two, &lb);
    CHECK(x && y && la > 0 && la == lb && memcmp(x, y, la) == 0);
    free(x);
    free(y);
}

/* Exit statuses as the reference's. */
static void test_exit_codes(void)
{
    static const struct {
        const char *args[12];
        int exit_code;
        const char *says;
    } cases[] = {
        {{"-m", "M", "--no-such-flag", NULL}, 1, "unknown flag --no-such-flag"},
        {{"-m", "M", "-n", NULL}, 1, "needs a value"},
        {{"-m", "M", "-n", "ten", NULL}, 1, "not an integer"},
        {{"-m", "M", "--temp", "0x1p1", NULL}, 1, "not a finite number"},
        {{"-m", "M", "--temp", "inf", NULL}, 1, "not a finite number"},
        {{"-p", "x", NULL}, 1, "no model"},
        {{"-m", "M", "--chunks", "2", NULL}, 1, "--chunks needs --ppl"},
        {{"-m", "M", "--overlap", NULL}, 1, "needs --moe-stream"},
        {{"-m", "M", "-p", "a", "-f", "b", NULL}, 2, "cannot be used together"},
        {{"-m", "M", "--moe-stream", "--no-moe-stream", NULL}, 2, "exclude each other"},
        {{"-m", "M", "--moe-stream", "--prefetch", "1", "--predict-prefetch", NULL}, 2, "exclude each other"},
        {{"-m", "M", "--dense-weights", "fast", NULL}, 2, "--dense-weights"},
        {{"-m", "M", "--dense-weights", "mmap", "--dense-odirect", NULL}, 2, "both set the dense weights"},
        {{"-m", "M", "--no-warm-dense", "--dense-odirect", NULL}, 2, "both set the dense weights"},
        {{"-m", "M", "--session", "--ppl", "x", NULL}, 2, "different jobs"},
        {{"-m", "M", "--session", "--ppl-list", "x", NULL}, 2, "different jobs"},
        {{"-m", "M", "-p", "x", "--ppl-step", NULL}, 1, "--ppl-step needs --ppl"},
        {{"-m", "M", "--ppl-skip", "2", NULL}, 1, "--ppl-skip needs --ppl"},
        {{"-m", "M", "--ppl-choices", "a,b", NULL}, 1, "needs -p"},
        {{"-m", "M", "--ppl", "x", "--ppl-list", "y", NULL}, 1, "cannot be used together"},
        {{"-m", "M", "--prompt-ids", "1", "-p", "x", NULL}, 2, "cannot be combined"},
        {{"-m", "M", "--decide-prefix-cache", "off", NULL}, 1, "needs --session"},
        {{"-m", "M", "--session", "--decide-prefix-cache", "off", NULL}, 1, "needs --decide"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *args[12];
        for (int k = 0; k < 12; k++)
            args[k] = cases[i].args[k] && strcmp(cases[i].args[k], "M") == 0 ? model : cases[i].args[k];
        cli_result r;
        if (cli_run(args, &r) != 0) {
            CHECK(0);
            continue;
        }
        CHECK_MSG(r.exit_code == cases[i].exit_code && cli_one_line_error(&r) && strstr(r.err, cases[i].says),
                  "case %zu: exit %d (want %d), stderr %s", i, r.exit_code, cases[i].exit_code, r.err);
        cli_result_free(&r);
    }
    /* --help says so */
    const char *help[] = {"--help", NULL};
    cli_result r;
    if (cli_run(help, &r) == 0) {
        CHECK(r.exit_code == 0 && strstr(r.out, "exit status: 0 success; 1 ") && strstr(r.out, "; 2 switches"));
        cli_result_free(&r);
    }
}

/* Runs "VARIABLE=VALUE bmoe-cli ARGS --csv csv" and returns the preamble's key. */
static int run_with_environment(const char *assignment, const char *args, const char *key, char *value, size_t size,
                                cli_result *r)
{
    char script[3000];
    unlink(csv);
    snprintf(script, sizeof script, "%s \"$BMOE_CLI\" -m '%s' -p Hi -n 2 -t 1 %s --csv '%s'", assignment, model, args,
             csv);
    if (cli_run_shell(script, r) != 0)
        return -1;
    preamble_value(key, value, size);
    return 0;
}

/* The environment overrides, each against its flag's preamble key. */
static void test_environment(void)
{
    static const struct {
        const char *assignment, *args, *key, *want;
    } cases[] = {
        {"BMOE_CACHE_MB=18", "--moe-stream", "cache_mb", "18"},
        {"BMOE_CACHE_MB=18", "--moe-stream --cache-mb 27", "cache_mb", "27"},
        {"BMOE_CACHE_MB=auto", "--moe-stream", "cache_auto", "1"},
        {"BMOE_IO_THREADS=2", "--moe-stream", "io_threads", "2"},
        {"BMOE_IO_THREADS=2", "--moe-stream --io-threads 4", "io_threads", "4"}, /* typed, even the default */
        {"BMOE_OVERLAP=1", "--moe-stream", "overlap", "1"},
        {"BMOE_OVERLAP=0", "--moe-stream", "overlap", "0"},
        {"BMOE_PREFETCH=1", "--moe-stream --cache-mb 8", "prefetch", "1"},
        {"BMOE_PREFETCH=1", "--moe-stream --cache-mb 8 --prefetch 0", "prefetch", "0"},
        {"BMOE_N_EXPERT_USED=2", "", "n_expert_used", "2"},
        {"BMOE_N_EXPERT_USED=2", "--n-expert-used 0", "n_expert_used", "4"},
        {"BMOE_PREDICT_PREFETCH=7", "--moe-stream --cache-mb 8", "predict_prefetch", "1"},
        {"BMOE_PREDICT_LOG=0", "", "n_expert_used", "4"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char value[64];
        cli_result r;
        if (run_with_environment(cases[i].assignment, cases[i].args, cases[i].key, value, sizeof value, &r) != 0) {
            CHECK(0);
            continue;
        }
        CHECK_MSG(r.exit_code == 0 && strcmp(value, cases[i].want) == 0, "%s %s: %s=%s (want %s), exit %d: %s",
                  cases[i].assignment, cases[i].args, cases[i].key, value, cases[i].want, r.exit_code, r.err);
        cli_result_free(&r);
    }
    /* BMOE_PROGRESS=1: the per-token lines */
    char script[2000];
    snprintf(script, sizeof script, "BMOE_PROGRESS=1 \"$BMOE_CLI\" -m '%s' -p Hi -n 2 -t 1", model);
    cli_result r;
    if (cli_run_shell(script, &r) == 0) {
        CHECK(r.exit_code == 0 && strstr(r.out, "BMOE_PROGRESS {") && strstr(r.out, "=== perf ==="));
        cli_result_free(&r);
    }
    /* BMOE_PREDICT_LOG=1: the prediction probe's lines */
    snprintf(script, sizeof script, "BMOE_PREDICT_LOG=1 \"$BMOE_CLI\" -m '%s' -p Hi -n 4 -t 1", model);
    if (cli_run_shell(script, &r) == 0) {
        CHECK_MSG(r.exit_code == 0 && strstr(r.out, "\nmoe-predict: stale-gate ") && strstr(r.out, "  layer   stale"),
                  "BMOE_PREDICT_LOG=1: %s", r.out);
        cli_result_free(&r);
    }
    /* malformed values: one line naming the variable */
    static const char *const bad[] = {"BMOE_CACHE_MB=lots", "BMOE_IO_THREADS=99", "BMOE_OVERLAP=yes",
                                      "BMOE_PREFETCH=-1", "BMOE_N_EXPERT_USED=1.5", "BMOE_PREDICT_LOG=yes",
                                      "BMOE_PROGRESS=0x1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char variable[64];
        snprintf(variable, sizeof variable, "%.*s", (int)strcspn(bad[i], "="), bad[i]);
        snprintf(script, sizeof script, "%s \"$BMOE_CLI\" -m '%s' -p Hi -n 2 --moe-stream", bad[i], model);
        if (cli_run_shell(script, &r) != 0) {
            CHECK(0);
            continue;
        }
        CHECK_MSG(r.exit_code == 1 && cli_one_line_error(&r) && strstr(error_line(&r), variable),
                  "%s: exit %d, stderr %s", bad[i], r.exit_code, r.err);
        cli_result_free(&r);
    }
}

/* --decide-prefix-cache off: a decide never reuses the kept prefix. */
static void test_decide_prefix_cache(void)
{
    for (int off = 0; off < 2; off++) {
        char script[3000];
        snprintf(script, sizeof script,
                 "printf '%%s\\n' '{\"cmd\":\"decide\",\"id\":1,\"prefix\":\"The weather today is\",\"choices\":[\"a\",\"b\"]}' "
                 "'{\"cmd\":\"decide\",\"id\":2,\"prefix\":\"The weather today is\",\"suffix\":\" cold?\","
                 "\"choices\":[\"a\",\"b\"]}' | \"$BMOE_CLI\" -m '%s' -t 1 --session --decide%s",
                 model, off ? " --decide-prefix-cache off" : "");
        cli_result r;
        if (cli_run_shell(script, &r) != 0) {
            CHECK(0);
            continue;
        }
        const char *second = strstr(r.out, "BMOE_DECIDE {\"id\":2");
        const char *reused = second ? strstr(second, "\"n_reused\":") : NULL;
        int n_reused = reused ? atoi(reused + strlen("\"n_reused\":")) : -1;
        CHECK_MSG(r.exit_code == 0 && (off ? n_reused == 0 : n_reused > 0), "prefix cache %s: n_reused %d: %s",
                  off ? "off" : "auto", n_reused, r.out);
        cli_result_free(&r);
    }
}

int main(void)
{
    snprintf(dir, sizeof dir, "%s/cli-reference", test_tmp_dir());
    mkdir(dir, 0755);
    snprintf(model, sizeof model, "%s/model.gguf", dir);
    snprintf(csv, sizeof csv, "%s/run.csv", dir);
    char command[2600];
    snprintf(command, sizeof command, "'%s/bmoe-mkmodel' --quiet --shape tiny-qwen3moe --experts 16 -o '%s'",
             BMOE_BIN_DIR, model);
    CHECK(system(command) == 0);
    test_refused_flags();
    test_accepted_flags();
    test_threads_batch();
    test_exit_codes();
    test_environment();
    test_decide_prefix_cache();
    return test_finish();
}
