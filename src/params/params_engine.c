/* The engine's parameters from text: one mapping of the table's rows onto
 * the library's model, context, sampler and speculation parameters, for
 * every program (the CLI, the server), and the speculation rows' rules. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "params.h"

static int params_engine_error(char *error, size_t error_size, int status, const char *message, const char *name,
                               const char *text)
{
    if (error && error_size)
        snprintf(error, error_size, message, name, text);
    return status;
}

int params_apply_engine(const param_def *param, const char *name, const char *text, const params_engine *engine,
                        char *error, size_t error_size)
{
    int32_t number = 0;
    float real = 0.0f;
    int choice = 0;
    if (param->type == PARAM_SWITCH)
        text = "";
    if (param->type == PARAM_INT && params_parse_int(param, name, text, &number, error, error_size) != 0)
        return 1;
    if (param->type == PARAM_FLOAT && params_parse_float(param, name, text, &real, error, error_size) != 0)
        return 1;
    if (param->type == PARAM_MIB) {
        if (strcmp(text, "auto") == 0)
            number = -1;
        else if (params_parse_int(param, name, text, &number, error, error_size) != 0)
            return 1;
    }
    if (param->type == PARAM_CHOICE && param->id != P_DENSE &&
        params_parse_choice(param, name, text, &choice, error, error_size) != 0)
        return 1;
    bmoe_model_params *model = engine->model;
    bmoe_stream_params *stream = &model->stream;
    bmoe_lossy_params *lossy = &model->lossy;
    bmoe_sampler_params *sampler = engine->sampler;
    bmoe_speculation_params *speculation = engine->speculation;
    switch (param->id) {
    case P_THREADS: *engine->n_threads = number; break;
    case P_THREADS_BATCH: *engine->n_threads_batch = number; break;
    case P_CTX: *engine->n_ctx = number; break;
    case P_UBATCH: *engine->n_ubatch = number; break;
    case P_KV_TYPE: *engine->kv_type = choice == 0 ? BMOE_KV_F16 : BMOE_KV_F32; break;
    case P_SWA_CACHE: *engine->swa_cache = choice; break; /* the choices in enum bmoe_swa_cache's order */
    case P_DENSE:
        if (strcmp(text, "ahwb") == 0)
            return params_engine_error(error, error_size, 1,
                                       "%s %s needs Android's hardware buffers, which this build does not have", name,
                                       text);
        if (params_parse_choice(param, name, text, &choice, error, error_size) != 0)
            return 2; /* the reference's status for a bad --dense-weights value */
        model->dense_weights = choice == 0   ? BMOE_DENSE_WEIGHTS_ANON
                               : choice == 1 ? BMOE_DENSE_WEIGHTS_MMAP
                                             : BMOE_DENSE_WEIGHTS_WARM;
        break;
    case P_NO_WARM_DENSE: model->dense_weights = BMOE_DENSE_WEIGHTS_MMAP; break;
    case P_DENSE_ODIRECT: model->dense_weights = BMOE_DENSE_WEIGHTS_ANON; break;
    case P_TEMP: sampler->temperature = real; break;
    case P_TOP_K: sampler->top_k = number; break;
    case P_TOP_P: sampler->top_p = real; break;
    case P_MIN_P: sampler->min_p = real; break;
    case P_REPEAT_PENALTY:
        if (real <= 0.0f)
            return params_engine_error(error, error_size, 1, "%s: %s must be greater than 0", name, text);
        sampler->repeat_penalty = real;
        break;
    case P_REPEAT_LAST_N: sampler->repeat_last_n = number; break;
    case P_FREQUENCY_PENALTY: sampler->frequency_penalty = real; break;
    case P_PRESENCE_PENALTY: sampler->presence_penalty = real; break;
    case P_SEED:
        if (params_parse_u64(name, text, &sampler->seed, error, error_size) != 0)
            return 1;
        *engine->seed_given = true;
        break;
    case P_MOE_STREAM: stream->enabled = true; break;
    case P_NO_MOE_STREAM: stream->auto_enable = false; break;
    case P_CACHE_MB: stream->cache_mb = number; break;
    case P_CACHE_POLICY: stream->cache_policy = choice == 0 ? BMOE_CACHE_POLICY_LRU : BMOE_CACHE_POLICY_FREQUENCY; break;
    case P_CACHE_FLOOR: stream->cache_floor_mb = number; break;
    case P_CACHE_CEIL: stream->cache_ceil_mb = number; break;
    case P_IO_THREADS: stream->io_threads = number; break;
    case P_NO_ODIRECT: stream->direct = false; break;
    case P_OVERLAP: stream->overlap = true; break;
    case P_PREFETCH: stream->prefetch = number; break;
    case P_PREDICT_PREFETCH: stream->predict_prefetch = true; break;
    case P_PREDICT_SPEC_MAX: stream->predict_spec_max = number; break;
    case P_PREDICT_ALWAYS: stream->predict_always = true; break;
    case P_LOAD_ALL: stream->stage_all = true; break;
    case P_PRELOAD_EXPERTS: stream->load_all = true; break;
    case P_N_EXPERT_USED: model->n_expert_used = number; break;
    case P_DROP_COLD: lossy->drop_cold_frac = real; break;
    case P_DROP_NO_RENORM: lossy->drop_no_renorm = true; break;
    case P_DROP_IN_PREFILL: lossy->drop_in_prefill = true; break;
    case P_SUBSTITUTE: lossy->substitute_lambda = real; break;
    case P_ROUTE_AHEAD: lossy->route_ahead = number; break;
    case P_NGRAM:
    case P_MTP: {
        enum bmoe_draft_source source = param->id == P_NGRAM ? BMOE_DRAFT_NGRAM : BMOE_DRAFT_MTP;
        if (speculation->source != BMOE_DRAFT_NONE && speculation->source != source)
            return params_engine_error(error, error_size, 2, "%s and %s are two draft sources: give one", name,
                                       param->id == P_NGRAM ? "--mtp" : "--ngram");
        speculation->source = source;
        model->draft_head = source == BMOE_DRAFT_MTP;
        break;
    }
    case P_DRAFT: speculation->n_draft = number; break;
    case P_MTP_P_MIN: speculation->mtp_p_min = real; break;
    case P_DRAFT_ALWAYS: speculation->draft_always = true; break;
    case P_NGRAM_MIN_MATCH: speculation->ngram_min_match = number; break;
    case P_NGRAM_MAX_MATCH: speculation->ngram_max_match = number; break;
    default: return PARAMS_NOT_ENGINE;
    }
    return 0;
}

static int params_check_error(char *error, size_t error_size, int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static int params_check_error(char *error, size_t error_size, int status, const char *fmt, ...)
{
    if (error && error_size) {
        va_list args;
        va_start(args, fmt);
        vsnprintf(error, error_size, fmt, args);
        va_end(args);
    }
    return status;
}

int params_check_speculation(const bool given[P_COUNT], const bmoe_speculation_params *speculation,
                             const bmoe_lossy_params *lossy, char *error, size_t error_size)
{
    const char *sources[3];
    int n_sources = 0;
    if (given[P_NGRAM])
        sources[n_sources++] = "--ngram";
    if (given[P_MTP])
        sources[n_sources++] = "--mtp";
    if (given[P_DRAFT_REPLAY])
        sources[n_sources++] = "--draft-replay";
    if (n_sources > 1)
        return params_check_error(error, error_size, 2, "%s and %s are two draft sources: give one", sources[0],
                                  sources[1]);
    const char *lever = lossy->route_ahead > 0             ? "--route-ahead"
                        : lossy->drop_cold_frac > 0.0f     ? "--drop-cold-experts"
                        : lossy->substitute_lambda > 0.0f  ? "--expert-substitute"
                                                           : NULL;
    if (n_sources > 0 && lever)
        return params_check_error(error, error_size, 2,
                                  "%s and %s exclude each other (the lever acts on single-token decodes only, so a "
                                  "verify batch would not compute what plain decoding computes)",
                                  sources[0], lever);
    if (given[P_DRAFT] && n_sources == 0)
        return params_check_error(error, error_size, 1, "--draft needs a draft source (--ngram, --mtp or --draft-replay)");
    if (given[P_DRAFT_ALWAYS] && n_sources == 0)
        return params_check_error(error, error_size, 1,
                                  "--draft-always needs a draft source (--ngram, --mtp or --draft-replay)");
    /* the reference lets a floor of 0 through with --ngram (no floor is no
     * floor) and refuses any other */
    if (given[P_MTP_P_MIN] && given[P_NGRAM] && speculation->mtp_p_min > 0.0f)
        return params_check_error(error, error_size, 2,
                                  "--mtp-p-min %g is a floor on the MTP head's probabilities; --ngram drafts "
                                  "without any: give --mtp, or leave --mtp-p-min out",
                                  (double)speculation->mtp_p_min);
    if (given[P_MTP_P_MIN] && !given[P_MTP] && !given[P_NGRAM])
        return params_check_error(error, error_size, 1, "--mtp-p-min needs --mtp");
    if ((given[P_NGRAM_MIN_MATCH] || given[P_NGRAM_MAX_MATCH]) && !given[P_NGRAM])
        return params_check_error(error, error_size, 1, "%s needs --ngram",
                                  given[P_NGRAM_MIN_MATCH] ? "--ngram-min-match" : "--ngram-max-match");
    if (given[P_NGRAM] && speculation->ngram_min_match > speculation->ngram_max_match)
        return params_check_error(error, error_size, 1,
                                  "--ngram-min-match %d is longer than --ngram-max-match %d (the longest compared)",
                                  (int)speculation->ngram_min_match, (int)speculation->ngram_max_match);
    if ((given[P_DRAFT_REPLAY_MODE] || given[P_DRAFT_REPLAY_RATE]) && !given[P_DRAFT_REPLAY])
        return params_check_error(error, error_size, 1, "%s needs --draft-replay",
                                  given[P_DRAFT_REPLAY_MODE] ? "--draft-replay-mode" : "--draft-replay-rate");
    return 0;
}
