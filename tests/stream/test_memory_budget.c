/* memory_budget: whether a model fits in what the process may take, and
 * what that is. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stream/memory_budget.h"
#include "test.h"

#define GIB ((uint64_t)1 << 30)

static void test_fits(void)
{
    /* 10 GiB available, 2 left free: 8 fit, one byte more does not */
    CHECK(memory_model_fits(8 * GIB, 10 * GIB, 2 * GIB));
    CHECK(!memory_model_fits(8 * GIB + 1, 10 * GIB, 2 * GIB));
    CHECK(memory_model_fits(1, 10 * GIB, 0));
    /* a floor at or above what is available leaves room for nothing */
    CHECK(!memory_model_fits(1, 2 * GIB, 2 * GIB));
    CHECK(!memory_model_fits(1, 1 * GIB, 2 * GIB));
    /* unknown: taken as fitting (nothing is streamed on a guess) */
    CHECK(memory_model_fits(UINT64_MAX, 0, 2 * GIB));
}

static void test_cache_beside_context(void)
{
    /* 4 GiB available, 1 left free: a 2 GiB context fits beside a 5 GiB cache
     * already held, a 3 GiB one fits exactly, 3.5 takes half a GiB of it */
    CHECK(memory_cache_beside_context(5 * GIB, 2 * GIB, 4 * GIB, 1 * GIB) == 5 * GIB);
    CHECK(memory_cache_beside_context(5 * GIB, 3 * GIB, 4 * GIB, 1 * GIB) == 5 * GIB);
    CHECK(memory_cache_beside_context(5 * GIB, 3 * GIB + GIB / 2, 4 * GIB, 1 * GIB) == 4 * GIB + GIB / 2);
    /* a context larger than the cache and all that is free: no cache left */
    CHECK(memory_cache_beside_context(5 * GIB, 9 * GIB, 4 * GIB, 1 * GIB) == 0);
    CHECK(memory_cache_beside_context(5 * GIB, 8 * GIB, 4 * GIB, 1 * GIB) == 0);
    CHECK(memory_cache_beside_context(5 * GIB, 8 * GIB - 1, 4 * GIB, 1 * GIB) == 1);
    /* unknown: the cache stays as it is */
    CHECK(memory_cache_beside_context(5 * GIB, 100 * GIB, 0, 1 * GIB) == 5 * GIB);
}

/* Never more than /proc/meminfo's MemAvailable, read here on its own (with
 * 64 MiB of slack: the two readings are not at the same instant). */
static void test_available(void)
{
    char text[8192] = {0};
    FILE *file = fopen("/proc/meminfo", "r");
    CHECK(file != NULL);
    if (!file)
        return;
    size_t length = fread(text, 1, sizeof text - 1, file);
    fclose(file);
    text[length] = '\0';
    const char *line = strstr(text, "MemAvailable:");
    uint64_t kib = line ? strtoull(line + strlen("MemAvailable:"), NULL, 10) : 0;
    CHECK(kib > 0);
    uint64_t available = memory_available_bytes();
    CHECK_MSG(available > 0 && available <= kib * 1024 + 64 * ((uint64_t)1 << 20),
              "memory_available_bytes %" PRIu64 ", MemAvailable %" PRIu64 " kB", available, kib);
}

int main(void)
{
    test_fits();
    test_cache_beside_context();
    test_available();
    return test_finish();
}
