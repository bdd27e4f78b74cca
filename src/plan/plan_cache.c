/* The probe cache of plan_cache.h and plan_cache_dir, plan_cache_path of
 * plan.h. Numbers that identify a file (sizes, times, inodes) are stored as
 * decimal strings: JSON numbers are doubles, exact only to 2^53, and a
 * nanosecond mtime is past that. */
#include "plan_cache.h"

#include "../base/hash.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PLAN_CACHE_FORMAT "bmoe-probe-cache"
#define PLAN_CACHE_VERSION 1
/* A cache file is a few hundred bytes; anything much larger is not ours. */
#define PLAN_CACHE_MAX_BYTES 65536

const char *plan_cache_dir(char *buffer, size_t size)
{
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int written;
    /* the XDG specification ignores a relative XDG_CACHE_HOME */
    if (xdg && xdg[0] == '/')
        written = snprintf(buffer, size, "%s/bmoe", xdg);
    else if (home && home[0])
        written = snprintf(buffer, size, "%s/.cache/bmoe", home);
    else
        return NULL;
    return written > 0 && (size_t)written < size ? buffer : NULL;
}

/* A stable name for a path. */
static uint64_t path_hash(const char *text)
{
    return fnv1a_text(FNV1A_START, text);
}

const char *plan_cache_path(const char *cache_dir, const char *model_path, char *buffer, size_t size)
{
    char real[PATH_MAX];
    if (!cache_dir || !model_path || !realpath(model_path, real))
        return NULL;
    int written = snprintf(buffer, size, "%s/probe-%016" PRIx64 ".json", cache_dir, path_hash(real));
    return written > 0 && (size_t)written < size ? buffer : NULL;
}

int plan_probe_key_make(const char *model_path, uint64_t block_bytes, uint64_t memory_total, int32_t n_cores,
                        plan_probe_key *key)
{
    memset(key, 0, sizeof *key);
    struct stat st;
    if (!realpath(model_path, key->real_path) || stat(key->real_path, &st) != 0)
        return -1;
    key->file_size = (uint64_t)st.st_size;
    key->file_mtime_ns = (uint64_t)st.st_mtim.tv_sec * 1000000000ull + (uint64_t)st.st_mtim.tv_nsec;
    key->file_inode = (uint64_t)st.st_ino;
    key->file_device = (uint64_t)st.st_dev;
    key->block_bytes = block_bytes;
    key->memory_total = memory_total;
    key->n_cores = n_cores;
    return 0;
}

static bool string_is(const cJSON *object, const char *name, const char *expected)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, name);
    return cJSON_IsString(item) && strcmp(item->valuestring, expected) == 0;
}

static bool number_string_is(const cJSON *object, const char *name, uint64_t expected)
{
    char text[24];
    snprintf(text, sizeof text, "%" PRIu64, expected);
    return string_is(object, name, text);
}

static bool rate_of(const cJSON *item, double *rate)
{
    if (!cJSON_IsNumber(item) || !isfinite(item->valuedouble) || item->valuedouble <= 0)
        return false;
    *rate = item->valuedouble;
    return true;
}

static bool key_matches(const cJSON *root, const plan_probe_key *key)
{
    const cJSON *version = cJSON_GetObjectItemCaseSensitive(root, "version");
    const cJSON *cores = cJSON_GetObjectItemCaseSensitive(root, "n_cores");
    return string_is(root, "format", PLAN_CACHE_FORMAT) && cJSON_IsNumber(version) &&
           version->valueint == PLAN_CACHE_VERSION && string_is(root, "path", key->real_path) &&
           number_string_is(root, "file_size", key->file_size) &&
           number_string_is(root, "file_mtime_ns", key->file_mtime_ns) &&
           number_string_is(root, "file_inode", key->file_inode) &&
           number_string_is(root, "file_device", key->file_device) &&
           number_string_is(root, "block_bytes", key->block_bytes) &&
           number_string_is(root, "memory_total", key->memory_total) && cJSON_IsNumber(cores) &&
           cores->valueint == key->n_cores;
}

static char *read_small_file(const char *path)
{
    FILE *file = fopen(path, "rb");
    if (!file)
        return NULL;
    char *text = malloc(PLAN_CACHE_MAX_BYTES + 1);
    size_t length = text ? fread(text, 1, PLAN_CACHE_MAX_BYTES + 1, file) : 0;
    bool whole = text && !ferror(file) && length <= PLAN_CACHE_MAX_BYTES;
    fclose(file);
    if (!whole) {
        free(text);
        return NULL;
    }
    text[length] = '\0';
    return text;
}

bool plan_cache_read(const char *path, const plan_probe_key *key, plan_probe_rates *rates)
{
    memset(rates, 0, sizeof *rates);
    char *text = read_small_file(path);
    if (!text)
        return false;
    cJSON *root = cJSON_Parse(text);
    free(text);
    bool matches = root && cJSON_IsObject(root) && key_matches(root, key);
    if (matches) {
        const cJSON *reads = cJSON_GetObjectItemCaseSensitive(root, "read_bytes_per_s");
        if (cJSON_IsArray(reads) && cJSON_GetArraySize(reads) == PLAN_LANE_STEPS) {
            rates->have_read = true;
            for (int i = 0; i < PLAN_LANE_STEPS; i++)
                rates->have_read &= rate_of(cJSON_GetArrayItem(reads, i), &rates->read_bytes_per_s[i]);
        }
        rates->have_memory =
            rate_of(cJSON_GetObjectItemCaseSensitive(root, "memory_bytes_per_s"), &rates->memory_bytes_per_s);
        if (!rates->have_read)
            memset(rates->read_bytes_per_s, 0, sizeof rates->read_bytes_per_s);
        if (!rates->have_memory)
            rates->memory_bytes_per_s = 0;
    }
    cJSON_Delete(root);
    return matches;
}

/* mkdir -p: each missing folder of dir, private to the user. */
static int make_folders(const char *dir)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path)
        return -1;
    for (char *slash = strchr(path + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
        *slash = '\0';
        if (mkdir(path, 0700) != 0 && errno != EEXIST)
            return -1;
        *slash = '/';
    }
    if (mkdir(path, 0700) != 0 && errno != EEXIST)
        return -1;
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode) ? 0 : -1;
}

static bool add_number_string(cJSON *object, const char *name, uint64_t value)
{
    char text[24];
    snprintf(text, sizeof text, "%" PRIu64, value);
    return cJSON_AddStringToObject(object, name, text) != NULL;
}

static char *cache_text(const plan_probe_key *key, const plan_probe_rates *rates)
{
    cJSON *root = cJSON_CreateObject();
    bool ok = root && cJSON_AddStringToObject(root, "format", PLAN_CACHE_FORMAT) &&
              cJSON_AddNumberToObject(root, "version", PLAN_CACHE_VERSION) &&
              cJSON_AddStringToObject(root, "path", key->real_path) &&
              add_number_string(root, "file_size", key->file_size) &&
              add_number_string(root, "file_mtime_ns", key->file_mtime_ns) &&
              add_number_string(root, "file_inode", key->file_inode) &&
              add_number_string(root, "file_device", key->file_device) &&
              add_number_string(root, "block_bytes", key->block_bytes) &&
              add_number_string(root, "memory_total", key->memory_total) &&
              cJSON_AddNumberToObject(root, "n_cores", key->n_cores);
    if (ok && rates->have_read) {
        cJSON *reads = cJSON_AddArrayToObject(root, "read_bytes_per_s");
        ok = reads != NULL;
        for (int i = 0; ok && i < PLAN_LANE_STEPS; i++) {
            cJSON *rate = cJSON_CreateNumber(rates->read_bytes_per_s[i]);
            ok = rate && cJSON_AddItemToArray(reads, rate);
        }
    }
    if (ok && rates->have_memory)
        ok = cJSON_AddNumberToObject(root, "memory_bytes_per_s", rates->memory_bytes_per_s) != NULL;
    char *text = ok ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    return text;
}

int plan_cache_write(const char *path, const plan_probe_key *key, const plan_probe_rates *rates)
{
    char folder[PATH_MAX], temporary[PATH_MAX + 16];
    if (snprintf(folder, sizeof folder, "%s", path) >= (int)sizeof folder)
        return -1;
    char *slash = strrchr(folder, '/');
    if (slash && slash != folder) {
        *slash = '\0';
        if (make_folders(folder) != 0)
            return -1;
    }
    char *text = cache_text(key, rates);
    if (!text)
        return -1;
    snprintf(temporary, sizeof temporary, "%s.XXXXXX", path);
    int fd = mkstemp(temporary);
    if (fd < 0) {
        cJSON_free(text);
        return -1;
    }
    size_t length = strlen(text), done = 0;
    while (done < length) {
        ssize_t wrote = write(fd, text + done, length - done);
        if (wrote < 0 && errno == EINTR)
            continue;
        if (wrote <= 0)
            break;
        done += (size_t)wrote;
    }
    cJSON_free(text);
    /* no fsync: a file lost to a crash reads back as corrupt, which only
     * costs one probe */
    bool written = close(fd) == 0 && done == length;
    if (!written || rename(temporary, path) != 0) {
        unlink(temporary);
        return -1;
    }
    return 0;
}
