/* Split (multi-shard) GGUF models: three shards written by the writer are
 * presented as one model; a missing shard, a wrong split.no or split.count, a
 * tensor duplicated across shards, a wrong split.tensors.count, a badly named
 * first shard, a name the split keys contradict, a shard that is a FIFO and
 * a broken shard each give a clean one-line error. The shard names follow
 * from the first shard's name alone. */
#include <sys/stat.h>
#include <unistd.h>

#include "gguf_test_util.h"
#include "test.h"

typedef struct split_options {
    int skip_shard;        /* shard not written (-1: none) */
    int wrong_number_shard; /* shard whose split.no is off by one (-1: none) */
    int wrong_count_shard; /* shard whose split.count is 4 (-1: none) */
    bool duplicate;        /* shard 2 repeats a tensor name of shard 0 */
    int tensors_count;     /* split.tensors.count written (0: the right one) */
    bool empty_first;      /* shard 0 holds metadata only */
    int truncate_shard;    /* shard cut short (-1: none) */
} split_options;

static const split_options defaults = {-1, -1, -1, false, 0, false, -1};

/* Tensors per shard: names "t<shard>.<i>", F32 {8, i + 1}. */
static int tensors_in(int shard, const split_options *o)
{
    static const int counts[3] = {2, 1, 3};
    return shard == 0 && o->empty_first ? 0 : counts[shard];
}

static void tensor_name(char *buffer, size_t size, int shard, int i, const split_options *o)
{
    if (o->duplicate && shard == 2 && i == 1)
        snprintf(buffer, size, "t0.0");
    else
        snprintf(buffer, size, "t%d.%d", shard, i);
}

static void shard_path(char *buffer, size_t size, const char *prefix, int shard)
{
    snprintf(buffer, size, "%s-%05d-of-00003.gguf", prefix, shard + 1);
}

static void write_split(const char *prefix, const split_options *o)
{
    int total = 0;
    for (int s = 0; s < 3; s++)
        total += tensors_in(s, o);
    for (int s = 0; s < 3; s++) {
        char path[512];
        shard_path(path, sizeof path, prefix, s);
        unlink(path);
        if (s == o->skip_shard)
            continue;
        bmoe_error err = {0};
        gguf_writer *w = gguf_writer_create(path, &err);
        CHECK_MSG(w != NULL, "%s", err.message);
        if (!w)
            return;
        if (s == 0) {
            gguf_writer_add_string(w, "general.architecture", "splitarch");
            gguf_writer_add_uint32(w, "splitarch.block_count", 2);
        }
        gguf_writer_add_uint16(w, "split.no", (uint16_t)(s == o->wrong_number_shard ? s + 1 : s));
        gguf_writer_add_uint16(w, "split.count", s == o->wrong_count_shard ? 4 : 3);
        gguf_writer_add_int32(w, "split.tensors.count", o->tensors_count ? o->tensors_count : total);
        for (int i = 0; i < tensors_in(s, o); i++) {
            char name[32];
            tensor_name(name, sizeof name, s, i, o);
            const int64_t ne[2] = {8, i + 1};
            gguf_writer_add_tensor_info(w, name, TYPE_F32, 2, ne);
        }
        gguf_writer_begin_data(w);
        for (int i = 0; i < tensors_in(s, o); i++) {
            float values[8 * 3];
            for (int j = 0; j < 8 * (i + 1); j++)
                values[j] = (float)(s * 100 + i * 10) + (float)j * 0.5f;
            gguf_writer_write_data(w, values, sizeof(float) * 8 * (size_t)(i + 1));
        }
        CHECK_MSG(gguf_writer_finish(w, &err) == 0, "%s", err.message);
        if (s == o->truncate_shard)
            CHECK(truncate(path, 100) == 0);
    }
}

/* Writes a split model with the options, opens shard 1 and expects failure. */
static void expect_split_error(const char *name, const split_options *o, const char *expected)
{
    char prefix[400], path[512];
    snprintf(prefix, sizeof prefix, "%s/%s", test_tmp_dir(), name);
    write_split(prefix, o);
    shard_path(path, sizeof path, prefix, 0);
    bmoe_error err = {0};
    gguf_model *m = gguf_open(path, &err);
    CHECK_MSG(m == NULL, "%s: loaded", name);
    gguf_close(m);
    CHECK_MSG(strstr(err.message, expected) != NULL, "%s: message '%s' lacks '%s'", name, err.message, expected);
    CHECK_MSG(strchr(err.message, '\n') == NULL, "%s: message has a newline", name);
}

static void test_valid_split(bool empty_first)
{
    split_options o = defaults;
    o.empty_first = empty_first;
    char prefix[400], path[512];
    snprintf(prefix, sizeof prefix, "%s/split_ok%s", test_tmp_dir(), empty_first ? "_empty" : "");
    write_split(prefix, &o);
    shard_path(path, sizeof path, prefix, 0);
    bmoe_error err = {0};
    gguf_model *m = gguf_open(path, &err);
    CHECK_MSG(m != NULL, "%s", err.message);
    if (!m)
        return;
    CHECK(gguf_shard_count(m) == 3);
    int expected_total = empty_first ? 4 : 6;
    CHECK(gguf_tensor_count(m) == (uint64_t)expected_total);
    /* metadata comes from the first shard only */
    CHECK(gguf_kv_count(m) == 5);
    gguf_string arch;
    CHECK(gguf_get_string(m, "general.architecture", &arch) && arch.length == 9);
    for (int s = 0; s < 3; s++) {
        char expected[512];
        shard_path(expected, sizeof expected, prefix, s);
        CHECK(strcmp(gguf_shard_path(m, (uint32_t)s), expected) == 0);
        CHECK(gguf_shard_fd(m, (uint32_t)s) >= 0);
        CHECK(gguf_shard_size(m, (uint32_t)s) > 24);
    }
    CHECK(gguf_shard_fd(m, 0) != gguf_shard_fd(m, 1));
    uint64_t index = 0;
    for (int s = 0; s < 3; s++) {
        for (int i = 0; i < tensors_in(s, &o); i++, index++) {
            char name[32];
            tensor_name(name, sizeof name, s, i, &o);
            const gguf_tensor *t = gguf_tensor_at(m, index);
            CHECK(t && strcmp(t->name, name) == 0 && t->shard == (uint32_t)s);
            CHECK(gguf_find_tensor(m, name) == t);
            if (!t)
                continue;
            CHECK(t->ne[0] == 8 && t->ne[1] == i + 1 && t->nbytes == 32u * (uint64_t)(i + 1));
            const float *values = t->data;
            CHECK(values[0] == (float)(s * 100 + i * 10) && values[7] == (float)(s * 100 + i * 10) + 3.5f);
            /* the offset is absolute within the shard's own file */
            float first;
            CHECK(pread(gguf_shard_fd(m, t->shard), &first, sizeof first, (off_t)t->file_offset) == 4 &&
                  first == values[0]);
        }
    }
    char *text = NULL;
    size_t length = 0;
    FILE *out = open_memstream(&text, &length);
    gguf_print_info(m, out);
    fclose(out);
    CHECK(strstr(text, "\nshards: 3\n") != NULL);
    CHECK(strstr(text, empty_first ? "\ntensors: 4\n" : "\ntensors: 6\n") != NULL);
    free(text);
    gguf_close(m);

    /* a later shard is not an entry point */
    shard_path(path, sizeof path, prefix, 1);
    m = gguf_open(path, &err);
    CHECK(m == NULL && strstr(err.message, "split.no is 1, expected 0"));
    gguf_close(m);

    /* shards cannot be found from a memory image */
    shard_path(path, sizeof path, prefix, 0);
    size_t size = 0;
    uint8_t *image = test_read_file(path, &size);
    m = gguf_open_memory(image, size, "first", &err);
    CHECK(m == NULL && strstr(err.message, "cannot be opened from memory"));
    free(image);

    /* the first shard under a name without the -00001-of-00003 suffix */
    char renamed[512];
    snprintf(renamed, sizeof renamed, "%s-renamed.gguf", prefix);
    image = test_read_file(path, &size);
    CHECK(write_whole_file(renamed, image, size));
    free(image);
    m = gguf_open(renamed, &err);
    CHECK(m == NULL && strstr(err.message, "does not end in -00001-of-00003.gguf"));
    /* or named as if it were shard 2 */
    char misnamed[512];
    snprintf(misnamed, sizeof misnamed, "%s-x-00002-of-00003.gguf", prefix);
    CHECK(rename(renamed, misnamed) == 0);
    m = gguf_open(misnamed, &err);
    CHECK(m == NULL && strstr(err.message, "the name says shard 2 of 3"));
}

/* A shard that is a FIFO: the open must not wait for a writer. */
static void test_fifo_shard(void)
{
    char prefix[400], path[512], first[512], message[512];
    snprintf(prefix, sizeof prefix, "%s/split_fifo", test_tmp_dir());
    write_split(prefix, &defaults);
    shard_path(path, sizeof path, prefix, 1);
    CHECK(unlink(path) == 0 && mkfifo(path, 0600) == 0);
    shard_path(first, sizeof first, prefix, 0);
    bool opened = true;
    CHECK_MSG(gguf_open_in_time(first, 10, &opened, message, sizeof message), "a FIFO shard hangs the open");
    CHECK_MSG(!opened && strstr(message, "shard 2 of 3") && strstr(message, path) &&
                  strstr(message, "not a regular file (a FIFO)"),
              "FIFO shard: '%s'", message);
    unlink(path);
}

/* One file written by the writer with the given split keys (-1: absent). */
static void write_single(const char *path, int split_no, int split_count)
{
    bmoe_error err = {0};
    gguf_writer *w = gguf_writer_create(path, &err);
    CHECK_MSG(w != NULL, "%s", err.message);
    if (!w)
        return;
    gguf_writer_add_string(w, "general.architecture", "splitarch");
    if (split_no >= 0)
        gguf_writer_add_uint16(w, "split.no", (uint16_t)split_no);
    if (split_count >= 0)
        gguf_writer_add_uint16(w, "split.count", (uint16_t)split_count);
    const int64_t ne[2] = {8, 1};
    gguf_writer_add_tensor_info(w, "t0.0", TYPE_F32, 2, ne);
    gguf_writer_begin_data(w);
    float values[8] = {0};
    gguf_writer_write_data(w, values, sizeof values);
    CHECK_MSG(gguf_writer_finish(w, &err) == 0, "%s", err.message);
}

/* A name that says -00001-of-00003 is a split model whatever the keys say:
 * split.count 1, 0 or absent under it is one clear error, never a third of
 * the tensors presented as the whole model. */
static void test_name_disagrees(void)
{
    static const struct {
        const char *suffix;
        int split_no, split_count;
        const char *expected;
    } cases[] = {
        {"-00001-of-00003.gguf", 0, 1, "the name says shard 1 of 3, but split.count is 1 and split.no is 0"},
        {"-00001-of-00003.gguf", 0, 0, "the name says shard 1 of 3, but split.count is 0 and split.no is 0"},
        {"-00001-of-00003.gguf", -1, -1,
         "the name says shard 1 of 3, but split.count is absent and split.no is absent"},
        {"-00001-of-00003.gguf", 1, 3, "the name says shard 1 of 3, but split.count is 3 and split.no is 1"},
        {"-00001-of-00002.gguf", 0, 3, "the name says shard 1 of 2, but split.count is 3 and split.no is 0"},
        {"-00002-of-00003.gguf", -1, -1, "the name says shard 2 of 3, but split.count is absent"},
        {"-00001-of-00001.gguf", 0, 2, "the name says shard 1 of 1, but split.count is 2 and split.no is 0"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/split_name_%zu%s", test_tmp_dir(), i, cases[i].suffix);
        write_single(path, cases[i].split_no, cases[i].split_count);
        bmoe_error err = {0};
        gguf_model *m = gguf_open(path, &err);
        CHECK_MSG(m == NULL, "case %zu: opened", i);
        gguf_close(m);
        CHECK_MSG(strstr(err.message, cases[i].expected) && strstr(err.message, path),
                  "case %zu: message '%s' lacks '%s'", i, err.message, cases[i].expected);
        unlink(path);
    }
    /* names and keys that agree on one shard open as one file */
    static const struct {
        const char *suffix;
        int split_no, split_count;
    } fine[] = {
        {"-00001-of-00001.gguf", -1, -1},
        {"-00001-of-00001.gguf", 0, 1},
        {".gguf", 0, 1},
        {".gguf", -1, 0},
    };
    for (size_t i = 0; i < sizeof fine / sizeof fine[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/split_name_fine_%zu%s", test_tmp_dir(), i, fine[i].suffix);
        write_single(path, fine[i].split_no, fine[i].split_count);
        bmoe_error err = {0};
        gguf_model *m = gguf_open(path, &err);
        CHECK_MSG(m != NULL && gguf_shard_count(m) == 1 && gguf_tensor_count(m) == 1, "fine case %zu: %s", i,
                  err.message);
        gguf_close(m);
        unlink(path);
    }
}

/* The shard names by the first shard's name alone (what an output must not
 * replace): every shard of a split name, the path itself otherwise. */
static void test_shard_names(void)
{
    CHECK(gguf_split_shard_count("dir/m-00001-of-00003.gguf") == 3);
    const char *expected[] = {"dir/m-00001-of-00003.gguf", "dir/m-00002-of-00003.gguf", "dir/m-00003-of-00003.gguf"};
    for (uint32_t s = 0; s < 3; s++) {
        char *name = gguf_split_shard_path("dir/m-00001-of-00003.gguf", s);
        CHECK_MSG(name && strcmp(name, expected[s]) == 0, "shard %u: %s", s, name ? name : "(null)");
        free(name);
    }
    const char *single[] = {"m.gguf", "m-00001-of-00001.gguf", "m-1-of-3.gguf", "m-00001-of-00003.bin"};
    for (size_t i = 0; i < sizeof single / sizeof single[0]; i++) {
        CHECK_MSG(gguf_split_shard_count(single[i]) == 1, "%s", single[i]);
        char *name = gguf_split_shard_path(single[i], 0);
        CHECK(name && strcmp(name, single[i]) == 0);
        free(name);
    }
}

int main(void)
{
    test_shard_names();
    test_fifo_shard();
    test_name_disagrees();

    test_valid_split(false);
    test_valid_split(true);

    split_options o = defaults;
    o.skip_shard = 2;
    expect_split_error("split_missing", &o, "shard 3 of 3");
    expect_split_error("split_missing", &o, "cannot open: No such file");

    o = defaults;
    o.wrong_number_shard = 1;
    expect_split_error("split_number", &o, "split_number-00002-of-00003.gguf: split.no is 2, expected 1");

    o = defaults;
    o.wrong_count_shard = 2;
    expect_split_error("split_count", &o, "split_count-00003-of-00003.gguf: split.count is 4, expected 3");

    o = defaults;
    o.duplicate = true;
    expect_split_error("split_duplicate", &o, "tensor 't0.0' appears in shard 1 and again in");

    o = defaults;
    o.tensors_count = 7;
    expect_split_error("split_total", &o, "split.tensors.count is 7 but the 3 shards hold 6 tensors");

    o = defaults;
    o.truncate_shard = 1;
    expect_split_error("split_truncated", &o, "split_truncated-00002-of-00003.gguf: ");
    return test_finish();
}
