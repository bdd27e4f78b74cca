/* The expert profile's public calls (bmoe.h): the model's identity, the
 * counts the expert store keeps, the file (src/stream/expert_profile.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../gguf/gguf.h"
#include "../stream/expert_profile.h"
#include "engine.h"

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
        status = expert_profile_write(path, gguf_identity(m->file), n_layer, n_expert, counts, &err);
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
        result = expert_profile_read(path, gguf_identity(m->file), n_layer, n_expert, counts, &err);
    if (result == 0) {
        expert_store_begin(m->experts);
        result = expert_store_warm(m->experts, counts, &err);
        expert_store_end(m->experts);
    }
    free(counts);
    return result >= 0 ? result : engine_report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
}
