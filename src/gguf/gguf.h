/* GGUF reader: opens a model file (or the first shard of a split model),
 * validates it strictly and presents its metadata and tensor table. The
 * files are memory-mapped read-only; a reader never writes to a model.
 * Owns the mappings, the key/value index and the tensor table; the strings and
 * payload pointers it hands out stay valid until gguf_close. */
#ifndef BMOE_GGUF_GGUF_H
#define BMOE_GGUF_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../base/error.h"

enum gguf_value_type {
    GGUF_TYPE_UINT8 = 0,
    GGUF_TYPE_INT8 = 1,
    GGUF_TYPE_UINT16 = 2,
    GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4,
    GGUF_TYPE_INT32 = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8,
    GGUF_TYPE_ARRAY = 9,
    GGUF_TYPE_UINT64 = 10,
    GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12,
    GGUF_TYPE_COUNT = 13
};

/* Bytes of one scalar of this value type; 0 for STRING, ARRAY and invalid
 * types. Shared by the reader, the writer and the model generator. */
uint64_t gguf_scalar_size(uint32_t type);

#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_DIMS 4

/* A GGUF string: points into the mapping, NOT NUL-terminated. */
typedef struct gguf_string {
    const char *data;
    uint64_t length;
} gguf_string;

typedef struct gguf_kv {
    const char *key;               /* NUL-terminated copy owned by the model */
    enum gguf_value_type type;     /* GGUF_TYPE_ARRAY for arrays */
    enum gguf_value_type array_type; /* element type when type == ARRAY */
    uint64_t array_count;          /* element count when type == ARRAY */
    const uint8_t *payload;        /* raw little-endian payload in the mapping:
                                      the scalar, or the first array element
                                      (a STRING payload is its u64 length, then
                                      the bytes) */
    uint64_t payload_bytes;        /* bytes of the whole payload */
} gguf_kv;

typedef struct gguf_tensor {
    const char *name;       /* NUL-terminated, owned by the model */
    uint32_t type;          /* enum tensor_type (quant/quant.h) */
    uint32_t n_dims;        /* 1..4 */
    int64_t ne[GGUF_MAX_DIMS]; /* ggml order; trailing dims are 1 */
    uint32_t shard;         /* 0-based shard index */
    uint64_t file_offset;   /* absolute byte offset of the data in its shard file */
    uint64_t nbytes;        /* bytes of data */
    const void *data;       /* file_offset inside the shard's mapping */
} gguf_tensor;

typedef struct gguf_model gguf_model;

/* Opens and validates path. For a split model, path is any shard name of the
 * form PREFIX-NNNNN-of-MMMMM.gguf whose split.no is 0; every shard is opened
 * and the tensors of all shards are presented as one table. Metadata comes
 * from the first shard. A name of that form must agree with split.count and
 * split.no. Only regular files are opened (a FIFO or a device is refused
 * without blocking). NULL on failure with a one-line message in err. */
gguf_model *gguf_open(const char *path, bmoe_error *err);
void gguf_close(gguf_model *model);
/* The files gguf_open opens for path, by its name alone: for a name ending
 * in -NNNNN-of-MMMMM.gguf (MMMMM above 1) the MMMMM shards PREFIX-00001-of-
 * MMMMM.gguf to PREFIX-MMMMM-of-MMMMM.gguf, else path itself. The path of
 * shard s (0-based) is a new string (NULL: out of memory). */
uint32_t gguf_split_shard_count(const char *path);
char *gguf_split_shard_path(const char *path, uint32_t shard);
/* Opens a GGUF image held in memory (fuzzing, tests): the same validation as
 * gguf_open; data must outlive the model; name is used in messages; split
 * models are refused; gguf_shard_fd returns -1. */
gguf_model *gguf_open_memory(const void *data, size_t size, const char *name, bmoe_error *err);

uint32_t gguf_version(const gguf_model *model);
uint32_t gguf_shard_count(const gguf_model *model);
const char *gguf_shard_path(const gguf_model *model, uint32_t shard);
int gguf_shard_fd(const gguf_model *model, uint32_t shard); /* read-only fd, for pread-based streaming */
uint64_t gguf_shard_size(const gguf_model *model, uint32_t shard);
uint32_t gguf_alignment(const gguf_model *model);


/* Routed-expert tensors by name (*_exps), for describing a file (--info).
 * What an engine streams is what its architecture binds as experts. */
bool gguf_tensor_is_expert(const gguf_tensor *tensor);

/* The mappings are opened without read-ahead on faults (parsing touches only
 * the header); bytes [begin, end) of a shard that are read through the
 * mapping get it back with read_ahead true. */
void gguf_advise_range(const gguf_model *model, uint32_t shard, uint64_t begin, uint64_t end, bool read_ahead);

/* Whether a read of a mapping went past its file's end since the open (the
 * file was cut short while mapped; such reads give zeros). One atomic load
 * per shard: cheap enough to ask between layers. */
bool gguf_mapping_faulted(const gguf_model *model);

/* Checks that every mapped file is still the one opened: at its path (not
 * gone, not replaced by another file), of the size it had, and not written
 * since (modification and status-change times; a mapping that faulted).
 * Returns 0, or -1 with an I/O error naming the file. One stat per shard. */
int gguf_check_files(const gguf_model *model, bmoe_error *err);

/* The mapping of a shard (NULL for none). */
const uint8_t *gguf_shard_data(const gguf_model *model, uint32_t shard);

/* Metadata. */
uint64_t gguf_kv_count(const gguf_model *model);
const gguf_kv *gguf_kv_at(const gguf_model *model, uint64_t index);
const gguf_kv *gguf_find_kv(const gguf_model *model, const char *key); /* NULL if absent */

/* Typed getters. Each returns true and stores the value when key exists and
 * is convertible: integer getters accept any integer type (and BOOL) whose
 * value fits, float getters accept FLOAT32/FLOAT64 (and integers). A missing
 * key returns false and leaves *out unchanged. */
bool gguf_get_int(const gguf_model *model, const char *key, int64_t *out);
bool gguf_get_uint32(const gguf_model *model, const char *key, uint32_t *out);
bool gguf_get_float(const gguf_model *model, const char *key, float *out);
bool gguf_get_bool(const gguf_model *model, const char *key, bool *out);
bool gguf_get_string(const gguf_model *model, const char *key, gguf_string *out);

/* Array access. Element index must be < kv->array_count; the element type
 * must be scalar (integer elements convert like gguf_get_int). */
int64_t gguf_array_int(const gguf_kv *kv, uint64_t index);
double gguf_array_float(const gguf_kv *kv, uint64_t index);
/* Fills out[0..array_count) with the strings of a string array; returns false
 * if the kv is not an array of strings. O(n). */
bool gguf_array_strings(const gguf_kv *kv, gguf_string *out);
/* A view of element index of an array as a gguf_kv (key: the array's key):
 * scalars and strings as scalar kvs, a nested array as an ARRAY kv, so
 * arrays of arrays can be walked with the same getters. O(index) for string
 * and nested elements. False if kv is not an array or index is out of range. */
bool gguf_array_element(const gguf_kv *kv, uint64_t index, gguf_kv *out);

/* "Scalar or per-layer array" keys (gguf.md 4.4): fills out[0..n_layer) from a
 * scalar (broadcast) or an array of exactly n_layer integers. Returns 1 on
 * success, 0 if the key is absent, -1 (with err) for a wrong-length array or
 * a non-integer type. */
int gguf_get_per_layer_uint32(const gguf_model *model, const char *key,
                              uint32_t n_layer, uint32_t *out, bmoe_error *err);

/* Tensors, in file order (shard 0 first). */
uint64_t gguf_tensor_count(const gguf_model *model);
const gguf_tensor *gguf_tensor_at(const gguf_model *model, uint64_t index);
/* What makes two files the same model (an expert profile counted on one
 * is refused by another): a hash of every tensor's name, type, shape and
 * place, the shards' sizes, and the first bytes of the first and the last
 * tensor (two files of one shape differ in their weights). */
uint64_t gguf_identity(const gguf_model *model);

/* The index of a tensor of this model (for gguf_tensor_at). */
uint64_t gguf_tensor_index(const gguf_model *model, const gguf_tensor *tensor);
const gguf_tensor *gguf_find_tensor(const gguf_model *model, const char *name);

/* bmoe-cli --info: metadata (long arrays abbreviated), the tensor table and
 * totals (parameters, bytes per type, expert vs dense bytes). */
void gguf_print_info(const gguf_model *model, FILE *out);

/* ---- Writer ------------------------------------------------------------
 * Streams a GGUF v3 file with small memory: add all metadata and tensor
 * infos first, then write each tensor's data in the order the infos were
 * added (padding is inserted by the writer). The bytes go to a temporary
 * file beside the target, which only replaces the target once complete and
 * synced; a target that is not a regular file (a device, FIFO, directory) is
 * refused by gguf_writer_create, and a symbolic link is written through. */
typedef struct gguf_writer gguf_writer;

gguf_writer *gguf_writer_create(const char *path, bmoe_error *err);
int gguf_writer_set_alignment(gguf_writer *writer, uint32_t alignment); /* also writes general.alignment */
int gguf_writer_add_uint32(gguf_writer *writer, const char *key, uint32_t value);
int gguf_writer_add_int32(gguf_writer *writer, const char *key, int32_t value);
int gguf_writer_add_uint64(gguf_writer *writer, const char *key, uint64_t value);
int gguf_writer_add_uint16(gguf_writer *writer, const char *key, uint16_t value);
int gguf_writer_add_float32(gguf_writer *writer, const char *key, float value);
int gguf_writer_add_bool(gguf_writer *writer, const char *key, bool value);
int gguf_writer_add_string(gguf_writer *writer, const char *key, const char *value);
/* Array of scalars: count elements of element_type packed little-endian in data. */
int gguf_writer_add_array(gguf_writer *writer, const char *key, enum gguf_value_type element_type,
                          uint64_t count, const void *data);
int gguf_writer_add_string_array(gguf_writer *writer, const char *key, uint64_t count,
                                 const char *const *strings);
int gguf_writer_add_tensor_info(gguf_writer *writer, const char *name, uint32_t type,
                                uint32_t n_dims, const int64_t *ne);
/* Writes the header, metadata and tensor infos (call once, after all adds). */
int gguf_writer_begin_data(gguf_writer *writer);
/* Appends data of the next tensor; may be called several times per tensor
 * with consecutive pieces; the writer checks each tensor gets exactly its size. */
int gguf_writer_write_data(gguf_writer *writer, const void *data, size_t nbytes);
/* Pads, flushes and closes the temporary file; returns -1 with the first
 * failure of any step (the reason of a failed write included). The target
 * is not touched yet. */
int gguf_writer_complete(gguf_writer *writer, bmoe_error *err);
/* Syncs the completed temporary file and renames it over the target. */
int gguf_writer_publish(gguf_writer *writer, bmoe_error *err);
/* gguf_writer_complete, gguf_writer_publish and gguf_writer_destroy. */
int gguf_writer_finish(gguf_writer *writer, bmoe_error *err);
/* Frees a writer; an unpublished temporary file is removed (the target is
 * never touched). */
void gguf_writer_destroy(gguf_writer *writer);

#endif
