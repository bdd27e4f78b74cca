/* UTF-8 walking and a compact subset of the Unicode tables: the scripts chat
 * text meets in practice (Latin, Greek, Cyrillic, Armenian, fullwidth forms)
 * get real case mappings; CJK and other caseless scripts count as letters.
 * Python uses the full Unicode database; see unicode.h for what is covered. */
/* For memmem, a GNU and BSD extension every libc this runs on provides. */
#define _GNU_SOURCE

#include "chat/unicode.h"

#include <string.h>

/* Invalid bytes map to lone surrogates U+DC80..U+DCFF and back. */
#define ESCAPED_BYTE_BASE 0xDC00u

uint32_t utf8_decode(const char *text, size_t length, size_t *size)
{
    const unsigned char *bytes = (const unsigned char *)text;
    unsigned char lead = bytes[0];
    *size = 1;
    if (lead < 0x80)
        return lead;
    size_t needed;
    uint32_t code_point, minimum;
    if (lead >= 0xC2 && lead <= 0xDF) {
        needed = 1, code_point = lead & 0x1Fu, minimum = 0x80;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        needed = 2, code_point = lead & 0x0Fu, minimum = 0x800;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        needed = 3, code_point = lead & 0x07u, minimum = 0x10000;
    } else {
        return ESCAPED_BYTE_BASE + lead;
    }
    if (length < needed + 1)
        return ESCAPED_BYTE_BASE + lead;
    for (size_t i = 1; i <= needed; i++) {
        if ((bytes[i] & 0xC0) != 0x80)
            return ESCAPED_BYTE_BASE + lead;
        code_point = (code_point << 6) | (bytes[i] & 0x3Fu);
    }
    if (code_point < minimum || code_point > 0x10FFFF || (code_point >= 0xD800 && code_point <= 0xDFFF))
        return ESCAPED_BYTE_BASE + lead;
    *size = needed + 1;
    return code_point;
}

size_t utf8_encode(uint32_t code_point, char out[4])
{
    unsigned char *bytes = (unsigned char *)out;
    if (code_point >= ESCAPED_BYTE_BASE + 0x80 && code_point <= ESCAPED_BYTE_BASE + 0xFF) {
        bytes[0] = (unsigned char)(code_point - ESCAPED_BYTE_BASE);
        return 1;
    }
    if ((code_point >= 0xD800 && code_point <= 0xDFFF) || code_point > 0x10FFFF)
        code_point = 0xFFFD;
    if (code_point < 0x80) {
        bytes[0] = (unsigned char)code_point;
        return 1;
    }
    if (code_point < 0x800) {
        bytes[0] = (unsigned char)(0xC0 | (code_point >> 6));
        bytes[1] = (unsigned char)(0x80 | (code_point & 0x3F));
        return 2;
    }
    if (code_point < 0x10000) {
        bytes[0] = (unsigned char)(0xE0 | (code_point >> 12));
        bytes[1] = (unsigned char)(0x80 | ((code_point >> 6) & 0x3F));
        bytes[2] = (unsigned char)(0x80 | (code_point & 0x3F));
        return 3;
    }
    bytes[0] = (unsigned char)(0xF0 | (code_point >> 18));
    bytes[1] = (unsigned char)(0x80 | ((code_point >> 12) & 0x3F));
    bytes[2] = (unsigned char)(0x80 | ((code_point >> 6) & 0x3F));
    bytes[3] = (unsigned char)(0x80 | (code_point & 0x3F));
    return 4;
}

size_t utf8_count(const char *text, size_t length)
{
    size_t count = 0, size;
    for (size_t offset = 0; offset < length; offset += size, count++)
        utf8_decode(text + offset, length - offset, &size);
    return count;
}

size_t utf8_offset(const char *text, size_t length, size_t index)
{
    size_t offset = 0, size;
    for (; offset < length && index > 0; offset += size, index--)
        utf8_decode(text + offset, length - offset, &size);
    return offset;
}

size_t utf8_previous_size(const char *text, size_t offset)
{
    /* A valid sequence ends here only if decoding from its lead byte covers offset. */
    for (size_t back = 2; back <= 4 && back <= offset; back++) {
        size_t size;
        utf8_decode(text + offset - back, back, &size);
        if (size == back)
            return back;
    }
    return 1;
}

const char *bytes_find(const char *haystack, size_t length, const char *needle, size_t needle_length)
{
    if (needle_length == 0)
        return haystack;
    if (needle_length > length)
        return NULL;
    /* The C libraries' memmem (glibc, bionic, musl) is linear time; a naive
     * search is quadratic on "aaa...ab", which a template could exploit. */
    return memmem(haystack, length, needle, needle_length);
}

bool unicode_is_space(uint32_t c)
{
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

bool unicode_is_line_break(uint32_t c)
{
    return (c >= 0x0A && c <= 0x0D) || (c >= 0x1C && c <= 0x1E) || c == 0x85 || c == 0x2028 || c == 0x2029;
}

/* Ranges where upper and lower forms alternate (upper on even, or on odd). */
struct alternating_range {
    uint32_t first, last;
    bool upper_is_even;
};

static const struct alternating_range alternating_ranges[] = {
    {0x0100, 0x012F, true}, {0x0132, 0x0137, true}, {0x0139, 0x0148, false}, {0x014A, 0x0177, true},
    {0x0179, 0x017E, false}, {0x01CD, 0x01DC, false}, {0x01DE, 0x01EF, true}, {0x01F8, 0x021F, true},
    {0x0222, 0x0233, true}, {0x0460, 0x0481, true}, {0x048A, 0x04BF, true}, {0x04C1, 0x04CE, false},
    {0x04D0, 0x052F, true}, {0x1E00, 0x1E95, true}, {0x1EA0, 0x1EFF, true},
};

/* Ranges where the lower form is the upper plus a fixed distance. */
struct offset_range {
    uint32_t first_upper, last_upper, distance;
};

static const struct offset_range offset_ranges[] = {
    {0x0041, 0x005A, 32},  {0x00C0, 0x00D6, 32},  {0x00D8, 0x00DE, 32}, {0x0391, 0x03A1, 32},
    {0x03A3, 0x03AB, 32},  {0x0388, 0x038A, 37},  {0x0410, 0x042F, 32}, {0x0400, 0x040F, 80},
    {0x0531, 0x0556, 48},  {0xFF21, 0xFF3A, 32},  {0x10A0, 0x10C5, 7264},
};

static bool alternating_pair(uint32_t c, uint32_t *upper, uint32_t *lower)
{
    for (size_t i = 0; i < sizeof alternating_ranges / sizeof alternating_ranges[0]; i++) {
        const struct alternating_range *range = &alternating_ranges[i];
        if (c < range->first || c > range->last)
            continue;
        bool even = (c & 1u) == 0;
        bool is_upper = even == range->upper_is_even;
        *upper = is_upper ? c : c - 1;
        *lower = is_upper ? c + 1 : c;
        return true;
    }
    return false;
}

uint32_t unicode_lower(uint32_t c)
{
    if (c < 0x80)
        return c >= 'A' && c <= 'Z' ? c + 32 : c;
    for (size_t i = 0; i < sizeof offset_ranges / sizeof offset_ranges[0]; i++)
        if (c >= offset_ranges[i].first_upper && c <= offset_ranges[i].last_upper)
            return c + offset_ranges[i].distance;
    uint32_t upper, lower;
    if (alternating_pair(c, &upper, &lower))
        return lower;
    switch (c) {
    case 0x0130: return 'i';
    case 0x0178: return 0x00FF;
    case 0x0386: return 0x03AC;
    case 0x038C: return 0x03CC;
    case 0x038E: return 0x03CD;
    case 0x038F: return 0x03CE;
    case 0x04C0: return 0x04CF;
    default: return c;
    }
}

uint32_t unicode_upper(uint32_t c)
{
    if (c < 0x80)
        return c >= 'a' && c <= 'z' ? c - 32 : c;
    for (size_t i = 0; i < sizeof offset_ranges / sizeof offset_ranges[0]; i++) {
        const struct offset_range *range = &offset_ranges[i];
        if (c >= range->first_upper + range->distance && c <= range->last_upper + range->distance)
            return c - range->distance;
    }
    uint32_t upper, lower;
    if (alternating_pair(c, &upper, &lower))
        return upper;
    switch (c) {
    case 0x00B5: return 0x039C;
    case 0x00FF: return 0x0178;
    case 0x0131: return 'I';
    case 0x017F: return 'S';
    case 0x03C2: return 0x03A3;
    case 0x03AC: return 0x0386;
    case 0x03CC: return 0x038C;
    case 0x03CD: return 0x038E;
    case 0x03CE: return 0x038F;
    case 0x04CF: return 0x04C0;
    default: return c;
    }
}

bool unicode_is_upper(uint32_t c)
{
    return unicode_lower(c) != c;
}

bool unicode_is_lower(uint32_t c)
{
    return unicode_upper(c) != c || c == 0x00DF;
}

bool unicode_is_cased(uint32_t c)
{
    return unicode_is_upper(c) || unicode_is_lower(c);
}

bool unicode_is_digit(uint32_t c)
{
    return (c >= '0' && c <= '9') || c == 0xB2 || c == 0xB3 || c == 0xB9 || (c >= 0x0660 && c <= 0x0669) ||
           (c >= 0x06F0 && c <= 0x06F9) || (c >= 0x0966 && c <= 0x096F) || (c >= 0xFF10 && c <= 0xFF19);
}

bool unicode_is_alpha(uint32_t c)
{
    if (c < 0x80)
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (unicode_is_cased(c) || c == 0xAA || c == 0xBA)
        return true;
    return (c >= 0x05D0 && c <= 0x05EA) || (c >= 0x0620 && c <= 0x064A) || (c >= 0x0904 && c <= 0x0939) ||
           (c >= 0x0E01 && c <= 0x0E30) || (c >= 0x3041 && c <= 0x3096) || (c >= 0x30A1 && c <= 0x30FA) ||
           (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0xAC00 && c <= 0xD7A3) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x20000 && c <= 0x2FFFF);
}

bool unicode_is_printable(uint32_t c)
{
    if (c < 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD)
        return false;
    if (c < 0x100)
        return true;
    if (unicode_is_space(c) || (c >= 0x200B && c <= 0x200F) || (c >= 0x202A && c <= 0x202E) ||
        (c >= 0x2060 && c <= 0x206F) || (c >= 0x0600 && c <= 0x0605) || c == 0x061C || c == 0x06DD ||
        c == 0x070F || c == 0x180E || c == 0xFEFF || (c >= 0xFFF9 && c <= 0xFFFB) || c == 0xFFFE ||
        c == 0xFFFF)
        return false;
    if ((c >= 0xD800 && c <= 0xDFFF) || (c >= 0xE000 && c <= 0xF8FF) || c >= 0xF0000)
        return false;
    if (c >= 0xE0000 && c <= 0xE0FFF)
        return false;
    return true;
}
