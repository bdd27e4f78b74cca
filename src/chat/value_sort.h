/* A stable merge sort over element numbers with a comparison that can fail
 * (Python raises on '<' between a str and an int); shared by the sort,
 * dictsort, min/max and tojson(sort_keys=true) code. */
#ifndef BMOE_CHAT_VALUE_SORT_H
#define BMOE_CHAT_VALUE_SORT_H

#include <stddef.h>

#include "chat/value.h"

/* *order < 0 when element a goes first; returns VALUE_OK or a failure status. */
typedef int (*element_order)(void *context, size_t a, size_t b, int *order);

/* Sorts order[0..count) (element numbers); VALUE_OK or the first failure. */
int sort_elements(size_t *order, size_t count, element_order compare, void *context, struct value_heap *heap);

#endif
