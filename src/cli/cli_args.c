/* Command-line parsing for bmoe-cli: flags, strict numbers (the whole
 * string, in range) and token id lists. A bad command line is one line on
 * stderr naming the flag and what is wrong with its value. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* The most token ids a --prompt-ids or --force-ids list may hold. */
#define CLI_MAX_ID_LIST (1 << 20)

void cli_print_usage(FILE *out)
{
    fprintf(out,
            "usage: bmoe-cli -m MODEL [-p PROMPT | -f FILE] [options]\n"
            "       bmoe-cli -m MODEL --ppl FILE [-c N] [--chunks N]\n"
            "       bmoe-cli -m MODEL --prompt-ids 1,2,3 [--force-ids 7,8,9] --logits-out FILE\n"
            "       bmoe-cli --info MODEL\n"
            "\n"
            "  -m, --model MODEL      GGUF model file (first shard of a split model)\n"
            "  -p, --prompt TEXT      prompt (special tokens parsed, BOS added as the vocabulary asks)\n"
            "  -f, --file FILE        read the prompt from FILE\n"
            "  -n, --n-predict N      tokens to generate (default 128; -1: until end of generation)\n"
            "  -t, --threads N        threads (default: the number of cores)\n"
            "  -c, --ctx-size N       context size (default: the model's, at most 4096)\n"
            "      --ubatch N         prefill micro-batch (default 512)\n"
            "      --kv-type f16|f32  KV cache type (default f16)\n"
            "      --dense-weights anon|mmap\n"
            "                         read the dense (non-expert) weights into engine memory at\n"
            "                         load (anon, default) or use them from the file mapping\n"
            "      --temp T           temperature (default 0: greedy)\n"
            "      --top-k N          keep the N most likely tokens (default 40, 0: off)\n"
            "      --top-p P          nucleus sampling (default 0.95, 1: off)\n"
            "      --min-p P          drop tokens below P times the best (default 0.05, 0: off)\n"
            "      --repeat-penalty R penalize recent tokens (default 1: off)\n"
            "      --repeat-last-n N  how many recent tokens (default 64, -1: all)\n"
            "      --seed S           sampling seed (default: from the clock, printed)\n"
            "      --ignore-eos       keep generating past end-of-generation tokens (benchmarks)\n"
            "      --no-prefault      do not map the whole model at load (it is mapped at load\n"
            "                         when it fits in physical memory)\n"
            "      --prompt-ids LIST  the prompt as token ids (1,2,3) instead of text\n"
            "      --force-ids LIST   teacher forcing: after the prompt ids as one prefill, these\n"
            "                         ids one single-token decode each (needs --logits-out)\n"
            "      --logits-out FILE  write every row of logits as float32 little-endian\n"
            "      --ppl FILE         perplexity of FILE (chunks of -c tokens, second halves scored)\n"
            "      --chunks N         at most N chunks for --ppl\n"
            "      --info MODEL       print metadata, tensor table and totals of a GGUF model\n"
            "  -h, --help             this text\n");
}

static int cli_parse_int(const char *flag, const char *text, long long low, long long high,
                         int32_t *value)
{
    errno = 0;
    char *end = NULL;
    long long parsed = strtoll(text, &end, 10);
    if (!*text || *end || errno) {
        cli_fail("%s: '%s' is not an integer", flag, text);
        return -1;
    }
    if (parsed < low || parsed > high) {
        cli_fail("%s: %lld is out of range [%lld, %lld]", flag, parsed, low, high);
        return -1;
    }
    *value = (int32_t)parsed;
    return 0;
}

static int cli_parse_float(const char *flag, const char *text, double low, double high, float *value)
{
    errno = 0;
    char *end = NULL;
    double parsed = strtod(text, &end);
    if (!*text || *end || errno || !isfinite(parsed)) {
        cli_fail("%s: '%s' is not a finite number", flag, text);
        return -1;
    }
    if (parsed < low || parsed > high) {
        cli_fail("%s: %g is out of range [%g, %g]", flag, parsed, low, high);
        return -1;
    }
    *value = (float)parsed;
    return 0;
}

static int cli_parse_seed(const char *flag, const char *text, uint64_t *value)
{
    errno = 0;
    char *end = NULL;
    if (!*text || *text == '-' || *text == '+' || *text == ' ') {
        cli_fail("%s: '%s' is not an unsigned integer", flag, text);
        return -1;
    }
    unsigned long long parsed = strtoull(text, &end, 10);
    if (*end || errno) {
        cli_fail("%s: '%s' is not an unsigned 64-bit integer", flag, text);
        return -1;
    }
    *value = (uint64_t)parsed;
    return 0;
}

/* "1,2,3" into a new array of non-negative ids; an empty string is an empty list. */
static int cli_parse_id_list(const char *flag, const char *text, int32_t **ids, int32_t *n_ids)
{
    int32_t count = 0;
    if (*text) {
        count = 1;
        for (const char *c = text; *c; c++)
            count += *c == ',';
    }
    if (count > CLI_MAX_ID_LIST) {
        cli_fail("%s: more than %d ids", flag, CLI_MAX_ID_LIST);
        return -1;
    }
    int32_t *list = malloc((size_t)(count ? count : 1) * sizeof *list);
    if (!list) {
        cli_fail("%s: out of memory", flag);
        return -1;
    }
    const char *cursor = text;
    for (int32_t i = 0; i < count; i++) {
        errno = 0;
        char *end = NULL;
        if (*cursor < '0' || *cursor > '9') {
            free(list);
            cli_fail("%s: id %d of '%s' is not a non-negative integer", flag, i + 1, text);
            return -1;
        }
        long long value = strtoll(cursor, &end, 10);
        if (errno || value > INT32_MAX || (*end != ',' && *end != '\0')) {
            free(list);
            cli_fail("%s: id %d of '%s' is not a token id", flag, i + 1, text);
            return -1;
        }
        list[i] = (int32_t)value;
        cursor = *end ? end + 1 : end;
    }
    *ids = list;
    *n_ids = count;
    return 0;
}

void cli_options_free(cli_options *options)
{
    free(options->prompt_ids);
    free(options->force_ids);
    options->prompt_ids = NULL;
    options->force_ids = NULL;
}

static bool cli_flag_is(const char *arg, const char *short_name, const char *long_name)
{
    return (short_name && strcmp(arg, short_name) == 0) || (long_name && strcmp(arg, long_name) == 0);
}

int cli_parse_args(int argc, char **argv, cli_options *options)
{
    memset(options, 0, sizeof *options);
    options->mode = CLI_MODE_GENERATE;
    options->n_predict = 128;
    options->kv_type = BMOE_KV_F16;
    options->model_params = bmoe_model_default_params();
    options->sampler = bmoe_sampler_default_params();
    options->ppl_chunks = -1;
    bool have_prompt_ids = false, have_force_ids = false;

    if (argc <= 1) {
        cli_fail("no arguments (try --help)");
        return -1;
    }
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (cli_flag_is(arg, "-h", "--help")) {
            cli_options_free(options);
            options->mode = CLI_MODE_HELP;
            return 0;
        }
        if (strcmp(arg, "--no-prefault") == 0) {
            options->no_prefault = true;
            continue;
        }
        if (strcmp(arg, "--ignore-eos") == 0) {
            options->ignore_eos = true;
            continue;
        }
        /* every other flag takes one value */
        static const char *const known[] = {
            "-m", "--model", "-p", "--prompt", "-f", "--file", "-n", "--n-predict", "-t",
            "--threads", "-c", "--ctx-size", "--ubatch", "--kv-type", "--dense-weights", "--temp",
            "--top-k",
            "--top-p", "--min-p", "--repeat-penalty", "--repeat-last-n", "--seed",
            "--prompt-ids", "--force-ids", "--logits-out", "--ppl", "--chunks", "--info"};
        bool is_known = false;
        for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
            is_known |= strcmp(arg, known[k]) == 0;
        if (!is_known) {
            if (arg[0] == '-' && arg[1])
                cli_fail("unknown flag %s (try --help)", arg);
            else
                cli_fail("unexpected argument '%s' (try --help)", arg);
            return -1;
        }
        if (i + 1 >= argc) {
            cli_fail("%s needs a value", arg);
            return -1;
        }
        const char *value = argv[++i];
        int status = 0;
        if (cli_flag_is(arg, "-m", "--model"))
            options->model_path = value;
        else if (cli_flag_is(arg, "-p", "--prompt"))
            options->prompt = value;
        else if (cli_flag_is(arg, "-f", "--file"))
            options->prompt_file = value;
        else if (cli_flag_is(arg, "-n", "--n-predict"))
            status = cli_parse_int(arg, value, -1, INT32_MAX, &options->n_predict);
        else if (cli_flag_is(arg, "-t", "--threads"))
            status = cli_parse_int(arg, value, 1, 1024, &options->n_threads);
        else if (cli_flag_is(arg, "-c", "--ctx-size"))
            status = cli_parse_int(arg, value, 1, 1 << 24, &options->n_ctx);
        else if (cli_flag_is(arg, NULL, "--ubatch"))
            status = cli_parse_int(arg, value, 1, 1 << 16, &options->n_ubatch);
        else if (cli_flag_is(arg, NULL, "--dense-weights")) {
            if (strcmp(value, "anon") == 0)
                options->model_params.dense_weights = BMOE_DENSE_WEIGHTS_ANON;
            else if (strcmp(value, "mmap") == 0)
                options->model_params.dense_weights = BMOE_DENSE_WEIGHTS_MMAP;
            else {
                cli_fail("--dense-weights: '%s' is not anon or mmap", value);
                status = -1;
            }
        } else if (cli_flag_is(arg, NULL, "--kv-type")) {
            if (strcmp(value, "f16") == 0)
                options->kv_type = BMOE_KV_F16;
            else if (strcmp(value, "f32") == 0)
                options->kv_type = BMOE_KV_F32;
            else {
                cli_fail("--kv-type: '%s' is not f16 or f32", value);
                status = -1;
            }
        } else if (cli_flag_is(arg, NULL, "--temp"))
            status = cli_parse_float(arg, value, -1e9, 1e9, &options->sampler.temperature);
        else if (cli_flag_is(arg, NULL, "--top-k"))
            status = cli_parse_int(arg, value, 0, INT32_MAX, &options->sampler.top_k);
        else if (cli_flag_is(arg, NULL, "--top-p"))
            status = cli_parse_float(arg, value, 0.0, 1.0, &options->sampler.top_p);
        else if (cli_flag_is(arg, NULL, "--min-p"))
            status = cli_parse_float(arg, value, 0.0, 1.0, &options->sampler.min_p);
        else if (cli_flag_is(arg, NULL, "--repeat-penalty"))
            status = cli_parse_float(arg, value, 1e-6, 1e6, &options->sampler.repeat_penalty);
        else if (cli_flag_is(arg, NULL, "--repeat-last-n"))
            status = cli_parse_int(arg, value, -1, INT32_MAX, &options->sampler.repeat_last_n);
        else if (cli_flag_is(arg, NULL, "--seed")) {
            status = cli_parse_seed(arg, value, &options->sampler.seed);
            options->seed_given = true;
        } else if (cli_flag_is(arg, NULL, "--prompt-ids")) {
            free(options->prompt_ids);
            options->prompt_ids = NULL;
            status = cli_parse_id_list(arg, value, &options->prompt_ids, &options->n_prompt_ids);
            have_prompt_ids = true;
        } else if (cli_flag_is(arg, NULL, "--force-ids")) {
            free(options->force_ids);
            options->force_ids = NULL;
            status = cli_parse_id_list(arg, value, &options->force_ids, &options->n_force_ids);
            have_force_ids = true;
        } else if (cli_flag_is(arg, NULL, "--logits-out"))
            options->logits_out = value;
        else if (cli_flag_is(arg, NULL, "--ppl"))
            options->ppl_path = value;
        else if (cli_flag_is(arg, NULL, "--chunks"))
            status = cli_parse_int(arg, value, 1, INT32_MAX, &options->ppl_chunks);
        else if (cli_flag_is(arg, NULL, "--info"))
            options->info_path = value;
        if (status != 0) {
            cli_options_free(options);
            return -1;
        }
    }

    /* Which job, and do the flags agree with it. */
    const char *problem = NULL;
    if (options->info_path) {
        options->mode = CLI_MODE_INFO;
        if (options->model_path || options->prompt || options->prompt_file || options->ppl_path ||
            have_prompt_ids)
            problem = "--info takes only the model path";
    } else if (!options->model_path) {
        problem = "no model given (-m MODEL)";
    } else if (options->ppl_path) {
        options->mode = CLI_MODE_PERPLEXITY;
        if (options->prompt || options->prompt_file || have_prompt_ids || have_force_ids)
            problem = "--ppl cannot be combined with a prompt or token ids";
    } else if (have_prompt_ids && (options->prompt || options->prompt_file)) {
        problem = "--prompt-ids cannot be combined with -p or -f";
    } else if (have_prompt_ids && options->n_prompt_ids == 0) {
        problem = "--prompt-ids: the list is empty";
    } else if (have_force_ids || options->logits_out) {
        options->mode = CLI_MODE_LOGITS;
        if (!have_prompt_ids)
            problem = "--force-ids and --logits-out need --prompt-ids";
        else if (!options->logits_out)
            problem = "--force-ids needs --logits-out FILE";
    } else if (options->prompt && options->prompt_file) {
        problem = "-p and -f cannot be used together";
    }
    if (!problem && options->mode != CLI_MODE_PERPLEXITY && options->ppl_chunks != -1)
        problem = "--chunks needs --ppl";
    if (problem) {
        cli_fail("%s", problem);
        cli_options_free(options);
        return -1;
    }
    return 0;
}
