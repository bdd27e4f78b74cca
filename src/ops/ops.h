/* The math of a transformer layer on f32 activations: RMSNorm, RoPE,
 * softmax, attention over a KV cache, GLU activations and vector helpers.
 * Names are the math's names. Matrix products live in kernels/matmul.h.
 *
 * Batch invariance: every function here computes each output element with a
 * fixed sequence of float operations that depends only on that element's own
 * inputs (a token's row, a head, the key positions it sees), never on how many
 * tokens are in the batch or how work is split over threads. */
#ifndef BMOE_OPS_OPS_H
#define BMOE_OPS_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../kernels/kernels.h"
#include "../kernels/thread_pool.h"

/* ---- Normalization --------------------------------------------------- */

/* out = x / sqrt(mean(x^2) + eps) * weight (weight may be NULL). The sum of
 * squares runs in double like the reference engine; out may alias x. The
 * kernels' rmsnorm (kernels.h), the same bits in every set. */
void rmsnorm(float *out, const float *x, const float *weight, int64_t n, float eps);

/* RMSNorm of each of n_heads consecutive head_dim-long vectors in place,
 * all with the same head_dim-long weight. */
void rmsnorm_heads(float *x, const float *weight, int64_t head_dim, int64_t n_heads, float eps);

/* ---- Rotary position embedding ---------------------------------------- */

enum rope_type {
    ROPE_NORM = 0, /* pairs (x[2i], x[2i+1]) */
    ROPE_NEOX = 2  /* pairs (x[i], x[i + n_rot/2]) */
};

typedef struct rope_config {
    enum rope_type type;
    int n_rot;                 /* rotated dims per head (even) */
    float freq_base;
    float freq_scale;          /* 1 / rope.scaling.factor */
    float ext_factor;          /* 1 for YaRN, else 0 */
    float attn_factor;         /* rope.scaling.attn_factor (1 by default) */
    float beta_fast, beta_slow;
    int n_ctx_orig;            /* YaRN original context */
    const float *freq_factors; /* n_rot/2 divisors, or NULL */
} rope_config;

/* A rope_config with YaRN off, attn_factor 1, beta 32/1. */
rope_config rope_config_default(enum rope_type type, int n_rot, float freq_base);

/* Fills cache[0..n_rot/2) with cos and cache[n_rot/2..n_rot) with sin of the
 * rotation angles at position, magnitude included. */
void rope_cache_fill(const rope_config *config, int32_t position, float *cache);

/* Rotates n_heads head vectors (head_dim apart) in place with a cache row
 * from rope_cache_fill; dims n_rot..head_dim-1 are left unchanged. */
void rope_apply(const rope_config *config, float *x, int head_dim, int n_heads, const float *cache);
/* rope_apply's inverse: the rotation by minus the same angles (deepseek4
 * takes the rotation back out of its attention output). */
void rope_undo(const rope_config *config, float *x, int head_dim, int n_heads, const float *cache);

/* ---- Softmax and activations ------------------------------------------ */

/* In-place softmax: exps in float, their sum in double. These three are the
 * kernels' elementwise functions (kernels.h), the same bits in every set. */
void softmax(float *x, int64_t n);

/* out[i] = silu(gate[i]) * up[i]; out may alias gate or up. */
void silu_glu(float *out, const float *gate, const float *up, int64_t n);

/* gpt-oss clamped SwiGLU: g = min(gate, limit), u = clamp(up, -limit, limit),
 * out = g * sigmoid(alpha * g) * (u + 1). */
void swiglu_oai(float *out, const float *gate, const float *up, int64_t n, float alpha, float limit);

/* GELU (tanh form) as the reference engine evaluates it (architectures.md
 * 1.8): z <= -10 gives 0, z >= 10 gives z, otherwise z is rounded to f16 and
 * the result is f16(gelu(that value)), gelu computed in float -- the value
 * the reference's 65536-entry f16 table holds, computed here per call
 * instead of kept in a global table. */
float gelu_f16(float z);
/* out[i] = gelu_f16(gate[i]) * up[i]; out may alias gate or up. */
void gelu_glu_f16(float *out, const float *gate, const float *up, int64_t n);

/* x[i] = 1 / (1 + exp(-x[i])) in place. */
void sigmoid(float *x, int64_t n);

/* ---- Recurrent mixers -------------------------------------------------- */

/* x = x / max(sqrt(sum x^2), eps) in place, the sum in double. */
void l2norm(float *x, int64_t n, float eps);

/* ln(1 + e^z); z itself when z > 20, like the reference. */
float softplus(float z);

/* The largest DeltaNet head dv (Qwen3.5 uses 128). */
#define DELTANET_MAX_HEAD 512

/* One token of one Gated-DeltaNet head (architectures.md 8.4) on its state
 * S (dk x dv, S[a][b] at state[a * dv + b]): S = S * decay; delta = (v -
 * S^T k) * beta; S = S + k delta^T; out = S^T q / sqrt(dk), computed as
 * out = (decay S_old^T q + (k.q) delta) / sqrt(dk) so the state is read
 * once before it is updated. q and k are dk long (already L2-normalized), v
 * and out dv long (dv <= DELTANET_MAX_HEAD). Sums run in increasing a, so a
 * token's result does not depend on the batch. */
void deltanet_step(float *state, const float *q, const float *k, const float *v, float beta, float decay, int dk,
                   int dv, float *out);

/* Depthwise causal convolution over time (architectures.md 7.3), token by
 * token: for each of n_tokens rows of in (in_stride floats apart) and each of
 * n_channels channels, out[t][ch] = sum over k < n_taps of taps[ch][k] *
 * window[k], the window being the channel's previous n_taps - 1 inputs
 * (oldest first, from state and then from the earlier rows) and in[t][ch].
 * state [n_channels][n_taps - 1] carries the window across calls: on return
 * it holds the last n_taps - 1 inputs. out may alias in. Each output is one
 * fixed sum in tap order, so splitting the tokens over calls changes no bit. */
void causal_conv1d(float *out, int64_t out_stride, const float *in, int64_t in_stride, int n_tokens,
                   int64_t n_channels, const float *taps, int n_taps, float *state);

/* y[i] += x[i] */
void vector_add(float *y, const float *x, int64_t n);
/* y[i] += a * x[i] */
void vector_add_scaled(float *y, const float *x, float a, int64_t n);
/* y[i] = a * x[i] */
void vector_scale(float *y, const float *x, float a, int64_t n);

/* ---- Attention over the KV cache -------------------------------------- */

/* Causal multi-head attention of n_tokens query tokens against a KV cache
 * that already holds every key/value they may see (positions 0..pos of each
 * token). Consecutive query heads share a KV head (GQA). The kernel set's
 * attend (kernels.h) does the math, the query rounded to f16 for q.k on an
 * f16 cache, keys visited in increasing position order. */
typedef struct attention_params {
    int n_tokens;
    const int32_t *positions;  /* [n_tokens] */
    const float *q;            /* [n_tokens][q_stride], heads of head_dim_k */
    int64_t q_stride;
    int n_head, n_head_kv, head_dim_k, head_dim_v;
    const void *k_cache;       /* f16 or f32, in attend's format (kernels.h): KV head h's
                                * keys from element h * k_head_stride */
    const void *v_cache;       /* KV head h's value at position j: head_dim_v elements
                                * from h * v_head_stride + j * head_dim_v */
    int64_t k_head_stride, v_head_stride;
    bool cache_f16;            /* q is rounded to f16 for q.k when true */
    float kq_scale;
    int n_swa;                 /* sliding window (keys p0 with pos - p0 < n_swa); 0: none */
    int32_t ring;              /* the cache's positions when it is a ring (attend_job.ring); 0: every one */
    const float *sinks;        /* [n_head] extra logits, or NULL */
    float *out;                /* [n_tokens][out_stride], heads of head_dim_v */
    int64_t out_stride;
    float *scratch;            /* attention_scratch_floats() floats (n_ctx: the cache's
                                * positions) per pool thread */
    int64_t scratch_per_thread;
    const kernel_set *kernels; /* its attend; NULL: the scalar set */
} attention_params;

/* Floats of scratch each thread needs for a context of n_ctx positions. */
int64_t attention_scratch_floats(int n_ctx, int head_dim_k);

/* Runs attention, parallel over jobs of the heads that share a KV head, of
 * one token or of a few consecutive ones (attention.c). */
void attention(thread_pool *pool, const attention_params *params);

#endif
