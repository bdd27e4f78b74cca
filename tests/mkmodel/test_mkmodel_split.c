/* bmoe-mkmodel determinism, seeds and split models: the same seed gives the
 * same bytes, another seed other weights; files of one seed in different
 * types hold the same model (the quantized weights decode close to the F32
 * ones); a model written in 3 shards opens as one model with the tensor
 * table and data of the single file, metadata in shard 0 only, and shard
 * sizes as --plan predicted. */
#include "mkmodel_run.h"

#define SHAPE "--shape tiny-gpt-oss --layers 2 --experts 4 --experts-used 2 --vocab 320 --quiet"

static bool files_equal(const char *a, const char *b)
{
    size_t size_a = 0, size_b = 0;
    char *x = test_read_file(a, &size_a), *y = test_read_file(b, &size_b);
    bool equal = x && y && size_a == size_b && memcmp(x, y, size_a) == 0;
    free(x);
    free(y);
    return equal;
}

static gguf_model *open_model(const char *path)
{
    bmoe_error err;
    error_clear(&err);
    gguf_model *m = gguf_open(path, &err);
    CHECK_MSG(m != NULL, "gguf_open %s: %s", path, err.message);
    return m;
}

/* Relative RMS difference between a tensor of two models, decoded. */
static double relative_difference(const gguf_model *reference, const gguf_model *other, const char *name)
{
    const gguf_tensor *a = gguf_find_tensor(reference, name), *b = gguf_find_tensor(other, name);
    if (!a || !b)
        return 1e9;
    int64_t n = 0, m = 0;
    float *x = mk_dequantize(a, 1 << 20, &n), *y = mk_dequantize(b, 1 << 20, &m);
    double error = 0, norm = 0;
    for (int64_t i = 0; x && y && i < n && n == m; i++) {
        error += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
        norm += (double)x[i] * x[i];
    }
    bool ok = x && y && n == m && n > 0;
    free(x);
    free(y);
    return ok ? sqrt(error / norm) : 1e9;
}

static uint64_t header_kv_count(const char *path)
{
    FILE *file = fopen(path, "rb");
    uint8_t header[24];
    uint64_t count = UINT64_MAX;
    if (file && fread(header, 1, sizeof header, file) == sizeof header)
        memcpy(&count, header + 16, 8); /* magic, version, n_tensors, n_kv */
    if (file)
        fclose(file);
    return count;
}

int main(void)
{
    mk_setup("mkmodel_split");
    char a[1200], b[1200], c[1200];

    /* Same seed, same bytes: in both fill modes. */
    CHECK(mk_run(SHAPE " --type mxfp4_moe --seed 7 -o '%s'", mk_path(a, sizeof a, "a.gguf")) == 0);
    CHECK(mk_run(SHAPE " --type mxfp4_moe --seed 7 -o '%s'", mk_path(b, sizeof b, "b.gguf")) == 0);
    CHECK_MSG(files_equal(a, b), "two runs with seed 7 differ");
    CHECK(mk_run(SHAPE " --type q4_k_m --seed 7 --fill blocks -o '%s'", a) == 0);
    CHECK(mk_run(SHAPE " --type q4_k_m --seed 7 --fill blocks -o '%s'", b) == 0);
    CHECK_MSG(files_equal(a, b), "two block-filled runs with seed 7 differ");

    /* Another seed: same layout, other weights. */
    CHECK(mk_run(SHAPE " --type q4_k_m --seed 8 --fill blocks -o '%s'", mk_path(c, sizeof c, "c.gguf")) == 0);
    CHECK(!files_equal(a, c) && mk_file_size(a) == mk_file_size(c));
    gguf_model *seven = open_model(a), *eight = open_model(c);
    if (seven && eight) {
        int same = 0;
        for (uint64_t i = 0; i < gguf_tensor_count(seven); i++) {
            const gguf_tensor *x = gguf_tensor_at(seven, i), *y = gguf_tensor_at(eight, i);
            CHECK(strcmp(x->name, y->name) == 0 && x->nbytes == y->nbytes);
            if (x->nbytes == y->nbytes && memcmp(x->data, y->data, x->nbytes) == 0)
                same++;
        }
        CHECK_MSG(same == 0, "%d tensors identical under seeds 7 and 8", same);
    }
    gguf_close(seven);
    gguf_close(eight);

    /* One seed, several types: the same model, quantized. */
    CHECK(mk_run(SHAPE " --type f32 --seed 3 -o '%s'", mk_path(a, sizeof a, "f32.gguf")) == 0);
    CHECK(mk_run(SHAPE " --type q8_0 --seed 3 -o '%s'", mk_path(b, sizeof b, "q8_0.gguf")) == 0);
    CHECK(mk_run(SHAPE " --type q4_k --seed 3 -o '%s'", mk_path(c, sizeof c, "q4_k.gguf")) == 0);
    gguf_model *f32 = open_model(a), *q8 = open_model(b), *q4 = open_model(c);
    if (f32 && q8 && q4) {
        const char *names[] = {"token_embd.weight", "blk.1.attn_q.weight", "blk.0.ffn_down_exps.weight"};
        for (int i = 0; i < 3; i++) {
            double d8 = relative_difference(f32, q8, names[i]), d4 = relative_difference(f32, q4, names[i]);
            CHECK_MSG(d8 < 0.01, "%s: Q8_0 is %g away from F32", names[i], d8);
            CHECK_MSG(d4 < 0.15, "%s: Q4_K is %g away from F32", names[i], d4);
        }
        /* Vectors stay F32 and are bit-identical. */
        const gguf_tensor *x = gguf_find_tensor(f32, "blk.0.attn_sinks.weight");
        const gguf_tensor *y = gguf_find_tensor(q4, "blk.0.attn_sinks.weight");
        CHECK(x && y && x->nbytes == y->nbytes && memcmp(x->data, y->data, x->nbytes) == 0);
    }
    gguf_close(f32);
    gguf_close(q8);
    gguf_close(q4);

    /* Split into 3 shards. */
    char prefix[1200], single[1200], shard[3][1300], extra[1300];
    mk_path(prefix, sizeof prefix, "split.gguf");
    mk_path(single, sizeof single, "single.gguf");
    CHECK(mk_run(SHAPE " --type mxfp4_moe --seed 5 -o '%s'", single) == 0);
    CHECK(mk_run(SHAPE " --type mxfp4_moe --seed 5 --split 3 -o '%s'", prefix) == 0);
    for (int s = 0; s < 3; s++) {
        snprintf(shard[s], sizeof shard[s], "%s/split-%05d-of-00003.gguf", mk_dir, s + 1);
        CHECK_MSG(mk_file_size(shard[s]) > 0, "shard %s missing", shard[s]);
    }
    snprintf(extra, sizeof extra, "%s/split.gguf", mk_dir);
    CHECK(mk_file_size(extra) == 0); /* the prefix itself is not written */
    CHECK(mk_run(SHAPE " --type mxfp4_moe --seed 5 --split 3 --plan") == 0);
    char *plan = test_read_file(mk_stdout, NULL);
    for (int s = 0; s < 3; s++) {
        char line[64];
        snprintf(line, sizeof line, "shard %d bytes=", s);
        const char *at = plan ? strstr(plan, line) : NULL;
        CHECK_MSG(at && strtoull(at + strlen(line), NULL, 10) == mk_file_size(shard[s]),
                  "plan size of shard %d differs from the file", s);
    }
    free(plan);
    uint64_t single_kvs = header_kv_count(single);
    CHECK(header_kv_count(shard[0]) == single_kvs + 3);
    CHECK(header_kv_count(shard[1]) == 3 && header_kv_count(shard[2]) == 3);

    gguf_model *one = open_model(single), *split = open_model(shard[0]);
    if (one && split) {
        CHECK(gguf_shard_count(split) == 3);
        int64_t count = -1;
        CHECK(gguf_get_int(split, "split.count", &count) && count == 3);
        const gguf_kv *kv = gguf_find_kv(split, "split.count");
        CHECK(kv && kv->type == GGUF_TYPE_UINT16);
        CHECK(gguf_get_int(split, "split.tensors.count", &count) &&
              count == (int64_t)gguf_tensor_count(one));
        CHECK(gguf_tensor_count(split) == gguf_tensor_count(one));
        uint32_t previous = 0, seen[3] = {0, 0, 0};
        int mismatches = 0;
        for (uint64_t i = 0; i < gguf_tensor_count(one) && i < gguf_tensor_count(split); i++) {
            const gguf_tensor *x = gguf_tensor_at(one, i);
            const gguf_tensor *y = gguf_find_tensor(split, x->name);
            if (!y || y->type != x->type || y->n_dims != x->n_dims ||
                memcmp(y->ne, x->ne, sizeof x->ne) != 0 || y->nbytes != x->nbytes ||
                memcmp(y->data, x->data, x->nbytes) != 0) {
                mismatches++;
                continue;
            }
            CHECK(y->shard >= previous && y->shard < 3);
            previous = y->shard;
            if (y->shard < 3)
                seen[y->shard]++;
        }
        CHECK_MSG(mismatches == 0, "%d tensors differ between the split and single files", mismatches);
        CHECK(seen[0] > 0 && seen[1] > 0 && seen[2] > 0);
        /* Metadata of the split model is the single file's. */
        for (uint64_t i = 0; i < gguf_kv_count(one); i++) {
            const gguf_kv *x = gguf_kv_at(one, i);
            const gguf_kv *y = gguf_find_kv(split, x->key);
            CHECK_MSG(y && y->type == x->type && y->payload_bytes == x->payload_bytes &&
                          memcmp(y->payload, x->payload, x->payload_bytes) == 0,
                      "key %s differs in the split model", x->key);
        }
    }
    gguf_close(one);
    gguf_close(split);
    return test_finish();
}
