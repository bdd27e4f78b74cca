/* bmoe-mkmodel --quantize: turns a GGUF written in floats (the trainer's F32
 * file in tools/train) into Q8_0 or Q4_K_M with bmoe's own quantizers and
 * the same per-tensor recipe the generator uses, so a trained model and a
 * random one of the same shape and --type get the same tensor types. The
 * metadata is copied record by record in file order; only general.file_type
 * changes. Rows go through a small buffer: memory stays a few rows. */
#include <stdlib.h>
#include <string.h>

#include "mkmodel.h"
#include "quant/quant.h"

static char *string_dup(gguf_string s)
{
    char *out = malloc(s.length + 1);
    if (out) {
        memcpy(out, s.data, s.length);
        out[s.length] = '\0';
    }
    return out;
}

static int copy_string_array(gguf_writer *writer, const gguf_kv *kv, bmoe_error *err)
{
    uint64_t n = kv->array_count;
    gguf_string *views = calloc(n ? n : 1, sizeof *views);
    char **strings = calloc(n ? n : 1, sizeof *strings);
    int status = -1;
    if (!views || !strings || !gguf_array_strings(kv, views)) {
        error_set(err, "out of memory copying %s", kv->key);
        goto done;
    }
    for (uint64_t i = 0; i < n; i++)
        if (!(strings[i] = string_dup(views[i]))) {
            error_set(err, "out of memory copying %s", kv->key);
            goto done;
        }
    status = gguf_writer_add_string_array(writer, kv->key, n, (const char *const *)strings) == 0 ? 0 : 1;
done:
    for (uint64_t i = 0; strings && i < n; i++)
        free(strings[i]);
    free(strings);
    free(views);
    return status;
}

/* Copies one record: 0, 1 when the writer failed (it holds the reason), -1 with err. */
static int copy_kv(gguf_writer *writer, const gguf_kv *kv, uint32_t file_type, bmoe_error *err)
{
    if (strcmp(kv->key, "general.file_type") == 0)
        return gguf_writer_add_uint32(writer, kv->key, file_type) == 0 ? 0 : 1;
    if (strcmp(kv->key, "general.alignment") == 0)
        return 0; /* the writer's own alignment applies */
    int64_t value = 0;
    float number;
    int status;
    switch (kv->type) {
    case GGUF_TYPE_UINT32:
        memcpy(&value, kv->payload, 4);
        status = gguf_writer_add_uint32(writer, kv->key, (uint32_t)value);
        break;
    case GGUF_TYPE_INT32: {
        int32_t v;
        memcpy(&v, kv->payload, 4);
        status = gguf_writer_add_int32(writer, kv->key, v);
        break;
    }
    case GGUF_TYPE_UINT16: {
        uint16_t v;
        memcpy(&v, kv->payload, 2);
        status = gguf_writer_add_uint16(writer, kv->key, v);
        break;
    }
    case GGUF_TYPE_UINT64: {
        uint64_t v;
        memcpy(&v, kv->payload, 8);
        status = gguf_writer_add_uint64(writer, kv->key, v);
        break;
    }
    case GGUF_TYPE_FLOAT32:
        memcpy(&number, kv->payload, 4);
        status = gguf_writer_add_float32(writer, kv->key, number);
        break;
    case GGUF_TYPE_BOOL:
        status = gguf_writer_add_bool(writer, kv->key, kv->payload[0] != 0);
        break;
    case GGUF_TYPE_STRING: {
        gguf_string s;
        uint64_t length;
        memcpy(&length, kv->payload, 8);
        s.data = (const char *)kv->payload + 8;
        s.length = length;
        char *text = string_dup(s);
        if (!text)
            return error_set(err, "out of memory copying %s", kv->key);
        status = gguf_writer_add_string(writer, kv->key, text);
        free(text);
        break;
    }
    case GGUF_TYPE_ARRAY:
        if (kv->array_type == GGUF_TYPE_STRING)
            return copy_string_array(writer, kv, err);
        if (gguf_scalar_size(kv->array_type) == 0)
            return error_set(err, "%s: arrays of arrays are not copied", kv->key);
        status = gguf_writer_add_array(writer, kv->key, kv->array_type, kv->array_count, kv->payload);
        break;
    default:
        return error_set(err, "%s: value type %d is not copied", kv->key, (int)kv->type);
    }
    return status == 0 ? 0 : 1;
}

/* Converts one tensor row by row: decode to floats, encode in `type`. */
static int convert_tensor(gguf_writer *writer, const gguf_tensor *t, uint32_t type, float *row, uint8_t *out,
                          bmoe_error *err)
{
    const quant_format *from = quant_format_of(t->type), *to = quant_format_of(type);
    int64_t n = t->ne[0], rows = t->ne[1] * t->ne[2] * t->ne[3];
    size_t in_bytes = quant_row_bytes(t->type, n), out_bytes = quant_row_bytes(type, n);
    if (!from || !from->dequantize_row || in_bytes == 0)
        return error_set(err, "%s: cannot decode its type %s", t->name, from ? from->name : "?");
    if (!to || !to->quantize_row || out_bytes == 0)
        return error_set(err, "%s: no quantizer for %s", t->name, to ? to->name : "?");
    const uint8_t *src = t->data;
    for (int64_t r = 0; r < rows; r++) {
        from->dequantize_row(src + (size_t)r * in_bytes, row, n);
        to->quantize_row(row, out, n);
        if (gguf_writer_write_data(writer, out, out_bytes) != 0)
            return 1;
    }
    return 0;
}

int mkmodel_quantize(const char *input, const char *output, const mkmodel_config *config, bool quiet,
                     bmoe_error *err)
{
    gguf_model *in = gguf_open(input, err);
    if (!in)
        return -1;
    mkmodel_config c = *config;
    gguf_string arch;
    char key[128] = "";
    if (gguf_get_string(in, "general.architecture", &arch) && arch.length < 64)
        snprintf(key, sizeof key, "%.*s.block_count", (int)arch.length, arch.data);
    if (!gguf_get_uint32(in, key, &c.n_layer)) {
        gguf_close(in);
        return error_set(err, "%s: no %s.block_count (needed by the recipe)", input, key);
    }
    bool tied = gguf_find_tensor(in, "output.weight") == NULL;
    uint64_t n_tensors = gguf_tensor_count(in);
    uint32_t *types = calloc(n_tensors ? n_tensors : 1, sizeof *types);
    int64_t widest = 1;
    for (uint64_t i = 0; i < n_tensors; i++)
        if (gguf_tensor_at(in, i)->ne[0] > widest)
            widest = gguf_tensor_at(in, i)->ne[0];
    float *row = malloc((size_t)widest * sizeof *row);
    uint8_t *out = malloc((size_t)widest * sizeof(float));
    gguf_writer *writer = NULL;
    int status = 0;
    if (!types || !row || !out) {
        status = error_set(err, "out of memory");
        goto done;
    }
    if (!(writer = gguf_writer_create(output, err))) {
        status = -1;
        goto done;
    }
    for (uint64_t k = 0; k < gguf_kv_count(in) && status == 0; k++)
        status = copy_kv(writer, gguf_kv_at(in, k), mkmodel_file_type(&c), err);
    for (uint64_t i = 0; i < n_tensors && status == 0; i++) {
        const gguf_tensor *t = gguf_tensor_at(in, i);
        types[i] = mkmodel_type_for_tensor(&c, t->name, t->n_dims, t->ne[0], tied);
        status = gguf_writer_add_tensor_info(writer, t->name, types[i], t->n_dims, t->ne) == 0 ? 0 : 1;
    }
    if (status == 0)
        status = gguf_writer_begin_data(writer) == 0 ? 0 : 1;
    for (uint64_t i = 0; i < n_tensors && status == 0; i++)
        status = convert_tensor(writer, gguf_tensor_at(in, i), types[i], row, out, err);
    if (status >= 0) /* a writer failure (1) is reported by complete with its reason */
        status = gguf_writer_complete(writer, err);
    if (status == 0)
        status = gguf_writer_publish(writer, err);
    if (status == 0 && !quiet)
        fprintf(stderr, "bmoe-mkmodel: wrote %s\n", output);
done:
    gguf_writer_destroy(writer);
    free(out);
    free(row);
    free(types);
    gguf_close(in);
    return status == 0 ? 0 : -1;
}
