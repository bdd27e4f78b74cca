/* The parameter table as bmoe-cli shows it: --help lists the basic and
 * advanced flags of the table and nothing else, --help-all every flag,
 * --describe-params every row, docs/flags.md is what --help-markdown
 * writes, --show-config says each value's source (default, flag,
 * environment, plan); and the planner's flags (--plan, --plan-explain,
 * --auto and its plan: line, pins kept, the probe switches' rules). The
 * expected sets come from the table itself (the source the printers must
 * follow), never from the output being checked. */
#include <cjson/cJSON.h>
#include <sys/stat.h>

#include "cli_run.h"
#include "params.h"

static char dir[1100], model[1200];

#define MAX_FLAGS 512

/* The flag spellings on the flag lines of a help text: a line that starts
 * with two spaces and a '-' after at most six spaces, its leading
 * "-x, --long, --alias" tokens. */
static int help_flags(const char *text, char flags[][48], int max)
{
    int n = 0;
    for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (strncmp(line, "  ", 2) != 0)
            continue;
        const char *c = line;
        int spaces = 0;
        while (*c == ' ')
            c++, spaces++;
        if (spaces > 6 || *c != '-')
            continue;
        for (;;) {
            size_t length = strcspn(c, " ,\n");
            if (length == 0 || *c != '-' || n >= max)
                break;
            snprintf(flags[n++], 48, "%.*s", (int)length, c);
            c += length;
            if (*c != ',')
                break;
            c += 2; /* ", " */
        }
    }
    return n;
}

static bool in_list(char flags[][48], int n, const char *flag)
{
    for (int i = 0; i < n; i++)
        if (strcmp(flags[i], flag) == 0)
            return true;
    return false;
}

/* Every spelling of row in flags, or (expect false) none. */
static void check_row_listed(const param_def *row, char flags[][48], int n, bool expect, const char *which)
{
    const char *spellings[3] = {row->flag, row->short_flag, row->alias};
    for (int s = 0; s < 3; s++)
        if (spellings[s])
            CHECK_MSG(in_list(flags, n, spellings[s]) == expect, "%s %s %s", which,
                      expect ? "lacks" : "lists", spellings[s]);
}

static void test_help(void)
{
    static char flags[MAX_FLAGS][48], all_flags[MAX_FLAGS][48];
    const char *help[] = {"--help", NULL}, *help_all[] = {"--help-all", NULL};
    cli_result r, all;
    if (cli_run(help, &r) != 0 || cli_run(help_all, &all) != 0) {
        CHECK(0);
        return;
    }
    CHECK(r.exit_code == 0 && all.exit_code == 0 && r.err_length == 0);
    int n = help_flags(r.out, flags, MAX_FLAGS), n_all = help_flags(all.out, all_flags, MAX_FLAGS);
    size_t count = 0;
    const param_def *rows = params_table(&count);
    int expected = 0, expected_all = 0;
    for (size_t i = 0; i < count; i++) {
        /* bmoe-cli's rows: those of its jobs, and those that choose the job themselves (another
         * program's, such as bmoe-server's --port, are that program's help) */
        bool cli = rows[i].jobs == 0 || (rows[i].jobs & PARAM_JOBS_CLI) != 0;
        bool basic = cli && rows[i].id != P_UNAVAILABLE && rows[i].level <= PARAM_ADVANCED;
        check_row_listed(&rows[i], flags, n, basic, "--help");
        check_row_listed(&rows[i], all_flags, n_all, cli, "--help-all");
        int spellings = 1 + (rows[i].short_flag != NULL) + (rows[i].alias != NULL);
        expected += basic ? spellings : 0;
        expected_all += cli ? spellings : 0;
    }
    /* nothing listed that is not a row */
    CHECK_MSG(n == expected, "--help lists %d flag spellings, the table's basic and advanced rows have %d", n,
              expected);
    CHECK_MSG(n_all == expected_all, "--help-all lists %d flag spellings, the table has %d", n_all, expected_all);
    CHECK(strstr(all.out, "--io-two-wave") && strstr(all.out, "not implemented in bmoe"));
    /* --mtp-p-min is a flag of bmoe's now, listed with the advanced ones */
    CHECK(strstr(r.out, "--mtp-p-min P"));
    cli_result_free(&r);
    cli_result_free(&all);
}

static void test_describe_params(void)
{
    const char *args[] = {"--describe-params", NULL};
    cli_result r;
    if (cli_run(args, &r) != 0) {
        CHECK(0);
        return;
    }
    CHECK(r.exit_code == 0 && r.err_length == 0);
    cJSON *document = cJSON_Parse(r.out);
    CHECK_MSG(document != NULL, "--describe-params is not JSON: %.200s", r.out);
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(document, "params");
    size_t count = 0;
    const param_def *rows = params_table(&count);
    CHECK(cJSON_IsArray(list) && (size_t)cJSON_GetArraySize(list) == count);
    size_t i = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, list)
    {
        if (i >= count)
            break;
        const param_def *row = &rows[i++];
        const cJSON *flags = cJSON_GetObjectItemCaseSensitive(item, "flags");
        const cJSON *first = cJSON_GetArrayItem(flags, 0);
        CHECK_MSG(cJSON_IsString(first) && strcmp(first->valuestring, row->flag) == 0, "row %zu's flag", i);
        const cJSON *key = cJSON_GetObjectItemCaseSensitive(item, "key");
        if (row->id == P_UNAVAILABLE) {
            CHECK(key == NULL && cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(item, "available")));
            continue;
        }
        CHECK_MSG(cJSON_IsString(key) && strcmp(key->valuestring, row->key) == 0 &&
                      strspn(row->key, "abcdefghijklmnopqrstuvwxyz_") == strlen(row->key),
                  "%s: key", row->flag);
        CHECK_MSG(params_find_key(row->key) == row, "%s: key %s is not unique", row->flag, row->key);
        const cJSON *lossy = cJSON_GetObjectItemCaseSensitive(item, "lossy");
        CHECK_MSG(cJSON_IsBool(lossy) && cJSON_IsTrue(lossy) == row->lossy, "%s: lossy", row->flag);
        const cJSON *level = cJSON_GetObjectItemCaseSensitive(item, "level");
        CHECK(cJSON_IsString(level) && strcmp(level->valuestring, params_level_name(row->level)) == 0);
    }
    /* the lossy levers the lossy issue names are marked so */
    const char *lossy_flags[] = {"--drop-cold-experts", "--expert-substitute", "--route-ahead", "--n-expert-used"};
    for (size_t k = 0; k < sizeof lossy_flags / sizeof lossy_flags[0]; k++)
        CHECK_MSG(params_find_flag(lossy_flags[k]) && params_find_flag(lossy_flags[k])->lossy, "%s is lossy",
                  lossy_flags[k]);
    CHECK(params_find_flag("--cache-mb")->accepts_auto && !params_find_flag("--cache-mb")->lossy);
    cJSON_Delete(document);
    cli_result_free(&r);
}

/* docs/flags.md is --help-markdown's output, byte for byte. */
static void test_flag_reference(void)
{
    const char *args[] = {"--help-markdown", NULL};
    cli_result r;
    if (cli_run(args, &r) != 0) {
        CHECK(0);
        return;
    }
    size_t length = 0;
    char *file = cli_read_all(BMOE_MODELS_DIR "/../docs/flags.md", &length);
    CHECK_MSG(file != NULL, "docs/flags.md is missing (bmoe-cli --help-markdown > docs/flags.md)");
    CHECK_MSG(file && r.exit_code == 0 && length == r.out_length && memcmp(file, r.out, length) == 0,
              "docs/flags.md differs from bmoe-cli --help-markdown: regenerate it");
    free(file);
    cli_result_free(&r);
}

/* --show-config's value and source of key, from a run's stdout. */
static bool config_entry(const char *out, const char *key, double *number, char *text, size_t size,
                         char *source, size_t source_size)
{
    cJSON *document = cJSON_Parse(out);
    const cJSON *entry =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(document, "config"), key);
    const cJSON *value = cJSON_GetObjectItemCaseSensitive(entry, "value");
    const cJSON *from = cJSON_GetObjectItemCaseSensitive(entry, "source");
    bool found = entry && value && cJSON_IsString(from);
    if (found) {
        snprintf(source, source_size, "%s", from->valuestring);
        *number = cJSON_IsNumber(value) ? value->valuedouble : cJSON_IsTrue(value) ? 1 : 0;
        snprintf(text, size, "%s", cJSON_IsString(value) ? value->valuestring : "");
    }
    cJSON_Delete(document);
    return found;
}

static void expect_config(const char *out, const char *key, double number, const char *text, const char *source)
{
    double got = -12345;
    char got_text[128] = "", got_source[32] = "";
    bool found = config_entry(out, key, &got, got_text, sizeof got_text, got_source, sizeof got_source);
    CHECK_MSG(found, "--show-config lacks %s: %.300s", key, out);
    if (!found)
        return;
    CHECK_MSG(strcmp(got_source, source) == 0, "%s: source %s, want %s", key, got_source, source);
    if (text)
        CHECK_MSG(strcmp(got_text, text) == 0, "%s: value '%s', want '%s'", key, got_text, text);
    else
        CHECK_MSG(got == number, "%s: value %g, want %g", key, got, number);
}

static void test_show_config(void)
{
    char script[3000];
    snprintf(script, sizeof script,
             "BMOE_IO_THREADS=2 \"$BMOE_CLI\" -m '%s' -p hi --moe-stream --cache-mb 64 --temp 0.5 --show-config", model);
    cli_result r;
    if (cli_run_shell(script, &r) != 0) {
        CHECK(0);
        return;
    }
    CHECK_MSG(r.exit_code == 0 && r.err_length == 0, "exit %d: %s", r.exit_code, r.err);
    expect_config(r.out, "cache_mb", 64, NULL, "flag");
    expect_config(r.out, "moe_stream", 1, NULL, "flag");
    expect_config(r.out, "temperature", 0.5, NULL, "flag");
    expect_config(r.out, "io_threads", 2, NULL, "environment");
    /* a default: the table's own default text */
    expect_config(r.out, "cache_policy", 0, params_find_key("cache_policy")->default_text, "default");
    expect_config(r.out, "overlap", 0, NULL, "default");
    /* no model was loaded: no load lines, no generation */
    CHECK(!strstr(r.out, "generation:") && strstr(r.out, "\"args\""));
    cli_result_free(&r);

    /* the plan's values, typed ones pinned */
    snprintf(script, sizeof script,
             "XDG_CACHE_HOME='%s' \"$BMOE_CLI\" -m '%s' -p hi --auto --no-probe-io --no-probe-mem --moe-stream "
             "--cache-mb 3 --drop-cold-experts 0.5 --show-config",
             dir, model);
    if (cli_run_shell(script, &r) != 0) {
        CHECK(0);
        return;
    }
    CHECK_MSG(r.exit_code == 0, "exit %d: %s", r.exit_code, r.err);
    expect_config(r.out, "cache_mb", 3, NULL, "flag");
    expect_config(r.out, "moe_stream", 1, NULL, "flag");
    expect_config(r.out, "overlap", 1, NULL, "plan");
    expect_config(r.out, "drop_cold_experts", 0.5, NULL, "flag");
    cJSON *document = cJSON_Parse(r.out);
    const cJSON *plan = cJSON_GetObjectItemCaseSensitive(document, "plan");
    const cJSON *flags = cJSON_GetObjectItemCaseSensitive(plan, "flags");
    CHECK_MSG(cJSON_IsString(flags) && strstr(flags->valuestring, "--cache-mb 3") &&
                  !strstr(flags->valuestring, "drop") && !strstr(flags->valuestring, "substitute"),
              "the plan's flags: %s", cJSON_IsString(flags) ? flags->valuestring : "(none)");
    cJSON_Delete(document);
    cli_result_free(&r);
}

static void test_planner_flags(void)
{
    char script[3000];
    cli_result r;
    /* the tiny model fits: the plan declines streaming */
    snprintf(script, sizeof script,
             "XDG_CACHE_HOME='%s' \"$BMOE_CLI\" -m '%s' --plan --plan-explain --no-probe-io --no-probe-mem", dir,
             model);
    if (cli_run_shell(script, &r) == 0) {
        CHECK_MSG(r.exit_code == 0 && strncmp(r.out, "plan: fits, no prediction: --no-moe-stream\n", 43) == 0 &&
                      strstr(r.out, "\n  moe_stream = off (derived): ") &&
                      strstr(r.out, "\n  io_threads = 4 (unprobed): "),
                  "exit %d: %s%s", r.exit_code, r.out, r.err);
        cli_result_free(&r);
    }
    /* --auto runs the job and ends with the plan: line */
    snprintf(script, sizeof script,
             "XDG_CACHE_HOME='%s' \"$BMOE_CLI\" -m '%s' -p hi -n 2 -t 1 --auto --no-probe-io --no-probe-mem", dir,
             model);
    if (cli_run_shell(script, &r) == 0) {
        CHECK_MSG(r.exit_code == 0 && strstr(r.out, "\nplan: fits, no prediction (rates not probed), measured ") &&
                      strstr(r.out, "\nmode: resident baseline, dense anon, regime fits: ") &&
                      strstr(r.err, "plan: fits, no prediction: --no-moe-stream\n"),
                  "exit %d: %s%s", r.exit_code, r.out, r.err);
        cli_result_free(&r);
    }
    /* without --auto the planner's regime alone decides, and the mode: line names it; a typed
     * streaming flag is the user's choice, no regime */
    snprintf(script, sizeof script, "\"$BMOE_CLI\" -m '%s' -p hi -n 2 -t 1", model);
    if (cli_run_shell(script, &r) == 0) {
        CHECK_MSG(r.exit_code == 0 && strstr(r.out, "\nmode: resident baseline, dense anon, regime fits: ") &&
                      !strstr(r.out, "\nplan: "),
                  "exit %d: %s%s", r.exit_code, r.out, r.err);
        cli_result_free(&r);
    }
    snprintf(script, sizeof script, "\"$BMOE_CLI\" -m '%s' -p hi -n 2 -t 1 --moe-stream --cache-mb 1", model);
    if (cli_run_shell(script, &r) == 0) {
        CHECK_MSG(r.exit_code == 0 && strstr(r.out, "\nmode: expert streaming, cache 1 MiB, dense anon\n"),
                  "exit %d: %s%s", r.exit_code, r.out, r.err);
        cli_result_free(&r);
    }
    /* the planner's switches without the planner, and contradictions */
    static const struct {
        const char *args;
        int exit_code;
        const char *says;
    } cases[] = {
        {"--plan-explain", 1, "--plan-explain needs --auto or --plan"},
        {"--no-probe-io", 1, "--no-probe-io needs --auto or --plan"},
        {"--probe", 1, "--probe needs --auto or --plan"},
        {"--auto --probe-io --no-probe-io", 2, "exclude each other"},
        {"--auto --plan", 2, "give one of them"},
        {"--plan-run --plan-only", 2, "give one of them"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(script, sizeof script, "\"$BMOE_CLI\" -m '%s' -p hi %s", model, cases[i].args);
        if (cli_run_shell(script, &r) != 0) {
            CHECK(0);
            continue;
        }
        CHECK_MSG(r.exit_code == cases[i].exit_code && cli_one_line_error(&r) && strstr(r.err, cases[i].says) &&
                      r.out_length == 0,
                  "%s: exit %d, stderr %s", cases[i].args, r.exit_code, r.err);
        cli_result_free(&r);
    }
    /* a model that is not there: one line */
    snprintf(script, sizeof script, "\"$BMOE_CLI\" -m '%s/none.gguf' --plan --no-probe-io --no-probe-mem", dir);
    if (cli_run_shell(script, &r) == 0) {
        CHECK_MSG(r.exit_code == 1 && cli_one_line_error(&r) && strstr(r.err, "--plan"), "exit %d: %s", r.exit_code,
                  r.err);
        cli_result_free(&r);
    }
}

int main(void)
{
    snprintf(dir, sizeof dir, "%s/cli-params", test_tmp_dir());
    mkdir(dir, 0755);
    snprintf(model, sizeof model, "%s/model.gguf", dir);
    char command[2600];
    snprintf(command, sizeof command, "'%s/bmoe-mkmodel' --quiet --shape tiny-qwen3moe --experts 16 -o '%s'",
             BMOE_BIN_DIR, model);
    CHECK(system(command) == 0);
    test_help();
    test_describe_params();
    test_flag_reference();
    test_show_config();
    test_planner_flags();
    return test_finish();
}
