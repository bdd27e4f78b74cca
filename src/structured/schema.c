/* A JSON schema (cJSON's tree of it) compiled into grammar nodes, and the
 * checks that make the matcher safe to run on it: no cycle of alternatives
 * that never reads a byte, a bounded number of parse states, a nesting
 * depth that fits. What is supported and refused: json_grammar.h. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base/utf8.h"
#include "structured/grammar_internal.h"

#define PATH_MAX_BYTES 200
/* Schemas nest far less; the bound keeps the compiler's recursion (a few KiB a level) off small stacks. */
#define SCHEMA_NESTING_MAX 128
#define DEPTH_UNREACHABLE UINT32_MAX

enum type_bit {
    TYPE_OBJECT = 1,
    TYPE_ARRAY = 2,
    TYPE_STRING = 4,
    TYPE_NUMBER = 8,
    TYPE_INTEGER = 16,
    TYPE_BOOLEAN = 32,
    TYPE_NULL = 64,
    TYPE_ALL = 127,
};

/* The kinds a value's first byte tells apart: { [ " number t f n. */
enum { FIRST_BYTE_KINDS = 7 };

typedef struct ref_target {
    const cJSON *schema;
    uint32_t node;
} ref_target;

typedef struct compiler {
    json_grammar *grammar;
    const cJSON *document;
    ref_target *targets;
    uint32_t target_count, target_capacity;
    char path[PATH_MAX_BYTES]; /* where in the schema, as a JSON pointer, for messages */
    size_t path_length;
    uint32_t nesting;
    bmoe_error *err;
} compiler;

/* Keywords that constrain and are supported. Those below them are refused; every other keyword (title,
 * description, default, format, $defs...) is an annotation or unknown, and JSON Schema ignores both. */
static const char *const supported_keywords[] = {
    "type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems",
    "minLength", "maxLength", "enum", "const", "anyOf", "oneOf", "allOf", "$ref",
};

static const char *const refused_keywords[] = {
    "pattern", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "patternProperties", "propertyNames", "minProperties", "maxProperties", "not", "if", "then", "else",
    "uniqueItems", "contains", "minContains", "maxContains", "prefixItems", "additionalItems",
    "unevaluatedProperties", "unevaluatedItems", "dependentRequired", "dependentSchemas", "dependencies",
    "$dynamicRef", "$recursiveRef", "$dynamicAnchor", "$recursiveAnchor", "contentSchema",
};

static bool listed(const char *name, const char *const *names, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (strcmp(name, names[i]) == 0)
            return true;
    return false;
}

#define LISTED(name, names) listed(name, names, sizeof names / sizeof names[0])

static const char *shown_path(const compiler *c)
{
    return c->path_length ? c->path : "the root";
}

static uint32_t fail(compiler *c, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static uint32_t fail(compiler *c, const char *fmt, ...)
{
    char message[BMOE_ERROR_MAX];
    va_list args;
    va_start(args, fmt);
    vsnprintf(message, sizeof message, fmt, args);
    va_end(args);
    error_set_status(c->err, BMOE_ERR_INVALID_ARGUMENT, "json schema: %s (at %s)", message, shown_path(c));
    return JSON_NODE_NONE;
}

static uint32_t out_of_memory(compiler *c)
{
    error_set_status(c->err, BMOE_ERR_OUT_OF_MEMORY, "json schema: out of memory");
    return JSON_NODE_NONE;
}

/* Appends "/" and part (JSON pointer escaped) to the path; returns the length to restore. */
static size_t path_push(compiler *c, const char *part)
{
    size_t saved = c->path_length;
    size_t length = c->path_length;
    if (length + 1 < sizeof c->path)
        c->path[length++] = '/';
    for (const char *p = part; *p && length + 3 < sizeof c->path; p++) {
        if (*p == '~' || *p == '/') {
            c->path[length++] = '~';
            c->path[length++] = *p == '~' ? '0' : '1';
        } else {
            c->path[length++] = *p;
        }
    }
    c->path[length] = '\0';
    c->path_length = length;
    return saved;
}

static void path_pop(compiler *c, size_t saved)
{
    c->path_length = saved;
    c->path[saved] = '\0';
}

/* Grows *items to hold needed entries of size bytes each. */
static bool reserve(void **items, uint32_t *capacity, uint32_t needed, size_t size)
{
    if (needed <= *capacity)
        return true;
    uint32_t grown = *capacity ? *capacity : 16;
    while (grown < needed)
        grown *= 2;
    void *resized = realloc(*items, (size_t)grown * size);
    if (!resized)
        return false;
    *items = resized;
    *capacity = grown;
    return true;
}

static uint32_t new_node(compiler *c, uint8_t kind)
{
    json_grammar *g = c->grammar;
    if (!reserve((void **)&g->nodes, &g->node_capacity, g->node_count + 1, sizeof *g->nodes))
        return out_of_memory(c);
    grammar_node *node = &g->nodes[g->node_count];
    memset(node, 0, sizeof *node);
    node->kind = kind;
    node->child = JSON_NODE_NONE;
    node->max = UINT32_MAX;
    return g->node_count++;
}

static bool append_text(compiler *c, const char *bytes, size_t length, grammar_text *text)
{
    json_grammar *g = c->grammar;
    if (length > UINT32_MAX / 2 || g->text_length + length > UINT32_MAX / 2)
        return false;
    if (!reserve((void **)&g->text, &g->text_capacity, g->text_length + (uint32_t)length + 1, 1))
        return false;
    memcpy(g->text + g->text_length, bytes, length);
    text->offset = g->text_length;
    text->length = (uint32_t)length;
    g->text_length += (uint32_t)length;
    return true;
}

static bool valid_utf8(const char *bytes, size_t length)
{
    size_t at = 0;
    while (at < length) {
        size_t step = 0;
        if (utf8_scan((const unsigned char *)bytes + at, length - at, &step) != UTF8_VALID)
            return false;
        at += step;
    }
    return true;
}

/* Appends name as the inside of a JSON string in its plain form. */
static bool append_escaped(compiler *c, const char *name, grammar_text *text)
{
    size_t length = strlen(name);
    char *escaped = malloc(length * 6 + 1);
    if (!escaped)
        return false;
    size_t used = 0;
    for (size_t i = 0; i < length; i++) {
        unsigned char byte = (unsigned char)name[i];
        const char *short_form = NULL;
        switch (byte) {
        case '"': short_form = "\\\""; break;
        case '\\': short_form = "\\\\"; break;
        case '\b': short_form = "\\b"; break;
        case '\f': short_form = "\\f"; break;
        case '\n': short_form = "\\n"; break;
        case '\r': short_form = "\\r"; break;
        case '\t': short_form = "\\t"; break;
        default: break;
        }
        if (short_form) {
            memcpy(escaped + used, short_form, 2);
            used += 2;
        } else if (byte < 0x20) {
            used += (size_t)snprintf(escaped + used, 7, "\\u%04x", byte);
        } else {
            escaped[used++] = (char)byte;
        }
    }
    bool ok = append_text(c, escaped, used, text);
    free(escaped);
    return ok;
}

/* Byte order, a prefix first. */
static int compare_bytes(const char *a, uint32_t a_length, const char *b, uint32_t b_length)
{
    uint32_t shorter = a_length < b_length ? a_length : b_length;
    int order = memcmp(a, b, shorter);
    if (order != 0)
        return order;
    return a_length < b_length ? -1 : a_length > b_length;
}

/* ---- literals ---- */

typedef struct literal_entry {
    const char *bytes;
    grammar_text text;
} literal_entry;

static int compare_literals(const void *a, const void *b)
{
    const literal_entry *x = a, *y = b;
    return compare_bytes(x->bytes, x->text.length, y->bytes, y->text.length);
}

/* A literal node from serialized values already in grammar->text. */
static uint32_t literal_node(compiler *c, grammar_text *texts, uint32_t count)
{
    json_grammar *g = c->grammar;
    literal_entry *entries = malloc((size_t)count * sizeof *entries);
    if (!entries)
        return out_of_memory(c);
    for (uint32_t i = 0; i < count; i++)
        entries[i] = (literal_entry){g->text + texts[i].offset, texts[i]};
    qsort(entries, count, sizeof *entries, compare_literals);
    uint32_t node = new_node(c, NODE_LITERALS);
    if (node == JSON_NODE_NONE ||
        !reserve((void **)&g->literals, &g->literal_capacity, g->literal_count + count, sizeof *g->literals)) {
        free(entries);
        return node == JSON_NODE_NONE ? node : out_of_memory(c);
    }
    g->nodes[node].first = g->literal_count;
    for (uint32_t i = 0; i < count; i++) {
        bool repeated = i > 0 && compare_literals(&entries[i - 1], &entries[i]) == 0;
        if (!repeated)
            g->literals[g->literal_count++] = entries[i].text;
    }
    g->nodes[node].count = g->literal_count - g->nodes[node].first;
    free(entries);
    return node;
}

static uint32_t words_node(compiler *c, const char *const *words, uint32_t count)
{
    grammar_text texts[3];
    for (uint32_t i = 0; i < count; i++)
        if (!append_text(c, words[i], strlen(words[i]), &texts[i]))
            return out_of_memory(c);
    return literal_node(c, texts, count);
}

static unsigned value_types(const cJSON *value)
{
    if (cJSON_IsObject(value))
        return TYPE_OBJECT;
    if (cJSON_IsArray(value))
        return TYPE_ARRAY;
    if (cJSON_IsString(value))
        return TYPE_STRING;
    if (cJSON_IsBool(value))
        return TYPE_BOOLEAN;
    if (cJSON_IsNull(value))
        return TYPE_NULL;
    double number = value->valuedouble;
    bool integral = number > -9.2e18 && number < 9.2e18 && number == (double)(long long)number;
    return TYPE_NUMBER | (integral ? TYPE_INTEGER : 0);
}

/* enum or const: the values of types, each as its compact serialization. */
static uint32_t compile_literals(compiler *c, const cJSON *values, bool single, unsigned types)
{
    uint32_t total = single ? 1 : (uint32_t)cJSON_GetArraySize(values);
    grammar_text *texts = malloc(((size_t)total + 1) * sizeof *texts);
    if (!texts)
        return out_of_memory(c);
    uint32_t count = 0;
    const cJSON *value = single ? values : values->child;
    for (uint32_t i = 0; i < total && value; i++, value = value->next) {
        if (!(value_types(value) & types))
            continue;
        char *serialized = cJSON_PrintUnformatted(value);
        if (!serialized) {
            free(texts);
            return out_of_memory(c);
        }
        size_t length = strlen(serialized);
        bool valid = valid_utf8(serialized, length);
        bool stored = valid && append_text(c, serialized, length, &texts[count]);
        cJSON_free(serialized);
        if (!valid) {
            free(texts);
            return fail(c, "%s holds a string that is not valid UTF-8", single ? "const" : "enum");
        }
        if (!stored) {
            free(texts);
            return out_of_memory(c);
        }
        count++;
    }
    if (count == 0) {
        free(texts);
        return fail(c, "%s has no value of the schema's type", single ? "const" : "enum");
    }
    uint32_t node = literal_node(c, texts, count);
    free(texts);
    return node;
}

/* ---- the schema walk ---- */

static uint32_t compile_schema(compiler *c, const cJSON *schema);

static uint32_t union_node(compiler *c, const uint32_t *alternatives, uint32_t count)
{
    if (count == 1)
        return alternatives[0];
    json_grammar *g = c->grammar;
    uint32_t node = new_node(c, NODE_UNION);
    if (node == JSON_NODE_NONE)
        return node;
    if (!reserve((void **)&g->alternatives, &g->alternative_capacity, g->alternative_count + count,
                 sizeof *g->alternatives))
        return out_of_memory(c);
    g->nodes[node].first = g->alternative_count;
    g->nodes[node].count = count;
    memcpy(g->alternatives + g->alternative_count, alternatives, count * sizeof *alternatives);
    g->alternative_count += count;
    return node;
}

/* The node of a $ref's target, compiled once: a recursive reference gets the node being compiled. */
static uint32_t compile_target(compiler *c, const cJSON *target)
{
    json_grammar *g = c->grammar;
    for (uint32_t i = 0; i < c->target_count; i++)
        if (c->targets[i].schema == target)
            return c->targets[i].node;
    /* A one-way union stands for the target until it is compiled, so references to it can point here now. */
    uint32_t alias = new_node(c, NODE_UNION);
    if (alias == JSON_NODE_NONE)
        return alias;
    if (!reserve((void **)&c->targets, &c->target_capacity, c->target_count + 1, sizeof *c->targets))
        return out_of_memory(c);
    c->targets[c->target_count++] = (ref_target){target, alias};
    uint32_t inner = compile_schema(c, target);
    if (inner == JSON_NODE_NONE)
        return inner;
    if (!reserve((void **)&g->alternatives, &g->alternative_capacity, g->alternative_count + 1,
                 sizeof *g->alternatives))
        return out_of_memory(c);
    g->nodes[alias].first = g->alternative_count;
    g->nodes[alias].count = 1;
    g->alternatives[g->alternative_count++] = inner;
    return alias;
}

static uint32_t compile_ref(compiler *c, const cJSON *ref)
{
    if (!cJSON_IsString(ref))
        return fail(c, "$ref must be a string");
    const char *text = ref->valuestring;
    if (strcmp(text, "#") == 0)
        return compile_target(c, c->document);
    const char *name = NULL, *container = NULL;
    if (strncmp(text, "#/$defs/", 8) == 0) {
        name = text + 8;
        container = "$defs";
    } else if (strncmp(text, "#/definitions/", 14) == 0) {
        name = text + 14;
        container = "definitions";
    } else {
        return fail(c, "$ref '%s' is not supported: only \"#\", \"#/$defs/NAME\" and \"#/definitions/NAME\"", text);
    }
    /* A JSON pointer token: ~1 is '/', ~0 is '~'; a further '/' would go deeper than a definition. */
    char decoded[256];
    size_t length = 0;
    for (const char *p = name; *p; p++) {
        char byte = *p;
        if (byte == '/' || length + 1 >= sizeof decoded)
            return fail(c, "$ref '%s' is not supported: only a definition by name", text);
        if (byte == '~' && (p[1] == '0' || p[1] == '1'))
            byte = *++p == '0' ? '~' : '/';
        decoded[length++] = byte;
    }
    decoded[length] = '\0';
    const cJSON *definitions = cJSON_GetObjectItemCaseSensitive(c->document, container);
    const cJSON *target = cJSON_GetObjectItemCaseSensitive(definitions, decoded);
    if (!target)
        return fail(c, "$ref '%s' names no definition", text);
    /* The target's messages name where it is defined, not where it is used. */
    char used_at[PATH_MAX_BYTES];
    size_t used_length = c->path_length;
    memcpy(used_at, c->path, used_length + 1);
    path_pop(c, 0);
    path_push(c, container);
    path_push(c, decoded);
    uint32_t node = compile_target(c, target);
    memcpy(c->path, used_at, used_length + 1);
    c->path_length = used_length;
    return node;
}

static bool read_count(compiler *c, const cJSON *schema, const char *keyword, uint32_t *value)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(schema, keyword);
    if (!item)
        return true;
    double number = item->valuedouble;
    if (!cJSON_IsNumber(item) || !(number >= 0 && number < UINT32_MAX) || number != (double)(uint32_t)number) {
        fail(c, "%s must be a non-negative integer", keyword);
        return false;
    }
    *value = (uint32_t)number;
    return true;
}

static uint32_t compile_array(compiler *c, const cJSON *schema)
{
    uint32_t min = 0, max = UINT32_MAX;
    if (!read_count(c, schema, "minItems", &min) || !read_count(c, schema, "maxItems", &max))
        return JSON_NODE_NONE;
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(schema, "items");
    uint32_t child = c->grammar->any;
    if (cJSON_IsArray(items))
        return fail(c, "items as a list (tuple validation) is not supported");
    if (cJSON_IsFalse(items)) {
        max = 0;
    } else if (items && !cJSON_IsTrue(items)) {
        size_t saved = path_push(c, "items");
        child = compile_schema(c, items);
        path_pop(c, saved);
        if (child == JSON_NODE_NONE)
            return child;
    }
    if (min > max)
        return fail(c, "minItems is greater than maxItems (or than 0 with items false)");
    uint32_t node = new_node(c, NODE_ARRAY);
    if (node != JSON_NODE_NONE) {
        c->grammar->nodes[node].child = child;
        c->grammar->nodes[node].min = min;
        c->grammar->nodes[node].max = max;
    }
    return node;
}

static uint32_t compile_string(compiler *c, const cJSON *schema)
{
    uint32_t min = 0, max = UINT32_MAX;
    if (!read_count(c, schema, "minLength", &min) || !read_count(c, schema, "maxLength", &max))
        return JSON_NODE_NONE;
    if (min > max)
        return fail(c, "minLength is greater than maxLength");
    uint32_t node = new_node(c, NODE_STRING);
    if (node != JSON_NODE_NONE) {
        c->grammar->nodes[node].min = min;
        c->grammar->nodes[node].max = max;
    }
    return node;
}

typedef struct key_entry {
    const char *name;     /* as the schema spells it */
    const cJSON *schema;  /* NULL: a required key that is not in properties, valued as other keys */
    const char *escaped;
    grammar_text text;
} key_entry;

static int compare_keys(const void *a, const void *b)
{
    const key_entry *x = a, *y = b;
    return compare_bytes(x->escaped, x->text.length, y->escaped, y->text.length);
}

static uint32_t compile_object(compiler *c, const cJSON *schema)
{
    json_grammar *g = c->grammar;
    const cJSON *properties = cJSON_GetObjectItemCaseSensitive(schema, "properties");
    const cJSON *required = cJSON_GetObjectItemCaseSensitive(schema, "required");
    const cJSON *additional = cJSON_GetObjectItemCaseSensitive(schema, "additionalProperties");
    if (properties && !cJSON_IsObject(properties))
        return fail(c, "properties must be an object");
    if (required && !cJSON_IsArray(required))
        return fail(c, "required must be a list of names");
    if (additional && !cJSON_IsBool(additional) && !cJSON_IsObject(additional))
        return fail(c, "additionalProperties must be a boolean or a schema");

    bool open = additional ? !cJSON_IsFalse(additional) : properties == NULL;
    uint32_t other = g->any;
    if (cJSON_IsObject(additional)) {
        size_t saved = path_push(c, "additionalProperties");
        other = compile_schema(c, additional);
        path_pop(c, saved);
        if (other == JSON_NODE_NONE)
            return other;
    }

    key_entry entries[JSON_PROPERTIES_MAX];
    uint32_t count = 0;
    for (const cJSON *property = properties ? properties->child : NULL; property; property = property->next) {
        for (uint32_t i = 0; i < count; i++)
            if (strcmp(entries[i].name, property->string) == 0)
                return fail(c, "property '%s' is listed twice", property->string);
        if (count == JSON_PROPERTIES_MAX)
            return fail(c, "more than %d properties in one object", JSON_PROPERTIES_MAX);
        entries[count++] = (key_entry){.name = property->string, .schema = property};
    }
    for (const cJSON *name = required ? required->child : NULL; name; name = name->next) {
        if (!cJSON_IsString(name))
            return fail(c, "required must be a list of names");
        bool known = false;
        for (uint32_t i = 0; i < count && !known; i++)
            known = strcmp(entries[i].name, name->valuestring) == 0;
        if (known)
            continue;
        if (!open)
            return fail(c, "required property '%s' is not in properties and additionalProperties is false",
                        name->valuestring);
        if (count == JSON_PROPERTIES_MAX)
            return fail(c, "more than %d properties in one object", JSON_PROPERTIES_MAX);
        entries[count++] = (key_entry){.name = name->valuestring, .schema = NULL};
    }
    for (uint32_t i = 0; i < count; i++) {
        if (!valid_utf8(entries[i].name, strlen(entries[i].name)))
            return fail(c, "a property name is not valid UTF-8");
        if (!append_escaped(c, entries[i].name, &entries[i].text))
            return out_of_memory(c);
    }
    for (uint32_t i = 0; i < count; i++)
        entries[i].escaped = g->text + entries[i].text.offset;
    qsort(entries, count, sizeof *entries, compare_keys);

    uint64_t required_bits = 0;
    for (const cJSON *name = required ? required->child : NULL; name; name = name->next)
        for (uint32_t i = 0; i < count; i++)
            if (strcmp(entries[i].name, name->valuestring) == 0)
                required_bits |= 1ull << i;

    if (!reserve((void **)&g->key_names, &g->key_name_capacity, g->key_count + count, sizeof *g->key_names) ||
        !reserve((void **)&g->key_nodes, &g->key_node_capacity, g->key_count + count, sizeof *g->key_nodes))
        return out_of_memory(c);
    uint32_t first = g->key_count;
    for (uint32_t i = 0; i < count; i++) {
        g->key_names[first + i] = entries[i].text;
        g->key_nodes[first + i] = other;
    }
    g->key_count += count;
    for (uint32_t i = 0; i < count; i++) {
        if (!entries[i].schema)
            continue;
        size_t saved = path_push(c, "properties");
        path_push(c, entries[i].name);
        uint32_t child = compile_schema(c, entries[i].schema);
        path_pop(c, saved);
        if (child == JSON_NODE_NONE)
            return child;
        g->key_nodes[first + i] = child;
    }
    uint32_t node = new_node(c, NODE_OBJECT);
    if (node != JSON_NODE_NONE) {
        grammar_node *object = &g->nodes[node];
        object->first = first;
        object->count = count;
        object->open = open;
        object->child = other;
        object->required = required_bits;
    }
    return node;
}

static unsigned parse_type_name(const char *name)
{
    static const struct {
        const char *name;
        unsigned bit;
    } names[] = {
        {"object", TYPE_OBJECT}, {"array", TYPE_ARRAY}, {"string", TYPE_STRING}, {"number", TYPE_NUMBER},
        {"integer", TYPE_INTEGER}, {"boolean", TYPE_BOOLEAN}, {"null", TYPE_NULL},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i].name) == 0)
            return names[i].bit;
    return 0;
}

static bool read_types(compiler *c, const cJSON *type, unsigned *types)
{
    *types = 0;
    if (cJSON_IsString(type)) {
        *types = parse_type_name(type->valuestring);
        if (!*types) {
            fail(c, "unknown type '%s'", type->valuestring);
            return false;
        }
        return true;
    }
    if (!cJSON_IsArray(type) || !type->child) {
        fail(c, "type must be a type name or a non-empty list of them");
        return false;
    }
    for (const cJSON *item = type->child; item; item = item->next) {
        unsigned bit = cJSON_IsString(item) ? parse_type_name(item->valuestring) : 0;
        if (!bit) {
            fail(c, "type lists something that is not a type name");
            return false;
        }
        *types |= bit;
    }
    return true;
}

/* The first constraining keyword of schema other than the ones in allowed (NULL: none). */
static const char *other_constraint(const cJSON *schema, const char *const *allowed, size_t allowed_count)
{
    for (const cJSON *item = schema->child; item; item = item->next)
        if (LISTED(item->string, supported_keywords) && !listed(item->string, allowed, allowed_count))
            return item->string;
    return NULL;
}

static uint32_t compile_alternatives(compiler *c, const cJSON *list, const char *keyword)
{
    if (!cJSON_IsArray(list) || !list->child)
        return fail(c, "%s must be a non-empty list of schemas", keyword);
    uint32_t count = (uint32_t)cJSON_GetArraySize(list);
    uint32_t *alternatives = malloc(count * sizeof *alternatives);
    if (!alternatives)
        return out_of_memory(c);
    uint32_t index = 0;
    for (const cJSON *item = list->child; item; item = item->next, index++) {
        char part[32];
        snprintf(part, sizeof part, "%u", index);
        size_t saved = path_push(c, keyword);
        path_push(c, part);
        alternatives[index] = compile_schema(c, item);
        path_pop(c, saved);
        if (alternatives[index] == JSON_NODE_NONE) {
            free(alternatives);
            return JSON_NODE_NONE;
        }
    }
    uint32_t node = union_node(c, alternatives, count);
    free(alternatives);
    return node;
}

static uint32_t compile_schema_inside(compiler *c, const cJSON *schema);

static uint32_t compile_schema(compiler *c, const cJSON *schema)
{
    if (c->nesting == SCHEMA_NESTING_MAX)
        return fail(c, "the schema nests deeper than %d schemas", SCHEMA_NESTING_MAX);
    c->nesting++;
    uint32_t node = compile_schema_inside(c, schema);
    c->nesting--;
    return node;
}

static uint32_t compile_schema_inside(compiler *c, const cJSON *schema)
{
    json_grammar *g = c->grammar;
    if (cJSON_IsTrue(schema))
        return g->any;
    if (cJSON_IsFalse(schema))
        return fail(c, "the schema false (no value) is supported only as additionalProperties or items");
    if (!cJSON_IsObject(schema))
        return fail(c, "a schema must be an object or a boolean");

    for (const cJSON *item = schema->child; item; item = item->next) {
        if (LISTED(item->string, refused_keywords))
            return fail(c, "unsupported keyword '%s'", item->string);
    }
    static const char *const alone_ref[] = {"$ref"};
    static const char *const alone_any[] = {"anyOf"};
    static const char *const alone_one[] = {"oneOf"};
    static const char *const alone_all[] = {"allOf"};
    static const char *const with_type[] = {"enum", "const", "type"};
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(schema, "$ref");
    const cJSON *any_of = cJSON_GetObjectItemCaseSensitive(schema, "anyOf");
    const cJSON *one_of = cJSON_GetObjectItemCaseSensitive(schema, "oneOf");
    const cJSON *all_of = cJSON_GetObjectItemCaseSensitive(schema, "allOf");
    const cJSON *enum_values = cJSON_GetObjectItemCaseSensitive(schema, "enum");
    const cJSON *constant = cJSON_GetObjectItemCaseSensitive(schema, "const");
    const char *clash = NULL;
    if (ref && (clash = other_constraint(schema, alone_ref, 1)))
        return fail(c, "'%s' beside '$ref' is not supported", clash);
    if (ref)
        return compile_ref(c, ref);
    if (any_of && (clash = other_constraint(schema, alone_any, 1)))
        return fail(c, "'%s' beside 'anyOf' is not supported", clash);
    if (any_of)
        return compile_alternatives(c, any_of, "anyOf");
    if (one_of && (clash = other_constraint(schema, alone_one, 1)))
        return fail(c, "'%s' beside 'oneOf' is not supported", clash);
    if (one_of)
        return compile_alternatives(c, one_of, "oneOf");
    if (all_of && (clash = other_constraint(schema, alone_all, 1)))
        return fail(c, "'%s' beside 'allOf' is not supported", clash);
    if (all_of) {
        if (!cJSON_IsArray(all_of) || cJSON_GetArraySize(all_of) != 1)
            return fail(c, "unsupported keyword 'allOf' with other than one schema");
        return compile_alternatives(c, all_of, "allOf");
    }

    const cJSON *type = cJSON_GetObjectItemCaseSensitive(schema, "type");
    unsigned types = TYPE_ALL;
    if (type && !read_types(c, type, &types))
        return JSON_NODE_NONE;
    if (enum_values || constant) {
        if (enum_values && constant)
            return fail(c, "'enum' beside 'const' is not supported");
        if ((clash = other_constraint(schema, with_type, 3)))
            return fail(c, "'%s' beside '%s' is not supported", clash, enum_values ? "enum" : "const");
        if (enum_values && (!cJSON_IsArray(enum_values) || !enum_values->child))
            return fail(c, "enum must be a non-empty list");
        return compile_literals(c, enum_values ? enum_values : constant, constant != NULL, types);
    }
    if (!type) {
        static const char *const object_words[] = {"properties", "required", "additionalProperties"};
        static const char *const array_words[] = {"items", "minItems", "maxItems"};
        static const char *const string_words[] = {"minLength", "maxLength"};
        unsigned implied = 0;
        for (const cJSON *item = schema->child; item; item = item->next) {
            implied |= LISTED(item->string, object_words) ? TYPE_OBJECT : 0;
            implied |= LISTED(item->string, array_words) ? TYPE_ARRAY : 0;
            implied |= LISTED(item->string, string_words) ? TYPE_STRING : 0;
        }
        if (!implied)
            return g->any;
        types = implied;
    }
    if (types & TYPE_NUMBER)
        types &= ~(unsigned)TYPE_INTEGER; /* every integer is a number */

    uint32_t alternatives[7];
    uint32_t count = 0;
    if (types & TYPE_OBJECT)
        alternatives[count++] = compile_object(c, schema);
    if (count && alternatives[count - 1] == JSON_NODE_NONE)
        return JSON_NODE_NONE;
    if (types & TYPE_ARRAY)
        alternatives[count++] = compile_array(c, schema);
    if (count && alternatives[count - 1] == JSON_NODE_NONE)
        return JSON_NODE_NONE;
    if (types & TYPE_STRING)
        alternatives[count++] = compile_string(c, schema);
    if (types & TYPE_NUMBER)
        alternatives[count++] = new_node(c, NODE_NUMBER);
    if (types & TYPE_INTEGER)
        alternatives[count++] = new_node(c, NODE_INTEGER);
    if (types & (TYPE_BOOLEAN | TYPE_NULL)) {
        static const char *const booleans[] = {"false", "true"};
        static const char *const null_word[] = {"null"};
        static const char *const both[] = {"false", "null", "true"};
        unsigned words = types & (TYPE_BOOLEAN | TYPE_NULL);
        alternatives[count++] = words == TYPE_BOOLEAN ? words_node(c, booleans, 2)
                                : words == TYPE_NULL  ? words_node(c, null_word, 1)
                                                      : words_node(c, both, 3);
    }
    for (uint32_t i = 0; i < count; i++)
        if (alternatives[i] == JSON_NODE_NONE)
            return JSON_NODE_NONE;
    return union_node(c, alternatives, count);
}

/* ---- checks on the compiled graph ---- */

/* A union that reaches itself through unions only would expand forever without reading a byte. */
static bool union_cycle_from(const json_grammar *g, uint32_t node, uint8_t *state)
{
    if (state[node] == 1)
        return true;
    if (state[node] == 2 || g->nodes[node].kind != NODE_UNION)
        return false;
    state[node] = 1;
    for (uint32_t i = 0; i < g->nodes[node].count; i++)
        if (union_cycle_from(g, g->alternatives[g->nodes[node].first + i], state))
            return true;
    state[node] = 2;
    return false;
}

static int first_byte_kind(uint8_t byte)
{
    switch (byte) {
    case '{': return 0;
    case '[': return 1;
    case '"': return 2;
    case 't': return 4;
    case 'f': return 5;
    case 'n': return 6;
    default: return 3;
    }
}

static uint32_t widest(const uint16_t *ways)
{
    uint32_t most = 0;
    for (int k = 0; k < FIRST_BYTE_KINDS; k++)
        most = ways[k] > most ? ways[k] : most;
    return most;
}

/* ways[node][kind]: the most threads a value of node whose first byte is of that kind keeps at once, nested
 * values included. Alternatives of different kinds part at the first byte; a value's parts are written one
 * at a time, so a container keeps as many as its widest part. Iterated to the fixed point (recursion). */
static bool bound_threads(compiler *c)
{
    const json_grammar *g = c->grammar;
    uint16_t (*ways)[FIRST_BYTE_KINDS] = calloc(g->node_count, sizeof *ways);
    if (!ways) {
        out_of_memory(c);
        return false;
    }
    bool changed = true, bounded = true;
    while (changed && bounded) {
        changed = false;
        for (uint32_t n = 0; n < g->node_count && bounded; n++) {
            const grammar_node *node = &g->nodes[n];
            uint32_t next[FIRST_BYTE_KINDS] = {0};
            switch (node->kind) {
            case NODE_ANY:
                for (int k = 0; k < FIRST_BYTE_KINDS; k++)
                    next[k] = 1;
                break;
            case NODE_OBJECT: {
                uint32_t most = node->open ? widest(ways[node->child]) : 0;
                for (uint32_t i = 0; i < node->count; i++) {
                    uint32_t part = widest(ways[g->key_nodes[node->first + i]]);
                    most = part > most ? part : most;
                }
                next[0] = most > 1 ? most : 1;
                break;
            }
            case NODE_ARRAY: {
                uint32_t most = widest(ways[node->child]);
                next[1] = most > 1 ? most : 1;
                break;
            }
            case NODE_STRING:
                next[2] = 1;
                break;
            case NODE_NUMBER:
            case NODE_INTEGER:
                next[3] = 1;
                break;
            case NODE_LITERALS:
                for (uint32_t i = 0; i < node->count; i++)
                    next[first_byte_kind((uint8_t)g->text[g->literals[node->first + i].offset])] = 1;
                break;
            case NODE_UNION:
                for (uint32_t i = 0; i < node->count; i++)
                    for (int k = 0; k < FIRST_BYTE_KINDS; k++)
                        next[k] += ways[g->alternatives[node->first + i]][k];
                break;
            default:
                break;
            }
            for (int k = 0; k < FIRST_BYTE_KINDS; k++) {
                if (next[k] > JSON_THREADS_MAX) {
                    bounded = false;
                    break;
                }
                if (next[k] != ways[n][k]) {
                    ways[n][k] = (uint16_t)next[k];
                    changed = true;
                }
            }
        }
    }
    free(ways);
    if (!bounded)
        fail(c, "the alternatives (anyOf, oneOf, type lists) could need more than %d parse states at once; "
                "make them differ sooner (a different type, or a distinct first key)", JSON_THREADS_MAX);
    return bounded;
}

static uint32_t depth_plus(uint32_t depth)
{
    return depth == DEPTH_UNREACHABLE ? depth : depth + 1;
}

/* min_depth: the fewest nested containers a value of each node needs (a required key's value, minItems'
 * items); the matcher starts no value that would not fit in what is left. */
static void measure_depths(json_grammar *g)
{
    for (uint32_t n = 0; n < g->node_count; n++) {
        uint8_t kind = g->nodes[n].kind;
        bool container = kind == NODE_OBJECT || kind == NODE_ARRAY || kind == NODE_UNION;
        g->nodes[n].min_depth = container ? DEPTH_UNREACHABLE : 0;
    }
    bool changed = true;
    while (changed) {
        changed = false;
        for (uint32_t n = 0; n < g->node_count; n++) {
            grammar_node *node = &g->nodes[n];
            uint32_t depth = node->min_depth;
            if (node->kind == NODE_OBJECT) {
                uint32_t deepest = 0;
                for (uint32_t i = 0; i < node->count; i++) {
                    uint32_t part = g->nodes[g->key_nodes[node->first + i]].min_depth;
                    if ((node->required >> i & 1) && part > deepest)
                        deepest = part;
                }
                depth = depth_plus(deepest);
            } else if (node->kind == NODE_ARRAY) {
                depth = node->min > 0 ? depth_plus(g->nodes[node->child].min_depth) : 1;
            } else if (node->kind == NODE_UNION) {
                depth = DEPTH_UNREACHABLE;
                for (uint32_t i = 0; i < node->count; i++) {
                    uint32_t part = g->nodes[g->alternatives[node->first + i]].min_depth;
                    depth = part < depth ? part : depth;
                }
            }
            if (depth < node->min_depth) {
                node->min_depth = depth;
                changed = true;
            }
        }
    }
}

static bool check_grammar(compiler *c)
{
    json_grammar *g = c->grammar;
    uint8_t *state = calloc(g->node_count, 1);
    if (!state) {
        out_of_memory(c);
        return false;
    }
    bool cycle = false;
    for (uint32_t n = 0; n < g->node_count && !cycle; n++)
        cycle = union_cycle_from(g, n, state);
    free(state);
    c->path_length = 0;
    c->path[0] = '\0';
    if (cycle) {
        fail(c, "a cycle of $ref/anyOf that never opens an object or array");
        return false;
    }
    if (!bound_threads(c))
        return false;
    measure_depths(g);
    if (g->nodes[g->root].min_depth > JSON_NESTING_MAX) {
        fail(c, "every value of the schema nests deeper than %d objects/arrays", JSON_NESTING_MAX);
        return false;
    }
    return true;
}

void json_grammar_free(json_grammar *grammar)
{
    if (!grammar)
        return;
    free(grammar->nodes);
    free(grammar->key_names);
    free(grammar->key_nodes);
    free(grammar->literals);
    free(grammar->alternatives);
    free(grammar->text);
    free(grammar);
}

json_grammar *json_grammar_create(const char *schema, size_t length, bmoe_error *err)
{
    json_grammar *grammar = calloc(1, sizeof *grammar);
    if (!grammar) {
        error_set_status(err, BMOE_ERR_OUT_OF_MEMORY, "json schema: out of memory");
        return NULL;
    }
    compiler c = {.grammar = grammar, .err = err};
    static const char *const both[] = {"false", "null", "true"};
    grammar->any = new_node(&c, NODE_ANY);
    grammar->keywords = grammar->any == JSON_NODE_NONE ? JSON_NODE_NONE : words_node(&c, both, 3);
    if (grammar->keywords == JSON_NODE_NONE) {
        json_grammar_free(grammar);
        return NULL;
    }
    cJSON *document = NULL;
    if (!schema) {
        /* json_object mode: an object with any keys and values. */
        grammar->root = new_node(&c, NODE_OBJECT);
        if (grammar->root != JSON_NODE_NONE) {
            grammar->nodes[grammar->root].open = true;
            grammar->nodes[grammar->root].child = grammar->any;
        }
    } else {
        const char *end = NULL;
        document = cJSON_ParseWithLengthOpts(schema, length, &end, false);
        while (document && end < schema + length && (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r'))
            end++;
        if (document && end < schema + length && *end != '\0') {
            cJSON_Delete(document);
            document = NULL; /* something after the schema */
        }
        if (!document) {
            size_t offset = end && end >= schema ? (size_t)(end - schema) : 0;
            error_set_status(err, BMOE_ERR_INVALID_ARGUMENT, "json schema: not valid JSON (near byte %zu)", offset);
            json_grammar_free(grammar);
            return NULL;
        }
        c.document = document;
        grammar->root = compile_target(&c, document);
    }
    bool ok = grammar->root != JSON_NODE_NONE && check_grammar(&c);
    cJSON_Delete(document);
    free(c.targets);
    if (!ok) {
        json_grammar_free(grammar);
        return NULL;
    }
    return grammar;
}
