/* The expert profile: the file (round trip, every refusal), the frequency
 * policy's counts (weight, seed, admit against the decay formula), and the
 * library calls on a streamed model: a run saves its counts, a second load
 * warms its cache from them in the background, every logit byte-identical
 * to a cold run's and to the resident run's; another model's profile, a
 * damaged one, a resident model and the lru policy refused with one line. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bmoe.h"
#include "../../src/stream/cache_policy.h"
#include "../../src/stream/expert_profile.h"
#include "stream_support.h"
#include "test.h"

#define N_LAYER 3
#define N_EXPERT 5

static bool write_bytes(const char *path, const void *data, size_t size)
{
    FILE *file = fopen(path, "wb");
    if (!file)
        return false;
    bool ok = fwrite(data, 1, size, file) == size;
    return fclose(file) == 0 && ok;
}

static void fill_counts(float *counts)
{
    for (int i = 0; i < N_LAYER * N_EXPERT; i++)
        counts[i] = (float)((i * 7) % 11) * 0.25f;
}

/* Reads path back expecting a refusal whose message holds want. */
static void check_refused(const char *path, uint64_t identity, int32_t n_layer, int32_t n_expert, const char *want,
                          const char *what)
{
    float counts[64];
    bmoe_error err = {0};
    int status = expert_profile_read(path, identity, n_layer, n_expert, counts, &err);
    CHECK_MSG(status != 0 && strstr(err.message, want) != NULL && strchr(err.message, '\n') == NULL,
              "%s: status %d, message [%s], want [%s]", what, status, err.message, want);
}

static void test_file(const char *dir)
{
    char path[1200], damaged[1300];
    snprintf(path, sizeof path, "%s/profile.bin", dir);
    snprintf(damaged, sizeof damaged, "%s/damaged.bin", dir);
    float counts[N_LAYER * N_EXPERT], back[N_LAYER * N_EXPERT];
    fill_counts(counts);
    bmoe_error err = {0};
    CHECK_MSG(expert_profile_write(path, 0x1234, N_LAYER, N_EXPERT, counts, &err) == 0, "write: %s", err.message);
    CHECK_MSG(expert_profile_read(path, 0x1234, N_LAYER, N_EXPERT, back, &err) == 0, "read: %s", err.message);
    CHECK(memcmp(counts, back, sizeof counts) == 0);

    size_t size = 0;
    uint8_t *image = test_read_file(path, &size);
    CHECK(image != NULL && size == 32 + sizeof counts + 8);
    if (!image)
        return;
    /* the layout the header comment states */
    CHECK(memcmp(image, "BMOEPRF1", 8) == 0);
    uint32_t version, n_layer, n_expert;
    uint64_t identity;
    memcpy(&version, image + 8, 4);
    memcpy(&n_layer, image + 12, 4);
    memcpy(&n_expert, image + 16, 4);
    memcpy(&identity, image + 24, 8);
    CHECK(version == 1 && n_layer == N_LAYER && n_expert == N_EXPERT && identity == 0x1234);
    CHECK(memcmp(image + 32, counts, sizeof counts) == 0);

    check_refused(path, 0x1235, N_LAYER, N_EXPERT, "another model", "another identity");
    check_refused(path, 0x1234, N_LAYER, N_EXPERT + 1, "another model", "another shape");
    uint8_t *copy = malloc(size);
    if (!copy) {
        free(image);
        return;
    }
    memcpy(copy, image, size);
    copy[40] ^= 1; /* a count's bit */
    CHECK(write_bytes(damaged, copy, size));
    check_refused(damaged, 0x1234, N_LAYER, N_EXPERT, "checksum", "a flipped bit");
    CHECK(write_bytes(damaged, image, size - 3));
    check_refused(damaged, 0x1234, N_LAYER, N_EXPERT, "bytes where", "cut short");
    CHECK(write_bytes(damaged, image, 20));
    check_refused(damaged, 0x1234, N_LAYER, N_EXPERT, "not a bmoe expert profile", "cut in its header");
    memcpy(copy, image, size);
    copy[0] = 'X';
    CHECK(write_bytes(damaged, copy, size));
    check_refused(damaged, 0x1234, N_LAYER, N_EXPERT, "not a bmoe expert profile", "another magic");
    memcpy(copy, image, size);
    copy[8] = 9;
    CHECK(write_bytes(damaged, copy, size));
    check_refused(damaged, 0x1234, N_LAYER, N_EXPERT, "version 9", "another version");
    /* a count that is no use count, under a checksum that holds */
    float bad[N_LAYER * N_EXPERT];
    fill_counts(bad);
    bad[4] = NAN;
    CHECK(expert_profile_write(damaged, 0x1234, N_LAYER, N_EXPERT, bad, &err) == 0);
    check_refused(damaged, 0x1234, N_LAYER, N_EXPERT, "count 4", "NaN count");
    bad[4] = -1.0f;
    CHECK(expert_profile_write(damaged, 0x1234, N_LAYER, N_EXPERT, bad, &err) == 0);
    check_refused(damaged, 0x1234, N_LAYER, N_EXPERT, "count 4", "negative count");
    check_refused(dir, 0x1234, N_LAYER, N_EXPERT, "directory", "a directory");
    free(copy);
    free(image);
}

/* weight(key, now) = sum over uses at ticks t of 2^(-(now - t) / half_life). */
static void test_policy_counts(void)
{
    const cache_policy_ops *ops = &cache_policy_frequency;
    cache_policy_params params = {.n_slots = 4, .n_keys = 8, .half_life = 10.0};
    void *state = ops->create(&params);
    CHECK(state != NULL);
    if (!state)
        return;
    CHECK(ops->weight(state, 3, 0) == 0.0);
    ops->touch(state, 0, 3, 10);
    ops->touch(state, 0, 3, 20);
    double want = pow(2.0, -20.0 / 10.0) + pow(2.0, -10.0 / 10.0);
    CHECK_MSG(fabs(ops->weight(state, 3, 30) - want) < 1e-12, "weight %.15g, want %.15g", ops->weight(state, 3, 30),
              want);
    /* a seed replaces the past and decays like a use */
    ops->seed(state, 5, 4.0, 100);
    CHECK(fabs(ops->weight(state, 5, 100) - 4.0) < 1e-12);
    CHECK(fabs(ops->weight(state, 5, 110) - 2.0) < 1e-12);
    ops->seed(state, 5, 0.0, 100);
    CHECK(ops->weight(state, 5, 100) == 0.0);
    /* admitting a slot counts no use */
    ops->seed(state, 1, 8.0, 100);
    ops->admit(state, 1, 1);
    CHECK(fabs(ops->weight(state, 1, 100) - 8.0) < 1e-12);
    ops->destroy(state);
    /* the lru policy keeps no counts: a profile refuses it */
    CHECK(cache_policy_lru.weight == NULL && cache_policy_lru.seed == NULL && cache_policy_lru.admit == NULL);
}

static bool any_slot(void *user, int slot)
{
    (void)user;
    (void)slot;
    return true;
}

/* The victim among admitted slots is the one whose key counts least. */
static void test_admit_order(void)
{
    const cache_policy_ops *ops = &cache_policy_frequency;
    cache_policy_params params = {.n_slots = 3, .n_keys = 6, .half_life = 16.0};
    void *state = ops->create(&params);
    CHECK(state != NULL);
    if (!state)
        return;
    ops->seed(state, 0, 3.0, 0);
    ops->seed(state, 1, 1.0, 0);
    ops->seed(state, 2, 5.0, 0);
    for (int slot = 0; slot < 3; slot++)
        ops->admit(state, slot, slot);
    CHECK(ops->victim(state, any_slot, NULL) == 1);
    ops->remove(state, 1);
    CHECK(ops->victim(state, any_slot, NULL) == 0);
    ops->destroy(state);
}

static bmoe_model_params streamed_params(enum bmoe_cache_policy policy)
{
    bmoe_model_params p = bmoe_model_default_params();
    p.stream.enabled = true;
    p.stream.cache_mb = 4; /* about half of the 32 x 3 experts */
    p.stream.overlap = true;
    p.stream.io_threads = 2;
    p.stream.direct = true;
    p.stream.cache_policy = policy;
    return p;
}

/* Runs the workload on a model loaded with params, after loading profile
 * (NULL: none); returns what bmoe_model_load_expert_profile returned, and
 * saves the run's counts to save_path (NULL: no save). */
static int profiled_run(const char *model_path, const bmoe_model_params *params, const char *profile,
                        const char *save_path, workload_result *r, char *message, size_t message_size,
                        bmoe_stream_state *state)
{
    memset(r, 0, sizeof *r);
    bmoe_error error = {0};
    bmoe_model *model = bmoe_model_load(model_path, params, &error);
    CHECK_MSG(model != NULL, "load: %s", error.message);
    if (!model)
        return -100;
    int loaded = profile ? bmoe_model_load_expert_profile(model, profile, &error) : 0;
    if (message)
        snprintf(message, message_size, "%s", loaded < 0 ? error.message : "");
    bmoe_context *context = workload_context(model, 2, &error);
    CHECK_MSG(context != NULL, "context: %s", error.message);
    if (context) {
        workload_run_on(context, 1, r);
        /* single tokens until the warm-up has read all it queued: between
         * evaluations the lanes are idle, and each release tops it up */
        bmoe_stream_state now;
        bmoe_model_get_stream_state(model, &now);
        for (int i = 0; i < 4000 && now.warm_pending > 0; i++) {
            int32_t token = i % 7;
            if (bmoe_context_position(context) >= 120)
                bmoe_context_truncate(context, 0);
            if (bmoe_eval(context, &token, 1, NULL, false, NULL, &error) != 0)
                break;
            bmoe_model_get_stream_state(model, &now);
        }
        if (state)
            *state = now;
    }
    if (save_path) {
        int saved = bmoe_model_save_expert_profile(model, save_path, &error);
        CHECK_MSG(saved == 0, "save %s: %s", save_path, error.message);
    }
    bmoe_context_free(context);
    bmoe_model_free(model);
    return loaded;
}

static void test_library(const char *dir)
{
    char model_path[1200], other_path[1200], profile[1200], other_profile[1200], missing[1200];
    snprintf(model_path, sizeof model_path, "%s/model.gguf", dir);
    snprintf(other_path, sizeof other_path, "%s/other.gguf", dir);
    snprintf(profile, sizeof profile, "%s/model.profile", dir);
    snprintf(other_profile, sizeof other_profile, "%s/other.profile", dir);
    snprintf(missing, sizeof missing, "%s/none-yet.profile", dir);
    if (!stream_make_model(model_path, "--shape tiny-qwen3moe --experts 32 --expert-ff 512 --type q4_k_m "
                                       "--fill blocks --seed 8") ||
        !stream_make_model(other_path, "--shape tiny-qwen3moe --experts 32 --expert-ff 512 --type q4_k_m "
                                       "--fill blocks --seed 9"))
        return;
    bmoe_model_params freq = streamed_params(BMOE_CACHE_POLICY_FREQUENCY);
    bmoe_model_params resident = bmoe_model_default_params();

    workload_result reference, cold, warm;
    workload_run(model_path, &resident, 2, 1, &reference);
    CHECK_MSG(reference.ok, "resident: %s", reference.error);

    /* no profile yet: nothing to warm, and the run's counts are saved */
    int loaded = profiled_run(model_path, &freq, missing, profile, &cold, NULL, 0, NULL);
    CHECK_MSG(loaded == 0, "a missing profile: %d", loaded);
    CHECK_MSG(workload_same(&cold, &reference), "cold streamed run differs from resident (%s)", cold.error);
    struct stat st;
    CHECK(stat(profile, &st) == 0 && st.st_size == 32 + 3 * 32 * 4 + 8);
    CHECK(stat(missing, &st) != 0); /* loading never creates it */

    /* warm: the profile's experts are read in the background, the output is the same */
    bmoe_stream_state state;
    char message[BMOE_ERROR_MAX];
    loaded = profiled_run(model_path, &freq, profile, NULL, &warm, message, sizeof message, &state);
    CHECK_MSG(loaded > 0, "warm load: %d (%s)", loaded, message);
    CHECK_MSG(workload_same(&warm, &reference), "warm streamed run differs from resident (%s)", warm.error);
    CHECK_MSG(state.warm_pending == 0 && state.warmed > 0 && state.warmed <= (uint64_t)loaded,
              "warm-up: %llu read, %llu pending of %d queued", (unsigned long long)state.warmed,
              (unsigned long long)state.warm_pending, loaded);

    /* another model's profile: refused, and the file left as it was */
    size_t before_size = 0, after_size = 0;
    uint8_t *before = test_read_file(profile, &before_size);
    workload_result refused;
    loaded = profiled_run(other_path, &freq, profile, NULL, &refused, message, sizeof message, NULL);
    CHECK_MSG(loaded < 0 && strstr(message, "another model"), "another model's profile: %d (%s)", loaded, message);
    CHECK_MSG(refused.ok, "the run after a refused profile: %s", refused.error);
    uint8_t *after = test_read_file(profile, &after_size);
    CHECK(before && after && before_size == after_size && memcmp(before, after, before_size) == 0);
    free(before);
    free(after);
    workload_free(&refused);

    /* a damaged profile (cut short): refused, the run goes on cold */
    before = test_read_file(profile, &before_size);
    CHECK(before && write_bytes(other_profile, before, before_size / 2));
    free(before);
    loaded = profiled_run(model_path, &freq, other_profile, NULL, &refused, message, sizeof message, NULL);
    CHECK_MSG(loaded < 0 && strstr(message, "bytes where"), "a damaged profile: %d (%s)", loaded, message);
    CHECK_MSG(workload_same(&refused, &reference), "the run after a damaged profile differs");
    workload_free(&refused);

    /* what cannot keep a profile says so */
    bmoe_model_params lru = streamed_params(BMOE_CACHE_POLICY_LRU);
    loaded = profiled_run(model_path, &lru, profile, NULL, &refused, message, sizeof message, NULL);
    CHECK_MSG(loaded < 0 && strstr(message, "freq"), "lru: %d (%s)", loaded, message);
    workload_free(&refused);
    loaded = profiled_run(model_path, &resident, profile, NULL, &refused, message, sizeof message, NULL);
    CHECK_MSG(loaded < 0 && strstr(message, "streamed"), "resident: %d (%s)", loaded, message);
    workload_free(&refused);

    workload_free(&reference);
    workload_free(&cold);
    workload_free(&warm);
}

int main(void)
{
    char dir[1024];
    stream_test_dir(dir, sizeof dir, "expert_profile");
    test_file(dir);
    test_policy_counts();
    test_admit_order();
    test_library(dir);
    return test_finish();
}
