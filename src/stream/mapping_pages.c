#define _GNU_SOURCE /* MADV_HUGEPAGE, posix_fadvise */
#include "mapping_pages.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../base/error.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14 */
#endif

#define HUGE_PAGE ((uint64_t)2 * 1024 * 1024)

/* The range's bytes in the address space, page-rounded outward, or widened
 * to the 2 MiB windows around it (clamped to the mapping). */
static void range_span(const mapped_file *file, const mapped_range *range, uint64_t unit, uintptr_t *begin,
                       uintptr_t *end)
{
    uintptr_t base = (uintptr_t)file->base;
    uint64_t stop = range->end < file->size ? range->end : file->size;
    uintptr_t first = (base + range->begin) & ~(uintptr_t)(unit - 1);
    uintptr_t last = (base + stop + unit - 1) & ~(uintptr_t)(unit - 1);
    *begin = first < base ? base : first;
    *end = last > base + file->size ? base + file->size : last;
}

static uint64_t page_size(void)
{
    long page = sysconf(_SC_PAGESIZE);
    return page > 0 ? (uint64_t)page : 4096;
}

#ifdef __linux__
/* Calls visit(user, start, end, file_pmd_bytes) for each mapping region of
 * the process. Returns false when /proc/self/smaps cannot be read. */
static bool each_region(void (*visit)(void *user, uintptr_t start, uintptr_t end, uint64_t pmd_bytes), void *user)
{
    FILE *smaps = fopen("/proc/self/smaps", "r");
    if (!smaps)
        return false;
    char line[512];
    uintptr_t start = 0, end = 0;
    bool in_region = false, seen_field = false;
    while (fgets(line, sizeof line, smaps)) {
        uintptr_t a, b;
        uint64_t kib;
        char space;
        if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR "%c", &a, &b, &space) == 3 && space == ' ') {
            start = a;
            end = b;
            in_region = true;
        } else if (in_region && sscanf(line, "FilePmdMapped: %" SCNu64 " kB", &kib) == 1) {
            visit(user, start, end, kib * 1024);
            seen_field = true;
            in_region = false;
        }
    }
    fclose(smaps);
    return seen_field;
}
#endif

typedef struct huge_count {
    const mapped_file *files;
    const mapped_range *ranges;
    int n_ranges;
    double bytes;
} huge_count;

static void count_region(void *user, uintptr_t start, uintptr_t end, uint64_t pmd_bytes)
{
    huge_count *count = user;
    if (pmd_bytes == 0 || end <= start)
        return;
    for (int i = 0; i < count->n_ranges; i++) {
        uintptr_t begin = (uintptr_t)count->files[count->ranges[i].file].base + count->ranges[i].begin;
        uintptr_t stop = (uintptr_t)count->files[count->ranges[i].file].base + count->ranges[i].end;
        uintptr_t low = begin > start ? begin : start, high = stop < end ? stop : end;
        if (high > low)
            count->bytes += (double)pmd_bytes * (double)(high - low) / (double)(end - start);
    }
}

int64_t mapping_pages_huge_bytes(const mapped_file *files, const mapped_range *ranges, int n_ranges)
{
#ifdef __linux__
    huge_count count = {files, ranges, n_ranges, 0.0};
    if (!each_region(count_region, &count))
        return -1;
    return (int64_t)count.bytes;
#else
    (void)files;
    (void)ranges;
    (void)n_ranges;
    return -1;
#endif
}

/* Read-ahead and huge pages for faults in [begin, end). */
static void advise_huge(uintptr_t begin, uintptr_t end)
{
    madvise((void *)begin, end - begin, MADV_NORMAL);
#ifdef MADV_HUGEPAGE
    madvise((void *)begin, end - begin, MADV_HUGEPAGE);
#endif
}

/* Maps [begin, end) of the address space now. */
static int populate(const mapped_file *file, uintptr_t begin, uintptr_t end, bmoe_error *err)
{
    if (end > begin && madvise((void *)begin, end - begin, MADV_POPULATE_READ) != 0)
        return error_set(err, "%s: cannot pre-fault the mapping: %s", file->path, strerror(errno));
    return 0;
}

/* Maps [begin, end) afresh, over the old mapping at the same address (the
 * pointers into it stay valid), and drops the file's page cache there (pages
 * another process maps, or that are dirty, stay), so that the next access
 * reads it again. A fresh mapping, not MADV_DONTNEED: the kernel maps a
 * 2 MiB entry only where no page table of 4 KiB entries is left. */
static int remap_dropped(const mapped_file *file, uintptr_t begin, uintptr_t end, bmoe_error *err)
{
    off_t offset = (off_t)(begin - (uintptr_t)file->base);
    void *map = mmap((void *)begin, end - begin, PROT_READ, MAP_SHARED | MAP_FIXED, file->fd, offset);
    if (map == MAP_FAILED)
        return error_set(err, "%s: cannot map bytes %lld..%lld again: %s", file->path, (long long)offset,
                         (long long)(offset + (off_t)(end - begin)), strerror(errno));
    posix_fadvise(file->fd, offset, (off_t)(end - begin), POSIX_FADV_DONTNEED);
    advise_huge(begin, end);
    return 0;
}

#ifdef __linux__
typedef struct region_lookup {
    uintptr_t address;
    uint64_t pmd_bytes;
} region_lookup;

static void find_region(void *user, uintptr_t start, uintptr_t end, uint64_t pmd_bytes)
{
    region_lookup *lookup = user;
    if (lookup->address >= start && lookup->address < end)
        lookup->pmd_bytes = pmd_bytes;
}

/* FilePmdMapped of the mapping region holding address; -1 when unknown. */
static int64_t region_huge_bytes(uintptr_t address)
{
    region_lookup lookup = {address, 0};
    return each_region(find_region, &lookup) ? (int64_t)lookup.pmd_bytes : -1;
}
#endif

/* Whether the file system gives this file 2 MiB folios: one 2 MiB window of
 * a range, dropped and mapped again, must come back as one 2 MiB mapping. */
static bool huge_folios_given(const mapped_file *files, const mapped_range *ranges, int n_ranges)
{
#ifdef __linux__
    for (int i = 0; i < n_ranges; i++) {
        const mapped_file *file = &files[ranges[i].file];
        uintptr_t base = (uintptr_t)file->base;
        uintptr_t window = (base + ranges[i].begin + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
        if (window + HUGE_PAGE > base + ranges[i].end || window + HUGE_PAGE > base + file->size)
            continue;
        bmoe_error ignored;
        if (remap_dropped(file, window, window + HUGE_PAGE, &ignored) != 0)
            return false;
        int64_t before = region_huge_bytes(window);
        if (before < 0 || populate(file, window, window + HUGE_PAGE, &ignored) != 0)
            return false;
        int64_t after = region_huge_bytes(window);
        return after >= before + (int64_t)HUGE_PAGE;
    }
#else
    (void)files;
    (void)ranges;
    (void)n_ranges;
#endif
    return false;
}

int mapping_pages_promote(const mapped_file *files, uint32_t n_files, const mapped_range *ranges, int n_ranges,
                          bmoe_load_progress progress, void *progress_user, bmoe_error *err)
{
    uint64_t total = 0;
    for (int i = 0; i < n_ranges; i++) {
        if (ranges[i].file >= n_files || !files[ranges[i].file].base || ranges[i].end <= ranges[i].begin)
            continue;
        total += ranges[i].end - ranges[i].begin;
        uintptr_t begin, end;
        /* the advice covers whole 2 MiB windows: a mapping region boundary
         * inside a window would keep it from a 2 MiB entry */
        range_span(&files[ranges[i].file], &ranges[i], HUGE_PAGE, &begin, &end);
        advise_huge(begin, end);
    }
    if (total == 0)
        return 0;
    for (int i = 0; i < n_ranges; i++) {
        if (ranges[i].file >= n_files || !files[ranges[i].file].base || ranges[i].end <= ranges[i].begin)
            continue;
        uintptr_t begin, end;
        range_span(&files[ranges[i].file], &ranges[i], page_size(), &begin, &end);
        if (populate(&files[ranges[i].file], begin, end, err) != 0)
            return 1;
        if (progress)
            progress(progress_user, "mapping the experts", (uint64_t)i + 1, (uint64_t)n_ranges);
    }
    int64_t huge = mapping_pages_huge_bytes(files, ranges, n_ranges);
    if (huge < 0 || (uint64_t)huge * 2 >= total || !huge_folios_given(files, ranges, n_ranges))
        return 0;
    for (int i = 0; i < n_ranges; i++) {
        if (ranges[i].file >= n_files || !files[ranges[i].file].base || ranges[i].end <= ranges[i].begin)
            continue;
        uintptr_t begin, end;
        range_span(&files[ranges[i].file], &ranges[i], HUGE_PAGE, &begin, &end);
        if (remap_dropped(&files[ranges[i].file], begin, end, err) != 0)
            return -1;
        range_span(&files[ranges[i].file], &ranges[i], page_size(), &begin, &end);
        if (populate(&files[ranges[i].file], begin, end, err) != 0)
            return 1;
        if (progress)
            progress(progress_user, "re-reading the experts into huge pages", (uint64_t)i + 1, (uint64_t)n_ranges);
    }
    return 0;
}
