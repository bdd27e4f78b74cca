/* The --io-trace file of the telemetry contract: "# io_trace v1", the run's
 * static facts, then one row per expert read the streamer issued:
 *   turn,phase,step,layer,expert,proj,lane,spec,offset,req_bytes,read_bytes,latency_ns
 * req_bytes is the slice the caller wanted, read_bytes the window actually
 * read (O_DIRECT alignment included). Rows are formatted into memory in the
 * io callback and written by tm_io_trace_flush after each evaluation; they
 * carry the stamp of the evaluation that drained them. */
#ifndef BMOE_TM_IO_TRACE_H
#define BMOE_TM_IO_TRACE_H

#include "bmoe.h"
#include "tm_buffer.h"
#include "tm_config.h"
#include "tm_sink.h"
#include "tm_stamp.h"

extern const char tm_io_trace_header[];

typedef struct tm_io_trace {
    tm_sink sink;
    tm_buffer rows;
    tm_stamp stamp;
} tm_io_trace;

void tm_io_trace_format_preamble(tm_buffer *out, const tm_config *config);
void tm_io_trace_format_event(tm_buffer *out, const tm_stamp *stamp, const bmoe_io_event *event);

int tm_io_trace_open(tm_io_trace *trace, const char *path, bmoe_error *error);
int tm_io_trace_begin(tm_io_trace *trace, const tm_config *config);
/* The bmoe_io_callback; user is the trace. */
void tm_io_trace_on_read(void *user, const bmoe_io_event *event);
int tm_io_trace_flush(tm_io_trace *trace);
int tm_io_trace_commit(tm_io_trace *trace, bmoe_error *error);
void tm_io_trace_discard(tm_io_trace *trace);

#endif
