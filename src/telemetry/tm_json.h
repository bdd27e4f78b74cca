/* JSON values for the telemetry lines: a string literal from any bytes
 * (valid JSON always: quotes, backslashes and control characters escaped,
 * valid UTF-8 copied untouched, each byte of an invalid sequence replaced by
 * U+FFFD), and numbers that are always valid JSON (a non-finite value, which
 * JSON cannot carry, is written as the caller's "unmeasured" fallback). */
#ifndef BMOE_TM_JSON_H
#define BMOE_TM_JSON_H

#include <stdbool.h>
#include <stddef.h>

#include "tm_buffer.h"

/* Appends "..." holding text[0..length). */
bool tm_json_string(tm_buffer *out, const char *text, size_t length);
/* Appends value with decimals digits after the point; fallback when value is
 * NaN or infinite. */
bool tm_json_number(tm_buffer *out, double value, int decimals, double fallback);

/* The length of the valid UTF-8 sequence at bytes[0..length) (1..4), or 0
 * when it is not one (overlong, surrogate, above U+10FFFF, truncated). */
size_t tm_utf8_sequence(const unsigned char *bytes, size_t length);

#endif
