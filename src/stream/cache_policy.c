/* The cache policies by name (--cache-policy). */
#include <string.h>

#include "cache_policy.h"

const cache_policy_ops *cache_policy_named(const char *name)
{
    static const cache_policy_ops *const all[] = {&cache_policy_lru, &cache_policy_frequency};
    for (size_t i = 0; name && i < sizeof all / sizeof all[0]; i++)
        if (strcmp(all[i]->name, name) == 0)
            return all[i];
    return NULL;
}
