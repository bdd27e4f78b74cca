/* The probe cache: measured rates kept per model file and machine in a
 * small JSON file, so a second run plans without probing again. Internal to
 * the planner's probes. */
#ifndef BMOE_PLAN_CACHE_H
#define BMOE_PLAN_CACHE_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "plan.h"

/* What the rates were measured on: a cache entry counts only while all of
 * it is unchanged. */
typedef struct plan_probe_key {
    char real_path[PATH_MAX];
    uint64_t file_size, file_mtime_ns, file_inode, file_device;
    uint64_t block_bytes;  /* the read size of the storage probe */
    uint64_t memory_total; /* MemTotal */
    int32_t n_cores;
} plan_probe_key;

typedef struct plan_probe_rates {
    bool have_read;
    double read_bytes_per_s[PLAN_LANE_STEPS];
    bool have_memory;
    double memory_bytes_per_s;
} plan_probe_rates;

/* The key of model_path on this machine; -1 when the file cannot be
 * resolved or examined. */
int plan_probe_key_make(const char *model_path, uint64_t block_bytes, uint64_t memory_total, int32_t n_cores,
                        plan_probe_key *key);

/* The rates cached at path for key; false (rates cleared) when there are
 * none, the file is unreadable, corrupt, or describes another file or
 * machine. */
bool plan_cache_read(const char *path, const plan_probe_key *key, plan_probe_rates *rates);

/* Writes the rates for key to path through a temporary file and a rename,
 * creating the folder (0700) first. Returns 0 or -1; a cache that cannot be
 * written only costs the next run a probe. */
int plan_cache_write(const char *path, const plan_probe_key *key, const plan_probe_rates *rates);

#endif
