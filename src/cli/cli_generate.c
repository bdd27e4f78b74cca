/* Text generation: the prompt (text, -f or --prompt-ids) through the
 * library's generation loop, printing the prompt and then each step's text
 * as it comes. The timing summary goes to stderr. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

static uint64_t cli_clock_seed(void)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uint64_t seed = (uint64_t)now.tv_sec * 1000000007ull ^ (uint64_t)now.tv_nsec ^ ((uint64_t)getpid() << 32);
    return seed;
}

static const char *cli_stop_text(enum bmoe_stop_reason stop)
{
    switch (stop) {
    case BMOE_STOP_END_OF_GENERATION: return "end of generation";
    case BMOE_STOP_N_PREDICT: return "token limit (-n)";
    case BMOE_STOP_CONTEXT_FULL: return "context full (raise -c)";
    case BMOE_STOP_STRING: return "stop string";
    case BMOE_STOP_ABORTED: return "aborted";
    case BMOE_STOP_NONE: break;
    }
    return "unknown";
}

static bmoe_generation *cli_start(bmoe_context *context, const cli_options *options,
                                  const bmoe_generation_params *params, bmoe_error *error)
{
    if (options->prompt_ids)
        return bmoe_generation_start(context, params, options->prompt_ids, options->n_prompt_ids, error);
    char *text = NULL;
    size_t length = 0;
    if (options->prompt_file) {
        if (cli_read_file(options->prompt_file, &text, &length) != 0) {
            error->message[0] = '\0';
            return NULL;
        }
    }
    const char *prompt = text ? text : options->prompt ? options->prompt : "";
    bmoe_generation *generation =
        bmoe_generation_start_text(context, params, prompt, text ? length : strlen(prompt), error);
    free(text);
    return generation;
}

int cli_run_generate(const cli_options *options)
{
    int status = 1;
    bmoe_context *context = NULL;
    bmoe_generation *generation = NULL;
    double load_seconds = 0.0;
    bmoe_model *model = cli_load_model(options, &load_seconds);
    if (!model)
        return 1;
    context = cli_create_context(model, options, options->n_ctx);
    if (!context)
        goto done;

    bmoe_generation_params params = bmoe_generation_default_params();
    params.n_predict = options->n_predict;
    params.ignore_eos = options->ignore_eos;
    params.echo_prompt = true;
    params.sampler = options->sampler;
    if (!options->seed_given)
        params.sampler.seed = cli_clock_seed();
    bmoe_error error = {0};
    generation = cli_start(context, options, &params, &error);
    if (!generation) {
        if (error.message[0])
            cli_fail("%s%s", error.message, error.status == BMOE_ERR_CONTEXT_FULL ? " (raise -c)" : "");
        goto done;
    }

    bmoe_step step;
    int stepped;
    while ((stepped = bmoe_generation_step(generation, &step, &error)) >= 0) {
        if (step.text_length > 0 && cli_write(stdout, step.text, step.text_length) != 0)
            goto done;
        if (stepped == 0)
            break;
    }
    if (cli_write(stdout, "\n", 1) != 0 || cli_flush(stdout) != 0)
        goto done;
    if (stepped < 0) {
        cli_fail("%s", error.message);
        goto done;
    }

    const bmoe_stats *prefill = bmoe_generation_prefill_stats(generation);
    const bmoe_stats *decode = bmoe_generation_decode_stats(generation);
    double prefill_seconds = prefill->wall_ms * 1e-3, decode_seconds = decode->wall_ms * 1e-3;
    int32_t n_prompt = bmoe_generation_n_prompt(generation);
    fprintf(stderr, "bmoe-cli: load: %.3f s\n", load_seconds);
    fprintf(stderr, "bmoe-cli: prefill: %d tokens in %.3f s, %.2f tok/s\n", n_prompt, prefill_seconds,
            prefill_seconds > 0 ? prefill->n_tokens / prefill_seconds : 0.0);
    fprintf(stderr, "bmoe-cli: decode: %d tokens generated, %d decode steps in %.3f s, %.2f tok/s\n",
            bmoe_generation_n_generated(generation), decode->n_tokens, decode_seconds,
            decode_seconds > 0 ? decode->n_tokens / decode_seconds : 0.0);
    fprintf(stderr, "bmoe-cli: stopped: %s\n", cli_stop_text(step.stop));
    if (params.sampler.temperature > 0.0f)
        fprintf(stderr, "bmoe-cli: seed: %llu\n", (unsigned long long)params.sampler.seed);
    fprintf(stderr, "bmoe-cli: peak RSS: %.1f MiB\n", cli_peak_rss_mib());
    status = 0;

done:
    bmoe_generation_free(generation);
    bmoe_context_free(context);
    bmoe_model_free(model);
    return status;
}
