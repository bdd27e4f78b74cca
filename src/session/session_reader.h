/* The reader thread: reads the requests from the input descriptor, one
 * line at a time (session_line: a line past the limit is refused without
 * being kept), parses each (session_request), acts on cancel at once, and
 * queues generate, decide and the refusal of every line it cannot take in
 * the inbox, so that each is answered in its turn. Lines to ignore (no
 * cmd, an unknown command) and ignored keys are a note on the log (once per
 * key name). A request past the queue's bound is refused at once. A close
 * line or EOF closes the inbox and ends the thread; so does
 * session_reader_stop, which wakes it from its wait through a pipe of its
 * own, and the application's stop descriptor, which also cancels the
 * request in flight. */
#ifndef BMOE_SESSION_READER_H
#define BMOE_SESSION_READER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "session_inbox.h"
#include "session_line.h"
#include "session_output.h"
#include "tm_buffer.h"

typedef struct session_reader {
    int fd;
    int stop;                /* the application's stop descriptor; -1: none */
    int wake[2];             /* written by session_reader_stop */
    pthread_t thread;
    bool started;
    session_inbox *inbox;
    session_output *output;
    session_line_reader lines;
    tm_buffer reply;
    FILE *log;               /* notes; NULL: none */
    char *noted[64];         /* ignored key names already noted */
    int n_noted;
} session_reader;

/* Starts the thread. stop (-1: none) readable stops the inbox
 * (session_inbox_stop) and ends the thread. Returns 0 or -1 (errno says
 * why). */
int session_reader_start(session_reader *reader, int fd, int stop, size_t max_line, session_inbox *inbox,
                         session_output *output, FILE *log);
/* Ends the thread (if it still runs) and frees what it holds. */
void session_reader_stop(session_reader *reader);

#endif
