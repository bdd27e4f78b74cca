/* The CLI's streaming output layer: a UTF-8 sequence split across token
 * pieces is printed whole once complete, and bytes that can never complete
 * a sequence are printed as they are, never dropped. */
#include "cli/cli.h"
#include "test.h"

typedef struct capture {
    char *data;
    size_t size;
    FILE *stream;
    cli_text_output output;
} capture;

static void capture_open(capture *c)
{
    c->data = NULL;
    c->size = 0;
    c->stream = open_memstream(&c->data, &c->size);
    cli_text_output_init(&c->output, c->stream);
}

/* What has reached the stream so far equals expected (length given). */
static int capture_equals(capture *c, const char *expected, size_t length)
{
    fflush(c->stream);
    return c->size == length && memcmp(c->data, expected, length) == 0;
}

static void capture_close(capture *c)
{
    fclose(c->stream);
    free(c->data);
}

int main(void)
{
    capture c;

    /* "é" = C3 A9 split between two pieces */
    capture_open(&c);
    cli_text_output_write(&c.output, "h\xc3", 2);
    CHECK(capture_equals(&c, "h", 1));
    cli_text_output_write(&c.output, "\xa9llo", 4);
    CHECK(capture_equals(&c, "h\xc3\xa9llo", 6));
    cli_text_output_finish(&c.output);
    CHECK(capture_equals(&c, "h\xc3\xa9llo", 6));
    capture_close(&c);

    /* a four-byte emoji (U+1F600 = F0 9F 98 80) arriving one byte per piece */
    capture_open(&c);
    const char emoji[4] = {'\xf0', '\x9f', '\x98', '\x80'};
    for (int i = 0; i < 3; i++) {
        cli_text_output_write(&c.output, &emoji[i], 1);
        CHECK(capture_equals(&c, "", 0));
    }
    cli_text_output_write(&c.output, &emoji[3], 1);
    CHECK(capture_equals(&c, emoji, 4));
    capture_close(&c);

    /* a three-byte sequence split 1 + 2 inside longer pieces */
    capture_open(&c);
    cli_text_output_write(&c.output, "price \xe2", 7);
    CHECK(capture_equals(&c, "price ", 6));
    cli_text_output_write(&c.output, "\x82\xac 5", 4);
    CHECK(capture_equals(&c, "price \xe2\x82\xac 5", 11));
    capture_close(&c);

    /* a lead byte followed by ASCII can never complete: both are printed */
    capture_open(&c);
    cli_text_output_write(&c.output, "\xc3", 1);
    cli_text_output_write(&c.output, "A", 1);
    CHECK(capture_equals(&c, "\xc3" "A", 2));
    capture_close(&c);

    /* a stray continuation byte or an invalid byte is printed at once */
    capture_open(&c);
    cli_text_output_write(&c.output, "\x80", 1);
    CHECK(capture_equals(&c, "\x80", 1));
    cli_text_output_write(&c.output, "\xff", 1);
    CHECK(capture_equals(&c, "\x80\xff", 2));
    capture_close(&c);

    /* an incomplete sequence at the very end is flushed by finish */
    capture_open(&c);
    cli_text_output_write(&c.output, "ok\xe2\x82", 4);
    CHECK(capture_equals(&c, "ok", 2));
    cli_text_output_finish(&c.output);
    CHECK(capture_equals(&c, "ok\xe2\x82", 4));
    capture_close(&c);

    /* an empty piece changes nothing */
    capture_open(&c);
    cli_text_output_write(&c.output, "", 0);
    CHECK(capture_equals(&c, "", 0));
    capture_close(&c);
    return test_finish();
}
