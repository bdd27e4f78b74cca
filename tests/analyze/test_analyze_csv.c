/* bmoe-analyze csv: the warm-up vs steady-state split on the phone CSVs in
 * shared/data/bigmoe-csv, checked against what warmup-analysis.md states
 * about them (not against numbers this tool printed before), and on a
 * hand-written full-contract CSV (preamble, turn column, "# summary"
 * trailers, mtp_batch groups) whose answers are worked out by hand. */
#include <math.h>

#include "analyze_run.h"

/* One phase of one turn, from the two tables of the output. */
typedef struct {
    int tokens;
    double rate, ci_low, ci_high, median, p5, p95;
    double wall, io, compute, stall, mgmt, io_pct, compute_pct, stall_pct, mgmt_pct, read_mib,
        hit, faults, cpu_per_wall;
} phase_stats;

/* Whitespace-separated numbers of LINE after its first word; "-" is NAN. */
static int numbers_of(const char *line, double *values, int capacity)
{
    int n = 0;
    const char *p = line;
    while (*p == ' ')
        p++;
    while (*p && *p != ' ')
        p++; /* the phase name */
    while (*p && *p != '\n' && n < capacity) {
        while (*p == ' ')
            p++;
        if (!*p || *p == '\n')
            break;
        char *end;
        if (*p == '-' && (p[1] == ' ' || p[1] == '\n' || !p[1])) {
            values[n++] = NAN;
            p++;
            continue;
        }
        double v = strtod(p, &end);
        if (end == p) {
            /* a step range such as 1-3 or #1-3: not a number column */
            while (*p && *p != ' ' && *p != '\n')
                p++;
            values[n++] = NAN;
            continue;
        }
        if (*end == '-') { /* "4-256": a range */
            while (*end && *end != ' ' && *end != '\n')
                end++;
            v = NAN;
        }
        values[n++] = v;
        p = end;
    }
    return n;
}

/* Reads phase NAME of the turn whose section starts with TURN_PREFIX. */
static bool read_phase(const char *turn_prefix, const char *name, phase_stats *s)
{
    const char *turn = an_line(an_out, turn_prefix);
    if (!turn)
        return false;
    char key[32];
    snprintf(key, sizeof key, "%s ", name);
    const char *rates = an_line(turn, key);
    const char *split = rates ? an_line(an_next_line(rates), key) : NULL;
    if (!rates || !split)
        return false;
    double v[16];
    if (numbers_of(rates, v, 16) != 8)
        return false;
    s->tokens = (int)v[0];
    s->rate = v[2];
    s->ci_low = v[3];
    s->ci_high = v[4];
    s->median = v[5];
    s->p5 = v[6];
    s->p95 = v[7];
    if (numbers_of(split, v, 16) != 13)
        return false;
    s->wall = v[0];
    s->io = v[1];
    s->compute = v[2];
    s->stall = v[3];
    s->mgmt = v[4];
    s->io_pct = v[5];
    s->compute_pct = v[6];
    s->stall_pct = v[7];
    s->mgmt_pct = v[8];
    s->read_mib = v[9];
    s->hit = v[10];
    s->faults = v[11];
    s->cpu_per_wall = v[12];
    return true;
}

static bool near(double value, double target, double relative)
{
    return fabs(value - target) <= relative * fabs(target);
}

typedef struct {
    const char *file;
    double mean_rate;  /* the note's "mean N tok/s" */
    double final_hit;  /* its tables' last cache_hit% row */
} regime1_run;

/* Regime 1, "models near RAM": an I/O-bound warm-up the overlap hides. */
static void test_regime1(const regime1_run *run)
{
    char relative[256], path[1024];
    snprintf(relative, sizeof relative, "data/bigmoe-csv/%s", run->file);
    test_shared_path(path, sizeof path, relative);
    CHECK_MSG(an_run("csv '%s'", path) == 0, "%s: %s", run->file, an_err);
    phase_stats warm, steady, all;
    bool parsed = read_phase("turn 0:", "warm-up", &warm) &&
                  read_phase("turn 0:", "steady", &steady) && read_phase("turn 0:", "all", &all);
    CHECK_MSG(parsed, "%s: output not parsed", run->file);
    if (!parsed)
        return;
    printf("%-14s warm-up %3d tokens %6.3f tok/s | steady %3d tokens %6.3f tok/s "
           "[%6.3f, %6.3f]\n",
           run->file, warm.tokens, warm.rate, steady.tokens, steady.rate, steady.ci_low,
           steady.ci_high);
    /* "tok/s recovers by token ~3", "within a few tokens": a warm-up is
     * found, and it is short. */
    CHECK_MSG(warm.tokens >= 1 && warm.tokens <= 8, "%s: warm-up of %d tokens", run->file,
              warm.tokens);
    CHECK(warm.tokens + steady.tokens == all.tokens && all.tokens == 256);
    /* "only climbs to its steady rate after a warm-up window" */
    CHECK_MSG(steady.rate > warm.rate, "%s: steady %.3f <= warm-up %.3f", run->file, steady.rate,
              warm.rate);
    CHECK(steady.ci_low <= steady.rate && steady.rate <= steady.ci_high);
    CHECK(steady.p5 <= steady.median && steady.median <= steady.p95);
    /* "(mean 4.92 tok/s, steady hit 77%)": the whole run's rate is the
     * note's mean, and the hit rate climbs to the note's steady value. */
    CHECK_MSG(near(all.rate, run->mean_rate, 0.01), "%s: %.3f vs %.2f", run->file, all.rate,
              run->mean_rate);
    CHECK_MSG(fabs(steady.hit - run->final_hit) < 0.05, "%s: hit %.2f", run->file, steady.hit);
    CHECK(warm.hit < steady.hit && steady.hit >= 77 && steady.hit <= 83);
    /* "Early tokens read the full routed set ...; by steady state most
     * experts are cached and each token reads ~100-200 MiB." */
    CHECK_MSG(warm.read_mib > steady.read_mib * 1.5, "%s: read %.0f vs %.0f MiB", run->file,
              warm.read_mib, steady.read_mib);
    CHECK_MSG(steady.read_mib >= 70 && steady.read_mib <= 250, "%s: steady read %.0f MiB",
              run->file, steady.read_mib);
    /* "compute_ms is essentially flat (~85-170 ms)" once warm. */
    CHECK_MSG(steady.compute >= 70 && steady.compute <= 200, "%s: steady compute %.0f ms",
              run->file, steady.compute);
    /* Overlap: io_ms is summed lane time, stall_ms the wall lost. */
    CHECK(strstr(an_out, "flash wait: overlap") != NULL);
    CHECK(steady.stall < steady.io);
}

/* Regime 2, "a model dwarfing RAM": a memory-residency-bound warm-up
 * inside compute. */
static void test_regime2(const char *file, double mean_rate, double tail_rate, double final_hit)
{
    char relative[256], path[1024];
    snprintf(relative, sizeof relative, "data/bigmoe-csv/%s", file);
    test_shared_path(path, sizeof path, relative);
    CHECK_MSG(an_run("csv '%s'", path) == 0, "%s: %s", file, an_err);
    phase_stats warm, steady, all;
    bool parsed = read_phase("turn 0:", "warm-up", &warm) &&
                  read_phase("turn 0:", "steady", &steady) && read_phase("turn 0:", "all", &all);
    CHECK_MSG(parsed, "%s: output not parsed", file);
    if (!parsed)
        return;
    printf("%-14s warm-up %3d tokens %6.3f tok/s | steady %3d tokens %6.3f tok/s "
           "[%6.3f, %6.3f]\n",
           file, warm.tokens, warm.rate, steady.tokens, steady.rate, steady.ci_low,
           steady.ci_high);
    CHECK(all.tokens == 24);
    /* "The 24-token mean is dominated by the cold head", "the steady tail
     * is far faster - the last third averages ~0.74 tok/s (k=2) and ~1.2
     * tok/s (k=4)": a long warm-up, a steady window no longer than about
     * the last third... */
    CHECK_MSG(warm.tokens >= 8 && warm.tokens <= 16, "%s: warm-up of %d tokens", file, warm.tokens);
    /* ...running at the tail's rate, far above the cold head's. */
    CHECK_MSG(near(steady.rate, tail_rate, 0.2), "%s: steady %.3f vs ~%.2f", file, steady.rate,
              tail_rate);
    CHECK(steady.rate > 4 * warm.rate);
    /* "it is a floor": the whole-run mean is below the steady rate, and
     * it is the note's mean. */
    CHECK(all.rate < steady.rate);
    CHECK_MSG(near(all.rate, mean_rate, 0.01), "%s: %.3f vs %.3f", file, all.rate, mean_rate);
    /* "compute_ms collapses ~18 000 ms -> ~300 ms ... not the expert stream
     * (io_ms stays small)": the warm-up is compute, many times the steady
     * compute, while io_ms does not collapse with it. */
    CHECK_MSG(warm.compute_pct > 80, "%s: warm-up compute share %.1f %%", file, warm.compute_pct);
    CHECK(warm.compute > 5 * steady.compute);
    CHECK_MSG(warm.io < 2 * steady.io, "%s: io %.0f -> %.0f ms", file, warm.io, steady.io);
    CHECK(fabs(steady.hit - final_hit) < 0.05);
}

static void test_phone_csvs(void)
{
    static const regime1_run runs[] = {
        {"qwen_k8.csv", 4.92, 77.13},
        {"qwen_k6.csv", 7.01, 79.97},
        {"gemma_k8.csv", 4.76, 82.85},
        {"gemma_k6.csv", 4.79, 82.78},
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++)
        test_regime1(&runs[i]);
    test_regime2("gptoss_k2.csv", 0.163, 0.74, 20.36);
    test_regime2("gptoss_k4.csv", 0.134, 1.2, 13.42);

    /* "k=4, steady tail: io_ms ~ 2600-3800 ms while wall_ms ~ 800 ms - the
     * overlap path is hiding the entire (large) expert I/O". */
    char path[1024];
    test_shared_path(path, sizeof path, "data/bigmoe-csv/gptoss_k4.csv");
    CHECK(an_run("csv '%s'", path) == 0);
    phase_stats steady;
    CHECK(read_phase("turn 0:", "steady", &steady));
    CHECK_MSG(steady.io_pct > 200 && steady.io > 2000 && steady.wall < 1200,
              "io %.0f ms, wall %.0f ms", steady.io, steady.wall);
}

#define FULL_HEADER                                                                               \
    "step,steps,wall_ms,io_ms,compute_ms,read_bytes,cache_hit_pct,stall_ms,mgmt_ms,majflt,"      \
    "cpu_ms,dense_resident_frac,turn,majflt_mib,cache_budget_mib,rss_mib,rss_anon_mib,"          \
    "rss_file_mib,swap_mib,mem_available_mib,mem_free_mib,swap_free_mib,loop_overhead_ms,"       \
    "mtp_batch,mtp_draft_ms,drain_ms,adopt_ms,ra_issue_ms,ra_wd_ms\n"

/* A row of the full contract: compute, stall and mgmt are 50, 30 and 20 %
 * of the wall, io twice it (overlap lanes), one major fault. */
static void full_row(char *out, size_t size, int step, int turn, double wall, double read_mib,
                     double hit, int batch)
{
    snprintf(out, size,
             "%d,32,%.1f,%.1f,%.1f,%.0f,%.2f,%.1f,%.1f,%d,%.1f,0.99,%d,0.004,100,900,500,400,0,"
             "5000,100,2000,1.5,%d,0,0,0,0,0\n",
             step, wall, 2 * wall, 0.5 * wall, read_mib * 1048576, hit, 0.3 * wall, 0.2 * wall,
             wall > 0 ? 1 : 0, 3 * wall, turn, batch);
}

static void test_full_contract(void)
{
    char text[16384], row[512];
    snprintf(text, sizeof text,
             "# bmoe_metrics v2\n"
             "# engine=0.1.0\n"
             "# model=/m/qwen.gguf arch=qwen3moe n_layer=2 n_expert=8 n_expert_used=2 threads=4 "
             "n_ctx=4096 n_ubatch=0 chatml=1\n"
             "# moe_stream=1 cache_mb=100 cache_auto=0 overlap=1 predict_log=1 prefetch=0\n"
             "# temp=0 top_k=40 top_p=0.95 seed=1 compute_trace_layers=0 spec=off\n" FULL_HEADER);
    /* Turn 0, ten tokens: 1000 ms x 3, then 100 ms x 7; 2 MiB read per
     * cold token, 1 MiB per warm one. By the rule: the second half (tokens
     * 6-10) has median 100 ms, the limit is 125 ms; tokens 1-3 exceed it;
     * token 4 and the median of 4-6 are 100: warm-up = tokens 1-3.
     * warm-up 3 x 1000 / 3000 = 1 tok/s; steady 7 x 1000 / 700 = 10 tok/s
     * (every token the same: median, p5, p95 and the interval all 10);
     * all 10 x 1000 / 3700 = 2.703 tok/s. */
    for (int i = 0; i < 10; i++) {
        full_row(row, sizeof row, 21 + i, 0, i < 3 ? 1000 : 100, i < 3 ? 2 : 1, 10.0 * i, 1);
        strcat(text, row);
    }
    strcat(text, "# summary tokens=10 s/tok=0.370 tok/s=2.703 read_MiB=13.0\n");
    /* Turn 1: four rows as two mtp groups of 2, each 100 ms on its first
     * row and zeros on the second: four tokens of 50 ms = 20 tok/s, too
     * short to split. */
    for (int i = 0; i < 4; i++) {
        full_row(row, sizeof row, 40 + i, 1, i % 2 ? 0 : 100, i % 2 ? 0 : 1, 95, i % 2 ? 0 : 2);
        strcat(text, row);
    }
    strcat(text, "# summary tokens=4 s/tok=0.050 tok/s=20.000\n");
    const char *path = an_path("full.csv");
    an_write(path, text);

    CHECK_MSG(an_run("csv '%s'", path) == 0, "%s", an_err);
    CHECK(strstr(an_out, "2 turns") != NULL);
    CHECK(strstr(an_out, "format: bmoe_metrics v2 preamble, engine=0.1.0, model=qwen.gguf") != NULL);
    CHECK(strstr(an_out, "flash wait: overlap") != NULL);
    CHECK(strstr(an_out, "warning: predict_log=1") != NULL);
    CHECK(strstr(an_out, "trailer: # summary tokens=10 tok/s=2.703") != NULL);
    CHECK(strstr(an_out, "trailer: # summary tokens=4 tok/s=20.000") != NULL);
    phase_stats warm, steady, all, short_turn;
    CHECK(read_phase("turn 0:", "warm-up", &warm));
    CHECK(read_phase("turn 0:", "steady", &steady));
    CHECK(read_phase("turn 0:", "all", &all));
    CHECK(warm.tokens == 3 && steady.tokens == 7 && all.tokens == 10);
    CHECK(fabs(warm.rate - 1.0) < 1e-3 && fabs(steady.rate - 10.0) < 1e-3);
    CHECK(fabs(all.rate - 10000.0 / 3700) < 1e-3);
    CHECK(steady.median == 10 && steady.p5 == 10 && steady.p95 == 10);
    CHECK(steady.ci_low == 10 && steady.ci_high == 10);
    CHECK(all.ci_low < all.rate && all.rate < all.ci_high);
    CHECK(fabs(warm.compute_pct - 50) < 0.05 && fabs(warm.stall_pct - 30) < 0.05);
    CHECK(fabs(steady.mgmt_pct - 20) < 0.05 && fabs(steady.io_pct - 200) < 0.05);
    CHECK(fabs(warm.read_mib - 2) < 0.05 && fabs(steady.read_mib - 1) < 0.05);
    CHECK(fabs(warm.hit - 20) < 1e-6 && fabs(steady.hit - 90) < 1e-6); /* at each phase's end */
    CHECK(fabs(warm.faults - 1) < 1e-6 && fabs(warm.cpu_per_wall - 3) < 1e-6); /* cpu_ms = 3 x wall */
    CHECK(strstr(an_out, "warm-up: 3 tokens, ends after step 23") != NULL);
    CHECK(strstr(an_out, "turn 1: 4 tokens; too short to split") != NULL);
    CHECK(read_phase("turn 1:", "all", &short_turn));
    CHECK(short_turn.tokens == 4 && fabs(short_turn.rate - 20) < 1e-3);
    CHECK(short_turn.median == 20 && short_turn.p95 == 20);

    /* Without a turn column, a "# summary" trailer still ends a turn. */
    const char *untagged = an_path("untagged.csv");
    an_write(untagged, "step,wall_ms\n1,1000\n2,1000\n3,1000\n4,100\n5,100\n6,100\n7,100\n8,100\n"
                       "9,100\n10,100\n# summary tokens=10 tok/s=2.703\n11,50\n12,50\n"
                       "# summary tokens=2 tok/s=20.000\n");
    CHECK_MSG(an_run("csv '%s'", untagged) == 0, "%s", an_err);
    CHECK(strstr(an_out, "(12 token rows, 2 turns)") != NULL);
    CHECK(read_phase("turn 0:", "warm-up", &warm) && warm.tokens == 3);
    CHECK(strstr(an_out, "turn 1: 2 tokens; too short to split") != NULL);

}

/* Reproducible by default; --seed moves only the interval. */
static void test_seed(void)
{
    char path[1024];
    test_shared_path(path, sizeof path, "data/bigmoe-csv/qwen_k8.csv");
    CHECK(an_run("csv '%s'", path) == 0);
    char *first = strdup(an_out);
    phase_stats all, reseeded;
    CHECK(read_phase("turn 0:", "all", &all));
    CHECK(an_run("csv '%s'", path) == 0);
    CHECK(first && strcmp(first, an_out) == 0);
    CHECK(an_run("csv '%s' --seed 7", path) == 0);
    CHECK(first && strcmp(first, an_out) != 0);
    CHECK(read_phase("turn 0:", "all", &reseeded));
    CHECK(reseeded.rate == all.rate && reseeded.median == all.median);
    CHECK(reseeded.ci_low != all.ci_low || reseeded.ci_high != all.ci_high);
    CHECK(fabs(reseeded.ci_low - all.ci_low) < 0.1 * all.rate); /* the same interval, roughly */
    free(first);
}

/* The per-token metrics of the route-trace runs carry majflt and cpu_ms. */
static void test_metrics_files(void)
{
    char path[1024];
    test_shared_path(path, sizeof path, "data/route-traces/qwen.metrics");
    CHECK_MSG(an_run("csv '%s'", path) == 0, "%s", an_err);
    phase_stats all;
    CHECK(read_phase("turn 0:", "all", &all));
    CHECK(all.tokens == 128 && !isnan(all.faults) && all.cpu_per_wall > 0);
    CHECK(strstr(an_out, "absent:") == NULL); /* every column this view reads is there */
}

static void test_svg(void)
{
    char path[1024];
    test_shared_path(path, sizeof path, "data/bigmoe-csv/qwen_k8.csv");
    mkdir(an_path("svg"), 0755);
    CHECK(an_run("csv '%s' --svg '%s'", path, an_path("svg")) == 0);
    static const char *const names[] = {"svg/qwen_k8-tokens.svg", "svg/qwen_k8-hit.svg"};
    for (int i = 0; i < 2; i++) {
        char *text = test_read_file(an_path(names[i]), NULL);
        CHECK_MSG(text && strncmp(text, "<?xml", 5) == 0 && strstr(text, "</svg>\n") &&
                      strstr(text, "warm-up ends") && !strstr(text, "nan"),
                  "%s", names[i]);
        free(text);
    }
}

int main(void)
{
    an_setup("analyze_csv");
    test_phone_csvs();
    test_full_contract();
    test_seed();
    test_metrics_files();
    test_svg();
    return test_finish();
}
