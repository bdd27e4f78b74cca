/* GGUF parser: turns the bytes of one file (a shard) into its key/value index
 * and tensor table, enforcing every structural rule of gguf.md. Input is
 * hostile until proven otherwise: every length and count is checked against
 * the bytes that remain before anything is read or allocated from it, so a
 * malformed file costs at most linear time and memory in its own size. */
#define _GNU_SOURCE /* qsort_r */
#include "gguf_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../base/text.h"
#include "../quant/quant.h"

/* Smallest encodings, used to reject counts that cannot fit in the file
 * before allocating for them: a key/value needs a length, one key byte, a
 * type and a one-byte value; a tensor info needs a length, one name byte,
 * n_dims, one dimension, a type and an offset. */
#define GGUF_HEADER_BYTES 24
#define GGUF_MIN_KV_BYTES (8 + 1 + 4 + 1)
#define GGUF_MIN_TENSOR_INFO_BYTES (8 + 1 + 4 + 8 + 4 + 8)

typedef struct cursor {
    const uint8_t *base;
    uint64_t size;
    uint64_t pos;
    const char *path;
    bmoe_error *err;
    char context[112]; /* "key 'x': " or "tensor 'y': " while inside one */
} cursor;

uint64_t gguf_scalar_size(uint32_t type)
{
    switch (type) {
    case GGUF_TYPE_UINT8:
    case GGUF_TYPE_INT8:
    case GGUF_TYPE_BOOL:
        return 1;
    case GGUF_TYPE_UINT16:
    case GGUF_TYPE_INT16:
        return 2;
    case GGUF_TYPE_UINT32:
    case GGUF_TYPE_INT32:
    case GGUF_TYPE_FLOAT32:
        return 4;
    case GGUF_TYPE_UINT64:
    case GGUF_TYPE_INT64:
    case GGUF_TYPE_FLOAT64:
        return 8;
    default:
        return 0;
    }
}

const char *gguf_type_name(uint32_t type)
{
    static const char *const names[GGUF_TYPE_COUNT] = {
        "UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "FLOAT32",
        "BOOL", "STRING", "ARRAY", "UINT64", "INT64", "FLOAT64",
    };
    return type < GGUF_TYPE_COUNT ? names[type] : "?";
}

uint64_t gguf_element_size(uint32_t type, const uint8_t *p)
{
    if (type == GGUF_TYPE_STRING)
        return 8 + gguf_load_u64(p);
    if (type == GGUF_TYPE_ARRAY) {
        uint32_t element_type = gguf_load_u32(p);
        uint64_t count = gguf_load_u64(p + 4);
        uint64_t scalar = gguf_scalar_size(element_type);
        if (scalar)
            return 12 + count * scalar;
        uint64_t bytes = 12;
        for (uint64_t i = 0; i < count; i++)
            bytes += gguf_element_size(element_type, p + bytes);
        return bytes;
    }
    return gguf_scalar_size(type);
}

static bool cursor_need(cursor *c, uint64_t bytes, const char *what)
{
    if (bytes <= c->size - c->pos)
        return true;
    error_set(c->err, "%s: %s%s at offset %" PRIu64 " needs %" PRIu64 " bytes but the file ends at %" PRIu64,
              c->path, c->context, what, c->pos, bytes, c->size);
    return false;
}

static bool cursor_u32(cursor *c, uint32_t *out, const char *what)
{
    if (!cursor_need(c, 4, what))
        return false;
    *out = gguf_load_u32(c->base + c->pos);
    c->pos += 4;
    return true;
}

static bool cursor_u64(cursor *c, uint64_t *out, const char *what)
{
    if (!cursor_need(c, 8, what))
        return false;
    *out = gguf_load_u64(c->base + c->pos);
    c->pos += 8;
    return true;
}

/* A string: its length, then that many bytes; *out points into the file. */
static bool cursor_string(cursor *c, const uint8_t **out, uint64_t *length, const char *what)
{
    if (!cursor_u64(c, length, what))
        return false;
    if (*length > c->size - c->pos) {
        error_set(c->err, "%s: %s%s at offset %" PRIu64 " has length %" PRIu64
                  " which runs past the end of the file (%" PRIu64 " bytes)",
                  c->path, c->context, what, c->pos - 8, *length, c->size);
        return false;
    }
    *out = c->base + c->pos;
    c->pos += *length;
    return true;
}

/* Skips one value of the given type, checking every length it contains. */
static bool cursor_skip_value(cursor *c, uint32_t type, int depth)
{
    if (type >= GGUF_TYPE_COUNT) {
        error_set(c->err, "%s: %sunknown value type %" PRIu32 " at offset %" PRIu64, c->path, c->context, type,
                  c->pos);
        return false;
    }
    uint64_t scalar = gguf_scalar_size(type);
    if (scalar) {
        if (!cursor_need(c, scalar, "value"))
            return false;
        c->pos += scalar;
        return true;
    }
    if (type == GGUF_TYPE_STRING) {
        const uint8_t *bytes;
        uint64_t length;
        return cursor_string(c, &bytes, &length, "string value");
    }
    /* ARRAY */
    uint64_t header_pos = c->pos;
    uint32_t element_type;
    uint64_t count;
    if (!cursor_u32(c, &element_type, "array element type") || !cursor_u64(c, &count, "array count"))
        return false;
    if (element_type >= GGUF_TYPE_COUNT) {
        error_set(c->err, "%s: %sarray at offset %" PRIu64 " has unknown element type %" PRIu32, c->path,
                  c->context, header_pos, element_type);
        return false;
    }
    if (element_type == GGUF_TYPE_ARRAY && depth + 1 >= GGUF_MAX_ARRAY_DEPTH) {
        error_set(c->err, "%s: %sarrays nested deeper than %d levels at offset %" PRIu64, c->path, c->context,
                  GGUF_MAX_ARRAY_DEPTH, header_pos);
        return false;
    }
    uint64_t element_scalar = gguf_scalar_size(element_type);
    /* Every element takes at least this many bytes: a count that cannot fit
     * is rejected before walking it. */
    uint64_t min_element = element_scalar ? element_scalar : element_type == GGUF_TYPE_STRING ? 8 : 12;
    if (count > (c->size - c->pos) / min_element) {
        error_set(c->err, "%s: %sarray at offset %" PRIu64 " of %" PRIu64 " %s elements"
                  " runs past the end of the file (%" PRIu64 " bytes)",
                  c->path, c->context, header_pos, count, gguf_type_name(element_type), c->size);
        return false;
    }
    if (element_scalar) {
        c->pos += count * element_scalar;
        return true;
    }
    for (uint64_t i = 0; i < count; i++)
        if (!cursor_skip_value(c, element_type, depth + 1))
            return false;
    return true;
}

static int compare_keys(const void *a, const void *b, void *kvs)
{
    const gguf_kv *list = kvs;
    return strcmp(list[*(const uint64_t *)a].key, list[*(const uint64_t *)b].key);
}

static int compare_tensor_offsets(const void *a, const void *b, void *tensors)
{
    const gguf_tensor *list = tensors;
    uint64_t x = list[*(const uint64_t *)a].file_offset, y = list[*(const uint64_t *)b].file_offset;
    return x < y ? -1 : x > y;
}

/* A name in the file must be usable as a C string: non-empty, no NUL inside.
 * Sets the cursor's context to it for the messages that follow. */
static bool check_name(cursor *c, const uint8_t *bytes, uint64_t length, const char *what, uint64_t index)
{
    char shown[80];
    text_escape(bytes, (size_t)length, shown, sizeof shown);
    snprintf(c->context, sizeof c->context, "%s '%s': ", what, shown);
    if (length == 0) {
        error_set(c->err, "%s: %s %" PRIu64 " %s (offset %" PRIu64 ")", c->path, what, index,
                  strcmp(what, "key") == 0 ? "is empty" : "has an empty name", c->pos - 8);
        return false;
    }
    if (memchr(bytes, 0, length)) {
        error_set(c->err, "%s: %s %" PRIu64 " ('%s') contains a NUL byte", c->path, what, index, shown);
        return false;
    }
    return true;
}

static int parse_header(cursor *c, gguf_shard *shard, uint64_t *tensor_count, uint64_t *kv_count)
{
    if (c->size < 4 || memcmp(c->base, "GGUF", 4) != 0)
        return error_set(c->err, "%s: not a GGUF file (bad magic; %" PRIu64 " bytes)", c->path, c->size);
    if (c->size < GGUF_HEADER_BYTES)
        return error_set(c->err, "%s: truncated header: file is %" PRIu64 " bytes, the header needs %d",
                         c->path, c->size, GGUF_HEADER_BYTES);
    c->pos = 4;
    uint32_t version;
    cursor_u32(c, &version, "version");
    if (version != 0 && (version & 0xffffu) == 0)
        return error_set(c->err, "%s: version field 0x%08" PRIx32 " looks byte-swapped: big-endian GGUF files"
                         " are not supported", c->path, version);
    if (version != 2 && version != 3)
        return error_set(c->err, "%s: unsupported GGUF version %" PRIu32 " (only 2 and 3 are read)",
                         c->path, version);
    cursor_u64(c, tensor_count, "tensor count");
    cursor_u64(c, kv_count, "key/value count");
    shard->version = version;

    uint64_t remaining = c->size - c->pos;
    if (*kv_count > remaining / GGUF_MIN_KV_BYTES)
        return error_set(c->err, "%s: key/value count %" PRIu64 " cannot fit in the %" PRIu64
                         " bytes after the header", c->path, *kv_count, remaining);
    remaining -= *kv_count * GGUF_MIN_KV_BYTES;
    if (*tensor_count > remaining / GGUF_MIN_TENSOR_INFO_BYTES)
        return error_set(c->err, "%s: tensor count %" PRIu64 " cannot fit in the %" PRIu64
                         " bytes after the header", c->path, *tensor_count, c->size - c->pos);
    return 0;
}

static int parse_kv(cursor *c, gguf_kv *kv, uint64_t index, const uint8_t **key, uint64_t *key_length)
{
    if (!cursor_string(c, key, key_length, "key") || !check_name(c, *key, *key_length, "key", index))
        return -1;
    uint32_t type;
    if (!cursor_u32(c, &type, "value type"))
        return -1;
    uint64_t value_pos = c->pos;
    if (!cursor_skip_value(c, type, 0))
        return -1;
    kv->type = (enum gguf_value_type)type;
    if (type == GGUF_TYPE_ARRAY) {
        kv->array_type = (enum gguf_value_type)gguf_load_u32(c->base + value_pos);
        kv->array_count = gguf_load_u64(c->base + value_pos + 4);
        kv->payload = c->base + value_pos + 12;
        kv->payload_bytes = c->pos - value_pos - 12;
    } else {
        kv->array_type = kv->type;
        kv->array_count = 0;
        kv->payload = c->base + value_pos;
        kv->payload_bytes = c->pos - value_pos;
    }
    return 0;
}

/* Reads general.alignment (UINT32, nonzero, power of two) or the default.
 * Runs before the keys are copied out, so it compares the raw bytes. */
static int parse_alignment(cursor *c, gguf_shard *shard, const uint8_t **keys, const uint64_t *key_lengths)
{
    static const char name[] = "general.alignment";
    shard->alignment = GGUF_DEFAULT_ALIGNMENT;
    for (uint64_t i = 0; i < shard->kv_count; i++) {
        if (key_lengths[i] != sizeof name - 1 || memcmp(keys[i], name, sizeof name - 1) != 0)
            continue;
        const gguf_kv *kv = &shard->kvs[i];
        if (kv->type != GGUF_TYPE_UINT32)
            return error_set(c->err, "%s: general.alignment must be UINT32, not %s", c->path,
                             gguf_type_name(kv->type));
        uint32_t alignment = gguf_load_u32(kv->payload);
        if (alignment == 0 || (alignment & (alignment - 1)) != 0)
            return error_set(c->err, "%s: general.alignment %" PRIu32 " is not a nonzero power of two",
                             c->path, alignment);
        shard->alignment = alignment;
    }
    return 0;
}

static int parse_tensor_info(cursor *c, gguf_shard *shard, uint64_t index, const uint8_t **name,
                             uint64_t *name_length)
{
    gguf_tensor *tensor = &shard->tensors[index];
    if (!cursor_string(c, name, name_length, "tensor name") ||
        !check_name(c, *name, *name_length, "tensor", index))
        return -1;
    if (!cursor_u32(c, &tensor->n_dims, "n_dims"))
        return -1;
    if (tensor->n_dims == 0 || tensor->n_dims > GGUF_MAX_DIMS)
        return error_set(c->err, "%s: %sn_dims is %" PRIu32 " (must be 1..%d)", c->path, c->context,
                         tensor->n_dims, GGUF_MAX_DIMS);
    for (int d = 0; d < GGUF_MAX_DIMS; d++) {
        uint64_t ne = 1;
        if ((uint32_t)d < tensor->n_dims && !cursor_u64(c, &ne, "dimension"))
            return -1;
        if (ne > INT64_MAX)
            return error_set(c->err, "%s: %snegative dimension ne[%d] = %" PRId64, c->path, c->context, d,
                             (int64_t)ne);
        tensor->ne[d] = (int64_t)ne;
    }
    uint64_t offset;
    if (!cursor_u32(c, &tensor->type, "type") || !cursor_u64(c, &offset, "data offset"))
        return -1;

    const quant_format *format = quant_format_of(tensor->type);
    if (!format)
        return error_set(c->err, "%s: %sunknown tensor type %" PRId32, c->path, c->context, (int32_t)tensor->type);
    int64_t elements = 1;
    for (int d = 0; d < GGUF_MAX_DIMS; d++)
        if (__builtin_mul_overflow(elements, tensor->ne[d], &elements))
            return error_set(c->err, "%s: %selement count %" PRId64 " x %" PRId64 " x %" PRId64 " x %" PRId64
                             " overflows", c->path, c->context, tensor->ne[0], tensor->ne[1], tensor->ne[2],
                             tensor->ne[3]);
    if (tensor->ne[0] % format->block_elems != 0)
        return error_set(c->err, "%s: %sne0 = %" PRId64 " is not a multiple of the %s block size %d", c->path,
                         c->context, tensor->ne[0], format->name, format->block_elems);
    uint64_t nbytes = (uint64_t)(tensor->ne[0] / format->block_elems);
    bool overflow = __builtin_mul_overflow(nbytes, (uint64_t)format->block_bytes, &nbytes);
    for (int d = 1; d < GGUF_MAX_DIMS; d++)
        overflow |= __builtin_mul_overflow(nbytes, (uint64_t)tensor->ne[d], &nbytes);
    if (overflow)
        return error_set(c->err, "%s: %sbyte size overflows", c->path, c->context);
    if (offset % shard->alignment != 0)
        return error_set(c->err, "%s: %sdata offset %" PRIu64 " is not a multiple of the alignment %" PRIu32
                         " (general.alignment, or 32 when absent)",
                         c->path, c->context, offset, shard->alignment);
    tensor->nbytes = nbytes;
    tensor->file_offset = offset; /* relative until data_start is known */
    tensor->shard = 0;
    return 0;
}

/* Copies every key and tensor name out of the file as C strings, in one block. */
static int copy_names(cursor *c, gguf_shard *shard, const uint8_t **keys, const uint64_t *key_lengths,
                      const uint8_t **names, const uint64_t *name_lengths)
{
    uint64_t total = 1;
    for (uint64_t i = 0; i < shard->kv_count; i++)
        total += key_lengths[i] + 1;
    for (uint64_t i = 0; i < shard->tensor_count; i++)
        total += name_lengths[i] + 1;
    shard->strings = malloc(total);
    if (!shard->strings)
        return error_set(c->err, "%s: out of memory for %" PRIu64 " bytes of names", c->path, total);
    char *next = shard->strings;
    for (uint64_t i = 0; i < shard->kv_count + shard->tensor_count; i++) {
        bool is_key = i < shard->kv_count;
        uint64_t j = is_key ? i : i - shard->kv_count;
        uint64_t length = is_key ? key_lengths[j] : name_lengths[j];
        memcpy(next, is_key ? keys[j] : names[j], length);
        next[length] = '\0';
        if (is_key)
            shard->kvs[j].key = next;
        else
            shard->tensors[j].name = next;
        next += length + 1;
    }
    return 0;
}

static int check_duplicate_keys(cursor *c, gguf_shard *shard)
{
    if (shard->kv_count < 2)
        return 0;
    uint64_t *order = malloc(shard->kv_count * sizeof *order);
    if (!order)
        return error_set(c->err, "%s: out of memory sorting %" PRIu64 " keys", c->path, shard->kv_count);
    for (uint64_t i = 0; i < shard->kv_count; i++)
        order[i] = i;
    qsort_r(order, shard->kv_count, sizeof *order, compare_keys, shard->kvs);
    int status = 0;
    for (uint64_t i = 1; i < shard->kv_count && status == 0; i++) {
        const char *key = shard->kvs[order[i]].key;
        if (strcmp(shard->kvs[order[i - 1]].key, key) == 0) {
            char shown[96];
            text_escape_string(key, shown, sizeof shown);
            status = error_set(c->err, "%s: duplicate key '%s'", c->path, shown);
        }
    }
    free(order);
    return status;
}

/* Tensor data must lie inside the file, and no two tensors may share bytes. */
static int check_tensor_placement(cursor *c, gguf_shard *shard)
{
    for (uint64_t i = 0; i < shard->tensor_count; i++) {
        gguf_tensor *tensor = &shard->tensors[i];
        uint64_t relative = tensor->file_offset;
        uint64_t start, end;
        char shown[80];
        if (__builtin_add_overflow(shard->data_start, relative, &start) || start > shard->size)
            return error_set(c->err, "%s: tensor '%s': data offset %" PRIu64 " is past the end of the file (%" PRIu64
                             " bytes, data section from offset %" PRIu64 ")", c->path,
                             text_escape_string(tensor->name, shown, sizeof shown), relative, shard->size,
                             shard->data_start);
        if (__builtin_add_overflow(start, tensor->nbytes, &end) || end > shard->size)
            return error_set(c->err, "%s: tensor '%s': %" PRIu64 " bytes of data at file offset %" PRIu64
                             " run past the end of the file (%" PRIu64 " bytes)", c->path,
                             text_escape_string(tensor->name, shown, sizeof shown), tensor->nbytes, start,
                             shard->size);
        tensor->file_offset = start;
        tensor->data = shard->base + start;
    }
    if (shard->tensor_count < 2)
        return 0;
    uint64_t *order = malloc(shard->tensor_count * sizeof *order);
    if (!order)
        return error_set(c->err, "%s: out of memory sorting %" PRIu64 " tensors", c->path, shard->tensor_count);
    for (uint64_t i = 0; i < shard->tensor_count; i++)
        order[i] = i;
    qsort_r(order, shard->tensor_count, sizeof *order, compare_tensor_offsets, shard->tensors);
    const gguf_tensor *previous = NULL;
    int status = 0;
    for (uint64_t i = 0; i < shard->tensor_count; i++) {
        const gguf_tensor *tensor = &shard->tensors[order[i]];
        if (tensor->nbytes == 0) /* an empty tensor shares no bytes with anyone */
            continue;
        if (previous && previous->file_offset + previous->nbytes > tensor->file_offset) {
            char first[80], second[80];
            text_escape_string(previous->name, first, sizeof first);
            text_escape_string(tensor->name, second, sizeof second);
            status = error_set(c->err, "%s: tensors '%s' and '%s' overlap (%" PRIu64 " bytes at file offset %" PRIu64
                               ", %" PRIu64 " at %" PRIu64 ")", c->path, first, second, previous->nbytes,
                               previous->file_offset, tensor->nbytes, tensor->file_offset);
            break;
        }
        previous = tensor;
    }
    free(order);
    return status;
}

/* Everything after the header. keys/names receive pointers into the file. */
static int parse_body(cursor *c, gguf_shard *shard, const uint8_t **keys, uint64_t *key_lengths,
                      const uint8_t **names, uint64_t *name_lengths)
{
    for (uint64_t i = 0; i < shard->kv_count; i++)
        if (parse_kv(c, &shard->kvs[i], i, &keys[i], &key_lengths[i]) != 0)
            return -1;
    c->context[0] = '\0';
    if (parse_alignment(c, shard, keys, key_lengths) != 0)
        return -1;
    for (uint64_t i = 0; i < shard->tensor_count; i++)
        if (parse_tensor_info(c, shard, i, &names[i], &name_lengths[i]) != 0)
            return -1;
    c->context[0] = '\0';
    if (copy_names(c, shard, keys, key_lengths, names, name_lengths) != 0 || check_duplicate_keys(c, shard) != 0)
        return -1;

    shard->data_start = c->pos;
    if (shard->tensor_count > 0) {
        uint64_t aligned = (c->pos + shard->alignment - 1) / shard->alignment * shard->alignment;
        if (aligned > c->size)
            return error_set(c->err, "%s: file ends at %" PRIu64 " before the data section starts at %" PRIu64,
                             c->path, c->size, aligned);
        shard->data_start = aligned;
    }
    return check_tensor_placement(c, shard);
}

int gguf_parse_shard(gguf_shard *shard, bmoe_error *err)
{
    cursor c = {.base = shard->base, .size = shard->size, .pos = 0, .path = shard->path, .err = err};
    uint64_t tensor_count, kv_count;
    if (parse_header(&c, shard, &tensor_count, &kv_count) != 0)
        return -1;
    /* Both counts are now known to fit in the file, so these allocations are
     * bounded by the file's size. */
    shard->kv_count = kv_count;
    shard->tensor_count = tensor_count;
    size_t kv_slots = kv_count ? kv_count : 1, tensor_slots = tensor_count ? tensor_count : 1;
    shard->kvs = calloc(kv_slots, sizeof *shard->kvs);
    shard->tensors = calloc(tensor_slots, sizeof *shard->tensors);
    const uint8_t **keys = calloc(kv_slots, sizeof *keys);
    uint64_t *key_lengths = calloc(kv_slots, sizeof *key_lengths);
    const uint8_t **names = calloc(tensor_slots, sizeof *names);
    uint64_t *name_lengths = calloc(tensor_slots, sizeof *name_lengths);
    int status;
    if (!shard->kvs || !shard->tensors || !keys || !key_lengths || !names || !name_lengths)
        status = error_set(err, "%s: out of memory for %" PRIu64 " keys and %" PRIu64 " tensors", shard->path,
                           kv_count, tensor_count);
    else
        status = parse_body(&c, shard, keys, key_lengths, names, name_lengths);
    free(keys);
    free(key_lengths);
    free(names);
    free(name_lengths);
    if (status != 0) {
        free(shard->kvs);
        free(shard->tensors);
        free(shard->strings);
        shard->kvs = NULL;
        shard->tensors = NULL;
        shard->strings = NULL;
        shard->kv_count = shard->tensor_count = 0;
    }
    return status;
}
