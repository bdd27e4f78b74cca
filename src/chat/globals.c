/* The global functions a template can call: range (capped at 100000
 * elements, as Jinja2's sandbox caps it), dict, namespace, and the two Hugging
 * Face adds: raise_exception(message) and strftime_now(format). */
#include "chat/filters.h"

#include <string.h>

#include "chat/time_format.h"

/* Jinja2's sandbox refuses longer ranges (MAX_RANGE). */
#define RANGE_MAX 100000

enum builtin {
    BUILTIN_RANGE,
    BUILTIN_DICT,
    BUILTIN_NAMESPACE,
    BUILTIN_RAISE_EXCEPTION,
    BUILTIN_STRFTIME_NOW,
    BUILTIN_COUNT,
};

static const char *const builtin_names[BUILTIN_COUNT] = {"range", "dict", "namespace", "raise_exception",
                                                         "strftime_now"};

int builtin_find(const char *name, size_t length)
{
    for (int i = 0; i < BUILTIN_COUNT; i++)
        if (strlen(builtin_names[i]) == length && memcmp(builtin_names[i], name, length) == 0)
            return i;
    return -1;
}

const char *builtin_name(int builtin)
{
    return builtin >= 0 && builtin < BUILTIN_COUNT ? builtin_names[builtin] : "?";
}

static int call_range(struct render *render, const struct expression *node, const struct call_arguments *arguments,
                      chat_value *result)
{
    size_t count = arguments->positional_count;
    if (arguments->keyword_count)
        return render_fail(render, node->line, "range() takes no keyword arguments");
    if (count < 1 || count > 3)
        return render_fail(render, node->line, "range expected 1 to 3 arguments, got %zu", count);
    int64_t bounds[3] = {0, 0, 1};
    for (size_t i = 0; i < count; i++) {
        chat_value value = arguments->positional[i];
        if (value.kind == CHAT_VALUE_UNDEFINED)
            return fail_undefined(render, node->line, value);
        if (value.kind != CHAT_VALUE_INT && value.kind != CHAT_VALUE_BOOL)
            return render_fail(render, node->line, "'%s' object cannot be interpreted as an integer",
                               value_type_name(value));
        bounds[count == 1 ? 1 : i] = value.kind == CHAT_VALUE_BOOL ? value.as.boolean : value.as.integer;
    }
    if (bounds[2] == 0)
        return render_fail(render, node->line, "range() arg 3 must not be zero");
    struct chat_range probe = {.start = bounds[0], .stop = bounds[1], .step = bounds[2]};
    if (range_length(&probe) > RANGE_MAX)
        return render_fail(render, node->line,
                           "Range too big. The sandbox blocks ranges larger than MAX_RANGE (%d).", RANGE_MAX);
    *result = value_range_new(&render->heap, bounds[0], bounds[1], bounds[2]);
    return result->kind == CHAT_VALUE_INVALID ? render_fail_status(render, node->line, VALUE_NO_MEMORY) : 0;
}

/* dict(...) and namespace(...): a mapping or pairs, then keyword arguments. */
static int call_mapping(struct render *render, const struct expression *node, const struct call_arguments *arguments,
                        uint8_t kind, chat_value *result)
{
    const char *name = kind == CHAT_VALUE_NAMESPACE ? "namespace" : "dict";
    if (arguments->positional_count > 1)
        return render_fail(render, node->line, "%s expected at most 1 argument, got %zu", name,
                           arguments->positional_count);
    *result = value_dict_new(&render->heap, kind);
    if (result->kind == CHAT_VALUE_INVALID)
        return render_fail_status(render, node->line, VALUE_NO_MEMORY);
    int status = 0;
    if (arguments->positional_count == 1) {
        chat_value source = arguments->positional[0];
        if (value_is_dict_like(source)) {
            const struct chat_dict *dict = value_dict(source);
            for (size_t i = 0; i < dict->count && status == 0; i++)
                status = dict_set(*result, value_retain(dict->entries[i].key), value_retain(dict->entries[i].value));
            if (status != 0)
                status = render_fail_status(render, node->line, status);
        } else {
            chat_value pairs = value_invalid();
            status = iterate_to_list(render, node->line, source, &pairs);
            for (size_t i = 0; status == 0 && i < value_list(pairs)->count; i++) {
                chat_value pair = value_list(pairs)->items[i], items;
                if ((status = iterate_to_list(render, node->line, pair, &items)) != 0)
                    break;
                if (value_list(items)->count != 2) {
                    status = render_fail(render, node->line,
                                         "dictionary update sequence element #%zu has length %zu; 2 is required", i,
                                         value_list(items)->count);
                } else {
                    int set = dict_set(*result, value_retain(value_list(items)->items[0]),
                                       value_retain(value_list(items)->items[1]));
                    if (set == VALUE_UNHASHABLE)
                        status = render_fail(render, node->line, "unhashable type: '%s'",
                                             value_type_name(value_list(items)->items[0]));
                    else if (set != 0)
                        status = render_fail_status(render, node->line, set);
                }
                value_release(items);
            }
            value_release(pairs);
        }
    }
    for (size_t i = 0; i < arguments->keyword_count && status == 0; i++) {
        const struct keyword_argument *keyword = &arguments->keywords[i];
        if (keyword->name && dict_set_text(*result, keyword->name, keyword->length, value_retain(keyword->value)) != 0)
            status = render_fail_status(render, node->line, VALUE_NO_MEMORY);
    }
    if (status != 0) {
        value_release(*result);
        *result = value_invalid();
    }
    return status;
}

static int call_raise(struct render *render, const struct expression *node, const struct call_arguments *arguments)
{
    static const char *const names[] = {"message"};
    chat_value message, text;
    if (bind_arguments(render, node, "raise_exception", arguments, names, 1, &message) != 0 ||
        argument_text(render, node->line, message, "", &text) != 0)
        return -1;
    render_fail(render, node->line, "%s", value_string(text)->bytes);
    value_release(text);
    return -1;
}

static int call_strftime(struct render *render, const struct expression *node, const struct call_arguments *arguments,
                         chat_value *result)
{
    static const char *const names[] = {"format"};
    chat_value format;
    if (bind_arguments(render, node, "strftime_now", arguments, names, 1, &format) != 0)
        return -1;
    if (format.kind != CHAT_VALUE_STRING)
        return render_fail(render, node->line, "strftime() argument 1 must be str, not %s", value_type_name(format));
    struct string_builder builder;
    builder_init(&builder, &render->heap, 0);
    format_time(&builder, value_string(format)->bytes, value_string(format)->length, render->now_seconds);
    return finish_string(render, node->line, &builder, result);
}

int builtin_call(struct render *render, const struct expression *node, int builtin,
                 const struct call_arguments *arguments, chat_value *result)
{
    switch (builtin) {
    case BUILTIN_RANGE: return call_range(render, node, arguments, result);
    case BUILTIN_DICT: return call_mapping(render, node, arguments, CHAT_VALUE_OBJECT, result);
    case BUILTIN_NAMESPACE: return call_mapping(render, node, arguments, CHAT_VALUE_NAMESPACE, result);
    case BUILTIN_RAISE_EXCEPTION: return call_raise(render, node, arguments);
    case BUILTIN_STRFTIME_NOW: return call_strftime(render, node, arguments, result);
    default: return render_fail(render, node->line, "internal error: unknown builtin");
    }
}
