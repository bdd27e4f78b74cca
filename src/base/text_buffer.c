#include "text_buffer.h"

#include <stdlib.h>
#include <string.h>

bool text_buffer_append(text_buffer *buffer, const char *bytes, size_t length)
{
    if (buffer->length + length + 1 > buffer->capacity) {
        size_t capacity = buffer->capacity ? buffer->capacity : 64;
        while (capacity < buffer->length + length + 1)
            capacity *= 2;
        char *bigger = realloc(buffer->data, capacity);
        if (!bigger)
            return false;
        buffer->data = bigger;
        buffer->capacity = capacity;
    }
    if (length)
        memcpy(buffer->data + buffer->length, bytes, length);
    buffer->length += length;
    buffer->data[buffer->length] = '\0';
    return true;
}

void text_buffer_clear(text_buffer *buffer)
{
    buffer->length = 0;
    if (buffer->data)
        buffer->data[0] = '\0';
}

void text_buffer_consume(text_buffer *buffer, size_t count)
{
    if (count >= buffer->length) {
        text_buffer_clear(buffer);
        return;
    }
    memmove(buffer->data, buffer->data + count, buffer->length - count);
    buffer->length -= count;
    buffer->data[buffer->length] = '\0';
}

void text_buffer_free(text_buffer *buffer)
{
    free(buffer->data);
    memset(buffer, 0, sizeof *buffer);
}

size_t text_partial_suffix(const char *text, size_t length, const char *marker, size_t marker_length)
{
    if (marker_length == 0)
        return 0;
    size_t longest = marker_length - 1 < length ? marker_length - 1 : length;
    for (size_t keep = longest; keep > 0; keep--)
        if (memcmp(text + length - keep, marker, keep) == 0)
            return keep;
    return 0;
}
