/* Template text to tokens, with Jinja2's lexical rules: data, {{ }}, {% %},
 * {# #} and raw blocks; the '-' and '+' whitespace controls; one trailing
 * newline dropped (keep_trailing_newline off); \r\n and \r read as \n.
 * trim_blocks and lstrip_blocks are render options, so the lexer does not
 * apply them: it records on each data token what each would remove. */
#ifndef BMOE_CHAT_LEXER_H
#define BMOE_CHAT_LEXER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "chat/arena.h"

enum token_type {
    TOKEN_END,
    TOKEN_DATA,
    TOKEN_VARIABLE_BEGIN,
    TOKEN_VARIABLE_END,
    TOKEN_BLOCK_BEGIN,
    TOKEN_BLOCK_END,
    TOKEN_NAME,
    TOKEN_STRING,
    TOKEN_INTEGER,
    TOKEN_FLOAT,
    TOKEN_OPERATOR,
};

enum operator_kind {
    OPERATOR_ADD,
    OPERATOR_SUBTRACT,
    OPERATOR_DIVIDE,
    OPERATOR_FLOOR_DIVIDE,
    OPERATOR_MULTIPLY,
    OPERATOR_MODULO,
    OPERATOR_POWER,
    OPERATOR_TILDE,
    OPERATOR_LEFT_BRACKET,
    OPERATOR_RIGHT_BRACKET,
    OPERATOR_LEFT_PAREN,
    OPERATOR_RIGHT_PAREN,
    OPERATOR_LEFT_BRACE,
    OPERATOR_RIGHT_BRACE,
    OPERATOR_EQUAL,
    OPERATOR_NOT_EQUAL,
    OPERATOR_GREATER,
    OPERATOR_GREATER_EQUAL,
    OPERATOR_LESS,
    OPERATOR_LESS_EQUAL,
    OPERATOR_ASSIGN,
    OPERATOR_DOT,
    OPERATOR_COLON,
    OPERATOR_PIPE,
    OPERATOR_COMMA,
    OPERATOR_SEMICOLON,
};

struct token {
    uint8_t type;
    uint8_t operator;
    /* TOKEN_DATA: starts with a newline that trim_blocks removes (it follows
     * a block or comment tag). */
    bool trim_newline;
    int line;
    /* DATA: the text; NAME: the name; STRING: the decoded value (arena). */
    const char *text;
    size_t length;
    /* TOKEN_DATA: the length left when lstrip_blocks strips the indentation
     * before a following block or comment tag (length when it does not). */
    size_t lstrip_length;
    int64_t integer;
    double number;
};

struct token_list {
    struct token *tokens;
    size_t count;
};

/* Tokenizes source (copied into arena, which also keeps decoded strings);
 * tokens are malloc'd (free them). 0, or -1 with "line N: ..." in err. */
int lex_template(const char *source, size_t length, struct arena *arena, struct token_list *list, bmoe_error *err);

/* How the parser names a token in messages ("end of print statement"). */
const char *token_description(const struct token *token, char *buffer, size_t size);

#endif
