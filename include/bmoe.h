/* libbmoe: run Mixture-of-Experts language models stored as GGUF files.
 *
 * The one public header. A bmoe_model holds the weights (memory-mapped, read
 * only), the hyperparameters and the tokenizer; a bmoe_context holds what one
 * conversation needs (KV cache, activation buffers, the thread pool, the
 * tokens its cache holds); a bmoe_generation runs the generation loop on a
 * context: prompt (reusing the cached prefix), prefill, sampling, decoding,
 * stop rules and the text of each step.
 *
 * Errors: a function that can fail returns NULL or a negative bmoe_status and,
 * when given a bmoe_error, fills it with the status and one line saying what
 * failed. The library never prints: warnings go to the log callback of the
 * model parameters. Thread safety: one thread per context at a time; a model
 * may serve several contexts. */
#ifndef BMOE_H
#define BMOE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define BMOE_API
#else
#define BMOE_API __attribute__((visibility("default")))
#endif

#define BMOE_VERSION "0.2.0"

/* The library's version (BMOE_VERSION when it was built). */
BMOE_API const char *bmoe_version(void);
/* The general.architecture names this build runs, by index from 0; NULL
 * past the last. */
BMOE_API const char *bmoe_architecture_name(int32_t index);

typedef struct bmoe_model bmoe_model;
typedef struct bmoe_context bmoe_context;
typedef struct bmoe_sampler bmoe_sampler;
typedef struct bmoe_generation bmoe_generation;

/* ---- Errors and logging ----------------------------------------------- */

typedef enum bmoe_status {
    BMOE_OK = 0,
    BMOE_ERR_INVALID_ARGUMENT = -1, /* a bad parameter, token id, flag value */
    BMOE_ERR_CONTEXT_FULL = -2,     /* the tokens do not fit in the context */
    BMOE_ERR_IO = -3,               /* a file could not be opened, mapped or read */
    BMOE_ERR_BAD_MODEL = -4,        /* the file is not a model this build can run */
    BMOE_ERR_OUT_OF_MEMORY = -5,
    BMOE_ERR_ABORTED = -6,          /* the abort callback asked to stop */
    BMOE_ERR_NUMERIC = -7,          /* the model computed non-finite logits */
} bmoe_status;

#define BMOE_ERROR_MAX 512

typedef struct bmoe_error {
    char message[BMOE_ERROR_MAX]; /* one line of printable ASCII (see bmoe_escape_message), NUL-terminated */
    bmoe_status status;
} bmoe_error;

/* "invalid argument", "context full", ...: a fixed string for each status. */
BMOE_API const char *bmoe_status_name(bmoe_status status);

/* Writes text into out (out_size > 0) as one line of printable ASCII, for a
 * message that quotes something from outside (a flag, a path, a request):
 * controls, DEL and every byte from 0x80 become \xNN, tab, newline and
 * carriage return \t, \n and \r, and a text too long is cut, ending in
 * "...". Backslashes stay as they are: the library's messages and log lines
 * are escaped this way already and read the same after a second pass.
 * Returns out. */
BMOE_API const char *bmoe_escape_message(const char *text, char *out, size_t out_size);

enum bmoe_log_level { BMOE_LOG_ERROR = 0, BMOE_LOG_WARNING = 1, BMOE_LOG_INFO = 2 };
/* One line of printable ASCII (see bmoe_escape_message), without a trailing newline. */
typedef void (*bmoe_log_callback)(void *user, enum bmoe_log_level level, const char *message);

/* ---- Model ------------------------------------------------------------ */

/* Where the dense weights (everything but the routed experts) are read from
 * during inference. */
enum bmoe_dense_weights {
    BMOE_DENSE_WEIGHTS_MMAP = 0, /* the file mapping (page cache), paged in on demand */
    BMOE_DENSE_WEIGHTS_ANON = 1, /* an engine-owned copy read at load (O_DIRECT, huge pages) */
    BMOE_DENSE_WEIGHTS_WARM = 2, /* the file mapping, read once sequentially at load */
};

/* Which experts a full expert cache keeps. */
enum bmoe_cache_policy {
    BMOE_CACHE_POLICY_LRU = 0,       /* evicts the least recently used */
    /* evicts the least often used, a use counting half after 16 tokens;
     * remembers the uses of experts it evicted (the default) */
    BMOE_CACHE_POLICY_FREQUENCY = 1,
};

/* Expert streaming: the routed experts are read from the file into a bounded
 * cache when a token routes to them, instead of through the mapping. */
typedef struct bmoe_stream_params {
    bool enabled;
    /* With enabled false: stream anyway, with overlap, when the model's files
     * are larger than the memory this process may still take (its cgroup's
     * limit included) minus cache_floor_mb. Mapped, such a model is read
     * again through page faults at every token. Default true; false keeps the
     * mapping whatever the model's size. bmoe_model_get_params and
     * bmoe_model_get_stream_state say what was chosen. */
    bool auto_enable;
    /* the cache budget; 0: no cache (re-read every token); -1: auto, the
     * memory free at load less cache_floor_mb, less later each context's KV
     * cache and buffers beyond what the floor leaves (bmoe_context_create
     * shrinks it; it refuses a context that does not fit beside the
     * smallest cache) */
    int64_t cache_mb;
    enum bmoe_cache_policy cache_policy;
    int64_t cache_floor_mb;   /* auto: memory left free beside the cache and the contexts (default 1024) */
    int64_t cache_ceil_mb;    /* auto: at most this (0: no cap) */
    int32_t io_threads;       /* read lanes, 1..16 (default 4) */
    bool direct;              /* O_DIRECT reads where the file system serves them right (default true) */
    bool overlap;             /* compute resident experts while the missing ones are read */
    int32_t prefetch;         /* read what the previous token used this many layers ahead (0: off) */
    /* Predictive prefetch (needs a cache; not with prefetch): while a decode
     * step computes a layer, the next MoE layer's router ranks that layer's
     * router input and up to predict_spec_max (0..8, default 2) of its
     * predicted experts that are not in the cache are read ahead. */
    bool predict_prefetch;
    int32_t predict_spec_max;
    /* Predictive prefetch at every decode step. Without it a generation
     * pauses the read-ahead while its steps measure more seconds per token
     * than steps without it (guesses that cost reads the misses needed, a
     * router product that costs more than it hides) and tries it again now
     * and then. Reads only: the output is the same either way. */
    bool predict_always;
    bool load_all;            /* read every expert of every layer at load (a debugging aid) */
    /* Read every expert of every MoE layer at each evaluation, not only the
     * routed ones (which are computed as usual): a debugging A/B of what the
     * reads cost when routing saves none (the reference's --load-all). */
    bool stage_all;
    /* The read function, with pread(2)'s contract (bytes read, 0 at the end
     * of the file, -1 with errno); NULL: the system's. For platforms with
     * their own file access, and tests that inject faults. */
    int64_t (*pread)(void *user, int fd, void *buffer, size_t length, int64_t offset);
    void *pread_user;
} bmoe_stream_params;

/* Progress of a long step of loading (copying the dense weights, the warm
 * sweep, pre-faulting, --load-all): done of total bytes; called on the
 * loading thread, a few hundred times per step at most. */
typedef void (*bmoe_load_progress)(void *user, const char *step, uint64_t done, uint64_t total);

/* Levers that read fewer expert bytes at a cost in quality (lossy; all off
 * by default, and with all off no bit of the output changes). Each needs an
 * expert cache (streaming with a cache budget above 0). */
typedef struct bmoe_lossy_params {
    /* 0..1; 0: off. In decode, a routed expert that is not in the cache and
     * whose final routing weight is below drop_cold_frac x (1 / k) is
     * skipped (never read); the top-weighted expert of a routing never is. */
    float drop_cold_frac;
    bool drop_no_renorm;     /* keep the survivors' weights as routed (default: scaled back to the routed total) */
    bool drop_in_prefill;    /* drop in prompt evaluation too */
    /* 0..1; 0: off. In decode, before the top-k is taken, every expert in
     * the cache gains substitute_lambda x (max - min of the token's scores)
     * in the space the top-k ranks in; the weights applied stay the
     * router's for whichever experts are chosen. */
    float substitute_lambda;
    /* 0..8; 0: off. In decode, layer L's experts are chosen by L's router
     * applied to the router input of the MoE layer route_ahead MoE layers
     * earlier, so their reads start that early; the weights are the
     * router's own for the chosen experts. The first route_ahead MoE layers
     * and prefill keep the router's choice. A watchdog compares the choice with the router's and turns the
     * lever off for the context when they agree on under half the slots. */
    int32_t route_ahead;
} bmoe_lossy_params;

typedef struct bmoe_model_params {
    enum bmoe_dense_weights dense_weights;
    bmoe_load_progress load_progress; /* may be NULL */
    void *load_progress_user;
    bool prefault;               /* map every page at load when the model fits in RAM */
    /* the draft head (a carried nextn block, MTP drafting) placed with the
     * dense weights and counted in the memory the cache is sized around;
     * without it, MTP drafting reads the head's dense tensors through the
     * file mapping, where a streamed model's page cache does not keep them */
    bool draft_head;
    int32_t n_expert_used;       /* routing width override (lossy); 0: the model's */
    bmoe_stream_params stream;
    bmoe_lossy_params lossy;
    bmoe_log_callback log_callback; /* warnings of the model and its contexts; may be NULL */
    void *log_user;
} bmoe_model_params;

BMOE_API bmoe_model_params bmoe_model_default_params(void);
/* params may be NULL (the defaults). */
BMOE_API bmoe_model *bmoe_model_load(const char *path, const bmoe_model_params *params, bmoe_error *error);
BMOE_API void bmoe_model_free(bmoe_model *model);

BMOE_API const char *bmoe_model_architecture(const bmoe_model *model); /* "qwen3moe" */
BMOE_API int32_t bmoe_model_n_vocab(const bmoe_model *model);
BMOE_API int32_t bmoe_model_n_ctx_train(const bmoe_model *model);
BMOE_API int32_t bmoe_model_n_layer(const bmoe_model *model);

/* Sizes and the expert layout, as the file stores them. */
typedef struct bmoe_model_info {
    uint64_t file_bytes;        /* all shards */
    uint64_t tensor_bytes;      /* every tensor's data but the nextn_predict_layers blocks' (never read; the
                                   draft head's counted with draft_head) */
    uint64_t expert_bytes;      /* the routed experts' tensors */
    uint64_t dense_bytes;       /* tensor_bytes - expert_bytes */
    int32_t n_layer;
    int32_t n_moe_layers;       /* layers with routed experts */
    int32_t n_expert;           /* per MoE layer; 0 for a dense model */
    int32_t n_expert_used;      /* in effect (bmoe_model_params.n_expert_used may lower it) */
    int32_t n_expert_used_file; /* as the file states it */
    uint64_t expert_slice_bytes; /* one expert of one layer, all projections (the largest layer's) */
    uint32_t n_shards;
} bmoe_model_info;

BMOE_API void bmoe_model_get_info(const bmoe_model *model, bmoe_model_info *info);

/* One layer's bytes: one routed expert as it is read (all its projections;
 * 0 for a layer without experts) and the layer's other tensors. Returns 0,
 * or BMOE_ERR_INVALID_ARGUMENT for a layer out of range. */
BMOE_API int bmoe_model_layer_bytes(const bmoe_model *model, int32_t layer, uint64_t *expert_bytes,
                                    uint64_t *dense_bytes);

/* The parameters as resolved at load: stream.cache_mb is the budget the
 * cache was sized to (auto resolved), n_expert_used the effective width. */
BMOE_API void bmoe_model_get_params(const bmoe_model *model, bmoe_model_params *params);

/* The expert store now (cumulative counters since load). */
typedef struct bmoe_stream_state {
    bool streaming;
    bool direct;                  /* every shard read with O_DIRECT (as achieved, not as asked) */
    int64_t cache_budget_bytes;   /* 0: no cache */
    uint64_t cache_resident_bytes;
    uint64_t cycle_bytes;         /* one token's worst-case routed bytes (k x the MoE layers' expert bytes) */
    uint64_t read_bytes, hits, misses, evictions, rereads;
    uint64_t warmed;              /* experts the warm-up from a profile read */
    uint64_t warm_pending;        /* experts it has still to read */
} bmoe_stream_state;
BMOE_API void bmoe_model_get_stream_state(const bmoe_model *model, bmoe_stream_state *state);

/* The expert profile (a streamed model with a cache): each expert's uses as
 * the cache counts them (recent uses weigh more), written to path with the
 * model's identity, so that a later run of the same model starts warm. */
BMOE_API int bmoe_model_save_expert_profile(bmoe_model *model, const char *path, bmoe_error *error);
/* Reads a profile written by bmoe_model_save_expert_profile and warms the
 * cache from it: the cache takes its counts as the experts' past uses and
 * reads the hottest experts, as many as it holds, in the background (on
 * idle read lanes, after every demand read: neither this call nor the first
 * token waits for them). Output is unchanged: only where the bytes come
 * from is. Returns how many experts were queued (>= 0; 0 when path does
 * not exist yet: a save creates it), or a negative status with one line in
 * error: no cache, a cache policy without counts (lru), a file that is no
 * profile or is damaged, a profile of another model. The model runs cold
 * then, as without a profile. */
BMOE_API int bmoe_model_load_expert_profile(bmoe_model *model, const char *path, bmoe_error *error);

/* The fraction of the dense (non-expert) weights' pages in RAM now, sampled
 * with mincore over at most 256 pages (the engine's copy, or the mapping);
 * -1 when it cannot be measured. */
BMOE_API double bmoe_model_dense_resident_fraction(const bmoe_model *model);

/* A metadata string by key (e.g. "general.name", "tokenizer.chat_template").
 * Returns its length in bytes (not counting a NUL), copying what fits of it
 * and a NUL into buf when buf_size > 0; -1 when the key is absent or not a
 * string. */
BMOE_API int64_t bmoe_model_meta_string(const bmoe_model *model, const char *key, char *buf, size_t buf_size);
/* The model's chat template (tokenizer.chat_template), NUL-terminated, owned
 * by the model; NULL when it has none. */
BMOE_API const char *bmoe_model_chat_template(const bmoe_model *model);

/* ---- Tokenizer -------------------------------------------------------- */

/* Tokenizes text. add_special: add BOS/EOS as the vocabulary's metadata asks;
 * parse_special: recognise special/control token text inside text.
 * Returns the number of tokens; when it exceeds max_tokens nothing past
 * max_tokens is written and the caller retries with a larger buffer.
 * Negative bmoe_status on error (error says why; may be NULL). */
BMOE_API int32_t bmoe_tokenize(const bmoe_model *model, const char *text, size_t text_length, bool add_special,
                               bool parse_special, int32_t *tokens, int32_t max_tokens, bmoe_error *error);

/* Copies the bytes of one token's text to buf (render_special: print
 * control tokens' text). Returns the number of bytes the piece has (which
 * may exceed buf_size, then nothing is written), or a negative bmoe_status.
 * A piece may end inside a UTF-8 sequence; the generation joins pieces. */
BMOE_API int32_t bmoe_token_to_piece(const bmoe_model *model, int32_t token, bool render_special, char *buf,
                                     int32_t buf_size, bmoe_error *error);

BMOE_API bool bmoe_token_is_end_of_generation(const bmoe_model *model, int32_t token);
BMOE_API int32_t bmoe_token_bos(const bmoe_model *model); /* -1 if none */
BMOE_API int32_t bmoe_token_eos(const bmoe_model *model);
/* The end-of-generation tokens (EOS, end of turn, ...): writes up to
 * max_tokens of them in id order and returns how many there are. */
BMOE_API int32_t bmoe_token_end_of_generation_list(const bmoe_model *model, int32_t *tokens, int32_t max_tokens);

/* ---- Statistics --------------------------------------------------------- */

/* What one evaluation cost: a decode step, or a whole prefill. The engine
 * fills the clocks and the process counters around the forward pass; the
 * expert store fills its counters (all 0 while experts are not streamed). */
typedef struct bmoe_stats {
    int32_t n_tokens;        /* tokens evaluated; 0: no evaluation happened */
    double wall_ms;          /* wall time of the forward pass(es) */
    double cpu_ms;           /* process CPU time (all threads) over the same window; 0: unmeasured */
    int64_t majflt;          /* major page faults over the same window */
    double loop_overhead_ms; /* wall time since the previous evaluation ended (sampling, output) */
    /* expert store */
    uint64_t read_bytes;     /* bytes read from the model file(s) for experts */
    double io_ms;            /* serial: wall time blocked on reads; overlap: summed lane busy time */
    double stall_ms;         /* overlap: union of the intervals a compute thread waited for bytes */
    double mgmt_ms;          /* cache management (slot bookkeeping, eviction) */
    uint64_t cache_hits;     /* routed (layer, expert) found in the cache */
    uint64_t cache_misses;   /* routed (layer, expert) read from the file */
    uint64_t evictions;
    uint64_t rereads;        /* misses on an entry the cache had held before */
    uint64_t prefetch_bytes; /* speculative reads (a subset of read_bytes) */
    uint64_t prefetched;     /* experts read ahead */
    uint64_t prefetch_useful;/* of those, how many a later routing hit */
    uint64_t prefetch_trusted;/* of prefetched, how many were admitted while the guesses were trusted (measured right): read at the disk's full rate */
    uint64_t guesses_judged;  /* guesses whose layer routed since they were made, read or not (a wrong one is often
                               * dropped unread, so prefetch_useful / prefetched overstates a predictor) */
    uint64_t guesses_right;   /* of those, how many the layer routed to */
    uint64_t predict_paused; /* decode steps that read nothing ahead: the read-ahead measured slower (not predict_always) */
    /* routing and the lossy levers (bmoe_lossy_params) */
    uint64_t experts_routed;      /* (token, slot) routings evaluated */
    uint64_t experts_dropped;     /* of those, skipped by drop_cold_frac */
    uint64_t experts_reranked;    /* slots the substitution examined */
    uint64_t experts_substituted; /* of those, given to another (cached) expert than the router's */
    uint64_t ra_committed;        /* route-ahead: routings chosen early */
    uint64_t ra_passthrough;      /* eligible routings that kept the router's choice */
    uint64_t ra_slots, ra_agree_slots; /* committed slots, and those the router chose too */
    uint64_t ra_disarmed;         /* 1 when the watchdog turned route-ahead off in this evaluation */
    double ra_gemv_ms;            /* the early router products */
    double ra_issue_ms;           /* issuing the committed experts' reads */
    double ra_wd_ms;              /* the watchdog's comparison */
} bmoe_stats;

/* Adds every counter of b to a (n_tokens too): sums over steps. */
BMOE_API void bmoe_stats_add(bmoe_stats *a, const bmoe_stats *b);

/* ---- Context: the forward pass ---------------------------------------- */

enum bmoe_kv_type { BMOE_KV_F16 = 0, BMOE_KV_F32 = 1 };

/* What the sliding-window layers (gpt-oss's, Gemma's, DeepSeek-V4's raw
 * ones) keep; the output is the same in every mode.
 * RING: a ring of their window and one micro-batch (n_swa + n_ubatch
 * positions, at least 16 past the window), a fraction of their KV memory at
 * long contexts. A context cut back to a position more than the margin
 * behind the newest one written has lost part of that position's window:
 * the kept prefix is evaluated again (a generation's reused prefix then
 * counts 0).
 * CHECKPOINT: a ring, and a copy of it taken at the end of each
 * generation's prompt (bmoe_generation_start; bmoe_eval alone takes none),
 * which a later prompt extending that one (the next turn of a
 * conversation) reuses however long the answer ran: twice the ring's
 * memory (every position instead where that is less).
 * FULL: every position, as llama.cpp's --swa-full. */
enum bmoe_swa_cache { BMOE_SWA_RING = 0, BMOE_SWA_CHECKPOINT = 1, BMOE_SWA_FULL = 2 };

typedef struct bmoe_route_event {
    int32_t layer;
    int32_t position;          /* position of the token in the sequence */
    int32_t n_experts_used;
    const int32_t *experts;    /* selected experts, in rank order */
    const float *weights;      /* their final routing weights */
    const uint8_t *residency;  /* per slot: 0 read from the file, 1 in the cache, 2 in the cache by a
                                  prefetch not used before (resident models: 1) */
    const uint64_t *read_bytes;/* per slot: the bytes this routing read (only the first routing of an
                                  expert in a batch carries them) */
    const uint8_t *dropped;    /* per slot: 1 when the drop lever skipped it (never read, not in the sum) */
    bool batch;                /* part of a batch of several tokens (prefill) */
} bmoe_route_event;

/* Called once per (token, MoE layer) after the layer's experts were fetched,
 * in token order: telemetry and traces attach here. */
typedef void (*bmoe_route_callback)(void *user, const bmoe_route_event *event);

/* For benchmarks that replay a recorded routing: called per (token, MoE
 * layer) before the router decides; returning true with n_used distinct
 * experts of the layer written to experts makes them the choice (their
 * weights computed from the router's logits as for its own choice). */
typedef bool (*bmoe_route_override)(void *user, int32_t layer, int32_t position, int32_t n_used, int32_t *experts);

/* One read of an expert slice from the file (streaming). */
typedef struct bmoe_io_event {
    int32_t layer, expert, projection;
    int32_t lane;
    bool speculative;          /* a prefetch, read wholly before any layer needed it */
    uint64_t offset;           /* in its shard */
    uint64_t requested_bytes;  /* the slice */
    uint64_t device_bytes;     /* what was read (the aligned window under O_DIRECT) */
    int64_t latency_ns;
    /* A prefetch needed while it was still being read: the first
     * speculative_requested_bytes of the slice (speculative_device_bytes of
     * device_bytes, in speculative_latency_ns) were read as a guess, the rest
     * on demand. All 0 when speculative, or when no byte was read as a guess. */
    uint64_t speculative_requested_bytes, speculative_device_bytes;
    int64_t speculative_latency_ns;
} bmoe_io_event;
/* Called on the evaluating thread after the reads of a layer completed. */
typedef void (*bmoe_io_callback)(void *user, const bmoe_io_event *event);

/* Compute trace: the wall time since the previous event of its kind, and
 * the major page faults in it, at each layer boundary of a forward pass
 * (layer -1 with name "pre" is the embedding before layer 0, "post" the
 * final norm and head), and with trace_ops also at the end of each building
 * block (op set; blocks tile the pass, each from the previous one's end). */
typedef struct bmoe_trace_event {
    int32_t layer;
    const char *name;          /* "blk.<layer>", "pre", "post"; a block's name "<block>-<layer>" */
    const char *op;            /* NULL for a layer boundary; the block's kind ("MUL_MAT", "ROPE", ...) */
    int64_t wall_ns;
    int64_t majflt;
} bmoe_trace_event;
typedef void (*bmoe_trace_callback)(void *user, const bmoe_trace_event *event);

/* Asked between prefill micro-batches, between layers and between decode
 * steps; returning true stops the evaluation with BMOE_ERR_ABORTED. Called
 * on the evaluating thread; the application may set its own flag from any
 * other thread and return it here. */
typedef bool (*bmoe_abort_callback)(void *user);

typedef struct bmoe_context_params {
    int32_t n_ctx;            /* 0: the model's, capped at 4096 */
    int32_t n_ubatch;         /* prefill micro-batch; 0: 512 */
    int32_t n_threads;        /* 0: number of cores */
    int32_t n_threads_batch;  /* threads of an evaluation of several tokens (prefill); 0: n_threads */
    enum bmoe_kv_type kv_type;
    bmoe_route_callback route_callback; /* may be NULL */
    void *route_user;
    bmoe_abort_callback abort_callback; /* may be NULL */
    void *abort_user;
    bmoe_io_callback io_callback;       /* streaming reads; may be NULL */
    void *io_user;
    bmoe_trace_callback trace_callback; /* layer boundaries (a diagnostic: it costs a clock read per layer) */
    void *trace_user;
    bool trace_ops;                     /* the trace callback also gets one event per building block */
    bmoe_route_override route_override; /* replayed routing (benchmarks); may be NULL */
    void *route_override_user;
    /* For benchmarks that price a predictor of a chosen accuracy: the guess
     * of a decode step's routing at a layer, asked one MoE layer ahead by the
     * predictive prefetch (the true choice is asked of route_override when
     * the layer routes). NULL: the route override's choice is the guess
     * (never wrong), or without one the next layer's router. Changes only
     * what is read ahead, never the output. */
    bmoe_route_override route_guess;
    void *route_guess_user;
    /* The prediction probe (a diagnostic: two router products per MoE layer
     * and decode step): how well three predictors foretell each decode
     * routing, read with bmoe_context_predict_log. Changes no output. */
    bool predict_log;
    enum bmoe_swa_cache swa_cache; /* default BMOE_SWA_RING */
} bmoe_context_params;

BMOE_API bmoe_context_params bmoe_context_default_params(void);
/* params may be NULL (the defaults). */
BMOE_API bmoe_context *bmoe_context_create(bmoe_model *model, const bmoe_context_params *params, bmoe_error *error);
BMOE_API void bmoe_context_free(bmoe_context *context);
BMOE_API int32_t bmoe_context_n_ctx(const bmoe_context *context);
BMOE_API int32_t bmoe_context_position(const bmoe_context *context); /* tokens in the KV cache */
/* The tokens in the KV cache, in position order (bmoe_context_position of them). */
BMOE_API const int32_t *bmoe_context_tokens(const bmoe_context *context);
BMOE_API const bmoe_model *bmoe_context_model(const bmoe_context *context);
BMOE_API int32_t bmoe_context_n_threads(const bmoe_context *context);       /* a single token's */
BMOE_API int32_t bmoe_context_n_threads_batch(const bmoe_context *context); /* several tokens' */
BMOE_API int32_t bmoe_context_n_ubatch(const bmoe_context *context);

/* Evaluates n_tokens tokens at positions position..position+n_tokens-1
 * (appending to the KV cache; prefill runs in ubatches). When logits is not
 * NULL it receives n_tokens rows of n_vocab floats if all_logits, else only
 * the last token's row. stats, when not NULL, receives what it cost. Returns
 * 0 or a negative bmoe_status; after an abort or an error the cache keeps
 * the micro-batches that completed and forgets the rest. Logits holding NaN
 * or Inf are an error (BMOE_ERR_NUMERIC), never passed on as results. */
BMOE_API int bmoe_eval(bmoe_context *context, const int32_t *tokens, int32_t n_tokens, float *logits,
                       bool all_logits, bmoe_stats *stats, bmoe_error *error);

/* Forgets every position >= position (0 clears the cache). A model with
 * recurrent layers (lfm2moe's convolutions, qwen35moe's Gated DeltaNet)
 * cannot cut their state back, nor can sliding-window rings (swa_cache)
 * cut further back than their margin and checkpoint keep: there the next
 * bmoe_eval first recomputes the kept positions (one prefill of them, same
 * results as the first time, its routes not reported). */
BMOE_API void bmoe_context_truncate(bmoe_context *context, int32_t position);

/* The prediction probe's score at one MoE layer since the context was
 * created (bmoe_context_params.predict_log), against the experts the
 * router chose (before any lossy lever), per predictor: the stale gate (this
 * layer's router on the previous MoE layer's router input, what
 * --predict-prefetch reads ahead by), the previous token's routing at this
 * layer (what --prefetch bets on), and the control (this layer's router on
 * its own input: 100 % unless the arithmetic differs). rows: routings
 * scored; slots: their slots; slot_hits: slots the predictor named; exact:
 * routings it named whole. unranked: routings the stale gate could not rank
 * (the first MoE layer of a step). */
enum { BMOE_PREDICT_STALE = 0, BMOE_PREDICT_PREVIOUS = 1, BMOE_PREDICT_CONTROL = 2, BMOE_PREDICTORS = 3 };
typedef struct bmoe_predict_score {
    uint64_t rows[BMOE_PREDICTORS], slots[BMOE_PREDICTORS], slot_hits[BMOE_PREDICTORS], exact[BMOE_PREDICTORS];
    uint64_t unranked;
} bmoe_predict_score;
/* Returns 0, or BMOE_ERR_INVALID_ARGUMENT when the probe is off or layer is out of range. */
BMOE_API int bmoe_context_predict_log(const bmoe_context *context, int32_t layer, bmoe_predict_score *score);

/* What a context holds in memory. */
typedef struct bmoe_context_memory {
    uint64_t kv_bytes;        /* the KV cache (the layers with attention, the sliding-window rings'
                                 checkpoint; deepseek4's compressed layers' per-position compressor
                                 rows and compressed entries) */
    uint64_t recurrent_bytes; /* the recurrent layers' state */
    uint64_t buffer_bytes;    /* activation buffers */
    uint64_t draft_head_bytes; /* what an MTP generation would add (0 without a head): the draft head's KV
                                  cache, taken at the first and kept, and the drafter's buffers (the hidden
                                  rows of every position), taken for each; not in buffer_bytes */
} bmoe_context_memory;
BMOE_API void bmoe_context_memory_usage(const bmoe_context *context, bmoe_context_memory *out);

/* ---- Sampling --------------------------------------------------------- */

/* A token's logit raised or lowered before sampling (OpenAI's logit_bias,
 * llama.cpp's --logit-bias); -INFINITY: the token is never chosen. */
typedef struct bmoe_logit_bias {
    int32_t token;
    float bias;
} bmoe_logit_bias;

typedef struct bmoe_sampler_params {
    float temperature;     /* <= 0: greedy */
    int32_t top_k;         /* <= 0: off */
    float top_p;           /* >= 1: off */
    float min_p;           /* <= 0: off */
    float repeat_penalty;  /* 1: off */
    int32_t repeat_last_n; /* tokens of history the penalties look at; -1: all */
    /* subtracted from a logit: frequency_penalty per use of the token in that
     * history, presence_penalty once if it is there (0: off; OpenAI's
     * presence_penalty and frequency_penalty, llama.cpp's --presence-penalty
     * and --frequency-penalty) */
    float frequency_penalty;
    float presence_penalty;
    uint64_t seed;
    /* added to the logits first, before the penalties and filters (the
     * sampler copies them at create; a token given twice adds both) */
    const bmoe_logit_bias *logit_bias;
    int32_t n_logit_bias;
} bmoe_sampler_params;

BMOE_API bmoe_sampler_params bmoe_sampler_default_params(void); /* greedy */
BMOE_API bmoe_sampler *bmoe_sampler_create(const bmoe_sampler_params *params, int32_t n_vocab, bmoe_error *error);
BMOE_API void bmoe_sampler_free(bmoe_sampler *sampler);
/* Picks the next token from one row of logits (not modified); history: the
 * tokens so far (for the penalties). */
BMOE_API int32_t bmoe_sampler_sample(bmoe_sampler *sampler, const float *logits, const int32_t *history,
                                     int32_t n_history);

/* A token and its log-probability. */
typedef struct bmoe_token_logprob {
    int32_t token;
    float logprob;
} bmoe_token_logprob;

#define BMOE_MAX_TOP_LOGPROBS 20

/* log(sum(exp(logits))) over a row, in double: a token's log-probability
 * is its logit minus this. NaN counts as -inf; -INFINITY when every logit
 * is, NAN when one is +inf (or there is no row). */
BMOE_API double bmoe_log_sum_exp(const float *logits, int32_t n_vocab);

/* The model's log-probabilities in one row of n_vocab logits (the
 * log-softmax of the row as the model computed it: no penalty, temperature
 * or filter; NaN counts as -inf): token's, returned, and the n_top
 * (0..BMOE_MAX_TOP_LOGPROBS) most likely tokens' in top, most likely first,
 * the lower id first among equals. NAN for a token outside the vocabulary
 * and for every token of a row holding +inf; -INFINITY where the row rules
 * a token out. */
BMOE_API float bmoe_logprobs(const float *logits, int32_t n_vocab, int32_t token, int32_t n_top,
                             bmoe_token_logprob *top);

/* ---- Generation ------------------------------------------------------- */

enum bmoe_stop_reason {
    BMOE_STOP_NONE = 0,         /* still generating */
    BMOE_STOP_END_OF_GENERATION,/* the model produced an end-of-generation token */
    BMOE_STOP_N_PREDICT,        /* n_predict tokens were generated */
    BMOE_STOP_CONTEXT_FULL,     /* no room left in the context */
    BMOE_STOP_STRING,           /* a stop string appeared in the text */
    BMOE_STOP_ABORTED,          /* the abort callback asked to stop */
};

/* Where speculative decoding takes its drafts from (bmoe_speculation_params). */
enum bmoe_draft_source {
    BMOE_DRAFT_NONE = 0,     /* plain decoding, one token per evaluation (the default) */
    BMOE_DRAFT_NGRAM = 1,    /* the continuation of the longest earlier match of the text's end */
    BMOE_DRAFT_MTP = 2,      /* the model's next-token head (the nextn block of qwen35moe, glm4moe, bailingmoe2,
                                deepseek2) */
    BMOE_DRAFT_CALLBACK = 3, /* the params' draft_callback */
};

/* Proposes up to max_drafts tokens to follow history[0..n_history) (the
 * context's tokens: the prompt, the generated tokens and last the token
 * about to be evaluated). Writes them to drafts and returns how many
 * (0..max_drafts; 0: a plain decode). Drafts only cost time: whatever they
 * are, the output is the same. */
typedef int32_t (*bmoe_draft_callback)(void *user, const int32_t *history, int32_t n_history, int32_t *drafts,
                                       int32_t max_drafts);

/* Speculative decoding, exact: a step evaluates the next token and up to
 * n_draft drafted tokens in one batch, samples every position as plain
 * decoding would (same sampler state, same random draws in the same order,
 * same repeat-penalty history) and keeps the drafts up to the first one that
 * differs from the sampled token. Tokens, text, stop rules and the context
 * position at the end are byte-identical to plain decoding (the engine's
 * logits do not depend on how many tokens share a batch). Refused at start
 * with the lossy levers on (they act on single-token decodes only). The
 * context's route, trace and I/O callbacks see each verify batch as it ran
 * (rejected drafts included, as a batch); a hybrid model's rollback, which
 * evaluates the kept tokens again, is not reported to them. */
typedef struct bmoe_speculation_params {
    enum bmoe_draft_source source;
    int32_t n_draft;          /* 1..8 tokens drafted per step (default 3) */
    int32_t ngram_min_match;  /* n-gram: the shortest match that drafts (default 3) */
    int32_t ngram_max_match;  /* n-gram: matches are compared up to this many tokens (default 12) */
    /* MTP: drafting stops at the first head step whose most likely token has
     * a probability (softmax of the head's logits) below this, the first
     * draft included (the step is then a plain decode). 0..1, default 0:
     * every step drafts n_draft tokens; must be 0 with another source. */
    float mtp_p_min;
    /* false (default): drafting pauses while its steps measure more wall
     * seconds per generated token than plain steps, and is tried again now
     * and then (the output is the same either way); true: every step the
     * source proposes drafts is a verify batch (benchmarks pricing a batch,
     * tests counting drafts) */
    bool draft_always;
    bmoe_draft_callback draft_callback; /* source CALLBACK */
    void *draft_user;
} bmoe_speculation_params;

/* A rule on which tokens a generation may take next (structured output:
 * bmoe_json_constraint). Before each token is chosen the generation asks
 * which tokens are allowed and samples among those alone (the others count
 * as -inf; a step's logprobs stay the model's own row); it tells accept
 * every token it took, in order. A step where none is allowed ends the
 * generation (BMOE_STOP_END_OF_GENERATION). With drafting, each verified
 * position is chosen as plain decoding chooses it, so the output is the
 * same; a verify batch may choose, and tell accept, one token past where
 * the generation then stops (never handed out). A greedy generation asks
 * allows for its own choice first and the whole row only when that is
 * refused. */
typedef struct bmoe_token_constraint {
    /* allowed[t] = 1 for each token t < n_vocab that may come next, else 0; returns how many */
    int32_t (*allowed)(void *user, uint8_t *allowed, int32_t n_vocab);
    bool (*allows)(void *user, int32_t token);
    void (*accept)(void *user, int32_t token);
    void *user;
} bmoe_token_constraint;

typedef struct bmoe_generation_params {
    int32_t n_predict;             /* tokens to generate; -1: until another stop */
    bool ignore_eos;               /* generate past end-of-generation tokens */
    bool echo_prompt;              /* the text starts with the prompt's (special tokens rendered) */
    bool render_special;           /* control tokens' text appears in the generated text */
    const char *const *stop_strings; /* the text ends before the first of these (not included) */
    int32_t n_stop_strings;
    bmoe_sampler_params sampler;
    bmoe_speculation_params speculation; /* off by default */
    /* each step reports its token's log-probability and the top_logprobs
     * (0..BMOE_MAX_TOP_LOGPROBS) most likely tokens' (bmoe_logprobs of the
     * row it was sampled from; drafting changes none of them). Off by default. */
    bool logprobs;
    int32_t top_logprobs;
    /* NULL: any token; else it must outlive the generation, and start where
     * the generation's first token does */
    const bmoe_token_constraint *constraint;
} bmoe_generation_params;

/* One step of a generation: a token, or the end. */
typedef struct bmoe_step {
    int32_t index;               /* 1-based count of generated tokens; 0 before the first */
    int32_t token;               /* -1 on the final step (stop != NONE) */
    const char *text;            /* text that became final with this step (valid UTF-8, may be ""); */
    size_t text_length;          /*   valid until the next call on the generation */
    enum bmoe_stop_reason stop;  /* NONE while generating */
    /* with params.logprobs, for token (else 0, 0, NULL): its log-probability
     * and the most likely tokens', valid until the next call */
    float logprob;
    int32_t n_top;
    const bmoe_token_logprob *top;
    /* the decode of this token (n_tokens 0 when none ran). With drafting, a
     * verify batch's whole cost (its drafts, and the re-evaluation a hybrid
     * model's rollback needs) is on the step of the batch's first token;
     * the accepted drafts' steps that follow show n_tokens 0. */
    bmoe_stats stats;
} bmoe_step;

BMOE_API bmoe_generation_params bmoe_generation_default_params(void); /* greedy, n_predict 128 */

/* Starts a generation on context from prompt tokens: keeps the longest
 * prefix of the context's cached tokens that the prompt shares (at least one
 * token is always evaluated, so the first logits are fresh), prefills the
 * rest and prepares sampling. Any earlier generation on the context must be
 * freed first. NULL on error (the context stays usable). */
BMOE_API bmoe_generation *bmoe_generation_start(bmoe_context *context, const bmoe_generation_params *params,
                                                const int32_t *prompt, int32_t n_prompt, bmoe_error *error);
/* The same from text, tokenized with add_special and parse_special. */
BMOE_API bmoe_generation *bmoe_generation_start_text(bmoe_context *context, const bmoe_generation_params *params,
                                                     const char *text, size_t text_length, bmoe_error *error);
/* Samples the next token, checks the stop rules and decodes it so the next
 * logits are ready. Fills step; returns 1 while generating, 0 on the final
 * step (step->stop says why; its text holds what was still held back), and
 * a negative bmoe_status on error (the generation is then finished). With
 * drafting on, one step's decode may settle several tokens (a verify
 * batch); the steps after it hand them out one at a time, each through the
 * stop rules, and a stop among them cuts the context back to where plain
 * decoding would have it (so does bmoe_generation_free before the end). */
BMOE_API int bmoe_generation_step(bmoe_generation *generation, bmoe_step *step, bmoe_error *error);

/* Called for every step, the final one included; returning false stops the
 * generation (BMOE_STOP_ABORTED). */
typedef bool (*bmoe_step_callback)(void *user, const bmoe_step *step);
/* Steps until a stop. Returns 0 or a negative bmoe_status. */
BMOE_API int bmoe_generation_run(bmoe_generation *generation, bmoe_step_callback callback, void *user,
                                 bmoe_error *error);

BMOE_API int32_t bmoe_generation_n_prompt(const bmoe_generation *generation);   /* prompt tokens */
BMOE_API int32_t bmoe_generation_n_reused(const bmoe_generation *generation);   /* of those, from the cache */
BMOE_API const bmoe_stats *bmoe_generation_prefill_stats(const bmoe_generation *generation);
/* Milliseconds from bmoe_generation_start's call to the first step that
 * handed back a generated token (the prompt's prefill, that token's
 * sampling and its decode); 0 until then. */
BMOE_API double bmoe_generation_ttft_ms(const bmoe_generation *generation);
/* Sum over the decode steps so far (with drafting, n_tokens counts every
 * token evaluated, rejected drafts included). */
BMOE_API const bmoe_stats *bmoe_generation_decode_stats(const bmoe_generation *generation);

/* Speculative decoding's counters since the generation started. */
typedef struct bmoe_spec_stats {
    int64_t verify_batches;   /* evaluations of a token with drafts (steps that drafted nothing not counted) */
    int64_t drafted;          /* draft tokens evaluated in them */
    int64_t accepted;         /* of those, equal to the token sampled at their position */
    int64_t rollback_tokens;  /* tokens re-evaluated to cut a recurrent state back (hybrid models) */
    double draft_ms;          /* wall time spent drafting (outside every bmoe_stats) */
    int64_t paused_steps;     /* steps decoded plainly because drafting measured slower (not draft_always) */
} bmoe_spec_stats;
BMOE_API void bmoe_generation_spec_stats(const bmoe_generation *generation, bmoe_spec_stats *stats);
BMOE_API int32_t bmoe_generation_n_generated(const bmoe_generation *generation);
/* The row of n_vocab logits the next token will be sampled from. */
BMOE_API const float *bmoe_generation_logits(const bmoe_generation *generation);
/* The seed the sampler used (the params' seed). */
BMOE_API uint64_t bmoe_generation_seed(const bmoe_generation *generation);
BMOE_API void bmoe_generation_free(bmoe_generation *generation);

/* ---- Structured output ------------------------------------------------ */

/* A model's token pieces indexed for structured output: built once per
 * model (a walk over the whole vocabulary) and shared by any number of
 * constraints. Borrows the model, which must outlive it. */
typedef struct bmoe_token_index bmoe_token_index;
BMOE_API bmoe_token_index *bmoe_token_index_create(const bmoe_model *model, bmoe_error *error);
BMOE_API void bmoe_token_index_free(bmoe_token_index *index);

/* A generation's text held to one JSON value (OpenAI's response_format):
 * of schema (JSON text of a JSON Schema), or with schema NULL any JSON
 * object (json_object). The value starts at the first generated token,
 * without whitespace before it; between its tokens at most one space, or
 * one newline and up to 20 spaces or tabs; once it is complete only an
 * end-of-generation token may follow (with ignore_eos, nothing: the
 * generation ends). Schema keywords read: type, properties, required,
 * additionalProperties (absent with properties given: no other keys, as
 * OpenAI's strict mode), items, minItems, maxItems, minLength, maxLength,
 * enum, const, anyOf, oneOf, allOf of one, $ref into $defs or definitions;
 * annotations (title, description, default, format...) are ignored; any
 * other keyword that constrains is refused, named in the error. Numbers
 * have at most 15 integer and 15 fraction digits; nesting is at most 32
 * deep. One generation at a time: pass bmoe_json_constraint_rule to it,
 * and reset the constraint before the next. Borrows the index. */
typedef struct bmoe_json_constraint bmoe_json_constraint;
BMOE_API bmoe_json_constraint *bmoe_json_constraint_create(const bmoe_token_index *index, const char *schema,
                                                          size_t schema_length, bmoe_error *error);
/* Puts the value between fixed tokens: the generation's first tokens are
 * before[0..n_before), and once the value is whole come after[0..n_after)
 * and then the end of generation (a tool call forced in its template's
 * format: the opening tag's tokens, the call's JSON, the closing tag's).
 * Copies both; before the first token only. 0, or a negative bmoe_status. */
BMOE_API int bmoe_json_constraint_frame(bmoe_json_constraint *constraint, const int32_t *before, int32_t n_before,
                                        const int32_t *after, int32_t n_after, bmoe_error *error);
/* Leaves the text free until its last tokens are trigger[0..n_trigger)
 * (the end of a reasoning span: bmoe_reasoning_answer_start), and holds it
 * to the frame and the value from there on; no end of generation is
 * allowed before the trigger (the text ends with a value or at the length
 * limit). n_trigger 0: held from the first token (the default). Copies the
 * trigger; before the first token only. 0, or a negative bmoe_status. */
BMOE_API int bmoe_json_constraint_after(bmoe_json_constraint *constraint, const int32_t *trigger, int32_t n_trigger,
                                        bmoe_error *error);
/* Whether a text can be held to schema (bmoe_json_constraint_create's
 * check, without a model): 0, or a negative bmoe_status with error naming
 * what cannot be held to. */
BMOE_API int bmoe_json_schema_check(const char *schema, size_t schema_length, bmoe_error *error);
/* The same constraint with its value text of a GBNF grammar (llama.cpp's
 * grammar format; the start rule is root) in place of a JSON schema's
 * value; every bmoe_json_constraint_* function applies to it. Rules,
 * alternatives, groups, literals, character classes, '.', the repetitions
 * (* + ? {m} {m,} {m,n}, bounds up to 1000) and comments; token references
 * (<...>, !) are refused, as are undefined rules, a rule defined twice and
 * left recursion, each with its line and column. The matcher follows at
 * most 256 parses at once: a grammar more ambiguous than that is held to
 * the texts that fit. */
BMOE_API bmoe_json_constraint *bmoe_gbnf_constraint_create(const bmoe_token_index *index, const char *grammar,
                                                          size_t grammar_length, bmoe_error *error);
/* Whether a text is a GBNF grammar bmoe can hold to (without a model): 0,
 * or a negative bmoe_status with error naming the place. */
BMOE_API int bmoe_gbnf_check(const char *grammar, size_t grammar_length, bmoe_error *error);
/* What bmoe_generation_params.constraint takes (valid while the constraint lives). */
BMOE_API const bmoe_token_constraint *bmoe_json_constraint_rule(bmoe_json_constraint *constraint);
BMOE_API void bmoe_json_constraint_reset(bmoe_json_constraint *constraint);
/* Whether the value written so far is a whole JSON value of the schema. */
BMOE_API bool bmoe_json_constraint_complete(const bmoe_json_constraint *constraint);
BMOE_API void bmoe_json_constraint_free(bmoe_json_constraint *constraint);

/* ---- Files ------------------------------------------------------------ */

/* An output file written safely: the bytes go to a temporary file beside
 * path, which commit syncs and renames over path; a failed or discarded
 * output removes only that temporary, never path. A path that exists and is
 * not a regular file (a device, a FIFO, a folder) is refused at open; a
 * symbolic link is written through (the file it leads to is replaced). A
 * replaced file keeps its permission bits (not set-user-ID, set-group-ID or
 * sticky); a new one gets what the umask leaves of 0666. */
typedef struct bmoe_output bmoe_output;
BMOE_API bmoe_output *bmoe_output_open(const char *path, bmoe_error *error);
/* Returns 0 or a negative bmoe_status (a full disk: BMOE_ERR_IO, with the reason). */
BMOE_API int bmoe_output_write(bmoe_output *output, const void *bytes, size_t length, bmoe_error *error);
/* Publishes the file and frees output. Returns 0 or a negative bmoe_status
 * (then path was not replaced). */
BMOE_API int bmoe_output_commit(bmoe_output *output, bmoe_error *error);
/* Frees output without publishing it (NULL is ignored). */
BMOE_API void bmoe_output_discard(bmoe_output *output);
/* Whether two paths name one file, whatever the names (symbolic links,
 * hard links, "./", ".."): an existing file by its device and inode, a
 * file not created yet by its name in the same folder. Two outputs that
 * name one file would replace each other. */
BMOE_API bool bmoe_same_file(const char *path, const char *other);
/* Whether path names a file of the model at model_path: that file or, for
 * a split model, any of its shards (the files bmoe_model_load opens), by
 * bmoe_same_file. An output there would replace the model with itself. */
BMOE_API bool bmoe_is_model_file(const char *path, const char *model_path);

/* Reads a whole regular file (never blocks on a FIFO; refuses devices and
 * folders) of at most max_bytes into a new NUL-terminated buffer the caller
 * releases with bmoe_free. "-" reads standard input. */
BMOE_API int bmoe_read_file(const char *path, size_t max_bytes, char **data, size_t *length, bmoe_error *error);
BMOE_API void bmoe_free(void *pointer);

/* Prints a GGUF file's metadata, tensor table and totals to out (a FILE *).
 * Returns 0 or a negative bmoe_status. */
BMOE_API int bmoe_describe_file(const char *path, void *out, bmoe_error *error);

/* ---- Chat ------------------------------------------------------------- */

/* Chat templates (the Jinja2 of tokenizer.chat_template, rendered byte for
 * byte as Hugging Face's configuration of Jinja2 renders it), the reasoning
 * control a model allows, and the split of generated text into reasoning
 * and answer. */

/* Renders a template with the variables of a JSON object (messages,
 * add_generation_prompt, bos_token, ...). now_seconds is strftime_now's
 * clock in seconds since 1970 (UTC); 0: the current time. *out is
 * NUL-terminated, released with bmoe_free. Returns 0, or a negative
 * bmoe_status with the template's line or its raise_exception message. */
BMOE_API int bmoe_chat_render_template(const char *template_text, size_t template_length, const char *context_json,
                                       size_t context_length, int64_t now_seconds, char **out, size_t *out_length,
                                       bmoe_error *error);

/* How a request to answer without reasoning can be honoured on a model,
 * decided by rendering its own template (never from its name):
 *   TEMPLATE: the template reads enable_thinking, or there is no reasoning to suppress;
 *   PREFILL:  reasoning is a structural section the prompt can close (gpt-oss's harmony channels);
 *   NONE:     the model owns a reasoning span it opens itself, and reasons whatever it is told. */
enum bmoe_think_control {
    BMOE_THINK_CONTROL_TEMPLATE = 0,
    BMOE_THINK_CONTROL_PREFILL = 1,
    BMOE_THINK_CONTROL_NONE = 2,
};
/* "template", "prefill" or "none". */
BMOE_API const char *bmoe_think_control_name(enum bmoe_think_control control);

/* How a model's output separates reasoning from the answer. */
enum bmoe_reasoning_format {
    BMOE_REASONING_NONE = 0,     /* all of it is answer */
    BMOE_REASONING_THINK = 1,    /* <think>reasoning</think>answer (Qwen3, DeepSeek R1, LFM2.5) */
    BMOE_REASONING_CHANNEL = 2,  /* <|channel>thought\nreasoning<channel|>answer (Gemma 4) */
    BMOE_REASONING_HARMONY = 3,  /* <|channel|>analysis<|message|>...<|end|>, final channel the answer (gpt-oss) */
};
/* "none", "think", "channel" or "harmony". */
BMOE_API const char *bmoe_reasoning_format_name(enum bmoe_reasoning_format format);

/* A model's chat template, parsed once, with what the model's data says
 * about reasoning: the format its output uses and its think control
 * (decided from the template and the special tokens the vocabulary
 * declares). Borrows the model, which must outlive it. */
typedef struct bmoe_chat bmoe_chat;
/* NULL with error when the model has no chat template or it does not parse. */
BMOE_API bmoe_chat *bmoe_chat_create(const bmoe_model *model, bmoe_error *error);
BMOE_API void bmoe_chat_free(bmoe_chat *chat);
BMOE_API enum bmoe_think_control bmoe_chat_think_control(const bmoe_chat *chat);
BMOE_API enum bmoe_reasoning_format bmoe_chat_reasoning_format(const bmoe_chat *chat);
/* Whether the template reads reasoning_effort: a question rendered with
 * "low" and with "high" differs (decided at bmoe_chat_create). */
BMOE_API bool bmoe_chat_reads_reasoning_effort(const bmoe_chat *chat);
/* How a model's answer writes a tool call (decided from the template's
 * instructions to the model). */
enum bmoe_tool_format {
    BMOE_TOOL_FORMAT_NONE = 0, /* none bmoe reads */
    BMOE_TOOL_FORMAT_JSON = 1, /* <tool_call>{"name": ..., "arguments": {...}}</tool_call> (Qwen3, Qwen2.5, Hermes) */
    BMOE_TOOL_FORMAT_XML = 2,  /* <tool_call><function=NAME><parameter=KEY>VALUE</parameter>...</function></tool_call>
                                  (Qwen3.5, Qwen3-Coder) */
    BMOE_TOOL_FORMAT_GLM = 3,  /* <tool_call>NAME<arg_key>KEY</arg_key><arg_value>VALUE</arg_value>...</tool_call>
                                  (GLM-4.5, GLM-4.6) */
    BMOE_TOOL_FORMAT_HARMONY = 4, /* a message to=functions.NAME whose text is the arguments' JSON (gpt-oss); read
                                     in the answer of bmoe_reasoning's harmony split, which writes each as
                                     <|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>
                                     ARGUMENTS<|call|> */
};
/* "none", "json", "xml", "glm" or "harmony". */
BMOE_API const char *bmoe_tool_format_name(enum bmoe_tool_format format);
BMOE_API enum bmoe_tool_format bmoe_chat_tool_format(const bmoe_chat *chat);
/* Takes the tool calls out of an answer's text: *content gets the rest of
 * the text (a block that does not read as a call stays in it), *calls_json
 * a JSON array of {"name", "arguments"} with the arguments as JSON text
 * (OpenAI's function shape; harmony's as the model wrote them); both
 * NUL-terminated, released with bmoe_free. Returns the number of calls or a
 * negative bmoe_status. */
BMOE_API int32_t bmoe_chat_parse_tool_calls(enum bmoe_tool_format format, const char *text, size_t length,
                                            char **content, size_t *content_length, char **calls_json,
                                            bmoe_error *error);
/* The same for an answer that arrives in pieces (a stream): feed hands
 * back the text that may go out now, everything before what begins or may
 * begin a call (the text ends with part of the opener); finish hands back
 * the rest of the content (the text around the calls not shown yet) and the
 * calls as bmoe_chat_parse_tool_calls does, returning their number or a
 * negative bmoe_status. The texts handed back live until the next call. */
typedef struct bmoe_tool_split bmoe_tool_split;
BMOE_API bmoe_tool_split *bmoe_tool_split_create(enum bmoe_tool_format format, bmoe_error *error);
BMOE_API int bmoe_tool_split_feed(bmoe_tool_split *split, const char *text, size_t length, const char **show,
                                  size_t *show_length, bmoe_error *error);
BMOE_API int32_t bmoe_tool_split_finish(bmoe_tool_split *split, const char **show, size_t *show_length,
                                        char **calls_json, bmoe_error *error);
BMOE_API void bmoe_tool_split_free(bmoe_tool_split *split);
/* The text around one call's JSON object {"name": ..., "arguments": {...}}
 * in format, as its templates write it (what a forced call is framed by:
 * bmoe_json_constraint_frame); false for a format whose calls are not one
 * JSON object (only BMOE_TOOL_FORMAT_JSON's are). */
BMOE_API bool bmoe_tool_call_frame(enum bmoe_tool_format format, const char **before, const char **after);

/* Whether the model's template takes effort (NULL: none asked): 0, or
 * BMOE_ERR_INVALID_ARGUMENT with the reason (an effort the template does
 * not read would change nothing; one other than low, medium and high). */
BMOE_API int bmoe_chat_check_reasoning_effort(const bmoe_chat *chat, const char *effort, bmoe_error *error);
/* Whether text is a reasoning effort bmoe passes on: "low", "medium" or
 * "high" (what gpt-oss documents). */
BMOE_API bool bmoe_reasoning_effort_valid(const char *text);

typedef struct bmoe_chat_message {
    const char *role;        /* "system", "user", "assistant", NUL-terminated */
    const char *content;     /* UTF-8 */
    size_t content_length;
    const char *reasoning;   /* an assistant turn's reasoning (reasoning_content / thinking); NULL: none */
    size_t reasoning_length;
    /* an assistant turn's tool calls: JSON text of OpenAI's tool_calls array
     * ([{"id", "type": "function", "function": {"name", "arguments"}}];
     * arguments given as JSON text of an object reach the template as that
     * object, as the templates that iterate them want); NULL: none */
    const char *tool_calls_json;
    const char *tool_call_id; /* a "tool" message: the call it answers; NULL: none */
    const char *name;         /* a "tool" message: the function's name; NULL: none */
} bmoe_chat_message;

typedef struct bmoe_chat_params {
    bool add_generation_prompt; /* end with the assistant turn's opening (default true) */
    bool enable_thinking;       /* the template's enable_thinking (default true) */
    /* Start the assistant turn past its reasoning section (the think
     * control PREFILL): the prompt ends where the answer begins. Implies
     * thinking disabled. */
    bool reasoning_prefill;
    int64_t now_seconds;        /* strftime_now's clock; 0: the current time */
    /* the template's reasoning_effort ("low", "medium", "high": gpt-oss's
     * and DeepSeek V4's templates read it); NULL: not set, the template's
     * default */
    const char *reasoning_effort;
    /* JSON text of OpenAI's tools array, the template's tools; NULL: none */
    const char *tools_json;
} bmoe_chat_params;
BMOE_API bmoe_chat_params bmoe_chat_default_params(void);

/* Renders the conversation with the model's template (bos_token and
 * eos_token are the vocabulary's). *out is NUL-terminated, released with
 * bmoe_free. Returns 0 or a negative bmoe_status. */
BMOE_API int bmoe_chat_render(const bmoe_chat *chat, const bmoe_chat_message *messages, int32_t n_messages,
                              const bmoe_chat_params *params, char **out, size_t *out_length, bmoe_error *error);

/* The tokens of a rendered prompt: special tokens parsed, a BOS added when
 * the vocabulary asks for one and the text does not already start with it,
 * never an EOS. Returns as bmoe_tokenize does. */
BMOE_API int32_t bmoe_chat_tokenize(const bmoe_chat *chat, const char *text, size_t text_length, int32_t *tokens,
                                    int32_t max_tokens, bmoe_error *error);

/* The streaming split of generated text into reasoning and answer. Feed it
 * each step's text; each call fills a delta with the reasoning and answer
 * text that became final. A delta with reset set carries snapshots that
 * replace everything delivered before (a closing tag arrived and text given
 * as answer was reasoning). Markers are removed, the whitespace around a
 * reasoning span trimmed; a harmony message addressed to a function goes to
 * the answer as a call (BMOE_TOOL_FORMAT_HARMONY's shape, on any channel);
 * text that may still become a marker is held until it is known
 * (bmoe_reasoning_finish releases it). Deltas are valid UTF-8
 * when the input is, and valid until the next call. */
typedef struct bmoe_reasoning bmoe_reasoning;
typedef struct bmoe_reasoning_delta {
    const char *reasoning;
    size_t reasoning_length;
    const char *text;        /* the answer */
    size_t text_length;
    bool reset;
} bmoe_reasoning_delta;
/* Where a reasoning model's answer begins: after the text *after (the
 * span's closing marker, harmony's final-channel header) and the spacing
 * its templates put before the answer (*spacing, may be ""). False for
 * BMOE_REASONING_NONE. What bmoe_json_constraint_after waits for. */
BMOE_API bool bmoe_reasoning_answer_start(enum bmoe_reasoning_format format, const char **after,
                                          const char **spacing);
/* Whether a generation that continues prompt reasons before it answers,
 * when *opening (may be "") is appended to prompt: the prompt opens a
 * reasoning span, or opening does ("<think>\n", Gemma 4's thought channel);
 * harmony reasons in messages of its own. False when the prompt closed a
 * span (reasoning turned off) or format has none. */
BMOE_API bool bmoe_reasoning_opening(enum bmoe_reasoning_format format, const char *prompt, size_t prompt_length,
                                     const char **opening);
/* Frames and triggers the value as a chat answer of model is written: with
 * reasoning (not BMOE_REASONING_NONE) free reasoning first, held from the
 * end of the span on (bmoe_reasoning_answer_start: its marker, then the
 * spacing the templates put before the answer); with call_format (not
 * BMOE_TOOL_FORMAT_NONE) the value framed as one forced call
 * (bmoe_tool_call_frame). The prompt must leave the generation where the
 * reasoning comes (bmoe_reasoning_opening). 0, or a negative bmoe_status
 * (a call format whose calls are not one JSON object is refused). */
BMOE_API int bmoe_json_constraint_chat(bmoe_json_constraint *constraint, const bmoe_model *model,
                                       enum bmoe_reasoning_format reasoning, enum bmoe_tool_format call_format,
                                       bmoe_error *error);
/* prompt (may be NULL) is the text the generation continues: where it ends
 * (inside an open reasoning span, past a closed one, in a harmony message
 * header) is where the parser starts. */
BMOE_API bmoe_reasoning *bmoe_reasoning_create(enum bmoe_reasoning_format format, const char *prompt,
                                               size_t prompt_length, bmoe_error *error);
/* Returns 0 or a negative bmoe_status (out of memory). */
BMOE_API int bmoe_reasoning_feed(bmoe_reasoning *reasoning, const char *text, size_t length,
                                 bmoe_reasoning_delta *delta, bmoe_error *error);
/* The end of the text: whatever was held is released. */
BMOE_API int bmoe_reasoning_finish(bmoe_reasoning *reasoning, bmoe_reasoning_delta *delta, bmoe_error *error);
/* Everything so far (the deltas joined, resets applied). */
BMOE_API const char *bmoe_reasoning_answer(const bmoe_reasoning *reasoning, size_t *length);
BMOE_API const char *bmoe_reasoning_thinking(const bmoe_reasoning *reasoning, size_t *length);
BMOE_API void bmoe_reasoning_free(bmoe_reasoning *reasoning);

#ifdef __cplusplus
}
#endif

#endif
