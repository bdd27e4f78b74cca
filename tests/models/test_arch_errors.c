/* Bad input for the hybrid and the simple MoE architectures: an oracle
 * model (or a generated one: gemma4's KV sharing and per-layer embeddings,
 * the tiny qwen2moe, olmoe, Mixtral-style llama, bailingmoe2, glm4moe,
 * deepseek2 and deepseek4) copied with one defect
 * (a per-layer key of the wrong length, a missing recurrent tensor, a layer
 * pattern that contradicts the tensors present, a tensor of another shape)
 * fails to load with a one-line message naming the problem. The unmodified
 * copy loads, so each failure is the defect's. */
#include <stdio.h>
#include <string.h>

#include "bmoe.h"
#include "engine/speculation.h"
#include "gemma4_variants.h"
#include "gguf/gguf.h"
#include "test.h"

typedef struct variant {
    const char *key;              /* a per-layer int32 array key to replace, or NULL */
    int32_t values[16];
    int n_values;
    const char *bool_key;         /* a per-layer bool array key to replace, or NULL */
    uint8_t bools[16];
    int n_bools;
    const char *uint_key;         /* a u32 key to replace, or NULL */
    uint32_t uint_value;
    const char *drop_tensor;      /* a tensor left out (ending in '.': every tensor named so on), or NULL */
    const char *reshape_tensor;   /* a 2-D tensor declared {reshape[0], reshape[1]} (same size), or NULL */
    int64_t reshape[2];
} variant;

static bool dropped(const variant *v, const char *name)
{
    if (!v->drop_tensor)
        return false;
    size_t length = strlen(v->drop_tensor);
    return length > 0 && v->drop_tensor[length - 1] == '.' ? strncmp(name, v->drop_tensor, length) == 0
                                                            : strcmp(name, v->drop_tensor) == 0;
}

/* Copies the source's keys (but the vocabulary, which these checks do not
 * need) and tensors, with the variant's changes. The source is an oracle
 * model's name, or a file's absolute path. */
static bool write_variant(const char *source_name, const char *path, const variant *v)
{
    char source[1200];
    bmoe_error err = {0};
    char relative[256];
    snprintf(relative, sizeof relative, "oracle/models/%s.gguf", source_name);
    if (source_name[0] == '/')
        snprintf(source, sizeof source, "%s", source_name);
    else
        test_shared_path(source, sizeof source, relative);
    gguf_model *in = gguf_open(source, &err);
    CHECK_MSG(in != NULL, "open %s: %s", source, err.message);
    if (!in)
        return false;
    gguf_writer *w = gguf_writer_create(path, &err);
    bool ok = w != NULL;
    for (uint64_t i = 0; ok && i < gguf_kv_count(in); i++) {
        const gguf_kv *kv = gguf_kv_at(in, i);
        if (strncmp(kv->key, "tokenizer.", 10) == 0 || strcmp(kv->key, "general.alignment") == 0)
            continue;
        if (v->key && strcmp(kv->key, v->key) == 0) {
            ok = gguf_writer_add_array(w, kv->key, GGUF_TYPE_INT32, (uint64_t)v->n_values, v->values) == 0;
            continue;
        }
        if (v->bool_key && strcmp(kv->key, v->bool_key) == 0) {
            ok = gguf_writer_add_array(w, kv->key, GGUF_TYPE_BOOL, (uint64_t)v->n_bools, v->bools) == 0;
            continue;
        }
        if (v->uint_key && strcmp(kv->key, v->uint_key) == 0) {
            ok = gguf_writer_add_uint32(w, kv->key, v->uint_value) == 0;
            continue;
        }
        if (kv->type == GGUF_TYPE_ARRAY) {
            ok = kv->array_type != GGUF_TYPE_STRING &&
                 gguf_writer_add_array(w, kv->key, kv->array_type, kv->array_count, kv->payload) == 0;
        } else if (kv->type == GGUF_TYPE_STRING) {
            gguf_string text;
            char buffer[256];
            ok = gguf_get_string(in, kv->key, &text) && text.length < sizeof buffer;
            if (ok) {
                memcpy(buffer, text.data, text.length);
                buffer[text.length] = '\0';
                ok = gguf_writer_add_string(w, kv->key, buffer) == 0;
            }
        } else if (kv->type == GGUF_TYPE_FLOAT32) {
            float value;
            ok = gguf_get_float(in, kv->key, &value) && gguf_writer_add_float32(w, kv->key, value) == 0;
        } else if (kv->type == GGUF_TYPE_BOOL) {
            bool value;
            ok = gguf_get_bool(in, kv->key, &value) && gguf_writer_add_bool(w, kv->key, value) == 0;
        } else {
            int64_t value;
            ok = gguf_get_int(in, kv->key, &value) && gguf_writer_add_uint32(w, kv->key, (uint32_t)value) == 0;
        }
    }
    for (uint64_t i = 0; ok && i < gguf_tensor_count(in); i++) {
        const gguf_tensor *t = gguf_tensor_at(in, i);
        if (dropped(v, t->name))
            continue;
        if (v->reshape_tensor && strcmp(t->name, v->reshape_tensor) == 0) {
            ok = t->n_dims == 2 && v->reshape[0] * v->reshape[1] == t->ne[0] * t->ne[1] &&
                 gguf_writer_add_tensor_info(w, t->name, t->type, 2, v->reshape) == 0;
            continue;
        }
        ok = gguf_writer_add_tensor_info(w, t->name, t->type, t->n_dims, t->ne) == 0;
    }
    ok = ok && gguf_writer_begin_data(w) == 0;
    for (uint64_t i = 0; ok && i < gguf_tensor_count(in); i++) {
        const gguf_tensor *t = gguf_tensor_at(in, i);
        if (dropped(v, t->name))
            continue;
        ok = gguf_writer_write_data(w, t->data, t->nbytes) == 0;
    }
    if (w) {
        if (ok && gguf_writer_finish(w, &err) != 0) {
            fprintf(stderr, "writer: %s\n", err.message);
            ok = false;
        } else if (!ok) {
            gguf_writer_destroy(w);
        }
    }
    gguf_close(in);
    return ok;
}

/* fragments NULL: the copy must load. Otherwise loading fails with a
 * one-line message holding both fragments. */
static void expect(const char *source, const char *label, const variant *v, const char *fragment1,
                   const char *fragment2)
{
    char path[1024];
    bmoe_error error = {0};
    snprintf(path, sizeof path, "%s/arch-errors-%s.gguf", test_tmp_dir(), label);
    CHECK_MSG(write_variant(source, path, v), "%s: cannot write the model", label);
    bmoe_model *model = bmoe_model_load(path, NULL, &error);
    if (!fragment1) {
        CHECK_MSG(model != NULL, "%s: the unmodified copy does not load: %s", label, error.message);
    } else {
        CHECK_MSG(model == NULL, "%s: a broken model loaded", label);
        CHECK_MSG(strstr(error.message, fragment1) != NULL, "%s: message '%s' lacks '%s'", label, error.message,
                  fragment1);
        if (fragment2)
            CHECK_MSG(strstr(error.message, fragment2) != NULL, "%s: message '%s' lacks '%s'", label,
                      error.message, fragment2);
        CHECK_MSG(strchr(error.message, '\n') == NULL, "%s: message is not one line", label);
        printf("%s: %s\n", label, error.message);
    }
    bmoe_model_free(model);
    remove(path);
}

/* A file that declares its MTP block (nextn_predict_layers) and carries
 * none of its tensors loads without a head, and MTP drafting is refused
 * with the reason. */
static void expect_stripped_head(const char *source, const char *label, const variant *v)
{
    char path[1024];
    bmoe_error error = {0};
    snprintf(path, sizeof path, "%s/arch-errors-%s.gguf", test_tmp_dir(), label);
    CHECK_MSG(write_variant(source, path, v), "%s: cannot write the model", label);
    bmoe_model *model = bmoe_model_load(path, NULL, &error);
    CHECK_MSG(model != NULL, "%s: does not load: %s", label, error.message);
    bmoe_context_params context_params = bmoe_context_default_params();
    context_params.n_ctx = 64;
    bmoe_context *context = model ? bmoe_context_create(model, &context_params, &error) : NULL;
    CHECK_MSG(!model || context != NULL, "%s: no context: %s", label, error.message);
    if (context) {
        /* the generation's own check (these copies have no vocabulary to
         * start a generation with) */
        bmoe_speculation_params params = bmoe_generation_default_params().speculation;
        params.source = BMOE_DRAFT_MTP;
        speculation spec;
        int status = speculation_init(&spec, &params, context, &error);
        CHECK_MSG(status != 0 && strstr(error.message, "declares (nextn_predict_layers 1) but does not carry"),
                  "%s: MTP drafting without the head's tensors: %s", label, status ? error.message : "allowed");
        if (status == 0)
            speculation_free(&spec);
    }
    bmoe_context_free(context);
    bmoe_model_free(model);
    remove(path);
}

static void test_lfm2moe(void)
{
    const char *src = "lfm2moe-tiny-f32";
    expect(src, "lfm2moe-copy", &(variant){0}, NULL, NULL);
    expect(src, "lfm2moe-kv-length",
           &(variant){.key = "lfm2moe.attention.head_count_kv", .values = {0, 0, 2, 0}, .n_values = 4},
           "lfm2moe.attention.head_count_kv has 4 elements", "one per layer (5)");
    expect(src, "lfm2moe-no-conv", &(variant){.drop_tensor = "blk.1.shortconv.conv.weight"},
           "missing tensor 'blk.1.shortconv.conv.weight'", NULL);
    expect(src, "lfm2moe-conv-marked-attention",
           &(variant){.key = "lfm2moe.attention.head_count_kv", .values = {2, 0, 2, 0, 2}, .n_values = 5},
           "layer 0 is an attention layer", "blk.0.shortconv.in_proj.weight");
    expect(src, "lfm2moe-attention-marked-conv",
           &(variant){.key = "lfm2moe.attention.head_count_kv", .values = {0, 0, 0, 0, 2}, .n_values = 5},
           "layer 2 is a convolution layer", "blk.2.attn_q.weight");
    expect(src, "lfm2moe-dense-count", &(variant){.uint_key = "lfm2moe.leading_dense_block_count", .uint_value = 2},
           "layer 1 is a dense layer", "blk.1.ffn_gate_inp.weight");
    expect(src, "lfm2moe-kv-heads",
           &(variant){.key = "lfm2moe.attention.head_count_kv", .values = {0, 0, 3, 0, 2}, .n_values = 5},
           "head_count 4 is not a multiple of head_count_kv 3", NULL);
}

static void test_gemma4(void)
{
    const char *src = "gemma4-tiny-f32";
    expect(src, "gemma4-copy", &(variant){0}, NULL, NULL);
    expect(src, "gemma4-kv-length",
           &(variant){.key = "gemma4.attention.head_count_kv", .values = {2, 2, 1}, .n_values = 3},
           "gemma4.attention.head_count_kv has 3 elements", "one per layer (4)");
    expect(src, "gemma4-no-router-scale", &(variant){.drop_tensor = "blk.2.ffn_gate_inp.scale"},
           "missing tensor 'blk.2.ffn_gate_inp.scale'", NULL);
    /* layer 3 called sliding-window: its head size would be 32, its tensors are of 64 */
    expect(src, "gemma4-pattern",
           &(variant){.bool_key = "gemma4.attention.sliding_window_pattern", .bools = {1, 1, 1, 1}, .n_bools = 4},
           "blk.3.attn_q.weight", "expected {128, 128}");
    expect(src, "gemma4-pattern-length",
           &(variant){.bool_key = "gemma4.attention.sliding_window_pattern", .bools = {1, 1, 1}, .n_bools = 3},
           "sliding_window_pattern", "4 booleans");

    /* KV sharing on the oracle's layers (0-2 sliding-window, 3 full) */
    const char *shared = "gemma4.attention.shared_kv_layers";
    expect(src, "gemma4-shared-all", &(variant){.uint_key = shared, .uint_value = 4},
           "shared_kv_layers = 4 leaves no layer with a KV cache of its own", NULL);
    expect(src, "gemma4-shared-no-source", &(variant){.uint_key = shared, .uint_value = 3},
           "sliding-window layer 1 would attend over the KV cache of layer -1", "does not exist");
    expect(src, "gemma4-shared-other-kind", &(variant){.uint_key = shared, .uint_value = 1},
           "full-attention layer 3 would attend over the KV cache of layer 2", "a sliding-window layer");
    /* layer 2 may read layer 0's cache, but it has keys of its own */
    expect(src, "gemma4-shared-own-keys", &(variant){.uint_key = shared, .uint_value = 2},
           "layer 2 is KV-shared (it attends over layer 0's KV cache)", "'blk.2.attn_k.weight'");
    /* layers with a router need the experts' sizes (a model without routers does not) */
    expect(src, "gemma4-no-expert-ff", &(variant){.uint_key = "gemma4.expert_feed_forward_length", .uint_value = 0},
           "gemma4.expert_feed_forward_length", NULL);
    expect(src, "gemma4-per-layer-absent",
           &(variant){.uint_key = "gemma4.embedding_length_per_layer_input", .uint_value = 8},
           "missing tensor 'per_layer_token_embd.weight'", NULL);
}

/* The generated gemma4 models with KV sharing and with per-layer embeddings. */
static void test_gemma4_variants(void)
{
    mk_setup("arch_errors");
    char shared[1200], per_layer[1200];
    if (!gemma4_variant_write(&gemma4_variants[0], shared, sizeof shared) ||
        !gemma4_variant_write(&gemma4_variants[1], per_layer, sizeof per_layer))
        return;
    /* layers 3 and 4 read layer 1's cache: of its KV heads */
    expect(shared, "gemma4-shared-copy", &(variant){0}, NULL, NULL);
    expect(shared, "gemma4-shared-heads",
           &(variant){.key = "gemma4.attention.head_count_kv", .values = {2, 2, 1, 1, 2, 1}, .n_values = 6},
           "layer 3 (1 KV heads of 64) would attend over the KV cache of layer 1 (2 KV heads of 64)", NULL);

    const char *width = "gemma4.embedding_length_per_layer_input";
    expect(per_layer, "gemma4-per-layer-copy", &(variant){0}, NULL, NULL);
    expect(per_layer, "gemma4-per-layer-no-gate", &(variant){.drop_tensor = "blk.2.inp_gate.weight"},
           "missing tensor 'blk.2.inp_gate.weight'", NULL);
    expect(per_layer, "gemma4-per-layer-no-norm", &(variant){.drop_tensor = "per_layer_proj_norm.weight"},
           "missing tensor 'per_layer_proj_norm.weight'", NULL);
    expect(per_layer, "gemma4-per-layer-gate-shape",
           &(variant){.reshape_tensor = "blk.1.inp_gate.weight", .reshape = {32, 256}},
           "tensor 'blk.1.inp_gate.weight' has shape {32, 256}", "expected {256, 32}");
    /* 4 layers of 16, where the tensors hold 4 of 32 */
    expect(per_layer, "gemma4-per-layer-width", &(variant){.uint_key = width, .uint_value = 16},
           "tensor 'per_layer_token_embd.weight' has shape {128, 512}", "expected {64, 512}");
    expect(per_layer, "gemma4-per-layer-off", &(variant){.uint_key = width, .uint_value = 0},
           "tensor 'per_layer_token_embd.weight' is not used by the gemma4 architecture", "more unused tensors");
    remove(shared);
    remove(per_layer);
}

static void test_qwen35moe(void)
{
    const char *src = "qwen35moe-tiny-f32";
    expect(src, "qwen35moe-copy", &(variant){0}, NULL, NULL);
    expect(src, "qwen35moe-no-decay", &(variant){.drop_tensor = "blk.1.ssm_a"}, "missing tensor 'blk.1.ssm_a'",
           NULL);
    /* every second layer attending: layer 1 holds DeltaNet tensors */
    expect(src, "qwen35moe-interval", &(variant){.uint_key = "qwen35moe.full_attention_interval", .uint_value = 2},
           "layer 1 is a full-attention layer", "blk.1.attn_qkv.weight");
    expect(src, "qwen35moe-inner", &(variant){.uint_key = "qwen35moe.ssm.inner_size", .uint_value = 96},
           "ssm.inner_size 96", NULL);
}

/* The simple architectures' F32 models as bmoe-mkmodel writes them. */
static bool write_generated(const char *shape, char *path, size_t size)
{
    char file[64];
    snprintf(file, sizeof file, "%s.gguf", shape);
    mk_path(path, size, file);
    int status = mk_run("--shape %s --type f32 --quiet -o '%s'", shape, path);
    CHECK_MSG(status == 0, "bmoe-mkmodel --shape %s exited %d", shape, status);
    return status == 0;
}

static void test_simple_archs(void)
{
    mk_setup("arch_errors");
    char path[1200];
    if (write_generated("tiny-qwen2moe", path, sizeof path)) {
        expect(path, "qwen2moe-copy", &(variant){0}, NULL, NULL);
        expect(path, "qwen2moe-no-k-bias", &(variant){.drop_tensor = "blk.1.attn_k.bias"},
               "qwen2moe layer 1 lacks tensor 'blk.1.attn_k.bias'", NULL);
        expect(path, "qwen2moe-no-shared-gate", &(variant){.drop_tensor = "blk.2.ffn_gate_inp_shexp.weight"},
               "missing tensor 'blk.2.ffn_gate_inp_shexp.weight'", NULL);
        /* the shared expert is 512 wide; the key says 256 */
        expect(path, "qwen2moe-shared-width",
               &(variant){.uint_key = "qwen2moe.expert_shared_feed_forward_length", .uint_value = 256},
               "tensor 'blk.0.ffn_gate_shexp.weight' has shape {256, 512}", "expected {256, 256}");
        expect(path, "qwen2moe-shared-zero",
               &(variant){.uint_key = "qwen2moe.expert_shared_feed_forward_length", .uint_value = 0},
               "qwen2moe.expert_shared_feed_forward_length", NULL);
        remove(path);
    }
    if (write_generated("tiny-olmoe", path, sizeof path)) {
        expect(path, "olmoe-copy", &(variant){0}, NULL, NULL);
        expect(path, "olmoe-no-k-norm", &(variant){.drop_tensor = "blk.2.attn_k_norm.weight"},
               "missing tensor 'blk.2.attn_k_norm.weight'", NULL);
        /* feed_forward_length is the experts' width */
        expect(path, "olmoe-expert-width", &(variant){.uint_key = "olmoe.feed_forward_length", .uint_value = 128},
               "tensor 'blk.0.ffn_gate_exps.weight' has shape {256, 256, 16}", "expected {256, 128, 16}");
        expect(path, "olmoe-no-head", &(variant){.drop_tensor = "output.weight"}, "missing tensor 'output.weight'",
               NULL);
        remove(path);
    }
    if (write_generated("tiny-mixtral", path, sizeof path)) {
        expect(path, "mixtral-copy", &(variant){0}, NULL, NULL);
        expect(path, "mixtral-no-router", &(variant){.drop_tensor = "blk.1.ffn_gate_inp.weight"},
               "missing tensor 'blk.1.ffn_gate_inp.weight'", NULL);
        expect(path, "mixtral-expert-width", &(variant){.uint_key = "llama.feed_forward_length", .uint_value = 128},
               "tensor 'blk.0.ffn_gate_exps.weight' has shape {256, 256, 8}", "expected {256, 128, 8}");
        expect(path, "mixtral-no-experts", &(variant){.uint_key = "llama.expert_count", .uint_value = 0},
               "llama.expert_used_count 2 exceeds expert_count 0", NULL);
        remove(path);
    }
    /* 3 layers run (0 dense) and the MTP block 3; 16 experts in 4 groups, 2 used, top-4 */
    if (write_generated("tiny-bailingmoe2", path, sizeof path)) {
        expect(path, "bailingmoe2-copy", &(variant){0}, NULL, NULL);
        expect(path, "bailingmoe2-no-qkv", &(variant){.drop_tensor = "blk.1.attn_qkv.weight"},
               "missing tensor 'blk.1.attn_qkv.weight'", NULL);
        expect(path, "bailingmoe2-groups", &(variant){.uint_key = "bailingmoe2.expert_group_count", .uint_value = 3},
               "bailingmoe2.expert_group_count 3 does not split bailingmoe2.expert_count 16", NULL);
        expect(path, "bailingmoe2-groups-used",
               &(variant){.uint_key = "bailingmoe2.expert_group_used_count", .uint_value = 4},
               "bailingmoe2.expert_group_used_count 4 must be in [1, 4)", NULL);
        expect(path, "bailingmoe2-shared-width",
               &(variant){.uint_key = "bailingmoe2.expert_shared_feed_forward_length", .uint_value = 128},
               "tensor 'blk.1.ffn_gate_shexp.weight' is 256 wide", "give 128");
        /* softmax or sigmoid (0: its default, sigmoid); not deepseek4's sqrt(softplus) */
        expect(path, "bailingmoe2-gating",
               &(variant){.uint_key = "bailingmoe2.expert_gating_func", .uint_value = 4},
               "key 'bailingmoe2.expert_gating_func' = 4: bailingmoe2 routes by softmax (1) or sigmoid (2)", NULL);
        expect(path, "bailingmoe2-gating-none",
               &(variant){.uint_key = "bailingmoe2.expert_gating_func", .uint_value = 0}, NULL, NULL);
        expect(path, "bailingmoe2-dense",
               &(variant){.uint_key = "bailingmoe2.leading_dense_block_count", .uint_value = 2},
               "layer 1 is a dense layer", "'blk.1.ffn_gate_inp.weight'");
        /* without the key, block 3's MTP tensors are a layer's leftovers */
        expect(path, "bailingmoe2-no-nextn",
               &(variant){.uint_key = "bailingmoe2.nextn_predict_layers", .uint_value = 0},
               "is not used by the bailingmoe2 architecture", NULL);
        /* the MTP head's block (3) incomplete: its own tensors, its last
         * norm (the MTP layer's final_layernorm), a layer tensor */
        expect(path, "bailingmoe2-head-no-hnorm", &(variant){.drop_tensor = "blk.3.nextn.hnorm.weight"},
               "missing tensor 'blk.3.nextn.hnorm.weight'", "block 3 is the MTP head nextn_predict_layers declares");
        expect(path, "bailingmoe2-head-no-last-norm", &(variant){.drop_tensor = "blk.3.layer_output_norm.weight"},
               "missing tensor 'blk.3.layer_output_norm.weight'", "block 3 is the MTP head");
        expect(path, "bailingmoe2-head-no-qkv", &(variant){.drop_tensor = "blk.3.attn_qkv.weight"},
               "missing tensor 'blk.3.attn_qkv.weight'", "block 3 is the MTP head");
        expect_stripped_head(path, "bailingmoe2-head-stripped", &(variant){.drop_tensor = "blk.3."});
        expect(path, "bailingmoe2-head-eh-proj-shape",
               &(variant){.reshape_tensor = "blk.3.nextn.eh_proj.weight", .reshape = {256, 512}},
               "tensor 'blk.3.nextn.eh_proj.weight' has shape {256, 512}", "expected {512, 256}");
        remove(path);
    }
    if (write_generated("tiny-glm4moe", path, sizeof path)) {
        expect(path, "glm4moe-copy", &(variant){0}, NULL, NULL);
        expect(path, "glm4moe-no-bias", &(variant){.drop_tensor = "blk.2.exp_probs_b.bias"},
               "missing tensor 'blk.2.exp_probs_b.bias'", NULL);
        /* two shared experts of the experts' width: 512 */
        expect(path, "glm4moe-shared-count", &(variant){.uint_key = "glm4moe.expert_shared_count", .uint_value = 2},
               "tensor 'blk.1.ffn_gate_shexp.weight' has shape {256, 256}", "expected {256, 512}");
        expect(path, "glm4moe-no-ffn-norm", &(variant){.drop_tensor = "blk.1.post_attention_norm.weight"},
               "missing tensor 'blk.1.post_attention_norm.weight'", NULL);
        /* the MTP head's block (3): eh_proj, enorm and hnorm are required, so
         * is every layer tensor; its own norm, output matrix and embedding
         * are not (the model's stand in) */
        expect(path, "glm4moe-head-no-eh-proj", &(variant){.drop_tensor = "blk.3.nextn.eh_proj.weight"},
               "missing tensor 'blk.3.nextn.eh_proj.weight'", "block 3 is the MTP head nextn_predict_layers declares");
        expect(path, "glm4moe-head-no-router", &(variant){.drop_tensor = "blk.3.ffn_gate_inp.weight"},
               "missing tensor 'blk.3.ffn_gate_inp.weight'", "block 3 is the MTP head");
        expect(path, "glm4moe-head-no-selection-bias", &(variant){.drop_tensor = "blk.3.exp_probs_b.bias"},
               "missing tensor 'blk.3.exp_probs_b.bias'", "block 3 is the MTP head");
        expect(path, "glm4moe-head-head-shape",
               &(variant){.reshape_tensor = "blk.3.nextn.shared_head_head.weight", .reshape = {512, 256}},
               "tensor 'blk.3.nextn.shared_head_head.weight' has shape {512, 256}", "expected {256, 512}");
        expect_stripped_head(path, "glm4moe-head-stripped", &(variant){.drop_tensor = "blk.3."});
        expect(path, "glm4moe-head-no-own-norm", &(variant){.drop_tensor = "blk.3.nextn.shared_head_norm.weight"},
               NULL, NULL);
        expect(path, "glm4moe-head-no-own-head", &(variant){.drop_tensor = "blk.3.nextn.shared_head_head.weight"},
               NULL, NULL);
        expect(path, "glm4moe-head-no-own-embedding",
               &(variant){.drop_tensor = "blk.3.nextn.embed_tokens.weight"}, NULL, NULL);
        remove(path);
    }
}

/* deepseek2 in both attention layouts: the latent-cache file (low-rank
 * queries, attn_k_b and attn_v_b) and the older one (attn_q, attn_kv_b);
 * DeepSeek-V3's MTP block as the draft head. */
static void test_deepseek2(void)
{
    mk_setup("arch_errors");
    char path[1200];
    if (write_generated("tiny-deepseek2", path, sizeof path)) {
        expect(path, "deepseek2-copy", &(variant){0}, NULL, NULL);
        expect(path, "deepseek2-no-k-b", &(variant){.drop_tensor = "blk.2.attn_k_b.weight"},
               "missing tensor 'blk.2.attn_k_b.weight'", NULL);
        expect(path, "deepseek2-no-latent-norm", &(variant){.drop_tensor = "blk.0.attn_kv_a_norm.weight"},
               "missing tensor 'blk.0.attn_kv_a_norm.weight'", NULL);
        expect(path, "deepseek2-no-q-norm", &(variant){.drop_tensor = "blk.1.attn_q_a_norm.weight"},
               "missing tensor 'blk.1.attn_q_a_norm.weight'", NULL);
        /* DeepSeek-V3's groups, read as every architecture's */
        expect(path, "deepseek2-groups", &(variant){.uint_key = "deepseek2.expert_group_count", .uint_value = 3},
               "deepseek2.expert_group_count 3 does not split deepseek2.expert_count 16", NULL);
        /* the cache's key is kv_lora_rank + 32 = 288 wide, the key says 160 */
        expect(path, "deepseek2-kv-lora", &(variant){.uint_key = "deepseek2.attention.kv_lora_rank", .uint_value = 128},
               "key_length kv_lora_rank + rope.dimension_count (160)", "have 1, 288, 256");
        expect(path, "deepseek2-dense-count",
               &(variant){.uint_key = "deepseek2.leading_dense_block_count", .uint_value = 2},
               "layer 1 is a dense layer", "blk.1.ffn_gate_inp.weight");
        expect(path, "deepseek2-no-q-lora", &(variant){.uint_key = "deepseek2.attention.q_lora_rank", .uint_value = 0},
               "layer 0 is a full-rank query layer", "blk.0.attn_q_a.weight");
        remove(path);
    }
    /* 4 layers run (0 dense) and the MTP block 4, as DeepSeek-V3's layer 61 */
    if (write_generated("tiny-deepseek3-mtp", path, sizeof path)) {
        expect(path, "deepseek3-mtp-copy", &(variant){0}, NULL, NULL);
        /* without the key, block 4's MTP tensors are a layer's leftovers */
        expect(path, "deepseek3-mtp-no-nextn",
               &(variant){.uint_key = "deepseek2.nextn_predict_layers", .uint_value = 0},
               "is not used by the deepseek2 architecture", NULL);
        /* the head's block incomplete: eh_proj, enorm and hnorm are
         * required, so is every tensor of its MLA and MoE layer; its own
         * norm, output matrix and embedding are not (the model's stand in) */
        expect(path, "deepseek3-head-no-eh-proj", &(variant){.drop_tensor = "blk.4.nextn.eh_proj.weight"},
               "missing tensor 'blk.4.nextn.eh_proj.weight'", "block 4 is the MTP head nextn_predict_layers declares");
        expect(path, "deepseek3-head-no-enorm", &(variant){.drop_tensor = "blk.4.nextn.enorm.weight"},
               "missing tensor 'blk.4.nextn.enorm.weight'", "block 4 is the MTP head");
        expect(path, "deepseek3-head-no-k-b", &(variant){.drop_tensor = "blk.4.attn_k_b.weight"},
               "missing tensor 'blk.4.attn_k_b.weight'", "block 4 is the MTP head");
        expect(path, "deepseek3-head-no-latent-norm", &(variant){.drop_tensor = "blk.4.attn_kv_a_norm.weight"},
               "missing tensor 'blk.4.attn_kv_a_norm.weight'", "block 4 is the MTP head");
        expect(path, "deepseek3-head-no-router", &(variant){.drop_tensor = "blk.4.ffn_gate_inp.weight"},
               "missing tensor 'blk.4.ffn_gate_inp.weight'", "block 4 is the MTP head");
        expect(path, "deepseek3-head-no-shared-expert", &(variant){.drop_tensor = "blk.4.ffn_down_shexp.weight"},
               "missing tensor 'blk.4.ffn_down_shexp.weight'", "block 4 is the MTP head");
        expect(path, "deepseek3-head-eh-proj-shape",
               &(variant){.reshape_tensor = "blk.4.nextn.eh_proj.weight", .reshape = {256, 512}},
               "tensor 'blk.4.nextn.eh_proj.weight' has shape {256, 512}", "expected {512, 256}");
        expect(path, "deepseek3-head-head-shape",
               &(variant){.reshape_tensor = "blk.4.nextn.shared_head_head.weight", .reshape = {512, 256}},
               "tensor 'blk.4.nextn.shared_head_head.weight' has shape {512, 256}", "expected {256, 512}");
        expect_stripped_head(path, "deepseek3-head-stripped", &(variant){.drop_tensor = "blk.4."});
        expect(path, "deepseek3-head-no-own-norm", &(variant){.drop_tensor = "blk.4.nextn.shared_head_norm.weight"},
               NULL, NULL);
        expect(path, "deepseek3-head-no-own-head", &(variant){.drop_tensor = "blk.4.nextn.shared_head_head.weight"},
               NULL, NULL);
        expect(path, "deepseek3-head-no-own-embedding",
               &(variant){.drop_tensor = "blk.4.nextn.embed_tokens.weight"}, NULL, NULL);
        remove(path);
    }
    if (write_generated("tiny-deepseek2-lite", path, sizeof path)) {
        expect(path, "deepseek2-lite-copy", &(variant){0}, NULL, NULL);
        expect(path, "deepseek2-lite-no-kv-b", &(variant){.drop_tensor = "blk.1.attn_kv_b.weight"},
               "missing tensor 'blk.1.attn_kv_b.weight'", NULL);
        expect(path, "deepseek2-lite-shared", &(variant){.uint_key = "deepseek2.expert_shared_count", .uint_value = 2},
               "tensor 'blk.1.ffn_gate_shexp.weight' has shape {256, 256}", "expected {256, 512}");
        remove(path);
    }
}

/* deepseek4: the hyper-connections' and the grouped output's tensors, its
 * head layout and routing keys, the hash layers' tables against
 * hash_layer_count, a ratio-4 and a ratio-128 layer's compressor, and the
 * ratios there are. */
static void test_deepseek4(void)
{
    mk_setup("arch_errors");
    char path[1200];
    if (!write_generated("tiny-deepseek4", path, sizeof path))
        return;
    expect(path, "deepseek4-copy", &(variant){0}, NULL, NULL);
    expect(path, "deepseek4-no-hc-fn", &(variant){.drop_tensor = "blk.1.hc_ffn_fn.weight"},
           "missing tensor 'blk.1.hc_ffn_fn.weight'", NULL);
    expect(path, "deepseek4-no-head-hc", &(variant){.drop_tensor = "output_hc_scale.weight"},
           "missing tensor 'output_hc_scale.weight'", NULL);
    expect(path, "deepseek4-no-output-a", &(variant){.drop_tensor = "blk.2.attn_output_a.weight"},
           "missing tensor 'blk.2.attn_output_a.weight'", NULL);
    expect(path, "deepseek4-no-sinks", &(variant){.drop_tensor = "blk.0.attn_sinks.weight"},
           "missing tensor 'blk.0.attn_sinks.weight'", NULL);
    expect(path, "deepseek4-groups",
           &(variant){.uint_key = "deepseek4.attention.output_group_count", .uint_value = 3},
           "deepseek4.attention.output_group_count 3 does not divide head_count 4", NULL);
    expect(path, "deepseek4-kv-heads", &(variant){.uint_key = "deepseek4.attention.head_count_kv", .uint_value = 2},
           "needs deepseek4.attention.head_count_kv 1", NULL);
    expect(path, "deepseek4-gating", &(variant){.uint_key = "deepseek4.expert_gating_func", .uint_value = 2},
           "key 'deepseek4.expert_gating_func' = 2: deepseek4 routes by sqrt(softplus) (4)", NULL);
    /* none is no default here: the reference refuses every gating but sqrt(softplus) */
    expect(path, "deepseek4-gating-none", &(variant){.uint_key = "deepseek4.expert_gating_func", .uint_value = 0},
           "key 'deepseek4.expert_gating_func' = 0: deepseek4 routes by sqrt(softplus) (4)", NULL);
    expect(path, "deepseek4-compressed", &(variant){.key = "deepseek4.attention.compress_ratios",
                                                    .values = {4, 4, 0}, .n_values = 3},
           "missing tensor 'blk.1.attn_compressor_kv.weight'", NULL);
    /* a ratio-128 layer needs its own compressor (and no indexer) */
    expect(path, "deepseek4-hca", &(variant){.key = "deepseek4.attention.compress_ratios",
                                             .values = {0, 128, 0}, .n_values = 3},
           "missing tensor 'blk.1.attn_compressor_kv.weight'", NULL);
    expect(path, "deepseek4-hca-shape", &(variant){.key = "deepseek4.attention.compress_ratios",
                                                   .values = {128, 0, 0}, .n_values = 3},
           "tensor 'blk.0.attn_compressor_kv.weight' has shape {256, 256}", "expected {256, 128}");
    expect(path, "deepseek4-ratio", &(variant){.key = "deepseek4.attention.compress_ratios",
                                               .values = {0, 0, 8}, .n_values = 3},
           "compress_ratios[2] = 8: the compress ratios are 0, 4 or 128", NULL);
    /* a hash layer needs its table, and has no selection bias */
    expect(path, "deepseek4-hash", &(variant){.uint_key = "deepseek4.hash_layer_count", .uint_value = 1},
           "layer 0 is a hash-routed layer (below hash_layer_count)", "blk.0.exp_probs_b.bias");
    remove(path);
    if (!write_generated("tiny-deepseek4-hash", path, sizeof path))
        return;
    expect(path, "deepseek4-hash-copy", &(variant){0}, NULL, NULL);
    expect(path, "deepseek4-no-table", &(variant){.drop_tensor = "blk.1.ffn_gate_tid2eid.weight"},
           "missing tensor 'blk.1.ffn_gate_tid2eid.weight'", NULL);
    expect(path, "deepseek4-hash-count", &(variant){.uint_key = "deepseek4.hash_layer_count", .uint_value = 1},
           "layer 1 is a router-chosen layer (not below hash_layer_count)", "blk.1.ffn_gate_tid2eid.weight");
    remove(path);
}

int main(void)
{
    test_lfm2moe();
    test_gemma4();
    test_gemma4_variants();
    test_qwen35moe();
    test_simple_archs();
    test_deepseek2();
    test_deepseek4();
    return test_finish();
}
