/* Statements: data, {{ }} and the block tags (for, if, set, macro, call,
 * filter, with, break, continue, generation), each parsed as Jinja2's
 * parser does, then a pass that reports unknown filters and tests the way
 * Jinja2's compiler does: at parse time, except inside an if statement or
 * an if-expression, where they fail only when reached. */
#include "chat/parser_internal.h"

#include <stdio.h>
#include <string.h>

#include "chat/callables.h"

static const char *const end_for_or_else[] = {"endfor", "else", NULL};
static const char *const end_for[] = {"endfor", NULL};
static const char *const end_if_branches[] = {"elif", "else", "endif", NULL};
static const char *const end_if[] = {"endif", NULL};
static const char *const end_set[] = {"endset", NULL};
static const char *const end_macro[] = {"endmacro", NULL};
static const char *const end_call[] = {"endcall", NULL};
static const char *const end_filter[] = {"endfilter", NULL};
static const char *const end_with[] = {"endwith", NULL};
static const char *const end_generation[] = {"endgeneration", NULL};
static const char *const in_name[] = {"in", NULL};
static const char *const recursive_name[] = {"recursive", NULL};

static bool is_end_tag(const struct token *token, const char *const *end_tags)
{
    for (; end_tags && *end_tags; end_tags++)
        if (token_is_name(token, *end_tags))
            return true;
    return false;
}

/* "'endfor' or 'else'" */
static void describe_tags(const char *const *tags, char *buffer, size_t size)
{
    size_t used = 0;
    buffer[0] = '\0';
    for (size_t i = 0; tags[i] && used < size; i++)
        used += (size_t)snprintf(buffer + used, size - used, "%s'%s'", i ? " or " : "", tags[i]);
}

static void *fail_unknown_tag(struct parser *parser, const struct token *token)
{
    char name[64], looking[128];
    token_description(token, name, sizeof name);
    if (parser->block_count == 0)
        return parse_fail(parser, token->line, "Encountered unknown tag '%s'.", name);
    const struct open_block *block = &parser->blocks[parser->block_count - 1];
    describe_tags(block->end_tags, looking, sizeof looking);
    return parse_fail(parser, token->line,
                      "Encountered unknown tag '%s'. Jinja was looking for the following tags: %s. The innermost "
                      "block that needs to be closed is '%s' (line %d).",
                      name, looking, block->name, block->line);
}

static void *fail_end_of_template(struct parser *parser, const struct token *token)
{
    char looking[128];
    const struct open_block *block = &parser->blocks[parser->block_count - 1];
    describe_tags(block->end_tags, looking, sizeof looking);
    return parse_fail(parser, token->line,
                      "Unexpected end of template. Jinja was looking for the following tags: %s. The innermost block "
                      "that needs to be closed is '%s' (line %d).",
                      looking, block->name, block->line);
}

static struct statement *new_statement(struct parser *parser, unsigned char kind, int line)
{
    struct statement *statement = parser_allocate(parser, sizeof *statement);
    if (statement) {
        statement->kind = kind;
        statement->line = line;
    }
    return statement;
}

static struct statement *parse_statement(struct parser *parser);

/* Statements up to a block tag named in end_tags (left unconsumed) or the end. */
static bool subparse(struct parser *parser, const char *const *end_tags, struct body *body)
{
    size_t capacity = 0;
    body->items = NULL;
    body->count = 0;
    for (;;) {
        const struct token *token = parser_current(parser);
        struct statement *statement = NULL;
        if (token->type == TOKEN_END)
            return true;
        if (token->type == TOKEN_DATA) {
            parser_next(parser);
            statement = new_statement(parser, STATEMENT_DATA, token->line);
            if (statement) {
                statement->as.data.text = token->text;
                statement->as.data.length = token->length;
                statement->as.data.lstrip_length = token->lstrip_length;
                statement->as.data.trim_newline = token->trim_newline;
            }
        } else if (token->type == TOKEN_VARIABLE_BEGIN) {
            parser_next(parser);
            struct expression *expression = parse_tuple(parser, false, true, NULL, false);
            if (!expression || !parser_expect_type(parser, TOKEN_VARIABLE_END, "end of print statement"))
                return false;
            statement = new_statement(parser, STATEMENT_OUTPUT, token->line);
            if (statement)
                statement->as.output = expression;
        } else if (token->type == TOKEN_BLOCK_BEGIN) {
            parser_next(parser);
            if (is_end_tag(parser_current(parser), end_tags))
                return true;
            statement = parse_statement(parser);
            if (statement && !parser_expect_type(parser, TOKEN_BLOCK_END, "end of statement block"))
                return false;
        } else {
            parse_fail(parser, token->line, "unexpected '%s'", token->type == TOKEN_VARIABLE_END ? "}}" : "%}");
            return false;
        }
        if (!statement)
            return false;
        struct statement **grown = arena_grow(parser->arena, body->items, body->count, &capacity, sizeof *grown);
        if (!grown) {
            parse_fail(parser, token->line, "out of memory");
            return false;
        }
        grown[body->count++] = statement;
        body->items = grown;
    }
}

/* Jinja2's parse_statements: the tag's end, then a body up to an end tag. */
static bool parse_statements(struct parser *parser, const char *name, int line, const char *const *end_tags,
                             bool drop_end_tag, struct body *body)
{
    parser_skip_operator(parser, OPERATOR_COLON);
    if (!parser_expect_type(parser, TOKEN_BLOCK_END, "end of statement block"))
        return false;
    if (parser->block_count >= PARSE_NESTING_MAX || ++parser->depth > PARSE_NESTING_MAX) {
        parse_fail(parser, line, "blocks nested too deeply (more than %d levels)", PARSE_NESTING_MAX);
        return false;
    }
    parser->blocks[parser->block_count++] = (struct open_block){name, end_tags, line};
    bool parsed = subparse(parser, end_tags, body);
    if (parsed && parser_current(parser)->type == TOKEN_END) {
        fail_end_of_template(parser, parser_current(parser));
        parsed = false;
    }
    parser->block_count--;
    parser->depth--;
    if (parsed && drop_end_tag)
        parser_next(parser);
    return parsed;
}

/* Turns a parsed expression into an assignment target, as can_assign allows. */
static bool to_target(struct parser *parser, const struct expression *expression, struct target *target)
{
    if (expression->kind == EXPRESSION_NAME) {
        target->kind = TARGET_NAME;
        target->name = expression->as.name.text;
        target->length = expression->as.name.length;
        return true;
    }
    if (expression->kind == EXPRESSION_TUPLE) {
        target->kind = TARGET_TUPLE;
        target->count = expression->as.sequence.count;
        target->items = parser_allocate(parser, (target->count ? target->count : 1) * sizeof *target->items);
        if (!target->items)
            return false;
        for (size_t i = 0; i < target->count; i++)
            if (!to_target(parser, expression->as.sequence.items[i], &target->items[i]))
                return false;
        return true;
    }
    static const char *const names[] = {
        [EXPRESSION_LITERAL] = "const", [EXPRESSION_LIST] = "list",       [EXPRESSION_DICT] = "dict",
        [EXPRESSION_ATTRIBUTE] = "getattr", [EXPRESSION_ITEM] = "getitem", [EXPRESSION_SLICE] = "getitem",
        [EXPRESSION_CALL] = "call",     [EXPRESSION_FILTER] = "filter",   [EXPRESSION_TEST] = "test",
    };
    const char *kind = expression->kind < sizeof names / sizeof names[0] && names[expression->kind]
                           ? names[expression->kind]
                           : "expression";
    parse_fail(parser, expression->line, "can't assign to '%s'", kind);
    return false;
}

static bool parse_assign_target(struct parser *parser, struct target *target, const char *const *extra_end_names,
                                bool with_namespace)
{
    const struct token *token = parser_current(parser);
    if (with_namespace && token->type == TOKEN_NAME && token_is_operator(parser_peek(parser, 1), OPERATOR_DOT)) {
        const struct token *attribute = parser_peek(parser, 2);
        if (attribute->type != TOKEN_NAME) {
            parse_fail(parser, attribute->line, "expected a name after '%.*s.'", (int)token->length, token->text);
            return false;
        }
        target->kind = TARGET_NAMESPACE_ATTRIBUTE;
        target->name = parser_copy(parser, token->text, token->length);
        target->length = token->length;
        target->attribute = parser_copy(parser, attribute->text, attribute->length);
        target->attribute_length = attribute->length;
        parser_next(parser);
        parser_next(parser);
        parser_next(parser);
        return target->name && target->attribute;
    }
    struct expression *expression = parse_tuple(parser, true, false, extra_end_names, false);
    return expression && to_target(parser, expression, target);
}

static bool expect_name(struct parser *parser, const char **name, size_t *length)
{
    const struct token *token = parser_current(parser);
    if (token->type != TOKEN_NAME) {
        char buffer[64];
        parse_fail(parser, token->line, "expected token 'name', got '%s'", token_description(token, buffer, sizeof buffer));
        return false;
    }
    *name = parser_copy(parser, token->text, token->length);
    *length = token->length;
    parser_next(parser);
    return *name != NULL;
}

static bool parse_signature(struct parser *parser, struct macro_definition *definition)
{
    int line = parser_current(parser)->line;
    if (!parser_expect_operator(parser, OPERATOR_LEFT_PAREN, "("))
        return false;
    size_t capacity = 0;
    bool defaults = false;
    while (!token_is_operator(parser_current(parser), OPERATOR_RIGHT_PAREN)) {
        if (definition->count && !parser_expect_operator(parser, OPERATOR_COMMA, ","))
            return false;
        if (definition->count == PARSE_PARAMETER_MAX) {
            parse_fail(parser, line, "more than %d macro parameters", PARSE_PARAMETER_MAX);
            return false;
        }
        struct parameter parameter = {0};
        if (!expect_name(parser, &parameter.name, &parameter.length))
            return false;
        if (parser_skip_operator(parser, OPERATOR_ASSIGN)) {
            if (!(parameter.default_value = parse_expression(parser, true)))
                return false;
            defaults = true;
        } else if (defaults) {
            parse_fail(parser, line, "non-default argument follows default argument");
            return false;
        }
        struct parameter *grown = arena_grow(parser->arena, definition->parameters, definition->count, &capacity,
                                             sizeof *grown);
        if (!grown) {
            parse_fail(parser, line, "out of memory");
            return false;
        }
        grown[definition->count++] = parameter;
        definition->parameters = grown;
    }
    return parser_expect_operator(parser, OPERATOR_RIGHT_PAREN, ")");
}

/* A macro or caller body: its own loop depth, watched for varargs/kwargs. */
static bool parse_macro_body(struct parser *parser, struct macro_definition *definition, const char *tag,
                             const char *const *end_tags)
{
    int saved_loops = parser->loop_depth;
    parser->loop_depth = 0;
    parser->macros[parser->macro_count++] = definition;
    bool parsed = parse_statements(parser, tag, definition->line, end_tags, true, &definition->body);
    parser->macro_count--;
    parser->loop_depth = saved_loops;
    return parsed;
}

static struct statement *parse_for(struct parser *parser, int line)
{
    struct statement *statement = new_statement(parser, STATEMENT_FOR, line);
    if (!statement || !parse_assign_target(parser, &statement->as.loop.target, in_name, false))
        return NULL;
    if (!parser_skip_name(parser, "in"))
        return parse_fail(parser, parser_current(parser)->line, "expected token 'in'");
    statement->as.loop.iterable = parse_tuple(parser, false, false, recursive_name, false);
    if (!statement->as.loop.iterable)
        return NULL;
    if (parser_skip_name(parser, "if") && !(statement->as.loop.condition = parse_expression(parser, true)))
        return NULL;
    statement->as.loop.recursive = parser_skip_name(parser, "recursive");
    parser->loop_depth++;
    bool parsed = parse_statements(parser, "for", line, end_for_or_else, false, &statement->as.loop.body);
    parser->loop_depth--;
    if (!parsed)
        return NULL;
    if (token_is_name(parser_next(parser), "else") &&
        !parse_statements(parser, "for", line, end_for, true, &statement->as.loop.otherwise))
        return NULL;
    return statement;
}

static struct statement *parse_if(struct parser *parser, int line)
{
    struct statement *statement = new_statement(parser, STATEMENT_IF, line);
    size_t condition_capacity = 0, body_capacity = 0;
    if (!statement)
        return NULL;
    for (;;) {
        struct expression *condition = parse_tuple(parser, false, false, NULL, false);
        if (!condition)
            return NULL;
        struct expression **conditions = arena_grow(parser->arena, statement->as.branch.conditions,
                                                    statement->as.branch.count, &condition_capacity, sizeof *conditions);
        struct body *bodies = arena_grow(parser->arena, statement->as.branch.bodies, statement->as.branch.count,
                                         &body_capacity, sizeof *bodies);
        if (!conditions || !bodies)
            return parse_fail(parser, line, "out of memory");
        statement->as.branch.conditions = conditions;
        statement->as.branch.bodies = bodies;
        conditions[statement->as.branch.count] = condition;
        if (!parse_statements(parser, "if", line, end_if_branches, false, &bodies[statement->as.branch.count]))
            return NULL;
        statement->as.branch.count++;
        const struct token *tag = parser_next(parser);
        if (token_is_name(tag, "elif"))
            continue;
        if (token_is_name(tag, "else") &&
            !parse_statements(parser, "if", line, end_if, true, &statement->as.branch.otherwise))
            return NULL;
        return statement;
    }
}

static struct statement *parse_set(struct parser *parser, int line)
{
    struct target target = {0};
    if (!parse_assign_target(parser, &target, NULL, true))
        return NULL;
    if (parser_skip_operator(parser, OPERATOR_ASSIGN)) {
        struct statement *statement = new_statement(parser, STATEMENT_SET, line);
        if (!statement || !(statement->as.assign.value = parse_tuple(parser, false, true, NULL, false)))
            return NULL;
        statement->as.assign.target = target;
        return statement;
    }
    struct statement *statement = new_statement(parser, STATEMENT_SET_BLOCK, line);
    if (!statement)
        return NULL;
    statement->as.assign_block.target = target;
    if (token_is_operator(parser_current(parser), OPERATOR_PIPE) &&
        !(statement->as.assign_block.filter = parse_filter(parser, NULL, false)))
        return NULL;
    return parse_statements(parser, "set", line, end_set, true, &statement->as.assign_block.body) ? statement : NULL;
}

static struct statement *parse_macro(struct parser *parser, int line)
{
    struct statement *statement = new_statement(parser, STATEMENT_MACRO, line);
    if (!statement)
        return NULL;
    struct macro_definition *definition = &statement->as.macro;
    definition->line = line;
    if (!expect_name(parser, &definition->name, &definition->name_length) || !parse_signature(parser, definition))
        return NULL;
    return parse_macro_body(parser, definition, "macro", end_macro) ? statement : NULL;
}

static struct statement *parse_call_block(struct parser *parser, int line)
{
    struct statement *statement = new_statement(parser, STATEMENT_CALL_BLOCK, line);
    if (!statement)
        return NULL;
    struct macro_definition *caller = &statement->as.call_block.caller;
    caller->name = "caller";
    caller->name_length = 6;
    caller->line = line;
    if (token_is_operator(parser_current(parser), OPERATOR_LEFT_PAREN) && !parse_signature(parser, caller))
        return NULL;
    struct expression *call = parse_expression(parser, true);
    if (!call)
        return NULL;
    if (call->kind != EXPRESSION_CALL)
        return parse_fail(parser, line, "expected call");
    statement->as.call_block.call = call;
    return parse_macro_body(parser, caller, "call", end_call) ? statement : NULL;
}

static struct statement *parse_filter_block(struct parser *parser, int line)
{
    struct statement *statement = new_statement(parser, STATEMENT_FILTER_BLOCK, line);
    if (!statement || !(statement->as.filter_block.filter = parse_filter(parser, NULL, true)))
        return NULL;
    return parse_statements(parser, "filter", line, end_filter, true, &statement->as.filter_block.body) ? statement
                                                                                                       : NULL;
}

static struct statement *parse_with(struct parser *parser, int line)
{
    struct statement *statement = new_statement(parser, STATEMENT_WITH, line);
    size_t target_capacity = 0, value_capacity = 0;
    if (!statement)
        return NULL;
    while (parser_current(parser)->type != TOKEN_BLOCK_END) {
        if (statement->as.with.count && !parser_expect_operator(parser, OPERATOR_COMMA, ","))
            return NULL;
        struct target target = {0};
        if (!parse_assign_target(parser, &target, NULL, false) ||
            !parser_expect_operator(parser, OPERATOR_ASSIGN, "="))
            return NULL;
        struct expression *value = parse_expression(parser, true);
        if (!value)
            return NULL;
        struct target *targets = arena_grow(parser->arena, statement->as.with.targets, statement->as.with.count,
                                            &target_capacity, sizeof *targets);
        struct expression **values = arena_grow(parser->arena, statement->as.with.values, statement->as.with.count,
                                                &value_capacity, sizeof *values);
        if (!targets || !values)
            return parse_fail(parser, line, "out of memory");
        targets[statement->as.with.count] = target;
        values[statement->as.with.count++] = value;
        statement->as.with.targets = targets;
        statement->as.with.values = values;
    }
    return parse_statements(parser, "with", line, end_with, true, &statement->as.with.body) ? statement : NULL;
}

static struct statement *parse_statement(struct parser *parser)
{
    const struct token *token = parser_current(parser);
    int line = token->line;
    if (token->type != TOKEN_NAME) {
        char buffer[64];
        if (token->type == TOKEN_END)
            return parse_fail(parser, line, "unexpected end of template, expected a tag name");
        return parse_fail(parser, line, "tag name expected, got '%s'", token_description(token, buffer, sizeof buffer));
    }
    parser_next(parser);
    if (token_is_name(token, "for"))
        return parse_for(parser, line);
    if (token_is_name(token, "if"))
        return parse_if(parser, line);
    if (token_is_name(token, "set"))
        return parse_set(parser, line);
    if (token_is_name(token, "macro"))
        return parse_macro(parser, line);
    if (token_is_name(token, "call"))
        return parse_call_block(parser, line);
    if (token_is_name(token, "filter"))
        return parse_filter_block(parser, line);
    if (token_is_name(token, "with"))
        return parse_with(parser, line);
    if (token_is_name(token, "break") || token_is_name(token, "continue")) {
        bool is_break = token_is_name(token, "break");
        if (parser->loop_depth == 0)
            return parse_fail(parser, line, "'%s' outside loop", is_break ? "break" : "continue");
        return new_statement(parser, is_break ? STATEMENT_BREAK : STATEMENT_CONTINUE, line);
    }
    if (token_is_name(token, "generation")) {
        struct statement *statement = new_statement(parser, STATEMENT_GENERATION, line);
        return statement && parse_statements(parser, "generation", line, end_generation, true, &statement->as.generation)
                   ? statement
                   : NULL;
    }
    static const char *const unsupported[] = {"block", "extends", "include", "import", "from", "autoescape", NULL};
    for (size_t i = 0; unsupported[i]; i++)
        if (token_is_name(token, unsupported[i]))
            return parse_fail(parser, line, "the '%s' tag is not supported (chat templates have no loader)",
                              unsupported[i]);
    return fail_unknown_tag(parser, token);
}

/* The check for unknown filters and tests. */

static bool check_expression(struct parser *parser, const struct expression *node, bool soft);

static bool check_arguments(struct parser *parser, const struct argument_list *arguments, bool soft)
{
    for (size_t i = 0; i < arguments->count; i++)
        if (!check_expression(parser, arguments->items[i].value, soft))
            return false;
    return true;
}

static bool check_expression(struct parser *parser, const struct expression *node, bool soft)
{
    if (!node)
        return true;
    switch (node->kind) {
    case EXPRESSION_LIST:
    case EXPRESSION_TUPLE:
    case EXPRESSION_CONCAT:
        for (size_t i = 0; i < node->as.sequence.count; i++)
            if (!check_expression(parser, node->as.sequence.items[i], soft))
                return false;
        return true;
    case EXPRESSION_DICT:
        for (size_t i = 0; i < node->as.dict.count; i++)
            if (!check_expression(parser, node->as.dict.keys[i], soft) ||
                !check_expression(parser, node->as.dict.values[i], soft))
                return false;
        return true;
    case EXPRESSION_ATTRIBUTE: return check_expression(parser, node->as.attribute.object, soft);
    case EXPRESSION_ITEM:
        return check_expression(parser, node->as.item.object, soft) && check_expression(parser, node->as.item.index, soft);
    case EXPRESSION_SLICE:
        return check_expression(parser, node->as.slice.object, soft) &&
               check_expression(parser, node->as.slice.start, soft) &&
               check_expression(parser, node->as.slice.stop, soft) && check_expression(parser, node->as.slice.step, soft);
    case EXPRESSION_CALL:
        return check_expression(parser, node->as.call.callee, soft) &&
               check_arguments(parser, &node->as.call.arguments, soft);
    case EXPRESSION_FILTER:
    case EXPRESSION_TEST:
        if (!soft && node->kind == EXPRESSION_FILTER && !node->as.filter.filter) {
            parse_fail(parser, node->line, "No filter named '%.*s'.", (int)node->as.filter.length, node->as.filter.name);
            return false;
        }
        if (!soft && node->kind == EXPRESSION_TEST && !node->as.filter.test) {
            parse_fail(parser, node->line, "No test named '%.*s'.", (int)node->as.filter.length, node->as.filter.name);
            return false;
        }
        return check_expression(parser, node->as.filter.operand, soft) &&
               check_arguments(parser, &node->as.filter.arguments, soft);
    case EXPRESSION_NEGATE:
    case EXPRESSION_PLUS:
    case EXPRESSION_NOT: return check_expression(parser, node->as.unary.operand, soft);
    case EXPRESSION_BINARY:
    case EXPRESSION_AND:
    case EXPRESSION_OR:
        return check_expression(parser, node->as.binary.left, soft) && check_expression(parser, node->as.binary.right, soft);
    case EXPRESSION_COMPARE:
        if (!check_expression(parser, node->as.compare.first, soft))
            return false;
        for (size_t i = 0; i < node->as.compare.count; i++)
            if (!check_expression(parser, node->as.compare.rest[i].operand, soft))
                return false;
        return true;
    case EXPRESSION_CONDITIONAL:
        return check_expression(parser, node->as.conditional.condition, true) &&
               check_expression(parser, node->as.conditional.then, true) &&
               check_expression(parser, node->as.conditional.otherwise, true);
    default: return true;
    }
}

static bool check_body(struct parser *parser, const struct body *body, bool soft);

static bool check_macro(struct parser *parser, const struct macro_definition *definition)
{
    for (size_t i = 0; i < definition->count; i++)
        if (!check_expression(parser, definition->parameters[i].default_value, false))
            return false;
    return check_body(parser, &definition->body, false);
}

static bool check_statement(struct parser *parser, const struct statement *statement, bool soft)
{
    switch (statement->kind) {
    case STATEMENT_OUTPUT: return check_expression(parser, statement->as.output, soft);
    case STATEMENT_IF:
        for (size_t i = 0; i < statement->as.branch.count; i++)
            if (!check_expression(parser, statement->as.branch.conditions[i], true) ||
                !check_body(parser, &statement->as.branch.bodies[i], true))
                return false;
        return check_body(parser, &statement->as.branch.otherwise, true);
    case STATEMENT_FOR:
        return check_expression(parser, statement->as.loop.iterable, soft) &&
               check_expression(parser, statement->as.loop.condition, soft) &&
               check_body(parser, &statement->as.loop.body, false) &&
               check_body(parser, &statement->as.loop.otherwise, false);
    case STATEMENT_SET: return check_expression(parser, statement->as.assign.value, soft);
    case STATEMENT_SET_BLOCK:
        return check_expression(parser, statement->as.assign_block.filter, false) &&
               check_body(parser, &statement->as.assign_block.body, false);
    case STATEMENT_MACRO: return check_macro(parser, &statement->as.macro);
    case STATEMENT_CALL_BLOCK:
        return check_expression(parser, statement->as.call_block.call, soft) &&
               check_macro(parser, &statement->as.call_block.caller);
    case STATEMENT_FILTER_BLOCK:
        return check_expression(parser, statement->as.filter_block.filter, false) &&
               check_body(parser, &statement->as.filter_block.body, false);
    case STATEMENT_WITH:
        for (size_t i = 0; i < statement->as.with.count; i++)
            if (!check_expression(parser, statement->as.with.values[i], soft))
                return false;
        return check_body(parser, &statement->as.with.body, false);
    case STATEMENT_GENERATION: return check_body(parser, &statement->as.generation, false);
    default: return true;
    }
}

static bool check_body(struct parser *parser, const struct body *body, bool soft)
{
    for (size_t i = 0; i < body->count; i++)
        if (!check_statement(parser, body->items[i], soft))
            return false;
    return true;
}

int parse_template(const struct token_list *tokens, struct arena *arena, struct body *body, bmoe_error *err)
{
    struct parser parser;
    memset(&parser, 0, sizeof parser);
    parser.tokens = tokens->tokens;
    parser.count = tokens->count;
    parser.arena = arena;
    parser.err = err;
    if (!subparse(&parser, NULL, body) || parser.failed)
        return -1;
    if (!check_body(&parser, body, false))
        return -1;
    return 0;
}
