/* UTF-8 as the Unicode standard defines well-formed sequences (Table 3-7):
 * one decoder step used wherever bytes become text, so that invalid bytes
 * are handled one way everywhere. Owns nothing. */
#ifndef BMOE_BASE_UTF8_H
#define BMOE_BASE_UTF8_H

#include <stddef.h>

/* The replacement character U+FFFD, encoded. */
#define UTF8_REPLACEMENT "\xef\xbf\xbd"
#define UTF8_REPLACEMENT_BYTES 3

enum utf8_scan {
    UTF8_VALID,      /* *length bytes form one character */
    UTF8_INVALID,    /* *length bytes are a maximal ill-formed subpart: one U+FFFD */
    UTF8_INCOMPLETE, /* all *length remaining bytes are a valid start of a character */
};

/* Classifies the sequence at the start of bytes (length > 0). */
enum utf8_scan utf8_scan(const unsigned char *bytes, size_t length, size_t *sequence_length);

#endif
