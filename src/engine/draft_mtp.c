/* MTP drafting (draft_mtp.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "draft_mtp.h"

/* The drafter's buffers' lengths, in floats. */
typedef struct drafter_lengths {
    size_t hidden_rows, head_hidden, step_hidden, head_logits;
} drafter_lengths;

static drafter_lengths drafter_floats(const bmoe_context *context)
{
    const model_hparams *hp = &context->model->model.hparams;
    size_t n_embd = (size_t)hp->n_embd;
    return (drafter_lengths){
        .hidden_rows = (size_t)context->n_ctx * n_embd,
        .head_hidden = (size_t)context->n_ubatch * n_embd,
        .step_hidden = n_embd,
        .head_logits = (size_t)hp->n_vocab,
    };
}

uint64_t draft_mtp_bytes(const bmoe_context *context)
{
    const model *m = &context->model->model;
    if (m->hparams.n_layer_head == 0)
        return 0;
    drafter_lengths n = drafter_floats(context);
    return run_state_head_bytes(&context->state, m) +
           (n.hidden_rows + n.head_hidden + n.step_hidden + n.head_logits) * sizeof(float);
}

int draft_mtp_init(draft_mtp *drafter, bmoe_context *context, bmoe_error *err)
{
    memset(drafter, 0, sizeof *drafter);
    const model_hparams *hp = &context->model->model.hparams;
    drafter_lengths n = drafter_floats(context);
    if (engine_reserve_beside_cache(context->model, draft_mtp_bytes(context), "MTP head",
                                    "its KV cache and hidden rows", context->n_ctx, err) != 0 ||
        run_state_enable_head(&context->state, &context->model->model, err) != 0)
        return -1;
    drafter->hidden_rows = malloc(n.hidden_rows * sizeof *drafter->hidden_rows);
    drafter->head_hidden = malloc(n.head_hidden * sizeof *drafter->head_hidden);
    drafter->step_hidden = malloc(n.step_hidden * sizeof *drafter->step_hidden);
    drafter->head_logits = malloc(n.head_logits * sizeof *drafter->head_logits);
    if (!drafter->hidden_rows || !drafter->head_hidden || !drafter->step_hidden || !drafter->head_logits) {
        draft_mtp_free(drafter, context);
        return error_set_status(err, BMOE_ERR_OUT_OF_MEMORY,
                                "generation: out of memory for the MTP head's %d hidden rows of %d", context->n_ctx,
                                hp->n_embd);
    }
    drafter->filled = -1;
    context->state.hidden_rows = drafter->hidden_rows;
    return 0;
}

void draft_mtp_free(draft_mtp *drafter, bmoe_context *context)
{
    if (context->state.hidden_rows == drafter->hidden_rows)
        context->state.hidden_rows = NULL;
    free(drafter->hidden_rows);
    free(drafter->head_hidden);
    free(drafter->step_hidden);
    free(drafter->head_logits);
    memset(drafter, 0, sizeof *drafter);
}

void draft_mtp_start(draft_mtp *drafter, int32_t first)
{
    drafter->filled = first;
}

void draft_mtp_truncate(draft_mtp *drafter, int32_t position)
{
    /* the head's row at i reads the token at i + 1 */
    int32_t kept = position > 0 ? position - 1 : 0;
    if (drafter->filled > kept)
        drafter->filled = kept;
}

static int32_t argmax(const float *values, int32_t n)
{
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (values[i] > values[best])
            best = i;
    return best;
}

/* The head's draft at best is sure enough: softmax(logits)[best] >= p_min,
 * as 1 / sum(exp(l - l_best)) (l_best the largest logit), so no exp
 * overflows and no vocabulary-sized buffer is needed. Each term is a
 * float's exp, the sum a double's: 250k float additions could drift by
 * more than the gap between a floor near 1 and the probability. */
static bool sure_enough(const float *logits, int32_t n, int32_t best, float p_min)
{
    if (p_min <= 0.0f)
        return true;
    float top = logits[best];
    double sum = 0.0;
    for (int32_t i = 0; i < n; i++)
        sum += (double)expf(logits[i] - top);
    return 1.0 / sum >= (double)p_min;
}

int32_t draft_mtp_propose(draft_mtp *drafter, bmoe_context *context, int32_t *drafts, int32_t max_drafts,
                          bmoe_error *err)
{
    const model *m = &context->model->model;
    run_state *s = &context->state;
    int32_t n_embd = m->hparams.n_embd, n_vocab = m->hparams.n_vocab;
    int32_t last = context->position - 1; /* the head's row whose token is the next one */
    if (max_drafts <= 0 || last < 0 || drafter->filled < 0 || drafter->filled > last)
        return 0;
    /* catch up rows filled..last (the main model's hidden states), the last
     * row's logits giving the first draft */
    int32_t last_row = 0;
    for (int32_t start = drafter->filled; start <= last;) {
        int32_t count = last + 1 - start;
        if (count > context->n_ubatch)
            count = context->n_ubatch;
        bool final = start + count > last;
        forward_batch batch = {
            .tokens = context->tokens + start + 1,
            .n_tokens = count,
            .position = start,
            .first_output = final ? count - 1 : count,
            .logits = final ? drafter->head_logits : NULL,
        };
        s->single_token = count == 1;
        if (m->arch->head_forward(m, s, &batch, drafter->hidden_rows + (int64_t)start * n_embd,
                                  drafter->head_hidden, err) != 0)
            return -1;
        start += count;
        drafter->filled = start;
        last_row = count - 1;
    }
    memcpy(drafter->step_hidden, drafter->head_hidden + (int64_t)last_row * n_embd,
           (size_t)n_embd * sizeof *drafter->step_hidden);
    drafts[0] = argmax(drafter->head_logits, n_vocab);
    if (!sure_enough(drafter->head_logits, n_vocab, drafts[0], drafter->p_min))
        return 0;
    /* chained: the head's own output hidden state and its draft, one
     * position further each (rows past `filled`, overwritten by the next
     * catch-up) */
    for (int32_t k = 1; k < max_drafts; k++) {
        forward_batch batch = {
            .tokens = drafts + k - 1,
            .n_tokens = 1,
            .position = last + k,
            .first_output = 0,
            .logits = drafter->head_logits,
        };
        s->single_token = true;
        if (m->arch->head_forward(m, s, &batch, drafter->step_hidden, drafter->head_hidden, err) != 0)
            return -1;
        memcpy(drafter->step_hidden, drafter->head_hidden, (size_t)n_embd * sizeof *drafter->step_hidden);
        drafts[k] = argmax(drafter->head_logits, n_vocab);
        if (!sure_enough(drafter->head_logits, n_vocab, drafts[k], drafter->p_min))
            return k;
    }
    return max_drafts;
}
