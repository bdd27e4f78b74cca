/* bmoe-mkmodel's hybrid architectures (lfm2moe, gemma4, qwen35moe): the tiny
 * presets in f32 and q4_k_m, and ones with flags changing the layer pattern
 * (gemma4 also: KV-shared layers and per-layer embeddings),
 * checked through the GGUF reader against the tensor lists of
 * architectures.md sections 6-8 written out here (names, shapes, nothing
 * else), the per-layer keys, the size --plan predicts, bmoe-cli --info's
 * summary (tensor and parameter counts), and a short generation in bmoe-cli (the file binds and runs).
 * The full-size presets (--plan only) have the parameter counts of the
 * public models. */
#include "mkmodel_run.h"

typedef struct expected {
    char names[512][64];
    int64_t ne[512][3];
    int count;
} expected;

static void add(expected *list, int layer, const char *suffix, int64_t a, int64_t b, int64_t c)
{
    if (layer >= 0)
        snprintf(list->names[list->count], sizeof list->names[0], "blk.%d.%s", layer, suffix);
    else
        snprintf(list->names[list->count], sizeof list->names[0], "%s", suffix);
    list->ne[list->count][0] = a;
    list->ne[list->count][1] = b;
    list->ne[list->count][2] = c;
    list->count++;
}

/* The shapes of the tiny presets (or their flag variants). */
typedef struct hybrid {
    const char *arch;
    const char *shape;
    const char *flags;
    int layers, embd, heads, kv_heads, head_dim, experts, used, expert_ff, ff, vocab;
    int interval, dense, taps;        /* lfm2moe, qwen35moe */
    int head_dim_swa, kv_full, period; /* gemma4 */
    int shared_kv, per_layer;          /* gemma4: KV-shared last layers, per-layer embedding width */
    int dk, k_heads, v_heads, shared;  /* qwen35moe */
    int nextn;                         /* qwen35moe: MTP blocks after the layers */
    bool repeat;                       /* nothing another shape here lacks: not run under the sanitizers */
} hybrid;

static void expected_lfm2moe(const hybrid *h, expected *list)
{
    int64_t e = h->embd, q = (int64_t)h->heads * h->head_dim, kv = (int64_t)h->kv_heads * h->head_dim;
    add(list, -1, "token_embd.weight", e, h->vocab, 1);
    add(list, -1, "token_embd_norm.weight", e, 1, 1); /* the final norm (7.2) */
    add(list, -1, "output.weight", e, h->vocab, 1);
    for (int il = 0; il < h->layers; il++) {
        add(list, il, "attn_norm.weight", e, 1, 1);
        add(list, il, "ffn_norm.weight", e, 1, 1);
        if ((il + 1) % h->interval == 0) {
            add(list, il, "attn_q.weight", e, q, 1);
            add(list, il, "attn_k.weight", e, kv, 1);
            add(list, il, "attn_v.weight", e, kv, 1);
            add(list, il, "attn_q_norm.weight", h->head_dim, 1, 1);
            add(list, il, "attn_k_norm.weight", h->head_dim, 1, 1);
            add(list, il, "attn_output.weight", q, e, 1);
        } else {
            add(list, il, "shortconv.in_proj.weight", e, 3 * e, 1);
            add(list, il, "shortconv.conv.weight", h->taps, e, 1);
            add(list, il, "shortconv.out_proj.weight", e, e, 1);
        }
        if (il < h->dense) {
            add(list, il, "ffn_gate.weight", e, h->ff, 1);
            add(list, il, "ffn_up.weight", e, h->ff, 1);
            add(list, il, "ffn_down.weight", h->ff, e, 1);
        } else {
            add(list, il, "ffn_gate_inp.weight", e, h->experts, 1);
            add(list, il, "exp_probs_b.bias", h->experts, 1, 1);
            add(list, il, "ffn_gate_exps.weight", e, h->expert_ff, h->experts);
            add(list, il, "ffn_up_exps.weight", e, h->expert_ff, h->experts);
            add(list, il, "ffn_down_exps.weight", h->expert_ff, e, h->experts);
        }
    }
}

static void expected_gemma4(const hybrid *h, expected *list)
{
    int64_t e = h->embd;
    add(list, -1, "token_embd.weight", e, h->vocab, 1); /* tied head: no output.weight */
    add(list, -1, "output_norm.weight", e, 1, 1);
    add(list, -1, "rope_freqs.weight", h->head_dim / 2, 1, 1);
    int64_t p = h->per_layer;
    if (p > 0) { /* 6.6: a row of Dp per layer, per token */
        add(list, -1, "per_layer_token_embd.weight", p * h->layers, h->vocab, 1);
        add(list, -1, "per_layer_model_proj.weight", e, p * h->layers, 1);
        add(list, -1, "per_layer_proj_norm.weight", p, 1, 1);
    }
    for (int il = 0; il < h->layers; il++) {
        bool swa = (il + 1) % h->period != 0;
        bool own_kv = il < h->layers - h->shared_kv; /* 6.4: the last ones have no K/V */
        int64_t d = swa ? h->head_dim_swa : h->head_dim, q = (int64_t)h->heads * d;
        int64_t kv = (int64_t)(swa ? h->kv_heads : h->kv_full) * d;
        add(list, il, "attn_norm.weight", e, 1, 1);
        add(list, il, "attn_q.weight", e, q, 1);
        if (own_kv)
            add(list, il, "attn_k.weight", e, kv, 1);
        if (own_kv && swa)
            add(list, il, "attn_v.weight", e, kv, 1);
        add(list, il, "attn_q_norm.weight", d, 1, 1);
        if (own_kv)
            add(list, il, "attn_k_norm.weight", d, 1, 1);
        add(list, il, "attn_output.weight", q, e, 1);
        add(list, il, "post_attention_norm.weight", e, 1, 1);
        add(list, il, "ffn_norm.weight", e, 1, 1);
        add(list, il, "ffn_gate.weight", e, h->ff, 1);
        add(list, il, "ffn_up.weight", e, h->ff, 1);
        add(list, il, "ffn_down.weight", h->ff, e, 1);
        add(list, il, "post_ffw_norm.weight", e, 1, 1);
        add(list, il, "ffn_gate_inp.weight", e, h->experts, 1);
        add(list, il, "ffn_gate_inp.scale", e, 1, 1);
        add(list, il, "pre_ffw_norm_2.weight", e, 1, 1);
        add(list, il, "post_ffw_norm_1.weight", e, 1, 1);
        add(list, il, "post_ffw_norm_2.weight", e, 1, 1);
        add(list, il, "ffn_gate_up_exps.weight", e, 2 * h->expert_ff, h->experts);
        add(list, il, "ffn_down_exps.weight", h->expert_ff, e, h->experts);
        add(list, il, "ffn_down_exps.scale", h->experts, 1, 1);
        if (p > 0) {
            add(list, il, "inp_gate.weight", e, p, 1);
            add(list, il, "proj.weight", p, e, 1);
            add(list, il, "post_norm.weight", e, 1, 1);
        }
        add(list, il, "layer_output_scale.weight", 1, 1, 1);
    }
}

static void expected_qwen35moe(const hybrid *h, expected *list)
{
    int64_t e = h->embd, q = (int64_t)h->heads * h->head_dim, kv = (int64_t)h->kv_heads * h->head_dim;
    int64_t kd = (int64_t)h->k_heads * h->dk, vd = (int64_t)h->v_heads * h->dk, c = 2 * kd + vd;
    add(list, -1, "token_embd.weight", e, h->vocab, 1);
    add(list, -1, "output_norm.weight", e, 1, 1);
    add(list, -1, "output.weight", e, h->vocab, 1);
    for (int il = 0; il < h->layers + h->nextn; il++) {
        add(list, il, "attn_norm.weight", e, 1, 1);
        add(list, il, "post_attention_norm.weight", e, 1, 1);
        /* an MTP block is a full-attention block with four tensors of its own
         * (llama.cpp's names for Qwen3.5's mtp.fc, pre_fc_norm_embedding,
         * pre_fc_norm_hidden and mtp.norm) */
        if (il >= h->layers) {
            add(list, il, "nextn.eh_proj.weight", 2 * e, e, 1);
            add(list, il, "nextn.enorm.weight", e, 1, 1);
            add(list, il, "nextn.hnorm.weight", e, 1, 1);
            add(list, il, "nextn.shared_head_norm.weight", e, 1, 1);
        }
        if (il >= h->layers || (il + 1) % h->interval == 0) {
            add(list, il, "attn_q.weight", e, 2 * q, 1); /* query and gate per head */
            add(list, il, "attn_k.weight", e, kv, 1);
            add(list, il, "attn_v.weight", e, kv, 1);
            add(list, il, "attn_q_norm.weight", h->head_dim, 1, 1);
            add(list, il, "attn_k_norm.weight", h->head_dim, 1, 1);
            add(list, il, "attn_output.weight", q, e, 1);
        } else {
            add(list, il, "attn_qkv.weight", e, c, 1);
            add(list, il, "attn_gate.weight", e, vd, 1);
            add(list, il, "ssm_conv1d.weight", h->taps, c, 1);
            add(list, il, "ssm_dt.bias", h->v_heads, 1, 1);
            add(list, il, "ssm_a", h->v_heads, 1, 1);
            add(list, il, "ssm_beta.weight", e, h->v_heads, 1);
            add(list, il, "ssm_alpha.weight", e, h->v_heads, 1);
            add(list, il, "ssm_norm.weight", h->dk, 1, 1);
            add(list, il, "ssm_out.weight", vd, e, 1);
        }
        add(list, il, "ffn_gate_inp.weight", e, h->experts, 1);
        add(list, il, "ffn_gate_exps.weight", e, h->expert_ff, h->experts);
        add(list, il, "ffn_up_exps.weight", e, h->expert_ff, h->experts);
        add(list, il, "ffn_down_exps.weight", h->expert_ff, e, h->experts);
        add(list, il, "ffn_gate_inp_shexp.weight", e, 1, 1);
        add(list, il, "ffn_gate_shexp.weight", e, h->shared, 1);
        add(list, il, "ffn_up_shexp.weight", e, h->shared, 1);
        add(list, il, "ffn_down_shexp.weight", h->shared, e, 1);
    }
}

static int64_t get_int(const gguf_model *m, const char *arch, const char *suffix)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    int64_t value = -12345;
    gguf_get_int(m, key, &value);
    return value;
}

/* A per-layer array key's element il, or -12345. */
static int64_t get_layer(const gguf_model *m, const char *arch, const char *suffix, int il)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    const gguf_kv *kv = gguf_find_kv(m, key);
    if (!kv || kv->type != GGUF_TYPE_ARRAY || (uint64_t)il >= kv->array_count)
        return -12345;
    return gguf_array_int(kv, (uint64_t)il);
}

static void check_metadata(const gguf_model *m, const hybrid *h, const char *label)
{
    const char *a = h->arch;
    CHECK_MSG(get_int(m, a, "block_count") == h->layers + h->nextn &&
                  get_int(m, a, "nextn_predict_layers") == (h->nextn ? h->nextn : -12345) && get_int(m, a, "embedding_length") == h->embd &&
                  get_int(m, a, "expert_count") == h->experts && get_int(m, a, "expert_used_count") == h->used &&
                  get_int(m, a, "expert_feed_forward_length") == h->expert_ff,
              "%s: sizes", label);
    for (int il = 0; il < h->layers; il++) {
        if (strcmp(a, "lfm2moe") == 0) {
            int64_t want = (il + 1) % h->interval == 0 ? h->kv_heads : 0;
            CHECK_MSG(get_layer(m, a, "attention.head_count_kv", il) == want, "%s: head_count_kv[%d]", label, il);
        } else if (strcmp(a, "gemma4") == 0) {
            bool swa = (il + 1) % h->period != 0;
            CHECK_MSG(get_layer(m, a, "attention.sliding_window_pattern", il) == swa &&
                          get_layer(m, a, "attention.head_count_kv", il) == (swa ? h->kv_heads : h->kv_full),
                      "%s: layer %d pattern", label, il);
        }
    }
    if (strcmp(a, "lfm2moe") == 0)
        CHECK_MSG(get_int(m, a, "shortconv.l_cache") == h->taps && get_int(m, a, "expert_gating_func") == 2 &&
                      get_int(m, a, "leading_dense_block_count") == h->dense,
                  "%s: lfm2moe keys", label);
    if (strcmp(a, "gemma4") == 0) {
        CHECK_MSG(get_int(m, a, "attention.key_length") == h->head_dim &&
                      get_int(m, a, "attention.key_length_swa") == h->head_dim_swa,
                  "%s: gemma4 head sizes", label);
        /* written when used only (absent: -12345) */
        CHECK_MSG(get_int(m, a, "attention.shared_kv_layers") == (h->shared_kv ? h->shared_kv : -12345) &&
                      get_int(m, a, "embedding_length_per_layer_input") == (h->per_layer ? h->per_layer : -12345),
                  "%s: gemma4 KV sharing and per-layer embedding keys", label);
    }
    if (strcmp(a, "qwen35moe") == 0) {
        /* sections cover the rotated pairs */
        int64_t pairs = get_int(m, a, "rope.dimension_count") / 2, sum = 0;
        for (int i = 0; i < 4; i++)
            sum += get_layer(m, a, "rope.dimension_sections", i);
        CHECK_MSG(sum == pairs && get_int(m, a, "full_attention_interval") == h->interval &&
                      get_int(m, a, "ssm.conv_kernel") == h->taps && get_int(m, a, "ssm.state_size") == h->dk &&
                      get_int(m, a, "ssm.group_count") == h->k_heads &&
                      get_int(m, a, "ssm.time_step_rank") == h->v_heads &&
                      get_int(m, a, "ssm.inner_size") == (int64_t)h->v_heads * h->dk &&
                      get_int(m, a, "expert_shared_feed_forward_length") == h->shared,
                  "%s: qwen35moe keys", label);
    }
}

static void check_file(const hybrid *h, const char *type)
{
    char file[1200], label[160];
    snprintf(label, sizeof label, "%s %s %s", h->shape, type, h->flags);
    mk_path(file, sizeof file, "hybrid.gguf");
    /* the flag variants' blocks are written directly: quantizing them too
     * would add nothing the plain presets do not check, at ~9 s a file
     * under AddressSanitizer; there the presets' too (the recipe still picks
     * each tensor's type; test_mkmodel_quantize and the simple
     * architectures' Q4_K_M models run the quantizers under it) */
    const char *fill = (h->flags[0] || TEST_SANITIZED) && strcmp(type, "f32") != 0 ? "--fill blocks" : "";
    int status = mk_run("--shape %s %s --type %s %s --quiet -o '%s'", h->shape, h->flags, type, fill, file);
    char *errors = test_read_file(mk_stderr, NULL);
    CHECK_MSG(status == 0, "%s: bmoe-mkmodel exited %d: %s", label, status, errors ? errors : "");
    free(errors);
    status = mk_run("--shape %s %s --type %s --plan", h->shape, h->flags, type);
    char *plan = test_read_file(mk_stdout, NULL);
    const char *total = plan ? strstr(plan, "file_bytes=") : NULL;
    unsigned long long planned = total ? strtoull(total + 11, NULL, 10) : 0;
    CHECK_MSG(status == 0 && planned == mk_file_size(file), "%s: plan says %llu bytes, file has %llu", label,
              planned, (unsigned long long)mk_file_size(file));
    free(plan);

    static expected list;
    list.count = 0;
    if (strcmp(h->arch, "lfm2moe") == 0)
        expected_lfm2moe(h, &list);
    else if (strcmp(h->arch, "gemma4") == 0)
        expected_gemma4(h, &list);
    else
        expected_qwen35moe(h, &list);
    bmoe_error err;
    error_clear(&err);
    gguf_model *m = gguf_open(file, &err);
    CHECK_MSG(m != NULL, "%s: gguf_open: %s", label, err.message);
    if (m) {
        CHECK_MSG(gguf_tensor_count(m) == (uint64_t)list.count, "%s: %llu tensors, expected %d", label,
                  (unsigned long long)gguf_tensor_count(m), list.count);
        for (int i = 0; i < list.count; i++) {
            const gguf_tensor *t = gguf_find_tensor(m, list.names[i]);
            CHECK_MSG(t && t->ne[0] == list.ne[i][0] && t->ne[1] == list.ne[i][1] && t->ne[2] == list.ne[i][2],
                      "%s: %s missing or of another shape", label, list.names[i]);
        }
        check_metadata(m, h, label);
        gguf_close(m);
    }

    /* bmoe-cli --info: the summary */
    status = mk_run_tool("bmoe-cli", "--info '%s'", file);
    char *info = test_read_file(mk_stdout, NULL);
    char line[96];
    snprintf(line, sizeof line, "\nlayers: %d\n", h->layers + h->nextn); /* the file's blocks */
    CHECK_MSG(status == 0 && info && strstr(info, line), "%s: --info lacks '%s'", label, line + 1);
    snprintf(line, sizeof line, "\nexperts: %d (%d used)\n", h->experts, h->used);
    CHECK_MSG(info && strstr(info, line), "%s: --info lacks '%s'", label, line + 1);
    snprintf(line, sizeof line, "\ntensors: %d\n", list.count);
    CHECK_MSG(info && strstr(info, line), "%s: --info lacks '%s'", label, line + 1);
    long long parameters = 0;
    for (int i = 0; i < list.count; i++)
        parameters += list.ne[i][0] * list.ne[i][1] * list.ne[i][2];
    snprintf(line, sizeof line, "\nparameters: %lld (", parameters);
    CHECK_MSG(info && strstr(info, line), "%s: --info lacks '%s'", label, line + 1);
    free(info);
    /* the engine binds it and generates */
    status = mk_run_tool("bmoe-cli", "-m '%s' -t 1 -p 'Hello there' -n 4", file);
    errors = test_read_file(mk_stderr, NULL);
    CHECK_MSG(status == 0, "%s: bmoe-cli exited %d: %s", label, status, errors ? errors : "");
    free(errors);
    remove(file);
}

/* The full-size presets: the public models' parameter counts (LFM2-8B-A1B
 * 8.3B, Gemma-4-26B-A4B 25.2B, Qwen3.5-35B-A3B 35B total), within 5 %. */
static void check_full_plan(const char *shape, double billions)
{
    int status = mk_run("--shape %s --plan", shape);
    char *plan = test_read_file(mk_stdout, NULL);
    const char *params = plan ? strstr(plan, "params=") : NULL;
    double count = params ? strtod(params + 7, NULL) / 1e9 : 0;
    CHECK_MSG(status == 0 && fabs(count - billions) < 0.05 * billions, "%s: %.2fB parameters, expected ~%.1fB",
              shape, count, billions);
    printf("%s: %.2fB parameters\n", shape, count);
    free(plan);
}

int main(void)
{
    mk_setup("mkmodel_hybrid");
    const hybrid shapes[] = {
        {.arch = "lfm2moe", .shape = "tiny-lfm2moe", .flags = "", .layers = 4, .embd = 256, .heads = 4,
         .kv_heads = 2, .head_dim = 64, .experts = 16, .used = 4, .expert_ff = 256, .ff = 512, .vocab = 512,
         .interval = 2, .dense = 1, .taps = 3},
        /* the preset's pattern too (dense layers first, attention last) */
        {.arch = "lfm2moe", .shape = "tiny-lfm2moe", .flags = "--layers 6 --attention-interval 3 --dense-layers 2",
         .layers = 6, .embd = 256, .heads = 4, .kv_heads = 2, .head_dim = 64, .experts = 16, .used = 4,
         .expert_ff = 256, .ff = 512, .vocab = 512, .interval = 3, .dense = 2, .taps = 3, .repeat = true},
        {.arch = "gemma4", .shape = "tiny-gemma4", .flags = "", .layers = 4, .embd = 256, .heads = 4,
         .kv_heads = 2, .head_dim = 128, .experts = 16, .used = 4, .expert_ff = 256, .ff = 256, .vocab = 512,
         .head_dim_swa = 64, .kv_full = 1, .period = 4},
        {.arch = "gemma4", .shape = "tiny-gemma4", .flags = "--layers 5 --swa-period 2", .layers = 5, .embd = 256,
         .heads = 4, .kv_heads = 2, .head_dim = 128, .experts = 16, .used = 4, .expert_ff = 256, .ff = 256,
         .vocab = 512, .head_dim_swa = 64, .kv_full = 1, .period = 2},
        /* KV sharing: layers 3, 4 (sliding-window) read layer 1's cache, 5
         * (full) layer 2's; the next shape shares them the same way */
        {.arch = "gemma4", .shape = "tiny-gemma4", .flags = "--layers 6 --swa-period 3 --shared-kv 3", .layers = 6,
         .embd = 256, .heads = 4, .kv_heads = 2, .head_dim = 128, .experts = 16, .used = 4, .expert_ff = 256,
         .ff = 256, .vocab = 512, .head_dim_swa = 64, .kv_full = 1, .period = 3, .shared_kv = 3, .repeat = true},
        {.arch = "gemma4", .shape = "tiny-gemma4",
         .flags = "--layers 6 --swa-period 3 --shared-kv 3 --per-layer-input 32", .layers = 6, .embd = 256,
         .heads = 4, .kv_heads = 2, .head_dim = 128, .experts = 16, .used = 4, .expert_ff = 256, .ff = 256,
         .vocab = 512, .head_dim_swa = 64, .kv_full = 1, .period = 3, .shared_kv = 3, .per_layer = 32},
        {.arch = "qwen35moe", .shape = "tiny-qwen35moe", .flags = "", .layers = 4, .embd = 256, .heads = 4,
         .kv_heads = 2, .head_dim = 64, .experts = 16, .used = 4, .expert_ff = 256, .vocab = 512, .interval = 4,
         .taps = 4, .dk = 64, .k_heads = 2, .v_heads = 4, .shared = 256},
        {.arch = "qwen35moe", .shape = "tiny-qwen35moe", .flags = "--layers 3 --attention-interval 2 --ssm-v-heads 8",
         .layers = 3, .embd = 256, .heads = 4, .kv_heads = 2, .head_dim = 64, .experts = 16, .used = 4,
         .expert_ff = 256, .vocab = 512, .interval = 2, .taps = 4, .dk = 64, .k_heads = 2, .v_heads = 8,
         .shared = 256},
        {.arch = "qwen35moe", .shape = "tiny-qwen35moe", .flags = "--nextn-layers 1", .layers = 4, .embd = 256,
         .heads = 4, .kv_heads = 2, .head_dim = 64, .experts = 16, .used = 4, .expert_ff = 256, .vocab = 512,
         .interval = 4, .taps = 4, .dk = 64, .k_heads = 2, .v_heads = 4, .shared = 256, .nextn = 1},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        /* the sanitizers look for memory errors: one shape per code path */
        if (TEST_SANITIZED && shapes[i].repeat)
            continue;
        check_file(&shapes[i], "f32");
        /* under the sanitizer the quantized file of each preset as it is (the
         * layer patterns are the f32 files' business) */
        if (!TEST_SANITIZED || !shapes[i].flags[0])
            check_file(&shapes[i], "q4_k_m");
    }
    check_full_plan("lfm2-8b-a1b", 8.3);
    check_full_plan("gemma-4-26b-a4b", 25.2);
    check_full_plan("qwen3.5-35b-a3b", 35.0);
    return test_finish();
}
