/* A conversation through a model's template: the messages as the
 * interpreter's values, the variables Hugging Face passes (messages,
 * add_generation_prompt, enable_thinking, bos_token, eos_token), and the
 * reasoning prefill. The prefill asks the template itself where an
 * assistant turn's answer begins: it renders a last assistant message with
 * whitespace-only reasoning and a marker for content, without a generation
 * prompt, and cuts the text where the marker starts. Whatever the family
 * writes to close reasoning (an empty <think></think>, harmony's analysis
 * message then the final channel's header) is then the prompt's end, and no
 * marker of any family is written here. */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "chat/chat_model.h"
#include "chat/value.h"

/* The content the continuation is cut at: no template writes it itself. */
static const char continuation_marker[] = "bmoe-continue-final-message-9f3c1a";

static int set_string(chat_value object, const char *key, const char *text, size_t length)
{
    return chat_value_object_set_cstring(object, key, chat_value_string(text ? text : "", length));
}

/* Each call's function.arguments that is JSON text of an object becomes
 * that object (numbers as written), as the templates that iterate the
 * arguments (Qwen3.5's) want them; OpenAI sends them as text. */
static int parse_call_arguments(chat_value calls, bmoe_error *err)
{
    if (calls.kind != CHAT_VALUE_ARRAY)
        return 0;
    const struct chat_list *list = value_list(calls);
    for (size_t i = 0; i < list->count; i++) {
        const chat_value *function =
            list->items[i].kind == CHAT_VALUE_OBJECT ? dict_find_text(list->items[i], "function", 8) : NULL;
        const chat_value *arguments =
            function && function->kind == CHAT_VALUE_OBJECT ? dict_find_text(*function, "arguments", 9) : NULL;
        if (!arguments || arguments->kind != CHAT_VALUE_STRING)
            continue;
        const struct chat_string *text = value_string(*arguments);
        chat_value parsed;
        bmoe_error ignored;
        if (chat_value_from_json(text->bytes, text->length, &parsed, &ignored) != 0)
            continue; /* not JSON: the template gets the text */
        if (parsed.kind != CHAT_VALUE_OBJECT) {
            chat_value_release(parsed);
            continue;
        }
        if (chat_value_object_set_cstring(*function, "arguments", parsed) != 0)
            return error_set_status(err, BMOE_ERR_OUT_OF_MEMORY, "chat: out of memory building the conversation");
    }
    return 0;
}

static chat_value message_value(const bmoe_chat_message *message, bmoe_error *err)
{
    chat_value object = chat_value_object();
    if (!message->role || (!message->content && message->content_length > 0) ||
        (!message->reasoning && message->reasoning_length > 0)) {
        chat_value_release(object);
        error_set_status(err, BMOE_ERR_INVALID_ARGUMENT, "chat: a message without a role or without its text");
        return (chat_value){.kind = CHAT_VALUE_INVALID};
    }
    int status = set_string(object, "role", message->role, strlen(message->role));
    if (status == 0)
        status = set_string(object, "content", message->content, message->content_length);
    if (status == 0 && message->tool_call_id)
        status = set_string(object, "tool_call_id", message->tool_call_id, strlen(message->tool_call_id));
    if (status == 0 && message->name)
        status = set_string(object, "name", message->name, strlen(message->name));
    if (status == 0 && message->tool_calls_json) {
        chat_value calls;
        if (chat_value_from_json(message->tool_calls_json, strlen(message->tool_calls_json), &calls, err) != 0) {
            chat_value_release(object);
            return (chat_value){.kind = CHAT_VALUE_INVALID};
        }
        if (parse_call_arguments(calls, err) != 0) {
            chat_value_release(calls);
            chat_value_release(object);
            return (chat_value){.kind = CHAT_VALUE_INVALID};
        }
        status = chat_value_object_set_cstring(object, "tool_calls", calls);
    }
    if (status == 0 && message->reasoning) {
        /* the names the families read: Qwen3 and Gemma 4, gpt-oss and LFM2.5 */
        status = set_string(object, "reasoning_content", message->reasoning, message->reasoning_length);
        if (status == 0)
            status = set_string(object, "thinking", message->reasoning, message->reasoning_length);
    }
    if (status != 0) {
        chat_value_release(object);
        error_set_status(err, BMOE_ERR_OUT_OF_MEMORY, "chat: out of memory building the conversation");
        return (chat_value){.kind = CHAT_VALUE_INVALID};
    }
    return object;
}

/* The template's variables. */
static int build_context(const chat_model *model, const bmoe_chat_message *messages, int32_t n_messages,
                         const bmoe_chat_params *params, chat_value *context, bmoe_error *err)
{
    chat_value variables = chat_value_object();
    chat_value list = chat_value_array();
    int status = 0;
    for (int32_t i = 0; i < n_messages && status == 0; i++) {
        chat_value message = message_value(&messages[i], err);
        if (message.kind == CHAT_VALUE_INVALID) {
            chat_value_release(list);
            chat_value_release(variables);
            return -1;
        }
        status = chat_value_array_append(list, message);
    }
    bool prefill = params->reasoning_prefill;
    if (status == 0 && prefill) {
        bmoe_chat_message last = {.role = "assistant",
                                  .content = continuation_marker,
                                  .content_length = sizeof continuation_marker - 1,
                                  .reasoning = " ",
                                  .reasoning_length = 1};
        chat_value message = message_value(&last, err);
        status = message.kind == CHAT_VALUE_INVALID ? -1 : chat_value_array_append(list, message);
    }
    if (status == 0)
        status = chat_value_object_set_cstring(variables, "messages", list);
    else
        chat_value_release(list);
    if (status == 0)
        status = chat_value_object_set_cstring(variables, "add_generation_prompt",
                                               chat_value_bool(params->add_generation_prompt && !prefill));
    if (status == 0)
        status = chat_value_object_set_cstring(variables, "enable_thinking",
                                               chat_value_bool(params->enable_thinking && !prefill));
    if (status == 0 && params->tools_json) {
        chat_value tools;
        if (chat_value_from_json(params->tools_json, strlen(params->tools_json), &tools, err) != 0) {
            chat_value_release(variables);
            return -1;
        }
        status = chat_value_object_set_cstring(variables, "tools", tools);
    }
    if (status == 0 && params->reasoning_effort)
        status = set_string(variables, "reasoning_effort", params->reasoning_effort,
                            strlen(params->reasoning_effort));
    if (status == 0)
        status = set_string(variables, "bos_token", model->bos, strlen(model->bos));
    if (status == 0)
        status = set_string(variables, "eos_token", model->eos, strlen(model->eos));
    if (status != 0) {
        chat_value_release(variables);
        return error_set_status(err, BMOE_ERR_OUT_OF_MEMORY, "chat: out of memory building the conversation");
    }
    *context = variables;
    return 0;
}

int chat_conversation_render(const chat_model *model, const bmoe_chat_message *messages, int32_t n_messages,
                             const bmoe_chat_params *params, size_t max_work_bytes, char **out, size_t *out_length,
                             bmoe_error *err)
{
    *out = NULL;
    *out_length = 0;
    if (n_messages < 0 || (!messages && n_messages > 0))
        return error_set_status(err, BMOE_ERR_INVALID_ARGUMENT, "chat: no messages");
    chat_value context;
    if (build_context(model, messages, n_messages, params, &context, err) != 0)
        return -1;
    chat_render_options options = chat_render_default_options();
    options.now_seconds = params->now_seconds;
    options.max_work_bytes = max_work_bytes;
    char *text = NULL;
    size_t length = 0;
    int status = chat_template_render(model->template_, context, &options, &text, &length, err);
    chat_value_release(context);
    if (status != 0)
        return -1;
    if (params->reasoning_prefill) {
        size_t marker_length = sizeof continuation_marker - 1;
        size_t cut = length + 1;
        for (size_t i = length >= marker_length ? length - marker_length + 1 : 0; i-- > 0;) {
            if (memcmp(text + i, continuation_marker, marker_length) == 0) {
                cut = i;
                break;
            }
        }
        if (cut > length) {
            free(text);
            return error_set_status(err, BMOE_ERR_INVALID_ARGUMENT,
                                    "chat: the template does not render a final assistant message's content, so "
                                    "the turn cannot start past its reasoning");
        }
        text[cut] = '\0';
        length = cut;
    }
    *out = text;
    *out_length = length;
    return 0;
}
