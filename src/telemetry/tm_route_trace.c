/* The route trace of tm_route_trace.h. */
#include "tm_route_trace.h"

#include <inttypes.h>
#include <math.h>

const char tm_route_trace_header[] = "turn,phase,step,layer,slot,expert,weight,residency,expert_bytes,dropped";

void tm_route_trace_format_preamble(tm_buffer *out, const tm_config *config, const tm_layout *layout)
{
    tm_buffer_append_string(out, "# route_trace v1\n# ");
    tm_config_model_keys(out, config, false);
    tm_buffer_append_string(out, "\n# ");
    tm_config_instrument_keys(out, config);
    tm_buffer_printf(out, " compute_trace_layers=%d\n", config->compute_trace_layers);
    if (layout && layout->known) {
        for (int32_t il = 0; il < layout->n_layer; il++)
            tm_buffer_printf(out, "# layer=%" PRId32 " expert_bytes=%" PRIu64 " dense_bytes=%" PRIu64 "\n", il,
                             layout->expert_bytes[il], layout->dense_bytes[il]);
    } else {
        tm_buffer_append_string(out, "# layout=unknown\n");
    }
    tm_buffer_append_string(out, tm_route_trace_header);
    tm_buffer_append_string(out, "\n");
}

void tm_route_trace_format_event(tm_buffer *out, const tm_stamp *stamp, const bmoe_route_event *e)
{
    for (int32_t k = 0; k < e->n_experts_used; k++) {
        tm_buffer_printf(out, "%" PRId32 ",%" PRId32 ",%" PRId32 ",%" PRId32 ",%" PRId32 ",%" PRId32 ",",
                         stamp->turn, stamp->phase, e->position, e->layer, k, e->experts[k]);
        if (e->weights && isfinite(e->weights[k]))
            tm_buffer_printf(out, "%.6g", (double)e->weights[k]);
        else
            tm_buffer_append_string(out, "nan");
        tm_buffer_printf(out, ",%d,%" PRIu64 ",%d\n", e->residency ? (int)e->residency[k] : 1,
                         e->read_bytes ? e->read_bytes[k] : 0, e->dropped ? (int)e->dropped[k] : 0);
    }
}

int tm_route_trace_open(tm_route_trace *trace, const char *path, bmoe_error *error)
{
    tm_buffer_init(&trace->rows);
    trace->stamp = (tm_stamp){0, TM_PHASE_PREFILL, 0};
    return tm_sink_open(&trace->sink, path, error);
}

int tm_route_trace_begin(tm_route_trace *trace, const tm_config *config, const tm_layout *layout)
{
    tm_route_trace_format_preamble(&trace->rows, config, layout);
    return tm_sink_write(&trace->sink, &trace->rows);
}

void tm_route_trace_on_route(void *user, const bmoe_route_event *event)
{
    tm_route_trace *trace = user;
    tm_route_trace_format_event(&trace->rows, &trace->stamp, event);
}

int tm_route_trace_flush(tm_route_trace *trace)
{
    return tm_sink_write(&trace->sink, &trace->rows);
}

int tm_route_trace_commit(tm_route_trace *trace, bmoe_error *error)
{
    tm_route_trace_flush(trace); /* a failure stays in the sink, and commit reports it */
    int status = tm_sink_commit(&trace->sink, error);
    tm_buffer_free(&trace->rows);
    return status;
}

void tm_route_trace_discard(tm_route_trace *trace)
{
    tm_sink_discard(&trace->sink);
    tm_buffer_free(&trace->rows);
}
