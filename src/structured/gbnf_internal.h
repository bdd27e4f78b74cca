/* The inside of the GBNF module, shared by its two files: the compiled
 * grammar (gbnf_parse.c builds it from the text) and the parse stacks with
 * their byte step (gbnf_match.c), which the matcher and the vocabulary walk
 * both drive.
 *
 * A rule is a list of alternatives; an alternative is a run of elements
 * ending with GBNF_END. A literal is one GBNF_BYTE element per byte; a class
 * (and '.') one element taking one code point; a group is an anonymous rule;
 * a repetition is one element with the repeated rule and its bounds (or, for
 * a class or one ASCII character, the class itself: it repeats without
 * entering a rule).
 *
 * A parse stack is the element being matched now (its top: an element and,
 * for a repetition, how many times it has matched) over the frames it
 * returns to. Only the top is held by value; the frames under it are stored
 * once and linked, so a step copies 16 bytes whatever the depth and the
 * vocabulary walk keeps one stack set per trie depth without copying stacks.
 * After each byte every stack's top is a terminal (a byte, a class, a
 * repeated class) or the accepting stack; the closure that gets there
 * (entering rules, finishing them, skipping what may be empty) runs inside
 * the step. */
#ifndef BMOE_STRUCTURED_GBNF_INTERNAL_H
#define BMOE_STRUCTURED_GBNF_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "structured/gbnf.h"

/* Links below this address a matcher's pool; from it on, the scratch. */
#define GBNF_POOL_LINKS (GBNF_STACKS_MAX * GBNF_DEPTH_MAX)
#define GBNF_UNBOUNDED UINT32_MAX
#define GBNF_LINK_NONE UINT32_MAX
#define GBNF_CODE_POINT_MAX 0x10ffffu

enum gbnf_element_kind {
    GBNF_END,          /* the alternative is matched: back to the frame below */
    GBNF_BYTE,         /* one byte of a literal: `byte` */
    GBNF_CLASS,        /* one code point of classes[target] */
    GBNF_RULE,         /* rules[target] */
    GBNF_REPEAT,       /* rules[target], min to max times */
    GBNF_REPEAT_CLASS, /* one code point of classes[target], min to max times */
};

typedef struct gbnf_element {
    uint8_t kind;
    uint8_t byte;
    uint32_t target;   /* a rule or a class */
    uint32_t min, max; /* repetitions: max GBNF_UNBOUNDED for none */
} gbnf_element;

/* Code points first to last, both included. */
typedef struct gbnf_range {
    uint32_t first, last;
} gbnf_range;

typedef struct gbnf_class {
    uint32_t first, count; /* ranges[first, + count): sorted, apart */
    uint32_t ascii[4];     /* code points below 128, one bit each: the common case without a search */
} gbnf_class;

typedef struct gbnf_rule {
    uint32_t first, count; /* alternatives[first, + count): each alternative's first element */
} gbnf_rule;

/* A parse stack's top. No padding: stacks are compared field by field and hashed. */
typedef struct gbnf_thread {
    uint32_t element;
    uint32_t count; /* repetitions: the times matched (held at min once min is reached and max is unbounded) */
    uint32_t below; /* the frame under the top: GBNF_LINK_NONE or a link */
    uint32_t depth; /* frames, the top included */
} gbnf_thread;

/* A frame under a top: where to go back to. element is a GBNF_RULE (go on after it) or a GBNF_REPEAT (count
 * times matched before the iteration now running). */
typedef struct gbnf_stored {
    uint32_t element, count, below;
} gbnf_stored;

/* The code point being read: the same for every stack, since they all took the same bytes. */
typedef struct gbnf_utf8 {
    uint32_t value;    /* the bits so far */
    uint8_t remaining; /* continuation bytes still to come; 0 between characters */
    uint8_t length;    /* bytes of the whole character */
} gbnf_utf8;

struct gbnf_grammar {
    gbnf_element *elements;
    uint32_t element_count;
    uint32_t *alternatives;
    gbnf_rule *rules;
    uint32_t rule_count;
    gbnf_class *classes;
    gbnf_range *ranges;
    uint32_t start;  /* [GBNF_RULE root][GBNF_END]: the stack before the first byte */
    uint32_t accept; /* start + 1: the top of the stack that has matched root */
    /* The stacks before the first byte: their frames are links into initial_frames. */
    gbnf_thread initial_threads[GBNF_STACKS_MAX];
    uint32_t initial_thread_count;
    gbnf_stored initial_frames[GBNF_STEP_FRAMES_MAX];
    uint32_t initial_frame_count;
};

typedef struct gbnf_visit {
    uint32_t stamp; /* equal to the workspace's visit_stamp: in the set of this step */
    uint32_t element, count, below;
} gbnf_visit;

/* Memory a step works in, allocated once per matcher. */
typedef struct gbnf_workspace {
    gbnf_stored *scratch;
    uint32_t scratch_capacity;
    gbnf_thread *work;  /* stacks still to expand: GBNF_EXPANSIONS_MAX */
    gbnf_visit *visits; /* the stacks already expanded in this step: an open-addressing set */
    uint32_t visit_mask, visit_stamp;
    uint32_t *remap;    /* the new place of each frame a step pushed: GBNF_EXPANSIONS_MAX */
} gbnf_workspace;

/* Where a step reads stored frames and writes the ones it pushes. */
typedef struct gbnf_context {
    const gbnf_grammar *grammar;
    const gbnf_stored *pool; /* links below GBNF_POOL_LINKS */
    gbnf_workspace *space;   /* links from GBNF_POOL_LINKS on are space->scratch */
    uint32_t scratch_used;
} gbnf_context;

/* Frees what gbnf_workspace_init allocated (a zeroed workspace frees nothing). */
void gbnf_workspace_release(gbnf_workspace *space);
/* scratch_capacity frames of scratch; false when out of memory (release it then all the same). */
bool gbnf_workspace_init(gbnf_workspace *space, uint32_t scratch_capacity);

/* Steps each of count stacks over byte into out (room for GBNF_STACKS_MAX, duplicates merged): the code point
 * state goes from utf8 to *next. Returns how many stacks follow; 0 when the byte is refused, out of the
 * grammar or over a bound. The frames it pushes go to the scratch from context->scratch_used on, which it
 * advances past the ones the stacks keep. */
uint32_t gbnf_step(gbnf_context *context, const gbnf_thread *threads, uint32_t count, gbnf_utf8 utf8,
                   uint8_t byte, gbnf_thread *out, gbnf_utf8 *next);
/* The stacks before the first byte, into the grammar's initial_*; false when they are over a bound or memory
 * runs out (*out_of_memory tells which). */
bool gbnf_grammar_start(gbnf_grammar *grammar, bool *out_of_memory);
const gbnf_stored *gbnf_stored_at(const gbnf_context *context, uint32_t link);

#endif
