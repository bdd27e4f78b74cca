/* mapping_pages: a file mapping whose page cache holds 4 KiB folios is read
 * again into 2 MiB ones, at the same addresses, with the same bytes.
 *
 *   test_mapping_pages          the bytes and the addresses survive promotion
 *                               on any file system, the file is unchanged,
 *                               and bad ranges are ignored;
 *   test_mapping_pages huge     where this machine's file system gives large
 *                               folios (checked without mapping_pages: a
 *                               fresh mapping asking for huge pages over a
 *                               dropped cache gets 2 MiB entries),
 *                               ranges cached page by page, wholly or past a
 *                               prefix cached in large folios, come back
 *                               mapped with 2 MiB entries; exits 77 (skipped)
 *                               where the file system does not. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "stream/mapping_pages.h"
#include "test.h"

#define TEST_SKIPPED 77
#define MIB ((uint64_t)1 << 20)
#define FILE_BYTES (24 * MIB)

static uint8_t pattern_byte(uint64_t offset)
{
    uint64_t x = offset * 0x9e3779b97f4a7c15ull;
    return (uint8_t)(x >> 56);
}

static bool write_pattern(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return false;
    static uint8_t block[1 << 16];
    bool ok = true;
    for (uint64_t offset = 0; offset < FILE_BYTES && ok; offset += sizeof block) {
        for (size_t i = 0; i < sizeof block; i++)
            block[i] = pattern_byte(offset + i);
        ok = write(fd, block, sizeof block) == (ssize_t)sizeof block;
    }
    ok = ok && fsync(fd) == 0;
    return close(fd) == 0 && ok;
}

/* Leaves the file's page cache in 4 KiB folios: dropped, then read one page
 * at a time through a mapping without read-ahead. */
static void cache_page_by_page(int fd)
{
    posix_fadvise(fd, 0, (off_t)FILE_BYTES, POSIX_FADV_DONTNEED);
    volatile uint8_t *map = mmap(NULL, FILE_BYTES, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED)
        return;
    madvise((void *)map, FILE_BYTES, MADV_RANDOM);
    for (uint64_t offset = 0; offset < FILE_BYTES; offset += 4096)
        (void)map[offset];
    munmap((void *)map, FILE_BYTES);
}

/* Reads the file's first bytes again into large folios where the file system
 * gives them: dropped, then mapped by a fresh mapping that asks for huge
 * pages. */
static void cache_prefix_huge(int fd, uint64_t bytes)
{
    posix_fadvise(fd, 0, (off_t)bytes, POSIX_FADV_DONTNEED);
    uint8_t *map = mmap(NULL, FILE_BYTES, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED)
        return;
    madvise(map, bytes, MADV_HUGEPAGE);
    madvise(map, bytes, 22 /* MADV_POPULATE_READ */);
    munmap(map, FILE_BYTES);
}

static bool bytes_match(const uint8_t *map, uint64_t begin, uint64_t end)
{
    for (uint64_t offset = begin; offset < end; offset++)
        if (map[offset] != pattern_byte(offset))
            return false;
    return true;
}

/* Bytes of the ranges that a fresh mapping asking for huge pages maps with
 * 2 MiB entries: those the page cache now holds in large folios. */
static int64_t cached_huge_bytes(int fd, const char *path, const mapped_range *ranges, int n_ranges)
{
    uint8_t *map = mmap(NULL, FILE_BYTES, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED)
        return -1;
    madvise(map, FILE_BYTES, MADV_HUGEPAGE);
    madvise(map, FILE_BYTES, 22 /* MADV_POPULATE_READ */);
    mapped_file file = {map, FILE_BYTES, fd, path};
    int64_t huge = mapping_pages_huge_bytes(&file, 1, ranges, n_ranges);
    munmap(map, FILE_BYTES);
    return huge;
}

/* Whether the kernel maps this file with 2 MiB entries when its page cache
 * is read through a fresh mapping that asks for huge pages: the file
 * system's large folios, seen without mapping_pages_promote. */
static bool machine_maps_huge(int fd, const char *path)
{
    posix_fadvise(fd, 0, (off_t)FILE_BYTES, POSIX_FADV_DONTNEED);
    mapped_range whole = {0, 0, FILE_BYTES};
    return cached_huge_bytes(fd, path, &whole, 1) >= (int64_t)(2 * MIB);
}

/* Promotes ranges of a fresh mapping of the file, cached page by page past
 * huge_prefix bytes, and checks that the bytes and the address survive and,
 * in huge mode, that at least 90 % of the ranges comes back mapped huge
 * (where more than half of them was, before this mapping_pages re-read
 * nothing). */
static void promote_and_check(int fd, const char *path, uint64_t huge_prefix, bool huge_mode)
{
    /* two ranges off any 2 MiB boundary, one ending past the file (clamped),
     * one naming a file that does not exist (ignored), one empty */
    mapped_range ranges[] = {{0, 3 * MIB + 12345, 11 * MIB + 777},
                             {0, 11 * MIB + 4096, FILE_BYTES + 8 * MIB},
                             {5, 0, MIB},
                             {0, 7 * MIB, 7 * MIB}};
    mapped_range inside[] = {ranges[0], {0, ranges[1].begin, FILE_BYTES}};
    uint64_t range_bytes = (inside[0].end - inside[0].begin) + (inside[1].end - inside[1].begin);
    cache_page_by_page(fd);
    if (huge_prefix > 0)
        cache_prefix_huge(fd, huge_prefix);
    int64_t huge_before = cached_huge_bytes(fd, path, inside, 2);

    uint8_t *map = mmap(NULL, FILE_BYTES, PROT_READ, MAP_SHARED, fd, 0);
    CHECK(map != MAP_FAILED);
    if (map == MAP_FAILED)
        return;
    madvise(map, FILE_BYTES, MADV_RANDOM);
    mapped_file file = {map, FILE_BYTES, fd, path};
    const uint8_t *before = map;
    bmoe_error err = {0};
    int status = mapping_pages_promote(&file, 1, ranges, 4, NULL, NULL, &err);
    CHECK_MSG(status == 0, "status %d: %s", status, err.message);
    CHECK(map == before);
    CHECK(bytes_match(map, 0, FILE_BYTES));
    int64_t huge_after = mapping_pages_huge_bytes(&file, 1, inside, 2);
    if (huge_mode) {
        if (huge_prefix == 0)
            CHECK_MSG(huge_before == 0, "%lld bytes cached in large folios before promotion", (long long)huge_before);
        else
            CHECK_MSG(huge_before * 2 > (int64_t)range_bytes,
                      "only %lld of %llu bytes cached in large folios before promotion", (long long)huge_before,
                      (unsigned long long)range_bytes);
        CHECK_MSG(huge_after * 10 >= (int64_t)range_bytes * 9, "%lld of %llu bytes mapped huge after promotion",
                  (long long)huge_after, (unsigned long long)range_bytes);
    }
    munmap(map, FILE_BYTES);
}

int main(int argc, char **argv)
{
    bool huge_mode = argc > 1 && strcmp(argv[1], "huge") == 0;
    char path[4096];
    snprintf(path, sizeof path, "%s/mapping_pages_%d.bin", test_tmp_dir(), (int)getpid());
    mkdir(test_tmp_dir(), 0755);
    if (!write_pattern(path)) {
        fprintf(stderr, "cannot write %s\n", path);
        printf("0 passed, 1 failed\n");
        return 1;
    }
    int fd = open(path, O_RDONLY);
    CHECK(fd >= 0);
    if (huge_mode && !machine_maps_huge(fd, path)) {
        printf("SKIPPED: this file system does not give %s large folios (no 2 MiB mapping of a "
               "fresh read)\n", path);
        close(fd);
        unlink(path);
        return TEST_SKIPPED;
    }

    /* wholly page by page; past a prefix in large folios, where more than
     * half of the ranges is mapped huge from the start */
    promote_and_check(fd, path, 0, huge_mode);
    if (huge_mode)
        promote_and_check(fd, path, 16 * MIB, huge_mode);

    /* the file itself is untouched */
    struct stat st;
    CHECK(fstat(fd, &st) == 0 && (uint64_t)st.st_size == FILE_BYTES);
    static uint8_t check[1 << 16];
    bool same = true;
    posix_fadvise(fd, 0, (off_t)FILE_BYTES, POSIX_FADV_DONTNEED);
    for (uint64_t offset = 0; offset < FILE_BYTES && same; offset += sizeof check) {
        same = pread(fd, check, sizeof check, (off_t)offset) == (ssize_t)sizeof check;
        for (size_t i = 0; i < sizeof check && same; i++)
            same = check[i] == pattern_byte(offset + i);
    }
    CHECK(same);
    close(fd);
    unlink(path);
    return test_finish();
}
