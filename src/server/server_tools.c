/* Tool calls in answers: a chat request's tools reach the template, and
 * the calls the model writes (in its template's format, bmoe_chat_tool_format)
 * come back as OpenAI's tool_calls, with ids of this server's making. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "server.h"

bool server_tools_active(const server *s, const completion_request *q)
{
    return q->chat && q->tools_json && !q->tools_off && bmoe_chat_tool_format(s->chat) != BMOE_TOOL_FORMAT_NONE;
}

/* OpenAI's tool_calls list from bmoe_chat_parse_tool_calls' JSON, ids made
 * from the answer's id; streamed: each with its "index" (a delta's shape).
 * NULL: out of memory. */
static cJSON *tool_calls(const char *calls_json, const char *answer_id, bool streamed)
{
    cJSON *calls = cJSON_Parse(calls_json);
    cJSON *out = calls ? cJSON_CreateArray() : NULL;
    int index = 0;
    const cJSON *call;
    cJSON_ArrayForEach(call, calls) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(call, "name");
        const cJSON *arguments = cJSON_GetObjectItemCaseSensitive(call, "arguments");
        cJSON *entry = cJSON_CreateObject(), *function = cJSON_CreateObject();
        char id[80];
        snprintf(id, sizeof id, "call-%s-%d", answer_id, index);
        bool made = out && entry && function && cJSON_IsString(name) && cJSON_IsString(arguments) &&
                    (!streamed || cJSON_AddNumberToObject(entry, "index", index)) &&
                    cJSON_AddStringToObject(entry, "id", id) && cJSON_AddStringToObject(entry, "type", "function") &&
                    cJSON_AddStringToObject(function, "name", name->valuestring) &&
                    cJSON_AddStringToObject(function, "arguments", arguments->valuestring);
        if (made && cJSON_AddItemToObject(entry, "function", function)) {
            function = NULL;
            made = cJSON_AddItemToArray(out, entry);
        } else {
            made = false;
        }
        if (!made) {
            cJSON_Delete(function);
            cJSON_Delete(entry);
            cJSON_Delete(out);
            out = NULL;
            break;
        }
        index++;
    }
    cJSON_Delete(calls);
    return out;
}

/* text[0, *length) without the whitespace at its ends: its start, *length
 * updated. */
static const char *trimmed(const char *text, size_t *length)
{
    size_t begin = 0, end = *length;
    while (begin < end && strchr(" \t\r\n", text[begin]))
        begin++;
    while (end > begin && strchr(" \t\r\n", text[end - 1]))
        end--;
    *length = end - begin;
    return text + begin;
}

int server_answer_message(cJSON *message, enum bmoe_tool_format format, const char *answer, const char *answer_id,
                          const char **finish)
{
    char *content = NULL, *calls = NULL;
    size_t length = 0;
    int32_t count = bmoe_chat_parse_tool_calls(format, answer, strlen(answer), &content, &length, &calls, NULL);
    if (count < 0)
        return -1;
    const char *kept = trimmed(content, &length);
    cJSON *list = count > 0 ? tool_calls(calls, answer_id, false) : NULL;
    char *text = count > 0 && length > 0 ? strndup(kept, length) : NULL;
    bool made;
    if (count == 0)
        made = cJSON_AddStringToObject(message, "content", answer);
    else if (length > 0)
        made = text && cJSON_AddStringToObject(message, "content", text);
    else
        made = cJSON_AddNullToObject(message, "content");
    made = made && (count == 0 || (list && cJSON_AddItemToObject(message, "tool_calls", list)));
    if (made && count > 0 && strcmp(*finish, "stop") == 0)
        *finish = "tool_calls";
    if (!made && count > 0 && !cJSON_GetObjectItemCaseSensitive(message, "tool_calls"))
        cJSON_Delete(list);
    free(text);
    bmoe_free(content);
    bmoe_free(calls);
    return made ? 0 : -1;
}

cJSON *server_tool_stream_end(bmoe_tool_split *split, const char *answer_id, const char **finish)
{
    const char *rest;
    size_t rest_length;
    char *calls = NULL;
    int32_t count = bmoe_tool_split_finish(split, &rest, &rest_length, &calls, NULL);
    if (count < 0)
        return NULL;
    /* after the calls, only space left: a content "\n" would say nothing */
    size_t kept_length = rest_length;
    trimmed(rest, &kept_length);
    cJSON *deltas = cJSON_CreateArray();
    bool made = deltas != NULL;
    if (made && rest_length > 0 && (count == 0 || kept_length > 0)) {
        char *text = strndup(rest, rest_length);
        cJSON *delta = cJSON_CreateObject();
        made = text && delta && cJSON_AddStringToObject(delta, "content", text) && cJSON_AddItemToArray(deltas, delta);
        if (!made)
            cJSON_Delete(delta);
        free(text);
    }
    if (made && count > 0) {
        cJSON *delta = cJSON_CreateObject(), *list = tool_calls(calls, answer_id, true);
        made = delta && list && cJSON_AddItemToObject(delta, "tool_calls", list);
        if (!made)
            cJSON_Delete(list);
        made = made && cJSON_AddItemToArray(deltas, delta);
        if (!made)
            cJSON_Delete(delta);
        if (made && strcmp(*finish, "stop") == 0)
            *finish = "tool_calls";
    }
    bmoe_free(calls);
    if (!made) {
        cJSON_Delete(deltas);
        return NULL;
    }
    return deltas;
}

char *server_forced_call_schema(const char *tools_json, const char *name, bool *missing)
{
    *missing = false;
    cJSON *tools = cJSON_Parse(tools_json);
    cJSON *alternatives = cJSON_CreateArray();
    const cJSON *tool;
    cJSON_ArrayForEach(tool, tools) {
        const cJSON *function = cJSON_GetObjectItemCaseSensitive(tool, "function");
        const cJSON *tool_name = cJSON_GetObjectItemCaseSensitive(function, "name");
        const cJSON *parameters = cJSON_GetObjectItemCaseSensitive(function, "parameters");
        if (!cJSON_IsString(tool_name) || (name && strcmp(name, tool_name->valuestring) != 0))
            continue;
        cJSON *call = cJSON_CreateObject();
        bool typed = cJSON_AddStringToObject(call, "type", "object") != NULL;
        cJSON *properties = cJSON_AddObjectToObject(call, "properties");
        cJSON *name_schema = cJSON_AddObjectToObject(properties, "name");
        cJSON *arguments = parameters ? cJSON_Duplicate(parameters, true) : cJSON_CreateObject();
        if (!parameters)
            cJSON_AddStringToObject(arguments, "type", "object");
        static const char *const required[] = {"name", "arguments"};
        cJSON *required_list = cJSON_CreateStringArray(required, 2);
        bool made = typed && properties && name_schema && arguments && required_list &&
                    cJSON_AddStringToObject(name_schema, "const", tool_name->valuestring) &&
                    cJSON_AddItemToObject(properties, "arguments", arguments);
        if (!made)
            cJSON_Delete(arguments);
        made = made && cJSON_AddItemToObject(call, "required", required_list);
        if (!made)
            cJSON_Delete(required_list);
        if (!made || !cJSON_AddItemToArray(alternatives, call)) {
            cJSON_Delete(call);
            cJSON_Delete(alternatives);
            cJSON_Delete(tools);
            return NULL;
        }
    }
    cJSON_Delete(tools);
    int count = cJSON_GetArraySize(alternatives);
    if (count == 0) {
        *missing = alternatives != NULL;
        cJSON_Delete(alternatives);
        return NULL;
    }
    cJSON *schema = NULL;
    if (count == 1) {
        schema = cJSON_DetachItemFromArray(alternatives, 0);
        cJSON_Delete(alternatives);
    } else {
        schema = cJSON_CreateObject();
        if (!schema || !cJSON_AddItemToObject(schema, "anyOf", alternatives)) {
            cJSON_Delete(schema);
            cJSON_Delete(alternatives);
            return NULL;
        }
    }
    char *text = cJSON_PrintUnformatted(schema);
    cJSON_Delete(schema);
    return text;
}
