/* The --compute-trace and --compute-trace-layers files of the telemetry
 * contract: "# compute_trace v1", the run's static facts, then one row per
 * trace event:
 *   turn,phase,step,seq,layer,op,name,wall_ns,majflt
 * --compute-trace-layers takes the engine's layer-boundary events ("pre"
 * before layer 0, "blk.<il>" per layer, "post" for the final norm and head;
 * op LAYER); --compute-trace its building-block events (the context's
 * trace_ops: op and name as the engine reports them, e.g. MUL_MAT_ID
 * ffn_moe_experts-12), each file saying which in its preamble. seq counts
 * the rows of one evaluation from 0. Rows are formatted into memory in the
 * callback and written after each evaluation. */
#ifndef BMOE_TM_COMPUTE_TRACE_H
#define BMOE_TM_COMPUTE_TRACE_H

#include <stdbool.h>

#include "bmoe.h"
#include "tm_buffer.h"
#include "tm_config.h"
#include "tm_sink.h"
#include "tm_stamp.h"

extern const char tm_compute_trace_header[];

typedef struct tm_compute_trace {
    tm_sink sink;
    tm_buffer rows;
    tm_stamp stamp;
    int32_t seq;         /* the next row's seq in this evaluation */
    bool blocks;         /* takes building-block events (else layer boundaries) */
} tm_compute_trace;

/* requested_layers: the file was asked as --compute-trace-layers (else as
 * the per-node --compute-trace). */
void tm_compute_trace_format_preamble(tm_buffer *out, const tm_config *config, bool requested_layers);
void tm_compute_trace_format_event(tm_buffer *out, const tm_stamp *stamp, int32_t seq,
                                   const bmoe_trace_event *event);

int tm_compute_trace_open(tm_compute_trace *trace, const char *path, bmoe_error *error);
int tm_compute_trace_begin(tm_compute_trace *trace, const tm_config *config, bool requested_layers);
/* A new evaluation: the stamp its rows carry, seq from 0. */
void tm_compute_trace_set_stamp(tm_compute_trace *trace, const tm_stamp *stamp);
/* The bmoe_trace_callback; user is the trace. */
void tm_compute_trace_on_event(void *user, const bmoe_trace_event *event);
int tm_compute_trace_flush(tm_compute_trace *trace);
int tm_compute_trace_commit(tm_compute_trace *trace, bmoe_error *error);
void tm_compute_trace_discard(tm_compute_trace *trace);

#endif
