/* stream: true. The generation steps inside libmicrohttpd's content
 * callback, on the connection's own thread: each call hands out what the
 * last token made (OpenAI's server-sent events of chat.completion.chunk,
 * or Ollama's NDJSON lines, each with the token's figures, or Anthropic's
 * named events of content blocks), so a slow reader slows the generation
 * instead of piling text up, and a client that goes away ends it at its
 * next token (the daemon then frees the stream, which releases the turn).
 * The APIs differ only in the shape of a piece, of the last one and of the
 * framing: one loop serves them all. */
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "server.h"

typedef struct stream {
    server *s;
    enum server_endpoint endpoint;
    bool ollama;            /* Ollama's lines, not OpenAI's events */
    bool anthropic;         /* Anthropic's named events of content blocks (server_anthropic.c) */
    anthropic_blocks blocks;
    bool chat;
    int64_t received_ns;    /* Ollama's total_duration counts from here */
    bool logprobs;
    size_t text_offset;     /* completions' logprobs: the text's bytes so far */
    bmoe_tool_split *tools; /* with tools (server_tools_active): holds back what may be a call */
    enum bmoe_tool_format tool_format;
    bmoe_generation *generation;
    bmoe_reasoning *reasoning;
    char id[48];
    long long created;
    char *pending;      /* the events not handed out yet */
    size_t length, sent;
    bool started, finished, done;
} stream;

/* Appends one event (a line, for Ollama) holding chunk (consumed). 0, or
 * -1 (out of memory). */
static int push_event(stream *st, cJSON *chunk)
{
    char *json = chunk ? cJSON_PrintUnformatted(chunk) : NULL;
    /* Anthropic's events are named by their data's type */
    const cJSON *type = st->anthropic ? cJSON_GetObjectItemCaseSensitive(chunk, "type") : NULL;
    char name[64] = "";
    if (cJSON_IsString(type))
        snprintf(name, sizeof name, "event: %s\n", type->valuestring);
    cJSON_Delete(chunk);
    if (!json)
        return -1;
    size_t add = strlen(name) + strlen(json) + 8;
    char *grown = realloc(st->pending, st->length + add + 1);
    if (!grown) {
        free(json);
        return -1;
    }
    st->pending = grown;
    st->length += (size_t)sprintf(st->pending + st->length, st->ollama ? "%s%s\n" : "%sdata: %s\n\n", name, json);
    free(json);
    return 0;
}

/* Appends every event of a list (consumed; NULL: out of memory). 0, or -1. */
static int push_events(stream *st, cJSON *events)
{
    int status = events ? 0 : -1;
    cJSON *event;
    while (status == 0 && (event = cJSON_DetachItemFromArray(events, 0)))
        status = push_event(st, event);
    cJSON_Delete(events);
    return status;
}

static cJSON *chunk_new(const stream *st)
{
    cJSON *chunk = cJSON_CreateObject();
    cJSON_AddStringToObject(chunk, "id", st->id);
    cJSON_AddStringToObject(chunk, "object", st->chat ? "chat.completion.chunk" : "text_completion");
    cJSON_AddNumberToObject(chunk, "created", (double)st->created);
    cJSON_AddStringToObject(chunk, "model", st->s->model_id);
    return chunk;
}

/* A chunk whose one choice carries answer and reasoning text (either may
 * be empty) and finish (NULL while going on). */
static cJSON *text_chunk(const stream *st, const char *text, size_t text_length, const char *reasoning,
                         size_t reasoning_length, const char *finish)
{
    if (st->ollama) /* its end is made by server_ollama_end */
        return server_ollama_piece(st->s, st->endpoint, text, text_length, reasoning, reasoning_length);
    cJSON *chunk = chunk_new(st);
    cJSON *choices = cJSON_AddArrayToObject(chunk, "choices");
    cJSON *choice = cJSON_CreateObject();
    cJSON_AddItemToArray(choices, choice);
    cJSON_AddNumberToObject(choice, "index", 0);
    char *answer = strndup(text ? text : "", text_length);
    char *thinking = reasoning_length ? strndup(reasoning, reasoning_length) : NULL;
    if (st->chat) {
        cJSON *delta = cJSON_AddObjectToObject(choice, "delta");
        if (!st->started)
            cJSON_AddStringToObject(delta, "role", "assistant");
        if (text_length)
            cJSON_AddStringToObject(delta, "content", answer ? answer : "");
        if (thinking)
            cJSON_AddStringToObject(delta, "reasoning_content", thinking);
    } else {
        cJSON_AddStringToObject(choice, "text", answer ? answer : "");
    }
    free(answer);
    free(thinking);
    if (finish)
        cJSON_AddStringToObject(choice, "finish_reason", finish);
    else
        cJSON_AddNullToObject(choice, "finish_reason");
    return chunk;
}

/* The answer text a chunk may show now, given what the last token added
 * (text; a snapshot of the whole answer when reset): all of it without
 * tools; with them, what comes before anything that may begin a call.
 * -1: out of memory. */
static int answer_part(stream *st, const char *text, size_t length, bool reset, const char **show,
                       size_t *show_length)
{
    *show = text;
    *show_length = length;
    if (!st->tools)
        return 0;
    if (reset) { /* the answer so far was not answer: start over from the snapshot */
        bmoe_tool_split *fresh = bmoe_tool_split_create(st->tool_format, NULL);
        if (!fresh)
            return -1;
        bmoe_tool_split_free(st->tools);
        st->tools = fresh;
    }
    return bmoe_tool_split_feed(st->tools, text, length, show, show_length, NULL);
}

/* The end of an answer with tools: the text held back that is not a call
 * goes out, then the calls, as OpenAI streams them (Ollama: in a piece's
 * message, in its shape); *finish becomes "tool_calls" where it was "stop"
 * and there are calls. -1: out of memory. */
static int push_calls(stream *st, const char **finish)
{
    cJSON *deltas = server_tool_stream_end(st->tools, st->id, finish);
    if (!deltas)
        return -1;
    int status = 0;
    cJSON *delta;
    cJSON_ArrayForEach(delta, deltas) {
        cJSON *chunk = text_chunk(st, NULL, 0, NULL, 0, NULL);
        cJSON *choice = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(chunk, "choices"), 0);
        cJSON *into = cJSON_GetObjectItemCaseSensitive(st->ollama ? chunk : choice, st->ollama ? "message" : "delta");
        for (cJSON *field = delta->child; into && field; field = field->next) {
            bool calls = st->ollama && strcmp(field->string, "tool_calls") == 0;
            cJSON *value = calls ? server_ollama_calls(field) : cJSON_Duplicate(field, true);
            /* Ollama's piece has its "content" already */
            bool placed = value && (cJSON_HasObjectItem(into, field->string)
                                        ? cJSON_ReplaceItemInObjectCaseSensitive(into, field->string, value)
                                        : cJSON_AddItemToObject(into, field->string, value));
            if (!placed) {
                cJSON_Delete(value);
                status = -1;
            }
        }
        if (status == 0)
            status = push_event(st, chunk);
        else
            cJSON_Delete(chunk);
    }
    cJSON_Delete(deltas);
    return status;
}

/* Anthropic's events of a step's split (thinking, answer text, reset) in
 * blocks. 0, or -1 (out of memory). */
static int push_deltas(stream *st, const char *thinking, size_t thinking_length, const char *text,
                       size_t text_length, bool reset)
{
    cJSON *events = cJSON_CreateArray();
    if (!events ||
        server_anthropic_deltas(&st->blocks, events, thinking, thinking_length, text, text_length, reset) != 0) {
        cJSON_Delete(events);
        return -1;
    }
    return push_events(st, events);
}

/* The end of Anthropic's stream, from the final step's split (delta) and
 * what the split's finish released (last): the text (with tools, what the
 * tool split held back that is not a call), then the calls as tool_use
 * blocks, message_delta and message_stop (server_anthropic_end). */
static int anthropic_end(stream *st, enum bmoe_stop_reason stop, const char *show, size_t show_length,
                         const bmoe_reasoning_delta *delta, const bmoe_reasoning_delta *last)
{
    const char *finish = server_finish_reason(stop), *last_show = last->text;
    size_t last_length = last->text_length;
    int status = push_deltas(st, delta->reasoning, delta->reasoning_length, show, show_length, delta->reset);
    if (status == 0 && st->tools)
        status = answer_part(st, last->text, last->text_length, last->reset, &last_show, &last_length);
    if (status == 0)
        status = push_deltas(st, last->reasoning, last->reasoning_length, last_show, last_length, last->reset);
    cJSON *deltas = status == 0 && st->tools ? server_tool_stream_end(st->tools, st->id, &finish) : NULL;
    if (st->tools && !deltas)
        status = -1;
    const cJSON *calls = NULL, *part;
    cJSON_ArrayForEach(part, deltas) {
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(part, "content");
        if (cJSON_IsString(content) && status == 0)
            status = push_deltas(st, NULL, 0, content->valuestring, strlen(content->valuestring), false);
        const cJSON *listed = cJSON_GetObjectItemCaseSensitive(part, "tool_calls");
        calls = listed ? listed : calls;
    }
    cJSON *events = status == 0 ? cJSON_CreateArray() : NULL;
    if (events && server_anthropic_end(&st->blocks, events, st->s, st->id, st->generation, calls,
                                       strcmp(finish, "tool_calls") == 0, stop) != 0) {
        cJSON_Delete(events);
        events = NULL;
    }
    cJSON_Delete(deltas);
    server_count_generation(st->s, st->generation);
    st->finished = true;
    return push_events(st, events);
}

/* One more token's events (or the end's). 0, or -1 (the stream ends). */
static int next_events(stream *st)
{
    if (!st->started) { /* OpenAI's first chunk: the role; Anthropic's: message_start */
        cJSON *first = st->anthropic ? server_anthropic_start(st->s, st->id, st->generation)
                                     : text_chunk(st, NULL, 0, NULL, 0, NULL);
        int status = push_event(st, first);
        st->started = true;
        return status;
    }
    if (st->finished && (st->ollama || st->anthropic)) {
        st->done = true;
        return 0;
    }
    if (st->finished) {
        static const char done[] = "data: [DONE]\n\n";
        char *grown = realloc(st->pending, st->length + sizeof done);
        if (!grown)
            return -1;
        st->pending = grown;
        memcpy(st->pending + st->length, done, sizeof done);
        st->length += sizeof done - 1;
        st->done = true;
        return 0;
    }
    bmoe_step step = {0};
    bmoe_error error = {0};
    bmoe_reasoning_delta delta = {0};
    int status = bmoe_generation_step(st->generation, &step, &error);
    if (status < 0) {
        fprintf(stderr, "bmoe-server: a streamed generation ended: %s\n", error.message);
        step.stop = BMOE_STOP_ABORTED;
        status = 0;
    } else if (bmoe_reasoning_feed(st->reasoning, step.text, step.text_length, &delta, &error) != 0) {
        return -1;
    }
    if (step.token >= 0)
        st->blocks.last_token = step.token; /* where a stop sequence ends (server_anthropic.c) */
    const char *show;
    size_t show_length;
    if (answer_part(st, delta.text, delta.text_length, delta.reset, &show, &show_length) != 0)
        return -1;
    if (status == 0) {
        bmoe_reasoning_delta last = {0};
        if (bmoe_reasoning_finish(st->reasoning, &last, &error) != 0)
            return -1;
        if (st->anthropic)
            return anthropic_end(st, step.stop, show, show_length, &delta, &last);
        cJSON *chunk = text_chunk(st, show, show_length, delta.reasoning, delta.reasoning_length, NULL);
        if ((show_length || delta.reasoning_length) && push_event(st, chunk) != 0)
            return -1;
        if (!(show_length || delta.reasoning_length))
            cJSON_Delete(chunk);
        const char *finish = server_finish_reason(step.stop);
        const char *last_show = last.text;
        size_t last_length = last.text_length;
        if (st->tools) {
            /* the whole answer is in: what it holds back goes out with the calls */
            if (answer_part(st, last.text, last.text_length, last.reset, &last_show, &last_length) != 0)
                return -1;
            if (last_length || last.reasoning_length)
                if (push_event(st, text_chunk(st, last_show, last_length, last.reasoning, last.reasoning_length,
                                              NULL)) != 0)
                    return -1;
            if (push_calls(st, &finish) != 0)
                return -1;
            last_show = NULL;
            last_length = 0;
            last.reasoning_length = 0;
        }
        chunk = text_chunk(st, last_show, last_length, last.reasoning, last.reasoning_length, finish);
        if (st->ollama) {
            server_ollama_end(chunk, st->generation, finish, st->received_ns);
        } else {
            cJSON *usage = cJSON_AddObjectToObject(chunk, "usage");
            int32_t n_prompt = bmoe_generation_n_prompt(st->generation);
            int32_t generated = bmoe_generation_n_generated(st->generation);
            cJSON_AddNumberToObject(usage, "prompt_tokens", n_prompt);
            cJSON_AddNumberToObject(usage, "completion_tokens", generated);
            cJSON_AddNumberToObject(usage, "total_tokens", n_prompt + generated);
            cJSON_AddNumberToObject(cJSON_AddObjectToObject(usage, "prompt_tokens_details"), "cached_tokens",
                                    bmoe_generation_n_reused(st->generation));
        }
        server_add_figures(chunk, st->generation, st->s, step.stop == BMOE_STOP_ABORTED);
        server_count_generation(st->s, st->generation);
        st->finished = true;
        return push_event(st, chunk);
    }
    if (st->anthropic) { /* Anthropic's events carry no per-token figures: /api/events has them */
        server_publish_step(st->s, &step);
        return push_deltas(st, delta.reasoning, delta.reasoning_length, show, show_length, delta.reset);
    }
    /* a reset replaces what was delivered: a stream cannot take text back,
     * so the snapshots go out marked, for a client that can redraw */
    cJSON *chunk = text_chunk(st, show, show_length, delta.reasoning, delta.reasoning_length, NULL);
    if (st->logprobs) {
        cJSON *choice = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(chunk, "choices"), 0);
        cJSON *logprobs = server_logprobs_new(st->chat);
        if (!logprobs || !cJSON_AddItemToObject(choice, "logprobs", logprobs)) {
            cJSON_Delete(logprobs);
            cJSON_Delete(chunk);
            return -1;
        }
        if (server_logprobs_add(logprobs, st->s, &step, st->chat, &st->text_offset) != 0) {
            cJSON_Delete(chunk);
            return -1;
        }
    }
    server_step_figures(chunk, &step);
    server_publish_step(st->s, &step);
    if (delta.reset)
        cJSON_AddBoolToObject(cJSON_GetObjectItemCaseSensitive(chunk, "bmoe"), "reset", true);
    return push_event(st, chunk);
}

static ssize_t stream_read(void *user, uint64_t position, char *buffer, size_t max)
{
    (void)position;
    stream *st = user;
    while (st->sent == st->length) {
        if (st->done)
            return MHD_CONTENT_READER_END_OF_STREAM;
        st->sent = st->length = 0;
        if (next_events(st) != 0)
            return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t n = st->length - st->sent < max ? st->length - st->sent : max;
    memcpy(buffer, st->pending + st->sent, n);
    st->sent += n;
    return (ssize_t)n;
}

/* The daemon is done with the stream: ended, or its client went away. */
static void stream_free(void *user)
{
    stream *st = user;
    /* a client that left mid-stream still had its tokens made */
    if (!st->finished)
        server_count_generation(st->s, st->generation);
    bmoe_generation_free(st->generation);
    bmoe_reasoning_free(st->reasoning);
    server_turn_release(st->s);
    bmoe_tool_split_free(st->tools);
    server_anthropic_blocks_free(&st->blocks);
    free(st->pending);
    free(st);
}

void server_stream_begin(server *s, const completion_request *q, const char *text, size_t text_length,
                         bool prefill, server_reply *reply)
{
    stream *st = calloc(1, sizeof *st);
    if (!st) {
        server_turn_release(s);
        server_error_reply(reply, 500, "server_error", NULL, NULL, "out of memory");
        return;
    }
    st->s = s;
    st->endpoint = q->endpoint;
    st->ollama = server_endpoint_ollama(q->endpoint);
    st->anthropic = server_endpoint_anthropic(q->endpoint);
    st->started = st->ollama; /* Ollama's pieces each name the role: no first chunk for it */
    st->received_ns = q->received_ns;
    st->chat = q->chat;
    st->logprobs = q->logprobs;
    st->tool_format = server_tools_active(s, q) ? bmoe_chat_tool_format(s->chat) : BMOE_TOOL_FORMAT_NONE;
    if ((st->anthropic && server_anthropic_blocks_init(&st->blocks, q) != 0) ||
        (st->tool_format != BMOE_TOOL_FORMAT_NONE && !(st->tools = bmoe_tool_split_create(st->tool_format, NULL)))) {
        server_anthropic_blocks_free(&st->blocks);
        free(st);
        server_turn_release(s);
        server_error_reply(reply, 500, "server_error", NULL, NULL, "out of memory");
        return;
    }
    st->created = (long long)time(NULL);
    if (st->anthropic)
        server_anthropic_id(s, st->id, sizeof st->id);
    else
        snprintf(st->id, sizeof st->id, "%s-%llu", q->chat ? "chatcmpl" : "cmpl",
                 (unsigned long long)atomic_fetch_add(&s->next_id, 1));
    if (server_generation_begin(s, q, text, text_length, prefill, &st->generation, &st->reasoning, reply) != 0) {
        bmoe_tool_split_free(st->tools);
        server_anthropic_blocks_free(&st->blocks);
        free(st);
        server_turn_release(s);
        return;
    }
    reply->stream = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, st, stream_free);
    if (!reply->stream) {
        stream_free(st);
        server_error_reply(reply, 500, "server_error", NULL, NULL, "out of memory");
        return;
    }
    reply->status = 200;
    reply->content_type = st->ollama ? "application/x-ndjson" : NULL;
}
