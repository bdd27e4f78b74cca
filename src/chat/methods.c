/* The method table (which names each type has, as Python's str, list,
 * tuple and dict do) and the list, dict and loop methods. As in Jinja2's
 * sandbox, dicts cannot be modified; lists can, but only those the template
 * made itself (append/extend/insert/pop/remove/reverse/sort/clear), so a
 * render never changes the caller's values. */
#include "chat/methods.h"

#include <stdlib.h>
#include <string.h>

#include "chat/value_sort.h"

enum receiver {
    RECEIVER_STRING,
    RECEIVER_LIST,   /* lists only */
    RECEIVER_SEQUENCE, /* lists, tuples and ranges */
    RECEIVER_DICT,
    RECEIVER_LOOP,
};

struct method_entry {
    const char *name;
    size_t length;
    unsigned char receiver;
    method_function function;
};

#define ENTRY(name, receiver, function) {name, sizeof name - 1, receiver, function}

static int refuse_mutation(struct render *render, const struct expression *node, chat_value receiver,
                           const char *name)
{
    return render_fail(render, node->line, "access to attribute '%s' of '%s' object is unsafe.", name,
                       value_type_name(receiver));
}

/* Lists a template made may change; the caller's may not. */
static int mutable_list(struct render *render, const struct expression *node, chat_value receiver, const char *name)
{
    if (value_list(receiver)->base.heap == NULL)
        return render_fail(render, node->line, "cannot %s: the list belongs to the render's caller", name);
    return 0;
}

static METHOD(list_method_append)
{
    static const char *const names[] = {"object"};
    chat_value item;
    if (mutable_list(render, node, receiver, "append") != 0 ||
        bind_arguments(render, node, "append", arguments, names, 1, &item) != 0)
        return -1;
    if (item.kind == CHAT_VALUE_INVALID)
        return render_fail(render, node->line, "append() takes exactly one argument (0 given)");
    if (list_append(receiver, value_retain(item)) != 0)
        return render_fail_status(render, node->line, VALUE_NO_MEMORY);
    *result = chat_value_none();
    return 0;
}

static METHOD(list_method_extend)
{
    static const char *const names[] = {"iterable"};
    chat_value iterable, items;
    if (mutable_list(render, node, receiver, "extend") != 0 ||
        bind_arguments(render, node, "extend", arguments, names, 1, &iterable) != 0)
        return -1;
    if (iterable.kind == CHAT_VALUE_INVALID)
        return render_fail(render, node->line, "extend() takes exactly one argument (0 given)");
    if (iterate_to_list(render, node->line, iterable, &items) != 0)
        return -1;
    size_t count = value_list(items)->count;
    int status = 0;
    for (size_t i = 0; i < count && status == 0; i++)
        if (list_append(receiver, value_retain(value_list(items)->items[i])) != 0)
            status = render_fail_status(render, node->line, VALUE_NO_MEMORY);
    value_release(items);
    *result = chat_value_none();
    return status;
}

static int64_t clamp_insert(int64_t index, size_t count)
{
    if (index < 0) {
        index += (int64_t)count;
        if (index < 0)
            index = 0;
    }
    return index > (int64_t)count ? (int64_t)count : index;
}

static METHOD(list_method_insert)
{
    static const char *const names[] = {"index", "object"};
    chat_value values[2];
    int64_t index;
    if (mutable_list(render, node, receiver, "insert") != 0 ||
        bind_arguments(render, node, "insert", arguments, names, 2, values) != 0 ||
        argument_int(render, node->line, values[0], "insert", 0, &index) != 0)
        return -1;
    if (values[1].kind == CHAT_VALUE_INVALID)
        return render_fail(render, node->line, "insert expected 2 arguments");
    if (list_append(receiver, value_retain(values[1])) != 0)
        return render_fail_status(render, node->line, VALUE_NO_MEMORY);
    struct chat_list *list = value_list(receiver);
    size_t at = (size_t)clamp_insert(index, list->count - 1);
    chat_value item = list->items[list->count - 1];
    memmove(list->items + at + 1, list->items + at, (list->count - 1 - at) * sizeof *list->items);
    list->items[at] = item;
    *result = chat_value_none();
    return 0;
}

static METHOD(list_method_pop)
{
    static const char *const names[] = {"index"};
    chat_value value;
    int64_t index;
    if (mutable_list(render, node, receiver, "pop") != 0 ||
        bind_arguments(render, node, "pop", arguments, names, 1, &value) != 0 ||
        argument_int(render, node->line, value, "pop", -1, &index) != 0)
        return -1;
    struct chat_list *list = value_list(receiver);
    if (list->count == 0)
        return render_fail(render, node->line, "pop from empty list");
    if (index < 0)
        index += (int64_t)list->count;
    if (index < 0 || index >= (int64_t)list->count)
        return render_fail(render, node->line, "pop index out of range");
    *result = list->items[index];
    memmove(list->items + index, list->items + index + 1, (list->count - (size_t)index - 1) * sizeof *list->items);
    list->count--;
    return 0;
}

static long find_in_list(struct render *render, int line, chat_value receiver, chat_value item, int *status)
{
    size_t count = sequence_count(receiver);
    uint64_t work = 0;
    *status = 0;
    for (size_t i = 0; i < count; i++) {
        chat_value element = sequence_item(receiver, i);
        int equal = value_equal_counted(element, item, &work);
        value_release(element);
        if (equal < 0) {
            *status = render_fail_status(render, line, equal);
            return -1;
        }
        if (equal) {
            *status = render_charge(render, line, work);
            return *status == 0 ? (long)i : -1;
        }
    }
    *status = render_charge(render, line, work);
    return -1;
}

static METHOD(list_method_remove)
{
    static const char *const names[] = {"value"};
    chat_value item;
    int status;
    if (mutable_list(render, node, receiver, "remove") != 0 ||
        bind_arguments(render, node, "remove", arguments, names, 1, &item) != 0)
        return -1;
    long index = find_in_list(render, node->line, receiver, item, &status);
    if (status != 0)
        return -1;
    if (index < 0)
        return render_fail(render, node->line, "list.remove(x): x not in list");
    struct chat_list *list = value_list(receiver);
    value_release(list->items[index]);
    memmove(list->items + index, list->items + index + 1, (list->count - (size_t)index - 1) * sizeof *list->items);
    list->count--;
    *result = chat_value_none();
    return 0;
}

static METHOD(list_method_reverse)
{
    if (mutable_list(render, node, receiver, "reverse") != 0 ||
        bind_arguments(render, node, "reverse", arguments, NULL, 0, NULL) != 0)
        return -1;
    struct chat_list *list = value_list(receiver);
    for (size_t i = 0, j = list->count; i + 1 < j; i++, j--) {
        chat_value swap = list->items[i];
        list->items[i] = list->items[j - 1];
        list->items[j - 1] = swap;
    }
    *result = chat_value_none();
    return 0;
}

struct list_sort {
    const chat_value *items;
    bool reverse;
    const char *left_type, *right_type;
    uint64_t work;
};

static int compare_items(void *context, size_t a, size_t b, int *order)
{
    struct list_sort *sort = context;
    int status = value_compare_counted(sort->items[a], sort->items[b], order, &sort->work);
    if (status == VALUE_INCOMPARABLE) {
        sort->left_type = value_type_name(sort->items[a]);
        sort->right_type = value_type_name(sort->items[b]);
    }
    if (*order == 2)
        *order = 0;
    if (sort->reverse)
        *order = -*order;
    return status;
}

static METHOD(list_method_sort)
{
    static const char *const names[] = {"reverse"};
    chat_value reverse;
    if (mutable_list(render, node, receiver, "sort") != 0 ||
        bind_arguments(render, node, "sort", arguments, names, 1, &reverse) != 0)
        return -1;
    struct chat_list *list = value_list(receiver);
    size_t *order = heap_allocate(&render->heap, (list->count ? list->count : 1) * sizeof *order);
    chat_value *sorted = heap_allocate(&render->heap, (list->count ? list->count : 1) * sizeof *sorted);
    if (!order || !sorted) {
        free(order);
        free(sorted);
        return render_fail_status(render, node->line, VALUE_NO_MEMORY);
    }
    for (size_t i = 0; i < list->count; i++)
        order[i] = i;
    struct list_sort context = {list->items, reverse.kind != CHAT_VALUE_INVALID && value_truthy(reverse), "", "", 0};
    int status = sort_elements(order, list->count, compare_items, &context, &render->heap);
    if (status == VALUE_OK && !heap_charge(&render->heap, context.work))
        status = VALUE_NO_MEMORY;
    if (status == VALUE_OK) {
        for (size_t i = 0; i < list->count; i++)
            sorted[i] = list->items[order[i]];
        memcpy(list->items, sorted, list->count * sizeof *sorted);
        *result = chat_value_none();
    }
    free(order);
    free(sorted);
    if (status == VALUE_INCOMPARABLE)
        return render_fail(render, node->line, "'<' not supported between instances of '%s' and '%s'",
                           context.left_type, context.right_type);
    return status == VALUE_OK ? 0 : render_fail_status(render, node->line, status);
}

static METHOD(list_method_clear)
{
    if (mutable_list(render, node, receiver, "clear") != 0 ||
        bind_arguments(render, node, "clear", arguments, NULL, 0, NULL) != 0)
        return -1;
    struct chat_list *list = value_list(receiver);
    while (list->count)
        value_release(list->items[--list->count]);
    *result = chat_value_none();
    return 0;
}

static METHOD(list_method_copy)
{
    if (bind_arguments(render, node, "copy", arguments, NULL, 0, NULL) != 0)
        return -1;
    const struct chat_list *list = value_list(receiver);
    *result = value_list_new(&render->heap, CHAT_VALUE_ARRAY, list->count);
    if (result->kind == CHAT_VALUE_INVALID)
        return render_fail_status(render, node->line, VALUE_NO_MEMORY);
    for (size_t i = 0; i < list->count; i++)
        list_append(*result, value_retain(list->items[i]));
    return 0;
}

static METHOD(sequence_count_method)
{
    static const char *const names[] = {"value"};
    chat_value item;
    if (bind_arguments(render, node, "count", arguments, names, 1, &item) != 0)
        return -1;
    size_t count = sequence_count(receiver);
    uint64_t work = 0;
    int64_t matches = 0;
    for (size_t i = 0; i < count; i++) {
        chat_value element = sequence_item(receiver, i);
        int equal = value_equal_counted(element, item, &work);
        value_release(element);
        if (equal < 0)
            return render_fail_status(render, node->line, equal);
        matches += equal;
    }
    *result = chat_value_int(matches);
    return render_charge(render, node->line, work);
}

static METHOD(sequence_index)
{
    static const char *const names[] = {"value"};
    chat_value item;
    int status;
    if (bind_arguments(render, node, "index", arguments, names, 1, &item) != 0)
        return -1;
    long index = find_in_list(render, node->line, receiver, item, &status);
    if (status != 0)
        return -1;
    if (index < 0)
        return render_fail(render, node->line, "value is not in %s", value_type_name(receiver));
    *result = chat_value_int(index);
    return 0;
}

static METHOD(dict_get)
{
    static const char *const names[] = {"key", "default"};
    chat_value values[2];
    if (bind_arguments(render, node, "get", arguments, names, 2, values) != 0)
        return -1;
    if (values[0].kind == CHAT_VALUE_INVALID)
        return render_fail(render, node->line, "get expected at least 1 argument, got 0");
    int status;
    uint64_t work = 0;
    const chat_value *found = dict_find(receiver, values[0], &status, &work);
    if (render_charge(render, node->line, work) != 0)
        return -1;
    if (status == VALUE_UNHASHABLE)
        return render_fail(render, node->line, "unhashable type: '%s'", value_type_name(values[0]));
    if (status != VALUE_OK)
        return render_fail_status(render, node->line, status);
    *result = found ? value_retain(*found) : values[1].kind == CHAT_VALUE_INVALID ? chat_value_none()
                                                                                 : value_retain(values[1]);
    return 0;
}

static METHOD(dict_items)
{
    return filter_items(render, node, receiver, arguments, result);
}

static int dict_column(struct render *render, const struct expression *node, chat_value receiver,
                       const struct call_arguments *arguments, const char *name, bool keys, chat_value *result)
{
    if (bind_arguments(render, node, name, arguments, NULL, 0, NULL) != 0)
        return -1;
    const struct chat_dict *dict = value_dict(receiver);
    *result = value_list_new(&render->heap, CHAT_VALUE_ARRAY, dict->count);
    if (result->kind == CHAT_VALUE_INVALID)
        return render_fail_status(render, node->line, VALUE_NO_MEMORY);
    for (size_t i = 0; i < dict->count; i++)
        list_append(*result, value_retain(keys ? dict->entries[i].key : dict->entries[i].value));
    return 0;
}

static METHOD(dict_keys)
{
    return dict_column(render, node, receiver, arguments, "keys", true, result);
}

static METHOD(dict_values)
{
    return dict_column(render, node, receiver, arguments, "values", false, result);
}

static METHOD(dict_copy)
{
    if (bind_arguments(render, node, "copy", arguments, NULL, 0, NULL) != 0)
        return -1;
    const struct chat_dict *dict = value_dict(receiver);
    *result = value_dict_new(&render->heap, CHAT_VALUE_OBJECT);
    for (size_t i = 0; result->kind != CHAT_VALUE_INVALID && i < dict->count; i++) {
        if (dict_set(*result, value_retain(dict->entries[i].key), value_retain(dict->entries[i].value)) != 0) {
            value_release(*result);
            *result = value_invalid();
        }
    }
    return result->kind == CHAT_VALUE_INVALID ? render_fail_status(render, node->line, VALUE_NO_MEMORY) : 0;
}

#define REFUSED(function, name)                                                                                \
    static METHOD(function)                                                                                    \
    {                                                                                                          \
        (void)arguments;                                                                                       \
        (void)result;                                                                                          \
        return refuse_mutation(render, node, receiver, name);                                                  \
    }

REFUSED(dict_clear, "clear")
REFUSED(dict_pop, "pop")
REFUSED(dict_popitem, "popitem")
REFUSED(dict_setdefault, "setdefault")
REFUSED(dict_update, "update")

static METHOD(loop_cycle)
{
    const struct chat_loop *loop = (const struct chat_loop *)receiver.as.object;
    if (arguments->positional_count == 0)
        return render_fail(render, node->line, "no items for cycling given");
    *result = value_retain(arguments->positional[loop->index % arguments->positional_count]);
    return 0;
}

static METHOD(loop_changed)
{
    struct chat_loop *loop = (struct chat_loop *)receiver.as.object;
    chat_value now = value_list_new(&render->heap, CHAT_VALUE_TUPLE, arguments->positional_count);
    if (now.kind == CHAT_VALUE_INVALID)
        return render_fail_status(render, node->line, VALUE_NO_MEMORY);
    for (size_t i = 0; i < arguments->positional_count; i++)
        list_append(now, value_retain(arguments->positional[i]));
    int equal = loop->changed_seen ? value_equal(now, loop->changed_last) : 0;
    if (equal < 0) {
        value_release(now);
        return render_fail_status(render, node->line, equal);
    }
    value_release(loop->changed_last);
    loop->changed_last = now;
    loop->changed_seen = true;
    *result = chat_value_bool(!equal);
    return 0;
}

static const struct method_entry methods[] = {
    ENTRY("capitalize", RECEIVER_STRING, string_capitalize),
    ENTRY("casefold", RECEIVER_STRING, string_casefold),
    ENTRY("center", RECEIVER_STRING, string_center),
    ENTRY("count", RECEIVER_STRING, string_count),
    ENTRY("endswith", RECEIVER_STRING, string_endswith),
    ENTRY("find", RECEIVER_STRING, string_find),
    ENTRY("format", RECEIVER_STRING, string_format),
    ENTRY("index", RECEIVER_STRING, string_index),
    ENTRY("isalnum", RECEIVER_STRING, string_isalnum),
    ENTRY("isalpha", RECEIVER_STRING, string_isalpha),
    ENTRY("isdecimal", RECEIVER_STRING, string_isdigit),
    ENTRY("isdigit", RECEIVER_STRING, string_isdigit),
    ENTRY("islower", RECEIVER_STRING, string_islower),
    ENTRY("isnumeric", RECEIVER_STRING, string_isdigit),
    ENTRY("isspace", RECEIVER_STRING, string_isspace),
    ENTRY("istitle", RECEIVER_STRING, string_istitle),
    ENTRY("isupper", RECEIVER_STRING, string_isupper),
    ENTRY("join", RECEIVER_STRING, string_join),
    ENTRY("ljust", RECEIVER_STRING, string_ljust),
    ENTRY("lower", RECEIVER_STRING, string_lower),
    ENTRY("lstrip", RECEIVER_STRING, string_lstrip),
    ENTRY("partition", RECEIVER_STRING, string_partition),
    ENTRY("removeprefix", RECEIVER_STRING, string_removeprefix),
    ENTRY("removesuffix", RECEIVER_STRING, string_removesuffix),
    ENTRY("replace", RECEIVER_STRING, string_replace),
    ENTRY("rfind", RECEIVER_STRING, string_rfind),
    ENTRY("rindex", RECEIVER_STRING, string_rindex),
    ENTRY("rjust", RECEIVER_STRING, string_rjust),
    ENTRY("rpartition", RECEIVER_STRING, string_rpartition),
    ENTRY("rsplit", RECEIVER_STRING, string_rsplit),
    ENTRY("rstrip", RECEIVER_STRING, string_rstrip),
    ENTRY("split", RECEIVER_STRING, string_split),
    ENTRY("splitlines", RECEIVER_STRING, string_splitlines),
    ENTRY("startswith", RECEIVER_STRING, string_startswith),
    ENTRY("strip", RECEIVER_STRING, string_strip),
    ENTRY("swapcase", RECEIVER_STRING, string_swapcase),
    ENTRY("title", RECEIVER_STRING, string_title),
    ENTRY("upper", RECEIVER_STRING, string_upper),
    ENTRY("zfill", RECEIVER_STRING, string_zfill),
    ENTRY("append", RECEIVER_LIST, list_method_append),
    ENTRY("clear", RECEIVER_LIST, list_method_clear),
    ENTRY("copy", RECEIVER_LIST, list_method_copy),
    ENTRY("extend", RECEIVER_LIST, list_method_extend),
    ENTRY("insert", RECEIVER_LIST, list_method_insert),
    ENTRY("pop", RECEIVER_LIST, list_method_pop),
    ENTRY("remove", RECEIVER_LIST, list_method_remove),
    ENTRY("reverse", RECEIVER_LIST, list_method_reverse),
    ENTRY("sort", RECEIVER_LIST, list_method_sort),
    ENTRY("count", RECEIVER_SEQUENCE, sequence_count_method),
    ENTRY("index", RECEIVER_SEQUENCE, sequence_index),
    ENTRY("clear", RECEIVER_DICT, dict_clear),
    ENTRY("copy", RECEIVER_DICT, dict_copy),
    ENTRY("get", RECEIVER_DICT, dict_get),
    ENTRY("items", RECEIVER_DICT, dict_items),
    ENTRY("keys", RECEIVER_DICT, dict_keys),
    ENTRY("pop", RECEIVER_DICT, dict_pop),
    ENTRY("popitem", RECEIVER_DICT, dict_popitem),
    ENTRY("setdefault", RECEIVER_DICT, dict_setdefault),
    ENTRY("update", RECEIVER_DICT, dict_update),
    ENTRY("values", RECEIVER_DICT, dict_values),
    ENTRY("cycle", RECEIVER_LOOP, loop_cycle),
    ENTRY("changed", RECEIVER_LOOP, loop_changed),
};

static bool receives(unsigned char receiver, chat_value value)
{
    switch (receiver) {
    case RECEIVER_STRING: return value.kind == CHAT_VALUE_STRING;
    case RECEIVER_LIST: return value.kind == CHAT_VALUE_ARRAY;
    case RECEIVER_SEQUENCE: return value_is_list_like(value) || value.kind == CHAT_VALUE_RANGE;
    case RECEIVER_DICT: return value.kind == CHAT_VALUE_OBJECT;
    case RECEIVER_LOOP: return value.kind == CHAT_VALUE_LOOP;
    default: return false;
    }
}

int method_find(chat_value receiver, const char *name, size_t length)
{
    /* Attribute lookups ask here first, so most calls must fail fast. */
    switch (receiver.kind) {
    case CHAT_VALUE_STRING:
    case CHAT_VALUE_ARRAY:
    case CHAT_VALUE_TUPLE:
    case CHAT_VALUE_RANGE:
    case CHAT_VALUE_OBJECT:
    case CHAT_VALUE_LOOP: break;
    default: return -1;
    }
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (methods[i].length == length && methods[i].name[0] == name[0] && receives(methods[i].receiver, receiver) &&
            memcmp(methods[i].name, name, length) == 0)
            return (int)i;
    return -1;
}

int method_call(struct render *render, const struct expression *node, int method, chat_value receiver,
                const struct call_arguments *arguments, chat_value *result)
{
    if (method < 0 || (size_t)method >= sizeof methods / sizeof methods[0] ||
        !receives(methods[method].receiver, receiver))
        return render_fail(render, node->line, "internal error: bad method");
    /* Most methods walk their receiver: charge for it up front. */
    if (render_charge_size(render, node->line, receiver) != 0)
        return -1;
    return methods[method].function(render, node, receiver, arguments, result);
}

const char *method_name(int method)
{
    if (method < 0 || (size_t)method >= sizeof methods / sizeof methods[0])
        return "?";
    return methods[method].name;
}
