/* str() and repr() as Python prints them: True/False/None, 1.0 for a float
 * that is whole, shortest round-trip float digits, lists as ['a', 1], dicts
 * as {'k': 1}, tuples as (1,), strings quoted the way repr() picks. */
#include "chat/value.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/unicode.h"

size_t format_python_float(double number, char out[32])
{
    if (isnan(number))
        return (size_t)snprintf(out, 32, "nan");
    if (isinf(number))
        return (size_t)snprintf(out, 32, number < 0 ? "-inf" : "inf");
    if (number == 0)
        return (size_t)snprintf(out, 32, signbit(number) ? "-0.0" : "0.0");
    /* Python prints the shortest digits that read back as the same double. */
    char scientific[48];
    for (int precision = 1; precision <= 17; precision++) {
        snprintf(scientific, sizeof scientific, "%.*e", precision - 1, number);
        if (strtod(scientific, NULL) == number)
            break;
    }
    char digits[24];
    size_t count = 0;
    const char *cursor = scientific;
    bool negative = *cursor == '-';
    if (negative)
        cursor++;
    for (; *cursor && *cursor != 'e'; cursor++)
        if (*cursor >= '0' && *cursor <= '9' && count < sizeof digits - 1)
            digits[count++] = *cursor;
    int exponent = *cursor == 'e' ? atoi(cursor + 1) : 0;
    while (count > 1 && digits[count - 1] == '0')
        count--;
    digits[count] = '\0';

    size_t length = 0;
    if (negative)
        out[length++] = '-';
    if (exponent < -4 || exponent >= 16) {
        out[length++] = digits[0];
        if (count > 1) {
            out[length++] = '.';
            memcpy(out + length, digits + 1, count - 1);
            length += count - 1;
        }
        length += (size_t)snprintf(out + length, 32 - length, "e%c%02d", exponent < 0 ? '-' : '+',
                                   exponent < 0 ? -exponent : exponent);
    } else if (exponent >= 0) {
        size_t whole = (size_t)exponent + 1;
        for (size_t i = 0; i < whole; i++)
            out[length++] = i < count ? digits[i] : '0';
        out[length++] = '.';
        if (count > whole) {
            memcpy(out + length, digits + whole, count - whole);
            length += count - whole;
        } else {
            out[length++] = '0';
        }
    } else {
        out[length++] = '0';
        out[length++] = '.';
        for (int i = 0; i < -exponent - 1; i++)
            out[length++] = '0';
        memcpy(out + length, digits, count);
        length += count;
    }
    out[length] = '\0';
    return length;
}

bool write_python_string_repr(struct string_builder *builder, const char *text, size_t length)
{
    bool has_single = memchr(text, '\'', length) != NULL, has_double = memchr(text, '"', length) != NULL;
    char quote = has_single && !has_double ? '"' : '\'';
    builder_append_char(builder, quote);
    size_t size;
    for (size_t offset = 0; offset < length; offset += size) {
        uint32_t c = utf8_decode(text + offset, length - offset, &size);
        char escape[16];
        if (c == (uint32_t)quote || c == '\\') {
            escape[0] = '\\', escape[1] = (char)c;
            builder_append(builder, escape, 2);
        } else if (c == '\n') {
            builder_append(builder, "\\n", 2);
        } else if (c == '\r') {
            builder_append(builder, "\\r", 2);
        } else if (c == '\t') {
            builder_append(builder, "\\t", 2);
        } else if (unicode_is_printable(c) || c == ' ') {
            builder_append(builder, text + offset, size);
        } else if (c <= 0xFF) {
            snprintf(escape, sizeof escape, "\\x%02x", (unsigned)c);
            builder_append_cstring(builder, escape);
        } else if (c <= 0xFFFF) {
            snprintf(escape, sizeof escape, "\\u%04x", (unsigned)c);
            builder_append_cstring(builder, escape);
        } else {
            snprintf(escape, sizeof escape, "\\U%08x", (unsigned)c);
            builder_append_cstring(builder, escape);
        }
    }
    return builder_append_char(builder, quote);
}

static int write_value(struct string_builder *builder, chat_value value, bool repr, int depth);

static int write_items(struct string_builder *builder, const struct chat_list *list, int depth)
{
    for (size_t i = 0; i < list->count; i++) {
        if (i)
            builder_append(builder, ", ", 2);
        int status = write_value(builder, list->items[i], true, depth + 1);
        if (status != VALUE_OK)
            return status;
    }
    return VALUE_OK;
}

static int write_entries(struct string_builder *builder, const struct chat_dict *dict, int depth)
{
    builder_append_char(builder, '{');
    for (size_t i = 0; i < dict->count; i++) {
        if (i)
            builder_append(builder, ", ", 2);
        int status = write_value(builder, dict->entries[i].key, true, depth + 1);
        if (status != VALUE_OK)
            return status;
        builder_append(builder, ": ", 2);
        status = write_value(builder, dict->entries[i].value, true, depth + 1);
        if (status != VALUE_OK)
            return status;
    }
    builder_append_char(builder, '}');
    return VALUE_OK;
}

static int write_value(struct string_builder *builder, chat_value value, bool repr, int depth)
{
    if (depth > VALUE_DEPTH_MAX)
        return VALUE_TOO_DEEP;
    char text[64];
    int status = VALUE_OK;
    switch (value.kind) {
    case CHAT_VALUE_NONE: builder_append(builder, "None", 4); break;
    case CHAT_VALUE_BOOL: builder_append_cstring(builder, value.as.boolean ? "True" : "False"); break;
    case CHAT_VALUE_INT:
        snprintf(text, sizeof text, "%" PRId64, value.as.integer);
        builder_append_cstring(builder, text);
        break;
    case CHAT_VALUE_FLOAT:
        builder_append(builder, text, format_python_float(value.as.number, text));
        break;
    case CHAT_VALUE_STRING:
        if (repr && (value_string(value)->base.flags & STRING_SAFE)) {
            builder_append_cstring(builder, "Markup(");
            write_python_string_repr(builder, value_string(value)->bytes, value_string(value)->length);
            builder_append_char(builder, ')');
        } else if (repr)
            write_python_string_repr(builder, value_string(value)->bytes, value_string(value)->length);
        else
            builder_append(builder, value_string(value)->bytes, value_string(value)->length);
        break;
    case CHAT_VALUE_UNDEFINED:
        if (repr)
            builder_append_cstring(builder, "Undefined");
        break;
    case CHAT_VALUE_ARRAY:
        builder_append_char(builder, '[');
        status = write_items(builder, value_list(value), depth);
        builder_append_char(builder, ']');
        break;
    case CHAT_VALUE_TUPLE:
        builder_append_char(builder, '(');
        status = write_items(builder, value_list(value), depth);
        if (value_list(value)->count == 1)
            builder_append_char(builder, ',');
        builder_append_char(builder, ')');
        break;
    case CHAT_VALUE_OBJECT: status = write_entries(builder, value_dict(value), depth); break;
    case CHAT_VALUE_NAMESPACE:
        builder_append_cstring(builder, "<Namespace ");
        status = write_entries(builder, value_dict(value), depth);
        builder_append_char(builder, '>');
        break;
    case CHAT_VALUE_RANGE: {
        const struct chat_range *range = (const struct chat_range *)value.as.object;
        if (range->step == 1)
            snprintf(text, sizeof text, "range(%" PRId64 ", %" PRId64 ")", range->start, range->stop);
        else
            snprintf(text, sizeof text, "range(%" PRId64 ", %" PRId64 ", %" PRId64 ")", range->start,
                     range->stop, range->step);
        builder_append_cstring(builder, text);
        break;
    }
    case CHAT_VALUE_MACRO: {
        const struct chat_macro *macro = (const struct chat_macro *)value.as.object;
        builder_append_cstring(builder, "<Macro ");
        write_python_string_repr(builder, macro->name, macro->name_length);
        builder_append_char(builder, '>');
        break;
    }
    case CHAT_VALUE_BUILTIN:
        builder_append_cstring(builder, "<built-in function ");
        builder_append_cstring(builder, builtin_name(value.detail));
        builder_append_char(builder, '>');
        break;
    case CHAT_VALUE_METHOD: {
        const struct chat_method *method = (const struct chat_method *)value.as.object;
        builder_append_cstring(builder, "<built-in method ");
        builder_append_cstring(builder, method_name(method->method));
        builder_append_cstring(builder, " of ");
        builder_append_cstring(builder, value_type_name(method->receiver));
        builder_append_cstring(builder, " object>");
        break;
    }
    case CHAT_VALUE_LOOP: {
        const struct chat_loop *loop = (const struct chat_loop *)value.as.object;
        snprintf(text, sizeof text, "<LoopContext %zu/%zu>", loop->index + 1, loop->length);
        builder_append_cstring(builder, text);
        break;
    }
    default: break;
    }
    if (status == VALUE_OK && builder->failed)
        status = VALUE_NO_MEMORY;
    return status;
}

int value_write_str(struct string_builder *builder, chat_value value)
{
    return write_value(builder, value, false, 0);
}

int value_write_repr(struct string_builder *builder, chat_value value)
{
    return write_value(builder, value, true, 0);
}
