/* JSON string escaping and numbers (tm_json.h). Strings follow RFC 8259:
 * '"' and '\\' escaped, U+0000..U+001F as \b \f \n \r \t or \u00XX; every
 * other valid UTF-8 sequence is copied as it is. */
#include "tm_json.h"

#include <math.h>
#include <stdio.h>

#define TM_REPLACEMENT "\xEF\xBF\xBD"

size_t tm_utf8_sequence(const unsigned char *bytes, size_t length)
{
    if (length == 0)
        return 0;
    unsigned char lead = bytes[0];
    if (lead < 0x80)
        return 1;
    size_t size;
    unsigned int low = 0x80, high = 0xBF; /* the range of the second byte */
    if (lead >= 0xC2 && lead <= 0xDF) {
        size = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        size = 3;
        if (lead == 0xE0)
            low = 0xA0; /* overlong */
        else if (lead == 0xED)
            high = 0x9F; /* surrogates */
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        size = 4;
        if (lead == 0xF0)
            low = 0x90; /* overlong */
        else if (lead == 0xF4)
            high = 0x8F; /* above U+10FFFF */
    } else {
        return 0;
    }
    if (length < size || bytes[1] < low || bytes[1] > high)
        return 0;
    for (size_t i = 2; i < size; i++)
        if (bytes[i] < 0x80 || bytes[i] > 0xBF)
            return 0;
    return size;
}

bool tm_json_string(tm_buffer *out, const char *text, size_t length)
{
    const unsigned char *bytes = (const unsigned char *)text;
    tm_buffer_append(out, "\"", 1);
    size_t run = 0, i = 0; /* bytes[run..i) are copied as they are */
    while (i < length) {
        unsigned char c = bytes[i];
        const char *escape = NULL;
        char code[8];
        size_t sequence = 1;
        if (c == '"') {
            escape = "\\\"";
        } else if (c == '\\') {
            escape = "\\\\";
        } else if (c < 0x20) {
            switch (c) {
            case '\b': escape = "\\b"; break;
            case '\f': escape = "\\f"; break;
            case '\n': escape = "\\n"; break;
            case '\r': escape = "\\r"; break;
            case '\t': escape = "\\t"; break;
            default:
                snprintf(code, sizeof code, "\\u%04x", (unsigned int)c);
                escape = code;
                break;
            }
        } else if (c >= 0x80) {
            sequence = tm_utf8_sequence(bytes + i, length - i);
            if (sequence == 0) {
                escape = TM_REPLACEMENT;
                sequence = 1;
            }
        }
        if (!escape) {
            i += sequence;
            continue;
        }
        tm_buffer_append(out, bytes + run, i - run);
        tm_buffer_append_string(out, escape);
        i += sequence;
        run = i;
    }
    tm_buffer_append(out, bytes + run, length - run);
    return tm_buffer_append(out, "\"", 1);
}

bool tm_json_number(tm_buffer *out, double value, int decimals, double fallback)
{
    if (!isfinite(value))
        value = fallback;
    if (!isfinite(value))
        value = 0.0;
    if (decimals <= 0)
        return tm_buffer_printf(out, "%.0f", value);
    return tm_buffer_printf(out, "%.*f", decimals, value);
}
