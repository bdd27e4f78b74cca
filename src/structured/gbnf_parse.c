/* GBNF text to a compiled grammar: the reader (rules, alternatives, items,
 * escapes, classes, repetitions, with llama.cpp's line rules), then the
 * checks that need the whole grammar (undefined rules, root, left
 * recursion) and the grammar's start. Owns the grammar it returns; its own
 * buffers are freed before it returns. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "base/utf8.h"
#include "structured/gbnf_internal.h"

#define NONE UINT32_MAX
/* Parentheses inside one another: the reader recurses once per level. */
#define GROUP_NESTING_MAX 256
/* Rule names a left-recursion message lists before "...". */
#define CYCLE_NAMES_SHOWN 8

typedef struct rule_entry {
    uint32_t name, name_length; /* in the text; length 0: a group or a repetition's body */
    uint32_t owner;             /* the named rule whose body holds it (itself for a named rule) */
    uint32_t first, count;      /* alternatives */
    uint32_t defined_at;        /* offset of the definition's name; NONE: not defined (yet) */
    uint32_t referenced_at;     /* offset of the first reference; NONE: none */
} rule_entry;

typedef struct parser {
    const char *text;
    uint32_t length, at;
    bmoe_error *err;
    bool failed;
    gbnf_element *elements; /* the finished alternatives, each ending with GBNF_END */
    uint32_t element_count, element_capacity;
    gbnf_element *items; /* the items of the sequences being read, innermost last */
    uint32_t item_count, item_capacity;
    uint32_t *alternatives; /* each rule's alternatives, contiguous */
    uint32_t alternative_count, alternative_capacity;
    uint32_t *open; /* the alternatives of the rules being read, innermost last */
    uint32_t open_count, open_capacity;
    rule_entry *rules;
    uint32_t rule_count, rule_capacity;
    gbnf_class *classes;
    uint32_t class_count, class_capacity;
    gbnf_range *ranges;
    uint32_t range_count, range_capacity;
    gbnf_range *pending; /* the class being read */
    uint32_t pending_count, pending_capacity;
    uint32_t *names; /* named rules by name: index + 1, 0 empty */
    uint32_t name_mask;
    uint32_t any_class; /* '.', once read */
} parser;

/* ---- errors ---- */

static void place_of(const parser *p, uint32_t offset, uint32_t *line, uint32_t *column)
{
    *line = 1;
    *column = 1;
    for (uint32_t i = 0; i < offset && i < p->length; i++) {
        unsigned char byte = (unsigned char)p->text[i];
        bool crlf = byte == '\r' && i + 1 < p->length && p->text[i + 1] == '\n';
        if (byte == '\n' || (byte == '\r' && !crlf)) {
            (*line)++;
            *column = 1;
        } else if (!crlf && (byte & 0xc0) != 0x80) {
            (*column)++;
        }
    }
}

static bool fail_at(parser *p, uint32_t offset, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static bool fail_at(parser *p, uint32_t offset, const char *fmt, ...)
{
    if (p->failed)
        return false;
    p->failed = true;
    char message[BMOE_ERROR_MAX];
    va_list args;
    va_start(args, fmt);
    vsnprintf(message, sizeof message, fmt, args);
    va_end(args);
    uint32_t line, column;
    place_of(p, offset, &line, &column);
    error_set_status(p->err, BMOE_ERR_INVALID_ARGUMENT, "gbnf: line %u col %u: %s", line, column, message);
    return false;
}

static bool out_of_memory(parser *p)
{
    if (!p->failed)
        error_set_status(p->err, BMOE_ERR_OUT_OF_MEMORY, "gbnf: out of memory");
    p->failed = true;
    return false;
}

/* What is at offset, for a message: 'c', the end of the text, or a code point. */
static const char *shown(const parser *p, uint32_t offset, char *buffer, size_t size)
{
    if (offset >= p->length)
        return "the end of the text";
    unsigned char byte = (unsigned char)p->text[offset];
    if (byte >= 0x20 && byte < 0x7f)
        snprintf(buffer, size, "'%c'", byte);
    else if (byte < 0x80)
        snprintf(buffer, size, "byte 0x%02x", byte);
    else
        snprintf(buffer, size, "a non-ASCII character");
    return buffer;
}

/* For a '_' where a name ended: names do not take it. */
static const char *name_hint(const parser *p, uint32_t offset)
{
    return offset < p->length && p->text[offset] == '_' ? " (names are letters, digits and '-')" : "";
}

/* ---- growing arrays ---- */

static void *grown(parser *p, void *array, uint32_t *capacity, uint32_t count, size_t size)
{
    if (count < *capacity)
        return array;
    uint32_t wanted = *capacity ? *capacity * 2 : 64;
    void *bigger = realloc(array, (size_t)wanted * size);
    if (!bigger) {
        out_of_memory(p);
        return NULL;
    }
    *capacity = wanted;
    return bigger;
}

static bool add_element(parser *p, gbnf_element element)
{
    gbnf_element *elements = grown(p, p->elements, &p->element_capacity, p->element_count, sizeof *elements);
    if (!elements)
        return false;
    p->elements = elements;
    p->elements[p->element_count++] = element;
    return true;
}

static bool add_item(parser *p, gbnf_element item)
{
    gbnf_element *items = grown(p, p->items, &p->item_capacity, p->item_count, sizeof *items);
    if (!items)
        return false;
    p->items = items;
    p->items[p->item_count++] = item;
    return true;
}

static bool add_index(parser *p, uint32_t **array, uint32_t *count, uint32_t *capacity, uint32_t value)
{
    uint32_t *values = grown(p, *array, capacity, *count, sizeof *values);
    if (!values)
        return false;
    *array = values;
    values[(*count)++] = value;
    return true;
}

static bool add_range(parser *p, gbnf_range **array, uint32_t *count, uint32_t *capacity, gbnf_range range)
{
    gbnf_range *ranges = grown(p, *array, capacity, *count, sizeof *ranges);
    if (!ranges)
        return false;
    *array = ranges;
    ranges[(*count)++] = range;
    return true;
}

/* ---- rules by name ---- */

static uint32_t name_hash(const char *name, uint32_t length)
{
    return (uint32_t)fnv1a(FNV1A_START, name, length);
}

static bool same_name(const parser *p, const rule_entry *rule, const char *name, uint32_t length)
{
    return rule->name_length == length && memcmp(p->text + rule->name, name, length) == 0;
}

static uint32_t add_rule(parser *p, uint32_t name, uint32_t length, uint32_t owner)
{
    rule_entry *rules = grown(p, p->rules, &p->rule_capacity, p->rule_count, sizeof *rules);
    if (!rules)
        return NONE;
    p->rules = rules;
    uint32_t index = p->rule_count++;
    rules[index] = (rule_entry){name, length, owner == NONE ? index : owner, 0, 0, NONE, NONE};
    return index;
}

/* The rule named text[name, + length), made (undefined) on first sight; NONE when out of memory. */
static uint32_t rule_named(parser *p, uint32_t name, uint32_t length)
{
    const char *text = p->text + name;
    if (p->rule_count * 2 >= p->name_mask) {
        uint32_t size = p->name_mask ? (p->name_mask + 1) * 2 : 256;
        uint32_t *names = calloc(size, sizeof *names);
        if (!names) {
            out_of_memory(p);
            return NONE;
        }
        for (uint32_t slot = 0; p->names && slot <= p->name_mask; slot++) {
            uint32_t held = p->names[slot];
            if (held == 0)
                continue;
            const rule_entry *rule = &p->rules[held - 1];
            uint32_t at = name_hash(p->text + rule->name, rule->name_length) & (size - 1);
            while (names[at])
                at = (at + 1) & (size - 1);
            names[at] = held;
        }
        free(p->names);
        p->names = names;
        p->name_mask = size - 1;
    }
    uint32_t at = name_hash(text, length) & p->name_mask;
    for (; p->names[at]; at = (at + 1) & p->name_mask)
        if (same_name(p, &p->rules[p->names[at] - 1], text, length))
            return p->names[at] - 1;
    uint32_t index = add_rule(p, name, length, NONE);
    if (index != NONE)
        p->names[at] = index + 1;
    return index;
}

static bool is_name_byte(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

static uint32_t name_end(const parser *p, uint32_t at)
{
    while (at < p->length && is_name_byte(p->text[at]))
        at++;
    return at;
}

/* ---- characters ---- */

/* Spaces, tabs and comments; line breaks too when newlines. */
static void skip_space(parser *p, bool newlines)
{
    while (p->at < p->length) {
        char c = p->text[p->at];
        if (c == ' ' || c == '\t' || (newlines && (c == '\r' || c == '\n'))) {
            p->at++;
        } else if (c == '#') {
            while (p->at < p->length && p->text[p->at] != '\r' && p->text[p->at] != '\n')
                p->at++;
        } else {
            break;
        }
    }
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static bool is_surrogate(uint32_t code_point)
{
    return code_point >= 0xd800 && code_point <= 0xdfff;
}

/* One character of a literal or a class: an escape or a raw character (the text is valid UTF-8). */
static bool read_character(parser *p, uint32_t *code_point)
{
    uint32_t start = p->at;
    const unsigned char *bytes = (const unsigned char *)p->text;
    static const unsigned char lead_bits[5] = {0, 0x7f, 0x1f, 0x0f, 0x07}; /* by sequence length */
    if (bytes[start] != '\\') {
        size_t length = 1;
        utf8_scan(bytes + start, p->length - start, &length);
        uint32_t value = bytes[start] & lead_bits[length];
        for (size_t i = 1; i < length; i++)
            value = value << 6 | (bytes[start + i] & 0x3f);
        *code_point = value;
        p->at += (uint32_t)length;
        return true;
    }
    if (start + 1 >= p->length)
        return fail_at(p, start, "'\\' at the end of the text");
    char kind = p->text[start + 1];
    int digits = kind == 'x' ? 2 : kind == 'u' ? 4 : kind == 'U' ? 8 : 0;
    if (digits > 0) {
        uint32_t value = 0;
        for (int i = 0; i < digits; i++) {
            uint32_t at = start + 2 + (uint32_t)i;
            int digit = at < p->length ? hex_value(p->text[at]) : -1;
            if (digit < 0)
                return fail_at(p, start, "\\%c needs %d hex digits", kind, digits);
            value = value << 4 | (uint32_t)digit;
        }
        if (value > GBNF_CODE_POINT_MAX)
            return fail_at(p, start, "\\%c%.*s is above U+10FFFF", kind, digits, p->text + start + 2);
        p->at += 2 + (uint32_t)digits;
        *code_point = value;
        return true;
    }
    switch (kind) {
    case 'n': *code_point = '\n'; break;
    case 'r': *code_point = '\r'; break;
    case 't': *code_point = '\t'; break;
    case '\\': case '"': case '[': case ']': case '-': case '/': *code_point = (uint32_t)kind; break;
    default: {
        char buffer[32];
        return fail_at(p, start, "unknown escape: '\\' then %s", shown(p, start + 1, buffer, sizeof buffer));
    }
    }
    p->at += 2;
    return true;
}

static bool add_code_point(parser *p, uint32_t code_point)
{
    unsigned char bytes[4];
    int length;
    if (code_point < 0x80) {
        bytes[0] = (unsigned char)code_point;
        length = 1;
    } else if (code_point < 0x800) {
        bytes[0] = (unsigned char)(0xc0 | code_point >> 6);
        bytes[1] = (unsigned char)(0x80 | (code_point & 0x3f));
        length = 2;
    } else if (code_point < 0x10000) {
        bytes[0] = (unsigned char)(0xe0 | code_point >> 12);
        bytes[1] = (unsigned char)(0x80 | ((code_point >> 6) & 0x3f));
        bytes[2] = (unsigned char)(0x80 | (code_point & 0x3f));
        length = 3;
    } else {
        bytes[0] = (unsigned char)(0xf0 | code_point >> 18);
        bytes[1] = (unsigned char)(0x80 | ((code_point >> 12) & 0x3f));
        bytes[2] = (unsigned char)(0x80 | ((code_point >> 6) & 0x3f));
        bytes[3] = (unsigned char)(0x80 | (code_point & 0x3f));
        length = 4;
    }
    for (int i = 0; i < length; i++)
        if (!add_item(p, (gbnf_element){.kind = GBNF_BYTE, .byte = bytes[i]}))
            return false;
    return true;
}

static bool read_literal(parser *p)
{
    uint32_t open = p->at++;
    for (;;) {
        if (p->at >= p->length)
            return fail_at(p, open, "unterminated string literal: no closing '\"'");
        if (p->text[p->at] == '"') {
            p->at++;
            return true;
        }
        uint32_t start = p->at, code_point;
        if (!read_character(p, &code_point))
            return false;
        if (is_surrogate(code_point))
            return fail_at(p, start, "U+%04X is a surrogate, which UTF-8 cannot carry", code_point);
        if (!add_code_point(p, code_point))
            return false;
    }
}

static int compare_ranges(const void *a, const void *b)
{
    const gbnf_range *x = a, *y = b;
    return (x->first > y->first) - (x->first < y->first);
}

static bool class_add_range(parser *p, gbnf_class *class, gbnf_range range)
{
    if (!add_range(p, &p->ranges, &p->range_count, &p->range_capacity, range))
        return false;
    class->count++;
    for (uint32_t c = range.first; c <= range.last && c < 128; c++)
        class->ascii[c / 32] |= 1u << (c % 32);
    return true;
}

/* The class of the pending ranges (complemented when negated); NONE after an error. */
static uint32_t add_class(parser *p, bool negated, uint32_t open)
{
    qsort(p->pending, p->pending_count, sizeof *p->pending, compare_ranges);
    uint32_t merged = 0;
    for (uint32_t i = 0; i < p->pending_count; i++) {
        gbnf_range range = p->pending[i];
        if (merged > 0 && range.first <= p->pending[merged - 1].last + 1) {
            if (range.last > p->pending[merged - 1].last)
                p->pending[merged - 1].last = range.last;
        } else {
            p->pending[merged++] = range;
        }
    }
    gbnf_class class = {.first = p->range_count};
    if (negated) {
        uint32_t next = 0; /* the first code point no range covers yet */
        for (uint32_t i = 0; i < merged; i++) {
            if (p->pending[i].first > next && !class_add_range(p, &class, (gbnf_range){next, p->pending[i].first - 1}))
                return NONE;
            next = p->pending[i].last + 1;
        }
        if (next <= GBNF_CODE_POINT_MAX && !class_add_range(p, &class, (gbnf_range){next, GBNF_CODE_POINT_MAX}))
            return NONE;
    } else {
        for (uint32_t i = 0; i < merged; i++)
            if (!class_add_range(p, &class, p->pending[i]))
                return NONE;
    }
    bool matches = false; /* a character UTF-8 can carry: not only surrogates */
    for (uint32_t i = 0; i < class.count; i++) {
        const gbnf_range *range = &p->ranges[class.first + i];
        matches |= range->first < 0xd800 || range->last > 0xdfff;
    }
    if (!matches) {
        fail_at(p, open, "the character class matches no character");
        return NONE;
    }
    gbnf_class *classes = grown(p, p->classes, &p->class_capacity, p->class_count, sizeof *classes);
    if (!classes)
        return NONE;
    p->classes = classes;
    classes[p->class_count] = class;
    return p->class_count++;
}

static uint32_t read_class(parser *p)
{
    uint32_t open = p->at++;
    bool negated = p->at < p->length && p->text[p->at] == '^';
    p->at += negated;
    p->pending_count = 0;
    for (;;) {
        if (p->at >= p->length) {
            fail_at(p, open, "unterminated character class: no closing ']'");
            return NONE;
        }
        if (p->text[p->at] == ']')
            break;
        uint32_t start = p->at, first, last;
        if (!read_character(p, &first))
            return NONE;
        last = first;
        if (p->at + 1 < p->length && p->text[p->at] == '-' && p->text[p->at + 1] != ']') {
            p->at++;
            if (!read_character(p, &last))
                return NONE;
            if (last < first) {
                fail_at(p, start, "the range U+%04X-U+%04X is reversed", first, last);
                return NONE;
            }
        } else if (is_surrogate(first)) {
            fail_at(p, start, "U+%04X is a surrogate, which UTF-8 cannot carry", first);
            return NONE;
        }
        if (!add_range(p, &p->pending, &p->pending_count, &p->pending_capacity, (gbnf_range){first, last}))
            return NONE;
    }
    p->at++;
    if (p->pending_count == 0) {
        fail_at(p, open, "an empty character class %s", negated ? "[^]" : "[]");
        return NONE;
    }
    return add_class(p, negated, open);
}

/* ---- sequences, alternatives, repetitions ---- */

static bool read_alternates(parser *p, uint32_t rule, bool nested, uint32_t nesting);

/* A bound of a repetition: digits, at most GBNF_REPEAT_MAX. */
static bool read_bound(parser *p, uint32_t *bound)
{
    uint32_t start = p->at;
    if (p->at >= p->length || p->text[p->at] < '0' || p->text[p->at] > '9') {
        char buffer[32];
        return fail_at(p, p->at, "expected a number in the repetition, found %s",
                       shown(p, p->at, buffer, sizeof buffer));
    }
    uint32_t value = 0;
    for (; p->at < p->length && p->text[p->at] >= '0' && p->text[p->at] <= '9'; p->at++)
        if (value <= GBNF_REPEAT_MAX)
            value = value * 10 + (uint32_t)(p->text[p->at] - '0');
    if (value > GBNF_REPEAT_MAX)
        return fail_at(p, start, "a repetition bound above %u", GBNF_REPEAT_MAX);
    *bound = value;
    return true;
}

static bool read_repetition(parser *p, bool nested, uint32_t *min, uint32_t *max)
{
    uint32_t start = p->at;
    char c = p->text[p->at++];
    if (c != '{') {
        *min = c == '+' ? 1 : 0;
        *max = c == '?' ? 1 : GBNF_UNBOUNDED;
        return true;
    }
    skip_space(p, nested);
    if (!read_bound(p, min))
        return false;
    skip_space(p, nested);
    *max = *min;
    bool comma = p->at < p->length && p->text[p->at] == ',';
    if (comma) {
        p->at++;
        skip_space(p, nested);
        *max = GBNF_UNBOUNDED;
        if (p->at < p->length && p->text[p->at] >= '0' && p->text[p->at] <= '9') {
            if (!read_bound(p, max))
                return false;
            skip_space(p, nested);
        }
    }
    if (p->at >= p->length || p->text[p->at] != '}') {
        char buffer[32];
        return fail_at(p, p->at, "expected %s in the repetition, found %s", comma ? "'}'" : "',' or '}'",
                       shown(p, p->at, buffer, sizeof buffer));
    }
    p->at++;
    if (*max < *min)
        return fail_at(p, start, "the repetition {%u,%u} has its maximum below its minimum", *min, *max);
    return true;
}

/* Makes the items from item_start on one repeated element. */
static bool repeat_items(parser *p, uint32_t item_start, uint32_t min, uint32_t max, uint32_t owner)
{
    if (min == 1 && max == 1)
        return true;
    gbnf_element *item = &p->items[item_start];
    uint32_t count = p->item_count - item_start;
    if (count == 1 && item->kind == GBNF_BYTE && item->byte < 0x80) {
        p->pending_count = 0;
        if (!add_range(p, &p->pending, &p->pending_count, &p->pending_capacity,
                       (gbnf_range){item->byte, item->byte}))
            return false;
        uint32_t class = add_class(p, false, p->at);
        if (class == NONE)
            return false;
        p->items[item_start] = (gbnf_element){.kind = GBNF_CLASS, .target = class};
        item = &p->items[item_start];
    }
    if (count == 1 && (item->kind == GBNF_CLASS || item->kind == GBNF_RULE)) {
        item->kind = item->kind == GBNF_CLASS ? GBNF_REPEAT_CLASS : GBNF_REPEAT;
        item->min = min;
        item->max = max;
        return true;
    }
    /* A literal of several bytes, an empty one or a repetition: its own rule of one alternative. */
    uint32_t body = add_rule(p, 0, 0, owner);
    if (body == NONE || !add_index(p, &p->alternatives, &p->alternative_count, &p->alternative_capacity,
                                   p->element_count))
        return false;
    p->rules[body].first = p->alternative_count - 1;
    p->rules[body].count = 1;
    for (uint32_t i = item_start; i < p->item_count; i++)
        if (!add_element(p, p->items[i]))
            return false;
    if (!add_element(p, (gbnf_element){.kind = GBNF_END}))
        return false;
    p->item_count = item_start;
    return add_item(p, (gbnf_element){.kind = GBNF_REPEAT, .target = body, .min = min, .max = max});
}

static bool read_sequence(parser *p, uint32_t owner, bool nested, uint32_t nesting)
{
    uint32_t item_start = NONE; /* where the last item's elements start: what a repetition repeats */
    while (!p->failed && p->at < p->length) {
        uint32_t here = p->at;
        char c = p->text[here];
        if (c == '"') {
            item_start = p->item_count;
            read_literal(p);
        } else if (c == '[' || c == '.') {
            uint32_t class;
            if (c == '.') {
                p->at++;
                if (p->any_class == NONE) {
                    p->pending_count = 0;
                    if (add_range(p, &p->pending, &p->pending_count, &p->pending_capacity,
                                  (gbnf_range){0, GBNF_CODE_POINT_MAX}))
                        p->any_class = add_class(p, false, here);
                }
                class = p->any_class;
            } else {
                class = read_class(p);
            }
            item_start = p->item_count;
            if (class != NONE)
                add_item(p, (gbnf_element){.kind = GBNF_CLASS, .target = class});
        } else if (is_name_byte(c)) {
            uint32_t end = name_end(p, here);
            uint32_t rule = rule_named(p, here, end - here);
            p->at = end;
            if (rule == NONE)
                return false;
            if (p->rules[rule].referenced_at == NONE)
                p->rules[rule].referenced_at = here;
            item_start = p->item_count;
            add_item(p, (gbnf_element){.kind = GBNF_RULE, .target = rule});
        } else if (c == '(') {
            if (nesting >= GROUP_NESTING_MAX)
                return fail_at(p, here, "groups nested more than %d deep", GROUP_NESTING_MAX);
            p->at++;
            skip_space(p, true);
            uint32_t group = add_rule(p, 0, 0, owner);
            if (group == NONE || !read_alternates(p, group, true, nesting + 1))
                return false;
            if (p->at >= p->length)
                return fail_at(p, here, "unterminated group: no ')' for this '('");
            if (p->text[p->at] != ')') {
                char buffer[32];
                uint32_t line, column;
                place_of(p, here, &line, &column);
                return fail_at(p, p->at, "expected ')' closing the '(' of line %u col %u, found %s", line, column,
                               shown(p, p->at, buffer, sizeof buffer));
            }
            p->at++;
            item_start = p->item_count;
            add_item(p, (gbnf_element){.kind = GBNF_RULE, .target = group});
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            if (item_start == NONE)
                return fail_at(p, here, "'%c' with nothing before it to repeat", c);
            uint32_t min, max;
            if (read_repetition(p, nested, &min, &max))
                repeat_items(p, item_start, min, max, owner);
        } else if (c == '<') {
            return fail_at(p, here, "token references (<...>) are not supported");
        } else if (c == '!') {
            return fail_at(p, here, "token negation (!) is not supported");
        } else {
            break;
        }
        skip_space(p, nested);
    }
    return !p->failed;
}

/* Alternatives separated by '|' into rule; a newline may follow each '|'. */
static bool read_alternates(parser *p, uint32_t rule, bool nested, uint32_t nesting)
{
    uint32_t open_start = p->open_count;
    for (;;) {
        uint32_t sequence_start = p->item_count;
        if (!read_sequence(p, p->rules[rule].owner, nested, nesting) ||
            !add_index(p, &p->open, &p->open_count, &p->open_capacity, p->element_count))
            return false;
        for (uint32_t i = sequence_start; i < p->item_count; i++)
            if (!add_element(p, p->items[i]))
                return false;
        if (!add_element(p, (gbnf_element){.kind = GBNF_END}))
            return false;
        p->item_count = sequence_start;
        if (p->at >= p->length || p->text[p->at] != '|')
            break;
        p->at++;
        skip_space(p, true);
    }
    p->rules[rule].first = p->alternative_count;
    p->rules[rule].count = p->open_count - open_start;
    for (uint32_t i = open_start; i < p->open_count; i++)
        if (!add_index(p, &p->alternatives, &p->alternative_count, &p->alternative_capacity, p->open[i]))
            return false;
    p->open_count = open_start;
    return true;
}

static bool read_rule(parser *p)
{
    uint32_t start = p->at;
    char buffer[32];
    uint32_t end = name_end(p, start);
    if (end == start)
        return fail_at(p, start, "expected a rule name, found %s", shown(p, start, buffer, sizeof buffer));
    p->at = end;
    skip_space(p, false);
    if (p->length - p->at < 3 || memcmp(p->text + p->at, "::=", 3) != 0)
        return fail_at(p, p->at, "expected '::=' after the rule name '%.*s', found %s%s", (int)(end - start),
                       p->text + start, shown(p, p->at, buffer, sizeof buffer), name_hint(p, p->at));
    p->at += 3;
    skip_space(p, true);
    uint32_t rule = rule_named(p, start, end - start);
    if (rule == NONE)
        return false;
    if (p->rules[rule].defined_at != NONE) {
        uint32_t line, column;
        place_of(p, p->rules[rule].defined_at, &line, &column);
        return fail_at(p, start, "rule '%.*s' is defined twice (first at line %u col %u)", (int)(end - start),
                       p->text + start, line, column);
    }
    p->rules[rule].defined_at = start;
    if (!read_alternates(p, rule, false, 0))
        return false;
    if (p->at < p->length) {
        char c = p->text[p->at];
        if (c == '\r' || c == '\n')
            p->at += c == '\r' && p->at + 1 < p->length && p->text[p->at + 1] == '\n' ? 2 : 1;
        else if (c == ')')
            return fail_at(p, p->at, "')' without a '(' before it");
        else
            return fail_at(p, p->at, "expected the end of the rule (a line break), found %s%s",
                           shown(p, p->at, buffer, sizeof buffer), name_hint(p, p->at));
    }
    skip_space(p, true);
    return true;
}

/* ---- whole-grammar checks ---- */

/* Whether the element must take something: a byte, a class, or a rule (or repetition) that cannot be empty;
 * *waits_on is the rule whose nullability decides it, NONE when none does. */
static bool element_takes(const gbnf_element *element, const bool *nullable, uint32_t *waits_on)
{
    *waits_on = NONE;
    switch (element->kind) {
    case GBNF_RULE:
        *waits_on = element->target;
        return !nullable[element->target];
    case GBNF_REPEAT:
        if (element->min == 0 || element->max == 0)
            return false;
        *waits_on = element->target;
        return !nullable[element->target];
    case GBNF_REPEAT_CLASS:
        return element->min > 0;
    default:
        return true;
    }
}

/* Which rules can match the empty text: a worklist over the alternatives, each waiting on the rules it
 * references until those are known to be nullable. */
static bool find_nullable(parser *p, bool *nullable)
{
    uint32_t alternatives = p->alternative_count, rules = p->rule_count, waits = 0;
    for (uint32_t a = 0; a < alternatives; a++)
        for (const gbnf_element *element = &p->elements[p->alternatives[a]]; element->kind != GBNF_END; element++)
            waits += element->kind == GBNF_RULE || element->kind == GBNF_REPEAT;
    /* per alternative: its rule, its waits left (NONE: it takes a byte); per rule: where its waiters start */
    uint32_t *owner = malloc(((size_t)alternatives + 1) * sizeof *owner);
    uint32_t *pending = calloc((size_t)alternatives + 1, sizeof *pending);
    uint32_t *offsets = calloc((size_t)rules + 2, sizeof *offsets);
    uint32_t *cursor = malloc(((size_t)rules + 1) * sizeof *cursor);
    uint32_t *waiters = malloc(((size_t)waits + 1) * sizeof *waiters);
    uint32_t *queue = malloc(((size_t)rules + 1) * sizeof *queue);
    bool ok = owner && pending && offsets && cursor && waiters && queue;
    if (ok) {
        for (uint32_t r = 0; r < rules; r++)
            for (uint32_t a = p->rules[r].first; a < p->rules[r].first + p->rules[r].count; a++)
                owner[a] = r;
        for (uint32_t a = 0; a < alternatives; a++) {
            for (const gbnf_element *element = &p->elements[p->alternatives[a]]; element->kind != GBNF_END;
                 element++) {
                uint32_t waits_on;
                bool takes = element_takes(element, nullable, &waits_on);
                if (waits_on != NONE) {
                    offsets[waits_on + 1]++;
                    pending[a] += pending[a] != NONE;
                } else if (takes) {
                    pending[a] = NONE;
                }
            }
        }
        for (uint32_t r = 0; r < rules; r++) {
            offsets[r + 1] += offsets[r];
            cursor[r] = offsets[r];
        }
        for (uint32_t a = 0; a < alternatives; a++) {
            for (const gbnf_element *element = &p->elements[p->alternatives[a]]; element->kind != GBNF_END;
                 element++) {
                uint32_t waits_on;
                element_takes(element, nullable, &waits_on);
                if (waits_on != NONE)
                    waiters[cursor[waits_on]++] = a;
            }
        }
        uint32_t queued = 0, done = 0;
        for (uint32_t a = 0; a < alternatives; a++) {
            if (pending[a] == 0 && !nullable[owner[a]]) {
                nullable[owner[a]] = true;
                queue[queued++] = owner[a];
            }
        }
        while (done < queued) {
            uint32_t rule = queue[done++];
            for (uint32_t w = offsets[rule]; w < offsets[rule + 1]; w++) {
                uint32_t a = waiters[w];
                if (pending[a] == NONE || --pending[a] > 0 || nullable[owner[a]])
                    continue;
                nullable[owner[a]] = true;
                queue[queued++] = owner[a];
            }
        }
    }
    free(owner);
    free(pending);
    free(offsets);
    free(cursor);
    free(waiters);
    free(queue);
    return ok || out_of_memory(p);
}

/* The rules each rule can enter before taking a byte: what follows only nullable elements in an alternative. */
static bool left_edges(parser *p, const bool *nullable, uint32_t **offsets_out, uint32_t **targets_out)
{
    uint32_t rules = p->rule_count;
    uint32_t *offsets = calloc((size_t)rules + 1, sizeof *offsets);
    uint32_t *targets = NULL;
    for (int pass = 0; offsets && pass < 2; pass++) {
        uint32_t count = 0;
        for (uint32_t r = 0; r < rules; r++) {
            if (pass == 1)
                offsets[r] = count;
            for (uint32_t a = p->rules[r].first; a < p->rules[r].first + p->rules[r].count; a++) {
                for (const gbnf_element *element = &p->elements[p->alternatives[a]]; element->kind != GBNF_END;
                     element++) {
                    bool enters = element->kind == GBNF_RULE || (element->kind == GBNF_REPEAT && element->max > 0);
                    if (enters && pass == 1)
                        targets[count] = element->target;
                    count += enters;
                    uint32_t waits_on;
                    if (element_takes(element, nullable, &waits_on))
                        break;
                }
            }
        }
        if (pass == 0) {
            targets = malloc(((size_t)count + 1) * sizeof *targets);
            if (!targets)
                break;
        } else {
            offsets[rules] = count;
        }
    }
    if (!offsets || !targets) {
        free(offsets);
        free(targets);
        return out_of_memory(p);
    }
    *offsets_out = offsets;
    *targets_out = targets;
    return true;
}

static void append_name(const parser *p, uint32_t rule, char *names, size_t size, size_t *used)
{
    const rule_entry *named = &p->rules[p->rules[rule].owner];
    int wrote = snprintf(names + *used, size - *used, "%s%.*s", *used ? " -> " : "", (int)named->name_length,
                         p->text + named->name);
    if (wrote > 0)
        *used = *used + (size_t)wrote < size ? *used + (size_t)wrote : size - 1;
}

/* The named rules along the cycle path[from, depth) and back to its first ("a -> b -> a"); a group counts as
 * the rule it is written in. */
static void cycle_names(const parser *p, const uint32_t *path, uint32_t from, uint32_t depth, char *names,
                        size_t size)
{
    size_t used = 0;
    uint32_t listed = 0, last = NONE;
    names[0] = '\0';
    for (uint32_t i = from; i < depth; i++) {
        uint32_t owner = p->rules[path[i]].owner;
        if (owner == last)
            continue;
        last = owner;
        if (++listed <= CYCLE_NAMES_SHOWN)
            append_name(p, owner, names, size, &used);
        else if (listed == CYCLE_NAMES_SHOWN + 1 && used + 8 < size)
            used += (size_t)snprintf(names + used, size - used, " -> ...");
    }
    append_name(p, path[from], names, size, &used);
}

/* Refuses a cycle of left edges: expanding it would push frames forever without taking a byte. */
static bool check_left_recursion(parser *p, const bool *nullable)
{
    uint32_t *offsets, *targets;
    if (!left_edges(p, nullable, &offsets, &targets))
        return false;
    uint32_t rules = p->rule_count;
    uint8_t *color = calloc((size_t)rules + 1, 1); /* 0 unseen, 1 on the path, 2 done */
    uint32_t *path = malloc(((size_t)rules + 1) * sizeof *path);
    uint32_t *next_edge = malloc(((size_t)rules + 1) * sizeof *next_edge);
    bool ok = color && path && next_edge;
    if (!ok)
        out_of_memory(p);
    for (uint32_t root = 0; ok && root < rules; root++) {
        if (color[root])
            continue;
        uint32_t depth = 0;
        path[depth++] = root;
        color[root] = 1;
        next_edge[root] = offsets[root];
        while (ok && depth > 0) {
            uint32_t rule = path[depth - 1];
            if (next_edge[rule] == offsets[rule + 1]) {
                color[rule] = 2;
                depth--;
                continue;
            }
            uint32_t target = targets[next_edge[rule]++];
            if (color[target] == 0) {
                color[target] = 1;
                next_edge[target] = offsets[target];
                path[depth++] = target;
            } else if (color[target] == 1) {
                uint32_t from = depth - 1;
                while (path[from] != target)
                    from--;
                char names[BMOE_ERROR_MAX / 2];
                cycle_names(p, path, from, depth, names, sizeof names);
                const rule_entry *first = &p->rules[p->rules[target].owner];
                fail_at(p, first->defined_at, "rule '%.*s' is left-recursive (%s): it would loop without taking a byte",
                        (int)first->name_length, p->text + first->name, names);
                ok = false;
            }
        }
    }
    free(color);
    free(path);
    free(next_edge);
    free(offsets);
    free(targets);
    return ok;
}

/* References to rules never defined, the earliest first; then root. */
static bool check_defined(parser *p, uint32_t *root)
{
    uint32_t missing = NONE;
    for (uint32_t r = 0; r < p->rule_count; r++) {
        const rule_entry *rule = &p->rules[r];
        if (rule->name_length > 0 && rule->defined_at == NONE &&
            (missing == NONE || rule->referenced_at < p->rules[missing].referenced_at))
            missing = r;
    }
    if (missing != NONE)
        return fail_at(p, p->rules[missing].referenced_at, "undefined rule '%.*s'",
                       (int)p->rules[missing].name_length, p->text + p->rules[missing].name);
    *root = NONE;
    for (uint32_t r = 0; r < p->rule_count; r++)
        if (same_name(p, &p->rules[r], "root", 4))
            *root = r;
    if (*root == NONE) {
        p->failed = true;
        error_set_status(p->err, BMOE_ERR_INVALID_ARGUMENT, "gbnf: no rule 'root' (the start rule)");
        return false;
    }
    return true;
}

/* A text the reader can walk byte by byte: valid UTF-8 with no NUL. */
static bool check_text(parser *p)
{
    const unsigned char *bytes = (const unsigned char *)p->text;
    for (uint32_t at = 0; at < p->length;) {
        size_t step = 1;
        if (bytes[at] == 0)
            return fail_at(p, at, "a NUL byte in the grammar");
        if (utf8_scan(bytes + at, p->length - at, &step) != UTF8_VALID)
            return fail_at(p, at, "invalid UTF-8 in the grammar");
        at += (uint32_t)step;
    }
    return true;
}

void gbnf_grammar_free(gbnf_grammar *grammar)
{
    if (!grammar)
        return;
    free(grammar->elements);
    free(grammar->alternatives);
    free(grammar->rules);
    free(grammar->classes);
    free(grammar->ranges);
    free(grammar);
}

static void parser_release(parser *p)
{
    free(p->elements);
    free(p->items);
    free(p->alternatives);
    free(p->open);
    free(p->rules);
    free(p->classes);
    free(p->ranges);
    free(p->pending);
    free(p->names);
}

/* Moves the parser's arrays into a grammar, the start sequence appended, and finds its start. */
static gbnf_grammar *build(parser *p, uint32_t root)
{
    uint32_t start = p->element_count;
    if (!add_element(p, (gbnf_element){.kind = GBNF_RULE, .target = root}) ||
        !add_element(p, (gbnf_element){.kind = GBNF_END}))
        return NULL;
    gbnf_grammar *grammar = calloc(1, sizeof *grammar);
    gbnf_rule *rules = malloc(((size_t)p->rule_count + 1) * sizeof *rules);
    if (!grammar || !rules) {
        free(grammar);
        free(rules);
        out_of_memory(p);
        return NULL;
    }
    for (uint32_t r = 0; r < p->rule_count; r++)
        rules[r] = (gbnf_rule){p->rules[r].first, p->rules[r].count};
    grammar->rules = rules;
    grammar->rule_count = p->rule_count;
    grammar->elements = p->elements;
    grammar->element_count = p->element_count;
    grammar->alternatives = p->alternatives;
    grammar->classes = p->classes;
    grammar->ranges = p->ranges;
    p->elements = NULL;
    p->alternatives = NULL;
    p->classes = NULL;
    p->ranges = NULL;
    grammar->start = start;
    grammar->accept = start + 1;
    bool memory_ran_out = false;
    if (gbnf_grammar_start(grammar, &memory_ran_out))
        return grammar;
    gbnf_grammar_free(grammar);
    if (memory_ran_out)
        out_of_memory(p);
    else
        error_set_status(p->err, BMOE_ERR_INVALID_ARGUMENT,
                         "gbnf: the grammar's start alone needs more than %d parse stacks at once", GBNF_STACKS_MAX);
    return NULL;
}

gbnf_grammar *gbnf_grammar_create(const char *text, size_t length, bmoe_error *err)
{
    if (!text && length > 0) {
        error_set_status(err, BMOE_ERR_INVALID_ARGUMENT, "gbnf: no grammar text");
        return NULL;
    }
    if (length > GBNF_TEXT_MAX) {
        error_set_status(err, BMOE_ERR_INVALID_ARGUMENT, "gbnf: the grammar is %zu bytes, more than %u", length,
                         GBNF_TEXT_MAX);
        return NULL;
    }
    parser p = {.text = text ? text : "", .length = (uint32_t)length, .err = err, .any_class = NONE};
    bool ok = check_text(&p);
    skip_space(&p, true);
    while (ok && p.at < p.length)
        ok = read_rule(&p);
    uint32_t root = NONE;
    ok = ok && check_defined(&p, &root);
    bool *nullable = ok ? calloc((size_t)p.rule_count + 1, sizeof *nullable) : NULL;
    if (ok && !nullable)
        ok = out_of_memory(&p);
    ok = ok && find_nullable(&p, nullable) && check_left_recursion(&p, nullable);
    /* A repetition of what may be empty needs none of its minimum: empty iterations make it up. The matcher
     * counts on this to drop an iteration that took no byte. */
    for (uint32_t e = 0; ok && e < p.element_count; e++)
        if (p.elements[e].kind == GBNF_REPEAT && nullable[p.elements[e].target])
            p.elements[e].min = 0;
    free(nullable);
    gbnf_grammar *grammar = ok ? build(&p, root) : NULL;
    parser_release(&p);
    return grammar;
}
