/* The statement executor: output, if, for (with Jinja2's loop variable,
 * filtered and recursive loops, for-else), set (names, tuples, namespace
 * attributes, blocks), macro and call definitions, filter blocks, with,
 * break/continue, and the scopes these create: each loop iteration, macro
 * call and with block gets its own, so assignments inside do not leak out. */
#include "chat/render.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>


int render_fail(struct render *render, int line, const char *fmt, ...)
{
    if (render->failed)
        return -1;
    render->failed = true;
    char message[BMOE_ERROR_MAX];
    va_list args;
    va_start(args, fmt);
    vsnprintf(message, sizeof message, fmt, args);
    va_end(args);
    error_set(render->err, "line %d: %s", line, message);
    return -1;
}

int render_fail_status(struct render *render, int line, int status)
{
    switch (status) {
    case VALUE_TOO_DEEP: return render_fail(render, line, "value nested too deeply (more than %d levels)", VALUE_DEPTH_MAX);
    case VALUE_UNHASHABLE: return render_fail(render, line, "unhashable type used as a dict key");
    case VALUE_INCOMPARABLE: return render_fail(render, line, "values of these types cannot be compared");
    default:
        if (render->heap.exhausted)
            return render_fail(render, line,
                               "the render exceeds its work limit of %zu bytes (memory allocated plus data scanned)",
                               render->heap.budget);
        return render_fail(render, line, "out of memory");
    }
}

int render_step(struct render *render, int line)
{
    if (render_charge(render, line, RENDER_STEP_WORK) != 0)
        return -1;
    uintptr_t here = (uintptr_t)__builtin_frame_address(0);
    uintptr_t used = render->stack_base > here ? render->stack_base - here : here - render->stack_base;
    if (used > render->options.max_stack_bytes)
        return render_fail(render, line, "template nests too deeply (more than %zu bytes of stack)",
                           render->options.max_stack_bytes);
    return 0;
}

int render_count_iteration(struct render *render, int line)
{
    if (render_charge(render, line, RENDER_STEP_WORK) != 0)
        return -1;
    if (++render->iterations > render->options.max_loop_iterations)
        return render_fail(render, line, "more than %llu loop iterations",
                           (unsigned long long)render->options.max_loop_iterations);
    return 0;
}

int render_charge(struct render *render, int line, uint64_t amount)
{
    return heap_charge(&render->heap, amount) ? 0 : render_fail_status(render, line, VALUE_NO_MEMORY);
}

int render_charge_size(struct render *render, int line, chat_value value)
{
    switch (value.kind) {
    case CHAT_VALUE_STRING: return render_charge(render, line, value_string(value)->length);
    case CHAT_VALUE_ARRAY:
    case CHAT_VALUE_TUPLE: return render_charge(render, line, value_list(value)->count * sizeof(chat_value));
    case CHAT_VALUE_OBJECT:
    case CHAT_VALUE_NAMESPACE: return render_charge(render, line, value_dict(value)->count * sizeof(struct dict_entry));
    default: return 0;
    }
}

int render_charge_reverse_search(struct render *render, int line, size_t length, size_t needle_length)
{
    uint64_t cost;
    if (__builtin_mul_overflow((uint64_t)length, (uint64_t)needle_length, &cost))
        cost = UINT64_MAX;
    return render_charge(render, line, cost);
}

int make_string(struct render *render, int line, const char *text, size_t length, chat_value *result)
{
    *result = value_string_new(&render->heap, text, length);
    return result->kind == CHAT_VALUE_INVALID ? render_fail_status(render, line, VALUE_NO_MEMORY) : 0;
}

int finish_string(struct render *render, int line, struct string_builder *builder, chat_value *result)
{
    bool over_limit = builder->over_limit;
    *result = builder_finish(builder);
    if (result->kind != CHAT_VALUE_INVALID)
        return 0;
    if (over_limit)
        return render_fail(render, line, "output longer than the limit of %zu bytes", builder->limit);
    return render_fail_status(render, line, VALUE_NO_MEMORY);
}

/* Scopes. */

struct chat_scope *scope_new(struct render *render, struct chat_scope *parent)
{
    struct chat_scope *scope = heap_allocate(&render->heap, sizeof *scope);
    if (!scope)
        return NULL;
    container_init(&scope->base, OBJECT_SCOPE, &render->heap);
    scope->parent = parent;
    if (parent)
        parent->base.base.references++;
    scope->variables = value_invalid();
    return scope;
}

void scope_release(struct chat_scope *scope)
{
    if (scope)
        object_release(&scope->base.base);
}

int scope_set(struct render *render, struct chat_scope *scope, const char *name, size_t length, chat_value value,
              int line)
{
    if (scope->variables.kind == CHAT_VALUE_INVALID) {
        scope->variables = value_dict_new(&render->heap, CHAT_VALUE_OBJECT);
        if (scope->variables.kind == CHAT_VALUE_INVALID) {
            value_release(value);
            return render_fail_status(render, line, VALUE_NO_MEMORY);
        }
    }
    int status = dict_set_text(scope->variables, name, length, value);
    return status == VALUE_OK ? 0 : render_fail_status(render, line, status);
}

bool scope_lookup(struct render *render, const char *name, size_t length, chat_value *value)
{
    for (const struct chat_scope *scope = render->scope; scope; scope = scope->parent) {
        if (scope->variables.kind == CHAT_VALUE_INVALID)
            continue;
        const chat_value *found = dict_find_text(scope->variables, name, length);
        if (found && found->kind != CHAT_VALUE_INVALID) { /* invalid: unset in a reused loop scope */
            *value = *found;
            return true;
        }
    }
    if (render->context.kind == CHAT_VALUE_OBJECT) {
        const chat_value *found = dict_find_text(render->context, name, length);
        if (found) {
            *value = *found;
            return true;
        }
    }
    int builtin = builtin_find(name, length);
    if (builtin >= 0) {
        *value = (chat_value){.kind = CHAT_VALUE_BUILTIN, .detail = (uint8_t)builtin};
        return true;
    }
    return false;
}

/* Output. */

static int write_text(struct render *render, int line, const char *text, size_t length)
{
    if (builder_append(render->out, text, length))
        return 0;
    if (render->out->over_limit)
        return render_fail(render, line, "output longer than the limit of %zu bytes", render->out->limit);
    return render_fail_status(render, line, VALUE_NO_MEMORY);
}

static int write_value(struct render *render, int line, chat_value value)
{
    if (value.kind == CHAT_VALUE_STRING)
        return write_text(render, line, value_string(value)->bytes, value_string(value)->length);
    int status = value_write_str(render->out, value);
    if (status == VALUE_OK)
        return 0;
    if (render->out->over_limit)
        return render_fail(render, line, "output longer than the limit of %zu bytes", render->out->limit);
    return render_fail_status(render, line, status);
}

int render_body_to_string(struct render *render, const struct body *body, chat_value *result, int line)
{
    struct string_builder builder;
    builder_init(&builder, &render->heap, render->options.max_output_bytes);
    struct string_builder *saved = render->out;
    render->out = &builder;
    int status = execute_body(render, body);
    render->out = saved;
    if (status != 0) {
        builder_discard(&builder);
        return -1;
    }
    return finish_string(render, line, &builder, result);
}

/* Assignment. */

static int assign_namespace_attribute(struct render *render, const struct target *target, chat_value value, int line)
{
    chat_value object;
    if (!scope_lookup(render, target->name, target->length, &object) || object.kind != CHAT_VALUE_NAMESPACE) {
        value_release(value);
        return render_fail(render, line, "cannot assign attribute on non-namespace object");
    }
    int status = dict_set_text(object, target->attribute, target->attribute_length, value);
    return status == VALUE_OK ? 0 : render_fail_status(render, line, status);
}

int assign_target(struct render *render, const struct target *target, chat_value value, int line)
{
    if (target->kind == TARGET_NAME)
        return scope_set(render, render->scope, target->name, target->length, value, line);
    if (target->kind == TARGET_NAMESPACE_ATTRIBUTE)
        return assign_namespace_attribute(render, target, value, line);
    chat_value items;
    int status = iterate_to_list(render, line, value, &items);
    value_release(value);
    if (status != 0)
        return -1;
    size_t count = value_list(items)->count;
    if (count != target->count) {
        value_release(items);
        if (count < target->count)
            return render_fail(render, line, "not enough values to unpack (expected %zu, got %zu)", target->count,
                               count);
        return render_fail(render, line, "too many values to unpack (expected %zu)", target->count);
    }
    for (size_t i = 0; i < count; i++) {
        if (assign_target(render, &target->items[i], value_retain(value_list(items)->items[i]), line) != 0) {
            value_release(items);
            return -1;
        }
    }
    value_release(items);
    return 0;
}

/* Loops. */

/* Keeps the items whose loop condition holds ("for x in xs if cond"). */
static int filter_items(struct render *render, const struct statement *statement, struct chat_scope *outer,
                        chat_value *items)
{
    size_t count = sequence_count(*items);
    chat_value kept = value_list_new(&render->heap, CHAT_VALUE_ARRAY, 0);
    if (kept.kind == CHAT_VALUE_INVALID)
        return render_fail_status(render, statement->line, VALUE_NO_MEMORY);
    struct chat_scope *saved = render->scope;
    int status = 0;
    for (size_t i = 0; i < count && status == 0; i++) {
        status = render_count_iteration(render, statement->line);
        struct chat_scope *scope = status == 0 ? scope_new(render, outer) : NULL;
        if (status == 0 && !scope)
            status = render_fail_status(render, statement->line, VALUE_NO_MEMORY);
        if (status != 0)
            break;
        render->scope = scope;
        chat_value item = sequence_item(*items, i), condition;
        status = assign_target(render, &statement->as.loop.target, value_retain(item), statement->line);
        if (status == 0)
            status = evaluate(render, statement->as.loop.condition, &condition);
        render->scope = saved;
        scope_release(scope);
        if (status == 0) {
            bool keep = value_truthy(condition);
            value_release(condition);
            if (keep && list_append(kept, value_retain(item)) != 0)
                status = render_fail_status(render, statement->line, VALUE_NO_MEMORY);
        }
        value_release(item);
    }
    render->scope = saved;
    value_release(*items);
    *items = kept;
    return status;
}

static struct chat_loop *loop_new(struct render *render, const struct statement *statement, chat_value items,
                                  uint32_t depth, struct chat_scope *outer)
{
    struct chat_loop *loop = heap_allocate(&render->heap, sizeof *loop);
    if (!loop)
        return NULL;
    container_init(&loop->base, OBJECT_LOOP, &render->heap);
    loop->node = statement;
    loop->items = value_retain(items);
    loop->length = sequence_count(items);
    loop->index = 0;
    loop->depth = depth;
    loop->changed_seen = false;
    loop->changed_last = value_invalid();
    loop->scope = outer;
    outer->base.base.references++;
    return loop;
}

/* Each iteration starts with no variables of its own. A scope nothing kept
 * (no macro defined in the body holds it) is emptied and reused: its names
 * stay, unset, so the next iteration assigns without allocating. */
static struct chat_scope *iteration_scope(struct render *render, struct chat_scope *previous, struct chat_scope *outer)
{
    if (previous && previous->base.base.references == 1) {
        if (previous->variables.kind != CHAT_VALUE_INVALID) {
            struct chat_dict *variables = value_dict(previous->variables);
            for (size_t i = 0; i < variables->count; i++) {
                value_release(variables->entries[i].value);
                variables->entries[i].value = value_invalid();
            }
        }
        return previous;
    }
    scope_release(previous);
    return scope_new(render, outer);
}

static int run_iteration(struct render *render, const struct statement *statement, struct chat_scope *scope,
                         chat_value items, chat_value loop_value, size_t index)
{
    int line = statement->line;
    struct chat_scope *saved = render->scope;
    render->scope = scope;
    int status = assign_target(render, &statement->as.loop.target, sequence_item(items, index), line);
    if (status == 0)
        status = scope_set(render, scope, "loop", 4, value_retain(loop_value), line);
    if (status == 0)
        status = execute_body(render, &statement->as.loop.body);
    render->scope = saved;
    return status;
}

int run_loop(struct render *render, const struct statement *statement, chat_value iterable, uint32_t depth,
             struct chat_scope *outer)
{
    int line = statement->line;
    chat_value items;
    if (iterable.kind == CHAT_VALUE_RANGE || value_is_list_like(iterable))
        items = value_retain(iterable);
    else if (iterate_to_list(render, line, iterable, &items) != 0)
        return -1;
    if (statement->as.loop.condition && filter_items(render, statement, outer, &items) != 0) {
        value_release(items);
        return -1;
    }
    struct chat_loop *loop = loop_new(render, statement, items, depth, outer);
    if (!loop) {
        value_release(items);
        return render_fail_status(render, line, VALUE_NO_MEMORY);
    }
    chat_value loop_value = value_object(CHAT_VALUE_LOOP, loop);
    size_t count = loop->length;
    struct chat_scope *scope = NULL;
    int status = 0;
    for (size_t i = 0; i < count; i++) {
        if ((status = render_count_iteration(render, line)) != 0)
            break;
        loop->index = i;
        if (!(scope = iteration_scope(render, scope, outer))) {
            status = render_fail_status(render, line, VALUE_NO_MEMORY);
            break;
        }
        if ((status = run_iteration(render, statement, scope, items, loop_value, i)) != 0)
            break;
        enum flow flow = render->flow;
        render->flow = FLOW_NORMAL;
        if (flow == FLOW_BREAK)
            break;
    }
    scope_release(scope);
    value_release(loop_value);
    value_release(items);
    if (status == 0 && count == 0 && statement->as.loop.otherwise.count) {
        struct chat_scope *scope = scope_new(render, outer);
        if (!scope)
            return render_fail_status(render, line, VALUE_NO_MEMORY);
        struct chat_scope *saved = render->scope;
        render->scope = scope;
        status = execute_body(render, &statement->as.loop.otherwise);
        render->scope = saved;
        scope_release(scope);
    }
    return status;
}

/* The other statements. */

static int execute_data(struct render *render, const struct statement *statement)
{
    size_t start = 0, end = statement->as.data.length;
    if (render->options.lstrip_blocks)
        end = statement->as.data.lstrip_length;
    if (render->options.trim_blocks && statement->as.data.trim_newline)
        start = 1;
    return end > start ? write_text(render, statement->line, statement->as.data.text + start, end - start) : 0;
}

static int execute_output(struct render *render, const struct statement *statement)
{
    chat_value value;
    if (evaluate(render, statement->as.output, &value) != 0)
        return -1;
    int status = write_value(render, statement->line, value);
    value_release(value);
    return status;
}

static int execute_if(struct render *render, const struct statement *statement)
{
    for (size_t i = 0; i < statement->as.branch.count; i++) {
        chat_value condition;
        if (evaluate(render, statement->as.branch.conditions[i], &condition) != 0)
            return -1;
        bool holds = value_truthy(condition);
        value_release(condition);
        if (holds)
            return execute_body(render, &statement->as.branch.bodies[i]);
    }
    return execute_body(render, &statement->as.branch.otherwise);
}

static int execute_for(struct render *render, const struct statement *statement)
{
    chat_value iterable;
    if (evaluate(render, statement->as.loop.iterable, &iterable) != 0)
        return -1;
    int status = run_loop(render, statement, iterable, 1, render->scope);
    value_release(iterable);
    return status;
}

static int execute_set(struct render *render, const struct statement *statement)
{
    chat_value value;
    if (evaluate(render, statement->as.assign.value, &value) != 0)
        return -1;
    return assign_target(render, &statement->as.assign.target, value, statement->line);
}

/* Applies a filter chain parsed with a NULL innermost operand to text. */
static int apply_block_filter(struct render *render, const struct expression *filter, chat_value text,
                              chat_value *result);

/* Renders body in a scope of its own (Jinja2 gives set and filter blocks one). */
static int render_block(struct render *render, const struct body *body, int line, chat_value *text)
{
    struct chat_scope *scope = scope_new(render, render->scope);
    if (!scope)
        return render_fail_status(render, line, VALUE_NO_MEMORY);
    struct chat_scope *saved = render->scope;
    render->scope = scope;
    int status = render_body_to_string(render, body, text, line);
    render->scope = saved;
    scope_release(scope);
    return status;
}

static int execute_set_block(struct render *render, const struct statement *statement)
{
    chat_value text;
    if (render_block(render, &statement->as.assign_block.body, statement->line, &text) != 0)
        return -1;
    if (render->flow != FLOW_NORMAL) {
        value_release(text);
        return 0;
    }
    if (statement->as.assign_block.filter) {
        chat_value filtered;
        int status = apply_block_filter(render, statement->as.assign_block.filter, text, &filtered);
        value_release(text);
        if (status != 0)
            return -1;
        text = filtered;
    }
    return assign_target(render, &statement->as.assign_block.target, text, statement->line);
}

static int execute_filter_block(struct render *render, const struct statement *statement)
{
    chat_value text, filtered;
    if (render_block(render, &statement->as.filter_block.body, statement->line, &text) != 0)
        return -1;
    if (render->flow != FLOW_NORMAL) {
        value_release(text);
        return 0;
    }
    int status = apply_block_filter(render, statement->as.filter_block.filter, text, &filtered);
    value_release(text);
    if (status != 0)
        return -1;
    status = write_value(render, statement->line, filtered);
    value_release(filtered);
    return status;
}

static int apply_block_filter(struct render *render, const struct expression *filter, chat_value text,
                              chat_value *result)
{
    chat_value input;
    if (filter->as.filter.operand) {
        if (apply_block_filter(render, filter->as.filter.operand, text, &input) != 0)
            return -1;
    } else {
        input = value_retain(text);
    }
    int status;
    if (!filter->as.filter.filter) {
        status = render_fail(render, filter->line, "No filter named '%.*s'.", (int)filter->as.filter.length,
                             filter->as.filter.name);
    } else {
        struct call_arguments arguments;
        status = render_charge_size(render, filter->line, input);
        if (status == 0)
            status = evaluate_arguments(render, &filter->as.filter.arguments, &arguments, filter->line);
        if (status == 0) {
            status = filter->as.filter.filter->function(render, filter, input, &arguments, result);
            release_arguments(&arguments);
        }
    }
    value_release(input);
    return status;
}

static struct chat_macro *macro_new(struct render *render, const struct macro_definition *definition, bool is_caller)
{
    struct chat_macro *macro = heap_allocate(&render->heap, sizeof *macro);
    if (!macro)
        return NULL;
    container_init(&macro->base, OBJECT_MACRO, &render->heap);
    macro->node = definition;
    macro->name = definition->name;
    macro->name_length = definition->name_length;
    macro->closure = render->scope;
    render->scope->base.base.references++;
    macro->is_caller = is_caller;
    return macro;
}

static int execute_macro(struct render *render, const struct statement *statement)
{
    struct chat_macro *macro = macro_new(render, &statement->as.macro, false);
    if (!macro)
        return render_fail_status(render, statement->line, VALUE_NO_MEMORY);
    return scope_set(render, render->scope, statement->as.macro.name, statement->as.macro.name_length,
                     value_object(CHAT_VALUE_MACRO, macro), statement->line);
}

static int execute_call_block(struct render *render, const struct statement *statement)
{
    const struct expression *call = statement->as.call_block.call;
    struct chat_macro *caller = macro_new(render, &statement->as.call_block.caller, true);
    if (!caller)
        return render_fail_status(render, statement->line, VALUE_NO_MEMORY);
    chat_value caller_value = value_object(CHAT_VALUE_MACRO, caller), callee, result;
    int status = evaluate(render, call->as.call.callee, &callee);
    if (status == 0) {
        struct call_arguments arguments;
        status = evaluate_arguments(render, &call->as.call.arguments, &arguments, call->line);
        if (status == 0) {
            if (callee.kind == CHAT_VALUE_MACRO)
                status = call_macro(render, call, callee, &arguments, caller_value, &result);
            else
                status = render_fail(render, call->line, "a call block needs a macro to call, not '%s'",
                                     value_type_name(callee));
            release_arguments(&arguments);
            if (status == 0) {
                status = write_value(render, statement->line, result);
                value_release(result);
            }
        }
        value_release(callee);
    }
    value_release(caller_value);
    return status;
}

static int execute_with(struct render *render, const struct statement *statement)
{
    size_t count = statement->as.with.count;
    struct chat_scope *scope = scope_new(render, render->scope);
    if (!scope)
        return render_fail_status(render, statement->line, VALUE_NO_MEMORY);
    struct chat_scope *saved = render->scope;
    int status = 0;
    /* Values see the outer scope, as in Jinja2. */
    for (size_t i = 0; i < count && status == 0; i++) {
        chat_value value;
        render->scope = saved;
        status = evaluate(render, statement->as.with.values[i], &value);
        render->scope = scope;
        if (status == 0)
            status = assign_target(render, &statement->as.with.targets[i], value, statement->line);
    }
    render->scope = scope;
    if (status == 0)
        status = execute_body(render, &statement->as.with.body);
    render->scope = saved;
    scope_release(scope);
    return status;
}

static int execute_statement(struct render *render, const struct statement *statement)
{
    if (render_step(render, statement->line) != 0)
        return -1;
    switch (statement->kind) {
    case STATEMENT_DATA: return execute_data(render, statement);
    case STATEMENT_OUTPUT: return execute_output(render, statement);
    case STATEMENT_IF: return execute_if(render, statement);
    case STATEMENT_FOR: return execute_for(render, statement);
    case STATEMENT_SET: return execute_set(render, statement);
    case STATEMENT_SET_BLOCK: return execute_set_block(render, statement);
    case STATEMENT_MACRO: return execute_macro(render, statement);
    case STATEMENT_CALL_BLOCK: return execute_call_block(render, statement);
    case STATEMENT_FILTER_BLOCK: return execute_filter_block(render, statement);
    case STATEMENT_WITH: return execute_with(render, statement);
    case STATEMENT_BREAK: render->flow = FLOW_BREAK; return 0;
    case STATEMENT_CONTINUE: render->flow = FLOW_CONTINUE; return 0;
    case STATEMENT_GENERATION: return execute_body(render, &statement->as.generation);
    default: return render_fail(render, statement->line, "internal error: unknown statement");
    }
}

int execute_body(struct render *render, const struct body *body)
{
    for (size_t i = 0; i < body->count; i++) {
        if (execute_statement(render, body->items[i]) != 0)
            return -1;
        if (render->flow != FLOW_NORMAL)
            return 0;
    }
    return 0;
}
