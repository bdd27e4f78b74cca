/* Value lifetime: reference counting, the per-render heap (budget and the
 * registry of containers), strings, string building, ranges and the public
 * constructors of chat_value.h. Freeing is iterative, so a list nested a
 * million deep is freed without recursion. */
#include "chat/value.h"

#include "chat/unicode.h"

#include <stdlib.h>
#include <string.h>

void heap_init(struct value_heap *heap, size_t budget)
{
    heap->allocated = 0;
    heap->budget = budget;
    heap->exhausted = false;
    heap->registry.previous = heap->registry.next = &heap->registry;
}

void *heap_allocate(struct value_heap *heap, size_t size)
{
    if (heap) {
        if (size > heap->budget - heap->allocated) {
            heap->exhausted = true;
            return NULL;
        }
        heap->allocated += size;
    }
    return malloc(size ? size : 1);
}

void *heap_resize(struct value_heap *heap, void *memory, size_t old_size, size_t new_size)
{
    if (heap && new_size > old_size) {
        if (new_size - old_size > heap->budget - heap->allocated) {
            heap->exhausted = true;
            return NULL;
        }
        heap->allocated += new_size - old_size;
    }
    return realloc(memory, new_size ? new_size : 1);
}

bool heap_charge(struct value_heap *heap, uint64_t amount)
{
    if (!heap)
        return true;
    if (amount > heap->budget - heap->allocated) {
        heap->exhausted = true;
        return false;
    }
    heap->allocated += (size_t)amount;
    return true;
}

void container_init(struct chat_container *container, uint8_t type, struct value_heap *heap)
{
    container->base.references = 1;
    container->base.type = type;
    container->base.flags = 0;
    container->heap = heap;
    if (heap) {
        container->next = heap->registry.next;
        container->previous = &heap->registry;
        heap->registry.next->previous = container;
        heap->registry.next = container;
    } else {
        container->previous = container->next = NULL;
    }
}

static void container_unlink(struct chat_container *container)
{
    if (container->previous) {
        container->previous->next = container->next;
        container->next->previous = container->previous;
    }
    container->previous = container->next = NULL;
}

/* Drops one reference to object; a container that dies goes on *pending
 * (threaded through its next link) instead of being freed recursively. */
static void drop_reference(struct chat_object *object, struct chat_container **pending)
{
    if (!object || object->references == OBJECT_IMMORTAL)
        return;
    if (--object->references > 0)
        return;
    if (object->type == OBJECT_STRING || object->type == OBJECT_RANGE) {
        free(object);
        return;
    }
    struct chat_container *container = (struct chat_container *)object;
    container_unlink(container);
    container->next = *pending;
    *pending = container;
}

static void drop_value(chat_value value, struct chat_container **pending)
{
    if (value_is_object(value))
        drop_reference(value.as.object, pending);
}

/* Releases everything a container holds and frees its arrays, leaving it empty. */
static void release_children(struct chat_container *container, struct chat_container **pending)
{
    switch (container->base.type) {
    case OBJECT_LIST: {
        struct chat_list *list = (struct chat_list *)container;
        for (size_t i = 0; i < list->count; i++)
            drop_value(list->items[i], pending);
        free(list->items);
        list->items = NULL;
        list->count = list->capacity = 0;
        break;
    }
    case OBJECT_DICT: {
        struct chat_dict *dict = (struct chat_dict *)container;
        for (size_t i = 0; i < dict->count; i++) {
            drop_value(dict->entries[i].key, pending);
            drop_value(dict->entries[i].value, pending);
        }
        free(dict->entries);
        free(dict->index);
        dict->entries = NULL;
        dict->index = NULL;
        dict->count = dict->capacity = dict->index_size = 0;
        break;
    }
    case OBJECT_METHOD: {
        struct chat_method *method = (struct chat_method *)container;
        drop_value(method->receiver, pending);
        method->receiver = value_invalid();
        break;
    }
    case OBJECT_MACRO: {
        struct chat_macro *macro = (struct chat_macro *)container;
        drop_reference(&macro->closure->base.base, pending);
        macro->closure = NULL;
        break;
    }
    case OBJECT_LOOP: {
        struct chat_loop *loop = (struct chat_loop *)container;
        drop_value(loop->items, pending);
        drop_value(loop->changed_last, pending);
        if (loop->scope)
            drop_reference(&loop->scope->base.base, pending);
        loop->items = loop->changed_last = value_invalid();
        loop->scope = NULL;
        break;
    }
    case OBJECT_SCOPE: {
        struct chat_scope *scope = (struct chat_scope *)container;
        if (scope->parent)
            drop_reference(&scope->parent->base.base, pending);
        drop_value(scope->variables, pending);
        scope->parent = NULL;
        scope->variables = value_invalid();
        break;
    }
    default:
        break;
    }
}

static void free_pending(struct chat_container *pending)
{
    while (pending) {
        struct chat_container *container = pending;
        pending = container->next;
        release_children(container, &pending);
        free(container);
    }
}

void object_release(struct chat_object *object)
{
    struct chat_container *pending = NULL;
    drop_reference(object, &pending);
    free_pending(pending);
}

void value_release(chat_value value)
{
    if (value_is_object(value))
        object_release(value.as.object);
}

void heap_sweep(struct value_heap *heap)
{
    struct chat_container *registry = &heap->registry;
    /* Pinned, no registered container dies while the others are emptied. */
    for (struct chat_container *c = registry->next; c != registry; c = c->next)
        c->base.references++;
    for (struct chat_container *c = registry->next; c != registry; c = c->next) {
        struct chat_container *pending = NULL;
        release_children(c, &pending);
        free_pending(pending);
    }
    while (registry->next != registry) {
        struct chat_container *c = registry->next;
        container_unlink(c);
        free(c);
    }
}

/* Strings. */

static bool bytes_are_ascii(const char *text, size_t length)
{
    for (size_t i = 0; i < length; i++)
        if ((unsigned char)text[i] >= 0x80)
            return false;
    return true;
}

chat_value value_string_new(struct value_heap *heap, const char *text, size_t length)
{
    if (length > SIZE_MAX / 2)
        return value_invalid();
    struct chat_string *string = heap_allocate(heap, sizeof *string + length + 1);
    if (!string)
        return value_invalid();
    string->base.references = 1;
    string->base.type = OBJECT_STRING;
    string->base.flags = bytes_are_ascii(text, length) ? STRING_ASCII : 0;
    string->length = length;
    if (length)
        memcpy(string->bytes, text, length);
    string->bytes[length] = '\0';
    return value_object(CHAT_VALUE_STRING, string);
}

size_t value_string_immortal_size(size_t length)
{
    return sizeof(struct chat_string) + length + 1;
}

chat_value value_string_immortal(void *memory, const char *text, size_t length)
{
    struct chat_string *string = memory;
    string->base.references = OBJECT_IMMORTAL;
    string->base.type = OBJECT_STRING;
    string->base.flags = bytes_are_ascii(text, length) ? STRING_ASCII : 0;
    string->length = length;
    if (length)
        memcpy(string->bytes, text, length);
    string->bytes[length] = '\0';
    return value_object(CHAT_VALUE_STRING, string);
}

chat_value value_range_new(struct value_heap *heap, int64_t start, int64_t stop, int64_t step)
{
    struct chat_range *range = heap_allocate(heap, sizeof *range);
    if (!range)
        return value_invalid();
    range->base.references = 1;
    range->base.type = OBJECT_RANGE;
    range->base.flags = 0;
    range->start = start;
    range->stop = stop;
    range->step = step;
    return value_object(CHAT_VALUE_RANGE, range);
}

int64_t range_length(const struct chat_range *range)
{
    /* Computed in unsigned arithmetic: stop - start can exceed INT64_MAX. */
    if (range->step > 0 && range->start < range->stop) {
        uint64_t span = (uint64_t)range->stop - (uint64_t)range->start;
        return (int64_t)((span - 1) / (uint64_t)range->step + 1);
    }
    if (range->step < 0 && range->start > range->stop) {
        uint64_t span = (uint64_t)range->start - (uint64_t)range->stop;
        return (int64_t)((span - 1) / (0 - (uint64_t)range->step) + 1);
    }
    return 0;
}

/* String building. */

void builder_init(struct string_builder *builder, struct value_heap *heap, size_t limit)
{
    builder->heap = heap;
    builder->string = NULL;
    builder->capacity = 0;
    builder->limit = limit;
    builder->failed = builder->over_limit = false;
}

/* A request no budget could grant. */
static bool builder_too_big(struct string_builder *builder)
{
    builder->failed = true;
    if (builder->heap)
        builder->heap->exhausted = true;
    return false;
}

static bool builder_reserve(struct string_builder *builder, size_t extra)
{
    if (builder->failed)
        return false;
    size_t length = builder->string ? builder->string->length : 0;
    if (builder->limit && extra > builder->limit - length) {
        builder->failed = builder->over_limit = true;
        return false;
    }
    if (extra > SIZE_MAX / 4 - length)
        return builder_too_big(builder);
    size_t needed = length + extra;
    if (builder->string && needed <= builder->capacity)
        return true;
    size_t capacity = builder->capacity ? builder->capacity : 32;
    while (capacity < needed)
        capacity = capacity > SIZE_MAX / 8 ? needed : capacity * 2;
    size_t old_size = builder->string ? sizeof *builder->string + builder->capacity + 1 : 0;
    struct chat_string *string =
        heap_resize(builder->heap, builder->string, old_size, sizeof *string + capacity + 1);
    if (!string) {
        builder->failed = true;
        return false;
    }
    if (!builder->string)
        string->length = 0;
    builder->string = string;
    builder->capacity = capacity;
    return true;
}

bool builder_append(struct string_builder *builder, const char *text, size_t length)
{
    if (!builder_reserve(builder, length))
        return false;
    if (length)
        memcpy(builder->string->bytes + builder->string->length, text, length);
    builder->string->length += length;
    return true;
}

bool builder_append_cstring(struct string_builder *builder, const char *text)
{
    return builder_append(builder, text, strlen(text));
}

bool builder_append_char(struct string_builder *builder, char c)
{
    return builder_append(builder, &c, 1);
}

bool builder_append_code_point(struct string_builder *builder, uint32_t code_point)
{
    char bytes[4];
    size_t length = utf8_encode(code_point, bytes);
    return builder_append(builder, bytes, length);
}

bool builder_append_repeat(struct string_builder *builder, const char *text, size_t length, size_t times)
{
    if (length && times > SIZE_MAX / 8 / length) {
        if (builder->limit) {
            builder->failed = builder->over_limit = true;
            return false;
        }
        return builder_too_big(builder);
    }
    size_t total = length * times;
    if (!builder_reserve(builder, total) || total == 0)
        return !builder->failed;
    /* One copy of text, then the copies made so far doubled: a long padding
     * costs a few large copies, not one call per character. */
    char *start = builder->string->bytes + builder->string->length;
    memcpy(start, text, length);
    for (size_t done = length; done < total;) {
        size_t next = done < total - done ? done : total - done;
        memcpy(start + done, start, next);
        done += next;
    }
    builder->string->length += total;
    return true;
}

size_t builder_length(const struct string_builder *builder)
{
    return builder->string ? builder->string->length : 0;
}

const char *builder_text(const struct string_builder *builder)
{
    return builder->string ? builder->string->bytes : "";
}

chat_value builder_finish(struct string_builder *builder)
{
    if (builder->failed) {
        builder_discard(builder);
        return value_invalid();
    }
    if (!builder->string && !builder_reserve(builder, 0))
        return value_invalid();
    struct chat_string *string = builder->string;
    string->base.references = 1;
    string->base.type = OBJECT_STRING;
    string->base.flags = bytes_are_ascii(string->bytes, string->length) ? STRING_ASCII : 0;
    string->bytes[string->length] = '\0';
    builder->string = NULL;
    builder->capacity = 0;
    return value_object(CHAT_VALUE_STRING, string);
}

void builder_discard(struct string_builder *builder)
{
    free(builder->string);
    builder->string = NULL;
    builder->capacity = 0;
}

/* The public constructors: built outside any render, uncounted. */

chat_value chat_value_none(void)
{
    chat_value value = {.kind = CHAT_VALUE_NONE};
    return value;
}

chat_value chat_value_bool(bool boolean)
{
    chat_value value = {.kind = CHAT_VALUE_BOOL};
    value.as.boolean = boolean;
    return value;
}

chat_value chat_value_int(int64_t integer)
{
    chat_value value = {.kind = CHAT_VALUE_INT};
    value.as.integer = integer;
    return value;
}

chat_value chat_value_float(double number)
{
    chat_value value = {.kind = CHAT_VALUE_FLOAT};
    value.as.number = number;
    return value;
}

chat_value chat_value_string(const char *text, size_t length)
{
    if (!text && length)
        return value_invalid();
    return value_string_new(NULL, text ? text : "", length);
}

chat_value chat_value_cstring(const char *text)
{
    return text ? value_string_new(NULL, text, strlen(text)) : value_invalid();
}

chat_value chat_value_array(void)
{
    return value_list_new(NULL, CHAT_VALUE_ARRAY, 0);
}

chat_value chat_value_object(void)
{
    return value_dict_new(NULL, CHAT_VALUE_OBJECT);
}

int chat_value_array_append(chat_value array, chat_value item)
{
    if (array.kind != CHAT_VALUE_ARRAY || item.kind == CHAT_VALUE_INVALID) {
        value_release(item);
        return -1;
    }
    return list_append(array, item);
}

int chat_value_object_set(chat_value object, const char *key, size_t key_length, chat_value item)
{
    if (object.kind != CHAT_VALUE_OBJECT || item.kind == CHAT_VALUE_INVALID || (!key && key_length)) {
        value_release(item);
        return -1;
    }
    return dict_set_text(object, key ? key : "", key_length, item);
}

int chat_value_object_set_cstring(chat_value object, const char *key, chat_value item)
{
    if (!key) {
        value_release(item);
        return -1;
    }
    return chat_value_object_set(object, key, strlen(key), item);
}

chat_value chat_value_retain(chat_value value)
{
    return value_retain(value);
}

void chat_value_release(chat_value value)
{
    value_release(value);
}
