/* `bmoe-analyze route --drop F[,F...]`: bmoe's cache-aware dropping
 * (--drop-cold-experts F) replayed on a route trace's decode routings, next
 * to what a lower --n-expert-used would remove from the same routings.
 *
 * A routing is one (turn, step, layer) group of decode rows; k is its slot
 * count. A slot is dropped iff its residency was a miss, its weight is below
 * F x the routing's total weight / k (F/k of normalized weights: the
 * engine's rule, route_levers.h), and it is not the routing's top-weighted
 * slot. A routing with an unknown (nan) weight has no known total: there
 * the threshold is F/k. The recorded
 * residency stands: a run that really drops never caches what it skips, so
 * its later misses differ, and the replay is the first-order estimate the
 * trace can give, not a simulation of that run. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyze.h"

#define MIB 1048576.0

typedef struct {
    int64_t turn, step, layer, slot, residency, bytes, dropped;
    double weight; /* NAN: unknown */
    size_t row;
} drop_slot;

/* (turn, step, layer, slot): groups each routing together, slots in order. */
static int compare_positions(const void *a, const void *b)
{
    const drop_slot *x = a, *y = b;
    if (x->turn != y->turn)
        return x->turn < y->turn ? -1 : 1;
    if (x->step != y->step)
        return x->step < y->step ? -1 : 1;
    if (x->layer != y->layer)
        return x->layer < y->layer ? -1 : 1;
    return (x->slot > y->slot) - (x->slot < y->slot);
}

/* Within one routing: heaviest first, the lower slot first on a tie (the
 * engine's choice of the top), unknown weights last since no rank can be
 * claimed for them. Slots are unique in a routing, so the order is total. */
static int compare_by_weight(const void *a, const void *b)
{
    const drop_slot *x = a, *y = b;
    bool x_known = !isnan(x->weight), y_known = !isnan(y->weight);
    if (x_known != y_known)
        return x_known ? -1 : 1;
    if (x_known && x->weight != y->weight)
        return x->weight > y->weight ? -1 : 1;
    return (x->slot > y->slot) - (x->slot < y->slot);
}

static bool same_routing(const drop_slot *a, const drop_slot *b)
{
    return a->turn == b->turn && a->step == b->step && a->layer == b->layer;
}

/* A weight is a finite non-negative number, or nan for "unknown" as the
 * contract writes it when the graph exposed no weight node. */
static int read_weight(const table *t, size_t row, int column, double *out)
{
    const char *text = table_cell(t, row, column);
    char *end;
    errno = 0;
    double value = strtod(text, &end);
    if (!*text || *end || isinf(value) || (!isnan(value) && value < 0)) {
        analyze_error("%s:%d: column '%s': '%.40s' is not a routing weight (a number >= 0, or "
                      "nan)",
                      t->path, t->row_line[row], t->header[column], text);
        return -1;
    }
    *out = isnan(value) ? NAN : value;
    return 0;
}

static void removed_add(drop_removed *removed, const drop_slot *s)
{
    removed->slots++;
    removed->bytes += (uint64_t)s->bytes;
    removed->mass += s->weight;
}

/* Applies every rule to the routing in slots[0 .. n), which is sorted by
 * compare_by_weight. */
static void replay_routing(drop_replay *d, const drop_slot *slots, size_t n)
{
    bool all_known = !isnan(slots[n - 1].weight);
    double total = 0, share = 0; /* share: the total the threshold is a part of (1 when unknown) */
    for (size_t i = 0; i < n; i++)
        share += slots[i].weight;
    if (!all_known)
        share = 1.0;
    for (size_t i = 0; i < n; i++) {
        const drop_slot *s = &slots[i];
        d->slots++;
        d->bytes += (uint64_t)s->bytes;
        d->misses += s->residency == 0;
        d->recorded_drops += s->dropped != 0;
        if (isnan(s->weight)) {
            d->unknown_weights++;
            continue;
        }
        d->mass += s->weight;
        total += s->weight;
        /* slots[0] is the top-weighted slot, never dropped. */
        for (int f = 0; i > 0 && f < d->n_thresholds; f++)
            if (s->residency == 0 && s->weight < d->thresholds[f] * share / (double)n)
                removed_add(&d->by_threshold[f], s);
        /* A lower top-k keeps each routing's k' heaviest slots; with an
         * unknown weight in the routing its ranks are unknown, so nothing is
         * claimed removed from it. */
        for (int j = 0; all_known && j < d->n_fewer; j++)
            if (i >= (size_t)d->fewer_k[j])
                removed_add(&d->by_fewer[j], s);
    }
    d->routings++;
    d->unknown_routings += !all_known;
    if (all_known && fabs(total - 1.0) > 1e-3)
        d->unnormalized_routings++;
}

int drop_replay_run(const table *t, const analyze_options *options, drop_replay *d)
{
    memset(d, 0, sizeof *d);
    d->n_thresholds = options->n_drops;
    memcpy(d->thresholds, options->drops, sizeof d->thresholds);
    static const char *const needed[] = {"step", "slot", "weight", "residency", "expert_bytes"};
    for (size_t i = 0; i < sizeof needed / sizeof needed[0]; i++)
        if (table_column(t, needed[i]) < 0) {
            analyze_error("%s: no '%s' column, which the --drop replay needs", t->path, needed[i]);
            return -1;
        }
    int c_turn = table_column(t, "turn"), c_phase = table_column(t, "phase");
    int c_step = table_column(t, "step"), c_layer = table_column(t, "layer");
    int c_slot = table_column(t, "slot"), c_weight = table_column(t, "weight");
    int c_residency = table_column(t, "residency"), c_bytes = table_column(t, "expert_bytes");
    int c_dropped = table_column(t, "dropped");
    d->has_phase = c_phase >= 0;
    d->phase = options->phase;

    drop_slot *slots = malloc((t->n_rows + 1) * sizeof *slots);
    if (!slots) {
        analyze_error("out of memory");
        return -1;
    }
    size_t n = 0;
    int status = -1;
    for (size_t row = 0; row < t->n_rows; row++) {
        drop_slot s = {.row = row};
        int64_t phase = 1;
        if (c_phase >= 0 && table_integer(t, row, c_phase, 0, 1, &phase) != 0)
            goto done;
        if (phase != 1)
            continue;
        if ((c_turn >= 0 && table_integer(t, row, c_turn, INT32_MIN, INT32_MAX, &s.turn) != 0) ||
            table_integer(t, row, c_step, INT64_MIN / 2, INT64_MAX / 2, &s.step) != 0 ||
            table_integer(t, row, c_layer, 0, INT32_MAX, &s.layer) != 0 ||
            table_integer(t, row, c_slot, 0, INT32_MAX, &s.slot) != 0 ||
            table_integer(t, row, c_residency, 0, 2, &s.residency) != 0 ||
            table_integer(t, row, c_bytes, 0, INT64_MAX / 4, &s.bytes) != 0 ||
            (c_dropped >= 0 && table_integer(t, row, c_dropped, 0, 1, &s.dropped) != 0) ||
            read_weight(t, row, c_weight, &s.weight) != 0)
            goto done;
        slots[n++] = s;
    }
    if (n == 0) {
        analyze_error("%s: no decode rows to replay --drop on", t->path);
        goto done;
    }
    qsort(slots, n, sizeof *slots, compare_positions);
    /* k is a routing's slot count, so a slot listed twice would change the
     * threshold of every slot in its routing. */
    for (size_t i = 1; i < n; i++)
        if (compare_positions(&slots[i - 1], &slots[i]) == 0) {
            const drop_slot *s = &slots[i];
            size_t first = slots[i - 1].row < s->row ? slots[i - 1].row : s->row;
            size_t second = slots[i - 1].row < s->row ? s->row : slots[i - 1].row;
            analyze_error("%s:%d: turn %lld step %lld layer %lld slot %lld again (first on line "
                          "%d): a routing's slots must be distinct",
                          t->path, t->row_line[second], (long long)s->turn, (long long)s->step,
                          (long long)s->layer, (long long)s->slot, t->row_line[first]);
            goto done;
        }
    /* The comparison is against the widest routing: the model's top-k. */
    d->k_min = INT32_MAX;
    for (size_t begin = 0, end; begin < n; begin = end) {
        for (end = begin + 1; end < n && same_routing(&slots[begin], &slots[end]); end++)
            ;
        int k = (int)(end - begin < INT32_MAX ? end - begin : INT32_MAX);
        d->k_min = k < d->k_min ? k : d->k_min;
        d->k_max = k > d->k_max ? k : d->k_max;
    }
    for (int fewer = 1; fewer <= 2 && d->k_max - fewer >= 1; fewer++)
        d->fewer_k[d->n_fewer++] = d->k_max - fewer;
    for (size_t begin = 0, end; begin < n; begin = end) {
        for (end = begin + 1; end < n && same_routing(&slots[begin], &slots[end]); end++)
            ;
        qsort(&slots[begin], end - begin, sizeof *slots, compare_by_weight);
        replay_routing(d, &slots[begin], end - begin);
    }
    status = 0;
done:
    free(slots);
    return status;
}

static double share(double part, double whole)
{
    return whole > 0 ? 100.0 * part / whole : NAN;
}

static void print_removed(const char *label, const drop_replay *d, const drop_removed *removed)
{
    printf("  %-14s", label);
    print_figure(share((double)removed->bytes, (double)d->bytes), 8, 2);
    print_figure((double)removed->bytes / MIB, 11, 1);
    print_figure(share(removed->mass, d->mass), 8, 2);
    char counts[64];
    snprintf(counts, sizeof counts, "%zu/%zu", removed->slots, d->slots);
    printf(" %17s\n", counts);
}

void drop_replay_print(const drop_replay *d)
{
    printf("\ndrop replay (--drop: bmoe's --drop-cold-experts F on the recorded decode routings; "
           "a routing is one (turn, step, layer), k its slots; a slot is dropped iff it was a miss "
           "(residency 0), its weight is below F x the routing's total / k, and it is not the routing's top-weighted "
           "slot; the recorded residency stands, so the misses a dropping run would cause or "
           "avoid later are not modelled)\n");
    if (!d->has_phase)
        printf("  the file has no phase column, so every row is replayed as decode\n");
    else if (d->phase != PHASE_DEFAULT && d->phase != PHASE_DECODE)
        printf("  --phase %s is for the sections above: the engine drops in decode only unless "
               "told otherwise, so the replay is of the decode rows\n",
               phase_name(d->phase));
    if (d->k_min == d->k_max)
        printf("  decode: %zu routings of %d slots, %zu slots, %zu misses reading %.1f MiB, "
               "router mass %.3f\n",
               d->routings, d->k_max, d->slots, d->misses, (double)d->bytes / MIB, d->mass);
    else
        printf("  decode: %zu routings of %d to %d slots, %zu slots, %zu misses reading %.1f MiB, "
               "router mass %.3f; top-k below counts down from %d\n",
               d->routings, d->k_min, d->k_max, d->slots, d->misses, (double)d->bytes / MIB,
               d->mass, d->k_max);
    if (d->unknown_weights)
        printf("  %zu slots have weight nan (unknown): kept by every rule, and the top-k rows "
               "remove nothing from the %zu routings holding one\n",
               d->unknown_weights, d->unknown_routings);
    if (d->recorded_drops)
        printf("  %zu slots were dropped in the recorded run (dropped=1): never read, so their "
               "expert_bytes is 0 and the reads below are the recorded run's; otherwise replayed "
               "like any slot\n",
               d->recorded_drops);
    if (d->unnormalized_routings)
        printf("  %zu routings' weights do not sum to 1: the threshold there is F x their total / k, "
               "as the engine's\n",
               d->unnormalized_routings);
    printf("  reads%% and reads_MiB: the decode expert reads (expert_bytes) removed; mass%%: the "
           "router mass (weights) removed; top-k=K: what --n-expert-used K would remove instead, "
           "each routing's slots outside its K heaviest, read or not\n");
    printf("  %-14s %8s %11s %8s %17s\n", "rule", "reads%", "reads_MiB", "mass%", "removed/routed");
    char label[64];
    for (int f = 0; f < d->n_thresholds; f++) {
        snprintf(label, sizeof label, "F=%g", d->thresholds[f]);
        print_removed(label, d, &d->by_threshold[f]);
    }
    for (int j = 0; j < d->n_fewer; j++) {
        snprintf(label, sizeof label, "top-k=%d", d->fewer_k[j]);
        print_removed(label, d, &d->by_fewer[j]);
    }
}
