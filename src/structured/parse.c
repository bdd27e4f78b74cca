/* The byte step of a JSON value under a compiled grammar: from a set of
 * parse states (threads) and one byte, the threads that follow. A step
 * never allocates: it pushes at most one frame per thread it is given into
 * the context's scratch. */
#include <string.h>

#include "structured/grammar_internal.h"

enum text_step {
    TEXT_REJECT,
    TEXT_CONTINUE,  /* inside a character or an escape */
    TEXT_CHARACTER, /* a new character starts */
};

static void step_thread(parse_context *context, const thread *current, uint8_t byte, thread *out, uint32_t *count);

const stored_frame *parse_stored(const parse_context *context, uint32_t link)
{
    return link < JSON_POOL_LINKS ? &context->pool[link] : &context->scratch[link - JSON_POOL_LINKS];
}

thread parse_initial(const json_grammar *grammar)
{
    thread initial;
    memset(&initial, 0, sizeof initial);
    initial.top.kind = FRAME_VALUE;
    initial.top.node = grammar->root;
    initial.below = JSON_LINK_NONE;
    initial.depth = 1;
    return initial;
}

static void emit(const thread *next, thread *out, uint32_t *count)
{
    for (uint32_t i = 0; i < *count; i++)
        if (memcmp(&out[i], next, sizeof *next) == 0)
            return;
    /* The grammar's creation proved the set never outgrows this; dropping a
     * thread would only narrow what is allowed, never let an invalid byte in. */
    if (*count < JSON_THREADS_MAX)
        out[(*count)++] = *next;
}

/* Stores the top frame under a new top (which the caller writes). */
static bool push(parse_context *context, thread *current)
{
    if (current->depth >= JSON_FRAMES_MAX || context->scratch_used == context->scratch_capacity)
        return false;
    uint32_t index = context->scratch_used++;
    context->scratch[index].frame = current->top;
    context->scratch[index].below = current->below;
    context->scratch[index].unused = 0;
    current->below = JSON_POOL_LINKS + index;
    current->depth++;
    return true;
}

/* The top value is complete: back to the frame under it, which gets byte when byte >= 0. */
static void finish_value(parse_context *context, thread current, int byte, thread *out, uint32_t *count)
{
    if (current.depth == 1) {
        if (byte >= 0)
            return; /* nothing after the top-level value, not even whitespace */
        memset(&current, 0, sizeof current);
        current.below = JSON_LINK_NONE;
        emit(&current, out, count);
        return;
    }
    const stored_frame *parent = parse_stored(context, current.below);
    current.top = parent->frame;
    current.below = parent->below;
    current.depth--;
    if (byte < 0)
        emit(&current, out, count);
    else
        step_thread(context, &current, (uint8_t)byte, out, count);
}

static bool space_step(uint8_t *space, uint8_t byte)
{
    if ((byte == ' ' || byte == '\n') && *space == 0) {
        *space = byte == ' ' ? 1 : 2;
        return true;
    }
    if ((byte == ' ' || byte == '\t') && *space >= 2 && *space < 2 + JSON_INDENT_MAX) {
        (*space)++;
        return true;
    }
    return false;
}

static bool is_space(uint8_t byte)
{
    return byte == ' ' || byte == '\n' || byte == '\t' || byte == '\r';
}

static bool is_hex(uint8_t byte)
{
    return (byte >= '0' && byte <= '9') || (byte >= 'a' && byte <= 'f') || (byte >= 'A' && byte <= 'F');
}

/* Escape states of string text. A \uXXXX escape of a high surrogate must be followed by one of a low
 * surrogate, and a low one never comes alone: the text stays valid Unicode (strict parsers refuse lone
 * surrogates). The pair counts as one character. */
enum escape_state {
    ESCAPE_NONE,
    ESCAPE_START,     /* after '\\' */
    ESCAPE_HEX1,      /* \u: the first digit */
    ESCAPE_HEX2_D,    /* \uD: the second digit tells a surrogate */
    ESCAPE_HEX2,
    ESCAPE_HEX3,
    ESCAPE_HEX4,
    ESCAPE_HIGH_HEX3, /* inside \uD800..\uDBFF */
    ESCAPE_HIGH_HEX4,
    ESCAPE_LOW_BACKSLASH, /* a low surrogate's escape must come next */
    ESCAPE_LOW_U,
    ESCAPE_LOW_D,
    ESCAPE_LOW_HEX2,  /* C..F */
    ESCAPE_LOW_HEX3,
    ESCAPE_LOW_HEX4,
};

static bool escape_step(frame *text, uint8_t byte)
{
    uint8_t lower = byte | 0x20;
    bool hex = is_hex(byte), d = lower == 'd';
    bool low_half = hex && lower >= 'c' && lower <= 'f';
    switch (text->escape) {
    case ESCAPE_START:
        switch (byte) {
        case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
            text->escape = ESCAPE_NONE;
            return true;
        case 'u':
            text->escape = ESCAPE_HEX1;
            return true;
        default:
            return false;
        }
    case ESCAPE_HEX1:
        text->escape = d ? ESCAPE_HEX2_D : ESCAPE_HEX2;
        return hex;
    case ESCAPE_HEX2_D:
        if (!hex || low_half)
            return false; /* a low surrogate alone */
        text->escape = (byte >= '0' && byte <= '7') ? ESCAPE_HEX3 : ESCAPE_HIGH_HEX3;
        return true;
    case ESCAPE_LOW_BACKSLASH:
        text->escape = ESCAPE_LOW_U;
        return byte == '\\';
    case ESCAPE_LOW_U:
        text->escape = ESCAPE_LOW_D;
        return byte == 'u';
    case ESCAPE_LOW_D:
        text->escape = ESCAPE_LOW_HEX2;
        return d;
    case ESCAPE_LOW_HEX2:
        text->escape = ESCAPE_LOW_HEX3;
        return low_half;
    case ESCAPE_HEX4:
    case ESCAPE_LOW_HEX4:
        text->escape = ESCAPE_NONE;
        return hex;
    case ESCAPE_HIGH_HEX4:
        text->escape = ESCAPE_LOW_BACKSLASH;
        return hex;
    default: /* ESCAPE_HEX2, ESCAPE_HEX3, ESCAPE_HIGH_HEX3, ESCAPE_LOW_HEX3: a digit, then the next one */
        text->escape++;
        return hex;
    }
}

/* One byte of string text other than the closing quote. */
static enum text_step text_step(frame *text, uint8_t byte)
{
    if (text->escape != ESCAPE_NONE)
        return escape_step(text, byte) ? TEXT_CONTINUE : TEXT_REJECT;
    if (text->utf8_need > 0) {
        if (byte < text->utf8_low || byte > text->utf8_high)
            return TEXT_REJECT;
        text->utf8_need--;
        text->utf8_low = 0x80;
        text->utf8_high = 0xbf;
        return TEXT_CONTINUE;
    }
    if (byte == '\\') {
        text->escape = ESCAPE_START;
        return TEXT_CHARACTER;
    }
    if (byte < 0x20)
        return TEXT_REJECT;
    if (byte < 0x80)
        return TEXT_CHARACTER;
    /* Well-formed UTF-8 (Unicode Table 3-7): no overlongs, surrogates or values above U+10FFFF. */
    uint8_t low = 0x80, high = 0xbf;
    if (byte >= 0xc2 && byte <= 0xdf) {
        text->utf8_need = 1;
    } else if (byte >= 0xe0 && byte <= 0xef) {
        text->utf8_need = 2;
        if (byte == 0xe0)
            low = 0xa0;
        else if (byte == 0xed)
            high = 0x9f;
    } else if (byte >= 0xf0 && byte <= 0xf4) {
        text->utf8_need = 3;
        if (byte == 0xf0)
            low = 0x90;
        else if (byte == 0xf4)
            high = 0x8f;
    } else {
        return TEXT_REJECT;
    }
    text->utf8_low = low;
    text->utf8_high = high;
    return TEXT_CHARACTER;
}

static bool text_at_rest(const frame *text)
{
    return text->escape == ESCAPE_NONE && text->utf8_need == 0;
}

/* Narrows [*low, *high) of sorted texts sharing their first `offset` bytes to those whose next byte is byte. */
static void narrow(const json_grammar *grammar, const grammar_text *texts, uint32_t *low, uint32_t *high,
                   uint32_t offset, uint8_t byte)
{
    uint32_t start = *low, end = *high;
    if (start < end && texts[start].length == offset)
        start++; /* the one that ends here sorts first and cannot go on */
    uint32_t lo = start, hi = end;
    while (lo < hi) {
        uint32_t middle = lo + (hi - lo) / 2;
        if ((uint8_t)grammar->text[texts[middle].offset + offset] < byte)
            lo = middle + 1;
        else
            hi = middle;
    }
    uint32_t first = lo;
    hi = end;
    while (lo < hi) {
        uint32_t middle = lo + (hi - lo) / 2;
        if ((uint8_t)grammar->text[texts[middle].offset + offset] <= byte)
            lo = middle + 1;
        else
            hi = middle;
    }
    *low = first;
    *high = lo;
}

/* ---- objects ---- */

typedef struct object_shape {
    uint32_t first, count; /* listed keys */
    bool open;
    uint32_t other;        /* the values of other keys */
    uint64_t required;
} object_shape;

/* The keys of an object frame at depth: other keys only if their values fit in the nesting left. */
static object_shape object_shape_of(const json_grammar *grammar, uint32_t node_index, uint32_t depth)
{
    const grammar_node *node = &grammar->nodes[node_index];
    if (node->kind == NODE_ANY)
        return (object_shape){.open = true, .other = grammar->any};
    bool open = node->open && grammar->nodes[node->child].min_depth <= JSON_NESTING_MAX - depth;
    return (object_shape){node->first, node->count, open, node->child, node->required};
}

/* Listed keys whose values need more nesting than is left under an object at depth: unavailable from the start,
 * as if present (a required one never is: the object's own min_depth counts it). */
static uint64_t keys_too_deep(const json_grammar *grammar, uint32_t node_index, uint32_t depth)
{
    const grammar_node *node = &grammar->nodes[node_index];
    uint64_t bits = 0;
    for (uint32_t i = 0; node->kind == NODE_OBJECT && i < node->count; i++)
        if (grammar->nodes[grammar->key_nodes[node->first + i]].min_depth > JSON_NESTING_MAX - depth)
            bits |= 1ull << i;
    return bits;
}

static uint64_t key_bits(const object_shape *shape, uint32_t low, uint32_t high)
{
    uint64_t below_high = high - shape->first >= 64 ? ~0ull : (1ull << (high - shape->first)) - 1;
    uint64_t below_low = low - shape->first >= 64 ? ~0ull : (1ull << (low - shape->first)) - 1;
    return below_high & ~below_low;
}

/* Whether a key can still be completed to one not yet present. */
static bool key_possible(const object_shape *shape, const frame *object, uint32_t low, uint32_t high)
{
    return shape->open || (key_bits(shape, low, high) & ~object->seen) != 0;
}

static void begin_key(thread current, const object_shape *shape, thread *out, uint32_t *count)
{
    frame *object = &current.top;
    if (!key_possible(shape, object, shape->first, shape->first + shape->count))
        return;
    object->phase = OBJECT_KEY;
    object->space = 0;
    object->count = 0;
    object->low = shape->first;
    object->high = shape->first + shape->count;
    object->escape = 0;
    object->utf8_need = 0;
    object->other_key = 0;
    emit(&current, out, count);
}

static void key_step(parse_context *context, thread current, const object_shape *shape, uint8_t byte, thread *out,
                     uint32_t *count)
{
    const json_grammar *grammar = context->grammar;
    frame *object = &current.top;
    if (byte == '"' && text_at_rest(object)) {
        bool listed = object->low < object->high && grammar->key_names[object->low].length == object->count;
        if (listed) {
            uint64_t bit = 1ull << (object->low - shape->first);
            if (object->seen & bit)
                return; /* a key twice */
            object->seen |= bit;
            object->other_key = 0;
        } else if (shape->open) {
            object->other_key = 1;
        } else {
            return;
        }
        object->phase = OBJECT_AFTER_KEY;
        object->space = 0;
        emit(&current, out, count);
        return;
    }
    if (text_step(object, byte) == TEXT_REJECT)
        return;
    if (object->low < object->high) {
        narrow(grammar, grammar->key_names, &object->low, &object->high, object->count, byte);
        object->count++;
    }
    if (!key_possible(shape, object, object->low, object->high))
        return;
    emit(&current, out, count);
}

static void start_value(parse_context *context, thread current, uint32_t node_index, uint8_t byte, thread *out,
                        uint32_t *count);

static void object_step(parse_context *context, const thread *current, uint8_t byte, thread *out, uint32_t *count)
{
    object_shape shape = object_shape_of(context->grammar, current->top.node, current->depth);
    thread next = *current;
    frame *object = &next.top;
    if (object->phase == OBJECT_KEY) {
        key_step(context, next, &shape, byte, out, count);
        return;
    }
    if (is_space(byte)) {
        if (space_step(&object->space, byte))
            emit(&next, out, count);
        return;
    }
    bool closable = (shape.required & ~object->seen) == 0;
    switch (object->phase) {
    case OBJECT_FIRST:
        if (byte == '"')
            begin_key(next, &shape, out, count);
        else if (byte == '}' && closable)
            finish_value(context, next, -1, out, count);
        break;
    case OBJECT_NEXT:
        if (byte == '"')
            begin_key(next, &shape, out, count);
        break;
    case OBJECT_AFTER_KEY:
        if (byte == ':') {
            object->phase = OBJECT_BEFORE_VALUE;
            object->space = 0;
            emit(&next, out, count);
        }
        break;
    case OBJECT_BEFORE_VALUE: {
        uint32_t child = object->other_key ? shape.other : context->grammar->key_nodes[object->low];
        object->phase = OBJECT_AFTER_VALUE;
        object->space = 0;
        if (push(context, &next))
            start_value(context, next, child, byte, out, count);
        break;
    }
    case OBJECT_AFTER_VALUE:
        if (byte == ',' && key_possible(&shape, object, shape.first, shape.first + shape.count)) {
            object->phase = OBJECT_NEXT;
            object->space = 0;
            emit(&next, out, count);
        } else if (byte == '}' && closable) {
            finish_value(context, next, -1, out, count);
        }
        break;
    default:
        break;
    }
}

/* ---- arrays ---- */

static void array_item(parse_context *context, thread next, uint32_t items, uint32_t max, uint8_t byte, thread *out,
                       uint32_t *count)
{
    if (next.top.count >= max)
        return;
    next.top.count++;
    next.top.phase = ARRAY_AFTER_VALUE;
    next.top.space = 0;
    if (push(context, &next))
        start_value(context, next, items, byte, out, count);
}

static void array_step(parse_context *context, const thread *current, uint8_t byte, thread *out, uint32_t *count)
{
    const json_grammar *grammar = context->grammar;
    const grammar_node *node = &grammar->nodes[current->top.node];
    bool any = node->kind == NODE_ANY;
    uint32_t items = any ? grammar->any : node->child;
    uint32_t min = any ? 0 : node->min, max = any ? UINT32_MAX : node->max;
    thread next = *current;
    frame *array = &next.top;
    if (is_space(byte)) {
        if (space_step(&array->space, byte))
            emit(&next, out, count);
        return;
    }
    switch (array->phase) {
    case ARRAY_FIRST:
        if (byte == ']') {
            if (min == 0)
                finish_value(context, next, -1, out, count);
        } else {
            array_item(context, next, items, max, byte, out, count);
        }
        break;
    case ARRAY_AFTER_VALUE:
        if (byte == ',' && array->count < max) {
            array->phase = ARRAY_NEXT;
            array->space = 0;
            emit(&next, out, count);
        } else if (byte == ']' && array->count >= min) {
            finish_value(context, next, -1, out, count);
        }
        break;
    case ARRAY_NEXT:
        array_item(context, next, items, max, byte, out, count);
        break;
    default:
        break;
    }
}

/* ---- scalars ---- */

static void string_step(parse_context *context, const thread *current, uint8_t byte, thread *out, uint32_t *count)
{
    const grammar_node *node = &context->grammar->nodes[current->top.node];
    bool any = node->kind == NODE_ANY;
    uint32_t min = any ? 0 : node->min, max = any ? UINT32_MAX : node->max;
    thread next = *current;
    frame *text = &next.top;
    if (byte == '"' && text_at_rest(text)) {
        if (text->count >= min)
            finish_value(context, next, -1, out, count);
        return;
    }
    enum text_step step = text_step(text, byte);
    if (step == TEXT_REJECT)
        return;
    if (step == TEXT_CHARACTER) {
        if (text->count >= max)
            return;
        text->count++;
    }
    emit(&next, out, count);
}

static bool is_digit(uint8_t byte)
{
    return byte >= '0' && byte <= '9';
}

static bool number_may_end(uint8_t phase)
{
    return phase == NUMBER_ZERO || phase == NUMBER_INTEGER || phase == NUMBER_FRACTION || phase == NUMBER_EXPONENT;
}

static void number_step(parse_context *context, const thread *current, uint8_t byte, thread *out, uint32_t *count)
{
    bool integer = context->grammar->nodes[current->top.node].kind == NODE_INTEGER;
    thread next = *current;
    frame *number = &next.top;
    uint8_t phase = number->phase;
    bool taken = false;
    switch (phase) {
    case NUMBER_MINUS:
        if (is_digit(byte)) {
            number->phase = byte == '0' ? NUMBER_ZERO : NUMBER_INTEGER;
            number->count = 1;
            taken = true;
        }
        break;
    case NUMBER_INTEGER:
    case NUMBER_ZERO:
        if (phase == NUMBER_INTEGER && is_digit(byte) && number->count < JSON_INTEGER_DIGITS_MAX) {
            number->count++;
            taken = true;
        } else if (!integer && byte == '.') {
            number->phase = NUMBER_POINT;
            taken = true;
        } else if (!integer && (byte == 'e' || byte == 'E')) {
            number->phase = NUMBER_E;
            taken = true;
        }
        break;
    case NUMBER_POINT:
        if (is_digit(byte)) {
            number->phase = NUMBER_FRACTION;
            number->count = 1;
            taken = true;
        }
        break;
    case NUMBER_FRACTION:
        if (is_digit(byte) && number->count < JSON_FRACTION_DIGITS_MAX) {
            number->count++;
            taken = true;
        } else if (byte == 'e' || byte == 'E') {
            number->phase = NUMBER_E;
            taken = true;
        }
        break;
    case NUMBER_E:
    case NUMBER_EXPONENT_SIGN:
        if (is_digit(byte)) {
            number->phase = NUMBER_EXPONENT;
            number->count = 1;
            taken = true;
        } else if (phase == NUMBER_E && (byte == '+' || byte == '-')) {
            number->phase = NUMBER_EXPONENT_SIGN;
            taken = true;
        }
        break;
    case NUMBER_EXPONENT:
        if (is_digit(byte) && number->count < JSON_EXPONENT_DIGITS_MAX) {
            number->count++;
            taken = true;
        }
        break;
    default:
        break;
    }
    if (taken)
        emit(&next, out, count);
    else if (number_may_end(phase) && !is_digit(byte))
        finish_value(context, *current, byte, out, count);
}

/* The literal frame after matching range [low, high) up to offset bytes: done when only one is left, complete. */
static void literal_emit(parse_context *context, thread next, thread *out, uint32_t *count)
{
    const grammar_text *literals = context->grammar->literals;
    if (next.top.high - next.top.low == 1 && literals[next.top.low].length == next.top.count)
        finish_value(context, next, -1, out, count);
    else
        emit(&next, out, count);
}

static void literal_step(parse_context *context, const thread *current, uint8_t byte, thread *out, uint32_t *count)
{
    const json_grammar *grammar = context->grammar;
    const frame *literal = &current->top;
    thread next = *current;
    narrow(grammar, grammar->literals, &next.top.low, &next.top.high, literal->count, byte);
    if (next.top.low < next.top.high) {
        next.top.count++;
        literal_emit(context, next, out, count);
    }
    /* A literal that ends here (enum [1, 12] after "1") gives the byte to the frame under it. */
    if (literal->low < literal->high && grammar->literals[literal->low].length == literal->count)
        finish_value(context, *current, byte, out, count);
}

/* ---- the start of a value ---- */

static void open_frame(const parse_context *context, thread current, uint8_t kind, uint32_t node, uint8_t phase,
                       uint32_t count_start, thread *out, uint32_t *count)
{
    if ((kind == FRAME_OBJECT || kind == FRAME_ARRAY) && current.depth > JSON_NESTING_MAX)
        return;
    memset(&current.top, 0, sizeof current.top);
    current.top.kind = kind;
    current.top.node = node;
    current.top.phase = phase;
    current.top.count = count_start;
    if (kind == FRAME_OBJECT)
        current.top.seen = keys_too_deep(context->grammar, node, current.depth);
    emit(&current, out, count);
}

static void start_number(const parse_context *context, thread current, uint32_t node, uint8_t byte, thread *out,
                         uint32_t *count)
{
    if (byte == '-')
        open_frame(context, current, FRAME_NUMBER, node, NUMBER_MINUS, 0, out, count);
    else if (byte == '0')
        open_frame(context, current, FRAME_NUMBER, node, NUMBER_ZERO, 1, out, count);
    else if (byte >= '1' && byte <= '9')
        open_frame(context, current, FRAME_NUMBER, node, NUMBER_INTEGER, 1, out, count);
}

static void start_literal(parse_context *context, thread current, uint32_t node_index, uint8_t byte, thread *out,
                          uint32_t *count)
{
    const json_grammar *grammar = context->grammar;
    const grammar_node *node = &grammar->nodes[node_index];
    uint32_t low = node->first, high = node->first + node->count;
    narrow(grammar, grammar->literals, &low, &high, 0, byte);
    if (low == high)
        return;
    memset(&current.top, 0, sizeof current.top);
    current.top.kind = FRAME_LITERAL;
    current.top.node = node_index;
    current.top.low = low;
    current.top.high = high;
    current.top.count = 1;
    literal_emit(context, current, out, count);
}

static void start_value(parse_context *context, thread current, uint32_t node_index, uint8_t byte, thread *out,
                        uint32_t *count)
{
    const json_grammar *grammar = context->grammar;
    const grammar_node *node = &grammar->nodes[node_index];
    /* A value that needs more nesting than is left would be a dead end. */
    if (node->min_depth > JSON_NESTING_MAX + 1 - current.depth)
        return;
    switch (node->kind) {
    case NODE_UNION:
        for (uint32_t i = 0; i < node->count; i++)
            start_value(context, current, grammar->alternatives[node->first + i], byte, out, count);
        break;
    case NODE_ANY:
        if (byte == '{')
            open_frame(context, current, FRAME_OBJECT, node_index, OBJECT_FIRST, 0, out, count);
        else if (byte == '[')
            open_frame(context, current, FRAME_ARRAY, node_index, ARRAY_FIRST, 0, out, count);
        else if (byte == '"')
            open_frame(context, current, FRAME_STRING, node_index, 0, 0, out, count);
        else if (byte == '-' || is_digit(byte))
            start_number(context, current, node_index, byte, out, count);
        else
            start_literal(context, current, grammar->keywords, byte, out, count);
        break;
    case NODE_OBJECT:
        if (byte == '{')
            open_frame(context, current, FRAME_OBJECT, node_index, OBJECT_FIRST, 0, out, count);
        break;
    case NODE_ARRAY:
        if (byte == '[')
            open_frame(context, current, FRAME_ARRAY, node_index, ARRAY_FIRST, 0, out, count);
        break;
    case NODE_STRING:
        if (byte == '"')
            open_frame(context, current, FRAME_STRING, node_index, 0, 0, out, count);
        break;
    case NODE_NUMBER:
    case NODE_INTEGER:
        start_number(context, current, node_index, byte, out, count);
        break;
    case NODE_LITERALS:
        start_literal(context, current, node_index, byte, out, count);
        break;
    default:
        break;
    }
}

static void step_thread(parse_context *context, const thread *current, uint8_t byte, thread *out, uint32_t *count)
{
    if (current->depth == 0)
        return;
    switch (current->top.kind) {
    case FRAME_VALUE:
        start_value(context, *current, current->top.node, byte, out, count);
        break;
    case FRAME_OBJECT:
        object_step(context, current, byte, out, count);
        break;
    case FRAME_ARRAY:
        array_step(context, current, byte, out, count);
        break;
    case FRAME_STRING:
        string_step(context, current, byte, out, count);
        break;
    case FRAME_NUMBER:
        number_step(context, current, byte, out, count);
        break;
    case FRAME_LITERAL:
        literal_step(context, current, byte, out, count);
        break;
    default:
        break;
    }
}

uint32_t parse_step(parse_context *context, const thread *threads, uint32_t count, uint8_t byte, thread *out)
{
    uint32_t out_count = 0;
    for (uint32_t i = 0; i < count; i++)
        step_thread(context, &threads[i], byte, out, &out_count);
    return out_count;
}

bool parse_complete(const parse_context *context, const thread *current)
{
    if (current->depth == 0)
        return true;
    if (current->depth != 1)
        return false;
    const frame *top = &current->top;
    if (top->kind == FRAME_NUMBER)
        return number_may_end(top->phase);
    if (top->kind == FRAME_LITERAL)
        return top->low < top->high && context->grammar->literals[top->low].length == top->count;
    return false;
}

int64_t parse_text_room(const parse_context *context, const thread *threads, uint32_t count)
{
    const json_grammar *grammar = context->grammar;
    int64_t room = -1;
    for (uint32_t i = 0; i < count; i++) {
        const frame *top = &threads[i].top;
        if (threads[i].depth == 0 || !text_at_rest(top))
            return -1;
        const grammar_node *node = &grammar->nodes[top->node];
        int64_t here;
        if (top->kind == FRAME_STRING)
            here = node->kind == NODE_ANY ? INT64_MAX : (int64_t)node->max - top->count;
        else if (top->kind == FRAME_OBJECT && top->phase == OBJECT_KEY &&
                 object_shape_of(grammar, top->node, threads[i].depth).open)
            here = INT64_MAX; /* a key of an open object takes any text: listed or not, it is a key */
        else
            return -1;
        if (here > room)
            room = here;
    }
    return room;
}
