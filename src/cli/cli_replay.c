/* --route-replay TRACE.csv (a benchmark switch): each decode step's expert
 * choice per layer comes from a recorded route trace (telemetry.md, route
 * trace v1) instead of the router, so a streamed run on random weights sees
 * the reuse pattern of a real model; everything else is computed normally.
 * The trace's decode steps are replayed in order from the first generated
 * token on, wrapping around past its end. A routing narrower than the
 * trace's (--n-expert-used) takes each recorded routing's first experts:
 * the trace lists them in the router's rank order. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* Columns of a route trace row, by position in the v1 header. */
enum { ROUTE_PHASE = 1, ROUTE_STEP = 2, ROUTE_LAYER = 3, ROUTE_SLOT = 4, ROUTE_EXPERT = 5 };

void cli_replay_free(cli_replay *replay)
{
    free(replay->experts);
    memset(replay, 0, sizeof *replay);
}

/* The value of key=N in a # line, or -1. */
static long header_value(const char *line, const char *key)
{
    const char *found = strstr(line, key);
    return found ? strtol(found + strlen(key), NULL, 10) : -1;
}

/* Bounds that keep a trace's table small and its indices in range: a real
 * trace has a few hundred steps of at most a few hundred layers and slots. */
#define REPLAY_MAX_STEPS (1L << 20)
#define REPLAY_MAX_LAYERS 4096L
#define REPLAY_MAX_USED 1024L
#define REPLAY_MAX_CELLS (1L << 28)

/* A data row's six fields; false when the line is not one. */
static bool parse_row(const char *line, long fields[6])
{
    if (line[0] < '0' || line[0] > '9')
        return false;
    char *cursor = (char *)line;
    for (int f = 0; f < 6; f++) {
        fields[f] = strtol(cursor, &cursor, 10);
        cursor += *cursor == ',';
    }
    return true;
}

int cli_replay_load(cli_replay *replay, const char *path)
{
    memset(replay, 0, sizeof *replay);
    char *text = NULL;
    size_t length = 0;
    if (cli_read_file(path, &text, &length) != 0)
        return -1;
    long n_layer = -1, n_used = -1;
    long first_step = -1, last_step = -1;
    long fields[6];
    /* first pass: the shape and the decode steps' span */
    long line_number = 0;
    for (char *line = text; line && *line;) {
        char *next = strchr(line, '\n');
        line_number++;
        if (line[0] == '#') {
            if (header_value(line, "n_layer=") > 0)
                n_layer = header_value(line, "n_layer=");
            if (header_value(line, "n_expert_used=") > 0)
                n_used = header_value(line, "n_expert_used=");
        } else if (parse_row(line, fields) && fields[ROUTE_PHASE] == 1) {
            if (fields[ROUTE_STEP] < 0 || fields[ROUTE_STEP] >= REPLAY_MAX_STEPS) {
                free(text);
                return cli_fail("--route-replay: %s line %ld: step %ld is outside 0..%ld", path, line_number,
                                fields[ROUTE_STEP], REPLAY_MAX_STEPS - 1);
            }
            if (first_step < 0 || fields[ROUTE_STEP] < first_step)
                first_step = fields[ROUTE_STEP];
            if (fields[ROUTE_STEP] > last_step)
                last_step = fields[ROUTE_STEP];
        }
        line = next ? next + 1 : NULL;
    }
    if (n_layer <= 0 || n_used <= 0 || first_step < 0) {
        free(text);
        return cli_fail("--route-replay: %s is not a route trace with decode steps (no n_layer, n_expert_used or "
                        "phase-1 rows)", path);
    }
    long n_steps = last_step - first_step + 1;
    if (n_layer > REPLAY_MAX_LAYERS || n_used > REPLAY_MAX_USED || n_steps * n_layer * n_used > REPLAY_MAX_CELLS) {
        free(text);
        return cli_fail("--route-replay: %s: %ld steps of %ld layers x %ld experts is more than a route trace holds",
                        path, n_steps, n_layer, n_used);
    }
    replay->n_layer = (int32_t)n_layer;
    replay->n_used = (int32_t)n_used;
    replay->n_steps = (int32_t)n_steps;
    size_t cells = (size_t)n_steps * (size_t)n_layer * (size_t)n_used;
    replay->experts = malloc(cells * sizeof *replay->experts);
    if (!replay->experts) {
        free(text);
        return cli_fail("--route-replay: out of memory for %zu routings", cells);
    }
    for (size_t i = 0; i < cells; i++)
        replay->experts[i] = -1;
    for (char *line = text; line && *line;) {
        char *next = strchr(line, '\n');
        if (parse_row(line, fields) && fields[ROUTE_PHASE] == 1 && fields[ROUTE_LAYER] >= 0 &&
            fields[ROUTE_LAYER] < n_layer && fields[ROUTE_SLOT] >= 0 && fields[ROUTE_SLOT] < n_used &&
            fields[ROUTE_EXPERT] >= 0 && fields[ROUTE_EXPERT] <= INT32_MAX)
            replay->experts[((size_t)(fields[ROUTE_STEP] - first_step) * (size_t)n_layer +
                             (size_t)fields[ROUTE_LAYER]) *
                                (size_t)n_used +
                            (size_t)fields[ROUTE_SLOT]] = (int32_t)fields[ROUTE_EXPERT];
        line = next ? next + 1 : NULL;
    }
    free(text);
    return 0;
}

bool cli_replay_route(void *user, int32_t layer, int32_t position, int32_t n_used, int32_t *experts)
{
    const cli_replay *replay = user;
    if (position < replay->first_position || layer >= replay->n_layer || n_used > replay->n_used)
        return false;
    int32_t step = (position - replay->first_position) % replay->n_steps;
    const int32_t *recorded = replay->experts + ((size_t)step * (size_t)replay->n_layer + (size_t)layer) *
                                                   (size_t)replay->n_used;
    for (int32_t k = 0; k < n_used; k++) {
        if (recorded[k] < 0)
            return false; /* a cell the trace did not record */
        experts[k] = recorded[k];
    }
    return true;
}
