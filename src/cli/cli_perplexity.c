/* Perplexity, counted the way llama.cpp's perplexity tool counts it so that
 * the numbers compare: the whole file is tokenized once (BOS added as the
 * vocabulary asks, special text not parsed), cut into chunks of n_ctx
 * tokens whose first token becomes BOS when the vocabulary adds one; each
 * chunk is evaluated from an empty cache and only its second half is scored
 * (row j in [n_ctx/2, n_ctx-1) predicting token j+1), because early
 * positions have too little context to say much about the model. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* -log p(target) from one row of logits, in double. */
static double cli_negative_log_likelihood(const float *row, int32_t n_vocab, int32_t target)
{
    float max_logit = row[0];
    for (int32_t i = 1; i < n_vocab; i++)
        if (row[i] > max_logit)
            max_logit = row[i];
    double sum = 0.0;
    for (int32_t i = 0; i < n_vocab; i++)
        sum += exp((double)row[i] - (double)max_logit);
    return log(sum) + (double)max_logit - (double)row[target];
}

int cli_run_perplexity(const cli_options *options)
{
    int status = 1;
    char *text = NULL;
    size_t text_length = 0;
    int32_t *tokens = NULL, *chunk = NULL;
    int32_t n_tokens = 0;
    float *logits = NULL;
    bmoe_context *context = NULL;
    double load_seconds = 0.0;

    if (cli_read_file(options->ppl_path, &text, &text_length) != 0)
        return 1;
    bmoe_model *model = cli_load_model(options, &load_seconds);
    if (!model)
        goto done;
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

    /* With parse_special off, a leading BOS can only come from add_special. */
    int32_t bos = bmoe_token_bos(model);
    bool adds_bos = bos >= 0 && n_tokens > 0 && tokens[0] == bos;

    int32_t n_vocab = bmoe_model_n_vocab(model);
    int32_t first = n_ctx / 2;
    int32_t piece = options->n_ubatch > 0 ? options->n_ubatch : 512;
    if (piece > n_ctx)
        piece = n_ctx;
    logits = malloc((size_t)piece * (size_t)n_vocab * sizeof *logits);
    chunk = malloc((size_t)n_ctx * sizeof *chunk);
    if (!logits || !chunk) {
        cli_fail("out of memory for %d rows of %d logits", piece, n_vocab);
        goto done;
    }

    fprintf(stderr, "bmoe-cli: %d tokens in %.3f s; %d chunks of %d, scoring positions %d..%d\n", n_tokens,
            tokenize_seconds, n_chunks, n_ctx, first, n_ctx - 2);
    double nll_sum = 0.0, nll_squared_sum = 0.0;
    int64_t count = 0;
    bmoe_error error = {0};
    double eval_start = cli_now_seconds();
    for (int32_t c = 0; c < n_chunks; c++) {
        memcpy(chunk, tokens + (size_t)c * (size_t)n_ctx, (size_t)n_ctx * sizeof *chunk);
        if (adds_bos)
            chunk[0] = bos;
        bmoe_context_truncate(context, 0);
        /* The unscored first half needs no logits. The last token's row
         * predicts nothing inside the chunk, so it is never evaluated. */
        if (bmoe_eval(context, chunk, first, NULL, false, NULL, &error) != 0) {
            cli_fail("chunk %d: %s", c + 1, error.message[0] ? error.message : "evaluation failed");
            goto done;
        }
        for (int32_t start = first; start < n_ctx - 1; start += piece) {
            int32_t n = n_ctx - 1 - start < piece ? n_ctx - 1 - start : piece;
            if (bmoe_eval(context, chunk + start, n, logits, true, NULL, &error) != 0) {
                cli_fail("chunk %d: %s", c + 1, error.message[0] ? error.message : "evaluation failed");
                goto done;
            }
            for (int32_t r = 0; r < n; r++) {
                double nll = cli_negative_log_likelihood(logits + (size_t)r * (size_t)n_vocab, n_vocab,
                                                         chunk[start + r + 1]);
                nll_sum += nll;
                nll_squared_sum += nll * nll;
                count++;
            }
        }
        printf("[%d]%.4f,", c + 1, exp(nll_sum / (double)count));
        if (cli_flush(stdout) != 0)
            goto done;
    }
    double eval_seconds = cli_now_seconds() - eval_start;

    double mean = nll_sum / (double)count;
    double ppl = exp(mean);
    double variance = nll_squared_sum / (double)count - mean * mean;
    double ppl_error = count > 1 && variance > 0 ? ppl * sqrt(variance / (double)(count - 1)) : 0.0;
    printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", ppl, ppl_error);
    if (cli_flush(stdout) != 0)
        goto done;
    fprintf(stderr, "bmoe-cli: load: %.3f s\n", load_seconds);
    fprintf(stderr, "bmoe-cli: evaluated %d chunks in %.3f s, %.2f tok/s\n", n_chunks, eval_seconds,
            eval_seconds > 0 ? (double)n_chunks * (n_ctx - 1) / eval_seconds : 0.0);
    fprintf(stderr, "bmoe-cli: peak RSS: %.1f MiB\n", cli_peak_rss_mib());
    status = 0;

done:
    free(chunk);
    free(logits);
    free(tokens);
    bmoe_context_free(context);
    bmoe_model_free(model);
    free(text);
    return status;
}
