/* Read faults while streaming: a failed read (EIO), a short read and a read
 * that returns late, injected through the stream parameters' read function,
 * in serial and overlap mode. A failure aborts that generation with one
 * clear error naming the file and the offset and no logits; a late read
 * changes nothing; the next generation works once the file reads again. A
 * model file truncated or replaced between two generations is detected at
 * the next start. */
#include <errno.h>
#include <time.h>
#include <unistd.h>

#include "stream_support.h"

enum fault { FAULT_NONE, FAULT_EIO, FAULT_SHORT, FAULT_LATE };

typedef struct injector {
    enum fault fault;
    int countdown;      /* reads before the fault fires (then every read) */
    int fired;
} injector;

static int64_t injected_pread(void *user, int fd, void *buffer, size_t length, int64_t offset)
{
    injector *in = user;
    if (in->fault != FAULT_NONE && length > 8192) {
        if (in->countdown > 0) {
            __atomic_fetch_sub(&in->countdown, 1, __ATOMIC_SEQ_CST);
        } else {
            __atomic_fetch_add(&in->fired, 1, __ATOMIC_SEQ_CST);
            if (in->fault == FAULT_EIO) {
                errno = EIO;
                return -1;
            }
            if (in->fault == FAULT_SHORT)
                return 0; /* as if the file ended here */
            struct timespec late = {0, 3 * 1000 * 1000};
            nanosleep(&late, NULL);
        }
    }
    return pread(fd, buffer, length, (off_t)offset);
}

static bmoe_model_params stream_params(injector *in, bool overlap, bool direct)
{
    bmoe_model_params p = bmoe_model_default_params();
    p.stream.enabled = true;
    p.stream.cache_mb = 1;
    p.stream.overlap = overlap;
    p.stream.direct = direct;
    p.stream.pread = injected_pread;
    p.stream.pread_user = in;
    return p;
}

/* Greedy: prompt then steps decode steps; 0 or the failing call's status. */
static int generate(bmoe_context *context, int steps, int32_t *tokens, bmoe_error *error)
{
    int n_vocab = bmoe_model_n_vocab(bmoe_context_model(context));
    int32_t prompt[WORKLOAD_PROMPT];
    workload_prompt(prompt, n_vocab);
    bmoe_generation_params params = bmoe_generation_default_params();
    params.n_predict = steps;
    params.ignore_eos = true;
    bmoe_context_truncate(context, 0);
    bmoe_generation *generation = bmoe_generation_start(context, &params, prompt, WORKLOAD_PROMPT, error);
    if (!generation)
        return error->status;
    bmoe_step step;
    int status, n = 0;
    while ((status = bmoe_generation_step(generation, &step, error)) == 1)
        tokens[n++] = step.token;
    bmoe_generation_free(generation);
    return status < 0 ? status : 0;
}

static void check_faults(const char *path, bool overlap, bool direct, const int32_t *reference)
{
    const char *mode = overlap ? "overlap" : "serial";
    injector in = {FAULT_NONE, 0, 0};
    bmoe_model_params params = stream_params(&in, overlap, direct);
    bmoe_error error = {0};
    bmoe_model *model = bmoe_model_load(path, &params, &error);
    CHECK_MSG(model != NULL, "%s: load: %s", mode, error.message);
    if (!model)
        return;
    bmoe_context_params context_params = bmoe_context_default_params();
    context_params.n_ctx = 128;
    context_params.n_ubatch = 16;
    context_params.n_threads = 2;
    bmoe_context *context = bmoe_context_create(model, &context_params, &error);
    int32_t tokens[WORKLOAD_STEPS];
    const enum fault faults[] = {FAULT_EIO, FAULT_SHORT};
    const char *names[] = {"EIO", "short read"};
    for (int f = 0; f < 2 && context; f++) {
        for (int countdown = 0; countdown <= 40; countdown += 40) { /* in the prefill, then in a decode step */
            in.fault = faults[f];
            in.countdown = countdown;
            in.fired = 0;
            int status = generate(context, WORKLOAD_STEPS, tokens, &error);
            CHECK_MSG(status == BMOE_ERR_IO && in.fired > 0, "%s, %s after %d reads: status %d (%s)", mode, names[f],
                      countdown, status, error.message);
            CHECK_MSG(strstr(error.message, path) && strstr(error.message, "offset") && !strchr(error.message, '\n'),
                      "%s, %s: message '%s'", mode, names[f], error.message);
            /* readable again: the next generation is the resident one's */
            in.fault = FAULT_NONE;
            status = generate(context, WORKLOAD_STEPS, tokens, &error);
            CHECK_MSG(status == 0 && memcmp(tokens, reference, sizeof tokens) == 0,
                      "%s, after %s: status %d (%s), tokens differ", mode, names[f], status, error.message);
        }
    }
    /* late reads change nothing */
    in.fault = FAULT_LATE;
    in.countdown = 0;
    in.fired = 0;
    int status = context ? generate(context, WORKLOAD_STEPS, tokens, &error) : -1;
    CHECK_MSG(status == 0 && in.fired > 0 && memcmp(tokens, reference, sizeof tokens) == 0,
              "%s, late reads: status %d, fired %d", mode, status, in.fired);
    bmoe_context_free(context);
    bmoe_model_free(model);
}

static bool copy_file(const char *from, const char *to)
{
    char command[2600];
    snprintf(command, sizeof command, "cp '%s' '%s'", from, to);
    return system(command) == 0;
}

static void check_changed_file(const char *path, const char *dir, const int32_t *reference)
{
    char copy[1300], other[1300];
    snprintf(copy, sizeof copy, "%s/faults-copy.gguf", dir);
    snprintf(other, sizeof other, "%s/faults-other.gguf", dir);
    for (int replace = 0; replace < 2; replace++) {
        CHECK(copy_file(path, copy));
        injector in = {FAULT_NONE, 0, 0};
        bmoe_model_params params = stream_params(&in, true, true);
        bmoe_error error = {0};
        bmoe_model *model = bmoe_model_load(copy, &params, &error);
        bmoe_context *context = model ? bmoe_context_create(model, NULL, &error) : NULL;
        int32_t tokens[WORKLOAD_STEPS];
        CHECK(context && generate(context, WORKLOAD_STEPS, tokens, &error) == 0 &&
              memcmp(tokens, reference, sizeof tokens) == 0);
        if (replace) {
            CHECK(copy_file(path, other) && rename(other, copy) == 0);
        } else {
            CHECK(truncate(copy, 4096 * 8) == 0);
        }
        int status = context ? generate(context, WORKLOAD_STEPS, tokens, &error) : 0;
        CHECK_MSG(status == BMOE_ERR_IO && strstr(error.message, replace ? "replaced" : "bytes now"),
                  "%s file: status %d, '%s'", replace ? "replaced" : "truncated", status, error.message);
        bmoe_context_free(context);
        bmoe_model_free(model);
        unlink(copy);
    }
}

int main(void)
{
    char dir[1100], path[1200];
    stream_test_dir(dir, sizeof dir, "stream-faults");
    snprintf(path, sizeof path, "%s/model.gguf", dir);
    if (!stream_make_model(path, "--shape tiny-qwen3moe --experts 32 --expert-ff 512 --type q4_k_m --fill blocks --seed 8"))
        return test_finish();
    /* the resident answer */
    bmoe_error error = {0};
    bmoe_model *model = bmoe_model_load(path, NULL, &error);
    bmoe_context_params context_params = bmoe_context_default_params();
    context_params.n_ctx = 128;
    context_params.n_ubatch = 16;
    bmoe_context *context = model ? bmoe_context_create(model, &context_params, &error) : NULL;
    int32_t reference[WORKLOAD_STEPS];
    CHECK(context && generate(context, WORKLOAD_STEPS, reference, &error) == 0);
    bmoe_context_free(context);
    bmoe_model_free(model);

    check_faults(path, false, true, reference);
    check_faults(path, true, true, reference);
    check_faults(path, true, false, reference);
    check_changed_file(path, dir, reference);
    return test_finish();
}
