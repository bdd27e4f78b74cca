/* bmoe-mkmodel file writer: replays the metadata and tensor table into one
 * gguf_writer per shard and streams each tensor's data through a fixed
 * buffer, so memory stays small whatever the model size. Metadata goes to
 * shard 0 only; every shard of a split model carries the split.* keys
 * (gguf.md section 8). Each shard is written to a temporary file beside
 * its target (the GGUF writer's); the targets are replaced only once every
 * shard is complete, so a failure leaves whatever was there untouched and
 * removes only the temporary files. Owns the data buffer. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mkmodel.h"

#define MKMODEL_BUFFER_BYTES (8u << 20)

/* Adds one record: -1 when the writer failed (it holds the reason). */
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
    default: /* config.c builds only the types above */
        return gguf_writer_add_string(writer, kv->key, "(unsupported value type)");
    }
}

static double seconds_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Streams one tensor's data into the writer: -1 when the writer failed
 * (it holds the reason), -2 when the generator did (err filled). */
static int write_tensor(gguf_writer *writer, const mkmodel_model *model, const mkmodel_tensor *tensor,
                        void *buffer, size_t capacity, bmoe_error *err)
{
    mkmodel_filler filler;
    if (mkmodel_filler_init(&filler, tensor, model->config.fill, model->config.seed, err) != 0) {
        mkmodel_filler_destroy(&filler);
        return -2;
    }
    int status = 0;
    for (;;) {
        int64_t bytes = mkmodel_filler_next(&filler, buffer, capacity, err);
        if (bytes < 0) {
            status = -2;
            break;
        }
        if (bytes == 0)
            break;
        if (gguf_writer_write_data(writer, buffer, (size_t)bytes) != 0) {
            /* the writer holds the reason; gguf_writer_complete reports it */
            status = -1;
            break;
        }
    }
    mkmodel_filler_destroy(&filler);
    return status;
}

/* Writes shard's metadata, tensor infos and data into writer and completes
 * it (the file is not in place yet). A failure of the writer itself is
 * reported with the writer's message, which names the file and the reason. */
static int write_shard(gguf_writer *writer, const mkmodel_model *model, uint32_t shard, void *buffer,
                       size_t capacity, bmoe_error *err)
{
    const mkmodel_config *c = &model->config;
    int status = 0;
    if (shard == 0)
        for (uint32_t k = 0; k < model->kv_count && status == 0; k++)
            status = add_kv(writer, &model->kvs[k]);
    if (status == 0 && c->n_split > 1) {
        status = gguf_writer_add_uint16(writer, "split.no", (uint16_t)shard) |
                 gguf_writer_add_uint16(writer, "split.count", (uint16_t)c->n_split) |
                 gguf_writer_add_int32(writer, "split.tensors.count", (int32_t)model->tensor_count);
    }
    for (uint32_t i = 0; i < model->tensor_count && status == 0; i++) {
        const mkmodel_tensor *t = &model->tensors[i];
        if (t->shard == shard)
            status = gguf_writer_add_tensor_info(writer, t->name, t->type, t->n_dims, t->ne);
    }
    if (status == 0)
        status = gguf_writer_begin_data(writer);
    for (uint32_t i = 0; i < model->tensor_count && status == 0; i++)
        if (model->tensors[i].shard == shard)
            status = write_tensor(writer, model, &model->tensors[i], buffer, capacity, err);
    if (status == -2)
        return -1;
    return gguf_writer_complete(writer, err);
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
    gguf_writer **writers = calloc(c->n_split, sizeof *writers);
    double *seconds = calloc(c->n_split, sizeof *seconds);
    char (*paths)[4096] = calloc(c->n_split, sizeof *paths);
    int status = 0;
    if (!buffer || !writers || !seconds || !paths)
        status = error_set(err, "out of memory for a %zu-byte buffer", capacity);
    /* Every target is checked (and its temporary file created) before any
     * data is written: a target that cannot be written fails the run at
     * once, and nothing replaces any shard until all of them are complete. */
    for (uint32_t s = 0; s < c->n_split && status == 0; s++) {
        if (mkmodel_shard_path(output, s, c->n_split, paths[s], sizeof paths[s], err) != 0)
            status = -1;
        else if (!(writers[s] = gguf_writer_create(paths[s], err)))
            status = -1;
    }
    double start = seconds_now();
    for (uint32_t s = 0; s < c->n_split && status == 0; s++) {
        status = write_shard(writers[s], model, s, buffer, capacity, err);
        seconds[s] = seconds_now() - start;
    }
    for (uint32_t s = 0; s < c->n_split && status == 0; s++) {
        status = gguf_writer_publish(writers[s], err);
        if (status == 0 && !quiet)
            fprintf(stderr, "bmoe-mkmodel: wrote %s (%.1f s)\n", paths[s], seconds[s]);
    }
    /* Removes the temporary files of shards not published; never a target. */
    for (uint32_t s = 0; writers && s < c->n_split; s++)
        gguf_writer_destroy(writers[s]);
    free(paths);
    free(seconds);
    free(writers);
    free(buffer);
    return status;
}
