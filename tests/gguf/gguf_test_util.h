/* Helpers shared by the GGUF tests and the corpus generator: a byte builder
 * for hand-crafted GGUF images (what the writer cannot produce: v2 files,
 * nested arrays, every scalar type, broken files), a sample-model writer, and
 * an independent walker that lists the structural boundaries of a valid
 * file (where truncations are interesting). */
#ifndef BMOE_TESTS_GGUF_TEST_UTIL_H
#define BMOE_TESTS_GGUF_TEST_UTIL_H

#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "quant/quant.h"

typedef struct test_bytes {
    uint8_t *data;
    size_t size;
    size_t capacity;
} test_bytes;

static inline void bytes_put(test_bytes *b, const void *data, size_t n)
{
    if (b->size + n > b->capacity) {
        size_t capacity = b->capacity ? b->capacity : 256;
        while (capacity < b->size + n)
            capacity *= 2;
        b->data = realloc(b->data, capacity);
        if (!b->data) {
            fprintf(stderr, "FATAL: out of memory\n");
            exit(1);
        }
        b->capacity = capacity;
    }
    if (n)
        memcpy(b->data + b->size, data, n);
    b->size += n;
}

static inline void bytes_u8(test_bytes *b, uint8_t v) { bytes_put(b, &v, 1); }

static inline void bytes_u16(test_bytes *b, uint16_t v)
{
    uint8_t p[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    bytes_put(b, p, 2);
}

static inline void bytes_u32(test_bytes *b, uint32_t v)
{
    uint8_t p[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    bytes_put(b, p, 4);
}

static inline void bytes_u64(test_bytes *b, uint64_t v)
{
    bytes_u32(b, (uint32_t)v);
    bytes_u32(b, (uint32_t)(v >> 32));
}

static inline void bytes_f32(test_bytes *b, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    bytes_u32(b, u);
}

static inline void bytes_f64(test_bytes *b, double f)
{
    uint64_t u;
    memcpy(&u, &f, 8);
    bytes_u64(b, u);
}

static inline void bytes_string(test_bytes *b, const char *s)
{
    bytes_u64(b, strlen(s));
    bytes_put(b, s, strlen(s));
}

static inline void bytes_header(test_bytes *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
    bytes_put(b, "GGUF", 4);
    bytes_u32(b, version);
    bytes_u64(b, n_tensors);
    bytes_u64(b, n_kv);
}

/* A key followed by its value type. */
static inline void bytes_key(test_bytes *b, const char *key, uint32_t type)
{
    bytes_string(b, key);
    bytes_u32(b, type);
}

static inline void bytes_tensor_info(test_bytes *b, const char *name, uint32_t n_dims, const int64_t *ne,
                                     uint32_t type, uint64_t offset)
{
    bytes_string(b, name);
    bytes_u32(b, n_dims);
    for (uint32_t d = 0; d < n_dims; d++)
        bytes_u64(b, (uint64_t)ne[d]);
    bytes_u32(b, type);
    bytes_u64(b, offset);
}

/* Zero padding up to a multiple of alignment. */
static inline void bytes_align(test_bytes *b, size_t alignment)
{
    while (b->size % alignment)
        bytes_u8(b, 0);
}

static inline void bytes_free(test_bytes *b)
{
    free(b->data);
    b->data = NULL;
    b->size = b->capacity = 0;
}

static inline bool write_whole_file(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return false;
    bool ok = size == 0 || fwrite(data, 1, size, f) == size;
    return fclose(f) == 0 && ok;
}

/* Runs gguf_open(path) in a child process, which a hang cannot stall: true
 * when the child answered within timeout_seconds, with the open's outcome
 * in *opened and its message in message. A child that hangs is killed. */
static inline bool gguf_open_in_time(const char *path, int timeout_seconds, bool *opened, char *message,
                                     size_t size)
{
    int channel[2];
    if (pipe(channel) != 0)
        return false;
    pid_t child = fork();
    if (child < 0)
        return false;
    if (child == 0) {
        close(channel[0]);
        bmoe_error err = {0};
        gguf_model *m = gguf_open(path, &err);
        const char *text = m ? "opened" : err.message;
        ssize_t written = write(channel[1], text, strlen(text));
        _exit(written < 0 ? 3 : m ? 1 : 0);
    }
    close(channel[1]);
    struct pollfd wait_for = {.fd = channel[0], .events = POLLIN};
    bool answered = poll(&wait_for, 1, timeout_seconds * 1000) == 1;
    ssize_t got = answered ? read(channel[0], message, size - 1) : -1;
    message[got > 0 ? got : 0] = '\0';
    if (!answered)
        kill(child, SIGKILL);
    int status = 0;
    waitpid(child, &status, 0);
    close(channel[0]);
    *opened = WIFEXITED(status) && WEXITSTATUS(status) == 1;
    return answered && WIFEXITED(status);
}

/* The byte pattern of the sample tensors: tensor t, byte j. */
static inline uint8_t sample_byte(int tensor, uint64_t j)
{
    return (uint8_t)(tensor * 31 + j * 7 + (j >> 8));
}

/* The sample model's tensors (name, type, dims); bytes follow from the types. */
typedef struct sample_tensor {
    const char *name;
    uint32_t type;
    uint32_t n_dims;
    int64_t ne[4];
} sample_tensor;

static const sample_tensor sample_tensors[] = {
    {"token_embd.weight", TYPE_F32, 2, {16, 10, 1, 1}},
    {"blk.0.attn_norm.weight", TYPE_F32, 1, {16, 1, 1, 1}},
    {"blk.0.ffn_gate_exps.weight", TYPE_Q8_0, 3, {64, 3, 4, 1}},
    {"blk.0.ffn_down_exps.weight", TYPE_Q4_K, 3, {256, 2, 4, 1}},
    {"blk.0.ffn_gate_inp.weight", TYPE_F16, 2, {16, 4, 1, 1}},
    {"empty.weight", TYPE_F32, 2, {16, 0, 1, 1}},
    {"blk.0.odd.weight", TYPE_F32, 4, {3, 1, 1, 1}},
};
#define SAMPLE_TENSOR_COUNT (sizeof sample_tensors / sizeof sample_tensors[0])

static inline uint64_t sample_tensor_bytes(const sample_tensor *t)
{
    const quant_format *f = quant_format_of(t->type);
    return (uint64_t)(t->ne[0] / f->block_elems) * (uint64_t)f->block_bytes * (uint64_t)(t->ne[1] * t->ne[2] * t->ne[3]);
}

/* Writes the sample model with the writer: metadata of every kind the writer
 * offers, and the sample tensors with their byte patterns, each written in
 * two pieces. Alignment 0 keeps the default. Returns 0 or -1 (err filled). */
static inline int sample_model_write(const char *path, uint32_t alignment, bmoe_error *err)
{
    gguf_writer *w = gguf_writer_create(path, err);
    if (!w)
        return -1;
    static const char *const tokens[] = {"<unk>", "hello", "", "w\xc3\xb6rld", "a b"};
    int32_t head_count_kv[3] = {2, 2, 1};
    uint32_t feed_forward[3] = {64, 128, 64};
    uint8_t swa[3] = {1, 0, 1};
    float scores[5] = {0.0f, -1.5f, 2.25f, 3.0f, -0.125f};
    int32_t long_list[100];
    for (int i = 0; i < 100; i++)
        long_list[i] = i * 3;
    if (alignment)
        gguf_writer_set_alignment(w, alignment);
    gguf_writer_add_string(w, "general.architecture", "testarch");
    gguf_writer_add_string(w, "general.name", "sample \"model\"\n");
    gguf_writer_add_uint32(w, "testarch.block_count", 3);
    gguf_writer_add_uint32(w, "testarch.expert_count", 4);
    gguf_writer_add_uint32(w, "testarch.expert_used_count", 2);
    gguf_writer_add_uint32(w, "testarch.attention.head_count", 4);
    gguf_writer_add_array(w, "testarch.attention.head_count_kv", GGUF_TYPE_INT32, 3, head_count_kv);
    gguf_writer_add_array(w, "testarch.feed_forward_length", GGUF_TYPE_UINT32, 3, feed_forward);
    gguf_writer_add_array(w, "testarch.attention.sliding_window_pattern", GGUF_TYPE_BOOL, 3, swa);
    gguf_writer_add_int32(w, "test.int32", -123456);
    gguf_writer_add_uint64(w, "test.uint64", (1ull << 40) + 3);
    gguf_writer_add_uint16(w, "test.uint16", 60000);
    gguf_writer_add_float32(w, "test.float32", 0.375f);
    gguf_writer_add_bool(w, "test.bool", true);
    gguf_writer_add_string(w, "test.empty_string", "");
    gguf_writer_add_string_array(w, "tokenizer.ggml.tokens", 5, tokens);
    gguf_writer_add_array(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, 5, scores);
    gguf_writer_add_array(w, "test.long_list", GGUF_TYPE_INT32, 100, long_list);
    gguf_writer_add_array(w, "test.empty_array", GGUF_TYPE_UINT8, 0, NULL);
    for (size_t t = 0; t < SAMPLE_TENSOR_COUNT; t++)
        gguf_writer_add_tensor_info(w, sample_tensors[t].name, sample_tensors[t].type, sample_tensors[t].n_dims,
                                    sample_tensors[t].ne);
    gguf_writer_begin_data(w);
    for (size_t t = 0; t < SAMPLE_TENSOR_COUNT; t++) {
        uint64_t n = sample_tensor_bytes(&sample_tensors[t]);
        uint8_t *data = malloc(n ? n : 1);
        for (uint64_t j = 0; j < n; j++)
            data[j] = sample_byte((int)t, j);
        uint64_t half = n / 2;
        gguf_writer_write_data(w, data, half);
        gguf_writer_write_data(w, data + half, n - half);
        free(data);
    }
    return gguf_writer_finish(w, err);
}

/* A hand-crafted GGUF v2 image with one key of every scalar type, arrays of
 * every scalar type, an array of strings, arrays of arrays (two and three
 * levels, including arrays of string arrays) and two tensors. */
static inline void crafted_v2_build(test_bytes *b)
{
    bytes_header(b, 2, 2, 26);
    bytes_key(b, "general.architecture", GGUF_TYPE_STRING);
    bytes_string(b, "crafted");
    bytes_key(b, "s.u8", GGUF_TYPE_UINT8);
    bytes_u8(b, 200);
    bytes_key(b, "s.i8", GGUF_TYPE_INT8);
    bytes_u8(b, (uint8_t)-5);
    bytes_key(b, "s.u16", GGUF_TYPE_UINT16);
    bytes_u16(b, 65535);
    bytes_key(b, "s.i16", GGUF_TYPE_INT16);
    bytes_u16(b, (uint16_t)-30000);
    bytes_key(b, "s.u32", GGUF_TYPE_UINT32);
    bytes_u32(b, 4000000000u);
    bytes_key(b, "s.i32", GGUF_TYPE_INT32);
    bytes_u32(b, (uint32_t)-2000000000);
    bytes_key(b, "s.f32", GGUF_TYPE_FLOAT32);
    bytes_f32(b, -2.5f);
    bytes_key(b, "s.bool", GGUF_TYPE_BOOL);
    bytes_u8(b, 7); /* any nonzero byte is true */
    bytes_key(b, "s.u64", GGUF_TYPE_UINT64);
    bytes_u64(b, 18446744073709551615ull);
    bytes_key(b, "s.i64", GGUF_TYPE_INT64);
    bytes_u64(b, (uint64_t)-1099511627776ll);
    bytes_key(b, "s.f64", GGUF_TYPE_FLOAT64);
    bytes_f64(b, 1e100);
    bytes_key(b, "s.u64_small", GGUF_TYPE_UINT64);
    bytes_u64(b, 77);
    /* arrays of scalars */
    bytes_key(b, "a.u8", GGUF_TYPE_ARRAY);
    bytes_u32(b, GGUF_TYPE_UINT8);
    bytes_u64(b, 3);
    bytes_u8(b, 1), bytes_u8(b, 2), bytes_u8(b, 255);
    bytes_key(b, "a.i16", GGUF_TYPE_ARRAY);
    bytes_u32(b, GGUF_TYPE_INT16);
    bytes_u64(b, 2);
    bytes_u16(b, (uint16_t)-7), bytes_u16(b, 9);
    bytes_key(b, "a.i64", GGUF_TYPE_ARRAY);
    bytes_u32(b, GGUF_TYPE_INT64);
    bytes_u64(b, 2);
    bytes_u64(b, (uint64_t)-3), bytes_u64(b, 1ull << 50);
    bytes_key(b, "a.f64", GGUF_TYPE_ARRAY);
    bytes_u32(b, GGUF_TYPE_FLOAT64);
    bytes_u64(b, 2);
    bytes_f64(b, 0.5), bytes_f64(b, -4.0);
    bytes_key(b, "a.u64", GGUF_TYPE_ARRAY);
    bytes_u32(b, GGUF_TYPE_UINT64);
    bytes_u64(b, 1);
    bytes_u64(b, 5);
    bytes_key(b, "a.i8", GGUF_TYPE_ARRAY);
    bytes_u32(b, GGUF_TYPE_INT8);
    bytes_u64(b, 2);
    bytes_u8(b, (uint8_t)-1), bytes_u8(b, 1);
    bytes_key(b, "a.strings", GGUF_TYPE_ARRAY);
    bytes_u32(b, GGUF_TYPE_STRING);
    bytes_u64(b, 3);
    bytes_string(b, "alpha"), bytes_string(b, ""), bytes_string(b, "gamma");
    /* [[1, 2, 3], [], [4]] as INT32 */
    bytes_key(b, "n.ints", GGUF_TYPE_ARRAY);
    bytes_u32(b, GGUF_TYPE_ARRAY);
    bytes_u64(b, 3);
    bytes_u32(b, GGUF_TYPE_INT32), bytes_u64(b, 3), bytes_u32(b, 1), bytes_u32(b, 2), bytes_u32(b, 3);
    bytes_u32(b, GGUF_TYPE_INT32), bytes_u64(b, 0);
    bytes_u32(b, GGUF_TYPE_INT32), bytes_u64(b, 1), bytes_u32(b, 4);
    /* [["x", "yy"], ["zzz"]] */
    bytes_key(b, "n.strings", GGUF_TYPE_ARRAY);
    bytes_u32(b, GGUF_TYPE_ARRAY);
    bytes_u64(b, 2);
    bytes_u32(b, GGUF_TYPE_STRING), bytes_u64(b, 2), bytes_string(b, "x"), bytes_string(b, "yy");
    bytes_u32(b, GGUF_TYPE_STRING), bytes_u64(b, 1), bytes_string(b, "zzz");
    /* [[[5, 6]], [[7], [8, 9]]] as UINT16 */
    bytes_key(b, "n.deep", GGUF_TYPE_ARRAY);
    bytes_u32(b, GGUF_TYPE_ARRAY);
    bytes_u64(b, 2);
    bytes_u32(b, GGUF_TYPE_ARRAY), bytes_u64(b, 1);
    bytes_u32(b, GGUF_TYPE_UINT16), bytes_u64(b, 2), bytes_u16(b, 5), bytes_u16(b, 6);
    bytes_u32(b, GGUF_TYPE_ARRAY), bytes_u64(b, 2);
    bytes_u32(b, GGUF_TYPE_UINT16), bytes_u64(b, 1), bytes_u16(b, 7);
    bytes_u32(b, GGUF_TYPE_UINT16), bytes_u64(b, 2), bytes_u16(b, 8), bytes_u16(b, 9);
    bytes_key(b, "n.empty", GGUF_TYPE_ARRAY);
    bytes_u32(b, GGUF_TYPE_ARRAY);
    bytes_u64(b, 0);
    bytes_key(b, "general.alignment", GGUF_TYPE_UINT32);
    bytes_u32(b, 64);
    bytes_key(b, "s.utf8", GGUF_TYPE_STRING);
    bytes_string(b, "\xe2\x96\x81hi");
    const int64_t ne_a[2] = {8, 2}, ne_b[1] = {32};
    bytes_tensor_info(b, "a.weight", 2, ne_a, TYPE_F32, 0);
    bytes_tensor_info(b, "b.weight", 1, ne_b, TYPE_Q8_0, 64);
    bytes_align(b, 64);
    for (int i = 0; i < 64; i++)
        bytes_u8(b, (uint8_t)i);
    for (int i = 0; i < 34; i++)
        bytes_u8(b, (uint8_t)(100 + i));
    bytes_align(b, 64);
}

/* ---- Structural boundaries of a valid file ----------------------------
 * An independent walk (written from gguf.md, not from the reader) that
 * records the offset where every field starts: the header fields, each key
 * length, key bytes, value type, value (array headers and each element,
 * capped per array), each tensor-info field, the data start and each
 * tensor's data. */
typedef struct boundary_list {
    uint64_t *offsets;
    size_t count, capacity;
} boundary_list;

static inline void boundary_add(boundary_list *list, uint64_t offset)
{
    if (list->count == list->capacity) {
        list->capacity = list->capacity ? list->capacity * 2 : 256;
        list->offsets = realloc(list->offsets, list->capacity * sizeof *list->offsets);
        if (!list->offsets) {
            fprintf(stderr, "FATAL: out of memory\n");
            exit(1);
        }
    }
    list->offsets[list->count++] = offset;
}

static inline uint64_t walk_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static inline uint32_t walk_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t walk_scalar_size(uint32_t type)
{
    static const uint8_t sizes[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return type < 13 ? sizes[type] : 0;
}

/* Walks one value at pos, recording boundaries; returns the end. Only for
 * valid files. Element boundaries are recorded for the first max_elements. */
static inline uint64_t walk_value(const uint8_t *d, uint64_t pos, uint32_t type, boundary_list *list,
                                  size_t max_elements)
{
    boundary_add(list, pos);
    if (type == GGUF_TYPE_STRING) {
        boundary_add(list, pos + 8);
        return pos + 8 + walk_u64(d + pos);
    }
    if (type != GGUF_TYPE_ARRAY)
        return pos + walk_scalar_size(type);
    uint32_t element_type = walk_u32(d + pos);
    uint64_t count = walk_u64(d + pos + 4);
    boundary_add(list, pos + 4);
    pos += 12;
    boundary_add(list, pos);
    for (uint64_t i = 0; i < count; i++) {
        if (walk_scalar_size(element_type)) {
            if (i < max_elements)
                boundary_add(list, pos);
            pos += walk_scalar_size(element_type);
            continue;
        }
        size_t before = list->count;
        pos = walk_value(d, pos, element_type, list, max_elements);
        if (i >= max_elements)
            list->count = before; /* walked for its size only */
    }
    return pos;
}

static inline void walk_boundaries(const uint8_t *d, uint64_t size, boundary_list *list, size_t max_elements)
{
    for (uint64_t p = 0; p <= 24; p += 4)
        boundary_add(list, p); /* magic, version, n_tensors (2 halves), n_kv (2 halves), end */
    uint64_t n_tensors = walk_u64(d + 8), n_kv = walk_u64(d + 16);
    uint64_t pos = 24, alignment = 32;
    for (uint64_t i = 0; i < n_kv; i++) {
        boundary_add(list, pos);
        uint64_t key_length = walk_u64(d + pos);
        boundary_add(list, pos + 8);
        bool is_alignment = key_length == 17 && memcmp(d + pos + 8, "general.alignment", 17) == 0;
        pos += 8 + key_length;
        boundary_add(list, pos);
        uint32_t type = walk_u32(d + pos);
        pos += 4;
        if (is_alignment)
            alignment = walk_u32(d + pos);
        pos = walk_value(d, pos, type, list, max_elements);
    }
    uint64_t *offsets = calloc(n_tensors + 1, sizeof *offsets);
    for (uint64_t i = 0; i < n_tensors; i++) {
        boundary_add(list, pos);
        boundary_add(list, pos + 8);
        pos += 8 + walk_u64(d + pos);
        boundary_add(list, pos);
        uint32_t n_dims = walk_u32(d + pos);
        pos += 4;
        for (uint32_t k = 0; k < n_dims; k++, pos += 8)
            boundary_add(list, pos);
        boundary_add(list, pos);
        boundary_add(list, pos + 4);
        offsets[i] = walk_u64(d + pos + 4);
        pos += 12;
    }
    boundary_add(list, pos);
    if (n_tensors > 0) {
        uint64_t data_start = (pos + alignment - 1) / alignment * alignment;
        boundary_add(list, data_start);
        for (uint64_t i = 0; i < n_tensors; i++)
            boundary_add(list, data_start + offsets[i]);
    }
    boundary_add(list, size);
    free(offsets);
    /* keep only offsets inside [0, size] */
    size_t kept = 0;
    for (size_t i = 0; i < list->count; i++)
        if (list->offsets[i] <= size)
            list->offsets[kept++] = list->offsets[i];
    list->count = kept;
}

#endif
