/* The io trace of tm_io_trace.h. */
#include "tm_io_trace.h"

#include <inttypes.h>

const char tm_io_trace_header[] =
    "turn,phase,step,layer,expert,proj,lane,spec,offset,req_bytes,read_bytes,latency_ns";

void tm_io_trace_format_preamble(tm_buffer *out, const tm_config *config)
{
    tm_buffer_append_string(out, "# io_trace v1\n# ");
    tm_config_model_keys(out, config, false);
    tm_buffer_printf(out, " io_threads=%d o_direct=%d overlap=%d prefetch=%d\n# ", (int)config->io_threads,
                     config->o_direct, config->overlap, (int)config->prefetch);
    tm_config_instrument_keys(out, config);
    tm_buffer_printf(out, " compute_trace_layers=%d\n", config->compute_trace_layers);
    tm_buffer_append_string(out, tm_io_trace_header);
    tm_buffer_append_string(out, "\n");
}

static void format_row(tm_buffer *out, const tm_stamp *stamp, const bmoe_io_event *e, bool speculative,
                       uint64_t offset, uint64_t requested, uint64_t device, int64_t latency)
{
    tm_buffer_printf(out,
                     "%" PRId32 ",%" PRId32 ",%" PRId32 ",%" PRId32 ",%" PRId32 ",%" PRId32 ",%" PRId32
                     ",%d,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRId64 "\n",
                     stamp->turn, stamp->phase, stamp->step, e->layer, e->expert, e->projection, e->lane,
                     speculative ? 1 : 0, offset, requested, device, latency);
}

/* A prefetch needed while still being read was read in pieces, first as a
 * guess, then on demand: two rows, so that the spec rows add up to the
 * flash read done speculatively (moe-prefetch, prefetch_MiB). */
void tm_io_trace_format_event(tm_buffer *out, const tm_stamp *stamp, const bmoe_io_event *e)
{
    uint64_t guessed = e->speculative_requested_bytes;
    if (e->speculative || e->speculative_device_bytes == 0 || guessed >= e->requested_bytes) {
        format_row(out, stamp, e, e->speculative || e->speculative_device_bytes > 0, e->offset, e->requested_bytes,
                   e->device_bytes, e->latency_ns);
        return;
    }
    format_row(out, stamp, e, true, e->offset, guessed, e->speculative_device_bytes, e->speculative_latency_ns);
    format_row(out, stamp, e, false, e->offset + guessed, e->requested_bytes - guessed,
               e->device_bytes - e->speculative_device_bytes, e->latency_ns - e->speculative_latency_ns);
}

int tm_io_trace_open(tm_io_trace *trace, const char *path, bmoe_error *error)
{
    tm_buffer_init(&trace->rows);
    trace->stamp = (tm_stamp){0, TM_PHASE_PREFILL, 0};
    return tm_sink_open(&trace->sink, path, error);
}

int tm_io_trace_begin(tm_io_trace *trace, const tm_config *config)
{
    tm_io_trace_format_preamble(&trace->rows, config);
    return tm_sink_write(&trace->sink, &trace->rows);
}

void tm_io_trace_on_read(void *user, const bmoe_io_event *event)
{
    tm_io_trace *trace = user;
    tm_io_trace_format_event(&trace->rows, &trace->stamp, event);
}

int tm_io_trace_flush(tm_io_trace *trace)
{
    return tm_sink_write(&trace->sink, &trace->rows);
}

int tm_io_trace_commit(tm_io_trace *trace, bmoe_error *error)
{
    tm_io_trace_flush(trace); /* a failure stays in the sink, and commit reports it */
    int status = tm_sink_commit(&trace->sink, error);
    tm_buffer_free(&trace->rows);
    return status;
}

void tm_io_trace_discard(tm_io_trace *trace)
{
    tm_sink_discard(&trace->sink);
    tm_buffer_free(&trace->rows);
}
