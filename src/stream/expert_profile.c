/* The expert profile file (expert_profile.h). */
#include "expert_profile.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/file.h"
#include "../base/hash.h"

#define PROFILE_MAGIC "BMOEPRF1"
#define PROFILE_VERSION 1u
#define PROFILE_HEADER_BYTES 32u

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the profile is written as the host holds it");

static size_t profile_bytes(int32_t n_layer, int32_t n_expert)
{
    return PROFILE_HEADER_BYTES + (size_t)n_layer * (size_t)n_expert * sizeof(float) + sizeof(uint64_t);
}

static void put_u32(uint8_t *at, uint32_t value) { memcpy(at, &value, sizeof value); }
static void put_u64(uint8_t *at, uint64_t value) { memcpy(at, &value, sizeof value); }
static uint32_t get_u32(const uint8_t *at) { uint32_t v; memcpy(&v, at, sizeof v); return v; }
static uint64_t get_u64(const uint8_t *at) { uint64_t v; memcpy(&v, at, sizeof v); return v; }

int expert_profile_write(const char *path, uint64_t model_identity, int32_t n_layer, int32_t n_expert,
                         const float *counts, bmoe_error *err)
{
    size_t size = profile_bytes(n_layer, n_expert);
    uint8_t *image = malloc(size);
    if (!image)
        return error_set_status(err, BMOE_ERR_OUT_OF_MEMORY, "expert profile %s: out of memory", path);
    memcpy(image, PROFILE_MAGIC, 8);
    put_u32(image + 8, PROFILE_VERSION);
    put_u32(image + 12, (uint32_t)n_layer);
    put_u32(image + 16, (uint32_t)n_expert);
    put_u32(image + 20, 0);
    put_u64(image + 24, model_identity);
    size_t counts_bytes = (size_t)n_layer * (size_t)n_expert * sizeof(float);
    memcpy(image + PROFILE_HEADER_BYTES, counts, counts_bytes);
    put_u64(image + PROFILE_HEADER_BYTES + counts_bytes,
            fnv1a(FNV1A_START, image, PROFILE_HEADER_BYTES + counts_bytes));

    file_replacement replacement;
    if (file_replacement_begin(&replacement, path, err) != 0) {
        free(image);
        return -1;
    }
    int status = 0;
    for (size_t done = 0; done < size && status == 0;) {
        ssize_t wrote = write(replacement.fd, image + done, size - done);
        if (wrote < 0 && errno == EINTR)
            continue;
        if (wrote <= 0)
            status = error_set_status(err, BMOE_ERR_IO, "expert profile %s: %s", path,
                                      wrote < 0 ? strerror(errno) : "nothing written");
        else
            done += (size_t)wrote;
    }
    if (status == 0)
        status = file_replacement_commit(&replacement, err);
    file_replacement_release(&replacement);
    free(image);
    return status;
}

int expert_profile_read(const char *path, uint64_t model_identity, int32_t n_layer, int32_t n_expert, float *counts,
                        bmoe_error *err)
{
    uint64_t file_size = 0;
    int fd = file_open_regular(path, &file_size, err);
    if (fd < 0)
        return -1;
    size_t size = profile_bytes(n_layer, n_expert);
    uint8_t header[PROFILE_HEADER_BYTES];
    uint8_t *image = NULL;
    int status = 0;
    /* the header first: a profile of another model says so rather than "wrong size" */
    if (file_size < PROFILE_HEADER_BYTES || pread(fd, header, sizeof header, 0) != (ssize_t)sizeof header ||
        memcmp(header, PROFILE_MAGIC, 8) != 0) {
        status = error_set_status(err, BMOE_ERR_INVALID_ARGUMENT, "expert profile %s: not a bmoe expert profile", path);
    } else if (get_u32(header + 8) != PROFILE_VERSION) {
        status = error_set_status(err, BMOE_ERR_INVALID_ARGUMENT, "expert profile %s: version %u, this build reads %u", path,
                                  get_u32(header + 8), PROFILE_VERSION);
    } else if (get_u64(header + 24) != model_identity || get_u32(header + 12) != (uint32_t)n_layer ||
               get_u32(header + 16) != (uint32_t)n_expert) {
        status = error_set_status(err, BMOE_ERR_INVALID_ARGUMENT,
                                  "expert profile %s: counted on another model (%u layers of %u experts, identity "
                                  "%016llx; this one: %d of %d, %016llx)",
                                  path, get_u32(header + 12), get_u32(header + 16),
                                  (unsigned long long)get_u64(header + 24), n_layer, n_expert,
                                  (unsigned long long)model_identity);
    } else if (file_size != size) {
        status = error_set_status(err, BMOE_ERR_INVALID_ARGUMENT, "expert profile %s: %llu bytes where %zu were expected",
                                  path, (unsigned long long)file_size, size);
    } else if (!(image = malloc(size))) {
        status = error_set_status(err, BMOE_ERR_OUT_OF_MEMORY, "expert profile %s: out of memory", path);
    } else {
        size_t done = 0;
        while (done < size) {
            ssize_t got = pread(fd, image + done, size - done, (off_t)done);
            if (got < 0 && errno == EINTR)
                continue;
            if (got <= 0)
                break;
            done += (size_t)got;
        }
        size_t counts_bytes = size - PROFILE_HEADER_BYTES - sizeof(uint64_t);
        if (done != size)
            status = error_set_status(err, BMOE_ERR_IO, "expert profile %s: cannot be read whole", path);
        else if (get_u64(image + size - sizeof(uint64_t)) !=
                 fnv1a(FNV1A_START, image, size - sizeof(uint64_t)))
            status = error_set_status(err, BMOE_ERR_INVALID_ARGUMENT, "expert profile %s: damaged (its checksum differs)",
                                      path);
        else
            memcpy(counts, image + PROFILE_HEADER_BYTES, counts_bytes);
        for (size_t i = 0; status == 0 && i < counts_bytes / sizeof(float); i++)
            if (!isfinite(counts[i]) || counts[i] < 0.0f)
                status = error_set_status(err, BMOE_ERR_INVALID_ARGUMENT, "expert profile %s: count %zu is %g", path, i,
                                          (double)counts[i]);
    }
    free(image);
    close(fd);
    return status;
}
