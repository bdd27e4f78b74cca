/* The inside of the structured module, shared by its three files: the
 * compiled grammar (schema.c builds it), the parse states and the byte step
 * (parse.c), which the matcher (matcher.c) and the vocabulary walk
 * (vocab.c) both drive.
 *
 * A parse state ("thread") is a stack of frames, one per JSON value being
 * written (an object, an array, a string, a number, a literal). The matcher
 * holds a small set of them: alternatives that share a prefix (anyOf of two
 * objects, enum ["red","reddish"] is one literal frame) each keep a thread
 * until a byte rules them out. Only the top frame is held by value; the
 * frames under it are stored once and linked, so that a step copies 40
 * bytes whatever the depth and the vocabulary walk can keep one thread set
 * per trie depth without copying stacks. */
#ifndef BMOE_STRUCTURED_GRAMMAR_INTERNAL_H
#define BMOE_STRUCTURED_GRAMMAR_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "structured/json_grammar.h"

#define JSON_NESTING_MAX 32                     /* objects and arrays inside one another */
#define JSON_FRAMES_MAX (JSON_NESTING_MAX + 1)  /* the containers and a scalar on top */
#define JSON_THREADS_MAX 32                     /* parse states alive at once */
#define JSON_PROPERTIES_MAX 64                  /* listed keys of one object: one bit each */
#define JSON_INTEGER_DIGITS_MAX 15
#define JSON_FRACTION_DIGITS_MAX 15
#define JSON_EXPONENT_DIGITS_MAX 3
#define JSON_INDENT_MAX 20                      /* spaces or tabs after the one newline of a run */
#define JSON_NODE_NONE UINT32_MAX
#define JSON_LINK_NONE UINT32_MAX
/* Links below this address the compacted pool of the state; from it on, the scratch. */
#define JSON_POOL_LINKS (JSON_THREADS_MAX * JSON_FRAMES_MAX)

enum node_kind {
    NODE_ANY,      /* any JSON value */
    NODE_OBJECT,
    NODE_ARRAY,
    NODE_STRING,
    NODE_NUMBER,
    NODE_INTEGER,
    NODE_LITERALS, /* one of a sorted set of serialized values: enum, const, booleans, null */
    NODE_UNION,    /* one of the alternatives: anyOf, oneOf, a list of types, a $ref */
};

/* A byte string in grammar->text. */
typedef struct grammar_text {
    uint32_t offset, length;
} grammar_text;

typedef struct grammar_node {
    uint8_t kind;
    bool open;             /* object: keys other than the listed ones are allowed, their values `child` */
    uint32_t first, count; /* object: listed keys; literals: literals; union: alternatives */
    uint32_t child;        /* array: the items; object: the values of other keys */
    uint32_t min, max;     /* string: characters; array: items */
    uint32_t min_depth;    /* the fewest nested objects/arrays a value of this node needs */
    uint64_t required;     /* object: one bit per listed key */
} grammar_node;

struct json_grammar {
    grammar_node *nodes;
    uint32_t node_count, node_capacity;
    grammar_text *key_names; /* each object's listed keys, sorted by bytes, JSON-escaped */
    uint32_t *key_nodes;
    uint32_t key_count, key_name_capacity, key_node_capacity;
    grammar_text *literals; /* each literal node's values, sorted by bytes, deduplicated */
    uint32_t literal_count, literal_capacity;
    uint32_t *alternatives;
    uint32_t alternative_count, alternative_capacity;
    char *text;
    uint32_t text_length, text_capacity;
    uint32_t root;
    uint32_t any;      /* any JSON value */
    uint32_t keywords; /* false, null, true: what an any value starting with f, n or t is */
};

enum frame_kind {
    FRAME_VALUE, /* a value of `node` starts at the next byte */
    FRAME_OBJECT,
    FRAME_ARRAY,
    FRAME_STRING,
    FRAME_NUMBER,
    FRAME_LITERAL,
};

enum object_phase {
    OBJECT_FIRST,        /* after '{' */
    OBJECT_KEY,          /* inside a key */
    OBJECT_AFTER_KEY,    /* before ':' */
    OBJECT_BEFORE_VALUE, /* after ':' */
    OBJECT_AFTER_VALUE,  /* before ',' or '}' */
    OBJECT_NEXT,         /* after ',' */
};

enum array_phase {
    ARRAY_FIRST,
    ARRAY_AFTER_VALUE,
    ARRAY_NEXT,
};

enum number_phase {
    NUMBER_MINUS,
    NUMBER_ZERO,
    NUMBER_INTEGER,
    NUMBER_POINT,
    NUMBER_FRACTION,
    NUMBER_E,
    NUMBER_EXPONENT_SIGN,
    NUMBER_EXPONENT,
};

/* One value being written. No padding: threads are compared with memcmp. */
typedef struct frame {
    uint64_t seen;      /* object: the listed keys present, one bit each */
    uint32_t node;
    uint32_t count;     /* array: items; string: characters; number: digits of the part; literal, key: bytes */
    uint32_t low, high; /* literal, key: the candidates still matching (absolute indices); after a key: its index */
    uint8_t kind, phase;
    uint8_t space;      /* whitespace run: 0 none, 1 after one space, 2 + n after "\n" and n indent bytes */
    uint8_t escape;     /* string, key: where in an escape (parse.c's escape_state); 0 outside */
    uint8_t utf8_need;  /* continuation bytes still to come */
    uint8_t utf8_low, utf8_high; /* the range of the next continuation byte */
    uint8_t other_key;  /* object: the current key is not a listed one */
} frame;

typedef struct stored_frame {
    frame frame;
    uint32_t below;
    uint32_t unused;
} stored_frame;

typedef struct thread {
    frame top;
    uint32_t below; /* the frame under top: JSON_LINK_NONE or a link */
    uint32_t depth; /* frames including top; 0: the value is complete and takes nothing more */
} thread;

/* Where a step reads stored frames and writes the ones it pushes. */
typedef struct parse_context {
    const json_grammar *grammar;
    const stored_frame *pool; /* links below JSON_POOL_LINKS */
    stored_frame *scratch;    /* links from JSON_POOL_LINKS on */
    uint32_t scratch_used, scratch_capacity;
} parse_context;

/* The thread before the first byte. */
thread parse_initial(const json_grammar *grammar);
/* Steps each of count threads over byte into out (room for JSON_THREADS_MAX, duplicates merged);
 * returns how many threads follow. */
uint32_t parse_step(parse_context *context, const thread *threads, uint32_t count, uint8_t byte, thread *out);
/* Whether the thread's value is complete. */
bool parse_complete(const parse_context *context, const thread *thread);
/* The most characters a string or key in the same state as every thread can still take, when every thread is
 * inside a string or a key that takes any text (not after '\\' nor inside a UTF-8 sequence); -1 otherwise.
 * Text with no '"', '\\', control byte or broken UTF-8 then leaves such a state as it was, but for the count. */
int64_t parse_text_room(const parse_context *context, const thread *threads, uint32_t count);
const stored_frame *parse_stored(const parse_context *context, uint32_t link);

#endif
