/* The conversation of a session (session_conversation.h). */
#include "session_conversation.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void session_conversation_init(session_conversation *conversation)
{
    memset(conversation, 0, sizeof *conversation);
}

static void message_free(session_message *message)
{
    free(message->content);
    free(message->reasoning);
    memset(message, 0, sizeof *message);
}

void session_conversation_free(session_conversation *conversation)
{
    session_conversation_truncate(conversation, 0);
    free(conversation->messages);
    free(conversation->view);
    memset(conversation, 0, sizeof *conversation);
}

static char *copy(const char *text, size_t length)
{
    char *out = malloc(length + 1);
    if (out) {
        if (length)
            memcpy(out, text, length);
        out[length] = '\0';
    }
    return out;
}

int session_conversation_add(session_conversation *conversation, const char *role, const char *content,
                             size_t content_length, const char *reasoning, size_t reasoning_length)
{
    if (conversation->count == conversation->capacity) {
        int32_t wanted = conversation->capacity ? conversation->capacity * 2 : 8;
        session_message *bigger = realloc(conversation->messages, (size_t)wanted * sizeof *bigger);
        if (!bigger)
            return -1;
        conversation->messages = bigger;
        bmoe_chat_message *view = realloc(conversation->view, (size_t)wanted * sizeof *view);
        if (!view)
            return -1;
        conversation->view = view;
        conversation->capacity = wanted;
    }
    session_message message = {role, copy(content, content_length), content_length, NULL, 0};
    if (reasoning) {
        message.reasoning = copy(reasoning, reasoning_length);
        message.reasoning_length = reasoning_length;
    }
    if (!message.content || (reasoning && !message.reasoning)) {
        message_free(&message);
        return -1;
    }
    conversation->messages[conversation->count++] = message;
    return 0;
}

void session_conversation_truncate(session_conversation *conversation, int32_t count)
{
    while (conversation->count > count && conversation->count > 0)
        message_free(&conversation->messages[--conversation->count]);
}

int session_conversation_render(session_conversation *conversation, const bmoe_chat *chat,
                                const bmoe_chat_params *params, char **out, size_t *out_length, bmoe_error *error)
{
    *out = NULL;
    *out_length = 0;
    if (chat) {
        for (int32_t i = 0; i < conversation->count; i++) {
            const session_message *m = &conversation->messages[i];
            conversation->view[i] = (bmoe_chat_message){.role = m->role,
                                                        .content = m->content,
                                                        .content_length = m->content_length,
                                                        .reasoning = m->reasoning,
                                                        .reasoning_length = m->reasoning_length};
        }
        char *text = NULL;
        size_t length = 0;
        int status = bmoe_chat_render(chat, conversation->view, conversation->count, params, &text, &length, error);
        if (status != 0)
            return status;
        *out = copy(text, length);
        bmoe_free(text);
        if (!*out)
            goto out_of_memory;
        *out_length = length;
        return 0;
    }
    size_t total = 0;
    for (int32_t i = 0; i < conversation->count; i++)
        total += conversation->messages[i].content_length;
    char *text = malloc(total + 1);
    if (!text)
        goto out_of_memory;
    size_t used = 0;
    for (int32_t i = 0; i < conversation->count; i++) {
        memcpy(text + used, conversation->messages[i].content, conversation->messages[i].content_length);
        used += conversation->messages[i].content_length;
    }
    text[used] = '\0';
    *out = text;
    *out_length = used;
    return 0;
out_of_memory:
    if (error) {
        snprintf(error->message, sizeof error->message, "session: out of memory rendering the conversation");
        error->status = BMOE_ERR_OUT_OF_MEMORY;
    }
    return BMOE_ERR_OUT_OF_MEMORY;
}
