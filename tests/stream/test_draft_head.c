/* The draft head's placement (bmoe_model_params.draft_head). A streamed
 * model keeps its dense weights in engine memory, where neither page-cache
 * reclaim nor the expert reads can evict them; a carried nextn block is the
 * draft head's, and a model loaded to draft with it (draft_head, what --mtp
 * asks) places the head's dense tensors there too, counted in the model's
 * dense bytes (the memory the automatic cache is sized around). Loaded
 * without it, the head's dense tensors stay on the file mapping and are not
 * counted, so a model loaded not to draft pays nothing for the head. On
 * tiny-glm4moe, whose head carries its own embedding and output matrix (as
 * GLM-4.5's does: about 860 MB there): the views of the head's block point
 * into the copy exactly when asked, the dense bytes grow by the block's
 * dense tensors and the tensor bytes by the whole block as the file's table
 * sums them, and an MTP generation gives the same tokens either way. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "engine/engine.h"
#include "stream_support.h"

enum { N_PREDICT = 16 };

/* The bytes the file's table gives blk.<layer>.*'s tensors: dense (all but
 * the routed expert matrices) and experts. */
static void block_bytes(const gguf_model *file, int layer, uint64_t *dense, uint64_t *experts)
{
    char prefix[32];
    snprintf(prefix, sizeof prefix, "blk.%d.", layer);
    *dense = *experts = 0;
    for (uint64_t i = 0; i < gguf_tensor_count(file); i++) {
        const gguf_tensor *tensor = gguf_tensor_at(file, i);
        if (strncmp(tensor->name, prefix, strlen(prefix)) != 0)
            continue;
        if (strstr(tensor->name, "_exps."))
            *experts += tensor->nbytes;
        else
            *dense += tensor->nbytes;
    }
}

static bool on_mapping(const bmoe_model *m, const void *data)
{
    const uint8_t *first = gguf_shard_data(m->file, 0), *address = data;
    return address >= first && address < first + gguf_shard_size(m->file, 0);
}

/* The head block's bound views that are dense tensors: how many, and how
 * many of those point into the file mapping. */
static void head_views(const bmoe_model *m, int *views, int *mapped)
{
    const layer_weights *l = &m->model.weights.layers[m->model.hparams.n_layer];
    const tensor_view *view = (const tensor_view *)l;
    size_t n = sizeof *l / sizeof *view;
    *views = *mapped = 0;
    for (size_t i = 0; i < n; i++) {
        if (!view[i].name || !view[i].data || strstr(view[i].name, "_exps."))
            continue;
        (*views)++;
        *mapped += on_mapping(m, view[i].data);
    }
}

/* Greedy tokens of an MTP generation on m; false on failure. */
static bool mtp_tokens(bmoe_model *m, int32_t *tokens)
{
    bmoe_error err = {0};
    bmoe_context_params cp = bmoe_context_default_params();
    cp.n_ctx = 128;
    cp.n_threads = 1;
    bmoe_context *context = bmoe_context_create(m, &cp, &err);
    CHECK_MSG(context != NULL, "context: %s", err.message);
    if (!context)
        return false;
    bmoe_generation_params params = bmoe_generation_default_params();
    params.n_predict = N_PREDICT;
    params.ignore_eos = true;
    params.speculation.source = BMOE_DRAFT_MTP;
    params.speculation.draft_always = true;
    int32_t prompt[8];
    for (int i = 0; i < 8; i++)
        prompt[i] = (int32_t)(i * 61 + 7) % bmoe_model_n_vocab(m);
    bmoe_generation *generation = bmoe_generation_start(context, &params, prompt, 8, &err);
    CHECK_MSG(generation != NULL, "generation: %s", err.message);
    int n = 0;
    while (generation && n < N_PREDICT) {
        bmoe_step step;
        int status = bmoe_generation_step(generation, &step, &err);
        CHECK_MSG(status >= 0, "step: %s", err.message);
        if (status <= 0)
            break;
        tokens[n++] = step.token;
    }
    bmoe_spec_stats spec;
    bool drafted = false;
    if (generation) {
        bmoe_generation_spec_stats(generation, &spec);
        drafted = spec.drafted > 0;
        bmoe_generation_free(generation);
    }
    CHECK_MSG(drafted, "the generation drafted nothing");
    bmoe_context_free(context);
    return n == N_PREDICT;
}

int main(void)
{
    char dir[1024], path[1200];
    stream_test_dir(dir, sizeof dir, "draft_head");
    snprintf(path, sizeof path, "%s/tiny-glm4moe.gguf", dir);
    if (!stream_make_model(path, "--shape tiny-glm4moe --seed 3"))
        return test_finish();

    int32_t tokens[2][N_PREDICT];
    bmoe_model_info info[2];
    for (int placed = 0; placed < 2; placed++) {
        bmoe_model_params params = bmoe_model_default_params();
        params.stream.enabled = true;
        params.stream.cache_mb = 1;
        params.dense_weights = BMOE_DENSE_WEIGHTS_ANON;
        params.draft_head = placed;
        bmoe_error err = {0};
        bmoe_model *m = bmoe_model_load(path, &params, &err);
        CHECK_MSG(m != NULL, "load (draft_head %d): %s", placed, err.message);
        if (!m)
            return test_finish();
        CHECK_MSG(m->model.hparams.n_layer_head == 1, "tiny-glm4moe's head is not bound");
        bmoe_model_get_info(m, &info[placed]);
        int views, mapped;
        head_views(m, &views, &mapped);
        CHECK_MSG(views >= 8, "the head block binds %d dense views", views);
        /* the model's other dense views are in the copy in both loads */
        CHECK_MSG(!on_mapping(m, m->model.weights.token_embd.data) && !on_mapping(m, m->model.weights.output.data),
                  "the model's embedding or output is on the mapping");
        if (placed)
            CHECK_MSG(mapped == 0, "draft_head: %d of the head's %d dense views still on the file mapping", mapped,
                      views);
        else
            CHECK_MSG(mapped == views, "no draft_head: %d of the head's %d dense views copied", views - mapped,
                      views);
        CHECK(mtp_tokens(m, tokens[placed]));
        if (placed) {
            uint64_t dense, experts;
            block_bytes(m->file, m->model.hparams.n_layer, &dense, &experts);
            CHECK_MSG(dense > 0 && experts > 0, "the head block: %llu dense, %llu expert bytes",
                      (unsigned long long)dense, (unsigned long long)experts);
            CHECK_MSG(info[1].dense_bytes == info[0].dense_bytes + dense,
                      "dense bytes %llu with the head, %llu without, the head's %llu",
                      (unsigned long long)info[1].dense_bytes, (unsigned long long)info[0].dense_bytes,
                      (unsigned long long)dense);
            CHECK_MSG(info[1].tensor_bytes == info[0].tensor_bytes + dense + experts,
                      "tensor bytes %llu with the head, %llu without, the head's %llu",
                      (unsigned long long)info[1].tensor_bytes, (unsigned long long)info[0].tensor_bytes,
                      (unsigned long long)(dense + experts));
        }
        bmoe_model_free(m);
    }
    CHECK_MSG(memcmp(tokens[0], tokens[1], sizeof tokens[0]) == 0, "the tokens differ with the head placed");
    return test_finish();
}
