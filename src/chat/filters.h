/* Helpers shared by the filter, test and method implementations, and the
 * filter functions of each group (filters_text.c, filters_sequence.c). */
#ifndef BMOE_CHAT_FILTERS_H
#define BMOE_CHAT_FILTERS_H

#include "chat/render.h"

/* str(value) as a string value, "" for undefined (Jinja2's soft_str). */
int to_text(struct render *render, int line, chat_value value, chat_value *text);
/* An integer argument: invalid gives fallback; bools count; other types fail. */
int argument_int(struct render *render, int line, chat_value value, const char *what, int64_t fallback,
                 int64_t *result);
/* A string argument (as str() of it); invalid gives fallback text. */
int argument_text(struct render *render, int line, chat_value value, const char *fallback, chat_value *result);
/* Jinja2's attrgetter: follows "a.b.0" item by item (digits index lists);
 * an undefined result becomes fallback when fallback is valid. */
int attribute_path(struct render *render, const struct expression *node, chat_value item, chat_value path,
                   chat_value fallback, chat_value *result);
/* Runs the test called name with extra arguments. */
int run_named_test(struct render *render, const struct expression *node, chat_value name, chat_value value,
                   const struct call_arguments *extra, bool *result);
/* Lower-cases strings (for case-insensitive sorting), other values as they are. */
int fold_case(struct render *render, int line, chat_value value, chat_value *result);
/* A list of the arguments' positional values after the first skip ones. */
struct call_arguments arguments_after(const struct call_arguments *arguments, size_t skip);

#define FILTER(name)                                                                                           \
    int name(struct render *render, const struct expression *node, chat_value input,                          \
             const struct call_arguments *arguments, chat_value *result)

FILTER(filter_capitalize);
FILTER(filter_center);
FILTER(filter_escape);
FILTER(filter_forceescape);
FILTER(filter_format);
FILTER(filter_indent);
FILTER(filter_lower);
FILTER(filter_replace);
FILTER(filter_safe);
FILTER(filter_string);
FILTER(filter_title);
FILTER(filter_trim);
FILTER(filter_truncate);
FILTER(filter_upper);
FILTER(filter_wordcount);
FILTER(filter_tojson);
FILTER(filter_striptags);

FILTER(filter_batch);
FILTER(filter_dictsort);
FILTER(filter_first);
FILTER(filter_items);
FILTER(filter_join);
FILTER(filter_last);
FILTER(filter_length);
FILTER(filter_list);
FILTER(filter_map);
FILTER(filter_max);
FILTER(filter_min);
FILTER(filter_reject);
FILTER(filter_rejectattr);
FILTER(filter_reverse);
FILTER(filter_select);
FILTER(filter_selectattr);
FILTER(filter_slice);
FILTER(filter_sort);
FILTER(filter_sum);
FILTER(filter_unique);

#endif
