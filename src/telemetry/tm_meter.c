/* The per-token meter of tm_meter.h. */
#include "tm_meter.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

struct tm_meter {
    tm_meter_params params;
    tm_totals totals;
    tm_lookups before;
    double dense_frac;       /* the latest probe */
    double pending_probe_ms; /* probe time the next decode's loop overhead also holds */
    int32_t decoded;         /* decoded tokens seen (the probe's clock) */
};

static double tm_now_ms(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec * 1e3 + (double)now.tv_nsec * 1e-6;
}

tm_meter *tm_meter_create(const tm_meter_params *params)
{
    tm_meter *meter = calloc(1, sizeof *meter);
    if (!meter)
        return NULL;
    meter->params = *params;
    if (meter->params.probe_every < 1)
        meter->params.probe_every = 1;
    meter->dense_frac = -1.0;
    meter->before = params->before;
    return meter;
}

void tm_meter_destroy(tm_meter *meter)
{
    free(meter);
}

void tm_meter_token(tm_meter *meter, int32_t index, const bmoe_stats *stats, tm_token *token)
{
    tm_meter_token_drafted(meter, index, stats, 1, 0.0, token);
}

void tm_meter_token_drafted(tm_meter *meter, int32_t index, const bmoe_stats *stats, int32_t batch, double draft_ms,
                            tm_token *token)
{
    const tm_meter_params *p = &meter->params;
    memset(token, 0, sizeof *token);
    token->step = index;
    token->steps = p->steps;
    bool evaluated = stats->n_tokens > 0;
    token->decoded = evaluated || batch == 0;
    token->batch = batch;
    token->draft_ms = draft_ms;
    token->wall_ms = stats->wall_ms;
    token->io_ms = stats->io_ms;
    token->stall_ms = stats->stall_ms;
    token->mgmt_ms = stats->mgmt_ms;
    token->read_bytes = stats->read_bytes;
    token->majflt = stats->majflt;
    token->cpu_ms = stats->cpu_ms;
    token->loop_overhead_ms = stats->loop_overhead_ms;
    token->ra_issue_ms = stats->ra_issue_ms;
    token->ra_wd_ms = stats->ra_wd_ms;
    if (evaluated) {
        /* the previous probe sits in this gap and is already in a row's wall */
        token->loop_overhead_ms -= meter->pending_probe_ms;
        if (token->loop_overhead_ms < 0.0)
            token->loop_overhead_ms = 0.0;
        meter->pending_probe_ms = 0.0;
        if (p->probe && meter->decoded % p->probe_every == 0) {
            double start = tm_now_ms();
            meter->dense_frac = p->probe(p->probe_user);
            double spent = tm_now_ms() - start;
            token->wall_ms += spent;
            token->mgmt_ms += spent;
            meter->pending_probe_ms = spent;
            meter->totals.probe_ms += spent;
            meter->totals.probes++;
        }
        meter->decoded++;
    }
    token->dense_resident_frac = meter->dense_frac;
    token->compute_ms = tm_compute_residual(token->wall_ms, token->io_ms, token->stall_ms, token->mgmt_ms,
                                            p->overlap);
    tm_totals_add(&meter->totals, token, stats);
    token->cache_hit_pct = tm_hit_pct(meter->before.hits + meter->totals.hits,
                                      meter->before.misses + meter->totals.misses, p->cache_used);
}

const tm_totals *tm_meter_totals(const tm_meter *meter)
{
    return &meter->totals;
}

void tm_meter_add_lookups(tm_meter *meter, const bmoe_stats *stats)
{
    tm_lookups_add(&meter->before, stats);
}

const tm_lookups *tm_meter_lookups_before(const tm_meter *meter)
{
    return &meter->before;
}
