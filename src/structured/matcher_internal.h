/* The matcher's struct, shared by matcher.c (feeding) and vocab.c (the
 * vocabulary walk reads its threads and steps into its scratch). */
#ifndef BMOE_STRUCTURED_MATCHER_INTERNAL_H
#define BMOE_STRUCTURED_MATCHER_INTERNAL_H

#include "structured/grammar_internal.h"

/* A step pushes at most one frame per thread it is given, so a walk down JSON_TOKEN_BYTES_MAX trie levels
 * stores at most this many. */
#define JSON_SCRATCH_FRAMES (JSON_TOKEN_BYTES_MAX * JSON_THREADS_MAX)
/* The thread set of each trie level of the walk, the root's included. */
#define JSON_WALK_THREADS ((JSON_TOKEN_BYTES_MAX + 1) * JSON_THREADS_MAX)
/* Links a compaction remembers: the pool and the scratch of one byte's step. */
#define JSON_MEMO_LINKS (JSON_POOL_LINKS + JSON_THREADS_MAX)

typedef struct json_link_memo {
    uint32_t stamp; /* equal to the matcher's memo_stamp: link was copied in this compaction */
    uint32_t link;
} json_link_memo;

/* One trie level of the vocabulary walk. */
typedef struct json_walk_level {
    uint32_t node;          /* the trie node whose children are being tried */
    uint32_t next_child;
    uint32_t thread_count;  /* the threads after the node's bytes: walk_threads + level * JSON_THREADS_MAX */
    uint32_t scratch_mark;  /* scratch frames those threads link to */
} json_walk_level;

struct json_matcher {
    const json_grammar *grammar;
    thread threads[JSON_THREADS_MAX]; /* the parse states after the bytes fed */
    uint32_t thread_count;
    stored_frame *pools[3]; /* the committed one and two that the bytes of one feed alternate between */
    uint32_t committed, pool_used;
    /* Scratch, used by feed and, through the const matcher, by the vocabulary walk: one thread at a time. */
    stored_frame *scratch;
    thread *walk_threads;
    json_walk_level *walk_levels;
    json_link_memo *memo;
    uint32_t memo_stamp;
};

/* A context reading the committed pool, with empty scratch. */
parse_context json_matcher_context(const json_matcher *matcher);

#endif
