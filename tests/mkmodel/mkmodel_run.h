/* Helpers of the bmoe-mkmodel tests: run the built binary (BMOE_BIN_DIR) as
 * a child process with its stdout/stderr captured into files, read files
 * whole, and dequantize rows of a tensor. Header-only, one test per file. */
#ifndef BMOE_TESTS_MKMODEL_RUN_H
#define BMOE_TESTS_MKMODEL_RUN_H

#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "quant/quant.h"
#include "test.h"

static char mk_dir[1024];     /* this test's scratch folder */
static char mk_stdout[1200];  /* captured output of the last run */
static char mk_stderr[1200];

static inline void mk_setup(const char *name)
{
    snprintf(mk_dir, sizeof mk_dir, "%s/%s", test_tmp_dir(), name);
    mkdir(mk_dir, 0755);
    snprintf(mk_stdout, sizeof mk_stdout, "%s/stdout.txt", mk_dir);
    snprintf(mk_stderr, sizeof mk_stderr, "%s/stderr.txt", mk_dir);
}

/* A path inside the scratch folder. */
static inline const char *mk_path(char *buffer, size_t size, const char *name)
{
    snprintf(buffer, size, "%s/%s", mk_dir, name);
    return buffer;
}

/* Runs `bmoe-mkmodel ARGS` (args formatted like printf; shell-quoted by the
 * caller where needed) and returns its exit status, or -1 if it died. */
static inline int mk_run_tool(const char *tool, const char *fmt, ...)
{
    char args[4096], command[8192];
    va_list list;
    va_start(list, fmt);
    vsnprintf(args, sizeof args, fmt, list);
    va_end(list);
    snprintf(command, sizeof command, "'%s/%s' %s > '%s' 2> '%s'", BMOE_BIN_DIR, tool, args,
             mk_stdout, mk_stderr);
    int status = system(command);
    if (status == -1 || !WIFEXITED(status))
        return -1;
    return WEXITSTATUS(status);
}

#define mk_run(...) mk_run_tool("bmoe-mkmodel", __VA_ARGS__)

/* mk_run with limits: files the tool writes may not grow past
 * file_size_limit bytes (0: no limit; a write past it fails with EFBIG),
 * and a run still going after timeout_seconds is killed (returns -2). */
static inline int mk_run_limited(int timeout_seconds, long file_size_limit, const char *fmt, ...)
{
    char args[4096], command[8192];
    va_list list;
    va_start(list, fmt);
    vsnprintf(args, sizeof args, fmt, list);
    va_end(list);
    snprintf(command, sizeof command, "exec '%s/bmoe-mkmodel' %s > '%s' 2> '%s'", BMOE_BIN_DIR, args, mk_stdout,
             mk_stderr);
    pid_t child = fork();
    if (child < 0)
        return -1;
    if (child == 0) {
        if (file_size_limit > 0) {
            struct rlimit limit;
            getrlimit(RLIMIT_FSIZE, &limit);
            limit.rlim_cur = (rlim_t)file_size_limit;
            setrlimit(RLIMIT_FSIZE, &limit);
            signal(SIGXFSZ, SIG_IGN); /* ignored signals stay ignored across exec */
        }
        execl("/bin/sh", "sh", "-c", command, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    for (int waited_ms = 0;; waited_ms += 20) {
        pid_t done = waitpid(child, &status, WNOHANG);
        if (done == child)
            break;
        if (done < 0)
            return -1;
        if (waited_ms >= timeout_seconds * 1000) {
            kill(child, SIGKILL);
            waitpid(child, &status, 0);
            return -2;
        }
        nanosleep(&(struct timespec){.tv_nsec = 20 * 1000 * 1000}, NULL);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Lines in a text. */
static inline int mk_count_lines(const char *text)
{
    int lines = 0;
    for (const char *p = text; *p; p++)
        if (*p == '\n')
            lines++;
    if (*text && text[strlen(text) - 1] != '\n')
        lines++;
    return lines;
}

static inline uint64_t mk_file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* Dequantizes rows [0, rows) of a tensor (all rows if rows exceeds them)
 * into a new float array; NULL if the type has no decoder. */
static inline float *mk_dequantize(const gguf_tensor *t, int64_t rows, int64_t *count_out)
{
    const quant_format *format = quant_format_of(t->type);
    if (!format || !format->dequantize_row)
        return NULL;
    int64_t total_rows = t->ne[1] * t->ne[2] * t->ne[3];
    if (rows > total_rows)
        rows = total_rows;
    size_t row_bytes = quant_row_bytes(t->type, t->ne[0]);
    float *out = malloc((size_t)(rows * t->ne[0]) * sizeof *out);
    if (!out)
        return NULL;
    for (int64_t r = 0; r < rows; r++)
        format->dequantize_row((const uint8_t *)t->data + (size_t)r * row_bytes, out + r * t->ne[0],
                               t->ne[0]);
    *count_out = rows * t->ne[0];
    return out;
}

/* Mean and standard deviation; false if a value is not finite. */
static inline bool mk_stats(const float *values, int64_t n, double *mean, double *deviation)
{
    double sum = 0, squares = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(values[i]))
            return false;
        sum += values[i];
        squares += (double)values[i] * values[i];
    }
    *mean = sum / (double)n;
    *deviation = sqrt(squares / (double)n - *mean * *mean);
    return true;
}

#endif
