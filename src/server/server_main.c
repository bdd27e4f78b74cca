/* bmoe-server's command line, read through the parameter table (the rows
 * whose jobs include serving; the engine's rows mapped by the same
 * params_apply_engine as bmoe-cli's), then the model and its one context. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "params.h"
#include "server.h"
#include "tm_profile.h"

static int server_fail(const char *message)
{
    fprintf(stderr, "bmoe-server: %s\n", message);
    return 1;
}

/* The server's own rows. 0, or 1 with error filled. */
static int apply_own(const param_def *row, const char *name, const char *value, server_config *config, char *error,
                     size_t error_size)
{
    int32_t number = 0;
    if (row->type == PARAM_INT && params_parse_int(row, name, value, &number, error, error_size) != 0)
        return 1;
    switch (row->id) {
    case P_MODEL: config->model_path = value; break;
    case P_HOST: config->host = value; break;
    case P_PORT: config->port = number; break;
    case P_API_KEY:
        if (!value[0]) {
            snprintf(error, error_size, "%s needs a non-empty key", name);
            return 1;
        }
        config->api_key = value;
        break;
    case P_ALIAS:
        if (!value[0]) {
            snprintf(error, error_size, "%s needs a non-empty name", name);
            return 1;
        }
        config->alias = value;
        break;
    case P_MAX_QUEUE: config->max_queue = number; break;
    case P_EXPERT_PROFILE: config->expert_profile = value; break;
    case P_MAX_BODY: config->max_body = (size_t)number << 20; break;
    case P_TIMEOUT: config->timeout = number; break;
    case P_N_PREDICT: config->n_predict = number; break;
    case P_NO_THINK: config->no_think = true; break;
    case P_REASONING_EFFORT: {
        int choice = 0;
        if (params_parse_choice(row, name, value, &choice, error, error_size) != 0)
            return 1;
        config->reasoning_effort = value;
        break;
    }
    case P_TEMPLATE_NOW: {
        char *end = NULL;
        long long seconds = strtoll(value, &end, 10);
        if (!value[0] || *end || seconds <= 0) {
            snprintf(error, error_size, "%s: '%s' is not a positive number of seconds", name, value);
            return 1;
        }
        config->template_now = seconds;
        break;
    }
    default:
        snprintf(error, error_size, "%s is not implemented by bmoe-server", name);
        return 1;
    }
    return 0;
}

/* Reads argv, then the environment variables of the rows not typed, into config. Returns -1 to go on, else the exit status (help,
 * version, or an error already printed). */
static int parse_args(int argc, char **argv, server_config *config)
{
    params_engine engine = {
        .model = &config->model_params,
        .sampler = &config->sampler,
        .n_threads = &config->n_threads,
        .n_threads_batch = &config->n_threads_batch,
        .n_ctx = &config->n_ctx,
        .n_ubatch = &config->n_ubatch,
        .kv_type = &config->kv_type,
        .swa_cache = &config->swa_cache,
        .seed_given = &config->seed_given,
        .speculation = &config->speculation,
    };
    char error[320];
    bool given[P_COUNT] = {false};
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const param_def *row = params_find_flag(arg);
        if (!row) {
            fprintf(stderr, "bmoe-server: %s '%s' (try --help)\n",
                    arg[0] == '-' && arg[1] ? "unknown flag" : "unexpected argument", arg);
            return 1;
        }
        if (row->id == P_UNAVAILABLE) {
            fprintf(stderr, "bmoe-server: %s %s\n", arg, row->refusal);
            return 1;
        }
        if (!(row->jobs & PARAM_JOB_SERVE)) {
            fprintf(stderr, "bmoe-server: %s is bmoe-cli's, not the server's (try --help)\n", arg);
            return 1;
        }
        if (row->id == P_HELP) {
            printf("usage: bmoe-server -m MODEL [options]\n\n"
                   "An OpenAI-compatible HTTP API (/v1/chat/completions, /v1/completions, /v1/models) on one "
                   "model.\n\n");
            params_print_help(stdout, PARAM_ADVANCED, PARAM_JOB_SERVE);
            return 0;
        }
        if (row->id == P_VERSION) {
            printf("bmoe-server %s\n", bmoe_version());
            return 0;
        }
        given[row->id] = true;
        const char *value = "";
        if (row->type != PARAM_SWITCH) {
            if (i + 1 >= argc) {
                fprintf(stderr, "bmoe-server: %s needs a value\n", arg);
                return 1;
            }
            value = argv[++i];
        }
        int status = params_apply_engine(row, arg, value, &engine, error, sizeof error);
        if (status == PARAMS_NOT_ENGINE)
            status = apply_own(row, arg, value, config, error, sizeof error);
        if (status != 0) {
            server_fail(error);
            return status;
        }
    }
    /* the environment, for what was not typed (a typed flag wins, even when it says the default) */
    size_t count = 0;
    const param_def *rows = params_table(&count);
    for (size_t k = 0; k < count; k++) {
        const param_def *row = &rows[k];
        const char *text = row->env && (row->jobs & PARAM_JOB_SERVE) ? getenv(row->env) : NULL;
        if (!text || !*text || given[row->id])
            continue;
        if (row->type == PARAM_SWITCH) {
            int on = params_parse_switch(row->env, text, error, sizeof error);
            if (on < 0)
                return server_fail(error);
            if (!on)
                continue;
        }
        int status = params_apply_engine(row, row->env, text, &engine, error, sizeof error);
        if (status == PARAMS_NOT_ENGINE)
            status = apply_own(row, row->env, text, config, error, sizeof error);
        if (status != 0) {
            server_fail(error);
            return status;
        }
    }
    if (!config->model_path)
        return server_fail("no model: -m MODEL (try --help)");
    int status = params_check_speculation(given, &config->speculation, &config->model_params.lossy, error,
                                          sizeof error);
    if (status != 0) {
        server_fail(error);
        return status;
    }
    return -1;
}

/* --mtp on a model or a build without the head: refused before the server
 * listens, not by every request. The library checks the draft source
 * against the model when a generation starts, before it evaluates
 * anything; a generation of no token on one prompt token asks it. 0, or 1
 * with the reason printed. */
static int check_drafting(server *s)
{
    if (s->config->speculation.source != BMOE_DRAFT_MTP)
        return 0;
    bmoe_generation_params params = bmoe_generation_default_params();
    params.n_predict = 0;
    params.speculation = s->config->speculation;
    int32_t token = 0;
    bmoe_error error = {0};
    bmoe_generation *generation = bmoe_generation_start(s->context, &params, &token, 1, &error);
    if (!generation) {
        fprintf(stderr, "bmoe-server: --mtp: %s\n", error.message);
        return 1;
    }
    bmoe_generation_free(generation);
    return 0;
}

int main(int argc, char **argv)
{
    server_config config = {
        .host = "127.0.0.1",
        .port = 8080,
        .max_queue = 8,
        .max_body = (size_t)8 << 20,
        .timeout = 30,
        .n_predict = 128, /* the table's default, as bmoe-cli's */
        .sampler = bmoe_sampler_default_params(),
        .speculation = bmoe_generation_default_params().speculation,
        .model_params = bmoe_model_default_params(),
        .kv_type = BMOE_KV_F16,
        .swa_cache = BMOE_SWA_CHECKPOINT,
    };
    int status = parse_args(argc, argv, &config);
    if (status >= 0)
        return status;
    if (!config.seed_given)
        config.sampler.seed = (uint64_t)time(NULL);

    bmoe_error error = {0};
    server s = {.config = &config};
    s.model = bmoe_model_load(config.model_path, &config.model_params, &error);
    if (!s.model) {
        fprintf(stderr, "bmoe-server: %s: %s\n", config.model_path, error.message);
        return 1;
    }
    s.profile_writable = config.expert_profile && tm_profile_warm(s.model, config.expert_profile, stderr, "bmoe-server");
    bmoe_context_params context_params = bmoe_context_default_params();
    context_params.n_ctx = config.n_ctx;
    context_params.n_ubatch = config.n_ubatch;
    context_params.n_threads = config.n_threads;
    context_params.n_threads_batch = config.n_threads_batch;
    context_params.kv_type = config.kv_type;
    context_params.swa_cache = (enum bmoe_swa_cache)config.swa_cache;
    atomic_init(&s.cancel, false);
    atomic_init(&s.stopping, false);
    atomic_init(&s.next_id, 1);
    pthread_mutex_init(&s.lock, NULL);
    pthread_cond_init(&s.turn_over, NULL);
    pthread_cond_init(&s.events_changed, NULL);
    context_params.abort_callback = server_abort_requested;
    context_params.abort_user = &s;
    s.context = bmoe_context_create(s.model, &context_params, &error);
    if (!s.context) {
        fprintf(stderr, "bmoe-server: the context: %s\n", error.message);
        bmoe_model_free(s.model);
        return 1;
    }
    if (check_drafting(&s) != 0) {
        bmoe_context_free(s.context);
        bmoe_model_free(s.model);
        return 1;
    }
    bmoe_error chat_error = {0};
    s.chat = bmoe_chat_create(s.model, &chat_error);
    if (bmoe_chat_check_reasoning_effort(s.chat, config.reasoning_effort, &chat_error) != 0) {
        fprintf(stderr, "bmoe-server: --reasoning-effort: %s\n",
                s.chat ? chat_error.message : "the model has no chat template");
        bmoe_chat_free(s.chat);
        bmoe_context_free(s.context);
        bmoe_model_free(s.model);
        return 1;
    }
    const char *slash = strrchr(config.model_path, '/');
    s.model_file = slash ? slash + 1 : config.model_path;
    s.model_id = config.alias ? config.alias : s.model_file;

    status = server_http_run(&s);

    bmoe_json_constraint_free(s.json_constraint);
    bmoe_token_index_free(s.token_index);
    bmoe_chat_free(s.chat);
    bmoe_context_free(s.context);
    bmoe_model_free(s.model);
    pthread_cond_destroy(&s.turn_over);
    pthread_cond_destroy(&s.events_changed);
    server_events_free(&s);
    pthread_mutex_destroy(&s.lock);
    return status;
}
