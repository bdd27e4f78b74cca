/* A bump allocator owning everything a parsed template holds (syntax tree,
 * names, literal strings), freed all at once when the template is destroyed. */
#ifndef BMOE_CHAT_ARENA_H
#define BMOE_CHAT_ARENA_H

#include <stddef.h>

struct arena_chunk;

struct arena {
    struct arena_chunk *head;
};

/* 16-byte aligned, zeroed; NULL when memory runs out. */
void *arena_allocate(struct arena *arena, size_t size);
/* A copy of text with a NUL after it. */
char *arena_copy(struct arena *arena, const char *text, size_t length);
/* Grows an array kept in the arena (the old block stays until arena_free). */
void *arena_grow(struct arena *arena, void *items, size_t count, size_t *capacity, size_t item_size);
void arena_free(struct arena *arena);

#endif
