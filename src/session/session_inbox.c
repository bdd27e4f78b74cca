/* The hand-over between the reader thread and the main loop
 * (session_inbox.h). */
#include "session_inbox.h"

#include <string.h>

int session_inbox_init(session_inbox *inbox)
{
    memset(inbox, 0, sizeof *inbox);
    atomic_init(&inbox->cancel, false);
    if (pthread_mutex_init(&inbox->lock, NULL) != 0)
        return -1;
    if (pthread_cond_init(&inbox->changed, NULL) != 0) {
        pthread_mutex_destroy(&inbox->lock);
        return -1;
    }
    return 0;
}

void session_inbox_destroy(session_inbox *inbox)
{
    if (inbox->has_pending)
        session_request_free(&inbox->pending);
    pthread_cond_destroy(&inbox->changed);
    pthread_mutex_destroy(&inbox->lock);
}

int session_inbox_offer(session_inbox *inbox, session_request *request, int64_t *running_id)
{
    pthread_mutex_lock(&inbox->lock);
    if (inbox->busy || inbox->closing) {
        *running_id = inbox->busy ? inbox->busy_id : 0;
        pthread_mutex_unlock(&inbox->lock);
        return 1;
    }
    inbox->pending = *request;
    memset(request, 0, sizeof *request);
    inbox->has_pending = true;
    inbox->busy = true;
    inbox->busy_id = inbox->pending.id;
    atomic_store(&inbox->cancel, false);
    pthread_cond_signal(&inbox->changed);
    pthread_mutex_unlock(&inbox->lock);
    return 0;
}

bool session_inbox_cancel(session_inbox *inbox)
{
    pthread_mutex_lock(&inbox->lock);
    bool running = inbox->busy;
    if (running)
        atomic_store(&inbox->cancel, true);
    pthread_mutex_unlock(&inbox->lock);
    return running;
}

void session_inbox_close(session_inbox *inbox)
{
    pthread_mutex_lock(&inbox->lock);
    inbox->closing = true;
    pthread_cond_signal(&inbox->changed);
    pthread_mutex_unlock(&inbox->lock);
}

void session_inbox_stop(session_inbox *inbox)
{
    pthread_mutex_lock(&inbox->lock);
    inbox->stopped = true;
    inbox->closing = true;
    if (inbox->busy)
        atomic_store(&inbox->cancel, true);
    pthread_cond_signal(&inbox->changed);
    pthread_mutex_unlock(&inbox->lock);
}

bool session_inbox_stopped(session_inbox *inbox)
{
    pthread_mutex_lock(&inbox->lock);
    bool stopped = inbox->stopped;
    pthread_mutex_unlock(&inbox->lock);
    return stopped;
}

bool session_inbox_take(session_inbox *inbox, session_request *request)
{
    pthread_mutex_lock(&inbox->lock);
    while (!inbox->has_pending && !inbox->closing)
        pthread_cond_wait(&inbox->changed, &inbox->lock);
    bool taken = inbox->has_pending && !inbox->stopped; /* a stopped session starts nothing */
    if (taken) {
        *request = inbox->pending;
        memset(&inbox->pending, 0, sizeof inbox->pending);
        inbox->has_pending = false;
    }
    pthread_mutex_unlock(&inbox->lock);
    return taken;
}

void session_inbox_done(session_inbox *inbox)
{
    pthread_mutex_lock(&inbox->lock);
    inbox->busy = false;
    pthread_mutex_unlock(&inbox->lock);
}

bool session_inbox_cancelled(void *inbox)
{
    return atomic_load(&((session_inbox *)inbox)->cancel);
}
