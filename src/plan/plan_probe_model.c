/* plan_probe_model of plan.h: the model's bytes from the library's own
 * account of the file, and its contexts' memory from a context created at
 * the planned size. */
#include "plan.h"

#include <stdio.h>
#include <string.h>

int plan_probe_model(const char *model_path, const bmoe_context_params *context, bool draft_head, plan_model *model,
                     char *error, size_t error_size)
{
    memset(model, 0, sizeof *model);
    /* Loaded without streaming, mapped, without pre-faulting: nothing is
     * read or copied, and the context below commits none of its pages (a
     * streaming model's context touches its KV cache at creation). The
     * byte counts and the token's cycle do not depend on the mode. */
    bmoe_model_params params = bmoe_model_default_params();
    params.dense_weights = BMOE_DENSE_WEIGHTS_MMAP;
    params.prefault = false;
    params.stream.enabled = false;
    params.stream.auto_enable = false;
    params.stream.cache_mb = 0;
    params.draft_head = draft_head;
    bmoe_error failure = {0};
    bmoe_model *loaded = bmoe_model_load(model_path, &params, &failure);
    if (!loaded) {
        snprintf(error, error_size, "%s", failure.message);
        return -1;
    }
    bmoe_model_info info;
    bmoe_model_get_info(loaded, &info);
    bmoe_stream_state state;
    bmoe_model_get_stream_state(loaded, &state);
    model->file_bytes = info.file_bytes;
    model->dense_bytes = info.dense_bytes;
    model->expert_bytes = info.expert_bytes;
    model->n_moe_layers = info.n_moe_layers;
    model->n_expert = info.n_expert;
    model->n_expert_used = info.n_expert_used;
    bool has_experts = info.n_expert > 0 && info.expert_bytes > 0;
    model->expert_slice_bytes = has_experts ? info.expert_slice_bytes : 0;
    model->cycle_bytes = has_experts ? state.cycle_bytes : 0;

    bmoe_context_params context_params = context ? *context : bmoe_context_default_params();
    bmoe_context *probe = bmoe_context_create(loaded, &context_params, &failure);
    if (!probe) {
        snprintf(error, error_size, "%s", failure.message);
        bmoe_model_free(loaded);
        return -1;
    }
    bmoe_context_memory memory;
    bmoe_context_memory_usage(probe, &memory);
    model->context_bytes = memory.kv_bytes + memory.recurrent_bytes + memory.buffer_bytes +
                           (draft_head ? memory.draft_head_bytes : 0);
    bmoe_context_free(probe);
    bmoe_model_free(loaded);
    return 0;
}
