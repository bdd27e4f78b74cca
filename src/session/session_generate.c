/* One generate request: the conversation grown by the user's message and
 * rendered whole (clear_kv starts a new one), the prompt checked against
 * the context, the generation started on the session's context (which
 * keeps the longest cached prefix the prompt shares, so only the new suffix
 * is prefilled), then per token the telemetry contract's BMOE_LOAD and
 * BMOE_PROGRESS lines with the reasoning split's deltas and a CSV row, and
 * BMOE_DONE. A cancelled turn (the reader's flag, read by the context's
 * abort callback between micro-batches, layers and tokens) is rolled back
 * from the conversation; an answered one adds the answer. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "session_internal.h"
#include "tm_draft.h"
#include "tm_memory.h"
#include "tm_progress.h"
#include "tm_reasoning.h"
#include "tm_token.h"

/* Tokens between two dense-residency probes (the first token is probed). */
#define SESSION_PROBE_EVERY 8

static double probe_dense(void *user)
{
    return bmoe_model_dense_resident_fraction((const bmoe_model *)user);
}

static double now_ms(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec * 1e3 + (double)now.tv_nsec * 1e-6;
}

/* A turn in progress. */
typedef struct turn {
    session *s;
    int64_t id;
    bmoe_reasoning *reasoning;
    tm_meter *meter;
    tm_draft draft;            /* which rows carry a verify batch */
    tm_token last;             /* the last token's record */
    double last_decode_end;    /* ms; 0: none yet */
    tm_buffer joined_reasoning, joined_text;
    bmoe_json_constraint *held; /* json_schema's or grammar's hold on the answer; NULL: none */
} turn;

int32_t session_prompt_tokens(const session *s, const bmoe_chat *chat, const char *text, size_t length,
                              int32_t **tokens, bmoe_error *error)
{
    *tokens = NULL;
    int32_t count = chat ? bmoe_chat_tokenize(chat, text, length, NULL, 0, error)
                         : bmoe_tokenize(s->model, text, length, true, true, NULL, 0, error);
    if (count < 0)
        return count;
    *tokens = malloc((size_t)(count > 0 ? count : 1) * sizeof **tokens);
    if (!*tokens) {
        snprintf(error->message, sizeof error->message, "out of memory for %d prompt tokens", count);
        return BMOE_ERR_OUT_OF_MEMORY;
    }
    int32_t again = chat ? bmoe_chat_tokenize(chat, text, length, *tokens, count, error)
                         : bmoe_tokenize(s->model, text, length, true, true, *tokens, count, error);
    return again == count ? count : BMOE_ERR_INVALID_ARGUMENT;
}

/* The request's messages (or its prompt as a user message) onto the
 * conversation. 0, or -1 (out of memory; the caller rolls back). */
static int add_messages(session *s, const session_request *r)
{
    if (r->n_messages == 0)
        return session_conversation_add(&s->conversation, "user", r->prompt.data, r->prompt.length, NULL, 0);
    for (int32_t i = 0; i < r->n_messages; i++)
        if (session_conversation_add(&s->conversation, r->messages[i].role, r->messages[i].content.data,
                                     r->messages[i].content.length, NULL, 0) != 0)
            return -1;
    return 0;
}

/* One generated token's lines and CSV row. */
static int token_lines(turn *t, const bmoe_generation *generation, const bmoe_step *step)
{
    session *s = t->s;
    if (step->stats.n_tokens > 0)
        t->last_decode_end = now_ms();
    bmoe_spec_stats spec;
    bmoe_generation_spec_stats(generation, &spec);
    int32_t batch;
    double draft_ms;
    tm_draft_row(&t->draft, &spec, &batch, &draft_ms);
    tm_token token;
    tm_meter_token_drafted(t->meter, step->index, &step->stats, batch, draft_ms, &token);
    t->last = token;
    if (s->files.csv_on) {
        tm_memory memory;
        tm_memory_sample(&memory);
        tm_csv_row(&s->files.csv, s->turn, &token, &memory, s->telemetry.cache_budget_mib, s->page_bytes);
    }
    bmoe_reasoning_delta d;
    bmoe_error error = {0};
    if (bmoe_reasoning_feed(t->reasoning, step->text, step->text_length, &d, &error) != 0)
        return session_error(s, t->id, true, error.message);
    tm_deltas deltas = {d.reasoning, d.reasoning_length, d.text, d.text_length, d.reset};
    tm_progress_load_line(&s->lines, &token);
    tm_progress_line(&s->lines, &token, &deltas);
    return session_emit(s);
}

/* The text the last step and the parser still held: one more line, the
 * last token's with no cost of its own, when there is any. */
static int trailing_lines(turn *t, const char *text, size_t length)
{
    session *s = t->s;
    bmoe_error error = {0};
    tm_deltas deltas;
    if (tm_reasoning_finish(t->reasoning, text, length, &t->joined_reasoning, &t->joined_text, &deltas, &error) != 0)
        return session_error(s, t->id, true, error.message);
    if (!deltas.reset && deltas.reasoning_length == 0 && deltas.text_length == 0)
        return 0;
    tm_token token = t->last;
    token.step = tm_meter_totals(t->meter)->tokens;
    token.decoded = false;
    token.wall_ms = token.io_ms = token.compute_ms = token.mgmt_ms = token.stall_ms = 0.0;
    token.cpu_ms = token.loop_overhead_ms = 0.0;
    token.read_bytes = 0;
    token.majflt = 0;
    tm_progress_line(&s->lines, &token, &deltas);
    return session_emit(s);
}

static void turn_free(turn *t)
{
    bmoe_json_constraint_free(t->held);
    bmoe_reasoning_free(t->reasoning);
    tm_meter_destroy(t->meter);
    tm_buffer_free(&t->joined_reasoning);
    tm_buffer_free(&t->joined_text);
}

/* The hold of a request's json_schema or grammar on its answer (t->held),
 * from the end of the model's reasoning when reason_first. 0, or -1 with
 * the reason in message. */
static int hold_answer(session *s, const session_request *r, turn *t, enum bmoe_reasoning_format reasoning,
                       char *message, size_t size)
{
    bool gbnf = r->grammar.data != NULL;
    const char *field = gbnf ? "grammar" : "json_schema";
    const session_text *text = gbnf ? &r->grammar : &r->json_schema;
    bmoe_error error = {0};
    if (!s->token_index && !(s->token_index = bmoe_token_index_create(s->model, &error))) {
        snprintf(message, size, "%s: %s", field, error.message);
        return -1;
    }
    t->held = gbnf ? bmoe_gbnf_constraint_create(s->token_index, text->data, text->length, &error)
                   : bmoe_json_constraint_create(s->token_index, text->data, text->length, &error);
    if (!t->held || bmoe_json_constraint_chat(t->held, s->model, reasoning, BMOE_TOOL_FORMAT_NONE, &error) != 0) {
        snprintf(message, size, "\"%s\": %s", field, error.message);
        return -1;
    }
    return 0;
}

int session_generate(session *s, const session_request *r)
{
    const session_config *c = s->config;
    int64_t id = r->id;
    bool think = r->has_think ? r->think : c->think;
    bool clear = r->has_clear_kv ? r->clear_kv : true;
    int32_t n_predict = r->has_n_predict ? r->n_predict : c->n_predict;
    int32_t n_ctx = bmoe_context_n_ctx(s->context);
    char message[BMOE_ERROR_MAX + 128];
    if (clear) {
        session_conversation_truncate(&s->conversation, 0);
        bmoe_context_truncate(s->context, 0);
        s->chat_turn = 0;
    }
    /* messages are a conversation: they are rendered with the template in
     * any mode; a prompt only in chat mode */
    const bmoe_chat *chat = r->n_messages > 0 ? s->template : s->chat;
    if (r->n_messages > 0 && !chat)
        return session_error(s, id, false, "\"messages\" needs a chat template, and the model has none");
    int32_t kept = s->conversation.count;
    if (add_messages(s, r) != 0) {
        session_conversation_truncate(&s->conversation, kept);
        return session_error(s, id, false, "out of memory for the prompt");
    }

    bool prefill = chat && !think && s->think_control == BMOE_THINK_CONTROL_PREFILL;
    bmoe_chat_params params = bmoe_chat_default_params();
    params.enable_thinking = think;
    params.reasoning_prefill = prefill;
    params.now_seconds = c->template_now;
    params.reasoning_effort = c->reasoning_effort;
    char *text = NULL;
    size_t text_length = 0;
    int32_t *tokens = NULL;
    bmoe_error error = {0};
    if (session_conversation_render(&s->conversation, chat, &params, &text, &text_length, &error) != 0) {
        session_conversation_truncate(&s->conversation, kept);
        snprintf(message, sizeof message, "the chat template: %s", error.message);
        return session_error(s, id, false, message);
    }
    /* a held answer waits for the reasoning to end: the prompt opens the
     * span where the model would not */
    bool held = r->json_schema.data || r->grammar.data;
    enum bmoe_reasoning_format format = chat && !prefill ? bmoe_chat_reasoning_format(chat) : BMOE_REASONING_NONE;
    const char *opening = "";
    bool reason_first = held && bmoe_reasoning_opening(format, text, text_length, &opening);
    size_t opening_length = strlen(opening);
    char *opened = opening_length ? realloc(text, text_length + opening_length + 1) : text;
    if (!opened) {
        free(text);
        session_conversation_truncate(&s->conversation, kept);
        return session_error(s, id, false, "out of memory for the prompt");
    }
    text = opened;
    memcpy(text + text_length, opening, opening_length + 1);
    text_length += opening_length;
    int32_t n_prompt = session_prompt_tokens(s, chat, text, text_length, &tokens, &error);
    const char *refusal = NULL;
    if (n_prompt < 0) {
        snprintf(message, sizeof message, "tokenizing the prompt: %s", error.message);
        refusal = message;
    } else if (n_prompt == 0) {
        refusal = "empty prompt: it has no tokens (and the vocabulary adds no BOS)";
    } else if (n_prompt > n_ctx || (n_predict > 0 && (int64_t)n_prompt + n_predict > n_ctx)) {
        snprintf(message, sizeof message,
                 "the prompt (%d tokens with the conversation) plus n_predict (%d) exceeds the session n_ctx (%d)",
                 n_prompt, n_predict, n_ctx);
        refusal = message;
    }
    turn t = {.s = s, .id = id};
    tm_draft_init(&t.draft);
    tm_buffer_init(&t.joined_reasoning);
    tm_buffer_init(&t.joined_text);
    if (!refusal && held && hold_answer(s, r, &t, reason_first ? format : BMOE_REASONING_NONE, message,
                                        sizeof message) != 0)
        refusal = message;
    if (!refusal) {
        /* the prefilled turn is the answer verbatim: no reasoning follows */
        t.reasoning = bmoe_reasoning_create(format, text, text_length, &error);
        int32_t steps = n_predict > 0 ? n_predict : n_ctx - n_prompt;
        bmoe_stream_state state;
        bmoe_model_get_stream_state(s->model, &state);
        tm_meter_params meter = {
            .overlap = s->telemetry.overlap,
            .cache_used = state.streaming && state.cache_budget_bytes > 0,
            .before = s->lookups,
            .steps = steps,
            .probe_every = SESSION_PROBE_EVERY,
            .probe = probe_dense,
            .probe_user = s->model,
        };
        t.meter = t.reasoning ? tm_meter_create(&meter) : NULL;
        t.last.steps = steps;
        t.last.cache_hit_pct = -1.0;
        t.last.dense_resident_frac = -1.0;
        if (!t.meter)
            refusal = "out of memory for the turn";
    }
    free(text);
    if (refusal) {
        free(tokens);
        turn_free(&t);
        session_conversation_truncate(&s->conversation, kept);
        return session_error(s, id, false, refusal);
    }

    session_format_begin(&s->lines, id);
    if (session_emit(s) != 0) {
        free(tokens);
        turn_free(&t);
        return -1;
    }
    bmoe_generation_params generation_params = bmoe_generation_default_params();
    generation_params.n_predict = n_predict;
    generation_params.ignore_eos = c->ignore_eos;
    generation_params.sampler = c->sampler;
    generation_params.sampler.seed = c->sampler.seed + (uint64_t)s->chat_turn;
    generation_params.speculation = c->speculation;
    generation_params.constraint = bmoe_json_constraint_rule(t.held);
    tm_files_stamp(&s->files, s->turn, TM_PHASE_PREFILL, n_prompt - 1);
    bmoe_generation *generation = bmoe_generation_start(s->context, &generation_params, tokens, n_prompt, &error);
    tm_files_after_eval(&s->files);
    free(tokens);
    bool cancelled = false;
    int status = 0;
    if (!generation) {
        if (error.status != BMOE_ERR_ABORTED) {
            snprintf(message, sizeof message, "generate: %s", error.message);
            turn_free(&t);
            bool fatal = !session_recoverable(error.status);
            if (!fatal)
                session_conversation_truncate(&s->conversation, kept);
            return session_error(s, id, fatal, message);
        }
        cancelled = true; /* during the prefill */
    }
    if (generation)
        tm_meter_add_lookups(t.meter, bmoe_generation_prefill_stats(generation));
    while (generation && status == 0) {
        bmoe_step step;
        tm_files_stamp(&s->files, s->turn, TM_PHASE_DECODE, n_prompt + bmoe_generation_n_generated(generation));
        int stepped = bmoe_generation_step(generation, &step, &error);
        tm_files_after_eval(&s->files);
        if (stepped < 0) {
            snprintf(message, sizeof message, "generate: %s", error.message);
            if (session_recoverable(error.status)) {
                session_conversation_truncate(&s->conversation, kept);
                status = session_error(s, id, false, message);
                bmoe_generation_free(generation);
                turn_free(&t);
                return status;
            }
            status = session_error(s, id, true, message);
            if (status == 0)
                status = -1;
            break;
        }
        if (step.token < 0) {
            cancelled = step.stop == BMOE_STOP_ABORTED;
            status = trailing_lines(&t, step.text, step.text_length);
            break;
        }
        status = token_lines(&t, generation, &step);
    }
    if (status != 0) {
        bmoe_generation_free(generation);
        turn_free(&t);
        return -1;
    }

    size_t answer_length = 0, reasoning_length = 0;
    const char *answer = bmoe_reasoning_answer(t.reasoning, &answer_length);
    const char *reasoning = bmoe_reasoning_thinking(t.reasoning, &reasoning_length);
    tm_summary summary;
    double tail_ms = t.last_decode_end > 0.0 ? now_ms() - t.last_decode_end : 0.0;
    const tm_totals *totals = tm_meter_totals(t.meter);
    const tm_lookups *before = tm_meter_lookups_before(t.meter);
    session_summary(s, generation, totals, before, tail_ms, &summary);
    s->lookups.hits = before->hits + totals->hits;
    s->lookups.misses = before->misses + totals->misses;
    if (s->files.csv_on)
        tm_csv_summary(&s->files.csv, &summary);
    int32_t generated = generation ? bmoe_generation_n_generated(generation) : 0;
    session_format_done(&s->lines, id, cancelled, &summary, generated, bmoe_context_position(s->context), reasoning,
                        reasoning_length, answer, answer_length);
    status = session_answer(s);
    if (cancelled) {
        session_conversation_truncate(&s->conversation, kept);
    } else if (session_conversation_add(&s->conversation, "assistant", answer, answer_length,
                                        reasoning_length > 0 ? reasoning : NULL, reasoning_length) != 0) {
        /* the turn was answered, but cannot be kept: the conversation starts again */
        session_conversation_truncate(&s->conversation, 0);
    } else {
        s->chat_turn++;
    }
    s->turn++;
    bmoe_generation_free(generation);
    turn_free(&t);
    return status;
}
