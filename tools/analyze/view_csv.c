/* `bmoe-analyze csv`: the per-token --csv. Splits each turn into warm-up and
 * steady state, then reports per phase the rate (tokens / total wall time,
 * what tok/s means in the summary) with a bootstrap 95 % interval, the
 * median / p5 / p95 of per-token tok/s, and the io / compute / stall / mgmt
 * split. Reads older CSVs (no preamble, fewer columns) and full contract
 * files (preamble, turn column, "# summary" trailers, mtp_batch groups). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyze.h"

#define MIB 1048576.0
#define WARMUP_WINDOW 3       /* tokens in the rolling median */
#define WARMUP_TOLERANCE 1.25 /* settled: rolling median wall <= 1.25 x the steady reference */
#define WARMUP_MIN_TOKENS 8   /* shorter turns are not split */
#define BOOTSTRAP_RESAMPLES 2000

/* Per-token values; NAN where the file has no such column. */
enum { WALL, IO, COMPUTE, STALL, MGMT, READ, HIT, FAULTS, CPU, N_VALUES };
static const char *const value_columns[N_VALUES] = {
    "wall_ms", "io_ms", "compute_ms", "stall_ms", "mgmt_ms", "read_bytes", "cache_hit_pct",
    "majflt", "cpu_ms"};

typedef struct {
    double v[N_VALUES];
    int64_t step, turn;
} token;

typedef struct {
    size_t begin, end; /* tokens [begin, end) of the file */
    size_t warmup_end; /* first steady token; == begin when there is no warm-up */
    double reference_wall;
    bool split;
    int64_t turn; /* the turn column's value, or the segment's number without one */
} segment;

typedef struct {
    const char *name;
    size_t begin, end;
} phase_range;

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median3(double a, double b, double c)
{
    if (a > b) {
        double swap = a;
        a = b;
        b = swap;
    }
    return c < a ? a : c > b ? b : c;
}

/* The warm-up rule (printed with the output): the steady reference is the
 * median wall_ms of the turn's second half; warm-up ends at the first token
 * t that is itself within 25 % of it and whose rolling median over tokens
 * t, t+1, t+2 is too. The median of three ignores a lone fast token inside
 * the warm-up; the second half's median ignores late spikes and any warm-up
 * that leaks past the middle of a short run. */
static int detect_warmup(const token *tokens, segment *s)
{
    size_t n = s->end - s->begin;
    s->warmup_end = s->begin;
    s->split = n >= WARMUP_MIN_TOKENS;
    if (!s->split)
        return 0;
    size_t half = n - n / 2;
    double *tail = malloc(half * sizeof *tail);
    if (!tail)
        return -1;
    for (size_t i = 0; i < half; i++)
        tail[i] = tokens[s->begin + n / 2 + i].v[WALL];
    qsort(tail, half, sizeof *tail, compare_doubles);
    s->reference_wall = stats_percentile(tail, half, 50);
    free(tail);
    s->warmup_end = s->end; /* never settled, unless a window says otherwise */
    for (size_t t = s->begin; t + WARMUP_WINDOW <= s->end; t++) {
        double limit = WARMUP_TOLERANCE * s->reference_wall;
        double m = median3(tokens[t].v[WALL], tokens[t + 1].v[WALL], tokens[t + 2].v[WALL]);
        if (tokens[t].v[WALL] <= limit && m <= limit) {
            s->warmup_end = t;
            break;
        }
    }
    return 0;
}

/* Spreads an mtp_batch group's costs (all charged to its first row) evenly
 * over its rows, so every row is one token's cost. */
static void spread_groups(token *tokens, const double *batch, size_t begin, size_t end)
{
    for (size_t i = begin; i < end;) {
        /* Clamped before the conversion: a huge value must not overflow. */
        size_t size = 1;
        if (batch[i] >= (double)(end - i))
            size = end - i;
        else if (batch[i] >= 2)
            size = (size_t)batch[i];
        for (int k = 0; k < N_VALUES; k++) {
            if (k == HIT)
                continue; /* cumulative, not a cost */
            double total = 0;
            for (size_t j = i; j < i + size; j++)
                total += tokens[j].v[k];
            for (size_t j = i; j < i + size; j++)
                tokens[j].v[k] = total / (double)size;
        }
        i += size;
    }
}

static int print_phase_rates(const token *tokens, phase_range p, uint64_t seed, bool steps_known)
{
    size_t n = p.end - p.begin;
    char range[64];
    if (n == 0) {
        printf("  %-8s %6d %-13s", p.name, 0, "-");
        for (int i = 0; i < 6; i++)
            printf(" %8s", "-");
        printf("\n");
        return 0;
    }
    if (steps_known)
        snprintf(range, sizeof range, "%lld-%lld", (long long)tokens[p.begin].step,
                 (long long)tokens[p.end - 1].step);
    else
        snprintf(range, sizeof range, "#%zu-%zu", p.begin + 1, p.end);
    double *walls = malloc(n * sizeof *walls);
    double *rates = malloc(n * sizeof *rates);
    if (!walls || !rates) {
        free(walls);
        free(rates);
        analyze_error("out of memory");
        return -1;
    }
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        walls[i] = tokens[p.begin + i].v[WALL];
        rates[i] = 1000.0 / walls[i];
        sum += walls[i];
    }
    stats_sort(rates, n);
    double low, high;
    int status = stats_bootstrap_rate(walls, n, 1000.0, BOOTSTRAP_RESAMPLES, seed, &low, &high);
    if (status == 0) {
        printf("  %-8s %6zu %-13s", p.name, n, range);
        print_figure((double)n * 1000.0 / sum, 8, 3);
        print_figure(low, 8, 3);
        print_figure(high, 8, 3);
        print_figure(stats_percentile(rates, n, 50), 8, 3);
        print_figure(stats_percentile(rates, n, 5), 8, 3);
        print_figure(stats_percentile(rates, n, 95), 8, 3);
        printf("\n");
    } else {
        analyze_error("out of memory");
    }
    free(walls);
    free(rates);
    return status;
}

static void print_phase_split(const token *tokens, phase_range p)
{
    size_t n = p.end - p.begin;
    printf("  %-8s", p.name);
    double sums[N_VALUES];
    for (int k = 0; k < N_VALUES; k++) {
        sums[k] = 0;
        for (size_t i = p.begin; i < p.end; i++)
            sums[k] += tokens[i].v[k];
    }
    static const int shown[] = {WALL, IO, COMPUTE, STALL, MGMT};
    for (size_t k = 0; k < sizeof shown / sizeof shown[0]; k++)
        print_figure(n ? sums[shown[k]] / (double)n : NAN, 10, 1);
    for (size_t k = 1; k < sizeof shown / sizeof shown[0]; k++)
        print_figure(n && sums[WALL] > 0 ? 100.0 * sums[shown[k]] / sums[WALL] : NAN, 8, 1);
    print_figure(n ? sums[READ] / (double)n / MIB : NAN, 9, 1);
    print_figure(n ? tokens[p.end - 1].v[HIT] : NAN, 7, 2);
    print_figure(n ? sums[FAULTS] / (double)n : NAN, 9, 1);
    print_figure(n && sums[WALL] > 0 ? sums[CPU] / sums[WALL] : NAN, 8, 2);
    printf("\n");
}

/* The "# summary" trailer that closes a segment, if any. */
static const table_comment *summary_after(const table *t, size_t end)
{
    for (size_t i = t->n_preamble; i < t->n_comments; i++)
        if (t->comments[i].after_rows == end && strncmp(t->comments[i].text, "summary", 7) == 0)
            return &t->comments[i];
    return NULL;
}

static void print_preamble(const table *t, bool overlap_known, bool overlap)
{
    char value[256];
    if (t->n_preamble && strncmp(t->comments[0].text, "bmoe_metrics", 12) == 0) {
        printf("format: %s preamble", t->comments[0].text);
        if (table_meta(t, "engine", value, sizeof value))
            printf(", engine=%s", value);
        if (table_meta(t, "model", value, sizeof value)) {
            const char *base = strrchr(value, '/');
            printf(", model=%s", base ? base + 1 : value);
        }
        if (table_meta(t, "cache_mb", value, sizeof value))
            printf(", cache_mb=%s", value);
        printf("\n");
    } else {
        printf("format: no bmoe_metrics preamble (an older CSV); run parameters unknown\n");
    }
    printf("columns read:");
    int missing = 0;
    for (int k = 0; k < N_VALUES; k++)
        if (table_column(t, value_columns[k]) >= 0)
            printf(" %s", value_columns[k]);
        else
            missing++;
    if (missing) {
        printf("; absent:");
        for (int k = 0; k < N_VALUES; k++)
            if (table_column(t, value_columns[k]) < 0)
                printf(" %s", value_columns[k]);
    }
    printf("\n");
    printf("flash wait: %s\n",
           !overlap_known ? "serial or unknown: io_ms is the wall time blocked on reads"
           : overlap ? "overlap: stall_ms is the wall time compute lost to reads; io_ms is lane "
                       "busy time summed over lanes and can exceed wall_ms (io% over 100)"
                     : "serial: io_ms is the wall time blocked on reads");
    static const char *const instrumented[] = {"predict_log", "prefetch_sync"};
    for (int i = 0; i < 2; i++)
        if (table_meta(t, instrumented[i], value, sizeof value) && strcmp(value, "0") != 0)
            printf("warning: %s=%s: an instrumented run, not a benchmark run\n", instrumented[i],
                   value);
    if (table_meta(t, "compute_trace_layers", value, sizeof value) && atof(value) > 0)
        printf("warning: compute_trace_layers=%s: a traced run, not a benchmark run\n", value);
    if (table_meta(t, "temp", value, sizeof value) && atof(value) > 0)
        printf("note: temp=%s: a stochastic run\n", value);
    if (table_meta(t, "spec", value, sizeof value) && strcmp(value, "off") != 0)
        printf("note: spec=%s: a verify decode's cost is spread over its mtp_batch tokens\n",
               value);
}

static int write_tokens_svg(const table *t, const token *tokens, size_t n, const segment *segments,
                            size_t n_segments, bool overlap, const char *dir)
{
    char name[512];
    svg_name_for(t->path, "-tokens.svg", name, sizeof name);
    svg s;
    if (svg_begin(&s, dir, name, 900, 460, "Per-token time: compute, flash wait, cache mgmt") != 0)
        return -1;
    bool have_io = !isnan(tokens[0].v[IO]);
    double top = 0;
    for (size_t i = 0; i < n; i++) {
        top = tokens[i].v[WALL] > top ? tokens[i].v[WALL] : top;
        if (overlap && have_io && tokens[i].v[IO] > top)
            top = tokens[i].v[IO];
    }
    svg_plot plot = {.x_min = 0.5, .x_max = (double)n + 0.5, .y_min = 0, .y_max = top * 1.05,
                     .left = 80, .top = 40, .width = 780, .height = 330};
    svg_axes(&s, &plot, "token (row of the file)", "ms");
    int wait = overlap ? STALL : IO;
    for (size_t i = 0; i < n; i++) {
        const double *v = tokens[i].v;
        double x0 = svg_x(&plot, (double)i + 0.55), x1 = svg_x(&plot, (double)i + 1.45);
        double parts[4] = {isnan(v[COMPUTE]) ? 0 : v[COMPUTE], isnan(v[wait]) ? 0 : v[wait],
                           isnan(v[MGMT]) ? 0 : v[MGMT], 0};
        parts[3] = v[WALL] - parts[0] - parts[1] - parts[2];
        static const char *const fills[4] = {"#4a7ab5", "#e8a33d", "#6aa84f", "#bbbbbb"};
        double base = 0;
        for (int k = 0; k < 4; k++) {
            double part = parts[k] > 0 ? parts[k] : 0;
            if (base + part > v[WALL])
                part = v[WALL] - base; /* the stack never exceeds the token's wall time */
            if (part <= 0)
                continue;
            double y0 = svg_y(&plot, base), y1 = svg_y(&plot, base + part);
            svg_rect(&s, x0, y1, x1 - x0, y0 - y1, fills[k]);
            base += part;
        }
    }
    if (overlap && have_io) {
        double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
        if (x && y) {
            for (size_t i = 0; i < n; i++) {
                x[i] = (double)i + 1;
                y[i] = tokens[i].v[IO];
            }
            svg_polyline(&s, &plot, x, y, n, "#8e44ad", false);
        }
        free(x);
        free(y);
    }
    for (size_t g = 0; g < n_segments; g++) {
        if (g > 0) {
            double px = svg_x(&plot, (double)segments[g].begin + 0.5);
            svg_line(&s, px, plot.top, px, plot.top + plot.height, "#000", 1, false);
        }
        if (segments[g].split && segments[g].warmup_end > segments[g].begin) {
            double px = svg_x(&plot, (double)segments[g].warmup_end + 0.5);
            svg_line(&s, px, plot.top, px, plot.top + plot.height, "#c0504d", 1.5, true);
            svg_text(&s, px + 4, plot.top + 14, "start", 11, "warm-up ends");
        }
    }
    const char *labels[] = {"compute_ms", overlap ? "stall_ms (flash wait)" : "io_ms (flash wait)",
                            "mgmt_ms", "rest of wall_ms", "io_ms (lane busy, summed)"};
    const char *colors[] = {"#4a7ab5", "#e8a33d", "#6aa84f", "#bbbbbb", "#8e44ad"};
    svg_legend(&s, plot.left + plot.width - 190, plot.top + 10, labels, colors,
               overlap && have_io ? 5 : 4);
    return svg_end(&s);
}

static int write_hit_svg(const table *t, const token *tokens, size_t n, const segment *segments,
                         size_t n_segments, const char *dir)
{
    char name[512];
    svg_name_for(t->path, "-hit.svg", name, sizeof name);
    double *x = malloc((n + 1) * sizeof *x), *y = malloc((n + 1) * sizeof *y);
    if (!x || !y) {
        free(x);
        free(y);
        analyze_error("out of memory");
        return -1;
    }
    svg s;
    int status = svg_begin(&s, dir, name, 900, 420, "Cache hit rate over time (cumulative, as "
                                                    "recorded in cache_hit_pct)");
    if (status == 0) {
        svg_plot plot = {.x_min = 0.5, .x_max = (double)n + 0.5, .y_min = 0, .y_max = 100,
                         .left = 80, .top = 40, .width = 780, .height = 300};
        svg_axes(&s, &plot, "token (row of the file)", "cache hit (%)");
        for (size_t g = 0; g < n_segments; g++) {
            /* One line per turn; -1 (no cache) is left out. */
            size_t count = 0;
            for (size_t i = segments[g].begin; i < segments[g].end; i++)
                if (tokens[i].v[HIT] >= 0) {
                    x[count] = (double)i + 1;
                    y[count++] = tokens[i].v[HIT];
                }
            svg_polyline(&s, &plot, x, y, count, "#4a7ab5", false);
            if (segments[g].split && segments[g].warmup_end > segments[g].begin) {
                double px = svg_x(&plot, (double)segments[g].warmup_end + 0.5);
                svg_line(&s, px, plot.top, px, plot.top + plot.height, "#c0504d", 1.5, true);
                svg_text(&s, px + 4, plot.top + 14, "start", 11, "warm-up ends (by wall time)");
            }
        }
        status = svg_end(&s);
    }
    free(x);
    free(y);
    return status;
}

int view_csv(const analyze_options *options)
{
    table t;
    if (table_read(&t, options->file) != 0)
        return -1;
    int status = -1;
    token *tokens = NULL;
    double *batch = NULL;
    segment *segments = NULL;
    bool *after_summary = NULL; /* rows that follow a "# summary" trailer */
    if (table_expect_kind(&t, KIND_METRICS) != 0)
        goto done;
    if (t.n_rows == 0) {
        analyze_error("%s: no token rows", t.path);
        goto done;
    }
    int columns[N_VALUES];
    for (int k = 0; k < N_VALUES; k++)
        columns[k] = table_column(&t, value_columns[k]);
    int c_step = table_column(&t, "step"), c_turn = table_column(&t, "turn");
    int c_batch = table_column(&t, "mtp_batch");
    tokens = malloc(t.n_rows * sizeof *tokens);
    batch = malloc(t.n_rows * sizeof *batch);
    segments = malloc(t.n_rows * sizeof *segments);
    after_summary = calloc(t.n_rows, sizeof *after_summary);
    if (!tokens || !batch || !segments || !after_summary) {
        analyze_error("out of memory");
        goto done;
    }
    bool any_stall = false;
    for (size_t row = 0; row < t.n_rows; row++) {
        token *x = &tokens[row];
        x->step = (int64_t)row + 1;
        x->turn = 0;
        batch[row] = 1;
        for (int k = 0; k < N_VALUES; k++) {
            x->v[k] = NAN;
            if (columns[k] >= 0 && table_number(&t, row, columns[k], &x->v[k]) != 0)
                goto done;
            if (k != HIT && x->v[k] < 0) {
                analyze_error("%s:%d: column '%s' is negative", t.path, t.row_line[row],
                              value_columns[k]);
                goto done;
            }
        }
        if (x->v[STALL] > 0)
            any_stall = true;
        if ((c_step >= 0 && table_integer(&t, row, c_step, INT64_MIN / 2, INT64_MAX / 2,
                                          &x->step) != 0) ||
            (c_turn >= 0 && table_integer(&t, row, c_turn, INT32_MIN, INT32_MAX, &x->turn) != 0) ||
            (c_batch >= 0 && table_number(&t, row, c_batch, &batch[row]) != 0))
            goto done;
    }
    /* Turns: contiguous runs of one turn value, also cut after a "# summary"
     * trailer (a session file written without a turn column). */
    for (size_t i = t.n_preamble; i < t.n_comments; i++)
        if (t.comments[i].after_rows < t.n_rows && strncmp(t.comments[i].text, "summary", 7) == 0)
            after_summary[t.comments[i].after_rows] = true;
    size_t n_segments = 0;
    for (size_t row = 0; row < t.n_rows; row++)
        if (row == 0 || tokens[row].turn != tokens[row - 1].turn || after_summary[row])
            segments[n_segments++] = (segment){.begin = row};
    for (size_t g = 0; g < n_segments; g++) {
        segments[g].end = g + 1 < n_segments ? segments[g + 1].begin : t.n_rows;
        segments[g].turn = c_turn >= 0 ? tokens[segments[g].begin].turn : (int64_t)g;
        if (c_batch >= 0)
            spread_groups(tokens, batch, segments[g].begin, segments[g].end);
        for (size_t i = segments[g].begin; i < segments[g].end; i++)
            if (!(tokens[i].v[WALL] > 0)) {
                analyze_error("%s:%d: wall_ms is 0: a token takes time (an mtp_batch group "
                              "would have covered it)",
                              t.path, t.row_line[i]);
                goto done;
            }
        if (detect_warmup(tokens, &segments[g]) != 0) {
            analyze_error("out of memory");
            goto done;
        }
    }
    char value[64];
    bool overlap_known = false, overlap = false;
    if (table_meta(&t, "overlap", value, sizeof value)) {
        overlap_known = true;
        overlap = strcmp(value, "0") != 0;
    } else if (any_stall) {
        overlap_known = overlap = true; /* stall_ms is 0 in serial mode */
    }

    printf("per-token csv: %s (%zu token rows, %zu turn%s)\n", t.path, t.n_rows, n_segments,
           n_segments == 1 ? "" : "s");
    print_preamble(&t, overlap_known, overlap);
    printf("warm-up rule: the steady reference is the median wall_ms of a turn's second half; "
           "warm-up ends at the first token t whose wall_ms and whose %d-token rolling median "
           "wall_ms (t, t+1, t+2) are both within %.0f %% of that reference; turns under %d "
           "tokens are not split\n",
           WARMUP_WINDOW, (WARMUP_TOLERANCE - 1) * 100, WARMUP_MIN_TOKENS);
    printf("rates: tok/s = tokens x 1000 / sum(wall_ms) (the summary's definition); ci95 = "
           "percentile bootstrap of it, %d resamples of the phase's tokens, seed %llu (tokens "
           "drawn independently: autocorrelation is ignored, so the interval is optimistic); "
           "median/p5/p95 = of per-token 1000 / wall_ms\n",
           BOOTSTRAP_RESAMPLES, (unsigned long long)options->seed);
    for (size_t g = 0; g < n_segments; g++) {
        segment *s = &segments[g];
        size_t n = s->end - s->begin;
        printf("\nturn %lld: %zu tokens", (long long)s->turn, n);
        if (!s->split)
            printf("; too short to split: no warm-up detection\n");
        else if (s->warmup_end == s->end)
            printf("; steady reference %.1f ms; the wall time never settled: every token is "
                   "warm-up\n",
                   s->reference_wall);
        else if (s->warmup_end == s->begin)
            printf("; steady reference %.1f ms; no warm-up: settled from the first token\n",
                   s->reference_wall);
        else
            printf("; steady reference %.1f ms; warm-up: %zu tokens, ends after step %lld\n",
                   s->reference_wall, s->warmup_end - s->begin,
                   (long long)tokens[s->warmup_end - 1].step);
        const table_comment *summary = summary_after(&t, s->end);
        if (summary) {
            char tokens_text[64], rate_text[64];
            printf("  trailer: # summary tokens=%s tok/s=%s\n",
                   comment_value(summary->text, "tokens", tokens_text, sizeof tokens_text)
                       ? tokens_text : "?",
                   comment_value(summary->text, "tok/s", rate_text, sizeof rate_text) ? rate_text
                                                                                       : "?");
        }
        phase_range phases[3] = {{"warm-up", s->begin, s->warmup_end},
                                 {"steady", s->warmup_end, s->end},
                                 {"all", s->begin, s->end}};
        printf("  %-8s %6s %-13s %8s %8s %8s %8s %8s %8s\n", "phase", "tokens", "steps", "tok/s",
               "ci95_lo", "ci95_hi", "median", "p5", "p95");
        for (int p = 0; p < 3; p++) {
            uint64_t seed = options->seed + 0x9e3779b97f4a7c15ull * (uint64_t)(3 * g + (size_t)p);
            if (print_phase_rates(tokens, phases[p], seed, c_step >= 0) != 0)
                goto done;
        }
        printf("  %-8s %10s %10s %10s %10s %10s %8s %8s %8s %8s %9s %7s %9s %8s\n", "phase",
               "wall_ms", "io_ms", "compute_ms", "stall_ms", "mgmt_ms", "io%", "compute%",
               "stall%", "mgmt%", "read_MiB", "hit%", "majflt", "cpu/wall");
        for (int p = 0; p < 3; p++)
            print_phase_split(tokens, phases[p]);
        printf("  (ms and MiB are means per token; shares are of the phase's wall time; hit%% is "
               "the cumulative cache_hit_pct at the phase's last token; cpu/wall = sum(cpu_ms) / "
               "sum(wall_ms), the threads busy on average)\n");
    }
    if (options->svg_dir) {
        if (write_tokens_svg(&t, tokens, t.n_rows, segments, n_segments, overlap,
                             options->svg_dir) != 0)
            goto done;
        if (columns[HIT] >= 0) {
            if (write_hit_svg(&t, tokens, t.n_rows, segments, n_segments, options->svg_dir) != 0)
                goto done;
        } else {
            printf("\nno cache_hit_pct column: the hit-rate plot is not written\n");
        }
    }
    status = 0;
done:
    free(tokens);
    free(batch);
    free(segments);
    free(after_summary);
    table_free(&t);
    return status;
}
