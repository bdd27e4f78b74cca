/* Contexts: the thread pool, the run state (activations, KV cache and
 * recurrent state), the tokens the cache holds, and evaluation in
 * micro-batches with the abort check between them, after replaying the kept
 * tokens when a truncate cleared the recurrent state. The forward pass
 * itself lives in src/models. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "draft_mtp.h"
#include "engine.h"
#include "../stream/io_lanes.h"
#include "process_stats.h"

/* Default and cap of the context size when the caller gives none. */
#define ENGINE_DEFAULT_MAX_CTX 4096
#define ENGINE_DEFAULT_UBATCH 512

void bmoe_stats_add(bmoe_stats *a, const bmoe_stats *b)
{
    a->n_tokens += b->n_tokens;
    a->wall_ms += b->wall_ms;
    a->cpu_ms += b->cpu_ms;
    a->majflt += b->majflt;
    a->loop_overhead_ms += b->loop_overhead_ms;
    a->read_bytes += b->read_bytes;
    a->io_ms += b->io_ms;
    a->stall_ms += b->stall_ms;
    a->mgmt_ms += b->mgmt_ms;
    a->cache_hits += b->cache_hits;
    a->cache_misses += b->cache_misses;
    a->evictions += b->evictions;
    a->rereads += b->rereads;
    a->prefetch_bytes += b->prefetch_bytes;
    a->prefetched += b->prefetched;
    a->prefetch_useful += b->prefetch_useful;
    a->prefetch_trusted += b->prefetch_trusted;
    a->guesses_judged += b->guesses_judged;
    a->guesses_right += b->guesses_right;
    a->predict_paused += b->predict_paused;
    a->experts_routed += b->experts_routed;
    a->experts_dropped += b->experts_dropped;
    a->experts_reranked += b->experts_reranked;
    a->experts_substituted += b->experts_substituted;
    a->ra_committed += b->ra_committed;
    a->ra_passthrough += b->ra_passthrough;
    a->ra_slots += b->ra_slots;
    a->ra_agree_slots += b->ra_agree_slots;
    a->ra_disarmed += b->ra_disarmed;
    a->ra_gemv_ms += b->ra_gemv_ms;
    a->ra_issue_ms += b->ra_issue_ms;
    a->ra_wd_ms += b->ra_wd_ms;
}

bmoe_context_params bmoe_context_default_params(void)
{
    bmoe_context_params params = {
        .n_ctx = 0,
        .n_ubatch = 0,
        .n_threads = 0,
        .n_threads_batch = 0,
        .kv_type = BMOE_KV_F16,
        .route_callback = NULL,
        .route_user = NULL,
        .abort_callback = NULL,
        .abort_user = NULL,
        .io_callback = NULL,
        .io_user = NULL,
        .trace_callback = NULL,
        .trace_user = NULL,
        .trace_ops = false,
        .route_override = NULL,
        .route_override_user = NULL,
        .route_guess = NULL,
        .route_guess_user = NULL,
    };
    return params;
}

/* The expert store's reads, as the public event. */
static void context_observe_read(void *user, const io_job *job)
{
    const bmoe_context *context = user;
    bmoe_io_event event = {
        .layer = job->layer,
        .expert = job->expert,
        .projection = job->projection,
        .lane = job->lane,
        .speculative = job->speculative,
        .offset = job->offset,
        .requested_bytes = job->length,
        .device_bytes = job->device_bytes,
        .latency_ns = job->latency_ns,
    };
    if (!job->speculative && job->speculative_device_bytes > 0) {
        event.speculative_requested_bytes = job->speculative_done;
        event.speculative_device_bytes = job->speculative_device_bytes;
        event.speculative_latency_ns = job->speculative_latency_ns;
    }
    context->io_callback(context->io_user, &event);
}

/* The run state asks this between layers. A mapping that faulted reads
 * zeros from there on: the layers left are not worth computing. */
static bool context_abort_requested(void *user)
{
    bmoe_context *context = user;
    return gguf_mapping_faulted(context->model->file) ||
           (context->abort_callback && context->abort_callback(context->abort_user));
}

/* Seconds between two checks of the model's files within evaluations. */
#define ENGINE_FILE_CHECK_SECONDS 0.1

int engine_check_files(bmoe_context *context, bool always, bmoe_error *err)
{
    double now = engine_now_seconds();
    if (!always && now - context->files_checked_at < ENGINE_FILE_CHECK_SECONDS)
        return 0;
    context->files_checked_at = now;
    return gguf_check_files(context->model->file, err);
}

bmoe_context *bmoe_context_create(bmoe_model *m, const bmoe_context_params *params, bmoe_error *error)
{
    bmoe_error err;
    error_clear(&err);
    bmoe_context_params p = params ? *params : bmoe_context_default_params();
    if (!m) {
        error_set_status(&err, BMOE_ERR_INVALID_ARGUMENT, "context: no model");
        engine_report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
        return NULL;
    }
    if (p.n_ctx < 0 || p.n_ubatch < 0 || p.n_threads < 0 || p.n_threads_batch < 0 ||
        (p.kv_type != BMOE_KV_F16 && p.kv_type != BMOE_KV_F32) ||
        (p.swa_cache != BMOE_SWA_RING && p.swa_cache != BMOE_SWA_CHECKPOINT && p.swa_cache != BMOE_SWA_FULL)) {
        error_set_status(&err, BMOE_ERR_INVALID_ARGUMENT,
                         "context: invalid parameters (n_ctx %d, n_ubatch %d, n_threads %d, n_threads_batch %d, "
                         "kv_type %d, swa_cache %d)",
                         p.n_ctx, p.n_ubatch, p.n_threads, p.n_threads_batch, (int)p.kv_type, (int)p.swa_cache);
        engine_report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
        return NULL;
    }
    int32_t n_ctx_train = m->model.hparams.n_ctx_train;
    int32_t n_ctx = p.n_ctx;
    if (n_ctx == 0) {
        n_ctx = n_ctx_train;
        if (n_ctx > ENGINE_DEFAULT_MAX_CTX)
            n_ctx = ENGINE_DEFAULT_MAX_CTX;
    } else if (n_ctx_train > 0 && n_ctx > n_ctx_train) {
        engine_log(m, BMOE_LOG_WARNING,
                   "context: %d positions is more than the model was trained for (%d); quality may drop past it",
                   n_ctx, n_ctx_train);
    }
    int32_t n_ubatch = p.n_ubatch ? p.n_ubatch : ENGINE_DEFAULT_UBATCH;
    if (n_ubatch > n_ctx)
        n_ubatch = n_ctx;
    int n_threads = p.n_threads;
    if (n_threads == 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = cores > 0 ? (int)cores : 1;
    }
    int n_threads_batch = p.n_threads_batch > 0 ? p.n_threads_batch : n_threads;

    bmoe_context *context = calloc(1, sizeof *context);
    int32_t *tokens = malloc((size_t)n_ctx * sizeof *tokens);
    if (!context || !tokens) {
        free(context);
        free(tokens);
        error_set_status(&err, BMOE_ERR_OUT_OF_MEMORY, "context: out of memory for %d positions", n_ctx);
        engine_report(&err, BMOE_ERR_OUT_OF_MEMORY, error);
        return NULL;
    }
    context->model = m;
    context->n_ctx = n_ctx;
    context->n_ubatch = n_ubatch;
    context->tokens = tokens;
    context->abort_callback = p.abort_callback;
    context->abort_user = p.abort_user;
    context->n_threads = n_threads;
    context->n_threads_batch = n_threads_batch;
    /* one pool for both: a job runs on as many of its threads as it asks */
    context->pool = thread_pool_create(n_threads > n_threads_batch ? n_threads : n_threads_batch, &err);
    bool created = context->pool && run_state_create(&context->state, &m->model, n_ctx, n_ubatch,
                                                     p.kv_type == BMOE_KV_F16, p.swa_cache, context->pool,
                                                     &err) == 0;
    if (!created || engine_reserve_context(m, &context->state, &err) != 0) {
        engine_report(&err, BMOE_ERR_OUT_OF_MEMORY, error);
        if (created)
            run_state_destroy(&context->state);
        if (context->pool)
            thread_pool_destroy(context->pool);
        free(context->tokens);
        free(context);
        return NULL;
    }
    context->state.route_callback = p.route_callback;
    context->state.route_user = p.route_user;
    context->state.abort_requested = context_abort_requested;
    context->state.abort_user = context;
    context->state.route_override = p.route_override;
    context->state.route_override_user = p.route_override_user;
    context->state.route_guess = p.route_guess;
    context->state.route_guess_user = p.route_guess_user;
    context->state.trace_callback = p.trace_callback;
    context->state.trace_user = p.trace_user;
    context->state.trace_ops = p.trace_ops;
    if (p.predict_log && m->model.hparams.n_expert > 0 && run_state_enable_probe(&context->state, &m->model) != 0) {
        error_set_status(&err, BMOE_ERR_OUT_OF_MEMORY, "context: out of memory for the prediction probe");
        bmoe_context_free(context);
        engine_report(&err, BMOE_ERR_OUT_OF_MEMORY, error);
        return NULL;
    }
    context->io_callback = p.io_callback;
    context->io_user = p.io_user;
    return context;
}

void bmoe_context_free(bmoe_context *context)
{
    if (!context)
        return;
    run_state_destroy(&context->state);
    thread_pool_destroy(context->pool);
    free(context->tokens);
    free(context);
}

int32_t bmoe_context_n_ctx(const bmoe_context *context)
{
    return context->n_ctx;
}

int32_t bmoe_context_position(const bmoe_context *context)
{
    return context->position;
}

const int32_t *bmoe_context_tokens(const bmoe_context *context)
{
    return context->tokens;
}

const bmoe_model *bmoe_context_model(const bmoe_context *context)
{
    return context->model;
}

int32_t bmoe_context_n_threads(const bmoe_context *context)
{
    return context->n_threads;
}

int32_t bmoe_context_n_threads_batch(const bmoe_context *context)
{
    return context->n_threads_batch;
}

int32_t bmoe_context_n_ubatch(const bmoe_context *context)
{
    return context->n_ubatch;
}

/* What the expert store did between two snapshots of its counters. */
static void add_store_delta(bmoe_stats *stats, const expert_store_counters *before,
                            const expert_store_counters *after)
{
    stats->read_bytes += after->read_bytes - before->read_bytes;
    stats->io_ms += after->io_ms - before->io_ms;
    stats->stall_ms += after->stall_ms - before->stall_ms;
    stats->mgmt_ms += after->mgmt_ms - before->mgmt_ms;
    stats->cache_hits += after->hits - before->hits;
    stats->cache_misses += after->misses - before->misses;
    stats->evictions += after->evictions - before->evictions;
    stats->rereads += after->rereads - before->rereads;
    stats->prefetch_bytes += after->prefetch_bytes - before->prefetch_bytes;
    stats->prefetched += after->prefetched - before->prefetched;
    stats->prefetch_useful += after->prefetch_useful - before->prefetch_useful;
    stats->prefetch_trusted += after->prefetch_trusted - before->prefetch_trusted;
    stats->guesses_judged += after->guesses_judged - before->guesses_judged;
    stats->guesses_right += after->guesses_right - before->guesses_right;
}

/* A model whose weights hold NaN or Inf yields rows that sampling would turn
 * into token 0 forever; one pass over the row costs microseconds. */
static bool logits_non_finite(const float *logits, int32_t n_rows, int32_t n_vocab)
{
    float sum = 0.0f;
    size_t count = (size_t)n_rows * (size_t)n_vocab;
    for (size_t i = 0; i < count; i++)
        sum += logits[i] * 0.0f; /* 0 for finite values, NaN for NaN and Inf */
    return sum != 0.0f;
}

/* The rings are about to hold rows up to position end - 1. */
static void rings_written_to(bmoe_context *context, int32_t end)
{
    if (end > context->ring_written)
        context->ring_written = end;
}

/* Recurrent state and truncation: a recurrent layer's state (a convolution
 * window, and later DeltaNet matrices) sums up every position before the
 * next, and cannot be cut back to an earlier position. Keeping snapshots
 * would cost a state per position a later prefix reuse might ask for, so a
 * truncate to a position p > 0 clears the state instead and the next
 * evaluation first replays the cached tokens [0, p) (the same ubatches'
 * arithmetic, so the state and the KV rows come out bit-identical to the
 * first time; its routes are not reported again). The cost is one prefill
 * of the kept prefix. A sliding-window layer's ring (run_state.swa_ring)
 * that has overwritten part of the window before p replays the same way;
 * other KV-only contexts never replay. */
static int replay_kept_prefix(bmoe_context *context, bmoe_error *err)
{
    run_state *s = &context->state;
    const model *m = &context->model->model;
    run_state_clear_recurrent(s);
    s->single_token = false;
    bmoe_route_callback route_callback = s->route_callback;
    bmoe_trace_callback trace_callback = s->trace_callback;
    s->route_callback = NULL;
    s->trace_callback = NULL;
    int status = 0;
    for (int32_t start = 0; start < context->replay_to && status == 0; start += context->n_ubatch) {
        int32_t count = context->replay_to - start;
        if (count > context->n_ubatch)
            count = context->n_ubatch;
        forward_batch batch = {
            .tokens = context->tokens + start,
            .n_tokens = count,
            .position = start,
            .first_output = count,
            .logits = NULL,
        };
        rings_written_to(context, start + count);
        status = m->arch->forward(m, s, &batch, err);
    }
    s->route_callback = route_callback;
    s->trace_callback = trace_callback;
    if (status != 0)
        return -1; /* replay_to stays: the next evaluation tries again from a cleared state */
    context->replay_to = 0;
    return 0;
}

int bmoe_eval(bmoe_context *context, const int32_t *tokens, int32_t n_tokens, float *logits, bool all_logits,
              bmoe_stats *stats, bmoe_error *error)
{
    bmoe_error err;
    error_clear(&err);
    if (!context || n_tokens <= 0 || !tokens) {
        error_set_status(&err, BMOE_ERR_INVALID_ARGUMENT, "eval: no tokens given");
        return engine_report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
    }
    const model *m = &context->model->model;
    int32_t n_vocab = m->hparams.n_vocab;
    if (n_tokens > context->n_ctx - context->position) {
        error_set_status(&err, BMOE_ERR_CONTEXT_FULL,
                         "eval: context overflow: %d tokens at position %d exceed the context size %d", n_tokens,
                         context->position, context->n_ctx);
        return engine_report(&err, BMOE_ERR_CONTEXT_FULL, error);
    }
    /* checked up front so that a bad id never leaves a half-written cache */
    for (int32_t i = 0; i < n_tokens; i++) {
        if (tokens[i] < 0 || tokens[i] >= n_vocab) {
            error_set_status(&err, BMOE_ERR_INVALID_ARGUMENT,
                             "eval: token %d (index %d) is outside the vocabulary [0, %d)", tokens[i], i, n_vocab);
            return engine_report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
        }
    }
    if (engine_check_files(context, false, &err) != 0)
        return engine_report(&err, BMOE_ERR_IO, error);
    bmoe_stats cost;
    memset(&cost, 0, sizeof cost);
    expert_store_counters store_before, store_after;
    expert_store *store = context->model->experts;
    expert_store_begin(store);
    expert_store_get_counters(store, &store_before);
    if (context->io_callback)
        expert_store_set_read_observer(store, context_observe_read, context);
    stats_window window;
    stats_window_open(&window);
    if (context->last_eval_end > 0.0)
        cost.loop_overhead_ms = (window.wall_start - context->last_eval_end) * 1e3;
    context->state.eval_stats = &cost;
    thread_pool_set_active(context->pool, context->n_threads_batch); /* the replay is a prefill */
    int status = context->replay_to > 0 ? replay_kept_prefix(context, &err) : 0;
    thread_pool_set_active(context->pool, n_tokens > 1 ? context->n_threads_batch : context->n_threads);
    for (int32_t start = 0; start < n_tokens && status == 0; start += context->n_ubatch) {
        if (context_abort_requested(context)) {
            status = error_set_status(&err, BMOE_ERR_ABORTED, "eval: aborted after %d of %d tokens", start, n_tokens);
            break;
        }
        int32_t count = n_tokens - start < context->n_ubatch ? n_tokens - start : context->n_ubatch;
        bool last = start + count == n_tokens;
        forward_batch batch = {
            .tokens = tokens + start,
            .n_tokens = count,
            .position = context->position,
            .first_output = count,
            .logits = NULL,
        };
        if (logits && all_logits) {
            batch.first_output = 0;
            batch.logits = logits + (size_t)start * (size_t)n_vocab;
        } else if (logits && last) {
            batch.first_output = count - 1;
            batch.logits = logits;
        }
        context->state.single_token = n_tokens == 1;
        /* before the forward: a failed micro-batch may have written some of its rows */
        rings_written_to(context, context->position + count);
        if (m->arch->forward(m, &context->state, &batch, &err) != 0) {
            /* the failed ubatch may have advanced the recurrent state of some layers */
            if (context->state.recurrent_floats > 0 && context->position > 0)
                context->replay_to = context->position;
            run_state_clear_recurrent(&context->state);
            status = -1;
            break;
        }
        memcpy(context->tokens + context->position, tokens + start, (size_t)count * sizeof *tokens);
        context->position += count;
        cost.n_tokens += count;
    }
    context->state.eval_stats = NULL;
    expert_store_settle(store);
    context->last_eval_end = stats_window_close(&window, &cost);
    expert_store_set_read_observer(store, NULL, NULL);
    expert_store_get_counters(store, &store_after);
    expert_store_end(store);
    add_store_delta(&cost, &store_before, &store_after);
    if (stats)
        *stats = cost;
    bool non_finite = status == 0 && logits && logits_non_finite(logits, all_logits ? n_tokens : 1, n_vocab);
    /* a failure, NaN or a read past the end from a file that changed under
     * the evaluation is that change, whatever it looked like */
    if ((status != 0 || non_finite || gguf_mapping_faulted(context->model->file)) &&
        engine_check_files(context, true, &err) != 0)
        return engine_report(&err, BMOE_ERR_IO, error);
    if (status != 0)
        return engine_report(&err, BMOE_ERR_BAD_MODEL, error);
    if (non_finite) {
        error_set_status(&err, BMOE_ERR_NUMERIC,
                         "eval: the model computed non-finite logits (NaN or Inf in its weights or activations)");
        return engine_report(&err, BMOE_ERR_NUMERIC, error);
    }
    return 0;
}

int bmoe_context_predict_log(const bmoe_context *context, int32_t layer, bmoe_predict_score *score)
{
    const run_state *s = &context->state;
    if (!s->probe || layer < 0 || layer >= context->model->model.hparams.n_layer)
        return BMOE_ERR_INVALID_ARGUMENT;
    *score = s->probe[layer];
    return 0;
}

/* Whether the rings hold the window before position (> 0) when the newest
 * position written into them is written - 1: the positions it attends to
 * before itself, from the first written later into their ring slot. */
static bool window_held(const bmoe_context *context, int32_t position, int32_t written)
{
    int32_t window_start = position - context->model->model.hparams.n_swa + 1;
    return (window_start > 0 ? window_start : 0) >= written - context->state.swa_ring;
}

/* Whether the checkpoint holds the window before position. */
static bool checkpoint_holds(const bmoe_context *context, int32_t position)
{
    return context->state.ring_checkpoint && position <= context->checkpoint_end &&
           window_held(context, position, context->checkpoint_written);
}

/* Whether the live rings hold the window before position (always without rings). */
static bool rings_hold(const bmoe_context *context, int32_t position)
{
    return context->state.swa_ring == 0 || position <= 0 || window_held(context, position, context->ring_written);
}

bool context_prefix_kept(const bmoe_context *context, int32_t position)
{
    return rings_hold(context, position) || checkpoint_holds(context, position);
}

int32_t context_kept_prefix(const bmoe_context *context, int32_t position)
{
    if (context_prefix_kept(context, position))
        return position;
    int32_t end = context->checkpoint_end;
    return context->state.ring_checkpoint && end > 0 && end < position && checkpoint_holds(context, end) ? end : 0;
}

void context_ring_checkpoint(bmoe_context *context)
{
    if (!context->state.ring_checkpoint || context->position == 0)
        return;
    run_state_ring_save(&context->state, &context->model->model);
    context->checkpoint_end = context->position;
    context->checkpoint_written = context->ring_written;
}

void bmoe_context_truncate(bmoe_context *context, int32_t position)
{
    if (position < 0)
        position = 0;
    if (position >= context->position)
        return;
    bool held = rings_hold(context, position);
    bool restored = !held && checkpoint_holds(context, position);
    if (restored) {
        run_state_ring_restore(&context->state, &context->model->model);
        context->ring_written = context->checkpoint_written;
    }
    bool kept = held || restored;
    context->position = position;
    if (context->checkpoint_end > position) /* the positions past the cut will be other tokens' */
        context->checkpoint_end = position;
    if (context->replay_to > position) /* a replay still due rebuilds only what is kept now */
        context->replay_to = position;
    if (position == 0 || !kept)
        context->ring_written = 0; /* every position read from now on is written first */
    if (context->state.recurrent_floats > 0 || !kept) {
        run_state_clear_recurrent(&context->state);
        context->replay_to = position;
    }
}

void bmoe_context_memory_usage(const bmoe_context *context, bmoe_context_memory *out)
{
    out->kv_bytes = context->state.kv_bytes;
    out->recurrent_bytes = context->state.recurrent_floats * sizeof(float);
    out->buffer_bytes = context->state.buffer_bytes;
    out->draft_head_bytes = draft_mtp_bytes(context);
}
