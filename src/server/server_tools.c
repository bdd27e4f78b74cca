/* Tool calls in answers: a chat request's tools reach the template, and
 * the calls the model writes (in its template's format, bmoe_chat_tool_format)
 * come back as OpenAI's tool_calls, with ids of this server's making. */
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "server.h"

bool server_tools_active(const server *s, const completion_request *q)
{
    return q->chat && q->tools_json && !q->tools_off && bmoe_chat_tool_format(s->chat) != BMOE_TOOL_FORMAT_NONE;
}

cJSON *server_tool_calls(const char *calls_json, const char *answer_id, bool streamed)
{
    cJSON *calls = cJSON_Parse(calls_json);
    cJSON *out = cJSON_CreateArray();
    int index = 0;
    const cJSON *call;
    cJSON_ArrayForEach(call, calls) {
        cJSON *entry = cJSON_CreateObject();
        char id[80];
        snprintf(id, sizeof id, "call-%s-%d", answer_id, index);
        if (streamed)
            cJSON_AddNumberToObject(entry, "index", index);
        cJSON_AddStringToObject(entry, "id", id);
        cJSON_AddStringToObject(entry, "type", "function");
        cJSON *function = cJSON_AddObjectToObject(entry, "function");
        cJSON_AddStringToObject(function, "name", cJSON_GetObjectItemCaseSensitive(call, "name")->valuestring);
        cJSON_AddStringToObject(function, "arguments",
                                cJSON_GetObjectItemCaseSensitive(call, "arguments")->valuestring);
        cJSON_AddItemToArray(out, entry);
        index++;
    }
    cJSON_Delete(calls);
    return out;
}
