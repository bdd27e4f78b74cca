/* Tokenizers read from real GGUF files: llama.cpp's vocabulary test vectors
 * (gpt-2, llama-spm, deepseek-llm), stories260K's SentencePiece prompts, the
 * oracle cases' prompt_ids for every tiny MoE model, and round trips. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "tokenizer/tokenizer.h"
#include "vector_files.h"

static tokenizer *open_tokenizer(const char *relative, gguf_model **model_out)
{
    char path[1024];
    test_shared_path(path, sizeof(path), relative);
    bmoe_error err = {0};
    gguf_model *model = gguf_open(path, &err);
    CHECK_MSG(model != NULL, "%s: %s", relative, err.message);
    if (!model)
        return NULL;
    tokenizer *tok = tokenizer_create_from_gguf(model, &err);
    CHECK_MSG(tok != NULL, "%s: %s", relative, err.message);
    *model_out = model;
    return tok;
}

static void test_vocab_vectors(const char *name)
{
    char relative[256], inp[1024], out[1024];
    snprintf(relative, sizeof(relative), "data/llama-vocab-tests/ggml-vocab-%s.gguf", name);
    gguf_model *model = NULL;
    tokenizer *tok = open_tokenizer(relative, &model);
    if (!tok) {
        gguf_close(model);
        return;
    }
    snprintf(relative, sizeof(relative), "data/llama-vocab-tests/ggml-vocab-%s.gguf.inp", name);
    test_shared_path(inp, sizeof(inp), relative);
    snprintf(relative, sizeof(relative), "data/llama-vocab-tests/ggml-vocab-%s.gguf.out", name);
    test_shared_path(out, sizeof(out), relative);
    vector_set set;
    CHECK(vector_set_load(&set, inp, out) == 0);
    CHECK(set.count > 40);
    size_t passed = vector_run(tok, &set, name, false);
    CHECK_MSG(passed == set.count, "%s: %zu of %zu vectors pass", name, passed, set.count);

    /* Round trip: pieces concatenated give the input back for these vocabs
     * except where the input is not what the vocabulary can spell (SPM adds
     * a leading space, removed by detokenize). */
    size_t round_trips = 0;
    for (size_t i = 0; i < set.count; i++) {
        int32_t ids[4096];
        int32_t n = tokenizer_encode(tok, set.inputs[i], set.input_lengths[i], false, false, ids, 4096, NULL);
        static char text[65536];
        int32_t length = tokenizer_detokenize(tok, ids, n, false, false, text, sizeof(text), NULL);
        /* clean_spaces (gpt-2) legitimately rewrites " ." etc.; compare only
         * where the input has none of those sequences. */
        bool cleanable = strstr(set.inputs[i], " .") || strstr(set.inputs[i], " ,") ||
                         strstr(set.inputs[i], " !") || strstr(set.inputs[i], " ?") ||
                         strstr(set.inputs[i], " '");
        if (length == (int32_t)set.input_lengths[i] && memcmp(text, set.inputs[i], (size_t)length) == 0)
            round_trips++;
        else
            CHECK_MSG(cleanable && strcmp(name, "gpt-2") == 0, "%s #%zu does not round-trip: \"%.60s\" -> \"%.60s\"",
                      name, i, set.inputs[i], text);
    }
    printf("%s: %zu/%zu round trips exact\n", name, round_trips, set.count);
    vector_set_free(&set);
    tokenizer_destroy(tok);
    gguf_close(model);
}

static void test_stories260k(void)
{
    gguf_model *model = NULL;
    tokenizer *tok = open_tokenizer("data/models/stories260K/stories260K.gguf", &model);
    if (!tok) {
        gguf_close(model);
        return;
    }
    /* data/README.md: llama-tokenize and run.c agree on these. */
    static const int32_t shoggoth[] = {1, 385, 328, 432, 317, 284, 316, 261, 301, 415, 414, 428, 428, 309, 415};
    static const int32_t once[] = {1, 403, 407, 261, 378};
    int32_t ids[64];
    const char *text = "One day, Lily met a Shoggoth";
    int32_t n = tokenizer_encode(tok, text, strlen(text), true, false, ids, 64, NULL);
    CHECK(n == 15 && memcmp(ids, shoggoth, sizeof(shoggoth)) == 0);
    text = "Once upon a time";
    n = tokenizer_encode(tok, text, strlen(text), true, false, ids, 64, NULL);
    CHECK(n == 5 && memcmp(ids, once, sizeof(once)) == 0);
    CHECK(tokenizer_bos(tok) == 1 && tokenizer_eos(tok) == 2);
    CHECK(tokenizer_is_end_of_generation(tok, 2));
    CHECK(!tokenizer_is_end_of_generation(tok, 385));
    char buf[256];
    /* Spec 10.2: the prefix space is stripped from the first token, but not
     * after a removed BOS. */
    int32_t length = tokenizer_detokenize(tok, shoggoth + 1, 14, true, false, buf, sizeof(buf), NULL);
    CHECK(length == 28 && strcmp(buf, "One day, Lily met a Shoggoth") == 0);
    length = tokenizer_detokenize(tok, shoggoth, 15, true, false, buf, sizeof(buf), NULL);
    CHECK(length == 29 && strcmp(buf, " One day, Lily met a Shoggoth") == 0);
    length = tokenizer_detokenize(tok, shoggoth, 15, false, true, buf, sizeof(buf), NULL);
    CHECK(length == 32 && strcmp(buf, "<s> One day, Lily met a Shoggoth") == 0);

    /* Round trip over a corpus sample: SentencePiece with byte fallback
     * spells any byte string. */
    char path[1024];
    size_t corpus_length = 0;
    char *corpus = vector_read_file(test_shared_path(path, sizeof(path), "data/corpus/tinyshakespeare.txt"),
                                    &corpus_length);
    CHECK(corpus != NULL);
    if (corpus) {
        size_t sample = corpus_length < 20000 ? corpus_length : 20000;
        int32_t capacity = (int32_t)sample + 16;
        int32_t *tokens = malloc((size_t)capacity * sizeof(int32_t));
        char *back = malloc(sample * 2 + 16);
        n = tokenizer_encode(tok, corpus, sample, false, false, tokens, capacity, NULL);
        CHECK(n > 0 && n < capacity);
        length = tokenizer_detokenize(tok, tokens, n, false, false, back, (int32_t)sample * 2 + 16, NULL);
        CHECK_MSG(length == (int32_t)sample && memcmp(back, corpus, sample) == 0,
                  "stories260K round trip of %zu bytes", sample);
        free(tokens);
        free(back);
        free(corpus);
    }
    tokenizer_destroy(tok);
    gguf_close(model);
}

static void test_oracle_case(const char *model_name, const char *case_name)
{
    char relative[256], path[1024];
    snprintf(relative, sizeof(relative), "oracle/cases/%s.%s.json", model_name, case_name);
    char *json_text = vector_read_file(test_shared_path(path, sizeof(path), relative), NULL);
    cJSON *json = json_text ? cJSON_Parse(json_text) : NULL;
    free(json_text);
    CHECK_MSG(json != NULL, "%s does not parse", relative);
    if (!json)
        return;
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(json, "text");
    const cJSON *prompt = cJSON_GetObjectItemCaseSensitive(json, "prompt_ids");
    CHECK(cJSON_IsString(text) && cJSON_IsArray(prompt));
    snprintf(relative, sizeof(relative), "oracle/models/%s.gguf", model_name);
    gguf_model *model = NULL;
    tokenizer *tok = open_tokenizer(relative, &model);
    if (tok && cJSON_IsString(text) && cJSON_IsArray(prompt)) {
        int32_t expected_count = cJSON_GetArraySize(prompt);
        int32_t ids[4096];
        size_t length = strlen(text->valuestring);
        int32_t n = tokenizer_encode(tok, text->valuestring, length, false, true, ids, 4096, NULL);
        /* The long case's prompt is the first 300 tokens of its text. */
        bool is_long = strcmp(case_name, "long") == 0;
        bool count_ok = is_long ? n >= expected_count : n == expected_count;
        int32_t first_difference = -1;
        for (int32_t i = 0; i < expected_count && i < n; i++)
            if (ids[i] != cJSON_GetArrayItem(prompt, i)->valueint) {
                first_difference = i;
                break;
            }
        CHECK_MSG(count_ok && first_difference < 0, "%s.%s: %d tokens (want %s%d), first difference at %d",
                  model_name, case_name, (int)n, is_long ? ">= " : "", (int)expected_count,
                  (int)first_difference);
        printf("oracle %s.%s: %s\n", model_name, case_name,
               count_ok && first_difference < 0 ? "prompt_ids match" : "MISMATCH");
        /* Rendering specials gives the text back (no clean-up for these pres
         * except where the text has nothing to clean). */
        static char back[16384];
        int32_t back_length = tokenizer_detokenize(tok, ids, n, false, true, back, sizeof(back), NULL);
        CHECK_MSG(back_length == (int32_t)length && memcmp(back, text->valuestring, length) == 0,
                  "%s.%s does not round-trip", model_name, case_name);
    }
    tokenizer_destroy(tok);
    gguf_close(model);
    cJSON_Delete(json);
}

static void test_oracle_special_ids(void)
{
    gguf_model *model = NULL;
    tokenizer *tok = open_tokenizer("oracle/models/gptoss-tiny-f32.gguf", &model);
    if (tok) {
        /* Harmony: <|return|> and <|call|> stop, <|end|> does not (spec 9). */
        int32_t ret = tokenizer_find_token(tok, "<|return|>", 10);
        int32_t call = tokenizer_find_token(tok, "<|call|>", 8);
        int32_t end = tokenizer_find_token(tok, "<|end|>", 7);
        CHECK(ret == 501 && call == 502 && end == 498);
        CHECK(tokenizer_is_end_of_generation(tok, ret));
        CHECK(tokenizer_is_end_of_generation(tok, call));
        CHECK(!tokenizer_is_end_of_generation(tok, end));
        CHECK(tokenizer_token_type(tok, end) == TOKENIZER_TOKEN_USER_DEFINED);
        CHECK(tokenizer_is_end_of_generation(tok, 496)); /* <|endoftext|> */
        /* <|start|> is always rendered, <|endoftext|> only on request. */
        char piece[32];
        CHECK(tokenizer_token_to_piece(tok, 497, false, piece, sizeof(piece)) == 9);
        CHECK(tokenizer_token_to_piece(tok, 496, false, piece, sizeof(piece)) == 0);
        CHECK(tokenizer_token_to_piece(tok, 496, true, piece, sizeof(piece)) == 13);
        CHECK(!tokenizer_add_bos(tok));
    }
    tokenizer_destroy(tok);
    gguf_close(model);

    tok = open_tokenizer("oracle/models/qwen3moe-tiny-f32.gguf", &model);
    if (tok) {
        CHECK(tokenizer_is_end_of_generation(tok, 498)); /* <|im_end|>, eos */
        CHECK(tokenizer_is_end_of_generation(tok, 496)); /* <|endoftext|> */
        CHECK(!tokenizer_is_end_of_generation(tok, 497)); /* <|im_start|> */
        CHECK(tokenizer_eot(tok) == 498);
        int32_t ids[8];
        /* add_bos_token is false: add_special adds nothing. */
        CHECK(tokenizer_encode(tok, "the", 3, true, true, ids, 8, NULL) == 1);
        /* Without parse_special control tokens are plain text. */
        int32_t n = tokenizer_encode(tok, "<|im_end|>", 10, false, false, ids, 8, NULL);
        CHECK(n > 1);
        CHECK(tokenizer_encode(tok, "<|im_end|>", 10, false, true, ids, 8, NULL) == 1 && ids[0] == 498);
    }
    tokenizer_destroy(tok);
    gguf_close(model);

    tok = open_tokenizer("oracle/models/gemma4-tiny-f32.gguf", &model);
    if (tok) {
        int32_t ids[8];
        CHECK(tokenizer_add_bos(tok) && tokenizer_bos(tok) == 497);
        CHECK(tokenizer_encode(tok, "the", 3, true, false, ids, 8, NULL) == 2 && ids[0] == 497);
        /* Too small a buffer: the count comes back, nothing past it is written. */
        ids[1] = -7;
        CHECK(tokenizer_encode(tok, "the", 3, true, false, ids, 1, NULL) == 2 && ids[0] == 497 && ids[1] == -7);
    }
    tokenizer_destroy(tok);
    gguf_close(model);
}

int main(void)
{
    test_vocab_vectors("gpt-2");
    test_vocab_vectors("llama-spm");
    test_vocab_vectors("deepseek-llm");
    test_stories260k();
    static const char *const models[] = {
        "qwen3moe-tiny-f32", "qwen3moe-tiny-q8_0", "qwen3moe-tiny-q4_k_m", "gptoss-tiny-f32",
        "gptoss-tiny-mxfp4", "gemma4-tiny-f32", "gemma4-tiny-q4_k_m", "qwen35moe-tiny-f32",
        "qwen35moe-tiny-q4_k_m", "lfm2moe-tiny-f32", "lfm2moe-tiny-q4_k_m",
    };
    for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++) {
        test_oracle_case(models[i], "chat");
        test_oracle_case(models[i], "long");
    }
    test_oracle_special_ids();
    return test_finish();
}
