/* The real GGUF files in shared/ load, and known facts about them hold: the
 * oracle MoE models (shapes from oracle/README.md), stories260K (llama2.c's
 * 260K model: 5 layers, dim 64, vocab 512, 48 tensors) and llama.cpp's
 * vocab-only files (no tensors, no data padding). */
#include <inttypes.h>

#include "gguf_test_util.h"
#include "test.h"

static gguf_model *open_shared(const char *relative)
{
    char path[1024];
    test_shared_path(path, sizeof path, relative);
    bmoe_error err = {0};
    gguf_model *m = gguf_open(path, &err);
    CHECK_MSG(m != NULL, "%s: %s", relative, err.message);
    return m;
}

static bool arch_is(const gguf_model *m, const char *arch)
{
    gguf_string s;
    return gguf_get_string(m, "general.architecture", &s) && s.length == strlen(arch) &&
           memcmp(s.data, arch, s.length) == 0;
}

static int64_t arch_int(const gguf_model *m, const char *arch, const char *suffix)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    int64_t value = -1;
    gguf_get_int(m, key, &value);
    return value;
}

static uint64_t token_count(const gguf_model *m)
{
    const gguf_kv *kv = gguf_find_kv(m, "tokenizer.ggml.tokens");
    return kv && kv->type == GGUF_TYPE_ARRAY && kv->array_type == GGUF_TYPE_STRING ? kv->array_count : 0;
}

/* Invariants every loaded model must satisfy. */
static void check_invariants(const gguf_model *m, const char *name)
{
    bool ok = true;
    for (uint64_t i = 0; i < gguf_tensor_count(m); i++) {
        const gguf_tensor *t = gguf_tensor_at(m, i);
        ok &= t->file_offset % gguf_alignment(m) == 0;
        ok &= t->file_offset + t->nbytes <= gguf_shard_size(m, t->shard);
        ok &= quant_row_bytes(t->type, t->ne[0]) * (uint64_t)(t->ne[1] * t->ne[2] * t->ne[3]) == t->nbytes;
        ok &= gguf_find_tensor(m, t->name) == t;
    }
    CHECK_MSG(ok, "%s: tensor invariants", name);
    for (uint64_t i = 0; i < gguf_kv_count(m); i++)
        ok &= gguf_find_kv(m, gguf_kv_at(m, i)->key) == gguf_kv_at(m, i);
    CHECK_MSG(ok, "%s: key lookup", name);
}

static bool has_type(const gguf_model *m, uint32_t type)
{
    for (uint64_t i = 0; i < gguf_tensor_count(m); i++)
        if (gguf_tensor_at(m, i)->type == type)
            return true;
    return false;
}

typedef struct oracle_model {
    const char *file;
    const char *arch;
    int layers, n_embd, experts, experts_used, vocab;
    uint32_t required_type; /* a type that must appear */
    uint32_t second_type;
} oracle_model;

static const oracle_model oracle_models[] = {
    {"qwen3moe-tiny-f32.gguf", "qwen3moe", 3, 128, 16, 4, 501, TYPE_F32, TYPE_F32},
    {"qwen3moe-tiny-q8_0.gguf", "qwen3moe", 3, 256, 16, 4, 501, TYPE_Q8_0, TYPE_F32},
    {"qwen3moe-tiny-q4_k_m.gguf", "qwen3moe", 3, 256, 16, 4, 501, TYPE_Q4_K, TYPE_Q6_K},
    {"gptoss-tiny-f32.gguf", "gpt-oss", 3, 128, 16, 4, 504, TYPE_F32, TYPE_F32},
    {"gptoss-tiny-mxfp4.gguf", "gpt-oss", 3, 256, 16, 4, 504, TYPE_MXFP4, TYPE_Q8_0},
    {"gemma4-tiny-f32.gguf", "gemma4", 4, 128, 16, 4, 504, TYPE_F32, TYPE_F32},
    {"gemma4-tiny-q4_k_m.gguf", "gemma4", 4, 256, 16, 4, 504, TYPE_Q4_K, TYPE_F32},
    {"qwen35moe-tiny-f32.gguf", "qwen35moe", 4, 128, 16, 4, 501, TYPE_F32, TYPE_F32},
    {"qwen35moe-tiny-q4_k_m.gguf", "qwen35moe", 4, 256, 16, 4, 501, TYPE_Q4_K, TYPE_F32},
    {"lfm2moe-tiny-f32.gguf", "lfm2moe", 5, 128, 16, 4, 501, TYPE_F32, TYPE_F32},
    {"lfm2moe-tiny-q4_k_m.gguf", "lfm2moe", 5, 256, 16, 4, 501, TYPE_Q4_K, TYPE_F32},
};

static void test_oracle_models(void)
{
    for (size_t i = 0; i < sizeof oracle_models / sizeof oracle_models[0]; i++) {
        const oracle_model *o = &oracle_models[i];
        char relative[256];
        snprintf(relative, sizeof relative, "oracle/models/%s", o->file);
        gguf_model *m = open_shared(relative);
        if (!m)
            continue;
        CHECK_MSG(arch_is(m, o->arch), "%s architecture", o->file);
        CHECK_MSG(arch_int(m, o->arch, "block_count") == o->layers, "%s block_count", o->file);
        CHECK_MSG(arch_int(m, o->arch, "embedding_length") == o->n_embd, "%s n_embd", o->file);
        CHECK_MSG(arch_int(m, o->arch, "expert_count") == o->experts, "%s experts", o->file);
        CHECK_MSG(arch_int(m, o->arch, "expert_used_count") == o->experts_used, "%s used", o->file);
        CHECK_MSG(token_count(m) == (uint64_t)o->vocab, "%s vocab %" PRIu64, o->file, token_count(m));
        const gguf_tensor *embd = gguf_find_tensor(m, "token_embd.weight");
        CHECK_MSG(embd && embd->n_dims == 2 && embd->ne[0] == o->n_embd && embd->ne[1] == o->vocab,
                  "%s token_embd shape", o->file);
        CHECK_MSG(has_type(m, o->required_type) && has_type(m, o->second_type), "%s tensor types", o->file);
        /* some tensor of each MoE layer stacks the experts in its last dimension */
        const gguf_tensor *experts = NULL;
        for (uint64_t t = 0; t < gguf_tensor_count(m) && !experts; t++)
            if (strstr(gguf_tensor_at(m, t)->name, "_exps.weight"))
                experts = gguf_tensor_at(m, t);
        CHECK_MSG(experts && experts->n_dims == 3 && experts->ne[2] == o->experts, "%s expert tensor", o->file);
        CHECK(gguf_shard_count(m) == 1 && gguf_version(m) == 3);
        check_invariants(m, o->file);
        gguf_close(m);
    }
}

static void test_stories260k(void)
{
    gguf_model *m = open_shared("data/models/stories260K/stories260K.gguf");
    if (!m)
        return;
    CHECK(gguf_tensor_count(m) == 48);
    CHECK(arch_is(m, "llama"));
    CHECK(arch_int(m, "llama", "block_count") == 5);
    CHECK(arch_int(m, "llama", "embedding_length") == 64);
    CHECK(arch_int(m, "llama", "attention.head_count") == 8);
    CHECK(arch_int(m, "llama", "attention.head_count_kv") == 4);
    CHECK(token_count(m) == 512);
    uint32_t heads[5];
    bmoe_error err = {0};
    CHECK(gguf_get_per_layer_uint32(m, "llama.attention.head_count", 5, heads, &err) == 1 && heads[4] == 8);
    const gguf_tensor *embd = gguf_find_tensor(m, "token_embd.weight");
    CHECK(embd && embd->type == TYPE_F32 && embd->ne[0] == 64 && embd->ne[1] == 512 && embd->nbytes == 64 * 512 * 4);
    const gguf_kv *tokens = gguf_find_kv(m, "tokenizer.ggml.tokens");
    if (tokens) {
        gguf_string *list = malloc(512 * sizeof *list);
        CHECK(gguf_array_strings(tokens, list));
        /* SentencePiece layout: <unk>, <s>, </s>, then the 256 byte tokens */
        CHECK(list[1].length == 3 && memcmp(list[1].data, "<s>", 3) == 0);
        CHECK(list[3].length == 6 && memcmp(list[3].data, "<0x00>", 6) == 0);
        free(list);
    }
    check_invariants(m, "stories260K");
    gguf_close(m);
}

static void test_vocab_files(void)
{
    static const struct {
        const char *file;
        const char *arch;
        uint64_t min_tokens, max_tokens;
    } files[] = {
        {"ggml-vocab-gpt-2.gguf", "gpt2", 50257, 50257},
        {"ggml-vocab-llama-spm.gguf", "llama", 32000, 32000},
        {"ggml-vocab-deepseek-llm.gguf", "llama", 100000, 110000},
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char relative[256];
        snprintf(relative, sizeof relative, "data/llama-vocab-tests/%s", files[i].file);
        gguf_model *m = open_shared(relative);
        if (!m)
            continue;
        CHECK_MSG(gguf_tensor_count(m) == 0, "%s has no tensors", files[i].file);
        CHECK_MSG(arch_is(m, files[i].arch), "%s arch", files[i].file);
        uint64_t n = token_count(m);
        CHECK_MSG(n >= files[i].min_tokens && n <= files[i].max_tokens, "%s tokens %" PRIu64, files[i].file, n);
        const gguf_kv *types = gguf_find_kv(m, "tokenizer.ggml.token_type");
        CHECK_MSG(types && types->array_count == n, "%s token types", files[i].file);
        check_invariants(m, files[i].file);
        gguf_close(m);
    }
}

int main(void)
{
    test_oracle_models();
    test_stories260k();
    test_vocab_files();
    return test_finish();
}
