/* libFuzzer target for the chat template interpreter: the input is a
 * template, then (after the first NUL byte) the JSON text of its context.
 * A context that does not parse is replaced by a small conversation, so
 * every template gets rendered. Parse and render must either succeed or fail
 * with one non-empty line, within small limits; a successful render must
 * give the same bytes twice (no hidden state). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat_template.h"

static const char fallback_context[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Hi\"},"
    " {\"role\": \"assistant\", \"content\": \"Hello\", \"reasoning_content\": \"think\"}],"
    " \"add_generation_prompt\": true, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\","
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": \"object\","
    " \"properties\": {\"x\": {\"type\": \"string\"}}}}}]}";

static void check_message(const bmoe_error *err)
{
    if (err->message[0] == '\0' || strchr(err->message, '\n'))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    const char *split = memchr(text, '\0', size);
    size_t template_length = split ? (size_t)(split - text) : size;
    const char *context = split ? split + 1 : fallback_context;
    size_t context_length = split ? size - template_length - 1 : strlen(fallback_context);

    bmoe_error err;
    chat_template *template_ = chat_template_parse(text, template_length, &err);
    if (!template_) {
        check_message(&err);
        return 0;
    }
    chat_value variables;
    if (chat_value_from_json(context, context_length, &variables, &err) != 0 || variables.kind != CHAT_VALUE_OBJECT) {
        chat_value_release(variables);
        if (chat_value_from_json(fallback_context, strlen(fallback_context), &variables, &err) != 0)
            abort();
    }
    chat_render_options options = chat_render_default_options();
    options.now_seconds = 1795996800;
    options.max_loop_iterations = 20000;
    options.max_output_bytes = 1 << 20;
    options.max_work_bytes = 64 << 20;
    options.max_call_depth = 40;
    options.trim_blocks = size & 1;
    options.lstrip_blocks = (size >> 1) & 1;
    char *first = NULL, *second = NULL;
    size_t first_length = 0, second_length = 0;
    if (chat_template_render(template_, variables, &options, &first, &first_length, &err) != 0) {
        check_message(&err);
        if (first)
            abort();
    } else {
        if (!first || first[first_length] != '\0')
            abort();
        if (chat_template_render(template_, variables, &options, &second, &second_length, &err) != 0 ||
            second_length != first_length || memcmp(first, second, first_length) != 0)
            abort();
    }
    free(first);
    free(second);
    chat_value_release(variables);
    chat_template_destroy(template_);
    return 0;
}
