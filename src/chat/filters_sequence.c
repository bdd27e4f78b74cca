/* Filters on sequences: length, first/last, list, reverse, join, sort,
 * dictsort, unique, min/max, sum, map, select/reject and their attribute
 * forms, items, batch, slice. Jinja2 returns generators from several of
 * these; here they return lists, which iterate and test the same. */
#include "chat/filters.h"

#include <stdlib.h>
#include <string.h>

#include "chat/lexer.h"
#include "chat/string_ops.h"
#include "chat/unicode.h"
#include "chat/value_sort.h"

static int new_list(struct render *render, int line, size_t capacity, chat_value *list)
{
    *list = value_list_new(&render->heap, CHAT_VALUE_ARRAY, capacity);
    return list->kind == CHAT_VALUE_INVALID ? render_fail_status(render, line, VALUE_NO_MEMORY) : 0;
}

static int append(struct render *render, int line, chat_value list, chat_value item)
{
    return list_append(list, item) == 0 ? 0 : render_fail_status(render, line, VALUE_NO_MEMORY);
}

FILTER(filter_length)
{
    size_t length;
    if (bind_arguments(render, node, "length", arguments, NULL, 0, NULL) != 0)
        return -1;
    if (input.kind == CHAT_VALUE_NAMESPACE) {
        length = value_dict(input)->count;
    } else if (!value_length(input, &length)) {
        return render_fail(render, node->line, "object of type '%s' has no len()", value_type_name(input));
    }
    *result = chat_value_int((int64_t)length);
    return 0;
}

FILTER(filter_list)
{
    chat_value items;
    if (bind_arguments(render, node, "list", arguments, NULL, 0, NULL) != 0 ||
        iterate_to_list(render, node->line, input, &items) != 0)
        return -1;
    /* list() is a new list, never the same one. */
    const struct chat_list *source = value_list(items);
    int status = new_list(render, node->line, source->count, result);
    for (size_t i = 0; status == 0 && i < source->count; i++)
        list_append(*result, value_retain(source->items[i]));
    value_release(items);
    return status;
}

FILTER(filter_first)
{
    chat_value items;
    if (bind_arguments(render, node, "first", arguments, NULL, 0, NULL) != 0 ||
        iterate_to_list(render, node->line, input, &items) != 0)
        return -1;
    const struct chat_list *list = value_list(items);
    *result = list->count ? value_retain(list->items[0])
                          : value_undefined("No first item, sequence was empty.", UNDEFINED_MESSAGE);
    value_release(items);
    return 0;
}

FILTER(filter_last)
{
    chat_value items;
    if (bind_arguments(render, node, "last", arguments, NULL, 0, NULL) != 0 ||
        iterate_to_list(render, node->line, input, &items) != 0)
        return -1;
    const struct chat_list *list = value_list(items);
    *result = list->count ? value_retain(list->items[list->count - 1])
                          : value_undefined("No last item, sequence was empty.", UNDEFINED_MESSAGE);
    value_release(items);
    return 0;
}

FILTER(filter_reverse)
{
    if (bind_arguments(render, node, "reverse", arguments, NULL, 0, NULL) != 0)
        return -1;
    if (input.kind == CHAT_VALUE_STRING) {
        const struct chat_string *string = value_string(input);
        struct string_builder builder;
        builder_init(&builder, &render->heap, 0);
        for (size_t end = string->length; end > 0;) {
            size_t size = utf8_previous_size(string->bytes, end);
            builder_append(&builder, string->bytes + end - size, size);
            end -= size;
        }
        return finish_string(render, node->line, &builder, result);
    }
    chat_value items;
    if (iterate_to_list(render, node->line, input, &items) != 0)
        return -1;
    const struct chat_list *list = value_list(items);
    int status = new_list(render, node->line, list->count, result);
    for (size_t i = list->count; status == 0 && i > 0; i--)
        list_append(*result, value_retain(list->items[i - 1]));
    value_release(items);
    return status;
}

FILTER(filter_items)
{
    if (bind_arguments(render, node, "items", arguments, NULL, 0, NULL) != 0)
        return -1;
    if (input.kind == CHAT_VALUE_UNDEFINED)
        return new_list(render, node->line, 0, result);
    if (input.kind != CHAT_VALUE_OBJECT)
        return render_fail(render, node->line, "Can only get item pairs from a mapping.");
    const struct chat_dict *dict = value_dict(input);
    if (new_list(render, node->line, dict->count, result) != 0)
        return -1;
    for (size_t i = 0; i < dict->count; i++) {
        chat_value pair = value_list_new(&render->heap, CHAT_VALUE_TUPLE, 2);
        if (pair.kind == CHAT_VALUE_INVALID) {
            value_release(*result);
            return render_fail_status(render, node->line, VALUE_NO_MEMORY);
        }
        list_append(pair, value_retain(dict->entries[i].key));
        list_append(pair, value_retain(dict->entries[i].value));
        list_append(*result, pair);
    }
    return 0;
}

FILTER(filter_join)
{
    static const char *const names[] = {"d", "attribute"};
    chat_value values[2], separator, items;
    if (bind_arguments(render, node, "join", arguments, names, 2, values) != 0 ||
        argument_text(render, node->line, values[0], "", &separator) != 0)
        return -1;
    if (iterate_to_list(render, node->line, input, &items) != 0) {
        value_release(separator);
        return -1;
    }
    struct string_builder builder;
    builder_init(&builder, &render->heap, 0);
    const struct chat_list *list = value_list(items);
    int status = 0;
    for (size_t i = 0; i < list->count && status == 0; i++) {
        if (i)
            builder_append(&builder, value_string(separator)->bytes, value_string(separator)->length);
        chat_value item = value_retain(list->items[i]);
        if (values[1].kind != CHAT_VALUE_INVALID && values[1].kind != CHAT_VALUE_NONE) {
            chat_value found;
            status = attribute_path(render, node, item, values[1], value_invalid(), &found);
            value_release(item);
            item = status == 0 ? found : value_invalid();
        }
        if (status == 0 && item.kind != CHAT_VALUE_UNDEFINED) {
            int written = value_write_str(&builder, item);
            if (written != VALUE_OK)
                status = render_fail_status(render, node->line, written);
        }
        value_release(item);
    }
    value_release(items);
    value_release(separator);
    if (status != 0) {
        builder_discard(&builder);
        return -1;
    }
    return finish_string(render, node->line, &builder, result);
}

/* Sorting by precomputed keys. */
struct sort_context {
    const chat_value *keys;
    bool reverse;
    const char *left_type, *right_type;
    uint64_t work;
};

static int compare_keys(void *context, size_t a, size_t b, int *order)
{
    struct sort_context *sort = context;
    int status = value_compare_counted(sort->keys[a], sort->keys[b], order, &sort->work);
    if (status == VALUE_INCOMPARABLE) {
        sort->left_type = value_type_name(sort->keys[a]);
        sort->right_type = value_type_name(sort->keys[b]);
    }
    if (*order == 2)
        *order = 0;
    if (sort->reverse)
        *order = -*order;
    return status;
}

/* The sort key of item: attributes (comma separated for several), folded. */
static int sort_key(struct render *render, const struct expression *node, chat_value item, chat_value attribute,
                    bool case_sensitive, chat_value *key)
{
    chat_value raw;
    if (attribute.kind == CHAT_VALUE_INVALID || attribute.kind == CHAT_VALUE_NONE) {
        raw = value_retain(item);
    } else if (attribute.kind == CHAT_VALUE_STRING && memchr(value_string(attribute)->bytes, ',', value_string(attribute)->length)) {
        chat_value parts, comma;
        if (make_string(render, node->line, ",", 1, &comma) != 0)
            return -1;
        int split = text_split(render, node->line, attribute, comma, -1, false, &parts);
        value_release(comma);
        if (split != 0)
            return -1;
        raw = value_list_new(&render->heap, CHAT_VALUE_TUPLE, value_list(parts)->count);
        for (size_t i = 0; raw.kind != CHAT_VALUE_INVALID && i < value_list(parts)->count; i++) {
            chat_value part, folded;
            if (attribute_path(render, node, item, value_list(parts)->items[i], value_invalid(), &part) != 0) {
                value_release(raw);
                value_release(parts);
                return -1;
            }
            int status = 0;
            if (case_sensitive) {
                folded = part;
            } else {
                status = fold_case(render, node->line, part, &folded);
                value_release(part);
            }
            if (status != 0) {
                value_release(raw);
                value_release(parts);
                return -1;
            }
            list_append(raw, folded);
        }
        value_release(parts);
        if (raw.kind == CHAT_VALUE_INVALID)
            return render_fail_status(render, node->line, VALUE_NO_MEMORY);
        *key = raw;
        return 0;
    } else if (attribute_path(render, node, item, attribute, value_invalid(), &raw) != 0) {
        return -1;
    }
    if (case_sensitive) {
        *key = raw;
        return 0;
    }
    int status = fold_case(render, node->line, raw, key);
    value_release(raw);
    return status;
}

/* Sorts items (a list) by their keys into a new list. */
static int sort_items(struct render *render, const struct expression *node, chat_value items, chat_value *keys,
                      bool reverse, chat_value *result)
{
    size_t count = value_list(items)->count;
    size_t *order = heap_allocate(&render->heap, (count ? count : 1) * sizeof *order);
    if (!order)
        return render_fail_status(render, node->line, VALUE_NO_MEMORY);
    for (size_t i = 0; i < count; i++)
        order[i] = i;
    struct sort_context context = {keys, reverse, "", "", 0};
    int status = sort_elements(order, count, compare_keys, &context, &render->heap);
    if (status == VALUE_OK && !heap_charge(&render->heap, context.work))
        status = VALUE_NO_MEMORY;
    if (status == VALUE_INCOMPARABLE)
        status = render_fail(render, node->line, "'<' not supported between instances of '%s' and '%s'",
                             context.left_type, context.right_type);
    else if (status != VALUE_OK)
        status = render_fail_status(render, node->line, status);
    if (status == 0 && new_list(render, node->line, count, result) == 0) {
        for (size_t i = 0; i < count; i++)
            list_append(*result, value_retain(value_list(items)->items[order[i]]));
    } else {
        status = -1;
    }
    free(order);
    return status;
}

static void release_keys(chat_value *keys, size_t count)
{
    for (size_t i = 0; i < count; i++)
        value_release(keys[i]);
    free(keys);
}

static int compute_keys(struct render *render, const struct expression *node, chat_value items, chat_value attribute,
                        bool case_sensitive, chat_value **keys)
{
    size_t count = value_list(items)->count;
    *keys = heap_allocate(&render->heap, (count ? count : 1) * sizeof **keys);
    if (!*keys)
        return render_fail_status(render, node->line, VALUE_NO_MEMORY);
    for (size_t i = 0; i < count; i++) {
        if (sort_key(render, node, value_list(items)->items[i], attribute, case_sensitive, &(*keys)[i]) != 0) {
            release_keys(*keys, i);
            *keys = NULL;
            return -1;
        }
    }
    return 0;
}

FILTER(filter_sort)
{
    static const char *const names[] = {"reverse", "case_sensitive", "attribute"};
    chat_value values[3], items, *keys;
    if (bind_arguments(render, node, "sort", arguments, names, 3, values) != 0 ||
        iterate_to_list(render, node->line, input, &items) != 0)
        return -1;
    bool reverse = values[0].kind != CHAT_VALUE_INVALID && value_truthy(values[0]);
    bool case_sensitive = values[1].kind != CHAT_VALUE_INVALID && value_truthy(values[1]);
    int status = compute_keys(render, node, items, values[2], case_sensitive, &keys);
    if (status == 0) {
        status = sort_items(render, node, items, keys, reverse, result);
        release_keys(keys, value_list(items)->count);
    }
    value_release(items);
    return status;
}

FILTER(filter_dictsort)
{
    static const char *const names[] = {"case_sensitive", "by", "reverse"};
    chat_value values[3], pairs, *keys;
    static const struct call_arguments none = {0};
    if (bind_arguments(render, node, "dictsort", arguments, names, 3, values) != 0)
        return -1;
    bool case_sensitive = values[0].kind != CHAT_VALUE_INVALID && value_truthy(values[0]);
    bool reverse = values[2].kind != CHAT_VALUE_INVALID && value_truthy(values[2]);
    int64_t position = 0;
    if (values[1].kind != CHAT_VALUE_INVALID) {
        const char *by = values[1].kind == CHAT_VALUE_STRING ? value_string(values[1])->bytes : "";
        if (strcmp(by, "value") == 0)
            position = 1;
        else if (strcmp(by, "key") != 0)
            return render_fail(render, node->line, "You can only sort by either \"key\" or \"value\"");
    }
    if (input.kind != CHAT_VALUE_OBJECT)
        return render_fail(render, node->line, "'%s' object has no attribute 'items'", value_type_name(input));
    if (filter_items(render, node, input, &none, &pairs) != 0)
        return -1;
    int status = compute_keys(render, node, pairs, chat_value_int(position), case_sensitive, &keys);
    if (status == 0) {
        status = sort_items(render, node, pairs, keys, reverse, result);
        release_keys(keys, value_list(pairs)->count);
    }
    value_release(pairs);
    return status;
}

FILTER(filter_unique)
{
    static const char *const names[] = {"case_sensitive", "attribute"};
    chat_value values[2], items, seen;
    if (bind_arguments(render, node, "unique", arguments, names, 2, values) != 0 ||
        iterate_to_list(render, node->line, input, &items) != 0)
        return -1;
    bool case_sensitive = values[0].kind != CHAT_VALUE_INVALID && value_truthy(values[0]);
    seen = value_dict_new(&render->heap, CHAT_VALUE_OBJECT);
    int status = seen.kind == CHAT_VALUE_INVALID ? render_fail_status(render, node->line, VALUE_NO_MEMORY)
                                                 : new_list(render, node->line, 0, result);
    const struct chat_list *list = value_list(items);
    for (size_t i = 0; status == 0 && i < list->count; i++) {
        chat_value key;
        if ((status = sort_key(render, node, list->items[i], values[1], case_sensitive, &key)) != 0)
            break;
        int found_status;
        uint64_t work = 0;
        bool found = dict_find(seen, key, &found_status, &work) != NULL;
        if (render_charge(render, node->line, work) != 0) {
            value_release(key);
            status = -1;
            break;
        }
        if (found_status != VALUE_OK) {
            status = found_status == VALUE_UNHASHABLE
                         ? render_fail(render, node->line, "unhashable type: '%s'", value_type_name(key))
                         : render_fail_status(render, node->line, found_status);
            value_release(key);
            break;
        }
        if (found) {
            value_release(key);
            continue;
        }
        if (dict_set(seen, key, chat_value_none()) != 0 ||
            list_append(*result, value_retain(list->items[i])) != 0)
            status = render_fail_status(render, node->line, VALUE_NO_MEMORY);
    }
    if (status != 0 && seen.kind != CHAT_VALUE_INVALID && result->kind != CHAT_VALUE_INVALID) {
        value_release(*result);
        *result = value_invalid();
    }
    value_release(seen);
    value_release(items);
    return status;
}

static int extreme(struct render *render, const struct expression *node, chat_value input,
                   const struct call_arguments *arguments, const char *name, bool maximum, chat_value *result)
{
    static const char *const names[] = {"case_sensitive", "attribute"};
    chat_value values[2], items;
    if (bind_arguments(render, node, name, arguments, names, 2, values) != 0 ||
        iterate_to_list(render, node->line, input, &items) != 0)
        return -1;
    bool case_sensitive = values[0].kind != CHAT_VALUE_INVALID && value_truthy(values[0]);
    const struct chat_list *list = value_list(items);
    if (list->count == 0) {
        value_release(items);
        *result = value_undefined("No aggregated item, sequence was empty.", UNDEFINED_MESSAGE);
        return 0;
    }
    chat_value best_key = value_invalid();
    size_t best = 0;
    int status = sort_key(render, node, list->items[0], values[1], case_sensitive, &best_key);
    for (size_t i = 1; status == 0 && i < list->count; i++) {
        chat_value key;
        int order;
        if ((status = sort_key(render, node, list->items[i], values[1], case_sensitive, &key)) != 0)
            break;
        uint64_t work = 0;
        int compared = value_compare_counted(key, best_key, &order, &work);
        if (compared == VALUE_OK && !heap_charge(&render->heap, work))
            compared = VALUE_NO_MEMORY;
        if (compared == VALUE_INCOMPARABLE)
            status = render_fail(render, node->line, "'%c' not supported between instances of '%s' and '%s'",
                                 maximum ? '>' : '<', value_type_name(key), value_type_name(best_key));
        else if (compared != VALUE_OK)
            status = render_fail_status(render, node->line, compared);
        else if ((maximum && order == 1) || (!maximum && order == -1)) {
            value_release(best_key);
            best_key = key;
            best = i;
            continue;
        }
        value_release(key);
    }
    if (status == 0) {
        value_release(best_key);
        *result = value_retain(list->items[best]);
    } else if (best_key.kind != CHAT_VALUE_INVALID) {
        value_release(best_key);
    }
    value_release(items);
    return status;
}

FILTER(filter_max)
{
    return extreme(render, node, input, arguments, "max", true, result);
}

FILTER(filter_min)
{
    return extreme(render, node, input, arguments, "min", false, result);
}

FILTER(filter_sum)
{
    static const char *const names[] = {"attribute", "start"};
    chat_value values[2], items;
    if (bind_arguments(render, node, "sum", arguments, names, 2, values) != 0 ||
        iterate_to_list(render, node->line, input, &items) != 0)
        return -1;
    chat_value total = values[1].kind == CHAT_VALUE_INVALID ? chat_value_int(0) : value_retain(values[1]);
    const struct chat_list *list = value_list(items);
    int status = 0;
    for (size_t i = 0; status == 0 && i < list->count; i++) {
        chat_value item = value_retain(list->items[i]), next;
        if (values[0].kind != CHAT_VALUE_INVALID && values[0].kind != CHAT_VALUE_NONE) {
            chat_value found;
            status = attribute_path(render, node, item, values[0], value_invalid(), &found);
            value_release(item);
            if (status != 0)
                break;
            item = found;
        }
        status = binary_operation(render, node->line, OPERATOR_ADD, total, item, &next);
        value_release(item);
        if (status == 0) {
            value_release(total);
            total = next;
        }
    }
    value_release(items);
    if (status != 0) {
        value_release(total);
        return -1;
    }
    *result = total;
    return 0;
}

FILTER(filter_map)
{
    chat_value items;
    if (!value_truthy(input))
        return new_list(render, node->line, 0, result);
    if (iterate_to_list(render, node->line, input, &items) != 0)
        return -1;
    const struct chat_list *list = value_list(items);
    int status = new_list(render, node->line, list->count, result);
    if (status == 0 && arguments->positional_count == 0) {
        chat_value attribute = value_invalid(), fallback = value_invalid();
        for (size_t k = 0; k < arguments->keyword_count && status == 0; k++) {
            const struct keyword_argument *keyword = &arguments->keywords[k];
            if (!keyword->name)
                continue;
            if (keyword->length == 9 && memcmp(keyword->name, "attribute", 9) == 0)
                attribute = keyword->value;
            else if (keyword->length == 7 && memcmp(keyword->name, "default", 7) == 0)
                fallback = keyword->value;
            else
                status = render_fail(render, node->line, "Unexpected keyword argument '%.*s'", (int)keyword->length,
                                     keyword->name);
        }
        if (status == 0 && attribute.kind == CHAT_VALUE_INVALID)
            status = render_fail(render, node->line, "map requires a filter argument");
        if (fallback.kind == CHAT_VALUE_NONE)
            fallback = value_invalid();
        for (size_t i = 0; status == 0 && i < list->count; i++) {
            chat_value mapped;
            status = attribute_path(render, node, list->items[i], attribute, fallback, &mapped);
            if (status == 0)
                status = append(render, node->line, *result, mapped);
        }
    } else if (status == 0) {
        chat_value name = arguments->positional[0];
        const struct filter_entry *filter =
            name.kind == CHAT_VALUE_STRING ? filter_find(value_string(name)->bytes, value_string(name)->length) : NULL;
        if (!filter)
            status = render_fail(render, node->line, "No filter named '%s'.",
                                 name.kind == CHAT_VALUE_STRING ? value_string(name)->bytes : "?");
        struct call_arguments rest = arguments_after(arguments, 1);
        for (size_t i = 0; status == 0 && i < list->count; i++) {
            chat_value mapped;
            status = render_charge_size(render, node->line, list->items[i]);
            if (status == 0)
                status = filter->function(render, node, list->items[i], &rest, &mapped);
            if (status == 0)
                status = append(render, node->line, *result, mapped);
        }
    }
    value_release(items);
    if (status != 0 && result->kind != CHAT_VALUE_INVALID) {
        value_release(*result);
        *result = value_invalid();
    }
    return status;
}

/* select, reject, selectattr, rejectattr. */
static int choose(struct render *render, const struct expression *node, chat_value input,
                  const struct call_arguments *arguments, bool by_attribute, bool keep, chat_value *result)
{
    chat_value items;
    if (!value_truthy(input))
        return new_list(render, node->line, 0, result);
    size_t skip = by_attribute ? 1 : 0;
    if (by_attribute && arguments->positional_count == 0)
        return render_fail(render, node->line, "Missing parameter for attribute name");
    if (iterate_to_list(render, node->line, input, &items) != 0)
        return -1;
    const struct chat_list *list = value_list(items);
    bool has_test = arguments->positional_count > skip;
    struct call_arguments rest = arguments_after(arguments, skip + 1);
    int status = new_list(render, node->line, 0, result);
    for (size_t i = 0; status == 0 && i < list->count; i++) {
        chat_value subject = value_retain(list->items[i]);
        if (by_attribute) {
            chat_value found;
            status = attribute_path(render, node, subject, arguments->positional[0], value_invalid(), &found);
            value_release(subject);
            if (status != 0)
                break;
            subject = found;
        }
        bool holds = false;
        if (has_test)
            status = run_named_test(render, node, arguments->positional[skip], subject, &rest, &holds);
        else
            holds = value_truthy(subject);
        value_release(subject);
        if (status == 0 && holds == keep)
            status = append(render, node->line, *result, value_retain(list->items[i]));
    }
    value_release(items);
    if (status != 0 && result->kind != CHAT_VALUE_INVALID) {
        value_release(*result);
        *result = value_invalid();
    }
    return status;
}

FILTER(filter_select)
{
    return choose(render, node, input, arguments, false, true, result);
}

FILTER(filter_reject)
{
    return choose(render, node, input, arguments, false, false, result);
}

FILTER(filter_selectattr)
{
    return choose(render, node, input, arguments, true, true, result);
}

FILTER(filter_rejectattr)
{
    return choose(render, node, input, arguments, true, false, result);
}

FILTER(filter_batch)
{
    static const char *const names[] = {"linecount", "fill_with"};
    chat_value values[2], items, batch = value_invalid();
    int64_t count;
    if (bind_arguments(render, node, "batch", arguments, names, 2, values) != 0 ||
        argument_int(render, node->line, values[0], "batch", 0, &count) != 0)
        return -1;
    if (values[0].kind == CHAT_VALUE_INVALID)
        return render_fail(render, node->line, "batch() needs a linecount");
    if (iterate_to_list(render, node->line, input, &items) != 0)
        return -1;
    const struct chat_list *list = value_list(items);
    int status = new_list(render, node->line, 0, result);
    for (size_t i = 0; status == 0 && i < list->count; i++) {
        if (batch.kind != CHAT_VALUE_INVALID && (int64_t)value_list(batch)->count == count) {
            status = append(render, node->line, *result, batch);
            batch = value_invalid();
        }
        if (status == 0 && batch.kind == CHAT_VALUE_INVALID)
            status = new_list(render, node->line, 0, &batch);
        if (status == 0)
            status = append(render, node->line, batch, value_retain(list->items[i]));
    }
    if (status == 0 && batch.kind != CHAT_VALUE_INVALID) {
        if (values[1].kind != CHAT_VALUE_INVALID && values[1].kind != CHAT_VALUE_NONE)
            while (status == 0 && (int64_t)value_list(batch)->count < count)
                status = append(render, node->line, batch, value_retain(values[1]));
        if (status == 0)
            status = append(render, node->line, *result, batch);
        else
            value_release(batch);
        batch = value_invalid();
    }
    value_release(batch);
    value_release(items);
    if (status != 0 && result->kind != CHAT_VALUE_INVALID) {
        value_release(*result);
        *result = value_invalid();
    }
    return status;
}

FILTER(filter_slice)
{
    static const char *const names[] = {"slices", "fill_with"};
    chat_value values[2], items;
    int64_t slices;
    if (bind_arguments(render, node, "slice", arguments, names, 2, values) != 0 ||
        argument_int(render, node->line, values[0], "slice", 0, &slices) != 0)
        return -1;
    if (slices <= 0)
        return slices == 0 ? render_fail(render, node->line, "integer division or modulo by zero")
                           : new_list(render, node->line, 0, result);
    if (iterate_to_list(render, node->line, input, &items) != 0)
        return -1;
    const struct chat_list *list = value_list(items);
    int64_t length = (int64_t)list->count, per_slice = length / slices, with_extra = length % slices, offset = 0;
    bool fill = values[1].kind != CHAT_VALUE_INVALID && values[1].kind != CHAT_VALUE_NONE;
    int status = new_list(render, node->line, 0, result);
    for (int64_t number = 0; status == 0 && number < slices; number++) {
        if ((status = render_count_iteration(render, node->line)) != 0)
            break;
        int64_t start = offset + number * per_slice;
        if (number < with_extra)
            offset++;
        int64_t end = offset + (number + 1) * per_slice;
        chat_value piece;
        if ((status = new_list(render, node->line, 0, &piece)) != 0)
            break;
        for (int64_t i = start; status == 0 && i < end && i < length; i++)
            status = append(render, node->line, piece, value_retain(list->items[i]));
        if (status == 0 && fill && number >= with_extra)
            status = append(render, node->line, piece, value_retain(values[1]));
        if (status == 0)
            status = append(render, node->line, *result, piece);
        else
            value_release(piece);
    }
    value_release(items);
    if (status != 0 && result->kind != CHAT_VALUE_INVALID) {
        value_release(*result);
        *result = value_invalid();
    }
    return status;
}
