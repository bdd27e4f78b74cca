/* Teacher-forced scoring: perplexity of a file, of each line of a file, and
 * the log-probability of choices after a prompt. Text is tokenized with BOS
 * added as the vocabulary asks and special text not parsed (it is scored as
 * the characters it is). A row of logits at position j predicts the token
 * at j+1; a run sums -log p(target) over the rows it scores.
 *
 * --ppl counts the way llama.cpp's perplexity tool counts so that the
 * numbers compare: the whole file is tokenized once, cut into chunks of
 * n_ctx tokens whose first token becomes BOS when the vocabulary adds one;
 * each chunk is evaluated from an empty cache and only its second half is
 * scored (rows [n_ctx/2, n_ctx-1)), because early positions have too little
 * context to say much about the model; --ppl-skip N moves the first scored
 * row to N.
 *
 * --ppl-step evaluates the very same tokens one per bmoe_eval call, the
 * decode path: the lossy levers act in decode only and a streamed model's
 * cache evolves token by token there, so a wide batch under-prices what a
 * cache-dependent lever costs a user. With every lever off the logits are
 * the same bits either way (the kernels are batch-invariant), and so are
 * the figures. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* The scored rows of a run, or of one line or choice of it. */
typedef struct ppl_tally {
    double nll_sum, nll_squared_sum;
    int64_t scored;
    int64_t hits; /* rows whose most likely token is the target */
} ppl_tally;

/* What every evaluation of a run shares. */
typedef struct ppl_evaluator {
    bmoe_context *context;
    int32_t n_vocab;
    int32_t piece; /* rows of logits per batched evaluation */
    float *logits; /* piece rows */
    bool step;
    bmoe_stats stats; /* summed over the run's evaluations */
} ppl_evaluator;

/* -log p(target) from one row of logits, in double. */
static double cli_negative_log_likelihood(const float *row, int32_t n_vocab, int32_t target)
{
    return bmoe_log_sum_exp(row, n_vocab) - (double)row[target];
}

static void ppl_tally_row(ppl_tally *tally, const float *row, int32_t n_vocab, int32_t target)
{
    double nll = cli_negative_log_likelihood(row, n_vocab, target);
    tally->nll_sum += nll;
    tally->nll_squared_sum += nll * nll;
    tally->scored++;
    int32_t best = 0; /* the lowest index among equal maxima, as greedy decoding picks */
    for (int32_t i = 1; i < n_vocab; i++)
        if (row[i] > row[best])
            best = i;
    tally->hits += best == target;
}

static void ppl_tally_add(ppl_tally *total, const ppl_tally *part)
{
    total->nll_sum += part->nll_sum;
    total->nll_squared_sum += part->nll_squared_sum;
    total->scored += part->scored;
    total->hits += part->hits;
}

static double ppl_percent(uint64_t part, uint64_t whole)
{
    return whole > 0 ? 100.0 * (double)part / (double)whole : 0.0;
}

/* One evaluation, its cost added to the run's. */
static int ppl_eval(ppl_evaluator *evaluator, const int32_t *tokens, int32_t n_tokens, bool all_logits,
                    bool want_logits, const char *unit, int32_t number)
{
    bmoe_stats stats;
    memset(&stats, 0, sizeof stats);
    bmoe_error error = {0};
    int status = bmoe_eval(evaluator->context, tokens, n_tokens, want_logits ? evaluator->logits : NULL,
                           all_logits, &stats, &error);
    bmoe_stats_add(&evaluator->stats, &stats);
    if (status != 0) {
        cli_fail("%s %d: %s", unit, number, error.message[0] ? error.message : "evaluation failed");
        return -1;
    }
    return 0;
}

/* Evaluates tokens from an empty cache and scores the rows at positions
 * first_row..n_tokens-2 into tally. The last token's row predicts nothing
 * here, so it is never evaluated; with no row to score nothing is. unit and
 * number name the sequence in an error. Returns 0 or -1 (message printed). */
static int ppl_score(ppl_evaluator *evaluator, const int32_t *tokens, int32_t n_tokens, int32_t first_row,
                     ppl_tally *tally, const char *unit, int32_t number)
{
    int32_t last_row = n_tokens - 2;
    if (first_row > last_row)
        return 0;
    int32_t n_vocab = evaluator->n_vocab;
    bmoe_context_truncate(evaluator->context, 0);
    if (evaluator->step) {
        for (int32_t j = 0; j <= last_row; j++) {
            bool scored = j >= first_row;
            if (ppl_eval(evaluator, tokens + j, 1, false, scored, unit, number) != 0)
                return -1;
            if (scored)
                ppl_tally_row(tally, evaluator->logits, n_vocab, tokens[j + 1]);
        }
        return 0;
    }
    /* The unscored rows need no logits. */
    if (first_row > 0 && ppl_eval(evaluator, tokens, first_row, false, false, unit, number) != 0)
        return -1;
    for (int32_t start = first_row; start <= last_row; start += evaluator->piece) {
        int32_t n = last_row + 1 - start < evaluator->piece ? last_row + 1 - start : evaluator->piece;
        if (ppl_eval(evaluator, tokens + start, n, true, true, unit, number) != 0)
            return -1;
        for (int32_t r = 0; r < n; r++)
            ppl_tally_row(tally, evaluator->logits + (size_t)r * (size_t)n_vocab, n_vocab, tokens[start + r + 1]);
    }
    return 0;
}

/* The buffers of an evaluator over context. Returns 0 or -1 (message printed). */
static int ppl_evaluator_init(ppl_evaluator *evaluator, bmoe_context *context, const bmoe_model *model,
                              const cli_options *options)
{
    memset(evaluator, 0, sizeof *evaluator);
    evaluator->context = context;
    evaluator->n_vocab = bmoe_model_n_vocab(model);
    evaluator->step = options->ppl_step;
    int32_t n_ctx = bmoe_context_n_ctx(context);
    int32_t piece = options->n_ubatch > 0 ? options->n_ubatch : 512;
    if (piece > n_ctx)
        piece = n_ctx;
    if (evaluator->step)
        piece = 1;
    evaluator->piece = piece;
    evaluator->logits = malloc((size_t)piece * (size_t)evaluator->n_vocab * sizeof *evaluator->logits);
    if (!evaluator->logits) {
        cli_fail("out of memory for %d rows of %d logits", piece, evaluator->n_vocab);
        return -1;
    }
    return 0;
}

/* The "ppl:" line over every row a run scored. */
static void ppl_print_summary(const ppl_tally *tally)
{
    if (tally->scored == 0) {
        printf("ppl: 0 tokens scored, nll -, perplexity -, next-token hits 0/0 (0.0%%)\n");
        return;
    }
    double mean = tally->nll_sum / (double)tally->scored;
    printf("ppl: %lld tokens scored, nll %.4f, perplexity %.4f, next-token hits %lld/%lld (%.1f%%)\n",
           (long long)tally->scored, mean, exp(mean), (long long)tally->hits, (long long)tally->scored,
           ppl_percent((uint64_t)tally->hits, (uint64_t)tally->scored));
}

/* What the run cost in the levers' and the streamer's terms, from the same
 * evaluations as its figures: the lossy levers act in decode, so their
 * counts are printed for --ppl-step only. */
static int ppl_print_costs(const ppl_evaluator *evaluator, const bmoe_model *model)
{
    const bmoe_stats *s = &evaluator->stats;
    if (evaluator->step)
        printf("ppl-policy: %llu/%llu routed experts dropped (%.1f%%), %llu/%llu slots substituted (%.1f%%)\n",
               (unsigned long long)s->experts_dropped, (unsigned long long)s->experts_routed,
               ppl_percent(s->experts_dropped, s->experts_routed), (unsigned long long)s->experts_substituted,
               (unsigned long long)s->experts_reranked, ppl_percent(s->experts_substituted, s->experts_reranked));
    bmoe_stream_state state;
    bmoe_model_get_stream_state(model, &state);
    if (state.streaming) {
        double mib = (double)s->read_bytes / (1024.0 * 1024.0);
        printf("ppl-stream: %.2f MiB read, %.3f MiB/token, cache hit %.1f%%\n", mib,
               s->n_tokens > 0 ? mib / s->n_tokens : 0.0,
               ppl_percent(s->cache_hits, s->cache_hits + s->cache_misses));
    }
    return cli_flush(stdout);
}

/* --ppl FILE, its text read */
static int ppl_run_file(const cli_options *options, bmoe_model *model, const char *text, size_t text_length,
                        double load_seconds)
{
    int status = 1;
    int32_t *tokens = NULL, *chunk = NULL;
    int32_t n_tokens = 0;
    bmoe_context *context = NULL;
    ppl_evaluator evaluator = {0};

    double tokenize_start = cli_now_seconds();
    if (cli_tokenize(model, text, text_length, true, false, &tokens, &n_tokens) != 0)
        goto done;
    double tokenize_seconds = cli_now_seconds() - tokenize_start;

    context = cli_create_context(model, options, options->n_ctx);
    if (!context)
        goto done;
    int32_t n_ctx = bmoe_context_n_ctx(context);
    if (n_ctx < 4) {
        cli_fail("--ppl needs a context of at least 4 tokens, not %d", n_ctx);
        goto done;
    }
    int32_t n_chunks = n_tokens / n_ctx;
    if (n_chunks == 0) {
        cli_fail("%s has %d tokens, fewer than one chunk of %d (lower -c)", options->ppl_path, n_tokens,
                 n_ctx);
        goto done;
    }
    if (options->ppl_chunks > 0 && options->ppl_chunks < n_chunks)
        n_chunks = options->ppl_chunks;
    int32_t first = options->ppl_skip_given ? options->ppl_skip : n_ctx / 2;
    if (first > n_ctx - 2) {
        cli_fail("--ppl-skip %d leaves nothing to score in chunks of %d tokens (at most %d)", first, n_ctx,
                 n_ctx - 2);
        goto done;
    }

    /* With parse_special off, a leading BOS can only come from add_special. */
    int32_t bos = bmoe_token_bos(model);
    bool adds_bos = bos >= 0 && n_tokens > 0 && tokens[0] == bos;

    if (ppl_evaluator_init(&evaluator, context, model, options) != 0)
        goto done;
    chunk = malloc((size_t)n_ctx * sizeof *chunk);
    if (!chunk) {
        cli_fail("out of memory for a chunk of %d tokens", n_ctx);
        goto done;
    }

    fprintf(stderr, "bmoe-cli: %d tokens in %.3f s; %d chunks of %d, scoring positions %d..%d%s\n", n_tokens,
            tokenize_seconds, n_chunks, n_ctx, first, n_ctx - 2, options->ppl_step ? ", one token at a time" : "");
    ppl_tally tally = {0};
    double eval_start = cli_now_seconds();
    for (int32_t c = 0; c < n_chunks; c++) {
        memcpy(chunk, tokens + (size_t)c * (size_t)n_ctx, (size_t)n_ctx * sizeof *chunk);
        if (adds_bos)
            chunk[0] = bos;
        if (ppl_score(&evaluator, chunk, n_ctx, first, &tally, "chunk", c + 1) != 0)
            goto done;
        printf("[%d]%.4f,", c + 1, exp(tally.nll_sum / (double)tally.scored));
        if (cli_flush(stdout) != 0)
            goto done;
    }
    double eval_seconds = cli_now_seconds() - eval_start;

    double count = (double)tally.scored;
    double mean = tally.nll_sum / count;
    double ppl = exp(mean);
    double variance = tally.nll_squared_sum / count - mean * mean;
    double ppl_error = tally.scored > 1 && variance > 0 ? ppl * sqrt(variance / (count - 1)) : 0.0;
    printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", ppl, ppl_error);
    ppl_print_summary(&tally);
    if (ppl_print_costs(&evaluator, model) != 0)
        goto done;
    fprintf(stderr, "bmoe-cli: load: %.3f s\n", load_seconds);
    fprintf(stderr, "bmoe-cli: evaluated %d chunks in %.3f s, %.2f tok/s\n", n_chunks, eval_seconds,
            eval_seconds > 0 ? (double)n_chunks * (n_ctx - 1) / eval_seconds : 0.0);
    status = 0;

done:
    free(chunk);
    free(evaluator.logits);
    free(tokens);
    bmoe_context_free(context);
    return status;
}

/* The non-empty lines of a --ppl-list file, each tokenized on its own. */
typedef struct ppl_line {
    int32_t number; /* in the file, from 1 (empty lines counted) */
    int32_t *tokens;
    int32_t n_tokens;
} ppl_line;

typedef struct ppl_lines {
    ppl_line *items;
    int32_t count, capacity;
} ppl_lines;

static void ppl_lines_free(ppl_lines *lines)
{
    for (int32_t i = 0; i < lines->count; i++)
        free(lines->items[i].tokens);
    free(lines->items);
    memset(lines, 0, sizeof *lines);
}

/* Splits text at "\n" (a "\r" before it is not part of the line) and
 * tokenizes each non-empty line into lines. Returns 0 or -1 (message
 * printed; lines then holds what was made, for ppl_lines_free). */
static int ppl_split_lines(const bmoe_model *model, const char *path, const char *text, size_t length,
                           ppl_lines *lines)
{
    int32_t number = 0;
    for (size_t at = 0; at < length;) {
        const char *newline = memchr(text + at, '\n', length - at);
        size_t end = newline ? (size_t)(newline - text) : length;
        size_t next = newline ? end + 1 : length;
        if (number == INT32_MAX || lines->count == INT32_MAX / 2) {
            cli_fail("%s has too many lines", path);
            return -1;
        }
        number++;
        if (end > at && text[end - 1] == '\r')
            end--;
        if (end > at) {
            if (lines->count == lines->capacity) {
                int32_t bigger = lines->capacity ? lines->capacity * 2 : 64;
                ppl_line *grown = realloc(lines->items, (size_t)bigger * sizeof *grown);
                if (!grown) {
                    cli_fail("out of memory for the lines of %s", path);
                    return -1;
                }
                lines->items = grown;
                lines->capacity = bigger;
            }
            ppl_line *line = &lines->items[lines->count];
            line->number = number;
            if (cli_tokenize(model, text + at, end - at, true, false, &line->tokens, &line->n_tokens) != 0)
                return -1;
            lines->count++;
        }
        at = next;
    }
    return 0;
}

/* --ppl-list FILE, its text read: each line from an empty context, the
 * rows from --ppl-skip on scored, so that the line's first tokens are its
 * context. */
static int ppl_run_list(const cli_options *options, bmoe_model *model, const char *text, size_t text_length,
                        double load_seconds)
{
    int status = 1;
    ppl_lines lines = {0};
    bmoe_context *context = NULL;
    ppl_evaluator evaluator = {0};
    const char *path = options->ppl_list_path;

    if (ppl_split_lines(model, path, text, text_length, &lines) != 0)
        goto done;
    if (lines.count == 0) {
        cli_fail("%s has no text to score (every line is empty)", path);
        goto done;
    }
    context = cli_create_context(model, options, options->n_ctx);
    if (!context)
        goto done;
    int32_t n_ctx = bmoe_context_n_ctx(context);
    int64_t n_tokens = 0;
    /* Every line is checked before any is scored: a long run never fails
     * at its last line for a reason known at its start. */
    for (int32_t i = 0; i < lines.count; i++) {
        if (lines.items[i].n_tokens > n_ctx) {
            cli_fail("%s line %d has %d tokens, more than the context of %d (raise -c)", path,
                     lines.items[i].number, lines.items[i].n_tokens, n_ctx);
            goto done;
        }
        n_tokens += lines.items[i].n_tokens;
    }
    if (ppl_evaluator_init(&evaluator, context, model, options) != 0)
        goto done;

    int32_t skip = options->ppl_skip;
    fprintf(stderr, "bmoe-cli: %d lines, %lld tokens; scoring positions %d.. of each line%s\n", lines.count,
            (long long)n_tokens, skip, options->ppl_step ? ", one token at a time" : "");
    ppl_tally total = {0};
    double eval_start = cli_now_seconds();
    for (int32_t i = 0; i < lines.count; i++) {
        const ppl_line *line = &lines.items[i];
        ppl_tally tally = {0};
        if (ppl_score(&evaluator, line->tokens, line->n_tokens, skip, &tally, "line", line->number) != 0)
            goto done;
        ppl_tally_add(&total, &tally);
        if (tally.scored > 0) {
            double mean = tally.nll_sum / (double)tally.scored;
            printf("ppl-line: %d %lld nll %.4f perplexity %.4f hits %lld\n", line->number,
                   (long long)tally.scored, mean, exp(mean), (long long)tally.hits);
        } else {
            printf("ppl-line: %d 0 nll - perplexity - hits 0\n", line->number);
        }
        if (cli_flush(stdout) != 0)
            goto done;
    }
    double eval_seconds = cli_now_seconds() - eval_start;
    ppl_print_summary(&total);
    if (ppl_print_costs(&evaluator, model) != 0)
        goto done;
    fprintf(stderr, "bmoe-cli: load: %.3f s\n", load_seconds);
    fprintf(stderr, "bmoe-cli: evaluated %d lines in %.3f s, %.2f tok/s\n", lines.count, eval_seconds,
            eval_seconds > 0 ? (double)evaluator.stats.n_tokens / eval_seconds : 0.0);
    status = 0;

done:
    free(evaluator.logits);
    bmoe_context_free(context);
    ppl_lines_free(&lines);
    return status;
}

/* One choice of --ppl-choices: the prompt and the choice tokenized as one
 * text, and where the choice's tokens start in it. */
typedef struct ppl_choice {
    int32_t *tokens;
    int32_t n_tokens;
    int32_t first; /* the choice's first token */
    ppl_tally tally;
} ppl_choice;

/* --ppl-choices A,B,... after -p PROMPT: log p(choice | prompt), summed
 * over the choice's tokens, for each choice from an empty context. */
static int ppl_run_choices(const cli_options *options, bmoe_model *model, double load_seconds)
{
    int status = 1;
    int32_t n_choices = options->n_ppl_choices;
    int32_t *prompt_tokens = NULL, n_prompt = 0;
    char *joined = NULL;
    bmoe_context *context = NULL;
    ppl_evaluator evaluator = {0};
    ppl_choice *choices = calloc((size_t)n_choices, sizeof *choices);
    if (!choices) {
        cli_fail("out of memory for %d choices", n_choices);
        return 1;
    }
    size_t prompt_length = strlen(options->prompt);
    if (cli_tokenize(model, options->prompt, prompt_length, true, false, &prompt_tokens, &n_prompt) != 0)
        goto done;
    int32_t longest = 0;
    for (int32_t i = 0; i < n_choices; i++) {
        ppl_choice *choice = &choices[i];
        size_t choice_length = strlen(options->ppl_choices[i]);
        free(joined);
        joined = malloc(prompt_length + choice_length + 1);
        if (!joined) {
            cli_fail("out of memory for choice %d", i);
            goto done;
        }
        memcpy(joined, options->prompt, prompt_length);
        memcpy(joined + prompt_length, options->ppl_choices[i], choice_length + 1);
        /* Tokenized together, not prompt then choice: that is the text a
         * model reads. BPE can merge across the boundary (" to" + "morrow"
         * into one token), so the choice's tokens are those after the
         * longest common prefix with the prompt's own tokens; a merged
         * token then counts as the choice's, its prompt bytes with it. */
        if (cli_tokenize(model, joined, prompt_length + choice_length, true, false, &choice->tokens,
                         &choice->n_tokens) != 0)
            goto done;
        int32_t common = 0;
        while (common < n_prompt && common < choice->n_tokens && prompt_tokens[common] == choice->tokens[common])
            common++;
        if (common == 0) {
            cli_fail("choice %d: nothing precedes its first token (the prompt is empty or merged into it, and "
                     "the vocabulary adds no BOS)", i);
            goto done;
        }
        if (common == choice->n_tokens) { /* cannot happen: the joined text has more bytes than the prompt */
            cli_fail("choice %d: no token of its own", i);
            goto done;
        }
        choice->first = common;
        if (choice->n_tokens > longest)
            longest = choice->n_tokens;
    }
    context = cli_create_context(model, options, options->n_ctx > 0 ? options->n_ctx : longest);
    if (!context)
        goto done;
    int32_t n_ctx = bmoe_context_n_ctx(context);
    for (int32_t i = 0; i < n_choices; i++) {
        if (choices[i].n_tokens > n_ctx) {
            cli_fail("choice %d: the prompt and the choice are %d tokens, more than the context of %d (raise -c)",
                     i, choices[i].n_tokens, n_ctx);
            goto done;
        }
    }
    if (ppl_evaluator_init(&evaluator, context, model, options) != 0)
        goto done;

    fprintf(stderr, "bmoe-cli: %d prompt tokens, %d choices%s\n", n_prompt, n_choices,
            options->ppl_step ? ", one token at a time" : "");
    double eval_start = cli_now_seconds();
    int32_t best = 0;
    for (int32_t i = 0; i < n_choices; i++) {
        ppl_choice *choice = &choices[i];
        /* the row before the choice's first token predicts it */
        if (ppl_score(&evaluator, choice->tokens, choice->n_tokens, choice->first - 1, &choice->tally, "choice",
                      i) != 0)
            goto done;
        if (-choice->tally.nll_sum > -choices[best].tally.nll_sum) /* ties: the lower index */
            best = i;
    }
    double eval_seconds = cli_now_seconds() - eval_start;
    printf("ppl-choices: best %d of %d\n", best, n_choices);
    for (int32_t i = 0; i < n_choices; i++) {
        const ppl_tally *tally = &choices[i].tally;
        printf("ppl-choice: %d logprob %.4f tokens %lld mean %.4f\n", i, -tally->nll_sum, (long long)tally->scored,
               -tally->nll_sum / (double)tally->scored);
    }
    if (ppl_print_costs(&evaluator, model) != 0)
        goto done;
    fprintf(stderr, "bmoe-cli: load: %.3f s\n", load_seconds);
    fprintf(stderr, "bmoe-cli: evaluated %d choices in %.3f s\n", n_choices, eval_seconds);
    status = 0;

done:
    free(evaluator.logits);
    bmoe_context_free(context);
    for (int32_t i = 0; i < n_choices; i++)
        free(choices[i].tokens);
    free(choices);
    free(joined);
    free(prompt_tokens);
    return status;
}

int cli_run_perplexity(const cli_options *options)
{
    /* the file first: a wrong path fails before a long load */
    const char *path = options->ppl_list_path ? options->ppl_list_path : options->ppl_path;
    char *text = NULL;
    size_t text_length = 0;
    if (path && cli_read_file(path, &text, &text_length) != 0)
        return 1;
    double load_seconds = 0.0;
    bmoe_model *model = cli_load_model(options, &load_seconds);
    if (!model) {
        free(text);
        return 1;
    }
    int status = options->ppl_list_path ? ppl_run_list(options, model, text, text_length, load_seconds)
                 : options->ppl_path    ? ppl_run_file(options, model, text, text_length, load_seconds)
                                        : ppl_run_choices(options, model, load_seconds);
    if (status == 0)
        fprintf(stderr, "bmoe-cli: peak RSS: %.1f MiB\n", cli_peak_rss_mib());
    bmoe_model_free(model);
    free(text);
    return status;
}
