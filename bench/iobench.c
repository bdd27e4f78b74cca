/* bench-iobench FILE [--size KiB] [--threads N] [--seconds S] [--until PATH]:
 * the disk's bandwidth for random O_DIRECT reads of one size at a queue depth
 * of N (one read in flight per thread) into memory like the expert cache's,
 * the figure expert streaming is bound by. With --until, the reads stop once
 * PATH exists (or after S seconds): a benchmark reads beside another run
 * and ends the reads when that run ends.
 *
 * bench-iobench FILE --replay IO_TRACE.csv [--threads N]: the disk's bandwidth
 * for the very reads a streamed run made while decoding (the --io-trace rows
 * of phase 1, each its aligned window), issued back to back in their order,
 * N in flight: what the disk gives that run's bytes, with their sizes and
 * places, without the gaps compute leaves.
 *
 * A benchmark, not a test. Prints one line: MiB/s, reads, mean latency. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define ALIGNMENT 4096

/* One read of a replayed trace: an aligned window. */
typedef struct window {
    uint64_t offset, bytes;
} window;

/* The reads to replay, shared by the readers, handed out in order. */
typedef struct replay {
    window *windows;
    size_t count;
    uint64_t largest;
    _Atomic size_t next;
} replay;

typedef struct reader {
    const char *path;
    uint64_t file_size, read_size;
    double seconds;
    unsigned seed;
    replay *replay; /* NULL: random reads of read_size for `seconds` */
    const char *until; /* random reads stop once this path exists (NULL: never) */
    uint64_t reads, bytes;
    double busy;
} reader;

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The reader's next read: false when it is done. */
static bool next_read(reader *r, double end, uint64_t *offset, uint64_t *bytes)
{
    if (r->replay) {
        size_t i = atomic_fetch_add(&r->replay->next, 1);
        if (i >= r->replay->count)
            return false;
        *offset = r->replay->windows[i].offset;
        *bytes = r->replay->windows[i].bytes;
        return true;
    }
    if (now_seconds() >= end || (r->until && access(r->until, F_OK) == 0))
        return false;
    uint64_t slots = (r->file_size - r->read_size) / ALIGNMENT;
    *offset = ((uint64_t)rand_r(&r->seed) * 65536u + (uint64_t)rand_r(&r->seed)) % slots * ALIGNMENT;
    *bytes = r->read_size;
    return true;
}

#define HUGE_PAGE (2u << 20)

/* A read buffer of the kind the expert cache's slots are: anonymous memory
 * on 2 MiB pages where the kernel gives them, touched before use. The kind
 * matters: this machine's virtual disk reads ~900 KiB into 4 KiB pages at
 * under half the rate it reads them into huge pages. */
typedef struct read_buffer {
    void *mapping;
    size_t mapped;
    uint8_t *data; /* HUGE_PAGE-aligned, inside the mapping */
} read_buffer;

static bool read_buffer_create(read_buffer *b, size_t bytes)
{
    /* whole huge pages: advice over part of one gives none */
    size_t span = (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
    b->mapped = span + HUGE_PAGE;
    b->mapping = mmap(NULL, b->mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (b->mapping == MAP_FAILED)
        return false;
    b->data = (uint8_t *)(((uintptr_t)b->mapping + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
#ifdef MADV_HUGEPAGE
    madvise(b->data, span, MADV_HUGEPAGE);
#endif
    memset(b->data, 0, span);
    return true;
}

static void *read_windows(void *argument)
{
    reader *r = argument;
    int fd = open(r->path, O_RDONLY | O_DIRECT);
    read_buffer buffer;
    if (fd < 0 || !read_buffer_create(&buffer, (size_t)r->read_size)) {
        fprintf(stderr, "bench-iobench: cannot open %s with O_DIRECT\n", r->path);
        exit(1);
    }
    double end = now_seconds() + r->seconds;
    uint64_t offset, bytes;
    while (next_read(r, end, &offset, &bytes)) {
        double start = now_seconds();
        ssize_t got = pread(fd, buffer.data, (size_t)bytes, (off_t)offset);
        r->busy += now_seconds() - start;
        if (got <= 0) {
            fprintf(stderr, "bench-iobench: read failed at %llu\n", (unsigned long long)offset);
            exit(1);
        }
        r->reads++;
        r->bytes += (uint64_t)got;
    }
    munmap(buffer.mapping, buffer.mapped);
    close(fd);
    return NULL;
}

/* Loads the decode reads of an --io-trace file (turn,phase,step,layer,
 * expert,proj,lane,spec,offset,req_bytes,read_bytes,latency_ns), each as
 * the aligned window the lane read. */
static bool replay_load(replay *out, const char *path, uint64_t file_size)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "bench-iobench: cannot open %s\n", path);
        return false;
    }
    size_t capacity = 0;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        int phase;
        unsigned long long offset, read_bytes;
        if (line[0] == '#' || sscanf(line, "%*d,%d,%*d,%*d,%*d,%*d,%*d,%*d,%llu,%*u,%llu", &phase, &offset,
                                     &read_bytes) != 3)
            continue;
        if (phase != 1 || read_bytes == 0)
            continue;
        uint64_t start = offset & ~(uint64_t)(ALIGNMENT - 1);
        uint64_t bytes = (read_bytes + ALIGNMENT - 1) / ALIGNMENT * ALIGNMENT;
        if (start + bytes > file_size)
            bytes = file_size - start;
        if (out->count == capacity) {
            capacity = capacity ? 2 * capacity : 4096;
            window *grown = realloc(out->windows, capacity * sizeof *grown);
            if (!grown) {
                fclose(f);
                return false;
            }
            out->windows = grown;
        }
        out->windows[out->count++] = (window){start, bytes};
        if (bytes > out->largest)
            out->largest = bytes;
    }
    fclose(f);
    if (out->count == 0)
        fprintf(stderr, "bench-iobench: %s holds no decode reads\n", path);
    return out->count > 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench-iobench FILE [--size KiB] [--threads N] [--seconds S] [--until PATH] "
                        "[--replay IO_TRACE.csv]\n");
        return 2;
    }
    const char *replay_path = NULL, *until = NULL;
    uint64_t size_kib = 900;
    int threads = 4;
    double seconds = 10.0;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--size") == 0)
            size_kib = strtoull(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--threads") == 0)
            threads = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--seconds") == 0)
            seconds = atof(argv[i + 1]);
        else if (strcmp(argv[i], "--replay") == 0)
            replay_path = argv[i + 1];
        else if (strcmp(argv[i], "--until") == 0)
            until = argv[i + 1];
    }
    struct stat st;
    if (stat(argv[1], &st) != 0 || threads < 1 || threads > 64 || size_kib == 0) {
        fprintf(stderr, "bench-iobench: bad arguments\n");
        return 2;
    }
    uint64_t read_size = (size_kib * 1024 + ALIGNMENT - 1) / ALIGNMENT * ALIGNMENT;
    replay trace = {0};
    if (replay_path) {
        if (!replay_load(&trace, replay_path, (uint64_t)st.st_size))
            return 1;
        read_size = trace.largest;
    }
    reader readers[64];
    pthread_t ids[64];
    double start = now_seconds();
    for (int t = 0; t < threads; t++) {
        readers[t] = (reader){argv[1], (uint64_t)st.st_size, read_size, seconds, 12345u + (unsigned)t * 7919u,
                              replay_path ? &trace : NULL, until, 0, 0, 0};
        pthread_create(&ids[t], NULL, read_windows, &readers[t]);
    }
    uint64_t reads = 0, bytes = 0;
    double busy = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(ids[t], NULL);
        reads += readers[t].reads;
        bytes += readers[t].bytes;
        busy += readers[t].busy;
    }
    double elapsed = now_seconds() - start;
    double mib = (double)bytes / (1024.0 * 1024.0);
    char what[96];
    if (replay_path)
        snprintf(what, sizeof what, "%llu reads replayed (%.1f MiB)", (unsigned long long)reads, mib);
    else
        snprintf(what, sizeof what, "%llu reads of %llu KiB", (unsigned long long)reads,
                 (unsigned long long)(read_size / 1024));
    printf("iobench: %.1f MiB/s, %s at queue depth %d in %.2f s, mean latency %.2f ms\n", mib / elapsed, what, threads,
           elapsed, reads ? busy / (double)reads * 1e3 : 0.0);
    free(trace.windows);
    return 0;
}
