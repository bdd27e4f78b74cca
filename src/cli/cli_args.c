/* Command-line parsing for bmoe-cli: one table of flags, each with the kind
 * of value it takes, its range and the jobs it means something in. Numbers
 * are parsed by one function with one rule (the whole string, decimal digits
 * and an optional leading '-', no spaces, '+' or hex, in range); a flag that
 * does nothing in the chosen job is an error, never silently ignored. Every
 * flag of the reference CLI has a row: those bmoe does not have (yet) are
 * refused with a line that says so, not as unknown. Environment overrides
 * (a flag typed wins) are read here and nowhere else. A bad command line is
 * one line on stderr naming the flag and what is wrong, and the reference's
 * exit status: 2 for switches that contradict each other and a bad
 * --dense-weights value, 1 for everything else. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "params.h"

/* The most token ids a --prompt-ids or --force-ids list may hold. */
#define CLI_MAX_ID_LIST (1 << 20)

/* The jobs a parameter means something in, as the table's bits. */
static unsigned cli_job_bit(cli_mode mode)
{
    switch (mode) {
    case CLI_MODE_GENERATE: return PARAM_JOB_GENERATE;
    case CLI_MODE_LOGITS: return PARAM_JOB_LOGITS;
    case CLI_MODE_PERPLEXITY: return PARAM_JOB_PERPLEXITY;
    case CLI_MODE_SESSION: return PARAM_JOB_SESSION;
    case CLI_MODE_RENDER: return PARAM_JOB_RENDER;
    default: return 0;
    }
}

void cli_print_usage(FILE *out, bool all)
{
    fputs("usage: bmoe-cli -m MODEL [-p PROMPT | -f FILE] [options]\n"
          "       bmoe-cli -m MODEL --auto [-p PROMPT] [options]     plan the run for this machine, then run it\n"
          "       bmoe-cli -m MODEL --plan [--plan-explain]          print that plan and exit\n"
          "       bmoe-cli -m MODEL --ppl FILE [-c N] [--chunks N] [--ppl-skip N] [--ppl-step]\n"
          "       bmoe-cli -m MODEL --ppl-list FILE [-c N] [--ppl-skip N] [--ppl-step]\n"
          "       bmoe-cli -m MODEL -p PROMPT --ppl-choices A,B,... [--ppl-step]\n"
          "       bmoe-cli -m MODEL --prompt-ids 1,2,3 [--force-ids 7,8,9] --logits-out FILE\n"
          "       bmoe-cli -m MODEL --session [--chat] [--decide] [options]\n"
          "       bmoe-cli --render-template FILE --template-context CONTEXT.json\n"
          "       bmoe-cli --info MODEL | --version | --list-archs | --describe-params\n",
          out);
    params_print_help(out, all ? PARAM_DEBUG : PARAM_ADVANCED, PARAM_JOBS_CLI);
    fputs(all ? "" : "\n--help-all adds the experimental and debugging flags and those refused.\n", out);
    fputs("\nenvironment (a flag typed wins, even when it says the default; switches: an integer, non-zero on):\n ",
          out);
    size_t count = 0;
    const param_def *rows = params_table(&count);
    for (size_t i = 0; i < count; i++)
        if (rows[i].env && (rows[i].jobs & PARAM_JOBS_CLI))
            fprintf(out, " %s (%s)", rows[i].env, rows[i].flag);
    fputs("\n\nexit status: 0 success; 1 a usage error (unknown flag, missing or bad value, a flag out\n"
          "of place), a refused flag or a failed run; 2 switches that contradict each other, or a\n"
          "bad --dense-weights value\n",
          out);
}

/* The table's parsers, with their message printed. Each returns 0 or -1. */
static int cli_parse_int(const param_def *flag, const char *name, const char *text, int32_t *value)
{
    char error[320];
    return params_parse_int(flag, name, text, value, error, sizeof error) == 0 ? 0 : cli_fail("%s", error) * -1;
}

static int cli_parse_seed(const char *name, const char *text, uint64_t *value)
{
    char error[320];
    return params_parse_u64(name, text, value, error, sizeof error) == 0 ? 0 : cli_fail("%s", error) * -1;
}

/* Index of value among flag->choices, or -1 (message printed). */
static int cli_parse_choice(const param_def *flag, const char *name, const char *value)
{
    char error[320];
    int index = 0;
    return params_parse_choice(flag, name, value, &index, error, sizeof error) == 0 ? index
                                                                                   : cli_fail("%s", error) * -1;
}

/* --logit-bias TOKEN+BIAS or TOKEN-BIAS (BIAS a number, or inf for -inf),
 * a list separated by commas, appended to options' biases. 0, or 1 with
 * the reason printed. */
static int cli_parse_logit_bias(const char *name, const char *text, cli_options *options)
{
    int32_t count = 1;
    for (const char *c = text; *c; c++)
        count += *c == ',';
    int32_t total = options->sampler.n_logit_bias + count;
    if (total > CLI_MAX_ID_LIST)
        return cli_fail("%s: more than %d biases", name, CLI_MAX_ID_LIST);
    bmoe_logit_bias *grown = realloc(options->logit_bias, (size_t)total * sizeof *grown);
    if (!grown)
        return cli_fail("%s: out of memory", name);
    options->logit_bias = grown;
    options->sampler.logit_bias = grown;
    const char *cursor = text;
    for (int32_t i = 0; i < count; i++) {
        char *end = NULL;
        errno = 0;
        long long token = *cursor >= '0' && *cursor <= '9' ? strtoll(cursor, &end, 10) : -1;
        char sign = end ? *end : '\0';
        if (token < 0 || token > INT32_MAX || errno || (sign != '+' && sign != '-'))
            return cli_fail("%s: '%s': each bias is TOKEN+BIAS or TOKEN-BIAS (15043+1, 15043-inf)", name,
                            text);
        const char *number = end + 1;
        float bias;
        if (strncmp(number, "inf", 3) == 0 && (number[3] == ',' || number[3] == '\0') && sign == '-') {
            bias = -INFINITY;
            end = (char *)number + 3;
        } else {
            bias = number[0] >= '0' && number[0] <= '9' ? strtof(number, &end) : NAN;
            if (!isfinite(bias) || (*end != ',' && *end != '\0'))
                return cli_fail("%s: '%s': a bias is a number, or -inf", name, text);
            bias = sign == '-' ? -bias : bias;
        }
        grown[options->sampler.n_logit_bias++] = (bmoe_logit_bias){(int32_t)token, bias};
        cursor = *end == ',' ? end + 1 : end;
    }
    return 0;
}

int cli_parse_ids(const char *name, const char *text, int32_t **ids, int32_t *n_ids)
{
    int32_t count = 0;
    if (*text) {
        count = 1;
        for (const char *c = text; *c; c++)
            count += *c == ',';
    }
    if (count > CLI_MAX_ID_LIST) {
        cli_fail("%s: more than %d ids", name, CLI_MAX_ID_LIST);
        return -1;
    }
    int32_t *list = malloc((size_t)(count ? count : 1) * sizeof *list);
    if (!list) {
        cli_fail("%s: out of memory", name);
        return -1;
    }
    const char *cursor = text;
    for (int32_t i = 0; i < count; i++) {
        errno = 0;
        char *end = NULL;
        if (*cursor < '0' || *cursor > '9') {
            free(list);
            cli_fail("%s: id %d of '%s' is not a non-negative integer", name, i + 1, text);
            return -1;
        }
        long long value = strtoll(cursor, &end, 10);
        if (errno || value > INT32_MAX || (*end != ',' && *end != '\0')) {
            free(list);
            cli_fail("%s: id %d of '%s' is not a token id", name, i + 1, text);
            return -1;
        }
        list[i] = (int32_t)value;
        cursor = *end ? end + 1 : end;
    }
    *ids = list;
    *n_ids = count;
    return 0;
}

/* --ppl-choices' "A,B,C" into a new array of strings (one allocation, the
 * strings after the pointers): a comma separates choices, "\," is a comma
 * in one and "\\" a backslash (any other backslash is itself). An empty
 * choice is refused: it has no token to score. Returns 0 or -1 (message
 * printed). */
static int cli_parse_choice_list(const char *name, const char *text, char ***choices, int32_t *n_choices)
{
    size_t length = strlen(text);
    size_t count = 1;
    for (const char *c = text; *c; c++)
        count += *c == ',';
    if (count > (size_t)CLI_MAX_ID_LIST) {
        cli_fail("%s: more than %d choices", name, CLI_MAX_ID_LIST);
        return -1;
    }
    char **list = malloc(count * sizeof *list + length + 1);
    if (!list) {
        cli_fail("%s: out of memory", name);
        return -1;
    }
    char *out = (char *)(list + count);
    int32_t n = 0;
    list[n++] = out;
    for (const char *c = text; *c; c++) {
        if (*c == '\\' && (c[1] == ',' || c[1] == '\\')) {
            *out++ = *++c;
        } else if (*c == ',') {
            *out++ = '\0';
            list[n++] = out;
        } else {
            *out++ = *c;
        }
    }
    *out = '\0';
    for (int32_t i = 0; i < n; i++) {
        if (!list[i][0]) {
            cli_fail("%s: choice %d of '%s' is empty", name, i, text);
            free(list);
            return -1;
        }
    }
    *choices = list;
    *n_choices = n;
    return 0;
}

void cli_options_free(cli_options *options)
{
    free(options->prompt_ids);
    free(options->force_ids);
    free(options->ppl_choices);
    free(options->logit_bias);
    options->logit_bias = NULL;
    options->sampler.logit_bias = NULL;
    options->sampler.n_logit_bias = 0;
    options->prompt_ids = NULL;
    options->force_ids = NULL;
    options->ppl_choices = NULL;
    options->n_ppl_choices = 0;
}

/* Stores one flag's value into options. Returns 0, or the exit status with
 * the message printed. */
static int cli_apply(const param_def *flag, const char *name, const char *value, cli_options *options)
{
    char error[320];
    params_engine engine = {
        .model = &options->model_params,
        .sampler = &options->sampler,
        .n_threads = &options->n_threads,
        .n_threads_batch = &options->n_threads_batch,
        .n_ctx = &options->n_ctx,
        .n_ubatch = &options->n_ubatch,
        .kv_type = &options->kv_type,
        .swa_cache = &options->swa_cache,
        .seed_given = &options->seed_given,
        .speculation = &options->speculation,
    };
    int engine_status = params_apply_engine(flag, name, value, &engine, error, sizeof error);
    if (engine_status != PARAMS_NOT_ENGINE) {
        if (engine_status != 0)
            cli_fail("%s", error);
        return engine_status;
    }
    int32_t number = 0;
    int choice;
    if (flag->type == PARAM_INT && cli_parse_int(flag, name, value, &number) != 0)
        return 1;
    switch (flag->id) {
    case P_MODEL: options->model_path = value; break;
    case P_PROMPT: options->prompt = value; break;
    case P_FILE: options->prompt_file = value; break;
    case P_N_PREDICT: options->n_predict = number; break;
    case P_IGNORE_EOS: options->ignore_eos = true; break;
    case P_NO_PREFAULT: options->no_prefault = true; break;
    case P_PROMPT_IDS:
        free(options->prompt_ids);
        options->prompt_ids = NULL;
        return cli_parse_ids(name, value, &options->prompt_ids, &options->n_prompt_ids) == 0 ? 0 : 1;
    case P_FORCE_IDS:
        free(options->force_ids);
        options->force_ids = NULL;
        return cli_parse_ids(name, value, &options->force_ids, &options->n_force_ids) == 0 ? 0 : 1;
    case P_LOGIT_BIAS: return cli_parse_logit_bias(name, value, options);
    case P_LOGITS_OUT: options->logits_out = value; break;
    case P_PPL: options->ppl_path = value; break;
    case P_CHUNKS: options->ppl_chunks = number; break;
    case P_PPL_SKIP:
        options->ppl_skip = number;
        options->ppl_skip_given = true;
        break;
    case P_PPL_STEP: options->ppl_step = true; break;
    case P_PPL_LIST: options->ppl_list_path = value; break;
    case P_PPL_CHOICES:
        free(options->ppl_choices);
        options->ppl_choices = NULL;
        return cli_parse_choice_list(name, value, &options->ppl_choices, &options->n_ppl_choices) == 0 ? 0 : 1;
    case P_INFO: options->info_path = value; break;
    case P_PREDICT_LOG: options->predict_log = true; break;
    case P_PROGRESS: options->progress = true; break;
    case P_ROUTE_REPLAY: options->route_replay = value; break;
    case P_ROUTE_REPLAY_GUESS_RIGHT: {
        char message[256];
        if (params_parse_float(flag, name, value, &options->route_guess_right, message, sizeof message) != 0) {
            cli_fail("%s", message);
            return 1;
        }
        break;
    }
    case P_DRAFT_REPLAY: options->draft_replay = value; break;
    case P_DRAFT_REPLAY_MODE:
        if ((choice = cli_parse_choice(flag, name, value)) < 0)
            return 1;
        options->draft_replay_reject = choice == 1;
        break;
    case P_DRAFT_REPLAY_RATE: {
        char message[256];
        if (params_parse_float(flag, name, value, &options->draft_replay_rate, message, sizeof message) != 0) {
            cli_fail("%s", message);
            return 1;
        }
        options->draft_replay_rate_given = true;
        break;
    }
    case P_IDS_OUT: options->ids_out = value; break;
    case P_CSV: options->csv_path = value; break;
    case P_EXPERT_PROFILE: options->expert_profile = value; break;
    case P_ROUTE_TRACE: options->route_trace_path = value; break;
    case P_IO_TRACE: options->io_trace_path = value; break;
    case P_COMPUTE_TRACE: options->compute_trace_path = value; break;
    case P_COMPUTE_TRACE_LAYERS: options->compute_trace_layers_path = value; break;
    case P_RENDER_TEMPLATE: options->render_template = value; break;
    case P_TEMPLATE_CONTEXT: options->template_context = value; break;
    case P_TEMPLATE_NOW: {
        uint64_t seconds = 0;
        if (cli_parse_seed(name, value, &seconds) != 0)
            return 1;
        if (seconds == 0 || seconds > (uint64_t)INT64_MAX / 2) {
            cli_fail("%s: %s is not a time in seconds since 1970 (1 or more)", name, value);
            return 1;
        }
        options->template_now = (int64_t)seconds;
        break;
    }
    case P_CHAT: options->chat = true; break;
    case P_NO_THINK: options->no_think = true; break;
    case P_JSON_SCHEMA: options->json_schema = value; break;
    case P_JSON_SCHEMA_FILE: options->json_schema_file = value; break;
    case P_GRAMMAR: options->grammar = value; break;
    case P_GRAMMAR_FILE: options->grammar_file = value; break;
    case P_REASONING_EFFORT:
        if (cli_parse_choice(flag, name, value) < 0)
            return 1;
        options->reasoning_effort = value;
        break;
    case P_SESSION: break; /* the job is chosen after every flag is read */
    case P_CONVERSATION: options->conversation = true; break;
    case P_SYSTEM_PROMPT: options->system_prompt = value; break;
    case P_DECIDE: options->decide = true; break;
    case P_DECIDE_PREFIX_CACHE:
        if ((choice = cli_parse_choice(flag, name, value)) < 0)
            return 1;
        options->decide_prefix_cache = choice != 2; /* auto and on: the kept prefix is reused */
        break;
    case P_FORCE_CACHE: break; /* bmoe has no 1..1499 MiB band to allow */
    case P_DEVICES:
        if (cli_parse_choice(flag, name, value) < 0)
            return 1;
        break; /* a CPU-only build: every device is the CPU */
    case P_GPU_LAYERS:
        if (number > 0) {
            cli_fail("%s %s needs a GPU or accelerator device, which this CPU-only build does not have", name, value);
            return 1;
        }
        break;
    case P_THREADS: case P_THREADS_BATCH: case P_CTX: case P_UBATCH: case P_KV_TYPE: case P_SWA_CACHE: case P_DENSE:
    case P_NO_WARM_DENSE: case P_DENSE_ODIRECT: case P_TEMP: case P_TOP_K: case P_TOP_P: case P_MIN_P:
    case P_REPEAT_PENALTY: case P_REPEAT_LAST_N: case P_FREQUENCY_PENALTY: case P_PRESENCE_PENALTY: case P_SEED:
    case P_MOE_STREAM: case P_NO_MOE_STREAM: case P_CACHE_MB: case P_CACHE_POLICY: case P_CACHE_FLOOR:
    case P_CACHE_CEIL: case P_IO_THREADS: case P_NO_ODIRECT: case P_OVERLAP: case P_PREFETCH: case P_PREDICT_PREFETCH:
    case P_PREDICT_SPEC_MAX: case P_LOAD_ALL: case P_PRELOAD_EXPERTS: case P_N_EXPERT_USED: case P_DROP_COLD:
    case P_DROP_NO_RENORM: case P_DROP_IN_PREFILL: case P_SUBSTITUTE: case P_ROUTE_AHEAD: case P_NGRAM: case P_MTP:
    case P_DRAFT: case P_NGRAM_MIN_MATCH: case P_NGRAM_MAX_MATCH: case P_MTP_P_MIN: case P_DRAFT_ALWAYS:
    case P_PREDICT_ALWAYS:
        break; /* params_apply_engine set it */
    case P_UNAVAILABLE:
        cli_fail("%s %s", name, flag->refusal);
        return 1;
    case P_AUTO:
    case P_PLAN:
        if (options->plan_mode != CLI_PLAN_OFF &&
            options->plan_mode != (flag->id == P_AUTO ? CLI_PLAN_RUN : CLI_PLAN_ONLY)) {
            cli_fail("--auto runs the plan, --plan only prints it: give one of them");
            return 2;
        }
        options->plan_mode = flag->id == P_AUTO ? CLI_PLAN_RUN : CLI_PLAN_ONLY;
        break;
    case P_PLAN_EXPLAIN: options->plan_explain = true; break;
    case P_PROBE: options->probe_again = true; break;
    case P_PROBE_IO: options->probe_io = true; break;
    case P_NO_PROBE_IO: options->probe_io = false; break;
    case P_PROBE_MEM: options->probe_mem = true; break;
    case P_NO_PROBE_MEM: options->probe_mem = false; break;
    case P_SHOW_CONFIG: options->show_config = true; break;
    case P_HELP_ALL:
    case P_HELP_MARKDOWN:
    case P_DESCRIBE_PARAMS:
    case P_LIST_ARCHS:
    case P_HELP:
    case P_VERSION:
    /* bmoe-server's own: the job check refuses them here */
    case P_HOST:
    case P_PORT:
    case P_API_KEY:
    case P_ALIAS:
    case P_MAX_QUEUE:
    case P_MAX_BODY:
    case P_TIMEOUT:
    case P_COUNT: break;
    }
    return 0;
}

/* The job's name in messages: for perplexity, the flag that chose it. */
static const char *cli_mode_name(const cli_options *options)
{
    switch (options->mode) {
    case CLI_MODE_GENERATE: return "generation";
    case CLI_MODE_INFO: return "--info";
    case CLI_MODE_HELP: return "--help";
    case CLI_MODE_VERSION: return "--version";
    case CLI_MODE_LOGITS: return "--logits-out";
    case CLI_MODE_PERPLEXITY:
        return options->ppl_list_path ? "--ppl-list" : options->ppl_choices ? "--ppl-choices" : "--ppl";
    case CLI_MODE_SESSION: return options->conversation ? "--conversation" : "--session";
    case CLI_MODE_RENDER: return "--render-template";
    case CLI_MODE_LIST_ARCHS: return "--list-archs";
    case CLI_MODE_HELP_ALL: return "--help-all";
    case CLI_MODE_DESCRIBE_PARAMS: return "--describe-params";
    case CLI_MODE_HELP_MARKDOWN: return "--help-markdown";
    }
    return "this job";
}

/* Fails the parse: frees what options own and returns status. */
static int cli_refuse(cli_options *options, int status)
{
    cli_options_free(options);
    return status;
}

/* The environment overrides for the flags not typed that mean something in
 * the job. Returns 0, or 1 with the message printed. */
static int cli_apply_environment(cli_options *options, const bool *given)
{
    size_t count = 0;
    const param_def *rows = params_table(&count);
    for (size_t i = 0; i < count; i++) {
        const param_def *flag = &rows[i];
        const char *text = flag->env ? getenv(flag->env) : NULL;
        if (!text || !*text)
            continue;
        if (given[flag->id] || !(flag->jobs & cli_job_bit(options->mode)))
            continue; /* a typed flag wins, even when it says the default */
        const char *value = text;
        if (flag->type == PARAM_SWITCH) {
            char error[320];
            int on = params_parse_switch(flag->env, text, error, sizeof error);
            if (on < 0) {
                cli_fail("%s", error);
                return 1;
            }
            if (!on)
                continue;
            value = NULL;
        }
        /* the variable's name in the messages, so that the user knows where the value came from */
        if (cli_apply(flag, flag->env, value, options) != 0)
            return 1;
        options->values.value[flag->id] = (param_value){value ? value : "on", PARAM_SOURCE_ENV};
    }
    return 0;
}

/* An output replaces its file at the end of the run: on the model, it would
 * destroy what the run reads (a split model's every shard counts); on
 * another output, one would replace the other. Compared as files, whatever
 * names the paths use (links, "./"). Returns 0 or -1 (message printed). */
static int cli_check_outputs(const cli_options *options, const char *const given_as[P_COUNT])
{
    const param_id outputs[] = {P_CSV, P_ROUTE_TRACE, P_IO_TRACE, P_COMPUTE_TRACE, P_COMPUTE_TRACE_LAYERS,
                               P_LOGITS_OUT, P_EXPERT_PROFILE, P_IDS_OUT};
    const char *paths[] = {options->csv_path, options->route_trace_path, options->io_trace_path,
                           options->compute_trace_path, options->compute_trace_layers_path, options->logits_out,
                           options->expert_profile, options->ids_out};
    size_t count = sizeof outputs / sizeof outputs[0];
    for (size_t a = 0; a < count; a++) {
        if (!paths[a])
            continue;
        if (options->model_path && bmoe_is_model_file(paths[a], options->model_path)) {
            cli_fail("%s %s is a file of the model %s; refusing to overwrite it", given_as[outputs[a]], paths[a],
                     options->model_path);
            return -1;
        }
        for (size_t b = a + 1; b < count; b++) {
            if (paths[b] && bmoe_same_file(paths[a], paths[b])) {
                cli_fail("%s %s and %s %s name the same file", given_as[outputs[a]], paths[a],
                         given_as[outputs[b]], paths[b]);
                return -1;
            }
        }
    }
    return 0;
}

int cli_parse_args(int argc, char **argv, cli_options *options)
{
    memset(options, 0, sizeof *options);
    options->mode = CLI_MODE_GENERATE;
    options->n_predict = 128;
    options->kv_type = BMOE_KV_F16;
    options->swa_cache = -1;
    options->model_params = bmoe_model_default_params();
    options->sampler = bmoe_sampler_default_params();
    options->speculation = bmoe_generation_default_params().speculation;
    options->ppl_chunks = -1;
    options->ppl_skip = 8;
    options->route_guess_right = 1.0f;
    options->decide_prefix_cache = true;
    options->probe_io = true;
    options->probe_mem = true;
    options->argc = argc;
    options->argv = argv;
    bool given[P_COUNT] = {false};
    const char *given_as[P_COUNT] = {NULL};

    if (argc <= 1) {
        cli_fail("no arguments (try --help)");
        return 1;
    }
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const param_def *flag = params_find_flag(arg);
        if (!flag) {
            if (arg[0] == '-' && arg[1])
                cli_fail("unknown flag %s (try --help)", arg);
            else
                cli_fail("unexpected argument '%s' (try --help)", arg);
            return cli_refuse(options, 1);
        }
        if (flag->id == P_HELP || flag->id == P_HELP_ALL || flag->id == P_VERSION || flag->id == P_LIST_ARCHS ||
            flag->id == P_DESCRIBE_PARAMS || flag->id == P_HELP_MARKDOWN) {
            cli_options_free(options);
            options->mode = flag->id == P_HELP        ? CLI_MODE_HELP
                            : flag->id == P_HELP_ALL  ? CLI_MODE_HELP_ALL
                            : flag->id == P_VERSION   ? CLI_MODE_VERSION
                            : flag->id == P_DESCRIBE_PARAMS ? CLI_MODE_DESCRIBE_PARAMS
                            : flag->id == P_HELP_MARKDOWN   ? CLI_MODE_HELP_MARKDOWN
                                                      : CLI_MODE_LIST_ARCHS;
            return 0;
        }
        const char *value = NULL;
        if (flag->type != PARAM_SWITCH && flag->id != P_UNAVAILABLE) {
            if (i + 1 >= argc) {
                cli_fail("%s needs a value", arg);
                return cli_refuse(options, 1);
            }
            value = argv[++i];
        }
        if (flag->id == P_DENSE && (given[P_NO_WARM_DENSE] || given[P_DENSE_ODIRECT])) {
            cli_fail("--dense-weights and %s both set the dense weights", given_as[given[P_NO_WARM_DENSE] ? P_NO_WARM_DENSE : P_DENSE_ODIRECT]);
            return cli_refuse(options, 2);
        }
        if ((flag->id == P_NO_WARM_DENSE || flag->id == P_DENSE_ODIRECT) &&
            (given[P_DENSE] || given[flag->id == P_NO_WARM_DENSE ? P_DENSE_ODIRECT : P_NO_WARM_DENSE])) {
            cli_fail("%s and %s both set the dense weights", arg,
                     given[P_DENSE] ? "--dense-weights" : given_as[flag->id == P_NO_WARM_DENSE ? P_DENSE_ODIRECT : P_NO_WARM_DENSE]);
            return cli_refuse(options, 2);
        }
        int applied = cli_apply(flag, arg, value, options);
        if (applied != 0)
            return cli_refuse(options, applied);
        given[flag->id] = true;
        given_as[flag->id] = arg;
        if (flag->id != P_UNAVAILABLE)
            options->values.value[flag->id] = (param_value){value ? value : "on", PARAM_SOURCE_FLAG};
    }

    /* Which job, and do the flags agree with it. Switches that contradict
     * each other are status 2, what is missing or misplaced 1. */
    const char *problem = NULL;
    char problem_text[160];
    int status = 1;
    bool perplexity = options->ppl_path || options->ppl_list_path || options->ppl_choices;
    if (options->info_path) {
        options->mode = CLI_MODE_INFO;
    } else if (options->render_template) {
        options->mode = CLI_MODE_RENDER;
        if (given[P_SESSION]) {
            problem = "--render-template and --session are different jobs";
            status = 2;
        } else if (!options->template_context) {
            problem = "--render-template needs --template-context CONTEXT.json";
        }
    } else if (options->template_context) {
        problem = "--template-context needs --render-template";
    } else if (!options->model_path) {
        problem = "no model given (-m MODEL)";
    } else if (given[P_SESSION] || given[P_CONVERSATION]) {
        options->mode = CLI_MODE_SESSION;
        if (given[P_SESSION] && given[P_CONVERSATION]) {
            problem = "--session and --conversation are different jobs (JSON requests, or a chat on the terminal)";
            status = 2;
        } else if (given[P_SYSTEM_PROMPT] && !given[P_CONVERSATION]) {
            problem = "--system-prompt needs --conversation";
        } else if (given[P_CONVERSATION] && (options->prompt || options->prompt_file)) {
            problem = "--conversation reads its turns from the terminal (not -p or -f)";
        } else if (perplexity) {
            snprintf(problem_text, sizeof problem_text, "%s and --session are different jobs",
                     options->ppl_path ? "--ppl" : options->ppl_list_path ? "--ppl-list" : "--ppl-choices");
            problem = problem_text;
            status = 2;
        } else if (options->n_predict == 0) {
            problem = "--session: -n must not be 0";
        }
    } else if (perplexity) {
        options->mode = CLI_MODE_PERPLEXITY;
        if (options->ppl_path && options->ppl_list_path) {
            problem = "--ppl and --ppl-list cannot be used together (chunks of one text, or one text a line)";
        } else if (options->ppl_choices && (options->ppl_path || options->ppl_list_path)) {
            snprintf(problem_text, sizeof problem_text, "--ppl-choices scores choices after -p, not a file (%s)",
                     options->ppl_path ? "--ppl" : "--ppl-list");
            problem = problem_text;
        } else if (options->ppl_choices && !options->prompt) {
            problem = "--ppl-choices needs -p PROMPT (the text the choices continue)";
        } else if (options->prompt && !options->ppl_choices) {
            snprintf(problem_text, sizeof problem_text, "%s cannot be combined with a prompt or token ids (%s)",
                     options->ppl_path ? "--ppl" : "--ppl-list", given_as[P_PROMPT]);
            problem = problem_text;
        }
    } else if (given[P_PROMPT_IDS] && (options->prompt || options->prompt_file)) {
        problem = "--prompt-ids cannot be combined with -p or -f";
        status = 2;
    } else if (given[P_PROMPT_IDS] && options->n_prompt_ids == 0) {
        problem = "--prompt-ids: the list is empty";
    } else if (given[P_FORCE_IDS] || options->logits_out) {
        options->mode = CLI_MODE_LOGITS;
        if (!given[P_PROMPT_IDS])
            problem = "--force-ids and --logits-out need --prompt-ids";
        else if (!options->logits_out)
            problem = "--force-ids needs --logits-out FILE";
    } else if (options->prompt && options->prompt_file) {
        problem = "-p and -f cannot be used together";
        status = 2;
    }
    int held = (options->json_schema != NULL) + (options->json_schema_file != NULL) + (options->grammar != NULL) +
               (options->grammar_file != NULL);
    if (!problem && held > 1) {
        problem = "--json-schema, --json-schema-file, --grammar and --grammar-file hold the answer to one thing: "
                  "give one of them";
        status = 2;
    }
    if (!problem && given[P_MOE_STREAM] && given[P_NO_MOE_STREAM]) {
        problem = "--moe-stream and --no-moe-stream exclude each other";
        status = 2;
    }
    if (!problem && given[P_PREFETCH] && given[P_PREDICT_PREFETCH] && options->model_params.stream.prefetch > 0) {
        problem = "--prefetch and --predict-prefetch exclude each other (two predictors of the next reads)";
        status = 2;
    }
    if (problem) {
        cli_fail("%s", problem);
        return cli_refuse(options, status);
    }
    unsigned job_bit = cli_job_bit(options->mode);
    size_t n_rows = 0;
    const param_def *rows = params_table(&n_rows);
    for (size_t k = 0; k < n_rows; k++) {
        const param_def *flag = &rows[k];
        if (flag->id == P_UNAVAILABLE || !given[flag->id] || flag->jobs == 0)
            continue;
        if (!(flag->jobs & job_bit)) {
            if (flag->id == P_CHUNKS)
                cli_fail("--chunks needs --ppl");
            else if (flag->id == P_PPL_SKIP || flag->id == P_PPL_STEP)
                cli_fail("%s needs --ppl, --ppl-list or --ppl-choices", given_as[flag->id]);
            else if (flag->id == P_TEMPLATE_CONTEXT)
                cli_fail("--template-context needs --render-template");
            else if (flag->id == P_DECIDE || flag->id == P_DECIDE_PREFIX_CACHE)
                cli_fail("%s needs --session", given_as[flag->id]);
            else if (options->mode == CLI_MODE_INFO)
                cli_fail("--info takes only the model path (%s does nothing there)", given_as[flag->id]);
            else if (options->mode == CLI_MODE_PERPLEXITY && options->ppl_choices &&
                     (flag->id == P_FILE || flag->id == P_PROMPT_IDS))
                cli_fail("--ppl-choices takes its prompt from -p (not %s)", given_as[flag->id]);
            else if (options->mode == CLI_MODE_PERPLEXITY && (flag->id == P_FILE || flag->id == P_PROMPT_IDS ||
                                                             flag->id == P_FORCE_IDS))
                cli_fail("%s cannot be combined with a prompt or token ids (%s)", cli_mode_name(options),
                         given_as[flag->id]);
            else
                cli_fail("%s does nothing with %s", given_as[flag->id], cli_mode_name(options));
            return cli_refuse(options, 1);
        }
        if (flag->needs_stream && !options->model_params.stream.enabled) {
            cli_fail("%s needs --moe-stream", given_as[flag->id]);
            return cli_refuse(options, 1);
        }
    }
    char error[320];
    int speculation_status =
        params_check_speculation(given, &options->speculation, &options->model_params.lossy, error, sizeof error);
    if (speculation_status != 0) {
        cli_fail("%s", error);
        return cli_refuse(options, speculation_status);
    }
    if ((given[P_DROP_NO_RENORM] || given[P_DROP_IN_PREFILL]) && !given[P_DROP_COLD]) {
        cli_fail("%s needs --drop-cold-experts", given_as[given[P_DROP_NO_RENORM] ? P_DROP_NO_RENORM : P_DROP_IN_PREFILL]);
        return cli_refuse(options, 1);
    }
    if (given[P_ROUTE_AHEAD] && given[P_PREDICT_PREFETCH]) {
        cli_fail("--route-ahead and --predict-prefetch exclude each other (route-ahead reads its own choice early)");
        return cli_refuse(options, 2);
    }
    /* --auto may turn the read-ahead on */
    if (given[P_ROUTE_REPLAY_GUESS_RIGHT] && !given[P_ROUTE_REPLAY]) {
        cli_fail("--route-replay-guess-right needs --route-replay");
        return cli_refuse(options, 1);
    }
    if (given[P_PREDICT_ALWAYS] && !given[P_PREDICT_PREFETCH] && !given[P_AUTO]) {
        cli_fail("--predict-always needs --predict-prefetch");
        return cli_refuse(options, 1);
    }
    if (options->mode == CLI_MODE_PERPLEXITY && given[P_CHUNKS] && !options->ppl_path) {
        cli_fail("--chunks needs --ppl (%s has no chunks)", cli_mode_name(options));
        return cli_refuse(options, 1);
    }
    if (options->mode == CLI_MODE_PERPLEXITY && given[P_PPL_SKIP] && options->ppl_choices) {
        cli_fail("%s does nothing with --ppl-choices (every token of a choice is scored)", given_as[P_PPL_SKIP]);
        return cli_refuse(options, 1);
    }
    if (given[P_DECIDE_PREFIX_CACHE] && !options->decide) {
        cli_fail("--decide-prefix-cache needs --decide");
        return cli_refuse(options, 1);
    }
    if (options->chat && options->prompt_ids) {
        cli_fail("--chat renders a text prompt through the template; it cannot take --prompt-ids");
        return cli_refuse(options, 2);
    }
    if (options->template_now && !options->chat && options->mode != CLI_MODE_RENDER) {
        cli_fail("--template-now needs --render-template or --chat (only a template reads the clock)");
        return cli_refuse(options, 1);
    }
    if (options->no_think && !options->chat) {
        cli_fail("--no-think needs --chat (a raw prompt has no reasoning to turn off)");
        return cli_refuse(options, 1);
    }
    if (options->reasoning_effort && !options->chat) {
        cli_fail("--reasoning-effort needs --chat (only a chat template reads it)");
        return cli_refuse(options, 1);
    }
    if ((given[P_PROBE_IO] && given[P_NO_PROBE_IO]) || (given[P_PROBE_MEM] && given[P_NO_PROBE_MEM])) {
        cli_fail("%s and %s exclude each other", given[P_PROBE_IO] && given[P_NO_PROBE_IO] ? "--probe-io" : "--probe-mem",
                 given[P_PROBE_IO] && given[P_NO_PROBE_IO] ? "--no-probe-io" : "--no-probe-mem");
        return cli_refuse(options, 2);
    }
    const param_id planner_only[] = {P_PLAN_EXPLAIN, P_PROBE, P_PROBE_IO, P_NO_PROBE_IO, P_PROBE_MEM, P_NO_PROBE_MEM};
    for (size_t k = 0; k < sizeof planner_only / sizeof planner_only[0]; k++) {
        if (given[planner_only[k]] && options->plan_mode == CLI_PLAN_OFF) {
            cli_fail("%s needs --auto or --plan (it tells the planner how to plan)", given_as[planner_only[k]]);
            return cli_refuse(options, 1);
        }
    }
    if (cli_check_outputs(options, given_as) != 0)
        return cli_refuse(options, 1);
    if (cli_apply_environment(options, given) != 0)
        return cli_refuse(options, 1);
    return 0;
}
