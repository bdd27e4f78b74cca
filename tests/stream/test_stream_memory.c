/* Memory under streaming:
 * - after a streamed run with O_DIRECT on a cold file, the page cache holds
 *   none of the expert matrices' pages (nothing was read through the mapping
 *   or buffered I/O: mincore over their ranges);
 * - peak RSS (VmHWM) of `bmoe-cli --moe-stream --cache-mb B` on a model of
 *   more than 1 GiB stays within dense bytes + B + KV cache + 64 MiB + 5 %;
 * - under a cgroup memory cap smaller than the model (../shared/tools/memcap)
 *   a streamed run with --cache-mb auto finishes (is not OOM-killed), and a
 *   run without --moe-stream streams too, unasked, unless --no-moe-stream. That
 *   part skips, loudly (ctest reports it skipped, not passed), only where no
 *   cgroup memory controller exists. */
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../cli/cli_run.h"
#include "gguf/gguf.h"
#include "stream/memory_budget.h"
#include "stream_support.h"

#define MIB (1024.0 * 1024.0)
/* the test's exit status for "skipped" (SKIP_RETURN_CODE in tests.cmake) */
#define TEST_SKIPPED 77

static bool drop_page_cache(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return false;
    fdatasync(fd);
    bool ok = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0;
    close(fd);
    return ok;
}

/* Resident pages of [begin, end) of the file, its first and last page left
 * out (they may hold a neighbouring dense tensor's bytes). */
static size_t resident_pages(const uint8_t *map, uint64_t begin, uint64_t end)
{
    long page = sysconf(_SC_PAGESIZE);
    uint64_t first = (begin + (uint64_t)page - 1) / (uint64_t)page + 1, last = end / (uint64_t)page;
    if (last <= first)
        return 0;
    size_t n = (size_t)(last - first);
    unsigned char *vector = malloc(n);
    size_t count = 0;
    if (vector && mincore((void *)(map + first * (uint64_t)page), n * (size_t)page, vector) == 0)
        for (size_t i = 0; i < n; i++)
            count += vector[i] & 1;
    free(vector);
    return count;
}

static void test_cold_file(const char *dir)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/cold.gguf", dir);
    if (!stream_make_model(path, "--shape tiny-qwen3moe --experts 32 --expert-ff 512 --type q4_k_m --fill blocks --seed 9"))
        return;
    CHECK(drop_page_cache(path));
    bmoe_model_params params = bmoe_model_default_params();
    params.stream.enabled = true;
    params.stream.cache_mb = 2;
    params.stream.overlap = true;
    workload_result run;
    workload_run(path, &params, 2, 1, &run);
    CHECK_MSG(run.ok && run.decode.read_bytes > 0, "streamed run: %s", run.error);
    workload_free(&run);

    bmoe_error err = {0};
    gguf_model *file = gguf_open(path, &err);
    int fd = open(path, O_RDONLY);
    uint64_t size = file ? gguf_shard_size(file, 0) : 0;
    const uint8_t *map = fd >= 0 && size ? mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
    CHECK(file && map != MAP_FAILED);
    if (file && map != MAP_FAILED) {
        size_t resident = 0, checked = 0;
        for (uint64_t i = 0; i < gguf_tensor_count(file); i++) {
            const gguf_tensor *tensor = gguf_tensor_at(file, i);
            if (!strstr(tensor->name, "_exps.weight"))
                continue;
            checked++;
            resident += resident_pages(map, tensor->file_offset, tensor->file_offset + tensor->nbytes);
        }
        CHECK(checked == 9);
        CHECK_MSG(resident == 0, "%zu pages of the expert matrices are in the page cache after a streamed run",
                  resident);
        munmap((void *)map, size);
    }
    if (fd >= 0)
        close(fd);
    gguf_close(file);
    /* O_DIRECT was achieved on this file system (the check above needs it) */
    bmoe_model *model = bmoe_model_load(path, &params, &err);
    bmoe_stream_state state;
    if (model) {
        bmoe_model_get_stream_state(model, &state);
        CHECK_MSG(state.streaming && state.direct, "O_DIRECT not achieved on %s", path);
    }
    bmoe_model_free(model);
}

/* The cache a load resolves for cache_mb (ceiling ceil_mb): its budget in
 * bytes (-1 when the load failed); *reported: cache_mb as get_params says. */
static int64_t resolved_budget(const char *path, int64_t cache_mb, int64_t ceil_mb, int64_t *reported)
{
    bmoe_model_params params = bmoe_model_default_params();
    params.stream.enabled = true;
    params.stream.cache_mb = cache_mb;
    params.stream.cache_ceil_mb = ceil_mb;
    bmoe_error err = {0};
    bmoe_model *model = bmoe_model_load(path, &params, &err);
    CHECK_MSG(model != NULL, "cache_mb %lld, ceiling %lld: %s", (long long)cache_mb, (long long)ceil_mb,
              err.message);
    if (!model)
        return -1;
    bmoe_stream_state state;
    bmoe_model_get_stream_state(model, &state);
    bmoe_model_get_params(model, &params);
    *reported = params.stream.cache_mb;
    bmoe_model_free(model);
    return state.cache_budget_bytes;
}

/* Sizes past what fits in bytes hold the whole expert set (they wrapped to
 * no cache, or to a few slots, before); a cache under 1 MiB reads as 1 MiB,
 * not as 0 ("no cache"). */
static void test_cache_sizes(const char *dir)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/cold.gguf", dir);
    int64_t reported, whole_reported;
    int64_t whole = resolved_budget(path, 1 << 20, 0, &whole_reported);
    const int64_t huge[] = {(int64_t)1 << 44, ((int64_t)1 << 44) + 1, INT64_MAX};
    for (int i = 0; i < 3; i++) {
        int64_t budget = resolved_budget(path, huge[i], 0, &reported);
        CHECK_MSG(whole > 0 && budget == whole && reported == whole_reported,
                  "cache_mb %lld: budget %lld, not the whole set's %lld", (long long)huge[i], (long long)budget,
                  (long long)whole);
    }
    int64_t auto_budget = resolved_budget(path, -1, 0, &reported);
    int64_t ceiled = resolved_budget(path, -1, (int64_t)1 << 44, &reported);
    CHECK_MSG(ceiled == auto_budget && ceiled > 0, "auto with a ceiling of 2^44 MiB: %lld, without: %lld",
              (long long)ceiled, (long long)auto_budget);
    int64_t small = resolved_budget(path, 1, 0, &reported);
    CHECK_MSG(small > 0 && small <= ((int64_t)1 << 20) && reported == 1, "cache_mb 1: budget %lld, reported %lld",
              (long long)small, (long long)reported);
}

/* Peak RSS in MiB from the CLI's summary ("peak RSS: N MiB"), -1 if absent. */
static double peak_rss_mib(const char *err)
{
    const char *line = strstr(err, "peak RSS: ");
    return line ? atof(line + strlen("peak RSS: ")) : -1.0;
}

/* A run under the 640 MiB cap (what names it) stayed within it and wrote
 * the resident run's text. */
static void check_capped_run(const cli_result *r, const char *resident, const char *what)
{
    double peak = peak_rss_mib(r->err);
    CHECK_MSG(peak > 0 && peak < 640.0, "%s under a 640 MiB cap: peak RSS %.1f MiB", what, peak);
    CHECK_MSG(resident && r->out && strcmp(r->out, resident) == 0, "%s: text '%s' is not the resident '%s'", what,
              r->out ? r->out : "", resident ? resident : "");
}

static void test_peak_rss(const char *dir, const char *path)
{
    bmoe_error err = {0};
    gguf_model *file = gguf_open(path, &err);
    CHECK_MSG(file != NULL, "%s", err.message);
    if (!file)
        return;
    uint64_t dense = 0, total = 0;
    for (uint64_t i = 0; i < gguf_tensor_count(file); i++) {
        const gguf_tensor *tensor = gguf_tensor_at(file, i);
        total += tensor->nbytes;
        if (!strstr(tensor->name, "_exps.weight"))
            dense += tensor->nbytes;
    }
    gguf_close(file);
    CHECK_MSG(total > ((uint64_t)1 << 30), "the model is %.0f MiB, not above 1 GiB", (double)total / MIB);
    /* 6 layers x 256 positions x 2 KV heads x 128 dims x f16, K and V */
    double kv_mib = 6.0 * 256 * 2 * 128 * 2 * 2 / MIB;
    const int budgets[] = {64, 256};
    for (int b = 0; b < 2; b++) {
        char budget[16];
        snprintf(budget, sizeof budget, "%d", budgets[b]);
        const char *args[] = {"-m", path, "--moe-stream", "--cache-mb", budget, "--overlap", "-p", "Once upon a time",
                              "-n", "12", "-c", "256", "-t", "2", NULL};
        cli_result r;
        CHECK(cli_run(args, &r) == 0);
        CHECK_MSG(r.exit_code == 0, "streamed run: %s", r.err);
        double peak = peak_rss_mib(r.err);
        double bound = ((double)dense / MIB + budgets[b] + kv_mib + 64.0) * 1.05;
        CHECK_MSG(peak > 0 && peak <= bound, "cache %d MiB: peak RSS %.1f MiB above dense %.1f + cache + KV %.1f + "
                  "64 MiB + 5 %% = %.1f MiB", budgets[b], peak, (double)dense / MIB, kv_mib, bound);
        fprintf(stderr, "cache %d MiB: peak RSS %.1f MiB (bound %.1f, model %.0f MiB)\n", budgets[b], peak, bound,
                (double)total / MIB);
        cli_result_free(&r);
    }
    (void)dir;
}

/* The text a run writes on stdout, or NULL (the caller frees it). */
static char *run_text(const char *script, const char *what)
{
    cli_result r;
    CHECK(cli_run_shell(script, &r) == 0);
    CHECK_MSG(r.signal == 0 && r.exit_code == 0, "%s: exit %d signal %d: %s", what, r.exit_code, r.signal, r.err);
    cli_cut_report(&r);
    char *text = r.exit_code == 0 && r.out ? strdup(r.out) : NULL;
    cli_result_free(&r);
    return text;
}

/* The auto cache is sized at load from what the cap leaves; a context made
 * afterwards takes its KV cache out of it, rather than filling the cap (and
 * getting the process killed) as its positions fill: with 40 000 positions
 * (234 MiB of KV cache) the cache shrinks so that both fit in the cap, and
 * the text is the resident run's; with 120 000 (703 MiB, more than the cap)
 * the context is refused with one line and a non-zero exit. */
static void test_memory_cap_context(const char *memcap, const char *path, const char *resident)
{
    char script[4096];
    const char *stream = "--moe-stream --cache-mb auto --cache-floor-mb 128 -p 'Once upon' -n 8 -t 2";
    snprintf(script, sizeof script, "'%s' 640M \"$BMOE_CLI\" -m '%s' %s -c 40000", memcap, path, stream);
    cli_result r;
    CHECK(cli_run_shell(script, &r) == 0);
    CHECK_MSG(r.signal == 0 && r.exit_code == 0, "40000 positions under a 640 MiB cap: exit %d signal %d: %s",
              r.exit_code, r.signal, r.err);
    CHECK(cli_cut_report(&r));
    /* 6 layers x 2 KV heads x 128 dims x f16, K and V, per position */
    double kv_mib = 40000.0 * 6 * 2 * 128 * 2 * 2 / MIB;
    const char *budget = strstr(r.report, "moe-cache: ") ? strstr(strstr(r.report, "moe-cache: "), "budget ") : NULL;
    double budget_mib = budget ? atof(budget + strlen("budget ")) : -1.0;
    CHECK_MSG(strstr(r.err, "stream: the expert cache gives up"), "no shrink said: %s", r.err);
    CHECK_MSG(budget_mib > 0 && budget_mib + kv_mib < 640.0,
              "cache %.0f MiB beside %.0f MiB of KV cache under a 640 MiB cap", budget_mib, kv_mib);
    CHECK_MSG(peak_rss_mib(r.err) > kv_mib, "40000 positions: peak RSS %.1f MiB below the KV cache's %.0f",
              peak_rss_mib(r.err), kv_mib);
    check_capped_run(&r, resident, "40000 positions beside a shrunk cache");
    cli_result_free(&r);

    snprintf(script, sizeof script, "'%s' 640M \"$BMOE_CLI\" -m '%s' %s -c 120000", memcap, path, stream);
    CHECK(cli_run_shell(script, &r) == 0);
    CHECK_MSG(r.signal == 0 && r.exit_code == 1 && strstr(r.err, "context: 120000 positions need") &&
                  (!r.out || !*r.out),
              "120000 positions under a 640 MiB cap: exit %d signal %d: %s", r.exit_code, r.signal, r.err);
    cli_result_free(&r);
}

/* An MTP head's buffers are taken at a generation's first --mtp step, after
 * the context: its KV cache and the hidden rows of every position come out
 * of the automatic cache as the context's do, and a head that cannot fit is
 * refused with one line instead of the cap killing the process. A 4-layer
 * qwen35moe of 0.9 GiB with a head under a 640 MiB cap: 40 000 positions
 * (201 MiB for the head, 156 of them hidden rows) fit with the cache shrunk
 * and write the resident run's text; 120 000 (591 MiB) do not. */
static void test_memory_cap_mtp(const char *memcap, const char *dir)
{
    char path[1200], script[4096];
    snprintf(path, sizeof path, "%s/head.gguf", dir);
    if (!stream_make_model(path, "--arch qwen35moe --layers 4 --nextn-layers 1 --embd 1024 --heads 8 --kv-heads 2 "
                                 "--head-dim 128 --experts 64 --experts-used 8 --expert-ff 1536 --vocab 512 "
                                 "--type q4_k_m --fill blocks --seed 10"))
        return;
    const char *run = "--mtp -p 'Once upon' -n 8 -t 2";
    snprintf(script, sizeof script, "\"$BMOE_CLI\" -m '%s' --no-moe-stream -c 256 %s", path, run);
    char *resident = run_text(script, "resident with --mtp, no cap");

    const char *stream = "--moe-stream --cache-mb auto --cache-floor-mb 128";
    snprintf(script, sizeof script, "'%s' 640M \"$BMOE_CLI\" -m '%s' %s %s -c 40000", memcap, path, stream, run);
    cli_result r;
    CHECK(cli_run_shell(script, &r) == 0);
    CHECK_MSG(r.signal == 0 && r.exit_code == 0, "--mtp, 40000 positions under a 640 MiB cap: exit %d signal %d: %s",
              r.exit_code, r.signal, r.err);
    CHECK(cli_cut_report(&r));
    CHECK_MSG(strstr(r.err, "stream: the expert cache gives up") && strstr(r.err, "to the MTP head of 40000 positions"),
              "no shrink for the MTP head said: %s", r.err);
    check_capped_run(&r, resident, "--mtp, 40000 positions beside the MTP head");
    cli_result_free(&r);

    snprintf(script, sizeof script, "'%s' 640M \"$BMOE_CLI\" -m '%s' %s %s -c 120000", memcap, path, stream, run);
    CHECK(cli_run_shell(script, &r) == 0);
    CHECK_MSG(r.signal == 0 && r.exit_code == 1 && strstr(r.err, "\nbmoe-cli: MTP head: 120000 positions need") &&
                  (!r.out || !*r.out),
              "--mtp, 120000 positions under a 640 MiB cap: exit %d signal %d: %s", r.exit_code, r.signal, r.err);
    cli_result_free(&r);
    free(resident);
    unlink(path);
}

/* Without --moe-stream, a model larger than what the cap leaves is
 * streamed all the same (the library chooses it and says so), within the
 * cap, and writes the resident run's text; --no-moe-stream keeps the
 * mapping. */
static void test_memory_cap_auto(const char *memcap, const char *path)
{
    char script[4096];
    const char *run = "-p 'Once upon' -n 8 -c 256 -t 2";
    snprintf(script, sizeof script, "\"$BMOE_CLI\" -m '%s' --no-moe-stream %s", path, run);
    char *resident = run_text(script, "resident, no cap");

    snprintf(script, sizeof script, "'%s' 640M \"$BMOE_CLI\" -m '%s' %s", memcap, path, run);
    cli_result r;
    CHECK(cli_run_shell(script, &r) == 0);
    CHECK_MSG(r.signal == 0 && r.exit_code == 0, "under a 640 MiB cap, no flag: exit %d signal %d: %s", r.exit_code,
              r.signal, r.err);
    CHECK(cli_cut_report(&r));
    CHECK_MSG(strstr(r.err, "its experts are streamed from the file, with overlap") &&
                  strstr(r.report, "mode: expert streaming, cache auto") && strstr(r.report, ", overlap"),
              "under a 640 MiB cap, no flag: not streamed: %s", r.err);
    check_capped_run(&r, resident, "no flag, streamed");
    cli_result_free(&r);

    snprintf(script, sizeof script, "'%s' 640M \"$BMOE_CLI\" -m '%s' --no-moe-stream %s", memcap, path, run);
    CHECK(cli_run_shell(script, &r) == 0);
    CHECK_MSG(r.signal == 0 && r.exit_code == 0, "under a 640 MiB cap, --no-moe-stream: exit %d signal %d: %s",
              r.exit_code, r.signal, r.err);
    CHECK(cli_cut_report(&r));
    CHECK_MSG(!strstr(r.err, "streamed from the file") && strstr(r.report, "mode: resident baseline"),
              "--no-moe-stream under a cap: %s", r.err);
    CHECK_MSG(resident && r.out && strcmp(r.out, resident) == 0, "mapped text '%s' under a cap is not '%s'",
              r.out ? r.out : "", resident ? resident : "");
    cli_result_free(&r);

    /* with room to spare (the floor and 1 GiB more) nothing is streamed unasked */
    struct stat info;
    CHECK(stat(path, &info) == 0);
    uint64_t floor = (uint64_t)bmoe_model_default_params().stream.cache_floor_mb << 20;
    if (memory_model_fits((uint64_t)info.st_size + ((uint64_t)1 << 30), memory_available_bytes(), floor)) {
        snprintf(script, sizeof script, "\"$BMOE_CLI\" -m '%s' %s", path, run);
        CHECK(cli_run_shell(script, &r) == 0);
        CHECK(cli_cut_report(&r));
        CHECK_MSG(r.exit_code == 0 && !strstr(r.err, "streamed from the file") &&
                      strstr(r.report, "mode: resident baseline"),
                  "no cap, no flag: %s", r.err);
        cli_result_free(&r);
    } else {
        printf("note: too little memory here to check that a fitting model is not streamed\n");
    }
    test_memory_cap_context(memcap, path, resident);
    free(resident);
}

/* Returns false when memcap found no cgroup memory controller. */
static bool test_memory_cap(const char *dir, const char *path)
{
    char memcap[1100], script[4096];
    test_shared_path(memcap, sizeof memcap, "tools/memcap");
    /* a cap of 640 MiB for a 1.1 GiB model: the streamed run must fit */
    snprintf(script, sizeof script,
             "'%s' 640M \"$BMOE_CLI\" -m '%s' --moe-stream --cache-mb auto --cache-floor-mb 128 -p 'Once upon' "
             "-n 8 -c 256 -t 2",
             memcap, path);
    cli_result r;
    CHECK(cli_run_shell(script, &r) == 0);
    if (r.exit_code == 3 && strstr(r.err, "no cgroup memory controller")) {
        printf("SKIPPED: memcap: no cgroup memory controller on this machine\n");
        cli_result_free(&r);
        return false;
    }
    CHECK_MSG(r.signal == 0 && r.exit_code == 0, "under a 640 MiB cap: exit %d signal %d: %s", r.exit_code, r.signal,
              r.err);
    double peak = peak_rss_mib(r.err);
    CHECK_MSG(peak > 0 && peak < 640.0, "peak RSS %.1f MiB under a 640 MiB cap", peak);
    fprintf(stderr, "under a 640 MiB cap: %s", strstr(r.err, "memcap:") ? strstr(r.err, "memcap:") : "");
    cli_result_free(&r);
    test_memory_cap_auto(memcap, path);
    test_memory_cap_mtp(memcap, dir);
    return true;
}

int main(void)
{
    char dir[1100], big[1200];
    stream_test_dir(dir, sizeof dir, "stream-memory");
    test_cold_file(dir);
    test_cache_sizes(dir);
    snprintf(big, sizeof big, "%s/big.gguf", dir);
    if (stream_make_model(big, "--arch qwen3moe --layers 6 --embd 1024 --heads 8 --kv-heads 2 --head-dim 128 "
                               "--experts 64 --experts-used 8 --expert-ff 1536 --vocab 512 --type q4_k_m "
                               "--fill blocks --seed 10")) {
        test_peak_rss(dir, big);
        bool capped = test_memory_cap(dir, big);
        unlink(big);
        int status = test_finish();
        return status == 0 && !capped ? TEST_SKIPPED : status;
    }
    return test_finish();
}
