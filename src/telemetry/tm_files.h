/* The telemetry files of a run or a session, together: the --csv sink and
 * the route, io, compute and compute-layers traces. Opened before the model
 * loads (a bad path fails fast and costs nothing); the preambles are
 * written once, at the first generation (a session's later turns append
 * rows with their turn); each evaluation's trace rows are written after it;
 * every file is published at the end only when the run succeeds (a failed
 * run leaves each path as it was). The callbacks are registered only for
 * the traces that are on. */
#ifndef BMOE_TM_FILES_H
#define BMOE_TM_FILES_H

#include <stdbool.h>

#include "bmoe.h"
#include "tm_compute_trace.h"
#include "tm_config.h"
#include "tm_csv.h"
#include "tm_io_trace.h"
#include "tm_layout.h"
#include "tm_route_trace.h"

typedef struct tm_file_paths {
    const char *csv, *route_trace, *io_trace, *compute_trace, *compute_trace_layers; /* NULL: none */
} tm_file_paths;

typedef struct tm_files {
    bool csv_on, route_on, io_on, nodes_on, layers_on;
    bool begun;               /* the preambles are written */
    tm_csv csv;
    tm_route_trace route;
    tm_io_trace io;
    tm_compute_trace nodes;   /* --compute-trace */
    tm_compute_trace layers;  /* --compute-trace-layers */
} tm_files;

/* Opens each path given. Returns 0, or -1 with *flag naming the option
 * whose file could not be opened and error saying why (nothing stays open). */
int tm_files_open(tm_files *files, const tm_file_paths *paths, const char **flag, bmoe_error *error);
/* The traces that need a streamed model (route, io), dropped when it does
 * not stream: nothing is written for them. Returns which were on (bit 0:
 * route, bit 1: io), for the caller's warning. */
unsigned tm_files_drop_streamed_traces(tm_files *files);
/* Registers the callbacks of the traces that are on. */
void tm_files_context_params(tm_files *files, bmoe_context_params *params);
/* The preambles, once: config says which instruments are on (tm_files_fill_config). */
void tm_files_begin(tm_files *files, const tm_config *config, const tm_layout *layout);
/* Sets the instrument flags of config from the files that are on. */
void tm_files_fill_config(const tm_files *files, tm_config *config);
/* Before an evaluation: where its trace rows belong. */
void tm_files_stamp(tm_files *files, int32_t turn, int32_t phase, int32_t step);
/* After an evaluation: the rows it captured go to their files (a write
 * failure stays in the file's sink; the commit reports it). */
void tm_files_after_eval(tm_files *files);
/* Publishes every file. Returns 0, or -1 with *flag and error for the first
 * that failed (the others are published or discarded all the same). */
int tm_files_commit(tm_files *files, const char **flag, bmoe_error *error);
/* Discards what is not published (safe after commit). */
void tm_files_discard(tm_files *files);

#endif
