/* Tool calls: the format each real template teaches; a conversation with
 * tools, an assistant turn's calls and the tool's answer rendered as the
 * reference Jinja2 renders it (tool-renders.json, from
 * make-tool-renders.py); the calls read back out of what the templates
 * write; the parse of answers (calls among text, two calls, a block that is
 * not a call, a call cut short, string arguments, typed XML values); and the
 * streaming split, fed whole, byte by byte and in uneven pieces, showing
 * everything but the calls and never a byte of them. Harmony (gpt-oss)
 * calls are read as the server reads them: the model's output through the
 * harmony reasoning split, its answer through the tool parser or split. */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "chat/chat_model.h"
#include "chat_test_util.h"
#include "test.h"

static const char *renders_path;

static void check_formats(void)
{
    static const struct {
        const char *file;
        enum bmoe_tool_format format;
    } cases[] = {
        {"Qwen-Qwen3-0.6B.jinja", BMOE_TOOL_FORMAT_JSON},
        {"Qwen-Qwen2.5-7B-Instruct.jinja", BMOE_TOOL_FORMAT_JSON},
        {"Qwen3.5-4B.jinja", BMOE_TOOL_FORMAT_XML},
        {"Qwen3-Coder.jinja", BMOE_TOOL_FORMAT_XML},
        {"openai-gpt-oss-120b.jinja", BMOE_TOOL_FORMAT_HARMONY},
        {"google-gemma-4-31B-it.jinja", BMOE_TOOL_FORMAT_NONE},
        {"LFM2-8B-A1B.jinja", BMOE_TOOL_FORMAT_NONE},
        {"meta-llama-Llama-3.1-8B-Instruct.jinja", BMOE_TOOL_FORMAT_NONE},
        {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", BMOE_TOOL_FORMAT_JSON},
        {"ibm-granite-granite-4.0.jinja", BMOE_TOOL_FORMAT_JSON},
        {"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja", BMOE_TOOL_FORMAT_XML},
        {"GLM-4.6.jinja", BMOE_TOOL_FORMAT_GLM},
        {"deepseek-ai-DeepSeek-V3.1.jinja", BMOE_TOOL_FORMAT_NONE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t length = 0;
        char *source = chat_test_load_template(cases[i].file, &length);
        CHECK_MSG(source != NULL, "%s", cases[i].file);
        chat_model model = {.source = source, .source_length = length};
        enum bmoe_tool_format format = source ? chat_tool_format_decide(&model) : BMOE_TOOL_FORMAT_NONE;
        CHECK_MSG(format == cases[i].format, "%s: %s, expected %s", cases[i].file, bmoe_tool_format_name(format),
                  bmoe_tool_format_name(cases[i].format));
        free(source);
    }
}

/* The calls of text in format, parsed, as one JSON value (NULL: none). */
static cJSON *calls_of(enum bmoe_tool_format format, const char *text, char **content, int32_t *count)
{
    char *calls = NULL;
    size_t length = 0;
    *count = bmoe_chat_parse_tool_calls(format, text, strlen(text), content, &length, &calls, NULL);
    CHECK(*count >= 0 && *content && strlen(*content) == length);
    cJSON *parsed = calls ? cJSON_Parse(calls) : NULL;
    bmoe_free(calls);
    return parsed;
}

/* Whether calls[index] is a call of name whose arguments (JSON text) mean
 * the object arguments spells. */
static bool is_call(const cJSON *calls, int index, const char *name, const char *arguments)
{
    const cJSON *call = cJSON_GetArrayItem(calls, index);
    const cJSON *got_name = cJSON_GetObjectItemCaseSensitive(call, "name");
    const cJSON *got_arguments = cJSON_GetObjectItemCaseSensitive(call, "arguments");
    if (!cJSON_IsString(got_name) || strcmp(got_name->valuestring, name) != 0 || !cJSON_IsString(got_arguments))
        return false;
    cJSON *got = cJSON_Parse(got_arguments->valuestring), *want = cJSON_Parse(arguments);
    bool same = got && want && cJSON_Compare(got, want, true);
    cJSON_Delete(got);
    cJSON_Delete(want);
    return same;
}

/* The calls with each function's arguments turned into JSON text, as
 * OpenAI clients send them (malloc'ed JSON text). */
static char *arguments_as_text(const cJSON *calls)
{
    cJSON *copy = cJSON_Duplicate(calls, true);
    cJSON *call;
    cJSON_ArrayForEach(call, copy) {
        cJSON *function = cJSON_GetObjectItemCaseSensitive(call, "function");
        char *text = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(function, "arguments"));
        cJSON_ReplaceItemInObjectCaseSensitive(function, "arguments", cJSON_CreateString(text));
        cJSON_free(text);
    }
    char *out = cJSON_PrintUnformatted(copy);
    cJSON_Delete(copy);
    return out;
}

/* The harmony reasoning split run on generated text after prompt, in
 * pieces of step bytes (0: whole), as the server runs it: the answer's
 * text it handed on and the reasoning (both malloc'ed, NUL-terminated). */
static char *harmony_answer(const char *prompt, const char *generated, size_t step, char **reasoning)
{
    bmoe_reasoning *split = bmoe_reasoning_create(BMOE_REASONING_HARMONY, prompt, strlen(prompt), NULL);
    size_t length = strlen(generated), fed = 0;
    bool fine = split != NULL;
    while (fine && fed < length) {
        size_t n = step == 0 || step > length - fed ? length - fed : step;
        fine = bmoe_reasoning_feed(split, generated + fed, n, NULL, NULL) == 0;
        fed += n;
    }
    fine = fine && bmoe_reasoning_finish(split, NULL, NULL) == 0;
    CHECK_MSG(fine, "the reasoning split failed on %s", generated);
    size_t answer_length = 0, thinking_length = 0;
    const char *answer = bmoe_reasoning_answer(split, &answer_length);
    const char *thinking = bmoe_reasoning_thinking(split, &thinking_length);
    char *out = strndup(answer, answer_length);
    *reasoning = strndup(thinking, thinking_length);
    bmoe_reasoning_free(split);
    return out;
}

/* The template's rendered assistant turn (from the <|start|>assistant
 * that begins it to its <|call|>) read as a generation that continues a
 * prompt ending in <|start|>assistant: the analysis message is the
 * reasoning, the call reads back with its arguments as the template wrote
 * them, no content is left. */
static void check_harmony_read_back(const char *file, const char *rendered)
{
    static const char opener[] = "<|start|>assistant";
    const char *turn = strstr(rendered, "<|start|>assistant<|channel|>analysis<|message|>Let me look.");
    const char *end = turn ? strstr(turn, "<|call|>") : NULL;
    char *generated = end ? strndup(turn + strlen(opener), (size_t)(end - turn) - strlen(opener)) : NULL;
    CHECK_MSG(generated != NULL, "%s: no assistant turn with a call in the render", file);
    if (!generated)
        return;
    char *reasoning = NULL, *content = NULL;
    char *answer = harmony_answer("<|start|>user<|message|>Weather in Paris?<|end|><|start|>assistant", generated, 0,
                                  &reasoning);
    int32_t count = 0;
    cJSON *calls = answer ? calls_of(BMOE_TOOL_FORMAT_HARMONY, answer, &content, &count) : NULL;
    const cJSON *arguments = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(calls, 0), "arguments");
    CHECK_MSG(count == 1 && is_call(calls, 0, "get_weather", "{\"city\":\"Paris\",\"days\":2}") &&
                  strcmp(arguments->valuestring, "{\"city\": \"Paris\", \"days\": 2}") == 0,
              "%s: the rendered call does not read back from \"%s\"", file, answer ? answer : "");
    CHECK_MSG(content && content[0] == '\0' && reasoning && strcmp(reasoning, "Let me look.") == 0,
              "%s: content \"%s\", reasoning \"%s\"", file, content ? content : "", reasoning ? reasoning : "");
    cJSON_Delete(calls);
    bmoe_free(content);
    free(answer);
    free(reasoning);
    free(generated);
}

/* The rendered assistant turn's <tool_call> block (from "Let me look.")
 * reads back as the call it was made from, the text before it kept. */
static void check_tagged_read_back(const char *file, enum bmoe_tool_format format, const char *rendered)
{
    const char *turn = strstr(rendered, "Let me look.");
    const char *end = turn ? strstr(turn, "</tool_call>") : NULL;
    char *call_text = end ? strndup(turn, (size_t)(end - turn) + strlen("</tool_call>")) : NULL;
    char *content = NULL;
    int32_t count = 0;
    cJSON *calls = call_text ? calls_of(format, call_text, &content, &count) : NULL;
    CHECK_MSG(count == 1 && is_call(calls, 0, "get_weather", "{\"city\":\"Paris\",\"days\":2}"),
              "%s: the rendered call does not read back", file);
    CHECK(content && strncmp(content, "Let me look.", 12) == 0 && !strstr(content, "tool_call"));
    cJSON_Delete(calls);
    bmoe_free(content);
    free(call_text);
}

/* One record of make-tool-renders.py through chat_conversation_render, the
 * calls' arguments as objects or as JSON text: the reference's text; and
 * the call the assistant turn renders reads back as the call it was made
 * from. */
static void check_render(const cJSON *record, bool as_text)
{
    const char *file = cJSON_GetObjectItemCaseSensitive(record, "template")->valuestring;
    const cJSON *context = cJSON_GetObjectItemCaseSensitive(record, "context");
    const char *expected = cJSON_GetObjectItemCaseSensitive(record, "expected")->valuestring;
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(context, "messages");
    bmoe_chat_message messages[3];
    char *texts[3] = {NULL, NULL, NULL};
    int n = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, list) {
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
        const cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(m, "tool_call_id");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(m, "name");
        texts[n] = !calls ? NULL : as_text ? arguments_as_text(calls) : cJSON_PrintUnformatted(calls);
        messages[n] = (bmoe_chat_message){
            .role = cJSON_GetObjectItemCaseSensitive(m, "role")->valuestring,
            .content = content->valuestring,
            .content_length = strlen(content->valuestring),
            .tool_calls_json = texts[n],
            .tool_call_id = id ? id->valuestring : NULL,
            .name = name ? name->valuestring : NULL,
        };
        n++;
    }
    char *tools = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(context, "tools"));
    size_t source_length = 0;
    char *source = chat_test_load_template(file, &source_length);
    bmoe_error err = {0};
    chat_template *parsed = source ? chat_template_parse(source, source_length, &err) : NULL;
    CHECK_MSG(parsed != NULL, "%s: %s", file, err.message);
    char *out = NULL;
    size_t out_length = 0;
    if (parsed) {
        chat_model model = {parsed, source, source_length, "<|bos|>", "<|eos|>", true, false, false};
        bmoe_chat_params params = bmoe_chat_default_params();
        params.tools_json = tools;
        params.now_seconds = 1795996800; /* 2026-11-30, as make-tool-renders.py pins strftime_now */
        CHECK_MSG(chat_conversation_render(&model, messages, n, &params, 0, &out, &out_length, &err) == 0, "%s: %s",
                  file, err.message);
        CHECK_MSG(out && strcmp(out, expected) == 0, "%s (arguments as %s) renders\n%s\nnot\n%s", file,
                  as_text ? "text" : "an object", out ? out : "(nothing)", expected);
        /* the assistant turn's call, as the template wrote it, reads back */
        enum bmoe_tool_format format = chat_tool_format_decide(&model);
        if (format == BMOE_TOOL_FORMAT_HARMONY)
            check_harmony_read_back(file, out ? out : "");
        else
            check_tagged_read_back(file, format, out ? out : "");
        chat_template_destroy(parsed);
    }
    free(out);
    free(source);
    cJSON_free(tools);
    for (int i = 0; i < n; i++)
        cJSON_free(texts[i]);
}

static void check_renders(void)
{
    size_t length = 0;
    char *json = test_read_file(renders_path, &length);
    cJSON *records = json ? cJSON_Parse(json) : NULL;
    CHECK_MSG(cJSON_GetArraySize(records) == 6, "%s: %d records", renders_path, cJSON_GetArraySize(records));
    const cJSON *record;
    cJSON_ArrayForEach(record, records) {
        for (int as_text = 0; as_text < 2; as_text++)
            check_render(record, as_text);
    }
    cJSON_Delete(records);
    free(json);
}

/* text in format holds exactly one call, of name with arguments (JSON
 * text), and leaves content around it. */
static void check_one_call(enum bmoe_tool_format format, const char *text, const char *name, const char *arguments,
                           const char *content)
{
    char *kept = NULL;
    int32_t count = 0;
    cJSON *calls = calls_of(format, text, &kept, &count);
    char *printed = calls ? cJSON_PrintUnformatted(calls) : NULL;
    CHECK_MSG(count == 1 && is_call(calls, 0, name, arguments), "%s: %s", text, printed ? printed : "(none)");
    CHECK_MSG(kept && strcmp(kept, content) == 0, "%s: content \"%s\"", text, kept ? kept : "");
    cJSON_free(printed);
    cJSON_Delete(calls);
    bmoe_free(kept);
}

static void check_parse(void)
{
    char *content = NULL;
    int32_t count = 0;
    /* text, two calls, text between and after */
    cJSON *calls = calls_of(BMOE_TOOL_FORMAT_JSON,
                            "Checking.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": [1, 2]}}\n</tool_call>"
                            " and <tool_call>{\"name\":\"b\",\"arguments\":{}}</tool_call>\nDone.",
                            &content, &count);
    CHECK(count == 2 && is_call(calls, 0, "a", "{\"x\":[1,2]}") && is_call(calls, 1, "b", "{}"));
    CHECK_MSG(content && strcmp(content, "Checking.\n and \nDone.") == 0, "content \"%s\"", content ? content : "");
    cJSON_Delete(calls);
    bmoe_free(content);
    /* not a call (no name; not JSON) stays text; a call cut short still reads; string arguments kept */
    static const char not_calls[] = "<tool_call>{\"arguments\": {}}</tool_call><tool_call>oops</tool_call>";
    calls = calls_of(BMOE_TOOL_FORMAT_JSON, not_calls, &content, &count);
    CHECK(count == 0 && cJSON_GetArraySize(calls) == 0 && content && strcmp(content, not_calls) == 0);
    cJSON_Delete(calls);
    bmoe_free(content);
    check_one_call(BMOE_TOOL_FORMAT_JSON, "x<tool_call>\n{\"name\": \"c\", \"arguments\": \"{\\\"k\\\": 1}\"}\n", "c",
                   "{\"k\": 1}", "x");
    /* XML: typed values, a multi-line string, a value that is JSON text of a string stays the text */
    check_one_call(BMOE_TOOL_FORMAT_XML,
                   "<tool_call>\n<function=edit>\n<parameter=path>\na.c\n</parameter>\n<parameter=line>\n12\n"
                   "</parameter>\n<parameter=dry>\ntrue\n</parameter>\n<parameter=text>\nline one\nline two\n"
                   "</parameter>\n<parameter=quoted>\n\"q\"\n</parameter>\n</function>\n</tool_call>",
                   "edit",
                   "{\"path\":\"a.c\",\"line\":12,\"dry\":true,\"text\":\"line one\\nline two\","
                   "\"quoted\":\"\\\"q\\\"\"}",
                   "");
    /* a JSON call with more after its object is not a call */
    static const char trailing[] = "<tool_call>{\"name\": \"a\", \"arguments\": {}} and more</tool_call>";
    calls = calls_of(BMOE_TOOL_FORMAT_JSON, trailing, &content, &count);
    CHECK(count == 0 && content && strcmp(content, trailing) == 0);
    cJSON_Delete(calls);
    bmoe_free(content);
    /* XML values that only begin like JSON stay text: a count with a unit,
     * a date, a zip code with its leading zero, words after a literal */
    check_one_call(BMOE_TOOL_FORMAT_XML,
                   "<tool_call>\n<function=f>\n<parameter=a>\n3 apples\n</parameter>\n<parameter=b>\n2024-01-01\n"
                   "</parameter>\n<parameter=c>\n02134\n</parameter>\n<parameter=d>\ntrue story\n</parameter>\n"
                   "<parameter=e>\n-0.5e3\n</parameter>\n<parameter=f>\n[1, {\"k\": null}]\n</parameter>\n"
                   "</function>\n</tool_call>",
                   "f",
                   "{\"a\":\"3 apples\",\"b\":\"2024-01-01\",\"c\":\"02134\",\"d\":\"true story\",\"e\":-500,"
                   "\"f\":[1,{\"k\":null}]}",
                   "");
    /* GLM: a name, typed values, a string with newlines; a call with text
     * after its last pair, or a name of two lines, is not a call */
    check_one_call(BMOE_TOOL_FORMAT_GLM,
                   "ok <tool_call>edit\n<arg_key>path</arg_key>\n<arg_value>a.c</arg_value>\n"
                   "<arg_key>line</arg_key>\n<arg_value>12</arg_value>\n<arg_key>text</arg_key>\n"
                   "<arg_value>one\ntwo</arg_value>\n</tool_call>",
                   "edit", "{\"path\":\"a.c\",\"line\":12,\"text\":\"one\\ntwo\"}", "ok ");
    static const char *const not_glm[] = {
        "<tool_call>f\n<arg_key>a</arg_key><arg_value>1</arg_value> more</tool_call>",
        "<tool_call>f\ng\n<arg_key>a</arg_key><arg_value>1</arg_value></tool_call>",
        "<tool_call>f\n<arg_key>a</arg_key></tool_call>",
    };
    for (size_t i = 0; i < sizeof not_glm / sizeof not_glm[0]; i++) {
        calls = calls_of(BMOE_TOOL_FORMAT_GLM, not_glm[i], &content, &count);
        CHECK_MSG(count == 0 && content && strcmp(content, not_glm[i]) == 0, "%s read as a call", not_glm[i]);
        cJSON_Delete(calls);
        bmoe_free(content);
    }
    /* XML without a function, and a format that reads none: text */
    calls = calls_of(BMOE_TOOL_FORMAT_XML, "<tool_call>{\"name\":\"a\",\"arguments\":{}}</tool_call>", &content,
                     &count);
    CHECK(count == 0 && content && strstr(content, "<tool_call>"));
    cJSON_Delete(calls);
    bmoe_free(content);
    calls = calls_of(BMOE_TOOL_FORMAT_NONE, "<tool_call>{\"name\":\"a\",\"arguments\":{}}</tool_call>", &content,
                     &count);
    CHECK(count == 0 && content && strstr(content, "<tool_call>"));
    cJSON_Delete(calls);
    bmoe_free(content);
}

/* text fed to a split in pieces of `step` bytes (0: whole): what it shows
 * while fed, then at the end, and its calls' JSON. */
static void split_in_pieces(const char *text, size_t step, char *shown_fed, char *shown_end, char **calls,
                            int32_t *count)
{
    bmoe_tool_split *split = bmoe_tool_split_create(BMOE_TOOL_FORMAT_JSON, NULL);
    size_t length = strlen(text), fed = 0, used = 0;
    shown_fed[0] = shown_end[0] = '\0';
    while (split && fed < length) {
        size_t n = step == 0 || step > length - fed ? length - fed : step;
        const char *show;
        size_t show_length;
        CHECK(bmoe_tool_split_feed(split, text + fed, n, &show, &show_length, NULL) == 0);
        memcpy(shown_fed + used, show, show_length);
        used += show_length;
        shown_fed[used] = '\0';
        fed += n;
    }
    const char *rest = "";
    size_t rest_length = 0;
    *count = split ? bmoe_tool_split_finish(split, &rest, &rest_length, calls, NULL) : -1;
    memcpy(shown_end, rest, rest_length);
    shown_end[rest_length] = '\0';
    bmoe_tool_split_free(split);
}

static void check_split(void)
{
    static const char text[] = "Sure <to do>.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1}}\n</tool_call>"
                               "\nafter <tool";
    static const size_t steps[] = {0, 1, 2, 3, 5, 7, 11};
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        char fed[256], end[256], *calls = NULL;
        int32_t count = 0;
        split_in_pieces(text, steps[i], fed, end, &calls, &count);
        /* while fed: the text up to the call, never a byte of it */
        CHECK_MSG(strcmp(fed, "Sure <to do>.\n") == 0, "pieces of %zu: fed shows \"%s\"", steps[i], fed);
        /* at the end: the text after the call, the held "<tool" included */
        CHECK_MSG(strcmp(end, "\nafter <tool") == 0, "pieces of %zu: the end shows \"%s\"", steps[i], end);
        cJSON *parsed = calls ? cJSON_Parse(calls) : NULL;
        CHECK(count == 1 && is_call(parsed, 0, "a", "{\"x\":1}"));
        cJSON_Delete(parsed);
        bmoe_free(calls);
    }
    /* no call: everything shows while fed, except a last "<" that might open one */
    char fed[64], end[64], *calls = NULL;
    int32_t count = 0;
    split_in_pieces("a < b <", 1, fed, end, &calls, &count);
    CHECK(strcmp(fed, "a < b ") == 0 && strcmp(end, "<") == 0 && count == 0);
    bmoe_free(calls);
}

/* A harmony answer's text as the server reads it: generated (the model's
 * output after the generation prompt <|start|>assistant) through the
 * reasoning split, then the tool parser. Checks the calls' names and
 * arguments (exactly as written; NULL: no call), the content and the
 * reasoning. */
typedef struct harmony_case {
    const char *generated;
    const char *names[2], *arguments[2];
    const char *content, *reasoning;
} harmony_case;

#define HARMONY_PROMPT "<|start|>user<|message|>Weather in Paris?<|end|><|start|>assistant"

static void check_harmony_case(const harmony_case *c)
{
    char *reasoning = NULL, *content = NULL;
    char *answer = harmony_answer(HARMONY_PROMPT, c->generated, 0, &reasoning);
    int32_t count = -1;
    cJSON *calls = answer ? calls_of(BMOE_TOOL_FORMAT_HARMONY, answer, &content, &count) : NULL;
    int32_t want = (c->names[0] != NULL) + (c->names[1] != NULL);
    CHECK_MSG(count == want, "%s: %d calls, expected %d (answer \"%s\")", c->generated, count, want,
              answer ? answer : "");
    for (int i = 0; i < want && count == want; i++) {
        const cJSON *call = cJSON_GetArrayItem(calls, i);
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(call, "name");
        const cJSON *arguments = cJSON_GetObjectItemCaseSensitive(call, "arguments");
        CHECK_MSG(cJSON_IsString(name) && strcmp(name->valuestring, c->names[i]) == 0 && cJSON_IsString(arguments) &&
                      strcmp(arguments->valuestring, c->arguments[i]) == 0,
                  "%s: call %d is %s(%s)", c->generated, i, cJSON_IsString(name) ? name->valuestring : "?",
                  cJSON_IsString(arguments) ? arguments->valuestring : "?");
    }
    CHECK_MSG(content && strcmp(content, c->content) == 0, "%s: content \"%s\", expected \"%s\"", c->generated,
              content ? content : "", c->content);
    CHECK_MSG(reasoning && strcmp(reasoning, c->reasoning) == 0, "%s: reasoning \"%s\", expected \"%s\"",
              c->generated, reasoning ? reasoning : "", c->reasoning);
    cJSON_Delete(calls);
    bmoe_free(content);
    free(answer);
    free(reasoning);
}

/* What a harmony call looks like in an answer's text (harmony_call.h). */
#define SHAPE(name) "<|start|>assistant to=functions." name "<|channel|>commentary json<|message|>"

static void check_harmony_parse(void)
{
    static const harmony_case cases[] = {
        /* one call: recipient after the channel, <|constrain|>json; the
         * generation stops at <|call|> (end of generation: not in the text) */
        {"<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"location\":\"Paris\"}",
         {"get_weather"}, {"{\"location\":\"Paris\"}"}, "", ""},
        /* recipient after the role, before the channel; no <|constrain|>; <|call|> in the text */
        {" to=functions.get_weather<|channel|>commentary json<|message|>{\"location\": \"Paris\", \"unit\": \"c\"}"
         "<|call|>",
         {"get_weather"}, {"{\"location\": \"Paris\", \"unit\": \"c\"}"}, "", ""},
        /* recipient after the channel without <|constrain|>; whitespace around the JSON is not the arguments */
        {"<|channel|>commentary to=functions.get_weather<|message|> {\"location\":\n\"Paris\"}\n",
         {"get_weather"}, {"{\"location\":\n\"Paris\"}"}, "", ""},
        /* analysis, then the call */
        {"<|channel|>analysis<|message|>The user wants the weather.<|end|><|start|>assistant<|channel|>commentary "
         "to=functions.get_weather <|constrain|>json<|message|>{\"location\":\"Paris\"}<|call|>",
         {"get_weather"}, {"{\"location\":\"Paris\"}"}, "", "The user wants the weather."},
        /* two calls (a generation that goes past <|call|>) */
        {"<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"location\":\"Paris\"}"
         "<|call|><|start|>assistant<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{}"
         "<|call|>",
         {"get_weather", "get_time"}, {"{\"location\":\"Paris\"}", "{}"}, "", ""},
        /* a commentary preamble to the user (no recipient) is content */
        {"<|channel|>analysis<|message|>Look it up.<|end|><|start|>assistant<|channel|>commentary<|message|>"
         "Checking the weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather "
         "<|constrain|>json<|message|>{\"location\":\"Paris\"}",
         {"get_weather"}, {"{\"location\":\"Paris\"}"}, "Checking the weather.", "Look it up."},
        /* a call on the analysis channel is still a call: the recipient says so */
        {"<|channel|>analysis to=functions.get_weather <|constrain|>json<|message|>{\"location\":\"Paris\"}",
         {"get_weather"}, {"{\"location\":\"Paris\"}"}, "", ""},
        /* no call: the final answer */
        {"<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final<|message|>It is sunny."
         "<|return|>",
         {NULL}, {NULL}, "It is sunny.", "Easy."},
        /* arguments cut short (max_tokens), not JSON, or not an object: the call stays text, in its shape */
        {"<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"location\": \"Par",
         {NULL}, {NULL}, SHAPE("get_weather") "{\"location\": \"Par<|call|>", ""},
        {"<|channel|>commentary to=functions.get_weather<|message|>Paris please<|call|>",
         {NULL}, {NULL}, SHAPE("get_weather") "Paris please<|call|>", ""},
        {"<|channel|>commentary to=functions.get_weather<|message|>[\"Paris\"]<|call|>",
         {NULL}, {NULL}, SHAPE("get_weather") "[\"Paris\"]<|call|>", ""},
        /* a recipient that names no function is no call; a message to another tool stays its text */
        {"<|channel|>commentary to=functions. <|constrain|>json<|message|>{}<|call|>",
         {NULL}, {NULL}, SHAPE("") "{}<|call|>", ""},
        {"<|channel|>commentary to=browser.search<|message|>{\"query\":\"Paris\"}<|call|>",
         {NULL}, {NULL}, "{\"query\":\"Paris\"}", ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_harmony_case(&cases[i]);
    /* the shape read directly: text around it kept, a second shape without a name left as text */
    check_one_call(BMOE_TOOL_FORMAT_HARMONY, "Sure. " SHAPE("f") " {\"a\": [1, 2]} <|call|> done", "f",
                   "{\"a\":[1,2]}", "Sure.  done");
    char *content = NULL;
    int32_t count = 0;
    static const char nameless[] = "x" SHAPE("") "{}<|call|>y";
    cJSON *calls = calls_of(BMOE_TOOL_FORMAT_HARMONY, nameless, &content, &count);
    CHECK(count == 0 && content && strcmp(content, nameless) == 0);
    cJSON_Delete(calls);
    bmoe_free(content);
    /* a <tool_call> block is no harmony call */
    calls = calls_of(BMOE_TOOL_FORMAT_HARMONY, "<tool_call>{\"name\":\"a\",\"arguments\":{}}</tool_call>", &content,
                     &count);
    CHECK(count == 0 && content && strstr(content, "<tool_call>"));
    cJSON_Delete(calls);
    bmoe_free(content);
}

/* The model's output in pieces of step bytes through the reasoning split,
 * each delta's answer through a harmony tool split, as the server streams:
 * what shows while fed and at the end, the reasoning, the calls' JSON. */
static void harmony_stream(const char *generated, size_t step, char *shown_fed, char *shown_end, char *reasoning,
                           char **calls, int32_t *count)
{
    bmoe_reasoning *split = bmoe_reasoning_create(BMOE_REASONING_HARMONY, HARMONY_PROMPT,
                                                  strlen(HARMONY_PROMPT), NULL);
    bmoe_tool_split *tools = bmoe_tool_split_create(BMOE_TOOL_FORMAT_HARMONY, NULL);
    size_t length = strlen(generated), fed = 0, used = 0, thought = 0;
    shown_fed[0] = shown_end[0] = reasoning[0] = '\0';
    *count = -1;
    bool fine = split && tools;
    for (bool last = false; fine && !last;) {
        size_t n = step == 0 || step > length - fed ? length - fed : step;
        last = fed + n == length;
        bmoe_reasoning_delta delta, end;
        fine = bmoe_reasoning_feed(split, generated + fed, n, &delta, NULL) == 0 && !delta.reset;
        fed += n;
        const char *show;
        size_t show_length;
        for (int k = 0; fine && k < (last ? 2 : 1); k++) {
            if (k == 1)
                fine = bmoe_reasoning_finish(split, &end, NULL) == 0;
            const bmoe_reasoning_delta *d = k == 0 ? &delta : &end;
            fine = fine && bmoe_tool_split_feed(tools, d->text, d->text_length, &show, &show_length, NULL) == 0;
            if (!fine)
                break;
            memcpy(shown_fed + used, show, show_length);
            shown_fed[used += show_length] = '\0';
            memcpy(reasoning + thought, d->reasoning, d->reasoning_length);
            reasoning[thought += d->reasoning_length] = '\0';
        }
    }
    CHECK_MSG(fine, "pieces of %zu: the splits failed", step);
    const char *rest = "";
    size_t rest_length = 0;
    if (fine)
        *count = bmoe_tool_split_finish(tools, &rest, &rest_length, calls, NULL);
    memcpy(shown_end, rest, rest_length);
    shown_end[rest_length] = '\0';
    bmoe_tool_split_free(tools);
    bmoe_reasoning_free(split);
}

static void check_harmony_split(void)
{
    static const char generated[] =
        "<|channel|>analysis<|message|>Look it up.<|end|><|start|>assistant<|channel|>commentary<|message|>"
        "Checking <the> weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather "
        "<|constrain|>json<|message|>{\"location\":\"Paris\"}";
    static const size_t steps[] = {0, 1, 2, 3, 5, 7, 11, 64};
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        char fed[512], end[512], reasoning[512], *calls = NULL;
        int32_t count = 0;
        harmony_stream(generated, steps[i], fed, end, reasoning, &calls, &count);
        /* while fed: the preamble, never a byte of the call */
        CHECK_MSG(strcmp(fed, "Checking <the> weather.") == 0, "pieces of %zu: fed shows \"%s\"", steps[i], fed);
        CHECK_MSG(end[0] == '\0', "pieces of %zu: the end shows \"%s\"", steps[i], end);
        CHECK_MSG(strcmp(reasoning, "Look it up.") == 0, "pieces of %zu: reasoning \"%s\"", steps[i], reasoning);
        cJSON *parsed = calls ? cJSON_Parse(calls) : NULL;
        const cJSON *arguments = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(parsed, 0), "arguments");
        CHECK_MSG(count == 1 && is_call(parsed, 0, "get_weather", "{\"location\":\"Paris\"}") &&
                      strcmp(arguments->valuestring, "{\"location\":\"Paris\"}") == 0,
                  "pieces of %zu: calls %s", steps[i], calls ? calls : "(none)");
        cJSON_Delete(parsed);
        bmoe_free(calls);
    }
    /* a call whose arguments are cut short: the shape held back while fed comes out as text at the end */
    char fed[512], end[512], reasoning[512], *calls = NULL;
    int32_t count = 0;
    harmony_stream("<|channel|>commentary to=functions.f<|message|>{\"a\":", 3, fed, end, reasoning, &calls, &count);
    CHECK_MSG(count == 0 && fed[0] == '\0' && strcmp(end, SHAPE("f") "{\"a\":<|call|>") == 0, "cut short: \"%s\"",
              end);
    bmoe_free(calls);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_tool_calls TOOL-RENDERS.json\n");
        return 2;
    }
    renders_path = argv[1];
    check_formats();
    check_renders();
    check_parse();
    check_split();
    check_harmony_parse();
    check_harmony_split();
    return test_finish();
}
