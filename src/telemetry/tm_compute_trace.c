/* The compute trace of tm_compute_trace.h. */
#include "tm_compute_trace.h"

#include <inttypes.h>

const char tm_compute_trace_header[] = "turn,phase,step,seq,layer,op,name,wall_ns,majflt";

void tm_compute_trace_format_preamble(tm_buffer *out, const tm_config *config, bool requested_layers)
{
    tm_buffer_append_string(out, "# compute_trace v1\n# ");
    tm_config_model_keys(out, config, false);
    tm_buffer_printf(out, " n_threads=%d io_threads=%d o_direct=%d overlap=%d\n", (int)config->threads,
                     (int)config->io_threads, config->o_direct, config->overlap);
    tm_buffer_printf(out, "# granularity=%s requested=%s\n# ", requested_layers ? "layer" : "block",
                     requested_layers ? "layers" : "nodes");
    tm_config_instrument_keys(out, config);
    tm_buffer_printf(out, " compute_trace_layers=%d\n", config->compute_trace_layers);
    tm_buffer_append_string(out, tm_compute_trace_header);
    tm_buffer_append_string(out, "\n");
}

/* A segment name as one CSV field: the engine's names are plain; anything
 * outside [A-Za-z0-9._-] becomes '_' so a field never splits. */
static void tm_name_field(tm_buffer *out, const char *name)
{
    for (const char *c = name ? name : ""; *c; c++) {
        char byte = *c;
        bool plain = (byte >= 'a' && byte <= 'z') || (byte >= 'A' && byte <= 'Z') || (byte >= '0' && byte <= '9') ||
                     byte == '.' || byte == '_' || byte == '-';
        tm_buffer_append(out, plain ? &byte : "_", 1);
    }
}

void tm_compute_trace_format_event(tm_buffer *out, const tm_stamp *stamp, int32_t seq, const bmoe_trace_event *e)
{
    tm_buffer_printf(out, "%" PRId32 ",%" PRId32 ",%" PRId32 ",%" PRId32 ",%" PRId32 ",", stamp->turn,
                     stamp->phase, stamp->step, seq, e->layer);
    tm_name_field(out, e->op ? e->op : "LAYER");
    tm_buffer_append(out, ",", 1);
    tm_name_field(out, e->name);
    tm_buffer_printf(out, ",%" PRId64 ",%" PRId64 "\n", e->wall_ns, e->majflt);
}

int tm_compute_trace_open(tm_compute_trace *trace, const char *path, bmoe_error *error)
{
    tm_buffer_init(&trace->rows);
    trace->stamp = (tm_stamp){0, TM_PHASE_PREFILL, 0};
    trace->seq = 0;
    trace->blocks = false;
    return tm_sink_open(&trace->sink, path, error);
}

int tm_compute_trace_begin(tm_compute_trace *trace, const tm_config *config, bool requested_layers)
{
    trace->blocks = !requested_layers;
    tm_compute_trace_format_preamble(&trace->rows, config, requested_layers);
    return tm_sink_write(&trace->sink, &trace->rows);
}

void tm_compute_trace_set_stamp(tm_compute_trace *trace, const tm_stamp *stamp)
{
    trace->stamp = *stamp;
    trace->seq = 0;
}

void tm_compute_trace_on_event(void *user, const bmoe_trace_event *event)
{
    tm_compute_trace *trace = user;
    if ((event->op != NULL) != trace->blocks)
        return; /* the other file's kind of event */
    tm_compute_trace_format_event(&trace->rows, &trace->stamp, trace->seq++, event);
}

int tm_compute_trace_flush(tm_compute_trace *trace)
{
    return tm_sink_write(&trace->sink, &trace->rows);
}

int tm_compute_trace_commit(tm_compute_trace *trace, bmoe_error *error)
{
    tm_compute_trace_flush(trace); /* a failure stays in the sink, and commit reports it */
    int status = tm_sink_commit(&trace->sink, error);
    tm_buffer_free(&trace->rows);
    return status;
}

void tm_compute_trace_discard(tm_compute_trace *trace)
{
    tm_sink_discard(&trace->sink);
    tm_buffer_free(&trace->rows);
}
