/* The planner of plan.h: the regime from the model's bytes against the
 * memory the process may take, then the cache, the lanes, overlap and the
 * dense policy, each with its reason, and a prediction of the seconds per
 * token from the probed rates. Pure: it reads its arguments and writes out. */
#include "plan.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define MIB ((uint64_t)1 << 20)

/* What the engine leaves free beside the cache and the contexts when the
 * user says nothing (bmoe_stream_params.cache_floor_mb's default). */
#define PLAN_DEFAULT_FLOOR_MB 1024
/* The engine's read lanes when nothing says otherwise. */
#define PLAN_DEFAULT_LANES 4
/* Lane counts whose rate is within this fraction of the best count as
 * equal; the largest of them wins. The probe reads without pause, decode
 * reads in bursts (one layer's misses) that end sooner with more reads in
 * flight even where the device's rate is flat, and the probe's rates move
 * by a tenth from run to run: only a device that loses a quarter of its rate
 * to more lanes (a seeking disk) gets fewer. */
#define PLAN_LANE_TOLERANCE 0.25
/* The hit rate of a cache holding a fraction f of the experts, f^0.3: real
 * routing repeats, so a small cache hits far more than f. */
#define PLAN_HIT_EXPONENT 0.3

const int32_t plan_lane_counts[PLAN_LANE_STEPS] = {1, 2, 4, 8};

const char *plan_regime_name(plan_regime regime)
{
    switch (regime) {
    case PLAN_REGIME_FITS: return "fits";
    case PLAN_REGIME_EXPERTS_STREAM: return "experts-stream";
    case PLAN_REGIME_DENSE_OVERSIZED: return "dense-oversized";
    }
    return "unknown";
}

const char *plan_tag_name(plan_tag tag)
{
    switch (tag) {
    case PLAN_MEASURED: return "measured";
    case PLAN_DERIVED: return "derived";
    case PLAN_POLICY: return "policy";
    case PLAN_OPERATOR: return "operator";
    case PLAN_UNPROBED: return "unprobed";
    }
    return "unknown";
}

static const char *dense_name(enum bmoe_dense_weights dense)
{
    switch (dense) {
    case BMOE_DENSE_WEIGHTS_MMAP: return "mmap";
    case BMOE_DENSE_WEIGHTS_ANON: return "anon";
    case BMOE_DENSE_WEIGHTS_WARM: return "warm";
    }
    return "anon";
}

static uint64_t mib_of(uint64_t bytes)
{
    return bytes / MIB;
}

/* a + b, saturating: descriptions come from outside and may be absurd. */
static uint64_t add_bytes(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint64_t floor_bytes_of(int64_t floor_mb)
{
    if (floor_mb <= 0)
        return 0;
    return (uint64_t)floor_mb > (UINT64_MAX >> 20) ? UINT64_MAX : (uint64_t)floor_mb << 20;
}

/* Copies text into a fixed field, cut to fit: a long reason loses its end. */
static void copy_cut(char *field, size_t size, const char *text)
{
    size_t length = strnlen(text, size - 1);
    memcpy(field, text, length);
    field[length] = '\0';
}

static plan_decision *add_decision(plan *out, const char *key, plan_tag tag, const char *value)
{
    if (out->n_decisions >= PLAN_MAX_DECISIONS)
        return NULL;
    plan_decision *decision = &out->decisions[out->n_decisions++];
    decision->key = key;
    decision->tag = tag;
    copy_cut(decision->value, sizeof decision->value, value);
    decision->reason[0] = '\0';
    return decision;
}

/* One row: the formatted text is the value, a '|', then the reason, so
 * each call keeps a decision's value and its reason side by side. */
static void decide(plan *out, const char *key, plan_tag tag, const char *format, ...)
    __attribute__((format(printf, 4, 5)));

static void decide(plan *out, const char *key, plan_tag tag, const char *format, ...)
{
    char text[sizeof out->decisions[0].value + sizeof out->decisions[0].reason];
    va_list args;
    va_start(args, format);
    vsnprintf(text, sizeof text, format, args);
    va_end(args);
    char *bar = strchr(text, '|');
    const char *reason = "";
    if (bar) {
        *bar = '\0';
        reason = bar + 1;
    }
    plan_decision *decision = add_decision(out, key, tag, text);
    if (decision)
        copy_cut(decision->reason, sizeof decision->reason, reason);
}

/* The index in plan_lane_counts of the largest lane count within the
 * tolerance of the best rate; -1 when no rate was probed. */
static int chosen_lane_step(const plan_machine *machine)
{
    double best = 0;
    for (int i = 0; i < PLAN_LANE_STEPS; i++)
        if (machine->read_bytes_per_s[i] > best)
            best = machine->read_bytes_per_s[i];
    if (!(best > 0))
        return -1;
    int chosen = -1;
    for (int i = 0; i < PLAN_LANE_STEPS; i++)
        if (machine->read_bytes_per_s[i] >= (1.0 - PLAN_LANE_TOLERANCE) * best)
            chosen = i;
    return chosen;
}

/* The read rate at a lane count: the probed step at or below it (lanes
 * past the last step read at the last step's rate). */
/* The hit rate a streaming cache of cache_bytes is predicted: plan_hit_rate,
 * but none below one token's experts (that cache evicts within each token). */
static double cache_hit_rate(const plan_model *model, uint64_t cache_bytes)
{
    return cache_bytes < model->cycle_bytes ? 0 : plan_hit_rate(cache_bytes, model->expert_bytes);
}

static double read_rate_at(const plan_machine *machine, int32_t lanes)
{
    double rate = machine->read_bytes_per_s[0];
    for (int i = 0; i < PLAN_LANE_STEPS; i++)
        if (plan_lane_counts[i] <= lanes)
            rate = machine->read_bytes_per_s[i];
    return rate;
}

double plan_hit_rate(uint64_t cache_bytes, uint64_t expert_bytes)
{
    if (cache_bytes == 0 || expert_bytes == 0)
        return 0;
    double fraction = (double)cache_bytes / (double)expert_bytes;
    if (fraction >= 1)
        return 1;
    return pow(fraction, PLAN_HIT_EXPONENT);
}

/* The least a streamed model runs with: one MoE layer's routed experts in
 * the cache at once. A cache below one token's experts evicts within each
 * token and so reads every expert a token routes to, but where the experts
 * are many times the memory a cache a little above that hits little more
 * (4 % for 600 MiB of GLM-4.5-Air's 35 GiB), so refusing such a model
 * would refuse a run that goes at nearly the speed the disk allows. */
static uint64_t layer_bytes_of(const plan_model *model)
{
    return (uint64_t)(model->n_expert_used > 0 ? model->n_expert_used : 0) * model->expert_slice_bytes;
}

/* The streaming cache the memory leaves: what is left past the dense
 * weights, the contexts and the floor, at least one layer's experts, at
 * most the whole expert set. */
static uint64_t usable_cache_bytes(const plan_model *model, uint64_t memory, uint64_t floor)
{
    uint64_t taken = add_bytes(add_bytes(model->dense_bytes, model->context_bytes), floor);
    uint64_t usable = memory > taken ? memory - taken : 0;
    if (usable < layer_bytes_of(model))
        usable = layer_bytes_of(model);
    if (usable > model->expert_bytes)
        usable = model->expert_bytes;
    return usable;
}

/* A byte budget in MiB for --cache-mb: rounded down, except that a budget
 * at the floor (one layer's experts, or under 1 MiB, which the engine
 * would read as "no cache") is rounded up so it still holds them. */
static int64_t cache_mb_of(uint64_t bytes, uint64_t floor_bytes)
{
    if (bytes == 0)
        return 0;
    uint64_t mb = bytes / MIB;
    if (mb == 0 || bytes <= floor_bytes)
        mb = (bytes + MIB - 1) / MIB;
    return (int64_t)mb;
}

static void append_flag(char *flags, size_t size, const char *format, ...) __attribute__((format(printf, 3, 4)));

static void append_flag(char *flags, size_t size, const char *format, ...)
{
    size_t used = strlen(flags);
    if (used + 1 >= size)
        return;
    if (used > 0)
        flags[used++] = ' ', flags[used] = '\0';
    va_list args;
    va_start(args, format);
    vsnprintf(flags + used, size - used, format, args);
    va_end(args);
}

static void write_flags(plan *out, const plan_pins *pins)
{
    out->flags[0] = '\0';
    size_t size = sizeof out->flags;
    if (!out->stream) {
        append_flag(out->flags, size, "--no-moe-stream");
    } else {
        append_flag(out->flags, size, "--moe-stream");
        if (out->cache_mb < 0)
            append_flag(out->flags, size, "--cache-mb auto");
        else
            append_flag(out->flags, size, "--cache-mb %" PRId64, out->cache_mb);
        append_flag(out->flags, size, "--io-threads %" PRId32, out->io_threads);
        /* the CLI has no switch to turn overlap off: leaving it out does */
        if (out->overlap)
            append_flag(out->flags, size, "--overlap");
        if (out->predict_prefetch)
            append_flag(out->flags, size, "--predict-prefetch");
        if (pins->cache_floor_set)
            append_flag(out->flags, size, "--cache-floor-mb %" PRId64, pins->cache_floor_mb);
    }
    if (out->dense != BMOE_DENSE_WEIGHTS_ANON)
        append_flag(out->flags, size, "--dense-weights %s", dense_name(out->dense));
}

/* How the regime was found, as one sentence. */
static void decide_regime(plan *out, const plan_model *model, const plan_machine *machine, uint64_t floor,
                          uint64_t whole, uint64_t dense_need)
{
    plan_tag tag = machine->memory_bytes > 0 ? PLAN_DERIVED : PLAN_UNPROBED;
    if (machine->memory_bytes == 0)
        decide(out, "regime", tag, "%s|the memory this process may take is unknown, so the model is taken to fit",
               plan_regime_name(out->regime));
    else if (out->regime == PLAN_REGIME_FITS && model->expert_bytes == 0 && whole > machine->memory_bytes)
        decide(out, "regime", tag,
               "%s|a dense model: its %" PRIu64 " MiB of weights with the contexts and the %" PRIu64
               " MiB floor fit in %" PRIu64 " MiB",
               plan_regime_name(out->regime), mib_of(model->dense_bytes), mib_of(floor),
               mib_of(machine->memory_bytes));
    else if (out->regime == PLAN_REGIME_FITS)
        decide(out, "regime", tag,
               "%s|the file (%" PRIu64 " MiB), the contexts (%" PRIu64 " MiB) and the %" PRIu64
               " MiB floor fit in the %" PRIu64 " MiB available",
               plan_regime_name(out->regime), mib_of(model->file_bytes), mib_of(model->context_bytes),
               mib_of(floor), mib_of(machine->memory_bytes));
    else
        decide(out, "regime", tag,
               "%s|the file (%" PRIu64 " MiB) does not fit in %" PRIu64 " MiB; the dense set, the contexts and one "
               "layer's experts (%" PRIu64 " MiB together) do",
               plan_regime_name(out->regime), mib_of(model->file_bytes), mib_of(machine->memory_bytes),
               mib_of(dense_need));
}

static void decide_memory(plan *out, const plan_machine *machine)
{
    if (machine->memory_bytes == 0)
        decide(out, "memory", PLAN_UNPROBED, "unknown|neither /proc/meminfo nor the cgroup said how much is free");
    else if (machine->memory_capped_by_cgroup)
        decide(out, "memory", PLAN_MEASURED,
               "%" PRIu64 " MiB|the room left under this process's cgroup limit (memory.max - memory.current), "
               "less than MemAvailable",
               mib_of(machine->memory_bytes));
    else
        decide(out, "memory", PLAN_MEASURED, "%" PRIu64 " MiB|MemAvailable; no cgroup limit is tighter",
               mib_of(machine->memory_bytes));
}

static void decide_lanes(plan *out, const plan_machine *machine, const plan_pins *pins)
{
    int step = chosen_lane_step(machine);
    if (pins->io_threads_set) {
        out->io_threads = pins->io_threads;
        decide(out, "io_threads", PLAN_OPERATOR, "%" PRId32 "|typed by the user; kept", out->io_threads);
    } else if (step < 0) {
        out->io_threads = PLAN_DEFAULT_LANES;
        decide(out, "io_threads", PLAN_UNPROBED, "%d|the read rate was not probed: the engine's default",
               PLAN_DEFAULT_LANES);
    } else {
        out->io_threads = plan_lane_counts[step];
        decide(out, "io_threads", PLAN_DERIVED,
               "%" PRId32 "|the most lanes whose probed rate is within %d %% of the best of 1, 2, 4 and 8",
               out->io_threads, (int)(PLAN_LANE_TOLERANCE * 100));
    }
    double rate = read_rate_at(machine, out->io_threads);
    if (rate > 0)
        decide(out, "read_rate", PLAN_MEASURED, "%.0f MiB/s|slice-sized reads of the model file, %" PRId32 " at a time",
               rate / (double)MIB, out->io_threads);
    else
        decide(out, "read_rate", PLAN_UNPROBED, "unknown|the model file's read rate was not probed");
}

/* One token's two costs, in seconds (0: a rate not probed): compute, the
 * bytes it multiplies at the memory's rate; reads, its cache misses at the
 * read rate of lanes lanes. */
typedef struct token_costs {
    double compute, reads;
    bool readable; /* no misses, or a read rate to time them */
} token_costs;

static token_costs costs_of(const plan_model *model, const plan_machine *machine, double hit, int32_t lanes)
{
    token_costs costs = {0};
    double compute_bytes = (double)model->dense_bytes + (double)model->n_expert_used *
                                                            (double)model->n_moe_layers *
                                                            (double)model->expert_slice_bytes;
    costs.compute = machine->memory_bytes_per_s > 0 ? compute_bytes / machine->memory_bytes_per_s : 0;
    double rate = read_rate_at(machine, lanes);
    double missed = (1 - hit) * (double)model->cycle_bytes;
    costs.readable = missed <= 0 || rate > 0;
    costs.reads = missed > 0 && rate > 0 ? missed / rate : 0;
    return costs;
}

/* Reading ahead what the next layer's router predicts pays where the reads
 * are what a token waits for and the guesses are right; it costs a second
 * router product, lanes and cache churn where they are not. Which one holds
 * depends on the disk, the cache and the model's routing, more than the
 * probed rates tell: the run measures it (its decode steps against plain
 * ones, option_gate.h) and pauses it where it is slower, so it is armed
 * wherever a token has misses to hide. */
static void decide_read_ahead(plan *out, const plan_model *model, const plan_machine *machine, uint64_t cache_bytes,
                              const plan_pins *pins)
{
    out->predict_prefetch = false;
    if (pins->read_ahead_set) {
        decide(out, "predict_prefetch", PLAN_OPERATOR, "off|a read-ahead was typed by the user; kept as typed");
        return;
    }
    if (!out->stream || !out->overlap || cache_bytes == 0) {
        decide(out, "predict_prefetch", PLAN_POLICY, "off|%s",
               !out->stream    ? "not streaming: nothing to read"
               : !out->overlap ? "no overlap: nothing computes while a read-ahead lands"
                               : "no cache: a guess has nowhere to land");
        return;
    }
    double hit = cache_hit_rate(model, cache_bytes);
    if (hit >= 1) {
        decide(out, "predict_prefetch", PLAN_POLICY, "off|every expert a token uses is cached");
        return;
    }
    out->predict_prefetch = true;
    token_costs costs = costs_of(model, machine, hit, out->io_threads);
    if (costs.compute > 0 && costs.reads > 0)
        decide(out, "predict_prefetch", PLAN_POLICY,
               "on|paused by the run where its decode steps measure slower than plain ones (a token's misses: "
               "%.3g s of reads, %.3g s of compute)",
               costs.reads, costs.compute);
    else
        decide(out, "predict_prefetch", PLAN_POLICY,
               "on|paused by the run where its decode steps measure slower than plain ones");
}

/* Seconds per token: the bytes a token computes over, at the memory's rate,
 * and what the cache misses of one token's experts take to read. */
static void predict(plan *out, const plan_model *model, const plan_machine *machine, uint64_t cache_bytes,
                    bool cache_is_page_cache)
{
    if (!out->stream && !cache_is_page_cache) {
        double compute = costs_of(model, machine, 1, 1).compute;
        out->predicted_hit = 1;
        out->predicted_seconds_per_token = compute;
        decide(out, "predicted", compute > 0 ? PLAN_DERIVED : PLAN_UNPROBED,
               compute > 0 ? "%.4g s/token|the weights a token reads, at the probed memory bandwidth"
                           : "unknown|the memory bandwidth was not probed",
               compute);
        return;
    }
    out->predicted_hit = cache_hit_rate(model, cache_bytes);
    /* page faults read one at a time: the mapping has no lanes */
    token_costs costs = costs_of(model, machine, out->predicted_hit, cache_is_page_cache ? 1 : out->io_threads);
    double seconds = 0;
    bool overlapped = out->overlap && !cache_is_page_cache;
    if (costs.compute > 0 && costs.readable)
        seconds = overlapped ? fmax(costs.compute, costs.reads) : costs.compute + costs.reads;
    out->predicted_seconds_per_token = seconds;
    int hit_percent = (int)lround(out->predicted_hit * 100);
    if (seconds > 0)
        decide(out, "predicted", PLAN_DERIVED,
               "%.4g s/token, hit %d %%|hit = (cache/experts)^0.3, fit to measured runs (2000 MiB of 16 GiB of experts "
               "hit 55 %%); %s of compute and the misses' reads%s",
               seconds, hit_percent, overlapped ? "the larger" : "the sum",
               cache_is_page_cache ? " (mapped: the page cache as the cache, one fault at a time)" : "");
    else
        decide(out, "predicted", PLAN_UNPROBED,
               "unknown, hit %d %%|hit = (cache/experts)^0.3 (2000 MiB of 16 GiB of experts hit 55 %%); a rate it "
               "needs was not probed",
               hit_percent);
}

int plan_make(const plan_model *model, const plan_machine *machine, const plan_pins *pins_or_null, plan *out)
{
    static const plan_pins no_pins = {0};
    const plan_pins *pins = pins_or_null ? pins_or_null : &no_pins;
    memset(out, 0, sizeof *out);
    out->dense = BMOE_DENSE_WEIGHTS_ANON;

    uint64_t floor = floor_bytes_of(pins->cache_floor_set ? pins->cache_floor_mb : PLAN_DEFAULT_FLOOR_MB);
    uint64_t memory = machine->memory_bytes;
    uint64_t whole = add_bytes(add_bytes(model->file_bytes, model->context_bytes), floor);
    /* the floor is room the cache gives up first, not a need: a model runs
     * while its dense set, its contexts and one layer's experts fit */
    uint64_t dense_need = add_bytes(add_bytes(model->dense_bytes, model->context_bytes), layer_bytes_of(model));
    bool dense_model = model->expert_bytes == 0;
    if (memory == 0 || whole <= memory)
        out->regime = PLAN_REGIME_FITS;
    else if (dense_need > memory)
        out->regime = PLAN_REGIME_DENSE_OVERSIZED;
    else
        out->regime = dense_model ? PLAN_REGIME_FITS : PLAN_REGIME_EXPERTS_STREAM;

    decide_regime(out, model, machine, floor, whole, dense_need);
    decide_memory(out, machine);
    if (out->regime == PLAN_REGIME_DENSE_OVERSIZED) {
        snprintf(out->refusal, sizeof out->refusal,
                 "the model cannot run here: its dense weights (%" PRIu64 " MiB), contexts (%" PRIu64
                 " MiB) and one layer's experts (%" PRIu64 " MiB) need %" PRIu64 " MiB; %" PRIu64
                 " MiB are available",
                 mib_of(model->dense_bytes), mib_of(model->context_bytes), mib_of(layer_bytes_of(model)),
                 mib_of(dense_need), mib_of(memory));
        return -1;
    }

    /* streaming: the CLI takes --cache-mb, --io-threads and --overlap only
     * with --moe-stream, so typing one asks for streaming */
    bool planned_stream = out->regime == PLAN_REGIME_EXPERTS_STREAM;
    bool asks_stream = pins->cache_mb_set || pins->io_threads_set || (pins->overlap_set && pins->overlap);
    if (!pins->stream_set && asks_stream && !planned_stream && !dense_model) {
        out->stream = true;
        decide(out, "moe_stream", PLAN_OPERATOR,
               "on|the model fits, but a streaming flag was typed (--cache-mb, --io-threads or --overlap)");
    } else if (pins->stream_set) {
        out->stream = pins->stream && !dense_model;
        if (!pins->stream && planned_stream)
            decide(out, "moe_stream", PLAN_OPERATOR,
                   "off|typed by the user and kept, though the model does not fit: its experts will be read again "
                   "through page faults");
        else if (pins->stream && dense_model)
            decide(out, "moe_stream", PLAN_OPERATOR, "off|typed on, but a dense model has no experts to stream");
        else
            decide(out, "moe_stream", PLAN_OPERATOR, "%s|typed by the user; kept", out->stream ? "on" : "off");
    } else {
        out->stream = planned_stream;
        if (dense_model)
            decide(out, "moe_stream", PLAN_DERIVED, "off|a dense model has no experts to stream");
        else
            decide(out, "moe_stream", PLAN_DERIVED,
                   planned_stream ? "on|the experts do not fit beside the dense set: they stream through a cache"
                                  : "off|the whole model fits: the experts are read from the mapping");
    }

    /* the cache: sized by the rule whether or not a pin overrides it, since
     * an auto budget (-1) runs near what the rule gives */
    uint64_t rule_bytes = usable_cache_bytes(model, memory ? memory : UINT64_MAX, floor);
    uint64_t cache_bytes = 0;
    bool page_cache = false;
    if (pins->cache_mb_set) {
        out->cache_mb = pins->cache_mb;
        cache_bytes = pins->cache_mb < 0 ? rule_bytes : floor_bytes_of(pins->cache_mb);
        char typed[24] = "auto";
        if (pins->cache_mb >= 0)
            snprintf(typed, sizeof typed, "%" PRId64, pins->cache_mb);
        decide(out, "cache_mb", PLAN_OPERATOR, "%s|typed by the user; kept, and the prediction uses it", typed);
    } else if (out->stream) {
        out->cache_mb = cache_mb_of(rule_bytes, layer_bytes_of(model));
        cache_bytes = (uint64_t)out->cache_mb * MIB;
        const char *bound = rule_bytes >= model->expert_bytes ? ", capped at the whole expert set"
                            : rule_bytes <= layer_bytes_of(model) ? ", raised to one layer's experts"
                            : rule_bytes < model->cycle_bytes
                                ? ", below one token's experts: every token reads the experts it routes to"
                                : "";
        decide(out, "cache_mb", PLAN_DERIVED,
               "%" PRId64 "|the memory left past the dense set, the contexts and the floor%s", out->cache_mb, bound);
    } else {
        out->cache_mb = 0;
        decide(out, "cache_mb", PLAN_POLICY, "0|not streaming: no expert cache");
    }
    if (!out->stream && planned_stream) {
        /* mapped, the experts live in what the page cache keeps of them */
        cache_bytes = rule_bytes;
        page_cache = true;
    }

    decide_lanes(out, machine, pins);

    if (pins->overlap_set) {
        out->overlap = pins->overlap;
        decide(out, "overlap", PLAN_OPERATOR, "%s|typed by the user; kept", out->overlap ? "on" : "off");
    } else {
        out->overlap = out->stream;
        decide(out, "overlap", PLAN_POLICY,
               out->stream ? "on|streaming: the resident experts compute while the missing ones are read"
                           : "off|not streaming: nothing to read during compute");
    }

    decide_read_ahead(out, model, machine, cache_bytes, pins);

    if (pins->dense_set) {
        out->dense = pins->dense;
        decide(out, "dense_weights", PLAN_OPERATOR, "%s|typed by the user; kept", dense_name(out->dense));
    } else {
        out->dense = BMOE_DENSE_WEIGHTS_ANON;
        decide(out, "dense_weights", PLAN_POLICY,
               "anon|the engine's default: the dense weights copied into its own memory, never evicted");
    }

    if (pins->cache_floor_set)
        decide(out, "cache_floor_mb", PLAN_OPERATOR, "%" PRId64 "|typed by the user; kept", pins->cache_floor_mb);
    else
        decide(out, "cache_floor_mb", PLAN_POLICY, "%d|the engine's default room left for the rest of the system",
               PLAN_DEFAULT_FLOOR_MB);

    if (pins->lossy_set)
        decide(out, "lossy", PLAN_OPERATOR,
               "as typed|a lossy lever was typed: kept as it is; the plan arms none and predicts without it");

    predict(out, model, machine, cache_bytes, page_cache);
    write_flags(out, pins);
    return 0;
}
