/* A growing NUL-terminated byte buffer, and the question the streaming
 * splitters (stop strings, reasoning markers, tool calls) all ask of text
 * that may still grow: does it end with the beginning of a marker? Owns its
 * bytes; a zeroed text_buffer is empty. */
#ifndef BMOE_BASE_TEXT_BUFFER_H
#define BMOE_BASE_TEXT_BUFFER_H

#include <stdbool.h>
#include <stddef.h>

typedef struct text_buffer {
    char *data; /* NUL-terminated once anything was appended; NULL before */
    size_t length, capacity;
} text_buffer;

/* Appends bytes (the buffer doubles as it grows); false when out of memory
 * (the buffer is unchanged). */
bool text_buffer_append(text_buffer *buffer, const char *bytes, size_t length);
void text_buffer_clear(text_buffer *buffer);
/* Drops the first count bytes. */
void text_buffer_consume(text_buffer *buffer, size_t count);
void text_buffer_free(text_buffer *buffer);

/* The length of the longest proper prefix of marker (marker_length bytes)
 * that text[0..length) ends with: the bytes to hold back while the text may
 * still grow into the marker. 0 when none. */
size_t text_partial_suffix(const char *text, size_t length, const char *marker, size_t marker_length);

#endif
