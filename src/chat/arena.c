/* Chunks of at least 64 KiB, bigger for a bigger request. */
#include "chat/arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ARENA_CHUNK_SIZE (64 * 1024)

struct arena_chunk {
    struct arena_chunk *next;
    size_t used, size;
    _Alignas(16) unsigned char data[];
};

void *arena_allocate(struct arena *arena, size_t size)
{
    if (size > SIZE_MAX / 2)
        return NULL;
    size = (size + 15) & ~(size_t)15;
    struct arena_chunk *chunk = arena->head;
    if (!chunk || chunk->size - chunk->used < size) {
        size_t capacity = size > ARENA_CHUNK_SIZE ? size : ARENA_CHUNK_SIZE;
        chunk = malloc(sizeof *chunk + capacity);
        if (!chunk)
            return NULL;
        chunk->used = 0;
        chunk->size = capacity;
        chunk->next = arena->head;
        arena->head = chunk;
    }
    void *memory = chunk->data + chunk->used;
    chunk->used += size;
    memset(memory, 0, size);
    return memory;
}

char *arena_copy(struct arena *arena, const char *text, size_t length)
{
    char *copy = arena_allocate(arena, length + 1);
    if (copy && length)
        memcpy(copy, text, length);
    return copy;
}

void *arena_grow(struct arena *arena, void *items, size_t count, size_t *capacity, size_t item_size)
{
    if (count < *capacity)
        return items;
    size_t grown = *capacity ? *capacity * 2 : 4;
    if (grown > SIZE_MAX / 4 / item_size)
        return NULL;
    void *bigger = arena_allocate(arena, grown * item_size);
    if (!bigger)
        return NULL;
    if (count)
        memcpy(bigger, items, count * item_size);
    *capacity = grown;
    return bigger;
}

void arena_free(struct arena *arena)
{
    struct arena_chunk *chunk = arena->head;
    while (chunk) {
        struct arena_chunk *next = chunk->next;
        free(chunk);
        chunk = next;
    }
    arena->head = NULL;
}
