/* bmoe-cli --render-template through the binary on every record of
 * shared/data/chat-renders/renders.json (the reference Jinja2 renderings):
 * the context written to a file, the template file of shared/, stdout
 * compared byte for byte and nothing else on it, exit 0; a record whose
 * template raised: exit 1, stdout empty, one line on stderr carrying the
 * template's message. Then the command line's own errors. */
#include <cjson/cJSON.h>
#include <sys/stat.h>

#include "cli_run.h"

/* renders.json was made with strftime_now pinned to 2026-11-30 (UTC midnight). */
#define PINNED_NOW "1795996800"

static const char *string_field(const cJSON *record, const char *name)
{
    const cJSON *field = cJSON_GetObjectItemCaseSensitive(record, name);
    return cJSON_IsString(field) ? field->valuestring : NULL;
}

static bool check_record(const cJSON *record, const char *templates, const char *context_path)
{
    const char *name = string_field(record, "template"), *conversation = string_field(record, "conversation");
    const char *expected = string_field(record, "expected"), *raised = string_field(record, "error");
    const cJSON *context = cJSON_GetObjectItemCaseSensitive(record, "context");
    if (!name || !conversation || !context || (!expected && !raised)) {
        CHECK_MSG(false, "malformed record");
        return false;
    }
    char *json = cJSON_PrintUnformatted(context);
    FILE *file = fopen(context_path, "wb");
    fputs(json, file);
    fclose(file);
    cJSON_free(json);
    char template_path[2200];
    snprintf(template_path, sizeof template_path, "%s/%s", templates, name);
    const char *args[] = {"--render-template", template_path, "--template-context", context_path,
                          "--template-now", PINNED_NOW, NULL};
    cli_result r;
    if (cli_run(args, &r) != 0)
        return false;
    bool ok;
    if (expected) {
        ok = r.exit_code == 0 && r.out_length == strlen(expected) && memcmp(r.out, expected, r.out_length) == 0 &&
             r.err_length == 0;
        CHECK_MSG(ok, "%s / %s: exit %d, %zu bytes out (expected %zu), stderr \"%s\"", name, conversation,
                  r.exit_code, r.out_length, strlen(expected), r.err);
    } else {
        const char *message = strstr(raised, ": ");
        message = message ? message + 2 : raised;
        ok = r.exit_code == 1 && r.out_length == 0 && cli_one_line_error(&r) && strstr(r.err, message) != NULL;
        CHECK_MSG(ok, "%s / %s: exit %d, stderr \"%s\", expected the error \"%s\"", name, conversation, r.exit_code,
                  r.err, message);
    }
    cli_result_free(&r);
    return ok;
}

static void check_errors(const char *templates, const char *dir)
{
    char context_path[1200], bad_json[1200], bad_template[1200], nul_json[1200];
    snprintf(context_path, sizeof context_path, "%s/render-context.json", dir);
    snprintf(nul_json, sizeof nul_json, "%s/render-nul.json", dir);
    snprintf(bad_json, sizeof bad_json, "%s/render-bad.json", dir);
    snprintf(bad_template, sizeof bad_template, "%s/render-bad.jinja", dir);
    FILE *f = fopen(context_path, "wb");
    fputs("{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"add_generation_prompt\": true}", f);
    fclose(f);
    f = fopen(bad_json, "wb");
    fputs("{\"messages\": [", f);
    fclose(f);
    /* cJSON would end the content at the NUL: refused rather than cut */
    f = fopen(nul_json, "wb");
    fputs("{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\\u0000 there\"}]}", f);
    fclose(f);
    f = fopen(bad_template, "wb");
    fputs("{% for m in messages %}{{ m.content }", f);
    fclose(f);
    char qwen[1200];
    snprintf(qwen, sizeof qwen, "%s/Qwen-Qwen3-0.6B.jinja", templates);
    struct {
        const char *args[8];
        int exit_code;
        const char *says;
    } cases[] = {
        {{"--render-template", qwen, "--template-context", bad_json, NULL}, 1, "JSON"},
        {{"--render-template", qwen, "--template-context", nul_json, NULL}, 1,
         "a string holds a NUL (\\u0000) at byte 45"},
        {{"--render-template", bad_template, "--template-context", context_path, NULL}, 1, "line 1"},
        {{"--render-template", "/nonexistent.jinja", "--template-context", context_path, NULL}, 1, "nonexistent"},
        {{"--render-template", qwen, "--template-context", "/nonexistent.json", NULL}, 1, "nonexistent"},
        {{"--render-template", qwen, "--template-context", dir, NULL}, 1, "--template-context"},
        {{"--render-template", qwen, NULL}, 1, "--template-context"},
        {{"--template-context", context_path, NULL}, 1, "--render-template"},
        {{"--render-template", qwen, "--template-context", context_path, "--template-now", "soon", NULL}, 1,
         "--template-now"},
        {{"--render-template", qwen, "--template-context", context_path, "-n", "3", NULL}, 1, "-n"},
        {{"-m", qwen, "--no-think", NULL}, 1, "--chat"},
        {{"-m", qwen, "--decide", NULL}, 1, "--session"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cli_result r;
        if (cli_run(cases[i].args, &r) != 0)
            continue;
        CHECK_MSG(r.exit_code == cases[i].exit_code && r.out_length == 0 && cli_one_line_error(&r) &&
                      strstr(r.err, cases[i].says),
                  "case %zu: exit %d, stderr \"%s\"", i, r.exit_code, r.err);
        cli_result_free(&r);
    }
    /* the template over the context, nothing added */
    const char *args[] = {"--render-template", qwen, "--template-context", context_path, NULL};
    cli_result r;
    if (cli_run(args, &r) == 0) {
        CHECK(r.exit_code == 0 && strcmp(r.out, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n") == 0);
        cli_result_free(&r);
    }
}

int main(void)
{
    char renders_path[1024], templates[1024], dir[1100], context_path[1200];
    test_shared_path(renders_path, sizeof renders_path, "data/chat-renders/renders.json");
    test_shared_path(templates, sizeof templates, "data/chat-templates");
    snprintf(dir, sizeof dir, "%s/cli-render", test_tmp_dir());
    mkdir(dir, 0755);
    snprintf(context_path, sizeof context_path, "%s/context.json", dir);
    size_t length;
    char *text = test_read_file(renders_path, &length);
    cJSON *records = text ? cJSON_ParseWithLength(text, length) : NULL;
    free(text);
    CHECK(cJSON_IsArray(records));
    int total = cJSON_GetArraySize(records), matched = 0;
    CHECK_MSG(total == 173, "renders.json has %d records, expected 173", total);
    const cJSON *record;
    cJSON_ArrayForEach(record, records)
        matched += check_record(record, templates, context_path);
    printf("renders through bmoe-cli: %d/%d match\n", matched, total);
    CHECK(matched == total);
    cJSON_Delete(records);
    check_errors(templates, dir);
    return test_finish();
}
