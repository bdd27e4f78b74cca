/* Hugging Face tokenizer.json -> tokenizer_parts (see hf_tokenizer.h). Types
 * follow the GGUF converter's conventions: vocabulary entries are NORMAL
 * (<0xXX> entries BYTE when the model has byte_fallback), special added
 * tokens CONTROL, other added tokens USER_DEFINED, ids nobody names
 * "[PAD<id>]" UNUSED. */
#include "hf_tokenizer.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static char *read_gzip(const char *path, size_t *length)
{
    gzFile file = gzopen(path, "rb");
    if (!file)
        return NULL;
    size_t used = 0, capacity = 1 << 24;
    char *data = malloc(capacity);
    while (data) {
        if (capacity - used < (1 << 20)) {
            char *grown = realloc(data, capacity * 2);
            if (!grown) {
                free(data);
                data = NULL;
                break;
            }
            data = grown;
            capacity *= 2;
        }
        int got = gzread(file, data + used, 1 << 20);
        if (got < 0) {
            free(data);
            data = NULL;
            break;
        }
        if (got == 0)
            break;
        used += (size_t)got;
    }
    gzclose(file);
    if (data) {
        data[used] = '\0';
        *length = used;
    }
    return data;
}

static bool is_byte_token(const char *text)
{
    return strlen(text) == 6 && strncmp(text, "<0x", 3) == 0 && text[5] == '>';
}

tokenizer *hf_tokenizer_load(const char *gz_path, const char *model_name, const char *pre,
                             const char *bos_text, const char *eos_text, bmoe_error *err)
{
    size_t length = 0;
    char *json_text = read_gzip(gz_path, &length);
    if (!json_text) {
        error_set(err, "%s: cannot read", gz_path);
        return NULL;
    }
    cJSON *root = cJSON_ParseWithLength(json_text, length);
    free(json_text);
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    if (!cJSON_IsObject(vocab) || !cJSON_IsArray(merges)) {
        error_set(err, "%s: no model.vocab / model.merges", gz_path);
        cJSON_Delete(root);
        return NULL;
    }
    bool byte_fallback = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "byte_fallback"));
    int32_t n_vocab = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, vocab) if (item->valueint + 1 > n_vocab) n_vocab = item->valueint + 1;
    cJSON_ArrayForEach(item, added)
    {
        int id = cJSON_GetObjectItemCaseSensitive(item, "id")->valueint;
        if (id + 1 > n_vocab)
            n_vocab = id + 1;
    }
    int32_t n_merges = cJSON_GetArraySize(merges);
    tokenizer_string *tokens = calloc((size_t)n_vocab, sizeof(tokenizer_string));
    int32_t *types = calloc((size_t)n_vocab, sizeof(int32_t));
    char **owned = calloc((size_t)n_vocab + (size_t)n_merges, sizeof(char *));
    tokenizer_string *merge_strings = calloc((size_t)n_merges + 1, sizeof(tokenizer_string));
    size_t n_owned = 0;
    tokenizer *tok = NULL;
    if (!tokens || !types || !owned || !merge_strings) {
        error_set(err, "%s: out of memory", gz_path);
        goto done;
    }
    cJSON_ArrayForEach(item, vocab)
    {
        int id = item->valueint;
        tokens[id] = (tokenizer_string){item->string, strlen(item->string)};
        types[id] = byte_fallback && is_byte_token(item->string) ? TOKENIZER_TOKEN_BYTE
                                                                 : TOKENIZER_TOKEN_NORMAL;
    }
    int32_t bos = TOKENIZER_NO_TOKEN, eos = TOKENIZER_NO_TOKEN;
    cJSON_ArrayForEach(item, added)
    {
        int id = cJSON_GetObjectItemCaseSensitive(item, "id")->valueint;
        const char *content = cJSON_GetObjectItemCaseSensitive(item, "content")->valuestring;
        bool special = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(item, "special"));
        tokens[id] = (tokenizer_string){content, strlen(content)};
        types[id] = special ? TOKENIZER_TOKEN_CONTROL : TOKENIZER_TOKEN_USER_DEFINED;
        if (bos_text && strcmp(content, bos_text) == 0)
            bos = id;
        if (eos_text && strcmp(content, eos_text) == 0)
            eos = id;
    }
    for (int32_t id = 0; id < n_vocab; id++) {
        if (tokens[id].data)
            continue;
        char name[32];
        snprintf(name, sizeof(name), "[PAD%d]", (int)id);
        owned[n_owned] = strdup(name);
        tokens[id] = (tokenizer_string){owned[n_owned], strlen(name)};
        n_owned++;
        types[id] = TOKENIZER_TOKEN_UNUSED;
    }
    int32_t index = 0;
    cJSON_ArrayForEach(item, merges)
    {
        if (cJSON_IsString(item)) {
            merge_strings[index++] = (tokenizer_string){item->valuestring, strlen(item->valuestring)};
            continue;
        }
        /* Newer files store [left, right]. */
        const char *left = cJSON_GetArrayItem(item, 0)->valuestring;
        const char *right = cJSON_GetArrayItem(item, 1)->valuestring;
        size_t left_length = strlen(left), right_length = strlen(right);
        char *joined = malloc(left_length + right_length + 2);
        memcpy(joined, left, left_length);
        joined[left_length] = ' ';
        memcpy(joined + left_length + 1, right, right_length + 1);
        owned[n_owned++] = joined;
        merge_strings[index++] = (tokenizer_string){joined, left_length + right_length + 1};
    }
    tokenizer_parts parts;
    tokenizer_parts_init(&parts);
    parts.model = model_name;
    parts.pre = pre;
    parts.n_vocab = n_vocab;
    parts.tokens = tokens;
    parts.token_types = types;
    parts.n_merges = n_merges;
    parts.merges = merge_strings;
    parts.bos_id = bos;
    parts.eos_id = eos;
    const cJSON *ignore_merges = cJSON_GetObjectItemCaseSensitive(model, "ignore_merges");
    if (cJSON_IsBool(ignore_merges))
        parts.ignore_merges = cJSON_IsTrue(ignore_merges) ? 1 : 0;
    tok = tokenizer_create(&parts, err);
done:
    for (size_t i = 0; i < n_owned; i++)
        free(owned[i]);
    free(owned);
    free(tokens);
    free(types);
    free(merge_strings);
    cJSON_Delete(root);
    return tok;
}
