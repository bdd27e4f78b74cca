/* Session mode (the telemetry contract's Session mode section): the model
 * stays loaded, requests arrive as JSON lines on an input descriptor and
 * the answers go out as BMOE_* lines (BMOE_READY once, then per request
 * BMOE_BEGIN, the per-token BMOE_LOAD / BMOE_PROGRESS lines, BMOE_DONE or
 * BMOE_DECIDE, or BMOE_ERROR). The expert cache, the KV cache, the
 * conversation, the --csv file and the traces live across turns. An application-side
 * layer on bmoe.h, cJSON and the telemetry module; it keeps no global
 * state (everything is in the session the run owns). */
#ifndef BMOE_SESSION_H
#define BMOE_SESSION_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "bmoe.h"

/* The longest request line read (a prompt of a few MB JSON-escaped). */
#define SESSION_MAX_LINE ((size_t)8 << 20)

typedef struct session_config {
    const char *model_path;
    bmoe_model_params model_params;     /* log_callback included */
    bmoe_context_params context_params; /* the abort callback is the session's */
    /* request defaults and the generation's fixed settings */
    int32_t n_predict;                  /* -1: until another stop */
    bool think;                         /* a request's "think" when absent */
    const char *reasoning_effort;       /* the template's reasoning_effort; NULL: its default */
    bool ignore_eos;
    bmoe_sampler_params sampler;        /* the seed of the first turn after a clear */
    bmoe_speculation_params speculation; /* drafting (source NONE: off); a callback source is not for a session */
    bool chat;                          /* render the conversation with the model's template */
    bool decide;                        /* accept decide requests */
    bool decide_reuse;                  /* a decide may reuse the kept prefix (reuse_prefix); false: never */
    int64_t template_now;               /* strftime_now's clock; 0: the current time */
    size_t max_line;                    /* 0: SESSION_MAX_LINE */
    FILE *log;                          /* notes that are not the protocol's (stderr); NULL: none */
    /* telemetry */
    const char *csv_path;               /* NULL: none, and so for the traces */
    const char *route_trace_path, *io_trace_path, *compute_trace_path, *compute_trace_layers_path;
    const char *expert_profile_path;    /* read at load, written at a clean close; NULL: none */
    int32_t threads;                    /* resolved, for the CSV preamble */
    bool cache_auto;                    /* the cache budget was asked as auto (counts when it streams) */
} session_config;

/* Runs a session on input (a descriptor) and output until close, EOF, or a
 * fatal error. stop (-1: none) is a descriptor that becomes readable when
 * the session must end at once (an application's signal handler writes to
 * it): the request in flight is cancelled, the queue dropped, and the session
 * ends as failed, its files discarded. Returns the process exit status: 0 after a clean end,
 * 1 after a fatal BMOE_ERROR (the model did not load, the output failed)
 * or a stop. *output_error: the errno of a failed write to output (then
 * nothing more could be said there), else 0. */
int session_run(const session_config *config, int input, int stop, FILE *output, int *output_error);

#endif
