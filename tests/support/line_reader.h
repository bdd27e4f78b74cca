/* Lines from a child's output descriptor (a pipe), for the tests that drive
 * a session: each call returns the next whole line, waiting at most a given
 * time for it, so that a session that stops answering fails the test instead
 * of hanging it. */
#ifndef BMOE_TESTS_LINE_READER_H
#define BMOE_TESTS_LINE_READER_H

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"

typedef struct line_reader {
    int fd;
    char *buffer;
    size_t length, capacity;
    bool eof;
} line_reader;

/* The next line without its newline (malloc'd), or NULL at EOF or when none
 * came in wait_ms (a failed check). */
static inline char *line_reader_next(line_reader *r, int wait_ms)
{
    for (;;) {
        char *newline = r->buffer ? memchr(r->buffer, '\n', r->length) : NULL;
        if (newline) {
            size_t n = (size_t)(newline - r->buffer);
            char *line = malloc(n + 1);
            memcpy(line, r->buffer, n);
            line[n] = '\0';
            memmove(r->buffer, newline + 1, r->length - n - 1);
            r->length -= n + 1;
            return line;
        }
        if (r->eof)
            return NULL;
        struct pollfd wait = {r->fd, POLLIN, 0};
        int ready = poll(&wait, 1, wait_ms);
        if (ready < 0 && errno == EINTR)
            continue;
        if (ready <= 0) {
            CHECK_MSG(false, "no line in %d ms", wait_ms);
            return NULL;
        }
        if (r->length + 65536 > r->capacity) {
            r->capacity = (r->length + 65536) * 2;
            r->buffer = realloc(r->buffer, r->capacity);
        }
        ssize_t got = read(r->fd, r->buffer + r->length, 65536);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            r->eof = true;
        else
            r->length += (size_t)got;
    }
}

static inline void line_reader_free(line_reader *r)
{
    free(r->buffer);
    r->buffer = NULL;
    r->length = r->capacity = 0;
}

#endif
