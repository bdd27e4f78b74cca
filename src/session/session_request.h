/* One session request (the telemetry contract's Session mode): the JSON
 * object of one line, checked whole before anything acts on it: an object,
 * a known "cmd", the fields that command takes with their types and ranges,
 * strings of valid UTF-8 without NUL. Keys the command does not take are
 * ignored (their names are kept for a note), and so is a line without
 * "cmd" or with a command bmoe does not know, as the reference reader does.
 * A rejected line is one message (and the id, when the line had a usable
 * one) for a BMOE_ERROR. The request owns copies of its strings. */
#ifndef BMOE_SESSION_REQUEST_H
#define BMOE_SESSION_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The most choices one decide may score. */
#define SESSION_MAX_CHOICES 4096
/* The most messages one generate may carry. */
#define SESSION_MAX_MESSAGES 4096
/* The most ignored key names one request keeps for its note. */
#define SESSION_MAX_IGNORED 8

typedef enum session_command {
    SESSION_GENERATE,
    SESSION_DECIDE,
    SESSION_CANCEL,
    SESSION_CLOSE,
    SESSION_REFUSED,     /* a line refused: its answer is the message, in its turn */
} session_command;

typedef struct session_text {
    char *data;          /* NUL-terminated copy */
    size_t length;
} session_text;

/* One message of a generate's "messages" (an extension of the contract:
 * an OpenAI-style conversation rendered with the model's template). */
typedef struct session_request_message {
    const char *role;        /* "system", "user", "assistant" or "tool" (static) */
    session_text content;    /* a string, or the text parts joined */
} session_request_message;

typedef struct session_request {
    session_command command;
    int64_t id;              /* 0 when not given */
    bool has_id;
    /* generate: prompt, or messages */
    session_text prompt;
    session_request_message *messages;
    int32_t n_messages;
    bool has_n_predict, has_think, has_clear_kv;
    int32_t n_predict;       /* >= 1, or -1: until another stop */
    bool think, clear_kv;
    /* the answer held to one JSON value of a schema (its JSON text; "{}"
     * too) or to a word of a GBNF grammar; both empty: free */
    session_text json_schema, grammar;
    /* decide */
    session_text prefix, suffix;
    session_text *choices;
    int32_t n_choices;
    bool reuse_prefix;       /* default true */
    /* refused */
    session_text message;
    /* keys ignored (names, at most SESSION_MAX_IGNORED kept) */
    char *ignored[SESSION_MAX_IGNORED];
    int32_t n_ignored;
} session_request;

/* Parses one line. Returns 0 with request filled (release it with
 * session_request_free); 1 when the line is to be ignored (no "cmd", or a
 * command bmoe does not know), with the reason in message; or -1 with a
 * one-line message and *id set to the line's id when it had a valid one
 * (else 0). */
int session_request_parse(const char *line, size_t length, session_request *request, int64_t *id, char *message,
                          size_t message_size);
void session_request_free(session_request *request);
/* A refusal to answer in turn: id, and a copy of message. 0 or -1 (out of
 * memory). */
int session_request_refusal(session_request *request, int64_t id, const char *message);

#endif
