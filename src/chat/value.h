/* Inside the value model: the heap objects behind chat_value, the per-render
 * heap (allocation budget and the registry that frees reference cycles when a
 * render ends), constructors, containers, comparison and printing with
 * Python's semantics. Libc only. */
#ifndef BMOE_CHAT_VALUE_H
#define BMOE_CHAT_VALUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chat/chat_value.h"

/* A template literal lives as long as its template and is never counted:
 * rendering never writes to the template, so renders may share it. */
#define OBJECT_IMMORTAL UINT32_MAX

/* Structures nested deeper than this are refused by every recursive walk
 * (printing, JSON, comparison, hashing), so no input can exhaust the stack. */
#define VALUE_DEPTH_MAX 200

enum object_type {
    OBJECT_STRING,
    OBJECT_RANGE,
    OBJECT_LIST,
    OBJECT_DICT,
    OBJECT_METHOD,
    OBJECT_MACRO,
    OBJECT_LOOP,
    OBJECT_SCOPE,
};

struct chat_object {
    uint32_t references;
    uint8_t type;
    uint8_t flags;
};

/* String flags. */
#define STRING_SAFE 1  /* marked by |safe or |escape: escape leaves it alone */
#define STRING_ASCII 2 /* every byte < 0x80: code point indexes are byte indexes */

struct chat_string {
    struct chat_object base;
    size_t length;
    char bytes[]; /* length bytes, then a NUL */
};

struct chat_range {
    struct chat_object base;
    int64_t start, stop, step;
};

struct value_heap;

/* Anything that can hold other values, and so be part of a cycle. */
struct chat_container {
    struct chat_object base;
    /* The render that made it (NULL: built by the caller, read only to templates). */
    struct value_heap *heap;
    struct chat_container *previous, *next;
};

struct chat_list {
    struct chat_container base;
    size_t count, capacity;
    chat_value *items;
};

struct dict_entry {
    chat_value key, value;
    uint64_t hash;
};

/* Insertion ordered; an open-addressing index appears past a few entries. */
struct chat_dict {
    struct chat_container base;
    size_t count, capacity;
    struct dict_entry *entries;
    uint32_t *index; /* entry number + 1, 0 = empty */
    size_t index_size;
};

/* A method looked up but not yet called (`s.strip` without the parentheses). */
struct chat_method {
    struct chat_container base;
    chat_value receiver;
    int method;
};

struct chat_scope;

/* A macro, or the body of a {% call %} block that the macro calls as caller(). */
struct chat_macro {
    struct chat_container base;
    const void *node;
    const char *name; /* in the template's arena */
    size_t name_length;
    struct chat_scope *closure;
    bool is_caller;
};

/* The `loop` variable of a for statement. */
struct chat_loop {
    struct chat_container base;
    const void *node;
    chat_value items; /* list or range being walked */
    size_t index, length;
    uint32_t depth;
    bool changed_seen;
    chat_value changed_last;
    struct chat_scope *scope; /* where the for statement runs, for recursive calls */
};

/* Variables of one block (template, macro call, loop iteration). */
struct chat_scope {
    struct chat_container base;
    struct chat_scope *parent;
    chat_value variables; /* dict, or invalid until the first assignment */
};

/* Per-render accounting and the list of live containers. The budget bounds
 * the bytes allocated plus the bytes scanned, over the whole render: memory
 * and time at once. */
struct value_heap {
    size_t allocated, budget;
    bool exhausted;
    struct chat_container registry;
};

enum value_status {
    VALUE_OK = 0,
    VALUE_NO_MEMORY = -1,
    VALUE_UNHASHABLE = -2,
    VALUE_TOO_DEEP = -3,
    VALUE_INCOMPARABLE = -4,
};

void heap_init(struct value_heap *heap, size_t budget);
/* Frees every container still registered: what is left when a render ends is
 * garbage held by cycles (a namespace holding itself, say). */
void heap_sweep(struct value_heap *heap);
/* malloc / realloc counted against the budget (heap may be NULL: uncounted). */
void *heap_allocate(struct value_heap *heap, size_t size);
void *heap_resize(struct value_heap *heap, void *memory, size_t old_size, size_t new_size);
/* Counts work that allocates nothing (scanning, comparing) against the
 * budget; false, and the heap exhausted, when it does not fit. */
bool heap_charge(struct value_heap *heap, uint64_t amount);
/* Registers a new container with the heap (or none). */
void container_init(struct chat_container *container, uint8_t type, struct value_heap *heap);

static inline bool value_is_object(chat_value value)
{
    switch (value.kind) {
    case CHAT_VALUE_STRING:
    case CHAT_VALUE_ARRAY:
    case CHAT_VALUE_OBJECT:
    case CHAT_VALUE_TUPLE:
    case CHAT_VALUE_NAMESPACE:
    case CHAT_VALUE_RANGE:
    case CHAT_VALUE_MACRO:
    case CHAT_VALUE_METHOD:
    case CHAT_VALUE_LOOP:
        return true;
    default:
        return false;
    }
}

static inline chat_value value_retain(chat_value value)
{
    if (value_is_object(value) && value.as.object->references != OBJECT_IMMORTAL)
        value.as.object->references++;
    return value;
}

void value_release(chat_value value);
void object_release(struct chat_object *object);

static inline chat_value value_invalid(void)
{
    chat_value value = {.kind = CHAT_VALUE_INVALID};
    return value;
}

static inline chat_value value_undefined(const void *origin, uint8_t looked_up_on)
{
    chat_value value = {.kind = CHAT_VALUE_UNDEFINED, .detail = looked_up_on};
    value.as.origin = origin;
    return value;
}

static inline chat_value value_object(uint8_t kind, void *object)
{
    chat_value value = {.kind = kind};
    value.as.object = object;
    return value;
}

static inline struct chat_string *value_string(chat_value value)
{
    return (struct chat_string *)value.as.object;
}

static inline struct chat_list *value_list(chat_value value)
{
    return (struct chat_list *)value.as.object;
}

static inline struct chat_dict *value_dict(chat_value value)
{
    return (struct chat_dict *)value.as.object;
}

static inline bool value_is_list_like(chat_value value)
{
    return value.kind == CHAT_VALUE_ARRAY || value.kind == CHAT_VALUE_TUPLE;
}

static inline bool value_is_dict_like(chat_value value)
{
    return value.kind == CHAT_VALUE_OBJECT || value.kind == CHAT_VALUE_NAMESPACE;
}

/* Strings. */
chat_value value_string_new(struct value_heap *heap, const char *text, size_t length);
/* An uncounted string in memory the caller owns (a template's arena). */
chat_value value_string_immortal(void *memory, const char *text, size_t length);
size_t value_string_immortal_size(size_t length);
chat_value value_range_new(struct value_heap *heap, int64_t start, int64_t stop, int64_t step);
int64_t range_length(const struct chat_range *range);

/* Builds a string by appending; the result is a chat_value string. */
struct string_builder {
    struct value_heap *heap;
    struct chat_string *string;
    size_t capacity;
    size_t limit; /* bytes (0: none); past it the builder fails with over_limit */
    bool failed, over_limit;
};

void builder_init(struct string_builder *builder, struct value_heap *heap, size_t limit);
bool builder_append(struct string_builder *builder, const char *text, size_t length);
bool builder_append_cstring(struct string_builder *builder, const char *text);
bool builder_append_char(struct string_builder *builder, char c);
bool builder_append_code_point(struct string_builder *builder, uint32_t code_point);
bool builder_append_repeat(struct string_builder *builder, const char *text, size_t length, size_t times);
size_t builder_length(const struct string_builder *builder);
const char *builder_text(const struct string_builder *builder);
/* The built string (invalid after a failure); the builder is left empty. */
chat_value builder_finish(struct string_builder *builder);
void builder_discard(struct string_builder *builder);

/* Lists and tuples. */
chat_value value_list_new(struct value_heap *heap, uint8_t kind, size_t capacity);
/* Takes item's reference; -1 on failure (item released). */
int list_append(chat_value list, chat_value item);

/* Dicts and namespaces. */
chat_value value_dict_new(struct value_heap *heap, uint8_t kind);
/* Takes both references (released on failure); an existing key keeps its
 * place. Hashing and comparing the key is charged to the dict's heap (a
 * long key costs its length each time). */
int dict_set(chat_value dict, chat_value key, chat_value item);
/* Borrowed value, or NULL; *status gets VALUE_OK or why the key cannot be
 * looked up. Adds the bytes hashed and compared to *work (NULL: uncounted):
 * the dict may be the caller's, with no heap to charge. */
const chat_value *dict_find(chat_value dict, chat_value key, int *status, uint64_t *work);
const chat_value *dict_find_text(chat_value dict, const char *text, size_t length);
int dict_set_text(chat_value dict, const char *text, size_t length, chat_value item);

/* Python semantics. */
bool value_truthy(chat_value value);
/* 1 equal, 0 not, VALUE_TOO_DEEP. */
int value_equal(chat_value a, chat_value b);
/* *order < 0, 0, > 0; VALUE_INCOMPARABLE for types Python cannot order. */
int value_compare(chat_value a, chat_value b, int *order);
/* The same, adding the elements and bytes looked at to *work. */
int value_equal_counted(chat_value a, chat_value b, uint64_t *work);
int value_compare_counted(chat_value a, chat_value b, int *order, uint64_t *work);
/* VALUE_OK and *hash, or VALUE_UNHASHABLE / VALUE_TOO_DEEP; adds the
 * elements and bytes hashed to *work (NULL: uncounted). */
int value_hash(chat_value value, uint64_t *hash, uint64_t *work);
/* The hash value_hash gives a string key with these bytes. */
uint64_t value_hash_text(const char *text, size_t length);
/* Python's type name ('str', 'dict', 'NoneType', ...). */
const char *value_type_name(chat_value value);
/* len(); false when the value has none. */
bool value_length(chat_value value, size_t *length);

/* str(value) and repr(value) appended to a builder. */
int value_write_str(struct string_builder *builder, chat_value value);
int value_write_repr(struct string_builder *builder, chat_value value);
/* Python's repr of a float ("1.0", "1e-05", "inf"); out has 32 bytes. */
size_t format_python_float(double number, char out[32]);
/* Appends a string in Python repr quoting. */
bool write_python_string_repr(struct string_builder *builder, const char *text, size_t length);

/* Names for printing callables (defined with their tables). */
const char *builtin_name(int builtin);
const char *method_name(int method);

#endif
