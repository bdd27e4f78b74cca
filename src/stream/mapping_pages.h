/* The page size behind a resident model's file mapping. Weights read
 * through the mapping decode faster from 2 MiB mappings than from 4 KiB ones
 * (a TLB miss every 4 KiB over gigabytes a token). The kernel maps a range of
 * a file with 2 MiB entries only where its page cache holds that range in 2
 * MiB folios, which the file system must support (ext4 since Linux 6.16, xfs
 * earlier), and which depends on how the bytes were first read: sequentially,
 * or through a mapping that asks for huge pages, they get large folios; read
 * page by page (a MADV_RANDOM mapping, small reads), they keep 4 KiB folios
 * for as long as they stay cached. mapping_pages_promote re-reads such a
 * range once so that it gets large folios, after checking on one 2 MiB
 * window that the file system gives them. Linux only; elsewhere every query
 * answers "unknown" and nothing is re-read. Owns nothing. */
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

/* Asks for huge pages over the ranges (MADV_HUGEPAGE), maps them now
 * (MADV_POPULATE_READ), and when less than half of them is mapped with 2 MiB
 * entries and a probe shows the file system gives large folios, maps them
 * afresh at the same addresses, drops their page cache (only pages no process
 * maps; the file is never written) and maps them again. Load time only: no
 * thread may read the ranges meanwhile. Returns 0; 1 with err when the
 * kernel refused to map pages now (a warning: they fault in later); -1 with
 * err when a range could not be mapped afresh (it may be unmapped: the model
 * must not be used). */
int mapping_pages_promote(const mapped_file *files, uint32_t n_files, const mapped_range *ranges, int n_ranges,
                          bmoe_load_progress progress, void *progress_user, bmoe_error *err);

/* Bytes of the mappings' ranges mapped with 2 MiB entries (FilePmdMapped of
 * /proc/self/smaps over the mappings the ranges lie in, counted per mapping
 * region in proportion to its overlap); -1 when unknown. */
int64_t mapping_pages_huge_bytes(const mapped_file *files, const mapped_range *ranges, int n_ranges);

#endif
