/* The resolved configuration of a run, as the CSV preamble, the trace
 * preambles and the end-of-run mode: line state it: what the engine settled
 * on (the cache budget as sized, O_DIRECT as achieved, the effective top-k),
 * not what was typed. tm_config_from_model fills what the library knows;
 * the application fills the rest (threads, sampling, what it asked for,
 * which instruments are on). */
#ifndef BMOE_TM_CONFIG_H
#define BMOE_TM_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "bmoe.h"
#include "tm_buffer.h"

typedef struct tm_config {
    /* the model */
    const char *model_path;     /* as given */
    const char *arch;
    int32_t n_layer, n_moe_layers, n_expert, n_expert_used;
    int32_t n_expert_used_file; /* the file's own (n_expert_used lower: a lossy override) */
    /* the context */
    int32_t threads, n_ctx, n_ubatch;
    bool chatml;
    const char *regime;         /* the planner's regime ("experts-stream") when it decided, else NULL */
    /* streaming, resolved */
    bool moe_stream;
    int64_t cache_mb;           /* the budget as sized, nearest MiB (0: no cache) */
    bool cache_auto;            /* the budget was asked as auto */
    int64_t cache_floor_mb, cache_ceil_mb;
    double cache_cycle_mb;      /* one token's worst-case routed bytes */
    double cache_budget_mib;    /* the budget in effect */
    bool load_all;              /* every expert read at each token (--load-all: the reads mean something else) */
    bool preload_experts;       /* every expert read into the cache at load */
    int32_t io_threads;
    bool o_direct;              /* as achieved */
    bool overlap;
    int32_t prefetch;
    bool predict_prefetch;      /* the stale-gate predictor reads ahead */
    int32_t predict_spec_max;   /* its predicted misses per layer */
    bool dense_anon;            /* dense weights in engine memory (anon) or the mapping (mmap) */
    bool cache_frequency;       /* the cache keeps the most often used (freq), else the most recent (lru) */
    bmoe_lossy_params lossy;    /* the levers armed (all 0: an exact run) */
    /* speculative decoding */
    const char *spec;           /* the draft source as the contract's spec= and its lines name it ("ngram",
                                   "mtp"; "replay": drafts from a list of ids); NULL: no drafting */
    int32_t spec_draft_max;     /* tokens drafted per step at most (0 without drafting) */
    int32_t ngram_min_match;    /* the n-gram source's shortest match (0 with another source or none) */
    float mtp_p_min;            /* the MTP head's probability floor (0 with another source or none) */
    /* sampling */
    float temp, top_p;
    int32_t top_k;
    uint64_t seed;
    /* instruments on */
    bool route_trace, io_trace, compute_trace, compute_trace_layers;
    const char *engine;         /* bmoe_version() */
} tm_config;

/* Fills the model's part of config (everything above "the context") and
 * the streaming part from the resolved parameters and the expert store. */
void tm_config_from_model(tm_config *config, const bmoe_model *model, const char *model_path);

/* Any lossy lever armed (a top-k below the model's counts too). */
bool tm_config_lossy(const tm_config *config);

/* "mmap" or "anon". */
const char *tm_config_dense_name(const tm_config *config);

/* Appends text as a key=value value: whitespace, control bytes and '%'
 * percent-encoded (%20), so a path with spaces stays one value. */
void tm_config_value(tm_buffer *out, const char *text);

/* The model's file name: the path without its folders (the app's CSV
 * reader names a run by it). */
const char *tm_config_model_file_name(const tm_config *config);
/* The keys every preamble shares, without '#' or newline:
 * "model=.. arch=.. n_layer=.. n_expert=.. n_expert_used=..", the model as
 * its file name or as the path given. */
void tm_config_model_keys(tm_buffer *out, const tm_config *config, bool file_name);
/* "route_trace=<0|1> io_trace=<0|1> compute_trace=<0|1>" (compute_trace_layers
 * has its own place in each preamble). */
void tm_config_instrument_keys(tm_buffer *out, const tm_config *config);

#endif
