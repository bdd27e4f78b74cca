/* bmoe-cli --chat end to end on generated models: the reasoning split of
 * the telemetry contract (delta_reasoning / delta_text, "reset":1 replacing
 * what was delivered, === answer === the answer only), checked against the
 * split the contract describes applied to the raw text a fresh run
 * generates for the same rendered prompt (--render-template, then -f
 * without --chat): with no marker the answer is the text byte for byte; a
 * closing </think> that no <think> opened makes what came before it
 * reasoning (trimmed), and a line with reset delivers that; the answer is
 * what follows (its leading whitespace dropped).
 *
 * A random model emits </think> only now and then, so several prompts are
 * tried and at least one must show the reclassification. A second model,
 * the same file with a template whose generation prompt opens the span (as
 * DeepSeek R1's does), must report think_ctl none in a session and deliver
 * its output as reasoning. --reasoning-effort reaches gpt-oss's template
 * and is refused where the template reads none. */
#include <cjson/cJSON.h>
#include <sys/stat.h>

#include "bmoe.h"
#include "cli_run.h"

#define N_PREDICT "200"

static char tmp[1024], model[1100], opened_model[1100], qwen_template[1100];

static char *render(const char *template_path, const char *user)
{
    char context_path[1200];
    snprintf(context_path, sizeof context_path, "%s/chat-context.json", tmp);
    cJSON *context = cJSON_CreateObject();
    cJSON *messages = cJSON_AddArrayToObject(context, "messages");
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", "user");
    cJSON_AddStringToObject(m, "content", user);
    cJSON_AddItemToArray(messages, m);
    cJSON_AddBoolToObject(context, "add_generation_prompt", true);
    cJSON_AddBoolToObject(context, "enable_thinking", true);
    char *json = cJSON_PrintUnformatted(context);
    cJSON_Delete(context);
    FILE *f = fopen(context_path, "wb");
    fputs(json, f);
    fclose(f);
    cJSON_free(json);
    const char *args[] = {"--render-template", template_path, "--template-context", context_path, NULL};
    cli_result r;
    char *out = NULL;
    if (cli_run(args, &r) == 0 && r.exit_code == 0) {
        out = r.out;
        r.out = NULL;
    }
    CHECK_MSG(out != NULL, "--render-template failed: %s", r.err ? r.err : "");
    cli_result_free(&r);
    return out;
}

/* The text between === answer === and === perf ===. */
static char *answer_section(const char *out)
{
    const char *start = strstr(out, "=== answer ===\n");
    const char *end = start ? strstr(start, "\n=== perf ===\n") : NULL;
    if (!start || !end)
        return NULL;
    start += strlen("=== answer ===\n");
    char *text = malloc((size_t)(end - start) + 1);
    memcpy(text, start, (size_t)(end - start));
    text[end - start] = '\0';
    return text;
}

/* The raw text a fresh run generates for the rendered prompt. */
static char *raw_output(const char *path, const char *prompt)
{
    char prompt_path[1200];
    snprintf(prompt_path, sizeof prompt_path, "%s/chat-prompt.txt", tmp);
    FILE *f = fopen(prompt_path, "wb");
    fputs(prompt, f);
    fclose(f);
    const char *args[] = {"-m", path, "-f", prompt_path, "-n", N_PREDICT, "-t", "1", "--progress", NULL};
    cli_result r;
    char *text = NULL;
    if (cli_run(args, &r) == 0 && r.exit_code == 0)
        text = answer_section(r.out);
    CHECK_MSG(text != NULL, "the raw run failed: %s", r.err ? r.err : "");
    cli_result_free(&r);
    return text;
}

typedef struct split {
    char *reasoning, *text, *answer; /* the deltas applied, and === answer === */
    int resets;
} split;

static void append(char **into, const char *text)
{
    size_t a = *into ? strlen(*into) : 0, b = strlen(text);
    *into = realloc(*into, a + b + 1);
    memcpy(*into + a, text, b + 1);
}

static bool chat_output(const char *path, const char *user, split *s)
{
    memset(s, 0, sizeof *s);
    append(&s->reasoning, "");
    append(&s->text, "");
    const char *args[] = {"-m", path, "-p", user, "-n", N_PREDICT, "-t", "1", "--chat", "--progress", NULL};
    cli_result r;
    if (cli_run(args, &r) != 0 || r.exit_code != 0) {
        CHECK_MSG(false, "--chat failed: %s", r.err ? r.err : "");
        cli_result_free(&r);
        return false;
    }
    char *save = NULL;
    s->answer = answer_section(r.out);
    for (char *line = strtok_r(r.out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, "BMOE_PROGRESS ", 14) != 0)
            continue;
        cJSON *json = cJSON_Parse(line + 14);
        const cJSON *dr = cJSON_GetObjectItemCaseSensitive(json, "delta_reasoning");
        const cJSON *dt = cJSON_GetObjectItemCaseSensitive(json, "delta_text");
        const cJSON *reset = cJSON_GetObjectItemCaseSensitive(json, "reset");
        CHECK(cJSON_IsString(dr) && cJSON_IsString(dt));
        if (reset) {
            CHECK(cJSON_IsNumber(reset) && reset->valuedouble == 1);
            s->resets++;
            s->reasoning[0] = s->text[0] = '\0';
        }
        if (cJSON_IsString(dr) && cJSON_IsString(dt)) {
            append(&s->reasoning, dr->valuestring);
            append(&s->text, dt->valuestring);
        }
        cJSON_Delete(json);
    }
    cli_result_free(&r);
    return s->answer != NULL;
}

static void split_free(split *s)
{
    free(s->reasoning);
    free(s->text);
    free(s->answer);
}

static bool is_space(char c)
{
    return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}

/* text[from, to) without the whitespace at its ends (trim_start, trim_end). */
static char *cut(const char *text, size_t from, size_t to, bool trim_start, bool trim_end)
{
    while (trim_start && from < to && is_space(text[from]))
        from++;
    while (trim_end && to > from && is_space(text[to - 1]))
        to--;
    char *out = malloc(to - from + 1);
    memcpy(out, text + from, to - from);
    out[to - from] = '\0';
    return out;
}

/* The Qwen3 model: returns 1 when the prompt's output was reclassified, 0
 * when it had no marker, -1 when its shape is not one this test predicts. */
static int check_prompt(const char *user)
{
    char *prompt = render(qwen_template, user);
    char *raw = prompt ? raw_output(model, prompt) : NULL;
    free(prompt);
    if (!raw)
        return -1;
    const char *open = strstr(raw, "<think>"), *close = strstr(raw, "</think>");
    int shape = -1;
    char *reasoning = NULL, *answer = NULL;
    if (!open && !close) {
        shape = 0;
        reasoning = cut(raw, 0, 0, false, false);
        answer = cut(raw, 0, strlen(raw), false, false);
    } else if (close && (!open || open > close)) {
        size_t at = (size_t)(close - raw);
        bool shown = false; /* answer text went out before the marker */
        for (size_t i = 0; i < at; i++)
            shown = shown || !is_space(raw[i]);
        if (shown) {
            shape = 1;
            reasoning = cut(raw, 0, at, true, true);
            answer = cut(raw, at + 8, strlen(raw), true, false);
        }
    }
    if (shape >= 0) {
        split s;
        if (chat_output(model, user, &s)) {
            CHECK_MSG(strcmp(s.answer, answer) == 0, "\"%s\": === answer === \"%s\", expected \"%s\"", user, s.answer,
                      answer);
            CHECK_MSG(strcmp(s.text, answer) == 0, "\"%s\": delta_text joins to \"%s\", expected \"%s\"", user, s.text,
                      answer);
            CHECK_MSG(strcmp(s.reasoning, reasoning) == 0, "\"%s\": delta_reasoning joins to \"%s\", expected \"%s\"",
                      user, s.reasoning, reasoning);
            CHECK_MSG(s.resets == shape, "\"%s\": %d resets, expected %d", user, s.resets, shape);
        }
        split_free(&s);
    }
    free(reasoning);
    free(answer);
    free(raw);
    return shape;
}

/* The same model with a template whose generation prompt opens the span. */
static const char opened_template[] =
    "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n<think>\\n' }}{%- endif %}";

/* Writes opened_model: model's bytes with its template replaced in place by
 * opened_template padded (a Jinja comment) to the same length. */
static bool make_opened_model(void)
{
    size_t model_length = 0, template_length = 0;
    char *bytes = test_read_file(model, &model_length);
    char *original = test_read_file(qwen_template, &template_length);
    bool ok = false;
    if (bytes && original && template_length > sizeof opened_template + 8) {
        for (size_t i = 0; i + template_length <= model_length; i++) {
            if (memcmp(bytes + i, original, template_length) != 0)
                continue;
            size_t n = sizeof opened_template - 1;
            memcpy(bytes + i, opened_template, n);
            memcpy(bytes + i + n, "{#", 2);
            memset(bytes + i + n + 2, ' ', template_length - n - 4);
            memcpy(bytes + i + template_length - 2, "#}", 2);
            FILE *f = fopen(opened_model, "wb");
            ok = f && fwrite(bytes, 1, model_length, f) == model_length;
            if (f)
                fclose(f);
            break;
        }
    }
    CHECK_MSG(ok, "the model does not hold the Qwen3 template of shared/");
    free(bytes);
    free(original);
    return ok;
}

static void check_opened(void)
{
    if (!make_opened_model())
        return;
    /* the session states it: the model reasons on every turn */
    char script[4096];
    snprintf(script, sizeof script, "echo '{\"cmd\":\"close\"}' | \"$BMOE_CLI\" -m '%s' --session --chat -t 1",
             opened_model);
    cli_result r;
    if (cli_run_shell(script, &r) == 0) {
        CHECK_MSG(r.exit_code == 0 && strstr(r.out, "\"think_ctl\":\"none\""), "READY: %s", r.out);
        cli_result_free(&r);
    }
    const char *user = "Think about it";
    /* the raw run of the opened prompt (what the template renders, written
     * out here): the whole output until </think> is reasoning */
    char rendered[512];
    snprintf(rendered, sizeof rendered, "<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n<think>\n", user);
    char *raw = raw_output(opened_model, rendered);
    split s;
    if (raw && chat_output(opened_model, user, &s)) {
        const char *close = strstr(raw, "</think>");
        size_t at = close ? (size_t)(close - raw) : strlen(raw);
        char *reasoning = cut(raw, 0, at, true, true);
        char *answer = close ? cut(raw, at + 8, strlen(raw), true, false) : cut(raw, 0, 0, false, false);
        CHECK_MSG(strcmp(s.reasoning, reasoning) == 0, "opened span: reasoning \"%s\", expected \"%s\"", s.reasoning,
                  reasoning);
        CHECK_MSG(strcmp(s.text, answer) == 0 && strcmp(s.answer, answer) == 0, "opened span: answer \"%s\"", s.answer);
        CHECK(s.resets == 0);
        CHECK(strlen(reasoning) > 0);
        free(reasoning);
        free(answer);
    }
    split_free(&s);
    free(raw);
}

/* The greedy --chat output (text and report) of path for "Hello", with
 * --reasoning-effort effort unless NULL; its exit status in *status. */
static char *effort_run(const char *path, const char *effort, int *status, char **err)
{
    const char *args[] = {"-m", path, "-p", "Hello", "-n", "16", "-t", "1", "--chat",
                          effort ? "--reasoning-effort" : NULL, effort, NULL};
    cli_result r;
    *status = -1;
    *err = NULL;
    if (cli_run(args, &r) != 0)
        return NULL;
    *status = r.exit_code;
    char *text = r.exit_code == 0 && cli_cut_report(&r) ? strndup(r.out, r.out_length) : NULL;
    *err = r.err ? strdup(r.err) : NULL;
    cli_result_free(&r);
    return text;
}

/* --reasoning-effort reaches the template: on gpt-oss (whose template
 * writes "Reasoning: medium" unless told) medium answers as no flag does and
 * low and high answer otherwise on this random model; on Qwen3 (whose
 * template reads no effort) the flag is refused in one line. */
static void check_effort(const char *gptoss_path)
{
    const char *efforts[] = {NULL, "low", "medium", "high"};
    char *text[4];
    for (int i = 0; i < 4; i++) {
        int status;
        char *err;
        text[i] = effort_run(gptoss_path, efforts[i], &status, &err);
        CHECK_MSG(text[i] != NULL, "gpt-oss --reasoning-effort %s: exit %d: %s", efforts[i] ? efforts[i] : "(unset)",
                  status, err ? err : "");
        free(err);
    }
    if (text[0] && text[1] && text[2] && text[3]) {
        CHECK_MSG(strcmp(text[0], text[2]) == 0, "--reasoning-effort medium is not the template's default");
        CHECK_MSG(strcmp(text[1], text[2]) != 0 && strcmp(text[3], text[2]) != 0,
                  "low or high answered as medium: the effort did not reach the template");
    }
    for (int i = 0; i < 4; i++)
        free(text[i]);
    int status;
    char *err;
    char *refused = effort_run(model, "low", &status, &err);
    CHECK_MSG(!refused && status == 1 && err && strstr(err, "does not read reasoning_effort") &&
                  strchr(err, '\n') == strrchr(err, '\n'),
              "Qwen3 --reasoning-effort low: exit %d: %s", status, err ? err : "");
    free(refused);
    free(err);
}

/* --json-schema on gpt-oss: reasoning on, the hold waits for the final
 * message (this random model never writes its header: any text, exit 0);
 * reasoning off, the answer is the value itself. */
static void check_json_answer(const char *gptoss_path)
{
    for (int off = 0; off < 2; off++) {
        const char *args[] = {"-m", gptoss_path, "-p", "Hello", "-n", "16", "-t", "1", "--chat",
                              "--json-schema", "{\"type\":\"boolean\"}", off ? "--no-think" : NULL, NULL};
        cli_result r;
        if (cli_run(args, &r) != 0) {
            CHECK(false);
            continue;
        }
        bool cut = r.exit_code == 0 && cli_cut_report(&r);
        CHECK_MSG(cut, "gpt-oss --json-schema%s: exit %d: %s", off ? " --no-think" : "", r.exit_code,
                  r.err ? r.err : "");
        size_t length = r.out_length;
        while (cut && length > 0 && r.out[length - 1] == '\n') /* the line the CLI ends its text with */
            length--;
        if (cut && off)
            CHECK_MSG((length == 4 && memcmp(r.out, "true", 4) == 0) || (length == 5 && memcmp(r.out, "false", 5) == 0),
                      "gpt-oss --no-think answered \"%.*s\"", (int)r.out_length, r.out);
        cli_result_free(&r);
    }
}

/* --json-schema on Qwen3 with its reasoning on: the reasoning is free (a
 * token pushed by --logit-bias fills it to the -n limit) in a span the
 * prompt opened, and once the model closes it (pushed to </think>) the
 * answer after the template's "\n\n" is the value itself. */
static void check_json_after_reasoning(void)
{
    bmoe_error error = {0};
    bmoe_model *loaded = bmoe_model_load(model, NULL, &error);
    int32_t close = -1;
    CHECK_MSG(loaded && bmoe_tokenize(loaded, "</think>", 8, false, true, &close, 1, &error) == 1,
              "</think> is one token: %s", error.message);
    bmoe_model_free(loaded);
    char bias[64];
    for (int closed = 0; closed < 2; closed++) {
        snprintf(bias, sizeof bias, closed ? "%d+100" : "65+100", close); /* 65: 'A' */
        const char *args[] = {"-m", model, "-p", "Hello", "-n", closed ? "16" : "8", "-t", "1", "--chat",
                              "--json-schema", "{\"type\":\"boolean\"}", "--logit-bias", bias, NULL};
        cli_result r;
        if (cli_run(args, &r) != 0) {
            CHECK(false);
            continue;
        }
        bool cut = r.exit_code == 0 && cli_cut_report(&r);
        CHECK_MSG(cut, "--json-schema with reasoning: exit %d: %s", r.exit_code, r.err ? r.err : "");
        size_t length = r.out_length;
        while (cut && length > 0 && r.out[length - 1] == '\n') /* the line the CLI ends its text with */
            length--;
        static const char reasoned[] = "</think>\n\n";
        size_t n = sizeof reasoned - 1;
        if (cut && closed)
            CHECK_MSG(length > n && memcmp(r.out, reasoned, n) == 0 &&
                          ((length == n + 4 && memcmp(r.out + n, "true", 4) == 0) ||
                           (length == n + 5 && memcmp(r.out + n, "false", 5) == 0)) &&
                          strstr(r.err, "stopped: end of generation"),
                      "after </think>: \"%.*s\"", (int)r.out_length, r.out);
        else if (cut)
            CHECK_MSG(length == 8 && memcmp(r.out, "AAAAAAAA", 8) == 0 && strstr(r.err, "stopped: token limit"),
                      "free reasoning: \"%.*s\"", (int)r.out_length, r.out);
        cli_result_free(&r);
    }
}

/* --grammar-file: the text after a raw prompt is a word of the grammar,
 * ended by the model's end of generation; with --chat the reasoning comes
 * first (pushed to </think> at once here) and the word after it. */
static void check_grammar(void)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/answer.gbnf", tmp);
    FILE *f = fopen(path, "wb");
    fputs("# a yes or a no, then a number\nroot ::= (\"Answer: \" (\"yes\" | \"no\")\n  \" \" [1-9] [0-9]?)\n", f);
    fclose(f);
    const char *args[] = {"-m", model, "-p", "Hello", "-n", "32", "-t", "1", "--grammar-file", path, NULL};
    cli_result r;
    if (cli_run(args, &r) == 0) {
        bool cut = r.exit_code == 0 && cli_cut_report(&r);
        char word[64] = "";
        int number = 0, used = 0;
        bool matched = cut && sscanf(r.out, "HelloAnswer: %3[a-z] %d%n", word, &number, &used) == 2 &&
                       (!strcmp(word, "yes") || !strcmp(word, "no")) && number >= 1 && number <= 99 &&
                       strspn(r.out + used, "\n") == strlen(r.out + used) && strstr(r.err, "end of generation");
        CHECK_MSG(matched, "--grammar-file: exit %d: \"%s\" %s", r.exit_code, r.out, r.err);
    }
    cli_result_free(&r);
}

int main(void)
{
    snprintf(tmp, sizeof tmp, "%s/cli-chat", test_tmp_dir());
    mkdir(tmp, 0755);
    snprintf(model, sizeof model, "%s/qwen3.gguf", tmp);
    snprintf(opened_model, sizeof opened_model, "%s/qwen3-opened.gguf", tmp);
    test_shared_path(qwen_template, sizeof qwen_template, "data/chat-templates/Qwen-Qwen3-0.6B.jinja");
    bool made = cli_mkmodel("tiny-qwen3moe", model);
    static const char *const prompts[] = {"The cat sat", "Count to ten", "Hello", "Tell me a story", "What is 2+2?",
                                          "Why", "Once upon a time", "Explain gravity", "Hi there", "Name a color",
                                          "Who are you", "Why not"};
    int reclassified = 0, plain = 0;
    for (size_t i = 0; made && i < sizeof prompts / sizeof prompts[0]; i++) {
        /* sanitized: until an output of each shape went through --chat; the
         * later prompts only take the same paths again */
        if (TEST_SANITIZED && reclassified >= 1 && plain >= 1)
            break;
        int shape = check_prompt(prompts[i]);
        reclassified += shape == 1;
        plain += shape == 0;
    }
    printf("--chat: %d outputs reclassified by </think>, %d without markers\n", reclassified, plain);
    CHECK_MSG(reclassified >= 1, "no prompt made the model close a span it had not opened");
    CHECK(plain >= 1);
    if (made) {
        check_opened();
        check_json_after_reasoning();
        check_grammar();
    }
    char gptoss[1100];
    snprintf(gptoss, sizeof gptoss, "%s/gpt-oss.gguf", tmp);
    bool made_gptoss = cli_mkmodel("tiny-gpt-oss", gptoss);
    if (made && made_gptoss)
        check_effort(gptoss);
    if (made_gptoss)
        check_json_answer(gptoss);
    return test_finish();
}
