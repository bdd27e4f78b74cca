/* The sliding-window layers' rings (bmoe_context_params.swa_full off, the
 * default): on gpt-oss, Gemma 4 (with and without layers that read another
 * layer's cache) and DeepSeek-V4 (its raw layers), a context whose
 * sliding-window layers keep a ring of their window and one micro-batch
 * gives the very logits of one that keeps every position, over a sequence
 * many times the ring long evaluated in micro-batches of every size and one
 * token at a time; cut back a few positions (inside the ring's margin, as
 * speculation cuts) and far (past it: the kept prefix is evaluated again,
 * also when cut further before that), it goes on with the same logits; its
 * KV cache is smaller; a generation reuses a prefix the ring still holds
 * and evaluates the whole prompt when the ring has lost the prefix's
 * window. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "test.h"

enum { N_CTX = 256, N_UBATCH = 8, N_TOKENS = 200, MAX_VOCAB = 1024 };

/* The pieces a sequence is evaluated in: prefills of several sizes, single
 * tokens, and a batch of a verify's size. */
static const int32_t PIECES[] = {37, 1, 1, 5, 8, 1, 9, 1, 1, 1, 30, 1, 3, 16, 1};

typedef struct pair {
    bmoe_context *ring, *full;
    int32_t n_vocab;
    float *logits_ring, *logits_full;
} pair;

static bmoe_context *make_context(bmoe_model *model, bool swa_full)
{
    bmoe_context_params params = bmoe_context_default_params();
    params.n_ctx = N_CTX;
    params.n_ubatch = N_UBATCH;
    params.n_threads = 2;
    params.swa_full = swa_full;
    bmoe_error error = {0};
    bmoe_context *context = bmoe_context_create(model, &params, &error);
    CHECK_MSG(context != NULL, "context: %s", error.message);
    return context;
}

/* Evaluates tokens on both contexts with every position's logits; false
 * when they differ in a bit or an evaluation fails. */
static bool eval_both(pair *p, const int32_t *tokens, int32_t n, const char *label)
{
    bmoe_error error = {0};
    int a = bmoe_eval(p->ring, tokens, n, p->logits_ring, true, NULL, &error);
    CHECK_MSG(a == 0, "%s: ring eval: %s", label, error.message);
    int b = bmoe_eval(p->full, tokens, n, p->logits_full, true, NULL, &error);
    CHECK_MSG(b == 0, "%s: full eval: %s", label, error.message);
    if (a != 0 || b != 0)
        return false;
    bool same = memcmp(p->logits_ring, p->logits_full, (size_t)n * (size_t)p->n_vocab * sizeof(float)) == 0;
    CHECK_MSG(same, "%s: %d tokens at position %d: the ring's logits differ from the whole cache's", label, n,
              bmoe_context_position(p->full) - n);
    return same;
}

/* Evaluates tokens[from, to) in the pieces' sizes (cycling). */
static bool eval_pieces(pair *p, const int32_t *tokens, int32_t from, int32_t to, const char *label)
{
    for (int32_t at = from, i = 0; at < to; i++) {
        int32_t n = PIECES[i % (int)(sizeof PIECES / sizeof PIECES[0])];
        if (n > to - at)
            n = to - at;
        if (!eval_both(p, tokens + at, n, label))
            return false;
        at += n;
    }
    return true;
}

static void check_model(const char *path, const char *name, int32_t expected_ring)
{
    bmoe_error error = {0};
    bmoe_model *model = bmoe_model_load(path, NULL, &error);
    CHECK_MSG(model != NULL, "load %s: %s", name, error.message);
    if (!model)
        return;
    pair p = {.ring = make_context(model, false), .full = make_context(model, true)};
    p.n_vocab = bmoe_model_n_vocab(model);
    p.logits_ring = malloc((size_t)N_CTX * (size_t)p.n_vocab * sizeof(float));
    p.logits_full = malloc((size_t)N_CTX * (size_t)p.n_vocab * sizeof(float));
    int32_t tokens[N_CTX];
    uint64_t state = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < N_CTX; i++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        tokens[i] = (int32_t)((state >> 33) % (uint64_t)p.n_vocab);
    }
    if (!p.ring || !p.full || !p.logits_ring || !p.logits_full)
        goto done;
    CHECK_MSG(p.ring->state.swa_ring == expected_ring && p.full->state.swa_ring == 0,
              "%s: rings of %d and %d positions (swa_full), expected %d and 0", name, p.ring->state.swa_ring,
              p.full->state.swa_ring, expected_ring);
    bmoe_context_memory ring_memory, full_memory;
    bmoe_context_memory_usage(p.ring, &ring_memory);
    bmoe_context_memory_usage(p.full, &full_memory);
    CHECK_MSG(ring_memory.kv_bytes < full_memory.kv_bytes, "%s: KV %llu bytes with rings, %llu without", name,
              (unsigned long long)ring_memory.kv_bytes, (unsigned long long)full_memory.kv_bytes);

    char label[160];
    snprintf(label, sizeof label, "%s: the sequence", name);
    if (!eval_pieces(&p, tokens, 0, N_TOKENS, label))
        goto done;
    /* a few positions back, as speculation rejects drafts: inside the margin */
    bmoe_context_truncate(p.ring, N_TOKENS - 6);
    bmoe_context_truncate(p.full, N_TOKENS - 6);
    CHECK(p.ring->replay_to == 0);
    snprintf(label, sizeof label, "%s: after a cut of 6", name);
    if (!eval_pieces(&p, tokens, N_TOKENS - 6, N_TOKENS + 10, label))
        goto done;
    /* far back: the ring has overwritten the window there, the prefix is evaluated again */
    bmoe_context_truncate(p.ring, 100);
    bmoe_context_truncate(p.full, 100);
    CHECK_MSG(p.ring->replay_to == 100, "%s: a cut past the margin replays to %d", name, p.ring->replay_to);
    /* cut again before the replay ran: it rebuilds only what is kept now */
    bmoe_context_truncate(p.ring, 90);
    bmoe_context_truncate(p.full, 90);
    CHECK_MSG(p.ring->replay_to == 90, "%s: a second cut replays to %d", name, p.ring->replay_to);
    snprintf(label, sizeof label, "%s: after cuts to 100 and 90", name);
    if (!eval_pieces(&p, tokens, 90, 140, label))
        goto done;

    /* a generation's prefix: kept when the ring holds its window, else the whole prompt evaluated */
    bmoe_generation_params gp = bmoe_generation_default_params();
    gp.n_predict = 1;
    int32_t prompt[150];
    memcpy(prompt, tokens, sizeof prompt);
    prompt[138] = (prompt[138] + 1) % p.n_vocab; /* shares 138 positions with the 140 in the cache */
    bmoe_generation *g = bmoe_generation_start(p.ring, &gp, prompt, 150, &error);
    CHECK_MSG(g != NULL, "%s: generation: %s", name, error.message);
    if (g)
        CHECK_MSG(bmoe_generation_n_reused(g) == 138, "%s: %d reused of a prefix of 138 the ring holds", name,
                  bmoe_generation_n_reused(g));
    bmoe_generation_free(g);
    prompt[60] = (prompt[60] + 1) % p.n_vocab; /* now 60: its window overwritten since */
    g = bmoe_generation_start(p.ring, &gp, prompt, 150, &error);
    CHECK_MSG(g != NULL, "%s: generation: %s", name, error.message);
    if (g)
        CHECK_MSG(bmoe_generation_n_reused(g) == 0, "%s: %d reused of a prefix of 60 the ring lost", name,
                  bmoe_generation_n_reused(g));
    bmoe_generation_free(g);
    g = bmoe_generation_start(p.full, &gp, prompt, 150, &error);
    if (g)
        CHECK_MSG(bmoe_generation_n_reused(g) == 60, "%s: swa_full: %d reused of 60", name,
                  bmoe_generation_n_reused(g));
    bmoe_generation_free(g);
done:
    free(p.logits_ring);
    free(p.logits_full);
    bmoe_context_free(p.ring);
    bmoe_context_free(p.full);
    bmoe_model_free(model);
}

/* Writes a bmoe-mkmodel model into the test directory. */
static bool generate(const char *shape_flags, const char *file, char *path, size_t size)
{
    snprintf(path, size, "%s/%s", test_tmp_dir(), file);
    char command[2600];
    snprintf(command, sizeof command, "'%s/bmoe-mkmodel' %s --type f32 --quiet -o '%s' > /dev/null", BMOE_BIN_DIR,
             shape_flags, path);
    int status = system(command);
    CHECK_MSG(status == 0, "%s failed", command);
    return status == 0;
}

int main(void)
{
    char path[1200];
    /* sliding window 8 (gpt-oss, Gemma 4) or 16 (DeepSeek-V4), and 16 positions written at most: 32 */
    check_model(test_shared_path(path, sizeof path, "oracle/models/gptoss-tiny-f32.gguf"), "gpt-oss", 32);
    check_model(test_shared_path(path, sizeof path, "oracle/models/gemma4-tiny-f32.gguf"), "gemma4", 32);
    if (generate("--shape tiny-gemma4 --layers 6 --swa-period 3 --shared-kv 3", "ring-gemma4-shared.gguf", path,
                 sizeof path)) {
        check_model(path, "gemma4 shared KV", 32);
        remove(path);
    }
    if (generate("--shape tiny-deepseek4", "ring-deepseek4.gguf", path, sizeof path)) {
        check_model(path, "deepseek4", 32);
        remove(path);
    }
    return test_finish();
}
