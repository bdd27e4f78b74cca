/* Filters on text: case, trimming, replacing, padding, indenting,
 * truncating, escaping, formatting, and tojson. Each takes str() of its
 * input first, as Jinja2's soft_str does (so undefined reads as ""). */
#include "chat/filters.h"

#include <string.h>

#include "chat/json_write.h"
#include "chat/string_format.h"
#include "chat/string_ops.h"
#include "chat/unicode.h"

/* The input as text, then one case mapping. */
static int map_case(struct render *render, const struct expression *node, chat_value input,
                    const struct call_arguments *arguments, const char *name, enum case_mapping mapping,
                    chat_value *result)
{
    chat_value text;
    if (bind_arguments(render, node, name, arguments, NULL, 0, NULL) != 0 || to_text(render, node->line, input, &text) != 0)
        return -1;
    int status = text_case(render, node->line, text, mapping, result);
    value_release(text);
    return status;
}

FILTER(filter_capitalize)
{
    return map_case(render, node, input, arguments, "capitalize", CASE_CAPITALIZE, result);
}

FILTER(filter_lower)
{
    return map_case(render, node, input, arguments, "lower", CASE_LOWER, result);
}

FILTER(filter_upper)
{
    return map_case(render, node, input, arguments, "upper", CASE_UPPER, result);
}

FILTER(filter_title)
{
    return map_case(render, node, input, arguments, "title", CASE_JINJA_TITLE, result);
}

FILTER(filter_string)
{
    if (bind_arguments(render, node, "string", arguments, NULL, 0, NULL) != 0)
        return -1;
    return to_text(render, node->line, input, result);
}

FILTER(filter_center)
{
    static const char *const names[] = {"width"};
    chat_value values[1], text;
    int64_t width;
    if (bind_arguments(render, node, "center", arguments, names, 1, values) != 0 ||
        argument_int(render, node->line, values[0], "center", 80, &width) != 0 ||
        to_text(render, node->line, input, &text) != 0)
        return -1;
    int status = text_pad(render, node->line, text, width, ' ', '^', result);
    value_release(text);
    return status;
}

FILTER(filter_trim)
{
    static const char *const names[] = {"chars"};
    chat_value values[1], text, chars = value_invalid();
    if (bind_arguments(render, node, "trim", arguments, names, 1, values) != 0 ||
        to_text(render, node->line, input, &text) != 0)
        return -1;
    if (values[0].kind != CHAT_VALUE_INVALID && values[0].kind != CHAT_VALUE_NONE) {
        if (values[0].kind != CHAT_VALUE_STRING) {
            value_release(text);
            return render_fail(render, node->line, "strip arg must be None or str");
        }
        chars = values[0];
    }
    int status = text_strip(render, node->line, text, chars, true, true, result);
    value_release(text);
    return status;
}

FILTER(filter_replace)
{
    static const char *const names[] = {"old", "new", "count"};
    chat_value values[3], text, old, replacement;
    int64_t count;
    if (bind_arguments(render, node, "replace", arguments, names, 3, values) != 0)
        return -1;
    if (values[0].kind == CHAT_VALUE_INVALID || values[1].kind == CHAT_VALUE_INVALID)
        return render_fail(render, node->line, "replace() needs the old and the new text");
    chat_value count_value = values[2].kind == CHAT_VALUE_NONE ? value_invalid() : values[2];
    if (argument_int(render, node->line, count_value, "replace", -1, &count) != 0 ||
        to_text(render, node->line, input, &text) != 0)
        return -1;
    if (to_text(render, node->line, values[0], &old) != 0) {
        value_release(text);
        return -1;
    }
    if (to_text(render, node->line, values[1], &replacement) != 0) {
        value_release(text);
        value_release(old);
        return -1;
    }
    int status = text_replace(render, node->line, text, old, replacement, count, result);
    value_release(text);
    value_release(old);
    value_release(replacement);
    return status;
}

static int mark_safe(struct render *render, int line, const char *text, size_t length, chat_value *result)
{
    if (make_string(render, line, text, length, result) != 0)
        return -1;
    value_string(*result)->base.flags |= STRING_SAFE;
    return 0;
}

FILTER(filter_safe)
{
    if (bind_arguments(render, node, "safe", arguments, NULL, 0, NULL) != 0)
        return -1;
    if (input.kind == CHAT_VALUE_STRING && (value_string(input)->base.flags & STRING_SAFE)) {
        *result = value_retain(input);
        return 0;
    }
    chat_value text;
    if (to_text(render, node->line, input, &text) != 0)
        return -1;
    int status = mark_safe(render, node->line, value_string(text)->bytes, value_string(text)->length, result);
    value_release(text);
    return status;
}

/* markupsafe's escape: & < > ' " as HTML entities. */
static int escape_html(struct render *render, int line, chat_value input, chat_value *result)
{
    chat_value text;
    if (to_text(render, line, input, &text) != 0)
        return -1;
    const struct chat_string *string = value_string(text);
    struct string_builder builder;
    builder_init(&builder, &render->heap, 0);
    for (size_t i = 0; i < string->length; i++) {
        switch (string->bytes[i]) {
        case '&': builder_append_cstring(&builder, "&amp;"); break;
        case '<': builder_append_cstring(&builder, "&lt;"); break;
        case '>': builder_append_cstring(&builder, "&gt;"); break;
        case '\'': builder_append_cstring(&builder, "&#39;"); break;
        case '"': builder_append_cstring(&builder, "&#34;"); break;
        default: builder_append_char(&builder, string->bytes[i]); break;
        }
    }
    value_release(text);
    if (finish_string(render, line, &builder, result) != 0)
        return -1;
    value_string(*result)->base.flags |= STRING_SAFE;
    return 0;
}

FILTER(filter_escape)
{
    if (bind_arguments(render, node, "escape", arguments, NULL, 0, NULL) != 0)
        return -1;
    if (input.kind == CHAT_VALUE_STRING && (value_string(input)->base.flags & STRING_SAFE)) {
        *result = value_retain(input);
        return 0;
    }
    return escape_html(render, node->line, input, result);
}

FILTER(filter_forceescape)
{
    if (bind_arguments(render, node, "forceescape", arguments, NULL, 0, NULL) != 0)
        return -1;
    return escape_html(render, node->line, input, result);
}

FILTER(filter_format)
{
    if (arguments->positional_count && arguments->keyword_count)
        return render_fail(render, node->line, "can't handle positional and keyword arguments at the same time");
    chat_value text, values;
    if (to_text(render, node->line, input, &text) != 0)
        return -1;
    if (arguments->keyword_count) {
        values = value_dict_new(&render->heap, CHAT_VALUE_OBJECT);
        for (size_t i = 0; values.kind != CHAT_VALUE_INVALID && i < arguments->keyword_count; i++)
            if (arguments->keywords[i].name &&
                dict_set_text(values, arguments->keywords[i].name, arguments->keywords[i].length,
                              value_retain(arguments->keywords[i].value)) != 0) {
                value_release(values);
                values = value_invalid();
            }
    } else {
        values = value_list_new(&render->heap, CHAT_VALUE_TUPLE, arguments->positional_count);
        for (size_t i = 0; values.kind != CHAT_VALUE_INVALID && i < arguments->positional_count; i++)
            list_append(values, value_retain(arguments->positional[i]));
    }
    if (values.kind == CHAT_VALUE_INVALID) {
        value_release(text);
        return render_fail_status(render, node->line, VALUE_NO_MEMORY);
    }
    int status = percent_format(render, node->line, text, values, result);
    value_release(text);
    value_release(values);
    return status;
}

FILTER(filter_indent)
{
    static const char *const names[] = {"width", "first", "blank"};
    chat_value values[3], text, lines;
    if (bind_arguments(render, node, "indent", arguments, names, 3, values) != 0)
        return -1;
    chat_value indentation;
    if (values[0].kind == CHAT_VALUE_STRING) {
        indentation = value_retain(values[0]);
    } else {
        int64_t width;
        if (argument_int(render, node->line, values[0], "indent", 4, &width) != 0)
            return -1;
        struct string_builder spaces;
        builder_init(&spaces, &render->heap, 0);
        builder_append_repeat(&spaces, " ", 1, width > 0 ? (size_t)width : 0);
        if (finish_string(render, node->line, &spaces, &indentation) != 0)
            return -1;
    }
    bool first = values[1].kind != CHAT_VALUE_INVALID && value_truthy(values[1]);
    bool blank = values[2].kind != CHAT_VALUE_INVALID && value_truthy(values[2]);
    /* Jinja2's indent appends "\n" to its input, which only works on a string. */
    if (input.kind != CHAT_VALUE_STRING) {
        value_release(indentation);
        if (input.kind == CHAT_VALUE_UNDEFINED)
            return fail_undefined(render, node->line, input);
        return render_fail(render, node->line, "indent needs a string, not '%s'", value_type_name(input));
    }
    text = value_retain(input);
    /* Jinja2 appends a newline before splitting, so a final newline stays. */
    struct string_builder joined;
    builder_init(&joined, &render->heap, 0);
    builder_append(&joined, value_string(text)->bytes, value_string(text)->length);
    builder_append_char(&joined, '\n');
    value_release(text);
    if (finish_string(render, node->line, &joined, &text) != 0 ||
        text_splitlines(render, node->line, text, false, &lines) != 0) {
        value_release(text);
        value_release(indentation);
        return -1;
    }
    value_release(text);
    const struct chat_string *indent = value_string(indentation);
    struct string_builder builder;
    builder_init(&builder, &render->heap, 0);
    if (first)
        builder_append(&builder, indent->bytes, indent->length);
    const struct chat_list *items = value_list(lines);
    for (size_t i = 0; i < items->count; i++) {
        const struct chat_string *piece = value_string(items->items[i]);
        if (i > 0) {
            builder_append_char(&builder, '\n');
            if (blank || piece->length > 0)
                builder_append(&builder, indent->bytes, indent->length);
        }
        builder_append(&builder, piece->bytes, piece->length);
    }
    value_release(lines);
    value_release(indentation);
    return finish_string(render, node->line, &builder, result);
}

FILTER(filter_truncate)
{
    static const char *const names[] = {"length", "killwords", "end", "leeway"};
    chat_value values[4], text, end;
    int64_t length, leeway;
    if (bind_arguments(render, node, "truncate", arguments, names, 4, values) != 0 ||
        argument_int(render, node->line, values[0], "truncate", 255, &length) != 0 ||
        argument_int(render, node->line, values[3].kind == CHAT_VALUE_NONE ? value_invalid() : values[3], "truncate",
                     5, &leeway) != 0)
        return -1;
    bool kill_words = values[1].kind != CHAT_VALUE_INVALID && value_truthy(values[1]);
    if (argument_text(render, node->line, values[2], "...", &end) != 0)
        return -1;
    int64_t end_length = (int64_t)text_length(end);
    if (length < end_length || leeway < 0) {
        value_release(end);
        return length < end_length
                   ? render_fail(render, node->line, "expected length >= %lld, got %lld", (long long)end_length, (long long)length)
                   : render_fail(render, node->line, "expected leeway >= 0, got %lld", (long long)leeway);
    }
    /* Jinja2's truncate measures and slices its input as it is: anything
     * short enough comes back unchanged, only a string can be cut. */
    if (input.kind != CHAT_VALUE_STRING) {
        value_release(end);
        size_t count;
        if (!value_length(input, &count))
            return render_fail(render, node->line, "object of type '%s' has no len()", value_type_name(input));
        if ((int64_t)count <= length + leeway) {
            *result = value_retain(input);
            return 0;
        }
        return render_fail(render, node->line, "truncate can only cut a string, not '%s'", value_type_name(input));
    }
    text = value_retain(input);
    const struct chat_string *string = value_string(text);
    if ((int64_t)text_length(text) <= length + leeway) {
        value_release(end);
        *result = text;
        return 0;
    }
    size_t cut = utf8_offset(string->bytes, string->length, (size_t)(length - end_length));
    if (!kill_words) {
        /* rsplit(" ", 1)[0]: up to the last space, if there is one. */
        size_t space = cut;
        while (space > 0 && string->bytes[space - 1] != ' ')
            space--;
        if (space > 0)
            cut = space - 1;
    }
    struct string_builder builder;
    builder_init(&builder, &render->heap, 0);
    builder_append(&builder, string->bytes, cut);
    builder_append(&builder, value_string(end)->bytes, value_string(end)->length);
    value_release(text);
    value_release(end);
    return finish_string(render, node->line, &builder, result);
}

static bool is_word_character(uint32_t c)
{
    return c == '_' || unicode_is_alpha(c) || unicode_is_digit(c) ||
           (c >= 0x80 && !unicode_is_space(c) && unicode_is_printable(c) && !(c >= 0x2000 && c <= 0x2BFF) &&
            !(c >= 0x3000 && c <= 0x303F) && !(c >= 0xFF00 && c <= 0xFF0F) && c < 0x1F000);
}

FILTER(filter_wordcount)
{
    chat_value text;
    if (bind_arguments(render, node, "wordcount", arguments, NULL, 0, NULL) != 0 ||
        to_text(render, node->line, input, &text) != 0)
        return -1;
    const struct chat_string *string = value_string(text);
    int64_t words = 0;
    bool inside = false;
    size_t size;
    for (size_t offset = 0; offset < string->length; offset += size) {
        bool word = is_word_character(utf8_decode(string->bytes + offset, string->length - offset, &size));
        words += word && !inside;
        inside = word;
    }
    value_release(text);
    *result = chat_value_int(words);
    return 0;
}

FILTER(filter_striptags)
{
    chat_value text;
    if (bind_arguments(render, node, "striptags", arguments, NULL, 0, NULL) != 0 ||
        to_text(render, node->line, input, &text) != 0)
        return -1;
    const struct chat_string *string = value_string(text);
    struct string_builder stripped;
    builder_init(&stripped, &render->heap, 0);
    for (size_t i = 0; i < string->length;) {
        if (string->length - i >= 4 && memcmp(string->bytes + i, "<!--", 4) == 0) {
            const char *close = bytes_find(string->bytes + i + 4, string->length - i - 4, "-->", 3);
            if (close) {
                i = (size_t)(close - string->bytes) + 3;
                continue;
            }
        } else if (string->bytes[i] == '<') {
            const char *close = memchr(string->bytes + i + 1, '>', string->length - i - 1);
            if (close) {
                i = (size_t)(close - string->bytes) + 1;
                continue;
            }
        }
        builder_append_char(&stripped, string->bytes[i++]);
    }
    value_release(text);
    chat_value joined, words;
    if (finish_string(render, node->line, &stripped, &joined) != 0)
        return -1;
    int status = text_split(render, node->line, joined, value_invalid(), -1, false, &words);
    value_release(joined);
    if (status != 0)
        return -1;
    static const struct {
        const char *entity, *text;
    } entities[] = {{"&amp;", "&"}, {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&#34;", "\""}, {"&#39;", "'"}};
    struct string_builder builder;
    builder_init(&builder, &render->heap, 0);
    const struct chat_list *items = value_list(words);
    for (size_t w = 0; w < items->count; w++) {
        const struct chat_string *word = value_string(items->items[w]);
        if (w)
            builder_append_char(&builder, ' ');
        for (size_t i = 0; i < word->length;) {
            size_t e = 0, count = sizeof entities / sizeof entities[0];
            for (; e < count; e++) {
                size_t n = strlen(entities[e].entity);
                if (word->length - i >= n && memcmp(word->bytes + i, entities[e].entity, n) == 0)
                    break;
            }
            if (e < count) {
                builder_append_cstring(&builder, entities[e].text);
                i += strlen(entities[e].entity);
            } else {
                builder_append_char(&builder, word->bytes[i++]);
            }
        }
    }
    value_release(words);
    return finish_string(render, node->line, &builder, result);
}

FILTER(filter_tojson)
{
    static const char *const names[] = {"ensure_ascii", "indent", "separators", "sort_keys"};
    chat_value values[4];
    if (bind_arguments(render, node, "tojson", arguments, names, 4, values) != 0)
        return -1;
    chat_value indent = values[1];
    bool indented = indent.kind != CHAT_VALUE_INVALID && indent.kind != CHAT_VALUE_NONE;
    struct json_options options;
    json_options_default(&options, indented);
    options.ensure_ascii = values[0].kind != CHAT_VALUE_INVALID && value_truthy(values[0]);
    options.sort_keys = values[3].kind != CHAT_VALUE_INVALID && value_truthy(values[3]);
    struct string_builder spaces;
    builder_init(&spaces, &render->heap, 0);
    if (indented) {
        if (indent.kind == CHAT_VALUE_STRING) {
            options.indent = value_string(indent)->bytes;
            options.indent_length = value_string(indent)->length;
        } else if (indent.kind == CHAT_VALUE_INT || indent.kind == CHAT_VALUE_BOOL) {
            int64_t width = indent.kind == CHAT_VALUE_BOOL ? indent.as.boolean : indent.as.integer;
            if (width > 1000)
                return render_fail(render, node->line, "tojson indent too large");
            builder_append_repeat(&spaces, " ", 1, width > 0 ? (size_t)width : 0);
            if (spaces.failed)
                return render_fail_status(render, node->line, VALUE_NO_MEMORY);
            options.indent = builder_text(&spaces);
            options.indent_length = builder_length(&spaces);
        } else {
            return render_fail(render, node->line, "can't multiply sequence by non-int of type '%s'",
                               value_type_name(indent));
        }
    }
    chat_value separators = values[2];
    if (separators.kind != CHAT_VALUE_INVALID && separators.kind != CHAT_VALUE_NONE) {
        if (!value_is_list_like(separators) || value_list(separators)->count != 2 ||
            value_list(separators)->items[0].kind != CHAT_VALUE_STRING ||
            value_list(separators)->items[1].kind != CHAT_VALUE_STRING) {
            builder_discard(&spaces);
            return render_fail(render, node->line, "separators must be a pair of strings");
        }
        const struct chat_string *item = value_string(value_list(separators)->items[0]);
        const struct chat_string *key = value_string(value_list(separators)->items[1]);
        options.item_separator = item->bytes;
        options.item_separator_length = item->length;
        options.key_separator = key->bytes;
        options.key_separator_length = key->length;
    }
    struct string_builder builder;
    builder_init(&builder, &render->heap, 0);
    const char *culprit;
    int status = json_write(&builder, input, &options, &culprit);
    builder_discard(&spaces);
    if (status != VALUE_OK) {
        builder_discard(&builder);
        switch (status) {
        case JSON_NOT_SERIALIZABLE:
            return render_fail(render, node->line, "Object of type %s is not JSON serializable", culprit);
        case JSON_BAD_KEY:
            return render_fail(render, node->line, "keys must be str, int, float, bool or None, not %s", culprit);
        case JSON_UNSORTABLE:
            return render_fail(render, node->line, "tojson(sort_keys=true) cannot order keys of different types");
        default: return render_fail_status(render, node->line, status);
        }
    }
    return finish_string(render, node->line, &builder, result);
}
