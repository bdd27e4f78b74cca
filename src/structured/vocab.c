/* The vocabulary as byte tries, and the mask of the tokens a matcher can
 * take: a depth-first walk of the trie from the matcher's threads, pruned at
 * the first byte no thread takes, so that tokens sharing a prefix step over
 * it once. Inside a string, where nearly every token fits, the tokens of
 * plain text (valid UTF-8 with no '"', '\\' or control byte) are taken
 * from a precomputed mask and only the others are walked. Owns its tries
 * and masks; the walk's scratch is the matcher's. */
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "base/utf8.h"
#include "structured/matcher_internal.h"
#include "structured/vocab_internal.h"

struct json_vocab {
    int32_t n_tokens;
    token_trie all;
    token_trie special; /* the tokens that are not plain text */
    uint8_t *plain;
    uint32_t *characters; /* of a plain token */
    uint64_t fingerprint; /* of every token's bytes: see json_vocab_fingerprint */
};

typedef struct piece {
    const unsigned char *bytes;
    uint32_t length;
    int32_t token;
} piece;

static int compare_pieces(const void *a, const void *b)
{
    const piece *x = a, *y = b;
    uint32_t shorter = x->length < y->length ? x->length : y->length;
    int order = memcmp(x->bytes, y->bytes, shorter);
    if (order != 0)
        return order;
    if (x->length != y->length)
        return x->length < y->length ? -1 : 1;
    return (x->token > y->token) - (x->token < y->token);
}

static bool trie_append(token_trie *trie, uint32_t *capacity, uint8_t byte)
{
    if (trie->node_count == *capacity) {
        uint32_t grown = *capacity * 2;
        trie_node *nodes = realloc(trie->nodes, grown * sizeof *nodes);
        if (!nodes)
            return false;
        trie->nodes = nodes;
        *capacity = grown;
    }
    trie->nodes[trie->node_count++] = (trie_node){.byte = byte};
    return true;
}

/* Builds the trie of pieces, sorted: each piece shares with the one before it the nodes of their common
 * prefix, and a subtree ends where the first piece that leaves it starts. */
static bool trie_build(token_trie *trie, const piece *pieces, uint32_t count)
{
    uint32_t capacity = 1024;
    trie->nodes = malloc(capacity * sizeof *trie->nodes);
    trie->tokens = malloc(((size_t)count + 1) * sizeof *trie->tokens);
    if (!trie->nodes || !trie->tokens)
        return false;
    trie->node_count = 0;
    trie_append(trie, &capacity, 0);
    uint32_t path[JSON_TOKEN_BYTES_MAX + 1] = {0}; /* path[d]: the node at depth d of the last piece */
    uint32_t depth = 0;
    const piece *previous = NULL;
    for (uint32_t i = 0; i < count; i++) {
        const piece *current = &pieces[i];
        uint32_t common = 0;
        if (previous)
            while (common < previous->length && common < current->length &&
                   previous->bytes[common] == current->bytes[common])
                common++;
        for (; depth > common; depth--)
            trie->nodes[path[depth]].end = trie->node_count;
        for (; depth < current->length; depth++) {
            if (!trie_append(trie, &capacity, current->bytes[depth]))
                return false;
            path[depth + 1] = trie->node_count - 1;
        }
        trie_node *node = &trie->nodes[path[depth]];
        if (node->token_count == 0)
            node->token_first = i;
        node->token_count++;
        trie->tokens[i] = current->token;
        previous = current;
    }
    for (;; depth--) {
        trie->nodes[path[depth]].end = trie->node_count;
        if (depth == 0)
            break;
    }
    return true;
}

/* Whether bytes are plain string text, and how many characters. */
static bool plain_text(const unsigned char *bytes, size_t length, uint32_t *characters)
{
    size_t at = 0;
    uint32_t count = 0;
    while (at < length) {
        if (bytes[at] < 0x20 || bytes[at] == '"' || bytes[at] == '\\')
            return false;
        size_t step = 0;
        if (utf8_scan(bytes + at, length - at, &step) != UTF8_VALID)
            return false;
        at += step;
        count++;
    }
    *characters = count;
    return true;
}

void json_vocab_free(json_vocab *vocab)
{
    if (!vocab)
        return;
    free(vocab->all.nodes);
    free(vocab->all.tokens);
    free(vocab->special.nodes);
    free(vocab->special.tokens);
    free(vocab->plain);
    free(vocab->characters);
    free(vocab);
}

int32_t json_vocab_n_tokens(const json_vocab *vocab)
{
    return vocab->n_tokens;
}

const token_trie *json_vocab_trie(const json_vocab *vocab)
{
    return &vocab->all;
}

uint64_t json_vocab_fingerprint(const json_vocab *vocab)
{
    return vocab->fingerprint;
}

json_vocab *json_vocab_create(const char *const *pieces, const size_t *lengths, int32_t n_tokens, bmoe_error *err)
{
    if (n_tokens < 0 || (n_tokens > 0 && (!pieces || !lengths))) {
        error_set_status(err, BMOE_ERR_INVALID_ARGUMENT, "json vocab: no token pieces");
        return NULL;
    }
    json_vocab *vocab = calloc(1, sizeof *vocab);
    piece *all = malloc(((size_t)n_tokens + 1) * sizeof *all);
    piece *special = malloc(((size_t)n_tokens + 1) * sizeof *special);
    bool ok = vocab && all && special;
    if (ok) {
        vocab->n_tokens = n_tokens;
        vocab->plain = calloc((size_t)n_tokens + 1, 1);
        vocab->characters = calloc((size_t)n_tokens + 1, sizeof *vocab->characters);
        ok = vocab->plain && vocab->characters;
    }
    uint32_t all_count = 0, special_count = 0;
    uint64_t fingerprint = FNV1A_START;
    for (int32_t i = 0; ok && i < n_tokens; i++) {
        uint64_t length = lengths[i] == 0 || !pieces[i] ? UINT64_MAX : lengths[i];
        unsigned char length_bytes[8];
        for (int b = 0; b < 8; b++)
            length_bytes[b] = (unsigned char)(length >> (8 * b));
        fingerprint = fnv1a(fingerprint, length_bytes, sizeof length_bytes);
        if (lengths[i] == 0 || !pieces[i])
            continue; /* a control token */
        const unsigned char *bytes = (const unsigned char *)pieces[i];
        fingerprint = fnv1a(fingerprint, bytes, lengths[i]);
        vocab->plain[i] = plain_text(bytes, lengths[i], &vocab->characters[i]);
        if (lengths[i] > JSON_TOKEN_BYTES_MAX)
            continue; /* deeper than the walk goes: allowed only as plain text */
        piece entry = {bytes, (uint32_t)lengths[i], i};
        all[all_count++] = entry;
        if (!vocab->plain[i])
            special[special_count++] = entry;
    }
    if (ok) {
        vocab->fingerprint = fingerprint;
        qsort(all, all_count, sizeof *all, compare_pieces);
        qsort(special, special_count, sizeof *special, compare_pieces);
        ok = trie_build(&vocab->all, all, all_count) && trie_build(&vocab->special, special, special_count);
    }
    free(all);
    free(special);
    if (!ok) {
        json_vocab_free(vocab);
        error_set_status(err, BMOE_ERR_OUT_OF_MEMORY, "json vocab: out of memory");
        return NULL;
    }
    return vocab;
}

/* Marks every token of trie reachable from the matcher's threads; returns how many it marked. */
static int32_t walk(const json_matcher *matcher, const token_trie *trie, uint8_t *allowed)
{
    parse_context context = json_matcher_context(matcher);
    const trie_node *nodes = trie->nodes;
    thread *sets = matcher->walk_threads;
    json_walk_level *levels = matcher->walk_levels;
    memcpy(sets, matcher->threads, matcher->thread_count * sizeof *sets);
    levels[0] = (json_walk_level){.node = 0, .next_child = 1, .thread_count = matcher->thread_count};
    int32_t marked = 0;
    int depth = 0;
    while (depth >= 0) {
        json_walk_level *level = &levels[depth];
        uint32_t child = level->next_child;
        if (child >= nodes[level->node].end) {
            depth--;
            continue;
        }
        level->next_child = nodes[child].end;
        context.scratch_used = level->scratch_mark;
        thread *next = sets + (size_t)(depth + 1) * JSON_THREADS_MAX;
        uint32_t count = parse_step(&context, sets + (size_t)depth * JSON_THREADS_MAX, level->thread_count,
                                    nodes[child].byte, next);
        if (count == 0)
            continue;
        const trie_node *node = &nodes[child];
        for (uint32_t i = 0; i < node->token_count; i++) {
            int32_t token = trie->tokens[node->token_first + i];
            marked += !allowed[token];
            allowed[token] = 1;
        }
        if (child + 1 < node->end) {
            depth++;
            levels[depth] = (json_walk_level){child, child + 1, count, context.scratch_used};
        }
    }
    return marked;
}

int32_t json_matcher_allowed(const json_matcher *matcher, const json_vocab *vocab, uint8_t *allowed)
{
    memset(allowed, 0, (size_t)vocab->n_tokens);
    parse_context context = json_matcher_context(matcher);
    int64_t room = parse_text_room(&context, matcher->threads, matcher->thread_count);
    if (room < 0)
        return walk(matcher, &vocab->all, allowed);
    int32_t count = 0;
    uint32_t most = room > UINT32_MAX ? UINT32_MAX : (uint32_t)room;
    for (int32_t i = 0; i < vocab->n_tokens; i++) {
        allowed[i] = vocab->plain[i] & (vocab->characters[i] <= most);
        count += allowed[i];
    }
    return count + walk(matcher, &vocab->special, allowed);
}
