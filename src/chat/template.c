/* The public face of the interpreter: parsing into a template (lexer, then
 * parser, all memory in one arena) and running a render (a fresh heap and
 * root scope per call, swept clean at the end whatever happened). */
#include "chat/chat_template.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat/arena.h"
#include "chat/lexer.h"
#include "chat/parser.h"
#include "chat/render.h"

struct chat_template {
    struct arena arena;
    struct body body;
};

chat_template *chat_template_parse(const char *source, size_t length, bmoe_error *err)
{
    if (!source && length) {
        error_set(err, "line 1: no template text");
        return NULL;
    }
    chat_template *template_ = calloc(1, sizeof *template_);
    if (!template_) {
        error_set(err, "line 1: out of memory");
        return NULL;
    }
    struct token_list tokens;
    if (lex_template(source, length, &template_->arena, &tokens, err) != 0) {
        chat_template_destroy(template_);
        return NULL;
    }
    int status = parse_template(&tokens, &template_->arena, &template_->body, err);
    free(tokens.tokens);
    if (status != 0) {
        chat_template_destroy(template_);
        return NULL;
    }
    return template_;
}

void chat_template_destroy(chat_template *template_)
{
    if (!template_)
        return;
    arena_free(&template_->arena);
    free(template_);
}

chat_render_options chat_render_default_options(void)
{
    chat_render_options options;
    memset(&options, 0, sizeof options);
    options.trim_blocks = true;
    options.lstrip_blocks = true;
    return options;
}

static chat_render_options complete_options(const chat_render_options *given)
{
    chat_render_options options = given ? *given : chat_render_default_options();
    if (!options.max_output_bytes)
        options.max_output_bytes = CHAT_DEFAULT_MAX_OUTPUT_BYTES;
    if (!options.max_loop_iterations)
        options.max_loop_iterations = CHAT_DEFAULT_MAX_LOOP_ITERATIONS;
    if (!options.max_call_depth)
        options.max_call_depth = CHAT_DEFAULT_MAX_CALL_DEPTH;
    if (!options.max_work_bytes)
        options.max_work_bytes = CHAT_DEFAULT_MAX_WORK_BYTES;
    if (!options.max_stack_bytes)
        options.max_stack_bytes = CHAT_DEFAULT_MAX_STACK_BYTES;
    return options;
}

int chat_template_render(const chat_template *template_, chat_value context, const chat_render_options *options,
                         char **out, size_t *out_length, bmoe_error *err)
{
    if (out)
        *out = NULL;
    if (out_length)
        *out_length = 0;
    if (!template_ || !out)
        return error_set(err, "line 0: no template or no place for the output");
    if (context.kind != CHAT_VALUE_OBJECT)
        return error_set(err, "line 0: the render context must be an object, not %s", value_type_name(context));
    struct render render;
    memset(&render, 0, sizeof render);
    render.options = complete_options(options);
    render.err = err;
    render.context = context;
    render.stack_base = (uintptr_t)__builtin_frame_address(0);
    render.now_seconds = render.options.now_seconds ? render.options.now_seconds : (int64_t)time(NULL);
    heap_init(&render.heap, render.options.max_work_bytes);
    struct string_builder output;
    builder_init(&output, &render.heap, render.options.max_output_bytes);
    render.out = &output;
    render.root = render.scope = scope_new(&render, NULL);
    int status = render.root ? execute_body(&render, &template_->body)
                             : render_fail_status(&render, 1, VALUE_NO_MEMORY);
    chat_value text = value_invalid();
    if (status == 0)
        status = finish_string(&render, 1, &output, &text);
    else
        builder_discard(&output);
    scope_release(render.root);
    if (status == 0) {
        /* The output outlives the render: slide the bytes over the string's
         * header and hand the block over, instead of copying it. */
        struct chat_string *string = value_string(text);
        size_t length = string->length;
        memmove(string, string->bytes, length + 1);
        char *bytes = realloc(string, length + 1);
        *out = bytes ? bytes : (char *)string;
        if (out_length)
            *out_length = length;
    }
    heap_sweep(&render.heap);
    return status;
}
