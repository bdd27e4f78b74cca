/* Attribute, item and slice access with Jinja2's sandboxed lookup order:
 * x.name finds a method of x's type first, then the item "name"; x[key]
 * finds the item first, then a method. A miss gives an undefined value that
 * remembers what was looked up where, for its error message. */
#include "chat/render.h"

#include <stdlib.h>
#include <string.h>

#include "chat/unicode.h"

chat_value sequence_item(chat_value items, size_t index)
{
    if (items.kind == CHAT_VALUE_RANGE) {
        const struct chat_range *range = (const struct chat_range *)items.as.object;
        /* In unsigned arithmetic: index * step alone may pass INT64_MAX even
         * though the element itself is in range. */
        return chat_value_int((int64_t)((uint64_t)range->start + (uint64_t)index * (uint64_t)range->step));
    }
    return value_retain(value_list(items)->items[index]);
}

size_t sequence_count(chat_value items)
{
    if (items.kind == CHAT_VALUE_RANGE)
        return (size_t)range_length((const struct chat_range *)items.as.object);
    return value_list(items)->count;
}

static bool name_is(const char *name, size_t length, const char *expected)
{
    return strlen(expected) == length && memcmp(name, expected, length) == 0;
}

static int bound_method(struct render *render, int line, chat_value receiver, int method, chat_value *result)
{
    struct chat_method *bound = heap_allocate(&render->heap, sizeof *bound);
    if (!bound)
        return render_fail_status(render, line, VALUE_NO_MEMORY);
    container_init(&bound->base, OBJECT_METHOD, &render->heap);
    bound->receiver = value_retain(receiver);
    bound->method = method;
    *result = value_object(CHAT_VALUE_METHOD, bound);
    return 0;
}

static bool loop_attribute(const struct chat_loop *loop, const char *name, size_t length, chat_value *result)
{
    size_t index = loop->index, count = loop->length;
    if (name_is(name, length, "index"))
        *result = chat_value_int((int64_t)index + 1);
    else if (name_is(name, length, "index0"))
        *result = chat_value_int((int64_t)index);
    else if (name_is(name, length, "revindex"))
        *result = chat_value_int((int64_t)(count - index));
    else if (name_is(name, length, "revindex0"))
        *result = chat_value_int((int64_t)(count - index) - 1);
    else if (name_is(name, length, "first"))
        *result = chat_value_bool(index == 0);
    else if (name_is(name, length, "last"))
        *result = chat_value_bool(index + 1 == count);
    else if (name_is(name, length, "length"))
        *result = chat_value_int((int64_t)count);
    else if (name_is(name, length, "depth"))
        *result = chat_value_int(loop->depth);
    else if (name_is(name, length, "depth0"))
        *result = chat_value_int((int64_t)loop->depth - 1);
    else if (name_is(name, length, "previtem"))
        *result = index > 0 ? sequence_item(loop->items, index - 1)
                            : value_undefined("there is no previous item", UNDEFINED_MESSAGE);
    else if (name_is(name, length, "nextitem"))
        *result = index + 1 < count ? sequence_item(loop->items, index + 1)
                                    : value_undefined("there is no next item", UNDEFINED_MESSAGE);
    else
        return false;
    return true;
}

int get_attribute(struct render *render, const struct expression *node, chat_value object, const char *name,
                  size_t length, chat_value *result)
{
    int method = method_find(object, name, length);
    if (method >= 0)
        return bound_method(render, node->line, object, method, result);
    if (value_is_dict_like(object)) {
        const chat_value *found = dict_find_text(object, name, length);
        if (found) {
            *result = value_retain(*found);
            return 0;
        }
    } else if (object.kind == CHAT_VALUE_LOOP) {
        if (loop_attribute((const struct chat_loop *)object.as.object, name, length, result))
            return 0;
    } else if (object.kind == CHAT_VALUE_UNDEFINED) {
        return fail_undefined(render, node->line, object);
    }
    *result = value_undefined(node, object.kind);
    return 0;
}

/* A Python index into count elements: negative counts from the end. */
static bool resolve_index(chat_value index, size_t count, size_t *position)
{
    if (index.kind != CHAT_VALUE_INT && index.kind != CHAT_VALUE_BOOL)
        return false;
    int64_t value = index.kind == CHAT_VALUE_BOOL ? index.as.boolean : index.as.integer;
    if (value < 0) {
        if ((uint64_t)(-(value + 1)) >= count)
            return false;
        value += (int64_t)count;
    }
    if ((uint64_t)value >= count)
        return false;
    *position = (size_t)value;
    return true;
}

int get_item(struct render *render, const struct expression *node, chat_value object, chat_value index,
             chat_value *result)
{
    size_t position;
    switch (object.kind) {
    case CHAT_VALUE_ARRAY:
    case CHAT_VALUE_TUPLE:
    case CHAT_VALUE_RANGE:
        if (resolve_index(index, sequence_count(object), &position)) {
            *result = sequence_item(object, position);
            return 0;
        }
        break;
    case CHAT_VALUE_STRING: {
        const struct chat_string *string = value_string(object);
        bool ascii = string->base.flags & STRING_ASCII;
        if (!ascii && render_charge(render, node->line, string->length) != 0)
            return -1;
        size_t count = ascii ? string->length : utf8_count(string->bytes, string->length);
        if (resolve_index(index, count, &position)) {
            size_t offset = ascii ? position : utf8_offset(string->bytes, string->length, position), size = 1;
            if (!ascii)
                utf8_decode(string->bytes + offset, string->length - offset, &size);
            return make_string(render, node->line, string->bytes + offset, size, result);
        }
        break;
    }
    case CHAT_VALUE_OBJECT: {
        int status;
        uint64_t work = 0;
        const chat_value *found = dict_find(object, index, &status, &work);
        if (render_charge(render, node->line, work) != 0)
            return -1;
        if (found) {
            *result = value_retain(*found);
            return 0;
        }
        if (status == VALUE_TOO_DEEP)
            return render_fail_status(render, node->line, status);
        break;
    }
    case CHAT_VALUE_UNDEFINED: return fail_undefined(render, node->line, object);
    default: break;
    }
    if (index.kind == CHAT_VALUE_STRING && object.kind != CHAT_VALUE_OBJECT)
        return get_attribute(render, node, object, value_string(index)->bytes, value_string(index)->length, result);
    if (index.kind == CHAT_VALUE_STRING) {
        int method = method_find(object, value_string(index)->bytes, value_string(index)->length);
        if (method >= 0)
            return bound_method(render, node->line, object, method, result);
    }
    *result = value_undefined(node, object.kind);
    return 0;
}

/* Python's slice.indices: the first position, the step and the element count. */
static int slice_indices(struct render *render, int line, chat_value start_value, chat_value stop_value,
                         chat_value step_value, int64_t length, int64_t *start, int64_t *stop, int64_t *step,
                         int64_t *count)
{
    const chat_value bounds[3] = {start_value, stop_value, step_value};
    for (int i = 0; i < 3; i++)
        if (bounds[i].kind != CHAT_VALUE_NONE && bounds[i].kind != CHAT_VALUE_INT && bounds[i].kind != CHAT_VALUE_BOOL)
            return render_fail(render, line, "slice indices must be integers or None or have an __index__ method");
#define BOUND(v) ((v).kind == CHAT_VALUE_BOOL ? (int64_t)(v).as.boolean : (v).as.integer)
    *step = step_value.kind == CHAT_VALUE_NONE ? 1 : BOUND(step_value);
    if (*step == 0)
        return render_fail(render, line, "slice step cannot be zero");
    if (*step == INT64_MIN)
        *step = -INT64_MAX;
    int64_t lower = *step > 0 ? 0 : -1, upper = *step > 0 ? length : length - 1;
    int64_t first = 0, last = 0;
    for (int which = 0; which < 2; which++) {
        chat_value bound = which == 0 ? start_value : stop_value;
        int64_t position;
        if (bound.kind == CHAT_VALUE_NONE) {
            position = (which == 0) == (*step < 0) ? upper : lower;
        } else {
            position = BOUND(bound);
            if (position < 0) {
                position = position < -length ? lower : position + length;
                if (position < lower)
                    position = lower;
            } else if (position > upper) {
                position = upper;
            }
        }
        if (which == 0)
            first = position;
        else
            last = position;
    }
#undef BOUND
    *start = first;
    *stop = last;
    if (*step > 0)
        *count = last > first ? (int64_t)(((uint64_t)last - (uint64_t)first - 1) / (uint64_t)*step + 1) : 0;
    else
        *count = first > last ? (int64_t)(((uint64_t)first - (uint64_t)last - 1) / (uint64_t)(-*step) + 1) : 0;
    return 0;
}

static int slice_string(struct render *render, int line, const struct chat_string *string, int64_t start,
                        int64_t step, int64_t count, chat_value *result)
{
    struct string_builder builder;
    builder_init(&builder, &render->heap, 0);
    if (string->base.flags & STRING_ASCII) {
        for (int64_t i = 0; i < count; i++)
            builder_append_char(&builder, string->bytes[start + i * step]);
        return finish_string(render, line, &builder, result);
    }
    size_t code_points = utf8_count(string->bytes, string->length);
    size_t *offsets = heap_allocate(&render->heap, (code_points + 1) * sizeof *offsets);
    if (!offsets)
        return render_fail_status(render, line, VALUE_NO_MEMORY);
    size_t offset = 0, size;
    for (size_t i = 0; i < code_points; i++, offset += size) {
        offsets[i] = offset;
        utf8_decode(string->bytes + offset, string->length - offset, &size);
    }
    offsets[code_points] = string->length;
    for (int64_t i = 0; i < count; i++) {
        size_t at = (size_t)(start + i * step);
        builder_append(&builder, string->bytes + offsets[at], offsets[at + 1] - offsets[at]);
    }
    free(offsets);
    return finish_string(render, line, &builder, result);
}

int get_slice(struct render *render, int line, chat_value object, chat_value start_value, chat_value stop_value,
              chat_value step_value, chat_value *result)
{
    size_t length;
    if (object.kind == CHAT_VALUE_UNDEFINED)
        return fail_undefined(render, line, object);
    if (object.kind != CHAT_VALUE_STRING && object.kind != CHAT_VALUE_RANGE && !value_is_list_like(object)) {
        *result = value_undefined(NULL, object.kind);
        return 0;
    }
    value_length(object, &length);
    int64_t start = 0, stop = 0, step = 1, count = 0;
    if (slice_indices(render, line, start_value, stop_value, step_value, (int64_t)length, &start, &stop, &step,
                      &count) != 0)
        return -1;
    if (object.kind == CHAT_VALUE_STRING)
        return slice_string(render, line, value_string(object), start, step, count, result);
    if (object.kind == CHAT_VALUE_RANGE) {
        const struct chat_range *range = (const struct chat_range *)object.as.object;
        /* Python maps the slice's bounds through the range: range(10)[::3] is range(0, 10, 3). */
        __int128 first = (__int128)range->start + (__int128)start * range->step;
        __int128 last = (__int128)range->start + (__int128)stop * range->step;
        __int128 stride = (__int128)range->step * step;
        if (first != (int64_t)first || last != (int64_t)last || stride != (int64_t)stride)
            return render_fail(render, line, "integer overflow (the result needs more than 64 bits)");
        *result = value_range_new(&render->heap, (int64_t)first, (int64_t)last, (int64_t)stride);
        return result->kind == CHAT_VALUE_INVALID ? render_fail_status(render, line, VALUE_NO_MEMORY) : 0;
    }
    chat_value list = value_list_new(&render->heap, object.kind, (size_t)count);
    if (list.kind == CHAT_VALUE_INVALID)
        return render_fail_status(render, line, VALUE_NO_MEMORY);
    for (int64_t i = 0; i < count; i++)
        list_append(list, value_retain(value_list(object)->items[start + i * step]));
    *result = list;
    return 0;
}

int iterate_to_list(struct render *render, int line, chat_value value, chat_value *list)
{
    switch (value.kind) {
    case CHAT_VALUE_ARRAY:
    case CHAT_VALUE_TUPLE: *list = value_retain(value); return 0;
    case CHAT_VALUE_UNDEFINED:
        *list = value_list_new(&render->heap, CHAT_VALUE_ARRAY, 0);
        break;
    case CHAT_VALUE_STRING: {
        const struct chat_string *string = value_string(value);
        *list = value_list_new(&render->heap, CHAT_VALUE_ARRAY, 0);
        size_t size;
        for (size_t offset = 0; list->kind != CHAT_VALUE_INVALID && offset < string->length; offset += size) {
            utf8_decode(string->bytes + offset, string->length - offset, &size);
            chat_value character = value_string_new(&render->heap, string->bytes + offset, size);
            if (character.kind == CHAT_VALUE_INVALID || list_append(*list, character) != 0) {
                value_release(*list);
                *list = value_invalid();
            }
        }
        break;
    }
    case CHAT_VALUE_OBJECT: {
        const struct chat_dict *dict = value_dict(value);
        *list = value_list_new(&render->heap, CHAT_VALUE_ARRAY, dict->count);
        for (size_t i = 0; list->kind != CHAT_VALUE_INVALID && i < dict->count; i++)
            list_append(*list, value_retain(dict->entries[i].key));
        break;
    }
    case CHAT_VALUE_RANGE: {
        size_t count = sequence_count(value);
        if (count > render->heap.budget / sizeof(chat_value)) {
            render->heap.exhausted = true;
            return render_fail_status(render, line, VALUE_NO_MEMORY);
        }
        *list = value_list_new(&render->heap, CHAT_VALUE_ARRAY, count);
        for (size_t i = 0; list->kind != CHAT_VALUE_INVALID && i < count; i++)
            list_append(*list, sequence_item(value, i));
        break;
    }
    default: return render_fail(render, line, "'%s' object is not iterable", value_type_name(value));
    }
    return list->kind == CHAT_VALUE_INVALID ? render_fail_status(render, line, VALUE_NO_MEMORY) : 0;
}
