/* bmoe-cli --conversation on a generated Qwen3 model, its turns piped in:
 * each answer is printed on a line of its own; the first equals the
 * one-shot --chat answer to the same message; the second, which continues
 * the conversation through the KV cache, equals a fresh session's answer
 * to the whole conversation rendered at once; after /clear the first
 * message gets the first answer again; messages of several lines; --system-prompt starts each
 * conversation; Ctrl-C (SIGINT) stops an answer and the chat goes on;
 * the flags that do not belong with it are refused in one line. */
#include <cjson/cJSON.h>
#include <sys/stat.h>

#include "cli_run.h"

static char tmp[1024], model[1100];

/* The lines of out (malloc'ed copies), at most max; returns how many. */
static int split_lines(const char *out, char **lines, int max)
{
    int count = 0;
    while (*out && count < max) {
        const char *end = strchr(out, '\n');
        size_t length = end ? (size_t)(end - out) : strlen(out);
        lines[count] = strndup(out, length);
        count++;
        out += length + (end != NULL);
    }
    return count;
}

/* Runs a shell script; its stdout (malloc'ed) when it exited 0, else NULL (checked). */
static char *run_script(const char *script, char **err)
{
    cli_result r;
    char *out = NULL;
    if (cli_run_shell(script, &r) == 0) {
        CHECK_MSG(r.exit_code == 0, "%s: exit %d: %s", script, r.exit_code, r.err);
        if (r.exit_code == 0) {
            out = r.out;
            r.out = NULL;
        }
        if (err) {
            *err = r.err;
            r.err = NULL;
        }
    }
    cli_result_free(&r);
    return out;
}

/* The one-shot --chat answer to message (its raw text, trailing newline cut). */
static char *one_shot(const char *message)
{
    const char *args[] = {"-m", model, "-p", message, "-n", "12", "-t", "1", "--chat", NULL};
    cli_result r;
    char *text = NULL;
    if (cli_run(args, &r) == 0 && r.exit_code == 0 && cli_cut_report(&r)) {
        size_t length = r.out_length;
        while (length > 0 && r.out[length - 1] == '\n')
            length--;
        text = strndup(r.out, length);
    }
    CHECK_MSG(text != NULL, "--chat -p %s failed: %s", message, r.err ? r.err : "");
    cli_result_free(&r);
    return text;
}

/* A fresh session's answer (BMOE_DONE's text) to the conversation in messages_json, reasoning as think says. */
static char *session_answer(const char *messages_json, bool think)
{
    char request_path[1200], script[4096];
    snprintf(request_path, sizeof request_path, "%s/request.json", tmp);
    FILE *f = fopen(request_path, "wb");
    fprintf(f, "{\"cmd\":\"generate\",\"id\":1,\"n_predict\":12,\"think\":%s,\"messages\":%s}\n"
            "{\"cmd\":\"close\"}\n",
            think ? "true" : "false", messages_json);
    fclose(f);
    snprintf(script, sizeof script, "\"$BMOE_CLI\" -m '%s' --session --chat -t 1 < '%s'", model, request_path);
    char *out = run_script(script, NULL);
    const char *done = out ? strstr(out, "BMOE_DONE ") : NULL;
    char *text = NULL;
    if (done) {
        const char *end = strchr(done, '\n');
        char *line = strndup(done + 10, end ? (size_t)(end - done - 10) : strlen(done + 10));
        cJSON *json = cJSON_Parse(line);
        const cJSON *item = cJSON_GetObjectItemCaseSensitive(json, "text");
        text = cJSON_IsString(item) ? strdup(item->valuestring) : NULL;
        cJSON_Delete(json);
        free(line);
    }
    CHECK_MSG(text != NULL, "the session gave no answer to %s", messages_json);
    free(out);
    return text;
}

static char *json_string(const char *text)
{
    cJSON *string = cJSON_CreateString(text);
    char *printed = cJSON_PrintUnformatted(string);
    cJSON_Delete(string);
    return printed;
}

static void check_turns(void)
{
    char script[4096];
    snprintf(script, sizeof script,
             "printf 'Hello\\nHow are you?\\n/clear\\n\\n/help\\nHello\\n/bye\\nnever read\\n' | "
             "\"$BMOE_CLI\" -m '%s' --conversation -n 12 -t 1",
             model);
    char *err = NULL;
    char *out = run_script(script, &err);
    char *lines[8] = {0};
    int n = out ? split_lines(out, lines, 8) : 0;
    CHECK_MSG(n == 3, "three answers, one a line: %d lines: %s", n, out ? out : "-");
    char *first = one_shot("Hello");
    if (n == 3 && first) {
        CHECK_MSG(strcmp(lines[0], first) == 0, "turn 1 \"%s\", one-shot \"%s\"", lines[0], first);
        CHECK_MSG(strcmp(lines[2], lines[0]) == 0, "after /clear \"%s\", first \"%s\"", lines[2], lines[0]);
        char *answer = json_string(lines[0]);
        char messages[1024];
        snprintf(messages, sizeof messages,
                 "[{\"role\":\"user\",\"content\":\"Hello\"},{\"role\":\"assistant\",\"content\":%s},"
                 "{\"role\":\"user\",\"content\":\"How are you?\"}]",
                 answer);
        char *second = session_answer(messages, true);
        CHECK_MSG(second && strcmp(lines[1], second) == 0, "turn 2 \"%s\", the whole conversation at once \"%s\"",
                  lines[1], second ? second : "-");
        free(second);
        cJSON_free(answer);
    }
    CHECK_MSG(err && strstr(err, "a new conversation") && strstr(err, "/clear: forget"), "stderr: %s",
              err ? err : "-");
    int stats = 0;
    for (const char *at = err; at && (at = strstr(at, " tokens, ")) != NULL; at++)
        stats++;
    CHECK_MSG(stats == 3, "one figures line per answer: %d", stats);
    for (int i = 0; i < n; i++)
        free(lines[i]);
    free(first);
    free(out);
    free(err);

    /* a system prompt starts the conversation */
    snprintf(script, sizeof script,
             "printf 'Hello\\n' | \"$BMOE_CLI\" -m '%s' --conversation -sys 'Answer in French.' -n 12 -t 1", model);
    out = run_script(script, NULL);
    n = out ? split_lines(out, lines, 8) : 0;
    char *with_system = session_answer("[{\"role\":\"system\",\"content\":\"Answer in French.\"},"
                                       "{\"role\":\"user\",\"content\":\"Hello\"}]",
                                       true);
    CHECK_MSG(n == 1 && with_system && strcmp(lines[0], with_system) == 0, "-sys: \"%s\", session \"%s\"",
              n ? lines[0] : "-", with_system ? with_system : "-");
    for (int i = 0; i < n; i++)
        free(lines[i]);
    free(with_system);
    free(out);
}

/* Messages of several lines: Ollama's block between three quotes, and
 * lines ending in a backslash, reach the model as one message with its
 * newlines (the answers equal a session's to that message). */
static void check_multiline(void)
{
    char script[4096];
    snprintf(script, sizeof script,
             "printf '\"\"\"\\nHello\\nthere\\n\"\"\"\\n/clear\\nHello \\\\\\nthere\\n' | "
             "\"$BMOE_CLI\" -m '%s' --conversation -n 12 -t 1",
             model);
    char *out = run_script(script, NULL);
    char *lines[4] = {0};
    int n = out ? split_lines(out, lines, 4) : 0;
    char *block = session_answer("[{\"role\":\"user\",\"content\":\"Hello\\nthere\"}]", true);
    char *continued = session_answer("[{\"role\":\"user\",\"content\":\"Hello \\nthere\"}]", true);
    CHECK_MSG(n == 2 && block && continued && strcmp(lines[0], block) == 0 && strcmp(lines[1], continued) == 0,
              "multi-line messages: \"%s\" / \"%s\", expected \"%s\" / \"%s\"", n > 0 ? lines[0] : "-",
              n > 1 ? lines[1] : "-", block ? block : "-", continued ? continued : "-");
    for (int i = 0; i < n; i++)
        free(lines[i]);
    free(block);
    free(continued);
    free(out);
}

/* /set nothink: the next turns are rendered without reasoning (the answer
 * equals a session's to the same conversation with think false). */
static void check_think_toggle(void)
{
    char script[4096];
    snprintf(script, sizeof script,
             "printf '/set nothink\\nHello\\n' | \"$BMOE_CLI\" -m '%s' --conversation -n 12 -t 1", model);
    char *err = NULL;
    char *out = run_script(script, &err);
    char *lines[4] = {0};
    int n = out ? split_lines(out, lines, 4) : 0;
    char *expected = session_answer("[{\"role\":\"user\",\"content\":\"Hello\"}]", false);
    char *thinking = session_answer("[{\"role\":\"user\",\"content\":\"Hello\"}]", true);
    CHECK_MSG(n == 1 && expected && thinking && strcmp(lines[0], expected) == 0 && strcmp(expected, thinking) != 0 &&
                  err && strstr(err, "reasoning off"),
              "/set nothink: \"%s\", expected \"%s\" (with reasoning \"%s\")", n ? lines[0] : "-",
              expected ? expected : "-", thinking ? thinking : "-");
    for (int i = 0; i < n; i++)
        free(lines[i]);
    free(expected);
    free(thinking);
    free(out);
    free(err);
}

/* Ctrl-C during an answer stops it; the chat reads the next line. */
static void check_interrupt(void)
{
    char script[4096];
    snprintf(script, sizeof script,
             "d='%s/interrupt'; rm -rf \"$d\"; mkdir \"$d\" && mkfifo \"$d/in\" || exit 9; "
             /* a background job of a shell starts with SIGINT ignored; a terminal's chat does not */
             "timeout 120 env --default-signal=INT \"$BMOE_CLI\" -m '%s' --conversation -n -1 --ignore-eos -t 1 "
             "< \"$d/in\" > \"$d/out\" & pid=$!; exec 3> \"$d/in\"; printf 'Hello\\n' >&3; i=0; "
             "while [ ! -s \"$d/out\" ] && [ $i -lt 3000 ]; do sleep 0.02; i=$((i+1)); done; kill -INT $pid; "
             "sleep 0.3; printf '/clear\\n/bye\\n' >&3; exec 3>&-; wait $pid; status=$?; cat \"$d/out\"; "
             "exit $status",
             tmp, model);
    char *err = NULL;
    char *out = run_script(script, &err);
    CHECK_MSG(out && out[0], "the answer before the stop: \"%s\"", out ? out : "-");
    CHECK_MSG(err && strstr(err, "stopped: ") && strstr(err, "a new conversation") && !strstr(err, "SIGINT"),
              "Ctrl-C stops the answer, not the chat: %s", err ? err : "-");
    free(out);
    free(err);
}

static void check_refusals(void)
{
    static const struct {
        const char *flag, *value, *needle;
    } refused[] = {
        {"--session", NULL, "different jobs"},
        {"-p", "Hello", "not -p"},
        {"--logits-out", "/dev/null", "--logits-out"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        const char *args[] = {"-m", model, "--conversation", refused[i].flag, refused[i].value, NULL};
        cli_result r;
        if (cli_run(args, &r) == 0)
            CHECK_MSG(r.exit_code > 0 && cli_one_line_error(&r) && strstr(r.err, refused[i].needle),
                      "--conversation %s: exit %d: %s", refused[i].flag, r.exit_code, r.err);
        cli_result_free(&r);
    }
    const char *system_alone[] = {"-m", model, "--session", "--system-prompt", "x", NULL};
    cli_result r;
    if (cli_run(system_alone, &r) == 0)
        CHECK_MSG(r.exit_code > 0 && cli_one_line_error(&r) && strstr(r.err, "needs --conversation"),
                  "--system-prompt without --conversation: %s", r.err);
    cli_result_free(&r);
}

int main(void)
{
    snprintf(tmp, sizeof tmp, "%s/cli-conversation", test_tmp_dir());
    mkdir(tmp, 0755);
    snprintf(model, sizeof model, "%s/qwen3.gguf", tmp);
    if (!cli_mkmodel("tiny-qwen3moe", model))
        return test_finish();
    check_turns();
    check_multiline();
    check_think_toggle();
    check_interrupt();
    check_refusals();
    return test_finish();
}
