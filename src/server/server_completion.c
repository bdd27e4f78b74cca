/* /v1/chat/completions and /v1/completions, non-streamed: the body read
 * strictly (a field that would change the answer and that bmoe does not
 * do is a 400 naming it, never ignored), the prompt rendered with the
 * model's chat template (or taken as text), one generation on the shared
 * context in its turn, and the answer with usage and the run's figures. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "server.h"

/* A request's own shape nests 5 deep (body, messages, a message, its
 * parts, a part), tool schemas and call arguments deeper (JSON Schema
 * nests a level or two per property): a deeper body is refused before
 * cJSON's recursive parser, printer and free walk it. */
#define SERVER_MAX_JSON_DEPTH 64


bool server_listed(const char *const *names, size_t count, const char *key)
{
    for (size_t i = 0; i < count; i++)
        if (strcmp(key, names[i]) == 0)
            return true;
    return false;
}

bool server_given_twice(const cJSON *object, const cJSON *field)
{
    for (const cJSON *earlier = object->child; earlier != field; earlier = earlier->next)
        if (strcmp(earlier->string, field->string) == 0)
            return true;
    return false;
}

/* Fields accepted that do not change the answer. */
static bool harmless(const char *key)
{
    static const char *const names[] = {"user", "stream_options", "metadata", "store", "service_tier"};
    return server_listed(names, sizeof names / sizeof names[0], key);
}

static bool is_number(const cJSON *item, double low, double high)
{
    return cJSON_IsNumber(item) && isfinite(item->valuedouble) && item->valuedouble >= low &&
           item->valuedouble <= high;
}

#define BAD(param, ...)                                                                                           \
    do {                                                                                                          \
        server_error_reply(reply, 400, "invalid_request_error", param, "invalid_request", __VA_ARGS__);           \
        return -1;                                                                                                \
    } while (0)

/* A message's content: a string, or a list of text parts joined. The text
 * is owned by the JSON (a string) or by *joined (parts). */
static int message_content(const cJSON *content, const char *param, char **joined, const char **text,
                           size_t *length, server_reply *reply)
{
    *joined = NULL;
    if (cJSON_IsString(content)) {
        *text = content->valuestring;
        *length = strlen(content->valuestring);
        return 0;
    }
    if (cJSON_IsNull(content) || !content) {
        *text = "";
        *length = 0;
        return 0;
    }
    if (!cJSON_IsArray(content))
        BAD(param, "%s must be a string or a list of text parts", param);
    const cJSON *part;
    cJSON_ArrayForEach(part, content) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
        const cJSON *value = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "text") != 0)
            BAD(param, "%s: only parts of type \"text\" are supported (bmoe reads text only)", param);
        if (!cJSON_IsString(value))
            BAD(param, "%s: a text part needs a string \"text\"", param);
    }
    return server_join_blocks(content, "text", "text", joined, text, length, reply);
}

int server_join_blocks(const cJSON *list, const char *type, const char *field, char **joined, const char **text,
                       size_t *length, server_reply *reply)
{
    size_t total = 0;
    const cJSON *block;
    cJSON_ArrayForEach(block, list) {
        const cJSON *kind = cJSON_GetObjectItemCaseSensitive(block, "type");
        if (cJSON_IsString(kind) && strcmp(kind->valuestring, type) == 0)
            total += strlen(cJSON_GetObjectItemCaseSensitive(block, field)->valuestring);
    }
    char *out = malloc(total + 1);
    if (!out) {
        server_error_reply(reply, 500, "server_error", NULL, NULL, "out of memory");
        return -1;
    }
    size_t used = 0;
    cJSON_ArrayForEach(block, list) {
        const cJSON *kind = cJSON_GetObjectItemCaseSensitive(block, "type");
        if (!cJSON_IsString(kind) || strcmp(kind->valuestring, type) != 0)
            continue;
        const char *piece = cJSON_GetObjectItemCaseSensitive(block, field)->valuestring;
        size_t n = strlen(piece);
        memcpy(out + used, piece, n);
        used += n;
    }
    out[used] = '\0';
    *joined = out;
    *text = out;
    *length = used;
    return 0;
}

/* OpenAI's list of {"id", "type": "function", "function": {"name",
 * "arguments"}} (Ollama's has no id and type); the library hands the
 * template the arguments as an object. */
int server_read_message_calls(const cJSON *calls, const char *param, char **json, server_reply *reply)
{
    if (!cJSON_IsArray(calls))
        BAD(param, "%s must be a list", param);
    const cJSON *call;
    cJSON_ArrayForEach(call, calls) {
        const cJSON *function = cJSON_GetObjectItemCaseSensitive(call, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(function, "name");
        const cJSON *arguments = cJSON_GetObjectItemCaseSensitive(function, "arguments");
        if (!cJSON_IsString(name) || !(cJSON_IsString(arguments) || cJSON_IsObject(arguments)))
            BAD(param, "%s: each call needs a function with a string name and arguments", param);
        cJSON *parsed = cJSON_IsString(arguments) ? cJSON_Parse(arguments->valuestring) : NULL;
        bool object = cJSON_IsObject(parsed);
        cJSON_Delete(parsed);
        if (cJSON_IsString(arguments) && !object)
            BAD(param, "%s: a call's arguments must be a JSON object", param);
    }
    *json = cJSON_PrintUnformatted(calls);
    if (!*json) {
        server_error_reply(reply, 500, "server_error", NULL, NULL, "out of memory");
        return -1;
    }
    return 0;
}

int server_messages_begin(const cJSON *list, bool may_be_empty, int slots, completion_request *q, char ***owned,
                          server_reply *reply)
{
    int count = cJSON_GetArraySize(list);
    if (!cJSON_IsArray(list) || (count == 0 && !may_be_empty))
        BAD("messages", "messages must be a %slist", may_be_empty ? "" : "non-empty ");
    if (count > SERVER_MAX_MESSAGES)
        BAD("messages", "at most %d messages", SERVER_MAX_MESSAGES);
    if (count == 0)
        return 0;
    q->messages = calloc((size_t)count, sizeof *q->messages);
    *owned = calloc((size_t)slots * (size_t)count, sizeof **owned);
    if (*owned)
        q->n_owned = slots * count;
    if (!q->messages || !*owned) {
        server_error_reply(reply, 500, "server_error", NULL, NULL, "out of memory");
        return -1;
    }
    return count;
}

int server_message_begin(const cJSON *message, const char *param, const char *const *keys, size_t n_keys,
                         const char **role, server_reply *reply)
{
    if (!cJSON_IsObject(message))
        BAD(param, "%s must be an object", param);
    const cJSON *field;
    cJSON_ArrayForEach(field, message) {
        if (!server_listed(keys, n_keys, field->string))
            BAD(param, "%s.%s is not supported", param, field->string);
    }
    field = cJSON_GetObjectItemCaseSensitive(message, "role");
    if (!cJSON_IsString(field) ||
        (strcmp(field->valuestring, "system") && strcmp(field->valuestring, "user") &&
         strcmp(field->valuestring, "assistant") && strcmp(field->valuestring, "tool")))
        BAD(param, "%s.role must be system, user, assistant or tool", param);
    *role = field->valuestring;
    return 0;
}

static int read_messages(const cJSON *list, completion_request *q, char ***owned, server_reply *reply)
{
    /* per message: its joined content parts, then its tool calls' JSON */
    int count = server_messages_begin(list, false, 2, q, owned, reply);
    if (count < 0)
        return -1;
    static const char *const keys[] = {"role", "content", "name", "reasoning_content", "tool_call_id", "tool_calls"};
    int i = 0;
    const cJSON *message;
    cJSON_ArrayForEach(message, list) {
        char param[64];
        snprintf(param, sizeof param, "messages[%d]", i);
        bmoe_chat_message *m = &q->messages[i];
        if (server_message_begin(message, param, keys, sizeof keys / sizeof keys[0], &m->role, reply) != 0)
            return -1;
        snprintf(param, sizeof param, "messages[%d].content", i);
        if (message_content(cJSON_GetObjectItemCaseSensitive(message, "content"), param, &(*owned)[i], &m->content,
                            &m->content_length, reply) != 0)
            return -1;
        const cJSON *reasoning = cJSON_GetObjectItemCaseSensitive(message, "reasoning_content");
        if (reasoning && !cJSON_IsNull(reasoning)) {
            if (!cJSON_IsString(reasoning) || strcmp(m->role, "assistant") != 0)
                BAD(param, "messages[%d].reasoning_content is an assistant message's string", i);
            m->reasoning = reasoning->valuestring;
            m->reasoning_length = strlen(reasoning->valuestring);
        }
        snprintf(param, sizeof param, "messages[%d]", i);
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(message, "name");
        const cJSON *call_id = cJSON_GetObjectItemCaseSensitive(message, "tool_call_id");
        if ((name && !cJSON_IsString(name) && !cJSON_IsNull(name)) ||
            (call_id && !cJSON_IsString(call_id) && !cJSON_IsNull(call_id)))
            BAD(param, "%s.name and .tool_call_id are strings", param);
        m->name = cJSON_IsString(name) ? name->valuestring : NULL;
        m->tool_call_id = cJSON_IsString(call_id) ? call_id->valuestring : NULL;
        const cJSON *calls = cJSON_GetObjectItemCaseSensitive(message, "tool_calls");
        if (calls && !cJSON_IsNull(calls)) {
            snprintf(param, sizeof param, "messages[%d].tool_calls", i);
            if (strcmp(m->role, "assistant") != 0)
                BAD(param, "%s: only an assistant message makes tool calls", param);
            if (server_read_message_calls(calls, param, &(*owned)[count + i], reply) != 0)
                return -1;
            m->tool_calls_json = (*owned)[count + i];
        }
        q->n_messages = ++i;
    }
    return 0;
}

/* Its id, its file's name, or that name without ".gguf" (what a user types
 * having seen the file). */
bool server_names_model(const server *s, const char *name)
{
    if (strcmp(name, s->model_id) == 0 || strcmp(name, s->model_file) == 0)
        return true;
    size_t stem = strlen(s->model_file);
    if (stem > 5 && strcmp(s->model_file + stem - 5, ".gguf") == 0)
        stem -= 5;
    return strlen(name) == stem && strncmp(name, s->model_file, stem) == 0;
}

/* A reasoning_effort, at the top level or in chat_template_kwargs (prefix
 * "chat_template_kwargs."; elsewhere: the other place): once, and low,
 * medium or high. 0, or -1 with the reply filled (400 naming param). */
static int read_effort(const cJSON *field, const char *param, const char *prefix, const char *elsewhere,
                       completion_request *q, server_reply *reply)
{
    if (q->effort_asked)
        BAD(param, "reasoning_effort is given twice (also %s)", elsewhere);
    if (!cJSON_IsString(field) || !bmoe_reasoning_effort_valid(field->valuestring))
        BAD(param, "%sreasoning_effort must be \"low\", \"medium\" or \"high\"", prefix);
    q->reasoning_effort = field->valuestring;
    q->effort_asked = true;
    return 0;
}

/* Passed to the template as the JSON text (cJSON's allocation). */
int server_read_tools(const cJSON *field, completion_request *q, server_reply *reply)
{
    if (!cJSON_IsArray(field))
        BAD("tools", "tools must be a list");
    const cJSON *tool;
    cJSON_ArrayForEach(tool, field) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(tool, "type");
        const cJSON *function = cJSON_GetObjectItemCaseSensitive(tool, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(function, "name");
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "function") != 0 || !cJSON_IsString(name) ||
            !name->valuestring[0])
            BAD("tools", "each tool must be {\"type\": \"function\", \"function\": {\"name\": ...}}");
    }
    if (cJSON_GetArraySize(field) > 0) {
        q->tools_json = cJSON_PrintUnformatted(field);
        if (!q->tools_json) {
            server_error_reply(reply, 500, "server_error", NULL, NULL, "out of memory");
            return -1;
        }
    }
    return 0;
}

int server_read_json_answer(const cJSON *schema, completion_request *q, server_reply *reply)
{
    q->json_answer = true;
    if (!schema)
        return 0;
    q->json_schema = cJSON_PrintUnformatted(schema);
    if (!q->json_schema) {
        server_error_reply(reply, 500, "server_error", NULL, NULL, "out of memory");
        return -1;
    }
    return 0;
}

/* response_format: OpenAI's {"type": "text"}, {"type": "json_object"} (any
 * JSON object) or {"type": "json_schema", "json_schema": {"name", "schema",
 * "strict", "description"}}; the schema is checked before the request waits
 * for its turn (check_held_schema). */
static int read_response_format(const cJSON *field, completion_request *q, server_reply *reply)
{
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(field, "type");
    if (!cJSON_IsObject(field) || !cJSON_IsString(type))
        BAD("response_format", "response_format must be an object with a \"type\"");
    const cJSON *part;
    cJSON_ArrayForEach(part, field) {
        if (strcmp(part->string, "type") && strcmp(part->string, "json_schema"))
            BAD("response_format", "response_format.%s is not supported", part->string);
    }
    const cJSON *spec = cJSON_GetObjectItemCaseSensitive(field, "json_schema");
    if (strcmp(type->valuestring, "text") == 0 || strcmp(type->valuestring, "json_object") == 0) {
        if (spec)
            BAD("response_format", "response_format.json_schema goes with the type \"json_schema\"");
        return strcmp(type->valuestring, "json_object") == 0 ? server_read_json_answer(NULL, q, reply) : 0;
    }
    if (strcmp(type->valuestring, "json_schema") != 0)
        BAD("response_format", "response_format.type must be \"text\", \"json_object\" or \"json_schema\"");
    if (!cJSON_IsObject(spec))
        BAD("response_format", "response_format.json_schema must be an object with a \"schema\"");
    cJSON_ArrayForEach(part, spec) {
        const char *key = part->string;
        if (strcmp(key, "name") && strcmp(key, "schema") && strcmp(key, "strict") && strcmp(key, "description"))
            BAD("response_format", "response_format.json_schema.%s is not supported", key);
    }
    const cJSON *schema = cJSON_GetObjectItemCaseSensitive(spec, "schema");
    const cJSON *strict = cJSON_GetObjectItemCaseSensitive(spec, "strict");
    if (!cJSON_IsObject(schema) && !cJSON_IsBool(schema))
        BAD("response_format", "response_format.json_schema.schema must be a JSON schema (an object)");
    if (strict && !cJSON_IsBool(strict) && !cJSON_IsNull(strict))
        BAD("response_format", "response_format.json_schema.strict must be true or false");
    return server_read_json_answer(schema, q, reply);
}

/* tool_choice: "auto", "none" (no tools rendered, no calls read),
 * "required" (the answer is one call of one of the tools) or
 * {"type": "function", "function": {"name"}} (one call of that one). */
static int read_tool_choice(const cJSON *field, completion_request *q, server_reply *reply)
{
    if (cJSON_IsString(field)) {
        const char *choice = field->valuestring;
        if (strcmp(choice, "auto") && strcmp(choice, "none") && strcmp(choice, "required"))
            BAD("tool_choice", "tool_choice must be \"auto\", \"none\", \"required\" or a named function");
        q->tools_off = strcmp(choice, "none") == 0;
        q->force_call = strcmp(choice, "required") == 0;
        return 0;
    }
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(field, "type");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(field, "function"), "name");
    if (!cJSON_IsObject(field) || !cJSON_IsString(type) || strcmp(type->valuestring, "function") != 0 ||
        !cJSON_IsString(name) || !name->valuestring[0])
        BAD("tool_choice", "a named tool_choice is {\"type\": \"function\", \"function\": {\"name\": ...}}");
    q->force_call = true;
    q->forced_name = name->valuestring;
    return 0;
}

/* chat_template_kwargs (as llama.cpp's and vLLM's servers take it): the
 * template variables bmoe lets a request set, enable_thinking and
 * reasoning_effort; any other is refused, never passed on unread. */
static int read_template_kwargs(const cJSON *kwargs, completion_request *q, server_reply *reply)
{
    if (!cJSON_IsObject(kwargs))
        BAD("chat_template_kwargs", "chat_template_kwargs must be an object");
    const cJSON *field;
    cJSON_ArrayForEach(field, kwargs) {
        const char *key = field->string;
        if (strcmp(key, "enable_thinking") == 0) {
            if (!cJSON_IsBool(field))
                BAD("chat_template_kwargs", "chat_template_kwargs.enable_thinking must be true or false");
            q->think = cJSON_IsTrue(field);
            q->think_asked = true;
        } else if (strcmp(key, "reasoning_effort") == 0) {
            if (read_effort(field, "chat_template_kwargs", "chat_template_kwargs.", "at the top level", q, reply) != 0)
                return -1;
        } else {
            /* a long name is not echoed: cut, it could end inside a character */
            bool echo = strlen(key) <= 64;
            BAD("chat_template_kwargs",
                "chat_template_kwargs%s%s: bmoe-server sets only enable_thinking and reasoning_effort",
                echo ? "." : "", echo ? key : "");
        }
    }
    return 0;
}

int server_request_begin(const server *s, const cJSON *root, enum server_endpoint endpoint, bool chat,
                         completion_request *q, server_reply *reply)
{
    if (!cJSON_IsObject(root))
        BAD(NULL, "the body must be a JSON object");
    q->endpoint = endpoint;
    q->chat = chat;
    q->n_predict = s->config->n_predict;
    q->sampler = s->config->sampler;
    q->think = !s->config->no_think;
    q->reasoning_effort = s->config->reasoning_effort;
    if (cJSON_GetArraySize(root) > 64)
        BAD(NULL, "the body has more than 64 fields");
    return 0;
}

int server_read_sampling(const cJSON *field, const char *name, completion_request *q, server_reply *reply)
{
    static const char *const names[] = {"temperature",      "top_p",             "min_p",          "top_k",
                                        "seed",             "stop",              "presence_penalty",
                                        "frequency_penalty", "repeat_penalty",   "repeat_last_n"};
    const char *key = field->string;
    size_t known = 0;
    while (known < sizeof names / sizeof names[0] && strcmp(key, names[known]) != 0)
        known++;
    if (known == sizeof names / sizeof names[0])
        return 0;
    if (cJSON_IsNull(field))
        return 1;
    bool integer = cJSON_IsNumber(field) && field->valuedouble == floor(field->valuedouble);
    if (strcmp(key, "temperature") == 0) {
        if (!is_number(field, 0, 2))
            BAD(name, "%s must be a number in [0, 2]", name);
        q->sampler.temperature = (float)field->valuedouble;
    } else if (strcmp(key, "top_p") == 0 || strcmp(key, "min_p") == 0) {
        if (!is_number(field, 0, 1))
            BAD(name, "%s must be a number in [0, 1]", name);
        float *value = strcmp(key, "top_p") == 0 ? &q->sampler.top_p : &q->sampler.min_p;
        *value = (float)field->valuedouble;
    } else if (strcmp(key, "top_k") == 0) {
        if (!is_number(field, 0, INT32_MAX) || !integer)
            BAD(name, "%s must be a non-negative integer (0: off)", name);
        q->sampler.top_k = (int32_t)field->valuedouble;
    } else if (strcmp(key, "seed") == 0) {
        if (!is_number(field, 0, 9007199254740992.0) || !integer)
            BAD(name, "%s must be a non-negative integer", name);
        q->sampler.seed = (uint64_t)field->valuedouble;
    } else if (strcmp(key, "stop") == 0) {
        if (cJSON_IsString(field)) {
            q->stops[q->n_stops++] = field->valuestring;
        } else if (cJSON_IsArray(field) && cJSON_GetArraySize(field) <= SERVER_MAX_STOPS) {
            const cJSON *stop;
            cJSON_ArrayForEach(stop, field) {
                if (!cJSON_IsString(stop))
                    BAD(name, "%s must be a string or a list of strings", name);
                q->stops[q->n_stops++] = stop->valuestring;
            }
        } else {
            BAD(name, "%s must be a string or a list of at most %d strings", name, SERVER_MAX_STOPS);
        }
        for (int32_t i = 0; i < q->n_stops; i++)
            if (!q->stops[i][0])
                BAD(name, "%s: a stop string must not be empty", name);
    } else if (strcmp(key, "presence_penalty") == 0 || strcmp(key, "frequency_penalty") == 0) {
        if (!is_number(field, -2, 2))
            BAD(name, "%s must be a number in [-2, 2]", name);
        float *value = strcmp(key, "presence_penalty") == 0 ? &q->sampler.presence_penalty
                                                            : &q->sampler.frequency_penalty;
        *value = (float)field->valuedouble;
    } else if (strcmp(key, "repeat_penalty") == 0) {
        if (!is_number(field, 0, 1000000) || field->valuedouble <= 0)
            BAD(name, "%s must be a number greater than 0 (1: off)", name);
        q->sampler.repeat_penalty = (float)field->valuedouble;
    } else {
        if (!is_number(field, -1, INT32_MAX) || !integer)
            BAD(name, "%s must be an integer, -1 (all) or more", name);
        q->sampler.repeat_last_n = (int32_t)field->valuedouble;
    }
    return 1;
}

/* logit_bias: OpenAI's {"TOKEN_ID": BIAS in [-100, 100]}, or false to ban
 * the token (llama.cpp's), into q->logit_bias (malloc'ed). 0, or -1 with
 * the reply filled. */
static int read_logit_bias(const server *s, const cJSON *field, completion_request *q, server_reply *reply)
{
    if (!cJSON_IsObject(field))
        BAD("logit_bias", "logit_bias must be an object of token ids and biases");
    int n = cJSON_GetArraySize(field);
    if (n > SERVER_MAX_LOGIT_BIAS)
        BAD("logit_bias", "logit_bias has more than %d tokens", SERVER_MAX_LOGIT_BIAS);
    q->logit_bias = malloc((size_t)(n > 0 ? n : 1) * sizeof *q->logit_bias);
    if (!q->logit_bias) {
        server_error_reply(reply, 500, "server_error", NULL, NULL, "out of memory");
        return -1;
    }
    int32_t n_vocab = bmoe_model_n_vocab(s->model);
    const cJSON *entry;
    cJSON_ArrayForEach(entry, field) {
        const char *id = entry->string;
        char *end = NULL;
        long token = strtol(id, &end, 10);
        if (!id[0] || *end || id[0] == '+' || id[0] == ' ' || token < 0 || token >= n_vocab)
            BAD("logit_bias", "logit_bias: '%.40s' is not a token id of the vocabulary of %d", id, n_vocab);
        for (int32_t i = 0; i < q->sampler.n_logit_bias; i++)
            if (q->logit_bias[i].token == token)
                BAD("logit_bias", "logit_bias: token %ld is given twice", token);
        float bias;
        if (cJSON_IsFalse(entry))
            bias = -INFINITY;
        else if (is_number(entry, -100, 100))
            bias = (float)entry->valuedouble;
        else
            BAD("logit_bias", "logit_bias: token %ld's bias must be a number in [-100, 100] (or false)", token);
        q->logit_bias[q->sampler.n_logit_bias++] = (bmoe_logit_bias){(int32_t)token, bias};
    }
    q->sampler.logit_bias = q->logit_bias;
    return 0;
}

void server_model_not_found(const server *s, const char *name, server_reply *reply)
{
    /* a long name is not echoed: cut, it could end inside a character */
    bool echo = strlen(name) <= 128;
    server_error_reply(reply, 404, "invalid_request_error", "model", "model_not_found",
                       "the model%s%s%s does not exist: this server serves '%s'", echo ? " '" : "", echo ? name : "",
                       echo ? "'" : "", s->model_id);
}

/* Whether the answer is held: to a JSON value, a forced call, or a grammar's word. */
static bool held_answer(const completion_request *q)
{
    return q->json_answer || q->force_call || q->grammar;
}

/* Reads the body's fields into q. 0, or -1 with the reply filled. */
static int read_request(const server *s, const cJSON *root, bool chat, completion_request *q, char ***owned,
                        server_reply *reply)
{
    if (server_request_begin(s, root, chat ? SERVER_CHAT_COMPLETIONS : SERVER_COMPLETIONS, chat, q, reply) != 0)
        return -1;
    const cJSON *field;
    cJSON_ArrayForEach(field, root) {
        const char *key = field->string;
        bool null = cJSON_IsNull(field);
        int sampling;
        if (server_given_twice(root, field))
            BAD(key, "%s is given twice", key);
        if (harmless(key)) {
            continue;
        } else if (strcmp(key, "model") == 0) {
            if (null)
                continue;
            if (!cJSON_IsString(field))
                BAD(key, "model must be a string");
            if (!server_names_model(s, field->valuestring)) {
                server_model_not_found(s, field->valuestring, reply);
                return -1;
            }
        } else if (chat && strcmp(key, "messages") == 0) {
            if (read_messages(field, q, owned, reply) != 0)
                return -1;
        } else if (!chat && strcmp(key, "prompt") == 0) {
            if (!cJSON_IsString(field))
                BAD("prompt", "prompt must be a string (one prompt per request)");
            q->prompt = field->valuestring;
        } else if (chat && strcmp(key, "reasoning_effort") == 0) {
            if (null)
                continue;
            if (read_effort(field, key, "", "in chat_template_kwargs", q, reply) != 0)
                return -1;
        } else if (chat && strcmp(key, "chat_template_kwargs") == 0) {
            if (null)
                continue;
            if (read_template_kwargs(field, q, reply) != 0)
                return -1;
        } else if (strcmp(key, "ignore_eos") == 0) {
            if (!null && !cJSON_IsBool(field))
                BAD(key, "ignore_eos must be true or false");
            q->ignore_eos = cJSON_IsTrue(field);
        } else if (strcmp(key, "stream") == 0) {
            if (!null && !cJSON_IsBool(field))
                BAD("stream", "stream must be true or false");
            q->stream = cJSON_IsTrue(field);
        } else if (strcmp(key, "max_tokens") == 0 || strcmp(key, "max_completion_tokens") == 0) {
            if (null)
                continue;
            if (!is_number(field, 1, INT32_MAX) || field->valuedouble != floor(field->valuedouble))
                BAD(key, "%s must be a positive integer", key);
            q->n_predict = (int32_t)field->valuedouble;
        } else if ((sampling = server_read_sampling(field, key, q, reply)) != 0) {
            if (sampling < 0)
                return -1;
        } else if (strcmp(key, "n") == 0) {
            if (!null && !(cJSON_IsNumber(field) && field->valuedouble == 1.0))
                BAD(key, "n must be 1: bmoe answers one choice per request");
        } else if (chat && strcmp(key, "logprobs") == 0) {
            if (!null && !cJSON_IsBool(field))
                BAD(key, "logprobs must be true or false");
            q->logprobs = cJSON_IsTrue(field);
        } else if (chat && strcmp(key, "top_logprobs") == 0) {
            if (null)
                continue;
            if (!is_number(field, 0, BMOE_MAX_TOP_LOGPROBS) || field->valuedouble != floor(field->valuedouble))
                BAD(key, "top_logprobs must be an integer in [0, %d]", BMOE_MAX_TOP_LOGPROBS);
            q->top_logprobs = (int32_t)field->valuedouble;
        } else if (!chat && strcmp(key, "logprobs") == 0) {
            if (null)
                continue;
            if (!is_number(field, 0, BMOE_MAX_TOP_LOGPROBS) || field->valuedouble != floor(field->valuedouble))
                BAD(key, "logprobs must be an integer in [0, %d] (the alternatives per token)", BMOE_MAX_TOP_LOGPROBS);
            q->logprobs = true;
            q->top_logprobs = (int32_t)field->valuedouble;
        } else if (chat && strcmp(key, "tool_choice") == 0) {
            if (null)
                continue;
            if (read_tool_choice(field, q, reply) != 0)
                return -1;
        } else if (chat && strcmp(key, "parallel_tool_calls") == 0) {
            if (!null && !cJSON_IsBool(field))
                BAD(key, "parallel_tool_calls must be true or false");
        } else if (chat && strcmp(key, "tools") == 0) {
            if (null)
                continue;
            if (server_read_tools(field, q, reply) != 0)
                return -1;
        } else if (strcmp(key, "response_format") == 0) {
            if (null)
                continue;
            if (read_response_format(field, q, reply) != 0)
                return -1;
        } else if (strcmp(key, "json_schema") == 0) {
            /* llama.cpp's shorthand for response_format json_schema */
            if (null)
                continue;
            const cJSON *format = cJSON_GetObjectItemCaseSensitive(root, "response_format");
            if (format && !cJSON_IsNull(format))
                BAD(key, "json_schema and response_format both hold the answer: give one");
            if (!cJSON_IsObject(field))
                BAD(key, "json_schema must be a JSON schema (an object)");
            if (server_read_json_answer(field, q, reply) != 0)
                return -1;
        } else if (strcmp(key, "cache_prompt") == 0) {
            /* llama.cpp's: bmoe reuses the longest cached prefix whatever it says, and the answer is the same
             * either way (a token's logits do not depend on the batch it is computed in) */
            if (!cJSON_IsBool(field) && !null)
                BAD(key, "cache_prompt must be true or false");
        } else if (strcmp(key, "grammar") == 0) {
            if (null)
                continue;
            if (!cJSON_IsString(field) || !field->valuestring[0])
                BAD(key, "grammar must be the text of a GBNF grammar");
            q->grammar = field->valuestring;
        } else if (strcmp(key, "logit_bias") == 0) {
            if (null)
                continue;
            if (read_logit_bias(s, field, q, reply) != 0)
                return -1;
        } else {
            BAD(key, "%s is not supported by bmoe-server", key);
        }
    }
    if (chat && q->n_messages == 0)
        BAD("messages", "messages is required");
    if (q->top_logprobs > 0 && !q->logprobs)
        BAD("top_logprobs", "top_logprobs needs logprobs: true");
    if (!chat && !q->prompt)
        BAD("prompt", "prompt is required");
    return 0;
}

/* The prompt's text (malloc'ed) and whether reasoning follows it. */
static int render_prompt(const server *s, const completion_request *q, char **text, size_t *length,
                         bool *prefill, server_reply *reply)
{
    *prefill = false;
    if (!q->chat) {
        *length = strlen(q->prompt);
        *text = strdup(q->prompt);
        if (!*text) {
            server_error_reply(reply, 500, "server_error", NULL, NULL, "out of memory");
            return -1;
        }
        return 0;
    }
    if (!s->chat) {
        server_error_reply(reply, 400, "invalid_request_error", "messages", "no_chat_template",
                           "the model has no chat template: use /v1/completions with a prompt");
        return -1;
    }
    enum bmoe_think_control control = bmoe_chat_think_control(s->chat);
    if (q->force_call && (!q->tools_json || q->tools_off)) {
        server_error_reply(reply, 400, "invalid_request_error", "tool_choice", "invalid_request",
                           "tool_choice: forcing a call needs tools");
        return -1;
    }
    const char *before, *after;
    if (q->force_call && !bmoe_tool_call_frame(bmoe_chat_tool_format(s->chat), &before, &after)) {
        server_error_reply(reply, 400, "invalid_request_error", "tool_choice", "invalid_request",
                           "tool_choice: bmoe forces calls written as one JSON object (<tool_call> JSON, as "
                           "Qwen3's template teaches); this model's template writes them as %s",
                           bmoe_tool_format_name(bmoe_chat_tool_format(s->chat)));
        return -1;
    }
    /* a held answer (a JSON value, a forced call) comes without reasoning
     * unless the request asks for it or the model always reasons: then the
     * hold waits for the reasoning's end (gpt-oss's comes in messages of
     * its own, and the hold waits for the final one's) */
    bool think = q->think;
    enum bmoe_reasoning_format reasoning = bmoe_chat_reasoning_format(s->chat);
    if (held_answer(q) && think && !q->think_asked && control != BMOE_THINK_CONTROL_NONE &&
        reasoning != BMOE_REASONING_HARMONY)
        think = false;
    if ((q->json_answer || q->grammar) && q->tools_json && !q->tools_off) {
        const char *held = q->grammar ? "grammar" : "response_format";
        server_error_reply(reply, 400, "invalid_request_error", held, "invalid_request",
                           "%s with tools: the answer is held to %s, which leaves no room for a tool call (give "
                           "tool_choice \"none\", or no %s)",
                           held, q->grammar ? "the grammar" : "one JSON value", held);
        return -1;
    }
    if (q->think_asked && !q->think && control == BMOE_THINK_CONTROL_NONE) {
        server_error_reply(reply, 400, "invalid_request_error", "chat_template_kwargs", "invalid_request",
                           "enable_thinking false: this model reasons on every turn (think control none); its "
                           "template cannot turn reasoning off");
        return -1;
    }
    bmoe_error effort_error;
    if (q->effort_asked && bmoe_chat_check_reasoning_effort(s->chat, q->reasoning_effort, &effort_error) != 0) {
        server_error_reply(reply, 400, "invalid_request_error", "reasoning_effort", "invalid_request",
                           "reasoning_effort: %s", effort_error.message);
        return -1;
    }
    if (q->tools_json && !q->tools_off && bmoe_chat_tool_format(s->chat) == BMOE_TOOL_FORMAT_NONE) {
        server_error_reply(reply, 400, "invalid_request_error", "tools", "invalid_request",
                           "tools: this model's chat template teaches no tool-call format bmoe reads (Qwen3's "
                           "<tool_call> JSON, Qwen3.5's <function=...> blocks, GLM's <arg_key> pairs, gpt-oss's "
                           "harmony messages to=functions.NAME)");
        return -1;
    }
    bmoe_chat_params params = bmoe_chat_default_params();
    params.tools_json = q->tools_off ? NULL : q->tools_json;
    params.enable_thinking = think;
    params.reasoning_prefill = !think && control == BMOE_THINK_CONTROL_PREFILL;
    params.reasoning_effort = q->reasoning_effort;
    params.now_seconds = s->config->template_now;
    *prefill = params.reasoning_prefill;
    char *out = NULL;
    bmoe_error error = {0};
    if (bmoe_chat_render(s->chat, q->messages, q->n_messages, &params, &out, length, &error) != 0) {
        server_error_reply(reply, 400, "invalid_request_error", "messages", "template_error",
                           "the model's chat template: %s", error.message);
        return -1;
    }
    /* the prompt opens the reasoning span where the model would not, so
     * that the hold's trigger (the span's end) comes */
    const char *opening = "";
    if (held_answer(q))
        bmoe_reasoning_opening(reasoning, out, *length, &opening);
    size_t opening_length = strlen(opening);
    *text = malloc(*length + opening_length + 1);
    if (*text) {
        memcpy(*text, out, *length);
        memcpy(*text + *length, opening, opening_length + 1);
        *length += opening_length;
    }
    bmoe_free(out);
    if (!*text) {
        server_error_reply(reply, 500, "server_error", NULL, NULL, "out of memory");
        return -1;
    }
    return 0;
}

/* The tokens of text, special tokens parsed (*tokens malloc'ed): a chat
 * prompt as the template's tokenizer reads it, else with the BOS the
 * vocabulary asks for when add_special. Returns their count, or a negative
 * bmoe_status with error. */
static int32_t text_tokens(const server *s, bool chat, bool add_special, const char *text, size_t length,
                           int32_t **tokens, bmoe_error *error)
{
    int32_t count = chat ? bmoe_chat_tokenize(s->chat, text, length, NULL, 0, error)
                         : bmoe_tokenize(s->model, text, length, add_special, true, NULL, 0, error);
    if (count < 0)
        return count;
    *tokens = malloc((size_t)(count > 0 ? count : 1) * sizeof **tokens);
    if (!*tokens)
        return BMOE_ERR_OUT_OF_MEMORY;
    int32_t again = chat ? bmoe_chat_tokenize(s->chat, text, length, *tokens, count, error)
                         : bmoe_tokenize(s->model, text, length, add_special, true, *tokens, count, error);
    return again == count ? count : BMOE_ERR_INVALID_ARGUMENT;
}

const char *server_finish_reason(enum bmoe_stop_reason stop)
{
    switch (stop) {
    case BMOE_STOP_N_PREDICT:
    case BMOE_STOP_CONTEXT_FULL: return "length";
    case BMOE_STOP_ABORTED: return "cancelled";
    default: return "stop";
    }
}

void server_add_figures(cJSON *root, const bmoe_generation *g, const server *s, bool cancelled)
{
    const bmoe_stats *prefill = bmoe_generation_prefill_stats(g), *decode = bmoe_generation_decode_stats(g);
    bmoe_stream_state state;
    bmoe_model_get_stream_state(s->model, &state);
    cJSON *figures = cJSON_AddObjectToObject(root, "bmoe");
    int32_t generated = bmoe_generation_n_generated(g);
    cJSON_AddNumberToObject(figures, "n_prompt", bmoe_generation_n_prompt(g));
    cJSON_AddNumberToObject(figures, "n_reused", bmoe_generation_n_reused(g));
    cJSON_AddNumberToObject(figures, "prefill_ms", prefill->wall_ms);
    cJSON_AddNumberToObject(figures, "ttft_ms", bmoe_generation_ttft_ms(g));
    cJSON_AddNumberToObject(figures, "decode_ms", decode->wall_ms);
    /* with drafting, the evaluated tokens count the rejected drafts: the rate is of the tokens generated */
    bool drafting = s->config->speculation.source != BMOE_DRAFT_NONE;
    double decoded = drafting ? (double)generated : (double)decode->n_tokens;
    cJSON_AddNumberToObject(figures, "decode_tok_s", decode->wall_ms > 0 ? decoded / (decode->wall_ms * 1e-3) : 0.0);
    uint64_t lookups = decode->cache_hits + decode->cache_misses;
    cJSON_AddNumberToObject(figures, "cache_hit_pct", lookups ? 100.0 * (double)decode->cache_hits / (double)lookups : 0.0);
    cJSON_AddNumberToObject(figures, "read_mib", (double)(prefill->read_bytes + decode->read_bytes) / 1048576.0);
    cJSON_AddNumberToObject(figures, "read_mib_per_token",
                            generated ? (double)decode->read_bytes / 1048576.0 / generated : 0.0);
    cJSON_AddNumberToObject(figures, "io_ms", decode->io_ms);
    cJSON_AddNumberToObject(figures, "stall_ms", decode->stall_ms);
    cJSON_AddNumberToObject(figures, "mgmt_ms", decode->mgmt_ms);
    cJSON_AddBoolToObject(figures, "streaming", state.streaming);
    if (drafting) {
        bmoe_spec_stats spec;
        bmoe_generation_spec_stats(g, &spec);
        cJSON_AddNumberToObject(figures, "drafted", (double)spec.drafted);
        cJSON_AddNumberToObject(figures, "accepted", (double)spec.accepted);
        cJSON_AddNumberToObject(figures, "drafted_steps", (double)spec.verify_batches);
    }
    cJSON_AddBoolToObject(figures, "cancelled", cancelled);
}

/* Before the request waits for its turn: a forced call's schema made
 * (q->call_schema) and the schema or grammar checked, so that what bmoe
 * cannot hold to is refused at once. 0, or -1 with the reply filled (a 400
 * naming the field, json_param for a JSON answer's). */
static int check_held_schema(completion_request *q, const char *json_param, server_reply *reply)
{
    if (q->grammar && (q->json_answer || q->force_call))
        BAD("grammar", "grammar and %s both hold the answer: give one", q->json_answer ? json_param : "tool_choice");
    bmoe_error error = {0};
    if (q->grammar && bmoe_gbnf_check(q->grammar, strlen(q->grammar), &error) != 0) {
        if (error.status == BMOE_ERR_OUT_OF_MEMORY) {
            server_error_reply(reply, 500, "server_error", NULL, NULL, "structured output: %s", error.message);
            return -1;
        }
        BAD("grammar", "grammar: %s", error.message);
    }
    if (q->force_call && q->tools_json) {
        bool missing = false;
        if (!(q->call_schema = server_forced_call_schema(q->tools_json, q->forced_name, &missing))) {
            if (missing)
                BAD("tool_choice", "tool_choice names '%.100s', which is not among the tools", q->forced_name);
            server_error_reply(reply, 500, "server_error", NULL, NULL, "out of memory");
            return -1;
        }
    }
    const char *schema = q->call_schema ? q->call_schema : q->json_schema;
    const char *param = q->call_schema ? "tool_choice" : json_param;
    if (schema && bmoe_json_schema_check(schema, strlen(schema), &error) != 0) {
        if (error.status == BMOE_ERR_OUT_OF_MEMORY) {
            server_error_reply(reply, 500, "server_error", NULL, NULL, "structured output: %s", error.message);
            return -1;
        }
        BAD(param, "%s: %s", param, error.message);
    }
    return 0;
}

/* The turn's constraint (s->json_constraint): the request's schema or
 * grammar, or for a forced call the schema of the tools' calls between the
 * tags its template writes around one. The token index is made once, at the first
 * such request. 0, or -1 with the reply filled (a schema bmoe cannot hold
 * to is a 400 naming what). */
static int json_constraint_begin(server *s, const completion_request *q, bool reason_first, server_reply *reply)
{
    bmoe_error error = {0};
    bmoe_json_constraint_free(s->json_constraint);
    s->json_constraint = NULL;
    if (!s->token_index && !(s->token_index = bmoe_token_index_create(s->model, &error))) {
        server_error_reply(reply, 500, "server_error", NULL, NULL, "structured output: %s", error.message);
        return -1;
    }
    const char *param = q->force_call ? "tool_choice" : q->grammar ? "grammar" : "response_format";
    const char *schema = q->force_call ? q->call_schema : q->json_schema;
    if (q->force_call && !schema) { /* check_held_schema makes it before the turn */
        server_error_reply(reply, 500, "server_error", NULL, NULL, "a forced call without its schema");
        return -1;
    }
    s->json_constraint =
        q->grammar ? bmoe_gbnf_constraint_create(s->token_index, q->grammar, strlen(q->grammar), &error)
                   : bmoe_json_constraint_create(s->token_index, schema, schema ? strlen(schema) : 0, &error);
    enum bmoe_reasoning_format reasoning = reason_first ? bmoe_chat_reasoning_format(s->chat) : BMOE_REASONING_NONE;
    enum bmoe_tool_format call_format = q->force_call ? bmoe_chat_tool_format(s->chat) : BMOE_TOOL_FORMAT_NONE;
    if (s->json_constraint &&
        bmoe_json_constraint_chat(s->json_constraint, s->model, reasoning, call_format, &error) != 0) {
        bmoe_json_constraint_free(s->json_constraint);
        s->json_constraint = NULL;
    }
    if (!s->json_constraint) {
        if (error.status == BMOE_ERR_OUT_OF_MEMORY)
            server_error_reply(reply, 500, "server_error", NULL, NULL, "structured output: %s", error.message);
        else
            server_error_reply(reply, 400, "invalid_request_error", param, "invalid_request", "%s: %s", param,
                               error.message);
        return -1;
    }
    return 0;
}

int server_generation_begin(server *s, const completion_request *q, const char *text, size_t text_length,
                            bool prefill, bmoe_generation **generation, bmoe_reasoning **split, server_reply *reply)
{
    bmoe_error error = {0};
    int32_t *tokens = NULL;
    int32_t n_prompt = text_tokens(s, q->chat, true, text, text_length, &tokens, &error);
    int32_t n_ctx = bmoe_context_n_ctx(s->context);
    bool bounded = q->n_ctx > 0 && q->n_ctx < n_ctx; /* a request's smaller context (Ollama's num_ctx) */
    if (bounded)
        n_ctx = q->n_ctx;
    if (n_prompt <= 0) {
        free(tokens);
        server_error_reply(reply, 400, "invalid_request_error", q->chat ? "messages" : "prompt", NULL,
                           "the prompt has no tokens%s%s", error.message[0] ? ": " : "", error.message);
        return -1;
    }
    if (n_prompt >= n_ctx) {
        free(tokens);
        server_error_reply(reply, 400, "invalid_request_error", q->chat ? "messages" : "prompt",
                           "context_length_exceeded", "the prompt has %d tokens; the context holds %d", n_prompt,
                           n_ctx);
        return -1;
    }
    bmoe_generation_params params = bmoe_generation_default_params();
    params.n_predict = q->n_predict;
    if (bounded && (q->n_predict < 0 || q->n_predict > n_ctx - n_prompt))
        params.n_predict = n_ctx - n_prompt;
    params.ignore_eos = q->ignore_eos;
    params.sampler = q->sampler;
    params.speculation = s->config->speculation;
    params.stop_strings = q->stops;
    params.n_stop_strings = q->n_stops;
    params.logprobs = q->logprobs;
    params.top_logprobs = q->top_logprobs;
    if (held_answer(q)) {
        const char *opening;
        bool reason_first = q->chat && !prefill &&
                            bmoe_reasoning_opening(bmoe_chat_reasoning_format(s->chat), text, text_length, &opening);
        if (json_constraint_begin(s, q, reason_first, reply) != 0) {
            free(tokens);
            return -1;
        }
        params.constraint = bmoe_json_constraint_rule(s->json_constraint);
    }
    enum bmoe_reasoning_format format =
        q->chat && !prefill ? bmoe_chat_reasoning_format(s->chat) : BMOE_REASONING_NONE;
    bmoe_reasoning *reasoning = bmoe_reasoning_create(format, text, text_length, &error);
    bmoe_generation *g = reasoning ? bmoe_generation_start(s->context, &params, tokens, n_prompt, &error) : NULL;
    free(tokens);
    if (!g) {
        bmoe_reasoning_free(reasoning);
        if (atomic_load(&s->cancel))
            server_error_reply(reply, 503, "server_error", NULL, "cancelled", "the generation was cancelled in its prefill");
        else
            server_error_reply(reply, 500, "server_error", NULL, NULL, "the generation: %s", error.message);
        return -1;
    }
    *generation = g;
    *split = reasoning;
    return 0;
}

int server_generation_run(server *s, const completion_request *q, bmoe_generation *g, bmoe_reasoning *reasoning,
                          cJSON *logprobs, bmoe_step *last, int32_t *last_token, server_reply *reply)
{
    bmoe_error error = {0};
    bmoe_step step = {0};
    bmoe_reasoning_delta delta;
    int status;
    size_t text_offset = 0;
    if (last_token)
        *last_token = -1;
    while ((status = bmoe_generation_step(g, &step, &error)) >= 0) {
        if (last_token && step.token >= 0)
            *last_token = step.token;
        if (step.text_length > 0 && bmoe_reasoning_feed(reasoning, step.text, step.text_length, &delta, &error) != 0) {
            status = -1;
            break;
        }
        if (server_logprobs_add(logprobs, s, &step, q->chat, &text_offset) != 0) {
            snprintf(error.message, sizeof error.message, "out of memory for the logprobs");
            status = -1;
            break;
        }
        if (step.stats.n_tokens > 0)
            server_publish_step(s, &step);
        if (status == 0)
            break;
    }
    if (status >= 0 && bmoe_reasoning_finish(reasoning, &delta, &error) != 0)
        status = -1;
    *last = step;
    if (status < 0) {
        bool aborted = step.stop == BMOE_STOP_ABORTED || atomic_load(&s->cancel);
        server_error_reply(reply, aborted ? 503 : 500, "server_error", NULL, aborted ? "cancelled" : NULL,
                           "the generation %s: %s", aborted ? "was cancelled" : "failed", error.message);
        return -1;
    }
    return 0;
}

/* Runs the generation in the caller's turn and fills the reply. */
int server_generation_whole(server *s, const completion_request *q, const char *text, size_t text_length,
                            bool prefill, cJSON *logprobs, bmoe_generation **g, bmoe_reasoning **split,
                            bmoe_step *last, int32_t *last_token, server_reply *reply)
{
    if (server_generation_begin(s, q, text, text_length, prefill, g, split, reply) != 0)
        return -1;
    if (server_generation_run(s, q, *g, *split, logprobs, last, last_token, reply) != 0) {
        bmoe_generation_free(*g);
        bmoe_reasoning_free(*split);
        *g = NULL;
        *split = NULL;
        return -1;
    }
    return 0;
}

void server_generation_close(server *s, bmoe_generation *g, bmoe_reasoning *split, cJSON *root, bool cancelled)
{
    if (root)
        server_add_figures(root, g, s, cancelled);
    server_count_generation(s, g);
    bmoe_generation_free(g);
    bmoe_reasoning_free(split);
}

static void generate(server *s, const completion_request *q, const char *text, size_t text_length, bool prefill,
                     server_reply *reply)
{
    bmoe_generation *g = NULL;
    bmoe_reasoning *reasoning = NULL;
    bmoe_step step = {0};
    cJSON *logprobs = NULL;
    if (q->logprobs && !(logprobs = server_logprobs_new(q->chat))) {
        server_error_reply(reply, 500, "server_error", NULL, NULL, "out of memory for the logprobs");
        return;
    }
    if (server_generation_whole(s, q, text, text_length, prefill, logprobs, &g, &reasoning, &step, NULL, reply) !=
        0) {
        cJSON_Delete(logprobs);
        return;
    }
    int32_t n_prompt = bmoe_generation_n_prompt(g);
    size_t answer_length = 0, thinking_length = 0;
    const char *answer = bmoe_reasoning_answer(reasoning, &answer_length);
    const char *thinking = bmoe_reasoning_thinking(reasoning, &thinking_length);
    char id[48];
    snprintf(id, sizeof id, "%s-%llu", q->chat ? "chatcmpl" : "cmpl",
             (unsigned long long)atomic_fetch_add(&s->next_id, 1));
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "id", id);
    cJSON_AddStringToObject(root, "object", q->chat ? "chat.completion" : "text_completion");
    cJSON_AddNumberToObject(root, "created", (double)time(NULL));
    cJSON_AddStringToObject(root, "model", s->model_id);
    cJSON *choices = cJSON_AddArrayToObject(root, "choices");
    cJSON *choice = cJSON_CreateObject();
    cJSON_AddItemToArray(choices, choice);
    cJSON_AddNumberToObject(choice, "index", 0);
    /* cJSON copies strings up to their NUL: the texts are NUL-terminated copies */
    char *answer_text = strndup(answer ? answer : "", answer_length);
    char *thinking_text = thinking_length ? strndup(thinking, thinking_length) : NULL;
    const char *finish = server_finish_reason(step.stop);
    if (q->chat) {
        cJSON *message = cJSON_AddObjectToObject(choice, "message");
        cJSON_AddStringToObject(message, "role", "assistant");
        enum bmoe_tool_format format =
            server_tools_active(s, q) ? bmoe_chat_tool_format(s->chat) : BMOE_TOOL_FORMAT_NONE;
        if (server_answer_message(message, format, answer_text ? answer_text : "", id, &finish) != 0) {
            free(answer_text);
            free(thinking_text);
            cJSON_Delete(root);
            cJSON_Delete(logprobs);
            server_generation_close(s, g, reasoning, NULL, false);
            server_error_reply(reply, 500, "server_error", NULL, NULL, "out of memory reading the tool calls");
            return;
        }
        if (thinking_text)
            cJSON_AddStringToObject(message, "reasoning_content", thinking_text);
    } else {
        cJSON_AddStringToObject(choice, "text", answer_text ? answer_text : "");
    }
    free(answer_text);
    free(thinking_text);
    if (logprobs)
        cJSON_AddItemToObject(choice, "logprobs", logprobs);
    cJSON_AddStringToObject(choice, "finish_reason", finish);
    cJSON *usage = cJSON_AddObjectToObject(root, "usage");
    int32_t generated = bmoe_generation_n_generated(g);
    cJSON_AddNumberToObject(usage, "prompt_tokens", n_prompt);
    cJSON_AddNumberToObject(usage, "completion_tokens", generated);
    cJSON_AddNumberToObject(usage, "total_tokens", n_prompt + generated);
    /* where OpenAI clients read the prompt tokens served from a cache */
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(usage, "prompt_tokens_details"), "cached_tokens",
                            bmoe_generation_n_reused(g));
    server_generation_close(s, g, reasoning, root, step.stop == BMOE_STOP_ABORTED);
    reply->status = 200;
    reply->body = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!reply->body)
        server_error_reply(reply, 500, "server_error", NULL, NULL, "out of memory");
    else
        reply->length = strlen(reply->body);
}

/* Overlong forms, surrogates and code points past U+10FFFF are not
 * well-formed. */
long server_utf8_error_at(const unsigned char *text, size_t length)
{
    size_t i = 0;
    while (i < length) {
        unsigned char lead = text[i];
        if (lead == 0)
            return (long)i;
        if (lead < 0x80) {
            i++;
            continue;
        }
        size_t more;
        uint32_t code, least;
        if ((lead & 0xE0) == 0xC0) {
            more = 1, code = lead & 0x1F, least = 0x80;
        } else if ((lead & 0xF0) == 0xE0) {
            more = 2, code = lead & 0x0F, least = 0x800;
        } else if ((lead & 0xF8) == 0xF0) {
            more = 3, code = lead & 0x07, least = 0x10000;
        } else {
            return (long)i;
        }
        if (length - i <= more)
            return (long)i;
        for (size_t k = 1; k <= more; k++) {
            if ((text[i + k] & 0xC0) != 0x80)
                return (long)i;
            code = code << 6 | (text[i + k] & 0x3F);
        }
        if (code < least || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF))
            return (long)i;
        i += more + 1;
    }
    return -1;
}

char *server_json_text(const char *bytes, size_t length)
{
    char *text = malloc(length * 3 + 1), *out = text;
    if (!text)
        return NULL;
    size_t at = 0;
    while (at < length) {
        long bad = server_utf8_error_at((const unsigned char *)bytes + at, length - at);
        size_t good = bad < 0 ? length - at : (size_t)bad;
        memcpy(out, bytes + at, good);
        out += good;
        at += good;
        if (at < length) {
            memcpy(out, "\xef\xbf\xbd", 3);
            out += 3;
            at++;
        }
    }
    *out = '\0';
    return text;
}

/* Whether the text nests arrays and objects deeper than limit: brackets
 * counted outside strings, the text not yet known to be JSON. */
static bool nests_deeper(const char *text, size_t length, int limit)
{
    int depth = 0;
    bool in_string = false;
    for (size_t i = 0; i < length; i++) {
        char c = text[i];
        if (in_string) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > limit)
                return true;
        } else if ((c == ']' || c == '}') && depth > 0) {
            depth--;
        }
    }
    return false;
}

cJSON *server_parse_body(const char *body, size_t length, server_reply *reply)
{
    long bad_byte = server_utf8_error_at((const unsigned char *)body, length);
    if (bad_byte >= 0) {
        server_error_reply(reply, 400, "invalid_request_error", NULL, "invalid_encoding",
                           "the body is not UTF-8 text: byte %ld of %zu", bad_byte, length);
        return NULL;
    }
    if (nests_deeper(body, length, SERVER_MAX_JSON_DEPTH)) {
        server_error_reply(reply, 400, "invalid_request_error", NULL, "invalid_json",
                           "the body nests arrays and objects more than %d deep", SERVER_MAX_JSON_DEPTH);
        return NULL;
    }
    /* the body is NUL-terminated past its length and holds no NUL itself:
     * anything after the one JSON value is refused, not ignored */
    cJSON *root = cJSON_ParseWithLengthOpts(body, length + 1, NULL, true);
    if (!root)
        server_error_reply(reply, 400, "invalid_request_error", NULL, "invalid_json", "the body is not valid JSON");
    return root;
}

void server_completion(server *s, const char *body, size_t length, enum server_endpoint endpoint, int fd,
                       server_reply *reply)
{
    cJSON *root = server_parse_body(body, length, reply);
    if (!root)
        return;
    completion_request q = {0};
    char **owned = NULL;
    char *text = NULL;
    size_t text_length = 0;
    bool prefill = false;
    /* the template is rendered in the turn: the chat object is the one
     * model's, used by one generation at a time like the context */
    bool ollama = server_endpoint_ollama(endpoint), anthropic = server_endpoint_anthropic(endpoint);
    int read = ollama      ? server_ollama_read(s, root, endpoint, &q, &owned, reply)
               : anthropic ? server_anthropic_read(s, root, endpoint, &q, &owned, reply)
                           : read_request(s, root, endpoint == SERVER_CHAT_COMPLETIONS, &q, &owned, reply);
    if (read == 0)
        read = check_held_schema(&q, ollama ? "format" : anthropic ? "output_config.format" : "response_format", reply);
    if (read == 0) {
        if (server_turn_acquire(s, fd) != 0) {
            server_error_reply(reply, 429, "rate_limit_error", NULL, "queue_full",
                               "%d requests already wait for the model; try again later", s->config->max_queue);
            reply->retry_after = "1";
        } else if (render_prompt(s, &q, &text, &text_length, &prefill, reply) != 0) {
            server_turn_release(s);
        } else if (q.stream) {
            /* the stream's response holds the turn until it ends */
            server_stream_begin(s, &q, text, text_length, prefill, reply);
        } else {
            if (ollama)
                server_ollama_answer(s, &q, text, text_length, prefill, reply);
            else if (endpoint == SERVER_ANTHROPIC_COUNT)
                server_anthropic_count(s, text, text_length, reply);
            else if (anthropic)
                server_anthropic_answer(s, &q, text, text_length, prefill, reply);
            else
                generate(s, &q, text, text_length, prefill, reply);
            server_turn_release(s);
        }
    }
    free(text);
    /* every slot: a message refused midway may own its joined parts already */
    for (int32_t i = 0; owned && i < q.n_owned; i++)
        free(owned[i]);
    free(owned);
    free(q.messages);
    cJSON_free(q.tools_json);
    cJSON_free(q.json_schema);
    free(q.call_schema);
    free(q.logit_bias);
    cJSON_Delete(root);
}
