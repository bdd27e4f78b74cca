/* The generation's text: a UTF-8 sequence split across token pieces comes
 * out whole once complete; bytes that can never complete a sequence become
 * U+FFFD (one per maximal ill-formed subpart, as the Unicode standard
 * recommends), so every delta is valid UTF-8; stop strings end the text
 * before them, and text that may begin one is held until it cannot. */
#include "engine/text_stream.h"
#include "test.h"

#define FFFD "\xef\xbf\xbd"

typedef struct collected {
    char text[512];
    size_t length;
} collected;

/* Pushes one piece and appends what became final to c; returns push's result. */
static int push(text_stream *stream, collected *c, const char *bytes, size_t length, bool check_stops)
{
    bmoe_error err = {0};
    int found = text_stream_push(stream, bytes, length, check_stops, &err);
    size_t n;
    const char *delta = text_stream_take(stream, &n);
    if (c->length + n < sizeof c->text) {
        memcpy(c->text + c->length, delta, n);
        c->length += n;
    }
    return found;
}

static void finish(text_stream *stream, collected *c)
{
    bmoe_error err = {0};
    CHECK(text_stream_finish(stream, &err) == 0);
    size_t n;
    const char *delta = text_stream_take(stream, &n);
    memcpy(c->text + c->length, delta, n);
    c->length += n;
}

static bool equals(const collected *c, const char *expected)
{
    return c->length == strlen(expected) && memcmp(c->text, expected, c->length) == 0;
}

static void test_utf8(void)
{
    text_stream s;
    collected c = {{0}, 0};
    bmoe_error err = {0};

    /* "é" = C3 A9 split between two pieces */
    CHECK(text_stream_init(&s, NULL, 0, &err) == 0);
    push(&s, &c, "h\xc3", 2, true);
    CHECK(equals(&c, "h"));
    push(&s, &c, "\xa9llo", 4, true);
    CHECK(equals(&c, "h\xc3\xa9llo"));
    finish(&s, &c);
    CHECK(equals(&c, "h\xc3\xa9llo"));
    text_stream_free(&s);

    /* a four-byte emoji (U+1F600) one byte per piece */
    c.length = 0;
    CHECK(text_stream_init(&s, NULL, 0, &err) == 0);
    const char emoji[5] = "\xf0\x9f\x98\x80";
    for (int i = 0; i < 3; i++) {
        push(&s, &c, &emoji[i], 1, true);
        CHECK(c.length == 0);
    }
    push(&s, &c, &emoji[3], 1, true);
    CHECK(equals(&c, emoji));
    text_stream_free(&s);

    /* a lead byte followed by ASCII can never complete: U+FFFD, then the ASCII */
    c.length = 0;
    CHECK(text_stream_init(&s, NULL, 0, &err) == 0);
    push(&s, &c, "\xc3", 1, true);
    CHECK(c.length == 0);
    push(&s, &c, "A", 1, true);
    CHECK(equals(&c, FFFD "A"));
    text_stream_free(&s);

    /* stray continuation, C0/C1, F5..FF, a surrogate, an overlong and a code
     * point past U+10FFFF: each maximal subpart is one U+FFFD */
    c.length = 0;
    CHECK(text_stream_init(&s, NULL, 0, &err) == 0);
    push(&s, &c, "\x80", 1, true);
    CHECK(equals(&c, FFFD));
    push(&s, &c, "\xff" "a" "\xc0\xaf" "b", 5, true);
    CHECK(equals(&c, FFFD FFFD "a" FFFD FFFD "b"));
    c.length = 0;
    push(&s, &c, "\xed\xa0\x80" "c" "\xe0\x80\x80" "d" "\xf4\x90\x80\x80", 12, true);
    CHECK(equals(&c, FFFD FFFD FFFD "c" FFFD FFFD FFFD "d" FFFD FFFD FFFD FFFD));
    /* a truncated three-byte sequence before ASCII is one subpart */
    c.length = 0;
    push(&s, &c, "\xe2\x82" "x", 3, true);
    CHECK(equals(&c, FFFD "x"));
    text_stream_free(&s);

    /* an incomplete sequence at the very end becomes U+FFFD at finish */
    c.length = 0;
    CHECK(text_stream_init(&s, NULL, 0, &err) == 0);
    push(&s, &c, "ok\xe2\x82", 4, true);
    CHECK(equals(&c, "ok"));
    finish(&s, &c);
    CHECK(equals(&c, "ok" FFFD));
    text_stream_free(&s);

    /* an incomplete tail followed by a piece that breaks it and carries more */
    c.length = 0;
    CHECK(text_stream_init(&s, NULL, 0, &err) == 0);
    push(&s, &c, "\xf0\x9f", 2, true);
    push(&s, &c, "z\xc3\xa9", 3, true);
    CHECK(equals(&c, FFFD "z\xc3\xa9"));
    /* an empty piece changes nothing */
    push(&s, &c, "", 0, true);
    CHECK(equals(&c, FFFD "z\xc3\xa9"));
    text_stream_free(&s);
}

static void test_stop_strings(void)
{
    text_stream s;
    collected c = {{0}, 0};
    bmoe_error err = {0};
    const char *stops[] = {"</end>", "STOP", ""};

    /* a stop string split over pieces: what may begin it is held */
    CHECK(text_stream_init(&s, stops, 3, &err) == 0);
    CHECK(push(&s, &c, "Hello </", 8, true) == 0);
    CHECK(equals(&c, "Hello "));
    CHECK(push(&s, &c, "en", 2, true) == 0);
    CHECK(equals(&c, "Hello "));
    CHECK(push(&s, &c, "d> after", 8, true) == 1);
    CHECK(equals(&c, "Hello "));
    /* after the stop nothing more comes out */
    CHECK(push(&s, &c, "more", 4, true) == 1);
    finish(&s, &c);
    CHECK(equals(&c, "Hello "));
    text_stream_free(&s);

    /* a false start is released once it cannot be a stop string */
    c.length = 0;
    CHECK(text_stream_init(&s, stops, 3, &err) == 0);
    CHECK(push(&s, &c, "a</e", 4, true) == 0);
    CHECK(equals(&c, "a"));
    CHECK(push(&s, &c, "x", 1, true) == 0);
    CHECK(equals(&c, "a</ex"));
    CHECK(push(&s, &c, "ST", 2, true) == 0);
    CHECK(equals(&c, "a</ex"));
    finish(&s, &c); /* held text at the end is text */
    CHECK(equals(&c, "a</exST"));
    text_stream_free(&s);

    /* the earliest of two stop strings wins, inside one piece */
    c.length = 0;
    CHECK(text_stream_init(&s, stops, 3, &err) == 0);
    CHECK(push(&s, &c, "xSTOPy</end>", 12, true) == 1);
    CHECK(equals(&c, "x"));
    text_stream_free(&s);

    /* echoed text is never matched, even when it contains a stop string */
    c.length = 0;
    CHECK(text_stream_init(&s, stops, 3, &err) == 0);
    CHECK(push(&s, &c, "prompt STOP ", 12, false) == 0);
    CHECK(equals(&c, "prompt STOP "));
    CHECK(push(&s, &c, "answer", 6, true) == 0);
    CHECK(equals(&c, "prompt STOP answer"));
    text_stream_free(&s);

    /* a stop string with a multi-byte character, split inside the character */
    const char *accent[] = {"caf\xc3\xa9"};
    c.length = 0;
    CHECK(text_stream_init(&s, accent, 1, &err) == 0);
    CHECK(push(&s, &c, "un caf\xc3", 7, true) == 0);
    CHECK(equals(&c, "un "));
    CHECK(push(&s, &c, "\xa9!", 2, true) == 1);
    CHECK(equals(&c, "un "));
    text_stream_free(&s);
}

int main(void)
{
    test_utf8();
    test_stop_strings();
    return test_finish();
}
