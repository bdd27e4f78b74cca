/* Bytes from outside (a file's keys, tensor names, architecture and
 * tokenizer names, merges, token texts; a flag, a request, a template's own
 * messages) shown in messages: every layer escapes them with text_escape,
 * and every error and log line is escaped once more as a whole when it is
 * formed (text_escape_message), so a message is always one line of printable
 * ASCII that cannot drive a terminal and still says which bytes it quotes. */
#ifndef BMOE_BASE_TEXT_H
#define BMOE_BASE_TEXT_H

#include <stddef.h>

/* Writes bytes[0..length) into out (out_size > 0) as printable ASCII:
 * printable characters stay, except the backslash and the single quote
 * (messages quote names with it), which get a backslash; tab, newline and
 * carriage return become \t, \n and \r; every other byte (controls, DEL,
 * each byte of a UTF-8 sequence) becomes \xNN. When the escaped text does
 * not fit, it is cut between two escapes and ends in "...". Returns out, so
 * the call can be an argument of error_set. */
const char *text_escape(const void *bytes, size_t length, char *out, size_t out_size);

/* text_escape of a NUL-terminated string. */
const char *text_escape_string(const char *text, char *out, size_t out_size);

/* text_escape_string for a whole message, parts of which may have been
 * escaped already: backslashes and single quotes stay as they are, so a
 * second pass changes nothing and a name escaped inside it reads as it did. */
const char *text_escape_message(const char *message, char *out, size_t out_size);

#endif
