/* What the session's parts share (session.c opens it and runs the loop;
 * session_generate.c and session_decide.c answer one request each;
 * session_done.c formats what a turn cost). */
#ifndef BMOE_SESSION_INTERNAL_H
#define BMOE_SESSION_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "session.h"
#include "session_conversation.h"
#include "session_inbox.h"
#include "session_output.h"
#include "session_request.h"
#include "tm_buffer.h"
#include "tm_config.h"
#include "tm_csv.h"
#include "tm_files.h"
#include "tm_layout.h"
#include "tm_meter.h"
#include "tm_summary.h"

typedef struct session {
    const session_config *config;
    session_output *output;
    session_inbox *inbox;
    bmoe_model *model;
    bmoe_context *context;
    bmoe_chat *template;        /* the model's chat template (owned); NULL: it has none */
    bmoe_chat *chat;            /* the template in chat mode (--chat), else NULL: raw prompts */
    enum bmoe_think_control think_control;
    double load_s;
    session_conversation conversation;
    int32_t turn;               /* generate requests run (the CSV's turn column) */
    int32_t chat_turn;          /* turns since the last clear (the sampler's seed offset) */
    tm_config telemetry;        /* the resolved configuration */
    tm_layout layout;
    tm_files files;             /* --csv and the traces, appended turn after turn */
    int64_t page_bytes;
    tm_lookups lookups;         /* expert-cache lookups since the session opened (the hit rate's) */
    tm_buffer lines;            /* lines being formatted */
    bool profile_writable;      /* the expert profile was read or is new: the close writes it */
    bmoe_token_index *token_index; /* the vocabulary indexed for held answers, at the first (owned) */
} session;

/* Answers one request. Returns 0 when the session goes on (the answer was
 * BMOE_DONE, BMOE_DECIDE or a BMOE_ERROR with fatal false), -1 after a
 * fatal BMOE_ERROR or when the output failed. */
int session_generate(session *s, const session_request *request);
int session_decide(session *s, const session_request *request);

/* Whether an evaluation's failure leaves the session usable: a read that
 * failed (the next request reads again) or non-finite logits; the request
 * is answered with a BMOE_ERROR of fatal false and its turn rolled back. */
static inline bool session_recoverable(int status)
{
    return status == BMOE_ERR_IO || status == BMOE_ERR_NUMERIC;
}

/* A request cancelled while it waited: BMOE_BEGIN, then BMOE_DONE or
 * BMOE_DECIDE as cancelled, with nothing run (the conversation and the
 * cache as they were). Returns as session_generate. */
int session_answer_cancelled(session *s, const session_request *request);
/* BMOE_DECIDE with every key of the contract (logp NULL: all null). */
void session_format_decide(tm_buffer *out, int64_t id, bool cancelled, int32_t best, const double *logp,
                           int32_t n_choices, int32_t n_tokens, int32_t n_reused, const bmoe_stats *prefill);

/* The tokens of a rendered prompt into a new array: through chat (its
 * special tokens), or the model's tokenizer with BOS when chat is NULL.
 * Returns the count, or a negative bmoe_status with error. */
int32_t session_prompt_tokens(const session *s, const bmoe_chat *chat, const char *text, size_t length,
                              int32_t **tokens, bmoe_error *error);

/* Writes the lines formatted so far; -1 when the output failed. */
int session_emit(session *s);
/* Writes the request's last line (BMOE_DONE, BMOE_DECIDE, BMOE_ERROR),
 * marking the request answered first. */
int session_answer(session *s);
/* BMOE_ERROR with the message as the request's answer; returns -1 when
 * fatal or the output failed, else 0. */
int session_error(session *s, int64_t id, bool fatal, const char *message);

/* What a generation cost (session_done.c): the summary the CSV trailer and
 * BMOE_DONE share. generation may be NULL (cancelled before its prefill
 * completed), totals NULL (nothing decoded); before: the lookups before the
 * decode (the hit rate is cumulative since the session opened). */
void session_summary(const session *s, const bmoe_generation *generation, const tm_totals *totals,
                     const tm_lookups *before, double tail_ms, tm_summary *summary);
/* BMOE_DONE with every key of the contract. */
void session_format_done(tm_buffer *out, int64_t id, bool cancelled, const tm_summary *summary, int32_t tokens,
                         int32_t n_past, const char *reasoning, size_t reasoning_length, const char *text,
                         size_t text_length);

#endif
