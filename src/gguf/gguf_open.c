/* GGUF model opening: maps each file read-only, finds and checks the shards
 * of a split model, and joins their tensor tables into one name-indexed
 * table. Owns the gguf_model struct and the accessors that describe it. */
#define _GNU_SOURCE /* qsort_r */
#include "gguf_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../base/file.h"
#include "../base/hash.h"
#include "../base/mapping_guard.h"
#include "../base/pages.h"
#include "../base/text.h"

/* "-00001-of-00003.gguf": the suffix of a shard's file name. */
#define GGUF_SPLIT_SUFFIX_LENGTH 20

void gguf_shard_release(gguf_shard *shard)
{
    free(shard->kvs);
    free(shard->tensors);
    free(shard->strings);
    mapping_guard_remove(shard->guard);
    if (shard->mapped)
        munmap((void *)shard->base, shard->size);
    if (shard->fd >= 0)
        close(shard->fd);
    free(shard->path);
    memset(shard, 0, sizeof *shard);
    shard->fd = -1;
    shard->guard = -1;
}

/* Opens, maps and parses one file. On failure the shard is released. */
static int shard_open(gguf_shard *shard, const char *path, bmoe_error *err)
{
    memset(shard, 0, sizeof *shard);
    shard->fd = -1;
    shard->guard = -1;
    shard->path = strdup(path);
    if (!shard->path)
        return error_set(err, "%s: out of memory", path);
    shard->fd = file_open_regular(path, &shard->size, err);
    if (shard->fd < 0) {
        gguf_shard_release(shard);
        return -1;
    }
    if (shard->size < 24) {
        /* Too small to map usefully; the parser still names the problem. */
        static const uint8_t empty[1];
        uint8_t head[24];
        ssize_t got = pread(shard->fd, head, sizeof head, 0);
        if (got < 0) {
            error_set(err, "%s: cannot read: %s", path, strerror(errno));
            gguf_shard_release(shard);
            return -1;
        }
        shard->base = got > 0 ? head : empty;
        shard->size = got > 0 ? (uint64_t)got : 0;
        gguf_parse_shard(shard, err);
        gguf_shard_release(shard);
        return -1;
    }
    void *map = mmap(NULL, shard->size, PROT_READ, MAP_SHARED, shard->fd, 0);
    if (map == MAP_FAILED) {
        error_set_status(err, BMOE_ERR_IO, "%s: cannot map %" PRIu64 " bytes: %s", path, shard->size, strerror(errno));
        gguf_shard_release(shard);
        return -1;
    }
    shard->base = map;
    shard->mapped = true;
    /* the file as mapped; a size that changed between the open and here
     * shows at the first check */
    if (fstat(shard->fd, &shard->opened) != 0) {
        error_set_status(err, BMOE_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
        gguf_shard_release(shard);
        return -1;
    }
    shard->opened.st_size = (off_t)shard->size;
    shard->guard = mapping_guard_add(map, shard->size, shard->fd);
    /* No read-around on faults: parsing the header touches a few pages, and
     * with the device's read-ahead (often megabytes) each fault would pull in
     * tensor bytes nobody asked for (a streamed model's experts among them).
     * What is read through the mapping gets read-ahead back by range
     * (gguf_advise_range). */
    madvise(map, shard->size, MADV_RANDOM);
    if (gguf_parse_shard(shard, err) != 0) {
        gguf_shard_release(shard);
        return -1;
    }
    return 0;
}

static int compare_kv_index(const void *a, const void *b, void *kvs)
{
    const gguf_kv *list = kvs;
    return strcmp(list[*(const uint64_t *)a].key, list[*(const uint64_t *)b].key);
}

static int compare_tensor_names(const void *a, const void *b, void *tensors)
{
    const gguf_tensor *list = tensors;
    return strcmp(list[*(const uint64_t *)a].name, list[*(const uint64_t *)b].name);
}

static const gguf_kv *shard_find_kv(const gguf_shard *shard, const char *key)
{
    for (uint64_t i = 0; i < shard->kv_count; i++)
        if (strcmp(shard->kvs[i].key, key) == 0)
            return &shard->kvs[i];
    return NULL;
}

/* Reads an integer split.* key: 1 found, 0 absent, -1 not an integer. */
static int shard_split_key(const gguf_shard *shard, const char *key, int64_t *out, bmoe_error *err)
{
    const gguf_kv *kv = shard_find_kv(shard, key);
    if (!kv)
        return 0;
    uint64_t size = gguf_scalar_size(kv->type);
    if (kv->type == GGUF_TYPE_ARRAY || kv->type == GGUF_TYPE_FLOAT32 || kv->type == GGUF_TYPE_FLOAT64 || size == 0)
        return error_set(err, "%s: %s must be an integer, not %s", shard->path, key, gguf_type_name(kv->type));
    uint64_t raw = size == 1 ? kv->payload[0] : size == 2 ? gguf_load_u16(kv->payload)
                 : size == 4 ? gguf_load_u32(kv->payload) : gguf_load_u64(kv->payload);
    bool is_signed = kv->type == GGUF_TYPE_INT8 || kv->type == GGUF_TYPE_INT16 || kv->type == GGUF_TYPE_INT32 ||
                     kv->type == GGUF_TYPE_INT64;
    if (is_signed && size < 8 && (raw >> (size * 8 - 1)) & 1)
        raw |= ~(uint64_t)0 << (size * 8); /* sign-extend */
    if (!is_signed && raw > INT64_MAX)
        return error_set(err, "%s: %s = %" PRIu64 " is out of range", shard->path, key, raw);
    *out = (int64_t)raw;
    return 1;
}

static void model_free(gguf_model *model)
{
    if (!model)
        return;
    for (uint32_t i = 0; i < model->shard_count; i++)
        gguf_shard_release(&model->shards[i]);
    free(model->shards);
    free(model->tensors);
    free(model->tensors_by_name);
    free(model->kvs_by_key);
    free(model);
}

void gguf_close(gguf_model *model)
{
    model_free(model);
}

/* Joins the shards' tensor tables and builds the sorted indexes; rejects
 * duplicate tensor names across the whole model. */
static int model_index(gguf_model *model, bmoe_error *err)
{
    uint64_t total = 0;
    for (uint32_t s = 0; s < model->shard_count; s++)
        total += model->shards[s].tensor_count;
    const gguf_shard *first = &model->shards[0];
    model->tensor_count = total;
    model->tensors = calloc(total ? total : 1, sizeof *model->tensors);
    model->tensors_by_name = calloc(total ? total : 1, sizeof *model->tensors_by_name);
    model->kvs_by_key = calloc(first->kv_count ? first->kv_count : 1, sizeof *model->kvs_by_key);
    if (!model->tensors || !model->tensors_by_name || !model->kvs_by_key)
        return error_set(err, "%s: out of memory for %" PRIu64 " tensors", first->path, total);
    uint64_t next = 0;
    for (uint32_t s = 0; s < model->shard_count; s++) {
        for (uint64_t i = 0; i < model->shards[s].tensor_count; i++) {
            model->tensors[next] = model->shards[s].tensors[i];
            model->tensors[next].shard = s;
            model->tensors_by_name[next] = next;
            next++;
        }
    }
    qsort_r(model->tensors_by_name, total, sizeof *model->tensors_by_name, compare_tensor_names, model->tensors);
    for (uint64_t i = 1; i < total; i++) {
        const gguf_tensor *a = &model->tensors[model->tensors_by_name[i - 1]];
        const gguf_tensor *b = &model->tensors[model->tensors_by_name[i]];
        if (strcmp(a->name, b->name) != 0)
            continue;
        char shown[80];
        text_escape_string(a->name, shown, sizeof shown);
        if (a->shard == b->shard)
            return error_set(err, "%s: duplicate tensor name '%s'", model->shards[a->shard].path, shown);
        return error_set(err, "%s: tensor '%s' appears in shard %" PRIu32 " and again in %s", first->path, shown,
                         a->shard + 1, model->shards[b->shard].path);
    }
    for (uint64_t i = 0; i < first->kv_count; i++)
        model->kvs_by_key[i] = i;
    qsort_r(model->kvs_by_key, first->kv_count, sizeof *model->kvs_by_key, compare_kv_index, first->kvs);
    return 0;
}

/* Reads NNNNN and MMMMM from a name ending in -NNNNN-of-MMMMM.gguf. */
static bool parse_split_suffix(const char *path, unsigned *number, unsigned *total)
{
    static const char pattern[] = "-#####-of-#####.gguf";
    size_t length = strlen(path);
    if (length < GGUF_SPLIT_SUFFIX_LENGTH)
        return false;
    const char *suffix = path + length - GGUF_SPLIT_SUFFIX_LENGTH;
    unsigned values[2] = {0, 0};
    int field = 0;
    for (int i = 0; i < GGUF_SPLIT_SUFFIX_LENGTH; i++) {
        if (pattern[i] != '#') {
            if (suffix[i] != pattern[i])
                return false;
            if (i > 0 && pattern[i - 1] == '#')
                field++;
            continue;
        }
        if (suffix[i] < '0' || suffix[i] > '9')
            return false;
        values[field] = values[field] * 10 + (unsigned)(suffix[i] - '0');
    }
    *number = values[0];
    *total = values[1];
    return true;
}

uint32_t gguf_split_shard_count(const char *path)
{
    unsigned number = 0, total = 0;
    return parse_split_suffix(path, &number, &total) && total > 1 ? (uint32_t)total : 1;
}

char *gguf_split_shard_path(const char *path, uint32_t shard)
{
    if (gguf_split_shard_count(path) == 1)
        return strdup(path);
    size_t prefix_length = strlen(path) - GGUF_SPLIT_SUFFIX_LENGTH;
    char *shard_path = malloc(prefix_length + 32);
    if (!shard_path)
        return NULL;
    memcpy(shard_path, path, prefix_length);
    snprintf(shard_path + prefix_length, 32, "-%05" PRIu32 "-of-%05" PRIu32 ".gguf", shard + 1,
             gguf_split_shard_count(path));
    return shard_path;
}

/* "split.count is 3" or "split.count is absent", for messages. */
static void describe_split_key(char *out, size_t size, const char *key, int found, int64_t value)
{
    if (found)
        snprintf(out, size, "%s is %" PRId64, key, value);
    else
        snprintf(out, size, "%s is absent", key);
}

/* A file named PREFIX-NNNNN-of-MMMMM.gguf must be shard NNNNN of MMMMM by
 * its split keys too: a split.count of 1 (or none) under a name that says 3
 * would otherwise open a third of the model as if it were all of it. An
 * absent or zero split.count means "not split", as in the reference loader. */
static int check_split_name(const gguf_shard *first, int has_count, int64_t count, int has_number,
                            int64_t number, bmoe_error *err)
{
    unsigned name_number = 0, name_total = 0;
    if (!parse_split_suffix(first->path, &name_number, &name_total))
        return 0;
    int64_t shards = has_count && count > 0 ? count : 1;
    bool agrees = shards == (int64_t)name_total &&
                  (shards == 1 ? (!has_number || number == 0) && name_number == 1
                               : has_number && number == (int64_t)name_number - 1);
    if (agrees)
        return 0;
    char count_text[64], number_text[64];
    describe_split_key(count_text, sizeof count_text, "split.count", has_count, count);
    describe_split_key(number_text, sizeof number_text, "split.no", has_number, number);
    return error_set(err, "%s: the name says shard %u of %u, but %s and %s", first->path, name_number,
                     name_total, count_text, number_text);
}

/* Reads split.count and split.no of shard 0 (and, for a file, checks them
 * against its name): the shard count, or 0 on error. */
static uint32_t split_count_of(const gguf_shard *first, bool check_name, bmoe_error *err)
{
    int64_t count = 1, number = 0;
    int has_count = shard_split_key(first, "split.count", &count, err);
    if (has_count < 0)
        return 0;
    int has_number = shard_split_key(first, "split.no", &number, err);
    if (has_number < 0)
        return 0;
    if (check_name && check_split_name(first, has_count, count, has_number, number, err) != 0)
        return 0;
    if (has_count == 0 || count <= 1)
        return 1;
    if (count > 65535) {
        error_set(err, "%s: split.count %" PRId64 " is out of range", first->path, count);
        return 0;
    }
    if (has_number == 0 || number != 0) {
        if (has_number == 0)
            error_set(err, "%s: split model (split.count %" PRId64 ") lacks split.no", first->path, count);
        else
            error_set(err, "%s: split.no is %" PRId64 ", expected 0: open the first shard (-00001-of-%05" PRId64
                      ".gguf)", first->path, number, count);
        return 0;
    }
    return (uint32_t)count;
}

/* Opens shards 1..count-1 next to the first and checks their split keys. */
static int open_other_shards(gguf_model *model, uint32_t count, bmoe_error *err)
{
    const char *path = model->shards[0].path;
    if (gguf_split_shard_count(path) != count)
        return error_set(err, "%s: split model (split.count %" PRIu32 "), but the name does not end in"
                         " -00001-of-%05" PRIu32 ".gguf", path, count, count);
    int status = 0;
    for (uint32_t s = 1; s < count && status == 0; s++) {
        char *shard_path = gguf_split_shard_path(path, s);
        if (!shard_path)
            return error_set(err, "%s: out of memory", path);
        bmoe_error inner;
        if (shard_open(&model->shards[s], shard_path, &inner) != 0) {
            status = error_set(err, "split model %s: shard %" PRIu32 " of %" PRIu32 ": %s", path, s + 1, count,
                               inner.message);
            free(shard_path);
            break;
        }
        model->shard_count = s + 1;
        int64_t number_found = -1, count_found = -1;
        int has_number = shard_split_key(&model->shards[s], "split.no", &number_found, err);
        int has_count = shard_split_key(&model->shards[s], "split.count", &count_found, err);
        if (has_number < 0 || has_count < 0)
            status = -1;
        else if (has_number == 0 || number_found != s)
            status = error_set(err, "%s: split.no is %s%" PRId64 ", expected %" PRIu32, shard_path,
                               has_number ? "" : "missing, ", number_found, s);
        else if (has_count == 0 || count_found != count)
            status = error_set(err, "%s: split.count is %s%" PRId64 ", expected %" PRIu32, shard_path,
                               has_count ? "" : "missing, ", count_found, count);
        free(shard_path);
    }
    return status;
}

/* The tensor total must match what shard 0 announces. */
static int check_split_tensor_count(const gguf_model *model, bmoe_error *err)
{
    const gguf_shard *first = &model->shards[0];
    int64_t announced = 0;
    int has = shard_split_key(first, "split.tensors.count", &announced, err);
    if (has < 0)
        return -1;
    uint64_t total = 0;
    for (uint32_t s = 0; s < model->shard_count; s++)
        total += model->shards[s].tensor_count;
    if (has == 0)
        return error_set(err, "%s: split model lacks split.tensors.count", first->path);
    if (announced < 0 || (uint64_t)announced != total)
        return error_set(err, "%s: split.tensors.count is %" PRId64 " but the %" PRIu32 " shards hold %" PRIu64
                         " tensors", first->path, announced, model->shard_count, total);
    return 0;
}

/* Builds a model from an already-parsed shard 0 (file or memory). */
static gguf_model *model_create(gguf_shard *first, bool allow_split, bmoe_error *err)
{
    gguf_model *model = calloc(1, sizeof *model);
    gguf_shard *shards = calloc(1, sizeof *shards);
    if (!model || !shards) {
        error_set(err, "%s: out of memory", first->path);
        free(model);
        free(shards);
        gguf_shard_release(first);
        return NULL;
    }
    shards[0] = *first;
    model->shards = shards;
    model->shard_count = 1;
    uint32_t count = split_count_of(&model->shards[0], allow_split, err);
    if (count == 0) {
        model_free(model);
        return NULL;
    }
    if (count > 1) {
        if (!allow_split) {
            error_set(err, "%s: split model (%" PRIu32 " shards) cannot be opened from memory",
                      model->shards[0].path, count);
            model_free(model);
            return NULL;
        }
        gguf_shard *grown = realloc(model->shards, count * sizeof *grown);
        if (!grown) {
            error_set(err, "%s: out of memory for %" PRIu32 " shards", model->shards[0].path, count);
            model_free(model);
            return NULL;
        }
        model->shards = grown;
        for (uint32_t s = 1; s < count; s++) {
            memset(&grown[s], 0, sizeof grown[s]);
            grown[s].fd = -1;
            grown[s].guard = -1;
        }
        if (open_other_shards(model, count, err) != 0 || check_split_tensor_count(model, err) != 0) {
            model_free(model);
            return NULL;
        }
    }
    if (model_index(model, err) != 0) {
        model_free(model);
        return NULL;
    }
    return model;
}

gguf_model *gguf_open(const char *path, bmoe_error *err)
{
    gguf_shard first;
    if (shard_open(&first, path, err) != 0)
        return NULL;
    return model_create(&first, true, err);
}

gguf_model *gguf_open_memory(const void *data, size_t size, const char *name, bmoe_error *err)
{
    gguf_shard first;
    memset(&first, 0, sizeof first);
    first.fd = -1;
    first.guard = -1;
    first.path = strdup(name ? name : "(memory)");
    if (!first.path) {
        error_set(err, "out of memory");
        return NULL;
    }
    static const uint8_t empty[1];
    first.base = data ? data : empty;
    first.size = data ? size : 0;
    if (gguf_parse_shard(&first, err) != 0) {
        gguf_shard_release(&first);
        return NULL;
    }
    return model_create(&first, false, err);
}

uint32_t gguf_version(const gguf_model *model)
{
    return model->shards[0].version;
}

uint32_t gguf_shard_count(const gguf_model *model)
{
    return model->shard_count;
}

const char *gguf_shard_path(const gguf_model *model, uint32_t shard)
{
    return shard < model->shard_count ? model->shards[shard].path : NULL;
}

int gguf_shard_fd(const gguf_model *model, uint32_t shard)
{
    return shard < model->shard_count ? model->shards[shard].fd : -1;
}

uint64_t gguf_shard_size(const gguf_model *model, uint32_t shard)
{
    return shard < model->shard_count ? model->shards[shard].size : 0;
}

uint32_t gguf_alignment(const gguf_model *model)
{
    return model->shards[0].alignment;
}

uint64_t gguf_kv_count(const gguf_model *model)
{
    return model->shards[0].kv_count;
}

const gguf_kv *gguf_kv_at(const gguf_model *model, uint64_t index)
{
    return index < model->shards[0].kv_count ? &model->shards[0].kvs[index] : NULL;
}

const gguf_kv *gguf_find_kv(const gguf_model *model, const char *key)
{
    const gguf_shard *first = &model->shards[0];
    uint64_t low = 0, high = first->kv_count;
    while (low < high) {
        uint64_t middle = low + (high - low) / 2;
        const gguf_kv *kv = &first->kvs[model->kvs_by_key[middle]];
        int order = strcmp(kv->key, key);
        if (order == 0)
            return kv;
        if (order < 0)
            low = middle + 1;
        else
            high = middle;
    }
    return NULL;
}

uint64_t gguf_tensor_count(const gguf_model *model)
{
    return model->tensor_count;
}

const gguf_tensor *gguf_tensor_at(const gguf_model *model, uint64_t index)
{
    return index < model->tensor_count ? &model->tensors[index] : NULL;
}

uint64_t gguf_tensor_index(const gguf_model *model, const gguf_tensor *tensor)
{
    return (uint64_t)(tensor - model->tensors);
}

const gguf_tensor *gguf_find_tensor(const gguf_model *model, const char *name)
{
    uint64_t low = 0, high = model->tensor_count;
    while (low < high) {
        uint64_t middle = low + (high - low) / 2;
        const gguf_tensor *tensor = &model->tensors[model->tensors_by_name[middle]];
        int order = strcmp(tensor->name, name);
        if (order == 0)
            return tensor;
        if (order < 0)
            low = middle + 1;
        else
            high = middle;
    }
    return NULL;
}

const uint8_t *gguf_shard_data(const gguf_model *model, uint32_t shard)
{
    return shard < model->shard_count && model->shards[shard].mapped ? model->shards[shard].base : NULL;
}

void gguf_advise_range(const gguf_model *model, uint32_t shard, uint64_t begin, uint64_t end, bool read_ahead)
{
    if (shard >= model->shard_count || !model->shards[shard].mapped)
        return;
    const gguf_shard *s = &model->shards[shard];
    uint64_t page_size = page_bytes();
    if (end > s->size)
        end = s->size;
    uint64_t first = begin / page_size * page_size;
    if (first < end)
        madvise((void *)(s->base + first), (size_t)(end - first), read_ahead ? MADV_NORMAL : MADV_RANDOM);
}

bool gguf_mapping_faulted(const gguf_model *model)
{
    for (uint32_t i = 0; i < model->shard_count; i++)
        if (mapping_guard_faulted(model->shards[i].guard))
            return true;
    return false;
}

static bool same_time(struct timespec a, struct timespec b)
{
    return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

int gguf_check_files(const gguf_model *model, bmoe_error *err)
{
    for (uint32_t i = 0; i < model->shard_count; i++) {
        const gguf_shard *shard = &model->shards[i];
        if (!shard->mapped)
            continue;
        const struct stat *opened = &shard->opened;
        struct stat now;
        if (stat(shard->path, &now) != 0)
            return error_set_status(err, BMOE_ERR_IO, "%s: the model file is gone", shard->path);
        if (now.st_dev != opened->st_dev || now.st_ino != opened->st_ino)
            return error_set_status(err, BMOE_ERR_IO, "%s: the model file was replaced while loaded", shard->path);
        if (now.st_size != opened->st_size)
            return error_set_status(err, BMOE_ERR_IO, "%s: the model file is %lld bytes now, %lld when loaded",
                                    shard->path, (long long)now.st_size, (long long)opened->st_size);
        /* the status-change time too: a copy that keeps the old
         * modification time still moves it */
        if (!same_time(now.st_mtim, opened->st_mtim) || !same_time(now.st_ctim, opened->st_ctim) ||
            mapping_guard_faulted(shard->guard))
            return error_set_status(err, BMOE_ERR_IO, "%s: the model file was modified while loaded", shard->path);
    }
    return 0;
}

#define IDENTITY_SAMPLE_BYTES 4096
uint64_t gguf_identity(const gguf_model *model)
{
    uint64_t hash = FNV1A_START;
    for (uint32_t shard = 0; shard < gguf_shard_count(model); shard++) {
        uint64_t size = gguf_shard_size(model, shard);
        hash = fnv1a(hash, &size, sizeof size);
    }
    uint64_t n_tensors = gguf_tensor_count(model);
    for (uint64_t i = 0; i < n_tensors; i++) {
        const gguf_tensor *t = gguf_tensor_at(model, i);
        hash = fnv1a(hash, t->name, strlen(t->name) + 1);
        hash = fnv1a(hash, &t->type, sizeof t->type);
        hash = fnv1a(hash, &t->n_dims, sizeof t->n_dims);
        hash = fnv1a(hash, t->ne, sizeof t->ne);
        hash = fnv1a(hash, &t->shard, sizeof t->shard);
        hash = fnv1a(hash, &t->file_offset, sizeof t->file_offset);
        hash = fnv1a(hash, &t->nbytes, sizeof t->nbytes);
        if (i == 0 || i + 1 == n_tensors)
            hash = fnv1a(hash, t->data, t->nbytes < IDENTITY_SAMPLE_BYTES ? t->nbytes : IDENTITY_SAMPLE_BYTES);
    }
    return hash;
}
