/* bmoe-analyze: shared declarations of the offline telemetry analyser. It
 * reads the files bmoe writes (the per-token --csv, --route-trace,
 * --compute-trace, --io-trace; formats in the telemetry contract) and never
 * links the engine. The pieces: table.c (the CSV reader), stats.c
 * (percentiles, the bootstrap), cache.c (LRU and Belady simulators, reuse
 * distance), svg.c (the SVG writer), one view_*.c per command, route_drop.c
 * (the route view's --drop replay), main.c. */
#ifndef BMOE_TOOLS_ANALYZE_H
#define BMOE_TOOLS_ANALYZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cache_policy.h"

/* ---- errors (main.c) ---------------------------------------------------- */

/* Prints "bmoe-analyze: MESSAGE" on stderr, escaped (text_escape_message);
 * views return -1 after it. */
void analyze_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- table.c: a CSV file as the contract writes it ----------------------- */

/* Limits with a reason: the widest contract format has 29 columns and the
 * largest trace it describes is ~8 MiB, so these only stop hostile input
 * from asking for absurd allocations. */
#define TABLE_MAX_COLUMNS 4096
#define TABLE_MAX_BYTES ((size_t)1 << 30)

/* A '#' comment line and where it sat: before the header (preamble) or after
 * row `after_rows - 1` (trailer, e.g. "# summary ..."). Text is without the
 * leading '#' and blanks. */
typedef struct {
    const char *text;
    size_t after_rows;
    int line;
} table_comment;

typedef struct {
    const char *path;
    char *data; /* the file's bytes, cut in place into NUL-terminated cells */
    table_comment *comments;
    size_t n_comments;
    size_t n_preamble; /* comments[0 .. n_preamble) came before the header */
    char **header;
    int n_columns;
    char **cells; /* n_rows x n_columns */
    int *row_line; /* source line of each row, for messages */
    size_t n_rows;
} table;

/* Reads and splits PATH; -1 with a one-line message on any problem (missing
 * file, binary data, no header, a row whose field count differs from the
 * header's). */
int table_read(table *t, const char *path);
void table_free(table *t);
/* Index of the column named NAME, or -1 (every column is optional). */
int table_column(const table *t, const char *name);
static inline const char *table_cell(const table *t, size_t row, int column)
{
    return t->cells[row * (size_t)t->n_columns + (size_t)column];
}
/* A finite number; -1 with a message naming file, line and column. */
int table_number(const table *t, size_t row, int column, double *out);
/* An integer in [min, max]; -1 with a message. */
int table_integer(const table *t, size_t row, int column, int64_t min, int64_t max, int64_t *out);
/* Value of KEY in a "key=value key=value" comment, copied into BUFFER; NULL
 * when absent. Searches the preamble only. */
const char *table_meta(const table *t, const char *key, char *buffer, size_t size);
/* Same for one comment's text. */
const char *comment_value(const char *text, const char *key, char *buffer, size_t size);

/* The file kinds of the contract, told apart by the preamble's first line
 * ("# route_trace v1", ...) or, in files without one, by their columns. */
enum table_kind { KIND_UNKNOWN, KIND_METRICS, KIND_ROUTE, KIND_IO, KIND_COMPUTE };
enum table_kind table_kind_of(const table *t);
/* -1 with a message unless T is of KIND (or could be: no preamble and the
 * required columns present). */
int table_expect_kind(const table *t, enum table_kind kind);

/* ---- stats.c -------------------------------------------------------------- */

void stats_sort(double *values, size_t n);
/* Percentile P (0..100) of SORTED values, linear between order statistics
 * (the usual "type 7" definition); NAN when n == 0. */
double stats_percentile(const double *sorted, size_t n, double p);
/* splitmix64: small, seedable, the same sequence everywhere. */
uint64_t stats_random(uint64_t *state);
/* 95 % percentile-bootstrap interval of n * scale / sum(values) (a rate such
 * as tokens per second from per-token milliseconds), resampling the values
 * with replacement RESAMPLES times from SEED. -1 on allocation failure. */
int stats_bootstrap_rate(const double *values, size_t n, double scale, int resamples, uint64_t seed,
                         double *low, double *high);

/* ---- cache.c: cache simulators over a request stream --------------------- */

/* Requests keys[0 .. n) in order; key k costs key_bytes[k] of the budget.
 * ticks[i]: the clock of request i for the frequency policy (one tick per
 * layer of a step, as the expert store counts; NULL: i + 1). */
typedef struct {
    const uint32_t *keys;
    const uint64_t *ticks;
    size_t n;
    const uint64_t *key_bytes;
    uint32_t n_keys;
} cache_trace;

#define CACHE_NEVER SIZE_MAX /* "no next use" / "no previous use" */

/* Hit counts of a cache run by one of the expert cache's policies (ops:
 * cache_policy_lru, or cache_policy_frequency with that half-life in
 * ticks), and of Belady's MIN (evict the entry whose next use is farthest),
 * holding at most CAPACITY bytes. All admit every miss that fits (demand
 * caching) and never cache an entry larger than the capacity. With variable
 * sizes MIN is the farthest-next-use heuristic, not the exact optimum.
 * NEXT_USE comes from cache_next_uses. -1 on allocation failure. */
int cache_policy_hits(const cache_trace *trace, const cache_policy_ops *ops, double half_life,
                      uint64_t capacity, uint64_t *hits);
int cache_belady_hits(const cache_trace *trace, const size_t *next_use, uint64_t capacity,
                      uint64_t *hits);
/* next_use[i]: index of the next request of keys[i], or CACHE_NEVER. */
int cache_next_uses(const cache_trace *trace, size_t *next_use);
/* Reuse distance of each request: the number of distinct other keys, and
 * their bytes, requested since the previous request of the same key
 * (UINT32_MAX / UINT64_MAX on a first use). An LRU cache of C bytes hits a
 * request exactly when bytes + its own size <= C. */
int cache_reuse_distances(const cache_trace *trace, uint32_t *entries, uint64_t *bytes);

/* ---- svg.c: standalone SVG files ------------------------------------------ */

typedef struct {
    FILE *file;
    char *path;      /* the target */
    char *temp_path; /* written first, then linked or renamed over the target */
    bool failed;
} svg;

/* A plot area: data ranges mapped onto a pixel rectangle. */
typedef struct {
    double x_min, x_max, y_min, y_max;
    double left, top, width, height;
    bool x_labels_by_caller; /* categories: no x ticks, the caller labels them */
} svg_plot;

/* -1 with a message unless DIR is an existing directory: checked before a
 * view runs, so a bad --svg fails before any report is printed. */
int svg_check_dir(const char *dir);
/* Opens DIR/NAME (DIR must exist) for writing through a temporary file
 * beside it. Refuses a target that exists and was not written by this tool.
 * -1 with a message. */
int svg_begin(svg *s, const char *dir, const char *name, int width, int height, const char *title);
/* Closes, checks every write, and publishes the file; on failure the
 * temporary is removed and the target left as it was. */
int svg_end(svg *s);
void svg_printf(svg *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void svg_text(svg *s, double x, double y, const char *anchor, int size, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
void svg_rect(svg *s, double x, double y, double width, double height, const char *fill);
void svg_line(svg *s, double x1, double y1, double x2, double y2, const char *stroke,
              double stroke_width, bool dashed);
void svg_polyline(svg *s, const svg_plot *plot, const double *x, const double *y, size_t n,
                  const char *stroke, bool markers);
double svg_x(const svg_plot *plot, double x);
double svg_y(const svg_plot *plot, double y);
/* Frame, ticks at round values, tick labels and axis titles. */
void svg_axes(svg *s, const svg_plot *plot, const char *x_title, const char *y_title);
/* A legend box at (x, y): N coloured swatches with labels. */
void svg_legend(svg *s, double x, double y, const char *const *labels, const char *const *colors,
                int n);
/* DIR/NAME for the file's stem: "a/b/qwen.route.csv" + "-reuse.svg" ->
 * "qwen.route-reuse.svg". */
void svg_name_for(const char *input_path, const char *suffix, char *buffer, size_t size);

/* ---- the views ------------------------------------------------------------- */

enum phase_filter { PHASE_DEFAULT, PHASE_DECODE, PHASE_PREFILL, PHASE_ALL };

#define ANALYZE_MAX_BUDGETS 64
#define ANALYZE_MAX_DROPS 32

typedef struct {
    const char *file;
    enum phase_filter phase;
    double budgets_mib[ANALYZE_MAX_BUDGETS];
    int n_budgets;
    const char *svg_dir;
    uint64_t seed;
    double drops[ANALYZE_MAX_DROPS]; /* route --drop thresholds, each in [0, 1] */
    int n_drops;
    const char *profile_path; /* route --profile: the expert profile to write */
    const char *model_path;   /* route -m: the model the profile is for */
} analyze_options;

/* route --profile: the use counts the expert cache's policy would hold
 * after the n requests (layer, expert) at their ticks, written as an
 * expert profile of the model at model_path (its shape and identity).
 * 0, or -1 with a message. */
int route_profile_write(const char *profile_path, const char *model_path, const int64_t *layers,
                        const int64_t *experts, const uint64_t *ticks, size_t n, double half_life);

int view_route(const analyze_options *options);
int view_io(const analyze_options *options);
int view_compute(const analyze_options *options);
int view_csv(const analyze_options *options);

/* ---- route_drop.c: the route view's --drop replay ------------------------ */

/* What one rule removes from the decode routings. */
typedef struct {
    size_t slots;
    uint64_t bytes; /* expert_bytes: flash reads no longer made */
    double mass;    /* weights */
} drop_removed;

typedef struct {
    size_t routings, slots, misses;
    uint64_t bytes; /* every decode slot's expert_bytes */
    double mass;    /* every known decode weight */
    size_t unknown_weights, unknown_routings, recorded_drops, unnormalized_routings;
    int k_min, k_max; /* slots per routing */
    bool has_phase;
    enum phase_filter phase; /* the view's --phase, which the replay does not follow */
    int n_thresholds;
    double thresholds[ANALYZE_MAX_DROPS];
    drop_removed by_threshold[ANALYZE_MAX_DROPS];
    int n_fewer; /* top-k = k_max - 1 and k_max - 2, those >= 1 */
    int fewer_k[2];
    drop_removed by_fewer[2];
} drop_replay;

/* Replays OPTIONS->drops on T's decode rows; -1 with a one-line message on
 * a missing column, a bad cell, a slot listed twice or no decode rows. */
int drop_replay_run(const table *t, const analyze_options *options, drop_replay *d);
void drop_replay_print(const drop_replay *d);

/* " VALUE" in WIDTH columns with DECIMALS; a figure without data (NaN: a
 * rate over no time, a percentile of no reads) is "-". */
void print_figure(double value, int width, int decimals);

/* Keeps rows of PHASE given the phase column (-1 = absent: every row kept). */
bool phase_keep(enum phase_filter phase, int64_t row_phase);
const char *phase_name(enum phase_filter phase);

#endif
