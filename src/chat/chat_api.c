/* The public chat API of bmoe.h: templates rendered from JSON, a model's
 * template over a conversation, its reasoning format and think control, and
 * the tokens of a rendered prompt. A bmoe_chat reads what it needs from the
 * model through the public model and tokenizer functions once, at create:
 * the template, the BOS and EOS texts, the reasoning markers the vocabulary
 * declares, whether the vocabulary adds a BOS. Owns the parsed template and
 * those texts; borrows the model. */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/text.h"
#include "chat/chat_model.h"

/* The longest token text read for bos_token / eos_token. */
#define CHAT_TOKEN_TEXT_MAX 256

struct bmoe_chat {
    const bmoe_model *model;
    chat_template *template_;
    char *source;
    size_t source_length;
    char bos[CHAT_TOKEN_TEXT_MAX], eos[CHAT_TOKEN_TEXT_MAX];
    chat_model data;
    bool adds_bos;
    enum bmoe_reasoning_format format;
    enum bmoe_think_control control;
    bool reads_effort;
    enum bmoe_tool_format tool_format;
};

static int chat_report(bmoe_error *err, bmoe_status fallback, bmoe_error *error)
{
    bmoe_status status = error_classify(err, fallback);
    if (error)
        *error = *err;
    return status;
}

const char *bmoe_think_control_name(enum bmoe_think_control control)
{
    switch (control) {
    case BMOE_THINK_CONTROL_TEMPLATE: return "template";
    case BMOE_THINK_CONTROL_PREFILL: return "prefill";
    case BMOE_THINK_CONTROL_NONE: return "none";
    }
    return "unknown";
}

bmoe_chat_params bmoe_chat_default_params(void)
{
    bmoe_chat_params params = {
        .add_generation_prompt = true,
        .enable_thinking = true,
        .reasoning_prefill = false,
        .now_seconds = 0,
        .reasoning_effort = NULL,
        .tools_json = NULL,
    };
    return params;
}

int bmoe_chat_render_template(const char *template_text, size_t template_length, const char *context_json,
                              size_t context_length, int64_t now_seconds, char **out, size_t *out_length,
                              bmoe_error *error)
{
    bmoe_error err;
    error_clear(&err);
    if (out)
        *out = NULL;
    if (out_length)
        *out_length = 0;
    if (!template_text || !context_json || !out || !out_length) {
        error_set_status(&err, BMOE_ERR_INVALID_ARGUMENT, "chat: no template, context or output");
        return chat_report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
    }
    chat_template *template_ = chat_template_parse(template_text, template_length, &err);
    if (!template_)
        return chat_report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
    chat_render_options options = chat_render_default_options();
    options.now_seconds = now_seconds;
    int status = chat_template_render_json(template_, context_json, context_length, &options, out, out_length, &err);
    chat_template_destroy(template_);
    return status == 0 ? 0 : chat_report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
}

/* The text of a token (special tokens rendered), "" for none. */
static void token_text(const bmoe_model *model, int32_t token, char *buffer)
{
    buffer[0] = '\0';
    if (token < 0)
        return;
    int32_t length = bmoe_token_to_piece(model, token, true, buffer, CHAT_TOKEN_TEXT_MAX - 1, NULL);
    buffer[length > 0 && length < CHAT_TOKEN_TEXT_MAX ? length : 0] = '\0';
}

/* Whether the vocabulary has text as one token of its own. */
static bool declares(const bmoe_model *model, const char *text)
{
    int32_t tokens[4];
    int32_t count = bmoe_tokenize(model, text, strlen(text), false, true, tokens, 4, NULL);
    if (count != 1)
        return false;
    char piece[CHAT_TOKEN_TEXT_MAX];
    token_text(model, tokens[0], piece);
    return strcmp(piece, text) == 0;
}

bmoe_chat *bmoe_chat_create(const bmoe_model *model, bmoe_error *error)
{
    bmoe_error err;
    error_clear(&err);
    const char *source = model ? bmoe_model_chat_template(model) : NULL;
    if (!source) {
        error_set_status(&err, model ? BMOE_ERR_BAD_MODEL : BMOE_ERR_INVALID_ARGUMENT,
                         "chat: the model has no chat template (tokenizer.chat_template)");
        chat_report(&err, BMOE_ERR_BAD_MODEL, error);
        return NULL;
    }
    bmoe_chat *chat = calloc(1, sizeof *chat);
    size_t source_length = strlen(source);
    if (chat)
        chat->source = malloc(source_length + 1);
    if (!chat || !chat->source) {
        free(chat);
        error_set_status(&err, BMOE_ERR_OUT_OF_MEMORY, "chat: out of memory");
        chat_report(&err, BMOE_ERR_OUT_OF_MEMORY, error);
        return NULL;
    }
    memcpy(chat->source, source, source_length + 1);
    chat->source_length = source_length;
    chat->model = model;
    chat->template_ = chat_template_parse(chat->source, source_length, &err);
    if (!chat->template_) {
        bmoe_error parse = err;
        error_set_status(&err, BMOE_ERR_BAD_MODEL, "chat: the model's chat template does not parse: %s", parse.message);
        chat_report(&err, BMOE_ERR_BAD_MODEL, error);
        bmoe_chat_free(chat);
        return NULL;
    }
    token_text(model, bmoe_token_bos(model), chat->bos);
    token_text(model, bmoe_token_eos(model), chat->eos);
    int32_t probe[4];
    chat->adds_bos = bmoe_tokenize(model, "", 0, true, false, probe, 4, NULL) >= 1 && bmoe_token_bos(model) >= 0 &&
                     probe[0] == bmoe_token_bos(model);
    chat->data = (chat_model){
        .template_ = chat->template_,
        .source = chat->source,
        .source_length = source_length,
        .bos = chat->bos,
        .eos = chat->eos,
        .declares_think = declares(model, "<think>") && declares(model, "</think>"),
        .declares_channel = declares(model, "<|channel>") && declares(model, "<channel|>"),
        .declares_harmony = declares(model, "<|start|>") && declares(model, "<|channel|>") &&
                            declares(model, "<|message|>"),
    };
    chat->format = chat_reasoning_format_decide(&chat->data);
    chat->control = chat_think_control_decide(&chat->data, 0);
    chat->reads_effort = chat_reads_reasoning_effort_decide(&chat->data, 0);
    chat->tool_format = chat_tool_format_decide(&chat->data);
    return chat;
}

void bmoe_chat_free(bmoe_chat *chat)
{
    if (!chat)
        return;
    chat_template_destroy(chat->template_);
    free(chat->source);
    free(chat);
}

enum bmoe_think_control bmoe_chat_think_control(const bmoe_chat *chat)
{
    return chat ? chat->control : BMOE_THINK_CONTROL_TEMPLATE;
}

enum bmoe_reasoning_format bmoe_chat_reasoning_format(const bmoe_chat *chat)
{
    return chat ? chat->format : BMOE_REASONING_NONE;
}

enum bmoe_tool_format bmoe_chat_tool_format(const bmoe_chat *chat)
{
    return chat ? chat->tool_format : BMOE_TOOL_FORMAT_NONE;
}

bool bmoe_chat_reads_reasoning_effort(const bmoe_chat *chat)
{
    return chat && chat->reads_effort;
}

/* Whether effort is given and not one bmoe passes on (err filled). */
static bool effort_invalid(const char *effort, bmoe_error *err)
{
    if (!effort || bmoe_reasoning_effort_valid(effort))
        return false;
    char shown[64];
    text_escape_string(effort, shown, sizeof shown);
    error_set_status(err, BMOE_ERR_INVALID_ARGUMENT, "chat: reasoning effort '%s': need low, medium or high", shown);
    return true;
}

int bmoe_chat_check_reasoning_effort(const bmoe_chat *chat, const char *effort, bmoe_error *error)
{
    bmoe_error err;
    error_clear(&err);
    if (!effort)
        return 0;
    if (effort_invalid(effort, &err))
        return chat_report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
    if (!chat || !chat->reads_effort) {
        error_set_status(&err, BMOE_ERR_INVALID_ARGUMENT,
                         "this model's chat template does not read reasoning_effort (gpt-oss's and DeepSeek V4's do): "
                         "the answer would be the same");
        return chat_report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
    }
    return 0;
}

bool bmoe_reasoning_effort_valid(const char *text)
{
    return text && (strcmp(text, "low") == 0 || strcmp(text, "medium") == 0 || strcmp(text, "high") == 0);
}

int bmoe_chat_render(const bmoe_chat *chat, const bmoe_chat_message *messages, int32_t n_messages,
                     const bmoe_chat_params *params, char **out, size_t *out_length, bmoe_error *error)
{
    bmoe_error err;
    error_clear(&err);
    if (!chat || !out || !out_length) {
        error_set_status(&err, BMOE_ERR_INVALID_ARGUMENT, "chat: no chat or no output");
        return chat_report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
    }
    bmoe_chat_params p = params ? *params : bmoe_chat_default_params();
    if (effort_invalid(p.reasoning_effort, &err))
        return chat_report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
    if (chat_conversation_render(&chat->data, messages, n_messages, &p, 0, out, out_length, &err) != 0)
        return chat_report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
    return 0;
}

int32_t bmoe_chat_tokenize(const bmoe_chat *chat, const char *text, size_t text_length, int32_t *tokens,
                           int32_t max_tokens, bmoe_error *error)
{
    bmoe_error err;
    error_clear(&err);
    if (!chat || (!text && text_length > 0) || max_tokens < 0 || (!tokens && max_tokens > 0)) {
        error_set_status(&err, BMOE_ERR_INVALID_ARGUMENT, "chat: no chat, text or token buffer");
        return chat_report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
    }
    size_t bos_length = strlen(chat->bos);
    bool add_bos = chat->adds_bos && !(bos_length > 0 && text_length >= bos_length &&
                                       memcmp(text, chat->bos, bos_length) == 0);
    int32_t offset = add_bos ? 1 : 0;
    int32_t room = max_tokens > offset ? max_tokens - offset : 0;
    int32_t count = bmoe_tokenize(chat->model, text ? text : "", text_length, false, true,
                                  room > 0 ? tokens + offset : NULL, room, error);
    if (count < 0)
        return count;
    if (add_bos && max_tokens > 0)
        tokens[0] = bmoe_token_bos(chat->model);
    if (count > INT32_MAX - offset) {
        error_set_status(&err, BMOE_ERR_INVALID_ARGUMENT, "chat: too many tokens");
        return chat_report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
    }
    return count + offset;
}
