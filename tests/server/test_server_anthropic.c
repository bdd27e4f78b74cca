/* bmoe-server's Anthropic Messages API end to end on a generated model with
 * a chat template: /v1/messages answers what /v1/chat/completions answers
 * for the same greedy request, as a message of content blocks with its stop
 * reason and usage; streamed as named events (message_start, each block's
 * start, deltas and stop, message_delta, message_stop) that build the same
 * message; stop sequences (the one that fired named), a system prompt,
 * forced tool calls as tool_use blocks meeting their schema, a tool result
 * in the history, thinking on and off, count_tokens against the usage;
 * every refusal in Anthropic's error shape with its status; x-api-key. */
#include <cjson/cJSON.h>
#include <sys/stat.h>

#include "server_client.h"

static char model[1200];

#define HELLO "\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}]"
#define ASK "{\"role\":\"user\",\"content\":\"Weather in Paris?\"}"
#define TWO_TOOLS                                                                                                 \
    "\"tools\":[{\"name\":\"get_weather\",\"description\":\"the weather\",\"input_schema\":{\"type\":\"object\","  \
    "\"properties\":{\"city\":{\"enum\":[\"Paris\",\"Rome\"]}},\"required\":[\"city\"]}},{\"name\":\"get_time\","  \
    "\"input_schema\":{\"type\":\"object\",\"properties\":{\"utc\":{\"type\":\"boolean\"}},\"required\":[\"utc\"]}}]"
#define OK_SCHEMA "{\"type\":\"object\",\"properties\":{\"ok\":{\"type\":\"boolean\"}},\"required\":[\"ok\"]}"
#define FORMAT "\"output_config\":{\"format\":{\"type\":\"json_schema\",\"schema\":" OK_SCHEMA "}}"

static cJSON *post_json(int port, const char *path, const char *extra, const char *body, int *status)
{
    test_response response;
    cJSON *root = NULL;
    *status = -1;
    if (test_request(port, "POST", path, extra, body, &response) == 0) {
        *status = response.status;
        root = cJSON_Parse(response.body);
    }
    free(response.raw);
    return root;
}

static const char *string_at(const cJSON *object, const char *key)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, key);
    return cJSON_IsString(item) ? item->valuestring : "";
}

static double number_at(const cJSON *object, const char *key)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, key);
    return cJSON_IsNumber(item) ? item->valuedouble : -1;
}

static void check_same(const char *got, const char *expected, const char *what)
{
    CHECK_MSG(got && expected && strcmp(got, expected) == 0, "%s: \"%s\" != \"%s\"", what, got ? got : "(none)",
              expected ? expected : "(none)");
}

/* The prompt's tokens a usage counts: those evaluated and those the cache served. */
static double prompt_tokens(const cJSON *message)
{
    const cJSON *usage = cJSON_GetObjectItemCaseSensitive(message, "usage");
    return number_at(usage, "input_tokens") + number_at(usage, "cache_read_input_tokens");
}

/* The 200 answer to body on /v1/messages, its shape checked; NULL otherwise. */
static cJSON *message(int port, const char *body)
{
    int status;
    cJSON *root = post_json(port, "/v1/messages", NULL, body, &status);
    CHECK_MSG(status == 200 && root, "%s: %d", body, status);
    if (status != 200) {
        cJSON_Delete(root);
        return NULL;
    }
    const cJSON *sequence = cJSON_GetObjectItemCaseSensitive(root, "stop_sequence");
    const cJSON *usage = cJSON_GetObjectItemCaseSensitive(root, "usage");
    CHECK_MSG(strncmp(string_at(root, "id"), "msg_", 4) == 0 && !strcmp(string_at(root, "type"), "message") &&
                  !strcmp(string_at(root, "role"), "assistant") && !strcmp(string_at(root, "model"), "tiny.gguf") &&
                  cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(root, "content")) &&
                  string_at(root, "stop_reason")[0] && (cJSON_IsNull(sequence) || cJSON_IsString(sequence)) &&
                  number_at(usage, "input_tokens") >= 0 && number_at(usage, "cache_read_input_tokens") >= 0 &&
                  number_at(usage, "output_tokens") >= 0 &&
                  cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(root, "bmoe")),
              "the message's shape: %s", body);
    return root;
}

/* The field of a message's blocks of type, joined (malloc'ed). */
static char *blocks_text(const cJSON *message, const char *type, const char *field)
{
    size_t length = 0;
    char *text = calloc(1, 1);
    const cJSON *block;
    cJSON_ArrayForEach(block, cJSON_GetObjectItemCaseSensitive(message, "content")) {
        if (!text || strcmp(string_at(block, "type"), type) != 0)
            continue;
        const char *piece = string_at(block, field);
        char *grown = realloc(text, length + strlen(piece) + 1);
        if (!grown) {
            free(text);
            return NULL;
        }
        text = grown;
        memcpy(text + length, piece, strlen(piece) + 1);
        length += strlen(piece);
    }
    return text;
}

/* A block's type as a letter: thinking "k", text "t", tool_use "u". */
static char kind_letter(const char *type)
{
    if (!strcmp(type, "thinking"))
        return 'k';
    if (!strcmp(type, "text"))
        return 't';
    return !strcmp(type, "tool_use") ? 'u' : '?';
}

/* The blocks' types in order, as letters. */
static void block_kinds(const cJSON *message, char *kinds, size_t size)
{
    size_t n = 0;
    const cJSON *block;
    cJSON_ArrayForEach(block, cJSON_GetObjectItemCaseSensitive(message, "content")) {
        if (n + 1 < size)
            kinds[n++] = kind_letter(string_at(block, "type"));
    }
    kinds[n] = '\0';
}

/* Whether c may stand in a JSON string as it is: printable ASCII, no quote or backslash. */
static bool plain(char c)
{
    return c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
}

/* The place of the first letter of text from at on that plain text
 * follows (the start of a stop of two bytes); -1 when there is none. */
static long letter_at(const char *text, size_t at)
{
    for (; text && text[at] && text[at + 1]; at++)
        if (((text[at] | 32) >= 'a' && (text[at] | 32) <= 'z') && plain(text[at + 1]))
            return (long)at;
    return -1;
}

/* /v1/chat/completions' message for body: its content (malloc'ed), its
 * reasoning (*reasoning, malloc'ed, when not NULL) and *prompt its prompt
 * tokens (when not NULL). */
static char *openai_content(int port, const char *body, char **reasoning, double *prompt)
{
    int status;
    cJSON *root = post_json(port, "/v1/chat/completions", NULL, body, &status);
    const cJSON *choice = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "choices"), 0);
    const cJSON *message = cJSON_GetObjectItemCaseSensitive(choice, "message");
    CHECK_MSG(status == 200 && message, "%s: %d", body, status);
    char *content = strdup(string_at(message, "content"));
    if (reasoning)
        *reasoning = strdup(string_at(message, "reasoning_content"));
    if (prompt)
        *prompt = number_at(cJSON_GetObjectItemCaseSensitive(root, "usage"), "prompt_tokens");
    cJSON_Delete(root);
    return content;
}

/* object's string key with more appended. */
static void append_string(cJSON *object, const char *key, const char *more)
{
    const char *old = string_at(object, key);
    char *joined = malloc(strlen(old) + strlen(more) + 1);
    if (!joined)
        return;
    strcpy(joined, old);
    strcat(joined, more);
    if (cJSON_HasObjectItem(object, key))
        cJSON_ReplaceItemInObjectCaseSensitive(object, key, cJSON_CreateString(joined));
    else
        cJSON_AddStringToObject(object, key, joined);
    free(joined);
}

/* One event of a stream taken into the message it builds (*message, made
 * by message_start), as an Anthropic client accumulates it; whether it came
 * where the protocol has it (*open: the open block's index, -1: none; a
 * tool_use block's input JSON gathers in its "partial_json" until its stop). */
static bool take_event(cJSON **message, const cJSON *event, int *open, bool *delta_seen, bool *stopped)
{
    const char *type = string_at(event, "type");
    cJSON *content = cJSON_GetObjectItemCaseSensitive(*message, "content");
    int index = (int)number_at(event, "index");
    cJSON *block = cJSON_GetArrayItem(content, *open);
    if (!strcmp(type, "message_start")) {
        const cJSON *start = cJSON_GetObjectItemCaseSensitive(event, "message");
        if (*message || cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(start, "content")) != 0 ||
            !cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(start, "stop_reason")))
            return false;
        *message = cJSON_Duplicate(start, true);
        return *message != NULL;
    }
    if (!*message || *stopped)
        return false;
    if (!strcmp(type, "content_block_start")) {
        if (*open >= 0 || *delta_seen || index != cJSON_GetArraySize(content))
            return false;
        cJSON *started = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(event, "content_block"), true);
        const cJSON *figures = cJSON_GetObjectItemCaseSensitive(event, "bmoe"); /* a reset's mark, kept on the block */
        if (figures)
            cJSON_AddItemToObject(started, "bmoe", cJSON_Duplicate(figures, true));
        cJSON_AddItemToArray(content, started);
        *open = index;
        return true;
    }
    if (!strcmp(type, "content_block_delta")) {
        const cJSON *delta = cJSON_GetObjectItemCaseSensitive(event, "delta");
        const char *kind = string_at(delta, "type"), *block_type = string_at(block, "type");
        if (*open < 0 || index != *open)
            return false;
        if (!strcmp(kind, "text_delta") && !strcmp(block_type, "text"))
            append_string(block, "text", string_at(delta, "text"));
        else if (!strcmp(kind, "thinking_delta") && !strcmp(block_type, "thinking"))
            append_string(block, "thinking", string_at(delta, "thinking"));
        else if (!strcmp(kind, "input_json_delta") && !strcmp(block_type, "tool_use"))
            append_string(block, "partial_json", string_at(delta, "partial_json"));
        else
            return false;
        return true;
    }
    if (!strcmp(type, "content_block_stop")) {
        if (*open < 0 || index != *open)
            return false;
        *open = -1;
        if (strcmp(string_at(block, "type"), "tool_use") != 0)
            return true;
        cJSON *input = cJSON_Parse(string_at(block, "partial_json"));
        cJSON_DeleteItemFromObjectCaseSensitive(block, "partial_json");
        return input && cJSON_ReplaceItemInObjectCaseSensitive(block, "input", input);
    }
    if (!strcmp(type, "message_delta")) {
        const cJSON *delta = cJSON_GetObjectItemCaseSensitive(event, "delta");
        if (*open >= 0 || *delta_seen || !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(delta, "stop_reason")))
            return false;
        static const char *const fields[] = {"stop_reason", "stop_sequence"};
        for (int i = 0; i < 2; i++)
            cJSON_ReplaceItemInObjectCaseSensitive(
                *message, fields[i], cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(delta, fields[i]), true));
        cJSON_ReplaceItemInObjectCaseSensitive(
            *message, "usage", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(event, "usage"), true));
        cJSON_AddItemToObject(*message, "bmoe",
                              cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(event, "bmoe"), true));
        *delta_seen = true;
        return true;
    }
    if (!strcmp(type, "message_stop")) {
        *stopped = true;
        return *delta_seen;
    }
    return false;
}

/* The message a streamed answer to body builds, its events checked: each
 * named by its data's type, in the protocol's order, ending with
 * message_stop. NULL when it is not. */
static cJSON *streamed_message(int port, const char *body)
{
    test_response response;
    if (test_request(port, "POST", "/v1/messages", NULL, body, &response) != 0) {
        CHECK_MSG(false, "%s: no answer", body);
        return NULL;
    }
    CHECK_MSG(response.status == 200 && strstr(response.raw, "Content-Type: text/event-stream"), "%.300s",
              response.raw);
    char *events = (char *)response.body;
    CHECK_MSG(test_dechunk(events) >= 0, "the stream's chunked body does not decode");
    cJSON *message = NULL;
    int open = -1, n = 0;
    bool ordered = true, delta_seen = false, stopped = false;
    for (char *event = events; ordered && *event; n++) {
        char *end = strstr(event, "\n\n");
        char name[64] = "";
        const char *data = end ? strstr(event, "\ndata: ") : NULL;
        if (!end || !data || data > end || sscanf(event, "event: %63s", name) != 1) {
            ordered = false;
            break;
        }
        *end = '\0';
        cJSON *parsed = cJSON_Parse(data + 7);
        ordered = parsed && strcmp(name, string_at(parsed, "type")) == 0 &&
                  take_event(&message, parsed, &open, &delta_seen, &stopped);
        CHECK_MSG(ordered, "event %d out of place: %s", n, event);
        cJSON_Delete(parsed);
        event = end + 2;
    }
    CHECK_MSG(ordered && stopped, "the stream did not end with message_stop (%d events)", n);
    free(response.raw);
    if (ordered && stopped)
        return message;
    cJSON_Delete(message);
    return NULL;
}

/* The streamed message has the blocks, stop and output tokens of the whole one. */
static void check_streamed_same(const cJSON *streamed, const cJSON *whole, const char *what)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(streamed, "content");
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(whole, "content");
    bool same = cJSON_GetArraySize(a) == cJSON_GetArraySize(b);
    for (int i = 0; same && i < cJSON_GetArraySize(a); i++) {
        const cJSON *x = cJSON_GetArrayItem(a, i), *y = cJSON_GetArrayItem(b, i);
        const char *type = string_at(x, "type");
        same = !strcmp(type, string_at(y, "type")) && !strcmp(string_at(x, "text"), string_at(y, "text")) &&
               !strcmp(string_at(x, "thinking"), string_at(y, "thinking")) &&
               !strcmp(string_at(x, "name"), string_at(y, "name")) &&
               (strcmp(type, "tool_use") != 0 ||
                (cJSON_Compare(cJSON_GetObjectItemCaseSensitive(x, "input"),
                               cJSON_GetObjectItemCaseSensitive(y, "input"), true) &&
                 !strncmp(string_at(x, "id"), "toolu_", 6)));
    }
    const cJSON *sequence_a = cJSON_GetObjectItemCaseSensitive(streamed, "stop_sequence");
    const cJSON *sequence_b = cJSON_GetObjectItemCaseSensitive(whole, "stop_sequence");
    same = same && !strcmp(string_at(streamed, "stop_reason"), string_at(whole, "stop_reason")) &&
           cJSON_Compare(sequence_a, sequence_b, true) &&
           number_at(cJSON_GetObjectItemCaseSensitive(streamed, "usage"), "output_tokens") ==
               number_at(cJSON_GetObjectItemCaseSensitive(whole, "usage"), "output_tokens") &&
           prompt_tokens(streamed) == prompt_tokens(whole);
    char *x = cJSON_PrintUnformatted(streamed), *y = cJSON_PrintUnformatted(whole);
    CHECK_MSG(same, "%s: streamed %s != %s", what, x ? x : "-", y ? y : "-");
    free(x);
    free(y);
}

/* The answer's text as the OpenAI endpoint's for the same greedy request;
 * streamed, the same message. */
static void test_text(int port)
{
    char *expected = openai_content(port, "{" HELLO ",\"max_tokens\":16,\"temperature\":0}", NULL, NULL);
    cJSON *whole = message(port, "{\"model\":\"tiny\"," HELLO ",\"max_tokens\":16,\"temperature\":0,\"metadata\":"
                                 "{\"user_id\":\"u\"},\"top_k\":0,\"top_p\":1}");
    char *text = blocks_text(whole, "text", "text"), kinds[16];
    block_kinds(whole, kinds, sizeof kinds);
    check_same(text, expected, "/v1/messages != /v1/chat/completions");
    /* the random tiny model never says its end of turn within 16 tokens */
    CHECK_MSG(!strcmp(kinds, "t") && !strcmp(string_at(whole, "stop_reason"), "max_tokens") &&
                  cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(whole, "stop_sequence")) &&
                  number_at(cJSON_GetObjectItemCaseSensitive(whole, "usage"), "output_tokens") == 16,
              "blocks %s, stop %s", kinds, string_at(whole, "stop_reason"));
    cJSON *streamed = streamed_message(port, "{\"model\":\"tiny.gguf\",\"stream\":true," HELLO ",\"max_tokens\":16,"
                                             "\"temperature\":0}");
    check_streamed_same(streamed, whole, "text");
    cJSON_Delete(streamed);
    free(text);
    cJSON_Delete(whole);
    free(expected);
}

/* stop_sequences: the text ends before the first to appear, which is named
 * (here the second listed, spanning tokens or not); streamed alike. */
static void test_stops(int port)
{
    cJSON *whole = message(port, "{" HELLO ",\"max_tokens\":16}");
    char *full = blocks_text(whole, "text", "text");
    cJSON_Delete(whole);
    long at = letter_at(full, 2);
    if (at < 0) {
        CHECK_MSG(false, "no letters in the answer to stop at: \"%s\"", full ? full : "(none)");
        free(full);
        return;
    }
    /* two bytes from a letter on: a stop that may span two tokens */
    char stop[3] = {full[at], full[at + 1], '\0'}, body[512];
    snprintf(body, sizeof body, "{" HELLO ",\"max_tokens\":16,\"stop_sequences\":[\"never\",\"%s\"]}", stop);
    whole = message(port, body);
    char *stopped = blocks_text(whole, "text", "text");
    size_t before = (size_t)(strstr(full, stop) - full);
    CHECK_MSG(stopped && strlen(stopped) == before && strncmp(stopped, full, before) == 0 &&
                  !strcmp(string_at(whole, "stop_reason"), "stop_sequence") &&
                  !strcmp(string_at(whole, "stop_sequence"), stop),
              "stop \"%s\": \"%s\" of \"%s\" (%s \"%s\")", stop, stopped ? stopped : "-", full,
              string_at(whole, "stop_reason"), string_at(whole, "stop_sequence"));
    snprintf(body, sizeof body, "{\"stream\":true," HELLO ",\"max_tokens\":16,\"stop_sequences\":[\"never\",\"%s\"]}",
             stop);
    cJSON *streamed = streamed_message(port, body);
    check_streamed_same(streamed, whole, "stop_sequences");
    cJSON_Delete(streamed);
    cJSON_Delete(whole);
    free(stopped);
    free(full);
}

/* A held answer ends its turn: end_turn, the JSON of the schema, as the
 * OpenAI endpoint's response_format answers. */
static void test_end_turn(int port)
{
    char *expected = openai_content(port, "{" HELLO ",\"max_tokens\":64,\"response_format\":{\"type\":\"json_schema\","
                                          "\"json_schema\":{\"name\":\"s\",\"schema\":" OK_SCHEMA "}}}",
                                    NULL, NULL);
    cJSON *whole = message(port, "{" HELLO ",\"max_tokens\":64," FORMAT "}");
    char *text = blocks_text(whole, "text", "text");
    cJSON *value = text ? cJSON_Parse(text) : NULL;
    CHECK_MSG(!strcmp(string_at(whole, "stop_reason"), "end_turn") &&
                  cJSON_IsBool(cJSON_GetObjectItemCaseSensitive(value, "ok")),
              "end_turn: %s \"%s\"", string_at(whole, "stop_reason"), text ? text : "-");
    check_same(text, expected, "output_config.format != response_format");
    cJSON *streamed = streamed_message(port, "{\"stream\":true," HELLO ",\"max_tokens\":64," FORMAT "}");
    check_streamed_same(streamed, whole, "end_turn");
    cJSON_Delete(streamed);
    cJSON_Delete(value);
    free(text);
    cJSON_Delete(whole);
    free(expected);
}

/* system, a string or text blocks, is the template's system message. */
static void test_system(int port)
{
    char *expected = openai_content(port, "{\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":"
                                          "\"user\",\"content\":\"Hello\"}],\"max_tokens\":12}",
                                    NULL, NULL);
    cJSON *plain = message(port, "{" HELLO ",\"max_tokens\":12}");
    cJSON *string = message(port, "{\"system\":\"Be brief.\"," HELLO ",\"max_tokens\":12}");
    cJSON *blocks = message(port, "{\"system\":[{\"type\":\"text\",\"text\":\"Be \"},{\"type\":\"text\",\"text\":"
                                  "\"brief.\",\"cache_control\":{\"type\":\"ephemeral\"}}]," HELLO
                                  ",\"max_tokens\":12}");
    /* a system turn among the messages, as Anthropic's latest API has them */
    cJSON *turn = message(port, "{\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\","
                                "\"content\":[{\"type\":\"text\",\"text\":\"Hello\"}]}],\"max_tokens\":12}");
    char *a = blocks_text(string, "text", "text"), *b = blocks_text(blocks, "text", "text");
    char *c = blocks_text(turn, "text", "text");
    check_same(a, expected, "system string");
    check_same(b, expected, "system blocks");
    check_same(c, expected, "a system turn");
    CHECK_MSG(prompt_tokens(string) > prompt_tokens(plain) && prompt_tokens(string) == prompt_tokens(blocks),
              "system: %g, %g tokens; without %g", prompt_tokens(string), prompt_tokens(blocks), prompt_tokens(plain));
    free(a);
    free(b);
    free(c);
    cJSON_Delete(turn);
    cJSON_Delete(blocks);
    cJSON_Delete(string);
    cJSON_Delete(plain);
    free(expected);
}

/* The one tool_use block of a forced answer: its name (malloc'ed) and input. */
static char *forced_call(const cJSON *message, const cJSON **input)
{
    char kinds[16];
    block_kinds(message, kinds, sizeof kinds);
    const cJSON *block = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(message, "content"), 0);
    *input = cJSON_GetObjectItemCaseSensitive(block, "input");
    CHECK_MSG(!strcmp(kinds, "u") && !strcmp(string_at(message, "stop_reason"), "tool_use") &&
                  !strncmp(string_at(block, "id"), "toolu_", 6) && cJSON_IsObject(*input),
              "not one tool_use: blocks %s, stop %s", kinds, string_at(message, "stop_reason"));
    return strdup(string_at(block, "name"));
}

/* tool_choice any and tool: one tool_use block whose input meets its
 * tool's schema (this model never calls by itself), streamed alike; a
 * history with a call and its result reads as OpenAI's tool_calls and tool
 * message; tool_choice none leaves the tools out. */
static void test_tools(int port)
{
    cJSON *whole = message(port, "{\"messages\":[" ASK "],\"max_tokens\":400," TWO_TOOLS ",\"tool_choice\":"
                                 "{\"type\":\"any\",\"disable_parallel_tool_use\":true}}");
    const cJSON *input = NULL;
    char *name = forced_call(whole, &input);
    const cJSON *city = cJSON_GetObjectItemCaseSensitive(input, "city");
    const cJSON *utc = cJSON_GetObjectItemCaseSensitive(input, "utc");
    CHECK_MSG(cJSON_GetArraySize(input) == 1 &&
                  ((!strcmp(name, "get_weather") && cJSON_IsString(city) &&
                    (!strcmp(city->valuestring, "Paris") || !strcmp(city->valuestring, "Rome"))) ||
                   (!strcmp(name, "get_time") && cJSON_IsBool(utc))),
              "any: %s does not meet its tool's schema", name);
    cJSON *streamed = streamed_message(port, "{\"stream\":true,\"messages\":[" ASK "],\"max_tokens\":400," TWO_TOOLS
                                             ",\"tool_choice\":{\"type\":\"any\"}}");
    check_streamed_same(streamed, whole, "tool_choice any");
    cJSON_Delete(streamed);
    free(name);
    cJSON_Delete(whole);
    whole = message(port, "{\"messages\":[" ASK "],\"max_tokens\":400," TWO_TOOLS ",\"tool_choice\":{\"type\":"
                          "\"tool\",\"name\":\"get_time\"}}");
    name = forced_call(whole, &input);
    CHECK_MSG(!strcmp(name, "get_time") && cJSON_IsBool(cJSON_GetObjectItemCaseSensitive(input, "utc")),
              "tool get_time: %s", name);
    free(name);
    cJSON_Delete(whole);

    /* a history: the call and its result render as OpenAI's do */
    double openai = 0, none_openai = 0;
    free(openai_content(port, "{\"messages\":[" ASK ",{\"role\":\"assistant\",\"content\":\"Let me look.\","
                              "\"tool_calls\":[{\"id\":\"toolu_1\",\"type\":\"function\",\"function\":{\"name\":"
                              "\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}}]},{\"role\":\"tool\","
                              "\"tool_call_id\":\"toolu_1\",\"name\":\"get_weather\",\"content\":\"18C\"},{\"role\":"
                              "\"user\",\"content\":\"And Rome?\"}],\"max_tokens\":4,\"tools\":[{\"type\":\"function\","
                              "\"function\":{\"name\":\"get_weather\",\"description\":\"the weather\",\"parameters\":"
                              "{\"type\":\"object\",\"properties\":{\"city\":{\"enum\":[\"Paris\",\"Rome\"]}},"
                              "\"required\":[\"city\"]}}},{\"type\":\"function\",\"function\":{\"name\":\"get_time\","
                              "\"parameters\":{\"type\":\"object\",\"properties\":{\"utc\":{\"type\":\"boolean\"}},"
                              "\"required\":[\"utc\"]}}}]}",
                       NULL, &openai));
    free(openai_content(port, "{\"messages\":[" ASK "],\"max_tokens\":4}", NULL, &none_openai));
#define HISTORY                                                                                                   \
    "\"messages\":[" ASK ",{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"Let me look.\"},"    \
    "{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"get_weather\",\"input\":{\"city\":\"Paris\"}}]},"      \
    "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_1\",\"content\":"          \
    "[{\"type\":\"text\",\"text\":\"18C\"}],\"is_error\":false},{\"type\":\"text\",\"text\":\"And Rome?\"}]}]"
    int status;
    cJSON *count = post_json(port, "/v1/messages/count_tokens", NULL, "{" HISTORY "," TWO_TOOLS "}", &status);
    CHECK_MSG(status == 200 && number_at(count, "input_tokens") == openai && openai > 0,
              "a history with a call and its result: %g tokens, OpenAI's %g", number_at(count, "input_tokens"), openai);
    cJSON_Delete(count);
    whole = message(port, "{" HISTORY "," TWO_TOOLS ",\"max_tokens\":4}");
    CHECK_MSG(whole && prompt_tokens(whole) == openai, "the history answered: %g tokens", prompt_tokens(whole));
    cJSON_Delete(whole);
    count = post_json(port, "/v1/messages/count_tokens", NULL,
                      "{\"messages\":[" ASK "]," TWO_TOOLS ",\"tool_choice\":{\"type\":\"none\"}}", &status);
    CHECK_MSG(status == 200 && number_at(count, "input_tokens") == none_openai,
              "tool_choice none: %g tokens, without tools %g", number_at(count, "input_tokens"), none_openai);
    cJSON_Delete(count);
#undef HISTORY
}

/* thinking adaptive and enabled are enable_thinking true, disabled false;
 * what the model reasons comes as a thinking block before the text (here
 * the reasoning a held answer opens), streamed as thinking deltas; an
 * assistant turn's thinking renders as its reasoning. */
static void test_thinking(int port)
{
    char *on = openai_content(port, "{" HELLO ",\"max_tokens\":16,\"chat_template_kwargs\":{\"enable_thinking\":true}}",
                              NULL, NULL);
    char *off = openai_content(port, "{" HELLO ",\"max_tokens\":16,\"chat_template_kwargs\":{\"enable_thinking\":"
                                     "false}}",
                               NULL, NULL);
    cJSON *adaptive = message(port, "{" HELLO ",\"max_tokens\":16,\"thinking\":{\"type\":\"adaptive\"}}");
    cJSON *disabled = message(port, "{" HELLO ",\"max_tokens\":16,\"thinking\":{\"type\":\"disabled\"}}");
    char *a = blocks_text(adaptive, "text", "text"), *b = blocks_text(disabled, "text", "text");
    check_same(a, on, "thinking adaptive");
    check_same(b, off, "thinking disabled");
    CHECK_MSG(a && b && strcmp(a, b) != 0, "thinking disabled answered as thinking does");
    free(a);
    free(b);
    cJSON_Delete(adaptive);
    cJSON_Delete(disabled);

    /* enabled: the budget read (at least 1024, less than max_tokens), the answer cut by a stop */
    long at = letter_at(on, 1);
    char stop[2] = {at > 0 ? on[at] : 'x', '\0'}, body[640];
    snprintf(body, sizeof body, "{" HELLO ",\"max_tokens\":1025,\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":"
             "1024},\"stop_sequences\":[\"%s\"]}", stop);
    cJSON *enabled = message(port, body);
    char *cut = blocks_text(enabled, "text", "text");
    CHECK_MSG(cut && on && !strncmp(cut, on, strlen(cut)) && strlen(cut) == (size_t)(strchr(on, stop[0]) - on),
              "thinking enabled: \"%s\" of \"%s\"", cut ? cut : "-", on ? on : "-");
    free(cut);
    cJSON_Delete(enabled);
    int status;
    cJSON *count = post_json(port, "/v1/messages/count_tokens", NULL,
                             "{" HELLO ",\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":2048}}", &status);
    double on_tokens = number_at(count, "input_tokens");
    cJSON_Delete(count);
    count = post_json(port, "/v1/messages/count_tokens", NULL, "{" HELLO ",\"thinking\":{\"type\":\"disabled\"}}",
                      &status);
    CHECK_MSG(on_tokens > 0 && number_at(count, "input_tokens") > on_tokens, "thinking off renders the empty span: "
              "%g tokens, on %g", number_at(count, "input_tokens"), on_tokens);
    cJSON_Delete(count);
    free(on);
    free(off);

    /* a thinking block: the reasoning the held answer opens (the random model never closes it) */
    char *reasoning = NULL;
    free(openai_content(port, "{" HELLO ",\"max_tokens\":16,\"chat_template_kwargs\":{\"enable_thinking\":true},"
                              "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"s\","
                              "\"schema\":" OK_SCHEMA "}}}",
                        &reasoning, NULL));
    cJSON *whole = message(port, "{" HELLO ",\"max_tokens\":16,\"thinking\":{\"type\":\"adaptive\"}," FORMAT "}");
    char *thinking = blocks_text(whole, "thinking", "thinking"), kinds[16];
    block_kinds(whole, kinds, sizeof kinds);
    check_same(thinking, reasoning, "the thinking block");
    const cJSON *block = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(whole, "content"), 0);
    CHECK_MSG(kinds[0] == 'k' && reasoning && reasoning[0] &&
                  cJSON_IsString(cJSON_GetObjectItemCaseSensitive(block, "signature")),
              "blocks %s", kinds);
    cJSON *streamed = streamed_message(port, "{\"stream\":true," HELLO ",\"max_tokens\":16,\"thinking\":{\"type\":"
                                             "\"adaptive\"}," FORMAT "}");
    check_streamed_same(streamed, whole, "thinking");
    cJSON_Delete(streamed);
    cJSON_Delete(whole);
    free(thinking);
    free(reasoning);

    /* an assistant's thinking is its reasoning (the signature Anthropic's: read, not checked) */
    double openai = 0;
    free(openai_content(port, "{\"messages\":[" ASK ",{\"role\":\"assistant\",\"content\":\"Sunny.\","
                              "\"reasoning_content\":\"Look it up.\"},{\"role\":\"user\",\"content\":\"Sure?\"}],"
                              "\"max_tokens\":4}",
                        NULL, &openai));
    count = post_json(port, "/v1/messages/count_tokens", NULL,
                      "{\"messages\":[" ASK ",{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\",\"thinking\":"
                      "\"Look it up.\",\"signature\":\"c2ln\"},{\"type\":\"text\",\"text\":\"Sunny.\"}]},{\"role\":"
                      "\"user\",\"content\":\"Sure?\"}]}",
                      &status);
    CHECK_MSG(status == 200 && number_at(count, "input_tokens") == openai, "an assistant's thinking: %g, OpenAI's %g",
              number_at(count, "input_tokens"), openai);
    cJSON_Delete(count);
}

/* A reasoning reset: the tiny model answers "Please 42" with text, then
 * closes a reasoning span it never opened (the OpenAI stream marks its
 * snapshot reset), so what went out as text was reasoning. A stream cannot
 * take text back: the text block stops, the reasoning comes in a thinking
 * block marked reset, the answer in a text block after it; the whole
 * message has the thinking and the text. */
static void test_reset(int port)
{
#define PLEASE "\"messages\":[{\"role\":\"user\",\"content\":\"Please 42\"}],\"max_tokens\":96,\"temperature\":0"
    test_response response;
    int sent = test_request(port, "POST", "/v1/chat/completions", NULL, "{\"stream\":true," PLEASE "}", &response);
    bool reset = sent == 0 && strstr(response.body, "\"reset\":true");
    free(response.raw);
    CHECK_MSG(reset, "the model makes no reasoning reset for this prompt any more: find one that does");
    if (!reset)
        return;
    cJSON *whole = message(port, "{" PLEASE "}");
    cJSON *streamed = streamed_message(port, "{\"stream\":true," PLEASE "}");
    char kinds[16] = "", streamed_kinds[16] = "";
    block_kinds(whole, kinds, sizeof kinds);
    block_kinds(streamed, streamed_kinds, sizeof streamed_kinds);
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(streamed, "content");
    char *thinking = blocks_text(whole, "thinking", "thinking"), *text = blocks_text(whole, "text", "text");
    const char *shown = string_at(cJSON_GetArrayItem(content, 0), "text");
    CHECK_MSG(!strcmp(kinds, "kt") && !strcmp(streamed_kinds, "tkt") && thinking && text &&
                  !strcmp(string_at(cJSON_GetArrayItem(content, 1), "thinking"), thinking) &&
                  !strcmp(string_at(cJSON_GetArrayItem(content, 2), "text"), text) && shown[0] &&
                  !strncmp(thinking, shown + strspn(shown, " "), strlen(shown + strspn(shown, " "))),
              "a reset: the message's blocks %s, the stream's %s", kinds, streamed_kinds);
    const cJSON *mark = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(content, 1), "bmoe");
    CHECK_MSG(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(mark, "reset")) &&
                  !cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(content, 2), "bmoe"),
              "the thinking block after the reset is marked, the next is not");
    CHECK(!strcmp(string_at(streamed, "stop_reason"), string_at(whole, "stop_reason")));
    free(thinking);
    free(text);
    cJSON_Delete(streamed);
    cJSON_Delete(whole);
#undef PLEASE
}

/* count_tokens: the prompt's tokens, what the same request's usage counts
 * (evaluated and from the cache), and what the OpenAI endpoint counts. */
static void test_count(int port)
{
    double openai = 0;
    free(openai_content(port, "{\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"}," ASK "],"
                              "\"max_tokens\":2}",
                        NULL, &openai));
    int status;
    cJSON *count = post_json(port, "/v1/messages/count_tokens", NULL,
                             "{\"model\":\"tiny\",\"system\":\"Be brief.\",\"messages\":[" ASK "]}", &status);
    cJSON *whole = message(port, "{\"model\":\"tiny\",\"system\":\"Be brief.\",\"messages\":[" ASK "],"
                                 "\"max_tokens\":2}");
    double counted = number_at(count, "input_tokens");
    CHECK_MSG(status == 200 && cJSON_GetArraySize(count) == 1 && counted > 0 && counted == prompt_tokens(whole) &&
                  counted == openai,
              "count_tokens %g, usage %g, OpenAI's %g", counted, prompt_tokens(whole), openai);
    const cJSON *usage = cJSON_GetObjectItemCaseSensitive(whole, "usage");
    CHECK_MSG(number_at(usage, "cache_read_input_tokens") ==
                  number_at(cJSON_GetObjectItemCaseSensitive(whole, "bmoe"), "n_reused"),
              "cache_read_input_tokens is what the cache served");
    cJSON_Delete(whole);
    cJSON_Delete(count);
}

/* status and Anthropic's error shape: {"type": "error", "error": {"type", "message"}}, the message holding word. */
static void check_refused(int port, const char *method, const char *path, const char *extra, const char *body,
                          int status, const char *type, const char *word)
{
    test_response response;
    int fd = test_request_send(port, method, path, extra, body, body ? strlen(body) : 0);
    if (fd < 0 || test_response_read(fd, &response) != 0) {
        CHECK_MSG(false, "%s %s: no answer", method, path);
        return;
    }
    cJSON *root = cJSON_Parse(response.body);
    const cJSON *error = cJSON_GetObjectItemCaseSensitive(root, "error");
    CHECK_MSG(response.status == status && cJSON_GetArraySize(root) == 2 && !strcmp(string_at(root, "type"), "error") &&
                  cJSON_GetArraySize(error) == 2 && !strcmp(string_at(error, "type"), type) &&
                  (!word || strstr(string_at(error, "message"), word)),
              "%s %s: %d %s (expected %d %s, \"%s\")", path, body ? body : "", response.status,
              response.body ? response.body : "", status, type, word ? word : "");
    cJSON_Delete(root);
    free(response.raw);
}

static void test_refusals(int port)
{
    static const struct {
        const char *body;
        int status;
        const char *type, *word;
    } cases[] = {
        {"{" HELLO "}", 400, "invalid_request_error", "max_tokens"},
        {"{" HELLO ",\"max_tokens\":0}", 400, "invalid_request_error", "max_tokens"},
        {"{\"max_tokens\":4}", 400, "invalid_request_error", "messages"},
        {"{\"max_tokens\":4,\"messages\":[]}", 400, "invalid_request_error", "messages"},
        {"{\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\",\"source\":{\"type\":"
         "\"base64\",\"media_type\":\"image/png\",\"data\":\"aGk=\"}}]}]}",
         400, "invalid_request_error", "image"},
        {"{\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"document\",\"source\":{}}]}]}",
         400, "invalid_request_error", "document"},
        {"{\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":"
         "\"t\",\"content\":[{\"type\":\"image\",\"source\":{}}]}]}]}",
         400, "invalid_request_error", "image"},
        {"{\"max_tokens\":4," HELLO ",\"frequency_penalty\":1}", 400, "invalid_request_error", "frequency_penalty"},
        {"{\"max_tokens\":4," HELLO ",\"mcp_servers\":[{\"type\":\"url\"}]}", 400, "invalid_request_error",
         "mcp_servers"},
        {"{\"max_tokens\":4," HELLO ",\"container\":\"c\"}", 400, "invalid_request_error", "container"},
        {"{\"max_tokens\":4," HELLO "," TWO_TOOLS ",\"tool_choice\":{\"type\":\"required\"}}", 400,
         "invalid_request_error", "tool_choice"},
        {"{\"max_tokens\":4," HELLO "," TWO_TOOLS ",\"tool_choice\":\"any\"}", 400, "invalid_request_error",
         "tool_choice"},
        {"{\"max_tokens\":4," HELLO "," TWO_TOOLS ",\"tool_choice\":{\"type\":\"tool\"}}", 400,
         "invalid_request_error", "name"},
        {"{\"max_tokens\":4," HELLO "," TWO_TOOLS ",\"tool_choice\":{\"type\":\"tool\",\"name\":\"get_news\"}}", 400,
         "invalid_request_error", "get_news"},
        {"{\"max_tokens\":4," HELLO ",\"tool_choice\":{\"type\":\"any\"}}", 400, "invalid_request_error",
         "needs tools"},
        {"{\"max_tokens\":4," HELLO "," TWO_TOOLS ",\"tool_choice\":{\"type\":\"auto\",\"disable_parallel_tool_use\":"
         "true}}",
         400, "invalid_request_error", "disable_parallel_tool_use"},
        {"{\"max_tokens\":4," HELLO ",\"tools\":[{\"type\":\"web_search_20250305\",\"name\":\"web_search\"}]}", 400,
         "invalid_request_error", "web_search_20250305"},
        {"{\"max_tokens\":4," HELLO ",\"tools\":[{\"name\":\"f\"}]}", 400, "invalid_request_error", "input_schema"},
        {"{\"max_tokens\":4," HELLO ",\"tools\":[{\"name\":\"f\",\"input_schema\":{\"type\":\"object\"},\"strict\":"
         "true}]}",
         400, "invalid_request_error", "strict"},
        {"{\"max_tokens\":4," HELLO ",\"temperature\":1.5}", 400, "invalid_request_error", "temperature"},
        {"{\"max_tokens\":4," HELLO ",\"top_k\":-1}", 400, "invalid_request_error", "top_k"},
        {"{\"max_tokens\":4," HELLO ",\"stop_sequences\":[\"a\",\"b\",\"c\",\"d\",\"e\"]}", 400,
         "invalid_request_error", "stop_sequences"},
        {"{\"max_tokens\":2048," HELLO ",\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":512}}", 400,
         "invalid_request_error", "budget_tokens"},
        {"{\"max_tokens\":1024," HELLO ",\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":1024}}", 400,
         "invalid_request_error", "less than max_tokens"},
        {"{\"max_tokens\":4," HELLO ",\"thinking\":{\"type\":\"between_tools\"}}", 400, "invalid_request_error",
         "thinking.type"},
        {"{\"max_tokens\":4," HELLO ",\"thinking\":{\"type\":\"adaptive\",\"display\":\"omitted\"}}", 400,
         "invalid_request_error", "display"},
        {"{\"max_tokens\":4," HELLO ",\"output_config\":{\"effort\":\"max\"}}", 400, "invalid_request_error", "effort"},
        {"{\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"assistant\","
         "\"content\":\"b\"}]}",
         400, "invalid_request_error", "prefill"},
        {"{\"max_tokens\":4,\"messages\":[{\"role\":\"tool\",\"content\":\"a\"}]}", 400, "invalid_request_error",
         "role"},
        {"{\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":\"a\",\"name\":\"b\"}]}", 400,
         "invalid_request_error", "name"},
        {"{\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":"
         "\"tool_result\",\"tool_use_id\":\"t\"}]}]}",
         400, "invalid_request_error", "tool_result"},
        {"{\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"assistant\",\"content\":"
         "[{\"type\":\"redacted_thinking\",\"data\":\"x\"}]},{\"role\":\"user\",\"content\":\"b\"}]}",
         400, "invalid_request_error", "redacted_thinking"},
        {"{\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"assistant\",\"content\":"
         "[{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"f\",\"input\":\"x\"}]},{\"role\":\"user\","
         "\"content\":\"b\"}]}",
         400, "invalid_request_error", "input"},
        {"{\"max_tokens\":4," HELLO ",\"stream\":false,\"stream\":true}", 400, "invalid_request_error", "twice"},
        {"{\"model\":\"claude-sonnet-4-5\",\"max_tokens\":4," HELLO "}", 404, "not_found_error", "claude-sonnet-4-5"},
        {"{\"messages\":", 400, "invalid_request_error", "JSON"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_refused(port, "POST", "/v1/messages", NULL, cases[i].body, cases[i].status, cases[i].type,
                      cases[i].word);
    check_refused(port, "POST", "/v1/messages/count_tokens", NULL, "{\"max_tokens\":4," HELLO "}", 400,
                  "invalid_request_error", "count_tokens");
    check_refused(port, "POST", "/v1/messages/count_tokens", NULL, "{\"stream\":true," HELLO "}", 400,
                  "invalid_request_error", "count_tokens");
    check_refused(port, "GET", "/v1/messages", NULL, NULL, 405, "invalid_request_error", "POST");
    check_refused(port, "POST", "/v1/messages/batches", NULL, "{}", 404, "not_found_error", NULL);
}

/* The API key: x-api-key (Anthropic's clients' header) or Authorization:
 * Bearer on /v1/messages; x-api-key nowhere else. */
static void test_api_key(void)
{
    test_server server;
    const char *args[] = {"-m", model, "-t", "1", "--api-key", "sesame", NULL};
    if (test_server_start(&server, args) != 0) {
        CHECK_MSG(false, "the server with a key did not start");
        return;
    }
    static const char body[] = "{\"max_tokens\":2," HELLO "}";
    check_refused(server.port, "POST", "/v1/messages", NULL, body, 401, "authentication_error", "x-api-key");
    check_refused(server.port, "POST", "/v1/messages", "x-api-key: open\r\n", body, 401, "authentication_error", NULL);
    static const char *const keys[] = {"x-api-key: sesame\r\n", "X-Api-Key: sesame\r\n",
                                       "Authorization: Bearer sesame\r\n"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        int status;
        cJSON *root = post_json(server.port, "/v1/messages", keys[i], body, &status);
        CHECK_MSG(status == 200 && !strcmp(string_at(root, "type"), "message"), "%s: %d", keys[i], status);
        cJSON_Delete(root);
        root = post_json(server.port, "/v1/messages/count_tokens", keys[i], "{" HELLO "}", &status);
        CHECK_MSG(status == 200 && number_at(root, "input_tokens") > 0, "count_tokens with %s: %d", keys[i], status);
        cJSON_Delete(root);
    }
    int status;
    cJSON *root = post_json(server.port, "/v1/chat/completions", "x-api-key: sesame\r\n", body, &status);
    CHECK_MSG(status == 401, "x-api-key on /v1/chat/completions: %d", status);
    cJSON_Delete(root);
    CHECK(test_server_stop(&server, SIGTERM) == 0);
}

int main(void)
{
    test_server server;
    if (test_tiny_server("server-anthropic", model, sizeof model, &server) != 0)
        return test_finish();
    test_text(server.port);
    test_stops(server.port);
    test_end_turn(server.port);
    test_system(server.port);
    test_tools(server.port);
    test_thinking(server.port);
    test_reset(server.port);
    test_count(server.port);
    test_refusals(server.port);
    CHECK_MSG(test_server_stop(&server, SIGTERM) == 0, "SIGTERM did not end the server with status 0");
    test_api_key();
    return test_finish();
}
