/* The --csv sink of the telemetry contract: a "# bmoe_metrics v2" preamble
 * of the resolved configuration and the header row, written once per file;
 * one row per generated token; a "# summary" trailer per generation. Rows
 * of later turns append to the same file (the turn column tells them
 * apart); the file is published on commit. The format functions are
 * separate from the sink so that they can be tested on their own. */
#ifndef BMOE_TM_CSV_H
#define BMOE_TM_CSV_H

#include <stdbool.h>
#include <stdint.h>

#include "bmoe.h"
#include "tm_buffer.h"
#include "tm_config.h"
#include "tm_memory.h"
#include "tm_sink.h"
#include "tm_summary.h"
#include "tm_token.h"

/* The header row, without its newline. */
extern const char tm_csv_header[];

void tm_csv_format_preamble(tm_buffer *out, const tm_config *config);
/* page_bytes: the size of a page, for majflt_mib. */
void tm_csv_format_row(tm_buffer *out, int32_t turn, const tm_token *token, const tm_memory *memory,
                       double cache_budget_mib, int64_t page_bytes);
void tm_csv_format_summary(tm_buffer *out, const tm_summary *summary);

typedef struct tm_csv {
    tm_sink sink;
    tm_buffer buffer;
    bool preamble_written;
} tm_csv;

/* Returns 0 or -1 with error filled (nothing is created at path). */
int tm_csv_open(tm_csv *csv, const char *path, bmoe_error *error);
/* The preamble and header, unless this file has them already. */
int tm_csv_begin(tm_csv *csv, const tm_config *config);
int tm_csv_row(tm_csv *csv, int32_t turn, const tm_token *token, const tm_memory *memory, double cache_budget_mib,
               int64_t page_bytes);
int tm_csv_summary(tm_csv *csv, const tm_summary *summary);
/* Publishes the file; -1 with error filled when a write failed or the
 * rename did (the path keeps what it held). */
int tm_csv_commit(tm_csv *csv, bmoe_error *error);
void tm_csv_discard(tm_csv *csv);

#endif
