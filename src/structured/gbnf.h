/* Structured output for GBNF grammars (llama.cpp's grammar format): the
 * grammar text compiled into rules, a byte matcher that follows one text
 * being written under it, and the vocabulary mask of the tokens it can take
 * next, on json_grammar.h's vocabulary. Owns the compiled grammar and the
 * matcher's parse stacks; not the vocabulary, the sampler or the generation
 * loop.
 *
 * The format, as llama.cpp's parser reads it:
 * - Rules `name ::= body`; a name is ASCII letters, digits and '-' (no '_',
 *   as llama.cpp's parser reads names). The start rule is `root`.
 * - A body is alternatives separated by '|', each a sequence of items; an
 *   alternative may be empty (`ws ::= | " "`, `( "a" | )`) and matches the
 *   empty text.
 * - Items: "literal", [class], [^negated class], '.' (any character), a
 *   rule name, ( group ); each may be followed by repetitions, which apply
 *   to what is before them, stacked ones included (`"a"*?`): `*`, `+`, `?`,
 *   {m}, {m,}, {m,n}, with m and n at most GBNF_REPEAT_MAX (1000).
 * - Escapes, in literals and classes alike: \n \r \t \\ \" \[ \] \- and \/
 *   (the last is bmoe's: JSON writes it), \xHH \uHHHH \UHHHHHHHH. They name
 *   code points, not bytes: "\xe9" is é, two bytes of UTF-8.
 * - In a class, `a-b` is a range; a '-' first, last, or right after a range
 *   is itself.
 * - `#` starts a comment that runs to the end of the line.
 * Whitespace: spaces, tabs and comments may come between any two items (and
 * between a rule's name and `::=`). A line break (\n, \r\n or \r) ends the
 * rule, except right after `::=`, right after `|` (there any number of line
 * breaks, blank and comment lines may follow) and anywhere inside
 * parentheses; blank and comment lines may come between rules. Raw
 * characters in a literal or a class stand for themselves, a line break
 * included.
 *
 * Matching: the text is UTF-8. A literal matches its bytes; a class or '.'
 * takes one whole code point, whose bytes may come in separate feeds (and
 * tokens). Invalid UTF-8 (a stray continuation byte, an overlong form, a
 * surrogate, anything above U+10FFFF) is never taken.
 *
 * Refused, with the line and column (gbnf: line 3 col 7: ...): a reference
 * to a rule never defined (named), no `root` rule, a rule defined twice
 * (llama.cpp keeps the last definition; here it is an error), left recursion
 * direct or indirect, through nullable prefixes and repetitions included
 * (`a ::= b? a "x"`: it would loop without taking a byte), a repetition with
 * nothing before it, an unknown escape or a short \x/\u/\U, a code point
 * above U+10FFFF, a surrogate written alone, an empty or reversed class
 * (`[]`, `[z-a]`), a class matching no character, unterminated literals,
 * classes and groups, a stray ')', repetition bounds above 1000 or a maximum
 * below the minimum, token references `<...>` and token negation `!` (not
 * supported: they need the tokenizer), groups nested over 256 deep, a NUL
 * byte or invalid UTF-8 in the text, a text over GBNF_TEXT_MAX (1 MiB)
 * bytes, and a grammar whose start alone would need more parse stacks than
 * the bounds below.
 *
 * Bounds: the matcher follows at most GBNF_STACKS_MAX (256) parse stacks at
 * once, each at most GBNF_DEPTH_MAX (128) frames deep. A byte is refused
 * when more stacks would be alive after it, when its step would expand more
 * than GBNF_EXPANSIONS_MAX (8192) intermediate stacks, or keep more than
 * GBNF_STEP_FRAMES_MAX (512) frames it pushed: a grammar that ambiguous is
 * held to the texts that fit, never let outside the grammar. A path that
 * would nest deeper than GBNF_DEPTH_MAX is not offered (a rule reference in
 * tail position, `list ::= item list | item`, takes no frame). Repetitions
 * are counted, not unrolled, so `x{0,1000}` costs one counter.
 *
 * The mask in free text. Where the text is free (a string's characters,
 * [^"]*), nearly every token fits and a walk of the whole trie costs
 * milliseconds; so between characters the matcher names the code points
 * that leave its stacks as they are, and marks the tokens made of them
 * without a walk. The key of a stack set is the classes at its tops
 * (classes and repeated classes, at most GBNF_PLAIN_CLASSES_MAX distinct)
 * and the bytes its literal tops take. For a code point whose first byte
 * no literal top takes, what its bytes do depends only on which of the
 * key's classes hold it (its signature): the bytes before the last keep,
 * unchanged, the class tops that may still take it and drop the rest
 * (nothing is expanded or pushed, no stack added: no bound can be met),
 * and the last makes each top whose class holds it take it, in order. So a
 * signature can be stepped without a code point. It loops when its step
 * gives back the very stacks (the same tops in the same order over the
 * same frames, shared alike; every later step then does the same, bounds
 * included). A code point is plain when its first byte is no literal top's
 * and its signature loops; a token of whole plain code points leaves the
 * stacks as they were, one code point after the other, so it is allowed.
 * `[^"]*` loops, and so does the JSON string's `( [^"\\] | "\\" ... )*`:
 * the class alternative ends, the repetition goes round, and the same tops
 * come back. With one class in the key, its signature is instead stepped
 * again and again from each result (up to the longest plain token), while
 * every top stays a class or literal byte of the key, so that a plain code
 * point still steps as its signature says: a token of n plain code points
 * is allowed when n steps succeed, and a step that gives back its own
 * stacks makes that any n. This covers a bounded repetition ([^\n]{0,500})
 * near its end, and a minimum not yet reached ([a-z]{3,}), exactly.
 * Per key, a table built from the vocabulary holds each token's plain code
 * points (or "not plain": a code point of another signature, a literal's
 * first byte, a character cut off or invalid) and, per trie node, the most
 * over the tokens below it. The mask marks the tokens whose count fits from
 * the table, then walks the trie as before but skips the subtrees whose
 * tokens all fit: the tokens left (those half in the loop, with a quote or
 * an escape, or a split character) are walked, and the walk is exact. A key
 * gets a table when a walk without one visits more than a sixteenth of the
 * trie (that walk stops there and the mask starts again from the table);
 * the matcher keeps GBNF_PLAIN_TABLES_MAX of them, each one byte per token
 * and per trie node (o200k: 0.6 MB, 5 ms to build), rebuilding the least
 * recently used, and drops them when the vocabulary changes (told apart by
 * address, sizes and a fingerprint of its pieces). Mid-character, with no
 * class or more than GBNF_PLAIN_CLASSES_MAX classes at the tops, or when
 * no signature loops, the walk alone runs.
 *
 * Thread safety: a grammar and a vocabulary are immutable once created and
 * may be shared by any number of threads; a matcher is used by one thread at
 * a time (its scratch is its own). */
#ifndef BMOE_STRUCTURED_GBNF_H
#define BMOE_STRUCTURED_GBNF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "structured/json_grammar.h"

typedef struct gbnf_grammar gbnf_grammar; /* a compiled grammar, immutable, shareable */
typedef struct gbnf_matcher gbnf_matcher; /* a position inside one text being written under it */

/* text: the GBNF source (length bytes, no NUL needed); the start rule is "root".
 * Returns NULL with err set (one line naming the place: "gbnf: line 3 col 7: ...") on error. */
gbnf_grammar *gbnf_grammar_create(const char *text, size_t length, bmoe_error *err);
void gbnf_grammar_free(gbnf_grammar *grammar);

/* The matcher keeps a pointer to grammar, which must outlive it. */
gbnf_matcher *gbnf_matcher_create(const gbnf_grammar *grammar, bmoe_error *err);
void gbnf_matcher_free(gbnf_matcher *matcher);
void gbnf_matcher_reset(gbnf_matcher *matcher); /* back to before the first byte */
/* Makes to's position that of from (both made from the same grammar; false, to unchanged, otherwise). */
bool gbnf_matcher_copy(gbnf_matcher *to, const gbnf_matcher *from);
/* Advances over bytes if all of them are allowed; returns false and leaves the state unchanged otherwise. */
bool gbnf_matcher_feed(gbnf_matcher *matcher, const char *bytes, size_t length);
/* Whether root is fully matched by the text so far (the writer may stop here). */
bool gbnf_matcher_complete(const gbnf_matcher *matcher);
/* Whether any further byte is allowed. */
bool gbnf_matcher_can_continue(const gbnf_matcher *matcher);
/* allowed[i] = 1 when token i's whole byte string can be fed from the matcher's state now, else 0 (allowed
 * holds json_vocab_n_tokens entries; control tokens and tokens over JSON_TOKEN_BYTES_MAX bytes are never
 * allowed). Returns how many are allowed. The walk's scratch lives in the matcher; the only allocations are the
 * free-text tables' arrays (above), on the first calls that build them with a vocabulary, then kept. */
int32_t gbnf_matcher_allowed(const gbnf_matcher *matcher, const json_vocab *vocab, uint8_t *allowed);

#define GBNF_STACKS_MAX 256
#define GBNF_DEPTH_MAX 128
#define GBNF_EXPANSIONS_MAX 8192
#define GBNF_STEP_FRAMES_MAX (2 * GBNF_STACKS_MAX)
#define GBNF_REPEAT_MAX 1000
#define GBNF_TEXT_MAX (1u << 20)
#define GBNF_PLAIN_CLASSES_MAX 4 /* 2^4 - 1 signatures to step per mask */
#define GBNF_PLAIN_TABLES_MAX 4

#endif
