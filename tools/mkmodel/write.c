/* bmoe-mkmodel file writer: replays the metadata and tensor table into one
 * gguf_writer per shard and streams each tensor's data through a fixed
 * buffer, so memory stays small whatever the model size. Metadata goes to
 * shard 0 only; every shard of a split model carries the split.* keys
 * (gguf.md section 8). On failure the files written so far are removed.
 * Owns the data buffer. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mkmodel.h"

#define MKMODEL_BUFFER_BYTES (8u << 20)

static int add_kv(gguf_writer *writer, const mkmodel_kv *kv)
{
    switch (kv->type) {
    case GGUF_TYPE_UINT32:
        return gguf_writer_add_uint32(writer, kv->key, kv->value.u32);
    case GGUF_TYPE_INT32:
        return gguf_writer_add_int32(writer, kv->key, kv->value.i32);
    case GGUF_TYPE_UINT16:
        return gguf_writer_add_uint16(writer, kv->key, kv->value.u16);
    case GGUF_TYPE_FLOAT32:
        return gguf_writer_add_float32(writer, kv->key, kv->value.f32);
    case GGUF_TYPE_BOOL:
        return gguf_writer_add_bool(writer, kv->key, kv->value.b);
    case GGUF_TYPE_STRING:
        return gguf_writer_add_string(writer, kv->key, kv->string);
    case GGUF_TYPE_ARRAY:
        if (kv->array_type == GGUF_TYPE_STRING)
            return gguf_writer_add_string_array(writer, kv->key, kv->count, kv->strings);
        return gguf_writer_add_array(writer, kv->key, kv->array_type, kv->count, kv->array);
    default:
        return -1;
    }
}

static double seconds_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Streams one tensor's data into the writer. */
static int write_tensor(gguf_writer *writer, const mkmodel_model *model, const mkmodel_tensor *tensor,
                        void *buffer, size_t capacity, bmoe_error *err)
{
    mkmodel_filler filler;
    if (mkmodel_filler_init(&filler, tensor, model->config.fill, model->config.seed, err) != 0) {
        mkmodel_filler_destroy(&filler);
        return -1;
    }
    int status = 0;
    for (;;) {
        int64_t bytes = mkmodel_filler_next(&filler, buffer, capacity, err);
        if (bytes < 0) {
            status = -1;
            break;
        }
        if (bytes == 0)
            break;
        if (gguf_writer_write_data(writer, buffer, (size_t)bytes) != 0) {
            status = error_set(err, "mkmodel: writing the data of %s failed", tensor->name);
            break;
        }
    }
    mkmodel_filler_destroy(&filler);
    return status;
}

static int write_shard(const mkmodel_model *model, uint32_t shard, const char *path, void *buffer,
                       size_t capacity, bmoe_error *err)
{
    const mkmodel_config *c = &model->config;
    gguf_writer *writer = gguf_writer_create(path, err);
    if (!writer)
        return -1;
    int failed = 0;
    if (shard == 0)
        for (uint32_t k = 0; k < model->kv_count && !failed; k++)
            if (add_kv(writer, &model->kvs[k]) != 0)
                failed = error_set(err, "mkmodel: %s: adding key %s failed", path, model->kvs[k].key);
    if (!failed && c->n_split > 1) {
        if (gguf_writer_add_uint16(writer, "split.no", (uint16_t)shard) != 0 ||
            gguf_writer_add_uint16(writer, "split.count", (uint16_t)c->n_split) != 0 ||
            gguf_writer_add_int32(writer, "split.tensors.count", (int32_t)model->tensor_count) != 0)
            failed = error_set(err, "mkmodel: %s: adding the split keys failed", path);
    }
    for (uint32_t i = 0; i < model->tensor_count && !failed; i++) {
        const mkmodel_tensor *t = &model->tensors[i];
        if (t->shard == shard &&
            gguf_writer_add_tensor_info(writer, t->name, t->type, t->n_dims, t->ne) != 0)
            failed = error_set(err, "mkmodel: %s: adding tensor %s failed", path, t->name);
    }
    if (!failed && gguf_writer_begin_data(writer) != 0)
        failed = error_set(err, "mkmodel: %s: writing the header failed", path);
    for (uint32_t i = 0; i < model->tensor_count && !failed; i++)
        if (model->tensors[i].shard == shard &&
            write_tensor(writer, model, &model->tensors[i], buffer, capacity, err) != 0)
            failed = -1;
    if (failed) {
        gguf_writer_destroy(writer);
        return -1;
    }
    return gguf_writer_finish(writer, err);
}

int mkmodel_write(const mkmodel_model *model, const char *output, bool quiet, bmoe_error *err)
{
    const mkmodel_config *c = &model->config;
    size_t capacity = MKMODEL_BUFFER_BYTES;
    for (uint32_t i = 0; i < model->tensor_count; i++) {
        size_t row = (size_t)(model->tensors[i].nbytes /
                              (uint64_t)(model->tensors[i].ne[1] * model->tensors[i].ne[2]));
        if (row > capacity)
            capacity = row;
    }
    void *buffer = malloc(capacity);
    if (!buffer)
        return error_set(err, "mkmodel: out of memory for a %zu-byte buffer", capacity);
    double start = seconds_now();
    char path[4096];
    uint32_t shard = 0;
    int status = 0;
    for (; shard < c->n_split; shard++) {
        if (mkmodel_shard_path(output, shard, c->n_split, path, sizeof path, err) != 0 ||
            write_shard(model, shard, path, buffer, capacity, err) != 0) {
            status = -1;
            break;
        }
        if (!quiet)
            fprintf(stderr, "bmoe-mkmodel: wrote %s (%.1f s)\n", path, seconds_now() - start);
    }
    if (status != 0) {
        /* Remove every shard up to and including the one that failed. */
        for (uint32_t s = 0; s <= shard && s < c->n_split; s++) {
            char stale[4096];
            if (mkmodel_shard_path(output, s, c->n_split, stale, sizeof stale, NULL) == 0)
                unlink(stale);
        }
    }
    free(buffer);
    return status;
}
