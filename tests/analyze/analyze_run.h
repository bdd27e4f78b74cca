/* Helpers of the bmoe-analyze tests: run the built binary (BMOE_BIN_DIR) as
 * a child process with stdout and stderr captured, write small input files,
 * and find lines in the captured output. Header-only, one test per file. */
#ifndef BMOE_TESTS_ANALYZE_RUN_H
#define BMOE_TESTS_ANALYZE_RUN_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "test.h"

static char an_dir[1024];
static char an_stdout_path[1200], an_stderr_path[1200];
static char *an_out; /* what the last run printed, NUL-terminated */
static char *an_err;

static inline void an_setup(const char *name)
{
    snprintf(an_dir, sizeof an_dir, "%s/%s", test_tmp_dir(), name);
    mkdir(an_dir, 0755);
    snprintf(an_stdout_path, sizeof an_stdout_path, "%s/stdout.txt", an_dir);
    snprintf(an_stderr_path, sizeof an_stderr_path, "%s/stderr.txt", an_dir);
}

/* A path in this test's scratch folder (a few rotating buffers). */
static inline const char *an_path(const char *name)
{
    static char buffers[8][1200];
    static int next;
    char *buffer = buffers[next++ % 8];
    snprintf(buffer, sizeof buffers[0], "%s/%s", an_dir, name);
    return buffer;
}

static inline void an_write(const char *path, const char *text)
{
    FILE *file = fopen(path, "wb");
    CHECK_MSG(file != NULL, "cannot write %s", path);
    if (!file)
        return;
    fputs(text, file);
    fclose(file);
}

/* Runs `bmoe-analyze ARGS` (printf-formatted, quoted by the caller where
 * needed) with stdout and stderr captured into an_out and an_err; returns
 * the exit status, or -1 when the process did not exit normally (a crash). */
static inline int an_run_redirected(const char *redirect, const char *fmt, ...)
{
    char args[4096], command[8192];
    va_list list;
    va_start(list, fmt);
    vsnprintf(args, sizeof args, fmt, list);
    va_end(list);
    snprintf(command, sizeof command, "'%s/bmoe-analyze' %s %s 2> '%s'", BMOE_BIN_DIR, args,
             redirect ? redirect : "", an_stderr_path);
    if (!redirect) {
        size_t length = strlen(command);
        snprintf(command + length, sizeof command - length, " > '%s'", an_stdout_path);
    }
    int status = system(command);
    free(an_out);
    free(an_err);
    an_out = test_read_file(an_stdout_path, NULL);
    an_err = test_read_file(an_stderr_path, NULL);
    if (!an_out)
        an_out = calloc(1, 1);
    if (!an_err)
        an_err = calloc(1, 1);
    if (redirect)
        an_out[0] = '\0'; /* stdout went elsewhere */
    /* In a sanitized build a report from the child fails the test whatever
     * its exit status was. */
    CHECK_MSG(!strstr(an_err, "Sanitizer") && !strstr(an_err, "runtime error:"),
              "sanitizer report from bmoe-analyze %s:\n%s", args, an_err);
    if (status == -1 || !WIFEXITED(status))
        return -1;
    return WEXITSTATUS(status);
}

#define an_run(...) an_run_redirected(NULL, __VA_ARGS__)

/* The first line of TEXT starting with PREFIX (leading blanks skipped),
 * or NULL. */
static inline const char *an_line(const char *text, const char *prefix)
{
    size_t length = strlen(prefix);
    for (const char *line = text; line && *line;) {
        const char *start = line;
        while (*start == ' ')
            start++;
        if (strncmp(start, prefix, length) == 0)
            return start;
        line = strchr(line, '\n');
        if (line)
            line++;
    }
    return NULL;
}

/* The line after LINE, or NULL. */
static inline const char *an_next_line(const char *line)
{
    line = line ? strchr(line, '\n') : NULL;
    return line && line[1] ? line + 1 : NULL;
}

/* One line of stderr, ending in a newline: the "clear one-line error". */
static inline bool an_one_line_error(void)
{
    size_t length = strlen(an_err);
    return length > 0 && an_err[length - 1] == '\n' && strchr(an_err, '\n') == an_err + length - 1 &&
           strncmp(an_err, "bmoe-analyze: ", 14) == 0;
}

#endif
