/* libFuzzer target for the session's request reader: the input is a request
 * stream, split into lines by the session's line splitter (a small line
 * limit, fed in pieces whose sizes come from the input) and each line parsed
 * as a request. Splitting in pieces must give the same lines as splitting
 * whole; a line must be refused with one non-empty line of message, or
 * accepted with fields that keep the parser's promises (a known command,
 * strings of their stated length without NUL, choices within the limit). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "session_line.h"
#include "session_request.h"

#define FUZZ_MAX_LINE 4096

typedef struct collected {
    uint64_t hash;     /* of every line and overlong mark, in order */
    size_t lines;
} collected;

static void mix(collected *c, const void *bytes, size_t length)
{
    const unsigned char *p = bytes;
    for (size_t i = 0; i < length; i++)
        c->hash = (c->hash ^ p[i]) * 1099511628211ull;
    c->hash = (c->hash ^ 0xff) * 1099511628211ull;
}

static void check_text(const session_text *text)
{
    if (!text->data)
        return;
    if (strlen(text->data) != text->length)
        abort();
}

static bool on_line(void *user, const char *line, size_t length, bool overlong)
{
    collected *c = user;
    c->lines++;
    if (overlong) {
        if (line || length <= FUZZ_MAX_LINE)
            abort();
        mix(c, "overlong", 8);
        return true;
    }
    if (length > FUZZ_MAX_LINE)
        abort();
    mix(c, line, length);
    session_request request;
    int64_t id = 0;
    char message[512];
    if (session_request_parse(line, length, &request, &id, message, sizeof message) != 0) {
        if (message[0] == '\0' || strchr(message, '\n'))
            abort();
        return true;
    }
    if (request.command > SESSION_CLOSE || request.n_choices < 0 || request.n_choices > SESSION_MAX_CHOICES)
        abort();
    if (request.command == SESSION_GENERATE && !request.prompt.data)
        abort();
    if (request.has_n_predict && (request.n_predict == 0 || request.n_predict < -1))
        abort();
    check_text(&request.prompt);
    check_text(&request.prefix);
    check_text(&request.suffix);
    for (int32_t i = 0; i < request.n_choices; i++)
        check_text(&request.choices[i]);
    session_request_free(&request);
    return true;
}

static collected split(const uint8_t *data, size_t size, bool pieces)
{
    collected c = {14695981039346656037ull, 0};
    session_line_reader reader;
    session_line_init(&reader, FUZZ_MAX_LINE);
    size_t at = 0, step = 1;
    while (at < size) {
        size_t n = pieces ? step : size - at;
        if (n > size - at)
            n = size - at;
        session_line_feed(&reader, (const char *)data + at, n, on_line, &c);
        at += n;
        step = step * 7 % 61 + 1;
    }
    session_line_finish(&reader, on_line, &c);
    session_line_free(&reader);
    return c;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    collected whole = split(data, size, false);
    collected pieces = split(data, size, true);
    if (whole.hash != pieces.hash || whole.lines != pieces.lines)
        abort();
    return 0;
}
