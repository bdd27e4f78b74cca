/* The server's tool-call answers on fixed answer texts (a model that writes
 * calls is not here): the message of a non-streamed answer (content around
 * the calls, null when none is left, OpenAI's tool_calls with ids, the
 * finish reason), and the end of a streamed one fed in pieces: the text
 * shown plus the end's deltas say what the message says, each call with its
 * index, and no byte of a call shows as content. Harmony's answers are
 * as the reasoning split hands them on: each call in harmony_call.h's
 * shape, its arguments kept as the model wrote them. */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "server.h"
#include "test.h"

#define CALL_A "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"
#define CALL_B "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>"
#define HARMONY_A                                                                                              \
    "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Paris\"}"  \
    "<|call|>"
#define HARMONY_B "<|start|>assistant to=functions.get_time<|channel|>commentary json<|message|>{}<|call|>"

/* The message server_answer_message makes of answer (finish in and out). */
static cJSON *message_of(enum bmoe_tool_format format, const char *answer, const char **finish)
{
    cJSON *message = cJSON_CreateObject();
    CHECK(server_answer_message(message, format, answer, "chatcmpl-7", finish) == 0);
    return message;
}

/* Whether calls[index] is OpenAI's call of name with arguments (JSON text),
 * id "call-chatcmpl-7-INDEX", and an "index" exactly when streamed. */
static bool is_tool_call(const cJSON *calls, int index, const char *name, const char *arguments, bool streamed)
{
    const cJSON *call = cJSON_GetArrayItem(calls, index);
    const cJSON *function = cJSON_GetObjectItemCaseSensitive(call, "function");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(call, "id");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(call, "type");
    const cJSON *got_name = cJSON_GetObjectItemCaseSensitive(function, "name");
    const cJSON *got_arguments = cJSON_GetObjectItemCaseSensitive(function, "arguments");
    const cJSON *at = cJSON_GetObjectItemCaseSensitive(call, "index");
    char want_id[64];
    snprintf(want_id, sizeof want_id, "call-chatcmpl-7-%d", index);
    return cJSON_IsString(id) && strcmp(id->valuestring, want_id) == 0 && cJSON_IsString(type) &&
           strcmp(type->valuestring, "function") == 0 && cJSON_IsString(got_name) &&
           strcmp(got_name->valuestring, name) == 0 && cJSON_IsString(got_arguments) &&
           strcmp(got_arguments->valuestring, arguments) == 0 &&
           (streamed ? cJSON_IsNumber(at) && at->valueint == index : at == NULL);
}

static const char *content_of(const cJSON *message)
{
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(message, "content");
    return cJSON_IsString(content) ? content->valuestring : NULL;
}

static void check_messages(void)
{
    const char *finish = "stop";
    cJSON *message = message_of(BMOE_TOOL_FORMAT_JSON, "Let me check.\n\n" CALL_A, &finish);
    const cJSON *calls = cJSON_GetObjectItemCaseSensitive(message, "tool_calls");
    CHECK(content_of(message) && strcmp(content_of(message), "Let me check.") == 0);
    CHECK(cJSON_GetArraySize(calls) == 1 && is_tool_call(calls, 0, "get_weather", "{\"city\":\"Paris\"}", false));
    CHECK(strcmp(finish, "tool_calls") == 0);
    cJSON_Delete(message);
    /* calls only: content null; two calls numbered */
    finish = "stop";
    message = message_of(BMOE_TOOL_FORMAT_JSON, "\n" CALL_A "\n" CALL_B "\n", &finish);
    calls = cJSON_GetObjectItemCaseSensitive(message, "tool_calls");
    CHECK(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(message, "content")));
    CHECK(cJSON_GetArraySize(calls) == 2 && is_tool_call(calls, 1, "get_time", "{}", false));
    cJSON_Delete(message);
    /* no call: the answer as it is, the finish as it was */
    finish = "stop";
    message = message_of(BMOE_TOOL_FORMAT_JSON, " plain <tool \n", &finish);
    CHECK(content_of(message) && strcmp(content_of(message), " plain <tool \n") == 0);
    CHECK(!cJSON_HasObjectItem(message, "tool_calls") && strcmp(finish, "stop") == 0);
    cJSON_Delete(message);
    /* cut short by max_tokens: still "length" */
    finish = "length";
    message = message_of(BMOE_TOOL_FORMAT_JSON, CALL_A, &finish);
    CHECK(strcmp(finish, "length") == 0 &&
          cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(message, "tool_calls")) == 1);
    cJSON_Delete(message);
    /* a model that does not write this format: text */
    finish = "stop";
    message = message_of(BMOE_TOOL_FORMAT_NONE, CALL_A, &finish);
    CHECK(content_of(message) && strcmp(content_of(message), CALL_A) == 0 && strcmp(finish, "stop") == 0);
    cJSON_Delete(message);
    /* harmony: a preamble and a call, the arguments as written; two calls, no content */
    finish = "stop";
    message = message_of(BMOE_TOOL_FORMAT_HARMONY, "Checking the weather." HARMONY_A, &finish);
    calls = cJSON_GetObjectItemCaseSensitive(message, "tool_calls");
    CHECK(content_of(message) && strcmp(content_of(message), "Checking the weather.") == 0);
    CHECK(cJSON_GetArraySize(calls) == 1 && is_tool_call(calls, 0, "get_weather", "{\"city\": \"Paris\"}", false));
    CHECK(strcmp(finish, "tool_calls") == 0);
    cJSON_Delete(message);
    finish = "stop";
    message = message_of(BMOE_TOOL_FORMAT_HARMONY, HARMONY_A HARMONY_B, &finish);
    calls = cJSON_GetObjectItemCaseSensitive(message, "tool_calls");
    CHECK(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(message, "content")) && strcmp(finish, "tool_calls") == 0);
    CHECK(cJSON_GetArraySize(calls) == 2 && is_tool_call(calls, 0, "get_weather", "{\"city\": \"Paris\"}", false) &&
          is_tool_call(calls, 1, "get_time", "{}", false));
    cJSON_Delete(message);
    /* harmony arguments that are no JSON object: the text as it is */
    static const char not_harmony[] =
        "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>Paris<|call|>";
    finish = "stop";
    message = message_of(BMOE_TOOL_FORMAT_HARMONY, not_harmony, &finish);
    CHECK(content_of(message) && strcmp(content_of(message), not_harmony) == 0 && strcmp(finish, "stop") == 0 &&
          !cJSON_HasObjectItem(message, "tool_calls"));
    cJSON_Delete(message);
}

/* answer streamed in pieces of step bytes through a split and ended: the
 * joined content (shown, then the end's content delta) and the end's
 * deltas. */
static cJSON *stream_of(enum bmoe_tool_format format, const char *answer, size_t step, char *joined,
                        size_t joined_size, const char **finish)
{
    bmoe_tool_split *split = bmoe_tool_split_create(format, NULL);
    size_t length = strlen(answer), fed = 0, used = 0;
    joined[0] = '\0';
    while (split && fed < length) {
        size_t n = step > length - fed ? length - fed : step;
        const char *show;
        size_t show_length;
        CHECK(bmoe_tool_split_feed(split, answer + fed, n, &show, &show_length, NULL) == 0);
        CHECK(used + show_length < joined_size);
        memcpy(joined + used, show, show_length);
        joined[used += show_length] = '\0';
        fed += n;
    }
    cJSON *deltas = split ? server_tool_stream_end(split, "chatcmpl-7", finish) : NULL;
    CHECK(deltas != NULL);
    const cJSON *delta;
    cJSON_ArrayForEach(delta, deltas) {
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(delta, "content");
        if (cJSON_IsString(content) && used + strlen(content->valuestring) < joined_size) {
            strcpy(joined + used, content->valuestring);
            used += strlen(content->valuestring);
        }
    }
    bmoe_tool_split_free(split);
    return deltas;
}

/* The stream says what the message says: content (up to the space the
 * message trims), the calls with their index, the finish reason. */
static void check_streams(void)
{
    static const struct {
        enum bmoe_tool_format format;
        const char *text;
    } answers[] = {
        {BMOE_TOOL_FORMAT_JSON, "Let me check.\n\n" CALL_A},
        {BMOE_TOOL_FORMAT_JSON, "A <tool_call> that is not one </tool_call> then " CALL_B " and after"},
        {BMOE_TOOL_FORMAT_JSON, "\n" CALL_A "\n" CALL_B "\n"},
        {BMOE_TOOL_FORMAT_JSON, "no call at all, just < and <tool"},
        {BMOE_TOOL_FORMAT_HARMONY, "Checking the weather." HARMONY_A},
        {BMOE_TOOL_FORMAT_HARMONY, HARMONY_A HARMONY_B},
        {BMOE_TOOL_FORMAT_HARMONY, "Sunny, <|start or not."},
    };
    static const size_t steps[] = {1, 3, 7, 1000};
    for (size_t a = 0; a < sizeof answers / sizeof answers[0]; a++) {
        const char *message_finish = "stop";
        cJSON *message = message_of(answers[a].format, answers[a].text, &message_finish);
        const cJSON *message_calls = cJSON_GetObjectItemCaseSensitive(message, "tool_calls");
        for (size_t s = 0; s < sizeof steps / sizeof steps[0]; s++) {
            char joined[512];
            const char *finish = "stop";
            cJSON *deltas = stream_of(answers[a].format, answers[a].text, steps[s], joined, sizeof joined, &finish);
            CHECK_MSG(strcmp(finish, message_finish) == 0, "answer %zu, pieces of %zu: finish %s, message %s", a,
                      steps[s], finish, message_finish);
            CHECK_MSG(!strstr(joined, "get_weather") && !strstr(joined, "get_time"),
                      "answer %zu, pieces of %zu: a call showed as content: \"%s\"", a, steps[s], joined);
            /* the message's content is the joined content without the space at its ends */
            const char *content = content_of(message);
            size_t begin = strspn(joined, " \n"), end = strlen(joined);
            while (end > begin && strchr(" \n", joined[end - 1]))
                end--;
            bool same = content ? (message_calls ? strlen(content) == end - begin &&
                                                       memcmp(joined + begin, content, end - begin) == 0
                                                 : strcmp(joined, content) == 0)
                                : end == begin;
            CHECK_MSG(same, "answer %zu, pieces of %zu: streamed \"%s\", message \"%s\"", a, steps[s], joined,
                      content ? content : "null");
            const cJSON *calls = NULL, *delta;
            cJSON_ArrayForEach(delta, deltas) {
                if (cJSON_HasObjectItem(delta, "tool_calls"))
                    calls = cJSON_GetObjectItemCaseSensitive(delta, "tool_calls");
            }
            CHECK(cJSON_GetArraySize(calls) == cJSON_GetArraySize(message_calls));
            for (int k = 0; k < cJSON_GetArraySize(calls); k++) {
                const cJSON *function =
                    cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(message_calls, k), "function");
                CHECK(is_tool_call(calls, k, cJSON_GetObjectItemCaseSensitive(function, "name")->valuestring,
                                   cJSON_GetObjectItemCaseSensitive(function, "arguments")->valuestring, true));
            }
            cJSON_Delete(deltas);
        }
        cJSON_Delete(message);
    }
}

/* The forced call's schema: each tool's name as a const beside its
 * parameters (an object of any keys without them), anyOf for several, the
 * one named alone, NULL with missing for a name not among them. */
static void check_forced_schema(void)
{
    static const char tools[] =
        "[{\"type\":\"function\",\"function\":{\"name\":\"a\",\"parameters\":{\"type\":\"object\","
        "\"properties\":{\"x\":{\"type\":\"integer\"}}}}},{\"type\":\"function\",\"function\":{\"name\":\"b\"}}]";
    static const char call_a[] = "{\"type\":\"object\",\"properties\":{\"name\":{\"const\":\"a\"},\"arguments\":"
                                 "{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"integer\"}}}},"
                                 "\"required\":[\"name\",\"arguments\"]}";
    static const char call_b[] = "{\"type\":\"object\",\"properties\":{\"name\":{\"const\":\"b\"},\"arguments\":"
                                 "{\"type\":\"object\"}},\"required\":[\"name\",\"arguments\"]}";
    bool missing = true;
    char *named = server_forced_call_schema(tools, "b", &missing);
    CHECK_MSG(named && !missing && strcmp(named, call_b) == 0, "named: %s", named ? named : "(none)");
    char *any = server_forced_call_schema(tools, NULL, &missing);
    char expected[1024];
    snprintf(expected, sizeof expected, "{\"anyOf\":[%s,%s]}", call_a, call_b);
    CHECK_MSG(any && !missing && strcmp(any, expected) == 0, "any: %s", any ? any : "(none)");
    CHECK(server_forced_call_schema(tools, "c", &missing) == NULL && missing);
    free(named);
    free(any);
}

int main(void)
{
    check_messages();
    check_streams();
    check_forced_schema();
    return test_finish();
}
