/* The real Qwen3, gpt-oss (o200k_harmony) and Gemma 3 tokenizers, loaded from
 * their Hugging Face tokenizer.json: the generated reference encodings
 * (multi.inp), llama.cpp's qwen2 and gemma-4 vectors, the o200k test plans,
 * corpus round trips and the encode speed on 1 MB of text. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hf_tokenizer.h"
#include "test.h"
#include "vector_files.h"

/* Timing only means something without sanitizers. */
#if defined(__SANITIZE_ADDRESS__)
#define TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_SANITIZED 1
#endif
#endif

static tokenizer *load(const char *relative, const char *model, const char *pre, const char *bos,
                       const char *eos)
{
    char path[1024];
    bmoe_error err = {0};
    tokenizer *tok = hf_tokenizer_load(test_shared_path(path, sizeof(path), relative), model, pre, bos,
                                       eos, &err);
    CHECK_MSG(tok != NULL, "%s: %s", relative, err.message);
    return tok;
}

static void run_vectors(const tokenizer *tok, const char *inp_relative, const char *out_relative,
                        const char *name)
{
    char inp[1024], out[1024];
    test_shared_path(inp, sizeof(inp), inp_relative);
    test_shared_path(out, sizeof(out), out_relative);
    vector_set set;
    CHECK(vector_set_load(&set, inp, out) == 0);
    CHECK(set.count > 40);
    size_t passed = vector_run(tok, &set, name, false);
    CHECK_MSG(passed == set.count, "%s: %zu of %zu vectors pass", name, passed, set.count);
    vector_set_free(&set);
}

/* gpt-tokenizer's TestPlans.txt: "EncodingName: X\nSample: TEXT\nEncoded: [ids]". */
static void run_test_plans(const tokenizer *tok, const char *encoding)
{
    char path[1024];
    char *text = vector_read_file(
        test_shared_path(path, sizeof(path), "data/tokenizers/o200k/gpt-tokenizer-TestPlans.txt"), NULL);
    CHECK(text != NULL);
    if (!text)
        return;
    char header[64];
    snprintf(header, sizeof(header), "EncodingName: %s\nSample: ", encoding);
    size_t total = 0, passed = 0;
    for (char *at = strstr(text, header); at; at = strstr(at, header)) {
        char *sample = at + strlen(header);
        char *encoded = strstr(sample, "\nEncoded: [");
        if (!encoded)
            break;
        size_t sample_length = (size_t)(encoded - sample);
        int32_t expected[4096], n_expected = 0;
        char *cursor = encoded + strlen("\nEncoded: [");
        while (*cursor && *cursor != ']' && n_expected < 4096) {
            char *end;
            long value = strtol(cursor, &end, 10);
            if (end == cursor)
                break;
            expected[n_expected++] = (int32_t)value;
            cursor = end;
            while (*cursor == ',' || *cursor == ' ')
                cursor++;
        }
        int32_t ids[4096];
        int32_t n = tokenizer_encode(tok, sample, sample_length, false, false, ids, 4096, NULL);
        total++;
        if (n == n_expected && memcmp(ids, expected, (size_t)n * sizeof(int32_t)) == 0)
            passed++;
        else
            fprintf(stderr, "test plan %s sample \"%.*s\" differs\n", encoding,
                    (int)(sample_length > 60 ? 60 : sample_length), sample);
        at = cursor;
    }
    printf("%s test plans: %zu/%zu pass\n", encoding, passed, total);
    CHECK(total == 57);
    CHECK(passed == total);
    free(text);
}

/* detokenize(encode(x)) == x over a corpus sample (exact_detokenize), and
 * the concatenated pieces == x in every case (the time is printed). */
static void round_trip(const tokenizer *tok, const char *name, const char *corpus_relative,
                       size_t sample, bool exact_detokenize)
{
    char path[1024];
    size_t length = 0;
    char *corpus = vector_read_file(test_shared_path(path, sizeof(path), corpus_relative), &length);
    CHECK(corpus != NULL);
    if (!corpus)
        return;
    if (sample > length)
        sample = length;
    int32_t capacity = (int32_t)sample + 16;
    int32_t *ids = malloc((size_t)capacity * sizeof(int32_t));
    char *back = malloc(sample * 4 + 64);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int32_t n = tokenizer_encode(tok, corpus, sample, false, false, ids, capacity, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    CHECK(n > 0 && n < capacity);
    /* reported, not asserted: speed belongs in benchmarks, and a loaded
     * machine made a one-second bound fail */
    printf("%s: %zu bytes of %s -> %d tokens in %.3f s\n", name, sample, corpus_relative, (int)n, seconds);
    size_t used = 0, bad_pieces = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t piece = tokenizer_token_to_piece(tok, ids[i], false, back + used, (int32_t)(sample * 4 - used));
        if (piece < 0)
            bad_pieces++;
        else
            used += (size_t)piece;
    }
    CHECK(bad_pieces == 0);
    CHECK_MSG(used == sample && memcmp(back, corpus, sample) == 0, "%s: pieces do not give %s back", name,
              corpus_relative);
    if (exact_detokenize) {
        int32_t text_length = tokenizer_detokenize(tok, ids, n, false, false, back, (int32_t)(sample * 4 + 64), NULL);
        CHECK_MSG(text_length == (int32_t)sample && memcmp(back, corpus, sample) == 0,
                  "%s: detokenize does not give %s back", name, corpus_relative);
    }
    free(ids);
    free(back);
    free(corpus);
}

int main(void)
{
    tokenizer *tok = load("data/tokenizers/qwen3/tokenizer.json.gz", "gpt2", "qwen2", NULL, "<|im_end|>");
    if (tok) {
        CHECK(tokenizer_n_vocab(tok) == 151669);
        run_vectors(tok, "data/tokenizers/reference-encodings/multi.inp",
                    "data/tokenizers/reference-encodings/multi.qwen3.out", "qwen3 multi");
        run_vectors(tok, "data/llama-vocab-tests/ggml-vocab-qwen2.gguf.inp",
                    "data/llama-vocab-tests/ggml-vocab-qwen2.gguf.out", "qwen2 (qwen3 tokenizer)");
        round_trip(tok, "qwen3", "data/corpus/tinyshakespeare.txt", 1 << 20, true);
        round_trip(tok, "qwen3", "data/corpus/wikitext-2-raw-v1-test.hf-joined.crlf.txt", 300000, true);
        CHECK(tokenizer_is_end_of_generation(tok, 151645)); /* <|im_end|> */
        CHECK(tokenizer_is_end_of_generation(tok, 151643)); /* <|endoftext|> */
        CHECK(!tokenizer_is_end_of_generation(tok, 151644)); /* <|im_start|> */
        tokenizer_destroy(tok);
    }
    /* No Qwen3.5 tokenizer file exists in ../shared; its vocabulary agrees
     * with Qwen3's on all 50 of llama.cpp's Qwen3.5 vectors, so these test
     * the qwen35 pre-tokenizer on real expectations. */
    tok = load("data/tokenizers/qwen3/tokenizer.json.gz", "gpt2", "qwen35", NULL, "<|im_end|>");
    if (tok) {
        run_vectors(tok, "data/llama-vocab-tests/ggml-vocab-qwen35.gguf.inp",
                    "data/llama-vocab-tests/ggml-vocab-qwen35.gguf.out", "qwen35 (qwen3 vocabulary)");
        tokenizer_destroy(tok);
    }
    tok = load("data/tokenizers/gpt-oss/tokenizer.json.gz", "gpt2", "gpt-4o", "<|startoftext|>", "<|return|>");
    if (tok) {
        run_vectors(tok, "data/tokenizers/reference-encodings/multi.inp",
                    "data/tokenizers/reference-encodings/multi.gpt-oss.out", "gpt-oss multi");
        run_test_plans(tok, "o200k_base");
        round_trip(tok, "gpt-oss", "data/corpus/tinyshakespeare.txt", 1 << 20, true);
        round_trip(tok, "gpt-oss", "data/corpus/wikitext-2-raw-v1-test.hf-joined.crlf.txt", 300000, true);
        CHECK(tokenizer_is_end_of_generation(tok, 200002));  /* <|return|> */
        CHECK(tokenizer_is_end_of_generation(tok, 200012));  /* <|call|> */
        CHECK(!tokenizer_is_end_of_generation(tok, 200007)); /* <|end|> */
        tokenizer_destroy(tok);
    }
    tok = load("data/tokenizers/gemma3/tokenizer.json.gz", "gemma4", NULL, "<bos>", "<eos>");
    if (tok) {
        CHECK(tokenizer_n_vocab(tok) == 262145);
        run_vectors(tok, "data/tokenizers/reference-encodings/multi.inp",
                    "data/tokenizers/reference-encodings/multi.gemma3.out", "gemma3 multi");
        run_vectors(tok, "data/llama-vocab-tests/ggml-vocab-gemma-4.gguf.inp",
                    "data/llama-vocab-tests/ggml-vocab-gemma-4.gguf.out", "gemma-4 (gemma3 tokenizer)");
        /* clean_spaces rewrites " ." on detokenize, so only the pieces must
         * give the text back. */
        round_trip(tok, "gemma3", "data/corpus/tinyshakespeare.txt", 1 << 20, false);
        round_trip(tok, "gemma3", "data/corpus/wikitext-2-raw-v1-test.hf-joined.crlf.txt", 300000, false);
        int32_t ids[8];
        CHECK(tokenizer_encode(tok, "Hello world", 11, true, false, ids, 8, NULL) == 3 && ids[0] == 2 &&
              ids[1] == 9259 && ids[2] == 1902);
        CHECK(tokenizer_is_end_of_generation(tok, 1));   /* <eos> */
        CHECK(tokenizer_is_end_of_generation(tok, 106)); /* <end_of_turn> */
        tokenizer_destroy(tok);
    }
    return test_finish();
}
