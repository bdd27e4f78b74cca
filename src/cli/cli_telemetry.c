/* The generation job's telemetry (cli_telemetry.h). */
#include "cli_telemetry.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tm_memory.h"
#include "tm_progress.h"
#include "tm_reasoning.h"
#include "plan.h"
#include "tm_report.h"
#include "tm_summary.h"

/* Tokens between two dense-residency probes (the first token is probed). */
#define CLI_PROBE_EVERY 8
/* The library's prefill micro-batch when none is asked (bmoe.h: "0: 512"). */
#define CLI_DEFAULT_UBATCH 512

static double cli_probe_dense(void *user)
{
    return bmoe_model_dense_resident_fraction((const bmoe_model *)user);
}

int cli_telemetry_open(cli_telemetry *t, const cli_options *options)
{
    memset(t, 0, sizeof *t);
    t->options = options;
    t->progress = options->progress;
    tm_buffer_init(&t->line);
    tm_buffer_init(&t->answer);
    tm_buffer_init(&t->split_reasoning);
    tm_buffer_init(&t->split_text);
    long page = sysconf(_SC_PAGESIZE);
    t->page_bytes = page > 0 ? page : 4096;
    bool streaming = options->model_params.stream.enabled;
    if (options->route_trace_path && !streaming)
        fprintf(stderr, "bmoe-cli: warning: --route-trace needs --moe-stream (it traces the streamed routing); "
                        "no route trace is written\n");
    if (options->io_trace_path && !streaming)
        fprintf(stderr, "bmoe-cli: warning: --io-trace needs --moe-stream (without it the engine reads no "
                        "expert); no io trace is written\n");
    tm_file_paths paths = {options->csv_path, streaming ? options->route_trace_path : NULL,
                           streaming ? options->io_trace_path : NULL, options->compute_trace_path,
                           options->compute_trace_layers_path};
    const char *flag = NULL;
    bmoe_error error = {0};
    if (tm_files_open(&t->files, &paths, &flag, &error) != 0)
        return cli_fail("%s: %s", flag, error.message[0] ? error.message : "cannot open the file");
    return 0;
}

void cli_telemetry_set_reasoning(cli_telemetry *t, bmoe_reasoning *reasoning)
{
    t->reasoning = reasoning;
    t->reasoning_finished = false;
}

/* The deltas of text: the parser's split, or all of it as answer. final:
 * the parser releases what it held (and is finished). Returns 0 or 1. */
static int cli_split(cli_telemetry *t, const char *text, size_t length, bool final, tm_deltas *deltas)
{
    *deltas = (tm_deltas){.reasoning = "", .reasoning_length = 0, .text = text, .text_length = length};
    if (!t->reasoning)
        return 0;
    if (t->reasoning_finished) {
        deltas->text_length = 0;
        return 0;
    }
    bmoe_error error = {0};
    if (final) {
        if (tm_reasoning_finish(t->reasoning, text, length, &t->split_reasoning, &t->split_text, deltas, &error) != 0)
            return cli_fail("%s", error.message);
        t->reasoning_finished = true;
        return 0;
    }
    bmoe_reasoning_delta fed;
    if (bmoe_reasoning_feed(t->reasoning, text ? text : "", text ? length : 0, &fed, &error) != 0)
        return cli_fail("%s", error.message);
    *deltas = (tm_deltas){fed.reasoning, fed.reasoning_length, fed.text, fed.text_length, fed.reset};
    return 0;
}

void cli_telemetry_context_params(cli_telemetry *t, bmoe_context_params *params)
{
    tm_files_context_params(&t->files, params);
}

int cli_telemetry_begin(cli_telemetry *t, const bmoe_model *model, const bmoe_context *context, uint64_t seed,
                        int32_t n_prompt, int32_t steps)
{
    const cli_options *o = t->options;
    t->model = model;
    t->n_prompt = n_prompt;
    tm_config *c = &t->config;
    tm_config_from_model(c, model, o->model_path);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    c->threads = o->n_threads > 0 ? o->n_threads : cores > 0 ? (int32_t)cores : 1;
    c->n_ctx = bmoe_context_n_ctx(context);
    c->n_ubatch = o->n_ubatch > 0 ? o->n_ubatch : CLI_DEFAULT_UBATCH;
    if (c->n_ubatch > c->n_ctx)
        c->n_ubatch = c->n_ctx;
    c->chatml = o->chat;
    c->regime = o->plan ? plan_regime_name(o->plan->regime) : NULL;
    c->cache_auto = c->moe_stream && o->model_params.stream.cache_mb < 0;
    c->temp = o->sampler.temperature;
    c->top_k = o->sampler.top_k;
    c->top_p = o->sampler.top_p;
    c->seed = seed;
    const bmoe_speculation_params *spec = &o->speculation;
    c->spec = o->draft_replay                       ? "replay"
              : spec->source == BMOE_DRAFT_NGRAM    ? "ngram"
              : spec->source == BMOE_DRAFT_MTP      ? "mtp"
                                                    : NULL;
    c->spec_draft_max = c->spec ? spec->n_draft : 0;
    c->ngram_min_match = spec->source == BMOE_DRAFT_NGRAM ? spec->ngram_min_match : 0;
    c->mtp_p_min = spec->source == BMOE_DRAFT_MTP ? spec->mtp_p_min : 0.0f;
    tm_draft_init(&t->draft);
    tm_files_fill_config(&t->files, c);

    if ((t->files.csv_on || t->files.route_on) && tm_layout_read(&t->layout, model) != 0)
        return cli_fail("out of memory reading the model's layout");
    if (c->cache_cycle_mb <= 0.0 && t->layout.known) /* resident: priced from the tensor table */
        c->cache_cycle_mb = (double)tm_layout_token_demand(&t->layout, c->n_expert_used) / 1048576.0;

    bmoe_stream_state state;
    bmoe_model_get_stream_state(model, &state);
    tm_meter_params meter = {
        .overlap = c->overlap,
        .cache_used = state.streaming && state.cache_budget_bytes > 0,
        .steps = steps,
        .probe_every = CLI_PROBE_EVERY,
        .probe = t->progress || t->files.csv_on ? cli_probe_dense : NULL,
        .probe_user = (void *)model,
    };
    t->last.steps = steps;
    t->last.cache_hit_pct = -1.0;
    t->last.dense_resident_frac = -1.0;
    t->meter = tm_meter_create(&meter);
    if (!t->meter)
        return cli_fail("out of memory for the telemetry");
    tm_files_begin(&t->files, c, &t->layout);
    return 0;
}

void cli_telemetry_stamp(cli_telemetry *t, int32_t phase, int32_t step)
{
    tm_files_stamp(&t->files, 0, phase, step);
}

void cli_telemetry_prefilled(cli_telemetry *t, const bmoe_stats *prefill)
{
    tm_meter_add_lookups(t->meter, prefill);
}

void cli_telemetry_after_eval(cli_telemetry *t)
{
    tm_files_after_eval(&t->files);
}

/* Writes the line buffer to stdout. */
static int cli_emit_lines(cli_telemetry *t)
{
    if (t->line.failed) {
        tm_buffer_clear(&t->line);
        return cli_fail("out of memory formatting a progress line");
    }
    int status = cli_write(stdout, t->line.data ? t->line.data : "", t->line.length) == 0 ? 0 : 1;
    tm_buffer_clear(&t->line);
    return status;
}

int cli_telemetry_token(cli_telemetry *t, const bmoe_generation *generation, const bmoe_step *step, const char *text,
                        size_t length)
{
    if (step->stats.n_tokens > 0)
        t->last_decode_end = cli_now_seconds();
    bmoe_spec_stats spec;
    bmoe_generation_spec_stats(generation, &spec);
    int32_t batch;
    double draft_ms;
    tm_draft_row(&t->draft, &spec, &batch, &draft_ms);
    tm_token token;
    tm_meter_token_drafted(t->meter, step->index, &step->stats, batch, draft_ms, &token);
    t->last = token;
    if (t->files.csv_on) {
        tm_memory memory;
        tm_memory_sample(&memory);
        tm_csv_row(&t->files.csv, 0, &token, &memory, t->config.cache_budget_mib, t->page_bytes);
    }
    if (!t->progress)
        return 0;
    tm_deltas deltas;
    if (cli_split(t, text, length, false, &deltas) != 0)
        return 1;
    tm_buffer_append(&t->answer, deltas.text, deltas.text_length);
    tm_progress_load_line(&t->line, &token);
    tm_progress_line(&t->line, &token, &deltas);
    return cli_emit_lines(t);
}

int cli_telemetry_trailing_text(cli_telemetry *t, const char *text, size_t length)
{
    if (!t->progress || (length == 0 && (!t->reasoning || t->reasoning_finished)))
        return 0;
    tm_deltas deltas;
    if (cli_split(t, text, length, t->reasoning != NULL, &deltas) != 0)
        return 1;
    if (deltas.text_length == 0 && deltas.reasoning_length == 0 && !deltas.reset)
        return 0;
    /* the last step again, with the cumulative figures and no cost of its own */
    tm_token token = t->last;
    token.step = tm_meter_totals(t->meter)->tokens;
    token.decoded = false;
    token.wall_ms = token.io_ms = token.compute_ms = token.mgmt_ms = token.stall_ms = 0.0;
    token.cpu_ms = token.loop_overhead_ms = 0.0;
    token.read_bytes = 0;
    token.majflt = 0;
    tm_buffer_append(&t->answer, deltas.text, deltas.text_length);
    tm_progress_line(&t->line, &token, &deltas);
    return cli_emit_lines(t);
}

int cli_telemetry_finish(cli_telemetry *t, const bmoe_generation *generation, double load_seconds)
{
    const tm_config *c = &t->config;
    bmoe_stream_state state;
    bmoe_model_get_stream_state(t->model, &state);
    const tm_totals *totals = tm_meter_totals(t->meter);
    tm_summary summary;
    tm_summary_fill(&summary, c, &t->layout, &state, bmoe_generation_prefill_stats(generation), totals,
                    tm_meter_lookups_before(t->meter));
    summary.turn = 0;
    tm_summary_take_generation(&summary, generation);
    summary.load_s = load_seconds;
    summary.tail_ms = t->last_decode_end > 0.0 ? (cli_now_seconds() - t->last_decode_end) * 1e3 : 0.0;
    if (t->files.csv_on)
        tm_csv_summary(&t->files.csv, &summary);

    int status = 0;
    if (t->progress) {
        tm_buffer_append_string(&t->line, "=== answer ===\n");
        if (t->reasoning) { /* the answer only, resets applied */
            size_t length;
            const char *answer = bmoe_reasoning_answer(t->reasoning, &length);
            tm_buffer_append(&t->line, answer, length);
        } else {
            tm_buffer_append(&t->line, t->answer.data ? t->answer.data : "", t->answer.length);
        }
        tm_buffer_append_string(&t->line, "\n=== perf ===\n");
    }
    /* on stdout in both modes: the readers grep stdout for these lines */
    tm_report_format(&t->line, c, &summary);
    status = cli_emit_lines(t);

    const char *flag = NULL;
    bmoe_error error = {0};
    if (tm_files_commit(&t->files, &flag, &error) != 0 && status == 0)
        status = cli_fail("%s: %s", flag, error.message[0] ? error.message : "cannot write the file");
    return status;
}

void cli_telemetry_close(cli_telemetry *t)
{
    tm_files_discard(&t->files);
    tm_meter_destroy(t->meter);
    t->meter = NULL;
    tm_layout_free(&t->layout);
    tm_buffer_free(&t->line);
    tm_buffer_free(&t->answer);
    tm_buffer_free(&t->split_reasoning);
    tm_buffer_free(&t->split_text);
}

int cli_print_predict_log(const bmoe_context *context)
{
    int32_t n_layer = bmoe_model_n_layer(bmoe_context_model(context));
    bmoe_predict_score *scores = calloc((size_t)n_layer, sizeof *scores);
    if (!scores)
        return cli_fail("out of memory for the prediction probe's report");
    for (int32_t il = 0; il < n_layer; il++)
        bmoe_context_predict_log(context, il, &scores[il]);
    tm_buffer out;
    tm_buffer_init(&out);
    tm_report_predict(&out, scores, n_layer);
    free(scores);
    int status = cli_write(stdout, tm_buffer_text(&out), out.length) != 0 || cli_flush(stdout) != 0 ? 1 : 0;
    tm_buffer_free(&out);
    return status;
}
