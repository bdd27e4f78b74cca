/* Causal GQA attention over the KV cache, with sliding windows and attention
 * sinks, on the kernel set's attend (kernels.h). One job is up to
 * ATTEND_MAX_QUERIES query heads that share a KV head: the heads of a GQA
 * group (split in parts when the group is larger), of one token, or of a few
 * consecutive tokens when a group is small, so that the kernel converts each
 * key and value row once for all of them. Jobs are taken by the pool's
 * threads from a shared counter, the latest tokens (the most keys) first. A
 * query's result depends only on its own row and the keys it sees (the
 * kernel's contract), so a token's output is the same in any batch, in any
 * job split and on any thread. */
#include <stdatomic.h>

#include "ops.h"

int64_t attention_scratch_floats(int n_ctx, int head_dim_k)
{
    return attend_scratch_floats(n_ctx, head_dim_k);
}

/* The parameters, the kernel chosen for them and the job counter, once per
 * call. */
typedef struct attention_run {
    const attention_params *params;
    attend_fn attend;
    int parts;          /* jobs per (block of tokens, KV head): the group's heads in parts */
    int block_tokens;   /* consecutive tokens per job */
    int64_t n_blocks;
    int64_t n_jobs;
    atomic_llong next_job;
} attention_run;

static void attention_job(const attention_run *run, int64_t index, float *scratch)
{
    const attention_params *p = run->params;
    int64_t per_block = (int64_t)p->n_head_kv * run->parts;
    int64_t block = run->n_blocks - 1 - index / per_block;
    int kv_head = (int)(index % per_block) / run->parts;
    int part = (int)(index % per_block) % run->parts;
    int group = p->n_head / p->n_head_kv;
    int head_begin = kv_head * group + group * part / run->parts;
    int head_end = kv_head * group + group * (part + 1) / run->parts;
    int token_begin = (int)(block * run->block_tokens);
    int token_end = token_begin + run->block_tokens < p->n_tokens ? token_begin + run->block_tokens : p->n_tokens;

    size_t element = p->cache_f16 ? 2 : sizeof(float);
    attend_job job = {
        .head_dim_k = p->head_dim_k,
        .head_dim_v = p->head_dim_v,
        .keys = (const uint8_t *)p->k_cache + (size_t)kv_head * (size_t)p->k_head_stride * element,
        .values = (const uint8_t *)p->v_cache + (size_t)kv_head * (size_t)p->v_head_stride * element,
        .value_stride = (size_t)p->head_dim_v * element,
        .ring = p->ring,
        .scale = p->kq_scale,
        .sinks = p->sinks != NULL,
        .scratch = scratch,
    };
    for (int token = token_begin; token < token_end; token++) {
        int32_t position = p->positions[token];
        int32_t first = 0;
        if (p->n_swa > 0 && position - p->n_swa + 1 > 0)
            first = position - p->n_swa + 1;
        for (int head = head_begin; head < head_end; head++)
            job.queries[job.n_queries++] = (attend_query){
                .q = p->q + (int64_t)token * p->q_stride + (int64_t)head * p->head_dim_k,
                .out = p->out + (int64_t)token * p->out_stride + (int64_t)head * p->head_dim_v,
                .first = first,
                .last = position,
                .sink = p->sinks ? p->sinks[head] : 0.0f,
            };
    }
    run->attend(&job);
}

static void attention_task(void *context, int thread_index, int n_threads)
{
    (void)n_threads;
    attention_run *run = context;
    float *scratch = run->params->scratch + (int64_t)thread_index * run->params->scratch_per_thread;
    for (;;) {
        int64_t index = atomic_fetch_add_explicit(&run->next_job, 1, memory_order_relaxed);
        if (index >= run->n_jobs)
            break;
        attention_job(run, index, scratch);
    }
}

void attention(thread_pool *pool, const attention_params *params)
{
    int group = params->n_head / params->n_head_kv;
    int parts = (group + ATTEND_MAX_QUERIES - 1) / ATTEND_MAX_QUERIES;
    int largest_part = (group + parts - 1) / parts;
    attention_run run = {
        .params = params,
        .attend = kernels_attend(params->kernels, params->cache_f16 ? TYPE_F16 : TYPE_F32),
        .parts = parts,
        .block_tokens = ATTEND_MAX_QUERIES / largest_part,
    };
    run.n_blocks = (params->n_tokens + run.block_tokens - 1) / run.block_tokens;
    run.n_jobs = run.n_blocks * params->n_head_kv * parts;
    atomic_init(&run.next_job, 0);
    thread_pool_run(pool, attention_task, &run);
}
