/* The mixture-of-experts layer (architectures.md 1.9): the router, whose
 * choice for each (token, layer) is made in moe_layer's first step and
 * nowhere else, with the lossy levers that change it (the route callback
 * attaches there), then the experts. Tokens are grouped by
 * expert with a counting sort so each selected expert runs once over all its
 * tokens; gate and up of every selected expert form one parallel step, downs
 * another. Each token's output is the sum of its experts' weighted outputs in
 * selection order, so it does not depend on the other tokens of the batch. */
#include <math.h>
#include <string.h>
#include <time.h>

#include "../quant/quant.h"
#include "../stream/expert_store.h"
#include "model.h"
#include "route_levers.h"

/* The router's scores from its logits, in place. */
static void gate_scores(const moe_config *config, float *logits, int n_expert)
{
    if (config->gating == MOE_GATING_SOFTMAX)
        softmax(logits, n_expert);
    else if (config->gating == MOE_GATING_SIGMOID)
        sigmoid(logits, n_expert);
    else if (config->gating == MOE_GATING_SQRT_SOFTPLUS)
        for (int e = 0; e < n_expert; e++)
            logits[e] = sqrtf(softplus(logits[e]));
}

/* What the top-k ranks: the score plus the selection bias, when there is one. */
static void rank_keys(const float *scores, const float *selection_bias, int n_expert, float *keys)
{
    for (int e = 0; e < n_expert; e++)
        keys[e] = selection_bias ? scores[e] + selection_bias[e] : scores[e];
}

/* The weights of the chosen experts from the router's scores, whoever chose
 * them (the router, a replay or a lever). */
static void route_weights(const moe_config *config, const float *scores, int n_used, const int32_t *experts,
                          float *weights)
{
    for (int k = 0; k < n_used; k++)
        weights[k] = scores[experts[k]];
    if (config->gating == MOE_GATING_SOFTMAX_WEIGHT)
        softmax(weights, n_used);
    if (config->normalize_weights) {
        double sum = 0.0;
        for (int k = 0; k < n_used; k++)
            sum += weights[k];
        float total = (float)sum;
        if (total < 6.103515625e-5f) /* 2^-14 floor */
            total = 6.103515625e-5f;
        for (int k = 0; k < n_used; k++)
            weights[k] /= total;
    }
    if (config->weights_scale != 0.0f && config->weights_scale != 1.0f)
        for (int k = 0; k < n_used; k++)
            weights[k] *= config->weights_scale;
}

moe_config model_moe_config(const model_hparams *hp)
{
    return (moe_config){
        .gating = hp->expert_gating_func == EXPERT_GATING_SOFTMAX ? MOE_GATING_SOFTMAX : MOE_GATING_SIGMOID,
        .normalize_weights = hp->expert_weights_norm,
        .weights_scale = hp->expert_weights_scale,
        .activation = MOE_SILU_GLU,
    };
}

void moe_select_experts(const float *keys, int n_expert, int n_used, int n_group, int n_group_used,
                        int32_t *experts)
{
    if (n_group <= 1) {
        route_top_k(keys, n_expert, n_used, experts);
        return;
    }
    int per_group = n_expert / n_group;
    float group_keys[MODEL_MAX_EXPERTS];
    for (int g = 0; g < n_group; g++) {
        int32_t best[2];
        route_top_k(keys + g * per_group, per_group, 2, best);
        group_keys[g] = keys[g * per_group + best[0]] + keys[g * per_group + best[1]];
    }
    int32_t groups[MODEL_MAX_EXPERTS];
    route_top_k(group_keys, n_group, n_group_used, groups);
    /* the experts of the groups left out rank below every eligible one */
    float masked[MODEL_MAX_EXPERTS];
    for (int e = 0; e < n_expert; e++)
        masked[e] = -INFINITY;
    for (int k = 0; k < n_group_used; k++)
        memcpy(masked + groups[k] * per_group, keys + groups[k] * per_group, (size_t)per_group * sizeof *masked);
    route_top_k(masked, n_expert, n_used, experts);
}

/* The router's choice from one row of scores (and the selection bias). */
static void select_by_keys(const model_hparams *hp, const float *scores, const float *selection_bias,
                           int32_t *experts)
{
    float keys[MODEL_MAX_EXPERTS];
    rank_keys(scores, selection_bias, hp->n_expert, keys);
    moe_select_experts(keys, hp->n_expert, hp->n_expert_used, hp->n_expert_group, hp->n_expert_group_used,
                       experts);
}

/* The router's own choice for one row of logits (scores left in place). */
static void route_by_router(const moe_config *config, const model_hparams *hp, float *logits,
                            const float *selection_bias, int32_t *experts)
{
    gate_scores(config, logits, hp->n_expert);
    select_by_keys(hp, logits, selection_bias, experts);
}

/* A replayed routing must name distinct experts of the layer. */
static bool valid_override(const int32_t *experts, int n_used, int n_expert)
{
    for (int k = 0; k < n_used; k++) {
        if (experts[k] < 0 || experts[k] >= n_expert)
            return false;
        for (int j = 0; j < k; j++)
            if (experts[j] == experts[k])
                return false;
    }
    return true;
}

/* Tells the route callback what each token of the batch routed to, and
 * whether each expert was in the cache; an expert's read bytes go with its
 * first routing in the batch. */
static void report_routes(run_state *s, int layer, const int32_t *positions, int n_tokens, int n_used)
{
    for (int t = 0; t < n_tokens; t++) {
        const int32_t *experts = s->selected + t * n_used;
        const uint8_t *dropped = s->slot_dropped + t * n_used;
        for (int k = 0; k < n_used; k++) {
            s->slot_residency[k] = dropped[k] ? 0 : s->expert_residency[experts[k]];
            s->slot_read_bytes[k] = dropped[k] ? 0 : s->expert_read_bytes[experts[k]];
            if (!dropped[k])
                s->expert_read_bytes[experts[k]] = 0;
        }
        bmoe_route_event event = {
            .layer = layer,
            .position = positions[t],
            .n_experts_used = n_used,
            .experts = experts,
            .weights = s->selected_weights + t * n_used,
            .residency = s->slot_residency,
            .read_bytes = s->slot_read_bytes,
            .dropped = dropped,
            .batch = !s->single_token,
        };
        s->route_callback(s->route_user, &event);
    }
}

/* Converts x once per activation format of the n_matrices (gate and up, or
 * the fused gate_up), then lays the rows out in expert order. Returns the
 * gathered buffer used by each matrix. */
static void gather_inputs(run_state *s, const tensor_view *const *matrices, int n_matrices, const float *x,
                          int n_tokens, int64_t n_embd, int n_rows, const uint8_t **inputs, size_t *strides)
{
    uint32_t first_format = 0;
    for (int i = 0; i < n_matrices; i++) {
        uint32_t format = quant_format_of(matrices[i]->type)->activation_type;
        size_t bytes = activation_row_bytes(matrices[i]->type, n_embd);
        strides[i] = bytes;
        if (i == 1 && format == first_format) {
            inputs[1] = inputs[0];
            continue;
        }
        first_format = format;
        for (int t = 0; t < n_tokens; t++)
            activation_convert(s->kernels, matrices[i]->type, x + (int64_t)t * n_embd, n_embd,
                               s->activations[i] + (size_t)t * bytes);
        for (int r = 0; r < n_rows; r++)
            memcpy(s->expert_inputs[i] + (size_t)r * bytes,
                   s->activations[i] + (size_t)s->sorted_token[r] * bytes, bytes);
        inputs[i] = s->expert_inputs[i];
    }
}

void moe_clamp_glu_inputs(float *gate, float *up, int64_t n, float limit)
{
    for (int64_t i = 0; i < n; i++) {
        gate[i] = fminf(gate[i], limit);
        up[i] = fminf(fmaxf(up[i], -limit), limit);
    }
}

/* gate = act(gate) * up for n values (up is clamped in place by the clamped activation). */
static void glu(const moe_config *config, float *gate, float *up, int64_t n)
{
    if (config->activation == MOE_SWIGLU_OAI) {
        swiglu_oai(gate, gate, up, n, 1.702f, 7.0f);
    } else if (config->activation == MOE_GELU_GLU) {
        gelu_glu_f16(gate, gate, up, n);
    } else {
        if (config->activation == MOE_SILU_GLU_CLAMPED)
            moe_clamp_glu_inputs(gate, up, n, config->clamp);
        silu_glu(gate, gate, up, n);
    }
}

static matmul_job expert_job(const tensor_view *w, const uint8_t *weights, void *ready, const uint8_t *inputs,
                             size_t stride, int first, int count, float *out)
{
    return (matmul_job){
        .weights = weights,
        .type = w->type,
        .n_in = w->ne[0],
        .n_out = w->ne[1],
        .weight_row_bytes = w->row_bytes,
        .activations = inputs + (size_t)first * stride,
        .activation_stride = stride,
        .n_tokens = count,
        .out = out + (int64_t)first * w->ne[1],
        .out_stride = w->ne[1],
        .ready = ready,
    };
}

/* Multiplies the expert's rows (n floats) by element e of a per-expert scale {E}. */
static void scale_expert_rows(const tensor_view *scale, int expert, float *rows, int64_t n, int first, int count)
{
    if (!scale->data)
        return;
    float factor = ((const float *)scale->data)[expert];
    for (int r = first; r < first + count; r++)
        vector_scale(rows + (int64_t)r * n, rows + (int64_t)r * n, factor, n);
}

/* Adds row e of a per-expert bias {n, E} to each of the expert's rows. */
static void add_expert_bias(const tensor_view *bias, int expert, float *rows, int first, int count)
{
    if (!bias->data)
        return;
    int64_t n = bias->ne[0];
    const float *b = (const float *)bias->data + (int64_t)expert * n;
    for (int r = first; r < first + count; r++)
        vector_add(rows + (int64_t)r * n, b, n);
}

/* The n-th MoE layer after layer (n >= 1), or -1. */
static int moe_layer_ahead(const model *m, int layer, int n)
{
    for (int l = layer + 1; l < m->hparams.n_layer; l++)
        if (m->weights.layers[l].ffn_gate_inp.name && --n == 0)
            return l;
    return -1;
}

/* The experts with rows, those with the most first (ties: the lower
 * index), into selected; returns how many. Streaming reads a batch's
 * experts in this order, so the largest share of the compute can start
 * while the rest is read and what is left after the last read is small;
 * resident, the longest jobs go first and the threads finish together.
 * Each expert's rows depend on that expert alone: the order changes no bit. */
static int most_used_first(const int32_t *expert_count, int n_expert, int32_t *selected)
{
    int n = 0;
    for (int e = 0; e < n_expert; e++) {
        if (expert_count[e] == 0)
            continue;
        int i = n++;
        for (; i > 0 && expert_count[selected[i - 1]] < expert_count[e]; i--)
            selected[i] = selected[i - 1];
        selected[i] = e;
    }
    return n;
}

/* Layer's router applied to n_rows rows of input: their scores, a row of
 * n_expert each. */
static void score_with_router(run_state *s, const model *m, const moe_config *config, int layer, const float *input,
                              int n_rows, float *scores)
{
    const layer_weights *weights = &m->weights.layers[layer];
    const tensor_view *router = &weights->ffn_gate_inp;
    float *out = scores;
    linear(s, input, m->hparams.n_embd, n_rows, 1, &router, &out, NULL);
    add_bias(scores, &weights->ffn_gate_inp_bias, n_rows, m->hparams.n_expert);
    for (int r = 0; r < n_rows; r++)
        gate_scores(config, scores + (int64_t)r * m->hparams.n_expert, m->hparams.n_expert);
}

/* Layer's router applied to one row of input: its scores and its top-k. */
static void rank_with_router(run_state *s, const model *m, const moe_config *config, int layer, const float *input,
                             float *scores, int32_t *experts)
{
    score_with_router(s, m, config, layer, input, 1, scores);
    select_by_keys(&m->hparams, scores, m->weights.layers[layer].exp_probs_b.data, experts);
}

/* Layer's routing of position as a replay gives it, when one does. */
static bool replayed_routing(run_state *s, const model *m, int layer, int32_t position, int32_t *experts)
{
    const model_hparams *hp = &m->hparams;
    return s->route_override &&
           s->route_override(s->route_override_user, layer, position, hp->n_expert_used, experts) &&
           valid_override(experts, hp->n_expert_used, hp->n_expert);
}

/* A benchmark's guess of layer's routing of position (route_guess), or under
 * a replayed routing without one the replayed choice itself. */
static bool guessed_routing(run_state *s, const model *m, int layer, int32_t position, int32_t *experts)
{
    if (!s->route_guess)
        return replayed_routing(s, m, layer, position, experts);
    const model_hparams *hp = &m->hparams;
    return s->route_guess(s->route_guess_user, layer, position, hp->n_expert_used, experts) &&
           valid_override(experts, hp->n_expert_used, hp->n_expert);
}

/* Predictive prefetch (expert_store_prefetch) for a decode step: the next
 * MoE layer's router applied to this layer's router input ranks the experts
 * that layer is likely to route to, and the store reads the best of those it
 * lacks while this layer computes. Under a replayed routing the next layer's
 * choice is known already: the guess is that choice itself, a predictor that
 * is never wrong, so a benchmark can measure what prediction one layer ahead
 * could give at best (or a benchmark's guess of a chosen accuracy). Called
 * once this layer's own reads are queued, so they go first. Changes no bit
 * of the output: only what is read ahead. */
static void predict_next_layer(run_state *s, const model *m, const moe_config *config, int layer_index,
                               const float *router_input, int32_t position)
{
    const model_hparams *hp = &m->hparams;
    int next = moe_layer_ahead(m, layer_index, 1);
    if (next < 0)
        return;
    int32_t experts[MODEL_MAX_EXPERTS];
    if (!guessed_routing(s, m, next, position, experts)) {
        float scores[MODEL_MAX_EXPERTS];
        rank_with_router(s, m, config, next, router_input, scores, experts);
    }
    expert_store_prefetch(m->experts, next, experts, hp->n_expert_used, expert_store_predict_max(m->experts));
}

/* ---- The lossy levers (bmoe_lossy_params) ------------------------------
 * Each changes which experts a token uses, never how they are computed;
 * with every lever at 0 none of this runs. */

static double now_ms(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec * 1e3 + (double)now.tv_nsec * 1e-6;
}

/* Drop (route_drop) with the cache's answer for each selection. */
static void drop_cold(const model *m, int layer, int n_used, const int32_t *experts, float *weights,
                      uint8_t *dropped, bmoe_stats *counters)
{
    bool cached[MODEL_MAX_EXPERTS];
    for (int k = 0; k < n_used; k++)
        cached[k] = expert_store_holds(m->experts, layer, experts[k]);
    counters->experts_dropped += (uint64_t)route_drop(weights, cached, n_used, m->lossy.drop_cold_frac,
                                                      !m->lossy.drop_no_renorm, dropped);
}

/* Substitution (route_substitute). A softmax router ranks in
 * log-probability space, where the logits differ from the log-probabilities
 * by one constant; other routers rank their scores plus any selection bias.
 * A grouped router's group limit does not bind the lever: a cached expert
 * of any group may stand in, as its rule ranks every expert. */
static void substitute_cached(const model *m, int layer, const moe_config *config, const float *logits,
                              const float *scores, const float *selection_bias, int32_t *experts,
                              bmoe_stats *counters)
{
    int n_expert = m->hparams.n_expert, n_used = m->hparams.n_expert_used;
    float keys[MODEL_MAX_EXPERTS];
    bool cached[MODEL_MAX_EXPERTS];
    if (config->gating == MOE_GATING_SOFTMAX && !selection_bias)
        memcpy(keys, logits, (size_t)n_expert * sizeof *keys);
    else
        rank_keys(scores, selection_bias, n_expert, keys);
    for (int e = 0; e < n_expert; e++)
        cached[e] = expert_store_holds(m->experts, layer, e);
    counters->experts_reranked += (uint64_t)n_used;
    counters->experts_substituted +=
        (uint64_t)route_substitute(keys, cached, n_expert, n_used, m->lossy.substitute_lambda, experts);
}

/* Route-ahead's watchdog: once this many committed slots were compared, a
 * choice that agrees with the router on under half of them turns the lever
 * off (an early layer's input that says little about a later routing). */
#define AHEAD_WATCH_MIN_SLOTS 256

/* Route-ahead at the source layer: the MoE layer route_ahead MoE layers on
 * ranks this layer's router input with its own router; that choice is kept
 * for it, and what of it the cache lacks is read from now on (all of it:
 * the layer will use it), but for what the drop lever would skip. Under a
 * replayed routing the choice is the replay's, as in predict_next_layer. */
static void route_ahead_choose(run_state *s, const model *m, const moe_config *config, int layer,
                               const float *router_input, int32_t position, bmoe_stats *counters)
{
    const model_hparams *hp = &m->hparams;
    int target = moe_layer_ahead(m, layer, m->lossy.route_ahead);
    if (target < 0)
        return;
    int n_used = hp->n_expert_used;
    int32_t *experts = s->ahead_experts + (size_t)target * (size_t)n_used;
    double start = now_ms();
    float scores[MODEL_MAX_EXPERTS], weights[MODEL_MAX_EXPERTS];
    int32_t ranked[MODEL_MAX_EXPERTS];
    rank_with_router(s, m, config, target, router_input, scores, ranked);
    if (!replayed_routing(s, m, target, position, experts))
        memcpy(experts, ranked, (size_t)n_used * sizeof *experts);
    s->ahead_ready[target] = true;
    double chosen = now_ms();
    counters->ra_gemv_ms += chosen - start;
    route_weights(config, scores, n_used, experts, weights);
    int32_t wanted[MODEL_MAX_EXPERTS];
    int n_wanted = 0;
    for (int k = 0; k < n_used; k++)
        if (m->lossy.drop_cold_frac <= 0.0f ||
            !route_below_drop_threshold(weights, n_used, m->lossy.drop_cold_frac, k))
            wanted[n_wanted++] = experts[k];
    expert_store_prefetch(m->experts, target, wanted, n_wanted, n_wanted);
    counters->ra_issue_ms += now_ms() - chosen;
}

/* Route-ahead at the layer the choice was made for: it replaces the
 * router's, which the watchdog compares it with. */
static void route_ahead_commit(run_state *s, int layer, int n_used, int32_t *experts, bmoe_stats *counters)
{
    if (!s->ahead_ready[layer]) {
        counters->ra_passthrough++;
        return;
    }
    double start = now_ms();
    s->ahead_ready[layer] = false;
    const int32_t *early = s->ahead_experts + (size_t)layer * (size_t)n_used;
    int agree = route_overlap(early, experts, n_used);
    memcpy(experts, early, (size_t)n_used * sizeof *experts);
    counters->ra_committed++;
    counters->ra_slots += (uint64_t)n_used;
    counters->ra_agree_slots += (uint64_t)agree;
    s->ahead_watch_slots += (uint64_t)n_used;
    s->ahead_watch_agree += (uint64_t)agree;
    if (s->ahead_watch_slots >= AHEAD_WATCH_MIN_SLOTS && 2 * s->ahead_watch_agree < s->ahead_watch_slots) {
        s->ahead_disarmed = true;
        counters->ra_disarmed = 1;
    }
    counters->ra_wd_ms += now_ms() - start;
}

/* ---- The prediction probe (bmoe_context_predict_log) ---- */

/* One predictor's guess scored against the router's choice. */
static void probe_score(bmoe_predict_score *score, int predictor, const int32_t *guess, const int32_t *chosen,
                        int n_used)
{
    int hits = route_overlap(guess, chosen, n_used);
    score->rows[predictor]++;
    score->slots[predictor] += (uint64_t)n_used;
    score->slot_hits[predictor] += (uint64_t)hits;
    score->exact[predictor] += hits == n_used;
}

/* Scores the three predictors on a decode step's routing at layer (the
 * router's own choice), then keeps what the next layer and the next step
 * predict from. */
static void probe_decode_routing(run_state *s, const model *m, const moe_config *config, int layer,
                                 const float *router_input, const int32_t *chosen)
{
    int n_used = m->hparams.n_expert_used;
    bmoe_predict_score *score = &s->probe[layer];
    int32_t guess[MODEL_MAX_EXPERTS];
    float scores[MODEL_MAX_EXPERTS];
    if (moe_layer_ahead(m, -1, 1) == layer)
        s->probe_input_layer = -1; /* a new step */
    if (s->probe_input_layer >= 0) {
        rank_with_router(s, m, config, layer, s->probe_input, scores, guess);
        probe_score(score, BMOE_PREDICT_STALE, guess, chosen, n_used);
    } else {
        score->unranked++;
    }
    int32_t *previous = s->probe_previous + (size_t)layer * (size_t)n_used;
    if (s->probe_previous_ready[layer])
        probe_score(score, BMOE_PREDICT_PREVIOUS, previous, chosen, n_used);
    rank_with_router(s, m, config, layer, router_input, scores, guess);
    probe_score(score, BMOE_PREDICT_CONTROL, guess, chosen, n_used);
    memcpy(previous, chosen, (size_t)n_used * sizeof *previous);
    s->probe_previous_ready[layer] = true;
    memcpy(s->probe_input, router_input, (size_t)m->hparams.n_embd * sizeof *s->probe_input);
    s->probe_input_layer = layer;
}

/* A prompt's micro-batch, where reading the next layer's experts ahead
 * pays: a verify batch of speculative decoding (at most 9 tokens) routes
 * too few tokens for its union to be foretold. */
#define PREFILL_AHEAD_MIN_TOKENS 16

/* The next MoE layer's experts for a prompt's micro-batch, read while this
 * layer computes: that layer's router on each token's input to this one
 * (the stale gate; across a batch, the union it predicts is most of what
 * the layer then routes to), those most tokens choose first, read behind
 * this layer's own reads at the lanes' full depth (a guess that pays this
 * often is worth reading whole; the wrong ones stay cached, cold). Uses the
 * router's scores buffer, free once this layer's routing is chosen. Changes
 * no bit of the output. */
static void predict_next_layer_batch(run_state *s, const model *m, const moe_config *config, int layer_index,
                                     const float *router_input, int n_tokens)
{
    const model_hparams *hp = &m->hparams;
    int next = moe_layer_ahead(m, layer_index, 1);
    if (next < 0)
        return;
    score_with_router(s, m, config, next, router_input, n_tokens, s->router_logits);
    int32_t count[MODEL_MAX_EXPERTS] = {0};
    for (int t = 0; t < n_tokens; t++) {
        int32_t experts[MODEL_MAX_EXPERTS];
        select_by_keys(hp, s->router_logits + (int64_t)t * hp->n_expert, m->weights.layers[next].exp_probs_b.data,
                       experts);
        for (int k = 0; k < hp->n_expert_used; k++)
            count[experts[k]]++;
    }
    int32_t order[MODEL_MAX_EXPERTS];
    int n = most_used_first(count, hp->n_expert, order);
    expert_store_read_ahead(m->experts, next, order, n);
}

/* What is read ahead once a layer's own reads are queued: for a decode
 * step, the route-ahead choice N layers on or the predicted next layer; for
 * a prompt's micro-batch, the next layer's predicted union. */
static void read_ahead(run_state *s, const model *m, const moe_config *config, int layer_index,
                       const float *router_input, int n_tokens, int32_t position, bmoe_stats *counters)
{
    if (n_tokens > 1)
        predict_next_layer_batch(s, m, config, layer_index, router_input, n_tokens);
    else if (m->lossy.route_ahead > 0 && s->ahead_experts && !s->ahead_disarmed)
        route_ahead_choose(s, m, config, layer_index, router_input, position, counters);
    else if (!s->predict_paused && expert_store_predict_max(m->experts) > 0)
        predict_next_layer(s, m, config, layer_index, router_input, position);
}

/* The layout of a layer's expert matrices. fused: one gate_up matrix whose
 * rows are the gate's then the up's, each token's row of both in one row of
 * expert_gate; the down projection is then the store's second matrix
 * instead of its third. */
typedef struct expert_matrices {
    const tensor_view *gate, *up, *down;
    bool fused;
    int64_t n_ff, gate_stride;
    int down_index;
} expert_matrices;

/* Gate and up as one parallel step, the activation, down as another, for
 * the experts group[order[0..n)]; returns the jobs skipped because their
 * bytes never arrived (then down is not run). */
static int64_t run_experts(run_state *s, const layer_weights *layer, const moe_config *config,
                           const expert_matrices *mx, const int32_t *group, const int *order, int n,
                           const expert_handle *handles, const uint8_t *const *inputs, const size_t *strides,
                           const matmul_waiter *waiter)
{
    int n_jobs = 0;
    for (int k = 0; k < n; k++) {
        const expert_handle *h = &handles[order[k]];
        int e = group[order[k]], first = s->expert_first[e], count = s->expert_count[e];
        s->jobs[n_jobs++] = expert_job(mx->gate, h->data[0], h->ready[0], inputs[0], strides[0], first, count,
                                       s->expert_gate);
        if (!mx->fused)
            s->jobs[n_jobs++] = expert_job(mx->up, h->data[1], h->ready[1], inputs[1], strides[1], first, count,
                                           s->expert_up);
    }
    int64_t skipped = matmul_run_waiting(s->pool, s->kernels, s->jobs, n_jobs, waiter);
    if (skipped != 0)
        return skipped;

    /* biases and the gated activation, then down's input rows */
    int64_t n_ff = mx->n_ff;
    size_t down_stride = activation_row_bytes(mx->down->type, n_ff);
    for (int k = 0; k < n; k++) {
        int e = group[order[k]], first = s->expert_first[e], count = s->expert_count[e];
        add_expert_bias(&layer->ffn_gate_exps_bias, e, s->expert_gate, first, count);
        add_expert_bias(&layer->ffn_up_exps_bias, e, s->expert_up, first, count);
        if (mx->fused) {
            for (int r = first; r < first + count; r++) {
                float *g = s->expert_gate + (int64_t)r * mx->gate_stride;
                glu(config, g, g + n_ff, n_ff);
            }
        } else {
            glu(config, s->expert_gate + (int64_t)first * n_ff, s->expert_up + (int64_t)first * n_ff,
                (int64_t)count * n_ff);
        }
        for (int r = first; r < first + count; r++)
            activation_convert(s->kernels, mx->down->type, s->expert_gate + (int64_t)r * mx->gate_stride, n_ff,
                               s->expert_down_inputs + (size_t)r * down_stride);
    }
    n_jobs = 0;
    for (int k = 0; k < n; k++) {
        const expert_handle *h = &handles[order[k]];
        int e = group[order[k]];
        s->jobs[n_jobs++] = expert_job(mx->down, h->data[mx->down_index], h->ready[mx->down_index],
                                       s->expert_down_inputs, down_stride, s->expert_first[e], s->expert_count[e],
                                       s->expert_down);
    }
    return matmul_run_waiting(s->pool, s->kernels, s->jobs, n_jobs, waiter);
}

/* One group of the layer's selected experts (as many as the expert store
 * holds at once). The experts in memory come first: under overlap, while
 * the others are read, the threads compute all three of their projections,
 * and what is left once the last read is in is the read experts' own work.
 * Each expert's rows depend on that expert alone, so neither the order nor
 * the split into two runs changes a bit. */
static int moe_group(run_state *s, const model *m, const layer_weights *layer, int layer_index,
                     const moe_config *config, const int32_t *group, int n_group, const uint8_t *const *inputs,
                     const size_t *strides, const float *ahead_input, int n_tokens, int32_t position,
                     bmoe_stats *counters, bmoe_error *err)
{
    expert_store *store = m->experts;
    expert_matrices mx = {.fused = layer->ffn_gate_up_exps.name != NULL, .up = &layer->ffn_up_exps,
                          .down = &layer->ffn_down_exps};
    mx.gate = mx.fused ? &layer->ffn_gate_up_exps : &layer->ffn_gate_exps;
    mx.n_ff = mx.fused ? layer->ffn_gate_up_exps.ne[1] / 2 : layer->ffn_gate_exps.ne[1];
    mx.gate_stride = mx.fused ? 2 * mx.n_ff : mx.n_ff;
    mx.down_index = mx.fused ? 1 : 2;
    expert_handle *handles = s->expert_handles;
    if (expert_store_acquire(store, layer_index, group, n_group, handles, err) != 0) {
        expert_store_release(store, NULL);
        return -1;
    }
    if (ahead_input)
        read_ahead(s, m, config, layer_index, ahead_input, n_tokens, position, counters);
    const matmul_waiter *waiter = expert_store_waiter(store);
    bool pending[MODEL_MAX_EXPERTS];
    int n_ready = 0;
    for (int i = 0; i < n_group; i++) {
        s->expert_residency[group[i]] = handles[i].prefetched ? 2 : handles[i].hit ? 1 : 0;
        s->expert_read_bytes[group[i]] = handles[i].read_bytes;
        pending[i] = false;
        for (int p = 0; p < EXPERT_MAX_PROJECTIONS; p++)
            pending[i] |= handles[i].ready[p] != NULL;
        n_ready += !pending[i];
    }
    /* the experts in memory first, then those being read, in the order they were asked for */
    int order[MODEL_MAX_EXPERTS];
    int n_order = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n_group; i++)
            if (pending[i] == (pass == 1))
                order[n_order++] = i;
    /* all in memory, or all being read: one run */
    int n_first = n_ready > 0 && n_ready < n_order ? n_ready : n_order;
    int64_t skipped = run_experts(s, layer, config, &mx, group, order, n_first, handles, inputs, strides, waiter);
    if (skipped == 0 && n_first < n_order)
        skipped = run_experts(s, layer, config, &mx, group, order + n_first, n_order - n_first, handles, inputs,
                              strides, waiter);
    if (expert_store_release(store, err) != 0)
        return -1; /* it names the read that failed */
    if (skipped != 0)
        return error_set_status(err, BMOE_ERR_IO, "stream: the weights of layer %d's experts never arrived",
                                layer_index);
    for (int k = 0; k < n_order; k++) {
        int e = group[order[k]];
        /* a per-expert scale applies to the product, before a bias (1.9 step 10) */
        scale_expert_rows(&layer->ffn_down_exps_scale, e, s->expert_down, mx.down->ne[1], s->expert_first[e],
                          s->expert_count[e]);
        add_expert_bias(&layer->ffn_down_exps_bias, e, s->expert_down, s->expert_first[e], s->expert_count[e]);
    }
    return 0;
}

/* stage_all: the experts the layer did not route are read too, in groups
 * the store holds at once, and let go unused. Before the routed ones, so
 * that the store's memory of what this token routed (the next token's
 * prefetch) is the routing's. */
static int stage_unrouted(run_state *s, expert_store *store, int layer_index, int n_expert, bmoe_error *err)
{
    int32_t *unrouted = s->distinct_experts;
    int n_unrouted = 0;
    for (int e = 0; e < n_expert; e++)
        if (s->expert_count[e] == 0)
            unrouted[n_unrouted++] = e;
    int capacity = expert_store_capacity(store);
    for (int g = 0; g < n_unrouted; g += capacity) {
        int n_group = n_unrouted - g < capacity ? n_unrouted - g : capacity;
        if (expert_store_acquire(store, layer_index, unrouted + g, n_group, s->expert_handles, err) != 0) {
            expert_store_release(store, NULL);
            return -1;
        }
        if (expert_store_release(store, err) != 0)
            return -1;
    }
    return 0;
}

int moe_layer(run_state *s, const model *m, const layer_weights *layer, int layer_index, const moe_config *config,
              const float *x, const float *router_x, const int32_t *positions, int n_tokens, float *out,
              bmoe_error *err)
{
    const model_hparams *hp = &m->hparams;
    int n_expert = hp->n_expert, n_used = hp->n_expert_used;
    int64_t n_embd = hp->n_embd;
    int n_rows = n_tokens * n_used;

    /* 1. router, and the levers that change its choice (decode only but drop) */
    bmoe_stats discarded = {0};
    bmoe_stats *counters = s->eval_stats ? s->eval_stats : &discarded;
    const bmoe_lossy_params *lossy = &m->lossy;
    bool decode = s->single_token;
    bool ahead_armed = decode && lossy->route_ahead > 0 && s->ahead_experts;
    bool ahead = ahead_armed && !s->ahead_disarmed;
    if (ahead_armed && !ahead) /* turned off by the watchdog: the router's choice from now on */
        counters->ra_passthrough++;
    if (ahead && moe_layer_ahead(m, -1, 1) == layer_index) /* a new step: no choice made yet */
        memset(s->ahead_ready, 0, (size_t)hp->n_layer * sizeof *s->ahead_ready);
    bool drop = lossy->drop_cold_frac > 0.0f && (decode || lossy->drop_in_prefill);
    const float *selection_bias = layer->exp_probs_b.data;
    const tensor_view *router = &layer->ffn_gate_inp;
    linear(s, router_x ? router_x : x, n_embd, n_tokens, 1, &router, &s->router_logits, NULL);
    add_bias(s->router_logits, &layer->ffn_gate_inp_bias, n_tokens, n_expert);
    for (int t = 0; t < n_tokens; t++) {
        float *scores = s->router_logits + (int64_t)t * n_expert;
        int32_t *experts = s->selected + t * n_used;
        float *weights = s->selected_weights + t * n_used;
        uint8_t *dropped = s->slot_dropped + t * n_used;
        /* a hash layer's table is the model's own routing: no replay or lever changes it but drop */
        const int32_t *table_row = config->expert_table ? config->expert_table + (int64_t)config->tokens[t] * n_used
                                                        : NULL;
        bool replayed = !table_row && replayed_routing(s, m, layer_index, positions[t], experts);
        bool substitute = decode && !replayed && !table_row && lossy->substitute_lambda > 0.0f;
        float logits[MODEL_MAX_EXPERTS];
        if (substitute)
            memcpy(logits, scores, (size_t)n_expert * sizeof *logits);
        if (table_row)
            memcpy(experts, table_row, (size_t)n_used * sizeof *experts);
        if (replayed || table_row)
            gate_scores(config, scores, n_expert);
        else
            route_by_router(config, hp, scores, selection_bias, experts);
        if (s->probe && decode && !replayed && !table_row)
            probe_decode_routing(s, m, config, layer_index, router_x ? router_x : x, experts);
        else if (s->probe) /* a prefill: the previous token's routing is not known */
            s->probe_previous_ready[layer_index] = false;
        if (substitute)
            substitute_cached(m, layer_index, config, logits, scores, selection_bias, experts, counters);
        if (ahead && !table_row)
            route_ahead_commit(s, layer_index, n_used, experts, counters);
        route_weights(config, scores, n_used, experts, weights);
        memset(dropped, 0, (size_t)n_used);
        if (drop)
            drop_cold(m, layer_index, n_used, experts, weights, dropped, counters);
    }
    counters->experts_routed += (uint64_t)n_rows;

    forward_trace_op(s, "MUL_MAT", "ffn_moe_router");

    /* 2. group the (token, rank) selections by expert, tokens in order */
    memset(s->expert_count, 0, (size_t)n_expert * sizeof *s->expert_count);
    for (int i = 0; i < n_rows; i++)
        s->expert_count[s->selected[i]] += !s->slot_dropped[i];
    s->expert_first[0] = 0;
    for (int e = 0; e < n_expert; e++) {
        s->expert_first[e + 1] = s->expert_first[e] + s->expert_count[e];
        s->expert_count[e] = 0;
    }
    for (int i = 0; i < n_rows; i++) {
        int e = s->selected[i];
        if (s->slot_dropped[i]) {
            s->row_of[i] = -1;
            continue;
        }
        int row = s->expert_first[e] + s->expert_count[e]++;
        s->row_of[i] = row;
        s->sorted_token[row] = i / n_used;
    }

    /* 3. the selected experts, in groups the expert store can hold at once */
    const tensor_view *gate_up[2] = {&layer->ffn_gate_exps, &layer->ffn_up_exps};
    if (layer->ffn_gate_up_exps.name)
        gate_up[0] = &layer->ffn_gate_up_exps;
    const uint8_t *inputs[2];
    size_t strides[2];
    gather_inputs(s, gate_up, layer->ffn_gate_up_exps.name ? 1 : 2, x, n_tokens, n_embd, s->expert_first[n_expert],
                  inputs, strides);
    if (expert_store_stages_all(m->experts) && stage_unrouted(s, m->experts, layer_index, n_expert, err) != 0)
        return -1;
    int32_t *selected = s->distinct_experts;
    int n_selected = most_used_first(s->expert_count, n_expert, selected);
    int capacity = expert_store_capacity(m->experts);
    /* a decode step: choose or predict what later layers will route; a
     * prompt's micro-batch: predict the next layer's union */
    bool batch_ahead = n_tokens >= PREFILL_AHEAD_MIN_TOKENS && expert_store_caches(m->experts) &&
                       !expert_store_stages_all(m->experts);
    bool decode_ahead = decode && (ahead || expert_store_predict_max(m->experts) > 0);
    const float *ahead_input = batch_ahead || decode_ahead ? (router_x ? router_x : x) : NULL;
    for (int g = 0; g < n_selected; g += capacity) {
        int n_group = n_selected - g < capacity ? n_selected - g : capacity;
        if (moe_group(s, m, layer, layer_index, config, selected + g, n_group, inputs, strides,
                      g == 0 ? ahead_input : NULL, n_tokens, positions[0], counters, err) != 0)
            return -1;
    }

    forward_trace_op(s, "MUL_MAT_ID", "ffn_moe_experts");
    if (s->route_callback)
        report_routes(s, layer_index, positions, n_tokens, n_used);

    /* 4. weighted sum in selection order */
    for (int t = 0; t < n_tokens; t++) {
        float *o = out + (int64_t)t * n_embd;
        const float *w = s->selected_weights + t * n_used;
        const int32_t *rows = s->row_of + t * n_used;
        bool first = true;
        for (int k = 0; k < n_used; k++) {
            if (rows[k] < 0) /* dropped */
                continue;
            if (first)
                vector_scale(o, s->expert_down + (int64_t)rows[k] * n_embd, w[k], n_embd);
            else
                vector_add_scaled(o, s->expert_down + (int64_t)rows[k] * n_embd, w[k], n_embd);
            first = false;
        }
    }
    forward_trace_op(s, "ADD", "ffn_moe_weighted_sum");
    return 0;
}
