/* bmoe-cli --ppl on stories260K against llama.cpp's perplexity tool (-c 128
 * --chunks 40) on the two corpora: the final PPL and every running value
 * within 1 %. The expected numbers are read from the llama.cpp output files
 * in shared/, never written here. */
#include <math.h>

#include "cli_run.h"

#define MAX_CHUNKS 64

typedef struct ppl_values {
    double running[MAX_CHUNKS];
    int n_running;
    double final;
} ppl_values;

/* Parses "[1]69.2202,[2]56.2848,..." and "Final estimate: PPL = 68.2738" out
 * of either llama.cpp's file or our stdout (same format). */
static bool parse_ppl(const char *text, ppl_values *values)
{
    memset(values, 0, sizeof *values);
    values->final = -1.0;
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        if (*line == '[') {
            const char *cursor = line;
            while (cursor && *cursor == '[' && values->n_running < MAX_CHUNKS) {
                int index;
                double value;
                int used = 0;
                if (sscanf(cursor, "[%d]%lf,%n", &index, &value, &used) != 2 || used == 0 ||
                    index != values->n_running + 1)
                    return false;
                values->running[values->n_running++] = value;
                cursor += used;
            }
        }
        const char *final = strstr(line, "Final estimate: PPL = ");
        if (final && (!end || final < end))
            values->final = strtod(final + strlen("Final estimate: PPL = "), NULL);
        line = end ? end + 1 : NULL;
    }
    return values->n_running > 0 && values->final > 0;
}

static void check_corpus(const char *model, const char *corpus, const char *expected_file)
{
    char corpus_path[1024], expected_path[1024];
    test_shared_path(corpus_path, sizeof corpus_path, corpus);
    test_shared_path(expected_path, sizeof expected_path, expected_file);
    size_t length;
    char *expected_text = cli_read_all(expected_path, &length);
    ppl_values expected, got;
    CHECK_MSG(expected_text && parse_ppl(expected_text, &expected), "cannot parse %s", expected_path);
    free(expected_text);
    CHECK(expected.n_running == 40);

    const char *args[] = {"-m", model, "--ppl", corpus_path, "-c", "128", "--chunks", "40", "-t", "2", NULL};
    cli_result result;
    CHECK(cli_run(args, &result) == 0);
    CHECK_MSG(result.exit_code == 0, "%s: exit %d, signal %d: %s", corpus, result.exit_code, result.signal,
              result.err ? result.err : "");
    bool parsed = result.out && parse_ppl(result.out, &got);
    CHECK_MSG(parsed, "%s: cannot parse the output: %.300s", corpus, result.out ? result.out : "");
    if (parsed) {
        CHECK_MSG(got.n_running == expected.n_running, "%s: %d chunks, expected %d", corpus, got.n_running,
                  expected.n_running);
        double relative = fabs(got.final - expected.final) / expected.final;
        CHECK_MSG(relative <= 0.01, "%s: final PPL %.4f, llama.cpp %.4f (%.3f %% off)", corpus, got.final,
                  expected.final, 100 * relative);
        int off = 0;
        for (int i = 0; i < got.n_running && i < expected.n_running; i++)
            off += fabs(got.running[i] - expected.running[i]) > 0.01 * expected.running[i];
        CHECK_MSG(off == 0, "%s: %d running PPL values more than 1 %% off", corpus, off);
        printf("%s: final PPL %.4f (llama.cpp %.4f)\n", corpus, got.final, expected.final);
    }
    cli_result_free(&result);
}

int main(void)
{
    char model[1024];
    test_shared_path(model, sizeof model, "data/models/stories260K/stories260K.gguf");
    check_corpus(model, "data/corpus/tinyshakespeare.txt",
                 "data/models/stories260K/expected_llamacpp_perplexity_ts_c128_chunks40.txt");
    check_corpus(model, "data/corpus/wikitext-2-raw-v1-test.hf-joined.crlf.txt",
                 "data/models/stories260K/expected_llamacpp_perplexity_wt_c128_chunks40.txt");
    return test_finish();
}
