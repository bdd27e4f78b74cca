/* The session (session.h): opens the CSV sink, the model, its context (with
 * the inbox's cancel flag as the abort callback) and its chat template,
 * announces BMOE_READY, starts the reader thread, then answers the queued
 * requests one at a time, in order, until close or EOF has drained the
 * queue. A failure to open is BMOE_ERROR with fatal true and exit status 1. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "session_internal.h"
#include "session_reader.h"
#include "tm_profile.h"
#include "tm_report.h"

static double now_seconds(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
}

int session_emit(session *s)
{
    return session_output_write(s->output, &s->lines);
}

int session_answer(session *s)
{
    /* the request is over before its last line is out: a client that sends
     * the next one as soon as it reads this line is never refused as busy */
    session_inbox_done(s->inbox);
    return session_emit(s);
}

int session_error(session *s, int64_t id, bool fatal, const char *message)
{
    session_format_error(&s->lines, id, fatal, message);
    int written = session_answer(s);
    return fatal || written != 0 ? -1 : 0;
}

int session_answer_cancelled(session *s, const session_request *request)
{
    session_format_begin(&s->lines, request->id);
    if (request->command == SESSION_DECIDE) {
        bmoe_stats none;
        memset(&none, 0, sizeof none);
        session_format_decide(&s->lines, request->id, true, -1, NULL, request->n_choices, 0, 0, &none);
    } else {
        tm_summary summary;
        session_summary(s, NULL, NULL, &s->lookups, 0.0, &summary);
        session_format_done(&s->lines, request->id, true, &summary, 0, bmoe_context_position(s->context), NULL, 0,
                            NULL, 0);
    }
    return session_answer(s);
}

/* The resolved configuration the CSV preamble states. */
static void fill_telemetry(session *s)
{
    const session_config *c = s->config;
    tm_config *t = &s->telemetry;
    tm_config_from_model(t, s->model, c->model_path);
    t->threads = c->threads > 0 ? c->threads : bmoe_context_n_threads(s->context);
    t->n_ctx = bmoe_context_n_ctx(s->context);
    t->n_ubatch = bmoe_context_n_ubatch(s->context);
    t->chatml = c->chat;
    t->cache_auto = c->cache_auto && t->moe_stream;
    t->temp = c->sampler.temperature;
    t->top_k = c->sampler.top_k;
    t->top_p = c->sampler.top_p;
    t->seed = c->sampler.seed;
    const bmoe_speculation_params *spec = &c->speculation;
    t->spec = spec->source == BMOE_DRAFT_NGRAM ? "ngram" : spec->source == BMOE_DRAFT_MTP ? "mtp" : NULL;
    t->spec_draft_max = t->spec ? spec->n_draft : 0;
    t->ngram_min_match = spec->source == BMOE_DRAFT_NGRAM ? spec->ngram_min_match : 0;
    t->mtp_p_min = spec->source == BMOE_DRAFT_MTP ? spec->mtp_p_min : 0.0f;
    tm_files_fill_config(&s->files, t);
    if (t->cache_cycle_mb <= 0.0 && s->layout.known)
        t->cache_cycle_mb = (double)tm_layout_token_demand(&s->layout, t->n_expert_used) / 1048576.0;
}

/* Opens everything; 0, or -1 after a fatal BMOE_ERROR. */
static int session_open(session *s)
{
    const session_config *c = s->config;
    bmoe_error error = {0};
    char message[BMOE_ERROR_MAX + 64];
    long page = sysconf(_SC_PAGESIZE);
    s->page_bytes = page > 0 ? page : 4096;
    tm_file_paths paths = {c->csv_path, c->route_trace_path, c->io_trace_path, c->compute_trace_path,
                           c->compute_trace_layers_path};
    const char *flag = NULL;
    if (tm_files_open(&s->files, &paths, &flag, &error) != 0) {
        snprintf(message, sizeof message, "%s: %s", flag, error.message);
        return session_error(s, 0, true, message);
    }
    double start = now_seconds();
    s->model = bmoe_model_load(c->model_path, &c->model_params, &error);
    if (!s->model)
        return session_error(s, 0, true, error.message[0] ? error.message : "cannot load the model");
    s->profile_writable = c->expert_profile_path && tm_profile_warm(s->model, c->expert_profile_path, c->log, "session");
    bmoe_context_params context_params = c->context_params;
    context_params.abort_callback = session_inbox_cancelled;
    context_params.abort_user = s->inbox;
    bmoe_stream_state state;
    bmoe_model_get_stream_state(s->model, &state);
    unsigned dropped = state.streaming ? 0 : tm_files_drop_streamed_traces(&s->files);
    if (c->log && (dropped & 1u))
        fputs("session: --route-trace needs a streamed model (it traces the streamed routing); no route trace is "
              "written\n",
              c->log);
    if (c->log && (dropped & 2u))
        fputs("session: --io-trace needs a streamed model (without streaming no expert is read); no io trace is "
              "written\n",
              c->log);
    tm_files_context_params(&s->files, &context_params);
    s->context = bmoe_context_create(s->model, &context_params, &error);
    if (!s->context)
        return session_error(s, 0, true, error.message[0] ? error.message : "cannot create the context");
    /* --mtp without a head to draft with: refused before BMOE_READY, not
     * at the first request. The library checks the draft source when a
     * generation starts, before it evaluates anything. */
    if (c->speculation.source == BMOE_DRAFT_MTP) {
        bmoe_generation_params probe = bmoe_generation_default_params();
        probe.n_predict = 0;
        probe.speculation = c->speculation;
        int32_t token = 0;
        bmoe_generation *generation = bmoe_generation_start(s->context, &probe, &token, 1, &error);
        if (!generation)
            return session_error(s, 0, true, error.message);
        bmoe_generation_free(generation);
    }
    /* the think control is the model's, chat mode or not */
    bmoe_chat *chat = bmoe_model_chat_template(s->model) ? bmoe_chat_create(s->model, &error) : NULL;
    if (c->chat && !chat) {
        snprintf(message, sizeof message, "--chat: %s",
                 error.message[0] ? error.message : "the model has no chat template");
        return session_error(s, 0, true, message);
    }
    if (chat && bmoe_chat_check_reasoning_effort(chat, c->reasoning_effort, &error) != 0) {
        snprintf(message, sizeof message, "--reasoning-effort: %s", error.message);
        bmoe_chat_free(chat);
        return session_error(s, 0, true, message);
    }
    s->think_control = chat ? bmoe_chat_think_control(chat) : BMOE_THINK_CONTROL_TEMPLATE;
    s->template = chat; /* kept for requests that carry messages */
    if (c->chat)
        s->chat = chat;
    s->load_s = now_seconds() - start;
    if (tm_layout_read(&s->layout, s->model) != 0)
        return session_error(s, 0, true, "out of memory reading the model's layout");
    fill_telemetry(s);
    if (c->log) {
        tm_report_streaming_line(&s->lines, &s->telemetry);
        if (!s->lines.failed)
            fputs(tm_buffer_text(&s->lines), c->log);
        tm_buffer_clear(&s->lines);
    }
    tm_files_begin(&s->files, &s->telemetry, &s->layout);
    bmoe_model_info info;
    bmoe_model_get_info(s->model, &info);
    bmoe_model_params resolved;
    bmoe_model_get_params(s->model, &resolved);
    session_format_ready(&s->lines, s->load_s, bmoe_model_architecture(s->model), bmoe_context_n_ctx(s->context),
                         bmoe_think_control_name(s->think_control), info.n_expert > 0 ? resolved.n_expert_used : 0);
    return session_emit(s);
}

int session_run(const session_config *config, int input, int stop, FILE *output, int *output_error)
{
    *output_error = 0;
    session s;
    memset(&s, 0, sizeof s);
    s.config = config;
    tm_buffer_init(&s.lines);
    session_conversation_init(&s.conversation);
    session_output out;
    session_inbox inbox;
    if (session_output_init(&out, output) != 0)
        return 1;
    if (session_inbox_init(&inbox) != 0) {
        session_output_destroy(&out);
        return 1;
    }
    s.output = &out;
    s.inbox = &inbox;
    int status = session_open(&s);
    session_reader reader;
    memset(&reader, 0, sizeof reader);
    reader.wake[0] = reader.wake[1] = -1;
    if (status == 0 &&
        session_reader_start(&reader, input, stop, config->max_line ? config->max_line : SESSION_MAX_LINE, &inbox,
                             &out, config->log) != 0)
        status = session_error(&s, 0, true, "cannot start the request reader thread");
    session_request request;
    while (status == 0 && session_inbox_take(&inbox, &request)) {
        if (request.command == SESSION_REFUSED)
            status = session_error(&s, request.id, false, request.message.data);
        else if (session_inbox_cancelled(&inbox))
            status = session_answer_cancelled(&s, &request);
        else if (request.command == SESSION_DECIDE)
            status = session_decide(&s, &request);
        else
            status = session_generate(&s, &request);
        session_request_free(&request);
        /* (the request was marked answered before its last line went out) */
        if (session_output_failed(&out))
            status = -1;
    }
    session_reader_stop(&reader);
    if (session_inbox_stopped(&inbox))
        status = -1;
    bmoe_error error = {0};
    const char *flag = NULL;
    if (status == 0 && s.profile_writable &&
        bmoe_model_save_expert_profile(s.model, config->expert_profile_path, &error) != 0) {
        session_error(&s, 0, true, error.message);
        status = -1;
    }
    if (status == 0 && tm_files_commit(&s.files, &flag, &error) != 0) {
        char message[BMOE_ERROR_MAX + 32];
        snprintf(message, sizeof message, "%s: %s", flag, error.message);
        session_error(&s, 0, true, message);
        status = -1;
    }
    tm_files_discard(&s.files);
    bool output_failed = session_output_failed(&out);
    if (output_failed)
        *output_error = out.error;
    tm_layout_free(&s.layout);
    session_conversation_free(&s.conversation);
    bmoe_token_index_free(s.token_index);
    bmoe_chat_free(s.template);
    bmoe_context_free(s.context);
    bmoe_model_free(s.model);
    tm_buffer_free(&s.lines);
    session_inbox_destroy(&inbox);
    session_output_destroy(&out);
    return status == 0 && !output_failed ? 0 : 1;
}
