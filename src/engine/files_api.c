/* The public file helpers (bmoe.h "Files"): safe output files over the one
 * replacement mechanism of src/base/file.c, the file identities that keep
 * an output off the model and off another output, and whole-file reads
 * that never block on a FIFO. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/file.h"
#include "../gguf/gguf.h"
#include "engine.h"

struct bmoe_output {
    file_replacement replacement;
};

bmoe_output *bmoe_output_open(const char *path, bmoe_error *error)
{
    bmoe_error err;
    error_clear(&err);
    if (!path) {
        error_set_status(&err, BMOE_ERR_INVALID_ARGUMENT, "output: no path given");
        engine_report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
        return NULL;
    }
    bmoe_output *output = calloc(1, sizeof *output);
    if (!output) {
        error_set_status(&err, BMOE_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
        engine_report(&err, BMOE_ERR_OUT_OF_MEMORY, error);
        return NULL;
    }
    if (file_replacement_begin(&output->replacement, path, &err) != 0) {
        free(output);
        engine_report(&err, BMOE_ERR_IO, error);
        return NULL;
    }
    return output;
}

int bmoe_output_write(bmoe_output *output, const void *bytes, size_t length, bmoe_error *error)
{
    bmoe_error err;
    error_clear(&err);
    const char *cursor = bytes;
    while (length > 0) {
        ssize_t wrote = write(output->replacement.fd, cursor, length);
        if (wrote < 0 && errno == EINTR)
            continue;
        if (wrote <= 0) {
            error_set_status(&err, BMOE_ERR_IO, "%s: cannot write: %s", output->replacement.target,
                             strerror(wrote < 0 ? errno : ENOSPC));
            return engine_report(&err, BMOE_ERR_IO, error);
        }
        cursor += wrote;
        length -= (size_t)wrote;
    }
    return 0;
}

int bmoe_output_commit(bmoe_output *output, bmoe_error *error)
{
    bmoe_error err;
    error_clear(&err);
    int status = file_replacement_commit(&output->replacement, &err);
    file_replacement_release(&output->replacement);
    free(output);
    return status == 0 ? 0 : engine_report(&err, BMOE_ERR_IO, error);
}

void bmoe_output_discard(bmoe_output *output)
{
    if (!output)
        return;
    file_replacement_release(&output->replacement);
    free(output);
}

bool bmoe_same_file(const char *path, const char *other)
{
    return path && other && file_same(path, other);
}

bool bmoe_is_model_file(const char *path, const char *model_path)
{
    if (!path || !model_path)
        return false;
    if (file_same(path, model_path))
        return true;
    uint32_t count = gguf_split_shard_count(model_path);
    for (uint32_t shard = 0; shard < count; shard++) {
        char *shard_path = gguf_split_shard_path(model_path, shard);
        /* out of memory: refusing is the answer that cannot destroy a shard */
        bool same = !shard_path || file_same(path, shard_path);
        free(shard_path);
        if (same)
            return true;
    }
    return false;
}

int bmoe_read_file(const char *path, size_t max_bytes, char **data, size_t *length, bmoe_error *error)
{
    bmoe_error err;
    error_clear(&err);
    *data = NULL;
    *length = 0;
    uint64_t size = 0;
    bool standard_input = path && strcmp(path, "-") == 0;
    int fd = standard_input ? STDIN_FILENO : path ? file_open_regular(path, &size, &err) : -1;
    if (!path)
        error_set_status(&err, BMOE_ERR_INVALID_ARGUMENT, "read: no path given");
    if (fd < 0)
        return engine_report(&err, BMOE_ERR_IO, error);
    size_t capacity = size > 0 && size < max_bytes ? (size_t)size + 1 : 1 << 16, used = 0;
    char *buffer = malloc(capacity + 1);
    int status = 0;
    for (;;) {
        if (!buffer) {
            status = error_set_status(&err, BMOE_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
            break;
        }
        if (used == capacity) {
            if (capacity >= max_bytes) {
                status = error_set_status(&err, BMOE_ERR_INVALID_ARGUMENT, "%s is larger than %zu bytes", path,
                                          max_bytes);
                break;
            }
            size_t bigger_capacity = capacity * 2 > max_bytes ? max_bytes : capacity * 2;
            char *bigger = realloc(buffer, bigger_capacity + 1);
            if (!bigger) {
                status = error_set_status(&err, BMOE_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
                break;
            }
            buffer = bigger;
            capacity = bigger_capacity;
        }
        ssize_t got = read(fd, buffer + used, capacity - used);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            status = error_set_status(&err, BMOE_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
            break;
        }
        if (got == 0)
            break;
        used += (size_t)got;
    }
    if (!standard_input)
        close(fd);
    if (status != 0) {
        free(buffer);
        return engine_report(&err, BMOE_ERR_IO, error);
    }
    buffer[used] = '\0';
    *data = buffer;
    *length = used;
    return 0;
}

void bmoe_free(void *pointer)
{
    free(pointer);
}
