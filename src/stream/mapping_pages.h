/* The page size behind a resident model's file mapping. Weights read
 * through the mapping decode faster from 2 MiB mappings than from 4 KiB ones
 * (a TLB miss every 4 KiB over gigabytes a token). The kernel maps a range of
 * a file with 2 MiB entries only where its page cache holds that range in 2
 * MiB folios, which the file system must support (ext4 since Linux 6.16, xfs
 * earlier), and which depends on how the bytes were first read: sequentially,
 * or through a mapping that asks for huge pages, they get large folios; read
 * page by page (a MADV_RANDOM mapping, small reads), they keep 4 KiB folios
 * for as long as they stay cached. mapping_pages_promote re-reads the 2 MiB
 * windows of such a range that are not mapped with 2 MiB entries, once,
 * after checking on the first one that the file system gives large folios.
 * Which windows those are, the kernel tells through PAGEMAP_SCAN (Linux 6.7);
 * where it cannot, every query answers "unknown" and nothing is re-read.
 * Owns nothing. */
#ifndef BMOE_STREAM_MAPPING_PAGES_H
#define BMOE_STREAM_MAPPING_PAGES_H

#include <stdint.h>

#include "bmoe.h"

/* One shard's mapping (MAP_SHARED, read-only, of the whole file), the file
 * it maps and its path (for messages). */
typedef struct mapped_file {
    const uint8_t *base;
    uint64_t size;
    int fd;
    const char *path;
} mapped_file;

/* A range of a mapped file that is read through the mapping. */
typedef struct mapped_range {
    uint32_t file;
    uint64_t begin, end;
} mapped_range;

/* Maps the range's pages now (MADV_POPULATE_READ, page-rounded), reading
 * from disk what is not in the page cache, so that the first tokens pay no
 * page faults. Returns 0 (also for a range of no mapping), or -1 with err
 * when the kernel refused. */
int mapping_pages_populate(const mapped_file *files, uint32_t n_files, const mapped_range *range, bmoe_error *err);

/* Asks for huge pages over the ranges (MADV_HUGEPAGE) and maps them now
 * (MADV_POPULATE_READ). Then each 2 MiB window of them that is not mapped
 * with a 2 MiB entry is mapped afresh at the same address, its page cache
 * dropped (only pages no process maps; the file is never written) and mapped
 * again; the first such window is the probe: if it does not come back mapped
 * huge, nothing more is re-read. Load time only: no
 * thread may read the ranges meanwhile. Returns 0; 1 with err when the
 * kernel refused to map pages now (a warning: they fault in later); -1 with
 * err when a range could not be mapped afresh (it may be unmapped: the model
 * must not be used). */
int mapping_pages_promote(const mapped_file *files, uint32_t n_files, const mapped_range *ranges, int n_ranges,
                          bmoe_load_progress progress, void *progress_user, bmoe_error *err);

/* Bytes of the ranges mapped with 2 MiB entries; -1 when unknown. */
int64_t mapping_pages_huge_bytes(const mapped_file *files, uint32_t n_files, const mapped_range *ranges,
                                 int n_ranges);

#endif
