/* Python's str operations on UTF-8 text, shared by the filters (x|trim) and
 * the methods (x.strip()): stripping, case mapping, replacing, splitting,
 * padding and searching, all counting code points as Python does. */
#ifndef BMOE_CHAT_STRING_OPS_H
#define BMOE_CHAT_STRING_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include "chat/value.h"

struct render;

enum case_mapping {
    CASE_UPPER,
    CASE_LOWER,
    CASE_SWAP,
    CASE_CAPITALIZE,   /* str.capitalize */
    CASE_TITLE,        /* str.title */
    CASE_JINJA_TITLE,  /* the title filter: words start after - ( { [ < or a space */
};

/* chars NULL: whitespace. */
int text_strip(struct render *render, int line, chat_value text, chat_value chars, bool left, bool right,
               chat_value *result);
int text_case(struct render *render, int line, chat_value text, enum case_mapping mapping, chat_value *result);
/* count < 0: every occurrence. */
int text_replace(struct render *render, int line, chat_value text, chat_value old, chat_value replacement,
                 int64_t count, chat_value *result);
/* separator invalid or none: runs of whitespace. maxsplit < 0: no limit. */
int text_split(struct render *render, int line, chat_value text, chat_value separator, int64_t maxsplit,
               bool from_right, chat_value *result);
int text_splitlines(struct render *render, int line, chat_value text, bool keep_ends, chat_value *result);
/* align '<' (ljust), '>' (rjust) or '^' (center, Python's left bias). */
int text_pad(struct render *render, int line, chat_value text, int64_t width, uint32_t fill, char align,
             chat_value *result);
/* Code point index of needle within [start, end) of text, or -1. */
int64_t text_find(chat_value text, chat_value needle, int64_t start, int64_t end, bool reverse);
int64_t text_count(chat_value text, chat_value needle, int64_t start, int64_t end);
/* Code points in text. */
size_t text_length(chat_value text);
/* Python's str.isdigit / isalpha / ... ; kind is one of "digit", "alpha", "alnum", "space", "lower", "upper", "title". */
bool text_is(chat_value text, const char *kind);

#endif
