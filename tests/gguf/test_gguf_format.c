/* GGUF round trips: files written by the writer and hand-crafted v2 files
 * (every value type, nested arrays) read back through every getter; writer
 * misuse; the --info printout. */
#include <inttypes.h>
#include <math.h>
#include <unistd.h>

#include "gguf_test_util.h"
#include "test.h"

static bool string_is(gguf_string s, const char *expected)
{
    return s.length == strlen(expected) && memcmp(s.data, expected, s.length) == 0;
}

static void test_writer_round_trip(uint32_t alignment)
{
    char path[512];
    snprintf(path, sizeof path, "%s/gguf_format_sample_%u.gguf", test_tmp_dir(), alignment);
    bmoe_error err = {0};
    CHECK_MSG(sample_model_write(path, alignment, &err) == 0, "%s", err.message);
    gguf_model *m = gguf_open(path, &err);
    CHECK_MSG(m != NULL, "%s", err.message);
    if (!m)
        return;
    uint32_t expected_alignment = alignment ? alignment : 32;
    CHECK(gguf_version(m) == 3);
    CHECK(gguf_shard_count(m) == 1);
    CHECK(gguf_alignment(m) == expected_alignment);
    CHECK(gguf_shard_fd(m, 0) >= 0);
    CHECK(gguf_shard_fd(m, 1) == -1);
    CHECK(strcmp(gguf_shard_path(m, 0), path) == 0);

    /* 19 keys added, plus general.alignment when set */
    CHECK(gguf_kv_count(m) == (alignment ? 20u : 19u));
    gguf_string s;
    CHECK(gguf_get_string(m, "general.architecture", &s) && string_is(s, "testarch"));
    CHECK(gguf_get_string(m, "general.name", &s) && string_is(s, "sample \"model\"\n"));
    CHECK(gguf_get_string(m, "test.empty_string", &s) && s.length == 0);
    uint32_t u32 = 0;
    CHECK(gguf_get_uint32(m, "testarch.block_count", &u32) && u32 == 3);
    int64_t i64 = 0;
    CHECK(gguf_get_int(m, "test.int32", &i64) && i64 == -123456);
    CHECK(!gguf_get_uint32(m, "test.int32", &u32)); /* negative: does not fit */
    CHECK(gguf_get_int(m, "test.uint64", &i64) && i64 == (int64_t)(1ull << 40) + 3);
    CHECK(!gguf_get_uint32(m, "test.uint64", &u32)); /* too large for 32 bits */
    CHECK(gguf_get_uint32(m, "test.uint16", &u32) && u32 == 60000);
    float f = 0;
    CHECK(gguf_get_float(m, "test.float32", &f) && f == 0.375f);
    CHECK(gguf_get_float(m, "test.uint16", &f) && f == 60000.0f); /* integers convert to float */
    CHECK(!gguf_get_int(m, "test.float32", &i64));                /* but not the other way */
    bool flag = false;
    CHECK(gguf_get_bool(m, "test.bool", &flag) && flag);
    CHECK(gguf_get_int(m, "test.bool", &i64) && i64 == 1);
    CHECK(!gguf_get_string(m, "test.bool", &s));
    /* a missing key leaves the output alone */
    u32 = 77;
    CHECK(!gguf_get_uint32(m, "no.such.key", &u32) && u32 == 77);
    CHECK(gguf_find_kv(m, "no.such.key") == NULL);
    CHECK(gguf_find_kv(m, "") == NULL);

    const gguf_kv *tokens = gguf_find_kv(m, "tokenizer.ggml.tokens");
    CHECK(tokens && tokens->type == GGUF_TYPE_ARRAY && tokens->array_type == GGUF_TYPE_STRING &&
          tokens->array_count == 5);
    if (tokens) {
        gguf_string list[5];
        CHECK(gguf_array_strings(tokens, list));
        CHECK(string_is(list[0], "<unk>") && string_is(list[1], "hello") && string_is(list[2], "") &&
              string_is(list[3], "w\xc3\xb6rld") && string_is(list[4], "a b"));
        gguf_kv element;
        CHECK(gguf_array_element(tokens, 3, &element) && element.type == GGUF_TYPE_STRING);
        CHECK(!gguf_array_element(tokens, 5, &element));
    }
    const gguf_kv *scores = gguf_find_kv(m, "tokenizer.ggml.scores");
    CHECK(scores && scores->array_type == GGUF_TYPE_FLOAT32 && scores->array_count == 5 &&
          scores->payload_bytes == 20);
    if (scores) {
        CHECK(gguf_array_float(scores, 1) == -1.5 && gguf_array_float(scores, 4) == -0.125);
        CHECK(gguf_array_int(scores, 2) == 2); /* floats truncate toward zero */
        gguf_string unused[1];
        CHECK(!gguf_array_strings(scores, unused));
    }
    const gguf_kv *long_list = gguf_find_kv(m, "test.long_list");
    CHECK(long_list && long_list->array_count == 100 && gguf_array_int(long_list, 99) == 297);
    const gguf_kv *empty = gguf_find_kv(m, "test.empty_array");
    CHECK(empty && empty->type == GGUF_TYPE_ARRAY && empty->array_count == 0 && empty->payload_bytes == 0);

    /* per-layer keys: scalar broadcast, INT32/UINT32/BOOL arrays, errors */
    uint32_t layers[3] = {0, 0, 0};
    CHECK(gguf_get_per_layer_uint32(m, "testarch.attention.head_count", 3, layers, &err) == 1 &&
          layers[0] == 4 && layers[1] == 4 && layers[2] == 4);
    CHECK(gguf_get_per_layer_uint32(m, "testarch.attention.head_count_kv", 3, layers, &err) == 1 &&
          layers[0] == 2 && layers[1] == 2 && layers[2] == 1);
    CHECK(gguf_get_per_layer_uint32(m, "testarch.feed_forward_length", 3, layers, &err) == 1 &&
          layers[0] == 64 && layers[1] == 128 && layers[2] == 64);
    CHECK(gguf_get_per_layer_uint32(m, "testarch.attention.sliding_window_pattern", 3, layers, &err) == 1 &&
          layers[0] == 1 && layers[1] == 0 && layers[2] == 1);
    CHECK(gguf_get_per_layer_uint32(m, "testarch.missing", 3, layers, &err) == 0);
    error_clear(&err);
    uint32_t four[4];
    CHECK(gguf_get_per_layer_uint32(m, "testarch.feed_forward_length", 4, four, &err) == -1 &&
          strstr(err.message, "testarch.feed_forward_length") && strstr(err.message, "3 elements"));
    CHECK(gguf_get_per_layer_uint32(m, "tokenizer.ggml.scores", 5, four, &err) == -1 &&
          strstr(err.message, "FLOAT32"));
    CHECK(gguf_get_per_layer_uint32(m, "general.name", 3, layers, &err) == -1 && strstr(err.message, "STRING"));
    CHECK(gguf_get_per_layer_uint32(m, "test.int32", 3, layers, &err) == -1);

    /* tensors: order, shapes, sizes, offsets, data */
    CHECK(gguf_tensor_count(m) == SAMPLE_TENSOR_COUNT);
    uint64_t previous_end = 0;
    for (size_t t = 0; t < SAMPLE_TENSOR_COUNT && t < gguf_tensor_count(m); t++) {
        const gguf_tensor *tensor = gguf_tensor_at(m, t);
        const sample_tensor *want = &sample_tensors[t];
        CHECK(strcmp(tensor->name, want->name) == 0);
        CHECK(tensor->type == want->type && tensor->n_dims == want->n_dims);
        CHECK(memcmp(tensor->ne, want->ne, sizeof tensor->ne) == 0);
        CHECK(tensor->shard == 0);
        CHECK(tensor->nbytes == sample_tensor_bytes(want));
        CHECK_MSG(tensor->file_offset % expected_alignment == 0, "tensor %zu at %" PRIu64, t, tensor->file_offset);
        CHECK(tensor->file_offset >= previous_end);
        CHECK(gguf_find_tensor(m, want->name) == tensor);
        bool same = true;
        for (uint64_t j = 0; j < tensor->nbytes; j++)
            same &= ((const uint8_t *)tensor->data)[j] == sample_byte((int)t, j);
        CHECK_MSG(same, "tensor %s data", want->name);
        previous_end = tensor->file_offset + tensor->nbytes;
    }
    /* Q4_K {256, 2, 4}: 8 rows of one 144-byte block */
    const gguf_tensor *down = gguf_find_tensor(m, "blk.0.ffn_down_exps.weight");
    CHECK(down && down->nbytes == 8 * 144);
    CHECK(gguf_find_tensor(m, "blk.0") == NULL);
    CHECK(gguf_tensor_at(m, SAMPLE_TENSOR_COUNT) == NULL);
    gguf_close(m);
}

static void test_crafted_v2_and_nested_arrays(void)
{
    test_bytes b = {0};
    crafted_v2_build(&b);
    char path[512];
    snprintf(path, sizeof path, "%s/gguf_format_crafted_v2.gguf", test_tmp_dir());
    CHECK(write_whole_file(path, b.data, b.size));
    bmoe_error err = {0};
    gguf_model *m = gguf_open(path, &err);
    CHECK_MSG(m != NULL, "%s", err.message);
    gguf_model *from_memory = gguf_open_memory(b.data, b.size, "crafted", &err);
    CHECK_MSG(from_memory != NULL, "%s", err.message);
    if (from_memory) {
        CHECK(gguf_shard_fd(from_memory, 0) == -1);
        CHECK(gguf_kv_count(from_memory) == 26 && gguf_tensor_count(from_memory) == 2);
        gguf_close(from_memory);
    }
    if (!m) {
        bytes_free(&b);
        return;
    }
    CHECK(gguf_version(m) == 2);
    CHECK(gguf_alignment(m) == 64);
    CHECK(gguf_kv_count(m) == 26);
    int64_t v = 0;
    CHECK(gguf_get_int(m, "s.u8", &v) && v == 200);
    CHECK(gguf_get_int(m, "s.i8", &v) && v == -5);
    CHECK(gguf_get_int(m, "s.u16", &v) && v == 65535);
    CHECK(gguf_get_int(m, "s.i16", &v) && v == -30000);
    CHECK(gguf_get_int(m, "s.u32", &v) && v == 4000000000ll);
    CHECK(gguf_get_int(m, "s.i32", &v) && v == -2000000000ll);
    CHECK(gguf_get_int(m, "s.i64", &v) && v == -1099511627776ll);
    CHECK(gguf_get_int(m, "s.u64_small", &v) && v == 77);
    CHECK(!gguf_get_int(m, "s.u64", &v)); /* 2^64-1 does not fit in int64 */
    uint32_t u = 0;
    CHECK(gguf_get_uint32(m, "s.u32", &u) && u == 4000000000u);
    CHECK(!gguf_get_uint32(m, "s.i8", &u));
    float f = 0;
    CHECK(gguf_get_float(m, "s.f32", &f) && f == -2.5f);
    CHECK(gguf_get_float(m, "s.f64", &f) && isinf(f)); /* 1e100 overflows float */
    CHECK(gguf_get_float(m, "s.i16", &f) && f == -30000.0f);
    bool flag = false;
    CHECK(gguf_get_bool(m, "s.bool", &flag) && flag);
    CHECK(gguf_get_int(m, "s.bool", &v) && v == 1);
    gguf_string s;
    CHECK(gguf_get_string(m, "s.utf8", &s) && string_is(s, "\xe2\x96\x81hi"));
    const gguf_kv *kv = gguf_find_kv(m, "s.f64");
    CHECK(kv && kv->type == GGUF_TYPE_FLOAT64 && kv->payload_bytes == 8);
    kv = gguf_find_kv(m, "s.utf8");
    CHECK(kv && kv->payload_bytes == 8 + 5); /* a string's payload is its length then its bytes */

    kv = gguf_find_kv(m, "a.u8");
    CHECK(kv && kv->array_count == 3 && gguf_array_int(kv, 2) == 255);
    kv = gguf_find_kv(m, "a.i16");
    CHECK(kv && gguf_array_int(kv, 0) == -7 && gguf_array_int(kv, 1) == 9);
    kv = gguf_find_kv(m, "a.i64");
    CHECK(kv && gguf_array_int(kv, 0) == -3 && gguf_array_int(kv, 1) == (1ll << 50));
    kv = gguf_find_kv(m, "a.f64");
    CHECK(kv && gguf_array_float(kv, 0) == 0.5 && gguf_array_float(kv, 1) == -4.0 && gguf_array_int(kv, 1) == -4);
    kv = gguf_find_kv(m, "a.u64");
    CHECK(kv && gguf_array_int(kv, 0) == 5 && gguf_array_int(kv, 1) == 0); /* index past the end: 0 */
    kv = gguf_find_kv(m, "a.i8");
    CHECK(kv && gguf_array_int(kv, 0) == -1 && gguf_array_float(kv, 1) == 1.0);
    kv = gguf_find_kv(m, "a.strings");
    if (kv) {
        gguf_string list[3];
        CHECK(gguf_array_strings(kv, list) && string_is(list[0], "alpha") && string_is(list[1], "") &&
              string_is(list[2], "gamma"));
        gguf_kv element;
        CHECK(gguf_array_element(kv, 2, &element) && element.type == GGUF_TYPE_STRING &&
              element.payload_bytes == 8 + 5 && memcmp(element.payload + 8, "gamma", 5) == 0);
    } else {
        CHECK(kv != NULL);
    }

    /* [[1, 2, 3], [], [4]] */
    kv = gguf_find_kv(m, "n.ints");
    CHECK(kv && kv->type == GGUF_TYPE_ARRAY && kv->array_type == GGUF_TYPE_ARRAY && kv->array_count == 3);
    if (kv) {
        gguf_kv inner;
        CHECK(gguf_array_element(kv, 0, &inner) && inner.type == GGUF_TYPE_ARRAY &&
              inner.array_type == GGUF_TYPE_INT32 && inner.array_count == 3 && gguf_array_int(&inner, 2) == 3);
        CHECK(gguf_array_element(kv, 1, &inner) && inner.array_count == 0 && inner.payload_bytes == 0);
        CHECK(gguf_array_element(kv, 2, &inner) && inner.array_count == 1 && gguf_array_int(&inner, 0) == 4);
        CHECK(!gguf_array_element(kv, 3, &inner));
        CHECK(gguf_array_int(kv, 0) == 0); /* an array element is not an integer */
    }
    /* [["x", "yy"], ["zzz"]] */
    kv = gguf_find_kv(m, "n.strings");
    if (kv) {
        gguf_kv inner;
        gguf_string list[2];
        CHECK(gguf_array_element(kv, 1, &inner) && inner.array_type == GGUF_TYPE_STRING &&
              gguf_array_strings(&inner, list) && string_is(list[0], "zzz"));
        CHECK(gguf_array_element(kv, 0, &inner) && gguf_array_strings(&inner, list) && string_is(list[0], "x") &&
              string_is(list[1], "yy"));
    } else {
        CHECK(kv != NULL);
    }
    /* [[[5, 6]], [[7], [8, 9]]] */
    kv = gguf_find_kv(m, "n.deep");
    if (kv) {
        gguf_kv level1, level2;
        CHECK(gguf_array_element(kv, 1, &level1) && level1.array_type == GGUF_TYPE_ARRAY && level1.array_count == 2);
        CHECK(gguf_array_element(&level1, 1, &level2) && level2.array_type == GGUF_TYPE_UINT16 &&
              gguf_array_int(&level2, 0) == 8 && gguf_array_int(&level2, 1) == 9);
        CHECK(gguf_array_element(kv, 0, &level1) && gguf_array_element(&level1, 0, &level2) &&
              gguf_array_int(&level2, 1) == 6);
    } else {
        CHECK(kv != NULL);
    }
    kv = gguf_find_kv(m, "n.empty");
    CHECK(kv && kv->array_type == GGUF_TYPE_ARRAY && kv->array_count == 0);

    const gguf_tensor *a = gguf_find_tensor(m, "a.weight");
    const gguf_tensor *bt = gguf_find_tensor(m, "b.weight");
    CHECK(a && bt);
    if (a && bt) {
        CHECK(a->file_offset % 64 == 0 && bt->file_offset == a->file_offset + 64);
        CHECK(a->nbytes == 64 && bt->nbytes == 34);
        CHECK(((const uint8_t *)a->data)[63] == 63 && ((const uint8_t *)bt->data)[0] == 100);
    }
    gguf_close(m);
    bytes_free(&b);
}

/* Runs gguf_print_info into a string. */
static char *info_text(const gguf_model *m)
{
    char *text = NULL;
    size_t length = 0;
    FILE *out = open_memstream(&text, &length);
    gguf_print_info(m, out);
    fclose(out);
    return text;
}

/* The number after a label in the --info text, or -1. */
static long long info_number(const char *text, const char *label)
{
    const char *at = strstr(text, label);
    long long value = -1;
    if (!at || sscanf(at + strlen(label), " %lld", &value) != 1)
        return -1;
    return value;
}

static void test_print_info(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/gguf_format_info.gguf", test_tmp_dir());
    bmoe_error err = {0};
    CHECK_MSG(sample_model_write(path, 0, &err) == 0, "%s", err.message);
    gguf_model *m = gguf_open(path, &err);
    CHECK_MSG(m != NULL, "%s", err.message);
    if (!m)
        return;
    char *text = info_text(m);
    CHECK(strstr(text, "\ntensors: 7\n") != NULL);
    CHECK(strstr(text, "\nlayers: 3\n") != NULL);
    CHECK(strstr(text, "\nexperts: 4 (2 used)\n") != NULL);
    CHECK(strstr(text, "\narchitecture: testarch\n") != NULL);
    /* parameters: 160 + 16 + 768 + 2048 + 64 + 0 + 3 */
    CHECK(strstr(text, "\nparameters: 3059 ") != NULL);
    /* expert bytes: Q8_0 12 rows of 2 blocks x 34 + Q4_K 8 rows x 144; dense: 640 + 64 + 128 + 0 + 12 */
    CHECK(info_number(text, "expert bytes") == 1968);
    CHECK(info_number(text, "dense bytes") == 844);
    CHECK(info_number(text, "bytes F32") == 716);
    CHECK(strstr(text, "\nsize: 0.00 GiB (2812 bytes of tensor data)\n") != NULL); /* 1968 + 844 */
    /* long arrays show their first 8 elements and the total */
    CHECK(strstr(text, "[0, 3, 6, 9, 12, 15, 18, 21, ... (100 total)]") != NULL);
    CHECK(strstr(text, "[\"<unk>\", \"hello\", \"\", \"w\xc3\xb6rld\", \"a b\"]") != NULL);
    CHECK(strstr(text, "\"sample \\\"model\\\"\\n\"") != NULL); /* escaped, still one line */
    CHECK(strstr(text, "blk.0.ffn_down_exps.weight") && strstr(text, "{256, 2, 4}"));
    CHECK(strstr(text, "Q4_K") != NULL);
    free(text);
    gguf_close(m);
}

static void test_writer_misuse(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/gguf_format_misuse.gguf", test_tmp_dir());
    bmoe_error err = {0};
    const int64_t ne[2] = {32, 2};

    gguf_writer *w = gguf_writer_create(path, &err);
    CHECK(w && gguf_writer_add_uint32(w, "a", 1) == 0);
    CHECK(gguf_writer_add_uint32(w, "a", 2) == -1);
    CHECK(gguf_writer_finish(w, &err) == -1 && strstr(err.message, "duplicate key 'a'") &&
          strstr(err.message, path));

    w = gguf_writer_create(path, &err);
    CHECK(gguf_writer_add_string(w, "", "x") == -1);
    CHECK(gguf_writer_finish(w, &err) == -1 && strstr(err.message, "empty key"));

    w = gguf_writer_create(path, &err);
    CHECK(gguf_writer_add_tensor_info(w, "t", 4, 2, ne) == -1); /* removed type id */
    CHECK(gguf_writer_finish(w, &err) == -1 && strstr(err.message, "unknown tensor type"));

    w = gguf_writer_create(path, &err);
    const int64_t odd[1] = {33};
    CHECK(gguf_writer_add_tensor_info(w, "t", TYPE_Q8_0, 1, odd) == -1);
    CHECK(gguf_writer_finish(w, &err) == -1 && strstr(err.message, "block size"));

    w = gguf_writer_create(path, &err);
    CHECK(gguf_writer_set_alignment(w, 48) == -1);
    CHECK(gguf_writer_finish(w, &err) == -1 && strstr(err.message, "power of two"));

    /* too little data */
    w = gguf_writer_create(path, &err);
    gguf_writer_add_tensor_info(w, "t", TYPE_F32, 2, ne);
    gguf_writer_begin_data(w);
    uint8_t data[300] = {0};
    CHECK(gguf_writer_write_data(w, data, 100) == 0);
    CHECK(gguf_writer_finish(w, &err) == -1 && strstr(err.message, "'t' got 100 of 256 bytes"));

    /* too much data */
    w = gguf_writer_create(path, &err);
    gguf_writer_add_tensor_info(w, "t", TYPE_F32, 2, ne);
    gguf_writer_begin_data(w);
    CHECK(gguf_writer_write_data(w, data, 300) == -1);
    CHECK(gguf_writer_finish(w, &err) == -1 && strstr(err.message, "more tensor data"));

    /* adding after begin_data */
    w = gguf_writer_create(path, &err);
    gguf_writer_begin_data(w);
    CHECK(gguf_writer_add_uint32(w, "late", 1) == -1);
    CHECK(gguf_writer_finish(w, &err) == -1 && strstr(err.message, "after gguf_writer_begin_data"));

    /* a writer can be abandoned */
    w = gguf_writer_create(path, &err);
    gguf_writer_add_uint32(w, "x", 1);
    gguf_writer_destroy(w);

    /* an unwritable path */
    CHECK(gguf_writer_create("/nonexistent-dir/x.gguf", &err) == NULL && strstr(err.message, "/nonexistent-dir"));

    /* metadata only: no tensors, no padding, loads */
    w = gguf_writer_create(path, &err);
    gguf_writer_add_string(w, "general.architecture", "none");
    gguf_writer_set_alignment(w, 128);
    gguf_writer_set_alignment(w, 16); /* the second call replaces the value */
    CHECK(gguf_writer_finish(w, &err) == 0);
    gguf_model *m = gguf_open(path, &err);
    CHECK_MSG(m != NULL, "%s", err.message);
    if (m) {
        CHECK(gguf_tensor_count(m) == 0 && gguf_alignment(m) == 16 && gguf_kv_count(m) == 2);
        /* 24 header + key "general.architecture" (8+20+4+8+4) + "general.alignment" (8+17+4+4) */
        CHECK(gguf_shard_size(m, 0) == 24 + 44 + 33);
        gguf_close(m);
    }
}

int main(void)
{
    test_writer_round_trip(0);
    test_writer_round_trip(64);
    test_writer_round_trip(4096);
    test_crafted_v2_and_nested_arrays();
    test_print_info();
    test_writer_misuse();
    return test_finish();
}
