/* Anthropic's Messages API on the generation path of the OpenAI endpoints:
 * /v1/messages reads into the same completion_request (as strictly: a field
 * that would change the answer and that bmoe does not do is refused naming
 * it, one that does not is accepted), takes its turn in the same line and
 * runs through the same generation and stream. What is Anthropic's here is
 * the reading of its content blocks (a user turn's tool results become the
 * template's tool messages, an assistant turn's tool uses its calls), the
 * message it answers (thinking, text and tool_use blocks, the stop reason,
 * the usage), the content blocks of its stream's named events,
 * /v1/messages/count_tokens and the shape of its errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "server.h"

#define BAD(param, ...)                                                                                           \
    do {                                                                                                          \
        server_error_reply(reply, 400, "invalid_request_error", param, "invalid_request", __VA_ARGS__);           \
        return -1;                                                                                                \
    } while (0)

/* Anthropic asks for a thinking budget of at least this many tokens. */
#define ANTHROPIC_MIN_THINKING_BUDGET 1024

static int out_of_memory(server_reply *reply)
{
    server_error_reply(reply, 500, "server_error", NULL, NULL, "out of memory");
    return -1;
}

static bool integer(const cJSON *field, double low, double high)
{
    return cJSON_IsNumber(field) && field->valuedouble >= low && field->valuedouble <= high &&
           field->valuedouble == floor(field->valuedouble);
}

/* null, false, "", [] or {}: a field given with nothing in it, which asks for nothing. */
static bool unset(const cJSON *field)
{
    return !field || cJSON_IsNull(field) || cJSON_IsFalse(field) ||
           (cJSON_IsString(field) && !field->valuestring[0]) ||
           ((cJSON_IsArray(field) || cJSON_IsObject(field)) && !field->child);
}

/* A name from the body, for a message: a long one is not echoed (cut, it
 * could end inside a character). */
static const char *shown(const char *name)
{
    return strlen(name) <= 64 ? name : "(a long name)";
}

/* The type of a content block or choice; NULL when it is not an object
 * with a string "type". */
static const char *type_of(const cJSON *object)
{
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(object, "type");
    return cJSON_IsObject(object) && cJSON_IsString(type) ? type->valuestring : NULL;
}

static bool is_type(const cJSON *object, const char *type)
{
    const char *given = type_of(object);
    return given && strcmp(given, type) == 0;
}

/* Every key of object is one of keys, once. cache_control, Anthropic's
 * prompt-caching mark, is accepted anywhere: bmoe reuses the longest
 * cached prefix whatever a request marks. 0, or -1 with the reply filled. */
static int known_keys(const cJSON *object, const char *param, const char *const *keys, size_t n_keys,
                      server_reply *reply)
{
    const cJSON *field;
    cJSON_ArrayForEach(field, object) {
        if (server_given_twice(object, field))
            BAD(param, "%s.%s is given twice", param, shown(field->string));
        if (strcmp(field->string, "cache_control") != 0 && !server_listed(keys, n_keys, field->string))
            BAD(param, "%s.%s is not supported by bmoe-server", param, shown(field->string));
    }
    return 0;
}

/* A block that has no place where it was given. Returns -1 with the reply filled. */
static int refuse_block(const cJSON *block, const char *param, server_reply *reply)
{
    const char *type = type_of(block);
    if (!type)
        BAD(param, "%s must be a content block: an object with a \"type\"", param);
    if (strcmp(type, "image") == 0 || strcmp(type, "document") == 0)
        BAD(param, "%s: %s blocks are not supported: bmoe reads text only", param, type);
    BAD(param, "%s: a \"%s\" block is not supported here", param, shown(type));
}

/* {"type": "text", "text"}: citations (of documents, which bmoe does not
 * read) only when empty. 0, or -1 with the reply filled. */
static int check_text_block(const cJSON *block, const char *param, server_reply *reply)
{
    static const char *const keys[] = {"type", "text", "citations"};
    if (!is_type(block, "text"))
        return refuse_block(block, param, reply);
    if (known_keys(block, param, keys, sizeof keys / sizeof keys[0], reply) != 0)
        return -1;
    if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(block, "text")))
        BAD(param, "%s.text must be a string", param);
    if (!unset(cJSON_GetObjectItemCaseSensitive(block, "citations")))
        BAD(param, "%s.citations: bmoe does not cite documents", param);
    return 0;
}

/* A text: a string (owned by the JSON), or a list of text blocks joined
 * (owned by *joined). 0, or -1 with the reply filled. */
static int read_text(const cJSON *content, const char *param, char **joined, const char **text, size_t *length,
                     server_reply *reply)
{
    if (cJSON_IsString(content)) {
        *text = content->valuestring;
        *length = strlen(content->valuestring);
        return 0;
    }
    if (!cJSON_IsArray(content))
        BAD(param, "%s must be a string or a list of text blocks", param);
    int i = 0;
    const cJSON *block;
    cJSON_ArrayForEach(block, content) {
        char at[96];
        snprintf(at, sizeof at, "%s[%d]", param, i++);
        if (check_text_block(block, at, reply) != 0)
            return -1;
    }
    return server_join_blocks(content, "text", "text", joined, text, length, reply);
}

/* The name of the tool called with id in the assistant turns of list
 * before its message at index (the template's tool message names its
 * function); NULL when none was. */
static const char *tool_name_of(const cJSON *list, int index, const char *id)
{
    const cJSON *message = list->child;
    for (int i = 0; message && i < index; i++, message = message->next) {
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(message, "content");
        const cJSON *blocks = cJSON_IsArray(content) ? content : NULL, *block;
        cJSON_ArrayForEach(block, blocks) {
            const cJSON *block_id = cJSON_GetObjectItemCaseSensitive(block, "id");
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(block, "name");
            if (is_type(block, "tool_use") && cJSON_IsString(block_id) && cJSON_IsString(name) &&
                strcmp(block_id->valuestring, id) == 0)
                return name->valuestring;
        }
    }
    return NULL;
}

/* The template's messages one of Anthropic's makes: a user turn's tool
 * results become tool messages, and its text a user message after them
 * (one, when it has no result). */
static size_t rendered_count(const cJSON *message)
{
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(message, "content");
    size_t results = 0, others = 0;
    const cJSON *blocks = cJSON_IsArray(content) ? content : NULL, *block;
    cJSON_ArrayForEach(block, blocks) {
        if (is_type(block, "tool_result"))
            results++;
        else
            others++;
    }
    return results + (others > 0 || results == 0 ? 1 : 0);
}

/* The next of q's messages; its three owned slots (its joined content,
 * reasoning and calls' JSON) at *slots. */
static bmoe_chat_message *next_message(completion_request *q, char **owned, char ***slots)
{
    *slots = &owned[3 * q->n_messages];
    return &q->messages[q->n_messages++];
}

/* A tool_result block: a tool message answering the call tool_use_id,
 * named by the call's function. 0, or -1 with the reply filled. */
static int read_tool_result(const cJSON *list, int index, const cJSON *block, const char *param, completion_request *q,
                            char **owned, server_reply *reply)
{
    /* is_error is read and has no place in a template's tool message: the
     * result's text is what the model sees of an error (clients write the
     * error there) */
    static const char *const keys[] = {"type", "tool_use_id", "content", "is_error"};
    if (known_keys(block, param, keys, sizeof keys / sizeof keys[0], reply) != 0)
        return -1;
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(block, "tool_use_id");
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(block, "content");
    const cJSON *is_error = cJSON_GetObjectItemCaseSensitive(block, "is_error");
    if (!cJSON_IsString(id) || !id->valuestring[0])
        BAD(param, "%s.tool_use_id must be the id of the call it answers", param);
    if (is_error && !cJSON_IsBool(is_error) && !cJSON_IsNull(is_error))
        BAD(param, "%s.is_error must be true or false", param);
    char **slots;
    bmoe_chat_message *m = next_message(q, owned, &slots);
    m->role = "tool";
    m->tool_call_id = id->valuestring;
    m->name = tool_name_of(list, index, id->valuestring);
    m->content = "";
    if (!content || cJSON_IsNull(content))
        return 0;
    char at[128];
    snprintf(at, sizeof at, "%s.content", param);
    return read_text(content, at, &slots[0], &m->content, &m->content_length, reply);
}

/* A user turn: its tool results (which Anthropic has come before any
 * text), then its text blocks as one user message. 0, or -1 with the
 * reply filled. */
static int read_user(const cJSON *list, int index, const cJSON *content, const char *param, completion_request *q,
                     char **owned, server_reply *reply)
{
    char **slots;
    if (cJSON_IsString(content)) {
        bmoe_chat_message *m = next_message(q, owned, &slots);
        *m = (bmoe_chat_message){.role = "user", .content = content->valuestring,
                                 .content_length = strlen(content->valuestring)};
        return 0;
    }
    bool text = false;
    int i = 0;
    const cJSON *block;
    cJSON_ArrayForEach(block, content) {
        char at[96];
        snprintf(at, sizeof at, "%s[%d]", param, i++);
        if (is_type(block, "tool_result")) {
            if (text)
                BAD(at, "%s: a tool_result block comes before the turn's text (as Anthropic's API has them)", at);
            if (read_tool_result(list, index, block, at, q, owned, reply) != 0)
                return -1;
        } else if (check_text_block(block, at, reply) != 0) {
            return -1;
        } else {
            text = true;
        }
    }
    if (!text && i > 0)
        return 0; /* tool results only */
    bmoe_chat_message *m = next_message(q, owned, &slots);
    m->role = "user";
    return server_join_blocks(content, "text", "text", &slots[0], &m->content, &m->content_length, reply);
}

/* A tool_use block of an assistant turn: {id, name, input (an object)}. 0,
 * or -1 with the reply filled. */
static int check_tool_use(const cJSON *block, const char *param, server_reply *reply)
{
    static const char *const keys[] = {"type", "id", "name", "input"};
    if (known_keys(block, param, keys, sizeof keys / sizeof keys[0], reply) != 0)
        return -1;
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(block, "id");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(block, "name");
    if (!cJSON_IsString(id) || !cJSON_IsString(name) || !name->valuestring[0])
        BAD(param, "%s needs a string id and name", param);
    if (!cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(block, "input")))
        BAD(param, "%s.input must be an object", param);
    return 0;
}

/* An assistant turn's tool uses as OpenAI's tool_calls (what the template
 * takes), their JSON text in *json. 0, or -1 with the reply filled. */
static int assistant_calls(const cJSON *content, const char *param, char **json, server_reply *reply)
{
    cJSON *calls = cJSON_CreateArray();
    bool made = calls != NULL;
    const cJSON *block;
    cJSON_ArrayForEach(block, content) {
        if (!made || !is_type(block, "tool_use"))
            continue;
        cJSON *call = cJSON_CreateObject();
        cJSON *function = cJSON_CreateObject();
        cJSON *input = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(block, "input"), true);
        made = call && function && input &&
               cJSON_AddStringToObject(call, "id", cJSON_GetObjectItemCaseSensitive(block, "id")->valuestring) &&
               cJSON_AddStringToObject(call, "type", "function") &&
               cJSON_AddStringToObject(function, "name", cJSON_GetObjectItemCaseSensitive(block, "name")->valuestring);
        if (made && cJSON_AddItemToObject(function, "arguments", input))
            input = NULL;
        if (made && cJSON_AddItemToObject(call, "function", function))
            function = NULL;
        made = made && !input && !function && cJSON_AddItemToArray(calls, call);
        if (!made) {
            cJSON_Delete(input);
            cJSON_Delete(function);
            cJSON_Delete(call);
        }
    }
    int status = made ? server_read_message_calls(calls, param, json, reply) : out_of_memory(reply);
    cJSON_Delete(calls);
    return status;
}

/* An assistant turn: its text, its thinking as the reasoning the template
 * renders (the signature is Anthropic's proof of its own thinking: bmoe's
 * blocks carry an empty one and it checks none), its tool uses as calls.
 * 0, or -1 with the reply filled. */
static int read_assistant(const cJSON *content, const char *param, completion_request *q, char **owned,
                          server_reply *reply)
{
    char **slots;
    bmoe_chat_message *m = next_message(q, owned, &slots);
    m->role = "assistant";
    if (cJSON_IsString(content)) {
        m->content = content->valuestring;
        m->content_length = strlen(content->valuestring);
        return 0;
    }
    static const char *const thinking_keys[] = {"type", "thinking", "signature"};
    bool thinking = false, calls = false;
    int i = 0;
    const cJSON *block;
    cJSON_ArrayForEach(block, content) {
        char at[96];
        snprintf(at, sizeof at, "%s[%d]", param, i++);
        if (is_type(block, "thinking")) {
            const cJSON *signature = cJSON_GetObjectItemCaseSensitive(block, "signature");
            if (known_keys(block, at, thinking_keys, sizeof thinking_keys / sizeof thinking_keys[0], reply) != 0)
                return -1;
            if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(block, "thinking")) ||
                (signature && !cJSON_IsString(signature) && !cJSON_IsNull(signature)))
                BAD(at, "%s: a thinking block has a string thinking (and signature)", at);
            thinking = true;
        } else if (is_type(block, "redacted_thinking")) {
            BAD(at, "%s: redacted_thinking is Anthropic's encrypted reasoning, which bmoe cannot read", at);
        } else if (is_type(block, "tool_use")) {
            if (check_tool_use(block, at, reply) != 0)
                return -1;
            calls = true;
        } else if (check_text_block(block, at, reply) != 0) {
            return -1;
        }
    }
    if (server_join_blocks(content, "text", "text", &slots[0], &m->content, &m->content_length, reply) != 0)
        return -1;
    if (thinking &&
        server_join_blocks(content, "thinking", "thinking", &slots[1], &m->reasoning, &m->reasoning_length, reply) != 0)
        return -1;
    if (calls && assistant_calls(content, param, &slots[2], reply) != 0)
        return -1;
    m->tool_calls_json = slots[2];
    return 0;
}

/* messages (user, assistant, and system turns), after the top-level system
 * prompt, into q->messages; *owned holds three slots per message made. 0,
 * or -1 with the reply filled. */
static int read_messages(const cJSON *list, const cJSON *system, completion_request *q, char ***owned,
                         server_reply *reply)
{
    int count = cJSON_GetArraySize(list);
    if (!cJSON_IsArray(list) || count == 0)
        BAD("messages", "messages must be a non-empty list");
    if (count > SERVER_MAX_MESSAGES)
        BAD("messages", "at most %d messages", SERVER_MAX_MESSAGES);
    size_t total = 1; /* the system prompt's */
    const cJSON *message;
    cJSON_ArrayForEach(message, list)
        total += rendered_count(message);
    q->messages = calloc(total, sizeof *q->messages);
    *owned = calloc(3 * total, sizeof **owned);
    if (*owned)
        q->n_owned = (int32_t)(3 * total);
    if (!q->messages || !*owned)
        return out_of_memory(reply);
    char **slots;
    /* an empty system prompt is none (a template would render an empty turn) */
    bool no_system = !system || cJSON_IsNull(system) || (cJSON_IsString(system) && !system->valuestring[0]) ||
                     (cJSON_IsArray(system) && !system->child);
    if (!no_system) {
        bmoe_chat_message *m = next_message(q, *owned, &slots);
        m->role = "system";
        if (read_text(system, "system", &slots[0], &m->content, &m->content_length, reply) != 0)
            return -1;
    }
    static const char *const keys[] = {"role", "content"};
    int i = 0;
    cJSON_ArrayForEach(message, list) {
        char param[64], at[80];
        snprintf(param, sizeof param, "messages[%d]", i);
        snprintf(at, sizeof at, "messages[%d].content", i);
        if (!cJSON_IsObject(message))
            BAD(param, "%s must be an object", param);
        if (known_keys(message, param, keys, sizeof keys / sizeof keys[0], reply) != 0)
            return -1;
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(message, "role");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(message, "content");
        if (!cJSON_IsString(content) && !cJSON_IsArray(content))
            BAD(at, "%s must be a string or a list of content blocks", at);
        int status;
        if (cJSON_IsString(role) && strcmp(role->valuestring, "user") == 0) {
            status = read_user(list, i, content, at, q, *owned, reply);
        } else if (cJSON_IsString(role) && strcmp(role->valuestring, "assistant") == 0) {
            status = read_assistant(content, at, q, *owned, reply);
        } else if (cJSON_IsString(role) && strcmp(role->valuestring, "system") == 0) {
            bmoe_chat_message *m = next_message(q, *owned, &slots);
            m->role = "system";
            status = read_text(content, at, &slots[0], &m->content, &m->content_length, reply);
        } else {
            BAD(param, "%s.role must be user, assistant or system", param);
        }
        if (status != 0)
            return -1;
        i++;
    }
    /* Anthropic continues a last assistant turn (a prefill); a template
     * renders it as a finished turn and answers a new one */
    if (strcmp(q->messages[q->n_messages - 1].role, "assistant") == 0)
        BAD("messages", "messages: the last message is the assistant's (a prefill to continue), which bmoe does not "
                        "do: end with a user message");
    return 0;
}

/* A custom tool: {name, description, input_schema}; Anthropic's own tools
 * (bash, web search, the text editor...) run on Anthropic's side. *strict
 * set when it asks for its input to be held to its schema. 0, or -1 with
 * the reply filled. */
static int check_tool(const cJSON *tool, const char *param, bool *strict, server_reply *reply)
{
    /* eager_input_streaming says how the input streams: bmoe's comes whole at the end either way */
    static const char *const keys[] = {"type",   "name",           "description",   "input_schema",   "strict",
                                       "eager_input_streaming", "input_examples", "defer_loading", "allowed_callers"};
    if (!cJSON_IsObject(tool))
        BAD(param, "%s must be an object", param);
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(tool, "type");
    if (type && !cJSON_IsNull(type) && !(cJSON_IsString(type) && strcmp(type->valuestring, "custom") == 0))
        BAD(param, "%s: type %s%s%s is one of Anthropic's server tools, run on its side: bmoe-server takes custom "
                   "tools {name, description, input_schema}",
            param, cJSON_IsString(type) ? "\"" : "", cJSON_IsString(type) ? shown(type->valuestring) : "(not a string)",
            cJSON_IsString(type) ? "\"" : "");
    if (known_keys(tool, param, keys, sizeof keys / sizeof keys[0], reply) != 0)
        return -1;
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(tool, "name");
    const cJSON *description = cJSON_GetObjectItemCaseSensitive(tool, "description");
    const cJSON *strict_field = cJSON_GetObjectItemCaseSensitive(tool, "strict");
    const cJSON *eager = cJSON_GetObjectItemCaseSensitive(tool, "eager_input_streaming");
    if (!cJSON_IsString(name) || !name->valuestring[0])
        BAD(param, "%s.name must be a non-empty string", param);
    if (description && !cJSON_IsString(description) && !cJSON_IsNull(description))
        BAD(param, "%s.description must be a string", param);
    if (!cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(tool, "input_schema")))
        BAD(param, "%s.input_schema must be a JSON schema (an object)", param);
    if ((strict_field && !cJSON_IsBool(strict_field) && !cJSON_IsNull(strict_field)) ||
        (eager && !cJSON_IsBool(eager) && !cJSON_IsNull(eager)))
        BAD(param, "%s.strict and .eager_input_streaming are true or false", param);
    *strict = *strict || cJSON_IsTrue(strict_field);
    if (!unset(cJSON_GetObjectItemCaseSensitive(tool, "input_examples")))
        BAD(param, "%s.input_examples: bmoe's templates have no place for a tool's examples", param);
    if (!unset(cJSON_GetObjectItemCaseSensitive(tool, "defer_loading")))
        BAD(param, "%s.defer_loading: bmoe does not search tools; every tool is in the prompt", param);
    const cJSON *callers = cJSON_GetObjectItemCaseSensitive(tool, "allowed_callers");
    const cJSON *listed = cJSON_IsArray(callers) ? callers : NULL, *caller;
    cJSON_ArrayForEach(caller, listed) {
        if (!cJSON_IsString(caller) || strcmp(caller->valuestring, "direct") != 0)
            BAD(param, "%s.allowed_callers: bmoe's model calls tools itself only (\"direct\")", param);
    }
    if (callers && !cJSON_IsArray(callers) && !cJSON_IsNull(callers))
        BAD(param, "%s.allowed_callers must be a list", param);
    return 0;
}

/* tools: Anthropic's custom tools as OpenAI's function tools (the JSON the
 * templates take: name, description, input_schema as the parameters). 0,
 * or -1 with the reply filled. */
static int read_tools(const cJSON *field, completion_request *q, bool *strict, server_reply *reply)
{
    if (!cJSON_IsArray(field))
        BAD("tools", "tools must be a list");
    int i = 0;
    const cJSON *tool;
    cJSON_ArrayForEach(tool, field) {
        char param[48];
        snprintf(param, sizeof param, "tools[%d]", i++);
        if (check_tool(tool, param, strict, reply) != 0)
            return -1;
    }
    cJSON *functions = cJSON_CreateArray();
    bool made = functions != NULL;
    cJSON_ArrayForEach(tool, field) {
        const cJSON *description = cJSON_GetObjectItemCaseSensitive(tool, "description");
        cJSON *entry = cJSON_CreateObject(), *function = cJSON_CreateObject();
        cJSON *schema = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(tool, "input_schema"), true);
        made = made && entry && function && schema && cJSON_AddStringToObject(entry, "type", "function") &&
               cJSON_AddStringToObject(function, "name", cJSON_GetObjectItemCaseSensitive(tool, "name")->valuestring) &&
               (!cJSON_IsString(description) ||
                cJSON_AddStringToObject(function, "description", description->valuestring));
        if (made && cJSON_AddItemToObject(function, "parameters", schema))
            schema = NULL;
        if (made && cJSON_AddItemToObject(entry, "function", function))
            function = NULL;
        made = made && !schema && !function && cJSON_AddItemToArray(functions, entry);
        if (!made) {
            cJSON_Delete(schema);
            cJSON_Delete(function);
            cJSON_Delete(entry);
            break;
        }
    }
    int status = made ? server_read_tools(functions, q, reply) : out_of_memory(reply);
    cJSON_Delete(functions);
    return status;
}

/* tool_choice: {"type": "auto"}, {"type": "any"} (one call of one of the
 * tools: OpenAI's "required"), {"type": "tool", "name"} (one call of that
 * one) or {"type": "none"}; *one_call set by disable_parallel_tool_use. 0,
 * or -1 with the reply filled. */
static int read_tool_choice(const cJSON *field, completion_request *q, bool *one_call, server_reply *reply)
{
    static const char *const keys[] = {"type", "name", "disable_parallel_tool_use"};
    const char *type = type_of(field);
    if (!type)
        BAD("tool_choice", "tool_choice must be an object with a \"type\"");
    if (known_keys(field, "tool_choice", keys, sizeof keys / sizeof keys[0], reply) != 0)
        return -1;
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(field, "name");
    const cJSON *single = cJSON_GetObjectItemCaseSensitive(field, "disable_parallel_tool_use");
    if (single && !cJSON_IsBool(single) && !cJSON_IsNull(single))
        BAD("tool_choice", "tool_choice.disable_parallel_tool_use must be true or false");
    *one_call = cJSON_IsTrue(single);
    bool named = strcmp(type, "tool") == 0;
    if (named && (!cJSON_IsString(name) || !name->valuestring[0]))
        BAD("tool_choice", "tool_choice {\"type\": \"tool\"} needs the tool's name");
    if (!named && name)
        BAD("tool_choice", "tool_choice.name goes with the type \"tool\"");
    if (strcmp(type, "any") == 0 || named) {
        q->force_call = true;
        q->forced_name = named ? name->valuestring : NULL;
    } else if (strcmp(type, "none") == 0) {
        q->tools_off = true;
    } else if (strcmp(type, "auto") != 0) {
        BAD("tool_choice", "tool_choice.type must be \"auto\", \"any\", \"tool\" or \"none\"");
    }
    return 0;
}

/* thinking: {"type": "enabled", "budget_tokens"} and {"type": "adaptive"}
 * (the model decides how much it reasons) are the template's
 * enable_thinking true, {"type": "disabled"} false; *budget the budget
 * read. 0, or -1 with the reply filled. */
static int read_thinking(const server *s, const cJSON *field, completion_request *q, double *budget,
                         server_reply *reply)
{
    static const char *const keys[] = {"type", "budget_tokens", "display"};
    const char *type = type_of(field);
    if (!type)
        BAD("thinking", "thinking must be an object with a \"type\"");
    if (known_keys(field, "thinking", keys, sizeof keys / sizeof keys[0], reply) != 0)
        return -1;
    const cJSON *budget_field = cJSON_GetObjectItemCaseSensitive(field, "budget_tokens");
    const cJSON *display = cJSON_GetObjectItemCaseSensitive(field, "display");
    bool enabled = strcmp(type, "enabled") == 0, adaptive = strcmp(type, "adaptive") == 0;
    if (!enabled && !adaptive && strcmp(type, "disabled") != 0)
        BAD("thinking", "thinking.type must be \"enabled\", \"adaptive\" or \"disabled\"");
    if (enabled != (budget_field != NULL))
        BAD("thinking", "thinking.budget_tokens goes with (and only with) the type \"enabled\"");
    /* read and checked as Anthropic asks, not enforced: bmoe does not cut a
     * model's reasoning short; max_tokens bounds the whole answer */
    if (enabled && !integer(budget_field, ANTHROPIC_MIN_THINKING_BUDGET, INT32_MAX))
        BAD("thinking", "thinking.budget_tokens must be an integer of at least %d", ANTHROPIC_MIN_THINKING_BUDGET);
    *budget = enabled ? budget_field->valuedouble : 0;
    if (display && !cJSON_IsNull(display) &&
        !(cJSON_IsString(display) && strcmp(display->valuestring, "summarized") == 0))
        BAD("thinking", "thinking.display: bmoe returns the model's reasoning as it is (\"summarized\" or null); it "
                        "has no signature to return in its place");
    if (!strcmp(type, "disabled") && display)
        BAD("thinking", "thinking.display goes with thinking on");
    q->think = enabled || adaptive;
    q->think_asked = true;
    enum bmoe_reasoning_format reasoning = s->chat ? bmoe_chat_reasoning_format(s->chat) : BMOE_REASONING_NONE;
    if (enabled && reasoning == BMOE_REASONING_NONE)
        BAD("thinking", "thinking: this model does not reason (its template has no reasoning section)");
    if (!q->think && s->chat && bmoe_chat_think_control(s->chat) == BMOE_THINK_CONTROL_NONE)
        BAD("thinking", "thinking disabled: this model reasons on every turn; its template cannot turn it off");
    return 0;
}

/* output_config: effort (low, medium, high: the template's reasoning_effort)
 * and format ({"type": "json_schema", "schema"}: bmoe's structured output). 0,
 * or -1 with the reply filled. */
static int read_output_config(const cJSON *field, completion_request *q, server_reply *reply)
{
    static const char *const keys[] = {"effort", "format"}, *const format_keys[] = {"type", "schema"};
    if (!cJSON_IsObject(field))
        BAD("output_config", "output_config must be an object");
    if (known_keys(field, "output_config", keys, sizeof keys / sizeof keys[0], reply) != 0)
        return -1;
    const cJSON *effort = cJSON_GetObjectItemCaseSensitive(field, "effort");
    const cJSON *format = cJSON_GetObjectItemCaseSensitive(field, "format");
    if (effort && !cJSON_IsNull(effort)) {
        if (!cJSON_IsString(effort) || !bmoe_reasoning_effort_valid(effort->valuestring))
            BAD("output_config", "output_config.effort must be \"low\", \"medium\" or \"high\" (the efforts the "
                                 "templates read)");
        q->reasoning_effort = effort->valuestring;
        q->effort_asked = true;
    }
    if (!format || cJSON_IsNull(format))
        return 0;
    if (!is_type(format, "json_schema"))
        BAD("output_config", "output_config.format must be {\"type\": \"json_schema\", \"schema\": ...}");
    if (known_keys(format, "output_config.format", format_keys, sizeof format_keys / sizeof format_keys[0], reply))
        return -1;
    const cJSON *schema = cJSON_GetObjectItemCaseSensitive(format, "schema");
    if (!cJSON_IsObject(schema))
        BAD("output_config", "output_config.format.schema must be a JSON schema (an object)");
    return server_read_json_answer(schema, q, reply);
}

/* stop_sequences: at most SERVER_MAX_STOPS non-empty strings. */
static int read_stops(const cJSON *field, completion_request *q, server_reply *reply)
{
    if (!cJSON_IsArray(field) || cJSON_GetArraySize(field) > SERVER_MAX_STOPS)
        BAD("stop_sequences", "stop_sequences must be a list of at most %d strings", SERVER_MAX_STOPS);
    const cJSON *stop;
    cJSON_ArrayForEach(stop, field) {
        if (!cJSON_IsString(stop) || !stop->valuestring[0])
            BAD("stop_sequences", "stop_sequences: each must be a non-empty string");
        q->stops[q->n_stops++] = stop->valuestring;
    }
    return 0;
}

/* Fields accepted that do not change the answer: who asks, where and how
 * fast it runs, Anthropic's cache marks (bmoe reuses the longest cached
 * prefix whatever they say) and its cache diagnostics. */
static bool harmless(const char *key)
{
    static const char *const names[] = {"metadata",      "service_tier", "inference_geo",   "speed",
                                        "cache_control", "diagnostics",  "user_profile_id", "workspace_id"};
    return server_listed(names, sizeof names / sizeof names[0], key);
}

/* count_tokens' fields: what the prompt is made of. */
static bool counted(const char *key)
{
    static const char *const names[] = {"model", "messages", "system", "tools", "tool_choice",
                                        "thinking", "output_config", "cache_control", "speed"};
    return server_listed(names, sizeof names / sizeof names[0], key);
}

static int read_model(const server *s, const cJSON *field, server_reply *reply)
{
    if (cJSON_IsNull(field))
        return 0;
    if (!cJSON_IsString(field))
        BAD("model", "model must be a string");
    if (server_names_model(s, field->valuestring))
        return 0;
    server_model_not_found(s, field->valuestring, reply);
    return -1;
}

int server_anthropic_read(const server *s, const cJSON *root, enum server_endpoint endpoint, completion_request *q,
                          char ***owned, server_reply *reply)
{
    if (server_request_begin(s, root, endpoint, true, q, reply) != 0)
        return -1;
    bool counting = endpoint == SERVER_ANTHROPIC_COUNT;
    const cJSON *messages = NULL, *system = NULL, *field;
    bool max_given = false, strict = false, one_call = false;
    double budget = 0;
    cJSON_ArrayForEach(field, root) {
        const char *key = field->string;
        bool null = cJSON_IsNull(field);
        if (server_given_twice(root, field))
            BAD(key, "%s is given twice", shown(key));
        if (counting && !counted(key))
            BAD(key, "%s is not a field of count_tokens", shown(key));
        if (harmless(key)) {
            continue;
        } else if (strcmp(key, "model") == 0) {
            if (read_model(s, field, reply) != 0)
                return -1;
        } else if (strcmp(key, "max_tokens") == 0) {
            if (!integer(field, 1, INT32_MAX))
                BAD(key, "max_tokens must be a positive integer");
            q->n_predict = (int32_t)field->valuedouble;
            max_given = true;
        } else if (strcmp(key, "messages") == 0) {
            messages = field;
        } else if (strcmp(key, "system") == 0) {
            system = field;
        } else if (strcmp(key, "stream") == 0) {
            if (!null && !cJSON_IsBool(field))
                BAD(key, "stream must be true or false");
            q->stream = cJSON_IsTrue(field);
        } else if (strcmp(key, "stop_sequences") == 0) {
            if (!null && read_stops(field, q, reply) != 0)
                return -1;
        } else if (strcmp(key, "temperature") == 0 || strcmp(key, "top_p") == 0 || strcmp(key, "top_k") == 0) {
            bool unit = cJSON_IsNumber(field) && field->valuedouble >= 0 && field->valuedouble <= 1;
            if (strcmp(key, "temperature") == 0 && !null && !unit)
                BAD(key, "temperature must be a number in [0, 1]");
            if (server_read_sampling(field, key, q, reply) < 0)
                return -1;
        } else if (strcmp(key, "tools") == 0) {
            if (!null && read_tools(field, q, &strict, reply) != 0)
                return -1;
        } else if (strcmp(key, "tool_choice") == 0) {
            if (!null && read_tool_choice(field, q, &one_call, reply) != 0)
                return -1;
        } else if (strcmp(key, "thinking") == 0) {
            if (!null && read_thinking(s, field, q, &budget, reply) != 0)
                return -1;
        } else if (strcmp(key, "output_config") == 0) {
            if (!null && read_output_config(field, q, reply) != 0)
                return -1;
        } else {
            BAD(key, "%s is not supported by bmoe-server", shown(key));
        }
    }
    if (!counting && !max_given)
        BAD("max_tokens", "max_tokens is required");
    if (max_given && budget >= q->n_predict)
        BAD("thinking", "thinking.budget_tokens must be less than max_tokens");
    if (!messages)
        BAD("messages", "messages is required");
    if (q->force_call && !q->tools_json)
        BAD("tool_choice", "tool_choice: forcing a call (any or tool) needs tools");
    /* a forced call is held to its tool's schema and is one call; without
     * one, the model writes its calls freely */
    if (one_call && !q->force_call && !q->tools_off)
        BAD("tool_choice", "tool_choice.disable_parallel_tool_use: bmoe holds an answer to one call only when "
                           "tool_choice forces it (any or tool)");
    if (strict && !q->force_call && !q->tools_off)
        BAD("tools", "tools: strict holds a call's input to its schema, which bmoe does only when tool_choice "
                     "forces the call (any or tool)");
    return read_messages(messages, system, q, owned, reply);
}

void server_anthropic_id(server *s, char *id, size_t size)
{
    snprintf(id, size, "msg_bmoe%llu", (unsigned long long)atomic_fetch_add(&s->next_id, 1));
}

/* A tool_use block's id: the message's count and the call's place in it. */
static void tool_use_id(const char *message_id, int index, char *id, size_t size)
{
    const char *count = strncmp(message_id, "msg_", 4) == 0 ? message_id + 4 : message_id;
    snprintf(id, size, "toolu_%s_%d", count, index);
}

/* The usage: Anthropic's input_tokens are those the prompt evaluated, its
 * cache_read_input_tokens those the cache served (the prompt is their sum,
 * as count_tokens counts it); output_tokens, the answer's. 0, or -1. */
static int add_usage(cJSON *parent, const bmoe_generation *g)
{
    int32_t n_prompt = bmoe_generation_n_prompt(g), reused = bmoe_generation_n_reused(g);
    cJSON *usage = cJSON_AddObjectToObject(parent, "usage");
    bool made = usage && cJSON_AddNumberToObject(usage, "input_tokens", n_prompt - reused) &&
                cJSON_AddNumberToObject(usage, "cache_creation_input_tokens", 0) &&
                cJSON_AddNumberToObject(usage, "cache_read_input_tokens", reused) &&
                cJSON_AddNumberToObject(usage, "output_tokens", bmoe_generation_n_generated(g));
    return made ? 0 : -1;
}

/* The message with no content yet and no stop reason (message_start's, and
 * the answer's before its blocks). NULL: out of memory. */
static cJSON *message_new(const server *s, const char *id, const bmoe_generation *g)
{
    cJSON *message = cJSON_CreateObject();
    bool made = message && cJSON_AddStringToObject(message, "id", id) &&
                cJSON_AddStringToObject(message, "type", "message") &&
                cJSON_AddStringToObject(message, "role", "assistant") &&
                cJSON_AddStringToObject(message, "model", s->model_id) && cJSON_AddArrayToObject(message, "content") &&
                cJSON_AddNullToObject(message, "stop_reason") && cJSON_AddNullToObject(message, "stop_sequence") &&
                add_usage(message, g) == 0;
    if (!made) {
        cJSON_Delete(message);
        return NULL;
    }
    return message;
}

/* {"type": kind, field: text} (thinking blocks with an empty signature:
 * bmoe signs nothing), text[0, length) copied. NULL: out of memory. */
static cJSON *block_new(const char *kind, const char *field, const char *text, size_t length)
{
    char *copy = strndup(text ? text : "", length);
    cJSON *block = cJSON_CreateObject();
    bool made = copy && block && cJSON_AddStringToObject(block, "type", kind) &&
                cJSON_AddStringToObject(block, field, copy) &&
                (strcmp(kind, "thinking") != 0 || cJSON_AddStringToObject(block, "signature", ""));
    free(copy);
    if (!made) {
        cJSON_Delete(block);
        return NULL;
    }
    return block;
}

/* A call's input: its arguments (JSON text) as the object they are, or as
 * a string when the model wrote no JSON object (Anthropic's input is an
 * object: the client sees what the model wrote rather than a guess). NULL:
 * out of memory. */
static cJSON *call_input(const char *arguments)
{
    cJSON *input = cJSON_Parse(arguments);
    if (cJSON_IsObject(input))
        return input;
    cJSON_Delete(input);
    return cJSON_CreateString(arguments);
}

/* A tool_use block of OpenAI's call (server_answer_message's shape), the
 * index-th of message id; with its input empty (a stream's start, the input
 * streams after) or whole. NULL: out of memory. */
static cJSON *tool_use_new(const cJSON *call, const char *message_id, int index, bool empty_input)
{
    const cJSON *function = cJSON_GetObjectItemCaseSensitive(call, "function");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(function, "name");
    const cJSON *arguments = cJSON_GetObjectItemCaseSensitive(function, "arguments");
    char id[96];
    tool_use_id(message_id, index, id, sizeof id);
    cJSON *block = cJSON_CreateObject();
    const char *written = cJSON_IsString(arguments) ? arguments->valuestring : "";
    cJSON *input = empty_input ? cJSON_CreateObject() : call_input(written);
    bool made = block && input && cJSON_IsString(name) && cJSON_AddStringToObject(block, "type", "tool_use") &&
                cJSON_AddStringToObject(block, "id", id) && cJSON_AddStringToObject(block, "name", name->valuestring);
    if (made && cJSON_AddItemToObject(block, "input", input))
        return block;
    cJSON_Delete(input);
    cJSON_Delete(block);
    return NULL;
}

/* Anthropic's stop reason for bmoe's; called: the answer's calls ended the
 * turn. A cancelled generation ends its turn too (Anthropic has no reason
 * for it; the "bmoe" figures say cancelled). */
static const char *stop_reason(enum bmoe_stop_reason stop, bool called)
{
    if (called)
        return "tool_use";
    switch (stop) {
    case BMOE_STOP_N_PREDICT: return "max_tokens";
    case BMOE_STOP_CONTEXT_FULL: return "model_context_window_exceeded";
    case BMOE_STOP_STRING: return "stop_sequence";
    default: return "end_turn";
    }
}

/* The stop sequence that ended a generation, one of stops (NULL when not
 * found). The library ends the text before the first stop to appear in it
 * (at one place, the first listed) and does not say which: one ends in the
 * piece of the last token, since none was whole before it, and that token
 * was never decoded into the context (the generation stopped first). So
 * the earliest in the text of the context's last generated tokens and that
 * piece is the one. */
static const char *matched_stop(const server *s, const bmoe_generation *g, int32_t last_token,
                                const char *const *stops, int32_t n_stops)
{
    if (n_stops == 1)
        return stops[0];
    if (n_stops == 0 || last_token < 0)
        return NULL;
    size_t longest = 0;
    for (int32_t i = 0; i < n_stops; i++)
        longest = strlen(stops[i]) > longest ? strlen(stops[i]) : longest;
    const int32_t *tokens = bmoe_context_tokens(s->context);
    int32_t end = bmoe_context_position(s->context), first = bmoe_generation_n_prompt(g), from = end;
    int32_t last_length = bmoe_token_to_piece(s->model, last_token, false, NULL, 0, NULL);
    size_t span = last_length > 0 ? (size_t)last_length : 0;
    /* the pieces before the last one that a stop can reach back into */
    for (size_t before = 0; from > first && before < longest; from--) {
        int32_t length = bmoe_token_to_piece(s->model, tokens[from - 1], false, NULL, 0, NULL);
        before += length > 0 ? (size_t)length : 0;
        span += length > 0 ? (size_t)length : 0;
    }
    char *text = malloc(span + 1);
    if (!text)
        return NULL;
    size_t used = 0;
    for (int32_t i = from; i <= end; i++) {
        int32_t token = i < end ? tokens[i] : last_token;
        int32_t length = bmoe_token_to_piece(s->model, token, false, text + used, (int32_t)(span - used), NULL);
        used += length > 0 && (size_t)length <= span - used ? (size_t)length : 0;
    }
    text[used] = '\0'; /* searched as a string: a NUL byte in a piece (text has none) would hide what follows */
    const char *matched = NULL;
    const char *earliest = text + used;
    for (int32_t i = 0; i < n_stops; i++) {
        const char *at = strstr(text, stops[i]);
        if (at && at < earliest) {
            earliest = at;
            matched = stops[i];
        }
    }
    free(text);
    return matched;
}

/* The answer's content blocks (its thinking, its text, a tool_use per
 * call) and stop in message; finish is server_finish_reason's. 0, or -1
 * (out of memory). */
static int place_answer(cJSON *message, const server *s, const completion_request *q, const char *id,
                        const char *answer, size_t answer_length, const char *thinking, size_t thinking_length,
                        const char *finish, const char *stop_sequence, enum bmoe_stop_reason stop)
{
    cJSON *content = cJSON_GetObjectItemCaseSensitive(message, "content");
    cJSON *read = cJSON_CreateObject();
    char *answer_text = strndup(answer ? answer : "", answer_length);
    int status = read && answer_text ? 0 : -1;
    /* with tools, the text is what is around the calls (server_answer_message's reading) */
    if (status == 0 && server_tools_active(s, q))
        status = server_answer_message(read, bmoe_chat_tool_format(s->chat), answer_text, id, &finish);
    const cJSON *kept = cJSON_GetObjectItemCaseSensitive(read, "content");
    const char *text = server_tools_active(s, q) ? (cJSON_IsString(kept) ? kept->valuestring : "") : answer_text;
    cJSON *block = NULL;
    if (status == 0 && thinking_length > 0 && !cJSON_AddItemToArray(content, block_new("thinking", "thinking",
                                                                                          thinking, thinking_length)))
        status = -1;
    if (status == 0 && text && text[0] && !cJSON_AddItemToArray(content, block_new("text", "text", text, strlen(text))))
        status = -1;
    int index = 0;
    const cJSON *calls = status == 0 ? cJSON_GetObjectItemCaseSensitive(read, "tool_calls") : NULL, *call;
    cJSON_ArrayForEach(call, calls) {
        if (!(block = tool_use_new(call, id, index++, false)) || !cJSON_AddItemToArray(content, block)) {
            cJSON_Delete(block);
            status = -1;
            break;
        }
    }
    const char *reason = stop_reason(stop, strcmp(finish, "tool_calls") == 0);
    bool sequence = strcmp(reason, "stop_sequence") == 0 && stop_sequence;
    cJSON *reason_item = cJSON_CreateString(reason);
    cJSON *sequence_item = sequence ? cJSON_CreateString(stop_sequence) : cJSON_CreateNull();
    if (status == 0 && reason_item && cJSON_ReplaceItemInObjectCaseSensitive(message, "stop_reason", reason_item))
        reason_item = NULL;
    if (status == 0 && sequence_item &&
        cJSON_ReplaceItemInObjectCaseSensitive(message, "stop_sequence", sequence_item))
        sequence_item = NULL;
    if (reason_item || sequence_item)
        status = -1;
    cJSON_Delete(reason_item);
    cJSON_Delete(sequence_item);
    cJSON_Delete(read);
    free(answer_text);
    return status;
}

void server_anthropic_answer(server *s, const completion_request *q, const char *text, size_t text_length,
                             bool prefill, server_reply *reply)
{
    bmoe_generation *g = NULL;
    bmoe_reasoning *reasoning = NULL;
    bmoe_step last = {0};
    int32_t last_token = -1;
    if (server_generation_whole(s, q, text, text_length, prefill, NULL, &g, &reasoning, &last, &last_token, reply) !=
        0)
        return;
    size_t answer_length = 0, thinking_length = 0;
    const char *answer = bmoe_reasoning_answer(reasoning, &answer_length);
    const char *thinking = bmoe_reasoning_thinking(reasoning, &thinking_length);
    char id[48];
    server_anthropic_id(s, id, sizeof id);
    const char *stop_sequence = last.stop == BMOE_STOP_STRING
                                    ? matched_stop(s, g, last_token, q->stops, q->n_stops)
                                    : NULL;
    cJSON *message = message_new(s, id, g);
    bool made = message && place_answer(message, s, q, id, answer, answer_length, thinking, thinking_length,
                                        server_finish_reason(last.stop), stop_sequence, last.stop) == 0;
    server_generation_close(s, g, reasoning, made ? message : NULL, last.stop == BMOE_STOP_ABORTED);
    if (!made) {
        cJSON_Delete(message);
        server_error_reply(reply, 500, "server_error", NULL, NULL, "out of memory for the answer");
        return;
    }
    server_json_reply(reply, 200, message);
}

void server_anthropic_count(const server *s, const char *text, size_t text_length, server_reply *reply)
{
    bmoe_error error = {0};
    int32_t count = bmoe_chat_tokenize(s->chat, text, text_length, NULL, 0, &error);
    if (count < 0) {
        server_error_reply(reply, count == BMOE_ERR_OUT_OF_MEMORY ? 500 : 400,
                           count == BMOE_ERR_OUT_OF_MEMORY ? "server_error" : "invalid_request_error", "messages",
                           NULL, "the prompt's tokens: %s", error.message);
        return;
    }
    cJSON *root = cJSON_CreateObject();
    if (root && !cJSON_AddNumberToObject(root, "input_tokens", count)) {
        cJSON_Delete(root);
        root = NULL;
    }
    server_json_reply(reply, 200, root);
}

/* Anthropic's error type for an HTTP status. */
static const char *error_type(unsigned status)
{
    switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    default: return status >= 500 ? "api_error" : "invalid_request_error";
    }
}

void server_anthropic_error(server_reply *reply)
{
    if (reply->stream || reply->status < 400 || !reply->body)
        return;
    cJSON *root = cJSON_ParseWithLength(reply->body, reply->length);
    const cJSON *message = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "error"), "message");
    cJSON *shaped = cJSON_IsString(message) ? cJSON_CreateObject() : NULL;
    cJSON *error = cJSON_CreateObject();
    bool made = shaped && error && cJSON_AddStringToObject(shaped, "type", "error") &&
                cJSON_AddStringToObject(error, "type", error_type(reply->status)) &&
                cJSON_AddStringToObject(error, "message", message->valuestring);
    if (made && cJSON_AddItemToObject(shaped, "error", error))
        error = NULL;
    char *body = made && !error ? cJSON_PrintUnformatted(shaped) : NULL;
    cJSON_Delete(error);
    cJSON_Delete(shaped);
    cJSON_Delete(root);
    if (!body)
        return; /* out of memory: the error stays as it was, with its status */
    free(reply->body);
    reply->body = body;
    reply->length = strlen(body);
    reply->content_type = NULL;
}

int server_anthropic_blocks_init(anthropic_blocks *blocks, const completion_request *q)
{
    memset(blocks, 0, sizeof *blocks);
    blocks->last_token = -1;
    for (int32_t i = 0; i < q->n_stops; i++) {
        if (!(blocks->stops[i] = strdup(q->stops[i])))
            return -1;
        blocks->n_stops++;
    }
    return 0;
}

void server_anthropic_blocks_free(anthropic_blocks *blocks)
{
    for (int32_t i = 0; i < blocks->n_stops; i++)
        free(blocks->stops[i]);
    blocks->n_stops = 0;
}

/* Appends {"type": type, "index": the open block's} with field holding
 * item (consumed; NULL: none) to events. 0, or -1 (out of memory). */
static int push_block_event(const anthropic_blocks *blocks, cJSON *events, const char *type, const char *field,
                            cJSON *item)
{
    cJSON *event = cJSON_CreateObject();
    bool made = event && (!field || item) && cJSON_AddStringToObject(event, "type", type) &&
                cJSON_AddNumberToObject(event, "index", blocks->index);
    if (made && field && cJSON_AddItemToObject(event, field, item))
        item = NULL;
    made = made && !item && cJSON_AddItemToArray(events, event);
    if (!made) {
        cJSON_Delete(item);
        cJSON_Delete(event);
    }
    return made ? 0 : -1;
}

static int block_start(anthropic_blocks *blocks, cJSON *events, enum anthropic_block kind)
{
    bool thinking = kind == ANTHROPIC_BLOCK_THINKING;
    cJSON *block = block_new(thinking ? "thinking" : "text", thinking ? "thinking" : "text", "", 0);
    if (push_block_event(blocks, events, "content_block_start", "content_block", block) != 0)
        return -1;
    blocks->open = kind;
    if (blocks->restarted) { /* marked for a client that can redraw, as the OpenAI stream marks its snapshots */
        blocks->restarted = false;
        cJSON *figures = cJSON_AddObjectToObject(cJSON_GetArrayItem(events, cJSON_GetArraySize(events) - 1), "bmoe");
        if (!figures || !cJSON_AddTrueToObject(figures, "reset"))
            return -1;
    }
    return 0;
}

static int block_stop(anthropic_blocks *blocks, cJSON *events)
{
    if (blocks->open == ANTHROPIC_BLOCK_NONE)
        return 0;
    if (push_block_event(blocks, events, "content_block_stop", NULL, NULL) != 0)
        return -1;
    blocks->open = ANTHROPIC_BLOCK_NONE;
    blocks->index++;
    return 0;
}

/* A delta of the open block: {"type": kind, field: text[0, length)}. */
static int block_delta(anthropic_blocks *blocks, cJSON *events, const char *kind, const char *field,
                       const char *text, size_t length)
{
    cJSON *delta = block_new(kind, field, text, length);
    return push_block_event(blocks, events, "content_block_delta", "delta", delta);
}

/* The open block becomes kind: the open one of another kind stops, and a
 * new one starts. */
static int block_of(anthropic_blocks *blocks, cJSON *events, enum anthropic_block kind)
{
    if (blocks->open == kind)
        return 0;
    if (block_stop(blocks, events) != 0)
        return -1;
    return block_start(blocks, events, kind);
}

cJSON *server_anthropic_start(const server *s, const char *id, const bmoe_generation *g)
{
    cJSON *event = cJSON_CreateObject(), *message = message_new(s, id, g);
    bool made = event && message && cJSON_AddStringToObject(event, "type", "message_start");
    if (made && cJSON_AddItemToObject(event, "message", message))
        return event;
    cJSON_Delete(message);
    cJSON_Delete(event);
    return NULL;
}

int server_anthropic_deltas(anthropic_blocks *blocks, cJSON *events, const char *thinking, size_t thinking_length,
                            const char *text, size_t text_length, bool reset)
{
    /* a reset's snapshots replace what went before, which a stream cannot
     * take back: the open block ends and the snapshots start new ones */
    if (reset && blocks->open != ANTHROPIC_BLOCK_NONE) {
        if (block_stop(blocks, events) != 0)
            return -1;
        blocks->restarted = true;
    }
    if (thinking_length > 0 &&
        (block_of(blocks, events, ANTHROPIC_BLOCK_THINKING) != 0 ||
         block_delta(blocks, events, "thinking_delta", "thinking", thinking, thinking_length) != 0))
        return -1;
    if (text_length > 0 && (block_of(blocks, events, ANTHROPIC_BLOCK_TEXT) != 0 ||
                            block_delta(blocks, events, "text_delta", "text", text, text_length) != 0))
        return -1;
    return 0;
}

/* A call as a tool_use block: its start with an empty input, the whole
 * input as one input_json_delta (bmoe reads a call once it is written),
 * its stop. */
static int push_tool_use(anthropic_blocks *blocks, cJSON *events, const char *id, int index, const cJSON *call)
{
    const cJSON *arguments = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(call, "function"),
                                                              "arguments");
    cJSON *input = call_input(cJSON_IsString(arguments) ? arguments->valuestring : "");
    char *json = input ? cJSON_PrintUnformatted(input) : NULL;
    cJSON_Delete(input);
    int status = json ? push_block_event(blocks, events, "content_block_start", "content_block",
                                         tool_use_new(call, id, index, true))
                      : -1;
    if (status == 0) {
        blocks->open = ANTHROPIC_BLOCK_TOOL_USE;
        status = block_delta(blocks, events, "input_json_delta", "partial_json", json, strlen(json));
    }
    free(json);
    return status == 0 ? block_stop(blocks, events) : -1;
}

int server_anthropic_end(anthropic_blocks *blocks, cJSON *events, const server *s, const char *id,
                         const bmoe_generation *g, const cJSON *calls, bool called, enum bmoe_stop_reason stop)
{
    if (block_stop(blocks, events) != 0)
        return -1;
    int index = 0;
    const cJSON *call;
    cJSON_ArrayForEach(call, calls) {
        if (push_tool_use(blocks, events, id, index++, call) != 0)
            return -1;
    }
    const char *reason = stop_reason(stop, called);
    const char *sequence = strcmp(reason, "stop_sequence") == 0
                               ? matched_stop(s, g, blocks->last_token, (const char *const *)blocks->stops,
                                              blocks->n_stops)
                               : NULL;
    cJSON *delta_event = cJSON_CreateObject(), *stop_event = cJSON_CreateObject();
    bool typed = cJSON_AddStringToObject(delta_event, "type", "message_delta") != NULL;
    cJSON *delta = cJSON_AddObjectToObject(delta_event, "delta");
    bool made = typed && stop_event && delta && cJSON_AddStringToObject(delta, "stop_reason", reason) &&
                (sequence ? cJSON_AddStringToObject(delta, "stop_sequence", sequence)
                          : cJSON_AddNullToObject(delta, "stop_sequence")) &&
                add_usage(delta_event, g) == 0 && cJSON_AddStringToObject(stop_event, "type", "message_stop");
    if (made)
        server_add_figures(delta_event, g, s, stop == BMOE_STOP_ABORTED);
    if (made && cJSON_AddItemToArray(events, delta_event)) {
        delta_event = NULL;
        if (cJSON_AddItemToArray(events, stop_event))
            stop_event = NULL;
    }
    made = made && !delta_event && !stop_event;
    cJSON_Delete(delta_event);
    cJSON_Delete(stop_event);
    return made ? 0 : -1;
}
