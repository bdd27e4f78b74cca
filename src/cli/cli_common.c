/* Helpers every bmoe-cli job shares: one-line errors, clocks, peak memory,
 * reading a file, loading a model, creating a context and tokenizing into
 * a buffer of the right size. */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "tm_report.h"

/* A file bigger than this is not a prompt or a corpus we can tokenize into
 * int32 counts. */
#define CLI_MAX_FILE_BYTES ((size_t)1 << 30)

int cli_fail(const char *fmt, ...)
{
    /* after a stop signal, the failures that follow (an aborted evaluation,
     * an interrupted write) are its echo: the exit names the signal */
    if (cli_stop_requested(NULL))
        return 1;
    /* Messages quote flag values and paths: escaped, so that no byte of
     * them reaches the terminal as a control. */
    char message[4096], escaped[4 * sizeof message];
    va_list args;
    va_start(args, fmt);
    vsnprintf(message, sizeof message, fmt, args);
    va_end(args);
    fprintf(stderr, "bmoe-cli: %s\n", bmoe_escape_message(message, escaped, sizeof escaped));
    return 1;
}

double cli_now_seconds(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
}

double cli_peak_rss_mib(void)
{
    struct rusage usage;
    if (getrusage(RUSAGE_SELF, &usage) != 0)
        return 0.0;
    return (double)usage.ru_maxrss / 1024.0; /* ru_maxrss is in KiB on Linux */
}

int cli_read_file(const char *path, char **text, size_t *length)
{
    bmoe_error error = {0};
    if (bmoe_read_file(path, CLI_MAX_FILE_BYTES, text, length, &error) != 0) {
        cli_fail("%s", error.message);
        return -1;
    }
    return 0;
}

/* The library's warnings, one line each on stderr. */
static void cli_log(void *user, enum bmoe_log_level level, const char *message)
{
    (void)user;
    fprintf(stderr, "bmoe-cli: %s%s\n", level == BMOE_LOG_WARNING ? "warning: " : "", message);
}

/* A progress bar for long load steps, on stderr when it is a terminal. */
typedef struct cli_load_bar {
    const char *step;
    int percent;
} cli_load_bar;

static void cli_draw_load_bar(void *user, const char *step, uint64_t done, uint64_t total)
{
    cli_load_bar *bar = user;
    int percent = total > 0 ? (int)(done * 100 / total) : 100;
    if (bar->step == step && percent == bar->percent)
        return;
    bar->step = step;
    bar->percent = percent;
    char cells[41];
    int filled = percent * 40 / 100;
    for (int i = 0; i < 40; i++)
        cells[i] = i < filled ? '#' : ' ';
    cells[40] = '\0';
    fprintf(stderr, "\rbmoe-cli: %-24s [%s] %3d%%%s", step, cells, percent, percent >= 100 ? "\n" : "");
    fflush(stderr);
}

void cli_print_streaming_line(const bmoe_model *model, const char *model_path)
{
    tm_config config;
    memset(&config, 0, sizeof config);
    tm_config_from_model(&config, model, model_path);
    tm_buffer line;
    tm_buffer_init(&line);
    tm_report_streaming_line(&line, &config);
    if (!line.failed)
        fputs(tm_buffer_text(&line), stderr);
    tm_buffer_free(&line);
}

bmoe_model *cli_load_model(const cli_options *options, double *load_seconds)
{
    bmoe_error error = {0};
    double start = cli_now_seconds();
    bmoe_model_params params = options->model_params;
    cli_load_bar bar = {NULL, -1};
    if (isatty(STDERR_FILENO)) {
        params.load_progress = cli_draw_load_bar;
        params.load_progress_user = &bar;
    }
    params.prefault = !options->no_prefault;
    params.log_callback = cli_log;
    bmoe_model *model = bmoe_model_load(options->model_path, &params, &error);
    if (!model) {
        cli_fail("%s", error.message[0] ? error.message : "cannot load the model");
        return NULL;
    }
    *load_seconds = cli_now_seconds() - start;
    cli_print_streaming_line(model, options->model_path);
    return model;
}

/* What the sliding-window layers keep: --swa-cache, else the job's default. */
static enum bmoe_swa_cache cli_swa_cache(const cli_options *options)
{
    if (options->swa_cache >= 0)
        return (enum bmoe_swa_cache)options->swa_cache;
    /* a session's turns reuse the conversation so far; a one-shot job no prefix */
    return options->mode == CLI_MODE_SESSION ? BMOE_SWA_CHECKPOINT : BMOE_SWA_RING;
}

bmoe_context_params cli_context_params(const cli_options *options, int32_t n_ctx)
{
    bmoe_context_params params = bmoe_context_default_params();
    params.n_ctx = n_ctx;
    if (options->n_ubatch > 0)
        params.n_ubatch = options->n_ubatch;
    if (options->n_threads > 0)
        params.n_threads = options->n_threads;
    params.n_threads_batch = options->n_threads_batch;
    params.kv_type = options->kv_type;
    params.swa_cache = cli_swa_cache(options);
    params.abort_callback = cli_stop_requested;
    return params;
}

bmoe_context *cli_create_context_from(bmoe_model *model, const bmoe_context_params *params)
{
    bmoe_error error = {0};
    bmoe_context *context = bmoe_context_create(model, params, &error);
    if (!context)
        cli_fail("%s", error.message[0] ? error.message : "cannot create the context");
    return context;
}

bmoe_context *cli_create_context(bmoe_model *model, const cli_options *options, int32_t n_ctx)
{
    bmoe_context_params params = cli_context_params(options, n_ctx);
    return cli_create_context_from(model, &params);
}

int cli_tokenize(const bmoe_model *model, const char *text, size_t length, bool add_special,
                 bool parse_special, int32_t **tokens, int32_t *n_tokens)
{
    *tokens = NULL;
    *n_tokens = 0;
    if (length > (size_t)INT32_MAX - 64) {
        cli_fail("text of %zu bytes is too long to tokenize", length);
        return -1;
    }
    /* Rarely more tokens than bytes (BOS, EOS, a space prefix); the
     * library says how many it needs when the guess is short. */
    int32_t capacity = (int32_t)length + 16;
    for (int attempt = 0; attempt < 2; attempt++) {
        int32_t *buffer = malloc((size_t)capacity * sizeof *buffer);
        if (!buffer) {
            cli_fail("out of memory tokenizing %zu bytes", length);
            return -1;
        }
        bmoe_error error = {0};
        int32_t count = bmoe_tokenize(model, text, length, add_special, parse_special, buffer, capacity, &error);
        if (count < 0) {
            free(buffer);
            cli_fail("%s", error.message);
            return -1;
        }
        if (count <= capacity) {
            *tokens = buffer;
            *n_tokens = count;
            return 0;
        }
        free(buffer);
        capacity = count;
    }
    cli_fail("tokenization did not settle on a token count");
    return -1;
}

/* The name of a stream in messages. */
static const char *cli_stream_name(FILE *stream)
{
    return stream == stdout ? "standard output" : stream == stderr ? "standard error" : "the output file";
}

int cli_flush(FILE *stream)
{
    if (fflush(stream) != 0 || ferror(stream)) {
        int saved = errno;
        cli_fail("cannot write to %s: %s", cli_stream_name(stream), strerror(saved ? saved : EIO));
        return -1;
    }
    return 0;
}

int cli_write(FILE *stream, const char *bytes, size_t length)
{
    errno = 0;
    if (fwrite(bytes, 1, length, stream) != length) {
        int saved = errno;
        cli_fail("cannot write to %s: %s", cli_stream_name(stream), strerror(saved ? saved : EIO));
        return -1;
    }
    return cli_flush(stream);
}

int cli_close_stdout(void)
{
    errno = 0;
    bool failed = fflush(stdout) != 0 || ferror(stdout);
    int saved = errno;
    if (fclose(stdout) != 0 && !failed) {
        failed = true;
        saved = errno;
    }
    if (failed) {
        cli_fail("cannot write to standard output: %s", strerror(saved ? saved : EIO));
        return -1;
    }
    return 0;
}
