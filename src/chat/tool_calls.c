/* Tool calls in a model's answer, in the three shapes the templates teach
 * their models, as the templates' own instructions say:
 *   JSON: <tool_call>\n{"name": NAME, "arguments": {...}}\n</tool_call>
 *         (Qwen3, Qwen2.5, Hermes, Granite);
 *   XML:  <tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>
 *         ...</function>\n</tool_call> (Qwen3.5, Qwen3-Coder, Nemotron);
 *   GLM:  <tool_call>NAME\n<arg_key>KEY</arg_key>\n<arg_value>VALUE</arg_value>
 *         ...</tool_call> (GLM-4.5, GLM-4.6);
 *   HARMONY: a message to=functions.NAME whose text is the arguments' JSON
 *         (gpt-oss), in the shape the harmony reasoning split hands it on
 *         (harmony_call.h): the arguments come out as the model wrote them.
 * A block that does not read as a call stays in the answer's text, so
 * nothing the model wrote is lost. Owns nothing between calls. */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base/error.h"
#include "base/text_buffer.h"
#include "chat/chat_model.h"
#include "chat/harmony_call.h"
#include "chat/unicode.h"

struct bmoe_tool_split {
    enum bmoe_tool_format format;
    text_buffer text; /* the answer so far */
    size_t shown;     /* bytes of it handed back */
    char *content;    /* finish's: the content, owned until free */
};

static const char call_open[] = "<tool_call>";
static const char call_close[] = "</tool_call>";

/* The text between a format's markers (begin, end) read as a call: NULL
 * when it is not one, or out of memory. */
typedef cJSON *call_reader(const char *text, size_t begin, size_t end);

/* What opens and closes a format's calls, and how the text between reads. */
typedef struct tool_format_traits {
    const char *open, *close;
    call_reader *read;
} tool_format_traits;

static const tool_format_traits *traits_of(enum bmoe_tool_format format);

const char *bmoe_tool_format_name(enum bmoe_tool_format format)
{
    switch (format) {
    case BMOE_TOOL_FORMAT_NONE: return "none";
    case BMOE_TOOL_FORMAT_JSON: return "json";
    case BMOE_TOOL_FORMAT_XML: return "xml";
    case BMOE_TOOL_FORMAT_GLM: return "glm";
    case BMOE_TOOL_FORMAT_HARMONY: return "harmony";
    }
    return "?";
}

static bool contains(const char *text, size_t length, const char *needle)
{
    return bytes_find(text, length, needle, strlen(needle)) != NULL;
}

enum bmoe_tool_format chat_tool_format_decide(const chat_model *model)
{
    /* gpt-oss's: an assistant's call is a commentary message ended by <|call|> */
    if (contains(model->source, model->source_length, HARMONY_CALL_CLOSE) &&
        contains(model->source, model->source_length, "<|channel|>commentary"))
        return BMOE_TOOL_FORMAT_HARMONY;
    if (!contains(model->source, model->source_length, call_open))
        return BMOE_TOOL_FORMAT_NONE;
    if (contains(model->source, model->source_length, "<arg_key>"))
        return BMOE_TOOL_FORMAT_GLM;
    return contains(model->source, model->source_length, "<function=") ? BMOE_TOOL_FORMAT_XML
                                                                       : BMOE_TOOL_FORMAT_JSON;
}

/* The first occurrence of needle in text[from, length), or length. */
static size_t find(const char *text, size_t length, size_t from, const char *needle)
{
    const char *at = from < length ? bytes_find(text + from, length - from, needle, strlen(needle)) : NULL;
    return at ? (size_t)(at - text) : length;
}

/* Where a call begins in text[from, length), or may begin (the text ends
 * with part of the opener); length when nowhere. */
static size_t call_start(enum bmoe_tool_format format, const char *text, size_t length, size_t from)
{
    const tool_format_traits *traits = traits_of(format);
    if (!traits)
        return length;
    size_t at = find(text, length, from, traits->open);
    if (at < length)
        return at;
    /* the text may end inside the opener */
    return length - text_partial_suffix(text + from, length - from, traits->open, strlen(traits->open));
}

/* text[begin, end) without the whitespace at either end. */
static void trim(const char *text, size_t *begin, size_t *end)
{
    while (*begin < *end && strchr(" \t\r\n", text[*begin]))
        (*begin)++;
    while (*end > *begin && strchr(" \t\r\n", text[*end - 1]))
        (*end)--;
}

/* {"name": name, "arguments": arguments} (NULL: out of memory). */
static cJSON *new_call(const char *name, const char *arguments)
{
    cJSON *call = cJSON_CreateObject();
    if (call && cJSON_AddStringToObject(call, "name", name) && cJSON_AddStringToObject(call, "arguments", arguments))
        return call;
    cJSON_Delete(call);
    return NULL;
}

/* Whether text[begin, end) is a number as JSON writes one (no leading
 * zeros, no "+", digits on both sides of a point). */
static bool json_number(const char *text, size_t begin, size_t end)
{
    size_t i = begin;
    if (i < end && text[i] == '-')
        i++;
    if (i >= end || !(text[i] >= '0' && text[i] <= '9'))
        return false;
    if (text[i] == '0')
        i++;
    else
        while (i < end && text[i] >= '0' && text[i] <= '9')
            i++;
    if (i < end && text[i] == '.') {
        if (++i >= end || !(text[i] >= '0' && text[i] <= '9'))
            return false;
        while (i < end && text[i] >= '0' && text[i] <= '9')
            i++;
    }
    if (i < end && (text[i] == 'e' || text[i] == 'E')) {
        if (++i < end && (text[i] == '+' || text[i] == '-'))
            i++;
        if (i >= end || !(text[i] >= '0' && text[i] <= '9'))
            return false;
        while (i < end && text[i] >= '0' && text[i] <= '9')
            i++;
    }
    return i == end;
}

/* The one JSON value text[begin, end) holds, whitespace around it allowed
 * (NULL: none, or more than one). */
static cJSON *whole_json(const char *text, size_t begin, size_t end)
{
    trim(text, &begin, &end);
    const char *stop = NULL;
    cJSON *parsed = begin < end ? cJSON_ParseWithLengthOpts(text + begin, end - begin, &stop, false) : NULL;
    if (parsed && stop != text + end) {
        cJSON_Delete(parsed);
        return NULL;
    }
    return parsed;
}

/* {"name": NAME, "arguments": ARGS}: a call whose arguments are an object
 * (or a string, as some models write them). */
static cJSON *json_call(const char *text, size_t begin, size_t end)
{
    cJSON *parsed = whole_json(text, begin, end);
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(parsed, "name");
    const cJSON *arguments = cJSON_GetObjectItemCaseSensitive(parsed, "arguments");
    cJSON *call = NULL;
    if (cJSON_IsString(name) && name->valuestring[0] && (cJSON_IsObject(arguments) || cJSON_IsString(arguments))) {
        char *printed = cJSON_IsObject(arguments) ? cJSON_PrintUnformatted(arguments) : NULL;
        const char *text_of = cJSON_IsObject(arguments) ? printed : arguments->valuestring;
        call = text_of ? new_call(name->valuestring, text_of) : NULL;
        cJSON_free(printed);
    }
    cJSON_Delete(parsed);
    return call;
}

/* A parameter's value, text[begin, end): JSON where all of it is one JSON
 * value other than a string (a number as JSON writes it, true, false,
 * null, an object, an array), else the text itself (the templates write a
 * string as it is, anything else as JSON). */
static cJSON *argument_value(const char *text, size_t begin, size_t end)
{
    cJSON *value = whole_json(text, begin, end);
    size_t first = begin, last = end;
    trim(text, &first, &last);
    if (value && !cJSON_IsString(value) && (!cJSON_IsNumber(value) || json_number(text, first, last)))
        return value;
    cJSON_Delete(value);
    char *raw = strndup(text + begin, end - begin);
    value = raw ? cJSON_CreateString(raw) : NULL;
    free(raw);
    return value;
}

/* Adds text[key_begin, key_end): argument_value(text[value_begin,
 * value_end)) to arguments; false when out of memory. */
static bool add_argument(cJSON *arguments, const char *text, size_t key_begin, size_t key_end, size_t value_begin,
                         size_t value_end)
{
    char *key = strndup(text + key_begin, key_end - key_begin);
    cJSON *value = argument_value(text, value_begin, value_end);
    bool added = key && value && cJSON_AddItemToObject(arguments, key, value);
    if (!added)
        cJSON_Delete(value);
    free(key);
    return added;
}

/* The call of text[name_begin, name_end) with arguments (consumed); NULL
 * when bad (the block is not a call) or out of memory. */
static cJSON *named_call(const char *text, size_t name_begin, size_t name_end, cJSON *arguments, bool bad)
{
    char *printed = bad || !arguments ? NULL : cJSON_PrintUnformatted(arguments);
    char *name = printed ? strndup(text + name_begin, name_end - name_begin) : NULL;
    cJSON *call = name ? new_call(name, printed) : NULL;
    free(name);
    cJSON_free(printed);
    cJSON_Delete(arguments);
    return call;
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
    while (!bad) {
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
        /* without the one newline the format puts on each side */
        size_t value_begin = key_end + 1, value_end = close;
        if (value_begin < value_end && text[value_begin] == '\n')
            value_begin++;
        if (value_end > value_begin && text[value_end - 1] == '\n')
            value_end--;
        bad = !add_argument(arguments, text, key_begin, key_end, value_begin, value_end);
        at = close + sizeof parameter_close - 1;
    }
    return named_call(text, begin + n, name_end, arguments, bad);
}

/* NAME (<arg_key>KEY</arg_key> <arg_value>VALUE</arg_value>)*. */
static cJSON *glm_call(const char *text, size_t begin, size_t end)
{
    static const char key_open[] = "<arg_key>", key_close[] = "</arg_key>";
    static const char value_open[] = "<arg_value>", value_close[] = "</arg_value>";
    trim(text, &begin, &end);
    size_t name_end = find(text, end, begin, key_open), name_begin = begin;
    size_t first_pair = name_end;
    trim(text, &name_begin, &name_end);
    if (name_end == name_begin || memchr(text + name_begin, '<', name_end - name_begin) ||
        memchr(text + name_begin, '\n', name_end - name_begin))
        return NULL;
    cJSON *arguments = cJSON_CreateObject();
    bool bad = !arguments;
    size_t at = first_pair;
    while (!bad && at < end) {
        size_t key_at = find(text, end, at, key_open);
        if (key_at >= end) {
            size_t rest_begin = at, rest_end = end;
            trim(text, &rest_begin, &rest_end);
            bad = rest_end > rest_begin; /* text after the last pair: not a call */
            break;
        }
        size_t key_begin = key_at + sizeof key_open - 1;
        size_t key_end = find(text, end, key_begin, key_close);
        size_t value_at = find(text, end, key_end, value_open);
        size_t value_begin = value_at + sizeof value_open - 1;
        size_t value_end = value_at < end ? find(text, end, value_begin, value_close) : end;
        if (key_end >= end || value_at >= end || value_end >= end) {
            bad = true;
            break;
        }
        bad = !add_argument(arguments, text, key_begin, key_end, value_begin, value_end);
        at = value_end + sizeof value_close - 1;
    }
    return named_call(text, name_begin, name_end, arguments, bad);
}

/* NAME<|channel|>commentary json<|message|>ARGUMENTS: a call whose
 * arguments are one JSON object, kept as the model wrote it (without the
 * whitespace around it). */
static cJSON *harmony_call(const char *text, size_t begin, size_t end)
{
    size_t name_end = find(text, end, begin, HARMONY_CALL_HEADER_END);
    if (name_end >= end || name_end == begin)
        return NULL;
    for (size_t i = begin; i < name_end; i++)
        if (strchr(" \t\r\n<", text[i]))
            return NULL;
    size_t arguments_begin = name_end + strlen(HARMONY_CALL_HEADER_END), arguments_end = end;
    cJSON *arguments = whole_json(text, arguments_begin, arguments_end);
    bool object = cJSON_IsObject(arguments);
    cJSON_Delete(arguments);
    if (!object)
        return NULL;
    trim(text, &arguments_begin, &arguments_end);
    char *name = strndup(text + begin, name_end - begin);
    char *written = strndup(text + arguments_begin, arguments_end - arguments_begin);
    cJSON *call = name && written ? new_call(name, written) : NULL;
    free(name);
    free(written);
    return call;
}

static const tool_format_traits *traits_of(enum bmoe_tool_format format)
{
    static const tool_format_traits json = {call_open, call_close, json_call};
    static const tool_format_traits xml = {call_open, call_close, xml_call};
    static const tool_format_traits glm = {call_open, call_close, glm_call};
    static const tool_format_traits harmony = {HARMONY_CALL_OPEN, HARMONY_CALL_CLOSE, harmony_call};
    switch (format) {
    case BMOE_TOOL_FORMAT_JSON: return &json;
    case BMOE_TOOL_FORMAT_XML: return &xml;
    case BMOE_TOOL_FORMAT_GLM: return &glm;
    case BMOE_TOOL_FORMAT_HARMONY: return &harmony;
    default: return NULL;
    }
}

bool bmoe_tool_call_frame(enum bmoe_tool_format format, const char **before, const char **after)
{
    /* Qwen3's, Qwen2.5's and Hermes' templates put the object on a line of its own */
    static const char json_before[] = "<tool_call>\n", json_after[] = "\n</tool_call>";
    _Static_assert(sizeof json_before == sizeof call_open + 1, "the opener is call_open and a newline");
    if (format != BMOE_TOOL_FORMAT_JSON)
        return false;
    *before = json_before;
    *after = json_after;
    return true;
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
    const tool_format_traits *traits = traits_of(format);
    char *kept = malloc(length + 1);
    cJSON *calls = cJSON_CreateArray();
    size_t used = 0, at = 0;
    int32_t count = 0;
    while (kept && calls && at < length) {
        size_t open = traits ? find(text, length, at, traits->open) : length;
        size_t body = open < length ? open + strlen(traits->open) : length;
        size_t close = open < length ? find(text, length, body, traits->close) : length;
        /* an answer cut short (n_predict) may end inside its last call */
        size_t after = close < length ? close + strlen(traits->close) : length;
        cJSON *call = open < length ? traits->read(text, body, close) : NULL;
        size_t keep_end = call ? open : after;
        memcpy(kept + used, text + at, keep_end - at);
        used += keep_end - at;
        if (call && !cJSON_AddItemToArray(calls, call)) {
            cJSON_Delete(call);
            free(kept); /* out of memory: reported below */
            kept = NULL;
            break;
        }
        count += call != NULL;
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
    if (!text_buffer_append(&split->text, text, length))
        return split_fail(error, BMOE_ERR_OUT_OF_MEMORY, "chat: out of memory for the answer's text");
    /* nothing before `shown` begins a call: it was shown */
    size_t hold = call_start(split->format, split->text.data, split->text.length, split->shown);
    *show = split->text.data + split->shown;
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
    int32_t count = bmoe_chat_parse_tool_calls(split->format, split->text.data ? split->text.data : "",
                                               split->text.length, &split->content, &length, calls_json, error);
    if (count < 0)
        return count;
    /* the content starts with what was shown: the text before the first call */
    *show = split->content + (length > split->shown ? split->shown : length);
    *show_length = length > split->shown ? length - split->shown : 0;
    split->shown = split->text.length;
    return count;
}

void bmoe_tool_split_free(bmoe_tool_split *split)
{
    if (!split)
        return;
    text_buffer_free(&split->text);
    free(split->content);
    free(split);
}
