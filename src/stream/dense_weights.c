#include "dense_weights.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../base/pages.h"

/* Neighbouring dense tensors closer than this share one run (the gap is
 * alignment padding, or a small tensor's worth of expert bytes at most). */
#define DENSE_RUN_GAP (64 * 1024)
/* Bytes per read while copying or warming. */
#define DENSE_CHUNK (8 * 1024 * 1024)
#define DENSE_SAMPLES 256
#define BLOCK SHARD_READ_ALIGNMENT

typedef struct dense_run {
    file_range range;
    uint8_t *copy;      /* the byte at range.begin; NULL when not copied */
    uint64_t bytes;     /* dense bytes inside the run (gaps not counted) */
} dense_run;

struct dense_weights {
    enum bmoe_dense_weights policy;
    dense_weights_files files;  /* paths and sizes only while creating */
    const uint8_t **mappings;   /* [n_files], the store's copy of the array */
    dense_run *runs;    /* sorted by (shard, begin) */
    int n_runs;
    uint8_t *memory;
    size_t memory_bytes;
    uint64_t dense_bytes;
    bool direct;
    bmoe_load_progress progress;
    void *progress_user;
};

/* Reports bytes of the runs' span done so far, every DENSE_CHUNK. */
static void report_progress(const dense_weights *dense, const char *step, uint64_t done)
{
    if (!dense->progress)
        return;
    uint64_t total = 0;
    for (int i = 0; i < dense->n_runs; i++)
        total += dense->runs[i].range.end - dense->runs[i].range.begin;
    dense->progress(dense->progress_user, step, done < total ? done : total, total);
}

static int compare_ranges(const void *left, const void *right)
{
    const file_range *a = left, *b = right;
    if (a->shard != b->shard)
        return a->shard < b->shard ? -1 : 1;
    return a->begin < b->begin ? -1 : a->begin > b->begin;
}

static bool is_expert(const file_range *tensor, const file_range *experts, int n_experts)
{
    for (int i = 0; i < n_experts; i++)
        if (experts[i].shard == tensor->shard && experts[i].begin == tensor->begin)
            return true;
    return false;
}

/* The dense tensors sorted, merged into runs. */
static int build_runs(dense_weights *dense, const file_range *tensors, int n_tensors, const file_range *experts,
                      int n_experts, bmoe_error *err)
{
    file_range *sorted = malloc((size_t)(n_tensors > 0 ? n_tensors : 1) * sizeof *sorted);
    dense->runs = malloc((size_t)(n_tensors > 0 ? n_tensors : 1) * sizeof *dense->runs);
    if (!sorted || !dense->runs) {
        free(sorted);
        return error_set_status(err, BMOE_ERR_OUT_OF_MEMORY, "dense weights: out of memory");
    }
    int n = 0;
    for (int i = 0; i < n_tensors; i++)
        if (tensors[i].end > tensors[i].begin && !is_expert(&tensors[i], experts, n_experts))
            sorted[n++] = tensors[i];
    qsort(sorted, (size_t)n, sizeof *sorted, compare_ranges);
    for (int i = 0; i < n; i++) {
        dense->dense_bytes += sorted[i].end - sorted[i].begin;
        dense_run *last = dense->n_runs > 0 ? &dense->runs[dense->n_runs - 1] : NULL;
        if (last && last->range.shard == sorted[i].shard && sorted[i].begin <= last->range.end + DENSE_RUN_GAP) {
            if (sorted[i].end > last->range.end)
                last->range.end = sorted[i].end;
            last->bytes += sorted[i].end - sorted[i].begin;
            continue;
        }
        dense->runs[dense->n_runs++] = (dense_run){.range = sorted[i], .copy = NULL,
                                                   .bytes = sorted[i].end - sorted[i].begin};
    }
    free(sorted);
    return 0;
}

/* Bytes a run's copy takes: whole blocks around it, one more for the
 * window's tail. */
static size_t run_slot_bytes(const dense_run *run)
{
    uint64_t first = run->range.begin & ~(uint64_t)(BLOCK - 1);
    uint64_t last = (run->range.end + BLOCK - 1) & ~(uint64_t)(BLOCK - 1);
    return (size_t)(last - first + BLOCK);
}

static int copy_runs(dense_weights *dense, bool want_direct, const shard_io *io, bmoe_error *err)
{
    size_t total = 0;
    for (int i = 0; i < dense->n_runs; i++)
        total += run_slot_bytes(&dense->runs[i]);
    if (total == 0)
        return 0;
    void *memory = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED)
        return error_set_status(err, BMOE_ERR_OUT_OF_MEMORY, "dense weights: cannot map %zu bytes for the copy",
                                total);
    dense->memory = memory;
    dense->memory_bytes = total;
#ifdef MADV_HUGEPAGE
    madvise(memory, total, MADV_HUGEPAGE);
#endif
    shard_reader reader;
    if (shard_reader_open(&reader, dense->files.paths, dense->files.sizes, dense->files.n_files, want_direct, io,
                          err) != 0)
        return -1;
    dense->direct = want_direct && shard_reader_direct(&reader);
    size_t placed = 0;
    uint64_t done = 0;
    int status = 0;
    for (int i = 0; i < dense->n_runs && status == 0; i++) {
        dense_run *run = &dense->runs[i];
        uint8_t *slot = dense->memory + placed;
        placed += run_slot_bytes(run);
        uint64_t base = run->range.begin & ~(uint64_t)(BLOCK - 1);
        run->copy = slot + (run->range.begin - base);
        /* chunks end on block boundaries, so their direct windows never overlap */
        for (uint64_t offset = run->range.begin; offset < run->range.end && status == 0;) {
            uint64_t end = ((offset & ~(uint64_t)(BLOCK - 1)) + DENSE_CHUNK);
            if (end > run->range.end)
                end = run->range.end;
            uint64_t device;
            uint8_t *region = slot + ((offset & ~(uint64_t)(BLOCK - 1)) - base);
            status = shard_reader_read(&reader, run->range.shard, offset, end - offset, region, &device, err);
            done += end - offset;
            report_progress(dense, "dense weights", done);
            offset = end;
        }
    }
    shard_reader_close(&reader);
    return status;
}

/* The warm policy: one sequential pass over the runs through the mapping's
 * file, buffered, so their pages are in the page cache before the first token. */
static int warm_runs(dense_weights *dense, const shard_io *io, bmoe_error *err)
{
    shard_reader reader;
    if (shard_reader_open(&reader, dense->files.paths, dense->files.sizes, dense->files.n_files, false, io, err) != 0)
        return -1;
    uint8_t *buffer = aligned_alloc(BLOCK, shard_region_bytes(DENSE_CHUNK));
    int status = buffer ? 0 : error_set_status(err, BMOE_ERR_OUT_OF_MEMORY, "dense weights: out of memory");
    uint64_t done = 0;
    for (int i = 0; i < dense->n_runs && status == 0; i++) {
        const dense_run *run = &dense->runs[i];
        for (uint64_t offset = run->range.begin; offset < run->range.end && status == 0; offset += DENSE_CHUNK) {
            uint64_t length = run->range.end - offset < DENSE_CHUNK ? run->range.end - offset : DENSE_CHUNK;
            uint64_t device;
            status = shard_reader_read(&reader, run->range.shard, offset, length, buffer, &device, err);
            done += length;
            report_progress(dense, "warming dense weights", done);
        }
    }
    free(buffer);
    shard_reader_close(&reader);
    return status;
}

/* The mmap and warm policies read the runs through the mapping, which is
 * opened without read-ahead: they get it back. */
static void advise_read_ahead(const dense_weights *dense)
{
    uintptr_t page_mask = (uintptr_t)page_bytes() - 1;
    for (int i = 0; i < dense->n_runs; i++) {
        const dense_run *run = &dense->runs[i];
        if (run->range.shard >= dense->files.n_files || !dense->mappings[run->range.shard])
            continue;
        uintptr_t begin = (uintptr_t)(dense->mappings[run->range.shard] + run->range.begin) & ~page_mask;
        uintptr_t end = (uintptr_t)(dense->mappings[run->range.shard] + run->range.end);
        madvise((void *)begin, end - begin, MADV_NORMAL);
    }
}

dense_weights *dense_weights_create(const dense_weights_files *files, const file_range *tensors, int n_tensors,
                                    const file_range *experts, int n_experts, enum bmoe_dense_weights policy,
                                    bool direct, const shard_io *io, bmoe_load_progress progress,
                                    void *progress_user, bmoe_error *err)
{
    dense_weights *dense = calloc(1, sizeof *dense);
    if (!dense) {
        error_set_status(err, BMOE_ERR_OUT_OF_MEMORY, "dense weights: out of memory");
        return NULL;
    }
    dense->policy = policy;
    dense->progress = progress;
    dense->progress_user = progress_user;
    dense->files = *files;
    dense->mappings = malloc((files->n_files ? files->n_files : 1) * sizeof *dense->mappings);
    if (!dense->mappings) {
        free(dense);
        error_set_status(err, BMOE_ERR_OUT_OF_MEMORY, "dense weights: out of memory");
        return NULL;
    }
    for (uint32_t i = 0; i < files->n_files; i++)
        dense->mappings[i] = files->mappings[i];
    int status = build_runs(dense, tensors, n_tensors, experts, n_experts, err);
    if (status == 0 && policy != BMOE_DENSE_WEIGHTS_ANON)
        advise_read_ahead(dense);
    if (status == 0 && policy == BMOE_DENSE_WEIGHTS_ANON)
        status = copy_runs(dense, direct, io, err);
    else if (status == 0 && policy == BMOE_DENSE_WEIGHTS_WARM)
        status = warm_runs(dense, io, err);
    if (status != 0) {
        dense_weights_destroy(dense);
        return NULL;
    }
    dense->files.paths = NULL; /* the caller's arrays end here */
    dense->files.sizes = NULL;
    dense->files.mappings = dense->mappings;
    return dense;
}

void dense_weights_destroy(dense_weights *dense)
{
    if (!dense)
        return;
    if (dense->memory)
        munmap(dense->memory, dense->memory_bytes);
    free(dense->runs);
    free((void *)dense->mappings);
    free(dense);
}

const void *dense_weights_locate(const dense_weights *dense, uint32_t shard, uint64_t offset)
{
    int low = 0, high = dense->n_runs - 1;
    while (low <= high) {
        int middle = (low + high) / 2;
        const dense_run *run = &dense->runs[middle];
        if (run->range.shard < shard || (run->range.shard == shard && run->range.end <= offset))
            low = middle + 1;
        else if (run->range.shard > shard || run->range.begin > offset)
            high = middle - 1;
        else
            return run->copy ? run->copy + (offset - run->range.begin) : NULL;
    }
    return NULL;
}

uint64_t dense_weights_bytes(const dense_weights *dense)
{
    return dense->dense_bytes;
}

uint64_t dense_weights_copy_bytes(const dense_weights *dense)
{
    return dense->memory_bytes;
}

bool dense_weights_direct(const dense_weights *dense)
{
    return dense->direct;
}

double dense_weights_resident_fraction(const dense_weights *dense)
{
    long page_size = sysconf(_SC_PAGESIZE);
    uint64_t span = 0;
    for (int i = 0; i < dense->n_runs; i++)
        span += dense->runs[i].range.end - dense->runs[i].range.begin;
    if (page_size <= 0 || span == 0)
        return -1.0;
    /* stratified: one page every span / samples bytes over the runs */
    uint64_t stride = span / DENSE_SAMPLES + 1, next = 0, passed = 0;
    int sampled = 0, resident = 0;
    for (int i = 0; i < dense->n_runs && sampled < DENSE_SAMPLES; i++) {
        const dense_run *run = &dense->runs[i];
        uint64_t length = run->range.end - run->range.begin;
        const uint8_t *base = run->copy;
        if (!base) {
            if (run->range.shard >= dense->files.n_files || !dense->mappings[run->range.shard])
                return -1.0;
            base = dense->mappings[run->range.shard] + run->range.begin;
        }
        for (; next < passed + length && sampled < DENSE_SAMPLES; next += stride) {
            uintptr_t address = (uintptr_t)(base + (next - passed));
            void *page = (void *)(address & ~(uintptr_t)(page_size - 1));
            unsigned char in_core = 0;
            if (mincore(page, (size_t)page_size, &in_core) != 0)
                return -1.0;
            sampled++;
            resident += in_core & 1;
        }
        passed += length;
    }
    return sampled > 0 ? (double)resident / (double)sampled : -1.0;
}
