/* --route-replay: a run replaying the route trace another run recorded (on
 * the same model) routes exactly as recorded, prompt and decode, so its text
 * is the recorder's byte for byte; a longer prompt replays the trace's last
 * decode steps before its prompt; a trace routed differently changes the routing to what it
 * says; with --predict-prefetch the replayed routing of the next layer is what
 * is read ahead, or with --route-replay-guess-right a chosen share of it; a
 * trace of another shape is refused with one line. */
#include <ctype.h>
#include <math.h>
#include <sys/stat.h>

#include "cli_run.h"

static char dir[1100], model[1200];

/* Right guesses before the first trusted one: at least a few, whatever the
 * exact decay (guess_trust.h). */
#define GUESSES_BEFORE_TRUST_MIN 16

/* The counts of a report's moe-prefetch line: the contract's experts read
 * ahead and useful, then the suffixes' guesses judged and right and guesses
 * read trusted (0 where a suffix is absent: each is printed only when not
 * 0). False without the line. */
typedef struct prefetch_counts {
    unsigned long long useful, read, right, judged, trusted;
} prefetch_counts;

/* The number (digits, or "R/J") just before suffix on line, or NULL. */
static const char *number_before(const char *line, const char *suffix)
{
    const char *end = strstr(line, suffix), *at = end;
    while (at && at > line && (isdigit((unsigned char)at[-1]) || at[-1] == '/'))
        at--;
    return at && at < end ? at : NULL;
}

static bool parse_prefetch(const char *report, prefetch_counts *c)
{
    memset(c, 0, sizeof *c);
    const char *line = report ? strstr(report, "moe-prefetch: ") : NULL;
    if (!line || sscanf(line, "moe-prefetch: %*f MiB speculative, %llu/%llu", &c->useful, &c->read) != 2)
        return false;
    const char *verdicts = number_before(line, " guesses right as their layers routed");
    const char *trusted = number_before(line, " read at the disk's full rate");
    if (verdicts && sscanf(verdicts, "%llu/%llu", &c->right, &c->judged) != 2)
        return false;
    if (trusted)
        c->trusted = strtoull(trusted, NULL, 10);
    return true;
}

/* A run's text (its end-of-run lines cut off, as the timings differ from run
 * to run), and in *report those lines when report is not NULL. */
static char *run_ok_report(const char *const *args, char **report)
{
    cli_result r;
    CHECK(cli_run(args, &r) == 0);
    CHECK_MSG(r.exit_code == 0, "exit %d: %s", r.exit_code, r.err);
    cli_cut_report(&r);
    if (report) {
        *report = r.report;
        r.report = NULL;
    }
    char *out = r.out;
    r.out = NULL;
    cli_result_free(&r);
    return out;
}

static char *run_ok(const char *const *args)
{
    return run_ok_report(args, NULL);
}

/* One phase's rows of a route trace (0 prefill, 1 decode) in slots below
 * max_slots, as one string "step,layer,slot,expert;..." with steps counted
 * from the phase's first. */
static char *phase_routing_slots(const char *path, long phase, long max_slots)
{
    size_t length;
    char *text = cli_read_all(path, &length);
    if (!text)
        return NULL;
    size_t capacity = length + 1, used = 0;
    char *out = calloc(capacity, 1);
    long first = -1;
    for (char *line = text; line && *line;) {
        char *next = strchr(line, '\n');
        long f[6];
        if (line[0] >= '0' && line[0] <= '9' && sscanf(line, "%ld,%ld,%ld,%ld,%ld,%ld", &f[0], &f[1], &f[2], &f[3],
                                                       &f[4], &f[5]) == 6 && f[1] == phase && f[4] < max_slots) {
            if (first < 0)
                first = f[2];
            used += (size_t)snprintf(out + used, capacity - used, "%ld,%ld,%ld,%ld;", f[2] - first, f[3], f[4], f[5]);
        }
        line = next ? next + 1 : NULL;
    }
    free(text);
    return out;
}

static char *decode_routing(const char *path)
{
    return phase_routing_slots(path, 1, 1L << 30);
}

static char *prefill_routing(const char *path)
{
    return phase_routing_slots(path, 0, 1L << 30);
}

/* The steps rows (as phase_routing_slots writes them) span. */
static long row_steps(const char *rows)
{
    long f[4], last = -1;
    int taken;
    for (const char *at = rows; at && sscanf(at, "%ld,%ld,%ld,%ld;%n", &f[0], &f[1], &f[2], &f[3], &taken) == 4;
         at += taken)
        last = f[0] > last ? f[0] : last;
    return last + 1;
}

static int compare_rows(const void *a, const void *b)
{
    long x[4], y[4];
    sscanf(*(char *const *)a, "%ld,%ld,%ld,%ld", &x[0], &x[1], &x[2], &x[3]);
    sscanf(*(char *const *)b, "%ld,%ld,%ld,%ld", &y[0], &y[1], &y[2], &y[3]);
    for (int i = 0; i < 4; i++)
        if (x[i] != y[i])
            return x[i] < y[i] ? -1 : 1;
    return 0;
}

/* rows (as phase_routing_slots writes them) in order of step, layer and
 * slot, whatever order the trace wrote them in; rows is freed */
static char *sorted_rows(char *rows)
{
    if (!rows)
        return NULL;
    size_t n = 0, length = strlen(rows);
    for (const char *at = rows; (at = strchr(at, ';')) != NULL; at++)
        n++;
    char **row = calloc(n + 1, sizeof *row), *out = calloc(length + 1, 1), *cursor = rows;
    for (size_t i = 0; row && i < n; i++) {
        row[i] = cursor;
        cursor = strchr(cursor, ';');
        *cursor++ = '\0';
    }
    if (row && out) {
        qsort(row, n, sizeof *row, compare_rows);
        for (size_t i = 0, used = 0; i < n; i++)
            used += (size_t)snprintf(out + used, length + 1 - used, "%s;", row[i]);
    }
    free(row);
    free(rows);
    return out;
}

/* What a prompt extra tokens longer than a trace's replays: first the trace's
 * decode steps (of n_steps) the run does not replay (its first
 * n_generated), counted back from the last and wrapping, then the trace's
 * own prompt; the prompt's rows but the last skip the last layer
 * (n_layer), whose FFN only the rows that give logits reach. Both routings
 * as phase_routing_slots writes them. */
static char *longer_prompt_routing(const char *decode, const char *prompt, long n_steps, long n_generated,
                                   long extra, long n_layer)
{
    size_t capacity = (size_t)extra * strlen(decode) + strlen(prompt) + 1, used = 0;
    char *out = calloc(capacity, 1);
    long f[4], window = n_steps - n_generated;
    int taken;
    for (long s = 0; s < extra; s++) {
        long step = n_steps - 1 - (extra - 1 - s) % window;
        for (const char *at = decode;
             out && sscanf(at, "%ld,%ld,%ld,%ld;%n", &f[0], &f[1], &f[2], &f[3], &taken) == 4; at += taken)
            if (f[0] == step && f[1] < n_layer - 1)
                used += (size_t)snprintf(out + used, capacity - used, "%ld,%ld,%ld,%ld;", s, f[1], f[2], f[3]);
    }
    for (const char *at = prompt; out && sscanf(at, "%ld,%ld,%ld,%ld;%n", &f[0], &f[1], &f[2], &f[3], &taken) == 4;
         at += taken)
        used += (size_t)snprintf(out + used, capacity - used, "%ld,%ld,%ld,%ld;", f[0] + extra, f[1], f[2], f[3]);
    return out;
}

/* Decode rows of a route trace at layers after the first whose residency
 * (0 miss, 1 hit, 2 hit on what a prefetch read) is residency. */
static int decode_rows_with_residency(const char *path, long residency)
{
    size_t length;
    char *text = cli_read_all(path, &length);
    if (!text)
        return -1;
    int n = 0;
    for (char *line = text; line && *line;) {
        char *next = strchr(line, '\n');
        long f[6], found;
        float weight;
        if (line[0] >= '0' && line[0] <= '9' &&
            sscanf(line, "%ld,%ld,%ld,%ld,%ld,%ld,%f,%ld", &f[0], &f[1], &f[2], &f[3], &f[4], &f[5], &weight,
                   &found) == 8 &&
            f[1] == 1 && f[3] > 0 && found == residency)
            n++;
        line = next ? next + 1 : NULL;
    }
    free(text);
    return n;
}

int main(void)
{
    snprintf(dir, sizeof dir, "%s/cli-replay", test_tmp_dir());
    mkdir(dir, 0755);
    snprintf(model, sizeof model, "%s/model.gguf", dir);
    char command[2600];
    snprintf(command, sizeof command, "'%s/bmoe-mkmodel' --quiet --shape tiny-qwen3moe --experts 16 -o '%s'",
             BMOE_BIN_DIR, model);
    CHECK(system(command) == 0);
    char trace[1300], replayed[1300], altered[1300];
    snprintf(trace, sizeof trace, "%s/recorded.csv", dir);
    snprintf(replayed, sizeof replayed, "%s/replayed.csv", dir);
    snprintf(altered, sizeof altered, "%s/altered.csv", dir);

    const char *record[] = {"-m", model, "--moe-stream", "--cache-mb", "0", "-p", "Hello there", "-n", "10",
                            "--route-trace", trace, NULL};
    char *recorded_text = run_ok(record);
    const char *replay[] = {"-m", model, "--moe-stream", "--cache-mb", "0", "-p", "Hello there", "-n", "10",
                            "--route-replay", trace, "--route-trace", replayed, NULL};
    char *replayed_text = run_ok(replay);
    CHECK_MSG(recorded_text && replayed_text && strcmp(recorded_text, replayed_text) == 0,
              "replaying a run's own routing changed its text");
    char *a = decode_routing(trace), *b = decode_routing(replayed);
    CHECK(a && b && strlen(a) > 0 && strcmp(a, b) == 0);
    free(b);

    /* the prompt is replayed too: its routing is the recorder's */
    char *prompt_recorded = prefill_routing(trace), *prompt_replayed = prefill_routing(replayed);
    CHECK_MSG(prompt_recorded && prompt_replayed && strlen(prompt_recorded) > 0 &&
                  strcmp(prompt_recorded, prompt_replayed) == 0,
              "the replayed prompt routed\n%s\nthe recorded\n%s", prompt_replayed, prompt_recorded);
    free(prompt_recorded);
    free(prompt_replayed);

    /* every expert moved to (expert + 1) mod 16 (still distinct per cell), the prompt's too */
    size_t length;
    char *text = cli_read_all(trace, &length);
    FILE *out = fopen(altered, "w");
    CHECK(text && out);
    for (char *line = text; text && out && line && *line;) {
        char *next = strchr(line, '\n');
        if (next)
            *next = '\0';
        long f[6];
        if (line[0] >= '0' && line[0] <= '9' &&
            sscanf(line, "%ld,%ld,%ld,%ld,%ld,%ld", &f[0], &f[1], &f[2], &f[3], &f[4], &f[5]) == 6)
            fprintf(out, "%ld,%ld,%ld,%ld,%ld,%ld,nan,0,0,0\n", f[0], f[1], f[2], f[3], f[4], (f[5] + 1) % 16);
        else
            fprintf(out, "%s\n", line);
        line = next ? next + 1 : NULL;
    }
    if (out)
        fclose(out);
    free(text);
    const char *shifted[] = {"-m", model, "--moe-stream", "--cache-mb", "0", "-p", "Hello there", "-n", "10",
                             "--route-replay", altered, "--route-trace", replayed, NULL};
    free(run_ok(shifted));
    char *want = decode_routing(altered), *got = decode_routing(replayed);
    /* the first decode step's routing is the altered trace's (later steps follow it too while lengths agree) */
    CHECK(want && got && strncmp(want, got, 40) == 0 && strcmp(a, got) != 0);
    char *want_prompt = prefill_routing(altered), *got_prompt = prefill_routing(replayed);
    CHECK_MSG(want_prompt && got_prompt && strlen(want_prompt) > 0 && strcmp(want_prompt, got_prompt) == 0,
              "the altered prompt replayed as\n%s\nwant\n%s", got_prompt, want_prompt);
    free(got_prompt);
    free(got);
    free(a);

    /* a prompt longer than the trace's: its first tokens replay the trace's last decode steps the run
     * does not replay (the last 2 of 10 when it generates 8), the rest the trace's prompt */
    const char *longer_prompt[] = {"-m", model, "--moe-stream", "--cache-mb", "0", "-p", "Well, Hello there",
                                   "-n", "8", "--route-replay", altered, "--route-trace", replayed, NULL};
    free(run_ok(longer_prompt));
    long n_steps = row_steps(want);
    got_prompt = sorted_rows(prefill_routing(replayed));
    long extra = row_steps(got_prompt) - row_steps(want_prompt);
    char *want_longer = sorted_rows(longer_prompt_routing(want, want_prompt, n_steps, 8, extra, 3));
    CHECK_MSG(n_steps == 10 && extra > 2 && got_prompt && want_longer && strcmp(want_longer, got_prompt) == 0,
              "a longer prompt (%ld tokens more) replayed as\n%s\nwant (%ld decode steps)\n%s", extra, got_prompt,
              n_steps, want_longer);
    free(want_longer);
    free(got_prompt);
    free(want_prompt);
    free(want);

    /* under a replay the next layer's routing is known: --predict-prefetch reads exactly that ahead, so
     * the misses after each token's first layer become prefetched hits (a cache of a few layers, where
     * nearly every decode expert misses without it), and the text stays the plain replay's; every
     * step reads ahead with --predict-always (without it the gate decodes some steps plainly to
     * measure them) */
    const char *plain[] = {"-m", model, "--moe-stream", "--cache-mb", "8", "--overlap", "-p", "Hello there", "-n",
                           "10", "--route-replay", altered, "--route-trace", replayed, NULL};
    char *plain_text = run_ok(plain);
    int plain_misses = decode_rows_with_residency(replayed, 0);
    const char *foresight[] = {"-m", model, "--moe-stream", "--cache-mb", "8", "--overlap", "--predict-prefetch",
                               "--predict-spec-max", "8", "--predict-always", "-p", "Hello there", "-n", "10",
                               "--route-replay", altered, "--route-trace", replayed, NULL};
    char *foresight_text = run_ok(foresight);
    int misses = decode_rows_with_residency(replayed, 0), prefetched = decode_rows_with_residency(replayed, 2);
    CHECK_MSG(plain_text && foresight_text && strcmp(plain_text, foresight_text) == 0,
              "reading the replayed routing ahead changed the text");
    CHECK_MSG(plain_misses >= 40 && prefetched > 0 && misses * 4 <= plain_misses,
              "replayed routing read ahead: %d misses after the first layer (%d without), %d prefetched hits", misses,
              plain_misses, prefetched);
    /* guesses never wrong earn the lanes' trust after a few dozen (guess_trust.h): the later ones are
     * read at the disk's full rate, and the text is the same */
    const char *longer[] = {"-m", model, "--moe-stream", "--cache-mb", "8", "--overlap", "--predict-prefetch",
                            "--predict-spec-max", "8", "--predict-always", "-p", "Hello there", "-n", "30",
                            "--route-replay", altered, NULL};
    const char *longer_plain[] = {"-m", model, "--moe-stream", "--cache-mb", "8", "--overlap", "-p", "Hello there",
                                  "-n", "30", "--route-replay", altered, NULL};
    char *report = NULL, *longer_text = run_ok_report(longer, &report), *longer_plain_text = run_ok(longer_plain);
    prefetch_counts counts;
    CHECK_MSG(parse_prefetch(report, &counts) && counts.trusted > 0, "never-wrong guesses not trusted: %s",
              report ? report : "");
    CHECK_MSG(counts.useful == counts.read && counts.trusted > 0 &&
                  counts.trusted + GUESSES_BEFORE_TRUST_MIN <= counts.read,
              "%llu of %llu guesses read trusted", counts.trusted, counts.read);
    CHECK_MSG(counts.judged > 0 && counts.judged >= counts.read && counts.right == counts.judged,
              "never-wrong guesses: %llu of %llu right (%llu read)", counts.right, counts.judged, counts.read);
    CHECK_MSG(longer_text && longer_plain_text && strcmp(longer_text, longer_plain_text) == 0,
              "trusted guesses changed the text");
    free(report);
    free(longer_text);
    /* without the replay the stale gate guesses mostly wrong on this random model (its wrong guesses are
     * cancelled unread, so the useful share it reports does not show them): never trusted */
    const char *guessing[] = {"-m", model, "--moe-stream", "--cache-mb", "8", "--overlap", "--predict-prefetch",
                              "--predict-spec-max", "8", "--predict-always", "-p", "Hello there", "-n", "30", NULL};
    free(run_ok_report(guessing, &report));
    CHECK_MSG(parse_prefetch(report, &counts) && counts.trusted == 0, "mostly wrong guesses trusted: %s",
              report ? report : "");
    /* the verdicts count every guess, the wrong ones dropped unread too (a slow build may read them all):
     * at least as many judged as read, under the trust bar */
    CHECK_MSG(counts.judged >= counts.read && counts.right * 10 < counts.judged * 9,
              "stale gate: %llu of %llu judged right, %llu read: %s", counts.right, counts.judged, counts.read,
              report ? report : "");
    free(report);
    /* --route-replay-guess-right P: a predictor whose share of right experts is P; the verdicts count it, and
     * the text is the plain replay's */
    const double shares[] = {0.0, 0.5};
    for (size_t i = 0; i < sizeof shares / sizeof shares[0]; i++) {
        char share[16];
        snprintf(share, sizeof share, "%g", shares[i]);
        const char *wronged[] = {"-m", model, "--moe-stream", "--cache-mb", "8", "--overlap", "--predict-prefetch",
                                 "--predict-spec-max", "8", "--predict-always", "-p", "Hello there", "-n", "30",
                                 "--route-replay", altered, "--route-replay-guess-right", share, NULL};
        char *wronged_text = run_ok_report(wronged, &report);
        double right = 0.0;
        CHECK_MSG(parse_prefetch(report, &counts) && counts.judged >= 100,
                  "guesses %s right: %s", share, report ? report : "");
        right = counts.judged ? (double)counts.right / (double)counts.judged : -1.0;
        CHECK_MSG(fabs(right - shares[i]) < 0.15, "guesses %s right: %llu of %llu judged right", share,
                  counts.right, counts.judged);
        CHECK_MSG(wronged_text && longer_plain_text && strcmp(wronged_text, longer_plain_text) == 0,
                  "guesses %s right changed the text", share);
        free(wronged_text);
        free(report);
    }
    free(longer_plain_text);

    /* gated (the default): the same text, and at least the plain step the gate measures first */
    const char *gated[] = {"-m", model, "--moe-stream", "--cache-mb", "8", "--overlap", "--predict-prefetch",
                           "--predict-spec-max", "8", "-p", "Hello there", "-n", "10", "--route-replay", altered,
                           "--route-trace", replayed, NULL};
    char *gated_text = run_ok(gated);
    int gated_misses = decode_rows_with_residency(replayed, 0);
    CHECK_MSG(plain_text && gated_text && strcmp(plain_text, gated_text) == 0,
              "the gated read-ahead changed the text");
    CHECK_MSG(gated_misses > misses && gated_misses < plain_misses,
              "gated read-ahead: %d misses after the first layer (%d always, %d without)", gated_misses, misses,
              plain_misses);
    free(plain_text);
    free(foresight_text);
    free(gated_text);

    /* a narrower routing (--n-expert-used below the trace's) replays the trace's first experts of each
     * routing, the router's best */
    char narrow[1300];
    snprintf(narrow, sizeof narrow, "%s/narrow.csv", dir);
    const char *narrower[] = {"-m", model, "--moe-stream", "--n-expert-used", "2", "-p", "Hello there", "-n", "10", "--ignore-eos",
                              "--route-replay", trace, "--route-trace", narrow, NULL};
    free(run_ok(narrower));
    char *want_narrow = phase_routing_slots(trace, 1, 2), *got_narrow = decode_routing(narrow);
    CHECK_MSG(want_narrow && got_narrow && strlen(want_narrow) > 100 && strcmp(want_narrow, got_narrow) == 0,
              "a top-2 replay of a top-4 trace:\n%s\nwant\n%s", got_narrow, want_narrow);
    free(want_narrow);
    free(got_narrow);

    /* a trace narrower than the routing: one line, exit 1 */
    const char *wrong[] = {"-m", model, "--moe-stream", "--n-expert-used", "6", "-p", "Hello", "-n", "2",
                           "--route-replay", trace, NULL};
    cli_result r;
    CHECK(cli_run(wrong, &r) == 0);
    CHECK_MSG(r.exit_code == 1 && cli_one_line_error(&r) && strstr(r.err, "--route-replay"), "wrong trace: %s", r.err);
    cli_result_free(&r);

    /* the guesses' share without a replay, or outside 0..1: one line, exit 1 */
    const char *alone[] = {"-m", model, "--moe-stream", "-p", "Hello", "-n", "2", "--route-replay-guess-right", "0.5",
                           NULL};
    CHECK(cli_run(alone, &r) == 0);
    CHECK_MSG(r.exit_code == 1 && cli_one_line_error(&r) && strstr(r.err, "needs --route-replay"), "alone: %s",
              r.err);
    cli_result_free(&r);
    const char *over[] = {"-m", model, "--moe-stream", "-p", "Hello", "-n", "2", "--route-replay", trace,
                          "--route-replay-guess-right", "1.5", NULL};
    CHECK(cli_run(over, &r) == 0);
    CHECK_MSG(r.exit_code == 1 && cli_one_line_error(&r) && strstr(r.err, "--route-replay-guess-right"), "1.5: %s",
              r.err);
    cli_result_free(&r);

    /* steps out of order with a negative one, a step past 2^32, one near
     * INT32_MAX (indices below the table, truncated and overflowing sizes
     * before): one line, exit 1, whatever the steps */
    const char *bad_steps[] = {"0,1,1,0,0,1\n0,1,-1,2,3,2\n0,1,0,0,0,3\n", "0,1,0,0,0,1\n0,1,4294967296,0,0,1\n",
                               "0,1,0,0,0,1\n0,1,2147483647,0,0,1\n"};
    for (size_t i = 0; i < sizeof bad_steps / sizeof bad_steps[0]; i++) {
        char bad[1200];
        snprintf(bad, sizeof bad, "%s/bad-steps.csv", dir);
        FILE *file = fopen(bad, "w");
        CHECK(file != NULL);
        if (!file)
            continue;
        fprintf(file, "# route_trace v1\n# model=m arch=qwen3moe n_layer=3 n_expert=32 n_expert_used=4\n"
                      "turn,phase,step,layer,slot,expert\n%s",
                bad_steps[i]);
        fclose(file);
        const char *args[] = {"-m", model, "--moe-stream", "-p", "Hello", "-n", "2", "--route-replay", bad, NULL};
        CHECK(cli_run(args, &r) == 0);
        CHECK_MSG(r.signal == 0 && r.exit_code == 1 && cli_one_line_error(&r) && strstr(r.err, "is outside"),
                  "bad steps %zu: exit %d signal %d: %s", i, r.exit_code, r.signal, r.err);
        cli_result_free(&r);
    }
    free(recorded_text);
    free(replayed_text);
    return test_finish();
}
