/* The --route-trace file of the telemetry contract: "# route_trace v1",
 * the run's static facts (model line, instruments, one "# layer=" line per
 * layer with its expert and dense bytes), then one row per routed expert:
 *   turn,phase,step,layer,slot,expert,weight,residency,expert_bytes,dropped
 * Rows are formatted into memory inside the route callback (no I/O on the
 * evaluating thread) and written by tm_route_trace_flush after each
 * evaluation. step is the routed token's own position (the event's). */
#ifndef BMOE_TM_ROUTE_TRACE_H
#define BMOE_TM_ROUTE_TRACE_H

#include "bmoe.h"
#include "tm_buffer.h"
#include "tm_config.h"
#include "tm_layout.h"
#include "tm_sink.h"
#include "tm_stamp.h"

extern const char tm_route_trace_header[];

typedef struct tm_route_trace {
    tm_sink sink;
    tm_buffer rows;
    tm_stamp stamp;      /* turn and phase of the rows being captured */
} tm_route_trace;

void tm_route_trace_format_preamble(tm_buffer *out, const tm_config *config, const tm_layout *layout);
/* One event's rows. */
void tm_route_trace_format_event(tm_buffer *out, const tm_stamp *stamp, const bmoe_route_event *event);

int tm_route_trace_open(tm_route_trace *trace, const char *path, bmoe_error *error);
int tm_route_trace_begin(tm_route_trace *trace, const tm_config *config, const tm_layout *layout);
/* The bmoe_route_callback; user is the trace. */
void tm_route_trace_on_route(void *user, const bmoe_route_event *event);
int tm_route_trace_flush(tm_route_trace *trace);
int tm_route_trace_commit(tm_route_trace *trace, bmoe_error *error);
void tm_route_trace_discard(tm_route_trace *trace);

#endif
