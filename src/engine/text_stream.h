/* The text of a generation as it grows piece by piece: token pieces may end
 * inside a UTF-8 sequence, so an incomplete tail is held until the next piece
 * completes it (or the end turns it into U+FFFD); bytes that can never form
 * a character become U+FFFD (src/base/utf8.h), so every delta is valid UTF-8.
 * Text that might be the beginning of a stop string is held until it is
 * known not to be; a stop string ends the text before it.
 * Owns: its copies of the stop strings and its buffers. */
#ifndef BMOE_ENGINE_TEXT_STREAM_H
#define BMOE_ENGINE_TEXT_STREAM_H

#include <stdbool.h>
#include <stddef.h>

#include "../base/text_buffer.h"
#include "bmoe.h"

typedef struct text_stream {
    unsigned char tail[4]; /* an incomplete UTF-8 sequence */
    size_t n_tail;
    text_buffer held;      /* valid text that may start a stop string */
    text_buffer delta;     /* text made final since the last text_stream_take */
    char **stops;
    size_t *stop_lengths;
    int n_stops;
    bool stopped;          /* a stop string was found; later pushes are ignored */
} text_stream;

/* Copies the stop strings (empty ones are ignored). Returns 0 or -1. */
int text_stream_init(text_stream *stream, const char *const *stops, int n_stops, bmoe_error *err);
void text_stream_free(text_stream *stream);

/* Appends bytes. check_stops false (an echoed prompt): the bytes are never
 * matched against the stop strings. Returns 1 when a stop string was found
 * (the text ends before it), 0 otherwise, -1 when out of memory. */
int text_stream_push(text_stream *stream, const char *bytes, size_t length, bool check_stops, bmoe_error *err);
/* The end: whatever is held becomes final (an incomplete tail as U+FFFD). */
int text_stream_finish(text_stream *stream, bmoe_error *err);

/* The text made final since the previous call; valid until the next call on
 * the stream. */
const char *text_stream_take(text_stream *stream, size_t *length);

#endif
