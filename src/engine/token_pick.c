/* The next token under a constraint (token_pick.h). The sampler sees a row
 * whose disallowed tokens are -inf, so its filters and draws act on the
 * allowed tokens alone. A greedy sampler first tries the row as it is: its
 * choice is the best of every token, so when the constraint allows it, it
 * is also the best of the allowed ones, and the whole row's mask (the
 * expensive part) is skipped. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "token_pick.h"

int token_pick_init(token_pick *pick, bmoe_sampler *sampler, const bmoe_sampler_params *sampler_params,
                    const bmoe_token_constraint *constraint, int32_t n_vocab, bmoe_error *err)
{
    memset(pick, 0, sizeof *pick);
    pick->sampler = sampler;
    pick->n_vocab = n_vocab;
    pick->greedy = sampler_params->temperature <= 0.0f;
    if (!constraint)
        return 0;
    if (!constraint->allowed || !constraint->allows || !constraint->accept)
        return error_set_status(err, BMOE_ERR_INVALID_ARGUMENT,
                                "generation: a token constraint needs its allowed, allows and accept functions");
    pick->constraint = constraint;
    pick->masked = malloc((size_t)n_vocab * sizeof *pick->masked);
    pick->allowed = malloc((size_t)n_vocab);
    if (!pick->masked || !pick->allowed) {
        token_pick_free(pick);
        return error_set_status(err, BMOE_ERR_OUT_OF_MEMORY, "generation: out of memory for a constrained row");
    }
    return 0;
}

void token_pick_free(token_pick *pick)
{
    free(pick->masked);
    free(pick->allowed);
    pick->masked = NULL;
    pick->allowed = NULL;
}

int32_t token_pick_next(token_pick *pick, const float *row, const int32_t *history, int32_t n_history)
{
    const bmoe_token_constraint *c = pick->constraint;
    if (!c)
        return bmoe_sampler_sample(pick->sampler, row, history, n_history);
    int32_t token = -1;
    if (pick->greedy) {
        token = bmoe_sampler_sample(pick->sampler, row, history, n_history);
        if (token >= 0 && !c->allows(c->user, token))
            token = -1;
    }
    if (token < 0) {
        if (c->allowed(c->user, pick->allowed, pick->n_vocab) <= 0)
            return -1;
        for (int32_t t = 0; t < pick->n_vocab; t++)
            pick->masked[t] = pick->allowed[t] ? row[t] : -INFINITY;
        token = bmoe_sampler_sample(pick->sampler, pick->masked, history, n_history);
        if (token < 0 || !pick->allowed[token])
            return -1;
    }
    c->accept(c->user, token);
    return token;
}
