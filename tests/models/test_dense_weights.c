/* The dense-weights policies (mmap, warm, anon) change where the weights are
 * read from, never the math: logits must be bit-identical between them; the
 * copy holds every dense tensor byte for byte at its file alignment and no
 * expert matrix; reading a model must not modify its file. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bmoe.h"
#include "gguf/gguf.h"
#include "stream/dense_weights.h"
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

typedef struct progress_log {
    int calls;
    uint64_t last_done, last_total;
    bool monotonic;
} progress_log;

static void note_progress(void *user, const char *step, uint64_t done, uint64_t total)
{
    progress_log *log = user;
    if (log->calls == 0)
        log->monotonic = true;
    log->monotonic &= done >= log->last_done && done <= total && step && step[0];
    log->calls++;
    log->last_done = done;
    log->last_total = total;
}

static void check_model(const char *model_name)
{
    char path[1024];
    oracle_model_path(path, sizeof path, model_name);
    struct stat before, after;
    CHECK(stat(path, &before) == 0);
    uint64_t hash_before = file_hash(path);

    oracle_case c;
    CHECK(oracle_case_load(&c, model_name, "chat") == 0);
    float *mapped = evaluate(path, BMOE_DENSE_WEIGHTS_MMAP, &c);
    float *copied = evaluate(path, BMOE_DENSE_WEIGHTS_ANON, &c);
    float *warmed = evaluate(path, BMOE_DENSE_WEIGHTS_WARM, &c);
    size_t bytes = sizeof(float) * (size_t)c.n_prompt * (size_t)c.n_vocab;
    CHECK_MSG(mapped && copied && memcmp(mapped, copied, bytes) == 0,
              "%s: logits differ between mmap and anon dense weights", model_name);
    CHECK_MSG(mapped && warmed && memcmp(mapped, warmed, bytes) == 0,
              "%s: logits differ between mmap and warm dense weights", model_name);
    free(mapped);
    free(copied);
    free(warmed);

    /* The copy holds exactly the dense tensors, each at its file alignment;
     * the expert matrices (named *_exps.weight here) are not in it. */
    bmoe_error err;
    gguf_model *file = gguf_open(path, &err);
    CHECK(file != NULL);
    if (file) {
        uint64_t n = gguf_tensor_count(file);
        file_range *tensors = calloc(n, sizeof *tensors), *experts = calloc(n, sizeof *experts);
        int n_experts = 0;
        uint64_t dense_bytes = 0;
        for (uint64_t i = 0; i < n; i++) {
            const gguf_tensor *tensor = gguf_tensor_at(file, i);
            tensors[i] = (file_range){tensor->shard, tensor->file_offset, tensor->file_offset + tensor->nbytes};
            if (strstr(tensor->name, "_exps.weight"))
                experts[n_experts++] = tensors[i];
            else
                dense_bytes += tensor->nbytes;
        }
        const char *paths[1] = {path};
        uint64_t sizes[1] = {gguf_shard_size(file, 0)};
        const uint8_t *mappings[1] = {gguf_shard_data(file, 0)};
        dense_weights_files files = {paths, sizes, mappings, 1};
        shard_io io = {NULL, NULL};
        progress_log log = {0, 0, 0, false};
        dense_weights *dense = dense_weights_create(&files, tensors, (int)n, experts, n_experts,
                                                    BMOE_DENSE_WEIGHTS_ANON, true, &io, note_progress, &log, &err);
        CHECK_MSG(dense != NULL, "%s", err.message);
        if (dense) {
            CHECK(dense_weights_bytes(dense) == dense_bytes);
            CHECK(dense_weights_copy_bytes(dense) >= dense_bytes);
            bool same = true, aligned = true, experts_absent = true;
            for (uint64_t i = 0; i < n; i++) {
                const gguf_tensor *tensor = gguf_tensor_at(file, i);
                const uint8_t *copy = dense_weights_locate(dense, tensor->shard, tensor->file_offset);
                if (strstr(tensor->name, "_exps.weight")) {
                    experts_absent &= copy == NULL;
                    continue;
                }
                same &= copy && memcmp(copy, tensor->data, tensor->nbytes) == 0 && copy != tensor->data;
                aligned &= copy && (uintptr_t)copy % 4096 == tensor->file_offset % 4096;
            }
            CHECK_MSG(same, "%s: a dense copy differs from the file", model_name);
            CHECK_MSG(aligned, "%s: a dense copy lost its file alignment", model_name);
            CHECK_MSG(experts_absent, "%s: an expert matrix was copied", model_name);
            double resident = dense_weights_resident_fraction(dense);
            CHECK_MSG(resident == 1.0, "%s: the fresh copy is %.3f resident", model_name, resident);
            /* progress reported, growing, ending at the total */
            CHECK_MSG(log.calls > 0 && log.monotonic && log.last_done == log.last_total && log.last_total > 0,
                      "%s: progress %d calls, %llu of %llu", model_name, log.calls,
                      (unsigned long long)log.last_done, (unsigned long long)log.last_total);
            dense_weights_destroy(dense);
        }
        /* the mmap policy copies nothing */
        dense = dense_weights_create(&files, tensors, (int)n, experts, n_experts, BMOE_DENSE_WEIGHTS_MMAP, true, &io,
                                     NULL, NULL, &err);
        CHECK(dense && dense_weights_copy_bytes(dense) == 0 &&
              dense_weights_locate(dense, 0, tensors[0].begin) == NULL);
        dense_weights_destroy(dense);
        free(tensors);
        free(experts);
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
