/* bmoe-cli teacher-forced evaluation (--prompt-ids, --force-ids,
 * --logits-out) against the oracle's llama.cpp logits: the chat case of
 * qwen3moe-tiny-f32, gptoss-tiny-f32, lfm2moe-tiny-f32, qwen35moe-tiny-f32 and gemma4-tiny-f32
 * with an f32 KV cache, every row within the README's F32 tolerance (max
 * |d| <= 1e-3; 1e-2 for gemma4), resident and streamed with overlap (a
 * cache smaller than the experts). This checks the CLI's file layout and
 * forcing order end to end; the math is the engine's. And --swa-cache: a
 * gpt-oss generation many times its sliding-window ring long writes the
 * same text with ring, checkpoint and full, a bad value is refused in one
 * line. The
 * arm64 stage runs it under qemu-aarch64. */
#include <cjson/cJSON.h>
#include <math.h>

#include "cli_run.h"

/* "1,2,3" from a JSON array of ids into buffer; returns false if it does not fit. */
static bool join_ids(const cJSON *array, char *buffer, size_t size, int *count)
{
    size_t used = 0;
    *count = 0;
    buffer[0] = '\0';
    const cJSON *item;
    cJSON_ArrayForEach(item, array)
    {
        if (!cJSON_IsNumber(item))
            return false;
        int written = snprintf(buffer + used, size - used, "%s%d", *count ? "," : "", item->valueint);
        if (written < 0 || (size_t)written >= size - used)
            return false;
        used += (size_t)written;
        (*count)++;
    }
    return true;
}

static void check_case(const char *model_name, const char *case_name, float tolerance, bool streamed)
{
    char model_path[1024], json_path[1024], logits_path[1024], relative[512];
    snprintf(relative, sizeof relative, "oracle/models/%s.gguf", model_name);
    test_shared_path(model_path, sizeof model_path, relative);
    snprintf(relative, sizeof relative, "oracle/cases/%s.%s.json", model_name, case_name);
    test_shared_path(json_path, sizeof json_path, relative);
    snprintf(relative, sizeof relative, "oracle/cases/%s.%s.logits.f32", model_name, case_name);
    test_shared_path(logits_path, sizeof logits_path, relative);

    size_t json_length, oracle_length;
    char *json_text = cli_read_all(json_path, &json_length);
    cJSON *json = json_text ? cJSON_Parse(json_text) : NULL;
    free(json_text);
    CHECK_MSG(json != NULL, "cannot parse %s", json_path);
    if (!json)
        return;
    char prompt_ids[8192], force_ids[8192];
    int n_prompt = 0, n_force = 0;
    const cJSON *n_vocab_item = cJSON_GetObjectItemCaseSensitive(json, "n_vocab");
    bool ok = join_ids(cJSON_GetObjectItemCaseSensitive(json, "prompt_ids"), prompt_ids, sizeof prompt_ids,
                       &n_prompt) &&
              join_ids(cJSON_GetObjectItemCaseSensitive(json, "greedy_ids"), force_ids, sizeof force_ids,
                       &n_force) &&
              cJSON_IsNumber(n_vocab_item);
    int n_vocab = ok ? n_vocab_item->valueint : 0;
    cJSON_Delete(json);
    CHECK_MSG(ok && n_prompt > 0 && n_vocab > 0, "%s: unexpected layout", json_path);
    if (!ok)
        return;

    char out_path[1200];
    snprintf(out_path, sizeof out_path, "%s/cli-logits-%s.%s.f32", test_tmp_dir(), model_name, case_name);
    /* resident: the list ends where the streaming flags begin */
    const char *args[] = {"-m", model_path, "--kv-type", "f32", "-t", "2", "--prompt-ids", prompt_ids,
                          "--force-ids", force_ids, "--logits-out", out_path,
                          streamed ? "--moe-stream" : NULL, "--cache-mb", "2", "--overlap", NULL};
    cli_result result;
    CHECK(cli_run(args, &result) == 0);
    CHECK_MSG(result.exit_code == 0, "%s: exit %d, signal %d: %s", model_name, result.exit_code,
              result.signal, result.err ? result.err : "");
    cli_result_free(&result);

    size_t got_length;
    float *oracle = (float *)cli_read_all(logits_path, &oracle_length);
    float *got = (float *)cli_read_all(out_path, &got_length);
    size_t rows = (size_t)(n_prompt + n_force);
    size_t expected_bytes = rows * (size_t)n_vocab * sizeof(float);
    CHECK_MSG(oracle && oracle_length == expected_bytes, "%s: oracle file has %zu bytes, expected %zu",
              logits_path, oracle_length, expected_bytes);
    CHECK_MSG(got && got_length == expected_bytes, "%s: --logits-out wrote %zu bytes, expected %zu",
              model_name, got_length, expected_bytes);
    if (oracle && got && oracle_length == expected_bytes && got_length == expected_bytes) {
        int bad_rows = 0;
        float worst = 0.0f;
        for (size_t r = 0; r < rows; r++) {
            float d = 0.0f;
            for (int v = 0; v < n_vocab; v++) {
                float diff = fabsf(got[r * (size_t)n_vocab + (size_t)v] - oracle[r * (size_t)n_vocab + (size_t)v]);
                if (!(diff <= d)) /* NaN counts as worst */
                    d = isnan(diff) ? INFINITY : diff;
            }
            bad_rows += d > tolerance;
            if (d > worst)
                worst = d;
        }
        CHECK_MSG(bad_rows == 0, "%s.%s: %d of %zu rows beyond %g (worst %g)", model_name, case_name,
                  bad_rows, rows, (double)tolerance, (double)worst);
        printf("%s.%s%s: %zu rows, max |d| %g\n", model_name, case_name, streamed ? " (streamed)" : "", rows,
               (double)worst);
    }
    free(oracle);
    free(got);
    unlink(out_path);
}

static void check_swa_cache(void)
{
    char model_path[1024];
    test_shared_path(model_path, sizeof model_path, "oracle/models/gptoss-tiny-f32.gguf");
    char *texts[3] = {NULL, NULL, NULL};
    const char *choices[] = {"ring", "checkpoint", "full"};
    for (int i = 0; i < 3; i++) {
        const char *args[] = {"-m", model_path, "-p", "Once upon a time", "-n", "160", "-c", "256", "--ubatch", "8",
                              "--temp", "0", "-t", "2", "--swa-cache", choices[i], NULL};
        cli_result r;
        CHECK(cli_run(args, &r) == 0);
        CHECK_MSG(r.exit_code == 0 && cli_cut_report(&r) && r.out_length > 0, "--swa-cache %s: exit %d: %s",
                  choices[i], r.exit_code, r.err ? r.err : "");
        texts[i] = r.exit_code == 0 ? strdup(r.out) : NULL;
        cli_result_free(&r);
    }
    for (int i = 0; i < 2; i++) {
        CHECK_MSG(texts[i] && texts[2] && strcmp(texts[i], texts[2]) == 0, "--swa-cache %s wrote \"%s\", full \"%s\"",
                  choices[i], texts[i] ? texts[i] : "(none)", texts[2] ? texts[2] : "(none)");
        free(texts[i]);
    }
    free(texts[2]);
    const char *bad[] = {"-m", model_path, "-p", "x", "-n", "1", "--swa-cache", "half", NULL};
    cli_result r;
    CHECK(cli_run(bad, &r) == 0);
    CHECK_MSG(r.exit_code != 0 && cli_one_line_error(&r) && strstr(r.err, "--swa-cache"), "--swa-cache half: %d %s",
              r.exit_code, r.err ? r.err : "");
    cli_result_free(&r);
}

int main(void)
{
    check_swa_cache();
    for (int streamed = 0; streamed <= 1; streamed++) {
        check_case("qwen3moe-tiny-f32", "chat", 1e-3f, streamed);
        check_case("gptoss-tiny-f32", "chat", 1e-3f, streamed);
        check_case("lfm2moe-tiny-f32", "chat", 1e-3f, streamed);
        check_case("qwen35moe-tiny-f32", "chat", 1e-3f, streamed);
        /* gemma4: the README's F32 tolerance for its f16-table GELU */
        check_case("gemma4-tiny-f32", "chat", 1e-2f, streamed);
    }
    return test_finish();
}
