/* bmoe-cli when its model file changes during a run: truncated while the
 * run generates (default residency, --dense-weights mmap, --no-prefault),
 * overwritten in place with other bytes, and rewritten with its own bytes.
 * Each run ends with one error line naming the file and exit status 1,
 * never a signal (a truncated mapping used to end it with SIGBUS). */
#include <signal.h>
#include <sys/stat.h>
#include <time.h>

#include "cli_run.h"

/* Keeps the GGUF header and the first tensors; every expert lies past it. */
#define CUT_SIZE 100000
/* Where an overwrite starts: past the header, inside the tensor data. */
#define OVERWRITE_FROM 200000
/* Steps the run makes before the change: it is well into decoding. */
#define STEPS_BEFORE 20

enum change { CHANGE_CUT, CHANGE_OVERWRITE, CHANGE_REWRITE };

static void sleep_ms(long ms)
{
    struct timespec pause = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&pause, NULL);
}

/* The BMOE_PROGRESS lines in the file so far. */
static int progress_lines(const char *path)
{
    size_t length;
    char *text = cli_read_all(path, &length);
    int count = 0;
    for (const char *at = text; at && (at = strstr(at, "BMOE_PROGRESS")) != NULL; at++)
        count++;
    free(text);
    return count;
}

/* Writes over path from OVERWRITE_FROM to its end, in place: the same bytes
 * of original, or 0xff when original is NULL. */
static bool overwrite(const char *path, const char *original)
{
    size_t length;
    char *bytes = cli_read_all(original ? original : path, &length);
    int fd = open(path, O_WRONLY);
    bool ok = bytes && fd >= 0 && length > OVERWRITE_FROM;
    if (ok && !original)
        memset(bytes + OVERWRITE_FROM, 0xff, length - OVERWRITE_FROM);
    ok = ok && pwrite(fd, bytes + OVERWRITE_FROM, length - OVERWRITE_FROM, OVERWRITE_FROM) ==
                   (ssize_t)(length - OVERWRITE_FROM);
    free(bytes);
    if (fd >= 0)
        ok = close(fd) == 0 && ok;
    return ok;
}

/* flag: NULL, or one residency flag and its value ("--no-prefault" alone). */
static void check_change(const char *model, const char *dir, enum change change, const char *flag, const char *value,
                         const char *phrase)
{
    const char *names[] = {"truncated", "overwritten", "rewritten"};
    char copy[1300], out_path[1300], err_path[1300], command[2700];
    snprintf(copy, sizeof copy, "%s/copy.gguf", dir);
    snprintf(out_path, sizeof out_path, "%s/run.out", dir);
    snprintf(err_path, sizeof err_path, "%s/run.err", dir);
    snprintf(command, sizeof command, "cp '%s' '%s'", model, copy);
    CHECK(system(command) == 0);

    char binary[1024];
    snprintf(binary, sizeof binary, "%s/bmoe-cli", BMOE_BIN_DIR);
    const char *argv[] = {binary, "-m", copy, "-p", "Once upon a time", "-n", "100000", "--ignore-eos",
                          "--progress", "-t", "2", flag, value, NULL};
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&actions, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid;
    bool started = posix_spawn(&pid, binary, &actions, NULL, (char *const *)argv, environ) == 0;
    posix_spawn_file_actions_destroy(&actions);
    CHECK_MSG(started, "cannot start %s", binary);
    if (!started)
        return;
    int waited = 0;
    while (progress_lines(out_path) < STEPS_BEFORE && waited < 30000) {
        sleep_ms(5);
        waited += 5;
    }
    CHECK_MSG(waited < 30000, "%s: the run made no progress", names[change]);
    bool changed = change == CHANGE_CUT ? truncate(copy, CUT_SIZE) == 0
                                        : overwrite(copy, change == CHANGE_REWRITE ? model : NULL);
    CHECK_MSG(changed, "cannot change %s", copy);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    cli_result result = {.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                         .signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0};
    result.out = cli_read_all(out_path, &result.out_length);
    result.err = cli_read_all(err_path, &result.err_length);
    const char *err = result.err ? result.err : "";
    CHECK_MSG(result.exit_code == 1 && result.signal == 0, "%s %s: exit %d, signal %d: %s", names[change],
              flag ? flag : "", result.exit_code, result.signal, err);
    CHECK_MSG(cli_one_line_error(&result) && strstr(err, copy) && strstr(err, phrase),
              "%s %s: stderr '%s' (expected one line naming %s, '%s')", names[change], flag ? flag : "", err, copy,
              phrase);
    cli_result_free(&result);
    unlink(copy);
    unlink(out_path);
    unlink(err_path);
}

int main(void)
{
    char dir[1100], model[1200];
    snprintf(dir, sizeof dir, "%s/cli-model-changes", test_tmp_dir());
    mkdir(dir, 0755);
    snprintf(model, sizeof model, "%s/model.gguf", dir);
    char binary[1024];
    snprintf(binary, sizeof binary, "%s/bmoe-mkmodel", BMOE_BIN_DIR);
    const char *argv[] = {binary, "--shape", "tiny-qwen3moe", "--type", "q4_k_m", "--quiet", "-o", model, NULL};
    cli_result made;
    bool ok = cli_spawn(argv, &made) == 0 && made.exit_code == 0;
    CHECK_MSG(ok, "bmoe-mkmodel failed");
    cli_result_free(&made);
    if (!ok)
        return test_finish();
    check_change(model, dir, CHANGE_CUT, NULL, NULL, "bytes now");
    check_change(model, dir, CHANGE_CUT, "--dense-weights", "mmap", "bytes now");
    check_change(model, dir, CHANGE_CUT, "--no-prefault", NULL, "bytes now");
    check_change(model, dir, CHANGE_OVERWRITE, NULL, NULL, "modified");
    check_change(model, dir, CHANGE_OVERWRITE, "--dense-weights", "mmap", "modified");
    check_change(model, dir, CHANGE_REWRITE, NULL, NULL, "modified");
    return test_finish();
}
