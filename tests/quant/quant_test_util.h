/* Helpers shared by the quant tests: reading the oracle's quant vectors and a
 * deterministic pseudo-random source. */
#ifndef BMOE_TESTS_QUANT_TEST_UTIL_H
#define BMOE_TESTS_QUANT_TEST_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "test.h"

/* Reads a whole file under shared/; exits loudly when missing. Caller frees. */
static inline void *quant_test_read_shared(const char *relative, size_t *size)
{
    char path[1024];
    test_shared_path(path, sizeof path, relative);
    FILE *file = fopen(path, "rb");
    if (!file) {
        fprintf(stderr, "FATAL: cannot open %s\n", path);
        exit(1);
    }
    fseek(file, 0, SEEK_END);
    long length = ftell(file);
    fseek(file, 0, SEEK_SET);
    void *data = malloc(length > 0 ? (size_t)length : 1);
    if (!data || fread(data, 1, (size_t)length, file) != (size_t)length) {
        fprintf(stderr, "FATAL: cannot read %s\n", path);
        exit(1);
    }
    fclose(file);
    *size = (size_t)length;
    return data;
}

/* xorshift64*: reproducible across platforms. */
typedef struct quant_test_random { uint64_t state; } quant_test_random;

static inline uint64_t quant_test_next(quant_test_random *r)
{
    r->state ^= r->state >> 12;
    r->state ^= r->state << 25;
    r->state ^= r->state >> 27;
    return r->state * 2685821657736338717ull;
}

/* Uniform in [-1, 1). */
static inline float quant_test_uniform(quant_test_random *r)
{
    return (float)((quant_test_next(r) >> 40) * (1.0 / 8388608.0) - 1.0);
}

/* Roughly normal (sum of four uniforms), like trained weights and activations. */
static inline float quant_test_normal(quant_test_random *r)
{
    float s = 0;
    for (int i = 0; i < 4; i++)
        s += quant_test_uniform(r);
    return s * 0.866f;
}

#endif
