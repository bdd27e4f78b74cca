/* Memory pages: the system's page size, and taking a region's pages now
 * rather than at first use. */
#ifndef BMOE_BASE_PAGES_H
#define BMOE_BASE_PAGES_H

#include <stddef.h>

/* The page size (4096 when the system does not say). */
size_t page_bytes(void);

/* Writes a zero to the first byte of every page of [memory, memory + bytes),
 * memory that is still all zeros (fresh anonymous or calloc'd), so that the
 * process holds those pages from now on: a budget counts memory really
 * taken, and a later sizing of free memory sees it. */
void pages_touch(void *memory, size_t bytes);

#endif
