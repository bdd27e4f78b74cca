/* bmoe-server: an OpenAI-shaped HTTP API on the generation library. One
 * model, one context: generations take turns in arrival order (a bounded
 * line of waiters), each on the context the previous one left, so a request
 * that extends the last conversation prefills only its new suffix. */
#ifndef BMOE_SERVER_H
#define BMOE_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "bmoe.h"

/* What the command line set: the server's own settings and the request
 * defaults (a request's fields override the sampling ones). */
typedef struct server_config {
    const char *model_path;
    const char *host;
    int32_t port;
    const char *api_key;        /* NULL: no key asked */
    const char *alias;          /* NULL: the model is named by its file */
    const char *expert_profile; /* NULL: none */
    int32_t max_queue;          /* requests that may wait behind the running one */
    size_t max_body;            /* bytes */
    int32_t timeout;            /* seconds a request may take to arrive, or a connection stay silent */
    int32_t n_predict;          /* -1: until the end of generation or a full context */
    bool no_think;
    const char *reasoning_effort; /* --reasoning-effort; NULL: the template's default */
    int64_t template_now;       /* the template's clock; 0: now */
    bool seed_given;
    bmoe_sampler_params sampler;
    bmoe_speculation_params speculation; /* drafting for every generation (source NONE: off) */
    bmoe_model_params model_params;
    int32_t n_threads, n_threads_batch, n_ctx, n_ubatch;
    enum bmoe_kv_type kv_type;
    int swa_cache; /* --swa-cache: an enum bmoe_swa_cache (checkpoint by default: requests reuse prefixes) */
} server_config;

#define SERVER_EVENTS 256

/* An open connection, from the daemon's accept to its close: the request
 * being received is timed, so a client that trickles it cannot keep its
 * thread (the daemon's own timeout only counts silence). */
typedef struct server_client {
    int fd;
    bool receiving;             /* a request's headers or body are arriving */
    bool cut;                   /* shut down for being too slow */
    struct timespec since;      /* CLOCK_MONOTONIC: when the request began to arrive */
    struct server_client *prev, *next;
} server_client;

typedef struct server {
    const server_config *config;
    bmoe_model *model;
    bmoe_context *context;
    bmoe_chat *chat;            /* NULL: the model has no chat template */
    /* structured output: the model's token pieces (made at the first request
     * for a JSON answer), and the constraint of the turn holder's generation
     * (replaced by the next one's) */
    bmoe_token_index *token_index;
    bmoe_json_constraint *json_constraint;
    const char *model_file;     /* the model file's name without its folder */
    const char *model_id;       /* the name /v1/models lists: the alias, or model_file */
    bool profile_writable;      /* the expert profile is written after every generation */
    /* the turn line: a ticket per admitted generation, served in order */
    pthread_mutex_t lock;
    pthread_cond_t turn_over;
    uint64_t next_ticket, serving;
    atomic_bool cancel;         /* the running generation stops at its next check */
    atomic_bool stopping;       /* shutting down: every generation is cancelled */
    atomic_int client_fd;       /* the turn holder's socket, watched for its client leaving; -1: none */
    atomic_uint_fast64_t next_id;
    /* /metrics: totals since start, under lock */
    uint64_t generations, prompt_tokens, reused_tokens, completion_tokens;
    double decode_ms, last_tok_s;
    /* /api/events: the last SERVER_EVENTS tokens' figures (JSON), under lock */
    char *events[SERVER_EVENTS];
    uint64_t events_next;
    pthread_cond_t events_changed;
    /* every open connection, under clients_lock */
    pthread_mutex_t clients_lock;
    server_client *clients;
} server;

/* Adds a finished generation to the totals /metrics reports, and writes
 * the expert profile with what it taught the cache. */
void server_count_generation(server *s, const bmoe_generation *g);

/* The context's abort callback: the cancel flag, or the turn holder's
 * client gone (then the flag is raised). */
bool server_abort_requested(void *user);

/* The turn line, for the request on socket fd. Returns 0 with the turn
 * held, or -1 when the line is full (the caller answers 429). */
int server_turn_acquire(server *s, int fd);
void server_turn_release(server *s);

struct MHD_Response;
struct cJSON;

/* An HTTP answer: status and a malloc'ed JSON body, or a stream (an event
 * stream response of its own). */
typedef struct server_reply {
    unsigned status;
    char *body;
    size_t length;
    const char *retry_after;    /* a Retry-After value, or NULL */
    const char *allow;          /* an Allow value (405), or NULL */
    struct MHD_Response *stream;
    const char *content_type;   /* NULL: application/json (a stream: text/event-stream) */
} server_reply;

#define SERVER_MAX_STOPS 4
#define SERVER_MAX_LOGIT_BIAS 1024
#define SERVER_MAX_MESSAGES 4096

/* The endpoints that generate: each answers in its own API's shapes. */
enum server_endpoint {
    SERVER_CHAT_COMPLETIONS, /* OpenAI's /v1/chat/completions */
    SERVER_COMPLETIONS,      /* OpenAI's /v1/completions */
    SERVER_OLLAMA_CHAT,      /* Ollama's /api/chat: a message, or NDJSON lines of its pieces */
    SERVER_OLLAMA_GENERATE,  /* Ollama's /api/generate: a response, or NDJSON lines of its pieces */
    SERVER_ANTHROPIC_MESSAGES, /* Anthropic's /v1/messages: a message, or its named events */
    SERVER_ANTHROPIC_COUNT,    /* Anthropic's /v1/messages/count_tokens: the prompt's tokens, no generation */
};

static inline bool server_endpoint_ollama(enum server_endpoint endpoint)
{
    return endpoint == SERVER_OLLAMA_CHAT || endpoint == SERVER_OLLAMA_GENERATE;
}

static inline bool server_endpoint_anthropic(enum server_endpoint endpoint)
{
    return endpoint == SERVER_ANTHROPIC_MESSAGES || endpoint == SERVER_ANTHROPIC_COUNT;
}

/* What one request asks for. */
typedef struct completion_request {
    enum server_endpoint endpoint;
    bool chat;                    /* messages rendered by the template (Ollama's generate too, unless raw) */
    bool stream;
    bmoe_chat_message *messages;
    int32_t n_messages;
    int32_t n_owned;           /* slots of the joined-parts list */
    const char *prompt;
    int32_t n_predict;
    bool ignore_eos;
    bool think;                   /* the template's enable_thinking */
    bool think_asked;             /* the request set it (chat_template_kwargs.enable_thinking) */
    const char *reasoning_effort; /* NULL: the template's default */
    bool effort_asked;            /* the request set it */
    bmoe_sampler_params sampler;
    const char *stops[SERVER_MAX_STOPS];
    int32_t n_stops;
    char *tools_json;             /* the request's non-empty tools list as JSON text (cJSON's allocation); NULL: none */
    bool tools_off;               /* tool_choice "none": no tools rendered, no calls read */
    bool logprobs;                /* chat: logprobs true; completions: logprobs N */
    int32_t top_logprobs;         /* chat: top_logprobs; completions: N */
    bool json_answer;             /* response_format json_object or json_schema: the answer is one JSON value */
    bool force_call;              /* tool_choice "required" or a named function: the answer is one call */
    const char *grammar;          /* llama.cpp's grammar: the answer is a word of this GBNF grammar; NULL: none */
    const char *forced_name;      /* the named function (the body's); NULL: any of the tools */
    char *json_schema;            /* json_schema's schema as JSON text (cJSON's allocation); NULL: any object */
    char *call_schema;            /* a forced call's schema (server_forced_call_schema's, malloc'ed) */
    bmoe_logit_bias *logit_bias;  /* sampler.logit_bias's entries (malloc'ed); NULL: none */
    int32_t n_ctx;                /* Ollama's num_ctx: a context smaller than the server's; 0: the server's */
    int64_t received_ns;          /* Ollama's total_duration counts from here (CLOCK_MONOTONIC) */
} completion_request;

/* The start of reading a body into q, for every endpoint: root is an
 * object of at most 64 fields, q names endpoint (chat: its messages go
 * through the template) and holds the server's defaults for what a request
 * may set (the sampling, the answer's length, thinking and its effort).
 * 0, or -1 with the reply filled (400). */
int server_request_begin(const server *s, const struct cJSON *root, enum server_endpoint endpoint, bool chat,
                         completion_request *q, server_reply *reply);
/* Joins the string field of the blocks of type in list (the others are
 * skipped), as OpenAI's text parts and Anthropic's text and thinking
 * blocks are joined: *text is *joined (malloc'ed). 0, or -1 with the
 * reply filled (500). */
int server_join_blocks(const struct cJSON *list, const char *type, const char *field, char **joined,
                       const char **text, size_t *length, server_reply *reply);
/* A sampling field (temperature, top_p, min_p, top_k, seed, stop, the
 * presence, frequency and repeat penalties, repeat_last_n: OpenAI's body
 * and Ollama's options name them alike) read into q; name is the field as
 * the client wrote it, for the refusal ("options.top_k"). 1: read, 0: not
 * a sampling field, -1: refused with the reply filled. */
int server_read_sampling(const struct cJSON *field, const char *name, completion_request *q, server_reply *reply);
/* The answer is one JSON value: of schema (kept as JSON text in
 * q->json_schema), or with schema NULL any JSON object. 0, or -1 with the
 * reply filled (out of memory). */
int server_read_json_answer(const struct cJSON *schema, completion_request *q, server_reply *reply);
/* A messages list: a list (non-empty unless may_be_empty) of at most
 * SERVER_MAX_MESSAGES, q->messages and *owned (slots per message)
 * allocated for it. Returns its count, or -1 with the reply filled. */
int server_messages_begin(const struct cJSON *list, bool may_be_empty, int slots, completion_request *q,
                          char ***owned, server_reply *reply);
/* A message: an object whose keys are all among keys[0..n_keys), and its
 * role (the body's string): system, user, assistant or tool. 0, or -1 with
 * the reply filled (400 naming param). */
int server_message_begin(const struct cJSON *message, const char *param, const char *const *keys, size_t n_keys,
                         const char **role, server_reply *reply);
/* Whether key is one of names[0..count). */
bool server_listed(const char *const *names, size_t count, const char *key);
/* Whether an earlier member of object has field's name. */
bool server_given_twice(const struct cJSON *object, const struct cJSON *field);
/* tools: OpenAI's list of {"type": "function", "function": {"name", ...}}
 * (Ollama's is the same), kept as JSON text in q->tools_json. 0, or -1
 * with the reply filled. */
int server_read_tools(const struct cJSON *field, completion_request *q, server_reply *reply);
/* An assistant message's tool calls in the history ({"function": {"name",
 * "arguments"}}, the arguments an object or JSON text of one) as JSON text
 * for the template (*json, cJSON's allocation); param names the field in
 * a refusal. 0, or -1 with the reply filled. */
int server_read_message_calls(const struct cJSON *calls, const char *param, char **json, server_reply *reply);
/* Whether a request's "model" names the one model served. */
bool server_names_model(const server *s, const char *name);
/* The 404 (model_not_found) of a request whose "model" names another. */
void server_model_not_found(const server *s, const char *name, server_reply *reply);
/* The body as one JSON value: UTF-8 text, nested at most so deep, nothing
 * after the value. NULL with the reply filled (400). */
struct cJSON *server_parse_body(const char *body, size_t length, server_reply *reply);

/* Whether the answer's tool calls are read (server_tools.c): a chat with
 * tools, tool_choice not "none", a model whose template teaches a format. */
bool server_tools_active(const server *s, const completion_request *q);
/* A chat answer's message fields: "content", and "tool_calls" (OpenAI's,
 * ids made from the answer's id) when the answer makes calls in format;
 * then the content is the text around them without the space at its ends,
 * null when none is left, and a *finish of "stop" becomes "tool_calls".
 * 0, or -1 (out of memory). */
int server_answer_message(struct cJSON *message, enum bmoe_tool_format format, const char *answer,
                          const char *answer_id, const char **finish);
/* A streamed answer's end with tools: the deltas that follow what the split
 * showed, the content held back that is not a call (none when only space
 * follows calls), then the calls (each with its "index"); *finish as above.
 * NULL: out of memory. */
struct cJSON *server_tool_stream_end(bmoe_tool_split *split, const char *answer_id, const char **finish);
/* The schema of a forced call's JSON object (malloc'ed JSON text):
 * {"name", "arguments"} of one of the tools (of the one named, when name
 * is not NULL), the tool's parameters as its arguments' schema (none: any
 * object). NULL when no tool has that name (*missing set), or out of
 * memory. */
char *server_forced_call_schema(const char *tools_json, const char *name, bool *missing);

/* The offset of the first byte of text that is not well-formed UTF-8 or is
 * a NUL (what a JSON string cannot hold); -1 when there is none. */
long server_utf8_error_at(const unsigned char *text, size_t length);
/* bytes as a NUL-terminated string a JSON string can hold, each byte that
 * is not well-formed UTF-8 (or a NUL) shown as U+FFFD (malloc'ed; NULL: out
 * of memory). */
char *server_json_text(const char *bytes, size_t length);

/* A choice's "logprobs" object with no token yet, in the chat or the
 * completions shape (NULL: out of memory). */
struct cJSON *server_logprobs_new(bool chat);
/* Appends step's token (none on the final step) to logprobs, a choice's
 * "logprobs" object, in the chat or the completions shape
 * (server_logprobs.c); *text_offset: the bytes of the completion's text
 * before the step's, advanced past it. 0, or -1 (out of memory). */
int server_logprobs_add(struct cJSON *logprobs, const server *s, const bmoe_step *step, bool chat, size_t *text_offset);


/* An OpenAI-shaped error: {"error":{"message","type","param","code"}}. */
void server_error_reply(server_reply *reply, unsigned status, const char *type, const char *param,
                        const char *code, const char *format, ...) __attribute__((format(printf, 6, 7)));

/* POST /v1/chat/completions, /v1/completions, /api/chat, /api/generate,
 * /v1/messages and /v1/messages/count_tokens (endpoint): the reply to a
 * body (NUL-terminated at length) that arrived on socket fd. */
void server_completion(server *s, const char *body, size_t length, enum server_endpoint endpoint, int fd,
                       server_reply *reply);

/* The prompt tokenized and checked against the context, the generation
 * started (its prefill run) and the reasoning split made, in the caller's
 * turn. 0, or -1 with the reply filled. */
int server_generation_begin(server *s, const completion_request *q, const char *text, size_t text_length,
                            bool prefill, bmoe_generation **generation, bmoe_reasoning **split, server_reply *reply);
/* Runs a begun generation to its end in the caller's turn: every token
 * through the reasoning split, into logprobs (when not NULL) and to the
 * listeners of /api/events. 0 with *last the final step (and *last_token,
 * when not NULL, the last token generated, -1 when none was), or -1 with
 * the reply filled (the generation and the split stay the caller's). */
int server_generation_run(server *s, const completion_request *q, bmoe_generation *g, bmoe_reasoning *reasoning,
                          struct cJSON *logprobs, bmoe_step *last, int32_t *last_token, server_reply *reply);
/* A non-streamed answer's generation, begun and run to its end in the
 * caller's turn (logprobs: as server_generation_run's). 0 with *g and
 * *split the caller's (server_generation_close) and *last the final step,
 * or -1 with the reply filled and nothing left to free. */
int server_generation_whole(server *s, const completion_request *q, const char *text, size_t text_length,
                            bool prefill, struct cJSON *logprobs, bmoe_generation **g, bmoe_reasoning **split,
                            bmoe_step *last, int32_t *last_token, server_reply *reply);
/* The end of a non-streamed answer: root's figures (root may be NULL),
 * the generation counted in /metrics, g and split freed. */
void server_generation_close(server *s, bmoe_generation *g, bmoe_reasoning *split, struct cJSON *root, bool cancelled);
/* "stop", "length" or "cancelled". */
const char *server_finish_reason(enum bmoe_stop_reason stop);
/* The run's figures as the "bmoe" object of root. */
void server_add_figures(struct cJSON *root, const bmoe_generation *g, const server *s, bool cancelled);
/* stream: true. Called holding the turn: the reply's stream releases it
 * when it ends (or the reply is an error and the turn is released). */
void server_stream_begin(server *s, const completion_request *q, const char *text, size_t text_length,
                         bool prefill, server_reply *reply);

/* Ollama's API (server_ollama.c). The request's fields read into q (the
 * defaults set first); 0, -1 with the reply filled (a refusal), or 1 with
 * the reply filled with the answer already (no prompt: Ollama's "load"). */
int server_ollama_read(const server *s, const struct cJSON *root, enum server_endpoint endpoint,
                       completion_request *q, char ***owned, server_reply *reply);
/* One piece of an answer in endpoint's shape, "done": false (NULL: out of
 * memory): a message of text and thinking (either may be empty), or a
 * response. */
struct cJSON *server_ollama_piece(const server *s, enum server_endpoint endpoint, const char *text,
                                  size_t text_length, const char *thinking, size_t thinking_length);
/* Makes piece the last: "done": true, the done_reason finish says, the
 * token counts and the durations (nanoseconds). */
void server_ollama_end(struct cJSON *piece, const bmoe_generation *g, const char *finish, int64_t received_ns);
/* Ollama's tool_calls from OpenAI's: {"function": {"name", "arguments"}}
 * with the arguments as an object (as JSON text when the model wrote no
 * object). NULL: out of memory. */
struct cJSON *server_ollama_calls(const struct cJSON *calls);
/* stream: false. The whole answer in the caller's turn. */
void server_ollama_answer(server *s, const completion_request *q, const char *text, size_t text_length,
                          bool prefill, server_reply *reply);
/* An error reply (an OpenAI-shaped body) made Ollama's {"error": message}. */
void server_ollama_error(server_reply *reply);
/* GET /api/tags (running false) and /api/ps (true): the one model. */
void server_ollama_models(server *s, bool running, server_reply *reply);
/* POST /api/show {"model"}: the model's details, template and capabilities. */
void server_ollama_show(server *s, const char *body, size_t length, server_reply *reply);
/* GET /api/version. */
void server_ollama_version(server_reply *reply);

/* Anthropic's Messages API (server_anthropic.c). The request's fields read
 * into q (the defaults set first): /v1/messages' body, or count_tokens'
 * (no max_tokens, no sampling). 0, or -1 with the reply filled. */
int server_anthropic_read(const server *s, const struct cJSON *root, enum server_endpoint endpoint,
                          completion_request *q, char ***owned, server_reply *reply);
/* A message's id ("msg_" and this server's count), in id[0..size). */
void server_anthropic_id(server *s, char *id, size_t size);
/* stream: false. The whole message in the caller's turn. */
void server_anthropic_answer(server *s, const completion_request *q, const char *text, size_t text_length,
                             bool prefill, server_reply *reply);
/* count_tokens: {"input_tokens"}, the rendered prompt's tokens, in the caller's turn (the template's). */
void server_anthropic_count(const server *s, const char *text, size_t text_length, server_reply *reply);
/* An error reply (an OpenAI-shaped body) made Anthropic's {"type": "error",
 * "error": {"type", "message"}}, the type the one Anthropic gives the status. */
void server_anthropic_error(server_reply *reply);

/* Where a streamed message is in its content blocks: each block opens,
 * takes its deltas and closes before the next (server_anthropic.c). */
enum anthropic_block { ANTHROPIC_BLOCK_NONE, ANTHROPIC_BLOCK_THINKING, ANTHROPIC_BLOCK_TEXT, ANTHROPIC_BLOCK_TOOL_USE };
typedef struct anthropic_blocks {
    enum anthropic_block open;
    int32_t index;                 /* the open block's; when none is open, the next one's */
    bool restarted;                /* a reasoning reset closed a block: the next one's start says so */
    int32_t last_token;            /* the last token generated (where a stop sequence ends); -1: none yet */
    char *stops[SERVER_MAX_STOPS]; /* the stop sequences (malloc'ed copies: the body is gone before the end) */
    int32_t n_stops;
} anthropic_blocks;

/* 0, or -1 (out of memory); either way server_anthropic_blocks_free frees it. */
int server_anthropic_blocks_init(anthropic_blocks *blocks, const completion_request *q);
void server_anthropic_blocks_free(anthropic_blocks *blocks);
/* The message_start event of message id (NULL: out of memory). */
struct cJSON *server_anthropic_start(const server *s, const char *id, const bmoe_generation *g);
/* Appends to events what a step's split made (thinking, then answer text;
 * either may be empty; reset: a snapshot that replaces what went before):
 * the blocks' starts, deltas and stops. 0, or -1 (out of memory). */
int server_anthropic_deltas(anthropic_blocks *blocks, struct cJSON *events, const char *thinking,
                            size_t thinking_length, const char *text, size_t text_length, bool reset);
/* Appends the end of message id: the open block's stop, a tool_use block per
 * call of calls (OpenAI's tool_calls, or NULL), message_delta with the stop
 * reason (tool_use when called, a call made where the turn ended), the usage
 * and the run's figures, message_stop. 0, or -1 (out of memory). */
int server_anthropic_end(anthropic_blocks *blocks, struct cJSON *events, const server *s, const char *id,
                         const bmoe_generation *g, const struct cJSON *calls, bool called, enum bmoe_stop_reason stop);

/* POST /tokenize (tokenize) and /detokenize, llama.cpp's (server_tokens.c). */
void server_tokens_reply(const server *s, bool tokenize, const char *body, size_t length, server_reply *reply);

/* reply holds json (consumed; NULL: out of memory, a 500) with status. */
void server_json_reply(server_reply *reply, unsigned status, struct cJSON *json);

/* A token's figures as the "bmoe" object of parent. */
void server_step_figures(struct cJSON *parent, const bmoe_step *step);
/* Hands a token's figures to every /api/events listener. */
void server_publish_step(server *s, const bmoe_step *step);
/* GET /api/events: the reply's stream follows the published tokens. */
void server_events_reply(server *s, server_reply *reply);
void server_events_free(server *s);

/* GET /: the page, NUL-terminated. */
extern const char server_page[];

/* Starts listening; runs until SIGINT or SIGTERM. Returns the exit status. */
int server_http_run(server *s);

#endif
