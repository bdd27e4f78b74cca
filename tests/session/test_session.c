/* bmoe-cli --session driven as a client would drive it, through pipes, on a
 * model bmoe-mkmodel generates (tiny-qwen3moe, with Qwen3's real template).
 *
 * Expected values never come from the session's own output for the same
 * input. A continued turn's answer must equal what a fresh bmoe-cli prints
 * for the whole conversation: the test renders that conversation itself
 * (--render-template with the family's template from shared/, a context it
 * builds from the earlier turns' BMOE_DONE texts) and runs a one-shot
 * generation on the text, so the prompt's token count comes from that fresh
 * run too. Prefix reuse then means: n_prompt (the tokens this turn
 * prefilled) is at most the fresh prompt minus the previous turn's whole
 * prompt, and at least the fresh prompt minus what the cache held. The
 * rest is the contract's text: the line order, every BMOE_DONE and
 * BMOE_DECIDE key with its type, the deltas joining to the final text,
 * fatal:false errors that leave the session working, cancel during the
 * decode and during the prefill, decide's log-probabilities equal to a
 * fresh prefill's, EOF and close ending with exit 0, the CSV across turns;
 * on tiny-gpt-oss, think_ctl prefill and a think:false turn equal to a fresh
 * run on the prefill the contract describes. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli_run.h"
#include "line_reader.h"

#define WAIT_MS 120000
#define N_CTX "4096"

static char tmp[1024], model[1100], template_path[1100], gptoss_model[1100], gptoss_template[1100];

/* ---- a session child --------------------------------------------------- */

typedef struct child {
    pid_t pid;
    int in, out;
    line_reader lines;       /* of out */
    char err_path[1200];
} child;

static bool child_start(child *c, const char *const *args)
{
    memset(c, 0, sizeof *c);
    char binary[1024];
    snprintf(binary, sizeof binary, "%s/bmoe-cli", BMOE_BIN_DIR);
    static int serial;
    snprintf(c->err_path, sizeof c->err_path, "%s/session-%d-%d.err", tmp, (int)getpid(), serial++);
    int to_child[2], from_child[2];
    if (pipe(to_child) != 0 || pipe(from_child) != 0)
        return false;
    const char *argv[48];
    int n = 0;
    argv[n++] = binary;
    for (int i = 0; args[i] && n < 47; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, to_child[0], 0);
    posix_spawn_file_actions_adddup2(&actions, from_child[1], 1);
    posix_spawn_file_actions_addopen(&actions, 2, c->err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addclose(&actions, to_child[1]);
    posix_spawn_file_actions_addclose(&actions, from_child[0]);
    int spawned = posix_spawn(&c->pid, binary, &actions, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    close(to_child[0]);
    close(from_child[1]);
    c->in = to_child[1];
    c->out = from_child[0];
    c->lines.fd = c->out;
    return spawned == 0;
}

static void child_send_bytes(child *c, const void *bytes, size_t length)
{
    const char *p = bytes;
    while (length > 0) {
        ssize_t wrote = write(c->in, p, length);
        if (wrote < 0 && errno == EINTR)
            continue;
        if (wrote <= 0) {
            CHECK_MSG(false, "writing to the session failed: %s", strerror(errno));
            return;
        }
        p += wrote;
        length -= (size_t)wrote;
    }
}

static void child_send(child *c, const char *line)
{
    child_send_bytes(c, line, strlen(line));
    child_send_bytes(c, "\n", 1);
}

/* The next line of stdout (malloc'd), NULL at EOF or after the wait. */
static char *child_line(child *c)
{
    return line_reader_next(&c->lines, WAIT_MS);
}

/* Closes stdin, reads what is left, waits; returns the exit status (-1: a signal). */
static int child_finish(child *c)
{
    if (c->in >= 0)
        close(c->in);
    c->in = -1;
    char *line;
    while ((line = child_line(c)) != NULL)
        free(line);
    int status = 0;
    while (waitpid(c->pid, &status, 0) < 0 && errno == EINTR) {
    }
    close(c->out);
    line_reader_free(&c->lines);
    size_t length;
    char *err = cli_read_all(c->err_path, &length);
    if (err && length > 0)
        fprintf(stderr, "(session stderr) %s", err);
    free(err);
    unlink(c->err_path);
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    return -1;
}

static bool starts_with(const char *text, const char *prefix)
{
    return strncmp(text, prefix, strlen(prefix)) == 0;
}

/* The JSON of a "TAG {...}" line. */
static cJSON *line_json(const char *line, const char *tag)
{
    size_t n = strlen(tag);
    if (!starts_with(line, tag) || line[n] != ' ')
        return NULL;
    return cJSON_Parse(line + n + 1);
}

static double number_of(const cJSON *object, const char *key)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, key);
    return cJSON_IsNumber(item) ? item->valuedouble : NAN;
}

static const char *string_of(const cJSON *object, const char *key)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, key);
    return cJSON_IsString(item) ? item->valuestring : NULL;
}

static bool bool_of(const cJSON *object, const char *key, bool *value)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, key);
    if (!cJSON_IsBool(item))
        return false;
    *value = cJSON_IsTrue(item);
    return true;
}

/* ---- the contract's keys ----------------------------------------------- */

static const char *const done_numbers[] = {
    "id", "tokens", "tok_s", "prefill_s", "prefill_tps", "load_s", "ttft_s", "cache_hit_pct", "n_prompt",
    "n_past",
    "compute_s_tok", "io_s_tok", "cache_resident_mib", "cache_budget_mib", "read_mib", "stall_s_tok", "mgmt_s_tok",
    "majflt_tok", "cpu_s_tok", "prefill_cpu_s", "prefill_read_mib", "prefill_io_s", "prefill_stall_s",
    "prefill_mgmt_s", "prefill_dev_tokens", "prefill_dev_nodes", "prefill_dev_read_mib", "prefill_dev_stall_s",
    "token_demand_mib", "mtp_drafted", "mtp_accepted", "mtp_decodes", "mtp_draft_s_tok", "drafted_steps",
    "loop_overhead_s_tok", NULL};
static const char *const decide_numbers[] = {
    "id", "best", "n_tokens", "n_reused", "n_prefilled", "restore_s", "store_s", "prefill_s", "prefill_cpu_s",
    "prefill_read_mib", "prefill_io_s", "prefill_stall_s", "prefill_mgmt_s", "prefill_dev_tokens",
    "prefill_dev_read_mib", "prefill_dev_stall_s", "prefill_dev_routed", "prefill_dev_demand", "prefix_state_mib",
    NULL};
static const char *const progress_numbers[] = {"step", "steps", "wall_ms", "io_ms", "compute_ms", "mgmt_ms",
                                               "stall_ms", "read_mb", "cache_hit_pct", "majflt", "cpu_ms",
                                               "dense_resident_frac", NULL};

static bool has_numbers(const cJSON *object, const char *const *keys, const char *what)
{
    bool ok = true;
    for (int i = 0; keys[i]; i++) {
        bool present = isfinite(number_of(object, keys[i]));
        CHECK_MSG(present, "%s: no number \"%s\"", what, keys[i]);
        ok = ok && present;
    }
    return ok;
}

/* ---- one request's answer ---------------------------------------------- */

typedef struct answer {
    cJSON *done;        /* BMOE_DONE or BMOE_DECIDE, or NULL */
    cJSON *error;       /* BMOE_ERROR, or NULL */
    char reasoning[1 << 16], text[1 << 16]; /* the deltas applied */
    int progress;
    bool began;
} answer;

static void answer_free(answer *a)
{
    cJSON_Delete(a->done);
    cJSON_Delete(a->error);
    a->done = a->error = NULL;
}

/* Reads lines until the answer to request id: BMOE_BEGIN, the per-token
 * lines and BMOE_DONE / BMOE_DECIDE, or a BMOE_ERROR with that id. Errors of
 * other ids met on the way go to *others (may be NULL: then they fail). */
static bool read_answer(child *c, int64_t id, answer *a, cJSON **others, int max_others)
{
    memset(a, 0, sizeof *a);
    int n_others = 0;
    char *line;
    while ((line = child_line(c)) != NULL) {
        cJSON *json;
        if ((json = line_json(line, "BMOE_ERROR")) != NULL) {
            bool fatal = true;
            CHECK(bool_of(json, "fatal", &fatal) && string_of(json, "msg") && isfinite(number_of(json, "id")));
            if ((int64_t)number_of(json, "id") == id && !a->began) {
                a->error = json;
                free(line);
                return true;
            }
            if (others && n_others < max_others) {
                others[n_others++] = json;
            } else {
                CHECK_MSG(false, "unexpected error line: %s", line);
                cJSON_Delete(json);
            }
        } else if ((json = line_json(line, "BMOE_BEGIN")) != NULL) {
            CHECK_MSG(!a->began && (int64_t)number_of(json, "id") == id, "%s", line);
            a->began = true;
            cJSON_Delete(json);
        } else if ((json = line_json(line, "BMOE_PROGRESS")) != NULL) {
            CHECK_MSG(a->began, "a progress line before BMOE_BEGIN");
            has_numbers(json, progress_numbers, "BMOE_PROGRESS");
            const char *dr = string_of(json, "delta_reasoning"), *dt = string_of(json, "delta_text");
            CHECK(dr && dt);
            const cJSON *reset = cJSON_GetObjectItemCaseSensitive(json, "reset");
            if (reset) {
                CHECK(cJSON_IsNumber(reset) && reset->valuedouble == 1);
                a->reasoning[0] = a->text[0] = '\0';
            }
            if (dr && dt && strlen(a->reasoning) + strlen(dr) < sizeof a->reasoning &&
                strlen(a->text) + strlen(dt) < sizeof a->text) {
                strcat(a->reasoning, dr);
                strcat(a->text, dt);
            }
            a->progress++;
            cJSON_Delete(json);
        } else if ((json = line_json(line, "BMOE_LOAD")) != NULL) {
            CHECK(isfinite(number_of(json, "mb")) && isfinite(number_of(json, "ms")));
            cJSON_Delete(json);
        } else if ((json = line_json(line, "BMOE_DONE")) != NULL || (json = line_json(line, "BMOE_DECIDE")) != NULL) {
            CHECK_MSG(a->began && (int64_t)number_of(json, "id") == id, "%s", line);
            a->done = json;
            free(line);
            return true;
        } else {
            CHECK_MSG(false, "a line the contract does not have: %.200s", line);
        }
        free(line);
    }
    CHECK_MSG(false, "the session ended before answering request %lld", (long long)id);
    return false;
}

/* A generate's BMOE_DONE: every key, and the deltas add up to its text. */
static bool check_done(const answer *a, bool cancelled)
{
    CHECK_MSG(a->done != NULL, "no BMOE_DONE");
    if (!a->done)
        return false;
    bool ok = has_numbers(a->done, done_numbers, "BMOE_DONE");
    bool was_cancelled = !cancelled;
    CHECK(bool_of(a->done, "cancelled", &was_cancelled) && was_cancelled == cancelled);
    const char *text = string_of(a->done, "text"), *reasoning = string_of(a->done, "reasoning");
    CHECK(text && reasoning);
    if (text && reasoning) {
        CHECK_MSG(strcmp(text, a->text) == 0, "deltas \"%s\" do not add up to the text \"%s\"", a->text, text);
        CHECK(strcmp(reasoning, a->reasoning) == 0);
    }
    return ok && text && reasoning && was_cancelled == cancelled;
}

/* ---- a fresh process for the same conversation ------------------------- */

typedef struct message {
    const char *role;
    char *content;
} message;

/* The conversation rendered by --render-template with the family's
 * template, then generated by a one-shot bmoe-cli. */
static bool fresh_answer(const message *messages, int n, int n_predict, bool ignore_eos, char **text, int *n_tokens)
{
    *text = NULL;
    *n_tokens = -1;
    cJSON *context = cJSON_CreateObject();
    cJSON *list = cJSON_AddArrayToObject(context, "messages");
    for (int i = 0; i < n; i++) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", messages[i].role);
        cJSON_AddStringToObject(m, "content", messages[i].content);
        cJSON_AddItemToArray(list, m);
    }
    cJSON_AddBoolToObject(context, "add_generation_prompt", true);
    cJSON_AddBoolToObject(context, "enable_thinking", true);
    cJSON_AddStringToObject(context, "bos_token", "");
    cJSON_AddStringToObject(context, "eos_token", "");
    char *json = cJSON_PrintUnformatted(context);
    cJSON_Delete(context);
    char context_path[1200], prompt_path[1200];
    snprintf(context_path, sizeof context_path, "%s/fresh-context.json", tmp);
    snprintf(prompt_path, sizeof prompt_path, "%s/fresh-prompt.txt", tmp);
    FILE *f = fopen(context_path, "wb");
    fputs(json, f);
    fclose(f);
    cJSON_free(json);
    cli_result r;
    const char *render[] = {"--render-template", template_path, "--template-context", context_path, NULL};
    if (cli_run(render, &r) != 0 || r.exit_code != 0) {
        CHECK_MSG(false, "--render-template failed: %s", r.err ? r.err : "");
        cli_result_free(&r);
        return false;
    }
    f = fopen(prompt_path, "wb");
    fwrite(r.out, 1, r.out_length, f);
    fclose(f);
    cli_result_free(&r);
    char predict[16];
    snprintf(predict, sizeof predict, "%d", n_predict);
    const char *run[] = {"-m", model, "-f", prompt_path, "-n", predict, "-t", "1", "-c", N_CTX, "--progress",
                         ignore_eos ? "--ignore-eos" : NULL, NULL};
    if (cli_run(run, &r) != 0 || r.exit_code != 0) {
        CHECK_MSG(false, "the fresh run failed: %s", r.err ? r.err : "");
        cli_result_free(&r);
        return false;
    }
    const char *start = strstr(r.out, "=== answer ===\n");
    const char *end = start ? strstr(start, "\n=== perf ===\n") : NULL;
    const char *prefill = strstr(r.err, "bmoe-cli: prefill: ");
    CHECK(start && end && prefill);
    if (start && end && prefill) {
        start += strlen("=== answer ===\n");
        *text = malloc((size_t)(end - start) + 1);
        memcpy(*text, start, (size_t)(end - start));
        (*text)[end - start] = '\0';
        *n_tokens = atoi(prefill + strlen("bmoe-cli: prefill: "));
    }
    cli_result_free(&r);
    return *text != NULL;
}

static char *copy_string(const char *text)
{
    size_t n = strlen(text);
    char *out = malloc(n + 1);
    memcpy(out, text, n + 1);
    return out;
}

static int start_session(child *c, const char *const *extra)
{
    const char *args[40] = {"-m", model, "--session", "--chat", "-t", "1", "-c", N_CTX};
    int n = 8;
    for (int i = 0; extra && extra[i]; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    if (!child_start(c, args)) {
        CHECK_MSG(false, "cannot start the session");
        return -1;
    }
    char *line = child_line(c);
    cJSON *ready = line ? line_json(line, "BMOE_READY") : NULL;
    CHECK_MSG(ready != NULL, "the first line is not BMOE_READY: %s", line ? line : "(none)");
    if (ready) {
        CHECK(isfinite(number_of(ready, "load_s")) && number_of(ready, "n_ctx") == 4096);
        CHECK(string_of(ready, "arch") && strcmp(string_of(ready, "arch"), "qwen3moe") == 0);
        CHECK(string_of(ready, "think_ctl") && strcmp(string_of(ready, "think_ctl"), "template") == 0);
        CHECK(number_of(ready, "n_expert_used") == 4);
    }
    cJSON_Delete(ready);
    free(line);
    return 0;
}

/* ---- the scenarios ------------------------------------------------------ */

/* Three turns: the first starts a chat, the next two continue it. */
static void check_turns(void)
{
    char csv_path[1200];
    snprintf(csv_path, sizeof csv_path, "%s/session.csv", tmp);
    unlink(csv_path);
    const char *extra[] = {"--csv", csv_path, NULL};
    child c;
    if (start_session(&c, extra) != 0)
        return;
    static const char *const prompts[] = {"Tell me a story about a cat.", "And then what happened?",
                                          "How did it end?"};
    message history[8];
    int n_history = 0;
    int previous_prompt = 0, previous_past = 0;
    for (int k = 0; k < 3; k++) {
        char request[512];
        snprintf(request, sizeof request, "{\"cmd\":\"generate\",\"id\":%d,\"prompt\":\"%s\",\"n_predict\":12%s}",
                 10 + k, prompts[k], k == 0 ? "" : ",\"clear_kv\":false");
        child_send(&c, request);
        answer a;
        read_answer(&c, 10 + k, &a, NULL, 0);
        if (!check_done(&a, false)) {
            answer_free(&a);
            break;
        }
        history[n_history++] = (message){"user", copy_string(prompts[k])};
        char *fresh = NULL;
        int fresh_tokens = -1;
        fresh_answer(history, n_history, 12, false, &fresh, &fresh_tokens);
        const char *text = string_of(a.done, "text");
        CHECK_MSG(strcmp(string_of(a.done, "reasoning"), "") == 0, "turn %d reasoned: the comparison needs none", k);
        CHECK_MSG(fresh && strcmp(text, fresh) == 0, "turn %d: the session answered \"%s\", a fresh process \"%s\"", k,
                  text, fresh ? fresh : "(none)");
        int n_prompt = (int)number_of(a.done, "n_prompt"), n_past = (int)number_of(a.done, "n_past");
        int tokens = (int)number_of(a.done, "tokens");
        CHECK_MSG(n_past == fresh_tokens + tokens, "turn %d: n_past %d, prompt %d + %d tokens", k, n_past,
                  fresh_tokens, tokens);
        if (k == 0) {
            CHECK_MSG(n_prompt == fresh_tokens, "turn 0 prefilled %d of %d tokens", n_prompt, fresh_tokens);
        } else {
            /* only the suffix: not the previous prompt again, at least what the cache lacked */
            CHECK_MSG(n_prompt <= fresh_tokens - previous_prompt && n_prompt >= fresh_tokens - previous_past &&
                          n_prompt >= 1,
                      "turn %d prefilled %d tokens of %d (previous prompt %d, cached %d)", k, n_prompt, fresh_tokens,
                      previous_prompt, previous_past);
        }
        previous_prompt = fresh_tokens;
        previous_past = n_past;
        history[n_history++] = (message){"assistant", copy_string(text)};
        free(fresh);
        answer_free(&a);
    }
    child_send(&c, "{\"cmd\":\"close\"}");
    CHECK(child_finish(&c) == 0);
    for (int i = 0; i < n_history; i++)
        free(history[i].content);

    /* the CSV sink lived across the turns: one preamble, rows of turns 0..2, three trailers */
    size_t length;
    char *csv = cli_read_all(csv_path, &length);
    CHECK_MSG(csv != NULL, "no CSV at %s", csv_path);
    if (csv) {
        int preambles = 0, summaries = 0, rows[3] = {0, 0, 0};
        char *save = NULL;
        for (char *line = strtok_r(csv, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
            if (starts_with(line, "# bmoe_metrics v2"))
                preambles++;
            else if (starts_with(line, "# summary"))
                summaries++;
            else if (line[0] >= '0' && line[0] <= '9') {
                /* turn is the 13th column */
                char *field = line;
                for (int column = 0; column < 12 && field; column++) {
                    field = strchr(field, ',');
                    field = field ? field + 1 : NULL;
                }
                int turn = field ? atoi(field) : -1;
                if (turn >= 0 && turn < 3)
                    rows[turn]++;
            }
        }
        CHECK(preambles == 1 && summaries == 3);
        CHECK_MSG(rows[0] == 12 && rows[1] == 12 && rows[2] == 12, "rows per turn %d %d %d", rows[0], rows[1],
                  rows[2]);
        free(csv);
        csv = cli_read_all(csv_path, &length);
        CHECK(csv && strstr(csv, "chatml=1") != NULL);
        free(csv);
    }
}

/* Cancel during the decode and during the prefill; the session goes on and
 * the cancelled turns are not part of the conversation. */
static void check_cancel(void)
{
    const char *extra[] = {"--ignore-eos", "--ubatch", "16", NULL};
    child c;
    if (start_session(&c, extra) != 0)
        return;
    child_send(&c, "{\"cmd\":\"generate\",\"id\":1,\"prompt\":\"Hello\",\"n_predict\":6}");
    answer first;
    read_answer(&c, 1, &first, NULL, 0);
    check_done(&first, false);
    char *first_text = copy_string(first.done ? string_of(first.done, "text") : "");
    answer_free(&first);

    /* mid-generation: after the first token's line */
    child_send(&c, "{\"cmd\":\"generate\",\"id\":2,\"prompt\":\"Go on forever\",\"n_predict\":3000,\"clear_kv\":false}");
    char *line;
    bool sent = false;
    int progress = 0;
    cJSON *done = NULL;
    while ((line = child_line(&c)) != NULL) {
        if (getenv("SESSION_DEBUG"))
            fprintf(stderr, "<< %.120s\n", line);
        if (starts_with(line, "BMOE_PROGRESS")) {
            progress++;
            if (!sent) {
                child_send(&c, "{\"cmd\":\"cancel\"}");
                sent = true;
            }
        }
        done = line_json(line, "BMOE_DONE");
        free(line);
        if (done)
            break;
    }
    bool cancelled = false;
    CHECK(done && bool_of(done, "cancelled", &cancelled) && cancelled);
    CHECK_MSG(done && number_of(done, "tokens") >= 1 && number_of(done, "tokens") < 3000,
              "cancelled after %.0f tokens", done ? number_of(done, "tokens") : -1.0);
    cJSON_Delete(done);

    /* mid-prefill: a long prompt, cancelled once it began */
    size_t words = 150;
    char *request = malloc(words * 48 + 256);
    strcpy(request, "{\"cmd\":\"generate\",\"id\":3,\"n_predict\":4,\"clear_kv\":false,\"prompt\":\"");
    for (size_t i = 0; i < words; i++)
        strcat(request, "once upon a time there was a little model ");
    strcat(request, "\"}");
    child_send(&c, request);
    free(request);
    line = child_line(&c);
    CHECK_MSG(line && starts_with(line, "BMOE_BEGIN {\"id\":3}"), "%s", line ? line : "(none)");
    free(line);
    child_send(&c, "{\"cmd\":\"cancel\",\"id\":3}");
    answer prefill;
    memset(&prefill, 0, sizeof prefill);
    prefill.began = true;
    line = child_line(&c);
    done = line ? line_json(line, "BMOE_DONE") : NULL;
    CHECK_MSG(done != NULL, "after a cancel in the prefill: %s", line ? line : "(none)");
    free(line);
    cancelled = false;
    CHECK(done && bool_of(done, "cancelled", &cancelled) && cancelled && number_of(done, "tokens") == 0);
    /* the prefill stopped before its end: the cache holds less than the prompt */
    CHECK_MSG(done && number_of(done, "n_past") < 2800, "n_past %.0f after a cancelled prefill",
              done ? number_of(done, "n_past") : -1.0);
    cJSON_Delete(done);

    /* the next turn continues the chat of turn 1 alone */
    child_send(&c, "{\"cmd\":\"generate\",\"id\":4,\"prompt\":\"Say more\",\"n_predict\":8,\"clear_kv\":false}");
    answer next;
    read_answer(&c, 4, &next, NULL, 0);
    if (check_done(&next, false)) {
        message history[] = {{"user", "Hello"}, {"assistant", first_text}, {"user", "Say more"}};
        char *fresh = NULL;
        int fresh_tokens;
        fresh_answer(history, 3, 8, true, &fresh, &fresh_tokens);
        CHECK_MSG(fresh && strcmp(fresh, string_of(next.done, "text")) == 0,
                  "after the cancels: \"%s\", a fresh process \"%s\"", string_of(next.done, "text"),
                  fresh ? fresh : "");
        free(fresh);
    }
    answer_free(&next);
    free(first_text);
    child_send(&c, "{\"cmd\":\"close\"}");
    CHECK(child_finish(&c) == 0);
}

/* Every bad request is answered with fatal:false, and the session goes on. */
static void check_bad_requests(void)
{
    child c;
    if (start_session(&c, NULL) != 0)
        return;
    struct {
        const char *line;
        int64_t id;
    } bad[] = {
        {"{\"cmd\":", 0},
        {"not json at all", 0},
        {"[1,2,3]", 0},
        {"{\"cmd\":\"generate\",\"id\":23}", 23},
        {"{\"cmd\":\"generate\",\"id\":24,\"prompt\":42}", 24},
        {"{\"cmd\":\"generate\",\"id\":25,\"prompt\":\"x\",\"n_predict\":\"ten\"}", 25},
        {"{\"cmd\":\"generate\",\"id\":26,\"prompt\":\"x\",\"think\":1}", 26},
        {"{\"cmd\":\"generate\",\"id\":27,\"prompt\":\"x\",\"clear_kv\":\"no\"}", 27},
        {"{\"cmd\":\"generate\",\"id\":\"28\",\"prompt\":\"x\"}", 0},
        {"{\"cmd\":\"generate\",\"id\":29,\"prompt\":\"x\",\"n_predict\":0}", 29},
        {"{\"cmd\":\"generate\",\"id\":30,\"prompt\":\"x\",\"n_predict\":1.5}", 30},
        {"{\"cmd\":\"generate\",\"id\":31,\"prompt\":\"x\",\"n_predict\":100000}", 31},
        {"{\"cmd\":\"generate\",\"id\":33,\"prompt\":\"x\",\"prompt\":\"y\"}", 33},
        {"{\"cmd\":\"generate\",\"id\":34,\"prompt\":\"a\\u0000b\"}", 34},
        {"{\"cmd\":\"generate\",\"id\":35,\"prompt\":\"x\"} trailing", 0},
        {"{\"cmd\":\"decide\",\"id\":37,\"prefix\":\"x\",\"choices\":[\"a\",\"b\"]}", 37},
        {"{\"cmd\":\"generate\",\"id\":38,\"prompt\":\"x\",\"n_predict\":99999999999}", 38},
        /* ids a double cannot hold exactly, and ids that are not integers as written */
        {"{\"cmd\":\"generate\",\"id\":9007199254740993,\"prompt\":\"x\"}", 0},
        {"{\"cmd\":\"generate\",\"id\":1e3,\"prompt\":\"x\"}", 0},
        {"{\"cmd\":\"generate\",\"id\":7.0,\"prompt\":\"x\"}", 0},
        {"{\"cmd\":\"generate\",\"id\":39,\"prompt\":\"x\",\"messages\":[{\"role\":\"user\",\"content\":\"y\"}]}", 39},
        {"{\"cmd\":\"generate\",\"id\":42,\"messages\":[{\"role\":\"robot\",\"content\":\"y\"}]}", 42},
        {"{\"cmd\":\"generate\",\"id\":43,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\"}]}]}", 43},
        {"{\"cmd\":\"generate\",\"id\":44,\"messages\":[]}", 44},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        child_send(&c, bad[i].line);
        answer a;
        read_answer(&c, bad[i].id, &a, NULL, 0);
        bool fatal = true;
        CHECK_MSG(a.error && bool_of(a.error, "fatal", &fatal) && !fatal, "%s: not a fatal:false error", bad[i].line);
        answer_free(&a);
    }
    /* bytes that are not text: invalid UTF-8, a NUL inside the line */
    static const unsigned char garbage[] = {0xff, 0xfe, 0x80, 0x00, 0x7b, 0xc3, 0x28, 0x01, 0x02, '\n'};
    child_send_bytes(&c, garbage, sizeof garbage);
    static const char nul_line[] = "{\"cmd\":\"generate\",\"id\":40,\"prompt\":\"a\0b\"}\n";
    child_send_bytes(&c, nul_line, sizeof nul_line - 1);
    for (int i = 0; i < 2; i++) {
        answer a;
        read_answer(&c, 0, &a, NULL, 0);
        bool fatal = true;
        CHECK(a.error && bool_of(a.error, "fatal", &fatal) && !fatal);
        answer_free(&a);
    }
    /* a 10 MB line: refused without being kept */
    size_t big = 10u << 20;
    char *huge = malloc(big + 1);
    memcpy(huge, "{\"cmd\":\"generate\",\"id\":41,\"prompt\":\"", 36);
    memset(huge + 36, 'x', big - 36);
    huge[big] = '\n';
    child_send_bytes(&c, huge, big + 1);
    free(huge);
    answer a;
    read_answer(&c, 0, &a, NULL, 0);
    bool fatal = true;
    CHECK_MSG(a.error && bool_of(a.error, "fatal", &fatal) && !fatal, "the 10 MB line");
    answer_free(&a);

    /* lines the reference reader ignores are ignored, each said once on
     * stderr: no cmd, an unknown command, a key bmoe does not know, a cancel
     * with nothing to cancel; the request with the unknown key runs */
    child_send(&c, "{\"cmd\":\"explode\",\"id\":21}\n{\"id\":22}\n{\"cmd\":\"cancel\",\"id\":36}\n"
                   "{\"cmd\":\"generate\",\"id\":32,\"prompt\":\"x\",\"n_predict\":2,\"colour\":\"red\"}\n"
                   "{\"cmd\":\"generate\",\"id\":33,\"prompt\":\"x\",\"n_predict\":2,\"colour\":\"blue\"}");
    read_answer(&c, 32, &a, NULL, 0);
    check_done(&a, false);
    answer_free(&a);
    read_answer(&c, 33, &a, NULL, 0);
    check_done(&a, false);
    answer_free(&a);
    size_t err_length;
    char *err = cli_read_all(c.err_path, &err_length);
    CHECK_MSG(err && strstr(err, "unknown cmd \"explode\" is ignored") && strstr(err, "without \"cmd\" is ignored") &&
                  strstr(err, "cancel: no request with that id"),
              "notes on stderr: %s", err ? err : "");
    const char *colour = err ? strstr(err, "key \"colour\" is ignored") : NULL;
    CHECK_MSG(colour && !strstr(colour + 1, "key \"colour\""), "the ignored key is noted once: %s", err ? err : "");
    free(err);

    /* and after all that, a clean generate answers as a fresh process does */
    child_send(&c, "{\"cmd\":\"generate\",\"id\":60,\"prompt\":\"Still there?\",\"n_predict\":10}");
    read_answer(&c, 60, &a, NULL, 0);
    if (check_done(&a, false)) {
        message history[] = {{"user", "Still there?"}};
        char *fresh = NULL;
        int fresh_tokens;
        fresh_answer(history, 1, 10, false, &fresh, &fresh_tokens);
        CHECK(fresh && strcmp(fresh, string_of(a.done, "text")) == 0);
        free(fresh);
    }
    answer_free(&a);
    child_send(&c, "{\"cmd\":\"close\"}");
    CHECK(child_finish(&c) == 0);
}

static bool decide(child *c, int id, const char *prefix, const char *suffix, bool reuse, double *logp, int *best,
                   int *n_reused, int *n_tokens)
{
    char request[1024];
    snprintf(request, sizeof request,
             "{\"cmd\":\"decide\",\"id\":%d,\"prefix\":\"%s\",\"suffix\":\"%s\",\"choices\":[\"yes\",\"no\",\"maybe\"],"
             "\"reuse_prefix\":%s}",
             id, prefix, suffix, reuse ? "true" : "false");
    child_send(c, request);
    answer a;
    read_answer(c, id, &a, NULL, 0);
    CHECK_MSG(a.done && a.progress == 0, "decide %d: no BMOE_DECIDE, or per-token lines", id);
    bool ok = a.done && has_numbers(a.done, decide_numbers, "BMOE_DECIDE");
    if (ok) {
        bool cancelled = true;
        CHECK(bool_of(a.done, "cancelled", &cancelled) && !cancelled);
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(a.done, "choice_logp");
        CHECK(cJSON_IsArray(list) && cJSON_GetArraySize(list) == 3);
        for (int i = 0; i < 3; i++) {
            const cJSON *item = cJSON_GetArrayItem(list, i);
            logp[i] = cJSON_IsNumber(item) ? item->valuedouble : NAN;
            CHECK(isfinite(logp[i]) && logp[i] <= 0.0);
        }
        *best = (int)number_of(a.done, "best");
        *n_reused = (int)number_of(a.done, "n_reused");
        *n_tokens = (int)number_of(a.done, "n_tokens");
        CHECK(*n_reused + number_of(a.done, "n_prefilled") == *n_tokens);
        CHECK(*best >= 0 && *best < 3 && logp[*best] >= logp[0] && logp[*best] >= logp[1] && logp[*best] >= logp[2]);
    }
    answer_free(&a);
    return ok;
}

/* Requests written without waiting are queued and answered in order:
 * fifteen generates in one write; a decide between two generates (the
 * conversation goes on around it, and its numbers are those of the same
 * decide alone); a cancel of the running request with two waiting (they
 * still run); a cancel by id of a waiting one (answered as cancelled in its
 * turn, nothing run); messages in place of a prompt. */
static void check_queue(void)
{
    const char *extra[] = {"--decide", "--ignore-eos", NULL};
    child c;
    if (start_session(&c, extra) != 0)
        return;
    char *batch = malloc(16 * 160);
    batch[0] = '\0';
    for (int i = 1; i <= 15; i++) {
        char request[160];
        snprintf(request, sizeof request,
                 "{\"cmd\":\"generate\",\"id\":%d,\"prompt\":\"Question %d\",\"n_predict\":3}%s", 100 + i, i,
                 i < 15 ? "\n" : "");
        strcat(batch, request);
    }
    child_send(&c, batch); /* one write */
    free(batch);
    char *texts[16] = {NULL};
    for (int i = 1; i <= 15; i++) {
        answer a;
        read_answer(&c, 100 + i, &a, NULL, 0);
        if (check_done(&a, false))
            texts[i] = copy_string(string_of(a.done, "text"));
        answer_free(&a);
    }
    for (int i = 1; i <= 15; i += 14) { /* each started a new chat: a fresh process's answer */
        char prompt[32];
        snprintf(prompt, sizeof prompt, "Question %d", i);
        message history[] = {{"user", prompt}};
        char *fresh = NULL;
        int fresh_tokens;
        fresh_answer(history, 1, 3, true, &fresh, &fresh_tokens);
        CHECK_MSG(fresh && texts[i] && strcmp(fresh, texts[i]) == 0, "queued request %d: \"%s\", fresh \"%s\"", i,
                  texts[i] ? texts[i] : "", fresh ? fresh : "");
        free(fresh);
    }
    for (int i = 0; i < 16; i++)
        free(texts[i]);

    /* generate, decide, generate that continues the first: in one write */
    const char *decide_line = "{\"cmd\":\"decide\",\"id\":202,\"prefix\":\"Is the sky\",\"suffix\":\" blue?\","
                              "\"choices\":[\"yes\",\"no\",\"maybe\"],\"reuse_prefix\":false}";
    char pipelined[1024];
    snprintf(pipelined, sizeof pipelined,
             "{\"cmd\":\"generate\",\"id\":201,\"prompt\":\"Hello\",\"n_predict\":4}\n%s\n"
             "{\"cmd\":\"generate\",\"id\":203,\"prompt\":\"Again\",\"n_predict\":4,\"clear_kv\":false}",
             decide_line);
    child_send(&c, pipelined);
    answer first, decided, third;
    read_answer(&c, 201, &first, NULL, 0);
    read_answer(&c, 202, &decided, NULL, 0);
    read_answer(&c, 203, &third, NULL, 0);
    if (check_done(&first, false) && check_done(&third, false) && decided.done) {
        message history[] = {{"user", "Hello"}, {"assistant", (char *)string_of(first.done, "text")}, {"user", "Again"}};
        char *fresh = NULL;
        int fresh_tokens;
        fresh_answer(history, 3, 4, true, &fresh, &fresh_tokens);
        CHECK_MSG(fresh && strcmp(fresh, string_of(third.done, "text")) == 0,
                  "a decide between turns changed the conversation: \"%s\", fresh \"%s\"",
                  string_of(third.done, "text"), fresh ? fresh : "");
        free(fresh);
        /* the same decide alone gives the same numbers */
        child_send(&c, decide_line);
        answer alone;
        read_answer(&c, 202, &alone, NULL, 0);
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(decided.done, "choice_logp");
        const cJSON *b = alone.done ? cJSON_GetObjectItemCaseSensitive(alone.done, "choice_logp") : NULL;
        CHECK(a && b && cJSON_GetArraySize(a) == 3 && cJSON_GetArraySize(b) == 3);
        for (int i = 0; a && b && i < 3; i++)
            CHECK(cJSON_GetArrayItem(a, i)->valuedouble == cJSON_GetArrayItem(b, i)->valuedouble);
        answer_free(&alone);
    }
    answer_free(&first);
    answer_free(&decided);
    answer_free(&third);

    /* cancel the running request with two waiting: they run after it; then
     * cancel a waiting one by its id: answered as cancelled, in its turn */
    for (int round = 0; round < 2; round++) {
        int base = 300 + 100 * round;
        char three[512];
        snprintf(three, sizeof three,
                 "{\"cmd\":\"generate\",\"id\":%d,\"prompt\":\"Go on\",\"n_predict\":3000}\n"
                 "{\"cmd\":\"generate\",\"id\":%d,\"prompt\":\"Two\",\"n_predict\":4}\n"
                 "{\"cmd\":\"generate\",\"id\":%d,\"prompt\":\"Three\",\"n_predict\":4}",
                 base + 1, base + 2, base + 3);
        child_send(&c, three);
        char *line;
        bool sent = false;
        cJSON *done = NULL;
        while (!done && (line = child_line(&c)) != NULL) {
            if (starts_with(line, "BMOE_PROGRESS") && !sent) {
                char cancel[96];
                if (round == 1) {
                    snprintf(cancel, sizeof cancel, "{\"cmd\":\"cancel\",\"id\":%d}", base + 2);
                    child_send(&c, cancel);
                }
                child_send(&c, "{\"cmd\":\"cancel\"}");
                sent = true;
            }
            done = line_json(line, "BMOE_DONE");
            free(line);
        }
        bool cancelled = false;
        CHECK_MSG(done && number_of(done, "id") == base + 1 && bool_of(done, "cancelled", &cancelled) && cancelled,
                  "round %d: the running request was not cancelled", round);
        cJSON_Delete(done);
        answer two, three_answer;
        read_answer(&c, base + 2, &two, NULL, 0);
        read_answer(&c, base + 3, &three_answer, NULL, 0);
        check_done(&two, round == 1);
        if (round == 1)
            CHECK(two.done && number_of(two.done, "tokens") == 0 && two.progress == 0);
        check_done(&three_answer, false);
        CHECK(three_answer.done && number_of(three_answer.done, "tokens") == 4);
        answer_free(&two);
        answer_free(&three_answer);
    }

    /* messages: a system message and a user message in two text parts */
    child_send(&c, "{\"cmd\":\"generate\",\"id\":501,\"n_predict\":5,\"messages\":[{\"role\":\"system\",\"content\":"
                   "\"Be brief.\"},{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Hel\"},{\"type\":"
                   "\"text\",\"text\":\"lo\"}]}]}");
    answer m;
    read_answer(&c, 501, &m, NULL, 0);
    if (check_done(&m, false)) {
        message history[] = {{"system", "Be brief."}, {"user", "Hello"}};
        char *fresh = NULL;
        int fresh_tokens;
        fresh_answer(history, 2, 5, true, &fresh, &fresh_tokens);
        CHECK_MSG(fresh && strcmp(fresh, string_of(m.done, "text")) == 0, "messages: \"%s\", fresh \"%s\"",
                  string_of(m.done, "text"), fresh ? fresh : "");
        free(fresh);
    }
    answer_free(&m);
    child_send(&c, "{\"cmd\":\"close\"}");
    CHECK(child_finish(&c) == 0);
}

/* The lines of a file, or 0 (count of lines starting with prefix). */
static int count_prefix(const char *text, const char *prefix)
{
    int n = 0;
    for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
        n += starts_with(line, prefix);
    return n;
}

/* The turns a file's rows carry in its turn column (a bit per turn). */
static unsigned turns_of(const char *text, const char *header, int column)
{
    unsigned seen = 0;
    const char *rows = text ? strstr(text, header) : NULL;
    for (const char *line = rows ? strchr(rows, '\n') : NULL; line && line[1]; line = strchr(line + 1, '\n')) {
        const char *field = line + 1;
        if (*field == '#')
            continue;
        for (int k = 0; k < column && field; k++)
            field = strchr(field, ',') ? strchr(field, ',') + 1 : NULL;
        if (field && *field >= '0' && *field <= '9')
            seen |= 1u << (atoi(field) & 31);
    }
    return seen;
}

/* --csv and the traces in a session: one preamble each, rows appended turn
 * after turn with the turn column, published at close; and cache_hit_pct,
 * cumulative since the session opened, equal to a count over the route
 * trace: every decode routing a lookup, and each turn's prompt (one batch)
 * one lookup per layer and expert it routes, a miss when a row of it
 * carries the read. */
static void check_traces(void)
{
    char csv[1200], route[1200], io[1200], layers[1200];
    snprintf(csv, sizeof csv, "%s/traces.csv", tmp);
    snprintf(route, sizeof route, "%s/traces.route.csv", tmp);
    snprintf(io, sizeof io, "%s/traces.io.csv", tmp);
    snprintf(layers, sizeof layers, "%s/traces.layers.csv", tmp);
    const char *extra[] = {"--moe-stream", "--cache-mb", "12", "--overlap", "--csv", csv, "--route-trace", route,
                           "--io-trace", io, "--compute-trace-layers", layers, "--ignore-eos", NULL};
    child c;
    if (start_session(&c, extra) != 0)
        return;
    static const char *const prompts[] = {"One", "Two more words", "And three"};
    double hit = -2.0, last_line_hit = -2.0;
    for (int k = 0; k < 3; k++) {
        char request[256];
        snprintf(request, sizeof request, "{\"cmd\":\"generate\",\"id\":%d,\"prompt\":\"%s\",\"n_predict\":4%s}",
                 70 + k, prompts[k], k == 0 ? "" : ",\"clear_kv\":false");
        child_send(&c, request);
        /* the last progress line's hit rate, then BMOE_DONE's */
        char *line;
        cJSON *done = NULL;
        while (!done && (line = child_line(&c)) != NULL) {
            cJSON *progress = line_json(line, "BMOE_PROGRESS");
            if (progress)
                last_line_hit = number_of(progress, "cache_hit_pct");
            cJSON_Delete(progress);
            done = line_json(line, "BMOE_DONE");
            free(line);
        }
        CHECK_MSG(done != NULL, "turn %d: no BMOE_DONE", k);
        hit = done ? number_of(done, "cache_hit_pct") : -2.0;
        cJSON_Delete(done);
    }
    child_send(&c, "{\"cmd\":\"close\"}");
    CHECK(child_finish(&c) == 0);

    char *texts[4] = {test_read_file(csv, NULL), test_read_file(route, NULL), test_read_file(io, NULL),
                      test_read_file(layers, NULL)};
    static const char *const preambles[] = {"# bmoe_metrics v2", "# route_trace v1", "# io_trace v1",
                                            "# compute_trace v1"};
    static const char *const headers[] = {"step,steps,", "turn,phase,step,layer,slot,", "turn,phase,step,layer,",
                                          "turn,phase,step,seq,"};
    static const int turn_column[] = {12, 0, 0, 0};
    for (int f = 0; f < 4; f++) {
        CHECK_MSG(texts[f] && count_prefix(texts[f], preambles[f]) == 1 && count_prefix(texts[f], headers[f]) == 1,
                  "%s: not one preamble and one header", preambles[f]);
        CHECK_MSG(turns_of(texts[f], headers[f], turn_column[f]) == 7u, "%s: rows of turns %#x, want 0, 1 and 2",
                  preambles[f], turns_of(texts[f], headers[f], turn_column[f]));
    }
    CHECK_MSG(texts[0] && count_prefix(texts[0], "# summary ") == 3, "the CSV has not one summary per turn");

    /* the hit rate from the route trace */
    long long lookups = 0, misses = 0;
    unsigned char prompt_lookup[3][64][64];
    memset(prompt_lookup, 0, sizeof prompt_lookup);
    const char *rows = texts[1] ? strstr(texts[1], headers[1]) : NULL;
    for (const char *line = rows ? strchr(rows, '\n') : NULL; line && line[1]; line = strchr(line + 1, '\n')) {
        long long turn, phase, step, layer, slot, expert, residency, bytes;
        double weight;
        if (sscanf(line + 1, "%lld,%lld,%lld,%lld,%lld,%lld,%lf,%lld,%lld", &turn, &phase, &step, &layer, &slot,
                   &expert, &weight, &residency, &bytes) != 9 ||
            turn < 0 || turn > 2 || layer < 0 || layer >= 64 || expert < 0 || expert >= 64) {
            CHECK_MSG(false, "a route row: %.80s", line + 1);
            break;
        }
        if (phase == 0) {
            prompt_lookup[turn][layer][expert] |= 1u | (bytes > 0 ? 2u : 0u);
        } else {
            lookups++;
            misses += residency == 0;
        }
    }
    for (int turn = 0; turn < 3; turn++)
        for (int layer = 0; layer < 64; layer++)
            for (int expert = 0; expert < 64; expert++) {
                lookups += prompt_lookup[turn][layer][expert] & 1u;
                misses += (prompt_lookup[turn][layer][expert] & 2u) != 0;
            }
    double counted = lookups > 0 ? 100.0 * (double)(lookups - misses) / (double)lookups : -1.0;
    CHECK_MSG(lookups > 0 && misses > 0 && misses < lookups, "the cache should both hit and miss: %lld of %lld",
              misses, lookups);
    CHECK_MSG(fabs(counted - hit) < 0.0051 && fabs(counted - last_line_hit) < 0.0051,
              "cache_hit_pct %.2f (last line %.2f), the route trace counts %.4f (%lld misses of %lld lookups)", hit,
              last_line_hit, counted, misses, lookups);
    for (int f = 0; f < 4; f++)
        free(texts[f]);
}

/* decide: reuse of the kept prefix, and the same numbers as a fresh prefill. */
static void check_decide(void)
{
    const char *extra[] = {"--decide", NULL};
    child c;
    if (start_session(&c, extra) != 0)
        return;
    const char *prefix = "Here is a long description of the weather today, with clouds and some rain. ";
    double first[3], reused[3], fresh[3];
    int best1, best2, best3, reused1, reused2, reused3, tokens1, tokens2, tokens3;
    decide(&c, 1, prefix, "Is it sunny?", true, first, &best1, &reused1, &tokens1);
    decide(&c, 2, prefix, "Will it rain?", true, reused, &best2, &reused2, &tokens2);
    CHECK_MSG(reused2 >= 15, "the second decide reused %d tokens", reused2);
    decide(&c, 3, prefix, "Will it rain?", false, fresh, &best3, &reused3, &tokens3);
    CHECK(reused3 == 0 && tokens3 == tokens2 && best3 == best2);
    for (int i = 0; i < 3; i++)
        CHECK_MSG(reused[i] == fresh[i], "choice %d: %.9f reused, %.9f fresh", i, reused[i], fresh[i]);
    /* refused: colliding first tokens, no choices, and the session goes on */
    for (int id = 4; id <= 5; id++) {
        child_send(&c, id == 4 ? "{\"cmd\":\"decide\",\"id\":4,\"prefix\":\"x\",\"choices\":[\"yes\",\"yes\"]}"
                               : "{\"cmd\":\"decide\",\"id\":5,\"prefix\":\"x\",\"choices\":[]}");
        answer a;
        read_answer(&c, id, &a, NULL, 0);
        bool fatal = true;
        CHECK(a.error && bool_of(a.error, "fatal", &fatal) && !fatal);
        answer_free(&a);
    }
    child_send(&c, "{\"cmd\":\"close\"}");
    CHECK(child_finish(&c) == 0);

    /* a fresh process gives the same numbers for the second decide */
    if (start_session(&c, extra) != 0)
        return;
    double other[3];
    int best4, reused4, tokens4;
    decide(&c, 7, prefix, "Will it rain?", true, other, &best4, &reused4, &tokens4);
    CHECK(reused4 == 0 && best4 == best2);
    for (int i = 0; i < 3; i++)
        CHECK(other[i] == reused[i]);
    CHECK(child_finish(&c) == 0); /* EOF ends it */
}

/* json_schema and grammar on a generate: the answer is one value of the
 * schema or a word of the grammar, ended by the model; with reasoning on
 * the reasoning comes first and the hold waits for its end (this random
 * model never closes the span: the answer stays empty at n_predict); a
 * request with both, or with a grammar bmoe cannot hold to, is refused in
 * its turn and the session goes on. */
static void check_held(void)
{
    child c;
    if (start_session(&c, NULL) != 0)
        return;
    child_send(&c, "{\"cmd\":\"generate\",\"id\":1,\"prompt\":\"Is it?\",\"think\":false,\"n_predict\":16,"
                   "\"json_schema\":{\"type\":\"boolean\"}}");
    child_send(&c, "{\"cmd\":\"generate\",\"id\":2,\"prompt\":\"Is it?\",\"think\":false,\"n_predict\":16,"
                   "\"grammar\":\"root ::= (\\\"yes\\\" | \\\"no\\\") \\\"!\\\"\"}");
    child_send(&c, "{\"cmd\":\"generate\",\"id\":3,\"prompt\":\"Is it?\",\"n_predict\":8,"
                   "\"json_schema\":{\"type\":\"boolean\"}}");
    child_send(&c, "{\"cmd\":\"generate\",\"id\":4,\"prompt\":\"x\",\"grammar\":\"root ::= y\"}");
    child_send(&c, "{\"cmd\":\"generate\",\"id\":5,\"prompt\":\"x\",\"grammar\":\"root ::= \\\"a\\\"\","
                   "\"json_schema\":{}}");
    child_send(&c, "{\"cmd\":\"generate\",\"id\":6,\"prompt\":\"x\",\"json_schema\":\"boolean\"}");
    child_send(&c, "{\"cmd\":\"close\"}");
    answer a;
    static const char *const words[][2] = {{"true", "false"}, {"yes!", "no!"}};
    for (int id = 1; id <= 2; id++) {
        if (read_answer(&c, id, &a, NULL, 0) && check_done(&a, false)) {
            const char *text = string_of(a.done, "text");
            CHECK_MSG(text && (!strcmp(text, words[id - 1][0]) || !strcmp(text, words[id - 1][1])) &&
                          number_of(a.done, "tokens") < 16,
                      "request %d held: \"%s\"", id, text ? text : "-");
        }
        answer_free(&a);
    }
    if (read_answer(&c, 3, &a, NULL, 0) && check_done(&a, false))
        CHECK_MSG(!string_of(a.done, "text")[0] && string_of(a.done, "reasoning")[0] &&
                      number_of(a.done, "tokens") == 8,
                  "reasoning first: text \"%s\"", string_of(a.done, "text"));
    answer_free(&a);
    static const char *const refusals[] = {"undefined rule 'y'", "not both", "an object"};
    for (int id = 4; id <= 6; id++) {
        bool fatal = true;
        if (read_answer(&c, id, &a, NULL, 0))
            CHECK_MSG(a.error && bool_of(a.error, "fatal", &fatal) && !fatal &&
                          strstr(string_of(a.error, "msg"), refusals[id - 4]),
                      "request %d: %s", id, a.error ? string_of(a.error, "msg") : "(answered)");
        answer_free(&a);
    }
    CHECK(child_finish(&c) == 0);
}

/* EOF while a generation runs: it is answered, and the process exits 0. */
static void check_eof(void)
{
    const char *extra[] = {"--ignore-eos", NULL};
    child c;
    if (start_session(&c, extra) != 0)
        return;
    child_send(&c, "{\"cmd\":\"generate\",\"id\":1,\"prompt\":\"Hello\",\"n_predict\":300}");
    char *line = child_line(&c);
    CHECK(line && starts_with(line, "BMOE_BEGIN"));
    free(line);
    close(c.in);
    c.in = -1;
    cJSON *done = NULL;
    while (!done && (line = child_line(&c)) != NULL) {
        done = line_json(line, "BMOE_DONE");
        free(line);
    }
    CHECK_MSG(done != NULL, "no BMOE_DONE after EOF");
    cJSON_Delete(done);
    CHECK(child_finish(&c) == 0);
}

/* gpt-oss (think_ctl prefill): think:false starts the turn in the final
 * channel. What that prompt is comes from the contract's description of the
 * prefill (a last assistant message with whitespace-only reasoning and empty
 * content, continued where its content begins): the test renders that
 * message with the family's template and drops what the template writes
 * after the empty content (the final message's <|return|>). */
static void check_prefill(void)
{
    const char *args[] = {"-m", gptoss_model, "--session", "--chat", "-t", "1", "-c", "1024", "--template-now",
                          "1795996800", NULL};
    child c;
    if (!child_start(&c, args)) {
        CHECK(false);
        return;
    }
    char *line = child_line(&c);
    cJSON *ready = line ? line_json(line, "BMOE_READY") : NULL;
    CHECK_MSG(ready && string_of(ready, "think_ctl") && strcmp(string_of(ready, "think_ctl"), "prefill") == 0 &&
                  strcmp(string_of(ready, "arch"), "gpt-oss") == 0,
              "%s", line ? line : "(none)");
    cJSON_Delete(ready);
    free(line);
    child_send(&c, "{\"cmd\":\"generate\",\"id\":1,\"prompt\":\"What is 17 times 23?\",\"n_predict\":10,\"think\":false}");
    answer a;
    read_answer(&c, 1, &a, NULL, 0);
    bool ok = check_done(&a, false);
    child_send(&c, "{\"cmd\":\"close\"}");
    CHECK(child_finish(&c) == 0);
    if (!ok) {
        answer_free(&a);
        return;
    }
    char context_path[1200], prompt_path[1200];
    snprintf(context_path, sizeof context_path, "%s/prefill-context.json", tmp);
    snprintf(prompt_path, sizeof prompt_path, "%s/prefill-prompt.txt", tmp);
    FILE *f = fopen(context_path, "wb");
    fputs("{\"messages\": [{\"role\": \"user\", \"content\": \"What is 17 times 23?\"}, {\"role\": \"assistant\", "
          "\"content\": \"\", \"thinking\": \" \"}], \"add_generation_prompt\": false, \"enable_thinking\": false, "
          "\"bos_token\": \"\", \"eos_token\": \"\"}",
          f);
    fclose(f);
    cli_result r;
    const char *render[] = {"--render-template", gptoss_template, "--template-context", context_path,
                            "--template-now", "1795996800", NULL};
    const char *end = "<|return|>";
    if (cli_run(render, &r) == 0 && r.exit_code == 0 && r.out_length > strlen(end) &&
        strcmp(r.out + r.out_length - strlen(end), end) == 0) {
        f = fopen(prompt_path, "wb");
        fwrite(r.out, 1, r.out_length - strlen(end), f);
        fclose(f);
        cli_result_free(&r);
        const char *run[] = {"-m", gptoss_model, "-f", prompt_path, "-n", "10", "-t", "1", "-c", "1024", "--progress",
                             NULL};
        if (cli_run(run, &r) == 0 && r.exit_code == 0) {
            const char *start = strstr(r.out, "=== answer ===\n");
            const char *stop = start ? strstr(start, "\n=== perf ===\n") : NULL;
            const char *text = string_of(a.done, "text");
            start = start ? start + strlen("=== answer ===\n") : NULL;
            CHECK_MSG(start && stop && (size_t)(stop - start) == strlen(text) && memcmp(start, text, strlen(text)) == 0,
                      "think:false on gpt-oss answered \"%s\", the prefilled prompt fresh \"%.*s\"", text,
                      start && stop ? (int)(stop - start) : 0, start ? start : "");
            CHECK(strcmp(string_of(a.done, "reasoning"), "") == 0);
        } else {
            CHECK_MSG(false, "the fresh gpt-oss run failed: %s", r.err);
        }
    } else {
        CHECK_MSG(false, "rendering the prefill context failed: %s", r.err ? r.err : "");
    }
    cli_result_free(&r);
    answer_free(&a);
}

static void make_model(void)
{
    cli_mkmodel("tiny-gpt-oss", gptoss_model);
    cli_mkmodel("tiny-qwen3moe", model);
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    const char *only = argc > 1 ? argv[1] : NULL;
    snprintf(tmp, sizeof tmp, "%s/session", test_tmp_dir());
    mkdir(tmp, 0755);
    snprintf(model, sizeof model, "%s/qwen3.gguf", tmp);
    test_shared_path(template_path, sizeof template_path, "data/chat-templates/Qwen-Qwen3-0.6B.jinja");
    test_shared_path(gptoss_template, sizeof gptoss_template, "data/chat-templates/openai-gpt-oss-120b.jinja");
    snprintf(gptoss_model, sizeof gptoss_model, "%s/gptoss.gguf", tmp);
    make_model();
    if (!only || strcmp(only, "turns") == 0)
        check_turns();
    if (!only || strcmp(only, "cancel") == 0)
        check_cancel();
    if (!only || strcmp(only, "bad") == 0)
        check_bad_requests();
    if (!only || strcmp(only, "decide") == 0)
        check_decide();
    if (!only || strcmp(only, "queue") == 0)
        check_queue();
    if (!only || strcmp(only, "traces") == 0)
        check_traces();
    if (!only || strcmp(only, "eof") == 0)
        check_eof();
    if (!only || strcmp(only, "prefill") == 0)
        check_prefill();
    if (!only || strcmp(only, "held") == 0)
        check_held();
    return test_finish();
}
