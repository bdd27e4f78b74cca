/* Jinja2 chat templates (the chat_template of a GGUF or tokenizer_config):
 * parse once, render many times with the conversation's variables. Renders
 * byte for byte what Jinja2 3.1 renders under Hugging Face's configuration
 * (sandbox, trim_blocks, lstrip_blocks, loopcontrols, tojson without
 * ASCII escaping, raise_exception, strftime_now, {% generation %}).
 *
 * A render is bounded (loop iterations, output bytes, call depth, stack,
 * and the work it does: bytes allocated plus bytes scanned plus a charge
 * per step) and fails with one line naming the template line; a template's
 * raise_exception(message) fails the render with that message. Nothing here
 * prints or keeps global state; a parsed template is read-only, so renders
 * of one template may run concurrently. */
#ifndef BMOE_CHAT_CHAT_TEMPLATE_H
#define BMOE_CHAT_CHAT_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "chat/chat_value.h"

typedef struct chat_template chat_template;

/* Parses a template; NULL with "line N: ..." in err on a syntax error. */
chat_template *chat_template_parse(const char *source, size_t length, bmoe_error *err);
void chat_template_destroy(chat_template *template_);

typedef struct chat_render_options {
    bool trim_blocks;   /* drop the newline after a block tag */
    bool lstrip_blocks; /* drop the indentation before a block tag */
    /* strftime_now's clock, seconds since 1970 in UTC; 0: time(NULL). */
    int64_t now_seconds;
    /* Limits; 0 picks the default. */
    size_t max_output_bytes;      /* the output, or any block's, in bytes */
    uint64_t max_loop_iterations; /* across the whole render */
    uint32_t max_call_depth;      /* macros, caller() and recursive loops in progress */
    /* Bytes allocated plus bytes scanned (searches, comparisons, hashing)
     * plus RENDER_STEP_WORK per expression, statement and loop iteration,
     * summed over the render: bounds its memory (never more than this is
     * allocated) and its time at once. */
    size_t max_work_bytes;
    size_t max_stack_bytes;       /* C stack the render may use: keep it below the calling thread's */
} chat_render_options;

#define CHAT_DEFAULT_MAX_OUTPUT_BYTES ((size_t)16 << 20)
#define CHAT_DEFAULT_MAX_LOOP_ITERATIONS 5000000u
#define CHAT_DEFAULT_MAX_CALL_DEPTH 100u
/* The shipped templates do at most 36 KB of work on the reference
 * conversations, about 10 bytes per byte of a longer conversation (27 MB
 * for 3 MB of messages), and Gemma 4's, quadratic in the message count, 37 MB
 * for 900 short messages. The worst template found costs about 7 ns per
 * byte of work (case mapping a long string), so this bounds a render to
 * about half a second and 64 MiB. */
#define CHAT_DEFAULT_MAX_WORK_BYTES ((size_t)64 << 20)
#define CHAT_DEFAULT_MAX_STACK_BYTES ((size_t)1 << 20)

/* trim_blocks and lstrip_blocks on (as Hugging Face configures Jinja2),
 * the current time, default limits. */
chat_render_options chat_render_default_options(void);

/* Renders with context, an object of the template's variables (messages,
 * add_generation_prompt, bos_token, tools, ...). *out is malloc'd and
 * NUL-terminated; options may be NULL for the defaults. 0, or -1 with err.
 * The render takes and drops references to context's values, so one
 * context must not be in two renders at once (a template may). */
int chat_template_render(const chat_template *template_, chat_value context, const chat_render_options *options,
                         char **out, size_t *out_length, bmoe_error *err);

/* The same with the variables as the text of a JSON object (chat_json.c). */
int chat_template_render_json(const chat_template *template_, const char *context_json, size_t length,
                              const chat_render_options *options, char **out, size_t *out_length, bmoe_error *err);

/* The variables of a JSON object text as a value (numbers keep Python's
 * int/float distinction: 1 is an int, 1.0 a float). */
int chat_value_from_json(const char *json, size_t length, chat_value *value, bmoe_error *err);

#endif
