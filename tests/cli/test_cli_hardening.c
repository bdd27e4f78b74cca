/* bmoe-cli against hostile paths and conditions (the hardening issue), each
 * asserting the clean outcome: a failed write never removes or damages the
 * path the user named (a symbolic link, a device) and leaves no temporary;
 * FIFOs never hang; output into a full disk is an error, in every job; a
 * model computing NaN is an error, not text or "PPL = nan"; flags that mean
 * nothing in the job are refused; numbers follow one rule; a context longer
 * than trained is one warning; control bytes in a flag, a path or a
 * template's message reach stderr escaped. */
#include <math.h>
#include <sys/stat.h>

#include "cli_run.h"
#include "nan_model.h"

static char stories[1024], corpus[1024], dir[1100];

/* The run failed cleanly: exit 1, one line on stderr containing needle. */
static void expect_failure(const char *what, const cli_result *r, const char *needle)
{
    CHECK_MSG(r->signal == 0 && r->exit_code == 1, "%s: exit %d signal %d", what, r->exit_code, r->signal);
    CHECK_MSG(cli_one_line_error(r), "%s: stderr is not one line: %.300s", what, r->err);
    CHECK_MSG(!needle || strstr(r->err, needle), "%s: stderr lacks '%s': %s", what, needle, r->err);
}

static void run_shell(const char *what, const char *script, cli_result *r)
{
    CHECK_MSG(cli_run_shell(script, r) == 0, "%s: could not run", what);
}

/* No file in dir starts with prefix followed by ".tmp-". */
static bool no_temporary_left(const char *prefix)
{
    char script[1400];
    snprintf(script, sizeof script, "ls -a '%s' | grep -q '^%s.tmp-'", dir, prefix);
    return system(script) != 0;
}

static void test_outputs(void)
{
    char target[1200], link[1200], script[4096];
    cli_result r;
    snprintf(target, sizeof target, "%s/precious.bin", dir);
    snprintf(link, sizeof link, "%s/precious.link", dir);
    FILE *file = fopen(target, "wb");
    CHECK(file && fputs("keep me", file) >= 0 && fclose(file) == 0);
    unlink(link);
    CHECK(symlink(target, link) == 0);

    /* a write that fails half-way (file size limit) through a symbolic link:
     * the link and the file it leads to stay as they were */
    snprintf(script, sizeof script,
             "trap '' XFSZ; ulimit -f 1; exec \"$BMOE_CLI\" -m '%s' --prompt-ids 1,403,407,261,378 "
             "--logits-out '%s'",
             stories, link);
    run_shell("failing write through a link", script, &r);
    expect_failure("failing write through a link", &r, "precious");
    CHECK_MSG(strstr(r.err, "large") || strstr(r.err, "space"), "no reason in '%s'", r.err);
    cli_result_free(&r);
    struct stat st;
    CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode));
    size_t length;
    char *content = cli_read_all(target, &length);
    CHECK(content && length == 7 && memcmp(content, "keep me", 7) == 0);
    free(content);
    CHECK(no_temporary_left("precious.bin"));

    /* the same run without the limit replaces the file the link leads to */
    const char *ok_args[] = {"-m", stories, "--prompt-ids", "1,403,407", "--logits-out", link, NULL};
    CHECK(cli_run(ok_args, &r) == 0 && r.exit_code == 0);
    cli_result_free(&r);
    CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode));
    CHECK(stat(target, &st) == 0 && st.st_size == 3 * 512 * 4);

    /* a device or a folder as the output is refused up front and left alone */
    const char *device_args[] = {"-m", stories, "--prompt-ids", "1,403", "--logits-out", "/dev/null", NULL};
    CHECK(cli_run(device_args, &r) == 0);
    expect_failure("/dev/null as --logits-out", &r, "not a regular file");
    cli_result_free(&r);
    CHECK(stat("/dev/null", &st) == 0 && S_ISCHR(st.st_mode));
    const char *folder_args[] = {"-m", stories, "--prompt-ids", "1,403", "--logits-out", dir, NULL};
    CHECK(cli_run(folder_args, &r) == 0);
    expect_failure("a folder as --logits-out", &r, "not a regular file");
    cli_result_free(&r);
    CHECK(stat(dir, &st) == 0 && S_ISDIR(st.st_mode));
    unlink(link);
    unlink(target);
}

static void test_fifos(void)
{
    char fifo[1200], script[4096];
    cli_result r;
    snprintf(fifo, sizeof fifo, "%s/a.fifo", dir);
    unlink(fifo);
    CHECK(mkfifo(fifo, 0644) == 0);
    const char *forms[][2] = {{"-m '%s' -p hi", "as -m"},
                              {"--info '%s'", "as --info"},
                              {"-m '%s' -f '%s'", "as -f"},
                              {"-m '%s' --ppl '%s'", "as --ppl"}};
    for (int i = 0; i < 4; i++) {
        char arguments[2600];
        if (i < 2)
            snprintf(arguments, sizeof arguments, forms[i][0], fifo);
        else
            snprintf(arguments, sizeof arguments, forms[i][0], stories, fifo);
        /* timeout: a hang is a failure, not a stuck test */
        snprintf(script, sizeof script, "exec timeout 20 \"$BMOE_CLI\" %s", arguments);
        run_shell(forms[i][1], script, &r);
        expect_failure(forms[i][1], &r, "FIFO");
        cli_result_free(&r);
    }
    unlink(fifo);
}

static void test_full_disk(void)
{
    const char *scripts[][2] = {
        {"\"$BMOE_CLI\" -m '%s' -p 'Once upon a time' -n 8 > /dev/full", "generation"},
        {"\"$BMOE_CLI\" --info '%s' > /dev/full", "--info"},
        {"\"$BMOE_CLI\" -m '%s' --ppl '%s' -c 128 --chunks 2 > /dev/full", "--ppl"},
        {"\"$BMOE_CLI\" --help > /dev/full", "--help"},
        {"\"$BMOE_CLI\" --version > /dev/full", "--version"},
        {"echo '{\"cmd\":\"generate\",\"id\":1,\"prompt\":\"Once\",\"n_predict\":3}' | \"$BMOE_CLI\" -m '%s' "
         "--session > /dev/full",
         "--session"},
    };
    for (int i = 0; i < 6; i++) {
        char script[4096];
        snprintf(script, sizeof script, scripts[i][0], stories, corpus);
        cli_result r;
        run_shell(scripts[i][1], script, &r);
        /* --ppl reports progress on stderr: the error is its last line */
        const char *last = r.err && r.err_length > 1 ? r.err + r.err_length - 2 : r.err;
        while (last && last > r.err && last[-1] != '\n')
            last--;
        CHECK_MSG(r.exit_code == 1 && last && strstr(last, "No space left") && strstr(last, "bmoe-cli: "),
                  "%s into /dev/full: exit %d, stderr '%s'", scripts[i][1], r.exit_code, r.err);
        if (i != 2)
            CHECK_MSG(cli_one_line_error(&r), "%s: stderr not one line: %s", scripts[i][1], r.err);
        cli_result_free(&r);
    }
}


/* A closed standard stream is not the next file opened: a session on a
 * closed stdin ends at once (not reading the model as requests), text for a
 * closed stdout is an error and its --csv is not written (not the text
 * written into the CSV). */
static void test_closed_streams(void)
{
    char script[4096], csv[1200];
    cli_result r;
    snprintf(script, sizeof script, "exec timeout 60 \"$BMOE_CLI\" -m '%s' --session <&-", stories);
    run_shell("session on a closed stdin", script, &r);
    CHECK_MSG(r.signal == 0 && r.exit_code == 0 && !strstr(r.out ? r.out : "", "BMOE_ERROR"),
              "session on a closed stdin: exit %d signal %d, out %.300s", r.exit_code, r.signal, r.out);
    cli_result_free(&r);

    snprintf(csv, sizeof csv, "%s/closed.csv", dir);
    unlink(csv);
    snprintf(script, sizeof script, "exec \"$BMOE_CLI\" -m '%s' -p 'Once upon' -n 4 --csv '%s' >&-", stories, csv);
    run_shell("text into a closed stdout", script, &r);
    expect_failure("text into a closed stdout", &r, "standard output");
    cli_result_free(&r);
    struct stat st;
    CHECK_MSG(stat(csv, &st) != 0, "--csv written though the run failed");
    CHECK(no_temporary_left("closed.csv"));
}

static void test_nan_model(void)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/nan.gguf", dir);
    CHECK(write_nan_model(stories, path));
    const char *generate[] = {"-m", path, "-p", "Once upon a time", "-n", "16", "--temp", "0.8", NULL};
    cli_result r;
    CHECK(cli_run(generate, &r) == 0);
    expect_failure("NaN model, generation", &r, "non-finite");
    cli_result_free(&r);
    const char *ppl[] = {"-m", path, "--ppl", corpus, "-c", "128", "--chunks", "2", NULL};
    CHECK(cli_run(ppl, &r) == 0);
    CHECK_MSG(r.exit_code == 1 && strstr(r.err, "non-finite") && !strstr(r.out, "nan"),
              "NaN model, --ppl: exit %d, out '%.200s', err '%.200s'", r.exit_code, r.out, r.err);
    cli_result_free(&r);
    unlink(path);
}

static void test_flags(void)
{
    struct {
        const char *args[12];
        const char *needle;
    } cases[] = {
        {{"-m", stories, "--ppl", corpus, "--logits-out", "x", NULL}, "--logits-out"},
        {{"--info", stories, "-n", "4", NULL}, "-n"},
        {{"--info", stories, "--temp", "0.5", NULL}, "--temp"},
        {{"-m", stories, "--ppl", corpus, "--temp", "0.5", NULL}, "--temp"},
        {{"-m", stories, "--prompt-ids", "1,2", "--logits-out", "x", "--top-k", "3", NULL}, "--top-k"},
        {{"-m", stories, "--cache-mb", "100", NULL}, "--moe-stream"},
        {{"-m", stories, "--predict-prefetch", NULL}, "--moe-stream"},
        {{"-m", stories, "--moe-stream", "--predict-spec-max", "9", NULL}, "out of range"},
        {{"-m", stories, "--moe-stream", "--cache-mb", "0", "--predict-prefetch", NULL}, "needs a cache"},
        {{"-m", stories, "--moe-stream", "--prefetch", "1", "--predict-prefetch", NULL}, "exclude each other"},
        {{"-m", stories, "--moe-stream", "--no-moe-stream", NULL}, "exclude each other"},
        {{"-m", stories, "--no-moe-stream", "--cache-mb", "100", NULL}, "needs --moe-stream"},
        {{"-m", stories, "-t", " 2", NULL}, "not an integer"},
        {{"-m", stories, "-t", "+2", NULL}, "not an integer"},
        {{"-m", stories, "--temp", " 0.5", NULL}, "not a finite number"},
        {{"-m", stories, "--temp", "+0.5", NULL}, "not a finite number"},
        {{"-m", stories, "--temp", "1e-60", NULL}, "underflow"},
        {{"-m", stories, "--temp", "-0.5", NULL}, "out of range"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cli_result r;
        CHECK(cli_run(cases[i].args, &r) == 0);
        CHECK_MSG(r.exit_code == 2 || r.exit_code == 1, "case %zu: exit %d", i, r.exit_code);
        CHECK_MSG(cli_one_line_error(&r) && strstr(r.err, cases[i].needle), "case %zu: '%s' lacks '%s'", i, r.err,
                  cases[i].needle);
        cli_result_free(&r);
    }
}

/* stderr is printable ASCII but for the newline that ends each line. */
static bool printable(const cli_result *r)
{
    for (size_t i = 0; i < r->err_length; i++) {
        unsigned char c = (unsigned char)r->err[i];
        if (c != '\n' && (c < 0x20 || c >= 0x7f))
            return false;
    }
    return true;
}

/* Escape sequences and bells given to the CLI come back as text: a flag's
 * value, a path in a library error, a template's raise_exception. */
static void test_control_bytes(void)
{
    char model[1200], template_path[1200], context_path[1200];
    snprintf(model, sizeof model, "%s/\x1b]0;title\a.gguf", dir);
    const char *flag[] = {"-m", stories, "--temp", "\x1b[31mred\a", NULL};
    const char *unknown[] = {"-m", stories, "--\x1b[2J", NULL};
    const char *path[] = {"-m", model, "-p", "x", NULL};
    snprintf(template_path, sizeof template_path, "%s/raise.jinja", dir);
    snprintf(context_path, sizeof context_path, "%s/raise.json", dir);
    FILE *file = fopen(template_path, "w");
    if (file) {
        fputs("{{ raise_exception('bad \\x1b[31mrole\\x07 \\\\x07') }}", file);
        fclose(file);
    }
    file = fopen(context_path, "w");
    if (file) {
        fputs("{}", file);
        fclose(file);
    }
    const char *raise[] = {"--render-template", template_path, "--template-context", context_path, NULL};
    struct {
        const char *const *args;
        const char *needle;
    } cases[] = {
        {flag, "'\\x1b[31mred\\x07' is not a finite number"},
        {unknown, "--\\x1b[2J"},
        {path, "\\x1b]0;title\\x07.gguf"},
        /* a backslash the template wrote stays one backslash */
        {raise, "bad \\x1b[31mrole\\x07 \\x07"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cli_result r;
        CHECK(cli_run(cases[i].args, &r) == 0);
        CHECK_MSG(r.exit_code == 1 || r.exit_code == 2, "case %zu: exit %d", i, r.exit_code);
        CHECK_MSG(cli_one_line_error(&r) && printable(&r), "case %zu: raw bytes on stderr: %s", i, r.err);
        CHECK_MSG(strstr(r.err, cases[i].needle), "case %zu: '%s' lacks '%s'", i, r.err, cases[i].needle);
        cli_result_free(&r);
    }
}

static void test_context_warning(void)
{
    /* stories260K was trained for 128 positions */
    const char *args[] = {"-m", stories, "-p", "Once", "-n", "2", "-c", "256", NULL};
    cli_result r;
    CHECK(cli_run(args, &r) == 0 && r.exit_code == 0);
    const char *first = strstr(r.err, "warning:");
    CHECK_MSG(first && strstr(first, "trained") && !strstr(first + 1, "warning:"), "warnings: %s", r.err);
    cli_result_free(&r);
}

/* The load progress bar: on a terminal (script(1) gives the run one), the
 * long load steps are drawn on stderr; in a file, nothing extra. */
static void test_progress_bar(void)
{
    char script[4096];
    snprintf(script, sizeof script, "script -qec \"'$BMOE_CLI' -m '%s' -p Once -n 2\" /dev/null", stories);
    cli_result r;
    run_shell("on a terminal", script, &r);
    CHECK_MSG(r.exit_code == 0 && strstr(r.out, "dense weights") && strstr(r.out, "100%"),
              "no progress bar on a terminal: %.300s", r.out);
    cli_result_free(&r);
    const char *args[] = {"-m", stories, "-p", "Once", "-n", "2", NULL};
    CHECK(cli_run(args, &r) == 0 && r.exit_code == 0);
    CHECK_MSG(!strstr(r.err, "dense weights") && !strstr(r.err, "[#"), "a progress bar into a file: %s", r.err);
    cli_result_free(&r);
}

int main(void)
{
    test_shared_path(stories, sizeof stories, "data/models/stories260K/stories260K.gguf");
    test_shared_path(corpus, sizeof corpus, "data/corpus/tinyshakespeare.txt");
    snprintf(dir, sizeof dir, "%s/cli-hardening", test_tmp_dir());
    mkdir(dir, 0755);
    test_outputs();
    test_fifos();
    test_full_disk();
    test_closed_streams();
    test_nan_model();
    test_flags();
    test_control_bytes();
    test_context_warning();
    test_progress_bar();
    return test_finish();
}
