/* Render helpers for the chat tests: a template and a JSON context in, the
 * output (or the error) checked against what Jinja2 renders. */
#ifndef BMOE_TESTS_CHAT_TEST_UTIL_H
#define BMOE_TESTS_CHAT_TEST_UTIL_H

#include <stdlib.h>
#include <string.h>

#include "chat/chat_template.h"
#include "test.h"

/* A template of ../shared/data/chat-templates (malloc'd, NUL-terminated;
 * NULL when it cannot be read). */
static inline char *chat_test_load_template(const char *file, size_t *length)
{
    char relative[512], path[1024];
    snprintf(relative, sizeof relative, "data/chat-templates/%s", file);
    test_shared_path(path, sizeof path, relative);
    return test_read_file(path, length);
}

/* 0 and *out (malloc'd), or -1 with err; parse errors count as failures too. */
static inline int chat_test_render(const char *source, const char *context, const chat_render_options *options,
                                   char **out, bmoe_error *err)
{
    *out = NULL;
    chat_template *template_ = chat_template_parse(source, strlen(source), err);
    if (!template_)
        return -1;
    chat_render_options defaults = chat_render_default_options();
    defaults.now_seconds = 1795996800; /* 2026-11-30 */
    size_t length;
    int status = chat_template_render_json(template_, context ? context : "{}", strlen(context ? context : "{}"),
                                           options ? options : &defaults, out, &length, err);
    chat_template_destroy(template_);
    return status;
}

#define EXPECT_RENDER_WITH(options, source, context, expected)                                                 \
    do {                                                                                                       \
        char *out_;                                                                                            \
        bmoe_error err_ = {0};                                                                                 \
        int status_ = chat_test_render((source), (context), (options), &out_, &err_);                          \
        CHECK_MSG(status_ == 0, "%s: failed: %s", (source), err_.message);                                     \
        if (status_ == 0)                                                                                      \
            CHECK_MSG(strcmp(out_, (expected)) == 0, "%s:\n  got      \"%s\"\n  expected \"%s\"", (source), out_, \
                      (expected));                                                                             \
        free(out_);                                                                                            \
    } while (0)

#define EXPECT_RENDER(source, context, expected) EXPECT_RENDER_WITH(NULL, source, context, expected)

/* The render (or parse) fails with a message containing fragment. */
#define EXPECT_ERROR_WITH(options, source, context, fragment)                                                  \
    do {                                                                                                       \
        char *out_;                                                                                            \
        bmoe_error err_ = {0};                                                                                 \
        int status_ = chat_test_render((source), (context), (options), &out_, &err_);                          \
        CHECK_MSG(status_ != 0, "%s: rendered \"%s\", expected an error with \"%s\"", (source),               \
                  out_ ? out_ : "", (fragment));                                                               \
        if (status_ != 0) {                                                                                    \
            CHECK_MSG(strstr(err_.message, (fragment)) != NULL, "%s: error \"%s\" lacks \"%s\"", (source),      \
                      err_.message, (fragment));                                                               \
            CHECK_MSG(strchr(err_.message, '\n') == NULL, "%s: error is not one line", (source));              \
        }                                                                                                      \
        free(out_);                                                                                            \
    } while (0)

#define EXPECT_ERROR(source, context, fragment) EXPECT_ERROR_WITH(NULL, source, context, fragment)

#endif
