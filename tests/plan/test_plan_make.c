/* The planner as a pure function: a table of model and machine descriptions
 * in, checks on the plan out (regime, cache size by the rule, lanes, pins
 * kept, nothing lossy armed), then the predicted seconds per token against
 * the formula worked out here from each case's numbers. */
#include <math.h>
#include <stdint.h>

#include "plan.h"
#include "test.h"

#define MIB ((uint64_t)1 << 20)
#define UNCHECKED (-2)

/* A 30B-like shape: 64 MoE layers of 128 experts of 2 MiB, top-8. */
static plan_model model_30b(void)
{
    plan_model model = {0};
    model.dense_bytes = 1536 * MIB;
    model.expert_bytes = 16384 * MIB;
    model.file_bytes = model.dense_bytes + model.expert_bytes + 8 * MIB;
    model.expert_slice_bytes = 2 * MIB;
    model.n_moe_layers = 64;
    model.n_expert = 128;
    model.n_expert_used = 8;
    model.cycle_bytes = 8 * 64 * model.expert_slice_bytes;
    model.context_bytes = 512 * MIB;
    return model;
}

/* A 120B-like shape: 40 MoE layers of 128 experts of 12 MiB, top-4. */
static plan_model model_120b(void)
{
    plan_model model = {0};
    model.dense_bytes = 2048 * MIB;
    model.expert_bytes = 61440 * MIB;
    model.file_bytes = model.dense_bytes + model.expert_bytes + 8 * MIB;
    model.expert_slice_bytes = 12 * MIB;
    model.n_moe_layers = 40;
    model.n_expert = 128;
    model.n_expert_used = 4;
    model.cycle_bytes = 4 * 40 * model.expert_slice_bytes;
    model.context_bytes = 512 * MIB;
    return model;
}

static plan_model model_dense(void)
{
    plan_model model = {0};
    model.dense_bytes = 4000 * MIB;
    model.file_bytes = model.dense_bytes + 4 * MIB;
    model.context_bytes = 256 * MIB;
    return model;
}

static plan_machine machine_with(uint64_t memory_mib)
{
    plan_machine machine = {0};
    machine.memory_bytes = memory_mib * MIB;
    machine.n_cores = 8;
    return machine;
}

static const plan_decision *find_decision(const plan *p, const char *key)
{
    const plan_decision *found = NULL;
    int count = 0;
    for (int i = 0; i < p->n_decisions; i++)
        if (strcmp(p->decisions[i].key, key) == 0) {
            found = &p->decisions[i];
            count++;
        }
    return count == 1 ? found : NULL;
}

typedef struct plan_case {
    const char *name;
    plan_model model;
    plan_machine machine;
    plan_pins pins;
    /* expected */
    int status;
    plan_regime regime;
    bool stream;
    int64_t cache_mb;      /* UNCHECKED: not checked */
    int32_t io_threads;    /* 0: not checked */
    const char *flags;     /* exactly; NULL: not checked */
    const char *key;       /* a decision to look at (NULL: none) */
    plan_tag tag;
    const char *reason_has; /* a word its reason holds (NULL: not checked) */
} plan_case;

static void check_case(const plan_case *c)
{
    plan p;
    int status = plan_make(&c->model, &c->machine, &c->pins, &p);
    CHECK_MSG(status == c->status, "%s: status %d, want %d (%s)", c->name, status, c->status, p.refusal);
    CHECK_MSG(p.regime == c->regime, "%s: regime %s, want %s", c->name, plan_regime_name(p.regime),
              plan_regime_name(c->regime));
    if (status != 0)
        return;
    CHECK_MSG(p.refusal[0] == '\0', "%s: a refusal on a plan: %s", c->name, p.refusal);
    CHECK_MSG(p.stream == c->stream, "%s: stream %d", c->name, p.stream);
    if (c->cache_mb != UNCHECKED)
        CHECK_MSG(p.cache_mb == c->cache_mb, "%s: cache %lld MiB, want %lld", c->name, (long long)p.cache_mb,
                  (long long)c->cache_mb);
    if (c->io_threads)
        CHECK_MSG(p.io_threads == c->io_threads, "%s: %d lanes, want %d", c->name, p.io_threads, c->io_threads);
    if (c->flags)
        CHECK_MSG(strcmp(p.flags, c->flags) == 0, "%s: flags [%s], want [%s]", c->name, p.flags, c->flags);
    /* every plan decides every key once, each with a reason */
    static const char *const keys[] = {"regime", "memory", "read_rate", "moe_stream", "cache_mb",
                                       "io_threads", "overlap", "predict_prefetch", "dense_weights",
                                       "cache_floor_mb"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const plan_decision *d = find_decision(&p, keys[i]);
        CHECK_MSG(d && d->value[0] && d->reason[0], "%s: decision %s missing, repeated or empty", c->name, keys[i]);
    }
    /* no reason cut short by its field */
    for (int i = 0; i < p.n_decisions; i++)
        CHECK_MSG(strlen(p.decisions[i].reason) < sizeof p.decisions[i].reason - 1 &&
                      strlen(p.decisions[i].value) < sizeof p.decisions[i].value - 1,
                  "%s: %s's text fills its field: %s", c->name, p.decisions[i].key, p.decisions[i].reason);
    /* the planner arms no lossy lever, whatever was typed */
    static const char *const lossy_flags[] = {"--drop-cold", "--expert-substitute", "--route-ahead",
                                              "--n-expert-used"};
    for (size_t i = 0; i < sizeof lossy_flags / sizeof lossy_flags[0]; i++)
        CHECK_MSG(!strstr(p.flags, lossy_flags[i]), "%s: lossy flag in [%s]", c->name, p.flags);
    CHECK_MSG(p.predicted_hit >= 0 && p.predicted_hit <= 1, "%s: hit %g", c->name, p.predicted_hit);
    if (c->key) {
        const plan_decision *d = find_decision(&p, c->key);
        CHECK_MSG(d != NULL, "%s: no decision %s", c->name, c->key);
        if (d) {
            CHECK_MSG(d->tag == c->tag, "%s: %s tagged %s, want %s", c->name, c->key, plan_tag_name(d->tag),
                      plan_tag_name(c->tag));
            if (c->reason_has)
                CHECK_MSG(strstr(d->reason, c->reason_has) != NULL, "%s: %s's reason [%s] lacks [%s]", c->name,
                          c->key, d->reason, c->reason_has);
        }
    }
}

static void test_table(void)
{
    plan_model m30 = model_30b(), m120 = model_120b();
    /* 30B: file 17928 MiB; with the contexts (512) and the floor (1024), 19464 */
    uint64_t file30 = m30.file_bytes / MIB;
    uint64_t file120 = m120.file_bytes / MIB;
    plan_case cases[] = {
        {.name = "fits with room", .model = m30, .machine = machine_with(65536), .status = 0,
         .regime = PLAN_REGIME_FITS, .stream = false, .cache_mb = 0, .flags = "--no-moe-stream",
         .key = "moe_stream", .tag = PLAN_DERIVED},
        {.name = "fits with nothing to spare", .model = m30, .machine = machine_with(19464), .status = 0,
         .regime = PLAN_REGIME_FITS, .stream = false, .cache_mb = 0, .flags = "--no-moe-stream",
         .key = "regime", .tag = PLAN_DERIVED, .reason_has = "fit"},
        /* a MiB short: streams, and the rule's cache (19463 - 1536 - 512 - 1024) is capped at the experts */
        {.name = "one MiB short", .model = m30, .machine = machine_with(19463), .status = 0,
         .regime = PLAN_REGIME_EXPERTS_STREAM, .stream = true, .cache_mb = 16384,
         .flags = "--moe-stream --cache-mb 16384 --io-threads 4 --overlap", .key = "cache_mb",
         .tag = PLAN_DERIVED, .reason_has = "capped"},
        {.name = "1.5x RAM", .model = m30, .machine = machine_with(file30 * 2 / 3), .status = 0,
         .regime = PLAN_REGIME_EXPERTS_STREAM, .stream = true,
         .cache_mb = (int64_t)(file30 * 2 / 3) - 1536 - 512 - 1024, .io_threads = 4, .key = "overlap",
         .tag = PLAN_POLICY},
        {.name = "3x RAM", .model = m30, .machine = machine_with(file30 / 3), .status = 0,
         .regime = PLAN_REGIME_EXPERTS_STREAM, .stream = true, .cache_mb = (int64_t)(file30 / 3) - 3072,
         .flags = "--moe-stream --cache-mb 2904 --io-threads 4 --overlap --predict-prefetch", .key = "memory", .tag = PLAN_MEASURED},
        {.name = "8x RAM", .model = m120, .machine = machine_with(file120 / 8), .status = 0,
         .regime = PLAN_REGIME_EXPERTS_STREAM, .stream = true,
         .cache_mb = (int64_t)(file120 / 8) - 2048 - 512 - 1024},
        /* exactly the dense set, the contexts, the floor and one cycle: the cache is the cycle */
        {.name = "floored at the cycle", .model = m120, .machine = machine_with(2048 + 512 + 1024 + 1920),
         .status = 0, .regime = PLAN_REGIME_EXPERTS_STREAM, .stream = true, .cache_mb = 1920},
        /* the dense set, the contexts and one layer's experts (8 x 2 MiB) need 2064: the floor and
         * the rest of a token's experts are the cache's to give up */
        {.name = "dense set too large", .model = m30, .machine = machine_with(2063), .status = -1,
         .regime = PLAN_REGIME_DENSE_OVERSIZED},
        {.name = "one layer's experts", .model = m30, .machine = machine_with(2064), .status = 0,
         .regime = PLAN_REGIME_EXPERTS_STREAM, .stream = true, .cache_mb = 16, .key = "cache_mb",
         .tag = PLAN_DERIVED, .reason_has = "raised to one layer's experts"},
        /* 1536 + 512 + 1024 leave 500 MiB of 3572: under a token's 1024 */
        {.name = "below one token's experts", .model = m30, .machine = machine_with(3572), .status = 0,
         .regime = PLAN_REGIME_EXPERTS_STREAM, .stream = true, .cache_mb = 500, .key = "cache_mb",
         .tag = PLAN_DERIVED, .reason_has = "every token reads"},
        {.name = "cgroup cap", .model = m30,
         .machine = {.memory_bytes = 5976 * MIB, .memory_capped_by_cgroup = true, .n_cores = 8}, .status = 0,
         .regime = PLAN_REGIME_EXPERTS_STREAM, .stream = true, .cache_mb = 2904, .key = "memory",
         .tag = PLAN_MEASURED, .reason_has = "cgroup"},
        {.name = "cache pinned", .model = m30, .machine = machine_with(5976),
         .pins = {.cache_mb_set = true, .cache_mb = 2000}, .status = 0, .regime = PLAN_REGIME_EXPERTS_STREAM,
         .stream = true, .cache_mb = 2000, .flags = "--moe-stream --cache-mb 2000 --io-threads 4 --overlap --predict-prefetch",
         .key = "cache_mb", .tag = PLAN_OPERATOR},
        {.name = "cache pinned auto", .model = m30, .machine = machine_with(5976),
         .pins = {.cache_mb_set = true, .cache_mb = -1}, .status = 0, .regime = PLAN_REGIME_EXPERTS_STREAM,
         .stream = true, .cache_mb = -1, .flags = "--moe-stream --cache-mb auto --io-threads 4 --overlap --predict-prefetch",
         .key = "cache_mb", .tag = PLAN_OPERATOR},
        {.name = "no-moe-stream pinned on a model too big", .model = m30, .machine = machine_with(5976),
         .pins = {.stream_set = true, .stream = false}, .status = 0, .regime = PLAN_REGIME_EXPERTS_STREAM,
         .stream = false, .cache_mb = 0, .flags = "--no-moe-stream", .key = "moe_stream", .tag = PLAN_OPERATOR,
         .reason_has = "does not fit"},
        {.name = "moe-stream pinned on a model that fits", .model = m30, .machine = machine_with(65536),
         .pins = {.stream_set = true, .stream = true}, .status = 0, .regime = PLAN_REGIME_FITS, .stream = true,
         .cache_mb = 16384, .key = "moe_stream", .tag = PLAN_OPERATOR},
        {.name = "a streaming flag typed on a model that fits", .model = m30, .machine = machine_with(65536),
         .pins = {.cache_mb_set = true, .cache_mb = 4000}, .status = 0, .regime = PLAN_REGIME_FITS,
         .stream = true, .cache_mb = 4000, .flags = "--moe-stream --cache-mb 4000 --io-threads 4 --overlap --predict-prefetch",
         .key = "moe_stream", .tag = PLAN_OPERATOR, .reason_has = "--cache-mb"},
        {.name = "overlap, lanes and dense pinned", .model = m30, .machine = machine_with(5976),
         .pins = {.overlap_set = true, .overlap = false, .io_threads_set = true, .io_threads = 2,
                  .dense_set = true, .dense = BMOE_DENSE_WEIGHTS_MMAP},
         .status = 0, .regime = PLAN_REGIME_EXPERTS_STREAM, .stream = true, .cache_mb = 2904, .io_threads = 2,
         .flags = "--moe-stream --cache-mb 2904 --io-threads 2 --dense-weights mmap", .key = "dense_weights",
         .tag = PLAN_OPERATOR},
        /* a smaller floor moves the line: 17928 + 512 + 512 fits in 19000 */
        {.name = "floor pinned", .model = m30, .machine = machine_with(19000),
         .pins = {.cache_floor_set = true, .cache_floor_mb = 512}, .status = 0, .regime = PLAN_REGIME_FITS,
         .stream = false, .key = "cache_floor_mb", .tag = PLAN_OPERATOR},
        {.name = "lossy lever typed", .model = m30, .machine = machine_with(5976), .pins = {.lossy_set = true},
         .status = 0, .regime = PLAN_REGIME_EXPERTS_STREAM, .stream = true, .cache_mb = 2904,
         .flags = "--moe-stream --cache-mb 2904 --io-threads 4 --overlap --predict-prefetch", .key = "lossy", .tag = PLAN_OPERATOR},
        {.name = "dense model fits", .model = model_dense(), .machine = machine_with(8192), .status = 0,
         .regime = PLAN_REGIME_FITS, .stream = false, .flags = "--no-moe-stream"},
        {.name = "dense model with moe-stream typed", .model = model_dense(), .machine = machine_with(8192),
         .pins = {.stream_set = true, .stream = true}, .status = 0, .regime = PLAN_REGIME_FITS, .stream = false,
         .flags = "--no-moe-stream", .key = "moe_stream", .tag = PLAN_OPERATOR},
        {.name = "dense model too large", .model = model_dense(), .machine = machine_with(4096), .status = -1,
         .regime = PLAN_REGIME_DENSE_OVERSIZED},
        {.name = "unprobed rates", .model = m30, .machine = machine_with(5976), .status = 0,
         .regime = PLAN_REGIME_EXPERTS_STREAM, .stream = true, .cache_mb = UNCHECKED, .io_threads = 4, .key = "io_threads",
         .tag = PLAN_UNPROBED},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_case(&cases[i]);
}

static void test_refusal_message(void)
{
    plan_model model = model_30b();
    plan_machine machine = machine_with(2050);
    plan p;
    CHECK(plan_make(&model, &machine, NULL, &p) == -1);
    CHECK(p.regime == PLAN_REGIME_DENSE_OVERSIZED);
    /* 1536 + 512 + 16 (one layer's 8 experts of 2 MiB) needed, 2050 there */
    CHECK_MSG(strstr(p.refusal, "(16 MiB)") && strstr(p.refusal, "2064 MiB") && strstr(p.refusal, "2050 MiB"),
              "refusal: %s", p.refusal);
    CHECK(strchr(p.refusal, '\n') == NULL);
    /* a layer's experts move a model over the line: the same memory takes smaller ones */
    model.expert_slice_bytes = MIB / 4;
    CHECK(plan_make(&model, &machine, NULL, &p) == 0);
}

/* The lanes: the largest count whose rate is within 25 % of the best. */
static void test_lanes(void)
{
    static const struct {
        double rates[PLAN_LANE_STEPS]; /* MiB/s at 1, 2, 4, 8 lanes */
        int32_t want;
    } cases[] = {
        {{1000, 1900, 2000, 1960}, 8},
        {{1000, 1900, 2000, 1499}, 4},
        {{1000, 2000, 1950, 1400}, 4},
        {{1000, 2000, 1499, 1400}, 2},
        /* a probe under an 8 GiB cap on a 2-core VM: 8 lanes, which decoded fastest there */
        {{7400, 8430, 6610, 6670}, 8},
        {{3000, 1000, 1000, 1000}, 1},
        {{1000, 1000, 1000, 1000}, 8},
    };
    plan_model model = model_30b();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        plan_machine machine = machine_with(5976);
        for (int j = 0; j < PLAN_LANE_STEPS; j++)
            machine.read_bytes_per_s[j] = cases[i].rates[j] * (double)MIB;
        plan p;
        CHECK(plan_make(&model, &machine, NULL, &p) == 0);
        CHECK_MSG(p.io_threads == cases[i].want, "lanes case %zu: %d, want %d", i, p.io_threads, cases[i].want);
        const plan_decision *d = find_decision(&p, "io_threads");
        CHECK(d && d->tag == PLAN_DERIVED);
        d = find_decision(&p, "read_rate");
        CHECK(d && d->tag == PLAN_MEASURED);
    }
}

static bool near(double got, double want)
{
    return fabs(got - want) <= 1e-9 * fabs(want) + 1e-12;
}

/* Predicted seconds per token, from the formula in the brief: compute =
 * (dense + used x layers x slice) / memory rate; reads = (1 - hit) x cycle
 * / read rate at the lanes; overlap takes the larger, else the sum. */
static void test_prediction(void)
{
    plan_model model = model_30b();
    double memory_rate = 20e9, read_rates[PLAN_LANE_STEPS] = {0.5e9, 0.9e9, 1.6e9, 1.62e9};
    plan_machine machine = machine_with(5976);
    machine.memory_bytes_per_s = memory_rate;
    memcpy(machine.read_bytes_per_s, read_rates, sizeof read_rates);

    double compute = (1536.0 * MIB + 8.0 * 64 * 2 * MIB) / memory_rate;
    double cycle = 1024.0 * MIB;

    plan p;
    CHECK(plan_make(&model, &machine, NULL, &p) == 0);
    /* 8 lanes: 1.62 is within 5 % of itself, 1.6 too, and 8 is the larger */
    CHECK(p.io_threads == 8 && p.overlap && p.cache_mb == 2904);
    double hit = pow(2904.0 / 16384.0, 0.3);
    double reads = (1 - hit) * cycle / 1.62e9;
    CHECK_MSG(near(p.predicted_hit, hit), "hit %g, want %g", p.predicted_hit, hit);
    CHECK_MSG(near(p.predicted_seconds_per_token, fmax(compute, reads)), "s/token %g, want %g",
              p.predicted_seconds_per_token, fmax(compute, reads));
    const plan_decision *d = find_decision(&p, "predicted");
    CHECK(d && d->tag == PLAN_DERIVED && strstr(d->reason, "0.3"));

    /* overlap off: the sum; lanes pinned at 2: that step's rate */
    plan_pins pins = {.overlap_set = true, .overlap = false, .io_threads_set = true, .io_threads = 2};
    CHECK(plan_make(&model, &machine, &pins, &p) == 0);
    reads = (1 - hit) * cycle / 0.9e9;
    CHECK_MSG(near(p.predicted_seconds_per_token, compute + reads), "sum: %g, want %g",
              p.predicted_seconds_per_token, compute + reads);

    /* a pinned cache drives the hit rate: 2000 MiB of 16 GiB */
    plan_pins cache_pin = {.cache_mb_set = true, .cache_mb = 2000};
    CHECK(plan_make(&model, &machine, &cache_pin, &p) == 0);
    hit = pow(2000.0 / 16384.0, 0.3);
    CHECK_MSG(near(p.predicted_hit, hit), "pinned hit %g, want %g", p.predicted_hit, hit);
    /* the calibration the model was fit to: about half at a tenth of the experts */
    CHECK(p.predicted_hit > 0.45 && p.predicted_hit < 0.6);
    reads = (1 - hit) * cycle / 1.62e9;
    CHECK(near(p.predicted_seconds_per_token, fmax(compute, reads)));

    /* no cache: every routed byte is read */
    plan_pins no_cache = {.cache_mb_set = true, .cache_mb = 0};
    CHECK(plan_make(&model, &machine, &no_cache, &p) == 0);
    CHECK(p.predicted_hit == 0);
    CHECK(near(p.predicted_seconds_per_token, fmax(compute, cycle / 1.62e9)));

    /* fits: compute only */
    machine.memory_bytes = 65536 * MIB;
    CHECK(plan_make(&model, &machine, NULL, &p) == 0);
    CHECK(p.regime == PLAN_REGIME_FITS && p.predicted_hit == 1);
    CHECK(near(p.predicted_seconds_per_token, compute));

    /* a rate it needs missing: unpredictable */
    machine.memory_bytes = 5976 * MIB;
    machine.memory_bytes_per_s = 0;
    CHECK(plan_make(&model, &machine, NULL, &p) == 0);
    CHECK(p.predicted_seconds_per_token == 0);
    machine.memory_bytes_per_s = memory_rate;
    memset(machine.read_bytes_per_s, 0, sizeof machine.read_bytes_per_s);
    CHECK(plan_make(&model, &machine, NULL, &p) == 0);
    CHECK(p.predicted_seconds_per_token == 0);
    d = find_decision(&p, "predicted");
    CHECK(d && d->tag == PLAN_UNPROBED);
    d = find_decision(&p, "read_rate");
    CHECK(d && d->tag == PLAN_UNPROBED);
    /* the whole expert set cached: nothing to read, no read rate needed */
    plan_pins all_cached = {.cache_mb_set = true, .cache_mb = 16384};
    CHECK(plan_make(&model, &machine, &all_cached, &p) == 0);
    CHECK(p.predicted_hit == 1 && near(p.predicted_seconds_per_token, compute));
}

static void test_hit_rate(void)
{
    CHECK(plan_hit_rate(0, 100) == 0);
    CHECK(plan_hit_rate(100, 0) == 0);
    CHECK(plan_hit_rate(100, 100) == 1);
    CHECK(plan_hit_rate(200, 100) == 1);
    CHECK(near(plan_hit_rate(10, 100), pow(0.1, 0.3)));
}

static void test_names(void)
{
    CHECK(strcmp(plan_regime_name(PLAN_REGIME_FITS), "fits") == 0);
    CHECK(strcmp(plan_regime_name(PLAN_REGIME_EXPERTS_STREAM), "experts-stream") == 0);
    CHECK(strcmp(plan_regime_name(PLAN_REGIME_DENSE_OVERSIZED), "dense-oversized") == 0);
    CHECK(strcmp(plan_tag_name(PLAN_MEASURED), "measured") == 0);
    CHECK(strcmp(plan_tag_name(PLAN_DERIVED), "derived") == 0);
    CHECK(strcmp(plan_tag_name(PLAN_POLICY), "policy") == 0);
    CHECK(strcmp(plan_tag_name(PLAN_OPERATOR), "operator") == 0);
    CHECK(strcmp(plan_tag_name(PLAN_UNPROBED), "unprobed") == 0);
    CHECK(plan_lane_counts[0] == 1 && plan_lane_counts[1] == 2 && plan_lane_counts[2] == 4 &&
          plan_lane_counts[3] == 8);
}

/* One layer's experts, the cache's floor, not whole MiB: rounded up, never
 * under it; a cache of a token's experts not whole MiB rounds down. */
static void test_cycle_rounding(void)
{
    plan_model model = model_120b();
    model.expert_slice_bytes = 12 * MIB + 4096;
    model.cycle_bytes = 4 * 40 * model.expert_slice_bytes; /* 1920 MiB + 640 KiB */
    uint64_t layer = 4 * model.expert_slice_bytes;         /* 48 MiB + 16 KiB */
    plan_machine machine = {.memory_bytes = 2048 * MIB + 512 * MIB + 1024 * MIB + layer, .n_cores = 4};
    plan p;
    CHECK(plan_make(&model, &machine, NULL, &p) == 0);
    CHECK_MSG(p.cache_mb == 49, "cache %lld", (long long)p.cache_mb);
    machine.memory_bytes = 2048 * MIB + 512 * MIB + 1024 * MIB + model.cycle_bytes;
    CHECK(plan_make(&model, &machine, NULL, &p) == 0);
    CHECK_MSG(p.cache_mb == 1920, "cache %lld", (long long)p.cache_mb);
    /* memory unknown: taken to fit */
    machine.memory_bytes = 0;
    CHECK(plan_make(&model, &machine, NULL, &p) == 0);
    CHECK(p.regime == PLAN_REGIME_FITS);
    const plan_decision *d = find_decision(&p, "memory");
    CHECK(d && d->tag == PLAN_UNPROBED);
}

/* Descriptions from outside may be absurd: sums saturate, nothing wraps. */
static void test_extremes(void)
{
    plan p;
    plan_model empty = {0};
    plan_machine none = {0};
    CHECK(plan_make(&empty, &none, NULL, &p) == 0 && p.regime == PLAN_REGIME_FITS && !p.stream);

    plan_model huge = model_30b();
    huge.file_bytes = huge.dense_bytes = huge.expert_bytes = huge.cycle_bytes = huge.context_bytes = UINT64_MAX;
    plan_machine machine = machine_with(65536);
    CHECK(plan_make(&huge, &machine, NULL, &p) == -1 && p.regime == PLAN_REGIME_DENSE_OVERSIZED);

    plan_model model = model_30b();
    plan_pins pins = {.cache_floor_set = true, .cache_floor_mb = INT64_MAX};
    /* a floor past all memory leaves the cache one layer's experts */
    CHECK(plan_make(&model, &machine, &pins, &p) == 0 && p.stream && p.cache_mb == 16);
    pins = (plan_pins){.cache_mb_set = true, .cache_mb = INT64_MAX, .io_threads_set = true, .io_threads = 0};
    machine.memory_bytes = 5976 * MIB;
    machine.memory_bytes_per_s = 1e10;
    machine.read_bytes_per_s[0] = 1e9;
    CHECK(plan_make(&model, &machine, &pins, &p) == 0 && p.predicted_hit == 1);
    machine.memory_bytes = UINT64_MAX;
    CHECK(plan_make(&model, &machine, NULL, &p) == 0 && p.regime == PLAN_REGIME_FITS);
}

static void test_format(void)
{
    plan_model model = model_30b();
    plan_machine machine = machine_with(5976);
    plan p;
    CHECK(plan_make(&model, &machine, NULL, &p) == 0);
    char text[4096];
    size_t length = plan_format(&p, false, text, sizeof text);
    CHECK(length == strlen(text));
    CHECK_MSG(strcmp(text, "plan: experts-stream, no prediction: --moe-stream --cache-mb 2904 --io-threads 4 "
                           "--overlap --predict-prefetch\n") == 0,
              "[%s]", text);
    length = plan_format(&p, true, text, sizeof text);
    CHECK(length == strlen(text));
    int lines = 0;
    for (const char *c = text; *c; c++)
        lines += *c == '\n';
    CHECK(lines == 1 + p.n_decisions);
    CHECK(strstr(text, "\n  cache_mb = 2904 (derived): ") != NULL);
    /* cut short: what fits, NUL-terminated, and the whole length */
    char small[16];
    CHECK(plan_format(&p, true, small, sizeof small) == length);
    CHECK(strlen(small) == sizeof small - 1 && strncmp(small, text, sizeof small - 1) == 0);

    machine = machine_with(1000);
    CHECK(plan_make(&model, &machine, NULL, &p) == -1);
    plan_format(&p, true, text, sizeof text);
    CHECK(strncmp(text, "plan: dense-oversized: the model cannot run here", 48) == 0);
}

/* Read-ahead of the predicted experts is armed wherever a streamed token
 * has misses and overlap and a cache let a guess land: the run's gate
 * pauses it where it measures slower, whatever the probed rates (the 30B
 * shape, 5976 MiB: cache 2904 MiB, about 18 % of a token's experts missed). */
static void test_read_ahead(void)
{
    static const struct {
        const char *name;
        double memory_rate, read_rate; /* bytes/s; 0: not probed */
        plan_pins pins;
        bool want;
        plan_tag tag;
    } cases[] = {
        {"slow disk", 20e9, 0.8e9, {0}, true, PLAN_POLICY},
        {"fast disk", 20e9, 5e9, {0}, true, PLAN_POLICY},
        {"slow memory", 4e9, 0.8e9, {0}, true, PLAN_POLICY},
        {"memory not probed", 0, 0.8e9, {0}, true, PLAN_POLICY},
        {"reads not probed", 20e9, 0, {0}, true, PLAN_POLICY},
        {"read-ahead typed", 20e9, 0.8e9, {.read_ahead_set = true}, false, PLAN_OPERATOR},
        {"overlap typed off", 20e9, 0.8e9, {.overlap_set = true, .overlap = false}, false, PLAN_POLICY},
        {"not streaming typed", 20e9, 0.8e9, {.stream_set = true, .stream = false}, false, PLAN_POLICY},
        {"no cache typed", 20e9, 0.8e9, {.cache_mb_set = true, .cache_mb = 0}, false, PLAN_POLICY},
    };
    plan_model model = model_30b();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        plan_machine machine = machine_with(5976);
        machine.memory_bytes_per_s = cases[i].memory_rate;
        for (int j = 0; j < PLAN_LANE_STEPS; j++)
            machine.read_bytes_per_s[j] = cases[i].read_rate;
        plan p;
        CHECK(plan_make(&model, &machine, &cases[i].pins, &p) == 0);
        CHECK_MSG(p.predict_prefetch == cases[i].want, "%s: predict_prefetch %d", cases[i].name, p.predict_prefetch);
        CHECK_MSG((strstr(p.flags, "--predict-prefetch") != NULL) == cases[i].want, "%s: flags [%s]", cases[i].name,
                  p.flags);
        const plan_decision *d = find_decision(&p, "predict_prefetch");
        CHECK_MSG(d && d->tag == cases[i].tag && strcmp(d->value, cases[i].want ? "on" : "off") == 0,
                  "%s: decision %s (%s)", cases[i].name, d ? d->value : "missing", d ? plan_tag_name(d->tag) : "-");
    }
}

int main(void)
{
    test_table();
    test_refusal_message();
    test_lanes();
    test_prediction();
    test_read_ahead();
    test_hit_rate();
    test_names();
    test_cycle_rounding();
    test_extremes();
    test_format();
    return test_finish();
}
