/* FNV-1a, 64 bits: the one hash of names, paths and file identities here.
 * Stable across builds and hosts (files keep it), not a defence against
 * anyone. */
#ifndef BMOE_BASE_HASH_H
#define BMOE_BASE_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define FNV1A_START 0xcbf29ce484222325ull

/* hash continued over size bytes of data (start with FNV1A_START). */
static inline uint64_t fnv1a(uint64_t hash, const void *data, size_t size)
{
    const unsigned char *bytes = data;
    for (size_t i = 0; i < size; i++) {
        hash ^= bytes[i];
        hash *= 0x100000001b3ull;
    }
    return hash;
}

/* hash continued over a NUL-terminated text, without its NUL. */
static inline uint64_t fnv1a_text(uint64_t hash, const char *text)
{
    return fnv1a(hash, text, strlen(text));
}

/* A hash as a draw from [0, 1): its top 53 bits. */
static inline double hash_draw(uint64_t hash)
{
    return (double)(hash >> 11) * 0x1p-53;
}

#endif
