/* The syntax tree of a parsed template: expressions and statements, all in
 * the template's arena. Read-only once parsed, so one template can be
 * rendered from several threads at once. */
#ifndef BMOE_CHAT_AST_H
#define BMOE_CHAT_AST_H

#include <stdbool.h>
#include <stddef.h>

#include "chat/arena.h"
#include "chat/value.h"

struct filter_entry;
struct test_entry;

enum expression_kind {
    EXPRESSION_LITERAL,
    EXPRESSION_NAME,
    EXPRESSION_LIST,
    EXPRESSION_TUPLE,
    EXPRESSION_DICT,
    EXPRESSION_ATTRIBUTE,
    EXPRESSION_ITEM,
    EXPRESSION_SLICE,
    EXPRESSION_CALL,
    EXPRESSION_FILTER,
    EXPRESSION_TEST,
    EXPRESSION_NEGATE,
    EXPRESSION_PLUS,
    EXPRESSION_NOT,
    EXPRESSION_BINARY,
    EXPRESSION_CONCAT,
    EXPRESSION_COMPARE,
    EXPRESSION_AND,
    EXPRESSION_OR,
    EXPRESSION_CONDITIONAL,
};

enum comparison_kind {
    COMPARE_EQUAL,
    COMPARE_NOT_EQUAL,
    COMPARE_LESS,
    COMPARE_LESS_EQUAL,
    COMPARE_GREATER,
    COMPARE_GREATER_EQUAL,
    COMPARE_IN,
    COMPARE_NOT_IN,
};

struct expression;

enum argument_kind { ARGUMENT_PLAIN, ARGUMENT_STAR, ARGUMENT_DOUBLE_STAR };

struct argument {
    const char *name; /* keyword arguments; NULL for positional */
    size_t name_length;
    struct expression *value;
    unsigned char kind;
};

struct argument_list {
    struct argument *items;
    size_t count;
};

struct comparison {
    unsigned char kind;
    struct expression *operand;
};

struct expression {
    unsigned char kind;
    unsigned char operator; /* EXPRESSION_BINARY: an OPERATOR_* of lexer.h */
    bool negated;           /* EXPRESSION_TEST: "is not" */
    unsigned short height;  /* of the subtree: bounds evaluation recursion */
    int line;
    union {
        chat_value literal;
        struct {
            const char *text;
            size_t length;
        } name;
        struct {
            struct expression **items;
            size_t count;
        } sequence; /* list, tuple, concat */
        struct {
            struct expression **keys, **values;
            size_t count;
        } dict;
        struct {
            struct expression *object;
            const char *name;
            size_t length;
        } attribute;
        struct {
            struct expression *object, *index;
        } item;
        struct {
            struct expression *object, *start, *stop, *step;
        } slice;
        struct {
            struct expression *callee;
            struct argument_list arguments;
        } call;
        struct {
            struct expression *operand; /* NULL in a filter block: the block's text */
            const char *name;
            size_t length;
            const struct filter_entry *filter; /* NULL when unknown: fails when run */
            const struct test_entry *test;
            struct argument_list arguments;
        } filter; /* filters and tests */
        struct {
            struct expression *operand;
        } unary;
        struct {
            struct expression *left, *right;
        } binary; /* arithmetic, and, or */
        struct {
            struct expression *first;
            struct comparison *rest;
            size_t count;
        } compare;
        struct {
            struct expression *condition, *then, *otherwise; /* otherwise may be NULL */
        } conditional;
    } as;
};

struct statement;

struct body {
    struct statement **items;
    size_t count;
};

enum target_kind { TARGET_NAME, TARGET_TUPLE, TARGET_NAMESPACE_ATTRIBUTE };

struct target {
    unsigned char kind;
    const char *name;
    size_t length;
    const char *attribute; /* TARGET_NAMESPACE_ATTRIBUTE */
    size_t attribute_length;
    struct target *items; /* TARGET_TUPLE */
    size_t count;
};

struct parameter {
    const char *name;
    size_t length;
    struct expression *default_value; /* NULL: none */
};

/* A macro, or the caller() body of a {% call %} block. */
struct macro_definition {
    const char *name;
    size_t name_length;
    struct parameter *parameters;
    size_t count;
    struct body body;
    bool uses_varargs, uses_kwargs;
    int line;
};

enum statement_kind {
    STATEMENT_DATA,
    STATEMENT_OUTPUT,
    STATEMENT_IF,
    STATEMENT_FOR,
    STATEMENT_SET,
    STATEMENT_SET_BLOCK,
    STATEMENT_MACRO,
    STATEMENT_CALL_BLOCK,
    STATEMENT_FILTER_BLOCK,
    STATEMENT_WITH,
    STATEMENT_BREAK,
    STATEMENT_CONTINUE,
    STATEMENT_GENERATION,
};

struct statement {
    unsigned char kind;
    int line;
    union {
        struct {
            const char *text;
            size_t length, lstrip_length;
            bool trim_newline;
        } data;
        struct expression *output;
        struct {
            struct expression **conditions; /* if, then each elif */
            struct body *bodies;
            size_t count;
            struct body otherwise;
        } branch;
        struct {
            struct target target;
            struct expression *iterable, *condition; /* condition may be NULL */
            struct body body, otherwise;
            bool recursive;
        } loop;
        struct {
            struct target target;
            struct expression *value;
        } assign;
        struct {
            struct target target;
            struct expression *filter; /* may be NULL */
            struct body body;
        } assign_block;
        struct macro_definition macro;
        struct {
            struct expression *call;
            struct macro_definition caller;
        } call_block;
        struct {
            struct expression *filter;
            struct body body;
        } filter_block;
        struct {
            struct target *targets;
            struct expression **values;
            size_t count;
            struct body body;
        } with;
        struct body generation;
    } as;
};

#endif
