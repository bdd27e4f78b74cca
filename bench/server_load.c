/* bench-server_load --port N [--clients C] [--requests R] [--tokens T]
 *                   [--api-key KEY]: load on a running bmoe-server. C clients
 * start together; each sends R streamed /v1/completions one after the
 * other (a prompt unique to the request, T tokens each, end-of-generation
 * ignored), one connection per request. A request counts when it is
 * answered 200 and its stream ends with [DONE]; its time to first token runs
 * from sending it to the first token's event (the wait in line and the
 * prefill included).
 *
 * A benchmark, not a test. Prints one line: clients, requests, ok, errors,
 * wall seconds, requests/s, generated tokens/s, time to first token p50 and
 * p99 in ms. Exits 1 when a request failed. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* What one response is searched for; a read keeps this many bytes of the
 * last so a marker cut between two reads is still found. */
#define LOAD_TOKEN_MARK "\"bmoe\":{\"token\":"
#define LOAD_DONE_MARK "data: [DONE]"
#define LOAD_CARRY 32
/* A guard against a server that stops answering. */
#define LOAD_RECEIVE_SECONDS 600

typedef struct load_options {
    int port, clients, requests, tokens;
    const char *api_key;
} load_options;

typedef struct load_client {
    const load_options *options;
    int index;
    atomic_bool *go;
    double *ttft_ms; /* options->requests slots; -1: the request failed */
    int ok, errors;
} load_client;

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static int connect_local(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval timeout = {LOAD_RECEIVE_SECONDS, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    if (connect(fd, (struct sockaddr *)&address, sizeof address) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static bool send_all(int fd, const char *data, size_t length)
{
    while (length > 0) {
        ssize_t sent = send(fd, data, length, MSG_NOSIGNAL);
        if (sent <= 0)
            return false;
        data += sent;
        length -= (size_t)sent;
    }
    return true;
}

/* One streamed request. Its time to first token in ms, or -1 when it
 * failed (no connection, not 200, no token, no [DONE]). */
static double run_request(const load_options *o, int client, int number)
{
    char body[256], request[1024];
    int body_length = snprintf(body, sizeof body,
                               "{\"prompt\":\"Request %d of client %d: once upon a time\",\"max_tokens\":%d,"
                               "\"ignore_eos\":true,\"stream\":true}",
                               number, client, o->tokens);
    char key[300] = "";
    if (o->api_key)
        snprintf(key, sizeof key, "Authorization: Bearer %s\r\n", o->api_key);
    int length = snprintf(request, sizeof request,
                          "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n%s"
                          "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
                          o->port, key, body_length, body);
    int fd = connect_local(o->port);
    if (fd < 0)
        return -1;
    double start = now_seconds(), first = -1;
    bool status_ok = false, done = false, head_seen = false;
    char buffer[LOAD_CARRY + 16384 + 1];
    size_t kept = 0;
    if (send_all(fd, request, (size_t)length)) {
        ssize_t got;
        while ((got = recv(fd, buffer + kept, sizeof buffer - 1 - kept, 0)) > 0) {
            size_t used = kept + (size_t)got;
            buffer[used] = '\0';
            if (!head_seen && used >= 12) {
                head_seen = true;
                status_ok = strncmp(buffer, "HTTP/1.1 200", 12) == 0;
            }
            if (first < 0 && strstr(buffer, LOAD_TOKEN_MARK))
                first = now_seconds();
            if (strstr(buffer, LOAD_DONE_MARK))
                done = true;
            /* the status line must stay until it is read whole */
            kept = !head_seen ? used : used < LOAD_CARRY ? used : LOAD_CARRY;
            memmove(buffer, buffer + used - kept, kept);
            if (!head_seen && kept == sizeof buffer - 1)
                break;
        }
    }
    close(fd);
    return status_ok && done && first >= 0 ? (first - start) * 1e3 : -1;
}

static void *client_run(void *user)
{
    load_client *c = user;
    while (!atomic_load(c->go))
        sched_yield();
    for (int r = 0; r < c->options->requests; r++) {
        double ttft = run_request(c->options, c->index, r);
        c->ttft_ms[r] = ttft;
        if (ttft < 0)
            c->errors++;
        else
            c->ok++;
    }
    return NULL;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The nearest-rank percentile p of sorted[0..count). */
static double percentile(const double *sorted, int count, double p)
{
    if (count == 0)
        return 0;
    int rank = (int)(p / 100.0 * count + 0.999999);
    if (rank < 1)
        rank = 1;
    return sorted[(rank > count ? count : rank) - 1];
}

static int usage(void)
{
    fprintf(stderr, "usage: bench-server_load --port N [--clients C] [--requests R] [--tokens T] [--api-key KEY]\n");
    return 2;
}

int main(int argc, char **argv)
{
    load_options o = {.port = 0, .clients = 1, .requests = 8, .tokens = 32};
    for (int i = 1; i < argc; i++) {
        const char *flag = argv[i];
        if (i + 1 >= argc)
            return usage();
        const char *value = argv[++i];
        char *end = NULL;
        long number = strtol(value, &end, 10);
        bool numeric = *value && !*end && number > 0 && number <= 1000000;
        if (strcmp(flag, "--api-key") == 0)
            o.api_key = value;
        else if (!numeric)
            return usage();
        else if (strcmp(flag, "--port") == 0 && number <= 65535)
            o.port = (int)number;
        else if (strcmp(flag, "--clients") == 0 && number <= 1024)
            o.clients = (int)number;
        else if (strcmp(flag, "--requests") == 0)
            o.requests = (int)number;
        else if (strcmp(flag, "--tokens") == 0)
            o.tokens = (int)number;
        else
            return usage();
    }
    if (o.port == 0)
        return usage();
    int total = o.clients * o.requests;
    load_client *clients = calloc((size_t)o.clients, sizeof *clients);
    pthread_t *threads = calloc((size_t)o.clients, sizeof *threads);
    double *ttft = calloc((size_t)total, sizeof *ttft);
    if (!clients || !threads || !ttft) {
        fprintf(stderr, "bench-server_load: out of memory\n");
        return 1;
    }
    atomic_bool go = false;
    int started = 0;
    for (int i = 0; i < o.clients; i++) {
        clients[i] = (load_client){.options = &o, .index = i, .go = &go, .ttft_ms = ttft + (size_t)i * o.requests};
        if (pthread_create(&threads[i], NULL, client_run, &clients[i]) != 0)
            break;
        started++;
    }
    double start = now_seconds();
    atomic_store(&go, true);
    int ok = 0, errors = (o.clients - started) * o.requests;
    for (int i = 0; i < started; i++) {
        pthread_join(threads[i], NULL);
        ok += clients[i].ok;
        errors += clients[i].errors;
    }
    double wall = now_seconds() - start;
    /* the answered requests' times, sorted */
    int n = 0;
    for (int i = 0; i < started * o.requests; i++)
        if (ttft[i] >= 0)
            ttft[n++] = ttft[i];
    qsort(ttft, (size_t)n, sizeof *ttft, compare_doubles);
    printf("clients %d requests %d ok %d errors %d wall_s %.3f req_s %.3f tok_s %.1f ttft_p50_ms %.1f "
           "ttft_p99_ms %.1f\n",
           o.clients, total, ok, errors, wall, wall > 0 ? ok / wall : 0.0,
           wall > 0 ? (double)ok * o.tokens / wall : 0.0, percentile(ttft, n, 50), percentile(ttft, n, 99));
    free(clients);
    free(threads);
    free(ttft);
    return errors ? 1 : 0;
}
