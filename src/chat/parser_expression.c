/* Expressions, one function per precedence level from Jinja2's grammar.
 * Every node records its subtree height and the parser counts its own
 * recursion, so neither parsing nor evaluating can run out of stack. */
#include "chat/parser_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "chat/callables.h"

void *parse_fail(struct parser *parser, int line, const char *fmt, ...)
{
    if (parser->failed)
        return NULL;
    parser->failed = true;
    char message[BMOE_ERROR_MAX];
    va_list args;
    va_start(args, fmt);
    vsnprintf(message, sizeof message, fmt, args);
    va_end(args);
    error_set(parser->err, "line %d: %s", line, message);
    return NULL;
}

const struct token *parser_current(const struct parser *parser)
{
    return &parser->tokens[parser->position];
}

const struct token *parser_peek(const struct parser *parser, size_t ahead)
{
    size_t position = parser->position + ahead;
    return &parser->tokens[position < parser->count ? position : parser->count - 1];
}

const struct token *parser_next(struct parser *parser)
{
    const struct token *token = &parser->tokens[parser->position];
    if (parser->position + 1 < parser->count)
        parser->position++;
    return token;
}

bool token_is_name(const struct token *token, const char *name)
{
    size_t length = strlen(name);
    return token->type == TOKEN_NAME && token->length == length && memcmp(token->text, name, length) == 0;
}

bool token_is_operator(const struct token *token, unsigned char kind)
{
    return token->type == TOKEN_OPERATOR && token->operator == kind;
}

bool parser_skip_name(struct parser *parser, const char *name)
{
    if (!token_is_name(parser_current(parser), name))
        return false;
    parser_next(parser);
    return true;
}

bool parser_skip_operator(struct parser *parser, unsigned char kind)
{
    if (!token_is_operator(parser_current(parser), kind))
        return false;
    parser_next(parser);
    return true;
}

static void *fail_expected(struct parser *parser, const char *expected)
{
    const struct token *token = parser_current(parser);
    char buffer[64];
    if (token->type == TOKEN_END)
        return parse_fail(parser, token->line, "unexpected end of template, expected '%s'", expected);
    return parse_fail(parser, token->line, "expected token '%s', got '%s'", expected,
                      token_description(token, buffer, sizeof buffer));
}

bool parser_expect_operator(struct parser *parser, unsigned char kind, const char *spelling)
{
    if (parser_skip_operator(parser, kind))
        return true;
    fail_expected(parser, spelling);
    return false;
}

bool parser_expect_type(struct parser *parser, unsigned char type, const char *description)
{
    if (parser_current(parser)->type == type) {
        parser_next(parser);
        return true;
    }
    fail_expected(parser, description);
    return false;
}

void *parser_allocate(struct parser *parser, size_t size)
{
    void *memory = arena_allocate(parser->arena, size);
    if (!memory)
        parse_fail(parser, parser_current(parser)->line, "out of memory");
    return memory;
}

char *parser_copy(struct parser *parser, const char *text, size_t length)
{
    char *copy = arena_copy(parser->arena, text, length);
    if (!copy)
        parse_fail(parser, parser_current(parser)->line, "out of memory");
    return copy;
}

static bool enter(struct parser *parser)
{
    if (++parser->depth > PARSE_NESTING_MAX) {
        parse_fail(parser, parser_current(parser)->line, "expression nested too deeply (more than %d levels)",
                   PARSE_NESTING_MAX);
        return false;
    }
    return true;
}

static void leave(struct parser *parser)
{
    parser->depth--;
}

static struct expression *new_node(struct parser *parser, unsigned char kind, int line)
{
    struct expression *node = parser_allocate(parser, sizeof *node);
    if (node) {
        node->kind = kind;
        node->line = line;
        node->height = 1;
    }
    return node;
}

/* Records a child's height on its parent; fails past EXPRESSION_HEIGHT_MAX. */
static bool adopt(struct parser *parser, struct expression *parent, const struct expression *child)
{
    if (!child)
        return true;
    if (child->height + 1 > parent->height)
        parent->height = (unsigned short)(child->height + 1);
    if (parent->height > EXPRESSION_HEIGHT_MAX) {
        parse_fail(parser, parent->line, "expression nested too deeply (more than %d levels)", EXPRESSION_HEIGHT_MAX);
        return false;
    }
    return true;
}

static struct expression *new_binary(struct parser *parser, unsigned char kind, unsigned char operator,
                                     struct expression *left, struct expression *right, int line)
{
    struct expression *node = new_node(parser, kind, line);
    if (!node || !adopt(parser, node, left) || !adopt(parser, node, right))
        return NULL;
    node->operator = operator;
    node->as.binary.left = left;
    node->as.binary.right = right;
    return node;
}

static bool append_expression(struct parser *parser, struct expression ***items, size_t *count, size_t *capacity,
                              struct expression *item)
{
    struct expression **grown = arena_grow(parser->arena, *items, *count, capacity, sizeof *grown);
    if (!grown) {
        parse_fail(parser, parser_current(parser)->line, "out of memory");
        return false;
    }
    grown[(*count)++] = item;
    *items = grown;
    return true;
}

/* Marks every macro being parsed that reads varargs or kwargs (Jinja2 only
 * accepts extra arguments for a macro whose body mentions them). */
static void note_name(struct parser *parser, const char *text, size_t length)
{
    bool varargs = length == 7 && memcmp(text, "varargs", 7) == 0;
    bool kwargs = length == 6 && memcmp(text, "kwargs", 6) == 0;
    for (int i = 0; i < parser->macro_count; i++) {
        parser->macros[i]->uses_varargs |= varargs;
        parser->macros[i]->uses_kwargs |= kwargs;
    }
}

static struct expression *literal_node(struct parser *parser, chat_value value, int line)
{
    struct expression *node = new_node(parser, EXPRESSION_LITERAL, line);
    if (node)
        node->as.literal = value;
    return node;
}

static struct expression *parse_string_literal(struct parser *parser)
{
    const struct token *first = parser_current(parser);
    size_t length = 0, end = parser->position;
    while (end < parser->count && parser->tokens[end].type == TOKEN_STRING)
        length += parser->tokens[end++].length;
    void *memory = parser_allocate(parser, value_string_immortal_size(length));
    char *joined = parser_allocate(parser, length + 1);
    if (!memory || !joined)
        return NULL;
    size_t offset = 0;
    while (parser->position < end) {
        const struct token *token = parser_next(parser);
        memcpy(joined + offset, token->text, token->length);
        offset += token->length;
    }
    return literal_node(parser, value_string_immortal(memory, joined, length), first->line);
}

static struct expression *parse_list_literal(struct parser *parser, unsigned char closer, const char *spelling,
                                             unsigned char kind, int line)
{
    struct expression *node = new_node(parser, kind, line);
    size_t capacity = 0;
    if (!node)
        return NULL;
    while (!token_is_operator(parser_current(parser), closer)) {
        if (node->as.sequence.count && !parser_expect_operator(parser, OPERATOR_COMMA, ","))
            return NULL;
        if (token_is_operator(parser_current(parser), closer))
            break;
        struct expression *item = parse_expression(parser, true);
        if (!item || !adopt(parser, node, item) ||
            !append_expression(parser, &node->as.sequence.items, &node->as.sequence.count, &capacity, item))
            return NULL;
    }
    return parser_expect_operator(parser, closer, spelling) ? node : NULL;
}

static struct expression *parse_dict_literal(struct parser *parser, int line)
{
    struct expression *node = new_node(parser, EXPRESSION_DICT, line);
    size_t key_capacity = 0, value_capacity = 0, values = 0;
    if (!node)
        return NULL;
    while (!token_is_operator(parser_current(parser), OPERATOR_RIGHT_BRACE)) {
        if (node->as.dict.count && !parser_expect_operator(parser, OPERATOR_COMMA, ","))
            return NULL;
        if (token_is_operator(parser_current(parser), OPERATOR_RIGHT_BRACE))
            break;
        struct expression *key = parse_expression(parser, true);
        if (!key || !parser_expect_operator(parser, OPERATOR_COLON, ":"))
            return NULL;
        struct expression *value = parse_expression(parser, true);
        if (!value || !adopt(parser, node, key) || !adopt(parser, node, value) ||
            !append_expression(parser, &node->as.dict.keys, &node->as.dict.count, &key_capacity, key) ||
            !append_expression(parser, &node->as.dict.values, &values, &value_capacity, value))
            return NULL;
    }
    return parser_expect_operator(parser, OPERATOR_RIGHT_BRACE, "}") ? node : NULL;
}

struct expression *parse_primary(struct parser *parser)
{
    const struct token *token = parser_current(parser);
    int line = token->line;
    char buffer[64];
    switch (token->type) {
    case TOKEN_NAME:
        parser_next(parser);
        if (token_is_name(token, "true") || token_is_name(token, "True"))
            return literal_node(parser, chat_value_bool(true), line);
        if (token_is_name(token, "false") || token_is_name(token, "False"))
            return literal_node(parser, chat_value_bool(false), line);
        if (token_is_name(token, "none") || token_is_name(token, "None"))
            return literal_node(parser, chat_value_none(), line);
        {
            struct expression *node = new_node(parser, EXPRESSION_NAME, line);
            if (!node)
                return NULL;
            node->as.name.text = parser_copy(parser, token->text, token->length);
            node->as.name.length = token->length;
            note_name(parser, token->text, token->length);
            return node->as.name.text ? node : NULL;
        }
    case TOKEN_STRING: return parse_string_literal(parser);
    case TOKEN_INTEGER: parser_next(parser); return literal_node(parser, chat_value_int(token->integer), line);
    case TOKEN_FLOAT: parser_next(parser); return literal_node(parser, chat_value_float(token->number), line);
    case TOKEN_OPERATOR:
        if (token->operator == OPERATOR_LEFT_PAREN || token->operator == OPERATOR_LEFT_BRACKET ||
            token->operator == OPERATOR_LEFT_BRACE) {
            if (!enter(parser))
                return NULL;
            parser_next(parser);
            struct expression *node;
            if (token->operator == OPERATOR_LEFT_PAREN) {
                node = parse_tuple(parser, false, true, NULL, true);
                if (node && !parser_expect_operator(parser, OPERATOR_RIGHT_PAREN, ")"))
                    node = NULL;
            } else if (token->operator == OPERATOR_LEFT_BRACKET) {
                node = parse_list_literal(parser, OPERATOR_RIGHT_BRACKET, "]", EXPRESSION_LIST, line);
            } else {
                node = parse_dict_literal(parser, line);
            }
            leave(parser);
            return node;
        }
        break;
    default: break;
    }
    if (token->type == TOKEN_END)
        return parse_fail(parser, line, "unexpected end of template");
    return parse_fail(parser, line, "unexpected '%s'", token_description(token, buffer, sizeof buffer));
}

bool parse_call_arguments(struct parser *parser, struct argument_list *arguments)
{
    int line = parser_current(parser)->line;
    if (!parser_expect_operator(parser, OPERATOR_LEFT_PAREN, "("))
        return false;
    size_t capacity = 0;
    bool require_comma = false, seen_star = false, seen_double_star = false, seen_keyword = false;
    if (!enter(parser))
        return false;
    while (!token_is_operator(parser_current(parser), OPERATOR_RIGHT_PAREN)) {
        if (require_comma) {
            if (!parser_expect_operator(parser, OPERATOR_COMMA, ","))
                return false;
            if (token_is_operator(parser_current(parser), OPERATOR_RIGHT_PAREN))
                break;
        }
        struct argument argument = {0};
        const struct token *token = parser_current(parser);
        bool valid = true;
        if (token_is_operator(token, OPERATOR_MULTIPLY)) {
            valid = !seen_star && !seen_double_star;
            seen_star = true;
            argument.kind = ARGUMENT_STAR;
            parser_next(parser);
        } else if (token_is_operator(token, OPERATOR_POWER)) {
            valid = !seen_double_star;
            seen_double_star = true;
            argument.kind = ARGUMENT_DOUBLE_STAR;
            parser_next(parser);
        } else if (token->type == TOKEN_NAME && token_is_operator(parser_peek(parser, 1), OPERATOR_ASSIGN)) {
            valid = !seen_star && !seen_double_star;
            seen_keyword = true;
            argument.name = parser_copy(parser, token->text, token->length);
            argument.name_length = token->length;
            parser_next(parser);
            parser_next(parser);
        } else {
            valid = !seen_star && !seen_double_star && !seen_keyword;
        }
        if (!valid) {
            parse_fail(parser, line, "invalid syntax for function call expression");
            return false;
        }
        argument.value = parse_expression(parser, true);
        if (!argument.value)
            return false;
        struct argument *grown = arena_grow(parser->arena, arguments->items, arguments->count, &capacity, sizeof *grown);
        if (!grown) {
            parse_fail(parser, line, "out of memory");
            return false;
        }
        grown[arguments->count++] = argument;
        arguments->items = grown;
        require_comma = true;
    }
    leave(parser);
    return parser_expect_operator(parser, OPERATOR_RIGHT_PAREN, ")");
}

static bool adopt_arguments(struct parser *parser, struct expression *node, const struct argument_list *arguments)
{
    for (size_t i = 0; i < arguments->count; i++)
        if (!adopt(parser, node, arguments->items[i].value))
            return false;
    return true;
}

/* Jinja2's parse_subscribed: an index, or a slice (a marker node, object NULL). */
static struct expression *parse_subscribed(struct parser *parser)
{
    int line = parser_current(parser)->line;
    struct expression *parts[3] = {NULL, NULL, NULL};
    if (!token_is_operator(parser_current(parser), OPERATOR_COLON)) {
        struct expression *node = parse_expression(parser, true);
        if (!node || !token_is_operator(parser_current(parser), OPERATOR_COLON))
            return node;
        parts[0] = node;
    }
    parser_next(parser); /* the first ':' */
    const struct token *token = parser_current(parser);
    bool at_end = token_is_operator(token, OPERATOR_RIGHT_BRACKET) || token_is_operator(token, OPERATOR_COMMA);
    if (!token_is_operator(token, OPERATOR_COLON) && !at_end && !(parts[1] = parse_expression(parser, true)))
        return NULL;
    if (parser_skip_operator(parser, OPERATOR_COLON)) {
        token = parser_current(parser);
        at_end = token_is_operator(token, OPERATOR_RIGHT_BRACKET) || token_is_operator(token, OPERATOR_COMMA);
        if (!at_end && !(parts[2] = parse_expression(parser, true)))
            return NULL;
    }
    struct expression *slice = new_node(parser, EXPRESSION_SLICE, line);
    if (!slice || !adopt(parser, slice, parts[0]) || !adopt(parser, slice, parts[1]) ||
        !adopt(parser, slice, parts[2]))
        return NULL;
    slice->as.slice.start = parts[0];
    slice->as.slice.stop = parts[1];
    slice->as.slice.step = parts[2];
    return slice;
}

static struct expression *parse_subscript(struct parser *parser, struct expression *object)
{
    const struct token *token = parser_next(parser);
    int line = token->line;
    if (token_is_operator(token, OPERATOR_DOT)) {
        const struct token *attribute = parser_current(parser);
        struct expression *node;
        if (attribute->type == TOKEN_NAME) {
            parser_next(parser);
            node = new_node(parser, EXPRESSION_ATTRIBUTE, line);
            if (!node || !adopt(parser, node, object))
                return NULL;
            node->as.attribute.object = object;
            node->as.attribute.name = parser_copy(parser, attribute->text, attribute->length);
            node->as.attribute.length = attribute->length;
            return node->as.attribute.name ? node : NULL;
        }
        if (attribute->type == TOKEN_INTEGER) {
            parser_next(parser);
            struct expression *index = literal_node(parser, chat_value_int(attribute->integer), line);
            node = new_node(parser, EXPRESSION_ITEM, line);
            if (!index || !node || !adopt(parser, node, object))
                return NULL;
            node->as.item.object = object;
            node->as.item.index = index;
            return node;
        }
        return fail_expected(parser, "name or number");
    }
    /* '[' */
    if (!enter(parser))
        return NULL;
    struct expression **items = NULL;
    size_t count = 0, capacity = 0;
    while (!token_is_operator(parser_current(parser), OPERATOR_RIGHT_BRACKET)) {
        if (count && !parser_expect_operator(parser, OPERATOR_COMMA, ","))
            return NULL;
        struct expression *item = parse_subscribed(parser);
        if (!item || !append_expression(parser, &items, &count, &capacity, item))
            return NULL;
    }
    leave(parser);
    if (!parser_expect_operator(parser, OPERATOR_RIGHT_BRACKET, "]"))
        return NULL;
    if (count == 0)
        return parse_fail(parser, line, "expected an index");
    if (count == 1 && items[0]->kind == EXPRESSION_SLICE) {
        struct expression *slice = items[0];
        if (!adopt(parser, slice, object))
            return NULL;
        slice->as.slice.object = object;
        return slice;
    }
    struct expression *index = items[0];
    if (count > 1) {
        index = new_node(parser, EXPRESSION_TUPLE, line);
        if (!index)
            return NULL;
        for (size_t i = 0; i < count; i++) {
            if (items[i]->kind == EXPRESSION_SLICE)
                return parse_fail(parser, line, "slices inside a tuple index are not supported");
            if (!adopt(parser, index, items[i]))
                return NULL;
        }
        index->as.sequence.items = items;
        index->as.sequence.count = count;
    }
    struct expression *node = new_node(parser, EXPRESSION_ITEM, line);
    if (!node || !adopt(parser, node, object) || !adopt(parser, node, index))
        return NULL;
    node->as.item.object = object;
    node->as.item.index = index;
    return node;
}

static struct expression *parse_call(struct parser *parser, struct expression *callee)
{
    struct expression *node = new_node(parser, EXPRESSION_CALL, parser_current(parser)->line);
    if (!node || !adopt(parser, node, callee) || !parse_call_arguments(parser, &node->as.call.arguments) ||
        !adopt_arguments(parser, node, &node->as.call.arguments))
        return NULL;
    node->as.call.callee = callee;
    return node;
}

struct expression *parse_postfix(struct parser *parser, struct expression *node)
{
    while (node) {
        const struct token *token = parser_current(parser);
        if (token_is_operator(token, OPERATOR_DOT) || token_is_operator(token, OPERATOR_LEFT_BRACKET))
            node = parse_subscript(parser, node);
        else if (token_is_operator(token, OPERATOR_LEFT_PAREN))
            node = parse_call(parser, node);
        else
            break;
    }
    return node;
}

/* A dotted name after '|' or 'is'. */
static bool parse_dotted_name(struct parser *parser, const char **name, size_t *length)
{
    const struct token *token = parser_current(parser);
    if (token->type != TOKEN_NAME) {
        fail_expected(parser, "name");
        return false;
    }
    size_t start = parser->position, total = token->length;
    parser_next(parser);
    while (token_is_operator(parser_current(parser), OPERATOR_DOT) && parser_peek(parser, 1)->type == TOKEN_NAME) {
        total += 1 + parser_peek(parser, 1)->length;
        parser_next(parser);
        parser_next(parser);
    }
    char *joined = parser_allocate(parser, total + 1);
    if (!joined)
        return false;
    size_t offset = 0;
    for (size_t i = start; i < parser->position; i++) {
        const struct token *part = &parser->tokens[i];
        memcpy(joined + offset, part->text, part->length);
        offset += part->length;
    }
    *name = joined;
    *length = offset;
    return true;
}

struct expression *parse_filter(struct parser *parser, struct expression *operand, bool start_inline)
{
    while (token_is_operator(parser_current(parser), OPERATOR_PIPE) || start_inline) {
        if (!start_inline)
            parser_next(parser);
        start_inline = false;
        struct expression *node = new_node(parser, EXPRESSION_FILTER, parser_current(parser)->line);
        if (!node || !adopt(parser, node, operand) ||
            !parse_dotted_name(parser, &node->as.filter.name, &node->as.filter.length))
            return NULL;
        node->as.filter.operand = operand;
        node->as.filter.filter = filter_find(node->as.filter.name, node->as.filter.length);
        if (token_is_operator(parser_current(parser), OPERATOR_LEFT_PAREN) &&
            (!parse_call_arguments(parser, &node->as.filter.arguments) ||
             !adopt_arguments(parser, node, &node->as.filter.arguments)))
            return NULL;
        operand = node;
    }
    return operand;
}

static struct expression *parse_test(struct parser *parser, struct expression *operand)
{
    int line = parser_next(parser)->line; /* 'is' */
    struct expression *node = new_node(parser, EXPRESSION_TEST, line);
    if (!node || !adopt(parser, node, operand))
        return NULL;
    node->negated = parser_skip_name(parser, "not");
    if (!parse_dotted_name(parser, &node->as.filter.name, &node->as.filter.length))
        return NULL;
    node->as.filter.operand = operand;
    node->as.filter.test = test_find(node->as.filter.name, node->as.filter.length);
    const struct token *token = parser_current(parser);
    if (token_is_operator(token, OPERATOR_LEFT_PAREN)) {
        if (!parse_call_arguments(parser, &node->as.filter.arguments))
            return NULL;
    } else if ((token->type == TOKEN_NAME || token->type == TOKEN_STRING || token->type == TOKEN_INTEGER ||
                token->type == TOKEN_FLOAT || token_is_operator(token, OPERATOR_LEFT_BRACKET) ||
                token_is_operator(token, OPERATOR_LEFT_BRACE)) &&
               !token_is_name(token, "else") && !token_is_name(token, "or") && !token_is_name(token, "and")) {
        if (token_is_name(token, "is"))
            return parse_fail(parser, token->line, "You cannot chain multiple tests with is");
        struct expression *argument = parse_postfix(parser, parse_primary(parser));
        if (!argument)
            return NULL;
        struct argument *items = parser_allocate(parser, sizeof *items);
        if (!items)
            return NULL;
        items[0].value = argument;
        node->as.filter.arguments.items = items;
        node->as.filter.arguments.count = 1;
    }
    return adopt_arguments(parser, node, &node->as.filter.arguments) ? node : NULL;
}

static struct expression *parse_filter_expression(struct parser *parser, struct expression *node)
{
    while (node) {
        const struct token *token = parser_current(parser);
        if (token_is_operator(token, OPERATOR_PIPE))
            node = parse_filter(parser, node, false);
        else if (token_is_name(token, "is"))
            node = parse_test(parser, node);
        else if (token_is_operator(token, OPERATOR_LEFT_PAREN))
            node = parse_call(parser, node);
        else
            break;
    }
    return node;
}

static struct expression *parse_unary(struct parser *parser, bool with_filter)
{
    const struct token *token = parser_current(parser);
    struct expression *node;
    if (token_is_operator(token, OPERATOR_SUBTRACT) || token_is_operator(token, OPERATOR_ADD)) {
        if (!enter(parser))
            return NULL;
        parser_next(parser);
        struct expression *operand = parse_unary(parser, false);
        leave(parser);
        node = new_node(parser, token->operator == OPERATOR_SUBTRACT ? EXPRESSION_NEGATE : EXPRESSION_PLUS,
                        token->line);
        if (!operand || !node || !adopt(parser, node, operand))
            return NULL;
        node->as.unary.operand = operand;
    } else {
        node = parse_primary(parser);
    }
    node = parse_postfix(parser, node);
    return with_filter ? parse_filter_expression(parser, node) : node;
}

static struct expression *parse_power(struct parser *parser)
{
    struct expression *left = parse_unary(parser, true);
    while (left && token_is_operator(parser_current(parser), OPERATOR_POWER)) {
        int line = parser_next(parser)->line;
        struct expression *right = parse_unary(parser, true);
        left = right ? new_binary(parser, EXPRESSION_BINARY, OPERATOR_POWER, left, right, line) : NULL;
    }
    return left;
}

static struct expression *parse_product(struct parser *parser)
{
    struct expression *left = parse_power(parser);
    for (;;) {
        const struct token *token = parser_current(parser);
        if (!left || token->type != TOKEN_OPERATOR ||
            (token->operator != OPERATOR_MULTIPLY && token->operator != OPERATOR_DIVIDE &&
             token->operator != OPERATOR_FLOOR_DIVIDE && token->operator != OPERATOR_MODULO))
            return left;
        parser_next(parser);
        struct expression *right = parse_power(parser);
        left = right ? new_binary(parser, EXPRESSION_BINARY, token->operator, left, right, token->line) : NULL;
    }
}

static struct expression *parse_concat(struct parser *parser)
{
    struct expression *first = parse_product(parser);
    if (!first || !token_is_operator(parser_current(parser), OPERATOR_TILDE))
        return first;
    struct expression *node = new_node(parser, EXPRESSION_CONCAT, first->line);
    size_t capacity = 0;
    if (!node || !adopt(parser, node, first) ||
        !append_expression(parser, &node->as.sequence.items, &node->as.sequence.count, &capacity, first))
        return NULL;
    while (parser_skip_operator(parser, OPERATOR_TILDE)) {
        struct expression *item = parse_product(parser);
        if (!item || !adopt(parser, node, item) ||
            !append_expression(parser, &node->as.sequence.items, &node->as.sequence.count, &capacity, item))
            return NULL;
    }
    return node;
}

static struct expression *parse_sum(struct parser *parser)
{
    struct expression *left = parse_concat(parser);
    for (;;) {
        const struct token *token = parser_current(parser);
        if (!left || !(token_is_operator(token, OPERATOR_ADD) || token_is_operator(token, OPERATOR_SUBTRACT)))
            return left;
        parser_next(parser);
        struct expression *right = parse_concat(parser);
        left = right ? new_binary(parser, EXPRESSION_BINARY, token->operator, left, right, token->line) : NULL;
    }
}

static bool comparison_of(const struct token *token, unsigned char *kind)
{
    if (token->type != TOKEN_OPERATOR)
        return false;
    switch (token->operator) {
    case OPERATOR_EQUAL: *kind = COMPARE_EQUAL; return true;
    case OPERATOR_NOT_EQUAL: *kind = COMPARE_NOT_EQUAL; return true;
    case OPERATOR_LESS: *kind = COMPARE_LESS; return true;
    case OPERATOR_LESS_EQUAL: *kind = COMPARE_LESS_EQUAL; return true;
    case OPERATOR_GREATER: *kind = COMPARE_GREATER; return true;
    case OPERATOR_GREATER_EQUAL: *kind = COMPARE_GREATER_EQUAL; return true;
    default: return false;
    }
}

static struct expression *parse_compare(struct parser *parser)
{
    struct expression *first = parse_sum(parser);
    if (!first)
        return NULL;
    struct expression *node = NULL;
    size_t capacity = 0;
    for (;;) {
        const struct token *token = parser_current(parser);
        unsigned char kind;
        if (comparison_of(token, &kind)) {
            parser_next(parser);
        } else if (token_is_name(token, "in")) {
            parser_next(parser);
            kind = COMPARE_IN;
        } else if (token_is_name(token, "not") && token_is_name(parser_peek(parser, 1), "in")) {
            parser_next(parser);
            parser_next(parser);
            kind = COMPARE_NOT_IN;
        } else {
            break;
        }
        struct expression *operand = parse_sum(parser);
        if (!operand)
            return NULL;
        if (!node) {
            node = new_node(parser, EXPRESSION_COMPARE, token->line);
            if (!node || !adopt(parser, node, first))
                return NULL;
            node->as.compare.first = first;
        }
        struct comparison *grown = arena_grow(parser->arena, node->as.compare.rest, node->as.compare.count,
                                              &capacity, sizeof *grown);
        if (!grown || !adopt(parser, node, operand))
            return grown ? NULL : parse_fail(parser, token->line, "out of memory");
        grown[node->as.compare.count++] = (struct comparison){.kind = kind, .operand = operand};
        node->as.compare.rest = grown;
    }
    return node ? node : first;
}

static struct expression *parse_not(struct parser *parser)
{
    const struct token *token = parser_current(parser);
    if (!token_is_name(token, "not"))
        return parse_compare(parser);
    if (!enter(parser))
        return NULL;
    parser_next(parser);
    struct expression *operand = parse_not(parser);
    leave(parser);
    struct expression *node = new_node(parser, EXPRESSION_NOT, token->line);
    if (!operand || !node || !adopt(parser, node, operand))
        return NULL;
    node->as.unary.operand = operand;
    return node;
}

static struct expression *parse_and(struct parser *parser)
{
    struct expression *left = parse_not(parser);
    while (left && token_is_name(parser_current(parser), "and")) {
        int line = parser_next(parser)->line;
        struct expression *right = parse_not(parser);
        left = right ? new_binary(parser, EXPRESSION_AND, 0, left, right, line) : NULL;
    }
    return left;
}

static struct expression *parse_or(struct parser *parser)
{
    struct expression *left = parse_and(parser);
    while (left && token_is_name(parser_current(parser), "or")) {
        int line = parser_next(parser)->line;
        struct expression *right = parse_and(parser);
        left = right ? new_binary(parser, EXPRESSION_OR, 0, left, right, line) : NULL;
    }
    return left;
}

static struct expression *parse_conditional(struct parser *parser)
{
    struct expression *node = parse_or(parser);
    while (node && token_is_name(parser_current(parser), "if")) {
        int line = parser_next(parser)->line;
        struct expression *condition = parse_or(parser), *otherwise = NULL;
        if (!condition)
            return NULL;
        if (parser_skip_name(parser, "else")) {
            if (!enter(parser))
                return NULL;
            otherwise = parse_conditional(parser);
            leave(parser);
            if (!otherwise)
                return NULL;
        }
        struct expression *conditional = new_node(parser, EXPRESSION_CONDITIONAL, line);
        if (!conditional || !adopt(parser, conditional, node) || !adopt(parser, conditional, condition) ||
            !adopt(parser, conditional, otherwise))
            return NULL;
        conditional->as.conditional.condition = condition;
        conditional->as.conditional.then = node;
        conditional->as.conditional.otherwise = otherwise;
        node = conditional;
    }
    return node;
}

struct expression *parse_expression(struct parser *parser, bool with_condition)
{
    if (!enter(parser))
        return NULL;
    struct expression *node = with_condition ? parse_conditional(parser) : parse_or(parser);
    leave(parser);
    return node;
}

static bool is_tuple_end(const struct parser *parser, const char *const *extra_end_names)
{
    const struct token *token = parser_current(parser);
    if (token->type == TOKEN_VARIABLE_END || token->type == TOKEN_BLOCK_END || token->type == TOKEN_END ||
        token_is_operator(token, OPERATOR_RIGHT_PAREN))
        return true;
    for (; extra_end_names && *extra_end_names; extra_end_names++)
        if (token_is_name(token, *extra_end_names))
            return true;
    return false;
}

struct expression *parse_tuple(struct parser *parser, bool simplified, bool with_condition,
                               const char *const *extra_end_names, bool explicit_parentheses)
{
    int line = parser_current(parser)->line;
    struct expression **items = NULL;
    size_t count = 0, capacity = 0;
    bool is_tuple = false;
    for (;;) {
        if (count && !parser_expect_operator(parser, OPERATOR_COMMA, ","))
            return NULL;
        if (is_tuple_end(parser, extra_end_names))
            break;
        struct expression *item = simplified ? parse_primary(parser) : parse_expression(parser, with_condition);
        if (!item || !append_expression(parser, &items, &count, &capacity, item))
            return NULL;
        if (token_is_operator(parser_current(parser), OPERATOR_COMMA))
            is_tuple = true;
        else
            break;
    }
    if (!is_tuple) {
        if (count)
            return items[0];
        if (!explicit_parentheses) {
            char buffer[64];
            return parse_fail(parser, line, "Expected an expression, got '%s'",
                              token_description(parser_current(parser), buffer, sizeof buffer));
        }
    }
    struct expression *node = new_node(parser, EXPRESSION_TUPLE, line);
    if (!node)
        return NULL;
    for (size_t i = 0; i < count; i++)
        if (!adopt(parser, node, items[i]))
            return NULL;
    node->as.sequence.items = items;
    node->as.sequence.count = count;
    return node;
}
