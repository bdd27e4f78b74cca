/* Teacher-forced evaluation: the prompt ids as ONE prefill with every row's
 * logits, then each forced id as a single-token decode, all rows written as
 * float32 little-endian in the oracle's layout (prompt rows, then one row
 * per forced id). Feeding fixed ids means one divergence never cascades. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* Writes rows of floats as little-endian bytes whatever the host order.
 * Returns 0, or prints why not and returns -1. */
static int cli_write_floats(bmoe_output *output, const float *values, size_t count)
{
    bmoe_error error = {0};
    const uint16_t probe = 1;
    bool little_endian = *(const unsigned char *)&probe == 1;
    int status = 0;
    if (little_endian) {
        status = bmoe_output_write(output, values, count * sizeof *values, &error);
    } else {
        for (size_t i = 0; i < count && status == 0; i++) {
            uint32_t bits;
            memcpy(&bits, &values[i], sizeof bits);
            unsigned char bytes[4] = {(unsigned char)bits, (unsigned char)(bits >> 8),
                                      (unsigned char)(bits >> 16), (unsigned char)(bits >> 24)};
            status = bmoe_output_write(output, bytes, 4, &error);
        }
    }
    if (status != 0)
        cli_fail("%s", error.message);
    return status;
}

int cli_run_logits(const cli_options *options)
{
    int status = 1;
    bmoe_context *context = NULL;
    float *logits = NULL;
    bmoe_output *out = NULL;
    double load_seconds = 0.0;
    bmoe_model *model = cli_load_model(options, &load_seconds);
    if (!model)
        return 1;

    int32_t n_vocab = bmoe_model_n_vocab(model);
    int32_t n_prompt = options->n_prompt_ids, n_force = options->n_force_ids;
    for (int32_t i = 0; i < n_prompt + n_force; i++) {
        int32_t id = i < n_prompt ? options->prompt_ids[i] : options->force_ids[i - n_prompt];
        if (id >= n_vocab) {
            cli_fail("%s id %d is %d, outside the vocabulary of %d tokens",
                     i < n_prompt ? "--prompt-ids" : "--force-ids", (i < n_prompt ? i : i - n_prompt) + 1,
                     id, n_vocab);
            goto done;
        }
    }
    int64_t needed = (int64_t)n_prompt + n_force;
    int32_t n_ctx = options->n_ctx;
    if (n_ctx == 0)
        n_ctx = needed > (1 << 24) ? (1 << 24) : (int32_t)needed;
    if (needed > n_ctx) {
        cli_fail("%lld prompt and forced ids do not fit in the context size %d (raise -c)",
                 (long long)needed, n_ctx);
        goto done;
    }
    context = cli_create_context(model, options, n_ctx);
    if (!context)
        goto done;
    if (needed > bmoe_context_n_ctx(context)) {
        cli_fail("%lld prompt and forced ids do not fit in the context size %d (raise -c)",
                 (long long)needed, bmoe_context_n_ctx(context));
        goto done;
    }
    logits = malloc((size_t)n_prompt * (size_t)n_vocab * sizeof *logits);
    if (!logits) {
        cli_fail("out of memory for %d rows of %d logits", n_prompt, n_vocab);
        goto done;
    }
    bmoe_error error = {0};
    out = bmoe_output_open(options->logits_out, &error);
    if (!out) {
        cli_fail("%s", error.message);
        goto done;
    }

    if (bmoe_eval(context, options->prompt_ids, n_prompt, logits, true, NULL, &error) != 0) {
        cli_fail("%s", error.message[0] ? error.message : "prefill failed");
        goto done;
    }
    if (cli_write_floats(out, logits, (size_t)n_prompt * (size_t)n_vocab) != 0)
        goto done;
    for (int32_t s = 0; s < n_force; s++) {
        if (bmoe_eval(context, &options->force_ids[s], 1, logits, false, NULL, &error) != 0) {
            cli_fail("forced id %d: %s", s + 1, error.message[0] ? error.message : "decode failed");
            goto done;
        }
        if (cli_write_floats(out, logits, (size_t)n_vocab) != 0)
            goto done;
    }
    if (cli_stop_requested(NULL)) /* a stop signal after the last evaluation */
        goto done;
    bmoe_output *committing = out;
    out = NULL;
    if (bmoe_output_commit(committing, &error) != 0) {
        cli_fail("%s", error.message);
        goto done;
    }
    char path[4096];
    fprintf(stderr, "bmoe-cli: wrote %d rows of %d logits to %s\n", n_prompt + n_force, n_vocab,
            bmoe_escape_message(options->logits_out, path, sizeof path));
    status = 0;

done:
    bmoe_output_discard(out); /* removes only its own temporary file */
    free(logits);
    bmoe_context_free(context);
    bmoe_model_free(model);
    return status;
}
