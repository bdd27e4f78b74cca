/* bmoe-analyze route --drop: the drop replay on hand-made traces whose
 * answer is worked out by hand below (the rule's three conditions, the
 * top-weighted slot pinned, prefill rows ignored, unknown weights kept,
 * slots the recorded run already dropped, the --n-expert-used comparison
 * and its ties), the refusals, and invariants on the real Qwen3 trace
 * checked against counts taken from the file itself. */
#include <math.h>

#include "analyze_run.h"

#define MIB 1048576.0

typedef struct {
    char label[64];
    double reads_pct, reads_mib, mass_pct;
    unsigned long long removed, routed;
} drop_row;

/* A figure the tool prints as "-" (no data) reads as NaN. */
static double figure(const char *text)
{
    return strcmp(text, "-") == 0 ? NAN : strtod(text, NULL);
}

/* Parses the drop replay's table of the last run. */
static int read_drops(drop_row *rows, int capacity)
{
    const char *line = an_line(an_out, "rule ");
    int n = 0;
    for (line = an_next_line(line); line && n < capacity; line = an_next_line(line)) {
        drop_row r;
        char reads[32], mib[32], mass[32];
        if (sscanf(line, " %63s %31s %31s %31s %llu/%llu", r.label, reads, mib, mass, &r.removed,
                   &r.routed) != 6)
            break;
        r.reads_pct = figure(reads);
        r.reads_mib = figure(mib);
        r.mass_pct = figure(mass);
        rows[n++] = r;
    }
    return n;
}

static const drop_row *find_row(const drop_row *rows, int n, const char *label)
{
    for (int i = 0; i < n; i++)
        if (strcmp(rows[i].label, label) == 0)
            return &rows[i];
    return NULL;
}

static bool near(double value, double wanted)
{
    return fabs(value - wanted) < 0.006; /* the table prints two decimals */
}

/* The row LABEL removes REMOVED of ROUTED slots, READS_PCT % of the decode
 * reads (READS_MIB MiB) and MASS_PCT % of the router mass. */
static void expect_row(const drop_row *rows, int n, const char *label, unsigned long long removed,
                       unsigned long long routed, double reads_pct, double reads_mib,
                       double mass_pct)
{
    const drop_row *r = find_row(rows, n, label);
    CHECK_MSG(r != NULL, "no row '%s' in:\n%s", label, an_out);
    if (!r)
        return;
    CHECK_MSG(r->removed == removed && r->routed == routed, "%s: %llu/%llu, wanted %llu/%llu",
              label, r->removed, r->routed, removed, routed);
    CHECK_MSG(near(r->reads_pct, reads_pct) && near(r->reads_mib, reads_mib) &&
                  near(r->mass_pct, mass_pct),
              "%s: reads %.2f %% (%.2f MiB), mass %.2f %%; wanted %.2f %% (%.2f MiB), %.2f %%",
              label, r->reads_pct, r->reads_mib, r->mass_pct, reads_pct, reads_mib, mass_pct);
}

#define HEADER "turn,phase,step,layer,slot,expert,weight,residency,expert_bytes\n"

/* Three decode routings of k = 4 (so F/k = F/4), layer 0 at 1 MiB and
 * layer 1 at 2 MiB per expert, between prefill rows that would change
 * every figure if they counted (light misses on both layers):
 *   R1 turn 0 step 10 layer 0: 0.5 miss, 0.2 hit, 0.2 miss, 0.1 miss
 *   R2 turn 0 step 9 layer 1: 0.3 miss, 0.4 hit, 0.1 hit, 0.2 miss
 *      (the top is slot 1: weights, not slots, rank)
 *   R3 turn 1 step 10 layer 0: 0.25 x 4, all misses (same step and layer
 *      as R1, and next to it in (turn, step, layer) order: only the turn
 *      keeps them apart)
 * Decode: 12 slots, 9 misses, reads 3 + 4 + 4 = 11 MiB, mass 3.
 *   F=0:   nothing.
 *   F=0.5: under 0.125: R1 slot 3 (R2 slot 2 is a hit): 1 MiB, 0.1.
 *   F=0.8: under 0.2, strictly (0.8/4 is exactly the double 0.2): the same.
 *   F=1:   under 0.25: R1 slots 2 and 3 (slot 1 is resident), R2 slot 3;
 *          R3's 0.25 are not under 0.25: 4 MiB, 0.5.
 *   top-k=3: the lightest slot of each, ties to the higher slot: R1 slot 3
 *          (1 MiB, 0.1), R2 slot 2 (hit, 0.1), R3 slot 3 (1 MiB, 0.25):
 *          2 MiB, 0.45.
 *   top-k=2: R1 slots 2 and 3 (slot 1 outranks slot 2 at 0.2: 2 MiB, 0.3),
 *          R2 slots 2 and 3 (2 MiB, 0.3), R3 slots 2 and 3 (2 MiB, 0.5):
 *          6 MiB, 1.1. */
static void test_rule(void)
{
    const char *path = an_path("rule.route.csv");
    an_write(path, "# route_trace v1\n"
                   "# model=m.gguf arch=test n_layer=2 n_expert=16 n_expert_used=4\n"
                   "# layer=0 expert_bytes=1048576 dense_bytes=0\n"
                   "# layer=1 expert_bytes=2097152 dense_bytes=0\n" HEADER
                   "0,0,3,0,0,1,0.7,0,1048576\n"
                   "0,0,3,0,1,2,0.1,0,1048576\n"
                   "0,0,3,0,2,3,0.1,0,1048576\n"
                   "0,0,3,0,3,4,0.1,0,1048576\n"
                   "0,1,10,0,3,8,0.1,0,1048576\n" /* R1, slots shuffled */
                   "0,1,10,0,0,5,0.5,0,1048576\n"
                   "0,1,10,0,2,7,0.2,0,1048576\n"
                   "0,1,10,0,1,6,0.2,1,0\n"
                   "0,0,4,1,0,1,0.7,0,2097152\n"
                   "0,0,4,1,1,2,0.1,0,2097152\n"
                   "0,0,4,1,2,3,0.1,0,2097152\n"
                   "0,0,4,1,3,4,0.1,0,2097152\n"
                   "0,1,9,1,0,9,0.3,0,2097152\n" /* R2 */
                   "0,1,9,1,1,10,0.4,1,0\n"
                   "0,1,9,1,2,11,0.1,1,0\n"
                   "0,1,9,1,3,12,0.2,0,2097152\n"
                   "1,1,10,0,0,1,0.25,0,1048576\n" /* R3 */
                   "1,1,10,0,1,2,0.25,0,1048576\n"
                   "1,1,10,0,2,3,0.25,0,1048576\n"
                   "1,1,10,0,3,4,0.25,0,1048576\n");
    CHECK_MSG(an_run("route '%s' --drop 0,0.5,0.8 --drop 1", path) == 0, "%s", an_err);
    CHECK_MSG(strstr(an_out, "decode: 3 routings of 4 slots, 12 slots, 9 misses reading 11.0 MiB, "
                             "router mass 3.000") != NULL,
              "%s", an_out);
    drop_row rows[16];
    int n = read_drops(rows, 16);
    CHECK_MSG(n == 6, "%d rows:\n%s", n, an_out);
    expect_row(rows, n, "F=0", 0, 12, 0, 0, 0);
    expect_row(rows, n, "F=0.5", 1, 12, 100.0 / 11, 1, 0.1 / 3 * 100);
    expect_row(rows, n, "F=0.8", 1, 12, 100.0 / 11, 1, 0.1 / 3 * 100);
    expect_row(rows, n, "F=1", 3, 12, 400.0 / 11, 4, 0.5 / 3 * 100);
    expect_row(rows, n, "top-k=3", 3, 12, 200.0 / 11, 2, 0.45 / 3 * 100);
    expect_row(rows, n, "top-k=2", 6, 12, 600.0 / 11, 6, 1.1 / 3 * 100);
    CHECK(find_row(rows, n, "top-k=1") == NULL); /* k-1 and k-2 only */
    /* The thresholds in the order given. */
    CHECK(n == 6 && strcmp(rows[0].label, "F=0") == 0 && strcmp(rows[3].label, "F=1") == 0);
    CHECK(strstr(an_out, "nan") == NULL && strstr(an_out, "dropped in the recorded run") == NULL);
    CHECK(strstr(an_out, "do not sum to 1") == NULL);

    /* --phase moves the sections above, not the replay; and without --drop
     * there is no replay. */
    CHECK(an_run("route '%s' --drop 1 --phase all", path) == 0);
    n = read_drops(rows, 16);
    CHECK(n == 3);
    expect_row(rows, n, "F=1", 3, 12, 400.0 / 11, 4, 0.5 / 3 * 100);
    CHECK(strstr(an_out, "--phase all is for the sections above") != NULL);
    CHECK(an_run("route '%s'", path) == 0 && strstr(an_out, "drop replay") == NULL);
}

/* Weights that do not sum to 1: the threshold is F x each routing's total
 * / k (the engine's rule), under which 1/k alone would drop every slot here;
 * k = 2, every slot a 1 MiB miss:
 *   A: 0.2, 0.1   B: 0.1, 0.3 (the top is slot 1)   C: 0.2, 0.2 (a tie:
 *   slot 0 is the top). Reads 6 MiB, mass 0.3 + 0.4 + 0.4 = 1.1.
 *   F=1 (under 0.15, 0.2, 0.2): A slot 1, B slot 0; C's 0.2 is not below
 *       0.2: 2 MiB, 0.2.
 *   F=0.3 (under 0.045, 0.06, 0.06): nothing.
 *   top-k=1 (k-2 = 0 is no top-k): A slot 1, B slot 0, C slot 1: 3 MiB, 0.4. */
static void test_top_pinned(void)
{
    const char *path = an_path("top.route.csv");
    an_write(path, "# layer=0 expert_bytes=1048576\n" HEADER
                   "0,1,1,0,0,1,0.2,0,1048576\n"
                   "0,1,1,0,1,2,0.1,0,1048576\n"
                   "0,1,2,0,0,1,0.1,0,1048576\n"
                   "0,1,2,0,1,2,0.3,0,1048576\n"
                   "0,1,3,0,0,1,0.2,0,1048576\n"
                   "0,1,3,0,1,2,0.2,0,1048576\n");
    CHECK_MSG(an_run("route '%s' --drop 1,0.3", path) == 0, "%s", an_err);
    drop_row rows[8];
    int n = read_drops(rows, 8);
    CHECK_MSG(n == 3, "%d rows:\n%s", n, an_out);
    expect_row(rows, n, "F=1", 2, 6, 100.0 / 3, 2, 0.2 / 1.1 * 100);
    expect_row(rows, n, "F=0.3", 0, 6, 0, 0, 0);
    expect_row(rows, n, "top-k=1", 3, 6, 50, 3, 0.4 / 1.1 * 100);
    CHECK(strstr(an_out, "3 routings' weights do not sum to 1") != NULL);
}

/* Unknown weights and a dropped column (the v1 header with the column
 * appended), 1 MiB per expert, k = 4:
 *   R1 step 20: 0.6 miss, nan miss, 0.2 miss dropped=1 (0 bytes), 0.1 miss
 *   R2 step 21: 0.7 miss, 0.1 miss, 0.1 hit, 0.1 miss dropped=1 (0 bytes)
 *   R3 step 22: nan x 4 (miss, miss, hit, miss)
 * Reads 3 + 2 + 3 = 8 MiB; mass 0.9 + 1.0 = 1.9 (nan counts in neither
 * share's mass); 12 slots, 10 misses.
 *   F=1 (under 0.25): R1 slots 2 (0 bytes) and 3; R2 slots 1 and 3 (0
 *       bytes); no nan slot: 2 MiB, 0.5. (A nan read as 0 would add R1
 *       slot 1 and three of R3's.)
 *   F=0.5 (under 0.125): R1 slot 3, R2 slots 1 and 3: 2 MiB, 0.3.
 *   top-k=3 / 2: nothing from R1 and R3 (weights unknown); R2's lightest,
 *       ties to the higher slot: slot 3 (0 bytes, 0.1) / slots 2 and 3 (0
 *       bytes, 0.2). */
static void test_unknown_and_recorded(void)
{
    const char *path = an_path("nan.route.csv");
    an_write(path, "# route_trace v1\n# layer=0 expert_bytes=1048576 dense_bytes=0\n"
                   "turn,phase,step,layer,slot,expert,weight,residency,expert_bytes,dropped\n"
                   "0,1,20,0,0,1,0.6,0,1048576,0\n"
                   "0,1,20,0,1,2,nan,0,1048576,0\n"
                   "0,1,20,0,2,3,0.2,0,0,1\n"
                   "0,1,20,0,3,4,0.1,0,1048576,0\n"
                   "0,1,21,0,0,1,0.7,0,1048576,0\n"
                   "0,1,21,0,1,5,0.1,0,1048576,0\n"
                   "0,1,21,0,2,6,0.1,1,0,0\n"
                   "0,1,21,0,3,7,0.1,0,0,1\n"
                   "0,1,22,0,0,1,nan,0,1048576,0\n"
                   "0,1,22,0,1,8,nan,0,1048576,0\n"
                   "0,1,22,0,2,6,nan,1,0,0\n"
                   "0,1,22,0,3,9,nan,0,1048576,0\n");
    CHECK_MSG(an_run("route '%s' --drop 0.5,1", path) == 0, "%s", an_err);
    drop_row rows[8];
    int n = read_drops(rows, 8);
    CHECK_MSG(n == 4, "%d rows:\n%s", n, an_out);
    expect_row(rows, n, "F=1", 4, 12, 25, 2, 0.5 / 1.9 * 100);
    expect_row(rows, n, "F=0.5", 3, 12, 25, 2, 0.3 / 1.9 * 100);
    expect_row(rows, n, "top-k=3", 1, 12, 0, 0, 0.1 / 1.9 * 100);
    expect_row(rows, n, "top-k=2", 2, 12, 0, 0, 0.2 / 1.9 * 100);
    CHECK_MSG(strstr(an_out, "5 slots have weight nan (unknown): kept by every rule") != NULL &&
                  strstr(an_out, "the 2 routings holding one") != NULL,
              "%s", an_out);
    CHECK(strstr(an_out, "2 slots were dropped in the recorded run") != NULL);
    CHECK(strstr(an_out, "12 slots, 10 misses reading 8.0 MiB, router mass 1.900") != NULL);
}

/* Without a phase column every row is a decode row, said so. */
static void test_no_phase(void)
{
    const char *path = an_path("nophase.route.csv");
    an_write(path, "step,layer,slot,expert,weight,residency,expert_bytes\n"
                   "5,0,0,1,0.9,0,1048576\n"
                   "5,0,1,2,0.1,0,1048576\n");
    CHECK_MSG(an_run("route '%s' --drop 1", path) == 0, "%s", an_err);
    drop_row rows[4];
    int n = read_drops(rows, 4);
    expect_row(rows, n, "F=1", 1, 2, 50, 1, 10);
    CHECK(strstr(an_out, "no phase column, so every row is replayed") != NULL);
}

#define EXPECT_ERROR(status, needle, ...)                                                        \
    do {                                                                                          \
        int got_ = an_run(__VA_ARGS__);                                                           \
        CHECK_MSG(got_ == (status), "exit %d, wanted %d: %s", got_, (status), an_err);            \
        CHECK_MSG(an_one_line_error(), "not one error line: '%s'", an_err);                       \
        CHECK_MSG(strstr(an_err, needle) != NULL, "'%s' not in '%s'", needle, an_err);            \
        CHECK_MSG(an_out[0] == '\0', "output on a failed run: %.200s", an_out);                   \
    } while (0)

static void test_refusals(void)
{
    const char *ok = an_path("ok.route.csv");
    an_write(ok, HEADER "0,1,1,0,0,1,0.5,0,1048576\n0,1,1,0,1,2,0.5,0,1048576\n");
    CHECK(an_run("route '%s' --drop 0.5", ok) == 0);
    /* Thresholds: usage errors, as the view's other bad values. */
    EXPECT_ERROR(2, "--drop: '-0.1' is not a threshold in [0, 1]", "route '%s' --drop -0.1", ok);
    EXPECT_ERROR(2, "'1.5' is not a threshold", "route '%s' --drop 1.5", ok);
    EXPECT_ERROR(2, "'nan' is not a threshold", "route '%s' --drop nan", ok);
    EXPECT_ERROR(2, "'inf' is not a threshold", "route '%s' --drop inf", ok);
    EXPECT_ERROR(2, "'0.5x' is not a threshold", "route '%s' --drop 0.5x", ok);
    EXPECT_ERROR(2, "'' is not a threshold in [0, 1] (in '0.5,')", "route '%s' --drop 0.5,", ok);
    EXPECT_ERROR(2, "'' is not a threshold in [0, 1] (in ',0.5')", "route '%s' --drop ,0.5", ok);
    EXPECT_ERROR(2, "'' is not a threshold in [0, 1] (in '0.5,,1')", "route '%s' --drop 0.5,,1",
                 ok);
    EXPECT_ERROR(2, "'' is not a threshold", "route '%s' --drop ''", ok);
    EXPECT_ERROR(2, "'1.01' is not a threshold", "route '%s' --drop 0.5,1.01", ok);
    EXPECT_ERROR(2, "--drop needs a value", "route '%s' --drop", ok);
    EXPECT_ERROR(2, "'--drop' is not an option of the csv view", "csv '%s' --drop 1", ok);

    /* The file: bad input, status 1. */
    const char *bad = an_path("bad.route.csv");
    an_write(bad, HEADER "0,1,1,0,0,1,0.5,0,1048576\n0,1,1,0,1,2,-0.2,0,1048576\n");
    EXPECT_ERROR(1, "bad.route.csv:3: column 'weight': '-0.2' is not a routing weight",
                 "route '%s' --drop 1", bad);
    an_write(bad, HEADER "0,1,1,0,0,1,0.5,0,1048576\n0,1,1,0,1,2,inf,0,1048576\n");
    EXPECT_ERROR(1, "'inf' is not a routing weight", "route '%s' --drop 1", bad);
    /* Without --drop the weight is not read, as before. */
    CHECK(an_run("route '%s'", bad) == 0);
    an_write(bad, HEADER "0,1,1,0,0,1,0.5,0,1048576\n0,1,1,0,0,2,0.5,0,1048576\n");
    EXPECT_ERROR(1, "bad.route.csv:3: turn 0 step 1 layer 0 slot 0 again (first on line 2)",
                 "route '%s' --drop 1", bad);
    an_write(bad, "turn,phase,step,layer,slot,expert,residency,expert_bytes\n0,1,1,0,0,1,0,5\n");
    EXPECT_ERROR(1, "no 'weight' column, which the --drop replay needs", "route '%s' --drop 1",
                 bad);
    an_write(bad, HEADER "0,0,1,0,0,1,0.5,0,1048576\n");
    EXPECT_ERROR(1, "no decode rows to replay --drop on", "route '%s' --drop 1 --phase prefill",
                 bad);
}

/* Decode slots, misses and expert_bytes of a trace, counted here from the
 * file by column name. */
static void count_decode(const char *path, unsigned long long *slots, unsigned long long *misses,
                         double *bytes)
{
    *slots = *misses = 0;
    *bytes = 0;
    char *text = test_read_file(path, NULL);
    CHECK(text != NULL);
    if (!text)
        return;
    int c_phase = -1, c_residency = -1, c_bytes = -1;
    bool header = false;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '#')
            continue;
        char *fields[16];
        int n = 0;
        for (char *p = line; n < 16;) {
            fields[n++] = p;
            p = strchr(p, ',');
            if (!p)
                break;
            *p++ = '\0';
        }
        if (!header) {
            for (int i = 0; i < n; i++) {
                c_phase = strcmp(fields[i], "phase") == 0 ? i : c_phase;
                c_residency = strcmp(fields[i], "residency") == 0 ? i : c_residency;
                c_bytes = strcmp(fields[i], "expert_bytes") == 0 ? i : c_bytes;
            }
            header = true;
            CHECK(c_phase >= 0 && c_residency >= 0 && c_bytes >= 0);
            if (c_phase < 0 || c_residency < 0 || c_bytes < 0)
                break;
            continue;
        }
        if (atoi(fields[c_phase]) != 1)
            continue;
        (*slots)++;
        *misses += atoi(fields[c_residency]) == 0;
        *bytes += strtod(fields[c_bytes], NULL);
    }
    free(text);
}

/* The real Qwen3-30B-A3B trace (k = 6): what holds whatever the figures
 * are. Dropping more with a higher F, never more than the misses; F=0
 * drops nothing; a dropped slot weighs under F/k, so with weights summing
 * to 1 per routing the mass share is under F x the slot share; each top-k
 * step down removes exactly one slot per routing; the totals are the
 * file's. */
static void test_real_trace(void)
{
    char path[1024];
    test_shared_path(path, sizeof path, "data/route-traces/qwen.route.csv");
    unsigned long long slots, misses;
    double bytes;
    count_decode(path, &slots, &misses, &bytes);
    CHECK(slots > 0 && slots % 6 == 0 && misses > 0 && bytes > 0);
    CHECK_MSG(an_run("route '%s' --drop 0,0.25,0.5,0.75,1", path) == 0, "%s", an_err);
    drop_row rows[16];
    int n = read_drops(rows, 16);
    CHECK_MSG(n == 7, "%d rows:\n%s", n, an_out);
    if (n != 7)
        return;
    static const double thresholds[] = {0, 0.25, 0.5, 0.75, 1};
    for (int i = 0; i < n; i++) {
        const drop_row *r = &rows[i];
        CHECK(r->routed == slots);
        /* The share is of the file's decode reads. */
        CHECK_MSG(fabs(r->reads_pct - 100.0 * r->reads_mib * MIB / bytes) < 0.01, "%s: %.2f %% of "
                  "%.1f MiB is not %.1f MiB",
                  r->label, r->reads_pct, bytes / MIB, r->reads_mib);
        if (i < 5) {
            CHECK(r->removed <= misses);
            CHECK_MSG(r->mass_pct <= 100.0 * thresholds[i] * (double)r->removed / (double)slots +
                                         0.01,
                      "%s: %.2f %% of the mass in %llu slots", r->label, r->mass_pct, r->removed);
        }
        if (i > 0 && i < 5)
            CHECK_MSG(r->removed >= rows[i - 1].removed && r->reads_pct >= rows[i - 1].reads_pct &&
                          r->mass_pct >= rows[i - 1].mass_pct,
                      "%s removes less than %s", r->label, rows[i - 1].label);
    }
    CHECK(strcmp(rows[0].label, "F=0") == 0 && rows[0].removed == 0 && rows[0].reads_mib == 0 &&
          rows[0].mass_pct == 0);
    CHECK(rows[4].removed > rows[3].removed); /* F=1 does drop more than F=0.75 on this trace */
    CHECK(strcmp(rows[5].label, "top-k=5") == 0 && rows[5].removed == slots / 6);
    CHECK(strcmp(rows[6].label, "top-k=4") == 0 && rows[6].removed == 2 * slots / 6);
    CHECK(rows[6].reads_pct >= rows[5].reads_pct && rows[6].mass_pct > rows[5].mass_pct);
    /* The lightest of 6 weights summing to 1 is at most 1/6. */
    CHECK(rows[5].mass_pct <= 100.0 / 6 + 0.01);
    for (int i = 0; i < n; i++)
        if (strcmp(rows[i].label, "F=0.5") == 0 || strcmp(rows[i].label, "F=0.75") == 0 ||
            strcmp(rows[i].label, "F=1") == 0 || strncmp(rows[i].label, "top-k", 5) == 0)
            printf("qwen %-8s reads %6.2f %% (%8.1f MiB), router mass %6.2f %%, %llu/%llu slots\n",
                   rows[i].label, rows[i].reads_pct, rows[i].reads_mib, rows[i].mass_pct,
                   rows[i].removed, rows[i].routed);
}

int main(void)
{
    an_setup("analyze_drop");
    test_rule();
    test_top_pinned();
    test_unknown_and_recorded();
    test_no_phase();
    test_refusals();
    test_real_trace();
    return test_finish();
}
