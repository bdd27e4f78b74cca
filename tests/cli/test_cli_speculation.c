/* bmoe-cli with speculative decoding, end to end on the oracle's tiny
 * models (random weights: the text is gibberish, the arithmetic real) and
 * the small model trained in models/ (whose text repeats a repetitive
 * prompt, so the n-gram source's default settings draft and are accepted):
 *  - --ngram leaves the output byte for byte as plain decoding's, greedy and
 *    seeded sampling, resident and --moe-stream (a cache smaller than the
 *    experts), 1 and 2 threads, an attention-only model and a hybrid one
 *    (whose recurrent state a rejected draft cuts back); every such run
 *    drafts, so the identity is not the trivial one;
 *  - what the ngram: lines count is what the CSV and BMOE_DONE count: a
 *    token is decoded alone or accepted as a draft (decodes + accepted =
 *    tokens), the CSV's mtp_batch column adds up to the tokens with one
 *    0-batch row per accepted draft, the trailer and a session's BMOE_DONE
 *    carry the same counters;
 *  - --draft-replay of a plain run's --ids-out: accept gives 100 %
 *    acceptance, reject 0 %, each with the plain run's output;
 *  - --mtp on a tiny-qwen35moe with a nextn block (bmoe-mkmodel
 *    --nextn-layers 1), and, each in a run of its own (the architecture as
 *    the argument), on the tiny-glm4moe, tiny-bailingmoe2 and
 *    tiny-deepseek3-mtp (deepseek2, DeepSeek-V3's MTP block) presets (which
 *    write one), leaves text and ids byte for byte as plain decoding's with
 *    --draft 1..4, greedy and seeded sampling, resident and streamed
 *    (streamed --mtp also equals resident plain decoding), 1 and 2 threads,
 *    and in a session, prefixes reused or not; every run drafts at every
 *    step with room and verifies the drafts in batches (random weights: few
 *    or no drafts are accepted, which is fine), and its mtp: lines agree
 *    with the CSV, its trailer and BMOE_DONE;
 *  - --mtp-p-min (each of those models): 1 drafts nothing (every step a
 *    plain decode, and the coverage line says so), a floor found by halving
 *    from 1/2 drafts some but fewer than no floor, and 0.5 and that floor
 *    leave the output as plain decoding's, greedy and sampled; the CSV
 *    preamble carries the floor;
 *  - --mtp is refused in one line on a model without a nextn block, with a
 *    non-zero exit, so are --draft 0 and --draft 9, --mtp-p-min out of
 *    [0, 1], not a number, with --ngram or without --mtp, and the flags'
 *    other misuses.
 * Expected values come from the definitions (a plain run, the counters'
 * meaning), never from the runs being checked. */
#include <stdint.h>

#include "cli_run.h"

#define N_PREDICT_TEXT "32"
enum { N_PREDICT = 32, MAX_ARGS = 48 };

/* Repetitive, so that the n-gram source finds matches from the start. */
static const char PROMPT[] = "the cat sat on the mat. the cat sat on the mat. the cat sat on the mat. the dog sat on "
                             "the log. the dog sat on the log.";

static char qwen[1100], hybrid[1100], mtp_model[1200];
static const char trained[] = BMOE_MODELS_DIR "/qwen3moe-shakespeare-q8_0.gguf";

/* A command line being built (the strings must outlive the run). */
typedef struct args {
    const char *arg[MAX_ARGS];
    int count;
} args;

static void push(args *a, const char *arg)
{
    if (a->count < MAX_ARGS - 1)
        a->arg[a->count++] = arg;
    a->arg[a->count] = NULL;
}

/* One generation's settings. */
typedef struct config {
    const char *name;
    const char *model;
    const char *threads;
    bool sampled;   /* --temp 0.8 --seed 7, top-k and top-p at their defaults */
    bool streamed;  /* --moe-stream with a 1 MiB cache */
} config;

static void push_config(args *a, const config *c)
{
    const char *base[] = {"-m", c->model, "-p", PROMPT, "-n", N_PREDICT_TEXT, "--ignore-eos", "-t", c->threads, NULL};
    for (int i = 0; base[i]; i++)
        push(a, base[i]);
    if (c->sampled) {
        push(a, "--temp");
        push(a, "0.8");
        push(a, "--seed");
        push(a, "7");
    }
    if (c->streamed) {
        push(a, "--moe-stream");
        push(a, "--cache-mb");
        push(a, "1");
    }
}

/* A run that must succeed: stdout with the end-of-run lines cut off (its
 * text_length bytes: a random-weights model may write any byte, a NUL
 * too), the lines themselves and stderr. false when it failed (already
 * reported). */
typedef struct output {
    char *text, *report, *err;
    size_t text_length;
} output;

static bool run_ok(const char *what, const args *a, output *o)
{
    memset(o, 0, sizeof *o);
    cli_result r;
    if (cli_run(a->arg, &r) != 0) {
        CHECK_MSG(0, "%s: bmoe-cli did not start", what);
        return false;
    }
    bool ok = r.exit_code == 0 && cli_cut_report(&r);
    CHECK_MSG(ok, "%s: exit %d, signal %d: %s", what, r.exit_code, r.signal, r.err);
    o->text = r.out;
    o->text_length = ok ? r.out_length : 0;
    o->report = r.report;
    o->err = r.err;
    return ok;
}

/* The two runs wrote the same text, byte for byte. */
static bool same_text(const output *a, const output *b)
{
    return a->text && b->text && a->text_length == b->text_length &&
           memcmp(a->text, b->text, a->text_length) == 0;
}

static void output_free(output *o)
{
    free(o->text);
    free(o->report);
    free(o->err);
}

/* The drafting lines of a report: "<source>: A/D drafts accepted (..), T
 * tokens per verify decode (d decodes for n tokens)" and, for a source that
 * may abstain, "<source>: drafted on x of y steps". */
typedef struct drafting {
    long long accepted, drafted, decodes, tokens, drafted_steps, steps;
    bool coverage;
} drafting;

static bool parse_drafting(const char *report, const char *source, drafting *d)
{
    memset(d, 0, sizeof *d);
    char prefix[32];
    snprintf(prefix, sizeof prefix, "\n%s: ", source);
    const char *first = strstr(report, prefix);
    if (!first)
        return false;
    char format[160];
    snprintf(format, sizeof format, "%s: %%lld/%%lld drafts accepted", source);
    if (sscanf(first + 1, format, &d->accepted, &d->drafted) != 2)
        return false;
    const char *decodes = strstr(first, " tokens per verify decode (");
    if (!decodes || sscanf(decodes, " tokens per verify decode (%lld decodes for %lld tokens)", &d->decodes,
                           &d->tokens) != 2)
        return false;
    snprintf(prefix, sizeof prefix, "\n%s: drafted on ", source);
    const char *coverage = strstr(report, prefix);
    if (coverage) {
        snprintf(format, sizeof format, "%s: drafted on %%lld of %%lld steps", source);
        d->coverage = sscanf(coverage + 1, format, &d->drafted_steps, &d->steps) == 2;
        if (!d->coverage)
            return false;
    }
    return true;
}

/* A key's number in a "k=v k=v" line, or -1 when absent. */
static double key_number(const char *line, const char *key)
{
    size_t length = strlen(key);
    for (const char *c = line; c && *c; c++)
        if ((c == line || c[-1] == ' ') && strncmp(c, key, length) == 0 && c[length] == '=')
            return strtod(c + length + 1, NULL);
    return -1;
}

/* A JSON line's integer key ("key":N), or -1 when absent. */
static long long json_integer(const char *line, const char *key)
{
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\":", key);
    const char *at = line ? strstr(line, pattern) : NULL;
    return at ? strtoll(at + strlen(pattern), NULL, 10) : -1;
}

/* The CSV of a drafted run: rows, the sum of mtp_batch, its zeros, and the
 * trailer's drafting keys; checked against the drafting lines. */
static void check_csv(const char *what, const char *path, const drafting *d)
{
    size_t length = 0;
    char *csv = cli_read_all(path, &length);
    CHECK_MSG(csv != NULL, "%s: no CSV at %s", what, path);
    if (!csv)
        return;
    int batch_column = -1, draft_column = -1, rows = 0, zeros = 0;
    long long batch_sum = 0;
    const char *summary = NULL;
    bool header_seen = false;
    for (char *line = strtok(csv, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "# summary ", 10) == 0) {
            summary = line;
            continue;
        }
        if (line[0] == '#')
            continue;
        if (!header_seen) { /* the columns by name, as the contract asks readers to */
            header_seen = true;
            int column = 0;
            for (const char *c = line; c; c = strchr(c, ','), c = c ? c + 1 : NULL, column++) {
                if (strncmp(c, "mtp_batch,", 10) == 0)
                    batch_column = column;
                if (strncmp(c, "mtp_draft_ms,", 13) == 0)
                    draft_column = column;
            }
            CHECK_MSG(batch_column >= 0 && draft_column == batch_column + 1, "%s: no mtp_batch column", what);
            continue;
        }
        const char *cell = line;
        for (int column = 0; cell && column < batch_column; column++) {
            cell = strchr(cell, ',');
            cell = cell ? cell + 1 : NULL;
        }
        long batch = cell ? strtol(cell, NULL, 10) : -1;
        CHECK_MSG(batch >= 0 && batch <= 9, "%s: row %d: mtp_batch %ld", what, rows + 1, batch);
        batch_sum += batch;
        zeros += batch == 0;
        rows++;
    }
    CHECK_MSG(rows == d->tokens, "%s: %d CSV rows for %lld tokens", what, rows, d->tokens);
    CHECK_MSG(batch_sum == d->tokens, "%s: mtp_batch adds up to %lld, not the %lld tokens", what, batch_sum,
              d->tokens);
    CHECK_MSG(zeros == d->accepted, "%s: %d rows of a group's later tokens for %lld accepted drafts", what, zeros,
              d->accepted);
    CHECK_MSG(summary && key_number(summary, "mtp_drafted") == (double)d->drafted &&
                  key_number(summary, "mtp_accepted") == (double)d->accepted &&
                  key_number(summary, "mtp_decodes") == (double)d->decodes &&
                  (d->coverage ? key_number(summary, "drafted_steps") == (double)d->drafted_steps
                               : key_number(summary, "drafted_steps") > 0 &&
                                     key_number(summary, "drafted_steps") <= (double)d->decodes) &&
                  key_number(summary, "mtp_draft_s/tok") >= 0 && key_number(summary, "tokens") == (double)d->tokens,
              "%s: the trailer's drafting keys differ from the drafting lines: %s", what, summary ? summary : "(none)");
    free(csv);
}

/* The extra flags set a non-zero --mtp-p-min. */
static bool has_floor(const char *const *extra)
{
    for (int i = 0; extra[i] && extra[i + 1]; i++)
        if (strcmp(extra[i], "--mtp-p-min") == 0)
            return strtod(extra[i + 1], NULL) > 0.0;
    return false;
}

/* Two files' bytes are the same (both readable). */
static bool same_file(const char *a, const char *b)
{
    size_t length_a = 0, length_b = 0;
    char *bytes_a = test_read_file(a, &length_a), *bytes_b = test_read_file(b, &length_b);
    bool same = bytes_a && bytes_b && length_a == length_b && memcmp(bytes_a, bytes_b, length_a) == 0;
    free(bytes_a);
    free(bytes_b);
    return same;
}

/* The same generation without and with a draft source (source: "ngram" or
 * "mtp", its flag --<source>): the same bytes and ids; the drafting lines
 * agree with themselves and with the CSV. reference (may be NULL): another
 * configuration whose plain run must give the same text too. */
static void check_source(const config *c, const char *source, const char *const *extra, bool accepts,
                         const config *reference)
{
    char what[160], csv[1200], flag[32], plain_ids[1200], drafted_ids[1200];
    snprintf(what, sizeof what, "%s --%s", c->name, source);
    snprintf(flag, sizeof flag, "--%s", source);
    snprintf(csv, sizeof csv, "%s/spec-%d.csv", test_tmp_dir(), (int)getpid());
    snprintf(plain_ids, sizeof plain_ids, "%s/spec-%d-plain.ids", test_tmp_dir(), (int)getpid());
    snprintf(drafted_ids, sizeof drafted_ids, "%s/spec-%d-drafted.ids", test_tmp_dir(), (int)getpid());
    args plain = {0}, drafted = {0};
    push_config(&plain, c);
    push(&plain, "--ids-out");
    push(&plain, plain_ids);
    push_config(&drafted, c);
    push(&drafted, flag);
    push(&drafted, "--draft-always"); /* the counts below assume every proposal drafts */
    for (int i = 0; extra[i]; i++)
        push(&drafted, extra[i]);
    push(&drafted, "--csv");
    push(&drafted, csv);
    push(&drafted, "--ids-out");
    push(&drafted, drafted_ids);
    output p, s;
    bool plain_ok = run_ok(c->name, &plain, &p), drafted_ok = run_ok(what, &drafted, &s);
    if (plain_ok && drafted_ok) {
        CHECK_MSG(same_text(&p, &s), "%s: the text differs from plain decoding's:\n%s\n---\n%s", what,
                  p.text, s.text);
        CHECK_MSG(same_file(plain_ids, drafted_ids), "%s: the ids differ from plain decoding's", what);
        CHECK_MSG(!strstr(p.report, "drafts accepted"), "%s: drafting lines without drafting", c->name);
        drafting d;
        bool parsed = parse_drafting(s.report, source, &d);
        /* n-gram drafting may abstain, and so may the head under a
         * probability floor: they say on how many steps they drafted */
        bool abstains = strcmp(source, "ngram") == 0 || has_floor(extra);
        CHECK_MSG(parsed && d.coverage == abstains, "%s: no %s: lines in\n%s", what, source, s.report);
        if (parsed && d.coverage == abstains) {
            CHECK_MSG(d.tokens == N_PREDICT && d.decodes + d.accepted == d.tokens,
                      "%s: %lld decodes and %lld accepted drafts for %lld tokens", what, d.decodes, d.accepted,
                      d.tokens);
            /* a floor may refuse every draft (check_mtp_floor makes sure some pass) */
            CHECK_MSG(!abstains || ((d.drafted_steps > 0 || has_floor(extra)) && d.drafted_steps <= d.steps &&
                                    d.steps == d.decodes),
                      "%s: drafted on %lld of %lld steps", what, d.drafted_steps, d.steps);
            /* the head drafts up to --draft tokens at every step with room:
             * more drafts than verify decodes */
            CHECK_MSG(abstains || d.drafted >= d.decodes - 1, "%s: %lld drafts in %lld decodes", what, d.drafted,
                      d.decodes);
            CHECK_MSG(d.accepted <= d.drafted, "%s: %lld/%lld accepted", what, d.accepted, d.drafted);
            CHECK_MSG(!accepts || d.accepted > 0, "%s: no draft accepted", what);
            check_csv(what, csv, &d);
        }
    }
    if (reference && drafted_ok) {
        args other = {0};
        push_config(&other, reference);
        output o;
        if (run_ok(reference->name, &other, &o))
            CHECK_MSG(same_text(&o, &s), "%s: the text differs from %s's plain decoding", what,
                      reference->name);
        output_free(&o);
    }
    unlink(csv);
    unlink(plain_ids);
    unlink(drafted_ids);
    output_free(&p);
    output_free(&s);
}

static void check_ngram(const config *c, const char *const *extra, bool accepts)
{
    check_source(c, "ngram", extra, accepts, NULL);
}

static void check_session(const char *source, const char *model, bool accepts);
static void check_mtp_floor(const config *greedy, const config *sampled);

/* The generated text of a session's output: its delta_text values in order
 * (JSON escapes kept), each turn's followed by a newline at its BMOE_DONE. */
static char *session_text(const char *out)
{
    size_t capacity = strlen(out) + 1, length = 0;
    char *text = malloc(capacity);
    if (!text)
        return NULL;
    for (const char *line = out; line && *line;) {
        const char *end = strchr(line, '\n');
        const char *delta = strstr(line, "\"delta_text\":\"");
        if (delta && (!end || delta < end)) {
            for (const char *c = delta + 14; *c && *c != '"' && (!end || c < end); c++) {
                if (*c == '\\' && c[1])
                    text[length++] = *c++;
                text[length++] = *c;
            }
        } else if (strncmp(line, "BMOE_DONE ", 10) == 0) {
            text[length++] = '\n';
        }
        line = end ? end + 1 : NULL;
    }
    text[length] = '\0';
    return text;
}

/* Three turns, the later ones reusing part of the kept context (the head's
 * rows there come from an earlier turn): --mtp gives plain decoding's text. */
static void check_session_reuse(const char *model)
{
    static const char *const flags[] = {"", "--mtp --draft 3"};
    char *texts[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++) {
        char script[4096];
        snprintf(script, sizeof script,
                 "printf '%%s\\n' "
                 "'{\"cmd\":\"generate\",\"id\":1,\"prompt\":\"the cat sat on the mat\",\"n_predict\":12}' "
                 "'{\"cmd\":\"generate\",\"id\":2,\"prompt\":\"the cat sat on the log and\",\"n_predict\":12}' "
                 "'{\"cmd\":\"generate\",\"id\":3,\"prompt\":\"the cat sat on the mat\",\"n_predict\":12}' "
                 "'{\"cmd\":\"close\"}' | \"$BMOE_CLI\" -m '%s' --session --ignore-eos -t 2 %s",
                 model, flags[i]);
        cli_result r;
        if (cli_run_shell(script, &r) != 0)
            continue;
        CHECK_MSG(r.exit_code == 0, "session %s: exit %d: %s", flags[i], r.exit_code, r.err);
        texts[i] = session_text(r.out);
        cli_result_free(&r);
    }
    CHECK_MSG(texts[0] && texts[1] && strlen(texts[0]) > 3 && strcmp(texts[0], texts[1]) == 0,
              "session --mtp with reused prefixes: the text differs from plain decoding's:\n%s\n---\n%s",
              texts[0] ? texts[0] : "", texts[1] ? texts[1] : "");
    free(texts[0]);
    free(texts[1]);
}

/* A model whose nextn block --mtp drafts with: its architecture (what the
 * runs are called, and the argument that runs its checks alone) and how
 * bmoe-mkmodel writes it with the block. */
typedef struct head_model {
    const char *arch;
    const char *shape_flags;
} head_model;

static const head_model head_models[] = {
    {"qwen35moe", "--shape tiny-qwen35moe --nextn-layers 1"},
    {"glm4moe", "--shape tiny-glm4moe"},
    {"bailingmoe2", "--shape tiny-bailingmoe2"},
    {"deepseek2", "--shape tiny-deepseek3-mtp"},
};

/* --mtp on h's model with --draft 1..4, greedy and sampled, resident and
 * streamed, and in a session. */
static void check_mtp(const head_model *h)
{
    char path[1200], command[4096];
    snprintf(path, sizeof path, "%s/spec-%d-%s-nextn.gguf", test_tmp_dir(), (int)getpid(), h->arch);
    snprintf(command, sizeof command, "'%s/bmoe-mkmodel' %s --type f32 --quiet -o '%s'", BMOE_BIN_DIR,
             h->shape_flags, path);
    cli_result made;
    if (cli_run_shell(command, &made) != 0 || made.exit_code != 0) {
        CHECK_MSG(0, "bmoe-mkmodel %s failed", h->shape_flags);
        return;
    }
    cli_result_free(&made);
    snprintf(mtp_model, sizeof mtp_model, "%s", path);
    char names[5][96];
    static const char *const settings[5] = {"greedy resident -t 1", "sampled resident -t 2", "greedy streamed -t 2",
                                            "sampled streamed -t 1", "sampled resident -t 1"};
    for (int i = 0; i < 5; i++)
        snprintf(names[i], sizeof names[i], "%s+nextn %s", h->arch, settings[i]);
    const config greedy = {names[0], mtp_model, "1", false, false};
    const config sampled = {names[1], mtp_model, "2", true, false};
    const config greedy_streamed = {names[2], mtp_model, "2", false, true};
    const config sampled_streamed = {names[3], mtp_model, "1", true, true};
    const char *const draft_counts[] = {"1", "2", "3", "4"};
    /* sanitized: none; check_mtp_floor's run without a floor is greedy
     * resident --draft 3 with a CSV (the counts differ only in how many) */
    for (int i = 0; i < 4 && !TEST_SANITIZED; i++) {
        const char *extra[] = {"--draft", draft_counts[i], NULL};
        check_source(&greedy, "mtp", extra, false, NULL);
    }
    const char *three[] = {"--draft", "3", NULL}, *two[] = {"--draft", "2", NULL}, *four[] = {"--draft", "4", NULL};
    const config sampled_resident_one = {names[4], mtp_model, "1", true, false};
    /* sanitized: greedy resident (check_mtp_floor) and sampled streamed
     * (below) hold each value of the two settings these two runs add */
    if (!TEST_SANITIZED) {
        check_source(&sampled, "mtp", three, false, NULL);
        check_source(&greedy_streamed, "mtp", two, false, &greedy);
    }
    check_source(&sampled_streamed, "mtp", four, false, &sampled_resident_one);
    check_session("mtp", mtp_model, false);
    check_session_reuse(mtp_model);
    check_mtp_floor(&greedy, &sampled);
    unlink(path);
}

/* One greedy --mtp --draft 3 run of c under --mtp-p-min p_min (NULL: not
 * given), with a CSV: its drafting lines, its output (*o, the caller's to
 * free) and the preamble's mtp_p_min (-1 when absent). false when it
 * failed (already reported). */
static bool run_floor(const config *c, const char *p_min, drafting *d, output *o, double *preamble)
{
    char what[160], csv[1200];
    snprintf(what, sizeof what, "%s --mtp --mtp-p-min %s", c->name, p_min ? p_min : "(none)");
    snprintf(csv, sizeof csv, "%s/spec-%d-floor.csv", test_tmp_dir(), (int)getpid());
    args a = {0};
    push_config(&a, c);
    const char *flags[] = {"--mtp", "--draft-always", "--draft", "3", "--csv", csv,
                           p_min ? "--mtp-p-min" : NULL, p_min, NULL};
    for (int i = 0; flags[i]; i++)
        push(&a, flags[i]);
    bool ok = run_ok(what, &a, o) && parse_drafting(o->report, "mtp", d);
    CHECK_MSG(ok, "%s: no mtp: lines", what);
    size_t length = 0;
    char *written = cli_read_all(csv, &length);
    /* the key is in the preamble only */
    *preamble = written ? key_number(strstr(written, " mtp_p_min=") ? strstr(written, " mtp_p_min=") + 1 : "",
                                     "mtp_p_min")
                        : -1;
    free(written);
    unlink(csv);
    return ok;
}

/* --mtp-p-min: a floor of 1 refuses every draft (random weights make no
 * token certain), so each step decodes plainly and says so; halving the
 * floor from 1/2 finds one that lets some drafts through, fewer than no
 * floor does (a step's head probabilities depend only on the text before
 * it, which is plain decoding's whatever the floor); every run gives plain
 * decoding's text, and the CSV preamble the floor. That floor and 0.5 then
 * go through check_source, greedy and sampled. */
static void check_mtp_floor(const config *greedy, const config *sampled)
{
    args plain = {0};
    push_config(&plain, greedy);
    output p;
    if (!run_ok(greedy->name, &plain, &p)) {
        output_free(&p);
        return;
    }
    drafting none, refused;
    output text;
    double preamble = -1;
    if (run_floor(greedy, NULL, &none, &text, &preamble))
        CHECK_MSG(none.drafted > 0 && !none.coverage && preamble == 0.0 && same_text(&text, &p),
                  "--mtp without a floor: %lld drafts, coverage line %d, mtp_p_min=%g", none.drafted,
                  none.coverage, preamble);
    output_free(&text);
    if (run_floor(greedy, "1", &refused, &text, &preamble))
        CHECK_MSG(refused.drafted == 0 && refused.coverage && refused.drafted_steps == 0 &&
                      refused.decodes == N_PREDICT && preamble == 1.0 && same_text(&text, &p),
                  "--mtp-p-min 1: %lld drafts on %lld steps, %lld decodes, mtp_p_min=%g", refused.drafted,
                  refused.drafted_steps, refused.decodes, preamble);
    output_free(&text);
    static const char *const floors[] = {"0.5", "0.25", "0.125", "0.0625", "0.03125", "0.015625", "0.0078125",
                                         "0.00390625", "0.001953125", NULL};
    const char *middle = NULL;
    for (int i = 0; floors[i] && !middle; i++) {
        drafting d;
        if (!run_floor(greedy, floors[i], &d, &text, &preamble)) {
            output_free(&text);
            break;
        }
        CHECK_MSG(same_text(&text, &p) && preamble == strtod(floors[i], NULL) && d.drafted <= none.drafted,
                  "--mtp-p-min %s: %lld drafts (%lld without a floor), mtp_p_min=%g, text %s", floors[i],
                  d.drafted, none.drafted, preamble, same_text(&text, &p) ? "the same" : "another");
        output_free(&text);
        if (d.drafted > 0) {
            CHECK_MSG(d.drafted < none.drafted, "--mtp-p-min %s: all %lld drafts passed", floors[i], d.drafted);
            middle = floors[i];
        }
    }
    CHECK_MSG(middle != NULL, "no floor down to 1/512 let a draft through");
    output_free(&p);
    /* sanitized: no more; the search's runs took the floor through drafting
     * and the CSV, and checked their text against plain decoding's */
    if (TEST_SANITIZED)
        return;
    const char *half[] = {"--draft", "3", "--mtp-p-min", "0.5", NULL};
    check_source(greedy, "mtp", half, false, NULL);
    check_source(sampled, "mtp", half, false, NULL);
    if (!middle || strcmp(middle, "0.5") == 0)
        return;
    const char *drafts_some[] = {"--draft", "3", "--mtp-p-min", middle, NULL};
    check_source(greedy, "mtp", drafts_some, false, NULL);
    check_source(sampled, "mtp", drafts_some, false, NULL);
}

/* A plain run writes its ids; replayed as drafts they are all accepted,
 * shifted none is; the output stays the plain run's. */
static void check_replay(const config *c)
{
    char ids[1200], what[160];
    snprintf(ids, sizeof ids, "%s/spec-%d.ids", test_tmp_dir(), (int)getpid());
    args plain = {0};
    push_config(&plain, c);
    push(&plain, "--ids-out");
    push(&plain, ids);
    output p;
    if (!run_ok(c->name, &plain, &p)) {
        output_free(&p);
        return;
    }
    /* accept, reject, and accept with each draft kept right at rate 0.5 */
    static const char *const modes[] = {"accept", "reject", "accept"};
    for (int m = 0; m < 3; m++) {
        bool half = m == 2;
        snprintf(what, sizeof what, "%s --draft-replay-mode %s%s", c->name, modes[m],
                 half ? " --draft-replay-rate 0.5" : "");
        args replay = {0};
        push_config(&replay, c);
        const char *flags[] = {"--draft-replay", ids, "--draft-replay-mode", modes[m], "--draft", "4",
                               half ? "--draft-replay-rate" : NULL, "0.5", NULL};
        for (int i = 0; flags[i]; i++)
            push(&replay, flags[i]);
        output r;
        if (run_ok(what, &replay, &r)) {
            CHECK_MSG(same_text(&p, &r), "%s: the text differs from plain decoding's", what);
            drafting d;
            bool parsed = parse_drafting(r.report, "replay", &d);
            CHECK_MSG(parsed, "%s: no replay: lines in\n%s", what, r.report);
            bool accept = m == 0;
            /* accept: every step but the last (no room left) drafts 4 or
             * what is left, all kept; reject: drafts at every step, none
             * kept; half: some kept, some not */
            bool kept = half ? d.accepted > 0 && d.accepted < d.drafted : d.accepted == (accept ? d.drafted : 0);
            CHECK_MSG(parsed && d.drafted > 0 && kept && d.tokens == N_PREDICT && d.decodes + d.accepted == d.tokens,
                      "%s: %lld/%lld accepted, %lld decodes for %lld tokens", what, d.accepted, d.drafted, d.decodes,
                      d.tokens);
            if (half) {
                output_free(&r);
                continue;
            }
            CHECK_MSG(!accept || d.decodes <= (N_PREDICT + 4) / 5, "%s: %lld decodes with every draft accepted", what,
                      d.decodes);
            CHECK_MSG(strstr(r.report, accept ? "drafts accepted (100.0%)" : "drafts accepted (0.0%)"), "%s: %s",
                      what, r.report);
            CHECK_MSG(!strstr(r.err, "left the list"), "%s: the run left the replayed list: %s", what, r.err);
        }
        output_free(&r);
    }
    unlink(ids);
    output_free(&p);
}

/* A session's BMOE_DONE counts what the one-shot run's drafting lines count
 * for the same greedy generation (source "ngram" or "mtp" on model). */
static void check_session(const char *source, const char *model, bool accepts)
{
    char flag[32], what[64];
    snprintf(flag, sizeof flag, "--%s", source);
    snprintf(what, sizeof what, "one-shot %s", flag);
    args one_shot = {0};
    config c = {"greedy", model, "2", false, false};
    push_config(&one_shot, &c);
    push(&one_shot, flag);
    push(&one_shot, "--draft-always");
    output o;
    drafting d;
    bool ok = run_ok(what, &one_shot, &o) && parse_drafting(o.report, source, &d);
    CHECK_MSG(ok, "%s: no %s: lines", what, source);
    char script[4096];
    snprintf(script, sizeof script,
             "printf '%%s\\n' '{\"cmd\":\"generate\",\"id\":1,\"prompt\":\"%s\",\"n_predict\":%d}' "
             "'{\"cmd\":\"close\"}' | \"$BMOE_CLI\" -m '%s' --session --ignore-eos -t 2 %s --draft-always",
             PROMPT, N_PREDICT, model, flag);
    cli_result r;
    if (ok && cli_run_shell(script, &r) == 0) {
        const char *done = strstr(r.out, "BMOE_DONE ");
        CHECK_MSG(r.exit_code == 0 && done, "--session %s: exit %d: %s", flag, r.exit_code, r.err);
        /* the head drafts at every step with room: drafted_steps counts
         * them, not the one-shot lines (which have no coverage line) */
        long long steps = json_integer(done, "drafted_steps");
        bool steps_agree = d.coverage ? steps == d.drafted_steps : steps > 0 && steps <= d.decodes;
        CHECK_MSG(json_integer(done, "tokens") == d.tokens && json_integer(done, "mtp_drafted") == d.drafted &&
                      json_integer(done, "mtp_accepted") == d.accepted &&
                      json_integer(done, "mtp_decodes") == d.decodes && steps_agree && d.drafted > 0 &&
                      (!accepts || d.accepted > 0),
                  "BMOE_DONE's counters differ from the %s: lines (%lld/%lld, %lld decodes, %lld steps): %s", source,
                  d.accepted, d.drafted, d.decodes, d.drafted_steps, done ? done : r.out);
        cli_result_free(&r);
    }
    output_free(&o);
}

/* Refused: exit status, one line naming what is wrong, nothing on stdout. */
static void check_refused(const char *what, const char *const *extra, int status, const char *says)
{
    args a = {0};
    const char *base[] = {"-m", qwen, "-p", "hi", "-n", "4", NULL};
    for (int i = 0; base[i]; i++)
        push(&a, base[i]);
    for (int i = 0; extra[i]; i++)
        push(&a, extra[i]);
    cli_result r;
    if (cli_run(a.arg, &r) != 0) {
        CHECK(0);
        return;
    }
    CHECK_MSG(r.exit_code == status && cli_one_line_error(&r) && strstr(r.err, says) && r.out_length == 0,
              "%s: exit %d (want %d), stderr: %s", what, r.exit_code, status, r.err);
    cli_result_free(&r);
}

static void check_refusals(void)
{
    const char *mtp[] = {"--mtp", NULL};
    check_refused("--mtp", mtp, 1, "nextn"); /* the oracle's qwen3moe has no next-token head */
    const char *always[] = {"--draft-always", NULL};
    check_refused("--draft-always alone", always, 1, "--draft-always needs a draft source");
    const char *zero[] = {"--ngram", "--draft", "0", NULL}, *nine[] = {"--ngram", "--draft", "9", NULL};
    check_refused("--draft 0", zero, 1, "--draft: 0 is out of range [1, 8]");
    check_refused("--draft 9", nine, 1, "--draft: 9 is out of range [1, 8]");
    const char *alone[] = {"--draft", "2", NULL};
    check_refused("--draft alone", alone, 1, "needs a draft source");
    const char *both[] = {"--ngram", "--mtp", NULL};
    check_refused("--ngram --mtp", both, 2, "two draft sources");
    const char *lengths[] = {"--ngram", "--ngram-min-match", "6", "--ngram-max-match", "5", NULL};
    check_refused("min > max", lengths, 1, "--ngram-min-match 6");
    const char *lossy[] = {"--ngram", "--moe-stream", "--route-ahead", "1", NULL};
    check_refused("--ngram --route-ahead", lossy, 2, "exclude each other");
    const char *low[] = {"--mtp", "--mtp-p-min", "-0.1", NULL}, *high[] = {"--mtp", "--mtp-p-min", "1.5", NULL};
    const char *word[] = {"--mtp", "--mtp-p-min", "abc", NULL};
    check_refused("--mtp-p-min -0.1", low, 1, "--mtp-p-min: -0.1 is out of range [0, 1]");
    check_refused("--mtp-p-min 1.5", high, 1, "--mtp-p-min: 1.5 is out of range [0, 1]");
    check_refused("--mtp-p-min abc", word, 1, "--mtp-p-min: 'abc' is not a finite number");
    const char *floor_ngram[] = {"--ngram", "--mtp-p-min", "0.5", NULL};
    check_refused("--ngram --mtp-p-min 0.5", floor_ngram, 2, "--ngram drafts without");
    const char *floor_alone[] = {"--mtp-p-min", "0.5", NULL};
    check_refused("--mtp-p-min alone", floor_alone, 1, "--mtp-p-min needs --mtp");
    const char *mode[] = {"--draft-replay-mode", "reject", NULL};
    check_refused("--draft-replay-mode alone", mode, 1, "needs --draft-replay");
    const char *rate[] = {"--draft-replay-rate", "0.5", NULL};
    check_refused("--draft-replay-rate alone", rate, 1, "needs --draft-replay");
    /* a session with --mtp ends before BMOE_READY, as a fatal BMOE_ERROR */
    char script[2048];
    snprintf(script, sizeof script, "\"$BMOE_CLI\" -m '%s' --session --mtp </dev/null", qwen);
    cli_result r;
    if (cli_run_shell(script, &r) == 0) {
        CHECK_MSG(r.exit_code == 1 && strncmp(r.out, "BMOE_ERROR ", 11) == 0 && strstr(r.out, "\"fatal\":true") &&
                      strstr(r.out, "nextn") && !strstr(r.out, "BMOE_READY"),
                  "--session --mtp: exit %d: %s", r.exit_code, r.out);
        cli_result_free(&r);
    }
}

int main(int argc, char **argv)
{
    /* an architecture's --mtp checks alone (ctest runs each apart) */
    if (argc > 1) {
        const head_model *h = NULL;
        for (size_t i = 0; i < sizeof head_models / sizeof head_models[0]; i++)
            if (strcmp(argv[1], head_models[i].arch) == 0)
                h = &head_models[i];
        CHECK_MSG(h != NULL, "no model with an MTP head of architecture '%s'", argv[1]);
        if (h)
            check_mtp(h);
        return test_finish();
    }
    test_shared_path(qwen, sizeof qwen, "oracle/models/qwen3moe-tiny-f32.gguf");
    test_shared_path(hybrid, sizeof hybrid, "oracle/models/qwen35moe-tiny-f32.gguf");
    /* each setting in both values at least once: greedy / sampled,
     * resident / streamed, 1 / 2 threads, attention-only / hybrid; the
     * shortest match of 1 drafts at most steps, rejections included */
    static const config configs[] = {
        {"trained greedy resident -t 1", trained, "1", false, false},
        {"qwen3moe greedy streamed -t 2", qwen, "2", false, true},
        {"qwen3moe sampled resident -t 2", qwen, "2", true, false},
        {"qwen35moe sampled streamed -t 1", hybrid, "1", true, true},
    };
    const char *defaults[] = {NULL};
    const char *eager[] = {"--ngram-min-match", "1", "--draft", "8", NULL};
    const char *short_drafts[] = {"--ngram-min-match", "1", "--ngram-max-match", "4", "--draft", "2", NULL};
    check_ngram(&configs[0], defaults, true);
    check_ngram(&configs[1], eager, false);
    /* sanitized: not the third, whose settings the others have each
     * (sampled, resident, 2 threads, an attention-only model; its match
     * lengths are numbers for the drafter); and the replays on the hybrid
     * only, whose rejections cut back its attention cache as an
     * attention-only model's and its recurrent state besides */
    if (!TEST_SANITIZED)
        check_ngram(&configs[2], short_drafts, false);
    check_ngram(&configs[3], eager, false);
    if (!TEST_SANITIZED)
        check_replay(&configs[1]);
    check_replay(&configs[3]);
    check_mtp(&head_models[0]);
    check_session("ngram", trained, true);
    check_refusals();
    return test_finish();
}
