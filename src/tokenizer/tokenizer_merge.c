/* The merge loops: rank-ordered BPE over the code points of one piece
 * (byte-level GPT-2 text or raw UTF-8 with U+2581) and SentencePiece-style
 * score merging. Both keep a binary heap of candidate pairs with lazy
 * invalidation, so a piece of n characters costs O(n log n). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

static bool heap_before(const tokenizer_heap_entry *a, const tokenizer_heap_entry *b)
{
    if (a->priority != b->priority)
        return a->priority < b->priority;
    return a->position < b->position;
}

static int heap_push(tokenizer_scratch *scratch, const tokenizer_heap_entry *entry)
{
    if (tokenizer_grow((void **)&scratch->heap, &scratch->heap_capacity, scratch->heap_count + 1,
                       sizeof(tokenizer_heap_entry)) != 0)
        return -1;
    tokenizer_heap_entry *heap = scratch->heap;
    size_t i = scratch->heap_count++;
    heap[i] = *entry;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!heap_before(&heap[i], &heap[parent]))
            break;
        tokenizer_heap_entry swap = heap[i];
        heap[i] = heap[parent];
        heap[parent] = swap;
        i = parent;
    }
    return 0;
}

static tokenizer_heap_entry heap_pop(tokenizer_scratch *scratch)
{
    tokenizer_heap_entry *heap = scratch->heap;
    tokenizer_heap_entry top = heap[0];
    size_t count = --scratch->heap_count;
    heap[0] = heap[count];
    size_t i = 0;
    for (;;) {
        size_t left = 2 * i + 1, right = left + 1, best = i;
        if (left < count && heap_before(&heap[left], &heap[best]))
            best = left;
        if (right < count && heap_before(&heap[right], &heap[best]))
            best = right;
        if (best == i)
            break;
        tokenizer_heap_entry swap = heap[i];
        heap[i] = heap[best];
        heap[best] = swap;
        i = best;
    }
    return top;
}

/* Splits text into one symbol per UTF-8 character (lead-byte length; stray
 * bytes and broken sequences become one-byte symbols). Returns the count. */
static int split_symbols(const tokenizer *tok, tokenizer_scratch *scratch, const char *text,
                         size_t length, size_t *count)
{
    if (length > INT32_MAX)
        return -1;
    if (tokenizer_grow((void **)&scratch->symbols, &scratch->symbols_capacity, length,
                       sizeof(tokenizer_symbol)) != 0)
        return -1;
    size_t n = 0;
    for (size_t i = 0; i < length;) {
        size_t char_length = tokenizer_utf8_length((unsigned char)text[i]);
        if (char_length > length - i)
            char_length = length - i;
        /* A broken sequence is one byte per symbol, so that it cannot
         * swallow the U+2581 of an escaped space that follows it. */
        for (size_t k = 1; k < char_length; k++)
            if (((unsigned char)text[i + k] & 0xC0) != 0x80) {
                char_length = 1;
                break;
            }
        tokenizer_symbol *symbol = &scratch->symbols[n];
        symbol->start = i;
        symbol->length = char_length;
        symbol->prev = (int32_t)n - 1;
        symbol->next = (int32_t)n + 1;
        symbol->id = tokenizer_lookup(tok, text + i, char_length);
        n++;
        i += char_length;
    }
    if (n > 0)
        scratch->symbols[n - 1].next = -1;
    *count = n;
    return 0;
}

static bool merge_find(const tokenizer *tok, int32_t left, int32_t right, int32_t *rank,
                       int32_t *merged)
{
    if (!tok->merge_slots || left < 0 || right < 0)
        return false;
    uint64_t key = ((uint64_t)(uint32_t)(left + 1) << 32) | (uint32_t)(right + 1);
    uint64_t hash = key * 0x9E3779B97F4A7C15ull;
    uint32_t slot = (uint32_t)(hash >> 32) & tok->merge_mask;
    for (;;) {
        const tokenizer_merge_slot *entry = &tok->merge_slots[slot];
        if (entry->key == 0)
            return false;
        if (entry->key == key) {
            *rank = entry->rank;
            *merged = entry->merged;
            return true;
        }
        slot = (slot + 1) & tok->merge_mask;
    }
}

static int bpe_try_pair(const tokenizer *tok, tokenizer_scratch *scratch, int32_t left,
                        int32_t right)
{
    if (left < 0 || right < 0)
        return 0;
    const tokenizer_symbol *a = &scratch->symbols[left], *b = &scratch->symbols[right];
    int32_t rank, merged;
    if (!merge_find(tok, a->id, b->id, &rank, &merged))
        return 0;
    tokenizer_heap_entry entry = {
        .priority = rank, .position = a->start, .left = left, .right = right,
        .left_id = a->id, .right_id = b->id, .merged = merged, .size = a->length + b->length,
    };
    return heap_push(scratch, &entry);
}

static void emit_bytes_fallback(const tokenizer *tok, const char *text, size_t length,
                                tokenizer_output *output)
{
    for (size_t i = 0; i < length; i++) {
        unsigned char byte = (unsigned char)text[i];
        int32_t id;
        if (tok->byte_level) {
            /* Byte-level text has no byte tokens: the token whose text is
             * this single byte, if the vocabulary has one (spec 5.3). */
            id = tokenizer_lookup(tok, (const char *)&text[i], 1);
        } else {
            id = tok->byte_tokens[byte];
            if (id < 0)
                id = tok->unknown;
        }
        if (id >= 0)
            tokenizer_output_push(output, id);
    }
}

int tokenizer_bpe_piece(const tokenizer *tok, tokenizer_scratch *scratch, const char *piece,
                        size_t length, tokenizer_output *output, bmoe_error *err)
{
    size_t count;
    if (split_symbols(tok, scratch, piece, length, &count) != 0)
        return error_set(err, "tokenizer: out of memory merging a piece of %zu bytes", length);
    scratch->heap_count = 0;
    for (size_t i = 0; i + 1 < count; i++)
        if (bpe_try_pair(tok, scratch, (int32_t)i, (int32_t)i + 1) != 0)
            return error_set(err, "tokenizer: out of memory merging a piece of %zu bytes", length);
    tokenizer_symbol *symbols = scratch->symbols;
    while (scratch->heap_count > 0) {
        tokenizer_heap_entry top = heap_pop(scratch);
        tokenizer_symbol *a = &symbols[top.left], *b = &symbols[top.right];
        /* Stale: one side already merged into something else. */
        if (a->length == 0 || b->length == 0 || a->next != top.right || a->id != top.left_id ||
            b->id != top.right_id)
            continue;
        a->length += b->length;
        a->id = top.merged;
        a->next = b->next;
        if (b->next >= 0)
            symbols[b->next].prev = top.left;
        b->length = 0;
        if (bpe_try_pair(tok, scratch, a->prev, top.left) != 0 ||
            bpe_try_pair(tok, scratch, top.left, a->next) != 0)
            return error_set(err, "tokenizer: out of memory merging a piece of %zu bytes", length);
    }
    for (int32_t i = count > 0 ? 0 : -1; i >= 0; i = symbols[i].next) {
        if (symbols[i].id >= 0)
            tokenizer_output_push(output, symbols[i].id);
        else
            emit_bytes_fallback(tok, piece + symbols[i].start, symbols[i].length, output);
    }
    return 0;
}

static int spm_try_pair(const tokenizer *tok, tokenizer_scratch *scratch, const char *text,
                        int32_t left, int32_t right)
{
    if (left < 0 || right < 0)
        return 0;
    const tokenizer_symbol *a = &scratch->symbols[left], *b = &scratch->symbols[right];
    size_t size = a->length + b->length;
    int32_t id = tokenizer_lookup(tok, text + a->start, size);
    if (id < 0)
        return 0;
    tokenizer_heap_entry entry = {
        .priority = -(double)tok->tokens[id].score, .position = a->start, .left = left,
        .right = right, .left_id = a->id, .right_id = b->id, .merged = id, .size = size,
    };
    return heap_push(scratch, &entry);
}

int tokenizer_spm_fragment(const tokenizer *tok, tokenizer_scratch *scratch, const char *text,
                           size_t length, tokenizer_output *output, bmoe_error *err)
{
    size_t count;
    if (split_symbols(tok, scratch, text, length, &count) != 0)
        return error_set(err, "tokenizer: out of memory merging %zu bytes", length);
    scratch->heap_count = 0;
    for (size_t i = 0; i + 1 < count; i++)
        if (spm_try_pair(tok, scratch, text, (int32_t)i, (int32_t)i + 1) != 0)
            return error_set(err, "tokenizer: out of memory merging %zu bytes", length);
    tokenizer_symbol *symbols = scratch->symbols;
    while (scratch->heap_count > 0) {
        tokenizer_heap_entry top = heap_pop(scratch);
        tokenizer_symbol *a = &symbols[top.left], *b = &symbols[top.right];
        if (a->length == 0 || b->length == 0 || a->next != top.right ||
            a->length + b->length != top.size)
            continue;
        a->length += b->length;
        a->id = top.merged;
        a->next = b->next;
        if (b->next >= 0)
            symbols[b->next].prev = top.left;
        b->length = 0;
        if (spm_try_pair(tok, scratch, text, a->prev, top.left) != 0 ||
            spm_try_pair(tok, scratch, text, top.left, a->next) != 0)
            return error_set(err, "tokenizer: out of memory merging %zu bytes", length);
    }
    for (int32_t i = count > 0 ? 0 : -1; i >= 0; i = symbols[i].next) {
        if (symbols[i].id >= 0) {
            tokenizer_output_push(output, symbols[i].id);
            continue;
        }
        /* Byte fallback: <0xXX>, else the byte as a one-character token. */
        for (size_t k = 0; k < symbols[i].length; k++) {
            const char *byte = text + symbols[i].start + k;
            int32_t id = tok->byte_tokens[(unsigned char)*byte];
            if (id < 0)
                id = tokenizer_lookup(tok, byte, 1);
            if (id < 0)
                id = tok->unknown;
            if (id >= 0)
                tokenizer_output_push(output, id);
        }
    }
    return 0;
}
