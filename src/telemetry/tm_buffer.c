/* The growable buffer of tm_buffer.h. */
#include "tm_buffer.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tm_buffer_init(tm_buffer *buffer)
{
    memset(buffer, 0, sizeof *buffer);
}

void tm_buffer_free(tm_buffer *buffer)
{
    free(buffer->data);
    memset(buffer, 0, sizeof *buffer);
}

void tm_buffer_clear(tm_buffer *buffer)
{
    buffer->length = 0;
    buffer->failed = false;
    if (buffer->data)
        buffer->data[0] = '\0';
}

/* Room for extra more bytes and the NUL. */
static bool tm_buffer_reserve(tm_buffer *buffer, size_t extra)
{
    if (buffer->failed)
        return false;
    if (extra > (size_t)-1 / 2 - buffer->length - 1) {
        buffer->failed = true;
        return false;
    }
    size_t needed = buffer->length + extra + 1;
    if (needed <= buffer->capacity)
        return true;
    size_t capacity = buffer->capacity ? buffer->capacity : 256;
    while (capacity < needed)
        capacity *= 2;
    char *bigger = realloc(buffer->data, capacity);
    if (!bigger) {
        buffer->failed = true;
        return false;
    }
    buffer->data = bigger;
    buffer->capacity = capacity;
    return true;
}

bool tm_buffer_append(tm_buffer *buffer, const void *bytes, size_t length)
{
    if (!tm_buffer_reserve(buffer, length))
        return false;
    if (length > 0)
        memcpy(buffer->data + buffer->length, bytes, length);
    buffer->length += length;
    buffer->data[buffer->length] = '\0';
    return true;
}

bool tm_buffer_append_string(tm_buffer *buffer, const char *text)
{
    return tm_buffer_append(buffer, text, strlen(text));
}

bool tm_buffer_printf(tm_buffer *buffer, const char *format, ...)
{
    if (buffer->failed)
        return false;
    char small[256];
    va_list args;
    va_start(args, format);
    int needed = vsnprintf(small, sizeof small, format, args);
    va_end(args);
    if (needed < 0) {
        buffer->failed = true;
        return false;
    }
    if ((size_t)needed < sizeof small)
        return tm_buffer_append(buffer, small, (size_t)needed);
    if (!tm_buffer_reserve(buffer, (size_t)needed))
        return false;
    va_start(args, format);
    vsnprintf(buffer->data + buffer->length, (size_t)needed + 1, format, args);
    va_end(args);
    buffer->length += (size_t)needed;
    return true;
}

const char *tm_buffer_text(const tm_buffer *buffer)
{
    return buffer->data ? buffer->data : "";
}
