/* logprobs: each generated token's log-probability and its most likely
 * alternatives in OpenAI's two shapes. Chat: {"content": [{"token",
 * "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]}]};
 * completions: {"tokens", "token_logprobs", "top_logprobs": [{token:
 * logprob}], "text_offset"}, the offset the byte offset in the answer's text
 * of what became final with the token's step. A token's text is its piece; a
 * piece that splits a character shows U+FFFD for the bytes it cannot
 * spell, and "bytes" (chat) keeps them exact. A token the model rules out
 * (-inf) gets OpenAI's -9999. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "server.h"

#define PIECE_BYTES 256
#define RULED_OUT_LOGPROB -9999.0

/* token's text (malloc'ed; NULL: out of memory), its piece's bytes
 * appended to bytes when that is not NULL. */
static char *token_text(const server *s, int32_t token, cJSON *bytes)
{
    char buffer[PIECE_BYTES], *owned = NULL;
    const char *piece = buffer;
    int32_t n = bmoe_token_to_piece(s->model, token, true, buffer, PIECE_BYTES, NULL);
    if (n > PIECE_BYTES) {
        piece = owned = malloc((size_t)n);
        if (!owned)
            return NULL;
        bmoe_token_to_piece(s->model, token, true, owned, n, NULL);
    }
    if (n < 0)
        n = 0;
    char *text = server_json_text(piece, (size_t)n);
    for (int32_t i = 0; text && bytes && i < n; i++)
        cJSON_AddItemToArray(bytes, cJSON_CreateNumber((unsigned char)piece[i]));
    free(owned);
    return text;
}

static double json_logprob(float logprob)
{
    return isfinite(logprob) ? (double)logprob : RULED_OUT_LOGPROB;
}

/* A chat entry: {"token", "logprob", "bytes"} (NULL: out of memory). */
static cJSON *chat_entry(const server *s, int32_t token, float logprob)
{
    cJSON *entry = cJSON_CreateObject(), *bytes = cJSON_CreateArray();
    char *text = entry && bytes ? token_text(s, token, bytes) : NULL;
    bool made = text && cJSON_AddStringToObject(entry, "token", text) &&
                cJSON_AddNumberToObject(entry, "logprob", json_logprob(logprob)) &&
                cJSON_AddItemToObject(entry, "bytes", bytes);
    free(text);
    if (made)
        return entry;
    if (!cJSON_GetObjectItemCaseSensitive(entry, "bytes"))
        cJSON_Delete(bytes);
    cJSON_Delete(entry);
    return NULL;
}

/* Adds item to array; false (item freed) when either is missing. */
static bool append(cJSON *array, cJSON *item)
{
    if (array && item && cJSON_AddItemToArray(array, item))
        return true;
    cJSON_Delete(item);
    return false;
}

/* The array named key of logprobs (server_logprobs_new made it). */
static cJSON *array_of(cJSON *logprobs, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(logprobs, key);
}

/* The chat shape: one more entry in logprobs.content. */
static int add_chat(cJSON *logprobs, const server *s, const bmoe_step *step)
{
    cJSON *entry = chat_entry(s, step->token, step->logprob);
    if (!append(array_of(logprobs, "content"), entry))
        return -1;
    cJSON *top = cJSON_AddArrayToObject(entry, "top_logprobs");
    for (int32_t k = 0; k < step->n_top; k++)
        if (!append(top, chat_entry(s, step->top[k].token, step->top[k].logprob)))
            return -1;
    return top ? 0 : -1;
}

/* The completions shape: one more element in each of its four arrays. */
static int add_completion(cJSON *logprobs, const server *s, const bmoe_step *step, size_t *text_offset)
{
    char *text = token_text(s, step->token, NULL);
    bool made = append(array_of(logprobs, "tokens"), text ? cJSON_CreateString(text) : NULL) &&
                append(array_of(logprobs, "token_logprobs"), cJSON_CreateNumber(json_logprob(step->logprob))) &&
                append(array_of(logprobs, "text_offset"), cJSON_CreateNumber((double)*text_offset));
    free(text);
    *text_offset += step->text_length;
    cJSON *top = cJSON_CreateObject();
    if (!made || !append(array_of(logprobs, "top_logprobs"), top))
        return -1;
    for (int32_t k = 0; k < step->n_top; k++) {
        char *alternative = token_text(s, step->top[k].token, NULL);
        if (!alternative)
            return -1;
        /* two tokens may spell the same text (a byte token and a split
         * character): the more likely one, first here, keeps the key */
        if (!cJSON_HasObjectItem(top, alternative))
            cJSON_AddNumberToObject(top, alternative, json_logprob(step->top[k].logprob));
        free(alternative);
    }
    return 0;
}

cJSON *server_logprobs_new(bool chat)
{
    static const char *const completion_arrays[] = {"tokens", "token_logprobs", "top_logprobs", "text_offset"};
    cJSON *logprobs = cJSON_CreateObject();
    bool made = logprobs != NULL;
    if (chat)
        made = made && cJSON_AddArrayToObject(logprobs, "content");
    for (int i = 0; !chat && made && i < 4; i++)
        made = cJSON_AddArrayToObject(logprobs, completion_arrays[i]) != NULL;
    if (!made) {
        cJSON_Delete(logprobs);
        return NULL;
    }
    return logprobs;
}

int server_logprobs_add(cJSON *logprobs, const server *s, const bmoe_step *step, bool chat, size_t *text_offset)
{
    if (!logprobs || step->token < 0)
        return 0;
    return chat ? add_chat(logprobs, s, step) : add_completion(logprobs, s, step, text_offset);
}
