/* The run state's allocation, once per context: the buffers for the largest
 * layer, the KV cache and the recurrent state laid out per layer, and, added
 * only to the contexts that use them, the prediction probe's buffers and the
 * draft head's KV rows. */
#include "run_state.h"

#include <stdlib.h>
#include <string.h>

#include "../base/pages.h"
#include "../stream/expert_store.h"
#include "model.h"

static void *allocate_counted(size_t count, size_t size, bool *failed, size_t *total)
{
    if (count == 0)
        count = 1;
    void *p = calloc(count, size);
    if (!p)
        *failed = true;
    *total += count * size;
    return p;
}

#define allocate(count, size, failed) allocate_counted(count, size, failed, &s->buffer_bytes)

/* Lays out the KV cache (a layer's own size, none without attention or
 * for a layer attending over another's: its offsets are its source's) and
 * the recurrent state (a short-convolution layer's window of L-1 inputs per
 * channel); returns the elements of K and V of the main layers, and with
 * the draft head's block (laid out after them, so that adding its rows
 * moves no other layer's), and the floats of state. */
static void layout_caches(run_state *s, const model *m, size_t k_elements[2], size_t v_elements[2])
{
    const model_hparams *hp = &m->hparams;
    size_t k = 0, v = 0, state = 0, k_main = 0, v_main = 0;
    int64_t mixer = hp->n_mixer_floats;
    for (int32_t il = 0; il < hp->n_layer + hp->n_layer_head; il++) {
        if (il == hp->n_layer) {
            k_main = k;
            v_main = v;
        }
        const layer_hparams *lh = &hp->layer[il];
        bool own_kv = lh->kv_source == il;
        s->kv_k_offset[il] = own_kv ? k : s->kv_k_offset[lh->kv_source];
        s->kv_v_offset[il] = own_kv ? v : s->kv_v_offset[lh->kv_source];
        s->recurrent_offset[il] = state;
        int64_t need = 0;
        /* deepseek4's compressed layers keep their raw KV head in their compressor rows */
        if (lh->mixer == MIXER_ATTENTION && own_kv && hp->compress_ratio[il] == 0) {
            int64_t k_head, v_head;
            kv_head_strides(s, hp, il, &k_head, &v_head);
            k += (size_t)k_head * (size_t)lh->n_head_kv;
            v += (size_t)v_head * (size_t)lh->n_head_kv;
            /* gated attention: attn_q gives each head's query and gate */
            if (m->weights.layers[il].attn_q.ne[1] > (int64_t)lh->n_head * lh->head_dim_k)
                need = m->weights.layers[il].attn_q.ne[1];
        } else if (lh->mixer == MIXER_SHORTCONV) {
            state += (size_t)(hp->n_conv_taps - 1) * (size_t)hp->n_embd;
            need = 3 * (int64_t)hp->n_embd;
        } else { /* MIXER_DELTANET: conv window of C channels, then Hv matrices dk x dv */
            int64_t kd = (int64_t)hp->ssm_k_heads * hp->ssm_dk, vd = (int64_t)hp->ssm_v_heads * hp->ssm_dv;
            int64_t channels = 2 * kd + vd;
            state += (size_t)((hp->ssm_conv_taps - 1) * channels + (int64_t)hp->ssm_v_heads * hp->ssm_dk * hp->ssm_dv);
            need = channels + 2 * vd + 2 * (int64_t)hp->ssm_v_heads; /* see deltanet_block */
        }
        if (need > mixer)
            mixer = need;
    }
    s->mixer_floats = mixer;
    k_elements[0] = hp->n_layer_head > 0 ? k_main : k;
    v_elements[0] = hp->n_layer_head > 0 ? v_main : v;
    k_elements[1] = k;
    v_elements[1] = v;
    s->recurrent_floats = state;
}

/* The positions a sliding-window layer's ring keeps: its window and the
 * most one evaluation writes, in whole tiles of attend's format; 0 when the
 * model has no such layer with a cache of its own or the ring would not be
 * smaller than the context. */
static int32_t swa_ring_positions(const model *m, int32_t n_ctx, int32_t n_ubatch)
{
    const model_hparams *hp = &m->hparams;
    bool any = false;
    for (int32_t il = 0; il < hp->n_layer; il++)
        any |= hp->layer_is_swa[il] && hp->layer[il].mixer == MIXER_ATTENTION && hp->compress_ratio[il] == 0;
    if (!any || hp->n_swa <= 0)
        return 0;
    int64_t written = n_ubatch > RUN_STATE_RING_MIN_WRITE ? n_ubatch : RUN_STATE_RING_MIN_WRITE;
    int64_t ring = ((int64_t)hp->n_swa + written + ATTEND_TILE_KEYS - 1) / ATTEND_TILE_KEYS * ATTEND_TILE_KEYS;
    return ring < n_ctx ? (int32_t)ring : 0;
}

/* The layers whose own K and V are rings: their parts of the caches, in
 * elements (offset and length of K, then of V); returns how many. */
static int ring_parts(const run_state *s, const model *m, size_t parts[][4])
{
    const model_hparams *hp = &m->hparams;
    int n = 0;
    for (int32_t il = 0; s->swa_ring > 0 && il < hp->n_layer; il++) {
        const layer_hparams *lh = &hp->layer[il];
        if (lh->mixer != MIXER_ATTENTION || lh->kv_source != il || kv_positions(s, hp, il) != s->swa_ring)
            continue;
        int64_t k_head, v_head;
        kv_head_strides(s, hp, il, &k_head, &v_head);
        parts[n][0] = s->kv_k_offset[il];
        parts[n][1] = (size_t)k_head * (size_t)lh->n_head_kv;
        parts[n][2] = s->kv_v_offset[il];
        parts[n][3] = (size_t)v_head * (size_t)lh->n_head_kv;
        n++;
    }
    return n;
}

/* Copies the rings' parts of the caches into the checkpoint (save) or back. */
static void ring_copy(run_state *s, const model *m, bool save)
{
    if (!s->ring_checkpoint)
        return;
    size_t parts[MODEL_MAX_LAYERS][4], element = s->kv_f16 ? sizeof(uint16_t) : sizeof(float);
    int n = ring_parts(s, m, parts);
    uint8_t *copy = s->ring_checkpoint;
    for (int i = 0; i < n; i++)
        for (int kv = 0; kv < 2; kv++) {
            uint8_t *cache = (uint8_t *)(kv == 0 ? s->k_cache : s->v_cache) + parts[i][2 * kv] * element;
            size_t bytes = parts[i][2 * kv + 1] * element;
            if (save)
                memcpy(copy, cache, bytes);
            else
                memcpy(cache, copy, bytes);
            copy += bytes;
        }
}

void run_state_ring_save(run_state *s, const model *m)
{
    ring_copy(s, m, true);
}

void run_state_ring_restore(run_state *s, const model *m)
{
    ring_copy(s, m, false);
}

int run_state_create(run_state *s, const model *m, int32_t n_ctx, int32_t n_ubatch, bool kv_f16,
                     enum bmoe_swa_cache swa, thread_pool *pool, bmoe_error *err)
{
    const model_hparams *hp = &m->hparams;
    memset(s, 0, sizeof *s);
    s->n_ctx = n_ctx;
    s->n_ubatch = n_ubatch;
    s->swa_ring = swa == BMOE_SWA_FULL ? 0 : swa_ring_positions(m, n_ctx, n_ubatch);
    /* a ring and its copy no smaller than the whole context: keep the whole context */
    if (swa == BMOE_SWA_CHECKPOINT && 2 * (int64_t)s->swa_ring >= n_ctx)
        s->swa_ring = 0;
    s->kv_f16 = kv_f16;
    s->pool = pool;
    s->kernels = kernels_best();
    size_t nu = (size_t)n_ubatch;
    size_t k_used = hp->n_expert_used > 0 ? (size_t)hp->n_expert_used : 1;
    size_t q_dim = (size_t)hp->n_head * (size_t)hp->head_dim_k;
    size_t k_dim = (size_t)hp->n_head_kv * (size_t)hp->head_dim_k;
    size_t v_dim = (size_t)hp->n_head_kv * (size_t)hp->head_dim_v;
    size_t attn_dim = (size_t)hp->n_head * (size_t)hp->head_dim_v;
    size_t n_embd = (size_t)hp->n_embd;
    int n_threads = pool ? thread_pool_capacity(pool) : 1; /* per-thread buffers: for the most threads a job may use */
    bool failed = false;
    bool any_fused = false, separate_router_input = false;
    for (int32_t il = 0; il < hp->n_layer; il++) {
        any_fused |= m->weights.layers[il].ffn_gate_up_exps.name != NULL;
        /* gemma4's router input and MoE beside the MLP; a shared expert beside the MoE */
        separate_router_input |= m->weights.layers[il].ffn_gate_inp_scale.name != NULL ||
                                 m->weights.layers[il].ffn_gate_shexp.name != NULL;
    }

    s->positions = allocate(nu, sizeof(int32_t), &failed);
    s->h = allocate(nu * n_embd, sizeof(float), &failed);
    s->x = allocate(nu * n_embd, sizeof(float), &failed);
    s->q = allocate(nu * q_dim, sizeof(float), &failed);
    s->k = allocate(nu * k_dim, sizeof(float), &failed);
    s->v = allocate(nu * v_dim, sizeof(float), &failed);
    s->attn = allocate(nu * attn_dim, sizeof(float), &failed);
    s->block_out = allocate(nu * n_embd, sizeof(float), &failed);
    s->rope_cache = allocate(nu * (size_t)hp->n_rot, sizeof(float), &failed);
    s->rope_cache_swa = allocate(nu * (size_t)hp->n_rot, sizeof(float), &failed);
    size_t ffn_width = (size_t)(hp->n_ff > hp->n_ff_shexp ? hp->n_ff : hp->n_ff_shexp);
    s->ffn_gate = allocate(nu * ffn_width, sizeof(float), &failed);
    s->ffn_up = allocate(nu * ffn_width, sizeof(float), &failed);
    s->attention_scratch_per_thread = attention_scratch_floats(n_ctx, hp->head_dim_k);
    for (int32_t il = 0; il < hp->n_layer; il++) /* deepseek4's scores over the window and the compressed entries */
        if (hp->compress_ratio[il] != 0 && s->attention_scratch_per_thread < (int64_t)n_ctx + n_ctx / 4 + 1)
            s->attention_scratch_per_thread = (int64_t)n_ctx + n_ctx / 4 + 1;
    s->attention_scratch = allocate((size_t)n_threads * (size_t)s->attention_scratch_per_thread, sizeof(float),
                                    &failed);
    for (int i = 0; i < 3; i++)
        s->activations[i] = allocate(nu * m->max_activation_bytes, 1, &failed);
    if (hp->n_expert > 0) {
        size_t rows = nu * k_used;
        size_t e = (size_t)hp->n_expert;
        for (int i = 0; i < 2; i++)
            s->expert_inputs[i] = allocate(rows * m->max_activation_bytes, 1, &failed);
        s->expert_down_inputs = allocate(rows * m->max_activation_bytes, 1, &failed);
        s->router_logits = allocate(nu * e, sizeof(float), &failed);
        s->selected = allocate(rows, sizeof(int32_t), &failed);
        s->selected_weights = allocate(rows, sizeof(float), &failed);
        s->expert_count = allocate(e, sizeof(int32_t), &failed);
        s->expert_first = allocate(e + 1, sizeof(int32_t), &failed);
        s->sorted_token = allocate(rows, sizeof(int32_t), &failed);
        s->row_of = allocate(rows, sizeof(int32_t), &failed);
        s->expert_gate = allocate(rows * (size_t)hp->n_ff_exp * (any_fused ? 2 : 1), sizeof(float), &failed);
        s->expert_up = allocate(rows * (size_t)hp->n_ff_exp, sizeof(float), &failed);
        s->expert_down = allocate(rows * n_embd, sizeof(float), &failed);
        s->jobs = allocate(2 * e, sizeof(matmul_job), &failed);
        s->distinct_experts = allocate(e, sizeof(int32_t), &failed);
        s->expert_residency = allocate(e, sizeof(uint8_t), &failed);
        s->expert_read_bytes = allocate(e, sizeof(uint64_t), &failed);
        s->slot_residency = allocate(k_used, sizeof(uint8_t), &failed);
        s->slot_read_bytes = allocate(k_used, sizeof(uint64_t), &failed);
        s->slot_dropped = allocate(rows, sizeof(uint8_t), &failed);
        if (m->lossy.route_ahead > 0) {
            s->ahead_experts = allocate((size_t)hp->n_layer * k_used, sizeof(int32_t), &failed);
            s->ahead_ready = allocate((size_t)hp->n_layer, sizeof(bool), &failed);
        }
        s->expert_handles = allocate(e, sizeof(expert_handle), &failed);
    }
    if (m->head_activation_bytes > 0) {
        s->head_inputs = allocate(nu * m->head_activation_bytes, 1, &failed);
        s->head_jobs = allocate((size_t)hp->n_head, sizeof(matmul_job), &failed);
    }
    if (separate_router_input) {
        s->x2 = allocate(nu * n_embd, sizeof(float), &failed);
        s->block_out2 = allocate(nu * n_embd, sizeof(float), &failed);
    }
    if (hp->n_per_layer_input > 0) {
        size_t dp = (size_t)hp->n_per_layer_input, all_layers = dp * (size_t)hp->n_layer;
        s->per_layer_input = allocate(nu * all_layers, sizeof(float), &failed);
        s->per_layer_token_row = allocate(all_layers, sizeof(float), &failed);
        s->per_layer_gate = allocate(nu * dp, sizeof(float), &failed);
    }
    /* the draft head's block and input: run_state_enable_head */
    size_t k_elements[2], v_elements[2];
    layout_caches(s, m, k_elements, v_elements);
    if (s->mixer_floats > 0)
        s->mixer = allocate(nu * (size_t)s->mixer_floats, sizeof(float), &failed);
    size_t rows = 0, entries = 0;
    bool indexed = false;
    for (int32_t il = 0; il < hp->n_layer; il++) {
        int32_t ratio = hp->compress_ratio[il];
        size_t d = (size_t)hp->head_dim_k, di = (size_t)hp->indexer_dim, blocks = ratio > 0 ? n_ctx / ratio : 0;
        /* a ratio-4 compressor overlaps two blocks (2*D kv and scores per token), a ratio-128 one does not */
        size_t overlap = ratio == 4 ? 2 : 1;
        s->compress_row_floats[il] = ratio == 0 ? 0 : (int64_t)(d + 2 * overlap * d + (ratio == 4 ? 4 * di : 0));
        s->compress_offset[il] = rows;
        s->compressed_offset[il] = entries;
        s->indexer_offset[il] = entries + blocks * d;
        rows += (size_t)n_ctx * (size_t)s->compress_row_floats[il];
        entries += blocks * (d + (ratio == 4 ? di : 0));
        indexed |= ratio == 4;
    }
    if (indexed) {
        size_t blocks = (size_t)n_ctx / 4;
        s->indexer_q = allocate(nu * (size_t)hp->indexer_heads * (size_t)hp->indexer_dim, sizeof(float), &failed);
        s->indexer_weights = allocate(nu * (size_t)hp->indexer_heads, sizeof(float), &failed);
        s->indexer_scores = allocate(blocks, sizeof(float), &failed);
        s->indexer_chosen = allocate(blocks, sizeof(int32_t), &failed);
    }
    size_t element = kv_f16 ? sizeof(uint16_t) : sizeof(float);
    size_t cache_bytes = 0; /* reported as kv_bytes and recurrent_floats */
    s->k_cache = allocate_counted(k_elements[0], element, &failed, &cache_bytes);
    s->v_cache = allocate_counted(v_elements[0], element, &failed, &cache_bytes);
    /* f32 whatever the KV type: the compressor pools and normalizes them */
    if (rows > 0) {
        s->compress_rows = allocate_counted(rows, sizeof(float), &failed, &cache_bytes);
        s->compressed = allocate_counted(entries, sizeof(float), &failed, &cache_bytes);
    }
    s->compress_bytes = (rows + entries) * sizeof(float);
    s->compressed_bytes = entries * sizeof(float);
    if (swa == BMOE_SWA_CHECKPOINT && s->swa_ring > 0) {
        size_t parts[MODEL_MAX_LAYERS][4], elements = 0;
        int n = ring_parts(s, m, parts);
        for (int i = 0; i < n; i++)
            elements += parts[i][1] + parts[i][3];
        s->ring_checkpoint = allocate_counted(elements, element, &failed, &cache_bytes);
        s->ring_checkpoint_bytes = elements * element;
    }
    s->kv_bytes = (k_elements[0] + v_elements[0]) * element + s->ring_checkpoint_bytes + s->compress_bytes;
    s->kv_k_bytes = k_elements[0] * element;
    s->kv_v_bytes = v_elements[0] * element;
    s->head_k_bytes = (k_elements[1] - k_elements[0]) * element;
    s->head_v_bytes = (v_elements[1] - v_elements[0]) * element;
    s->recurrent = allocate_counted(s->recurrent_floats, sizeof(float), &failed, &cache_bytes);
    if (failed) {
        run_state_destroy(s);
        return error_set_status(err, BMOE_ERR_OUT_OF_MEMORY,
                                "context: out of memory for buffers and KV cache (n_ctx %d, n_ubatch %d)", n_ctx,
                         n_ubatch);
    }
    return 0;
}

int run_state_enable_probe(run_state *s, const model *m)
{
    const model_hparams *hp = &m->hparams;
    bool failed = false;
    size_t layers = (size_t)hp->n_layer, k_used = hp->n_expert_used > 0 ? (size_t)hp->n_expert_used : 1;
    s->probe = allocate(layers, sizeof *s->probe, &failed);
    s->probe_input = allocate((size_t)hp->n_embd, sizeof(float), &failed);
    s->probe_previous = allocate(layers * k_used, sizeof(int32_t), &failed);
    s->probe_previous_ready = allocate(layers, sizeof(bool), &failed);
    s->probe_input_layer = -1;
    return failed ? -1 : 0;
}

/* The KV buffer of kept bytes grown by added ones, zeroed: the head's rows
 * before a generation's first evaluated position are never computed (a
 * reused prefix) and are read as they are. NULL when out of memory (the
 * old buffer stays). Its first allocation may be one element for an empty
 * cache (allocate_counted): kept is then 0. */
static void *grow_cache(void *cache, size_t kept, size_t added)
{
    uint8_t *grown = realloc(cache, kept + added);
    if (grown)
        memset(grown + kept, 0, added);
    return grown;
}

static size_t head_input_bytes(const run_state *s, const model *m)
{
    return (size_t)s->n_ubatch * 2 * (size_t)m->hparams.n_embd * sizeof(float);
}

size_t run_state_head_bytes(const run_state *s, const model *m)
{
    if (s->head_input || m->hparams.n_layer_head == 0)
        return 0;
    return head_input_bytes(s, m) + s->head_k_bytes + s->head_v_bytes;
}

int run_state_enable_head(run_state *s, const model *m, bmoe_error *err)
{
    if (s->head_input || m->hparams.n_layer_head == 0)
        return 0;
    size_t input_bytes = head_input_bytes(s, m);
    size_t k_bytes = s->kv_k_bytes, v_bytes = s->kv_v_bytes;
    float *input = malloc(input_bytes);
    void *k_cache = input ? grow_cache(s->k_cache, k_bytes, s->head_k_bytes) : NULL;
    if (k_cache)
        s->k_cache = k_cache; /* larger than kv_k_bytes says until V grows too: harmless */
    void *v_cache = k_cache ? grow_cache(s->v_cache, v_bytes, s->head_v_bytes) : NULL;
    if (!v_cache) {
        free(input);
        return error_set_status(err, BMOE_ERR_OUT_OF_MEMORY,
                                "context: out of memory for the draft head's KV cache (%zu bytes for %d positions)",
                                s->head_k_bytes + s->head_v_bytes, s->n_ctx);
    }
    s->v_cache = v_cache;
    s->head_input = input;
    s->buffer_bytes += input_bytes;
    s->kv_k_bytes += s->head_k_bytes;
    s->kv_v_bytes += s->head_v_bytes;
    s->kv_bytes += s->head_k_bytes + s->head_v_bytes;
    return 0;
}

void run_state_destroy(run_state *s)
{
    void *buffers[] = {s->positions, s->h, s->x, s->q, s->k, s->v, s->attn, s->block_out, s->rope_cache,
                       s->rope_cache_swa, s->ffn_gate, s->ffn_up, s->attention_scratch, s->activations[0],
                       s->activations[1], s->activations[2], s->expert_inputs[0], s->expert_inputs[1], s->expert_down_inputs,
                       s->router_logits, s->selected, s->selected_weights, s->expert_count, s->expert_first,
                       s->sorted_token, s->row_of, s->expert_gate, s->expert_up, s->expert_down, s->jobs,
                       s->distinct_experts, s->expert_handles, s->expert_residency, s->expert_read_bytes,
                       s->slot_residency, s->slot_read_bytes, s->slot_dropped, s->ahead_experts, s->ahead_ready, s->probe, s->probe_input,
                       s->probe_previous, s->probe_previous_ready, s->k_cache, s->v_cache, s->recurrent,
                       s->mixer, s->x2, s->block_out2, s->per_layer_input, s->per_layer_token_row,
                       s->per_layer_gate, s->head_inputs, s->head_jobs, s->head_input, s->compress_rows,
                       s->compressed, s->indexer_q, s->indexer_weights, s->indexer_scores, s->indexer_chosen,
                       s->ring_checkpoint};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++)
        free(buffers[i]);
    memset(s, 0, sizeof *s);
}

void run_state_commit(run_state *s)
{
    pages_touch(s->k_cache, s->kv_k_bytes);
    pages_touch(s->v_cache, s->kv_v_bytes);
    pages_touch(s->ring_checkpoint, s->ring_checkpoint_bytes);
    pages_touch(s->compress_rows, s->compress_bytes - s->compressed_bytes);
    pages_touch(s->compressed, s->compressed_bytes);
    pages_touch(s->recurrent, s->recurrent_floats * sizeof(float));
}

void run_state_clear_recurrent(run_state *s)
{
    if (s->recurrent_floats > 0)
        memset(s->recurrent, 0, s->recurrent_floats * sizeof *s->recurrent);
}
