/* bmoe-cli: the command-line front end. Parses flags, then hands the work to
 * one job: --info, generation, teacher-forced logits or perplexity
 * (the public library). Every failure is one line on stderr and a non-zero
 * exit; a job that loads a model hears the stop signals (cli_signals.c)
 * and, once it has cleaned up, ends by the signal that stopped it. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "plan.h"

static int run_info(const char *path)
{
    bmoe_error error = {0};
    if (bmoe_describe_file(path, stdout, &error) != 0)
        return cli_fail("%s", error.message);
    return 0;
}

/* A standard stream the caller closed (`<&-`, `>&-`) must not become the
 * next file opened: the model read as session requests, the text written
 * into the CSV's temporary. Each is held on /dev/null, read-only, so that a
 * read ends at once and a write still fails and is reported. */
static void hold_standard_streams(void)
{
    for (int fd = 0; fd <= 2; fd++)
        if (fcntl(fd, F_GETFD) == -1 && errno == EBADF) {
            int held = open("/dev/null", O_RDONLY);
            if (held > 2)
                close(held);
        }
}

int main(int argc, char **argv)
{
    hold_standard_streams();
    cli_options options;
    int refused = cli_parse_args(argc, argv, &options);
    if (refused != 0)
        return refused;
    int status = 1;
    plan run_plan;
    if (options.plan_mode == CLI_PLAN_OFF && (status = cli_plan_prepare(&options, &run_plan)) != 0) {
        cli_options_free(&options);
        return status;
    }
    if (options.plan_mode != CLI_PLAN_OFF) {
        status = cli_plan_prepare(&options, &run_plan);
        if (status == 0)
            status = cli_plan_report(&options, &run_plan);
        if (status != 0 || options.plan_mode == CLI_PLAN_ONLY) {
            if (status == 0 && options.show_config)
                status = cli_show_config(&options, &run_plan);
            cli_options_free(&options);
            return status;
        }
        options.plan = &run_plan;
    }
    if (options.show_config) {
        status = cli_show_config(&options, &run_plan);
        cli_options_free(&options);
        return status;
    }
    if (options.mode == CLI_MODE_GENERATE || options.mode == CLI_MODE_LOGITS ||
        options.mode == CLI_MODE_PERPLEXITY || options.mode == CLI_MODE_SESSION)
        cli_signals_install();
    switch (options.mode) {
    case CLI_MODE_HELP:
    case CLI_MODE_HELP_ALL:
        cli_print_usage(stdout, options.mode == CLI_MODE_HELP_ALL);
        status = cli_flush(stdout) == 0 ? 0 : 1; /* now, while errno still says why */
        break;
    case CLI_MODE_HELP_MARKDOWN:
        params_print_markdown(stdout);
        status = cli_flush(stdout) == 0 ? 0 : 1;
        break;
    case CLI_MODE_DESCRIBE_PARAMS:
        status = params_describe_json(stdout) == 0 && cli_flush(stdout) == 0 ? 0 : cli_fail("--describe-params: out of memory");
        break;
    case CLI_MODE_VERSION:
        printf("bmoe-cli %s\n", bmoe_version());
        status = cli_flush(stdout) == 0 ? 0 : 1;
        break;
    case CLI_MODE_LIST_ARCHS:
        for (int32_t i = 0; bmoe_architecture_name(i); i++)
            printf("%s\n", bmoe_architecture_name(i));
        status = cli_flush(stdout) == 0 ? 0 : 1;
        break;
    case CLI_MODE_INFO:
        status = run_info(options.info_path);
        break;
    case CLI_MODE_GENERATE:
        status = cli_run_generate(&options);
        break;
    case CLI_MODE_LOGITS:
        status = cli_run_logits(&options);
        break;
    case CLI_MODE_PERPLEXITY:
        status = cli_run_perplexity(&options);
        break;
    case CLI_MODE_RENDER:
        status = cli_run_render(&options);
        break;
    case CLI_MODE_SESSION:
        status = cli_run_session(&options);
        break;
    }
    cli_options_free(&options);
    /* a job that printed its result into a full disk or a closed pipe failed
     * (a job that failed already said why) */
    if (status == 0 && cli_close_stdout() != 0)
        status = 1;
    return cli_signals_exit(status);
}
