/* MTP drafting for speculative decoding: the model's own next-token head
 * (its first nextn block, model_head_forward_fn) proposes the tokens after
 * the next one. The head at position i reads the main model's final hidden
 * state at i (after the final norm, what the output matrix reads, as vLLM
 * feeds Qwen3-Next's MTP module) and the token at i + 1, and
 * gives the logits of the token at i + 2; a chained step feeds the head's
 * own output hidden state (after its shared_head_norm) back with its
 * drafted token, one position further.
 *
 * The head keeps a KV cache of its own (the head block's layer in the run
 * state, which a context gets at its first MTP generation). Its rows are
 * caught up lazily, before each draft, over every position the main model
 * evaluated since the last one, in one batch: the
 * catch-up's last row is the first draft's, so a draft step costs one head
 * batch plus one head token per further draft, and the prefill itself runs
 * no head (a generation that never drafts pays only the capture of the
 * hidden rows, for which the last layer computes every prefill row). The
 * chained steps' rows are not the main model's and are overwritten by the
 * next catch-up.
 *
 * Owns the main hidden rows the forward pass captures (run_state.hidden_rows
 * points at them while drafting is on) and the head's output buffers. */
#ifndef BMOE_ENGINE_DRAFT_MTP_H
#define BMOE_ENGINE_DRAFT_MTP_H

#include "engine.h"

typedef struct draft_mtp {
    float *hidden_rows;   /* [n_ctx][n_embd] the main model's final hidden state at each position */
    float *head_hidden;   /* [n_ubatch][n_embd] the head's output rows of its last batch */
    float *step_hidden;   /* [n_embd] the hidden state the next chained step reads */
    float *head_logits;   /* [n_vocab] */
    /* the head's cache holds rows computed from the main model's hidden
     * states for positions [0, filled); -1: not started (the generation's
     * first evaluated position sets it, draft_mtp_start) */
    int32_t filled;
    /* drafting stops at a head step whose top probability is below it (0:
     * never); draft_mtp_init sets 0 */
    float p_min;
} draft_mtp;

/* Allocates the buffers (the head's own KV cache in the context's run
 * state too, on the context's first MTP generation) and turns the capture
 * of hidden rows on. Returns 0, or -1 with err (nothing to free then). */
int draft_mtp_init(draft_mtp *drafter, bmoe_context *context, bmoe_error *err);
/* What draft_mtp_init takes on the context now: the head's state on its
 * first MTP generation, and the drafter's buffers (hidden rows of n_ctx
 * positions) on every one. 0 for a model without a head. */
uint64_t draft_mtp_bytes(const bmoe_context *context);
/* Turns the capture off and frees the buffers. */
void draft_mtp_free(draft_mtp *drafter, bmoe_context *context);

/* The generation evaluates from position first on: the rows before it have
 * no captured hidden state (a reused prefix), so the head's rows there stay
 * what an earlier generation left (or zeros): they shape drafts only. */
void draft_mtp_start(draft_mtp *drafter, int32_t first);

/* The context was cut back to position (its tokens from there on are gone):
 * the head's rows that read them are gone too. */
void draft_mtp_truncate(draft_mtp *drafter, int32_t position);

/* Up to max_drafts tokens to follow context->tokens[context->position]
 * (the next token, not evaluated yet), each the argmax of the head's logits,
 * stopping before the first whose probability is below p_min (the head's
 * rows are caught up even when that is the first); the caller checked that
 * position + max_drafts fits the context. Returns the count, or -1 with err
 * when a head evaluation failed. */
int32_t draft_mtp_propose(draft_mtp *drafter, bmoe_context *context, int32_t *drafts, int32_t max_drafts,
                          bmoe_error *err);

#endif
