/* Bottom-up merge sort: stable, O(n log n) comparisons, one scratch array. */
#include "chat/value_sort.h"

#include <stdlib.h>
#include <string.h>

int sort_elements(size_t *order, size_t count, element_order compare, void *context, struct value_heap *heap)
{
    if (count < 2)
        return VALUE_OK;
    size_t *scratch = heap_allocate(heap, count * sizeof *scratch);
    if (!scratch)
        return VALUE_NO_MEMORY;
    size_t *from = order, *to = scratch;
    for (size_t width = 1; width < count; width *= 2) {
        for (size_t left = 0; left < count; left += 2 * width) {
            size_t middle = left + width < count ? left + width : count;
            size_t right = middle + width < count ? middle + width : count;
            size_t i = left, j = middle, k = left;
            while (i < middle && j < right) {
                int result;
                int status = compare(context, from[j], from[i], &result);
                if (status != VALUE_OK) {
                    free(scratch);
                    return status;
                }
                /* Take from the right only when strictly smaller: stability. */
                to[k++] = result < 0 ? from[j++] : from[i++];
            }
            while (i < middle)
                to[k++] = from[i++];
            while (j < right)
                to[k++] = from[j++];
        }
        size_t *swap = from;
        from = to;
        to = swap;
    }
    if (from != order)
        memcpy(order, from, count * sizeof *order);
    free(scratch);
    return VALUE_OK;
}
