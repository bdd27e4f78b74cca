/* The template interpreter's values, as the code that renders a conversation
 * builds them: none, booleans, integers, floats, strings, arrays and objects
 * (insertion-ordered string-keyed maps), reference counted. A value is a
 * small struct passed by copy; the functions that take an item take over the
 * caller's reference to it, chat_value_release drops one.
 *
 * Constructors never fail loudly: on allocation failure they return a value
 * of kind CHAT_VALUE_INVALID, which every appending function refuses (with
 * -1), so a builder checks the result of each append/set or of the last one.
 * Templates cannot modify the values a caller passes in. */
#ifndef BMOE_CHAT_CHAT_VALUE_H
#define BMOE_CHAT_CHAT_VALUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum chat_value_kind {
    CHAT_VALUE_INVALID = 0,
    CHAT_VALUE_NONE,
    CHAT_VALUE_BOOL,
    CHAT_VALUE_INT,
    CHAT_VALUE_FLOAT,
    CHAT_VALUE_STRING,
    CHAT_VALUE_ARRAY,
    CHAT_VALUE_OBJECT,
    /* Only templates make these. */
    CHAT_VALUE_UNDEFINED,
    CHAT_VALUE_TUPLE,
    CHAT_VALUE_NAMESPACE,
    CHAT_VALUE_RANGE,
    CHAT_VALUE_MACRO,
    CHAT_VALUE_BUILTIN,
    CHAT_VALUE_METHOD,
    CHAT_VALUE_LOOP,
} chat_value_kind;

struct chat_object;

typedef struct chat_value {
    uint8_t kind;
    /* CHAT_VALUE_UNDEFINED: the kind of the object a missing attribute was
     * looked up on (CHAT_VALUE_INVALID for a missing name);
     * CHAT_VALUE_BUILTIN: which global function. */
    uint8_t detail;
    union {
        bool boolean;
        int64_t integer;
        double number;
        struct chat_object *object;
        /* CHAT_VALUE_UNDEFINED: the expression that produced it, for messages. */
        const void *origin;
    } as;
} chat_value;

chat_value chat_value_none(void);
chat_value chat_value_bool(bool boolean);
chat_value chat_value_int(int64_t integer);
chat_value chat_value_float(double number);
/* Copies length bytes of UTF-8 text. */
chat_value chat_value_string(const char *text, size_t length);
/* Copies a NUL-terminated string. */
chat_value chat_value_cstring(const char *text);
chat_value chat_value_array(void);
chat_value chat_value_object(void);

/* Appends item to array, taking the reference; -1 (and item released) when
 * array is not an array built here, item is invalid or memory runs out. */
int chat_value_array_append(chat_value array, chat_value item);
/* Sets key (replacing an existing entry in place) to item, taking the
 * reference; -1 as for append. */
int chat_value_object_set(chat_value object, const char *key, size_t key_length, chat_value item);
int chat_value_object_set_cstring(chat_value object, const char *key, chat_value item);

/* Another reference to the same value. */
chat_value chat_value_retain(chat_value value);
/* Drops one reference; the last one frees the value and what it holds. */
void chat_value_release(chat_value value);

#endif
