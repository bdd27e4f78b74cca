/* strftime for strftime_now, computed from UTC seconds without the C
 * library's time zone or locale, so every platform prints the same date. */
#ifndef BMOE_CHAT_TIME_FORMAT_H
#define BMOE_CHAT_TIME_FORMAT_H

#include <stdint.h>

#include "chat/value.h"

/* Appends seconds (UTC) formatted by format (C locale names; %-d style
 * unpadded fields; unknown directives copied as they are). */
void format_time(struct string_builder *builder, const char *format, size_t length, int64_t seconds);

#endif
