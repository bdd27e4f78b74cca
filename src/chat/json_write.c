/* JSON serialization matching CPython's json encoder: floats by repr (NaN,
 * Infinity), non-string keys converted as Python converts them, control
 * characters as \u00XX in lower-case hex, non-ASCII kept unless ensure_ascii. */
#include "chat/json_write.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/unicode.h"
#include "chat/value_sort.h"

void json_options_default(struct json_options *options, bool indented)
{
    options->indented = indented;
    options->indent = "";
    options->indent_length = 0;
    options->item_separator = indented ? "," : ", ";
    options->item_separator_length = indented ? 1 : 2;
    options->key_separator = ": ";
    options->key_separator_length = 2;
    options->sort_keys = false;
    options->ensure_ascii = false;
}

static void write_string(struct string_builder *builder, const char *text, size_t length, bool ensure_ascii)
{
    builder_append_char(builder, '"');
    size_t size;
    for (size_t offset = 0; offset < length; offset += size) {
        uint32_t c = utf8_decode(text + offset, length - offset, &size);
        char escape[16];
        switch (c) {
        case '"': builder_append(builder, "\\\"", 2); continue;
        case '\\': builder_append(builder, "\\\\", 2); continue;
        case '\n': builder_append(builder, "\\n", 2); continue;
        case '\r': builder_append(builder, "\\r", 2); continue;
        case '\t': builder_append(builder, "\\t", 2); continue;
        case '\b': builder_append(builder, "\\b", 2); continue;
        case '\f': builder_append(builder, "\\f", 2); continue;
        default: break;
        }
        if (c < 0x20 || (ensure_ascii && c >= 0x7F && c <= 0xFFFF)) {
            snprintf(escape, sizeof escape, "\\u%04x", (unsigned)c);
            builder_append_cstring(builder, escape);
        } else if (ensure_ascii && c > 0xFFFF) {
            uint32_t v = c - 0x10000;
            snprintf(escape, sizeof escape, "\\u%04x\\u%04x", (unsigned)(0xD800 + (v >> 10)),
                     (unsigned)(0xDC00 + (v & 0x3FF)));
            builder_append_cstring(builder, escape);
        } else {
            builder_append(builder, text + offset, size);
        }
    }
    builder_append_char(builder, '"');
}

static void write_float(struct string_builder *builder, double number)
{
    if (isnan(number)) {
        builder_append_cstring(builder, "NaN");
    } else if (isinf(number)) {
        builder_append_cstring(builder, number < 0 ? "-Infinity" : "Infinity");
    } else {
        char text[32];
        builder_append(builder, text, format_python_float(number, text));
    }
}

static void write_newline(struct string_builder *builder, const struct json_options *options, int level)
{
    builder_append_char(builder, '\n');
    builder_append_repeat(builder, options->indent, options->indent_length, (size_t)level);
}

/* The key as Python's encoder spells it; false for a type it refuses. */
static bool write_key(struct string_builder *builder, chat_value key, const struct json_options *options)
{
    char text[32];
    switch (key.kind) {
    case CHAT_VALUE_STRING:
        write_string(builder, value_string(key)->bytes, value_string(key)->length, options->ensure_ascii);
        return true;
    case CHAT_VALUE_BOOL: write_string(builder, key.as.boolean ? "true" : "false", key.as.boolean ? 4 : 5, false); return true;
    case CHAT_VALUE_NONE: write_string(builder, "null", 4, false); return true;
    case CHAT_VALUE_INT:
        snprintf(text, sizeof text, "%" PRId64, key.as.integer);
        write_string(builder, text, strlen(text), false);
        return true;
    case CHAT_VALUE_FLOAT:
        if (isnan(key.as.number))
            write_string(builder, "NaN", 3, false);
        else if (isinf(key.as.number))
            write_string(builder, key.as.number < 0 ? "-Infinity" : "Infinity", key.as.number < 0 ? 9 : 8, false);
        else
            write_string(builder, text, format_python_float(key.as.number, text), false);
        return true;
    default: return false;
    }
}

static int compare_keys(void *context, size_t a, size_t b, int *order)
{
    const struct chat_dict *dict = context;
    int status = value_compare(dict->entries[a].key, dict->entries[b].key, order);
    if (status == VALUE_INCOMPARABLE)
        return JSON_UNSORTABLE;
    if (*order == 2)
        *order = 0;
    return status;
}

static int write_value(struct string_builder *builder, chat_value value, const struct json_options *options,
                       int level, const char **culprit);

static int write_dict(struct string_builder *builder, chat_value value, const struct json_options *options,
                      int level, const char **culprit)
{
    const struct chat_dict *dict = value_dict(value);
    if (dict->count == 0) {
        builder_append(builder, "{}", 2);
        return VALUE_OK;
    }
    size_t *order = heap_allocate(builder->heap, dict->count * sizeof *order);
    if (!order)
        return VALUE_NO_MEMORY;
    for (size_t i = 0; i < dict->count; i++)
        order[i] = i;
    int status = options->sort_keys
                     ? sort_elements(order, dict->count, compare_keys, (void *)dict, builder->heap)
                     : VALUE_OK;
    if (status == JSON_UNSORTABLE)
        *culprit = "keys";
    builder_append_char(builder, '{');
    for (size_t i = 0; i < dict->count && status == VALUE_OK; i++) {
        const struct dict_entry *entry = &dict->entries[order[i]];
        if (i)
            builder_append(builder, options->item_separator, options->item_separator_length);
        if (options->indented)
            write_newline(builder, options, level + 1);
        if (!write_key(builder, entry->key, options)) {
            *culprit = value_type_name(entry->key);
            status = JSON_BAD_KEY;
            break;
        }
        builder_append(builder, options->key_separator, options->key_separator_length);
        status = write_value(builder, entry->value, options, level + 1, culprit);
    }
    free(order);
    if (status != VALUE_OK)
        return status;
    if (options->indented)
        write_newline(builder, options, level);
    builder_append_char(builder, '}');
    return VALUE_OK;
}

static int write_value(struct string_builder *builder, chat_value value, const struct json_options *options,
                       int level, const char **culprit)
{
    if (level > VALUE_DEPTH_MAX)
        return VALUE_TOO_DEEP;
    char text[32];
    switch (value.kind) {
    case CHAT_VALUE_NONE: builder_append(builder, "null", 4); break;
    case CHAT_VALUE_BOOL: builder_append_cstring(builder, value.as.boolean ? "true" : "false"); break;
    case CHAT_VALUE_INT:
        snprintf(text, sizeof text, "%" PRId64, value.as.integer);
        builder_append_cstring(builder, text);
        break;
    case CHAT_VALUE_FLOAT: write_float(builder, value.as.number); break;
    case CHAT_VALUE_STRING:
        write_string(builder, value_string(value)->bytes, value_string(value)->length, options->ensure_ascii);
        break;
    case CHAT_VALUE_ARRAY:
    case CHAT_VALUE_TUPLE: {
        const struct chat_list *list = value_list(value);
        if (list->count == 0) {
            builder_append(builder, "[]", 2);
            break;
        }
        builder_append_char(builder, '[');
        for (size_t i = 0; i < list->count; i++) {
            if (i)
                builder_append(builder, options->item_separator, options->item_separator_length);
            if (options->indented)
                write_newline(builder, options, level + 1);
            int status = write_value(builder, list->items[i], options, level + 1, culprit);
            if (status != VALUE_OK)
                return status;
        }
        if (options->indented)
            write_newline(builder, options, level);
        builder_append_char(builder, ']');
        break;
    }
    case CHAT_VALUE_OBJECT: {
        int status = write_dict(builder, value, options, level, culprit);
        if (status != VALUE_OK)
            return status;
        break;
    }
    default:
        *culprit = value_type_name(value);
        return JSON_NOT_SERIALIZABLE;
    }
    return builder->failed ? VALUE_NO_MEMORY : VALUE_OK;
}

int json_write(struct string_builder *builder, chat_value value, const struct json_options *options,
               const char **culprit)
{
    *culprit = "";
    return write_value(builder, value, options, 0, culprit);
}
