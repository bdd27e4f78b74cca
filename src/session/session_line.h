/* Splits the request stream into lines without ever holding more than one
 * line of at most max_line bytes: bytes arrive in any pieces; each complete
 * line (without its '\n', a trailing '\r' dropped) goes to the callback; a
 * line longer than max_line is not kept: its first bytes are dropped with it
 * and the callback hears of it once, at its end, as overlong. A last line
 * without a newline is delivered by session_line_finish. */
#ifndef BMOE_SESSION_LINE_H
#define BMOE_SESSION_LINE_H

#include <stdbool.h>
#include <stddef.h>

/* overlong: the line exceeded the limit (line is NULL, length its size in
 * bytes, at least max_line + 1). Returns false to stop reading. */
typedef bool (*session_line_callback)(void *user, const char *line, size_t length, bool overlong);

typedef struct session_line_reader {
    char *buffer;        /* the line so far */
    size_t length, capacity;
    size_t max_line;
    size_t dropped;      /* > 0: the current line is overlong, this many bytes seen */
    bool failed;         /* out of memory (the line is reported as overlong) */
} session_line_reader;

void session_line_init(session_line_reader *reader, size_t max_line);
void session_line_free(session_line_reader *reader);
/* Returns false when the callback asked to stop. */
bool session_line_feed(session_line_reader *reader, const char *bytes, size_t length, session_line_callback callback,
                       void *user);
bool session_line_finish(session_line_reader *reader, session_line_callback callback, void *user);

#endif
