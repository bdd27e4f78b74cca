/* bmoe-cli stopped from outside leaves no temporary file: SIGINT, SIGTERM
 * and SIGHUP during the decode (--csv and every trace, resident and
 * streamed), while its standard output is a full pipe nobody reads, at
 * moments swept across the load and the prefill, in --logits-out's
 * teacher forcing, and in a session (busy and idle) end the process by that
 * signal after one line, with no NAME.tmp-PID-... beside any output and no
 * output published; a closed standard output (SIGPIPE) and a file-size
 * limit (SIGXFSZ) are a one-line write error and exit 1, also without
 * debris. */
#define _GNU_SOURCE /* memmem */
#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>

#include "cli_run.h"

#define WAIT_MS 60000

static char dir[1100], stories[1024], moe[1200];

/* ---- a child with pipes and the default signal dispositions ------------ */

typedef struct child {
    pid_t pid;
    int in, out;      /* -1 when not a pipe */
    char err_path[1300];
    size_t seen;      /* bytes read from stdout */
    bool eof;
} child;

/* Starts bmoe-cli with args; stdin a pipe when with_input (else
 * /dev/null); stdout a pipe; stderr a file. */
static bool child_start(child *c, const char *const *args, bool with_input)
{
    memset(c, 0, sizeof *c);
    c->in = c->out = -1;
    char binary[1024];
    snprintf(binary, sizeof binary, "%s/bmoe-cli", BMOE_BIN_DIR);
    static int serial;
    snprintf(c->err_path, sizeof c->err_path, "%s/child-%d-%d.err", test_tmp_dir(), (int)getpid(), serial++);
    int to_child[2] = {-1, -1}, from_child[2];
    if ((with_input && pipe(to_child) != 0) || pipe(from_child) != 0)
        return false;
    const char *argv[48];
    int n = 0;
    argv[n++] = binary;
    for (int i = 0; args[i] && n < 47; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    if (with_input) {
        posix_spawn_file_actions_adddup2(&actions, to_child[0], 0);
        posix_spawn_file_actions_addclose(&actions, to_child[1]);
    } else {
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    }
    posix_spawn_file_actions_adddup2(&actions, from_child[1], 1);
    posix_spawn_file_actions_addclose(&actions, from_child[0]);
    posix_spawn_file_actions_addopen(&actions, 2, c->err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    /* whatever this test was started with (a background job ignores
     * SIGINT), the child meets the signals as a terminal's job would */
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    sigset_t signals;
    sigemptyset(&signals);
    int defaults[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGXFSZ};
    for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++)
        sigaddset(&signals, defaults[i]);
    posix_spawnattr_setsigdefault(&attributes, &signals);
    sigemptyset(&signals);
    posix_spawnattr_setsigmask(&attributes, &signals);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    int spawned = posix_spawn(&c->pid, binary, &actions, &attributes, (char *const *)argv, environ);
    posix_spawnattr_destroy(&attributes);
    posix_spawn_file_actions_destroy(&actions);
    if (with_input) {
        close(to_child[0]);
        c->in = to_child[1];
    }
    close(from_child[1]);
    c->out = from_child[0];
    return spawned == 0;
}

/* Reads stdout until it holds needle (NULL: any byte) past what was read
 * before; false at EOF or after WAIT_MS. The bytes are kept only while
 * looking, in a window that a needle cannot straddle unseen. */
static bool child_wait_for(child *c, const char *needle)
{
    char window[65536 + 256];
    size_t kept = 0;
    size_t needle_length = needle ? strlen(needle) : 0;
    for (;;) {
        struct pollfd wait = {c->out, POLLIN, 0};
        int ready = poll(&wait, 1, WAIT_MS);
        if (ready < 0 && errno == EINTR)
            continue;
        if (ready <= 0)
            return false;
        ssize_t got = read(c->out, window + kept, 65536);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            c->eof = true;
            return false;
        }
        c->seen += (size_t)got;
        kept += (size_t)got;
        window[kept] = '\0';
        if (!needle || memmem(window, kept, needle, needle_length))
            return true;
        size_t tail = needle_length < kept ? needle_length : kept;
        memmove(window, window + kept - tail, tail);
        kept = tail;
    }
}

/* Sends a line to stdin. */
static void child_send(child *c, const char *line)
{
    size_t length = strlen(line);
    CHECK(write(c->in, line, length) == (ssize_t)length && write(c->in, "\n", 1) == 1);
}

/* Waits for the end (killed after WAIT_MS: a failure); stdout is drained
 * unless keep_stdout_full. Fills exit_code / signal and stderr. */
static void child_finish(child *c, bool keep_stdout_full, cli_result *result)
{
    memset(result, 0, sizeof *result);
    result->exit_code = -1;
    if (c->in >= 0)
        close(c->in);
    int status = 0;
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        pid_t done = waitpid(c->pid, &status, WNOHANG);
        if (done == c->pid)
            break;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 > WAIT_MS) {
            CHECK_MSG(false, "the child did not end in %d ms", WAIT_MS);
            kill(c->pid, SIGKILL);
            waitpid(c->pid, &status, 0);
            break;
        }
        if (!keep_stdout_full && !c->eof && c->out >= 0) {
            char sink[65536];
            struct pollfd wait = {c->out, POLLIN, 0};
            if (poll(&wait, 1, 10) > 0 && read(c->out, sink, sizeof sink) <= 0)
                c->eof = true;
        } else {
            struct timespec pause = {0, 5000000};
            nanosleep(&pause, NULL);
        }
    }
    if (c->out >= 0)
        close(c->out);
    if (WIFEXITED(status))
        result->exit_code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status))
        result->signal = WTERMSIG(status);
    result->err = cli_read_all(c->err_path, &result->err_length);
    if (!result->err)
        result->err = calloc(1, 1);
    unlink(c->err_path);
}

/* The last line of stderr holds needle. */
static bool last_line_has(const cli_result *r, const char *needle)
{
    const char *end = r->err + r->err_length;
    if (end > r->err && end[-1] == '\n')
        end--;
    const char *start = end;
    while (start > r->err && start[-1] != '\n')
        start--;
    return strncmp(start, "bmoe-cli: ", 10) == 0 && memmem(start, (size_t)(end - start), needle, strlen(needle));
}

/* ---- what must hold after every stop ----------------------------------- */

/* Names in dir holding ".tmp-" (a temporary of any output), removed once
 * counted so that each case counts its own. */
static int temporaries_left(void)
{
    DIR *folder = opendir(dir);
    if (!folder)
        return -1;
    int count = 0;
    for (struct dirent *entry; (entry = readdir(folder)) != NULL;) {
        if (strstr(entry->d_name, ".tmp-")) {
            fprintf(stderr, "left behind: %s\n", entry->d_name);
            char path[1400];
            snprintf(path, sizeof path, "%s/%s", dir, entry->d_name);
            unlink(path);
            count++;
        }
    }
    closedir(folder);
    return count;
}

static const char *const output_names[] = {"run.csv", "route.csv", "io.csv", "nodes.csv", "layers.csv",
                                           "rows.f32"};

static void output_path(char *buffer, size_t size, const char *name)
{
    snprintf(buffer, size, "%s/%s", dir, name);
}

/* Every output starts as a file holding "old": a stopped run must leave it so. */
static void reset_outputs(void)
{
    for (size_t i = 0; i < sizeof output_names / sizeof output_names[0]; i++) {
        char path[1300];
        output_path(path, sizeof path, output_names[i]);
        FILE *file = fopen(path, "w");
        CHECK(file && fputs("old", file) >= 0 && fclose(file) == 0);
    }
}

static bool outputs_untouched(void)
{
    bool untouched = true;
    for (size_t i = 0; i < sizeof output_names / sizeof output_names[0]; i++) {
        char path[1300];
        output_path(path, sizeof path, output_names[i]);
        size_t length = 0;
        char *content = cli_read_all(path, &length);
        if (!content || length != 3 || memcmp(content, "old", 3) != 0) {
            fprintf(stderr, "%s was replaced\n", output_names[i]);
            untouched = false;
        }
        free(content);
    }
    return untouched;
}

static const char *signal_name(int number)
{
    return number == SIGINT ? "SIGINT" : number == SIGTERM ? "SIGTERM" : number == SIGHUP ? "SIGHUP" : "?";
}

/* Stopped by signal_number: killed by it, no temporary, no output
 * replaced. */
static void expect_stopped(const char *what, const cli_result *r, int signal_number)
{
    CHECK_MSG(r->signal == signal_number, "%s: ended with exit %d signal %d, not by %s", what, r->exit_code,
              r->signal, signal_name(signal_number));
    /* its last line says so (nothing at all when it came before the
     * process could catch it) */
    char line[64];
    size_t length = (size_t)snprintf(line, sizeof line, "bmoe-cli: stopped by %s\n", signal_name(signal_number));
    bool said = r->err_length >= length && strcmp(r->err + r->err_length - length, line) == 0 &&
                (r->err_length == length || r->err[r->err_length - length - 1] == '\n');
    CHECK_MSG(said || r->err_length == 0, "%s: stderr '%s'", what, r->err);
    CHECK_MSG(temporaries_left() == 0, "%s: temporaries left", what);
    CHECK_MSG(outputs_untouched(), "%s: an output was replaced", what);
}

/* ---- the cases ----------------------------------------------------------- */

static void path_args(char paths[6][1300])
{
    for (int i = 0; i < 6; i++)
        output_path(paths[i], sizeof paths[i], output_names[i]);
}

/* A generation that runs until stopped, with every output it can write. */
static bool start_long_generation(child *c, const char *model, bool streamed, bool progress)
{
    static char paths[6][1300];
    path_args(paths);
    const char *args[40];
    int n = 0;
    const char *fixed[] = {"-m", model, "-p", "Once upon a time", "-n", "-1", "--ignore-eos", "-c", "8192",
                           "-t", "1", "--csv", paths[0], "--compute-trace", paths[3],
                           "--compute-trace-layers", paths[4], NULL};
    for (int i = 0; fixed[i]; i++)
        args[n++] = fixed[i];
    if (streamed) {
        const char *more[] = {"--moe-stream", "--cache-mb", "1", "--route-trace", paths[1], "--io-trace", paths[2],
                              NULL};
        for (int i = 0; more[i]; i++)
            args[n++] = more[i];
    }
    if (progress)
        args[n++] = "--progress";
    args[n] = NULL;
    return child_start(c, args, false);
}

/* Each stop signal once the decode runs (text is arriving), on the dense
 * model and on the streamed MoE model with the route and io traces. */
static void test_during_decode(void)
{
    const int signals[] = {SIGINT, SIGTERM, SIGHUP};
    for (int streamed = 0; streamed < 2; streamed++) {
        for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++) {
            char what[128];
            snprintf(what, sizeof what, "%s during the decode%s", signal_name(signals[i]),
                     streamed ? " (streamed)" : "");
            reset_outputs();
            child c;
            CHECK(start_long_generation(&c, streamed ? moe : stories, streamed, false));
            /* the prompt echoed and some tokens past it */
            CHECK_MSG(child_wait_for(&c, NULL) && child_wait_for(&c, NULL), "%s: no text", what);
            kill(c.pid, signals[i]);
            cli_result r;
            child_finish(&c, false, &r);
            expect_stopped(what, &r, signals[i]);
            cli_result_free(&r);
        }
    }
}

/* Standard output a pipe that nobody reads: the write blocks until the
 * signal interrupts it. */
static void test_blocked_on_output(void)
{
    reset_outputs();
    child c;
    CHECK(start_long_generation(&c, stories, false, true));
    CHECK(child_wait_for(&c, "BMOE_PROGRESS"));
    /* the progress lines fill the pipe's 64 KiB in well under this */
    struct timespec pause = {1, 0};
    nanosleep(&pause, NULL);
    kill(c.pid, SIGTERM);
    cli_result r;
    child_finish(&c, true, &r);
    expect_stopped("SIGTERM while blocked on a full stdout", &r, SIGTERM);
    cli_result_free(&r);
}

/* Signals at moments from the start of the process through the load and
 * the prefill of a long prompt: the process ends by the signal (the
 * earliest may come before it could catch any) and leaves nothing. */
static void test_swept_moments(void)
{
    char prompt_file[1300];
    output_path(prompt_file, sizeof prompt_file, "prompt.txt");
    FILE *file = fopen(prompt_file, "w");
    for (int i = 0; file && i < 400; i++)
        fputs("Once upon a time there was a little girl. ", file);
    CHECK(file && fclose(file) == 0);
    static char paths[6][1300];
    path_args(paths);
    const long delays_us[] = {0, 1000, 3000, 6000, 10000, 20000, 40000, 80000};
    for (size_t i = 0; i < sizeof delays_us / sizeof delays_us[0]; i++) {
        reset_outputs();
        const char *args[] = {"-m", moe, "-f", prompt_file, "-n", "-1", "--ignore-eos", "-c", "8192",
                              "--ubatch", "16", "-t", "1", "--moe-stream", "--cache-mb", "1", "--csv", paths[0],
                              "--route-trace", paths[1], "--io-trace", paths[2], "--compute-trace", paths[3],
                              NULL};
        child c;
        CHECK(child_start(&c, args, false));
        struct timespec pause = {0, delays_us[i] * 1000};
        nanosleep(&pause, NULL);
        kill(c.pid, SIGTERM);
        cli_result r;
        child_finish(&c, false, &r);
        char what[64];
        snprintf(what, sizeof what, "SIGTERM %ld us after the start", delays_us[i]);
        expect_stopped(what, &r, SIGTERM);
        cli_result_free(&r);
    }
    unlink(prompt_file);
}

/* --logits-out over many teacher-forced ids, stopped once it runs. */
static void test_logits(void)
{
    reset_outputs();
    static char paths[6][1300];
    path_args(paths);
    static char forced[20000];
    size_t used = 0;
    for (int i = 0; i < 3000 && used + 8 < sizeof forced; i++)
        used += (size_t)snprintf(forced + used, sizeof forced - used, "%s%d", i ? "," : "", 300 + i % 100);
    const char *args[] = {"-m", stories, "--prompt-ids", "1,403,407", "--force-ids", forced, "-c", "4096",
                          "-t", "1", "--logits-out", paths[5], NULL};
    child c;
    CHECK(child_start(&c, args, false));
    struct timespec pause = {0, 300 * 1000000L};
    nanosleep(&pause, NULL);
    kill(c.pid, SIGINT);
    cli_result r;
    child_finish(&c, false, &r);
    expect_stopped("SIGINT during --logits-out", &r, SIGINT);
    cli_result_free(&r);
}

/* A session with --csv: SIGTERM while a request generates, and while idle. */
static void test_session(void)
{
    static char paths[6][1300];
    path_args(paths);
    for (int busy = 0; busy < 2; busy++) {
        reset_outputs();
        const char *args[] = {"-m", moe, "--session", "--ignore-eos", "-c", "8192", "--csv", paths[0], NULL};
        child c;
        CHECK(child_start(&c, args, true));
        CHECK(child_wait_for(&c, "BMOE_READY"));
        if (busy) {
            child_send(&c, "{\"cmd\":\"generate\",\"id\":1,\"prompt\":\"Once\",\"n_predict\":-1}");
            CHECK(child_wait_for(&c, "BMOE_PROGRESS"));
        }
        kill(c.pid, SIGTERM);
        cli_result r;
        /* stdin stays open: only the signal can end it */
        int in = c.in;
        c.in = -1;
        child_finish(&c, false, &r);
        close(in);
        expect_stopped(busy ? "SIGTERM during a session's request" : "SIGTERM in an idle session", &r, SIGTERM);
        cli_result_free(&r);
    }
}

/* The reader of standard output goes away: a write error, one line, exit 1. */
static void test_closed_pipe(void)
{
    reset_outputs();
    child c;
    CHECK(start_long_generation(&c, stories, false, false));
    CHECK(child_wait_for(&c, NULL));
    close(c.out);
    c.out = -1;
    cli_result r;
    child_finish(&c, false, &r);
    CHECK_MSG(r.signal == 0 && r.exit_code == 1, "closed stdout: exit %d signal %d", r.exit_code, r.signal);
    CHECK_MSG(last_line_has(&r, "cannot write to standard output: Broken pipe"), "closed stdout: stderr '%s'", r.err);
    CHECK(temporaries_left() == 0);
    CHECK(outputs_untouched());
    cli_result_free(&r);
}

/* A file-size limit the trace outgrows: a write error naming the file (the
 * last line, after the run's end-of-run lines), exit 1. */
static void test_file_size_limit(void)
{
    reset_outputs();
    static char paths[6][1300];
    path_args(paths);
    char script[8192];
    /* 64 blocks (32 or 64 KiB, as the shell counts them): the preamble
     * fits, the rows of 127 tokens do not */
    snprintf(script, sizeof script,
             "ulimit -f 64; exec \"$BMOE_CLI\" -m '%s' -p Once -n 200 --ignore-eos --compute-trace '%s' > /dev/null",
             stories, paths[3]);
    cli_result r;
    /* the shell is started with the default SIGXFSZ: it kills a writer */
    struct sigaction previous, restore = {0};
    restore.sa_handler = SIG_DFL;
    sigaction(SIGXFSZ, &restore, &previous);
    CHECK(cli_run_shell(script, &r) == 0);
    sigaction(SIGXFSZ, &previous, NULL);
    CHECK_MSG(r.signal == 0 && r.exit_code == 1, "file-size limit: exit %d signal %d", r.exit_code, r.signal);
    CHECK_MSG(last_line_has(&r, "nodes.csv: cannot write: File too large"), "file-size limit: stderr '%s'", r.err);
    CHECK(temporaries_left() == 0);
    CHECK(outputs_untouched());
    cli_result_free(&r);
}

int main(void)
{
    test_shared_path(stories, sizeof stories, "data/models/stories260K/stories260K.gguf");
    snprintf(dir, sizeof dir, "%s/cli-signals", test_tmp_dir());
    mkdir(dir, 0755);
    snprintf(moe, sizeof moe, "%s/moe.gguf", dir);
    char maker[1024];
    snprintf(maker, sizeof maker, "%s/bmoe-mkmodel", BMOE_BIN_DIR);
    const char *make[] = {maker, "--shape", "tiny-qwen3moe", "--quiet", "-o", moe, NULL};
    cli_result r;
    CHECK(cli_spawn(make, &r) == 0 && r.exit_code == 0);
    cli_result_free(&r);
    test_during_decode();
    test_blocked_on_output();
    test_swept_moments();
    test_logits();
    test_session();
    test_closed_pipe();
    test_file_size_limit();
    return test_finish();
}
