/* The run state: what a context holds to run the forward pass, allocated
 * once (run_state.c) for n_ctx positions and batches of n_ubatch tokens: the
 * activation buffers, the KV cache and the recurrent state of every layer,
 * the MoE layer's routing buffers and the lossy levers' state, and the
 * callbacks the forward pass reports to.
 * Owns: the buffers, the KV cache and the recurrent state. Does not own the
 * thread pool (the context's). */
#ifndef BMOE_MODELS_RUN_STATE_H
#define BMOE_MODELS_RUN_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../kernels/matmul.h"
#include "bmoe.h"
#include "hparams.h"

typedef struct model model;

/* The fewest positions a sliding-window layer's ring keeps beyond its
 * window: what one evaluation may write before attending (a micro-batch
 * smaller than this, or a verify batch of drafts and the token before them)
 * and what speculation rolls back over. */
#define RUN_STATE_RING_MIN_WRITE 16

typedef struct run_state {
    int32_t n_ctx, n_ubatch;
    /* > 0: the positions each sliding-window layer keeps, position p at
     * index p % swa_ring (its window and one micro-batch, whole tiles);
     * 0: every layer keeps all n_ctx */
    int32_t swa_ring;
    /* with swa_ring and BMOE_SWA_CHECKPOINT: a copy of every ring's K and V
     * (run_state_ring_save / _restore), ring_checkpoint_bytes long */
    void *ring_checkpoint;
    size_t ring_checkpoint_bytes;
    bool kv_f16;
    thread_pool *pool;           /* not owned */
    const kernel_set *kernels;
    bmoe_route_callback route_callback;
    void *route_user;
    /* asked before each layer: true stops the forward pass (BMOE_ERR_ABORTED) */
    bool (*abort_requested)(void *user);
    void *abort_user;
    bmoe_route_override route_override; /* replaces the router's choice (benchmarks); may be NULL */
    void *route_override_user;
    bmoe_route_override route_guess; /* replaces the predictor's guess (benchmarks); may be NULL */
    void *route_guess_user;
    bmoe_trace_callback trace_callback; /* layer boundaries; may be NULL */
    void *trace_user;
    bool trace_ops;                     /* also one event per building block */
    int trace_layer;                    /* the layer being computed (-1 outside the layers) */
    int64_t trace_last_ns, trace_last_majflt;       /* the last layer boundary */
    int64_t trace_op_last_ns, trace_op_last_majflt; /* the last block's end */

    int32_t *positions;    /* [n_ubatch] */
    float *h;              /* [n_ubatch][n_embd] residual stream */
    float *x;              /* [n_ubatch][n_embd] normalized input */
    float *q;              /* [n_ubatch][H*Dk] */
    float *k, *v;          /* [n_ubatch][Hkv*Dk], [n_ubatch][Hkv*Dv] */
    float *attn;           /* [n_ubatch][H*Dv] attention heads, concatenated */
    float *block_out;      /* [n_ubatch][n_embd] attention or FFN output */
    float *rope_cache;     /* [n_ubatch][n_rot] */
    float *rope_cache_swa; /* [n_ubatch][n_rot] */
    float *ffn_gate, *ffn_up; /* [n_ubatch][max(F, ...)] dense FFN */
    float *attention_scratch; /* [n_threads][attention_scratch_floats] */
    int64_t attention_scratch_per_thread;
    /* converted activations: three slots, one per distinct activation format
     * among the matrices reading one input */
    uint8_t *activations[3];   /* [n_ubatch][max_activation_bytes] each */
    uint8_t *expert_inputs[2]; /* [n_ubatch*K][max_activation_bytes]: gate and up rows gathered by expert */
    uint8_t *expert_down_inputs; /* [n_ubatch*K][max_activation_bytes]: down's input rows (a group's down
                                    runs before the next group's gate and up) */
    uint8_t *head_inputs;   /* [n_ubatch][head_activation_bytes] linear_per_head's converted inputs */
    matmul_job *head_jobs;  /* [n_head] linear_per_head's jobs */

    /* mixture of experts, for n_ubatch tokens times K selections */
    float *router_logits;   /* [n_ubatch][E] */
    int32_t *selected;      /* [n_ubatch][K] experts in rank order */
    float *selected_weights;/* [n_ubatch][K] */
    int32_t *expert_count;  /* [E] */
    int32_t *expert_first;  /* [E + 1] first sorted row of each expert */
    int32_t *sorted_token;  /* [n_ubatch*K] token of each sorted row */
    int32_t *row_of;        /* [n_ubatch][K] sorted row of each selection */
    float *expert_gate;     /* [n_ubatch*K][Fe] */
    float *expert_up;       /* [n_ubatch*K][Fe] */
    float *expert_down;     /* [n_ubatch*K][n_embd] */
    matmul_job *jobs;       /* [2E] */
    int32_t *distinct_experts; /* [E] the experts a layer's batch selected */
    struct expert_handle *expert_handles; /* [E] */
    uint8_t *expert_residency;  /* [E] of the layer's batch: 0 read, 1 cached, 2 prefetched */
    uint64_t *expert_read_bytes;/* [E] bytes read for each */
    uint8_t *slot_residency;    /* [K] one route event's */
    uint64_t *slot_read_bytes;  /* [K] */
    uint8_t *slot_dropped;      /* [n_ubatch][K] a selection the drop lever skipped */

    /* The forward pass evaluates one token: a decode step. Its last layers
     * may run on one row in a prefill too (only the rows that give logits),
     * so n_tokens alone cannot say it. */
    bool single_token;

    /* the lossy levers' state (moe.c) */
    bmoe_stats *eval_stats;     /* the counters of the evaluation under way (routing, levers); may be NULL */
    int32_t *ahead_experts;     /* [n_layer][K] route-ahead: each layer's experts chosen early */
    bool *ahead_ready;          /* [n_layer] the row holds this decode step's choice */
    bool ahead_disarmed;        /* the watchdog turned route-ahead off for this context */
    bool predict_paused;        /* this decode step reads nothing ahead: the generation's gate paused it */
    /* the prediction probe (bmoe_context_predict_log); NULL: off */
    bmoe_predict_score *probe;  /* [n_layer] */
    float *probe_input;         /* [n_embd] the previous MoE layer's router input in this step */
    int probe_input_layer;      /* its layer; -1: none yet this step */
    int32_t *probe_previous;    /* [n_layer][K] the previous decode step's router choice */
    bool *probe_previous_ready; /* [n_layer] */
    uint64_t ahead_watch_slots, ahead_watch_agree; /* committed slots since armed, and agreeing ones */

    /* KV cache: layer il's keys at k_cache + kv_k_offset[il] elements,
     * [n_ctx][Hkv(il)*Dk(il)] (f16 or f32), likewise V; a layer without
     * attention has none. The draft head's block comes last and has its
     * rows only once run_state_enable_head added them. */
    void *k_cache, *v_cache;
    size_t kv_k_offset[MODEL_MAX_LAYERS], kv_v_offset[MODEL_MAX_LAYERS];
    size_t kv_bytes;           /* K and V, as allocated, the rings' checkpoint and deepseek4's compress_bytes */
    size_t kv_k_bytes;         /* K, as allocated */
    size_t kv_v_bytes;         /* V, as allocated */
    size_t head_k_bytes, head_v_bytes; /* what the draft head's block adds to each */

    /* Recurrent state of the layers that carry one (short-convolution
     * windows): layer il's at recurrent + recurrent_offset[il]. It describes
     * the positions before the next one evaluated; the context replays the
     * tokens to rebuild it after a truncate (context.c). */
    float *recurrent;
    size_t recurrent_offset[MODEL_MAX_LAYERS];
    size_t recurrent_floats;
    float *mixer;              /* [n_ubatch][mixer_floats] a recurrent mixer's projections */
    /* deepseek4's compressed KV layers (compress ratio 4 or 128), by
     * position like the KV cache: layer il's rows at compress_rows +
     * compress_offset[il], [n_ctx][compress_row_floats[il]]: the raw KV head
     * (D), the compressor's kv and scores (2*D each at ratio 4, D at 128),
     * then at ratio 4 the indexer compressor's kv and scores (2*Di each); its
     * compressed entries at compressed + compressed_offset[il],
     * [n_ctx/ratio][D], and at ratio 4 the indexer's keys at compressed +
     * indexer_offset[il], [n_ctx/4][Di]; NULL without such layers. Part of
     * the KV cache: compress_bytes in all, compressed_bytes the entries. */
    float *compress_rows, *compressed;
    size_t compress_bytes, compressed_bytes;
    size_t compress_offset[MODEL_MAX_LAYERS], compressed_offset[MODEL_MAX_LAYERS], indexer_offset[MODEL_MAX_LAYERS];
    int64_t compress_row_floats[MODEL_MAX_LAYERS];
    /* the lightning indexer of the ratio-4 layers: the batch's queries
     * [n_ubatch][Hi*Di] and head weights [n_ubatch][Hi], one token's scores
     * of the compressed entries and the ones it chooses [n_ctx/4] */
    float *indexer_q, *indexer_weights, *indexer_scores;
    int32_t *indexer_chosen;
    float *x2, *block_out2;    /* [n_ubatch][n_embd] a second input and output (gemma4's MoE beside its MLP) */
    /* gemma4's per-layer embeddings, Dp per layer: */
    float *per_layer_input;    /* [n_ubatch][n_layer][Dp] every layer's input P of the batch's tokens */
    float *per_layer_token_row;/* [n_layer*Dp] one token's row of per_layer_token_embd */
    float *per_layer_gate;     /* [n_ubatch][Dp] */
    int64_t mixer_floats;
    float *head_input;         /* [n_ubatch][2*n_embd] the draft head's [enorm(e), hnorm(h)]; NULL until
                                  run_state_enable_head */
    /* not owned: when set, forward_layers keeps every row's final hidden
     * state (the last layer's output after the final norm: what the output
     * matrix reads) of position p at hidden_rows + p * n_embd
     * ([n_ctx][n_embd]), for the draft head */
    float *hidden_rows;
    size_t buffer_bytes;       /* everything allocated here but the caches and the state */
} run_state;

/* swa: what the sliding-window layers keep (a ring, with a checkpoint
 * copy of it, or every position). */
int run_state_create(run_state *s, const model *m, int32_t n_ctx, int32_t n_ubatch, bool kv_f16,
                     enum bmoe_swa_cache swa, thread_pool *pool, bmoe_error *err);
/* Copies every ring into the checkpoint, or the checkpoint back into the
 * rings (nothing without a checkpoint). */
void run_state_ring_save(run_state *s, const model *m);
void run_state_ring_restore(run_state *s, const model *m);
void run_state_destroy(run_state *s);
/* Takes the pages of the KV cache and the recurrent state now (they are
 * allocated untouched), so that the memory a context will fill is held from
 * its creation. */
void run_state_commit(run_state *s);
/* Zeroes the recurrent state (an empty sequence). */
void run_state_clear_recurrent(run_state *s);

/* Turns the prediction probe on (its buffers); -1 when out of memory. */
int run_state_enable_probe(run_state *s, const model *m);
/* Adds what only the draft head reads (its block's KV rows, zeroed, and
 * its input buffer), which a state does not hold from its creation: a
 * context that never drafts with the head does not pay for them. Once is
 * enough (later calls do nothing); a model without a head has nothing to
 * add. 0, or -1 with err when out of memory (the state is unchanged). */
int run_state_enable_head(run_state *s, const model *m, bmoe_error *err);
/* The bytes run_state_enable_head would add (0 once it has, or without a
 * head). */
size_t run_state_head_bytes(const run_state *s, const model *m);

#endif
