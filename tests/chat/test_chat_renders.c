/* Renders every record of shared/data/chat-renders/renders.json (the
 * reference Jinja2 renderings of the chat templates in
 * shared/data/chat-templates) and compares byte for byte; a record with an
 * "error" must fail with the template's own message. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat_template.h"
#include "test.h"

/* renders.json was made with strftime_now pinned to 2026-11-30 (UTC midnight). */
#define PINNED_NOW 1795996800

static const char *string_field(const cJSON *record, const char *name)
{
    const cJSON *field = cJSON_GetObjectItemCaseSensitive(record, name);
    return cJSON_IsString(field) ? field->valuestring : NULL;
}

/* Prints where output and expected first differ, with a little context. */
static void report_mismatch(const char *template_name, const char *conversation, const char *output,
                            size_t output_length, const char *expected)
{
    size_t expected_length = strlen(expected), offset = 0;
    while (offset < output_length && offset < expected_length && output[offset] == expected[offset])
        offset++;
    size_t from = offset > 40 ? offset - 40 : 0;
    fprintf(stderr, "MISMATCH %s / %s at byte %zu (got %zu bytes, expected %zu)\n", template_name, conversation,
            offset, output_length, expected_length);
    fprintf(stderr, "  got:      \"%.*s\"\n", (int)(output_length - from < 100 ? output_length - from : 100),
            output + from);
    fprintf(stderr, "  expected: \"%.*s\"\n", (int)(expected_length - from < 100 ? expected_length - from : 100),
            expected + from);
}

static int check_record(const cJSON *record, const char *templates_dir, int *matched)
{
    const char *template_name = string_field(record, "template");
    const char *conversation = string_field(record, "conversation");
    const char *expected = string_field(record, "expected");
    const char *raised = string_field(record, "error");
    const cJSON *context = cJSON_GetObjectItemCaseSensitive(record, "context");
    CHECK_MSG(template_name && conversation && context && (expected || raised), "malformed record");
    if (!template_name || !conversation || !context || (!expected && !raised))
        return -1;

    char path[2100];
    snprintf(path, sizeof path, "%s/%s", templates_dir, template_name);
    size_t source_length;
    char *source = test_read_file(path, &source_length);
    CHECK_MSG(source != NULL, "cannot read %s", path);
    if (!source)
        return -1;
    bmoe_error err;
    chat_template *template_ = chat_template_parse(source, source_length, &err);
    free(source);
    CHECK_MSG(template_ != NULL, "%s: parse failed: %s", template_name, err.message);
    if (!template_)
        return -1;

    char *context_json = cJSON_PrintUnformatted(context);
    chat_render_options options = chat_render_default_options();
    options.now_seconds = PINNED_NOW;
    char *output = NULL;
    size_t output_length = 0;
    int status = chat_template_render_json(template_, context_json, strlen(context_json), &options, &output,
                                           &output_length, &err);
    if (expected) {
        CHECK_MSG(status == 0, "%s / %s: render failed: %s", template_name, conversation, err.message);
        if (status == 0) {
            bool same = output_length == strlen(expected) && memcmp(output, expected, output_length) == 0;
            CHECK_MSG(same, "%s / %s: output differs", template_name, conversation);
            if (same)
                (*matched)++;
            else
                report_mismatch(template_name, conversation, output, output_length, expected);
        }
    } else {
        /* "TemplateError: message": the message is what follows the type. */
        const char *message = strstr(raised, ": ");
        message = message ? message + 2 : raised;
        CHECK_MSG(status != 0, "%s / %s: rendered, but Jinja2 raised %s", template_name, conversation, raised);
        if (status != 0) {
            bool reported = strstr(err.message, message) != NULL;
            CHECK_MSG(reported, "%s / %s: error \"%s\" does not carry \"%s\"", template_name, conversation,
                      err.message, message);
            if (reported)
                (*matched)++;
        }
    }
    free(output);
    cJSON_free(context_json);
    chat_template_destroy(template_);
    return 0;
}

int main(void)
{
    char renders_path[1024], templates_dir[1024];
    test_shared_path(renders_path, sizeof renders_path, "data/chat-renders/renders.json");
    test_shared_path(templates_dir, sizeof templates_dir, "data/chat-templates");
    size_t length;
    char *text = test_read_file(renders_path, &length);
    CHECK(text != NULL);
    cJSON *records = text ? cJSON_ParseWithLength(text, length) : NULL;
    free(text);
    CHECK(cJSON_IsArray(records));
    int total = cJSON_GetArraySize(records), matched = 0;
    CHECK_MSG(total == 173, "renders.json has %d records, expected 173", total);
    const cJSON *record;
    cJSON_ArrayForEach(record, records)
        check_record(record, templates_dir, &matched);
    printf("renders: %d/%d match\n", matched, total);
    CHECK(matched == total);
    cJSON_Delete(records);
    return test_finish();
}
