/* --conversation (-cnv): a chat on the terminal, as llama.cpp's
 * conversation mode and `ollama run` give one. The loop here is only the
 * terminal's side: it speaks the session protocol (src/session) to a
 * session run in a thread of this process, through two pipes. Each line
 * typed is a generate request that continues the conversation, so the KV
 * cache keeps it and only the new turn is prefilled; the answer's
 * BMOE_PROGRESS deltas are printed as they come, the reasoning dimmed on a
 * terminal. Ctrl-C stops an answer (a cancel request: the turn is rolled
 * back); at the prompt it says how to leave, and a second one leaves.
 * /bye, /exit or the end of input end the chat; /clear starts a new
 * conversation; /set think and /set nothink (as `ollama run` spells them)
 * turn reasoning on or off. A line ending in '\' continues on the next. */
#define _GNU_SOURCE /* pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "session.h"

#define DIM "\x1b[2m"
#define PLAIN "\x1b[0m"

/* Complete lines out of a descriptor's bytes, taken one at a time. */
typedef struct line_source {
    int fd;
    char *data;
    size_t start, end, capacity;
    bool closed; /* end of input (or a read error) */
} line_source;

/* The next complete line (its '\n' replaced by a NUL; a trailing '\r'
 * dropped), or at the end of input the unterminated rest; NULL when no
 * line is complete yet. Valid until the next call. */
static char *line_next(line_source *source)
{
    if (!source->data)
        return NULL; /* nothing read yet */
    char *begin = source->data + source->start;
    char *newline = memchr(begin, '\n', source->end - source->start);
    if (!newline && !(source->closed && source->end > source->start))
        return NULL;
    char *stop = newline ? newline : source->data + source->end;
    source->start = newline ? (size_t)(newline - source->data) + 1 : source->end;
    *stop = '\0';
    if (stop > begin && stop[-1] == '\r')
        stop[-1] = '\0';
    return begin;
}

/* Reads what the descriptor has (one read, blocking only when it has
 * nothing). 0, or -1 out of memory. */
static int line_fill(line_source *source)
{
    if (source->start > 0) {
        memmove(source->data, source->data + source->start, source->end - source->start);
        source->end -= source->start;
        source->start = 0;
    }
    if (source->capacity - source->end < 4096) {
        size_t grown = source->capacity ? source->capacity * 2 : 16384;
        char *data = realloc(source->data, grown + 1);
        if (!data)
            return -1;
        source->data = data;
        source->capacity = grown;
    }
    ssize_t n = read(source->fd, source->data + source->end, source->capacity - source->end);
    if (n < 0 && errno == EINTR)
        return 0;
    if (n <= 0)
        source->closed = true;
    else
        source->end += (size_t)n;
    return 0;
}

typedef struct conversation {
    const cli_options *options;
    session_config config;
    int stop;                /* the stop signals' pipe, for the session */
    int interrupt;           /* Ctrl-C's pipe */
    int requests[2];         /* the loop writes [1], the session reads [0] */
    line_source answers;     /* the session's lines */
    line_source typed;       /* the user's */
    FILE *answers_out;       /* the session writes the answers' pipe through it */
    int session_status, output_error;
    bool dim;                /* stdout is a terminal: reasoning dimmed */
    bool prompt;             /* stdin is a terminal: a "> " before each line */
    int64_t next_id;
    bool fresh;              /* the next turn starts a conversation */
    int think;               /* /set think: 1, /set nothink: 0, -1: the session's default (--no-think) */
} conversation;

static void *conversation_session(void *user)
{
    conversation *c = user;
    c->session_status = session_run(&c->config, c->requests[0], c->stop, c->answers_out, &c->output_error);
    fclose(c->answers_out); /* the loop reads the end of the answers */
    return NULL;
}

/* Writes one request line. 0, or -1 when the session is gone. */
static int send_request(conversation *c, cJSON *request)
{
    char *text = request ? cJSON_PrintUnformatted(request) : NULL;
    cJSON_Delete(request);
    if (!text) {
        cli_fail("--conversation: out of memory");
        return -1;
    }
    size_t length = strlen(text);
    text[length] = '\n';
    size_t written = 0;
    while (written <= length) {
        ssize_t n = write(c->requests[1], text + written, length + 1 - written);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        written += (size_t)n;
    }
    cJSON_free(text);
    return written == length + 1 ? 0 : -1;
}

static void drain(int fd)
{
    char bytes[64];
    while (read(fd, bytes, sizeof bytes) > 0)
        continue;
}

/* What the session's line says: its kind and its JSON. */
static cJSON *answer_json(const char *line, const char *kind)
{
    size_t n = strlen(kind);
    return strncmp(line, kind, n) == 0 && line[n] == ' ' ? cJSON_Parse(line + n + 1) : NULL;
}

static const char *text_of(const cJSON *object, const char *key, size_t *length)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, key);
    *length = cJSON_IsString(item) ? strlen(item->valuestring) : 0;
    return *length ? item->valuestring : "";
}

static double number_of(const cJSON *object, const char *key)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, key);
    return cJSON_IsNumber(item) ? item->valuedouble : 0.0;
}

/* What one answer has printed, to print only the new part of a snapshot
 * (a delta with reset replaces everything delivered before). */
typedef struct shown {
    size_t reasoning, text;
    bool in_reasoning;
} shown;

static void show(conversation *c, shown *s, const cJSON *progress)
{
    size_t reasoning_length, text_length;
    const char *reasoning = text_of(progress, "delta_reasoning", &reasoning_length);
    const char *text = text_of(progress, "delta_text", &text_length);
    if (cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(progress, "reset"))) {
        size_t skip = reasoning_length < s->reasoning ? reasoning_length : s->reasoning;
        reasoning += skip;
        reasoning_length -= skip;
        skip = text_length < s->text ? text_length : s->text;
        text += skip;
        text_length -= skip;
    }
    if (reasoning_length > 0) {
        fputs(c->dim && !s->in_reasoning ? DIM : "", stdout);
        s->in_reasoning = true;
        fwrite(reasoning, 1, reasoning_length, stdout);
        s->reasoning += reasoning_length;
    }
    if (text_length > 0) {
        if (s->in_reasoning)
            fputs(c->dim ? PLAIN "\n\n" : "\n\n", stdout);
        s->in_reasoning = false;
        fwrite(text, 1, text_length, stdout);
        s->text += text_length;
    }
    fflush(stdout);
}

/* Reads the session's lines up to the end of the current request's answer
 * (or up to BMOE_READY), printing the answer; Ctrl-C meanwhile cancels it.
 * 0 when the session goes on, -1 when it ended or failed. */
static int follow_answer(conversation *c)
{
    shown s = {0};
    bool cancel_sent = false;
    for (;;) {
        char *line;
        while ((line = line_next(&c->answers)) != NULL) {
            cJSON *json;
            if ((json = answer_json(line, "BMOE_PROGRESS")) != NULL) {
                show(c, &s, json);
            } else if ((json = answer_json(line, "BMOE_DONE")) != NULL) {
                fputs(s.in_reasoning && c->dim ? PLAIN "\n" : "\n", stdout);
                fflush(stdout);
                bool cancelled = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(json, "cancelled"));
                fprintf(stderr, "bmoe-cli: %s%.0f tokens, %.2f tok/s; prompt %.0f tokens in %.2f s\n",
                        cancelled ? "stopped: " : "", number_of(json, "tokens"), number_of(json, "tok_s"),
                        number_of(json, "n_prompt"), number_of(json, "prefill_s"));
                cJSON_Delete(json);
                return 0;
            } else if ((json = answer_json(line, "BMOE_READY")) != NULL) {
                cJSON_Delete(json);
                return 0;
            } else if ((json = answer_json(line, "BMOE_ERROR")) != NULL) {
                size_t length;
                bool fatal = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(json, "fatal"));
                fprintf(stderr, "bmoe-cli: %s\n", text_of(json, "msg", &length));
                cJSON_Delete(json);
                return fatal ? -1 : 0;
            }
            cJSON_Delete(json);
        }
        if (c->answers.closed)
            return -1;
        struct pollfd waits[2] = {{c->answers.fd, POLLIN, 0}, {c->interrupt, POLLIN, 0}};
        if (poll(waits, 2, -1) < 0 && errno != EINTR)
            return -1;
        if (c->interrupt >= 0 && (waits[1].revents & POLLIN)) {
            drain(c->interrupt);
            if (!cancel_sent) {
                cJSON *cancel = cJSON_CreateObject();
                cJSON_AddStringToObject(cancel, "cmd", "cancel");
                cancel_sent = send_request(c, cancel) == 0;
            }
        }
        if ((waits[0].revents & (POLLIN | POLLHUP)) && line_fill(&c->answers) != 0)
            return -1;
    }
}

/* "> " before a line typed at a terminal. */
static void print_prompt(const conversation *c, const char *prompt)
{
    if (!c->prompt)
        return;
    fputs(prompt, stdout);
    fflush(stdout);
}

/* Appends bytes (and a newline when newline) to *message; false out of memory (then *message is freed). */
static bool append(char **message, size_t *length, const char *bytes, size_t n, bool newline)
{
    char *grown = realloc(*message, *length + n + 2);
    if (!grown) {
        free(*message);
        *message = NULL;
        return false;
    }
    memcpy(grown + *length, bytes, n);
    *length += n;
    if (newline)
        grown[(*length)++] = '\n';
    grown[*length] = '\0';
    *message = grown;
    return true;
}

/* The next message typed (malloc'ed; NULL at the end of input or after a
 * second Ctrl-C): one line, lines ending in '\' joined, or Ollama's block
 * between a line starting with three quotes and one ending with them. */
static char *read_message(conversation *c)
{
    char *message = NULL;
    size_t length = 0;
    bool warned = false, block = false;
    print_prompt(c, "> ");
    for (;;) {
        char *line;
        while ((line = line_next(&c->typed)) != NULL) {
            size_t n = strlen(line);
            if (!message && !block && strncmp(line, "\"\"\"", 3) == 0) {
                block = true;
                line += 3;
                n -= 3;
                if (n == 0) { /* the quotes alone open the block */
                    print_prompt(c, ". ");
                    continue;
                }
            }
            bool ends_block = block && n >= 3 && memcmp(line + n - 3, "\"\"\"", 3) == 0;
            bool more = block ? !ends_block : n > 0 && line[n - 1] == '\\';
            size_t kept = ends_block ? n - 3 : n - (!block && more);
            if (!append(&message, &length, line, kept, more))
                return NULL;
            if (ends_block && kept == 0 && length > 0) /* the quotes alone close it: no newline before them */
                message[--length] = '\0';
            if (!more)
                return message;
            print_prompt(c, ". ");
        }
        if (c->typed.closed) {
            free(message);
            return NULL;
        }
        struct pollfd waits[3] = {{c->typed.fd, POLLIN, 0}, {c->interrupt, POLLIN, 0}, {c->answers.fd, POLLIN, 0}};
        if (poll(waits, 3, -1) < 0 && errno != EINTR)
            break;
        if (c->interrupt >= 0 && (waits[1].revents & POLLIN)) {
            drain(c->interrupt);
            if (warned)
                break;
            warned = true;
            fputs("\n(Ctrl-C again, /bye or Ctrl-D to leave)\n", stderr);
            print_prompt(c, "> ");
        }
        if ((waits[0].revents & (POLLIN | POLLHUP)) && line_fill(&c->typed) != 0)
            break;
        if (waits[2].revents & (POLLIN | POLLHUP)) /* the session ended (a stop signal): nothing more is read */
            break;
    }
    free(message);
    return NULL;
}

/* The generate request of one message: it continues the conversation, or
 * starts one (with the system prompt first) after a /clear. */
static cJSON *turn_request(conversation *c, const char *message)
{
    cJSON *request = cJSON_CreateObject();
    cJSON_AddStringToObject(request, "cmd", "generate");
    cJSON_AddNumberToObject(request, "id", (double)++c->next_id);
    cJSON_AddBoolToObject(request, "clear_kv", c->fresh);
    if (c->think >= 0)
        cJSON_AddBoolToObject(request, "think", c->think == 1);
    cJSON *messages = cJSON_AddArrayToObject(request, "messages");
    if (c->fresh && c->options->system_prompt) {
        cJSON *system = cJSON_CreateObject();
        cJSON_AddStringToObject(system, "role", "system");
        cJSON_AddStringToObject(system, "content", c->options->system_prompt);
        cJSON_AddItemToArray(messages, system);
    }
    cJSON *user = cJSON_CreateObject();
    cJSON_AddStringToObject(user, "role", "user");
    cJSON_AddStringToObject(user, "content", message);
    cJSON_AddItemToArray(messages, user);
    c->fresh = false;
    return request;
}

/* The chat itself, once the session is ready. */
static void converse(conversation *c)
{
    if (c->prompt)
        fputs("bmoe-cli: chatting; Ctrl-C stops an answer, /clear forgets the conversation, /bye or Ctrl-D "
              "leaves\n",
              stderr);
    char *message;
    while ((message = read_message(c)) != NULL) {
        const char *command = message + strspn(message, " \t");
        if (strcmp(command, "/bye") == 0 || strcmp(command, "/exit") == 0) {
            free(message);
            break;
        }
        int status = 0;
        if (strcmp(command, "/clear") == 0) {
            c->fresh = true;
            fputs("bmoe-cli: a new conversation\n", stderr);
        } else if (strcmp(command, "/set think") == 0 || strcmp(command, "/set nothink") == 0) {
            c->think = strcmp(command, "/set think") == 0;
            fprintf(stderr, "bmoe-cli: reasoning %s from the next turn\n", c->think ? "on" : "off");
        } else if (command[0] == '/' && strchr("h?", command[1]) && (!command[2] || !strcmp(command, "/help"))) {
            fputs("/clear: forget the conversation; /set think, /set nothink: reasoning on or off; /bye or /exit: "
                  "leave; a line ending in \\ goes on, and a block between lines of three quotes\n",
                  stderr);
        } else if (command[0]) {
            status = send_request(c, turn_request(c, message));
            if (status == 0)
                status = follow_answer(c);
        }
        free(message);
        if (status != 0)
            break;
    }
}

int cli_run_conversation(const cli_options *options, const session_config *config)
{
    conversation c = {.options = options, .config = *config, .interrupt = -1, .requests = {-1, -1}, .fresh = true,
                      .think = -1};
    c.dim = isatty(STDOUT_FILENO);
    c.prompt = isatty(STDIN_FILENO);
    c.typed.fd = STDIN_FILENO;
    int answers[2] = {-1, -1};
    if (pipe2(c.requests, O_CLOEXEC) != 0 || pipe2(answers, O_CLOEXEC) != 0 ||
        !(c.answers_out = fdopen(answers[1], "w"))) {
        cli_fail("--conversation: no pipe for the session: %s", strerror(errno));
        for (int i = 0; i < 2; i++) {
            if (c.requests[i] >= 0)
                close(c.requests[i]);
            if (answers[i] >= 0)
                close(answers[i]);
        }
        return 1;
    }
    c.answers.fd = answers[0];
    c.stop = cli_stop_descriptor();
    c.interrupt = cli_interrupt_descriptor();
    pthread_t thread;
    if (pthread_create(&thread, NULL, conversation_session, &c) != 0) {
        fclose(c.answers_out);
        close(answers[0]);
        close(c.requests[0]);
        close(c.requests[1]);
        return cli_fail("--conversation: no thread for the session");
    }
    if (follow_answer(&c) == 0)
        converse(&c);
    cJSON *close_request = cJSON_CreateObject();
    cJSON_AddStringToObject(close_request, "cmd", "close");
    send_request(&c, close_request);
    close(c.requests[1]);
    while (!c.answers.closed && line_fill(&c.answers) == 0)
        c.answers.start = c.answers.end; /* what is said after the close is not shown */
    pthread_join(thread, NULL);
    close(c.requests[0]);
    close(answers[0]);
    free(c.answers.data);
    free(c.typed.data);
    if (c.output_error)
        cli_fail("--conversation: the session's pipe: %s", strerror(c.output_error));
    return c.session_status;
}
