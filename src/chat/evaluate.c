/* The expression evaluator. Undefined values follow Jinja2's default
 * Undefined: printing one gives "", testing and iterating work, but reading
 * an attribute or item of one, calling it, or computing with it fails with
 * the message of where it came from ("'x' is undefined"). */
#include "chat/render.h"

#include <stdio.h>
#include <string.h>

#include "chat/lexer.h"

static const char *object_description(uint8_t kind, char *buffer, size_t size)
{
    if (kind == CHAT_VALUE_NONE)
        return "None";
    chat_value sample = {.kind = kind};
    snprintf(buffer, size, "%s object", value_type_name(sample));
    return buffer;
}

void undefined_message(chat_value undefined, char *buffer, size_t size)
{
    char object[64];
    if (undefined.detail == UNDEFINED_MESSAGE) {
        snprintf(buffer, size, "%s", (const char *)undefined.as.origin);
        return;
    }
    if (undefined.detail == UNDEFINED_PARAMETER) {
        const struct parameter *parameter = undefined.as.origin;
        snprintf(buffer, size, "parameter '%.*s' was not provided", (int)parameter->length, parameter->name);
        return;
    }
    const struct expression *origin = undefined.as.origin;
    if (undefined.detail == UNDEFINED_CONDITIONAL) {
        snprintf(buffer, size,
                 "the inline if-expression on line %d evaluated to false and no else section was defined.",
                 origin ? origin->line : 0);
        return;
    }
    if (!origin) {
        snprintf(buffer, size, "undefined value");
        return;
    }
    switch (origin->kind) {
    case EXPRESSION_NAME:
        snprintf(buffer, size, "'%.*s' is undefined", (int)origin->as.name.length, origin->as.name.text);
        return;
    case EXPRESSION_ATTRIBUTE:
        snprintf(buffer, size, "'%s' has no attribute '%.*s'", object_description(undefined.detail, object, sizeof object),
                 (int)origin->as.attribute.length, origin->as.attribute.name);
        return;
    case EXPRESSION_ITEM: {
        const struct expression *index = origin->as.item.index;
        if (index->kind == EXPRESSION_LITERAL && index->as.literal.kind == CHAT_VALUE_STRING) {
            snprintf(buffer, size, "'%s' has no attribute '%s'", object_description(undefined.detail, object, sizeof object),
                     value_string(index->as.literal)->bytes);
        } else if (index->kind == EXPRESSION_LITERAL && index->as.literal.kind == CHAT_VALUE_INT) {
            snprintf(buffer, size, "%s has no element %lld", object_description(undefined.detail, object, sizeof object),
                     (long long)index->as.literal.as.integer);
        } else {
            snprintf(buffer, size, "%s has no such element", object_description(undefined.detail, object, sizeof object));
        }
        return;
    }
    default: snprintf(buffer, size, "undefined value"); return;
    }
}

int fail_undefined(struct render *render, int line, chat_value undefined)
{
    char message[256];
    undefined_message(undefined, message, sizeof message);
    return render_fail(render, line, "%s", message);
}

static int evaluate_sequence(struct render *render, const struct expression *node, uint8_t kind, chat_value *result)
{
    size_t count = node->as.sequence.count;
    chat_value list = value_list_new(&render->heap, kind, count);
    if (list.kind == CHAT_VALUE_INVALID)
        return render_fail_status(render, node->line, VALUE_NO_MEMORY);
    for (size_t i = 0; i < count; i++) {
        chat_value item;
        if (evaluate(render, node->as.sequence.items[i], &item) != 0) {
            value_release(list);
            return -1;
        }
        list_append(list, item); /* capacity reserved */
    }
    *result = list;
    return 0;
}

static int evaluate_dict(struct render *render, const struct expression *node, chat_value *result)
{
    chat_value dict = value_dict_new(&render->heap, CHAT_VALUE_OBJECT);
    if (dict.kind == CHAT_VALUE_INVALID)
        return render_fail_status(render, node->line, VALUE_NO_MEMORY);
    for (size_t i = 0; i < node->as.dict.count; i++) {
        chat_value key, value;
        if (evaluate(render, node->as.dict.keys[i], &key) != 0) {
            value_release(dict);
            return -1;
        }
        if (evaluate(render, node->as.dict.values[i], &value) != 0) {
            value_release(key);
            value_release(dict);
            return -1;
        }
        const char *type = value_type_name(key);
        int status = dict_set(dict, key, value);
        if (status != VALUE_OK) {
            value_release(dict);
            if (status == VALUE_UNHASHABLE)
                return render_fail(render, node->line, "unhashable type: '%s'", type);
            return render_fail_status(render, node->line, status);
        }
    }
    *result = dict;
    return 0;
}

/* The object of an attribute, item or slice access: undefined fails here. */
static int evaluate_object(struct render *render, const struct expression *node, chat_value *object)
{
    if (evaluate(render, node, object) != 0)
        return -1;
    if (object->kind == CHAT_VALUE_UNDEFINED)
        return fail_undefined(render, node->line, *object);
    return 0;
}

static int evaluate_or_none(struct render *render, const struct expression *node, chat_value *result)
{
    if (!node) {
        *result = chat_value_none();
        return 0;
    }
    return evaluate(render, node, result);
}

static int evaluate_slice(struct render *render, const struct expression *node, chat_value *result)
{
    chat_value object, start = chat_value_none(), stop = chat_value_none(), step = chat_value_none();
    if (evaluate_object(render, node->as.slice.object, &object) != 0)
        return -1;
    int status = evaluate_or_none(render, node->as.slice.start, &start);
    if (status == 0)
        status = evaluate_or_none(render, node->as.slice.stop, &stop);
    if (status == 0)
        status = evaluate_or_none(render, node->as.slice.step, &step);
    if (status == 0)
        status = get_slice(render, node->line, object, start, stop, step, result);
    value_release(object);
    value_release(start);
    value_release(stop);
    value_release(step);
    return status;
}

static int evaluate_call(struct render *render, const struct expression *node, chat_value *result)
{
    const struct expression *callee = node->as.call.callee;
    chat_value function;
    struct call_arguments arguments;
    if (callee->kind == EXPRESSION_ATTRIBUTE) {
        chat_value object;
        if (evaluate_object(render, callee->as.attribute.object, &object) != 0)
            return -1;
        int method = method_find(object, callee->as.attribute.name, callee->as.attribute.length);
        if (method >= 0) {
            int status = evaluate_arguments(render, &node->as.call.arguments, &arguments, node->line);
            if (status == 0) {
                status = method_call(render, node, method, object, &arguments, result);
                release_arguments(&arguments);
            }
            value_release(object);
            return status;
        }
        int status = get_attribute(render, callee, object, callee->as.attribute.name, callee->as.attribute.length,
                                   &function);
        value_release(object);
        if (status != 0)
            return -1;
    } else if (evaluate(render, callee, &function) != 0) {
        return -1;
    }
    int status = evaluate_arguments(render, &node->as.call.arguments, &arguments, node->line);
    if (status == 0) {
        status = call_value(render, node, function, &arguments, result);
        release_arguments(&arguments);
    }
    value_release(function);
    return status;
}

static int evaluate_filter(struct render *render, const struct expression *node, chat_value *result)
{
    chat_value input;
    if (evaluate(render, node->as.filter.operand, &input) != 0)
        return -1;
    if (!node->as.filter.filter) {
        value_release(input);
        return render_fail(render, node->line, "No filter named '%.*s'.", (int)node->as.filter.length,
                           node->as.filter.name);
    }
    struct call_arguments arguments;
    /* Filters walk their input: charge for it up front. */
    int status = render_charge_size(render, node->line, input);
    if (status == 0)
        status = evaluate_arguments(render, &node->as.filter.arguments, &arguments, node->line);
    if (status == 0) {
        status = node->as.filter.filter->function(render, node, input, &arguments, result);
        release_arguments(&arguments);
    }
    value_release(input);
    return status;
}

static int evaluate_test(struct render *render, const struct expression *node, chat_value *result)
{
    chat_value input;
    if (evaluate(render, node->as.filter.operand, &input) != 0)
        return -1;
    if (!node->as.filter.test) {
        value_release(input);
        return render_fail(render, node->line, "No test named '%.*s'.", (int)node->as.filter.length,
                           node->as.filter.name);
    }
    struct call_arguments arguments;
    bool holds = false;
    int status = evaluate_arguments(render, &node->as.filter.arguments, &arguments, node->line);
    if (status == 0) {
        status = node->as.filter.test->function(render, node, input, &arguments, &holds);
        release_arguments(&arguments);
    }
    value_release(input);
    *result = chat_value_bool(holds != node->negated);
    return status;
}

static int evaluate_unary(struct render *render, const struct expression *node, chat_value *result)
{
    chat_value operand;
    if (evaluate(render, node->as.unary.operand, &operand) != 0)
        return -1;
    bool negate = node->kind == EXPRESSION_NEGATE;
    switch (operand.kind) {
    case CHAT_VALUE_BOOL: *result = chat_value_int(negate ? -(int64_t)operand.as.boolean : operand.as.boolean); return 0;
    case CHAT_VALUE_INT:
        if (negate && operand.as.integer == INT64_MIN)
            return render_fail(render, node->line, "integer overflow");
        *result = chat_value_int(negate ? -operand.as.integer : operand.as.integer);
        return 0;
    case CHAT_VALUE_FLOAT: *result = chat_value_float(negate ? -operand.as.number : operand.as.number); return 0;
    case CHAT_VALUE_UNDEFINED: return fail_undefined(render, node->line, operand);
    default: {
        int status = render_fail(render, node->line, "bad operand type for unary %c: '%s'", negate ? '-' : '+',
                                 value_type_name(operand));
        value_release(operand);
        return status;
    }
    }
}

static int evaluate_binary(struct render *render, const struct expression *node, chat_value *result)
{
    chat_value left, right;
    if (evaluate(render, node->as.binary.left, &left) != 0)
        return -1;
    if (evaluate(render, node->as.binary.right, &right) != 0) {
        value_release(left);
        return -1;
    }
    int status = binary_operation(render, node->line, node->operator, left, right, result);
    value_release(left);
    value_release(right);
    return status;
}

static int evaluate_concat(struct render *render, const struct expression *node, chat_value *result)
{
    struct string_builder builder;
    builder_init(&builder, &render->heap, 0);
    for (size_t i = 0; i < node->as.sequence.count; i++) {
        chat_value item;
        if (evaluate(render, node->as.sequence.items[i], &item) != 0) {
            builder_discard(&builder);
            return -1;
        }
        int status = value_write_str(&builder, item);
        value_release(item);
        if (status != VALUE_OK) {
            builder_discard(&builder);
            return render_fail_status(render, node->line, status);
        }
    }
    return finish_string(render, node->line, &builder, result);
}

static int evaluate_compare(struct render *render, const struct expression *node, chat_value *result)
{
    chat_value left;
    if (evaluate(render, node->as.compare.first, &left) != 0)
        return -1;
    bool holds = true;
    for (size_t i = 0; i < node->as.compare.count && holds; i++) {
        const struct comparison *comparison = &node->as.compare.rest[i];
        chat_value right;
        if (evaluate(render, comparison->operand, &right) != 0) {
            value_release(left);
            return -1;
        }
        int status = compare_values(render, node->line, comparison->kind, left, right, &holds);
        value_release(left);
        left = right;
        if (status != 0) {
            value_release(left);
            return -1;
        }
    }
    value_release(left);
    *result = chat_value_bool(holds);
    return 0;
}

static int evaluate_logic(struct render *render, const struct expression *node, chat_value *result)
{
    chat_value left;
    if (evaluate(render, node->as.binary.left, &left) != 0)
        return -1;
    bool truthy = value_truthy(left);
    /* Python's and/or give back an operand, not a boolean. */
    if ((node->kind == EXPRESSION_AND) != truthy) {
        *result = left;
        return 0;
    }
    value_release(left);
    return evaluate(render, node->as.binary.right, result);
}

static int evaluate_conditional(struct render *render, const struct expression *node, chat_value *result)
{
    chat_value condition;
    if (evaluate(render, node->as.conditional.condition, &condition) != 0)
        return -1;
    bool holds = value_truthy(condition);
    value_release(condition);
    if (holds)
        return evaluate(render, node->as.conditional.then, result);
    if (node->as.conditional.otherwise)
        return evaluate(render, node->as.conditional.otherwise, result);
    *result = value_undefined(node, UNDEFINED_CONDITIONAL);
    return 0;
}

int evaluate(struct render *render, const struct expression *node, chat_value *result)
{
    *result = value_invalid();
    if (render_step(render, node->line) != 0)
        return -1;
    switch (node->kind) {
    case EXPRESSION_LITERAL: *result = value_retain(node->as.literal); return 0;
    case EXPRESSION_NAME: {
        chat_value found;
        *result = scope_lookup(render, node->as.name.text, node->as.name.length, &found)
                      ? value_retain(found)
                      : value_undefined(node, CHAT_VALUE_INVALID);
        return 0;
    }
    case EXPRESSION_LIST: return evaluate_sequence(render, node, CHAT_VALUE_ARRAY, result);
    case EXPRESSION_TUPLE: return evaluate_sequence(render, node, CHAT_VALUE_TUPLE, result);
    case EXPRESSION_DICT: return evaluate_dict(render, node, result);
    case EXPRESSION_ATTRIBUTE: {
        chat_value object;
        if (evaluate_object(render, node->as.attribute.object, &object) != 0)
            return -1;
        int status = get_attribute(render, node, object, node->as.attribute.name, node->as.attribute.length, result);
        value_release(object);
        return status;
    }
    case EXPRESSION_ITEM: {
        chat_value object, index;
        if (evaluate_object(render, node->as.item.object, &object) != 0)
            return -1;
        if (evaluate(render, node->as.item.index, &index) != 0) {
            value_release(object);
            return -1;
        }
        int status = get_item(render, node, object, index, result);
        value_release(object);
        value_release(index);
        return status;
    }
    case EXPRESSION_SLICE: return evaluate_slice(render, node, result);
    case EXPRESSION_CALL: return evaluate_call(render, node, result);
    case EXPRESSION_FILTER: return evaluate_filter(render, node, result);
    case EXPRESSION_TEST: return evaluate_test(render, node, result);
    case EXPRESSION_NEGATE:
    case EXPRESSION_PLUS: return evaluate_unary(render, node, result);
    case EXPRESSION_NOT: {
        chat_value operand;
        if (evaluate(render, node->as.unary.operand, &operand) != 0)
            return -1;
        *result = chat_value_bool(!value_truthy(operand));
        value_release(operand);
        return 0;
    }
    case EXPRESSION_BINARY: return evaluate_binary(render, node, result);
    case EXPRESSION_CONCAT: return evaluate_concat(render, node, result);
    case EXPRESSION_COMPARE: return evaluate_compare(render, node, result);
    case EXPRESSION_AND:
    case EXPRESSION_OR: return evaluate_logic(render, node, result);
    case EXPRESSION_CONDITIONAL: return evaluate_conditional(render, node, result);
    default: return render_fail(render, node->line, "internal error: unknown expression");
    }
}
