/* The streaming split of generated text into reasoning and answer
 * (bmoe.h's bmoe_reasoning). Text is appended to a pending buffer and
 * classified from its start: a marker moves the state, text that cannot be
 * (the start of) a marker goes to the reasoning or the answer, and the tail
 * that may still turn into a marker, or whitespace a marker would trim,
 * stays pending until the next feed or the finish.
 *
 * Span formats (<think>...</think>, Gemma 4's <|channel>name\n...<channel|>):
 * whitespace before an opening marker and around the span's text is
 * dropped, as is the answer's leading whitespace after the span; an output
 * with no marker at all is the answer, byte for byte. A closing marker in an
 * answer that no span preceded (the prompt opened the span, or the model
 * reasoned without opening one) makes everything before it reasoning: the
 * delta of that call is a reset.
 * Harmony (gpt-oss): messages are <|start|>header<|message|>text<|end|>;
 * the header's <|channel|> names the channel: analysis is reasoning, the
 * others the answer; headers are dropped. A message whose header addresses
 * a function (to=functions.NAME) is a tool call: it goes to the answer, on
 * any channel, in the shape harmony_call.h gives it, for the tool-call
 * parser. Text that is no header after 256 bytes, or when the output ends,
 * is shown as answer.
 * Owns its buffers; knows nothing of models. */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/text_buffer.h"
#include "bmoe.h"
#include "chat/harmony_call.h"

/* Longest generated header text before it is taken as not a header. */
#define REASONING_MAX_HEADER 256
/* Longest channel name line after a named opening marker. */
#define REASONING_MAX_NAME 64

enum span_state {
    SPAN_START,        /* nothing shown yet: leading whitespace held, a span may open */
    SPAN_NAME,         /* after a named opening marker, up to its newline */
    SPAN_REASON_START, /* inside the span, before its first non-whitespace */
    SPAN_REASON,       /* inside the span */
    SPAN_AFTER,        /* the span closed: the answer's leading whitespace is dropped */
    SPAN_ANSWER,       /* answer that no span preceded (a closing marker reclassifies it) */
    SPAN_FINAL,        /* answer after a span, verbatim */
};

enum harmony_state { HARMONY_HEADER, HARMONY_CONTENT, HARMONY_OUTSIDE };

enum harmony_marker { H_START, H_CHANNEL, H_MESSAGE, H_END, H_RETURN, H_CALL, H_CONSTRAIN, H_COUNT };
static const char *const harmony_markers[H_COUNT] = {
    "<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|return|>", "<|call|>", "<|constrain|>",
};

static const char think_close[] = "</think>", channel_close[] = "<channel|>";

bool bmoe_reasoning_answer_start(enum bmoe_reasoning_format format, const char **after, const char **spacing)
{
    switch (format) {
    case BMOE_REASONING_THINK: /* the templates write the answer two newlines after the span */
        *after = think_close;
        *spacing = "\n\n";
        return true;
    case BMOE_REASONING_CHANNEL:
        *after = channel_close;
        *spacing = "";
        return true;
    case BMOE_REASONING_HARMONY:
        *after = "<|channel|>final<|message|>";
        *spacing = "";
        return true;
    default: return false;
    }
}

struct bmoe_reasoning {
    enum bmoe_reasoning_format format;
    const char *open, *close; /* span markers */
    bool named;               /* the opening marker is followed by a channel name line */
    int state;
    bool silent;              /* priming on the prompt: nothing is shown */
    bool failed;              /* out of memory */
    bool reset;
    text_buffer pending;
    text_buffer reasoning, answer;
    text_buffer delta_reasoning, delta_answer;
    /* harmony */
    text_buffer header;        /* the current header, the prompt's part included */
    size_t header_prompt_bytes; /* of which came from the prompt */
    bool header_channel;       /* the header named a channel */
    bool channel_reasoning;    /* the current message is the analysis channel */
    bool channel_call;         /* the current message is a call: its shape is open in the answer */
};

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static size_t leading_space(const char *text, size_t length)
{
    size_t count = 0;
    while (count < length && is_space(text[count]))
        count++;
    return count;
}

static size_t without_trailing_space(const char *text, size_t length)
{
    while (length > 0 && is_space(text[length - 1]))
        length--;
    return length;
}

/* The first occurrence of marker in text, or length when there is none. */
static size_t find(const char *text, size_t length, const char *marker)
{
    size_t marker_length = strlen(marker);
    for (size_t i = 0; i + marker_length <= length; i++)
        if (text[i] == marker[0] && memcmp(text + i, marker, marker_length) == 0)
            return i;
    return length;
}

/* The last occurrence of marker in text, or -1. */
static long find_last(const char *text, size_t length, const char *marker)
{
    size_t marker_length = strlen(marker);
    if (!text || length < marker_length)
        return -1;
    for (size_t i = length - marker_length + 1; i-- > 0;)
        if (memcmp(text + i, marker, marker_length) == 0)
            return (long)i;
    return -1;
}

/* The longest proper suffix of text that begins marker (the part of a
 * marker that may be arriving). */
static size_t partial_marker(const char *text, size_t length, const char *marker)
{
    return text_partial_suffix(text, length, marker, strlen(marker));
}

/* Whether text (all of it) is the beginning of marker. */
static bool begins_marker(const char *text, size_t length, const char *marker)
{
    size_t marker_length = strlen(marker);
    return length < marker_length && memcmp(text, marker, length) == 0;
}

static void show_reasoning(bmoe_reasoning *r, const char *bytes, size_t length)
{
    if (r->silent || length == 0)
        return;
    if (!text_buffer_append(&r->reasoning, bytes, length) || !text_buffer_append(&r->delta_reasoning, bytes, length))
        r->failed = true;
}

static void show_answer(bmoe_reasoning *r, const char *bytes, size_t length)
{
    if (r->silent || length == 0)
        return;
    if (!text_buffer_append(&r->answer, bytes, length) || !text_buffer_append(&r->delta_answer, bytes, length))
        r->failed = true;
}

/* The answer so far and text were reasoning: both become the reasoning
 * (trimmed) and the answer starts again. */
static void reclassify(bmoe_reasoning *r, const char *text, size_t length)
{
    if (r->silent)
        return;
    text_buffer joined = {0};
    if (!text_buffer_append(&joined, r->reasoning.data ? r->reasoning.data : "", r->reasoning.length) ||
        !text_buffer_append(&joined, r->answer.data ? r->answer.data : "", r->answer.length) ||
        !text_buffer_append(&joined, text, length)) {
        text_buffer_free(&joined);
        r->failed = true;
        return;
    }
    size_t start = leading_space(joined.data, joined.length);
    size_t end = without_trailing_space(joined.data, joined.length);
    text_buffer_clear(&r->reasoning);
    text_buffer_clear(&r->answer);
    if (end > start && !text_buffer_append(&r->reasoning, joined.data + start, end - start))
        r->failed = true;
    text_buffer_free(&joined);
    r->reset = true;
}

/* Classifies the pending text of a span format as far as it can be. */
static void process_span(bmoe_reasoning *r, bool final)
{
    size_t open_length = strlen(r->open), close_length = strlen(r->close);
    while (r->pending.length > 0 && !r->failed) {
        const char *p = r->pending.data;
        size_t n = r->pending.length;
        switch (r->state) {
        case SPAN_START: {
            size_t space = leading_space(p, n);
            if (space == n) {
                if (!final)
                    return;
                show_answer(r, p, n);
                text_buffer_clear(&r->pending);
                return;
            }
            if (n - space >= open_length && memcmp(p + space, r->open, open_length) == 0) {
                text_buffer_consume(&r->pending, space + open_length);
                r->state = r->named ? SPAN_NAME : SPAN_REASON_START;
                continue;
            }
            if (n - space >= close_length && memcmp(p + space, r->close, close_length) == 0) {
                text_buffer_consume(&r->pending, space + close_length);
                r->state = SPAN_AFTER;
                continue;
            }
            if (!final && (begins_marker(p + space, n - space, r->open) || begins_marker(p + space, n - space, r->close)))
                return;
            r->state = SPAN_ANSWER;
            continue;
        }
        case SPAN_NAME: {
            size_t newline = find(p, n, "\n");
            if (newline < n) {
                text_buffer_consume(&r->pending, newline + 1);
                r->state = SPAN_REASON_START;
                continue;
            }
            if (n <= REASONING_MAX_NAME && !final)
                return;
            r->state = SPAN_REASON_START; /* no name line: it is the reasoning */
            continue;
        }
        case SPAN_REASON_START: {
            size_t space = leading_space(p, n);
            text_buffer_consume(&r->pending, space);
            if (space < n)
                r->state = SPAN_REASON;
            continue;
        }
        case SPAN_REASON: {
            size_t close = find(p, n, r->close);
            if (close < n) {
                show_reasoning(r, p, without_trailing_space(p, close));
                text_buffer_consume(&r->pending, close + close_length);
                r->state = SPAN_AFTER;
                continue;
            }
            size_t keep = final ? 0 : partial_marker(p, n, r->close);
            size_t shown = without_trailing_space(p, n - keep);
            show_reasoning(r, p, shown);
            text_buffer_consume(&r->pending, final ? n : shown);
            return;
        }
        case SPAN_AFTER: {
            size_t space = leading_space(p, n);
            text_buffer_consume(&r->pending, space);
            if (space < n)
                r->state = SPAN_FINAL;
            continue;
        }
        case SPAN_ANSWER: {
            size_t close = find(p, n, r->close);
            if (close < n) {
                reclassify(r, p, close);
                text_buffer_consume(&r->pending, close + close_length);
                r->state = SPAN_AFTER;
                continue;
            }
            size_t keep = final ? 0 : partial_marker(p, n, r->close);
            show_answer(r, p, n - keep);
            text_buffer_consume(&r->pending, n - keep);
            return;
        }
        default: /* SPAN_FINAL */
            show_answer(r, p, n);
            text_buffer_clear(&r->pending);
            return;
        }
    }
}

/* The earliest harmony marker in text: its index (length when none) and which. */
static size_t harmony_find(const char *text, size_t length, int *which)
{
    size_t best = length;
    *which = -1;
    for (int m = 0; m < H_COUNT; m++) {
        size_t at = find(text, length, harmony_markers[m]);
        if (at < best) {
            best = at;
            *which = m;
        }
    }
    return best;
}

/* The longest tail of text that may be a harmony marker arriving. */
static size_t harmony_partial(const char *text, size_t length)
{
    size_t keep = 0;
    for (int m = 0; m < H_COUNT; m++) {
        size_t k = partial_marker(text, length, harmony_markers[m]);
        if (k > keep)
            keep = k;
    }
    return keep;
}

static void harmony_show(bmoe_reasoning *r, const char *bytes, size_t length)
{
    if (r->channel_reasoning)
        show_reasoning(r, bytes, length);
    else
        show_answer(r, bytes, length);
}

static void header_append(bmoe_reasoning *r, const char *bytes, size_t length)
{
    if (!text_buffer_append(&r->header, bytes, length))
        r->failed = true;
}

static void header_begin(bmoe_reasoning *r)
{
    text_buffer_clear(&r->header);
    r->header_prompt_bytes = 0;
    r->header_channel = false;
    r->state = HARMONY_HEADER;
}

/* The header's generated text was not a header after all: it is answer. */
static void header_release(bmoe_reasoning *r)
{
    if (r->header.length > r->header_prompt_bytes)
        show_answer(r, r->header.data + r->header_prompt_bytes, r->header.length - r->header_prompt_bytes);
    text_buffer_clear(&r->header);
    r->header_prompt_bytes = 0;
}

/* The recipient the header names (to=RECIPIENT, after the role or after
 * the channel) and its length; NULL when none. */
static const char *header_recipient(const bmoe_reasoning *r, size_t *length)
{
    const char *header = r->header.data;
    size_t n = r->header.length;
    for (size_t i = 0; i + 3 <= n; i++) {
        if (memcmp(header + i, "to=", 3) != 0 || (i > 0 && !is_space(header[i - 1]) && header[i - 1] != '>'))
            continue;
        size_t end = i + 3;
        while (end < n && !is_space(header[end]) && header[end] != '<')
            end++;
        *length = end - (i + 3);
        return header + i + 3;
    }
    return NULL;
}

/* At the header's end: a message to a function opens a call's shape in
 * the answer (the name, whatever it is: the tool-call parser judges it).
 * The prompt's own message is never one: its header was not shown. */
static void call_begin(bmoe_reasoning *r)
{
    static const char functions[] = HARMONY_FUNCTIONS;
    size_t length = 0;
    const char *recipient = header_recipient(r, &length);
    r->channel_call = !r->silent && recipient && length >= sizeof functions - 1 &&
                      memcmp(recipient, functions, sizeof functions - 1) == 0;
    if (!r->channel_call)
        return;
    show_answer(r, HARMONY_CALL_OPEN, strlen(HARMONY_CALL_OPEN));
    show_answer(r, recipient + sizeof functions - 1, length - (sizeof functions - 1));
    show_answer(r, HARMONY_CALL_HEADER_END, strlen(HARMONY_CALL_HEADER_END));
}

/* The message ended (its end marker, the next message, or the output's
 * end): a call's shape is closed. */
static void call_end(bmoe_reasoning *r)
{
    if (r->channel_call)
        show_answer(r, HARMONY_CALL_CLOSE, strlen(HARMONY_CALL_CLOSE));
    r->channel_call = false;
}

/* The channel the header names: analysis is the reasoning. */
static bool header_is_analysis(const bmoe_reasoning *r)
{
    long at = find_last(r->header.data, r->header.length, harmony_markers[H_CHANNEL]);
    if (at < 0)
        return false;
    const char *name = r->header.data + at + strlen(harmony_markers[H_CHANNEL]);
    size_t left = r->header.length - ((size_t)at + strlen(harmony_markers[H_CHANNEL]));
    size_t name_length = 0;
    while (name_length < left && !is_space(name[name_length]) && name[name_length] != '<')
        name_length++;
    return name_length == 8 && memcmp(name, "analysis", 8) == 0;
}

static void process_harmony(bmoe_reasoning *r, bool final)
{
    while (!r->failed) {
        const char *p = r->pending.data;
        size_t n = r->pending.length;
        int which;
        size_t at = n ? harmony_find(p, n, &which) : 0;
        if (n == 0 || at == n) {
            size_t keep = final ? 0 : harmony_partial(p, n);
            if (r->state == HARMONY_HEADER) {
                header_append(r, p, n - keep);
                bool generated_long = r->header.length - r->header_prompt_bytes > REASONING_MAX_HEADER;
                if (!r->header_channel && !r->silent && (generated_long || final)) {
                    header_release(r);
                    r->channel_reasoning = false;
                    r->state = HARMONY_CONTENT;
                }
            } else {
                harmony_show(r, p, n - keep);
                if (final)
                    call_end(r);
            }
            text_buffer_consume(&r->pending, n - keep);
            return;
        }
        size_t marker_length = strlen(harmony_markers[which]);
        switch (r->state) {
        case HARMONY_HEADER:
            header_append(r, p, at);
            if (which == H_CHANNEL || which == H_CONSTRAIN) {
                header_append(r, p + at, marker_length);
                r->header_channel = r->header_channel || which == H_CHANNEL;
            } else if (which == H_MESSAGE) {
                call_begin(r);
                r->channel_reasoning = !r->channel_call && header_is_analysis(r);
                text_buffer_clear(&r->header);
                r->header_prompt_bytes = 0;
                r->state = HARMONY_CONTENT;
            } else if (which == H_START) {
                if (!r->header_channel)
                    header_release(r);
                header_begin(r);
            } else {
                if (!r->header_channel)
                    header_release(r);
                text_buffer_clear(&r->header);
                r->state = HARMONY_OUTSIDE;
            }
            break;
        case HARMONY_CONTENT:
        case HARMONY_OUTSIDE:
            if (r->state == HARMONY_CONTENT)
                harmony_show(r, p, at);
            else
                show_answer(r, p, at);
            if (which == H_START || which == H_CHANNEL || which == H_END || which == H_RETURN || which == H_CALL)
                call_end(r);
            if (which == H_START) {
                header_begin(r);
            } else if (which == H_CHANNEL) {
                header_begin(r);
                header_append(r, p + at, marker_length);
                r->header_channel = true;
            } else if (which == H_END || which == H_RETURN || which == H_CALL) {
                r->state = HARMONY_OUTSIDE;
                r->channel_reasoning = false;
            }
            break;
        }
        text_buffer_consume(&r->pending, at + marker_length);
    }
}

static void process(bmoe_reasoning *r, bool final)
{
    switch (r->format) {
    case BMOE_REASONING_THINK:
    case BMOE_REASONING_CHANNEL:
        process_span(r, final);
        break;
    case BMOE_REASONING_HARMONY:
        process_harmony(r, final);
        break;
    default:
        show_answer(r, r->pending.data, r->pending.length);
        text_buffer_clear(&r->pending);
        break;
    }
}

/* Where a span format starts after the prompt: inside a span the prompt
 * opened, past one it closed at its very end, or undecided. */
/* The span markers of r's format (none for harmony and none). */
static void span_markers(bmoe_reasoning *r)
{
    if (r->format == BMOE_REASONING_THINK) {
        r->open = "<think>";
        r->close = think_close;
    } else if (r->format == BMOE_REASONING_CHANNEL) {
        r->open = "<|channel>";
        r->close = channel_close;
        r->named = true;
    }
}

static int span_start_state(const bmoe_reasoning *r, const char *prompt, size_t length)
{
    long open = find_last(prompt, length, r->open);
    long close = find_last(prompt, length, r->close);
    if (open >= 0 && open > close) {
        size_t after = (size_t)open + strlen(r->open);
        if (r->named && find(prompt + after, length - after, "\n") == length - after)
            return SPAN_NAME;
        return SPAN_REASON_START;
    }
    if (close >= 0) {
        size_t after = (size_t)close + strlen(r->close);
        if (leading_space(prompt + after, length - after) == length - after)
            return SPAN_AFTER;
    }
    return SPAN_START;
}

bool bmoe_reasoning_opening(enum bmoe_reasoning_format format, const char *prompt, size_t prompt_length,
                            const char **opening)
{
    *opening = "";
    if (format == BMOE_REASONING_HARMONY)
        return true;
    bmoe_reasoning r = {.format = format};
    span_markers(&r);
    if (!r.open || (!prompt && prompt_length > 0))
        return false;
    switch (span_start_state(&r, prompt, prompt_length)) {
    case SPAN_AFTER: return false;
    case SPAN_START: *opening = format == BMOE_REASONING_THINK ? "<think>\n" : "<|channel>thought\n"; return true;
    default: return true;
    }
}

const char *bmoe_reasoning_format_name(enum bmoe_reasoning_format format)
{
    switch (format) {
    case BMOE_REASONING_NONE: return "none";
    case BMOE_REASONING_THINK: return "think";
    case BMOE_REASONING_CHANNEL: return "channel";
    case BMOE_REASONING_HARMONY: return "harmony";
    }
    return "unknown";
}

void bmoe_reasoning_free(bmoe_reasoning *r)
{
    if (!r)
        return;
    text_buffer_free(&r->pending);
    text_buffer_free(&r->reasoning);
    text_buffer_free(&r->answer);
    text_buffer_free(&r->delta_reasoning);
    text_buffer_free(&r->delta_answer);
    text_buffer_free(&r->header);
    free(r);
}

static int reasoning_fail(bmoe_error *error, bmoe_status status, const char *message)
{
    bmoe_error err;
    error_clear(&err);
    error_set_status(&err, status, "reasoning: %s", message);
    if (error)
        *error = err;
    return status;
}

bmoe_reasoning *bmoe_reasoning_create(enum bmoe_reasoning_format format, const char *prompt, size_t prompt_length,
                                      bmoe_error *error)
{
    if ((int)format < BMOE_REASONING_NONE || format > BMOE_REASONING_HARMONY || (!prompt && prompt_length > 0)) {
        reasoning_fail(error, BMOE_ERR_INVALID_ARGUMENT, "unknown format or no prompt text");
        return NULL;
    }
    bmoe_reasoning *r = calloc(1, sizeof *r);
    if (!r) {
        reasoning_fail(error, BMOE_ERR_OUT_OF_MEMORY, "out of memory");
        return NULL;
    }
    r->format = format;
    span_markers(r);
    if (r->open) {
        r->state = span_start_state(r, prompt, prompt_length);
    } else if (format == BMOE_REASONING_HARMONY) {
        long start = find_last(prompt, prompt_length, harmony_markers[H_START]);
        r->state = HARMONY_OUTSIDE;
        if (start >= 0) {
            /* the prompt's last message so far: its header, or its open content */
            size_t after = (size_t)start + strlen(harmony_markers[H_START]);
            header_begin(r);
            r->silent = true;
            if (!text_buffer_append(&r->pending, prompt + after, prompt_length - after))
                r->failed = true;
            process_harmony(r, false);
            /* a partial marker at the prompt's end is the prompt's own text */
            if (r->state == HARMONY_HEADER)
                header_append(r, r->pending.data ? r->pending.data : "", r->pending.length);
            text_buffer_clear(&r->pending);
            r->header_prompt_bytes = r->header.length;
            r->silent = false;
        }
    }
    if (r->failed) {
        bmoe_reasoning_free(r);
        reasoning_fail(error, BMOE_ERR_OUT_OF_MEMORY, "out of memory");
        return NULL;
    }
    return r;
}

/* The delta of one call: what was shown, or the whole state after a reset. */
static int deliver(bmoe_reasoning *r, bmoe_reasoning_delta *delta, bmoe_error *error)
{
    if (r->reset) {
        text_buffer_clear(&r->delta_reasoning);
        text_buffer_clear(&r->delta_answer);
        if (!text_buffer_append(&r->delta_reasoning, r->reasoning.data ? r->reasoning.data : "", r->reasoning.length) ||
            !text_buffer_append(&r->delta_answer, r->answer.data ? r->answer.data : "", r->answer.length))
            r->failed = true;
    }
    if (r->failed)
        return reasoning_fail(error, BMOE_ERR_OUT_OF_MEMORY, "out of memory");
    if (delta) {
        delta->reasoning = r->delta_reasoning.data ? r->delta_reasoning.data : "";
        delta->reasoning_length = r->delta_reasoning.length;
        delta->text = r->delta_answer.data ? r->delta_answer.data : "";
        delta->text_length = r->delta_answer.length;
        delta->reset = r->reset;
    }
    return 0;
}

static int reasoning_step(bmoe_reasoning *r, const char *text, size_t length, bool final, bmoe_reasoning_delta *delta,
                          bmoe_error *error)
{
    if (delta)
        memset(delta, 0, sizeof *delta);
    if (!r || (!text && length > 0))
        return reasoning_fail(error, BMOE_ERR_INVALID_ARGUMENT, "no parser or no text");
    if (r->failed)
        return reasoning_fail(error, BMOE_ERR_OUT_OF_MEMORY, "out of memory");
    text_buffer_clear(&r->delta_reasoning);
    text_buffer_clear(&r->delta_answer);
    r->reset = false;
    if (length > 0 && !text_buffer_append(&r->pending, text, length))
        r->failed = true;
    if (!r->failed)
        process(r, final);
    return deliver(r, delta, error);
}

int bmoe_reasoning_feed(bmoe_reasoning *r, const char *text, size_t length, bmoe_reasoning_delta *delta,
                        bmoe_error *error)
{
    return reasoning_step(r, text, length, false, delta, error);
}

int bmoe_reasoning_finish(bmoe_reasoning *r, bmoe_reasoning_delta *delta, bmoe_error *error)
{
    return reasoning_step(r, NULL, 0, true, delta, error);
}

const char *bmoe_reasoning_answer(const bmoe_reasoning *r, size_t *length)
{
    if (length)
        *length = r && r->answer.data ? r->answer.length : 0;
    return r && r->answer.data ? r->answer.data : "";
}

const char *bmoe_reasoning_thinking(const bmoe_reasoning *r, size_t *length)
{
    if (length)
        *length = r && r->reasoning.data ? r->reasoning.length : 0;
    return r && r->reasoning.data ? r->reasoning.data : "";
}
