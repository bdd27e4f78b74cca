/* The C side of the interpreter: contexts built with chat_value_* (no
 * JSON), the JSON bridge (Python's int/float distinction, duplicate keys,
 * malformed input), strftime_now with a pinned clock, refusing bad
 * arguments, and one template rendered from several threads at once. */
#include <pthread.h>
#include <stdio.h>

#include "chat_test_util.h"

static char *render_value(const char *source, chat_value context, const chat_render_options *options,
                          bmoe_error *err)
{
    chat_template *template_ = chat_template_parse(source, strlen(source), err);
    if (!template_)
        return NULL;
    char *out = NULL;
    size_t length = 0;
    int status = chat_template_render(template_, context, options, &out, &length, err);
    chat_template_destroy(template_);
    if (status == 0 && length != strlen(out)) {
        free(out);
        return NULL;
    }
    return status == 0 ? out : NULL;
}

static void test_built_context(void)
{
    chat_value context = chat_value_object();
    chat_value messages = chat_value_array();
    chat_value message = chat_value_object();
    CHECK(chat_value_object_set_cstring(message, "role", chat_value_cstring("user")) == 0);
    CHECK(chat_value_object_set_cstring(message, "content", chat_value_string("hi\nthere", 8)) == 0);
    CHECK(chat_value_array_append(messages, message) == 0);
    CHECK(chat_value_object_set_cstring(context, "messages", messages) == 0);
    CHECK(chat_value_object_set_cstring(context, "n", chat_value_int(42)) == 0);
    CHECK(chat_value_object_set_cstring(context, "f", chat_value_float(3.0)) == 0);
    CHECK(chat_value_object_set_cstring(context, "flag", chat_value_bool(true)) == 0);
    CHECK(chat_value_object_set_cstring(context, "nothing", chat_value_none()) == 0);
    /* Setting a key again replaces the value in place. */
    CHECK(chat_value_object_set_cstring(context, "n", chat_value_int(41)) == 0);
    bmoe_error err;
    char *out = render_value("{{ messages[0].role }}|{{ messages[0].content }}|{{ n + 1 }}|{{ f }}|{{ flag }}|"
                             "{{ nothing }}|{{ messages|tojson }}|{{ n is integer }}",
                             context, NULL, &err);
    CHECK_MSG(out != NULL, "%s", err.message);
    if (out)
        CHECK_MSG(strcmp(out, "user|hi\nthere|42|3.0|True|None|[{\"role\": \"user\", \"content\": \"hi\\nthere\"}]|True") == 0,
                  "got %s", out);
    free(out);
    /* The caller's values are unchanged and can be rendered again. */
    out = render_value("{{ n }}", context, NULL, &err);
    CHECK(out && strcmp(out, "41") == 0);
    free(out);
    chat_value_release(context);
}

static void test_refused_building(void)
{
    chat_value array = chat_value_array(), object = chat_value_object();
    chat_value invalid = {.kind = CHAT_VALUE_INVALID};
    CHECK(chat_value_array_append(array, invalid) == -1);
    CHECK(chat_value_array_append(object, chat_value_int(1)) == -1);
    CHECK(chat_value_object_set_cstring(array, "k", chat_value_int(1)) == -1);
    CHECK(chat_value_object_set(object, NULL, 3, chat_value_int(1)) == -1);
    CHECK(chat_value_cstring(NULL).kind == CHAT_VALUE_INVALID);
    CHECK(chat_value_string(NULL, 2).kind == CHAT_VALUE_INVALID);
    bmoe_error err;
    char *out = NULL;
    chat_template *template_ = chat_template_parse("x", 1, &err);
    CHECK(template_ != NULL);
    CHECK(chat_template_render(template_, array, NULL, &out, NULL, &err) == -1);
    CHECK(strstr(err.message, "must be an object") != NULL);
    CHECK(chat_template_render(NULL, object, NULL, &out, NULL, &err) == -1);
    CHECK(chat_template_render_json(template_, "[1]", 3, NULL, &out, NULL, &err) == -1);
    CHECK(strstr(err.message, "must be an object") != NULL);
    CHECK(chat_template_render_json(template_, "{\"a\": ", 6, NULL, &out, NULL, &err) == -1);
    CHECK(strstr(err.message, "invalid JSON") != NULL);
    CHECK(chat_template_render_json(template_, "{} x", 4, NULL, &out, NULL, &err) == -1);
    CHECK(strstr(err.message, "after the JSON value") != NULL);
    CHECK(out == NULL);
    chat_template_destroy(template_);
    chat_template_destroy(NULL);
    chat_value_release(array);
    chat_value_release(object);
    CHECK(chat_template_parse(NULL, 5, &err) == NULL);
}

static void test_json_numbers(void)
{
    EXPECT_RENDER("{{ a }} {{ b }} {{ c }} {{ d }} {{ e }} {{ a is integer }}{{ b is float }} {{ a / 2 }}",
                  "{\"a\": 1, \"b\": 1.0, \"c\": 1e2, \"d\": -0, \"e\": 9007199254740993}",
                  "1 1.0 100.0 0 9007199254740993 TrueTrue 0.5");
    EXPECT_RENDER("{{ s }}", "{\"s\": \"numbers in strings stay text: 1.0 -3\"}", "numbers in strings stay text: 1.0 -3");
    EXPECT_RENDER("{{ list }}", "{\"list\": [\"a\\\"1\", 2, {\"x\": [3.5, -4]}]}", "['a\"1', 2, {'x': [3.5, -4]}]");
    /* Python's json keeps the first position of a repeated key and its last value. */
    EXPECT_RENDER("{{ d }}", "{\"d\": {\"a\": 1, \"b\": 2, \"a\": 3}}", "{'a': 3, 'b': 2}");
    EXPECT_RENDER("{{ d|tojson }}", "{\"d\": {\"é\": \"\\u00e9\\ud83d\\ude00\"}}", "{\"é\": \"é😀\"}");
}

static void test_strftime_now(void)
{
    const char *format = "{{ strftime_now('%Y-%m-%d %H:%M:%S|%a %A|%b %B|%j|%-d|%y|%I %p|%w %u|%U %W|%c|%x|%X|%D|%F|%T|%e|%%') }}";
    /* Expected strings are Python's datetime.strftime of the same instants. */
    EXPECT_RENDER(format, NULL,
                  "2026-11-30 00:00:00|Mon Monday|Nov November|334|30|26|12 AM|1 1|48 48|Mon Nov 30 00:00:00 2026|"
                  "11/30/26|00:00:00|11/30/26|2026-11-30|00:00:00|30|%");
    chat_render_options options = chat_render_default_options();
    options.now_seconds = 1709211909;
    EXPECT_RENDER_WITH(&options, format, NULL,
                       "2024-02-29 13:05:09|Thu Thursday|Feb February|060|29|24|01 PM|4 4|08 09|Thu Feb 29 13:05:09 2024|"
                       "02/29/24|13:05:09|02/29/24|2024-02-29|13:05:09|29|%");
    options.now_seconds = -1;
    EXPECT_RENDER_WITH(&options, "{{ strftime_now('%Y-%m-%d %H:%M:%S %a %j %U %W') }}", NULL,
                       "1969-12-31 23:59:59 Wed 365 52 52");
    /* Unpinned, it is today: at least a plausible year. */
    options.now_seconds = 0;
    char *out;
    bmoe_error err;
    CHECK(chat_test_render("{{ strftime_now('%Y') }}", NULL, &options, &out, &err) == 0);
    CHECK(out && atoi(out) >= 2025);
    free(out);
}

static void test_options(void)
{
    chat_render_options options = chat_render_default_options();
    CHECK(options.trim_blocks && options.lstrip_blocks);
    const char *source = "a\n  {% if true %}\n  b\n  {% endif %}\nc";
    EXPECT_RENDER_WITH(&options, source, NULL, "a\n  b\nc");
    options.trim_blocks = false;
    EXPECT_RENDER_WITH(&options, source, NULL, "a\n\n  b\n\nc");
    options.lstrip_blocks = false;
    EXPECT_RENDER_WITH(&options, source, NULL, "a\n  \n  b\n  \nc");
    options.trim_blocks = true;
    EXPECT_RENDER_WITH(&options, source, NULL, "a\n    b\n  c");
}

struct worker {
    const chat_template *template_;
    int failures;
};

static void *render_repeatedly(void *argument)
{
    struct worker *worker = argument;
    for (int i = 0; i < 200; i++) {
        char *out = NULL;
        bmoe_error err;
        const char *context = "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}";
        if (chat_template_render_json(worker->template_, context, strlen(context), NULL, &out, NULL, &err) != 0 ||
            strcmp(out, "<user>x</user>-literal") != 0)
            worker->failures++;
        free(out);
    }
    return NULL;
}

/* A parsed template is read-only: renders may share it across threads. */
static void test_concurrent_renders(void)
{
    const char *source = "{% for m in messages %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>{% endfor %}{{ '-literal' }}";
    bmoe_error err;
    chat_template *template_ = chat_template_parse(source, strlen(source), &err);
    CHECK(template_ != NULL);
    pthread_t threads[4];
    struct worker workers[4];
    for (int i = 0; i < 4; i++) {
        workers[i] = (struct worker){template_, 0};
        CHECK(pthread_create(&threads[i], NULL, render_repeatedly, &workers[i]) == 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(threads[i], NULL);
        CHECK(workers[i].failures == 0);
    }
    chat_template_destroy(template_);
}

int main(void)
{
    test_built_context();
    test_refused_building();
    test_json_numbers();
    test_strftime_now();
    test_options();
    test_concurrent_renders();
    return test_finish();
}
