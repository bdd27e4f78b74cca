/* One session request (the telemetry contract's Session mode): the JSON
 * object of one line, checked whole before anything acts on it: an object,
 * a known "cmd", the fields that command takes with their types and ranges,
 * strings of valid UTF-8 without NUL, nothing else. A rejected line is one
 * message (and the id, when the line had a usable one) for a BMOE_ERROR.
 * The request owns copies of its strings. */
#ifndef BMOE_SESSION_REQUEST_H
#define BMOE_SESSION_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The most choices one decide may score. */
#define SESSION_MAX_CHOICES 4096

typedef enum session_command {
    SESSION_GENERATE,
    SESSION_DECIDE,
    SESSION_CANCEL,
    SESSION_CLOSE,
} session_command;

typedef struct session_text {
    char *data;          /* NUL-terminated copy */
    size_t length;
} session_text;

typedef struct session_request {
    session_command command;
    int64_t id;              /* 0 when not given */
    /* generate */
    session_text prompt;
    bool has_n_predict, has_think, has_clear_kv;
    int32_t n_predict;       /* >= 1, or -1: until another stop */
    bool think, clear_kv;
    /* decide */
    session_text prefix, suffix;
    session_text *choices;
    int32_t n_choices;
    bool reuse_prefix;       /* default true */
} session_request;

/* Parses one line. Returns 0 with request filled (release it with
 * session_request_free), or -1 with a one-line message and *id set to the
 * line's id when it had a valid one (else 0). */
int session_request_parse(const char *line, size_t length, session_request *request, int64_t *id, char *message,
                          size_t message_size);
void session_request_free(session_request *request);

#endif
