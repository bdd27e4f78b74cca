/* Command-line parsing for bmoe-cli: one table of flags, each with the kind
 * of value it takes, its range and the jobs it means something in. Numbers
 * are parsed by one function with one rule (the whole string, decimal digits
 * and an optional leading '-', no spaces, '+' or hex, in range); a flag that
 * does nothing in the chosen job is an error, never silently ignored. Every
 * flag of the reference CLI has a row: those bmoe does not have (yet) are
 * refused with a line that says so, not as unknown. Environment overrides
 * (a flag typed wins) are read here and nowhere else. A bad command line is
 * one line on stderr naming the flag and what is wrong, and the reference's
 * exit status: 2 for switches that contradict each other and a bad
 * --dense-weights value, 1 for everything else. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* The most token ids a --prompt-ids or --force-ids list may hold. */
#define CLI_MAX_ID_LIST (1 << 20)

/* Jobs, as bits of the modes a flag applies to. */
#define FOR_GENERATE (1u << CLI_MODE_GENERATE)
#define FOR_LOGITS (1u << CLI_MODE_LOGITS)
#define FOR_PPL (1u << CLI_MODE_PERPLEXITY)
#define FOR_EVAL (FOR_GENERATE | FOR_LOGITS | FOR_PPL)
#define FOR_SESSION (1u << CLI_MODE_SESSION)
#define FOR_RENDER (1u << CLI_MODE_RENDER)
#define FOR_MODEL (FOR_EVAL | FOR_SESSION)
#define FOR_CHAT (FOR_GENERATE | FOR_SESSION)

typedef enum flag_kind {
    FLAG_SWITCH,   /* no value */
    FLAG_INT,      /* int32 in [low, high] */
    FLAG_FLOAT,    /* finite, in [low, high] */
    FLAG_TEXT,     /* any string */
    FLAG_SEED,     /* unsigned 64-bit */
    FLAG_IDS,      /* 1,2,3 */
    FLAG_CHOICE,   /* one of choices (|-separated) */
    FLAG_MIB,      /* MiB in [low, high], or "auto" */
} flag_kind;

typedef enum flag_id {
    F_UNAVAILABLE, /* a reference flag bmoe does not have: the row's refusal says why */
    F_MODEL, F_PROMPT, F_FILE, F_N_PREDICT, F_THREADS, F_CTX, F_UBATCH, F_KV_TYPE, F_DENSE, F_TEMP, F_TOP_K,
    F_TOP_P, F_MIN_P, F_REPEAT_PENALTY, F_REPEAT_LAST_N, F_SEED, F_IGNORE_EOS, F_NO_PREFAULT, F_PROMPT_IDS,
    F_FORCE_IDS, F_LOGITS_OUT, F_PPL, F_CHUNKS, F_INFO, F_HELP, F_VERSION, F_MOE_STREAM, F_NO_MOE_STREAM, F_CACHE_MB,
    F_CACHE_POLICY, F_CACHE_FLOOR, F_CACHE_CEIL, F_IO_THREADS, F_NO_ODIRECT, F_OVERLAP, F_PREFETCH,
    F_PREDICT_PREFETCH, F_PREDICT_SPEC_MAX, F_LOAD_ALL, F_N_EXPERT_USED,
    F_PROGRESS, F_CSV, F_ROUTE_TRACE, F_IO_TRACE, F_COMPUTE_TRACE, F_COMPUTE_TRACE_LAYERS, F_ROUTE_REPLAY,
    F_RENDER_TEMPLATE, F_TEMPLATE_CONTEXT, F_TEMPLATE_NOW, F_CHAT, F_NO_THINK, F_SESSION, F_DECIDE,
    F_FORCE_CACHE, F_NO_WARM_DENSE, F_DENSE_ODIRECT, F_LIST_ARCHS, F_THREADS_BATCH, F_PRELOAD_EXPERTS,
    F_DECIDE_PREFIX_CACHE, F_DEVICES, F_GPU_LAYERS, F_PPL_SKIP, F_PPL_STEP, F_PPL_LIST, F_PPL_CHOICES,
    F_DROP_COLD, F_DROP_NO_RENORM, F_DROP_IN_PREFILL, F_SUBSTITUTE, F_ROUTE_AHEAD, F_PREDICT_LOG,
    F_COUNT
} flag_id;

typedef struct cli_flag {
    flag_id id;
    const char *short_name, *long_name;
    flag_kind kind;
    long long low, high;
    const char *choices;
    unsigned modes; /* jobs it means something in (0: picks the job itself) */
    bool streaming; /* needs --moe-stream */
    const char *refusal; /* F_UNAVAILABLE: why bmoe refuses it */
} cli_flag;

/* Why the reference's flags that bmoe does not have are refused. */
#define NOT_YET_SPEC "is not implemented in bmoe yet (speculative decoding: --ngram, --mtp)"
#define NOT_YET_PLAN "is not implemented in bmoe yet (the parameter table and the planner)"
#define NOT_HERE "is not implemented in bmoe (a switch of the reference's own experiments and tests)"
#define NOT_YET_ROWS "is not implemented in bmoe yet (row-gathered tables, releasing the mapping)"
#define NEEDS_DEVICE "needs a GPU or accelerator device, which this CPU-only build does not have"
#define NEEDS_NPU "needs an accelerator for the prefill (an NPU), which this CPU-only build does not have"
#define UNAVAILABLE(name, kind, why) {F_UNAVAILABLE, NULL, name, kind, 0, 0, NULL, 0, false, why}

static const cli_flag cli_flags[] = {
    {F_MODEL, "-m", "--model", FLAG_TEXT, 0, 0, NULL, FOR_MODEL, false, NULL},
    {F_PROMPT, "-p", "--prompt", FLAG_TEXT, 0, 0, NULL, FOR_GENERATE | FOR_PPL, false, NULL}, /* --ppl-choices' */
    {F_FILE, "-f", "--file", FLAG_TEXT, 0, 0, NULL, FOR_GENERATE, false, NULL},
    {F_N_PREDICT, "-n", "--n-predict", FLAG_INT, -1, INT32_MAX, NULL, FOR_CHAT, false, NULL},
    {F_THREADS, "-t", "--threads", FLAG_INT, 1, 1024, NULL, FOR_MODEL, false, NULL},
    {F_CTX, "-c", "--ctx-size", FLAG_INT, 1, 1 << 24, NULL, FOR_MODEL, false, NULL},
    {F_UBATCH, NULL, "--ubatch", FLAG_INT, 1, 1 << 16, NULL, FOR_MODEL, false, NULL},
    {F_KV_TYPE, NULL, "--kv-type", FLAG_CHOICE, 0, 0, "f16|f32", FOR_MODEL, false, NULL},
    {F_DENSE, NULL, "--dense-weights", FLAG_CHOICE, 0, 0, "anon|mmap|warm", FOR_MODEL, false, NULL},
    {F_TEMP, NULL, "--temp", FLAG_FLOAT, 0, 1000000, NULL, FOR_CHAT, false, NULL},
    {F_TOP_K, NULL, "--top-k", FLAG_INT, 0, INT32_MAX, NULL, FOR_CHAT, false, NULL},
    {F_TOP_P, NULL, "--top-p", FLAG_FLOAT, 0, 1, NULL, FOR_CHAT, false, NULL},
    {F_MIN_P, NULL, "--min-p", FLAG_FLOAT, 0, 1, NULL, FOR_CHAT, false, NULL},
    {F_REPEAT_PENALTY, NULL, "--repeat-penalty", FLAG_FLOAT, 0, 1000000, NULL, FOR_CHAT, false, NULL},
    {F_REPEAT_LAST_N, NULL, "--repeat-last-n", FLAG_INT, -1, INT32_MAX, NULL, FOR_CHAT, false, NULL},
    {F_SEED, NULL, "--seed", FLAG_SEED, 0, 0, NULL, FOR_CHAT, false, NULL},
    {F_IGNORE_EOS, NULL, "--ignore-eos", FLAG_SWITCH, 0, 0, NULL, FOR_CHAT, false, NULL},
    {F_NO_PREFAULT, NULL, "--no-prefault", FLAG_SWITCH, 0, 0, NULL, FOR_MODEL, false, NULL},
    {F_PROMPT_IDS, NULL, "--prompt-ids", FLAG_IDS, 0, 0, NULL, FOR_GENERATE | FOR_LOGITS, false, NULL},
    {F_FORCE_IDS, NULL, "--force-ids", FLAG_IDS, 0, 0, NULL, FOR_LOGITS, false, NULL},
    {F_LOGITS_OUT, NULL, "--logits-out", FLAG_TEXT, 0, 0, NULL, FOR_LOGITS, false, NULL},
    {F_PPL, NULL, "--ppl", FLAG_TEXT, 0, 0, NULL, 0, false, NULL},
    {F_CHUNKS, NULL, "--chunks", FLAG_INT, 1, INT32_MAX, NULL, FOR_PPL, false, NULL},
    {F_PPL_SKIP, NULL, "--ppl-skip", FLAG_INT, 0, INT32_MAX, NULL, FOR_PPL, false, NULL},
    {F_PPL_STEP, NULL, "--ppl-step", FLAG_SWITCH, 0, 0, NULL, FOR_PPL, false, NULL},
    {F_PPL_LIST, NULL, "--ppl-list", FLAG_TEXT, 0, 0, NULL, 0, false, NULL},
    {F_PPL_CHOICES, NULL, "--ppl-choices", FLAG_TEXT, 0, 0, NULL, 0, false, NULL},
    {F_INFO, NULL, "--info", FLAG_TEXT, 0, 0, NULL, 0, false, NULL},
    {F_HELP, "-h", "--help", FLAG_SWITCH, 0, 0, NULL, 0, false, NULL},
    {F_VERSION, NULL, "--version", FLAG_SWITCH, 0, 0, NULL, 0, false, NULL},
    {F_MOE_STREAM, NULL, "--moe-stream", FLAG_SWITCH, 0, 0, NULL, FOR_MODEL, false, NULL},
    {F_NO_MOE_STREAM, NULL, "--no-moe-stream", FLAG_SWITCH, 0, 0, NULL, FOR_MODEL, false, NULL},
    {F_CACHE_MB, NULL, "--cache-mb", FLAG_MIB, 0, 1 << 30, NULL, FOR_MODEL, true, NULL},
    {F_CACHE_POLICY, NULL, "--cache-policy", FLAG_CHOICE, 0, 0, "lru|freq", FOR_MODEL, true, NULL},
    {F_CACHE_FLOOR, NULL, "--cache-floor-mb", FLAG_INT, 0, 1 << 30, NULL, FOR_MODEL, true, NULL},
    {F_CACHE_CEIL, NULL, "--cache-ceil-mb", FLAG_INT, 1, 1 << 30, NULL, FOR_MODEL, true, NULL},
    {F_IO_THREADS, NULL, "--io-threads", FLAG_INT, 1, 16, NULL, FOR_MODEL, true, NULL},
    {F_NO_ODIRECT, NULL, "--no-odirect", FLAG_SWITCH, 0, 0, NULL, FOR_MODEL, true, NULL},
    {F_OVERLAP, NULL, "--overlap", FLAG_SWITCH, 0, 0, NULL, FOR_MODEL, true, NULL},
    {F_PREFETCH, NULL, "--prefetch", FLAG_INT, 0, 64, NULL, FOR_MODEL, true, NULL},
    {F_PREDICT_PREFETCH, NULL, "--predict-prefetch", FLAG_SWITCH, 0, 0, NULL, FOR_MODEL, true, NULL},
    {F_PREDICT_SPEC_MAX, NULL, "--predict-spec-max", FLAG_INT, 0, 8, NULL, FOR_MODEL, true, NULL},
    {F_LOAD_ALL, NULL, "--load-all", FLAG_SWITCH, 0, 0, NULL, FOR_MODEL, true, NULL},
    {F_N_EXPERT_USED, NULL, "--n-expert-used", FLAG_INT, 0, 512, NULL, FOR_MODEL, false, NULL},
    {F_THREADS_BATCH, NULL, "--threads-batch", FLAG_INT, 1, 1024, NULL, FOR_MODEL, false, NULL},
    {F_PRELOAD_EXPERTS, NULL, "--preload-experts", FLAG_SWITCH, 0, 0, NULL, FOR_MODEL, true, NULL},
    /* the lossy levers; the library refuses them without a cache */
    {F_DROP_COLD, NULL, "--drop-cold-experts", FLAG_FLOAT, 0, 1, NULL, FOR_MODEL, false, NULL},
    {F_DROP_NO_RENORM, NULL, "--drop-no-renorm", FLAG_SWITCH, 0, 0, NULL, FOR_MODEL, false, NULL},
    {F_DROP_IN_PREFILL, NULL, "--drop-in-prefill", FLAG_SWITCH, 0, 0, NULL, FOR_MODEL, false, NULL},
    {F_SUBSTITUTE, NULL, "--expert-substitute", FLAG_FLOAT, 0, 1, NULL, FOR_MODEL, false, NULL},
    {F_ROUTE_AHEAD, NULL, "--route-ahead", FLAG_INT, 1, 8, NULL, FOR_MODEL, false, NULL},
    {F_PREDICT_LOG, NULL, "--predict-log", FLAG_SWITCH, 0, 0, NULL, FOR_GENERATE, false, NULL},
    /* the reference's: accepted as what bmoe does anyway */
    {F_FORCE_CACHE, NULL, "--force-cache", FLAG_SWITCH, 0, 0, NULL, FOR_MODEL, false, NULL},
    {F_NO_WARM_DENSE, NULL, "--no-warm-dense", FLAG_SWITCH, 0, 0, NULL, FOR_MODEL, false, NULL},
    {F_DENSE_ODIRECT, NULL, "--dense-odirect", FLAG_SWITCH, 0, 0, NULL, FOR_MODEL, false, NULL},
    {F_DEVICES, NULL, "--devices", FLAG_CHOICE, 0, 0, "all|cpu", FOR_MODEL, false, NULL},
    {F_GPU_LAYERS, NULL, "--gpu-layers", FLAG_INT, 0, INT32_MAX, NULL, FOR_MODEL, false, NULL},
    {F_LIST_ARCHS, NULL, "--list-archs", FLAG_SWITCH, 0, 0, NULL, 0, false, NULL},
    /* telemetry; --route-trace and --io-trace without --moe-stream are a
     * warning and no file (the telemetry contract), not an error */
    {F_PROGRESS, NULL, "--progress", FLAG_SWITCH, 0, 0, NULL, FOR_CHAT, false, NULL},
    {F_ROUTE_REPLAY, NULL, "--route-replay", FLAG_TEXT, 0, 0, NULL, FOR_GENERATE, false, NULL},
    {F_CSV, NULL, "--csv", FLAG_TEXT, 0, 0, NULL, FOR_CHAT, false, NULL},
    {F_ROUTE_TRACE, NULL, "--route-trace", FLAG_TEXT, 0, 0, NULL, FOR_CHAT, false, NULL},
    {F_IO_TRACE, NULL, "--io-trace", FLAG_TEXT, 0, 0, NULL, FOR_CHAT, false, NULL},
    {F_COMPUTE_TRACE, NULL, "--compute-trace", FLAG_TEXT, 0, 0, NULL, FOR_CHAT, false, NULL},
    {F_COMPUTE_TRACE_LAYERS, NULL, "--compute-trace-layers", FLAG_TEXT, 0, 0, NULL, FOR_CHAT, false, NULL},
    /* chat templates and sessions */
    {F_RENDER_TEMPLATE, NULL, "--render-template", FLAG_TEXT, 0, 0, NULL, 0, false, NULL},
    {F_TEMPLATE_CONTEXT, NULL, "--template-context", FLAG_TEXT, 0, 0, NULL, FOR_RENDER, false, NULL},
    {F_TEMPLATE_NOW, NULL, "--template-now", FLAG_SEED, 0, 0, NULL, FOR_RENDER | FOR_CHAT, false, NULL},
    {F_CHAT, "--chatml", "--chat", FLAG_SWITCH, 0, 0, NULL, FOR_CHAT, false, NULL},
    {F_NO_THINK, NULL, "--no-think", FLAG_SWITCH, 0, 0, NULL, FOR_CHAT, false, NULL},
    {F_SESSION, NULL, "--session", FLAG_SWITCH, 0, 0, NULL, 0, false, NULL},
    {F_DECIDE, NULL, "--decide", FLAG_SWITCH, 0, 0, NULL, FOR_SESSION, false, NULL},
    {F_DECIDE_PREFIX_CACHE, NULL, "--decide-prefix-cache", FLAG_CHOICE, 0, 0, "auto|on|off", FOR_SESSION, false, NULL},
    /* the reference's flags bmoe does not have */
    UNAVAILABLE("--mtp", FLAG_SWITCH, NOT_YET_SPEC),
    UNAVAILABLE("--ngram", FLAG_SWITCH, NOT_YET_SPEC),
    UNAVAILABLE("--draft", FLAG_TEXT, NOT_YET_SPEC),
    UNAVAILABLE("--mtp-p-min", FLAG_TEXT, NOT_YET_SPEC),
    UNAVAILABLE("--ngram-min-match", FLAG_TEXT, NOT_YET_SPEC),
    UNAVAILABLE("--ngram-max-match", FLAG_TEXT, NOT_YET_SPEC),
    UNAVAILABLE("--describe-params", FLAG_SWITCH, NOT_YET_PLAN),
    UNAVAILABLE("--show-config", FLAG_SWITCH, NOT_YET_PLAN),
    UNAVAILABLE("--auto", FLAG_SWITCH, NOT_YET_PLAN),
    UNAVAILABLE("--plan-run", FLAG_SWITCH, NOT_YET_PLAN),
    UNAVAILABLE("--plan", FLAG_SWITCH, NOT_YET_PLAN),
    UNAVAILABLE("--plan-only", FLAG_SWITCH, NOT_YET_PLAN),
    UNAVAILABLE("--plan-explain", FLAG_SWITCH, NOT_YET_PLAN),
    UNAVAILABLE("--probe", FLAG_SWITCH, NOT_YET_PLAN),
    UNAVAILABLE("--probe-io", FLAG_SWITCH, NOT_YET_PLAN),
    UNAVAILABLE("--no-probe-io", FLAG_SWITCH, NOT_YET_PLAN),
    UNAVAILABLE("--probe-mem", FLAG_SWITCH, NOT_YET_PLAN),
    UNAVAILABLE("--no-probe-mem", FLAG_SWITCH, NOT_YET_PLAN),
    UNAVAILABLE("--io-two-wave", FLAG_SWITCH, NOT_HERE),
    UNAVAILABLE("--prefetch-sync", FLAG_SWITCH, NOT_HERE),
    UNAVAILABLE("--release-mmap", FLAG_SWITCH, NOT_YET_ROWS),
    UNAVAILABLE("--row-stream", FLAG_SWITCH, NOT_YET_ROWS),
    UNAVAILABLE("--row-stream-mb", FLAG_TEXT, NOT_YET_ROWS),
    UNAVAILABLE("--tensor-overrides", FLAG_TEXT, NEEDS_DEVICE),
    UNAVAILABLE("--dense-on-device", FLAG_SWITCH, NEEDS_DEVICE),
    UNAVAILABLE("--prefill-device", FLAG_TEXT, NEEDS_NPU),
    UNAVAILABLE("--prefill-min-tokens", FLAG_TEXT, NEEDS_NPU),
    UNAVAILABLE("--prefill-loaders", FLAG_TEXT, NEEDS_NPU),
    UNAVAILABLE("--prefill-routed", FLAG_SWITCH, NEEDS_NPU),
    UNAVAILABLE("--no-prefill-routed", FLAG_SWITCH, NEEDS_NPU),
    UNAVAILABLE("--decide-probe", FLAG_SWITCH, NEEDS_NPU),
};

/* Environment overrides (the reference's): each stands for its flag when
 * that flag is not typed; a switch's value is an integer, non-zero on. */
static const struct {
    const char *name;
    flag_id flag;
    const char *long_name; /* F_UNAVAILABLE rows: which */
} cli_environment[] = {
    {"BMOE_CACHE_MB", F_CACHE_MB, NULL},
    {"BMOE_IO_THREADS", F_IO_THREADS, NULL},
    {"BMOE_PROGRESS", F_PROGRESS, NULL},
    {"BMOE_OVERLAP", F_OVERLAP, NULL},
    {"BMOE_PREFETCH", F_PREFETCH, NULL},
    {"BMOE_N_EXPERT_USED", F_N_EXPERT_USED, NULL},
    {"BMOE_PREDICT_LOG", F_PREDICT_LOG, NULL},
    {"BMOE_PREDICT_PREFETCH", F_PREDICT_PREFETCH, NULL},
};

void cli_print_usage(FILE *out)
{
    fprintf(out,
            "usage: bmoe-cli -m MODEL [-p PROMPT | -f FILE] [options]\n"
            "       bmoe-cli -m MODEL --ppl FILE [-c N] [--chunks N] [--ppl-skip N] [--ppl-step]\n"
            "       bmoe-cli -m MODEL --ppl-list FILE [-c N] [--ppl-skip N] [--ppl-step]\n"
            "       bmoe-cli -m MODEL -p PROMPT --ppl-choices A,B,... [--ppl-step]\n"
            "       bmoe-cli -m MODEL --prompt-ids 1,2,3 [--force-ids 7,8,9] --logits-out FILE\n"
            "       bmoe-cli -m MODEL --session [--chat] [--decide] [options]\n"
            "       bmoe-cli --render-template FILE --template-context CONTEXT.json\n"
            "       bmoe-cli --info MODEL\n"
            "       bmoe-cli --version\n"
            "\n"
            "  -m, --model MODEL      GGUF model file (first shard of a split model)\n"
            "  -p, --prompt TEXT      prompt (special tokens parsed, BOS added as the vocabulary asks)\n"
            "  -f, --file FILE        read the prompt from FILE\n"
            "  -n, --n-predict N      tokens to generate (default 128; -1: until end of generation)\n"
            "  -t, --threads N        threads (default: the number of cores)\n"
            "      --threads-batch N  threads of the prompt's prefill (default: as -t)\n"
            "  -c, --ctx-size N       context size (default: the model's, at most 4096)\n"
            "      --ubatch N         prefill micro-batch (default 512)\n"
            "      --kv-type f16|f32  KV cache type (default f16)\n"
            "      --dense-weights anon|mmap|warm\n"
            "                         the dense (non-expert) weights: copied into engine memory at\n"
            "                         load with O_DIRECT (anon, default), used from the file mapping\n"
            "                         (mmap), or the mapping read once at load (warm);\n"
            "                         --no-warm-dense and --dense-odirect: the reference's mmap and anon\n"
            "      --temp T           temperature (default 0: greedy; 0 is greedy, negative is refused)\n"
            "      --top-k N          keep the N most likely tokens (default 40, 0: off)\n"
            "      --top-p P          nucleus sampling (default 0.95, 1: off)\n"
            "      --min-p P          drop tokens below P times the best (default 0.05, 0: off)\n"
            "      --repeat-penalty R penalize recent tokens (default 1: off; must be > 0)\n"
            "      --repeat-last-n N  how many recent tokens (default 64, -1: all)\n"
            "      --seed S           sampling seed (default: from the clock, printed)\n"
            "      --ignore-eos       keep generating past end-of-generation tokens (benchmarks)\n"
            "      --no-prefault      do not map the whole model at load (it is mapped at load\n"
            "                         when it fits in physical memory)\n"
            "      --n-expert-used N  route each token to N experts instead of the model's (LOSSY; 0: the model's)\n"
            "      --prompt-ids LIST  the prompt as token ids (1,2,3) instead of text\n"
            "      --force-ids LIST   teacher forcing: after the prompt ids as one prefill, these\n"
            "                         ids one single-token decode each (needs --logits-out)\n"
            "      --logits-out FILE  write every row of logits as float32 little-endian\n"
            "      --info MODEL       print metadata, tensor table and totals of a GGUF model\n"
            "\n"
            "perplexity (teacher-forced: text tokenized with BOS as the vocabulary asks, special\n"
            "text not parsed; the row at position p predicts the token at p+1):\n"
            "      --ppl FILE         perplexity of FILE as llama.cpp counts it: chunks of -c tokens,\n"
            "                         each from an empty context, rows n_ctx/2..n_ctx-2 scored; prints\n"
            "                         [i]running-PPL per chunk and 'Final estimate: PPL = P +/- E'\n"
            "      --chunks N         at most N chunks for --ppl\n"
            "      --ppl-list FILE    one text per line (empty lines skipped), each from an empty\n"
            "                         context; a line longer than the context is refused; prints\n"
            "                         'ppl-line: LINE SCORED nll M perplexity P hits H' per line\n"
            "      --ppl-skip N       rows at positions N.. are scored, 0 or more (default 8): with\n"
            "                         --ppl-list the tokens at positions 0..N (BOS included) are context\n"
            "                         only, a line of fewer than N+2 tokens scores nothing; --ppl's\n"
            "                         chunks start scoring at N when it is given (else at n_ctx/2)\n"
            "      --ppl-choices A,B,...\n"
            "                         with -p PROMPT: for each choice, from an empty context, the sum\n"
            "                         of log p(choice tokens | everything before); the choice's tokens\n"
            "                         are those of PROMPT+choice after the longest common prefix with\n"
            "                         PROMPT's own; '\\,' is a comma inside a choice, '\\\\' a backslash;\n"
            "                         prints 'ppl-choices: best I of N' (0-based, the highest total)\n"
            "                         and 'ppl-choice: I logprob S tokens N mean S/N' per choice\n"
            "      --ppl-step         evaluate every token alone (the decode path, where the lossy\n"
            "                         levers act and a streamed cache evolves as in generation): the\n"
            "                         same figures as a batch when no lever is on; adds 'ppl-policy:\n"
            "                         D/R routed experts dropped (%%), S/K slots substituted (%%)'\n"
            "   --ppl and --ppl-list end with 'ppl: N tokens scored, nll M, perplexity P, next-token\n"
            "   hits H/N (%%)' (a hit: the row's most likely token, the lowest id on ties, is the\n"
            "   target); on a streamed model every perplexity run adds 'ppl-stream: MiB read,\n"
            "   MiB/token, cache hit %%'\n"
            "\n"
            "expert streaming (models larger than RAM):\n"
            "      --moe-stream       read each routed expert from the file into a bounded cache\n"
            "                         (without it: chosen, with --overlap, for a model larger than\n"
            "                         the memory available minus the cache floor)\n"
            "      --no-moe-stream    use the experts from the file mapping whatever the model's size\n"
            "      --cache-mb N|auto  the cache budget (default auto: available memory minus the floor;\n"
            "                         0: no cache, every routed expert re-read every token)\n"
            "      --cache-policy lru|freq\n"
            "                         which experts a full cache keeps: the most often used, recent\n"
            "                         uses counting more (freq, default), or the most recent (lru)\n"
            "      --cache-floor-mb N auto: memory left free beside the cache and the contexts (default 1024)\n"
            "      --cache-ceil-mb N  auto: at most N MiB\n"
            "      --io-threads N     read lanes, 1..16 (default 4)\n"
            "      --no-odirect       buffered reads instead of O_DIRECT\n"
            "      --overlap          compute resident experts while the missing ones are read\n"
            "      --prefetch K       read what the previous token used K layers ahead (default 0)\n"
            "      --predict-prefetch read ahead what the next layer's router predicts from this\n"
            "                         layer's input (decode; needs a cache, not with --prefetch;\n"
            "                         under --route-replay: the replayed routing itself)\n"
            "      --predict-spec-max N  predicted misses per layer to read, 0..8 (default 2)\n"
            "      --preload-experts  read every expert of every layer into the cache at load\n"
            "      --load-all         read every expert of every layer at each token, the routed ones\n"
            "                         computed as usual (a debugging A/B: the reads routing saves)\n"
            "      --force-cache      accepted (the reference's; bmoe refuses no cache size)\n"
            "\n"
            "lossy levers (fewer expert reads, different output; each needs an expert cache):\n"
            "      --drop-cold-experts F  LOSSY: in decode, skip a routed expert the cache lacks whose\n"
            "                         weight is under F x 1/k of the routing (0..1; never the top one);\n"
            "                         the others are scaled back to the routing's total\n"
            "      --drop-no-renorm   keep the surviving weights as routed\n"
            "      --drop-in-prefill  drop in the prompt too\n"
            "      --expert-substitute L  LOSSY: in decode, cached experts gain L x the spread of the\n"
            "                         token's router scores before the top-k (0..1; 0.15 is mild)\n"
            "      --route-ahead N    LOSSY: in decode, a layer's experts are chosen by its router on the\n"
            "                         input N MoE layers earlier and read from then on (1..8); a watchdog\n"
            "                         turns it off when the choice agrees with the router on under half\n"
            "                         (not with --predict-prefetch)\n"
            "      --predict-log      after the run, how well three predictors foretold each decode\n"
            "                         routing, per layer: the next layer's router on this layer's input\n"
            "                         (stale-gate), the previous token's routing, and a control (a\n"
            "                         diagnostic: two router products per layer and token)\n"
            "      --route-replay TRACE.csv\n"
            "                         benchmarks: each decode step's experts from a route trace\n"
            "                         (n_expert_used at least the model's: a narrower --n-expert-used\n"
            "                         replays each routing's first experts)\n"
            "\n"
            "telemetry (generation; files are written whole at the end of a successful run):\n"
            "      --progress         per token BMOE_LOAD / BMOE_PROGRESS JSON lines on stdout, then\n"
            "                         === answer === and === perf === (also BMOE_PROGRESS=1)\n"
            "      --csv FILE         one row of metrics per generated token, with the run's\n"
            "                         configuration and a summary\n"
            "      --route-trace FILE one row per routed expert (needs --moe-stream; a diagnostic)\n"
            "      --io-trace FILE    one row per expert read (needs --moe-stream; a diagnostic)\n"
            "      --compute-trace FILE, --compute-trace-layers FILE\n"
            "                         wall time and major faults per layer segment (a diagnostic)\n"
            "\n"
            "chat templates and sessions:\n"
            "      --chat, --chatml   render the model's own chat template (tokenizer.chat_template)\n"
            "                         over the conversation; the output is split into reasoning and answer\n"
            "      --no-think         ask for no reasoning (needs --chat)\n"
            "      --session          JSON requests on stdin, one a line (generate, decide, cancel, close);\n"
            "                         BMOE_* lines on stdout (the telemetry contract's session mode)\n"
            "      --decide           accept decide requests (first-token log-probabilities of choices)\n"
            "      --decide-prefix-cache auto|on|off\n"
            "                         whether a decide reuses the kept prefix (off: it prefills it again)\n"
            "      --render-template FILE --template-context CONTEXT.json\n"
            "                         print FILE rendered with the JSON object's members as its variables\n"
            "      --template-now S   strftime_now's clock, in seconds since 1970 (default: now)\n"
            "\n"
            "  -h, --help             this text\n"
            "      --version          the engine version\n"
            "      --list-archs       the architectures this build runs\n"
            "      --devices all|cpu, --gpu-layers 0\n"
            "                         accepted: this build computes on the CPU alone\n"
            "\n"
            "The reference CLI's other flags are refused, each with the reason:\n"
            "speculation (--mtp, --ngram, --draft, --mtp-p-min, --ngram-min-match, --ngram-max-match)\n"
            "and the planner (--describe-params, --show-config, --auto, --plan-run, --plan, --plan-only,\n"
            "--plan-explain, --probe, --probe-io, --no-probe-io, --probe-mem, --no-probe-mem) are not\n"
            "implemented yet; --io-two-wave, --prefetch-sync, --release-mmap, --row-stream and\n"
            "--row-stream-mb are not in bmoe; --tensor-overrides, --dense-on-device, --prefill-device,\n"
            "--prefill-min-tokens, --prefill-loaders, --prefill-routed, --no-prefill-routed and\n"
            "--decide-probe need devices a CPU-only build does not have.\n"
            "\n"
            "environment (a flag typed wins, even when it says the default; switches: an integer,\n"
            "non-zero on): BMOE_CACHE_MB, BMOE_IO_THREADS, BMOE_PROGRESS, BMOE_OVERLAP, BMOE_PREFETCH,\n"
            "BMOE_N_EXPERT_USED, BMOE_PREDICT_PREFETCH, BMOE_PREDICT_LOG (refused when on)\n"
            "\n"
            "exit status: 0 success; 1 a usage error (unknown flag, missing or bad value, a flag out\n"
            "of place), a refused flag or a failed run; 2 switches that contradict each other, or a\n"
            "bad --dense-weights value\n");
}

/* The one number rule: optional '-', then digits (and for floats what
 * strtod reads after them), the whole string, no spaces, no '+'. */
static bool cli_number_shape(const char *text)
{
    const char *c = text;
    if (*c == '-')
        c++;
    return (*c >= '0' && *c <= '9') || (*c == '.' && c[1] >= '0' && c[1] <= '9');
}

static int cli_parse_int(const cli_flag *flag, const char *name, const char *text, int32_t *value)
{
    errno = 0;
    char *end = NULL;
    long long parsed = cli_number_shape(text) ? strtoll(text, &end, 10) : 0;
    if (!cli_number_shape(text) || *end) {
        cli_fail("%s: '%s' is not an integer", name, text);
        return -1;
    }
    if (errno == ERANGE || parsed < flag->low || parsed > flag->high) {
        cli_fail("%s: %s is out of range [%lld, %lld]", name, text, flag->low, flag->high);
        return -1;
    }
    *value = (int32_t)parsed;
    return 0;
}

/* A decimal number's characters only: strtod also reads hex (0x1p1). */
static bool cli_decimal_text(const char *text)
{
    return cli_number_shape(text) && strspn(text, "0123456789.eE+-") == strlen(text);
}

static int cli_parse_float(const cli_flag *flag, const char *name, const char *text, float *value)
{
    errno = 0;
    char *end = NULL;
    double parsed = cli_decimal_text(text) ? strtod(text, &end) : 0.0;
    if (!cli_decimal_text(text) || *end || !isfinite(parsed)) {
        cli_fail("%s: '%s' is not a finite number", name, text);
        return -1;
    }
    if (errno == ERANGE && fabs(parsed) < 1.0) {
        cli_fail("%s: %s is too small to represent (underflow)", name, text);
        return -1;
    }
    if (errno == ERANGE || parsed < (double)flag->low || parsed > (double)flag->high || fabsf((float)parsed) > 3e38f) {
        cli_fail("%s: %s is out of range [%lld, %lld]", name, text, flag->low, flag->high);
        return -1;
    }
    if (parsed != 0.0 && (float)parsed == 0.0f) {
        cli_fail("%s: %s is too small to represent (underflow)", name, text);
        return -1;
    }
    *value = (float)parsed;
    return 0;
}

static int cli_parse_seed(const char *name, const char *text, uint64_t *value)
{
    errno = 0;
    char *end = NULL;
    if (!cli_number_shape(text) || *text == '-') {
        cli_fail("%s: '%s' is not an unsigned integer", name, text);
        return -1;
    }
    unsigned long long parsed = strtoull(text, &end, 10);
    if (*end || errno) {
        cli_fail("%s: '%s' is not an unsigned 64-bit integer", name, text);
        return -1;
    }
    *value = (uint64_t)parsed;
    return 0;
}

/* "1,2,3" into a new array of non-negative ids; an empty string is an empty list. */
static int cli_parse_id_list(const char *name, const char *text, int32_t **ids, int32_t *n_ids)
{
    int32_t count = 0;
    if (*text) {
        count = 1;
        for (const char *c = text; *c; c++)
            count += *c == ',';
    }
    if (count > CLI_MAX_ID_LIST) {
        cli_fail("%s: more than %d ids", name, CLI_MAX_ID_LIST);
        return -1;
    }
    int32_t *list = malloc((size_t)(count ? count : 1) * sizeof *list);
    if (!list) {
        cli_fail("%s: out of memory", name);
        return -1;
    }
    const char *cursor = text;
    for (int32_t i = 0; i < count; i++) {
        errno = 0;
        char *end = NULL;
        if (*cursor < '0' || *cursor > '9') {
            free(list);
            cli_fail("%s: id %d of '%s' is not a non-negative integer", name, i + 1, text);
            return -1;
        }
        long long value = strtoll(cursor, &end, 10);
        if (errno || value > INT32_MAX || (*end != ',' && *end != '\0')) {
            free(list);
            cli_fail("%s: id %d of '%s' is not a token id", name, i + 1, text);
            return -1;
        }
        list[i] = (int32_t)value;
        cursor = *end ? end + 1 : end;
    }
    *ids = list;
    *n_ids = count;
    return 0;
}

/* --ppl-choices' "A,B,C" into a new array of strings (one allocation, the
 * strings after the pointers): a comma separates choices, "\," is a comma
 * in one and "\\" a backslash (any other backslash is itself). An empty
 * choice is refused: it has no token to score. Returns 0 or -1 (message
 * printed). */
static int cli_parse_choice_list(const char *name, const char *text, char ***choices, int32_t *n_choices)
{
    size_t length = strlen(text);
    size_t count = 1;
    for (const char *c = text; *c; c++)
        count += *c == ',';
    if (count > (size_t)CLI_MAX_ID_LIST) {
        cli_fail("%s: more than %d choices", name, CLI_MAX_ID_LIST);
        return -1;
    }
    char **list = malloc(count * sizeof *list + length + 1);
    if (!list) {
        cli_fail("%s: out of memory", name);
        return -1;
    }
    char *out = (char *)(list + count);
    int32_t n = 0;
    list[n++] = out;
    for (const char *c = text; *c; c++) {
        if (*c == '\\' && (c[1] == ',' || c[1] == '\\')) {
            *out++ = *++c;
        } else if (*c == ',') {
            *out++ = '\0';
            list[n++] = out;
        } else {
            *out++ = *c;
        }
    }
    *out = '\0';
    for (int32_t i = 0; i < n; i++) {
        if (!list[i][0]) {
            cli_fail("%s: choice %d of '%s' is empty", name, i, text);
            free(list);
            return -1;
        }
    }
    *choices = list;
    *n_choices = n;
    return 0;
}

/* Index of value among flag->choices, or -1 (message printed). */
static int cli_parse_choice(const cli_flag *flag, const char *name, const char *value)
{
    size_t length = strlen(value);
    int index = 0;
    for (const char *c = flag->choices; *c; index++) {
        const char *bar = strchr(c, '|');
        size_t choice_length = bar ? (size_t)(bar - c) : strlen(c);
        if (choice_length == length && strncmp(c, value, length) == 0)
            return index;
        c += choice_length + (bar ? 1 : 0);
    }
    /* "a|b|c" as "a, b or c" */
    char alternatives[128];
    size_t used = 0;
    int n_choices = 1;
    for (const char *c = flag->choices; *c; c++)
        n_choices += *c == '|';
    int seen = 0;
    for (const char *c = flag->choices; *c && used + 4 < sizeof alternatives; c++) {
        if (*c != '|') {
            alternatives[used++] = *c;
            continue;
        }
        seen++;
        const char *joint = seen == n_choices - 1 ? " or " : ", ";
        size_t joint_length = strlen(joint);
        memcpy(alternatives + used, joint, joint_length);
        used += joint_length;
    }
    alternatives[used] = '\0';
    cli_fail("%s: '%s' is not %s", name, value, alternatives);
    return -1;
}

void cli_options_free(cli_options *options)
{
    free(options->prompt_ids);
    free(options->force_ids);
    free(options->ppl_choices);
    options->prompt_ids = NULL;
    options->force_ids = NULL;
    options->ppl_choices = NULL;
    options->n_ppl_choices = 0;
}

static const cli_flag *cli_find_flag(const char *arg)
{
    for (size_t i = 0; i < sizeof cli_flags / sizeof cli_flags[0]; i++) {
        const cli_flag *flag = &cli_flags[i];
        if ((flag->short_name && strcmp(arg, flag->short_name) == 0) ||
            (flag->long_name && strcmp(arg, flag->long_name) == 0))
            return flag;
    }
    return NULL;
}

/* Stores one flag's value into options. Returns 0, or the exit status with
 * the message printed. */
static int cli_apply(const cli_flag *flag, const char *name, const char *value, cli_options *options)
{
    int32_t number = 0;
    float real = 0.0f;
    int choice;
    switch (flag->kind) {
    case FLAG_INT:
        if (cli_parse_int(flag, name, value, &number) != 0)
            return 1;
        break;
    case FLAG_FLOAT:
        if (cli_parse_float(flag, name, value, &real) != 0)
            return 1;
        break;
    case FLAG_MIB:
        if (strcmp(value, "auto") != 0 && cli_parse_int(flag, name, value, &number) != 0)
            return 1;
        if (strcmp(value, "auto") == 0)
            number = -1;
        break;
    default:
        break;
    }
    bmoe_stream_params *stream = &options->model_params.stream;
    switch (flag->id) {
    case F_MODEL: options->model_path = value; break;
    case F_PROMPT: options->prompt = value; break;
    case F_FILE: options->prompt_file = value; break;
    case F_N_PREDICT: options->n_predict = number; break;
    case F_THREADS: options->n_threads = number; break;
    case F_CTX: options->n_ctx = number; break;
    case F_UBATCH: options->n_ubatch = number; break;
    case F_KV_TYPE:
        if ((choice = cli_parse_choice(flag, name, value)) < 0)
            return 1;
        options->kv_type = choice == 0 ? BMOE_KV_F16 : BMOE_KV_F32;
        break;
    case F_DENSE:
        if (strcmp(value, "ahwb") == 0) {
            cli_fail("%s ahwb needs Android's hardware buffers, which this build does not have", name);
            return 1;
        }
        if ((choice = cli_parse_choice(flag, name, value)) < 0)
            return 2; /* the reference's status for a bad --dense-weights value */
        options->model_params.dense_weights = choice == 0   ? BMOE_DENSE_WEIGHTS_ANON
                                              : choice == 1 ? BMOE_DENSE_WEIGHTS_MMAP
                                                            : BMOE_DENSE_WEIGHTS_WARM;
        break;
    case F_TEMP: options->sampler.temperature = real; break;
    case F_TOP_K: options->sampler.top_k = number; break;
    case F_TOP_P: options->sampler.top_p = real; break;
    case F_MIN_P: options->sampler.min_p = real; break;
    case F_REPEAT_PENALTY:
        if (real <= 0.0f) {
            cli_fail("%s: %s must be greater than 0", name, value);
            return 1;
        }
        options->sampler.repeat_penalty = real;
        break;
    case F_REPEAT_LAST_N: options->sampler.repeat_last_n = number; break;
    case F_SEED:
        if (cli_parse_seed(name, value, &options->sampler.seed) != 0)
            return 1;
        options->seed_given = true;
        break;
    case F_IGNORE_EOS: options->ignore_eos = true; break;
    case F_NO_PREFAULT: options->no_prefault = true; break;
    case F_PROMPT_IDS:
        free(options->prompt_ids);
        options->prompt_ids = NULL;
        return cli_parse_id_list(name, value, &options->prompt_ids, &options->n_prompt_ids) == 0 ? 0 : 1;
    case F_FORCE_IDS:
        free(options->force_ids);
        options->force_ids = NULL;
        return cli_parse_id_list(name, value, &options->force_ids, &options->n_force_ids) == 0 ? 0 : 1;
    case F_LOGITS_OUT: options->logits_out = value; break;
    case F_PPL: options->ppl_path = value; break;
    case F_CHUNKS: options->ppl_chunks = number; break;
    case F_PPL_SKIP:
        options->ppl_skip = number;
        options->ppl_skip_given = true;
        break;
    case F_PPL_STEP: options->ppl_step = true; break;
    case F_PPL_LIST: options->ppl_list_path = value; break;
    case F_PPL_CHOICES:
        free(options->ppl_choices);
        options->ppl_choices = NULL;
        return cli_parse_choice_list(name, value, &options->ppl_choices, &options->n_ppl_choices) == 0 ? 0 : 1;
    case F_INFO: options->info_path = value; break;
    case F_MOE_STREAM: stream->enabled = true; break;
    case F_NO_MOE_STREAM: stream->auto_enable = false; break;
    case F_CACHE_MB: stream->cache_mb = number; break;
    case F_CACHE_POLICY:
        if ((choice = cli_parse_choice(flag, name, value)) < 0)
            return 1;
        stream->cache_policy = choice == 0 ? BMOE_CACHE_POLICY_LRU : BMOE_CACHE_POLICY_FREQUENCY;
        break;
    case F_CACHE_FLOOR: stream->cache_floor_mb = number; break;
    case F_CACHE_CEIL: stream->cache_ceil_mb = number; break;
    case F_IO_THREADS: stream->io_threads = number; break;
    case F_NO_ODIRECT: stream->direct = false; break;
    case F_OVERLAP: stream->overlap = true; break;
    case F_PREFETCH: stream->prefetch = number; break;
    case F_PREDICT_PREFETCH: stream->predict_prefetch = true; break;
    case F_PREDICT_SPEC_MAX: stream->predict_spec_max = number; break;
    case F_LOAD_ALL: stream->stage_all = true; break;
    case F_PRELOAD_EXPERTS: stream->load_all = true; break;
    case F_N_EXPERT_USED: options->model_params.n_expert_used = number; break;
    case F_DROP_COLD: options->model_params.lossy.drop_cold_frac = (float)real; break;
    case F_DROP_NO_RENORM: options->model_params.lossy.drop_no_renorm = true; break;
    case F_DROP_IN_PREFILL: options->model_params.lossy.drop_in_prefill = true; break;
    case F_SUBSTITUTE: options->model_params.lossy.substitute_lambda = (float)real; break;
    case F_ROUTE_AHEAD: options->model_params.lossy.route_ahead = number; break;
    case F_PREDICT_LOG: options->predict_log = true; break;
    case F_PROGRESS: options->progress = true; break;
    case F_ROUTE_REPLAY: options->route_replay = value; break;
    case F_CSV: options->csv_path = value; break;
    case F_ROUTE_TRACE: options->route_trace_path = value; break;
    case F_IO_TRACE: options->io_trace_path = value; break;
    case F_COMPUTE_TRACE: options->compute_trace_path = value; break;
    case F_COMPUTE_TRACE_LAYERS: options->compute_trace_layers_path = value; break;
    case F_RENDER_TEMPLATE: options->render_template = value; break;
    case F_TEMPLATE_CONTEXT: options->template_context = value; break;
    case F_TEMPLATE_NOW: {
        uint64_t seconds = 0;
        if (cli_parse_seed(name, value, &seconds) != 0)
            return 1;
        if (seconds == 0 || seconds > (uint64_t)INT64_MAX / 2) {
            cli_fail("%s: %s is not a time in seconds since 1970 (1 or more)", name, value);
            return 1;
        }
        options->template_now = (int64_t)seconds;
        break;
    }
    case F_CHAT: options->chat = true; break;
    case F_NO_THINK: options->no_think = true; break;
    case F_SESSION: break; /* the job is chosen after every flag is read */
    case F_DECIDE: options->decide = true; break;
    case F_DECIDE_PREFIX_CACHE:
        if ((choice = cli_parse_choice(flag, name, value)) < 0)
            return 1;
        options->decide_prefix_cache = choice != 2; /* auto and on: the kept prefix is reused */
        break;
    case F_THREADS_BATCH: options->n_threads_batch = number; break;
    case F_FORCE_CACHE: break; /* bmoe has no 1..1499 MiB band to allow */
    case F_NO_WARM_DENSE: options->model_params.dense_weights = BMOE_DENSE_WEIGHTS_MMAP; break;
    case F_DENSE_ODIRECT: options->model_params.dense_weights = BMOE_DENSE_WEIGHTS_ANON; break;
    case F_DEVICES:
        if (cli_parse_choice(flag, name, value) < 0)
            return 1;
        break; /* a CPU-only build: every device is the CPU */
    case F_GPU_LAYERS:
        if (number > 0) {
            cli_fail("%s %s " NEEDS_DEVICE, name, value);
            return 1;
        }
        break;
    case F_UNAVAILABLE:
        cli_fail("%s %s", name, flag->refusal);
        return 1;
    case F_LIST_ARCHS:
    case F_HELP:
    case F_VERSION:
    case F_COUNT: break;
    }
    return 0;
}

/* The job's name in messages: for perplexity, the flag that chose it. */
static const char *cli_mode_name(const cli_options *options)
{
    switch (options->mode) {
    case CLI_MODE_GENERATE: return "generation";
    case CLI_MODE_INFO: return "--info";
    case CLI_MODE_HELP: return "--help";
    case CLI_MODE_VERSION: return "--version";
    case CLI_MODE_LOGITS: return "--logits-out";
    case CLI_MODE_PERPLEXITY:
        return options->ppl_list_path ? "--ppl-list" : options->ppl_choices ? "--ppl-choices" : "--ppl";
    case CLI_MODE_SESSION: return "--session";
    case CLI_MODE_RENDER: return "--render-template";
    case CLI_MODE_LIST_ARCHS: return "--list-archs";
    }
    return "this job";
}

/* Fails the parse: frees what options own and returns status. */
static int cli_refuse(cli_options *options, int status)
{
    cli_options_free(options);
    return status;
}

/* An environment override's value for a switch: an integer, non-zero on.
 * Returns 1 (on), 0 (off), or -1 with the message printed. */
static int cli_environment_switch(const char *variable, const char *text)
{
    char *end = NULL;
    errno = 0;
    long long value = cli_number_shape(text) ? strtoll(text, &end, 10) : 0;
    if (!cli_number_shape(text) || *end || errno) {
        cli_fail("%s: '%s' is not an integer (0: off, any other: on)", variable, text);
        return -1;
    }
    return value != 0;
}

/* The environment overrides for the flags not typed that mean something in
 * the job. Returns 0, or 1 with the message printed. */
static int cli_apply_environment(cli_options *options, const bool *given)
{
    for (size_t i = 0; i < sizeof cli_environment / sizeof cli_environment[0]; i++) {
        const char *variable = cli_environment[i].name;
        const char *text = getenv(variable);
        if (!text || !*text)
            continue;
        const cli_flag *flag = NULL;
        for (size_t k = 0; k < sizeof cli_flags / sizeof cli_flags[0] && !flag; k++)
            if (cli_flags[k].id == cli_environment[i].flag &&
                (!cli_environment[i].long_name || strcmp(cli_flags[k].long_name, cli_environment[i].long_name) == 0))
                flag = &cli_flags[k];
        if (flag && flag->id == F_UNAVAILABLE) {
            int on = cli_environment_switch(variable, text);
            if (on != 0) {
                if (on > 0)
                    cli_fail("%s=%s asks for %s, which %s", variable, text, flag->long_name, flag->refusal);
                return 1;
            }
            continue;
        }
        if (!flag || given[flag->id] || !(flag->modes & (1u << options->mode)))
            continue; /* a typed flag wins, even when it says the default */
        const char *value = text;
        if (flag->kind == FLAG_SWITCH) {
            int on = cli_environment_switch(variable, text);
            if (on < 0)
                return 1;
            if (!on)
                continue;
            value = NULL;
        }
        /* the variable's name in the messages, so that the user knows where the value came from */
        if (cli_apply(flag, variable, value, options) != 0)
            return 1;
    }
    return 0;
}

/* An output replaces its file at the end of the run: on the model, it would
 * destroy what the run reads (a split model's every shard counts); on
 * another output, one would replace the other. Compared as files, whatever
 * names the paths use (links, "./"). Returns 0 or -1 (message printed). */
static int cli_check_outputs(const cli_options *options, const char *const given_as[F_COUNT])
{
    const flag_id outputs[] = {F_CSV, F_ROUTE_TRACE, F_IO_TRACE, F_COMPUTE_TRACE, F_COMPUTE_TRACE_LAYERS,
                               F_LOGITS_OUT};
    const char *paths[] = {options->csv_path, options->route_trace_path, options->io_trace_path,
                           options->compute_trace_path, options->compute_trace_layers_path, options->logits_out};
    size_t count = sizeof outputs / sizeof outputs[0];
    for (size_t a = 0; a < count; a++) {
        if (!paths[a])
            continue;
        if (options->model_path && bmoe_is_model_file(paths[a], options->model_path)) {
            cli_fail("%s %s is a file of the model %s; refusing to overwrite it", given_as[outputs[a]], paths[a],
                     options->model_path);
            return -1;
        }
        for (size_t b = a + 1; b < count; b++) {
            if (paths[b] && bmoe_same_file(paths[a], paths[b])) {
                cli_fail("%s %s and %s %s name the same file", given_as[outputs[a]], paths[a],
                         given_as[outputs[b]], paths[b]);
                return -1;
            }
        }
    }
    return 0;
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
    options->ppl_skip = 8;
    options->decide_prefix_cache = true;
    bool given[F_COUNT] = {false};
    const char *given_as[F_COUNT] = {NULL};

    if (argc <= 1) {
        cli_fail("no arguments (try --help)");
        return 1;
    }
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const cli_flag *flag = cli_find_flag(arg);
        if (!flag) {
            if (arg[0] == '-' && arg[1])
                cli_fail("unknown flag %s (try --help)", arg);
            else
                cli_fail("unexpected argument '%s' (try --help)", arg);
            return cli_refuse(options, 1);
        }
        if (flag->id == F_HELP || flag->id == F_VERSION || flag->id == F_LIST_ARCHS) {
            cli_options_free(options);
            options->mode = flag->id == F_HELP      ? CLI_MODE_HELP
                            : flag->id == F_VERSION ? CLI_MODE_VERSION
                                                    : CLI_MODE_LIST_ARCHS;
            return 0;
        }
        const char *value = NULL;
        if (flag->kind != FLAG_SWITCH && flag->id != F_UNAVAILABLE) {
            if (i + 1 >= argc) {
                cli_fail("%s needs a value", arg);
                return cli_refuse(options, 1);
            }
            value = argv[++i];
        }
        if (flag->id == F_DENSE && (given[F_NO_WARM_DENSE] || given[F_DENSE_ODIRECT])) {
            cli_fail("--dense-weights and %s both set the dense weights", given_as[given[F_NO_WARM_DENSE] ? F_NO_WARM_DENSE : F_DENSE_ODIRECT]);
            return cli_refuse(options, 2);
        }
        if ((flag->id == F_NO_WARM_DENSE || flag->id == F_DENSE_ODIRECT) &&
            (given[F_DENSE] || given[flag->id == F_NO_WARM_DENSE ? F_DENSE_ODIRECT : F_NO_WARM_DENSE])) {
            cli_fail("%s and %s both set the dense weights", arg,
                     given[F_DENSE] ? "--dense-weights" : given_as[flag->id == F_NO_WARM_DENSE ? F_DENSE_ODIRECT : F_NO_WARM_DENSE]);
            return cli_refuse(options, 2);
        }
        int applied = cli_apply(flag, arg, value, options);
        if (applied != 0)
            return cli_refuse(options, applied);
        given[flag->id] = true;
        given_as[flag->id] = arg;
    }

    /* Which job, and do the flags agree with it. Switches that contradict
     * each other are status 2, what is missing or misplaced 1. */
    const char *problem = NULL;
    char problem_text[160];
    int status = 1;
    bool perplexity = options->ppl_path || options->ppl_list_path || options->ppl_choices;
    if (options->info_path) {
        options->mode = CLI_MODE_INFO;
    } else if (options->render_template) {
        options->mode = CLI_MODE_RENDER;
        if (given[F_SESSION]) {
            problem = "--render-template and --session are different jobs";
            status = 2;
        } else if (!options->template_context) {
            problem = "--render-template needs --template-context CONTEXT.json";
        }
    } else if (options->template_context) {
        problem = "--template-context needs --render-template";
    } else if (!options->model_path) {
        problem = "no model given (-m MODEL)";
    } else if (given[F_SESSION]) {
        options->mode = CLI_MODE_SESSION;
        if (perplexity) {
            snprintf(problem_text, sizeof problem_text, "%s and --session are different jobs",
                     options->ppl_path ? "--ppl" : options->ppl_list_path ? "--ppl-list" : "--ppl-choices");
            problem = problem_text;
            status = 2;
        } else if (options->n_predict == 0) {
            problem = "--session: -n must not be 0";
        }
    } else if (perplexity) {
        options->mode = CLI_MODE_PERPLEXITY;
        if (options->ppl_path && options->ppl_list_path) {
            problem = "--ppl and --ppl-list cannot be used together (chunks of one text, or one text a line)";
        } else if (options->ppl_choices && (options->ppl_path || options->ppl_list_path)) {
            snprintf(problem_text, sizeof problem_text, "--ppl-choices scores choices after -p, not a file (%s)",
                     options->ppl_path ? "--ppl" : "--ppl-list");
            problem = problem_text;
        } else if (options->ppl_choices && !options->prompt) {
            problem = "--ppl-choices needs -p PROMPT (the text the choices continue)";
        } else if (options->prompt && !options->ppl_choices) {
            snprintf(problem_text, sizeof problem_text, "%s cannot be combined with a prompt or token ids (%s)",
                     options->ppl_path ? "--ppl" : "--ppl-list", given_as[F_PROMPT]);
            problem = problem_text;
        }
    } else if (given[F_PROMPT_IDS] && (options->prompt || options->prompt_file)) {
        problem = "--prompt-ids cannot be combined with -p or -f";
        status = 2;
    } else if (given[F_PROMPT_IDS] && options->n_prompt_ids == 0) {
        problem = "--prompt-ids: the list is empty";
    } else if (given[F_FORCE_IDS] || options->logits_out) {
        options->mode = CLI_MODE_LOGITS;
        if (!given[F_PROMPT_IDS])
            problem = "--force-ids and --logits-out need --prompt-ids";
        else if (!options->logits_out)
            problem = "--force-ids needs --logits-out FILE";
    } else if (options->prompt && options->prompt_file) {
        problem = "-p and -f cannot be used together";
        status = 2;
    }
    if (!problem && given[F_MOE_STREAM] && given[F_NO_MOE_STREAM]) {
        problem = "--moe-stream and --no-moe-stream exclude each other";
        status = 2;
    }
    if (!problem && given[F_PREFETCH] && given[F_PREDICT_PREFETCH] && options->model_params.stream.prefetch > 0) {
        problem = "--prefetch and --predict-prefetch exclude each other (two predictors of the next reads)";
        status = 2;
    }
    if (problem) {
        cli_fail("%s", problem);
        return cli_refuse(options, status);
    }
    unsigned mode_bit = 1u << options->mode;
    for (size_t k = 0; k < sizeof cli_flags / sizeof cli_flags[0]; k++) {
        const cli_flag *flag = &cli_flags[k];
        if (flag->id == F_UNAVAILABLE || !given[flag->id] || flag->modes == 0)
            continue;
        if (!(flag->modes & mode_bit)) {
            if (flag->id == F_CHUNKS)
                cli_fail("--chunks needs --ppl");
            else if (flag->id == F_PPL_SKIP || flag->id == F_PPL_STEP)
                cli_fail("%s needs --ppl, --ppl-list or --ppl-choices", given_as[flag->id]);
            else if (flag->id == F_TEMPLATE_CONTEXT)
                cli_fail("--template-context needs --render-template");
            else if (flag->id == F_DECIDE || flag->id == F_DECIDE_PREFIX_CACHE)
                cli_fail("%s needs --session", given_as[flag->id]);
            else if (options->mode == CLI_MODE_INFO)
                cli_fail("--info takes only the model path (%s does nothing there)", given_as[flag->id]);
            else if (options->mode == CLI_MODE_PERPLEXITY && options->ppl_choices &&
                     (flag->id == F_FILE || flag->id == F_PROMPT_IDS))
                cli_fail("--ppl-choices takes its prompt from -p (not %s)", given_as[flag->id]);
            else if (options->mode == CLI_MODE_PERPLEXITY && (flag->id == F_FILE || flag->id == F_PROMPT_IDS ||
                                                             flag->id == F_FORCE_IDS))
                cli_fail("%s cannot be combined with a prompt or token ids (%s)", cli_mode_name(options),
                         given_as[flag->id]);
            else
                cli_fail("%s does nothing with %s", given_as[flag->id], cli_mode_name(options));
            return cli_refuse(options, 1);
        }
        if (flag->streaming && !options->model_params.stream.enabled) {
            cli_fail("%s needs --moe-stream", given_as[flag->id]);
            return cli_refuse(options, 1);
        }
    }
    if ((given[F_DROP_NO_RENORM] || given[F_DROP_IN_PREFILL]) && !given[F_DROP_COLD]) {
        cli_fail("%s needs --drop-cold-experts", given_as[given[F_DROP_NO_RENORM] ? F_DROP_NO_RENORM : F_DROP_IN_PREFILL]);
        return cli_refuse(options, 1);
    }
    if (given[F_ROUTE_AHEAD] && given[F_PREDICT_PREFETCH]) {
        cli_fail("--route-ahead and --predict-prefetch exclude each other (route-ahead reads its own choice early)");
        return cli_refuse(options, 2);
    }
    if (options->mode == CLI_MODE_PERPLEXITY && given[F_CHUNKS] && !options->ppl_path) {
        cli_fail("--chunks needs --ppl (%s has no chunks)", cli_mode_name(options));
        return cli_refuse(options, 1);
    }
    if (options->mode == CLI_MODE_PERPLEXITY && given[F_PPL_SKIP] && options->ppl_choices) {
        cli_fail("%s does nothing with --ppl-choices (every token of a choice is scored)", given_as[F_PPL_SKIP]);
        return cli_refuse(options, 1);
    }
    if (given[F_DECIDE_PREFIX_CACHE] && !options->decide) {
        cli_fail("--decide-prefix-cache needs --decide");
        return cli_refuse(options, 1);
    }
    if (options->chat && options->prompt_ids) {
        cli_fail("--chat renders a text prompt through the template; it cannot take --prompt-ids");
        return cli_refuse(options, 2);
    }
    if (options->template_now && !options->chat && options->mode != CLI_MODE_RENDER) {
        cli_fail("--template-now needs --render-template or --chat (only a template reads the clock)");
        return cli_refuse(options, 1);
    }
    if (options->no_think && !options->chat) {
        cli_fail("--no-think needs --chat (a raw prompt has no reasoning to turn off)");
        return cli_refuse(options, 1);
    }
    if (cli_check_outputs(options, given_as) != 0)
        return cli_refuse(options, 1);
    if (cli_apply_environment(options, given) != 0)
        return cli_refuse(options, 1);
    return 0;
}
