/* A model file that changes under a loaded model, through the library:
 * truncated during an evaluation (reads of its mapping past the new end
 * fault) and between two generations, overwritten in place during an
 * evaluation (NaN from the new bytes) and rewritten with its own bytes
 * during a generation (nothing to see but its times), in each residency
 * that reads the file through its mapping: the default (experts mapped),
 * dense weights mapped, no pre-faulting, and streamed experts with mapped
 * dense weights. Each ends the evaluation with one I/O error line naming the
 * file, never a signal, and later generations fail the same way. The fault
 * handler the library installs passes every other SIGBUS on: to a handler
 * installed before it, and, with none, to the default action. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "stream_support.h"

/* Keeps the GGUF header and the first tensors; every expert lies past it. */
#define CUT_SIZE 100000
/* Where the overwrite starts: past the header, inside the tensor data. */
#define OVERWRITE_FROM 200000

enum change { CHANGE_CUT, CHANGE_OVERWRITE, CHANGE_REWRITE };

typedef struct residency {
    const char *name;
    enum bmoe_dense_weights dense;
    bool prefault;
    bool streamed;
} residency;

/* What the abort callback does to the file, once, when armed. */
typedef struct saboteur {
    const char *path;
    const char *original; /* the model the copy was made from (CHANGE_REWRITE) */
    enum change change;
    bool armed;
    int done;
} saboteur;

static bool copy_file(const char *from, const char *to)
{
    char command[2600];
    snprintf(command, sizeof command, "cp '%s' '%s'", from, to);
    return system(command) == 0;
}

/* Writes length bytes over path from offset, in place: the same bytes of
 * original, or 0xff when original is NULL. */
static bool overwrite(const char *path, const char *original, off_t offset, size_t length)
{
    int fd = open(path, O_WRONLY);
    if (fd < 0)
        return false;
    char *bytes = malloc(length);
    bool ok = bytes != NULL;
    if (ok && original) {
        FILE *source = fopen(original, "rb");
        ok = source && fseek(source, (long)offset, SEEK_SET) == 0 && fread(bytes, 1, length, source) == length;
        if (source)
            fclose(source);
    } else if (ok) {
        memset(bytes, 0xff, length); /* NaN in every float and every block scale */
    }
    ok = ok && pwrite(fd, bytes, length, offset) == (ssize_t)length;
    free(bytes);
    return close(fd) == 0 && ok;
}

static void apply(saboteur *s)
{
    struct stat st;
    bool ok = stat(s->path, &st) == 0;
    if (s->change == CHANGE_CUT)
        ok = ok && truncate(s->path, CUT_SIZE) == 0;
    else
        ok = ok && overwrite(s->path, s->change == CHANGE_REWRITE ? s->original : NULL, OVERWRITE_FROM,
                             (size_t)st.st_size - OVERWRITE_FROM);
    CHECK_MSG(ok, "cannot change %s", s->path);
    s->done++;
}

/* Asked between layers: the change lands inside an evaluation, after the
 * checks at its start. */
static bool change_now(void *user)
{
    saboteur *s = user;
    if (s->armed && s->done == 0)
        apply(s);
    return false;
}

static bmoe_generation *start(bmoe_context *context, int n_predict, bmoe_error *error)
{
    int32_t prompt[WORKLOAD_PROMPT];
    workload_prompt(prompt, bmoe_model_n_vocab(bmoe_context_model(context)));
    bmoe_generation_params params = bmoe_generation_default_params();
    params.n_predict = n_predict;
    params.ignore_eos = true;
    bmoe_context_truncate(context, 0);
    return bmoe_generation_start(context, &params, prompt, WORKLOAD_PROMPT, error);
}

/* Runs a whole generation; 0 or the failing call's status. */
static int generate(bmoe_context *context, bmoe_error *error)
{
    bmoe_generation *generation = start(context, WORKLOAD_STEPS, error);
    if (!generation)
        return error->status;
    bmoe_step step;
    int status;
    while ((status = bmoe_generation_step(generation, &step, error)) == 1) {
    }
    bmoe_generation_free(generation);
    return status < 0 ? status : 0;
}

/* One line, an I/O error, the file's name and what happened to it. */
static void check_error(const residency *r, const char *what, int status, const bmoe_error *error, const char *path,
                        const char *phrase)
{
    CHECK_MSG(status == BMOE_ERR_IO && strstr(error->message, path) && strstr(error->message, phrase) &&
                  !strchr(error->message, '\n'),
              "%s, %s: status %d, '%s' (expected '%s')", r->name, what, status, error->message, phrase);
}

typedef struct loaded {
    bmoe_model *model;
    bmoe_context *context;
} loaded;

static bool load(const residency *r, const char *path, saboteur *s, loaded *out)
{
    bmoe_model_params params = bmoe_model_default_params();
    params.dense_weights = r->dense;
    params.prefault = r->prefault;
    params.stream.enabled = r->streamed;
    params.stream.cache_mb = 1;
    bmoe_context_params context_params = bmoe_context_default_params();
    context_params.n_ctx = 2048;
    context_params.n_threads = 2;
    context_params.abort_callback = change_now;
    context_params.abort_user = s;
    bmoe_error error = {0};
    out->model = bmoe_model_load(path, &params, &error);
    out->context = out->model ? bmoe_context_create(out->model, &context_params, &error) : NULL;
    CHECK_MSG(out->context != NULL, "%s: load: %s", r->name, error.message);
    return out->context != NULL;
}

static void unload(loaded *l)
{
    bmoe_context_free(l->context);
    bmoe_model_free(l->model);
}

/* Longer than the library waits between two checks of the files. */
static void pause_past_check_interval(void)
{
    struct timespec pause = {0, 200 * 1000 * 1000};
    nanosleep(&pause, NULL);
}

/* The change inside the prefill. Cut: the reads past the end fault and the
 * generation does not start. Overwritten: where the new bytes give NaN the
 * same, but activations quantized to 8 bits turn NaN into zeros (the
 * default residency's logits come out finite), so the next step after the
 * check interval may be the first to fail. */
static void check_during_evaluation(const residency *r, const char *model_path, const char *copy, enum change change,
                                    const char *phrase)
{
    const char *what = change == CHANGE_CUT ? "cut during an evaluation" : "overwritten during an evaluation";
    CHECK(copy_file(model_path, copy));
    saboteur s = {copy, model_path, change, false, 0};
    loaded l;
    if (!load(r, copy, &s, &l))
        return;
    bmoe_error error = {0};
    CHECK_MSG(generate(l.context, &error) == 0, "%s: %s", r->name, error.message);
    s.armed = true;
    bmoe_generation *generation = start(l.context, WORKLOAD_STEPS, &error);
    CHECK_MSG(s.done == 1 && (generation == NULL || change == CHANGE_OVERWRITE), "%s, %s: the generation started",
              r->name, what);
    int status = generation ? 0 : error.status;
    if (generation) {
        pause_past_check_interval();
        bmoe_step step;
        status = bmoe_generation_step(generation, &step, &error);
        bmoe_generation_free(generation);
    }
    check_error(r, what, status, &error, copy, phrase);
    /* and the model stays unusable */
    check_error(r, what, generate(l.context, &error), &error, copy, phrase);
    unload(&l);
    unlink(copy);
}

/* Cut between two generations: the next one does not start. */
static void check_between_generations(const residency *r, const char *model_path, const char *copy)
{
    CHECK(copy_file(model_path, copy));
    saboteur s = {copy, model_path, CHANGE_CUT, false, 0};
    loaded l;
    if (!load(r, copy, &s, &l))
        return;
    bmoe_error error = {0};
    CHECK_MSG(generate(l.context, &error) == 0, "%s: %s", r->name, error.message);
    apply(&s);
    check_error(r, "cut between generations", generate(l.context, &error), &error, copy, "bytes now");
    unload(&l);
    unlink(copy);
}

/* Rewritten with the bytes it had, between two steps: nothing reads
 * differently, but the run is no longer on the file it loaded; a step
 * after a pause longer than the interval between checks notices. */
static void check_rewritten(const residency *r, const char *model_path, const char *copy)
{
    CHECK(copy_file(model_path, copy));
    saboteur s = {copy, model_path, CHANGE_REWRITE, false, 0};
    loaded l;
    if (!load(r, copy, &s, &l))
        return;
    bmoe_error error = {0};
    bmoe_generation *generation = start(l.context, 64, &error);
    CHECK_MSG(generation != NULL, "%s: %s", r->name, error.message);
    if (generation) {
        bmoe_step step;
        int status = bmoe_generation_step(generation, &step, &error);
        CHECK_MSG(status == 1, "%s: step: %s", r->name, error.message);
        apply(&s);
        pause_past_check_interval();
        int steps = 0;
        while ((status = bmoe_generation_step(generation, &step, &error)) == 1)
            steps++;
        check_error(r, "rewritten during a generation", status, &error, copy, "modified");
        CHECK_MSG(steps == 0, "%s: %d steps after the rewrite", r->name, steps);
        bmoe_generation_free(generation);
    }
    unload(&l);
    unlink(copy);
}

/* ---- The handler passes other faults on --------------------------------- */

static sigjmp_buf recovery;
static volatile sig_atomic_t expecting, earlier_handler_calls;

/* Jumps back to recovery from an expected SIGBUS; any other ends the
 * process as the default action would (a model's fault reaching it). */
static void earlier_handler(int signal_number)
{
    if (!expecting) {
        signal(signal_number, SIG_DFL);
        raise(signal_number);
        return;
    }
    earlier_handler_calls++;
    siglongjmp(recovery, 1);
}

/* A page of a file mapping past the file's end, in no model. */
static volatile const char *unguarded_fault_address(const char *path)
{
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    long page = sysconf(_SC_PAGESIZE);
    if (fd < 0 || ftruncate(fd, 2 * page) != 0)
        return NULL;
    char *map = mmap(NULL, (size_t)(2 * page), PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (map == MAP_FAILED || truncate(path, page) != 0)
        return NULL;
    return map + page;
}

/* Before any other model is loaded here: the library's handler is
 * installed by the first load, over the handler the process had then. */
static void check_other_faults(const char *model_path, const char *dir)
{
    char other[1300];
    snprintf(other, sizeof other, "%s/unguarded.bin", dir);
    /* a child without a handler of its own: the default action ends it */
    pid_t child = fork();
    if (child == 0) {
        alarm(20);
        bmoe_model *model = bmoe_model_load(model_path, NULL, NULL);
        volatile const char *address = unguarded_fault_address(other);
        if (!model || !address)
            _exit(3);
        char byte = *address;
        _exit(byte == 0 ? 0 : 4); /* survived the fault: it was swallowed */
    }
    int status = 0;
    CHECK(child > 0 && waitpid(child, &status, 0) == child);
    /* a sanitizer's own handler reports the fault and exits non-zero */
    CHECK_MSG((WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS) || (WIFEXITED(status) && WEXITSTATUS(status) == 1),
              "a fault outside the models: status 0x%x", status);

    /* a handler installed before the library's gets the others' faults */
    struct sigaction action, before;
    memset(&action, 0, sizeof action);
    action.sa_handler = earlier_handler;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_NODEFER;
    CHECK(sigaction(SIGBUS, &action, &before) == 0);
    bmoe_model *model = bmoe_model_load(model_path, NULL, NULL);
    CHECK(model != NULL);
    volatile const char *address = unguarded_fault_address(other);
    CHECK(address != NULL);
    /* volatile: nothing after the read may move before it */
    volatile bool survived = false;
    expecting = true;
    if (address && sigsetjmp(recovery, 1) == 0) {
        (void)*address;
        survived = true;
    }
    CHECK_MSG(!survived, "a read past the end of a file outside the models did not fault");
    if (sigsetjmp(recovery, 1) == 0)
        raise(SIGBUS); /* sent, not a fault */
    expecting = false;
    CHECK_MSG(earlier_handler_calls == 2, "the earlier handler ran %d times", (int)earlier_handler_calls);
    bmoe_model_free(model);
    unlink(other);
}

int main(void)
{
    char dir[1100], path[1200], copy[1300];
    stream_test_dir(dir, sizeof dir, "mapping-changes");
    snprintf(path, sizeof path, "%s/model.gguf", dir);
    snprintf(copy, sizeof copy, "%s/copy.gguf", dir);
    if (!stream_make_model(path, "--shape tiny-qwen3moe --type q4_k_m --seed 5"))
        return test_finish();
    check_other_faults(path, dir);
    const residency residencies[] = {
        {"default", BMOE_DENSE_WEIGHTS_ANON, true, false},
        {"dense weights mapped", BMOE_DENSE_WEIGHTS_MMAP, true, false},
        {"no pre-fault", BMOE_DENSE_WEIGHTS_ANON, false, false},
        {"streamed, dense weights mapped", BMOE_DENSE_WEIGHTS_MMAP, true, true},
    };
    for (size_t i = 0; i < sizeof residencies / sizeof residencies[0]; i++) {
        const residency *r = &residencies[i];
        check_during_evaluation(r, path, copy, CHANGE_CUT, "bytes now");
        check_during_evaluation(r, path, copy, CHANGE_OVERWRITE, "modified");
        check_between_generations(r, path, copy);
        check_rewritten(r, path, copy);
    }
    return test_finish();
}
