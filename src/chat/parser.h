/* Tokens to the syntax tree, with Jinja2's grammar and precedence (see
 * Jinja2's parser: conditional expression, or, and, not, comparisons,
 * + -, ~, * / // %, **, unary, postfix, filters and tests). */
#ifndef BMOE_CHAT_PARSER_H
#define BMOE_CHAT_PARSER_H

#include "base/error.h"
#include "chat/arena.h"
#include "chat/ast.h"
#include "chat/lexer.h"

/* Bracket, block and unary nesting the parser follows, and the height of
 * an expression tree: each bounds a recursion of the parser or evaluator. */
#define PARSE_NESTING_MAX 100
#define EXPRESSION_HEIGHT_MAX 200
/* Parameters of one macro. */
#define PARSE_PARAMETER_MAX 64

/* 0 and the template body, or -1 with "line N: ..." in err. */
int parse_template(const struct token_list *tokens, struct arena *arena, struct body *body, bmoe_error *err);

#endif
