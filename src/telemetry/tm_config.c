/* Filling and printing the resolved configuration of tm_config.h. */
#include "tm_config.h"

#include <string.h>

#define TM_MIB 1048576.0

void tm_config_from_model(tm_config *config, const bmoe_model *model, const char *model_path)
{
    bmoe_model_info info;
    bmoe_model_get_info(model, &info);
    bmoe_model_params params;
    bmoe_model_get_params(model, &params);
    bmoe_stream_state state;
    bmoe_model_get_stream_state(model, &state);
    config->model_path = model_path;
    config->arch = bmoe_model_architecture(model);
    config->n_layer = info.n_layer;
    config->n_moe_layers = info.n_moe_layers;
    config->n_expert = info.n_expert;
    config->n_expert_used = info.n_expert_used;
    config->n_expert_used_file = info.n_expert_used_file;
    config->moe_stream = state.streaming;
    /* the store's budget (whole slots) can fall just under the MiB the
     * parameters floor it to: the budget in effect, to the nearest MiB and
     * never 0 while a cache exists */
    int64_t budget_mb = (state.cache_budget_bytes + (int64_t)(TM_MIB / 2)) / (int64_t)TM_MIB;
    config->cache_mb = state.cache_budget_bytes > 0 ? (budget_mb > 0 ? budget_mb : 1) : 0;
    config->cache_floor_mb = params.stream.cache_floor_mb;
    config->cache_ceil_mb = params.stream.cache_ceil_mb;
    config->cache_cycle_mb = (double)state.cycle_bytes / TM_MIB;
    config->cache_budget_mib = (double)state.cache_budget_bytes / TM_MIB;
    config->load_all = state.streaming && params.stream.stage_all;
    config->preload_experts = state.streaming && params.stream.load_all;
    config->io_threads = state.streaming ? params.stream.io_threads : 0;
    config->o_direct = state.streaming && state.direct;
    config->overlap = state.streaming && params.stream.overlap;
    config->prefetch = state.streaming ? params.stream.prefetch : 0;
    config->predict_prefetch = state.streaming && params.stream.predict_prefetch;
    config->predict_spec_max = config->predict_prefetch ? params.stream.predict_spec_max : 0;
    config->dense_anon = params.dense_weights == BMOE_DENSE_WEIGHTS_ANON;
    config->cache_frequency = state.streaming && params.stream.cache_policy == BMOE_CACHE_POLICY_FREQUENCY;
    config->lossy = params.lossy;
    config->engine = bmoe_version();
}

bool tm_config_lossy(const tm_config *config)
{
    const bmoe_lossy_params *l = &config->lossy;
    return l->drop_cold_frac > 0.0f || l->substitute_lambda > 0.0f || l->route_ahead > 0 ||
           config->n_expert_used < config->n_expert_used_file;
}

const char *tm_config_dense_name(const tm_config *config)
{
    return config->dense_anon ? "anon" : "mmap";
}

void tm_config_value(tm_buffer *out, const char *text)
{
    const char *run = text;
    for (const char *c = text; *c; c++) {
        unsigned char byte = (unsigned char)*c;
        if (byte > 0x20 && byte != 0x7f && byte != '%')
            continue;
        tm_buffer_append(out, run, (size_t)(c - run));
        tm_buffer_printf(out, "%%%02X", (unsigned int)byte);
        run = c + 1;
    }
    tm_buffer_append_string(out, run);
}

const char *tm_config_model_file_name(const tm_config *config)
{
    const char *path = config->model_path ? config->model_path : "";
    const char *slash = strrchr(path, '/');
    return slash && slash[1] ? slash + 1 : path;
}

void tm_config_model_keys(tm_buffer *out, const tm_config *config, bool file_name)
{
    tm_buffer_append_string(out, "model=");
    tm_config_value(out, file_name ? tm_config_model_file_name(config) : config->model_path ? config->model_path : "");
    tm_buffer_append_string(out, " arch=");
    tm_config_value(out, config->arch ? config->arch : "unknown");
    tm_buffer_printf(out, " n_layer=%d n_expert=%d n_expert_used=%d", (int)config->n_layer, (int)config->n_expert,
                     (int)config->n_expert_used);
}

void tm_config_instrument_keys(tm_buffer *out, const tm_config *config)
{
    tm_buffer_printf(out, "route_trace=%d io_trace=%d compute_trace=%d", config->route_trace, config->io_trace,
                     config->compute_trace);
}
