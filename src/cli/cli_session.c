/* --session: the command line's model, context, sampling and telemetry
 * settings as the session's configuration (src/session does the rest),
 * and the stop signals' pipe (cli_signals.c), which ends the session at
 * once with its CSV discarded. --conversation runs the same session under
 * the terminal's chat (cli_conversation.c). */
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "params.h"
#include "session.h"

/* The library's warnings, one line each on stderr (stdout is the protocol's). */
static void cli_session_log(void *user, enum bmoe_log_level level, const char *message)
{
    (void)user;
    fprintf(stderr, "bmoe-cli: %s%s\n", level == BMOE_LOG_WARNING ? "warning: " : "", message);
}

int cli_run_session(const cli_options *options)
{
    session_config config;
    memset(&config, 0, sizeof config);
    config.model_path = options->model_path;
    config.model_params = options->model_params;
    config.model_params.prefault = !options->no_prefault;
    config.model_params.log_callback = cli_session_log;
    config.context_params = cli_context_params(options, options->n_ctx);
    config.n_predict = options->n_predict;
    config.think = !options->no_think;
    config.reasoning_effort = options->reasoning_effort;
    config.ignore_eos = options->ignore_eos;
    config.sampler = options->sampler;
    config.speculation = options->speculation;
    config.chat = options->chat;
    config.decide = options->decide;
    config.decide_reuse = options->decide_prefix_cache;
    config.template_now = options->template_now;
    config.csv_path = options->csv_path;
    config.route_trace_path = options->route_trace_path;
    config.io_trace_path = options->io_trace_path;
    config.compute_trace_path = options->compute_trace_path;
    config.compute_trace_layers_path = options->compute_trace_layers_path;
    config.expert_profile_path = options->expert_profile;
    config.log = stderr;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    config.threads = options->n_threads > 0 ? options->n_threads : cores > 0 ? (int32_t)cores : 1;
    config.cache_auto = options->model_params.stream.cache_mb < 0;
    if (options->conversation) {
        config.chat = true;
        /* an answer runs until the model ends it, unless -n says otherwise */
        if (options->values.value[P_N_PREDICT].source == PARAM_SOURCE_DEFAULT)
            config.n_predict = -1;
        return cli_run_conversation(options, &config);
    }
    int output_error;
    int status = session_run(&config, STDIN_FILENO, cli_stop_descriptor(), stdout, &output_error);
    if (output_error)
        cli_fail("cannot write to standard output: %s", strerror(output_error));
    return status;
}
