#define _GNU_SOURCE /* O_DIRECT */
#include "shard_reader.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ALIGN_DOWN(x) ((x) & ~((uint64_t)SHARD_READ_ALIGNMENT - 1))
#define ALIGN_UP(x) ALIGN_DOWN((x) + SHARD_READ_ALIGNMENT - 1)

static int64_t system_pread(void *user, int fd, void *buffer, size_t length, int64_t offset)
{
    (void)user;
    return pread(fd, buffer, length, (off_t)offset);
}

static int64_t reader_pread(const shard_reader *reader, int fd, void *buffer, size_t length, uint64_t offset)
{
    for (;;) {
        int64_t got = reader->io.pread(reader->io.user, fd, buffer, length, (int64_t)offset);
        if (got >= 0 || errno != EINTR)
            return got;
    }
}

size_t shard_region_bytes(uint64_t length)
{
    return (size_t)ALIGN_UP(length + SHARD_READ_ALIGNMENT);
}

size_t shard_region_offset(uint64_t file_offset)
{
    return (size_t)(file_offset & (SHARD_READ_ALIGNMENT - 1));
}

/* Reads exactly [offset, end) of fd into destination; fails on a short read. */
static int read_range(const shard_reader *reader, const shard_file *file, int fd, uint8_t *destination,
                      uint64_t offset, uint64_t end, bmoe_error *err)
{
    uint64_t position = offset;
    while (position < end) {
        int64_t got = reader_pread(reader, fd, destination + (position - offset), (size_t)(end - position), position);
        if (got < 0)
            return error_set_status(err, BMOE_ERR_IO, "%s: read error at offset %" PRIu64 ": %s", file->path,
                                    position, strerror(errno));
        if (got == 0)
            return error_set_status(err, BMOE_ERR_IO,
                                    "%s: file ends at offset %" PRIu64 ", before the %" PRIu64
                                    " bytes the model needs at %" PRIu64 " (truncated or replaced?)",
                                    file->path, position, end - offset, offset);
        position += (uint64_t)got;
    }
    return 0;
}

int shard_reader_read(const shard_reader *reader, uint32_t shard, uint64_t offset, uint64_t length, uint8_t *region,
                      uint64_t *device_bytes, bmoe_error *err)
{
    const shard_file *file = &reader->files[shard];
    uint64_t end = offset + length;
    uint8_t *interior = region + shard_region_offset(offset);
    if (file->direct_fd < 0) {
        *device_bytes = length;
        return read_range(reader, file, file->buffered_fd, interior, offset, end, err);
    }
    /* the aligned window: whole blocks, some of them past the range */
    uint64_t window = ALIGN_DOWN(offset), window_end = ALIGN_UP(end);
    if (window_end > ALIGN_UP(file->size))
        window_end = ALIGN_UP(file->size);
    uint64_t position = window;
    while (position < window_end) {
        int64_t got = reader_pread(reader, file->direct_fd, region + (position - window),
                                   (size_t)(window_end - position), position);
        if (got < 0)
            return error_set_status(err, BMOE_ERR_IO, "%s: read error at offset %" PRIu64 ": %s", file->path,
                                    position, strerror(errno));
        if (got == 0)
            break;
        position += (uint64_t)got;
        if (position % SHARD_READ_ALIGNMENT != 0)
            break; /* a partial block: the end of the file, or a short read to finish buffered */
    }
    *device_bytes = position - window;
    if (position >= end)
        return 0;
    /* what the direct read did not bring (the file's unaligned tail, a
     * short read) comes through the buffered descriptor */
    uint64_t resume = position > offset ? position : offset;
    *device_bytes += end - resume;
    return read_range(reader, file, file->buffered_fd, interior + (resume - offset), resume, end, err);
}

/* Does a direct read return what a buffered read does, at mid-file? Some file
 * systems (FUSE) accept O_DIRECT and return wrong bytes. */
static bool direct_reads_agree(const shard_reader *reader, const shard_file *file)
{
    if (file->size < 2 * SHARD_READ_ALIGNMENT)
        return false;
    uint8_t *direct = aligned_alloc(SHARD_READ_ALIGNMENT, SHARD_READ_ALIGNMENT);
    uint8_t *buffered = malloc(SHARD_READ_ALIGNMENT);
    bool agree = false;
    if (direct && buffered) {
        uint64_t offset = ALIGN_DOWN(file->size / 2);
        int64_t a = reader_pread(reader, file->direct_fd, direct, SHARD_READ_ALIGNMENT, offset);
        int64_t b = reader_pread(reader, file->buffered_fd, buffered, SHARD_READ_ALIGNMENT, offset);
        agree = a == SHARD_READ_ALIGNMENT && b == SHARD_READ_ALIGNMENT &&
                memcmp(direct, buffered, SHARD_READ_ALIGNMENT) == 0;
        /* the check's block must not stay in the page cache (streamed bytes never do) */
        posix_fadvise(file->buffered_fd, (off_t)offset, SHARD_READ_ALIGNMENT, POSIX_FADV_DONTNEED);
    }
    free(direct);
    free(buffered);
    return agree;
}

int shard_reader_open(shard_reader *reader, const char *const *paths, const uint64_t *sizes, uint32_t n_files,
                      bool want_direct, const shard_io *io, bmoe_error *err)
{
    memset(reader, 0, sizeof *reader);
    reader->io.pread = io && io->pread ? io->pread : system_pread;
    reader->io.user = io ? io->user : NULL;
    reader->files = calloc(n_files, sizeof *reader->files);
    if (!reader->files)
        return error_set_status(err, BMOE_ERR_OUT_OF_MEMORY, "stream: out of memory for %u readers", n_files);
    for (uint32_t i = 0; i < n_files; i++)
        reader->files[i].direct_fd = reader->files[i].buffered_fd = -1;
    reader->n_files = n_files;
    for (uint32_t i = 0; i < n_files; i++) {
        shard_file *file = &reader->files[i];
        file->path = paths[i];
        file->size = sizes[i];
        /* O_NONBLOCK: a path that became a FIFO must not hang the open */
        file->buffered_fd = open(paths[i], O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        struct stat st;
        if (file->buffered_fd < 0 || fstat(file->buffered_fd, &st) != 0 || !S_ISREG(st.st_mode)) {
            int saved = errno;
            shard_reader_close(reader);
            return error_set_status(err, BMOE_ERR_IO, "%s: cannot open for streaming: %s", paths[i],
                                    file->buffered_fd >= 0 && saved == 0 ? "not a regular file" : strerror(saved));
        }
        /* slices are read once each: read-ahead would only pull neighbours in */
        posix_fadvise(file->buffered_fd, 0, 0, POSIX_FADV_RANDOM);
        if ((uint64_t)st.st_size != sizes[i]) {
            shard_reader_close(reader);
            return error_set_status(err, BMOE_ERR_IO,
                                    "%s: the file is %" PRIu64 " bytes now, %" PRIu64 " when the model was opened",
                                    paths[i], (uint64_t)st.st_size, sizes[i]);
        }
        if (!want_direct)
            continue;
        file->direct_fd = open(paths[i], O_RDONLY | O_CLOEXEC | O_DIRECT | O_NONBLOCK);
        if (file->direct_fd >= 0 && !direct_reads_agree(reader, file)) {
            close(file->direct_fd);
            file->direct_fd = -1;
        }
    }
    return 0;
}

void shard_reader_close(shard_reader *reader)
{
    for (uint32_t i = 0; i < reader->n_files; i++) {
        if (reader->files[i].direct_fd >= 0)
            close(reader->files[i].direct_fd);
        if (reader->files[i].buffered_fd >= 0)
            close(reader->files[i].buffered_fd);
    }
    free(reader->files);
    memset(reader, 0, sizeof *reader);
}

bool shard_reader_direct(const shard_reader *reader)
{
    for (uint32_t i = 0; i < reader->n_files; i++)
        if (reader->files[i].direct_fd < 0)
            return false;
    return reader->n_files > 0;
}
