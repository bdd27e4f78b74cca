/* The generation API (include/bmoe.h): its greedy text equals the reference
 * engines' on stories260K and the oracle's greedy ids on a tiny MoE, and the
 * CLI's output; stepping and running agree; a second generation reuses the
 * cached prefix with logits bit-identical to a fresh context; truncating and
 * re-evaluating is bit-identical too; an abort during a long prefill stops
 * within one micro-batch and leaves a usable context; stop strings end the
 * text; each step's log-probabilities are the log-softmax of the row its
 * token was sampled from, and drafting changes neither them nor the tokens;
 * a token constraint is obeyed, told every token, and ends the generation
 * when it allows none, with or without drafts. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "../cli/cli_run.h"
#include "../models/oracle_support.h"
#include "bmoe.h"

static char stories_path[1024];

typedef struct collected {
    int32_t tokens[1024];
    int n_tokens;
    char text[8192];
    size_t length;
    enum bmoe_stop_reason stop;
    int n_final;
} collected;

static void collect(collected *c, const bmoe_step *step)
{
    if (step->token >= 0 && c->n_tokens < 1024)
        c->tokens[c->n_tokens++] = step->token;
    if (c->length + step->text_length < sizeof c->text) {
        memcpy(c->text + c->length, step->text, step->text_length);
        c->length += step->text_length;
        c->text[c->length] = '\0';
    }
    if (step->stop != BMOE_STOP_NONE) {
        c->stop = step->stop;
        c->n_final++;
    }
}

static bool collect_callback(void *user, const bmoe_step *step)
{
    collect(user, step);
    return true;
}

/* Steps a generation to its end, collecting every step. */
static void step_all(bmoe_generation *generation, collected *c)
{
    memset(c, 0, sizeof *c);
    bmoe_step step;
    bmoe_error error = {0};
    int status;
    int previous_index = 0;
    while ((status = bmoe_generation_step(generation, &step, &error)) == 1) {
        CHECK(step.index == previous_index + 1 && step.stop == BMOE_STOP_NONE && step.token >= 0);
        previous_index = step.index;
        collect(c, &step);
    }
    CHECK_MSG(status == 0, "step: %s", error.message);
    if (status == 0) {
        CHECK(step.token == -1 && step.stop != BMOE_STOP_NONE);
        collect(c, &step);
    }
}

static bmoe_context *make_context(bmoe_model *model, int n_ctx, int n_ubatch, enum bmoe_kv_type kv)
{
    bmoe_error error = {0};
    bmoe_context_params params = bmoe_context_default_params();
    params.n_ctx = n_ctx;
    params.n_ubatch = n_ubatch;
    params.n_threads = 2;
    params.kv_type = kv;
    bmoe_context *context = bmoe_context_create(model, &params, &error);
    CHECK_MSG(context != NULL, "context: %s", error.message);
    return context;
}

/* Runs bmoe-cli with args and returns its stdout (caller frees). */
static char *cli_stdout(const char *const *args, size_t *length)
{
    cli_result result;
    *length = 0;
    if (cli_run(args, &result) != 0) {
        CHECK_MSG(false, "bmoe-cli did not run");
        return NULL;
    }
    CHECK_MSG(result.exit_code == 0, "bmoe-cli exit %d: %s", result.exit_code, result.err);
    CHECK_MSG(cli_cut_report(&result), "no end-of-run lines after the text");
    char *out = result.out;
    *length = result.out_length;
    result.out = NULL;
    cli_result_free(&result);
    return out;
}

static void test_stories_text(bmoe_model *model)
{
    char path[1024];
    size_t expected_length = 0;
    test_shared_path(path, sizeof path, "data/models/stories260K/expected_llamacpp_once_upon_a_time_n196.txt");
    char *expected = cli_read_all(path, &expected_length);
    CHECK(expected != NULL);

    bmoe_context *context = make_context(model, 256, 0, BMOE_KV_F16);
    if (!context || !expected) {
        free(expected);
        bmoe_context_free(context);
        return;
    }
    bmoe_generation_params params = bmoe_generation_default_params();
    params.n_predict = 196;
    params.echo_prompt = true;
    bmoe_error error = {0};
    const char *prompt = "Once upon a time";
    bmoe_generation *generation = bmoe_generation_start_text(context, &params, prompt, strlen(prompt), &error);
    CHECK_MSG(generation != NULL, "start: %s", error.message);
    collected stepped;
    if (generation) {
        CHECK(bmoe_generation_n_prompt(generation) == 5 && bmoe_generation_n_reused(generation) == 0);
        step_all(generation, &stepped);
        CHECK(stepped.n_final == 1);
        CHECK(bmoe_generation_n_generated(generation) == stepped.n_tokens);
        /* every generated token was decoded: the cache holds the whole text */
        CHECK(bmoe_context_position(context) == 5 + stepped.n_tokens);
        CHECK(bmoe_generation_decode_stats(generation)->n_tokens == stepped.n_tokens);
        CHECK(bmoe_generation_prefill_stats(generation)->n_tokens == 5);
        CHECK(bmoe_generation_prefill_stats(generation)->wall_ms > 0.0);
        bmoe_generation_free(generation);
        /* llama-simple's text ends in a newline the CLI adds, not the generation */
        bool same = expected_length == stepped.length + 1 && memcmp(stepped.text, expected, stepped.length) == 0;
        CHECK_MSG(same, "API text differs from llama.cpp's: %.120s", stepped.text);
    }

    /* run to stop with a callback gives the same tokens and text */
    bmoe_context_truncate(context, 0);
    generation = bmoe_generation_start_text(context, &params, prompt, strlen(prompt), &error);
    collected run;
    memset(&run, 0, sizeof run);
    CHECK(generation && bmoe_generation_run(generation, collect_callback, &run, &error) == 0);
    bmoe_generation_free(generation);
    CHECK(run.n_final == 1 && run.stop == stepped.stop);
    CHECK(run.n_tokens == stepped.n_tokens &&
          memcmp(run.tokens, stepped.tokens, sizeof(int32_t) * (size_t)run.n_tokens) == 0);
    CHECK(run.length == stepped.length && memcmp(run.text, stepped.text, run.length) == 0);

    /* and the CLI prints exactly that text and a newline */
    const char *args[] = {"-m", stories_path, "-p", prompt, "-n", "196", "-c", "256", "-t", "2", NULL};
    size_t cli_length;
    char *cli_text = cli_stdout(args, &cli_length);
    CHECK(cli_text && cli_length == stepped.length + 1 && memcmp(cli_text, stepped.text, stepped.length) == 0 &&
          cli_text[stepped.length] == '\n');
    free(cli_text);
    free(expected);
    bmoe_context_free(context);
}

static void test_oracle_tokens(void)
{
    oracle_case c;
    if (oracle_case_load(&c, "qwen3moe-tiny-f32", "chat") != 0) {
        CHECK(false);
        return;
    }
    char path[1024];
    test_shared_path(path, sizeof path, "oracle/models/qwen3moe-tiny-f32.gguf");
    bmoe_error error = {0};
    bmoe_model *model = bmoe_model_load(path, NULL, &error);
    CHECK_MSG(model != NULL, "load: %s", error.message);
    bmoe_context *context = model ? make_context(model, 128, 0, BMOE_KV_F32) : NULL;
    if (!context) {
        bmoe_model_free(model);
        oracle_case_free(&c);
        return;
    }
    bmoe_generation_params params = bmoe_generation_default_params();
    params.n_predict = c.n_greedy;
    params.ignore_eos = true;
    params.echo_prompt = true;
    bmoe_generation *generation = bmoe_generation_start(context, &params, c.prompt_ids, c.n_prompt, &error);
    CHECK_MSG(generation != NULL, "start: %s", error.message);
    collected got;
    memset(&got, 0, sizeof got);
    if (generation) {
        step_all(generation, &got);
        bmoe_generation_free(generation);
    }
    CHECK(got.stop == BMOE_STOP_N_PREDICT);
    CHECK_MSG(got.n_tokens == c.n_greedy &&
                  memcmp(got.tokens, c.greedy_ids, sizeof(int32_t) * (size_t)c.n_greedy) == 0,
              "greedy ids differ from the oracle's");

    /* the CLI, given the same ids, prints the same text */
    char ids[4096] = "";
    size_t used = 0;
    for (int i = 0; i < c.n_prompt; i++)
        used += (size_t)snprintf(ids + used, sizeof ids - used, "%s%d", i ? "," : "", c.prompt_ids[i]);
    char n_predict[16];
    snprintf(n_predict, sizeof n_predict, "%d", c.n_greedy);
    const char *args[] = {"-m", path, "--prompt-ids", ids, "-n", n_predict, "--ignore-eos",
                          "--kv-type", "f32", "-c", "128", NULL};
    size_t cli_length;
    char *cli_text = cli_stdout(args, &cli_length);
    CHECK_MSG(cli_text && cli_length == got.length + 1 && memcmp(cli_text, got.text, got.length) == 0,
              "CLI text differs from the API's");
    free(cli_text);
    bmoe_context_free(context);
    bmoe_model_free(model);
    oracle_case_free(&c);
}

/* Logits after starting a generation with prompt on a fresh context. */
static float *fresh_logits(bmoe_model *model, const int32_t *prompt, int n_prompt)
{
    bmoe_context *context = make_context(model, 512, 32, BMOE_KV_F16);
    bmoe_generation_params params = bmoe_generation_default_params();
    bmoe_error error = {0};
    bmoe_generation *generation = context ? bmoe_generation_start(context, &params, prompt, n_prompt, &error) : NULL;
    CHECK_MSG(generation != NULL, "fresh start: %s", error.message);
    float *copy = NULL;
    if (generation) {
        size_t bytes = (size_t)bmoe_model_n_vocab(model) * sizeof(float);
        copy = malloc(bytes);
        memcpy(copy, bmoe_generation_logits(generation), bytes);
    }
    bmoe_generation_free(generation);
    bmoe_context_free(context);
    return copy;
}

static void test_prefix_reuse(bmoe_model *model)
{
    oracle_case c;
    if (oracle_case_load(&c, "qwen3moe-tiny-f32", "long") != 0) {
        CHECK(false);
        return;
    }
    size_t row_bytes = (size_t)bmoe_model_n_vocab(model) * sizeof(float);
    bmoe_context *context = make_context(model, 512, 32, BMOE_KV_F16);
    bmoe_generation_params params = bmoe_generation_default_params();
    params.n_predict = 6;
    params.ignore_eos = true;
    bmoe_error error = {0};

    /* first turn: 200 prompt tokens and 6 generated */
    bmoe_generation *generation = bmoe_generation_start(context, &params, c.prompt_ids, 200, &error);
    CHECK_MSG(generation != NULL, "first: %s", error.message);
    collected first;
    if (generation)
        step_all(generation, &first);
    bmoe_generation_free(generation);
    CHECK(bmoe_context_position(context) == 206);

    /* second turn: the first 150 tokens again, then a different tail */
    int32_t second[260];
    memcpy(second, c.prompt_ids, 150 * sizeof(int32_t));
    memcpy(second + 150, c.prompt_ids + 200, 100 * sizeof(int32_t));
    generation = bmoe_generation_start(context, &params, second, 250, &error);
    CHECK_MSG(generation != NULL, "second: %s", error.message);
    float *fresh = fresh_logits(model, second, 250);
    if (generation && fresh) {
        CHECK_MSG(bmoe_generation_n_reused(generation) == 150, "reused %d", bmoe_generation_n_reused(generation));
        CHECK(bmoe_generation_prefill_stats(generation)->n_tokens == 100);
        CHECK_MSG(memcmp(bmoe_generation_logits(generation), fresh, row_bytes) == 0,
                  "logits after prefix reuse differ from a fresh context's");
    }
    bmoe_generation_free(generation);
    free(fresh);

    /* a prompt the cache already holds whole: all but its last token reused */
    generation = bmoe_generation_start(context, &params, second, 200, &error);
    fresh = fresh_logits(model, second, 200);
    CHECK(generation && bmoe_generation_n_reused(generation) == 199);
    CHECK(generation && fresh && memcmp(bmoe_generation_logits(generation), fresh, row_bytes) == 0);
    bmoe_generation_free(generation);
    free(fresh);

    /* one generation at a time on a context */
    generation = bmoe_generation_start(context, &params, second, 10, &error);
    bmoe_error second_error = {0};
    CHECK(generation && bmoe_generation_start(context, &params, second, 10, &second_error) == NULL &&
          second_error.status == BMOE_ERR_INVALID_ARGUMENT);
    bmoe_generation_free(generation);
    bmoe_context_free(context);
    oracle_case_free(&c);
}

static void test_truncate(bmoe_model *model)
{
    oracle_case c;
    if (oracle_case_load(&c, "qwen3moe-tiny-f32", "long") != 0) {
        CHECK(false);
        return;
    }
    int n_vocab = bmoe_model_n_vocab(model);
    float *reference = malloc(sizeof(float) * 60 * (size_t)n_vocab);
    float *again = malloc(sizeof(float) * 60 * (size_t)n_vocab);
    bmoe_error error = {0};
    bmoe_context *fresh = make_context(model, 128, 16, BMOE_KV_F16);
    bmoe_context *reused = make_context(model, 128, 16, BMOE_KV_F16);
    CHECK(fresh && bmoe_eval(fresh, c.prompt_ids, 60, reference, true, NULL, &error) == 0);
    /* a different continuation first, then truncate back to 25 and redo 25..59 */
    CHECK(reused && bmoe_eval(reused, c.prompt_ids + 100, 60, again, true, NULL, &error) == 0);
    bmoe_context_truncate(reused, 0);
    CHECK(reused && bmoe_eval(reused, c.prompt_ids, 40, again, true, NULL, &error) == 0);
    CHECK(reused && bmoe_eval(reused, c.prompt_ids + 200, 30, again, true, NULL, &error) == 0);
    bmoe_context_truncate(reused, 25);
    CHECK(reused && bmoe_context_position(reused) == 25);
    CHECK(reused && bmoe_eval(reused, c.prompt_ids + 25, 35, again, true, NULL, &error) == 0);
    CHECK_MSG(memcmp(reference + (size_t)25 * n_vocab, again, sizeof(float) * 35 * (size_t)n_vocab) == 0,
              "logits after truncate and re-evaluation differ from a fresh context's");
    CHECK(reused && memcmp(bmoe_context_tokens(reused), c.prompt_ids, 60 * sizeof(int32_t)) == 0);
    bmoe_context_free(fresh);
    bmoe_context_free(reused);
    free(reference);
    free(again);
    oracle_case_free(&c);
}

/* Abort once the router has seen a token at or past abort_at. */
typedef struct abort_state {
    int32_t abort_at;
    int32_t highest_position;
    bool armed;
} abort_state;

static void note_route(void *user, const bmoe_route_event *event)
{
    abort_state *state = user;
    if (event->position > state->highest_position)
        state->highest_position = event->position;
}

static bool should_abort(void *user)
{
    abort_state *state = user;
    return state->armed && state->highest_position >= state->abort_at;
}

static void test_abort(bmoe_model *model)
{
    oracle_case c;
    if (oracle_case_load(&c, "qwen3moe-tiny-f32", "long") != 0) {
        CHECK(false);
        return;
    }
    abort_state state = {.abort_at = 40, .highest_position = -1, .armed = true};
    bmoe_error error = {0};
    bmoe_context_params params = bmoe_context_default_params();
    params.n_ctx = 512;
    params.n_ubatch = 16;
    params.n_threads = 2;
    params.route_callback = note_route;
    params.route_user = &state;
    params.abort_callback = should_abort;
    params.abort_user = &state;
    bmoe_context *context = bmoe_context_create(model, &params, &error);
    CHECK_MSG(context != NULL, "context: %s", error.message);
    if (!context) {
        oracle_case_free(&c);
        return;
    }
    bmoe_generation_params generation_params = bmoe_generation_default_params();
    generation_params.n_predict = 8;
    generation_params.ignore_eos = true;
    /* the router sees position 40 in the third micro-batch (32..47): the
     * abort lands inside it, so two micro-batches stay in the cache */
    bmoe_generation *generation = bmoe_generation_start(context, &generation_params, c.prompt_ids, 300, &error);
    CHECK(generation == NULL);
    CHECK_MSG(error.status == BMOE_ERR_ABORTED, "status %d: %s", (int)error.status, error.message);
    CHECK_MSG(bmoe_context_position(context) == 32, "position %d after the abort", bmoe_context_position(context));
    CHECK(state.highest_position < 48);

    /* the context then generates normally, reusing what completed */
    state.armed = false;
    generation = bmoe_generation_start(context, &generation_params, c.prompt_ids, 300, &error);
    CHECK_MSG(generation != NULL, "after abort: %s", error.message);
    collected after;
    memset(&after, 0, sizeof after);
    if (generation) {
        CHECK(bmoe_generation_n_reused(generation) == 32);
        step_all(generation, &after);
        bmoe_generation_free(generation);
    }
    bmoe_context_truncate(context, 0);
    generation = bmoe_generation_start(context, &generation_params, c.prompt_ids, 300, &error);
    collected clean;
    memset(&clean, 0, sizeof clean);
    if (generation) {
        step_all(generation, &clean);
        bmoe_generation_free(generation);
    }
    CHECK(after.n_tokens == 8 && clean.n_tokens == 8 &&
          memcmp(after.tokens, clean.tokens, sizeof(int32_t) * 8) == 0);

    /* an abort between decode steps ends the generation as a stop */
    state.abort_at = 305;
    state.highest_position = -1;
    state.armed = true;
    bmoe_context_truncate(context, 0);
    generation = bmoe_generation_start(context, &generation_params, c.prompt_ids, 300, &error);
    collected stopped;
    memset(&stopped, 0, sizeof stopped);
    if (generation) {
        step_all(generation, &stopped);
        bmoe_generation_free(generation);
    }
    CHECK(stopped.stop == BMOE_STOP_ABORTED && stopped.n_tokens >= 5 && stopped.n_tokens < 8);
    bmoe_context_free(context);
    oracle_case_free(&c);
}

static void test_stop_strings(bmoe_model *model)
{
    /* stories' greedy text: "Once upon a time, there was a little girl named Lily. She loved ..." */
    bmoe_context *context = make_context(model, 0, 0, BMOE_KV_F16);
    if (!context)
        return;
    const char *stops[] = {"Lily"};
    bmoe_generation_params params = bmoe_generation_default_params();
    params.n_predict = 64;
    params.stop_strings = stops;
    params.n_stop_strings = 1;
    bmoe_error error = {0};
    const char *prompt = "Once upon a time";
    bmoe_generation *generation = bmoe_generation_start_text(context, &params, prompt, strlen(prompt), &error);
    collected got;
    memset(&got, 0, sizeof got);
    if (generation) {
        step_all(generation, &got);
        bmoe_generation_free(generation);
    }
    CHECK(got.stop == BMOE_STOP_STRING);
    CHECK_MSG(strcmp(got.text, ", there was a little girl named ") == 0, "text before the stop: '%s'", got.text);
    bmoe_context_free(context);
}

#define LOGPROB_STEPS 24

/* One generation's tokens and log-probabilities. */
typedef struct logprob_run {
    int32_t tokens[LOGPROB_STEPS];
    float logprob[LOGPROB_STEPS];
    bmoe_token_logprob top[LOGPROB_STEPS][5];
    int n;
} logprob_run;

/* Drafts of a callback source: the next tokens of an earlier run of the
 * same generation (all accepted: the verify batches hand out rows plain
 * decoding never computes alone). */
typedef struct replayed_drafts {
    const int32_t *tokens;
    int32_t n_tokens, n_prompt;
} replayed_drafts;

static int32_t replay_drafts(void *user, const int32_t *history, int32_t n_history, int32_t *drafts,
                             int32_t max_drafts)
{
    (void)history;
    const replayed_drafts *r = user;
    int32_t next = n_history - r->n_prompt; /* the history ends with the token about to be evaluated */
    int32_t n = 0;
    while (n < max_drafts && next + n >= 0 && next + n < r->n_tokens) {
        drafts[n] = r->tokens[next + n];
        n++;
    }
    return n;
}

/* A sampled generation of the prompt with logprobs (top 5) when asked;
 * with check, each step's figures against the log-softmax of the row the
 * generation showed before the step, computed here in double. */
static void run_logprobs(bmoe_model *model, const int32_t *prompt, int32_t n_prompt, bool logprobs,
                         replayed_drafts *drafts, bool check, logprob_run *out)
{
    memset(out, 0, sizeof *out);
    int32_t n_vocab = bmoe_model_n_vocab(model);
    bmoe_context *context = make_context(model, 256, 8, BMOE_KV_F16);
    float *row = malloc((size_t)n_vocab * sizeof *row);
    bmoe_generation_params params = bmoe_generation_default_params();
    params.n_predict = LOGPROB_STEPS;
    params.ignore_eos = true;
    params.sampler.temperature = 1.5f;
    params.sampler.top_k = 0;
    params.sampler.top_p = 1.0f;
    params.sampler.min_p = 0.0f;
    params.sampler.seed = 7;
    params.logprobs = logprobs;
    params.top_logprobs = logprobs ? 5 : 0;
    params.speculation.source = drafts ? BMOE_DRAFT_CALLBACK : BMOE_DRAFT_NONE;
    params.speculation.n_draft = 4;
    params.speculation.draft_always = true;
    params.speculation.draft_callback = replay_drafts;
    params.speculation.draft_user = drafts;
    bmoe_error error = {0};
    bmoe_generation *generation = context ? bmoe_generation_start(context, &params, prompt, n_prompt, &error) : NULL;
    CHECK_MSG(generation != NULL && row != NULL, "start: %s", error.message);
    bmoe_step step;
    while (generation && row && bmoe_generation_step(generation, &step, &error) == 1 && out->n < LOGPROB_STEPS) {
        CHECK(step.token >= 0);
        out->tokens[out->n] = step.token;
        out->logprob[out->n] = step.logprob;
        if (!logprobs) {
            CHECK(step.logprob == 0.0f && step.n_top == 0 && step.top == NULL);
        } else if (step.n_top == 5 && step.top) {
            memcpy(out->top[out->n], step.top, sizeof out->top[out->n]);
        } else {
            CHECK_MSG(false, "step %d: %d top tokens", out->n, step.n_top);
        }
        if (check && logprobs && out->n > 0) {
            /* row: what bmoe_generation_logits showed before this step */
            double max = -INFINITY, total = 0.0;
            for (int32_t i = 0; i < n_vocab; i++)
                max = row[i] > max ? row[i] : max;
            for (int32_t i = 0; i < n_vocab; i++)
                total += exp((double)row[i] - max);
            double log_total = max + log(total);
            CHECK_MSG(fabs(step.logprob - (row[step.token] - log_total)) < 1e-4, "step %d: logprob %g, row says %g",
                      out->n, step.logprob, row[step.token] - log_total);
            for (int k = 0; k < 5 && step.top; k++) {
                CHECK(fabs(step.top[k].logprob - (row[step.top[k].token] - log_total)) < 1e-4);
                if (k > 0)
                    CHECK(step.top[k].logprob <= step.top[k - 1].logprob && step.top[k].token != step.top[k - 1].token);
            }
            int better = 0; /* tokens more likely than the fifth: the four before it */
            for (int32_t i = 0; i < n_vocab && step.top; i++)
                better += row[i] > row[step.top[4].token];
            CHECK_MSG(step.top && better <= 4, "step %d: %d tokens beat the fifth", out->n, better);
        }
        out->n++;
        memcpy(row, bmoe_generation_logits(generation), (size_t)n_vocab * sizeof *row);
    }
    CHECK(out->n == LOGPROB_STEPS);
    if (generation && drafts) {
        bmoe_spec_stats spec;
        bmoe_generation_spec_stats(generation, &spec);
        CHECK_MSG(spec.accepted > LOGPROB_STEPS / 2, "%lld of %lld drafts accepted", (long long)spec.accepted,
                  (long long)spec.drafted);
    }
    bmoe_generation_free(generation);
    bmoe_context_free(context);
    free(row);
}

static void test_logprobs(bmoe_model *model)
{
    oracle_case c;
    if (oracle_case_load(&c, "qwen3moe-tiny-f32", "long") != 0) {
        CHECK(false);
        return;
    }
    const int32_t *prompt = c.prompt_ids;
    logprob_run plain, off, drafted;
    run_logprobs(model, prompt, 48, true, NULL, true, &plain);
    run_logprobs(model, prompt, 48, false, NULL, false, &off);
    replayed_drafts drafts = {plain.tokens, plain.n, 48};
    run_logprobs(model, prompt, 48, true, &drafts, false, &drafted);
    CHECK_MSG(memcmp(plain.tokens, off.tokens, sizeof plain.tokens) == 0, "logprobs changed the tokens");
    CHECK_MSG(memcmp(plain.tokens, drafted.tokens, sizeof plain.tokens) == 0 &&
                  memcmp(plain.logprob, drafted.logprob, sizeof plain.logprob) == 0 &&
                  memcmp(plain.top, drafted.top, sizeof plain.top) == 0,
              "accepted drafts changed the tokens or their log-probabilities");
    /* sampled at temperature 1.5, some tokens are not the most likely */
    int not_best = 0;
    for (int i = 0; i < plain.n; i++)
        not_best += plain.top[i][0].token != plain.tokens[i];
    CHECK_MSG(not_best > 0, "every sampled token was the most likely: the top list is not tested against them");

    bmoe_context *context = make_context(model, 64, 8, BMOE_KV_F16);
    bmoe_generation_params params = bmoe_generation_default_params();
    bmoe_error error = {0};
    params.logprobs = true;
    params.top_logprobs = BMOE_MAX_TOP_LOGPROBS + 1;
    CHECK(context && bmoe_generation_start(context, &params, prompt, 4, &error) == NULL &&
          error.status == BMOE_ERR_INVALID_ARGUMENT && strstr(error.message, "top_logprobs"));
    params.logprobs = false;
    params.top_logprobs = 3;
    CHECK(context && bmoe_generation_start(context, &params, prompt, 4, &error) == NULL &&
          error.status == BMOE_ERR_INVALID_ARGUMENT);
    bmoe_context_free(context);
    oracle_case_free(&c);
}

/* A token constraint for the tests: tokens whose id is a multiple of
 * modulus (1: every token), none once `limit` tokens were taken. */
typedef struct every_nth {
    int32_t modulus, limit;
    int32_t taken[64];
    int n_taken, n_rows;
} every_nth;

static bool every_nth_allows(void *user, int32_t token)
{
    const every_nth *c = user;
    return c->n_taken < c->limit && token % c->modulus == 0;
}

static int32_t every_nth_allowed(void *user, uint8_t *allowed, int32_t n_vocab)
{
    every_nth *c = user;
    c->n_rows++;
    int32_t count = 0;
    for (int32_t t = 0; t < n_vocab; t++)
        count += allowed[t] = every_nth_allows(c, t);
    return count;
}

static void every_nth_accept(void *user, int32_t token)
{
    every_nth *c = user;
    if (c->n_taken < 64)
        c->taken[c->n_taken] = token;
    c->n_taken++;
}

#define CONSTRAINED_STEPS 20

/* A generation under c (greedy or sampled, drafting the tokens of drafts
 * when given); with check_greedy, each token against the best allowed one
 * of the row shown before its step. */
static void run_constrained(bmoe_model *model, const int32_t *prompt, int32_t n_prompt, every_nth *c, float temperature,
                            replayed_drafts *drafts, bool check_greedy, collected *out)
{
    int32_t n_vocab = bmoe_model_n_vocab(model);
    bmoe_token_constraint constraint = {every_nth_allowed, every_nth_allows, every_nth_accept, c};
    bmoe_context *context = make_context(model, 256, 8, BMOE_KV_F16);
    float *row = malloc((size_t)n_vocab * sizeof *row);
    bmoe_generation_params params = bmoe_generation_default_params();
    params.n_predict = CONSTRAINED_STEPS;
    params.ignore_eos = true;
    params.sampler.temperature = temperature;
    params.sampler.seed = 11;
    params.constraint = &constraint;
    params.speculation.source = drafts ? BMOE_DRAFT_CALLBACK : BMOE_DRAFT_NONE;
    params.speculation.n_draft = 4;
    params.speculation.draft_always = true;
    params.speculation.draft_callback = replay_drafts;
    params.speculation.draft_user = drafts;
    bmoe_error error = {0};
    bmoe_generation *generation = context ? bmoe_generation_start(context, &params, prompt, n_prompt, &error) : NULL;
    CHECK_MSG(generation != NULL && row != NULL, "start: %s", error.message);
    memset(out, 0, sizeof *out);
    bmoe_step step;
    int status = 0;
    while (generation && row) {
        memcpy(row, bmoe_generation_logits(generation), (size_t)n_vocab * sizeof *row);
        if ((status = bmoe_generation_step(generation, &step, &error)) != 1)
            break;
        collect(out, &step);
        if (check_greedy) {
            int32_t best = -1;
            for (int32_t t = 0; t < n_vocab; t += c->modulus)
                if (best < 0 || row[t] > row[best])
                    best = t;
            CHECK_MSG(step.token == best, "step %d: token %d, the best allowed is %d", step.index, step.token, best);
        }
    }
    CHECK_MSG(status == 0, "step: %s", error.message);
    if (status == 0)
        collect(out, &step);
    bmoe_generation_free(generation);
    bmoe_context_free(context);
    free(row);
}

static void test_constraint(bmoe_model *model)
{
    oracle_case k;
    if (oracle_case_load(&k, "qwen3moe-tiny-f32", "long") != 0) {
        CHECK(false);
        return;
    }
    const int32_t *prompt = k.prompt_ids;
    /* greedy: the best of the allowed tokens, each told to the constraint */
    every_nth third = {.modulus = 3, .limit = 1000};
    collected greedy;
    run_constrained(model, prompt, 32, &third, 0.0f, NULL, true, &greedy);
    CHECK(greedy.n_tokens == CONSTRAINED_STEPS && greedy.stop == BMOE_STOP_N_PREDICT);
    CHECK(third.n_taken == greedy.n_tokens && memcmp(third.taken, greedy.tokens, sizeof(int32_t) * 20) == 0);
    int free_choice = 0; /* steps whose unconstrained best was refused */
    every_nth any = {.modulus = 1, .limit = 1000};
    collected unconstrained;
    run_constrained(model, prompt, 32, &any, 0.0f, NULL, false, &unconstrained);
    for (int i = 0; i < CONSTRAINED_STEPS; i++)
        free_choice += unconstrained.tokens[i] % 3 != 0;
    CHECK_MSG(free_choice > 0, "the model's own choices were all allowed: the mask was not tested");
    /* a greedy choice the constraint allows needs no row */
    CHECK_MSG(any.n_rows == 0, "%d whole rows asked where every choice was allowed", any.n_rows);

    /* none allowed: the end */
    every_nth five = {.modulus = 1, .limit = 5};
    collected ended;
    run_constrained(model, prompt, 32, &five, 0.0f, NULL, false, &ended);
    CHECK(ended.n_tokens == 5 && ended.stop == BMOE_STOP_END_OF_GENERATION && ended.n_final == 1);

    /* sampled: drafts of the plain run's tokens (accepted) and of refused
     * tokens give the same tokens as plain decoding */
    every_nth plain_rule = {.modulus = 2, .limit = 1000};
    collected plain;
    run_constrained(model, prompt, 32, &plain_rule, 1.5f, NULL, false, &plain);
    CHECK(plain.n_tokens == CONSTRAINED_STEPS);
    for (int i = 0; i < plain.n_tokens; i++)
        CHECK(plain.tokens[i] % 2 == 0);
    int32_t refused[CONSTRAINED_STEPS];
    for (int i = 0; i < CONSTRAINED_STEPS; i++)
        refused[i] = plain.tokens[i] + 1;
    replayed_drafts right = {plain.tokens, plain.n_tokens, 32}, wrong = {refused, CONSTRAINED_STEPS, 32};
    every_nth right_rule = {.modulus = 2, .limit = 1000}, wrong_rule = {.modulus = 2, .limit = 1000};
    collected with_right, with_wrong;
    run_constrained(model, prompt, 32, &right_rule, 1.5f, &right, false, &with_right);
    run_constrained(model, prompt, 32, &wrong_rule, 1.5f, &wrong, false, &with_wrong);
    CHECK_MSG(with_right.n_tokens == plain.n_tokens && memcmp(with_right.tokens, plain.tokens, sizeof plain.tokens) == 0,
              "accepted drafts changed a constrained generation");
    CHECK_MSG(with_wrong.n_tokens == plain.n_tokens && memcmp(with_wrong.tokens, plain.tokens, sizeof plain.tokens) == 0,
              "refused drafts changed a constrained generation");
    /* a verify batch may choose one token past the end, which is never handed out */
    CHECK(right_rule.n_taken >= plain.n_tokens && right_rule.n_taken <= plain.n_tokens + 1 &&
          memcmp(right_rule.taken, plain.tokens, sizeof plain.tokens[0] * CONSTRAINED_STEPS) == 0);
    CHECK(wrong_rule.n_taken >= plain.n_tokens && wrong_rule.n_taken <= plain.n_tokens + 1 &&
          memcmp(wrong_rule.taken, plain.tokens, sizeof plain.tokens[0] * CONSTRAINED_STEPS) == 0);

    bmoe_token_constraint incomplete = {every_nth_allowed, NULL, every_nth_accept, &third};
    bmoe_generation_params params = bmoe_generation_default_params();
    params.constraint = &incomplete;
    bmoe_context *context = make_context(model, 64, 8, BMOE_KV_F16);
    bmoe_error error = {0};
    CHECK(context && bmoe_generation_start(context, &params, prompt, 4, &error) == NULL &&
          error.status == BMOE_ERR_INVALID_ARGUMENT && strstr(error.message, "constraint"));
    bmoe_context_free(context);
    oracle_case_free(&k);
}

int main(void)
{
    test_shared_path(stories_path, sizeof stories_path, "data/models/stories260K/stories260K.gguf");
    bmoe_error error = {0};
    bmoe_model *stories = bmoe_model_load(stories_path, NULL, &error);
    CHECK_MSG(stories != NULL, "load: %s", error.message);
    char path[1024];
    test_shared_path(path, sizeof path, "oracle/models/qwen3moe-tiny-f32.gguf");
    bmoe_model *moe = bmoe_model_load(path, NULL, &error);
    CHECK_MSG(moe != NULL, "load: %s", error.message);
    if (stories) {
        test_stories_text(stories);
        test_stop_strings(stories);
    }
    test_oracle_tokens();
    if (moe) {
        test_prefix_reuse(moe);
        test_truncate(moe);
        test_abort(moe);
        test_logprobs(moe);
        test_constraint(moe);
    }
    bmoe_model_free(stories);
    bmoe_model_free(moe);
    return test_finish();
}
