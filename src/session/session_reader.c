/* The reader thread (session_reader.h). */
#include "session_reader.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One read from the input. */
#define SESSION_READ_BYTES 65536

/* A refusal answered at once (the queue is full: it cannot wait its turn). */
static void refuse_now(session_reader *reader, int64_t id, const char *message)
{
    session_format_error(&reader->reply, id, false, message);
    if (session_output_write(reader->output, &reader->reply) != 0)
        session_inbox_close(reader->inbox); /* the client is gone */
}

/* Queues request; past the queue's bound it is refused at once. */
static void queue(session_reader *reader, session_request *request)
{
    if (session_inbox_offer(reader->inbox, request) == 0)
        return;
    char message[160];
    snprintf(message, sizeof message,
             "%d requests are waiting already: this one is not queued (wait for answers, or cancel)",
             SESSION_QUEUE_MAX);
    refuse_now(reader, request->id, message);
}

/* A line that cannot be taken, answered in its turn. */
static void refuse(session_reader *reader, int64_t id, const char *message)
{
    session_request refusal;
    if (session_request_refusal(&refusal, id, message) != 0) {
        refuse_now(reader, id, "out of memory");
        return;
    }
    queue(reader, &refusal);
    session_request_free(&refusal);
}

static void note(session_reader *reader, const char *message)
{
    if (reader->log) {
        fprintf(reader->log, "session: %s\n", message);
        fflush(reader->log);
    }
}

/* Notes each ignored key name once per session. */
static void note_ignored(session_reader *reader, const session_request *request)
{
    for (int32_t i = 0; i < request->n_ignored; i++) {
        bool seen = false;
        for (int k = 0; k < reader->n_noted && !seen; k++)
            seen = strcmp(reader->noted[k], request->ignored[i]) == 0;
        if (seen)
            continue;
        char message[160];
        snprintf(message, sizeof message, "key \"%s\" is ignored (bmoe does not know it)", request->ignored[i]);
        note(reader, message);
        if (reader->n_noted < (int)(sizeof reader->noted / sizeof reader->noted[0]))
            reader->noted[reader->n_noted++] = strdup(request->ignored[i]);
    }
}

static bool blank(const char *line, size_t length)
{
    for (size_t i = 0; i < length; i++)
        if (line[i] != ' ' && line[i] != '\t' && line[i] != '\r')
            return false;
    return true;
}

/* One line: false stops reading (close). */
static bool on_line(void *user, const char *line, size_t length, bool overlong)
{
    session_reader *reader = user;
    char message[512];
    if (overlong) {
        snprintf(message, sizeof message, "a request line of %zu bytes or more is longer than the limit (%zu bytes)",
                 length, reader->lines.max_line);
        refuse(reader, 0, message);
        return true;
    }
    if (blank(line, length))
        return true;
    session_request request;
    int64_t id = 0;
    int parsed = session_request_parse(line, length, &request, &id, message, sizeof message);
    if (parsed < 0) {
        refuse(reader, id, message);
        return true;
    }
    if (parsed > 0) {
        note(reader, message);
        return true;
    }
    note_ignored(reader, &request);
    switch (request.command) {
    case SESSION_CANCEL:
        if (!session_inbox_cancel(reader->inbox, request.has_id, request.id))
            note(reader, request.has_id ? "cancel: no request with that id is running or waiting"
                                        : "cancel: nothing is running");
        break;
    case SESSION_CLOSE:
        session_request_free(&request);
        session_inbox_close(reader->inbox);
        return false;
    default:
        queue(reader, &request);
        break;
    }
    session_request_free(&request);
    return true;
}

static void *reader_main(void *user)
{
    session_reader *reader = user;
    static const size_t chunk = SESSION_READ_BYTES;
    char buffer[SESSION_READ_BYTES];
    struct pollfd waits[3] = {{reader->fd, POLLIN, 0}, {reader->wake[0], POLLIN, 0}, {reader->stop, POLLIN, 0}};
    for (;;) {
        int ready = poll(waits, reader->stop >= 0 ? 3 : 2, -1);
        if (ready < 0 && errno == EINTR)
            continue;
        if (ready > 0 && reader->stop >= 0 && (waits[2].revents & (POLLIN | POLLHUP | POLLERR))) {
            session_inbox_stop(reader->inbox);
            break;
        }
        if (ready < 0 || (waits[1].revents & (POLLIN | POLLHUP | POLLERR)))
            break;
        ssize_t got = read(reader->fd, buffer, chunk);
        if (got < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (got <= 0) {
            session_line_finish(&reader->lines, on_line, reader);
            break; /* EOF (or a read error): the same as close */
        }
        if (!session_line_feed(&reader->lines, buffer, (size_t)got, on_line, reader))
            break;
    }
    session_inbox_close(reader->inbox);
    return NULL;
}

int session_reader_start(session_reader *reader, int fd, int stop, size_t max_line, session_inbox *inbox,
                         session_output *output, FILE *log)
{
    memset(reader, 0, sizeof *reader);
    reader->fd = fd;
    reader->stop = stop;
    reader->log = log;
    reader->inbox = inbox;
    reader->output = output;
    reader->wake[0] = reader->wake[1] = -1;
    session_line_init(&reader->lines, max_line);
    tm_buffer_init(&reader->reply);
    if (pipe(reader->wake) != 0)
        return -1;
    int status = pthread_create(&reader->thread, NULL, reader_main, reader);
    if (status != 0) {
        errno = status;
        return -1;
    }
    reader->started = true;
    return 0;
}

void session_reader_stop(session_reader *reader)
{
    if (reader->started) {
        char wake = 1;
        while (write(reader->wake[1], &wake, 1) < 0 && errno == EINTR) {
        }
        pthread_join(reader->thread, NULL);
        reader->started = false;
    }
    for (int i = 0; i < 2; i++)
        if (reader->wake[i] >= 0)
            close(reader->wake[i]);
    reader->wake[0] = reader->wake[1] = -1;
    session_line_free(&reader->lines);
    tm_buffer_free(&reader->reply);
    for (int k = 0; k < reader->n_noted; k++)
        free(reader->noted[k]);
    reader->n_noted = 0;
}
