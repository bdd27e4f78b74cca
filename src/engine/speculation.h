/* Exact speculative decoding for the generation loop (generation.c): draft
 * tokens after the next one, evaluate them with it in one batch, sample each
 * position as plain decoding would and keep the drafts that match; cut the
 * context back over the rest. Owns the verify batch's logits, the recurrent
 * state's snapshot and the queue of tokens decided but not yet handed out;
 * the context, the sampler and the stop rules stay the generation's. */
#ifndef BMOE_ENGINE_SPECULATION_H
#define BMOE_ENGINE_SPECULATION_H

#include "option_gate.h"
#include "draft_mtp.h"
#include "engine.h"
#include "token_pick.h"

/* Past 8 drafts a verify batch reads most experts of every layer (each
 * position routes on its own) for acceptance that rarely holds that long. */
#define SPECULATION_MAX_DRAFT 8

typedef struct speculation {
    bmoe_speculation_params params;
    bool enabled;
    float *rows;               /* [n_draft + 1][n_vocab] the verify batch's logits */
    float *recurrent_snapshot; /* [recurrent_floats] the state before the verify batch; NULL for KV-only models */
    int32_t batch[SPECULATION_MAX_DRAFT + 1]; /* the next token, then its drafts */
    int32_t batch_start;       /* the context position of batch[0]; -1: the last decode was no verify batch */
    /* tokens the last verify batch decided, handed out one per step: the
     * accepted drafts (evaluated: row_after is the row that follows them),
     * then the token sampled where the drafts ended (row_after -1: not
     * evaluated yet) */
    int32_t queue[SPECULATION_MAX_DRAFT + 1];
    int32_t queue_row_after[SPECULATION_MAX_DRAFT + 1];
    int32_t queue_head, queue_length;
    bmoe_spec_stats counters;
    option_gate gate;          /* whether drafting pays (unused with draft_always) */
    bool verified;             /* the last speculation_decode ran a verify batch */
    draft_mtp mtp;             /* the MTP head's state (source MTP) */
    bmoe_context *mtp_context; /* the context whose capture draft_mtp turned on; NULL: none */
} speculation;

/* Checks params against the context's model (draft source, sizes, the
 * lossy levers) and allocates what a verify batch needs. Returns 0, or -1
 * with err; nothing to free then. With source NONE: 0, disabled. */
int speculation_init(speculation *spec, const bmoe_speculation_params *params, bmoe_context *context,
                     bmoe_error *err);
void speculation_free(speculation *spec);

/* The generation evaluates its prompt from position first on (the rows
 * before it were reused). */
void speculation_start(speculation *spec, int32_t first);

/* Decodes token (the next token, at the context's position) so that the
 * next logits are ready: with up to max_drafts drafted tokens after it in
 * one verify batch when the draft source proposes any and the gate lets
 * the step draft (option_gate.h), else alone. A verify
 * batch chooses its positions with pick as plain decoding would, queues
 * the accepted drafts and the token sampled where they end, copies the
 * first row (the one the step after token samples from) to logits and cuts
 * the context back to the last accepted draft. stats receives the whole
 * cost. Returns 0, or the evaluation's negative status (BMOE_ERR_ABORTED
 * included) with err. */
int speculation_decode(speculation *spec, bmoe_context *context, token_pick *pick, int32_t token,
                       int32_t max_drafts, float *logits, bmoe_stats *stats, bmoe_error *err);

/* The next queued token; false when the queue is empty. row_after: the
 * logits that follow it when the verify batch evaluated it, else NULL. */
bool speculation_pop(speculation *spec, int32_t n_vocab, int32_t *token, const float **row_after);

/* Cuts the context back to position target (tokens past it were drafted,
 * or decided past a stop, and plain decoding never evaluated them). Adds
 * any re-evaluation's cost to stats (may be NULL). Returns 0, or a negative
 * status with err when a re-evaluation failed. */
int speculation_rollback(speculation *spec, bmoe_context *context, int32_t target, bmoe_stats *stats,
                         bmoe_error *err);

#endif
