/* Malformed-file corpus: from valid GGUF images (the writer's sample model,
 * the hand-crafted v2 file with nested arrays, a split shard, stories260K and
 * an oracle MoE model) it derives truncations at every structural boundary
 * (and one byte either side), seeded random byte flips and structured
 * overwrites of length and count fields. Each case is opened in memory from
 * an exactly sized buffer: it must give a clean one-line error or a clean
 * load, and a loaded model is walked completely (every key, array element,
 * tensor byte range and the --info printout).
 *
 * With --write-corpus DIR it writes the cases as files instead (the fuzz
 * corpus of scripts/test-fuzz.sh), leaving out cases over 128 KiB. */
#include <errno.h>
#include <inttypes.h>
#include <sys/stat.h>

#include "gguf_test_util.h"
#include "test.h"

/* Largest case written to the fuzz corpus. */
#define CORPUS_FILE_MAX (128 * 1024)

typedef struct corpus_run {
    const char *write_dir; /* NULL: test the cases */
    FILE *sink;            /* --info output goes here */
    uint64_t cases, loaded, refused;
} corpus_run;

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng_next(void)
{
    /* xorshift64*: fixed seed, the corpus is the same on every run */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}

/* Walks a nested array view recursively, touching every element. */
static uint64_t walk_array(const gguf_kv *kv, int depth)
{
    uint64_t sum = 0;
    if (kv->array_type == GGUF_TYPE_ARRAY) {
        /* element access is O(index) here: walk a bounded prefix */
        for (uint64_t i = 0; i < kv->array_count && i < 64; i++) {
            gguf_kv inner;
            if (!gguf_array_element(kv, i, &inner) || depth > 16)
                return sum;
            sum += walk_array(&inner, depth + 1);
        }
        return sum;
    }
    if (kv->array_type == GGUF_TYPE_STRING) {
        gguf_string *list = malloc((kv->array_count ? kv->array_count : 1) * sizeof *list);
        if (list && gguf_array_strings(kv, list))
            for (uint64_t i = 0; i < kv->array_count; i++)
                sum += list[i].length ? (uint8_t)list[i].data[list[i].length - 1] : 0;
        free(list);
        return sum;
    }
    for (uint64_t i = 0; i < kv->array_count; i++)
        sum += (uint64_t)gguf_array_int(kv, i) + (gguf_array_float(kv, i) > 0.0);
    return sum;
}

/* Exercises everything a loaded model offers; ASan checks the reads. */
static void walk_model(corpus_run *run, const gguf_model *m)
{
    uint64_t sum = 0;
    for (uint64_t i = 0; i < gguf_kv_count(m); i++) {
        const gguf_kv *kv = gguf_kv_at(m, i);
        int64_t value;
        float real;
        bool flag;
        gguf_string s;
        uint32_t layers[4];
        bmoe_error err;
        sum += gguf_get_int(m, kv->key, &value) + gguf_get_float(m, kv->key, &real) +
               gguf_get_bool(m, kv->key, &flag) + gguf_get_string(m, kv->key, &s);
        sum += (uint64_t)gguf_get_per_layer_uint32(m, kv->key, 4, layers, &err);
        if (kv->type == GGUF_TYPE_ARRAY)
            sum += walk_array(kv, 0);
        else if (kv->payload_bytes)
            sum += kv->payload[kv->payload_bytes - 1];
    }
    for (uint64_t i = 0; i < gguf_tensor_count(m); i++) {
        const gguf_tensor *t = gguf_tensor_at(m, i);
        if (t->nbytes)
            sum += ((const uint8_t *)t->data)[0] + ((const uint8_t *)t->data)[t->nbytes - 1];
        sum += gguf_find_tensor(m, t->name) == t;
    }
    gguf_print_info(m, run->sink);
    fprintf(run->sink, "%" PRIu64 "\n", sum); /* keeps the reads from being optimized away */
}

/* One case: image[0..size) (copied into an exactly sized buffer). */
static void run_case(corpus_run *run, const uint8_t *image, size_t size, bool must_fail, const char *what,
                     uint64_t detail)
{
    if (run->write_dir && size > CORPUS_FILE_MAX)
        return; /* the written corpus stays small; the in-process test runs every case */
    run->cases++;
    if (run->write_dir) {
        char path[1024];
        snprintf(path, sizeof path, "%s/case-%05" PRIu64 ".gguf", run->write_dir, run->cases);
        if (!write_whole_file(path, image, size)) {
            fprintf(stderr, "FATAL: cannot write %s: %s\n", path, strerror(errno));
            exit(1);
        }
        return;
    }
    uint8_t *copy = malloc(size ? size : 1);
    if (size)
        memcpy(copy, image, size);
    bmoe_error err = {0};
    gguf_model *m = gguf_open_memory(copy, size, "case", &err);
    if (m) {
        run->loaded++;
        CHECK_MSG(!must_fail, "%s %" PRIu64 ": a cut file loaded", what, detail);
        walk_model(run, m);
        gguf_close(m);
    } else {
        run->refused++;
        bool clean = err.message[0] != '\0' && strchr(err.message, '\n') == NULL &&
                     strncmp(err.message, "case: ", 6) == 0;
        CHECK_MSG(clean, "%s %" PRIu64 ": unclean message '%s'", what, detail, err.message);
    }
    free(copy);
}

/* End of the last tensor's data: any cut before it must be refused. */
static uint64_t required_size(const uint8_t *image, size_t size)
{
    bmoe_error err;
    gguf_model *m = gguf_open_memory(image, size, "base", &err);
    if (!m) {
        fprintf(stderr, "FATAL: base image does not load: %s\n", err.message);
        exit(1);
    }
    uint64_t end = 0;
    for (uint64_t i = 0; i < gguf_tensor_count(m); i++) {
        const gguf_tensor *t = gguf_tensor_at(m, i);
        if (t->file_offset + t->nbytes > end)
            end = t->file_offset + t->nbytes;
    }
    /* a file without tensors needs every key */
    if (gguf_tensor_count(m) == 0)
        end = size;
    gguf_close(m);
    return end;
}

static void truncations(corpus_run *run, const uint8_t *image, size_t size, size_t max_elements, const char *what)
{
    boundary_list list = {0};
    walk_boundaries(image, size, &list, max_elements);
    uint64_t required = required_size(image, size);
    for (size_t i = 0; i < list.count; i++) {
        for (int delta = -1; delta <= 1; delta++) {
            uint64_t cut = list.offsets[i] + (uint64_t)(int64_t)delta;
            if (cut > size || (delta == -1 && list.offsets[i] == 0))
                continue;
            if (delta != 0 && i > 0 && list.offsets[i - 1] == cut)
                continue; /* already covered */
            run_case(run, image, cut, cut < required, what, cut);
        }
    }
    free(list.offsets);
}

/* Values that make lengths, counts, types and offsets hostile. */
static uint64_t hostile_value(uint64_t size)
{
    static const uint64_t values[] = {0, 1, 2, 3, 4, 5, 9, 12, 13, 31, 32, 33, 64, 255, 256, 1000,
                                      0x7fffffffull, 0x80000000ull, 0xffffffffull, 1ull << 32, 1ull << 40,
                                      1ull << 62, 1ull << 63, ~0ull, ~0ull - 7};
    uint64_t pick = rng_next() % (sizeof values / sizeof values[0] + 2);
    if (pick == sizeof values / sizeof values[0])
        return size;
    if (pick == sizeof values / sizeof values[0] + 1)
        return size - rng_next() % 64;
    return values[pick];
}

/* Random flips anywhere in [0, region), and overwrites of a 4- or 8-byte
 * field at a structural boundary with hostile values. */
static void mutations(corpus_run *run, const uint8_t *image, size_t size, size_t region, int flip_cases,
                      int field_cases, const char *what)
{
    uint8_t *work = malloc(size);
    for (int c = 0; c < flip_cases; c++) {
        memcpy(work, image, size);
        int flips = 1 + (int)(rng_next() % 4);
        for (int f = 0; f < flips; f++) {
            size_t at = (size_t)(rng_next() % region);
            work[at] ^= (uint8_t)(1 + rng_next() % 255);
        }
        run_case(run, work, size, false, what, (uint64_t)c);
    }
    boundary_list list = {0};
    walk_boundaries(image, size, &list, 8);
    for (int c = 0; c < field_cases && list.count; c++) {
        memcpy(work, image, size);
        uint64_t at = list.offsets[rng_next() % list.count];
        int width = rng_next() % 2 ? 8 : 4;
        uint64_t value = hostile_value(size);
        for (int b = 0; b < width && at + (uint64_t)b < size; b++)
            work[at + (uint64_t)b] = (uint8_t)(value >> (8 * b));
        run_case(run, work, size, false, what, at);
    }
    free(list.offsets);
    free(work);
}

/* Size of the image up to its data start (where flips matter). */
static size_t header_region(const uint8_t *image, size_t size)
{
    bmoe_error err;
    gguf_model *m = gguf_open_memory(image, size, "base", &err);
    size_t region = size;
    if (m) {
        for (uint64_t i = 0; i < gguf_tensor_count(m); i++)
            if (gguf_tensor_at(m, i)->file_offset < region)
                region = (size_t)gguf_tensor_at(m, i)->file_offset;
        gguf_close(m);
    }
    return region ? region : size;
}

static void corpus_from(corpus_run *run, const uint8_t *image, size_t size, size_t max_elements, int flip_cases,
                        int field_cases, const char *what)
{
    truncations(run, image, size, max_elements, what);
    mutations(run, image, size, header_region(image, size), flip_cases, field_cases, what);
}

static uint8_t *load_image(const char *path, size_t *size)
{
    uint8_t *image = test_read_file(path, size);
    if (!image) {
        fprintf(stderr, "FATAL: cannot read %s\n", path);
        exit(1);
    }
    return image;
}

int main(int argc, char **argv)
{
    corpus_run run = {0};
    if (argc == 3 && strcmp(argv[1], "--write-corpus") == 0) {
        run.write_dir = argv[2];
        mkdir(run.write_dir, 0755);
    } else if (argc != 1) {
        fprintf(stderr, "usage: %s [--write-corpus DIR]\n", argv[0]);
        return 2;
    }
    run.sink = fopen("/dev/null", "w");
    if (!run.sink) {
        fprintf(stderr, "FATAL: cannot open /dev/null\n");
        return 1;
    }

    char path[1024];
    bmoe_error err = {0};
    size_t size;
    uint8_t *image;

    /* the writer's sample model */
    snprintf(path, sizeof path, "%s/gguf_corpus_sample.gguf", test_tmp_dir());
    if (sample_model_write(path, 0, &err) != 0) {
        fprintf(stderr, "FATAL: %s\n", err.message);
        return 1;
    }
    image = load_image(path, &size);
    corpus_from(&run, image, size, 1000, 300, 300, "sample");
    free(image);

    /* the hand-crafted v2 file with nested arrays */
    test_bytes crafted = {0};
    crafted_v2_build(&crafted);
    corpus_from(&run, crafted.data, crafted.size, 1000, 300, 300, "crafted");
    bytes_free(&crafted);

    /* stories260K: every key and tensor boundary, the first elements of each array */
    image = load_image(test_shared_path(path, sizeof path, "data/models/stories260K/stories260K.gguf"), &size);
    corpus_from(&run, image, size, 6, 100, 100, "stories260K");
    free(image);

    /* an oracle MoE model with quantized expert tensors (boundaries only) */
    image = load_image(test_shared_path(path, sizeof path, "oracle/models/qwen3moe-tiny-q4_k_m.gguf"), &size);
    truncations(&run, image, size, 4, "qwen3moe");
    free(image);

    fclose(run.sink);
    if (run.write_dir) {
        printf("wrote %" PRIu64 " corpus files to %s\n", run.cases, run.write_dir);
        return run.cases >= 1000 ? 0 : 1;
    }
    printf("%" PRIu64 " cases: %" PRIu64 " loaded, %" PRIu64 " refused cleanly\n", run.cases, run.loaded,
           run.refused);
    CHECK(run.cases >= 1000);
    CHECK(run.loaded > 0 && run.refused > 0);
    return test_finish();
}
