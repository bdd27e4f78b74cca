/* Where the dense weights (every tensor but the routed expert matrices) live
 * during inference, by policy:
 *   mmap  the file mapping, paged in on demand (a model larger than RAM
 *         re-faults them from flash inside the decode);
 *   warm  the mapping, read once sequentially at load so the first tokens
 *         find them in the page cache;
 *   anon  a copy in engine memory (anonymous, 2 MiB pages where the kernel
 *         gives them), read with O_DIRECT where the file system serves it
 *         right, so page-cache reclaim cannot evict them and reading them
 *         pulls no neighbouring expert bytes into the page cache.
 * The copy mirrors the file: each run of neighbouring dense tensors keeps its
 * offset within a 4 KiB block, so the aligned windows are read straight into
 * place and every tensor keeps the alignment it has in the file.
 * Owns: the copy and its index. */
#ifndef BMOE_STREAM_DENSE_WEIGHTS_H
#define BMOE_STREAM_DENSE_WEIGHTS_H

#include <stdbool.h>
#include <stdint.h>

#include "bmoe.h"
#include "shard_reader.h"

/* A byte range of one shard. */
typedef struct file_range {
    uint32_t shard;
    uint64_t begin, end;
} file_range;

typedef struct dense_weights dense_weights;

typedef struct dense_weights_files {
    const char *const *paths;
    const uint64_t *sizes;
    const uint8_t *const *mappings; /* each shard's mapping (the warm sweep and the residency probe) */
    uint32_t n_files;
} dense_weights_files;

/* tensors: every tensor's range; experts: the routed expert matrices' ranges
 * (left out). Returns NULL with err filled. */
dense_weights *dense_weights_create(const dense_weights_files *files, const file_range *tensors, int n_tensors,
                                    const file_range *experts, int n_experts, enum bmoe_dense_weights policy,
                                    bool direct, const shard_io *io, bmoe_load_progress progress,
                                    void *progress_user, bmoe_error *err);
void dense_weights_destroy(dense_weights *dense);

/* The copy of the byte at (shard, offset), or NULL when it is not copied
 * (the mmap and warm policies, an expert byte). */
const void *dense_weights_locate(const dense_weights *dense, uint32_t shard, uint64_t offset);

/* Bytes of dense tensors (copied or not), and of the copy's memory. */
uint64_t dense_weights_bytes(const dense_weights *dense);
uint64_t dense_weights_copy_bytes(const dense_weights *dense);
/* Whether the copy was read with O_DIRECT. */
bool dense_weights_direct(const dense_weights *dense);

/* The sampled fraction (at most 256 pages) of the dense weights in RAM:
 * the copy's pages, or the mapping's; -1 when it cannot be measured. */
double dense_weights_resident_fraction(const dense_weights *dense);

#endif
