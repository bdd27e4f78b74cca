/* What the chat layer knows of a model beyond its template: the texts of
 * its BOS and EOS tokens (the template's bos_token and eos_token) and which
 * reasoning markers its vocabulary declares as tokens of their own. The
 * conversation renderer, the reasoning-format rule and the think-control
 * decision work from this record alone, so that they can be tested on any
 * template without a model (chat_api.c fills it from a loaded model). */
#ifndef BMOE_CHAT_CHAT_MODEL_H
#define BMOE_CHAT_CHAT_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bmoe.h"
#include "chat/chat_template.h"

typedef struct chat_model {
    const chat_template *template_;
    const char *source;          /* the template's text */
    size_t source_length;
    const char *bos, *eos;       /* token texts; "" when the vocabulary has none */
    bool declares_think;         /* <think> and </think> are tokens */
    bool declares_channel;       /* <|channel> and <channel|> are tokens */
    bool declares_harmony;       /* <|start|>, <|channel|> and <|message|> are tokens */
} chat_model;

/* Renders the conversation (chat_conversation.c): messages, the
 * generation prompt, enable_thinking, the token texts; with
 * reasoning_prefill, a last assistant message with whitespace-only
 * reasoning is continued where its content would begin. max_work_bytes
 * bounds the render's work (0: the default). 0, or -1 with err. */
int chat_conversation_render(const chat_model *model, const bmoe_chat_message *messages, int32_t n_messages,
                             const bmoe_chat_params *params, size_t max_work_bytes, char **out, size_t *out_length,
                             bmoe_error *err);

/* The format the model's output separates reasoning in (think_control.c):
 * harmony when the vocabulary declares its markers and the template uses
 * channels; Gemma 4's channel span, or the <think> span, when the
 * vocabulary declares the pair or the template closes such a span. */
enum bmoe_reasoning_format chat_reasoning_format_decide(const chat_model *model);

/* The think control (the telemetry contract's rule), by rendering the
 * template: thinking on and off differ: TEMPLATE. Else, when the model owns
 * its span (the vocabulary declares the opening marker and the template
 * writes it): PREFILL if the prefilled prompt differs from the plain one and
 * text follows its last closing marker, else NONE. Else PREFILL if the
 * prefilled prompt differs (a structural section), else TEMPLATE. A render
 * that fails decides TEMPLATE. */
enum bmoe_think_control chat_think_control_decide(const chat_model *model, int64_t now_seconds);
/* Whether the template renders a question differently with reasoning_effort
 * "low" and "high". */
bool chat_reads_reasoning_effort_decide(const chat_model *model, int64_t now_seconds);
/* The tool-call format the template teaches (tool_calls.c): harmony where
 * it ends a commentary message with <|call|> (gpt-oss), GLM where it writes
 * <tool_call> and <arg_key>, XML where <tool_call> and <function=, JSON
 * where only <tool_call>. */
enum bmoe_tool_format chat_tool_format_decide(const chat_model *model);

#endif
