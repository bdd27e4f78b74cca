/* The per-token lines of the telemetry contract, one JSON object each:
 *   BMOE_LOAD {"mb":..,"ms":..}             only when experts were read
 *   BMOE_PROGRESS {"step":..,...,"delta_reasoning":"..","delta_text":".."}
 * mb/read_mb are MiB (2^20 bytes); every float has 3 decimals, an
 * unmeasured value is the contract's 0 or -1. The deltas are the text new
 * since the previous line (never cumulative), JSON-escaped; reset marks a
 * line whose deltas replace what the reader accumulated. */
#ifndef BMOE_TM_PROGRESS_H
#define BMOE_TM_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>

#include "tm_buffer.h"
#include "tm_token.h"

typedef struct tm_deltas {
    const char *reasoning; /* the thinking span's new text (may be NULL: "") */
    size_t reasoning_length;
    const char *text;      /* the answer's new text (may be NULL: "") */
    size_t text_length;
    bool reset;            /* the deltas are snapshots that replace the accumulated text */
} tm_deltas;

/* Appends the BMOE_LOAD line (with its newline) when the token read expert
 * bytes or spent time reading; returns false when there is none to write. */
bool tm_progress_load_line(tm_buffer *out, const tm_token *token);
/* Appends the BMOE_PROGRESS line with its newline. */
void tm_progress_line(tm_buffer *out, const tm_token *token, const tm_deltas *deltas);

#endif
