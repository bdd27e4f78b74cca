/* The rows of the parameter table, in the order --help lists them. Every
 * flag of the reference CLI has a row: those bmoe does not have (yet) are
 * refused with a line that says why, never as unknown. */
#include <stdint.h>
#include <string.h>

#include "params.h"

#define GEN PARAM_JOB_GENERATE
#define LOGITS PARAM_JOB_LOGITS
#define PPL PARAM_JOB_PERPLEXITY
#define SESSION PARAM_JOB_SESSION
#define RENDER PARAM_JOB_RENDER
#define SERVE PARAM_JOB_SERVE
#define EVAL (GEN | LOGITS | PPL)
#define MODEL (EVAL | SESSION)
#define CHAT (GEN | SESSION)

#define BASIC PARAM_BASIC
#define ADVANCED PARAM_ADVANCED
#define EXPERIMENTAL PARAM_EXPERIMENTAL
#define DEBUG PARAM_DEBUG
#define REQUEST PARAM_SCOPE_REQUEST

#define NOT_HERE "is not implemented in bmoe (a switch of the reference's own experiments and tests)"
#define NOT_YET_ROWS "is not implemented in bmoe yet (row-gathered tables, releasing the mapping)"
#define NEEDS_DEVICE "needs a GPU or accelerator device, which this CPU-only build does not have"
#define NEEDS_NPU "needs an accelerator for the prefill (an NPU), which this CPU-only build does not have"
#define UNAVAILABLE(name, kind, why)                                                                              \
    {.id = P_UNAVAILABLE, .key = NULL, .flag = name, .group = PARAM_GROUP_UNAVAILABLE, .level = DEBUG,           \
     .type = kind, .refusal = why}

static const param_def params_rows[] = {
    /* the program itself */
    {.id = P_HELP, .key = "help", .flag = "--help", .short_flag = "-h", .group = PARAM_GROUP_PROGRAM,
     .level = BASIC, .type = PARAM_SWITCH, .jobs = PARAM_JOBS_CLI | SERVE, .help = "the basic and advanced flags, then exit"},
    {.id = P_HELP_ALL, .key = "help_all", .flag = "--help-all", .group = PARAM_GROUP_PROGRAM, .level = BASIC,
     .type = PARAM_SWITCH, .help = "every flag, experimental and debugging ones and those refused included"},
    {.id = P_VERSION, .key = "version", .flag = "--version", .group = PARAM_GROUP_PROGRAM, .level = BASIC,
     .type = PARAM_SWITCH, .jobs = PARAM_JOBS_CLI | SERVE, .help = "the engine version"},
    {.id = P_LIST_ARCHS, .key = "list_archs", .flag = "--list-archs", .group = PARAM_GROUP_PROGRAM,
     .level = ADVANCED, .type = PARAM_SWITCH, .help = "the architectures this build runs"},
    {.id = P_INFO, .key = "info", .flag = "--info", .group = PARAM_GROUP_PROGRAM, .level = ADVANCED,
     .type = PARAM_PATH, .value_name = "MODEL", .help = "print metadata, tensor table and totals of a GGUF model"},
    {.id = P_DESCRIBE_PARAMS, .key = "describe_params", .flag = "--describe-params", .group = PARAM_GROUP_PROGRAM,
     .level = ADVANCED, .type = PARAM_SWITCH,
     .help = "every parameter of this table as JSON (key, flags, group, level, scope, type, bounds, unit, "
             "default, lossy, accepts auto, environment variable), then exit"},
    {.id = P_SHOW_CONFIG, .key = "show_config", .flag = "--show-config", .group = PARAM_GROUP_PROGRAM,
     .level = ADVANCED, .type = PARAM_SWITCH, .jobs = MODEL,
     .help = "the resolved configuration as JSON (each value with where it came from: default, flag, "
             "environment or plan; with --auto the plan too), then exit without loading the model"},
    {.id = P_HELP_MARKDOWN, .key = "help_markdown", .flag = "--help-markdown", .group = PARAM_GROUP_PROGRAM,
     .level = DEBUG, .type = PARAM_SWITCH, .help = "this flag reference as Markdown (docs/flags.md), then exit"},
    /* the model and the job */
    {.id = P_MODEL, .key = "model", .flag = "--model", .short_flag = "-m", .group = PARAM_GROUP_MODEL,
     .level = BASIC, .type = PARAM_PATH, .value_name = "MODEL", .jobs = MODEL | SERVE,
     .help = "GGUF model file (the first shard of a split model)"},
    {.id = P_PROMPT, .key = "prompt", .flag = "--prompt", .short_flag = "-p", .group = PARAM_GROUP_GENERATION,
     .level = BASIC, .scope = REQUEST, .type = PARAM_TEXT, .value_name = "TEXT", .jobs = GEN | PPL,
     .help = "the prompt (special tokens parsed, BOS added as the vocabulary asks)"},
    {.id = P_FILE, .key = "file", .flag = "--file", .short_flag = "-f", .group = PARAM_GROUP_GENERATION,
     .level = BASIC, .scope = REQUEST, .type = PARAM_PATH, .value_name = "FILE", .jobs = GEN,
     .help = "read the prompt from FILE"},
    {.id = P_N_PREDICT, .key = "n_predict", .flag = "--n-predict", .short_flag = "-n",
     .group = PARAM_GROUP_GENERATION, .level = BASIC, .scope = REQUEST, .type = PARAM_INT, .low = -1,
     .high = INT32_MAX, .unit = "tokens", .value_name = "N", .default_text = "128", .jobs = CHAT | SERVE,
     .help = "tokens to generate (-1: until end of generation or a full context)"},
    {.id = P_THREADS, .key = "threads", .flag = "--threads", .short_flag = "-t", .group = PARAM_GROUP_MODEL,
     .level = BASIC, .type = PARAM_INT, .low = 1, .high = 1024, .value_name = "N",
     .default_text = "the number of cores", .jobs = MODEL | SERVE, .help = "compute threads"},
    {.id = P_THREADS_BATCH, .key = "threads_batch", .flag = "--threads-batch", .group = PARAM_GROUP_MODEL,
     .level = ADVANCED, .type = PARAM_INT, .low = 1, .high = 1024, .value_name = "N", .default_text = "as -t",
     .jobs = MODEL | SERVE, .help = "threads of the prompt's prefill (one pool: a job runs on part of its threads)"},
    {.id = P_CTX, .key = "ctx_size", .flag = "--ctx-size", .short_flag = "-c", .group = PARAM_GROUP_MODEL,
     .level = BASIC, .type = PARAM_INT, .low = 1, .high = 1 << 24, .unit = "tokens", .value_name = "N",
     .default_text = "the model's, at most 4096", .jobs = MODEL | SERVE, .help = "context size"},
    {.id = P_UBATCH, .key = "ubatch", .flag = "--ubatch", .group = PARAM_GROUP_MODEL, .level = ADVANCED,
     .type = PARAM_INT, .low = 1, .high = 1 << 16, .unit = "tokens", .value_name = "N", .default_text = "512",
     .jobs = MODEL | SERVE, .help = "prefill micro-batch"},
    {.id = P_KV_TYPE, .key = "kv_type", .flag = "--kv-type", .group = PARAM_GROUP_MODEL, .level = ADVANCED,
     .type = PARAM_CHOICE, .choices = "f16|f32", .default_text = "f16", .jobs = MODEL | SERVE, .help = "KV cache type"},
    {.id = P_SWA_CACHE, .key = "swa_cache", .flag = "--swa-cache", .group = PARAM_GROUP_MODEL, .level = ADVANCED,
     .type = PARAM_CHOICE, .choices = "ring|checkpoint|full",
     .default_text = "ring; checkpoint for bmoe-server and --session", .jobs = MODEL | SERVE,
     .help = "what the sliding-window layers (gpt-oss's, Gemma's, DeepSeek-V4's) keep, the output the same: a ring "
             "of their window and one micro-batch (a fraction of their KV memory at long contexts; a later prompt "
             "sharing a prefix the ring has overwritten the window of is evaluated again), a ring and a copy of it "
             "at each prompt's end (checkpoint: the next turn of a conversation reuses its prompt, however long "
             "the answer ran), or every position (full)"},
    {.id = P_DENSE, .key = "dense_weights", .flag = "--dense-weights", .group = PARAM_GROUP_MODEL,
     .level = ADVANCED, .type = PARAM_CHOICE, .choices = "anon|mmap|warm", .default_text = "anon", .jobs = MODEL | SERVE,
     .help = "the dense (non-expert) weights: copied into engine memory at load with O_DIRECT (anon), used "
             "from the file mapping (mmap), or the mapping read once at load (warm)"},
    {.id = P_NO_PREFAULT, .key = "no_prefault", .flag = "--no-prefault", .group = PARAM_GROUP_MODEL,
     .level = DEBUG, .type = PARAM_SWITCH, .jobs = MODEL | SERVE,
     .help = "do not map the whole model at load (it is mapped at load when it fits in physical memory)"},
    {.id = P_N_EXPERT_USED, .key = "n_expert_used", .flag = "--n-expert-used", .env = "BMOE_N_EXPERT_USED",
     .group = PARAM_GROUP_LOSSY, .level = EXPERIMENTAL, .type = PARAM_INT, .low = 0, .high = 512,
     .unit = "experts", .value_name = "N", .default_text = "0 (the model's)", .lossy = true, .jobs = MODEL | SERVE,
     .help = "route each token to N experts instead of the model's"},
    /* sampling */
    {.id = P_TEMP, .key = "temperature", .flag = "--temp", .group = PARAM_GROUP_SAMPLING, .level = BASIC,
     .scope = REQUEST, .type = PARAM_FLOAT, .low = 0, .high = 1000000, .value_name = "T", .default_text = "0",
     .jobs = CHAT | SERVE, .help = "temperature (0: greedy)"},
    {.id = P_TOP_K, .key = "top_k", .flag = "--top-k", .group = PARAM_GROUP_SAMPLING, .level = BASIC,
     .scope = REQUEST, .type = PARAM_INT, .low = 0, .high = INT32_MAX, .value_name = "N", .default_text = "40",
     .jobs = CHAT | SERVE, .help = "keep the N most likely tokens (0: off)"},
    {.id = P_TOP_P, .key = "top_p", .flag = "--top-p", .group = PARAM_GROUP_SAMPLING, .level = BASIC,
     .scope = REQUEST, .type = PARAM_FLOAT, .low = 0, .high = 1, .value_name = "P", .default_text = "0.95",
     .jobs = CHAT | SERVE, .help = "nucleus sampling (1: off)"},
    {.id = P_MIN_P, .key = "min_p", .flag = "--min-p", .group = PARAM_GROUP_SAMPLING, .level = BASIC,
     .scope = REQUEST, .type = PARAM_FLOAT, .low = 0, .high = 1, .value_name = "P", .default_text = "0.05",
     .jobs = CHAT | SERVE, .help = "drop tokens below P times the most likely one's probability (0: off)"},
    {.id = P_REPEAT_PENALTY, .key = "repeat_penalty", .flag = "--repeat-penalty", .group = PARAM_GROUP_SAMPLING,
     .level = ADVANCED, .scope = REQUEST, .type = PARAM_FLOAT, .low = 0, .high = 1000000, .value_name = "R",
     .default_text = "1", .jobs = CHAT | SERVE, .help = "penalize recent tokens (1: off; must be greater than 0)"},
    {.id = P_REPEAT_LAST_N, .key = "repeat_last_n", .flag = "--repeat-last-n", .group = PARAM_GROUP_SAMPLING,
     .level = ADVANCED, .scope = REQUEST, .type = PARAM_INT, .low = -1, .high = INT32_MAX, .unit = "tokens",
     .value_name = "N", .default_text = "64", .jobs = CHAT | SERVE,
     .help = "how many recent tokens the penalties look at (-1: all)"},
    {.id = P_FREQUENCY_PENALTY, .key = "frequency_penalty", .flag = "--frequency-penalty",
     .group = PARAM_GROUP_SAMPLING, .level = ADVANCED, .scope = REQUEST, .type = PARAM_FLOAT, .low = -2, .high = 2,
     .value_name = "F", .default_text = "0", .jobs = CHAT | SERVE,
     .help = "subtract F from a token's logit per use among the recent tokens (0: off; negative: favour)"},
    {.id = P_PRESENCE_PENALTY, .key = "presence_penalty", .flag = "--presence-penalty",
     .group = PARAM_GROUP_SAMPLING, .level = ADVANCED, .scope = REQUEST, .type = PARAM_FLOAT, .low = -2, .high = 2,
     .value_name = "P", .default_text = "0", .jobs = CHAT | SERVE,
     .help = "subtract P from the logit of every token among the recent tokens (0: off; negative: favour)"},
    {.id = P_SEED, .key = "seed", .flag = "--seed", .group = PARAM_GROUP_SAMPLING, .level = BASIC,
     .scope = REQUEST, .type = PARAM_U64, .value_name = "S", .default_text = "from the clock, printed",
     .jobs = CHAT | SERVE, .help = "sampling seed"},
    {.id = P_LOGIT_BIAS, .key = "logit_bias", .flag = "--logit-bias", .short_flag = "-l", .group = PARAM_GROUP_SAMPLING,
     .level = ADVANCED, .scope = REQUEST, .type = PARAM_LIST, .value_name = "TOKEN+BIAS", .jobs = CHAT,
     .help = "add BIAS to token TOKEN's logit before sampling (15043+1, 15043-0.5; -inf: never chosen); a list "
             "separated by commas, the flag given again adds to it"},
    {.id = P_JSON_SCHEMA, .key = "json_schema", .flag = "--json-schema", .group = PARAM_GROUP_SAMPLING,
     .level = ADVANCED, .scope = REQUEST, .type = PARAM_TEXT, .value_name = "SCHEMA", .jobs = GEN,
     .help = "hold the answer to one JSON value of this JSON Schema ('{}': any JSON value)"},
    {.id = P_JSON_SCHEMA_FILE, .key = "json_schema_file", .flag = "--json-schema-file", .group = PARAM_GROUP_SAMPLING,
     .level = ADVANCED, .scope = REQUEST, .type = PARAM_PATH, .value_name = "FILE", .jobs = GEN,
     .help = "--json-schema, the schema read from FILE"},
    {.id = P_GRAMMAR, .key = "grammar", .flag = "--grammar", .group = PARAM_GROUP_SAMPLING, .level = ADVANCED,
     .scope = REQUEST, .type = PARAM_TEXT, .value_name = "GBNF", .jobs = GEN,
     .help = "hold the answer to a word of this GBNF grammar (llama.cpp's format, the start rule root)"},
    {.id = P_GRAMMAR_FILE, .key = "grammar_file", .flag = "--grammar-file", .group = PARAM_GROUP_SAMPLING,
     .level = ADVANCED, .scope = REQUEST, .type = PARAM_PATH, .value_name = "FILE", .jobs = GEN,
     .help = "--grammar, the grammar read from FILE"},
    {.id = P_IGNORE_EOS, .key = "ignore_eos", .flag = "--ignore-eos", .group = PARAM_GROUP_SAMPLING,
     .level = ADVANCED, .scope = REQUEST, .type = PARAM_SWITCH, .jobs = CHAT,
     .help = "keep generating past end-of-generation tokens (benchmarks)"},
    /* speculative decoding */
    {.id = P_NGRAM, .key = "ngram", .flag = "--ngram", .group = PARAM_GROUP_SPECULATION, .level = ADVANCED,
     .scope = REQUEST, .type = PARAM_SWITCH, .jobs = CHAT | SERVE,
     .help = "draft the next tokens from the longest earlier match of the text's end (prompt and generated "
             "tokens) and evaluate them with the next token in one batch, keeping those sampling confirms: the "
             "output is byte-identical to plain decoding, only the speed changes; the ngram: lines say what it "
             "bought (not with the lossy levers)"},
    {.id = P_MTP, .key = "mtp", .flag = "--mtp", .group = PARAM_GROUP_SPECULATION, .level = ADVANCED,
     .scope = REQUEST, .type = PARAM_SWITCH, .jobs = CHAT | SERVE,
     .help = "draft with the model's own next-token-prediction head (the nextn block of qwen35moe, glm4moe, "
             "bailingmoe2 and deepseek2 files, e.g. Qwen3.5/3.6, GLM-4.5/4.6, Ling/Ring 2.0, DeepSeek-V3 converted "
             "with it) and evaluate the drafts with the next token in one batch, keeping those sampling confirms: "
             "the output is byte-identical to plain decoding, only the speed changes; the mtp: lines say what it "
             "bought; the head's weights are loaded with the dense ones (GLM-4.5's: about 860 MB); a model "
             "without the block is refused at start (--ngram needs no model support; not with the lossy levers)"},
    {.id = P_DRAFT, .key = "draft", .flag = "--draft", .group = PARAM_GROUP_SPECULATION, .level = ADVANCED,
     .scope = REQUEST, .type = PARAM_INT, .low = 1, .high = 8, .unit = "tokens", .value_name = "N",
     .default_text = "3", .jobs = CHAT | SERVE,
     .help = "tokens drafted per step at most (needs --ngram, --mtp or --draft-replay); a verify batch "
             "evaluates up to N+1 tokens, each routed to its own experts"},
    {.id = P_MTP_P_MIN, .key = "mtp_p_min", .flag = "--mtp-p-min", .group = PARAM_GROUP_SPECULATION,
     .level = ADVANCED, .scope = REQUEST, .type = PARAM_FLOAT, .low = 0, .high = 1, .value_name = "P",
     .default_text = "0", .jobs = CHAT | SERVE,
     .help = "a step stops drafting at the first head token whose probability (the softmax of the head's "
             "logits) is below P, the first draft included (the step then decodes plainly): the drafts the "
             "head is unsure of cost verify-batch rows that are seldom kept; the output stays byte-identical "
             "(needs --mtp; 0: every step drafts up to --draft tokens)"},
    {.id = P_DRAFT_ALWAYS, .key = "draft_always", .flag = "--draft-always", .group = PARAM_GROUP_SPECULATION,
     .level = ADVANCED, .scope = REQUEST, .type = PARAM_SWITCH, .jobs = CHAT | SERVE,
     .help = "draft at every step the source proposes tokens; without it drafting pauses while its steps measure "
             "more seconds per generated token than plain steps (a wider batch that reads more experts than it "
             "saves, a text that does not repeat) and is tried again now and then; the output is the same "
             "either way (--draft-replay implies it)"},
    {.id = P_NGRAM_MIN_MATCH, .key = "ngram_min_match", .flag = "--ngram-min-match",
     .group = PARAM_GROUP_SPECULATION, .level = ADVANCED, .scope = REQUEST, .type = PARAM_INT, .low = 1,
     .high = 64, .unit = "tokens", .value_name = "N", .default_text = "3", .jobs = CHAT | SERVE,
     .help = "the shortest match of the text's end that drafts; a step without one decodes plainly (needs "
             "--ngram)"},
    {.id = P_NGRAM_MAX_MATCH, .key = "ngram_max_match", .flag = "--ngram-max-match",
     .group = PARAM_GROUP_SPECULATION, .level = ADVANCED, .scope = REQUEST, .type = PARAM_INT, .low = 1,
     .high = 64, .unit = "tokens", .value_name = "N", .default_text = "12", .jobs = CHAT | SERVE,
     .help = "matches are compared up to N tokens (needs --ngram; at least --ngram-min-match)"},
    {.id = P_DRAFT_REPLAY, .key = "draft_replay", .flag = "--draft-replay", .group = PARAM_GROUP_SPECULATION,
     .level = DEBUG, .scope = REQUEST, .type = PARAM_PATH, .value_name = "FILE", .jobs = GEN,
     .help = "benchmarks: the drafts are read from FILE, token ids as --ids-out writes them: after the k-th "
             "generated token, the file's tokens k+1, k+2, ... (at most --draft); from a plain run of the "
             "same command they are its very tokens, all accepted (the replay: lines report it)"},
    {.id = P_DRAFT_REPLAY_MODE, .key = "draft_replay_mode", .flag = "--draft-replay-mode",
     .group = PARAM_GROUP_SPECULATION, .level = DEBUG, .scope = REQUEST, .type = PARAM_CHOICE,
     .choices = "accept|reject", .default_text = "accept", .jobs = GEN,
     .help = "reject: each replayed draft is the id after the file's, so none is accepted while the run "
             "follows the file (needs --draft-replay)"},
    {.id = P_DRAFT_REPLAY_RATE, .key = "draft_replay_rate", .flag = "--draft-replay-rate",
     .group = PARAM_GROUP_SPECULATION, .level = DEBUG, .scope = REQUEST, .type = PARAM_FLOAT, .low = 0, .high = 1,
     .value_name = "P", .default_text = "1", .jobs = GEN,
     .help = "accept mode: each replayed draft is the file's id with probability P, else the id after it, "
             "decided by its place in the file alone (the same in every run), so about a fraction P of the "
             "drafts is accepted (needs --draft-replay)"},
    /* chat templates and sessions */
    {.id = P_CHAT, .key = "chat", .flag = "--chat", .alias = "--chatml", .group = PARAM_GROUP_CHAT,
     .level = BASIC, .type = PARAM_SWITCH, .jobs = CHAT,
     .help = "render the model's own chat template (tokenizer.chat_template) over the conversation; the output "
             "is split into reasoning and answer"},
    {.id = P_NO_THINK, .key = "no_think", .flag = "--no-think", .group = PARAM_GROUP_CHAT, .level = BASIC,
     .scope = REQUEST, .type = PARAM_SWITCH, .jobs = CHAT | SERVE, .help = "ask for no reasoning (needs --chat)"},
    {.id = P_REASONING_EFFORT, .key = "reasoning_effort", .flag = "--reasoning-effort", .group = PARAM_GROUP_CHAT,
     .level = BASIC, .scope = REQUEST, .type = PARAM_CHOICE, .choices = "low|medium|high", .jobs = CHAT | SERVE,
     .help = "how much to reason, for a model whose chat template reads reasoning_effort (gpt-oss, DeepSeek V4); "
             "refused on one whose template does not (needs --chat; unset: the template's default)"},
    {.id = P_SESSION, .key = "session", .flag = "--session", .group = PARAM_GROUP_CHAT, .level = BASIC,
     .type = PARAM_SWITCH,
     .help = "JSON requests on stdin, one a line (generate, decide, cancel, close); BMOE_* lines on stdout "
             "(the telemetry contract's session mode)"},
    {.id = P_CONVERSATION, .key = "conversation", .flag = "--conversation", .short_flag = "-cnv",
     .group = PARAM_GROUP_CHAT, .level = BASIC, .type = PARAM_SWITCH,
     .help = "chat on the terminal: each line typed is a turn of one conversation, answered as it is generated "
             "(the reasoning dimmed); Ctrl-C stops an answer, /clear forgets the conversation, /set think and /set "
             "nothink turn reasoning on or off, /bye or Ctrl-D leaves; a line ending in \\ goes on, and so does a "
             "block between lines of three quotes; -n unset: answers run until the model ends them"},
    {.id = P_SYSTEM_PROMPT, .key = "system_prompt", .flag = "--system-prompt", .short_flag = "-sys",
     .group = PARAM_GROUP_CHAT, .level = BASIC, .scope = REQUEST, .type = PARAM_TEXT, .value_name = "TEXT",
     .jobs = SESSION, .help = "the system message that starts each conversation (needs --conversation)"},
    {.id = P_DECIDE, .key = "decide", .flag = "--decide", .group = PARAM_GROUP_CHAT, .level = ADVANCED,
     .type = PARAM_SWITCH, .jobs = SESSION,
     .help = "accept decide requests (first-token log-probabilities of choices)"},
    {.id = P_DECIDE_PREFIX_CACHE, .key = "decide_prefix_cache", .flag = "--decide-prefix-cache",
     .group = PARAM_GROUP_CHAT, .level = ADVANCED, .type = PARAM_CHOICE, .choices = "auto|on|off",
     .default_text = "auto", .accepts_auto = true, .jobs = SESSION,
     .help = "whether a decide reuses the kept prefix (off: it prefills it again; needs --decide)"},
    {.id = P_RENDER_TEMPLATE, .key = "render_template", .flag = "--render-template", .group = PARAM_GROUP_CHAT,
     .level = DEBUG, .type = PARAM_PATH, .value_name = "FILE",
     .help = "print FILE rendered with --template-context's members as its variables"},
    {.id = P_TEMPLATE_CONTEXT, .key = "template_context", .flag = "--template-context",
     .group = PARAM_GROUP_CHAT, .level = DEBUG, .type = PARAM_PATH, .value_name = "CONTEXT.json", .jobs = RENDER,
     .help = "the JSON object whose members --render-template's template sees"},
    {.id = P_TEMPLATE_NOW, .key = "template_now", .flag = "--template-now", .group = PARAM_GROUP_CHAT,
     .level = DEBUG, .type = PARAM_U64, .unit = "s", .value_name = "S", .default_text = "now",
     .jobs = RENDER | CHAT | SERVE, .help = "strftime_now's clock, in seconds since 1970"},
    /* streaming */
    {.id = P_MOE_STREAM, .key = "moe_stream", .flag = "--moe-stream", .group = PARAM_GROUP_STREAMING,
     .level = BASIC, .type = PARAM_SWITCH, .jobs = MODEL | SERVE,
     .help = "read each routed expert from the file into a bounded cache (without it: chosen, with --overlap, "
             "for a model larger than the memory available minus the cache floor)"},
    {.id = P_NO_MOE_STREAM, .key = "no_moe_stream", .flag = "--no-moe-stream", .group = PARAM_GROUP_STREAMING,
     .level = BASIC, .type = PARAM_SWITCH, .jobs = MODEL | SERVE,
     .help = "use the experts from the file mapping whatever the model's size"},
    {.id = P_IO_THREADS, .key = "io_threads", .flag = "--io-threads", .env = "BMOE_IO_THREADS",
     .group = PARAM_GROUP_STREAMING, .level = ADVANCED, .type = PARAM_INT, .low = 1, .high = 16, .unit = "lanes",
     .value_name = "N", .default_text = "4", .needs_stream = true, .jobs = MODEL | SERVE, .help = "read lanes"},
    {.id = P_NO_ODIRECT, .key = "no_odirect", .flag = "--no-odirect", .group = PARAM_GROUP_STREAMING,
     .level = ADVANCED, .type = PARAM_SWITCH, .needs_stream = true, .jobs = MODEL | SERVE,
     .help = "buffered reads instead of O_DIRECT"},
    {.id = P_OVERLAP, .key = "overlap", .flag = "--overlap", .env = "BMOE_OVERLAP", .group = PARAM_GROUP_STREAMING,
     .level = ADVANCED, .type = PARAM_SWITCH, .needs_stream = true, .jobs = MODEL | SERVE,
     .help = "compute resident experts while the missing ones are read"},
    {.id = P_LOAD_ALL, .key = "load_all", .flag = "--load-all", .group = PARAM_GROUP_STREAMING, .level = DEBUG,
     .type = PARAM_SWITCH, .needs_stream = true, .jobs = MODEL | SERVE,
     .help = "read every expert of every layer at each token, the routed ones computed as usual (a debugging "
             "A/B: the reads routing saves)"},
    /* the expert cache */
    {.id = P_CACHE_MB, .key = "cache_mb", .flag = "--cache-mb", .env = "BMOE_CACHE_MB", .group = PARAM_GROUP_CACHE,
     .level = BASIC, .type = PARAM_MIB, .low = 0, .high = 1 << 30, .unit = "MiB", .value_name = "N|auto",
     .default_text = "auto", .accepts_auto = true, .needs_stream = true, .jobs = MODEL | SERVE,
     .help = "the cache budget (auto: available memory minus the floor; 0: no cache, every routed expert "
             "re-read every token)"},
    {.id = P_CACHE_POLICY, .key = "cache_policy", .flag = "--cache-policy", .group = PARAM_GROUP_CACHE,
     .level = ADVANCED, .type = PARAM_CHOICE, .choices = "lru|freq", .default_text = "freq", .needs_stream = true,
     .jobs = MODEL | SERVE,
     .help = "which experts a full cache keeps: the most often used, recent uses counting more (freq), or the "
             "most recent (lru)"},
    {.id = P_EXPERT_PROFILE, .key = "expert_profile", .flag = "--expert-profile", .env = "BMOE_EXPERT_PROFILE",
     .group = PARAM_GROUP_CACHE, .level = ADVANCED, .type = PARAM_PATH, .value_name = "FILE", .needs_stream = true,
     .jobs = CHAT | SERVE,
     .help = "start with the experts FILE counts hottest read into the cache in the background, and write the "
             "run's counts there at its end (a session: at its close; bmoe-server: after every generation); a profile of another model is refused "
             "and left as it is"},
    {.id = P_CACHE_FLOOR, .key = "cache_floor_mb", .flag = "--cache-floor-mb", .group = PARAM_GROUP_CACHE,
     .level = ADVANCED, .type = PARAM_INT, .low = 0, .high = 1 << 30, .unit = "MiB", .value_name = "N",
     .default_text = "1024", .needs_stream = true, .jobs = MODEL | SERVE,
     .help = "auto: memory left free beside the cache and the contexts"},
    {.id = P_CACHE_CEIL, .key = "cache_ceil_mb", .flag = "--cache-ceil-mb", .group = PARAM_GROUP_CACHE,
     .level = ADVANCED, .type = PARAM_INT, .low = 1, .high = 1 << 30, .unit = "MiB", .value_name = "N",
     .default_text = "none", .needs_stream = true, .jobs = MODEL | SERVE, .help = "auto: at most N MiB"},
    {.id = P_PRELOAD_EXPERTS, .key = "preload_experts", .flag = "--preload-experts", .group = PARAM_GROUP_CACHE,
     .level = DEBUG, .type = PARAM_SWITCH, .needs_stream = true, .jobs = MODEL | SERVE,
     .help = "read every expert of every layer into the cache at load"},
    {.id = P_FORCE_CACHE, .key = "force_cache", .flag = "--force-cache", .group = PARAM_GROUP_CACHE, .level = DEBUG,
     .type = PARAM_SWITCH, .jobs = MODEL | SERVE, .help = "accepted (the reference's; bmoe refuses no cache size)"},
    /* prefetch */
    {.id = P_PREFETCH, .key = "prefetch", .flag = "--prefetch", .env = "BMOE_PREFETCH",
     .group = PARAM_GROUP_PREFETCH, .level = ADVANCED, .type = PARAM_INT, .low = 0, .high = 64, .unit = "layers",
     .value_name = "K", .default_text = "0", .needs_stream = true, .jobs = MODEL | SERVE,
     .help = "read what the previous token used K layers ahead"},
    {.id = P_PREDICT_PREFETCH, .key = "predict_prefetch", .flag = "--predict-prefetch",
     .env = "BMOE_PREDICT_PREFETCH", .group = PARAM_GROUP_PREFETCH, .level = EXPERIMENTAL, .type = PARAM_SWITCH,
     .needs_stream = true, .jobs = MODEL | SERVE,
     .help = "read ahead what the next layer's router predicts from this layer's input (decode; needs a cache, "
             "not with --prefetch; under --route-replay: the replayed routing itself)"},
    {.id = P_PREDICT_SPEC_MAX, .key = "predict_spec_max", .flag = "--predict-spec-max",
     .group = PARAM_GROUP_PREFETCH, .level = EXPERIMENTAL, .type = PARAM_INT, .low = 0, .high = 8,
     .unit = "experts", .value_name = "N", .default_text = "2", .needs_stream = true, .jobs = MODEL | SERVE,
     .help = "predicted misses per layer to read"},
    {.id = P_PREDICT_ALWAYS, .key = "predict_always", .flag = "--predict-always", .group = PARAM_GROUP_PREFETCH,
     .level = EXPERIMENTAL, .type = PARAM_SWITCH, .needs_stream = true, .jobs = MODEL | SERVE,
     .help = "read ahead at every decode step; without it the read-ahead pauses while its steps measure more "
             "seconds per token than steps without it, and is tried again now and then; the output is the same "
             "either way (needs --predict-prefetch)"},
    /* the lossy levers */
    {.id = P_DROP_COLD, .key = "drop_cold_experts", .flag = "--drop-cold-experts", .group = PARAM_GROUP_LOSSY,
     .level = EXPERIMENTAL, .type = PARAM_FLOAT, .low = 0, .high = 1, .value_name = "F", .default_text = "0",
     .lossy = true, .jobs = MODEL | SERVE,
     .help = "in decode, skip a routed expert the cache lacks whose weight is under F x 1/k of the routing "
             "(never the top one); the others are scaled back to the routing's total (needs a cache)"},
    {.id = P_DROP_NO_RENORM, .key = "drop_no_renorm", .flag = "--drop-no-renorm", .group = PARAM_GROUP_LOSSY,
     .level = EXPERIMENTAL, .type = PARAM_SWITCH, .lossy = true, .jobs = MODEL | SERVE,
     .help = "keep the surviving weights as routed (needs --drop-cold-experts)"},
    {.id = P_DROP_IN_PREFILL, .key = "drop_in_prefill", .flag = "--drop-in-prefill", .group = PARAM_GROUP_LOSSY,
     .level = EXPERIMENTAL, .type = PARAM_SWITCH, .lossy = true, .jobs = MODEL | SERVE,
     .help = "drop in the prompt too (needs --drop-cold-experts)"},
    {.id = P_SUBSTITUTE, .key = "expert_substitute", .flag = "--expert-substitute", .group = PARAM_GROUP_LOSSY,
     .level = EXPERIMENTAL, .type = PARAM_FLOAT, .low = 0, .high = 1, .value_name = "L", .default_text = "0",
     .lossy = true, .jobs = MODEL | SERVE,
     .help = "in decode, cached experts gain L x the spread of the token's router scores before the top-k "
             "(0.15 is mild; needs a cache)"},
    {.id = P_ROUTE_AHEAD, .key = "route_ahead", .flag = "--route-ahead", .group = PARAM_GROUP_LOSSY,
     .level = EXPERIMENTAL, .type = PARAM_INT, .low = 1, .high = 8, .unit = "layers", .value_name = "N",
     .default_text = "off", .lossy = true, .jobs = MODEL | SERVE,
     .help = "in decode, a layer's experts are chosen by its router on the input N MoE layers earlier and read "
             "from then on; a watchdog turns it off when the choice agrees with the router on under half (not "
             "with --predict-prefetch)"},
    /* the planner */
    {.id = P_AUTO, .key = "auto", .flag = "--auto", .alias = "--plan-run", .group = PARAM_GROUP_PLANNER,
     .level = BASIC, .type = PARAM_SWITCH, .jobs = MODEL,
     .help = "plan the run from the model and the machine (stream or not, the cache, the read lanes, overlap, "
             "the dense weights), then run it; a flag typed stays as typed, no lossy lever is armed; after the "
             "run a plan: line gives the predicted and measured s/token"},
    {.id = P_PLAN, .key = "plan", .flag = "--plan", .alias = "--plan-only", .group = PARAM_GROUP_PLANNER,
     .level = BASIC, .type = PARAM_SWITCH, .jobs = MODEL,
     .help = "print the plan --auto would run (and the flags that reproduce it), then exit"},
    {.id = P_PLAN_EXPLAIN, .key = "plan_explain", .flag = "--plan-explain", .group = PARAM_GROUP_PLANNER,
     .level = ADVANCED, .type = PARAM_SWITCH, .jobs = MODEL,
     .help = "with --auto or --plan: each decision with its reason and where it came from (measured, derived, "
             "policy, operator, unprobed)"},
    {.id = P_PROBE, .key = "probe", .flag = "--probe", .group = PARAM_GROUP_PLANNER, .level = ADVANCED,
     .type = PARAM_SWITCH, .jobs = MODEL,
     .help = "with --auto or --plan: measure the machine again instead of reusing the probe results kept for "
             "this model file and machine"},
    {.id = P_PROBE_IO, .key = "probe_io", .flag = "--probe-io", .group = PARAM_GROUP_PLANNER, .level = ADVANCED,
     .type = PARAM_SWITCH, .default_text = "on", .jobs = MODEL,
     .help = "the planner times reads of the model file at 1, 2, 4 and 8 lanes (a few seconds at most)"},
    {.id = P_NO_PROBE_IO, .key = "no_probe_io", .flag = "--no-probe-io", .group = PARAM_GROUP_PLANNER,
     .level = ADVANCED, .type = PARAM_SWITCH, .jobs = MODEL,
     .help = "the planner does not time reads: 4 lanes, no predicted s/token"},
    {.id = P_PROBE_MEM, .key = "probe_mem", .flag = "--probe-mem", .group = PARAM_GROUP_PLANNER, .level = ADVANCED,
     .type = PARAM_SWITCH, .default_text = "on", .jobs = MODEL,
     .help = "the planner times a read of memory (for the predicted compute time)"},
    {.id = P_NO_PROBE_MEM, .key = "no_probe_mem", .flag = "--no-probe-mem", .group = PARAM_GROUP_PLANNER,
     .level = ADVANCED, .type = PARAM_SWITCH, .jobs = MODEL,
     .help = "the planner does not time memory: no predicted s/token"},
    /* perplexity and logits */
    {.id = P_PPL, .key = "ppl", .flag = "--ppl", .group = PARAM_GROUP_PERPLEXITY, .level = ADVANCED,
     .type = PARAM_PATH, .value_name = "FILE",
     .help = "perplexity of FILE as llama.cpp counts it: chunks of -c tokens, each from an empty context, rows "
             "n_ctx/2..n_ctx-2 scored; prints [i]running-PPL per chunk and 'Final estimate: PPL = P +/- E'"},
    {.id = P_CHUNKS, .key = "chunks", .flag = "--chunks", .group = PARAM_GROUP_PERPLEXITY, .level = ADVANCED,
     .type = PARAM_INT, .low = 1, .high = INT32_MAX, .value_name = "N", .default_text = "all", .jobs = PPL,
     .help = "at most N chunks for --ppl"},
    {.id = P_PPL_LIST, .key = "ppl_list", .flag = "--ppl-list", .group = PARAM_GROUP_PERPLEXITY, .level = ADVANCED,
     .type = PARAM_PATH, .value_name = "FILE",
     .help = "one text per line (empty lines skipped), each from an empty context; a line longer than the "
             "context is refused; prints 'ppl-line: LINE SCORED nll M perplexity P hits H' per line"},
    {.id = P_PPL_SKIP, .key = "ppl_skip", .flag = "--ppl-skip", .group = PARAM_GROUP_PERPLEXITY, .level = ADVANCED,
     .type = PARAM_INT, .low = 0, .high = INT32_MAX, .unit = "tokens", .value_name = "N", .default_text = "8",
     .jobs = PPL,
     .help = "rows at positions N.. are scored: with --ppl-list the tokens at positions 0..N (BOS included) are "
             "context only, a line of fewer than N+2 tokens scores nothing; --ppl's chunks start scoring at N "
             "when it is given (else at n_ctx/2)"},
    {.id = P_PPL_CHOICES, .key = "ppl_choices", .flag = "--ppl-choices", .group = PARAM_GROUP_PERPLEXITY,
     .level = ADVANCED, .type = PARAM_LIST, .value_name = "A,B,...",
     .help = "with -p PROMPT: for each choice, from an empty context, the sum of log p(choice tokens | "
             "everything before); the choice's tokens are those of PROMPT+choice after the longest common "
             "prefix with PROMPT's own; '\\,' is a comma inside a choice, '\\\\' a backslash; prints "
             "'ppl-choices: best I of N' (0-based, the highest total) and 'ppl-choice: I logprob S tokens N "
             "mean S/N' per choice"},
    {.id = P_PPL_STEP, .key = "ppl_step", .flag = "--ppl-step", .group = PARAM_GROUP_PERPLEXITY,
     .level = ADVANCED, .type = PARAM_SWITCH, .jobs = PPL,
     .help = "evaluate every token alone (the decode path, where the lossy levers act and a streamed cache "
             "evolves as in generation): the same figures as a batch when no lever is on; adds 'ppl-policy: "
             "D/R routed experts dropped (%), S/K slots substituted (%)'. --ppl and --ppl-list end with 'ppl: N "
             "tokens scored, nll M, perplexity P, next-token hits H/N (%)'; on a streamed model every "
             "perplexity run adds 'ppl-stream: MiB read, MiB/token, cache hit %'"},
    {.id = P_PROMPT_IDS, .key = "prompt_ids", .flag = "--prompt-ids", .group = PARAM_GROUP_DIAGNOSTICS,
     .level = DEBUG, .type = PARAM_IDS, .value_name = "LIST", .jobs = GEN | LOGITS,
     .help = "the prompt as token ids (1,2,3) instead of text"},
    {.id = P_FORCE_IDS, .key = "force_ids", .flag = "--force-ids", .group = PARAM_GROUP_DIAGNOSTICS, .level = DEBUG,
     .type = PARAM_IDS, .value_name = "LIST", .jobs = LOGITS,
     .help = "teacher forcing: after the prompt ids as one prefill, these ids one single-token decode each "
             "(needs --logits-out)"},
    {.id = P_LOGITS_OUT, .key = "logits_out", .flag = "--logits-out", .group = PARAM_GROUP_DIAGNOSTICS,
     .level = DEBUG, .type = PARAM_PATH, .value_name = "FILE", .jobs = LOGITS,
     .help = "write every row of logits as float32 little-endian"},
    {.id = P_IDS_OUT, .key = "ids_out", .flag = "--ids-out", .group = PARAM_GROUP_DIAGNOSTICS, .level = DEBUG,
     .type = PARAM_PATH, .value_name = "FILE", .jobs = GEN,
     .help = "write the generated token ids, comma-separated on one line (what --prompt-ids, --force-ids and "
             "--draft-replay read)"},
    /* telemetry and diagnostics */
    {.id = P_PROGRESS, .key = "progress", .flag = "--progress", .env = "BMOE_PROGRESS",
     .group = PARAM_GROUP_DIAGNOSTICS, .level = BASIC, .type = PARAM_SWITCH, .jobs = CHAT,
     .help = "per token BMOE_LOAD / BMOE_PROGRESS JSON lines on stdout, then === answer === and === perf ==="},
    {.id = P_CSV, .key = "csv", .flag = "--csv", .group = PARAM_GROUP_DIAGNOSTICS, .level = ADVANCED,
     .type = PARAM_PATH, .value_name = "FILE", .jobs = CHAT,
     .help = "one row of metrics per generated token, with the run's configuration and a summary (files are "
             "written whole at the end of a successful run)"},
    {.id = P_ROUTE_TRACE, .key = "route_trace", .flag = "--route-trace", .group = PARAM_GROUP_DIAGNOSTICS,
     .level = DEBUG, .type = PARAM_PATH, .value_name = "FILE", .jobs = CHAT,
     .help = "one row per routed expert (with --moe-stream; without it a warning and no file)"},
    {.id = P_IO_TRACE, .key = "io_trace", .flag = "--io-trace", .group = PARAM_GROUP_DIAGNOSTICS, .level = DEBUG,
     .type = PARAM_PATH, .value_name = "FILE", .jobs = CHAT,
     .help = "one row per expert read (with --moe-stream; without it a warning and no file)"},
    {.id = P_COMPUTE_TRACE, .key = "compute_trace", .flag = "--compute-trace", .group = PARAM_GROUP_DIAGNOSTICS,
     .level = DEBUG, .type = PARAM_PATH, .value_name = "FILE", .jobs = CHAT,
     .help = "wall time and major faults per token segment"},
    {.id = P_COMPUTE_TRACE_LAYERS, .key = "compute_trace_layers", .flag = "--compute-trace-layers",
     .group = PARAM_GROUP_DIAGNOSTICS, .level = DEBUG, .type = PARAM_PATH, .value_name = "FILE", .jobs = CHAT,
     .help = "wall time and major faults per layer segment"},
    {.id = P_PREDICT_LOG, .key = "predict_log", .flag = "--predict-log", .env = "BMOE_PREDICT_LOG",
     .group = PARAM_GROUP_DIAGNOSTICS, .level = DEBUG, .type = PARAM_SWITCH, .jobs = GEN,
     .help = "after the run, how well three predictors foretold each decode routing, per layer: the next "
             "layer's router on this layer's input (stale-gate), the previous token's routing, and a control "
             "(two router products per layer and token)"},
    {.id = P_ROUTE_REPLAY, .key = "route_replay", .flag = "--route-replay", .group = PARAM_GROUP_DIAGNOSTICS,
     .level = DEBUG, .type = PARAM_PATH, .value_name = "TRACE.csv", .jobs = GEN,
     .help = "benchmarks: each step's experts from a route trace: decode steps in order, the prompt ending with "
             "the trace's own prompt and before it the trace's last decode steps (n_expert_used at least the "
             "model's: a narrower --n-expert-used replays each routing's first experts)"},
    {.id = P_ROUTE_REPLAY_GUESS_RIGHT, .key = "route_replay_guess_right", .flag = "--route-replay-guess-right",
     .group = PARAM_GROUP_DIAGNOSTICS, .level = DEBUG, .type = PARAM_FLOAT, .low = 0, .high = 1, .value_name = "P",
     .default_text = "1", .jobs = GEN,
     .help = "benchmarks: the read-ahead's guess of each replayed routing (--predict-prefetch) keeps each expert "
             "with probability P, else guesses one the step does not route to, decided by its place alone (the "
             "same in every run): a predictor whose share of right experts is P (needs --route-replay)"},
    /* the reference's, accepted as what bmoe does anyway */
    {.id = P_NO_WARM_DENSE, .key = "no_warm_dense", .flag = "--no-warm-dense", .group = PARAM_GROUP_MODEL,
     .level = DEBUG, .type = PARAM_SWITCH, .jobs = MODEL | SERVE, .help = "the reference's name for --dense-weights mmap"},
    {.id = P_DENSE_ODIRECT, .key = "dense_odirect", .flag = "--dense-odirect", .group = PARAM_GROUP_MODEL,
     .level = DEBUG, .type = PARAM_SWITCH, .jobs = MODEL | SERVE, .help = "the reference's name for --dense-weights anon"},
    {.id = P_DEVICES, .key = "devices", .flag = "--devices", .group = PARAM_GROUP_MODEL, .level = DEBUG,
     .type = PARAM_CHOICE, .choices = "all|cpu", .default_text = "all", .jobs = MODEL,
     .help = "accepted: this build computes on the CPU alone"},
    {.id = P_GPU_LAYERS, .key = "gpu_layers", .flag = "--gpu-layers", .group = PARAM_GROUP_MODEL, .level = DEBUG,
     .type = PARAM_INT, .low = 0, .high = INT32_MAX, .value_name = "0", .default_text = "0", .jobs = MODEL,
     .help = "accepted as 0: this build computes on the CPU alone"},
    /* bmoe-server's own */
    {.id = P_HOST, .key = "host", .flag = "--host", .group = PARAM_GROUP_SERVER, .level = BASIC,
     .type = PARAM_TEXT, .value_name = "ADDRESS", .default_text = "127.0.0.1", .jobs = SERVE,
     .help = "the IPv4 address to listen on (loopback unless told: another address without --api-key is "
             "warned about)"},
    {.id = P_PORT, .key = "port", .flag = "--port", .group = PARAM_GROUP_SERVER, .level = BASIC, .type = PARAM_INT,
     .low = 0, .high = 65535, .value_name = "N", .default_text = "8080", .jobs = SERVE,
     .help = "the TCP port (0: one the system picks; the listening line names it)"},
    {.id = P_API_KEY, .key = "api_key", .flag = "--api-key", .group = PARAM_GROUP_SERVER, .level = BASIC,
     .type = PARAM_TEXT, .value_name = "KEY", .default_text = "none", .jobs = SERVE,
     .help = "every /v1 and /api request needs Authorization: Bearer KEY"},
    {.id = P_ALIAS, .key = "alias", .flag = "--alias", .group = PARAM_GROUP_SERVER, .level = ADVANCED,
     .type = PARAM_TEXT, .value_name = "NAME", .default_text = "the file's name", .jobs = SERVE,
     .help = "the model's id in /v1/models and in answers; a request may name the model by it, the file's name "
             "or the file's name without .gguf, and gets 404 model_not_found for any other"},
    {.id = P_MAX_QUEUE, .key = "max_queue", .flag = "--max-queue", .group = PARAM_GROUP_SERVER, .level = ADVANCED,
     .type = PARAM_INT, .low = 0, .high = 1024, .unit = "requests", .value_name = "N", .default_text = "8",
     .jobs = SERVE, .help = "generations that may wait for the running one; past it a request gets 429"},
    {.id = P_MAX_BODY, .key = "max_body", .flag = "--max-body", .group = PARAM_GROUP_SERVER, .level = ADVANCED,
     .type = PARAM_INT, .low = 1, .high = 1024, .unit = "MiB", .value_name = "N", .default_text = "8",
     .jobs = SERVE, .help = "the largest request body; a larger one gets 413"},
    {.id = P_TIMEOUT, .key = "timeout", .flag = "--timeout", .group = PARAM_GROUP_SERVER, .level = ADVANCED,
     .type = PARAM_INT, .low = 1, .high = 3600, .unit = "seconds", .value_name = "S", .default_text = "30",
     .jobs = SERVE,
     .help = "a client must send its whole request within S seconds and may not stay silent longer; past it "
             "the connection is closed"},
    /* the reference's flags bmoe does not have */
    UNAVAILABLE("--io-two-wave", PARAM_SWITCH, NOT_HERE),
    UNAVAILABLE("--prefetch-sync", PARAM_SWITCH, NOT_HERE),
    UNAVAILABLE("--release-mmap", PARAM_SWITCH, NOT_YET_ROWS),
    UNAVAILABLE("--row-stream", PARAM_SWITCH, NOT_YET_ROWS),
    UNAVAILABLE("--row-stream-mb", PARAM_TEXT, NOT_YET_ROWS),
    UNAVAILABLE("--tensor-overrides", PARAM_TEXT, NEEDS_DEVICE),
    UNAVAILABLE("--dense-on-device", PARAM_SWITCH, NEEDS_DEVICE),
    UNAVAILABLE("--prefill-device", PARAM_TEXT, NEEDS_NPU),
    UNAVAILABLE("--prefill-min-tokens", PARAM_TEXT, NEEDS_NPU),
    UNAVAILABLE("--prefill-loaders", PARAM_TEXT, NEEDS_NPU),
    UNAVAILABLE("--prefill-routed", PARAM_SWITCH, NEEDS_NPU),
    UNAVAILABLE("--no-prefill-routed", PARAM_SWITCH, NEEDS_NPU),
    UNAVAILABLE("--decide-probe", PARAM_SWITCH, NEEDS_NPU),
};

const param_def *params_table(size_t *count)
{
    *count = sizeof params_rows / sizeof params_rows[0];
    return params_rows;
}

const param_def *params_find_flag(const char *flag)
{
    for (size_t i = 0; i < sizeof params_rows / sizeof params_rows[0]; i++) {
        const param_def *row = &params_rows[i];
        if (strcmp(flag, row->flag) == 0 || (row->short_flag && strcmp(flag, row->short_flag) == 0) ||
            (row->alias && strcmp(flag, row->alias) == 0))
            return row;
    }
    return NULL;
}

const param_def *params_find_id(param_id id)
{
    for (size_t i = 0; i < sizeof params_rows / sizeof params_rows[0]; i++)
        if (params_rows[i].id == id)
            return &params_rows[i];
    return NULL;
}

const param_def *params_find_key(const char *key)
{
    for (size_t i = 0; i < sizeof params_rows / sizeof params_rows[0]; i++)
        if (params_rows[i].key && strcmp(params_rows[i].key, key) == 0)
            return &params_rows[i];
    return NULL;
}

const char *params_group_name(param_group group)
{
    static const char *const names[PARAM_GROUP_COUNT] = {
        "Program", "Model", "Generation", "Sampling", "Speculation", "Streaming", "Cache", "Prefetch",
        "Lossy", "Planner", "Chat and sessions", "Perplexity", "Diagnostics", "Server", "Not available"};
    return (unsigned)group < PARAM_GROUP_COUNT ? names[group] : "?";
}

const char *params_level_name(param_level level)
{
    switch (level) {
    case PARAM_BASIC: return "basic";
    case PARAM_ADVANCED: return "advanced";
    case PARAM_EXPERIMENTAL: return "experimental";
    case PARAM_DEBUG: return "debug";
    }
    return "?";
}

const char *params_type_name(param_type type)
{
    switch (type) {
    case PARAM_SWITCH: return "bool";
    case PARAM_INT: return "int";
    case PARAM_FLOAT: return "float";
    case PARAM_TEXT: return "text";
    case PARAM_PATH: return "path";
    case PARAM_U64: return "uint64";
    case PARAM_IDS: return "token_ids";
    case PARAM_LIST: return "list";
    case PARAM_CHOICE: return "choice";
    case PARAM_MIB: return "mib";
    }
    return "?";
}

const char *params_source_name(param_source source)
{
    switch (source) {
    case PARAM_SOURCE_DEFAULT: return "default";
    case PARAM_SOURCE_FLAG: return "flag";
    case PARAM_SOURCE_ENV: return "environment";
    case PARAM_SOURCE_PLAN: return "plan";
    }
    return "?";
}
