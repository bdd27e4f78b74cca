/* Lists, tuples, dicts and namespaces: growth, lookup and insertion. Dicts
 * keep insertion order (as Python's do) in an entry array; past a few
 * entries an open-addressing index of entry numbers makes lookups O(1). */
#include "chat/value.h"

#include <stdlib.h>
#include <string.h>

/* Below this many entries a linear scan is as fast as hashing. */
#define DICT_INDEX_THRESHOLD 8

chat_value value_list_new(struct value_heap *heap, uint8_t kind, size_t capacity)
{
    struct chat_list *list = heap_allocate(heap, sizeof *list);
    if (!list)
        return value_invalid();
    list->items = NULL;
    if (capacity) {
        if (capacity > SIZE_MAX / sizeof *list->items / 2 ||
            !(list->items = heap_allocate(heap, capacity * sizeof *list->items))) {
            free(list);
            return value_invalid();
        }
    }
    container_init(&list->base, OBJECT_LIST, heap);
    list->count = 0;
    list->capacity = capacity;
    return value_object(kind, list);
}

int list_append(chat_value list_value, chat_value item)
{
    struct chat_list *list = value_list(list_value);
    if (list->count == list->capacity) {
        size_t capacity = list->capacity ? list->capacity * 2 : 4;
        if (capacity > SIZE_MAX / sizeof *list->items / 2) {
            value_release(item);
            return -1;
        }
        chat_value *items = heap_resize(list->base.heap, list->items, list->capacity * sizeof *items,
                                        capacity * sizeof *items);
        if (!items) {
            value_release(item);
            return -1;
        }
        list->items = items;
        list->capacity = capacity;
    }
    list->items[list->count++] = item;
    return 0;
}

chat_value value_dict_new(struct value_heap *heap, uint8_t kind)
{
    struct chat_dict *dict = heap_allocate(heap, sizeof *dict);
    if (!dict)
        return value_invalid();
    container_init(&dict->base, OBJECT_DICT, heap);
    dict->count = dict->capacity = dict->index_size = 0;
    dict->entries = NULL;
    dict->index = NULL;
    return value_object(kind, dict);
}

static uint64_t hash_text(const char *text, size_t length)
{
    uint64_t hash = 1469598103934665603u;
    for (size_t i = 0; i < length; i++) {
        hash ^= (unsigned char)text[i];
        hash *= 1099511628211u;
    }
    return hash;
}

static bool key_is_text(chat_value key, const char *text, size_t length)
{
    if (key.kind != CHAT_VALUE_STRING)
        return false;
    const struct chat_string *string = value_string(key);
    return string->length == length && (length == 0 || memcmp(string->bytes, text, length) == 0);
}

static int rebuild_index(struct chat_dict *dict, size_t size)
{
    uint32_t *index = heap_allocate(dict->base.heap, size * sizeof *index);
    if (!index)
        return -1;
    memset(index, 0, size * sizeof *index);
    for (size_t i = 0; i < dict->count; i++) {
        size_t slot = (size_t)dict->entries[i].hash & (size - 1);
        while (index[slot])
            slot = (slot + 1) & (size - 1);
        index[slot] = (uint32_t)(i + 1);
    }
    free(dict->index);
    dict->index = index;
    dict->index_size = size;
    return 0;
}

/* The entry number of key, or -1; *status VALUE_OK unless comparing failed. */
static long find_entry(const struct chat_dict *dict, chat_value key, uint64_t hash, int *status, uint64_t *work)
{
    *status = VALUE_OK;
    if (dict->index) {
        for (size_t slot = (size_t)hash & (dict->index_size - 1);; slot = (slot + 1) & (dict->index_size - 1)) {
            uint32_t number = dict->index[slot];
            if (!number)
                return -1;
            const struct dict_entry *entry = &dict->entries[number - 1];
            if (entry->hash != hash)
                continue;
            int equal = value_equal_counted(entry->key, key, work);
            if (equal < 0) {
                *status = equal;
                return -1;
            }
            if (equal)
                return (long)number - 1;
        }
    }
    for (size_t i = 0; i < dict->count; i++) {
        if (dict->entries[i].hash != hash)
            continue;
        int equal = value_equal_counted(dict->entries[i].key, key, work);
        if (equal < 0) {
            *status = equal;
            return -1;
        }
        if (equal)
            return (long)i;
    }
    return -1;
}

const chat_value *dict_find(chat_value dict_value, chat_value key, int *status, uint64_t *work)
{
    uint64_t hash;
    *status = value_hash(key, &hash, work);
    if (*status != VALUE_OK)
        return NULL;
    struct chat_dict *dict = value_dict(dict_value);
    long entry = find_entry(dict, key, hash, status, work);
    return entry < 0 ? NULL : &dict->entries[entry].value;
}

const chat_value *dict_find_text(chat_value dict_value, const char *text, size_t length)
{
    struct chat_dict *dict = value_dict(dict_value);
    uint64_t hash = hash_text(text, length);
    if (dict->index) {
        for (size_t slot = (size_t)hash & (dict->index_size - 1);; slot = (slot + 1) & (dict->index_size - 1)) {
            uint32_t number = dict->index[slot];
            if (!number)
                return NULL;
            const struct dict_entry *entry = &dict->entries[number - 1];
            if (entry->hash == hash && key_is_text(entry->key, text, length))
                return &entry->value;
        }
    }
    for (size_t i = 0; i < dict->count; i++)
        if (dict->entries[i].hash == hash && key_is_text(dict->entries[i].key, text, length))
            return &dict->entries[i].value;
    return NULL;
}

static int insert_entry(struct chat_dict *dict, chat_value key, chat_value item, uint64_t hash)
{
    if (dict->count == dict->capacity) {
        size_t capacity = dict->capacity ? dict->capacity * 2 : 4;
        if (capacity > UINT32_MAX / 2 ||
            capacity > SIZE_MAX / sizeof *dict->entries / 2)
            return -1;
        struct dict_entry *entries = heap_resize(dict->base.heap, dict->entries,
                                                 dict->capacity * sizeof *entries, capacity * sizeof *entries);
        if (!entries)
            return -1;
        dict->entries = entries;
        dict->capacity = capacity;
    }
    size_t number = dict->count++;
    dict->entries[number] = (struct dict_entry){.key = key, .value = item, .hash = hash};
    if (dict->count > DICT_INDEX_THRESHOLD) {
        if (dict->count * 2 > dict->index_size) {
            size_t size = 16;
            while (size < dict->count * 4)
                size *= 2;
            if (rebuild_index(dict, size) != 0) {
                dict->count--;
                return -1;
            }
        } else {
            size_t slot = (size_t)hash & (dict->index_size - 1);
            while (dict->index[slot])
                slot = (slot + 1) & (dict->index_size - 1);
            dict->index[slot] = (uint32_t)(number + 1);
        }
    }
    return 0;
}

int dict_set(chat_value dict_value, chat_value key, chat_value item)
{
    struct chat_dict *dict = value_dict(dict_value);
    uint64_t hash, work = 0;
    int status = value_hash(key, &hash, &work);
    long entry = status == VALUE_OK ? find_entry(dict, key, hash, &status, &work) : -1;
    if (status == VALUE_OK && !heap_charge(dict->base.heap, work))
        status = VALUE_NO_MEMORY;
    if (status != VALUE_OK) {
        value_release(key);
        value_release(item);
        return status;
    }
    if (entry >= 0) {
        value_release(dict->entries[entry].value);
        dict->entries[entry].value = item;
        value_release(key);
        return 0;
    }
    if (insert_entry(dict, key, item, hash) != 0) {
        value_release(key);
        value_release(item);
        return VALUE_NO_MEMORY;
    }
    return 0;
}

int dict_set_text(chat_value dict_value, const char *text, size_t length, chat_value item)
{
    chat_value *existing = (chat_value *)dict_find_text(dict_value, text, length);
    if (existing) {
        value_release(*existing);
        *existing = item;
        return 0;
    }
    chat_value key = value_string_new(value_dict(dict_value)->base.heap, text, length);
    if (key.kind == CHAT_VALUE_INVALID) {
        value_release(item);
        return VALUE_NO_MEMORY;
    }
    if (insert_entry(value_dict(dict_value), key, item, hash_text(text, length)) != 0) {
        value_release(key);
        value_release(item);
        return VALUE_NO_MEMORY;
    }
    return 0;
}

uint64_t value_hash_text(const char *text, size_t length)
{
    return hash_text(text, length);
}
