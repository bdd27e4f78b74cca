#define _GNU_SOURCE /* MADV_HUGEPAGE, posix_fadvise */
#include "mapping_pages.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../base/error.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14 */
#endif

#define HUGE_PAGE ((uint64_t)2 * 1024 * 1024)

/* The PAGEMAP_SCAN interface of /proc/PID/pagemap (Linux 6.7, include/uapi/
 * linux/fs.h), declared here: the build machine's headers may predate it. */
typedef struct pagemap_region {
    uint64_t start, end, categories;
} pagemap_region;

typedef struct pagemap_scan_arg {
    uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
    uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
} pagemap_scan_arg;

#define PAGEMAP_SCAN_REQUEST _IOWR('f', 16, pagemap_scan_arg)
#define PAGEMAP_PAGE_IS_HUGE ((uint64_t)1 << 6) /* mapped by a 2 MiB (PMD) entry */

/* Calls visit(user, begin, end) for each run of [begin, end) that is mapped
 * with 2 MiB entries (huge) or not (!huge, which includes pages not mapped at
 * all); visit may change the mappings after the run it was given. Returns
 * false when the kernel cannot tell (no PAGEMAP_SCAN). */
static bool scan_page_sizes(int pagemap, uintptr_t begin, uintptr_t end, bool huge,
                            void (*visit)(void *user, uintptr_t begin, uintptr_t end), void *user)
{
    pagemap_region regions[64];
    while (begin < end) {
        pagemap_scan_arg arg = {
            .size = sizeof arg,
            .start = begin,
            .end = end,
            .vec = (uintptr_t)regions,
            .vec_len = sizeof regions / sizeof regions[0],
            .category_inverted = huge ? 0 : PAGEMAP_PAGE_IS_HUGE,
            .category_mask = PAGEMAP_PAGE_IS_HUGE,
            .return_mask = PAGEMAP_PAGE_IS_HUGE,
        };
        long n = ioctl(pagemap, PAGEMAP_SCAN_REQUEST, &arg);
        if (n < 0)
            return false;
        for (long i = 0; i < n; i++)
            visit(user, (uintptr_t)regions[i].start, (uintptr_t)regions[i].end);
        if (arg.walk_end <= begin)
            return false;
        begin = (uintptr_t)arg.walk_end;
    }
    return true;
}

/* The range's bytes in the address space, clamped to the mapping. */
static void range_span(const mapped_file *file, const mapped_range *range, uintptr_t *begin, uintptr_t *end)
{
    uintptr_t base = (uintptr_t)file->base;
    uint64_t stop = range->end < file->size ? range->end : file->size;
    *begin = base + range->begin;
    *end = base + (stop > range->begin ? stop : range->begin);
}

/* [begin, end) widened to whole pages (the unit of page tables). */
static void page_span(uintptr_t *begin, uintptr_t *end)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    *begin &= ~(page - 1);
    *end = (*end + page - 1) & ~(page - 1);
}

/* The 2 MiB windows around the range, or (whole_only) only the windows that
 * lie wholly inside the mapping, the ones a 2 MiB entry can map. */
static void window_span(const mapped_file *file, const mapped_range *range, bool whole_only, uintptr_t *begin,
                        uintptr_t *end)
{
    uintptr_t base = (uintptr_t)file->base, limit = base + file->size;
    range_span(file, range, begin, end);
    uintptr_t first = *begin & ~(uintptr_t)(HUGE_PAGE - 1);
    uintptr_t last = (*end + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
    if (whole_only) {
        if (first < base)
            first += HUGE_PAGE;
        if (last > limit)
            last -= HUGE_PAGE;
    } else {
        first = first < base ? base : first;
        last = last > limit ? limit : last;
    }
    *begin = first;
    *end = last > first ? last : first;
}

static bool range_valid(const mapped_file *files, uint32_t n_files, const mapped_range *range)
{
    return range->file < n_files && files[range->file].base && range->end > range->begin &&
           range->begin < files[range->file].size;
}

static void add_bytes(void *user, uintptr_t begin, uintptr_t end)
{
    *(uint64_t *)user += end - begin;
}

/* Bytes of runs within [begin, end). */
typedef struct clipped_count {
    uintptr_t begin, end;
    uint64_t bytes;
} clipped_count;

static void add_clipped_bytes(void *user, uintptr_t begin, uintptr_t end)
{
    clipped_count *count = user;
    begin = begin > count->begin ? begin : count->begin;
    end = end < count->end ? end : count->end;
    if (end > begin)
        count->bytes += end - begin;
}

int64_t mapping_pages_huge_bytes(const mapped_file *files, uint32_t n_files, const mapped_range *ranges,
                                 int n_ranges)
{
    int pagemap = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (pagemap < 0)
        return -1;
    uint64_t bytes = 0;
    bool known = true;
    for (int i = 0; i < n_ranges && known; i++) {
        if (!range_valid(files, n_files, &ranges[i]))
            continue;
        clipped_count count = {0, 0, 0};
        range_span(&files[ranges[i].file], &ranges[i], &count.begin, &count.end);
        uintptr_t begin = count.begin, end = count.end;
        page_span(&begin, &end);
        known = scan_page_sizes(pagemap, begin, end, true, add_clipped_bytes, &count);
        bytes += count.bytes;
    }
    close(pagemap);
    return known ? (int64_t)bytes : -1;
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

int mapping_pages_populate(const mapped_file *files, uint32_t n_files, const mapped_range *range, bmoe_error *err)
{
    if (!range_valid(files, n_files, range))
        return 0;
    uintptr_t begin, end;
    range_span(&files[range->file], range, &begin, &end);
    page_span(&begin, &end);
    return populate(&files[range->file], begin, end, err);
}

/* Maps [begin, end) afresh, over the old mapping at the same address (the
 * pointers into it stay valid), drops the file's page cache there (pages
 * another process maps, or that are dirty, stay) and maps it again, so that
 * it is read into new folios. A fresh mapping, not MADV_DONTNEED: the kernel
 * maps a 2 MiB entry only where no page table of 4 KiB entries is left.
 * Returns 0; 1 when populating failed; -1 when the remap failed. */
static int reread(const mapped_file *file, uintptr_t begin, uintptr_t end, bmoe_error *err)
{
    off_t offset = (off_t)(begin - (uintptr_t)file->base);
    void *map = mmap((void *)begin, end - begin, PROT_READ, MAP_SHARED | MAP_FIXED, file->fd, offset);
    if (map == MAP_FAILED) {
        error_set(err, "%s: cannot map bytes %lld..%lld again: %s", file->path, (long long)offset,
                  (long long)(offset + (off_t)(end - begin)), strerror(errno));
        return -1;
    }
    posix_fadvise(file->fd, offset, (off_t)(end - begin), POSIX_FADV_DONTNEED);
    advise_huge(begin, end);
    return populate(file, begin, end, err) != 0 ? 1 : 0;
}

/* Re-reads each run of windows the scan reports as not mapped huge. The
 * first re-read is the probe: if its window does not come back mapped huge,
 * the file system (or the memory) gives no 2 MiB folios and nothing more is
 * read. */
typedef struct reread_pass {
    const mapped_file *file;
    int pagemap;
    bool probed, stopped;
    int status;
    uint64_t done, total;
    bmoe_load_progress progress;
    void *progress_user;
    bmoe_error *err;
} reread_pass;

static void reread_run(void *user, uintptr_t begin, uintptr_t end)
{
    reread_pass *pass = user;
    if (pass->stopped)
        return;
    /* runs are whole windows: the scan covers whole windows and a window is
     * mapped by one entry or by none */
    begin &= ~(uintptr_t)(HUGE_PAGE - 1);
    end = (end + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
    if (!pass->probed) {
        pass->probed = true;
        int status = reread(pass->file, begin, begin + HUGE_PAGE, pass->err);
        uint64_t huge = 0;
        if (status != 0 ||
            !scan_page_sizes(pass->pagemap, begin, begin + HUGE_PAGE, true, add_bytes, &huge) ||
            huge < HUGE_PAGE) {
            pass->stopped = true;
            pass->status = status;
            return;
        }
        pass->done += HUGE_PAGE;
        begin += HUGE_PAGE;
    }
    if (begin < end) {
        int status = reread(pass->file, begin, end, pass->err);
        if (status != 0) {
            pass->stopped = true;
            pass->status = status;
            return;
        }
        pass->done += end - begin;
    }
    if (pass->progress)
        pass->progress(pass->progress_user, "re-reading the experts into huge pages", pass->done, pass->total);
}

int mapping_pages_promote(const mapped_file *files, uint32_t n_files, const mapped_range *ranges, int n_ranges,
                          bmoe_load_progress progress, void *progress_user, bmoe_error *err)
{
    for (int i = 0; i < n_ranges; i++) {
        if (!range_valid(files, n_files, &ranges[i]))
            continue;
        uintptr_t begin, end;
        /* the advice covers whole 2 MiB windows: a mapping region boundary
         * inside a window would keep it from a 2 MiB entry */
        window_span(&files[ranges[i].file], &ranges[i], false, &begin, &end);
        advise_huge(begin, end);
    }
    for (int i = 0; i < n_ranges; i++) {
        if (!range_valid(files, n_files, &ranges[i]))
            continue;
        if (mapping_pages_populate(files, n_files, &ranges[i], err) != 0)
            return 1;
        if (progress)
            progress(progress_user, "mapping the experts", (uint64_t)i + 1, (uint64_t)n_ranges);
    }
    int pagemap = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (pagemap < 0)
        return 0;
    uint64_t small = 0;
    bool known = true;
    for (int i = 0; i < n_ranges && known; i++) {
        if (!range_valid(files, n_files, &ranges[i]))
            continue;
        uintptr_t begin, end;
        window_span(&files[ranges[i].file], &ranges[i], true, &begin, &end);
        known = scan_page_sizes(pagemap, begin, end, false, add_bytes, &small);
    }
    reread_pass pass = {.pagemap = pagemap, .total = small, .progress = progress, .progress_user = progress_user,
                        .err = err};
    for (int i = 0; i < n_ranges && known && small > 0 && !pass.stopped; i++) {
        if (!range_valid(files, n_files, &ranges[i]))
            continue;
        uintptr_t begin, end;
        window_span(&files[ranges[i].file], &ranges[i], true, &begin, &end);
        pass.file = &files[ranges[i].file];
        scan_page_sizes(pagemap, begin, end, false, reread_run, &pass);
    }
    close(pagemap);
    return pass.status;
}
