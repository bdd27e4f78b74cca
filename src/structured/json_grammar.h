/* Structured output: a JSON schema compiled into a grammar, a byte matcher
 * that follows one JSON value being written under it, and the vocabulary
 * mask that says which tokens the matcher can take next (OpenAI's
 * response_format json_object / json_schema, Ollama's `format`). Owns the
 * compiled grammar, the matcher's parse states and the vocabulary's byte
 * tries; not the sampler, the tokenizer or the generation loop.
 *
 * What is written: JSON per RFC 8259, with these limits so that a model can
 * neither loop forever nor be led into a dead end:
 * - no whitespace before the value and none after it: once the value is
 *   complete and can take no more bytes, the writer must stop;
 * - between two tokens of the JSON grammar at most one run of whitespace:
 *   nothing, one space, or one "\n" followed by up to 20 spaces or tabs
 *   (enough to pretty-print); no "\r";
 * - numbers: at most 15 integer digits, 15 fraction digits, 3 exponent
 *   digits; an "integer" has neither a fraction nor an exponent;
 * - objects and arrays nest at most 32 deep (JSON_NESTING_MAX);
 * - strings: UTF-8 validated (a character may be split between feeds),
 *   escapes \" \\ \/ \b \f \n \r \t \uXXXX, no raw byte below 0x20; a
 *   \uXXXX surrogate only as a high-low pair (strict parsers refuse a lone
 *   one).
 *
 * Schema keywords (json_grammar_create):
 * - type (a name or a list), properties, required, additionalProperties,
 *   items, minItems, maxItems, minLength, maxLength (characters; an escape
 *   counts as one, a surrogate pair too), enum, const, anyOf, oneOf (read as anyOf: the
 *   writer may match more than one), allOf with one member, $ref to "#",
 *   "#/$defs/NAME" or "#/definitions/NAME" (recursion works).
 * - additionalProperties ABSENT means false when `properties` is given (as
 *   OpenAI's strict mode): only the listed keys. With neither, any keys.
 *   Properties come in any order, each at most once; '}' only once every
 *   required one is there. Keys are matched as their JSON strings in the
 *   plain form (\" \\ \b \f \n \r \t, \u00XX for other controls, the rest
 *   raw): a listed key written with other escapes is another key.
 * - enum and const values are matched as their compact serialization
 *   (cJSON's: no whitespace, keys in the schema's order, numbers as cJSON
 *   prints them). With `type` beside them, the values of other types drop.
 * - Without `type`, the keywords present say it: properties/required/
 *   additionalProperties an object, items/minItems/maxItems an array,
 *   minLength/maxLength a string, none of them any value. This narrows
 *   what JSON Schema allows (a bare `properties` also lets a string pass),
 *   never widens it.
 * - Annotations are ignored: title, description, default, examples,
 *   $schema, $id, $comment, format (a plain string), readOnly, writeOnly,
 *   deprecated, discriminator, content*; $defs/definitions hold targets.
 *   Keywords JSON Schema does not define are ignored, as it specifies.
 * - Refused with the keyword named: pattern, minimum, maximum, exclusive*,
 *   multipleOf, patternProperties, propertyNames, minProperties,
 *   maxProperties, not, if/then/else, allOf with several members,
 *   uniqueItems, contains, prefixItems, items as a list, unevaluated*,
 *   dependent*, $dynamicRef and the like; anyOf/oneOf/$ref/allOf beside
 *   other constraining keywords; a false schema (except as
 *   additionalProperties or items); more than 64 properties in one object;
 *   alternatives that could need more than 32 parse states at once; a
 *   $ref/anyOf cycle that never opens an object or array; a schema whose
 *   smallest value nests deeper than 32; schemas nested over 128 deep.
 *   A value (an optional key, an alternative) that would need more nesting
 *   than is left is not offered, so the writer is never led to a dead end.
 * Not checked: duplicate keys among the free keys of an object whose other
 * keys are allowed (listed keys are checked).
 *
 * Thread safety: a grammar and a vocabulary are immutable once created and
 * may be shared by any number of threads; a matcher is used by one thread
 * at a time (its scratch is its own). */
#ifndef BMOE_STRUCTURED_JSON_GRAMMAR_H
#define BMOE_STRUCTURED_JSON_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

typedef struct json_grammar json_grammar; /* a compiled schema, immutable, shareable */
typedef struct json_matcher json_matcher; /* a position inside one JSON value being written */
typedef struct json_vocab json_vocab;     /* the model's token byte strings, indexed for masking */

/* schema: JSON text of a JSON schema; NULL: any JSON object (OpenAI's json_object mode).
 * Returns NULL with err set (a clear one-line message naming the unsupported keyword or the bad part). */
json_grammar *json_grammar_create(const char *schema, size_t length, bmoe_error *err);
void json_grammar_free(json_grammar *grammar);

/* The matcher keeps a pointer to grammar, which must outlive it. */
json_matcher *json_matcher_create(const json_grammar *grammar, bmoe_error *err);
void json_matcher_free(json_matcher *matcher);
void json_matcher_reset(json_matcher *matcher); /* back to before the first byte */
/* Makes to's position that of from (both made from the same grammar; false, to unchanged, otherwise). */
bool json_matcher_copy(json_matcher *to, const json_matcher *from);
/* Advances over bytes if all of them are allowed; returns false and leaves the state unchanged otherwise. */
bool json_matcher_feed(json_matcher *matcher, const char *bytes, size_t length);
/* Whether the value written so far is complete (the writer may stop here). */
bool json_matcher_complete(const json_matcher *matcher);
/* Whether any further byte is allowed (false once a complete value can take nothing more). */
bool json_matcher_can_continue(const json_matcher *matcher);

/* pieces[i]/lengths[i]: token i's bytes as the tokenizer decodes it (control tokens: length 0, never allowed).
 * The vocabulary copies what it needs; pieces may be freed after. A token longer than JSON_TOKEN_BYTES_MAX
 * bytes is allowed only where it is plain string text (no real tokenizer has one: o200k's longest is 128). */
json_vocab *json_vocab_create(const char *const *pieces, const size_t *lengths, int32_t n_tokens, bmoe_error *err);
void json_vocab_free(json_vocab *vocab);
int32_t json_vocab_n_tokens(const json_vocab *vocab);
/* allowed[i] = 1 when token i's whole byte string can be fed from the matcher's state now, else 0
 * (allowed holds json_vocab_n_tokens entries). Returns how many are allowed. Does not allocate: the
 * walk's scratch lives in the matcher, which is why it must not be used by two threads at once. */
int32_t json_matcher_allowed(const json_matcher *matcher, const json_vocab *vocab, uint8_t *allowed);

#define JSON_TOKEN_BYTES_MAX 512

#endif
