/* The qwen35moe draft head (its nextn block, model_head_forward_fn) against
 * an independent float64 computation written here from the tensors of an
 * F32 tiny-qwen35moe --nextn-layers 1 file, read through the GGUF reader
 * only: h = eh_proj . [rmsnorm(embedding; enorm), rmsnorm(hidden; hnorm)],
 * one gated full-attention block (architectures.md 8.3) over the head's own
 * cached positions with its MoE and gated shared expert (8.5), then x =
 * rmsnorm(h; shared_head_norm) (the output hidden state) and logits =
 * output . x. Checked: a batch of rows from an
 * empty cache, then one chained row at the next position attending over
 * them, logits and output hidden states both. The same reference with the
 * two halves of the concatenation swapped must disagree, so the comparison
 * can see the input fusion's order. Then the drafter (draft_mtp.c) after
 * a prefill: the hidden rows it captured give the prefill's logits through
 * the output matrix alone (so they are the final hidden states, after the
 * final norm), and its drafts and last logits are the reference's when the
 * reference is fed the same pairs (hidden at i, token at i + 1, position i)
 * and then chained on its own output; with a probability floor it stops
 * where the reference's softmax says (the first draft included). A context
 * holds the head's KV rows only once a generation drafts with it, and the
 * head refuses to run before. A model without the block refuses --mtp with
 * a load error naming it.
 *
 * The glm4moe, bailingmoe2 and deepseek2 heads (tiny presets, F32, one
 * nextn block with the tensors the released files carry; deepseek2's as
 * DeepSeek-V3's, tiny-deepseek3-mtp): their block is the architecture's
 * own layer (the head's logits are bit for bit those of head_forward_layers
 * around the architecture's layer function: transformer_layer under the
 * keys' routing, deepseek2's MLA and MoE layer; and every tensor of the
 * block is bound); around it, the block's input, the output hidden state
 * and the logits against float64 from the file's tensors, the block's
 * output taken from the engine: the fusion and its order, enorm and hnorm,
 * the last norm (GLM's and DeepSeek-V3's nextn.shared_head_norm, Ling's
 * layer_output_norm), the block's own embedding and output matrix (GLM's,
 * DeepSeek-V3's), and with those views cleared, the model's output_norm,
 * token_embd and output in their place; each other choice must disagree,
 * so the comparison sees it. The head's KV rows come as qwen35moe's (for
 * deepseek2 one latent-cache layer's: the latent and rope key, the latent
 * as values), and without the block --mtp is refused. */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "../mkmodel/mkmodel_run.h"
#include "bmoe.h"
#include "engine/draft_mtp.h"
#include "engine/engine.h"
#include "gguf/gguf.h"

enum { ROWS = 5, MAX_EMBD = 256, MAX_CTX = 16, MAX_EXPERTS = 64 };

typedef struct reference {
    const gguf_model *file;
    int layer, n_embd, n_head, n_head_kv, head_dim, n_rot, n_expert, n_used, n_ff, n_ff_shared, n_vocab;
    double eps, rope_base;
    bool swap_concat; /* the deliberate mistake */
    /* the head's KV cache, [position][Hkv*D] */
    double k_cache[MAX_CTX][MAX_EMBD * 2], v_cache[MAX_CTX][MAX_EMBD * 2];
} reference;

/* "<general.architecture>.<suffix>" into key. */
static void arch_key(const gguf_model *file, const char *suffix, char *key, size_t size)
{
    gguf_string arch = {"", 0};
    CHECK(gguf_get_string(file, "general.architecture", &arch));
    snprintf(key, size, "%.*s.%s", (int)arch.length, arch.data, suffix);
}

static int64_t key_int(const gguf_model *file, const char *suffix)
{
    char key[128];
    arch_key(file, suffix, key, sizeof key);
    int64_t value = -1;
    CHECK_MSG(gguf_get_int(file, key, &value), "key %s", key);
    return value;
}

static double key_float(const gguf_model *file, const char *suffix)
{
    char key[128];
    arch_key(file, suffix, key, sizeof key);
    float value = 0.0f;
    CHECK_MSG(gguf_get_float(file, key, &value), "key %s", key);
    return value;
}

/* The head block's tensor (or a global when layer < 0), F32 of ne0 x ne1 x ne2. */
static const float *tensor(const reference *r, int layer, const char *suffix, int64_t ne0, int64_t ne1, int64_t ne2)
{
    char name[128];
    if (layer >= 0)
        snprintf(name, sizeof name, "blk.%d.%s", layer, suffix);
    else
        snprintf(name, sizeof name, "%s", suffix);
    const gguf_tensor *t = gguf_find_tensor(r->file, name);
    bool fits = t && t->type == 0 && t->ne[0] == ne0 && t->ne[1] == ne1 && t->ne[2] == ne2;
    CHECK_MSG(fits, "tensor %s missing or not F32 {%lld, %lld, %lld}", name, (long long)ne0, (long long)ne1,
              (long long)ne2);
    return fits ? t->data : NULL;
}

static const float *block(const reference *r, const char *suffix, int64_t ne0, int64_t ne1, int64_t ne2)
{
    return tensor(r, r->layer, suffix, ne0, ne1, ne2);
}

static void ref_rmsnorm(double *out, const double *x, const float *weight, int n, double eps)
{
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += x[i] * x[i];
    double scale = 1.0 / sqrt(sum / n + eps);
    for (int i = 0; i < n; i++)
        out[i] = x[i] * scale * weight[i];
}

/* out[j] = sum_i w[j][i] x[i], w a {n_in, n_out} matrix (n_in contiguous). */
static void matvec(double *out, const float *w, const double *x, int n_in, int n_out)
{
    for (int j = 0; j < n_out; j++) {
        double sum = 0.0;
        for (int i = 0; i < n_in; i++)
            sum += (double)w[(int64_t)j * n_in + i] * x[i];
        out[j] = sum;
    }
}

static double ref_sigmoid(double x)
{
    return 1.0 / (1.0 + exp(-x));
}

static double ref_silu(double x)
{
    return x * ref_sigmoid(x);
}

/* NEOX rotation of the first n_rot dims of one head (pairs i, i + n_rot/2). */
static void rope_neox(double *x, int n_rot, int position, double base)
{
    for (int i = 0; i < n_rot / 2; i++) {
        double theta = position * pow(base, -2.0 * i / n_rot);
        double a = x[i], b = x[i + n_rot / 2];
        x[i] = a * cos(theta) - b * sin(theta);
        x[i + n_rot / 2] = a * sin(theta) + b * cos(theta);
    }
}

/* One head step: token at position with the main hidden state `hidden`;
 * logits (n_vocab) and the output hidden state (n_embd). */
static void reference_step(reference *r, int token, const float *hidden, int position, double *logits,
                           double *hidden_out)
{
    int E = r->n_embd, H = r->n_head, Hkv = r->n_head_kv, D = r->head_dim, X = r->n_expert, F = r->n_ff;
    int Fs = r->n_ff_shared, V = r->n_vocab;
    static double e[MAX_EMBD], hid[MAX_EMBD], concat[2 * MAX_EMBD], h[MAX_EMBD], x[MAX_EMBD];
    static double qg[4 * MAX_EMBD], q[2 * MAX_EMBD], k[2 * MAX_EMBD], v[2 * MAX_EMBD], o[2 * MAX_EMBD];
    static double out[MAX_EMBD], ffn[MAX_EMBD], gate[1024], up[1024], scores[MAX_EXPERTS];
    const float *embd = tensor(r, -1, "token_embd.weight", E, V, 1);
    for (int i = 0; i < E; i++) {
        e[i] = embd[(int64_t)token * E + i];
        hid[i] = hidden[i];
    }
    double *first = r->swap_concat ? concat + E : concat, *second = r->swap_concat ? concat : concat + E;
    ref_rmsnorm(first, e, block(r, "nextn.enorm.weight", E, 1, 1), E, r->eps);
    ref_rmsnorm(second, hid, block(r, "nextn.hnorm.weight", E, 1, 1), E, r->eps);
    matvec(h, block(r, "nextn.eh_proj.weight", 2 * E, E, 1), concat, 2 * E, E);

    /* gated attention */
    ref_rmsnorm(x, h, block(r, "attn_norm.weight", E, 1, 1), E, r->eps);
    matvec(qg, block(r, "attn_q.weight", E, 2 * H * D, 1), x, E, 2 * H * D);
    matvec(k, block(r, "attn_k.weight", E, Hkv * D, 1), x, E, Hkv * D);
    matvec(v, block(r, "attn_v.weight", E, Hkv * D, 1), x, E, Hkv * D);
    const float *q_norm = block(r, "attn_q_norm.weight", D, 1, 1), *k_norm = block(r, "attn_k_norm.weight", D, 1, 1);
    for (int head = 0; head < H; head++) {
        ref_rmsnorm(q + head * D, qg + 2 * head * D, q_norm, D, r->eps);
        rope_neox(q + head * D, r->n_rot, position, r->rope_base);
    }
    for (int head = 0; head < Hkv; head++) {
        double normed[MAX_EMBD];
        ref_rmsnorm(normed, k + head * D, k_norm, D, r->eps);
        rope_neox(normed, r->n_rot, position, r->rope_base);
        memcpy(k + head * D, normed, (size_t)D * sizeof *normed);
    }
    memcpy(r->k_cache[position], k, (size_t)(Hkv * D) * sizeof *k);
    memcpy(r->v_cache[position], v, (size_t)(Hkv * D) * sizeof *v);
    for (int head = 0; head < H; head++) {
        int kv_head = head / (H / Hkv);
        double weights[MAX_CTX], top = -INFINITY, total = 0.0;
        for (int p = 0; p <= position; p++) {
            double dot = 0.0;
            for (int d = 0; d < D; d++)
                dot += q[head * D + d] * r->k_cache[p][kv_head * D + d];
            weights[p] = dot / sqrt((double)D);
            top = weights[p] > top ? weights[p] : top;
        }
        for (int p = 0; p <= position; p++)
            total += weights[p] = exp(weights[p] - top);
        for (int d = 0; d < D; d++) {
            double sum = 0.0;
            for (int p = 0; p <= position; p++)
                sum += weights[p] / total * r->v_cache[p][kv_head * D + d];
            o[head * D + d] = sum * ref_sigmoid(qg[2 * head * D + D + d]);
        }
    }
    matvec(out, block(r, "attn_output.weight", H * D, E, 1), o, H * D, E);
    for (int i = 0; i < E; i++)
        h[i] += out[i];

    /* softmax-routed experts, top-K renormalized, and the gated shared expert */
    ref_rmsnorm(x, h, block(r, "post_attention_norm.weight", E, 1, 1), E, r->eps);
    matvec(scores, block(r, "ffn_gate_inp.weight", E, X, 1), x, E, X);
    double top = -INFINITY, total = 0.0;
    for (int i = 0; i < X; i++)
        top = scores[i] > top ? scores[i] : top;
    for (int i = 0; i < X; i++)
        total += scores[i] = exp(scores[i] - top);
    bool chosen[MAX_EXPERTS] = {false};
    int picked[MAX_EXPERTS];
    double picked_total = 0.0;
    for (int slot = 0; slot < r->n_used; slot++) {
        int best = -1;
        for (int i = 0; i < X; i++)
            if (!chosen[i] && (best < 0 || scores[i] > scores[best]))
                best = i;
        chosen[best] = true;
        picked[slot] = best;
        picked_total += scores[best] / total;
    }
    memset(ffn, 0, sizeof ffn);
    const float *gate_exps = block(r, "ffn_gate_exps.weight", E, F, X), *up_exps = block(r, "ffn_up_exps.weight", E, F, X);
    const float *down_exps = block(r, "ffn_down_exps.weight", F, E, X);
    for (int slot = 0; slot < r->n_used; slot++) {
        int expert = picked[slot];
        double weight = scores[expert] / total / picked_total;
        matvec(gate, gate_exps + (int64_t)expert * F * E, x, E, F);
        matvec(up, up_exps + (int64_t)expert * F * E, x, E, F);
        for (int j = 0; j < F; j++)
            gate[j] = ref_silu(gate[j]) * up[j];
        matvec(out, down_exps + (int64_t)expert * E * F, gate, F, E);
        for (int i = 0; i < E; i++)
            ffn[i] += weight * out[i];
    }
    matvec(gate, block(r, "ffn_gate_shexp.weight", E, Fs, 1), x, E, Fs);
    matvec(up, block(r, "ffn_up_shexp.weight", E, Fs, 1), x, E, Fs);
    for (int j = 0; j < Fs; j++)
        gate[j] = ref_silu(gate[j]) * up[j];
    matvec(out, block(r, "ffn_down_shexp.weight", Fs, E, 1), gate, Fs, E);
    double shared_gate;
    matvec(&shared_gate, block(r, "ffn_gate_inp_shexp.weight", E, 1, 1), x, E, 1);
    for (int i = 0; i < E; i++)
        h[i] += ffn[i] + out[i] * ref_sigmoid(shared_gate);
    ref_rmsnorm(x, h, block(r, "nextn.shared_head_norm.weight", E, 1, 1), E, r->eps);
    memcpy(hidden_out, x, (size_t)E * sizeof *x);
    matvec(logits, tensor(r, -1, "output.weight", E, V, 1), x, E, V);
}

static double max_abs(const double *values, int n)
{
    double m = 0.0;
    for (int i = 0; i < n; i++)
        m = fabs(values[i]) > m ? fabs(values[i]) : m;
    return m;
}

static void check_drafter(const char *path, const reference *base);
static void check_memory(const char *path, int attention_layers, int n_head_kv, int head_dim_k, int head_dim_v);

/* The largest |engine - reference| over n values, relative to the reference's scale. */
static double relative_error(const float *engine, const double *ref, int n)
{
    double worst = 0.0;
    for (int i = 0; i < n; i++)
        worst = fabs(engine[i] - ref[i]) > worst ? fabs(engine[i] - ref[i]) : worst;
    double scale = max_abs(ref, n);
    return worst / (scale > 1.0 ? scale : 1.0);
}

static int argmax_f(const float *x, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}

static int argmax_d(const double *x, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}

/* F32 weights, an f32 KV cache and f32 sums against float64: the head's
 * logits agree to ~1e-5 of their scale; 1e-3 leaves room for summation
 * order and is far below what a wrong input, norm or position gives. */
#define TOLERANCE 1e-3

/* The model at path and a context of MAX_CTX positions on one thread with
 * an F32 KV cache, *loaded its model; NULL (nothing to free) on failure. */
static bmoe_context *open_context(const char *path, bmoe_model **loaded)
{
    bmoe_error err = {0};
    *loaded = bmoe_model_load(path, NULL, &err);
    CHECK_MSG(*loaded != NULL, "load: %s", err.message);
    bmoe_context_params cp = bmoe_context_default_params();
    cp.n_ctx = MAX_CTX;
    cp.n_threads = 1;
    cp.kv_type = BMOE_KV_F32;
    bmoe_context *context = *loaded ? bmoe_context_create(*loaded, &cp, &err) : NULL;
    CHECK_MSG(context != NULL, "context: %s", err.message);
    if (!context) {
        bmoe_model_free(*loaded);
        *loaded = NULL;
    }
    return context;
}

static void check_head(const char *path)
{
    bmoe_error err;
    error_clear(&err);
    gguf_model *file = gguf_open(path, &err);
    CHECK_MSG(file != NULL, "gguf_open: %s", err.message);
    if (!file)
        return;
    static reference r, swapped;
    memset(&r, 0, sizeof r);
    r.file = file;
    r.layer = (int)(key_int(file, "block_count") - key_int(file, "nextn_predict_layers"));
    r.n_embd = (int)key_int(file, "embedding_length");
    r.n_head = (int)key_int(file, "attention.head_count");
    r.n_head_kv = (int)key_int(file, "attention.head_count_kv");
    r.head_dim = (int)key_int(file, "attention.key_length");
    r.n_rot = (int)key_int(file, "rope.dimension_count");
    r.n_expert = (int)key_int(file, "expert_count");
    r.n_used = (int)key_int(file, "expert_used_count");
    r.n_ff = (int)key_int(file, "expert_feed_forward_length");
    r.n_ff_shared = (int)key_int(file, "expert_shared_feed_forward_length");
    r.eps = key_float(file, "attention.layer_norm_rms_epsilon");
    r.rope_base = key_float(file, "rope.freq_base");
    const gguf_tensor *embd = gguf_find_tensor(file, "token_embd.weight");
    r.n_vocab = embd ? (int)embd->ne[1] : 0;
    /* IMROPE's text sections cover every rotated pair in this file
     * ([3, 3, 2, 0] of 8 pairs, architectures.md 1.5), so it is NEOX here */
    const gguf_kv *sections = gguf_find_kv(file, "qwen35moe.rope.dimension_sections");
    CHECK_MSG(sections && gguf_array_int(sections, 0) == 3 && gguf_array_int(sections, 1) == 3 &&
                  gguf_array_int(sections, 2) == 2 && gguf_array_int(sections, 3) == 0 && r.n_rot == 16,
              "rope sections of the tiny preset changed: the reference's plain NEOX would not hold");
    CHECK_MSG(r.layer == 4 && r.n_embd <= MAX_EMBD && r.n_expert <= MAX_EXPERTS && r.n_ff <= 1024 &&
                  r.n_ff_shared <= 1024 && r.n_head_kv * r.head_dim <= 2 * MAX_EMBD,
              "sizes of the tiny preset");
    swapped = r;
    swapped.swap_concat = true;

    bmoe_model *loaded = NULL;
    bmoe_context *context = open_context(path, &loaded);
    if (!context) {
        gguf_close(file);
        return;
    }
    const model *m = &context->model->model;
    CHECK_MSG(m->hparams.n_layer_head == 1 && m->arch->head_forward, "the head is bound");
    /* a context holds no head cache until drafting asks for it */
    int32_t token = 17;
    forward_batch early = {.tokens = &token, .n_tokens = 1, .position = 0, .first_output = 1, .logits = NULL};
    static float early_hidden[MAX_EMBD];
    CHECK_MSG(m->arch->head_forward(m, &context->state, &early, early_hidden, NULL, &err) != 0 &&
                  strstr(err.message, "no cache"),
              "the head ran without its cache: %s", err.message);
    CHECK_MSG(run_state_enable_head(&context->state, m, &err) == 0, "run_state_enable_head: %s", err.message);

    int E = r.n_embd, V = r.n_vocab;
    static float hidden[ROWS + 1][MAX_EMBD], engine_hidden[ROWS][MAX_EMBD], engine_logits[ROWS][512];
    static double ref_logits[ROWS + 1][512], ref_hidden[ROWS + 1][MAX_EMBD], wrong_logits[512], wrong_hidden[MAX_EMBD];
    int32_t tokens[ROWS + 1] = {17, 301, 5, 444, 99, 256};
    /* main hidden states of the residual stream's scale (a few units) */
    uint32_t seed = 12345;
    for (int t = 0; t < ROWS; t++)
        for (int i = 0; i < E; i++) {
            seed = seed * 1664525u + 1013904223u;
            hidden[t][i] = ((float)(seed >> 8) / (float)(1u << 24) - 0.5f) * 4.0f;
        }
    CHECK_MSG(V <= 512, "vocabulary of the tiny preset");

    /* rows 0..ROWS-2 as one batch from an empty cache, logits for all */
    int batch_rows = ROWS - 1;
    forward_batch batch = {.tokens = tokens, .n_tokens = batch_rows, .position = 0, .first_output = 0,
                           .logits = engine_logits[0]};
    context->state.single_token = false;
    int status = m->arch->head_forward(m, &context->state, &batch, hidden[0], engine_hidden[0], &err);
    CHECK_MSG(status == 0, "head_forward: %s", err.message);
    for (int t = 0; t < batch_rows; t++)
        reference_step(&r, tokens[t], hidden[t], t, ref_logits[t], ref_hidden[t]);
    /* then one chained row: the head's own output hidden state of the last
     * row, the next token, the next position, attending over the batch's */
    memcpy(hidden[batch_rows], engine_hidden[batch_rows - 1], (size_t)E * sizeof(float));
    forward_batch step = {.tokens = tokens + batch_rows, .n_tokens = 1, .position = batch_rows, .first_output = 0,
                          .logits = engine_logits[batch_rows]};
    context->state.single_token = true;
    status = m->arch->head_forward(m, &context->state, &step, hidden[batch_rows], engine_hidden[batch_rows], &err);
    CHECK_MSG(status == 0, "head_forward (chained): %s", err.message);
    reference_step(&r, tokens[batch_rows], hidden[batch_rows], batch_rows, ref_logits[batch_rows],
                   ref_hidden[batch_rows]);

    for (int t = 0; t < ROWS; t++) {
        double logit_error = relative_error(engine_logits[t], ref_logits[t], V);
        double hidden_error = relative_error(engine_hidden[t], ref_hidden[t], E);
        CHECK_MSG(logit_error < TOLERANCE && hidden_error < TOLERANCE,
                  "row %d: head logits off by %.3g, hidden by %.3g of their scale", t, logit_error, hidden_error);
        CHECK_MSG(argmax_f(engine_logits[t], V) == argmax_d(ref_logits[t], V), "row %d: another argmax", t);
        /* the logits are not flat: a draft is a real choice */
        CHECK_MSG(max_abs(ref_logits[t], V) > 0.1, "row %d: flat logits", t);
    }
    /* the swapped concatenation is visibly another head */
    for (int t = 0; t < batch_rows; t++)
        reference_step(&swapped, tokens[t], hidden[t], t, wrong_logits, wrong_hidden);
    double wrong = relative_error(engine_logits[batch_rows - 1], wrong_logits, V);
    CHECK_MSG(wrong > 100 * TOLERANCE, "swapping enorm and hnorm halves changed the logits by only %.3g", wrong);

    bmoe_context_free(context);
    bmoe_model_free(loaded);
    check_drafter(path, &r);
    int attention_layers = 0; /* the others are Gated DeltaNet */
    for (int il = 0; il < r.layer; il++) {
        char name[64];
        snprintf(name, sizeof name, "blk.%d.attn_k.weight", il);
        attention_layers += gguf_find_tensor(file, name) != NULL;
    }
    check_memory(path, attention_layers, r.n_head_kv, r.head_dim, r.head_dim);
    gguf_close(file);
}

/* The largest logit's lead over the second, relative to the logits' scale. */
static double top_margin(const double *x, int n)
{
    int best = argmax_d(x, n);
    double second = -INFINITY;
    for (int i = 0; i < n; i++)
        if (i != best && x[i] > second)
            second = x[i];
    return (x[best] - second) / (max_abs(x, n) > 1.0 ? max_abs(x, n) : 1.0);
}

enum { PROMPT = 8, DRAFTS = 3 };

/* softmax(x)'s largest value, in double from the definition. */
static double top_probability(const double *x, int n)
{
    double top = x[argmax_d(x, n)], sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += exp(x[i] - top);
    return 1.0 / sum;
}

/* The drafter's probability floor against the reference's probabilities
 * of the same drafts (p_top[k] the k-th's): a floor just above p_top[k]
 * (5 % above) stops the drafts at the first whose probability is under
 * it, which may be the first (0 drafts); just below (5 %), draft k passes.
 * A floor within 4 % of any draft's probability would test float32 logits
 * against float64 ones, not the rule: skipped. Each call drafts again from the same caught-up state
 * (draft_mtp_truncate gives back the last row). */
static void check_floor(draft_mtp *drafter, bmoe_context *context, const int32_t *want, const double *p_top)
{
    bmoe_error err;
    error_clear(&err);
    int tested = 0;
    for (int k = 0; k < DRAFTS; k++)
        for (int side = 0; side < 2; side++) {
            double floor = p_top[k] * (side ? 0.95 : 1.05);
            bool clear = floor > 0.0 && floor <= 1.0;
            for (int j = 0; j < DRAFTS; j++)
                clear &= fabs(p_top[j] - floor) > 0.04 * p_top[j];
            if (!clear)
                continue;
            tested++;
            int expected = 0;
            while (expected < DRAFTS && p_top[expected] >= floor)
                expected++;
            drafter->p_min = (float)floor;
            draft_mtp_truncate(drafter, PROMPT);
            int32_t drafts[DRAFTS];
            int32_t count = draft_mtp_propose(drafter, context, drafts, DRAFTS, &err);
            CHECK_MSG(count == expected && drafter->filled == PROMPT,
                      "floor %.4f (draft %d's probability %.4f %s): %d drafts, want %d (head rows %d)", floor, k,
                      p_top[k], side ? "below it" : "above it", count, expected, drafter->filled);
            for (int i = 0; i < count && i < expected; i++)
                CHECK_MSG(drafts[i] == want[i], "floor %.4f: draft %d changed", floor, i);
        }
    CHECK_MSG(tested > 0, "every floor near a draft's probability (%.4f %.4f %.4f): none tested", p_top[0],
              p_top[1], p_top[2]);
    /* 1 keeps nothing (no draft is certain on random weights), 0 everything */
    drafter->p_min = 1.0f;
    draft_mtp_truncate(drafter, PROMPT);
    int32_t drafts[DRAFTS];
    CHECK(draft_mtp_propose(drafter, context, drafts, DRAFTS, &err) == 0 && drafter->filled == PROMPT);
    drafter->p_min = 0.0f;
    draft_mtp_truncate(drafter, PROMPT);
    CHECK(draft_mtp_propose(drafter, context, drafts, DRAFTS, &err) == DRAFTS && drafts[0] == want[0]);
}

static void check_drafter(const char *path, const reference *base)
{
    bmoe_error err;
    error_clear(&err);
    bmoe_model *loaded = bmoe_model_load(path, NULL, &err);
    bmoe_context_params cp = bmoe_context_default_params();
    cp.n_ctx = MAX_CTX;
    cp.n_threads = 2;
    cp.n_ubatch = 3; /* the catch-up in several batches */
    cp.kv_type = BMOE_KV_F32;
    bmoe_context *context = loaded ? bmoe_context_create(loaded, &cp, &err) : NULL;
    CHECK_MSG(context != NULL, "drafter context: %s", err.message);
    if (!context) {
        bmoe_model_free(loaded);
        return;
    }
    static draft_mtp drafter;
    CHECK_MSG(draft_mtp_init(&drafter, context, &err) == 0, "draft_mtp_init: %s", err.message);
    draft_mtp_start(&drafter, 0);
    int E = base->n_embd, V = base->n_vocab;
    int32_t prompt[PROMPT + 1] = {3, 141, 59, 265, 358, 97, 93, 238, 46};
    static float main_logits[512];
    CHECK_MSG(bmoe_eval(context, prompt, PROMPT, main_logits, false, NULL, &err) == 0, "eval: %s", err.message);
    /* the captured row of the prompt's last position gives its logits
     * through the output matrix */
    static double row[MAX_EMBD], logits[512], hidden_out[MAX_EMBD];
    for (int i = 0; i < E; i++)
        row[i] = drafter.hidden_rows[(int64_t)(PROMPT - 1) * E + i];
    matvec(logits, tensor(base, -1, "output.weight", E, V, 1), row, E, V);
    CHECK_MSG(relative_error(main_logits, logits, V) < TOLERANCE,
              "the captured hidden row does not give the prefill's logits (off by %.3g)",
              relative_error(main_logits, logits, V));

    context->tokens[PROMPT] = prompt[PROMPT]; /* the next token, not evaluated */
    int32_t drafts[DRAFTS];
    int32_t count = draft_mtp_propose(&drafter, context, drafts, DRAFTS, &err);
    CHECK_MSG(count == DRAFTS, "draft_mtp_propose: %d drafts: %s", count, err.message);
    CHECK_MSG(drafter.filled == PROMPT, "the head's rows from the main model: %d, want %d", drafter.filled, PROMPT);

    static reference r;
    r = *base;
    memset(r.k_cache, 0, sizeof r.k_cache);
    memset(r.v_cache, 0, sizeof r.v_cache);
    static float step_hidden[MAX_EMBD];
    for (int i = 0; i < PROMPT; i++)
        reference_step(&r, prompt[i + 1], drafter.hidden_rows + (int64_t)i * E, i, logits, hidden_out);
    double p_top[DRAFTS] = {0};
    bool same_drafts = count == DRAFTS;
    for (int k = 0; k < DRAFTS && count == DRAFTS; k++) {
        if (k > 0) {
            for (int i = 0; i < E; i++)
                step_hidden[i] = (float)hidden_out[i];
            reference_step(&r, drafts[k - 1], step_hidden, PROMPT - 1 + k, logits, hidden_out);
        }
        /* a near tie could go either way in float32 */
        if (top_margin(logits, V) > 10 * TOLERANCE)
            CHECK_MSG(drafts[k] == argmax_d(logits, V), "draft %d: %d, the reference's argmax %d", k, drafts[k],
                      argmax_d(logits, V));
        same_drafts &= drafts[k] == argmax_d(logits, V);
        p_top[k] = top_probability(logits, V);
    }
    CHECK_MSG(relative_error(drafter.head_logits, logits, V) < TOLERANCE,
              "the last chained step's logits are off by %.3g", relative_error(drafter.head_logits, logits, V));
    if (same_drafts)
        check_floor(&drafter, context, drafts, p_top);
    draft_mtp_free(&drafter, context);
    CHECK_MSG(context->state.hidden_rows == NULL, "the capture is off after draft_mtp_free");
    bmoe_context_free(context);
    bmoe_model_free(loaded);
}

/* One generation of n_predict tokens on context, drafting with the head or not. */
static void generate(bmoe_context *context, bool mtp)
{
    bmoe_generation_params params = bmoe_generation_default_params();
    params.n_predict = 6;
    params.ignore_eos = true;
    if (mtp) {
        params.speculation.source = BMOE_DRAFT_MTP;
        params.speculation.n_draft = 2;
    }
    const int32_t prompt[4] = {3, 141, 59, 265};
    bmoe_error err;
    error_clear(&err);
    bmoe_generation *generation = bmoe_generation_start(context, &params, prompt, 4, &err);
    CHECK_MSG(generation != NULL, "start (mtp %d): %s", mtp, err.message);
    int status = generation ? bmoe_generation_run(generation, NULL, NULL, &err) : -1;
    CHECK_MSG(status == 0, "generation (mtp %d): %s", mtp, err.message);
    bmoe_generation_free(generation);
}

/* The head's KV cache and input buffer are the context's only once a
 * generation drafts with the head: a plain context holds the main
 * layers' keys and values (those of the layers that attend, every one of
 * n_ctx positions), an MTP one one full-attention layer's more, and no more
 * on a second MTP generation. Keys and values of head_dim_k and head_dim_v
 * per KV head (deepseek2's latent cache: kv_lora + n_rot and kv_lora). */
static void check_memory(const char *path, int attention_layers, int n_head_kv, int head_dim_k, int head_dim_v)
{
    enum { N_CTX = 64 }; /* a multiple of the key tiles: no padding */
    bmoe_error err;
    error_clear(&err);
    bmoe_model *loaded = bmoe_model_load(path, NULL, &err);
    bmoe_context_params cp = bmoe_context_default_params();
    cp.n_ctx = N_CTX;
    cp.n_threads = 1;
    cp.kv_type = BMOE_KV_F32;
    bmoe_context *context = loaded ? bmoe_context_create(loaded, &cp, &err) : NULL;
    CHECK_MSG(context != NULL, "memory context: %s", err.message);
    if (!context) {
        bmoe_model_free(loaded);
        return;
    }
    uint64_t layer_kv = (uint64_t)N_CTX * (uint64_t)n_head_kv * (uint64_t)(head_dim_k + head_dim_v) * sizeof(float);
    bmoe_context_memory created, plain, drafting, again;
    bmoe_context_memory_usage(context, &created);
    CHECK_MSG(attention_layers > 0 && created.kv_bytes == (uint64_t)attention_layers * layer_kv,
              "a new context's KV: %llu bytes, want %d layers of %llu", (unsigned long long)created.kv_bytes,
              attention_layers, (unsigned long long)layer_kv);
    generate(context, false);
    bmoe_context_memory_usage(context, &plain);
    CHECK_MSG(plain.kv_bytes == created.kv_bytes && plain.buffer_bytes == created.buffer_bytes,
              "a plain generation grew the context: KV %llu -> %llu bytes",
              (unsigned long long)created.kv_bytes, (unsigned long long)plain.kv_bytes);
    generate(context, true);
    bmoe_context_memory_usage(context, &drafting);
    CHECK_MSG(drafting.kv_bytes == plain.kv_bytes + layer_kv && drafting.buffer_bytes > plain.buffer_bytes &&
                  drafting.recurrent_bytes == plain.recurrent_bytes,
              "MTP drafting: KV %llu -> %llu bytes, want one head layer's %llu more",
              (unsigned long long)plain.kv_bytes, (unsigned long long)drafting.kv_bytes,
              (unsigned long long)layer_kv);
    generate(context, true);
    bmoe_context_memory_usage(context, &again);
    CHECK(again.kv_bytes == drafting.kv_bytes && again.buffer_bytes == drafting.buffer_bytes);
    bmoe_context_free(context);
    bmoe_model_free(loaded);
}

/* ---- glm4moe, bailingmoe2 and deepseek2: the head's own parts around the engine's block ----
 * Their head's block is the architecture's layer (transformer_layer under the
 * keys' routing; deepseek2's own MLA and MoE layer), which the reference
 * logits of the main layers pin; what is the head's own is checked here
 * against float64 from the file's tensors: the block's input (the fusion,
 * its order, enorm and hnorm, the embedding it reads), and from the block's
 * output as the engine computed it, the last norm, the output hidden state
 * and the logits (the matrix they read). */

/* Which norm each architecture's head logits read (the facts model_bind_head
 * is given): GLM-4.5's and DeepSeek-V3's nextn.shared_head_norm, Ling 2.0's
 * block-final layer_output_norm (its MTP layer's final_layernorm). */
typedef struct keyed_head {
    const char *arch;
    const char *shape; /* bmoe-mkmodel's preset, which writes one nextn block */
    const char *last_norm;
    int layers;             /* the preset's layers run: the head's block is the next */
    forward_layer_fn layer; /* the architecture's layer, which the head's block runs */
} keyed_head;

static const keyed_head keyed_heads[] = {
    {"glm4moe", "tiny-glm4moe", "nextn.shared_head_norm.weight", 3, keyed_transformer_layer},
    {"bailingmoe2", "tiny-bailingmoe2", "layer_output_norm.weight", 3, keyed_transformer_layer},
    {"deepseek2", "tiny-deepseek3-mtp", "nextn.shared_head_norm.weight", 4, deepseek2_layer},
};

/* The engine's head block from outside: its input rows (after eh_proj) and
 * output rows, [n_tokens][n_embd]. */
static float block_in[ROWS * MAX_EMBD], block_out[ROWS * MAX_EMBD];
/* the layer capturing_layer runs: the architecture's under test */
static forward_layer_fn captured_layer;

/* The architecture's layer with its rows seen. */
static int capturing_layer(const model *m, run_state *s, const forward_batch *batch, int il, bmoe_error *err)
{
    size_t bytes = (size_t)batch->n_tokens * (size_t)m->hparams.n_embd * sizeof(float);
    memcpy(block_in, s->h, bytes);
    int status = captured_layer(m, s, batch, il, err);
    memcpy(block_out, s->h, bytes);
    return status;
}

/* The head's own tensors, F32 views of the file's. */
typedef struct head_parts {
    const float *embedding; /* {E, V} */
    const float *enorm, *hnorm, *eh_proj;
    const float *last_norm;
    const float *head;      /* {E, V} */
    int n_embd;
    double eps;
} head_parts;

/* Of a part the file offers twice (the model's and the head block's own),
 * the one the head does not read (NULL where the block has none). */
static const float *other_part(const float *chosen, const float *models, const float *own)
{
    return chosen == models ? own : models;
}

/* eh_proj . [rmsnorm(embedding(token); enorm), rmsnorm(hidden; hnorm)], or
 * with the halves swapped. */
static void reference_block_input(const head_parts *p, int token, const float *hidden, bool swap, double *out)
{
    int E = p->n_embd;
    static double e[MAX_EMBD], h[MAX_EMBD], concat[2 * MAX_EMBD];
    for (int i = 0; i < E; i++) {
        e[i] = p->embedding[(int64_t)token * E + i];
        h[i] = hidden[i];
    }
    ref_rmsnorm(swap ? concat + E : concat, e, p->enorm, E, p->eps);
    ref_rmsnorm(swap ? concat : concat + E, h, p->hnorm, E, p->eps);
    matvec(out, p->eh_proj, concat, 2 * E, E);
}

/* x = rmsnorm(block output; last_norm), logits = head . x. */
static void reference_output(const head_parts *p, const float *output, int n_vocab, double *x, double *logits)
{
    static double h[MAX_EMBD];
    for (int i = 0; i < p->n_embd; i++)
        h[i] = output[i];
    ref_rmsnorm(x, h, p->last_norm, p->n_embd, p->eps);
    matvec(logits, p->head, x, p->n_embd, n_vocab);
}

/* Every tensor of the file's block `layer` is one of the head's views: its
 * block is a whole layer of the architecture, nothing of it left unread. */
static void check_block_bound(const model *m, const gguf_model *file, int layer)
{
    char prefix[32];
    int length = snprintf(prefix, sizeof prefix, "blk.%d.", layer);
    const tensor_view *views = (const tensor_view *)&m->weights.layers[layer];
    size_t n_views = sizeof(layer_weights) / sizeof(tensor_view);
    int found = 0;
    for (uint64_t i = 0; i < gguf_tensor_count(file); i++) {
        const char *name = gguf_tensor_at(file, i)->name;
        if (strncmp(name, prefix, (size_t)length) != 0)
            continue;
        bool bound = false;
        for (size_t v = 0; v < n_views && !bound; v++)
            bound = views[v].name && strcmp(views[v].name, name) == 0;
        CHECK_MSG(bound, "the head leaves tensor '%s' of its block unread", name);
        found++;
    }
    CHECK_MSG(found > 10, "block %d has only %d tensors", layer, found);
}

/* One batch through the head twice, with the capturing layer and as the
 * architecture runs it (same positions: the cache rows come out the same),
 * then each row against the reference. */
static void check_head_batch(const model *m, run_state *s, const head_parts *p, const forward_batch *batch,
                             const float *hidden, float *hidden_out, const char *what)
{
    int E = p->n_embd, V = m->hparams.n_vocab, n = batch->n_tokens;
    static float captured_logits[ROWS * 512], captured_hidden[ROWS * MAX_EMBD];
    bmoe_error err;
    error_clear(&err);
    forward_batch seen = *batch;
    seen.logits = captured_logits;
    CHECK_MSG(head_forward_layers(m, s, &seen, hidden, capturing_layer, captured_hidden, &err) == 0,
              "%s: head_forward_layers: %s", what, err.message);
    CHECK_MSG(m->arch->head_forward(m, s, batch, hidden, hidden_out, &err) == 0, "%s: head_forward: %s", what,
              err.message);
    /* the architecture's head runs its own layer, bit for bit */
    CHECK_MSG(memcmp(captured_logits, batch->logits, (size_t)n * (size_t)V * sizeof(float)) == 0 &&
                  memcmp(captured_hidden, hidden_out, (size_t)n * (size_t)E * sizeof(float)) == 0,
              "%s: the head's block is not the architecture's layer", what);
    static double input[MAX_EMBD], x[MAX_EMBD], logits[512];
    for (int t = 0; t < n; t++) {
        reference_block_input(p, batch->tokens[t], hidden + (int64_t)t * E, false, input);
        double input_error = relative_error(block_in + (int64_t)t * E, input, E);
        reference_output(p, block_out + (int64_t)t * E, V, x, logits);
        double hidden_error = relative_error(hidden_out + (int64_t)t * E, x, E);
        double logit_error = relative_error(batch->logits + (int64_t)t * V, logits, V);
        CHECK_MSG(input_error < TOLERANCE && hidden_error < TOLERANCE && logit_error < TOLERANCE,
                  "%s row %d: the block's input off by %.3g, the output hidden by %.3g, the logits by %.3g", what,
                  t, input_error, hidden_error, logit_error);
        CHECK_MSG(max_abs(logits, V) > 0.1, "%s row %d: flat logits", what, t);
    }
}

/* A tensor the file may lack: its F32 data, or NULL. */
static const float *optional_tensor(const gguf_model *file, int layer, const char *suffix)
{
    char name[128];
    snprintf(name, sizeof name, "blk.%d.%s", layer, suffix);
    const gguf_tensor *t = gguf_find_tensor(file, name);
    return t && t->type == 0 ? t->data : NULL;
}

/* own: the head reads the block's own norm, embedding and output matrix
 * where the file has them; otherwise the test clears those views of the
 * loaded model, and the head must fall back to the model's output_norm,
 * token_embd and output. The reference with the halves swapped, and with
 * the other choice of each part the file offers, must disagree: the
 * comparison sees each of them. */
static void check_keyed_head(const keyed_head *k, const char *path, bool own)
{
    bmoe_error err;
    error_clear(&err);
    gguf_model *file = gguf_open(path, &err);
    CHECK_MSG(file != NULL, "gguf_open: %s", err.message);
    if (!file)
        return;
    static reference r;
    memset(&r, 0, sizeof r);
    r.file = file;
    r.layer = (int)(key_int(file, "block_count") - key_int(file, "nextn_predict_layers"));
    int E = (int)key_int(file, "embedding_length");
    const gguf_tensor *embd = gguf_find_tensor(file, "token_embd.weight");
    int V = embd ? (int)embd->ne[1] : 0;
    CHECK_MSG(r.layer == k->layers && E <= MAX_EMBD && V <= 512, "sizes of the tiny preset");
    captured_layer = k->layer;
    head_parts p = {
        .embedding = tensor(&r, -1, "token_embd.weight", E, V, 1),
        .enorm = block(&r, "nextn.enorm.weight", E, 1, 1),
        .hnorm = block(&r, "nextn.hnorm.weight", E, 1, 1),
        .eh_proj = block(&r, "nextn.eh_proj.weight", 2 * E, E, 1),
        .last_norm = tensor(&r, -1, "output_norm.weight", E, 1, 1),
        .head = tensor(&r, -1, "output.weight", E, V, 1),
        .n_embd = E,
        .eps = key_float(file, "attention.layer_norm_rms_epsilon"),
    };
    /* the alternatives: what the file offers besides what the head reads */
    head_parts model_parts = p;
    const float *own_norm = optional_tensor(file, r.layer, k->last_norm);
    const float *own_embedding = optional_tensor(file, r.layer, "nextn.embed_tokens.weight");
    const float *own_head = optional_tensor(file, r.layer, "nextn.shared_head_head.weight");
    CHECK_MSG(own_norm, "%s: the preset's block lacks %s", k->arch, k->last_norm);
    if (own) {
        p.last_norm = own_norm ? own_norm : p.last_norm;
        p.embedding = own_embedding ? own_embedding : p.embedding;
        p.head = own_head ? own_head : p.head;
    }

    bmoe_model *loaded = NULL;
    bmoe_context *context = open_context(path, &loaded);
    if (!context) {
        gguf_close(file);
        return;
    }
    model *m = &context->model->model;
    CHECK_MSG(m->hparams.n_layer == r.layer && m->hparams.n_layer_head == 1 && m->arch->head_forward,
              "%s: the head is bound", k->arch);
    layer_weights *l = &m->weights.layers[r.layer];
    if (own) {
        check_block_bound(m, file, r.layer);
    } else {
        memset(&l->nextn_shared_head_norm, 0, sizeof l->nextn_shared_head_norm);
        memset(&l->nextn_shared_head_head, 0, sizeof l->nextn_shared_head_head);
        memset(&l->nextn_embed_tokens, 0, sizeof l->nextn_embed_tokens);
    }
    CHECK_MSG(run_state_enable_head(&context->state, m, &err) == 0, "run_state_enable_head: %s", err.message);

    static float hidden[ROWS * MAX_EMBD], engine_hidden[ROWS * MAX_EMBD], engine_logits[ROWS * 512];
    int32_t tokens[ROWS] = {17, 301, 5, 444, 99};
    uint32_t seed = 54321;
    for (int i = 0; i < ROWS * E; i++) {
        seed = seed * 1664525u + 1013904223u;
        hidden[i] = ((float)(seed >> 8) / (float)(1u << 24) - 0.5f) * 4.0f;
    }
    char what[96];
    snprintf(what, sizeof what, "%s (%s parts)", k->arch, own ? "its own" : "the model's");
    /* rows 0..ROWS-2 as one batch from an empty cache, then one chained row
     * attending over them: the head's own output hidden state, the next
     * token and position */
    int batch_rows = ROWS - 1;
    forward_batch batch = {.tokens = tokens, .n_tokens = batch_rows, .position = 0, .first_output = 0,
                           .logits = engine_logits};
    context->state.single_token = false;
    check_head_batch(m, &context->state, &p, &batch, hidden, engine_hidden, what);
    static double wrong[MAX_EMBD], x[MAX_EMBD], logits[512];
    /* the halves swapped, and the other choices, are visibly other heads */
    reference_block_input(&p, tokens[0], hidden, true, wrong);
    CHECK_MSG(relative_error(block_in, wrong, E) > 100 * TOLERANCE, "%s: swapping the halves changed little",
              what);
    head_parts other = p;
    other.embedding = other_part(p.embedding, model_parts.embedding, own_embedding);
    if (other.embedding) {
        reference_block_input(&other, tokens[0], hidden, false, wrong);
        CHECK_MSG(relative_error(block_in, wrong, E) > 10 * TOLERANCE, "%s: another embedding changed little",
                  what);
    }
    other = p;
    other.last_norm = other_part(p.last_norm, model_parts.last_norm, own_norm);
    if (other.last_norm) {
        reference_output(&other, block_out, V, x, logits);
        CHECK_MSG(relative_error(engine_hidden, x, E) > 10 * TOLERANCE, "%s: another last norm changed little",
                  what);
    }
    other = p;
    other.head = other_part(p.head, model_parts.head, own_head);
    if (other.head) {
        reference_output(&other, block_out, V, x, logits);
        CHECK_MSG(relative_error(engine_logits, logits, V) > 10 * TOLERANCE, "%s: another output matrix changed "
                  "little", what);
    }
    static float step_hidden[MAX_EMBD];
    memcpy(step_hidden, engine_hidden + (int64_t)(batch_rows - 1) * E, (size_t)E * sizeof(float));
    forward_batch step = {.tokens = tokens + batch_rows, .n_tokens = 1, .position = batch_rows, .first_output = 0,
                          .logits = engine_logits};
    context->state.single_token = true;
    snprintf(what, sizeof what, "%s (%s parts, chained)", k->arch, own ? "its own" : "the model's");
    check_head_batch(m, &context->state, &p, &step, step_hidden, engine_hidden, what);
    int n_head_kv = m->hparams.n_head_kv, head_dim_k = m->hparams.head_dim_k, head_dim_v = m->hparams.head_dim_v;
    bmoe_context_free(context);
    bmoe_model_free(loaded);
    if (own) /* every main layer attends; the head adds one more */
        check_memory(path, r.layer, n_head_kv, head_dim_k, head_dim_v);
    gguf_close(file);
}

/* --mtp on a model without a nextn block: refused at load with the reason. */
static void check_refused_without_head(const char *path)
{
    int status = mk_run_tool("bmoe-cli", "-m '%s' -p 'Hello' -n 4 --mtp", path);
    char *errors = test_read_file(mk_stderr, NULL);
    CHECK_MSG(status != 0 && errors && strstr(errors, "nextn") && strstr(errors, "has none"),
              "--mtp without a head: exit %d, %s", status, errors ? errors : "");
    free(errors);
}

int main(void)
{
    mk_setup("mtp_head");
    char with_head[1200], without_head[1200];
    mk_path(with_head, sizeof with_head, "qwen35moe-nextn.gguf");
    mk_path(without_head, sizeof without_head, "qwen35moe.gguf");
    int status = mk_run("--shape tiny-qwen35moe --nextn-layers 1 --type f32 --quiet -o '%s'", with_head);
    CHECK_MSG(status == 0, "bmoe-mkmodel exited %d", status);
    status = mk_run("--shape tiny-qwen35moe --type f32 --quiet -o '%s'", without_head);
    CHECK_MSG(status == 0, "bmoe-mkmodel exited %d", status);
    check_head(with_head);
    check_refused_without_head(without_head);
    for (size_t i = 0; i < sizeof keyed_heads / sizeof keyed_heads[0]; i++) {
        const keyed_head *k = &keyed_heads[i];
        status = mk_run("--shape %s --type f32 --quiet -o '%s'", k->shape, with_head);
        CHECK_MSG(status == 0, "bmoe-mkmodel --shape %s exited %d", k->shape, status);
        status = mk_run("--shape %s --nextn-layers 0 --type f32 --quiet -o '%s'", k->shape, without_head);
        CHECK_MSG(status == 0, "bmoe-mkmodel --shape %s --nextn-layers 0 exited %d", k->shape, status);
        check_keyed_head(k, with_head, true);
        check_keyed_head(k, with_head, false);
        check_refused_without_head(without_head);
    }
    remove(with_head);
    remove(without_head);
    return test_finish();
}
