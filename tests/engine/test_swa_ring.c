/* The sliding-window layers' rings (bmoe_context_params.swa_cache): on gpt-oss, Gemma 4 (with and without layers that read another
 * layer's cache) and DeepSeek-V4 (its raw layers), a context whose
 * sliding-window layers keep a ring of their window and one micro-batch
 * gives the very logits of one that keeps every position, over a sequence
 * many times the ring long evaluated in micro-batches of every size and one
 * token at a time; cut back a few positions (inside the ring's margin, as
 * speculation cuts) and far (past it: the kept prefix is evaluated again,
 * also when cut further before that), it goes on with the same logits; its
 * KV cache is smaller; a generation reuses a prefix the ring still holds
 * and evaluates the whole prompt when the ring has lost the prefix's
 * window. A conversation (each turn's prompt extending the last one's,
 * answers longer than the ring) with the rings' checkpoint reuses each
 * prompt as a whole cache does, also one token short of the next, and
 * answers with the same tokens as a ring alone and a whole cache; cut back
 * twice into a checkpointed prompt, it restores the copy and gives a whole
 * cache's logits. A swa_cache outside the enum is refused. */
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

static bmoe_context *make_context(bmoe_model *model, enum bmoe_swa_cache swa)
{
    bmoe_context_params params = bmoe_context_default_params();
    params.n_ctx = N_CTX;
    params.n_ubatch = N_UBATCH;
    params.n_threads = 2;
    params.swa_cache = swa;
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

static void check_conversation(bmoe_model *model, const char *name, const int32_t *tokens);
static void check_restore(bmoe_model *model, const char *name, const int32_t *tokens);
static bool window_held_now(const bmoe_context *context, int32_t position);

static void check_model(const char *path, const char *name, int32_t expected_ring)
{
    bmoe_error error = {0};
    bmoe_model *model = bmoe_model_load(path, NULL, &error);
    CHECK_MSG(model != NULL, "load %s: %s", name, error.message);
    if (!model)
        return;
    pair p = {.ring = make_context(model, BMOE_SWA_RING), .full = make_context(model, BMOE_SWA_FULL)};
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
              "%s: rings of %d and %d positions (full), expected %d and 0", name, p.ring->state.swa_ring,
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
        CHECK_MSG(bmoe_generation_n_reused(g) == 60, "%s: full: %d reused of 60", name,
                  bmoe_generation_n_reused(g));
    bmoe_generation_free(g);
    check_conversation(model, name, tokens);
    check_restore(model, name, tokens);
done:
    free(p.logits_ring);
    free(p.logits_full);
    bmoe_context_free(p.ring);
    bmoe_context_free(p.full);
    bmoe_model_free(model);
}

enum { TURN_PREDICT = 60 };

/* One turn: a greedy generation of TURN_PREDICT tokens past end-of-text
 * into answer; returns the prompt positions it reused, -1 on failure. */
static int32_t turn(bmoe_context *context, const int32_t *prompt, int32_t n_prompt, int32_t *answer)
{
    bmoe_generation_params gp = bmoe_generation_default_params();
    gp.n_predict = TURN_PREDICT;
    gp.ignore_eos = true;
    bmoe_error error = {0};
    bmoe_generation *g = bmoe_generation_start(context, &gp, prompt, n_prompt, &error);
    CHECK_MSG(g != NULL, "generation: %s", error.message);
    if (!g)
        return -1;
    int32_t reused = bmoe_generation_n_reused(g), n = 0;
    bmoe_step step;
    int status;
    while ((status = bmoe_generation_step(g, &step, &error)) == 1)
        if (n < TURN_PREDICT)
            answer[n++] = step.token;
    CHECK_MSG(status == 0 && n == TURN_PREDICT, "a turn generated %d tokens: %s", n, error.message);
    bmoe_generation_free(g);
    return reused;
}

/* Three turns on a ring, a ring with its checkpoint and a whole cache: the
 * second prompt extends the first by its answer's first token and other
 * text (reused: all of the first prompt), the third shares all but the
 * last 10 tokens of the second (reused: that much). */
static void check_conversation(bmoe_model *model, const char *name, const int32_t *tokens)
{
    enum { N_TURNS = 3 };
    static const enum bmoe_swa_cache modes[] = {BMOE_SWA_RING, BMOE_SWA_CHECKPOINT, BMOE_SWA_FULL};
    static const char *const mode_names[] = {"ring", "checkpoint", "full"};
    int32_t prompts[N_TURNS][N_CTX], lengths[N_TURNS] = {40, 0, 0};
    int32_t answers[3][N_TURNS][TURN_PREDICT], reused[3][N_TURNS];
    memcpy(prompts[0], tokens, (size_t)lengths[0] * sizeof(int32_t));
    for (int mode = 0; mode < 3; mode++) {
        bmoe_context *context = make_context(model, modes[mode]);
        if (!context)
            return;
        for (int t = 0; t < N_TURNS; t++) {
            if (t > 0 && mode == 0) {
                /* the next prompt from the first mode's previous turn (all modes answer alike) */
                int32_t n = t == 1 ? lengths[0] : lengths[1] - 10;
                memcpy(prompts[t], prompts[t - 1], (size_t)n * sizeof(int32_t));
                if (t == 1)
                    prompts[t][n++] = answers[0][0][0];
                for (int i = 0; i < 20; i++)
                    prompts[t][n++] = tokens[100 + 20 * t + i];
                lengths[t] = n;
            }
            reused[mode][t] = turn(context, prompts[t], lengths[t], answers[mode][t]);
        }
        if (mode == 1)
            CHECK_MSG(context->state.ring_checkpoint != NULL && context->state.ring_checkpoint_bytes > 0,
                      "%s: no checkpoint", name);
        bmoe_context_free(context);
    }
    /* a whole cache reuses what the prompts share: the first prompt and one token, then all but 10 */
    CHECK_MSG(reused[2][0] == 0 && reused[2][1] >= lengths[0] + 1 && reused[2][2] >= lengths[1] - 10,
              "%s full: turns reused %d, %d, %d", name, reused[2][0], reused[2][1], reused[2][2]);
    for (int mode = 0; mode < 3; mode++)
        for (int t = 0; t < N_TURNS; t++) {
            /* a ring alone has overwritten the windows: it evaluates each later prompt whole; its
             * checkpoint holds the previous prompt */
            int32_t at_most = t > 0 ? lengths[t - 1] : 0;
            int32_t expected = mode == 0 ? 0 : mode == 2 || reused[2][t] < at_most ? reused[2][t] : at_most;
            CHECK_MSG(reused[mode][t] == expected, "%s %s: turn %d reused %d of its prompt, expected %d", name,
                      mode_names[mode], t + 1, reused[mode][t], expected);
            CHECK_MSG(memcmp(answers[mode][t], answers[2][t], sizeof answers[2][t]) == 0,
                      "%s %s: turn %d answers other tokens than a whole cache", name, mode_names[mode], t + 1);
        }
}

/* The checkpoint restored by bmoe_context_truncate itself, twice: a
 * checkpoint context taken at 100 and run on past its rings, cut back to 95
 * and later to 90, gives a whole cache's logits bit for bit. */
static void check_restore(bmoe_model *model, const char *name, const int32_t *tokens)
{
    pair p = {.ring = make_context(model, BMOE_SWA_CHECKPOINT), .full = make_context(model, BMOE_SWA_FULL)};
    p.n_vocab = bmoe_model_n_vocab(model);
    p.logits_ring = malloc((size_t)N_CTX * (size_t)p.n_vocab * sizeof(float));
    p.logits_full = malloc((size_t)N_CTX * (size_t)p.n_vocab * sizeof(float));
    char label[160];
    snprintf(label, sizeof label, "%s checkpoint", name);
    if (p.ring && p.full && p.logits_ring && p.logits_full && eval_pieces(&p, tokens, 0, 100, label)) {
        context_ring_checkpoint(p.ring);
        CHECK(p.ring->checkpoint_end == 100);
        bool ok = eval_pieces(&p, tokens, 100, 180, label);
        for (int32_t cut = 95; ok && cut >= 90; cut -= 5) {
            CHECK_MSG(!window_held_now(p.ring, cut) && context_prefix_kept(p.ring, cut),
                      "%s: at %d the rings should have lost the window and the checkpoint hold it", name, cut);
            bmoe_context_truncate(p.ring, cut);
            bmoe_context_truncate(p.full, cut);
            CHECK_MSG(p.ring->replay_to == 0, "%s: a cut to %d the checkpoint holds replays", name, cut);
            snprintf(label, sizeof label, "%s checkpoint: after a cut to %d", name, cut);
            ok = eval_pieces(&p, tokens, cut, cut + 70, label);
        }
    }
    free(p.logits_ring);
    free(p.logits_full);
    bmoe_context_free(p.ring);
    bmoe_context_free(p.full);
}

/* Whether the live rings (not the checkpoint) hold the window before position. */
static bool window_held_now(const bmoe_context *context, int32_t position)
{
    int32_t start = position - context->model->model.hparams.n_swa + 1;
    return (start > 0 ? start : 0) >= context->ring_written - context->state.swa_ring;
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
    {
        bmoe_error error = {0};
        bmoe_model *model = bmoe_model_load(test_shared_path(path, sizeof path, "oracle/models/gptoss-tiny-f32.gguf"),
                                            NULL, &error);
        bmoe_context_params params = bmoe_context_default_params();
        params.swa_cache = (enum bmoe_swa_cache)7;
        bmoe_context *context = model ? bmoe_context_create(model, &params, &error) : NULL;
        CHECK_MSG(model && !context && strstr(error.message, "swa_cache 7"), "swa_cache 7: %s", error.message);
        bmoe_context_free(context);
        bmoe_model_free(model);
    }
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
