/* bmoe-server under faults and load, end to end on a generated model: 16
 * clients at once on a short line (each answered 200 or 429 with
 * Retry-After, none left hanging), the line served in arrival order,
 * clients that leave mid-stream and mid-generation (their generation stops
 * early and the next request is answered), requests that trickle in or
 * never come (closed within --timeout), the connection bound, and 200
 * malformed requests each refused with an error while the server goes on
 * serving. */
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>

#include "server_client.h"

/* The server's line: requests that may wait behind the running one. */
#define QUEUE 3
#define BURST 16
/* A generation that runs until it is stopped: the tiny model's context
 * holds 4096 tokens, and end-of-generation tokens are ignored. */
#define LONG_TOKENS 4000
#define LONG_BODY "{\"prompt\":\"Once upon a time\",\"max_tokens\":4000,\"ignore_eos\":true}"
/* bmoe-server's SERVER_MAX_CONNECTIONS (src/server/server_http.c). */
#define MAX_CONNECTIONS 64

static char tmp[1024], model[1200];

static const char completions[] = "/v1/completions";

/* The completion id's number ("cmpl-N"), or -1. */
static long completion_number(const test_response *response)
{
    const char *id = response->body ? strstr(response->body, "\"id\":\"cmpl-") : NULL;
    return id ? strtol(id + strlen("\"id\":\"cmpl-"), NULL, 10) : -1;
}

static int completion_tokens(const test_response *response)
{
    const char *usage = response->body ? strstr(response->body, "\"completion_tokens\":") : NULL;
    return usage ? atoi(usage + strlen("\"completion_tokens\":")) : -1;
}

/* How many lines of the server's log hold needle. */
static int log_count(const test_server *server, const char *needle)
{
    size_t length = 0;
    char *log = cli_read_all(server->err_path, &length);
    int count = 0;
    for (const char *at = log; at && (at = strstr(at, needle)); at += strlen(needle))
        count++;
    free(log);
    return count;
}

/* Starts the long generation and waits until it holds the model. The
 * socket, or -1. */
static int hold_the_model(int port)
{
    int fd = test_request_send(port, "POST", completions, NULL, LONG_BODY, strlen(LONG_BODY));
    CHECK_MSG(fd >= 0, "the long request was not sent");
    if (fd >= 0 && !test_wait_metric(port, "bmoe_requests_in_line", 1, 20)) {
        CHECK_MSG(false, "the long generation did not start");
        close(fd);
        return -1;
    }
    return fd;
}

/* Cancels the long generation and reads its answer: cancelled in its
 * decoding (200) or still in its prefill (503). */
static void release_the_model(int port, int fd)
{
    test_response response = {0};
    if (test_request(port, "POST", "/api/cancel", NULL, "{}", &response) == 0)
        CHECK(response.status == 200);
    free(response.raw);
    if (test_response_read(fd, &response) == 0)
        CHECK_MSG((response.status == 200 && strstr(response.body, "\"finish_reason\":\"cancelled\"") &&
                   completion_tokens(&response) < LONG_TOKENS) ||
                      (response.status == 503 && strstr(response.body, "\"code\":\"cancelled\"")),
                  "the held generation: %.300s", response.raw);
    else
        CHECK_MSG(false, "the held generation was not answered");
    free(response.raw);
}

typedef struct burst_client {
    int port, index;
    atomic_bool *go;
    atomic_int *answered;
    int status;
    bool retry_after, error_body;
    long number;
} burst_client;

static void *burst_run(void *user)
{
    burst_client *c = user;
    char body[128];
    snprintf(body, sizeof body, "{\"prompt\":\"Client %d\",\"max_tokens\":2}", c->index);
    while (!atomic_load(c->go))
        test_sleep_ms(1);
    test_response response = {0};
    if (test_request(c->port, "POST", completions, NULL, body, &response) == 0) {
        c->status = response.status;
        c->retry_after = strstr(response.raw, "\r\nRetry-After: 1\r\n") != NULL;
        c->error_body = strstr(response.body, "\"error\":{") && strstr(response.body, "\"code\":\"queue_full\"");
        c->number = completion_number(&response);
    }
    free(response.raw);
    atomic_fetch_add(c->answered, 1);
    return NULL;
}

/* 16 clients at once while a generation holds the model: QUEUE of them
 * wait their turn and are answered 200, the rest 429 with Retry-After at
 * once; none hangs. */
static void test_burst(int port)
{
    int holder = hold_the_model(port);
    if (holder < 0)
        return;
    atomic_bool go = false;
    atomic_int answered = 0;
    burst_client clients[BURST];
    pthread_t threads[BURST];
    bool started[BURST] = {false};
    for (int i = 0; i < BURST; i++) {
        clients[i] = (burst_client){.port = port, .index = i, .go = &go, .answered = &answered, .number = -1};
        started[i] = pthread_create(&threads[i], NULL, burst_run, &clients[i]) == 0;
        CHECK(started[i]);
    }
    atomic_store(&go, true);
    /* the refused are answered while the model is still held */
    double until = test_now() + 20;
    while (atomic_load(&answered) < BURST - QUEUE && test_now() < until)
        test_sleep_ms(5);
    CHECK_MSG(atomic_load(&answered) == BURST - QUEUE, "%d of %d answered while the model was held",
              atomic_load(&answered), BURST - QUEUE);
    CHECK(test_metric(port, "bmoe_requests_in_line") == 1 + QUEUE);
    release_the_model(port, holder);
    int ok = 0, refused = 0;
    for (int i = 0; i < BURST; i++) {
        if (started[i])
            pthread_join(threads[i], NULL);
        const burst_client *c = &clients[i];
        if (c->status == 200) {
            ok++;
            CHECK(c->number > 0);
        } else {
            refused++;
            CHECK_MSG(c->status == 429 && c->retry_after && c->error_body, "client %d: %d", i, c->status);
        }
    }
    CHECK_MSG(ok == QUEUE && refused == BURST - QUEUE, "%d answered, %d refused", ok, refused);
}

/* The line is served in arrival order: requests admitted one after the
 * other behind a held model generate in that order (a completion's id
 * is numbered when its generation ends). */
static void test_order(int port)
{
    int holder = hold_the_model(port);
    if (holder < 0)
        return;
    int fds[QUEUE];
    for (int i = 0; i < QUEUE; i++) {
        char body[128];
        snprintf(body, sizeof body, "{\"prompt\":\"Turn %d\",\"max_tokens\":2}", i);
        fds[i] = test_request_send(port, "POST", completions, NULL, body, strlen(body));
        CHECK(fds[i] >= 0);
        CHECK_MSG(test_wait_metric(port, "bmoe_requests_in_line", 2 + i, 20), "request %d did not join the line", i);
    }
    release_the_model(port, holder);
    long numbers[QUEUE];
    for (int i = 0; i < QUEUE; i++) {
        test_response response = {0};
        numbers[i] = -1;
        if (fds[i] >= 0 && test_response_read(fds[i], &response) == 0 && response.status == 200)
            numbers[i] = completion_number(&response);
        free(response.raw);
        CHECK_MSG(numbers[i] > 0, "request %d was not answered", i);
        if (i > 0)
            CHECK_MSG(numbers[i] > numbers[i - 1], "request %d ran as cmpl-%ld, before request %d's cmpl-%ld", i,
                      numbers[i], i - 1, numbers[i - 1]);
    }
}

/* A client that leaves mid-stream, or while its non-streamed answer is
 * made, stops its generation: the next request is answered, and the
 * tokens made are fewer than the long generation asked. */
static void test_client_leaves(const test_server *server, bool stream)
{
    int port = server->port;
    double tokens_before = test_metric(port, "bmoe_completion_tokens_total");
    int gone_before = log_count(server, "the client went away");
    const char *body = stream ? "{\"stream\":true,\"prompt\":\"Once upon a time\",\"max_tokens\":4000,"
                                "\"ignore_eos\":true}"
                              : LONG_BODY;
    int fd = test_request_send(port, "POST", completions, NULL, body, strlen(body));
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    if (stream) {
        /* until the first token's event: the generation is running */
        char some[4096] = {0};
        size_t used = 0;
        ssize_t got;
        while (used < sizeof some - 1 && !strstr(some, "\"token\":") &&
               (got = recv(fd, some + used, sizeof some - 1 - used, 0)) > 0)
            used += (size_t)got;
        CHECK_MSG(strstr(some, "\"token\":") != NULL, "no token streamed: %s", some);
    } else {
        CHECK(test_wait_metric(port, "bmoe_requests_in_line", 1, 20));
        test_sleep_ms(100);
    }
    close(fd);
    double left = test_now();
    test_response response = {0};
    if (test_request(port, "POST", completions, NULL, "{\"prompt\":\"Hi\",\"max_tokens\":2,\"ignore_eos\":true}",
                     &response) == 0)
        CHECK_MSG(response.status == 200 && completion_tokens(&response) == 2, "after the client left: %.300s",
                  response.raw);
    else
        CHECK_MSG(false, "no answer after the client left");
    free(response.raw);
    double waited = test_now() - left;
    double made = test_metric(port, "bmoe_completion_tokens_total") - tokens_before - 2;
    /* a streamed one had made a token before its client left */
    CHECK_MSG(made >= (stream ? 1 : 0) && made < LONG_TOKENS, "%s: the generation the client left made %.0f tokens",
              stream ? "streamed" : "non-streamed", made);
    /* a stream may also end at its next write: only the non-streamed one must be noticed by the watch */
    if (!stream)
        CHECK_MSG(log_count(server, "the client went away") == gone_before + 1,
                  "the server did not notice the client leaving");
    printf("%s client left: %.0f tokens made, the next answer after %.3f s\n", stream ? "streamed" : "non-streamed",
           made, waited);
}

/* Past MAX_CONNECTIONS open connections the server takes no more until
 * some close; then the waiting one is served. */
static void test_connection_bound(int port)
{
    int idle[MAX_CONNECTIONS];
    int opened = 0;
    for (int i = 0; i < MAX_CONNECTIONS; i++) {
        idle[i] = test_connect(port);
        if (idle[i] >= 0)
            opened++;
    }
    CHECK(opened == MAX_CONNECTIONS);
    int fd = test_request_send(port, "GET", "/health", NULL, NULL, 0);
    CHECK(fd >= 0);
    struct pollfd watch = {.fd = fd, .events = POLLIN};
    CHECK_MSG(fd >= 0 && poll(&watch, 1, 300) == 0, "a connection past the bound was answered");
    /* the daemon takes waiting connections in their order: all go, then it is served */
    for (int i = 0; i < MAX_CONNECTIONS; i++)
        if (idle[i] >= 0)
            close(idle[i]);
    test_response response = {0};
    if (fd >= 0 && test_response_read(fd, &response) == 0)
        CHECK_MSG(response.status == 200, "past the bound, once the others closed: %d", response.status);
    else
        CHECK_MSG(false, "the connection past the bound was not served once the others closed");
    free(response.raw);
}

/* One malformed request. raw: sent as is; else method, path, the
 * Content-Type and body make it. shut_write: the client stops sending
 * after it. may_close: the server may close without an answer (a request
 * line it cannot read, a body that never ends, a header it stops reading
 * midway, whose unread rest may reset the connection before the answer
 * is read). */
typedef struct malformed {
    const char *what;
    const char *raw;
    const char *method, *path, *content_type, *body;
    size_t body_length; /* bytes of body sent; 0: strlen(body) */
    size_t declared;    /* its Content-Length; 0: body_length */
    bool shut_write, may_close;
} malformed;

/* Sends one malformed request; its answer must be an error. */
static void send_malformed(int port, const malformed *m, int round)
{
    char *request = NULL;
    size_t length = 0;
    FILE *out = open_memstream(&request, &length);
    if (!out) {
        CHECK(false);
        return;
    }
    if (m->raw) {
        fputs(m->raw, out);
    } else {
        size_t body_length = m->body ? (m->body_length ? m->body_length : strlen(m->body)) : 0;
        fprintf(out, "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n", m->method, m->path, port);
        if (m->content_type)
            fprintf(out, "Content-Type: %s\r\n", m->content_type);
        fprintf(out, "Content-Length: %zu\r\n\r\n", m->declared ? m->declared : body_length);
        if (m->body)
            fwrite(m->body, 1, body_length, out);
    }
    fclose(out);
    test_response response = {0};
    int status = test_raw_request(port, request, length, m->shut_write, &response);
    CHECK_MSG(status == 0 && (response.status >= 400 || (response.status == 0 && m->may_close)),
              "round %d, %s: %.200s", round, m->what, response.raw ? response.raw : "(nothing)");
    if (status == 0 && response.status >= 400 && response.status < 500 && strstr(response.raw, "application/json"))
        CHECK_MSG(strstr(response.body, "\"error\":{\"message\":"), "%s: not an OpenAI error: %.200s", m->what,
                  response.body);
    free(response.raw);
    free(request);
}

static char *repeated(const char *head, const char *unit, size_t count, const char *tail)
{
    size_t size = strlen(head) + strlen(unit) * count + strlen(tail) + 1;
    char *text = malloc(size);
    if (!text)
        return NULL;
    size_t used = (size_t)sprintf(text, "%s", head);
    for (size_t i = 0; i < count; i++)
        used += (size_t)sprintf(text + used, "%s", unit);
    sprintf(text + used, "%s", tail);
    return text;
}

/* 200 malformed requests, round after round of every kind, each answered
 * with an error (or, where HTTP leaves nothing to answer, closed); the
 * server still serves a good request after them. */
static void test_malformed(int port)
{
    char *deep_array = repeated("", "[", 100000, "");
    char *deep_object = repeated("{\"prompt\":\"a\",\"metadata\":", "{\"a\":", 40, "1}");
    char *long_path = repeated("/", "a", 20000, "");
    char *huge_header = repeated("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Big: ", "a", 100000,
                                 "\r\n\r\n");
    char *many_headers = repeated("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n", "X-Many: aaaaaaaa\r\n",
                                  4000, "\r\n");
    static const char nul_body[] = "{\"prompt\":\"a\0b\"}";
#define SENT(what_, method_, path_, type_, body_) {.what = what_, .method = method_, .path = path_, .content_type = type_, .body = body_}
#define JSON(what_, path_, body_) SENT(what_, "POST", path_, "application/json", body_)
#define RAW(what_, text_, ...) {.what = what_, .raw = text_, __VA_ARGS__}
    const char *const chat = "/v1/chat/completions";
    const malformed cases[] = {
        /* methods */
        SENT("an unknown method", "FROB", "/health", NULL, NULL),
        SENT("DELETE on completions", "DELETE", completions, "application/json", "{}"),
        SENT("GET on chat completions", "GET", chat, NULL, NULL),
        SENT("PUT on chat completions", "PUT", chat, "application/json", "{}"),
        SENT("POST on health", "POST", "/health", "application/json", "{}"),
        RAW("a request line without a path", "GARBAGE\r\n\r\n", .shut_write = true, .may_close = true),
        RAW("HTTP/9.9", "GET /health HTTP/9.9\r\nHost: x\r\n\r\n"),
        RAW("no version", "GET /health\r\n\r\n"),
        /* JSON */
        JSON("a JSON prefix", completions, "{\"prompt\":"),
        JSON("a bad literal", completions, "{\"prompt\":\"a\",\"stream\":tru}"),
        JSON("a trailing comma", completions, "{\"prompt\":\"a\",}"),
        JSON("an empty body", chat, ""),
        JSON("a JSON array", completions, "[1,2,3]"),
        JSON("a JSON string", completions, "\"prompt\""),
        JSON("JSON null", chat, "null"),
        JSON("two documents", completions, "{\"prompt\":\"a\"}{\"prompt\":\"b\"}"),
        JSON("a bad escape", completions, "{\"prompt\":\"\\q\"}"),
        JSON("a lone surrogate escape", completions, "{\"prompt\":\"\\ud800\"}"),
        /* bodies cut short */
        {.what = "a body shorter than its length", .method = "POST", .path = completions,
         .content_type = "application/json", .body = "{\"prompt\":\"abc\"}", .declared = 400, .shut_write = true,
         .may_close = true},
        {.what = "a body cut at its length", .method = "POST", .path = completions, .content_type = "application/json",
         .body = "{\"prompt\":\"abc\"}", .body_length = 9},
        RAW("a length that is not a number",
            "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: abc\r\n\r\n"),
        RAW("a broken chunk",
            "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
            "Content-Type: application/json\r\n\r\nZZ\r\n",
            .shut_write = true),
        /* content types */
        SENT("text/plain", "POST", completions, "text/plain", "{\"prompt\":\"a\"}"),
        SENT("a form", "POST", chat, "application/x-www-form-urlencoded", "prompt=a"),
        SENT("multipart", "POST", completions, "multipart/form-data; boundary=x", "--x--"),
        SENT("application/jsonx", "POST", completions, "application/jsonx", "{\"prompt\":\"a\"}"),
        /* headers */
        RAW("a 100 KB header", huge_header, .may_close = true),
        RAW("4000 headers", many_headers, .may_close = true),
        RAW("a header without a colon", "GET /health HTTP/1.1\r\nHost: x\r\nNo colon here\r\n\r\n"),
        /* paths */
        SENT("an unknown path", "GET", "/v2/models", NULL, NULL),
        SENT("a climbing path", "GET", "/v1/../../etc/passwd", NULL, NULL),
        SENT("an escaped NUL", "GET", "/nothing%00", NULL, NULL),
        JSON("escaped bytes", "/v1/%ff%fe", "{}"),
        SENT("a 20000-byte path", "GET", long_path, NULL, NULL),
        SENT("an asterisk", "OPTIONS", "*", NULL, NULL),
        /* UTF-8 */
        JSON("a 0xff byte", completions, "{\"prompt\":\"a\xff\"}"),
        JSON("an overlong slash", completions, "{\"prompt\":\"\xc0\xaf\"}"),
        JSON("an encoded surrogate", completions, "{\"prompt\":\"\xed\xa0\x80\"}"),
        JSON("a cut sequence", completions, "{\"prompt\":\"\xe2\x82\"}"),
        JSON("past U+10FFFF", chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"\xf4\x90\x80\x80\"}]}"),
        {.what = "a NUL byte", .method = "POST", .path = completions, .content_type = "application/json",
         .body = nul_body, .body_length = sizeof nul_body - 1},
        /* nesting */
        JSON("100000 open brackets", completions, deep_array),
        JSON("objects 40 deep", completions, deep_object),
        /* types */
        JSON("messages a string", chat, "{\"messages\":\"hi\"}"),
        JSON("messages an object", chat, "{\"messages\":{}}"),
        JSON("a message a number", chat, "{\"messages\":[1]}"),
        JSON("content a number", chat, "{\"messages\":[{\"role\":\"user\",\"content\":5}]}"),
        JSON("role a number", chat, "{\"messages\":[{\"role\":1,\"content\":\"a\"}]}"),
        JSON("prompt a number", completions, "{\"prompt\":5}"),
        JSON("prompt a list", completions, "{\"prompt\":[\"a\",\"b\"]}"),
        JSON("max_tokens a string", completions, "{\"prompt\":\"a\",\"max_tokens\":\"5\"}"),
        JSON("max_tokens negative", completions, "{\"prompt\":\"a\",\"max_tokens\":-1}"),
        JSON("max_tokens fractional", completions, "{\"prompt\":\"a\",\"max_tokens\":1.5}"),
        JSON("max_tokens huge", completions, "{\"prompt\":\"a\",\"max_tokens\":1e300}"),
        JSON("temperature a string", completions, "{\"prompt\":\"a\",\"temperature\":\"hot\"}"),
        JSON("stream a number", completions, "{\"prompt\":\"a\",\"stream\":1}"),
        JSON("stop an object", completions, "{\"prompt\":\"a\",\"stop\":{}}"),
        JSON("seed negative", completions, "{\"prompt\":\"a\",\"seed\":-3}"),
        JSON("ignore_eos a string", completions, "{\"prompt\":\"a\",\"ignore_eos\":\"yes\"}"),
        JSON("top_k fractional", completions, "{\"prompt\":\"a\",\"top_k\":2.5}"),
    };
#undef SENT
#undef JSON
#undef RAW
    size_t n_cases = sizeof cases / sizeof cases[0];
    bool made = deep_array && deep_object && long_path && huge_header && many_headers;
    CHECK(made);
    for (int round = 0; made && round < 200; round++)
        send_malformed(port, &cases[(size_t)round % n_cases], round);
    free(deep_array);
    free(deep_object);
    free(long_path);
    free(huge_header);
    free(many_headers);
    test_response response = {0};
    if (test_request(port, "POST", "/v1/chat/completions", NULL,
                     "{\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}],\"max_tokens\":4}", &response) == 0)
        CHECK_MSG(response.status == 200 && strstr(response.body, "\"chat.completion\""), "after the malformed: %.300s",
                  response.raw);
    else
        CHECK_MSG(false, "no answer after the malformed requests");
    free(response.raw);
}

/* A client that sends a request's start at once, then the rest a byte
 * every 250 ms (so it is never silent for the daemon's idle timeout), or,
 * with no rest, nothing more. */
typedef struct slow_client {
    int port;
    const char *start, *rest;
    double closed_after; /* seconds until the server closed it; -1: it did not within 10 s */
} slow_client;

static void *slow_run(void *user)
{
    slow_client *c = user;
    c->closed_after = -1;
    int fd = test_connect(c->port);
    if (fd < 0)
        return NULL;
    double start = test_now();
    size_t rest = strlen(c->rest);
    if (test_send_all(fd, c->start, strlen(c->start))) {
        for (size_t i = 0; test_now() - start < 10; i++) {
            struct pollfd watch = {.fd = fd, .events = POLLIN};
            char reply[256];
            bool closed = (rest > 0 && send(fd, &c->rest[i % rest], 1, MSG_NOSIGNAL) != 1) ||
                          (poll(&watch, 1, 250) > 0 && recv(fd, reply, sizeof reply, MSG_DONTWAIT) <= 0);
            if (closed) {
                c->closed_after = test_now() - start;
                break;
            }
        }
    }
    close(fd);
    return NULL;
}

/* With --timeout 1: headers trickled, a body trickled and a connection
 * that says nothing are all closed within about a second; answers that
 * take longer than the timeout to make are still given. */
static void test_slow_clients(void)
{
    test_server server;
    const char *args[] = {"-m", model, "-t", "1", "--timeout", "1", NULL};
    if (test_server_start(&server, args) != 0) {
        CHECK_MSG(false, "the --timeout 1 server did not start");
        return;
    }
    slow_client clients[] = {
        {server.port, "GET /health HTTP/1.1\r\n", "Host: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 0},
        {server.port,
         "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
         "{\"prompt\":\"",
         "abcdefgh", 0},
        {server.port, "", "", 0},
    };
    static const char *const names[] = {"trickled headers", "a trickled body", "a silent connection"};
    enum { SLOW = sizeof clients / sizeof clients[0] };
    pthread_t threads[SLOW];
    bool started[SLOW];
    for (int i = 0; i < SLOW; i++)
        started[i] = pthread_create(&threads[i], NULL, slow_run, &clients[i]) == 0;
    for (int i = 0; i < SLOW; i++) {
        CHECK(started[i]);
        if (started[i])
            pthread_join(threads[i], NULL);
        CHECK_MSG(clients[i].closed_after >= 0.5 && clients[i].closed_after < 3, "%s: closed after %.2f s", names[i],
                  clients[i].closed_after);
    }
    /* the two that kept sending were cut by the server's deadline */
    int cut = log_count(&server, "sent no whole request in 1 s");
    CHECK_MSG(cut >= 2, "the server logged %d cut connections", cut);
    if (cut < 2) {
        size_t length = 0;
        char *log = cli_read_all(server.err_path, &length);
        fprintf(stderr, "the server's log:\n%s\n", log ? log : "(none)");
        free(log);
    }
    /* an answer may take longer than the timeout: a generation held 1.5 s
     * and a request that waits behind it are both answered */
    int holder = hold_the_model(server.port);
    double start = test_now();
    static const char behind[] = "{\"prompt\":\"Behind\",\"max_tokens\":2,\"ignore_eos\":true}";
    int fd = test_request_send(server.port, "POST", completions, NULL, behind, sizeof behind - 1);
    CHECK(fd >= 0);
    CHECK(test_wait_metric(server.port, "bmoe_requests_in_line", 2, 20));
    test_sleep_ms(1500);
    if (holder >= 0)
        release_the_model(server.port, holder);
    test_response response = {0};
    if (fd >= 0 && test_response_read(fd, &response) == 0)
        CHECK_MSG(response.status == 200 && completion_tokens(&response) == 2, "the request in line: %.300s",
                  response.raw);
    else
        CHECK_MSG(false, "a request that waited longer than --timeout was not answered");
    free(response.raw);
    double waited = test_now() - start;
    CHECK_MSG(waited > 1.5, "the request in line was answered after %.2f s", waited);
    printf("closed after %.2f s (trickled headers), %.2f s (trickled body), %.2f s (silent); a request in line "
           "answered after %.2f s\n",
           clients[0].closed_after, clients[1].closed_after, clients[2].closed_after, waited);
    CHECK(test_server_stop(&server, SIGTERM) == 0);
}

int main(void)
{
    snprintf(tmp, sizeof tmp, "%s/server-faults", test_tmp_dir());
    mkdir(tmp, 0755);
    snprintf(model, sizeof model, "%s/tiny.gguf", tmp);
    if (!cli_mkmodel("tiny-qwen3moe", model))
        return test_finish();
    test_server server;
    const char *args[] = {"-m", model, "-t", "1", "--max-queue", "3", NULL};
    if (test_server_start(&server, args) != 0) {
        CHECK_MSG(false, "bmoe-server did not start");
        return test_finish();
    }
    test_burst(server.port);
    test_order(server.port);
    test_client_leaves(&server, true);
    test_client_leaves(&server, false);
    test_connection_bound(server.port);
    test_malformed(server.port);
    CHECK_MSG(test_server_stop(&server, SIGTERM) == 0, "SIGTERM did not end the server with status 0");
    test_slow_clients();
    return test_finish();
}
