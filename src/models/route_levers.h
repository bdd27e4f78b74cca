/* The lossy levers' rules on one token's routing (bmoe_lossy_params), apart
 * from the engine: pure functions of the router's numbers and of what the
 * cache holds, so that each rule is tested on hand-made values. moe.c
 * applies them where a routing is decided. */
#ifndef BMOE_ROUTE_LEVERS_H
#define BMOE_ROUTE_LEVERS_H

#include <stdbool.h>
#include <stdint.h>

/* The widest routing the rules take (MODEL_MAX_EXPERTS). */
#define ROUTE_MAX_EXPERTS 512

/* experts[0..n_used) = the n_used highest keys, highest first; ties go to
 * the lower expert index. */
void route_top_k(const float *keys, int n_expert, int n_used, int32_t *experts);

/* Whether slot is under the drop threshold: its weight below frac x the
 * routing's total weight / n_used (frac / k of normalized weights), and it
 * is not the top-weighted slot (the lowest index on a tie), which never is. */
bool route_below_drop_threshold(const float *weights, int n_used, float frac, int slot);

/* Drop: dropped[k] = the slot is under the threshold and cached[k] is false
 * (its expert would be read). With renormalize, the survivors' weights are
 * scaled so that they sum to the routing's total again. Returns how many
 * slots were dropped. */
int route_drop(float *weights, const bool *cached, int n_used, float frac, bool renormalize, uint8_t *dropped);

/* Substitution: keys[e] (the space the top-k ranks in) of every expert
 * with cached[e] gains lambda x (max - min of keys), then experts[0..n_used)
 * is the top-k of the new keys. keys is changed. Returns how many of the
 * new experts were not among the experts it was given. */
int route_substitute(float *keys, const bool *cached, int n_expert, int n_used, float lambda, int32_t *experts);

/* How many of a[0..n) are among b[0..n): slots two routings share. */
int route_overlap(const int32_t *a, const int32_t *b, int n);

#endif
