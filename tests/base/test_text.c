/* text_escape: file bytes shown in messages stay one line of printable
 * ASCII that says exactly which bytes the file holds, and a long text is
 * cut between two escapes with "..." at the end; text_escape_message does
 * the same to a whole message but leaves backslashes and quotes, so a
 * message escaped twice reads as once. The text buffer appends, consumes
 * and clears; text_partial_suffix finds the longest beginning of a marker
 * a text ends with. */
#include <stdbool.h>
#include <string.h>

#include "base/text.h"
#include "base/text_buffer.h"
#include "test.h"

static bool escapes_to(const void *bytes, size_t length, size_t size, const char *expected)
{
    char out[128];
    memset(out, '#', sizeof out);
    const char *result = text_escape(bytes, length, out, size);
    bool ok = result == out && strcmp(out, expected) == 0;
    if (!ok)
        fprintf(stderr, "escaped to '%s', expected '%s'\n", out, expected);
    return ok;
}

static void test_text_buffer(void)
{
    text_buffer buffer = {0};
    CHECK(text_buffer_append(&buffer, "", 0) && buffer.length == 0 && strcmp(buffer.data, "") == 0);
    for (int i = 0; i < 100; i++) /* past the first capacities */
        CHECK(text_buffer_append(&buffer, "abc", 3));
    CHECK(buffer.length == 300 && strlen(buffer.data) == 300 && memcmp(buffer.data + 297, "abc", 3) == 0);
    text_buffer_consume(&buffer, 298);
    CHECK(buffer.length == 2 && strcmp(buffer.data, "bc") == 0);
    text_buffer_consume(&buffer, 5);
    CHECK(buffer.length == 0 && strcmp(buffer.data, "") == 0);
    CHECK(text_buffer_append(&buffer, "x", 1) && strcmp(buffer.data, "x") == 0);
    text_buffer_clear(&buffer);
    CHECK(buffer.length == 0 && buffer.data[0] == '\0');
    text_buffer_free(&buffer);
    CHECK(buffer.data == NULL && buffer.length == 0 && buffer.capacity == 0);

    /* "<tool_call>": the text may end with "<", "<to", ... but the whole
     * marker is not a partial one */
    CHECK(text_partial_suffix("abc<to", 6, "<tool_call>", 11) == 3);
    CHECK(text_partial_suffix("abc<", 4, "<tool_call>", 11) == 1);
    CHECK(text_partial_suffix("abc<tool_call", 13, "<tool_call>", 11) == 10);
    CHECK(text_partial_suffix("abc<tool_call>", 14, "<tool_call>", 11) == 0);
    CHECK(text_partial_suffix("<x", 2, "<tool_call>", 11) == 0);
    /* the longest of several: "aa" ends "aaab" twice over */
    CHECK(text_partial_suffix("xaa", 3, "aaab", 4) == 2);
    CHECK(text_partial_suffix("", 0, "ab", 2) == 0 && text_partial_suffix("a", 1, "", 0) == 0);
}

int main(void)
{
    test_text_buffer();
    CHECK(escapes_to("blk.0.attn_q.weight", 19, 64, "blk.0.attn_q.weight"));
    CHECK(escapes_to("a\nb\tc\rd", 7, 64, "a\\nb\\tc\\rd"));
    CHECK(escapes_to("it's a \\ path", 13, 64, "it\\'s a \\\\ path"));
    CHECK(escapes_to("\x00\x01\x1b\x7f", 4, 64, "\\x00\\x01\\x1b\\x7f"));
    CHECK(escapes_to("w\xc3\xb6rld", 6, 64, "w\\xc3\\xb6rld")); /* UTF-8: byte by byte */
    CHECK(escapes_to("", 0, 64, ""));
    /* exactly fits: 5 characters and the NUL */
    CHECK(escapes_to("abcde", 5, 6, "abcde"));
    /* one more: cut, with room for "..." */
    CHECK(escapes_to("abcdef", 6, 6, "ab..."));
    /* an escape is never cut in half */
    CHECK(escapes_to("a\x01\x02", 3, 8, "a..."));
    CHECK(escapes_to("a\x01\x02", 3, 9, "a\\x01..."));
    CHECK(escapes_to("a\x01\x02", 3, 10, "a\\x01\\x02"));
    /* buffers too small for "..." still end in a NUL */
    CHECK(escapes_to("abcdef", 6, 4, ""));
    CHECK(escapes_to("abcdef", 6, 1, ""));
    char out[16];
    CHECK(strcmp(text_escape_string("x\ny", out, sizeof out), "x\\ny") == 0);

    char message[64], twice[64];
    text_escape_message("'a\x1b[31m\\x07\a'\n", message, sizeof message);
    CHECK_MSG(strcmp(message, "'a\\x1b[31m\\x07\\x07'\\n") == 0, "%s", message);
    CHECK(strcmp(text_escape_message(message, twice, sizeof twice), message) == 0);
    CHECK(strcmp(text_escape_message("caf\xc3\xa9 \x7f", message, sizeof message), "caf\\xc3\\xa9 \\x7f") == 0);
    CHECK(strcmp(text_escape_message("\x1b\x1b\x1b", message, 9), "\\x1b...") == 0);
    return test_finish();
}
