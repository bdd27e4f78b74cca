/* What templates can call by name: filters (x|name), tests (x is name),
 * methods (s.strip()), and the global functions; each kind has a table of
 * entries looked up by name, and all take their arguments the same way. */
#ifndef BMOE_CHAT_CALLABLES_H
#define BMOE_CHAT_CALLABLES_H

#include <stdbool.h>
#include <stddef.h>

#include "chat/value.h"

struct render;
struct expression;

struct keyword_argument {
    const char *name;
    size_t length;
    chat_value value;
};

/* Evaluated arguments of one call (the values are owned by the call). */
struct call_arguments {
    chat_value *positional;
    size_t positional_count;
    struct keyword_argument *keywords;
    size_t keyword_count;
};

typedef int (*filter_function)(struct render *render, const struct expression *node, chat_value input,
                               const struct call_arguments *arguments, chat_value *result);
typedef int (*test_function)(struct render *render, const struct expression *node, chat_value input,
                             const struct call_arguments *arguments, bool *result);
typedef int (*method_function)(struct render *render, const struct expression *node, chat_value receiver,
                               const struct call_arguments *arguments, chat_value *result);
typedef int (*builtin_function)(struct render *render, const struct expression *node,
                                const struct call_arguments *arguments, chat_value *result);

struct filter_entry {
    const char *name;
    filter_function function;
};

struct test_entry {
    const char *name;
    test_function function;
};

/* NULL when there is no such filter or test. */
const struct filter_entry *filter_find(const char *name, size_t length);
const struct test_entry *test_find(const char *name, size_t length);

/* The method of that name on values of receiver's kind, or -1. */
int method_find(chat_value receiver, const char *name, size_t length);
int method_call(struct render *render, const struct expression *node, int method, chat_value receiver,
                const struct call_arguments *arguments, chat_value *result);

/* Global functions: range, dict, namespace, raise_exception, strftime_now, ... */
int builtin_find(const char *name, size_t length);
int builtin_call(struct render *render, const struct expression *node, int builtin,
                 const struct call_arguments *arguments, chat_value *result);

/* Binds arguments to parameter names (positional first, then by keyword):
 * values[i] gets a borrowed value or stays CHAT_VALUE_INVALID when not
 * given. Fails, naming the callable, on too many or unknown arguments. */
int bind_arguments(struct render *render, const struct expression *node, const char *callable,
                   const struct call_arguments *arguments, const char *const *names, size_t count,
                   chat_value *values);

#endif
