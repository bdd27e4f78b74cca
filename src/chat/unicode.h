/* UTF-8 and the few Unicode properties Python's str methods need (whitespace,
 * simple case mapping, letter and digit classes). Owns no memory. Invalid
 * UTF-8 never stops a walk: each bad byte decodes as one code point of its
 * own (U+DC80 + byte, as Python's surrogateescape would) and re-encodes to
 * the same byte, so text round-trips unchanged. */
#ifndef BMOE_CHAT_UNICODE_H
#define BMOE_CHAT_UNICODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Decodes the code point at text[0] (length > 0); *size gets its byte count. */
uint32_t utf8_decode(const char *text, size_t length, size_t *size);
/* Encodes a code point into out (4 bytes); returns the byte count. */
size_t utf8_encode(uint32_t code_point, char out[4]);
/* Code points in text. */
size_t utf8_count(const char *text, size_t length);
/* Byte offset of the code point number index (length when past the end). */
size_t utf8_offset(const char *text, size_t length, size_t index);
/* Byte count of the code point before offset (offset > 0). */
size_t utf8_previous_size(const char *text, size_t offset);

/* The first occurrence of needle in haystack, or NULL, in linear time. */
const char *bytes_find(const char *haystack, size_t length, const char *needle, size_t needle_length);

/* Python's str.isspace() for one code point. */
bool unicode_is_space(uint32_t code_point);
/* Python's splitlines() boundaries: \n \r \v \f \x1c-\x1e \x85 U+2028 U+2029. */
bool unicode_is_line_break(uint32_t code_point);
uint32_t unicode_upper(uint32_t code_point);
uint32_t unicode_lower(uint32_t code_point);
/* Has an upper or lower case form (Python's "cased"). */
bool unicode_is_cased(uint32_t code_point);
bool unicode_is_upper(uint32_t code_point);
bool unicode_is_lower(uint32_t code_point);
bool unicode_is_alpha(uint32_t code_point);
bool unicode_is_digit(uint32_t code_point);
/* Printable in Python's repr() (not a control, format, separator or private char). */
bool unicode_is_printable(uint32_t code_point);

#endif
