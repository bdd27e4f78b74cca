/* Tokenizer internals shared by the tokenizer's source files: the object's
 * layout, the per-call scratch space and the pieces of the encode pipeline
 * (pre-tokenizer, merge loops). Not part of the module's interface. */
#ifndef BMOE_TOKENIZER_INTERNAL_H
#define BMOE_TOKENIZER_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tokenizer.h"

#define TOKENIZER_MAX_PATTERNS 8

enum tokenizer_kind {
    TOKENIZER_KIND_BPE,    /* "gpt2" */
    TOKENIZER_KIND_SPM,    /* "llama" */
    TOKENIZER_KIND_GEMMA4, /* "gemma4" */
};

/* Attribute flags derived from the token types (several may be set). */
enum {
    TOKEN_ATTR_NORMAL = 1u << 0,
    TOKEN_ATTR_UNKNOWN = 1u << 1,
    TOKEN_ATTR_CONTROL = 1u << 2,
    TOKEN_ATTR_USER_DEFINED = 1u << 3,
    TOKEN_ATTR_UNUSED = 1u << 4,
    TOKEN_ATTR_BYTE = 1u << 5,
};

typedef struct tokenizer_token {
    uint32_t offset; /* into text_arena */
    uint32_t length;
    float score;
    uint8_t attr;
    uint8_t is_end_of_generation;
} tokenizer_token;

typedef struct tokenizer_merge_slot {
    uint64_t key; /* (left + 1) << 32 | (right + 1); 0 = empty */
    int32_t rank;
    int32_t merged;
} tokenizer_merge_slot;

typedef struct tokenizer_trie_slot {
    uint64_t key; /* (node + 1) << 8 | byte; 0 = empty */
    int32_t child;
} tokenizer_trie_slot;

typedef struct tokenizer_trie_node {
    int32_t token_any;  /* special-capable token ending here (parse_special) */
    int32_t token_user; /* user-defined token ending here (always matched) */
} tokenizer_trie_node;

struct tokenizer {
    enum tokenizer_kind kind;
    int32_t n_vocab;
    char *text_arena;
    tokenizer_token *tokens;

    /* Exact text -> id, open addressing over ids (-1 = empty). */
    int32_t *text_slots;
    uint32_t text_mask;

    /* (left id, right id) -> merge rank and result id. */
    tokenizer_merge_slot *merge_slots;
    uint32_t merge_mask;

    /* <0xXX> tokens (-1 where absent). */
    int32_t byte_tokens[256];

    /* GPT-2 byte <-> code point table (spec 5.2). */
    uint16_t byte_to_codepoint[256];
    int16_t codepoint_to_byte[0x144];

    /* Special-token trie; node 0 is the root. */
    tokenizer_trie_slot *trie_slots;
    uint32_t trie_mask;
    tokenizer_trie_node *trie_nodes;
    int32_t n_trie_nodes;
    uint8_t special_first_byte[256];

    /* Pre-tokenizer. */
    pcre2_code *patterns[TOKENIZER_MAX_PATTERNS];
    int n_patterns;
    bool newline_split;      /* GEMMA4: runs of non-newlines / newlines */
    bool byte_level;         /* GPT-2 byte-to-unicode encoding of pieces */
    bool escape_whitespaces; /* " " -> U+2581 before splitting */
    bool clean_spaces;
    bool ignore_merges;
    bool add_bos, add_eos, add_space_prefix;

    int32_t bos, eos, eot, eom, unknown, padding;
};

/* A span of a buffer. */
typedef struct tokenizer_span {
    size_t start;
    size_t length;
    int32_t token; /* fragments: the special token, or -1 for raw text */
} tokenizer_span;

typedef struct tokenizer_symbol {
    size_t start;
    size_t length;
    int32_t prev, next;
    int32_t id;
} tokenizer_symbol;

typedef struct tokenizer_heap_entry {
    double priority; /* lower first */
    size_t position; /* ties: leftmost first */
    int32_t left, right;
    int32_t left_id, right_id;
    int32_t merged;
    size_t size;
} tokenizer_heap_entry;

/* Growable buffers of one encode call, freed at its end. */
typedef struct tokenizer_scratch {
    char *clean; size_t clean_capacity;       /* valid-UTF-8 copy of the input */
    char *escaped; size_t escaped_capacity;   /* fragment with spaces replaced */
    char *encoded; size_t encoded_capacity;   /* byte-level encoded piece */
    tokenizer_span *fragments; size_t n_fragments, fragments_capacity;
    tokenizer_span *pieces; size_t n_pieces, pieces_capacity;
    tokenizer_span *pieces_next; size_t n_pieces_next, pieces_next_capacity;
    tokenizer_symbol *symbols; size_t symbols_capacity;
    tokenizer_heap_entry *heap; size_t heap_count, heap_capacity;
    pcre2_match_data *match;
    pcre2_match_context *match_context;
    pcre2_jit_stack *jit_stack;
} tokenizer_scratch;

/* Token output with the "count everything, write what fits" convention. */
typedef struct tokenizer_output {
    int32_t *ids;
    int32_t capacity;
    int32_t count;
    bool overflow;
} tokenizer_output;

static inline void tokenizer_output_push(tokenizer_output *output, int32_t id)
{
    if (output->count == INT32_MAX) {
        output->overflow = true;
        return;
    }
    if (output->count < output->capacity)
        output->ids[output->count] = id;
    output->count++;
}

static inline const char *tokenizer_text_of(const tokenizer *tok, int32_t id)
{
    return tok->text_arena + tok->tokens[id].offset;
}

/* Grows *buffer to hold at least need elements of element_size; 0 or -1. */
int tokenizer_grow(void **buffer, size_t *capacity, size_t need, size_t element_size);

/* Exact lookup in the text table. */
int32_t tokenizer_lookup(const tokenizer *tok, const char *text, size_t length);

/* tokenizer_pretokenize.c */
/* Applies the named pre-tokenizer's patterns and flags to tok (BPE/GEMMA4);
 * pre NULL or "" is "default". */
int tokenizer_pre_setup(tokenizer *tok, const char *pre, bmoe_error *err);
void tokenizer_pre_release(tokenizer *tok);
int tokenizer_scratch_init(const tokenizer *tok, tokenizer_scratch *scratch, bmoe_error *err);
void tokenizer_scratch_free(tokenizer_scratch *scratch);
/* Splits text[0..length) into scratch->pieces (offsets into text). */
int tokenizer_pre_split(const tokenizer *tok, tokenizer_scratch *scratch, const char *text,
                        size_t length, bmoe_error *err);
/* Copies text into scratch->clean with every invalid UTF-8 byte replaced by
 * U+FFFD; returns the new length via *out_length. */
int tokenizer_utf8_sanitize(tokenizer_scratch *scratch, const char *text, size_t length,
                            size_t *out_length, bmoe_error *err);
/* Byte length of the UTF-8 sequence starting with lead (1 for stray bytes). */
size_t tokenizer_utf8_length(unsigned char lead);

/* tokenizer_merge.c */
/* Byte-level / raw-UTF-8 BPE of one piece (spec 5.3, 7). */
int tokenizer_bpe_piece(const tokenizer *tok, tokenizer_scratch *scratch, const char *piece,
                        size_t length, tokenizer_output *output, bmoe_error *err);
/* SentencePiece score merging of one escaped fragment (spec 8). */
int tokenizer_spm_fragment(const tokenizer *tok, tokenizer_scratch *scratch, const char *text,
                           size_t length, tokenizer_output *output, bmoe_error *err);

#endif
