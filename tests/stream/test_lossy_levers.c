/* The lossy levers (bmoe_lossy_params): their rules on hand-made router
 * numbers (route_levers.h), then each lever on the trained qwen3moe in
 * models/ (real, skewed routing) streamed through a small cache: it does
 * what its rule says to every routing the route events show, it is
 * deterministic (two loads give the same bytes), it changes nothing when
 * the cache holds every expert (drop, substitution), its counters add up;
 * route-ahead commits exactly the layers it may and its watchdog turns it
 * off on a model whose early choice is mostly wrong (the oracle's gemma4,
 * two layers early); levers without a cache and bad values are refused. */
#include <math.h>

#include "models/route_levers.h"
#include "stream_support.h"

/* ---- the rules on hand-made numbers ---- */

static void test_top_k(void)
{
    const float keys[] = {0.1f, 0.5f, 0.5f, 0.2f, -1.0f};
    int32_t experts[3];
    route_top_k(keys, 5, 3, experts);
    CHECK(experts[0] == 1 && experts[1] == 2 && experts[2] == 3); /* a tie goes to the lower index */
    const int32_t a[] = {4, 1, 7}, b[] = {7, 2, 4};
    CHECK(route_overlap(a, b, 3) == 2);
}

static void test_drop_rule(void)
{
    /* k = 4, F = 0.75: the threshold is 0.75 / 4 = 0.1875 of a routing summing to 1 */
    float weights[4] = {0.4f, 0.3f, 0.2f, 0.1f};
    bool none_cached[4] = {false, false, false, false};
    bool last_cached[4] = {false, false, false, true};
    uint8_t dropped[4];
    CHECK(route_drop(weights, last_cached, 4, 0.75f, true, dropped) == 0);
    CHECK(!dropped[0] && !dropped[1] && !dropped[2] && !dropped[3]);
    CHECK(weights[0] == 0.4f && weights[3] == 0.1f);
    CHECK(route_drop(weights, none_cached, 4, 0.75f, true, dropped) == 1);
    CHECK(!dropped[0] && !dropped[1] && !dropped[2] && dropped[3]);
    /* the survivors scaled back to the routing's total: 0.4 / 0.9 ... */
    CHECK(fabsf(weights[0] - 0.4f / 0.9f) < 1e-6f && fabsf(weights[1] - 0.3f / 0.9f) < 1e-6f &&
          fabsf(weights[2] - 0.2f / 0.9f) < 1e-6f);
    /* F = 1: 0.25 and above stay; without renormalization the weights are the router's */
    float w1[4] = {0.4f, 0.3f, 0.2f, 0.1f};
    CHECK(route_drop(w1, none_cached, 4, 1.0f, false, dropped) == 2);
    CHECK(!dropped[0] && !dropped[1] && dropped[2] && dropped[3]);
    CHECK(w1[0] == 0.4f && w1[1] == 0.3f && w1[2] == 0.2f && w1[3] == 0.1f);
    /* weights that do not sum to 1 (an unnormalized router): the threshold is a share of their total */
    float w2[2] = {0.02f, 0.1f};
    CHECK(route_drop(w2, none_cached, 2, 0.5f, true, dropped) == 1 && dropped[0] && !dropped[1]);
    CHECK(fabsf(w2[1] - 0.12f) < 1e-6f);
    /* equal weights at F = 1: nothing is strictly below the share */
    float w3[4] = {0.25f, 0.25f, 0.25f, 0.25f};
    CHECK(route_drop(w3, none_cached, 4, 1.0f, true, dropped) == 0);
    /* the top slot is never under the threshold, even where the share would take it (F above 1) */
    const float w4[2] = {0.5f, 0.5f};
    CHECK(!route_below_drop_threshold(w4, 2, 2.0f, 0) && route_below_drop_threshold(w4, 2, 2.0f, 1));
    const float w5[3] = {0.2f, 0.6f, 0.2f};
    CHECK(!route_below_drop_threshold(w5, 3, 3.0f, 1) && route_below_drop_threshold(w5, 3, 3.0f, 0));
}

static void test_substitute_rule(void)
{
    /* keys 3, 2, 1, 0: spread 3; the router's top-2 is {0, 1}; expert 2 is cached */
    bool cached[4] = {false, false, true, false};
    float keys[4] = {3.0f, 2.0f, 1.0f, 0.0f};
    int32_t experts[2] = {0, 1};
    CHECK(route_substitute(keys, cached, 4, 2, 0.3f, experts) == 0); /* 1 + 0.9 < 2 */
    CHECK(experts[0] == 0 && experts[1] == 1);
    float keys2[4] = {3.0f, 2.0f, 1.0f, 0.0f};
    CHECK(route_substitute(keys2, cached, 4, 2, 0.4f, experts) == 1); /* 1 + 1.2 > 2 */
    CHECK(experts[0] == 0 && experts[1] == 2);
    /* two cached: 2 -> 4, 3 -> 3, a tie with expert 0 that the lower index wins */
    bool cached2[4] = {false, false, true, true};
    float keys3[4] = {3.0f, 2.0f, 1.0f, 0.0f};
    int32_t experts3[2] = {0, 1};
    CHECK(route_substitute(keys3, cached2, 4, 2, 1.0f, experts3) == 1);
    CHECK(experts3[0] == 2 && experts3[1] == 0);
    /* everything cached: the same bonus for all changes no choice */
    bool all[4] = {true, true, true, true};
    float keys4[4] = {3.0f, 2.0f, 1.0f, 0.0f};
    int32_t experts4[2] = {0, 1};
    CHECK(route_substitute(keys4, all, 4, 2, 1.0f, experts4) == 0 && experts4[0] == 0 && experts4[1] == 1);
}

/* ---- the levers in the engine ---- */

#define TRAINED BMOE_MODELS_DIR "/qwen3moe-shakespeare-q8_0.gguf"
#define STEPS 80
#define MAX_USED 8

/* What one run routed: every decode route event's slots. */
typedef struct route_log {
    int n_events, n_used;
    int32_t experts[STEPS * 8][MAX_USED];
    float weights[STEPS * 8][MAX_USED];
    uint8_t residency[STEPS * 8][MAX_USED], dropped[STEPS * 8][MAX_USED];
    uint64_t read_bytes[STEPS * 8][MAX_USED];
} route_log;

static void log_route(void *user, const bmoe_route_event *e)
{
    route_log *log = user;
    if (e->batch || log->n_events >= STEPS * 8 || e->n_experts_used > MAX_USED)
        return;
    int i = log->n_events++;
    log->n_used = e->n_experts_used;
    for (int k = 0; k < e->n_experts_used; k++) {
        log->experts[i][k] = e->experts[k];
        log->weights[i][k] = e->weights[k];
        log->residency[i][k] = e->residency[k];
        log->dropped[i][k] = e->dropped ? e->dropped[k] : 0;
        log->read_bytes[i][k] = e->read_bytes[k];
    }
}

typedef struct lever_run {
    bool ok;
    char error[BMOE_ERROR_MAX];
    float logits[STEPS][4096];
    int32_t tokens[STEPS];
    bmoe_stats decode;
    route_log *log; /* may be NULL */
    bool probe;     /* the prediction probe on; its scores per layer below */
    bmoe_predict_score scores[8];
} lever_run;

static bmoe_model_params streamed(int64_t cache_mb, bmoe_lossy_params lossy)
{
    bmoe_model_params p = bmoe_model_default_params();
    p.stream.enabled = true;
    p.stream.cache_mb = cache_mb;
    p.stream.overlap = true;
    p.lossy = lossy;
    return p;
}

/* A real prompt (the held-out text's opening, as token ids of the trained
 * vocabulary: its first bytes tokenized), then STEPS greedy decode steps. */
static void lever_run_model(const char *path, const bmoe_model_params *params, int steps, lever_run *r)
{
    route_log *log = r->log;
    bool probe = r->probe;
    memset(r, 0, sizeof *r);
    r->log = log;
    r->probe = probe;
    if (log)
        memset(log, 0, sizeof *log);
    bmoe_error error = {0};
    bmoe_model *model = bmoe_model_load(path, params, &error);
    if (!model) {
        snprintf(r->error, sizeof r->error, "%s", error.message);
        return;
    }
    static const char text[] = "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.";
    int32_t prompt[128];
    int32_t n_prompt = bmoe_tokenize(model, text, sizeof text - 1, true, false, prompt, 128, &error);
    bmoe_context_params cp = bmoe_context_default_params();
    cp.n_ctx = 256;
    cp.n_threads = 2;
    cp.predict_log = r->probe;
    cp.route_callback = log ? log_route : NULL;
    cp.route_user = log;
    bmoe_context *context = n_prompt > 0 ? bmoe_context_create(model, &cp, &error) : NULL;
    int32_t n_vocab = bmoe_model_n_vocab(model);
    bool ok = context && n_vocab <= 4096;
    float *row = NULL;
    if (ok) {
        row = calloc((size_t)n_vocab, sizeof *row);
        ok = row && bmoe_eval(context, prompt, n_prompt, row, false, NULL, &error) == 0;
    }
    for (int s = 0; ok && s < steps; s++) {
        int32_t next = 0;
        for (int v = 1; v < n_vocab; v++)
            if (row[v] > row[next])
                next = v;
        r->tokens[s] = next;
        bmoe_stats step;
        ok = bmoe_eval(context, &next, 1, row, false, &step, &error) == 0;
        memcpy(r->logits[s], row, (size_t)n_vocab * sizeof *row);
        bmoe_stats_add(&r->decode, &step);
    }
    for (int il = 0; ok && probe && il < 8 && il < bmoe_model_n_layer(model); il++)
        ok = bmoe_context_predict_log(context, il, &r->scores[il]) == 0;
    if (!ok)
        snprintf(r->error, sizeof r->error, "%s", error.message);
    r->ok = ok;
    free(row);
    bmoe_context_free(context);
    bmoe_model_free(model);
}

static bool same_run(const lever_run *a, const lever_run *b, int steps)
{
    return a->ok && b->ok && memcmp(a->tokens, b->tokens, (size_t)steps * sizeof a->tokens[0]) == 0 &&
           memcmp(a->logits, b->logits, (size_t)steps * sizeof a->logits[0]) == 0;
}

static lever_run run_a, run_b, run_exact;
static route_log log_a;

/* With every expert in the cache, drop and substitution have nothing to
 * act on: the run is the exact one, byte for byte. */
static void test_everything_cached(void)
{
    bmoe_model_params exact = bmoe_model_default_params();
    lever_run_model(TRAINED, &exact, STEPS, &run_exact);
    CHECK_MSG(run_exact.ok, "%s", run_exact.error);
    bmoe_lossy_params drop = {.drop_cold_frac = 1.0f};
    bmoe_model_params p = streamed(64, drop);
    p.stream.load_all = true;
    lever_run_model(TRAINED, &p, STEPS, &run_a);
    CHECK_MSG(same_run(&run_a, &run_exact, STEPS), "drop 1.0 with every expert cached: %s", run_a.error);
    CHECK(run_a.decode.experts_dropped == 0 && run_a.decode.experts_routed == STEPS * 6 * 4);
    bmoe_lossy_params substitute = {.substitute_lambda = 1.0f};
    p = streamed(64, substitute);
    p.stream.load_all = true;
    lever_run_model(TRAINED, &p, STEPS, &run_a);
    CHECK_MSG(same_run(&run_a, &run_exact, STEPS), "substitute 1.0 with every expert cached: %s", run_a.error);
    CHECK(run_a.decode.experts_reranked == STEPS * 6 * 4 && run_a.decode.experts_substituted == 0);
}

static void test_drop(void)
{
    bmoe_lossy_params none = {0};
    bmoe_model_params p = streamed(2, none);
    lever_run_model(TRAINED, &p, STEPS, &run_exact);
    CHECK_MSG(same_run(&run_exact, &run_exact, STEPS), "%s", run_exact.error);
    bmoe_lossy_params drop = {.drop_cold_frac = 0.75f, .drop_no_renorm = true};
    p = streamed(2, drop);
    run_a.log = &log_a;
    lever_run_model(TRAINED, &p, STEPS, &run_a);
    run_b.log = NULL;
    lever_run_model(TRAINED, &p, STEPS, &run_b);
    CHECK_MSG(same_run(&run_a, &run_b, STEPS), "drop is not deterministic: %s", run_a.error);
    CHECK(run_a.decode.experts_dropped > 0 && run_a.decode.experts_dropped == run_b.decode.experts_dropped);
    CHECK(run_a.decode.read_bytes < run_exact.decode.read_bytes);
    /* every routing the events show follows the rule: a dropped slot was not
     * the top one, weighed under 0.75 / k of the routing (no renorm: the
     * router's weights), read nothing, and the counters agree */
    uint64_t dropped = 0;
    int n_used = log_a.n_used;
    CHECK_MSG(log_a.n_events == STEPS * 6 && n_used == 4, "%d events of %d", log_a.n_events, n_used);
    for (int i = 0; i < log_a.n_events; i++) {
        double total = 0.0;
        int top = 0;
        for (int k = 0; k < n_used; k++) {
            total += log_a.weights[i][k];
            top = log_a.weights[i][k] > log_a.weights[i][top] ? k : top;
        }
        for (int k = 0; k < n_used; k++) {
            if (!log_a.dropped[i][k])
                continue;
            dropped++;
            CHECK(k != top && log_a.weights[i][k] < 0.75 * total / n_used);
            CHECK(log_a.residency[i][k] == 0 && log_a.read_bytes[i][k] == 0);
        }
    }
    CHECK_MSG(dropped == run_a.decode.experts_dropped, "events %llu, counter %llu", (unsigned long long)dropped,
              (unsigned long long)run_a.decode.experts_dropped);
    /* renormalized: each routing with a drop sums to 1 over its survivors */
    drop.drop_no_renorm = false;
    p = streamed(2, drop);
    run_b.log = &log_a;
    lever_run_model(TRAINED, &p, STEPS, &run_b);
    CHECK(run_b.ok && run_b.decode.experts_dropped > 0);
    int checked = 0;
    for (int i = 0; i < log_a.n_events; i++) {
        double kept = 0.0;
        int n_dropped = 0;
        for (int k = 0; k < n_used; k++) {
            kept += log_a.dropped[i][k] ? 0.0 : log_a.weights[i][k];
            n_dropped += log_a.dropped[i][k];
        }
        if (n_dropped > 0) {
            checked++;
            CHECK_MSG(fabs(kept - 1.0) < 1e-5, "survivors sum to %g", kept);
        }
    }
    CHECK(checked > 0);
    run_b.log = NULL;
}

static void test_substitute(void)
{
    bmoe_lossy_params substitute = {.substitute_lambda = 0.15f};
    bmoe_model_params p = streamed(2, substitute);
    lever_run_model(TRAINED, &p, STEPS, &run_a);
    lever_run_model(TRAINED, &p, STEPS, &run_b);
    CHECK_MSG(same_run(&run_a, &run_b, STEPS), "substitution is not deterministic: %s", run_a.error);
    CHECK(run_a.decode.experts_reranked == STEPS * 6 * 4);
    CHECK(run_a.decode.experts_substituted > 0 && run_a.decode.experts_substituted < run_a.decode.experts_reranked);
    /* steered to what the cache holds: more hits, fewer bytes than the exact run on the same cache */
    bmoe_lossy_params none = {0};
    p = streamed(2, none);
    lever_run_model(TRAINED, &p, STEPS, &run_exact);
    double hit = (double)run_a.decode.cache_hits / (double)(run_a.decode.cache_hits + run_a.decode.cache_misses);
    double hit_exact = (double)run_exact.decode.cache_hits /
                       (double)(run_exact.decode.cache_hits + run_exact.decode.cache_misses);
    CHECK_MSG(hit > hit_exact && run_a.decode.read_bytes < run_exact.decode.read_bytes, "hit %.3f vs %.3f", hit,
              hit_exact);
}

static void test_route_ahead(void)
{
    bmoe_lossy_params ahead = {.route_ahead = 1};
    bmoe_model_params p = streamed(4, ahead);
    lever_run_model(TRAINED, &p, STEPS, &run_a);
    lever_run_model(TRAINED, &p, STEPS, &run_b);
    CHECK_MSG(same_run(&run_a, &run_b, STEPS), "route-ahead is not deterministic: %s", run_a.error);
    /* six MoE layers: the first keeps the router's choice, the other five commit, every step */
    CHECK(run_a.decode.ra_committed == STEPS * 5 && run_a.decode.ra_passthrough == STEPS);
    CHECK(run_a.decode.ra_slots == STEPS * 5 * 4 && run_a.decode.ra_disarmed == 0);
    CHECK(2 * run_a.decode.ra_agree_slots > run_a.decode.ra_slots);
    CHECK(run_a.decode.prefetched > 0 && run_a.decode.prefetch_useful * 10 >= run_a.decode.prefetched * 9);
    /* two layers early: four commit */
    ahead.route_ahead = 2;
    p = streamed(4, ahead);
    lever_run_model(TRAINED, &p, STEPS, &run_a);
    CHECK(run_a.ok && run_a.decode.ra_committed == STEPS * 4 && run_a.decode.ra_passthrough == STEPS * 2);
}

/* gemma4's tiny oracle model chooses two layers early on under half the
 * slots: after 256 committed slots (64 steps of 4) the watchdog turns the
 * lever off, and every later routing is the router's. */
static void test_watchdog(void)
{
    char path[1024];
    test_shared_path(path, sizeof path, "oracle/models/gemma4-tiny-f32.gguf");
    bmoe_lossy_params ahead = {.route_ahead = 2};
    bmoe_model_params p = streamed(1, ahead);
    lever_run_model(path, &p, STEPS, &run_a);
    CHECK_MSG(run_a.ok, "%s", run_a.error);
    CHECK_MSG(run_a.decode.ra_disarmed == 1, "committed %llu passed %llu slots %llu agree %llu", (unsigned long long)run_a.decode.ra_committed, (unsigned long long)run_a.decode.ra_passthrough, (unsigned long long)run_a.decode.ra_slots, (unsigned long long)run_a.decode.ra_agree_slots);
    CHECK(run_a.decode.ra_slots == 256 && run_a.decode.ra_committed == 64);
    CHECK(2 * run_a.decode.ra_agree_slots < run_a.decode.ra_slots);
    /* three MoE layers (layer 0 is dense), the last commits each step until the trip; everything after
     * passes through */
    CHECK(run_a.decode.ra_committed + run_a.decode.ra_passthrough == STEPS * 3);
}

/* The prediction probe changes no output, scores every decode routing
 * (the stale gate all but the first MoE layer's, the previous token all but
 * the first step's), and its control, the same router on the same input,
 * names every routing whole. */
static void test_predict_log(void)
{
    bmoe_model_params p = bmoe_model_default_params();
    lever_run_model(TRAINED, &p, STEPS, &run_exact);
    run_a.probe = true;
    lever_run_model(TRAINED, &p, STEPS, &run_a);
    run_a.probe = false;
    CHECK_MSG(same_run(&run_a, &run_exact, STEPS), "the probe changed the output: %s", run_a.error);
    uint64_t stale_hits = 0, stale_slots = 0;
    for (int il = 0; il < 6; il++) {
        const bmoe_predict_score *s = &run_a.scores[il];
        CHECK(s->rows[BMOE_PREDICT_CONTROL] == STEPS && s->exact[BMOE_PREDICT_CONTROL] == STEPS &&
              s->slot_hits[BMOE_PREDICT_CONTROL] == STEPS * 4);
        CHECK(s->rows[BMOE_PREDICT_PREVIOUS] == STEPS - 1 && s->slots[BMOE_PREDICT_PREVIOUS] == (STEPS - 1) * 4);
        CHECK(il == 0 ? s->rows[BMOE_PREDICT_STALE] == 0 && s->unranked == STEPS
                      : s->rows[BMOE_PREDICT_STALE] == STEPS && s->unranked == 0);
        CHECK(s->slot_hits[BMOE_PREDICT_PREVIOUS] <= s->slots[BMOE_PREDICT_PREVIOUS]);
        stale_hits += s->slot_hits[BMOE_PREDICT_STALE];
        stale_slots += s->slots[BMOE_PREDICT_STALE];
    }
    /* a trained model's next layer is foretold by far more than chance (4 of 32: 12.5 %) */
    CHECK_MSG(stale_hits * 2 > stale_slots, "stale gate %llu of %llu", (unsigned long long)stale_hits,
              (unsigned long long)stale_slots);
}

static void test_refusals(void)
{
    bmoe_error error = {0};
    struct {
        bmoe_lossy_params lossy;
        int64_t cache_mb; /* -2: resident */
        bool predict;
        const char *says;
    } cases[] = {
        {{.drop_cold_frac = 0.5f}, -2, false, "needs an expert cache"},
        {{.drop_cold_frac = 0.5f}, 0, false, "needs an expert cache"},
        {{.substitute_lambda = 0.1f}, 0, false, "needs an expert cache"},
        {{.route_ahead = 1}, -2, false, "needs an expert cache"},
        {{.drop_cold_frac = 1.5f}, 4, false, "outside 0..1"},
        {{.drop_cold_frac = NAN}, 4, false, "outside 0..1"},
        {{.substitute_lambda = -0.1f}, 4, false, "outside 0..1"},
        {{.route_ahead = 9}, 4, false, "outside 0..8"},
        {{.route_ahead = 1}, 4, true, "excludes"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bmoe_model_params p = cases[i].cache_mb == -2 ? bmoe_model_default_params()
                                                      : streamed(cases[i].cache_mb, cases[i].lossy);
        p.lossy = cases[i].lossy;
        p.stream.predict_prefetch = cases[i].predict;
        bmoe_model *model = bmoe_model_load(TRAINED, &p, &error);
        CHECK_MSG(!model && strstr(error.message, cases[i].says), "case %zu: %s", i, error.message);
        bmoe_model_free(model);
    }
}

int main(void)
{
    test_top_k();
    test_drop_rule();
    test_substitute_rule();
    test_everything_cached();
    test_drop();
    test_substitute();
    test_route_ahead();
    test_watchdog();
    test_predict_log();
    test_refusals();
    return test_finish();
}
