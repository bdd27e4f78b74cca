/* The tokenizer. Whitespace inside tags and the whitespace '-' strips are
 * Python's \s (Unicode spaces), as Jinja2's regular expressions match them.
 * Brackets are balanced here, as Jinja2 does, so that "}}" inside a dict
 * literal does not end a print statement. */
#include "chat/lexer.h"

#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/unicode.h"

/* Brackets open at once inside one tag; the parser refuses far less. */
#define LEX_BRACKET_DEPTH_MAX 256

struct lexer {
    const char *source;
    size_t length, position;
    int line;
    struct arena *arena;
    struct token *tokens;
    size_t count, capacity;
    bmoe_error *err;
    bool trim_next; /* the last tag end lets trim_blocks take the next newline */
    char brackets[LEX_BRACKET_DEPTH_MAX];
    size_t bracket_depth;
};

static int lex_fail(struct lexer *lexer, int line, const char *message)
{
    return error_set(lexer->err, "line %d: %s", line, message);
}

static struct token *push_token(struct lexer *lexer, uint8_t type, int line)
{
    if (lexer->count == lexer->capacity) {
        size_t capacity = lexer->capacity ? lexer->capacity * 2 : 256;
        struct token *tokens = realloc(lexer->tokens, capacity * sizeof *tokens);
        if (!tokens) {
            lex_fail(lexer, line, "out of memory");
            return NULL;
        }
        lexer->tokens = tokens;
        lexer->capacity = capacity;
    }
    struct token *token = &lexer->tokens[lexer->count++];
    memset(token, 0, sizeof *token);
    token->type = type;
    token->line = line;
    return token;
}

static bool space_at(const struct lexer *lexer, size_t position, size_t *size)
{
    if (position >= lexer->length)
        return false;
    uint32_t c = utf8_decode(lexer->source + position, lexer->length - position, size);
    return unicode_is_space(c);
}

static int count_newlines(const char *text, size_t length)
{
    int lines = 0;
    for (size_t i = 0; i < length; i++)
        lines += text[i] == '\n';
    return lines;
}

static void skip_spaces(struct lexer *lexer)
{
    size_t size;
    while (space_at(lexer, lexer->position, &size)) {
        lexer->line += lexer->source[lexer->position] == '\n';
        lexer->position += size;
    }
}

static size_t right_strip(const char *text, size_t length)
{
    while (length > 0) {
        size_t size = utf8_previous_size(text, length), decoded;
        uint32_t c = utf8_decode(text + length - size, size, &decoded);
        if (decoded != size || !unicode_is_space(c))
            break;
        length -= size;
    }
    return length;
}

static bool all_spaces(const char *text, size_t length)
{
    size_t size;
    for (size_t offset = 0; offset < length; offset += size)
        if (!unicode_is_space(utf8_decode(text + offset, length - offset, &size)))
            return false;
    return length > 0;
}

static bool starts_with(const struct lexer *lexer, size_t position, const char *text)
{
    size_t length = strlen(text);
    return position <= lexer->length && lexer->length - position >= length &&
           memcmp(lexer->source + position, text, length) == 0;
}

/* Data from start to end, followed by a tag of the given kind ('{', '%', '#',
 * or 0 at the end of the template) carrying sign ('-', '+' or 0). */
static int emit_data(struct lexer *lexer, size_t start, size_t end, char kind, char sign)
{
    const char *text = lexer->source + start;
    size_t length = end - start;
    int line = lexer->line;
    lexer->line += count_newlines(text, length);
    if (sign == '-')
        length = right_strip(text, length);
    if (length == 0)
        return 0;
    size_t lstrip_length = length;
    if (sign == 0 && (kind == '%' || kind == '#')) {
        size_t line_start = length;
        while (line_start > 0 && text[line_start - 1] != '\n')
            line_start--;
        /* Jinja2 strips only indentation that begins a line. */
        if ((line_start > 0 || start == 0) && all_spaces(text + line_start, length - line_start))
            lstrip_length = line_start;
    }
    struct token *token = push_token(lexer, TOKEN_DATA, line);
    if (!token)
        return -1;
    token->text = text;
    token->length = length;
    token->lstrip_length = lstrip_length;
    token->trim_newline = lexer->trim_next && text[0] == '\n';
    return 0;
}

/* After a tag end: '-' eats the following whitespace, '+' keeps it, a plain
 * end lets trim_blocks remove one newline. */
static void after_tag_end(struct lexer *lexer, char sign, bool trimmable)
{
    if (sign == '-')
        skip_spaces(lexer);
    lexer->trim_next = trimmable && sign == 0;
}

static int lex_comment(struct lexer *lexer, size_t body)
{
    int line = lexer->line;
    const char *found = NULL;
    for (size_t i = body; i + 1 < lexer->length; i++) {
        if (lexer->source[i] == '#' && lexer->source[i + 1] == '}') {
            found = lexer->source + i;
            break;
        }
    }
    if (!found)
        return lex_fail(lexer, line, "Missing end of comment tag");
    size_t end = (size_t)(found - lexer->source);
    char sign = end > body && (found[-1] == '-' || found[-1] == '+') ? found[-1] : 0;
    lexer->line += count_newlines(lexer->source + body, end - body);
    lexer->position = end + 2;
    after_tag_end(lexer, sign, true);
    return 0;
}

/* "{%" [sign] \s* "raw" \s* ("-%}" | "%}"): *content gets where the raw text begins. */
static bool is_raw_begin(struct lexer *lexer, size_t position, size_t *content)
{
    size_t size;
    while (space_at(lexer, position, &size))
        position += size;
    if (!starts_with(lexer, position, "raw"))
        return false;
    position += 3;
    while (space_at(lexer, position, &size))
        position += size;
    if (starts_with(lexer, position, "-%}")) {
        position += 3;
        while (space_at(lexer, position, &size))
            position += size;
    } else if (starts_with(lexer, position, "%}")) {
        position += 2;
    } else {
        return false;
    }
    *content = position;
    return true;
}

/* At "{%": "{%" [sign] \s* "endraw" \s* ("+%}" | "-%}" | "%}"). */
static bool is_raw_end(struct lexer *lexer, size_t position, char *open_sign, char *close_sign, size_t *after)
{
    size_t size;
    position += 2;
    *open_sign = 0;
    if (position < lexer->length && (lexer->source[position] == '-' || lexer->source[position] == '+'))
        *open_sign = lexer->source[position++];
    while (space_at(lexer, position, &size))
        position += size;
    if (!starts_with(lexer, position, "endraw"))
        return false;
    position += 6;
    while (space_at(lexer, position, &size))
        position += size;
    *close_sign = 0;
    if (starts_with(lexer, position, "+%}") || starts_with(lexer, position, "-%}"))
        *close_sign = lexer->source[position++];
    if (!starts_with(lexer, position, "%}"))
        return false;
    *after = position + 2;
    return true;
}

static int lex_raw(struct lexer *lexer, size_t tag, size_t content)
{
    int line = lexer->line;
    lexer->line += count_newlines(lexer->source + tag, content - tag);
    for (size_t i = content; i + 1 < lexer->length; i++) {
        char open_sign, close_sign;
        size_t after;
        if (lexer->source[i] != '{' || lexer->source[i + 1] != '%' ||
            !is_raw_end(lexer, i, &open_sign, &close_sign, &after))
            continue;
        lexer->trim_next = false;
        if (emit_data(lexer, content, i, '%', open_sign) != 0)
            return -1;
        lexer->line += count_newlines(lexer->source + i, after - i);
        lexer->position = after;
        after_tag_end(lexer, close_sign, true);
        return 0;
    }
    return lex_fail(lexer, line, "Missing end of raw directive");
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* (\d+_)*\d+ from position; returns the end (position when no digit). */
static size_t scan_digits(const struct lexer *lexer, size_t position)
{
    if (position >= lexer->length || !is_digit(lexer->source[position]))
        return position;
    while (position < lexer->length && is_digit(lexer->source[position]))
        position++;
    while (position + 1 < lexer->length && lexer->source[position] == '_' && is_digit(lexer->source[position + 1])) {
        position++;
        while (position < lexer->length && is_digit(lexer->source[position]))
            position++;
    }
    return position;
}

/* The end of a float literal at position, or position when there is none. */
static size_t scan_float(const struct lexer *lexer, size_t position)
{
    if (position > 0 && lexer->source[position - 1] == '.')
        return position;
    size_t whole = scan_digits(lexer, position);
    if (whole == position)
        return position;
    size_t cursor = whole;
    if (cursor < lexer->length && lexer->source[cursor] == '.') {
        size_t fraction = scan_digits(lexer, cursor + 1);
        if (fraction > cursor + 1)
            cursor = fraction;
    }
    if (cursor < lexer->length && (lexer->source[cursor] == 'e' || lexer->source[cursor] == 'E')) {
        size_t exponent = cursor + 1;
        if (exponent < lexer->length && (lexer->source[exponent] == '+' || lexer->source[exponent] == '-'))
            exponent++;
        size_t end = scan_digits(lexer, exponent);
        if (end > exponent)
            return end;
    }
    return cursor > whole ? cursor : position;
}

static bool is_digit_of_base(char c, int base)
{
    if (base == 2)
        return c == '0' || c == '1';
    if (base == 8)
        return c >= '0' && c <= '7';
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* Integer literal end: 0b/0o/0x forms, [1-9](_?\d)*, 0(_?0)*; *base gets the base. */
static size_t scan_integer(const struct lexer *lexer, size_t position, int *base)
{
    const char *s = lexer->source;
    *base = 10;
    if (s[position] == '0' && position + 1 < lexer->length) {
        char prefix = s[position + 1];
        int prefix_base = prefix == 'b' || prefix == 'B' ? 2 : prefix == 'o' || prefix == 'O' ? 8
                          : prefix == 'x' || prefix == 'X' ? 16 : 0;
        if (prefix_base) {
            size_t cursor = position + 2;
            for (;;) {
                if (cursor < lexer->length && is_digit_of_base(s[cursor], prefix_base))
                    cursor++;
                else if (cursor + 1 < lexer->length && s[cursor] == '_' && is_digit_of_base(s[cursor + 1], prefix_base))
                    cursor += 2;
                else
                    break;
            }
            if (cursor > position + 2) {
                *base = prefix_base;
                return cursor;
            }
        }
    }
    char first = s[position];
    size_t cursor = position + 1;
    for (;;) {
        bool allowed_digit = cursor < lexer->length && (first == '0' ? s[cursor] == '0' : is_digit(s[cursor]));
        bool underscored = cursor + 1 < lexer->length && s[cursor] == '_' &&
                           (first == '0' ? s[cursor + 1] == '0' : is_digit(s[cursor + 1]));
        if (allowed_digit)
            cursor++;
        else if (underscored)
            cursor += 2;
        else
            break;
    }
    return cursor;
}

static int lex_number(struct lexer *lexer)
{
    size_t start = lexer->position;
    char digits[128];
    size_t end = scan_float(lexer, start);
    bool is_float = end > start;
    int base = 10;
    if (!is_float)
        end = scan_integer(lexer, start, &base);
    size_t count = 0;
    for (size_t i = start + (base != 10 ? 2 : 0); i < end; i++) {
        if (lexer->source[i] == '_')
            continue;
        if (count + 2 >= sizeof digits)
            return lex_fail(lexer, lexer->line, "number literal too long");
        digits[count++] = lexer->source[i];
    }
    digits[count] = '\0';
    struct token *token = push_token(lexer, is_float ? TOKEN_FLOAT : TOKEN_INTEGER, lexer->line);
    if (!token)
        return -1;
    if (is_float) {
        /* strtod reads the locale's decimal point. */
        const char *point = localeconv()->decimal_point;
        char *dot = strchr(digits, '.');
        if (dot && point && point[0] && point[1] == '\0')
            *dot = point[0];
        token->number = strtod(digits, NULL);
    } else {
        unsigned long long magnitude = 0;
        for (size_t i = 0; i < count; i++) {
            char c = digits[i];
            unsigned digit = is_digit(c) ? (unsigned)(c - '0') : (unsigned)((c | 0x20) - 'a' + 10);
            if (magnitude > (0x7FFFFFFFFFFFFFFFull - digit) / (unsigned)base)
                return lex_fail(lexer, lexer->line, "integer literal too large");
            magnitude = magnitude * (unsigned)base + digit;
        }
        token->integer = (int64_t)magnitude;
    }
    lexer->position = end;
    return 0;
}

static bool is_name_start(const struct lexer *lexer, size_t position, size_t *size)
{
    unsigned char c = (unsigned char)lexer->source[position];
    *size = 1;
    if (c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        return true;
    if (c < 0x80)
        return false;
    return unicode_is_alpha(utf8_decode(lexer->source + position, lexer->length - position, size));
}

static int lex_name(struct lexer *lexer)
{
    size_t start = lexer->position, size;
    while (lexer->position < lexer->length &&
           (is_name_start(lexer, lexer->position, &size) || is_digit(lexer->source[lexer->position])))
        lexer->position += size;
    struct token *token = push_token(lexer, TOKEN_NAME, lexer->line);
    if (!token)
        return -1;
    token->text = lexer->source + start;
    token->length = lexer->position - start;
    return 0;
}

static int hex_value(char c)
{
    if (is_digit(c))
        return c - '0';
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
        return (c | 0x20) - 'a' + 10;
    return -1;
}

/* Python's unicode-escape decoding of a literal body into out (room for
 * 4 bytes per source byte); returns the decoded length or -1 with *problem. */
static long decode_string(const char *body, size_t length, char *out, const char **problem)
{
    size_t written = 0;
    for (size_t i = 0; i < length;) {
        if (body[i] != '\\') {
            out[written++] = body[i++];
            continue;
        }
        char c = body[i + 1]; /* the literal's pattern guarantees a character after '\' */
        i += 2;
        uint32_t code_point;
        switch (c) {
        case '\n': continue;
        case '\\': out[written++] = '\\'; continue;
        case '\'': out[written++] = '\''; continue;
        case '"': out[written++] = '"'; continue;
        case 'a': out[written++] = '\a'; continue;
        case 'b': out[written++] = '\b'; continue;
        case 'f': out[written++] = '\f'; continue;
        case 'n': out[written++] = '\n'; continue;
        case 'r': out[written++] = '\r'; continue;
        case 't': out[written++] = '\t'; continue;
        case 'v': out[written++] = '\v'; continue;
        case 'x':
        case 'u':
        case 'U': {
            int digits = c == 'x' ? 2 : c == 'u' ? 4 : 8;
            code_point = 0;
            for (int d = 0; d < digits; d++) {
                int v = i < length ? hex_value(body[i]) : -1;
                if (v < 0) {
                    *problem = c == 'x' ? "truncated \\xXX escape" : c == 'u' ? "truncated \\uXXXX escape"
                                                                           : "truncated \\UXXXXXXXX escape";
                    return -1;
                }
                code_point = code_point * 16 + (uint32_t)v;
                i++;
            }
            if (code_point > 0x10FFFF) {
                *problem = "illegal Unicode character";
                return -1;
            }
            written += utf8_encode(code_point, out + written);
            continue;
        }
        case 'N':
            *problem = "named Unicode escapes (\\N{...}) are not supported";
            return -1;
        default: break;
        }
        if (c >= '0' && c <= '7') {
            code_point = (uint32_t)(c - '0');
            for (int d = 0; d < 2 && i < length && body[i] >= '0' && body[i] <= '7'; d++)
                code_point = code_point * 8 + (uint32_t)(body[i++] - '0');
            written += utf8_encode(code_point, out + written);
            continue;
        }
        if ((unsigned char)c >= 0x80) {
            /* Jinja2 backslash-escapes non-ASCII before decoding, so "\é" reads "\xe9". */
            size_t size;
            uint32_t decoded = utf8_decode(body + i - 1, length - (i - 1), &size);
            i += size - 1;
            char text[16];
            int n = decoded <= 0xFF     ? snprintf(text, sizeof text, "\\x%02x", (unsigned)decoded)
                    : decoded <= 0xFFFF ? snprintf(text, sizeof text, "\\u%04x", (unsigned)decoded)
                                        : snprintf(text, sizeof text, "\\U%08x", (unsigned)decoded);
            memcpy(out + written, text, (size_t)n);
            written += (size_t)n;
            continue;
        }
        out[written++] = '\\';
        out[written++] = c;
    }
    return (long)written;
}

static int lex_string(struct lexer *lexer)
{
    char quote = lexer->source[lexer->position];
    size_t start = lexer->position + 1, end = start;
    int newlines = 0;
    while (end < lexer->length && lexer->source[end] != quote) {
        if (lexer->source[end] == '\\') {
            if (end + 1 >= lexer->length)
                break;
            newlines += lexer->source[end + 1] == '\n';
            end += 2;
            continue;
        }
        newlines += lexer->source[end] == '\n';
        end++;
    }
    if (end >= lexer->length) {
        char message[64];
        snprintf(message, sizeof message, "unexpected char %s", quote == '\'' ? "\"'\"" : "'\"'");
        return lex_fail(lexer, lexer->line, message);
    }
    size_t body = end - start;
    if (body > (SIZE_MAX - 1) / 4)
        return lex_fail(lexer, lexer->line, "string literal too long");
    char *decoded = arena_allocate(lexer->arena, body * 4 + 1);
    if (!decoded)
        return lex_fail(lexer, lexer->line, "out of memory");
    const char *problem = NULL;
    long length = decode_string(lexer->source + start, body, decoded, &problem);
    if (length < 0)
        return lex_fail(lexer, lexer->line, problem);
    struct token *token = push_token(lexer, TOKEN_STRING, lexer->line);
    if (!token)
        return -1;
    token->text = decoded;
    token->length = (size_t)length;
    lexer->line += newlines;
    lexer->position = end + 1;
    return 0;
}

struct operator_spelling {
    const char *text;
    uint8_t kind;
};

static const struct operator_spelling operator_spellings[] = {
    {"//", OPERATOR_FLOOR_DIVIDE}, {"**", OPERATOR_POWER},        {"==", OPERATOR_EQUAL},
    {"!=", OPERATOR_NOT_EQUAL},    {">=", OPERATOR_GREATER_EQUAL}, {"<=", OPERATOR_LESS_EQUAL},
    {"+", OPERATOR_ADD},           {"-", OPERATOR_SUBTRACT},      {"/", OPERATOR_DIVIDE},
    {"*", OPERATOR_MULTIPLY},      {"%", OPERATOR_MODULO},        {"~", OPERATOR_TILDE},
    {"[", OPERATOR_LEFT_BRACKET},  {"]", OPERATOR_RIGHT_BRACKET}, {"(", OPERATOR_LEFT_PAREN},
    {")", OPERATOR_RIGHT_PAREN},   {"{", OPERATOR_LEFT_BRACE},    {"}", OPERATOR_RIGHT_BRACE},
    {">", OPERATOR_GREATER},       {"<", OPERATOR_LESS},          {"=", OPERATOR_ASSIGN},
    {".", OPERATOR_DOT},           {":", OPERATOR_COLON},         {"|", OPERATOR_PIPE},
    {",", OPERATOR_COMMA},         {";", OPERATOR_SEMICOLON},
};

static int lex_operator(struct lexer *lexer)
{
    for (size_t i = 0; i < sizeof operator_spellings / sizeof operator_spellings[0]; i++) {
        const struct operator_spelling *spelling = &operator_spellings[i];
        if (!starts_with(lexer, lexer->position, spelling->text))
            continue;
        char c = spelling->text[0];
        char message[64];
        if (c == '(' || c == '[' || c == '{') {
            if (lexer->bracket_depth == LEX_BRACKET_DEPTH_MAX)
                return lex_fail(lexer, lexer->line, "brackets nested too deeply");
            lexer->brackets[lexer->bracket_depth++] = c == '(' ? ')' : c == '[' ? ']' : '}';
        } else if (c == ')' || c == ']' || c == '}') {
            if (lexer->bracket_depth == 0) {
                snprintf(message, sizeof message, "unexpected '%c'", c);
                return lex_fail(lexer, lexer->line, message);
            }
            char expected = lexer->brackets[--lexer->bracket_depth];
            if (expected != c) {
                snprintf(message, sizeof message, "unexpected '%c', expected '%c'", c, expected);
                return lex_fail(lexer, lexer->line, message);
            }
        }
        struct token *token = push_token(lexer, TOKEN_OPERATOR, lexer->line);
        if (!token)
            return -1;
        token->operator = spelling->kind;
        token->text = spelling->text;
        token->length = strlen(spelling->text);
        lexer->position += token->length;
        return 0;
    }
    unsigned char c = (unsigned char)lexer->source[lexer->position];
    char message[64];
    if (c >= 0x20 && c < 0x7F)
        snprintf(message, sizeof message, "unexpected char '%c'", c);
    else
        snprintf(message, sizeof message, "unexpected byte 0x%02x", c);
    return lex_fail(lexer, lexer->line, message);
}

/* Tokens of a {{ }} or {% %} tag, up to and including its end. */
static int lex_tag(struct lexer *lexer, size_t body, bool block)
{
    if (!push_token(lexer, block ? TOKEN_BLOCK_BEGIN : TOKEN_VARIABLE_BEGIN, lexer->line))
        return -1;
    lexer->position = body;
    lexer->bracket_depth = 0;
    for (;;) {
        skip_spaces(lexer);
        if (lexer->position >= lexer->length)
            return 0; /* the parser reports the unfinished tag */
        if (lexer->bracket_depth == 0) {
            size_t position = lexer->position;
            char sign = 0;
            bool ended = false;
            if (block) {
                if (starts_with(lexer, position, "+%}") || starts_with(lexer, position, "-%}"))
                    sign = lexer->source[position], ended = true, lexer->position += 3;
                else if (starts_with(lexer, position, "%}"))
                    ended = true, lexer->position += 2;
            } else {
                if (starts_with(lexer, position, "-}}"))
                    sign = '-', ended = true, lexer->position += 3;
                else if (starts_with(lexer, position, "}}"))
                    ended = true, lexer->position += 2;
            }
            if (ended) {
                if (!push_token(lexer, block ? TOKEN_BLOCK_END : TOKEN_VARIABLE_END, lexer->line))
                    return -1;
                after_tag_end(lexer, sign, block);
                return 0;
            }
        }
        char c = lexer->source[lexer->position];
        size_t size;
        int status;
        if (is_digit(c))
            status = lex_number(lexer);
        else if (is_name_start(lexer, lexer->position, &size))
            status = lex_name(lexer);
        else if (c == '\'' || c == '"')
            status = lex_string(lexer);
        else
            status = lex_operator(lexer);
        if (status != 0)
            return status;
    }
}

/* \r\n and \r become \n; one final newline goes (keep_trailing_newline off). */
static char *normalize_newlines(struct arena *arena, const char *source, size_t length, size_t *normalized)
{
    char *text = arena_allocate(arena, length + 1);
    if (!text)
        return NULL;
    size_t written = 0;
    for (size_t i = 0; i < length; i++) {
        if (source[i] == '\r') {
            text[written++] = '\n';
            if (i + 1 < length && source[i + 1] == '\n')
                i++;
        } else {
            text[written++] = source[i];
        }
    }
    if (written > 0 && text[written - 1] == '\n')
        written--;
    text[written] = '\0';
    *normalized = written;
    return text;
}

int lex_template(const char *source, size_t length, struct arena *arena, struct token_list *list, bmoe_error *err)
{
    struct lexer lexer;
    memset(&lexer, 0, sizeof lexer);
    lexer.arena = arena;
    lexer.err = err;
    lexer.line = 1;
    list->tokens = NULL;
    list->count = 0;
    lexer.source = normalize_newlines(arena, source ? source : "", source ? length : 0, &lexer.length);
    if (!lexer.source)
        return error_set(err, "line 1: out of memory");
    int status = 0;
    while (status == 0) {
        size_t tag = lexer.position;
        char kind = 0;
        for (; tag + 1 < lexer.length; tag++) {
            char next = lexer.source[tag + 1];
            if (lexer.source[tag] == '{' && (next == '{' || next == '%' || next == '#')) {
                kind = next;
                break;
            }
        }
        if (!kind)
            tag = lexer.length;
        size_t body = tag + 2;
        char sign = 0;
        if (kind && body < lexer.length && (lexer.source[body] == '-' || lexer.source[body] == '+'))
            sign = lexer.source[body++];
        size_t raw_content = 0;
        bool raw = kind == '%' && is_raw_begin(&lexer, body, &raw_content);
        status = emit_data(&lexer, lexer.position, tag, kind, sign);
        if (status != 0 || !kind)
            break;
        lexer.trim_next = false;
        if (kind == '#')
            status = lex_comment(&lexer, body);
        else if (raw)
            status = lex_raw(&lexer, tag, raw_content);
        else
            status = lex_tag(&lexer, body, kind == '%');
    }
    if (status == 0 && !push_token(&lexer, TOKEN_END, lexer.line))
        status = -1;
    if (status != 0) {
        free(lexer.tokens);
        return -1;
    }
    list->tokens = lexer.tokens;
    list->count = lexer.count;
    return 0;
}

const char *token_description(const struct token *token, char *buffer, size_t size)
{
    switch (token->type) {
    case TOKEN_END: return "end of template";
    case TOKEN_DATA: return "template data";
    case TOKEN_VARIABLE_BEGIN: return "begin of print statement";
    case TOKEN_VARIABLE_END: return "end of print statement";
    case TOKEN_BLOCK_BEGIN: return "begin of statement block";
    case TOKEN_BLOCK_END: return "end of statement block";
    case TOKEN_STRING: return "string";
    case TOKEN_INTEGER: return "integer";
    case TOKEN_FLOAT: return "float";
    default: break;
    }
    int length = token->length > 40 ? 40 : (int)token->length;
    snprintf(buffer, size, "%.*s", length, token->text);
    return buffer;
}
