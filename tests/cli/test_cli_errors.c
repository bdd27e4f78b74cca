/* bmoe-cli on bad input: unknown flags, missing or malformed values,
 * conflicting modes, a missing or non-GGUF model, a prompt longer than the
 * context, out-of-vocabulary ids, a corpus too short for one chunk. Each
 * must end with a non-zero exit (not a signal), nothing on stdout and
 * exactly one line on stderr that names the problem. */
#include "cli_run.h"

static char stories_path[1024];
static char corpus_path[1024];

/* Runs the CLI and checks the clean-failure contract; the stderr line must
 * contain `needle`. */
static void expect_error(const char *const *args, const char *needle)
{
    cli_result result;
    int ran = cli_run(args, &result);
    CHECK(ran == 0);
    if (ran != 0)
        return;
    CHECK_MSG(result.signal == 0, "'%s ...' died from signal %d", args[0], result.signal);
    CHECK_MSG(result.exit_code > 0 && result.exit_code < 128, "'%s ...' exited with %d", args[0],
              result.exit_code);
    CHECK_MSG(result.out_length == 0, "'%s ...' wrote to stdout: %.200s", args[0], result.out);
    CHECK_MSG(cli_one_line_error(&result), "'%s ...' stderr is not one line: %.400s", args[0],
              result.err);
    CHECK_MSG(strstr(result.err, needle) != NULL, "'%s ...' stderr lacks '%s': %s", args[0], needle,
              result.err);
    cli_result_free(&result);
}

static void test_usage_errors(void)
{
    const char *none[] = {NULL};
    expect_error(none, "no arguments");
    const char *unknown[] = {"-m", stories_path, "--bogus-flag", "1", NULL};
    expect_error(unknown, "--bogus-flag");
    const char *stray[] = {"-m", stories_path, "loose", NULL};
    expect_error(stray, "loose");
    const char *missing_value[] = {"-m", stories_path, "-n", NULL};
    expect_error(missing_value, "-n needs a value");
    const char *bad_number[] = {"-m", stories_path, "-n", "12abc", NULL};
    expect_error(bad_number, "not an integer");
    const char *overflow[] = {"-m", stories_path, "-c", "99999999999999999999", NULL};
    expect_error(overflow, "-c");
    const char *zero_threads[] = {"-m", stories_path, "-t", "0", NULL};
    expect_error(zero_threads, "out of range");
    const char *nan_temp[] = {"-m", stories_path, "--temp", "nan", NULL};
    expect_error(nan_temp, "not a finite number");
    const char *top_p[] = {"-m", stories_path, "--top-p", "1.5", NULL};
    expect_error(top_p, "out of range");
    const char *seed[] = {"-m", stories_path, "--seed", "-3", NULL};
    expect_error(seed, "--seed");
    const char *kv[] = {"-m", stories_path, "--kv-type", "q8", NULL};
    expect_error(kv, "f16 or f32");
    const char *policy[] = {"-m", stories_path, "--moe-stream", "--cache-policy", "lfu", NULL};
    expect_error(policy, "'lfu' is not lru or freq");
    const char *policy_resident[] = {"-m", stories_path, "--cache-policy", "freq", NULL};
    expect_error(policy_resident, "--cache-policy needs --moe-stream");
    const char *no_model[] = {"-p", "hello", NULL};
    expect_error(no_model, "no model");
    const char *both[] = {"-m", stories_path, "-p", "x", "-f", corpus_path, NULL};
    expect_error(both, "-p and -f");
    const char *ids_no_out[] = {"-m", stories_path, "--prompt-ids", "1,2", "--force-ids", "3", NULL};
    expect_error(ids_no_out, "--logits-out");
    const char *ids_and_text[] = {"-m", stories_path, "--prompt-ids", "1,2", "-p", "x", NULL};
    expect_error(ids_and_text, "cannot be combined");
    const char *empty_ids[] = {"-m", stories_path, "--prompt-ids", "", NULL};
    expect_error(empty_ids, "empty");
    const char *bad_ids[] = {"-m", stories_path, "--prompt-ids", "1,,2", "--logits-out", "x", NULL};
    expect_error(bad_ids, "--prompt-ids");
    const char *negative_ids[] = {"-m", stories_path, "--prompt-ids", "1,-2", "--logits-out", "x", NULL};
    expect_error(negative_ids, "--prompt-ids");
    const char *chunks[] = {"-m", stories_path, "-p", "x", "--chunks", "3", NULL};
    expect_error(chunks, "--chunks needs --ppl");
}

static void test_input_errors(void)
{
    char missing[1200];
    snprintf(missing, sizeof missing, "%s/no-such-model.gguf", test_tmp_dir());
    const char *missing_model[] = {"-m", missing, "-p", "hello", NULL};
    expect_error(missing_model, "no-such-model.gguf");

    /* a text file is not a GGUF model */
    const char *not_gguf[] = {"-m", corpus_path, "-p", "hello", NULL};
    expect_error(not_gguf, "tinyshakespeare.txt");

    const char *missing_prompt_file[] = {"-m", stories_path, "-f", missing, NULL};
    expect_error(missing_prompt_file, "no-such-model.gguf");
    const char *missing_corpus[] = {"-m", stories_path, "--ppl", missing, NULL};
    expect_error(missing_corpus, "no-such-model.gguf");

    /* a prompt of ~40 tokens into a context of 16 */
    const char *long_prompt[] = {"-m", stories_path, "-c", "16", "-n", "4", "-p",
                                 "Once upon a time there was a little girl named Lily who loved to play "
                                 "outside in the park with her big red ball every day",
                                 NULL};
    expect_error(long_prompt, "context");

    /* teacher forcing: an id outside the 512-token vocabulary, and more ids than -c */
    char out_path[1200];
    snprintf(out_path, sizeof out_path, "%s/cli-errors.logits", test_tmp_dir());
    const char *big_id[] = {"-m", stories_path, "--prompt-ids", "1,403,512", "--logits-out", out_path, NULL};
    expect_error(big_id, "512");
    const char *big_generate_id[] = {"-m", stories_path, "--prompt-ids", "1,403,99999", NULL};
    expect_error(big_generate_id, "99999");
    const char *too_many[] = {"-m", stories_path, "-c", "4", "--prompt-ids", "1,403,407",
                              "--force-ids", "261,378", "--logits-out", out_path, NULL};
    expect_error(too_many, "context");
    struct stat st;
    CHECK_MSG(stat(out_path, &st) != 0, "a failed run left %s behind", out_path);

    /* a corpus shorter than one chunk */
    char short_path[1200];
    snprintf(short_path, sizeof short_path, "%s/cli-errors-short.txt", test_tmp_dir());
    FILE *file = fopen(short_path, "w");
    CHECK(file != NULL);
    if (file) {
        fputs("Too short to fill one chunk.\n", file);
        fclose(file);
    }
    const char *short_corpus[] = {"-m", stories_path, "--ppl", short_path, "-c", "128", NULL};
    expect_error(short_corpus, "fewer than one chunk");
    unlink(short_path);
}

static void test_help(void)
{
    const char *help[] = {"--help", NULL};
    cli_result result;
    CHECK(cli_run(help, &result) == 0);
    CHECK(result.exit_code == 0);
    CHECK(result.out && strstr(result.out, "usage: bmoe-cli") != NULL);
    cli_result_free(&result);
}

/* --json-schema: one of the two flags, a schema bmoe holds to, a file that
 * exists, and no reasoning before the answer. */
static void test_json_schema_errors(void)
{
    const char *both[] = {"-m", stories_path, "-p", "x", "--json-schema", "{}", "--json-schema-file", corpus_path,
                          NULL};
    expect_error(both, "give one of them");
    const char *pattern[] = {"-m", stories_path, "-p", "x", "--json-schema", "{\"type\":\"string\",\"pattern\":\"a\"}",
                             NULL};
    expect_error(pattern, "pattern");
    const char *not_json[] = {"-m", stories_path, "-p", "x", "--json-schema", "{\"type\":", NULL};
    expect_error(not_json, "--json-schema");
    const char *missing[] = {"-m", stories_path, "-p", "x", "--json-schema-file", "/nonexistent/schema.json", NULL};
    expect_error(missing, "/nonexistent/schema.json");
    const char *grammar[] = {"-m", stories_path, "-p", "x", "--grammar", "root ::= item", NULL};
    expect_error(grammar, "undefined rule 'item'");
    const char *grammar_missing[] = {"-m", stories_path, "-p", "x", "--grammar-file", "/nonexistent/g.gbnf", NULL};
    expect_error(grammar_missing, "/nonexistent/g.gbnf");
    const char *two_holds[] = {"-m", stories_path, "-p", "x", "--grammar", "root ::= \"a\"", "--json-schema", "{}",
                               NULL};
    expect_error(two_holds, "give one of them");
    static const struct {
        const char *value, *needle;
    } biases[] = {
        {"65", "TOKEN+BIAS"}, {"+1", "TOKEN+BIAS"}, {"65+x", "a number"}, {"65+1,", "TOKEN+BIAS"},
        {"65+inf", "a number"}, {"65*2", "TOKEN+BIAS"}, {"65+1,66", "TOKEN+BIAS"}, {"9999999+1", "vocabulary"},
    };
    for (size_t i = 0; i < sizeof biases / sizeof biases[0]; i++) {
        const char *bias[] = {"-m", stories_path, "-p", "x", "-n", "2", "--logit-bias", biases[i].value, NULL};
        expect_error(bias, biases[i].needle);
    }
}

int main(void)
{
    test_shared_path(stories_path, sizeof stories_path, "data/models/stories260K/stories260K.gguf");
    test_shared_path(corpus_path, sizeof corpus_path, "data/corpus/tinyshakespeare.txt");
    test_usage_errors();
    test_input_errors();
    test_json_schema_errors();
    test_help();
    return test_finish();
}
