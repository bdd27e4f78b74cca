/* Which reasoning format a model's output uses, how a request to answer
 * without reasoning can be honoured and whether a reasoning effort changes
 * anything (chat_model.h), from the model's own data: the markers its
 * vocabulary declares as tokens and what its template renders. No model
 * names. */
#include <stdlib.h>
#include <string.h>

#include "chat/chat_model.h"

static bool source_has(const chat_model *model, const char *text)
{
    size_t length = strlen(text);
    for (size_t i = 0; i + length <= model->source_length; i++)
        if (model->source[i] == text[0] && memcmp(model->source + i, text, length) == 0)
            return true;
    return false;
}

enum bmoe_reasoning_format chat_reasoning_format_decide(const chat_model *model)
{
    if (model->declares_harmony && source_has(model, "<|channel|>"))
        return BMOE_REASONING_HARMONY;
    if (model->declares_channel || (source_has(model, "<|channel>") && source_has(model, "<channel|>")))
        return BMOE_REASONING_CHANNEL;
    if (model->declares_think || source_has(model, "</think>"))
        return BMOE_REASONING_THINK;
    return BMOE_REASONING_NONE;
}

/* The decision renders one short question, for which every shipped
 * template does less than 36 KB of work (DeepSeek V3.2's the most): a
 * template that needs over a hundred times that is not deciding anything, and
 * a model load pays this three times. */
#define THINK_PROBE_MAX_WORK_BYTES ((size_t)4 << 20)

/* The single-turn conversation the decisions render. */
static int render_with(const chat_model *model, const bmoe_chat_params *params, char **out, size_t *length)
{
    static const bmoe_chat_message question = {.role = "user", .content = "What is 17 times 23?", .content_length = 20};
    bmoe_error err;
    return chat_conversation_render(model, &question, 1, params, THINK_PROBE_MAX_WORK_BYTES, out, length, &err);
}

static int render(const chat_model *model, bool enable_thinking, bool prefill, int64_t now_seconds, char **out,
                  size_t *length)
{
    bmoe_chat_params params = bmoe_chat_default_params();
    params.enable_thinking = enable_thinking;
    params.reasoning_prefill = prefill;
    params.now_seconds = now_seconds;
    return render_with(model, &params, out, length);
}

static bool same_text(const char *a, size_t a_length, const char *b, size_t b_length)
{
    return a_length == b_length && memcmp(a, b, a_length) == 0;
}

/* Whether text continues past the last closing marker with more than
 * whitespace (the format goes on into another section). */
static bool text_after_last(const char *text, size_t length, const char *marker)
{
    size_t marker_length = strlen(marker);
    size_t after = 0;
    bool found = false;
    for (size_t i = 0; i + marker_length <= length; i++) {
        if (memcmp(text + i, marker, marker_length) == 0) {
            after = i + marker_length;
            found = true;
        }
    }
    if (!found)
        return false;
    for (size_t i = after; i < length; i++)
        if (text[i] != ' ' && text[i] != '\n' && text[i] != '\t' && text[i] != '\r')
            return true;
    return false;
}

enum bmoe_think_control chat_think_control_decide(const chat_model *model, int64_t now_seconds)
{
    char *on = NULL, *off = NULL, *prefilled = NULL;
    size_t on_length = 0, off_length = 0, prefilled_length = 0;
    enum bmoe_think_control control = BMOE_THINK_CONTROL_TEMPLATE;
    if (render(model, true, false, now_seconds, &on, &on_length) != 0 ||
        render(model, false, false, now_seconds, &off, &off_length) != 0)
        goto done;
    if (!same_text(on, on_length, off, off_length))
        goto done; /* the template reads the flag */
    if (render(model, false, true, now_seconds, &prefilled, &prefilled_length) != 0)
        goto done;
    bool prefill_differs = !same_text(prefilled, prefilled_length, off, off_length);
    /* the span markers the vocabulary declares, if any */
    const char *open = NULL, *close = NULL;
    enum bmoe_reasoning_format format = chat_reasoning_format_decide(model);
    if (format == BMOE_REASONING_THINK && model->declares_think) {
        open = "<think>";
        close = "</think>";
    } else if (format == BMOE_REASONING_CHANNEL && model->declares_channel) {
        open = "<|channel>";
        close = "<channel|>";
    }
    bool owns_span = open && source_has(model, open);
    if (owns_span)
        control = prefill_differs && text_after_last(prefilled, prefilled_length, close) ? BMOE_THINK_CONTROL_PREFILL
                                                                                        : BMOE_THINK_CONTROL_NONE;
    else if (prefill_differs && !open)
        control = BMOE_THINK_CONTROL_PREFILL;
done:
    free(on);
    free(off);
    free(prefilled);
    return control;
}

bool chat_reads_reasoning_effort_decide(const chat_model *model, int64_t now_seconds)
{
    char *low = NULL, *high = NULL;
    size_t low_length = 0, high_length = 0;
    bmoe_chat_params params = bmoe_chat_default_params();
    params.now_seconds = now_seconds;
    params.reasoning_effort = "low";
    bool reads = render_with(model, &params, &low, &low_length) == 0;
    params.reasoning_effort = "high";
    reads = reads && render_with(model, &params, &high, &high_length) == 0 &&
            !same_text(low, low_length, high, high_length);
    free(low);
    free(high);
    return reads;
}
