/* The state of one render: options and limits, the heap, the scope chain,
 * where output goes, control flow of break/continue, and the first error.
 * Shared by the statement executor, the expression evaluator and the
 * callables; nothing here outlives chat_template_render. */
#ifndef BMOE_CHAT_RENDER_H
#define BMOE_CHAT_RENDER_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "chat/ast.h"
#include "chat/callables.h"
#include "chat/chat_template.h"
#include "chat/value.h"

enum flow {
    FLOW_NORMAL,
    FLOW_BREAK,
    FLOW_CONTINUE,
};

struct render {
    chat_render_options options;
    struct value_heap heap;
    bmoe_error *err;
    bool failed;
    struct string_builder *out;
    struct chat_scope *scope; /* innermost */
    struct chat_scope *root;  /* the template's own variables */
    chat_value context;       /* the caller's variables (read only) */
    uint64_t iterations;
    uint32_t call_depth;
    uintptr_t stack_base;
    enum flow flow;
    int64_t now_seconds;
};

/* Records "line N: message" (the first error wins) and returns -1. */
int render_fail(struct render *render, int line, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* The message for a failed value operation (memory, depth, hashing). */
int render_fail_status(struct render *render, int line, int status);
/* Work charged for each expression evaluated, statement run and loop
 * iteration, so that the budget bounds the time of a render that computes
 * without allocating too: a step takes about 15 ns, which puts it between a
 * byte copied (0.1-0.2 ns) and a byte case-mapped (7 ns), the dearest
 * charged work. */
#define RENDER_STEP_WORK 16
/* One step: charges it, and fails when the C stack used by this render
 * passes its bound. */
int render_step(struct render *render, int line);
/* Charges work that allocates nothing to the budget (render_charge_size:
 * the bytes of a value about to be walked by a filter or method: a string's
 * length, a list's or dict's elements). */
int render_charge(struct render *render, int line, uint64_t amount);
int render_charge_size(struct render *render, int line, chat_value value);
/* A search from the end, quadratic at worst: charged length * needle. */
int render_charge_reverse_search(struct render *render, int line, size_t length, size_t needle_length);
/* Counts one loop iteration against the total limit, and charges it as a step. */
int render_count_iteration(struct render *render, int line);

/* Scopes. */
struct chat_scope *scope_new(struct render *render, struct chat_scope *parent);
void scope_release(struct chat_scope *scope);
/* Takes value's reference. */
int scope_set(struct render *render, struct chat_scope *scope, const char *name, size_t length, chat_value value,
              int line);
/* A borrowed value, found in the scopes, the context or the globals. */
bool scope_lookup(struct render *render, const char *name, size_t length, chat_value *value);

/* Statements (render.c). */
int execute_body(struct render *render, const struct body *body);
/* Runs body with output into a fresh string (macros, set blocks, caller()). */
int render_body_to_string(struct render *render, const struct body *body, chat_value *result, int line);
int assign_target(struct render *render, const struct target *target, chat_value value, int line);
/* Runs a for statement over items at a depth (recursive loops call it again). */
int run_loop(struct render *render, const struct statement *statement, chat_value iterable, uint32_t depth,
             struct chat_scope *outer);

/* What an undefined value's detail says about its origin, beyond the kind
 * of object an attribute was missing on (a CHAT_VALUE_* kind; 0 for a name). */
#define UNDEFINED_PARAMETER 250   /* origin: the struct parameter not passed */
#define UNDEFINED_MESSAGE 251     /* origin: a static message */
#define UNDEFINED_CONDITIONAL 252 /* origin: the if-expression without else */

/* Expressions (evaluate.c). Results are new references. */
int evaluate(struct render *render, const struct expression *node, chat_value *result);
/* The text of an undefined value's message ("'x' is undefined"). */
void undefined_message(chat_value undefined, char *buffer, size_t size);
int fail_undefined(struct render *render, int line, chat_value undefined);

/* Operators (operators.c). */
int binary_operation(struct render *render, int line, unsigned char operator, chat_value left, chat_value right,
                     chat_value *result);
int compare_values(struct render *render, int line, unsigned char kind, chat_value left, chat_value right,
                   bool *result);
int contains(struct render *render, int line, chat_value container, chat_value item, bool *result);
/* str(a) ~ str(b) ... */
int stringify(struct render *render, int line, chat_value value, chat_value *result);

/* Attribute, item and slice access (access.c). */
int get_attribute(struct render *render, const struct expression *node, chat_value object, const char *name,
                  size_t length, chat_value *result);
int get_item(struct render *render, const struct expression *node, chat_value object, chat_value index,
             chat_value *result);
int get_slice(struct render *render, int line, chat_value object, chat_value start, chat_value stop,
              chat_value step, chat_value *result);
/* Element index of a list, tuple or range (a new reference), and their count. */
chat_value sequence_item(chat_value items, size_t index);
size_t sequence_count(chat_value items);
/* The elements of anything iterable as a list (a new reference; strings give
 * characters, dicts their keys). Fails for what Python cannot iterate. */
int iterate_to_list(struct render *render, int line, chat_value value, chat_value *list);

/* Calls (call.c). */
int call_value(struct render *render, const struct expression *node, chat_value callee,
               const struct call_arguments *arguments, chat_value *result);
int evaluate_arguments(struct render *render, const struct argument_list *list, struct call_arguments *arguments,
                       int line);
void release_arguments(struct call_arguments *arguments);
int call_macro(struct render *render, const struct expression *node, chat_value macro,
               const struct call_arguments *arguments, chat_value caller, chat_value *result);

/* A new string value on the render's heap, or a failure with its message. */
int make_string(struct render *render, int line, const char *text, size_t length, chat_value *result);
int finish_string(struct render *render, int line, struct string_builder *builder, chat_value *result);

#endif
