/* bmoe-cli against hostile paths and conditions (the hardening issue), each
 * asserting the clean outcome: a failed write never removes or damages the
 * path the user named (a symbolic link, a device) and leaves no temporary;
 * an output onto the model (by any name, any shard) or onto another output
 * is refused up front; a replaced output keeps its permission bits; FIFOs
 * never hang; output into a full disk is an error, in every job; a model
 * computing NaN is an error, not text or "PPL = nan"; flags that mean
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

/* A file's bytes compared with a copy taken before. */
static bool unchanged(const char *path, const char *before, size_t before_length)
{
    size_t length = 0;
    char *now = cli_read_all(path, &length);
    bool same = now && length == before_length && memcmp(now, before, length) == 0;
    free(now);
    return same;
}

/* Every output flag given the model's own file, under every kind of name
 * (itself, "./", a symbolic link, a hard link; a split model's second
 * shard), one-shot and in a session, is refused before anything runs and
 * the model is left byte for byte as it was; so is a second output naming
 * the first one's file by another path. */
static void test_model_as_output(void)
{
    char model[1200], dotted[1300], soft[1200], hard[1200], split[1200], shard[1200], shard_link[1200];
    char script[4096];
    snprintf(model, sizeof model, "%s/model.gguf", dir);
    snprintf(dotted, sizeof dotted, "%s/./model.gguf", dir);
    snprintf(soft, sizeof soft, "%s/model.link", dir);
    snprintf(hard, sizeof hard, "%s/model.hard", dir);
    snprintf(split, sizeof split, "%s/split-00001-of-00002.gguf", dir);
    snprintf(shard, sizeof shard, "%s/split-00002-of-00002.gguf", dir);
    snprintf(shard_link, sizeof shard_link, "%s/shard.link", dir);
    snprintf(script, sizeof script, "cp '%s' '%s'", stories, model);
    CHECK(system(script) == 0);
    unlink(soft);
    unlink(hard);
    unlink(shard_link);
    CHECK(symlink(model, soft) == 0);
    CHECK(link(model, hard) == 0);
    size_t model_length = 0;
    char *model_bytes = cli_read_all(model, &model_length);
    CHECK(model_bytes && model_length > 0);

    const char *names[] = {model, dotted, soft, hard};
    /* %1$s the model, %2$s the output; the session's stdin ends at once, so
     * that a session that was not refused would run to its end */
    const char *forms[] = {
        "-m '%1$s' -p Once -n 2 --csv '%2$s'",
        "-m '%1$s' -p Once -n 2 --moe-stream --route-trace '%2$s'",
        "-m '%1$s' -p Once -n 2 --moe-stream --io-trace '%2$s'",
        "-m '%1$s' -p Once -n 2 --compute-trace '%2$s'",
        "-m '%1$s' -p Once -n 2 --compute-trace-layers '%2$s'",
        "-m '%1$s' --prompt-ids 1,403 --logits-out '%2$s'",
        "-m '%1$s' --session --csv '%2$s' < /dev/null",
    };
    for (size_t n = 0; n < sizeof names / sizeof names[0]; n++) {
        for (size_t i = 0; i < 2 * sizeof forms / sizeof forms[0]; i++) {
            /* every form again with the model opened through its link */
            const char *opened = i < sizeof forms / sizeof forms[0] ? model : soft;
            char arguments[3000];
            snprintf(arguments, sizeof arguments, forms[i % (sizeof forms / sizeof forms[0])], opened, names[n]);
            snprintf(script, sizeof script, "exec timeout 60 \"$BMOE_CLI\" %s", arguments);
            cli_result r;
            run_shell("model as output", script, &r);
            CHECK_MSG(r.signal == 0 && r.exit_code != 0 && cli_one_line_error(&r) &&
                          strstr(r.err, "file of the model"),
                      "%s: exit %d signal %d, stderr %s", arguments, r.exit_code, r.signal, r.err);
            CHECK_MSG(!strstr(r.out, "BMOE_READY"), "%s: the run started", arguments);
            cli_result_free(&r);
            CHECK_MSG(unchanged(model, model_bytes, model_length), "%s: the model changed", arguments);
            CHECK(no_temporary_left("model.gguf"));
        }
    }
    free(model_bytes);

    /* a split model: any shard, by any name */
    char maker[1024];
    snprintf(maker, sizeof maker, "%s/bmoe-mkmodel", BMOE_BIN_DIR);
    char split_base[1200];
    snprintf(split_base, sizeof split_base, "%s/split.gguf", dir);
    const char *make[] = {maker, "--shape", "tiny-qwen3moe", "--layers", "2", "--experts", "4", "--experts-used",
                          "2", "--vocab", "320", "--quiet", "--split", "2", "-o", split_base, NULL};
    cli_result r;
    CHECK(cli_spawn(make, &r) == 0 && r.exit_code == 0);
    cli_result_free(&r);
    CHECK(symlink(shard, shard_link) == 0);
    size_t shard_length = 0;
    char *shard_bytes = cli_read_all(shard, &shard_length);
    CHECK(shard_bytes && shard_length > 0);
    const char *shard_names[] = {split, shard, shard_link};
    for (size_t n = 0; n < sizeof shard_names / sizeof shard_names[0]; n++) {
        const char *args[] = {"-m", split, "-p", "Once", "-n", "2", "--compute-trace", shard_names[n], NULL};
        CHECK(cli_run(args, &r) == 0);
        CHECK_MSG(r.exit_code != 0 && cli_one_line_error(&r) && strstr(r.err, "file of the model"),
                  "shard name %zu: exit %d, stderr %s", n, r.exit_code, r.err);
        cli_result_free(&r);
        CHECK_MSG(unchanged(shard, shard_bytes, shard_length), "shard name %zu: the shard changed", n);
    }
    free(shard_bytes);
    /* the split model itself still runs */
    const char *runs[] = {"-m", split, "-p", "Once", "-n", "2", NULL};
    CHECK(cli_run(runs, &r) == 0 && r.exit_code == 0);
    cli_result_free(&r);

    /* two outputs, one file: by name (refused before), by "./" and by a hard
     * link to an existing file */
    char csv[1200], csv_dotted[1300], csv_hard[1200];
    snprintf(csv, sizeof csv, "%s/twice.csv", dir);
    snprintf(csv_dotted, sizeof csv_dotted, "%s/./twice.csv", dir);
    snprintf(csv_hard, sizeof csv_hard, "%s/twice.hard", dir);
    unlink(csv);
    unlink(csv_hard);
    const char *pairs[][2] = {{csv, csv}, {csv, csv_dotted}, {csv, csv_hard}};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        if (i == 2) {
            FILE *file = fopen(csv, "w");
            CHECK(file && fclose(file) == 0);
            CHECK(link(csv, csv_hard) == 0);
        }
        const char *args[] = {"-m", model, "-p", "Once", "-n", "2", "--csv", pairs[i][0],
                              "--compute-trace", pairs[i][1], NULL};
        CHECK(cli_run(args, &r) == 0);
        CHECK_MSG(r.exit_code != 0 && cli_one_line_error(&r) && strstr(r.err, "name the same file"),
                  "outputs pair %zu: exit %d, stderr %s", i, r.exit_code, r.err);
        cli_result_free(&r);
    }
    unlink(csv);
    unlink(csv_hard);
    unlink(shard_link);
    unlink(split);
    unlink(shard);
    unlink(soft);
    unlink(hard);
    unlink(model);
}

/* Outputs written over existing files keep their permission bits: a 0600
 * --csv stays 0600; through a symbolic link the file it leads to keeps its
 * mode and the link stays a link (--logits-out). */
static void test_kept_mode(void)
{
    char csv[1200], logits[1200], soft[1200];
    snprintf(csv, sizeof csv, "%s/private.csv", dir);
    snprintf(logits, sizeof logits, "%s/private.f32", dir);
    snprintf(soft, sizeof soft, "%s/private.link", dir);
    const char *files[] = {csv, logits};
    for (int i = 0; i < 2; i++) {
        FILE *file = fopen(files[i], "w");
        CHECK(file && fclose(file) == 0);
        CHECK(chmod(files[i], i == 0 ? 0600 : 0640) == 0);
    }
    unlink(soft);
    CHECK(symlink(logits, soft) == 0);
    const char *generate[] = {"-m", stories, "-p", "Once", "-n", "2", "--csv", csv, NULL};
    const char *teacher[] = {"-m", stories, "--prompt-ids", "1,403", "--logits-out", soft, NULL};
    cli_result r;
    CHECK(cli_run(generate, &r) == 0 && r.exit_code == 0);
    cli_result_free(&r);
    CHECK(cli_run(teacher, &r) == 0 && r.exit_code == 0);
    cli_result_free(&r);
    struct stat st;
    CHECK_MSG(stat(csv, &st) == 0 && st.st_size > 0 && (st.st_mode & 07777) == 0600, "--csv came back %04o",
              (unsigned)(st.st_mode & 07777));
    CHECK(lstat(soft, &st) == 0 && S_ISLNK(st.st_mode));
    CHECK_MSG(stat(logits, &st) == 0 && st.st_size == 2 * 512 * 4 && (st.st_mode & 07777) == 0640,
              "--logits-out through a link came back %04o", (unsigned)(st.st_mode & 07777));
    unlink(soft);
    unlink(logits);
    unlink(csv);
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
        {{"-m", stories, "--moe-stream", "--predict-always", NULL}, "needs --predict-prefetch"},
        {{"-m", stories, "--predict-prefetch", "--predict-always", NULL}, "--moe-stream"},
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
    test_model_as_output();
    test_kept_mode();
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
