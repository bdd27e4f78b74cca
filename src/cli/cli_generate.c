/* Text generation: tokenize the prompt (or take --prompt-ids), prefill it, then sample and decode
 * one token at a time, printing each piece as it comes (the prompt's pieces
 * first, special tokens rendered). Stops at an end-of-generation token, after
 * -n tokens, or when the context is full; the timing summary goes to stderr. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"

/* Piece bytes for one token; a longer piece gets a heap buffer once. */
typedef struct cli_piece_buffer {
    char small[256];
    char *large;
    int32_t large_size;
} cli_piece_buffer;

static void cli_print_token(const bmoe_model *model, int32_t token, cli_piece_buffer *pieces,
                            cli_text_output *output)
{
    int32_t length = bmoe_token_to_piece(model, token, true, pieces->small, (int32_t)sizeof pieces->small);
    if (length <= 0)
        return;
    if (length <= (int32_t)sizeof pieces->small) {
        cli_text_output_write(output, pieces->small, (size_t)length);
        return;
    }
    if (length > pieces->large_size) {
        char *bigger = realloc(pieces->large, (size_t)length);
        if (!bigger)
            return;
        pieces->large = bigger;
        pieces->large_size = length;
    }
    length = bmoe_token_to_piece(model, token, true, pieces->large, pieces->large_size);
    if (length > 0 && length <= pieces->large_size)
        cli_text_output_write(output, pieces->large, (size_t)length);
}

static uint64_t cli_clock_seed(void)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uint64_t seed = (uint64_t)now.tv_sec * 1000000007ull ^ (uint64_t)now.tv_nsec ^ ((uint64_t)getpid() << 32);
    return seed;
}

int cli_run_generate(const cli_options *options)
{
    char *prompt_text = NULL;
    size_t prompt_length = 0;
    if (options->prompt_file) {
        if (cli_read_file(options->prompt_file, &prompt_text, &prompt_length) != 0)
            return 1;
    } else if (!options->prompt_ids) {
        const char *prompt = options->prompt ? options->prompt : "";
        prompt_length = strlen(prompt);
        prompt_text = malloc(prompt_length + 1);
        if (!prompt_text)
            return cli_fail("out of memory");
        memcpy(prompt_text, prompt, prompt_length + 1);
    }

    int status = 1;
    bmoe_model *model = NULL;
    bmoe_context *context = NULL;
    bmoe_sampler *sampler = NULL;
    int32_t *prompt_tokens = NULL, *history = NULL;
    float *logits = NULL;
    cli_piece_buffer pieces = {.large = NULL, .large_size = 0};
    int32_t n_prompt = 0;

    double load_seconds = 0.0;
    model = cli_load_model(options, &load_seconds);
    if (!model)
        goto done;
    if (options->prompt_ids) {
        int32_t n_vocab = bmoe_model_n_vocab(model);
        for (int32_t i = 0; i < options->n_prompt_ids; i++) {
            if (options->prompt_ids[i] >= n_vocab) {
                cli_fail("--prompt-ids id %d is %d, outside the vocabulary of %d tokens", i + 1,
                         options->prompt_ids[i], n_vocab);
                goto done;
            }
        }
        n_prompt = options->n_prompt_ids;
        prompt_tokens = malloc((size_t)n_prompt * sizeof *prompt_tokens);
        if (!prompt_tokens) {
            cli_fail("out of memory");
            goto done;
        }
        memcpy(prompt_tokens, options->prompt_ids, (size_t)n_prompt * sizeof *prompt_tokens);
    } else if (cli_tokenize(model, prompt_text, prompt_length, true, true, &prompt_tokens, &n_prompt) != 0) {
        goto done;
    }
    if (n_prompt == 0) {
        cli_fail("the prompt is empty and the vocabulary adds no BOS token: nothing to evaluate");
        goto done;
    }
    context = cli_create_context(model, options, options->n_ctx);
    if (!context)
        goto done;
    int32_t n_ctx = bmoe_context_n_ctx(context);
    if (n_prompt > n_ctx) {
        cli_fail("the prompt has %d tokens, more than the context size %d (raise -c)", n_prompt, n_ctx);
        goto done;
    }

    int32_t n_vocab = bmoe_model_n_vocab(model);
    bmoe_sampler_params sampler_params = options->sampler;
    if (!options->seed_given)
        sampler_params.seed = cli_clock_seed();
    sampler = bmoe_sampler_create(&sampler_params, n_vocab);
    logits = malloc((size_t)n_vocab * sizeof *logits);
    /* prompt + every generated token: at most n_ctx evaluated plus the last sampled one */
    history = malloc(((size_t)n_ctx + 1) * sizeof *history);
    if (!sampler || !logits || !history) {
        cli_fail("cannot create the sampler (vocabulary of %d tokens)", n_vocab);
        goto done;
    }
    memcpy(history, prompt_tokens, (size_t)n_prompt * sizeof *history);
    int32_t n_history = n_prompt;

    cli_text_output output;
    cli_text_output_init(&output, stdout);
    for (int32_t i = 0; i < n_prompt; i++)
        cli_print_token(model, prompt_tokens[i], &pieces, &output);

    char error[512] = "";
    double prefill_start = cli_now_seconds();
    if (bmoe_eval(context, prompt_tokens, n_prompt, logits, false, error, sizeof error) != 0) {
        cli_text_output_finish(&output);
        cli_fail("%s", error[0] ? error : "prompt evaluation failed");
        goto done;
    }
    double prefill_seconds = cli_now_seconds() - prefill_start;

    int32_t n_generated = 0, n_decode = 0;
    double decode_seconds = 0.0;
    const char *stop_reason = "token limit (-n)";
    bool failed = false;
    while (options->n_predict < 0 || n_generated < options->n_predict) {
        int32_t token = bmoe_sampler_sample(sampler, logits, history, n_history);
        if (token < 0 || (!options->ignore_eos && bmoe_token_is_end_of_generation(model, token))) {
            stop_reason = "end of generation";
            break;
        }
        cli_print_token(model, token, &pieces, &output);
        history[n_history++] = token;
        n_generated++;
        if (options->n_predict >= 0 && n_generated >= options->n_predict)
            break;
        if (bmoe_context_position(context) >= n_ctx) {
            stop_reason = "context full (raise -c)";
            break;
        }
        double decode_start = cli_now_seconds();
        if (bmoe_eval(context, &token, 1, logits, false, error, sizeof error) != 0) {
            failed = true;
            break;
        }
        decode_seconds += cli_now_seconds() - decode_start;
        n_decode++;
    }
    cli_text_output_finish(&output);
    fputc('\n', stdout);
    fflush(stdout);
    if (failed) {
        cli_fail("%s", error[0] ? error : "decoding failed");
        goto done;
    }

    fprintf(stderr, "bmoe-cli: load: %.3f s\n", load_seconds);
    fprintf(stderr, "bmoe-cli: prefill: %d tokens in %.3f s, %.2f tok/s\n", n_prompt, prefill_seconds,
            prefill_seconds > 0 ? n_prompt / prefill_seconds : 0.0);
    fprintf(stderr, "bmoe-cli: decode: %d tokens generated, %d decode steps in %.3f s, %.2f tok/s\n",
            n_generated, n_decode, decode_seconds, decode_seconds > 0 ? n_decode / decode_seconds : 0.0);
    fprintf(stderr, "bmoe-cli: stopped: %s\n", stop_reason);
    if (sampler_params.temperature > 0.0f)
        fprintf(stderr, "bmoe-cli: seed: %llu\n", (unsigned long long)sampler_params.seed);
    fprintf(stderr, "bmoe-cli: peak RSS: %.1f MiB\n", cli_peak_rss_mib());
    status = 0;

done:
    free(pieces.large);
    free(history);
    free(logits);
    bmoe_sampler_free(sampler);
    free(prompt_tokens);
    bmoe_context_free(context);
    bmoe_model_free(model);
    free(prompt_text);
    return status;
}
