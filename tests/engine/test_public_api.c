/* An application of the shared library: this file sees bmoe.h and nothing
 * else of the engine, links libbmoe.so, loads a model, reads what it says
 * about itself and runs a generation. */
#include <stdio.h>
#include <string.h>

#include <bmoe.h>

#include "test.h"

static bool count_step(void *user, const bmoe_step *step)
{
    int *steps = user;
    if (step->token >= 0)
        (*steps)++;
    return true;
}

int main(void)
{
    char path[1024];
    test_shared_path(path, sizeof path, "oracle/models/qwen3moe-tiny-f32.gguf");
    bmoe_error error = {0};
    bmoe_model *model = bmoe_model_load(path, NULL, &error);
    CHECK_MSG(model != NULL, "load: %s", error.message);
    if (!model)
        return test_finish();

    bmoe_model_info info;
    bmoe_model_get_info(model, &info);
    /* the oracle README: 3 layers, 16 experts top-4, all MoE */
    CHECK(info.n_layer == 3 && info.n_moe_layers == 3 && info.n_expert == 16 && info.n_expert_used == 4);
    CHECK(info.n_shards == 1 && info.expert_bytes > 0 && info.dense_bytes > 0 &&
          info.tensor_bytes == info.expert_bytes + info.dense_bytes && info.file_bytes > info.tensor_bytes);
    /* n_embd 128, expert ff 128, F32: gate + up + down of one expert */
    CHECK(info.expert_slice_bytes == 3u * 128u * 128u * 4u);
    char arch[32];
    CHECK(bmoe_model_meta_string(model, "general.architecture", arch, sizeof arch) == 8 && strcmp(arch, "qwen3moe") == 0);
    CHECK(bmoe_model_meta_string(model, "general.no-such-key", arch, sizeof arch) == -1);
    char small[4];
    CHECK(bmoe_model_meta_string(model, "general.architecture", small, sizeof small) == 8 && strcmp(small, "qwe") == 0);
    const char *template_text = bmoe_model_chat_template(model);
    CHECK(template_text && strstr(template_text, "<|im_start|>") != NULL);
    int32_t ends[8];
    int32_t n_ends = bmoe_token_end_of_generation_list(model, ends, 8);
    CHECK(n_ends >= 1 && n_ends <= 8);
    for (int i = 0; i < n_ends && i < 8; i++)
        CHECK(bmoe_token_is_end_of_generation(model, ends[i]));

    bmoe_context *context = bmoe_context_create(model, NULL, &error);
    CHECK_MSG(context != NULL, "context: %s", error.message);
    bmoe_generation_params params = bmoe_generation_default_params();
    params.n_predict = 12;
    params.ignore_eos = true;
    const char *prompt = "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n";
    bmoe_generation *generation =
        context ? bmoe_generation_start_text(context, &params, prompt, strlen(prompt), &error) : NULL;
    CHECK_MSG(generation != NULL, "start: %s", error.message);
    int steps = 0;
    CHECK(generation && bmoe_generation_run(generation, count_step, &steps, &error) == 0);
    CHECK(steps == 12 && generation && bmoe_generation_n_generated(generation) == 12);
    bmoe_generation_free(generation);
    bmoe_context_free(context);
    bmoe_model_free(model);
    CHECK(strcmp(bmoe_status_name(BMOE_ERR_CONTEXT_FULL), "context full") == 0);
    return test_finish();
}
