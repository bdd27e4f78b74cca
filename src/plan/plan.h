/* The hardware planner (--auto): a pure function from a description of the
 * model and one of the machine to a configuration, each decision with its
 * reason and a tag that says where it came from. The probes beside it fill
 * the two descriptions (the model through bmoe.h, the machine through
 * /proc, the cgroup and timed reads of the model file itself); the planner
 * never sees the engine's internals and never prints. */
#ifndef BMOE_PLAN_H
#define BMOE_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bmoe.h"

/* What the model needs, in bytes. */
typedef struct plan_model {
    uint64_t file_bytes;         /* all shards */
    uint64_t dense_bytes;        /* tensors other than the routed experts */
    uint64_t expert_bytes;       /* the routed experts (0: a dense model) */
    uint64_t expert_slice_bytes; /* one expert of one layer, all its projections (the read unit) */
    uint64_t cycle_bytes;        /* one token's routed bytes: n_expert_used x the MoE layers' slices */
    uint64_t context_bytes;      /* the contexts' memory at the planned context size (KV and buffers; with
                                    --mtp what drafting takes beside them) */
    int32_t n_moe_layers, n_expert, n_expert_used;
} plan_model;

/* Storage read rates are measured at these lane counts. */
#define PLAN_LANE_STEPS 4
extern const int32_t plan_lane_counts[PLAN_LANE_STEPS]; /* 1, 2, 4, 8 */

/* What the machine offers. A rate of 0 is "not probed". */
typedef struct plan_machine {
    uint64_t memory_bytes;       /* what this process may still take: MemAvailable, the cgroup's room if smaller */
    bool memory_capped_by_cgroup;
    int32_t n_cores;             /* online cores this process may run on */
    double read_bytes_per_s[PLAN_LANE_STEPS]; /* the model file's device, slice-sized reads, per lane count */
    double memory_bytes_per_s;   /* streaming read bandwidth of memory */
} plan_machine;

typedef enum plan_tag {
    PLAN_MEASURED, /* from a probe of this machine or this file */
    PLAN_DERIVED,  /* computed from measured figures */
    PLAN_POLICY,   /* a rule of the planner, nothing measured */
    PLAN_OPERATOR, /* typed by the user (a flag or an environment variable): pinned */
    PLAN_UNPROBED, /* a probe was turned off or failed; a default stands in */
} plan_tag;

typedef enum plan_regime {
    PLAN_REGIME_FITS,           /* the whole model fits: no streaming */
    PLAN_REGIME_EXPERTS_STREAM, /* the dense set fits, the experts stream through a cache */
    PLAN_REGIME_DENSE_OVERSIZED /* not even the dense set fits: refused */
} plan_regime;

/* What the user typed: the plan keeps each pinned value as it is. */
typedef struct plan_pins {
    bool stream_set, stream;             /* --moe-stream / --no-moe-stream */
    bool cache_mb_set; int64_t cache_mb; /* --cache-mb (-1: auto) */
    bool io_threads_set; int32_t io_threads;
    bool overlap_set; bool overlap;
    bool read_ahead_set;                 /* --prefetch, --predict-prefetch or --route-ahead: the plan arms no read-ahead */
    bool dense_set; enum bmoe_dense_weights dense;
    bool cache_floor_set; int64_t cache_floor_mb;
    bool lossy_set;                      /* a lossy lever typed: kept, never armed by the plan */
} plan_pins;

#define PLAN_MAX_DECISIONS 16

typedef struct plan_decision {
    const char *key;      /* the parameter's key in the parameter table ("cache_mb") */
    char value[48];       /* as a flag's value would say it ("6144", "on", "anon") */
    plan_tag tag;
    char reason[200];     /* one sentence: why this value */
} plan_decision;

typedef struct plan {
    plan_regime regime;
    bool stream;
    int64_t cache_mb;     /* streaming: the cache budget (0: none) */
    int32_t io_threads;
    bool overlap;
    bool predict_prefetch; /* read ahead what the next layer's router predicts */
    enum bmoe_dense_weights dense;
    double predicted_hit;             /* expected cache hit rate, 0..1 */
    double predicted_seconds_per_token; /* 0: not predictable (no rates probed) */
    plan_decision decisions[PLAN_MAX_DECISIONS];
    int32_t n_decisions;
    char flags[256];      /* the bmoe-cli flags that reproduce the plan */
    char refusal[256];    /* PLAN_REGIME_DENSE_OVERSIZED: why, in one line */
} plan;

/* The planner: pure, no I/O. pins may be NULL (nothing typed). Returns 0,
 * or -1 when the model cannot run here (regime dense-oversized;
 * plan->refusal says why). A memory_bytes of 0 (unknown) is taken to fit. */
int plan_make(const plan_model *model, const plan_machine *machine, const plan_pins *pins, plan *out);

/* The plan as text for --plan and --plan-explain: a first line "plan:
 * <regime>, <predicted s/token>: <flags>" (a refused plan: "plan:
 * dense-oversized: <refusal>"), then, with explain, one line per decision,
 * "  <key> = <value> (<tag>): <reason>". Every line ends in a newline.
 * Writes what fits of it into out (size > 0, NUL-terminated) and returns
 * the length of the whole text, as snprintf does. */
size_t plan_format(const plan *p, bool explain, char *out, size_t size);

const char *plan_regime_name(plan_regime regime); /* "fits", "experts-stream", "dense-oversized" */
const char *plan_tag_name(plan_tag tag);          /* "measured", "derived", ... */

/* Probes. Each returns 0, or -1 with a one-line reason in error. */

/* The model's bytes (loads it cheaply: mapped, not streaming, no prefault:
 * nothing is read or copied) and the memory of a context made with context
 * (its sizes, KV type and sliding-window rings; NULL: the library's
 * defaults); with draft_head (--mtp) the draft head's dense tensors and what
 * MTP drafting takes beside the context counted too. A dense model has its
 * expert fields 0. */
int plan_probe_model(const char *model_path, const bmoe_context_params *context, bool draft_head, plan_model *model,
                     char *error, size_t error_size);

/* The machine. probe_io: timed reads of the model file (O_DIRECT where it
 * can, slice-sized, at 1/2/4/8 lanes, about 0.4 s each; never written);
 * probe_mem: a timed read of a memory buffer (0.3 s at most). Either off
 * leaves its rates 0. cache_dir: where probe results are kept per model
 * file and machine (a small JSON file, reused while the file's size, mtime
 * and inode, the read size and the machine's memory and cores are
 * unchanged; a corrupt one is rewritten; memory_bytes is never cached);
 * NULL: no cache. refresh: measure what probe_io and probe_mem ask for
 * even when the cache holds it, and keep the new rates (--probe). On -1,
 * machine keeps what was measured before the failure (the memory and the
 * cores always are). */
int plan_probe_machine(const char *model_path, uint64_t slice_bytes, bool probe_io, bool probe_mem,
                       const char *cache_dir, bool refresh, plan_machine *machine, char *error, size_t error_size);

/* The probe cache file of a model in cache_dir: cache_dir/probe-<hash of
 * the model's real path>.json, written into buffer. NULL when the model's
 * path does not resolve or the name does not fit. */
const char *plan_cache_path(const char *cache_dir, const char *model_path, char *buffer, size_t size);

/* The hit rate the plan predicts for an expert cache of cache_bytes over
 * expert_bytes of experts: (cache / experts)^0.3, 1 from the whole set up,
 * 0 without a cache. */
double plan_hit_rate(uint64_t cache_bytes, uint64_t expert_bytes);

/* The user's cache directory for probe results: $XDG_CACHE_HOME/bmoe (an
 * absolute one; the XDG rule ignores a relative one) or $HOME/.cache/bmoe;
 * NULL when neither is set or buffer is too small. Written into buffer. */
const char *plan_cache_dir(char *buffer, size_t size);

#endif
