/* tojson: Python's json.dumps(value, ensure_ascii, indent, separators,
 * sort_keys) byte for byte, the way Hugging Face's tojson filter calls it. */
#ifndef BMOE_CHAT_JSON_WRITE_H
#define BMOE_CHAT_JSON_WRITE_H

#include <stdbool.h>
#include <stddef.h>

#include "chat/value.h"

struct json_options {
    bool indented;       /* indent given: newlines and the indent per level */
    const char *indent;  /* the per-level indent text */
    size_t indent_length;
    const char *item_separator, *key_separator;
    size_t item_separator_length, key_separator_length;
    bool sort_keys;
    bool ensure_ascii;
};

/* json.dumps defaults: ", " and ": ", or "," and ": " when indented. */
void json_options_default(struct json_options *options, bool indented);

enum json_status {
    JSON_NOT_SERIALIZABLE = -10, /* *culprit: the value's type name */
    JSON_BAD_KEY = -11,          /* *culprit: the key's type name */
    JSON_UNSORTABLE = -12,       /* keys of types Python cannot order */
};

/* Appends the JSON text; VALUE_OK or a value/json status. */
int json_write(struct string_builder *builder, chat_value value, const struct json_options *options,
               const char **culprit);

#endif
