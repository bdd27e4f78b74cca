/* bmoe-cli internals: the parsed command line and the jobs it can run
 * (--info, generation, teacher-forced logits, perplexity). Every job
 * returns the process exit status and prints its own one-line errors. */
#ifndef BMOE_CLI_H
#define BMOE_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "bmoe.h"
#include "params.h"

typedef enum cli_mode {
    CLI_MODE_GENERATE = 0,
    CLI_MODE_INFO,
    CLI_MODE_HELP,
    CLI_MODE_LOGITS,     /* --prompt-ids / --force-ids / --logits-out */
    CLI_MODE_PERPLEXITY, /* --ppl, --ppl-list, --ppl-choices */
    CLI_MODE_VERSION,
    CLI_MODE_SESSION,    /* --session */
    CLI_MODE_RENDER,     /* --render-template */
    CLI_MODE_LIST_ARCHS, /* --list-archs */
    CLI_MODE_HELP_ALL,   /* --help-all */
    CLI_MODE_DESCRIBE_PARAMS, /* --describe-params */
    CLI_MODE_HELP_MARKDOWN,   /* --help-markdown: docs/flags.md */
} cli_mode;

/* The planner's part of a run. */
typedef enum cli_plan_mode {
    CLI_PLAN_OFF,
    CLI_PLAN_RUN,  /* --auto: plan, then run the job */
    CLI_PLAN_ONLY, /* --plan: print the plan, then exit */
} cli_plan_mode;

typedef struct cli_options {
    cli_mode mode;
    const char *model_path;   /* -m */
    const char *info_path;    /* --info */
    const char *prompt;       /* -p; NULL when not given */
    const char *prompt_file;  /* -f */
    int32_t n_predict;        /* -n; -1: until end of generation or a full context */
    int32_t n_threads;        /* -t; 0: the library's default */
    int32_t n_threads_batch;  /* --threads-batch; 0: the same as -t */
    int32_t n_ctx;            /* -c; 0: the job's default */
    int32_t n_ubatch;         /* --ubatch; 0: the library's default */
    enum bmoe_kv_type kv_type;
    int swa_cache;            /* --swa-cache: an enum bmoe_swa_cache, -1 the job's default */
    bmoe_model_params model_params; /* --dense-weights */
    bmoe_sampler_params sampler;
    bool seed_given;
    bool ignore_eos;          /* --ignore-eos: generate past end-of-generation tokens */
    bool no_prefault;         /* --no-prefault: let the first tokens fault pages in */
    int32_t *prompt_ids;      /* --prompt-ids, owned; generation takes them instead of text */
    int32_t n_prompt_ids;
    bmoe_logit_bias *logit_bias; /* --logit-bias, owned; sampler.logit_bias points here */
    int32_t *force_ids;       /* --force-ids, owned */
    int32_t n_force_ids;
    const char *logits_out;   /* --logits-out */
    const char *ppl_path;     /* --ppl */
    int32_t ppl_chunks;       /* --chunks; -1: all */
    const char *ppl_list_path;/* --ppl-list: one text a line */
    char **ppl_choices;       /* --ppl-choices, owned (one allocation: the strings follow the pointers) */
    int32_t n_ppl_choices;
    int32_t ppl_skip;         /* --ppl-skip: rows before this position are not scored */
    bool ppl_skip_given;      /* --ppl keeps the llama.cpp rule (n_ctx/2) unless --ppl-skip is typed */
    bool ppl_step;            /* --ppl-step: one token per evaluation (the decode path) */
    const char *route_replay; /* --route-replay TRACE.csv */
    float route_guess_right;  /* --route-replay-guess-right */
    /* speculative decoding */
    bmoe_speculation_params speculation; /* --ngram, --mtp, --draft, --ngram-min-match, --ngram-max-match */
    const char *draft_replay;        /* --draft-replay FILE: drafts from a list of ids */
    bool draft_replay_reject;        /* --draft-replay-mode reject */
    float draft_replay_rate;         /* --draft-replay-rate: the share of replayed drafts kept right */
    bool draft_replay_rate_given;
    const char *ids_out;             /* --ids-out FILE: the generated ids */
    /* telemetry (generation) */
    bool progress;                   /* --progress (or BMOE_PROGRESS=<non-zero>) */
    bool predict_log;                /* --predict-log: the prediction probe's lines after the run */
    const char *csv_path;            /* --csv */
    const char *expert_profile;      /* --expert-profile */
    const char *route_trace_path;    /* --route-trace */
    const char *io_trace_path;       /* --io-trace */
    const char *compute_trace_path;  /* --compute-trace */
    const char *compute_trace_layers_path; /* --compute-trace-layers */
    /* chat templates and sessions */
    const char *render_template;     /* --render-template FILE */
    const char *template_context;    /* --template-context CONTEXT.json */
    int64_t template_now;            /* --template-now: strftime_now's clock; 0: the current time */
    bool chat;                       /* --chat / --chatml: the model's template over the conversation */
    bool no_think;                   /* --no-think */
    const char *json_schema;         /* --json-schema: the schema's JSON text; NULL: none */
    const char *json_schema_file;    /* --json-schema-file */
    const char *grammar;             /* --grammar: GBNF text; NULL: none */
    const char *grammar_file;        /* --grammar-file */
    const char *reasoning_effort;    /* --reasoning-effort; NULL: the template's default */
    bool decide;                     /* --decide: decide requests in the session */
    bool conversation;               /* --conversation: a chat on the terminal */
    const char *system_prompt;       /* --system-prompt: the conversation's system message; NULL: none */
    bool decide_prefix_cache;        /* --decide-prefix-cache: reuse the kept prefix (off: never) */
    /* the planner and the configuration */
    cli_plan_mode plan_mode;         /* --auto / --plan */
    bool plan_explain;               /* --plan-explain */
    bool probe_again;                /* --probe: measure again, not from the kept results */
    bool probe_io, probe_mem;        /* --no-probe-io / --no-probe-mem clear them */
    bool show_config;                /* --show-config */
    param_values values;             /* every value set, with where it came from */
    const struct plan *plan;         /* the plan (main owns it): --auto's, or the regime a run without a
                                        streaming flag was given; NULL when the planner did not decide */
    int argc;
    char **argv;
} cli_options;

/* Parses argv into options (which the caller releases with
 * cli_options_free), the environment overrides included. Returns 0, or
 * prints one line and returns the exit status (2: contradictory switches or
 * a bad --dense-weights value, 1: anything else). */
int cli_parse_args(int argc, char **argv, cli_options *options);
/* Whether a flag holds the answer to a JSON schema or a grammar. */
static inline bool cli_holds_answer(const cli_options *options)
{
    return options->json_schema || options->json_schema_file || options->grammar || options->grammar_file;
}
void cli_options_free(cli_options *options);
/* --help (all: --help-all): the synopsis, then the parameter table's flags. */
void cli_print_usage(FILE *out, bool all);

/* The planner (cli_plan.c). prepare: with --auto or --plan, probes, plans
 * and writes the plan into options where the user typed nothing (result is
 * the caller's); without them, the planner's regime alone decides whether
 * the model streams when no streaming flag was typed; report: the plan on stdout (--plan) or stderr (--auto);
 * show_config: --show-config's document; line: after a run, the plan:
 * line (predicted against measured s/token). Each returns the exit status. */
struct plan;
int cli_plan_prepare(cli_options *options, struct plan *result);
int cli_plan_report(const cli_options *options, const struct plan *result);
int cli_show_config(const cli_options *options, const struct plan *result);
int cli_plan_line(const cli_options *options, const bmoe_stats *decode);

/* Jobs: each returns the exit status. */
int cli_run_generate(const cli_options *options);
int cli_run_logits(const cli_options *options);
int cli_run_perplexity(const cli_options *options);
int cli_run_render(const cli_options *options);   /* --render-template (cli_chat.c) */
int cli_run_session(const cli_options *options);  /* --session and --conversation (cli_session.c) */
struct session_config;
/* --conversation: the chat on the terminal over a session run with config (cli_conversation.c). */
int cli_run_conversation(const cli_options *options, const struct session_config *config);

/* Shared helpers (cli_common.c). */
/* Prints "bmoe-cli: MESSAGE" on stderr, escaped by bmoe_escape_message;
 * returns 1 (the exit status of a failed job). */
int cli_fail(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
double cli_now_seconds(void);
double cli_peak_rss_mib(void);
/* Reads a whole file into a new NUL-terminated buffer. Returns 0 or -1 (message printed). */
int cli_read_file(const char *path, char **text, size_t *length);
/* The load-time streaming line (tm_report_streaming_line) on stderr, when
 * the model streams. */
void cli_print_streaming_line(const bmoe_model *model, const char *model_path);
/* Loads the model (and says on stderr when it streams); NULL on failure (message printed). */
bmoe_model *cli_load_model(const cli_options *options, double *load_seconds);
/* The context parameters of the options (threads, ubatch, KV type) and n_ctx. */
bmoe_context_params cli_context_params(const cli_options *options, int32_t n_ctx);
/* Creates a context from params; NULL on failure (message printed). */
bmoe_context *cli_create_context_from(bmoe_model *model, const bmoe_context_params *params);
/* Creates a context with the options' threads, ubatch and KV type and the given n_ctx. */
bmoe_context *cli_create_context(bmoe_model *model, const cli_options *options, int32_t n_ctx);
/* Tokenizes text into a new array. Returns 0 or -1 (message printed). */
int cli_tokenize(const bmoe_model *model, const char *text, size_t length, bool add_special,
                 bool parse_special, int32_t **tokens, int32_t *n_tokens);

/* The one-shot --chat prompt (cli_chat.c): the prompt rendered as one user
 * message with the model's template, its tokens, and the reasoning parser
 * primed on it. */
typedef struct cli_chat_prompt_result {
    bmoe_chat *chat;
    bmoe_reasoning *reasoning;
    int32_t *tokens;
    int32_t n_tokens;
    bool reason_first; /* the answer is held (cli_holds_answer) and comes after the model's reasoning */
} cli_chat_prompt_result;
/* Returns 0, or 1 with the reason printed (result is then empty). */
int cli_chat_prompt(const cli_options *options, const bmoe_model *model, const char *prompt, size_t length,
                    cli_chat_prompt_result *result);
void cli_chat_prompt_free(cli_chat_prompt_result *result);

/* --route-replay: a route trace's routing, replayed (cli_replay.c). */
typedef struct cli_replay {
    int32_t n_layer, n_used, n_steps, n_prompt_steps;
    int32_t *experts;        /* decode: [n_steps][n_layer][n_used]; -1 where not recorded */
    int32_t *prompt_experts; /* prefill: [n_prompt_steps][n_layer][n_used] */
    int32_t first_position;  /* the position of the first generated token */
    int32_t n_generated;     /* the tokens the run generates: the decode steps it replays */
    int32_t n_expert;        /* the model's experts per layer, for the guesses' wrong ones */
    double guess_right;      /* the share of a guess's experts that are the replayed ones */
} cli_replay;
/* Reads the trace. Returns 0, or prints why not and returns -1. */
int cli_replay_load(cli_replay *replay, const char *path);
void cli_replay_free(cli_replay *replay);
/* The bmoe_route_override for a loaded replay. */
bool cli_replay_route(void *user, int32_t layer, int32_t position, int32_t n_used, int32_t *experts);
/* The bmoe_context_params.route_guess of a loaded replay: its routing with
 * about a 1 - guess_right share of the experts wrong. */
bool cli_replay_guess(void *user, int32_t layer, int32_t position, int32_t n_used, int32_t *experts);

/* --draft-replay: drafts from a list of token ids, for benchmarks that
 * need a known acceptance (cli_draft_replay.c). The k-th generated token's
 * drafts are the list's tokens k+1.. (accept; with a rate below 1, each one
 * kept right with that probability, by its place), or each of them plus
 * one modulo the vocabulary (reject). */
typedef struct cli_draft_replay {
    int32_t *ids;            /* the list */
    int32_t n_ids;
    int32_t n_prompt;        /* the generation's prompt tokens: history past them is generated */
    int32_t n_vocab;
    bool reject;
    double rate;             /* accept: the probability a draft is the list's id */
} cli_draft_replay;
/* Reads the list (--ids-out's format). Returns 0, or prints why not and returns -1. */
int cli_draft_replay_load(cli_draft_replay *replay, const char *path, bool reject, double rate);
/* Checks the ids against the model's vocabulary. Returns 0 or -1 (message printed). */
int cli_draft_replay_check(cli_draft_replay *replay, const char *path, int32_t n_vocab);
void cli_draft_replay_free(cli_draft_replay *replay);
/* The bmoe_draft_callback of a loaded replay. */
int32_t cli_draft_replay_propose(void *user, const int32_t *history, int32_t n_history, int32_t *drafts,
                                 int32_t max_drafts);

/* "1,2,3" into a new array of non-negative ids (an empty string: an empty
 * list). Returns 0, or -1 with one line printed that starts with name. */
int cli_parse_ids(const char *name, const char *text, int32_t **ids, int32_t *n_ids);

/* Signals (cli_signals.c): SIGINT, SIGTERM and SIGHUP stop the run through
 * its error path (outputs discarded), SIGPIPE and SIGXFSZ make writes fail.
 * Installed before a job that loads a model. */
void cli_signals_install(void);
/* The contexts' abort callback: true once a stop signal came. */
bool cli_stop_requested(void *user);
/* The read end of a pipe that a stop signal writes a byte to (for the
 * session's reader); -1 when no pipe could be made (the stop signals then
 * kill as they would without bmoe-cli's handlers). */
int cli_stop_descriptor(void);
/* From now on SIGINT does not stop the run but writes a byte to the pipe
 * whose read end this returns (a conversation's Ctrl-C); -1 when no pipe
 * could be made (SIGINT then stops the run). */
int cli_interrupt_descriptor(void);
/* The exit: after a stop signal, one line saying so and the process ends
 * by that signal; otherwise status. */
int cli_signals_exit(int status);

/* Writes bytes to stream and flushes it (text appears as it is generated).
 * Returns 0, or prints why it failed (a full disk, a closed pipe) and returns
 * -1. */
int cli_write(FILE *stream, const char *bytes, size_t length);
/* Flushes stream; 0, or the reason printed and -1. */
int cli_flush(FILE *stream);
/* Flushes and closes standard output at exit: any error on it (printed
 * output that never arrived) makes the run fail. Returns 0 or -1. */
int cli_close_stdout(void);

#endif
