/* The generation loop every front end shares (CLI, session, server): start
 * from a prompt on a context (keeping the cached prefix the prompt shares),
 * prefill, then per step sample a token, apply the stop rules, append its
 * text and decode it so the next logits are ready. Each step reports its
 * token, the text that became final and what its decode cost. With drafting
 * on (speculation.c), a decode may settle several tokens at once; they are
 * handed out one per step, each through the same stop rules.
 * Owns: the sampler, the logits row, the text stream, the speculation state
 * and a copy of the prompt; the context stays the caller's. */
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "process_stats.h"
#include "speculation.h"
#include "text_stream.h"
#include "token_pick.h"

/* Token pieces longer than this take the heap buffer. */
#define GENERATION_PIECE_BYTES 256

struct bmoe_generation {
    bmoe_context *context;
    bmoe_generation_params params;
    bmoe_sampler *sampler;
    token_pick pick;        /* the sampler under the params' constraint */
    float *logits;          /* [n_vocab] the row the next token is sampled from */
    text_stream text;
    char piece[GENERATION_PIECE_BYTES];
    char *large_piece;
    int32_t large_piece_size;
    int32_t n_prompt, n_reused, n_generated;
    bmoe_stats prefill, decode;
    /* the context position plain decoding would have now: the prompt and
     * the tokens handed out and decoded; the context may hold more (drafts
     * a verify batch accepted that are not handed out yet) */
    int32_t committed;
    speculation spec;
    /* whether the predictive read-ahead pays (option_gate.h); read_ahead_gated:
     * the model reads ahead and the gate decides when */
    option_gate read_ahead_gate;
    bool read_ahead_gated;
    enum bmoe_stop_reason pending_stop; /* the stop the next step reports */
    bmoe_token_logprob top[BMOE_MAX_TOP_LOGPROBS]; /* the last step's most likely tokens (params.logprobs) */
    double started;         /* monotonic seconds: the prompt handed to the library */
    double ttft_ms;         /* until the first generated token was handed back; 0: none yet */
    bool finished;
};

bmoe_generation_params bmoe_generation_default_params(void)
{
    bmoe_generation_params params = {
        .n_predict = 128,
        .ignore_eos = false,
        .echo_prompt = false,
        .render_special = true,
        .stop_strings = NULL,
        .n_stop_strings = 0,
        .sampler = bmoe_sampler_default_params(),
        .speculation =
            {
                .source = BMOE_DRAFT_NONE,
                .n_draft = 3,
                .ngram_min_match = 3,
                .ngram_max_match = 12,
                .mtp_p_min = 0.0f,
                .draft_always = false,
                .draft_callback = NULL,
                .draft_user = NULL,
            },
        .logprobs = false,
        .top_logprobs = 0,
        .constraint = NULL,
    };
    return params;
}

void bmoe_generation_free(bmoe_generation *generation)
{
    if (!generation)
        return;
    /* stopped early: the drafts accepted past the last handed-out token go */
    if (generation->spec.enabled && generation->context->position > generation->committed) {
        bmoe_error ignored;
        if (speculation_rollback(&generation->spec, generation->context, generation->committed, NULL, &ignored) != 0)
            bmoe_context_truncate(generation->context, generation->committed);
    }
    speculation_free(&generation->spec);
    generation->context->generating = false;
    token_pick_free(&generation->pick);
    bmoe_sampler_free(generation->sampler);
    free(generation->logits);
    free(generation->large_piece);
    text_stream_free(&generation->text);
    free(generation);
}

/* Appends token's piece to the text. Returns 1 when a stop string appeared,
 * 0 otherwise, -1 on error. */
static int append_piece(bmoe_generation *generation, int32_t token, bool check_stops, bmoe_error *err)
{
    const bmoe_model *m = generation->context->model;
    bool render = generation->params.render_special;
    int32_t length = tokenizer_token_to_piece(m->tokenizer, token, render, generation->piece, GENERATION_PIECE_BYTES);
    if (length <= 0)
        return 0;
    const char *bytes = generation->piece;
    if (length > GENERATION_PIECE_BYTES) {
        if (length > generation->large_piece_size) {
            char *bigger = realloc(generation->large_piece, (size_t)length);
            if (!bigger)
                return error_set_status(err, BMOE_ERR_OUT_OF_MEMORY, "generation: out of memory for a %d-byte piece",
                                        length);
            generation->large_piece = bigger;
            generation->large_piece_size = length;
        }
        length = tokenizer_token_to_piece(m->tokenizer, token, render, generation->large_piece, length);
        bytes = generation->large_piece;
    }
    return text_stream_push(&generation->text, bytes, (size_t)length, check_stops, err);
}

/* The longest prefix of the cached tokens the prompt shares, short of the
 * whole prompt: its last token is always evaluated so the logits are fresh. */
static int32_t shared_prefix(const bmoe_context *context, const int32_t *prompt, int32_t n_prompt)
{
    int32_t limit = context->position < n_prompt - 1 ? context->position : n_prompt - 1;
    int32_t shared = 0;
    while (shared < limit && context->tokens[shared] == prompt[shared])
        shared++;
    /* a sliding window's ring that lost part of the prefix's window: as much
     * as its checkpoint keeps, else the prompt evaluated whole rather than
     * replayed and counted reused */
    return context_kept_prefix(context, shared);
}

static bmoe_generation *start_failed(bmoe_generation *generation, bmoe_error *err, bmoe_status fallback,
                                     bmoe_error *error)
{
    if (generation)
        speculation_free(&generation->spec); /* nothing drafted: the context stays as the prefill left it */
    bmoe_generation_free(generation);
    engine_report(err, fallback, error);
    return NULL;
}

bmoe_generation *bmoe_generation_start(bmoe_context *context, const bmoe_generation_params *params,
                                       const int32_t *prompt, int32_t n_prompt, bmoe_error *error)
{
    double started = engine_now_seconds();
    bmoe_error err;
    error_clear(&err);
    if (!context || (!prompt && n_prompt > 0) || n_prompt < 0) {
        error_set_status(&err, BMOE_ERR_INVALID_ARGUMENT, "generation: no context or no prompt");
        engine_report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
        return NULL;
    }
    const bmoe_model *m = context->model;
    if (!m->tokenizer) {
        error_set_status(&err, BMOE_ERR_BAD_MODEL, "generation: the model has no vocabulary to turn tokens into text");
        engine_report(&err, BMOE_ERR_BAD_MODEL, error);
        return NULL;
    }
    if (context->generating) {
        error_set_status(&err, BMOE_ERR_INVALID_ARGUMENT,
                         "generation: the context already has a generation (free it first)");
        engine_report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
        return NULL;
    }
    if (n_prompt == 0) {
        error_set_status(&err, BMOE_ERR_INVALID_ARGUMENT,
                         "generation: the prompt is empty and the vocabulary adds no BOS token: nothing to evaluate");
        engine_report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
        return NULL;
    }
    if (n_prompt > context->n_ctx) {
        error_set_status(&err, BMOE_ERR_CONTEXT_FULL, "generation: the prompt has %d tokens, more than the context size %d",
                         n_prompt, context->n_ctx);
        engine_report(&err, BMOE_ERR_CONTEXT_FULL, error);
        return NULL;
    }
    /* the model's files must still be the ones loaded */
    if (engine_check_files(context, true, &err) != 0) {
        engine_report(&err, BMOE_ERR_IO, error);
        return NULL;
    }
    bmoe_generation_params p = params ? *params : bmoe_generation_default_params();
    int32_t n_vocab = m->model.hparams.n_vocab;
    bmoe_generation *generation = calloc(1, sizeof *generation);
    if (!generation) {
        error_set_status(&err, BMOE_ERR_OUT_OF_MEMORY, "generation: out of memory");
        engine_report(&err, BMOE_ERR_OUT_OF_MEMORY, error);
        return NULL;
    }
    generation->context = context;
    generation->started = started;
    context->generating = true;
    generation->params = p;
    generation->params.stop_strings = NULL; /* the stream keeps its own copies */
    generation->n_prompt = n_prompt;
    if (p.top_logprobs < 0 || p.top_logprobs > BMOE_MAX_TOP_LOGPROBS || (p.top_logprobs > 0 && !p.logprobs)) {
        error_set_status(&err, BMOE_ERR_INVALID_ARGUMENT,
                         "generation: top_logprobs is %d: 0..%d, and only with logprobs on", p.top_logprobs,
                         BMOE_MAX_TOP_LOGPROBS);
        return start_failed(generation, &err, BMOE_ERR_INVALID_ARGUMENT, error);
    }
    generation->sampler = bmoe_sampler_create(&p.sampler, n_vocab, &err);
    if (!generation->sampler)
        return start_failed(generation, &err, BMOE_ERR_INVALID_ARGUMENT, error);
    if (token_pick_init(&generation->pick, generation->sampler, &p.sampler, p.constraint, n_vocab, &err) != 0)
        return start_failed(generation, &err, BMOE_ERR_INVALID_ARGUMENT, error);
    generation->logits = malloc((size_t)n_vocab * sizeof *generation->logits);
    if (!generation->logits) {
        error_set_status(&err, BMOE_ERR_OUT_OF_MEMORY, "generation: out of memory for %d logits", n_vocab);
        return start_failed(generation, &err, BMOE_ERR_OUT_OF_MEMORY, error);
    }
    if (text_stream_init(&generation->text, p.stop_strings, p.n_stop_strings, &err) != 0)
        return start_failed(generation, &err, BMOE_ERR_OUT_OF_MEMORY, error);
    if (speculation_init(&generation->spec, &p.speculation, context, &err) != 0)
        return start_failed(generation, &err, BMOE_ERR_INVALID_ARGUMENT, error);
    const bmoe_stream_params *stream = &context->model->params.stream;
    generation->read_ahead_gated = stream->predict_prefetch && !stream->predict_always &&
                                   expert_store_predict_max(context->model->experts) > 0;
    option_gate_init(&generation->read_ahead_gate);
    for (int32_t i = 0; i < n_prompt; i++) {
        if (prompt[i] < 0 || prompt[i] >= n_vocab) {
            error_set_status(&err, BMOE_ERR_INVALID_ARGUMENT, "generation: prompt token %d (index %d) is outside the "
                             "vocabulary [0, %d)", prompt[i], i, n_vocab);
            return start_failed(generation, &err, BMOE_ERR_INVALID_ARGUMENT, error);
        }
        if (p.echo_prompt && append_piece(generation, prompt[i], false, &err) < 0)
            return start_failed(generation, &err, BMOE_ERR_OUT_OF_MEMORY, error);
    }

    generation->n_reused = shared_prefix(context, prompt, n_prompt);
    bmoe_context_truncate(context, generation->n_reused);
    speculation_start(&generation->spec, generation->n_reused);
    int32_t n_new = n_prompt - generation->n_reused;
    if (bmoe_eval(context, prompt + generation->n_reused, n_new, generation->logits, false, &generation->prefill,
                  &err) != 0)
        return start_failed(generation, &err, BMOE_ERR_BAD_MODEL, error);
    generation->committed = context->position;
    context_ring_checkpoint(context); /* where the next turn's prompt will extend this one */
    return generation;
}

bmoe_generation *bmoe_generation_start_text(bmoe_context *context, const bmoe_generation_params *params,
                                            const char *text, size_t text_length, bmoe_error *error)
{
    bmoe_error err;
    error_clear(&err);
    if (!context || (!text && text_length > 0)) {
        error_set_status(&err, BMOE_ERR_INVALID_ARGUMENT, "generation: no context or no text");
        engine_report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
        return NULL;
    }
    if (text_length > (size_t)INT32_MAX - 64) {
        error_set_status(&err, BMOE_ERR_INVALID_ARGUMENT, "generation: a prompt of %zu bytes is too long", text_length);
        engine_report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
        return NULL;
    }
    /* Rarely more tokens than bytes (BOS, EOS, a space prefix); the tokenizer
     * says how many it needs when the guess is short. */
    int32_t capacity = (int32_t)text_length + 16;
    for (int attempt = 0; attempt < 2; attempt++) {
        int32_t *tokens = malloc((size_t)capacity * sizeof *tokens);
        if (!tokens) {
            error_set_status(&err, BMOE_ERR_OUT_OF_MEMORY, "generation: out of memory tokenizing %zu bytes",
                             text_length);
            engine_report(&err, BMOE_ERR_OUT_OF_MEMORY, error);
            return NULL;
        }
        int32_t count = bmoe_tokenize(context->model, text, text_length, true, true, tokens, capacity, error);
        if (count >= 0 && count <= capacity) {
            bmoe_generation *generation = bmoe_generation_start(context, params, tokens, count, error);
            free(tokens);
            return generation;
        }
        free(tokens);
        if (count < 0)
            return NULL;
        capacity = count;
    }
    error_set(&err, "generation: tokenization did not settle on a token count");
    engine_report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
    return NULL;
}

/* Tokens a verify batch evaluated past the ones handed out and decoded go
 * when the generation stops, so the context ends where plain decoding's
 * does. */
static int drop_undecided(bmoe_generation *generation, bmoe_step *step, bmoe_error *err)
{
    if (generation->context->position <= generation->committed)
        return 0;
    return speculation_rollback(&generation->spec, generation->context, generation->committed, &step->stats, err);
}

/* The final step: whatever text is still held, and why it ended. */
static int final_step(bmoe_generation *generation, enum bmoe_stop_reason stop, bmoe_step *step, bmoe_error *err)
{
    generation->finished = true;
    step->token = -1;
    step->stop = stop;
    if (drop_undecided(generation, step, err) != 0)
        return -1;
    bmoe_stats_add(&generation->decode, &step->stats);
    if (text_stream_finish(&generation->text, err) != 0)
        return -1;
    step->text = text_stream_take(&generation->text, &step->text_length);
    return 0;
}

static int generation_step(bmoe_generation *generation, bmoe_step *step, bmoe_error *error);

/* A step, timed: the first one that hands back a token ends the time to
 * first token (the prompt's prefill, that token's sampling and decode). */
int bmoe_generation_step(bmoe_generation *generation, bmoe_step *step, bmoe_error *error)
{
    int status = generation_step(generation, step, error);
    if (status > 0 && step->token >= 0 && generation->ttft_ms == 0)
        generation->ttft_ms = (engine_now_seconds() - generation->started) * 1e3;
    return status;
}

static int generation_step(bmoe_generation *generation, bmoe_step *step, bmoe_error *error)
{
    bmoe_error err;
    error_clear(&err);
    if (!generation || !step) {
        error_set_status(&err, BMOE_ERR_INVALID_ARGUMENT, "generation: no generation or no step record");
        return engine_report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
    }
    memset(step, 0, sizeof *step);
    step->index = generation->n_generated;
    step->token = -1;
    step->text = "";
    if (generation->finished) {
        error_set_status(&err, BMOE_ERR_INVALID_ARGUMENT, "generation: already finished");
        return engine_report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
    }
    bmoe_context *context = generation->context;
    const bmoe_model *m = context->model;
    const bmoe_generation_params *p = &generation->params;
    enum bmoe_stop_reason stop = generation->pending_stop;
    if (stop == BMOE_STOP_NONE && p->n_predict >= 0 && generation->n_generated >= p->n_predict)
        stop = BMOE_STOP_N_PREDICT;
    if (stop == BMOE_STOP_NONE && context->abort_callback && context->abort_callback(context->abort_user))
        stop = BMOE_STOP_ABORTED;
    if (stop != BMOE_STOP_NONE) {
        if (final_step(generation, stop, step, &err) != 0)
            return engine_report(&err, BMOE_ERR_OUT_OF_MEMORY, error);
        return 0;
    }

    /* a token a verify batch decided was sampled there, in plain decoding's
     * order; row_after: its logits when the batch evaluated it too */
    int32_t token;
    const float *row_after = NULL;
    if (!speculation_pop(&generation->spec, m->model.hparams.n_vocab, &token, &row_after))
        token = token_pick_next(&generation->pick, generation->logits, context->tokens, context->position);
    if (token < 0 || (!p->ignore_eos && tokenizer_is_end_of_generation(m->tokenizer, token))) {
        if (final_step(generation, BMOE_STOP_END_OF_GENERATION, step, &err) != 0)
            return engine_report(&err, BMOE_ERR_OUT_OF_MEMORY, error);
        return 0;
    }
    generation->n_generated++;
    step->index = generation->n_generated;
    step->token = token;
    if (p->logprobs) { /* the row token was sampled from, before a decode replaces it */
        int32_t n_vocab = m->model.hparams.n_vocab;
        step->logprob = bmoe_logprobs(generation->logits, n_vocab, token, p->top_logprobs, generation->top);
        step->n_top = p->top_logprobs < n_vocab ? p->top_logprobs : n_vocab;
        step->top = generation->top;
    }
    int found = append_piece(generation, token, true, &err);
    if (found < 0) {
        generation->finished = true;
        return engine_report(&err, BMOE_ERR_OUT_OF_MEMORY, error);
    }
    step->text = text_stream_take(&generation->text, &step->text_length);
    if (found) {
        generation->pending_stop = BMOE_STOP_STRING;
        if (drop_undecided(generation, step, &err) != 0) {
            generation->finished = true;
            return engine_report(&err, BMOE_ERR_BAD_MODEL, error);
        }
        bmoe_stats_add(&generation->decode, &step->stats);
        return 1;
    }
    if (row_after) { /* an accepted draft: decoded already, its cost on the batch's first step */
        generation->committed++;
        memcpy(generation->logits, row_after, (size_t)m->model.hparams.n_vocab * sizeof *generation->logits);
        return 1;
    }
    /* decode it, so the next step's logits are ready (and the cache holds
     * the whole answer when the generation ends) */
    if (context->position >= context->n_ctx) {
        generation->pending_stop = BMOE_STOP_CONTEXT_FULL;
        return 1;
    }
    /* drafts never reach past n_predict or the context's end: plain
     * decoding evaluates nothing there */
    int32_t room = context->n_ctx - context->position - 1;
    if (p->n_predict >= 0 && p->n_predict - generation->n_generated < room)
        room = p->n_predict - generation->n_generated;
    bool read_ahead_paused = false;
    if (generation->read_ahead_gated)
        context->state.predict_paused = !option_gate_allows(&generation->read_ahead_gate, &read_ahead_paused);
    double started = engine_now_seconds();
    int status = speculation_decode(&generation->spec, context, &generation->pick, token, room, generation->logits,
                                    &step->stats, &err);
    bool read_ahead = !context->state.predict_paused;
    context->state.predict_paused = false;
    /* a verify batch reads no single token's guesses: only plain steps measure the read-ahead */
    if (status == 0 && generation->read_ahead_gated && !generation->spec.verified) {
        option_gate_record(&generation->read_ahead_gate, read_ahead, engine_now_seconds() - started, 1);
        step->stats.predict_paused += read_ahead_paused;
    }
    if (status == BMOE_ERR_ABORTED) {
        generation->pending_stop = BMOE_STOP_ABORTED;
        return 1;
    }
    if (status != 0) {
        generation->finished = true;
        return engine_report(&err, BMOE_ERR_BAD_MODEL, error);
    }
    generation->committed++;
    bmoe_stats_add(&generation->decode, &step->stats);
    return 1;
}

int bmoe_generation_run(bmoe_generation *generation, bmoe_step_callback callback, void *user, bmoe_error *error)
{
    for (;;) {
        bmoe_step step;
        int status = bmoe_generation_step(generation, &step, error);
        if (status < 0)
            return status;
        bool go_on = !callback || callback(user, &step);
        if (status == 0)
            return 0;
        if (!go_on)
            generation->pending_stop = BMOE_STOP_ABORTED;
    }
}

int32_t bmoe_generation_n_prompt(const bmoe_generation *generation)
{
    return generation->n_prompt;
}

int32_t bmoe_generation_n_reused(const bmoe_generation *generation)
{
    return generation->n_reused;
}

const bmoe_stats *bmoe_generation_prefill_stats(const bmoe_generation *generation)
{
    return &generation->prefill;
}

double bmoe_generation_ttft_ms(const bmoe_generation *generation)
{
    return generation->ttft_ms;
}

const bmoe_stats *bmoe_generation_decode_stats(const bmoe_generation *generation)
{
    return &generation->decode;
}

int32_t bmoe_generation_n_generated(const bmoe_generation *generation)
{
    return generation->n_generated;
}

const float *bmoe_generation_logits(const bmoe_generation *generation)
{
    return generation->logits;
}

void bmoe_generation_spec_stats(const bmoe_generation *generation, bmoe_spec_stats *stats)
{
    *stats = generation->spec.counters;
}

uint64_t bmoe_generation_seed(const bmoe_generation *generation)
{
    return generation->params.sampler.seed;
}
