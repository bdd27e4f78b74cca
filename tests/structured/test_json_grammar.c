/* The JSON-schema matcher: each feature accepted and refused (strings with
 * escapes and split UTF-8, numbers and their digit bounds, the whitespace
 * rule, keys in any order, required, duplicate and other keys, arrays and
 * their bounds, enum/const with shared prefixes, anyOf of objects, type
 * lists, $ref with $defs and recursion, the nesting limit), completeness and
 * can_continue, the schemas refused with the keyword named, and the
 * vocabulary mask against feeding each token from a copy of the state at
 * every byte of several documents. The expected outcomes are worked out from
 * RFC 8259 and the schema by hand. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "structured/json_grammar.h"
#include "test.h"

static json_grammar *grammar_of(const char *schema)
{
    bmoe_error err = {0};
    json_grammar *grammar = json_grammar_create(schema, schema ? strlen(schema) : 0, &err);
    CHECK_MSG(grammar != NULL, "schema %s: %s", schema ? schema : "(json_object)", err.message);
    return grammar;
}

/* Whether text, fed whole and then again byte by byte, is taken and complete (both ways must agree). */
static bool accepts(const char *schema, const char *text)
{
    json_grammar *grammar = grammar_of(schema);
    if (!grammar)
        return false;
    json_matcher *whole = json_matcher_create(grammar, NULL);
    json_matcher *bytewise = json_matcher_create(grammar, NULL);
    bool fed_whole = json_matcher_feed(whole, text, strlen(text)) && json_matcher_complete(whole);
    bool fed_bytes = true;
    for (size_t i = 0; text[i] && fed_bytes; i++)
        fed_bytes = json_matcher_feed(bytewise, text + i, 1);
    fed_bytes = fed_bytes && json_matcher_complete(bytewise);
    CHECK_MSG(fed_whole == fed_bytes, "%s: whole %d, byte by byte %d", text, fed_whole, fed_bytes);
    json_matcher_free(whole);
    json_matcher_free(bytewise);
    json_grammar_free(grammar);
    return fed_whole;
}

/* Whether text is taken as the start of a value (complete or not). */
static bool takes(const char *schema, const char *text)
{
    json_grammar *grammar = grammar_of(schema);
    if (!grammar)
        return false;
    json_matcher *matcher = json_matcher_create(grammar, NULL);
    bool fed = json_matcher_feed(matcher, text, strlen(text));
    json_matcher_free(matcher);
    json_grammar_free(grammar);
    return fed;
}

#define ACCEPT(schema, text) CHECK_MSG(accepts(schema, text), "should accept %s", text)
#define REFUSE(schema, text) CHECK_MSG(!accepts(schema, text), "should refuse %s", text)
#define TAKES(schema, text) CHECK_MSG(takes(schema, text), "should take %s", text)
#define STOPS(schema, text) CHECK_MSG(!takes(schema, text), "should not take %s", text)

static void check_strings(void)
{
    const char *s = "{\"type\":\"string\"}";
    ACCEPT(s, "\"abc\"");
    ACCEPT(s, "\"\"");
    ACCEPT(s, "\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\"");
    ACCEPT(s, "\"\\u00e9\\uD83D\\uDE00\\u0041\"");
    ACCEPT(s, "\"h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80\"");
    ACCEPT(s, "\"\x7f\"");                /* DEL needs no escape */
    REFUSE(s, "\"abc");                   /* not closed */
    STOPS(s, "\"a\x01\"");                /* a raw control byte */
    STOPS(s, "\"a\nb\"");
    STOPS(s, "\"\\q\"");                  /* no such escape */
    STOPS(s, "\"\\u12G4\"");
    STOPS(s, "\"\\u12\"");                /* a short \u escape */
    STOPS(s, "\"\xc0\x80\"");             /* overlong */
    STOPS(s, "\"\xe0\x80\x80\"");         /* overlong three-byte form */
    STOPS(s, "\"\xed\xa0\x80\"");         /* a surrogate */
    STOPS(s, "\"\xf4\x90\x80\x80\"");     /* above U+10FFFF */
    STOPS(s, "\"\xf5\"");
    STOPS(s, "\"\x80\"");                 /* a lone continuation byte */
    STOPS(s, "\"\xe2\x82\"");             /* cut before the quote */
    ACCEPT(s, "\"\\ud83d\\ude00\"");
    STOPS(s, "\"\\uD83D\"");             /* a high surrogate alone */
    STOPS(s, "\"\\uDE00");                /* a low surrogate alone */
    STOPS(s, "\"\\uD83Dx");
    STOPS(s, "\"\\uD83D\\u0041");
    STOPS(s, "\"\\uD83D\\uD83D");
    ACCEPT("{\"type\":\"string\",\"maxLength\":1}", "\"\\uD83D\\uDE00\""); /* one character */
    ACCEPT(s, "\"\\uD7FF\\uE000\"");
    STOPS(s, "abc");
    STOPS(s, "'a'");

    /* A character split between two feeds. */
    json_grammar *grammar = grammar_of(s);
    json_matcher *matcher = json_matcher_create(grammar, NULL);
    CHECK(json_matcher_feed(matcher, "\"\xe2", 2));
    CHECK(!json_matcher_feed(matcher, "\"", 1)); /* the character must finish first */
    CHECK(!json_matcher_feed(matcher, "\x41", 1));
    CHECK(json_matcher_feed(matcher, "\x82", 1));
    CHECK(json_matcher_feed(matcher, "\xac\"", 2));
    CHECK(json_matcher_complete(matcher));
    CHECK(!json_matcher_can_continue(matcher));
    json_matcher_free(matcher);
    json_grammar_free(grammar);

    /* Lengths in characters: a multi-byte character or an escape is one. */
    const char *bounded = "{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}";
    ACCEPT(bounded, "\"ab\"");
    ACCEPT(bounded, "\"abc\"");
    REFUSE(bounded, "\"a\"");
    REFUSE(bounded, "\"\"");
    REFUSE(bounded, "\"abcd\"");
    ACCEPT(bounded, "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"");
    REFUSE(bounded, "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80x\"");
    ACCEPT(bounded, "\"\\n\\t\"");
    ACCEPT(bounded, "\"\\u0041bc\"");
    REFUSE(bounded, "\"\\u0041bcd\"");
    STOPS(bounded, "\"abcd"); /* the fourth character is refused as it comes */
}

static void check_numbers(void)
{
    const char *n = "{\"type\":\"number\"}";
    const char *good[] = {"0", "-0", "12", "-12.5", "1e5", "1E+5", "1.5e-10", "0.0", "0e0", "123456789012345",
                          "0.123456789012345", "1e123", "-987654321098765.123456789012345E-999"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        ACCEPT(n, good[i]);
    const char *bad[] = {"01", "-", "1.", ".5", "+1", "1e", "1e+", "1234567890123456", "0.1234567890123456",
                         "1e1234", "--1", "1.2.3", "NaN", "-01", "1 ", " 1", "0x1", "1e5.0", "Infinity"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        REFUSE(n, bad[i]);

    const char *integer = "{\"type\":\"integer\"}";
    ACCEPT(integer, "12");
    ACCEPT(integer, "-3");
    ACCEPT(integer, "0");
    REFUSE(integer, "1.0");
    REFUSE(integer, "1e3");
    REFUSE(integer, "\"1\"");

    json_grammar *grammar = grammar_of(n);
    json_matcher *matcher = json_matcher_create(grammar, NULL);
    CHECK(json_matcher_feed(matcher, "1", 1));
    CHECK(json_matcher_complete(matcher) && json_matcher_can_continue(matcher));
    CHECK(json_matcher_feed(matcher, "e", 1));
    CHECK(!json_matcher_complete(matcher) && json_matcher_can_continue(matcher));
    CHECK(json_matcher_feed(matcher, "123", 3));
    CHECK(json_matcher_complete(matcher));
    CHECK(!json_matcher_can_continue(matcher)); /* three exponent digits: nothing more */
    json_matcher_reset(matcher);
    CHECK(!json_matcher_complete(matcher) && json_matcher_can_continue(matcher));
    CHECK(json_matcher_feed(matcher, "-", 1) && !json_matcher_complete(matcher));
    json_matcher_free(matcher);
    json_grammar_free(grammar);
}

static void check_whitespace(void)
{
    const char *o = NULL; /* json_object mode */
    ACCEPT(o, "{\"a\": 1}");
    REFUSE(o, "{\"a\":  1}");
    ACCEPT(o, "{\n  \"a\": 1\n}");
    ACCEPT(o, "{\n\t\"a\":1}");
    ACCEPT(o, "{\"a\":1 }");
    ACCEPT(o, "{ \"a\" : 1 , \"b\" : [ 1 , 2 ] }");
    ACCEPT(o, "{\n                    \"a\":1}");   /* twenty spaces */
    REFUSE(o, "{\n                     \"a\":1}");  /* twenty-one */
    REFUSE(o, "{\n\n\"a\":1}");
    REFUSE(o, "{\r\n\"a\":1}");
    REFUSE(o, "{ \n\"a\":1}");
    REFUSE(o, "{\"a\" :\n  \n1}");
    REFUSE(o, " {}");                            /* nothing before the value */
    REFUSE(o, "{} ");                            /* nor after it */
    REFUSE(o, "{}\n");
    REFUSE(o, "{\"a\":\"x\"}{}");
    ACCEPT(o, "{}");
    REFUSE(o, "[]");                             /* json_object mode wants an object */
    REFUSE(o, "\"a\"");
    REFUSE(o, "{\"a\":1,}");
    REFUSE(o, "{\"a\"}");
    REFUSE(o, "{a:1}");
    ACCEPT(o, "{\"a\":{\"b\":[true,false,null,-1.5e3,\"x\",{}]},\"\":[]}");
    REFUSE(o, "{\"a\":tru}");
    REFUSE(o, "{\"a\":True}");

    json_grammar *grammar = grammar_of(o);
    json_matcher *matcher = json_matcher_create(grammar, NULL);
    CHECK(!json_matcher_complete(matcher) && json_matcher_can_continue(matcher));
    CHECK(json_matcher_feed(matcher, "{\"k\":[1", 7));
    CHECK(!json_matcher_complete(matcher) && json_matcher_can_continue(matcher));
    CHECK(!json_matcher_feed(matcher, "}", 1)); /* refused, state unchanged: */
    CHECK(json_matcher_feed(matcher, "]}", 2));
    CHECK(json_matcher_complete(matcher));
    CHECK(!json_matcher_can_continue(matcher));
    CHECK(!json_matcher_feed(matcher, " ", 1));
    json_matcher_free(matcher);
    json_grammar_free(grammar);
}

static void check_objects(void)
{
    const char *person = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"},"
                         "\"b\":{\"type\":\"integer\"},"
                         "\"c\":{\"type\":\"boolean\"}},\"required\":[\"a\",\"b\"]}";
    ACCEPT(person, "{\"a\":\"x\",\"b\":1}");
    ACCEPT(person, "{\"b\":1,\"a\":\"x\"}");
    ACCEPT(person, "{\"c\":true,\"b\":1,\"a\":\"x\"}");
    ACCEPT(person, "{\"a\":\"x\",\"b\":1,\"c\":false}");
    REFUSE(person, "{\"a\":\"x\"}");                   /* b is required */
    STOPS(person, "{\"a\":\"x\"}");                    /* '}' is refused as it comes */
    STOPS(person, "{\"a\":\"x\",\"a\":\"y\"");         /* a key twice */
    STOPS(person, "{\"a\":\"x\",\"b\":1,\"d\"");       /* additionalProperties absent: false */
    STOPS(person, "{\"a\":1");
    STOPS(person, "{\"a\":\"x\",\"b\":1,}");
    STOPS(person, "{\"a\":\"x\",\"b\":1,\"c\":true,"); /* no key is left to write */
    STOPS(person, "{\"ab");
    REFUSE(person, "{}");

    const char *open = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}},\"required\":[\"a\"],"
                       "\"additionalProperties\":true}";
    ACCEPT(open, "{\"a\":\"x\",\"zz\":[1,{\"q\":null}]}");
    ACCEPT(open, "{\"ab\":1,\"a\":\"x\"}");             /* a key that starts like a listed one */
    STOPS(open, "{\"a\":\"x\",\"a\"");                 /* a listed key twice, even when others are allowed */
    STOPS(open, "{\"a\":1");                           /* a listed key keeps its schema */

    const char *typed_other = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}},"
                              "\"additionalProperties\":{\"type\":\"integer\"}}";
    ACCEPT(typed_other, "{\"a\":\"x\",\"z\":5}");
    ACCEPT(typed_other, "{}");
    REFUSE(typed_other, "{\"z\":\"s\"}");

    ACCEPT("{\"type\":\"object\"}", "{\"x\":1,\"y\":[true]}");
    REFUSE("{\"type\":\"object\",\"properties\":{}}", "{\"x\":1}");
    ACCEPT("{\"type\":\"object\",\"properties\":{}}", "{}");

    /* Keys that share a prefix. */
    const char *prefixes = "{\"type\":\"object\",\"properties\":{\"ab\":{},\"abc\":{}}}";
    ACCEPT(prefixes, "{\"ab\":1}");
    ACCEPT(prefixes, "{\"abc\":1}");
    ACCEPT(prefixes, "{\"abc\":1,\"ab\":2}");
    STOPS(prefixes, "{\"abd");
    STOPS(prefixes, "{\"a\"");
    STOPS(prefixes, "{\"ab\":1,\"ab\"");
    TAKES(prefixes, "{\"ab\":1,\"ab");                  /* "abc" is still to come */

    /* A required key not listed, with other keys allowed. */
    ACCEPT("{\"type\":\"object\",\"required\":[\"k\"]}", "{\"k\":1}");
    REFUSE("{\"type\":\"object\",\"required\":[\"k\"]}", "{}");

    /* Keys with characters JSON escapes. */
    const char *escaped = "{\"type\":\"object\",\"properties\":{\"a\\\"b\":{},\"tab\\there\":{}}}";
    ACCEPT(escaped, "{\"a\\\"b\":1,\"tab\\there\":2}");
    REFUSE(escaped, "{\"a\\u0022b\":1}");
}

static void check_arrays(void)
{
    const char *a = "{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":1,\"maxItems\":2}";
    ACCEPT(a, "[1]");
    ACCEPT(a, "[1,2]");
    ACCEPT(a, "[ 1 , 2 ]");
    REFUSE(a, "[]");
    STOPS(a, "[1,2,");
    STOPS(a, "[1,]");
    STOPS(a, "[\"a\"");
    ACCEPT("{\"type\":\"array\"}", "[1,\"a\",[],{}]");
    ACCEPT("{\"type\":\"array\",\"items\":false}", "[]");
    STOPS("{\"type\":\"array\",\"items\":false}", "[1");
    ACCEPT("{\"type\":\"array\",\"maxItems\":0}", "[]");
}

static void check_literals(void)
{
    const char *e = "{\"enum\":[\"red\",\"reddish\",1,12,null,true,[1,2],{\"k\":\"v\"}]}";
    ACCEPT(e, "\"red\"");
    ACCEPT(e, "\"reddish\"");
    REFUSE(e, "\"redd\"");
    REFUSE(e, "\"re\"");
    ACCEPT(e, "1");
    ACCEPT(e, "12");
    REFUSE(e, "123");
    REFUSE(e, "1.0");
    ACCEPT(e, "null");
    ACCEPT(e, "true");
    REFUSE(e, "false");
    ACCEPT(e, "[1,2]");
    REFUSE(e, "[1, 2]");        /* compact serialization only */
    ACCEPT(e, "{\"k\":\"v\"}");

    const char *items = "{\"type\":\"array\",\"items\":{\"enum\":[1,12]}}";
    ACCEPT(items, "[1,12,1]");
    ACCEPT(items, "[12]");
    ACCEPT(items, "[1 ,12]");
    REFUSE(items, "[13]");

    json_grammar *grammar = grammar_of("{\"enum\":[1,12]}");
    json_matcher *matcher = json_matcher_create(grammar, NULL);
    CHECK(json_matcher_feed(matcher, "1", 1));
    CHECK(json_matcher_complete(matcher) && json_matcher_can_continue(matcher));
    CHECK(json_matcher_feed(matcher, "2", 1));
    CHECK(json_matcher_complete(matcher) && !json_matcher_can_continue(matcher));
    json_matcher_free(matcher);
    json_grammar_free(grammar);

    ACCEPT("{\"type\":\"string\",\"enum\":[\"a\",1]}", "\"a\"");
    REFUSE("{\"type\":\"string\",\"enum\":[\"a\",1]}", "1");
    ACCEPT("{\"const\":{\"k\":[1,\"x\"]}}", "{\"k\":[1,\"x\"]}");
    REFUSE("{\"const\":{\"k\":[1,\"x\"]}}", "{\"k\": [1,\"x\"]}");
    ACCEPT("{\"const\":\"caf\xc3\xa9\"}", "\"caf\xc3\xa9\"");
    ACCEPT("{\"type\":\"boolean\"}", "false");
    REFUSE("{\"type\":\"boolean\"}", "null");
    ACCEPT("{\"type\":\"null\"}", "null");
}

static void check_alternatives(void)
{
    const char *shapes = "{\"anyOf\":["
                         "{\"type\":\"object\",\"properties\":{\"kind\":{\"const\":\"circle\"},"
                         "\"r\":{\"type\":\"number\"}},"
                         "\"required\":[\"kind\",\"r\"]},"
                         "{\"type\":\"object\",\"properties\":{\"kind\":{\"const\":\"square\"},"
                         "\"side\":{\"type\":\"number\"}},"
                         "\"required\":[\"kind\",\"side\"]}]}";
    ACCEPT(shapes, "{\"kind\":\"circle\",\"r\":1}");
    ACCEPT(shapes, "{\"kind\":\"square\",\"side\":2}");
    ACCEPT(shapes, "{\"r\":1.5,\"kind\":\"circle\"}");
    REFUSE(shapes, "{\"kind\":\"circle\",\"side\":2}");
    REFUSE(shapes, "{\"kind\":\"circle\"}");

    /* Two objects alike for a while: two threads until a key tells them apart. */
    const char *people = "{\"oneOf\":["
                         "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
                         "\"age\":{\"type\":\"integer\"}},"
                         "\"required\":[\"name\",\"age\"]},"
                         "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
                         "\"email\":{\"type\":\"string\"}},"
                         "\"required\":[\"name\",\"email\"]}]}";
    ACCEPT(people, "{\"name\":\"x\",\"age\":3}");
    ACCEPT(people, "{\"name\":\"x\",\"email\":\"e\"}");
    REFUSE(people, "{\"name\":\"x\"}");
    REFUSE(people, "{\"name\":\"x\",\"age\":3,\"email\":\"e\"}");

    const char *nullable = "{\"type\":[\"string\",\"null\"],\"maxLength\":2}";
    ACCEPT(nullable, "\"ab\"");
    ACCEPT(nullable, "null");
    REFUSE(nullable, "\"abc\"");
    REFUSE(nullable, "1");
    const char *optional = "{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"null\"}],\"default\":null,\"title\":\"T\"}";
    ACCEPT(optional, "5");
    ACCEPT(optional, "null");
    REFUSE(optional, "5.5");
    ACCEPT("{\"anyOf\":[{\"type\":\"number\"},{\"type\":\"integer\"}]}", "5");
    ACCEPT("{\"type\":\"array\",\"items\":{\"anyOf\":[{\"type\":\"number\"},{\"type\":\"integer\"}]}}", "[5,6.5,7]");
    ACCEPT("{\"allOf\":[{\"type\":\"string\"}]}", "\"s\"");
    REFUSE("{\"allOf\":[{\"type\":\"string\"}]}", "1");
    ACCEPT("{\"anyOf\":[{\"enum\":[\"red\"]},{\"enum\":[\"reddish\"]}]}", "\"reddish\"");
    ACCEPT("{\"anyOf\":[{\"enum\":[\"red\"]},{\"enum\":[\"reddish\"]}]}", "\"red\"");
}

static void check_refs(void)
{
    const char *pets = "{\"$defs\":{\"Pet\":{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"}},"
                       "\"required\":[\"name\"]}},\"type\":\"object\",\"properties\":{\"pets\":{\"type\":\"array\","
                       "\"items\":{\"$ref\":\"#/$defs/Pet\"}}},\"required\":[\"pets\"]}";
    ACCEPT(pets, "{\"pets\":[{\"name\":\"a\"},{\"name\":\"b\"}]}");
    REFUSE(pets, "{\"pets\":[{}]}");
    ACCEPT("{\"definitions\":{\"N\":{\"type\":\"integer\"}},\"$ref\":\"#/definitions/N\"}", "7");

    const char *tree = "{\"$defs\":{\"Node\":{\"type\":\"object\",\"properties\":{\"value\":{\"type\":\"integer\"},"
                       "\"children\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/Node\"}}},"
                       "\"required\":[\"value\"]}},\"$ref\":\"#/$defs/Node\"}";
    ACCEPT(tree, "{\"value\":1,\"children\":[{\"value\":2,\"children\":[{\"value\":3}]},{\"value\":4}]}");
    REFUSE(tree, "{\"value\":1,\"children\":[{\"children\":[]}]}");

    const char *linked = "{\"type\":\"object\",\"properties\":{\"next\":{\"anyOf\":[{\"$ref\":\"#\"},"
                         "{\"type\":\"null\"}]}}}";
    ACCEPT(linked, "{\"next\":{\"next\":{\"next\":null}}}");
    ACCEPT(linked, "{}");
}

/* n objects inside one another, each the value of key "n", with innermost inside the last. */
static char *nested(int n, const char *innermost)
{
    size_t size = (size_t)n * 6 + strlen(innermost) + 1;
    char *text = malloc(size);
    size_t used = 0;
    for (int i = 0; i < n; i++) {
        memcpy(text + used, i + 1 < n ? "{\"n\":" : "{", i + 1 < n ? 5 : 1);
        used += i + 1 < n ? 5 : 1;
    }
    used += (size_t)sprintf(text + used, "%s", innermost);
    for (int i = 0; i < n; i++)
        text[used++] = '}';
    text[used] = '\0';
    return text;
}

static void check_depth(void)
{
    char *deepest = nested(32, "");
    char *too_deep = nested(33, "");
    ACCEPT(NULL, deepest);
    REFUSE(NULL, too_deep);
    const char *optional_self = "{\"type\":\"object\",\"properties\":{\"n\":{\"$ref\":\"#\"}}}";
    ACCEPT(optional_self, deepest);
    REFUSE(optional_self, too_deep);
    free(deepest);
    free(too_deep);

    /* At the 32nd level a key whose value must be an object is refused: no dead end. */
    char *inside = nested(32, "");
    inside[strlen(inside) - 32] = '\0'; /* open, not closed */
    TAKES(optional_self, inside);
    size_t length = strlen(inside);
    char *with_key = malloc(length + 8);
    snprintf(with_key, length + 8, "%s\"n", inside);
    STOPS(optional_self, with_key);
    snprintf(with_key, length + 8, "%s}", inside);
    TAKES(optional_self, with_key);
    free(with_key);
    free(inside);

    char arrays[128];
    snprintf(arrays, sizeof arrays, "{\"a\":%.*s%.*s}", 31, "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
             31, "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]");
    ACCEPT(NULL, arrays);
    snprintf(arrays, sizeof arrays, "{\"a\":%.*s%.*s}", 32, "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
             32, "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]");
    REFUSE(NULL, arrays);
}

/* The schema is refused and the message names what. */
static void check_refused(const char *schema, const char *named)
{
    bmoe_error err = {0};
    json_grammar *grammar = json_grammar_create(schema, strlen(schema), &err);
    CHECK_MSG(grammar == NULL, "should refuse %s", schema);
    CHECK_MSG(strstr(err.message, named) != NULL, "%s: message '%s' should name '%s'", schema, err.message, named);
    CHECK(err.status == BMOE_ERR_INVALID_ARGUMENT);
    json_grammar_free(grammar);
}

static void check_refusals(void)
{
    check_refused("{\"type\":\"string\",\"pattern\":\"^a\"}", "'pattern'");
    check_refused("{\"type\":\"integer\",\"minimum\":0}", "'minimum'");
    check_refused("{\"type\":\"integer\",\"maximum\":9}", "'maximum'");
    check_refused("{\"type\":\"number\",\"exclusiveMinimum\":0}", "'exclusiveMinimum'");
    check_refused("{\"type\":\"number\",\"multipleOf\":2}", "'multipleOf'");
    check_refused("{\"type\":\"object\",\"patternProperties\":{\"^x\":{}}}", "'patternProperties'");
    check_refused("{\"not\":{\"type\":\"string\"}}", "'not'");
    check_refused("{\"if\":{},\"then\":{}}", "'if'");
    check_refused("{\"allOf\":[{\"type\":\"object\"},{\"required\":[\"a\"]}]}", "'allOf'");
    check_refused("{\"type\":\"array\",\"uniqueItems\":true}", "'uniqueItems'");
    check_refused("{\"type\":\"array\",\"contains\":{}}", "'contains'");
    check_refused("{\"type\":\"object\",\"dependentRequired\":{}}", "'dependentRequired'");
    check_refused("{\"type\":\"array\",\"prefixItems\":[{}]}", "'prefixItems'");
    check_refused("{\"type\":\"object\",\"minProperties\":1}", "'minProperties'");
    check_refused("{\"type\":\"array\",\"items\":[{},{}]}", "items as a list");
    /* Refused deep inside, with where. */
    check_refused("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"pattern\":\"x\"}}}",
                  "'pattern' (at /properties/a)");
    check_refused("{\"type\":", "not valid JSON");
    check_refused("{\"type\":\"string\"} x", "not valid JSON");
    check_refused("[1,2]", "schema must be an object");
    check_refused("false", "false");
    check_refused("{\"type\":\"strin\"}", "unknown type 'strin'");
    check_refused("{\"$ref\":\"#/$defs/Missing\"}", "names no definition");
    check_refused("{\"$ref\":\"https://example.com/s.json\"}", "is not supported");
    check_refused("{\"$defs\":{\"A\":{\"$ref\":\"#/$defs/A\"}},\"$ref\":\"#/$defs/A\"}", "cycle");
    check_refused("{\"$ref\":\"#\",\"type\":\"string\"}", "'type' beside '$ref'");
    check_refused("{\"anyOf\":[{}],\"type\":\"string\"}", "'type' beside 'anyOf'");
    check_refused("{\"enum\":[]}", "enum");
    check_refused("{\"type\":\"integer\",\"enum\":[\"a\"]}", "enum has no value");
    check_refused("{\"type\":\"string\",\"minLength\":3,\"maxLength\":2}", "minLength");
    check_refused("{\"type\":\"array\",\"minItems\":-1}", "minItems");
    check_refused("{\"type\":\"object\",\"properties\":{},\"required\":[\"x\"]}", "required property 'x'");
    check_refused("{\"type\":\"object\",\"properties\":{\"n\":{\"$ref\":\"#\"}},\"required\":[\"n\"]}", "deeper");

    /* 33 objects alike: 33 threads after '{'. */
    char wide[4096];
    size_t used = (size_t)snprintf(wide, sizeof wide, "{\"anyOf\":[");
    for (int i = 0; i < 33; i++)
        used += (size_t)snprintf(wide + used, sizeof wide - used, "%s{\"type\":\"object\",\"properties\":{\"k%d\":{}}}",
                                 i ? "," : "", i);
    snprintf(wide + used, sizeof wide - used, "]}");
    check_refused(wide, "parse states");
    /* 32 are fine. */
    used = (size_t)snprintf(wide, sizeof wide, "{\"anyOf\":[");
    for (int i = 0; i < 32; i++)
        used += (size_t)snprintf(wide + used, sizeof wide - used, "%s{\"type\":\"object\",\"properties\":{\"k%d\":{}}}",
                                 i ? "," : "", i);
    snprintf(wide + used, sizeof wide - used, "]}");
    ACCEPT(wide, "{\"k31\":1}");

    /* Annotations are ignored. */
    const char *annotated = "{\"type\":\"string\",\"title\":\"t\",\"description\":\"d\",\"format\":\"date-time\","
                            "\"default\":\"x\",\"examples\":[\"a\"],\"$schema\":\"x\",\"$comment\":\"c\"}";
    ACCEPT(annotated, "\"anything\"");
    ACCEPT("true", "[1]");
    ACCEPT("{}", "\"x\"");
}

/* ---- the vocabulary mask ---- */

static const char *const vocabulary[] = {
    "{", "}", "{\"", "\"}", "\":", "\": ", "\"", ",", ", \"", "\",", "\n", "\n  ", " ", "  ", "a", "ab", "name",
    "age", "\"name", "\"age", "\":\"", "1", "12", "0", "-", ".", "5", "e", "e+", "true", "tr", "ue", "null", "[",
    "]", "[1", "],", "\\", "\\n", "\\u00", "e9", "\xc3", "\xa9", "\xc3\xa9", "\xe2\x82", "\xac", "\xe2\x82\xac\"",
    "\xf0\x9f\x98\x80", "\x01", "\"x\"", "red", "dish", "reddish\"", "\"red", "\"}}", "\t", "},", "}]", ":", "\"k",
    "kind", "circle", "\"circle\"", "\"r\":", "1.5", "e-3", "\",\"", "\"]", " }", "{\"a\":", "x", "xy", "xyz",
    "\xff", "\"\xc3", "\"\xe2\x82\xac", "false", "n", "\"n\":", "{\"n\":", "\"\"", "ty", "\\\"", "\"\\u",
};

typedef struct document {
    const char *schema;
    const char *text;
} document;

/* At every byte of each document, the mask equals feeding each token to a copy of the state. */
static void check_mask(void)
{
    enum { WORDS = sizeof vocabulary / sizeof vocabulary[0], TOKENS = WORDS + 2 };
    const char *pieces[TOKENS];
    size_t lengths[TOKENS];
    for (int i = 0; i < WORDS; i++) {
        pieces[i] = vocabulary[i];
        lengths[i] = strlen(vocabulary[i]);
    }
    pieces[WORDS] = "<|end|>"; /* a control token */
    lengths[WORDS] = 0;
    pieces[WORDS + 1] = "a"; /* a second token with the same bytes as another */
    lengths[WORDS + 1] = 1;
    bmoe_error err = {0};
    json_vocab *vocab = json_vocab_create(pieces, lengths, TOKENS, &err);
    CHECK_MSG(vocab != NULL, "%s", err.message);
    if (!vocab)
        return;
    CHECK(json_vocab_n_tokens(vocab) == TOKENS);

    static const document documents[] = {
        {NULL, "{\"name\": \"x\\n\\u00e9\xc3\xa9\xe2\x82\xac\", \"age\":[12,-1.5e-3,true,null,{}],"
               "\n  \"\":{\"a\":\"xy\"}}"},
        {"{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":4},"
         "\"age\":{\"type\":\"integer\"}},\"required\":[\"name\"]}",
         "{\"age\":12, \"name\":\"ab\xc3\xa9x\"}"},
        {"{\"enum\":[\"red\",\"reddish\",12,1]}", "\"reddish\""},
        {"{\"type\":\"array\",\"items\":{\"enum\":[1,12,\"red\"]},\"maxItems\":3}", "[1,12,\"red\"]"},
        {"{\"anyOf\":[{\"type\":\"object\",\"properties\":{\"kind\":{\"const\":\"circle\"},"
         "\"r\":{\"type\":\"number\"}},"
         "\"required\":[\"kind\",\"r\"]},{\"type\":\"object\",\"properties\":{\"kind\":{\"type\":\"string\"},"
         "\"x\":{\"type\":[\"string\",\"null\"],\"maxLength\":3}}}]}",
         "{\"kind\":\"circle\",\"r\":1.5e-3}"},
        {"{\"anyOf\":[{\"type\":\"object\",\"properties\":{\"kind\":{\"const\":\"circle\"},"
         "\"r\":{\"type\":\"number\"}},"
         "\"required\":[\"kind\",\"r\"]},{\"type\":\"object\",\"properties\":{\"kind\":{\"type\":\"string\"},"
         "\"x\":{\"type\":[\"string\",\"null\"],\"maxLength\":3}}}]}",
         "{\"kind\":\"circ\",\"x\":\"xyz\"}"},
        {"{\"type\":\"object\",\"properties\":{\"n\":{\"$ref\":\"#\"},\"a\":{\"type\":\"string\"}}}",
         "{\"n\":{\"n\":{\"a\":\"\\\"\"}},\"a\":\"\"}"},
        {"{\"type\":\"number\"}", "-12.5e+3"},
        {"{\"type\":\"string\",\"minLength\":1,\"maxLength\":2}", "\"\xf0\x9f\x98\x80x\""},
        {NULL, "{\n  \"a\": [\n    1,\n    \"x\"\n  ],\n\t\"b\":{ },\n  \"name\" : \"\\\"\\u00e9\"\n}"},
        {"{\"type\":\"object\",\"properties\":{\"k\":{\"const\":{\"a\":[true,\"xy\"]}},\"n\":{\"type\":\"null\"}},"
         "\"required\":[\"k\",\"n\"]}",
         "{\"n\":null,\"k\":{\"a\":[true,\"xy\"]}}"},
    };
    uint8_t allowed[TOKENS];
    size_t states = 0, expected_states = 0;
    for (size_t d = 0; d < sizeof documents / sizeof documents[0]; d++) {
        json_grammar *grammar = grammar_of(documents[d].schema);
        if (!grammar)
            continue;
        json_matcher *matcher = json_matcher_create(grammar, NULL);
        json_matcher *probe = json_matcher_create(grammar, NULL);
        const char *text = documents[d].text;
        size_t length = strlen(text);
        expected_states += length + 1;
        for (size_t at = 0; at <= length; at++) {
            int32_t count = json_matcher_allowed(matcher, vocab, allowed);
            int32_t expected_count = 0;
            for (int t = 0; t < TOKENS; t++) {
                json_matcher_copy(probe, matcher);
                bool fits = lengths[t] > 0 && json_matcher_feed(probe, pieces[t], lengths[t]);
                expected_count += fits;
                CHECK_MSG(allowed[t] == fits, "document %zu at byte %zu: token %d '%s' mask %d, feed %d", d, at, t,
                          pieces[t], allowed[t], fits);
            }
            CHECK_MSG(count == expected_count, "document %zu at byte %zu: %d allowed, %d fit", d, at, count,
                      expected_count);
            states++;
            if (at < length)
                CHECK_MSG(json_matcher_feed(matcher, text + at, 1), "document %zu: byte %zu refused", d, at);
        }
        CHECK_MSG(json_matcher_complete(matcher), "document %zu incomplete", d);
        json_matcher_free(probe);
        json_matcher_free(matcher);
        json_grammar_free(grammar);
    }
    CHECK_MSG(states == expected_states && states > 250, "%zu states", states);
    json_vocab_free(vocab);
}

/* ---- random writers against a validator ---- */

static const cJSON *member(const cJSON *object, const char *name)
{
    return cJSON_IsObject(object) ? cJSON_GetObjectItemCaseSensitive(object, name) : NULL;
}

static bool has_type(const cJSON *value, const char *type)
{
    if (strcmp(type, "object") == 0)
        return cJSON_IsObject(value);
    if (strcmp(type, "array") == 0)
        return cJSON_IsArray(value);
    if (strcmp(type, "string") == 0)
        return cJSON_IsString(value);
    if (strcmp(type, "number") == 0)
        return cJSON_IsNumber(value);
    if (strcmp(type, "integer") == 0)
        return cJSON_IsNumber(value) && value->valuedouble == (double)(long long)value->valuedouble;
    if (strcmp(type, "boolean") == 0)
        return cJSON_IsBool(value);
    return strcmp(type, "null") == 0 && cJSON_IsNull(value);
}

/* Code points of a decoded string. */
static int characters_of(const char *text)
{
    int count = 0;
    for (const unsigned char *p = (const unsigned char *)text; *p; p++)
        count += (*p & 0xc0) != 0x80;
    return count;
}

/* JSON Schema's meaning of the supported keywords, written from the specification (with the documented
 * rules: additionalProperties absent beside properties is false, oneOf is read as anyOf). */
static bool schema_valid(const cJSON *root, const cJSON *schema, const cJSON *value)
{
    if (!schema || cJSON_IsBool(schema))
        return !schema || cJSON_IsTrue(schema);
    const cJSON *ref = member(schema, "$ref"), *list;
    if (ref) {
        if (strcmp(ref->valuestring, "#") == 0)
            return schema_valid(root, root, value);
        const char *container = strncmp(ref->valuestring, "#/$defs/", 8) == 0 ? "$defs" : "definitions";
        return schema_valid(root, member(member(root, container), strrchr(ref->valuestring, '/') + 1), value);
    }
    if ((list = member(schema, "anyOf")) || (list = member(schema, "oneOf"))) {
        for (const cJSON *alternative = list->child; alternative; alternative = alternative->next)
            if (schema_valid(root, alternative, value))
                return true;
        return false;
    }
    if ((list = member(schema, "allOf")))
        for (const cJSON *part = list->child; part; part = part->next)
            if (!schema_valid(root, part, value))
                return false;
    if ((list = member(schema, "enum"))) {
        bool found = false;
        for (const cJSON *option = list->child; option; option = option->next)
            found = found || cJSON_Compare(value, option, true);
        if (!found)
            return false;
    }
    const cJSON *constant = member(schema, "const");
    if (constant && !cJSON_Compare(value, constant, true))
        return false;
    const cJSON *type = member(schema, "type");
    if (cJSON_IsString(type) && !has_type(value, type->valuestring))
        return false;
    if (cJSON_IsArray(type)) {
        bool typed = false;
        for (const cJSON *name = type->child; name; name = name->next)
            typed = typed || has_type(value, name->valuestring);
        if (!typed)
            return false;
    }
    if (cJSON_IsObject(value)) {
        const cJSON *properties = member(schema, "properties"), *additional = member(schema, "additionalProperties");
        for (const cJSON *field = value->child; field; field = field->next) {
            const cJSON *property = member(properties, field->string);
            if (property) {
                for (const cJSON *other = field->next; other; other = other->next)
                    if (strcmp(other->string, field->string) == 0)
                        return false; /* a listed key twice */
                if (!schema_valid(root, property, field))
                    return false;
            } else if (additional ? !schema_valid(root, additional, field) : properties != NULL) {
                return false;
            }
        }
        for (const cJSON *name = member(schema, "required") ? member(schema, "required")->child : NULL; name;
             name = name->next)
            if (!member(value, name->valuestring))
                return false;
    }
    if (cJSON_IsArray(value)) {
        const cJSON *items = member(schema, "items");
        const cJSON *low = member(schema, "minItems"), *high = member(schema, "maxItems");
        int size = cJSON_GetArraySize(value);
        if ((low && size < low->valueint) || (high && size > high->valueint))
            return false;
        for (const cJSON *item = value->child; item; item = item->next)
            if (items && !schema_valid(root, items, item))
                return false;
    }
    if (cJSON_IsString(value)) {
        const cJSON *low = member(schema, "minLength"), *high = member(schema, "maxLength");
        int length = characters_of(value->valuestring);
        if ((low && length < low->valueint) || (high && length > high->valueint))
            return false;
    }
    return true;
}

static uint32_t random_next(uint64_t *state)
{
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(*state >> 33);
}

/* Writers that pick any allowed token (and, after a while, tokens that close things) never reach a state with
 * nothing allowed before the value is complete, and every complete value parses and meets the schema. */
static void check_random_writers(void)
{
    enum { WORDS = sizeof vocabulary / sizeof vocabulary[0], BYTES = 0x7f - 0x20, TOKENS = WORDS + BYTES };
    const char *pieces[TOKENS];
    size_t lengths[TOKENS];
    char bytes[BYTES][2];
    for (int i = 0; i < WORDS; i++) {
        pieces[i] = vocabulary[i];
        lengths[i] = strlen(vocabulary[i]);
    }
    for (int i = 0; i < BYTES; i++) {
        bytes[i][0] = (char)(0x20 + i);
        bytes[i][1] = '\0';
        pieces[WORDS + i] = bytes[i];
        lengths[WORDS + i] = 1;
    }
    json_vocab *vocab = json_vocab_create(pieces, lengths, TOKENS, NULL);
    static const char *const closers[] = {"}", "]", "\"", ":", "0", "null"};
    static const char *const schemas[] = {
        NULL,
        "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"maxLength\":3},\"b\":{\"type\":\"integer\"},"
        "\"c\":{\"type\":\"boolean\"}},\"required\":[\"a\",\"b\"]}",
        "{\"anyOf\":[{\"type\":\"object\",\"properties\":{\"kind\":{\"const\":\"circle\"},\"r\":{\"type\":\"number\"}},"
        "\"required\":[\"kind\",\"r\"]},{\"type\":\"object\",\"properties\":{\"kind\":{\"enum\":[\"square\",\"sq\"]},"
        "\"side\":{\"type\":[\"number\",\"null\"]}},\"required\":[\"kind\",\"side\"]}]}",
        "{\"$defs\":{\"Node\":{\"type\":\"object\",\"properties\":{\"value\":{\"type\":\"integer\"},"
        "\"children\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/Node\"},\"maxItems\":2}},"
        "\"required\":[\"value\"]}},\"$ref\":\"#/$defs/Node\"}",
        "{\"type\":\"array\",\"items\":{\"enum\":[1,12,\"red\",\"reddish\",null,[1],{\"k\":true}]},\"minItems\":2,"
        "\"maxItems\":4}",
        "{\"type\":\"object\",\"properties\":{\"n\":{\"$ref\":\"#\"},\"s\":{\"type\":\"string\",\"minLength\":2,"
        "\"maxLength\":4}},\"additionalProperties\":{\"type\":\"number\"}}",
        "{\"type\":\"object\",\"required\":[\"x\"],\"additionalProperties\":{\"type\":\"array\",\"maxItems\":1}}",
        "{\"oneOf\":[{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
        "\"age\":{\"type\":\"integer\"}},"
        "\"required\":[\"name\",\"age\"]},{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
        "\"email\":{\"type\":\"string\",\"maxLength\":2}},\"required\":[\"name\",\"email\"]},{\"type\":\"string\"}]}",
    };
    uint8_t allowed[TOKENS];
    uint64_t state = 7;
    int completed = 0;
    for (size_t k = 0; k < sizeof schemas / sizeof schemas[0]; k++) {
        json_grammar *grammar = grammar_of(schemas[k]);
        cJSON *schema = schemas[k] ? cJSON_Parse(schemas[k]) : cJSON_Parse("{\"type\":\"object\"}");
        json_matcher *matcher = json_matcher_create(grammar, NULL);
        for (int run = 0; run < (TEST_SANITIZED ? 10 : 40); run++) {
            char text[4096];
            size_t used = 0;
            json_matcher_reset(matcher);
            for (int step = 0; step < 600; step++) {
                int32_t count = json_matcher_allowed(matcher, vocab, allowed);
                bool complete = json_matcher_complete(matcher);
                if (count == 0) {
                    CHECK_MSG(complete, "schema %zu: a dead end after %.*s", k, (int)used, text);
                    break;
                }
                if (complete && (random_next(&state) % 3 == 0 || step > 200))
                    break;
                int32_t chosen = -1;
                for (size_t c = 0; step > 100 && c < sizeof closers / sizeof closers[0] && chosen < 0; c++)
                    for (int t = 0; t < TOKENS && chosen < 0; t++)
                        if (allowed[t] && strcmp(pieces[t], closers[c]) == 0)
                            chosen = t;
                if (chosen < 0) {
                    int32_t pick = (int32_t)(random_next(&state) % (uint32_t)count);
                    for (int t = 0; t < TOKENS && chosen < 0; t++)
                        if (allowed[t] && pick-- == 0)
                            chosen = t;
                }
                if (used + lengths[chosen] >= sizeof text)
                    break;
                CHECK_MSG(json_matcher_feed(matcher, pieces[chosen], lengths[chosen]),
                          "schema %zu: allowed '%s' refused", k, pieces[chosen]);
                memcpy(text + used, pieces[chosen], lengths[chosen]);
                used += lengths[chosen];
            }
            if (!json_matcher_complete(matcher))
                continue;
            completed++;
            cJSON *value = cJSON_ParseWithLength(text, used);
            CHECK_MSG(value != NULL, "schema %zu: '%.*s' does not parse", k, (int)used, text);
            CHECK_MSG(value && schema_valid(schema, schema, value), "schema %zu: '%.*s' does not meet it", k,
                      (int)used, text);
            cJSON_Delete(value);
        }
        json_matcher_free(matcher);
        json_grammar_free(grammar);
        cJSON_Delete(schema);
    }
    CHECK_MSG(completed > (TEST_SANITIZED ? 40 : 160), "%d values completed", completed);
    json_vocab_free(vocab);
}

/* A token longer than the trie goes: allowed where it is plain string text, nowhere else. */
static void check_long_token(void)
{
    char *long_piece = malloc(601);
    memset(long_piece, 'a', 600);
    long_piece[600] = '\0';
    const char *pieces[] = {"{\"", long_piece, "\"", "{"};
    size_t lengths[] = {2, 600, 1, 1};
    json_vocab *vocab = json_vocab_create(pieces, lengths, 4, NULL);
    json_grammar *grammar = grammar_of(NULL);
    json_matcher *matcher = json_matcher_create(grammar, NULL);
    uint8_t allowed[4];
    CHECK(json_matcher_allowed(matcher, vocab, allowed) == 2 && allowed[0] && allowed[3] && !allowed[1]);
    CHECK(json_matcher_feed(matcher, "{\"", 2));
    /* In a key every piece fits: '{' is text, "{\"" text and the closing quote. */
    CHECK(json_matcher_allowed(matcher, vocab, allowed) == 4 && allowed[1]);
    CHECK(json_matcher_feed(matcher, long_piece, 600));

    json_grammar *other = grammar_of("{\"type\":\"string\"}");
    json_matcher *stranger = json_matcher_create(other, NULL);
    CHECK(!json_matcher_copy(stranger, matcher)); /* another grammar */
    CHECK(json_matcher_feed(stranger, "\"", 1));
    json_matcher_free(stranger);
    json_grammar_free(other);
    json_matcher_free(matcher);
    json_grammar_free(grammar);
    json_vocab_free(vocab);
    free(long_piece);
}

int main(void)
{
    check_strings();
    check_numbers();
    check_whitespace();
    check_objects();
    check_arrays();
    check_literals();
    check_alternatives();
    check_refs();
    check_depth();
    check_refusals();
    check_mask();
    check_long_token();
    check_random_writers();
    return test_finish();
}
