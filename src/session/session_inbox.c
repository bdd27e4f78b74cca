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
    for (int i = 0; i < inbox->count; i++)
        session_request_free(&inbox->waiting[(inbox->first + i) % SESSION_QUEUE_MAX]);
    inbox->count = 0;
    pthread_cond_destroy(&inbox->changed);
    pthread_mutex_destroy(&inbox->lock);
}

int session_inbox_offer(session_inbox *inbox, session_request *request)
{
    pthread_mutex_lock(&inbox->lock);
    if (inbox->count == SESSION_QUEUE_MAX) {
        pthread_mutex_unlock(&inbox->lock);
        return 1;
    }
    int slot = (inbox->first + inbox->count) % SESSION_QUEUE_MAX;
    inbox->waiting[slot] = *request;
    inbox->dropped[slot] = false;
    memset(request, 0, sizeof *request);
    inbox->count++;
    pthread_cond_signal(&inbox->changed);
    pthread_mutex_unlock(&inbox->lock);
    return 0;
}

bool session_inbox_cancel(session_inbox *inbox, bool has_id, int64_t id)
{
    pthread_mutex_lock(&inbox->lock);
    bool found = false;
    if (inbox->running && (!has_id || (inbox->running_has_id && inbox->running_id == id))) {
        atomic_store(&inbox->cancel, true);
        found = true;
    }
    for (int i = 0; has_id && !found && i < inbox->count; i++) {
        int slot = (inbox->first + i) % SESSION_QUEUE_MAX;
        const session_request *waiting = &inbox->waiting[slot];
        if (waiting->command != SESSION_REFUSED && waiting->has_id && waiting->id == id && !inbox->dropped[slot]) {
            inbox->dropped[slot] = true;
            found = true;
        }
    }
    pthread_mutex_unlock(&inbox->lock);
    return found;
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
    if (inbox->running)
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
    while (inbox->count == 0 && !inbox->closing)
        pthread_cond_wait(&inbox->changed, &inbox->lock);
    bool taken = inbox->count > 0 && !inbox->stopped; /* a stopped session starts nothing */
    if (taken) {
        *request = inbox->waiting[inbox->first];
        memset(&inbox->waiting[inbox->first], 0, sizeof inbox->waiting[inbox->first]);
        /* a request cancelled while it waited runs with the flag set: it
         * stops at its first check and is answered as cancelled, in turn */
        atomic_store(&inbox->cancel, inbox->dropped[inbox->first]);
        inbox->first = (inbox->first + 1) % SESSION_QUEUE_MAX;
        inbox->count--;
        inbox->running = true;
        inbox->running_id = request->id;
        inbox->running_has_id = request->has_id;
    }
    pthread_mutex_unlock(&inbox->lock);
    return taken;
}

void session_inbox_done(session_inbox *inbox)
{
    pthread_mutex_lock(&inbox->lock);
    inbox->running = false;
    atomic_store(&inbox->cancel, false);
    pthread_mutex_unlock(&inbox->lock);
}

bool session_inbox_cancelled(void *inbox)
{
    return atomic_load(&((session_inbox *)inbox)->cancel);
}
