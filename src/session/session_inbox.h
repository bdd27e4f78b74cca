/* What the reader thread hands the main loop: at most one request waiting
 * or running at a time (a second generate or decide is refused, so what the
 * client sends never queues up), the cancel flag the context's abort
 * callback reads, and the close request (a close line or EOF: the session
 * ends once the request in flight is answered; a stop: it is cancelled
 * first). */
#ifndef BMOE_SESSION_INBOX_H
#define BMOE_SESSION_INBOX_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "session_request.h"

typedef struct session_inbox {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    session_request pending;
    bool has_pending;
    bool busy;            /* a request accepted and not answered yet */
    int64_t busy_id;
    bool closing;
    bool stopped;         /* the application stopped the session: it ends as failed */
    atomic_bool cancel;
} session_inbox;

int session_inbox_init(session_inbox *inbox);
void session_inbox_destroy(session_inbox *inbox);
/* A generate or decide: 0 when accepted (the inbox owns it now; the cancel
 * flag is cleared), 1 when another is in flight (*running_id says which;
 * the request stays the caller's). */
int session_inbox_offer(session_inbox *inbox, session_request *request, int64_t *running_id);
/* Sets the cancel flag when a request is in flight; false when none is. */
bool session_inbox_cancel(session_inbox *inbox);
void session_inbox_close(session_inbox *inbox);
/* Ends the session at once: cancels the request in flight, drops one not
 * taken yet and closes the inbox; session_inbox_stopped says so after. */
void session_inbox_stop(session_inbox *inbox);
bool session_inbox_stopped(session_inbox *inbox);
/* Waits for the next request: true with it moved into *request, false when
 * the session is closing. */
bool session_inbox_take(session_inbox *inbox, session_request *request);
/* The request taken was answered: another may be accepted. */
void session_inbox_done(session_inbox *inbox);
/* The context's abort callback (user: the inbox). */
bool session_inbox_cancelled(void *inbox);

#endif
