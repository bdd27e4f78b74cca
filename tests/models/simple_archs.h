/* The tiny models of the simple MoE architectures (qwen2moe, llama with
 * experts, olmoe, bailingmoe2, glm4moe, deepseek2, deepseek4) that the model tests
 * generate with bmoe-mkmodel, and
 * their reference logits in tests/models/data (llama.cpp's, written by
 * data/regenerate.sh from the same presets). Header-only; the test's
 * mk_setup comes first. */
#ifndef BMOE_TESTS_SIMPLE_ARCHS_H
#define BMOE_TESTS_SIMPLE_ARCHS_H

#include "../mkmodel/mkmodel_run.h"
#include "oracle_support.h"

typedef struct simple_arch_model {
    const char *name;         /* the data files' prefix, and the generated file's */
    const char *flags;        /* bmoe-mkmodel's */
    const char *architecture; /* general.architecture */
    int n_expert, n_expert_used;
    int n_group, n_group_used;  /* grouped routing; 0: none */
    /* test_batch_invariance runs it: the Q4_K_M models; the grouped routers'
     * (bailingmoe2, glm4moe) F32 ones (what is theirs, the routing, fused
     * q/k/v, the shared expert, does not depend on the weights' type, and an
     * F32 model is written in a fraction of the time); for deepseek2 the F32
     * latent-cache one only (its own code is per token whatever the weights'
     * type, and the older layout's attention is the plain one; both Q4_K_M
     * models added a minute under ASan, both F32 ones 35 s) */
    bool batch_invariance;
} simple_arch_model;

static const simple_arch_model simple_arch_models[] = {
    {"qwen2moe-tiny-f32", "--shape tiny-qwen2moe --type f32", "qwen2moe", 16, 4, 0, 0, false},
    {"qwen2moe-tiny-q4_k_m", "--shape tiny-qwen2moe --type q4_k_m", "qwen2moe", 16, 4, 0, 0, true},
    {"mixtral-tiny-f32", "--shape tiny-mixtral --type f32", "llama", 8, 2, 0, 0, false},
    {"mixtral-tiny-q4_k_m", "--shape tiny-mixtral --type q4_k_m", "llama", 8, 2, 0, 0, true},
    {"olmoe-tiny-f32", "--shape tiny-olmoe --type f32", "olmoe", 16, 8, 0, 0, false},
    {"olmoe-tiny-q4_k_m", "--shape tiny-olmoe --type q4_k_m", "olmoe", 16, 8, 0, 0, true},
    {"bailingmoe2-tiny-f32", "--shape tiny-bailingmoe2 --type f32", "bailingmoe2", 16, 4, 4, 2, true},
    {"bailingmoe2-tiny-q4_k_m", "--shape tiny-bailingmoe2 --type q4_k_m", "bailingmoe2", 16, 4, 4, 2, false},
    {"glm4moe-tiny-f32", "--shape tiny-glm4moe --type f32", "glm4moe", 16, 4, 4, 2, true},
    {"glm4moe-tiny-q4_k_m", "--shape tiny-glm4moe --type q4_k_m", "glm4moe", 16, 4, 4, 2, false},
    /* latent cache, low-rank queries, sigmoid routing with a selection bias */
    {"deepseek2-tiny-f32", "--shape tiny-deepseek2 --type f32", "deepseek2", 16, 4, 0, 0, true},
    {"deepseek2-tiny-q4_k_m", "--shape tiny-deepseek2 --type q4_k_m", "deepseek2", 16, 4, 0, 0, false},
    /* DeepSeek-V3's grouped routing on the same: 4 groups, the best 2 eligible */
    {"deepseek3-tiny-f32", "--shape tiny-deepseek3 --type f32", "deepseek2", 16, 4, 4, 2, false},
    {"deepseek3-tiny-q4_k_m", "--shape tiny-deepseek3 --type q4_k_m", "deepseek2", 16, 4, 4, 2, false},
    /* attn_q and the older attn_kv_b (decompressed heads), softmax routing */
    {"deepseek2-lite-tiny-f32", "--shape tiny-deepseek2-lite --type f32", "deepseek2", 16, 4, 0, 0, false},
    {"deepseek2-lite-tiny-q4_k_m", "--shape tiny-deepseek2-lite --type q4_k_m", "deepseek2", 16, 4, 0, 0, false},
    /* DeepSeek-V4: hyper-connections, one shared KV head with sinks and a
     * sliding window, grouped output, sqrt-softplus routing, clamped SwiGLU */
    {"deepseek4-tiny-f32", "--shape tiny-deepseek4 --type f32", "deepseek4", 16, 4, 0, 0, true},
    {"deepseek4-tiny-q4_k_m", "--shape tiny-deepseek4 --type q4_k_m", "deepseek4", 16, 4, 0, 0, false},
    /* its first two layers routed by the token-id table */
    {"deepseek4-hash-tiny-f32", "--shape tiny-deepseek4-hash --type f32", "deepseek4", 16, 4, 0, 0, false},
    {"deepseek4-hash-tiny-q4_k_m", "--shape tiny-deepseek4-hash --type q4_k_m", "deepseek4", 16, 4, 0, 0, false},
    /* a 300-token prompt through a ratio-4 layer whose indexer keeps 8 entries and a ratio-128 layer */
    {"deepseek4-long-tiny-f32", "--shape tiny-deepseek4-long --type f32", "deepseek4", 16, 4, 0, 0, true},
    {"deepseek4-long-tiny-q4_k_m", "--shape tiny-deepseek4-long --type q4_k_m", "deepseek4", 16, 4, 0, 0, false},
};
enum { SIMPLE_ARCH_MODELS = sizeof simple_arch_models / sizeof simple_arch_models[0] };

static inline const simple_arch_model *simple_arch_find(const char *name)
{
    for (int i = 0; i < SIMPLE_ARCH_MODELS; i++)
        if (strcmp(simple_arch_models[i].name, name) == 0)
            return &simple_arch_models[i];
    return NULL;
}

/* Writes the model into the test's scratch folder; path gets its name.
 * false (with the tool's message recorded as a failed check) if the tool fails. */
static inline bool simple_arch_write(const simple_arch_model *m, char *path, size_t size)
{
    char file[128];
    snprintf(file, sizeof file, "%s.gguf", m->name);
    mk_path(path, size, file);
    int status = mk_run("%s --quiet -o '%s'", m->flags, path);
    char *errors = status == 0 ? NULL : test_read_file(mk_stderr, NULL);
    CHECK_MSG(status == 0, "%s: bmoe-mkmodel exited %d: %s", m->name, status, errors ? errors : "");
    free(errors);
    return status == 0;
}

/* data/<name>.json and its logits (oracle_data_case_load). */
static inline int simple_arch_case_load(oracle_case *c, const char *name)
{
    return oracle_data_case_load(c, BMOE_TEST_DATA_DIR, name);
}

#endif
