/* --expert-profile through bmoe-cli: the text is the same with and without
 * a profile; the first run writes it, the next warms from it; another
 * model's profile and a damaged one are refused in a warning, the run goes
 * on cold and the file is left as it was; the flag without streaming, or
 * naming the model, is an error; a session writes it at its close;
 * bmoe-analyze route --profile builds the same profile from a route trace. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_run.h"
#include "test.h"

static char model[1024], other_model[1024];

static void run_ok(const char *const *args, cli_result *r, const char *what)
{
    CHECK_MSG(cli_run(args, r) == 0 && r->exit_code == 0, "%s: exit %d: %s", what, r->exit_code, r->err);
    cli_cut_report(r);
}

static bool same_file_bytes(const char *path, const void *bytes, size_t size)
{
    size_t got_size = 0;
    void *got = test_read_file(path, &got_size);
    bool same = got && got_size == size && memcmp(got, bytes, size) == 0;
    free(got);
    return same;
}

int main(void)
{
    test_shared_path(model, sizeof model, "oracle/models/qwen3moe-tiny-q4_k_m.gguf");
    test_shared_path(other_model, sizeof other_model, "oracle/models/qwen3moe-tiny-f32.gguf");
    char profile[1200], damaged[1200];
    snprintf(profile, sizeof profile, "%s/cli-profile.bin", test_tmp_dir());
    snprintf(damaged, sizeof damaged, "%s/cli-profile-damaged.bin", test_tmp_dir());
    unlink(profile);

#define STREAMED "-m", model, "--moe-stream", "--cache-mb", "2", "--prompt-ids", "1,2,3,4,5,6,7,8", "-n", "24", \
                 "--ignore-eos"
    cli_result plain = {0}, first = {0}, warm = {0};
    const char *plain_args[] = {STREAMED, NULL};
    run_ok(plain_args, &plain, "no profile");
    const char *profile_args[] = {STREAMED, "--expert-profile", profile, NULL};
    run_ok(profile_args, &first, "a new profile");
    struct stat st;
    CHECK_MSG(stat(profile, &st) == 0 && st.st_size > 32, "the first run wrote no profile");
    CHECK(!strstr(first.err, "warning"));
    run_ok(profile_args, &warm, "a warm run");
    CHECK_MSG(strstr(warm.err, "experts read into the cache in the background"), "warm stderr: %s", warm.err);
    CHECK_MSG(plain.out && first.out && warm.out && strcmp(plain.out, first.out) == 0 &&
                  strcmp(plain.out, warm.out) == 0,
              "the text changed with a profile:\n%s\n--\n%s\n--\n%s", plain.out, first.out, warm.out);
    CHECK(strlen(plain.out) > 0);

    /* another model's profile: a warning, a cold run, the file as it was */
    size_t size = 0;
    void *bytes = test_read_file(profile, &size);
    cli_result other = {0};
    const char *other_args[] = {"-m", other_model, "--moe-stream", "--cache-mb", "2", "--prompt-ids", "1,2,3",
                                "-n", "4", "--expert-profile", profile, NULL};
    run_ok(other_args, &other, "another model's profile");
    CHECK_MSG(strstr(other.err, "warning: expert profile") && strstr(other.err, "counted on another model") &&
                  strstr(other.err, "left as it is"),
              "stderr: %s", other.err);
    CHECK(bytes && same_file_bytes(profile, bytes, size));

    /* a damaged one: the same */
    FILE *file = fopen(damaged, "wb");
    CHECK(file && bytes && fwrite(bytes, 1, size - 5, file) == size - 5);
    if (file)
        fclose(file);
    cli_result cut = {0};
    const char *cut_args[] = {STREAMED, "--expert-profile", damaged, NULL};
    run_ok(cut_args, &cut, "a damaged profile");
    CHECK_MSG(strstr(cut.err, "warning: expert profile") && strstr(cut.err, "bytes where"), "stderr: %s", cut.err);
    CHECK(cut.out && plain.out && strcmp(cut.out, plain.out) == 0);
    CHECK(same_file_bytes(damaged, bytes, size - 5));
    free(bytes);

    /* errors: no streaming, the model's own file */
    cli_result resident = {0}, onto_model = {0};
    const char *resident_args[] = {"-m", model, "--no-moe-stream", "--prompt-ids", "1,2", "-n", "2",
                                   "--expert-profile", profile, NULL};
    CHECK(cli_run(resident_args, &resident) == 0);
    CHECK_MSG(resident.exit_code != 0 && cli_one_line_error(&resident), "without streaming: %d %s",
              resident.exit_code, resident.err);
    const char *onto_args[] = {STREAMED, "--expert-profile", model, NULL};
    CHECK(cli_run(onto_args, &onto_model) == 0);
    CHECK_MSG(onto_model.exit_code != 0 && strstr(onto_model.err, "refusing to overwrite"), "onto the model: %s",
              onto_model.err);

    /* bmoe-analyze route --profile: the profile the run that wrote the
     * route trace wrote itself, byte for byte (a prompt of 8 tokens and
     * the answer, on the store's clock) */
    char traced[1200], trace[1200], built[1200];
    snprintf(traced, sizeof traced, "%s/cli-profile-traced.bin", test_tmp_dir());
    snprintf(trace, sizeof trace, "%s/cli-profile-route.csv", test_tmp_dir());
    snprintf(built, sizeof built, "%s/cli-profile-built.bin", test_tmp_dir());
    unlink(traced);
    unlink(built);
    cli_result tracing = {0}, analyzed = {0}, unpaired = {0};
    const char *trace_args[] = {STREAMED, "--route-trace", trace, "--expert-profile", traced, NULL};
    run_ok(trace_args, &tracing, "a traced run");
    char analyze[1100];
    snprintf(analyze, sizeof analyze, "%s/bmoe-analyze", BMOE_BIN_DIR);
    const char *analyze_argv[] = {analyze, "route", trace, "--profile", built, "-m", model, NULL};
    CHECK(cli_spawn(analyze_argv, &analyzed) == 0);
    CHECK_MSG(analyzed.exit_code == 0 && analyzed.out && strstr(analyzed.out, "profile: "), "analyze: %d %s",
              analyzed.exit_code, analyzed.err);
    size_t traced_size = 0;
    void *traced_bytes = test_read_file(traced, &traced_size);
    CHECK_MSG(traced_bytes && traced_size > 32 && same_file_bytes(built, traced_bytes, traced_size),
              "bmoe-analyze's profile differs from the run's own");
    free(traced_bytes);
    /* --profile names the model it is for */
    const char *unpaired_argv[] = {analyze, "route", trace, "--profile", built, NULL};
    CHECK(cli_spawn(unpaired_argv, &unpaired) == 0);
    CHECK_MSG(unpaired.exit_code != 0 && strncmp(unpaired.err, "bmoe-analyze: --profile and -m", 30) == 0 &&
                  strchr(unpaired.err, '\n') == unpaired.err + unpaired.err_length - 1,
              "--profile without -m: %d %s", unpaired.exit_code, unpaired.err);
    cli_result_free(&tracing);
    cli_result_free(&analyzed);
    cli_result_free(&unpaired);

    /* a session writes it at its close */
    char session_profile[1200], script[4096];
    snprintf(session_profile, sizeof session_profile, "%s/cli-profile-session.bin", test_tmp_dir());
    unlink(session_profile);
    snprintf(script, sizeof script,
             "printf '%%s\\n' '{\"cmd\":\"generate\",\"id\":1,\"prompt\":\"hello\",\"n_predict\":4}' "
             "'{\"cmd\":\"close\"}' | \"$BMOE_CLI\" -m '%s' --moe-stream --cache-mb 2 --session "
             "--expert-profile '%s'",
             model, session_profile);
    cli_result session = {0};
    CHECK(cli_run_shell(script, &session) == 0);
    CHECK_MSG(session.exit_code == 0 && session.out && strstr(session.out, "BMOE_DONE"), "session: %d %s",
              session.exit_code, session.err);
    CHECK_MSG(stat(session_profile, &st) == 0 && st.st_size > 32, "the session wrote no profile");

    cli_result_free(&plain);
    cli_result_free(&first);
    cli_result_free(&warm);
    cli_result_free(&other);
    cli_result_free(&cut);
    cli_result_free(&resident);
    cli_result_free(&onto_model);
    cli_result_free(&session);
    return test_finish();
}
