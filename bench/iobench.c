/* bench-iobench FILE [--size KiB] [--threads N] [--seconds S]: the disk's
 * bandwidth for random O_DIRECT reads of one size at a queue depth of N (one
 * read in flight per thread), the figure expert streaming is bound by. A
 * benchmark, not a test. Prints one line: MiB/s, reads, mean latency. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define ALIGNMENT 4096

typedef struct reader {
    const char *path;
    uint64_t file_size, read_size;
    double seconds;
    unsigned seed;
    uint64_t reads, bytes;
    double busy;
} reader;

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void *read_randomly(void *argument)
{
    reader *r = argument;
    int fd = open(r->path, O_RDONLY | O_DIRECT);
    void *buffer = aligned_alloc(ALIGNMENT, (size_t)r->read_size);
    if (fd < 0 || !buffer) {
        fprintf(stderr, "bench-iobench: cannot open %s with O_DIRECT\n", r->path);
        exit(1);
    }
    uint64_t slots = (r->file_size - r->read_size) / ALIGNMENT;
    double end = now_seconds() + r->seconds;
    while (now_seconds() < end) {
        uint64_t offset = ((uint64_t)rand_r(&r->seed) * 65536u + (uint64_t)rand_r(&r->seed)) % slots * ALIGNMENT;
        double start = now_seconds();
        ssize_t got = pread(fd, buffer, (size_t)r->read_size, (off_t)offset);
        r->busy += now_seconds() - start;
        if (got <= 0) {
            fprintf(stderr, "bench-iobench: read failed at %llu\n", (unsigned long long)offset);
            exit(1);
        }
        r->reads++;
        r->bytes += (uint64_t)got;
    }
    free(buffer);
    close(fd);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench-iobench FILE [--size KiB] [--threads N] [--seconds S]\n");
        return 2;
    }
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
    }
    struct stat st;
    if (stat(argv[1], &st) != 0 || threads < 1 || threads > 64 || size_kib == 0) {
        fprintf(stderr, "bench-iobench: bad arguments\n");
        return 2;
    }
    uint64_t read_size = (size_kib * 1024 + ALIGNMENT - 1) / ALIGNMENT * ALIGNMENT;
    reader readers[64];
    pthread_t ids[64];
    double start = now_seconds();
    for (int t = 0; t < threads; t++) {
        readers[t] = (reader){argv[1], (uint64_t)st.st_size, read_size, seconds, 12345u + (unsigned)t * 7919u, 0, 0, 0};
        pthread_create(&ids[t], NULL, read_randomly, &readers[t]);
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
    printf("iobench: %.1f MiB/s, %llu reads of %llu KiB at queue depth %d in %.1f s, mean latency %.2f ms\n",
           (double)bytes / (1024.0 * 1024.0) / elapsed, (unsigned long long)reads,
           (unsigned long long)(read_size / 1024), threads, elapsed, reads ? busy / (double)reads * 1e3 : 0.0);
    return 0;
}
