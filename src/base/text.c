#include "text.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* The escaped form of one byte into piece (at least 5 bytes); its length.
 * quoting: the backslash and the single quote get a backslash too. */
static size_t escape_byte(unsigned char c, bool quoting, char *piece)
{
    if (quoting && (c == '\\' || c == '\'')) {
        piece[0] = '\\';
        piece[1] = (char)c;
        return 2;
    }
    if (c == '\n' || c == '\t' || c == '\r') {
        piece[0] = '\\';
        piece[1] = c == '\n' ? 'n' : c == '\t' ? 't' : 'r';
        return 2;
    }
    if (c >= 0x20 && c < 0x7f) {
        piece[0] = (char)c;
        return 1;
    }
    snprintf(piece, 5, "\\x%02x", c);
    return 4;
}

static const char *escape(const void *bytes, size_t length, bool quoting, char *out, size_t out_size)
{
    const unsigned char *text = bytes;
    size_t total = 0;
    char piece[5];
    for (size_t i = 0; i < length; i++)
        total += escape_byte(text[i], quoting, piece);
    /* Cut texts keep room for "..." and the NUL. */
    bool cut = total + 1 > out_size;
    size_t limit = cut ? (out_size > 4 ? out_size - 4 : 0) : out_size - 1;
    size_t used = 0;
    for (size_t i = 0; i < length; i++) {
        size_t n = escape_byte(text[i], quoting, piece);
        if (used + n > limit)
            break;
        memcpy(out + used, piece, n);
        used += n;
    }
    if (cut && out_size > 4) {
        memcpy(out + used, "...", 3);
        used += 3;
    }
    out[used] = '\0';
    return out;
}

const char *text_escape(const void *bytes, size_t length, char *out, size_t out_size)
{
    return escape(bytes, length, true, out, out_size);
}

const char *text_escape_string(const char *text, char *out, size_t out_size)
{
    return escape(text, strlen(text), true, out, out_size);
}

const char *text_escape_message(const char *message, char *out, size_t out_size)
{
    return escape(message, strlen(message), false, out, out_size);
}
