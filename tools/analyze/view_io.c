/* `bmoe-analyze io`: an --io-trace, one row per pread the streamer issued.
 * Reports latency percentiles (all, demand, speculative), what was asked
 * for vs what the aligned window pulled (the O_DIRECT alignment waste),
 * bandwidth per lane judged against read_bytes, and speculative vs demand
 * reads. The trace has no timestamps, only each read's latency, so the
 * bandwidth here is bytes over time a read was in flight, per lane. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyze.h"

#define MIB 1048576.0
#define IO_MAX_LANES 4096 /* lanes are a handful of threads; more is not a trace */

typedef struct {
    uint64_t reads, bytes;
    double busy_ns;
} lane_total;

typedef struct {
    double *latency_us; /* one per read of the class, sorted when printed */
    size_t n;
    uint64_t requested, read;
} read_class;

static void print_latency(const char *name, read_class *c)
{
    if (c->n == 0) {
        printf("  %-8s %8d %9s %9s %9s %9s %9s\n", name, 0, "-", "-", "-", "-", "-");
        return;
    }
    stats_sort(c->latency_us, c->n);
    double sum = 0;
    for (size_t i = 0; i < c->n; i++)
        sum += c->latency_us[i];
    printf("  %-8s %8zu %9.1f %9.1f %9.1f %9.1f %9.1f\n", name, c->n, sum / (double)c->n,
           stats_percentile(c->latency_us, c->n, 50), stats_percentile(c->latency_us, c->n, 90),
           stats_percentile(c->latency_us, c->n, 99), c->latency_us[c->n - 1]);
}

int view_io(const analyze_options *options)
{
    table t;
    if (table_read(&t, options->file) != 0)
        return -1;
    int status = -1;
    double *request_sizes = NULL, *read_sizes = NULL;
    lane_total *lanes = NULL;
    read_class all = {0}, demand = {0}, spec = {0};
    enum phase_filter phase = options->phase == PHASE_DEFAULT ? PHASE_ALL : options->phase;
    if (table_expect_kind(&t, KIND_IO) != 0)
        goto done;
    int c_latency = table_column(&t, "latency_ns"), c_req = table_column(&t, "req_bytes");
    int c_read = table_column(&t, "read_bytes"), c_lane = table_column(&t, "lane");
    int c_spec = table_column(&t, "spec"), c_phase = table_column(&t, "phase");
    int c_step = table_column(&t, "step"), c_turn = table_column(&t, "turn");
    if (c_req < 0 && c_read < 0) {
        analyze_error("%s: neither a read_bytes nor a req_bytes column", t.path);
        goto done;
    }
    size_t n = t.n_rows + 1;
    all.latency_us = malloc(n * sizeof(double));
    demand.latency_us = malloc(n * sizeof(double));
    spec.latency_us = malloc(n * sizeof(double));
    request_sizes = malloc(n * sizeof *request_sizes);
    read_sizes = malloc(n * sizeof *read_sizes);
    lanes = calloc(IO_MAX_LANES, sizeof *lanes);
    if (!all.latency_us || !demand.latency_us || !spec.latency_us || !request_sizes ||
        !read_sizes || !lanes) {
        analyze_error("out of memory");
        goto done;
    }
    int max_lane = -1;
    size_t short_reads = 0, steps = 0, rows_in_phase = 0;
    int64_t previous_turn = 0, previous_step = 0, previous_phase = -2;
    for (size_t row = 0; row < t.n_rows; row++) {
        double latency;
        int64_t req = -1, got = -1, lane = 0, speculative = 0, row_phase = -1, step = 0, turn = 0;
        if (table_number(&t, row, c_latency, &latency) != 0 ||
            (c_req >= 0 && table_integer(&t, row, c_req, 0, INT64_MAX / 4, &req) != 0) ||
            (c_read >= 0 && table_integer(&t, row, c_read, 0, INT64_MAX / 4, &got) != 0) ||
            (c_lane >= 0 && table_integer(&t, row, c_lane, 0, IO_MAX_LANES - 1, &lane) != 0) ||
            (c_spec >= 0 && table_integer(&t, row, c_spec, 0, 1, &speculative) != 0) ||
            (c_phase >= 0 && table_integer(&t, row, c_phase, 0, 1, &row_phase) != 0) ||
            (c_step >= 0 && table_integer(&t, row, c_step, INT64_MIN / 2, INT64_MAX / 2, &step)) ||
            (c_turn >= 0 && table_integer(&t, row, c_turn, INT32_MIN, INT32_MAX, &turn) != 0))
            goto done;
        if (latency < 0) {
            analyze_error("%s:%d: negative latency_ns", t.path, t.row_line[row]);
            goto done;
        }
        if (!phase_keep(phase, row_phase))
            continue;
        if (req < 0)
            req = got;
        if (got < 0)
            got = req;
        if (got < req)
            short_reads++;
        if (c_step >= 0 && (rows_in_phase == 0 || step != previous_step ||
                            turn != previous_turn || row_phase != previous_phase))
            steps++;
        previous_step = step;
        previous_turn = turn;
        previous_phase = row_phase;
        read_class *c = speculative ? &spec : &demand;
        double us = latency / 1000.0;
        all.latency_us[all.n++] = us;
        c->latency_us[c->n++] = us;
        all.requested += (uint64_t)req;
        all.read += (uint64_t)got;
        c->requested += (uint64_t)req;
        c->read += (uint64_t)got;
        request_sizes[rows_in_phase] = (double)req;
        read_sizes[rows_in_phase] = (double)got;
        rows_in_phase++;
        lanes[lane].reads++;
        lanes[lane].bytes += (uint64_t)got;
        lanes[lane].busy_ns += latency;
        if (lane > max_lane)
            max_lane = (int)lane;
    }
    if (all.n == 0) {
        analyze_error("%s: no %s reads to analyse", t.path, phase_name(phase));
        goto done;
    }

    printf("io trace: %s\n", t.path);
    printf("reads: %zu (phase: %s%s)", all.n, phase_name(phase),
           c_phase < 0 ? "; no phase column, every row" : "");
    if (steps)
        printf(", over %zu decodes: %.1f reads and %.2f MiB per decode", steps,
               (double)all.n / (double)steps, all.read / MIB / (double)steps);
    printf("\n");

    printf("\nlatency (us, per read)\n");
    printf("  %-8s %8s %9s %9s %9s %9s %9s\n", "class", "reads", "mean", "p50", "p90", "p99",
           "max");
    print_latency("all", &all);
    print_latency("demand", &demand);
    print_latency("spec", &spec);

    stats_sort(request_sizes, rows_in_phase);
    stats_sort(read_sizes, rows_in_phase);
    printf("\nsizes: requested %.2f MiB, read %.2f MiB (the aligned windows); alignment waste "
           "%.2f MiB = %.2f %% of the bytes read%s\n",
           all.requested / MIB, all.read / MIB,
           all.read > all.requested ? (all.read - all.requested) / MIB : 0.0,
           all.read > all.requested ? 100.0 * (double)(all.read - all.requested) / (double)all.read
                                    : 0.0,
           c_req < 0 || c_read < 0 ? " (one of the two size columns is missing)" : "");
    printf("  per read (KiB): %-10s p50 %10.1f  p90 %10.1f  max %10.1f\n", "requested",
           stats_percentile(request_sizes, rows_in_phase, 50) / 1024,
           stats_percentile(request_sizes, rows_in_phase, 90) / 1024,
           request_sizes[rows_in_phase - 1] / 1024);
    printf("  per read (KiB): %-10s p50 %10.1f  p90 %10.1f  max %10.1f\n", "read",
           stats_percentile(read_sizes, rows_in_phase, 50) / 1024,
           stats_percentile(read_sizes, rows_in_phase, 90) / 1024,
           read_sizes[rows_in_phase - 1] / 1024);
    if (short_reads)
        printf("  warning: %zu reads pulled fewer bytes than requested\n", short_reads);

    printf("\nbandwidth per lane (bytes read / time reads were in flight on the lane)%s\n",
           c_lane < 0 ? "; no lane column, one lane assumed" : "");
    printf("  %6s %8s %10s %10s %10s %8s\n", "lane", "reads", "MiB", "busy_ms", "MiB/s", "bytes%");
    double busy_total = 0, lane_rates = 0;
    int active = 0;
    for (int lane = 0; lane <= max_lane; lane++) {
        lane_total *l = &lanes[lane];
        if (!l->reads)
            continue;
        double rate = l->busy_ns > 0 ? l->bytes / MIB / (l->busy_ns * 1e-9) : NAN;
        printf("  %6d %8llu %10.2f %10.2f", lane, (unsigned long long)l->reads, l->bytes / MIB, l->busy_ns * 1e-6);
        print_figure(rate, 10, 1);
        printf(" %8.2f\n", 100.0 * (double)l->bytes / (double)all.read);
        busy_total += l->busy_ns;
        if (isfinite(rate))
            lane_rates += rate;
        active++;
    }
    double overall = busy_total > 0 ? all.read / MIB / (busy_total * 1e-9) : NAN;
    printf("  %6s %8zu %10.2f %10.2f", "all", all.n, all.read / MIB, busy_total * 1e-6);
    print_figure(overall, 10, 1);
    printf(" %8.2f\n", 100.0);
    printf("  overall:");
    print_figure(overall, 0, 1);
    printf(" MiB/s per busy lane; %d lanes reading at once would reach at most %.1f MiB/s (the trace has no "
           "timestamps, so wall-clock throughput is not in it)\n",
           active, lane_rates);

    printf("\nspeculative vs demand%s\n", c_spec < 0 ? " (no spec column: every read is demand)" : "");
    printf("  %-8s %8s %8s %10s %8s %10s\n", "class", "reads", "reads%", "MiB", "bytes%",
           "p50_us");
    read_class *classes[] = {&demand, &spec};
    const char *names[] = {"demand", "spec"};
    for (int i = 0; i < 2; i++) {
        read_class *c = classes[i];
        printf("  %-8s %8zu %8.2f %10.2f %8.2f", names[i], c->n, 100.0 * (double)c->n / (double)all.n,
               c->read / MIB, 100.0 * (double)c->read / (double)(all.read ? all.read : 1));
        print_figure(stats_percentile(c->latency_us, c->n, 50), 10, 1);
        printf("\n");
    }
    status = 0;
done:
    free(all.latency_us);
    free(demand.latency_us);
    free(spec.latency_us);
    free(request_sizes);
    free(read_sizes);
    free(lanes);
    table_free(&t);
    return status;
}
