/* Python's semantics for truth, equality, ordering, hashing, len() and type
 * names. Numbers compare across bool, int and float; lists and tuples never
 * equal each other; Jinja2's Undefined equals only another Undefined. */
#include "chat/value.h"

#include <math.h>
#include <string.h>

#include "chat/unicode.h"

static bool is_number(chat_value value)
{
    return value.kind == CHAT_VALUE_BOOL || value.kind == CHAT_VALUE_INT || value.kind == CHAT_VALUE_FLOAT;
}

static int64_t number_as_int(chat_value value)
{
    return value.kind == CHAT_VALUE_BOOL ? (int64_t)value.as.boolean : value.as.integer;
}

/* -1, 0, 1, or 2 when unordered (a NaN). */
static int compare_numbers(chat_value a, chat_value b)
{
    if (a.kind != CHAT_VALUE_FLOAT && b.kind != CHAT_VALUE_FLOAT) {
        int64_t x = number_as_int(a), y = number_as_int(b);
        return x < y ? -1 : x > y;
    }
    if (a.kind == CHAT_VALUE_FLOAT && b.kind == CHAT_VALUE_FLOAT) {
        double x = a.as.number, y = b.as.number;
        if (isnan(x) || isnan(y))
            return 2;
        return x < y ? -1 : x > y;
    }
    /* An int against a float: exact when the float is integral and in range. */
    bool flipped = a.kind == CHAT_VALUE_FLOAT;
    int64_t integer = number_as_int(flipped ? b : a);
    double real = flipped ? a.as.number : b.as.number;
    int order;
    if (isnan(real))
        return 2;
    if (real >= 9223372036854775808.0)
        order = -1;
    else if (real < -9223372036854775808.0)
        order = 1;
    else {
        double whole = floor(real);
        int64_t truncated = (int64_t)whole;
        if (integer != truncated)
            order = integer < truncated ? -1 : 1;
        else
            order = real > whole ? -1 : 0;
    }
    return flipped ? -order : order;
}

bool value_truthy(chat_value value)
{
    switch (value.kind) {
    case CHAT_VALUE_BOOL: return value.as.boolean;
    case CHAT_VALUE_INT: return value.as.integer != 0;
    case CHAT_VALUE_FLOAT: return value.as.number != 0.0;
    case CHAT_VALUE_STRING: return value_string(value)->length > 0;
    case CHAT_VALUE_ARRAY:
    case CHAT_VALUE_TUPLE: return value_list(value)->count > 0;
    case CHAT_VALUE_OBJECT: return value_dict(value)->count > 0;
    case CHAT_VALUE_RANGE: return range_length((const struct chat_range *)value.as.object) > 0;
    case CHAT_VALUE_NAMESPACE:
    case CHAT_VALUE_MACRO:
    case CHAT_VALUE_BUILTIN:
    case CHAT_VALUE_METHOD:
    case CHAT_VALUE_LOOP: return true;
    default: return false;
    }
}

static int equal_at(chat_value a, chat_value b, int depth, uint64_t *work);

static int lists_equal(const struct chat_list *x, const struct chat_list *y, int depth, uint64_t *work)
{
    if (x->count != y->count)
        return 0;
    for (size_t i = 0; i < x->count; i++) {
        int equal = equal_at(x->items[i], y->items[i], depth + 1, work);
        if (equal != 1)
            return equal;
    }
    return 1;
}

static int dicts_equal(chat_value a, chat_value b, int depth, uint64_t *work)
{
    const struct chat_dict *x = value_dict(a);
    if (x->count != value_dict(b)->count)
        return 0;
    for (size_t i = 0; i < x->count; i++) {
        int status;
        const chat_value *other = dict_find(b, x->entries[i].key, &status, work);
        if (status != VALUE_OK)
            return status == VALUE_TOO_DEEP ? VALUE_TOO_DEEP : 0;
        if (!other)
            return 0;
        int equal = equal_at(x->entries[i].value, *other, depth + 1, work);
        if (equal != 1)
            return equal;
    }
    return 1;
}

static int ranges_equal(const struct chat_range *x, const struct chat_range *y)
{
    int64_t length = range_length(x);
    if (length != range_length(y))
        return 0;
    if (length == 0)
        return 1;
    if (x->start != y->start)
        return 0;
    return length == 1 || x->step == y->step;
}

/* work, when given, counts the elements and bytes looked at: a render
 * charges it to its budget, since comparing big values costs time without
 * allocating anything. */
static int equal_at(chat_value a, chat_value b, int depth, uint64_t *work)
{
    if (depth > VALUE_DEPTH_MAX)
        return VALUE_TOO_DEEP;
    if (work)
        *work += 1;
    if (is_number(a) && is_number(b))
        return compare_numbers(a, b) == 0;
    if (a.kind != b.kind)
        return 0;
    switch (a.kind) {
    case CHAT_VALUE_NONE:
    case CHAT_VALUE_UNDEFINED:
    case CHAT_VALUE_INVALID: return 1;
    case CHAT_VALUE_STRING: {
        const struct chat_string *x = value_string(a), *y = value_string(b);
        if (x->length != y->length)
            return 0;
        if (work)
            *work += x->length;
        return memcmp(x->bytes, y->bytes, x->length) == 0;
    }
    case CHAT_VALUE_ARRAY:
    case CHAT_VALUE_TUPLE: return lists_equal(value_list(a), value_list(b), depth, work);
    case CHAT_VALUE_OBJECT: return dicts_equal(a, b, depth, work);
    case CHAT_VALUE_RANGE:
        return ranges_equal((const struct chat_range *)a.as.object, (const struct chat_range *)b.as.object);
    case CHAT_VALUE_BUILTIN: return a.detail == b.detail;
    default: return a.as.object == b.as.object;
    }
}

int value_equal(chat_value a, chat_value b)
{
    return equal_at(a, b, 0, NULL);
}

int value_equal_counted(chat_value a, chat_value b, uint64_t *work)
{
    return equal_at(a, b, 0, work);
}

static int compare_at(chat_value a, chat_value b, int *order, int depth, uint64_t *work)
{
    if (depth > VALUE_DEPTH_MAX)
        return VALUE_TOO_DEEP;
    if (work)
        *work += 1;
    if (is_number(a) && is_number(b)) {
        *order = compare_numbers(a, b);
        return VALUE_OK;
    }
    if (a.kind != b.kind)
        return VALUE_INCOMPARABLE;
    if (a.kind == CHAT_VALUE_STRING) {
        const struct chat_string *x = value_string(a), *y = value_string(b);
        size_t common = x->length < y->length ? x->length : y->length;
        if (work)
            *work += common;
        int c = common ? memcmp(x->bytes, y->bytes, common) : 0;
        *order = c != 0 ? (c < 0 ? -1 : 1) : (x->length < y->length ? -1 : x->length > y->length);
        return VALUE_OK;
    }
    if (value_is_list_like(a)) {
        const struct chat_list *x = value_list(a), *y = value_list(b);
        size_t common = x->count < y->count ? x->count : y->count;
        for (size_t i = 0; i < common; i++) {
            int equal = equal_at(x->items[i], y->items[i], depth + 1, work);
            if (equal < 0)
                return equal;
            if (!equal)
                return compare_at(x->items[i], y->items[i], order, depth + 1, work);
        }
        *order = x->count < y->count ? -1 : x->count > y->count;
        return VALUE_OK;
    }
    return VALUE_INCOMPARABLE;
}

int value_compare(chat_value a, chat_value b, int *order)
{
    return compare_at(a, b, order, 0, NULL);
}

int value_compare_counted(chat_value a, chat_value b, int *order, uint64_t *work)
{
    return compare_at(a, b, order, 0, work);
}

static int hash_at(chat_value value, uint64_t *hash, int depth, uint64_t *work)
{
    if (depth > VALUE_DEPTH_MAX)
        return VALUE_TOO_DEEP;
    if (work)
        *work += 1;
    switch (value.kind) {
    case CHAT_VALUE_NONE: *hash = 0x9e3779b97f4a7c15u; return VALUE_OK;
    case CHAT_VALUE_UNDEFINED: *hash = 0x5bd1e9955bd1e995u; return VALUE_OK;
    case CHAT_VALUE_BOOL:
    case CHAT_VALUE_INT: *hash = (uint64_t)number_as_int(value) * 0x9e3779b97f4a7c15u; return VALUE_OK;
    case CHAT_VALUE_FLOAT: {
        double real = value.as.number;
        if (real == floor(real) && real >= -9223372036854775808.0 && real < 9223372036854775808.0) {
            *hash = (uint64_t)(int64_t)real * 0x9e3779b97f4a7c15u;
        } else {
            uint64_t bits;
            memcpy(&bits, &real, sizeof bits);
            *hash = bits ^ (bits >> 29);
        }
        return VALUE_OK;
    }
    case CHAT_VALUE_STRING:
        if (work)
            *work += value_string(value)->length;
        *hash = value_hash_text(value_string(value)->bytes, value_string(value)->length);
        return VALUE_OK;
    case CHAT_VALUE_TUPLE: {
        uint64_t combined = 0x345678u;
        const struct chat_list *list = value_list(value);
        for (size_t i = 0; i < list->count; i++) {
            uint64_t item;
            int status = hash_at(list->items[i], &item, depth + 1, work);
            if (status != VALUE_OK)
                return status;
            combined = (combined ^ item) * 1000003u;
        }
        *hash = combined;
        return VALUE_OK;
    }
    case CHAT_VALUE_RANGE: {
        const struct chat_range *range = (const struct chat_range *)value.as.object;
        *hash = (uint64_t)range_length(range) * 31u + (uint64_t)range->start;
        return VALUE_OK;
    }
    case CHAT_VALUE_BUILTIN: *hash = value.detail; return VALUE_OK;
    case CHAT_VALUE_MACRO:
    case CHAT_VALUE_METHOD:
    case CHAT_VALUE_LOOP: *hash = (uint64_t)(uintptr_t)value.as.object; return VALUE_OK;
    default: return VALUE_UNHASHABLE;
    }
}

int value_hash(chat_value value, uint64_t *hash, uint64_t *work)
{
    return hash_at(value, hash, 0, work);
}

const char *value_type_name(chat_value value)
{
    switch (value.kind) {
    case CHAT_VALUE_NONE: return "NoneType";
    case CHAT_VALUE_BOOL: return "bool";
    case CHAT_VALUE_INT: return "int";
    case CHAT_VALUE_FLOAT: return "float";
    case CHAT_VALUE_STRING: return "str";
    case CHAT_VALUE_ARRAY: return "list";
    case CHAT_VALUE_TUPLE: return "tuple";
    case CHAT_VALUE_OBJECT: return "dict";
    case CHAT_VALUE_NAMESPACE: return "Namespace";
    case CHAT_VALUE_UNDEFINED: return "Undefined";
    case CHAT_VALUE_RANGE: return "range";
    case CHAT_VALUE_MACRO: return "Macro";
    case CHAT_VALUE_BUILTIN:
    case CHAT_VALUE_METHOD: return "builtin_function_or_method";
    case CHAT_VALUE_LOOP: return "LoopContext";
    default: return "invalid";
    }
}

bool value_length(chat_value value, size_t *length)
{
    switch (value.kind) {
    case CHAT_VALUE_STRING: {
        const struct chat_string *string = value_string(value);
        *length = string->base.flags & STRING_ASCII ? string->length : utf8_count(string->bytes, string->length);
        return true;
    }
    case CHAT_VALUE_ARRAY:
    case CHAT_VALUE_TUPLE: *length = value_list(value)->count; return true;
    case CHAT_VALUE_OBJECT: *length = value_dict(value)->count; return true;
    case CHAT_VALUE_RANGE: *length = (size_t)range_length((const struct chat_range *)value.as.object); return true;
    case CHAT_VALUE_UNDEFINED: *length = 0; return true;
    default: return false;
    }
}
