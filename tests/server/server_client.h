/* The test's side of bmoe-server: the server started as a child (its
 * listening line read from its stderr for the port) and a minimal HTTP/1.1
 * client (one request per connection, Connection: close, the answer read
 * to the end), so the test sees the bytes a client would. */
#ifndef BMOE_TESTS_SERVER_CLIENT_H
#define BMOE_TESTS_SERVER_CLIENT_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>

#include "cli_run.h"

typedef struct test_server {
    pid_t pid;
    int port;
    char err_path[1024];
} test_server;

/* Starts bmoe-server with args (NULL-terminated, without argv[0]) on port
 * 0 and waits (at most 20 s) for its listening line. 0, or -1 (then the
 * child, if any, is ended). */
static inline int test_server_start(test_server *server, const char *const *args)
{
    static int started;
    memset(server, 0, sizeof *server);
    snprintf(server->err_path, sizeof server->err_path, "%s/server-%d-%d.err", test_tmp_dir(), (int)getpid(),
             started++);
    char binary[1024];
    snprintf(binary, sizeof binary, "%s/bmoe-server", BMOE_BIN_DIR);
    const char *argv[64];
    int argc = 0;
    argv[argc++] = binary;
    for (int i = 0; args[i] && argc < 60; i++)
        argv[argc++] = args[i];
    argv[argc++] = "--port";
    argv[argc++] = "0";
    argv[argc] = NULL;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 2, server->err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int spawned = posix_spawn(&server->pid, binary, &actions, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    if (spawned != 0)
        return -1;
    for (int tries = 0; tries < 2000; tries++) {
        size_t length = 0;
        char *err = cli_read_all(server->err_path, &length);
        const char *line = err ? strstr(err, "listening on http://127.0.0.1:") : NULL;
        if (line)
            server->port = atoi(line + strlen("listening on http://127.0.0.1:"));
        free(err);
        if (server->port > 0)
            return 0;
        int status;
        if (waitpid(server->pid, &status, WNOHANG) == server->pid)
            return -1;
        struct timespec pause = {0, 10 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    kill(server->pid, SIGKILL);
    waitpid(server->pid, NULL, 0);
    return -1;
}

/* bmoe-mkmodel's tiny qwen3moe (a chat template, random weights) written
 * to model (size bytes) in a folder of its own under the tests' scratch,
 * and bmoe-server started on it with one thread. 0, or -1 after a failed
 * check that says which step failed. */
static inline int test_tiny_server(const char *folder, char *model, size_t size, test_server *server)
{
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s/%s", test_tmp_dir(), folder);
    mkdir(tmp, 0755);
    snprintf(model, size, "%s/tiny.gguf", tmp);
    if (!cli_mkmodel("tiny-qwen3moe", model))
        return -1;
    const char *args[] = {"-m", model, "-t", "1", NULL};
    if (test_server_start(server, args) != 0) {
        CHECK_MSG(false, "bmoe-server did not start");
        return -1;
    }
    return 0;
}

/* Sends signal and waits for the exit (at most 20 s). The exit status, or
 * -1 when it did not exit normally in time (then it is killed). */
static inline int test_server_stop(test_server *server, int signal_number)
{
    kill(server->pid, signal_number);
    for (int tries = 0; tries < 2000; tries++) {
        int status;
        if (waitpid(server->pid, &status, WNOHANG) == server->pid) {
            unlink(server->err_path);
            return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        }
        struct timespec pause = {0, 10 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    kill(server->pid, SIGKILL);
    waitpid(server->pid, NULL, 0);
    return -1;
}

static inline int test_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval timeout = {30, 0}; /* a hang guard: no answer here takes seconds */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    if (fd < 0 || connect(fd, (struct sockaddr *)&address, sizeof address) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

static inline bool test_send_all(int fd, const char *data, size_t length)
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

/* Sends a request (extra_headers: whole lines with their CRLF, or NULL). */
static inline int test_request_send(int port, const char *method, const char *path, const char *extra_headers,
                                    const char *body, size_t body_length)
{
    int fd = test_connect(port);
    if (fd < 0)
        return -1;
    char head[2048];
    int n = snprintf(head, sizeof head,
                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n%s%s%zu\r\n\r\n", method,
                     path, port, extra_headers ? extra_headers : "",
                     body ? "Content-Type: application/json\r\nContent-Length: " : "Content-Length: ",
                     body ? body_length : 0);
    if (!test_send_all(fd, head, (size_t)n) || (body && !test_send_all(fd, body, body_length))) {
        close(fd);
        return -1;
    }
    return fd;
}

typedef struct test_response {
    int status;
    char *raw;        /* everything read */
    const char *body; /* into raw */
} test_response;

/* Reads the answer to the end. 0, or -1. */
static inline int test_response_read(int fd, test_response *response)
{
    memset(response, 0, sizeof *response);
    size_t capacity = 4096, used = 0;
    char *raw = malloc(capacity + 1);
    ssize_t got;
    while (raw && (got = recv(fd, raw + used, capacity - used, 0)) > 0) {
        used += (size_t)got;
        if (used == capacity) {
            char *grown = realloc(raw, capacity * 2 + 1);
            if (!grown) {
                free(raw);
                raw = NULL;
                break;
            }
            raw = grown;
            capacity *= 2;
        }
    }
    close(fd);
    if (!raw)
        return -1;
    raw[used] = '\0';
    response->raw = raw;
    const char *end = strstr(raw, "\r\n\r\n");
    if (strncmp(raw, "HTTP/1.1 ", 9) != 0 || !end)
        return -1;
    response->status = atoi(raw + 9);
    response->body = end + 4;
    return 0;
}

static inline int test_request(int port, const char *method, const char *path, const char *extra_headers,
                               const char *body, test_response *response)
{
    memset(response, 0, sizeof *response);
    int fd = test_request_send(port, method, path, extra_headers, body, body ? strlen(body) : 0);
    return fd < 0 ? -1 : test_response_read(fd, response);
}

/* A chunked body decoded in place (the chunks' sizes and CRLFs taken
 * out). Returns the decoded length, or -1 when it is not well-formed. */
static inline long test_dechunk(char *body)
{
    char *in = body, *out = body;
    for (;;) {
        char *end = NULL;
        long size = strtol(in, &end, 16);
        if (end == in || size < 0 || strncmp(end, "\r\n", 2) != 0)
            return -1;
        in = end + 2;
        if (size == 0)
            break;
        if ((long)strlen(in) < size + 2 || strncmp(in + size, "\r\n", 2) != 0)
            return -1;
        memmove(out, in, (size_t)size);
        out += size;
        in += size + 2;
    }
    *out = '\0';
    return out - body;
}

/* Seconds on the monotonic clock. */
static inline double test_now(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + now.tv_nsec * 1e-9;
}

static inline void test_sleep_ms(long milliseconds)
{
    struct timespec pause = {milliseconds / 1000, (milliseconds % 1000) * 1000000L};
    nanosleep(&pause, NULL);
}

/* Sends bytes as they are (a request of any shape; shut_write: then the
 * client's sending side is closed) and reads until the server closes.
 * status 0 and an empty raw: the server closed without answering. 0, or -1
 * (no connection, or an answer that is not HTTP/1.1). */
static inline int test_raw_request(int port, const char *data, size_t length, bool shut_write,
                                   test_response *response)
{
    memset(response, 0, sizeof *response);
    int fd = test_connect(port);
    if (fd < 0)
        return -1;
    /* the server may close before taking it all (a header past its limit) */
    test_send_all(fd, data, length);
    if (shut_write)
        shutdown(fd, SHUT_WR);
    if (test_response_read(fd, response) == 0)
        return 0;
    if (response->raw && !response->raw[0]) {
        response->status = 0;
        return 0;
    }
    return -1;
}

/* A figure /metrics reports, or -1 when it cannot be read. */
static inline double test_metric(int port, const char *name)
{
    test_response response;
    double value = -1;
    char key[128];
    snprintf(key, sizeof key, "\n%s ", name);
    if (test_request(port, "GET", "/metrics", NULL, NULL, &response) == 0 && response.status == 200) {
        const char *line = strstr(response.body - 1, key);
        if (line)
            value = strtod(line + strlen(key), NULL);
    }
    free(response.raw);
    return value;
}

/* Waits (at most seconds) until the /metrics figure name is value. */
static inline bool test_wait_metric(int port, const char *name, double value, double seconds)
{
    double until = test_now() + seconds;
    do {
        if (test_metric(port, name) == value)
            return true;
        test_sleep_ms(5);
    } while (test_now() < until);
    return false;
}

#endif
