/* A model as the forward pass sees it, in three plain structs (after
 * llama2.c): the hyperparameters read from GGUF metadata (hparams.h), the
 * weights (views of tensors inside the file's mapping, shapes in ggml order
 * in comments) and the run state (activation buffers and KV cache, allocated
 * once per context: run_state.h). An architecture is one file arch_<name>.c
 * providing a bind function (read hyperparameters, find and check tensors:
 * bind.h) and a forward function, registered by one row in arch.c.
 *
 * Owns: the model's layer array. Does not own the GGUF mapping (the caller's
 * gguf_model outlives the model). */
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
#include "hparams.h"
#include "run_state.h"

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
    /* deepseek4's attention (architectures.md 11): one shared KV head that is
     * both key and value, and a grouped low-rank output projection */
    tensor_view attn_kv;           /* {n_embd, D}: the KV head, normalized by attn_kv_a_norm {D} */
    tensor_view attn_output_a;     /* {H*D/G, G*o_lora}: group g's heads -> its o_lora rows */
    tensor_view attn_output_b;     /* {G*o_lora, n_embd} */
    /* deepseek4's hyper-connections, with hc streams: mixing weights of the
     * streams around the attention and the FFN */
    tensor_view hc_attn_fn, hc_ffn_fn;       /* {hc*n_embd, (2+hc)*hc} */
    tensor_view hc_attn_base, hc_ffn_base;   /* {(2+hc)*hc} */
    tensor_view hc_attn_scale, hc_ffn_scale; /* {3}: of the pre, post and comb parts */
    /* deepseek4's KV compressor (the compressed layers): the kv and gate
     * projections give 2*D per token at ratio 4 (the previous block's half,
     * then the current block's), D at ratio 128; ape the gate's bias by
     * position in the block */
    tensor_view attn_compressor_kv, attn_compressor_gate; /* {n_embd, 2*D} or {n_embd, D} */
    tensor_view attn_compressor_ape;  /* {2*D, 4} or {D, 128} */
    tensor_view attn_compressor_norm; /* {D} */
    /* the lightning indexer of the ratio-4 layers: which compressed entries a token attends to */
    tensor_view indexer_proj;         /* {n_embd, Hi} */
    tensor_view indexer_attn_q_b;     /* {q_lora, Hi*Di} */
    tensor_view indexer_compressor_kv, indexer_compressor_gate; /* {n_embd, 2*Di} */
    tensor_view indexer_compressor_ape;  /* {2*Di, 4} */
    tensor_view indexer_compressor_norm; /* {Di} */
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
    tensor_view ffn_gate_tid2eid;  /* {K, n_vocab} I32: a hash layer's experts for each token id (deepseek4) */
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
    /* the draft head's own tensors (a nextn block, architectures.md 1.12; model_bind_head) */
    tensor_view nextn_eh_proj;     /* {2*n_embd, n_embd}: of [enorm(embedding), hnorm(hidden)] */
    tensor_view nextn_enorm, nextn_hnorm; /* {n_embd} */
    tensor_view nextn_shared_head_norm;   /* {n_embd} the norm the head's logits read; absent: output_norm */
    tensor_view nextn_shared_head_head;   /* {n_embd, n_vocab}; absent: the model's output */
    tensor_view nextn_embed_tokens;       /* {n_embd, n_vocab}; absent: the model's token_embd */
} layer_weights;

typedef struct model_weights {
    tensor_view token_embd;  /* {n_embd, n_vocab} */
    tensor_view output_norm; /* {n_embd} */
    tensor_view output;      /* {n_embd, n_vocab}; token_embd when tied */
    /* gemma4's per-layer embeddings (Dp per layer, L = n_layer) */
    tensor_view per_layer_token_embd; /* {Dp*L, n_vocab} */
    tensor_view per_layer_model_proj; /* {n_embd, Dp*L} */
    tensor_view per_layer_proj_norm;  /* {Dp} */
    /* deepseek4's collapse of the hc streams before output_norm */
    tensor_view output_hc_fn;    /* {hc*n_embd, hc} */
    tensor_view output_hc_base;  /* {hc} */
    tensor_view output_hc_scale; /* {1} */
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
 * blocks, which the forward pass never reads: their bytes are loaded only
 * for the block bound as the draft head, and only when the model is loaded
 * to draft with it (bmoe_model_params.draft_head). */
bool model_tensor_in_nextn(const model *m, const char *name);
/* Whether it belongs to the nextn block bound as the draft head. */
bool model_tensor_in_head(const model *m, const char *name);

/* ---- Building blocks of the forward pass (blocks.c, moe.c) ------------- */

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

/* The positions layer il's part of the cache holds: s->swa_ring for a
 * sliding-window layer when the context keeps rings (position p at
 * p % swa_ring), else s->n_ctx. */
int32_t kv_positions(const run_state *s, const model_hparams *hp, int il);
/* Elements between layer il's KV heads in its part of the cache
 * (kv_positions of them): keys in attend's format (kernels.h), values a
 * row per position. */
void kv_head_strides(const run_state *s, const model_hparams *hp, int il, int64_t *k_head, int64_t *v_head);

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
 * (when not NULL), logits = head . x for the rows that give them. The
 * embedding and the head are the block's own (nextn.embed_tokens,
 * nextn.shared_head_head) where the file has them, else the model's.
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
    MOE_GATING_SIGMOID,        /* sigmoid of each logit, top-K of those (plus the selection bias) */
    MOE_GATING_SQRT_SOFTPLUS   /* sqrt(softplus(logit)), top-K of those (plus the selection bias) */
};
enum moe_activation {
    MOE_SILU_GLU,
    MOE_SWIGLU_OAI,
    MOE_GELU_GLU,      /* gelu_f16 */
    MOE_SILU_GLU_CLAMPED /* silu(min(gate, L)) * clamp(up, -L, L), L = moe_config.clamp (deepseek4) */
};

typedef struct moe_config {
    enum moe_gating gating;
    bool normalize_weights;   /* w /= max(sum w, 2^-14) */
    float weights_scale;      /* applied when not 0 or 1 */
    enum moe_activation activation;
    float clamp;              /* MOE_SILU_GLU_CLAMPED's limit L */
    /* a hash layer (deepseek4): token t of the batch uses the experts
     * expert_table[tokens[t]*K ..] (weighed by the router's scores of them)
     * instead of the router's choice; NULL: the router chooses */
    const int32_t *expert_table;
    const int32_t *tokens;
} moe_config;

/* DeepSeek-V4's SwiGLU clamp (architectures.md 1.8) on n values in place:
 * gate = min(gate, limit), up = clamp(up, -limit, limit); silu_glu then
 * gives silu(min(gate, L)) * clamp(up, -L, L). */
void moe_clamp_glu_inputs(float *gate, float *up, int64_t n, float limit);

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

/* Calls visit for every bound view (globals, then every layer's, the draft
 * head's included). */
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
/* Its layer (a forward_layer_fn): transformer_layer under the keys' routing. */
int keyed_transformer_layer(const model *m, run_state *s, const forward_batch *batch, int il, bmoe_error *err);
/* deepseek2's layer (its MLA attention and MoE), which its head's block runs too. */
int deepseek2_layer(const model *m, run_state *s, const forward_batch *batch, int il, bmoe_error *err);
/* Their draft head (model_head_forward_fn): head_forward_layers around a
 * transformer_layer of the same routing. */
int keyed_transformer_head_forward(const model *m, run_state *s, const forward_batch *batch, const float *hidden,
                                   float *hidden_out, bmoe_error *err);

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
