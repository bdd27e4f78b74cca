/* `bmoe-analyze compute`: a --compute-trace (one row per graph node) or a
 * --compute-trace-layers file (one row per layer segment, op fixed to
 * LAYER; told apart by the op column). Reports the share of traced wall time
 * by op and by layer, and where the major faults landed. A traced run is
 * slower than an untraced one, so the shares are what to read. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyze.h"

#define SEGMENT_PRE INT64_MIN  /* the embedding lookup before layer 0 */
#define SEGMENT_POST INT64_MAX /* the last layer's tail, final norm, LM head */

typedef struct {
    const char *op;
    int64_t segment;
    double wall_ns;
    int64_t faults;
    size_t row;
} node;

static int compare_by_op(const void *a, const void *b)
{
    return strcmp(((const node *)a)->op, ((const node *)b)->op);
}

static int compare_by_segment(const void *a, const void *b)
{
    int64_t x = ((const node *)a)->segment, y = ((const node *)b)->segment;
    return (x > y) - (x < y);
}

typedef struct {
    const char *op; /* for the op table */
    int64_t segment;
    size_t rows, fault_rows;
    double wall_ns, fault_wall_ns;
    int64_t faults;
} group;

/* Wall time the group's faulting rows took beyond what its rows without a
 * fault take on average: an estimate of the time the faults cost. NAN when
 * every row faulted (no baseline). */
static double fault_excess_ns(const group *g)
{
    if (g->fault_rows == 0)
        return 0;
    if (g->fault_rows == g->rows)
        return NAN;
    double baseline = (g->wall_ns - g->fault_wall_ns) / (double)(g->rows - g->fault_rows);
    return g->fault_wall_ns - baseline * (double)g->fault_rows;
}

static int compare_groups_by_wall(const void *a, const void *b)
{
    double x = ((const group *)a)->wall_ns, y = ((const group *)b)->wall_ns;
    return (x < y) - (x > y);
}

/* Groups the sorted nodes on equal keys (op, or segment). */
static size_t group_nodes(const node *nodes, size_t n, bool by_op, group *groups)
{
    size_t count = 0;
    for (size_t i = 0; i < n; i++) {
        bool same = count > 0 && (by_op ? strcmp(groups[count - 1].op, nodes[i].op) == 0
                                        : groups[count - 1].segment == nodes[i].segment);
        if (!same)
            groups[count++] = (group){.op = nodes[i].op, .segment = nodes[i].segment};
        group *g = &groups[count - 1];
        g->rows++;
        g->wall_ns += nodes[i].wall_ns;
        g->faults += nodes[i].faults;
        if (nodes[i].faults > 0) {
            g->fault_rows++;
            g->fault_wall_ns += nodes[i].wall_ns;
        }
    }
    return count;
}

/* "blk.12" -> 12, "pre", "post"; false for any other name. */
static bool segment_of_name(const char *name, int64_t *segment)
{
    if (strcmp(name, "pre") == 0) {
        *segment = SEGMENT_PRE;
        return true;
    }
    if (strcmp(name, "post") == 0) {
        *segment = SEGMENT_POST;
        return true;
    }
    if (strncmp(name, "blk.", 4) != 0)
        return false;
    char *end;
    long long layer = strtoll(name + 4, &end, 10);
    if (end == name + 4 || *end || layer < 0 || layer > INT32_MAX)
        return false;
    *segment = layer;
    return true;
}

static void segment_label(int64_t segment, char *buffer, size_t size)
{
    if (segment == SEGMENT_PRE)
        snprintf(buffer, size, "pre");
    else if (segment == SEGMENT_POST)
        snprintf(buffer, size, "post");
    else if (segment < 0)
        snprintf(buffer, size, "none");
    else
        snprintf(buffer, size, "%lld", (long long)segment);
}

static double share(double part, double whole)
{
    return whole > 0 ? 100.0 * part / whole : 0.0;
}

int view_compute(const analyze_options *options)
{
    table t;
    if (table_read(&t, options->file) != 0)
        return -1;
    int status = -1;
    node *nodes = NULL;
    group *groups = NULL;
    enum phase_filter phase = options->phase == PHASE_DEFAULT ? PHASE_ALL : options->phase;
    if (table_expect_kind(&t, KIND_COMPUTE) != 0)
        goto done;
    int c_wall = table_column(&t, "wall_ns"), c_op = table_column(&t, "op");
    int c_layer = table_column(&t, "layer"), c_name = table_column(&t, "name");
    int c_faults = table_column(&t, "majflt"), c_phase = table_column(&t, "phase");
    int c_step = table_column(&t, "step"), c_turn = table_column(&t, "turn");
    nodes = malloc((t.n_rows + 1) * sizeof *nodes);
    groups = malloc((t.n_rows + 1) * sizeof *groups);
    if (!nodes || !groups) {
        analyze_error("out of memory");
        goto done;
    }
    size_t n = 0, layer_rows = 0, decodes = 0, unnamed_segments = 0;
    int64_t previous_step = 0, previous_turn = 0, previous_phase = -2;
    for (size_t row = 0; row < t.n_rows; row++) {
        double wall;
        int64_t layer = -1, faults = 0, row_phase = -1, step = 0, turn = 0;
        if (table_number(&t, row, c_wall, &wall) != 0 ||
            (c_layer >= 0 && table_integer(&t, row, c_layer, -1, INT32_MAX, &layer) != 0) ||
            (c_faults >= 0 && table_integer(&t, row, c_faults, 0, INT64_MAX / 4, &faults) != 0) ||
            (c_phase >= 0 && table_integer(&t, row, c_phase, 0, 1, &row_phase) != 0) ||
            (c_step >= 0 && table_integer(&t, row, c_step, INT64_MIN / 2, INT64_MAX / 2, &step)) ||
            (c_turn >= 0 && table_integer(&t, row, c_turn, INT32_MIN, INT32_MAX, &turn) != 0))
            goto done;
        if (wall < 0) {
            analyze_error("%s:%d: negative wall_ns", t.path, t.row_line[row]);
            goto done;
        }
        if (!phase_keep(phase, row_phase))
            continue;
        if (c_step >= 0 &&
            (n == 0 || step != previous_step || turn != previous_turn || row_phase != previous_phase))
            decodes++;
        previous_step = step;
        previous_turn = turn;
        previous_phase = row_phase;
        node *x = &nodes[n++];
        *x = (node){.op = table_cell(&t, row, c_op), .segment = layer, .wall_ns = wall,
                    .faults = faults, .row = row};
        if (strcmp(x->op, "LAYER") == 0)
            layer_rows++;
    }
    if (n == 0) {
        analyze_error("%s: no %s rows to analyse", t.path, phase_name(phase));
        goto done;
    }
    bool layered = layer_rows == n;
    for (size_t i = 0; layered && i < n; i++) {
        int64_t segment;
        if (c_name >= 0 && segment_of_name(table_cell(&t, nodes[i].row, c_name), &segment))
            nodes[i].segment = segment;
        else
            unnamed_segments++;
    }
    double total_wall = 0;
    int64_t total_faults = 0;
    size_t faulting = 0;
    double faulting_wall = 0;
    for (size_t i = 0; i < n; i++) {
        total_wall += nodes[i].wall_ns;
        total_faults += nodes[i].faults;
        if (nodes[i].faults > 0) {
            faulting++;
            faulting_wall += nodes[i].wall_ns;
        }
    }

    printf("compute trace: %s\n", t.path);
    if (layered)
        printf("granularity: per layer segment (--compute-trace-layers: op is LAYER on every row; "
               "segments by name: pre, blk.<layer>, post)\n");
    else if (layer_rows)
        printf("granularity: mixed: %zu of %zu rows are LAYER segments, the rest graph nodes; "
               "read per node\n",
               layer_rows, n);
    else
        printf("granularity: per graph node (--compute-trace)\n");
    printf("rows: %zu (phase: %s%s)", n, phase_name(phase),
           c_phase < 0 ? "; no phase column, every row" : "");
    if (decodes)
        printf(" over %zu decodes", decodes);
    printf("; traced wall %.3f ms", total_wall * 1e-6);
    if (decodes)
        printf(" = %.3f ms per decode", total_wall * 1e-6 / (double)decodes);
    printf("; major faults %lld%s\n", (long long)total_faults,
           c_faults < 0 ? " (no majflt column)" : "");
    printf("(a traced run is slower than an untraced one: read the shares, not the absolutes)\n");

    double excess_ns = 0;
    size_t excess_unknown = 0;
    const char *worst_op = NULL;
    int64_t worst_op_faults = 0;
    if (!layered) {
        qsort(nodes, n, sizeof *nodes, compare_by_op);
        size_t count = group_nodes(nodes, n, true, groups);
        qsort(groups, count, sizeof *groups, compare_groups_by_wall);
        printf("\nby op (sorted by wall time)\n");
        printf("  %-20s %9s %12s %8s %10s %8s\n", "op", "nodes", "wall_ms", "share%", "majflt",
               "faults%");
        for (size_t i = 0; i < count; i++) {
            const group *g = &groups[i];
            printf("  %-20.40s %9zu %12.3f %8.2f %10lld %8.2f\n", g->op, g->rows,
                   g->wall_ns * 1e-6, share(g->wall_ns, total_wall), (long long)g->faults,
                   share((double)g->faults, (double)total_faults));
            double excess = fault_excess_ns(g);
            if (isfinite(excess))
                excess_ns += excess;
            else
                excess_unknown += g->fault_rows;
            if (g->faults > worst_op_faults) {
                worst_op_faults = g->faults;
                worst_op = g->op;
            }
        }
    }

    qsort(nodes, n, sizeof *nodes, compare_by_segment);
    size_t count = group_nodes(nodes, n, false, groups);
    printf("\nby layer (%s)\n", layered ? "segment" : "layer column; none = outside any layer");
    printf("  %-6s %9s %12s %8s %10s %8s\n", "layer", "rows", "wall_ms", "share%", "majflt",
           "faults%");
    int64_t worst_segment = 0, worst_segment_faults = 0;
    for (size_t i = 0; i < count; i++) {
        char label[32];
        segment_label(groups[i].segment, label, sizeof label);
        if (layered) {
            double excess = fault_excess_ns(&groups[i]);
            if (isfinite(excess))
                excess_ns += excess;
            else
                excess_unknown += groups[i].fault_rows;
        }
        if (groups[i].faults > worst_segment_faults) {
            worst_segment_faults = groups[i].faults;
            worst_segment = groups[i].segment;
        }
        printf("  %-6s %9zu %12.3f %8.2f %10lld %8.2f\n", label, groups[i].rows,
               groups[i].wall_ns * 1e-6, share(groups[i].wall_ns, total_wall),
               (long long)groups[i].faults, share((double)groups[i].faults, (double)total_faults));
    }
    if (unnamed_segments)
        printf("  (%zu segment rows had no pre/blk.<layer>/post name: keyed by their layer "
               "column)\n",
               unnamed_segments);

    printf("\nfault attribution: ");
    if (total_faults == 0) {
        printf("no major faults in the traced %s rows\n", layered ? "segment" : "node");
    } else {
        printf("%lld major faults in %zu of %zu rows (%.2f %%); those rows hold %.2f %% of the "
               "traced wall time",
               (long long)total_faults, faulting, n, share((double)faulting, (double)n),
               share(faulting_wall, total_wall));
        if (decodes)
            printf("; %.2f faults per decode", (double)total_faults / (double)decodes);
        printf("\n");
        char label[32];
        segment_label(worst_segment, label, sizeof label);
        printf("  most faults: layer %s (%.2f %%)", label,
               share((double)worst_segment_faults, (double)total_faults));
        if (worst_op)
            printf(", op %s (%.2f %%)", worst_op, share((double)worst_op_faults, (double)total_faults));
        printf("\n");
        printf("  estimated wall lost to faults: %.3f ms = %.2f %% of the traced wall (faulting "
               "rows' time minus the mean of fault-free rows of the same %s)",
               excess_ns * 1e-6, share(excess_ns, total_wall), layered ? "segment" : "op");
        if (excess_unknown)
            printf("; %zu faulting rows had no fault-free peer and are left out", excess_unknown);
        printf("\n");
    }
    status = 0;
done:
    free(nodes);
    free(groups);
    table_free(&t);
    return status;
}
