/* Batch invariance over a long prompt: the 300 tokens of the oracle's `long`
 * case (ten attention tiles of 32 keys, gpt-oss's window of 8 sliding over
 * all of them) give bit-identical logits for every token whether computed in
 * one prefill batch on one thread, in ubatches of 7 on two threads, in
 * ubatches of 64 (tile-sized, and out of step with the tiles of the sliding
 * layers) on two threads, or token by token on one and on two threads, for
 * the f16 and the f32 KV cache. test_batch_invariance covers the first 40
 * tokens and the output-row modes. */
#include <stdbool.h>
#include <string.h>

#include "bmoe.h"
#include "oracle_support.h"

/* mode 0: one batch; 1: ubatches of 7; 2: ubatches of 64; 3: one call per token. */
static float *run(bmoe_model *model, const oracle_case *c, int mode, int threads, enum bmoe_kv_type kv)
{
    bmoe_error error = {0};
    int n_vocab = bmoe_model_n_vocab(model);
    int n_tokens = c->n_prompt;
    bmoe_context_params params = bmoe_context_default_params();
    params.n_ctx = n_tokens + 16;
    params.n_threads = threads;
    params.kv_type = kv;
    params.n_ubatch = mode == 1 ? 7 : mode == 2 ? 64 : 0;
    bmoe_context *context = bmoe_context_create(model, &params, &error);
    CHECK_MSG(context != NULL, "context: %s", error.message);
    if (!context)
        return NULL;
    float *logits = calloc((size_t)n_tokens * (size_t)n_vocab, sizeof(float));
    if (mode == 3) {
        for (int t = 0; t < n_tokens; t++)
            CHECK_MSG(bmoe_eval(context, &c->prompt_ids[t], 1, logits + (size_t)t * n_vocab, false, NULL, &error) == 0,
                      "eval: %s", error.message);
    } else {
        CHECK_MSG(bmoe_eval(context, c->prompt_ids, n_tokens, logits, true, NULL, &error) == 0, "eval: %s",
                  error.message);
    }
    CHECK(bmoe_context_position(context) == n_tokens);
    bmoe_context_free(context);
    return logits;
}

static void check_model(const char *model_name)
{
    oracle_case c;
    if (oracle_case_load(&c, model_name, "long") != 0) {
        CHECK(false);
        return;
    }
    CHECK(c.n_prompt == 300);
    bmoe_model *model = oracle_model_load(model_name);
    if (!model) {
        oracle_case_free(&c);
        return;
    }
    size_t bytes = (size_t)c.n_prompt * (size_t)bmoe_model_n_vocab(model) * sizeof(float);
    static const int runs[][2] = {{1, 2}, {2, 2}, {3, 1}, {3, 2}}; /* mode, threads */
    /* Sanitized: the f32 cache and the two ubatch splits only. The f16
     * cache's writes and reads are the same per position at any length (the
     * streaming and speculation tests run it under the sanitizers, and
     * test_attend its kernels over 4096 keys), and token by token past the
     * tiles is test_oracle's long case (16 single-token decodes after these
     * 300 tokens, on both models) and test_batch_invariance's mode 2. */
    const size_t n_runs = TEST_SANITIZED ? 2 : sizeof runs / sizeof runs[0];
    for (int kv = TEST_SANITIZED ? 1 : 0; kv < 2; kv++) {
        float *reference = run(model, &c, 0, 1, (enum bmoe_kv_type)kv);
        for (size_t r = 0; r < n_runs; r++) {
            float *logits = run(model, &c, runs[r][0], runs[r][1], (enum bmoe_kv_type)kv);
            CHECK_MSG(reference && logits && memcmp(reference, logits, bytes) == 0,
                      "%s: kv %s, mode %d, %d threads: logits differ from one batch on one thread", model_name,
                      kv ? "f32" : "f16", runs[r][0], runs[r][1]);
            free(logits);
        }
        /* and they are the model's logits, not noise: the f32 cache against the oracle's argmax */
        if (reference && kv == 1) {
            int agree = 0;
            for (int t = 0; t < c.n_prompt; t++)
                agree += oracle_argmax(reference + (size_t)t * c.n_vocab, c.n_vocab) ==
                         oracle_argmax(c.logits + (size_t)t * c.n_vocab, c.n_vocab);
            CHECK_MSG(agree >= c.n_prompt * 9 / 10, "%s: argmax agrees with the oracle on %d/%d rows", model_name,
                      agree, c.n_prompt);
        }
        free(reference);
    }
    bmoe_model_free(model);
    oracle_case_free(&c);
}

int main(void)
{
    check_model("qwen3moe-tiny-q4_k_m");
    check_model("gptoss-tiny-mxfp4");
    return test_finish();
}
