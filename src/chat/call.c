/* Calling: evaluating arguments (with *args and **kwargs), binding them to
 * parameters, macros (their own scope, defaults, varargs, kwargs, caller),
 * recursive loop calls, and dispatch to builtins and methods. */
#include "chat/render.h"

#include "chat/parser.h"

#include <stdlib.h>
#include <string.h>

static int push_positional(struct render *render, struct call_arguments *arguments, size_t *capacity,
                           chat_value value, int line)
{
    if (arguments->positional_count == *capacity) {
        size_t grown = *capacity ? *capacity * 2 : 4;
        chat_value *items = heap_resize(&render->heap, arguments->positional, *capacity * sizeof *items,
                                        grown * sizeof *items);
        if (!items) {
            value_release(value);
            return render_fail_status(render, line, VALUE_NO_MEMORY);
        }
        arguments->positional = items;
        *capacity = grown;
    }
    arguments->positional[arguments->positional_count++] = value;
    return 0;
}

static int push_keyword(struct render *render, struct call_arguments *arguments, size_t *capacity, const char *name,
                        size_t length, chat_value value, int line)
{
    for (size_t i = 0; i < arguments->keyword_count; i++) {
        if (arguments->keywords[i].name && arguments->keywords[i].length == length &&
            memcmp(arguments->keywords[i].name, name, length) == 0) {
            value_release(value);
            return render_fail(render, line, "got multiple values for keyword argument '%.*s'", (int)length, name);
        }
    }
    if (arguments->keyword_count == *capacity) {
        size_t grown = *capacity ? *capacity * 2 : 4;
        struct keyword_argument *items = heap_resize(&render->heap, arguments->keywords, *capacity * sizeof *items,
                                                     grown * sizeof *items);
        if (!items) {
            value_release(value);
            return render_fail_status(render, line, VALUE_NO_MEMORY);
        }
        arguments->keywords = items;
        *capacity = grown;
    }
    arguments->keywords[arguments->keyword_count++] = (struct keyword_argument){name, length, value};
    return 0;
}

void release_arguments(struct call_arguments *arguments)
{
    for (size_t i = 0; i < arguments->positional_count; i++)
        value_release(arguments->positional[i]);
    for (size_t i = 0; i < arguments->keyword_count; i++)
        value_release(arguments->keywords[i].value);
    free(arguments->positional);
    free(arguments->keywords);
    memset(arguments, 0, sizeof *arguments);
}

static int spread_arguments(struct render *render, struct call_arguments *arguments, size_t *positional_capacity,
                            size_t *keyword_capacity, chat_value value, unsigned char kind, int line)
{
    if (kind == ARGUMENT_STAR) {
        chat_value items;
        if (iterate_to_list(render, line, value, &items) != 0)
            return -1;
        int status = 0;
        for (size_t i = 0; i < value_list(items)->count && status == 0; i++)
            status = push_positional(render, arguments, positional_capacity, value_retain(value_list(items)->items[i]),
                                     line);
        value_release(items);
        return status;
    }
    if (!value_is_dict_like(value))
        return render_fail(render, line, "argument after ** must be a mapping, not %s", value_type_name(value));
    const struct chat_dict *dict = value_dict(value);
    for (size_t i = 0; i < dict->count; i++) {
        chat_value key = dict->entries[i].key;
        if (key.kind != CHAT_VALUE_STRING)
            return render_fail(render, line, "keywords must be strings");
        /* The name stays valid: value holds the dict until the call ends. */
        if (push_keyword(render, arguments, keyword_capacity, value_string(key)->bytes, value_string(key)->length,
                         value_retain(dict->entries[i].value), line) != 0)
            return -1;
    }
    return 0;
}

int evaluate_arguments(struct render *render, const struct argument_list *list, struct call_arguments *arguments,
                       int line)
{
    memset(arguments, 0, sizeof *arguments);
    size_t positional_capacity = 0, keyword_capacity = 0;
    for (size_t i = 0; i < list->count; i++) {
        const struct argument *argument = &list->items[i];
        chat_value value;
        if (evaluate(render, argument->value, &value) != 0) {
            release_arguments(arguments);
            return -1;
        }
        int status;
        if (argument->kind != ARGUMENT_PLAIN) {
            status = spread_arguments(render, arguments, &positional_capacity, &keyword_capacity, value,
                                      argument->kind, line);
            if (status == 0 && argument->kind == ARGUMENT_DOUBLE_STAR) {
                /* Keep the dict alive while its keys name keyword arguments. */
                status = push_keyword(render, arguments, &keyword_capacity, "", 0, value, line);
                if (status == 0) /* a holder, not an argument: every reader skips a NULL name */
                    arguments->keywords[arguments->keyword_count - 1].name = NULL;
            } else {
                value_release(value);
            }
        } else if (argument->name) {
            status = push_keyword(render, arguments, &keyword_capacity, argument->name, argument->name_length, value,
                                  line);
        } else {
            status = push_positional(render, arguments, &positional_capacity, value, line);
        }
        if (status != 0) {
            release_arguments(arguments);
            return -1;
        }
    }
    return 0;
}

int bind_arguments(struct render *render, const struct expression *node, const char *callable,
                   const struct call_arguments *arguments, const char *const *names, size_t count, chat_value *values)
{
    int line = node->line;
    for (size_t i = 0; i < count; i++)
        values[i] = value_invalid();
    if (arguments->positional_count > count)
        return render_fail(render, line, "%s() takes at most %zu argument%s (%zu given)", callable, count,
                           count == 1 ? "" : "s", arguments->positional_count);
    for (size_t i = 0; i < arguments->positional_count; i++)
        values[i] = arguments->positional[i];
    for (size_t k = 0; k < arguments->keyword_count; k++) {
        const struct keyword_argument *keyword = &arguments->keywords[k];
        if (!keyword->name)
            continue;
        size_t i = 0;
        while (i < count && !(strlen(names[i]) == keyword->length && memcmp(names[i], keyword->name, keyword->length) == 0))
            i++;
        if (i == count)
            return render_fail(render, line, "%s() got an unexpected keyword argument '%.*s'", callable,
                               (int)keyword->length, keyword->name);
        if (values[i].kind != CHAT_VALUE_INVALID)
            return render_fail(render, line, "%s() got multiple values for argument '%s'", callable, names[i]);
        values[i] = keyword->value;
    }
    return 0;
}

static int enter_call(struct render *render, int line)
{
    if (render->call_depth >= render->options.max_call_depth)
        return render_fail(render, line, "maximum call depth of %u exceeded (macro recursion?)",
                           render->options.max_call_depth);
    render->call_depth++;
    return 0;
}

/* Binds a macro's parameters in its new scope. */
static int bind_macro(struct render *render, int line, const struct chat_macro *macro,
                      const struct call_arguments *arguments, chat_value caller, struct chat_scope *scope)
{
    const struct macro_definition *definition = macro->node;
    size_t count = definition->count;
    if (arguments->positional_count > count && !definition->uses_varargs)
        return render_fail(render, line, "macro '%.*s' takes not more than %zu argument(s)",
                           (int)definition->name_length, definition->name, count);
    bool bound[PARSE_PARAMETER_MAX] = {false};
    for (size_t i = 0; i < count && i < arguments->positional_count; i++) {
        if (scope_set(render, scope, definition->parameters[i].name, definition->parameters[i].length,
                      value_retain(arguments->positional[i]), line) != 0)
            return -1;
        bound[i] = true;
    }
    chat_value varargs = value_invalid(), kwargs = value_invalid();
    if (definition->uses_varargs) {
        size_t extra = arguments->positional_count > count ? arguments->positional_count - count : 0;
        varargs = value_list_new(&render->heap, CHAT_VALUE_TUPLE, extra);
        if (varargs.kind == CHAT_VALUE_INVALID)
            return render_fail_status(render, line, VALUE_NO_MEMORY);
        for (size_t i = count; i < arguments->positional_count; i++)
            list_append(varargs, value_retain(arguments->positional[i]));
        if (scope_set(render, scope, "varargs", 7, varargs, line) != 0)
            return -1;
    }
    if (definition->uses_kwargs) {
        kwargs = value_dict_new(&render->heap, CHAT_VALUE_OBJECT);
        if (kwargs.kind == CHAT_VALUE_INVALID || scope_set(render, scope, "kwargs", 6, kwargs, line) != 0)
            return render->failed ? -1 : render_fail_status(render, line, VALUE_NO_MEMORY);
    }
    for (size_t k = 0; k < arguments->keyword_count; k++) {
        const struct keyword_argument *keyword = &arguments->keywords[k];
        if (!keyword->name)
            continue;
        size_t i = 0;
        while (i < count && !(definition->parameters[i].length == keyword->length &&
                              memcmp(definition->parameters[i].name, keyword->name, keyword->length) == 0))
            i++;
        if (i < count) {
            if (bound[i])
                return render_fail(render, line, "macro '%.*s' got multiple values for argument '%.*s'",
                                   (int)definition->name_length, definition->name, (int)keyword->length, keyword->name);
            bound[i] = true;
        } else if (keyword->length == 6 && memcmp(keyword->name, "caller", 6) == 0) {
            /* caller passed by keyword, as the call block does. */
        } else if (!definition->uses_kwargs) {
            return render_fail(render, line, "macro '%.*s' takes no keyword argument '%.*s'",
                               (int)definition->name_length, definition->name, (int)keyword->length, keyword->name);
        } else {
            if (dict_set_text(kwargs, keyword->name, keyword->length, value_retain(keyword->value)) != 0)
                return render_fail_status(render, line, VALUE_NO_MEMORY);
            continue;
        }
        if (scope_set(render, scope, keyword->name, keyword->length, value_retain(keyword->value), line) != 0)
            return -1;
    }
    /* Defaults run in the macro's scope, so they can use earlier parameters. */
    for (size_t i = 0; i < count; i++) {
        if (bound[i])
            continue;
        const struct parameter *parameter = &definition->parameters[i];
        chat_value value;
        if (parameter->default_value) {
            if (evaluate(render, parameter->default_value, &value) != 0)
                return -1;
        } else {
            value = value_undefined(parameter, UNDEFINED_PARAMETER);
        }
        if (scope_set(render, scope, parameter->name, parameter->length, value, line) != 0)
            return -1;
    }
    if (caller.kind != CHAT_VALUE_INVALID && scope_set(render, scope, "caller", 6, value_retain(caller), line) != 0)
        return -1;
    return 0;
}

int call_macro(struct render *render, const struct expression *node, chat_value macro_value,
               const struct call_arguments *arguments, chat_value caller, chat_value *result)
{
    const struct chat_macro *macro = (const struct chat_macro *)macro_value.as.object;
    const struct macro_definition *definition = macro->node;
    int line = node->line;
    if (enter_call(render, line) != 0)
        return -1;
    struct chat_scope *scope = scope_new(render, macro->closure);
    if (!scope) {
        render->call_depth--;
        return render_fail_status(render, line, VALUE_NO_MEMORY);
    }
    struct chat_scope *saved = render->scope;
    render->scope = scope;
    int status = bind_macro(render, line, macro, arguments, caller, scope);
    if (status == 0)
        status = render_body_to_string(render, &definition->body, result, line);
    render->flow = FLOW_NORMAL;
    render->scope = saved;
    scope_release(scope);
    render->call_depth--;
    return status;
}

static int call_loop(struct render *render, const struct expression *node, chat_value loop_value,
                     const struct call_arguments *arguments, chat_value *result)
{
    const struct chat_loop *loop = (const struct chat_loop *)loop_value.as.object;
    const struct statement *statement = loop->node;
    int line = node->line;
    if (!statement->as.loop.recursive)
        return render_fail(render, line, "The loop must be recursive to be called.");
    if (arguments->positional_count != 1 || arguments->keyword_count != 0)
        return render_fail(render, line, "loop() takes exactly one argument, the items to walk");
    if (enter_call(render, line) != 0)
        return -1;
    struct string_builder builder;
    builder_init(&builder, &render->heap, render->options.max_output_bytes);
    struct string_builder *saved = render->out;
    render->out = &builder;
    int status = run_loop(render, statement, arguments->positional[0], loop->depth + 1, loop->scope);
    render->out = saved;
    render->call_depth--;
    if (status != 0) {
        builder_discard(&builder);
        return -1;
    }
    return finish_string(render, line, &builder, result);
}

int call_value(struct render *render, const struct expression *node, chat_value callee,
               const struct call_arguments *arguments, chat_value *result)
{
    switch (callee.kind) {
    case CHAT_VALUE_MACRO: {
        chat_value caller = value_invalid();
        const struct chat_macro *macro = (const struct chat_macro *)callee.as.object;
        if (macro->is_caller)
            return call_macro(render, node, callee, arguments, caller, result);
        for (size_t i = 0; i < arguments->keyword_count; i++)
            if (arguments->keywords[i].name && arguments->keywords[i].length == 6 &&
                memcmp(arguments->keywords[i].name, "caller", 6) == 0)
                caller = arguments->keywords[i].value;
        return call_macro(render, node, callee, arguments, caller, result);
    }
    case CHAT_VALUE_BUILTIN: return builtin_call(render, node, callee.detail, arguments, result);
    case CHAT_VALUE_METHOD: {
        const struct chat_method *method = (const struct chat_method *)callee.as.object;
        return method_call(render, node, method->method, method->receiver, arguments, result);
    }
    case CHAT_VALUE_LOOP: return call_loop(render, node, callee, arguments, result);
    case CHAT_VALUE_UNDEFINED: return fail_undefined(render, node->line, callee);
    default: return render_fail(render, node->line, "'%s' object is not callable", value_type_name(callee));
    }
}
