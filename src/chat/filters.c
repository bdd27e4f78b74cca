/* The filter table, the filters on single values (abs, attr, default, int,
 * float, round) and the helpers the filter groups share. */
#include "chat/filters.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/string_ops.h"
#include "chat/unicode.h"

int to_text(struct render *render, int line, chat_value value, chat_value *text)
{
    if (value.kind == CHAT_VALUE_UNDEFINED)
        return make_string(render, line, "", 0, text);
    return stringify(render, line, value, text);
}

int argument_int(struct render *render, int line, chat_value value, const char *what, int64_t fallback,
                 int64_t *result)
{
    switch (value.kind) {
    case CHAT_VALUE_INVALID: *result = fallback; return 0;
    case CHAT_VALUE_INT: *result = value.as.integer; return 0;
    case CHAT_VALUE_BOOL: *result = value.as.boolean; return 0;
    case CHAT_VALUE_UNDEFINED: return fail_undefined(render, line, value);
    default:
        return render_fail(render, line, "%s: '%s' object cannot be interpreted as an integer", what,
                           value_type_name(value));
    }
}

int argument_text(struct render *render, int line, chat_value value, const char *fallback, chat_value *result)
{
    if (value.kind == CHAT_VALUE_INVALID)
        return make_string(render, line, fallback, strlen(fallback), result);
    return to_text(render, line, value, result);
}

int fold_case(struct render *render, int line, chat_value value, chat_value *result)
{
    if (value.kind == CHAT_VALUE_STRING)
        return text_case(render, line, value, CASE_LOWER, result);
    *result = value_retain(value);
    return 0;
}

struct call_arguments arguments_after(const struct call_arguments *arguments, size_t skip)
{
    struct call_arguments rest = *arguments;
    size_t taken = skip < rest.positional_count ? skip : rest.positional_count;
    if (taken) {
        rest.positional += taken;
        rest.positional_count -= taken;
    }
    return rest;
}

int attribute_path(struct render *render, const struct expression *node, chat_value item, chat_value path,
                   chat_value fallback, chat_value *result)
{
    chat_value current = value_retain(item);
    if (path.kind != CHAT_VALUE_STRING) {
        int status = get_item(render, node, current, path, result);
        value_release(current);
        return status;
    }
    const struct chat_string *text = value_string(path);
    size_t start = 0;
    for (;;) {
        size_t end = start;
        while (end < text->length && text->bytes[end] != '.')
            end++;
        chat_value key, next;
        bool digits = end > start;
        for (size_t i = start; i < end; i++)
            digits &= text->bytes[i] >= '0' && text->bytes[i] <= '9';
        if (digits && end - start < 18) {
            key = chat_value_int(strtoll(text->bytes + start, NULL, 10));
        } else if (make_string(render, node->line, text->bytes + start, end - start, &key) != 0) {
            value_release(current);
            return -1;
        }
        int status = get_item(render, node, current, key, &next);
        value_release(key);
        value_release(current);
        if (status != 0)
            return -1;
        current = next;
        if (fallback.kind != CHAT_VALUE_INVALID && current.kind == CHAT_VALUE_UNDEFINED)
            current = value_retain(fallback);
        if (end >= text->length)
            break;
        start = end + 1;
    }
    *result = current;
    return 0;
}

int run_named_test(struct render *render, const struct expression *node, chat_value name, chat_value value,
                   const struct call_arguments *extra, bool *result)
{
    if (name.kind != CHAT_VALUE_STRING)
        return render_fail(render, node->line, "a test name must be a string, not '%s'", value_type_name(name));
    const struct test_entry *test = test_find(value_string(name)->bytes, value_string(name)->length);
    if (!test)
        return render_fail(render, node->line, "No test named '%s'.", value_string(name)->bytes);
    return test->function(render, node, value, extra, result);
}

static FILTER(filter_abs)
{
    (void)arguments;
    switch (input.kind) {
    case CHAT_VALUE_INT:
        if (input.as.integer == INT64_MIN)
            return render_fail(render, node->line, "integer overflow");
        *result = chat_value_int(input.as.integer < 0 ? -input.as.integer : input.as.integer);
        return 0;
    case CHAT_VALUE_BOOL: *result = chat_value_int(input.as.boolean); return 0;
    case CHAT_VALUE_FLOAT: *result = chat_value_float(fabs(input.as.number)); return 0;
    case CHAT_VALUE_UNDEFINED: return fail_undefined(render, node->line, input);
    default: return render_fail(render, node->line, "bad operand type for abs(): '%s'", value_type_name(input));
    }
}

static FILTER(filter_attr)
{
    static const char *const names[] = {"name"};
    chat_value values[1];
    if (bind_arguments(render, node, "attr", arguments, names, 1, values) != 0)
        return -1;
    if (values[0].kind != CHAT_VALUE_STRING)
        return render_fail(render, node->line, "attribute name must be a string");
    if (input.kind == CHAT_VALUE_UNDEFINED)
        return fail_undefined(render, node->line, input);
    return get_attribute(render, node, input, value_string(values[0])->bytes, value_string(values[0])->length, result);
}

static FILTER(filter_default)
{
    static const char *const names[] = {"default_value", "boolean"};
    chat_value values[2];
    if (bind_arguments(render, node, "default", arguments, names, 2, values) != 0)
        return -1;
    bool replace = input.kind == CHAT_VALUE_UNDEFINED ||
                   (values[1].kind != CHAT_VALUE_INVALID && value_truthy(values[1]) && !value_truthy(input));
    if (!replace) {
        *result = value_retain(input);
        return 0;
    }
    if (values[0].kind == CHAT_VALUE_INVALID)
        return make_string(render, node->line, "", 0, result);
    *result = value_retain(values[0]);
    return 0;
}

/* Python's float(str): surrounding whitespace, underscores between digits,
 * inf/nan words; false when it does not read as a float. */
static bool parse_python_float(const struct chat_string *text, double *result)
{
    char buffer[128];
    size_t start = 0, end = text->length, length = 0, size;
    while (start < end && unicode_is_space(utf8_decode(text->bytes + start, end - start, &size)))
        start += size;
    while (end > start) {
        size = utf8_previous_size(text->bytes, end);
        size_t decoded;
        if (!unicode_is_space(utf8_decode(text->bytes + end - size, size, &decoded)) || decoded != size)
            break;
        end -= size;
    }
    if (end == start || end - start >= sizeof buffer)
        return false;
    for (size_t i = start; i < end; i++) {
        char c = text->bytes[i];
        if (c == '_') {
            bool between = i > start && i + 1 < end && text->bytes[i - 1] >= '0' && text->bytes[i - 1] <= '9' &&
                           text->bytes[i + 1] >= '0' && text->bytes[i + 1] <= '9';
            if (!between)
                return false;
            continue;
        }
        if (!strchr("0123456789+-.eEinfatyINFATY", c))
            return false;
        buffer[length++] = c;
    }
    buffer[length] = '\0';
    /* strtod would also take hex and "infinity" spellings Python spells the same; reject hex. */
    if (strchr(buffer, 'x') || strchr(buffer, 'X'))
        return false;
    const char *point = localeconv()->decimal_point;
    char *dot = strchr(buffer, '.');
    if (dot && point && point[0] && point[1] == '\0')
        *dot = point[0];
    char *parsed_end;
    errno = 0;
    *result = strtod(buffer, &parsed_end);
    return parsed_end == buffer + length && length > 0;
}

/* Python's int(str, base) for bases 2 to 36 (and 0: from the prefix). */
static bool parse_python_int(const struct chat_string *text, int base, int64_t *result)
{
    size_t start = 0, end = text->length, size;
    while (start < end && unicode_is_space(utf8_decode(text->bytes + start, end - start, &size)))
        start += size;
    while (end > start && (text->bytes[end - 1] == ' ' || (text->bytes[end - 1] >= '\t' && text->bytes[end - 1] <= '\r')))
        end--;
    bool negative = false;
    if (start < end && (text->bytes[start] == '+' || text->bytes[start] == '-'))
        negative = text->bytes[start++] == '-';
    if (end - start >= 2 && text->bytes[start] == '0') {
        char prefix = (char)(text->bytes[start + 1] | 0x20);
        int prefix_base = prefix == 'x' ? 16 : prefix == 'o' ? 8 : prefix == 'b' ? 2 : 0;
        if (prefix_base && (base == 0 || base == prefix_base)) {
            base = prefix_base;
            start += 2;
            if (start < end && text->bytes[start] == '_')
                start++;
        }
    }
    if (base == 0)
        base = 10;
    if (start == end)
        return false;
    uint64_t magnitude = 0;
    for (size_t i = start; i < end; i++) {
        char c = text->bytes[i];
        if (c == '_' && i > start && i + 1 < end && text->bytes[i - 1] != '_')
            continue;
        int digit = c >= '0' && c <= '9' ? c - '0' : (c | 0x20) >= 'a' && (c | 0x20) <= 'z' ? (c | 0x20) - 'a' + 10 : 99;
        if (digit >= base || magnitude > (UINT64_MAX - (uint64_t)digit) / (uint64_t)base)
            return false;
        magnitude = magnitude * (uint64_t)base + (uint64_t)digit;
    }
    if (magnitude > (uint64_t)INT64_MAX + negative)
        return false;
    *result = negative ? (int64_t)(0 - magnitude) : (int64_t)magnitude;
    return true;
}

static FILTER(filter_int)
{
    static const char *const names[] = {"default", "base"};
    chat_value values[2];
    int64_t base;
    if (bind_arguments(render, node, "int", arguments, names, 2, values) != 0 ||
        argument_int(render, node->line, values[1], "int", 10, &base) != 0)
        return -1;
    chat_value fallback = values[0].kind == CHAT_VALUE_INVALID ? chat_value_int(0) : values[0];
    int64_t integer;
    double real;
    switch (input.kind) {
    case CHAT_VALUE_INT: *result = input; return 0;
    case CHAT_VALUE_BOOL: *result = chat_value_int(input.as.boolean); return 0;
    case CHAT_VALUE_FLOAT:
        real = input.as.number;
        break;
    case CHAT_VALUE_STRING:
        if (base >= 0 && base <= 36 && base != 1 && parse_python_int(value_string(input), (int)base, &integer)) {
            *result = chat_value_int(integer);
            return 0;
        }
        /* Jinja2 then tries int(float(value)), so "42.5"|int is 42. */
        if (!parse_python_float(value_string(input), &real)) {
            *result = value_retain(fallback);
            return 0;
        }
        break;
    case CHAT_VALUE_UNDEFINED: return fail_undefined(render, node->line, input);
    default: *result = value_retain(fallback); return 0;
    }
    if (isnan(real)) {
        *result = value_retain(fallback);
        return 0;
    }
    if (isinf(real))
        return render_fail(render, node->line, "cannot convert float infinity to integer");
    if (real >= 9223372036854775808.0 || real < -9223372036854775808.0)
        return render_fail(render, node->line, "integer overflow (the result needs more than 64 bits)");
    *result = chat_value_int((int64_t)real);
    return 0;
}

static FILTER(filter_float)
{
    static const char *const names[] = {"default"};
    chat_value values[1];
    if (bind_arguments(render, node, "float", arguments, names, 1, values) != 0)
        return -1;
    double real;
    switch (input.kind) {
    case CHAT_VALUE_FLOAT: *result = input; return 0;
    case CHAT_VALUE_INT: *result = chat_value_float((double)input.as.integer); return 0;
    case CHAT_VALUE_BOOL: *result = chat_value_float(input.as.boolean); return 0;
    case CHAT_VALUE_STRING:
        if (parse_python_float(value_string(input), &real)) {
            *result = chat_value_float(real);
            return 0;
        }
        break;
    case CHAT_VALUE_UNDEFINED: return fail_undefined(render, node->line, input);
    default: break;
    }
    *result = values[0].kind == CHAT_VALUE_INVALID ? chat_value_float(0.0) : value_retain(values[0]);
    return 0;
}

/* Python's round(x, digits) for floats: correctly rounded, ties to even,
 * which the C library's %.*f conversion also does. */
static double round_float(double value, int64_t digits)
{
    if (isnan(value) || isinf(value))
        return value;
    if (digits >= 0) {
        if (digits > 320)
            return value;
        char text[512];
        snprintf(text, sizeof text, "%.*f", (int)digits, value);
        return strtod(text, NULL);
    }
    if (digits < -308)
        return copysign(0.0, value);
    double scale = pow(10.0, (double)-digits);
    double scaled = value / scale, rounded = nearbyint(scaled);
    return rounded * scale;
}

static FILTER(filter_round)
{
    static const char *const names[] = {"precision", "method"};
    chat_value values[2];
    int64_t precision;
    if (bind_arguments(render, node, "round", arguments, names, 2, values) != 0 ||
        argument_int(render, node->line, values[0], "round", 0, &precision) != 0)
        return -1;
    const char *method = values[1].kind == CHAT_VALUE_STRING ? value_string(values[1])->bytes : "common";
    if (values[1].kind != CHAT_VALUE_INVALID && values[1].kind != CHAT_VALUE_STRING)
        method = "";
    if (strcmp(method, "common") != 0 && strcmp(method, "ceil") != 0 && strcmp(method, "floor") != 0)
        return render_fail(render, node->line, "method must be common, ceil or floor");
    if (input.kind == CHAT_VALUE_UNDEFINED)
        return fail_undefined(render, node->line, input);
    if (input.kind != CHAT_VALUE_INT && input.kind != CHAT_VALUE_BOOL && input.kind != CHAT_VALUE_FLOAT)
        return render_fail(render, node->line, "type %s doesn't define __round__ method", value_type_name(input));
    if (method[0] == 'c' && method[1] == 'o') {
        if (input.kind != CHAT_VALUE_FLOAT) {
            int64_t integer = input.kind == CHAT_VALUE_BOOL ? input.as.boolean : input.as.integer;
            if (precision < 0) {
                double rounded = round_float((double)integer, precision);
                integer = fabs(rounded) < 9.2e18 ? (int64_t)rounded : integer;
            }
            *result = chat_value_int(integer);
            return 0;
        }
        *result = chat_value_float(round_float(input.as.number, precision));
        return 0;
    }
    double value = input.kind == CHAT_VALUE_FLOAT ? input.as.number
                   : (double)(input.kind == CHAT_VALUE_BOOL ? input.as.boolean : input.as.integer);
    double scale = pow(10.0, (double)precision);
    double rounded = method[0] == 'c' ? ceil(value * scale) : floor(value * scale);
    *result = chat_value_float(rounded / scale);
    return 0;
}

static const struct filter_entry filters[] = {
    {"abs", filter_abs},
    {"attr", filter_attr},
    {"batch", filter_batch},
    {"capitalize", filter_capitalize},
    {"center", filter_center},
    {"count", filter_length},
    {"d", filter_default},
    {"default", filter_default},
    {"dictsort", filter_dictsort},
    {"e", filter_escape},
    {"escape", filter_escape},
    {"first", filter_first},
    {"float", filter_float},
    {"forceescape", filter_forceescape},
    {"format", filter_format},
    {"indent", filter_indent},
    {"int", filter_int},
    {"items", filter_items},
    {"join", filter_join},
    {"last", filter_last},
    {"length", filter_length},
    {"list", filter_list},
    {"lower", filter_lower},
    {"map", filter_map},
    {"max", filter_max},
    {"min", filter_min},
    {"reject", filter_reject},
    {"rejectattr", filter_rejectattr},
    {"replace", filter_replace},
    {"reverse", filter_reverse},
    {"round", filter_round},
    {"safe", filter_safe},
    {"select", filter_select},
    {"selectattr", filter_selectattr},
    {"slice", filter_slice},
    {"sort", filter_sort},
    {"string", filter_string},
    {"striptags", filter_striptags},
    {"sum", filter_sum},
    {"title", filter_title},
    {"tojson", filter_tojson},
    {"trim", filter_trim},
    {"truncate", filter_truncate},
    {"unique", filter_unique},
    {"upper", filter_upper},
    {"wordcount", filter_wordcount},
};

const struct filter_entry *filter_find(const char *name, size_t length)
{
    for (size_t i = 0; i < sizeof filters / sizeof filters[0]; i++)
        if (strlen(filters[i].name) == length && memcmp(filters[i].name, name, length) == 0)
            return &filters[i];
    return NULL;
}
