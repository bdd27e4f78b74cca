/* Internal to the GGUF module: the parsed form of one shard and the model
 * struct shared by the parser (gguf_parse.c), the opener (gguf_open.c), the
 * getters (gguf_get.c) and the --info printer (gguf_info.c). Nothing outside
 * src/gguf includes this. */
#ifndef BMOE_GGUF_INTERNAL_H
#define BMOE_GGUF_INTERNAL_H

#include <sys/stat.h>

#include "gguf.h"

/* Hostile files could nest arrays until the stack runs out; real files never
 * nest at all, so a small fixed depth is plenty. */
#define GGUF_MAX_ARRAY_DEPTH 8

/* One parsed GGUF image (a whole file, or a memory buffer when fuzzing). */
typedef struct gguf_shard {
    char *path;             /* owned copy, used in messages */
    int fd;                 /* -1 for a memory image */
    const uint8_t *base;    /* mapping (or caller's buffer) */
    uint64_t size;
    bool mapped;            /* base is our mmap and must be unmapped */
    int guard;              /* the mapping's guard (base/mapping_guard.h), -1 for none */
    struct stat opened;     /* the file as mapped: what gguf_check_files compares */

    uint32_t version;
    uint32_t alignment;
    uint64_t data_start;

    uint64_t kv_count;
    gguf_kv *kvs;           /* keys point into strings */
    uint64_t tensor_count;
    gguf_tensor *tensors;   /* names point into strings; shard and data set by the opener */
    char *strings;          /* every key and tensor name, NUL-separated */
} gguf_shard;

struct gguf_model {
    uint32_t shard_count;
    gguf_shard *shards;
    uint64_t tensor_count;
    gguf_tensor *tensors;     /* all shards, in order */
    uint64_t *tensors_by_name; /* indices into tensors, sorted by name */
    uint64_t *kvs_by_key;     /* indices into shards[0].kvs, sorted by key */
};

/* Parses and validates shard->base[0..size) (path set for messages); fills
 * every other field. Tensor data pointers are set to base + file_offset and
 * shard indices to 0. Returns 0, or -1 with a one-line message. On failure
 * the shard's allocations are freed. */
int gguf_parse_shard(gguf_shard *shard, bmoe_error *err);

/* Frees what gguf_parse_shard allocated and unmaps/closes the file. */
void gguf_shard_release(gguf_shard *shard);

/* The value type's name ("UINT32", "ARRAY"), "?" when invalid. */
const char *gguf_type_name(uint32_t type);

/* Little-endian loads from possibly unaligned bytes. */
static inline uint16_t gguf_load_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t gguf_load_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline uint64_t gguf_load_u64(const uint8_t *p)
{
    return (uint64_t)gguf_load_u32(p) | ((uint64_t)gguf_load_u32(p + 4) << 32);
}

/* Bytes of one array element at p (already validated by the parser), used to
 * step through string and nested arrays. */
uint64_t gguf_element_size(uint32_t type, const uint8_t *p);

#endif
