/* Speculative decoding's rows: which generated token carries a verify
 * decode and how many tokens it confirmed (the contract's mtp_batch), and
 * the drafting time charged to it (mtp_draft_ms), from the generation's
 * counters (bmoe_generation_spec_stats) read after each step. A step that
 * ran a verify batch is its group's first token; the drafts it accepted
 * are the next tokens, handed out by steps that decode nothing. */
#ifndef BMOE_TM_DRAFT_H
#define BMOE_TM_DRAFT_H

#include <stdint.h>

#include "bmoe.h"

typedef struct tm_draft {
    bmoe_spec_stats seen;  /* the counters at the last row */
    int64_t pending;       /* accepted drafts of the last verify batch not given a row yet */
} tm_draft;

void tm_draft_init(tm_draft *draft);
/* The row of the token a step just handed out, from the counters after the
 * step: its batch (1 + the drafts its verify batch accepted, 1 for a plain
 * decode, 0 for an accepted draft) and the drafting done in the step. A
 * group cut short by a stop keeps the count its verify batch confirmed. */
void tm_draft_row(tm_draft *draft, const bmoe_spec_stats *now, int32_t *batch, double *draft_ms);

#endif
