/* bmoe-analyze route: hand-made route traces with hit counts worked out by
 * hand, properties on the three real traces in shared/ (Belady >= LRU at
 * each budget, hit rates non-decreasing in budget, the compulsory-miss bound,
 * counted here from the file itself; the frequency policy at least as good as
 * LRU at every budget, which is why the expert cache offers it), a trace of the contract's largest size
 * in well under the time a person waits, and the SVG files. */
#include <dirent.h>
#include <stdint.h>
#include <time.h>

#include "analyze_run.h"

static double seconds_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

typedef struct {
    double budget, lru_pct, freq_pct, belady_pct;
    unsigned long long lru_hits, freq_hits, belady_hits, requests;
} sweep_row;

/* Parses the "cache simulation" table of the last run. */
static int read_sweep(sweep_row *rows, int capacity)
{
    const char *line = an_line(an_out, "budget_MiB");
    int n = 0;
    for (line = an_next_line(line); line && n < capacity; line = an_next_line(line)) {
        sweep_row r;
        if (sscanf(line, "%lf %lf %lf %lf %llu %llu %llu %llu", &r.budget, &r.lru_pct, &r.freq_pct,
                   &r.belady_pct, &r.lru_hits, &r.freq_hits, &r.belady_hits, &r.requests) != 8)
            break;
        rows[n++] = r;
    }
    return n;
}

static const sweep_row *find_budget(const sweep_row *rows, int n, double budget)
{
    for (int i = 0; i < n; i++)
        if (rows[i].budget == budget)
            return &rows[i];
    return NULL;
}

/* Decode requests and distinct (layer, expert) pairs, counted from the
 * file without the tool: the compulsory misses. */
static void count_decode(const char *path, unsigned long long *requests, unsigned long long *distinct)
{
    char *text = test_read_file(path, NULL);
    CHECK(text != NULL);
    *requests = *distinct = 0;
    if (!text)
        return;
    static bool seen[256][1024];
    memset(seen, 0, sizeof seen);
    int c_phase = -1, c_layer = -1, c_expert = -1;
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
                if (strcmp(fields[i], "phase") == 0)
                    c_phase = i;
                if (strcmp(fields[i], "layer") == 0)
                    c_layer = i;
                if (strcmp(fields[i], "expert") == 0)
                    c_expert = i;
            }
            header = true;
            continue;
        }
        if (atoi(fields[c_phase]) != 1)
            continue;
        int layer = atoi(fields[c_layer]), expert = atoi(fields[c_expert]);
        CHECK(layer >= 0 && layer < 256 && expert >= 0 && expert < 1024);
        (*requests)++;
        if (!seen[layer][expert]) {
            seen[layer][expert] = true;
            (*distinct)++;
        }
    }
    free(text);
}

static void test_real_trace(const char *name)
{
    char relative[256], path[1024];
    snprintf(relative, sizeof relative, "data/route-traces/%s.route.csv", name);
    test_shared_path(path, sizeof path, relative);
    unsigned long long requests, distinct;
    count_decode(path, &requests, &distinct);
    CHECK(requests > 0 && distinct > 0);

    double start = seconds_now();
    CHECK_MSG(an_run("route '%s'", path) == 0, "%s: %s", name, an_err);
    double seconds = seconds_now() - start;
    CHECK_MSG(seconds < 10, "%s took %.1f s", name, seconds);
    CHECK(strstr(an_out, "phase: decode") != NULL); /* the default, stated */
    sweep_row rows[32];
    int n = read_sweep(rows, 32);
    CHECK_MSG(n >= 4, "%s: %d sweep rows", name, n);
    static const double wanted[] = {1000, 2000, 3000, 4000};
    for (int i = 0; i < 4; i++) {
        const sweep_row *r = find_budget(rows, n, wanted[i]);
        CHECK_MSG(r != NULL, "%s: no %g MiB row", name, wanted[i]);
        if (r)
            printf("%-7s %5.0f MiB: LRU %6.2f %%  freq %6.2f %%  Belady %6.2f %%\n", name, r->budget,
                   r->lru_pct, r->freq_pct, r->belady_pct);
    }
    for (int i = 0; i < n; i++) {
        const sweep_row *r = &rows[i];
        CHECK_MSG(r->belady_hits >= r->lru_hits, "%s at %g MiB: Belady %llu < LRU %llu", name,
                  r->budget, r->belady_hits, r->lru_hits);
        CHECK(r->requests == requests);
        CHECK_MSG(r->freq_hits >= r->lru_hits, "%s at %g MiB: freq %llu < LRU %llu", name, r->budget,
                  r->freq_hits, r->lru_hits);
        CHECK_MSG(r->belady_hits <= requests - distinct && r->lru_hits <= requests - distinct &&
                      r->freq_hits <= requests - distinct,
                  "%s at %g MiB: more hits than the %llu reuses", name, r->budget,
                  requests - distinct);
        for (int j = 0; j < n; j++)
            if (rows[j].budget > r->budget)
                CHECK_MSG(rows[j].lru_hits >= r->lru_hits && rows[j].belady_hits >= r->belady_hits,
                          "%s: hits fall from %g to %g MiB", name, r->budget, rows[j].budget);
    }
    /* The bound is what the tool reports, and both extremes reach it. */
    char bound[128];
    snprintf(bound, sizeof bound, "first uses (compulsory misses): %llu ", distinct);
    CHECK(strstr(an_out, bound) != NULL);
    CHECK(an_run("route --budget-mib 0 1000000 '%s'", path) == 0);
    n = read_sweep(rows, 32);
    CHECK(n == 2);
    if (n == 2) {
        CHECK(rows[0].lru_hits == 0 && rows[0].freq_hits == 0 && rows[0].belady_hits == 0);
        CHECK(rows[1].lru_hits == requests - distinct && rows[1].freq_hits == requests - distinct &&
              rows[1].belady_hits == requests - distinct);
    }
    /* Other phases are there too, and change the request count. */
    CHECK(an_run("route '%s' --phase prefill --budget-mib 1000", path) == 0);
    CHECK(read_sweep(rows, 32) == 1 && rows[0].requests != requests);
    CHECK(strstr(an_out, "phase: prefill") != NULL);
}

#define ROUTE_HEADER "turn,phase,step,layer,slot,expert,weight,residency,expert_bytes\n"

static void test_hand_made(void)
{
    /* A B C A B C on one layer at 1 MiB per expert, rows shuffled: the tool
     * must order them by step. A prefill row routing C comes first. */
    const char *cyclic = an_path("cyclic.route.csv");
    an_write(cyclic, "# route_trace v1\n"
                     "# model=m.gguf arch=test n_layer=1 n_expert=8 n_expert_used=1\n"
                     "# layer=0 expert_bytes=1048576 dense_bytes=0\n" ROUTE_HEADER
                     "0,1,4,0,0,1,nan,0,0\n"
                     "0,0,0,0,0,3,nan,0,1048576\n"
                     "0,1,2,0,0,2,nan,0,0\n"
                     "0,1,6,0,0,3,nan,0,0\n"
                     "0,1,1,0,0,1,nan,0,0\n"
                     "0,1,5,0,0,2,nan,0,0\n"
                     "0,1,3,0,0,3,nan,0,0\n");
    sweep_row rows[8];
    /* Decode A B C A B C, room for 2 (worked out in test_analyze_cache.c):
     * LRU 0 hits, MIN 2; room for 3: the 3 reuses. */
    CHECK(an_run("route '%s' --budget-mib 2,3", cyclic) == 0);
    CHECK(read_sweep(rows, 8) == 2);
    CHECK(rows[0].requests == 6 && rows[0].lru_hits == 0 && rows[0].belady_hits == 2);
    CHECK(rows[1].lru_hits == 3 && rows[1].belady_hits == 3);
    CHECK(strstr(an_out, "uniform, 1.000 MiB") != NULL);
    /* With the prefill row: C A B C A B C, room for 2.
     * LRU: every request misses (a cycle of 3 through 2 slots): 0.
     * MIN: C, A miss; B evicts A (next 4; C's is 3); C hits; A evicts C
     * (next 6; B's is 5); B hits; C misses: 2 hits. */
    CHECK(an_run("route '%s' --budget-mib 2 --phase all", cyclic) == 0);
    CHECK(read_sweep(rows, 8) == 1);
    CHECK(rows[0].requests == 7 && rows[0].lru_hits == 0 && rows[0].belady_hits == 2);

    /* A prefill batch listed layer by layer, as the engine serves it, is
     * kept in that order: two prompt tokens both route A on layer 0, then
     * B and C on layer 1; the first decode step routes A. Room for 2:
     * A miss, A hit, B miss, C evicts A, A misses: 1 LRU hit. (Reordered
     * token by token, A B A C A, LRU would hit twice.) */
    const char *batch = an_path("batch.route.csv");
    an_write(batch, "# layer=0 expert_bytes=1048576\n# layer=1 expert_bytes=1048576\n" ROUTE_HEADER
                    "0,0,0,0,0,1,0.5,0,1048576\n"
                    "0,0,1,0,0,1,0.5,0,0\n"
                    "0,0,0,1,0,2,0.5,0,1048576\n"
                    "0,0,1,1,0,3,0.5,0,1048576\n"
                    "0,1,2,0,0,1,0.5,0,1048576\n");
    CHECK(an_run("route '%s' --budget-mib 2 --phase all", batch) == 0);
    CHECK(read_sweep(rows, 8) == 1 && rows[0].requests == 5 && rows[0].lru_hits == 1);
    CHECK(strstr(an_out, "over 3 steps, in trace order") != NULL);

    /* Sizes per layer: A on layer 0 at 2 MiB, B and C on layer 1 at 1 MiB;
     * requests A B C A (step, then layer), room for 3 MiB. LRU: C evicts A,
     * then A evicts B: 0 hits. MIN: C evicts B (never used again), A hits. */
    const char *sized = an_path("sized.route.csv");
    an_write(sized, "# route_trace v1\n"
                    "# layer=0 expert_bytes=2097152 dense_bytes=0\n"
                    "# layer=1 expert_bytes=1048576 dense_bytes=0\n" ROUTE_HEADER
                    "0,1,10,0,0,5,0.5,0,2097152\n"
                    "0,1,10,1,0,6,0.5,0,1048576\n"
                    "0,1,11,1,0,7,0.5,0,1048576\n"
                    "0,1,12,0,0,5,0.5,1,0\n");
    CHECK(an_run("route '%s' --budget-mib 3", sized) == 0);
    CHECK(read_sweep(rows, 8) == 1);
    CHECK(rows[0].lru_hits == 0 && rows[0].belady_hits == 1);
    CHECK(strstr(an_out, "NOT uniform") != NULL);
    CHECK(strstr(an_out, "heuristic") != NULL);
    /* The traced run's own residency column: 1 hit of 4. */
    CHECK(strstr(an_out, "25.00 % of these requests hit") != NULL);

    /* No "# layer=" lines and no preamble: the sizes come from the rows
     * that carry them (misses), the same answer. */
    const char *bare = an_path("bare.route.csv");
    an_write(bare, ROUTE_HEADER "0,1,10,0,0,5,0.5,0,2097152\n"
                                "0,1,10,1,0,6,0.5,0,1048576\n"
                                "0,1,11,1,0,7,0.5,0,1048576\n"
                                "0,1,12,0,0,5,0.5,1,0\n");
    CHECK(an_run("route '%s' --budget-mib 3", bare) == 0);
    CHECK(read_sweep(rows, 8) == 1 && rows[0].lru_hits == 0 && rows[0].belady_hits == 1);
    CHECK(strstr(an_out, "largest expert_bytes on their rows") != NULL);
    /* One layer whose last row is a hit (expert_bytes 0): still 2 MiB, so
     * A B A fits in 4 MiB and hits once, and not in 3. */
    const char *one = an_path("one-layer.route.csv");
    an_write(one, ROUTE_HEADER "0,1,1,0,0,5,0.5,0,2097152\n"
                               "0,1,2,0,0,6,0.5,0,2097152\n"
                               "0,1,3,0,0,5,0.5,1,0\n");
    CHECK_MSG(an_run("route '%s' --budget-mib 3,4", one) == 0, "%s", an_err);
    CHECK(read_sweep(rows, 8) == 2 && rows[0].lru_hits == 0 && rows[1].lru_hits == 1);
    CHECK(strstr(an_out, "uniform, 2.000 MiB") != NULL);

    /* Dropped routings are never looked up: with B dropped, A C A fits. */
    const char *dropped = an_path("dropped.route.csv");
    an_write(dropped, "# route_trace v1\n"
                      "# layer=0 expert_bytes=2097152 dense_bytes=0\n"
                      "# layer=1 expert_bytes=1048576 dense_bytes=0\n"
                      "turn,phase,step,layer,slot,expert,weight,residency,expert_bytes,dropped\n"
                      "0,1,10,0,0,5,0.5,0,2097152,0\n"
                      "0,1,10,1,0,6,0.5,0,0,1\n"
                      "0,1,11,1,0,7,0.5,0,1048576,0\n"
                      "0,1,12,0,0,5,0.5,1,0,0\n");
    CHECK(an_run("route '%s' --budget-mib 3", dropped) == 0);
    CHECK(read_sweep(rows, 8) == 1 && rows[0].requests == 3 && rows[0].lru_hits == 1);
    CHECK(strstr(an_out, "1 dropped routings left out") != NULL);
}

/* A trace of the size the contract calls the usual large one ("~200k rows
 * (~8 MiB) for a 500-token decode on a 48-layer, top-8 model"): 800 steps x
 * 48 layers x 8 slots = 307,200 rows of ~29 bytes, over 8 MiB. */
static void test_large_trace(void)
{
    const char *path = an_path("large.route.csv");
    FILE *file = fopen(path, "wb");
    CHECK(file != NULL);
    if (!file)
        return;
    fprintf(file, "# route_trace v1\n# model=big.gguf arch=qwen3moe n_layer=48 n_expert=128 "
                  "n_expert_used=8\n");
    for (int layer = 0; layer < 48; layer++)
        fprintf(file, "# layer=%d expert_bytes=%d dense_bytes=1000\n", layer,
                layer % 2 ? 3059712 : 2654208);
    fputs(ROUTE_HEADER, file);
    uint64_t state = 99;
    for (int step = 100; step < 900; step++)
        for (int layer = 0; layer < 48; layer++)
            for (int slot = 0; slot < 8; slot++) {
                /* Skewed popularity, as routing is. */
                uint64_t r = next_random(&state);
                int expert = (int)((r % 16) * ((r >> 32) % 16) / 2 + (unsigned)slot) % 128;
                fprintf(file, "0,1,%d,%d,%d,%d,%.6f,1,0\n", step, layer, slot, expert,
                        (double)(r >> 40) / (double)(1 << 24));
            }
    fclose(file);
    struct stat st;
    CHECK(stat(path, &st) == 0 && st.st_size > 8 * 1024 * 1024);
    double start = seconds_now();
    CHECK_MSG(an_run("route '%s'", path) == 0, "%s", an_err);
    double seconds = seconds_now() - start;
    /* Generous: the suite may run sanitized on a shared machine. */
    CHECK_MSG(seconds <= 20, "an 8 MiB trace took %.1f s", seconds);
    printf("8 MiB synthetic trace: %.2f s\n", seconds);
    sweep_row rows[16];
    CHECK(read_sweep(rows, 16) == 7);
    CHECK(rows[0].requests == 800ull * 48 * 8);
}

static bool svg_complete(const char *path)
{
    char *text = test_read_file(path, NULL);
    bool ok = text && strncmp(text, "<?xml", 5) == 0 && strstr(text, "<svg ") &&
              strstr(text, "</svg>\n") && !strstr(text, "nan") && !strstr(text, "inf");
    free(text);
    return ok;
}

static int count_entries(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    int count = 0;
    if (!d)
        return -1;
    for (struct dirent *e; (e = readdir(d));)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0)
            count++;
    closedir(d);
    return count;
}

static void test_svg(void)
{
    char path[1024];
    test_shared_path(path, sizeof path, "data/route-traces/gptoss.route.csv");
    const char *dir = an_path("svg");
    mkdir(dir, 0755);
    CHECK(an_run("route '%s' --svg '%s'", path, dir) == 0);
    CHECK(svg_complete(an_path("svg/gptoss.route-reuse.svg")));
    CHECK(svg_complete(an_path("svg/gptoss.route-hit.svg")));
    /* Written again over its own files, and no temporary left behind. */
    CHECK(an_run("route '%s' --svg '%s'", path, dir) == 0);
    CHECK(svg_complete(an_path("svg/gptoss.route-reuse.svg")));
    CHECK(count_entries(dir, ".") == 2); /* "." and ".." only */
}

int main(void)
{
    an_setup("analyze_route");
    test_hand_made();
    test_real_trace("qwen");
    test_real_trace("gemma");
    test_real_trace("gptoss");
    test_large_trace();
    test_svg();
    return test_finish();
}
