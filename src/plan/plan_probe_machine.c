/* plan_probe_machine of plan.h: the memory this process may take (the
 * kernel's MemAvailable, or the room under the cgroup's limit when that is
 * smaller), its cores, the model file's read rate at 1/2/4/8 lanes and the
 * memory's read bandwidth, the last two kept in the probe cache. */
#define _GNU_SOURCE /* O_DIRECT, sched_getaffinity */
#include "plan.h"
#include "plan_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MIB ((uint64_t)1 << 20)
/* O_DIRECT wants offsets, lengths and buffers aligned to the logical block;
 * 4096 covers every device in use. */
#define PLAN_HUGE_PAGE (2u << 20)
#define PLAN_ALIGN 4096
/* Reads are slice-sized, at least 1 MiB (smaller reads measure the device's
 * latency, not the rate the streamer sees), at most 16 MiB (8 lanes'
 * buffers stay small). */
#define PLAN_READ_MIN (1 * MIB)
#define PLAN_READ_MAX (16 * MIB)
/* Each lane count's step stops at whichever comes first: four steps stay
 * under two seconds on a slow disk and read at most 2 GiB on a fast one. */
#define PLAN_STEP_SECONDS 0.4
#define PLAN_STEP_BYTES (512 * MIB)
/* The memory probe: a buffer past the last-level cache of most machines,
 * summed a few times by every core, bounded in time. Faulting its pages in
 * costs more than summing them (0.33 s for 128 MiB on a 2-core VM against
 * 6 ms for one pass), hence not larger. */
#define PLAN_MEMORY_BUFFER (64 * MIB)
#define PLAN_MEMORY_PASSES 4
#define PLAN_MEMORY_SECONDS 0.3
#define PLAN_MEMORY_MAX_THREADS 16

static double now_seconds(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
}

/* Rates are kept in whole bytes per second: JSON carries an integer below
 * 2^53 exactly, so a cached rate reads back as the one measured. */
static double whole_rate(double rate)
{
    return rate >= 1 ? floor(rate) : rate > 0 ? 1 : 0;
}

/* ---- Memory the process may take ---------------------------------------- */

/* One number from a one-line file; "max" (cgroup v2's "no limit") reads
 * as UINT64_MAX. */
static bool read_limit(const char *path, uint64_t *value)
{
    FILE *file = fopen(path, "r");
    if (!file)
        return false;
    char text[64];
    bool read = fgets(text, sizeof text, file) != NULL;
    fclose(file);
    if (!read)
        return false;
    if (strncmp(text, "max", 3) == 0) {
        *value = UINT64_MAX;
        return true;
    }
    char *end;
    errno = 0;
    unsigned long long number = strtoull(text, &end, 10);
    if (end == text || errno != 0)
        return false;
    *value = number;
    return true;
}

/* A field of /proc/meminfo in bytes; 0 when it is missing. */
static uint64_t meminfo_field(const char *name)
{
    FILE *file = fopen("/proc/meminfo", "r");
    if (!file)
        return 0;
    char line[256];
    size_t length = strlen(name);
    uint64_t kib = 0;
    while (fgets(line, sizeof line, file))
        if (strncmp(line, name, length) == 0 && line[length] == ':') {
            kib = strtoull(line + length + 1, NULL, 10);
            break;
        }
    fclose(file);
    return kib > UINT64_MAX / 1024 ? UINT64_MAX : kib * 1024;
}

/* The least room (limit - usage) over a cgroup folder and its ancestors: a
 * parent's limit binds its children. UINT64_MAX: no limit anywhere. */
static uint64_t cgroup_room(const char *mount, const char *group, const char *limit_file, const char *usage_file)
{
    char relative[PATH_MAX], path[PATH_MAX + 512];
    snprintf(relative, sizeof relative, "%s", group);
    uint64_t room = UINT64_MAX;
    for (;;) {
        uint64_t limit, usage;
        snprintf(path, sizeof path, "%s%s/%s", mount, relative, limit_file);
        bool limited = read_limit(path, &limit);
        snprintf(path, sizeof path, "%s%s/%s", mount, relative, usage_file);
        /* cgroup v1 says "no limit" with a number near 2^63 */
        if (limited && limit < (UINT64_MAX >> 2) && read_limit(path, &usage)) {
            uint64_t left = limit > usage ? limit - usage : 0;
            if (left < room)
                room = left;
        }
        char *slash = strrchr(relative, '/');
        if (!slash || relative[0] == '\0')
            break;
        *slash = '\0';
    }
    return room;
}

/* The room under this process's memory cgroups (v2's unified hierarchy, or
 * v1's memory controller). */
static uint64_t cgroup_memory_room(void)
{
    FILE *file = fopen("/proc/self/cgroup", "r");
    if (!file)
        return UINT64_MAX;
    char line[PATH_MAX + 128];
    uint64_t room = UINT64_MAX;
    while (fgets(line, sizeof line, file)) {
        line[strcspn(line, "\n")] = '\0';
        /* "hierarchy-id:controllers:path" */
        char *controllers = strchr(line, ':');
        char *group = controllers ? strchr(controllers + 1, ':') : NULL;
        if (!group)
            continue;
        *controllers++ = '\0';
        *group++ = '\0';
        uint64_t left = UINT64_MAX;
        if (strcmp(line, "0") == 0 && controllers[0] == '\0')
            left = cgroup_room("/sys/fs/cgroup", group, "memory.max", "memory.current");
        else if (strstr(controllers, "memory"))
            left = cgroup_room("/sys/fs/cgroup/memory", group, "memory.limit_in_bytes", "memory.usage_in_bytes");
        if (left < room)
            room = left;
    }
    fclose(file);
    return room;
}

static int32_t usable_cores(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online > 0 ? (int32_t)online : 1;
}

/* ---- Storage read rate -------------------------------------------------- */

typedef struct read_probe {
    int fd;
    bool drop_pages;          /* buffered reads: evict each block first so it comes from the device */
    uint64_t block_bytes;
    uint64_t n_offsets;       /* aligned offsets a block may start at */
    double deadline;
    uint64_t byte_budget;
    atomic_uint_fast64_t claimed;
    atomic_int failed_errno;
} read_probe;

typedef struct read_lane {
    read_probe *probe;
    void *buffer;
    uint64_t random;          /* xorshift state */
    uint64_t bytes;
    pthread_t thread;
} read_lane;

static uint64_t next_random(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    return x;
}

static void *read_lane_run(void *argument)
{
    read_lane *lane = argument;
    read_probe *probe = lane->probe;
    while (now_seconds() < probe->deadline && atomic_load(&probe->failed_errno) == 0) {
        if (atomic_fetch_add(&probe->claimed, probe->block_bytes) >= probe->byte_budget)
            break;
        off_t offset = (off_t)((next_random(&lane->random) % probe->n_offsets) * PLAN_ALIGN);
        if (probe->drop_pages)
            posix_fadvise(probe->fd, offset, (off_t)probe->block_bytes, POSIX_FADV_DONTNEED);
        ssize_t got = pread(probe->fd, lane->buffer, probe->block_bytes, offset);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            atomic_store(&probe->failed_errno, errno ? errno : EIO);
            break;
        }
        lane->bytes += (uint64_t)got;
    }
    return NULL;
}

/* One step: lanes threads reading at random offsets until the deadline or
 * the byte budget. Returns bytes per second, or 0 with *failed_errno. */
static double read_step(read_probe *probe, read_lane *lanes, int n_lanes, int *failed_errno)
{
    atomic_store(&probe->claimed, 0);
    atomic_store(&probe->failed_errno, 0);
    double start = now_seconds();
    probe->deadline = start + PLAN_STEP_SECONDS;
    int started = 0;
    for (int i = 0; i < n_lanes; i++) {
        lanes[i].bytes = 0;
        if (pthread_create(&lanes[i].thread, NULL, read_lane_run, &lanes[i]) != 0)
            break;
        started++;
    }
    /* without a single lane there is nothing to time: read on this thread */
    if (started == 0)
        read_lane_run(&lanes[0]);
    uint64_t bytes = started == 0 ? lanes[0].bytes : 0;
    for (int i = 0; i < started; i++) {
        pthread_join(lanes[i].thread, NULL);
        bytes += lanes[i].bytes;
    }
    double elapsed = now_seconds() - start;
    *failed_errno = atomic_load(&probe->failed_errno);
    if (*failed_errno != 0 || bytes == 0 || elapsed <= 0)
        return 0;
    return whole_rate((double)bytes / elapsed);
}

/* O_DIRECT where the file system takes it (a first read says so: some
 * accept the flag at open and refuse the read), else buffered reads. */
static int open_for_reads(const char *path, void *buffer, uint64_t block_bytes, bool *drop_pages)
{
    int fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t got = pread(fd, buffer, block_bytes, 0);
        if (got >= 0) {
            *drop_pages = false;
            return fd;
        }
        close(fd);
    }
    *drop_pages = true;
    return open(path, O_RDONLY | O_CLOEXEC);
}

static uint64_t read_block_bytes(uint64_t slice_bytes)
{
    uint64_t block = (slice_bytes + PLAN_ALIGN - 1) / PLAN_ALIGN * PLAN_ALIGN;
    if (block < PLAN_READ_MIN)
        block = PLAN_READ_MIN;
    if (block > PLAN_READ_MAX)
        block = PLAN_READ_MAX;
    return block;
}

static int probe_reads(const char *path, uint64_t slice_bytes, double rates[PLAN_LANE_STEPS], char *error,
                       size_t error_size)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        snprintf(error, error_size, "probe: %s: %s", path, strerror(errno));
        return -1;
    }
    uint64_t file_bytes = (uint64_t)st.st_size;
    uint64_t block = read_block_bytes(slice_bytes);
    /* a file smaller than a block is read whole, from offset 0 */
    uint64_t whole_blocks = file_bytes / PLAN_ALIGN * PLAN_ALIGN;
    if (block > whole_blocks)
        block = whole_blocks > 0 ? whole_blocks : PLAN_ALIGN;
    int max_lanes = plan_lane_counts[PLAN_LANE_STEPS - 1];
    read_lane lanes[8] = {0};
    _Static_assert(sizeof lanes / sizeof lanes[0] >= 8, "one lane per thread of the largest step");
    int status = 0;
    /* huge-page memory like the expert cache's slots: on some virtual disks
     * O_DIRECT reads into 4 KiB pages run at under half the rate */
    uint64_t stride = (block + PLAN_HUGE_PAGE - 1) / PLAN_HUGE_PAGE * PLAN_HUGE_PAGE;
    size_t region_bytes = (size_t)(stride * (uint64_t)max_lanes + PLAN_HUGE_PAGE);
    void *region = mmap(NULL, region_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED) {
        region = NULL;
        snprintf(error, error_size, "probe: out of memory for read buffers");
        status = -1;
    } else {
        uintptr_t first = ((uintptr_t)region + PLAN_HUGE_PAGE - 1) / PLAN_HUGE_PAGE * PLAN_HUGE_PAGE;
        madvise((void *)first, (size_t)(stride * (uint64_t)max_lanes), MADV_HUGEPAGE);
        for (int i = 0; i < max_lanes; i++)
            lanes[i].buffer = (void *)(first + (uintptr_t)(stride * (uint64_t)i));
    }
    read_probe probe = {.block_bytes = block, .byte_budget = PLAN_STEP_BYTES};
    probe.n_offsets = file_bytes > block ? (file_bytes - block) / PLAN_ALIGN + 1 : 1;
    probe.fd = status == 0 ? open_for_reads(path, lanes[0].buffer, block, &probe.drop_pages) : -1;
    if (status == 0 && probe.fd < 0) {
        snprintf(error, error_size, "probe: %s: %s", path, strerror(errno));
        status = -1;
    }
    for (int step = 0; status == 0 && step < PLAN_LANE_STEPS; step++) {
        for (int i = 0; i < plan_lane_counts[step]; i++) {
            lanes[i].probe = &probe;
            /* a different sequence for every lane and step */
            lanes[i].random = 0x9e3779b97f4a7c15ull * (uint64_t)(step * 16 + i + 1);
        }
        int failed_errno = 0;
        rates[step] = read_step(&probe, lanes, plan_lane_counts[step], &failed_errno);
        if (failed_errno != 0) {
            snprintf(error, error_size, "probe: reading %s: %s", path, strerror(failed_errno));
            status = -1;
        } else if (rates[step] <= 0) {
            snprintf(error, error_size, "probe: reading %s: no bytes read", path);
            status = -1;
        }
    }
    if (probe.fd >= 0)
        close(probe.fd);
    if (region)
        munmap(region, region_bytes);
    if (status != 0)
        memset(rates, 0, sizeof(double) * PLAN_LANE_STEPS);
    return status;
}

/* ---- Memory bandwidth ----------------------------------------------------- */

typedef struct sum_part {
    const uint64_t *words;
    size_t n_words;
    uint64_t sum;
    pthread_t thread;
} sum_part;

static void *sum_part_run(void *argument)
{
    sum_part *part = argument;
    /* four running sums: one would chain every add on the last */
    uint64_t a = 0, b = 0, c = 0, d = 0;
    size_t i = 0;
    for (; i + 4 <= part->n_words; i += 4) {
        a += part->words[i];
        b += part->words[i + 1];
        c += part->words[i + 2];
        d += part->words[i + 3];
    }
    for (; i < part->n_words; i++)
        a += part->words[i];
    part->sum = a + b + c + d;
    return NULL;
}

static int probe_memory(int32_t n_cores, double *rate, char *error, size_t error_size)
{
    size_t n_words = PLAN_MEMORY_BUFFER / sizeof(uint64_t);
    uint64_t *words = malloc(PLAN_MEMORY_BUFFER);
    if (!words) {
        snprintf(error, error_size, "probe: out of memory for the memory probe's %" PRIu64 " MiB",
                 (uint64_t)PLAN_MEMORY_BUFFER / MIB);
        return -1;
    }
    /* written first, so the timing sees reads, not page faults */
    for (size_t i = 0; i < n_words; i++)
        words[i] = i;
    int n_threads = n_cores < 1 ? 1 : n_cores > PLAN_MEMORY_MAX_THREADS ? PLAN_MEMORY_MAX_THREADS : n_cores;
    sum_part parts[PLAN_MEMORY_MAX_THREADS];
    size_t per_thread = n_words / (size_t)n_threads;
    double best = 0, start = now_seconds();
    uint64_t check = 0;
    for (int pass = 0; pass < PLAN_MEMORY_PASSES && now_seconds() - start < PLAN_MEMORY_SECONDS; pass++) {
        double pass_start = now_seconds();
        int started = 0;
        for (int t = 0; t < n_threads; t++) {
            parts[t].words = words + (size_t)t * per_thread;
            parts[t].n_words = t == n_threads - 1 ? n_words - (size_t)t * per_thread : per_thread;
            /* the first part runs on this thread */
            if (t > 0 && pthread_create(&parts[t].thread, NULL, sum_part_run, &parts[t]) != 0)
                break;
            started++;
        }
        sum_part_run(&parts[0]);
        size_t summed_words = parts[0].n_words;
        for (int t = 1; t < started; t++) {
            pthread_join(parts[t].thread, NULL);
            summed_words += parts[t].n_words;
        }
        double elapsed = now_seconds() - pass_start;
        for (int t = 0; t < started; t++)
            check += parts[t].sum;
        if (elapsed > 0 && (double)(summed_words * sizeof(uint64_t)) / elapsed > best)
            best = (double)(summed_words * sizeof(uint64_t)) / elapsed;
    }
    free(words);
    /* the sums feed nothing; this keeps the compiler from dropping them */
    __asm__ volatile("" : : "r"(check));
    *rate = whole_rate(best);
    return 0;
}

/* ---- The probe ------------------------------------------------------------ */

int plan_probe_machine(const char *model_path, uint64_t slice_bytes, bool probe_io, bool probe_mem,
                       const char *cache_dir, bool refresh, plan_machine *machine, char *error, size_t error_size)
{
    memset(machine, 0, sizeof *machine);
    uint64_t available = meminfo_field("MemAvailable");
    uint64_t room = cgroup_memory_room();
    if (room < UINT64_MAX && (available == 0 || room < available)) {
        machine->memory_bytes = room;
        machine->memory_capped_by_cgroup = true;
    } else {
        machine->memory_bytes = available;
    }
    machine->n_cores = usable_cores();
    if (!probe_io && !probe_mem)
        return 0;
    if (probe_io && !model_path) {
        snprintf(error, error_size, "probe: no model file to time reads of");
        return -1;
    }

    uint64_t block = read_block_bytes(slice_bytes);
    plan_probe_key key;
    char cache_path[PATH_MAX + 64];
    bool cached = cache_dir && model_path &&
                  plan_probe_key_make(model_path, block, meminfo_field("MemTotal"), machine->n_cores, &key) == 0 &&
                  plan_cache_path(cache_dir, model_path, cache_path, sizeof cache_path);
    plan_probe_rates rates = {0};
    if (cached)
        plan_cache_read(cache_path, &key, &rates);
    if (refresh) { /* measure what is asked again; keep the kept rates of the other probe */
        rates.have_read &= !probe_io;
        rates.have_memory &= !probe_mem;
    }

    int status = 0;
    bool measured = false;
    if (probe_io && !rates.have_read) {
        status = probe_reads(model_path, slice_bytes, rates.read_bytes_per_s, error, error_size);
        rates.have_read = status == 0;
        measured |= rates.have_read;
    }
    if (probe_mem && !rates.have_memory && status == 0) {
        status = probe_memory(machine->n_cores, &rates.memory_bytes_per_s, error, error_size);
        rates.have_memory = status == 0 && rates.memory_bytes_per_s > 0;
        measured |= rates.have_memory;
    }
    if (cached && measured)
        plan_cache_write(cache_path, &key, &rates);
    if (probe_io && rates.have_read)
        memcpy(machine->read_bytes_per_s, rates.read_bytes_per_s, sizeof machine->read_bytes_per_s);
    if (probe_mem && rates.have_memory)
        machine->memory_bytes_per_s = rates.memory_bytes_per_s;
    return status;
}
