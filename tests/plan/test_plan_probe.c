/* The planner's probes on real files: the model probe's byte counts on a
 * tiny MoE model of the oracle and a dense one (a draft head's, the
 * sliding-window layers' rings), its errors; the machine
 * probe's memory and cores, its timed reads of the model file, and the
 * probe cache: written, read back, and rewritten when it is corrupt or
 * describes another file. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "plan.h"
#include "test.h"

/* plan_probe_model with a context of n_ctx positions (0: the default) and
 * the library's other defaults but swa_cache. */
static int probe(const char *path, int32_t n_ctx, bool draft_head, enum bmoe_swa_cache swa, plan_model *model,
                 char *error, size_t error_size)
{
    bmoe_context_params context = bmoe_context_default_params();
    context.n_ctx = n_ctx;
    context.swa_cache = swa;
    return plan_probe_model(path, &context, draft_head, model, error, error_size);
}

static double now_seconds(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
}

static void test_model_probe(const char *moe_path, const char *dense_path)
{
    plan_model model;
    char error[512] = "";
    CHECK_MSG(probe(moe_path, 256, false, BMOE_SWA_RING, &model, error, sizeof error) == 0, "%s", error);
    struct stat st;
    CHECK(stat(moe_path, &st) == 0 && model.file_bytes == (uint64_t)st.st_size);
    CHECK(model.dense_bytes > 0 && model.expert_bytes > 0);
    CHECK(model.dense_bytes + model.expert_bytes <= model.file_bytes);
    /* qwen3moe-tiny: 3 layers of 16 experts, top-4, every layer alike */
    CHECK(model.n_moe_layers == 3 && model.n_expert == 16 && model.n_expert_used == 4);
    CHECK(model.expert_slice_bytes > 0);
    CHECK(model.cycle_bytes ==
          (uint64_t)model.n_expert_used * (uint64_t)model.n_moe_layers * model.expert_slice_bytes);
    CHECK(model.expert_bytes == (uint64_t)model.n_expert * (uint64_t)model.n_moe_layers * model.expert_slice_bytes);
    CHECK(model.context_bytes > 0);
    /* a larger context holds more */
    plan_model larger;
    CHECK(probe(moe_path, 1024, false, BMOE_SWA_RING, &larger, error, sizeof error) == 0);
    CHECK(larger.context_bytes > model.context_bytes);

    CHECK_MSG(probe(dense_path, 0, false, BMOE_SWA_RING, &model, error, sizeof error) == 0, "%s", error);
    CHECK(model.expert_bytes == 0 && model.cycle_bytes == 0 && model.n_expert == 0);
    CHECK(model.dense_bytes > 0 && model.dense_bytes <= model.file_bytes && model.context_bytes > 0);

    char missing[1024];
    snprintf(missing, sizeof missing, "%s/plan-no-such-dir/model.gguf", test_tmp_dir());
    error[0] = '\0';
    CHECK(probe(missing, 256, false, BMOE_SWA_RING, &model, error, sizeof error) == -1);
    CHECK_MSG(error[0] != '\0' && strchr(error, '\n') == NULL, "missing: [%s]", error);

    char not_gguf[1024];
    snprintf(not_gguf, sizeof not_gguf, "%s/plan-not-a-model.gguf", test_tmp_dir());
    FILE *file = fopen(not_gguf, "wb");
    CHECK(file != NULL);
    if (file) {
        fputs("this is not a GGUF file, only some text long enough to look at\n", file);
        fclose(file);
    }
    error[0] = '\0';
    CHECK(probe(not_gguf, 256, false, BMOE_SWA_RING, &model, error, sizeof error) == -1);
    CHECK_MSG(error[0] != '\0', "not a GGUF: no message");
    unlink(not_gguf);
}

/* With draft_head (--mtp), a model with an MTP head counts the head's dense
 * tensors (tiny-glm4moe's block carries its own embedding and output, as
 * GLM-4.5's does) and what drafting takes beside the context: at least the
 * hidden row of every position and the head's own KV cache (F16, as the
 * context's default). A model without a head counts the same either way. */
static void test_head_probe(const char *moe_path)
{
    char path[1200], command[2600];
    snprintf(path, sizeof path, "%s/plan-head.gguf", test_tmp_dir());
    snprintf(command, sizeof command, "'%s/bmoe-mkmodel' --quiet --shape tiny-glm4moe --seed 4 -o '%s' > /dev/null",
             BMOE_BIN_DIR, path);
    CHECK_MSG(system(command) == 0, "%s failed", command);
    enum { N_CTX = 512, N_EMBD = 256, N_HEAD_KV = 2, HEAD_DIM = 64 };
    plan_model plain, drafting;
    char error[512] = "";
    CHECK_MSG(probe(path, N_CTX, false, BMOE_SWA_RING, &plain, error, sizeof error) == 0, "%s", error);
    CHECK_MSG(probe(path, N_CTX, true, BMOE_SWA_RING, &drafting, error, sizeof error) == 0, "%s", error);
    /* the block's own embedding and output: 2 x vocab 512 x 256 F32 */
    uint64_t own_matrices = 2ull * 512 * N_EMBD * sizeof(float);
    CHECK_MSG(drafting.dense_bytes >= plain.dense_bytes + own_matrices,
              "dense %llu with the head, %llu without: not the head's own matrices' %llu more",
              (unsigned long long)drafting.dense_bytes, (unsigned long long)plain.dense_bytes,
              (unsigned long long)own_matrices);
    uint64_t beside = (uint64_t)N_CTX * N_EMBD * sizeof(float) + (uint64_t)N_CTX * N_HEAD_KV * HEAD_DIM * 2 * 2;
    CHECK_MSG(drafting.context_bytes >= plain.context_bytes + beside,
              "context %llu with the head, %llu without: not the hidden rows and head KV's %llu more",
              (unsigned long long)drafting.context_bytes, (unsigned long long)plain.context_bytes,
              (unsigned long long)beside);
    CHECK(drafting.file_bytes == plain.file_bytes && drafting.n_expert == plain.n_expert);
    unlink(path);

    CHECK(probe(moe_path, N_CTX, false, BMOE_SWA_RING, &plain, error, sizeof error) == 0);
    CHECK(probe(moe_path, N_CTX, true, BMOE_SWA_RING, &drafting, error, sizeof error) == 0);
    CHECK_MSG(drafting.dense_bytes == plain.dense_bytes && drafting.context_bytes == plain.context_bytes,
              "a model without a head: dense %llu / %llu, context %llu / %llu",
              (unsigned long long)drafting.dense_bytes, (unsigned long long)plain.dense_bytes,
              (unsigned long long)drafting.context_bytes, (unsigned long long)plain.context_bytes);
}

/* The sliding-window layers priced as the job keeps them: on gpt-oss every
 * position (BMOE_SWA_FULL) more than a ring and its checkpoint, those more
 * than a ring alone, and a checkpoint as every position where a ring and
 * its copy would hold more; on a model without such layers all the same. */
static void test_swa_probe(const char *moe_path)
{
    char gptoss[1024], error[512] = "";
    test_shared_path(gptoss, sizeof gptoss, "oracle/models/gptoss-tiny-f32.gguf");
    plan_model ring, checkpoint, full;
    CHECK_MSG(probe(gptoss, 4096, false, BMOE_SWA_RING, &ring, error, sizeof error) == 0, "%s", error);
    CHECK_MSG(probe(gptoss, 4096, false, BMOE_SWA_CHECKPOINT, &checkpoint, error, sizeof error) == 0, "%s", error);
    CHECK_MSG(probe(gptoss, 4096, false, BMOE_SWA_FULL, &full, error, sizeof error) == 0, "%s", error);
    CHECK_MSG(full.context_bytes > checkpoint.context_bytes && checkpoint.context_bytes > ring.context_bytes,
              "gpt-oss at 4096: %llu bytes with rings, %llu with their checkpoint, %llu full",
              (unsigned long long)ring.context_bytes, (unsigned long long)checkpoint.context_bytes,
              (unsigned long long)full.context_bytes);
    /* at 1024 positions a ring of 544 and its copy would hold more than the context: checkpoint keeps it whole */
    CHECK(probe(gptoss, 1024, false, BMOE_SWA_CHECKPOINT, &checkpoint, error, sizeof error) == 0);
    CHECK(probe(gptoss, 1024, false, BMOE_SWA_FULL, &full, error, sizeof error) == 0);
    CHECK_MSG(checkpoint.context_bytes == full.context_bytes, "gpt-oss at 1024: %llu bytes with a checkpoint, %llu full",
              (unsigned long long)checkpoint.context_bytes, (unsigned long long)full.context_bytes);
    CHECK(probe(moe_path, 4096, false, BMOE_SWA_RING, &ring, error, sizeof error) == 0);
    CHECK(probe(moe_path, 4096, false, BMOE_SWA_CHECKPOINT, &checkpoint, error, sizeof error) == 0);
    CHECK(probe(moe_path, 4096, false, BMOE_SWA_FULL, &full, error, sizeof error) == 0);
    CHECK(full.context_bytes == ring.context_bytes && checkpoint.context_bytes == ring.context_bytes);
}

/* Sets one field of the cache file's JSON object (replacing it), or writes
 * text instead when field is NULL. */
static void edit_cache(const char *path, const char *field, cJSON *value, const char *text)
{
    char *written = NULL;
    if (field) {
        char *old = test_read_file(path, NULL);
        cJSON *root = old ? cJSON_Parse(old) : NULL;
        free(old);
        CHECK(root != NULL);
        if (!root) {
            cJSON_Delete(value);
            return;
        }
        cJSON_DeleteItemFromObjectCaseSensitive(root, field);
        cJSON_AddItemToObject(root, field, value);
        written = cJSON_Print(root);
        cJSON_Delete(root);
        text = written;
    }
    FILE *file = fopen(path, "wb");
    CHECK(file != NULL);
    if (file) {
        fputs(text, file);
        fclose(file);
    }
    cJSON_free(written);
}

/* The cache file parses, names the model and holds what was probed. */
static void check_cache_file(const char *path, bool want_reads, bool want_memory)
{
    char *text = test_read_file(path, NULL);
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    free(text);
    CHECK_MSG(root != NULL, "cache file %s missing or not JSON", path);
    if (!root)
        return;
    CHECK(cJSON_IsString(cJSON_GetObjectItem(root, "path")));
    CHECK(cJSON_IsArray(cJSON_GetObjectItem(root, "read_bytes_per_s")) == want_reads);
    CHECK(cJSON_IsNumber(cJSON_GetObjectItem(root, "memory_bytes_per_s")) == want_memory);
    cJSON_Delete(root);
}

static void test_machine_probe(const char *model_path)
{
    struct stat before;
    CHECK(stat(model_path, &before) == 0);
    plan_machine machine;
    char error[512] = "";
    CHECK_MSG(plan_probe_machine(NULL, 0, false, false, NULL, false, &machine, error, sizeof error) == 0, "%s", error);
    CHECK(machine.memory_bytes > 0 && machine.n_cores >= 1);
    CHECK(machine.read_bytes_per_s[0] == 0 && machine.memory_bytes_per_s == 0);
    CHECK(plan_probe_machine(NULL, 0, true, false, NULL, false, &machine, error, sizeof error) == -1 && error[0]);

    char cache_dir[1024], cache_file[2048];
    snprintf(cache_dir, sizeof cache_dir, "%s/plan-cache-%d/nested/bmoe", test_tmp_dir(), (int)getpid());
    CHECK(plan_cache_path(cache_dir, model_path, cache_file, sizeof cache_file) != NULL);
    unlink(cache_file);

    /* the first run times the reads and keeps them */
    double start = now_seconds();
    CHECK_MSG(plan_probe_machine(model_path, 200000, true, false, cache_dir, false, &machine, error, sizeof error) == 0,
              "%s", error);
    double probe_seconds = now_seconds() - start;
    /* bounded, not a speed test: the steps stop at 0.4 s each, so only a probe that never stops exceeds this */
    CHECK_MSG(probe_seconds < 30.0, "the storage probe took %.2f s", probe_seconds);
    for (int i = 0; i < PLAN_LANE_STEPS; i++)
        CHECK_MSG(machine.read_bytes_per_s[i] > 0, "rate at %d lanes: %g", plan_lane_counts[i],
                  machine.read_bytes_per_s[i]);
    CHECK(machine.memory_bytes_per_s == 0);
    struct stat st;
    CHECK(stat(cache_dir, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700);
    check_cache_file(cache_file, true, false);

    /* the second reads them back */
    double first[PLAN_LANE_STEPS];
    memcpy(first, machine.read_bytes_per_s, sizeof first);
    CHECK(plan_probe_machine(model_path, 200000, true, false, cache_dir, false, &machine, error, sizeof error) == 0);
    CHECK(memcmp(first, machine.read_bytes_per_s, sizeof first) == 0);

    /* the memory probe adds its rate beside the cached reads */
    CHECK(plan_probe_machine(model_path, 200000, true, true, cache_dir, false, &machine, error, sizeof error) == 0);
    CHECK(memcmp(first, machine.read_bytes_per_s, sizeof first) == 0);
    CHECK(machine.memory_bytes_per_s > 0);
    check_cache_file(cache_file, true, true);

    /* what the file says is what comes back: the cache is read, not re-probed */
    edit_cache(cache_file, "memory_bytes_per_s", cJSON_CreateNumber(12345), NULL);
    CHECK(plan_probe_machine(model_path, 200000, false, true, cache_dir, false, &machine, error, sizeof error) == 0);
    CHECK_MSG(machine.memory_bytes_per_s == 12345, "memory rate %g", machine.memory_bytes_per_s);
    CHECK(machine.read_bytes_per_s[0] == 0); /* not asked for */
    /* --probe: measured again and kept, the other probe's kept rates untouched */
    CHECK(plan_probe_machine(model_path, 200000, false, true, cache_dir, true, &machine, error, sizeof error) == 0);
    CHECK_MSG(machine.memory_bytes_per_s > 0 && machine.memory_bytes_per_s != 12345, "refreshed rate %g",
              machine.memory_bytes_per_s);
    double refreshed = machine.memory_bytes_per_s;
    CHECK(plan_probe_machine(model_path, 200000, true, true, cache_dir, false, &machine, error, sizeof error) == 0);
    CHECK(machine.memory_bytes_per_s == refreshed && memcmp(first, machine.read_bytes_per_s, sizeof first) == 0);

    /* another slice size reads differently: not that entry */
    CHECK(plan_probe_machine(model_path, 3 << 20, false, true, cache_dir, false, &machine, error, sizeof error) == 0);
    CHECK(machine.memory_bytes_per_s > 0 && machine.memory_bytes_per_s != 12345);

    /* corrupt: ignored and rewritten */
    edit_cache(cache_file, "memory_bytes_per_s", cJSON_CreateNumber(12345), NULL);
    edit_cache(cache_file, NULL, NULL, "{\"format\": \"bmoe-probe-cache\", \"version\": 1, \"pa");
    CHECK(plan_probe_machine(model_path, 3 << 20, false, true, cache_dir, false, &machine, error, sizeof error) == 0);
    CHECK(machine.memory_bytes_per_s > 0 && machine.memory_bytes_per_s != 12345);
    check_cache_file(cache_file, false, true);

    /* another file's entry (a hash collision, a moved cache): ignored and rewritten */
    edit_cache(cache_file, "memory_bytes_per_s", cJSON_CreateNumber(12345), NULL);
    edit_cache(cache_file, "path", cJSON_CreateString("/somewhere/else.gguf"), NULL);
    CHECK(plan_probe_machine(model_path, 3 << 20, false, true, cache_dir, false, &machine, error, sizeof error) == 0);
    CHECK(machine.memory_bytes_per_s > 0 && machine.memory_bytes_per_s != 12345);
    char *text = test_read_file(cache_file, NULL);
    CHECK(text && !strstr(text, "/somewhere/else.gguf"));
    free(text);

    /* no temporary files left beside it, and the model file untouched */
    DIR *folder = opendir(cache_dir);
    CHECK(folder != NULL);
    int entries = 0;
    for (struct dirent *entry; folder && (entry = readdir(folder)) != NULL;)
        if (entry->d_name[0] != '.')
            entries++;
    if (folder)
        closedir(folder);
    CHECK_MSG(entries == 1, "%d files in the cache folder", entries);
    struct stat after;
    CHECK(stat(model_path, &after) == 0 && after.st_size == before.st_size &&
          after.st_mtim.tv_sec == before.st_mtim.tv_sec && after.st_mtim.tv_nsec == before.st_mtim.tv_nsec);

    char missing[1024];
    snprintf(missing, sizeof missing, "%s/plan-no-such-model.gguf", test_tmp_dir());
    error[0] = '\0';
    CHECK(plan_probe_machine(missing, 200000, true, false, cache_dir, false, &machine, error, sizeof error) == -1);
    CHECK(error[0] != '\0');
    CHECK(machine.memory_bytes > 0); /* what was measured stays */

    unlink(cache_file);
    rmdir(cache_dir);
    *strrchr(cache_dir, '/') = '\0';
    rmdir(cache_dir);
    *strrchr(cache_dir, '/') = '\0';
    rmdir(cache_dir);
}

static void test_cache_dir(void)
{
    char buffer[256];
    char *saved_home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    char *saved_xdg = getenv("XDG_CACHE_HOME") ? strdup(getenv("XDG_CACHE_HOME")) : NULL;
    setenv("XDG_CACHE_HOME", "/x/cache", 1);
    setenv("HOME", "/h", 1);
    CHECK(plan_cache_dir(buffer, sizeof buffer) && strcmp(buffer, "/x/cache/bmoe") == 0);
    setenv("XDG_CACHE_HOME", "relative", 1);
    CHECK(plan_cache_dir(buffer, sizeof buffer) && strcmp(buffer, "/h/.cache/bmoe") == 0);
    unsetenv("XDG_CACHE_HOME");
    CHECK(plan_cache_dir(buffer, sizeof buffer) && strcmp(buffer, "/h/.cache/bmoe") == 0);
    CHECK(plan_cache_dir(buffer, 8) == NULL);
    unsetenv("HOME");
    CHECK(plan_cache_dir(buffer, sizeof buffer) == NULL);
    if (saved_home)
        setenv("HOME", saved_home, 1);
    if (saved_xdg)
        setenv("XDG_CACHE_HOME", saved_xdg, 1);
    free(saved_home);
    free(saved_xdg);
}

int main(void)
{
    char moe_path[1024], dense_path[1024];
    test_shared_path(moe_path, sizeof moe_path, "oracle/models/qwen3moe-tiny-f32.gguf");
    test_shared_path(dense_path, sizeof dense_path, "data/models/stories260K/stories260K.gguf");
    test_model_probe(moe_path, dense_path);
    test_head_probe(moe_path);
    test_swa_probe(moe_path);
    test_machine_probe(moe_path);
    test_cache_dir();
    return test_finish();
}
