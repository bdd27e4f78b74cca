/* Runs build/bin/bmoe-cli as a child process (posix_spawn) and captures its
 * exit status, stdout and stderr (through files in the test scratch
 * folder), so that the CLI tests check exactly what a user would see. */
#ifndef BMOE_TESTS_CLI_RUN_H
#define BMOE_TESTS_CLI_RUN_H

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdbool.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

extern char **environ;

typedef struct cli_result {
    int exit_code;   /* -1 when the child did not exit normally */
    int signal;      /* the signal that ended it, else 0 */
    char *out;       /* stdout, NUL-terminated */
    size_t out_length;
    char *err;       /* stderr, NUL-terminated */
    size_t err_length;
    char *report;    /* the end-of-run lines cli_cut_report took off out; NULL before */
} cli_result;

static inline char *cli_read_all(const char *path, size_t *length)
{
    *length = 0;
    FILE *file = fopen(path, "rb");
    if (!file)
        return NULL;
    size_t capacity = 4096, used = 0;
    char *data = malloc(capacity + 1);
    size_t got;
    while (data && (got = fread(data + used, 1, capacity - used, file)) > 0) {
        used += got;
        if (used == capacity) {
            capacity *= 2;
            char *bigger = realloc(data, capacity + 1);
            if (!bigger) {
                free(data);
                fclose(file);
                return NULL;
            }
            data = bigger;
        }
    }
    fclose(file);
    if (data) {
        data[used] = '\0';
        *length = used;
    }
    return data;
}

static inline void cli_result_free(cli_result *result)
{
    free(result->out);
    free(result->err);
    free(result->report);
    result->out = result->err = result->report = NULL;
}

/* Runs argv (argv[0] a path) with stdout and stderr captured. Returns 0
 * when the child ran (whatever its status), -1 when it could not start. */
static inline int cli_spawn(const char *const *argv, cli_result *result)
{
    memset(result, 0, sizeof *result);
    result->exit_code = -1;
    char out_path[1024], err_path[1024];
    snprintf(out_path, sizeof out_path, "%s/cli-test-%d.out", test_tmp_dir(), (int)getpid());
    snprintf(err_path, sizeof err_path, "%s/cli-test-%d.err", test_tmp_dir(), (int)getpid());
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&actions, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid;
    int spawned = posix_spawnp(&pid, argv[0], &actions, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    if (spawned != 0) {
        fprintf(stderr, "cannot start %s (build the bmoe-cli target)\n", argv[0]);
        return -1;
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            fprintf(stderr, "waitpid failed\n");
            return -1;
        }
    }
    if (WIFEXITED(status))
        result->exit_code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status))
        result->signal = WTERMSIG(status);
    result->out = cli_read_all(out_path, &result->out_length);
    result->err = cli_read_all(err_path, &result->err_length);
    unlink(out_path);
    unlink(err_path);
    if (!result->out || !result->err) {
        cli_result_free(result);
        return -1;
    }
    return 0;
}

/* Writes bmoe-mkmodel's preset shape (--quiet) to path: true when it did,
 * else a failed check that says why. */
static inline bool cli_mkmodel(const char *shape, const char *path)
{
    char binary[1024];
    snprintf(binary, sizeof binary, "%s/bmoe-mkmodel", BMOE_BIN_DIR);
    const char *argv[] = {binary, "--shape", shape, "--quiet", "-o", path, NULL};
    cli_result r;
    bool made = cli_spawn(argv, &r) == 0 && r.exit_code == 0;
    CHECK_MSG(made, "bmoe-mkmodel --shape %s failed: %s", shape, r.err ? r.err : "(not started)");
    cli_result_free(&r);
    return made;
}

/* Runs bmoe-cli with the NULL-terminated arguments (without argv[0]).
 * Returns 0 when the child ran (whatever its status), -1 when it could not
 * be started. Cross-built, the binary runs under the emulator the tests run
 * under: an emulated process that starts another runs it natively. */
static inline int cli_run(const char *const *args, cli_result *result)
{
    char binary[1024];
    snprintf(binary, sizeof binary, "%s/bmoe-cli", BMOE_BIN_DIR);
    const char *argv[64];
    int argc = 0;
#ifdef BMOE_TEST_EMULATOR
    char emulator[] = BMOE_TEST_EMULATOR;
    for (char *word = strtok(emulator, " "); word && argc < 16; word = strtok(NULL, " "))
        argv[argc++] = word;
#endif
    argv[argc++] = binary;
    for (int i = 0; args[i] && argc < 63; i++)
        argv[argc++] = args[i];
    argv[argc] = NULL;
    return cli_spawn(argv, result);
}

/* Runs a /bin/sh script (redirections in it apply); $BMOE_CLI in it is the
 * binary. Same result as cli_run. */
static inline int cli_run_shell(const char *script, cli_result *result)
{
    char binary[1024];
    snprintf(binary, sizeof binary, "%s/bmoe-cli", BMOE_BIN_DIR);
    setenv("BMOE_CLI", binary, 1);
    const char *argv[] = {"/bin/sh", "-c", script, NULL};
    return cli_spawn(argv, result);
}

/* The load-time line a streamed model prints on stderr before anything can
 * fail after the load (the app reads the read mode from it). */
#define CLI_STREAMING_LINE "bmoe: expert streaming ON "

/* stderr is exactly one non-empty line starting with "bmoe-cli: " (after
 * the streaming line, when the model streamed). */
static inline bool cli_one_line_error(const cli_result *result)
{
    const char *err = result->err;
    size_t length = result->err_length;
    if (strncmp(err, CLI_STREAMING_LINE, strlen(CLI_STREAMING_LINE)) == 0 && strchr(err, '\n')) {
        const char *next = strchr(err, '\n') + 1;
        length -= (size_t)(next - err);
        err = next;
    }
    if (length < 12 || strncmp(err, "bmoe-cli: ", 10) != 0)
        return false;
    const char *newline = strchr(err, '\n');
    return newline && (size_t)(newline - err) + 1 == length;
}

/* Cuts a generation's stdout before the end-of-run lines (from the last
 * line that starts with "generation: "), leaving the generated text in out
 * (out_length bytes) and the lines in report; true when there were such
 * lines. The text may hold any byte, a NUL too (a byte token of a
 * random-weights model): the search goes by out_length. */
static inline bool cli_cut_report(cli_result *result)
{
    if (!result->out)
        return false;
    static const char mark[] = "generation: ";
    size_t mark_length = sizeof mark - 1;
    char *out = result->out;
    char *report = NULL;
    for (size_t at = 0; at + mark_length <= result->out_length; at++)
        if ((at == 0 || out[at - 1] == '\n') && memcmp(out + at, mark, mark_length) == 0)
            report = out + at;
    if (!report)
        return false;
    free(result->report);
    result->report = strdup(report);
    *report = '\0';
    result->out_length = (size_t)(report - out);
    return true;
}

#endif
