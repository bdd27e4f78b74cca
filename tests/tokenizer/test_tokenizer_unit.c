/* Tokenizer behaviour on small hand-built vocabularies, where every expected
 * id follows from the spec's rules by hand: merge rank order and ties,
 * pre-tokenizer boundaries, special-token partitioning, invalid UTF-8,
 * SentencePiece scores and byte fallback, Gemma 4 newline pieces, detokenize
 * clean-up, end-of-generation rules and load errors. */
#include <stdlib.h>
#include <string.h>

#include "byte_level.h"
#include "test.h"
#include "tokenizer/tokenizer.h"

#define MAX_TOKENS 600

typedef struct vocab {
    char texts[MAX_TOKENS][24];
    tokenizer_string strings[MAX_TOKENS];
    int32_t types[MAX_TOKENS];
    float scores[MAX_TOKENS];
    int32_t count;
    tokenizer_string merges[16];
    int32_t n_merges;
} vocab;

static int32_t add_token(vocab *v, const char *text, int type, float score)
{
    int32_t id = v->count++;
    snprintf(v->texts[id], sizeof(v->texts[id]), "%s", text);
    v->strings[id] = (tokenizer_string){v->texts[id], strlen(v->texts[id])};
    v->types[id] = type;
    v->scores[id] = score;
    return id;
}

static void add_merge(vocab *v, const char *text)
{
    v->merges[v->n_merges++] = (tokenizer_string){text, strlen(text)};
}

/* ids 0..255 are the byte tokens (id = byte value). */
static void byte_level_vocab(vocab *v)
{
    memset(v, 0, sizeof(*v));
    for (int b = 0; b < 256; b++) {
        char text[4];
        byte_text(b, text);
        add_token(v, text, TOKENIZER_TOKEN_NORMAL, 0);
    }
}

static tokenizer *build(vocab *v, const char *model, const char *pre, bmoe_error *err)
{
    tokenizer_parts parts;
    tokenizer_parts_init(&parts);
    parts.model = model;
    parts.pre = pre;
    parts.n_vocab = v->count;
    parts.tokens = v->strings;
    parts.token_types = v->types;
    parts.scores = v->scores;
    parts.n_merges = v->n_merges;
    parts.merges = v->merges;
    if (strcmp(model, "llama") != 0) /* SentencePiece keeps its defaults: BOS 1, EOS 2 */
        parts.bos_id = parts.eos_id = TOKENIZER_NO_TOKEN;
    return tokenizer_create(&parts, err);
}

static bool encodes(const tokenizer *tok, const char *text, bool parse_special, const int32_t *expected,
                    int32_t count)
{
    int32_t ids[64];
    int32_t n = tokenizer_encode(tok, text, strlen(text), false, parse_special, ids, 64, NULL);
    bool same = n == count && (count == 0 || memcmp(ids, expected, (size_t)count * sizeof(int32_t)) == 0);
    if (!same) {
        fprintf(stderr, "  \"%s\" gave %d tokens:", text, (int)n);
        for (int32_t i = 0; i < n && i < 64; i++)
            fprintf(stderr, " %d", (int)ids[i]);
        fputc('\n', stderr);
    }
    return same;
}

static void test_byte_level_bpe(void)
{
    static vocab v;
    byte_level_vocab(&v);
    int32_t space_t = add_token(&v, "\xC4\xA0t", 1, 0);      /* "Ġt" */
    int32_t he = add_token(&v, "he", 1, 0);
    int32_t space_the = add_token(&v, "\xC4\xA0the", 1, 0);
    int32_t aa = add_token(&v, "aa", 1, 0);
    int32_t bc = add_token(&v, "bc", 1, 0);
    int32_t o_space = add_token(&v, "o\xC4\xA0", 1, 0);      /* "oĠ" */
    int32_t twelve = add_token(&v, "12", 1, 0);
    add_merge(&v, "\xC4\xA0 t");
    add_merge(&v, "h e");
    add_merge(&v, "\xC4\xA0t he");
    add_merge(&v, "a a");
    add_merge(&v, "b c");
    add_merge(&v, "a b");
    add_merge(&v, "o \xC4\xA0");
    add_merge(&v, "1 2");
    bmoe_error err = {0};
    tokenizer *tok = build(&v, "gpt2", "gpt-2", &err);
    CHECK_MSG(tok != NULL, "%s", err.message);
    if (!tok)
        return;
    CHECK(encodes(tok, " the", false, (int32_t[]){space_the}, 1));
    CHECK(encodes(tok, "the", false, (int32_t[]){'t', he}, 2));
    /* Equal ranks: the leftmost pair merges first. */
    CHECK(encodes(tok, "aaa", false, (int32_t[]){aa, 'a'}, 2));
    /* "b c" (rank 4) outranks "a b" (rank 5). */
    CHECK(encodes(tok, "abc", false, (int32_t[]){'a', bc}, 2));
    /* The regex puts " w" in its own piece, so "o " never merges. */
    CHECK(encodes(tok, "o w", false, (int32_t[]){'o', ' ', 'w'}, 3));
    (void)o_space;
    /* GPT-2 keeps digit runs together. */
    CHECK(encodes(tok, "123", false, (int32_t[]){twelve, '3'}, 2));
    /* An invalid byte reaches the BPE as U+FFFD (EF BF BD). */
    CHECK(encodes(tok, "\xFF", false, (int32_t[]){0xEF, 0xBF, 0xBD}, 3));
    CHECK(encodes(tok, "", false, NULL, 0));

    /* Pieces map back through the byte table; clean_spaces (gpt-2) removes
     * the space before '.', qwen2 would not. */
    char text[64];
    int32_t ids[] = {'a', ' ', '.', space_t};
    CHECK(tokenizer_detokenize(tok, ids, 4, false, false, text, sizeof(text), NULL) == 4 &&
          strcmp(text, "a. t") == 0);
    CHECK(tokenizer_token_to_piece(tok, space_the, false, text, sizeof(text)) == 4 &&
          memcmp(text, " the", 4) == 0);
    text[0] = 'x';
    CHECK(tokenizer_token_to_piece(tok, space_the, false, text, 2) == 4 && text[0] == 'x');
    CHECK(tokenizer_token_to_piece(tok, 99999, false, text, sizeof(text)) == -1);
    int32_t bad[] = {1, 100000};
    CHECK(tokenizer_detokenize(tok, bad, 2, false, false, text, sizeof(text), &err) < 0 &&
          strstr(err.message, "100000") != NULL);
    tokenizer_destroy(tok);

    tok = build(&v, "gpt2", "qwen2", &err);
    CHECK_MSG(tok != NULL, "%s", err.message);
    if (tok) {
        /* Qwen2 splits digits one by one. */
        CHECK(encodes(tok, "123", false, (int32_t[]){'1', '2', '3'}, 3));
        CHECK(tokenizer_detokenize(tok, ids, 4, false, false, text, sizeof(text), NULL) == 5 &&
              strcmp(text, "a . t") == 0);
        tokenizer_destroy(tok);
    }
}

static void test_special_partition(void)
{
    static vocab v;
    byte_level_vocab(&v);
    int32_t abc = add_token(&v, "abc", TOKENIZER_TOKEN_CONTROL, 0);
    int32_t xa = add_token(&v, "xa", TOKENIZER_TOKEN_CONTROL, 0);
    int32_t user = add_token(&v, "<u>", TOKENIZER_TOKEN_USER_DEFINED, 0);
    int32_t im_end = add_token(&v, "<|im_end|>", TOKENIZER_TOKEN_CONTROL, 0);
    bmoe_error err = {0};
    tokenizer *tok = build(&v, "gpt2", "qwen2", &err);
    CHECK_MSG(tok != NULL, "%s", err.message);
    if (!tok)
        return;
    /* Longest token first over the whole text: "abc" wins over the earlier "xa". */
    CHECK(encodes(tok, "xabc", true, (int32_t[]){'x', abc}, 2));
    CHECK(encodes(tok, "xabc", false, (int32_t[]){'x', 'a', 'b', 'c'}, 4));
    /* User-defined tokens are matched even without parse_special. */
    CHECK(encodes(tok, "a<u>b", false, (int32_t[]){'a', user, 'b'}, 3));
    CHECK(encodes(tok, "xa<|im_end|>", true, (int32_t[]){xa, im_end}, 2));
    CHECK(tokenizer_is_end_of_generation(tok, im_end));
    CHECK(tokenizer_eot(tok) == im_end);
    /* Control tokens are rendered only on request. */
    char text[32];
    CHECK(tokenizer_token_to_piece(tok, im_end, false, text, sizeof(text)) == 0);
    CHECK(tokenizer_token_to_piece(tok, im_end, true, text, sizeof(text)) == 10);
    CHECK(tokenizer_token_to_piece(tok, user, false, text, sizeof(text)) == 3);
    tokenizer_destroy(tok);
}

static void test_harmony_end_of_generation(void)
{
    static vocab v;
    byte_level_vocab(&v);
    int32_t end = add_token(&v, "<|end|>", TOKENIZER_TOKEN_CONTROL, 0);
    int32_t ret = add_token(&v, "<|return|>", TOKENIZER_TOKEN_CONTROL, 0);
    int32_t call = add_token(&v, "<|call|>", TOKENIZER_TOKEN_CONTROL, 0);
    int32_t start = add_token(&v, "<|start|>", TOKENIZER_TOKEN_CONTROL, 0);
    bmoe_error err = {0};
    tokenizer *tok = build(&v, "gpt2", "gpt-4o", &err);
    CHECK_MSG(tok != NULL, "%s", err.message);
    if (!tok)
        return;
    CHECK(tokenizer_is_end_of_generation(tok, ret));
    CHECK(tokenizer_is_end_of_generation(tok, call));
    CHECK(!tokenizer_is_end_of_generation(tok, end));
    CHECK(!tokenizer_is_end_of_generation(tok, 'a'));
    /* <|start|> and <|end|> become user-defined: matched and rendered always. */
    CHECK(tokenizer_token_type(tok, start) == TOKENIZER_TOKEN_USER_DEFINED);
    CHECK(encodes(tok, "<|start|>x<|end|>", false, (int32_t[]){start, 'x', end}, 3));
    tokenizer_destroy(tok);
}

static void test_sentencepiece(void)
{
    static vocab v;
    memset(&v, 0, sizeof(v));
    add_token(&v, "<unk>", TOKENIZER_TOKEN_UNKNOWN, 0);
    add_token(&v, "<s>", TOKENIZER_TOKEN_CONTROL, 0);
    add_token(&v, "</s>", TOKENIZER_TOKEN_CONTROL, 0);
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof(name), "<0x%02X>", b);
        add_token(&v, name, TOKENIZER_TOKEN_BYTE, 0);
    }
    int32_t space = add_token(&v, "\xE2\x96\x81", 1, -1);
    int32_t a = add_token(&v, "a", 1, -1);
    int32_t b = add_token(&v, "b", 1, -1);
    int32_t space_a = add_token(&v, "\xE2\x96\x81" "a", 1, -2);
    int32_t ab = add_token(&v, "ab", 1, -3);
    bmoe_error err = {0};
    tokenizer *tok = build(&v, "llama", NULL, &err);
    CHECK_MSG(tok != NULL, "%s", err.message);
    if (!tok)
        return;
    /* "▁ab": "▁a" (score -2) beats "ab" (-3). */
    CHECK(encodes(tok, "ab", false, (int32_t[]){space_a, b}, 2));
    /* Byte fallback for a character the vocabulary lacks: é = C3 A9. */
    CHECK(encodes(tok, "\xC3\xA9", false, (int32_t[]){space, 3 + 0xC3, 3 + 0xA9}, 3));
    /* Special tokens restart the space prefix. */
    CHECK(encodes(tok, "a</s>b", true, (int32_t[]){space_a, 2, space, b}, 4));
    int32_t ids[8];
    CHECK(tokenizer_encode(tok, "a", 1, true, false, ids, 8, NULL) == 2 && ids[0] == 1 && ids[1] == space_a);
    char text[32];
    int32_t tokens[] = {space_a, b, 3 + 0xC3, 3 + 0xA9};
    CHECK(tokenizer_detokenize(tok, tokens, 4, false, false, text, sizeof(text), NULL) == 4 &&
          strcmp(text, "ab\xC3\xA9") == 0);
    CHECK(tokenizer_token_to_piece(tok, 3 + 0xC3, false, text, sizeof(text)) == 1 &&
          (unsigned char)text[0] == 0xC3);
    (void)a;
    (void)ab;
    tokenizer_destroy(tok);

    /* Higher-scoring "ab" wins the other way round. */
    v.scores[space_a] = -3;
    v.scores[ab] = -2;
    tok = build(&v, "llama", NULL, &err);
    if (tok) {
        CHECK(encodes(tok, "ab", false, (int32_t[]){space, ab}, 2));
        tokenizer_destroy(tok);
    }
}

static void test_gemma4(void)
{
    static vocab v;
    memset(&v, 0, sizeof(v));
    int32_t bos = add_token(&v, "<bos>", TOKENIZER_TOKEN_CONTROL, 0);
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof(name), "<0x%02X>", b);
        add_token(&v, name, TOKENIZER_TOKEN_BYTE, 0);
    }
    int32_t space = add_token(&v, "\xE2\x96\x81", 1, 0);
    int32_t a = add_token(&v, "a", 1, 0);
    int32_t space_a = add_token(&v, "\xE2\x96\x81" "a", 1, 0);
    int32_t newline = add_token(&v, "\n", 1, 0);
    int32_t two_newlines = add_token(&v, "\n\n", 1, 0);
    add_merge(&v, "\xE2\x96\x81 a");
    tokenizer_parts parts;
    tokenizer_parts_init(&parts);
    parts.model = "gemma4";
    parts.n_vocab = v.count;
    parts.tokens = v.strings;
    parts.token_types = v.types;
    parts.n_merges = v.n_merges;
    parts.merges = v.merges;
    parts.bos_id = bos;
    parts.add_bos = 0; /* gemma4 adds BOS whatever the key says */
    bmoe_error err = {0};
    tokenizer *tok = tokenizer_create(&parts, &err);
    CHECK_MSG(tok != NULL, "%s", err.message);
    if (!tok)
        return;
    /* "a a\n\nb": pieces "a▁a", "\n\n" (a token itself), "b" (byte fallback). */
    int32_t ids[16];
    int32_t n = tokenizer_encode(tok, "a a\n\nb", 6, true, false, ids, 16, NULL);
    int32_t expected[] = {bos, a, space_a, two_newlines, 1 + 'b'};
    CHECK(n == 5 && memcmp(ids, expected, sizeof(expected)) == 0);
    CHECK(encodes(tok, " ", false, (int32_t[]){space}, 1));
    CHECK(encodes(tok, "\n", false, (int32_t[]){newline}, 1));
    char text[32];
    CHECK(tokenizer_detokenize(tok, ids, n, true, false, text, sizeof(text), NULL) == 6 &&
          strcmp(text, "a a\n\nb") == 0);
    tokenizer_destroy(tok);
}

static void test_errors(void)
{
    static vocab v;
    byte_level_vocab(&v);
    bmoe_error err = {0};
    CHECK(build(&v, "bert", NULL, &err) == NULL && strstr(err.message, "'bert'") != NULL);
    CHECK(build(&v, "gpt2", "no-such-pre", &err) == NULL && strstr(err.message, "no-such-pre") != NULL);
    add_merge(&v, "abc");
    CHECK(build(&v, "gpt2", "qwen2", &err) == NULL && strstr(err.message, "merge 0") != NULL);
    v.n_merges = 0;
    v.types[5] = 9;
    CHECK(build(&v, "gpt2", "qwen2", &err) == NULL && strstr(err.message, "token 5") != NULL);
    tokenizer_parts parts;
    tokenizer_parts_init(&parts);
    CHECK(tokenizer_create(&parts, &err) == NULL && err.message[0] != '\0');
}

static void test_utf8_tail(void)
{
    CHECK(tokenizer_utf8_incomplete_tail("a\xE2\x96", 3) == 2);
    CHECK(tokenizer_utf8_incomplete_tail("a\xE2\x96\x81", 4) == 0);
    CHECK(tokenizer_utf8_incomplete_tail("\xF0", 1) == 1);
    CHECK(tokenizer_utf8_incomplete_tail("\xF0\x9F\x98", 3) == 3);
    CHECK(tokenizer_utf8_incomplete_tail("abc", 3) == 0);
    CHECK(tokenizer_utf8_incomplete_tail("", 0) == 0);
}

/* Random bytes and long runs: every model returns tokens (no error, no
 * hang); byte-level pieces of valid text and SentencePiece pieces of any
 * bytes give the input back. */
static void test_arbitrary_input(void)
{
    static vocab v;
    byte_level_vocab(&v);
    add_token(&v, "<|im_end|>", TOKENIZER_TOKEN_CONTROL, 0);
    enum { SIZE = 20000 };
    static char text[SIZE];
    static int32_t ids[SIZE * 3 + 8];
    static char back[SIZE * 4];
    uint32_t state = 12345;
    for (int i = 0; i < SIZE; i++) {
        state = state * 1664525u + 1013904223u;
        text[i] = (char)(state >> 24);
    }
    static const char *const pres[] = {"qwen2", "gpt-4o", "qwen35", "llama3", "deepseek-llm", "deepseek-v3", "default", "gpt-2"};
    for (size_t p = 0; p < sizeof(pres) / sizeof(pres[0]); p++) {
        bmoe_error err = {0};
        tokenizer *tok = build(&v, "gpt2", pres[p], &err);
        CHECK_MSG(tok != NULL, "%s: %s", pres[p], err.message);
        if (!tok)
            continue;
        int32_t n = tokenizer_encode(tok, text, SIZE, false, true, ids, SIZE * 3 + 8, &err);
        CHECK_MSG(n >= SIZE, "%s on random bytes: %d (%s)", pres[p], (int)n, err.message);
        /* 20000 spaces then a letter: one linear pass, and it spells back. */
        memset(back, ' ', SIZE);
        back[SIZE - 1] = 'x';
        n = tokenizer_encode(tok, back, SIZE, false, false, ids, SIZE * 3 + 8, &err);
        CHECK_MSG(n == SIZE, "%s on spaces: %d", pres[p], (int)n);
        tokenizer_destroy(tok);
    }

    static vocab spm;
    memset(&spm, 0, sizeof(spm));
    add_token(&spm, "<unk>", TOKENIZER_TOKEN_UNKNOWN, 0);
    add_token(&spm, "<s>", TOKENIZER_TOKEN_CONTROL, 0);
    add_token(&spm, "</s>", TOKENIZER_TOKEN_CONTROL, 0);
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof(name), "<0x%02X>", b);
        add_token(&spm, name, TOKENIZER_TOKEN_BYTE, 0);
    }
    add_token(&spm, "\xE2\x96\x81", 1, -1);
    add_token(&spm, "\xE2\x96\x81\xE2\x96\x81", 1, -1);
    bmoe_error err = {0};
    tokenizer *tok = build(&spm, "llama", NULL, &err);
    CHECK_MSG(tok != NULL, "%s", err.message);
    if (tok) {
        int32_t n = tokenizer_encode(tok, text, SIZE, false, false, ids, SIZE * 3 + 8, &err);
        CHECK(n >= SIZE);
        int32_t length = tokenizer_detokenize(tok, ids, n, false, false, back, sizeof(back), &err);
        size_t first = 0;
        while (first < SIZE && back[first] == text[first])
            first++;
        CHECK_MSG(length == SIZE && first == SIZE, "SentencePiece random bytes: length %d, first difference at %zu",
                  (int)length, first);
        tokenizer_destroy(tok);
    }
}

int main(void)
{
    test_arbitrary_input();
    test_byte_level_bpe();
    test_special_partition();
    test_harmony_end_of_generation();
    test_sentencepiece();
    test_gemma4();
    test_errors();
    test_utf8_tail();
    return test_finish();
}
