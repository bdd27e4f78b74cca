/* Memory pages (pages.h). */
#include "pages.h"

#include <stdint.h>
#include <unistd.h>

size_t page_bytes(void)
{
    long page = sysconf(_SC_PAGESIZE);
    return page > 0 ? (size_t)page : 4096;
}

void pages_touch(void *memory, size_t bytes)
{
    size_t step = page_bytes();
    for (size_t offset = 0; offset < bytes; offset += step)
        ((volatile uint8_t *)memory)[offset] = 0;
}
