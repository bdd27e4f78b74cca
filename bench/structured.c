/* bench-structured [VOCAB.tiktoken] [--repeat N]: the time of one
 * json_matcher_allowed call (the structured-output mask over the whole
 * vocabulary; gbnf_matcher_allowed for a GBNF grammar of JSON) at each
 * token of JSON documents fed token by token, by where
 * the token starts: inside a string value, inside a key, inside a number,
 * between tokens of the JSON grammar. The vocabulary is o200k's (about
 * 200,000 tokens; from $BMOE_SHARED_DIR or ../shared when no path is
 * given), or, when that file cannot be read, 150,000 made-up pieces: words
 * with and without a leading space, digits, punctuation and JSON pieces.
 * The documents are split greedily into the vocabulary's longest pieces.
 *
 * A benchmark, not a test. Prints the vocabulary, then one line per
 * document and place: calls, mean and worst milliseconds per call, mean
 * tokens allowed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "structured/gbnf.h"
#include "structured/json_grammar.h"

#define LONGEST_MATCH 32

typedef struct vocabulary {
    char **pieces;
    size_t *lengths;
    int32_t count;
    uint32_t *table; /* open addressing: token + 1, 0 empty */
    uint32_t table_size;
} vocabulary;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static uint32_t hash_bytes(const char *bytes, size_t length)
{
    uint32_t hash = 2166136261u;
    for (size_t i = 0; i < length; i++)
        hash = (hash ^ (uint8_t)bytes[i]) * 16777619u;
    return hash;
}

static void vocabulary_add(vocabulary *v, const char *bytes, size_t length)
{
    v->pieces[v->count] = malloc(length + 1);
    memcpy(v->pieces[v->count], bytes, length);
    v->pieces[v->count][length] = '\0';
    v->lengths[v->count] = length;
    v->count++;
}

static int base64_value(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

static size_t base64_decode(const char *text, size_t length, char *out)
{
    size_t used = 0;
    uint32_t bits = 0;
    int held = 0;
    for (size_t i = 0; i < length; i++) {
        int value = base64_value(text[i]);
        if (value < 0)
            break;
        bits = bits << 6 | (uint32_t)value;
        held += 6;
        if (held >= 8) {
            held -= 8;
            out[used++] = (char)(bits >> held & 0xff);
        }
    }
    return used;
}

/* o200k_base.tiktoken: one "BASE64 RANK" line per token. */
static bool load_tiktoken(vocabulary *v, const char *path)
{
    FILE *file = fopen(path, "r");
    if (!file)
        return false;
    char line[1024], bytes[1024];
    while (fgets(line, sizeof line, file) && v->count < 400000) {
        char *space = strchr(line, ' ');
        if (!space)
            continue;
        vocabulary_add(v, bytes, base64_decode(line, (size_t)(space - line), bytes));
    }
    fclose(file);
    return v->count > 0;
}

/* Words made of syllables, with and without a leading space, numbers, punctuation and JSON pieces. */
static void make_vocabulary(vocabulary *v, int32_t target)
{
    static const char *const syllables[] = {"ing", "the", "an", "re", "er", "on", "at", "en", "es", "or", "ti",
                                            "al", "ar", "st", "nd", "to", "it", "is", "ou", "ed", "ha", "ma",
                                            "co", "de", "pro", "con", "ver", "sion", "ment", "ly"};
    static const char *const json[] = {"{", "}", "[", "]", "\"", "\":", "\": ", "{\"", "\"}", "\"},", "\",", ", \"",
                                       ",\"", "\":\"", "\": \"", "\"]", "[\"", "},{", "null", "true", "false", ":",
                                       ",", "\n", "\n  ", "\n    ", " ", "  ", "\\n", "\\\"", "\\u00", "\xc3",
                                       "\xa9", "\xe2\x82", "\xac", "\xc3\xa9", "\xe2\x82\xac"};
    for (size_t i = 0; i < sizeof json / sizeof json[0]; i++)
        vocabulary_add(v, json[i], strlen(json[i]));
    char word[64];
    for (int n = 0; n < 1000; n++) {
        int length = snprintf(word, sizeof word, "%d", n);
        vocabulary_add(v, word, (size_t)length);
    }
    for (int c = 0x21; c < 0x7f; c++) {
        word[0] = (char)c;
        vocabulary_add(v, word, 1);
    }
    uint32_t state = 12345;
    int syllable_count = (int)(sizeof syllables / sizeof syllables[0]);
    while (v->count < target) {
        size_t length = 0;
        state = state * 1103515245u + 12345u;
        if (state >> 16 & 1)
            word[length++] = ' ';
        int parts = 1 + (int)(state >> 20) % 4;
        for (int p = 0; p < parts; p++) {
            state = state * 1103515245u + 12345u;
            const char *s = syllables[(state >> 16) % (uint32_t)syllable_count];
            memcpy(word + length, s, strlen(s));
            length += strlen(s);
        }
        if ((state >> 24 & 7) == 0)
            word[length++] = (char)('A' + (state >> 8) % 26);
        vocabulary_add(v, word, length);
    }
}

static void index_vocabulary(vocabulary *v)
{
    v->table_size = 1;
    while (v->table_size < (uint32_t)v->count * 2)
        v->table_size *= 2;
    v->table = calloc(v->table_size, sizeof *v->table);
    for (int32_t i = 0; i < v->count; i++) {
        if (v->lengths[i] == 0 || v->lengths[i] > LONGEST_MATCH)
            continue;
        uint32_t slot = hash_bytes(v->pieces[i], v->lengths[i]) & (v->table_size - 1);
        while (v->table[slot])
            slot = (slot + 1) & (v->table_size - 1);
        v->table[slot] = (uint32_t)i + 1;
    }
}

static int32_t lookup(const vocabulary *v, const char *bytes, size_t length)
{
    uint32_t slot = hash_bytes(bytes, length) & (v->table_size - 1);
    while (v->table[slot]) {
        int32_t token = (int32_t)v->table[slot] - 1;
        if (v->lengths[token] == length && memcmp(v->pieces[token], bytes, length) == 0)
            return token;
        slot = (slot + 1) & (v->table_size - 1);
    }
    return -1;
}

enum place { PLACE_STRING, PLACE_KEY, PLACE_NUMBER, PLACE_BETWEEN, PLACES };
static const char *const place_names[PLACES] = {"in a string", "in a key", "in a number", "between tokens"};

/* Where each byte of a JSON text is: a tiny lexer that knows keys from values by the container. */
static void classify(const char *text, size_t length, uint8_t *places)
{
    char containers[64];
    bool expect_key[64];
    int depth = 0;
    bool in_string = false, escape = false, key = false, in_number = false;
    for (size_t i = 0; i < length; i++) {
        char c = text[i];
        if (in_string) {
            places[i] = key ? PLACE_KEY : PLACE_STRING;
            if (escape)
                escape = false;
            else if (c == '\\')
                escape = true;
            else if (c == '"')
                in_string = false;
            continue;
        }
        /* The place of a byte is the state before it: a number's first byte starts it from between. */
        if ((c >= '0' && c <= '9') || c == '-' || (in_number && strchr(".eE+", c))) {
            places[i] = in_number ? PLACE_NUMBER : PLACE_BETWEEN;
            in_number = true;
            continue;
        }
        in_number = false;
        places[i] = PLACE_BETWEEN;
        if (c == '"') {
            in_string = true;
            key = depth > 0 && containers[depth - 1] == '{' && expect_key[depth - 1];
        } else if ((c == '{' || c == '[') && depth < 64) {
            containers[depth] = c;
            expect_key[depth++] = c == '{';
        } else if (c == '}' || c == ']') {
            depth--;
        } else if (c == ':' && depth > 0) {
            expect_key[depth - 1] = false;
        } else if (c == ',' && depth > 0) {
            expect_key[depth - 1] = containers[depth - 1] == '{';
        }
    }
}

/* A matcher of either kind: a JSON schema's (gbnf NULL) or a GBNF grammar's. */
typedef struct any_matcher {
    json_grammar *json;
    json_matcher *json_matcher;
    gbnf_grammar *gbnf;
    gbnf_matcher *gbnf_matcher;
} any_matcher;

static bool matcher_make(any_matcher *m, bool gbnf, const char *text, bmoe_error *err)
{
    memset(m, 0, sizeof *m);
    if (gbnf) {
        m->gbnf = gbnf_grammar_create(text, strlen(text), err);
        m->gbnf_matcher = m->gbnf ? gbnf_matcher_create(m->gbnf, err) : NULL;
        return m->gbnf_matcher != NULL;
    }
    m->json = json_grammar_create(text, text ? strlen(text) : 0, err);
    m->json_matcher = m->json ? json_matcher_create(m->json, err) : NULL;
    return m->json_matcher != NULL;
}

static void matcher_release(any_matcher *m)
{
    json_matcher_free(m->json_matcher);
    json_grammar_free(m->json);
    gbnf_matcher_free(m->gbnf_matcher);
    gbnf_grammar_free(m->gbnf);
}

/* Runs one document: returns false if a token of it was not allowed (a bug). */
static bool run_document(const vocabulary *v, const json_vocab *vocab, const char *name, bool gbnf,
                         const char *grammar_text, const char *text, int repeat)
{
    bmoe_error err = {0};
    any_matcher m;
    if (!matcher_make(&m, gbnf, grammar_text, &err)) {
        fprintf(stderr, "%s: %s\n", name, err.message);
        matcher_release(&m);
        return false;
    }
    uint8_t *allowed = malloc((size_t)v->count);
    size_t length = strlen(text);
    uint8_t *places = malloc(length);
    classify(text, length, places);
    double total[PLACES] = {0}, worst[PLACES] = {0};
    double allowed_total[PLACES] = {0};
    int calls[PLACES] = {0};
    bool ok = true;
    for (int r = 0; r < repeat && ok; r++) {
        if (gbnf)
            gbnf_matcher_reset(m.gbnf_matcher);
        else
            json_matcher_reset(m.json_matcher);
        size_t at = 0;
        while (at < length && ok) {
            int32_t token = -1;
            size_t take = length - at < LONGEST_MATCH ? length - at : LONGEST_MATCH;
            for (; take > 0 && token < 0; take--)
                token = lookup(v, text + at, take);
            take++;
            double start = now_ms();
            int32_t count = gbnf ? gbnf_matcher_allowed(m.gbnf_matcher, vocab, allowed)
                                 : json_matcher_allowed(m.json_matcher, vocab, allowed);
            double spent = now_ms() - start;
            enum place place = places[at];
            total[place] += spent;
            worst[place] = spent > worst[place] ? spent : worst[place];
            allowed_total[place] += count;
            calls[place]++;
            bool fed = gbnf ? gbnf_matcher_feed(m.gbnf_matcher, text + at, take)
                            : json_matcher_feed(m.json_matcher, text + at, take);
            if (token < 0 || !allowed[token] || !fed) {
                fprintf(stderr, "%s: the piece at byte %zu was not allowed\n", name, at);
                ok = false;
            }
            at += take;
        }
        if (ok && !(gbnf ? gbnf_matcher_complete(m.gbnf_matcher) : json_matcher_complete(m.json_matcher))) {
            fprintf(stderr, "%s: incomplete\n", name);
            ok = false;
        }
    }
    double all = 0;
    int all_calls = 0;
    for (int p = 0; p < PLACES; p++) {
        if (!calls[p])
            continue;
        printf("%-12s %-15s %6d calls  mean %7.3f ms  worst %7.3f ms  mean allowed %9.0f\n", name, place_names[p],
               calls[p], total[p] / calls[p], worst[p], allowed_total[p] / calls[p]);
        all += total[p];
        all_calls += calls[p];
    }
    if (all_calls)
        printf("%-12s %-15s %6d calls  mean %7.3f ms\n", name, "all", all_calls, all / all_calls);
    free(places);
    free(allowed);
    matcher_release(&m);
    return ok;
}

int main(int argc, char **argv)
{
    const char *path = NULL;
    int repeat = 5;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc)
            repeat = atoi(argv[++i]);
        else
            path = argv[i];
    }
    char default_path[1024];
    if (!path) {
        const char *shared = getenv("BMOE_SHARED_DIR");
        snprintf(default_path, sizeof default_path, "%s/data/tokenizers/o200k/o200k_base.tiktoken",
                 shared && *shared ? shared : "../shared");
        path = default_path;
    }
    vocabulary v = {0};
    v.pieces = calloc(400000, sizeof *v.pieces);
    v.lengths = calloc(400000, sizeof *v.lengths);
    const char *source = path;
    if (!load_tiktoken(&v, path)) {
        make_vocabulary(&v, 150000);
        source = "made-up pieces";
    }
    index_vocabulary(&v);
    double start = now_ms();
    bmoe_error err = {0};
    json_vocab *vocab = json_vocab_create((const char *const *)v.pieces, v.lengths, v.count, &err);
    if (!vocab) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    printf("vocabulary: %d tokens (%s), indexed in %.1f ms\n", v.count, source, now_ms() - start);

    static const char object_text[] =
        "{\"title\": \"The quick brown fox jumps over the lazy dog, then writes a long description of itself\","
        "\n  \"year\": 2024, \"rating\": 4.75, \"tags\": [\"animal\", \"story\", \"caf\xc3\xa9\"],"
        "\n  \"author\": {\"name\": \"Jane Doe\", \"email\": \"jane@example.com\", \"id\": 1234567},"
        "\n  \"summary\": \"A fox, a dog and a matcher walk into a bar; the bartender says \\\"no JSON here\\\".\"}";
    static const char schema[] =
        "{\"type\":\"object\",\"properties\":{\"title\":{\"type\":\"string\"},\"year\":{\"type\":\"integer\"},"
        "\"rating\":{\"type\":\"number\"},\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"maxItems\":5},"
        "\"author\":{\"$ref\":\"#/$defs/Author\"},\"summary\":{\"type\":\"string\",\"maxLength\":200}},"
        "\"required\":[\"title\",\"year\",\"author\"],"
        "\"$defs\":{\"Author\":{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
        "\"email\":{\"type\":\"string\"},\"id\":{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"null\"}]}},"
        "\"required\":[\"name\"]}}}";
    /* JSON as a GBNF grammar: what a llama.cpp user would hand --grammar-file */
    static const char json_gbnf[] =
        "root ::= object\n"
        "value ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
        "object ::= \"{\" ws (string \":\" ws value (\",\" ws string \":\" ws value)*)? \"}\" ws\n"
        "array ::= \"[\" ws (value (\",\" ws value)*)? \"]\" ws\n"
        "string ::= \"\\\"\" ([^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}))* \"\\\"\" ws\n"
        "number ::= \"-\"? (\"0\" | [1-9] [0-9]{0,15}) (\".\" [0-9]{1,15})? ([eE] [-+]? [0-9]{1,3})? ws\n"
        "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n";
    bool ok = run_document(&v, vocab, "json_object", false, NULL, object_text, repeat);
    ok = run_document(&v, vocab, "json_schema", false, schema, object_text, repeat) && ok;
    ok = run_document(&v, vocab, "gbnf_json", true, json_gbnf, object_text, repeat) && ok;

    json_vocab_free(vocab);
    for (int32_t i = 0; i < v.count; i++)
        free(v.pieces[i]);
    free(v.pieces);
    free(v.lengths);
    free(v.table);
    return ok ? 0 : 1;
}
