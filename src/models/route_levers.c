/* The rules of route_levers.h. */
#include "route_levers.h"

#include <string.h>

void route_top_k(const float *keys, int n_expert, int n_used, int32_t *experts)
{
    for (int k = 0; k < n_used; k++) {
        int best = -1;
        float best_key = 0.0f;
        for (int e = 0; e < n_expert; e++) {
            bool taken = false;
            for (int j = 0; j < k; j++)
                taken |= experts[j] == e;
            if (!taken && (best < 0 || keys[e] > best_key)) {
                best = e;
                best_key = keys[e];
            }
        }
        experts[k] = best;
    }
}

bool route_below_drop_threshold(const float *weights, int n_used, float frac, int slot)
{
    double total = 0.0;
    int top = 0;
    for (int k = 0; k < n_used; k++) {
        total += weights[k];
        if (weights[k] > weights[top])
            top = k;
    }
    return slot != top && (double)weights[slot] < (double)frac * total / n_used;
}

int route_drop(float *weights, const bool *cached, int n_used, float frac, bool renormalize, uint8_t *dropped)
{
    double total = 0.0, kept = 0.0;
    int n_dropped = 0;
    for (int k = 0; k < n_used; k++) {
        dropped[k] = !cached[k] && route_below_drop_threshold(weights, n_used, frac, k);
        total += weights[k];
        kept += dropped[k] ? 0.0 : weights[k];
        n_dropped += dropped[k];
    }
    if (n_dropped > 0 && renormalize && kept > 0.0) {
        float scale = (float)(total / kept);
        for (int k = 0; k < n_used; k++)
            if (!dropped[k])
                weights[k] *= scale;
    }
    return n_dropped;
}

int route_substitute(float *keys, const bool *cached, int n_expert, int n_used, float lambda, int32_t *experts)
{
    float low = keys[0], high = keys[0];
    for (int e = 1; e < n_expert; e++) {
        low = keys[e] < low ? keys[e] : low;
        high = keys[e] > high ? keys[e] : high;
    }
    float bonus = lambda * (high - low);
    for (int e = 0; e < n_expert; e++)
        if (cached[e])
            keys[e] += bonus;
    int32_t chosen[ROUTE_MAX_EXPERTS];
    route_top_k(keys, n_expert, n_used, chosen);
    int moved = n_used - route_overlap(chosen, experts, n_used);
    memcpy(experts, chosen, (size_t)n_used * sizeof *experts);
    return moved;
}

int route_overlap(const int32_t *a, const int32_t *b, int n)
{
    int shared = 0;
    for (int k = 0; k < n; k++)
        for (int j = 0; j < n; j++)
            shared += a[k] == b[j];
    return shared;
}
