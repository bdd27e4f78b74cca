/* --route-replay TRACE.csv (a benchmark switch): each step's expert choice
 * per layer comes from a recorded route trace (telemetry.md, route trace
 * v1) instead of the router, so a streamed run on random weights sees the
 * reuse pattern of a real model; everything else is computed normally.
 * The trace's decode steps are replayed in order from the first generated
 * token on, wrapping around past its end. The prompt replays the trace's
 * own prompt (its prefill steps), aligned so both end together: the first
 * generated token follows the routing that preceded it in the recorded
 * session. A prompt longer than the trace's goes on backwards through the
 * decode steps the run will not replay, from their end, so its reads warm
 * the cache with the same text's routing, not with the very routings the
 * decode is about to ask for; a prompt routed otherwise (by the random
 * router) would fill the cache with experts the decode never asks for. A
 * routing narrower than the trace's (--n-expert-used) takes each recorded
 * routing's first experts: the trace
 * lists them in the router's rank order. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../base/hash.h"
#include "cli.h"

/* Columns of a route trace row, by position in the v1 header. */
enum { ROUTE_PHASE = 1, ROUTE_STEP = 2, ROUTE_LAYER = 3, ROUTE_SLOT = 4, ROUTE_EXPERT = 5 };
enum { PHASE_PREFILL = 0, PHASE_DECODE = 1 };

void cli_replay_free(cli_replay *replay)
{
    free(replay->experts);
    free(replay->prompt_experts);
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

/* The span of steps one phase's rows cover; first -1 when none. */
typedef struct step_span {
    long first, last;
} step_span;

/* A table of n_steps routings of every layer, -1 in every cell. */
static int32_t *routing_table(long n_steps, long n_layer, long n_used)
{
    size_t cells = (size_t)n_steps * (size_t)n_layer * (size_t)n_used;
    int32_t *table = malloc((cells ? cells : 1) * sizeof *table);
    for (size_t i = 0; table && i < cells; i++)
        table[i] = -1;
    return table;
}

int cli_replay_load(cli_replay *replay, const char *path)
{
    memset(replay, 0, sizeof *replay);
    char *text = NULL;
    size_t length = 0;
    if (cli_read_file(path, &text, &length) != 0)
        return -1;
    long n_layer = -1, n_used = -1;
    step_span spans[2] = {{-1, -1}, {-1, -1}};
    long fields[6];
    /* first pass: the shape and each phase's span of steps */
    long line_number = 0;
    for (char *line = text; line && *line;) {
        char *next = strchr(line, '\n');
        line_number++;
        if (line[0] == '#') {
            if (header_value(line, "n_layer=") > 0)
                n_layer = header_value(line, "n_layer=");
            if (header_value(line, "n_expert_used=") > 0)
                n_used = header_value(line, "n_expert_used=");
        } else if (parse_row(line, fields) &&
                   (fields[ROUTE_PHASE] == PHASE_PREFILL || fields[ROUTE_PHASE] == PHASE_DECODE)) {
            if (fields[ROUTE_STEP] < 0 || fields[ROUTE_STEP] >= REPLAY_MAX_STEPS) {
                free(text);
                return cli_fail("--route-replay: %s line %ld: step %ld is outside 0..%ld", path, line_number,
                                fields[ROUTE_STEP], REPLAY_MAX_STEPS - 1);
            }
            step_span *span = &spans[fields[ROUTE_PHASE]];
            if (span->first < 0 || fields[ROUTE_STEP] < span->first)
                span->first = fields[ROUTE_STEP];
            if (fields[ROUTE_STEP] > span->last)
                span->last = fields[ROUTE_STEP];
        }
        line = next ? next + 1 : NULL;
    }
    const step_span *prompt = &spans[PHASE_PREFILL], *decode = &spans[PHASE_DECODE];
    if (n_layer <= 0 || n_used <= 0 || decode->first < 0) {
        free(text);
        return cli_fail("--route-replay: %s is not a route trace with decode steps (no n_layer, n_expert_used or "
                        "phase-1 rows)", path);
    }
    long n_steps = decode->last - decode->first + 1;
    long n_prompt_steps = prompt->first < 0 ? 0 : prompt->last - prompt->first + 1;
    if (n_layer > REPLAY_MAX_LAYERS || n_used > REPLAY_MAX_USED ||
        (n_steps + n_prompt_steps) * n_layer * n_used > REPLAY_MAX_CELLS) {
        free(text);
        return cli_fail("--route-replay: %s: %ld steps of %ld layers x %ld experts is more than a route trace holds",
                        path, n_steps + n_prompt_steps, n_layer, n_used);
    }
    replay->n_layer = (int32_t)n_layer;
    replay->n_used = (int32_t)n_used;
    replay->n_steps = (int32_t)n_steps;
    replay->n_prompt_steps = (int32_t)n_prompt_steps;
    replay->experts = routing_table(n_steps, n_layer, n_used);
    replay->prompt_experts = routing_table(n_prompt_steps, n_layer, n_used);
    if (!replay->experts || !replay->prompt_experts) {
        free(text);
        cli_replay_free(replay);
        return cli_fail("--route-replay: out of memory for %ld steps' routings", n_steps + n_prompt_steps);
    }
    for (char *line = text; line && *line;) {
        char *next = strchr(line, '\n');
        if (parse_row(line, fields) && (fields[ROUTE_PHASE] == PHASE_PREFILL || fields[ROUTE_PHASE] == PHASE_DECODE) &&
            fields[ROUTE_LAYER] >= 0 && fields[ROUTE_LAYER] < n_layer && fields[ROUTE_SLOT] >= 0 &&
            fields[ROUTE_SLOT] < n_used && fields[ROUTE_EXPERT] >= 0 && fields[ROUTE_EXPERT] <= INT32_MAX) {
            bool prefill = fields[ROUTE_PHASE] == PHASE_PREFILL;
            int32_t *table = prefill ? replay->prompt_experts : replay->experts;
            long step = fields[ROUTE_STEP] - (prefill ? prompt->first : decode->first);
            table[((size_t)step * (size_t)n_layer + (size_t)fields[ROUTE_LAYER]) * (size_t)n_used +
                  (size_t)fields[ROUTE_SLOT]] = (int32_t)fields[ROUTE_EXPERT];
        }
        line = next ? next + 1 : NULL;
    }
    free(text);
    return 0;
}

/* The recorded routing position replays: a decode step, the trace's own
 * prompt ending where the run's does, or before it the decode steps the
 * run will not replay counted back from their end (all of them when it
 * will replay every one). */
static const int32_t *replayed_step(const cli_replay *replay, int32_t position)
{
    const int32_t *table = replay->experts;
    long step;
    if (position >= replay->first_position) {
        step = (position - replay->first_position) % replay->n_steps;
    } else {
        long into_prompt = (long)position - ((long)replay->first_position - replay->n_prompt_steps);
        if (into_prompt >= 0) {
            table = replay->prompt_experts;
            step = into_prompt;
        } else {
            long replayed = replay->n_generated < replay->n_steps ? replay->n_generated : 0;
            step = replay->n_steps - 1 - (-into_prompt - 1) % (replay->n_steps - replayed);
        }
    }
    return table + (size_t)step * (size_t)replay->n_layer * (size_t)replay->n_used;
}

bool cli_replay_route(void *user, int32_t layer, int32_t position, int32_t n_used, int32_t *experts)
{
    const cli_replay *replay = user;
    if (position < 0 || layer < 0 || layer >= replay->n_layer || n_used > replay->n_used)
        return false;
    const int32_t *recorded = replayed_step(replay, position) + (size_t)layer * (size_t)replay->n_used;
    for (int32_t k = 0; k < n_used; k++) {
        if (recorded[k] < 0)
            return false; /* a cell the trace did not record */
        experts[k] = recorded[k];
    }
    return true;
}

static bool routes_to(const int32_t *experts, int32_t n, int32_t expert)
{
    for (int32_t k = 0; k < n; k++)
        if (experts[k] == expert)
            return true;
    return false;
}

/* Each slot of the guess keeps the replayed expert with probability
 * guess_right, else takes one the step does not route to, both decided by a
 * hash of the slot's place alone (the same in every run). */
bool cli_replay_guess(void *user, int32_t layer, int32_t position, int32_t n_used, int32_t *experts)
{
    const cli_replay *replay = user;
    int32_t chosen[REPLAY_MAX_USED];
    if (!cli_replay_route(user, layer, position, n_used, chosen) || replay->n_expert < 2 * n_used)
        return false;
    for (int32_t k = 0; k < n_used; k++) {
        int32_t place[3] = {layer, position, k};
        uint64_t hash = fnv1a(FNV1A_START, place, sizeof place);
        if (hash_draw(hash) < replay->guess_right) {
            experts[k] = chosen[k];
            continue;
        }
        /* from the place's own expert on, the first the step does not route
         * to and the guess does not hold yet (there are n_used at least) */
        int32_t wrong = (int32_t)(hash % (uint64_t)replay->n_expert);
        while (routes_to(chosen, n_used, wrong) || routes_to(experts, k, wrong))
            wrong = (wrong + 1) % replay->n_expert;
        experts[k] = wrong;
    }
    return true;
}
