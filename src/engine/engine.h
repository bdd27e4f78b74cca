/* The engine's internal view of the public objects (include/bmoe.h): what a
 * bmoe_model and a bmoe_context hold, shared by the files of src/engine.
 *   model_api.c    loading, accessors, tokenizer entry points
 *   context.c      contexts: thread pool, run state, the cached tokens, eval
 *   generation.c   the generation loop: prefix reuse, prefill, sampling, stops
 *   speculation.c  exact speculative decoding: verify batches, rollback, the token queue
 *   draft_ngram.c  n-gram drafts from the token history
 *   text_stream.c  joining token pieces into whole UTF-8 and stop strings
 *   process_stats.c the clocks and process counters around an evaluation
 *   sampler.c      the sampler
 * Owns: per bmoe_model the gguf mapping, the bound model and the tokenizer;
 * per bmoe_context the thread pool, the run state and the token history. */
#ifndef BMOE_ENGINE_ENGINE_H
#define BMOE_ENGINE_ENGINE_H

#include <stdarg.h>

#include "../models/model.h"
#include "../stream/dense_weights.h"
#include "../stream/expert_store.h"
#include "../tokenizer/tokenizer.h"
#include "bmoe.h"

struct bmoe_model {
    gguf_model *file;
    model model;
    expert_store *experts; /* the routed experts' bytes: the mapping, or streamed */
    dense_weights *dense;  /* the dense weights' residency */
    bmoe_model_params params; /* as resolved at load (cache_mb as sized) */
    bool cache_auto;       /* the expert cache was sized from the free memory */
    int32_t n_expert_used_file; /* the routing width the file states (params.n_expert_used: in effect) */
    tokenizer *tokenizer;  /* NULL when the file has no vocabulary */
    char *chat_template;   /* NUL-terminated copy; NULL when absent */
    bmoe_log_callback log_callback;
    void *log_user;
};

struct bmoe_context {
    bmoe_model *model;
    thread_pool *pool;
    run_state state;
    int32_t n_ctx;
    int32_t n_ubatch;
    int32_t n_threads, n_threads_batch; /* the pool's threads for one token, and for several */
    int32_t position;      /* tokens in the KV cache */
    int32_t *tokens;       /* [n_ctx] the token at each cached position */
    bmoe_abort_callback abort_callback;
    void *abort_user;
    bmoe_io_callback io_callback;
    void *io_user;
    double last_eval_end;  /* monotonic seconds; 0 before the first evaluation */
    double files_checked_at; /* monotonic seconds of the last engine_check_files */
    bool generating;       /* a bmoe_generation is open on this context */
    /* > 0: the recurrent state was cleared, or a sliding-window ring lost a
     * kept position's window, and must be rebuilt by replaying
     * tokens[0..replay_to) before the next evaluation (context.c) */
    int32_t replay_to;
    /* one past the newest position written into the rings since they last
     * held nothing stale (run_state.swa_ring) */
    int32_t ring_written;
    /* the rings' checkpoint (run_state.ring_checkpoint): the positions
     * before checkpoint_end are still the context's, and ring_written was
     * checkpoint_written when it was taken; 0: none */
    int32_t checkpoint_end, checkpoint_written;
};

/* Whether cutting the context back to position keeps what the positions
 * from there on attend to: always without rings; with them, unless some of
 * the window before position has been overwritten since and the rings'
 * checkpoint does not hold it either. */
bool context_prefix_kept(const bmoe_context *context, int32_t position);
/* The longest prefix of at most position positions a cut back keeps: the
 * position itself, else the checkpoint's end, else 0. */
int32_t context_kept_prefix(const bmoe_context *context, int32_t position);
/* Takes the rings' checkpoint at the context's position (with
 * BMOE_SWA_CHECKPOINT; nothing otherwise). */
void context_ring_checkpoint(bmoe_context *context);

/* Makes room for a new context of a streamed model whose run state is
 * allocated but not in use yet: the expert cache, sized at load from the
 * memory then free, gives up what the context needs beyond the cache floor
 * when it was sized automatically. Then the context's pages are taken now,
 * so that the next context or cache sizing sees them, unless they do not
 * fit: an error (-1) when they exceed what is free, a warning when they
 * leave less than the floor. Resident models: nothing to do. */
int engine_reserve_context(bmoe_model *model, run_state *state, bmoe_error *err);
/* The same for bytes a context is about to allocate beside its run state
 * (what, e.g. "MTP head", and what those bytes hold name them in the
 * messages), for n_ctx positions: the automatic cache gives up what they
 * need; an error when they exceed what is free. The caller allocates. */
int engine_reserve_beside_cache(bmoe_model *model, uint64_t bytes, const char *what, const char *holds,
                                int32_t n_ctx, bmoe_error *err);

/* Checks that the model's files are still the ones loaded (gguf_check_files):
 * always, or (always false) when this context last checked them 0.1 s ago or
 * more, so that a file changed under a run is noticed within a fraction of a
 * second without a system call per token. Returns 0, or -1 with an I/O error
 * naming the file. */
int engine_check_files(bmoe_context *context, bool always, bmoe_error *err);

/* Sends one formatted line to the model's log callback, if any. */
void engine_log(const bmoe_model *model, enum bmoe_log_level level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Copies err into the caller's error (when given) after classifying it with
 * fallback; returns the (negative) status. */
int engine_report(bmoe_error *err, bmoe_status fallback, bmoe_error *out);

#endif
