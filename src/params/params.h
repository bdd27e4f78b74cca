/* The parameter table: every setting of bmoe's programs once, with what a
 * parser, a help text, a JSON schema and a settings form need to know of
 * it (key, flag spellings, group, level, scope, type, bounds, unit, the
 * environment variable that stands for it, whether it is lossy or accepts
 * "auto"). The CLI's parser and --help, the environment overrides,
 * --describe-params and --show-config read it; a new flag is one row.
 *
 * Where a value goes is the application's business: the table says what a
 * parameter is, the CLI (and the server) map its id onto their options. */
#ifndef BMOE_PARAMS_H
#define BMOE_PARAMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "bmoe.h"

typedef enum param_id {
    P_UNAVAILABLE, /* a reference flag bmoe does not have: the row's refusal says why */
    P_MODEL, P_PROMPT, P_FILE, P_N_PREDICT, P_THREADS, P_THREADS_BATCH, P_CTX, P_UBATCH, P_KV_TYPE, P_SWA_CACHE,
    P_DENSE, P_NO_PREFAULT, P_TEMP, P_TOP_K, P_TOP_P, P_MIN_P, P_REPEAT_PENALTY, P_REPEAT_LAST_N, P_FREQUENCY_PENALTY,
    P_PRESENCE_PENALTY, P_SEED, P_LOGIT_BIAS, P_IGNORE_EOS, P_JSON_SCHEMA, P_JSON_SCHEMA_FILE, P_GRAMMAR,
    P_GRAMMAR_FILE,
    P_PROMPT_IDS, P_FORCE_IDS, P_LOGITS_OUT, P_PPL, P_CHUNKS, P_PPL_SKIP, P_PPL_STEP, P_PPL_LIST, P_PPL_CHOICES,
    P_INFO, P_HELP, P_HELP_ALL, P_VERSION, P_LIST_ARCHS, P_MOE_STREAM, P_NO_MOE_STREAM, P_CACHE_MB,
    P_CACHE_POLICY, P_CACHE_FLOOR, P_CACHE_CEIL, P_IO_THREADS, P_NO_ODIRECT, P_OVERLAP, P_PREFETCH,
    P_PREDICT_PREFETCH, P_PREDICT_SPEC_MAX, P_PRELOAD_EXPERTS, P_LOAD_ALL, P_N_EXPERT_USED, P_DROP_COLD,
    P_DROP_NO_RENORM, P_DROP_IN_PREFILL, P_SUBSTITUTE, P_ROUTE_AHEAD, P_PREDICT_LOG, P_FORCE_CACHE,
    P_NO_WARM_DENSE, P_DENSE_ODIRECT, P_DEVICES, P_GPU_LAYERS, P_PROGRESS, P_CSV, P_ROUTE_TRACE, P_IO_TRACE,
    P_COMPUTE_TRACE, P_COMPUTE_TRACE_LAYERS, P_ROUTE_REPLAY, P_CHAT, P_NO_THINK, P_SESSION, P_CONVERSATION,
    P_SYSTEM_PROMPT, P_DECIDE,
    P_DECIDE_PREFIX_CACHE, P_RENDER_TEMPLATE, P_TEMPLATE_CONTEXT, P_TEMPLATE_NOW, P_AUTO, P_PLAN,
    P_PLAN_EXPLAIN, P_PROBE, P_PROBE_IO, P_NO_PROBE_IO, P_PROBE_MEM, P_NO_PROBE_MEM, P_DESCRIBE_PARAMS,
    P_SHOW_CONFIG, P_HELP_MARKDOWN, P_HOST, P_PORT, P_API_KEY, P_MAX_QUEUE, P_MAX_BODY, P_EXPERT_PROFILE,
    P_TIMEOUT, P_NGRAM, P_MTP, P_DRAFT, P_NGRAM_MIN_MATCH, P_NGRAM_MAX_MATCH, P_DRAFT_REPLAY, P_DRAFT_REPLAY_MODE,
    P_IDS_OUT, P_ALIAS, P_DRAFT_REPLAY_RATE, P_MTP_P_MIN, P_DRAFT_ALWAYS, P_PREDICT_ALWAYS,
    P_ROUTE_REPLAY_GUESS_RIGHT, P_REASONING_EFFORT, P_COUNT
} param_id;

typedef enum param_type {
    PARAM_SWITCH, /* no value */
    PARAM_INT,    /* int32 in [low, high] */
    PARAM_FLOAT,  /* finite, in [low, high] */
    PARAM_TEXT,   /* any string */
    PARAM_PATH,   /* a file's path */
    PARAM_U64,    /* unsigned 64-bit */
    PARAM_IDS,    /* token ids: 1,2,3 */
    PARAM_LIST,   /* texts separated by commas */
    PARAM_CHOICE, /* one of choices (|-separated) */
    PARAM_MIB,    /* MiB in [low, high], or "auto" */
} param_type;

typedef enum param_level { PARAM_BASIC, PARAM_ADVANCED, PARAM_EXPERIMENTAL, PARAM_DEBUG } param_level;

/* session: fixed when the model loads; request: each generation may say its own. */
typedef enum param_scope { PARAM_SCOPE_SESSION, PARAM_SCOPE_REQUEST } param_scope;

typedef enum param_group {
    PARAM_GROUP_PROGRAM, PARAM_GROUP_MODEL, PARAM_GROUP_GENERATION, PARAM_GROUP_SAMPLING, PARAM_GROUP_SPECULATION,
    PARAM_GROUP_STREAMING,
    PARAM_GROUP_CACHE, PARAM_GROUP_PREFETCH, PARAM_GROUP_LOSSY, PARAM_GROUP_PLANNER, PARAM_GROUP_CHAT,
    PARAM_GROUP_PERPLEXITY, PARAM_GROUP_DIAGNOSTICS, PARAM_GROUP_SERVER, PARAM_GROUP_UNAVAILABLE,
    PARAM_GROUP_COUNT
} param_group;

/* The jobs a parameter means something in (bits): bmoe-cli's, and serving
 * (bmoe-server). */
typedef enum param_job {
    PARAM_JOB_GENERATE = 1u << 0,
    PARAM_JOB_LOGITS = 1u << 1,
    PARAM_JOB_PERPLEXITY = 1u << 2,
    PARAM_JOB_SESSION = 1u << 3,
    PARAM_JOB_RENDER = 1u << 4,
    PARAM_JOB_SERVE = 1u << 5,
} param_job;
#define PARAM_JOBS_CLI (PARAM_JOB_GENERATE | PARAM_JOB_LOGITS | PARAM_JOB_PERPLEXITY | PARAM_JOB_SESSION | PARAM_JOB_RENDER)

typedef struct param_def {
    param_id id;
    const char *key;         /* snake_case, unique: the JSON name */
    const char *flag;        /* "--cache-mb" */
    const char *short_flag;  /* "-m", or NULL */
    const char *alias;       /* another spelling of the same switch ("--chatml"), or NULL */
    const char *env;         /* the environment variable that stands for it, or NULL */
    param_group group;
    param_level level;
    param_scope scope;
    param_type type;
    long long low, high;     /* INT, FLOAT, MIB */
    const char *choices;     /* CHOICE: "lru|freq" */
    const char *unit;        /* "MiB", "tokens", ... or NULL */
    const char *value_name;  /* in help: "N", "FILE" */
    const char *default_text;/* what it is when not given, as a user reads it */
    bool lossy;              /* changes the output against the exact engine */
    bool accepts_auto;
    bool needs_stream;       /* only with --moe-stream */
    unsigned jobs;           /* param_job bits; 0: chooses the job itself */
    const char *help;        /* sentences; wrapped by the help printer */
    const char *refusal;     /* P_UNAVAILABLE: why bmoe refuses it */
} param_def;

/* The table, in help order. */
const param_def *params_table(size_t *count);
/* The row of a flag spelling (long, short or alias), or NULL. */
const param_def *params_find_flag(const char *flag);
/* The row of an id (the first, for P_UNAVAILABLE), or NULL. */
const param_def *params_find_id(param_id id);
/* The row of a key, or NULL. */
const param_def *params_find_key(const char *key);

const char *params_group_name(param_group group);   /* "Streaming" */
const char *params_level_name(param_level level);   /* "basic" */
const char *params_type_name(param_type type);      /* "int" */

/* Value parsing, one rule for every program: the whole string, decimal
 * digits with an optional leading '-' (no spaces, '+' or hex), in the
 * row's range. Each returns 0, or -1 with a one-line message in error
 * that starts with name (the flag or the variable the text came from). */
int params_parse_int(const param_def *param, const char *name, const char *text, int32_t *value, char *error,
                     size_t error_size);
int params_parse_float(const param_def *param, const char *name, const char *text, float *value, char *error,
                       size_t error_size);
int params_parse_u64(const char *name, const char *text, uint64_t *value, char *error, size_t error_size);
/* A CHOICE's index among the row's choices. */
int params_parse_choice(const param_def *param, const char *name, const char *text, int *index, char *error,
                        size_t error_size);
/* An environment variable's switch value: an integer, non-zero on. 1, 0 or -1 (error). */
int params_parse_switch(const char *name, const char *text, char *error, size_t error_size);

/* Where the engine's parameters go: the library's model, sampler and
 * speculation parameters and the context's sizes, as the application
 * holds them. */
typedef struct params_engine {
    bmoe_model_params *model;
    bmoe_sampler_params *sampler;
    int32_t *n_threads, *n_threads_batch, *n_ctx, *n_ubatch; /* 0: the library's default */
    enum bmoe_kv_type *kv_type;
    int *swa_cache; /* --swa-cache: an enum bmoe_swa_cache; the application's default until set */
    bool *seed_given;
    bmoe_speculation_params *speculation;
} params_engine;

/* Sets an engine parameter (the model, the context, streaming, the lossy
 * levers, sampling) from text, as every program reads it (a switch's text
 * is ignored). Returns 0 when it set one, PARAMS_NOT_ENGINE when param is
 * not the engine's (the application's own, e.g. the prompt: nothing set),
 * or the exit status with a one-line message in error: 2 for a bad
 * --dense-weights value (the reference's), 1 for the rest. */
#define PARAMS_NOT_ENGINE (-1)
int params_apply_engine(const param_def *param, const char *name, const char *text, const params_engine *engine,
                        char *error, size_t error_size);

/* The speculation rows' rules once every flag is read (given: the rows
 * set, by id; speculation: what they set): --draft needs a draft source
 * (--ngram, --mtp or --draft-replay), the n-gram match lengths need
 * --ngram and min <= max, --mtp-p-min needs --mtp (0 is let through with
 * --ngram, as the reference does; another value is refused with it), two
 * sources or a source and an armed lossy lever (lossy) exclude each other
 * (a lever acts on single-token decodes only, so a verify batch would not
 * compute what plain decoding computes). Returns 0, or the
 * exit status with a one-line message in error: 2 for switches that
 * contradict each other, 1 for the rest. */
int params_check_speculation(const bool given[P_COUNT], const bmoe_speculation_params *speculation,
                             const bmoe_lossy_params *lossy, char *error, size_t error_size);

/* --help: the rows at most max_level whose jobs meet jobs (rows with no
 * job, which choose the job themselves, are bmoe-cli's: shown when jobs
 * holds any of its jobs), by group, each flag with its value name, default
 * and help wrapped to the terminal's 100 columns. */
void params_print_help(FILE *out, param_level max_level, unsigned jobs);
/* The flag reference as Markdown (docs/flags.md). */
void params_print_markdown(FILE *out);

/* Where a resolved value came from. */
typedef enum param_source { PARAM_SOURCE_DEFAULT, PARAM_SOURCE_FLAG, PARAM_SOURCE_ENV, PARAM_SOURCE_PLAN } param_source;
const char *params_source_name(param_source source);

/* The values a run resolved: the text of each parameter set (a switch's
 * is "on"), with where it came from. Not owned: the texts live as long as
 * argv, the environment or the plan that gave them. */
typedef struct param_value {
    const char *text;
    param_source source;
} param_value;
typedef struct param_values {
    param_value value[P_COUNT];
} param_values;

/* --describe-params: the table as a JSON document (a schema version and
 * one object per parameter). Returns 0, or -1 when out of memory. */
int params_describe_json(FILE *out);
/* --show-config: each parameter of the table that means something in the
 * job (jobs bits; 0: all) with its resolved value (typed as the row's type
 * says, the default text when not set) and source, then "args" (argv) and
 * extra (a JSON object's text, e.g. the plan, or NULL) under extra_key.
 * Returns 0 or -1. */
int params_config_json(FILE *out, const param_values *values, unsigned jobs, int argc, char **argv,
                       const char *extra_key, const char *extra_json);

#endif
