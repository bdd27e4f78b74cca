/* One telemetry output file, written safely through the library's
 * bmoe_output (a temporary beside the path, renamed over it on commit; a
 * discarded or failed sink leaves the path as it was). The first write
 * error is kept: later writes do nothing and commit reports it. */
#ifndef BMOE_TM_SINK_H
#define BMOE_TM_SINK_H

#include <stdbool.h>

#include "bmoe.h"
#include "tm_buffer.h"

typedef struct tm_sink {
    bmoe_output *output;
    const char *path;       /* borrowed: the caller's string */
    bool failed;
    bmoe_error error;       /* why, when failed */
} tm_sink;

/* Opens path (refused: a device, a FIFO, a folder, a folder that cannot be
 * written). Returns 0 or -1 with error filled. */
int tm_sink_open(tm_sink *sink, const char *path, bmoe_error *error);
/* Writes the buffer's bytes and clears it. Returns 0 or -1 (the sink failed;
 * an out-of-memory buffer fails it too). */
int tm_sink_write(tm_sink *sink, tm_buffer *buffer);
/* Publishes the file. Returns 0 or -1 with error filled (the path keeps its
 * old content); the sink is closed either way. */
int tm_sink_commit(tm_sink *sink, bmoe_error *error);
/* Closes without publishing (an unopened or closed sink is ignored). */
void tm_sink_discard(tm_sink *sink);

#endif
