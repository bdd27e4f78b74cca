#include "memory_budget.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One unsigned number from a file ("max" reads as no limit). */
static bool read_number(const char *path, uint64_t *value)
{
    FILE *file = fopen(path, "r");
    if (!file)
        return false;
    char text[64];
    bool ok = fgets(text, sizeof text, file) != NULL;
    fclose(file);
    if (!ok)
        return false;
    if (strncmp(text, "max", 3) == 0) {
        *value = UINT64_MAX;
        return true;
    }
    char *end = NULL;
    unsigned long long parsed = strtoull(text, &end, 10);
    if (end == text)
        return false;
    *value = parsed;
    return true;
}

static uint64_t meminfo_available(void)
{
    FILE *file = fopen("/proc/meminfo", "r");
    if (!file)
        return 0;
    char line[256];
    uint64_t kib = 0;
    while (fgets(line, sizeof line, file))
        if (sscanf(line, "MemAvailable: %" SCNu64 " kB", &kib) == 1)
            break;
    fclose(file);
    return kib * 1024;
}

/* limit - usage for the cgroup directory dir and each ancestor up to root. */
static uint64_t remaining_under(const char *root, const char *relative, const char *limit_name,
                                const char *usage_name)
{
    uint64_t best = UINT64_MAX;
    char path[4096];
    char cgroup[3072];
    snprintf(cgroup, sizeof cgroup, "%s", relative);
    for (;;) {
        uint64_t limit, usage;
        snprintf(path, sizeof path, "%s%s/%s", root, cgroup, limit_name);
        bool have_limit = read_number(path, &limit);
        snprintf(path, sizeof path, "%s%s/%s", root, cgroup, usage_name);
        /* v1 reports "no limit" as a huge number rather than "max" */
        if (have_limit && limit < (UINT64_MAX >> 2) && read_number(path, &usage)) {
            uint64_t left = limit > usage ? limit - usage : 0;
            if (left < best)
                best = left;
        }
        char *slash = strrchr(cgroup, '/');
        if (!slash || cgroup[0] == '\0')
            break;
        *slash = '\0';
    }
    return best;
}

uint64_t memory_cgroup_remaining_bytes(void)
{
    FILE *file = fopen("/proc/self/cgroup", "r");
    if (!file)
        return UINT64_MAX;
    char line[3200];
    uint64_t best = UINT64_MAX;
    while (fgets(line, sizeof line, file)) {
        line[strcspn(line, "\n")] = '\0';
        /* "hierarchy:controllers:path" */
        char *first = strchr(line, ':');
        char *second = first ? strchr(first + 1, ':') : NULL;
        if (!second)
            continue;
        *second = '\0';
        const char *controllers = first + 1, *relative = second + 1;
        uint64_t left = UINT64_MAX;
        if (strcmp(line, "0") == 0 && controllers[0] == '\0')
            left = remaining_under("/sys/fs/cgroup", relative, "memory.max", "memory.current");
        else if (strstr(controllers, "memory"))
            left = remaining_under("/sys/fs/cgroup/memory", relative, "memory.limit_in_bytes",
                                   "memory.usage_in_bytes");
        if (left < best)
            best = left;
    }
    fclose(file);
    return best;
}

uint64_t memory_available_bytes(void)
{
    uint64_t available = meminfo_available();
    uint64_t cgroup = memory_cgroup_remaining_bytes();
    if (available == 0)
        return cgroup == UINT64_MAX ? 0 : cgroup;
    return cgroup < available ? cgroup : available;
}

bool memory_model_fits(uint64_t model_bytes, uint64_t available, uint64_t floor_bytes)
{
    if (available == 0)
        return true;
    return available > floor_bytes && model_bytes <= available - floor_bytes;
}

uint64_t memory_cache_beside_context(uint64_t cache_bytes, uint64_t context_bytes, uint64_t available,
                                     uint64_t floor_bytes)
{
    if (available == 0 || context_bytes + floor_bytes <= available)
        return cache_bytes;
    uint64_t missing = context_bytes + floor_bytes - available;
    return missing < cache_bytes ? cache_bytes - missing : 0;
}
