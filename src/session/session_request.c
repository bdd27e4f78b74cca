/* The request parser (session_request.h), through cJSON. cJSON cannot say
 * that a string held \u0000 (its strings end at the first NUL), so the line
 * is checked for that escape before it is parsed. */
#include "session_request.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The most values (separators and brackets) a request line may hold: the
 * choices and a few fields; what cJSON allocates stays near the line's size. */
#define SESSION_MAX_VALUES (2 * SESSION_MAX_CHOICES + 64)
/* The largest integer a double holds with both neighbours exact: past it
 * two ids written differently read as one. */
#define SESSION_MAX_EXACT 9007199254740991.0

static int reject(char *message, size_t size, const char *format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static int reject(char *message, size_t size, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vsnprintf(message, size, format, args);
    va_end(args);
    return -1;
}

/* The length of the valid UTF-8 sequence at text (1..4), or 0. */
static size_t utf8_sequence(const unsigned char *text, size_t length)
{
    unsigned char c = text[0];
    if (c < 0x80)
        return 1;
    size_t need;
    uint32_t code;
    if (c >= 0xc2 && c <= 0xdf) {
        need = 2;
        code = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        need = 3;
        code = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        need = 4;
        code = c & 0x07;
    } else {
        return 0;
    }
    if (length < need)
        return 0;
    for (size_t i = 1; i < need; i++) {
        if ((text[i] & 0xc0) != 0x80)
            return 0;
        code = (code << 6) | (text[i] & 0x3f);
    }
    if ((need == 3 && (code < 0x800 || (code >= 0xd800 && code <= 0xdfff))) || (need == 4 && (code < 0x10000 || code > 0x10ffff)))
        return 0;
    return need;
}

static bool valid_utf8(const char *text, size_t length)
{
    const unsigned char *bytes = (const unsigned char *)text;
    for (size_t i = 0; i < length;) {
        size_t n = utf8_sequence(bytes + i, length - i);
        if (n == 0)
            return false;
        i += n;
    }
    return true;
}

/* The values a line holds outside its strings (commas, colons, brackets):
 * a bound on the nodes cJSON would allocate, checked before it does. */
static size_t structure_count(const char *line, size_t length)
{
    size_t count = 0;
    bool in_string = false;
    for (size_t i = 0; i < length; i++) {
        char c = line[i];
        if (in_string) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == ',' || c == ':' || c == '[' || c == '{') {
            count++;
        }
    }
    return count;
}

/* Whether the line escapes a NUL (\u0000 after an even run of backslashes). */
static bool escapes_nul(const char *line, size_t length)
{
    for (size_t i = 0; i + 6 <= length; i++) {
        if (line[i] != '\\' || line[i + 1] != 'u' || memcmp(line + i + 2, "0000", 4) != 0)
            continue;
        size_t run = 0;
        while (run < i && line[i - 1 - run] == '\\')
            run++;
        if (run % 2 == 0)
            return true;
    }
    return false;
}

static int copy_text(const cJSON *item, session_text *text, const char *key, char *message, size_t size)
{
    const char *value = item->valuestring;
    size_t length = strlen(value);
    if (!valid_utf8(value, length))
        return reject(message, size, "\"%s\" is not valid UTF-8", key);
    text->data = malloc(length + 1);
    if (!text->data)
        return reject(message, size, "out of memory for \"%s\" (%zu bytes)", key, length);
    memcpy(text->data, value, length + 1);
    text->length = length;
    return 0;
}

static int get_integer(const cJSON *item, const char *key, double low, double high, int64_t *value, char *message,
                       size_t size)
{
    double number = item->valuedouble;
    if (!cJSON_IsNumber(item) || !isfinite(number) || number != floor(number))
        return reject(message, size, "\"%s\" must be an integer", key);
    if (number < low || number > high)
        return reject(message, size, "\"%s\" is out of range [%.0f, %.0f]", key, low, high);
    *value = (int64_t)number;
    return 0;
}

static int get_bool(const cJSON *item, const char *key, bool *value, char *message, size_t size)
{
    if (!cJSON_IsBool(item))
        return reject(message, size, "\"%s\" must be true or false", key);
    *value = cJSON_IsTrue(item);
    return 0;
}

static int get_string(const cJSON *item, const char *key, session_text *text, char *message, size_t size)
{
    if (!cJSON_IsString(item) || !item->valuestring)
        return reject(message, size, "\"%s\" must be a string", key);
    return copy_text(item, text, key, message, size);
}

/* A key as a message may show it: printable ASCII, the rest as '?', at
 * most 64 bytes (a key is the client's text and a message is one line). */
static const char *shown_key(const char *key, char *shown, size_t size)
{
    size_t n = 0;
    for (; key[n] && n + 1 < size && n < 64; n++)
        shown[n] = key[n] >= 0x20 && key[n] < 0x7f ? key[n] : '?';
    shown[n] = '\0';
    return shown;
}

/* The keys each command takes, besides "cmd" and "id". */
static bool key_allowed(session_command command, const char *key)
{
    static const char *const generate[] = {"prompt",   "messages",    "n_predict", "think",
                                           "clear_kv", "json_schema", "grammar",   NULL};
    static const char *const decide[] = {"prefix", "suffix", "choices", "reuse_prefix", NULL};
    const char *const *keys = command == SESSION_GENERATE ? generate : command == SESSION_DECIDE ? decide : NULL;
    if (strcmp(key, "cmd") == 0 || strcmp(key, "id") == 0)
        return true;
    for (int i = 0; keys && keys[i]; i++)
        if (strcmp(key, keys[i]) == 0)
            return true;
    return false;
}

static const char *command_name(session_command command)
{
    switch (command) {
    case SESSION_GENERATE: return "generate";
    case SESSION_DECIDE: return "decide";
    case SESSION_CANCEL: return "cancel";
    case SESSION_CLOSE: return "close";
    case SESSION_REFUSED: break;
    }
    return "?";
}

static int parse_choices(const cJSON *item, session_request *request, char *message, size_t size)
{
    if (!cJSON_IsArray(item))
        return reject(message, size, "\"choices\" must be an array of strings");
    int count = cJSON_GetArraySize(item);
    if (count == 0)
        return reject(message, size, "\"choices\" is empty: nothing to decide between");
    if (count > SESSION_MAX_CHOICES)
        return reject(message, size, "\"choices\" has %d entries, more than %d", count, SESSION_MAX_CHOICES);
    request->choices = calloc((size_t)count, sizeof *request->choices);
    if (!request->choices)
        return reject(message, size, "out of memory for %d choices", count);
    const cJSON *choice;
    cJSON_ArrayForEach(choice, item)
    {
        char key[32];
        snprintf(key, sizeof key, "choices[%d]", request->n_choices);
        if (!cJSON_IsString(choice) || !choice->valuestring)
            return reject(message, size, "\"%s\" must be a string", key);
        if (copy_text(choice, &request->choices[request->n_choices], key, message, size) != 0)
            return -1;
        request->n_choices++;
    }
    return 0;
}

/* A message's content: a string, or a list of text parts
 * ({"type":"text","text":"..."}) joined in order. */
static int parse_content(const cJSON *item, session_text *content, const char *key, char *message, size_t size)
{
    if (cJSON_IsString(item) && item->valuestring)
        return copy_text(item, content, key, message, size);
    if (!cJSON_IsArray(item))
        return reject(message, size, "\"%s\" must be a string or a list of text parts", key);
    size_t total = 0;
    const cJSON *part;
    cJSON_ArrayForEach(part, item)
    {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (!cJSON_IsObject(part) || !cJSON_IsString(type) || strcmp(type->valuestring, "text") != 0 ||
            !cJSON_IsString(text) || !text->valuestring)
            return reject(message, size, "\"%s\": a part must be {\"type\":\"text\",\"text\":\"...\"} (only text is "
                                         "understood)",
                          key);
        total += strlen(text->valuestring);
    }
    content->data = malloc(total + 1);
    if (!content->data)
        return reject(message, size, "out of memory for \"%s\" (%zu bytes)", key, total);
    content->length = 0;
    cJSON_ArrayForEach(part, item)
    {
        const char *text = cJSON_GetObjectItemCaseSensitive(part, "text")->valuestring;
        size_t length = strlen(text);
        memcpy(content->data + content->length, text, length);
        content->length += length;
    }
    content->data[content->length] = '\0';
    if (!valid_utf8(content->data, content->length))
        return reject(message, size, "\"%s\" is not valid UTF-8", key);
    return 0;
}

static int parse_messages(const cJSON *item, session_request *request, char *message, size_t size)
{
    static const char *const roles[] = {"system", "user", "assistant", "tool"};
    if (!cJSON_IsArray(item))
        return reject(message, size, "\"messages\" must be a list of {\"role\", \"content\"} objects");
    int count = cJSON_GetArraySize(item);
    if (count == 0)
        return reject(message, size, "\"messages\" is empty");
    if (count > SESSION_MAX_MESSAGES)
        return reject(message, size, "\"messages\" has %d entries, more than %d", count, SESSION_MAX_MESSAGES);
    request->messages = calloc((size_t)count, sizeof *request->messages);
    if (!request->messages)
        return reject(message, size, "out of memory for %d messages", count);
    const cJSON *entry;
    cJSON_ArrayForEach(entry, item)
    {
        int32_t index = request->n_messages;
        if (!cJSON_IsObject(entry))
            return reject(message, size, "\"messages[%d]\" must be an object", (int)index);
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(entry, "role");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(entry, "content");
        session_request_message *m = &request->messages[index];
        for (size_t r = 0; cJSON_IsString(role) && r < sizeof roles / sizeof roles[0]; r++)
            if (strcmp(role->valuestring, roles[r]) == 0)
                m->role = roles[r];
        if (!m->role)
            return reject(message, size, "\"messages[%d].role\" must be system, user, assistant or tool", (int)index);
        char key[48];
        snprintf(key, sizeof key, "messages[%d].content", (int)index);
        if (!content)
            return reject(message, size, "\"%s\" is missing", key);
        request->n_messages++; /* owned from here: freed with the request */
        if (parse_content(content, &m->content, key, message, size) != 0)
            return -1;
    }
    return 0;
}

/* Whether the number text after the top-level key "id" is a plain integer
 * (digits, an optional '-'): a double rounds integers past 2^53, so "the id
 * is an integer" must be read from the text. A key spelled with escapes is
 * not found (true: the double's range check still applies). */
static bool id_text_is_integer(const char *line, size_t length)
{
    int depth = 0;
    for (size_t i = 0; i < length; i++) {
        char c = line[i];
        if (c == '{' || c == '[') {
            depth++;
        } else if (c == '}' || c == ']') {
            depth--;
        } else if (c == '"') {
            size_t start = i + 1, end = start;
            while (end < length && line[end] != '"')
                end += line[end] == '\\' ? 2 : 1;
            i = end;
            size_t next = end + 1;
            while (next < length && (line[next] == ' ' || line[next] == '\t' || line[next] == '\r' || line[next] == '\n'))
                next++;
            if (depth != 1 || next >= length || line[next] != ':' || end - start != 2 || memcmp(line + start, "id", 2) != 0)
                continue;
            size_t value = next + 1;
            while (value < length && (line[value] == ' ' || line[value] == '\t'))
                value++;
            if (value < length && line[value] == '-')
                value++;
            size_t digits = value;
            while (digits < length && line[digits] >= '0' && line[digits] <= '9')
                digits++;
            return digits > value && (digits == length || strchr(" \t\r\n,}", line[digits]) != NULL);
        }
    }
    return true;
}

static int keep_ignored(session_request *request, const char *key)
{
    if (request->n_ignored >= SESSION_MAX_IGNORED)
        return 0;
    char shown[72];
    request->ignored[request->n_ignored] = strdup(shown_key(key, shown, sizeof shown));
    if (!request->ignored[request->n_ignored])
        return -1;
    request->n_ignored++;
    return 0;
}

static int parse_object(const cJSON *root, const char *line, size_t length, session_request *request, int64_t *id,
                        char *message, size_t size)
{
    if (!cJSON_IsObject(root))
        return reject(message, size, "a request is a JSON object");
    const cJSON *id_item = cJSON_GetObjectItemCaseSensitive(root, "id");
    if (id_item) {
        if (cJSON_IsNumber(id_item) && !id_text_is_integer(line, length))
            return reject(message, size, "\"id\" must be an integer (digits, no fraction or exponent)");
        if (get_integer(id_item, "id", -SESSION_MAX_EXACT, SESSION_MAX_EXACT, &request->id, message, size) != 0)
            return -1;
        *id = request->id;
        request->has_id = true;
    }
    const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(root, "cmd");
    if (!cmd) {
        reject(message, size, "a line without \"cmd\" is ignored");
        return 1;
    }
    if (!cJSON_IsString(cmd) || !cmd->valuestring)
        return reject(message, size, "\"cmd\" must be a string");
    static const session_command commands[] = {SESSION_GENERATE, SESSION_DECIDE, SESSION_CANCEL, SESSION_CLOSE};
    bool known = false;
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (strcmp(cmd->valuestring, command_name(commands[i])) == 0) {
            request->command = commands[i];
            known = true;
        }
    }
    if (!known) {
        char shown[72];
        reject(message, size, "unknown cmd \"%s\" is ignored (generate, decide, cancel or close)",
               shown_key(cmd->valuestring, shown, sizeof shown));
        return 1;
    }
    /* the keys the command takes once each; the others are ignored */
    const cJSON *item;
    cJSON_ArrayForEach(item, root)
    {
        if (!item->string)
            return reject(message, size, "a key without a name");
        char shown[72];
        if (!key_allowed(request->command, item->string)) {
            if (keep_ignored(request, item->string) != 0)
                return reject(message, size, "out of memory");
            continue;
        }
        for (const cJSON *other = item->next; other; other = other->next)
            if (other->string && strcmp(other->string, item->string) == 0)
                return reject(message, size, "key \"%s\" appears twice", shown_key(item->string, shown, sizeof shown));
    }
    request->reuse_prefix = true;
    if (request->command == SESSION_GENERATE) {
        const cJSON *prompt = cJSON_GetObjectItemCaseSensitive(root, "prompt");
        const cJSON *messages = cJSON_GetObjectItemCaseSensitive(root, "messages");
        if (!prompt && !messages)
            return reject(message, size, "generate needs \"prompt\" (or \"messages\")");
        if (prompt && messages)
            return reject(message, size, "generate takes \"prompt\" or \"messages\", not both");
        if (prompt && get_string(prompt, "prompt", &request->prompt, message, size) != 0)
            return -1;
        if (messages && parse_messages(messages, request, message, size) != 0)
            return -1;
        const cJSON *n_predict = cJSON_GetObjectItemCaseSensitive(root, "n_predict");
        if (n_predict) {
            int64_t value = 0;
            if (get_integer(n_predict, "n_predict", -1, INT32_MAX, &value, message, size) != 0)
                return -1;
            if (value == 0)
                return reject(message, size, "\"n_predict\" must be at least 1 (or -1: until the end of generation)");
            request->has_n_predict = true;
            request->n_predict = (int32_t)value;
        }
        const cJSON *think = cJSON_GetObjectItemCaseSensitive(root, "think");
        if (think && get_bool(think, "think", &request->think, message, size) != 0)
            return -1;
        request->has_think = think != NULL;
        const cJSON *clear = cJSON_GetObjectItemCaseSensitive(root, "clear_kv");
        if (clear && get_bool(clear, "clear_kv", &request->clear_kv, message, size) != 0)
            return -1;
        request->has_clear_kv = clear != NULL;
        const cJSON *schema = cJSON_GetObjectItemCaseSensitive(root, "json_schema");
        const cJSON *grammar = cJSON_GetObjectItemCaseSensitive(root, "grammar");
        if (schema && grammar)
            return reject(message, size, "generate takes \"json_schema\" or \"grammar\", not both");
        if (schema && !cJSON_IsObject(schema))
            return reject(message, size, "\"json_schema\" must be a JSON schema (an object)");
        if (schema) {
            char *printed = cJSON_PrintUnformatted(schema);
            if (!printed)
                return reject(message, size, "out of memory for \"json_schema\"");
            request->json_schema.length = strlen(printed);
            request->json_schema.data = malloc(request->json_schema.length + 1);
            if (request->json_schema.data)
                memcpy(request->json_schema.data, printed, request->json_schema.length + 1);
            cJSON_free(printed);
            if (!request->json_schema.data)
                return reject(message, size, "out of memory for \"json_schema\"");
        }
        if (grammar && get_string(grammar, "grammar", &request->grammar, message, size) != 0)
            return -1;
    } else if (request->command == SESSION_DECIDE) {
        const cJSON *prefix = cJSON_GetObjectItemCaseSensitive(root, "prefix");
        if (!prefix)
            return reject(message, size, "decide needs \"prefix\"");
        if (get_string(prefix, "prefix", &request->prefix, message, size) != 0)
            return -1;
        const cJSON *suffix = cJSON_GetObjectItemCaseSensitive(root, "suffix");
        if (suffix && get_string(suffix, "suffix", &request->suffix, message, size) != 0)
            return -1;
        const cJSON *choices = cJSON_GetObjectItemCaseSensitive(root, "choices");
        if (!choices)
            return reject(message, size, "decide needs \"choices\"");
        if (parse_choices(choices, request, message, size) != 0)
            return -1;
        const cJSON *reuse = cJSON_GetObjectItemCaseSensitive(root, "reuse_prefix");
        if (reuse && get_bool(reuse, "reuse_prefix", &request->reuse_prefix, message, size) != 0)
            return -1;
    }
    return 0;
}

int session_request_parse(const char *line, size_t length, session_request *request, int64_t *id, char *message,
                          size_t message_size)
{
    memset(request, 0, sizeof *request);
    *id = 0;
    if (message_size > 0)
        message[0] = '\0';
    if (memchr(line, '\0', length))
        return reject(message, message_size, "the line holds a NUL byte");
    if (!valid_utf8(line, length))
        return reject(message, message_size, "the line is not valid UTF-8");
    if (structure_count(line, length) > SESSION_MAX_VALUES)
        return reject(message, message_size, "the line holds more than %d JSON values", SESSION_MAX_VALUES);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(line, length, &end, false);
    if (!root)
        return reject(message, message_size, "invalid JSON");
    /* nothing but whitespace after the object */
    for (const char *c = end; c && c < line + length; c++) {
        if (*c != ' ' && *c != '\t' && *c != '\r' && *c != '\n') {
            cJSON_Delete(root);
            return reject(message, message_size, "text after the JSON object");
        }
    }
    int status = parse_object(root, line, length, request, id, message, message_size);
    /* cJSON ends its strings at a NUL: a \u0000 would be cut, not kept */
    if (status == 0 && escapes_nul(line, length))
        status = reject(message, message_size, "a string holds \\u0000 (NUL is not allowed)");
    cJSON_Delete(root);
    if (status != 0)
        session_request_free(request);
    return status;
}

int session_request_refusal(session_request *request, int64_t id, const char *message)
{
    memset(request, 0, sizeof *request);
    request->command = SESSION_REFUSED;
    request->id = id;
    request->message.length = strlen(message);
    request->message.data = strdup(message);
    return request->message.data ? 0 : -1;
}

static void text_free(session_text *text)
{
    free(text->data);
    text->data = NULL;
    text->length = 0;
}

void session_request_free(session_request *request)
{
    text_free(&request->prompt);
    for (int32_t i = 0; i < request->n_messages; i++)
        text_free(&request->messages[i].content);
    free(request->messages);
    request->messages = NULL;
    request->n_messages = 0;
    text_free(&request->message);
    for (int32_t i = 0; i < request->n_ignored; i++)
        free(request->ignored[i]);
    request->n_ignored = 0;
    text_free(&request->json_schema);
    text_free(&request->grammar);
    text_free(&request->prefix);
    text_free(&request->suffix);
    for (int32_t i = 0; i < request->n_choices; i++)
        text_free(&request->choices[i]);
    free(request->choices);
    request->choices = NULL;
    request->n_choices = 0;
}
