/* The str operations behind filters and methods. Indexes and lengths are
 * in code points; ASCII strings (flagged when built) take byte shortcuts. */
#include "chat/string_ops.h"

#include <string.h>

#include "chat/render.h"
#include "chat/unicode.h"

#define CHARS_MAX 64

static const struct chat_string *string_of(chat_value value)
{
    return value_string(value);
}

size_t text_length(chat_value text)
{
    size_t length;
    value_length(text, &length);
    return length;
}

/* The set of code points in chars (at most CHARS_MAX distinct ones are used). */
static size_t decode_set(chat_value chars, uint32_t *set)
{
    const struct chat_string *string = string_of(chars);
    size_t count = 0, size;
    for (size_t offset = 0; offset < string->length && count < CHARS_MAX; offset += size)
        set[count++] = utf8_decode(string->bytes + offset, string->length - offset, &size);
    return count;
}

static bool in_set(uint32_t c, const uint32_t *set, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (set[i] == c)
            return true;
    return false;
}

int text_strip(struct render *render, int line, chat_value text, chat_value chars, bool left, bool right,
               chat_value *result)
{
    const struct chat_string *string = string_of(text);
    uint32_t set[CHARS_MAX];
    bool whitespace = chars.kind != CHAT_VALUE_STRING;
    size_t count = whitespace ? 0 : decode_set(chars, set);
    size_t start = 0, end = string->length, size;
    while (left && start < end) {
        uint32_t c = utf8_decode(string->bytes + start, end - start, &size);
        if (whitespace ? !unicode_is_space(c) : !in_set(c, set, count))
            break;
        start += size;
    }
    while (right && end > start) {
        size = utf8_previous_size(string->bytes, end);
        size_t decoded;
        uint32_t c = utf8_decode(string->bytes + end - size, size, &decoded);
        if (decoded != size || (whitespace ? !unicode_is_space(c) : !in_set(c, set, count)))
            break;
        end -= size;
    }
    if (start == 0 && end == string->length) {
        *result = value_retain(text);
        return 0;
    }
    return make_string(render, line, string->bytes + start, end - start, result);
}

static void append_case(struct string_builder *builder, uint32_t c, bool upper)
{
    if (upper && c == 0xDF) {
        builder_append(builder, "SS", 2);
        return;
    }
    builder_append_code_point(builder, upper ? unicode_upper(c) : unicode_lower(c));
}

static bool is_title_boundary(uint32_t c)
{
    return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || unicode_is_space(c);
}

int text_case(struct render *render, int line, chat_value text, enum case_mapping mapping, chat_value *result)
{
    const struct chat_string *string = string_of(text);
    struct string_builder builder;
    builder_init(&builder, &render->heap, 0);
    bool previous_cased = false, first = true, previous_boundary = false;
    size_t size;
    for (size_t offset = 0; offset < string->length; offset += size) {
        uint32_t c = utf8_decode(string->bytes + offset, string->length - offset, &size);
        if ((unsigned char)string->bytes[offset] >= 0x80 && size == 1 && c >= 0xDC80) {
            builder_append(&builder, string->bytes + offset, 1); /* an invalid byte stays as it was */
            continue;
        }
        switch (mapping) {
        case CASE_UPPER: append_case(&builder, c, true); break;
        case CASE_LOWER: append_case(&builder, c, false); break;
        case CASE_SWAP: append_case(&builder, c, !unicode_is_upper(c)); break;
        case CASE_CAPITALIZE: append_case(&builder, c, first); break;
        case CASE_TITLE:
            if (unicode_is_cased(c)) {
                append_case(&builder, c, !previous_cased);
                previous_cased = true;
            } else {
                builder_append_code_point(&builder, c);
                previous_cased = false;
            }
            break;
        case CASE_JINJA_TITLE: {
            /* Jinja2 splits on runs of boundary characters and capitalizes each piece. */
            bool boundary = is_title_boundary(c);
            bool starts_piece = first || boundary != previous_boundary;
            append_case(&builder, c, starts_piece);
            previous_boundary = boundary;
            break;
        }
        }
        first = false;
    }
    return finish_string(render, line, &builder, result);
}

/* CPython's ADJUST_INDICES: end is clamped to [0, count], start only from below. */
static void adjust_indices(int64_t *start, int64_t *end, size_t count)
{
    int64_t length = (int64_t)count;
    if (*end > length)
        *end = length;
    else if (*end < 0 && (*end += length) < 0)
        *end = 0;
    if (*start < 0 && (*start += length) < 0)
        *start = 0;
}

static size_t byte_offset(const struct chat_string *string, int64_t index)
{
    if (string->base.flags & STRING_ASCII)
        return (size_t)index;
    return utf8_offset(string->bytes, string->length, (size_t)index);
}

static int64_t code_point_index(const struct chat_string *string, size_t offset)
{
    if (string->base.flags & STRING_ASCII)
        return (int64_t)offset;
    return (int64_t)utf8_count(string->bytes, offset);
}

int64_t text_find(chat_value text, chat_value needle, int64_t start, int64_t end, bool reverse)
{
    const struct chat_string *haystack = string_of(text), *sought = string_of(needle);
    adjust_indices(&start, &end, text_length(text));
    if (start > end)
        return -1;
    if (sought->length == 0)
        return reverse ? end : start;
    size_t from = byte_offset(haystack, start), to = byte_offset(haystack, end);
    if (to - from < sought->length)
        return -1;
    if (!reverse) {
        const char *found = bytes_find(haystack->bytes + from, to - from, sought->bytes, sought->length);
        return found ? code_point_index(haystack, (size_t)(found - haystack->bytes)) : -1;
    }
    for (size_t offset = to - sought->length + 1; offset-- > from;)
        if (memcmp(haystack->bytes + offset, sought->bytes, sought->length) == 0)
            return code_point_index(haystack, offset);
    return -1;
}

int64_t text_count(chat_value text, chat_value needle, int64_t start, int64_t end)
{
    const struct chat_string *haystack = string_of(text), *sought = string_of(needle);
    adjust_indices(&start, &end, text_length(text));
    if (start > end)
        return 0;
    if (sought->length == 0)
        return end - start + 1;
    size_t from = byte_offset(haystack, start), to = byte_offset(haystack, end);
    int64_t count = 0;
    const char *cursor = haystack->bytes + from, *limit = haystack->bytes + to;
    while ((size_t)(limit - cursor) >= sought->length) {
        const char *found = bytes_find(cursor, (size_t)(limit - cursor), sought->bytes, sought->length);
        if (!found)
            break;
        count++;
        cursor = found + sought->length;
    }
    return count;
}

int text_replace(struct render *render, int line, chat_value text, chat_value old, chat_value replacement,
                 int64_t count, chat_value *result)
{
    const struct chat_string *string = string_of(text), *from = string_of(old), *to = string_of(replacement);
    struct string_builder builder;
    builder_init(&builder, &render->heap, 0);
    if (from->length == 0) {
        /* Python puts the replacement around every code point. */
        size_t size;
        int64_t done = 0;
        for (size_t offset = 0; offset <= string->length; offset += size) {
            if (count < 0 || done < count) {
                builder_append(&builder, to->bytes, to->length);
                done++;
            }
            if (offset == string->length)
                break;
            utf8_decode(string->bytes + offset, string->length - offset, &size);
            builder_append(&builder, string->bytes + offset, size);
        }
        return finish_string(render, line, &builder, result);
    }
    const char *cursor = string->bytes, *end = string->bytes + string->length;
    for (int64_t done = 0; count < 0 || done < count; done++) {
        const char *found = (size_t)(end - cursor) >= from->length
                                ? bytes_find(cursor, (size_t)(end - cursor), from->bytes, from->length)
                                : NULL;
        if (!found)
            break;
        builder_append(&builder, cursor, (size_t)(found - cursor));
        builder_append(&builder, to->bytes, to->length);
        cursor = found + from->length;
        /* A match costs a search and two appends whatever its length. */
        if (render_charge(render, line, RENDER_STEP_WORK) != 0) {
            builder_discard(&builder);
            return -1;
        }
    }
    builder_append(&builder, cursor, (size_t)(end - cursor));
    return finish_string(render, line, &builder, result);
}

static int append_piece(struct render *render, int line, chat_value list, const char *text, size_t length)
{
    chat_value piece;
    if (make_string(render, line, text, length, &piece) != 0)
        return -1;
    return list_append(list, piece) == 0 ? 0 : render_fail_status(render, line, VALUE_NO_MEMORY);
}

static bool space_before(const char *text, size_t end, size_t *size)
{
    *size = utf8_previous_size(text, end);
    size_t decoded;
    uint32_t c = utf8_decode(text + end - *size, *size, &decoded);
    return decoded == *size && unicode_is_space(c);
}

static int split_whitespace(struct render *render, int line, const struct chat_string *string, int64_t maxsplit,
                            bool from_right, chat_value list)
{
    const char *text = string->bytes;
    size_t length = string->length, size;
    int64_t splits = 0;
    if (!from_right) {
        size_t offset = 0;
        for (;;) {
            while (offset < length && unicode_is_space(utf8_decode(text + offset, length - offset, &size)))
                offset += size;
            if (offset >= length)
                return 0;
            if (maxsplit >= 0 && splits >= maxsplit)
                return append_piece(render, line, list, text + offset, length - offset);
            size_t start = offset;
            while (offset < length && !unicode_is_space(utf8_decode(text + offset, length - offset, &size)))
                offset += size;
            if (append_piece(render, line, list, text + start, offset - start) != 0)
                return -1;
            splits++;
        }
    }
    /* From the right the pieces come last first; reversed at the end. */
    size_t end = length;
    size_t first_new = value_list(list)->count;
    for (;;) {
        while (end > 0 && space_before(text, end, &size))
            end -= size;
        if (end == 0)
            break;
        if (maxsplit >= 0 && splits >= maxsplit) {
            if (append_piece(render, line, list, text, end) != 0)
                return -1;
            break;
        }
        size_t start = end;
        while (start > 0 && !space_before(text, start, &size))
            start -= size;
        if (append_piece(render, line, list, text + start, end - start) != 0)
            return -1;
        splits++;
        end = start;
    }
    struct chat_list *items = value_list(list);
    for (size_t i = first_new, j = items->count; i + 1 < j; i++, j--) {
        chat_value swap = items->items[i];
        items->items[i] = items->items[j - 1];
        items->items[j - 1] = swap;
    }
    return 0;
}

int text_split(struct render *render, int line, chat_value text, chat_value separator, int64_t maxsplit,
               bool from_right, chat_value *result)
{
    chat_value list = value_list_new(&render->heap, CHAT_VALUE_ARRAY, 0);
    if (list.kind == CHAT_VALUE_INVALID)
        return render_fail_status(render, line, VALUE_NO_MEMORY);
    const struct chat_string *string = string_of(text);
    int status;
    if (separator.kind != CHAT_VALUE_STRING) {
        status = split_whitespace(render, line, string, maxsplit, from_right, list);
    } else if (string_of(separator)->length == 0) {
        status = render_fail(render, line, "empty separator");
    } else {
        const struct chat_string *sep = string_of(separator);
        status = 0;
        if (!from_right) {
            const char *cursor = string->bytes, *end = string->bytes + string->length;
            for (int64_t splits = 0; status == 0; splits++) {
                const char *found = (maxsplit < 0 || splits < maxsplit) && (size_t)(end - cursor) >= sep->length
                                        ? bytes_find(cursor, (size_t)(end - cursor), sep->bytes, sep->length)
                                        : NULL;
                if (!found) {
                    status = append_piece(render, line, list, cursor, (size_t)(end - cursor));
                    break;
                }
                status = append_piece(render, line, list, cursor, (size_t)(found - cursor));
                cursor = found + sep->length;
            }
        } else if ((status = render_charge_reverse_search(render, line, string->length, sep->length)) == 0) {
            size_t end = string->length, first_new = 0;
            for (int64_t splits = 0; status == 0; splits++) {
                size_t found = SIZE_MAX;
                if ((maxsplit < 0 || splits < maxsplit) && end >= sep->length)
                    for (size_t offset = end - sep->length + 1; offset-- > 0;)
                        if (memcmp(string->bytes + offset, sep->bytes, sep->length) == 0) {
                            found = offset;
                            break;
                        }
                if (found == SIZE_MAX) {
                    status = append_piece(render, line, list, string->bytes, end);
                    break;
                }
                status = append_piece(render, line, list, string->bytes + found + sep->length,
                                      end - found - sep->length);
                end = found;
            }
            struct chat_list *items = value_list(list);
            for (size_t i = first_new, j = items->count; i + 1 < j; i++, j--) {
                chat_value swap = items->items[i];
                items->items[i] = items->items[j - 1];
                items->items[j - 1] = swap;
            }
        }
    }
    if (status != 0) {
        value_release(list);
        return -1;
    }
    *result = list;
    return 0;
}

int text_splitlines(struct render *render, int line, chat_value text, bool keep_ends, chat_value *result)
{
    chat_value list = value_list_new(&render->heap, CHAT_VALUE_ARRAY, 0);
    if (list.kind == CHAT_VALUE_INVALID)
        return render_fail_status(render, line, VALUE_NO_MEMORY);
    const struct chat_string *string = string_of(text);
    size_t start = 0, offset = 0, size;
    int status = 0;
    while (offset < string->length && status == 0) {
        uint32_t c = utf8_decode(string->bytes + offset, string->length - offset, &size);
        if (!unicode_is_line_break(c)) {
            offset += size;
            continue;
        }
        size_t end = offset;
        offset += size;
        if (c == '\r' && offset < string->length && string->bytes[offset] == '\n')
            offset++;
        status = append_piece(render, line, list, string->bytes + start, (keep_ends ? offset : end) - start);
        start = offset;
    }
    if (status == 0 && start < string->length)
        status = append_piece(render, line, list, string->bytes + start, string->length - start);
    if (status != 0) {
        value_release(list);
        return -1;
    }
    *result = list;
    return 0;
}

int text_pad(struct render *render, int line, chat_value text, int64_t width, uint32_t fill, char align,
             chat_value *result)
{
    size_t length = text_length(text);
    if (width <= (int64_t)length) {
        *result = value_retain(text);
        return 0;
    }
    uint64_t margin = (uint64_t)width - length, left;
    if (align == '<')
        left = 0;
    else if (align == '>')
        left = margin;
    else
        left = margin / 2 + (margin & (uint64_t)width & 1);
    char bytes[4];
    size_t size = utf8_encode(fill, bytes);
    struct string_builder builder;
    builder_init(&builder, &render->heap, 0);
    builder_append_repeat(&builder, bytes, size, (size_t)left);
    builder_append(&builder, string_of(text)->bytes, string_of(text)->length);
    builder_append_repeat(&builder, bytes, size, (size_t)(margin - left));
    return finish_string(render, line, &builder, result);
}

bool text_is(chat_value text, const char *kind)
{
    const struct chat_string *string = string_of(text);
    size_t size;
    bool any_cased = false, previous_cased = false;
    if (string->length == 0)
        return false;
    for (size_t offset = 0; offset < string->length; offset += size) {
        uint32_t c = utf8_decode(string->bytes + offset, string->length - offset, &size);
        switch (kind[0]) {
        case 'd': if (!unicode_is_digit(c)) return false; break;
        case 'a':
            if (kind[2] == 'p' ? !unicode_is_alpha(c) : !(unicode_is_alpha(c) || unicode_is_digit(c)))
                return false;
            break;
        case 's': if (!unicode_is_space(c)) return false; break;
        case 'l': if (unicode_is_upper(c)) return false; any_cased |= unicode_is_lower(c); break;
        case 'u': if (unicode_is_lower(c) && !unicode_is_upper(c)) return false; any_cased |= unicode_is_upper(c); break;
        case 't':
            if (unicode_is_upper(c)) {
                if (previous_cased)
                    return false;
                previous_cased = any_cased = true;
            } else if (unicode_is_lower(c)) {
                if (!previous_cased)
                    return false;
                previous_cased = any_cased = true;
            } else {
                previous_cased = false;
            }
            break;
        default: return false;
        }
    }
    return kind[0] == 'l' || kind[0] == 'u' || kind[0] == 't' ? any_cased : true;
}
