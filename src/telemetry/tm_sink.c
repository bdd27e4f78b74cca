/* The safe output file of tm_sink.h. */
#include "tm_sink.h"

#include <stdio.h>
#include <string.h>

int tm_sink_open(tm_sink *sink, const char *path, bmoe_error *error)
{
    memset(sink, 0, sizeof *sink);
    sink->path = path;
    sink->output = bmoe_output_open(path, error);
    return sink->output ? 0 : -1;
}

int tm_sink_write(tm_sink *sink, tm_buffer *buffer)
{
    if (!sink->output || sink->failed) {
        tm_buffer_clear(buffer);
        return -1;
    }
    if (buffer->failed) {
        sink->failed = true;
        sink->error.status = BMOE_ERR_OUT_OF_MEMORY;
        snprintf(sink->error.message, sizeof sink->error.message, "%s: out of memory formatting telemetry rows",
                 sink->path);
        tm_buffer_clear(buffer);
        return -1;
    }
    int status = 0;
    if (buffer->length > 0 && bmoe_output_write(sink->output, buffer->data, buffer->length, &sink->error) != 0) {
        sink->failed = true;
        status = -1;
    }
    tm_buffer_clear(buffer);
    return status;
}

int tm_sink_commit(tm_sink *sink, bmoe_error *error)
{
    if (!sink->output)
        return 0;
    if (sink->failed) {
        if (error)
            *error = sink->error;
        tm_sink_discard(sink);
        return -1;
    }
    int status = bmoe_output_commit(sink->output, error);
    sink->output = NULL;
    return status == 0 ? 0 : -1;
}

void tm_sink_discard(tm_sink *sink)
{
    if (sink->output)
        bmoe_output_discard(sink->output);
    sink->output = NULL;
}
