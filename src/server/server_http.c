/* The HTTP layer (libmicrohttpd, a thread per connection so a generation
 * may block its own connection's thread): body collection with its limit,
 * the browser and key guards, routing, one log line per request; the
 * connections' limits (how many, how much memory each, how long a request
 * may take to arrive) and the watch on the turn holder's client. */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <cjson/cJSON.h>

#include "params.h"
#include "server.h"

/* Each connection is a thread: past this many the daemon takes no more
 * until one closes (16 clients at once, the line behind them, listeners
 * and the page's own requests fit). */
#define SERVER_MAX_CONNECTIONS 64
/* The daemon's memory for one connection's request line, headers and
 * answer buffer: a larger header is refused by the daemon (the body is
 * copied out as it arrives and bounded by --max-body). */
#define SERVER_CONNECTION_MEMORY ((size_t)32 << 10)
/* How often the main thread looks for requests that take too long. */
#define SERVER_WATCH_MS 250

/* One request as it arrives. */
typedef struct request {
    char *body;
    size_t length, capacity;
    bool too_large;
    unsigned status; /* what it was answered, for the log line */
} request;

/* Whether the client on fd has gone away: its end closed or reset. The
 * daemon does not read the socket while a handler runs, so a generation
 * that answers at its end asks the socket itself (unread bytes are only
 * peeked: a pipelined request stays for the daemon). A client that shuts
 * down only its sending side looks gone too, as HTTP clients do not. */
static bool client_gone(int fd)
{
    struct pollfd watch = {.fd = fd, .events = POLLIN};
    if (poll(&watch, 1, 0) <= 0)
        return false;
    if (watch.revents & (POLLERR | POLLHUP | POLLNVAL))
        return true;
    char byte;
    ssize_t got = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

bool server_abort_requested(void *user)
{
    server *s = user;
    if (atomic_load(&s->cancel))
        return true;
    int fd = atomic_load(&s->client_fd);
    if (fd < 0 || !client_gone(fd))
        return false;
    if (!atomic_exchange(&s->cancel, true))
        fprintf(stderr, "bmoe-server: the client went away: its generation stops\n");
    return true;
}

int server_turn_acquire(server *s, int fd)
{
    pthread_mutex_lock(&s->lock);
    /* the running generation is one of next_ticket - serving */
    if (s->next_ticket - s->serving > (uint64_t)s->config->max_queue) {
        pthread_mutex_unlock(&s->lock);
        return -1;
    }
    uint64_t ticket = s->next_ticket++;
    while (s->serving != ticket)
        pthread_cond_wait(&s->turn_over, &s->lock);
    atomic_store(&s->cancel, atomic_load(&s->stopping));
    atomic_store(&s->client_fd, fd);
    pthread_mutex_unlock(&s->lock);
    return 0;
}

void server_turn_release(server *s)
{
    pthread_mutex_lock(&s->lock);
    atomic_store(&s->client_fd, -1);
    s->serving++;
    pthread_cond_broadcast(&s->turn_over);
    pthread_mutex_unlock(&s->lock);
}

void server_json_reply(server_reply *reply, unsigned status, cJSON *json)
{
    reply->status = status;
    reply->content_type = NULL;
    reply->body = json ? cJSON_PrintUnformatted(json) : NULL;
    cJSON_Delete(json);
    if (!reply->body) {
        static const char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\","
                                  "\"param\":null,\"code\":null}}";
        reply->status = 500;
        reply->body = strdup(oom);
    }
    reply->length = reply->body ? strlen(reply->body) : 0;
}

void server_error_reply(server_reply *reply, unsigned status, const char *type, const char *param,
                        const char *code, const char *format, ...)
{
    char message[1024];
    va_list args;
    va_start(args, format);
    vsnprintf(message, sizeof message, format, args);
    va_end(args);
    cJSON *root = cJSON_CreateObject();
    cJSON *error = cJSON_AddObjectToObject(root, "error");
    cJSON_AddStringToObject(error, "message", message);
    cJSON_AddStringToObject(error, "type", type);
    if (param)
        cJSON_AddStringToObject(error, "param", param);
    else
        cJSON_AddNullToObject(error, "param");
    if (code)
        cJSON_AddStringToObject(error, "code", code);
    else
        cJSON_AddNullToObject(error, "code");
    server_json_reply(reply, status, root);
}

static void models_reply(server *s, server_reply *reply)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "object", "list");
    cJSON *data = cJSON_AddArrayToObject(root, "data");
    cJSON *model = cJSON_CreateObject();
    cJSON_AddStringToObject(model, "id", s->model_id);
    cJSON_AddStringToObject(model, "object", "model");
    cJSON_AddNumberToObject(model, "created", 0);
    cJSON_AddStringToObject(model, "owned_by", "bmoe");
    cJSON_AddItemToArray(data, model);
    server_json_reply(reply, 200, root);
}

static void info_reply(server *s, server_reply *reply)
{
    bmoe_stream_state state;
    bmoe_model_get_stream_state(s->model, &state);
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "model", s->model_id);
    cJSON_AddStringToObject(root, "path", s->config->model_path);
    cJSON_AddStringToObject(root, "architecture", bmoe_model_architecture(s->model));
    cJSON_AddStringToObject(root, "version", bmoe_version());
    cJSON_AddNumberToObject(root, "n_ctx", bmoe_context_n_ctx(s->context));
    cJSON_AddBoolToObject(root, "chat_template", s->chat != NULL);
    cJSON_AddStringToObject(root, "think_control",
                            s->chat ? bmoe_think_control_name(bmoe_chat_think_control(s->chat)) : "none");
    cJSON_AddStringToObject(root, "reasoning_format",
                            s->chat ? bmoe_reasoning_format_name(bmoe_chat_reasoning_format(s->chat)) : "none");
    cJSON_AddStringToObject(root, "tool_format", bmoe_tool_format_name(bmoe_chat_tool_format(s->chat)));
    cJSON *stream = cJSON_AddObjectToObject(root, "streaming");
    cJSON_AddBoolToObject(stream, "enabled", state.streaming);
    cJSON_AddBoolToObject(stream, "direct", state.direct);
    cJSON_AddNumberToObject(stream, "cache_budget_mib", (double)state.cache_budget_bytes / 1048576.0);
    cJSON_AddNumberToObject(stream, "cache_resident_mib", (double)state.cache_resident_bytes / 1048576.0);
    cJSON_AddNumberToObject(stream, "cycle_mib", (double)state.cycle_bytes / 1048576.0);
    server_json_reply(reply, 200, root);
}

static void params_reply(server_reply *reply)
{
    char *text = NULL;
    size_t length = 0;
    FILE *out = open_memstream(&text, &length);
    if (!out || params_describe_json(out) != 0) {
        if (out)
            fclose(out);
        free(text);
        server_error_reply(reply, 500, "server_error", NULL, NULL, "out of memory for the parameter table");
        return;
    }
    fclose(out);
    reply->status = 200;
    reply->body = text;
    reply->length = length;
}

static void cancel_reply(server *s, server_reply *reply)
{
    atomic_store(&s->cancel, true);
    cJSON *root = cJSON_CreateObject();
    cJSON_AddBoolToObject(root, "cancelled", true);
    server_json_reply(reply, 200, root);
}

void server_count_generation(server *s, const bmoe_generation *g)
{
    const bmoe_stats *decode = bmoe_generation_decode_stats(g);
    pthread_mutex_lock(&s->lock);
    s->generations++;
    s->prompt_tokens += (uint64_t)bmoe_generation_n_prompt(g);
    s->reused_tokens += (uint64_t)bmoe_generation_n_reused(g);
    s->completion_tokens += (uint64_t)bmoe_generation_n_generated(g);
    s->decode_ms += decode->wall_ms;
    if (decode->wall_ms > 0)
        s->last_tok_s = decode->n_tokens / (decode->wall_ms * 1e-3);
    pthread_mutex_unlock(&s->lock);
    bmoe_error error = {0};
    if (s->profile_writable && bmoe_model_save_expert_profile(s->model, s->config->expert_profile, &error) != 0)
        fprintf(stderr, "bmoe-server: warning: %s\n", error.message);
}

/* GET /metrics: Prometheus text. */
static void metrics_reply(server *s, server_reply *reply)
{
    bmoe_stream_state state;
    bmoe_model_get_stream_state(s->model, &state);
    pthread_mutex_lock(&s->lock);
    uint64_t waiting = s->next_ticket - s->serving;
    char *text = NULL;
    size_t length = 0;
    FILE *out = open_memstream(&text, &length);
    if (out) {
        fprintf(out,
                "# TYPE bmoe_generations_total counter\nbmoe_generations_total %llu\n"
                "# TYPE bmoe_prompt_tokens_total counter\nbmoe_prompt_tokens_total %llu\n"
                "# TYPE bmoe_reused_tokens_total counter\nbmoe_reused_tokens_total %llu\n"
                "# TYPE bmoe_completion_tokens_total counter\nbmoe_completion_tokens_total %llu\n"
                "# TYPE bmoe_decode_seconds_total counter\nbmoe_decode_seconds_total %.6f\n"
                "# TYPE bmoe_last_decode_tokens_per_second gauge\nbmoe_last_decode_tokens_per_second %.3f\n"
                "# TYPE bmoe_requests_in_line gauge\nbmoe_requests_in_line %llu\n"
                "# TYPE bmoe_flash_read_bytes_total counter\nbmoe_flash_read_bytes_total %llu\n"
                "# TYPE bmoe_cache_hits_total counter\nbmoe_cache_hits_total %llu\n"
                "# TYPE bmoe_cache_misses_total counter\nbmoe_cache_misses_total %llu\n"
                "# TYPE bmoe_cache_budget_bytes gauge\nbmoe_cache_budget_bytes %lld\n",
                (unsigned long long)s->generations, (unsigned long long)s->prompt_tokens,
                (unsigned long long)s->reused_tokens, (unsigned long long)s->completion_tokens, s->decode_ms * 1e-3,
                s->last_tok_s, (unsigned long long)waiting, (unsigned long long)state.read_bytes,
                (unsigned long long)state.hits, (unsigned long long)state.misses,
                (long long)state.cache_budget_bytes);
    }
    pthread_mutex_unlock(&s->lock);
    if (!out || fclose(out) != 0) {
        free(text);
        server_error_reply(reply, 500, "server_error", NULL, NULL, "out of memory");
        return;
    }
    reply->status = 200;
    reply->body = text;
    reply->length = length;
    reply->content_type = "text/plain; version=0.0.4";
}

/* A request with an Origin that is not this server's own page is a
 * browser sent by another site: refused, so a page cannot drive the model. */
static bool foreign_origin(struct MHD_Connection *connection)
{
    const char *origin = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, "Origin");
    if (!origin)
        return false;
    const char *host = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, "Host");
    if (!host)
        return true;
    const char *rest = strncmp(origin, "http://", 7) == 0 ? origin + 7 : NULL;
    return !rest || strcmp(rest, host) != 0;
}

/* /v1/messages and what is under it: Anthropic's API, its key header and
 * its errors' shape. */
static bool anthropic_path(const char *url)
{
    static const char messages[] = "/v1/messages";
    size_t n = sizeof messages - 1;
    return strncmp(url, messages, n) == 0 && (url[n] == '\0' || url[n] == '/');
}

static bool key_accepted(server *s, struct MHD_Connection *connection, const char *url)
{
    if (!s->config->api_key)
        return true;
    const char *header = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, "Authorization");
    if (header && strncmp(header, "Bearer ", 7) == 0 && strcmp(header + 7, s->config->api_key) == 0)
        return true;
    /* Anthropic's clients send the key as x-api-key */
    const char *key = anthropic_path(url) ? MHD_lookup_connection_value(connection, MHD_HEADER_KIND, "x-api-key")
                                          : NULL;
    return key && strcmp(key, s->config->api_key) == 0;
}

/* A body is JSON when it says so (parameters such as a charset after the
 * type are allowed) or says nothing. */
static bool json_content(struct MHD_Connection *connection, const char **given)
{
    static const char json[] = "application/json";
    const char *type = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, "Content-Type");
    *given = type;
    if (!type)
        return true;
    type += strspn(type, " \t");
    size_t n = sizeof json - 1;
    return strncasecmp(type, json, n) == 0 && strchr("; \t", type[n]) != NULL;
}

/* Every path and the one method it answers; Ollama's answer its errors in
 * Ollama's shape (Anthropic's in Anthropic's: anthropic_path). */
static const struct {
    const char *path, *method;
    bool ollama;
} routes[] = {
    {"/", "GET", false},
    {"/health", "GET", false},
    {"/metrics", "GET", false},
    {"/v1/models", "GET", false},
    {"/api/info", "GET", false},
    {"/api/params", "GET", false},
    {"/api/events", "GET", false},
    {"/api/cancel", "POST", false},
    {"/tokenize", "POST", false},
    {"/detokenize", "POST", false},
    {"/v1/chat/completions", "POST", false},
    {"/v1/completions", "POST", false},
    {"/api/chat", "POST", true},
    {"/api/generate", "POST", true},
    {"/api/tags", "GET", true},
    {"/api/show", "POST", true},
    {"/api/ps", "GET", true},
    {"/api/version", "GET", true},
    {"/v1/messages", "POST", false},
    {"/v1/messages/count_tokens", "POST", false},
};

/* Whether the body came as JSON; if not, the reply is a 415. */
static bool json_body(struct MHD_Connection *connection, server_reply *reply)
{
    const char *type = NULL;
    if (json_content(connection, &type))
        return true;
    server_error_reply(reply, 415, "invalid_request_error", NULL, "unsupported_media_type",
                       "the body must be sent as Content-Type: application/json, not %.100s", type);
    return false;
}

static void completion_route(server *s, struct MHD_Connection *connection, const request *r,
                             enum server_endpoint endpoint, server_reply *reply)
{
    if (!json_body(connection, reply))
        return;
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    server_completion(s, r->body ? r->body : "", r->length, endpoint, info ? info->connect_fd : -1, reply);
}

static void route(server *s, struct MHD_Connection *connection, const char *url, const char *method,
                  const request *r, server_reply *reply)
{
    bool get = strcmp(method, "GET") == 0, post = strcmp(method, "POST") == 0;
    bool guarded = strncmp(url, "/v1/", 4) == 0 || strncmp(url, "/api/", 5) == 0 || strcmp(url, "/tokenize") == 0 ||
                   strcmp(url, "/detokenize") == 0;
    if (foreign_origin(connection)) {
        server_error_reply(reply, 403, "invalid_request_error", NULL, "forbidden_origin",
                           "requests from another site's page are refused (Origin does not match Host)");
        return;
    }
    if (guarded && !key_accepted(s, connection, url)) {
        server_error_reply(reply, 401, "invalid_request_error", NULL, "invalid_api_key",
                           "this server needs an API key: %sAuthorization: Bearer KEY",
                           anthropic_path(url) ? "x-api-key: KEY or " : "");
        return;
    }
    if (r->too_large) {
        server_error_reply(reply, 413, "invalid_request_error", NULL, "request_too_large",
                           "the request body exceeds %zu bytes", s->config->max_body);
        return;
    }
    if (strcmp(url, "/") == 0 && get) {
        reply->status = 200;
        reply->body = strdup(server_page);
        reply->length = reply->body ? strlen(reply->body) : 0;
        reply->content_type = "text/html; charset=utf-8";
        if (!reply->body)
            server_error_reply(reply, 500, "server_error", NULL, NULL, "out of memory");
    } else if (strcmp(url, "/api/events") == 0 && get) {
        server_events_reply(s, reply);
    } else if (strcmp(url, "/metrics") == 0 && get) {
        metrics_reply(s, reply);
    } else if (strcmp(url, "/health") == 0 && get) {
        server_json_reply(reply, 200, cJSON_CreateRaw("{\"status\":\"ok\"}"));
    } else if (strcmp(url, "/v1/models") == 0 && get) {
        models_reply(s, reply);
    } else if (strcmp(url, "/api/info") == 0 && get) {
        info_reply(s, reply);
    } else if (strcmp(url, "/api/params") == 0 && get) {
        params_reply(reply);
    } else if (strcmp(url, "/api/cancel") == 0 && post) {
        cancel_reply(s, reply);
    } else if ((strcmp(url, "/tokenize") == 0 || strcmp(url, "/detokenize") == 0) && post) {
        if (json_body(connection, reply))
            server_tokens_reply(s, strcmp(url, "/tokenize") == 0, r->body ? r->body : "", r->length, reply);
    } else if (strcmp(url, "/v1/chat/completions") == 0 && post) {
        completion_route(s, connection, r, SERVER_CHAT_COMPLETIONS, reply);
    } else if (strcmp(url, "/v1/completions") == 0 && post) {
        completion_route(s, connection, r, SERVER_COMPLETIONS, reply);
    } else if (strcmp(url, "/api/chat") == 0 && post) {
        completion_route(s, connection, r, SERVER_OLLAMA_CHAT, reply);
    } else if (strcmp(url, "/api/generate") == 0 && post) {
        completion_route(s, connection, r, SERVER_OLLAMA_GENERATE, reply);
    } else if (strcmp(url, "/v1/messages") == 0 && post) {
        completion_route(s, connection, r, SERVER_ANTHROPIC_MESSAGES, reply);
    } else if (strcmp(url, "/v1/messages/count_tokens") == 0 && post) {
        completion_route(s, connection, r, SERVER_ANTHROPIC_COUNT, reply);
    } else if ((strcmp(url, "/api/tags") == 0 || strcmp(url, "/api/ps") == 0) && get) {
        server_ollama_models(s, strcmp(url, "/api/ps") == 0, reply);
    } else if (strcmp(url, "/api/show") == 0 && post) {
        if (json_body(connection, reply))
            server_ollama_show(s, r->body ? r->body : "", r->length, reply);
    } else if (strcmp(url, "/api/version") == 0 && get) {
        server_ollama_version(reply);
    } else {
        for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
            if (strcmp(url, routes[i].path) == 0) {
                server_error_reply(reply, 405, "invalid_request_error", NULL, "method_not_allowed",
                                   "%s answers %s, not %.32s", url, routes[i].method, method);
                reply->allow = routes[i].method;
                return;
            }
        }
        server_error_reply(reply, 404, "invalid_request_error", NULL, "not_found", "no %.32s %.200s here", method,
                           url);
    }
}

/* Every answer, and Ollama's paths' errors made Ollama's {"error": "..."},
 * Anthropic's Anthropic's (the refusals are written once, in OpenAI's
 * shape). */
static void answer(server *s, struct MHD_Connection *connection, const char *url, const char *method,
                   const request *r, server_reply *reply)
{
    route(s, connection, url, method, r, reply);
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
        if (routes[i].ollama && strcmp(url, routes[i].path) == 0)
            server_ollama_error(reply);
    if (anthropic_path(url))
        server_anthropic_error(reply);
}

/* The connection's record (NULL when it could not be made). */
static server_client *client_of(struct MHD_Connection *connection)
{
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info ? info->socket_context : NULL;
}

/* A request has all arrived (receiving false), or the connection waits
 * for the next one from now (true). */
static void client_receiving(server *s, server_client *client, bool receiving)
{
    if (!client)
        return;
    pthread_mutex_lock(&s->clients_lock);
    client->receiving = receiving;
    clock_gettime(CLOCK_MONOTONIC, &client->since);
    pthread_mutex_unlock(&s->clients_lock);
}

/* Collects the body (past the limit only counted, to answer 413 once it is
 * all read), then answers. */
static enum MHD_Result on_request(void *user, struct MHD_Connection *connection, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **state)
{
    (void)version;
    server *s = user;
    request *r = *state;
    if (!r) {
        r = calloc(1, sizeof *r);
        if (!r)
            return MHD_NO;
        *state = r;
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        size_t size = *upload_data_size;
        *upload_data_size = 0;
        if (r->too_large || r->length + size > s->config->max_body) {
            r->too_large = true;
            free(r->body);
            r->body = NULL;
            r->length = r->capacity = 0;
            return MHD_YES;
        }
        if (r->length + size + 1 > r->capacity) {
            size_t capacity = (r->length + size + 1) * 2;
            char *grown = realloc(r->body, capacity);
            if (!grown)
                return MHD_NO;
            r->body = grown;
            r->capacity = capacity;
        }
        memcpy(r->body + r->length, upload_data, size);
        r->length += size;
        r->body[r->length] = '\0';
        return MHD_YES;
    }
    /* all arrived: the deadline stops (the answer, a generation or a wait
     * in line, may take longer than --timeout) */
    client_receiving(s, client_of(connection), false);
    server_reply reply = {0};
    answer(s, connection, url, method, r, &reply);
    r->status = reply.status;
    fprintf(stderr, "bmoe-server: %s %s %u\n", method, url, reply.status);
    struct MHD_Response *response =
        reply.stream ? reply.stream : MHD_create_response_from_buffer(reply.length, reply.body, MHD_RESPMEM_MUST_FREE);
    if (!response) {
        free(reply.body);
        return MHD_NO;
    }
    if (reply.stream) {
        MHD_add_response_header(response, "Content-Type",
                                reply.content_type ? reply.content_type : "text/event-stream");
        MHD_add_response_header(response, "Cache-Control", "no-cache");
    } else {
        MHD_add_response_header(response, "Content-Type",
                                reply.content_type ? reply.content_type : "application/json");
    }
    if (reply.retry_after)
        MHD_add_response_header(response, "Retry-After", reply.retry_after);
    if (reply.allow)
        MHD_add_response_header(response, "Allow", reply.allow);
    enum MHD_Result result = MHD_queue_response(connection, reply.status, response);
    MHD_destroy_response(response);
    return result;
}

static void on_completed(void *user, struct MHD_Connection *connection, void **state,
                         enum MHD_RequestTerminationCode code)
{
    (void)code;
    client_receiving(user, client_of(connection), true);
    request *r = *state;
    if (!r)
        return;
    free(r->body);
    free(r);
    *state = NULL;
}

/* Keeps the list of open connections (a connection whose record cannot
 * be allocated goes untimed but still served). */
static void on_connection(void *user, struct MHD_Connection *connection, void **context,
                          enum MHD_ConnectionNotificationCode code)
{
    server *s = user;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
        server_client *client = info ? calloc(1, sizeof *client) : NULL;
        *context = client;
        if (!client)
            return;
        client->fd = info->connect_fd;
        client->receiving = true;
        clock_gettime(CLOCK_MONOTONIC, &client->since);
        pthread_mutex_lock(&s->clients_lock);
        client->next = s->clients;
        if (s->clients)
            s->clients->prev = client;
        s->clients = client;
        pthread_mutex_unlock(&s->clients_lock);
        return;
    }
    server_client *client = *context;
    if (!client)
        return;
    /* the daemon closes the socket after this: the record goes first, so
     * the watch never shuts down a number the system has given again */
    pthread_mutex_lock(&s->clients_lock);
    if (client->prev)
        client->prev->next = client->next;
    else
        s->clients = client->next;
    if (client->next)
        client->next->prev = client->prev;
    pthread_mutex_unlock(&s->clients_lock);
    free(client);
    *context = NULL;
}

/* Closes the connections whose request has taken more than --timeout to
 * arrive (the daemon's own timeout only counts silence, which a client
 * sending a byte a second never is): their socket is shut down, which the
 * daemon's thread sees as the client leaving. */
static void cut_slow_clients(server *s)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    pthread_mutex_lock(&s->clients_lock);
    for (server_client *c = s->clients; c; c = c->next) {
        double waited = (double)(now.tv_sec - c->since.tv_sec) + (now.tv_nsec - c->since.tv_nsec) * 1e-9;
        if (!c->receiving || c->cut || waited < s->config->timeout)
            continue;
        fprintf(stderr, "bmoe-server: a connection sent no whole request in %d s: closed\n", s->config->timeout);
        shutdown(c->fd, SHUT_RDWR);
        c->cut = true;
    }
    pthread_mutex_unlock(&s->clients_lock);
}

int server_http_run(server *s)
{
    const server_config *c = s->config;
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)c->port)};
    if (inet_pton(AF_INET, c->host, &address.sin_addr) != 1) {
        fprintf(stderr, "bmoe-server: --host %s is not an IPv4 address\n", c->host);
        return 1;
    }
    if (strcmp(c->host, "127.0.0.1") != 0 && !c->api_key)
        fprintf(stderr, "bmoe-server: warning: listening on %s without --api-key: anyone who reaches it can use "
                        "the model\n",
                c->host);
    /* the signals are waited for here; every thread the daemon starts
     * inherits the mask, so none of them takes one */
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals, NULL);
    signal(SIGPIPE, SIG_IGN);
    pthread_mutex_init(&s->clients_lock, NULL);
    atomic_init(&s->client_fd, -1);
    struct MHD_Daemon *daemon = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ERROR_LOG, 0, NULL, NULL,
        on_request, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&address, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)c->timeout, MHD_OPTION_CONNECTION_LIMIT, (unsigned)SERVER_MAX_CONNECTIONS,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, SERVER_CONNECTION_MEMORY, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_END);
    if (!daemon) {
        fprintf(stderr, "bmoe-server: cannot listen on %s:%d\n", c->host, c->port);
        pthread_mutex_destroy(&s->clients_lock);
        return 1;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    fprintf(stderr, "bmoe-server: listening on http://%s:%u\n", c->host, info ? (unsigned)info->port : 0u);
    int received;
    const struct timespec tick = {0, SERVER_WATCH_MS * 1000000L};
    while ((received = sigtimedwait(&signals, NULL, &tick)) < 0)
        cut_slow_clients(s);
    fprintf(stderr, "bmoe-server: %s: shutting down\n", received == SIGINT ? "SIGINT" : "SIGTERM");
    /* a running generation stops at its next token so the daemon's threads can end */
    pthread_mutex_lock(&s->lock);
    atomic_store(&s->stopping, true);
    atomic_store(&s->cancel, true);
    pthread_cond_broadcast(&s->events_changed); /* the listeners end */
    pthread_mutex_unlock(&s->lock);
    MHD_stop_daemon(daemon);
    pthread_mutex_destroy(&s->clients_lock);
    return 0;
}
