/* The vocabulary's byte tries, shared by vocab.c (which builds them and
 * walks them for the JSON matcher) and any other matcher that masks the
 * same vocabulary by walking a trie (gbnf_match.c). */
#ifndef BMOE_STRUCTURED_VOCAB_INTERNAL_H
#define BMOE_STRUCTURED_VOCAB_INTERNAL_H

#include <stdint.h>

#include "structured/json_grammar.h"

/* Nodes in depth-first order: a node's first child follows it, its subtree ends at `end`. */
typedef struct trie_node {
    uint32_t end;
    uint32_t token_first; /* tokens whose bytes end here: trie->tokens[token_first, + token_count) */
    uint32_t token_count;
    uint8_t byte;
} trie_node;

typedef struct token_trie {
    trie_node *nodes;
    uint32_t node_count;
    int32_t *tokens;
} token_trie;

/* Every token of at most JSON_TOKEN_BYTES_MAX bytes (control tokens left out); node 0 is the root. */
const token_trie *json_vocab_trie(const json_vocab *vocab);
/* A hash of every token's bytes (and of which are control tokens): what a matcher that keeps tables built from one
 * vocabulary checks, with the address, to know a vocabulary passed later is the same one and not another made at a
 * freed one's address. */
uint64_t json_vocab_fingerprint(const json_vocab *vocab);

#endif
