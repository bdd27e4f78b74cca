/* How much memory the process can still take, for sizing the expert cache:
 * the smaller of MemAvailable and what its cgroup still allows (memory.max,
 * or v1's memory.limit_in_bytes, minus current usage, over the cgroup and
 * its ancestors). Inside a container or a memory cap /proc/meminfo describes
 * the host, and a cache sized from it gets the process killed. Owns nothing. */
#ifndef BMOE_STREAM_MEMORY_BUDGET_H
#define BMOE_STREAM_MEMORY_BUDGET_H

#include <stdbool.h>
#include <stdint.h>

/* Bytes available now; 0 when nothing can be read. */
uint64_t memory_available_bytes(void);

/* Whether a model of model_bytes fits in available bytes (as
 * memory_available_bytes gives them) with floor_bytes left to everything
 * else; available 0 (unknown) counts as fitting. */
bool memory_model_fits(uint64_t model_bytes, uint64_t available, uint64_t floor_bytes);

/* The expert cache of cache_bytes, sized at load, beside a context created
 * since whose context_bytes are not in use yet: the cache it may keep so
 * that the context fits in available bytes (as memory_available_bytes gives
 * them) with floor_bytes left, at least 0; available 0 (unknown) keeps it. */
uint64_t memory_cache_beside_context(uint64_t cache_bytes, uint64_t context_bytes, uint64_t available,
                                     uint64_t floor_bytes);

/* The cgroup's remaining allowance (limit - usage) over the cgroup and its
 * ancestors, UINT64_MAX when there is no limit or no cgroup. */
uint64_t memory_cgroup_remaining_bytes(void);

#endif
