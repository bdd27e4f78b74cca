/* Slow: writes the full-size qwen3-30b-a3b file (~18.5 GB) into the test
 * scratch folder, checks it with `bmoe-cli --info` (579 tensors, 48 layers,
 * 128 experts with 8 used, about 17.3 GiB) and through the reader (random
 * blocks decode to finite, centred values of the intended spread), reports
 * how long the write took, and deletes the file. */
#include <time.h>

#include "mkmodel_run.h"

static double seconds_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(void)
{
    mk_setup("mkmodel_full");
    char file[1200];
    mk_path(file, sizeof file, "qwen3-30b-a3b.gguf");
    double start = seconds_now();
    int status = mk_run("--shape qwen3-30b-a3b --quiet -o '%s'", file);
    double elapsed = seconds_now() - start;
    char *errors = test_read_file(mk_stderr, NULL);
    CHECK_MSG(status == 0, "bmoe-mkmodel exited %d: %s", status, errors ? errors : "");
    free(errors);
    uint64_t size = mk_file_size(file);
    printf("wrote %llu bytes in %.1f s (%.0f MB/s)\n", (unsigned long long)size, elapsed,
           (double)size / 1e6 / elapsed);

    status = mk_run_tool("bmoe-cli", "--info '%s'", file);
    CHECK_MSG(status == 0, "bmoe-cli --info exited %d", status);
    char *info = test_read_file(mk_stdout, NULL);
    CHECK(info && strstr(info, "\ntensors: 579\n"));
    CHECK(info && strstr(info, "\nlayers: 48\n"));
    CHECK(info && strstr(info, "\nexperts: 128 (8 used)\n"));
    const char *gib = info ? strstr(info, "\nsize: ") : NULL;
    double value = gib ? strtod(gib + 7, NULL) : 0;
    CHECK_MSG(value > 17.2 && value < 17.4, "bmoe-cli reports %.2f GiB", value);
    free(info);

    bmoe_error err;
    error_clear(&err);
    gguf_model *m = gguf_open(file, &err);
    CHECK_MSG(m != NULL, "gguf_open: %s", err.message);
    if (m) {
        const char *names[] = {"blk.0.ffn_gate_exps.weight", "blk.47.ffn_down_exps.weight",
                               "blk.20.attn_q.weight", "output.weight"};
        double spread[] = {1.0 / sqrt(2048), 1.0 / sqrt(768), 1.0 / sqrt(2048), 3.0 / sqrt(2048)};
        for (int i = 0; i < 4; i++) {
            const gguf_tensor *t = gguf_find_tensor(m, names[i]);
            int64_t n = 0;
            float *values = t ? mk_dequantize(t, 256, &n) : NULL;
            double mean = 0, deviation = 0;
            CHECK_MSG(values && mk_stats(values, n, &mean, &deviation) &&
                          deviation > 0.6 * spread[i] && deviation < 1.6 * spread[i] &&
                          fabs(mean) < 0.25 * spread[i],
                      "%s: mean %g deviation %g, expected ~%g", names[i], mean, deviation, spread[i]);
            free(values);
        }
        gguf_close(m);
    }
    remove(file);
    CHECK(mk_file_size(file) == 0);
    return test_finish();
}
