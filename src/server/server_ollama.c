/* Ollama's REST API on the generation path of the OpenAI endpoints:
 * /api/chat and /api/generate read into the same completion_request (as
 * strictly: a field or option that would change the answer and that bmoe
 * does not do is refused naming it, one that does not is accepted), take
 * their turn in the same line and run through the same generation and
 * stream; what is Ollama's here is the reading of its fields, the shape of
 * its answers (one object, or NDJSON pieces then the last with the counts
 * and durations) and of its errors ({"error": "..."}), and the model's
 * description in /api/tags, /api/ps, /api/show and /api/version. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "server.h"

#define BAD(param, ...)                                                                                           \
    do {                                                                                                          \
        server_error_reply(reply, 400, "invalid_request_error", param, "invalid_request", __VA_ARGS__);           \
        return -1;                                                                                                \
    } while (0)

static int64_t monotonic_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

/* RFC 3339 in UTC with nanoseconds, as Ollama writes its times. */
static void time_text(time_t seconds, long nanoseconds, char *out, size_t size)
{
    struct tm utc;
    gmtime_r(&seconds, &utc);
    size_t used = strftime(out, size, "%Y-%m-%dT%H:%M:%S", &utc);
    snprintf(out + used, size - used, ".%09ldZ", nanoseconds);
}

static void now_text(char *out, size_t size)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    time_text(now.tv_sec, now.tv_nsec, out, size);
}

/* The model file's last change (Ollama's modified_at). */
static void modified_text(const server *s, char *out, size_t size)
{
    struct stat status;
    if (stat(s->config->model_path, &status) == 0)
        time_text(status.st_mtim.tv_sec, status.st_mtim.tv_nsec, out, size);
    else
        now_text(out, size);
}

/* null, "", [] or {}: a field given with nothing in it. */
static bool empty(const cJSON *field)
{
    return cJSON_IsNull(field) || (cJSON_IsString(field) && !field->valuestring[0]) ||
           ((cJSON_IsArray(field) || cJSON_IsObject(field)) && !field->child);
}

static bool integer(const cJSON *field, double low, double high)
{
    return cJSON_IsNumber(field) && field->valuedouble >= low && field->valuedouble <= high &&
           field->valuedouble == floor(field->valuedouble);
}

/* Ollama names a model name:tag, the tag "latest" when none is given. */
static bool names_model(const server *s, const char *name)
{
    static const char latest[] = ":latest";
    size_t length = strlen(name), tag = sizeof latest - 1;
    if (length <= tag || strcmp(name + length - tag, latest) != 0)
        return server_names_model(s, name);
    char *bare = strndup(name, length - tag);
    bool named = bare && server_names_model(s, bare);
    free(bare);
    return named;
}

static int read_model(const server *s, const cJSON *field, server_reply *reply)
{
    if (!cJSON_IsString(field))
        BAD("model", "model must be a string");
    if (names_model(s, field->valuestring))
        return 0;
    server_model_not_found(s, field->valuestring, reply);
    return -1;
}

/* options: the sampling fields as OpenAI's body names them (shared), the
 * answer's length and context; what tunes how a server runs rather than
 * what it answers is accepted (bmoe's own are its flags). */
static int read_options(const cJSON *options, completion_request *q, server_reply *reply)
{
    static const char *const runtime[] = {"num_keep", "num_batch", "num_gpu",  "main_gpu", "num_thread", "use_mmap",
                                          "use_mlock", "low_vram", "f16_kv", "vocab_only", "numa"};
    if (cJSON_IsNull(options))
        return 0;
    if (!cJSON_IsObject(options))
        BAD("options", "options must be an object");
    if (cJSON_GetArraySize(options) > 64)
        BAD("options", "options has more than 64 fields");
    const cJSON *field;
    cJSON_ArrayForEach(field, options) {
        const char *key = field->string;
        char name[80];
        /* a long name is not echoed: cut, it could end inside a character */
        snprintf(name, sizeof name, "options.%s", strlen(key) <= 64 ? key : "(a long name)");
        if (server_given_twice(options, field))
            BAD(name, "%s is given twice", name);
        int sampling = server_read_sampling(field, name, q, reply);
        if (sampling < 0)
            return -1;
        if (sampling > 0 || cJSON_IsNull(field) || server_listed(runtime, sizeof runtime / sizeof runtime[0], key))
            continue;
        if (strcmp(key, "num_predict") == 0) {
            if (integer(field, -2, -1))
                q->n_predict = -1; /* bmoe's answer ends at the end of generation or a full context */
            else if (integer(field, 1, INT32_MAX))
                q->n_predict = (int32_t)field->valuedouble;
            else
                BAD(name, "%s must be a positive integer, -1 (no limit) or -2 (until the context is full)", name);
        } else if (strcmp(key, "num_ctx") == 0) {
            if (!integer(field, 1, INT32_MAX))
                BAD(name, "%s must be a positive integer", name);
            q->n_ctx = (int32_t)field->valuedouble;
        } else {
            BAD(name, "%s is not supported by bmoe-server", name);
        }
    }
    return 0;
}

/* format: "json" (the answer is one JSON object) or a JSON schema, bmoe's
 * structured output; "" or null: text. */
static int read_format(const cJSON *field, completion_request *q, server_reply *reply)
{
    if (empty(field) && !cJSON_IsObject(field))
        return 0;
    if (cJSON_IsString(field) && strcmp(field->valuestring, "json") == 0)
        return server_read_json_answer(NULL, q, reply);
    if (!cJSON_IsObject(field))
        BAD("format", "format must be \"json\" or a JSON schema (an object)");
    return server_read_json_answer(field, q, reply);
}

/* think: true or false (the template's enable_thinking), or a level, which
 * is the template's reasoning_effort with thinking on. */
static int read_think(const cJSON *field, completion_request *q, server_reply *reply)
{
    if (cJSON_IsNull(field))
        return 0;
    if (cJSON_IsBool(field)) {
        q->think = cJSON_IsTrue(field);
    } else if (cJSON_IsString(field) && bmoe_reasoning_effort_valid(field->valuestring)) {
        q->think = true;
        q->reasoning_effort = field->valuestring;
        q->effort_asked = true;
    } else {
        BAD("think", "think must be true, false, \"low\", \"medium\" or \"high\"");
    }
    q->think_asked = true;
    return 0;
}

/* messages: Ollama's {role, content, thinking, tool_calls, images,
 * tool_name}, the texts owned by the JSON, an assistant's calls' JSON by
 * (*owned)[i]. */
static int read_messages(const cJSON *list, completion_request *q, char ***owned, server_reply *reply)
{
    if (server_messages_begin(list, true, 1, q, owned, reply) < 0)
        return -1;
    static const char *const keys[] = {"role", "content", "thinking", "images", "tool_calls", "tool_name"};
    int i = 0;
    const cJSON *message;
    cJSON_ArrayForEach(message, list) {
        char param[64];
        snprintf(param, sizeof param, "messages[%d]", i);
        bmoe_chat_message *m = &q->messages[i];
        if (server_message_begin(message, param, keys, sizeof keys / sizeof keys[0], &m->role, reply) != 0)
            return -1;
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(message, "content");
        const cJSON *thinking = cJSON_GetObjectItemCaseSensitive(message, "thinking");
        const cJSON *calls = cJSON_GetObjectItemCaseSensitive(message, "tool_calls");
        const cJSON *tool_name = cJSON_GetObjectItemCaseSensitive(message, "tool_name");
        bool assistant = strcmp(m->role, "assistant") == 0;
        if (content && !cJSON_IsString(content) && !cJSON_IsNull(content))
            BAD(param, "%s.content must be a string", param);
        if (thinking && !cJSON_IsNull(thinking) && (!cJSON_IsString(thinking) || !assistant))
            BAD(param, "%s.thinking is an assistant message's string", param);
        if (tool_name && !cJSON_IsString(tool_name) && !cJSON_IsNull(tool_name))
            BAD(param, "%s.tool_name must be a string", param);
        const cJSON *images = cJSON_GetObjectItemCaseSensitive(message, "images");
        if (images && !empty(images))
            BAD(param, "%s.images: bmoe reads text only", param);
        m->content = cJSON_IsString(content) ? content->valuestring : "";
        m->content_length = strlen(m->content);
        if (cJSON_IsString(thinking)) {
            m->reasoning = thinking->valuestring;
            m->reasoning_length = strlen(thinking->valuestring);
        }
        m->name = cJSON_IsString(tool_name) ? tool_name->valuestring : NULL;
        if (calls && !cJSON_IsNull(calls)) {
            snprintf(param, sizeof param, "messages[%d].tool_calls", i);
            if (!assistant)
                BAD(param, "%s: only an assistant message makes tool calls", param);
            if (server_read_message_calls(calls, param, &(*owned)[i], reply) != 0)
                return -1;
            m->tool_calls_json = (*owned)[i];
        }
        q->n_messages = ++i;
    }
    return 0;
}

/* Ollama's answer to a request with no prompt: the model is loaded (it
 * always is here). Returns 1: answered. */
static int load_answer(const server *s, enum server_endpoint endpoint, server_reply *reply)
{
    cJSON *piece = server_ollama_piece(s, endpoint, "", 0, NULL, 0);
    cJSON_DeleteItemFromObjectCaseSensitive(piece, "done");
    if (!cJSON_AddTrueToObject(piece, "done") || !cJSON_AddStringToObject(piece, "done_reason", "load")) {
        cJSON_Delete(piece);
        piece = NULL;
    }
    server_json_reply(reply, 200, piece);
    return 1;
}

/* /api/generate's prompt: as it is (raw, or a model without a template,
 * whose Ollama template is the prompt itself), or a user message after
 * the system one, rendered by the template. 0, 1 (no prompt: answered) or
 * -1 (refused). */
static int generate_prompt(const server *s, const cJSON *prompt, const cJSON *system, bool raw,
                           completion_request *q, server_reply *reply)
{
    if (!cJSON_IsString(prompt) || !prompt->valuestring[0])
        return load_answer(s, q->endpoint, reply);
    bool has_system = cJSON_IsString(system) && system->valuestring[0];
    if (raw && has_system)
        BAD("system", "system goes in a templated prompt: raw takes the prompt as it is");
    if (raw && q->think_asked)
        BAD("think", "think goes with a templated prompt: raw takes the prompt as it is");
    if (!raw && !s->chat && has_system)
        BAD("system", "the model has no chat template to put a system prompt in");
    if (raw || !s->chat) {
        q->prompt = prompt->valuestring;
        return 0;
    }
    q->chat = true;
    q->messages = calloc(2, sizeof *q->messages);
    if (!q->messages) {
        server_error_reply(reply, 500, "server_error", NULL, NULL, "out of memory");
        return -1;
    }
    if (has_system)
        q->messages[q->n_messages++] = (bmoe_chat_message){.role = "system", .content = system->valuestring,
                                                           .content_length = strlen(system->valuestring)};
    q->messages[q->n_messages++] = (bmoe_chat_message){.role = "user", .content = prompt->valuestring,
                                                       .content_length = strlen(prompt->valuestring)};
    return 0;
}

/* The fields of /api/generate that bmoe does not do, and why; given empty
 * they ask for nothing and are accepted. */
static const struct {
    const char *key, *reason;
} generate_refused[] = {
    {"suffix", "bmoe does not fill in the middle (text after the answer)"},
    {"images", "bmoe reads text only"},
    {"context", "bmoe does not continue an earlier answer's tokens: send the conversation to /api/chat (or the "
                "whole text with raw); a prompt that extends the last one reuses its cache"},
    {"template", "bmoe renders the model's own chat template: give the prompt in its final form with raw true"},
};

int server_ollama_read(const server *s, const cJSON *root, enum server_endpoint endpoint, completion_request *q,
                       char ***owned, server_reply *reply)
{
    bool chat = endpoint == SERVER_OLLAMA_CHAT;
    if (server_request_begin(s, root, endpoint, chat, q, reply) != 0)
        return -1;
    q->stream = true; /* Ollama streams unless told not to */
    q->received_ns = monotonic_ns();
    const cJSON *prompt = NULL, *system = NULL;
    bool raw = false;
    const cJSON *field;
    cJSON_ArrayForEach(field, root) {
        const char *key = field->string;
        bool null = cJSON_IsNull(field);
        if (server_given_twice(root, field))
            BAD(key, "%s is given twice", key);
        if (strcmp(key, "keep_alive") == 0) {
            continue; /* how long the model stays loaded: here, as long as the server runs */
        } else if (strcmp(key, "model") == 0) {
            if (read_model(s, field, reply) != 0)
                return -1;
        } else if (strcmp(key, "stream") == 0) {
            if (!null && !cJSON_IsBool(field))
                BAD(key, "stream must be true or false");
            q->stream = !cJSON_IsFalse(field);
        } else if (strcmp(key, "format") == 0) {
            if (read_format(field, q, reply) != 0)
                return -1;
        } else if (strcmp(key, "options") == 0) {
            if (read_options(field, q, reply) != 0)
                return -1;
        } else if (strcmp(key, "think") == 0) {
            if (read_think(field, q, reply) != 0)
                return -1;
        } else if (chat && strcmp(key, "messages") == 0) {
            if (!null && read_messages(field, q, owned, reply) != 0)
                return -1;
        } else if (chat && strcmp(key, "tools") == 0) {
            if (!null && server_read_tools(field, q, reply) != 0)
                return -1;
        } else if (!chat && (strcmp(key, "prompt") == 0 || strcmp(key, "system") == 0)) {
            if (!null && !cJSON_IsString(field))
                BAD(key, "%s must be a string", key);
            if (strcmp(key, "prompt") == 0)
                prompt = field;
            else
                system = field;
        } else if (!chat && strcmp(key, "raw") == 0) {
            if (!null && !cJSON_IsBool(field))
                BAD(key, "raw must be true or false");
            raw = cJSON_IsTrue(field);
        } else {
            size_t refused = 0, count = sizeof generate_refused / sizeof generate_refused[0];
            while (!chat && refused < count && strcmp(key, generate_refused[refused].key) != 0)
                refused++;
            if (chat || refused == count)
                BAD(key, "%s is not supported by bmoe-server", key);
            if (!empty(field))
                BAD(key, "%s: %s", key, generate_refused[refused].reason);
        }
    }
    if (q->think_asked && q->think && (!s->chat || bmoe_chat_reasoning_format(s->chat) == BMOE_REASONING_NONE))
        BAD("think", "think: this model does not reason (its template has no reasoning section)");
    if (chat)
        return q->n_messages == 0 ? load_answer(s, endpoint, reply) : 0;
    return generate_prompt(s, prompt, system, raw, q, reply);
}

cJSON *server_ollama_piece(const server *s, enum server_endpoint endpoint, const char *text, size_t text_length,
                           const char *thinking, size_t thinking_length)
{
    char created[64];
    now_text(created, sizeof created);
    /* cJSON copies strings up to their NUL: the texts are NUL-terminated copies */
    char *answer = strndup(text ? text : "", text_length);
    char *reasoning = thinking_length ? strndup(thinking, thinking_length) : NULL;
    bool chat = endpoint == SERVER_OLLAMA_CHAT;
    cJSON *piece = cJSON_CreateObject();
    cJSON *holder = piece; /* where the texts go: the message, or the piece itself */
    bool made = answer && (reasoning || !thinking_length) && cJSON_AddStringToObject(piece, "model", s->model_id) &&
                cJSON_AddStringToObject(piece, "created_at", created);
    if (made && chat) {
        holder = cJSON_AddObjectToObject(piece, "message");
        made = cJSON_AddStringToObject(holder, "role", "assistant") != NULL;
    }
    made = made && cJSON_AddStringToObject(holder, chat ? "content" : "response", answer) &&
           (!reasoning || cJSON_AddStringToObject(holder, "thinking", reasoning)) &&
           cJSON_AddFalseToObject(piece, "done");
    free(answer);
    free(reasoning);
    if (!made) {
        cJSON_Delete(piece);
        return NULL;
    }
    return piece;
}

void server_ollama_end(cJSON *piece, const bmoe_generation *g, const char *finish, int64_t received_ns)
{
    const bmoe_stats *prefill = bmoe_generation_prefill_stats(g), *decode = bmoe_generation_decode_stats(g);
    cJSON_DeleteItemFromObjectCaseSensitive(piece, "done");
    cJSON_AddTrueToObject(piece, "done");
    /* Ollama ends a turn that made calls as any other */
    cJSON_AddStringToObject(piece, "done_reason", strcmp(finish, "tool_calls") == 0 ? "stop" : finish);
    cJSON_AddNumberToObject(piece, "total_duration", (double)(monotonic_ns() - received_ns));
    cJSON_AddNumberToObject(piece, "load_duration", 0); /* the model was loaded at the server's start */
    /* the prompt's tokens, those the cache served included (the "bmoe" figures' n_reused counts them) */
    cJSON_AddNumberToObject(piece, "prompt_eval_count", bmoe_generation_n_prompt(g));
    cJSON_AddNumberToObject(piece, "prompt_eval_duration", round(prefill->wall_ms * 1e6));
    cJSON_AddNumberToObject(piece, "eval_count", bmoe_generation_n_generated(g));
    cJSON_AddNumberToObject(piece, "eval_duration", round(decode->wall_ms * 1e6));
}

cJSON *server_ollama_calls(const cJSON *calls)
{
    cJSON *out = cJSON_CreateArray();
    const cJSON *call;
    cJSON_ArrayForEach(call, calls) {
        const cJSON *function = cJSON_GetObjectItemCaseSensitive(call, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(function, "name");
        const cJSON *arguments = cJSON_GetObjectItemCaseSensitive(function, "arguments");
        cJSON *parsed = cJSON_IsString(arguments) ? cJSON_Parse(arguments->valuestring) : NULL;
        if (!cJSON_IsObject(parsed)) {
            cJSON_Delete(parsed);
            parsed = cJSON_IsString(arguments) ? cJSON_CreateString(arguments->valuestring) : cJSON_CreateObject();
        }
        cJSON *entry = cJSON_CreateObject();
        cJSON *into = cJSON_AddObjectToObject(entry, "function");
        bool made = into && cJSON_IsString(name) && cJSON_AddStringToObject(into, "name", name->valuestring) &&
                    cJSON_AddItemToObject(into, "arguments", parsed);
        if (made)
            parsed = NULL;
        cJSON_Delete(parsed);
        if (!made || !cJSON_AddItemToArray(out, entry)) {
            cJSON_Delete(entry);
            cJSON_Delete(out);
            return NULL;
        }
    }
    return out;
}

/* A chat answer with tools: the message's content is the text around the
 * calls (server_answer_message's reading), its tool_calls Ollama's. 0, or
 * -1 (out of memory). */
static int place_calls(cJSON *piece, const server *s, const char *answer, size_t length, const char **finish)
{
    char *text = strndup(answer ? answer : "", length);
    cJSON *read = cJSON_CreateObject();
    int status = text && read ? server_answer_message(read, bmoe_chat_tool_format(s->chat), text, "ollama", finish)
                              : -1;
    free(text);
    cJSON *message = cJSON_GetObjectItemCaseSensitive(piece, "message");
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(read, "content");
    const cJSON *calls = cJSON_GetObjectItemCaseSensitive(read, "tool_calls");
    if (status == 0) {
        cJSON *kept = cJSON_CreateString(cJSON_IsString(content) ? content->valuestring : "");
        if (!cJSON_ReplaceItemInObjectCaseSensitive(message, "content", kept)) {
            cJSON_Delete(kept);
            status = -1;
        }
    }
    if (status == 0 && calls) {
        cJSON *list = server_ollama_calls(calls);
        if (!list || !cJSON_AddItemToObject(message, "tool_calls", list)) {
            cJSON_Delete(list);
            status = -1;
        }
    }
    cJSON_Delete(read);
    return status;
}

void server_ollama_answer(server *s, const completion_request *q, const char *text, size_t text_length, bool prefill,
                          server_reply *reply)
{
    bmoe_generation *g = NULL;
    bmoe_reasoning *reasoning = NULL;
    bmoe_step last = {0};
    if (server_generation_whole(s, q, text, text_length, prefill, NULL, &g, &reasoning, &last, NULL, reply) != 0)
        return;
    size_t answer_length = 0, thinking_length = 0;
    const char *answer = bmoe_reasoning_answer(reasoning, &answer_length);
    const char *thinking = bmoe_reasoning_thinking(reasoning, &thinking_length);
    const char *finish = server_finish_reason(last.stop);
    cJSON *piece = server_ollama_piece(s, q->endpoint, answer, answer_length, thinking, thinking_length);
    bool made = piece && (!server_tools_active(s, q) || place_calls(piece, s, answer, answer_length, &finish) == 0);
    if (made)
        server_ollama_end(piece, g, finish, q->received_ns);
    server_generation_close(s, g, reasoning, made ? piece : NULL, last.stop == BMOE_STOP_ABORTED);
    if (!made) {
        cJSON_Delete(piece);
        server_error_reply(reply, 500, "server_error", NULL, NULL, "out of memory for the answer");
        return;
    }
    server_json_reply(reply, 200, piece);
}

void server_ollama_error(server_reply *reply)
{
    if (reply->stream || reply->status < 400 || !reply->body)
        return;
    cJSON *root = cJSON_ParseWithLength(reply->body, reply->length);
    const cJSON *message = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "error"), "message");
    cJSON *shaped = cJSON_IsString(message) ? cJSON_CreateObject() : NULL;
    char *body = cJSON_AddStringToObject(shaped, "error", cJSON_IsString(message) ? message->valuestring : "")
                     ? cJSON_PrintUnformatted(shaped)
                     : NULL;
    cJSON_Delete(shaped);
    cJSON_Delete(root);
    if (!body)
        return; /* out of memory: the error stays as it was, with its status */
    free(reply->body);
    reply->body = body;
    reply->length = strlen(body);
    reply->content_type = NULL;
}

/* Ollama's "details" of a model: what the file says of itself. */
static cJSON *model_details(const server *s)
{
    const char *architecture = bmoe_model_architecture(s->model);
    char size_label[64] = "";
    if (bmoe_model_meta_string(s->model, "general.size_label", size_label, sizeof size_label) < 0)
        size_label[0] = '\0';
    cJSON *details = cJSON_CreateObject();
    cJSON_AddStringToObject(details, "parent_model", "");
    cJSON_AddStringToObject(details, "format", "gguf");
    cJSON_AddStringToObject(details, "family", architecture);
    cJSON_AddItemToObject(details, "families", cJSON_CreateStringArray(&architecture, 1));
    cJSON_AddStringToObject(details, "parameter_size", size_label);
    /* the file's type is a number bmoe does not name; its tensors' types vary anyway */
    cJSON_AddStringToObject(details, "quantization_level", "");
    return details;
}

void server_ollama_models(server *s, bool running, server_reply *reply)
{
    bmoe_model_info info;
    bmoe_model_get_info(s->model, &info);
    char modified[64];
    modified_text(s, modified, sizeof modified);
    cJSON *root = cJSON_CreateObject();
    cJSON *model = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(root, "models"), model);
    cJSON_AddStringToObject(model, "name", s->model_id);
    cJSON_AddStringToObject(model, "model", s->model_id);
    if (!running)
        cJSON_AddStringToObject(model, "modified_at", modified);
    cJSON_AddNumberToObject(model, "size", (double)info.file_bytes);
    cJSON_AddStringToObject(model, "digest", ""); /* a hash of the whole file would cost a read of it */
    cJSON_AddItemToObject(model, "details", model_details(s));
    if (running) {
        cJSON_AddStringToObject(model, "expires_at", "9999-12-31T23:59:59Z"); /* loaded while the server runs */
        cJSON_AddNumberToObject(model, "size_vram", 0);
        cJSON_AddNumberToObject(model, "context_length", bmoe_context_n_ctx(s->context));
    }
    server_json_reply(reply, 200, root);
}

/* Ollama's "parameters": the request defaults this server was started
 * with, as a Modelfile's PARAMETER lines write them. NULL: out of memory. */
static char *parameters_text(const server *s)
{
    const bmoe_sampler_params *p = &s->config->sampler;
    char *text = NULL;
    size_t length = 0;
    FILE *out = open_memstream(&text, &length);
    if (!out)
        return NULL;
    fprintf(out, "temperature %g\ntop_k %d\ntop_p %g\nmin_p %g\nrepeat_penalty %g\nrepeat_last_n %d\n",
            (double)p->temperature, p->top_k, (double)p->top_p, (double)p->min_p, (double)p->repeat_penalty,
            p->repeat_last_n);
    fprintf(out, "num_ctx %d\nnum_predict %d", bmoe_context_n_ctx(s->context), s->config->n_predict);
    if (fclose(out) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

/* /api/show's body: {"model"} (or the older "name"), "verbose" read (the
 * answer holds what bmoe knows either way). 0, or -1 with the reply filled. */
static int show_request(const server *s, const cJSON *request, server_reply *reply)
{
    if (!cJSON_IsObject(request))
        BAD(NULL, "the body must be a JSON object");
    const cJSON *name = NULL, *field;
    cJSON_ArrayForEach(field, request) {
        const char *key = field->string;
        if (server_given_twice(request, field))
            BAD(key, "%s is given twice", key);
        if (strcmp(key, "model") == 0 || strcmp(key, "name") == 0) {
            if (name)
                BAD(key, "model and name are the same field: give one");
            name = field;
        } else if (strcmp(key, "verbose") == 0) {
            if (!cJSON_IsBool(field) && !cJSON_IsNull(field))
                BAD(key, "verbose must be true or false");
        } else {
            BAD(key, "%s is not supported by /api/show", key);
        }
    }
    if (!name)
        BAD("model", "model is required");
    return read_model(s, name, reply);
}

void server_ollama_show(server *s, const char *body, size_t length, server_reply *reply)
{
    cJSON *request = server_parse_body(body, length, reply);
    if (!request)
        return;
    int named = show_request(s, request, reply);
    cJSON_Delete(request);
    if (named != 0)
        return;
    bmoe_model_info info;
    bmoe_model_get_info(s->model, &info);
    const char *architecture = bmoe_model_architecture(s->model);
    const char *chat_template = bmoe_model_chat_template(s->model);
    char modified[64], key[128], *parameters = parameters_text(s);
    modified_text(s, modified, sizeof modified);
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "modelfile", ""); /* bmoe serves the file as it is, with no Modelfile */
    cJSON_AddStringToObject(root, "parameters", parameters ? parameters : "");
    free(parameters);
    cJSON_AddStringToObject(root, "template", chat_template ? chat_template : "");
    cJSON_AddItemToObject(root, "details", model_details(s));
    cJSON *model_info = cJSON_AddObjectToObject(root, "model_info");
    cJSON_AddStringToObject(model_info, "general.architecture", architecture);
    static const char *const counts[] = {"context_length", "block_count", "expert_count", "expert_used_count"};
    double values[] = {bmoe_model_n_ctx_train(s->model), info.n_layer, info.n_expert, info.n_expert_used};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        snprintf(key, sizeof key, "%s.%s", architecture, counts[i]);
        cJSON_AddNumberToObject(model_info, key, values[i]);
    }
    cJSON *capabilities = cJSON_AddArrayToObject(root, "capabilities");
    cJSON_AddItemToArray(capabilities, cJSON_CreateString("completion"));
    if (s->chat && bmoe_chat_tool_format(s->chat) != BMOE_TOOL_FORMAT_NONE)
        cJSON_AddItemToArray(capabilities, cJSON_CreateString("tools"));
    if (s->chat && bmoe_chat_reasoning_format(s->chat) != BMOE_REASONING_NONE)
        cJSON_AddItemToArray(capabilities, cJSON_CreateString("thinking"));
    cJSON_AddStringToObject(root, "modified_at", modified);
    server_json_reply(reply, 200, root);
}

void server_ollama_version(server_reply *reply)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "version", bmoe_version());
    server_json_reply(reply, 200, root);
}
