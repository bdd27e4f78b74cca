/* Choosing the next token from a row of logits: the sampler, under the
 * generation's token constraint when it has one. Plain steps and verify
 * batches choose through this one function, so a verified position is
 * chosen exactly as plain decoding chooses it.
 * Owns: the masked row and the allowed flags (with a constraint). */
#ifndef BMOE_ENGINE_TOKEN_PICK_H
#define BMOE_ENGINE_TOKEN_PICK_H

#include <stdbool.h>
#include <stdint.h>

#include "bmoe.h"
#include "../base/error.h"

typedef struct token_pick {
    bmoe_sampler *sampler;                   /* the generation's */
    const bmoe_token_constraint *constraint; /* NULL: none */
    bool greedy;                             /* the sampler draws nothing at random */
    int32_t n_vocab;
    float *masked;                           /* [n_vocab] a row with the disallowed tokens at -inf */
    uint8_t *allowed;                        /* [n_vocab] */
} token_pick;

int token_pick_init(token_pick *pick, bmoe_sampler *sampler, const bmoe_sampler_params *sampler_params,
                    const bmoe_token_constraint *constraint, int32_t n_vocab, bmoe_error *err);
void token_pick_free(token_pick *pick);

/* The token to take after history[0..n_history) from row, told to the
 * constraint; -1 when the constraint allows none. */
int32_t token_pick_next(token_pick *pick, const float *row, const int32_t *history, int32_t n_history);

#endif
