/* The end of a reasoning split, the same for the CLI's and the session's
 * last progress line: the last text fed, the split finished, and what the
 * two steps gave joined into one pair of deltas. */
#ifndef BMOE_TM_REASONING_H
#define BMOE_TM_REASONING_H

#include <stddef.h>

#include "bmoe.h"
#include "tm_buffer.h"
#include "tm_progress.h"

/* Feeds text[0..length) to reasoning and finishes it; deltas are then the
 * thinking and answer text the feed and the finish gave together, held in
 * thinking and answer (cleared first). When either step's delta is a
 * snapshot, the deltas are the whole state after the finish, marked reset.
 * Returns 0, or -1 with error set. */
int tm_reasoning_finish(bmoe_reasoning *reasoning, const char *text, size_t length, tm_buffer *thinking,
                        tm_buffer *answer, tm_deltas *deltas, bmoe_error *error);

#endif
