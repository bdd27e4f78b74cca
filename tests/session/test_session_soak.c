/* A soak of session mode, bounded in time: 200 requests (generates that
 * start a new conversation or continue the one kept, decides, cancels at
 * random points, invalid lines between them) against a streamed model with a
 * small cache whose reads fail 1 % of the time (the stream parameters' read
 * seam). The session must answer every request and never die (a failed read
 * is a BMOE_ERROR with fatal false and the turn rolled back); every answer
 * it gives must equal what a fresh resident context computes for the same
 * conversation; and its memory must stay flat over the last 150 requests.
 *
 * The session runs in this process (session_run on a thread, requests and
 * answers through pipes), so that the read seam can be injected; the
 * reference is the library on the same file, resident, with nothing
 * injected. Raw prompts (no chat template): a conversation is its texts
 * joined, which the reference renders the same way; the answers are
 * compared as a client reads them (JSON: bytes that are not UTF-8 become
 * U+FFFD), and the reference's own bytes continue its conversation. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define SOAK_RSS_GROWTH_MIB 32.0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SOAK_RSS_GROWTH_MIB 32.0
#endif
#endif
#ifndef SOAK_RSS_GROWTH_MIB
#define SOAK_RSS_GROWTH_MIB 8.0
#endif

#include "bmoe.h"
#include "session.h"
#include "line_reader.h"
#include "test.h"
#include "tm_buffer.h"
#include "tm_json.h"

#define REQUESTS 200
#define N_PREDICT 6
#define N_CTX 1024
#define WAIT_MS 60000
#define MAX_HISTORY 8

static char model_path[1200];

/* ---- the failing read seam ----------------------------------------------- */

static atomic_uint_least64_t reads_seen, reads_failed;

/* Fails one read in a hundred, chosen by a hash of the read's number, so a
 * run is reproducible in what fails though not in which request it hits
 * (the lanes read concurrently). */
static int64_t failing_pread(void *user, int fd, void *buffer, size_t length, int64_t offset)
{
    (void)user;
    uint64_t n = atomic_fetch_add(&reads_seen, 1);
    uint64_t hash = (n + 1) * 0x9E3779B97F4A7C15ull;
    if ((hash >> 32) % 100 == 0) {
        atomic_fetch_add(&reads_failed, 1);
        if (getenv("SOAK_DEBUG"))
            fprintf(stderr, "failing read %llu at %lld (%zu bytes)\n", (unsigned long long)n, (long long)offset, length);
        errno = EIO;
        return -1;
    }
    return pread(fd, buffer, length, (off_t)offset);
}

/* ---- the session on a thread ---------------------------------------------- */

typedef struct running_session {
    session_config config;
    int input;          /* the session reads requests here */
    FILE *output;
    int status, output_error;
    pthread_t thread;
} running_session;

static void *session_thread(void *user)
{
    running_session *r = user;
    r->status = session_run(&r->config, r->input, -1, r->output, &r->output_error);
    fclose(r->output);
    return NULL;
}

static char *next_line(line_reader *l)
{
    return line_reader_next(l, WAIT_MS);
}

static void send_line(int fd, const char *line)
{
    size_t length = strlen(line);
    while (length > 0) {
        ssize_t wrote = write(fd, line, length);
        if (wrote < 0 && errno == EINTR)
            continue;
        if (wrote <= 0) {
            CHECK_MSG(false, "writing to the session: %s", strerror(errno));
            return;
        }
        line += wrote;
        length -= (size_t)wrote;
    }
    if (write(fd, "\n", 1) != 1)
        CHECK_MSG(false, "writing to the session: %s", strerror(errno));
}

/* ---- the reference ------------------------------------------------------- */

/* Texts as bytes: a random model's answer may hold a NUL byte (a token of
 * its own), which the session keeps like any other. */
typedef struct bytes {
    char *data;
    size_t length;
} bytes;

static void bytes_append(bytes *b, const char *data, size_t length)
{
    b->data = realloc(b->data, b->length + length + 1);
    memcpy(b->data + b->length, data, length);
    b->length += length;
    b->data[b->length] = '\0';
}

/* The greedy text a fresh (emptied) context generates after prompt. */
static bytes reference_text(bmoe_context *context, const bytes *prompt)
{
    bmoe_error error = {0};
    bmoe_context_truncate(context, 0);
    bmoe_generation_params generation = bmoe_generation_default_params();
    generation.n_predict = N_PREDICT;
    generation.ignore_eos = true;
    bmoe_generation *g = bmoe_generation_start_text(context, &generation, prompt->data, prompt->length, &error);
    CHECK_MSG(g != NULL, "reference: %s", error.message);
    bytes text = {NULL, 0};
    bytes_append(&text, "", 0);
    bmoe_step step;
    while (g && bmoe_generation_step(g, &step, &error) >= 0) {
        bytes_append(&text, step.text, step.text_length);
        if (step.token < 0)
            break;
    }
    bmoe_generation_free(g);
    return text;
}

/* text as a client reads it from BMOE_DONE: JSON decoded (by cJSON, which
 * ends a string at a NUL, as it ends the session's); malloc'd. */
static char *as_sent(const bytes *text)
{
    tm_buffer json;
    tm_buffer_init(&json);
    tm_json_string(&json, text->data, text->length);
    cJSON *parsed = cJSON_Parse(tm_buffer_text(&json));
    char *out = strdup(cJSON_IsString(parsed) ? parsed->valuestring : "");
    cJSON_Delete(parsed);
    tm_buffer_free(&json);
    return out;
}

/* ---- the soak -------------------------------------------------------------- */

static double rss_mib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kib = -1.0;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            kib = atof(line + 6);
    if (f)
        fclose(f);
    return kib / 1024.0;
}

static const char *const words[] = {"the", "cat", "sat", "on", "a", "warm", "mat", "and", "then", "it",
                                    "slept", "while", "rain", "fell", "outside", "softly"};

static uint64_t random_state = 0x2545F4914F6CDD1Dull;
static unsigned random_below(unsigned n)
{
    random_state ^= random_state << 13;
    random_state ^= random_state >> 7;
    random_state ^= random_state << 17;
    return (unsigned)(random_state % n);
}

static void random_words(char *out, size_t size, int count)
{
    out[0] = '\0';
    for (int i = 0; i < count; i++) {
        size_t used = strlen(out);
        snprintf(out + used, size - used, "%s%s", i ? " " : "", words[random_below(sizeof words / sizeof words[0])]);
    }
}

/* The answer to request id: "DONE", "CANCELLED", "DECIDE" or "ERROR" (the
 * parsed line in *json, the caller deletes it). Cancels after cancel_after
 * progress lines (-1: never). NULL when the session died. */
static const char *read_answer(line_reader *l, int input, int64_t id, int cancel_after, cJSON **json)
{
    *json = NULL;
    int progress = 0;
    char *line;
    while ((line = next_line(l)) != NULL) {
        const char *brace = strchr(line, '{');
        cJSON *object = brace ? cJSON_Parse(brace) : NULL;
        const cJSON *id_item = object ? cJSON_GetObjectItemCaseSensitive(object, "id") : NULL;
        bool ours = id_item && (int64_t)id_item->valuedouble == id;
        if (strncmp(line, "BMOE_PROGRESS ", 14) == 0 && cancel_after >= 0 && progress++ == cancel_after)
            send_line(input, "{\"cmd\":\"cancel\"}");
        const char *kind = NULL;
        if (strncmp(line, "BMOE_ERROR ", 11) == 0) {
            CHECK_MSG(ours, "an error for another request: %s", line);
            kind = "ERROR";
        } else if (strncmp(line, "BMOE_DECIDE ", 12) == 0 && ours) {
            kind = "DECIDE";
        } else if (strncmp(line, "BMOE_DONE ", 10) == 0 && ours) {
            kind = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(object, "cancelled")) ? "CANCELLED" : "DONE";
        }
        free(line);
        if (kind) {
            *json = object;
            return kind;
        }
        cJSON_Delete(object);
    }
    return NULL;
}

int main(void)
{
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/session-soak", test_tmp_dir());
    mkdir(dir, 0755);
    snprintf(model_path, sizeof model_path, "%s/model.gguf", dir);
    char command[2600];
    snprintf(command, sizeof command, "'%s/bmoe-mkmodel' --quiet --shape tiny-qwen3moe --experts 16 -o '%s'",
             BMOE_BIN_DIR, model_path);
    CHECK(system(command) == 0);

    bmoe_error error = {0};
    /* a fixed mmap threshold: glibc's moving one keeps a freed large block in
     * the heap, and RSS would show the allocator's choices, not the session's */
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    bmoe_model *reference = bmoe_model_load(model_path, NULL, &error);
    CHECK_MSG(reference != NULL, "reference model: %s", error.message);
    bmoe_context_params reference_params = bmoe_context_default_params();
    reference_params.n_ctx = N_CTX;
    reference_params.n_threads = 1;
    bmoe_context *reference_context = reference ? bmoe_context_create(reference, &reference_params, &error) : NULL;
    CHECK_MSG(reference_context != NULL, "reference context: %s", error.message);
    if (!reference_context)
        return test_finish();

    int requests[2], answers[2];
    CHECK(pipe(requests) == 0 && pipe(answers) == 0);
    running_session r;
    memset(&r, 0, sizeof r);
    r.config.model_path = model_path;
    r.config.model_params = bmoe_model_default_params();
    r.config.model_params.stream.enabled = true;
    r.config.model_params.stream.cache_mb = 24; /* two thirds of the 36 MiB of experts: misses every token */
    r.config.model_params.stream.overlap = true;
    r.config.model_params.stream.pread = failing_pread;
    r.config.context_params = bmoe_context_default_params();
    r.config.context_params.n_ctx = N_CTX;
    r.config.context_params.n_threads = 1;
    r.config.n_predict = N_PREDICT;
    r.config.think = true;
    r.config.ignore_eos = true;
    r.config.sampler = bmoe_sampler_default_params();
    r.config.decide = true;
    r.config.decide_reuse = true;
    r.input = requests[0];
    r.output = fdopen(answers[1], "w");
    CHECK(pthread_create(&r.thread, NULL, session_thread, &r) == 0);
    line_reader out = {answers[0], NULL, 0, 0, false};
    char *ready = next_line(&out);
    CHECK_MSG(ready && strncmp(ready, "BMOE_READY ", 11) == 0, "%s", ready ? ready : "(none)");
    free(ready);

    /* the conversation as the session keeps it: the texts of the answered turns */
    bytes history[MAX_HISTORY + 2];
    int n_history = 0;
    int compared = 0, errors = 0, cancelled = 0, decided = 0, refused = 0;
    double rss_after_50 = 0.0, rss_most = 0.0;
    bool alive = true;
    for (int i = 0; i < REQUESTS && alive; i++) {
        int64_t id = 1000 + i;
        unsigned kind = random_below(100);
        char request[1024], prompt[256];
        cJSON *json = NULL;
        const char *answer;
        if (kind < 10) {
            static const char *const bad[] = {"{\"cmd\":\"generate\",\"id\":%lld,\"prompt\":7}",
                                              "{\"cmd\":\"generate\",\"id\":%lld,\"prompt\":\"x\",\"n_predict\":0}",
                                              "{\"cmd\":\"decide\",\"id\":%lld,\"prefix\":\"x\",\"choices\":[]}",
                                              "{\"cmd\":\"generate\",\"id\":%lld,\"prompt\":\"x\",\"think\":\"no\"}"};
            snprintf(request, sizeof request, bad[random_below(4)], (long long)id);
            send_line(requests[1], request);
            answer = read_answer(&out, requests[1], id, -1, &json);
            bool fatal = true;
            const cJSON *item = json ? cJSON_GetObjectItemCaseSensitive(json, "fatal") : NULL;
            fatal = !cJSON_IsFalse(item);
            CHECK_MSG(answer && strcmp(answer, "ERROR") == 0 && !fatal, "request %d: %s refused as %s", i, request,
                      answer ? answer : "(nothing)");
            refused++;
        } else if (kind < 25) {
            random_words(prompt, sizeof prompt, 4);
            snprintf(request, sizeof request,
                     "{\"cmd\":\"decide\",\"id\":%lld,\"prefix\":\"%s\",\"choices\":[\"yes\",\"no\"],\"reuse_prefix\":%s}",
                     (long long)id, prompt, random_below(2) ? "true" : "false");
            send_line(requests[1], request);
            answer = read_answer(&out, requests[1], id, -1, &json);
            CHECK_MSG(answer && (strcmp(answer, "DECIDE") == 0 || strcmp(answer, "ERROR") == 0),
                      "request %d: decide answered %s", i, answer ? answer : "(nothing)");
            decided += answer && strcmp(answer, "DECIDE") == 0;
            errors += answer && strcmp(answer, "ERROR") == 0;
        } else {
            bool clear = n_history >= MAX_HISTORY || random_below(10) < 3;
            int cancel_after = random_below(5) == 0 ? (int)random_below(4) : -1;
            random_words(prompt, sizeof prompt, 3 + (int)random_below(4));
            size_t length = strlen(prompt);
            prompt[length] = ' '; /* the next turn's text follows this one's */
            prompt[length + 1] = '\0';
            snprintf(request, sizeof request, "{\"cmd\":\"generate\",\"id\":%lld,\"prompt\":\"%s\",\"clear_kv\":%s}",
                     (long long)id, prompt, clear ? "true" : "false");
            if (clear) {
                for (int k = 0; k < n_history; k++)
                    free(history[k].data);
                n_history = 0; /* cleared, whatever becomes of the turn */
            }
            send_line(requests[1], request);
            answer = read_answer(&out, requests[1], id, cancel_after, &json);
            if (answer && strcmp(answer, "DONE") == 0) {
                bytes conversation = {NULL, 0};
                for (int k = 0; k < n_history; k++)
                    bytes_append(&conversation, history[k].data, history[k].length);
                bytes_append(&conversation, prompt, strlen(prompt));
                bytes want = reference_text(reference_context, &conversation);
                char *want_sent = as_sent(&want);
                const char *got = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(json, "text"));
                CHECK_MSG(got && strcmp(want_sent, got) == 0, "request %d: the session answered \"%s\", a fresh "
                          "context \"%s\"", i, got ? got : "", want_sent);
                free(want_sent);
                /* the conversation the session continued is the one the reference was given */
                int32_t n_prompt =
                    bmoe_tokenize(reference, conversation.data, conversation.length, true, true, NULL, 0, &error);
                double n_past = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(json, "n_past"));
                CHECK_MSG(n_past == n_prompt + N_PREDICT, "request %d: n_past %.0f, the conversation has %d tokens + %d",
                          i, n_past, n_prompt, N_PREDICT);
                /* the session keeps the answer's own bytes: the reference's, when they agree */
                history[n_history].data = NULL;
                history[n_history].length = 0;
                bytes_append(&history[n_history++], prompt, strlen(prompt));
                history[n_history++] = want;
                compared++;
                free(conversation.data);
            } else if (answer && strcmp(answer, "ERROR") == 0) {
                const cJSON *fatal = cJSON_GetObjectItemCaseSensitive(json, "fatal");
                CHECK_MSG(cJSON_IsFalse(fatal), "request %d: a fatal error: %s", i,
                          cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(json, "msg")));
                errors++;
            } else if (answer && strcmp(answer, "CANCELLED") == 0) {
                cancelled++;
            } else {
                CHECK_MSG(false, "request %d: no answer (the session died?)", i);
                alive = false;
            }
        }
        if (getenv("SOAK_DEBUG")) {
            char *shown = json ? cJSON_PrintUnformatted(json) : NULL;
            fprintf(stderr, "%d: %s -> %.300s\n", i, request, shown ? shown : "(none)");
            free(shown);
        }
        cJSON_Delete(json);
        if (i == 49)
            rss_after_50 = rss_mib();
        if (i >= 50) {
            double now = rss_mib();
            if (now > rss_most)
                rss_most = now;
        }
    }
    close(requests[1]); /* EOF: the session ends */
    char *line;
    while ((line = next_line(&out)) != NULL)
        free(line);
    pthread_join(r.thread, NULL);
    close(answers[0]);
    close(requests[0]);
    CHECK_MSG(r.status == 0, "the session ended with status %d", r.status);
    printf("%d answers compared, %d cancelled, %d decided, %d refused, %d errors; %llu of %llu reads failed; RSS "
           "%.1f MiB after 50 requests, at most %.1f after\n",
           compared, cancelled, decided, refused, errors, (unsigned long long)atomic_load(&reads_failed),
           (unsigned long long)atomic_load(&reads_seen), rss_after_50, rss_most);
    CHECK_MSG(compared >= 20 && atomic_load(&reads_failed) > 0 && errors > 0,
              "too little was exercised: %d answers compared, %d errors", compared, errors);
    /* flat: no more than a few MiB of allocator slack over 150 requests.
     * Under AddressSanitizer freed blocks wait in its quarantine (up to 256
     * MiB) before they are reused, so RSS rises with every byte freed: the
     * bound there is looser, and LeakSanitizer is that build's leak check. */
    CHECK_MSG(rss_most - rss_after_50 < SOAK_RSS_GROWTH_MIB,
              "RSS grew from %.1f to %.1f MiB over the last 150 requests", rss_after_50, rss_most);
    for (int k = 0; k < n_history; k++)
        free(history[k].data);
    line_reader_free(&out);
    bmoe_context_free(reference_context);
    bmoe_model_free(reference);
    return test_finish();
}
