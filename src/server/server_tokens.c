/* POST /tokenize and /detokenize, llama.cpp's server's: the model's tokens
 * of a text, and the text of a list of tokens, for clients that count or
 * pick tokens themselves. /tokenize {"content", "add_special" (false),
 * "parse_special" (true), "with_pieces" (false)} answers {"tokens": [id]}
 * or, with pieces, {"tokens": [{"id", "piece"}]}, a piece a string when it
 * is well-formed UTF-8 and its bytes otherwise. /detokenize {"tokens"}
 * answers {"content"}, control tokens' text included and bytes that are not
 * UTF-8 shown as U+FFFD. They read the model alone, so they answer at
 * once, beside a generation. */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "server.h"

#define BAD(param, ...)                                                                                           \
    do {                                                                                                          \
        server_error_reply(reply, 400, "invalid_request_error", param, "invalid_request", __VA_ARGS__);           \
        return -1;                                                                                                \
    } while (0)

#define PIECE_BYTES 256

/* The request's fields, checked: an object holding only keys[0..n_keys), none twice, booleans[] booleans. */
static int read_fields(const cJSON *request, const char *path, const char *const *keys, size_t n_keys,
                       server_reply *reply)
{
    if (!cJSON_IsObject(request))
        BAD(NULL, "the body must be a JSON object");
    const cJSON *field;
    cJSON_ArrayForEach(field, request) {
        const char *key = field->string;
        if (server_given_twice(request, field))
            BAD(key, "%s is given twice", key);
        if (!server_listed(keys, n_keys, key))
            BAD(key, "%s is not supported by %s", key, path);
        if (strcmp(key, "content") != 0 && strcmp(key, "tokens") != 0 && !cJSON_IsBool(field))
            BAD(key, "%s must be true or false", key);
    }
    return 0;
}

static bool flag(const cJSON *request, const char *key, bool absent)
{
    const cJSON *field = cJSON_GetObjectItemCaseSensitive(request, key);
    return field ? cJSON_IsTrue(field) : absent;
}

/* Token's piece, control tokens' text included (malloc'ed; NULL: out of memory). */
static char *piece_of(const server *s, int32_t token, int32_t *length)
{
    int32_t n = bmoe_token_to_piece(s->model, token, true, NULL, 0, NULL);
    char *piece = malloc((size_t)(n > 0 ? n : 0) + 1);
    if (!piece)
        return NULL;
    *length = n > 0 && bmoe_token_to_piece(s->model, token, true, piece, n, NULL) == n ? n : 0;
    return piece;
}

/* {"id", "piece"}: the piece a string when it is well-formed UTF-8, else its bytes (NULL: out of memory). */
static cJSON *piece_entry(const server *s, int32_t token)
{
    int32_t length = 0;
    char *piece = piece_of(s, token, &length);
    cJSON *entry = piece ? cJSON_CreateObject() : NULL;
    if (entry) {
        cJSON_AddNumberToObject(entry, "id", token);
        if (server_utf8_error_at((const unsigned char *)piece, (size_t)length) < 0) {
            piece[length] = '\0';
            cJSON_AddStringToObject(entry, "piece", piece);
        } else {
            cJSON *bytes = cJSON_AddArrayToObject(entry, "piece");
            for (int32_t i = 0; bytes && i < length; i++)
                cJSON_AddItemToArray(bytes, cJSON_CreateNumber((unsigned char)piece[i]));
        }
    }
    free(piece);
    return entry;
}

static int tokenize_request(const server *s, const cJSON *request, cJSON **answer, server_reply *reply)
{
    static const char *const keys[] = {"content", "add_special", "parse_special", "with_pieces"};
    if (read_fields(request, "/tokenize", keys, sizeof keys / sizeof keys[0], reply) != 0)
        return -1;
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(request, "content");
    if (!content)
        BAD("content", "content is required");
    if (!cJSON_IsString(content))
        BAD("content", "content must be a string");
    bool add_special = flag(request, "add_special", false), parse_special = flag(request, "parse_special", true);
    bool with_pieces = flag(request, "with_pieces", false);
    const char *text = content->valuestring;
    size_t length = strlen(text);
    bmoe_error error = {0};
    int32_t count = bmoe_tokenize(s->model, text, length, add_special, parse_special, NULL, 0, &error);
    int32_t *tokens = count >= 0 ? malloc((size_t)(count > 0 ? count : 1) * sizeof *tokens) : NULL;
    if (count < 0)
        BAD("content", "content: %s", error.message);
    if (!tokens ||
        bmoe_tokenize(s->model, text, length, add_special, parse_special, tokens, count, &error) != count) {
        free(tokens);
        server_error_reply(reply, 500, "server_error", NULL, NULL, "tokenizing failed: %s",
                           error.message[0] ? error.message : "out of memory");
        return -1;
    }
    *answer = cJSON_CreateObject();
    cJSON *list = cJSON_AddArrayToObject(*answer, "tokens");
    bool made = list != NULL;
    for (int32_t i = 0; made && i < count; i++) {
        cJSON *item = with_pieces ? piece_entry(s, tokens[i]) : cJSON_CreateNumber(tokens[i]);
        made = item && cJSON_AddItemToArray(list, item);
    }
    free(tokens);
    if (!made) {
        cJSON_Delete(*answer);
        *answer = NULL;
        server_error_reply(reply, 500, "server_error", NULL, NULL, "out of memory");
        return -1;
    }
    return 0;
}

static int detokenize_request(const server *s, const cJSON *request, cJSON **answer, server_reply *reply)
{
    static const char *const keys[] = {"tokens"};
    if (read_fields(request, "/detokenize", keys, 1, reply) != 0)
        return -1;
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(request, "tokens"), *item;
    if (!list)
        BAD("tokens", "tokens is required");
    if (!cJSON_IsArray(list))
        BAD("tokens", "tokens must be a list of token ids");
    int32_t n_vocab = bmoe_model_n_vocab(s->model), index = 0;
    cJSON_ArrayForEach(item, list) {
        if (!cJSON_IsNumber(item) || item->valuedouble != (double)(int32_t)item->valuedouble)
            BAD("tokens", "tokens[%d] must be a token id (an integer)", index);
        if (item->valuedouble < 0 || item->valuedouble >= n_vocab)
            BAD("tokens", "tokens[%d]: %.0f is not in the vocabulary of %d", index, item->valuedouble, n_vocab);
        index++;
    }
    size_t used = 0, capacity = PIECE_BYTES;
    char *text = malloc(capacity);
    bool made = text != NULL;
    cJSON_ArrayForEach(item, list) {
        int32_t length = 0;
        char *piece = made ? piece_of(s, (int32_t)item->valuedouble, &length) : NULL;
        if (piece && used + (size_t)length > capacity) {
            capacity = 2 * (used + (size_t)length);
            char *grown = realloc(text, capacity);
            if (grown) {
                text = grown;
            } else {
                free(piece);
                piece = NULL;
            }
        }
        made = piece != NULL;
        if (!made)
            break;
        memcpy(text + used, piece, (size_t)length);
        used += (size_t)length;
        free(piece);
    }
    char *content = made ? server_json_text(text, used) : NULL;
    free(text);
    *answer = content ? cJSON_CreateObject() : NULL;
    if (!*answer || !cJSON_AddStringToObject(*answer, "content", content)) {
        cJSON_Delete(*answer);
        *answer = NULL;
        free(content);
        server_error_reply(reply, 500, "server_error", NULL, NULL, "out of memory");
        return -1;
    }
    free(content);
    return 0;
}

void server_tokens_reply(const server *s, bool tokenize, const char *body, size_t length, server_reply *reply)
{
    cJSON *request = server_parse_body(body, length, reply), *answer = NULL;
    if (!request)
        return;
    int done = tokenize ? tokenize_request(s, request, &answer, reply)
                        : detokenize_request(s, request, &answer, reply);
    cJSON_Delete(request);
    if (done == 0)
        server_json_reply(reply, 200, answer);
}
