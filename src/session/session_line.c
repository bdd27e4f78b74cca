/* The request stream's line splitter (session_line.h). The buffer grows to
 * the longest line seen, never past max_line. */
#include "session_line.h"

#include <stdlib.h>
#include <string.h>

void session_line_init(session_line_reader *reader, size_t max_line)
{
    memset(reader, 0, sizeof *reader);
    reader->max_line = max_line;
}

void session_line_free(session_line_reader *reader)
{
    free(reader->buffer);
    memset(reader, 0, sizeof *reader);
}

/* Keeps bytes of the current line, or counts them once it is overlong. */
static void keep(session_line_reader *reader, const char *bytes, size_t length)
{
    if (length == 0)
        return;
    if (reader->dropped > 0) {
        reader->dropped += length;
        return;
    }
    if (reader->length + length > reader->max_line) {
        reader->dropped = reader->length + length;
        reader->length = 0;
        return;
    }
    if (reader->length + length > reader->capacity) {
        size_t wanted = reader->capacity ? reader->capacity : 4096;
        while (wanted < reader->length + length)
            wanted *= 2;
        if (wanted > reader->max_line)
            wanted = reader->max_line;
        char *bigger = realloc(reader->buffer, wanted);
        if (!bigger) {
            reader->failed = true;
            reader->dropped = reader->length + length;
            reader->length = 0;
            return;
        }
        reader->buffer = bigger;
        reader->capacity = wanted;
    }
    memcpy(reader->buffer + reader->length, bytes, length);
    reader->length += length;
}

static bool deliver(session_line_reader *reader, session_line_callback callback, void *user)
{
    bool go_on;
    if (reader->dropped > 0) {
        go_on = callback(user, NULL, reader->dropped, true);
    } else {
        size_t length = reader->length;
        if (length > 0 && reader->buffer[length - 1] == '\r')
            length--;
        go_on = callback(user, reader->buffer ? reader->buffer : "", length, false);
    }
    reader->length = 0;
    reader->dropped = 0;
    return go_on;
}

bool session_line_feed(session_line_reader *reader, const char *bytes, size_t length, session_line_callback callback,
                       void *user)
{
    while (length > 0) {
        const char *newline = memchr(bytes, '\n', length);
        size_t part = newline ? (size_t)(newline - bytes) : length;
        keep(reader, bytes, part);
        if (!newline)
            return true;
        if (!deliver(reader, callback, user))
            return false;
        bytes += part + 1;
        length -= part + 1;
    }
    return true;
}

bool session_line_finish(session_line_reader *reader, session_line_callback callback, void *user)
{
    if (reader->length == 0 && reader->dropped == 0)
        return true;
    return deliver(reader, callback, user);
}
