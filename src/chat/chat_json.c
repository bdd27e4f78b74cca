/* The bridge from JSON text to the interpreter's values, through cJSON (the
 * only file of the module that needs it). cJSON keeps numbers as doubles, so
 * the number literals are also read from the text itself, in document
 * order, to keep Python's int/float distinction: 1 stays an int, 1.0 a
 * float, and large integers stay exact. cJSON also ends its strings at a
 * NUL, so a string holding one (\u0000 or the byte) is refused rather than
 * cut. */
#include "chat/chat_template.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "chat/value.h"

/* The spelling of each number literal of a JSON text, in order, and where
 * the first NUL inside a string is. */
struct literals {
    const char *text;
    size_t *starts, *lengths;
    size_t count, next;
    size_t nul_at; /* SIZE_MAX: none */
};

static bool is_number_character(char c)
{
    return (c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.' || c == 'e' || c == 'E';
}

/* Finds the literals as cJSON's parser does: outside strings, a run of number
 * characters starting with '-' or a digit; inside strings, a NUL byte or its
 * escape. */
static bool scan_literals(const char *text, size_t length, struct literals *numbers)
{
    size_t capacity = 0;
    numbers->text = text;
    numbers->starts = numbers->lengths = NULL;
    numbers->count = numbers->next = 0;
    numbers->nul_at = SIZE_MAX;
    for (size_t i = 0; i < length;) {
        char c = text[i];
        if (c == '"') {
            for (i++; i < length && text[i] != '"'; i++) {
                bool nul = text[i] == '\0' ||
                           (text[i] == '\\' && length - i >= 6 && memcmp(text + i + 1, "u0000", 5) == 0);
                if (nul && numbers->nul_at == SIZE_MAX)
                    numbers->nul_at = i;
                if (text[i] == '\\')
                    i++;
            }
            i++;
            continue;
        }
        if (c != '-' && !(c >= '0' && c <= '9')) {
            i++;
            continue;
        }
        size_t start = i;
        while (i < length && is_number_character(text[i]))
            i++;
        if (numbers->count == capacity) {
            capacity = capacity ? capacity * 2 : 64;
            size_t *starts = realloc(numbers->starts, capacity * sizeof *starts);
            if (!starts)
                return false;
            numbers->starts = starts;
            size_t *lengths = realloc(numbers->lengths, capacity * sizeof *lengths);
            if (!lengths)
                return false;
            numbers->lengths = lengths;
        }
        numbers->starts[numbers->count] = start;
        numbers->lengths[numbers->count++] = i - start;
    }
    return true;
}

static chat_value number_value(const cJSON *item, struct literals *numbers)
{
    if (numbers->next >= numbers->count)
        return chat_value_float(item->valuedouble);
    const char *text = numbers->text + numbers->starts[numbers->next];
    size_t length = numbers->lengths[numbers->next++];
    bool integral = length < 32;
    for (size_t i = 0; i < length && integral; i++)
        integral = text[i] == '-' || (text[i] >= '0' && text[i] <= '9');
    if (integral) {
        char digits[32];
        memcpy(digits, text, length);
        digits[length] = '\0';
        errno = 0;
        long long integer = strtoll(digits, NULL, 10);
        if (errno == 0)
            return chat_value_int(integer);
    }
    return chat_value_float(item->valuedouble);
}

static chat_value convert(const cJSON *item, struct literals *numbers, int depth)
{
    if (depth > 1000)
        return (chat_value){.kind = CHAT_VALUE_INVALID};
    if (cJSON_IsNull(item))
        return chat_value_none();
    if (cJSON_IsBool(item))
        return chat_value_bool(cJSON_IsTrue(item));
    if (cJSON_IsNumber(item))
        return number_value(item, numbers);
    if (cJSON_IsString(item))
        return chat_value_cstring(item->valuestring ? item->valuestring : "");
    bool array = cJSON_IsArray(item);
    chat_value container = array ? chat_value_array() : chat_value_object();
    if (container.kind == CHAT_VALUE_INVALID || (!array && !cJSON_IsObject(item))) {
        chat_value_release(container);
        return (chat_value){.kind = CHAT_VALUE_INVALID};
    }
    for (const cJSON *child = item->child; child; child = child->next) {
        chat_value value = convert(child, numbers, depth + 1);
        int status = array ? chat_value_array_append(container, value)
                           : chat_value_object_set_cstring(container, child->string ? child->string : "", value);
        if (status != 0) {
            chat_value_release(container);
            return (chat_value){.kind = CHAT_VALUE_INVALID};
        }
    }
    return container;
}

int chat_value_from_json(const char *json, size_t length, chat_value *value, bmoe_error *err)
{
    *value = (chat_value){.kind = CHAT_VALUE_INVALID};
    if (!json)
        return error_set(err, "context: no JSON text");
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, length, &end, false);
    if (!root) {
        size_t offset = end && end >= json ? (size_t)(end - json) : 0;
        return error_set(err, "context: invalid JSON near byte %zu", offset);
    }
    for (const char *rest = end; rest && rest < json + length; rest++) {
        if (*rest == '\0' && rest + 1 == json + length)
            break;
        if (*rest != ' ' && *rest != '\t' && *rest != '\n' && *rest != '\r') {
            cJSON_Delete(root);
            return error_set(err, "context: unexpected data after the JSON value at byte %zu", (size_t)(rest - json));
        }
    }
    struct literals numbers;
    size_t parsed = end && end >= json ? (size_t)(end - json) : length;
    if (!scan_literals(json, parsed, &numbers) || numbers.nul_at != SIZE_MAX) {
        size_t nul_at = numbers.nul_at;
        free(numbers.starts);
        free(numbers.lengths);
        cJSON_Delete(root);
        if (nul_at != SIZE_MAX)
            return error_set(err, "context: a string holds a NUL (\\u0000) at byte %zu; templates take no NUL",
                             nul_at);
        return error_set(err, "context: out of memory");
    }
    *value = convert(root, &numbers, 0);
    free(numbers.starts);
    free(numbers.lengths);
    cJSON_Delete(root);
    if (value->kind == CHAT_VALUE_INVALID)
        return error_set(err, "context: out of memory or nested too deeply");
    return 0;
}

int chat_template_render_json(const chat_template *template_, const char *context_json, size_t length,
                              const chat_render_options *options, char **out, size_t *out_length, bmoe_error *err)
{
    if (out)
        *out = NULL;
    if (out_length)
        *out_length = 0;
    chat_value context;
    if (chat_value_from_json(context_json, length, &context, err) != 0)
        return -1;
    if (context.kind != CHAT_VALUE_OBJECT) {
        chat_value_release(context);
        return error_set(err, "context: the JSON text must be an object");
    }
    int status = chat_template_render(template_, context, options, out, out_length, err);
    chat_value_release(context);
    return status;
}
