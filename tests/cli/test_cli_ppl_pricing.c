/* The perplexity pricing instruments of bmoe-cli on the trained qwen3moe
 * (models/): --ppl-step prints the very figures --ppl prints (the logits are
 * batch-invariant), resident, streamed through a cache larger than the
 * experts and through one smaller than one token's; the ppl: line, the
 * ppl-line: lines and the ppl-choice: log-probabilities equal what this test
 * computes itself from the rows of logits bmoe-cli --logits-out dumps for
 * the same token ids (the ids from the library's tokenizer, the rows to
 * score, the targets, the softmax and the argmax chosen here, from the
 * flags' definitions); --ppl-skip moves the first scored row; a --ppl-list
 * line scores what it scores alone; the true continuation of a held-out
 * Shakespeare scene scores above its words shuffled; every refusal is one
 * line and exit status 1. */
#include <math.h>

#include "bmoe.h"
#include "cli_run.h"

static char model_path[1024], held_out[1024];
static bmoe_model *model;
static int32_t n_vocab;

/* A file in the scratch folder with text in it; returns its path. */
static const char *scratch_file(char *path, size_t size, const char *name, const char *text)
{
    snprintf(path, size, "%s/ppl-pricing-%d-%s", test_tmp_dir(), (int)getpid(), name);
    FILE *file = fopen(path, "wb");
    CHECK(file && fwrite(text, 1, strlen(text), file) == strlen(text));
    if (file)
        fclose(file);
    return path;
}

/* Runs bmoe-cli; its stdout when it exits 0 (the caller frees it), else NULL. */
static char *run_ok(const char *const *args)
{
    cli_result r;
    if (cli_run(args, &r) != 0) {
        CHECK(0);
        return NULL;
    }
    CHECK_MSG(r.exit_code == 0, "%s %s %s: exit %d: %s", args[2], args[3], args[4] ? args[4] : "", r.exit_code,
              r.err);
    char *out = r.exit_code == 0 ? r.out : NULL;
    if (out)
        r.out = NULL;
    cli_result_free(&r);
    return out;
}

/* stdout without the lines that say what a run cost (ppl-policy:,
 * ppl-stream:): what --ppl and --ppl-step must print alike. */
static char *figures_only(const char *out)
{
    char *kept = calloc(1, strlen(out) + 1);
    for (const char *line = out; *line;) {
        const char *end = strchr(line, '\n');
        size_t length = end ? (size_t)(end - line) + 1 : strlen(line);
        if (strncmp(line, "ppl-policy: ", 12) != 0 && strncmp(line, "ppl-stream: ", 12) != 0)
            strncat(kept, line, length);
        line += length;
    }
    return kept;
}

/* The line of out that starts with prefix (from the prefix on), or NULL. */
static const char *find_line(const char *out, const char *prefix)
{
    size_t length = strlen(prefix);
    for (const char *line = out; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
        if (strncmp(line, prefix, length) == 0)
            return line;
    return NULL;
}

typedef struct summary {
    long long scored, hits, hits_of;
    double nll, perplexity, percent;
} summary;

/* The ppl: line, the whole of it in its format. */
static bool parse_summary(const char *out, summary *s)
{
    const char *line = out ? find_line(out, "ppl: ") : NULL;
    int used = 0;
    memset(s, 0, sizeof *s);
    return line &&
           sscanf(line, "ppl: %lld tokens scored, nll %lf, perplexity %lf, next-token hits %lld/%lld (%lf%%)%n",
                  &s->scored, &s->nll, &s->perplexity, &s->hits, &s->hits_of, &s->percent, &used) == 6 &&
           line[used] == '\n';
}

/* What this test computes from rows of logits: the tally of the rows it
 * is told to score, each against the token after it. */
typedef struct expected {
    long long scored, hits;
    double nll_sum;
} expected;

/* -log p(target) of one row, in long double, and whether the target is
 * the row's first maximum. */
static void score_row(const float *row, int32_t target, expected *e)
{
    long double top = row[0];
    int32_t best = 0;
    for (int32_t i = 1; i < n_vocab; i++)
        if (row[i] > row[best])
            best = i;
    top = row[best];
    long double sum = 0.0L;
    for (int32_t i = 0; i < n_vocab; i++)
        sum += expl((long double)row[i] - top);
    e->nll_sum += (double)(logl(sum) + top - (long double)row[target]);
    e->scored++;
    e->hits += best == target;
}

/* Tokens of text as bmoe-cli's perplexity reads text: BOS as the
 * vocabulary asks, special text not parsed. */
static int32_t *tokenize(const char *text, int32_t *n_tokens)
{
    size_t length = strlen(text);
    int32_t capacity = (int32_t)length + 16;
    int32_t *tokens = malloc((size_t)capacity * sizeof *tokens);
    bmoe_error error = {0};
    *n_tokens = tokens ? bmoe_tokenize(model, text, length, true, false, tokens, capacity, &error) : -1;
    CHECK_MSG(*n_tokens > 0 && *n_tokens <= capacity, "tokenize: %s", error.message);
    return tokens;
}

/* The rows bmoe-cli computes for ids fed as one prefill (--prompt-ids
 * --logits-out), read back; n rows of n_vocab. */
static float *dump_logits(const int32_t *ids, int32_t n)
{
    char *list = malloc((size_t)n * 12 + 1), *at = list;
    for (int32_t i = 0; i < n; i++)
        at += sprintf(at, "%s%d", i ? "," : "", ids[i]);
    char path[1200];
    snprintf(path, sizeof path, "%s/ppl-pricing-%d.f32", test_tmp_dir(), (int)getpid());
    const char *args[] = {"-m", model_path, "--prompt-ids", list, "--logits-out", path, "-t", "2", NULL};
    char *out = run_ok(args);
    free(out);
    free(list);
    size_t size = 0;
    float *rows = test_read_file(path, &size);
    unlink(path);
    CHECK_MSG(rows && size == (size_t)n * (size_t)n_vocab * sizeof(float), "%zu bytes of logits for %d rows", size,
              n);
    return rows;
}

/* Scores rows first_row..n-2 of ids (each against the next id) from the dumped logits. */
static void expect_rows(const int32_t *ids, int32_t n, int32_t first_row, expected *e)
{
    if (first_row > n - 2)
        return;
    float *rows = dump_logits(ids, n);
    if (!rows)
        return;
    for (int32_t j = first_row; j <= n - 2; j++)
        score_row(rows + (size_t)j * (size_t)n_vocab, ids[j + 1], e);
    free(rows);
}

/* The printed figures against this test's: counts exact, means within the
 * printed rounding. */
static void check_summary(const char *what, const summary *got, const expected *e)
{
    double mean = e->nll_sum / (double)e->scored;
    CHECK_MSG(got->scored == e->scored && got->hits_of == e->scored && got->hits == e->hits,
              "%s: %lld scored, %lld/%lld hits; want %lld, %lld", what, got->scored, got->hits, got->hits_of,
              e->scored, e->hits);
    CHECK_MSG(fabs(got->nll - mean) <= 0.5e-4 + 1e-9, "%s: nll %.4f, want %.6f", what, got->nll, mean);
    CHECK_MSG(fabs(got->perplexity - exp(mean)) <= 0.5e-4 + 1e-9 * exp(mean), "%s: perplexity %.4f, want %.6f", what,
              got->perplexity, exp(mean));
    double percent = 100.0 * (double)e->hits / (double)e->scored;
    CHECK_MSG(fabs(got->percent - percent) <= 0.05 + 1e-9, "%s: %.1f %% hits, want %.3f", what, got->percent, percent);
}

/* --ppl: the ppl: line against the dumped logits of each chunk, with the
 * llama.cpp rule and with --ppl-skip (which moves the first scored row,
 * and so the count, exactly). */
static void test_file_figures(void)
{
    /* the first lines of the held-out text: enough for two chunks of 32 */
    char *text = test_read_file(held_out, NULL);
    CHECK(text != NULL);
    if (!text)
        return;
    text[900] = '\0';
    char path[1200];
    scratch_file(path, sizeof path, "head.txt", text);
    free(text);
    int32_t n_tokens = 0;
    char *head = test_read_file(path, NULL);
    int32_t *tokens = tokenize(head, &n_tokens);
    free(head);
    const int32_t n_ctx = 32, n_chunks = 2;
    CHECK_MSG(n_tokens >= n_ctx * n_chunks, "%d tokens", n_tokens);
    int32_t bos = bmoe_token_bos(model);
    bool adds_bos = bos >= 0 && tokens[0] == bos;

    const struct {
        const char *skip; /* NULL: not typed */
        int32_t first_row;
    } cases[] = {{NULL, n_ctx / 2}, {"4", 4}, {"0", 0}, {"30", 30}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        expected e = {0};
        for (int32_t c = 0; c < n_chunks; c++) {
            int32_t chunk[32];
            memcpy(chunk, tokens + c * n_ctx, sizeof chunk);
            if (adds_bos)
                chunk[0] = bos;
            expect_rows(chunk, n_ctx, cases[k].first_row, &e);
        }
        CHECK(e.scored == (long long)n_chunks * (n_ctx - 1 - cases[k].first_row));
        const char *args[16] = {"-m", model_path, "--ppl", path, "-c", "32", "--chunks", "2", "-t", "2", NULL};
        if (cases[k].skip) {
            args[10] = "--ppl-skip";
            args[11] = cases[k].skip;
        }
        char *out = run_ok(args);
        summary got;
        CHECK_MSG(parse_summary(out, &got), "--ppl-skip %s: no ppl: line in %s", cases[k].skip ? cases[k].skip : "-",
                  out ? out : "");
        char what[64];
        snprintf(what, sizeof what, "--ppl, first row %d", cases[k].first_row);
        check_summary(what, &got, &e);
        /* the llama.cpp line says the same perplexity */
        const char *final = out ? strstr(out, "Final estimate: PPL = ") : NULL;
        CHECK(final && fabs(strtod(final + 22, NULL) - got.perplexity) <= 1e-4 * got.perplexity);
        free(out);
    }
    /* a skip that leaves no row of a chunk */
    const char *too_far[] = {"-m", model_path, "--ppl", path, "-c", "32", "--ppl-skip", "31", NULL};
    cli_result r;
    if (cli_run(too_far, &r) == 0) {
        CHECK_MSG(r.exit_code == 1 && cli_one_line_error(&r) && strstr(r.err, "--ppl-skip 31"), "exit %d: %s",
                  r.exit_code, r.err);
        cli_result_free(&r);
    }
    unlink(path);
    free(tokens);
}

/* "ppl-policy: D/R routed experts dropped (P%), S/K slots substituted (Q%)" */
static void check_policy_line(const char *out)
{
    const char *line = find_line(out, "ppl-policy: ");
    unsigned long long dropped, routed, substituted, reranked;
    double dropped_percent, substituted_percent;
    int used = 0;
    bool parsed = line && sscanf(line,
                                 "ppl-policy: %llu/%llu routed experts dropped (%lf%%), %llu/%llu slots substituted "
                                 "(%lf%%)%n",
                                 &dropped, &routed, &dropped_percent, &substituted, &reranked, &substituted_percent,
                                 &used) == 6 &&
                  line[used] == '\n';
    CHECK_MSG(parsed, "ppl-policy line: %s", line ? line : "(none)");
    if (!parsed)
        return;
    /* no lever is on: nothing dropped, nothing substituted */
    CHECK(dropped == 0 && substituted == 0 && dropped_percent == 0.0 && substituted_percent == 0.0);
    CHECK(reranked <= routed);
}

typedef struct stream_figures {
    double mib, mib_per_token, hit;
} stream_figures;

static bool parse_stream_line(const char *out, stream_figures *f)
{
    const char *line = find_line(out, "ppl-stream: ");
    int used = 0;
    return line &&
           sscanf(line, "ppl-stream: %lf MiB read, %lf MiB/token, cache hit %lf%%%n", &f->mib, &f->mib_per_token,
                  &f->hit, &used) == 3 &&
           line[used] == '\n';
}

/* --ppl-step against --ppl: the same bytes but for the cost lines, which
 * say what the single-token path read. */
static void test_step_equals_batch(void)
{
    static const struct {
        const char *ctx, *chunks, *cache_mb; /* cache_mb NULL: resident */
        const char *skip;
    } cases[] = {
        {"128", "3", NULL, NULL},
        {"64", "2", NULL, "5"},
        {"64", "2", "64", NULL}, /* every expert fits */
        {"64", "2", "1", NULL},  /* less than one token's experts: evictions all the way */
    };
    stream_figures big = {0}, small = {0};
    /* sanitized: not the first, the longest, whose resident chunks the
     * second case runs too (and the default skip the streamed ones) */
    for (size_t k = TEST_SANITIZED ? 1 : 0; k < sizeof cases / sizeof cases[0]; k++) {
        const char *args[24] = {"-m", model_path, "--ppl", held_out, "-c", cases[k].ctx, "--chunks", cases[k].chunks,
                                "-t", "2", NULL};
        int n = 10;
        if (cases[k].cache_mb) {
            args[n++] = "--moe-stream";
            args[n++] = "--cache-mb";
            args[n++] = cases[k].cache_mb;
        }
        if (cases[k].skip) {
            args[n++] = "--ppl-skip";
            args[n++] = cases[k].skip;
        }
        char *batch = run_ok(args);
        args[n++] = "--ppl-step";
        char *step = run_ok(args);
        if (!batch || !step) {
            free(batch);
            free(step);
            continue;
        }
        char *batch_figures = figures_only(batch), *step_figures = figures_only(step);
        summary s;
        CHECK_MSG(parse_summary(step, &s) && s.scored > 0, "case %zu: %s", k, step);
        CHECK_MSG(strcmp(batch_figures, step_figures) == 0, "case %zu: --ppl\n%s--ppl-step\n%s", k, batch_figures,
                  step_figures);
        CHECK_MSG(!find_line(batch, "ppl-policy: "), "case %zu: a ppl-policy line without --ppl-step", k);
        check_policy_line(step);
        stream_figures f;
        bool streamed = parse_stream_line(step, &f);
        CHECK_MSG(streamed == (cases[k].cache_mb != NULL), "case %zu: ppl-stream line %s", k,
                  streamed ? "on a resident model" : "missing");
        CHECK(streamed == parse_stream_line(batch, &(stream_figures){0}));
        if (streamed) {
            /* every token but each chunk's last was evaluated */
            double evaluated = atof(cases[k].chunks) * (atof(cases[k].ctx) - 1);
            CHECK_MSG(f.mib > 0 && fabs(f.mib_per_token - f.mib / evaluated) <= 0.0005 + 0.005 * f.mib_per_token,
                      "case %zu: %.2f MiB, %.3f MiB/token over %.0f tokens", k, f.mib, f.mib_per_token, evaluated);
            CHECK(f.hit >= 0 && f.hit <= 100);
            if (strcmp(cases[k].cache_mb, "64") == 0)
                big = f;
            else
                small = f;
        }
        printf("case %zu: %s", k, strstr(step, "ppl: "));
        free(batch_figures);
        free(step_figures);
        free(batch);
        free(step);
    }
    /* the same tokens through a cache that holds every expert: read once, hit after */
    CHECK_MSG(big.hit > small.hit + 50 && big.mib < small.mib, "cache 64 MiB: %.1f %% hit, %.2f MiB; 1 MiB: %.1f %%, %.2f MiB",
              big.hit, big.mib, small.hit, small.mib);
}

/* The ppl-line: of line number `number` without its number, or "". */
static void line_figures(const char *out, int number, char *figures, size_t size)
{
    char prefix[32];
    snprintf(prefix, sizeof prefix, "ppl-line: %d ", number);
    const char *line = out ? find_line(out, prefix) : NULL;
    figures[0] = '\0';
    if (line) {
        line += strlen(prefix);
        size_t n = strcspn(line, "\n");
        snprintf(figures, size, "%.*s", (int)(n < size ? n : size - 1), line);
    }
}

/* --ppl-list: each line's figures against its dumped logits and against a
 * run of that line alone; empty lines skipped (but counted), a short line
 * scores nothing, CRLF is a line end, a long line refused by number. */
static void test_list(void)
{
    static const char *texts[] = {
        "Good morrow, neighbour Baptista.",
        "I have a daughter, sir, called Katharina.",
        "You wrong me, Signior Gremio: give me leave.",
    };
    char all[512], path[1200];
    snprintf(all, sizeof all, "%s\n%s\n%s\n", texts[0], texts[1], texts[2]);
    scratch_file(path, sizeof path, "three.txt", all);
    const char *args[] = {"-m", model_path, "--ppl-list", path, "-t", "2", NULL, NULL};
    char *together = run_ok(args);
    args[6] = "--ppl-step";
    char *stepped = run_ok(args);
    args[6] = NULL;
    if (together && stepped) {
        char *a = figures_only(together), *b = figures_only(stepped);
        CHECK_MSG(strcmp(a, b) == 0, "--ppl-list\n%s--ppl-list --ppl-step\n%s", a, b);
        free(a);
        free(b);
    }
    expected total = {0};
    for (int i = 0; i < 3; i++) {
        /* alone */
        char one[1200];
        char text[256];
        snprintf(text, sizeof text, "%s\n", texts[i]);
        scratch_file(one, sizeof one, "one.txt", text);
        const char *alone_args[] = {"-m", model_path, "--ppl-list", one, "-t", "2", NULL};
        char *alone = run_ok(alone_args);
        char in_file[128], by_itself[128];
        line_figures(together, i + 1, in_file, sizeof in_file);
        line_figures(alone, 1, by_itself, sizeof by_itself);
        CHECK_MSG(in_file[0] && strcmp(in_file, by_itself) == 0, "line %d: '%s' in the file, '%s' alone", i + 1,
                  in_file, by_itself);
        free(alone);
        unlink(one);
        /* from the dumped logits: rows from --ppl-skip's default, 8, on */
        int32_t n = 0;
        int32_t *tokens = tokenize(texts[i], &n);
        expected e = {0};
        expect_rows(tokens, n, 8, &e);
        free(tokens);
        long long scored = -1, hits = -1;
        double nll = 0, perplexity = 0;
        int used = 0;
        CHECK_MSG(sscanf(in_file, "%lld nll %lf perplexity %lf hits %lld%n", &scored, &nll, &perplexity, &hits, &used) ==
                          4 && in_file[used] == '\0',
                  "line %d: '%s'", i + 1, in_file);
        CHECK_MSG(e.scored > 0 && scored == e.scored && hits == e.hits, "line %d: %lld scored %lld hits; want %lld %lld",
                  i + 1, scored, hits, e.scored, e.hits);
        double mean = e.nll_sum / (double)e.scored;
        CHECK_MSG(fabs(nll - mean) <= 0.5e-4 + 1e-9 && fabs(perplexity - exp(mean)) <= 0.5e-4 + 1e-9 * exp(mean),
                  "line %d: nll %.4f perplexity %.4f, want %.6f %.6f", i + 1, nll, perplexity, mean, exp(mean));
        total.scored += e.scored;
        total.hits += e.hits;
        total.nll_sum += e.nll_sum;
    }
    summary got;
    CHECK_MSG(parse_summary(together, &got), "no ppl: line in %s", together ? together : "");
    check_summary("--ppl-list", &got, &total);

    /* --ppl-skip 3: three more rows of each line than the default's 8 */
    const char *skip_args[] = {"-m", model_path, "--ppl-list", path, "-t", "2", "--ppl-skip", "3", NULL};
    char *skipped = run_ok(skip_args);
    summary fewer;
    CHECK_MSG(parse_summary(skipped, &fewer) && fewer.scored == total.scored + 3 * 5, "--ppl-skip 3: %lld scored, want %lld",
              fewer.scored, total.scored + 15);
    free(skipped);
    free(together);
    free(stepped);

    /* an empty line is skipped but numbered; a line of fewer than N+2
     * tokens scores nothing; "\r\n" ends a line as "\n" does */
    int32_t n_short = 0;
    int32_t *short_tokens = tokenize("God", &n_short);
    free(short_tokens);
    CHECK(n_short < 8 + 2);
    char mixed[512];
    snprintf(mixed, sizeof mixed, "%s\r\n\r\n\n%s\nGod\n%s", texts[0], texts[1], texts[2]);
    scratch_file(path, sizeof path, "mixed.txt", mixed);
    const char *mixed_args[] = {"-m", model_path, "--ppl-list", path, "-t", "2", NULL};
    char *out = run_ok(mixed_args);
    if (out) {
        char figures[128];
        line_figures(out, 5, figures, sizeof figures);
        CHECK_MSG(strcmp(figures, "0 nll - perplexity - hits 0") == 0, "the short line: '%s'", figures);
        int n_lines = 0;
        for (const char *l = out; (l = find_line(l, "ppl-line: ")); l++)
            n_lines++;
        CHECK_MSG(n_lines == 4, "%d ppl-line lines: %s", n_lines, out);
        char first[128], fourth[128], sixth[128];
        line_figures(out, 1, first, sizeof first);
        line_figures(out, 4, fourth, sizeof fourth);
        line_figures(out, 6, sixth, sizeof sixth);
        summary s;
        CHECK_MSG(first[0] && fourth[0] && sixth[0] && parse_summary(out, &s) && s.scored == total.scored,
                  "numbering or totals: %s", out);
        free(out);
    }
    /* a line longer than the context, named by its number */
    const char *short_context[] = {"-m", model_path, "--ppl-list", path, "-c", "10", NULL};
    cli_result r;
    if (cli_run(short_context, &r) == 0) {
        CHECK_MSG(r.exit_code == 1 && cli_one_line_error(&r) && strstr(r.err, "line 1 ") && r.out_length == 0,
                  "exit %d: %s", r.exit_code, r.err);
        cli_result_free(&r);
    }
    unlink(path);
}

/* A choice's "\," and "\\" for --ppl-choices. */
static void append_escaped(char *list, size_t size, const char *choice)
{
    size_t used = strlen(list);
    if (used)
        list[used++] = ',';
    for (const char *c = choice; *c && used + 3 < size; c++) {
        if (*c == ',' || *c == '\\')
            list[used++] = '\\';
        list[used++] = *c;
    }
    list[used] = '\0';
}

/* --ppl-choices: each choice's log-probability against the dumped logits
 * of prompt+choice (its tokens: those after the longest prefix shared with
 * the prompt's), the best the highest (ties to the lower index), and on
 * the trained model the true continuation above its words shuffled. */
static void test_choices(void)
{
    const char *prompt = "GREMIO:\nGood morrow, neighbour Baptista.\n\nBAPTISTA:\nGood morrow, neighbour Gremio.\n"
                         "God save you, gentlemen!\n\nPETRUCHIO:\n";
    const char *choices[] = {
        "a you, Pray, daughter And sir! not have good you", /* the words below, shuffled */
        "And you, good sir! Pray, have you not a daughter", /* heldout.txt's next line */
        "\\ back, slash",
    };
    int n_choices = (int)(sizeof choices / sizeof choices[0]);
    char list[1024] = "";
    for (int i = 0; i < n_choices; i++)
        append_escaped(list, sizeof list, choices[i]);
    const char *args[] = {"-m", model_path, "-p", prompt, "--ppl-choices", list, "-t", "2", NULL, NULL};
    char *out = run_ok(args);
    args[8] = "--ppl-step";
    char *stepped = run_ok(args);
    if (!out || !stepped) {
        free(out);
        free(stepped);
        return;
    }
    char *a = figures_only(out), *b = figures_only(stepped);
    CHECK_MSG(strcmp(a, b) == 0, "--ppl-choices\n%s--ppl-step\n%s", a, b);
    free(a);
    free(b);
    check_policy_line(stepped);

    int32_t n_prompt = 0;
    int32_t *prompt_tokens = tokenize(prompt, &n_prompt);
    double logprob[8] = {0};
    for (int i = 0; i < n_choices; i++) {
        char joined[512];
        snprintf(joined, sizeof joined, "%s%s", prompt, choices[i]);
        int32_t n = 0;
        int32_t *tokens = tokenize(joined, &n);
        int32_t common = 0;
        while (common < n_prompt && common < n && tokens[common] == prompt_tokens[common])
            common++;
        expected e = {0};
        expect_rows(tokens, n, common - 1, &e);
        free(tokens);
        char prefix[32];
        snprintf(prefix, sizeof prefix, "ppl-choice: %d ", i);
        const char *line = find_line(out, prefix);
        double sum = 0, mean = 0;
        int index = -1, n_scored = -1, used = 0;
        CHECK_MSG(line && sscanf(line, "ppl-choice: %d logprob %lf tokens %d mean %lf%n", &index, &sum, &n_scored,
                                 &mean, &used) == 4 && line[used] == '\n',
                  "choice %d: %s", i, line ? line : "(no line)");
        CHECK_MSG(n_scored == e.scored && e.scored == n - common, "choice %d: %d tokens, want %lld", i, n_scored,
                  e.scored);
        CHECK_MSG(fabs(sum + e.nll_sum) <= 0.5e-4 + 1e-9 && fabs(mean + e.nll_sum / (double)e.scored) <= 0.5e-4 + 1e-9,
                  "choice %d: logprob %.4f mean %.4f, want %.6f %.6f", i, sum, mean, -e.nll_sum,
                  -e.nll_sum / (double)e.scored);
        logprob[i] = -e.nll_sum;
    }
    free(prompt_tokens);
    int best = 0;
    for (int i = 1; i < n_choices; i++)
        if (logprob[i] > logprob[best])
            best = i;
    char want[64];
    snprintf(want, sizeof want, "ppl-choices: best %d of %d\n", best, n_choices);
    const char *line = find_line(out, "ppl-choices: ");
    CHECK_MSG(line && strncmp(line, want, strlen(want)) == 0, "%s: want %s", line ? line : "(no line)", want);
    /* the trained model knows its Shakespeare */
    CHECK_MSG(logprob[1] > logprob[0] + 1.0, "true %.4f, shuffled %.4f", logprob[1], logprob[0]);
    printf("choices: true %.4f, shuffled %.4f\n", logprob[1], logprob[0]);
    free(out);
    free(stepped);

    /* a tie goes to the lower index */
    const char *tie[] = {"-m", model_path, "-p", prompt, "--ppl-choices", "And you,And you", "-t", "2", NULL};
    out = run_ok(tie);
    const char *first = out ? find_line(out, "ppl-choice: 0 logprob ") : NULL;
    const char *second = out ? find_line(out, "ppl-choice: 1 logprob ") : NULL;
    CHECK_MSG(out && strncmp(out, "ppl-choices: best 0 of 2\n", 25) == 0 && first && second &&
                  strcspn(first, "\n") == strcspn(second, "\n") &&
                  strncmp(first + 13, second + 13, strcspn(first, "\n") - 13) == 0,
              "a tie: %s", out ? out : "");
    free(out);
}

/* Bad command lines: exit 1, one line on stderr saying what is wrong, nothing on stdout. */
static void test_refusals(void)
{
    char list_path[1200];
    scratch_file(list_path, sizeof list_path, "refusals.txt", "Good morrow.\n");
    const char *L = list_path, *M = model_path, *H = held_out;
    const struct {
        const char *args[12];
        const char *says;
    } cases[] = {
        {{"-m", M, "--ppl-step", NULL}, "--ppl-step needs --ppl, --ppl-list or --ppl-choices"},
        {{"-m", M, "-p", "x", "--ppl-step", NULL}, "--ppl-step needs"},
        {{"-m", M, "-p", "x", "--ppl-skip", "3", NULL}, "--ppl-skip needs"},
        {{"-m", M, "--ppl-choices", "a,b", NULL}, "needs -p"},
        {{"-m", M, "--ppl", H, "--ppl-list", L, NULL}, "cannot be used together"},
        {{"-m", M, "-p", "x", "--ppl-choices", "a,,b", NULL}, "choice 1 of 'a,,b' is empty"},
        {{"-m", M, "-p", "x", "--ppl-choices", ",a", NULL}, "is empty"},
        {{"-m", M, "-p", "x", "--ppl-choices", "a,", NULL}, "is empty"},
        {{"-m", M, "-p", "x", "--ppl-choices", "", NULL}, "is empty"},
        {{"-m", M, "--ppl", H, "--ppl-skip", "x", NULL}, "not an integer"},
        {{"-m", M, "--ppl", H, "--ppl-skip", "-1", NULL}, "out of range"},
        {{"-m", M, "--ppl-list", L, "--ppl-skip", "2.5", NULL}, "not an integer"},
        {{"-m", M, "-p", "x", "--ppl-choices", "a", "--ppl-skip", "2", NULL}, "does nothing with --ppl-choices"},
        {{"-m", M, "-p", "x", "--ppl-choices", "a", "--ppl", H, NULL}, "--ppl-choices"},
        {{"-m", M, "--ppl-list", L, "--chunks", "2", NULL}, "--chunks needs --ppl"},
        {{"-m", M, "--ppl-list", L, "-p", "x", NULL}, "--ppl-list cannot be combined"},
        {{"-m", M, "--ppl-list", "/nonexistent/list.txt", NULL}, "/nonexistent/list.txt"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cli_result r;
        if (cli_run(cases[i].args, &r) != 0) {
            CHECK(0);
            continue;
        }
        CHECK_MSG(r.exit_code == 1 && cli_one_line_error(&r) && strstr(r.err, cases[i].says) && r.out_length == 0,
                  "case %zu: exit %d, stderr %s", i, r.exit_code, r.err);
        cli_result_free(&r);
    }
    unlink(list_path);
    /* --help documents each flag */
    const char *help[] = {"--help", NULL};
    cli_result r;
    if (cli_run(help, &r) == 0) {
        CHECK(r.exit_code == 0 && strstr(r.out, "--ppl-skip N") && strstr(r.out, "--ppl-step") &&
              strstr(r.out, "--ppl-list FILE") && strstr(r.out, "--ppl-choices A,B") && strstr(r.out, "ppl-policy:") &&
              strstr(r.out, "ppl-stream:"));
        cli_result_free(&r);
    }
}

int main(void)
{
    snprintf(model_path, sizeof model_path, "%s/qwen3moe-shakespeare-q8_0.gguf", BMOE_MODELS_DIR);
    snprintf(held_out, sizeof held_out, "%s/heldout.txt", BMOE_MODELS_DIR);
    bmoe_model_params params = bmoe_model_default_params();
    params.stream.auto_enable = false;
    bmoe_error error = {0};
    model = bmoe_model_load(model_path, &params, &error); /* for its tokenizer */
    CHECK_MSG(model != NULL, "%s: %s", model_path, error.message);
    if (!model)
        return test_finish();
    n_vocab = bmoe_model_n_vocab(model);

    test_refusals();
    test_file_figures();
    test_step_equals_batch();
    test_list();
    test_choices();
    bmoe_model_free(model);
    return test_finish();
}
