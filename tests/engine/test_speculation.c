/* Speculative decoding is invisible in the output: on an attention-only MoE
 * (qwen3moe) and both hybrids (lfm2moe's convolutions, qwen35moe's Gated
 * DeltaNet), resident (1 and 2 threads) and streamed through a small expert
 * cache (greedy on 1 thread, sampled on 2), greedy and seeded sampling with
 * every filter and the repeat penalty on, a generation with n-gram drafts
 * (1, 3, 8 per step), with drafts forced to plain decoding's tokens (all
 * accepted), forced wrong (none accepted) and half right at random
 * (rejections in the middle of a batch, so a hybrid's recurrent state is cut
 * back inside it) gives the tokens, text, stop and final context position
 * of plain decoding. A stop string, n_predict or the context's end inside an
 * accepted run, and a generation freed early, leave the context where plain
 * decoding leaves it. The counters add up and agree with the routes a trace
 * sees; the n-gram drafter finds the longest, most recent match; MTP on a
 * model without a nextn block, bad sizes, a probability floor outside 0..1
 * or with another source and the lossy levers are refused at start. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bmoe.h"
#include "engine/draft_ngram.h"
#include "test.h"

enum { N_PREDICT = 40, MAX_TOKENS = 512 };

/* Repetitive, so that an n-gram drafter finds matches in the prompt too. */
static const char *const PROMPT =
    "<|im_start|>user\nthe cat sat on the mat. the cat sat on the mat. the cat sat on the mat. "
    "the dog sat on the log. the dog sat on the log.<|im_end|>\n<|im_start|>assistant\n";

typedef struct outcome {
    int32_t tokens[MAX_TOKENS];
    int n_tokens;
    char text[16384];
    size_t length;
    enum bmoe_stop_reason stop;
    int32_t position;       /* the context's, after the final step */
    int32_t n_prompt;
    int64_t step_tokens;    /* sum of the steps' stats.n_tokens */
    bmoe_spec_stats spec;
    bool ok;
} outcome;

/* The routes of one MoE layer (the first reported), as a trace sees them. */
typedef struct route_count {
    int32_t layer;           /* -1 until the first event */
    int64_t tokens, batched; /* tokens routed, of those in a batch of several */
} route_count;

static void count_route(void *user, const bmoe_route_event *event)
{
    route_count *count = user;
    if (count->layer < 0)
        count->layer = event->layer;
    if (event->layer != count->layer)
        return;
    count->tokens++;
    count->batched += event->batch;
}

/* Drafts for the callback source: the tokens plain decoding produced
 * (plain, n_plain: prompt then generated), all of them right (mode 0), all
 * wrong (1), or each right with probability 1/2 and otherwise random (2). */
typedef struct forced_drafts {
    const int32_t *plain;
    int32_t n_plain;
    int32_t n_vocab;
    int mode;
    uint64_t random_state;
    int64_t proposed;
} forced_drafts;

static uint64_t next_random(uint64_t *state)
{
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return *state >> 33;
}

static int32_t propose(void *user, const int32_t *history, int32_t n_history, int32_t *drafts, int32_t max_drafts)
{
    forced_drafts *f = user;
    /* the history is plain decoding's (else the output already differs) */
    if (n_history > f->n_plain || memcmp(history, f->plain, (size_t)n_history * sizeof *history) != 0)
        return 0;
    int32_t count = 0;
    for (int32_t at = n_history; at < f->n_plain && count < max_drafts; at++) {
        int32_t right = f->plain[at];
        int32_t wrong = (right + 1 + (int32_t)(next_random(&f->random_state) % (uint64_t)(f->n_vocab - 1))) %
                        f->n_vocab;
        bool take_right = f->mode == 0 || (f->mode == 2 && next_random(&f->random_state) % 2 == 0);
        drafts[count++] = take_right ? right : wrong;
    }
    f->proposed += count;
    return count;
}

typedef struct run_config {
    bmoe_model *model;
    int threads;
    bool sampled;
    int32_t n_predict;
    const char *stop;          /* NULL: none */
    int free_after;            /* > 0: free the generation after this many steps */
    int32_t n_ctx;             /* 0: 256 */
    bmoe_speculation_params speculation;
} run_config;

static void generate(const run_config *config, outcome *out)
{
    memset(out, 0, sizeof *out);
    bmoe_error error = {0};
    bmoe_context_params context_params = bmoe_context_default_params();
    context_params.n_ctx = config->n_ctx > 0 ? config->n_ctx : 256;
    context_params.n_ubatch = 0;
    context_params.n_threads = config->threads;
    route_count routes = {.layer = -1};
    context_params.route_callback = count_route;
    context_params.route_user = &routes;
    bmoe_context *context = bmoe_context_create(config->model, &context_params, &error);
    CHECK_MSG(context != NULL, "context: %s", error.message);
    if (!context)
        return;
    bmoe_generation_params params = bmoe_generation_default_params();
    params.n_predict = config->n_predict;
    const char *stops[1] = {config->stop};
    if (config->stop) {
        params.stop_strings = stops;
        params.n_stop_strings = 1;
    }
    if (config->sampled) {
        params.sampler.temperature = 0.8f;
        params.sampler.top_k = 40;
        params.sampler.top_p = 0.9f;
        params.sampler.min_p = 0.02f;
        params.sampler.repeat_penalty = 1.3f;
        params.sampler.repeat_last_n = 32;
        params.sampler.frequency_penalty = 0.4f;
        params.sampler.presence_penalty = -0.2f;
        params.sampler.seed = 1234;
    }
    params.speculation = config->speculation;
    bmoe_generation *generation = bmoe_generation_start_text(context, &params, PROMPT, strlen(PROMPT), &error);
    CHECK_MSG(generation != NULL, "start: %s", error.message);
    if (!generation) {
        bmoe_context_free(context);
        return;
    }
    out->n_prompt = bmoe_generation_n_prompt(generation);
    routes.tokens = routes.batched = 0; /* the prefill's */
    bmoe_step step;
    int status;
    int steps = 0;
    while ((status = bmoe_generation_step(generation, &step, &error)) >= 0) {
        if (step.token >= 0 && out->n_tokens < MAX_TOKENS)
            out->tokens[out->n_tokens++] = step.token;
        if (out->length + step.text_length < sizeof out->text) {
            memcpy(out->text + out->length, step.text, step.text_length);
            out->length += step.text_length;
        }
        out->step_tokens += step.stats.n_tokens;
        if (status == 0) {
            out->stop = step.stop;
            break;
        }
        /* the token's logits are the next row, whatever batch computed them */
        if (config->free_after > 0 && ++steps == config->free_after)
            break;
    }
    CHECK_MSG(status >= 0, "step: %s", error.message);
    out->ok = status >= 0;
    bmoe_generation_spec_stats(generation, &out->spec);
    CHECK(bmoe_generation_decode_stats(generation)->n_tokens == out->step_tokens);
    /* the counters against the trace: every token a verify batch evaluated
     * routed once, as part of a batch; a rollback's re-evaluation is not
     * reported */
    CHECK_MSG(routes.tokens == out->step_tokens - out->spec.rollback_tokens &&
                  routes.batched == out->spec.drafted + out->spec.verify_batches,
              "routed %lld (%lld batched); evaluated %lld, drafted %lld in %lld batches, re-evaluated %lld",
              (long long)routes.tokens, (long long)routes.batched, (long long)out->step_tokens,
              (long long)out->spec.drafted, (long long)out->spec.verify_batches,
              (long long)out->spec.rollback_tokens);
    bmoe_generation_free(generation);
    out->position = bmoe_context_position(context);
    bmoe_context_free(context);
}

static bool same_output(const outcome *a, const outcome *b)
{
    return a->ok && b->ok && a->n_tokens == b->n_tokens &&
           memcmp(a->tokens, b->tokens, (size_t)a->n_tokens * sizeof *a->tokens) == 0 && a->length == b->length &&
           memcmp(a->text, b->text, a->length) == 0 && a->stop == b->stop && a->position == b->position;
}

static bmoe_speculation_params drafting(enum bmoe_draft_source source, int32_t n_draft, forced_drafts *forced)
{
    bmoe_speculation_params p = bmoe_generation_default_params().speculation;
    p.source = source;
    p.n_draft = n_draft;
    p.draft_callback = forced ? propose : NULL;
    p.draft_user = forced;
    /* these runs count drafts: the gate's pauses depend on timings (check_gate) */
    p.draft_always = true;
    return p;
}

/* The plain run's prompt and tokens, as the forced drafts' reference. */
static int32_t plain_sequence(bmoe_model *model, const outcome *plain, int32_t *sequence)
{
    bmoe_error error = {0};
    int32_t n = bmoe_tokenize(model, PROMPT, strlen(PROMPT), true, true, sequence, MAX_TOKENS, &error);
    CHECK(n == plain->n_prompt);
    if (n != plain->n_prompt)
        return 0;
    memcpy(sequence + n, plain->tokens, (size_t)plain->n_tokens * sizeof *sequence);
    return n + plain->n_tokens;
}

typedef struct totals {
    int64_t ngram_accepted;
} totals;

/* Every draft source against plain decoding, for one model, threads and sampler. */
static void check_exact(bmoe_model *model, const char *label, int threads, bool sampled, totals *sum)
{
    run_config config = {.model = model, .threads = threads, .sampled = sampled, .n_predict = N_PREDICT};
    outcome plain, got;
    generate(&config, &plain);
    CHECK_MSG(plain.ok && plain.n_tokens > 0, "%s: no plain output", label);
    CHECK(plain.spec.verify_batches == 0 && plain.spec.drafted == 0);
    /* plain decoding evaluates every token it hands out but a stopping one */
    CHECK(plain.position == plain.n_prompt + plain.n_tokens - (plain.stop == BMOE_STOP_N_PREDICT ? 0 : 1) ||
          plain.stop == BMOE_STOP_END_OF_GENERATION);

    /* n_draft and min_match: matches of the defaults' three tokens are rare
     * in a random model's text, a match of one token less so */
    static const int32_t ngram_configs[][2] = {{1, 3}, {3, 3}, {8, 1}};
    for (int i = 0; i < 3; i++) {
        /* sanitized: one draft a step and the most per step; 3 lies between
         * (the verify batch's size is all that changes) */
        if (TEST_SANITIZED && i == 1)
            continue;
        int32_t n_draft = ngram_configs[i][0];
        config.speculation = drafting(BMOE_DRAFT_NGRAM, n_draft, NULL);
        config.speculation.ngram_min_match = ngram_configs[i][1];
        generate(&config, &got);
        CHECK_MSG(same_output(&plain, &got), "%s threads %d %s: n-gram draft %d differs from plain decoding", label,
                  threads, sampled ? "sampled" : "greedy", n_draft);
        CHECK(got.spec.accepted <= got.spec.drafted && got.spec.drafted <= got.spec.verify_batches * n_draft);
        /* every evaluated token: one per handed-out decoded token, plus the
         * rejected drafts, plus the re-evaluated ones */
        CHECK_MSG(got.step_tokens == plain.step_tokens + (got.spec.drafted - got.spec.accepted) +
                                         got.spec.rollback_tokens,
                  "%s: %lld tokens evaluated", label, (long long)got.step_tokens);
        sum->ngram_accepted += got.spec.accepted;
    }

    int32_t sequence[2 * MAX_TOKENS];
    int32_t n_sequence = plain_sequence(model, &plain, sequence);
    for (int mode = 0; mode < 3; mode++) {
        forced_drafts forced = {.plain = sequence, .n_plain = n_sequence, .n_vocab = bmoe_model_n_vocab(model),
                                .mode = mode, .random_state = 99};
        int32_t n_draft = mode == 1 ? 3 : 8;
        config.speculation = drafting(BMOE_DRAFT_CALLBACK, n_draft, &forced);
        generate(&config, &got);
        CHECK_MSG(same_output(&plain, &got), "%s threads %d %s: forced drafts (mode %d) differ from plain decoding",
                  label, threads, sampled ? "sampled" : "greedy", mode);
        CHECK(got.spec.drafted == forced.proposed && got.spec.drafted > 0);
        if (mode == 0) {
            CHECK_MSG(got.spec.accepted == got.spec.drafted, "%s: forced right: %lld of %lld accepted", label,
                      (long long)got.spec.accepted, (long long)got.spec.drafted);
            /* one verify batch per n_draft + 1 tokens */
            CHECK(got.spec.verify_batches <= (plain.n_tokens + n_draft) / (n_draft + 1) + 1);
            CHECK(got.spec.rollback_tokens == 0 || plain.stop != BMOE_STOP_N_PREDICT);
        } else if (mode == 1) {
            CHECK(got.spec.accepted == 0);
        } else {
            CHECK(got.spec.accepted > 0 && got.spec.accepted < got.spec.drafted);
        }
    }
}

/* Stops inside an accepted run: a stop string whose token is a draft the
 * verify batch accepted, with more accepted drafts after it, and n_predict
 * in the middle of a run; and a generation freed between steps. */
static void check_stops(bmoe_model *model, const char *label)
{
    run_config config = {.model = model, .threads = 2, .sampled = false, .n_predict = N_PREDICT};
    outcome plain, got;
    generate(&config, &plain);
    int32_t sequence[2 * MAX_TOKENS];
    int32_t n_sequence = plain_sequence(model, &plain, sequence);
    forced_drafts forced = {.plain = sequence, .n_plain = n_sequence, .n_vocab = bmoe_model_n_vocab(model)};

    /* three ASCII letters from the plain text's second third as the stop
     * string (a token's bytes may be half a UTF-8 character, which the text
     * never shows): it ends on a token inside a run of 8 accepted drafts
     * unless it lands on a batch's first token */
    char stop[4] = "";
    for (size_t at = plain.length / 3; at + 3 <= plain.length && !stop[0]; at++) {
        const char *c = plain.text + at;
        bool letters = true;
        for (int k = 0; k < 3; k++)
            letters = letters && ((c[k] >= 'a' && c[k] <= 'z') || (c[k] >= 'A' && c[k] <= 'Z'));
        if (letters)
            memcpy(stop, c, 3);
    }
    CHECK_MSG(stop[0] != '\0', "%s: no three letters in the plain text", label);
    if (stop[0]) {
        config.stop = stop;
        outcome plain_stopped;
        generate(&config, &plain_stopped);
        CHECK(plain_stopped.stop == BMOE_STOP_STRING);
        forced.proposed = 0;
        config.speculation = drafting(BMOE_DRAFT_CALLBACK, 8, &forced);
        generate(&config, &got);
        CHECK_MSG(same_output(&plain_stopped, &got), "%s: a stop string inside accepted drafts: position %d vs %d",
                  label, got.position, plain_stopped.position);
        CHECK(got.spec.accepted > 0);
        config.stop = NULL;
    }

    /* n_predict 14: the second batch (tokens 10..18) would run past it */
    config.n_predict = 14;
    config.speculation = drafting(BMOE_DRAFT_NONE, 3, NULL);
    outcome plain_short;
    generate(&config, &plain_short);
    config.speculation = drafting(BMOE_DRAFT_CALLBACK, 8, &forced);
    generate(&config, &got);
    CHECK_MSG(same_output(&plain_short, &got), "%s: n_predict inside accepted drafts", label);
    CHECK(got.position == got.n_prompt + 14 && got.spec.accepted == got.spec.drafted);

    /* the context's end 12 tokens past the prompt: drafts never run past it */
    config.n_predict = N_PREDICT;
    config.n_ctx = plain.n_prompt + 12;
    config.speculation = drafting(BMOE_DRAFT_NONE, 3, NULL);
    outcome plain_full;
    generate(&config, &plain_full);
    CHECK(plain_full.stop == BMOE_STOP_CONTEXT_FULL);
    config.speculation = drafting(BMOE_DRAFT_CALLBACK, 8, &forced);
    generate(&config, &got);
    CHECK_MSG(same_output(&plain_full, &got), "%s: the context's end inside accepted drafts", label);
    config.n_ctx = 0;

    /* freed after 5 steps, inside the first batch's accepted run */
    config.n_predict = N_PREDICT;
    config.free_after = 5;
    config.speculation = drafting(BMOE_DRAFT_NONE, 3, NULL);
    outcome plain_freed;
    generate(&config, &plain_freed);
    config.speculation = drafting(BMOE_DRAFT_CALLBACK, 8, &forced);
    generate(&config, &got);
    CHECK_MSG(same_output(&plain_freed, &got) && got.position == got.n_prompt + 5,
              "%s: freed early: position %d vs %d", label, got.position, plain_freed.position);
}

static void check_refusals(bmoe_model *model, const char *path)
{
    bmoe_error error = {0};
    bmoe_context_params context_params = bmoe_context_default_params();
    context_params.n_ctx = 128;
    context_params.n_threads = 1;
    bmoe_context *context = bmoe_context_create(model, &context_params, &error);
    if (!context)
        return;
    int32_t prompt[2] = {1, 2};
    struct {
        enum bmoe_draft_source source;
        int32_t n_draft, min_match, max_match;
        float p_min;
        bmoe_status status;
        const char *says;
    } cases[] = {
        {BMOE_DRAFT_MTP, 3, 3, 12, 0.0f, BMOE_ERR_BAD_MODEL, "nextn"},
        {BMOE_DRAFT_NGRAM, 0, 3, 12, 0.0f, BMOE_ERR_INVALID_ARGUMENT, "1..8"},
        {BMOE_DRAFT_NGRAM, 9, 3, 12, 0.0f, BMOE_ERR_INVALID_ARGUMENT, "1..8"},
        {BMOE_DRAFT_NGRAM, 3, 4, 3, 0.0f, BMOE_ERR_INVALID_ARGUMENT, "min <= max"},
        {BMOE_DRAFT_CALLBACK, 3, 3, 12, 0.0f, BMOE_ERR_INVALID_ARGUMENT, "no draft callback"},
        /* the probability floor is the head's, within 0..1 (NaN is not) */
        {BMOE_DRAFT_NGRAM, 3, 3, 12, 0.5f, BMOE_ERR_INVALID_ARGUMENT, "the MTP head's"},
        {BMOE_DRAFT_NGRAM, 3, 3, 12, 1.5f, BMOE_ERR_INVALID_ARGUMENT, "need 0..1"},
        {BMOE_DRAFT_NGRAM, 3, 3, 12, -0.1f, BMOE_ERR_INVALID_ARGUMENT, "need 0..1"},
        {BMOE_DRAFT_NGRAM, 3, 3, 12, NAN, BMOE_ERR_INVALID_ARGUMENT, "need 0..1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bmoe_generation_params params = bmoe_generation_default_params();
        params.speculation.source = cases[i].source;
        params.speculation.n_draft = cases[i].n_draft;
        params.speculation.ngram_min_match = cases[i].min_match;
        params.speculation.ngram_max_match = cases[i].max_match;
        params.speculation.mtp_p_min = cases[i].p_min;
        memset(&error, 0, sizeof error);
        bmoe_generation *generation = bmoe_generation_start(context, &params, prompt, 2, &error);
        CHECK_MSG(generation == NULL && error.status == cases[i].status && strstr(error.message, cases[i].says),
                  "case %zu: %s", i, error.message);
        bmoe_generation_free(generation);
    }
    bmoe_context_free(context);

    /* the lossy levers act on single-token decodes: drafting would change the output */
    bmoe_model_params model_params = bmoe_model_default_params();
    model_params.stream.enabled = true;
    model_params.stream.cache_mb = 1;
    model_params.stream.direct = false;
    model_params.lossy.drop_cold_frac = 0.5f;
    bmoe_model *lossy = bmoe_model_load(path, &model_params, &error);
    CHECK_MSG(lossy != NULL, "load: %s", error.message);
    context = lossy ? bmoe_context_create(lossy, &context_params, &error) : NULL;
    if (context) {
        bmoe_generation_params params = bmoe_generation_default_params();
        params.speculation.source = BMOE_DRAFT_NGRAM;
        CHECK(bmoe_generation_start(context, &params, prompt, 2, &error) == NULL &&
              error.status == BMOE_ERR_INVALID_ARGUMENT && strstr(error.message, "lossy"));
        params.speculation.source = BMOE_DRAFT_NONE;
        bmoe_generation *generation = bmoe_generation_start(context, &params, prompt, 2, &error);
        CHECK(generation != NULL);
        bmoe_generation_free(generation);
    }
    bmoe_context_free(context);
    bmoe_model_free(lossy);
}

/* The drafter on hand-made histories (letters for token ids). */
static void check_ngram(void)
{
    int32_t drafts[8];
    /* a b c d a b c: the end "a b c" occurred before, followed by "d a b c" */
    const int32_t abcd[] = {'a', 'b', 'c', 'd', 'a', 'b', 'c'};
    CHECK(draft_ngram(abcd, 7, 3, 12, drafts, 8) == 4 && drafts[0] == 'd' && drafts[1] == 'a' && drafts[3] == 'c');
    CHECK(draft_ngram(abcd, 7, 3, 12, drafts, 2) == 2 && drafts[0] == 'd' && drafts[1] == 'a');
    /* shorter than min_match: nothing */
    CHECK(draft_ngram(abcd, 7, 4, 12, drafts, 8) == 0);
    /* the longest match wins over a more recent shorter one: "x b c" is the
     * recent one (length 2), "a b c" the long one (3) */
    const int32_t longest[] = {'a', 'b', 'c', 'P', 'x', 'b', 'c', 'Q', 'a', 'b', 'c'};
    CHECK(draft_ngram(longest, 11, 2, 12, drafts, 1) == 1 && drafts[0] == 'P');
    /* equal lengths: the most recent; capped at max_match 2, "b c" matches at
     * both earlier spots and the later one ("Q") wins */
    CHECK(draft_ngram(longest, 11, 2, 2, drafts, 1) == 1 && drafts[0] == 'Q');
    /* a repeated token predicts itself (the match overlaps the suffix) */
    const int32_t run[] = {'z', 'z', 'z', 'z'};
    CHECK(draft_ngram(run, 4, 3, 12, drafts, 8) == 1 && drafts[0] == 'z');
    /* the suffix never matches itself */
    const int32_t once[] = {'a', 'b', 'c'};
    CHECK(draft_ngram(once, 3, 1, 12, drafts, 8) == 0);
}
/* The gate (option_gate.h) on a draft source that is always wrong: 8 drafts
 * and a verify batch of 9 tokens for one token cost more than a plain step
 * on any machine, so drafting pauses, and the output stays plain
 * decoding's; with draft_always every step drafts. */
static void check_gate(bmoe_model *model, const char *label)
{
    run_config config = {.model = model, .threads = 1, .n_predict = 64};
    outcome plain, gated, always;
    generate(&config, &plain);
    CHECK_MSG(plain.ok && plain.n_tokens == 64, "%s: plain decoding gave %d tokens, not 64", label, plain.n_tokens);
    int32_t sequence[2 * MAX_TOKENS];
    int32_t n_sequence = plain_sequence(model, &plain, sequence);
    forced_drafts forced = {.plain = sequence, .n_plain = n_sequence, .n_vocab = bmoe_model_n_vocab(model),
                            .mode = 1, .random_state = 99};
    config.speculation = drafting(BMOE_DRAFT_CALLBACK, 8, &forced);
    config.speculation.draft_always = false;
    generate(&config, &gated);
    CHECK_MSG(same_output(&plain, &gated), "%s: the gated drafts changed the output", label);
    CHECK_MSG(gated.spec.paused_steps > 0 && gated.spec.accepted == 0 &&
                  gated.spec.verify_batches + gated.spec.paused_steps <= plain.n_tokens &&
                  gated.spec.verify_batches < plain.n_tokens / 2,
              "%s: drafts never accepted, yet %lld verify batches and %lld paused steps for %d tokens", label,
              (long long)gated.spec.verify_batches, (long long)gated.spec.paused_steps, plain.n_tokens);
    forced.proposed = 0;
    config.speculation.draft_always = true;
    generate(&config, &always);
    CHECK_MSG(same_output(&plain, &always) && always.spec.paused_steps == 0 &&
                  always.spec.verify_batches == plain.n_tokens - 1,
              "%s: draft_always: %lld verify batches, %lld paused, for %d tokens", label,
              (long long)always.spec.verify_batches, (long long)always.spec.paused_steps, plain.n_tokens);
}

int main(void)
{
    check_ngram();
    static const char *const names[] = {"qwen3moe-tiny-f32", "lfm2moe-tiny-f32", "qwen35moe-tiny-f32"};
    totals sum = {0};
    for (int i = 0; i < 3; i++) {
        char relative[128], path[1024];
        snprintf(relative, sizeof relative, "oracle/models/%s.gguf", names[i]);
        test_shared_path(path, sizeof path, relative);
        for (int streamed = 0; streamed < 2; streamed++) {
            bmoe_model_params params = bmoe_model_default_params();
            params.stream.enabled = streamed;
            params.stream.cache_mb = 1; /* a few experts of the model's dozens: reads and evictions */
            params.stream.direct = false; /* the page cache serves the misses: O_DIRECT would read the disk's seconds */
            bmoe_error error = {0};
            bmoe_model *model = bmoe_model_load(path, &params, &error);
            CHECK_MSG(model != NULL, "load %s: %s", names[i], error.message);
            if (!model)
                continue;
            char label[160];
            snprintf(label, sizeof label, "%s %s", names[i], streamed ? "streamed" : "resident");
            /* streamed: each sampler with one of the thread counts (the
             * expert store's path does not depend on them; the budget does) */
            for (int threads = 1; threads <= 2; threads++) {
                /* under the sanitizer, resident as streamed: each sampler
                 * once; and streamed the sampled run only, since the
                 * resident runs have taken both samplers through the
                 * drafts and the expert store serves a verify batch alike
                 * whichever sampler picks its tokens */
                bool every = !streamed && !TEST_SANITIZED;
                if (every || (threads == 1 && !(streamed && TEST_SANITIZED)))
                    check_exact(model, label, threads, false, &sum);
                if (every || threads == 2)
                    check_exact(model, label, threads, true, &sum);
            }
            if (!streamed) {
                check_stops(model, label);
                if (i == 0) {
                    check_refusals(model, path);
                    check_gate(model, label);
                }
            }
            bmoe_model_free(model);
        }
    }
    /* the repetitive prompt gives the n-gram drafter matches that hold */
    CHECK_MSG(sum.ngram_accepted > 0, "no n-gram draft was ever accepted");
    return test_finish();
}
