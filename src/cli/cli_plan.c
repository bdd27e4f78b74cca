/* --auto, --plan and --show-config: the planner's probes and plan, written
 * into the options wherever the user typed nothing, and the lines that say
 * what was planned and, after the run, how the prediction held. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "plan.h"

/* What the user typed (a flag or an environment variable): the planner keeps it. */
static plan_pins cli_plan_pins(const cli_options *options)
{
    const param_value *value = options->values.value;
    const bmoe_stream_params *stream = &options->model_params.stream;
    plan_pins pins = {0};
    pins.stream_set = value[P_MOE_STREAM].text || value[P_NO_MOE_STREAM].text;
    pins.stream = value[P_MOE_STREAM].text != NULL;
    pins.cache_mb_set = value[P_CACHE_MB].text != NULL;
    pins.cache_mb = stream->cache_mb;
    pins.io_threads_set = value[P_IO_THREADS].text != NULL;
    pins.io_threads = stream->io_threads;
    pins.overlap_set = value[P_OVERLAP].text != NULL;
    pins.overlap = stream->overlap;
    pins.read_ahead_set = value[P_PREFETCH].text || value[P_PREDICT_PREFETCH].text || value[P_ROUTE_AHEAD].text;
    pins.dense_set = value[P_DENSE].text || value[P_NO_WARM_DENSE].text || value[P_DENSE_ODIRECT].text;
    pins.dense = options->model_params.dense_weights;
    pins.cache_floor_set = value[P_CACHE_FLOOR].text != NULL;
    pins.cache_floor_mb = stream->cache_floor_mb;
    size_t count = 0;
    const param_def *rows = params_table(&count);
    for (size_t i = 0; i < count; i++)
        if (rows[i].lossy && rows[i].id != P_UNAVAILABLE && value[rows[i].id].text)
            pins.lossy_set = true;
    return pins;
}

/* A decision's value as the plan's value of a parameter (the plan outlives the options' use of it). */
static void cli_plan_set(cli_options *options, param_id id, const char *text)
{
    if (!options->values.value[id].text)
        options->values.value[id] = (param_value){text, PARAM_SOURCE_PLAN};
}

/* The plan into the options: only what the user did not type. */
static void cli_plan_apply(cli_options *options, const plan *result)
{
    bmoe_stream_params *stream = &options->model_params.stream;
    for (int32_t i = 0; i < result->n_decisions; i++) {
        const plan_decision *decision = &result->decisions[i];
        if (decision->tag == PLAN_OPERATOR)
            continue;
        if (strcmp(decision->key, "moe_stream") == 0) {
            if (result->stream) {
                stream->enabled = true;
                cli_plan_set(options, P_MOE_STREAM, "on");
            } else {
                stream->enabled = false;
                stream->auto_enable = false;
                cli_plan_set(options, P_NO_MOE_STREAM, "on");
            }
        } else if (strcmp(decision->key, "cache_mb") == 0 && result->stream) {
            stream->cache_mb = result->cache_mb;
            cli_plan_set(options, P_CACHE_MB, decision->value);
        } else if (strcmp(decision->key, "io_threads") == 0 && result->stream) {
            stream->io_threads = result->io_threads;
            cli_plan_set(options, P_IO_THREADS, decision->value);
        } else if (strcmp(decision->key, "overlap") == 0 && result->stream) {
            stream->overlap = result->overlap;
            if (result->overlap)
                cli_plan_set(options, P_OVERLAP, "on");
        } else if (strcmp(decision->key, "predict_prefetch") == 0 && result->stream) {
            stream->predict_prefetch = result->predict_prefetch;
            if (result->predict_prefetch)
                cli_plan_set(options, P_PREDICT_PREFETCH, "on");
        } else if (strcmp(decision->key, "dense_weights") == 0) {
            options->model_params.dense_weights = result->dense;
            cli_plan_set(options, P_DENSE, decision->value);
        }
    }
}

/* The plan as a JSON object's text, for --show-config (caller frees with cJSON_free). */
static char *cli_plan_json(const plan *result)
{
    cJSON *object = cJSON_CreateObject();
    cJSON_AddStringToObject(object, "regime", plan_regime_name(result->regime));
    cJSON_AddStringToObject(object, "flags", result->flags);
    cJSON_AddNumberToObject(object, "predicted_s_per_token", result->predicted_seconds_per_token);
    cJSON_AddNumberToObject(object, "predicted_hit", result->predicted_hit);
    cJSON *decisions = cJSON_AddArrayToObject(object, "decisions");
    for (int32_t i = 0; decisions && i < result->n_decisions; i++) {
        const plan_decision *decision = &result->decisions[i];
        cJSON *item = cJSON_CreateObject();
        cJSON_AddItemToArray(decisions, item);
        cJSON_AddStringToObject(item, "key", decision->key);
        cJSON_AddStringToObject(item, "value", decision->value);
        cJSON_AddStringToObject(item, "tag", plan_tag_name(decision->tag));
        cJSON_AddStringToObject(item, "reason", decision->reason);
    }
    char *text = object ? cJSON_PrintUnformatted(object) : NULL;
    cJSON_Delete(object);
    return text;
}

/* Without --auto, and with neither --moe-stream nor --no-moe-stream typed,
 * the planner's regime (no probe, nothing else of the plan) decides whether
 * the model streams. A probe that fails says nothing: the load that follows
 * reports the problem in its own words, the library deciding as before. */
static int cli_plan_regime(cli_options *options, plan *result)
{
    const param_value *value = options->values.value;
    if (value[P_MOE_STREAM].text || value[P_NO_MOE_STREAM].text || !options->model_path)
        return 0;
    char error[320];
    plan_model model;
    plan_machine machine;
    bool draft_head = options->model_params.draft_head;
    bmoe_context_params context = cli_context_params(options, options->n_ctx);
    if (plan_probe_model(options->model_path, &context, draft_head, &model, error, sizeof error) != 0 ||
        plan_probe_machine(NULL, 0, false, false, NULL, false, &machine, error, sizeof error) != 0)
        return 0;
    plan_pins pins = cli_plan_pins(options);
    if (plan_make(&model, &machine, &pins, result) != 0)
        return cli_fail("%s", result->refusal);
    options->plan = result;
    bmoe_stream_params *stream = &options->model_params.stream;
    if (result->regime == PLAN_REGIME_EXPERTS_STREAM) {
        stream->enabled = true;
        stream->overlap = true;
        const char *reason = "";
        for (int32_t i = 0; i < result->n_decisions; i++)
            if (strcmp(result->decisions[i].key, "regime") == 0)
                reason = result->decisions[i].reason;
        fprintf(stderr, "bmoe-cli: stream: regime %s (%s): its experts are streamed from the file, with overlap\n",
                plan_regime_name(result->regime), reason);
    } else {
        stream->auto_enable = false;
    }
    return 0;
}

int cli_plan_prepare(cli_options *options, plan *result)
{
    memset(result, 0, sizeof *result);
    bool model_job = options->mode == CLI_MODE_GENERATE || options->mode == CLI_MODE_LOGITS ||
                     options->mode == CLI_MODE_PERPLEXITY || options->mode == CLI_MODE_SESSION;
    if (options->plan_mode == CLI_PLAN_OFF)
        return model_job && !options->show_config ? cli_plan_regime(options, result) : 0;
    char error[320];
    plan_model model;
    int32_t n_ctx = options->n_ctx > 0 ? options->n_ctx : 4096;
    bool draft_head = options->model_params.draft_head;
    bmoe_context_params context = cli_context_params(options, n_ctx);
    if (plan_probe_model(options->model_path, &context, draft_head, &model, error, sizeof error) != 0)
        return cli_fail("%s: %s", options->plan_mode == CLI_PLAN_RUN ? "--auto" : "--plan", error);
    char cache_dir[1024];
    plan_machine machine;
    if (plan_probe_machine(options->model_path, model.expert_slice_bytes, options->probe_io, options->probe_mem,
                           plan_cache_dir(cache_dir, sizeof cache_dir), options->probe_again, &machine, error,
                           sizeof error) != 0)
        return cli_fail("%s: %s", options->plan_mode == CLI_PLAN_RUN ? "--auto" : "--plan", error);
    plan_pins pins = cli_plan_pins(options);
    if (plan_make(&model, &machine, &pins, result) != 0)
        return cli_fail("%s", result->refusal);
    cli_plan_apply(options, result);
    return 0;
}

int cli_plan_report(const cli_options *options, const plan *result)
{
    if (options->plan_mode == CLI_PLAN_OFF)
        return 0;
    if (options->show_config)
        return 0;
    FILE *out = options->plan_mode == CLI_PLAN_ONLY ? stdout : stderr;
    char text[8192];
    size_t length = plan_format(result, options->plan_explain, text, sizeof text);
    if (length >= sizeof text)
        length = sizeof text - 1;
    return cli_write(out, text, length) == 0 && cli_flush(out) == 0 ? 0 : 1;
}

int cli_show_config(const cli_options *options, const plan *result)
{
    char *plan_json = options->plan_mode != CLI_PLAN_OFF ? cli_plan_json(result) : NULL;
    if (options->plan_mode != CLI_PLAN_OFF && !plan_json)
        return cli_fail("--show-config: out of memory");
    unsigned jobs = options->mode == CLI_MODE_GENERATE     ? PARAM_JOB_GENERATE
                    : options->mode == CLI_MODE_LOGITS     ? PARAM_JOB_LOGITS
                    : options->mode == CLI_MODE_PERPLEXITY ? PARAM_JOB_PERPLEXITY
                    : options->mode == CLI_MODE_SESSION    ? PARAM_JOB_SESSION
                                                           : 0;
    int written = params_config_json(stdout, &options->values, jobs, options->argc, options->argv, "plan", plan_json);
    cJSON_free(plan_json);
    if (written != 0)
        return cli_fail("--show-config: out of memory");
    return cli_flush(stdout) == 0 ? 0 : 1;
}

int cli_plan_line(const cli_options *options, const bmoe_stats *decode)
{
    const plan *result = options->plan;
    if (!result || options->plan_mode != CLI_PLAN_RUN)
        return 0;
    double measured = decode->n_tokens > 0 ? decode->wall_ms * 1e-3 / decode->n_tokens : 0.0;
    if (result->predicted_seconds_per_token > 0 && measured > 0)
        printf("plan: %s, predicted %.4f s/token, measured %.4f s/token (%.2fx the prediction); flags: %s\n",
               plan_regime_name(result->regime), result->predicted_seconds_per_token, measured,
               measured / result->predicted_seconds_per_token, result->flags);
    else
        printf("plan: %s, no prediction (rates not probed), measured %.4f s/token; flags: %s\n",
               plan_regime_name(result->regime), measured, result->flags);
    return cli_flush(stdout) == 0 ? 0 : 1;
}
