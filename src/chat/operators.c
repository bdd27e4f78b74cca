/* Arithmetic, comparison and membership with Python's rules: ints stay ints
 * (overflow is an error: Python would switch to a big integer), / always
 * gives a float, // and % round toward negative infinity, + and * also
 * join and repeat strings, lists and tuples, str % args formats. */
#include "chat/render.h"
#include "chat/unicode.h"

#include <math.h>
#include <string.h>

#include "chat/lexer.h"
#include "chat/string_format.h"

static const char *operator_spelling(unsigned char operator)
{
    switch (operator) {
    case OPERATOR_ADD: return "+";
    case OPERATOR_SUBTRACT: return "-";
    case OPERATOR_MULTIPLY: return "*";
    case OPERATOR_DIVIDE: return "/";
    case OPERATOR_FLOOR_DIVIDE: return "//";
    case OPERATOR_MODULO: return "%";
    case OPERATOR_POWER: return "** or pow()";
    default: return "?";
    }
}

static bool is_integer(chat_value value)
{
    return value.kind == CHAT_VALUE_INT || value.kind == CHAT_VALUE_BOOL;
}

static bool is_number(chat_value value)
{
    return is_integer(value) || value.kind == CHAT_VALUE_FLOAT;
}

static int64_t integer_of(chat_value value)
{
    return value.kind == CHAT_VALUE_BOOL ? value.as.boolean : value.as.integer;
}

static double real_of(chat_value value)
{
    return value.kind == CHAT_VALUE_FLOAT ? value.as.number : (double)integer_of(value);
}

static int unsupported(struct render *render, int line, unsigned char operator, chat_value left, chat_value right)
{
    return render_fail(render, line, "unsupported operand type(s) for %s: '%s' and '%s'", operator_spelling(operator),
                       value_type_name(left), value_type_name(right));
}

static int overflow(struct render *render, int line)
{
    return render_fail(render, line, "integer overflow (the result needs more than 64 bits)");
}

/* Python's floor division and modulo of ints. */
static int64_t floor_divide(int64_t a, int64_t b)
{
    int64_t quotient = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0)))
        quotient--;
    return quotient;
}

static int64_t floor_modulo(int64_t a, int64_t b)
{
    int64_t remainder = a % b;
    if (remainder != 0 && ((remainder < 0) != (b < 0)))
        remainder += b;
    return remainder;
}

/* CPython's float divmod. */
static void float_divmod(double x, double y, double *quotient, double *remainder)
{
    double mod = fmod(x, y);
    double div = (x - mod) / y;
    if (mod != 0) {
        if ((y < 0) != (mod < 0)) {
            mod += y;
            div -= 1.0;
        }
    } else {
        mod = copysign(0.0, y);
    }
    double floored;
    if (div != 0) {
        floored = floor(div);
        if (div - floored > 0.5)
            floored += 1.0;
    } else {
        floored = copysign(0.0, x / y);
    }
    *quotient = floored;
    *remainder = mod;
}

static int integer_power(struct render *render, int line, int64_t base, int64_t exponent, chat_value *result)
{
    int64_t value = 1;
    while (exponent > 0) {
        if (exponent & 1) {
            if (__builtin_mul_overflow(value, base, &value))
                return overflow(render, line);
        }
        exponent >>= 1;
        if (exponent && __builtin_mul_overflow(base, base, &base))
            return overflow(render, line);
    }
    *result = chat_value_int(value);
    return 0;
}

static int numeric_operation(struct render *render, int line, unsigned char operator, chat_value left,
                             chat_value right, chat_value *result)
{
    bool integers = is_integer(left) && is_integer(right);
    int64_t a = integers ? integer_of(left) : 0, b = integers ? integer_of(right) : 0, c;
    double x = real_of(left), y = real_of(right);
    switch (operator) {
    case OPERATOR_ADD:
        if (!integers)
            break;
        if (__builtin_add_overflow(a, b, &c))
            return overflow(render, line);
        *result = chat_value_int(c);
        return 0;
    case OPERATOR_SUBTRACT:
        if (!integers)
            break;
        if (__builtin_sub_overflow(a, b, &c))
            return overflow(render, line);
        *result = chat_value_int(c);
        return 0;
    case OPERATOR_MULTIPLY:
        if (!integers)
            break;
        if (__builtin_mul_overflow(a, b, &c))
            return overflow(render, line);
        *result = chat_value_int(c);
        return 0;
    case OPERATOR_DIVIDE:
        if (y == 0)
            return render_fail(render, line, integers ? "division by zero" : "float division by zero");
        *result = chat_value_float(x / y);
        return 0;
    case OPERATOR_FLOOR_DIVIDE:
    case OPERATOR_MODULO:
        if (integers) {
            if (b == 0)
                return render_fail(render, line, "integer division or modulo by zero");
            if (a == INT64_MIN && b == -1) {
                if (operator == OPERATOR_MODULO) {
                    *result = chat_value_int(0);
                    return 0;
                }
                return overflow(render, line);
            }
            *result = chat_value_int(operator == OPERATOR_FLOOR_DIVIDE ? floor_divide(a, b) : floor_modulo(a, b));
            return 0;
        }
        if (y == 0)
            return render_fail(render, line, operator == OPERATOR_MODULO ? "float modulo" : "float floor division by zero");
        {
            double quotient, remainder;
            float_divmod(x, y, &quotient, &remainder);
            *result = chat_value_float(operator == OPERATOR_FLOOR_DIVIDE ? quotient : remainder);
        }
        return 0;
    case OPERATOR_POWER:
        if (integers && b >= 0)
            return integer_power(render, line, a, b, result);
        if (x == 0 && y < 0)
            return render_fail(render, line, "0.0 cannot be raised to a negative power");
        if (x < 0 && y != floor(y))
            return render_fail(render, line, "a negative number to a fractional power has no real result");
        *result = chat_value_float(pow(x, y));
        return 0;
    default: return unsupported(render, line, operator, left, right);
    }
    switch (operator) {
    case OPERATOR_ADD: *result = chat_value_float(x + y); return 0;
    case OPERATOR_SUBTRACT: *result = chat_value_float(x - y); return 0;
    default: *result = chat_value_float(x * y); return 0;
    }
}

static int concatenate_lists(struct render *render, int line, chat_value left, chat_value right, chat_value *result)
{
    const struct chat_list *a = value_list(left), *b = value_list(right);
    chat_value list = value_list_new(&render->heap, left.kind, a->count + b->count);
    if (list.kind == CHAT_VALUE_INVALID)
        return render_fail_status(render, line, VALUE_NO_MEMORY);
    for (size_t i = 0; i < a->count; i++)
        list_append(list, value_retain(a->items[i]));
    for (size_t i = 0; i < b->count; i++)
        list_append(list, value_retain(b->items[i]));
    *result = list;
    return 0;
}

static int repeat(struct render *render, int line, chat_value sequence, int64_t times, chat_value *result)
{
    if (times < 0)
        times = 0;
    if (sequence.kind == CHAT_VALUE_STRING) {
        struct string_builder builder;
        builder_init(&builder, &render->heap, 0);
        builder_append_repeat(&builder, value_string(sequence)->bytes, value_string(sequence)->length, (size_t)times);
        return finish_string(render, line, &builder, result);
    }
    const struct chat_list *items = value_list(sequence);
    if (items->count && (uint64_t)times > render->heap.budget / sizeof(chat_value) / items->count) {
        render->heap.exhausted = true;
        return render_fail_status(render, line, VALUE_NO_MEMORY);
    }
    chat_value list = value_list_new(&render->heap, sequence.kind, items->count * (size_t)times);
    if (list.kind == CHAT_VALUE_INVALID)
        return render_fail_status(render, line, VALUE_NO_MEMORY);
    for (int64_t t = 0; t < times; t++)
        for (size_t i = 0; i < items->count; i++)
            list_append(list, value_retain(items->items[i]));
    *result = list;
    return 0;
}

int binary_operation(struct render *render, int line, unsigned char operator, chat_value left, chat_value right,
                     chat_value *result)
{
    if (left.kind == CHAT_VALUE_UNDEFINED)
        return fail_undefined(render, line, left);
    if (right.kind == CHAT_VALUE_UNDEFINED)
        return fail_undefined(render, line, right);
    if (is_number(left) && is_number(right))
        return numeric_operation(render, line, operator, left, right, result);
    if (operator == OPERATOR_ADD) {
        if (left.kind == CHAT_VALUE_STRING && right.kind == CHAT_VALUE_STRING) {
            struct string_builder builder;
            builder_init(&builder, &render->heap, 0);
            builder_append(&builder, value_string(left)->bytes, value_string(left)->length);
            builder_append(&builder, value_string(right)->bytes, value_string(right)->length);
            return finish_string(render, line, &builder, result);
        }
        if (value_is_list_like(left) && left.kind == right.kind)
            return concatenate_lists(render, line, left, right, result);
        if (left.kind == CHAT_VALUE_STRING || value_is_list_like(left))
            return render_fail(render, line, "can only concatenate %s (not \"%s\") to %s", value_type_name(left),
                               value_type_name(right), value_type_name(left));
    }
    if (operator == OPERATOR_MULTIPLY) {
        bool left_sequence = left.kind == CHAT_VALUE_STRING || value_is_list_like(left);
        bool right_sequence = right.kind == CHAT_VALUE_STRING || value_is_list_like(right);
        if (left_sequence && is_integer(right))
            return repeat(render, line, left, integer_of(right), result);
        if (right_sequence && is_integer(left))
            return repeat(render, line, right, integer_of(left), result);
    }
    if (operator == OPERATOR_MODULO && left.kind == CHAT_VALUE_STRING)
        return percent_format(render, line, left, right, result);
    return unsupported(render, line, operator, left, right);
}

int contains(struct render *render, int line, chat_value container, chat_value item, bool *result)
{
    *result = false;
    switch (container.kind) {
    case CHAT_VALUE_STRING:
        if (item.kind != CHAT_VALUE_STRING)
            return render_fail(render, line, "'in <string>' requires string as left operand, not %s",
                               value_type_name(item));
        if (render_charge(render, line, value_string(container)->length) != 0)
            return -1;
        {
            const struct chat_string *haystack = value_string(container), *needle = value_string(item);
            *result = needle->length == 0 ||
                      (needle->length <= haystack->length &&
                       bytes_find(haystack->bytes, haystack->length, needle->bytes, needle->length) != NULL);
        }
        return 0;
    case CHAT_VALUE_ARRAY:
    case CHAT_VALUE_TUPLE: {
        const struct chat_list *list = value_list(container);
        uint64_t work = 0;
        for (size_t i = 0; i < list->count; i++) {
            int equal = value_equal_counted(list->items[i], item, &work);
            if (equal < 0)
                return render_fail_status(render, line, equal);
            if (equal) {
                *result = true;
                break;
            }
        }
        return render_charge(render, line, work);
    }
    case CHAT_VALUE_OBJECT: {
        int status;
        uint64_t work = 0;
        *result = dict_find(container, item, &status, &work) != NULL;
        if (render_charge(render, line, work) != 0)
            return -1;
        if (status == VALUE_UNHASHABLE)
            return render_fail(render, line, "unhashable type: '%s'", value_type_name(item));
        return status == VALUE_OK ? 0 : render_fail_status(render, line, status);
    }
    case CHAT_VALUE_RANGE: {
        const struct chat_range *range = (const struct chat_range *)container.as.object;
        int64_t length = range_length(range);
        if (is_integer(item) || (item.kind == CHAT_VALUE_FLOAT && item.as.number == floor(item.as.number) &&
                                 fabs(item.as.number) < 9e18)) {
            int64_t value = is_integer(item) ? integer_of(item) : (int64_t)item.as.number;
            __int128 offset = (__int128)value - range->start;
            *result = length > 0 && offset % range->step == 0 && offset / range->step >= 0 &&
                      offset / range->step < length;
        }
        return 0;
    }
    case CHAT_VALUE_UNDEFINED: return 0;
    default:
        return render_fail(render, line, "argument of type '%s' is not iterable", value_type_name(container));
    }
}

int compare_values(struct render *render, int line, unsigned char kind, chat_value left, chat_value right,
                   bool *result)
{
    if (kind == COMPARE_EQUAL || kind == COMPARE_NOT_EQUAL) {
        uint64_t work = 0;
        int equal = value_equal_counted(left, right, &work);
        if (equal < 0)
            return render_fail_status(render, line, equal);
        if (render_charge(render, line, work) != 0)
            return -1;
        *result = (equal == 1) == (kind == COMPARE_EQUAL);
        return 0;
    }
    if (kind == COMPARE_IN || kind == COMPARE_NOT_IN) {
        if (contains(render, line, right, left, result) != 0)
            return -1;
        if (kind == COMPARE_NOT_IN)
            *result = !*result;
        return 0;
    }
    if (left.kind == CHAT_VALUE_UNDEFINED)
        return fail_undefined(render, line, left);
    if (right.kind == CHAT_VALUE_UNDEFINED)
        return fail_undefined(render, line, right);
    int order;
    uint64_t work = 0;
    int status = value_compare_counted(left, right, &order, &work);
    if (render_charge(render, line, work) != 0)
        return -1;
    static const char *const spellings[] = {"==", "!=", "<", "<=", ">", ">="};
    if (status == VALUE_INCOMPARABLE)
        return render_fail(render, line, "'%s' not supported between instances of '%s' and '%s'", spellings[kind],
                           value_type_name(left), value_type_name(right));
    if (status != VALUE_OK)
        return render_fail_status(render, line, status);
    switch (kind) {
    case COMPARE_LESS: *result = order == -1; break;
    case COMPARE_LESS_EQUAL: *result = order == -1 || order == 0; break;
    case COMPARE_GREATER: *result = order == 1; break;
    default: *result = order == 1 || order == 0; break;
    }
    return 0;
}

int stringify(struct render *render, int line, chat_value value, chat_value *result)
{
    if (value.kind == CHAT_VALUE_STRING) {
        *result = value_retain(value);
        return 0;
    }
    struct string_builder builder;
    builder_init(&builder, &render->heap, 0);
    int status = value_write_str(&builder, value);
    if (status != VALUE_OK) {
        builder_discard(&builder);
        return render_fail_status(render, line, status);
    }
    return finish_string(render, line, &builder, result);
}
