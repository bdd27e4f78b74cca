/* The model half of the public library: loading (GGUF file, dense-weight
 * residency, the architecture's weights, the tokenizer), what a model says
 * about itself, the tokenizer entry points, status names and the log. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../base/text.h"
#include "../stream/mapping_pages.h"
#include "../stream/memory_budget.h"
#include "engine.h"

const char *bmoe_architecture_name(int32_t index)
{
    const model_arch *arch = model_arch_at(index);
    return arch ? arch->name : NULL;
}

const char *bmoe_version(void)
{
    return BMOE_VERSION;
}

const char *bmoe_status_name(bmoe_status status)
{
    switch (status) {
    case BMOE_OK: return "ok";
    case BMOE_ERR_INVALID_ARGUMENT: return "invalid argument";
    case BMOE_ERR_CONTEXT_FULL: return "context full";
    case BMOE_ERR_IO: return "I/O error";
    case BMOE_ERR_BAD_MODEL: return "bad model";
    case BMOE_ERR_OUT_OF_MEMORY: return "out of memory";
    case BMOE_ERR_ABORTED: return "aborted";
    case BMOE_ERR_NUMERIC: return "non-finite values";
    }
    return "unknown status";
}

const char *bmoe_escape_message(const char *text, char *out, size_t out_size)
{
    return text_escape_message(text, out, out_size);
}

void engine_log(const bmoe_model *m, enum bmoe_log_level level, const char *fmt, ...)
{
    if (!m || !m->log_callback)
        return;
    char formed[BMOE_ERROR_MAX], line[BMOE_ERROR_MAX];
    va_list args;
    va_start(args, fmt);
    vsnprintf(formed, sizeof formed, fmt, args);
    va_end(args);
    m->log_callback(m->log_user, level, text_escape_message(formed, line, sizeof line));
}

int engine_report(bmoe_error *err, bmoe_status fallback, bmoe_error *out)
{
    bmoe_status status = error_classify(err, fallback);
    if (out)
        *out = *err;
    return (int)status;
}

/* ---- Loading ------------------------------------------------------------ */

bmoe_model_params bmoe_model_default_params(void)
{
    bmoe_model_params params = {
        .dense_weights = BMOE_DENSE_WEIGHTS_ANON,
        .load_progress = NULL,
        .load_progress_user = NULL,
        .prefault = true,
        .draft_head = false,
        .n_expert_used = 0,
        .stream =
            {
                .enabled = false,
                .auto_enable = true,
                .cache_mb = -1,
                .cache_policy = BMOE_CACHE_POLICY_FREQUENCY,
                .cache_floor_mb = 1024,
                .cache_ceil_mb = 0,
                .io_threads = 4,
                .direct = true,
                .overlap = false,
                .prefetch = 0,
                .predict_prefetch = false,
                .predict_always = false,
                .predict_spec_max = 2,
                .load_all = false,
                .pread = NULL,
                .pread_user = NULL,
            },
        .log_callback = NULL,
        .log_user = NULL,
    };
    return params;
}

#define MIB ((int64_t)1 << 20)

/* A size in MiB from the parameters, in bytes: 0 for none, saturating
 * rather than wrapping for sizes past 2^44 MiB. */
static uint64_t mib_bytes(int64_t mib)
{
    if (mib <= 0)
        return 0;
    return (uint64_t)mib > (UINT64_MAX >> 20) ? UINT64_MAX : (uint64_t)mib << 20;
}

/* A budget in bytes as cache_mb reports it: rounded up, so that a cache
 * smaller than 1 MiB does not read as 0, "no cache". */
static int64_t budget_mib(int64_t bytes)
{
    return (bytes + MIB - 1) / MIB;
}
/* Shards a streamed model may have (the reference layouts use a handful). */
#define GGUF_MAX_SHARDS_FOR_STREAM 256

/* --cache-mb auto: what the process can still take, minus the floor left to
 * everything else, capped by the ceiling and the whole expert set. */
static int64_t auto_cache_bytes(const bmoe_stream_params *p, uint64_t whole_set)
{
    uint64_t available = memory_available_bytes();
    uint64_t hard = whole_set;
    if (p->cache_ceil_mb > 0 && mib_bytes(p->cache_ceil_mb) < hard)
        hard = mib_bytes(p->cache_ceil_mb);
    if (available == 0) /* unknown: a modest cache */
        return (int64_t)(hard < (uint64_t)(1500 * MIB) ? hard : (uint64_t)(1500 * MIB));
    uint64_t floor = mib_bytes(p->cache_floor_mb);
    uint64_t budget = available > floor ? available - floor : 0;
    return (int64_t)(budget < hard ? budget : hard);
}

static int check_stream_params(const bmoe_model_params *p, bmoe_error *err)
{
    const bmoe_stream_params *s = &p->stream;
    if (p->n_expert_used < 0)
        return error_set_status(err, BMOE_ERR_INVALID_ARGUMENT, "model: n_expert_used %d is negative",
                                p->n_expert_used);
    if (!s->enabled)
        return 0;
    if (s->io_threads < 1 || s->io_threads > 16)
        return error_set_status(err, BMOE_ERR_INVALID_ARGUMENT, "stream: io_threads %d is outside 1..16",
                                s->io_threads);
    if (s->cache_mb < -1 || s->cache_floor_mb < 0 || s->cache_ceil_mb < 0 || s->prefetch < 0)
        return error_set_status(err, BMOE_ERR_INVALID_ARGUMENT,
                                "stream: invalid cache or prefetch parameters (cache %lld MiB, floor %lld, ceil "
                                "%lld, prefetch %d)",
                                (long long)s->cache_mb, (long long)s->cache_floor_mb, (long long)s->cache_ceil_mb,
                                s->prefetch);
    if (s->cache_policy != BMOE_CACHE_POLICY_LRU && s->cache_policy != BMOE_CACHE_POLICY_FREQUENCY)
        return error_set_status(err, BMOE_ERR_INVALID_ARGUMENT, "stream: unknown cache policy %d",
                                (int)s->cache_policy);
    if (s->predict_prefetch && (s->predict_spec_max < 0 || s->predict_spec_max > 8))
        return error_set_status(err, BMOE_ERR_INVALID_ARGUMENT, "stream: predict_spec_max %d is outside 0..8",
                                s->predict_spec_max);
    if (s->predict_prefetch && s->prefetch > 0)
        return error_set_status(err, BMOE_ERR_INVALID_ARGUMENT,
                                "stream: predictive prefetch and prefetch %d exclude each other", s->prefetch);
    if (s->predict_prefetch && s->cache_mb == 0)
        return error_set_status(err, BMOE_ERR_INVALID_ARGUMENT,
                                "stream: predictive prefetch needs a cache (cache_mb is 0)");
    return 0;
}

static int check_lossy_params(const bmoe_model_params *p, bmoe_error *err)
{
    const bmoe_lossy_params *l = &p->lossy;
    if (!(l->drop_cold_frac >= 0.0f && l->drop_cold_frac <= 1.0f))
        return error_set_status(err, BMOE_ERR_INVALID_ARGUMENT, "model: drop_cold_frac %g is outside 0..1",
                                (double)l->drop_cold_frac);
    if (!(l->substitute_lambda >= 0.0f && l->substitute_lambda <= 1.0f))
        return error_set_status(err, BMOE_ERR_INVALID_ARGUMENT, "model: substitute_lambda %g is outside 0..1",
                                (double)l->substitute_lambda);
    if (l->route_ahead < 0 || l->route_ahead > 8)
        return error_set_status(err, BMOE_ERR_INVALID_ARGUMENT, "model: route_ahead %d is outside 0..8",
                                l->route_ahead);
    if (l->route_ahead > 0 && p->stream.predict_prefetch)
        return error_set_status(err, BMOE_ERR_INVALID_ARGUMENT,
                                "model: route-ahead reads its chosen experts early itself: predictive prefetch "
                                "excludes it");
    return 0;
}

/* The lossy levers act on what the cache holds: without a cache they have
 * nothing to tell a cheap expert from an expensive one. */
static int arm_lossy_levers(bmoe_model *m, const bmoe_lossy_params *lossy, bmoe_error *err)
{
    const char *lever = lossy->drop_cold_frac > 0.0f     ? "drop_cold_frac"
                        : lossy->substitute_lambda > 0.0f ? "substitute_lambda"
                        : lossy->route_ahead > 0          ? "route_ahead"
                                                          : NULL;
    if (!lever)
        return 0;
    if (!expert_store_caches(m->experts))
        return error_set_status(err, BMOE_ERR_INVALID_ARGUMENT,
                                "model: %s needs an expert cache (experts streamed, a cache budget above 0)", lever);
    int k = m->model.hparams.n_expert_used;
    if (lossy->drop_cold_frac > 0.0f && k <= 4)
        engine_log(m, BMOE_LOG_WARNING,
                   "drop_cold_frac %.2f with %d experts per token drops a routing weighing under %.1f %% of the "
                   "token's",
                   (double)lossy->drop_cold_frac, k, 100.0 * lossy->drop_cold_frac / k);
    m->model.lossy = *lossy;
    return 0;
}

/* The layers whose experts the model reads: the draft head's too when it
 * is loaded to draft with it. */
static int layers_read(const bmoe_model *m)
{
    const model_hparams *hp = &m->model.hparams;
    return hp->n_layer + (m->params.draft_head ? hp->n_layer_head : 0);
}

/* Reads every expert of every layer once (--load-all), through the cache. */
static int load_all_experts(bmoe_model *m, bmoe_error *err)
{
    const model_hparams *hp = &m->model.hparams;
    int capacity = expert_store_capacity(m->experts);
    int32_t experts[MODEL_MAX_EXPERTS];
    expert_handle handles[MODEL_MAX_EXPERTS];
    for (int il = 0; il < layers_read(m); il++) {
        if (!m->model.weights.layers[il].ffn_down_exps.name)
            continue;
        for (int first = 0; first < hp->n_expert; first += capacity) {
            int n = hp->n_expert - first < capacity ? hp->n_expert - first : capacity;
            for (int i = 0; i < n; i++)
                experts[i] = first + i;
            int status = expert_store_acquire(m->experts, il, experts, n, handles, err);
            if (expert_store_release(m->experts, status == 0 ? err : NULL) != 0 || status != 0)
                return -1;
        }
    }
    return 0;
}

/* The expert store: resident (the mapping) or streamed with the resolved
 * budget; under streaming the expert views forget the mapping. */
static int create_expert_store(bmoe_model *m, const expert_layer_source *layers, bmoe_error *err)
{
    model *mo = &m->model;
    const model_hparams *hp = &mo->hparams;
    bmoe_stream_params *p = &m->params.stream;
    uint64_t whole_set = 0;
    for (int il = 0; il < layers_read(m); il++)
        for (int j = 0; j < layers[il].n_projections; j++)
            whole_set += layers[il].projections[j].expert_bytes * (uint64_t)hp->n_expert;
    if (p->enabled && whole_set == 0)
        return error_set_status(err, BMOE_ERR_INVALID_ARGUMENT,
                                "stream: architecture %s has no routed experts to stream", hp->architecture);
    expert_store_config config = {
        .streaming = p->enabled,
        .cache_bytes = 0,
        .policy = p->cache_policy == BMOE_CACHE_POLICY_FREQUENCY ? &cache_policy_frequency : &cache_policy_lru,
        .io_threads = p->io_threads,
        .direct = p->direct,
        .overlap = p->overlap,
        .n_expert_used = hp->n_expert_used,
        .prefetch = p->prefetch,
        .stage_all = p->stage_all,
        .predict_spec_max = p->predict_prefetch ? p->predict_spec_max : -1,
        .io = {p->pread, p->pread_user},
    };
    if (p->enabled) {
        m->cache_auto = p->cache_mb < 0;
        uint64_t bytes = p->cache_mb < 0 ? (uint64_t)auto_cache_bytes(p, whole_set) : mib_bytes(p->cache_mb);
        config.cache_bytes = (int64_t)(bytes < whole_set ? bytes : whole_set);
    }
    const char *paths[GGUF_MAX_SHARDS_FOR_STREAM];
    uint64_t sizes[GGUF_MAX_SHARDS_FOR_STREAM];
    uint32_t n_files = gguf_shard_count(m->file);
    if (n_files > GGUF_MAX_SHARDS_FOR_STREAM)
        return error_set_status(err, BMOE_ERR_BAD_MODEL, "stream: %u shards, more than %d", n_files,
                                GGUF_MAX_SHARDS_FOR_STREAM);
    for (uint32_t i = 0; i < n_files; i++) {
        paths[i] = gguf_shard_path(m->file, i);
        sizes[i] = gguf_shard_size(m->file, i);
    }
    /* the draft head's experts are a layer's like any other */
    m->experts = expert_store_create(&config, layers, hp->n_layer + hp->n_layer_head, hp->n_expert, paths, sizes,
                                     n_files, err);
    if (!m->experts)
        return -1;
    mo->experts = m->experts;
    if (!p->enabled)
        return 0;
    model_detach_expert_data(mo);
    p->cache_mb = budget_mib(expert_store_cache_budget(m->experts));
    uint64_t cycle = expert_store_cycle_bytes(m->experts, hp->n_expert_used);
    int64_t budget = expert_store_cache_budget(m->experts);
    if (budget > 0 && (uint64_t)budget < cycle)
        engine_log(m, BMOE_LOG_WARNING,
                   "stream: the cache (%lld MiB) is smaller than one token's routed experts (%llu MiB): it will "
                   "hit almost nothing",
                   (long long)(budget / MIB), (unsigned long long)(cycle / (uint64_t)MIB));
    if (p->load_all && load_all_experts(m, err) != 0)
        return -1;
    return 0;
}

static uint64_t model_file_bytes(const gguf_model *file)
{
    uint64_t bytes = 0;
    for (uint32_t shard = 0; shard < gguf_shard_count(file); shard++)
        bytes += gguf_shard_size(file, shard);
    return bytes;
}

/* params.stream.auto_enable: a model with routed experts that does not fit in
 * the memory the process may take is streamed, with overlap, rather than
 * paged through the mapping. 0, or -1 when the stream parameters it would
 * use are invalid. */
static int choose_streaming(bmoe_model *m, const expert_layer_source *layers, bmoe_error *err)
{
    bmoe_stream_params *s = &m->params.stream;
    if (s->enabled || !s->auto_enable)
        return 0;
    bool has_experts = false;
    for (int il = 0; il < m->model.hparams.n_layer; il++)
        has_experts |= layers[il].n_projections > 0;
    uint64_t bytes = model_file_bytes(m->file), available = memory_available_bytes();
    uint64_t floor = mib_bytes(s->cache_floor_mb);
    if (!has_experts || memory_model_fits(bytes, available, floor))
        return 0;
    s->enabled = true;
    s->overlap = true;
    if (check_stream_params(&m->params, err) != 0)
        return -1;
    engine_log(m, BMOE_LOG_INFO,
               "stream: the model's %.1f GiB do not fit in the %.1f GiB this process may take with %.1f GiB "
               "left free: its experts are streamed from the file, with overlap",
               (double)bytes / (double)(1u << 30), (double)available / (double)(1u << 30),
               (double)floor / (double)(1u << 30));
    return 0;
}

/* engine_reserve_beside_cache with the store's lock held: what (its name
 * and what it holds, for the messages) needs bytes for n_ctx positions. */
static int reserve_beside_cache(bmoe_model *m, uint64_t bytes, const char *what, const char *holds, int32_t n_ctx,
                                bmoe_error *err)
{
    uint64_t floor = mib_bytes(m->params.stream.cache_floor_mb);
    uint64_t available = memory_available_bytes();
    int64_t budget = expert_store_cache_budget(m->experts);
    int64_t smallest = m->cache_auto ? expert_store_smallest_budget(m->experts) : budget;
    if (available > 0 && bytes > available + (uint64_t)(budget - smallest))
        return error_set_status(err, BMOE_ERR_OUT_OF_MEMORY,
                                "%s: %d positions need %llu MiB (%s); %llu MiB are free beside the expert cache at "
                                "%lld MiB: use a smaller context%s",
                                what, n_ctx, (unsigned long long)(bytes / (uint64_t)MIB), holds,
                                (unsigned long long)((available + (uint64_t)(budget - smallest)) / (uint64_t)MIB),
                                (long long)(smallest / MIB), m->cache_auto ? "" : " or cache");
    if (m->cache_auto && budget > 0) {
        uint64_t keep = memory_cache_beside_context((uint64_t)budget, bytes, available, floor);
        if (keep < (uint64_t)budget) {
            int64_t now = expert_store_shrink(m->experts, (int64_t)keep);
            m->params.stream.cache_mb = budget_mib(now);
            engine_log(m, BMOE_LOG_INFO,
                       "stream: the expert cache gives up %lld MiB to the %s of %d positions (%llu MiB): %lld MiB now",
                       (long long)((budget - now) / MIB), what, n_ctx, (unsigned long long)(bytes / (uint64_t)MIB),
                       (long long)(now / MIB));
            if (available > 0)
                available += (uint64_t)(budget - now);
        }
    }
    if (available > 0 && bytes + floor > available)
        engine_log(m, BMOE_LOG_WARNING,
                   "%s: its %llu MiB leave %llu MiB free, less than the cache floor (%llu MiB): the process may run "
                   "out of memory",
                   what, (unsigned long long)(bytes / (uint64_t)MIB),
                   (unsigned long long)((available - bytes) / (uint64_t)MIB),
                   (unsigned long long)(floor / (uint64_t)MIB));
    return 0;
}

int engine_reserve_context(bmoe_model *m, run_state *state, bmoe_error *err)
{
    if (!expert_store_streaming(m->experts))
        return 0;
    uint64_t context_bytes = state->kv_bytes + state->recurrent_floats * sizeof(float) + state->buffer_bytes;
    expert_store_begin(m->experts);
    int status = reserve_beside_cache(m, context_bytes, "context", "KV cache and buffers", state->n_ctx, err);
    if (status == 0)
        run_state_commit(state);
    expert_store_end(m->experts);
    return status;
}

int engine_reserve_beside_cache(bmoe_model *m, uint64_t bytes, const char *what, const char *holds, int32_t n_ctx,
                                bmoe_error *err)
{
    if (!expert_store_streaming(m->experts))
        return 0;
    expert_store_begin(m->experts);
    int status = reserve_beside_cache(m, bytes, what, holds, n_ctx, err);
    expert_store_end(m->experts);
    return status;
}

/* Maps the pages the resident model reads through the mapping now (the
 * experts, in 2 MiB pages where the file system gives them; the dense weights
 * too when they are not copied), so the first tokens pay no page faults. A
 * model larger than RAM is left to demand paging: pre-faulting it would read
 * it all and evict the part just mapped. Failing to map pages now is a
 * warning (they fault in later); failing to map the file afresh is an error
 * (-1, err filled). */
static int model_prefault(bmoe_model *m, const expert_layer_source *layers, bmoe_error *error)
{
    long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
    uint64_t bytes = model_file_bytes(m->file);
    if (pages > 0 && page_size > 0 && bytes > (uint64_t)pages * (uint64_t)page_size)
        return 0;
    /* under a memory cap (a container, a cgroup) the cap is the RAM */
    if (bytes > memory_cgroup_remaining_bytes())
        return 0;
    bmoe_error err;
    error_clear(&err);
    const model_hparams *hp = &m->model.hparams;
    uint32_t n_files = gguf_shard_count(m->file);
    mapped_file *files = calloc(n_files, sizeof *files);
    if (!files) {
        engine_log(m, BMOE_LOG_WARNING, "cannot pre-fault the mapping: out of memory");
        return 0;
    }
    mapped_range ranges[MODEL_MAX_LAYERS * EXPERT_MAX_PROJECTIONS];
    int n_ranges = 0;
    for (uint32_t shard = 0; shard < n_files; shard++)
        files[shard] = (mapped_file){gguf_shard_data(m->file, shard), gguf_shard_size(m->file, shard),
                                     gguf_shard_fd(m->file, shard), gguf_shard_path(m->file, shard)};
    for (int il = 0; il < hp->n_layer; il++)
        for (int p = 0; p < layers[il].n_projections; p++) {
            const expert_projection_source *source = &layers[il].projections[p];
            ranges[n_ranges++] = (mapped_range){source->shard, source->file_offset,
                                                source->file_offset + source->expert_bytes * (uint64_t)hp->n_expert};
        }
    int status = mapping_pages_promote(files, n_files, ranges, n_ranges, m->params.load_progress,
                                       m->params.load_progress_user, &err);
    if (status < 0) {
        free(files);
        *error = err;
        return -1;
    }
    if (m->params.dense_weights != BMOE_DENSE_WEIGHTS_ANON)
        for (uint32_t shard = 0; shard < n_files && status == 0; shard++)
            status = mapping_pages_populate(files, n_files, &(mapped_range){shard, 0, files[shard].size}, &err);
    free(files);
    if (status != 0)
        engine_log(m, BMOE_LOG_WARNING, "%s", err.message);
    return 0;
}

/* Resident experts are read through the mapping: give their ranges the
 * device's read-ahead back (the mapping is opened without it). */
static void advise_resident_experts(bmoe_model *m, const expert_layer_source *layers)
{
    const model_hparams *hp = &m->model.hparams;
    for (int il = 0; il < layers_read(m); il++)
        for (int p = 0; p < layers[il].n_projections; p++) {
            const expert_projection_source *source = &layers[il].projections[p];
            gguf_advise_range(m->file, source->shard, source->file_offset,
                              source->file_offset + source->expert_bytes * (uint64_t)hp->n_expert, true);
        }
}

static const void *locate_dense(void *user, uint32_t shard, uint64_t offset)
{
    return dense_weights_locate(user, shard, offset);
}

/* Whether the model reads the tensor's bytes: not those of the
 * nextn_predict_layers blocks, but for the draft head's when asked. */
static bool tensor_placed(const bmoe_model *m, const char *name)
{
    return !model_tensor_in_nextn(&m->model, name) ||
           (m->params.draft_head && model_tensor_in_head(&m->model, name));
}

/* The dense weights by policy: every tensor the model reads but the expert
 * matrices (the others are neither copied nor counted). */
static int place_dense_weights(bmoe_model *m, const expert_layer_source *layers, bmoe_error *err)
{
    const model_hparams *hp = &m->model.hparams;
    uint64_t n_tensors = gguf_tensor_count(m->file);
    uint32_t n_files = gguf_shard_count(m->file);
    file_range *tensors = malloc((size_t)(n_tensors + 1) * sizeof *tensors);
    int n_layers = hp->n_layer + hp->n_layer_head;
    file_range *experts = malloc((size_t)(n_layers * EXPERT_MAX_PROJECTIONS + 1) * sizeof *experts);
    const char **paths = malloc((size_t)n_files * sizeof *paths);
    uint64_t *sizes = malloc((size_t)n_files * sizeof *sizes);
    const uint8_t **mappings = malloc((size_t)n_files * sizeof *mappings);
    int status = 0;
    if (!tensors || !experts || !paths || !sizes || !mappings) {
        status = error_set_status(err, BMOE_ERR_OUT_OF_MEMORY, "model: out of memory");
        goto done;
    }
    uint64_t n_run = 0;
    for (uint64_t i = 0; i < n_tensors; i++) {
        const gguf_tensor *tensor = gguf_tensor_at(m->file, i);
        if (tensor_placed(m, tensor->name))
            tensors[n_run++] = (file_range){tensor->shard, tensor->file_offset, tensor->file_offset + tensor->nbytes};
    }
    int n_experts = 0;
    for (int il = 0; il < n_layers; il++)
        for (int p = 0; p < layers[il].n_projections; p++) {
            const expert_projection_source *source = &layers[il].projections[p];
            experts[n_experts++] = (file_range){source->shard, source->file_offset,
                                                source->file_offset + source->expert_bytes * (uint64_t)hp->n_expert};
        }
    for (uint32_t i = 0; i < n_files; i++) {
        paths[i] = gguf_shard_path(m->file, i);
        sizes[i] = gguf_shard_size(m->file, i);
        mappings[i] = gguf_shard_data(m->file, i);
    }
    dense_weights_files files = {paths, sizes, mappings, n_files};
    shard_io io = {m->params.stream.pread, m->params.stream.pread_user};
    bool direct = !m->params.stream.enabled || m->params.stream.direct;
    m->dense = dense_weights_create(&files, tensors, (int)n_run, experts, n_experts, m->params.dense_weights,
                                    direct, &io, m->params.load_progress, m->params.load_progress_user, err);
    if (!m->dense) {
        status = -1;
        goto done;
    }
    model_relocate_views(&m->model, locate_dense, m->dense);
done:
    free(tensors);
    free(experts);
    free((void *)paths);
    free(sizes);
    free((void *)mappings);
    return status;
}

static int copy_chat_template(bmoe_model *m, bmoe_error *err)
{
    gguf_string text;
    if (!gguf_get_string(m->file, "tokenizer.chat_template", &text))
        return 0;
    m->chat_template = malloc((size_t)text.length + 1);
    if (!m->chat_template)
        return error_set_status(err, BMOE_ERR_OUT_OF_MEMORY, "model: out of memory for the chat template");
    memcpy(m->chat_template, text.data, (size_t)text.length);
    m->chat_template[text.length] = '\0';
    return 0;
}

bmoe_model *bmoe_model_load(const char *path, const bmoe_model_params *params, bmoe_error *error)
{
    bmoe_error err;
    error_clear(&err);
    bmoe_model_params p = params ? *params : bmoe_model_default_params();
    if (check_stream_params(&p, &err) != 0 || check_lossy_params(&p, &err) != 0) {
        engine_report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
        return NULL;
    }
    if (!path) {
        error_set_status(&err, BMOE_ERR_INVALID_ARGUMENT, "model: no path given");
        engine_report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
        return NULL;
    }
    if (p.dense_weights != BMOE_DENSE_WEIGHTS_ANON && p.dense_weights != BMOE_DENSE_WEIGHTS_MMAP &&
        p.dense_weights != BMOE_DENSE_WEIGHTS_WARM) {
        error_set_status(&err, BMOE_ERR_INVALID_ARGUMENT, "model: unknown dense-weights policy %d",
                         (int)p.dense_weights);
        engine_report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
        return NULL;
    }
    bmoe_model *result = calloc(1, sizeof *result);
    if (!result) {
        error_set_status(&err, BMOE_ERR_OUT_OF_MEMORY, "model: out of memory");
        engine_report(&err, BMOE_ERR_OUT_OF_MEMORY, error);
        return NULL;
    }
    result->log_callback = p.log_callback;
    result->log_user = p.log_user;
    result->params = p;
    result->file = gguf_open(path, &err);
    if (!result->file)
        goto fail;
    if (model_init(&result->model, result->file, &err) != 0)
        goto fail;
    result->n_expert_used_file = result->model.hparams.n_expert_used;
    if (p.n_expert_used > 0) {
        model_hparams *hp = &result->model.hparams;
        if (hp->n_expert <= 0 || p.n_expert_used > hp->n_expert) {
            error_set_status(&err, BMOE_ERR_INVALID_ARGUMENT,
                             "model: n_expert_used %d: the model routes over %d experts (uses %d)", p.n_expert_used,
                             hp->n_expert, hp->n_expert_used);
            goto fail;
        }
        hp->n_expert_used = p.n_expert_used;
    }
    result->params.n_expert_used = result->model.hparams.n_expert_used;
    expert_layer_source layers[MODEL_MAX_LAYERS];
    model_expert_sources(&result->model, layers);
    if (choose_streaming(result, layers, &err) != 0)
        goto fail;
    p.stream = result->params.stream;
    if (place_dense_weights(result, layers, &err) != 0 || create_expert_store(result, layers, &err) != 0 ||
        arm_lossy_levers(result, &p.lossy, &err) != 0)
        goto fail;
    if (!p.stream.enabled)
        advise_resident_experts(result, layers);
    if (gguf_find_kv(result->file, "tokenizer.ggml.model")) {
        result->tokenizer = tokenizer_create_from_gguf(result->file, &err);
        if (!result->tokenizer)
            goto fail;
    }
    if (copy_chat_template(result, &err) != 0)
        goto fail;
    /* streaming: the experts must stay out of memory, and the dense
     * weights are in engine memory or left to the policy */
    if (p.prefault && !p.stream.enabled && model_prefault(result, layers, &err) != 0)
        goto fail;
    if (gguf_check_files(result->file, &err) != 0)
        goto fail;
    return result;
fail:
    /* a load that failed on a file changing under it says so */
    if (result->file)
        gguf_check_files(result->file, &err);
    engine_report(&err, BMOE_ERR_BAD_MODEL, error);
    bmoe_model_free(result);
    return NULL;
}

void bmoe_model_free(bmoe_model *m)
{
    if (!m)
        return;
    if (m->tokenizer)
        tokenizer_destroy(m->tokenizer);
    expert_store_destroy(m->experts);
    dense_weights_destroy(m->dense);
    model_release(&m->model);
    if (m->file)
        gguf_close(m->file);
    free(m->chat_template);
    free(m);
}

/* ---- What a model says about itself --------------------------------------- */

const char *bmoe_model_architecture(const bmoe_model *m)
{
    return m->model.hparams.architecture;
}

int32_t bmoe_model_n_vocab(const bmoe_model *m)
{
    return m->model.hparams.n_vocab;
}

int32_t bmoe_model_n_ctx_train(const bmoe_model *m)
{
    return m->model.hparams.n_ctx_train;
}

int32_t bmoe_model_n_layer(const bmoe_model *m)
{
    return m->model.hparams.n_layer;
}

/* One expert's bytes of a stacked expert matrix (ne[2] experts). */
static uint64_t matrix_bytes(const tensor_view *view)
{
    return view->name ? view->row_bytes * (uint64_t)view->ne[1] : 0;
}

static uint64_t layer_expert_bytes(const layer_weights *l)
{
    return matrix_bytes(&l->ffn_gate_exps) + matrix_bytes(&l->ffn_up_exps) + matrix_bytes(&l->ffn_gate_up_exps) +
           matrix_bytes(&l->ffn_down_exps);
}

typedef struct layer_sum {
    const layer_weights *layer;
    uint64_t bytes;
} layer_sum;

/* The bytes of a view of the layer that is not a routed expert matrix. */
static void add_dense_view(void *user, tensor_view *view)
{
    layer_sum *sum = user;
    const layer_weights *l = sum->layer;
    uintptr_t address = (uintptr_t)view, first = (uintptr_t)l, last = (uintptr_t)(l + 1);
    if (address < first || address >= last || view == &l->ffn_gate_exps || view == &l->ffn_up_exps ||
        view == &l->ffn_gate_up_exps || view == &l->ffn_down_exps)
        return;
    sum->bytes += view->row_bytes * (uint64_t)view->ne[1] * (uint64_t)view->ne[2] * (uint64_t)view->ne[3];
}

int bmoe_model_layer_bytes(const bmoe_model *m, int32_t layer, uint64_t *expert_bytes, uint64_t *dense_bytes)
{
    if (layer < 0 || layer >= m->model.hparams.n_layer)
        return BMOE_ERR_INVALID_ARGUMENT;
    const layer_weights *l = &m->model.weights.layers[layer];
    layer_sum sum = {l, 0};
    model_each_view((model *)&m->model, add_dense_view, &sum);
    if (expert_bytes)
        *expert_bytes = layer_expert_bytes(l);
    if (dense_bytes)
        *dense_bytes = sum.bytes;
    return 0;
}

void bmoe_model_get_info(const bmoe_model *m, bmoe_model_info *info)
{
    memset(info, 0, sizeof *info);
    const model_hparams *hp = &m->model.hparams;
    info->file_bytes = model_file_bytes(m->file);
    info->n_shards = gguf_shard_count(m->file);
    for (uint64_t i = 0; i < gguf_tensor_count(m->file); i++)
        if (tensor_placed(m, gguf_tensor_at(m->file, i)->name))
            info->tensor_bytes += gguf_tensor_at(m->file, i)->nbytes;
    info->dense_bytes = dense_weights_bytes(m->dense);
    info->expert_bytes = info->tensor_bytes - info->dense_bytes;
    info->n_layer = hp->n_layer;
    for (int il = 0; il < hp->n_layer; il++) {
        const layer_weights *l = &m->model.weights.layers[il];
        if (!l->ffn_gate_inp.data)
            continue;
        info->n_moe_layers++;
        uint64_t slice = layer_expert_bytes(l);
        if (slice > info->expert_slice_bytes)
            info->expert_slice_bytes = slice;
    }
    if (info->n_moe_layers > 0) {
        info->n_expert = hp->n_expert;
        info->n_expert_used = hp->n_expert_used;
        info->n_expert_used_file = m->n_expert_used_file;
    }
}

int64_t bmoe_model_meta_string(const bmoe_model *m, const char *key, char *buf, size_t buf_size)
{
    gguf_string text;
    if (!key || !gguf_get_string(m->file, key, &text))
        return -1;
    if (buf && buf_size > 0) {
        size_t copied = text.length < buf_size - 1 ? (size_t)text.length : buf_size - 1;
        memcpy(buf, text.data, copied);
        buf[copied] = '\0';
    }
    return (int64_t)text.length;
}

const char *bmoe_model_chat_template(const bmoe_model *m)
{
    return m->chat_template;
}

/* ---- Tokenizer ---------------------------------------------------------- */

static int no_tokenizer(bmoe_error *error)
{
    bmoe_error err;
    error_set_status(&err, BMOE_ERR_BAD_MODEL, "tokenizer: the model has no vocabulary (tokenizer.ggml.model)");
    return engine_report(&err, BMOE_ERR_BAD_MODEL, error);
}

int32_t bmoe_tokenize(const bmoe_model *m, const char *text, size_t text_length, bool add_special,
                      bool parse_special, int32_t *tokens, int32_t max_tokens, bmoe_error *error)
{
    bmoe_error err;
    error_clear(&err);
    if (!m->tokenizer)
        return no_tokenizer(error);
    if ((!text && text_length > 0) || max_tokens < 0 || (!tokens && max_tokens > 0)) {
        error_set_status(&err, BMOE_ERR_INVALID_ARGUMENT, "tokenize: bad arguments (text %s, %zu bytes, %d tokens)",
                         text ? "given" : "NULL", text_length, max_tokens);
        return engine_report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
    }
    int32_t count = tokenizer_encode(m->tokenizer, text ? text : "", text_length, add_special, parse_special, tokens,
                                     max_tokens, &err);
    if (count < 0)
        return engine_report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
    return count;
}

int32_t bmoe_token_to_piece(const bmoe_model *m, int32_t token, bool render_special, char *buf, int32_t buf_size,
                            bmoe_error *error)
{
    bmoe_error err;
    error_clear(&err);
    if (!m->tokenizer)
        return no_tokenizer(error);
    if (token < 0 || token >= tokenizer_n_vocab(m->tokenizer) || buf_size < 0 || (!buf && buf_size > 0)) {
        error_set_status(&err, BMOE_ERR_INVALID_ARGUMENT, "token_to_piece: token %d outside the vocabulary [0, %d)",
                         token, tokenizer_n_vocab(m->tokenizer));
        if (token >= 0 && token < tokenizer_n_vocab(m->tokenizer))
            error_set_status(&err, BMOE_ERR_INVALID_ARGUMENT, "token_to_piece: bad buffer (%d bytes)", buf_size);
        return engine_report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
    }
    return tokenizer_token_to_piece(m->tokenizer, token, render_special, buf, buf_size);
}

bool bmoe_token_is_end_of_generation(const bmoe_model *m, int32_t token)
{
    return m->tokenizer && tokenizer_is_end_of_generation(m->tokenizer, token);
}

int32_t bmoe_token_bos(const bmoe_model *m)
{
    return m->tokenizer ? tokenizer_bos(m->tokenizer) : -1;
}

int32_t bmoe_token_eos(const bmoe_model *m)
{
    return m->tokenizer ? tokenizer_eos(m->tokenizer) : -1;
}

int32_t bmoe_token_end_of_generation_list(const bmoe_model *m, int32_t *tokens, int32_t max_tokens)
{
    if (!m->tokenizer)
        return 0;
    int32_t count = 0, n_vocab = tokenizer_n_vocab(m->tokenizer);
    for (int32_t id = 0; id < n_vocab; id++) {
        if (!tokenizer_is_end_of_generation(m->tokenizer, id))
            continue;
        if (tokens && count < max_tokens)
            tokens[count] = id;
        count++;
    }
    return count;
}

/* ---- Files -------------------------------------------------------------- */

int bmoe_describe_file(const char *path, void *out, bmoe_error *error)
{
    bmoe_error err;
    error_clear(&err);
    if (!path || !out) {
        error_set_status(&err, BMOE_ERR_INVALID_ARGUMENT, "describe: no path or no output stream");
        return engine_report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
    }
    gguf_model *file = gguf_open(path, &err);
    if (!file)
        return engine_report(&err, BMOE_ERR_BAD_MODEL, error);
    gguf_print_info(file, (FILE *)out);
    gguf_close(file);
    return 0;
}

void bmoe_model_get_params(const bmoe_model *m, bmoe_model_params *params)
{
    *params = m->params;
}

void bmoe_model_get_stream_state(const bmoe_model *m, bmoe_stream_state *state)
{
    memset(state, 0, sizeof *state);
    state->streaming = expert_store_streaming(m->experts);
    state->cycle_bytes = expert_store_cycle_bytes(m->experts, m->model.hparams.n_expert_used);
    if (!state->streaming)
        return;
    expert_store_begin(m->experts);
    state->direct = expert_store_direct(m->experts);
    state->cache_budget_bytes = expert_store_cache_budget(m->experts);
    state->cache_resident_bytes = expert_store_resident_bytes(m->experts);
    expert_store_counters counters;
    expert_store_get_counters(m->experts, &counters);
    state->read_bytes = counters.read_bytes;
    state->hits = counters.hits;
    state->misses = counters.misses;
    state->evictions = counters.evictions;
    state->rereads = counters.rereads;
    state->warmed = counters.warmed;
    state->warm_pending = counters.warm_pending;
    expert_store_end(m->experts);
}

double bmoe_model_dense_resident_fraction(const bmoe_model *m)
{
    return dense_weights_resident_fraction(m->dense);
}
