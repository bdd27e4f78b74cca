/* The rows of tm_draft.h. */
#include "tm_draft.h"

#include <string.h>

void tm_draft_init(tm_draft *draft)
{
    memset(draft, 0, sizeof *draft);
}

void tm_draft_row(tm_draft *draft, const bmoe_spec_stats *now, int32_t *batch, double *draft_ms)
{
    *draft_ms = now->draft_ms - draft->seen.draft_ms;
    if (*draft_ms < 0.0)
        *draft_ms = 0.0;
    if (draft->pending > 0) {
        draft->pending--;
        *batch = 0;
    } else if (now->verify_batches > draft->seen.verify_batches) {
        draft->pending = now->accepted - draft->seen.accepted;
        *batch = (int32_t)(1 + draft->pending);
    } else {
        *batch = 1;
    }
    draft->seen = *now;
}
