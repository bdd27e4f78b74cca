/* The GBNF matcher: each syntax element accepted and refused, whole and byte
 * by byte (both ways must agree); UTF-8 split between feeds, classes with
 * multi-byte ranges, negation and '.'; every repetition form with its
 * bounds; groups, alternatives and recursion (balanced parentheses, a JSON
 * grammar); complete and can_continue at the ends; llama.cpp's line rules;
 * the refusals with their place named; the stack bound; and the vocabulary
 * mask against feeding each token to a copy of the matcher at every byte of
 * several documents, in free text too (loops over classes and groups,
 * bounded ones near their end, several classes at once, literals inside a
 * loop's class, a vocabulary replaced under the matcher). The expected
 * outcomes are worked out by hand from what each grammar means. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "structured/gbnf.h"
#include "test.h"

static gbnf_grammar *grammar_of(const char *text)
{
    bmoe_error err = {0};
    gbnf_grammar *grammar = gbnf_grammar_create(text, strlen(text), &err);
    CHECK_MSG(grammar != NULL, "grammar %s: %s", text, err.message);
    return grammar;
}

/* Whether text, fed whole and then again byte by byte, is taken and complete (both ways must agree). */
static bool accepts_bytes(const char *grammar_text, const char *text, size_t length)
{
    gbnf_grammar *grammar = grammar_of(grammar_text);
    if (!grammar)
        return false;
    gbnf_matcher *whole = gbnf_matcher_create(grammar, NULL);
    gbnf_matcher *bytewise = gbnf_matcher_create(grammar, NULL);
    bool fed_whole = gbnf_matcher_feed(whole, text, length) && gbnf_matcher_complete(whole);
    bool fed_bytes = true;
    for (size_t i = 0; i < length && fed_bytes; i++)
        fed_bytes = gbnf_matcher_feed(bytewise, text + i, 1);
    fed_bytes = fed_bytes && gbnf_matcher_complete(bytewise);
    CHECK_MSG(fed_whole == fed_bytes, "%s on %s: whole %d, byte by byte %d", text, grammar_text, fed_whole,
              fed_bytes);
    gbnf_matcher_free(whole);
    gbnf_matcher_free(bytewise);
    gbnf_grammar_free(grammar);
    return fed_whole;
}

static bool accepts(const char *grammar_text, const char *text)
{
    return accepts_bytes(grammar_text, text, strlen(text));
}

/* Whether text is taken as the start of a match (complete or not). */
static bool takes(const char *grammar_text, const char *text)
{
    gbnf_grammar *grammar = grammar_of(grammar_text);
    if (!grammar)
        return false;
    gbnf_matcher *matcher = gbnf_matcher_create(grammar, NULL);
    bool fed = gbnf_matcher_feed(matcher, text, strlen(text));
    gbnf_matcher_free(matcher);
    gbnf_grammar_free(grammar);
    return fed;
}

#define ACCEPT(grammar, text) CHECK_MSG(accepts(grammar, text), "%s should accept %s", grammar, text)
#define REFUSE(grammar, text) CHECK_MSG(!accepts(grammar, text), "%s should refuse %s", grammar, text)
#define TAKES(grammar, text) CHECK_MSG(takes(grammar, text), "%s should take %s", grammar, text)
#define STOPS(grammar, text) CHECK_MSG(!takes(grammar, text), "%s should not take %s", grammar, text)

static void check_literals(void)
{
    const char *abc = "root ::= \"abc\"";
    ACCEPT(abc, "abc");
    REFUSE(abc, "ab"); /* taken, not complete */
    TAKES(abc, "ab");
    STOPS(abc, "abd");
    STOPS(abc, "abcd");
    REFUSE(abc, "");
    /* Escapes name code points: \x41 is 'A', \u00e9 is é (two bytes), \U0001F600 an emoji (four). */
    const char *escaped = "root ::= \"a\\n\\t\\r\\\\\\\"\\/\\[\\]\\-\\x41\\u00e9\\U0001F600\"";
    ACCEPT(escaped, "a\n\t\r\\\"/[]-A\xc3\xa9\xf0\x9f\x98\x80");
    STOPS(escaped, "a\\n");
    ACCEPT("root ::= \"\\xe9\"", "\xc3\xa9");
    STOPS("root ::= \"\\xe9\"", "\xe9"); /* not the byte 0xE9 */
    ACCEPT("root ::= \"h\xc3\xa9llo \xe2\x82\xac\"", "h\xc3\xa9llo \xe2\x82\xac");
    ACCEPT("root ::= \"\" \"a\" \"\"", "a");
    ACCEPT("root ::= \"\"", "");
    STOPS("root ::= \"\"", "a");
    ACCEPT("root ::= \"a\"\"b\" \"c\"", "abc"); /* adjacent items need no space */
    ACCEPT("root ::= \"line\nbreak\"", "line\nbreak"); /* a raw line break in a literal is itself */
    CHECK(accepts_bytes("root ::= \"a\\x00b\"", "a\0b", 3));
}

static void check_classes(void)
{
    const char *word = "root ::= [a-z0-9_]";
    ACCEPT(word, "q");
    ACCEPT(word, "0");
    ACCEPT(word, "_");
    STOPS(word, "A");
    STOPS(word, "-");
    STOPS(word, "qq");
    const char *not_quote = "root ::= [^\"\\\\]";
    ACCEPT(not_quote, "x");
    ACCEPT(not_quote, "\xc3\xa9");
    ACCEPT(not_quote, "\n");
    STOPS(not_quote, "\"");
    STOPS(not_quote, "\\");
    const char *any = "root ::= .";
    ACCEPT(any, "a");
    ACCEPT(any, "\xc3\xa9");
    ACCEPT(any, "\xe2\x82\xac");
    ACCEPT(any, "\xf0\x9f\x98\x80");
    ACCEPT(any, "\xf4\x8f\xbf\xbf"); /* U+10FFFF */
    REFUSE(any, "");
    STOPS(any, "ab");
    /* Ranges of multi-byte code points, raw and escaped. */
    const char *greek = "root ::= [\xce\xb1-\xcf\x89]+"; /* α-ω: U+03B1..U+03C9 */
    ACCEPT(greek, "\xce\xb2\xce\xb3");
    STOPS(greek, "\xce\xa9"); /* Ω, U+03A9, below α */
    STOPS(greek, "a");
    const char *cjk = "root ::= [\\u4e00-\\u9fff]";
    ACCEPT(cjk, "\xe4\xb8\x80");      /* U+4E00 */
    ACCEPT(cjk, "\xe9\xbf\xbf");      /* U+9FFF */
    TAKES(cjk, "\xe4");               /* E4 starts U+4000..U+4FFF: some of it is in */
    TAKES(cjk, "\xe4\xb8");
    STOPS(cjk, "\xe3");               /* U+3000..U+3FFF: none is */
    STOPS(cjk, "\xe4\xb7");           /* U+4DC0..U+4DFF: below U+4E00 */
    STOPS(cjk, "\xea");               /* U+A000..: above */
    STOPS(cjk, "\xe4\xb8\x80\xe4");   /* one character only */
    const char *astral = "root ::= [\\U0001F600-\\U0001F64F]";
    ACCEPT(astral, "\xf0\x9f\x98\x80");
    ACCEPT(astral, "\xf0\x9f\x99\x8f");
    STOPS(astral, "\xf0\x9f\x9a");
    STOPS(astral, "\xf0\x9e");
    /* '-' first, last, or after a range is itself; escaped brackets and dash. */
    ACCEPT("root ::= [-a]", "-");
    ACCEPT("root ::= [a-]", "-");
    ACCEPT("root ::= [a-c-e]", "-");
    STOPS("root ::= [a-c-e]", "d");
    ACCEPT("root ::= [a-c-e]", "e");
    ACCEPT("root ::= [\\]\\[\\-]+", "][-");
    const char *controls = "root ::= [\\x00-\\x1F]";
    ACCEPT(controls, "\x1f");
    ACCEPT(controls, "\t");
    STOPS(controls, " ");
    /* A negated class holds every other code point, multi-byte ones included. */
    const char *not_ascii = "root ::= [^\\x00-\\x7F]";
    ACCEPT(not_ascii, "\xc2\x80");
    ACCEPT(not_ascii, "\xf0\x9f\x98\x80");
    STOPS(not_ascii, "a");
    /* Invalid UTF-8 is never taken, not even by '.' */
    const char *anything = "root ::= .*";
    const char *invalid[] = {"\x80", "\xbf", "\xc0\x80", "\xc1\xbf", "\xe0\x80", "\xe0\x9f", "\xed\xa0",
                             "\xed\xbf\xbf", "\xf0\x80", "\xf0\x8f", "\xf4\x90", "\xf5", "\xf8", "\xff",
                             "\xc3\x41", "\xe2\x82\x41", "a\xc3\xc3"};
    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++)
        STOPS(anything, invalid[i]);
    ACCEPT(anything, "\xed\x9f\xbf\xee\x80\x80"); /* U+D7FF, U+E000: either side of the surrogates */
    ACCEPT(anything, "");

    /* A character split between feeds: not complete inside it, complete after. */
    gbnf_grammar *grammar = grammar_of("root ::= [\\u20ac] \"!\"");
    gbnf_matcher *matcher = gbnf_matcher_create(grammar, NULL);
    CHECK(gbnf_matcher_feed(matcher, "\xe2", 1));
    CHECK(!gbnf_matcher_complete(matcher));
    CHECK(gbnf_matcher_can_continue(matcher));
    CHECK(!gbnf_matcher_feed(matcher, "!", 1)); /* the character must finish first */
    CHECK(!gbnf_matcher_feed(matcher, "\x83", 1)); /* E2 83 is U+20C0..: not the euro sign */
    CHECK(gbnf_matcher_feed(matcher, "\x82", 1));
    CHECK(gbnf_matcher_feed(matcher, "\xac!", 2));
    CHECK(gbnf_matcher_complete(matcher));
    CHECK(!gbnf_matcher_can_continue(matcher));
    gbnf_matcher_free(matcher);
    gbnf_grammar_free(grammar);
}

static void check_repetitions(void)
{
    const char *star = "root ::= \"a\"*";
    ACCEPT(star, "");
    ACCEPT(star, "aaaa");
    STOPS(star, "ab");
    const char *plus = "root ::= \"ab\"+";
    ACCEPT(plus, "ab");
    ACCEPT(plus, "ababab");
    REFUSE(plus, "");
    REFUSE(plus, "aba");
    STOPS(plus, "abb");
    const char *optional = "root ::= \"x\" \"a\"? \"y\"";
    ACCEPT(optional, "xy");
    ACCEPT(optional, "xay");
    STOPS(optional, "xaa");
    const char *exactly = "root ::= [0-9]{3}";
    ACCEPT(exactly, "123");
    REFUSE(exactly, "12");
    STOPS(exactly, "1234");
    const char *at_least = "root ::= [0-9]{2,}";
    REFUSE(at_least, "1");
    ACCEPT(at_least, "12");
    ACCEPT(at_least, "1234567890123");
    const char *between = "root ::= [0-9]{1,3}";
    REFUSE(between, "");
    ACCEPT(between, "1");
    ACCEPT(between, "123");
    STOPS(between, "1234");
    const char *at_most = "root ::= \"ab\"{0,2}";
    ACCEPT(at_most, "");
    ACCEPT(at_most, "abab");
    STOPS(at_most, "ababa");
    ACCEPT("root ::= \"a\"{ 2 , 3 }", "aa"); /* spaces inside the braces */
    ACCEPT("root ::= \"a\" \"b\"{0} \"c\"", "ac");
    STOPS("root ::= \"a\" \"b\"{0} \"c\"", "ab");
    const char *group = "root ::= (\"ab\" | \"c\"){2,3}";
    ACCEPT(group, "abc");
    ACCEPT(group, "cab");
    ACCEPT(group, "ccc");
    ACCEPT(group, "ababab");
    REFUSE(group, "ab");
    STOPS(group, "cccc");
    /* Nested repetitions: pairs of letters, any number of pairs. */
    const char *pairs = "root ::= (([a-b]){2})*";
    ACCEPT(pairs, "");
    ACCEPT(pairs, "abba");
    REFUSE(pairs, "aba");
    STOPS(pairs, "abc");
    /* Repetitions of what may be empty: no loop, and the bounds still count the letters that come. */
    const char *empty_body = "root ::= (\"a\"?)* \"b\"";
    ACCEPT(empty_body, "b");
    ACCEPT(empty_body, "aaab");
    const char *bounded_empty = "root ::= (\"a\"?){3,5} \"b\"";
    ACCEPT(bounded_empty, "b");
    ACCEPT(bounded_empty, "aaaaab");
    STOPS(bounded_empty, "aaaaaa");
    ACCEPT("root ::= (\"\")* \"x\"", "x");
    ACCEPT("root ::= ((\"a\"*)*)* \"x\"", "aaax");
    /* Stacked repetitions apply to what is before them. */
    const char *stacked = "root ::= \"a\"{2}*";
    ACCEPT(stacked, "");
    ACCEPT(stacked, "aaaa");
    REFUSE(stacked, "aaa");
    /* Bounds up to 1000, counted. */
    char text[1002];
    memset(text, 'a', 1001);
    text[1001] = '\0';
    const char *thousand = "root ::= [a]{1000}";
    STOPS(thousand, text);
    text[1000] = '\0';
    ACCEPT(thousand, text);
    text[999] = '\0';
    REFUSE(thousand, text);
    REFUSE("root ::= \"ab\"{1000}", "abab");
    TAKES("root ::= \"ab\"{1000}", "abab");
}

static void check_groups_and_recursion(void)
{
    const char *nested = "root ::= (\"a\" (\"b\" | \"c\"))+ | \"d\"";
    ACCEPT(nested, "ab");
    ACCEPT(nested, "abac");
    ACCEPT(nested, "d");
    REFUSE(nested, "a");
    STOPS(nested, "da");
    STOPS(nested, "ad");
    const char *empty_alternative = "root ::= \"x\" ( | \"y\") \"z\"";
    ACCEPT(empty_alternative, "xz");
    ACCEPT(empty_alternative, "xyz");
    STOPS(empty_alternative, "xyy");

    const char *balanced = "root ::= \"(\" root \")\" root | \"\"";
    ACCEPT(balanced, "");
    ACCEPT(balanced, "()");
    ACCEPT(balanced, "(())()");
    ACCEPT(balanced, "((()())(()))");
    STOPS(balanced, ")");
    STOPS(balanced, "())");
    REFUSE(balanced, "(()");
    /* Nesting: each '(' holds a frame; past GBNF_DEPTH_MAX frames the next '(' is not offered. */
    char deep[400];
    memset(deep, '(', 120);
    memset(deep + 120, ')', 120);
    deep[240] = '\0';
    ACCEPT(balanced, deep);
    memset(deep, '(', 200);
    deep[200] = '\0';
    STOPS(balanced, deep);
    /* Right recursion does not grow the stack: the rule's end is its caller's end. */
    char long_tail[1200];
    memset(long_tail, 'a', 1000);
    strcpy(long_tail + 1000, "b");
    ACCEPT("root ::= \"a\" root | \"b\"", long_tail);
    char spaces[400];
    spaces[0] = 'x';
    memset(spaces + 1, ' ', 300);
    strcpy(spaces + 301, "y");
    const char *llama_ws = "root ::= \"x\" ws \"y\"\nws ::= ([ \\t\\n] ws)?";
    ACCEPT(llama_ws, spaces);
    ACCEPT(llama_ws, "xy");
    /* Many empty alternatives in a row: expanded once each, not once per path. */
    ACCEPT("root ::= e e e e e e e e e e e e e e e e e e e e e e e e e e e e e e \"!\"\n"
           "e ::= \"\" | \"\" | (\"\")?", "!");

    const char *json =
        "root   ::= ws value ws\n"
        "value  ::= object | array | string | number | \"true\" | \"false\" | \"null\"\n"
        "object ::= \"{\" ws ( member ( ws \",\" ws member )* ws )? \"}\"\n"
        "member ::= string ws \":\" ws value\n"
        "array  ::=\n"
        "  \"[\" ws (\n"
        "    value (ws \",\" ws value)* ws   # items\n"
        "  )? \"]\"\n"
        "string ::= \"\\\"\" char* \"\\\"\"\n"
        "char   ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})\n"
        "number ::= \"-\"? (\"0\" | [1-9] [0-9]*) (\".\" [0-9]+)? ([eE] [-+]? [0-9]+)?\n"
        "ws     ::= [ \\t\\n]*\n";
    ACCEPT(json, "{\"a\": [1, -2.5e3, true, null], \"b\\u00e9\": {\"c\": \"x\\\"y\"}}");
    ACCEPT(json, " [ ] ");
    ACCEPT(json, "\"str \xe2\x82\xac\"");
    ACCEPT(json, "-0.0E+1");
    ACCEPT(json, "{\n  \"k\" : [ {} , [] ]\n}");
    STOPS(json, "{\"a\" 1}");
    STOPS(json, "[1,]");
    STOPS(json, "01");
    STOPS(json, "\"\\x\"");
    STOPS(json, "\"a\nb\"");
    STOPS(json, "\"\\u12G4\"");
    REFUSE(json, "{\"a\":");
    REFUSE(json, "-");
}

static void check_ends(void)
{
    gbnf_grammar *grammar = grammar_of("root ::= \"a\" \"b\"?");
    gbnf_matcher *matcher = gbnf_matcher_create(grammar, NULL);
    CHECK(!gbnf_matcher_complete(matcher));
    CHECK(gbnf_matcher_can_continue(matcher));
    CHECK(!gbnf_matcher_feed(matcher, "ax", 2)); /* all or nothing: the 'a' is not kept */
    CHECK(!gbnf_matcher_complete(matcher));
    CHECK(gbnf_matcher_feed(matcher, "a", 1));
    CHECK(gbnf_matcher_complete(matcher));
    CHECK(gbnf_matcher_can_continue(matcher));
    gbnf_matcher *copy = gbnf_matcher_create(grammar, NULL);
    CHECK(gbnf_matcher_copy(copy, matcher));
    CHECK(gbnf_matcher_feed(matcher, "b", 1));
    CHECK(gbnf_matcher_complete(matcher));
    CHECK(!gbnf_matcher_can_continue(matcher));
    CHECK(!gbnf_matcher_feed(matcher, "b", 1));
    CHECK(gbnf_matcher_feed(copy, "b", 1)); /* the copy kept its own position */
    CHECK(gbnf_matcher_copy(copy, copy));
    gbnf_matcher_reset(matcher);
    CHECK(!gbnf_matcher_complete(matcher));
    CHECK(gbnf_matcher_feed(matcher, "ab", 2));
    CHECK(gbnf_matcher_feed(matcher, "", 0));

    gbnf_grammar *other = grammar_of("root ::= [a-z]*");
    gbnf_matcher *stranger = gbnf_matcher_create(other, NULL);
    CHECK(gbnf_matcher_complete(stranger)); /* the empty text matches */
    CHECK(gbnf_matcher_can_continue(stranger));
    CHECK(!gbnf_matcher_copy(stranger, matcher)); /* another grammar */
    CHECK(gbnf_matcher_feed(stranger, "zz", 2));
    bmoe_error err = {0};
    CHECK(gbnf_matcher_create(NULL, &err) == NULL && err.message[0] != '\0');
    gbnf_matcher_free(stranger);
    gbnf_grammar_free(other);
    gbnf_matcher_free(copy);
    gbnf_matcher_free(matcher);
    gbnf_grammar_free(grammar);
    gbnf_matcher_free(NULL);
    gbnf_grammar_free(NULL);
}

/* llama.cpp's line rules: a line break ends a rule except after "::=", after '|' and inside parentheses. */
static void check_layout(void)
{
    ACCEPT("root ::=\n  \"a\"", "a");
    const char *after_bar = "root ::= \"a\" |\n  \"b\"\n";
    ACCEPT(after_bar, "a");
    ACCEPT(after_bar, "b");
    const char *in_parentheses = "root ::= (\n  \"a\"\n  \"b\" # a comment inside\n\n)\n";
    ACCEPT(in_parentheses, "ab");
    const char *commented = "# grammar\n\nroot ::= x \"!\" # trailing\n# between\n\nx ::= \"y\"\n# end";
    ACCEPT(commented, "y!");
    const char *crlf = "root ::= x\r\nx ::= (\r\n \"a\" |\r\n \"b\")\r\n";
    ACCEPT(crlf, "a");
    ACCEPT(crlf, "b");
    ACCEPT("root ::= \"a\"\rother ::= \"b\"", "a"); /* a lone \r ends a rule too */
    ACCEPT("root::=\"a\"\t\"b\"", "ab");
    ACCEPT("root ::= Rule-2\nRule-2 ::= \"ok\"", "ok");
    ACCEPT("root ::= [\n]", "\n"); /* a raw line break in a class is itself */
}

static void check_refused(const char *text, size_t length, const char *expected)
{
    bmoe_error err = {0};
    gbnf_grammar *grammar = gbnf_grammar_create(text, length, &err);
    CHECK_MSG(grammar == NULL, "should refuse: %s", text);
    CHECK_MSG(strstr(err.message, expected) != NULL, "refusing %s: '%s' does not say '%s'", text, err.message,
              expected);
    CHECK(err.status == BMOE_ERR_INVALID_ARGUMENT);
    gbnf_grammar_free(grammar);
}

#define CHECK_REFUSED(text, expected) check_refused(text, strlen(text), expected)

static void check_refusals(void)
{
    CHECK_REFUSED("root ::= a b\na ::= \"x\"", "gbnf: line 1 col 12: undefined rule 'b'");
    CHECK_REFUSED("a ::= \"x\"", "gbnf: no rule 'root'");
    CHECK_REFUSED("", "no rule 'root'");
    CHECK_REFUSED("root ::= \"a\"\nroot ::= \"b\"",
                  "gbnf: line 2 col 1: rule 'root' is defined twice (first at line 1 col 1)");
    CHECK_REFUSED("root ::= root \"a\" | \"b\"", "gbnf: line 1 col 1: rule 'root' is left-recursive (root -> root)");
    CHECK_REFUSED("root ::= a\na ::= b \"x\"\nb ::= root | \"y\"",
                  "rule 'root' is left-recursive (root -> a -> b -> root)");
    CHECK_REFUSED("root ::= \"x\" a\na ::= e a \"z\" | \"y\"\ne ::= \"q\"?",
                  "gbnf: line 2 col 1: rule 'a' is left-recursive (a -> a)"); /* through an empty prefix */
    CHECK_REFUSED("root ::= (root \"x\")* \"y\"", "rule 'root' is left-recursive (root -> root)");
    CHECK_REFUSED("root ::= a\na ::= [x]* (\"\" b)\nb ::= a", "rule 'a' is left-recursive (a -> b -> a)");
    CHECK_REFUSED("root ::= \"\\q\"", "gbnf: line 1 col 11: unknown escape: '\\' then 'q'");
    CHECK_REFUSED("root ::= [\\e]", "unknown escape");
    CHECK_REFUSED("root ::= \"\\x4\"", "gbnf: line 1 col 11: \\x needs 2 hex digits");
    CHECK_REFUSED("root ::= \"\\u12\"", "\\u needs 4 hex digits");
    CHECK_REFUSED("root ::= [\\U0010FFF]", "\\U needs 8 hex digits");
    CHECK_REFUSED("root ::= \"\\U00110000\"", "is above U+10FFFF");
    CHECK_REFUSED("root ::= \"\\ud800\"", "U+D800 is a surrogate");
    CHECK_REFUSED("root ::= [\\udfff]", "U+DFFF is a surrogate");
    CHECK_REFUSED("root ::= [\\ud800-\\udfff]", "the character class matches no character");
    CHECK_REFUSED("root ::= [^\\x00-\\U0010FFFF]", "gbnf: line 1 col 10: the character class matches no character");
    CHECK_REFUSED("root ::= \"\\", "'\\' at the end of the text");
    CHECK_REFUSED("root ::= \"abc", "gbnf: line 1 col 10: unterminated string literal");
    CHECK_REFUSED("root ::= x\nx ::= [abc", "gbnf: line 2 col 7: unterminated character class");
    CHECK_REFUSED("root ::= [a-", "unterminated character class");
    CHECK_REFUSED("root ::= (\"a\" (\"b\")", "gbnf: line 1 col 10: unterminated group");
    CHECK_REFUSED("root ::= (\"a\" ]", "gbnf: line 1 col 15: expected ')' closing the '(' of line 1 col 10");
    CHECK_REFUSED("root ::= \"a\")", "gbnf: line 1 col 13: ')' without a '(' before it");
    CHECK_REFUSED("root ::= []", "an empty character class []");
    CHECK_REFUSED("root ::= [^]", "an empty character class [^]");
    CHECK_REFUSED("root ::= [z-a]", "the range U+007A-U+0061 is reversed");
    CHECK_REFUSED("root ::= <think> \"x\"", "gbnf: line 1 col 10: token references (<...>) are not supported");
    CHECK_REFUSED("root ::= !<[12]>", "token negation (!) is not supported");
    CHECK_REFUSED("root ::= *\"a\"", "gbnf: line 1 col 10: '*' with nothing before it to repeat");
    CHECK_REFUSED("root ::= \"a\" | ?\"b\"", "gbnf: line 1 col 16: '?' with nothing before it to repeat");
    CHECK_REFUSED("root ::= \"a\"{1001}", "a repetition bound above 1000");
    CHECK_REFUSED("root ::= \"a\"{2,99999999999999999999}", "a repetition bound above 1000");
    CHECK_REFUSED("root ::= \"a\"{3,2}", "the repetition {3,2} has its maximum below its minimum");
    CHECK_REFUSED("root ::= \"a\"{x}", "expected a number in the repetition, found 'x'");
    CHECK_REFUSED("root ::= \"a\"{2", "expected ',' or '}' in the repetition, found the end of the text");
    CHECK_REFUSED("root ::= \"a\"{2,3", "expected '}' in the repetition");
    CHECK_REFUSED("root = \"a\"", "gbnf: line 1 col 6: expected '::=' after the rule name 'root', found '='");
    CHECK_REFUSED("my_rule ::= \"a\"", "expected '::=' after the rule name 'my', found '_' (names are letters");
    CHECK_REFUSED("root ::= my_rule", "found '_' (names are letters, digits and '-')");
    CHECK_REFUSED("root ::= \"a\"\n  \"b\"", "gbnf: line 2 col 3: expected a rule name, found '\"'");
    CHECK_REFUSED("root ::= \"a\" }", "gbnf: line 1 col 14: expected the end of the rule (a line break), found '}'");
    CHECK_REFUSED("root ::= \"a\xff\"", "gbnf: line 1 col 12: invalid UTF-8 in the grammar");
    check_refused("root ::= \"a\0\"", 13, "gbnf: line 1 col 12: a NUL byte in the grammar");
    /* The column counts characters: the é is one. */
    CHECK_REFUSED("root ::= \"\xc3\xa9\" q", "gbnf: line 1 col 14: undefined rule 'q'");

    char *big = malloc(GBNF_TEXT_MAX + 2);
    memset(big, ' ', GBNF_TEXT_MAX + 1);
    check_refused(big, GBNF_TEXT_MAX + 1, "more than 1048576");
    /* Groups nested past 256. */
    char *nested = big;
    size_t at = (size_t)sprintf(nested, "root ::= ");
    for (int i = 0; i < 300; i++)
        nested[at++] = '(';
    nested[at++] = '"';
    nested[at++] = 'a';
    nested[at++] = '"';
    for (int i = 0; i < 300; i++)
        nested[at++] = ')';
    check_refused(nested, at, "groups nested more than 256 deep");
    /* A start that alone needs more than the stack bound: 300 alternatives, each a different first byte. */
    at = (size_t)sprintf(big, "root ::= \"x0\"");
    for (int i = 1; i < 300; i++)
        at += (size_t)sprintf(big + at, " | \"x%d\"", i);
    check_refused(big, at, "needs more than 256 parse stacks");
    free(big);
    bmoe_error err = {0};
    CHECK(gbnf_grammar_create(NULL, 3, &err) == NULL && err.message[0] != '\0');
}

/* A grammar that ambiguous holds at most GBNF_STACKS_MAX stacks: after n letters of
 * [a]{0,300} [a]{0,300} "b", the first loop at n, the second at every count 0..n, and the "b": n + 3. */
static void check_stack_bound(void)
{
    const char *ambiguous = "root ::= [a]{0,300} [a]{0,300} \"b\"";
    char text[300];
    memset(text, 'a', 253);
    strcpy(text + 253, "b");
    ACCEPT(ambiguous, text); /* 256 stacks: at the bound */
    gbnf_grammar *grammar = grammar_of(ambiguous);
    gbnf_matcher *matcher = gbnf_matcher_create(grammar, NULL);
    CHECK(gbnf_matcher_feed(matcher, text, 253));
    CHECK(!gbnf_matcher_feed(matcher, "a", 1)); /* 257: refused rather than overflowed */
    CHECK(gbnf_matcher_feed(matcher, "b", 1));
    CHECK(gbnf_matcher_complete(matcher));
    gbnf_matcher_free(matcher);
    gbnf_grammar_free(grammar);
}

/* root ::= "x" z, z ::= r0 | r1 | ..., each ri ::= c, c ::= "q": after "x" one stack, reached through 3 expansions
 * per ri. 2000 of them (6001 expansions) fit GBNF_EXPANSIONS_MAX; 5000 (15001) do not, and "x" is refused. */
static char *many_ways(int ways)
{
    char *text = malloc((size_t)ways * 24 + 64);
    size_t at = (size_t)sprintf(text, "root ::= \"x\" z\nc ::= \"q\"\nz ::= r0");
    for (int i = 1; i < ways; i++)
        at += (size_t)sprintf(text + at, " | r%d", i);
    for (int i = 0; i < ways; i++)
        at += (size_t)sprintf(text + at, "\nr%d ::= c", i);
    return text;
}

/* root ::= "x" z, z ::= a0 | a1 | ... (200), ai ::= bi "!", bi ::= ci "!", ... down `levels` rules to "q": after
 * "x", 200 stacks, each over levels - 1 frames of its own. 2 frames each (400) fit GBNF_STEP_FRAMES_MAX; 3 (600)
 * do not. */
static char *deep_ways(int levels)
{
    char *text = malloc(200 * 40 * (size_t)levels + 64);
    size_t at = (size_t)sprintf(text, "root ::= \"x\" z\nz ::= l0r0");
    for (int i = 1; i < 200; i++)
        at += (size_t)sprintf(text + at, " | l0r%d", i);
    for (int i = 0; i < 200; i++) {
        for (int level = 0; level + 1 < levels; level++)
            at += (size_t)sprintf(text + at, "\nl%dr%d ::= l%dr%d \"!\"", level, i, level + 1, i);
        at += (size_t)sprintf(text + at, "\nl%dr%d ::= \"q\"", levels - 1, i);
    }
    return text;
}

static void check_work_bounds(void)
{
    char *fits = many_ways(2000), *over = many_ways(5000);
    ACCEPT(fits, "xq");
    TAKES(over, ""); /* the grammar itself is fine */
    STOPS(over, "x");
    free(fits);
    free(over);
    char *shallow = deep_ways(3), *deep = deep_ways(4);
    ACCEPT(shallow, "xq!!");
    STOPS(deep, "x");
    free(shallow);
    free(deep);
}

/* ---- the vocabulary mask ---- */

static const char *const words[] = {
    "{", "}", "{\"", "\"}", "\":", "\": ", "\"", ",", ", \"", "\",", "\n", "\n  ", " ", "  ", "a", "ab", "abc",
    "aa", "aaaa", "b", "ba", "name", "\"name", "\":\"", "1", "12", "0", "-", ".", "5", "e", "e+", "E", "true",
    "tr", "ue", "null", "[", "]", "[1", "],", "\\", "\\n", "\\u00", "e9", "\\\"", "\"\\u", "\xc3", "\xa9",
    "\xc3\xa9", "\xe2\x82", "\xac", "\xe2\x82\xac", "\xe2\x82\xac\"", "\xf0\x9f", "\x98\x80", "\xf0\x9f\x98\x80",
    "\xe4\xb8", "\xe4\xb8\x80", "\xe9\xbf\xbf", "\xce\xb1", "\xce\xb2\xce\xb3", "\xed\x9f\xbf", "(", ")", "((",
    "))", "()", "(()", "())", "((((", "))))", "x", "xy", "xyz", "y", "z", "\t", "\r", "\x01", "\x7f", " }",
    "{\"a\":", "\"]", "\"\"", "-2", ".5e", "3,", "true,", "null]", "{}", "[]", "hello", " world", "\xc2\x80",
    "\xf4\x8f\xbf\xbf", "\xed\xa0\x80", "\xc0\x80", "\xe0\x80", "\xf5", "!", "ok", "#", "_", "q", "a b", "ab!",
};

/* A vocabulary of every single byte (invalid and partial UTF-8 included), then words, then a control token,
 * then, with duplicate, a second "ab" (a token with the same bytes as another): 256 + n_words + 1 (+ 1)
 * tokens, whose pieces and lengths (single: the bytes' storage, 256) the caller keeps to feed them. */
static json_vocab *byte_vocab(const char *const *words, int n_words, bool duplicate, const char **pieces,
                              size_t *lengths, char *single)
{
    for (int b = 0; b < 256; b++) {
        single[b] = (char)b;
        pieces[b] = &single[b];
        lengths[b] = 1;
    }
    for (int i = 0; i < n_words; i++) {
        pieces[256 + i] = words[i];
        lengths[256 + i] = strlen(words[i]);
    }
    pieces[256 + n_words] = "<|end|>"; /* a control token */
    lengths[256 + n_words] = 0;
    if (duplicate) {
        pieces[256 + n_words + 1] = "ab";
        lengths[256 + n_words + 1] = 2;
    }
    bmoe_error err = {0};
    json_vocab *vocab = json_vocab_create(pieces, lengths, 256 + n_words + 1 + duplicate, &err);
    CHECK_MSG(vocab != NULL, "%s", err.message);
    return vocab;
}

typedef struct document {
    const char *grammar;
    const char *text;
} document;

/* At every byte of each document, the mask equals feeding each token to a copy of the matcher. */
static void check_mask(void)
{
    enum { WORDS = sizeof words / sizeof words[0], TOKENS = 256 + WORDS + 2 };
    const char *pieces[TOKENS];
    size_t lengths[TOKENS];
    char single[256];
    json_vocab *vocab = byte_vocab(words, WORDS, true, pieces, lengths, single);
    if (!vocab)
        return;

    static const char json[] =
        "root   ::= ws value ws\n"
        "value  ::= object | array | string | number | \"true\" | \"false\" | \"null\"\n"
        "object ::= \"{\" ws ( member ( ws \",\" ws member )* ws )? \"}\"\n"
        "member ::= string ws \":\" ws value\n"
        "array  ::= \"[\" ws ( value (ws \",\" ws value)* ws )? \"]\"\n"
        "string ::= \"\\\"\" char* \"\\\"\"\n"
        "char   ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})\n"
        "number ::= \"-\"? (\"0\" | [1-9] [0-9]*) (\".\" [0-9]+)? ([eE] [-+]? [0-9]+)?\n"
        "ws     ::= [ \\t\\n]*\n";
    static const char ambiguous[] = "root ::= [a]{0,300} [a]{0,300} \"b\"";
    char many_a[300];
    memset(many_a, 'a', 253);
    strcpy(many_a + 253, "b");
    const document documents[] = {
        {json, "{\"name\": \"x\\n\\u00e9\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\", \"a\":[12,-1.5e+3,true,null,{}],"
               "\n  \"\":{\"a\":\"xy\"}}"},
        {json, " [ 1 , \"\\\"\" , [] ] "},
        {"root ::= [^\"]* \"\\\"\"", "hello \xe2\x82\xac world\xc3\xa9 \xf0\x9f\x98\x80\""},
        {"root ::= \"(\" root \")\" root | \"\"", "(()(()))((()))"},
        {"root ::= ([\\u4e00-\\u9fff] | [\xce\xb1-\xcf\x89])+ \"!\"", "\xe4\xb8\x80\xce\xb1\xe9\xbf\xbf\xce\xb3!"},
        {"root ::= (\"ab\" | \"a\" | \"b\"){2,5} [x-z]{1,3}", "abaabxy"},
        {"root ::= x (\",\" x)*\nx ::= \"null\" | \"true\" | [0-9]+", "12,true,0,null"},
        {"root ::= . . [^a-z]", "\xf4\x8f\xbf\xbf\x7f\xed\x9f\xbf"},
        {"root ::= (\"a\"?)* \"b\" ( \"!\" | )", "aaab!"},
        {"root ::= \"x\" ws \"y\"\nws ::= ([ \\t\\n] ws)?", "x \t\n  y"},
        {ambiguous, many_a},
    };
    uint8_t allowed[TOKENS];
    size_t states = 0, expected_states = 0;
    for (size_t d = 0; d < sizeof documents / sizeof documents[0]; d++) {
        gbnf_grammar *grammar = grammar_of(documents[d].grammar);
        if (!grammar)
            continue;
        gbnf_matcher *matcher = gbnf_matcher_create(grammar, NULL);
        gbnf_matcher *probe = gbnf_matcher_create(grammar, NULL);
        const char *text = documents[d].text;
        size_t length = strlen(text);
        expected_states += length + 1;
        for (size_t at = 0; at <= length; at++) {
            int32_t count = gbnf_matcher_allowed(matcher, vocab, allowed);
            int32_t expected_count = 0;
            for (int t = 0; t < TOKENS; t++) {
                gbnf_matcher_copy(probe, matcher);
                bool fits = lengths[t] > 0 && gbnf_matcher_feed(probe, pieces[t], lengths[t]);
                expected_count += fits;
                CHECK_MSG(allowed[t] == fits, "document %zu at byte %zu: token %d mask %d, feed %d", d, at, t,
                          allowed[t], fits);
            }
            CHECK_MSG(count == expected_count, "document %zu at byte %zu: %d allowed, %d fit", d, at, count,
                      expected_count);
            states++;
            if (at < length)
                CHECK_MSG(gbnf_matcher_feed(matcher, text + at, 1), "document %zu: byte %zu refused", d, at);
        }
        CHECK_MSG(gbnf_matcher_complete(matcher), "document %zu incomplete", d);
        gbnf_matcher_free(probe);
        gbnf_matcher_free(matcher);
        gbnf_grammar_free(grammar);
    }
    CHECK_MSG(states == expected_states && states > 400, "%zu states", states);

    /* Where the ambiguous grammar stands at its bound, "a" is neither taken nor offered; "b" is both. */
    gbnf_grammar *grammar = grammar_of(ambiguous);
    gbnf_matcher *matcher = gbnf_matcher_create(grammar, NULL);
    CHECK(gbnf_matcher_feed(matcher, many_a, 253));
    gbnf_matcher_allowed(matcher, vocab, allowed);
    int aa = 0;
    while (strcmp(words[aa], "aa") != 0)
        aa++;
    CHECK(!allowed['a'] && allowed['b'] && !allowed[256 + aa]);
    gbnf_matcher_free(matcher);
    gbnf_grammar_free(grammar);
    json_vocab_free(vocab);
}

/* ---- the mask in free text ---- */

/* At every byte of text under grammar_text, the mask equals feeding each token to a copy of the matcher; the text
 * is fed in steps of step bytes (1: every byte, mid-character states included). Returns the states checked. */
static size_t check_mask_along(const json_vocab *vocab, const char *const *pieces, const size_t *lengths,
                               int32_t tokens, const char *grammar_text, const char *text, size_t step)
{
    gbnf_grammar *grammar = grammar_of(grammar_text);
    if (!grammar)
        return 0;
    gbnf_matcher *matcher = gbnf_matcher_create(grammar, NULL);
    gbnf_matcher *probe = gbnf_matcher_create(grammar, NULL);
    uint8_t *allowed = malloc((size_t)tokens);
    size_t length = strlen(text), states = 0;
    for (size_t at = 0;; at += step) {
        int32_t count = gbnf_matcher_allowed(matcher, vocab, allowed), fitting = 0, wrong = 0;
        for (int32_t t = 0; t < tokens; t++) {
            gbnf_matcher_copy(probe, matcher);
            bool fits = lengths[t] > 0 && gbnf_matcher_feed(probe, pieces[t], lengths[t]);
            fitting += fits;
            if (allowed[t] != fits && wrong++ < 3)
                CHECK_MSG(false, "%s at byte %zu of %s: token %d (%.*s) mask %d, feed %d", grammar_text, at, text, t,
                          (int)lengths[t], pieces[t], allowed[t], fits);
        }
        CHECK_MSG(count == fitting && wrong == 0, "%s at byte %zu: %d allowed, %d fit, %d wrong", grammar_text, at,
                  count, fitting, wrong);
        states++;
        if (at >= length)
            break;
        size_t take = length - at < step ? length - at : step;
        CHECK_MSG(gbnf_matcher_feed(matcher, text + at, take), "%s: byte %zu of %s refused", grammar_text, at, text);
    }
    free(allowed);
    gbnf_matcher_free(probe);
    gbnf_matcher_free(matcher);
    gbnf_grammar_free(grammar);
    return states;
}

/* Pieces for free text: every single byte; whole words and characters of one, two, three and four bytes; pieces
 * half in a class and half out (a letter then a digit, a quote, a backslash, a control byte); characters split
 * across pieces; invalid sequences; and runs of 10 to 16 letters, to meet a bounded repetition near its end. */
static const char *const free_words[] = {
    "a", "ab", "abc", "hello", " world", "xyz", "q", "qq", "m", "mn", "n", "z", "zz", "x", "y", "-", "--", "a-b",
    "1", "12", "123", "a1", "1a", "ab1", "9z", "\\", "\\n", "\\\\", "a\\", "\\\"", "\"", "a\"", "\"a", "ab\"",
    "\n", "a\n", "\t", "a\tb", ".", "a.", "!", "a!", "ab!", "\xc3\xa9", "a\xc3\xa9", "\xc3\xa9\"", "\xc3\xa9!",
    "\xe2\x82\xac", "\xe2\x82\xac\xe2\x82\xac", "\xf0\x9f\x98\x80", "a\xf0\x9f\x98\x80", "\xe4\xb8\x80",
    "\xe4\xb8\x80\xe4\xb8\x81", "\xe9\xbf\xbf", "\xe4\xb8\x80.", "\xe3\x80\x82", "\xce\xb1", "\xce\xb1\xce\xb2",
    "\xc3", "\xa9", "a\xc3", "\xa9" "b", "\xe2\x82", "\xac", "\x82\xac", "\xe2", "\xf0\x9f", "\x98\x80", "\xf0",
    "\x9f\x98\x80", "a\xe4\xb8", "\x80" "b", "\xed\xa0\x80", "\xc0\x80", "\xe0\x80", "\xf5", "\xff", "a\xff",
    "abcdefghij", "abcdefghijk", "abcdefghijkl", "abcdefghijklm", "abcdefghijklmn", "abcdefghijklmnop",
    "aaaaaaaaaa", "aaaaaaaaaaaa", "a-a-a-a-a-a", "(", ")", "(a", "a)", "()", "x1", "xy1", "2y", "q5", "e", "ee",
};

/* The mask inside free text (a class repeated, or a group of alternatives one of which is a class, looping),
 * where a token made of the loop's characters leaves the stacks as they were and is marked without a walk:
 * against feeding every token, at every byte and at every step of a token, for bare classes and groups, negated
 * classes, multi-byte classes and literals, bounded repetitions met near their end, a minimum not yet reached,
 * several stacks at different classes, recursion, a vocabulary replaced under the matcher, and more loops in
 * turn than a matcher keeps tables for. */
static void check_free_text(void)
{
    enum { WORDS = sizeof free_words / sizeof free_words[0], TOKENS = 256 + WORDS + 1 };
    const char *pieces[TOKENS];
    size_t lengths[TOKENS];
    char single[256];
    json_vocab *vocab = byte_vocab(free_words, WORDS, false, pieces, lengths, single);
    if (!vocab)
        return;
    static const document documents[] = {
        /* bare classes, unbounded: the literal after the loop is its own byte, then in the class */
        {"root ::= [a-z]* \"!\"", "helloworld!"},
        {"root ::= [a-z]* \"q\" [0-9]", "abqzq5"},
        {"root ::= [^\"]* \"\\\"\"", "he said \xe2\x82\xac\xf0\x9f\x98\x80 \\ \xc3\xa9\n\""},
        {"root ::= .*", "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\x01z"},
        /* a multi-byte literal whose lead byte starts characters of the class */
        {"root ::= [^!]* \"\xc3\xa9!\"", "ab\xc3\xa0\xc3\xa9x\xc3\xa9!"},
        {"root ::= [\\u4e00-\\u9fff]* \"\xe3\x80\x82\"", "\xe4\xb8\x80\xe9\xbf\xbf\xe4\xb8\x81\xe3\x80\x82"},
        /* the JSON string: a loop over a group whose first alternative is a class */
        {"root ::= \"\\\"\" ( [^\"\\\\\\x00-\\x1F] | \"\\\\\" [\"\\\\/bfnrt] )* \"\\\"\"",
         "\"ab\\n\xc3\xa9\\\"\xe2\x82\xacz\""},
        {"root ::= ( [a-z] | \"-\" [0-9] )+ \".\"", "ab-1c-2."},
        /* bounded: the room counts down to the end, inside a bare class and a group */
        {"root ::= [a-z]{0,12} \"!\"", "abcdefghijkl!"},
        {"root ::= [a-z]{2,14} [0-9]", "abcdefghijklmn1"},
        {"root ::= ( [a-z] | \"-\" ){0,11} \".\"", "a-b-c-d-e-f."},
        {"root ::= [a-z]{5,} \"!\"", "abcdefghijklmnopqrstuvwxyz!"},
        {"root ::= x{3}\nx ::= [a-z]{0,4} \",\"", "abcd,ab,abcd,"},
        /* two stacks at different classes, and classes that overlap */
        {"root ::= [a-z]* \"x\" | [a-m0-9]* \"y\"", "abcm12y"},
        {"root ::= [a-z]* \"x\" | [a-m0-9]* \"y\"", "abcmnzx"},
        {"root ::= ( [a-z] | [0-9] )* \".\"", "a1b22c."},
        {"root ::= ( [a-z] | [a-f0-9] )* \".\"", "a1fz."},
        {"root ::= [a-z]* [0-9]* [a-z]* \"!\"", "ab12cd!"},
        {"root ::= ( [a-z]+ \" \" )* [0-9]", "ab cd e 1"},
        /* recursion: the loop is deep in frames that change */
        {"root ::= \"(\" root \")\" | [a-z]*", "((ab)"},
        {"root ::= \"(\" root \")\" | [a-z]*", "(((xyz)))"},
    };
    size_t states = 0, expected = 0;
    for (size_t d = 0; d < sizeof documents / sizeof documents[0]; d++) {
        expected += strlen(documents[d].text) + 1;
        states += check_mask_along(vocab, pieces, lengths, TOKENS, documents[d].grammar, documents[d].text, 1);
        check_mask_along(vocab, pieces, lengths, TOKENS, documents[d].grammar, documents[d].text, 3);
    }
    CHECK_MSG(states == expected, "%zu states, %zu expected", states, expected);

    /* A literal whose first byte the loop's class also holds, and whose step opens more stacks than the bound: the
     * loop alone would take the byte, but the step is refused as a whole ("q", "\xc3\xa9" and what starts with
     * them); the letters and characters the literals do not start stay plain. The third grammar meets the literal
     * only once its minimum is reached: "aq" is taken, "abq" is not. */
    char *crowded = malloc(8192);
    for (int variant = 0; variant < 3; variant++) {
        size_t used = (size_t)sprintf(crowded, "root ::= [a-z\\u00e0-\\u00ff]%s ( %s ( ", variant < 2 ? "*" : "{2,14}",
                                      variant == 1 ? "\"\xc3\xa9\"" : "\"q\"");
        for (int i = 0; i < GBNF_STACKS_MAX + 8; i++)
            used += (size_t)sprintf(crowded + used, "%s\"%c%c\"", i ? " | " : "", 'A' + i / 26 % 26, 'A' + i % 26);
        strcpy(crowded + used, " ) | \"!\" )");
        CHECK(takes(crowded, "ab\xc3\xa0") && !takes(crowded, variant == 1 ? "a\xc3\xa9" : "abq"));
        CHECK(takes(crowded, variant == 2 ? "aq" : "ab"));
        states += check_mask_along(vocab, pieces, lengths, TOKENS, crowded, "ab\xc3\xa0z", 1);
        expected += strlen("ab\xc3\xa0z") + 1;
    }
    free(crowded);
    CHECK_MSG(states == expected, "%zu states, %zu expected", states, expected);

    /* More loops in turn than a matcher keeps tables for: each comes back after the others pushed it out. */
    const char *five = "root ::= ( \"a\" [^a]* \"a\" | \"b\" [^b]* \"b\" | \"c\" [^c]* \"c\" | \"d\" [^d]* \"d\" | "
                       "\"e\" [^e]* \"e\" )*";
    check_mask_along(vocab, pieces, lengths, TOKENS, five, "axyzabxyzbcxyzcdxyzdexyzeaxyzabxyzbexyze", 2);

    /* The same matcher under another vocabulary of the same sizes (made after the first is freed, so perhaps where
     * it was): the tables built for the first must not answer for the second, whose 'c' and 'd' are swapped. */
    gbnf_grammar *grammar = grammar_of("root ::= [a-c]* \"!\"");
    gbnf_matcher *matcher = gbnf_matcher_create(grammar, NULL);
    gbnf_matcher *probe = gbnf_matcher_create(grammar, NULL);
    const char *swapped[2][13] = {
        {"ab", "abc", "cab", "a!", "!", "b", "bb", "ca", "cc", "aaa", "bcb", "ba", "d"},
        {"ab", "abd", "dab", "a!", "!", "b", "bb", "da", "dd", "aaa", "bdb", "ba", "c"},
    };
    size_t small_lengths[13];
    uint8_t small_allowed[13];
    for (int i = 0; i < 13; i++)
        small_lengths[i] = strlen(swapped[0][i]);
    CHECK(gbnf_matcher_feed(matcher, "ab", 2));
    int expected_counts[2] = {12, 8}, agreed = 0;
    for (int round = 0; round < 6; round++) {
        json_vocab *small = json_vocab_create(swapped[round / 3 % 2], small_lengths, 13, NULL);
        int32_t count = gbnf_matcher_allowed(matcher, small, small_allowed);
        CHECK_MSG(count == expected_counts[round / 3 % 2], "round %d: %d allowed", round, count);
        for (int t = 0; t < 13; t++) {
            gbnf_matcher_copy(probe, matcher);
            agreed += small_allowed[t] == gbnf_matcher_feed(probe, swapped[round / 3 % 2][t], small_lengths[t]);
        }
        json_vocab_free(small);
    }
    CHECK_MSG(agreed == 6 * 13, "%d of %d agree", agreed, 6 * 13);
    gbnf_matcher_free(probe);
    gbnf_matcher_free(matcher);
    gbnf_grammar_free(grammar);
    json_vocab_free(vocab);
}

/* ---- random writers ---- */

static uint32_t random_next(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return (uint32_t)(*state >> 11);
}

/* Writers that pick a random allowed token at each step, under grammars with loops, strings, multi-byte
 * characters and recursion, and pieces up to a few dozen bytes long: at every step the mask equals feeding each
 * token to a copy, and every write the mask allows is taken. */
static void check_random_writers(void)
{
    static const char *const fragments[] = {
        "a", "b", "x", "\"", "\\", "{", "}", "[", "]", ",", ":", " ", "\n", "0", "1", "-", ".", "e", "u", "(", ")",
        "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xe2", "\x82", "\xac", "\xc3", "\xf0\x9f", "null", "true",
        "\\u00", "\\n",
    };
    enum { TOKENS = 600, FRAGMENTS = sizeof fragments / sizeof fragments[0] };
    char *pieces[TOKENS];
    size_t lengths[TOKENS];
    uint64_t state = 0x9e3779b97f4a7c15ull;
    for (int t = 0; t < TOKENS; t++) {
        char buffer[128];
        size_t length = 0;
        int parts = t < FRAGMENTS ? 1 : 1 + (int)(random_next(&state) % 10);
        for (int part = 0; part < parts; part++) {
            const char *fragment = fragments[t < FRAGMENTS ? (uint32_t)t : random_next(&state) % FRAGMENTS];
            memcpy(buffer + length, fragment, strlen(fragment));
            length += strlen(fragment);
        }
        pieces[t] = malloc(length);
        memcpy(pieces[t], buffer, length);
        lengths[t] = length;
    }
    json_vocab *vocab = json_vocab_create((const char *const *)pieces, lengths, TOKENS, NULL);
    static const char *const grammars[] = {
        "root ::= ws value ws\n"
        "value ::= object | array | string | \"-\"? [0-9]+ (\".\" [0-9]+)? | \"true\" | \"null\"\n"
        "object ::= \"{\" ws (string ws \":\" ws value (ws \",\" ws string ws \":\" ws value)*)? ws \"}\"\n"
        "array ::= \"[\" ws (value (ws \",\" ws value)*)? ws \"]\"\n"
        "string ::= \"\\\"\" ([^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}))* \"\\\"\"\n"
        "ws ::= [ \\n]*",
        "root ::= (\"ab\" | \"a\" | \"b\" | \"x\"+)* (\"\\\"\" [^\"]{0,5} \"\\\"\")+",
        "root ::= e e (x | y)*\ne ::= \"\" | \"a\"?\nx ::= \"a\" \"b\"? | \"\\\\\" .\ny ::= [^a(]+ | \"(\" root \")\"",
    };
    uint8_t allowed[TOKENS];
    int walks = TEST_SANITIZED ? 3 : 10, completed = 0;
    for (size_t g = 0; g < sizeof grammars / sizeof grammars[0]; g++) {
        gbnf_grammar *grammar = grammar_of(grammars[g]);
        if (!grammar)
            continue;
        gbnf_matcher *matcher = gbnf_matcher_create(grammar, NULL);
        gbnf_matcher *probe = gbnf_matcher_create(grammar, NULL);
        for (int walk = 0; walk < walks; walk++) {
            gbnf_matcher_reset(matcher);
            for (int step = 0; step < 40; step++) {
                int32_t count = gbnf_matcher_allowed(matcher, vocab, allowed);
                int32_t fitting = 0;
                for (int t = 0; t < TOKENS; t++) {
                    gbnf_matcher_copy(probe, matcher);
                    bool fits = gbnf_matcher_feed(probe, pieces[t], lengths[t]);
                    fitting += fits;
                    CHECK_MSG(allowed[t] == fits, "grammar %zu walk %d step %d: token %d mask %d, feed %d", g, walk,
                              step, t, allowed[t], fits);
                }
                CHECK(count == fitting);
                if (count == 0)
                    break;
                int32_t pick = (int32_t)(random_next(&state) % (uint32_t)count), t = 0;
                for (; !allowed[t] || pick-- > 0; t++)
                    ;
                CHECK(gbnf_matcher_feed(matcher, pieces[t], lengths[t]));
                if (gbnf_matcher_complete(matcher) && random_next(&state) % 4 == 0) {
                    completed++;
                    break;
                }
            }
        }
        gbnf_matcher_free(probe);
        gbnf_matcher_free(matcher);
        gbnf_grammar_free(grammar);
    }
    CHECK_MSG(completed > (TEST_SANITIZED ? 2 : 10), "%d writes completed", completed);
    json_vocab_free(vocab);
    for (int t = 0; t < TOKENS; t++)
        free(pieces[t]);
}

/* A token longer than JSON_TOKEN_BYTES_MAX bytes is never offered, though it could be fed. */
static void check_long_token(void)
{
    char *long_piece = malloc(601);
    memset(long_piece, 'a', 600);
    long_piece[600] = '\0';
    const char *pieces[] = {"a", long_piece, "b"};
    size_t lengths[] = {1, 600, 1};
    json_vocab *vocab = json_vocab_create(pieces, lengths, 3, NULL);
    gbnf_grammar *grammar = grammar_of("root ::= [a]*");
    gbnf_matcher *matcher = gbnf_matcher_create(grammar, NULL);
    uint8_t allowed[3];
    CHECK(gbnf_matcher_allowed(matcher, vocab, allowed) == 1 && allowed[0] && !allowed[1] && !allowed[2]);
    CHECK(gbnf_matcher_feed(matcher, long_piece, 600));
    gbnf_matcher_free(matcher);
    gbnf_grammar_free(grammar);
    json_vocab_free(vocab);
    free(long_piece);
}

int main(void)
{
    check_literals();
    check_classes();
    check_repetitions();
    check_groups_and_recursion();
    check_ends();
    check_layout();
    check_refusals();
    check_stack_bound();
    check_work_bounds();
    check_mask();
    check_free_text();
    check_long_token();
    check_random_writers();
    return test_finish();
}
