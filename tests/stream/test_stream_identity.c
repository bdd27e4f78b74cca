/* Streaming changes where the bytes come from, never the math: on generated
 * qwen3moe and gpt-oss models (several shapes and weight types, one split in
 * three shards), the trained qwen3moe in models/ (real, skewed routing) and
 * the oracle's lfm2moe, gemma4 and qwen35moe models
 * (dense layers beside the MoE ones, fused experts, recurrent state) the
 * logits of a prefill and of greedy decode steps, and the tokens, are
 * byte-identical between the resident run and every streamed
 * configuration: no cache; a cache smaller than one token's experts
 * (evictions every token); a cache holding everything; each with overlap;
 * 1 and 4 read lanes; buffered reads; prefetch; predictive prefetch (with
 * and without overlap); each dense-weights policy;
 * load-all; a second generation on the warm cache; 1 and 2 threads. The
 * counters must say what happened (reads, hits, evictions). */
#include "stream_support.h"

typedef struct model_case {
    const char *name;
    const char *mkmodel_args; /* NULL: the oracle model of that name */
    const char *file; /* the path to load (the first shard when split) */
    bool repo;        /* models/NAME.gguf of this repository */
} model_case;

typedef struct stream_config {
    const char *name;
    int64_t cache_mb;     /* -2: resident */
    bool overlap;
    int io_threads;
    bool direct;
    int prefetch;
    enum bmoe_dense_weights dense;
    bool load_all;
    int threads;
    int generations;
    int predict_spec_max; /* 0: no predictive prefetch */
    enum bmoe_cache_policy policy;
    bool stage_all;       /* every expert read at each token (--load-all) */
} stream_config;

/* Prefetched experts over every model's prefetch runs, and over its
 * predictive prefetch runs: some must be. */
static uint64_t total_prefetched, total_predicted, total_prefill_ahead;

static bmoe_model_params params_of(const stream_config *c)
{
    bmoe_model_params p = bmoe_model_default_params();
    p.dense_weights = c->dense;
    if (c->cache_mb == -2)
        return p;
    p.stream.enabled = true;
    p.stream.cache_mb = c->cache_mb;
    p.stream.overlap = c->overlap;
    p.stream.io_threads = c->io_threads;
    p.stream.direct = c->direct;
    p.stream.prefetch = c->prefetch;
    p.stream.load_all = c->load_all;
    p.stream.predict_prefetch = c->predict_spec_max > 0;
    p.stream.predict_spec_max = c->predict_spec_max;
    p.stream.cache_policy = c->policy;
    p.stream.stage_all = c->stage_all;
    return p;
}

/* Under the sanitizers the first model runs every configuration and the
 * others the ones whose code depends on the model: the expert slots' layout
 * and reads with evictions and the prompt's read-ahead through the model's
 * router (small cache, overlap), synchronous reads beside the dense weights
 * mapped from the file (dense mmap), and the next layer's router guessing in
 * decode (predictive prefetch); the rest is the expert store's own, the same
 * code on any model. */
static bool model_config(const stream_config *c)
{
    static const char *const names[] = {"small cache, overlap", "small cache, dense mmap",
                                        "half cache, overlap, predictive prefetch 2"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(c->name, names[i]) == 0)
            return true;
    return false;
}

/* every_config false: model_config's configurations only. */
static void check_model(const model_case *m, const char *dir, bool every_config)
{
    char path[1200], first[1300];
    if (m->mkmodel_args) {
        snprintf(path, sizeof path, "%s/%s.gguf", dir, m->name);
        if (!stream_make_model(path, m->mkmodel_args))
            return;
    } else if (m->repo) {
        snprintf(path, sizeof path, "%s/%s.gguf", BMOE_MODELS_DIR, m->name);
    } else {
        char relative[256];
        snprintf(relative, sizeof relative, "oracle/models/%s.gguf", m->name);
        test_shared_path(path, sizeof path, relative);
    }
    snprintf(first, sizeof first, m->file ? m->file : "%s", path);
    if (m->file) {
        char base[1200];
        snprintf(base, sizeof base, "%s/%s", dir, m->name);
        snprintf(first, sizeof first, "%s-00001-of-00003.gguf", base);
    }
    bmoe_model_info info;
    bmoe_error error = {0};
    bmoe_model *probe = bmoe_model_load(first, NULL, &error);
    CHECK_MSG(probe != NULL, "%s: %s", m->name, error.message);
    if (!probe)
        return;
    bmoe_model_get_info(probe, &info);
    bmoe_model_free(probe);
    /* a cache below one token's experts: half of k x moe layers entries */
    uint64_t slot_guess = info.expert_slice_bytes + 3 * 8192;
    int64_t small_mb = (int64_t)((uint64_t)info.n_expert_used * (uint64_t)info.n_moe_layers / 2 * slot_guess >> 20);
    if (small_mb < 1)
        small_mb = 1;
    /* slots round each projection up to whole pages: twice the bytes is plenty */
    int64_t whole_mb = (int64_t)(2 * info.expert_bytes >> 20) + 4;
    /* room beside a token's experts for guesses, not for everything */
    int64_t half_mb = (int64_t)(info.expert_bytes >> 20) / 2 + 2;

    const stream_config configs[] = {
        {"resident, 1 thread", -2, false, 4, true, 0, BMOE_DENSE_WEIGHTS_ANON, false, 1, 1, 0, BMOE_CACHE_POLICY_LRU, false},
        {"no cache", 0, false, 4, true, 0, BMOE_DENSE_WEIGHTS_ANON, false, 2, 1, 0, BMOE_CACHE_POLICY_LRU, false},
        {"no cache, overlap", 0, true, 4, true, 0, BMOE_DENSE_WEIGHTS_ANON, false, 2, 1, 0, BMOE_CACHE_POLICY_LRU, false},
        {"small cache", small_mb, false, 4, true, 0, BMOE_DENSE_WEIGHTS_ANON, false, 2, 1, 0, BMOE_CACHE_POLICY_LRU, false},
        {"small cache, overlap", small_mb, true, 4, true, 0, BMOE_DENSE_WEIGHTS_ANON, false, 2, 1, 0,
         BMOE_CACHE_POLICY_LRU, false},
        {"whole cache", whole_mb, false, 4, true, 0, BMOE_DENSE_WEIGHTS_ANON, false, 2, 1, 0, BMOE_CACHE_POLICY_LRU, false},
        {"whole cache, overlap", whole_mb, true, 4, true, 0, BMOE_DENSE_WEIGHTS_ANON, false, 2, 1, 0,
         BMOE_CACHE_POLICY_LRU, false},
        {"small cache, 1 lane", small_mb, false, 1, true, 0, BMOE_DENSE_WEIGHTS_ANON, false, 2, 1, 0,
         BMOE_CACHE_POLICY_LRU, false},
        {"small cache, overlap, 1 lane", small_mb, true, 1, true, 0, BMOE_DENSE_WEIGHTS_ANON, false, 2, 1, 0,
         BMOE_CACHE_POLICY_LRU, false},
        {"small cache, buffered", small_mb, false, 4, false, 0, BMOE_DENSE_WEIGHTS_ANON, false, 2, 1, 0,
         BMOE_CACHE_POLICY_LRU, false},
        {"small cache, overlap, prefetch 2", small_mb, true, 4, true, 2, BMOE_DENSE_WEIGHTS_ANON, false, 2, 1, 0,
         BMOE_CACHE_POLICY_LRU, false},
        {"small cache, prefetch 1", small_mb, false, 2, true, 1, BMOE_DENSE_WEIGHTS_ANON, false, 2, 1, 0,
         BMOE_CACHE_POLICY_LRU, false},
        {"small cache, dense mmap", small_mb, false, 4, true, 0, BMOE_DENSE_WEIGHTS_MMAP, false, 2, 1, 0,
         BMOE_CACHE_POLICY_LRU, false},
        {"small cache, overlap, dense warm", small_mb, true, 4, true, 0, BMOE_DENSE_WEIGHTS_WARM, false, 2, 1, 0,
         BMOE_CACHE_POLICY_LRU, false},
        {"whole cache, load-all", whole_mb, false, 4, true, 0, BMOE_DENSE_WEIGHTS_ANON, true, 2, 1, 0,
         BMOE_CACHE_POLICY_LRU, false},
        {"small cache, overlap, every expert each token", small_mb, true, 4, true, 0, BMOE_DENSE_WEIGHTS_ANON, false, 2,
         1, 0, BMOE_CACHE_POLICY_LRU, true},
        {"no cache, every expert each token", 0, false, 2, true, 0, BMOE_DENSE_WEIGHTS_ANON, false, 2, 1, 0,
         BMOE_CACHE_POLICY_FREQUENCY, true},
        {"whole cache, second generation", whole_mb, true, 4, true, 0, BMOE_DENSE_WEIGHTS_ANON, false, 2, 2, 0,
         BMOE_CACHE_POLICY_LRU, false},
        {"small cache, second generation", small_mb, true, 4, true, 0, BMOE_DENSE_WEIGHTS_ANON, false, 2, 2, 0,
         BMOE_CACHE_POLICY_LRU, false},
        {"small cache, 1 thread", small_mb, true, 4, true, 0, BMOE_DENSE_WEIGHTS_ANON, false, 1, 1, 0,
         BMOE_CACHE_POLICY_LRU, false},
        {"half cache, overlap, predictive prefetch 2", half_mb, true, 4, true, 0, BMOE_DENSE_WEIGHTS_ANON, false, 2, 1,
         2, BMOE_CACHE_POLICY_LRU, false},
        {"half cache, predictive prefetch 8", half_mb, false, 4, true, 0, BMOE_DENSE_WEIGHTS_ANON, false, 2, 1, 8,
         BMOE_CACHE_POLICY_LRU, false},
        {"small cache, overlap, predictive prefetch 8", small_mb, true, 4, true, 0, BMOE_DENSE_WEIGHTS_ANON, false, 2,
         1, 8, BMOE_CACHE_POLICY_LRU, false},
        {"small cache, freq", small_mb, false, 4, true, 0, BMOE_DENSE_WEIGHTS_ANON, false, 2, 2, 0,
         BMOE_CACHE_POLICY_FREQUENCY, false},
        {"half cache, overlap, predictive prefetch 8, freq", half_mb, true, 4, true, 0, BMOE_DENSE_WEIGHTS_ANON, false,
         2, 1, 8, BMOE_CACHE_POLICY_FREQUENCY, false},
    };
    stream_config reference_config = {"resident", -2, false, 4, true, 0, BMOE_DENSE_WEIGHTS_ANON, false, 2, 1, 0,
     BMOE_CACHE_POLICY_LRU, false};
    bmoe_model_params reference_params = params_of(&reference_config);
    workload_result reference;
    workload_run(first, &reference_params, 2, 1, &reference);
    CHECK_MSG(reference.ok, "%s resident: %s", m->name, reference.error);
    CHECK(reference.prefill.read_bytes == 0 && reference.decode.read_bytes == 0);
    size_t selected = 0;
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++) {
        const stream_config *c = &configs[i];
        if (!every_config && !model_config(c))
            continue;
        selected++;
        bmoe_model_params params = params_of(c);
        workload_result got;
        workload_run(first, &params, c->threads, c->generations, &got);
        CHECK_MSG(got.ok, "%s, %s: %s", m->name, c->name, got.error);
        CHECK_MSG(workload_same(&reference, &got), "%s, %s: differs from the resident run", m->name, c->name);
        if (got.ok && c->cache_mb != -2) {
            uint64_t routed_decode = (uint64_t)WORKLOAD_STEPS * (uint64_t)info.n_moe_layers *
                                     (uint64_t)(c->stage_all ? info.n_expert : info.n_expert_used);
            uint64_t looked_up = got.decode.cache_hits + got.decode.cache_misses;
            /* one lookup per distinct expert of a layer: k per layer per decode step (every
             * expert of the layer when each token reads them all) */
            CHECK_MSG(looked_up == routed_decode, "%s, %s: %llu lookups in decode, want %llu", m->name, c->name,
                      (unsigned long long)looked_up, (unsigned long long)routed_decode);
            if (c->cache_mb == 0)
                CHECK_MSG(got.decode.cache_hits == 0 && got.decode.read_bytes > 0, "%s, %s: hits without a cache",
                          m->name, c->name);
            if (c->cache_mb == small_mb)
                CHECK_MSG(got.decode.evictions > 0, "%s, %s: no evictions in a small cache", m->name, c->name);
            if (c->cache_mb == whole_mb && (c->load_all || c->generations > 1))
                CHECK_MSG(got.decode.cache_misses == 0 && got.decode.read_bytes == 0 &&
                              got.prefill.cache_misses == 0,
                          "%s, %s: %llu misses on a warm whole cache", m->name, c->name,
                          (unsigned long long)got.decode.cache_misses);
            if (c->overlap)
                CHECK(got.decode.io_ms >= 0.0 && got.decode.stall_ms >= 0.0);
            uint64_t prefetched = got.decode.prefetched + got.prefill.prefetched;
            uint64_t useful = got.decode.prefetch_useful + got.prefill.prefetch_useful;
            /* the previous token's experts are the most recent: only a cache
             * below one token's working set lacks them, and whether a slot is
             * free for a guess then depends on the lanes' timing */
            if (c->prefetch > 0) {
                CHECK_MSG(useful <= prefetched, "%s, %s: useful %llu > prefetched %llu", m->name, c->name,
                          (unsigned long long)useful, (unsigned long long)prefetched);
                total_prefetched += prefetched;
            } else if (c->predict_spec_max > 0) {
                CHECK_MSG(useful <= prefetched, "%s, %s: useful %llu > prefetched %llu", m->name, c->name,
                          (unsigned long long)useful, (unsigned long long)prefetched);
                /* one decode step's guesses: at most spec max per MoE layer after the first */
                CHECK_MSG(got.decode.prefetched <= (uint64_t)WORKLOAD_STEPS * (uint64_t)info.n_moe_layers *
                                                       (uint64_t)c->predict_spec_max,
                          "%s, %s: %llu predicted reads", m->name, c->name,
                          (unsigned long long)got.decode.prefetched);
                total_predicted += prefetched;
            } else {
                /* decode reads ahead only when asked; a prompt of WORKLOAD_PROMPT tokens reads the next
                 * layer's predicted experts whenever a cache can hold them */
                CHECK_MSG(got.decode.prefetched == 0 && got.decode.prefetch_bytes == 0,
                          "%s, %s: decode read ahead unasked", m->name, c->name);
                CHECK_MSG(got.prefill.prefetch_useful <= got.prefill.prefetched, "%s, %s: useful %llu > read %llu",
                          m->name, c->name, (unsigned long long)got.prefill.prefetch_useful,
                          (unsigned long long)got.prefill.prefetched);
                if (c->cache_mb == 0 || c->stage_all)
                    CHECK_MSG(got.prefill.prefetched == 0, "%s, %s: %llu prompt read-aheads without a cache",
                              m->name, c->name, (unsigned long long)got.prefill.prefetched);
                total_prefill_ahead += got.prefill.prefetch_useful;
            }
        }
        workload_free(&got);
    }
    CHECK_MSG(every_config || selected == 3, "%s: %zu of model_config's 3 configurations found", m->name, selected);
    workload_free(&reference);
}

int main(void)
{
    char dir[1100];
    stream_test_dir(dir, sizeof dir, "stream-identity");
    const model_case models[] = {
        {"qwen3moe-q4km", "--shape tiny-qwen3moe --experts 32 --expert-ff 512 --type q4_k_m --fill blocks --seed 3", NULL, false},
        {"qwen3moe-f32", "--shape tiny-qwen3moe --embd 128 --experts 16 --expert-ff 128 --type f32 --seed 4", NULL, false},
        {"gptoss-mxfp4", "--shape tiny-gpt-oss --experts 32 --type mxfp4_moe --fill blocks --seed 5", NULL, false},
        {"qwen3moe-q8-split", "--shape tiny-qwen3moe --experts 24 --type q8_0 --split 3 --seed 6", "split", false},
        {"lfm2moe-tiny-q4_k_m", NULL, NULL, false},
        {"gemma4-tiny-q4_k_m", NULL, NULL, false},
        {"qwen35moe-tiny-q4_k_m", NULL, NULL, false},
        {"qwen3moe-shakespeare-q4_k_m", NULL, NULL, true},
    };
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
        check_model(&models[i], dir, !TEST_SANITIZED || i == 0);
    CHECK_MSG(total_prefetched > 0, "no prefetch read anything in any run");
    CHECK_MSG(total_predicted > 0, "no predictive prefetch read anything in any run");
    CHECK_MSG(total_prefill_ahead > 0, "no prompt's read-ahead was of use in any run");
    return test_finish();
}
