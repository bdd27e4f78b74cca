/* Tokenizer: text <-> token ids for the vocabularies the target models use.
 * Three models (spec/tokenizers.md):
 *   "gpt2"   byte-level BPE with regex pre-tokenizers (PCRE2) and merge ranks;
 *   "llama"  SentencePiece-style score merging with <0xNN> byte fallback;
 *   "gemma4" BPE over raw UTF-8 with U+2581 for spaces and byte fallback.
 * A tokenizer owns copies of every token text, its hash tables and compiled
 * patterns; it does not keep the gguf_model it was built from. Encoding and
 * decoding only read the object, so one tokenizer may serve several threads. */
#ifndef BMOE_TOKENIZER_TOKENIZER_H
#define BMOE_TOKENIZER_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../base/error.h"
#include "../gguf/gguf.h"

typedef struct tokenizer tokenizer;

/* tokenizer.ggml.token_type values. */
enum tokenizer_token_type {
    TOKENIZER_TOKEN_UNDEFINED = 0,
    TOKENIZER_TOKEN_NORMAL = 1,
    TOKENIZER_TOKEN_UNKNOWN = 2,
    TOKENIZER_TOKEN_CONTROL = 3,
    TOKENIZER_TOKEN_USER_DEFINED = 4,
    TOKENIZER_TOKEN_UNUSED = 5,
    TOKENIZER_TOKEN_BYTE = 6
};

/* In tokenizer_parts: "take the model's default" (ids and flags). */
#define TOKENIZER_DEFAULT (-2)
/* An id that is not set. */
#define TOKENIZER_NO_TOKEN (-1)

/* A byte string that need not be NUL-terminated. */
typedef struct tokenizer_string {
    const char *data;
    size_t length;
} tokenizer_string;

/* Everything a GGUF's tokenizer.ggml.* keys say, in memory. The tokenizer
 * copies what it needs; the caller keeps ownership of these arrays. */
typedef struct tokenizer_parts {
    const char *model;              /* "gpt2", "llama" or "gemma4" */
    const char *pre;                /* tokenizer.ggml.pre; NULL = absent ("default") */
    int32_t n_vocab;
    const tokenizer_string *tokens; /* n_vocab texts */
    const int32_t *token_types;     /* n_vocab enum tokenizer_token_type; NULL = all normal */
    const float *scores;            /* n_vocab; NULL = all 0 */
    int32_t n_merges;
    const tokenizer_string *merges; /* "LEFT RIGHT", rank = index; may be NULL when n_merges is 0 */
    /* Special ids: TOKENIZER_DEFAULT takes the model default (spec section 9),
     * TOKENIZER_NO_TOKEN means none; any other id outside [0, n_vocab) is an
     * error naming its GGUF key (a model default outside it means none). */
    int32_t bos_id, eos_id, eot_id, eom_id, unknown_id, padding_id;
    /* Flags: TOKENIZER_DEFAULT (-2) = per model/pre rules, else 0 or 1. */
    int add_bos, add_eos, add_space_prefix;
    /* Not a GGUF key: a Hugging Face tokenizer.json may set ignore_merges
     * itself (o200k does); TOKENIZER_DEFAULT follows the pre table. */
    int ignore_merges;
} tokenizer_parts;

/* Fills parts with "nothing given": no arrays, every id and flag TOKENIZER_DEFAULT. */
void tokenizer_parts_init(tokenizer_parts *parts);

/* Builds a tokenizer from parts. NULL with a one-line error for an unknown
 * model or pre-tokenizer, a malformed vocabulary, or out of memory. */
tokenizer *tokenizer_create(const tokenizer_parts *parts, bmoe_error *err);

/* Reads tokenizer.ggml.* from a GGUF (tokens, token_type, scores, merges,
 * special ids, add_bos/add_eos/add_space_prefix, pre). A key that is present
 * with a value of the wrong kind, a token type outside 0..6 or a special id
 * outside the vocabulary is an error naming the key and the value; the id
 * 4294967295 (the u32 -1) means "none", as published files use it. */
tokenizer *tokenizer_create_from_gguf(const gguf_model *model, bmoe_error *err);

void tokenizer_destroy(tokenizer *tok);

/* Tokenizes text[0..length). add_special: add BOS/EOS as the metadata asks;
 * parse_special: match control-token texts inside text (user-defined tokens
 * are always matched). Returns the number of tokens; when that exceeds
 * max_out only the first max_out are written and the caller retries with a
 * larger buffer. Negative on error (err filled; err may be NULL). */
int32_t tokenizer_encode(const tokenizer *tok, const char *text, size_t length, bool add_special,
                         bool parse_special, int32_t *out, int32_t max_out, bmoe_error *err);

/* The bytes of one token (spec 10.1, lstrip 0). render_special: give control
 * tokens' text (else they are empty). Returns the piece's length; when it
 * exceeds size nothing is written. No NUL is written. -1 for an id out of
 * range. A piece may end inside a UTF-8 sequence. */
int32_t tokenizer_token_to_piece(const tokenizer *tok, int32_t id, bool render_special, char *buf,
                                 int32_t size);

/* A whole sequence to text (spec 10.2): remove_special drops a leading BOS /
 * trailing EOS the metadata adds; unparse_special renders control tokens.
 * Returns the text's length; the text and a NUL are written only when
 * length < size. -1 (err filled) for an id out of range. */
int32_t tokenizer_detokenize(const tokenizer *tok, const int32_t *tokens, int32_t n_tokens,
                             bool remove_special, bool unparse_special, char *buf, int32_t size,
                             bmoe_error *err);

/* For streaming output: how many bytes at the end of text[0..length) are the
 * start of a UTF-8 sequence that is not complete yet (0..3). Print
 * length - result bytes now and keep the rest for the next piece. */
size_t tokenizer_utf8_incomplete_tail(const char *text, size_t length);

int32_t tokenizer_n_vocab(const tokenizer *tok);
int32_t tokenizer_bos(const tokenizer *tok); /* TOKENIZER_NO_TOKEN if none */
int32_t tokenizer_eos(const tokenizer *tok);
int32_t tokenizer_eot(const tokenizer *tok);
bool tokenizer_add_bos(const tokenizer *tok);
bool tokenizer_add_eos(const tokenizer *tok);
/* EOS, EOT, EOM and the end-of-generation texts of spec section 9. */
bool tokenizer_is_end_of_generation(const tokenizer *tok, int32_t id);
/* Token text as stored (byte-encoded form for gpt2); length in *length. NULL if out of range. */
const char *tokenizer_token_text(const tokenizer *tok, int32_t id, size_t *length);
/* enum tokenizer_token_type after the load-time fix-ups; -1 if out of range. */
int tokenizer_token_type(const tokenizer *tok, int32_t id);
/* Exact text -> id; TOKENIZER_NO_TOKEN if absent. */
int32_t tokenizer_find_token(const tokenizer *tok, const char *text, size_t length);

#endif
