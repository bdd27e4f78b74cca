/* The expert profile's public calls (bmoe.h): the model's identity, the
 * counts the expert store keeps, the file (src/stream/expert_profile.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../gguf/gguf.h"
#include "../stream/expert_profile.h"
#include "engine.h"

/* What makes two files the same model for a profile: every tensor's name,
 * type, shape and place, the shards' sizes, and the first bytes of the
 * first and the last tensor (two files of one shape differ in their
 * weights). */
#define IDENTITY_SAMPLE_BYTES 4096
static uint64_t model_identity(const bmoe_model *m)
{
    uint64_t hash = EXPERT_PROFILE_HASH_START;
    for (uint32_t shard = 0; shard < gguf_shard_count(m->file); shard++) {
        uint64_t size = gguf_shard_size(m->file, shard);
        hash = expert_profile_hash(hash, &size, sizeof size);
    }
    uint64_t n_tensors = gguf_tensor_count(m->file);
    for (uint64_t i = 0; i < n_tensors; i++) {
        const gguf_tensor *t = gguf_tensor_at(m->file, i);
        hash = expert_profile_hash(hash, t->name, strlen(t->name) + 1);
        hash = expert_profile_hash(hash, &t->type, sizeof t->type);
        hash = expert_profile_hash(hash, &t->n_dims, sizeof t->n_dims);
        hash = expert_profile_hash(hash, t->ne, sizeof t->ne);
        hash = expert_profile_hash(hash, &t->shard, sizeof t->shard);
        hash = expert_profile_hash(hash, &t->file_offset, sizeof t->file_offset);
        hash = expert_profile_hash(hash, &t->nbytes, sizeof t->nbytes);
        if (i == 0 || i + 1 == n_tensors)
            hash = expert_profile_hash(hash, t->data, t->nbytes < IDENTITY_SAMPLE_BYTES ? t->nbytes
                                                                                          : IDENTITY_SAMPLE_BYTES);
    }
    return hash;
}

static float *counts_buffer(const bmoe_model *m, int *n_layer, int *n_expert, bmoe_error *err)
{
    expert_store_shape(m->experts, n_layer, n_expert);
    float *counts = calloc((size_t)*n_layer * (size_t)*n_expert, sizeof *counts);
    if (!counts)
        error_set_status(err, BMOE_ERR_OUT_OF_MEMORY, "expert profile: out of memory");
    return counts;
}

int bmoe_model_save_expert_profile(bmoe_model *m, const char *path, bmoe_error *error)
{
    bmoe_error err = {0};
    int n_layer, n_expert;
    float *counts = counts_buffer(m, &n_layer, &n_expert, &err);
    int status = counts ? 0 : -1;
    if (status == 0) {
        expert_store_begin(m->experts);
        status = expert_store_use_counts(m->experts, counts, &err);
        expert_store_end(m->experts);
    }
    if (status == 0)
        status = expert_profile_write(path, model_identity(m), n_layer, n_expert, counts, &err);
    free(counts);
    return status == 0 ? 0 : engine_report(&err, BMOE_ERR_IO, error);
}

int bmoe_model_load_expert_profile(bmoe_model *m, const char *path, bmoe_error *error)
{
    bmoe_error err = {0};
    if (expert_store_profile_check(m->experts, &err) != 0)
        return engine_report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
    struct stat st;
    if (lstat(path, &st) != 0 && errno == ENOENT)
        return 0; /* none yet: a save creates it */
    int n_layer, n_expert;
    float *counts = counts_buffer(m, &n_layer, &n_expert, &err);
    int result = counts ? 0 : -1;
    if (result == 0)
        result = expert_profile_read(path, model_identity(m), n_layer, n_expert, counts, &err);
    if (result == 0) {
        expert_store_begin(m->experts);
        result = expert_store_warm(m->experts, counts, &err);
        expert_store_end(m->experts);
    }
    free(counts);
    return result >= 0 ? result : engine_report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
}
