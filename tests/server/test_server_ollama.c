/* bmoe-server's Ollama API end to end on a generated model with a chat
 * template: /api/chat answers what /v1/chat/completions answers for the
 * same greedy request, streamed as NDJSON pieces that join to the same
 * text and end with done, done_reason and the counts; /api/generate raw
 * answers as /v1/completions and templated as /api/chat; the options map
 * (num_predict, stop, seed, num_ctx); format holds the answer to JSON;
 * every refusal is Ollama's {"error": "..."} with its status; /api/tags,
 * /api/ps, /api/show and /api/version describe the one model. */
#include <cjson/cJSON.h>
#include <sys/stat.h>

#include "server_client.h"

static char model[1200];

static const char hello_chat[] = "\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}]";

static cJSON *post_json(int port, const char *path, const char *body, int *status)
{
    test_response response;
    cJSON *root = NULL;
    *status = -1;
    if (test_request(port, "POST", path, NULL, body, &response) == 0) {
        *status = response.status;
        root = cJSON_Parse(response.body);
    }
    free(response.raw);
    return root;
}

/* The text of root's field first (of its field second, when not NULL), malloc'ed. */
static char *text_at(const cJSON *root, const char *first, const char *second)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(root, first);
    if (second)
        item = cJSON_GetObjectItemCaseSensitive(item, second);
    return cJSON_IsString(item) ? strdup(item->valuestring) : NULL;
}

static double number_at(const cJSON *root, const char *key)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(root, key);
    return cJSON_IsNumber(item) ? item->valuedouble : -1;
}

/* The final fields every Ollama answer ends with. */
static void check_final(const cJSON *root, const char *reason, const char *what)
{
    const cJSON *reason_item = cJSON_GetObjectItemCaseSensitive(root, "done_reason");
    CHECK_MSG(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "done")) && cJSON_IsString(reason_item) &&
                  (!reason || strcmp(reason_item->valuestring, reason) == 0),
              "%s: done/done_reason", what);
    static const char *const counts[] = {"total_duration", "load_duration", "prompt_eval_count",
                                         "prompt_eval_duration", "eval_count", "eval_duration"};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
        CHECK_MSG(number_at(root, counts[i]) >= 0, "%s: no %s", what, counts[i]);
    CHECK_MSG(number_at(root, "prompt_eval_count") > 0 && number_at(root, "total_duration") > 0, "%s: counts", what);
    const cJSON *created = cJSON_GetObjectItemCaseSensitive(root, "created_at");
    CHECK_MSG(cJSON_IsString(created) && strlen(created->valuestring) >= 20 && created->valuestring[10] == 'T' &&
                  created->valuestring[strlen(created->valuestring) - 1] == 'Z',
              "%s: created_at", what);
}

/* A non-streamed answer's text (message.content on /api/chat, response on
 * /api/generate), after checking its end; *root_out keeps the body. */
static char *answer(int port, const char *path, const char *body, const char *reason, cJSON **root_out)
{
    int status;
    cJSON *root = post_json(port, path, body, &status);
    bool chat = strcmp(path, "/api/chat") == 0;
    char *text = chat ? text_at(root, "message", "content") : text_at(root, "response", NULL);
    CHECK_MSG(status == 200 && text, "%s %s: %d", path, body, status);
    if (root)
        check_final(root, reason, body);
    if (root_out)
        *root_out = root;
    else
        cJSON_Delete(root);
    return text;
}

/* The OpenAI endpoints' text for the same request. */
static char *openai_text(int port, const char *path, const char *body)
{
    int status;
    cJSON *root = post_json(port, path, body, &status);
    const cJSON *choice = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "choices"), 0);
    char *text = strcmp(path, "/v1/chat/completions") == 0 ? text_at(choice, "message", "content")
                                                           : text_at(choice, "text", NULL);
    CHECK_MSG(status == 200 && text, "%s: %d", path, status);
    cJSON_Delete(root);
    return text;
}

/* A streamed answer: the pieces' texts joined, after checking the lines
 * (NDJSON, done false until the last, which has the counts). */
static char *streamed(int port, const char *path, const char *body, const char *reason)
{
    test_response response;
    if (test_request(port, "POST", path, NULL, body, &response) != 0) {
        CHECK(false);
        return NULL;
    }
    CHECK_MSG(response.status == 200 && strstr(response.raw, "Content-Type: application/x-ndjson"), "%.300s",
              response.raw);
    char *lines = (char *)response.body;
    CHECK_MSG(test_dechunk(lines) >= 0, "the stream's chunked body does not decode");
    CHECK_MSG(lines[0] && lines[strlen(lines) - 1] == '\n', "the stream does not end its last line");
    bool chat = strcmp(path, "/api/chat") == 0;
    size_t capacity = strlen(lines) + 1, used = 0;
    char *text = calloc(capacity, 1);
    int n = 0;
    bool done = false;
    for (char *line = strtok(lines, "\n"); text && line; line = strtok(NULL, "\n"), n++) {
        cJSON *piece = cJSON_Parse(line);
        CHECK_MSG(piece && !done, "line %d: %s", n, line);
        const cJSON *holder = chat ? cJSON_GetObjectItemCaseSensitive(piece, "message") : piece;
        const cJSON *part = cJSON_GetObjectItemCaseSensitive(holder, chat ? "content" : "response");
        CHECK_MSG(cJSON_IsString(part), "line %d has no text: %s", n, line);
        if (chat)
            CHECK(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(holder, "role")));
        if (cJSON_IsString(part)) {
            size_t length = strlen(part->valuestring);
            if (used + length < capacity) {
                memcpy(text + used, part->valuestring, length);
                used += length;
            }
        }
        done = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(piece, "done"));
        if (done)
            check_final(piece, reason, "the stream's last line");
        cJSON_Delete(piece);
    }
    CHECK_MSG(done && n > 1, "the stream did not end with done: true (%d lines)", n);
    free(response.raw);
    return text;
}

static void check_same(const char *got, const char *expected, const char *what)
{
    CHECK_MSG(got && expected && strcmp(got, expected) == 0, "%s: \"%s\" != \"%s\"", what, got ? got : "(none)",
              expected ? expected : "(none)");
}

static void test_chat(int port)
{
    char body[512];
    snprintf(body, sizeof body, "{%s,\"max_tokens\":16,\"temperature\":0}", hello_chat);
    char *openai = openai_text(port, "/v1/chat/completions", body);
    cJSON *root = NULL;
    snprintf(body, sizeof body,
             "{\"model\":\"tiny:latest\",%s,\"stream\":false,\"keep_alive\":\"5m\","
             "\"options\":{\"num_predict\":16,\"temperature\":0,\"num_thread\":8}}",
             hello_chat);
    char *whole = answer(port, "/api/chat", body, "length", &root);
    check_same(whole, openai, "/api/chat != /v1/chat/completions");
    CHECK_MSG(number_at(root, "eval_count") == 16, "eval_count %g", number_at(root, "eval_count"));
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "message"), "role");
    CHECK(cJSON_IsString(role) && strcmp(role->valuestring, "assistant") == 0);
    cJSON_Delete(root);
    /* stream defaults to true */
    snprintf(body, sizeof body, "{\"model\":\"tiny.gguf\",%s,\"options\":{\"num_predict\":16,\"temperature\":0}}",
             hello_chat);
    char *pieces = streamed(port, "/api/chat", body, "length");
    check_same(pieces, whole, "streamed /api/chat");
    free(pieces);
    /* think false answers as enable_thinking false */
    snprintf(body, sizeof body,
             "{%s,\"max_tokens\":16,\"chat_template_kwargs\":{\"enable_thinking\":false}}", hello_chat);
    char *unthinking = openai_text(port, "/v1/chat/completions", body);
    snprintf(body, sizeof body, "{%s,\"stream\":false,\"think\":false,\"options\":{\"num_predict\":16}}", hello_chat);
    char *off = answer(port, "/api/chat", body, NULL, NULL);
    check_same(off, unthinking, "think false");
    CHECK_MSG(off && whole && strcmp(off, whole) != 0, "think false answered as thinking does");
    free(off);
    free(unthinking);
    free(whole);
    free(openai);
    /* messages [] or no prompt: Ollama's "load" */
    int status;
    root = post_json(port, "/api/chat", "{\"model\":\"tiny\",\"messages\":[]}", &status);
    const cJSON *reason = cJSON_GetObjectItemCaseSensitive(root, "done_reason");
    CHECK_MSG(status == 200 && cJSON_IsString(reason) && strcmp(reason->valuestring, "load") == 0, "load: %d", status);
    cJSON_Delete(root);
    /* tools reach the template, an assistant's earlier call with object arguments too */
    static const char tools[] =
        "{\"stream\":false,\"options\":{\"num_predict\":4},\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"},"
        "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"function\":{\"name\":\"weather\","
        "\"arguments\":{\"city\":\"Paris\"}}}]},{\"role\":\"tool\",\"content\":\"sunny\",\"tool_name\":\"weather\"}],"
        "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"weather\",\"description\":\"the weather\","
        "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}}}}]}";
    root = NULL;
    char *with_tools = answer(port, "/api/chat", tools, NULL, &root);
    double prompt_tokens = number_at(root, "prompt_eval_count");
    CHECK_MSG(prompt_tokens > 60, "tools: %g prompt tokens", prompt_tokens);
    free(with_tools);
    cJSON_Delete(root);
}

static void test_generate(int port)
{
    char *openai =
        openai_text(port, "/v1/completions", "{\"prompt\":\"Once upon\",\"max_tokens\":8,\"temperature\":0}");
    char *raw = answer(port, "/api/generate",
                       "{\"model\":\"tiny\",\"prompt\":\"Once upon\",\"raw\":true,\"stream\":false,"
                       "\"options\":{\"num_predict\":8,\"temperature\":0}}",
                       "length", NULL);
    check_same(raw, openai, "/api/generate raw != /v1/completions");
    char *raw_pieces = streamed(port, "/api/generate",
                                "{\"prompt\":\"Once upon\",\"raw\":true,\"options\":{\"num_predict\":8}}", "length");
    check_same(raw_pieces, raw, "streamed /api/generate raw");
    /* templated: the prompt is a user message after the system one */
    char *chat = answer(port, "/api/chat",
                        "{\"stream\":false,\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
                        "{\"role\":\"user\",\"content\":\"Hello\"}],\"options\":{\"num_predict\":12}}",
                        NULL, NULL);
    char *templated = answer(port, "/api/generate",
                             "{\"prompt\":\"Hello\",\"system\":\"Be brief.\",\"stream\":false,"
                             "\"options\":{\"num_predict\":12},\"images\":[],\"suffix\":\"\"}",
                             NULL, NULL);
    check_same(templated, chat, "/api/generate with system != /api/chat");
    char *templated_pieces =
        streamed(port, "/api/generate",
                 "{\"prompt\":\"Hello\",\"system\":\"Be brief.\",\"options\":{\"num_predict\":12}}", NULL);
    check_same(templated_pieces, templated, "streamed /api/generate");
    CHECK_MSG(raw && templated && strcmp(raw, templated) != 0, "raw and templated answered alike");
    free(templated_pieces);
    free(templated);
    free(chat);
    free(raw_pieces);
    free(raw);
    free(openai);
    int status;
    cJSON *root = post_json(port, "/api/generate", "{\"model\":\"tiny\",\"prompt\":\"\"}", &status);
    const cJSON *reason = cJSON_GetObjectItemCaseSensitive(root, "done_reason");
    CHECK_MSG(status == 200 && cJSON_IsString(reason) && strcmp(reason->valuestring, "load") == 0, "load: %d", status);
    cJSON_Delete(root);
}

static void test_options(int port)
{
    char body[512];
    cJSON *root = NULL;
    snprintf(body, sizeof body, "{%s,\"stream\":false,\"options\":{\"num_predict\":3}}", hello_chat);
    char *short_answer = answer(port, "/api/chat", body, "length", &root);
    CHECK_MSG(number_at(root, "eval_count") == 3, "num_predict 3: eval_count %g", number_at(root, "eval_count"));
    int n_prompt = (int)number_at(root, "prompt_eval_count");
    cJSON_Delete(root);
    free(short_answer);
    /* a stop string: the answer ends before its first letter after the start */
    snprintf(body, sizeof body, "{%s,\"stream\":false,\"options\":{\"num_predict\":16}}", hello_chat);
    char *full = answer(port, "/api/chat", body, NULL, NULL);
    size_t at = 2;
    while (full && full[at] && !((full[at] | 32) >= 'a' && (full[at] | 32) <= 'z'))
        at++;
    if (full && full[at]) {
        char stop[2] = {full[at], '\0'};
        snprintf(body, sizeof body, "{%s,\"stream\":false,\"options\":{\"num_predict\":16,\"stop\":[\"%s\"]}}",
                 hello_chat, stop);
        char *stopped = answer(port, "/api/chat", body, "stop", NULL);
        size_t before = (size_t)(strchr(full, stop[0]) - full);
        CHECK_MSG(stopped && strlen(stopped) == before && strncmp(stopped, full, before) == 0,
                  "stop \"%s\": \"%s\" of \"%s\"", stop, stopped ? stopped : "(none)", full);
        free(stopped);
    } else {
        CHECK_MSG(false, "no letter in the answer to stop at: \"%s\"", full ? full : "(none)");
    }
    free(full);
    /* a seed makes a sampled answer reproducible */
    snprintf(body, sizeof body,
             "{%s,\"stream\":false,\"options\":{\"num_predict\":12,\"temperature\":1.0,\"top_k\":0,\"seed\":42}}",
             hello_chat);
    char *first = answer(port, "/api/chat", body, NULL, NULL);
    char *second = answer(port, "/api/chat", body, NULL, NULL);
    check_same(second, first, "the same seed");
    free(first);
    free(second);
    /* num_ctx smaller than the server's: the answer ends where it would fill it; a prompt past it is refused */
    snprintf(body, sizeof body, "{%s,\"stream\":false,\"options\":{\"num_ctx\":%d}}", hello_chat, n_prompt + 2);
    root = NULL;
    free(answer(port, "/api/chat", body, "length", &root));
    CHECK_MSG(number_at(root, "eval_count") == 2, "num_ctx: eval_count %g", number_at(root, "eval_count"));
    cJSON_Delete(root);
    int status;
    snprintf(body, sizeof body, "{%s,\"options\":{\"num_ctx\":%d}}", hello_chat, n_prompt - 1);
    root = post_json(port, "/api/chat", body, &status);
    CHECK_MSG(status == 400 && cJSON_IsString(cJSON_GetObjectItemCaseSensitive(root, "error")), "num_ctx: %d", status);
    cJSON_Delete(root);
}

#define SCHEMA "{\"type\":\"object\",\"properties\":{\"ok\":{\"type\":\"boolean\"},\"color\":{\"enum\":[\"red\"," \
               "\"green\"]}},\"required\":[\"ok\",\"color\"]}"

static void test_format(int port)
{
    char body[512];
    snprintf(body, sizeof body, "{%s,\"stream\":false,\"format\":" SCHEMA ",\"options\":{\"num_predict\":64}}",
             hello_chat);
    char *text = answer(port, "/api/chat", body, "stop", NULL);
    cJSON *value = text ? cJSON_Parse(text) : NULL;
    const cJSON *color = cJSON_GetObjectItemCaseSensitive(value, "color");
    CHECK_MSG(cJSON_IsObject(value) && cJSON_IsBool(cJSON_GetObjectItemCaseSensitive(value, "ok")) &&
                  cJSON_IsString(color),
              "format schema: \"%s\"", text ? text : "(none)");
    snprintf(body, sizeof body, "{%s,\"format\":" SCHEMA ",\"options\":{\"num_predict\":64}}", hello_chat);
    char *pieces = streamed(port, "/api/chat", body, "stop");
    check_same(pieces, text, "streamed format schema");
    free(pieces);
    cJSON_Delete(value);
    free(text);
    text = answer(port, "/api/generate",
                  "{\"prompt\":\"a\",\"raw\":true,\"format\":\"json\",\"stream\":false,"
                  "\"options\":{\"num_predict\":8}}",
                  NULL, NULL);
    CHECK_MSG(text && text[0] == '{', "format json: \"%s\"", text ? text : "(none)");
    free(text);
}

/* status and Ollama's error shape: one "error" string, whose text holds word. */
static void check_refused(int port, const char *method, const char *path, const char *body, int status,
                          const char *word)
{
    test_response response;
    if (test_request(port, method, path, NULL, body, &response) != 0) {
        CHECK(false);
        return;
    }
    cJSON *root = cJSON_Parse(response.body);
    const cJSON *error = cJSON_GetObjectItemCaseSensitive(root, "error");
    CHECK_MSG(response.status == status && cJSON_IsString(error) && cJSON_GetArraySize(root) == 1 &&
                  (!word || strstr(error->valuestring, word)),
              "%s %s: %d %s (expected %d, \"%s\")", path, body ? body : "", response.status,
              response.body ? response.body : "", status, word ? word : "");
    cJSON_Delete(root);
    free(response.raw);
}

static void test_refusals(int port)
{
    static const struct {
        const char *path, *body;
        int status;
        const char *word;
    } cases[] = {
        {"/api/chat", "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"options\":{\"mirostat\":2}}", 400,
         "options.mirostat"},
        {"/api/chat", "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"options\":{\"temperature\":\"hot\"}}",
         400, "options.temperature"},
        {"/api/chat", "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"options\":{\"num_predict\":0}}", 400,
         "options.num_predict"},
        {"/api/chat", "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"options\":[]}", 400, "options"},
        {"/api/chat", "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"stream\":\"yes\"}", 400, "stream"},
        {"/api/chat", "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"format\":\"xml\"}", 400, "format"},
        {"/api/chat", "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"think\":\"max\"}", 400, "think"},
        {"/api/chat", "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"logprobs\":true}", 400, "logprobs"},
        {"/api/chat", "{\"messages\":[{\"role\":\"user\",\"content\":\"a\",\"images\":[\"aGk=\"]}]}", 400, "images"},
        {"/api/chat", "{\"messages\":[{\"role\":\"user\",\"content\":7}]}", 400, "content"},
        {"/api/chat", "{\"messages\":{}}", 400, "messages"},
        {"/api/chat", "{\"model\":\"llama3\",\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}", 404, "llama3"},
        {"/api/chat", "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"stream\":false,\"stream\":true}", 400,
         "twice"},
        {"/api/chat", "{\"messages\":", 400, "JSON"},
        {"/api/generate", "{\"prompt\":\"a\",\"suffix\":\"b\"}", 400, "suffix"},
        {"/api/generate", "{\"prompt\":\"a\",\"context\":[1,2,3]}", 400, "context"},
        {"/api/generate", "{\"prompt\":\"a\",\"template\":\"{{ .Prompt }}\"}", 400, "template"},
        {"/api/generate", "{\"prompt\":\"a\",\"images\":[\"aGk=\"]}", 400, "images"},
        {"/api/generate", "{\"prompt\":\"a\",\"raw\":true,\"system\":\"b\"}", 400, "system"},
        {"/api/generate", "{\"prompt\":\"a\",\"raw\":true,\"think\":false}", 400, "think"},
        {"/api/generate", "{\"prompt\":5}", 400, "prompt"},
        {"/api/generate", "{\"prompt\":\"a\",\"messages\":[]}", 400, "messages"},
        {"/api/show", "{\"model\":\"llama3\"}", 404, "llama3"},
        {"/api/show", "{}", 400, "model"},
        {"/api/show", "{\"model\":\"tiny\",\"extra\":1}", 400, "extra"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_refused(port, "POST", cases[i].path, cases[i].body, cases[i].status, cases[i].word);
    check_refused(port, "GET", "/api/chat", NULL, 405, "POST");
    check_refused(port, "POST", "/api/tags", "{}", 405, "GET");
}

static void test_models(int port)
{
    test_response response;
    if (test_request(port, "GET", "/api/tags", NULL, NULL, &response) == 0) {
        cJSON *root = cJSON_Parse(response.body);
        const cJSON *models = cJSON_GetObjectItemCaseSensitive(root, "models");
        const cJSON *entry = cJSON_GetArrayItem(models, 0);
        const cJSON *details = cJSON_GetObjectItemCaseSensitive(entry, "details");
        char *name = text_at(entry, "name", NULL), *format = text_at(details, "format", NULL);
        char *family = text_at(details, "family", NULL), *modified = text_at(entry, "modified_at", NULL);
        CHECK_MSG(response.status == 200 && cJSON_GetArraySize(models) == 1 && name && !strcmp(name, "tiny.gguf") &&
                      format && !strcmp(format, "gguf") && family && !strcmp(family, "qwen3moe") && modified &&
                      number_at(entry, "size") > 0,
                  "/api/tags: %s", response.body);
        free(name);
        free(format);
        free(family);
        free(modified);
        cJSON_Delete(root);
    }
    free(response.raw);
    if (test_request(port, "GET", "/api/ps", NULL, NULL, &response) == 0) {
        cJSON *root = cJSON_Parse(response.body);
        const cJSON *entry = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "models"), 0);
        CHECK_MSG(response.status == 200 && number_at(entry, "context_length") > 0 &&
                      cJSON_IsString(cJSON_GetObjectItemCaseSensitive(entry, "expires_at")),
                  "/api/ps: %s", response.body);
        cJSON_Delete(root);
    }
    free(response.raw);
    if (test_request(port, "GET", "/api/version", NULL, NULL, &response) == 0) {
        cJSON *root = cJSON_Parse(response.body);
        const cJSON *version = cJSON_GetObjectItemCaseSensitive(root, "version");
        CHECK_MSG(response.status == 200 && cJSON_IsString(version) && version->valuestring[0], "/api/version: %s",
                  response.body);
        cJSON_Delete(root);
    }
    free(response.raw);
    int status;
    cJSON *root = post_json(port, "/api/show", "{\"model\":\"tiny:latest\",\"verbose\":true}", &status);
    const cJSON *capabilities = cJSON_GetObjectItemCaseSensitive(root, "capabilities");
    const cJSON *info = cJSON_GetObjectItemCaseSensitive(root, "model_info");
    char *template_text = text_at(root, "template", NULL), *format = text_at(root, "details", "format");
    bool completion = false, tools = false, thinking = false;
    const cJSON *capability;
    cJSON_ArrayForEach(capability, capabilities) {
        completion |= cJSON_IsString(capability) && !strcmp(capability->valuestring, "completion");
        tools |= cJSON_IsString(capability) && !strcmp(capability->valuestring, "tools");
        thinking |= cJSON_IsString(capability) && !strcmp(capability->valuestring, "thinking");
    }
    CHECK_MSG(status == 200 && template_text && strstr(template_text, "im_start") && format &&
                  !strcmp(format, "gguf") && completion && tools && thinking &&
                  number_at(info, "qwen3moe.context_length") > 0 &&
                  cJSON_IsString(cJSON_GetObjectItemCaseSensitive(root, "parameters")),
              "/api/show: %d", status);
    free(template_text);
    free(format);
    cJSON_Delete(root);
}

/* The API key guards /api as it guards /v1, the refusal in Ollama's shape. */
static void test_api_key(void)
{
    test_server server;
    const char *args[] = {"-m", model, "-t", "1", "--api-key", "sesame", NULL};
    if (test_server_start(&server, args) != 0) {
        CHECK_MSG(false, "the server with a key did not start");
        return;
    }
    check_refused(server.port, "GET", "/api/tags", NULL, 401, "API key");
    test_response response;
    if (test_request(server.port, "GET", "/api/tags", "Authorization: Bearer sesame\r\n", NULL, &response) == 0)
        CHECK(response.status == 200);
    free(response.raw);
    CHECK(test_server_stop(&server, SIGTERM) == 0);
}

int main(void)
{
    test_server server;
    if (test_tiny_server("server-ollama", model, sizeof model, &server) != 0)
        return test_finish();
    test_chat(server.port);
    test_generate(server.port);
    test_options(server.port);
    test_format(server.port);
    test_refusals(server.port);
    test_models(server.port);
    CHECK_MSG(test_server_stop(&server, SIGTERM) == 0, "SIGTERM did not end the server with status 0");
    test_api_key();
    return test_finish();
}
