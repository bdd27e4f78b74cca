/* bmoe-cli generation on stories260K (a real trained model, llama arch):
 * greedy text must equal llama.cpp's and llama2.c's outputs byte for byte,
 * the f16 and f32 KV caches must give the same greedy text, seeded sampling
 * must repeat for a seed, the summary must reach stderr and the end-of-run
 * lines stdout, after the text. */
#include "cli_run.h"

static char model_path[1024];

static char *read_expected(const char *relative, size_t *length)
{
    char path[1024];
    test_shared_path(path, sizeof path, relative);
    char *text = cli_read_all(path, length);
    CHECK_MSG(text != NULL, "cannot read %s", path);
    return text;
}

/* Runs a generation that must succeed; returns its stdout (caller frees). */
static char *generate(const char *const *args, size_t *length)
{
    cli_result result;
    *length = 0;
    if (cli_run(args, &result) != 0) {
        CHECK_MSG(0, "bmoe-cli did not run");
        return NULL;
    }
    CHECK_MSG(result.exit_code == 0, "exit %d, signal %d, stderr: %s", result.exit_code, result.signal,
              result.err);
    CHECK_MSG(strstr(result.err, "prefill:") && strstr(result.err, "decode:") &&
                  strstr(result.err, "tok/s") && strstr(result.err, "peak RSS:") &&
                  strstr(result.err, "load:"),
              "summary missing from stderr: %s", result.err);
    CHECK_MSG(cli_cut_report(&result), "no end-of-run lines on stdout: %s", result.out);
    char *out = result.out;
    *length = result.out_length;
    result.out = NULL;
    cli_result_free(&result);
    return out;
}

static void show_difference(const char *what, const char *got, size_t got_length, const char *want,
                            size_t want_length)
{
    size_t i = 0;
    while (i < got_length && i < want_length && got[i] == want[i])
        i++;
    fprintf(stderr, "%s: first difference at byte %zu (got %zu bytes, want %zu)\n  got:  %.80s\n  want: %.80s\n",
            what, i, got_length, want_length, got + (i > 20 ? i - 20 : 0), want + (i > 20 ? i - 20 : 0));
}

static void check_same(const char *what, const char *got, size_t got_length, const char *want,
                       size_t want_length)
{
    bool same = got && want && got_length == want_length && memcmp(got, want, got_length) == 0;
    CHECK_MSG(same, "%s differs", what);
    if (!same && got && want)
        show_difference(what, got, got_length, want, want_length);
}

/* llama-simple prints the prompt's pieces (BOS as "<s>") then the generated
 * ones, and a final newline; the CLI prints the same. */
static void test_once_upon_a_time(void)
{
    size_t want_length, f16_length, f32_length;
    char *want = read_expected("data/models/stories260K/expected_llamacpp_once_upon_a_time_n196.txt",
                               &want_length);
    const char *f16_args[] = {"-m", model_path, "-p", "Once upon a time", "-n", "196", "-c", "256",
                              "-t", "2", NULL};
    char *f16 = generate(f16_args, &f16_length);
    check_same("greedy n196 (f16 KV) vs llama.cpp", f16, f16_length, want, want_length);
    const char *f32_args[] = {"-m", model_path, "-p", "Once upon a time", "-n", "196", "-c", "256",
                              "--kv-type", "f32", "-t", "1", NULL};
    char *f32 = generate(f32_args, &f32_length);
    check_same("greedy n196 (f32 KV) vs llama.cpp", f32, f32_length, want, want_length);
    check_same("greedy n196 f16 vs f32 KV", f16, f16_length, f32, f32_length);
    free(want);
    free(f16);
    free(f32);
}

/* llama2.c's run.c prints neither BOS nor the space that starts the first
 * piece; drop "<s>" and that space from the CLI's output to compare. */
static void check_against_runc(const char *expected, const char *const *args)
{
    size_t want_length, got_length;
    char *want = read_expected(expected, &want_length);
    char *got = generate(args, &got_length);
    const char *prefix = "<s> ";
    bool has_prefix = got && got_length >= 4 && memcmp(got, prefix, 4) == 0;
    CHECK_MSG(has_prefix, "%s: output does not start with '<s> ': %.40s", expected, got ? got : "");
    if (has_prefix)
        check_same(expected, got + 4, got_length - 4, want, want_length);
    free(want);
    free(got);
}

static void test_runc_outputs(void)
{
    /* no prompt: BOS only, 256 generated tokens */
    const char *noprompt[] = {"-m", model_path, "-p", "", "-n", "256", "-c", "512", NULL};
    check_against_runc("data/models/stories260K/expected_greedy_noprompt_n256.txt", noprompt);
    /* 15 prompt tokens, 64 steps in all: 50 generated */
    const char *shoggoth[] = {"-m", model_path, "-p", "One day, Lily met a Shoggoth", "-n", "50", NULL};
    check_against_runc("data/models/stories260K/expected_greedy_shoggoth_n64.txt", shoggoth);
}

static void test_sampling(void)
{
    size_t a_length, b_length, c_length;
    const char *seed_a[] = {"-m", model_path, "-p", "Once upon a time", "-n", "60", "--temp", "1.0",
                            "--top-k", "0", "--top-p", "1", "--min-p", "0", "--seed", "42", NULL};
    const char *seed_b[] = {"-m", model_path, "-p", "Once upon a time", "-n", "60", "--temp", "1.0",
                            "--top-k", "0", "--top-p", "1", "--min-p", "0", "--seed", "7", NULL};
    char *a = generate(seed_a, &a_length);
    char *b = generate(seed_a, &b_length);
    char *c = generate(seed_b, &c_length);
    check_same("same seed, same text", a, a_length, b, b_length);
    CHECK_MSG(a && c && (a_length != c_length || memcmp(a, c, a_length) != 0),
              "seeds 42 and 7 gave the same 60 sampled tokens");
    free(a);
    free(b);
    free(c);

    /* -n 0: the prompt is echoed, nothing generated */
    size_t length;
    const char *none[] = {"-m", model_path, "-p", "Once upon a time", "-n", "0", NULL};
    char *echo = generate(none, &length);
    const char *want = "<s> Once upon a time\n";
    check_same("-n 0 echoes the prompt", echo, length, want, strlen(want));
    free(echo);
}

int main(void)
{
    test_shared_path(model_path, sizeof model_path, "data/models/stories260K/stories260K.gguf");
    test_once_upon_a_time();
    test_runc_outputs();
    test_sampling();
    return test_finish();
}
