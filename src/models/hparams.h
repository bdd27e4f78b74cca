/* The hyperparameters: what the GGUF metadata says of a model's shape (sizes,
 * head counts, RoPE, experts, sliding window), for the whole model and for
 * each layer, and the readers an architecture's bind function reads its keys
 * with (hparams.c). Owns nothing: model_hparams is a plain value inside the
 * model. */
#ifndef BMOE_MODELS_HPARAMS_H
#define BMOE_MODELS_HPARAMS_H

#include <stdbool.h>
#include <stdint.h>

#include "../ops/ops.h"
#include "bmoe.h"

/* block_count is at most 512 in GGUF (gguf.md 9.2). */
#define MODEL_MAX_LAYERS 512
#define MODEL_MAX_EXPERTS 512
#define MODEL_MAX_ROPE_PAIRS 256

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
     * expert_gating_func (enum expert_gating), expert_weights_norm and
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
    /* deepseek4 (architectures.md 11): hc_count residual streams mixed by
     * Sinkhorn-normalized weights (hc_sinkhorn_iterations, hc_eps); the
     * attention output projected per group of heads (o_groups of o_lora);
     * the SwiGLU clamps of the routed and the shared experts per layer (0:
     * none); per layer the KV compression ratio (0: the raw sliding window
     * only); the first hash_layer_count layers route by a token-id table */
    int32_t hc_count, hc_sinkhorn_iterations;
    float hc_eps;
    int32_t o_groups, o_lora;
    int32_t hash_layer_count;
    float swiglu_clamp_exp[MODEL_MAX_LAYERS], swiglu_clamp_shexp[MODEL_MAX_LAYERS];
    int32_t compress_ratio[MODEL_MAX_LAYERS];
    int32_t indexer_heads, indexer_dim, indexer_top_k; /* the lightning indexer of the ratio-4 layers */
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

typedef struct model model;

/* Reads the keys every architecture here shares (gguf.md 9.2-9.4): sizes,
 * head counts, eps, RoPE (with YaRN), experts, sliding window. */
int model_read_common_hparams(model *m, enum rope_type rope_type, bmoe_error *err);

/* 0 when value is positive; otherwise an error naming the key
 * "<architecture>.<suffix>" and whether it is absent or what it holds. */
int model_require_positive(const model *m, const char *suffix, int32_t value, bmoe_error *err);

/* llama.cpp's expert_gating_func numbers; a set of them is a mask of
 * EXPERT_GATING_BIT(g) */
enum expert_gating {
    EXPERT_GATING_NONE = 0, /* the architecture's default */
    EXPERT_GATING_SOFTMAX = 1,
    EXPERT_GATING_SIGMOID = 2,
    EXPERT_GATING_SQRT_SOFTPLUS = 4,
};
#define EXPERT_GATING_BIT(gating) (1u << (gating))
/* softmax or sigmoid, or none for the architecture's default */
#define EXPERT_GATINGS_SOFTMAX_SIGMOID                                                                       \
    (EXPERT_GATING_BIT(EXPERT_GATING_NONE) | EXPERT_GATING_BIT(EXPERT_GATING_SOFTMAX) |                      \
     EXPERT_GATING_BIT(EXPERT_GATING_SIGMOID))

/* The keys that weigh the routed experts, for the architectures that read
 * them (bailingmoe2, glm4moe, deepseek2, deepseek4): expert_gating_func
 * (required, or gating_default when absent; one of the gatings in the mask
 * `accepted`, none standing for gating_default), expert_weights_norm (false
 * when absent) and expert_weights_scale (0 when absent). */
int model_read_expert_weighting(model *m, bool gating_required, int32_t gating_default, uint32_t accepted,
                                bmoe_error *err);

/* Sliding-window layers from attention.sliding_window_pattern (a period, or
 * per-layer bools); default_period applies when the key is absent. */
int model_read_swa_pattern(model *m, uint32_t default_period, bmoe_error *err);

/* A per-layer u32 key (a scalar for every layer, or an array of n_layer
 * values) into out[n_layer]; fallback for every layer when absent. */
int model_read_layer_u32(const model *m, const char *suffix, uint32_t fallback, uint32_t maximum, int32_t *out,
                         bmoe_error *err);

/* A u32 key; required, or fallback when absent; in [minimum, maximum]. */
int model_read_u32(const model *m, const char *suffix, bool required, uint32_t fallback, uint32_t minimum,
                   uint32_t maximum, int32_t *out, bmoe_error *err);
/* A finite number key; required, or fallback when absent. */
int model_read_f32(const model *m, const char *suffix, bool required, float fallback, float *out, bmoe_error *err);

#endif
