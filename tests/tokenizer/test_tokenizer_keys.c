/* tokenizer.ggml.* keys with bad values, in small GGUF files written here:
 * each is one error naming the key and the value found (a special id
 * outside the vocabulary is never dropped quietly, a token type of 99 is
 * reported as 99), with the file's strings escaped so that the message
 * stays one line; the u32 -1 that published files use for "no token" loads
 * as none. */
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "tokenizer/tokenizer.h"

enum { VOCAB = 12 };

typedef struct keys {
    const char *model;          /* NULL: "llama" */
    const char *pre;            /* NULL: absent */
    const char *merge;          /* one merge (gpt2), NULL: none */
    int64_t bos;                /* -2: absent */
    int64_t eos;                /* -2: absent */
    int64_t padding;            /* -2: absent */
    const char *bos_text;       /* bos written as this string instead */
    const char *add_bos_text;   /* add_bos_token written as this string */
    int32_t bad_type;           /* token 3's type (0: normal) */
} keys;

static const keys plain = {.bos = 1, .eos = 2, .padding = -2};

static void add_id(gguf_writer *w, const char *key, int64_t value)
{
    if (value == -2)
        return;
    if (value < 0)
        gguf_writer_add_int32(w, key, (int32_t)value);
    else
        gguf_writer_add_uint32(w, key, (uint32_t)value);
}

static bool write_tokenizer(const char *path, const keys *k)
{
    bmoe_error err = {0};
    gguf_writer *w = gguf_writer_create(path, &err);
    if (!w)
        return false;
    const char *tokens[VOCAB] = {"<unk>", "<s>", "</s>", "a", "b", "ab", "c", "d", "e", "f", "g", "h"};
    int32_t types[VOCAB];
    for (int i = 0; i < VOCAB; i++)
        types[i] = i < 3 ? TOKENIZER_TOKEN_CONTROL : TOKENIZER_TOKEN_NORMAL;
    if (k->bad_type)
        types[3] = k->bad_type;
    gguf_writer_add_string(w, "general.architecture", "llama");
    gguf_writer_add_string(w, "tokenizer.ggml.model", k->model ? k->model : "llama");
    if (k->pre)
        gguf_writer_add_string(w, "tokenizer.ggml.pre", k->pre);
    gguf_writer_add_string_array(w, "tokenizer.ggml.tokens", VOCAB, tokens);
    gguf_writer_add_array(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, VOCAB, types);
    if (k->merge)
        gguf_writer_add_string_array(w, "tokenizer.ggml.merges", 1, &k->merge);
    if (k->bos_text)
        gguf_writer_add_string(w, "tokenizer.ggml.bos_token_id", k->bos_text);
    else
        add_id(w, "tokenizer.ggml.bos_token_id", k->bos);
    add_id(w, "tokenizer.ggml.eos_token_id", k->eos);
    add_id(w, "tokenizer.ggml.padding_token_id", k->padding);
    if (k->add_bos_text)
        gguf_writer_add_string(w, "tokenizer.ggml.add_bos_token", k->add_bos_text);
    bool ok = gguf_writer_finish(w, &err) == 0;
    if (!ok)
        fprintf(stderr, "writer: %s\n", err.message);
    return ok;
}

static tokenizer *load(const char *label, const keys *k, char *message, size_t size)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tokenizer-keys-%s.gguf", test_tmp_dir(), label);
    CHECK_MSG(write_tokenizer(path, k), "%s: cannot write", label);
    bmoe_error err = {0};
    gguf_model *model = gguf_open(path, &err);
    CHECK_MSG(model != NULL, "%s: %s", label, err.message);
    tokenizer *tok = model ? tokenizer_create_from_gguf(model, &err) : NULL;
    snprintf(message, size, "%s", err.message);
    gguf_close(model);
    remove(path);
    return tok;
}

static void expect_error(const char *label, const keys *k, const char *expected)
{
    char message[512];
    tokenizer *tok = load(label, k, message, sizeof message);
    CHECK_MSG(tok == NULL, "%s: loaded", label);
    tokenizer_destroy(tok);
    CHECK_MSG(strstr(message, expected) != NULL, "%s: message '%s' lacks '%s'", label, message, expected);
    CHECK_MSG(strchr(message, '\n') == NULL, "%s: message is not one line", label);
}

static void test_valid_and_none(void)
{
    char message[512];
    tokenizer *tok = load("valid", &plain, message, sizeof message);
    CHECK_MSG(tok != NULL, "valid: %s", message);
    if (tok) {
        CHECK(tokenizer_bos(tok) == 1 && tokenizer_eos(tok) == 2);
        tokenizer_destroy(tok);
    }
    /* "no padding token" as the u32 -1, and as an INT32 -1 */
    keys none = plain;
    none.padding = 4294967295ll;
    tok = load("none-u32", &none, message, sizeof message);
    CHECK_MSG(tok != NULL, "u32 -1: %s", message);
    tokenizer_destroy(tok);
    none.padding = -1;
    none.eos = 4294967295ll;
    tok = load("none-i32", &none, message, sizeof message);
    CHECK_MSG(tok != NULL, "i32 -1: %s", message);
    if (tok)
        CHECK(tokenizer_eos(tok) == TOKENIZER_NO_TOKEN);
    tokenizer_destroy(tok);
}

static void test_bad_values(void)
{
    keys k = plain;
    k.bos = VOCAB;
    expect_error("bos-past", &k, "tokenizer.ggml.bos_token_id = 12 is outside the vocabulary of 12 tokens");
    k = plain;
    k.eos = 4000000000ll;
    expect_error("eos-huge", &k, "tokenizer.ggml.eos_token_id = 4000000000 is outside the vocabulary");
    k = plain;
    k.padding = -7;
    expect_error("padding-negative", &k, "tokenizer.ggml.padding_token_id = -7 is outside the vocabulary");
    k = plain;
    k.bos_text = "1";
    expect_error("bos-string", &k, "key tokenizer.ggml.bos_token_id is not an integer");
    k = plain;
    k.add_bos_text = "yes";
    expect_error("add-bos-string", &k, "key tokenizer.ggml.add_bos_token is not a boolean");
    k = plain;
    k.bad_type = 99;
    expect_error("type-99", &k, "tokenizer.ggml.token_type[3] = 99 is not a token type (0..6)");
    k = plain;
    k.bad_type = -5;
    expect_error("type-negative", &k, "tokenizer.ggml.token_type[3] = -5 is not a token type");
}

static void test_escaped_strings(void)
{
    keys k = plain;
    k.model = "llama\n\x1b[2J";
    expect_error("model-control", &k, "unsupported tokenizer model 'llama\\n\\x1b[2J'");
    k = plain;
    k.model = "gpt2";
    k.pre = "qwen2\r\x7f'";
    k.merge = "a b";
    expect_error("pre-control", &k, "unknown pre-tokenizer type 'qwen2\\r\\x7f\\''");
    k = plain;
    k.model = "gpt2";
    k.merge = "ab\t\x01";
    expect_error("merge-control", &k, "merge 0 ('ab\\t\\x01') is not 'LEFT RIGHT'");
}

/* The same rule for a vocabulary given in parts: the message names the key. */
static void test_parts(void)
{
    tokenizer_string texts[VOCAB];
    static const char *const words[VOCAB] = {"<unk>", "<s>", "</s>", "a", "b", "ab", "c", "d", "e", "f", "g", "h"};
    for (int i = 0; i < VOCAB; i++)
        texts[i] = (tokenizer_string){words[i], strlen(words[i])};
    tokenizer_parts parts;
    tokenizer_parts_init(&parts);
    parts.model = "llama";
    parts.n_vocab = VOCAB;
    parts.tokens = texts;
    parts.eot_id = 40;
    bmoe_error err = {0};
    tokenizer *tok = tokenizer_create(&parts, &err);
    CHECK(tok == NULL && strstr(err.message, "tokenizer.ggml.eot_token_id = 40 is outside the vocabulary of 12"));
    tokenizer_destroy(tok);
    parts.eot_id = TOKENIZER_NO_TOKEN;
    tok = tokenizer_create(&parts, &err);
    CHECK_MSG(tok != NULL, "%s", err.message);
    tokenizer_destroy(tok);
}

int main(void)
{
    test_valid_and_none();
    test_bad_values();
    test_escaped_strings();
    test_parts();
    return test_finish();
}
