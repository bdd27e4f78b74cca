/* The tests of "x is name": Jinja2's builtin tests with Python's type
 * rules (a bool is a number but not an integer; a string, a dict and even
 * an undefined value are sequences, and an undefined value is callable). */
#include "chat/filters.h"

#include <string.h>

#include "chat/lexer.h"
#include "chat/string_ops.h"

#define TEST(name)                                                                                             \
    static int name(struct render *render, const struct expression *node, chat_value input,                   \
                    const struct call_arguments *arguments, bool *result)

/* The one argument a comparison test takes. */
static int single_argument(struct render *render, const struct expression *node, const struct call_arguments *arguments,
                           const char *name, chat_value *value)
{
    static const char *const names[] = {"other"};
    if (bind_arguments(render, node, name, arguments, names, 1, value) != 0)
        return -1;
    if (value->kind == CHAT_VALUE_INVALID)
        return render_fail(render, node->line, "test '%s' needs an argument", name);
    return 0;
}

static int no_arguments(struct render *render, const struct expression *node, const struct call_arguments *arguments,
                        const char *name)
{
    return bind_arguments(render, node, name, arguments, NULL, 0, NULL);
}

#define KIND_TEST(function, name, condition)                                                                   \
    TEST(function)                                                                                             \
    {                                                                                                          \
        if (no_arguments(render, node, arguments, name) != 0)                                                   \
            return -1;                                                                                         \
        *result = (condition);                                                                                 \
        return 0;                                                                                              \
    }

KIND_TEST(test_defined, "defined", input.kind != CHAT_VALUE_UNDEFINED)
KIND_TEST(test_undefined, "undefined", input.kind == CHAT_VALUE_UNDEFINED)
KIND_TEST(test_none, "none", input.kind == CHAT_VALUE_NONE)
KIND_TEST(test_boolean, "boolean", input.kind == CHAT_VALUE_BOOL)
KIND_TEST(test_true, "true", input.kind == CHAT_VALUE_BOOL && input.as.boolean)
KIND_TEST(test_false, "false", input.kind == CHAT_VALUE_BOOL && !input.as.boolean)
KIND_TEST(test_integer, "integer", input.kind == CHAT_VALUE_INT)
KIND_TEST(test_float, "float", input.kind == CHAT_VALUE_FLOAT)
KIND_TEST(test_number, "number",
          input.kind == CHAT_VALUE_INT || input.kind == CHAT_VALUE_FLOAT || input.kind == CHAT_VALUE_BOOL)
KIND_TEST(test_string, "string", input.kind == CHAT_VALUE_STRING)
KIND_TEST(test_mapping, "mapping", input.kind == CHAT_VALUE_OBJECT)
KIND_TEST(test_iterable, "iterable",
          input.kind == CHAT_VALUE_STRING || value_is_list_like(input) || input.kind == CHAT_VALUE_OBJECT ||
              input.kind == CHAT_VALUE_RANGE || input.kind == CHAT_VALUE_UNDEFINED || input.kind == CHAT_VALUE_LOOP)
KIND_TEST(test_sequence, "sequence",
          input.kind == CHAT_VALUE_STRING || value_is_list_like(input) || input.kind == CHAT_VALUE_OBJECT ||
              input.kind == CHAT_VALUE_RANGE || input.kind == CHAT_VALUE_UNDEFINED)
/* Jinja2's Undefined defines __call__ (to fail), so callable() holds for it. */
KIND_TEST(test_callable, "callable",
          input.kind == CHAT_VALUE_MACRO || input.kind == CHAT_VALUE_BUILTIN || input.kind == CHAT_VALUE_METHOD ||
              input.kind == CHAT_VALUE_LOOP || input.kind == CHAT_VALUE_UNDEFINED)
KIND_TEST(test_escaped, "escaped", input.kind == CHAT_VALUE_STRING && (value_string(input)->base.flags & STRING_SAFE))

/* value % divisor == remainder, with Python's % (so "x" is odd fails as Python does). */
static int modulo_is(struct render *render, int line, chat_value value, chat_value divisor, int64_t remainder,
                     bool *result)
{
    chat_value modulo;
    if (binary_operation(render, line, OPERATOR_MODULO, value, divisor, &modulo) != 0)
        return -1;
    int status = compare_values(render, line, COMPARE_EQUAL, modulo, chat_value_int(remainder), result);
    value_release(modulo);
    return status;
}

TEST(test_odd)
{
    if (no_arguments(render, node, arguments, "odd") != 0)
        return -1;
    return modulo_is(render, node->line, input, chat_value_int(2), 1, result);
}

TEST(test_even)
{
    if (no_arguments(render, node, arguments, "even") != 0)
        return -1;
    return modulo_is(render, node->line, input, chat_value_int(2), 0, result);
}

TEST(test_divisibleby)
{
    static const char *const names[] = {"num"};
    chat_value divisor;
    if (bind_arguments(render, node, "divisibleby", arguments, names, 1, &divisor) != 0)
        return -1;
    if (divisor.kind == CHAT_VALUE_INVALID)
        return render_fail(render, node->line, "test 'divisibleby' needs an argument");
    return modulo_is(render, node->line, input, divisor, 0, result);
}

static int compare_test(struct render *render, const struct expression *node, chat_value input,
                        const struct call_arguments *arguments, const char *name, unsigned char kind, bool *result)
{
    chat_value other;
    if (single_argument(render, node, arguments, name, &other) != 0)
        return -1;
    return compare_values(render, node->line, kind, input, other, result);
}

TEST(test_equal)
{
    return compare_test(render, node, input, arguments, "eq", COMPARE_EQUAL, result);
}

TEST(test_not_equal)
{
    return compare_test(render, node, input, arguments, "ne", COMPARE_NOT_EQUAL, result);
}

TEST(test_less)
{
    return compare_test(render, node, input, arguments, "lt", COMPARE_LESS, result);
}

TEST(test_less_equal)
{
    return compare_test(render, node, input, arguments, "le", COMPARE_LESS_EQUAL, result);
}

TEST(test_greater)
{
    return compare_test(render, node, input, arguments, "gt", COMPARE_GREATER, result);
}

TEST(test_greater_equal)
{
    return compare_test(render, node, input, arguments, "ge", COMPARE_GREATER_EQUAL, result);
}

TEST(test_in)
{
    static const char *const names[] = {"seq"};
    chat_value sequence;
    if (bind_arguments(render, node, "in", arguments, names, 1, &sequence) != 0)
        return -1;
    if (sequence.kind == CHAT_VALUE_INVALID)
        return render_fail(render, node->line, "test 'in' needs an argument");
    return contains(render, node->line, sequence, input, result);
}

TEST(test_sameas)
{
    chat_value other;
    if (single_argument(render, node, arguments, "sameas", &other) != 0)
        return -1;
    if (input.kind != other.kind) {
        *result = false;
    } else if (value_is_object(input)) {
        *result = input.as.object == other.as.object ||
                  (input.kind == CHAT_VALUE_STRING && value_equal(input, other) == 1);
    } else {
        *result = value_equal(input, other) == 1;
    }
    return 0;
}

static int case_test(struct render *render, const struct expression *node, chat_value input,
                     const struct call_arguments *arguments, const char *name, bool *result)
{
    chat_value text;
    if (no_arguments(render, node, arguments, name) != 0 || to_text(render, node->line, input, &text) != 0)
        return -1;
    *result = text_is(text, name);
    value_release(text);
    return 0;
}

TEST(test_lower)
{
    return case_test(render, node, input, arguments, "lower", result);
}

TEST(test_upper)
{
    return case_test(render, node, input, arguments, "upper", result);
}

TEST(test_filter)
{
    if (no_arguments(render, node, arguments, "filter") != 0)
        return -1;
    *result = input.kind == CHAT_VALUE_STRING && filter_find(value_string(input)->bytes, value_string(input)->length);
    return 0;
}

TEST(test_test)
{
    if (no_arguments(render, node, arguments, "test") != 0)
        return -1;
    *result = input.kind == CHAT_VALUE_STRING && test_find(value_string(input)->bytes, value_string(input)->length);
    return 0;
}

static const struct test_entry tests[] = {
    {"!=", test_not_equal},
    {"<", test_less},
    {"<=", test_less_equal},
    {"==", test_equal},
    {">", test_greater},
    {">=", test_greater_equal},
    {"boolean", test_boolean},
    {"callable", test_callable},
    {"defined", test_defined},
    {"divisibleby", test_divisibleby},
    {"eq", test_equal},
    {"equalto", test_equal},
    {"escaped", test_escaped},
    {"even", test_even},
    {"false", test_false},
    {"filter", test_filter},
    {"float", test_float},
    {"ge", test_greater_equal},
    {"greaterthan", test_greater},
    {"gt", test_greater},
    {"in", test_in},
    {"integer", test_integer},
    {"iterable", test_iterable},
    {"le", test_less_equal},
    {"lessthan", test_less},
    {"lower", test_lower},
    {"lt", test_less},
    {"mapping", test_mapping},
    {"ne", test_not_equal},
    {"none", test_none},
    {"number", test_number},
    {"odd", test_odd},
    {"sameas", test_sameas},
    {"sequence", test_sequence},
    {"string", test_string},
    {"test", test_test},
    {"true", test_true},
    {"undefined", test_undefined},
    {"upper", test_upper},
};

const struct test_entry *test_find(const char *name, size_t length)
{
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++)
        if (strlen(tests[i].name) == length && memcmp(tests[i].name, name, length) == 0)
            return &tests[i];
    return NULL;
}
