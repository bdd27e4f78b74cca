/* A growable byte buffer that telemetry lines and file rows are formatted
 * into before they go out in one write. Owns its bytes; an allocation
 * failure is sticky (failed stays true and later appends do nothing), so a
 * caller checks once before it writes the buffer anywhere. The bytes are
 * always NUL-terminated. */
#ifndef BMOE_TM_BUFFER_H
#define BMOE_TM_BUFFER_H

#include <stdbool.h>
#include <stddef.h>

typedef struct tm_buffer {
    char *data;       /* NULL until the first append */
    size_t length;    /* bytes, not counting the NUL */
    size_t capacity;
    bool failed;      /* an append ran out of memory */
} tm_buffer;

void tm_buffer_init(tm_buffer *buffer);
void tm_buffer_free(tm_buffer *buffer);
/* Forgets the bytes, keeps the memory (and clears failed). */
void tm_buffer_clear(tm_buffer *buffer);
bool tm_buffer_append(tm_buffer *buffer, const void *bytes, size_t length);
bool tm_buffer_append_string(tm_buffer *buffer, const char *text);
bool tm_buffer_printf(tm_buffer *buffer, const char *format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* The bytes as a C string ("" when empty). */
const char *tm_buffer_text(const tm_buffer *buffer);

#endif
