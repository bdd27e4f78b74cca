/* Binding tensors to the model's views: each found by name and checked
 * (shape, type, the alignment of its data) before the forward pass reads it,
 * so that a malformed file fails at load with the tensor named rather than in
 * a kernel; and the groups of tensors most architectures share. */
#include "bind.h"

#include <stdio.h>
#include <string.h>

#include "../quant/quant.h"

static void format_shape(char *buffer, size_t size, const int64_t *ne, int n_dims)
{
    size_t used = (size_t)snprintf(buffer, size, "{");
    for (int i = 0; i < n_dims && used < size; i++)
        used += (size_t)snprintf(buffer + used, size - used, i ? ", %lld" : "%lld", (long long)ne[i]);
    if (used < size)
        snprintf(buffer + used, size - used, "}");
}

/* The alignment a type's data needs: a block's size is a multiple of its
 * alignment and no block holds a field wider than 8 bytes, so the largest
 * power of two dividing the block size, at most 8, covers every load (f32:
 * 4; f16, Q8_0: 2; MXFP4: 1; K-quants: 8, more than their f16 fields need,
 * which costs nothing on files with the usual 32-byte alignment). */
static uint64_t data_alignment(const quant_format *format)
{
    uint64_t bytes = (uint64_t)format->block_bytes;
    uint64_t lowest_bit = bytes & (~bytes + 1);
    return lowest_bit > 8 ? 8 : lowest_bit;
}

int model_bind(model *m, tensor_view *view, bool required, enum tensor_kind kind, int n_dims,
               const int64_t *ne, bmoe_error *err, const char *name_format, int layer)
{
    char name[160];
    snprintf(name, sizeof name, name_format, layer);
    memset(view, 0, sizeof *view);
    const gguf_tensor *tensor = gguf_find_tensor(m->file, name);
    if (!tensor) {
        /* a block past the layers run is the draft head's: the file declares
         * it (nextn_predict_layers), so it must be whole */
        bool head_block = strncmp(name_format, "blk.", 4) == 0 && layer >= m->hparams.n_layer;
        if (required && head_block)
            return error_set(err, "model: missing tensor '%s' (architecture %s; block %d is the MTP head "
                             "nextn_predict_layers declares)", name, m->hparams.architecture, layer);
        if (required)
            return error_set(err, "model: missing tensor '%s' (architecture %s)", name, m->hparams.architecture);
        return 0;
    }
    int64_t expected[4] = {1, 1, 1, 1};
    for (int i = 0; i < n_dims; i++)
        expected[i] = ne[i];
    for (int i = 0; i < 4; i++) {
        if (tensor->ne[i] != expected[i]) {
            char want[96], have[96];
            format_shape(want, sizeof want, expected, n_dims);
            format_shape(have, sizeof have, tensor->ne, (int)tensor->n_dims);
            return error_set(err, "model: tensor '%s' has shape %s, expected %s", name, have, want);
        }
    }
    const quant_format *format = quant_format_of(tensor->type);
    const char *type_name = format ? format->name : "invalid";
    switch (kind) {
    case TENSOR_VECTOR:
        if (tensor->type != TYPE_F32)
            return error_set(err, "model: tensor '%s' has type %s, expected F32", name, type_name);
        break;
    case TENSOR_MATRIX:
        if (!format || !format->vec_dot || format->block_elems <= 0 || ne[0] % format->block_elems != 0)
            return error_set(err, "model: tensor '%s' has type %s, which bmoe cannot multiply", name, type_name);
        break;
    case TENSOR_EMBEDDING:
        if (!format || !format->dequantize_row || format->block_elems <= 0 || ne[0] % format->block_elems != 0)
            return error_set(err, "model: tensor '%s' has type %s, which bmoe cannot decode", name, type_name);
        break;
    case TENSOR_TABLE:
        if (tensor->type != TYPE_I32)
            return error_set(err, "model: tensor '%s' has type %s, expected I32", name, type_name);
        break;
    }
    /* Kernels load a type's data as its blocks' fields (f32 values, f16
     * scales): a file whose general.alignment is 1 or 2 can place a tensor
     * where those loads would be misaligned. Refused whatever the dense
     * weights mode, since the file offset decides it. */
    uint64_t alignment = data_alignment(format);
    if (tensor->file_offset % alignment != 0 || (uintptr_t)tensor->data % alignment != 0)
        return error_set(err, "model: tensor '%s' (%s) starts at file offset %llu, not a multiple of the %llu bytes"
                         " bmoe needs for %s data (general.alignment is %u)", name, type_name,
                         (unsigned long long)tensor->file_offset, (unsigned long long)alignment, type_name,
                         (unsigned)gguf_alignment(m->file));
    view->name = tensor->name;
    view->type = tensor->type;
    memcpy(view->ne, tensor->ne, sizeof view->ne);
    view->row_bytes = quant_row_bytes(tensor->type, tensor->ne[0]);
    view->data = tensor->data;
    view->shard = tensor->shard;
    view->file_offset = tensor->file_offset;
    if ((uint64_t)view->row_bytes * (uint64_t)(tensor->ne[1] * tensor->ne[2] * tensor->ne[3]) > tensor->nbytes)
        return error_set(err, "model: tensor '%s' is smaller than its shape", name);
    if (kind == TENSOR_MATRIX) {
        size_t bytes = activation_row_bytes(tensor->type, tensor->ne[0]);
        if (bytes > m->max_activation_bytes)
            m->max_activation_bytes = bytes;
    }
    if (m->tensor_used)
        m->tensor_used[gguf_tensor_index(m->file, tensor)] = 1;
    return 0;
}

int model_bind_globals(model *m, bool tied_output, const char *output_norm_name, bmoe_error *err)
{
    int64_t n_embd = m->hparams.n_embd, n_vocab = m->hparams.n_vocab;
    model_weights *w = &m->weights;
    if (model_bind(m, &w->token_embd, BIND_REQUIRED, TENSOR_EMBEDDING, 2, (int64_t[]){n_embd, n_vocab}, err,
                   "token_embd.weight", 0) ||
        model_bind(m, &w->output_norm, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){n_embd}, err,
                   output_norm_name, 0) ||
        model_bind(m, &w->output, !tied_output, TENSOR_MATRIX, 2, (int64_t[]){n_embd, n_vocab}, err,
                   "output.weight", 0))
        return -1;
    if (!w->output.data && /* tied output head */
        model_bind(m, &w->output, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){n_embd, n_vocab}, err,
                   "token_embd.weight", 0))
        return -1;
    return 0;
}

/* Whether the file carries any tensor of block il. */
static bool block_present(const model *m, int il)
{
    char prefix[32];
    int length = snprintf(prefix, sizeof prefix, "blk.%d.", il);
    for (uint64_t i = 0; i < gguf_tensor_count(m->file); i++)
        if (strncmp(gguf_tensor_at(m->file, i)->name, prefix, (size_t)length) == 0)
            return true;
    return false;
}

int model_bind_head(model *m, const char *last_norm, bool last_norm_required, bmoe_error *err)
{
    model_hparams *hp = &m->hparams;
    int il = hp->n_layer;
    int64_t n_embd = hp->n_embd, n_vocab = hp->n_vocab;
    /* a file may declare the blocks and carry none of them (a converter
     * that leaves the MTP head out): it runs without a head, as llama.cpp
     * loads it; a block carried in part is refused below */
    hp->n_layer_head = hp->n_layer_nextn > 0 && block_present(m, il) ? 1 : 0;
    if (hp->n_layer_head == 0)
        return 0;
    /* a block of the layers' sizes with a KV cache of its own */
    hp->layer[il] = hp->layer[il - 1];
    hp->layer[il].kv_source = il;
    char last_norm_format[96];
    snprintf(last_norm_format, sizeof last_norm_format, "blk.%%d.%s", last_norm);
    layer_weights *l = &m->weights.layers[il];
    if (model_bind(m, &l->nextn_eh_proj, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){2 * n_embd, n_embd}, err,
                   "blk.%d.nextn.eh_proj.weight", il) ||
        model_bind(m, &l->nextn_enorm, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){n_embd}, err,
                   "blk.%d.nextn.enorm.weight", il) ||
        model_bind(m, &l->nextn_hnorm, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){n_embd}, err,
                   "blk.%d.nextn.hnorm.weight", il) ||
        model_bind(m, &l->nextn_shared_head_norm, last_norm_required, TENSOR_VECTOR, 1, (int64_t[]){n_embd}, err,
                   last_norm_format, il) ||
        model_bind(m, &l->nextn_shared_head_head, BIND_OPTIONAL, TENSOR_MATRIX, 2, (int64_t[]){n_embd, n_vocab},
                   err, "blk.%d.nextn.shared_head_head.weight", il) ||
        model_bind(m, &l->nextn_embed_tokens, BIND_OPTIONAL, TENSOR_EMBEDDING, 2, (int64_t[]){n_embd, n_vocab},
                   err, "blk.%d.nextn.embed_tokens.weight", il))
        return -1;
    return 0;
}

int model_bind_attention(model *m, int layer, bool value_optional, bmoe_error *err)
{
    const layer_hparams *lh = &m->hparams.layer[layer];
    int64_t n_embd = m->hparams.n_embd;
    int64_t q_dim = (int64_t)lh->n_head * lh->head_dim_k, k_dim = (int64_t)lh->n_head_kv * lh->head_dim_k;
    int64_t v_dim = (int64_t)lh->n_head_kv * lh->head_dim_v, attn_dim = (int64_t)lh->n_head * lh->head_dim_v;
    layer_weights *l = &m->weights.layers[layer];
    bool own_kv = lh->kv_source == layer;
    if (model_bind(m, &l->attn_norm, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){n_embd}, err,
                   "blk.%d.attn_norm.weight", layer) ||
        model_bind(m, &l->attn_q, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){n_embd, q_dim}, err,
                   "blk.%d.attn_q.weight", layer))
        return -1;
    if (own_kv &&
        (model_bind(m, &l->attn_k, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){n_embd, k_dim}, err,
                    "blk.%d.attn_k.weight", layer) ||
         model_bind(m, &l->attn_v, !value_optional, TENSOR_MATRIX, 2, (int64_t[]){n_embd, v_dim}, err,
                    "blk.%d.attn_v.weight", layer)))
        return -1;
    if (!own_kv) {
        /* its keys and values are the source layer's: K/V weights here mean
         * the file and the key that made the layer share disagree */
        char because[64];
        snprintf(because, sizeof because, "it attends over layer %d's KV cache", lh->kv_source);
        const char *own[] = {"attn_k.weight", "attn_v.weight", "attn_k.bias", "attn_v.bias"};
        for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
            if (model_refuse_tensor(m, layer, own[i], "KV-shared", because, err) != 0)
                return -1;
    }
    if (model_bind(m, &l->attn_q_bias, BIND_OPTIONAL, TENSOR_VECTOR, 1, (int64_t[]){q_dim}, err,
                   "blk.%d.attn_q.bias", layer) ||
        (own_kv &&
         (model_bind(m, &l->attn_k_bias, BIND_OPTIONAL, TENSOR_VECTOR, 1, (int64_t[]){k_dim}, err,
                     "blk.%d.attn_k.bias", layer) ||
          model_bind(m, &l->attn_v_bias, BIND_OPTIONAL, TENSOR_VECTOR, 1, (int64_t[]){v_dim}, err,
                     "blk.%d.attn_v.bias", layer))) ||
        model_bind(m, &l->attn_output, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){attn_dim, n_embd}, err,
                   "blk.%d.attn_output.weight", layer))
        return -1;
    return 0;
}

/* Rows first..first+count-1 of a bound matrix as a matrix of their own. */
static tensor_view matrix_rows(const tensor_view *whole, int64_t first, int64_t count)
{
    tensor_view part = *whole;
    uint64_t skipped = (uint64_t)first * (uint64_t)whole->row_bytes;
    part.ne[1] = count;
    part.data = (const uint8_t *)whole->data + skipped;
    part.file_offset += skipped;
    return part;
}

int model_bind_fused_qkv(model *m, int layer, bmoe_error *err)
{
    const layer_hparams *lh = &m->hparams.layer[layer];
    int64_t n_embd = m->hparams.n_embd;
    int64_t q_dim = (int64_t)lh->n_head * lh->head_dim_k, k_dim = (int64_t)lh->n_head_kv * lh->head_dim_k;
    int64_t v_dim = (int64_t)lh->n_head_kv * lh->head_dim_v, attn_dim = (int64_t)lh->n_head * lh->head_dim_v;
    layer_weights *l = &m->weights.layers[layer];
    tensor_view qkv;
    if (model_bind(m, &l->attn_norm, BIND_REQUIRED, TENSOR_VECTOR, 1, (int64_t[]){n_embd}, err,
                   "blk.%d.attn_norm.weight", layer) ||
        model_bind(m, &qkv, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){n_embd, q_dim + k_dim + v_dim}, err,
                   "blk.%d.attn_qkv.weight", layer) ||
        model_bind(m, &l->attn_output, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){attn_dim, n_embd}, err,
                   "blk.%d.attn_output.weight", layer))
        return -1;
    /* a row is whole blocks, so every part starts as aligned as the tensor
     * (model_bind's check) */
    l->attn_q = matrix_rows(&qkv, 0, q_dim);
    l->attn_k = matrix_rows(&qkv, q_dim, k_dim);
    l->attn_v = matrix_rows(&qkv, q_dim + k_dim, v_dim);
    return 0;
}

int model_bind_experts(model *m, int layer, bmoe_error *err)
{
    const model_hparams *hp = &m->hparams;
    int64_t n_embd = hp->n_embd, e = hp->n_expert, ff = hp->n_ff_exp;
    layer_weights *l = &m->weights.layers[layer];
    if (model_bind(m, &l->ffn_gate_inp, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){n_embd, e}, err,
                   "blk.%d.ffn_gate_inp.weight", layer) ||
        model_bind(m, &l->ffn_gate_up_exps, BIND_OPTIONAL, TENSOR_MATRIX, 3, (int64_t[]){n_embd, 2 * ff, e}, err,
                   "blk.%d.ffn_gate_up_exps.weight", layer))
        return -1;
    /* gate and up fused in one matrix, or two */
    if (!l->ffn_gate_up_exps.name &&
        (model_bind(m, &l->ffn_gate_exps, BIND_REQUIRED, TENSOR_MATRIX, 3, (int64_t[]){n_embd, ff, e}, err,
                    "blk.%d.ffn_gate_exps.weight", layer) ||
         model_bind(m, &l->ffn_up_exps, BIND_REQUIRED, TENSOR_MATRIX, 3, (int64_t[]){n_embd, ff, e}, err,
                    "blk.%d.ffn_up_exps.weight", layer)))
        return -1;
    if (model_bind(m, &l->ffn_down_exps, BIND_REQUIRED, TENSOR_MATRIX, 3, (int64_t[]){ff, n_embd, e}, err,
                   "blk.%d.ffn_down_exps.weight", layer))
        return -1;
    return 0;
}

int model_refuse_tensor(const model *m, int layer, const char *suffix, const char *layer_kind, const char *because,
                        bmoe_error *err)
{
    char name[160];
    snprintf(name, sizeof name, "blk.%d.%s", layer, suffix);
    if (!gguf_find_tensor(m->file, name))
        return 0;
    return error_set(err, "model: %s layer %d is %s (%s), but the file has tensor '%s'", m->hparams.architecture,
                     layer, layer_kind, because, name);
}

int model_bind_shared_expert(model *m, int layer, bmoe_error *err)
{
    int64_t n_embd = m->hparams.n_embd, fs = m->hparams.n_ff_shexp;
    layer_weights *l = &m->weights.layers[layer];
    if (model_bind(m, &l->ffn_gate_shexp, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){n_embd, fs}, err,
                   "blk.%d.ffn_gate_shexp.weight", layer) ||
        model_bind(m, &l->ffn_up_shexp, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){n_embd, fs}, err,
                   "blk.%d.ffn_up_shexp.weight", layer) ||
        model_bind(m, &l->ffn_down_shexp, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){fs, n_embd}, err,
                   "blk.%d.ffn_down_shexp.weight", layer))
        return -1;
    return 0;
}

int model_bind_dense_ffn(model *m, int layer, bmoe_error *err)
{
    int64_t n_embd = m->hparams.n_embd, ff = m->hparams.layer[layer].n_ff;
    layer_weights *l = &m->weights.layers[layer];
    if (ff <= 0)
        return error_set(err, "model: %s layer %d has a dense FFN but %s.feed_forward_length is 0 there",
                         m->hparams.architecture, layer, m->hparams.architecture);
    if (model_bind(m, &l->ffn_gate, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){n_embd, ff}, err,
                   "blk.%d.ffn_gate.weight", layer) ||
        model_bind(m, &l->ffn_up, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){n_embd, ff}, err,
                   "blk.%d.ffn_up.weight", layer) ||
        model_bind(m, &l->ffn_down, BIND_REQUIRED, TENSOR_MATRIX, 2, (int64_t[]){ff, n_embd}, err,
                   "blk.%d.ffn_down.weight", layer))
        return -1;
    return 0;
}
