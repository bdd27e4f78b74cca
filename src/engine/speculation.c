/* Exact speculative decoding (speculation.h). Exactness rests on two facts:
 * a token's logits (and the KV rows and recurrent state it leaves) do not
 * depend on how many tokens share its batch (tests/models/
 * test_batch_invariance.c), so row i of a verify batch is bit-identical to
 * the row plain decoding computes after the same tokens; and each position
 * is sampled with the sampler's state plain decoding would have there (one
 * random draw per position, in order, with the same repeat-penalty
 * history), so the sampled token is plain decoding's token. A draft is kept
 * while it equals that token; the first one that differs is replaced by it. */
#include <stdlib.h>
#include <string.h>

#include "speculation.h"
#include "draft_ngram.h"
#include "process_stats.h"

/* a rejected tail is cut back inside the sliding-window rings' margin */
_Static_assert(SPECULATION_MAX_DRAFT + 1 <= RUN_STATE_RING_MIN_WRITE, "a verify batch fits the rings' margin");

static bool lossy_levers_on(const bmoe_lossy_params *lossy)
{
    return lossy->drop_cold_frac > 0.0f || lossy->substitute_lambda > 0.0f || lossy->route_ahead > 0;
}

int speculation_init(speculation *spec, const bmoe_speculation_params *params, bmoe_context *context,
                     bmoe_error *err)
{
    memset(spec, 0, sizeof *spec);
    spec->batch_start = -1;
    spec->params = *params;
    option_gate_init(&spec->gate);
    const bmoe_model *m = context->model;
    switch (params->source) {
    case BMOE_DRAFT_NONE:
        return 0;
    case BMOE_DRAFT_NGRAM:
        if (params->ngram_min_match < 1 || params->ngram_max_match < params->ngram_min_match)
            return error_set_status(err, BMOE_ERR_INVALID_ARGUMENT,
                                    "generation: n-gram match lengths %d..%d: need 1 <= min <= max",
                                    params->ngram_min_match, params->ngram_max_match);
        break;
    case BMOE_DRAFT_CALLBACK:
        if (!params->draft_callback)
            return error_set_status(err, BMOE_ERR_INVALID_ARGUMENT,
                                    "generation: drafting by callback asked, but no draft callback given");
        break;
    case BMOE_DRAFT_MTP:
        if (m->model.hparams.n_layer_nextn == 0)
            return error_set_status(err, BMOE_ERR_BAD_MODEL,
                                    "generation: MTP drafting needs the model's next-token-prediction block "
                                    "(nextn_predict_layers), and this %s model has none; n-gram drafting "
                                    "needs no model support",
                                    m->model.hparams.architecture);
        if (!m->model.arch->head_forward)
            return error_set_status(err, BMOE_ERR_BAD_MODEL,
                                    "generation: MTP drafting runs the nextn block of qwen35moe, glm4moe, "
                                    "bailingmoe2 and deepseek2 models; this %s model's is not run by bmoe; n-gram "
                                    "drafting needs no model support",
                                    m->model.hparams.architecture);
        if (m->model.hparams.n_layer_head == 0)
            return error_set_status(err, BMOE_ERR_BAD_MODEL,
                                    "generation: MTP drafting needs the model's next-token-prediction block, which "
                                    "this file declares (nextn_predict_layers %d) but does not carry; n-gram "
                                    "drafting needs no model support",
                                    m->model.hparams.n_layer_nextn);
        break;
    default:
        return error_set_status(err, BMOE_ERR_INVALID_ARGUMENT, "generation: unknown draft source %d",
                                (int)params->source);
    }
    /* written so that NaN fails too */
    if (!(params->mtp_p_min >= 0.0f && params->mtp_p_min <= 1.0f))
        return error_set_status(err, BMOE_ERR_INVALID_ARGUMENT,
                                "generation: MTP probability floor %g: need 0..1", (double)params->mtp_p_min);
    if (params->mtp_p_min > 0.0f && params->source != BMOE_DRAFT_MTP)
        return error_set_status(err, BMOE_ERR_INVALID_ARGUMENT,
                                "generation: the probability floor %g is the MTP head's; this draft source has "
                                "no probabilities (give 0)",
                                (double)params->mtp_p_min);
    if (params->n_draft < 1 || params->n_draft > SPECULATION_MAX_DRAFT)
        return error_set_status(err, BMOE_ERR_INVALID_ARGUMENT, "generation: %d drafted tokens per step: need 1..%d",
                                params->n_draft, SPECULATION_MAX_DRAFT);
    /* They change decode steps only (a single token's evaluation): a verify
     * batch would not compute what plain decoding computes. */
    if (lossy_levers_on(&m->params.lossy))
        return error_set_status(err, BMOE_ERR_INVALID_ARGUMENT,
                                "generation: drafting with the lossy levers on (drop-cold, substitute, "
                                "route-ahead) would change the output: they act on single-token decodes only");
    size_t n_vocab = (size_t)m->model.hparams.n_vocab;
    spec->rows = malloc((size_t)(params->n_draft + 1) * n_vocab * sizeof *spec->rows);
    size_t recurrent = context->state.recurrent_floats;
    if (recurrent > 0)
        spec->recurrent_snapshot = malloc(recurrent * sizeof *spec->recurrent_snapshot);
    if (!spec->rows || (recurrent > 0 && !spec->recurrent_snapshot)) {
        speculation_free(spec);
        return error_set_status(err, BMOE_ERR_OUT_OF_MEMORY, "generation: out of memory for %d rows of drafts' logits",
                                params->n_draft + 1);
    }
    if (params->source == BMOE_DRAFT_MTP) {
        if (draft_mtp_init(&spec->mtp, context, err) != 0) {
            speculation_free(spec);
            return -1;
        }
        spec->mtp.p_min = params->mtp_p_min;
        spec->mtp_context = context;
    }
    spec->enabled = true;
    return 0;
}

void speculation_free(speculation *spec)
{
    free(spec->rows);
    free(spec->recurrent_snapshot);
    spec->rows = NULL;
    spec->recurrent_snapshot = NULL;
    if (spec->mtp_context)
        draft_mtp_free(&spec->mtp, spec->mtp_context);
    spec->mtp_context = NULL;
    spec->enabled = false;
}

void speculation_start(speculation *spec, int32_t first)
{
    if (spec->mtp_context)
        draft_mtp_start(&spec->mtp, first);
}

/* Drafts up to max_drafts tokens to follow token into spec->batch[1..];
 * returns how many. */
static int32_t draft(speculation *spec, bmoe_context *context, int32_t token, int32_t max_drafts)
{
    if (!spec->enabled || max_drafts <= 0)
        return 0;
    if (max_drafts > spec->params.n_draft)
        max_drafts = spec->params.n_draft;
    /* the history the drafter reads is the context's tokens and then token;
     * the slot past the position is free (the caller checked there is room) */
    int32_t n_history = context->position + 1;
    context->tokens[context->position] = token;
    spec->batch[0] = token;
    int32_t *drafts = spec->batch + 1;
    double start = engine_now_seconds();
    int32_t count;
    if (spec->params.source == BMOE_DRAFT_NGRAM)
        count = draft_ngram(context->tokens, n_history, spec->params.ngram_min_match, spec->params.ngram_max_match,
                            drafts, max_drafts);
    else if (spec->params.source == BMOE_DRAFT_MTP) {
        /* a failed head costs only its drafts: the step decodes plainly */
        bmoe_error ignored;
        count = draft_mtp_propose(&spec->mtp, context, drafts, max_drafts, &ignored);
    } else
        count = spec->params.draft_callback(spec->params.draft_user, context->tokens, n_history, drafts, max_drafts);
    spec->counters.draft_ms += (engine_now_seconds() - start) * 1e3;
    /* a callback's mistakes cost only their drafts: keep what is usable */
    if (count < 0)
        count = 0;
    if (count > max_drafts)
        count = max_drafts;
    int32_t n_vocab = context->model->model.hparams.n_vocab;
    for (int32_t i = 0; i < count; i++)
        if (drafts[i] < 0 || drafts[i] >= n_vocab)
            count = i;
    return count;
}

bool speculation_pop(speculation *spec, int32_t n_vocab, int32_t *token, const float **row_after)
{
    if (spec->queue_length == 0)
        return false;
    int32_t at = spec->queue_head++;
    spec->queue_length--;
    *token = spec->queue[at];
    int32_t row = spec->queue_row_after[at];
    *row_after = row >= 0 ? spec->rows + (size_t)row * (size_t)n_vocab : NULL;
    return true;
}

/* Cutting a hybrid model's recurrent state back: the state sums up every
 * position before the next and cannot be un-applied. Two exact ways exist:
 * a snapshot per position of the batch, written inside the mixers' token
 * loops (n_draft + 1 copies of the whole state per verify batch, tens of MB
 * each on a 35B DeltaNet model, and changes in every recurrent mixer), or
 * one snapshot before the batch, restored when a draft is rejected, then
 * the kept tokens evaluated again (bit-identical, batch invariance again).
 * The second is taken: one copy per batch, and the re-evaluation is paid
 * only on a rejection, for the kept tokens only (at most n_draft + 1, as one
 * batch). The attention layers' KV rows past the cut are simply
 * overwritten later, so a KV-only model just moves its position back. */
int speculation_rollback(speculation *spec, bmoe_context *context, int32_t target, bmoe_stats *stats,
                         bmoe_error *err)
{
    if (context->position <= target)
        return 0;
    if (spec->mtp_context)
        draft_mtp_truncate(&spec->mtp, target);
    run_state *s = &context->state;
    bool restorable = spec->recurrent_snapshot && spec->batch_start >= 0 && target >= spec->batch_start &&
                      context->replay_to == 0;
    if (s->recurrent_floats == 0 || !restorable) {
        /* KV only: exact as it is; a recurrent state not restorable (after a
         * failed evaluation): the context replays the kept tokens lazily */
        bmoe_context_truncate(context, target);
        return 0;
    }
    memcpy(s->recurrent, spec->recurrent_snapshot, s->recurrent_floats * sizeof *s->recurrent);
    int32_t keep = target - spec->batch_start;
    context->position = spec->batch_start;
    if (keep == 0)
        return 0;
    int32_t tokens[SPECULATION_MAX_DRAFT + 1];
    memcpy(tokens, context->tokens + spec->batch_start, (size_t)keep * sizeof *tokens);
    /* observers saw these tokens once already, and an abort here would leave
     * the cache short of what plain decoding holds */
    bmoe_route_callback route_callback = s->route_callback;
    bmoe_trace_callback trace_callback = s->trace_callback;
    bmoe_abort_callback abort_callback = context->abort_callback;
    s->route_callback = NULL;
    s->trace_callback = NULL;
    context->abort_callback = NULL;
    bmoe_stats cost;
    int status = bmoe_eval(context, tokens, keep, NULL, false, &cost, err);
    s->route_callback = route_callback;
    s->trace_callback = trace_callback;
    context->abort_callback = abort_callback;
    if (status != 0)
        return status;
    spec->counters.rollback_tokens += keep;
    if (stats)
        bmoe_stats_add(stats, &cost);
    return 0;
}

static int verify(speculation *spec, bmoe_context *context, token_pick *pick, int32_t n_drafts, float *logits,
                  bmoe_stats *stats, bmoe_error *err)
{
    run_state *s = &context->state;
    size_t n_vocab = (size_t)context->model->model.hparams.n_vocab;
    if (spec->recurrent_snapshot)
        memcpy(spec->recurrent_snapshot, s->recurrent, s->recurrent_floats * sizeof *s->recurrent);
    spec->batch_start = context->position;
    int status = bmoe_eval(context, spec->batch, n_drafts + 1, spec->rows, true, stats, err);
    if (status != 0) {
        spec->batch_start = -1; /* the context replays or keeps what completed: no snapshot applies */
        return status;
    }
    spec->counters.verify_batches++;
    spec->counters.drafted += n_drafts;
    /* Row i follows batch[i]; plain decoding samples it with the history up
     * to and including batch[i], which is what the context's tokens hold
     * while the drafts before it were accepted. */
    int32_t accepted = 0, next;
    for (;;) {
        const float *row = spec->rows + (size_t)accepted * n_vocab;
        next = token_pick_next(pick, row, context->tokens, spec->batch_start + accepted + 1);
        if (accepted == n_drafts || next != spec->batch[accepted + 1])
            break;
        accepted++;
    }
    spec->counters.accepted += accepted;
    for (int32_t i = 0; i < accepted; i++) {
        spec->queue[i] = spec->batch[i + 1];
        spec->queue_row_after[i] = i + 1;
    }
    spec->queue[accepted] = next;
    spec->queue_row_after[accepted] = -1;
    spec->queue_head = 0;
    spec->queue_length = accepted + 1;
    memcpy(logits, spec->rows, n_vocab * sizeof *logits);
    return speculation_rollback(spec, context, spec->batch_start + 1 + accepted, stats, err);
}

int speculation_decode(speculation *spec, bmoe_context *context, token_pick *pick, int32_t token,
                       int32_t max_drafts, float *logits, bmoe_stats *stats, bmoe_error *err)
{
    bool gated = spec->enabled && !spec->params.draft_always, paused = false;
    double start = engine_now_seconds();
    int32_t n_drafts = !gated || option_gate_allows(&spec->gate, &paused) ? draft(spec, context, token, max_drafts) : 0;
    if (paused)
        spec->counters.paused_steps++;
    int status;
    spec->verified = n_drafts > 0;
    if (n_drafts > 0) {
        status = verify(spec, context, pick, n_drafts, logits, stats, err);
    } else {
        spec->batch_start = -1;
        status = bmoe_eval(context, &token, 1, logits, false, stats, err);
    }
    if (status == 0 && gated)
        option_gate_record(&spec->gate, n_drafts > 0, engine_now_seconds() - start,
                          n_drafts > 0 ? spec->queue_length : 1);
    return status;
}
