/* Typed access to GGUF metadata: the lenient conversions of gguf.md 4.3 (any
 * integer type for an integer key, integers or floats for a float key),
 * array element access including arrays of strings and of arrays, and the
 * "scalar or per-layer array" keys of gguf.md 4.4. Owns no memory. */
#include "gguf_internal.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

static bool is_integer_type(uint32_t type)
{
    switch (type) {
    case GGUF_TYPE_UINT8:
    case GGUF_TYPE_INT8:
    case GGUF_TYPE_UINT16:
    case GGUF_TYPE_INT16:
    case GGUF_TYPE_UINT32:
    case GGUF_TYPE_INT32:
    case GGUF_TYPE_UINT64:
    case GGUF_TYPE_INT64:
    case GGUF_TYPE_BOOL:
        return true;
    default:
        return false;
    }
}

/* An integer (or bool) scalar at p as int64; false when it is not an
 * integer type or a UINT64 beyond INT64_MAX. */
static bool scalar_int(uint32_t type, const uint8_t *p, int64_t *out)
{
    switch (type) {
    case GGUF_TYPE_UINT8:
        *out = p[0];
        return true;
    case GGUF_TYPE_BOOL:
        *out = p[0] != 0;
        return true;
    case GGUF_TYPE_INT8:
        *out = (int8_t)p[0];
        return true;
    case GGUF_TYPE_UINT16:
        *out = gguf_load_u16(p);
        return true;
    case GGUF_TYPE_INT16:
        *out = (int16_t)gguf_load_u16(p);
        return true;
    case GGUF_TYPE_UINT32:
        *out = gguf_load_u32(p);
        return true;
    case GGUF_TYPE_INT32:
        *out = (int32_t)gguf_load_u32(p);
        return true;
    case GGUF_TYPE_UINT64: {
        uint64_t value = gguf_load_u64(p);
        if (value > INT64_MAX)
            return false;
        *out = (int64_t)value;
        return true;
    }
    case GGUF_TYPE_INT64:
        *out = (int64_t)gguf_load_u64(p);
        return true;
    default:
        return false;
    }
}

static bool scalar_double(uint32_t type, const uint8_t *p, double *out)
{
    if (type == GGUF_TYPE_FLOAT32) {
        uint32_t bits = gguf_load_u32(p);
        float value;
        memcpy(&value, &bits, sizeof value);
        *out = value;
        return true;
    }
    if (type == GGUF_TYPE_FLOAT64) {
        uint64_t bits = gguf_load_u64(p);
        memcpy(out, &bits, sizeof *out);
        return true;
    }
    if (type == GGUF_TYPE_UINT64) {
        *out = (double)gguf_load_u64(p);
        return true;
    }
    int64_t value;
    if (!scalar_int(type, p, &value))
        return false;
    *out = (double)value;
    return true;
}

bool gguf_get_int(const gguf_model *model, const char *key, int64_t *out)
{
    const gguf_kv *kv = gguf_find_kv(model, key);
    return kv && scalar_int(kv->type, kv->payload, out);
}

bool gguf_get_uint32(const gguf_model *model, const char *key, uint32_t *out)
{
    int64_t value;
    if (!gguf_get_int(model, key, &value) || value < 0 || value > UINT32_MAX)
        return false;
    *out = (uint32_t)value;
    return true;
}

bool gguf_get_float(const gguf_model *model, const char *key, float *out)
{
    const gguf_kv *kv = gguf_find_kv(model, key);
    double value;
    if (!kv || !scalar_double(kv->type, kv->payload, &value))
        return false;
    *out = (float)value;
    return true;
}

bool gguf_get_bool(const gguf_model *model, const char *key, bool *out)
{
    const gguf_kv *kv = gguf_find_kv(model, key);
    int64_t value;
    if (!kv || !scalar_int(kv->type, kv->payload, &value))
        return false;
    *out = value != 0;
    return true;
}

bool gguf_get_string(const gguf_model *model, const char *key, gguf_string *out)
{
    const gguf_kv *kv = gguf_find_kv(model, key);
    if (!kv || kv->type != GGUF_TYPE_STRING)
        return false;
    out->length = gguf_load_u64(kv->payload);
    out->data = (const char *)kv->payload + 8;
    return true;
}

/* Where element index of an array starts (kv already validated). */
static const uint8_t *array_element_at(const gguf_kv *kv, uint64_t index)
{
    uint64_t scalar = gguf_scalar_size(kv->array_type);
    if (scalar)
        return kv->payload + index * scalar;
    const uint8_t *p = kv->payload;
    for (uint64_t i = 0; i < index; i++)
        p += gguf_element_size(kv->array_type, p);
    return p;
}

int64_t gguf_array_int(const gguf_kv *kv, uint64_t index)
{
    if (kv->type != GGUF_TYPE_ARRAY || index >= kv->array_count)
        return 0;
    const uint8_t *p = array_element_at(kv, index);
    int64_t value;
    if (scalar_int(kv->array_type, p, &value))
        return value;
    if (kv->array_type == GGUF_TYPE_UINT64)
        return INT64_MAX;
    double real;
    if (!scalar_double(kv->array_type, p, &real) || isnan(real))
        return 0;
    /* Saturate: converting an out-of-range double to int64 is undefined. */
    if (real >= 9223372036854775807.0)
        return INT64_MAX;
    if (real <= -9223372036854775808.0)
        return INT64_MIN;
    return (int64_t)real;
}

double gguf_array_float(const gguf_kv *kv, uint64_t index)
{
    double value = 0.0;
    if (kv->type == GGUF_TYPE_ARRAY && index < kv->array_count)
        scalar_double(kv->array_type, array_element_at(kv, index), &value);
    return value;
}

bool gguf_array_strings(const gguf_kv *kv, gguf_string *out)
{
    if (kv->type != GGUF_TYPE_ARRAY || kv->array_type != GGUF_TYPE_STRING)
        return false;
    const uint8_t *p = kv->payload;
    for (uint64_t i = 0; i < kv->array_count; i++) {
        out[i].length = gguf_load_u64(p);
        out[i].data = (const char *)p + 8;
        p += 8 + out[i].length;
    }
    return true;
}

bool gguf_array_element(const gguf_kv *kv, uint64_t index, gguf_kv *out)
{
    if (kv->type != GGUF_TYPE_ARRAY || index >= kv->array_count)
        return false;
    const uint8_t *p = array_element_at(kv, index);
    out->key = kv->key;
    if (kv->array_type == GGUF_TYPE_ARRAY) {
        out->type = GGUF_TYPE_ARRAY;
        out->array_type = (enum gguf_value_type)gguf_load_u32(p);
        out->array_count = gguf_load_u64(p + 4);
        out->payload = p + 12;
        out->payload_bytes = gguf_element_size(GGUF_TYPE_ARRAY, p) - 12;
    } else {
        out->type = kv->array_type;
        out->array_type = kv->array_type;
        out->array_count = 0;
        out->payload = p;
        out->payload_bytes = gguf_element_size(kv->array_type, p);
    }
    return true;
}

int gguf_get_per_layer_uint32(const gguf_model *model, const char *key, uint32_t n_layer, uint32_t *out,
                              bmoe_error *err)
{
    const gguf_kv *kv = gguf_find_kv(model, key);
    const char *path = model->shards[0].path;
    if (!kv)
        return 0;
    if (kv->type != GGUF_TYPE_ARRAY) {
        int64_t value;
        if (!scalar_int(kv->type, kv->payload, &value))
            return error_set(err, "%s: %s has type %s, expected an integer or an array of integers", path, key,
                             gguf_type_name(kv->type));
        if (value < 0 || value > UINT32_MAX)
            return error_set(err, "%s: %s = %" PRId64 " does not fit in 32 bits", path, key, value);
        for (uint32_t i = 0; i < n_layer; i++)
            out[i] = (uint32_t)value;
        return 1;
    }
    if (!is_integer_type(kv->array_type))
        return error_set(err, "%s: %s is an array of %s, expected integers", path, key,
                         gguf_type_name(kv->array_type));
    if (kv->array_count != n_layer)
        return error_set(err, "%s: %s has %" PRIu64 " elements, expected one per layer (%" PRIu32 ")", path, key,
                         kv->array_count, n_layer);
    uint64_t size = gguf_scalar_size(kv->array_type);
    for (uint32_t i = 0; i < n_layer; i++) {
        int64_t value;
        if (!scalar_int(kv->array_type, kv->payload + i * size, &value) || value < 0 || value > UINT32_MAX)
            return error_set(err, "%s: %s[%" PRIu32 "] does not fit in 32 bits", path, key, i);
        out[i] = (uint32_t)value;
    }
    return 1;
}
