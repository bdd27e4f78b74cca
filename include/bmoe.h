/* libbmoe: run Mixture-of-Experts language models stored as GGUF files.
 *
 * The one public header. A bmoe_model holds the weights (memory-mapped, read
 * only), the hyperparameters and the tokenizer; a bmoe_context holds what one
 * conversation needs (KV cache, activation buffers, the thread pool). Errors:
 * functions that can fail return NULL or a negative value and write one line
 * into the caller's error buffer. */
#ifndef BMOE_H
#define BMOE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BMOE_VERSION "0.1.0"

typedef struct bmoe_model bmoe_model;
typedef struct bmoe_context bmoe_context;
typedef struct bmoe_sampler bmoe_sampler;

/* ---- Model ---------------------------------------------------------- */

/* Where the dense weights (everything but the routed experts) are read from
 * during inference. The experts always stay file-backed (memory-mapped). */
enum bmoe_dense_weights {
    BMOE_DENSE_WEIGHTS_MMAP = 0, /* the file mapping (page cache) */
    BMOE_DENSE_WEIGHTS_ANON = 1, /* an engine-owned copy read at load (huge pages) */
};

typedef struct bmoe_model_params {
    enum bmoe_dense_weights dense_weights;
} bmoe_model_params;

bmoe_model_params bmoe_model_default_params(void);
bmoe_model *bmoe_model_load_with_params(const char *path, const bmoe_model_params *params,
                                        char *error, size_t error_size);
/* bmoe_model_load_with_params with the default parameters. */
bmoe_model *bmoe_model_load(const char *path, char *error, size_t error_size);
void bmoe_model_free(bmoe_model *model);

/* Maps every page of the model now, so the first tokens pay no page faults
 * (about 0.4 s for an 18.5 GB model already in the page cache). Meant for
 * models that fit in RAM; on a larger one it would read the whole file.
 * Returns 0, or -1 with the reason (the model stays usable either way). */
int bmoe_model_prefault(bmoe_model *model, char *error, size_t error_size);

const char *bmoe_model_architecture(const bmoe_model *model); /* "qwen3moe" */
int32_t bmoe_model_n_vocab(const bmoe_model *model);
int32_t bmoe_model_n_ctx_train(const bmoe_model *model);
int32_t bmoe_model_n_layer(const bmoe_model *model);

/* ---- Tokenizer ------------------------------------------------------ */

/* Tokenizes text. add_special: add BOS/EOS as the vocabulary's metadata asks;
 * parse_special: recognise special/control token text inside text.
 * Returns the number of tokens; when it exceeds max_tokens nothing past
 * max_tokens is written and the caller retries with a larger buffer.
 * Negative on error. */
int32_t bmoe_tokenize(const bmoe_model *model, const char *text, size_t text_length,
                      bool add_special, bool parse_special, int32_t *tokens, int32_t max_tokens);

/* Appends the bytes of one token's text to buf (render_special: print
 * control tokens' text). Returns the number of bytes the piece has (which
 * may exceed buf_size, then nothing is written). A piece may end inside a
 * UTF-8 sequence; the CLI's output layer joins pieces before printing. */
int32_t bmoe_token_to_piece(const bmoe_model *model, int32_t token, bool render_special,
                            char *buf, int32_t buf_size);

bool bmoe_token_is_end_of_generation(const bmoe_model *model, int32_t token);
int32_t bmoe_token_bos(const bmoe_model *model); /* -1 if none */
int32_t bmoe_token_eos(const bmoe_model *model);

/* ---- Context: the forward pass ---------------------------------------- */

enum bmoe_kv_type { BMOE_KV_F16 = 0, BMOE_KV_F32 = 1 };

typedef struct bmoe_route_event {
    int32_t layer;
    int32_t position;          /* position of the token in the sequence */
    int32_t n_experts_used;
    const int32_t *experts;    /* selected experts, in rank order */
    const float *weights;      /* their routing weights */
} bmoe_route_event;

/* Called once per (token, MoE layer) at the single point where the router's
 * choice is made: streaming, telemetry and traces attach here. */
typedef void (*bmoe_route_callback)(void *user, const bmoe_route_event *event);

typedef struct bmoe_context_params {
    int32_t n_ctx;            /* 0: the model's, capped at 4096 */
    int32_t n_ubatch;         /* prefill micro-batch; 0: 512 */
    int32_t n_threads;        /* 0: number of cores */
    enum bmoe_kv_type kv_type;
    bmoe_route_callback route_callback; /* may be NULL */
    void *route_user;
} bmoe_context_params;

bmoe_context_params bmoe_context_default_params(void);
bmoe_context *bmoe_context_create(bmoe_model *model, const bmoe_context_params *params,
                                  char *error, size_t error_size);
void bmoe_context_free(bmoe_context *context);
int32_t bmoe_context_n_ctx(const bmoe_context *context);
int32_t bmoe_context_position(const bmoe_context *context); /* tokens in the KV cache */

/* Evaluates n_tokens tokens at positions position..position+n_tokens-1
 * (appending to the KV cache; prefill runs in ubatches). When logits is not
 * NULL it receives n_tokens rows of n_vocab floats if all_logits, else only
 * the last token's row. Returns 0, or -1 with error filled (e.g. past the
 * context size). */
int bmoe_eval(bmoe_context *context, const int32_t *tokens, int32_t n_tokens,
              float *logits, bool all_logits, char *error, size_t error_size);

/* Forgets every position >= position (0 clears the cache). */
void bmoe_context_truncate(bmoe_context *context, int32_t position);

/* ---- Sampling ------------------------------------------------------- */

typedef struct bmoe_sampler_params {
    float temperature;     /* <= 0: greedy */
    int32_t top_k;         /* <= 0: off */
    float top_p;           /* >= 1: off */
    float min_p;           /* <= 0: off */
    float repeat_penalty;  /* 1: off */
    int32_t repeat_last_n; /* tokens of history the penalty looks at */
    uint64_t seed;
} bmoe_sampler_params;

bmoe_sampler_params bmoe_sampler_default_params(void); /* greedy */
bmoe_sampler *bmoe_sampler_create(const bmoe_sampler_params *params, int32_t n_vocab);
void bmoe_sampler_free(bmoe_sampler *sampler);
/* Picks the next token from one row of logits (not modified); history: the
 * tokens so far (for the repeat penalty). */
int32_t bmoe_sampler_sample(bmoe_sampler *sampler, const float *logits,
                            const int32_t *history, int32_t n_history);

#ifdef __cplusplus
}
#endif

#endif
