/* One hand-crafted file per validation rule of the GGUF reader: each must be
 * refused with a one-line message naming the file and the problem, both
 * through gguf_open (a real file) and gguf_open_memory. A few valid edge
 * cases must load. */
#include <sys/stat.h>
#include <unistd.h>

#include "gguf_test_util.h"
#include "test.h"

static int case_number;

/* Writes the image, opens it both ways and checks the refusal. */
static void expect_error(test_bytes *b, const char *expected, const char *what)
{
    char path[512];
    snprintf(path, sizeof path, "%s/gguf_validation_%02d.gguf", test_tmp_dir(), ++case_number);
    CHECK(write_whole_file(path, b->data, b->size));
    bmoe_error err = {0};
    gguf_model *m = gguf_open(path, &err);
    CHECK_MSG(m == NULL, "%s: loaded but should fail with '%s'", what, expected);
    gguf_close(m);
    CHECK_MSG(strstr(err.message, expected) != NULL, "%s: message '%s' lacks '%s'", what, err.message, expected);
    CHECK_MSG(strstr(err.message, path) != NULL, "%s: message '%s' does not name the file", what, err.message);
    CHECK_MSG(strchr(err.message, '\n') == NULL, "%s: message has a newline", what);

    /* In memory, from an exactly sized copy so that ASan sees any overread. */
    uint8_t *copy = malloc(b->size ? b->size : 1);
    if (b->size)
        memcpy(copy, b->data, b->size);
    bmoe_error err2 = {0};
    m = gguf_open_memory(copy, b->size, "mem", &err2);
    CHECK_MSG(m == NULL, "%s: loaded from memory", what);
    gguf_close(m);
    CHECK_MSG(strstr(err2.message, expected) != NULL, "%s (memory): message '%s' lacks '%s'", what, err2.message,
              expected);
    free(copy);
    bytes_free(b);
}

static void expect_load(test_bytes *b, const char *what)
{
    bmoe_error err = {0};
    uint8_t *copy = malloc(b->size ? b->size : 1);
    if (b->size)
        memcpy(copy, b->data, b->size);
    gguf_model *m = gguf_open_memory(copy, b->size, "mem", &err);
    CHECK_MSG(m != NULL, "%s: %s", what, err.message);
    gguf_close(m);
    free(copy);
    bytes_free(b);
}

/* A file with n_kv keys given by the caller after a header. */
static void header(test_bytes *b, uint64_t n_tensors, uint64_t n_kv)
{
    bytes_header(b, 3, n_tensors, n_kv);
}

/* One key, then one tensor info, padding and data_bytes bytes of data. */
static void one_tensor(test_bytes *b, const char *name, uint32_t n_dims, const int64_t *ne, uint32_t type,
                       uint64_t offset, size_t data_bytes)
{
    header(b, 1, 1);
    bytes_key(b, "general.architecture", GGUF_TYPE_STRING);
    bytes_string(b, "x");
    bytes_tensor_info(b, name, n_dims, ne, type, offset);
    bytes_align(b, 32);
    for (size_t i = 0; i < data_bytes; i++)
        bytes_u8(b, 0);
}

static void test_header_rules(void)
{
    test_bytes b = {0};
    bytes_put(&b, "GGUX", 4);
    bytes_u32(&b, 3);
    bytes_u64(&b, 0);
    bytes_u64(&b, 0);
    expect_error(&b, "bad magic", "bad magic");

    expect_error(&b, "bad magic", "empty file");

    bytes_put(&b, "GGUF", 4);
    bytes_u32(&b, 3);
    bytes_u32(&b, 0);
    expect_error(&b, "truncated header", "truncated header");

    bytes_header(&b, 1, 0, 0);
    expect_error(&b, "unsupported GGUF version 1", "version 1");
    bytes_header(&b, 4, 0, 0);
    expect_error(&b, "unsupported GGUF version 4", "version 4");
    bytes_header(&b, 0, 0, 0);
    expect_error(&b, "unsupported GGUF version 0", "version 0");
    bytes_header(&b, 0x03000000u, 0, 0);
    expect_error(&b, "byte-swapped", "big-endian version");

    header(&b, 0, 1ull << 40);
    expect_error(&b, "key/value count 1099511627776 cannot fit", "huge n_kv");
    header(&b, 0, (1ull << 63) + 1);
    expect_error(&b, "key/value count", "negative n_kv");
    header(&b, 1ull << 40, 0);
    expect_error(&b, "tensor count 1099511627776 cannot fit", "huge n_tensors");
    header(&b, 3, 0);
    bytes_put(&b, "0123456789", 10);
    expect_error(&b, "tensor count 3 cannot fit", "n_tensors past the end");
}

static void test_key_value_rules(void)
{
    test_bytes b = {0};
    header(&b, 0, 1);
    bytes_u64(&b, 1000);
    bytes_put(&b, "abcdefgh", 8);
    expect_error(&b, "key at offset 24 has length 1000 which runs past the end", "key length");

    header(&b, 0, 1);
    bytes_key(&b, "k", GGUF_TYPE_STRING);
    bytes_u64(&b, 500);
    bytes_put(&b, "short", 5);
    expect_error(&b, "key 'k': string value", "string value length");

    header(&b, 0, 1);
    bytes_key(&b, "k", GGUF_TYPE_ARRAY);
    bytes_u32(&b, GGUF_TYPE_UINT32);
    bytes_u64(&b, 1000);
    bytes_u32(&b, 1);
    expect_error(&b, "key 'k': array at offset 37 of 1000 UINT32 elements runs past the end", "array count");

    header(&b, 0, 1);
    bytes_key(&b, "k", GGUF_TYPE_ARRAY);
    bytes_u32(&b, GGUF_TYPE_STRING);
    bytes_u64(&b, 1ull << 62);
    bytes_string(&b, "one");
    expect_error(&b, "STRING elements runs past the end", "string array count");

    header(&b, 0, 1);
    bytes_key(&b, "k", GGUF_TYPE_ARRAY);
    bytes_u32(&b, GGUF_TYPE_STRING);
    bytes_u64(&b, 2);
    bytes_string(&b, "one");
    bytes_u64(&b, 1ull << 40);
    bytes_put(&b, "abcdefgh", 8);
    expect_error(&b, "key 'k': string value", "string element length");

    header(&b, 0, 1);
    bytes_key(&b, "k", 13);
    bytes_u32(&b, 0);
    expect_error(&b, "key 'k': unknown value type 13", "unknown value type");

    header(&b, 0, 1);
    bytes_key(&b, "k", GGUF_TYPE_ARRAY);
    bytes_u32(&b, 20);
    bytes_u64(&b, 0);
    expect_error(&b, "unknown element type 20", "unknown array element type");

    header(&b, 0, 1);
    bytes_key(&b, "k", GGUF_TYPE_ARRAY);
    for (int depth = 0; depth < 20; depth++) {
        bytes_u32(&b, GGUF_TYPE_ARRAY);
        bytes_u64(&b, 1);
    }
    bytes_u32(&b, GGUF_TYPE_UINT8);
    bytes_u64(&b, 0);
    expect_error(&b, "nested deeper than", "nesting depth");

    header(&b, 0, 1);
    bytes_key(&b, "k", GGUF_TYPE_UINT64);
    bytes_u32(&b, 0);
    expect_error(&b, "key 'k': value at offset", "truncated scalar");

    header(&b, 0, 1);
    bytes_key(&b, "k", GGUF_TYPE_UINT32);
    bytes_u8(&b, 0);
    expect_error(&b, "key 'k': value at offset 37 needs 4 bytes but the file ends at 38", "missing scalar");

    header(&b, 0, 1);
    bytes_string(&b, "long.key");
    bytes_u8(&b, 0);
    expect_error(&b, "key 'long.key': value type at offset 40 needs 4 bytes", "truncated value type");

    header(&b, 0, 2);
    bytes_key(&b, "general.name", GGUF_TYPE_STRING);
    bytes_string(&b, "x");
    bytes_key(&b, "", GGUF_TYPE_UINT8);
    bytes_u8(&b, 1);
    expect_error(&b, "key 1 is empty", "empty key");

    header(&b, 0, 1);
    bytes_u64(&b, 3);
    bytes_put(&b, "a\0b", 3);
    bytes_u32(&b, GGUF_TYPE_UINT8);
    bytes_u8(&b, 1);
    expect_error(&b, "contains a NUL byte", "NUL in key");

    header(&b, 0, 3);
    bytes_key(&b, "a.b", GGUF_TYPE_UINT8);
    bytes_u8(&b, 1);
    bytes_key(&b, "c", GGUF_TYPE_UINT8);
    bytes_u8(&b, 1);
    bytes_key(&b, "a.b", GGUF_TYPE_STRING);
    bytes_string(&b, "again");
    expect_error(&b, "duplicate key 'a.b'", "duplicate key");

    header(&b, 0, 1);
    bytes_key(&b, "general.alignment", GGUF_TYPE_INT32);
    bytes_u32(&b, 64);
    expect_error(&b, "general.alignment must be UINT32, not INT32", "alignment type");

    header(&b, 0, 1);
    bytes_key(&b, "general.alignment", GGUF_TYPE_UINT32);
    bytes_u32(&b, 48);
    expect_error(&b, "general.alignment 48 is not a nonzero power of two", "alignment 48");

    header(&b, 0, 1);
    bytes_key(&b, "general.alignment", GGUF_TYPE_UINT32);
    bytes_u32(&b, 0);
    expect_error(&b, "general.alignment 0 is not", "alignment 0");
}

static void test_tensor_rules(void)
{
    test_bytes b = {0};
    const int64_t ne16[1] = {16};
    one_tensor(&b, "t", 0, ne16, TYPE_F32, 0, 64);
    expect_error(&b, "tensor 't': n_dims is 0", "n_dims 0");

    const int64_t ne5[5] = {16, 1, 1, 1, 1};
    one_tensor(&b, "t", 5, ne5, TYPE_F32, 0, 64);
    expect_error(&b, "tensor 't': n_dims is 5", "n_dims 5");

    const int64_t negative[2] = {16, -2};
    one_tensor(&b, "t", 2, negative, TYPE_F32, 0, 64);
    expect_error(&b, "negative dimension ne[1] = -2", "negative dimension");

    const int64_t huge[3] = {1ll << 32, 1ll << 31, 4};
    one_tensor(&b, "t", 3, huge, TYPE_F32, 0, 64);
    expect_error(&b, "tensor 't': element count 4294967296 x 2147483648 x 4 x 1 overflows", "element overflow");

    const int64_t wide[1] = {1ll << 62};
    one_tensor(&b, "t", 1, wide, TYPE_F32, 0, 64);
    expect_error(&b, "tensor 't': byte size overflows", "byte size overflow");

    one_tensor(&b, "t", 1, ne16, 4, 0, 64);
    expect_error(&b, "tensor 't': unknown tensor type 4", "removed type 4");
    one_tensor(&b, "t", 1, ne16, 43, 0, 64);
    expect_error(&b, "unknown tensor type 43", "type 43");
    one_tensor(&b, "t", 1, ne16, 0xffffffffu, 0, 64);
    expect_error(&b, "unknown tensor type -1", "type -1");

    const int64_t ne100[2] = {100, 2};
    one_tensor(&b, "blk.0.ffn_down_exps.weight", 2, ne100, TYPE_Q4_K, 0, 1024);
    expect_error(&b, "tensor 'blk.0.ffn_down_exps.weight': ne0 = 100 is not a multiple of the Q4_K block size 256",
                 "block size");

    one_tensor(&b, "t", 1, ne16, TYPE_F32, 0, 32);
    /* absolute offsets: 24 header + 41 key + 33 tensor info, padded to 128 */
    expect_error(&b, "tensor 't': 64 bytes of data at file offset 128 run past the end of the file (160 bytes)",
                 "data past end");

    one_tensor(&b, "t", 1, ne16, TYPE_F32, 1ull << 63, 64);
    expect_error(&b, "tensor 't': data offset 9223372036854775808 is past the end of the file (192 bytes",
                 "huge offset");

    one_tensor(&b, "t", 1, ne16, TYPE_F32, 4, 96);
    expect_error(&b, "tensor 't': data offset 4 is not a multiple of the alignment 32", "misaligned");

    one_tensor(&b, "", 1, ne16, TYPE_F32, 0, 64);
    expect_error(&b, "tensor 0 has an empty name", "empty name");

    /* two tensors: overlap, and duplicate names */
    for (int variant = 0; variant < 2; variant++) {
        const int64_t ne[1] = {16};
        header(&b, 2, 0);
        bytes_tensor_info(&b, "first", 1, ne, TYPE_F32, 0);
        bytes_tensor_info(&b, variant ? "first" : "second", 1, ne, TYPE_F32, variant ? 64 : 32);
        bytes_align(&b, 32);
        for (int i = 0; i < 128; i++)
            bytes_u8(&b, 0);
        if (variant)
            expect_error(&b, "duplicate tensor name 'first'", "duplicate tensor");
        else
            expect_error(&b, "tensors 'first' and 'second' overlap", "overlap");
    }

    /* names with control bytes are shown escaped, so the message stays one line and exact */
    header(&b, 2, 0);
    bytes_tensor_info(&b, "line\none", 1, ne16, TYPE_F32, 0);
    bytes_tensor_info(&b, "line\ntwo", 1, ne16, TYPE_F32, 32);
    bytes_align(&b, 32);
    for (int i = 0; i < 128; i++)
        bytes_u8(&b, 0);
    expect_error(&b, "tensors 'line\\none' and 'line\\ntwo' overlap (64 bytes at file offset 128, 64 at 160)",
                 "overlap with odd names");

    /* truncated inside a tensor info */
    header(&b, 1, 0);
    bytes_string(&b, "t");
    bytes_u32(&b, 2);
    bytes_u64(&b, 16);
    bytes_put(&b, "pad-pad-pad-pad-pad-", 20);
    bytes_u32(&b, 0);
    expect_error(&b, "tensor 't': ", "truncated tensor info");

    /* a tensor of 0 bytes, but the file stops before the padded data start */
    const int64_t zero[2] = {16, 0};
    header(&b, 1, 0);
    bytes_tensor_info(&b, "z", 2, zero, TYPE_F32, 0);
    expect_error(&b, "before the data section starts", "data start past end");
}

static void test_open_failures(void)
{
    bmoe_error err = {0};
    CHECK(gguf_open("/nonexistent/model.gguf", &err) == NULL && strstr(err.message, "/nonexistent/model.gguf") &&
          strstr(err.message, "cannot open"));
    CHECK(gguf_open(test_tmp_dir(), &err) == NULL && strstr(err.message, "not a regular file (a directory)"));

    /* A FIFO with no writer: opening it for reading would block forever. */
    char fifo[512], message[512];
    snprintf(fifo, sizeof fifo, "%s/gguf_validation_fifo.gguf", test_tmp_dir());
    unlink(fifo);
    CHECK(mkfifo(fifo, 0600) == 0);
    bool opened = true;
    CHECK_MSG(gguf_open_in_time(fifo, 10, &opened, message, sizeof message), "gguf_open of a FIFO hangs");
    CHECK_MSG(!opened && strstr(message, fifo) && strstr(message, "not a regular file (a FIFO)"), "FIFO: '%s'",
              message);
    CHECK(unlink(fifo) == 0);
    CHECK(gguf_open_memory(NULL, 0, "nothing", &err) == NULL && strstr(err.message, "nothing: not a GGUF file"));
}

static void test_valid_edges(void)
{
    test_bytes b = {0};
    /* no tensors: no padding, may end right after the keys */
    header(&b, 0, 1);
    bytes_key(&b, "k", GGUF_TYPE_UINT8);
    bytes_u8(&b, 1);
    expect_load(&b, "vocab-only file without padding");

    header(&b, 0, 0);
    expect_load(&b, "bare header");

    /* an empty tensor at the data start of an otherwise empty data section */
    const int64_t zero[2] = {16, 0};
    header(&b, 1, 0);
    bytes_tensor_info(&b, "z", 2, zero, TYPE_F32, 0);
    bytes_align(&b, 32);
    expect_load(&b, "zero-size tensor");

    /* tensors need not be in offset order, nor back to back */
    const int64_t ne[1] = {16};
    header(&b, 2, 1);
    bytes_key(&b, "general.alignment", GGUF_TYPE_UINT32);
    bytes_u32(&b, 16);
    bytes_tensor_info(&b, "late", 1, ne, TYPE_F32, 128);
    bytes_tensor_info(&b, "early", 1, ne, TYPE_F32, 0);
    bytes_align(&b, 16);
    for (int i = 0; i < 192; i++)
        bytes_u8(&b, 0);
    expect_load(&b, "unordered tensors");

    /* a nonzero bool byte, a string with odd bytes in a value */
    header(&b, 0, 2);
    bytes_key(&b, "b", GGUF_TYPE_BOOL);
    bytes_u8(&b, 0xff);
    bytes_key(&b, "s", GGUF_TYPE_STRING);
    bytes_u64(&b, 3);
    bytes_put(&b, "\0\n\xff", 3);
    expect_load(&b, "odd bytes in values");
}

int main(void)
{
    test_header_rules();
    test_key_value_rules();
    test_tensor_rules();
    test_open_failures();
    test_valid_edges();
    return test_finish();
}
