/* Reading byte ranges of the model's shard files into engine memory, with
 * O_DIRECT where the file system serves it correctly (the page cache then
 * holds none of the streamed bytes) and buffered reads otherwise.
 *
 * Expert slices are not aligned in shipped files (only tensor starts are), so
 * a direct read pulls the enclosing aligned window straight into the
 * destination region and the caller uses the interior pointer: no bounce
 * buffer, no copy. Buffered reads put the bytes at the same interior offset,
 * so both modes hand the kernels identically aligned data.
 *
 * Every read goes through one pread function the tests can replace (short
 * reads, errors, late reads). Owns: the descriptors of one reader (a lane). */
#ifndef BMOE_STREAM_SHARD_READER_H
#define BMOE_STREAM_SHARD_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../base/error.h"

/* The block size direct reads align to (offsets, lengths and buffers). */
#define SHARD_READ_ALIGNMENT 4096

/* pread(2)'s contract: bytes read, 0 at end of file, -1 with errno (the
 * type of bmoe_stream_params.pread). */
typedef int64_t (*shard_pread_fn)(void *user, int fd, void *buffer, size_t length, int64_t offset);

typedef struct shard_io {
    shard_pread_fn pread;   /* NULL: the system's pread */
    void *user;
} shard_io;

typedef struct shard_file {
    const char *path;       /* not owned */
    uint64_t size;
    int direct_fd;          /* -1 when direct reads are off for this file */
    int buffered_fd;
} shard_file;

/* One reader: its own descriptors for every shard. */
typedef struct shard_reader {
    shard_file *files;
    uint32_t n_files;
    shard_io io;
} shard_reader;

/* Opens every path (want_direct: try O_DIRECT, then check at mid-file that a
 * direct read returns the same bytes as a buffered one; a file that fails
 * the check is read buffered). Returns 0 or -1. */
int shard_reader_open(shard_reader *reader, const char *const *paths, const uint64_t *sizes, uint32_t n_files,
                      bool want_direct, const shard_io *io, bmoe_error *err);
void shard_reader_close(shard_reader *reader);
/* True when every shard is read with O_DIRECT. */
bool shard_reader_direct(const shard_reader *reader);

/* Bytes a destination region needs for a range of length bytes anywhere in a
 * file, and where in the region the range starts for a file offset. */
size_t shard_region_bytes(uint64_t length);
size_t shard_region_offset(uint64_t file_offset);

/* Reads [offset, offset + length) of shard into region (SHARD_READ_ALIGNMENT
 * aligned, shard_region_bytes(length) long) at shard_region_offset(offset).
 * *device_bytes: what was pulled from the file (the aligned window for a
 * direct read). Returns 0, or -1 naming the file and the offset (a failed or
 * short read: the region's bytes must not be used). */
int shard_reader_read(const shard_reader *reader, uint32_t shard, uint64_t offset, uint64_t length, uint8_t *region,
                      uint64_t *device_bytes, bmoe_error *err);

#endif
