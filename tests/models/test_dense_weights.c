/* Dense weights in engine memory (--dense-weights anon) change where the
 * weights are read from, never the math: logits must be bit-identical to
 * the file-mapped model's, the experts must stay file-backed, and reading a
 * model must not modify its file. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bmoe.h"
#include "gguf/gguf.h"
#include "oracle_support.h"

/* FNV-1a of a whole file: cheap evidence that it was not written to. */
static uint64_t file_hash(const char *path)
{
    size_t size = 0;
    char *data = test_read_file(path, &size);
    uint64_t hash = 1469598103934665603ULL;
    for (size_t i = 0; data && i < size; i++)
        hash = (hash ^ (uint8_t)data[i]) * 1099511628211ULL;
    free(data);
    return hash;
}

/* Evaluates the prompt ids as one batch; returns all rows of logits. */
static float *evaluate(const char *path, enum bmoe_dense_weights dense, const oracle_case *c)
{
    bmoe_error error = {0};
    bmoe_model_params params = bmoe_model_default_params();
    params.dense_weights = dense;
    bmoe_model *model = bmoe_model_load(path, &params, &error);
    CHECK_MSG(model != NULL, "%s", error.message);
    if (!model)
        return NULL;
    bmoe_context_params context_params = bmoe_context_default_params();
    context_params.n_ctx = 512;
    context_params.n_threads = 2;
    bmoe_context *context = bmoe_context_create(model, &context_params, &error);
    CHECK_MSG(context != NULL, "%s", error.message);
    float *logits = malloc(sizeof(float) * (size_t)c->n_prompt * (size_t)c->n_vocab);
    int status = context ? bmoe_eval(context, c->prompt_ids, c->n_prompt, logits, true, NULL, &error) : -1;
    CHECK_MSG(status == 0, "%s", error.message);
    bmoe_context_free(context);
    bmoe_model_free(model);
    return logits;
}

static void check_model(const char *model_name)
{
    char relative[256], path[1024];
    snprintf(relative, sizeof relative, "oracle/models/%s.gguf", model_name);
    test_shared_path(path, sizeof path, relative);
    struct stat before, after;
    CHECK(stat(path, &before) == 0);
    uint64_t hash_before = file_hash(path);

    oracle_case c;
    CHECK(oracle_case_load(&c, model_name, "chat") == 0);
    float *mapped = evaluate(path, BMOE_DENSE_WEIGHTS_MMAP, &c);
    float *copied = evaluate(path, BMOE_DENSE_WEIGHTS_ANON, &c);
    size_t bytes = sizeof(float) * (size_t)c.n_prompt * (size_t)c.n_vocab;
    CHECK_MSG(mapped && copied && memcmp(mapped, copied, bytes) == 0,
              "%s: logits differ between mmap and anon dense weights", model_name);
    free(mapped);
    free(copied);

    /* The copy holds exactly the dense tensors; the experts stay mapped. */
    bmoe_error err;
    gguf_model *file = gguf_open(path, &err);
    CHECK(file != NULL);
    if (file) {
        const void *expert_before = NULL, *dense_before = NULL;
        uint64_t dense_bytes = 0;
        for (uint64_t i = 0; i < gguf_tensor_count(file); i++) {
            const gguf_tensor *tensor = gguf_tensor_at(file, i);
            if (gguf_tensor_is_expert(tensor))
                expert_before = expert_before ? expert_before : tensor->data;
            else {
                dense_before = dense_before ? dense_before : tensor->data;
                dense_bytes += tensor->nbytes;
            }
        }
        CHECK(expert_before != NULL && dense_before != NULL);
        CHECK(gguf_copy_dense_weights(file, &err) == 0);
        CHECK(gguf_dense_copy_bytes(file) >= dense_bytes);
        CHECK(gguf_dense_copy_bytes(file) < dense_bytes + 64 * gguf_tensor_count(file));
        const void *expert_after = NULL;
        int aligned = 1, same_content = 1;
        for (uint64_t i = 0; i < gguf_tensor_count(file); i++) {
            const gguf_tensor *tensor = gguf_tensor_at(file, i);
            if (gguf_tensor_is_expert(tensor)) {
                expert_after = expert_after ? expert_after : tensor->data;
                continue;
            }
            const uint8_t *copy = tensor->data;
            if ((uintptr_t)copy % 64 != 0)
                aligned = 0;
            /* Compare with the file's bytes through a second, untouched open. */
            gguf_model *reference = gguf_open(path, &err);
            const gguf_tensor *original = reference ? gguf_find_tensor(reference, tensor->name) : NULL;
            if (!original || memcmp(original->data, copy, tensor->nbytes) != 0 || original->data == tensor->data)
                same_content = 0;
            gguf_close(reference);
        }
        CHECK(expert_after == expert_before);
        CHECK_MSG(aligned, "%s: a dense copy is not cache-line aligned", model_name);
        CHECK_MSG(same_content, "%s: a dense copy differs from the file", model_name);
        CHECK(gguf_copy_dense_weights(file, &err) == 0); /* a second call is a no-op */
        gguf_close(file);
    }

    CHECK(stat(path, &after) == 0);
    CHECK(before.st_size == after.st_size && before.st_mtime == after.st_mtime);
    CHECK(file_hash(path) == hash_before);
    oracle_case_free(&c);
}

int main(void)
{
    check_model("qwen3moe-tiny-q4_k_m");
    check_model("gptoss-tiny-mxfp4");
    return test_finish();
}
