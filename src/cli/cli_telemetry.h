/* The generation job's telemetry: the --progress lines, the end-of-run
 * lines, --csv and the traces, wired from the command line to the
 * telemetry module (src/telemetry). Files are opened before the model loads
 * (a bad path fails fast and costs nothing), callbacks are registered only
 * for the traces asked for, and every file is published only when the run
 * succeeds (a failed run leaves the paths as they were). */
#ifndef BMOE_CLI_TELEMETRY_H
#define BMOE_CLI_TELEMETRY_H

#include <stdbool.h>
#include <stdio.h>

#include "cli.h"
#include "tm_buffer.h"
#include "tm_config.h"
#include "tm_draft.h"
#include "tm_files.h"
#include "tm_layout.h"
#include "tm_meter.h"
#include "tm_stamp.h"

typedef struct cli_telemetry {
    const cli_options *options;
    bool progress;
    tm_files files;           /* --csv and the traces */
    const bmoe_model *model;
    tm_config config;
    tm_layout layout;
    tm_meter *meter;
    int32_t n_prompt;
    int64_t page_bytes;
    tm_buffer line;           /* the lines of one token */
    tm_buffer answer;         /* the generated text (--progress) */
    double last_decode_end;   /* seconds (cli_now_seconds) when the last decode returned; 0: none */
    tm_token last;            /* the last token's record */
    tm_draft draft;           /* which rows carry a verify batch */
    bmoe_reasoning *reasoning; /* --chat: splits the text into reasoning and answer (borrowed); NULL: all answer */
    bool reasoning_finished;
    tm_buffer split_reasoning, split_text; /* the last line's deltas when two had to be joined */
} cli_telemetry;

/* Opens the files the options ask for. Returns 0, or 1 (the exit status)
 * with one line printed. */
int cli_telemetry_open(cli_telemetry *telemetry, const cli_options *options);
/* --chat: the parser that splits each token's text into the deltas
 * (borrowed; NULL: the text is all answer). */
void cli_telemetry_set_reasoning(cli_telemetry *telemetry, bmoe_reasoning *reasoning);
/* Registers the callbacks of the traces that are on. */
void cli_telemetry_context_params(cli_telemetry *telemetry, bmoe_context_params *params);
/* After the model and context exist: the resolved configuration, the
 * preambles and the meter. steps is the target token count. Returns 0 or 1. */
int cli_telemetry_begin(cli_telemetry *telemetry, const bmoe_model *model, const bmoe_context *context,
                        uint64_t seed, int32_t n_prompt, int32_t steps);
/* Before an evaluation: where its trace rows belong. */
void cli_telemetry_stamp(cli_telemetry *telemetry, int32_t phase, int32_t step);
/* The prompt's prefill: its lookups count in the cumulative hit rate. */
void cli_telemetry_prefilled(cli_telemetry *telemetry, const bmoe_stats *prefill);
/* After an evaluation: the trace rows it captured go to their files. */
void cli_telemetry_after_eval(cli_telemetry *telemetry);
/* One generated token of generation: its metrics, its progress lines (with
 * its text) and its CSV row. Returns 0, or 1 when stdout failed (message
 * printed). */
int cli_telemetry_token(cli_telemetry *telemetry, const bmoe_generation *generation, const bmoe_step *step,
                        const char *text, size_t length);
/* Text that no token carried (the generation's final step held it, or the
 * reasoning parser did, which this finishes): with --progress one more
 * BMOE_PROGRESS line repeats the last step with no cost and carries it, so
 * the deltas still add up to the answer. Returns 0 or 1. */
int cli_telemetry_trailing_text(cli_telemetry *telemetry, const char *text, size_t length);
/* The end of a successful generation: the summary, the end-of-run lines
 * on stdout (after === answer === / === perf === with --progress) and the
 * files published. Returns 0 or 1. */
int cli_telemetry_finish(cli_telemetry *telemetry, const bmoe_generation *generation, double load_seconds);
/* Frees everything; files not published are discarded. */
void cli_telemetry_close(cli_telemetry *telemetry);

/* --predict-log: the prediction probe's lines on stdout, after the run's. */
int cli_print_predict_log(const bmoe_context *context);

#endif
