/* A model as the forward pass sees it, in three plain structs (after
 * llama2.c): the hyperparameters read from GGUF metadata, the weights (views
 * of tensors inside the file's mapping, shapes in ggml order in comments) and
 * the run state (activation buffers and KV cache, allocated once per
 * context). An architecture is one file arch_<name>.c providing a bind
 * function (read hyperparameters, find and check tensors) and a forward
 * function, registered by one row in arch.c.
 *
 * Owns: the model's layer array and the run state's buffers. Does not own the
 * GGUF mapping (the caller's gguf_model outlives the model) nor the thread
 * pool (the context's). */
#ifndef BMOE_MODELS_MODEL_H
#define BMOE_MODELS_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../base/error.h"
#include "../gguf/gguf.h"
#include "../kernels/matmul.h"
#include "../ops/ops.h"
#include "bmoe.h"

/* block_count is at most 512 in GGUF (gguf.md 9.2). */
#define MODEL_MAX_LAYERS 512
#define MODEL_MAX_EXPERTS 512
#define MODEL_MAX_ROPE_PAIRS 256

/* One tensor of the file. name == NULL: absent (an optional tensor). */
typedef struct tensor_view {
    const char *name;
    uint32_t type;         /* enum tensor_type */
    int64_t ne[4];         /* ggml order, trailing dims 1 */
    size_t row_bytes;      /* bytes of one ne0-long row */
    const void *data;      /* NULL for a streamed expert matrix: its bytes come from the expert store */
    uint32_t shard;        /* where the bytes are in the file(s) */
    uint64_t file_offset;
} tensor_view;

/* What mixes information across positions in a layer. */
enum layer_mixer {
    MIXER_ATTENTION, /* causal attention over the KV cache */
    MIXER_SHORTCONV, /* gated short convolution (lfm2moe), a window of past inputs in the recurrent state */
    MIXER_DELTANET   /* Gated DeltaNet (qwen35moe): a convolution window and a matrix per head */
};

/* The feed-forward block of a layer. */
enum layer_ffn {
    FFN_DENSE, /* one SiLU-GLU MLP */
    FFN_MOE    /* routed experts */
};

/* A layer's own sizes. Architectures with uniform layers get the scalars of
 * model_hparams in every layer; the others read them from the per-layer
 * arrays of their keys. */
typedef struct layer_hparams {
    enum layer_mixer mixer;
    enum layer_ffn ffn;
    int32_t n_head, n_head_kv;     /* n_head_kv 0: no KV cache of its own */
    int32_t head_dim_k, head_dim_v;
    int32_t n_ff;                  /* dense FFN width (0 if none) */
    /* the layer whose KV cache this one attends over: itself, or (gemma4's
     * KV sharing) an earlier layer of the same kind; a layer reading
     * another's has no K/V projections and no cache of its own */
    int32_t kv_source;
} layer_hparams;

typedef struct model_hparams {
    char architecture[32];
    int32_t n_vocab;
    int32_t n_ctx_train;
    int32_t n_embd;
    int32_t n_layer;          /* block_count - nextn_predict_layers */
    int32_t n_layer_nextn;    /* nextn_predict_layers: the file's last layers, not run by the forward pass */
    /* the first of them bound as a draft head (layer n_layer, run by the
     * architecture's head_forward): 1, or 0 when the file has none or the
     * architecture does not run it; its KV cache and experts are a layer's */
    int32_t n_layer_head;
    /* n_head .. n_ff: the largest over the layers (what buffers are sized by);
     * layer[il] holds each layer's own */
    int32_t n_head, n_head_kv;
    int32_t head_dim_k, head_dim_v;
    int32_t n_rot;
    int32_t n_ff;             /* dense FFN width (0 if none) */
    int32_t n_conv_taps;      /* short convolution: taps per channel (shortconv.l_cache); 0: none */
    int32_t n_ff_shexp;       /* shared expert width (0 if none) */
    /* Gated DeltaNet: conv taps, Hk K/Q heads and Hv V heads of dk and dv */
    int32_t ssm_conv_taps, ssm_k_heads, ssm_v_heads, ssm_dk, ssm_dv;
    float rope_pair_factors[MODEL_MAX_ROPE_PAIRS]; /* IMROPE: 1, or infinity for a pair on stream 3 */
    int32_t n_expert, n_expert_used, n_ff_exp;
    /* grouped top-k (architectures.md 1.9 step 4): the experts in
     * n_expert_group runs of n_expert / n_expert_group, only the
     * n_expert_group_used best runs eligible; 0 or 1 group: no grouping.
     * Read for every architecture, as llama.cpp does. */
    int32_t n_expert_group, n_expert_group_used;
    /* the routing keys some architectures read (model_read_expert_weighting):
     * expert_gating_func (1 softmax, 2 sigmoid), expert_weights_norm and
     * expert_weights_scale (0: none) */
    int32_t expert_gating_func;
    bool expert_weights_norm;
    float expert_weights_scale;
    /* multi-head latent attention (deepseek2, architectures.md 9.3): each
     * head's query and key are mla_qk_nope + n_rot long, its value mla_v_dim;
     * queries through a rank-mla_q_lora bottleneck (0: attn_q directly), keys
     * and values decompressed from an mla_kv_lora latent (0: no MLA).
     * mla_absorbed: the cache holds per token only the normalized latent and
     * the rotated key (one KV head of kv_lora + n_rot, values the latent) and
     * the per-head matrices attn_k_b, attn_v_b act on the queries and the
     * attention output; otherwise (attn_kv_b files) every head's decompressed
     * key and value are cached */
    int32_t mla_q_lora, mla_kv_lora, mla_qk_nope, mla_v_dim;
    bool mla_absorbed;
    /* floats per token of run_state.mixer an attention mixer needs beyond
     * q, k, v and attn (MLA's intermediate projections); 0: none */
    int64_t n_mixer_floats;
    float rms_eps;
    float kq_scale;
    float final_softcap;      /* logits = c tanh(logits / c) when > 0 */
    rope_config rope;         /* full-attention layers */
    rope_config rope_swa;     /* sliding-window layers */
    int32_t n_swa;            /* sliding window size; 0: none */
    int32_t n_per_layer_input; /* gemma4 per-layer embeddings: Dp per layer; 0: none */
    bool layer_is_swa[MODEL_MAX_LAYERS];
    layer_hparams layer[MODEL_MAX_LAYERS];
} model_hparams;

/* One transformer block. A field an architecture does not use stays absent. */
typedef struct layer_weights {
    tensor_view attn_norm;         /* {n_embd} */
    tensor_view attn_q;            /* {n_embd, H*Dk} */
    tensor_view attn_k, attn_v;    /* {n_embd, Hkv*Dk}, {n_embd, Hkv*Dv} */
    tensor_view attn_q_bias;       /* {H*Dk} */
    tensor_view attn_k_bias, attn_v_bias;
    tensor_view attn_q_norm, attn_k_norm; /* {Dk}, per head */
    tensor_view attn_output;       /* {H*Dv, n_embd} */
    tensor_view attn_output_bias;  /* {n_embd} */
    /* multi-head latent attention (deepseek2), Dq = qk_nope + n_rot */
    tensor_view attn_q_a;          /* {n_embd, q_lora} */
    tensor_view attn_q_a_norm;     /* {q_lora} */
    tensor_view attn_q_b;          /* {q_lora, H*Dq} */
    tensor_view attn_kv_a_mqa;     /* {n_embd, kv_lora + n_rot}: the latent, then the shared rope key */
    tensor_view attn_kv_a_norm;    /* {kv_lora} */
    tensor_view attn_k_b;          /* {qk_nope, kv_lora, H}: head h's key part is attn_k_b[h] . latent */
    tensor_view attn_v_b;          /* {kv_lora, v_dim, H}: head h's value is attn_v_b[h] . latent */
    tensor_view attn_kv_b;         /* {kv_lora, H*(qk_nope + v_dim)}: older files' k_b and v_b in one */
    tensor_view attn_sinks;        /* {H} */
    tensor_view ffn_norm;          /* {n_embd}: the pre-FFN norm */
    /* dense FFN */
    tensor_view ffn_gate, ffn_up;  /* {n_embd, F} */
    tensor_view ffn_down;          /* {F, n_embd} */
    /* mixture of experts */
    tensor_view ffn_gate_inp;      /* router {n_embd, E} */
    tensor_view ffn_gate_inp_bias; /* {E} */
    tensor_view ffn_gate_exps, ffn_up_exps; /* {n_embd, Fe, E} */
    tensor_view ffn_down_exps;     /* {Fe, n_embd, E} */
    tensor_view ffn_gate_exps_bias, ffn_up_exps_bias; /* {Fe, E} */
    tensor_view ffn_down_exps_bias; /* {n_embd, E} */
    tensor_view exp_probs_b;       /* {E} selection bias: chooses experts, never weighs them */
    tensor_view ffn_gate_up_exps;  /* {n_embd, 2*Fe, E} fused: gate rows, then up rows (instead of the two) */
    tensor_view ffn_down_exps_scale; /* {E} per-expert output scale */
    tensor_view ffn_gate_inp_scale;  /* {n_embd} router input scale (gemma4) */
    /* gemma4's extra norms and scale */
    tensor_view attn_post_norm;    /* {n_embd} post_attention_norm: on the attention output */
    tensor_view ffn_post_norm;     /* {n_embd} post_ffw_norm: on the whole FFN branch */
    tensor_view ffn_post_norm_1;   /* {n_embd} on the dense MLP's output (MoE layers) */
    tensor_view ffn_pre_norm_2;    /* {n_embd} the experts' input norm */
    tensor_view ffn_post_norm_2;   /* {n_embd} on the experts' output */
    tensor_view layer_output_scale; /* {1} */
    /* gemma4's per-layer embedding input */
    tensor_view per_layer_inp_gate; /* {n_embd, Dp} inp_gate */
    tensor_view per_layer_proj;     /* {Dp, n_embd} proj */
    tensor_view per_layer_post_norm; /* {n_embd} post_norm */
    /* short convolution */
    tensor_view shortconv_in_proj;  /* {n_embd, 3*n_embd}: B, C, X */
    tensor_view shortconv_conv;     /* {L, n_embd} */
    tensor_view shortconv_out_proj; /* {n_embd, n_embd} */
    /* Gated DeltaNet, with kd = Hk*dk, vd = Hv*dv, C = 2*kd + vd */
    tensor_view attn_qkv;          /* {n_embd, C}: q, k, v rows */
    tensor_view attn_gate;         /* {n_embd, vd} output gate z */
    tensor_view ssm_conv1d;        /* {Kc, C} */
    tensor_view ssm_dt_bias;       /* {Hv} */
    tensor_view ssm_a;             /* {Hv} A = -exp(A_log) */
    tensor_view ssm_beta, ssm_alpha; /* {n_embd, Hv} */
    tensor_view ssm_norm;          /* {dv} */
    tensor_view ssm_out;           /* {vd, n_embd} */
    /* shared expert */
    tensor_view ffn_gate_inp_shexp; /* {n_embd} its scalar gate */
    tensor_view ffn_gate_shexp, ffn_up_shexp; /* {n_embd, Fs} */
    tensor_view ffn_down_shexp;    /* {Fs, n_embd} */
    /* the draft head's own tensors (a nextn block, architectures.md 1.12) */
    tensor_view nextn_eh_proj;     /* {2*n_embd, n_embd}: of [enorm(embedding), hnorm(hidden)] */
    tensor_view nextn_enorm, nextn_hnorm; /* {n_embd} */
    tensor_view nextn_shared_head_norm;   /* {n_embd}; absent: the model's output_norm */
} layer_weights;

typedef struct model_weights {
    tensor_view token_embd;  /* {n_embd, n_vocab} */
    tensor_view output_norm; /* {n_embd} */
    tensor_view output;      /* {n_embd, n_vocab}; token_embd when tied */
    /* gemma4's per-layer embeddings (Dp per layer, L = n_layer) */
    tensor_view per_layer_token_embd; /* {Dp*L, n_vocab} */
    tensor_view per_layer_model_proj; /* {n_embd, Dp*L} */
    tensor_view per_layer_proj_norm;  /* {Dp} */
    layer_weights *layers;   /* [n_layer + n_layer_nextn]: the draft head's block at n_layer */
} model_weights;

typedef struct model_arch model_arch;

typedef struct expert_store expert_store;

typedef struct model {
    const gguf_model *file;
    const model_arch *arch;
    model_hparams hparams;
    model_weights weights;
    expert_store *experts;       /* where the MoE layers get their experts' bytes; not owned */
    bmoe_lossy_params lossy;     /* the levers that change the routing (moe.c); all 0: exact */
    size_t max_activation_bytes; /* largest converted input row of any bound matrix */
    size_t head_activation_bytes; /* one token's converted inputs of a per-head stacked matrix
                                     (linear_per_head): every head's row; 0: none */
    uint8_t *tensor_used;        /* during model_init: [gguf_tensor_count] bound by a view */
} model;

/* ---- Run state ----------------------------------------------------------
 * Buffers for n_ubatch tokens and the KV cache for n_ctx positions. */
typedef struct run_state {
    int32_t n_ctx, n_ubatch;
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
    size_t kv_bytes;           /* K and V, as allocated */
    size_t kv_k_bytes;         /* K, as allocated */
    size_t head_k_bytes, head_v_bytes; /* what the draft head's block adds to each */

    /* Recurrent state of the layers that carry one (short-convolution
     * windows): layer il's at recurrent + recurrent_offset[il]. It describes
     * the positions before the next one evaluated; the context replays the
     * tokens to rebuild it after a truncate (context.c). */
    float *recurrent;
    size_t recurrent_offset[MODEL_MAX_LAYERS];
    size_t recurrent_floats;
    float *mixer;              /* [n_ubatch][mixer_floats] a recurrent mixer's projections */
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

/* One call of an architecture's forward pass: tokens at positions
 * position..position+n_tokens-1 (n_tokens <= n_ubatch). Rows first_output..
 * n_tokens-1 produce logits, row r at logits + (r - first_output) * n_vocab;
 * first_output == n_tokens: no logits. */
typedef struct forward_batch {
    const int32_t *tokens;
    int32_t n_tokens;
    int32_t position;
    int32_t first_output;
    float *logits;
} forward_batch;

typedef int (*model_bind_fn)(model *m, bmoe_error *err);
typedef int (*model_forward_fn)(const model *m, run_state *s, const forward_batch *batch, bmoe_error *err);
/* The draft head (layer n_layer) over a batch: row t's token is the one
 * after the position whose final hidden state (run_state.hidden_rows) is
 * hidden[t] ([n_tokens][n_embd]), evaluated at batch->position + t with the
 * head's own KV cache; rows first_output.. give the logits of the token
 * after next. hidden_out (may be NULL) receives every row's output hidden
 * state (after the head's norm: what its logits read), what a chained step
 * feeds back as its hidden. */
typedef int (*model_head_forward_fn)(const model *m, run_state *s, const forward_batch *batch, const float *hidden,
                                     float *hidden_out, bmoe_error *err);

struct model_arch {
    const char *name;          /* general.architecture */
    model_bind_fn bind;
    model_forward_fn forward;
    bool per_layer_hparams;    /* head counts and FFN widths may differ between layers */
    model_head_forward_fn head_forward; /* NULL: the architecture runs no draft head */
};

/* The architecture registry (arch.c). NULL for an unknown name. */
const model_arch *model_arch_find(const char *name);
/* Comma-separated names of the supported architectures, for messages. */
const char *model_arch_names(void);
/* The registry's rows in order; NULL past the last. */
const model_arch *model_arch_at(int index);

/* Finds the architecture of file and binds its weights. Every tensor of
 * the file must be bound by the architecture (or belong to one of the
 * nextn_predict_layers it does not run): a tensor left over means the keys
 * (block_count, ...) contradict the tensors, and is an error. */
int model_init(model *m, const gguf_model *file, bmoe_error *err);
void model_release(model *m);

/* Whether the tensor named so belongs to one of the nextn_predict_layers
 * blocks, which the forward pass never reads (nothing loads their bytes). */
bool model_tensor_in_nextn(const model *m, const char *name);

/* Turns the prediction probe on (its buffers); -1 when out of memory. */
int run_state_enable_probe(run_state *s, const model *m);
/* Adds what only the draft head reads (its block's KV rows, zeroed, and
 * its input buffer), which a state does not hold from its creation: a
 * context that never drafts with the head does not pay for them. Once is
 * enough (later calls do nothing); a model without a head has nothing to
 * add. 0, or -1 with err when out of memory (the state is unchanged). */
int run_state_enable_head(run_state *s, const model *m, bmoe_error *err);

int run_state_create(run_state *s, const model *m, int32_t n_ctx, int32_t n_ubatch, bool kv_f16,
                     thread_pool *pool, bmoe_error *err);
void run_state_destroy(run_state *s);
/* Takes the pages of the KV cache and the recurrent state now (they are
 * allocated untouched), so that the memory a context will fill is held from
 * its creation. */
void run_state_commit(run_state *s);
/* Zeroes the recurrent state (an empty sequence). */
void run_state_clear_recurrent(run_state *s);

/* ---- Helpers for architecture files (model.c) -------------------------- */

/* Reads the keys every architecture here shares (gguf.md 9.2-9.4): sizes,
 * head counts, eps, RoPE (with YaRN), experts, sliding window. */
int model_read_common_hparams(model *m, enum rope_type rope_type, bmoe_error *err);

/* 0 when value is positive; otherwise an error naming the key
 * "<architecture>.<suffix>" and whether it is absent or what it holds. */
int model_require_positive(const model *m, const char *suffix, int32_t value, bmoe_error *err);

/* The keys that weigh the routed experts, for the architectures that read
 * them (bailingmoe2, glm4moe): expert_gating_func (required, or
 * gating_default when absent; 1 softmax or 2 sigmoid), expert_weights_norm
 * (false when absent) and expert_weights_scale (0 when absent). */
int model_read_expert_weighting(model *m, bool gating_required, int32_t gating_default, bmoe_error *err);

/* Sliding-window layers from attention.sliding_window_pattern (a period, or
 * per-layer bools); default_period applies when the key is absent. */
int model_read_swa_pattern(model *m, uint32_t default_period, bmoe_error *err);

enum tensor_kind {
    TENSOR_VECTOR, /* f32 data read directly: norms, biases, sinks */
    TENSOR_MATRIX, /* a weight used through matmul_run */
    TENSOR_EMBEDDING /* rows dequantized one at a time */
};

/* Binds tensor `name` (printf format with the layer) to view, checking its
 * shape against ne (n_dims entries, the rest 1), its type against kind and
 * the alignment of its data against what the kernels load for its type.
 * required false: an absent tensor leaves the view empty and returns 0. */
int model_bind(model *m, tensor_view *view, bool required, enum tensor_kind kind, int n_dims,
               const int64_t *ne, bmoe_error *err, const char *name_format, int layer);

/* Shorthands. */
#define BIND_REQUIRED true
#define BIND_OPTIONAL false

/* token_embd, the final norm (output_norm.weight in most architectures) and
 * output. tied_output: an absent output.weight means the head shares
 * token_embd's matrix. */
int model_bind_globals(model *m, bool tied_output, const char *output_norm_name, bmoe_error *err);

/* The attention tensors every architecture here has in layer: attn_norm,
 * attn_q/k/v with their optional biases, attn_output, of the layer's own
 * sizes. value_optional: an absent attn_v means V = K (gemma4). A layer
 * attending over another's KV cache (kv_source) has no K/V tensors: present,
 * they are an error. */
int model_bind_attention(model *m, int layer, bool value_optional, bmoe_error *err);

/* attn_norm, a fused attn_qkv {n_embd, H*Dk + 2*Hkv*Dk} (no bias) and
 * attn_output of layer: attn_qkv's Q, K and V rows become the views attn_q,
 * attn_k and attn_v, three matrices in one tensor's bytes, so the forward
 * pass runs them as it runs separate ones. */
int model_bind_fused_qkv(model *m, int layer, bmoe_error *err);

/* The router and the stacked expert matrices of layer (no biases): gate,
 * up and down, or ffn_gate_up_exps (fused) and down. */
int model_bind_experts(model *m, int layer, bmoe_error *err);

/* The ungated shared expert of layer, n_ff_shexp wide: ffn_gate_shexp,
 * ffn_up_shexp, ffn_down_shexp. */
int model_bind_shared_expert(model *m, int layer, bmoe_error *err);

/* The dense SiLU-GLU FFN of layer: ffn_gate, ffn_up, ffn_down, width layer[il].n_ff. */
int model_bind_dense_ffn(model *m, int layer, bmoe_error *err);

/* 0 when blk.<layer>.<suffix> is absent; otherwise an error saying the
 * layer pattern (layer_kind, because) contradicts the tensor present. */
int model_refuse_tensor(const model *m, int layer, const char *suffix, const char *layer_kind, const char *because,
                        bmoe_error *err);

/* A per-layer u32 key (a scalar for every layer, or an array of n_layer
 * values) into out[n_layer]; fallback for every layer when absent. */
int model_read_layer_u32(const model *m, const char *suffix, uint32_t fallback, uint32_t maximum, int32_t *out,
                         bmoe_error *err);

/* A u32 key; required, or fallback when absent; in [minimum, maximum]. */
int model_read_u32(const model *m, const char *suffix, bool required, uint32_t fallback, uint32_t minimum,
                   uint32_t maximum, int32_t *out, bmoe_error *err);
/* A finite number key; required, or fallback when absent. */
int model_read_f32(const model *m, const char *suffix, bool required, float fallback, float *out, bmoe_error *err);

/* ---- Building blocks of the forward pass (blocks.c, moe.c) ------------- */

/* Row `token` of the embedding matrix into out (n_embd floats). */
int embedding_lookup(const model *m, int32_t token, float *out, bmoe_error *err);
/* Row `row` of a TENSOR_EMBEDDING view, dequantized into out (ne[0] floats). */
void embedding_row(const tensor_view *embd, int64_t row, float *out);

/* Positions of the batch's tokens into s->positions, their embedding rows
 * into s->h. */
int embed_batch(const model *m, run_state *s, const forward_batch *batch, bmoe_error *err);

/* outs[i] = weights[i] . x for each of n_tokens rows of x (x_stride floats
 * apart): all matrices read the same input, converted once per activation
 * format, and run as one parallel step. outs[i] rows are weights[i]->ne[1]
 * floats apart unless out_strides is given. */
void linear(run_state *s, const float *x, int64_t x_stride, int n_tokens, int n_matrices,
            const tensor_view *const *weights, float *const *outs, const int64_t *out_strides);

/* For each head h of a stacked {n_in, n_out, n_heads} matrix w and each of
 * n_tokens rows: out[t] + h * out_head_stride (n_out floats) = w[h] . the
 * n_in floats at x[t] + h * x_head_stride; rows x_stride and out_stride
 * floats apart. Every head runs in one parallel step. */
void linear_per_head(run_state *s, const tensor_view *w, const float *x, int64_t x_stride, int64_t x_head_stride,
                     int n_tokens, float *out, int64_t out_stride, int64_t out_head_stride);

/* x[t] += bias for each of n_tokens rows of n floats. */
void add_bias(float *x, const tensor_view *bias, int n_tokens, int64_t stride);

/* Fills the rope cache rows for the batch's positions. */
void rope_cache_batch(const rope_config *config, const int32_t *positions, int n_tokens, float *cache);

/* x = rmsnorm(h; attn_norm), then q, k, v = W x + b (each bias when
 * present) for n_tokens rows of s->h; q only where the layer has no attn_k
 * (it attends over another layer's cache). */
void attention_qkv(run_state *s, const model_hparams *hp, const layer_weights *layer, int n_tokens);

/* block_out = attn_output . attn + bias (when present) for rows first..
 * first+rows-1 of s->attn, written to block_out's first rows. */
void attention_output(run_state *s, const model_hparams *hp, const layer_weights *layer, int first, int rows);

/* Elements between a layer's KV heads in its part of the cache (s->n_ctx
 * positions): keys in attend's format (kernels.h), values a row per
 * position. */
void kv_head_strides(const run_state *s, const layer_hparams *lh, int64_t *k_head, int64_t *v_head);

/* Stores the batch's k and v rows in the cache of layer, at their positions;
 * nothing for a layer attending over another's cache. */
void kv_cache_store(run_state *s, const model_hparams *hp, int layer, int n_tokens);

/* attention(s->q) over the cache of layer's kv_source into s->attn for the batch. */
void attention_layer(run_state *s, const model_hparams *hp, int layer, int n_tokens,
                     const float *sinks);

/* out rows = rmsnorm(x rows; weight) for n_tokens rows of n floats. */
void rmsnorm_rows(float *out, const float *x, const tensor_view *weight, int n_tokens, int64_t n, float eps);

/* Per-head RMSNorm (weight may be absent) then RoPE on n_tokens rows of
 * n_heads heads, with the batch's rope cache rows. */
void norm_rope_heads(float *x, const tensor_view *norm, const rope_config *rope, const float *rope_cache,
                     int n_tokens, int n_heads, int head_dim, float eps);

/* Output-row selection (architectures.md 1.11): the first row of the batch
 * whose hidden state is still needed after the attention of `layer`. Every
 * layer but the last needs all rows (0); the last needs only the rows that
 * give logits (n_tokens when none do), unless a route callback is set, which
 * must see every (token, layer), or the draft head keeps every row's hidden
 * state (run_state.hidden_rows). Rows are independent after attention, so
 * the rows kept come out bit-identical. */
int forward_first_row(const run_state *s, const forward_batch *batch, int layer, int n_layer);

/* Before each layer: reports the previous segment to the trace callback (if
 * any) and fails with BMOE_ERR_ABORTED when the context's abort callback asks
 * to stop, so a slow token can be cancelled mid-way. */
int forward_check_abort(run_state *s, int layer, bmoe_error *err);

/* Compute trace: reports the segment that ends now (name "blk" for layer's,
 * "pre" or "post"; NULL only restarts the clock). */
void forward_trace(run_state *s, int layer, const char *name);
/* With trace_ops: reports the building block that ends now (op the kind,
 * name the block; "-<layer>" is appended inside a layer). The segment runs
 * from the previous block's end, so the blocks tile the forward pass. */
void forward_trace_op(run_state *s, const char *op, const char *name);

/* Final norm and output head for rows first_output..n_tokens-1 of s->h. */
void output_logits(const model *m, run_state *s, const forward_batch *batch);

/* One layer of an architecture's forward pass over the batch. */
typedef int (*forward_layer_fn)(const model *m, run_state *s, const forward_batch *batch, int layer,
                                bmoe_error *err);

/* The layer loop every architecture runs once the batch is embedded and its
 * RoPE caches filled: each layer after forward_check_abort, then the final
 * norm and head (output_logits). */
int forward_layers(const model *m, run_state *s, const forward_batch *batch, forward_layer_fn layer, bmoe_error *err);

/* The draft head's forward pass around its block (layer n_layer, run by
 * `layer`): h = eh_proj . [enorm(embedding(token)), hnorm(hidden)], the
 * block, x = norm(h; shared_head_norm, else output_norm), hidden_out = x
 * (when not NULL), logits = output . x for the rows that give them.
 * The caller filled nothing: this embeds and fills the RoPE cache. The
 * state must have the head's buffers (run_state_enable_head). */
int head_forward_layers(const model *m, run_state *s, const forward_batch *batch, const float *hidden,
                        forward_layer_fn layer, float *hidden_out, bmoe_error *err);

/* The attention mixer of the plain layers: q, k, v of norm(h; attn_norm) for
 * every row of the batch, the per-head norms where the layer has them, RoPE
 * (the sliding-window variant on SWA layers), the keys and values stored,
 * attention (with sinks when given) into s->attn. */
void attention_mixer(run_state *s, const model_hparams *hp, const layer_weights *layer, int il, int n_tokens,
                     const float *sinks);

enum moe_gating {
    MOE_GATING_SOFTMAX,        /* softmax over all E, top-K of the probabilities */
    MOE_GATING_SOFTMAX_WEIGHT, /* top-K of the raw logits, softmax over those K */
    MOE_GATING_SIGMOID         /* sigmoid of each logit, top-K of those (plus the selection bias) */
};
enum moe_activation { MOE_SILU_GLU, MOE_SWIGLU_OAI, MOE_GELU_GLU /* gelu_f16 */ };

typedef struct moe_config {
    enum moe_gating gating;
    bool normalize_weights;   /* w /= max(sum w, 2^-14) */
    float weights_scale;      /* applied when not 0 or 1 */
    enum moe_activation activation;
} moe_config;

/* The MoE of the keys model_read_expert_weighting read: their gating,
 * normalization and scale, SiLU-GLU experts. */
moe_config model_moe_config(const model_hparams *hp);

/* Expert selection from one row of ranking keys (the scores plus any
 * selection bias): experts[0..n_used) = the n_used highest keys, highest
 * first, ties to the lower index. With n_group > 1 the experts form n_group
 * runs of n_expert / n_group; a run scores the sum of its two highest keys
 * and only the n_group_used best-scoring runs are eligible (architectures.md
 * 1.9 step 4). The caller guarantees n_expert % n_group == 0, at least two
 * experts a run and n_used <= n_group_used * n_expert / n_group
 * (model_read_common_hparams checks the keys so). */
void moe_select_experts(const float *keys, int n_expert, int n_used, int n_group, int n_group_used,
                        int32_t *experts);

/* out[t] = sum over the K experts chosen for x[t] of w * expert(x[t]) for
 * the n_tokens rows of x (n_embd floats each), the tokens at positions[t].
 * The router reads router_x (gemma4 routes on another input than the
 * experts see), or x when NULL. The experts' bytes come from m->experts;
 * fails (a read that failed) with err filled, and then out is not to be
 * used. */
int moe_layer(run_state *s, const model *m, const layer_weights *layer, int layer_index, const moe_config *config,
              const float *x, const float *router_x, const int32_t *positions, int n_tokens, float *out,
              bmoe_error *err);

/* Where each layer's routed experts are in the file(s) (layers[n_layer]),
 * for the expert store. */
struct expert_layer_source;
void model_expert_sources(const model *m, struct expert_layer_source *layers);
/* Streaming: the expert matrices' views drop their mapping pointers, so
 * nothing can fault the experts in through the mapping. */
void model_detach_expert_data(model *m);

/* Points every bound view whose bytes have a copy (locate returns non-NULL
 * for its shard and file offset) at that copy: the dense weights' residency. */
typedef const void *(*model_locate_fn)(void *user, uint32_t shard, uint64_t offset);
void model_relocate_views(model *m, model_locate_fn locate, void *user);

/* Calls visit for every bound view (globals, then every layer's). */
void model_each_view(model *m, void (*visit)(void *user, tensor_view *view), void *user);

/* Gated short convolution (architectures.md 7.3) of the n_tokens rows of
 * s->x: [B|C|X] = in_proj x, y = C * conv(B * X) with layer il's window in
 * the recurrent state (every row moves it on), out = out_proj y for rows
 * first.. only, written to out's first rows (output-row selection). */
void shortconv_block(run_state *s, const model *m, int il, int n_tokens, int first, float *out);

/* Dense GLU feed-forward of n_tokens rows of x: out = down(act(gate x) *
 * up x), act SiLU or GELU. */
/* The plain pre-norm layer: h += attn_output . attention_mixer(norm(h)),
 * then ffn_residual (experts by config); the last layer goes on with the
 * rows that give logits only. */
int transformer_layer(const model *m, run_state *s, const forward_batch *batch, int il, const moe_config *config,
                      const float *sinks, bmoe_error *err);

/* The forward of an architecture made of transformer_layer only, its
 * routing the one the file's keys chose (model_moe_config): bailingmoe2's
 * and glm4moe's, whose differences are all in what their bind functions
 * bound. */
int keyed_transformer_forward(const model *m, run_state *s, const forward_batch *batch, bmoe_error *err);

/* h rows first..first+rows-1 += ffn(norm(h; ffn_norm)): the layer's routed
 * experts (config) plus its shared expert when it has one (scaled by
 * sigmoid(ffn_gate_inp_shexp . x) when it has that gate), or its dense
 * SiLU-GLU MLP. Returns 0 or -1 (moe_layer). */
int ffn_residual(run_state *s, const model *m, const layer_weights *layer, int il, const moe_config *config,
                 int first, int rows, bmoe_error *err);

void ffn_glu(run_state *s, const tensor_view *gate, const tensor_view *up, const tensor_view *down,
             enum moe_activation activation, const float *x, int n_tokens, float *out);

/* The shared expert with its scalar gate (qwen35moe, qwen2moe): out = sigmoid(
 * ffn_gate_inp_shexp . x) * down(silu(gate x) * up x). */
void shared_expert_gated(run_state *s, const layer_weights *layer, const float *x, int n_tokens, float *out);

/* Gated DeltaNet (architectures.md 8.4) of the n_tokens rows of s->x, the
 * state in layer il's recurrent state (every row moves it on); out =
 * ssm_out . o for rows first.. only, written to out's first rows. */
void deltanet_block(run_state *s, const model *m, int il, int n_tokens, int first, float *out);

/* Gated attention's projections (qwen35moe): x = rmsnorm(h; attn_norm); q
 * and its output gate, interleaved per head in attn_q, go to s->q and to the
 * first H*D floats of each s->mixer row; k and v as attention_qkv. */
void attention_qkv_gated(run_state *s, const model_hparams *hp, const layer_weights *layer, int il, int n_tokens);
/* s->attn = s->attn * sigmoid(gate) for n_tokens rows, the gates from attention_qkv_gated. */
void attention_gate(run_state *s, const model_hparams *hp, int il, int n_tokens);

#endif
