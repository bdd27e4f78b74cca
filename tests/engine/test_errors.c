/* Errors through the public API: every bmoe_status is produced by a call
 * that provokes it, with a one-line message; the library prints nothing to
 * stderr (warnings go to the log callback); and a model computing NaN stops
 * with BMOE_ERR_NUMERIC instead of generating token 0 forever. */
#include <fcntl.h>
#include <math.h>
#include <unistd.h>

#include "bmoe.h"
#include "nan_model.h"
#include "test.h"

/* The out-of-memory case asks for hundreds of GB; the sanitizer's allocator
 * must return NULL as libc does instead of stopping the test. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "allocator_may_return_null=1";
}

static char stories_path[1024];

static void check_status(const char *what, const bmoe_error *error, bmoe_status want)
{
    CHECK_MSG(error->status == want, "%s: status %d (%s), want %d: %s", what, (int)error->status,
              bmoe_status_name(error->status), (int)want, error->message);
    CHECK_MSG(error->message[0] && !strchr(error->message, '\n'), "%s: message not one line: '%s'", what,
              error->message);
}

typedef struct log_capture {
    int n_warnings;
    char last[BMOE_ERROR_MAX];
} log_capture;

static void capture_log(void *user, enum bmoe_log_level level, const char *message)
{
    log_capture *capture = user;
    if (level == BMOE_LOG_WARNING)
        capture->n_warnings++;
    snprintf(capture->last, sizeof capture->last, "%s", message);
}

static bool always_abort(void *user)
{
    (void)user;
    return true;
}


int main(void)
{
    test_shared_path(stories_path, sizeof stories_path, "data/models/stories260K/stories260K.gguf");
    char corpus[1024], missing[1200], nan_path[1200], stderr_path[1200];
    test_shared_path(corpus, sizeof corpus, "data/corpus/tinyshakespeare.txt");
    snprintf(missing, sizeof missing, "%s/no-such-dir/model.gguf", test_tmp_dir());
    snprintf(nan_path, sizeof nan_path, "%s/errors-nan.gguf", test_tmp_dir());
    snprintf(stderr_path, sizeof stderr_path, "%s/errors-stderr.txt", test_tmp_dir());

    /* Everything below runs with stderr redirected to a file that must stay empty. */
    fflush(stderr);
    int saved_stderr = dup(2);
    int capture_fd = open(stderr_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(saved_stderr >= 0 && capture_fd >= 0 && dup2(capture_fd, 2) == 2);
    close(capture_fd);

    bmoe_error error = {0};
    CHECK(bmoe_model_load(missing, NULL, &error) == NULL);
    check_status("missing file", &error, BMOE_ERR_IO);
    CHECK(strstr(error.message, "no-such-dir") != NULL);
    CHECK(bmoe_model_load(corpus, NULL, &error) == NULL);
    check_status("a text file as model", &error, BMOE_ERR_BAD_MODEL);
    CHECK(bmoe_model_load(NULL, NULL, &error) == NULL);
    check_status("no path", &error, BMOE_ERR_INVALID_ARGUMENT);
    bmoe_model_params bad_policy = bmoe_model_default_params();
    bad_policy.stream.enabled = true;
    bad_policy.stream.cache_policy = (enum bmoe_cache_policy)7;
    CHECK(bmoe_model_load(stories_path, &bad_policy, &error) == NULL);
    check_status("unknown cache policy", &error, BMOE_ERR_INVALID_ARGUMENT);
    CHECK(strstr(error.message, "cache policy 7") != NULL);
    CHECK(bmoe_describe_file(corpus, stdout, &error) == BMOE_ERR_BAD_MODEL);

    log_capture log = {0, ""};
    bmoe_model_params model_params = bmoe_model_default_params();
    model_params.log_callback = capture_log;
    model_params.log_user = &log;
    bmoe_model *model = bmoe_model_load(stories_path, &model_params, &error);
    CHECK_MSG(model != NULL, "load: %s", error.message);
    if (model) {
        int32_t tokens[8];
        CHECK(bmoe_tokenize(model, NULL, 5, true, true, tokens, 8, &error) == BMOE_ERR_INVALID_ARGUMENT);
        check_status("tokenize NULL text", &error, BMOE_ERR_INVALID_ARGUMENT);
        char piece[16];
        CHECK(bmoe_token_to_piece(model, 512, false, piece, sizeof piece, &error) == BMOE_ERR_INVALID_ARGUMENT);
        check_status("piece of token 512", &error, BMOE_ERR_INVALID_ARGUMENT);
        CHECK(strstr(error.message, "512") != NULL);
        bmoe_sampler_params sampler_params = bmoe_sampler_default_params();
        sampler_params.repeat_penalty = -1.0f;
        CHECK(bmoe_sampler_create(&sampler_params, 512, &error) == NULL);
        check_status("sampler", &error, BMOE_ERR_INVALID_ARGUMENT);

        /* more positions than trained for: one warning, to the callback */
        bmoe_context_params params = bmoe_context_default_params();
        params.n_ctx = 200;
        params.n_threads = 1;
        bmoe_context *context = bmoe_context_create(model, &params, &error);
        CHECK(context != NULL);
        CHECK_MSG(log.n_warnings == 1 && strstr(log.last, "trained") != NULL, "warnings %d: %s", log.n_warnings,
                  log.last);
        int32_t ids[3] = {1, 403, 600};
        CHECK(bmoe_eval(context, ids, 3, NULL, false, NULL, &error) == BMOE_ERR_INVALID_ARGUMENT);
        check_status("token outside the vocabulary", &error, BMOE_ERR_INVALID_ARGUMENT);
        int32_t many[201] = {0};
        CHECK(bmoe_eval(context, many, 201, NULL, false, NULL, &error) == BMOE_ERR_CONTEXT_FULL);
        check_status("past the context", &error, BMOE_ERR_CONTEXT_FULL);
        bmoe_generation_params generation_params = bmoe_generation_default_params();
        CHECK(bmoe_generation_start(context, &generation_params, many, 201, &error) == NULL);
        check_status("prompt past the context", &error, BMOE_ERR_CONTEXT_FULL);
        bmoe_context_free(context);

        params.abort_callback = always_abort;
        context = bmoe_context_create(model, &params, &error);
        CHECK(context && bmoe_eval(context, ids, 2, NULL, false, NULL, &error) == BMOE_ERR_ABORTED);
        check_status("abort", &error, BMOE_ERR_ABORTED);
        CHECK(context && bmoe_context_position(context) == 0);
        bmoe_context_free(context);

        params = bmoe_context_default_params();
        params.n_ctx = 1 << 30;
        params.n_threads = 1;
        CHECK(bmoe_context_create(model, &params, &error) == NULL);
        check_status("a billion positions", &error, BMOE_ERR_OUT_OF_MEMORY);
        params.n_ctx = -3;
        CHECK(bmoe_context_create(model, &params, &error) == NULL);
        check_status("negative n_ctx", &error, BMOE_ERR_INVALID_ARGUMENT);
        bmoe_model_free(model);
    }

    /* NaN weights: an error, never tokens */
    CHECK(write_nan_model(stories_path, nan_path));
    model = bmoe_model_load(nan_path, NULL, &error);
    CHECK_MSG(model != NULL, "load NaN model: %s", error.message);
    if (model) {
        bmoe_context *context = bmoe_context_create(model, NULL, &error);
        bmoe_generation_params generation_params = bmoe_generation_default_params();
        generation_params.sampler.temperature = 0.8f;
        const char *prompt = "Once upon a time";
        CHECK(context && bmoe_generation_start_text(context, &generation_params, prompt, strlen(prompt),
                                                    &error) == NULL);
        check_status("NaN logits", &error, BMOE_ERR_NUMERIC);
        bmoe_context_free(context);
        bmoe_model_free(model);
    }
    remove(nan_path);

    fflush(stderr);
    dup2(saved_stderr, 2);
    close(saved_stderr);
    size_t printed = 0;
    char *text = test_read_file(stderr_path, &printed);
    CHECK_MSG(text && printed == 0, "the library wrote to stderr: %.300s", text ? text : "(unreadable)");
    free(text);
    remove(stderr_path);
    return test_finish();
}
