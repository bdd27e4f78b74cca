/* What the reader thread hands the main loop: the requests in arrival order
 * (generate, decide, and the refusals of lines that could not be taken, so
 * that every answer comes in its turn), at most SESSION_QUEUE_MAX waiting
 * besides the one running; the cancel flag the context's abort callback
 * reads; and the close (a close line or EOF: the session ends once the
 * queue has drained; a stop: at once, the running request cancelled). */
#ifndef BMOE_SESSION_INBOX_H
#define BMOE_SESSION_INBOX_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "session_request.h"

/* Requests that may wait behind the running one: a client pipelining a
 * file of prompts (the reference's quality runs send 15) fits with room;
 * past it the client is writing faster than any model answers. */
#define SESSION_QUEUE_MAX 64

typedef struct session_inbox {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    session_request waiting[SESSION_QUEUE_MAX]; /* a ring, oldest at first */
    bool dropped[SESSION_QUEUE_MAX];            /* cancelled by id before it ran */
    int first, count;
    bool running;         /* a request taken and not answered yet */
    int64_t running_id;
    bool running_has_id;
    bool closing;
    bool stopped;         /* the application stopped the session: it ends as failed */
    atomic_bool cancel;
} session_inbox;

int session_inbox_init(session_inbox *inbox);
void session_inbox_destroy(session_inbox *inbox);
/* Queues a request (a refusal included): 0 when accepted (the inbox owns it
 * now), 1 when SESSION_QUEUE_MAX wait already (it stays the caller's). */
int session_inbox_offer(session_inbox *inbox, session_request *request);
/* Without an id: stops the running request, leaving the queue as it is.
 * With one: that request, running or waiting (a waiting one is answered as
 * cancelled when its turn comes, without running). False when there was
 * nothing to cancel. */
bool session_inbox_cancel(session_inbox *inbox, bool has_id, int64_t id);
void session_inbox_close(session_inbox *inbox);
/* Ends the session at once: cancels the running request, drops the waiting
 * ones and closes the inbox; session_inbox_stopped says so after. */
void session_inbox_stop(session_inbox *inbox);
bool session_inbox_stopped(session_inbox *inbox);
/* Waits for the next request: true with it moved into *request (the cancel
 * flag set when it was cancelled while waiting), false once the inbox is
 * closing and empty. */
bool session_inbox_take(session_inbox *inbox, session_request *request);
/* The request taken was answered. */
void session_inbox_done(session_inbox *inbox);
/* The context's abort callback (user: the inbox). */
bool session_inbox_cancelled(void *inbox);

#endif
