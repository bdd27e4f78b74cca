/* Tool calls in a model's answer, in the two shapes the Qwen families'
 * templates teach their models (the templates' own instructions say so):
 *   JSON: <tool_call>\n{"name": NAME, "arguments": {...}}\n</tool_call>
 *         (Qwen3, Qwen2.5, Hermes);
 *   XML:  <tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>
 *         ...</function>\n</tool_call> (Qwen3.5, Qwen3-Coder).
 * A block that does not read as a call stays in the answer's text, so
 * nothing the model wrote is lost. Owns nothing between calls. */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base/error.h"
#include "chat/chat_model.h"

struct bmoe_tool_split {
    enum bmoe_tool_format format;
    char *text; /* the answer so far, NUL-terminated */
    size_t length, capacity;
    size_t shown; /* bytes of it handed back */
    char *content; /* finish's: the content, owned until free */
};

static const char call_open[] = "<tool_call>";
static const char call_close[] = "</tool_call>";

const char *bmoe_tool_format_name(enum bmoe_tool_format format)
{
    switch (format) {
    case BMOE_TOOL_FORMAT_NONE: return "none";
    case BMOE_TOOL_FORMAT_JSON: return "json";
    case BMOE_TOOL_FORMAT_XML: return "xml";
    }
    return "?";
}

static bool contains(const char *text, size_t length, const char *needle)
{
    size_t n = strlen(needle);
    for (size_t i = 0; i + n <= length; i++)
        if (memcmp(text + i, needle, n) == 0)
            return true;
    return false;
}

enum bmoe_tool_format chat_tool_format_decide(const chat_model *model)
{
    if (!contains(model->source, model->source_length, call_open))
        return BMOE_TOOL_FORMAT_NONE;
    return contains(model->source, model->source_length, "<function=") ? BMOE_TOOL_FORMAT_XML
                                                                       : BMOE_TOOL_FORMAT_JSON;
}

/* The first occurrence of needle in text[from, length), or length. */
static size_t find(const char *text, size_t length, size_t from, const char *needle)
{
    size_t n = strlen(needle);
    for (size_t i = from; i + n <= length; i++)
        if (memcmp(text + i, needle, n) == 0)
            return i;
    return length;
}

/* Where a call begins in text, or may begin (it ends with part of the
 * opener); length when nowhere. */
static size_t call_start(enum bmoe_tool_format format, const char *text, size_t length)
{
    if (format == BMOE_TOOL_FORMAT_NONE)
        return length;
    size_t at = find(text, length, 0, call_open);
    if (at < length)
        return at;
    /* the text may end inside the opener */
    size_t n = sizeof call_open - 1;
    for (size_t keep = n - 1; keep > 0; keep--)
        if (length >= keep && memcmp(text + length - keep, call_open, keep) == 0)
            return length - keep;
    return length;
}

/* text[begin, end) without the whitespace at either end. */
static void trim(const char *text, size_t *begin, size_t *end)
{
    while (*begin < *end && strchr(" \t\r\n", text[*begin]))
        (*begin)++;
    while (*end > *begin && strchr(" \t\r\n", text[*end - 1]))
        (*end)--;
}

/* {"name": NAME, "arguments": ARGS}: a call whose arguments are an object
 * (or a string, as some models write them). */
static cJSON *json_call(const char *text, size_t begin, size_t end)
{
    trim(text, &begin, &end);
    cJSON *parsed = cJSON_ParseWithLength(text + begin, end - begin);
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(parsed, "name");
    const cJSON *arguments = cJSON_GetObjectItemCaseSensitive(parsed, "arguments");
    cJSON *call = NULL;
    if (cJSON_IsString(name) && name->valuestring[0] && (cJSON_IsObject(arguments) || cJSON_IsString(arguments))) {
        char *printed = cJSON_IsObject(arguments) ? cJSON_PrintUnformatted(arguments) : NULL;
        call = cJSON_CreateObject();
        cJSON_AddStringToObject(call, "name", name->valuestring);
        cJSON_AddStringToObject(call, "arguments", printed ? printed : arguments->valuestring);
        cJSON_free(printed);
    }
    cJSON_Delete(parsed);
    return call;
}

/* A parameter's value: JSON where it reads as JSON (numbers, booleans,
 * objects, arrays, null), else the text itself, without the one newline
 * the format puts on each side. */
static cJSON *xml_value(const char *text, size_t begin, size_t end)
{
    if (begin < end && text[begin] == '\n')
        begin++;
    if (end > begin && text[end - 1] == '\n')
        end--;
    cJSON *value = cJSON_ParseWithLength(text + begin, end - begin);
    if (value && !cJSON_IsString(value))
        return value;
    cJSON_Delete(value);
    char *raw = strndup(text + begin, end - begin);
    value = raw ? cJSON_CreateString(raw) : NULL;
    free(raw);
    return value;
}

/* <function=NAME> (<parameter=KEY>VALUE</parameter>)* </function>. */
static cJSON *xml_call(const char *text, size_t begin, size_t end)
{
    trim(text, &begin, &end);
    static const char function_open[] = "<function=", function_close[] = "</function>";
    static const char parameter_open[] = "<parameter=", parameter_close[] = "</parameter>";
    size_t n = sizeof function_open - 1;
    if (end - begin < n || memcmp(text + begin, function_open, n) != 0)
        return NULL;
    size_t name_end = find(text, end, begin + n, ">");
    size_t body_end = find(text, end, name_end, function_close);
    if (name_end >= end || name_end == begin + n || body_end >= end)
        return NULL;
    cJSON *arguments = cJSON_CreateObject();
    size_t at = name_end + 1;
    bool bad = !arguments;
    for (;;) {
        size_t open = find(text, body_end, at, parameter_open);
        if (open >= body_end)
            break;
        size_t key_begin = open + sizeof parameter_open - 1;
        size_t key_end = find(text, body_end, key_begin, ">");
        size_t close = find(text, body_end, key_end, parameter_close);
        if (key_end >= body_end || close >= body_end) {
            bad = true;
            break;
        }
        char *key = strndup(text + key_begin, key_end - key_begin);
        cJSON *value = xml_value(text, key_end + 1, close);
        if (!key || !value || !cJSON_AddItemToObject(arguments, key, value)) {
            cJSON_Delete(value);
            bad = true;
        }
        free(key);
        at = close + sizeof parameter_close - 1;
    }
    char *printed = bad ? NULL : cJSON_PrintUnformatted(arguments);
    char *name = strndup(text + begin + n, name_end - begin - n);
    cJSON *call = printed && name ? cJSON_CreateObject() : NULL;
    if (call) {
        cJSON_AddStringToObject(call, "name", name);
        cJSON_AddStringToObject(call, "arguments", printed);
    }
    free(name);
    cJSON_free(printed);
    cJSON_Delete(arguments);
    return call;
}

int32_t bmoe_chat_parse_tool_calls(enum bmoe_tool_format format, const char *text, size_t length, char **content,
                                   size_t *content_length, char **calls_json, bmoe_error *error)
{
    bmoe_error err;
    error_clear(&err);
    if (content)
        *content = NULL;
    if (calls_json)
        *calls_json = NULL;
    if ((!text && length > 0) || !content || !content_length || !calls_json) {
        error_set_status(&err, BMOE_ERR_INVALID_ARGUMENT, "chat: no text or no outputs for the tool calls");
        if (error)
            *error = err;
        return BMOE_ERR_INVALID_ARGUMENT;
    }
    char *kept = malloc(length + 1);
    cJSON *calls = cJSON_CreateArray();
    size_t used = 0, at = 0;
    int32_t count = 0;
    while (kept && calls && at < length) {
        size_t open = format == BMOE_TOOL_FORMAT_NONE ? length : find(text, length, at, call_open);
        size_t body = open + sizeof call_open - 1;
        size_t close = open < length ? find(text, length, body, call_close) : length;
        /* an answer cut short (n_predict) may end inside its last call */
        size_t after = close < length ? close + sizeof call_close - 1 : length;
        cJSON *call = NULL;
        if (open < length)
            call = format == BMOE_TOOL_FORMAT_JSON ? json_call(text, body, close) : xml_call(text, body, close);
        size_t keep_end = call ? open : after;
        memcpy(kept + used, text + at, keep_end - at);
        used += keep_end - at;
        if (call) {
            cJSON_AddItemToArray(calls, call);
            count++;
        }
        at = after;
    }
    char *printed = kept && calls ? cJSON_PrintUnformatted(calls) : NULL;
    cJSON_Delete(calls);
    if (!printed) {
        free(kept);
        error_set_status(&err, BMOE_ERR_OUT_OF_MEMORY, "chat: out of memory reading the tool calls");
        if (error)
            *error = err;
        return BMOE_ERR_OUT_OF_MEMORY;
    }
    kept[used] = '\0';
    *content = kept;
    *content_length = used;
    /* the caller frees with bmoe_free (free): cJSON's allocator is malloc here */
    *calls_json = printed;
    return count;
}

static int split_fail(bmoe_error *error, bmoe_status status, const char *message)
{
    if (error) {
        error_clear(error);
        error_set_status(error, status, "%s", message);
    }
    return status;
}

bmoe_tool_split *bmoe_tool_split_create(enum bmoe_tool_format format, bmoe_error *error)
{
    bmoe_tool_split *split = calloc(1, sizeof *split);
    if (!split) {
        split_fail(error, BMOE_ERR_OUT_OF_MEMORY, "chat: out of memory for a tool-call split");
        return NULL;
    }
    split->format = format;
    return split;
}

int bmoe_tool_split_feed(bmoe_tool_split *split, const char *text, size_t length, const char **show,
                         size_t *show_length, bmoe_error *error)
{
    if (!split || (!text && length > 0) || !show || !show_length)
        return split_fail(error, BMOE_ERR_INVALID_ARGUMENT, "chat: no split, text or output");
    if (split->length + length + 1 > split->capacity) {
        size_t capacity = split->capacity ? split->capacity : 256;
        while (capacity < split->length + length + 1)
            capacity *= 2;
        char *grown = realloc(split->text, capacity);
        if (!grown)
            return split_fail(error, BMOE_ERR_OUT_OF_MEMORY, "chat: out of memory for the answer's text");
        split->text = grown;
        split->capacity = capacity;
    }
    if (length)
        memcpy(split->text + split->length, text, length);
    split->length += length;
    split->text[split->length] = '\0';
    size_t hold = call_start(split->format, split->text, split->length);
    *show = split->text + split->shown;
    *show_length = hold > split->shown ? hold - split->shown : 0;
    split->shown += *show_length;
    return 0;
}

int32_t bmoe_tool_split_finish(bmoe_tool_split *split, const char **show, size_t *show_length, char **calls_json,
                               bmoe_error *error)
{
    if (!split || !show || !show_length || !calls_json)
        return split_fail(error, BMOE_ERR_INVALID_ARGUMENT, "chat: no split or output");
    free(split->content);
    split->content = NULL;
    size_t length = 0;
    int32_t count = bmoe_chat_parse_tool_calls(split->format, split->text ? split->text : "", split->length,
                                               &split->content, &length, calls_json, error);
    if (count < 0)
        return count;
    /* the content starts with what was shown: the text before the first call */
    *show = split->content + (length > split->shown ? split->shown : length);
    *show_length = length > split->shown ? length - split->shown : 0;
    split->shown = split->length;
    return count;
}

void bmoe_tool_split_free(bmoe_tool_split *split)
{
    if (!split)
        return;
    free(split->text);
    free(split->content);
    free(split);
}
