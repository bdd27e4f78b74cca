/* The derivation rules of tm_token.h. */
#include "tm_token.h"

double tm_compute_residual(double wall_ms, double io_ms, double stall_ms, double mgmt_ms, bool overlap)
{
    double residual = wall_ms - (overlap ? stall_ms : io_ms) - mgmt_ms;
    return residual > 0.0 ? residual : 0.0;
}

double tm_hit_pct(uint64_t hits, uint64_t misses, bool cache_used)
{
    if (!cache_used || hits + misses == 0)
        return -1.0;
    return 100.0 * (double)hits / (double)(hits + misses);
}
