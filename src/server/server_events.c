/* GET /api/events: every generated token's figures, whoever asked for the
 * token, as server-sent events for dashboards. Generations publish into a
 * ring of the last SERVER_EVENTS events under the server's lock; each
 * listener follows the ring from where it joined (one that falls a whole
 * ring behind skips to the oldest kept), with a comment line when idle so
 * a dead peer is found, and ends when the server stops. */
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "server.h"

/* Seconds between keep-alive comments on an idle listener, at most: half
 * of --timeout when that is shorter, so the daemon never finds the
 * listener silent. */
#define SERVER_EVENTS_IDLE_SECONDS 10

void server_step_figures(cJSON *parent, const bmoe_step *step)
{
    const bmoe_stats *t = &step->stats;
    cJSON *figures = cJSON_AddObjectToObject(parent, "bmoe");
    cJSON_AddNumberToObject(figures, "token", step->index);
    cJSON_AddNumberToObject(figures, "wall_ms", t->wall_ms);
    cJSON_AddNumberToObject(figures, "io_ms", t->io_ms);
    cJSON_AddNumberToObject(figures, "stall_ms", t->stall_ms);
    cJSON_AddNumberToObject(figures, "mgmt_ms", t->mgmt_ms);
    cJSON_AddNumberToObject(figures, "read_mib", (double)t->read_bytes / 1048576.0);
    cJSON_AddNumberToObject(figures, "cache_hits", (double)t->cache_hits);
    cJSON_AddNumberToObject(figures, "cache_misses", (double)t->cache_misses);
}

void server_publish_step(server *s, const bmoe_step *step)
{
    cJSON *root = cJSON_CreateObject();
    server_step_figures(root, step);
    char *json = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(root, "bmoe"));
    cJSON_Delete(root);
    if (!json)
        return; /* out of memory: a dashboard misses one token */
    pthread_mutex_lock(&s->lock);
    char **slot = &s->events[s->events_next % SERVER_EVENTS];
    free(*slot);
    *slot = json;
    s->events_next++;
    pthread_cond_broadcast(&s->events_changed);
    pthread_mutex_unlock(&s->lock);
}

void server_events_free(server *s)
{
    for (size_t i = 0; i < SERVER_EVENTS; i++)
        free(s->events[i]);
}

typedef struct listener {
    server *s;
    uint64_t seen;
    char *pending;
    size_t length, sent;
} listener;

/* The next event (or a keep-alive comment) into pending. 0, 1 at the
 * server's stop, -1 out of memory. */
static int listener_next(listener *l)
{
    server *s = l->s;
    pthread_mutex_lock(&s->lock);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    int idle = s->config->timeout / 2;
    until.tv_sec += idle < 1 ? 1 : idle > SERVER_EVENTS_IDLE_SECONDS ? SERVER_EVENTS_IDLE_SECONDS : idle;
    int waited = 0;
    while (l->seen == s->events_next && !atomic_load(&s->stopping) && waited == 0)
        waited = pthread_cond_timedwait(&s->events_changed, &s->lock, &until);
    if (atomic_load(&s->stopping)) {
        pthread_mutex_unlock(&s->lock);
        return 1;
    }
    char *text;
    if (l->seen == s->events_next) {
        text = strdup(": idle\n\n");
    } else {
        if (s->events_next - l->seen > SERVER_EVENTS)
            l->seen = s->events_next - SERVER_EVENTS;
        const char *event = s->events[l->seen % SERVER_EVENTS];
        size_t size = strlen(event) + 9;
        text = malloc(size);
        if (text)
            snprintf(text, size, "data: %s\n\n", event);
        l->seen++;
    }
    pthread_mutex_unlock(&s->lock);
    if (!text)
        return -1;
    free(l->pending);
    l->pending = text;
    l->length = strlen(text);
    l->sent = 0;
    return 0;
}

static ssize_t listener_read(void *user, uint64_t position, char *buffer, size_t max)
{
    (void)position;
    listener *l = user;
    if (l->sent == l->length) {
        int status = listener_next(l);
        if (status != 0)
            return status > 0 ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t n = l->length - l->sent < max ? l->length - l->sent : max;
    memcpy(buffer, l->pending + l->sent, n);
    l->sent += n;
    return (ssize_t)n;
}

static void listener_free(void *user)
{
    listener *l = user;
    free(l->pending);
    free(l);
}

void server_events_reply(server *s, server_reply *reply)
{
    listener *l = calloc(1, sizeof *l);
    if (!l) {
        server_error_reply(reply, 500, "server_error", NULL, NULL, "out of memory");
        return;
    }
    l->s = s;
    pthread_mutex_lock(&s->lock);
    l->seen = s->events_next;
    pthread_mutex_unlock(&s->lock);
    reply->stream = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, listener_read, l, listener_free);
    if (!reply->stream) {
        listener_free(l);
        server_error_reply(reply, 500, "server_error", NULL, NULL, "out of memory");
        return;
    }
    reply->status = 200;
}
