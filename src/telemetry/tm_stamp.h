/* Where a trace row belongs: the turn (0 for a one-shot run), the phase
 * (0 prefill, 1 decode) and the step, the absolute context position of the
 * evaluation the row came from (a decode: its token's position; a prefill:
 * its last prompt token's). The application sets it before each
 * evaluation; the trace callbacks stamp their rows with it. */
#ifndef BMOE_TM_STAMP_H
#define BMOE_TM_STAMP_H

#include <stdint.h>

enum { TM_PHASE_PREFILL = 0, TM_PHASE_DECODE = 1 };

typedef struct tm_stamp {
    int32_t turn;
    int32_t phase;
    int32_t step;
} tm_stamp;

#endif
