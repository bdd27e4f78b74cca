/* The mixture-of-experts layer (architectures.md 1.9): the router, whose
 * choice for each (token, layer) is made in route_token and nowhere else (the
 * route callback attaches there), then the experts. Tokens are grouped by
 * expert with a counting sort so each selected expert runs once over all its
 * tokens; gate and up of every selected expert form one parallel step, downs
 * another. Each token's output is the sum of its experts' weighted outputs in
 * selection order, so it does not depend on the other tokens of the batch. */
#include <math.h>
#include <string.h>

#include "../quant/quant.h"
#include "../stream/expert_store.h"
#include "model.h"

/* The router decision for one token: fills experts[0..K) in rank order and
 * their weights from the router logits (modified in place). replayed: the
 * experts are given (a benchmark's replayed routing), their weights come
 * from the logits as the router's would. */
static void route_token(const moe_config *config, float *logits, const float *selection_bias, int n_expert,
                        int n_used, int32_t *experts, float *weights, bool replayed)
{
    if (config->gating == MOE_GATING_SOFTMAX)
        softmax(logits, n_expert);
    else if (config->gating == MOE_GATING_SIGMOID)
        sigmoid(logits, n_expert);
    /* top-K by score (the probability plus the selection bias, when there is
     * one), highest first; ties go to the lower expert index */
    for (int k = 0; k < n_used; k++) {
        int best = -1;
        float best_score = 0.0f;
        for (int e = 0; e < n_expert && !replayed; e++) {
            bool taken = false;
            for (int j = 0; j < k; j++)
                taken |= experts[j] == e;
            float score = selection_bias ? logits[e] + selection_bias[e] : logits[e];
            if (!taken && (best < 0 || score > best_score)) {
                best = e;
                best_score = score;
            }
        }
        if (!replayed)
            experts[k] = best;
        weights[k] = logits[experts[k]];
    }
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
        for (int k = 0; k < n_used; k++) {
            s->slot_residency[k] = s->expert_residency[experts[k]];
            s->slot_read_bytes[k] = s->expert_read_bytes[experts[k]];
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
            .batch = n_tokens > 1,
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

/* gate = act(gate) * up for n values. */
static void glu(enum moe_activation activation, float *gate, const float *up, int64_t n)
{
    if (activation == MOE_SWIGLU_OAI)
        swiglu_oai(gate, gate, up, n, 1.702f, 7.0f);
    else if (activation == MOE_GELU_GLU)
        gelu_glu_f16(gate, gate, up, n);
    else
        silu_glu(gate, gate, up, n);
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

/* Predictive prefetch (expert_store_prefetch) for a decode step: the next
 * MoE layer's router applied to this layer's router input ranks the experts
 * that layer is likely to route to, and the store reads the best of those it
 * lacks while this layer computes. Under a replayed routing the next layer's
 * choice is known already: the guess is that choice itself, a predictor that
 * is never wrong, so a benchmark can measure what prediction one layer ahead
 * could give at best. Called once this layer's own reads are queued, so they
 * go first. Changes no bit of the output: only what is read ahead. */
static void predict_next_layer(run_state *s, const model *m, const moe_config *config, int layer_index,
                               const float *router_input, int32_t position)
{
    const model_hparams *hp = &m->hparams;
    int next = layer_index + 1;
    while (next < hp->n_layer && !m->weights.layers[next].ffn_gate_inp.name)
        next++;
    if (next >= hp->n_layer)
        return;
    int32_t experts[MODEL_MAX_EXPERTS];
    bool known = s->route_override &&
                 s->route_override(s->route_override_user, next, position, hp->n_expert_used, experts) &&
                 valid_override(experts, hp->n_expert_used, hp->n_expert);
    if (!known) {
        const layer_weights *next_layer = &m->weights.layers[next];
        const tensor_view *router = &next_layer->ffn_gate_inp;
        float logits[MODEL_MAX_EXPERTS], weights[MODEL_MAX_EXPERTS];
        float *out = logits;
        linear(s, router_input, hp->n_embd, 1, 1, &router, &out, NULL);
        add_bias(logits, &next_layer->ffn_gate_inp_bias, 1, hp->n_expert);
        route_token(config, logits, next_layer->exp_probs_b.data, hp->n_expert, hp->n_expert_used, experts,
                    weights, false);
    }
    expert_store_prefetch(m->experts, next, experts, hp->n_expert_used, expert_store_predict_max(m->experts));
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
                glu(config->activation, g, g + n_ff, n_ff);
            }
        } else {
            glu(config->activation, s->expert_gate + (int64_t)first * n_ff, s->expert_up + (int64_t)first * n_ff,
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
                     const size_t *strides, const float *predict_input, int32_t position, bmoe_error *err)
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
    if (predict_input)
        predict_next_layer(s, m, config, layer_index, predict_input, position);
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

    /* 1. router */
    const tensor_view *router = &layer->ffn_gate_inp;
    linear(s, router_x ? router_x : x, n_embd, n_tokens, 1, &router, &s->router_logits, NULL);
    add_bias(s->router_logits, &layer->ffn_gate_inp_bias, n_tokens, n_expert);
    for (int t = 0; t < n_tokens; t++) {
        int32_t *experts = s->selected + t * n_used;
        bool replayed = s->route_override && s->route_override(s->route_override_user, layer_index, positions[t],
                                                               n_used, experts) &&
                        valid_override(experts, n_used, n_expert);
        route_token(config, s->router_logits + (int64_t)t * n_expert, layer->exp_probs_b.data, n_expert, n_used,
                    experts, s->selected_weights + t * n_used, replayed);
    }

    forward_trace_op(s, "MUL_MAT", "ffn_moe_router");

    /* 2. group the (token, rank) selections by expert, tokens in order */
    memset(s->expert_count, 0, (size_t)n_expert * sizeof *s->expert_count);
    for (int i = 0; i < n_rows; i++)
        s->expert_count[s->selected[i]]++;
    s->expert_first[0] = 0;
    for (int e = 0; e < n_expert; e++) {
        s->expert_first[e + 1] = s->expert_first[e] + s->expert_count[e];
        s->expert_count[e] = 0;
    }
    for (int i = 0; i < n_rows; i++) {
        int e = s->selected[i];
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
    gather_inputs(s, gate_up, layer->ffn_gate_up_exps.name ? 1 : 2, x, n_tokens, n_embd, n_rows, inputs, strides);
    if (expert_store_stages_all(m->experts) && stage_unrouted(s, m->experts, layer_index, n_expert, err) != 0)
        return -1;
    int32_t *selected = s->distinct_experts;
    int n_selected = 0;
    for (int e = 0; e < n_expert; e++)
        if (s->expert_count[e] > 0)
            selected[n_selected++] = e;
    int capacity = expert_store_capacity(m->experts);
    /* a decode step: predict the next layer's routing */
    const float *predict_input =
        n_tokens == 1 && expert_store_predict_max(m->experts) > 0 ? (router_x ? router_x : x) : NULL;
    for (int g = 0; g < n_selected; g += capacity) {
        int n_group = n_selected - g < capacity ? n_selected - g : capacity;
        if (moe_group(s, m, layer, layer_index, config, selected + g, n_group, inputs, strides,
                      g == 0 ? predict_input : NULL, positions[0], err) != 0)
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
        vector_scale(o, s->expert_down + (int64_t)rows[0] * n_embd, w[0], n_embd);
        for (int k = 1; k < n_used; k++)
            vector_add_scaled(o, s->expert_down + (int64_t)rows[k] * n_embd, w[k], n_embd);
    }
    forward_trace_op(s, "ADD", "ffn_moe_weighted_sum");
    return 0;
}
