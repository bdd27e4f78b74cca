/* The conversation a session keeps between turns: its messages (copies),
 * grown by a turn's user message and answer, rolled back when a turn is
 * refused or cancelled, emptied by clear_kv. The prompt of each turn is the
 * whole conversation rendered again: through the model's template in chat
 * mode, else the texts joined (a raw continuation). Its size is bounded by
 * the turns that fit the context: a turn whose prompt does not is rolled
 * back. */
#ifndef BMOE_SESSION_CONVERSATION_H
#define BMOE_SESSION_CONVERSATION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bmoe.h"

typedef struct session_message {
    const char *role;        /* a static string */
    char *content;
    size_t content_length;
    char *reasoning;         /* NULL: none */
    size_t reasoning_length;
} session_message;

typedef struct session_conversation {
    session_message *messages;
    int32_t count, capacity;
    bmoe_chat_message *view;  /* the messages as the chat API takes them */
} session_conversation;

void session_conversation_init(session_conversation *conversation);
void session_conversation_free(session_conversation *conversation);
/* Appends a copy (reasoning may be NULL). Returns 0 or -1 (out of memory). */
int session_conversation_add(session_conversation *conversation, const char *role, const char *content,
                             size_t content_length, const char *reasoning, size_t reasoning_length);
/* Keeps the first count messages. */
void session_conversation_truncate(session_conversation *conversation, int32_t count);
/* The prompt: chat (may be NULL: the texts joined) with params. *out is
 * malloc'd and NUL-terminated. 0, or a negative bmoe_status with error. */
int session_conversation_render(session_conversation *conversation, const bmoe_chat *chat,
                                const bmoe_chat_params *params, char **out, size_t *out_length, bmoe_error *error);

#endif
