/* GGUF v3 writer: collects metadata and tensor infos in memory (small), then
 * streams the header and each tensor's data straight to a temporary file
 * beside the target (base/file.h), inserting the alignment padding and
 * computing offsets from the tensor sizes; the finished file is synced and
 * renamed over the target, so a failure never damages an existing file. The
 * first failure is kept and reported by gguf_writer_complete (or _finish),
 * so callers can chain adds without checking each one. */
#include "gguf.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/file.h"
#include "../quant/quant.h"

typedef struct writer_tensor {
    char *name;
    uint32_t type;
    uint32_t n_dims;
    int64_t ne[GGUF_MAX_DIMS];
    uint64_t nbytes;
    uint64_t offset;
} writer_tensor;

struct gguf_writer {
    file_replacement file;      /* the temporary file and the target */
    FILE *stream;               /* buffered writes into the temporary */
    char *path;                 /* as given, for messages */
    bool completed;             /* data written, flushed and closed */
    uint32_t alignment;
    uint8_t *metadata;          /* encoded key/value records */
    size_t metadata_bytes, metadata_capacity;
    char **keys;                /* for duplicate checks */
    uint64_t kv_count, keys_capacity;
    size_t alignment_value_at;  /* offset of general.alignment's value in metadata, or SIZE_MAX */
    writer_tensor *tensors;
    uint64_t tensor_count, tensors_capacity;
    bool data_begun;
    uint64_t current;           /* tensor receiving data */
    uint64_t current_written;   /* its bytes so far */
    bool failed;
    bmoe_error error;
};

static int writer_fail(gguf_writer *writer, const char *fmt, const char *detail)
{
    if (!writer->failed) {
        writer->failed = true;
        error_set(&writer->error, fmt, writer->path, detail ? detail : "");
    }
    return -1;
}

static bool grow(void **items, uint64_t *capacity, uint64_t needed, size_t item_size)
{
    if (needed <= *capacity)
        return true;
    uint64_t next = *capacity ? *capacity * 2 : 16;
    while (next < needed)
        next *= 2;
    void *grown = realloc(*items, next * item_size);
    if (!grown)
        return false;
    *items = grown;
    *capacity = next;
    return true;
}

static int append(gguf_writer *writer, const void *bytes, size_t length)
{
    uint64_t capacity = writer->metadata_capacity;
    if (!grow((void **)&writer->metadata, &capacity, writer->metadata_bytes + length, 1))
        return writer_fail(writer, "%s: out of memory for metadata%s", NULL);
    writer->metadata_capacity = (size_t)capacity;
    if (length)
        memcpy(writer->metadata + writer->metadata_bytes, bytes, length);
    writer->metadata_bytes += length;
    return 0;
}

static int append_u32(gguf_writer *writer, uint32_t value)
{
    uint8_t bytes[4] = {(uint8_t)value, (uint8_t)(value >> 8), (uint8_t)(value >> 16), (uint8_t)(value >> 24)};
    return append(writer, bytes, sizeof bytes);
}

static int append_u64(gguf_writer *writer, uint64_t value)
{
    if (append_u32(writer, (uint32_t)value) != 0)
        return -1;
    return append_u32(writer, (uint32_t)(value >> 32));
}

static int append_string(gguf_writer *writer, const char *s)
{
    size_t length = strlen(s);
    if (append_u64(writer, length) != 0)
        return -1;
    return append(writer, s, length);
}

/* Starts a record: checks the writer state and the key, then writes the key
 * and the value type. */
static int begin_record(gguf_writer *writer, const char *key, enum gguf_value_type type)
{
    if (writer->failed)
        return -1;
    if (writer->data_begun)
        return writer_fail(writer, "%s: key '%s' added after gguf_writer_begin_data", key);
    if (!key || !*key)
        return writer_fail(writer, "%s: empty key%s", NULL);
    for (uint64_t i = 0; i < writer->kv_count; i++)
        if (strcmp(writer->keys[i], key) == 0)
            return writer_fail(writer, "%s: duplicate key '%s'", key);
    if (!grow((void **)&writer->keys, &writer->keys_capacity, writer->kv_count + 1, sizeof *writer->keys))
        return writer_fail(writer, "%s: out of memory adding key '%s'", key);
    size_t length = strlen(key) + 1;
    char *copy = malloc(length);
    if (!copy)
        return writer_fail(writer, "%s: out of memory adding key '%s'", key);
    memcpy(copy, key, length);
    writer->keys[writer->kv_count++] = copy;
    if (append_string(writer, key) != 0)
        return -1;
    return append_u32(writer, (uint32_t)type);
}

static int add_scalar(gguf_writer *writer, const char *key, enum gguf_value_type type, uint64_t bits)
{
    if (begin_record(writer, key, type) != 0)
        return -1;
    uint8_t bytes[8];
    for (int i = 0; i < 8; i++)
        bytes[i] = (uint8_t)(bits >> (8 * i));
    return append(writer, bytes, gguf_scalar_size(type));
}

gguf_writer *gguf_writer_create(const char *path, bmoe_error *err)
{
    gguf_writer *writer = calloc(1, sizeof *writer);
    if (!writer) {
        error_set(err, "%s: out of memory", path);
        return NULL;
    }
    size_t length = strlen(path) + 1;
    writer->path = malloc(length);
    if (!writer->path) {
        free(writer);
        error_set(err, "%s: out of memory", path);
        return NULL;
    }
    memcpy(writer->path, path, length);
    writer->alignment = GGUF_DEFAULT_ALIGNMENT;
    writer->alignment_value_at = SIZE_MAX;
    if (file_replacement_begin(&writer->file, path, err) != 0) {
        free(writer->path);
        free(writer);
        return NULL;
    }
    /* The stream writes through its own descriptor, so that closing it
     * leaves the replacement's descriptor open for the sync. */
    int stream_fd = dup(writer->file.fd);
    writer->stream = stream_fd >= 0 ? fdopen(stream_fd, "wb") : NULL;
    if (!writer->stream) {
        error_set(err, "%s: cannot open a stream on %s: %s", path, writer->file.temporary, strerror(errno));
        if (stream_fd >= 0)
            close(stream_fd);
        file_replacement_release(&writer->file);
        free(writer->path);
        free(writer);
        return NULL;
    }
    return writer;
}

int gguf_writer_set_alignment(gguf_writer *writer, uint32_t alignment)
{
    if (writer->failed)
        return -1;
    if (alignment == 0 || (alignment & (alignment - 1)) != 0)
        return writer_fail(writer, "%s: alignment must be a nonzero power of two%s", NULL);
    if (writer->data_begun)
        return writer_fail(writer, "%s: alignment set after gguf_writer_begin_data%s", NULL);
    writer->alignment = alignment;
    if (writer->alignment_value_at != SIZE_MAX) {
        uint8_t *p = writer->metadata + writer->alignment_value_at;
        for (int i = 0; i < 4; i++)
            p[i] = (uint8_t)(alignment >> (8 * i));
        return 0;
    }
    if (add_scalar(writer, "general.alignment", GGUF_TYPE_UINT32, alignment) != 0)
        return -1;
    writer->alignment_value_at = writer->metadata_bytes - 4;
    return 0;
}

int gguf_writer_add_uint32(gguf_writer *writer, const char *key, uint32_t value)
{
    if (key && strcmp(key, "general.alignment") == 0)
        return gguf_writer_set_alignment(writer, value);
    return add_scalar(writer, key, GGUF_TYPE_UINT32, value);
}

int gguf_writer_add_int32(gguf_writer *writer, const char *key, int32_t value)
{
    return add_scalar(writer, key, GGUF_TYPE_INT32, (uint32_t)value);
}

int gguf_writer_add_uint64(gguf_writer *writer, const char *key, uint64_t value)
{
    return add_scalar(writer, key, GGUF_TYPE_UINT64, value);
}

int gguf_writer_add_uint16(gguf_writer *writer, const char *key, uint16_t value)
{
    return add_scalar(writer, key, GGUF_TYPE_UINT16, value);
}

int gguf_writer_add_float32(gguf_writer *writer, const char *key, float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    return add_scalar(writer, key, GGUF_TYPE_FLOAT32, bits);
}

int gguf_writer_add_bool(gguf_writer *writer, const char *key, bool value)
{
    return add_scalar(writer, key, GGUF_TYPE_BOOL, value ? 1 : 0);
}

int gguf_writer_add_string(gguf_writer *writer, const char *key, const char *value)
{
    if (begin_record(writer, key, GGUF_TYPE_STRING) != 0)
        return -1;
    return append_string(writer, value ? value : "");
}

int gguf_writer_add_array(gguf_writer *writer, const char *key, enum gguf_value_type element_type,
                          uint64_t count, const void *data)
{
    uint64_t size = gguf_scalar_size(element_type);
    if (size == 0) {
        if (writer->failed)
            return -1;
        return writer_fail(writer, "%s: array '%s' needs a scalar element type", key);
    }
    if (count > SIZE_MAX / size)
        return writer_fail(writer, "%s: array '%s' is too large", key);
    if (begin_record(writer, key, GGUF_TYPE_ARRAY) != 0 || append_u32(writer, (uint32_t)element_type) != 0 ||
        append_u64(writer, count) != 0)
        return -1;
    return append(writer, data, (size_t)(count * size));
}

int gguf_writer_add_string_array(gguf_writer *writer, const char *key, uint64_t count,
                                 const char *const *strings)
{
    if (begin_record(writer, key, GGUF_TYPE_ARRAY) != 0 || append_u32(writer, GGUF_TYPE_STRING) != 0 ||
        append_u64(writer, count) != 0)
        return -1;
    for (uint64_t i = 0; i < count; i++)
        if (append_string(writer, strings[i] ? strings[i] : "") != 0)
            return -1;
    return 0;
}

int gguf_writer_add_tensor_info(gguf_writer *writer, const char *name, uint32_t type, uint32_t n_dims,
                                const int64_t *ne)
{
    if (writer->failed)
        return -1;
    if (writer->data_begun)
        return writer_fail(writer, "%s: tensor '%s' added after gguf_writer_begin_data", name);
    if (!name || !*name)
        return writer_fail(writer, "%s: empty tensor name%s", NULL);
    if (n_dims == 0 || n_dims > GGUF_MAX_DIMS)
        return writer_fail(writer, "%s: tensor '%s': n_dims must be 1..4", name);
    const quant_format *format = quant_format_of(type);
    if (!format)
        return writer_fail(writer, "%s: tensor '%s': unknown tensor type", name);
    for (uint64_t i = 0; i < writer->tensor_count; i++)
        if (strcmp(writer->tensors[i].name, name) == 0)
            return writer_fail(writer, "%s: duplicate tensor name '%s'", name);
    writer_tensor tensor = {.type = type, .n_dims = n_dims, .ne = {1, 1, 1, 1}};
    for (uint32_t d = 0; d < n_dims; d++) {
        if (ne[d] < 0)
            return writer_fail(writer, "%s: tensor '%s': negative dimension", name);
        tensor.ne[d] = ne[d];
    }
    if (tensor.ne[0] % format->block_elems != 0)
        return writer_fail(writer, "%s: tensor '%s': ne0 is not a multiple of the type's block size", name);
    uint64_t nbytes = (uint64_t)(tensor.ne[0] / format->block_elems);
    bool overflow = __builtin_mul_overflow(nbytes, (uint64_t)format->block_bytes, &nbytes);
    for (int d = 1; d < GGUF_MAX_DIMS; d++)
        overflow |= __builtin_mul_overflow(nbytes, (uint64_t)tensor.ne[d], &nbytes);
    if (overflow)
        return writer_fail(writer, "%s: tensor '%s': byte size overflows", name);
    tensor.nbytes = nbytes;
    size_t length = strlen(name) + 1;
    tensor.name = malloc(length);
    if (!tensor.name || !grow((void **)&writer->tensors, &writer->tensors_capacity, writer->tensor_count + 1,
                              sizeof *writer->tensors)) {
        free(tensor.name);
        return writer_fail(writer, "%s: out of memory adding tensor '%s'", name);
    }
    memcpy(tensor.name, name, length);
    writer->tensors[writer->tensor_count++] = tensor;
    return 0;
}

static int write_bytes(gguf_writer *writer, const void *bytes, size_t length)
{
    if (writer->completed)
        return writer_fail(writer, "%s: data written after gguf_writer_complete%s", NULL);
    if (length && fwrite(bytes, 1, length, writer->stream) != length)
        return writer_fail(writer, "%s: write failed: %s", strerror(errno));
    return 0;
}

static int write_padding(gguf_writer *writer, uint64_t position)
{
    static const uint8_t zeros[256];
    uint64_t padding = (writer->alignment - position % writer->alignment) % writer->alignment;
    while (padding > 0) {
        size_t piece = padding < sizeof zeros ? (size_t)padding : sizeof zeros;
        if (write_bytes(writer, zeros, piece) != 0)
            return -1;
        padding -= piece;
    }
    return 0;
}

/* Moves past tensors with no data, which need no write_data call. */
static void skip_empty_tensors(gguf_writer *writer)
{
    while (writer->current < writer->tensor_count && writer->tensors[writer->current].nbytes == 0)
        writer->current++;
}

int gguf_writer_begin_data(gguf_writer *writer)
{
    if (writer->failed)
        return -1;
    if (writer->data_begun)
        return writer_fail(writer, "%s: gguf_writer_begin_data called twice%s", NULL);
    /* Offsets follow from the sizes: back to back, each padded to the alignment. */
    uint64_t offset = 0;
    for (uint64_t i = 0; i < writer->tensor_count; i++) {
        writer->tensors[i].offset = offset;
        uint64_t padded = writer->tensors[i].nbytes + (writer->alignment - 1);
        if (padded < writer->tensors[i].nbytes || __builtin_add_overflow(offset, padded / writer->alignment *
                                                                         writer->alignment, &offset))
            return writer_fail(writer, "%s: tensor data too large%s", NULL);
    }
    /* The tensor infos are encoded after the key/value records. */
    int status = 0;
    for (uint64_t i = 0; i < writer->tensor_count && status == 0; i++) {
        const writer_tensor *tensor = &writer->tensors[i];
        status |= append_string(writer, tensor->name);
        status |= append_u32(writer, tensor->n_dims);
        for (uint32_t d = 0; d < tensor->n_dims; d++)
            status |= append_u64(writer, (uint64_t)tensor->ne[d]);
        status |= append_u32(writer, tensor->type);
        status |= append_u64(writer, tensor->offset);
    }
    if (status != 0)
        return -1;
    uint8_t header[24] = {'G', 'G', 'U', 'F', 3, 0, 0, 0};
    for (int i = 0; i < 8; i++) {
        header[8 + i] = (uint8_t)(writer->tensor_count >> (8 * i));
        header[16 + i] = (uint8_t)(writer->kv_count >> (8 * i));
    }
    writer->data_begun = true;
    if (write_bytes(writer, header, sizeof header) != 0 ||
        write_bytes(writer, writer->metadata, writer->metadata_bytes) != 0)
        return -1;
    /* A file without tensors has no data section and so no padding (gguf.md 6). */
    if (writer->tensor_count > 0 && write_padding(writer, sizeof header + writer->metadata_bytes) != 0)
        return -1;
    free(writer->metadata);
    writer->metadata = NULL;
    writer->metadata_bytes = writer->metadata_capacity = 0;
    writer->current = 0;
    writer->current_written = 0;
    skip_empty_tensors(writer);
    return 0;
}

int gguf_writer_write_data(gguf_writer *writer, const void *data, size_t nbytes)
{
    if (writer->failed)
        return -1;
    if (!writer->data_begun)
        return writer_fail(writer, "%s: tensor data written before gguf_writer_begin_data%s", NULL);
    const uint8_t *bytes = data;
    while (nbytes > 0) {
        if (writer->current >= writer->tensor_count)
            return writer_fail(writer, "%s: more tensor data than the tensor infos describe%s", NULL);
        writer_tensor *tensor = &writer->tensors[writer->current];
        uint64_t left = tensor->nbytes - writer->current_written;
        size_t piece = nbytes < left ? nbytes : (size_t)left;
        if (write_bytes(writer, bytes, piece) != 0)
            return -1;
        bytes += piece;
        nbytes -= piece;
        writer->current_written += piece;
        if (writer->current_written == tensor->nbytes) {
            if (write_padding(writer, tensor->nbytes) != 0)
                return -1;
            writer->current++;
            writer->current_written = 0;
            skip_empty_tensors(writer);
        }
    }
    return 0;
}

void gguf_writer_destroy(gguf_writer *writer)
{
    if (!writer)
        return;
    if (writer->stream)
        fclose(writer->stream);
    file_replacement_release(&writer->file); /* removes an unpublished temporary */
    for (uint64_t i = 0; i < writer->kv_count; i++)
        free(writer->keys[i]);
    for (uint64_t i = 0; i < writer->tensor_count; i++)
        free(writer->tensors[i].name);
    free(writer->keys);
    free(writer->tensors);
    free(writer->metadata);
    free(writer->path);
    free(writer);
}

int gguf_writer_complete(gguf_writer *writer, bmoe_error *err)
{
    if (!writer->failed && writer->completed)
        writer_fail(writer, "%s: gguf_writer_complete called twice%s", NULL);
    if (!writer->failed && !writer->data_begun)
        gguf_writer_begin_data(writer);
    if (!writer->failed && writer->current < writer->tensor_count) {
        const writer_tensor *tensor = &writer->tensors[writer->current];
        char detail[200];
        snprintf(detail, sizeof detail, "'%.120s' got %" PRIu64 " of %" PRIu64 " bytes", tensor->name,
                 writer->current_written, tensor->nbytes);
        writer_fail(writer, "%s: finished before all tensor data was written: tensor %s", detail);
    }
    if (!writer->failed && fflush(writer->stream) != 0)
        writer_fail(writer, "%s: write failed: %s", strerror(errno));
    if (writer->stream && !writer->completed) {
        int closed = fclose(writer->stream);
        writer->stream = NULL;
        if (closed != 0)
            writer_fail(writer, "%s: write failed: %s", strerror(errno));
    }
    writer->completed = true;
    if (writer->failed)
        return error_set(err, "%s", writer->error.message);
    return 0;
}

int gguf_writer_publish(gguf_writer *writer, bmoe_error *err)
{
    if (writer->failed)
        return error_set(err, "%s", writer->error.message);
    if (!writer->completed)
        return error_set(err, "%s: gguf_writer_publish before gguf_writer_complete", writer->path);
    return file_replacement_commit(&writer->file, err);
}

int gguf_writer_finish(gguf_writer *writer, bmoe_error *err)
{
    int status = gguf_writer_complete(writer, err);
    if (status == 0)
        status = gguf_writer_publish(writer, err);
    gguf_writer_destroy(writer);
    return status;
}
