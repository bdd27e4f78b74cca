/* The JSON string escaper: RFC 8259's rules (quote, backslash and the
 * control characters U+0000..U+001F escaped; everything else may be
 * literal), valid UTF-8 copied untouched, and any byte string giving valid
 * JSON whose text is valid UTF-8. Expected strings are worked out by hand
 * from those rules; cJSON is the independent reader. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>

#include "test.h"
#include "tm_json.h"

/* tm_json_string of length bytes equals want (the literal with quotes). */
static void check_escape(const char *what, const char *input, size_t length, const char *want)
{
    tm_buffer out;
    tm_buffer_init(&out);
    tm_json_string(&out, input, length);
    CHECK_MSG(!out.failed && strcmp(tm_buffer_text(&out), want) == 0, "%s: got [%s], want [%s]", what,
              tm_buffer_text(&out), want);
    tm_buffer_free(&out);
}

/* Strict UTF-8 (RFC 3629), written here independently of tm_utf8_sequence. */
static bool valid_utf8(const unsigned char *s, size_t n)
{
    static const uint32_t minimum[4] = {0, 0x80, 0x800, 0x10000};
    size_t i = 0;
    while (i < n) {
        uint32_t c = s[i], code;
        size_t extra;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            extra = 1;
            code = c & 0x1F;
        } else if ((c & 0xF0) == 0xE0) {
            extra = 2;
            code = c & 0x0F;
        } else if ((c & 0xF8) == 0xF0) {
            extra = 3;
            code = c & 0x07;
        } else {
            return false;
        }
        if (n - i <= extra)
            return false;
        for (size_t k = 1; k <= extra; k++) {
            if ((s[i + k] & 0xC0) != 0x80)
                return false;
            code = code << 6 | (s[i + k] & 0x3F);
        }
        if (code < minimum[extra] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF))
            return false;
        i += extra + 1;
    }
    return true;
}

static void test_rules(void)
{
    check_escape("plain", "hello world", 11, "\"hello world\"");
    check_escape("empty", "", 0, "\"\"");
    check_escape("quote and backslash", "a\"b\\c", 5, "\"a\\\"b\\\\c\"");
    check_escape("short escapes", "\n\t\r\b\f", 5, "\"\\n\\t\\r\\b\\f\"");
    check_escape("other controls", "\x01\x1f\x1b", 3, "\"\\u0001\\u001f\\u001b\"");
    check_escape("NUL inside", "a\0b", 3, "\"a\\u0000b\"");
    check_escape("DEL and slash are literal", "\x7f/", 2, "\"\x7f/\"");
    check_escape("two-byte", "caf\xc3\xa9", 5, "\"caf\xc3\xa9\"");
    check_escape("three-byte", "\xe2\x82\xac 5", 5, "\"\xe2\x82\xac 5\"");
    check_escape("four-byte", "\xf0\x9f\x98\x80", 4, "\"\xf0\x9f\x98\x80\"");
    check_escape("U+2028 is valid JSON", "\xe2\x80\xa8", 3, "\"\xe2\x80\xa8\"");
    check_escape("highest code point", "\xf4\x8f\xbf\xbf", 4, "\"\xf4\x8f\xbf\xbf\"");
    /* invalid sequences: each byte that starts no valid sequence becomes U+FFFD */
    check_escape("lone continuation", "a\x80z", 3, "\"a\xef\xbf\xbdz\"");
    check_escape("overlong NUL", "\xc0\x80", 2, "\"\xef\xbf\xbd\xef\xbf\xbd\"");
    check_escape("surrogate", "\xed\xa0\x80", 3, "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");
    check_escape("above U+10FFFF", "\xf4\x90\x80\x80", 4,
                 "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");
    check_escape("truncated at the end", "x\xe2\x82", 3, "\"x\xef\xbf\xbd\xef\xbf\xbd\"");
    check_escape("0xff", "\xff", 1, "\"\xef\xbf\xbd\"");
    check_escape("invalid then a quote", "\xe2\"", 2, "\"\xef\xbf\xbd\\\"\"");
}

/* Every string of random bytes is valid JSON with valid UTF-8 and no raw
 * control byte, and a valid-UTF-8 input comes back from cJSON unchanged. */
static void test_random(void)
{
    uint64_t state = 0x9E3779B97F4A7C15ull;
    int bad_json = 0, bad_utf8 = 0, raw_control = 0, not_round_trip = 0;
    for (int round = 0; round < 4000; round++) {
        unsigned char input[48];
        size_t length = (size_t)(round % 48);
        for (size_t i = 0; i < length; i++) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            /* half the rounds mostly ASCII with some multi-byte text, half raw bytes */
            unsigned char byte = (unsigned char)(state >> 24);
            input[i] = round % 2 ? byte : (unsigned char)(byte % 0x60 + 0x20);
        }
        if (round % 4 == 0 && length >= 3) {
            input[0] = 0xe2;
            input[1] = 0x82;
            input[2] = 0xac;
        }
        tm_buffer out;
        tm_buffer_init(&out);
        tm_json_string(&out, (const char *)input, length);
        const unsigned char *text = (const unsigned char *)tm_buffer_text(&out);
        for (size_t i = 0; i < out.length; i++)
            raw_control += text[i] < 0x20;
        bad_utf8 += !valid_utf8(text, out.length);
        cJSON *value = cJSON_ParseWithLength((const char *)text, out.length);
        if (!value || !cJSON_IsString(value)) {
            bad_json++;
        } else if (valid_utf8(input, length) && memchr(input, 0, length) == NULL) {
            const char *decoded = cJSON_GetStringValue(value);
            not_round_trip += strlen(decoded) != length || memcmp(decoded, input, length) != 0;
        }
        cJSON_Delete(value);
        tm_buffer_free(&out);
    }
    CHECK_MSG(bad_json == 0, "%d outputs cJSON cannot read as a string", bad_json);
    CHECK_MSG(bad_utf8 == 0, "%d outputs are not valid UTF-8", bad_utf8);
    CHECK_MSG(raw_control == 0, "%d raw control bytes in the outputs", raw_control);
    CHECK_MSG(not_round_trip == 0, "%d valid inputs did not come back unchanged", not_round_trip);
}

static void check_number(double value, int decimals, double fallback, const char *want)
{
    tm_buffer out;
    tm_buffer_init(&out);
    tm_json_number(&out, value, decimals, fallback);
    CHECK_MSG(strcmp(tm_buffer_text(&out), want) == 0, "number %g: got [%s], want [%s]", value,
              tm_buffer_text(&out), want);
    tm_buffer_free(&out);
}

static void test_numbers(void)
{
    check_number(1.23456, 3, 0, "1.235");
    check_number(-1.0, 2, 0, "-1.00");
    check_number(NAN, 3, -1, "-1.000");
    check_number(INFINITY, 3, 0, "0.000");
    check_number(42.0, 0, 0, "42");
}

static void test_buffer(void)
{
    tm_buffer b;
    tm_buffer_init(&b);
    CHECK(strcmp(tm_buffer_text(&b), "") == 0);
    char big[1000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    tm_buffer_printf(&b, "%s|%d", big, 7); /* longer than the formatter's stack buffer */
    CHECK(b.length == 1001 && strcmp(b.data + 999, "|7") == 0);
    tm_buffer_clear(&b);
    CHECK(b.length == 0 && strcmp(tm_buffer_text(&b), "") == 0);
    tm_buffer_free(&b);
}

int main(void)
{
    test_rules();
    test_random();
    test_numbers();
    test_buffer();
    return test_finish();
}
