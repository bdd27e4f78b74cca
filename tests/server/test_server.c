/* bmoe-server end to end on a generated model with a chat template: the
 * flags (strict, through the parameter table), the read-only endpoints, a
 * greedy chat completion equal byte for byte to bmoe-cli --chat's text, a
 * second turn that reuses the cached prefix and still answers what a fresh
 * server answers, every refusal with its status and OpenAI-shaped body
 * (400 naming the field, 401, 403, 413, 429), cancel, and SIGTERM's clean
 * exit; reasoning effort per request; a gpt-oss server's sliding-window
 * checkpoint reusing the last prompt after a long answer. */
#include <cjson/cJSON.h>
#include <pthread.h>
#include <sys/stat.h>

#include "server_client.h"

#define N_PREDICT "16"

static char tmp[1024], model[1200];

/* The body as JSON (NULL when it is not). */
static cJSON *body_json(const test_response *response)
{
    return response->body ? cJSON_Parse(response->body) : NULL;
}

/* An OpenAI-shaped error with this status and param (NULL: any). */
static void check_error(const test_response *response, int status, const char *param, const char *what)
{
    CHECK_MSG(response->status == status, "%s: status %d, expected %d (%s)", what, response->status, status,
              response->body ? response->body : "");
    cJSON *root = body_json(response);
    const cJSON *error = cJSON_GetObjectItemCaseSensitive(root, "error");
    const cJSON *message = cJSON_GetObjectItemCaseSensitive(error, "message");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(error, "type");
    const cJSON *named = cJSON_GetObjectItemCaseSensitive(error, "param");
    CHECK_MSG(cJSON_IsString(message) && cJSON_IsString(type) && named &&
                  cJSON_HasObjectItem(error, "code"),
              "%s: not an OpenAI error body: %s", what, response->body ? response->body : "");
    if (param)
        CHECK_MSG(cJSON_IsString(named) && strcmp(named->valuestring, param) == 0, "%s: param is not %s: %s", what,
                  param, response->body ? response->body : "");
    cJSON_Delete(root);
}

/* POSTs body to path and checks the error reply: status, the param it
 * names (NULL: none checked), what for the message. */
static void check_refused(int port, const char *path, const char *body, int status, const char *param,
                          const char *what)
{
    test_response response;
    if (test_request(port, "POST", path, NULL, body, &response) == 0)
        check_error(&response, status, param, what);
    free(response.raw);
}

/* A chat request refused with 400 naming param, its message saying word. */
static void check_chat_refused(int port, const char *body, const char *param, const char *word)
{
    test_response response;
    if (test_request(port, "POST", "/v1/chat/completions", NULL, body, &response) == 0) {
        check_error(&response, 400, param, body);
        CHECK_MSG(response.body && strstr(response.body, word), "%s: %s", body, response.body ? response.body : "");
    }
    free(response.raw);
}

/* choices[0].message.content (or .text) of a completion, malloc'ed; NULL when absent. */
static char *answer_of(const test_response *response, bool chat, int *n_reused)
{
    cJSON *root = body_json(response);
    const cJSON *choice = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "choices"), 0);
    const cJSON *text = chat ? cJSON_GetObjectItemCaseSensitive(
                                   cJSON_GetObjectItemCaseSensitive(choice, "message"), "content")
                             : cJSON_GetObjectItemCaseSensitive(choice, "text");
    const cJSON *reused = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "bmoe"), "n_reused");
    if (n_reused)
        *n_reused = cJSON_IsNumber(reused) ? reused->valueint : -1;
    char *out = cJSON_IsString(text) ? strdup(text->valuestring) : NULL;
    cJSON_Delete(root);
    return out;
}

static void test_flags(void)
{
    char binary[1100];
    snprintf(binary, sizeof binary, "%s/bmoe-server", BMOE_BIN_DIR);
    const char *unknown[] = {binary, "--bogus", NULL}, *cli_only[] = {binary, "-m", model, "-p", "hi", NULL},
               *help[] = {binary, "--help", NULL};
    cli_result r;
    if (cli_spawn(unknown, &r) == 0) {
        CHECK(r.exit_code == 1 && strstr(r.err, "unknown flag '--bogus'") && strchr(r.err, '\n') == strrchr(r.err, '\n'));
        cli_result_free(&r);
    }
    if (cli_spawn(cli_only, &r) == 0) {
        CHECK(r.exit_code == 1 && strstr(r.err, "-p is bmoe-cli's"));
        cli_result_free(&r);
    }
    if (cli_spawn(help, &r) == 0) {
        CHECK(r.exit_code == 0 && strstr(r.out, "--port N") && strstr(r.out, "--api-key KEY") &&
              strstr(r.out, "--cache-mb") && !strstr(r.out, "--prompt") && strstr(r.out, "--ngram") &&
              !strstr(r.out, "--draft-replay FILE"));
        cli_result_free(&r);
    }
    /* drafting: the shared rules, and --mtp refused before the server listens (the model has no nextn block) */
    const char *draft_alone[] = {binary, "-m", model, "--draft", "2", NULL},
               *draft_nine[] = {binary, "-m", model, "--ngram", "--draft", "9", NULL},
               *mtp[] = {binary, "-m", model, "--port", "0", "--mtp", NULL},
               *floor_ngram[] = {binary, "-m", model, "--ngram", "--mtp-p-min", "0.5", NULL};
    if (cli_spawn(floor_ngram, &r) == 0) {
        CHECK_MSG(r.exit_code == 2 && strstr(r.err, "--ngram drafts without"), "%s", r.err);
        cli_result_free(&r);
    }
    if (cli_spawn(draft_alone, &r) == 0) {
        CHECK_MSG(r.exit_code == 1 && strstr(r.err, "--draft needs a draft source"), "%s", r.err);
        cli_result_free(&r);
    }
    if (cli_spawn(draft_nine, &r) == 0) {
        CHECK_MSG(r.exit_code == 1 && strstr(r.err, "out of range [1, 8]"), "%s", r.err);
        cli_result_free(&r);
    }
    if (cli_spawn(mtp, &r) == 0) {
        CHECK_MSG(r.exit_code == 1 && strstr(r.err, "--mtp: ") && strstr(r.err, "nextn") &&
                      strchr(r.err, '\n') == strrchr(r.err, '\n') && !strstr(r.err, "listening"),
                  "%s", r.err);
        cli_result_free(&r);
    }
    /* a reasoning effort the model's template does not read: refused before the server listens */
    const char *effort[] = {binary, "-m", model, "--port", "0", "--reasoning-effort", "low", NULL},
               *bad_effort[] = {binary, "-m", model, "--reasoning-effort", "extreme", NULL};
    if (cli_spawn(effort, &r) == 0) {
        CHECK_MSG(r.exit_code == 1 && strstr(r.err, "--reasoning-effort: ") &&
                      strstr(r.err, "does not read reasoning_effort") && strchr(r.err, '\n') == strrchr(r.err, '\n') &&
                      !strstr(r.err, "listening"),
                  "%s", r.err);
        cli_result_free(&r);
    }
    if (cli_spawn(bad_effort, &r) == 0) {
        CHECK_MSG(r.exit_code == 1 && strstr(r.err, "'extreme'"), "%s", r.err);
        cli_result_free(&r);
    }
}

static void test_read_only(int port)
{
    test_response response;
    if (test_request(port, "GET", "/health", NULL, NULL, &response) == 0)
        CHECK(response.status == 200 && strstr(response.body, "\"ok\""));
    free(response.raw);
    if (test_request(port, "GET", "/v1/models", NULL, NULL, &response) == 0)
        CHECK(response.status == 200 && strstr(response.body, "\"object\":\"list\"") &&
              strstr(response.body, "\"id\":\"tiny.gguf\""));
    free(response.raw);
    if (test_request(port, "GET", "/api/info", NULL, NULL, &response) == 0)
        CHECK(response.status == 200 && strstr(response.body, "\"architecture\":\"qwen3moe\"") &&
              strstr(response.body, "\"cache_budget_mib\""));
    free(response.raw);
    if (test_request(port, "GET", "/api/params", NULL, NULL, &response) == 0) {
        cJSON *root = body_json(&response);
        CHECK(response.status == 200 && cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(root, "params")));
        cJSON_Delete(root);
    }
    free(response.raw);
    if (test_request(port, "GET", "/", NULL, NULL, &response) == 0)
        CHECK(response.status == 200 && strstr(response.raw, "Content-Type: text/html") &&
              strstr(response.body, "<html") && strstr(response.body, "/v1/chat/completions") &&
              !strstr(response.body, "http://") && !strstr(response.body, "https://"));
    free(response.raw);
    if (test_request(port, "GET", "/metrics", NULL, NULL, &response) == 0)
        CHECK(response.status == 200 && strstr(response.body, "\nbmoe_generations_total ") &&
              strstr(response.body, "\nbmoe_requests_in_line 0\n"));
    free(response.raw);
    if (test_request(port, "GET", "/nowhere", NULL, NULL, &response) == 0)
        check_error(&response, 404, NULL, "unknown path");
    free(response.raw);
}

/* The CLI's greedy --chat text for prompt on path, with up to two more
 * arguments (NULL: none). */
static char *cli_chat_text_of(const char *path, const char *prompt, const char *extra, const char *value)
{
    const char *args[] = {"-m", path, "-p", prompt, "-n", N_PREDICT, "-t", "1", "--chat", extra, value, NULL};
    cli_result r;
    if (cli_run(args, &r) != 0)
        return NULL;
    char *text = NULL;
    if (r.exit_code == 0 && cli_cut_report(&r)) {
        /* the CLI ends the text with a newline before its report */
        if (r.out_length > 0 && r.out[r.out_length - 1] == '\n')
            r.out[--r.out_length] = '\0';
        text = strdup(r.out);
    }
    cli_result_free(&r);
    return text;
}

static char *cli_chat_text(const char *prompt)
{
    return cli_chat_text_of(model, prompt, NULL, NULL);
}

static char *chat(int port, const char *body, int *n_reused)
{
    test_response response;
    char *text = NULL;
    if (test_request(port, "POST", "/v1/chat/completions", NULL, body, &response) == 0) {
        CHECK_MSG(response.status == 200, "chat: %d %s", response.status, response.body);
        text = answer_of(&response, true, n_reused);
        CHECK(strstr(response.body, "\"object\":\"chat.completion\"") && strstr(response.body, "\"usage\":{") &&
              strstr(response.body, "\"finish_reason\":\""));
    }
    free(response.raw);
    return text;
}

/* The streamed answer to a chat body: the content deltas joined, after
 * checking the events' shape (role first, finish_reason last, [DONE]). */
static char *chat_streamed(int port, const char *body)
{
    test_response response;
    char *text = NULL;
    if (test_request(port, "POST", "/v1/chat/completions", NULL, body, &response) != 0) {
        CHECK(false);
        return NULL;
    }
    CHECK_MSG(response.status == 200 && strstr(response.raw, "Content-Type: text/event-stream"), "stream: %.200s",
              response.raw);
    char *events = (char *)response.body;
    CHECK_MSG(test_dechunk(events) >= 0, "the stream's chunked body does not decode");
    size_t capacity = strlen(events) + 1, used = 0;
    text = calloc(capacity, 1);
    int n = 0;
    bool finished = false, done = false;
    for (char *line = strtok(events, "\n"); text && line; line = strtok(NULL, "\n"), n++) {
        CHECK_MSG(strncmp(line, "data: ", 6) == 0 && !done, "stray line %s", line);
        if (strcmp(line, "data: [DONE]") == 0) {
            done = true;
            continue;
        }
        cJSON *chunk = cJSON_Parse(line + 6);
        const cJSON *choice = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(chunk, "choices"), 0);
        const cJSON *delta = cJSON_GetObjectItemCaseSensitive(choice, "delta");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(delta, "content");
        const cJSON *finish = cJSON_GetObjectItemCaseSensitive(choice, "finish_reason");
        CHECK_MSG(delta && !finished, "chunk %d: %s", n, line);
        if (n == 0)
            CHECK(cJSON_HasObjectItem(delta, "role"));
        if (cJSON_IsString(content)) {
            size_t length = strlen(content->valuestring);
            if (used + length < capacity) {
                memcpy(text + used, content->valuestring, length);
                used += length;
            }
        }
        finished = cJSON_IsString(finish);
        cJSON_Delete(chunk);
    }
    CHECK_MSG(finished && done, "the stream did not end with finish_reason and [DONE]");
    free(response.raw);
    return text;
}

static void test_chat_equals_cli(int port)
{
    char *expected = cli_chat_text("Hello");
    char *got = chat(port,
                     "{\"model\":\"tiny\",\"user\":\"u\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\","
                     "\"text\":\"Hel\"},{\"type\":\"text\",\"text\":\"lo\"}]}],\"max_tokens\":" N_PREDICT
                     ",\"temperature\":0}",
                     NULL);
    CHECK_MSG(expected && got && strcmp(expected, got) == 0, "server \"%s\" != bmoe-cli --chat \"%s\"",
              got ? got : "(none)", expected ? expected : "(none)");
    char *streamed = chat_streamed(port, "{\"stream\":true,\"stream_options\":{\"include_usage\":true},"
                                         "\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}],"
                                         "\"max_tokens\":" N_PREDICT "}");
    CHECK_MSG(expected && streamed && strcmp(expected, streamed) == 0, "streamed \"%s\" != bmoe-cli --chat \"%s\"",
              streamed ? streamed : "(none)", expected ? expected : "(none)");
    free(streamed);
    /* chat_template_kwargs.enable_thinking: false answers as bmoe-cli --no-think, true as the default */
    char *unthinking = cli_chat_text_of(model, "Hello", "--no-think", NULL);
    char *off = chat(port,
                     "{\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}],\"max_tokens\":" N_PREDICT
                     ",\"chat_template_kwargs\":{\"enable_thinking\":false}}",
                     NULL);
    char *on = chat(port,
                    "{\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}],\"max_tokens\":" N_PREDICT
                    ",\"chat_template_kwargs\":{\"enable_thinking\":true}}",
                    NULL);
    /* the answer after the closed reasoning span starts at its first
     * non-space, as the contract splits it; the CLI prints the text as
     * generated */
    const char *unthinking_answer = unthinking ? unthinking + strspn(unthinking, " \n") : NULL;
    CHECK_MSG(unthinking_answer && off && strcmp(unthinking_answer, off) == 0,
              "enable_thinking false \"%s\" != --no-think \"%s\"", off ? off : "(none)",
              unthinking ? unthinking : "(none)");
    CHECK_MSG(expected && on && strcmp(expected, on) == 0, "enable_thinking true \"%s\" != \"%s\"", on ? on : "(none)",
              expected ? expected : "(none)");
    CHECK_MSG(unthinking && expected && strcmp(unthinking, expected) != 0, "--no-think answered as thinking does");
    /* the penalties answer as the CLI's flags do, and change the answer */
    static const struct {
        const char *field, *flag, *value;
    } penalties[] = {
        {"frequency_penalty", "--frequency-penalty", "1.5"},
        {"presence_penalty", "--presence-penalty", "2"},
        {"repeat_penalty", "--repeat-penalty", "3"},
    };
    for (size_t i = 0; i < sizeof penalties / sizeof penalties[0]; i++) {
        char body[256];
        snprintf(body, sizeof body,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}],\"max_tokens\":" N_PREDICT
                 ",\"%s\":%s}",
                 penalties[i].field, penalties[i].value);
        char *served = chat(port, body, NULL);
        char *flagged = cli_chat_text_of(model, "Hello", penalties[i].flag, penalties[i].value);
        CHECK_MSG(served && flagged && strcmp(served, flagged) == 0, "%s: server \"%s\" != bmoe-cli \"%s\"",
                  penalties[i].field, served ? served : "(none)", flagged ? flagged : "(none)");
        CHECK_MSG(served && expected && strcmp(served, expected) != 0, "%s changed nothing", penalties[i].field);
        free(served);
        free(flagged);
    }
    free(unthinking);
    free(off);
    free(on);
    free(expected);
    free(got);
    test_response response;
    if (test_request(port, "POST", "/v1/completions", NULL,
                     "{\"prompt\":\"Once upon a time\",\"max_tokens\":4,\"stop\":[\"zzz\"]}", &response) == 0) {
        char *text = answer_of(&response, false, NULL);
        CHECK_MSG(response.status == 200 && text && strstr(response.body, "\"text_completion\""), "completions: %s",
                  response.body);
        free(text);
    }
    free(response.raw);
}

/* A server that drafts with --ngram answers what bmoe-cli answers without
 * drafting, non-streamed and streamed, and its figures count the drafts. */
static void test_ngram(void)
{
    test_server server;
    const char *args[] = {"-m", model, "-t", "1", "--ngram", "--ngram-min-match", "1", "--draft", "4", NULL};
    if (test_server_start(&server, args) != 0) {
        CHECK_MSG(false, "the drafting server did not start");
        return;
    }
    char *expected = cli_chat_text("Hello");
    const char *body = "{\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}],\"max_tokens\":" N_PREDICT "}";
    test_response response;
    if (test_request(server.port, "POST", "/v1/chat/completions", NULL, body, &response) == 0) {
        char *got = answer_of(&response, true, NULL);
        CHECK_MSG(response.status == 200 && expected && got && strcmp(expected, got) == 0,
                  "--ngram server \"%s\" != bmoe-cli --chat \"%s\"", got ? got : "(none)",
                  expected ? expected : "(none)");
        CHECK_MSG(strstr(response.body, "\"drafted\":") && strstr(response.body, "\"accepted\":") &&
                      strstr(response.body, "\"drafted_steps\":"),
                  "no drafting figures: %s", response.body);
        free(got);
    }
    free(response.raw);
    char *streamed = chat_streamed(server.port, "{\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":"
                                                "\"Hello\"}],\"max_tokens\":" N_PREDICT "}");
    CHECK_MSG(expected && streamed && strcmp(expected, streamed) == 0, "--ngram streamed \"%s\" != \"%s\"",
              streamed ? streamed : "(none)", expected ? expected : "(none)");
    free(streamed);
    free(expected);
    CHECK(test_server_stop(&server, SIGTERM) == 0);
}

static int chat_prompt_tokens(int port, const char *body, char **content);

/* A gpt-oss server (whose template reads reasoning_effort) started with
 * --reasoning-effort high answers as bmoe-cli --reasoning-effort high; a
 * request's reasoning_effort (top level or in chat_template_kwargs) answers
 * as the CLI with that effort; both at once are refused; tools are taken
 * (harmony calls). */
static void test_effort(void)
{
    char gptoss[1200];
    snprintf(gptoss, sizeof gptoss, "%s/gpt-oss.gguf", tmp);
    bool made = cli_mkmodel("tiny-gpt-oss", gptoss);
    test_server server;
    const char *args[] = {"-m", gptoss, "-t", "1", "--reasoning-effort", "high", NULL};
    if (!made || test_server_start(&server, args) != 0) {
        CHECK_MSG(false, "the gpt-oss server did not start");
        return;
    }
    char *high = cli_chat_text_of(gptoss, "Hello", "--reasoning-effort", "high");
    char *low = cli_chat_text_of(gptoss, "Hello", "--reasoning-effort", "low");
    CHECK_MSG(high && low && strcmp(high, low) != 0, "the CLI answered low as high");
    const char *bodies[] = {
        "{\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}],\"max_tokens\":" N_PREDICT "}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}],\"max_tokens\":" N_PREDICT
        ",\"reasoning_effort\":\"low\"}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}],\"max_tokens\":" N_PREDICT
        ",\"chat_template_kwargs\":{\"reasoning_effort\":\"low\"}}",
    };
    const char *expected[] = {high, low, low};
    for (int i = 0; i < 3; i++) {
        char *got = chat(server.port, bodies[i], NULL);
        CHECK_MSG(expected[i] && got && strcmp(expected[i], got) == 0, "%s: \"%s\" != bmoe-cli's \"%s\"", bodies[i],
                  got ? got : "(none)", expected[i] ? expected[i] : "(none)");
        free(got);
    }
    check_refused(server.port, "/v1/chat/completions",
                  "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"reasoning_effort\":\"low\","
                  "\"chat_template_kwargs\":{\"reasoning_effort\":\"high\"}}",
                  400, "chat_template_kwargs", "reasoning_effort twice");
    /* gpt-oss's harmony calls are read: tools are taken and reach the
     * developer message, tool_choice "none" leaves them out, and a streamed
     * answer with tools shows what the plain one shows */
#define GPT_OSS_ASK "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"max_tokens\":4"
#define GPT_OSS_TOOLS ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":\"d\"}}]"
    char *with_tools = NULL;
    int plain = chat_prompt_tokens(server.port, GPT_OSS_ASK "}", NULL);
    int tools = chat_prompt_tokens(server.port, GPT_OSS_ASK GPT_OSS_TOOLS "}", &with_tools);
    int none = chat_prompt_tokens(server.port, GPT_OSS_ASK GPT_OSS_TOOLS ",\"tool_choice\":\"none\"}", NULL);
    /* an assistant turn's call (with its reasoning) and the tool's answer render */
    int history = chat_prompt_tokens(
        server.port,
        "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"assistant\",\"content\":null,"
        "\"reasoning_content\":\"b\",\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":"
        "\"f\",\"arguments\":\"{\\\"x\\\":1}\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"2\"}],"
        "\"max_tokens\":4" GPT_OSS_TOOLS "}",
        NULL);
    CHECK_MSG(plain > 0 && tools > plain + 10 && none == plain && history > tools + 10,
              "gpt-oss prompt tokens: plain %d, tools %d, none %d, with a call and its answer %d", plain, tools, none,
              history);
    char *streamed = chat_streamed(server.port, GPT_OSS_ASK GPT_OSS_TOOLS ",\"stream\":true}");
    CHECK_MSG(with_tools && streamed && strcmp(with_tools, streamed) == 0,
              "gpt-oss streamed with tools \"%s\" != \"%s\"", streamed ? streamed : "(none)",
              with_tools ? with_tools : "(none)");
    free(streamed);
    free(with_tools);
    /* gpt-oss reasons in messages of its own: a JSON answer waits for the
     * final one's header (which this random model never writes), or with
     * reasoning off is held from the first token */
    char *waiting = chat(server.port, GPT_OSS_ASK ",\"response_format\":{\"type\":\"json_object\"}}", NULL);
    char *held = chat(server.port,
                      GPT_OSS_ASK ",\"response_format\":{\"type\":\"json_object\"},\"chat_template_kwargs\":"
                                  "{\"enable_thinking\":false}}",
                      NULL);
    CHECK_MSG(waiting && held && held[0] == '{', "gpt-oss JSON answers: \"%s\", reasoning off \"%s\"",
              waiting ? waiting : "(none)", held ? held : "(none)");
    free(waiting);
    free(held);
    /* harmony calls are not one JSON object: a call is not forced there */
    check_refused(server.port, "/v1/chat/completions", GPT_OSS_ASK GPT_OSS_TOOLS ",\"tool_choice\":\"required\"}", 400,
                  "tool_choice", "a forced call on gpt-oss");
#undef GPT_OSS_TOOLS
#undef GPT_OSS_ASK
    free(high);
    free(low);
    CHECK(test_server_stop(&server, SIGTERM) == 0);
}

/* A completion's text, n_reused and usage.prompt_tokens (-1 when absent),
 * or NULL (a failed check). */
static char *complete(int port, const char *body, int *n_reused, int *n_prompt)
{
    test_response response;
    char *text = NULL;
    *n_prompt = -1;
    if (test_request(port, "POST", "/v1/completions", NULL, body, &response) == 0) {
        CHECK_MSG(response.status == 200, "completion: %d %s", response.status, response.body);
        text = answer_of(&response, false, n_reused);
        cJSON *root = body_json(&response);
        const cJSON *tokens =
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "usage"), "prompt_tokens");
        *n_prompt = cJSON_IsNumber(tokens) ? tokens->valueint : -1;
        cJSON_Delete(root);
    }
    free(response.raw);
    return text;
}

/* A gpt-oss server with rings of 32 positions (--ubatch 8): by default
 * (--swa-cache checkpoint) a request extending the last prompt reuses it
 * after an answer longer than the rings, with --swa-cache ring it evaluates
 * it whole; both answer alike. */
static void test_swa_checkpoint(void)
{
    char gptoss[1200];
    snprintf(gptoss, sizeof gptoss, "%s/gpt-oss.gguf", tmp);
    if (!cli_mkmodel("tiny-gpt-oss", gptoss))
        return;
    const char *first = "{\"prompt\":\"Once upon a time\",\"max_tokens\":48,\"temperature\":0,\"ignore_eos\":true}";
    const char *second = "{\"prompt\":\"Once upon a time there was a cat\",\"max_tokens\":8,\"temperature\":0}";
    char *answers[2] = {NULL, NULL};
    int reused[2] = {-1, -1}, first_prompt[2] = {-1, -1}, second_prompt;
    for (int ring = 0; ring < 2; ring++) {
        const char *args[] = {"-m", gptoss, "-t", "1", "--ubatch", "8", ring ? "--swa-cache" : NULL, "ring", NULL};
        test_server server;
        if (test_server_start(&server, args) != 0) {
            CHECK_MSG(false, "the gpt-oss server did not start");
            continue;
        }
        int first_reused;
        free(complete(server.port, first, &first_reused, &first_prompt[ring]));
        answers[ring] = complete(server.port, second, &reused[ring], &second_prompt);
        CHECK(test_server_stop(&server, SIGTERM) == 0);
    }
    /* the second prompt extends the first: the checkpoint keeps all of it */
    CHECK_MSG(first_prompt[0] > 1 && reused[0] == first_prompt[0] && reused[1] == 0,
              "the second prompt reused %d (checkpoint) and %d (ring) tokens; the first had %d", reused[0], reused[1],
              first_prompt[0]);
    CHECK_MSG(answers[0] && answers[1] && strcmp(answers[0], answers[1]) == 0, "checkpoint \"%s\", ring \"%s\"",
              answers[0] ? answers[0] : "(none)", answers[1] ? answers[1] : "(none)");
    free(answers[0]);
    free(answers[1]);
}

/* /api/events carries the tokens of a generation another client asked for. */
static void test_events(int port)
{
    int fd = test_request_send(port, "GET", "/api/events", NULL, NULL, 0);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    char head[512] = {0};
    CHECK(recv(fd, head, sizeof head - 1, 0) > 0 && strstr(head, "text/event-stream"));
    test_response response;
    if (test_request(port, "POST", "/v1/completions", NULL, "{\"prompt\":\"The cat sat\",\"max_tokens\":3}",
                     &response) == 0)
        CHECK(response.status == 200);
    free(response.raw);
    char events[4096] = {0};
    size_t used = 0;
    while (used < sizeof events - 1 && !strstr(events, "\"token\":")) {
        ssize_t got = recv(fd, events + used, sizeof events - 1 - used, 0);
        if (got <= 0)
            break;
        used += (size_t)got;
    }
    CHECK_MSG(strstr(events, "data: {\"token\":1,") != NULL, "no token event: %s", events);
    close(fd);
}

/* A client that goes away mid-stream frees the model: the next request is
 * answered. */
static void test_disconnect(int port)
{
    const char *body = "{\"stream\":true,\"max_tokens\":3000,\"messages\":[{\"role\":\"user\",\"content\":\"Tell me a story\"}]}";
    int fd = test_request_send(port, "POST", "/v1/chat/completions", NULL, body, strlen(body));
    if (fd >= 0) {
        char some[256];
        CHECK(recv(fd, some, sizeof some, 0) > 0);
        close(fd);
    }
    /* the server notices at its next write: until then this server (--max-queue 0) answers 429 */
    test_response response = {0};
    for (int tries = 0; tries < 200; tries++) {
        free(response.raw);
        if (test_request(port, "POST", "/v1/completions", NULL, "{\"prompt\":\"Hi\",\"max_tokens\":2}", &response) != 0 ||
            response.status != 429)
            break;
        struct timespec pause = {0, 10 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    CHECK_MSG(response.status == 200, "after a disconnect: %d", response.status);
    free(response.raw);
}

/* The second turn of a conversation reuses the first's cached prompt and
 * answers what a fresh server answers to the whole conversation. */
static void test_reuse(int port)
{
    int reused = -1;
    char *first = chat(port, "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi there\"}],\"max_tokens\":8}", NULL);
    if (!first)
        return;
    cJSON *body = cJSON_CreateObject();
    cJSON *messages = cJSON_AddArrayToObject(body, "messages");
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", "user");
    cJSON_AddStringToObject(m, "content", "Hi there");
    cJSON_AddItemToArray(messages, m);
    m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", "assistant");
    cJSON_AddStringToObject(m, "content", first);
    cJSON_AddItemToArray(messages, m);
    m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", "user");
    cJSON_AddStringToObject(m, "content", "Why");
    cJSON_AddItemToArray(messages, m);
    cJSON_AddNumberToObject(body, "max_tokens", 8);
    char *text = cJSON_PrintUnformatted(body);
    cJSON_Delete(body);
    char *second = chat(port, text, &reused);
    CHECK_MSG(reused > 0, "the second turn reused %d tokens", reused);
    test_server fresh;
    const char *args[] = {"-m", model, "-t", "1", NULL};
    if (test_server_start(&fresh, args) == 0) {
        int fresh_reused = -1;
        char *again = chat(fresh.port, text, &fresh_reused);
        CHECK(fresh_reused == 0);
        CHECK_MSG(second && again && strcmp(second, again) == 0, "reused \"%s\" != fresh \"%s\"",
                  second ? second : "", again ? again : "");
        free(again);
        CHECK(test_server_stop(&fresh, SIGTERM) == 0);
    } else {
        CHECK_MSG(false, "a second server did not start");
    }
    free(second);
    free(text);
    free(first);
}

/* The choice's logprobs of a response body (a detached copy; NULL: none). */
static cJSON *logprobs_of(const char *body)
{
    cJSON *root = cJSON_Parse(body ? body : "");
    const cJSON *choice = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "choices"), 0);
    cJSON *logprobs = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(choice, "logprobs"), true);
    cJSON_Delete(root);
    return logprobs;
}

/* logprobs: greedy answers carry, per generated token, its log-probability
 * and top_logprobs alternatives, the token the most likely of them; the
 * streamed answer carries the same entries chunk by chunk; asking changes
 * no token; completions get the four arrays of the legacy shape. */
static void test_logprobs(int port)
{
    static const char chat_body[] = "{\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}],"
                                    "\"max_tokens\":" N_PREDICT ",\"logprobs\":true,\"top_logprobs\":3%s}";
    char body[256];
    snprintf(body, sizeof body, chat_body, "");
    test_response response;
    cJSON *whole = NULL;
    int generated = -1;
    if (test_request(port, "POST", "/v1/chat/completions", NULL, body, &response) == 0) {
        CHECK_MSG(response.status == 200, "logprobs: %d %s", response.status, response.body);
        whole = logprobs_of(response.body);
        cJSON *root = body_json(&response);
        const cJSON *tokens = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "usage"),
                                                               "completion_tokens");
        generated = cJSON_IsNumber(tokens) ? tokens->valueint : -1;
        cJSON_Delete(root);
    }
    free(response.raw);
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(whole, "content");
    CHECK_MSG(generated > 0 && cJSON_GetArraySize(content) == generated, "%d entries for %d tokens",
              cJSON_GetArraySize(content), generated);
    const cJSON *entry;
    cJSON_ArrayForEach(entry, content) {
        const cJSON *logprob = cJSON_GetObjectItemCaseSensitive(entry, "logprob");
        const cJSON *token = cJSON_GetObjectItemCaseSensitive(entry, "token");
        const cJSON *top = cJSON_GetObjectItemCaseSensitive(entry, "top_logprobs");
        const cJSON *first = cJSON_GetArrayItem(top, 0);
        CHECK(cJSON_IsNumber(logprob) && logprob->valuedouble <= 0 && cJSON_IsString(token) &&
              cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(entry, "bytes")) && cJSON_GetArraySize(top) == 3);
        /* greedy: the token is the most likely */
        CHECK(first && cJSON_Compare(cJSON_GetObjectItemCaseSensitive(first, "bytes"),
                                     cJSON_GetObjectItemCaseSensitive(entry, "bytes"), true) &&
              cJSON_GetObjectItemCaseSensitive(first, "logprob")->valuedouble == logprob->valuedouble);
        for (int k = 1; k < cJSON_GetArraySize(top); k++)
            CHECK(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(top, k), "logprob")->valuedouble <=
                  cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(top, k - 1), "logprob")->valuedouble);
    }
    /* streamed: the chunks' entries, joined, are the same */
    snprintf(body, sizeof body, chat_body, ",\"stream\":true");
    cJSON *joined = cJSON_CreateArray();
    if (test_request(port, "POST", "/v1/chat/completions", NULL, body, &response) == 0 &&
        test_dechunk((char *)response.body) >= 0) {
        for (char *line = strtok((char *)response.body, "\n"); line; line = strtok(NULL, "\n")) {
            cJSON *logprobs = strncmp(line, "data: {", 7) == 0 ? logprobs_of(line + 6) : NULL;
            const cJSON *part;
            cJSON_ArrayForEach(part, cJSON_GetObjectItemCaseSensitive(logprobs, "content"))
                cJSON_AddItemToArray(joined, cJSON_Duplicate(part, true));
            cJSON_Delete(logprobs);
        }
    }
    free(response.raw);
    CHECK_MSG(content && cJSON_Compare(joined, content, true), "the streamed logprobs differ from the answer's");
    cJSON_Delete(joined);
    cJSON_Delete(whole);

    /* sampled: asking for logprobs changes no token */
    static const char sampled[] = "{\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}],\"max_tokens\":" N_PREDICT
                                  ",\"temperature\":1.2,\"seed\":5%s}";
    snprintf(body, sizeof body, sampled, "");
    char *plain = chat(port, body, NULL);
    snprintf(body, sizeof body, sampled, ",\"logprobs\":true");
    char *asked = chat(port, body, NULL);
    CHECK_MSG(plain && asked && strcmp(plain, asked) == 0, "logprobs changed the answer: \"%s\" != \"%s\"",
              asked ? asked : "", plain ? plain : "");
    free(plain);
    free(asked);

    /* completions: tokens, token_logprobs, top_logprobs and text_offset, one element per token */
    if (test_request(port, "POST", "/v1/completions", NULL,
                     "{\"prompt\":\"Once upon a time\",\"max_tokens\":6,\"logprobs\":2}", &response) == 0) {
        cJSON *logprobs = logprobs_of(response.body);
        const cJSON *tokens = cJSON_GetObjectItemCaseSensitive(logprobs, "tokens");
        const cJSON *values = cJSON_GetObjectItemCaseSensitive(logprobs, "token_logprobs");
        const cJSON *tops = cJSON_GetObjectItemCaseSensitive(logprobs, "top_logprobs");
        const cJSON *offsets = cJSON_GetObjectItemCaseSensitive(logprobs, "text_offset");
        CHECK_MSG(cJSON_GetArraySize(tokens) == 6 && cJSON_GetArraySize(values) == 6 &&
                      cJSON_GetArraySize(tops) == 6 && cJSON_GetArraySize(offsets) == 6,
                  "completions logprobs: %s", response.body);
        char *text = answer_of(&response, false, NULL);
        double offset = 0;
        int spelled = 0;
        for (int i = 0; text && i < cJSON_GetArraySize(tokens); i++) {
            const cJSON *token = cJSON_GetArrayItem(tokens, i), *top = cJSON_GetArrayItem(tops, i);
            const cJSON *best = cJSON_GetObjectItemCaseSensitive(top, token->valuestring);
            /* greedy: the token is among its alternatives, with its own log-probability */
            CHECK(cJSON_GetArraySize(top) >= 1 && cJSON_GetArraySize(top) <= 2 && cJSON_IsNumber(best) &&
                  best->valuedouble == cJSON_GetArrayItem(values, i)->valuedouble);
            /* the text its step made final, from its offset to the next
             * token's, ends with the token where its piece spells whole
             * characters (bytes held back before it may come first) */
            double at = cJSON_GetArrayItem(offsets, i)->valuedouble;
            const cJSON *following = cJSON_GetArrayItem(offsets, i + 1);
            double end = following ? following->valuedouble : (double)strlen(text);
            CHECK(at >= offset && at <= end && end <= (double)strlen(text));
            offset = at;
            size_t length = strlen(token->valuestring);
            if (!strstr(token->valuestring, "\xef\xbf\xbd") && at <= end && end <= (double)strlen(text)) {
                CHECK_MSG(end - at >= (double)length &&
                              strncmp(text + (size_t)end - length, token->valuestring, length) == 0,
                          "token %d \"%s\" does not end [%g, %g) of \"%s\"", i, token->valuestring, at, end, text);
                spelled++;
            }
        }
        CHECK_MSG(spelled > 0, "no token of \"%s\" spelled whole characters: the offsets went unchecked",
                  text ? text : "(none)");
        free(text);
        cJSON_Delete(logprobs);
    }
    free(response.raw);
}

/* usage.prompt_tokens of a chat body's answer (-1: none), its content in
 * *content when not NULL. */
static int chat_prompt_tokens(int port, const char *body, char **content)
{
    test_response response;
    int n = -1;
    if (content)
        *content = NULL;
    if (test_request(port, "POST", "/v1/chat/completions", NULL, body, &response) == 0) {
        CHECK_MSG(response.status == 200, "%s: %d %s", body, response.status, response.body);
        cJSON *root = body_json(&response);
        const cJSON *tokens = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "usage"),
                                                               "prompt_tokens");
        n = cJSON_IsNumber(tokens) ? tokens->valueint : -1;
        cJSON_Delete(root);
        if (content)
            *content = answer_of(&response, true, NULL);
    }
    free(response.raw);
    return n;
}

#define TOOLS "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":" \
              "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}}}}]"
#define ASK "{\"role\":\"user\",\"content\":\"Weather in Paris?\"}"
#define CALLED "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\"," \
               "\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}}]}," \
               "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"18C\"}"

/* tools reach the template (Qwen3's: a longer prompt), tool_choice "none"
 * leaves them out, an assistant turn's calls and the tool's answer render,
 * a streamed answer with tools shows the text a plain one shows (this
 * model writes no call); what bmoe cannot do is refused. */
static void test_tools(int port)
{
    int plain = chat_prompt_tokens(port, "{\"messages\":[" ASK "],\"max_tokens\":4}", NULL);
    char *content = NULL;
    int tools = chat_prompt_tokens(port, "{\"messages\":[" ASK "],\"max_tokens\":4," TOOLS "}", &content);
    int none = chat_prompt_tokens(port, "{\"messages\":[" ASK "],\"max_tokens\":4," TOOLS ",\"tool_choice\":\"none\"}",
                                  NULL);
    int history = chat_prompt_tokens(port, "{\"messages\":[" ASK "," CALLED "],\"max_tokens\":4," TOOLS "}", NULL);
    CHECK_MSG(plain > 0 && tools > plain + 50 && none == plain && history > tools + 10,
              "prompt tokens: plain %d, tools %d, tool_choice none %d, with a call and its answer %d", plain, tools,
              none, history);
    char *streamed = chat_streamed(port, "{\"stream\":true,\"messages\":[" ASK "],\"max_tokens\":4," TOOLS "}");
    CHECK_MSG(content && streamed && strcmp(content, streamed) == 0, "streamed with tools \"%s\" != \"%s\"",
              streamed ? streamed : "(none)", content ? content : "(none)");
    free(streamed);
    free(content);
    static const struct {
        const char *body, *param;
    } refused[] = {
        {"{\"messages\":[" ASK "]," TOOLS ",\"tool_choice\":{\"type\":\"function\"}}", "tool_choice"},
        {"{\"messages\":[" ASK "]," TOOLS ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":"
         "\"get_time\"}}}",
         "tool_choice"},
        {"{\"messages\":[" ASK "],\"tool_choice\":\"required\"}", "tool_choice"},
        {"{\"messages\":[" ASK "]," TOOLS ",\"tool_choice\":\"always\"}", "tool_choice"},
        {"{\"messages\":[" ASK "],\"tools\":{}}", "tools"},
        {"{\"messages\":[" ASK "],\"tools\":[{\"type\":\"function\",\"function\":{}}]}", "tools"},
        {"{\"messages\":[" ASK ",{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c\","
         "\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"not json\"}}]}]}",
         "messages[1].tool_calls"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\",\"tool_calls\":[]}]}", "messages[0].tool_calls"},
        {"{\"messages\":[{\"role\":\"tool\",\"content\":\"a\",\"tool_call_id\":7}]}", "messages[0]"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        check_refused(port, "/v1/chat/completions", refused[i].body, 400, refused[i].param, refused[i].body);
}

#define SCHEMA "{\"type\":\"object\",\"properties\":{\"ok\":{\"type\":\"boolean\"},\"color\":{\"enum\":[\"red\"," \
               "\"green\"]}},\"required\":[\"ok\",\"color\"]}"
#define JSON_ANSWER "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"s\",\"schema\":" SCHEMA "}}"

/* response_format: the answer is one JSON value of the schema, whole (this
 * schema's values are short: the model must end it), with the model's
 * reasoning turned off; streamed as plain; what bmoe cannot hold to, or
 * what would put text before the value, is refused. */
static void test_structured(int port)
{
    test_response response;
    if (test_request(port, "POST", "/v1/chat/completions", NULL,
                     "{\"messages\":[" ASK "],\"max_tokens\":64," JSON_ANSWER "}", &response) == 0) {
        CHECK_MSG(response.status == 200, "%d %s", response.status, response.body);
        cJSON *root = body_json(&response);
        const cJSON *choice = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "choices"), 0);
        const cJSON *message = cJSON_GetObjectItemCaseSensitive(choice, "message");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(message, "content");
        const cJSON *reasoning = cJSON_GetObjectItemCaseSensitive(message, "reasoning_content");
        const cJSON *finish = cJSON_GetObjectItemCaseSensitive(choice, "finish_reason");
        cJSON *value = cJSON_IsString(content) ? cJSON_Parse(content->valuestring) : NULL;
        const cJSON *ok = cJSON_GetObjectItemCaseSensitive(value, "ok");
        const cJSON *color = cJSON_GetObjectItemCaseSensitive(value, "color");
        CHECK_MSG(cJSON_IsObject(value) && cJSON_GetArraySize(value) == 2 && cJSON_IsBool(ok) &&
                      cJSON_IsString(color) &&
                      (!strcmp(color->valuestring, "red") || !strcmp(color->valuestring, "green")),
                  "the answer does not meet the schema: %s", response.body);
        CHECK_MSG(cJSON_IsString(finish) && strcmp(finish->valuestring, "stop") == 0, "finish: %s", response.body);
        CHECK_MSG(!reasoning || cJSON_IsNull(reasoning) || !reasoning->valuestring[0], "reasoning: %s", response.body);
        cJSON_Delete(value);
        cJSON_Delete(root);
        char *plain = answer_of(&response, true, NULL);
        char *streamed = chat_streamed(port, "{\"stream\":true,\"messages\":[" ASK "],\"max_tokens\":64," JSON_ANSWER "}");
        CHECK_MSG(plain && streamed && strcmp(plain, streamed) == 0, "streamed \"%s\" != \"%s\"",
                  streamed ? streamed : "(none)", plain ? plain : "(none)");
        free(plain);
        free(streamed);
    }
    free(response.raw);
    /* json_object: an object from the first byte; /v1/completions too */
    char *object = chat(port, "{\"messages\":[" ASK "],\"max_tokens\":8,\"response_format\":{\"type\":\"json_object\"}}",
                        NULL);
    CHECK_MSG(object && object[0] == '{', "json_object: \"%s\"", object ? object : "(none)");
    free(object);
    if (test_request(port, "POST", "/v1/completions", NULL,
                     "{\"prompt\":\"a\",\"max_tokens\":64," JSON_ANSWER "}", &response) == 0) {
        char *text = answer_of(&response, false, NULL);
        cJSON *value = text ? cJSON_Parse(text) : NULL;
        CHECK_MSG(response.status == 200 && cJSON_IsObject(value) && cJSON_IsBool(cJSON_GetObjectItem(value, "ok")),
                  "completions: %d %s", response.status, response.body);
        cJSON_Delete(value);
        free(text);
    }
    free(response.raw);
    static const struct {
        const char *body, *param, *word;
    } refused[] = {
        {"{\"messages\":[" ASK "],\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":"
         "{\"type\":\"string\",\"pattern\":\"a+\"}}}}",
         "response_format", "pattern"},
        {"{\"messages\":[" ASK "],\"response_format\":{\"type\":\"xml\"}}", "response_format", "type"},
        {"{\"messages\":[" ASK "],\"response_format\":{\"type\":\"json_schema\"}}", "response_format", "schema"},
        {"{\"messages\":[" ASK "],\"response_format\":{\"type\":\"json_object\",\"json_schema\":{}}}",
         "response_format", "json_schema"},
        {"{\"messages\":[" ASK "],\"response_format\":{\"type\":\"json_object\"}," TOOLS "}", "response_format",
         "tool"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        check_chat_refused(port, refused[i].body, refused[i].param, refused[i].word);
    /* text: as if none were given */
    char *text = chat(port, "{\"messages\":[" ASK "],\"max_tokens\":4,\"response_format\":{\"type\":\"text\"}}", NULL);
    char *none = chat(port, "{\"messages\":[" ASK "],\"max_tokens\":4}", NULL);
    CHECK(text && none && strcmp(text, none) == 0);
    free(text);
    free(none);
}

/* The one call of a forced answer: its name (malloc'ed) and arguments'
 * object, and the finish reason "tool_calls"; NULL when the answer is not
 * exactly one call. */
static char *forced_call(int port, const char *body, cJSON **arguments)
{
    test_response response;
    char *name = NULL;
    *arguments = NULL;
    if (test_request(port, "POST", "/v1/chat/completions", NULL, body, &response) == 0) {
        CHECK_MSG(response.status == 200, "%s: %d %s", body, response.status, response.body);
        cJSON *root = body_json(&response);
        const cJSON *choice = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "choices"), 0);
        const cJSON *calls =
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(choice, "message"), "tool_calls");
        const cJSON *function = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(calls, 0), "function");
        const cJSON *called = cJSON_GetObjectItemCaseSensitive(function, "name");
        const cJSON *written = cJSON_GetObjectItemCaseSensitive(function, "arguments");
        const cJSON *finish = cJSON_GetObjectItemCaseSensitive(choice, "finish_reason");
        CHECK_MSG(cJSON_GetArraySize(calls) == 1 && cJSON_IsString(called) && cJSON_IsString(written) &&
                      cJSON_IsString(finish) && strcmp(finish->valuestring, "tool_calls") == 0,
                  "not one call: %s", response.body);
        if (cJSON_IsString(called) && cJSON_IsString(written)) {
            name = strdup(called->valuestring);
            *arguments = cJSON_Parse(written->valuestring);
        }
        cJSON_Delete(root);
    }
    free(response.raw);
    return name;
}

/* tool_choice "required" or a named function: the answer is one call of a
 * tool, its arguments meeting the tool's parameters, though this model
 * never writes a call by itself (test_tools). */
static void test_forced_calls(int port)
{
#define TWO_TOOLS "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":" \
                  "{\"type\":\"object\",\"properties\":{\"city\":{\"enum\":[\"Paris\",\"Rome\"]}}," \
                  "\"required\":[\"city\"]}}},{\"type\":\"function\",\"function\":{\"name\":\"get_time\"," \
                  "\"parameters\":{\"type\":\"object\",\"properties\":{\"utc\":{\"type\":\"boolean\"}}," \
                  "\"required\":[\"utc\"]}}}]"
    cJSON *arguments = NULL;
    char *name = forced_call(port, "{\"messages\":[" ASK "],\"max_tokens\":400," TWO_TOOLS ",\"tool_choice\":"
                             "\"required\"}", &arguments);
    bool weather = name && strcmp(name, "get_weather") == 0, time = name && strcmp(name, "get_time") == 0;
    const cJSON *city = cJSON_GetObjectItemCaseSensitive(arguments, "city");
    const cJSON *utc = cJSON_GetObjectItemCaseSensitive(arguments, "utc");
    CHECK_MSG(cJSON_IsObject(arguments) && cJSON_GetArraySize(arguments) == 1 &&
                  ((weather && cJSON_IsString(city) &&
                    (!strcmp(city->valuestring, "Paris") || !strcmp(city->valuestring, "Rome"))) ||
                   (time && cJSON_IsBool(utc))),
              "required: %s does not meet its tool's parameters", name ? name : "(no call)");
    free(name);
    cJSON_Delete(arguments);
    name = forced_call(port, "{\"messages\":[" ASK "],\"max_tokens\":400," TWO_TOOLS ",\"tool_choice\":"
                       "{\"type\":\"function\",\"function\":{\"name\":\"get_time\"}}}", &arguments);
    utc = cJSON_GetObjectItemCaseSensitive(arguments, "utc");
    CHECK_MSG(name && strcmp(name, "get_time") == 0 && cJSON_IsBool(utc) && cJSON_GetArraySize(arguments) == 1,
              "named: %s", name ? name : "(no call)");
    free(name);
    cJSON_Delete(arguments);
#undef TWO_TOOLS
}

/* POSTs body to path; the answer's JSON on a 200 (NULL otherwise, checked). */
static cJSON *post_ok(int port, const char *path, const char *body)
{
    test_response response;
    cJSON *root = NULL;
    if (test_request(port, "POST", path, NULL, body, &response) == 0) {
        CHECK_MSG(response.status == 200, "%s %s: %d %s", path, body, response.status,
                  response.body ? response.body : "");
        root = response.status == 200 ? body_json(&response) : NULL;
    }
    free(response.raw);
    return root;
}

/* The ids of /tokenize's answer to body as a /detokenize body ({"tokens": [...]}, malloc'ed); *count their number. */
static char *tokenized(int port, const char *body, int *count)
{
    cJSON *root = post_ok(port, "/tokenize", body);
    cJSON *tokens = cJSON_DetachItemFromObjectCaseSensitive(root, "tokens");
    *count = cJSON_IsArray(tokens) ? cJSON_GetArraySize(tokens) : -1;
    cJSON *request = cJSON_CreateObject();
    cJSON_AddItemToObject(request, "tokens", tokens ? tokens : cJSON_CreateArray());
    char *text = cJSON_PrintUnformatted(request);
    cJSON_Delete(request);
    cJSON_Delete(root);
    return text;
}

/* /detokenize's content for body (malloc'ed; NULL when absent). */
static char *detokenized(int port, const char *body)
{
    cJSON *root = post_ok(port, "/detokenize", body);
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(root, "content");
    char *text = cJSON_IsString(content) ? strdup(content->valuestring) : NULL;
    cJSON_Delete(root);
    return text;
}

/* /tokenize and /detokenize (llama.cpp's): a text comes back whole from its
 * tokens, special tokens parsed or spelled out; the pieces are the text's
 * bytes in order, those that split a character as byte lists; the count
 * with the BOS is the prompt's of a completion; bad fields are refused. */
static void test_tokens(int port)
{
    static const char text[] = "Hello w\xc3\xb6rld \xf0\x9f\xa4\x97"; /* "Hello wörld " and U+1F917 */
    int n_plain, n_pieces = 0, n_special, n_spelled, n_bos;
    char *ids = tokenized(port, "{\"content\":\"Hello w\xc3\xb6rld \xf0\x9f\xa4\x97\"}", &n_plain);
    char *back = ids ? detokenized(port, ids) : NULL;
    CHECK_MSG(n_plain > 0 && back && strcmp(back, text) == 0, "/detokenize of /tokenize: %s", back ? back : "-");
    free(back);

    cJSON *root =
        post_ok(port, "/tokenize", "{\"content\":\"Hello w\xc3\xb6rld \xf0\x9f\xa4\x97\",\"with_pieces\":true}");
    cJSON *plain = cJSON_Parse(ids ? ids : "{}");
    char joined[64] = "";
    size_t used = 0;
    bool split = false, ids_agree = true;
    const cJSON *entry;
    cJSON_ArrayForEach(entry, cJSON_GetObjectItemCaseSensitive(root, "tokens")) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(entry, "id");
        const cJSON *piece = cJSON_GetObjectItemCaseSensitive(entry, "piece"), *byte;
        const cJSON *expected = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(plain, "tokens"), n_pieces++);
        ids_agree = ids_agree && cJSON_IsNumber(id) && cJSON_IsNumber(expected) &&
                    id->valuedouble == expected->valuedouble;
        if (cJSON_IsString(piece) && used + strlen(piece->valuestring) < sizeof joined) {
            memcpy(joined + used, piece->valuestring, strlen(piece->valuestring));
            used += strlen(piece->valuestring);
        }
        const cJSON *bytes = cJSON_IsArray(piece) ? piece : NULL;
        cJSON_ArrayForEach(byte, bytes) {
            split = true;
            if (used + 1 < sizeof joined)
                joined[used++] = (char)(unsigned char)byte->valuedouble;
        }
    }
    joined[used] = '\0';
    CHECK_MSG(ids_agree && n_pieces == n_plain, "with_pieces: %d entries, %d tokens", n_pieces, n_plain);
    CHECK_MSG(strcmp(joined, text) == 0, "the pieces do not spell the text: %s", joined);
    CHECK_MSG(split, "the byte-level vocabulary splits U+1F917, so some piece is a byte list");
    cJSON_Delete(plain);
    cJSON_Delete(root);
    free(ids);

    /* one byte of a two-byte character alone is not UTF-8: U+FFFD */
    back = detokenized(port, "{\"tokens\":[72,195]}");
    CHECK_MSG(back && strcmp(back, "H\xef\xbf\xbd") == 0, "a broken character: %s", back ? back : "-");
    free(back);

    char *special = tokenized(port, "{\"content\":\"<|im_start|>user\"}", &n_special);
    char *spelled = tokenized(port, "{\"content\":\"<|im_start|>user\",\"parse_special\":false}", &n_spelled);
    CHECK_MSG(n_special > 0 && n_spelled > n_special + 5, "<|im_start|> parsed: %d tokens, spelled out: %d",
              n_special, n_spelled);
    for (int i = 0; i < 2; i++) {
        back = detokenized(port, i == 0 ? special : spelled);
        CHECK_MSG(back && strcmp(back, "<|im_start|>user") == 0, "detokenize %s: %s", i == 0 ? special : spelled,
                  back ? back : "-");
        free(back);
    }
    free(special);
    free(spelled);

    free(tokenized(port, "{\"content\":\"Hello\",\"add_special\":true}", &n_bos));
    test_response response;
    if (test_request(port, "POST", "/v1/completions", NULL, "{\"prompt\":\"Hello\",\"max_tokens\":1}",
                     &response) == 0) {
        cJSON *completion = body_json(&response);
        const cJSON *usage = cJSON_GetObjectItemCaseSensitive(completion, "usage");
        const cJSON *prompt = cJSON_GetObjectItemCaseSensitive(usage, "prompt_tokens");
        CHECK_MSG(cJSON_IsNumber(prompt) && prompt->valueint == n_bos, "add_special: %d tokens, the prompt's %d",
                  n_bos, cJSON_IsNumber(prompt) ? prompt->valueint : -1);
        cJSON_Delete(completion);
    }
    free(response.raw);

    static const struct {
        const char *path, *body, *param;
    } refused[] = {
        {"/tokenize", "{}", "content"},
        {"/tokenize", "{\"content\":1}", "content"},
        {"/tokenize", "{\"content\":\"a\",\"with_pieces\":1}", "with_pieces"},
        {"/tokenize", "{\"content\":\"a\",\"add_bos\":true}", "add_bos"},
        {"/tokenize", "{\"content\":\"a\",\"content\":\"b\"}", "content"},
        {"/detokenize", "{}", "tokens"},
        {"/detokenize", "{\"tokens\":\"1 2\"}", "tokens"},
        {"/detokenize", "{\"tokens\":[1.5]}", "tokens"},
        {"/detokenize", "{\"tokens\":[-1]}", "tokens"},
        {"/detokenize", "{\"tokens\":[512]}", "tokens"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        check_refused(port, refused[i].path, refused[i].body, 400, refused[i].param, refused[i].body);
    if (test_request(port, "GET", "/tokenize", NULL, NULL, &response) == 0)
        CHECK_MSG(response.status == 405, "GET /tokenize: %d", response.status);
    free(response.raw);
}

/* The message of a non-streamed chat answer to body, checked 200 (NULL otherwise); *root keeps the body. */
static const cJSON *chat_message(int port, const char *body, cJSON **root, const char **finish)
{
    cJSON *parsed = post_ok(port, "/v1/chat/completions", body);
    const cJSON *choice = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(parsed, "choices"), 0);
    const cJSON *reason = cJSON_GetObjectItemCaseSensitive(choice, "finish_reason");
    *finish = cJSON_IsString(reason) ? reason->valuestring : "";
    *root = parsed;
    return cJSON_GetObjectItemCaseSensitive(choice, "message");
}

static const char *string_at(const cJSON *object, const char *key)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, key);
    return cJSON_IsString(item) ? item->valuestring : "";
}

/* logit_bias moves greedy's choice and bans tokens; with it this model's
 * reasoning can be steered, which shows a held answer after reasoning:
 * asked to reason, the model reasons freely in a span the prompt opened
 * (a token it is pushed to fills the reasoning up to the length limit),
 * and once it closes the span the answer is held to the schema, a
 * forced call too. */
static void test_logit_bias_and_reasoning(int port)
{
    char *plain = chat(port, "{\"messages\":[" ASK "],\"max_tokens\":3,\"chat_template_kwargs\":"
                             "{\"enable_thinking\":false}}", NULL);
    char *pushed = chat(port, "{\"messages\":[" ASK "],\"max_tokens\":3,\"chat_template_kwargs\":"
                              "{\"enable_thinking\":false},\"logit_bias\":{\"65\":100}}", NULL);
    CHECK_MSG(pushed && strcmp(pushed, "AAA") == 0, "token 65 ('A') pushed: %s", pushed ? pushed : "-");
    char body[512];
    if (plain && plain[0]) {
        /* the first byte of the plain answer is one token of this byte-level vocabulary: banned, it is not chosen */
        snprintf(body, sizeof body, "{\"messages\":[" ASK "],\"max_tokens\":3,\"chat_template_kwargs\":"
                 "{\"enable_thinking\":false},\"logit_bias\":{\"%d\":false}}", (unsigned char)plain[0]);
        char *banned = chat(port, body, NULL);
        CHECK_MSG(banned && banned[0] != plain[0], "banned '%c': %s", plain[0], banned ? banned : "-");
        free(banned);
    }
    free(plain);
    free(pushed);

    int n_close = 0;
    char *close_ids = tokenized(port, "{\"content\":\"</think>\"}", &n_close);
    cJSON *ids = cJSON_Parse(close_ids ? close_ids : "{}");
    const cJSON *close = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(ids, "tokens"), 0);
    CHECK_MSG(n_close == 1 && cJSON_IsNumber(close), "</think> is one token: %s", close_ids ? close_ids : "-");
    int close_id = cJSON_IsNumber(close) ? close->valueint : 0;
    cJSON_Delete(ids);
    free(close_ids);

    cJSON *root;
    const char *finish;
    const cJSON *message = chat_message(port, "{\"messages\":[" ASK "],\"max_tokens\":8," JSON_ANSWER ","
                                        "\"chat_template_kwargs\":{\"enable_thinking\":true},"
                                        "\"logit_bias\":{\"65\":100}}", &root, &finish);
    CHECK_MSG(strcmp(string_at(message, "reasoning_content"), "AAAAAAAA") == 0 && !string_at(message, "content")[0] &&
                  strcmp(finish, "length") == 0,
              "reasoning before the hold: %s (%s)", string_at(message, "reasoning_content"), finish);
    cJSON_Delete(root);

    snprintf(body, sizeof body, "{\"messages\":[" ASK "],\"max_tokens\":64," JSON_ANSWER ",\"chat_template_kwargs\":"
             "{\"enable_thinking\":true},\"logit_bias\":{\"%d\":100}}", close_id);
    message = chat_message(port, body, &root, &finish);
    cJSON *value = cJSON_Parse(string_at(message, "content"));
    const cJSON *ok = cJSON_GetObjectItemCaseSensitive(value, "ok");
    const cJSON *color = cJSON_GetObjectItemCaseSensitive(value, "color");
    CHECK_MSG(cJSON_IsObject(value) && cJSON_GetArraySize(value) == 2 && cJSON_IsBool(ok) && cJSON_IsString(color) &&
                  strcmp(finish, "stop") == 0 && !string_at(message, "reasoning_content")[0],
              "the answer after the reasoning: %s (%s)", string_at(message, "content"), finish);
    cJSON_Delete(value);
    cJSON_Delete(root);
    char streamed_body[600];
    snprintf(streamed_body, sizeof streamed_body, "{\"stream\":true,%s", body + 1);
    char *streamed = chat_streamed(port, streamed_body);
    message = chat_message(port, body, &root, &finish);
    CHECK_MSG(streamed && strcmp(streamed, string_at(message, "content")) == 0, "streamed: %s", streamed);
    cJSON_Delete(root);
    free(streamed);

    snprintf(body, sizeof body, "{\"messages\":[" ASK "],\"max_tokens\":200," TOOLS ",\"tool_choice\":\"required\","
             "\"chat_template_kwargs\":{\"enable_thinking\":true},\"logit_bias\":{\"%d\":100}}", close_id);
    cJSON *arguments = NULL;
    char *name = forced_call(port, body, &arguments);
    CHECK_MSG(name && strcmp(name, "get_weather") == 0 && cJSON_IsObject(arguments), "a forced call after reasoning");
    free(name);
    cJSON_Delete(arguments);

    static const struct {
        const char *body, *word;
    } refused[] = {
        {"{\"messages\":[" ASK "],\"logit_bias\":[[65,1]]}", "object"},
        {"{\"messages\":[" ASK "],\"logit_bias\":{\"512\":1}}", "512"},
        {"{\"messages\":[" ASK "],\"logit_bias\":{\"-1\":1}}", "-1"},
        {"{\"messages\":[" ASK "],\"logit_bias\":{\"A\":1}}", "'A'"},
        {"{\"messages\":[" ASK "],\"logit_bias\":{\"65\":101}}", "[-100, 100]"},
        {"{\"messages\":[" ASK "],\"logit_bias\":{\"65\":true}}", "[-100, 100]"},
        {"{\"messages\":[" ASK "],\"logit_bias\":{\"65\":1,\"065\":2}}", "twice"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        check_chat_refused(port, refused[i].body, "logit_bias", refused[i].word);
}

/* Whether text is "yes" or "no", a space and a number from 1 to 99. */
static bool yes_no_number(const char *text)
{
    char word[4] = "";
    int number = 0, used = 0;
    return sscanf(text, "%3[a-z] %d%n", word, &number, &used) == 2 && (!strcmp(word, "yes") || !strcmp(word, "no")) &&
           number >= 1 && number <= 99 && text[used] == '\0' && strchr(text, ' ') == strrchr(text, ' ');
}

#define GRAMMAR "\"grammar\":\"root ::= (\\\"yes\\\" | \\\"no\\\") \\\" \\\" [1-9] [0-9]?\""

/* grammar (llama.cpp's): the answer is a word of the GBNF grammar, on both
 * endpoints, streamed as plain, after the reasoning when asked for; what
 * bmoe cannot hold to, and a grammar beside another hold or tools, are
 * refused. */
static void test_grammar(int port)
{
    char *text = chat(port, "{\"messages\":[" ASK "],\"max_tokens\":32," GRAMMAR "}", NULL);
    CHECK_MSG(text && yes_no_number(text), "chat under the grammar: \"%s\"", text ? text : "-");
    char *streamed = chat_streamed(port, "{\"stream\":true,\"messages\":[" ASK "],\"max_tokens\":32," GRAMMAR "}");
    CHECK_MSG(text && streamed && strcmp(text, streamed) == 0, "streamed \"%s\", plain \"%s\"", streamed, text);
    free(text);
    free(streamed);
    cJSON *root = post_ok(port, "/v1/completions", "{\"prompt\":\"Q: yes?\\nA:\",\"max_tokens\":32," GRAMMAR "}");
    const cJSON *choice = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "choices"), 0);
    CHECK_MSG(yes_no_number(string_at(choice, "text")), "completions under the grammar: \"%s\"",
              string_at(choice, "text"));
    cJSON_Delete(root);

    static const struct {
        const char *body, *word;
    } refused[] = {
        {"{\"messages\":[" ASK "],\"grammar\":\"root ::= item\"}", "undefined rule 'item'"},
        {"{\"messages\":[" ASK "],\"grammar\":7}", "GBNF"},
        {"{\"messages\":[" ASK "]," GRAMMAR ",\"response_format\":{\"type\":\"json_object\"}}", "give one"},
        {"{\"messages\":[" ASK "]," GRAMMAR "," TOOLS "}", "tool"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        check_chat_refused(port, refused[i].body, "grammar", refused[i].word);
}

/* llama.cpp's extra fields on the OpenAI endpoints: json_schema holds the
 * answer as response_format's json_schema does (the same answer), and
 * cache_prompt changes nothing (the same answer either way). */
static void test_llama_fields(int port)
{
    char *by_format = chat(port, "{\"messages\":[" ASK "],\"max_tokens\":64," JSON_ANSWER "}", NULL);
    char *by_field = chat(port, "{\"messages\":[" ASK "],\"max_tokens\":64,\"json_schema\":" SCHEMA "}", NULL);
    CHECK_MSG(by_format && by_field && by_format[0] == '{' && strcmp(by_format, by_field) == 0,
              "json_schema \"%s\", response_format \"%s\"", by_field ? by_field : "-", by_format ? by_format : "-");
    free(by_format);
    free(by_field);
    char *cached = chat(port, "{\"messages\":[" ASK "],\"max_tokens\":6,\"cache_prompt\":true}", NULL);
    char *uncached = chat(port, "{\"messages\":[" ASK "],\"max_tokens\":6,\"cache_prompt\":false}", NULL);
    char *plain = chat(port, "{\"messages\":[" ASK "],\"max_tokens\":6}", NULL);
    CHECK(cached && uncached && plain && strcmp(cached, plain) == 0 && strcmp(uncached, plain) == 0);
    free(cached);
    free(uncached);
    free(plain);
    check_refused(port, "/v1/chat/completions",
                  "{\"messages\":[" ASK "],\"json_schema\":" SCHEMA ",\"response_format\":{\"type\":\"text\"}}", 400,
                  "json_schema", "json_schema beside response_format");
    check_refused(port, "/v1/chat/completions", "{\"messages\":[" ASK "],\"json_schema\":\"{}\"}", 400, "json_schema",
                  "json_schema as text");
    check_refused(port, "/v1/chat/completions", "{\"messages\":[" ASK "],\"cache_prompt\":1}", 400, "cache_prompt",
                  "cache_prompt as a number");
}

static void test_refusals(int port)
{
    static const struct {
        const char *body, *param;
    } cases[] = {
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"presence_penalty\":2.5}", "presence_penalty"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"frequency_penalty\":\"1\"}", "frequency_penalty"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"repeat_penalty\":0}", "repeat_penalty"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"repeat_last_n\":-2}", "repeat_last_n"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"n\":2}", "n"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"tools\":[{\"type\":\"function\"}]}", "tools"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"logprobs\":1}", "logprobs"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"top_logprobs\":2}", "top_logprobs"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"logprobs\":true,\"top_logprobs\":21}",
         "top_logprobs"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"frobnicate\":1}", "frobnicate"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"temperature\":9}", "temperature"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"stop\":[1]}", "stop"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"max_tokens\":1,\"max_tokens\":2}", "max_tokens"},
        {"{\"messages\":[{\"role\":\"wizard\",\"content\":\"a\"}]}", "messages[0]"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}", "messages[0].content"},
        {"{\"messages\":[]}", "messages"},
        {"{\"model\":\"tiny.gguf\"}", "messages"},
        {"{\"model\":7,\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}", "model"},
        /* Qwen3's template reads no reasoning effort */
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"reasoning_effort\":\"low\"}", "reasoning_effort"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"reasoning_effort\":\"extreme\"}", "reasoning_effort"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"chat_template_kwargs\":{\"reasoning_effort\":\"high\"}}",
         "reasoning_effort"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"chat_template_kwargs\":{\"tools_in_prompt\":true}}",
         "chat_template_kwargs"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"chat_template_kwargs\":[1]}", "chat_template_kwargs"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"chat_template_kwargs\":{\"enable_thinking\":1}}",
         "chat_template_kwargs"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_refused(port, "/v1/chat/completions", cases[i].body, 400, cases[i].param, cases[i].body);
    /* a completion's logprobs is a count of alternatives */
    static const char *const completion_logprobs[] = {"{\"prompt\":\"a\",\"logprobs\":true}",
                                                      "{\"prompt\":\"a\",\"logprobs\":21}",
                                                      "{\"prompt\":\"a\",\"logprobs\":1,\"top_logprobs\":1}"};
    for (size_t i = 0; i < sizeof completion_logprobs / sizeof completion_logprobs[0]; i++)
        check_refused(port, "/v1/completions", completion_logprobs[i], 400, i < 2 ? "logprobs" : "top_logprobs",
                      completion_logprobs[i]);
    /* a raw completion renders no template */
    check_refused(port, "/v1/completions", "{\"prompt\":\"a\",\"reasoning_effort\":\"low\"}", 400,
                  "reasoning_effort", "a completion's reasoning_effort");
    test_response response;
    /* a model this server does not serve: 404, as OpenAI answers it */
    if (test_request(port, "POST", "/v1/chat/completions", NULL,
                     "{\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}",
                     &response) == 0) {
        check_error(&response, 404, "model", "unknown model");
        CHECK_MSG(response.body && strstr(response.body, "\"model_not_found\"") && strstr(response.body, "tiny.gguf"),
                  "unknown model: %s", response.body ? response.body : "");
    }
    free(response.raw);
    check_refused(port, "/v1/chat/completions", "{\"messages\":", 400, NULL, "bad JSON");
    if (test_request(port, "GET", "/health", "Origin: http://evil.example\r\n", NULL, &response) == 0)
        check_error(&response, 403, NULL, "foreign Origin");
    free(response.raw);
    char same[128];
    snprintf(same, sizeof same, "Origin: http://127.0.0.1:%d\r\n", port);
    if (test_request(port, "GET", "/health", same, NULL, &response) == 0)
        CHECK(response.status == 200);
    free(response.raw);
    /* over the 1 MiB this server was given */
    size_t big = (size_t)3 << 19;
    char *body = malloc(big + 1);
    if (body) {
        memset(body, ' ', big);
        body[big] = '\0';
        check_refused(port, "/v1/chat/completions", body, 413, NULL, "oversize body");
        free(body);
    }
}

/* With --max-queue 0 a request that arrives while one runs gets 429; the
 * running one is stopped by /api/cancel. The running one is a long prompt
 * (about 3600 tokens of the tiny model's byte-level vocabulary: some 0.5 s
 * of prefill in Release, more under ASan), which the cancel stops between
 * micro-batches. */
static void test_queue_and_cancel(int port)
{
    static const char word[] = "hello ";
    size_t words = 900, used = 0;
    char *long_run = malloc(words * (sizeof word - 1) + 64);
    if (!long_run)
        return;
    used += (size_t)sprintf(long_run, "{\"max_tokens\":1,\"prompt\":\"");
    for (size_t i = 0; i < words; i++)
        used += (size_t)sprintf(long_run + used, "%s", word);
    sprintf(long_run + used, "\"}");
    int fd = test_request_send(port, "POST", "/v1/completions", NULL, long_run, strlen(long_run));
    free(long_run);
    CHECK(fd >= 0);
    struct timespec pause = {0, 150 * 1000 * 1000};
    nanosleep(&pause, NULL);
    test_response response;
    if (test_request(port, "POST", "/v1/completions", NULL, "{\"prompt\":\"a\",\"max_tokens\":1}", &response) == 0) {
        check_error(&response, 429, NULL, "past the queue");
        CHECK(strstr(response.raw, "Retry-After: 1") != NULL);
    }
    free(response.raw);
    /* a schema bmoe cannot hold to is refused before the queue, not after it */
    check_refused(port, "/v1/completions",
                  "{\"prompt\":\"a\",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":"
                  "{\"type\":\"string\",\"pattern\":\"a\"}}}}",
                  400, "response_format", "a schema refused while the model is busy");
    if (test_request(port, "POST", "/api/cancel", NULL, "{}", &response) == 0)
        CHECK(response.status == 200);
    free(response.raw);
    if (fd >= 0 && test_response_read(fd, &response) == 0)
        check_error(&response, 503, NULL, "the cancelled run");
    free(response.raw);
    /* still serving */
    if (test_request(port, "GET", "/health", NULL, NULL, &response) == 0)
        CHECK(response.status == 200);
    free(response.raw);
}

static void test_api_key(void)
{
    test_server server;
    const char *args[] = {"-m", model, "-t", "1", "--api-key", "sesame", "--alias", "house-model", NULL};
    if (test_server_start(&server, args) != 0) {
        CHECK_MSG(false, "the keyed server did not start");
        return;
    }
    test_response response;
    if (test_request(server.port, "GET", "/v1/models", NULL, NULL, &response) == 0)
        check_error(&response, 401, NULL, "no key");
    free(response.raw);
    if (test_request(server.port, "GET", "/v1/models", "Authorization: Bearer wrong\r\n", NULL, &response) == 0)
        check_error(&response, 401, NULL, "wrong key");
    free(response.raw);
    if (test_request(server.port, "POST", "/tokenize", NULL, "{\"content\":\"a\"}", &response) == 0)
        check_error(&response, 401, NULL, "/tokenize without the key");
    free(response.raw);
    if (test_request(server.port, "GET", "/v1/models", "Authorization: Bearer sesame\r\n", NULL, &response) == 0)
        CHECK_MSG(response.status == 200 && response.body && strstr(response.body, "\"id\":\"house-model\""),
                  "--alias: %s", response.body ? response.body : "");
    free(response.raw);
    /* named by its alias or by its file; the answer names the alias */
    const char *names[] = {"house-model", "tiny.gguf", "tiny"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char body[256];
        snprintf(body, sizeof body,
                 "{\"model\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"max_tokens\":1}",
                 names[i]);
        if (test_request(server.port, "POST", "/v1/chat/completions", "Authorization: Bearer sesame\r\n", body,
                         &response) == 0)
            CHECK_MSG(response.status == 200 && response.body && strstr(response.body, "\"model\":\"house-model\""),
                      "model %s: %d %s", names[i], response.status, response.body ? response.body : "");
        free(response.raw);
    }
    if (test_request(server.port, "POST", "/v1/chat/completions", "Authorization: Bearer sesame\r\n",
                     "{\"model\":\"tiny.gg\",\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}",
                     &response) == 0)
        check_error(&response, 404, "model", "a name near the file's");
    free(response.raw);
    CHECK(test_server_stop(&server, SIGINT) == 0);
}

/* --expert-profile: written after every generation (the server may be
 * killed, never closed), read back by the next server. */
static void test_expert_profile(void)
{
    char profile[1300];
    snprintf(profile, sizeof profile, "%s/server.profile", tmp);
    unlink(profile);
    const char *args[] = {"-m", model, "-t", "1", "--moe-stream", "--cache-mb", "16", "--expert-profile", profile, NULL};
    test_server server;
    if (test_server_start(&server, args) != 0) {
        CHECK_MSG(false, "the server with --expert-profile did not start");
        return;
    }
    test_response response;
    if (test_request(server.port, "POST", "/v1/completions", NULL, "{\"prompt\":\"Once upon\",\"max_tokens\":4}",
                     &response) == 0)
        CHECK_MSG(response.status == 200, "completion: %d", response.status);
    free(response.raw);
    struct stat st;
    CHECK_MSG(stat(profile, &st) == 0 && st.st_size > 0, "no profile after a generation");
    CHECK(test_server_stop(&server, SIGKILL) == -1);
    if (test_server_start(&server, args) != 0) {
        CHECK_MSG(false, "the server did not start again on its profile");
        return;
    }
    /* the warm-up line comes before the listening line test_server_start waited for */
    size_t log_length = 0;
    char *log = cli_read_all(server.err_path, &log_length);
    CHECK_MSG(log && strstr(log, "experts read into the cache in the background"), "the second server: %s",
              log ? log : "(no log)");
    free(log);
    CHECK(test_server_stop(&server, SIGINT) == 0);
    unlink(profile);
}

int main(void)
{
    snprintf(tmp, sizeof tmp, "%s/server", test_tmp_dir());
    mkdir(tmp, 0755);
    snprintf(model, sizeof model, "%s/tiny.gguf", tmp);
    if (!cli_mkmodel("tiny-qwen3moe", model))
        return test_finish();
    test_flags();
    test_server server;
    const char *args[] = {"-m", model, "-t", "1", "--max-queue", "0", "--max-body", "1", NULL};
    if (test_server_start(&server, args) != 0) {
        CHECK_MSG(false, "bmoe-server did not start");
        return test_finish();
    }
    test_read_only(server.port);
    test_chat_equals_cli(server.port);
    test_reuse(server.port);
    test_events(server.port);
    test_logprobs(server.port);
    test_tools(server.port);
    test_structured(server.port);
    test_forced_calls(server.port);
    test_refusals(server.port);
    test_tokens(server.port);
    test_logit_bias_and_reasoning(server.port);
    test_grammar(server.port);
    test_llama_fields(server.port);
    test_queue_and_cancel(server.port);
    test_disconnect(server.port);
    CHECK_MSG(test_server_stop(&server, SIGTERM) == 0, "SIGTERM did not end the server with status 0");
    test_api_key();
    test_expert_profile();
    test_ngram();
    test_effort();
    test_swa_checkpoint();
    return test_finish();
}
