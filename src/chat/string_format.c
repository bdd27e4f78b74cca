/* printf-style and str.format formatting over one shared formatter of a
 * value under a format spec ([[fill]align][sign][#][0][width][,][.precision]
 * [type]); floats go through the C library, which agrees with Python for
 * the e, f and g conversions. */
#include "chat/string_format.h"

#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/render.h"
#include "chat/unicode.h"

/* Float precisions above this are refused (Python prints them); the digits
 * of the largest double at this precision fit in FLOAT_DIGITS_MAX. */
#define FLOAT_PRECISION_MAX 300
#define FLOAT_DIGITS_MAX (FLOAT_PRECISION_MAX + 400)

struct format_spec {
    uint32_t fill;
    char align; /* '<', '>', '^', '=' or 0 for the type's default */
    char sign;  /* '+', ' ', '-' or 0 */
    bool alternate, zero;
    long width, precision; /* -1: not given */
    char grouping;          /* ',', '_' or 0 */
    char type;              /* 0: none */
};

static void spec_reset(struct format_spec *spec)
{
    memset(spec, 0, sizeof *spec);
    spec->fill = ' ';
    spec->width = spec->precision = -1;
}

/* Appends body padded to spec->width; sign_length bytes of body are a sign
 * or prefix that '=' alignment keeps in front of the padding. */
static void pad(struct string_builder *builder, const struct format_spec *spec, const char *body, size_t length,
                size_t sign_length, char default_align)
{
    size_t count = utf8_count(body, length);
    size_t missing = spec->width > 0 && (size_t)spec->width > count ? (size_t)spec->width - count : 0;
    char align = spec->align ? spec->align : default_align;
    char fill[4];
    size_t fill_length = utf8_encode(spec->fill, fill);
    size_t before = align == '<' ? 0 : align == '^' ? missing / 2 : missing;
    if (align == '=') {
        builder_append(builder, body, sign_length);
        builder_append_repeat(builder, fill, fill_length, missing);
        builder_append(builder, body + sign_length, length - sign_length);
        return;
    }
    builder_append_repeat(builder, fill, fill_length, before);
    builder_append(builder, body, length);
    builder_append_repeat(builder, fill, fill_length, missing - before);
}

static void group_digits(char *digits, size_t *length, char separator, size_t every)
{
    char grouped[160];
    size_t count = *length, out = 0;
    for (size_t i = 0; i < count && out + 2 < sizeof grouped; i++) {
        if (i > 0 && (count - i) % every == 0)
            grouped[out++] = separator;
        grouped[out++] = digits[i];
    }
    memcpy(digits, grouped, out);
    *length = out;
}

static int format_integer(struct render *render, int line, struct string_builder *builder, int64_t value,
                          const struct format_spec *spec)
{
    char type = spec->type ? spec->type : 'd';
    if (type == 'c') {
        if (value < 0 || value > 0x10FFFF)
            return render_fail(render, line, "%%c arg not in range(0x110000)");
        char text[4];
        pad(builder, spec, text, utf8_encode((uint32_t)value, text), 0, '<');
        return 0;
    }
    int base = type == 'x' || type == 'X' ? 16 : type == 'o' ? 8 : type == 'b' ? 2 : 10;
    uint64_t magnitude = value < 0 ? 0 - (uint64_t)value : (uint64_t)value;
    char digits[160];
    size_t count = 0;
    do {
        unsigned digit = (unsigned)(magnitude % (unsigned)base);
        digits[count++] = (char)(digit < 10 ? '0' + digit : (type == 'X' ? 'A' : 'a') + digit - 10);
        magnitude /= (unsigned)base;
    } while (magnitude);
    for (size_t i = 0; i < count / 2; i++) {
        char swap = digits[i];
        digits[i] = digits[count - 1 - i];
        digits[count - 1 - i] = swap;
    }
    if (spec->grouping)
        group_digits(digits, &count, spec->grouping, base == 10 ? 3 : 4);
    char body[200];
    size_t length = 0;
    if (value < 0)
        body[length++] = '-';
    else if (spec->sign == '+' || spec->sign == ' ')
        body[length++] = spec->sign;
    if (spec->alternate && base != 10) {
        body[length++] = '0';
        body[length++] = type == 'X' ? 'X' : type;
    }
    size_t prefix = length;
    memcpy(body + length, digits, count);
    length += count;
    struct format_spec padded = *spec;
    if (spec->zero && !spec->align) {
        padded.fill = '0';
        padded.align = '=';
    }
    pad(builder, &padded, body, length, prefix, '>');
    return 0;
}

static int format_float(struct render *render, int line, struct string_builder *builder, double value,
                        const struct format_spec *spec)
{
    char type = spec->type;
    long precision = spec->precision;
    char digits[FLOAT_DIGITS_MAX];
    double magnitude = fabs(value);
    size_t count;
    if (!type && precision < 0) {
        char text[32];
        count = format_python_float(magnitude, text);
        memcpy(digits, text, count);
    } else {
        if (precision < 0)
            precision = 6;
        if (precision > FLOAT_PRECISION_MAX)
            return render_fail(render, line, "format precision too large");
        char conversion = type ? type : 'g';
        if (conversion == '%') {
            magnitude *= 100;
            conversion = 'f';
        }
        if (conversion == 'n')
            conversion = 'g';
        char format[16];
        snprintf(format, sizeof format, "%%%s.*%c", spec->alternate ? "#" : "", conversion);
        int written = snprintf(digits, sizeof digits - 2, format, (int)precision, magnitude);
        if (written < 0 || (size_t)written >= sizeof digits - 2)
            return render_fail(render, line, "formatted number too long");
        count = (size_t)written;
        if (spec->type == '%')
            digits[count++] = '%';
    }
    char body[sizeof digits + 8];
    size_t length = 0;
    if (signbit(value) && !isnan(value))
        body[length++] = '-';
    else if (spec->sign == '+' || spec->sign == ' ')
        body[length++] = spec->sign;
    size_t prefix = length;
    memcpy(body + length, digits, count);
    length += count;
    struct format_spec padded = *spec;
    if (spec->zero && !spec->align) {
        padded.fill = '0';
        padded.align = '=';
    }
    pad(builder, &padded, body, length, prefix, '>');
    return 0;
}

static bool is_float_type(char type)
{
    return type && strchr("eEfFgG%n", type) != NULL;
}

/* One value under a spec; convert 'r' for repr, 's' for str, 0 for neither. */
static int format_value(struct render *render, int line, struct string_builder *builder, chat_value value,
                        const struct format_spec *spec, char convert, bool percent_style)
{
    char type = spec->type;
    bool integer = value.kind == CHAT_VALUE_INT || value.kind == CHAT_VALUE_BOOL;
    if (!convert && (integer || value.kind == CHAT_VALUE_FLOAT) && type != 's' &&
        !(value.kind == CHAT_VALUE_BOOL && !type)) {
        if (is_float_type(type) || (value.kind == CHAT_VALUE_FLOAT && !type))
            return format_float(render, line, builder, value.kind == CHAT_VALUE_FLOAT ? value.as.number
                                                        : (double)(value.kind == CHAT_VALUE_BOOL ? value.as.boolean : value.as.integer),
                                spec);
        if (value.kind == CHAT_VALUE_FLOAT) {
            if (!percent_style && type != 'c')
                return render_fail(render, line, "Unknown format code '%c' for object of type 'float'", type);
            if (isnan(value.as.number) || isinf(value.as.number))
                return render_fail(render, line, "cannot convert float %s to integer",
                                   isnan(value.as.number) ? "NaN" : "infinity");
            if (fabs(value.as.number) >= 9.2e18)
                return render_fail(render, line, "integer overflow (the result needs more than 64 bits)");
            return format_integer(render, line, builder, (int64_t)value.as.number, spec);
        }
        return format_integer(render, line, builder, value.kind == CHAT_VALUE_BOOL ? value.as.boolean : value.as.integer,
                              spec);
    }
    if (type && type != 's' && !convert)
        return render_fail(render, line, percent_style ? "%%%c format: a real number is required, not %s"
                                                       : "Unknown format code '%c' for object of type '%s'",
                           type, value_type_name(value));
    struct string_builder text;
    builder_init(&text, &render->heap, 0);
    int status = convert == 'r' ? value_write_repr(&text, value) : value_write_str(&text, value);
    if (status != VALUE_OK) {
        builder_discard(&text);
        return render_fail_status(render, line, status);
    }
    size_t length = builder_length(&text);
    if (spec->precision >= 0)
        length = utf8_offset(builder_text(&text), length, (size_t)spec->precision);
    pad(builder, spec, builder_text(&text), length, 0, percent_style ? '>' : '<');
    builder_discard(&text);
    return 0;
}

/* A width, precision or index as written: formatting then pads or cuts to
 * it exactly, as Python does, and the render's budget refuses what is too
 * big to print. Past LONG_MAX it stays there, far beyond any budget. */
static long read_number(const char *text, size_t length, size_t *position)
{
    long number = 0;
    while (*position < length && text[*position] >= '0' && text[*position] <= '9') {
        long digit = text[*position] - '0';
        number = number > (LONG_MAX - digit) / 10 ? LONG_MAX : number * 10 + digit;
        (*position)++;
    }
    return number;
}

/* Takes the next positional argument of a % format. */
static int next_argument(struct render *render, int line, chat_value arguments, size_t *used, chat_value *argument)
{
    if (arguments.kind == CHAT_VALUE_TUPLE) {
        if (*used >= value_list(arguments)->count)
            return render_fail(render, line, "not enough arguments for format string");
        *argument = value_list(arguments)->items[(*used)++];
        return 0;
    }
    if (*used >= 1)
        return render_fail(render, line, "not enough arguments for format string");
    (*used)++;
    *argument = arguments;
    return 0;
}

int percent_format(struct render *render, int line, chat_value format, chat_value arguments, chat_value *result)
{
    const char *text = value_string(format)->bytes;
    size_t length = value_string(format)->length, used = 0;
    bool mapping = arguments.kind == CHAT_VALUE_OBJECT, used_mapping = false;
    struct string_builder builder;
    builder_init(&builder, &render->heap, 0);
    for (size_t i = 0; i < length;) {
        if (text[i] != '%') {
            builder_append(&builder, text + i, 1);
            i++;
            continue;
        }
        i++;
        struct format_spec spec;
        spec_reset(&spec);
        chat_value argument;
        bool have_argument = false;
        if (i < length && text[i] == '(') {
            size_t name = ++i;
            int depth = 1;
            while (i < length && depth) {
                depth += text[i] == '(' ? 1 : text[i] == ')' ? -1 : 0;
                i++;
            }
            if (depth) {
                builder_discard(&builder);
                return render_fail(render, line, "incomplete format key");
            }
            if (!mapping) {
                builder_discard(&builder);
                return render_fail(render, line, "format requires a mapping");
            }
            const chat_value *found = dict_find_text(arguments, text + name, i - 1 - name);
            if (!found) {
                builder_discard(&builder);
                return render_fail(render, line, "KeyError: '%.*s'", (int)(i - 1 - name), text + name);
            }
            argument = *found;
            have_argument = used_mapping = true;
        }
        for (; i < length && strchr("-+ #0", text[i]); i++) {
            switch (text[i]) {
            case '-': spec.align = '<'; break;
            case '+': spec.sign = '+'; break;
            case ' ': if (spec.sign != '+') spec.sign = ' '; break;
            case '#': spec.alternate = true; break;
            default: spec.zero = true; break;
            }
        }
        chat_value star;
        if (i < length && text[i] == '*') {
            i++;
            if (next_argument(render, line, arguments, &used, &star) != 0 || star.kind != CHAT_VALUE_INT) {
                builder_discard(&builder);
                return render->failed ? -1 : render_fail(render, line, "* wants int");
            }
            int64_t width = star.as.integer;
            if (width < 0) {
                spec.align = '<';
                width = width == INT64_MIN ? INT64_MAX : -width;
            }
            spec.width = (long)width;
        } else {
            size_t before = i;
            long width = read_number(text, length, &i);
            if (i > before)
                spec.width = width;
        }
        if (i < length && text[i] == '.') {
            i++;
            if (i < length && text[i] == '*') {
                i++;
                if (next_argument(render, line, arguments, &used, &star) != 0 || star.kind != CHAT_VALUE_INT) {
                    builder_discard(&builder);
                    return render->failed ? -1 : render_fail(render, line, "* wants int");
                }
                spec.precision = star.as.integer < 0 ? 0 : (long)star.as.integer;
            } else {
                spec.precision = read_number(text, length, &i);
            }
        }
        while (i < length && (text[i] == 'h' || text[i] == 'l' || text[i] == 'L'))
            i++;
        if (i >= length) {
            builder_discard(&builder);
            return render_fail(render, line, "incomplete format");
        }
        char type = text[i++];
        if (type == '%') {
            builder_append_char(&builder, '%');
            continue;
        }
        if (!strchr("diouxXeEfFgGcrsa", type)) {
            builder_discard(&builder);
            return render_fail(render, line, "unsupported format character '%c' (0x%x) at index %zu",
                               type >= 0x20 && type < 0x7F ? type : '?', (unsigned char)type, i - 1);
        }
        if (!have_argument && next_argument(render, line, arguments, &used, &argument) != 0) {
            builder_discard(&builder);
            return -1;
        }
        char convert = 0;
        if (type == 'r' || type == 'a') {
            convert = 'r';
            type = 's';
        } else if (type == 's') {
            convert = 's';
        } else if (type == 'i' || type == 'u') {
            type = 'd';
        }
        spec.type = type == 's' ? 0 : type;
        if (spec.zero && (type == 's' || type == 'c'))
            spec.zero = false;
        if (type == 'c' && argument.kind == CHAT_VALUE_STRING) {
            convert = 's';
            spec.type = 0;
        }
        if (format_value(render, line, &builder, argument, &spec, convert, true) != 0) {
            builder_discard(&builder);
            return -1;
        }
    }
    size_t expected = arguments.kind == CHAT_VALUE_TUPLE ? value_list(arguments)->count : 1;
    if (!used_mapping && !mapping && used < expected) {
        builder_discard(&builder);
        return render_fail(render, line, "not all arguments converted during string formatting");
    }
    return finish_string(render, line, &builder, result);
}

/* [[fill]align][sign][#][0][width][,|_][.precision][type] */
static int parse_spec(struct render *render, int line, const char *text, size_t length, struct format_spec *spec)
{
    spec_reset(spec);
    size_t i = 0, size = 0;
    if (length) {
        uint32_t first = utf8_decode(text, length, &size);
        if (size < length && strchr("<>=^", text[size])) {
            spec->fill = first;
            spec->align = text[size];
            i = size + 1;
        } else if (strchr("<>=^", text[0])) {
            spec->align = text[0];
            i = 1;
        }
    }
    if (i < length && strchr("+- ", text[i]))
        spec->sign = text[i++];
    if (i < length && text[i] == '#')
        spec->alternate = true, i++;
    if (i < length && text[i] == '0')
        spec->zero = true, i++;
    size_t before = i;
    long width = read_number(text, length, &i);
    if (i > before)
        spec->width = width;
    if (i < length && (text[i] == ',' || text[i] == '_'))
        spec->grouping = text[i++];
    if (i < length && text[i] == '.') {
        i++;
        before = i;
        spec->precision = read_number(text, length, &i);
        if (i == before)
            return render_fail(render, line, "Format specifier missing precision");
    }
    if (i < length)
        spec->type = text[i++];
    if (i < length)
        return render_fail(render, line, "Invalid format specifier");
    return 0;
}

static const chat_value *find_keyword(const struct call_arguments *arguments, const char *name, size_t length)
{
    for (size_t i = 0; i < arguments->keyword_count; i++)
        if (arguments->keywords[i].length == length && memcmp(arguments->keywords[i].name, name, length) == 0)
            return &arguments->keywords[i].value;
    return NULL;
}

/* One {field!conversion:spec} (text without the braces). */
static int format_field(struct render *render, const struct expression *node, struct string_builder *builder,
                        const char *field, size_t length, const struct call_arguments *arguments, size_t *automatic,
                        int *numbering)
{
    int line = node->line;
    size_t name_end = 0;
    while (name_end < length && field[name_end] != '!' && field[name_end] != ':' && field[name_end] != '.' &&
           field[name_end] != '[')
        name_end++;
    chat_value value;
    if (name_end == 0 || (field[0] >= '0' && field[0] <= '9')) {
        size_t index;
        if (name_end == 0) {
            if (*numbering == 2)
                return render_fail(render, line, "cannot switch from manual field specification to automatic field numbering");
            *numbering = 1;
            index = (*automatic)++;
        } else {
            if (*numbering == 1)
                return render_fail(render, line, "cannot switch from automatic field numbering to manual field specification");
            *numbering = 2;
            size_t position = 0;
            index = (size_t)read_number(field, name_end, &position);
            if (position != name_end)
                return render_fail(render, line, "invalid format field name");
        }
        if (index >= arguments->positional_count)
            return render_fail(render, line, "Replacement index %zu out of range for positional args tuple", index);
        value = value_retain(arguments->positional[index]);
    } else {
        const chat_value *found = find_keyword(arguments, field, name_end);
        if (!found)
            return render_fail(render, line, "KeyError: '%.*s'", (int)name_end, field);
        value = value_retain(*found);
    }
    size_t i = name_end;
    while (i < length && (field[i] == '.' || field[i] == '[')) {
        chat_value next;
        int status;
        if (field[i] == '.') {
            size_t start = ++i;
            while (i < length && field[i] != '.' && field[i] != '[' && field[i] != '!' && field[i] != ':')
                i++;
            status = get_attribute(render, node, value, field + start, i - start, &next);
        } else {
            size_t start = ++i;
            while (i < length && field[i] != ']')
                i++;
            if (i >= length) {
                value_release(value);
                return render_fail(render, line, "Missing ']' in format string");
            }
            chat_value key;
            size_t position = start;
            long number = read_number(field, i, &position);
            if (position == i && i > start)
                key = chat_value_int(number);
            else if (make_string(render, line, field + start, i - start, &key) != 0) {
                value_release(value);
                return -1;
            }
            i++;
            status = get_item(render, node, value, key, &next);
            value_release(key);
        }
        value_release(value);
        if (status != 0)
            return -1;
        value = next;
    }
    char convert = 0;
    if (i < length && field[i] == '!') {
        if (i + 1 >= length || !strchr("rsa", field[i + 1])) {
            value_release(value);
            return render_fail(render, line, "Unknown conversion specifier");
        }
        convert = field[i + 1] == 's' ? 's' : 'r';
        i += 2;
    }
    struct format_spec spec;
    spec_reset(&spec);
    int status = 0;
    if (i < length && field[i] == ':')
        status = parse_spec(render, line, field + i + 1, length - i - 1, &spec);
    else if (i < length)
        status = render_fail(render, line, "expected ':' after conversion specifier");
    if (status == 0)
        status = format_value(render, line, builder, value, &spec, convert, false);
    value_release(value);
    return status;
}

int brace_format(struct render *render, const struct expression *node, chat_value format,
                 const struct call_arguments *arguments, chat_value *result)
{
    int line = node->line;
    const char *text = value_string(format)->bytes;
    size_t length = value_string(format)->length, automatic = 0;
    int numbering = 0;
    struct string_builder builder;
    builder_init(&builder, &render->heap, 0);
    for (size_t i = 0; i < length;) {
        char c = text[i];
        if (c == '}') {
            if (i + 1 < length && text[i + 1] == '}') {
                builder_append_char(&builder, '}');
                i += 2;
                continue;
            }
            builder_discard(&builder);
            return render_fail(render, line, "Single '}' encountered in format string");
        }
        if (c != '{') {
            builder_append_char(&builder, c);
            i++;
            continue;
        }
        if (i + 1 < length && text[i + 1] == '{') {
            builder_append_char(&builder, '{');
            i += 2;
            continue;
        }
        size_t start = ++i;
        int depth = 1;
        while (i < length && depth) {
            depth += text[i] == '{' ? 1 : text[i] == '}' ? -1 : 0;
            i++;
        }
        if (depth) {
            builder_discard(&builder);
            return render_fail(render, line, "Single '{' encountered in format string");
        }
        if (format_field(render, node, &builder, text + start, i - 1 - start, arguments, &automatic, &numbering) != 0) {
            builder_discard(&builder);
            return -1;
        }
    }
    return finish_string(render, line, &builder, result);
}
