/* The architecture registry: one row per supported general.architecture.
 * Adding an architecture = one arch_<name>.c file and one row here. */
#include <string.h>

#include "model.h"

int qwen3moe_bind(model *m, bmoe_error *err);
int qwen3moe_forward(const model *m, run_state *s, const forward_batch *batch, bmoe_error *err);
int gpt_oss_bind(model *m, bmoe_error *err);
int gpt_oss_forward(const model *m, run_state *s, const forward_batch *batch, bmoe_error *err);
int llama_bind(model *m, bmoe_error *err);
int llama_forward(const model *m, run_state *s, const forward_batch *batch, bmoe_error *err);
int gemma4_bind(model *m, bmoe_error *err);
int gemma4_forward(const model *m, run_state *s, const forward_batch *batch, bmoe_error *err);
int qwen35moe_bind(model *m, bmoe_error *err);
int qwen35moe_forward(const model *m, run_state *s, const forward_batch *batch, bmoe_error *err);
int qwen35moe_head_forward(const model *m, run_state *s, const forward_batch *batch, const float *hidden,
                           float *hidden_out, bmoe_error *err);
int lfm2moe_bind(model *m, bmoe_error *err);
int lfm2moe_forward(const model *m, run_state *s, const forward_batch *batch, bmoe_error *err);
int qwen2moe_bind(model *m, bmoe_error *err);
int qwen2moe_forward(const model *m, run_state *s, const forward_batch *batch, bmoe_error *err);
int olmoe_bind(model *m, bmoe_error *err);
int olmoe_forward(const model *m, run_state *s, const forward_batch *batch, bmoe_error *err);
int bailingmoe2_bind(model *m, bmoe_error *err);
int glm4moe_bind(model *m, bmoe_error *err);
int deepseek2_bind(model *m, bmoe_error *err);
int deepseek2_forward(const model *m, run_state *s, const forward_batch *batch, bmoe_error *err);
int deepseek2_head_forward(const model *m, run_state *s, const forward_batch *batch, const float *hidden,
                           float *hidden_out, bmoe_error *err);
int deepseek4_bind(model *m, bmoe_error *err);
int deepseek4_forward(const model *m, run_state *s, const forward_batch *batch, bmoe_error *err);

static const model_arch model_archs[] = {
    {"qwen3moe", qwen3moe_bind, qwen3moe_forward, false, NULL},
    {"gpt-oss", gpt_oss_bind, gpt_oss_forward, false, NULL},
    {"llama", llama_bind, llama_forward, false, NULL},
    {"lfm2moe", lfm2moe_bind, lfm2moe_forward, true, NULL},
    {"gemma4", gemma4_bind, gemma4_forward, true, NULL},
    {"qwen35moe", qwen35moe_bind, qwen35moe_forward, true, qwen35moe_head_forward},
    {"qwen2moe", qwen2moe_bind, qwen2moe_forward, false, NULL},
    {"olmoe", olmoe_bind, olmoe_forward, false, NULL},
    {"bailingmoe2", bailingmoe2_bind, keyed_transformer_forward, false, keyed_transformer_head_forward},
    {"glm4moe", glm4moe_bind, keyed_transformer_forward, false, keyed_transformer_head_forward},
    {"deepseek2", deepseek2_bind, deepseek2_forward, false, deepseek2_head_forward},
    {"deepseek4", deepseek4_bind, deepseek4_forward, false, NULL},
};

const model_arch *model_arch_find(const char *name)
{
    for (size_t i = 0; i < sizeof model_archs / sizeof model_archs[0]; i++)
        if (strcmp(model_archs[i].name, name) == 0)
            return &model_archs[i];
    return NULL;
}

const model_arch *model_arch_at(int index)
{
    if (index < 0 || (size_t)index >= sizeof model_archs / sizeof model_archs[0])
        return NULL;
    return &model_archs[index];
}

const char *model_arch_names(void)
{
    return "qwen3moe, gpt-oss, llama, lfm2moe, gemma4, qwen35moe, qwen2moe, olmoe, bailingmoe2, glm4moe, deepseek2, "
           "deepseek4";
}
