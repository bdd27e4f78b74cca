/* Batch invariance: a token's logits are bit-identical whether it is
 * computed in one prefill batch, in ubatches of 7, or token by token, with
 * 1 or 2 threads, for the default f16 KV cache and for f32; and after other
 * tokens were evaluated and then truncated away (for the hybrid models the
 * convolution state, carried across ubatch boundaries and rebuilt after the
 * truncate), or after an abort inside a ubatch. */
#include <stdbool.h>
#include <string.h>

#include "bmoe.h"
#include "gemma4_variants.h"
#include "oracle_support.h"
#include "simple_archs.h"

enum { N_TOKENS = 40, TRUNCATE_AT = 25 };

/* mode 0: one batch; 1: one call split in ubatches of 7; 2: one call per token.
 * Output-row selection, where only the last row's logits come back (into the
 * last row): 3: one call asking for the last token's logits; 4: the prompt
 * but its last token without logits, then the last token alone.
 * 5: the first TRUNCATE_AT tokens, ten other tokens, a truncate back to
 * TRUNCATE_AT, then the rest (ubatches of 7, so the replay and the rest cross
 * ubatch boundaries). 6: the first TRUNCATE_AT tokens, then the rest in
 * ubatches of 7 aborted inside the second ubatch after its first layer (the
 * first ubatch kept, its logits delivered), then what was not kept. */
typedef struct abort_counter {
    int calls, abort_at; /* abort_at 0: never */
} abort_counter;

static bool count_and_abort(void *user)
{
    abort_counter *counter = user;
    return ++counter->calls == counter->abort_at;
}

static float *run(bmoe_model *model, const int32_t *tokens, int n_tokens, int mode, int threads,
                  enum bmoe_kv_type kv)
{
    bmoe_error error = {0};
    int n_vocab = bmoe_model_n_vocab(model);
    bmoe_context_params params = bmoe_context_default_params();
    params.n_ctx = n_tokens > 64 ? n_tokens : 64;
    params.n_threads = threads;
    params.kv_type = kv;
    params.n_ubatch = mode == 1 || mode >= 5 ? 7 : 0;
    abort_counter counter = {0, 0};
    params.abort_callback = count_and_abort;
    params.abort_user = &counter;
    bmoe_context *context = bmoe_context_create(model, &params, &error);
    CHECK_MSG(context != NULL, "context: %s", error.message);
    if (!context)
        return NULL;
    float *logits = calloc((size_t)n_tokens * (size_t)n_vocab, sizeof(float));
    float *last = logits + (size_t)(n_tokens - 1) * n_vocab;
    if (mode == 6) {
        CHECK_MSG(bmoe_eval(context, tokens, TRUNCATE_AT, logits, true, NULL, &error) == 0, "eval: %s", error.message);
        /* per ubatch: one ask before it, one per layer */
        counter.calls = 0;
        counter.abort_at = (1 + bmoe_model_n_layer(model)) + 3;
        CHECK(bmoe_eval(context, tokens + TRUNCATE_AT, n_tokens - TRUNCATE_AT, logits + (size_t)TRUNCATE_AT * n_vocab,
                        true, NULL, &error) == BMOE_ERR_ABORTED);
        counter.abort_at = 0;
        int32_t kept = bmoe_context_position(context);
        CHECK_MSG(kept == TRUNCATE_AT + 7, "kept %d positions after the abort", kept);
        CHECK_MSG(bmoe_eval(context, tokens + kept, n_tokens - kept, logits + (size_t)kept * n_vocab, true, NULL,
                            &error) == 0,
                  "eval: %s", error.message);
    } else if (mode == 5) {
        int32_t other[10];
        for (int i = 0; i < 10; i++)
            other[i] = tokens[n_tokens - 1 - i];
        CHECK_MSG(bmoe_eval(context, tokens, TRUNCATE_AT, logits, true, NULL, &error) == 0, "eval: %s", error.message);
        CHECK_MSG(bmoe_eval(context, other, 10, NULL, false, NULL, &error) == 0, "eval: %s", error.message);
        bmoe_context_truncate(context, TRUNCATE_AT);
        CHECK(bmoe_context_position(context) == TRUNCATE_AT);
        CHECK_MSG(bmoe_eval(context, tokens + TRUNCATE_AT, n_tokens - TRUNCATE_AT,
                            logits + (size_t)TRUNCATE_AT * n_vocab, true, NULL, &error) == 0,
                  "eval: %s", error.message);
    } else if (mode == 3) {
        CHECK_MSG(bmoe_eval(context, tokens, n_tokens, last, false, NULL, &error) == 0, "eval: %s", error.message);
    } else if (mode == 4) {
        CHECK_MSG(bmoe_eval(context, tokens, n_tokens - 1, NULL, false, NULL, &error) == 0, "eval: %s", error.message);
        CHECK_MSG(bmoe_eval(context, tokens + n_tokens - 1, 1, last, false, NULL, &error) == 0, "eval: %s",
                  error.message);
    } else if (mode == 2) {
        for (int t = 0; t < n_tokens; t++)
            CHECK_MSG(bmoe_eval(context, &tokens[t], 1, logits + (size_t)t * n_vocab, false, NULL, &error) == 0,
                      "eval: %s", error.message);
    } else {
        CHECK_MSG(bmoe_eval(context, tokens, n_tokens, logits, true, NULL, &error) == 0, "eval: %s", error.message);
    }
    CHECK(bmoe_context_position(context) == n_tokens);
    bmoe_context_free(context);
    return logits;
}

/* Every mode and thread count against one batch on one thread, for the model
 * at path on the prompt; with an oracle case (else NULL), the f32 logits'
 * argmax agrees with the oracle's too. */
static void check_model_file(const char *model_name, const char *path, const int32_t *prompt, int n_tokens,
                             const oracle_case *oracle)
{
    bmoe_error error = {0};
    bmoe_model *model = bmoe_model_load(path, NULL, &error);
    CHECK_MSG(model != NULL, "load: %s", error.message);
    if (!model)
        return;
    size_t bytes = (size_t)n_tokens * (size_t)bmoe_model_n_vocab(model) * sizeof(float);
    /* sanitized: the f32 cache only (the f16 one's code runs under the
     * sanitizers in the oracle and streaming tests) */
    for (int kv = TEST_SANITIZED ? 1 : 0; kv < 2; kv++) {
        float *reference = run(model, prompt, n_tokens, 0, 1, (enum bmoe_kv_type)kv);
        size_t row_bytes = (size_t)bmoe_model_n_vocab(model) * sizeof(float);
        for (int mode = 0; mode < 7; mode++) {
            /* sanitized: modes 5 and 6 evaluate in ubatches of 7 across
             * their boundaries with every row's logits, which is mode 1 */
            if (TEST_SANITIZED && mode == 1)
                continue;
            for (int threads = 1; threads <= 2; threads++) {
                if (mode == 0 && threads == 1)
                    continue;
                if (TEST_SANITIZED && threads == 1)
                    continue; /* every split on 2 threads against 1 thread's batch */
                float *logits = run(model, prompt, n_tokens, mode, threads, (enum bmoe_kv_type)kv);
                /* modes 3 and 4 give the last row only */
                size_t skip = mode == 3 || mode == 4 ? bytes - row_bytes : 0;
                CHECK_MSG(reference && logits && memcmp(reference + skip / sizeof(float), logits + skip / sizeof(float),
                                                        bytes - skip) == 0,
                          "%s: kv %s, mode %d, %d threads: logits differ from one batch on one thread", model_name,
                          kv ? "f32" : "f16", mode, threads);
                free(logits);
            }
        }
        /* and the logits are those of the model, not noise */
        if (reference && kv == 1 && oracle) {
            int agree = 0;
            for (int t = 0; t < n_tokens; t++)
                agree += oracle_argmax(reference + (size_t)t * oracle->n_vocab, oracle->n_vocab) ==
                         oracle_argmax(oracle->logits + (size_t)t * oracle->n_vocab, oracle->n_vocab);
            CHECK_MSG(agree >= n_tokens * 9 / 10, "%s: argmax agrees with the oracle on %d/%d rows", model_name,
                      agree, n_tokens);
        }
        free(reference);
    }
    bmoe_model_free(model);
}

static void check_model(const char *model_name)
{
    oracle_case c;
    if (oracle_case_load(&c, model_name, "long") != 0) {
        CHECK(false);
        return;
    }
    char path[1024];
    oracle_model_path(path, sizeof path, model_name);
    check_model_file(model_name, path, c.prompt_ids, N_TOKENS, &c);
    oracle_case_free(&c);
}

/* The route callback sees every (token, layer) once, with K distinct experts
 * in range and renormalized weights (qwen3moe) -- but the last layer, which
 * runs only the rows that give logits (here the prompt's last token), as the
 * telemetry contract's route trace describes. */
typedef struct route_log {
    int events;
    int seen[N_TOKENS][8];
    bool valid;
} route_log;

static void on_route(void *user, const bmoe_route_event *event)
{
    route_log *log = user;
    log->events++;
    if (event->position < 0 || event->position >= N_TOKENS || event->layer < 0 || event->layer >= 8) {
        log->valid = false;
        return;
    }
    log->seen[event->position][event->layer]++;
    float sum = 0;
    for (int k = 0; k < event->n_experts_used; k++) {
        sum += event->weights[k];
        if (event->experts[k] < 0 || event->experts[k] >= 16 || (k > 0 && event->weights[k] > event->weights[k - 1]))
            log->valid = false;
        for (int j = 0; j < k; j++)
            if (event->experts[j] == event->experts[k])
                log->valid = false;
    }
    if (event->n_experts_used != 4 || fabsf(sum - 1.0f) > 1e-5f)
        log->valid = false;
}

static void check_routes(void)
{
    oracle_case c;
    bmoe_error error = {0};
    if (oracle_case_load(&c, "qwen3moe-tiny-q4_k_m", "long") != 0) {
        CHECK(false);
        return;
    }
    bmoe_model *model = oracle_model_load("qwen3moe-tiny-q4_k_m");
    static route_log log;
    log.valid = true;
    bmoe_context_params params = bmoe_context_default_params();
    params.n_ctx = 64;
    params.n_ubatch = 16;
    params.n_threads = 2;
    params.route_callback = on_route;
    params.route_user = &log;
    bmoe_context *context = model ? bmoe_context_create(model, &params, &error) : NULL;
    CHECK(context != NULL);
    float *last = model ? malloc(sizeof(float) * (size_t)bmoe_model_n_vocab(model)) : NULL;
    if (context)
        CHECK(bmoe_eval(context, c.prompt_ids, N_TOKENS, last, false, NULL, &error) == 0);
    free(last);
    int layers = model ? bmoe_model_n_layer(model) : 0;
    CHECK(log.valid);
    CHECK(log.events == N_TOKENS * (layers - 1) + 1);
    bool once = true;
    for (int t = 0; t < N_TOKENS; t++)
        for (int l = 0; l < layers; l++)
            once &= log.seen[t][l] == (l < layers - 1 || t == N_TOKENS - 1 ? 1 : 0);
    CHECK(once);
    bmoe_context_free(context);
    bmoe_model_free(model);
    oracle_case_free(&c);
}

/* The context's memory report: a KV cache for the layers that attend, of
 * their own sizes, and the convolution windows of the others (shapes from
 * shared/oracle/README.md). */
static void check_memory_file(const char *model_name, const char *path, uint64_t kv_bytes,
                              uint64_t recurrent_bytes)
{
    bmoe_error error = {0};
    bmoe_model *model = bmoe_model_load(path, NULL, &error);
    CHECK_MSG(model != NULL, "load: %s", error.message);
    bmoe_context_params params = bmoe_context_default_params();
    params.n_ctx = 64;
    params.n_threads = 1;
    params.kv_type = BMOE_KV_F32;
    bmoe_context *context = model ? bmoe_context_create(model, &params, &error) : NULL;
    CHECK(context != NULL);
    if (context) {
        bmoe_context_memory memory;
        bmoe_context_memory_usage(context, &memory);
        CHECK_MSG(memory.kv_bytes == kv_bytes, "%s: KV %llu bytes, expected %llu", model_name,
                  (unsigned long long)memory.kv_bytes, (unsigned long long)kv_bytes);
        CHECK_MSG(memory.recurrent_bytes == recurrent_bytes, "%s: recurrent state %llu bytes, expected %llu",
                  model_name, (unsigned long long)memory.recurrent_bytes, (unsigned long long)recurrent_bytes);
        CHECK(memory.buffer_bytes > 0);
    }
    bmoe_context_free(context);
    bmoe_model_free(model);
}

static void check_memory(const char *model_name, uint64_t kv_bytes, uint64_t recurrent_bytes)
{
    char path[1024];
    oracle_model_path(path, sizeof path, model_name);
    check_memory_file(model_name, path, kv_bytes, recurrent_bytes);
}

/* The generated gemma4 models with KV sharing and per-layer embeddings, on
 * the gemma4 oracle's long prompt: invariant like the others (the shared
 * layers' caches are their sources', truncated with them), and a cache only
 * for the layers that own one. */
static void check_gemma4_variants(void)
{
    oracle_case c;
    if (oracle_case_load(&c, "gemma4-tiny-f32", "long") != 0) {
        CHECK(false);
        return;
    }
    mk_setup("batch_invariance");
    /* tiny-gemma4: sliding-window layers 2 KV heads of 64, full ones 1 of 128 */
    const uint64_t swa_layer = 2 * 64, full_layer = 1 * 128;
    const uint64_t kv_bytes[GEMMA4_VARIANTS] = {
        /* 6 layers, 3 shared: 0 and 1 (sliding-window) and 2 (full) own a cache */
        64ull * 2 * (2 * swa_layer + 1 * full_layer) * 4,
        /* 4 layers, none shared: 0-2 sliding-window, 3 full */
        64ull * 2 * (3 * swa_layer + 1 * full_layer) * 4,
        64ull * 2 * (2 * swa_layer + 1 * full_layer) * 4,
        64ull * 2 * (2 * swa_layer + 1 * full_layer) * 4,
    };
    for (int i = 0; i < GEMMA4_VARIANTS; i++) {
        char path[1200];
        /* sanitized: the variant with both KV sharing and per-layer
         * embeddings and the dense one; the two with one feature each run
         * no code that one lacks (test_gemma4_reference runs all four) */
        const char *flags = gemma4_variants[i].flags;
        if (TEST_SANITIZED && !(strstr(flags, "--shared-kv") && strstr(flags, "--per-layer-input")))
            continue;
        if (!gemma4_variant_write(&gemma4_variants[i], path, sizeof path))
            continue;
        check_memory_file(gemma4_variants[i].name, path, kv_bytes[i], 0);
        check_model_file(gemma4_variants[i].name, path, c.prompt_ids, N_TOKENS, NULL);
        remove(path);
    }
    oracle_case_free(&c);
}

/* deepseek2's and deepseek4's caches (64 f32 positions): the latent-cache file keeps per
 * token and layer the latent and the rope key (kv_lora 256 + 32) and the
 * latent again as the values (256), not every head's key and value; the
 * older attn_kv_b file keeps its 4 heads' decompressed keys (64 + 32) and
 * values (64). 0: not checked. */
static uint64_t simple_arch_kv_bytes(const char *name)
{
    if (strcmp(name, "deepseek2-tiny-f32") == 0)
        return 4ull * 64 * ((256 + 32) + 256) * 4;
    if (strcmp(name, "deepseek2-lite-tiny-f32") == 0)
        return 3ull * 64 * 4 * ((64 + 32) + 64) * 4;
    /* deepseek4: a raw layer's one KV head (128) as key and as value; a
     * ratio-4 layer's rows of that head, its compressor's kv and scores (2 *
     * 128 each), its indexer's (2 * 64 each), and one entry (128) and
     * indexer key (64) per 4 positions; a ratio-128 layer's rows of the head,
     * kv and scores (128 each), its 64 positions no block yet */
    if (strcmp(name, "deepseek4-tiny-f32") == 0)
        return 2ull * 64 * (128 + 128) * 4 + 64ull * (5 * 128 + 4 * 64) * 4 + 16ull * (128 + 64) * 4;
    if (strcmp(name, "deepseek4-long-tiny-f32") == 0)
        return 1ull * 64 * (128 + 128) * 4 + 64ull * (5 * 128 + 4 * 64) * 4 + 16ull * (128 + 64) * 4 +
               64ull * 3 * 128 * 4;
    return 0;
}

/* Whether check_simple_archs checks m for batch invariance. */
static bool runs_invariance(const simple_arch_model *m)
{
    if (!TEST_SANITIZED)
        return m->batch_invariance;
    /* sanitized: each marked architecture through its F32 file. Writing a
     * Q4_K_M one costs bmoe-mkmodel's quantizer ~13 s under ASan, and the
     * Q4_K_M oracle models above take the engine through those weights. */
    size_t length = strlen(m->name);
    if (length < 4 || strcmp(m->name + length - 4, "-f32") != 0)
        return false;
    char quantized[128];
    snprintf(quantized, sizeof quantized, "%.*s-q4_k_m", (int)(length - 4), m->name);
    const simple_arch_model *other = simple_arch_find(quantized);
    return m->batch_invariance || (other && other->batch_invariance);
}

/* The prompt tokens m's invariance is checked on: deepseek4-long's reach
 * past its ratio-128 layer's first block (and its indexer's top-k from
 * position 35); N_TOKENS for the others. */
static int invariance_tokens(const simple_arch_model *m)
{
    return strncmp(m->name, "deepseek4-long-", 15) == 0 ? 136 : N_TOKENS;
}

/* The simple architectures' models marked for it (simple_archs.h) on their
 * reference prompt: invariant, and their argmax llama.cpp's; and the cache
 * sizes of those simple_arch_kv_bytes knows. */
static void check_simple_archs(void)
{
    mk_setup("batch_invariance");
    for (int i = 0; i < SIMPLE_ARCH_MODELS; i++) {
        const simple_arch_model *m = &simple_arch_models[i];
        oracle_case c;
        char path[1200];
        uint64_t kv_bytes = simple_arch_kv_bytes(m->name);
        bool invariance = runs_invariance(m);
        if ((!invariance && !kv_bytes) || simple_arch_case_load(&c, m->name) != 0)
            continue;
        CHECK(c.n_prompt >= N_TOKENS);
        if (c.n_prompt >= N_TOKENS && simple_arch_write(m, path, sizeof path)) {
            if (kv_bytes)
                check_memory_file(m->name, path, kv_bytes, 0);
            if (invariance)
                check_model_file(m->name, path, c.prompt_ids, invariance_tokens(m), &c);
            remove(path);
        }
        oracle_case_free(&c);
    }
}

int main(void)
{
    /* 3 layers x 64 positions x (K and V of 2 heads of 32) x f32 */
    check_memory("qwen3moe-tiny-f32", 3ull * 64 * 2 * (2 * 32) * 4, 0);
    /* layers 2 and 4 attend (2 KV heads of 32); 0, 1 and 3 keep L-1 = 2
     * inputs of 128 channels */
    check_memory("lfm2moe-tiny-f32", 2ull * 64 * 2 * (2 * 32) * 4, 3ull * 2 * 128 * 4);
    /* layers 0-2: 2 KV heads of 32; layer 3: 1 KV head of 64 (its V the K projection, still cached) */
    check_memory("gemma4-tiny-f32", 64ull * 2 * (3 * 2 * 32 + 1 * 64) * 4, 0);
    /* layer 3 attends (2 KV heads of 64); 0-2 keep Kc-1 = 3 inputs of C = 2*2*32 + 4*32 channels and 4
     * V heads' 32 x 32 states */
    check_memory("qwen35moe-tiny-f32", 64ull * 2 * (2 * 64) * 4, 3ull * (3 * 256 + 4 * 32 * 32) * 4);
    check_model("qwen3moe-tiny-q4_k_m");
    check_model("gptoss-tiny-mxfp4");
    check_model("lfm2moe-tiny-q4_k_m");
    /* sanitized: the hybrids in Q4_K_M only; their state code does not see
     * the weights' type, and F32 weights run in the gemma4 variants and the
     * simple architectures here */
    if (!TEST_SANITIZED)
        check_model("lfm2moe-tiny-f32");
    check_model("gemma4-tiny-q4_k_m");
    check_model("qwen35moe-tiny-q4_k_m");
    if (!TEST_SANITIZED)
        check_model("qwen35moe-tiny-f32");
    check_gemma4_variants();
    check_simple_archs();
    check_routes();
    return test_finish();
}
