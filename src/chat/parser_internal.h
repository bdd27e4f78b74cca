/* State shared by the expression and statement halves of the parser. */
#ifndef BMOE_CHAT_PARSER_INTERNAL_H
#define BMOE_CHAT_PARSER_INTERNAL_H

#include <stdbool.h>

#include "chat/parser.h"

struct open_block {
    const char *name;            /* "for", "if", ... */
    const char *const *end_tags; /* NULL-terminated */
    int line;
};

struct parser {
    const struct token *tokens;
    size_t count, position;
    struct arena *arena;
    bmoe_error *err;
    bool failed;
    int depth;      /* nesting of blocks, brackets and unary operators */
    int loop_depth; /* for loops around the current statement, within its macro */
    struct macro_definition *macros[PARSE_NESTING_MAX + 1]; /* being parsed, outermost first */
    int macro_count;
    struct open_block blocks[PARSE_NESTING_MAX + 1];
    int block_count;
};

/* Formats "line N: ..." into the error (the first failure wins); returns NULL. */
void *parse_fail(struct parser *parser, int line, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

const struct token *parser_current(const struct parser *parser);
const struct token *parser_peek(const struct parser *parser, size_t ahead);
const struct token *parser_next(struct parser *parser);
bool token_is_name(const struct token *token, const char *name);
bool token_is_operator(const struct token *token, unsigned char kind);
bool parser_skip_name(struct parser *parser, const char *name);
bool parser_skip_operator(struct parser *parser, unsigned char kind);
/* Consumes an operator or fails with "expected token 'x', got 'y'". */
bool parser_expect_operator(struct parser *parser, unsigned char kind, const char *spelling);
bool parser_expect_type(struct parser *parser, unsigned char type, const char *description);
void *parser_allocate(struct parser *parser, size_t size);
char *parser_copy(struct parser *parser, const char *text, size_t length);

/* Jinja2's parse_tuple: an expression, or a tuple of them when commas follow. */
struct expression *parse_tuple(struct parser *parser, bool simplified, bool with_condition,
                               const char *const *extra_end_names, bool explicit_parentheses);
struct expression *parse_expression(struct parser *parser, bool with_condition);
struct expression *parse_primary(struct parser *parser);
struct expression *parse_postfix(struct parser *parser, struct expression *node);
/* A filter chain; operand NULL with start_inline for {% filter %} and {% set x | f %}. */
struct expression *parse_filter(struct parser *parser, struct expression *operand, bool start_inline);
bool parse_call_arguments(struct parser *parser, struct argument_list *arguments);

#endif
