/* str methods with Python's signatures and errors: strip family with
 * optional characters, split/rsplit with maxsplit, startswith/endswith with
 * a tuple of prefixes, find/index/count with start and end, format. */
#include "chat/methods.h"

#include <string.h>

#include "chat/string_format.h"
#include "chat/string_ops.h"
#include "chat/unicode.h"

static int need_string(struct render *render, int line, chat_value value, const char *what)
{
    if (value.kind == CHAT_VALUE_STRING)
        return 0;
    return render_fail(render, line, "%s must be str, not %s", what, value_type_name(value));
}

static int strip(struct render *render, const struct expression *node, chat_value receiver,
                 const struct call_arguments *arguments, const char *name, bool left, bool right, chat_value *result)
{
    static const char *const names[] = {"chars"};
    chat_value chars;
    if (bind_arguments(render, node, name, arguments, names, 1, &chars) != 0)
        return -1;
    if (chars.kind != CHAT_VALUE_INVALID && chars.kind != CHAT_VALUE_NONE && chars.kind != CHAT_VALUE_STRING)
        return render_fail(render, node->line, "%s arg must be None or str", name);
    return text_strip(render, node->line, receiver, chars, left, right, result);
}

METHOD(string_strip)
{
    return strip(render, node, receiver, arguments, "strip", true, true, result);
}

METHOD(string_lstrip)
{
    return strip(render, node, receiver, arguments, "lstrip", true, false, result);
}

METHOD(string_rstrip)
{
    return strip(render, node, receiver, arguments, "rstrip", false, true, result);
}

static int map_case(struct render *render, const struct expression *node, chat_value receiver,
                    const struct call_arguments *arguments, const char *name, enum case_mapping mapping,
                    chat_value *result)
{
    if (bind_arguments(render, node, name, arguments, NULL, 0, NULL) != 0)
        return -1;
    return text_case(render, node->line, receiver, mapping, result);
}

METHOD(string_upper)
{
    return map_case(render, node, receiver, arguments, "upper", CASE_UPPER, result);
}

METHOD(string_lower)
{
    return map_case(render, node, receiver, arguments, "lower", CASE_LOWER, result);
}

METHOD(string_casefold)
{
    return map_case(render, node, receiver, arguments, "casefold", CASE_LOWER, result);
}

METHOD(string_swapcase)
{
    return map_case(render, node, receiver, arguments, "swapcase", CASE_SWAP, result);
}

METHOD(string_title)
{
    return map_case(render, node, receiver, arguments, "title", CASE_TITLE, result);
}

METHOD(string_capitalize)
{
    return map_case(render, node, receiver, arguments, "capitalize", CASE_CAPITALIZE, result);
}

static int split(struct render *render, const struct expression *node, chat_value receiver,
                 const struct call_arguments *arguments, const char *name, bool from_right, chat_value *result)
{
    static const char *const names[] = {"sep", "maxsplit"};
    chat_value values[2];
    int64_t maxsplit;
    if (bind_arguments(render, node, name, arguments, names, 2, values) != 0 ||
        argument_int(render, node->line, values[1], name, -1, &maxsplit) != 0)
        return -1;
    if (values[0].kind != CHAT_VALUE_INVALID && values[0].kind != CHAT_VALUE_NONE &&
        need_string(render, node->line, values[0], "sep") != 0)
        return -1;
    return text_split(render, node->line, receiver, values[0], maxsplit, from_right, result);
}

METHOD(string_split)
{
    return split(render, node, receiver, arguments, "split", false, result);
}

METHOD(string_rsplit)
{
    return split(render, node, receiver, arguments, "rsplit", true, result);
}

METHOD(string_splitlines)
{
    static const char *const names[] = {"keepends"};
    chat_value keep;
    if (bind_arguments(render, node, "splitlines", arguments, names, 1, &keep) != 0)
        return -1;
    return text_splitlines(render, node->line, receiver, keep.kind != CHAT_VALUE_INVALID && value_truthy(keep), result);
}

/* sub, start, end arguments of find/index/count/startswith/endswith. */
static int search_arguments(struct render *render, const struct expression *node, const char *name,
                            const struct call_arguments *arguments, chat_value *needle, int64_t *start, int64_t *end)
{
    static const char *const names[] = {"sub", "start", "end"};
    chat_value values[3];
    if (bind_arguments(render, node, name, arguments, names, 3, values) != 0)
        return -1;
    if (values[0].kind == CHAT_VALUE_INVALID)
        return render_fail(render, node->line, "%s() takes at least 1 argument (0 given)", name);
    *needle = values[0];
    chat_value start_value = values[1].kind == CHAT_VALUE_NONE ? value_invalid() : values[1];
    chat_value end_value = values[2].kind == CHAT_VALUE_NONE ? value_invalid() : values[2];
    if (argument_int(render, node->line, start_value, name, 0, start) != 0 ||
        argument_int(render, node->line, end_value, name, INT64_MAX, end) != 0)
        return -1;
    return 0;
}

static int find(struct render *render, const struct expression *node, chat_value receiver,
                const struct call_arguments *arguments, const char *name, bool reverse, bool raise, chat_value *result)
{
    chat_value needle;
    int64_t start, end;
    if (search_arguments(render, node, name, arguments, &needle, &start, &end) != 0 ||
        need_string(render, node->line, needle, "substring") != 0)
        return -1;
    if (reverse && render_charge_reverse_search(render, node->line, value_string(receiver)->length,
                                                value_string(needle)->length) != 0)
        return -1;
    int64_t found = text_find(receiver, needle, start, end, reverse);
    if (found < 0 && raise)
        return render_fail(render, node->line, "substring not found");
    *result = chat_value_int(found);
    return 0;
}

METHOD(string_find)
{
    return find(render, node, receiver, arguments, "find", false, false, result);
}

METHOD(string_rfind)
{
    return find(render, node, receiver, arguments, "rfind", true, false, result);
}

METHOD(string_index)
{
    return find(render, node, receiver, arguments, "index", false, true, result);
}

METHOD(string_rindex)
{
    return find(render, node, receiver, arguments, "rindex", true, true, result);
}

METHOD(string_count)
{
    chat_value needle;
    int64_t start, end;
    if (search_arguments(render, node, "count", arguments, &needle, &start, &end) != 0 ||
        need_string(render, node->line, needle, "substring") != 0)
        return -1;
    *result = chat_value_int(text_count(receiver, needle, start, end));
    return 0;
}

/* startswith/endswith: does text[start:end] begin (or end) with affix? */
static bool has_affix(chat_value text, chat_value affix, int64_t start, int64_t end, bool at_end)
{
    size_t count = text_length(text), affix_count = text_length(affix);
    int64_t length = (int64_t)count;
    if (end > length)
        end = length;
    else if (end < 0 && (end += length) < 0)
        end = 0;
    if (start < 0 && (start += length) < 0)
        start = 0;
    if (start > length || end - start < (int64_t)affix_count)
        return false;
    const struct chat_string *string = value_string(text), *piece = value_string(affix);
    int64_t at = at_end ? end - (int64_t)affix_count : start;
    size_t offset = string->base.flags & STRING_ASCII ? (size_t)at : utf8_offset(string->bytes, string->length, (size_t)at);
    return string->length - offset >= piece->length && memcmp(string->bytes + offset, piece->bytes, piece->length) == 0;
}

static int affix(struct render *render, const struct expression *node, chat_value receiver,
                 const struct call_arguments *arguments, const char *name, bool at_end, chat_value *result)
{
    chat_value needle;
    int64_t start, end;
    if (search_arguments(render, node, name, arguments, &needle, &start, &end) != 0)
        return -1;
    if (needle.kind == CHAT_VALUE_STRING) {
        *result = chat_value_bool(has_affix(receiver, needle, start, end, at_end));
        return 0;
    }
    if (needle.kind != CHAT_VALUE_TUPLE)
        return render_fail(render, node->line, "%s first arg must be str or a tuple of str, not %s", name,
                           value_type_name(needle));
    const struct chat_list *choices = value_list(needle);
    bool any = false;
    for (size_t i = 0; i < choices->count && !any; i++) {
        if (choices->items[i].kind != CHAT_VALUE_STRING)
            return render_fail(render, node->line, "tuple for %s must only contain str, not %s", name,
                               value_type_name(choices->items[i]));
        any = has_affix(receiver, choices->items[i], start, end, at_end);
    }
    *result = chat_value_bool(any);
    return 0;
}

METHOD(string_startswith)
{
    return affix(render, node, receiver, arguments, "startswith", false, result);
}

METHOD(string_endswith)
{
    return affix(render, node, receiver, arguments, "endswith", true, result);
}

METHOD(string_replace)
{
    static const char *const names[] = {"old", "new", "count"};
    chat_value values[3];
    int64_t count;
    if (bind_arguments(render, node, "replace", arguments, names, 3, values) != 0 ||
        argument_int(render, node->line, values[2], "replace", -1, &count) != 0)
        return -1;
    if (values[0].kind == CHAT_VALUE_INVALID || values[1].kind == CHAT_VALUE_INVALID)
        return render_fail(render, node->line, "replace expected at least 2 arguments");
    if (need_string(render, node->line, values[0], "replace() argument 1") != 0 ||
        need_string(render, node->line, values[1], "replace() argument 2") != 0)
        return -1;
    return text_replace(render, node->line, receiver, values[0], values[1], count, result);
}

METHOD(string_join)
{
    static const char *const names[] = {"iterable"};
    chat_value iterable, items;
    if (bind_arguments(render, node, "join", arguments, names, 1, &iterable) != 0)
        return -1;
    if (iterable.kind == CHAT_VALUE_INVALID)
        return render_fail(render, node->line, "join() takes exactly one argument (0 given)");
    if (iterable.kind == CHAT_VALUE_UNDEFINED)
        return fail_undefined(render, node->line, iterable);
    if (iterate_to_list(render, node->line, iterable, &items) != 0)
        return -1;
    const struct chat_list *list = value_list(items);
    const struct chat_string *separator = value_string(receiver);
    struct string_builder builder;
    builder_init(&builder, &render->heap, 0);
    for (size_t i = 0; i < list->count; i++) {
        if (list->items[i].kind != CHAT_VALUE_STRING) {
            builder_discard(&builder);
            value_release(items);
            return render_fail(render, node->line, "sequence item %zu: expected str instance, %s found", i,
                               value_type_name(list->items[i]));
        }
        if (i)
            builder_append(&builder, separator->bytes, separator->length);
        builder_append(&builder, value_string(list->items[i])->bytes, value_string(list->items[i])->length);
    }
    value_release(items);
    return finish_string(render, node->line, &builder, result);
}

static int pad(struct render *render, const struct expression *node, chat_value receiver,
               const struct call_arguments *arguments, const char *name, char align, chat_value *result)
{
    static const char *const names[] = {"width", "fillchar"};
    chat_value values[2];
    int64_t width;
    if (bind_arguments(render, node, name, arguments, names, 2, values) != 0 ||
        argument_int(render, node->line, values[0], name, 0, &width) != 0)
        return -1;
    if (values[0].kind == CHAT_VALUE_INVALID)
        return render_fail(render, node->line, "%s() takes at least 1 argument (0 given)", name);
    uint32_t fill = ' ';
    if (values[1].kind != CHAT_VALUE_INVALID) {
        if (values[1].kind != CHAT_VALUE_STRING || text_length(values[1]) != 1)
            return render_fail(render, node->line, "The fill character must be exactly one character long");
        size_t size;
        fill = utf8_decode(value_string(values[1])->bytes, value_string(values[1])->length, &size);
    }
    return text_pad(render, node->line, receiver, width, fill, align, result);
}

METHOD(string_center)
{
    return pad(render, node, receiver, arguments, "center", '^', result);
}

METHOD(string_ljust)
{
    return pad(render, node, receiver, arguments, "ljust", '<', result);
}

METHOD(string_rjust)
{
    return pad(render, node, receiver, arguments, "rjust", '>', result);
}

METHOD(string_zfill)
{
    static const char *const names[] = {"width"};
    chat_value value;
    int64_t width;
    if (bind_arguments(render, node, "zfill", arguments, names, 1, &value) != 0 ||
        argument_int(render, node->line, value, "zfill", 0, &width) != 0)
        return -1;
    const struct chat_string *string = value_string(receiver);
    size_t length = text_length(receiver);
    if (width <= (int64_t)length) {
        *result = value_retain(receiver);
        return 0;
    }
    struct string_builder builder;
    builder_init(&builder, &render->heap, 0);
    size_t sign = string->length && (string->bytes[0] == '+' || string->bytes[0] == '-');
    builder_append(&builder, string->bytes, sign);
    builder_append_repeat(&builder, "0", 1, (size_t)width - length);
    builder_append(&builder, string->bytes + sign, string->length - sign);
    return finish_string(render, node->line, &builder, result);
}

static int make_triple(struct render *render, int line, const char *text, size_t first, size_t second, size_t third,
                       chat_value *result)
{
    *result = value_list_new(&render->heap, CHAT_VALUE_TUPLE, 3);
    if (result->kind == CHAT_VALUE_INVALID)
        return render_fail_status(render, line, VALUE_NO_MEMORY);
    const size_t lengths[3] = {first, second, third};
    size_t offset = 0;
    for (int i = 0; i < 3; i++) {
        chat_value piece;
        if (make_string(render, line, text + offset, lengths[i], &piece) != 0) {
            value_release(*result);
            return -1;
        }
        list_append(*result, piece);
        offset += lengths[i];
    }
    return 0;
}

static int partition(struct render *render, const struct expression *node, chat_value receiver,
                     const struct call_arguments *arguments, const char *name, bool reverse, chat_value *result)
{
    static const char *const names[] = {"sep"};
    chat_value separator;
    if (bind_arguments(render, node, name, arguments, names, 1, &separator) != 0 ||
        need_string(render, node->line, separator, "sep") != 0)
        return -1;
    const struct chat_string *string = value_string(receiver), *sep = value_string(separator);
    if (sep->length == 0)
        return render_fail(render, node->line, "empty separator");
    if (reverse && render_charge_reverse_search(render, node->line, string->length, sep->length) != 0)
        return -1;
    size_t found = SIZE_MAX;
    if (sep->length <= string->length) {
        if (!reverse) {
            const char *at = bytes_find(string->bytes, string->length, sep->bytes, sep->length);
            found = at ? (size_t)(at - string->bytes) : SIZE_MAX;
        } else {
            for (size_t offset = string->length - sep->length + 1; offset-- > 0;)
                if (memcmp(string->bytes + offset, sep->bytes, sep->length) == 0) {
                    found = offset;
                    break;
                }
        }
    }
    if (found == SIZE_MAX)
        return reverse ? make_triple(render, node->line, string->bytes, 0, 0, string->length, result)
                       : make_triple(render, node->line, string->bytes, string->length, 0, 0, result);
    return make_triple(render, node->line, string->bytes, found, sep->length, string->length - found - sep->length,
                       result);
}

METHOD(string_partition)
{
    return partition(render, node, receiver, arguments, "partition", false, result);
}

METHOD(string_rpartition)
{
    return partition(render, node, receiver, arguments, "rpartition", true, result);
}

static int remove_affix(struct render *render, const struct expression *node, chat_value receiver,
                        const struct call_arguments *arguments, const char *name, bool suffix, chat_value *result)
{
    static const char *const names[] = {"affix"};
    chat_value affix_value;
    if (bind_arguments(render, node, name, arguments, names, 1, &affix_value) != 0 ||
        need_string(render, node->line, affix_value, name) != 0)
        return -1;
    const struct chat_string *string = value_string(receiver), *piece = value_string(affix_value);
    bool matches = piece->length <= string->length &&
                   memcmp(string->bytes + (suffix ? string->length - piece->length : 0), piece->bytes, piece->length) == 0;
    if (!matches || piece->length == 0) {
        *result = value_retain(receiver);
        return 0;
    }
    return make_string(render, node->line, string->bytes + (suffix ? 0 : piece->length), string->length - piece->length,
                       result);
}

METHOD(string_removeprefix)
{
    return remove_affix(render, node, receiver, arguments, "removeprefix", false, result);
}

METHOD(string_removesuffix)
{
    return remove_affix(render, node, receiver, arguments, "removesuffix", true, result);
}

static int classify(struct render *render, const struct expression *node, chat_value receiver,
                    const struct call_arguments *arguments, const char *name, const char *kind, chat_value *result)
{
    if (bind_arguments(render, node, name, arguments, NULL, 0, NULL) != 0)
        return -1;
    *result = chat_value_bool(text_is(receiver, kind));
    return 0;
}

METHOD(string_isalnum)
{
    return classify(render, node, receiver, arguments, "isalnum", "alnum", result);
}

METHOD(string_isalpha)
{
    return classify(render, node, receiver, arguments, "isalpha", "alpha", result);
}

METHOD(string_isdigit)
{
    return classify(render, node, receiver, arguments, "isdigit", "digit", result);
}

METHOD(string_isspace)
{
    return classify(render, node, receiver, arguments, "isspace", "space", result);
}

METHOD(string_islower)
{
    return classify(render, node, receiver, arguments, "islower", "lower", result);
}

METHOD(string_isupper)
{
    return classify(render, node, receiver, arguments, "isupper", "upper", result);
}

METHOD(string_istitle)
{
    return classify(render, node, receiver, arguments, "istitle", "title", result);
}

METHOD(string_format)
{
    return brace_format(render, node, receiver, arguments, result);
}
