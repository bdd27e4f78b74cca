/* The session's standard output, shared by the reader thread (rejected
 * requests) and the main loop (everything else): whole lines written under
 * one lock, each write flushed, so that lines never interleave and a client
 * sees each as soon as it is complete. The first failed write (the client
 * went away) is kept; later writes do nothing. Also the small control lines
 * (BMOE_READY, BMOE_BEGIN, BMOE_ERROR). */
#ifndef BMOE_SESSION_OUTPUT_H
#define BMOE_SESSION_OUTPUT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tm_buffer.h"

typedef struct session_output {
    FILE *stream;
    pthread_mutex_t lock;
    bool failed;
    int error;                 /* errno of the failed write (EIO when it left none) */
} session_output;

int session_output_init(session_output *output, FILE *stream);
void session_output_destroy(session_output *output);
/* Writes the buffer's lines and flushes, then clears the buffer. Returns 0
 * or -1 (the stream failed, or the buffer ran out of memory). */
int session_output_write(session_output *output, tm_buffer *lines);
bool session_output_failed(session_output *output);

/* BMOE_ERROR {"id":..,"fatal":..,"msg":".."} */
void session_format_error(tm_buffer *out, int64_t id, bool fatal, const char *message);
/* BMOE_BEGIN {"id":..} */
void session_format_begin(tm_buffer *out, int64_t id);
/* BMOE_READY {"load_s":..,"arch":"..","n_ctx":..,"think_ctl":"..","n_expert_used":..} */
void session_format_ready(tm_buffer *out, double load_s, const char *arch, int32_t n_ctx, const char *think_ctl,
                          int32_t n_expert_used);

#endif
