/* The session's locked line writer and its small control lines
 * (session_output.h). */
#include "session_output.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "tm_json.h"

int session_output_init(session_output *output, FILE *stream)
{
    output->stream = stream;
    output->failed = false;
    output->error = 0;
    return pthread_mutex_init(&output->lock, NULL) == 0 ? 0 : -1;
}

void session_output_destroy(session_output *output)
{
    pthread_mutex_destroy(&output->lock);
}

int session_output_write(session_output *output, tm_buffer *lines)
{
    bool out_of_memory = lines->failed;
    pthread_mutex_lock(&output->lock);
    if (!output->failed && !out_of_memory && lines->length > 0) {
        errno = 0;
        if (fwrite(lines->data, 1, lines->length, output->stream) != lines->length || fflush(output->stream) != 0) {
            output->failed = true;
            output->error = errno ? errno : EIO;
        }
    }
    bool failed = output->failed;
    pthread_mutex_unlock(&output->lock);
    tm_buffer_clear(lines);
    return failed || out_of_memory ? -1 : 0;
}

bool session_output_failed(session_output *output)
{
    pthread_mutex_lock(&output->lock);
    bool failed = output->failed;
    pthread_mutex_unlock(&output->lock);
    return failed;
}

void session_format_error(tm_buffer *out, int64_t id, bool fatal, const char *message)
{
    tm_buffer_printf(out, "BMOE_ERROR {\"id\":%" PRId64 ",\"fatal\":%s,\"msg\":", id, fatal ? "true" : "false");
    tm_json_string(out, message, strlen(message));
    tm_buffer_append_string(out, "}\n");
}

void session_format_begin(tm_buffer *out, int64_t id)
{
    tm_buffer_printf(out, "BMOE_BEGIN {\"id\":%" PRId64 "}\n", id);
}

void session_format_ready(tm_buffer *out, double load_s, const char *arch, int32_t n_ctx, const char *think_ctl,
                          int32_t n_expert_used)
{
    tm_buffer_append_string(out, "BMOE_READY {\"load_s\":");
    tm_json_number(out, load_s, 3, 0.0);
    tm_buffer_append_string(out, ",\"arch\":");
    tm_json_string(out, arch, strlen(arch));
    tm_buffer_printf(out, ",\"n_ctx\":%" PRId32 ",\"think_ctl\":", n_ctx);
    tm_json_string(out, think_ctl, strlen(think_ctl));
    tm_buffer_printf(out, ",\"n_expert_used\":%" PRId32 "}\n", n_expert_used);
}
