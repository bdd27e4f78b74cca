/* Binding, for the architecture files' bind functions: a tensor found by
 * name and checked (shape, type, the alignment the kernels load its data at)
 * into a view of the model's weights and marked used, and the groups of
 * tensors most architectures share (bind.c). */
#ifndef BMOE_MODELS_BIND_H
#define BMOE_MODELS_BIND_H

#include <stdbool.h>
#include <stdint.h>

#include "model.h"

enum tensor_kind {
    TENSOR_VECTOR, /* f32 data read directly: norms, biases, sinks */
    TENSOR_MATRIX, /* a weight used through matmul_run */
    TENSOR_EMBEDDING, /* rows dequantized one at a time */
    TENSOR_TABLE      /* i32 data read directly: deepseek4's token-to-experts table */
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

/* The draft head (hparams.n_layer_head, architectures.md 1.12): when the
 * file declares nextn blocks and carries the first (none of its tensors:
 * no head), it becomes layer n_layer, a block of
 * the last layer's sizes with a KV cache of its own, and its own tensors
 * are bound: nextn.eh_proj, nextn.enorm and nextn.hnorm; last_norm, the
 * norm its logits read (nextn.shared_head_norm.weight in most files; when
 * optional and absent, output_norm); nextn.shared_head_head and
 * nextn.embed_tokens where the file has them (else the model's output and
 * token_embd). The caller adjusts the block's hparams and binds its layer
 * tensors as any layer's. */
int model_bind_head(model *m, const char *last_norm, bool last_norm_required, bmoe_error *err);

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

#endif
