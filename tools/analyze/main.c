/* bmoe-analyze: offline analysis of bmoe's telemetry files. This file parses
 * the command line and runs one view; every failure is one line on stderr
 * and a non-zero exit (2 for usage errors, 1 for bad input or a failed
 * write, including a failed write of standard output). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "analyze.h"
#include "base/text.h"

/* One line on stderr: messages quote cells of the input and arguments, so
 * the line is escaped as the engine escapes its own messages. */
static void print_error(const char *suffix, const char *fmt, va_list list)
{
    char message[4096], escaped[4 * sizeof message];
    vsnprintf(message, sizeof message, fmt, list);
    fprintf(stderr, "bmoe-analyze: %s%s\n", text_escape_message(message, escaped, sizeof escaped), suffix);
}

void analyze_error(const char *fmt, ...)
{
    va_list list;
    va_start(list, fmt);
    print_error("", fmt, list);
    va_end(list);
}

bool phase_keep(enum phase_filter phase, int64_t row_phase)
{
    if (row_phase < 0 || phase == PHASE_ALL)
        return true;
    return phase == PHASE_PREFILL ? row_phase == 0 : row_phase == 1;
}

const char *phase_name(enum phase_filter phase)
{
    return phase == PHASE_PREFILL ? "prefill" : phase == PHASE_ALL ? "all" : "decode";
}

void print_figure(double value, int width, int decimals)
{
    if (isnan(value))
        printf(" %*s", width, "-");
    else
        printf(" %*.*f", width, decimals, value);
}

static void print_usage(FILE *out)
{
    fprintf(out,
            "usage: bmoe-analyze VIEW FILE [options]\n"
            "Reads one of bmoe's telemetry files (formats: the telemetry contract) and reports.\n"
            "\n"
            "  route FILE    a --route-trace: expert popularity per layer, reuse distance, and the\n"
            "                hit rate of the expert cache's policies (LRU, freq) and of Belady's\n"
            "                MIN for byte budgets\n"
            "      --budget-mib N [N...]   budgets in MiB (also N,N,... or repeated; default\n"
            "                              500 1000 2000 3000 4000 6000 8000)\n"
            "      --phase decode|prefill|all   rows to use (default decode)\n"
            "      --svg DIR               write the reuse-distance histogram and the hit-rate\n"
            "                              curve as SVG files into DIR\n"
            "      --profile OUT -m MODEL  also write the expert profile (--expert-profile) the\n"
            "                              cache would have learnt from these routings\n"
            "                              (prompt and answer: --phase all unless told) for MODEL\n"
            "      --drop F[,F...]         replay bmoe's --drop-cold-experts F (each F in [0, 1];\n"
            "                              a list, or the flag repeated) on the decode routings\n"
            "                              as recorded: per F, the share of the decode reads and\n"
            "                              of the router mass dropped, next to what\n"
            "                              --n-expert-used k-1 and k-2 would remove\n"
            "  io FILE       an --io-trace: latency percentiles, request vs read size, bandwidth\n"
            "                per lane, speculative vs demand reads\n"
            "      --phase decode|prefill|all   (default all)\n"
            "  compute FILE  a --compute-trace (per node) or --compute-trace-layers: share of\n"
            "                time by op and by layer, major-fault attribution\n"
            "      --phase decode|prefill|all   (default all)\n"
            "  csv FILE      a per-token --csv: warm-up vs steady state, tok/s median, p5, p95\n"
            "                and a bootstrap 95 %% interval, io/compute/stall/mgmt shares\n"
            "      --seed N                bootstrap seed (default 1: the output is reproducible)\n"
            "      --svg DIR               write the per-token time stack and the hit rate over\n"
            "                              time as SVG files into DIR\n"
            "\n"
            "Exit status: 0 done, 1 bad input or a failed write, 2 usage error.\n");
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
    va_list list;
    va_start(list, fmt);
    print_error(" (bmoe-analyze --help)", fmt, list);
    va_end(list);
    return 2;
}

static int parse_budgets(analyze_options *options, const char *text)
{
    char buffer[1024];
    if (strlen(text) >= sizeof buffer)
        return usage_error("--budget-mib: list too long");
    strcpy(buffer, text);
    char *save = NULL;
    for (char *item = strtok_r(buffer, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *end;
        errno = 0;
        double value = strtod(item, &end);
        if (end == item || *end || errno == ERANGE || !isfinite(value) || value < 0 ||
            value > 1e9)
            return usage_error("--budget-mib: '%s' is not a budget in MiB (0 to 1e9)", item);
        if (options->n_budgets == ANALYZE_MAX_BUDGETS)
            return usage_error("--budget-mib: at most %d budgets", ANALYZE_MAX_BUDGETS);
        options->budgets_mib[options->n_budgets++] = value;
    }
    if (options->n_budgets == 0)
        return usage_error("--budget-mib: no budget given");
    return 0;
}

/* Thresholds as --drop-cold-experts takes them. Items are split by hand, not
 * by strtok, so that an empty item ("0.5,", ",0.5", "") is refused rather
 * than silently skipped. */
static int parse_drops(analyze_options *options, const char *text)
{
    const char *item = text;
    for (;;) {
        const char *comma = strchr(item, ',');
        size_t length = comma ? (size_t)(comma - item) : strlen(item);
        char buffer[64];
        double value = NAN;
        if (length < sizeof buffer) {
            memcpy(buffer, item, length);
            buffer[length] = '\0';
            char *end;
            errno = 0;
            value = strtod(buffer, &end);
            if (end == buffer || *end || errno == ERANGE)
                value = NAN;
        }
        if (!(value >= 0 && value <= 1)) {
            int shown = (int)(length < 64 ? length : 64);
            if (strchr(text, ','))
                return usage_error("--drop: '%.*s' is not a threshold in [0, 1] (in '%s')", shown,
                                   item, text);
            return usage_error("--drop: '%.*s' is not a threshold in [0, 1]", shown, item);
        }
        if (options->n_drops == ANALYZE_MAX_DROPS)
            return usage_error("--drop: at most %d thresholds", ANALYZE_MAX_DROPS);
        /* + 0.0 turns "-0" into 0, so the report does not say F=-0. */
        options->drops[options->n_drops++] = value + 0.0;
        if (!comma)
            return 0;
        item = comma + 1;
    }
}

/* A number, or numbers separated by commas ("1000" or "1000,2000"). */
static bool is_number_list(const char *text)
{
    for (;;) {
        char *end;
        strtod(text, &end);
        if (end == text)
            return false;
        if (*end == '\0')
            return true;
        if (*end != ',')
            return false;
        text = end + 1;
    }
}

int main(int argc, char **argv)
{
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        print_usage(stdout);
        return fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
    }
    if (argc < 2)
        return usage_error("no view given: route, io, compute or csv");
    const char *view = argv[1];
    int (*run)(const analyze_options *) = NULL;
    if (strcmp(view, "route") == 0)
        run = view_route;
    else if (strcmp(view, "io") == 0)
        run = view_io;
    else if (strcmp(view, "compute") == 0)
        run = view_compute;
    else if (strcmp(view, "csv") == 0)
        run = view_csv;
    else
        return usage_error("unknown view '%s' (route, io, compute, csv)", view);

    analyze_options options = {.phase = PHASE_DEFAULT, .seed = 1};
    for (int i = 2; i < argc; i++) {
        const char *arg = argv[i];
        bool has_value = i + 1 < argc;
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            print_usage(stdout);
            return fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
        } else if (strcmp(arg, "--budget-mib") == 0 && run == view_route) {
            if (!has_value)
                return usage_error("--budget-mib needs a value");
            int status = parse_budgets(&options, argv[++i]);
            if (status)
                return status;
            /* "--budget-mib 1000 2000 3000": the numbers that follow too. */
            while (i + 1 < argc && is_number_list(argv[i + 1])) {
                status = parse_budgets(&options, argv[++i]);
                if (status)
                    return status;
            }
        } else if (strcmp(arg, "--drop") == 0 && run == view_route) {
            if (!has_value)
                return usage_error("--drop needs a value");
            int status = parse_drops(&options, argv[++i]);
            if (status)
                return status;
        } else if (strcmp(arg, "--profile") == 0 && run == view_route) {
            if (!has_value || !*argv[i + 1])
                return usage_error("--profile needs a file");
            options.profile_path = argv[++i];
        } else if ((strcmp(arg, "-m") == 0 || strcmp(arg, "--model") == 0) && run == view_route) {
            if (!has_value || !*argv[i + 1])
                return usage_error("%s needs a model file", arg);
            options.model_path = argv[++i];
        } else if (strcmp(arg, "--phase") == 0 && run != view_csv) {
            if (!has_value)
                return usage_error("--phase needs a value");
            const char *value = argv[++i];
            if (strcmp(value, "decode") == 0)
                options.phase = PHASE_DECODE;
            else if (strcmp(value, "prefill") == 0)
                options.phase = PHASE_PREFILL;
            else if (strcmp(value, "all") == 0)
                options.phase = PHASE_ALL;
            else
                return usage_error("--phase: '%s' is not decode, prefill or all", value);
        } else if (strcmp(arg, "--svg") == 0 && (run == view_route || run == view_csv)) {
            if (!has_value || !*argv[i + 1])
                return usage_error("--svg needs a directory");
            options.svg_dir = argv[++i];
        } else if (strcmp(arg, "--seed") == 0 && run == view_csv) {
            if (!has_value)
                return usage_error("--seed needs a value");
            char *end;
            errno = 0;
            const char *value = argv[++i];
            unsigned long long seed = strtoull(value, &end, 10);
            if (end == value || *end || errno == ERANGE || *value == '-')
                return usage_error("--seed: '%s' is not a non-negative integer", value);
            options.seed = seed;
        } else if (arg[0] == '-' && arg[1] != '\0') {
            return usage_error("'%s' is not an option of the %s view", arg, view);
        } else if (options.file) {
            return usage_error("one file at a time ('%s' and '%s')", options.file, arg);
        } else {
            options.file = arg;
        }
    }
    if (!options.file)
        return usage_error("the %s view needs a FILE", view);
    if (!options.profile_path != !options.model_path)
        return usage_error("--profile and -m go together: the profile is for one model file");

    if (options.svg_dir && svg_check_dir(options.svg_dir) != 0)
        return 1;
    int status = run(&options) == 0 ? 0 : 1;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        analyze_error("write error on standard output: %s", strerror(errno));
        status = 1;
    }
    if (fclose(stdout) != 0 && status == 0) {
        analyze_error("write error on standard output: %s", strerror(errno));
        status = 1;
    }
    return status;
}
