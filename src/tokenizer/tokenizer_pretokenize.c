/* Pre-tokenization: the catalog of tokenizer.ggml.pre values and their split
 * patterns (spec/tokenizers.md section 6), compiled once per tokenizer with
 * PCRE2 in UTF mode, and the split of a text fragment into pieces. Also the
 * UTF-8 helpers the encoder needs. */
#include <stdlib.h>
#include <string.h>

#include "../base/text.h"
#include "tokenizer_internal.h"

/* Patterns exactly as the spec lists them; \s and \S are rewritten at compile
 * time to the spec's explicit whitespace set (PCRE2's own \s leaves out U+0085). */
static const char *const pattern_gpt2[] = {
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
};
static const char *const pattern_llama3[] = {
    ("(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+"
     "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"),
};
static const char *const pattern_qwen2[] = {
    ("(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+"
     "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"),
};
static const char *const pattern_qwen35[] = {
    ("(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}"
     "\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"),
};
static const char *const pattern_bailingmoe[] = {
    ("'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s"
     "\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"),
};
static const char *const pattern_deepseek_llm[] = {
    "[\r\n]",
    ("\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C"
     "4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}"
     "\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x"
     "{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD"
     "}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-"
     "\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}"
     "\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x"
     "{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1"
     "FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{210"
     "7}\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-"
     "\\x{212D}\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x"
     "{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2C"
     "F3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B"
     "}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}"
     "\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{1"
     "0C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+"),
    ("\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}"
     "]+"),
    "\\s+$",
    "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+",
    "\\p{N}+",
};
static const char *const pattern_deepseek3_llm[] = {
    "\\p{N}{1,3}",
    "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+",
    ("[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}"
     "\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"),
};
static const char *const pattern_default[] = {
    "[\\p{P}\\$\\+<=>\\^~\\|]+",
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
    "\\p{N}+",
    "[0-9][0-9][0-9]",
};
/* For o200k the tokenizer's own regex (Hugging Face tokenizer.json) is used,
 * not llama.cpp's approximation: PCRE2 has the Unicode case classes, so
 * non-ASCII letters and marks split as the model's tokenizer splits them. */
static const char *const pattern_gpt4o[] = {
    ("[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
     "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
     "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*"
     "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
     "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"),
};
static const char *const pattern_deepseek_coder[] = {
    "[\r\n]",
    "\\s?\\p{L}+",
    "\\s?\\p{P}+",
    "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+",
    "\\p{N}",
};
static const char *const pattern_starcoder[] = {
    "\\p{N}",
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
};
static const char *const pattern_falcon[] = {
    "[\\p{P}\\$\\+<=>\\^~\\|`]+",
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
    "[0-9][0-9][0-9]",
};

#define PATTERNS(list) list, (int)(sizeof(list) / sizeof(list[0]))

enum pre_flags {
    PRE_CLEAN_SPACES = 1 << 0,
    PRE_IGNORE_MERGES = 1 << 1,
    PRE_ADD_BOS = 1 << 2,
    PRE_NEWLINE_SPLIT = 1 << 3, /* GEMMA4: no regex, no byte-level encoding */
};

typedef struct pre_entry {
    const char *name;
    const char *const *patterns;
    int n_patterns;
    unsigned flags;
} pre_entry;

static const pre_entry pre_catalog[] = {
    {"default", PATTERNS(pattern_default), PRE_CLEAN_SPACES},
    {"llama3", PATTERNS(pattern_llama3), PRE_IGNORE_MERGES | PRE_ADD_BOS | PRE_CLEAN_SPACES},
    {"llama-v3", PATTERNS(pattern_llama3), PRE_IGNORE_MERGES | PRE_ADD_BOS | PRE_CLEAN_SPACES},
    {"llama-bpe", PATTERNS(pattern_llama3), PRE_IGNORE_MERGES | PRE_ADD_BOS | PRE_CLEAN_SPACES},
    {"falcon3", PATTERNS(pattern_llama3), PRE_IGNORE_MERGES | PRE_ADD_BOS | PRE_CLEAN_SPACES},
    {"falcon-h1", PATTERNS(pattern_llama3), PRE_IGNORE_MERGES | PRE_ADD_BOS | PRE_CLEAN_SPACES},
    {"pixtral", PATTERNS(pattern_llama3), PRE_IGNORE_MERGES | PRE_ADD_BOS | PRE_CLEAN_SPACES},
    {"midm-2.0", PATTERNS(pattern_llama3), PRE_IGNORE_MERGES | PRE_ADD_BOS | PRE_CLEAN_SPACES},
    {"lfm2", PATTERNS(pattern_llama3), PRE_IGNORE_MERGES | PRE_ADD_BOS | PRE_CLEAN_SPACES},
    {"jina-v5-nano", PATTERNS(pattern_llama3), PRE_IGNORE_MERGES | PRE_ADD_BOS | PRE_CLEAN_SPACES},
    {"dbrx", PATTERNS(pattern_llama3), PRE_CLEAN_SPACES},
    {"smaug-bpe", PATTERNS(pattern_llama3), PRE_CLEAN_SPACES},
    {"qwen2", PATTERNS(pattern_qwen2), 0},
    {"deepseek-r1-qwen", PATTERNS(pattern_qwen2), 0},
    {"kormo", PATTERNS(pattern_qwen2), 0},
    {"f2llmv2", PATTERNS(pattern_qwen2), 0},
    {"megrez", PATTERNS(pattern_qwen2), PRE_CLEAN_SPACES},
    {"stablelm2", PATTERNS(pattern_qwen2), PRE_CLEAN_SPACES},
    {"hunyuan", PATTERNS(pattern_qwen2), PRE_CLEAN_SPACES},
    {"solar-open", PATTERNS(pattern_qwen2), PRE_CLEAN_SPACES},
    {"qwen35", PATTERNS(pattern_qwen35), 0},
    {"gpt-4o", PATTERNS(pattern_gpt4o), 0},
    {"llama4", PATTERNS(pattern_gpt4o), 0},
    {"kanana2", PATTERNS(pattern_gpt4o), 0},
    {"talkie", PATTERNS(pattern_gpt4o), 0},
    {"minimax-m2", PATTERNS(pattern_gpt4o), 0},
    {"deepseek-llm", PATTERNS(pattern_deepseek_llm), 0},
    {"deepseek-v3", PATTERNS(pattern_deepseek3_llm), 0},
    {"hunyuan-dense", PATTERNS(pattern_deepseek3_llm), 0},
    {"joyai-llm", PATTERNS(pattern_deepseek3_llm), 0},
    {"deepseek-coder", PATTERNS(pattern_deepseek_coder), 0},
    {"bailingmoe", PATTERNS(pattern_bailingmoe), 0},
    {"bailingmoe2", PATTERNS(pattern_bailingmoe), 0},
    {"llada-moe", PATTERNS(pattern_bailingmoe), 0},
    {"gpt-2", PATTERNS(pattern_gpt2), PRE_CLEAN_SPACES},
    {"phi-2", PATTERNS(pattern_gpt2), PRE_CLEAN_SPACES},
    {"jina-es", PATTERNS(pattern_gpt2), PRE_CLEAN_SPACES},
    {"jina-de", PATTERNS(pattern_gpt2), PRE_CLEAN_SPACES},
    {"gigachat", PATTERNS(pattern_gpt2), PRE_CLEAN_SPACES},
    {"jina-v2-es", PATTERNS(pattern_gpt2), PRE_CLEAN_SPACES},
    {"jina-v2-de", PATTERNS(pattern_gpt2), PRE_CLEAN_SPACES},
    {"a.x-4.0", PATTERNS(pattern_gpt2), PRE_CLEAN_SPACES},
    {"mellum", PATTERNS(pattern_gpt2), PRE_CLEAN_SPACES},
    {"modern-bert", PATTERNS(pattern_gpt2), PRE_CLEAN_SPACES},
    {"jina-v1-en", PATTERNS(pattern_gpt2), PRE_CLEAN_SPACES},
    {"jina-v2-code", PATTERNS(pattern_gpt2), PRE_CLEAN_SPACES},
    {"roberta-bpe", PATTERNS(pattern_gpt2), PRE_CLEAN_SPACES},
    {"exaone4", PATTERNS(pattern_gpt2), PRE_CLEAN_SPACES},
    {"olmo", PATTERNS(pattern_gpt2), PRE_CLEAN_SPACES},
    {"mpt", PATTERNS(pattern_gpt2), PRE_CLEAN_SPACES},
    {"jais", PATTERNS(pattern_gpt2), PRE_CLEAN_SPACES},
    {"trillion", PATTERNS(pattern_gpt2), PRE_CLEAN_SPACES},
    {"granite-docling", PATTERNS(pattern_gpt2), PRE_CLEAN_SPACES},
    {"starcoder", PATTERNS(pattern_starcoder), PRE_CLEAN_SPACES},
    {"refact", PATTERNS(pattern_starcoder), PRE_CLEAN_SPACES},
    {"command-r", PATTERNS(pattern_starcoder), PRE_CLEAN_SPACES},
    {"smollm", PATTERNS(pattern_starcoder), PRE_CLEAN_SPACES},
    {"codeshell", PATTERNS(pattern_starcoder), PRE_CLEAN_SPACES},
    {"exaone", PATTERNS(pattern_starcoder), PRE_CLEAN_SPACES},
    {"minerva-7b", PATTERNS(pattern_starcoder), PRE_CLEAN_SPACES},
    {"mellum2", PATTERNS(pattern_starcoder), PRE_CLEAN_SPACES},
    {"falcon", PATTERNS(pattern_falcon), PRE_CLEAN_SPACES},
    {"gemma4", NULL, 0, PRE_NEWLINE_SPLIT | PRE_CLEAN_SPACES},
    {"granite-embed-multi-311m", NULL, 0, PRE_NEWLINE_SPLIT | PRE_CLEAN_SPACES},
};

/* The whitespace set of spec 5.1, as class members. */
static const char whitespace_members[] =
    "\\t-\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

/* Rewrites \s and \S into explicit classes; writes at most capacity bytes
 * (NUL included) and returns the needed length, or -1 for \S inside a class. */
static long rewrite_whitespace(const char *pattern, char *out, size_t capacity)
{
    size_t used = 0;
    bool in_class = false;
    size_t class_start = 0;
#define EMIT(str, len)                                         \
    do {                                                       \
        if (used + (len) < capacity)                           \
            memcpy(out + used, (str), (len));                  \
        used += (len);                                         \
    } while (0)
    size_t member_length = strlen(whitespace_members);
    for (size_t i = 0; pattern[i]; i++) {
        char c = pattern[i];
        if (c == '\\' && pattern[i + 1]) {
            char e = pattern[i + 1];
            if (e == 's' || e == 'S') {
                if (in_class) {
                    if (e == 'S')
                        return -1;
                    EMIT(whitespace_members, member_length);
                } else {
                    EMIT(e == 's' ? "[" : "[^", e == 's' ? 1u : 2u);
                    EMIT(whitespace_members, member_length);
                    EMIT("]", 1);
                }
            } else {
                EMIT(pattern + i, 2);
            }
            i++;
            continue;
        }
        if (!in_class && c == '[') {
            in_class = true;
            class_start = i + 1;
            if (pattern[class_start] == '^')
                class_start++;
        } else if (in_class && c == ']' && i > class_start) {
            in_class = false;
        }
        EMIT(&c, 1);
    }
#undef EMIT
    if (used < capacity)
        out[used] = '\0';
    else if (capacity > 0)
        out[capacity - 1] = '\0';
    return (long)used;
}

static const pre_entry *pre_find(const char *name)
{
    if (!name || !*name)
        name = "default";
    for (size_t i = 0; i < sizeof(pre_catalog) / sizeof(pre_catalog[0]); i++)
        if (strcmp(pre_catalog[i].name, name) == 0)
            return &pre_catalog[i];
    return NULL;
}

int tokenizer_pre_setup(tokenizer *tok, const char *pre, bmoe_error *err)
{
    const pre_entry *entry = pre_find(pre);
    if (!entry) {
        char shown[96];
        return error_set(err, "tokenizer: unknown pre-tokenizer type '%s' (tokenizer.ggml.pre)",
                         text_escape_string(pre, shown, sizeof shown));
    }
    tok->newline_split = (entry->flags & PRE_NEWLINE_SPLIT) != 0;
    tok->byte_level = !tok->newline_split;
    tok->escape_whitespaces = tok->newline_split;
    tok->clean_spaces = (entry->flags & PRE_CLEAN_SPACES) != 0;
    tok->ignore_merges = (entry->flags & PRE_IGNORE_MERGES) != 0;
    tok->add_bos = (entry->flags & PRE_ADD_BOS) != 0;
    tok->n_patterns = 0;
    for (int i = 0; i < entry->n_patterns; i++) {
        long needed = rewrite_whitespace(entry->patterns[i], NULL, 0);
        if (needed < 0)
            return error_set(err, "tokenizer: pre-tokenizer '%s' pattern %d uses \\S in a class",
                             entry->name, i + 1);
        char *rewritten = malloc((size_t)needed + 1);
        if (!rewritten)
            return error_set(err, "tokenizer: out of memory compiling pre-tokenizer '%s'", entry->name);
        rewrite_whitespace(entry->patterns[i], rewritten, (size_t)needed + 1);
        int code = 0;
        PCRE2_SIZE offset = 0;
        pcre2_code *compiled = pcre2_compile((PCRE2_SPTR)rewritten, (PCRE2_SIZE)needed,
                                             PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &code,
                                             &offset, NULL);
        free(rewritten);
        if (!compiled) {
            PCRE2_UCHAR message[160];
            pcre2_get_error_message(code, message, sizeof(message));
            return error_set(err, "tokenizer: pre-tokenizer '%s' pattern %d does not compile at %zu: %s",
                             entry->name, i + 1, (size_t)offset, (const char *)message);
        }
        /* JIT is an optimisation: without it pcre2_match interprets. */
        (void)pcre2_jit_compile(compiled, PCRE2_JIT_COMPLETE);
        tok->patterns[tok->n_patterns++] = compiled;
    }
    return 0;
}

void tokenizer_pre_release(tokenizer *tok)
{
    for (int i = 0; i < tok->n_patterns; i++)
        pcre2_code_free(tok->patterns[i]);
    tok->n_patterns = 0;
}

int tokenizer_scratch_init(const tokenizer *tok, tokenizer_scratch *scratch, bmoe_error *err)
{
    memset(scratch, 0, sizeof(*scratch));
    if (tok->n_patterns == 0)
        return 0;
    scratch->match = pcre2_match_data_create(1, NULL);
    scratch->match_context = pcre2_match_context_create(NULL);
    /* The default JIT stack is 32 KiB, too small for long whitespace runs. */
    scratch->jit_stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, NULL);
    if (!scratch->match || !scratch->match_context)
        return error_set(err, "tokenizer: out of memory for regex match data");
    if (scratch->jit_stack)
        pcre2_jit_stack_assign(scratch->match_context, NULL, scratch->jit_stack);
    return 0;
}

void tokenizer_scratch_free(tokenizer_scratch *scratch)
{
    free(scratch->clean);
    free(scratch->escaped);
    free(scratch->encoded);
    free(scratch->fragments);
    free(scratch->pieces);
    free(scratch->pieces_next);
    free(scratch->symbols);
    free(scratch->heap);
    if (scratch->match)
        pcre2_match_data_free(scratch->match);
    if (scratch->match_context)
        pcre2_match_context_free(scratch->match_context);
    if (scratch->jit_stack)
        pcre2_jit_stack_free(scratch->jit_stack);
    memset(scratch, 0, sizeof(*scratch));
}

int tokenizer_grow(void **buffer, size_t *capacity, size_t need, size_t element_size)
{
    if (need <= *capacity)
        return 0;
    size_t grown = *capacity ? *capacity : 16;
    while (grown < need) {
        if (grown > SIZE_MAX / 2)
            return -1;
        grown *= 2;
    }
    if (grown > SIZE_MAX / element_size)
        return -1;
    void *resized = realloc(*buffer, grown * element_size);
    if (!resized)
        return -1;
    *buffer = resized;
    *capacity = grown;
    return 0;
}

static int push_piece(tokenizer_scratch *scratch, size_t start, size_t length)
{
    if (length == 0)
        return 0;
    if (tokenizer_grow((void **)&scratch->pieces_next, &scratch->pieces_next_capacity,
                       scratch->n_pieces_next + 1, sizeof(tokenizer_span)) != 0)
        return -1;
    scratch->pieces_next[scratch->n_pieces_next++] = (tokenizer_span){start, length, -1};
    return 0;
}

size_t tokenizer_utf8_length(unsigned char lead)
{
    static const unsigned char lengths[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lengths[lead >> 4];
}

/* Splits every current piece by one pattern: matches and the gaps between
 * them both become pieces; the pattern sees each piece as a whole subject. */
static int split_by_pattern(const tokenizer *tok, tokenizer_scratch *scratch, int index,
                            const char *text, bmoe_error *err)
{
    const pcre2_code *code = tok->patterns[index];
    scratch->n_pieces_next = 0;
    for (size_t p = 0; p < scratch->n_pieces; p++) {
        const char *subject = text + scratch->pieces[p].start;
        size_t length = scratch->pieces[p].length;
        size_t base = scratch->pieces[p].start;
        size_t gap_start = 0, offset = 0;
        while (offset < length) {
            int rc = pcre2_match(code, (PCRE2_SPTR)subject, length, offset, PCRE2_NO_UTF_CHECK,
                                 scratch->match, scratch->match_context);
            if (rc == PCRE2_ERROR_NOMATCH)
                break;
            if (rc < 0) {
                PCRE2_UCHAR message[160];
                pcre2_get_error_message(rc, message, sizeof(message));
                return error_set(err, "tokenizer: pre-tokenizer pattern %d failed at byte %zu: %s",
                                 index + 1, base + offset, (const char *)message);
            }
            PCRE2_SIZE *vector = pcre2_get_ovector_pointer(scratch->match);
            size_t match_start = vector[0], match_end = vector[1];
            if (match_end == match_start) {
                /* An empty match splits nothing; step over one character. */
                offset = match_start + tokenizer_utf8_length((unsigned char)subject[match_start]);
                continue;
            }
            if (push_piece(scratch, base + gap_start, match_start - gap_start) != 0 ||
                push_piece(scratch, base + match_start, match_end - match_start) != 0)
                return error_set(err, "tokenizer: out of memory splitting text");
            gap_start = offset = match_end;
        }
        if (push_piece(scratch, base + gap_start, length - gap_start) != 0)
            return error_set(err, "tokenizer: out of memory splitting text");
    }
    tokenizer_span *swap = scratch->pieces;
    size_t swap_capacity = scratch->pieces_capacity;
    scratch->pieces = scratch->pieces_next;
    scratch->pieces_capacity = scratch->pieces_next_capacity;
    scratch->n_pieces = scratch->n_pieces_next;
    scratch->pieces_next = swap;
    scratch->pieces_next_capacity = swap_capacity;
    scratch->n_pieces_next = 0;
    return 0;
}

int tokenizer_pre_split(const tokenizer *tok, tokenizer_scratch *scratch, const char *text,
                        size_t length, bmoe_error *err)
{
    scratch->n_pieces = 0;
    if (length == 0)
        return 0;
    if (tok->newline_split) {
        /* [^\n]+|[\n]+ without a regex engine. */
        scratch->n_pieces_next = 0;
        size_t start = 0;
        while (start < length) {
            bool newline = text[start] == '\n';
            size_t end = start + 1;
            while (end < length && (text[end] == '\n') == newline)
                end++;
            if (push_piece(scratch, start, end - start) != 0)
                return error_set(err, "tokenizer: out of memory splitting text");
            start = end;
        }
    } else {
        if (tokenizer_grow((void **)&scratch->pieces, &scratch->pieces_capacity, 1,
                           sizeof(tokenizer_span)) != 0)
            return error_set(err, "tokenizer: out of memory splitting text");
        scratch->pieces[0] = (tokenizer_span){0, length, -1};
        scratch->n_pieces = 1;
        for (int i = 0; i < tok->n_patterns; i++)
            if (split_by_pattern(tok, scratch, i, text, err) != 0)
                return -1;
        return 0;
    }
    tokenizer_span *swap = scratch->pieces;
    size_t swap_capacity = scratch->pieces_capacity;
    scratch->pieces = scratch->pieces_next;
    scratch->pieces_capacity = scratch->pieces_next_capacity;
    scratch->n_pieces = scratch->n_pieces_next;
    scratch->pieces_next = swap;
    scratch->pieces_next_capacity = swap_capacity;
    return 0;
}

/* Length of the valid UTF-8 sequence at text[0..available), 0 if invalid
 * (bad lead, missing continuation, overlong, surrogate, above U+10FFFF). */
static size_t utf8_valid_length(const unsigned char *text, size_t available)
{
    unsigned char lead = text[0];
    if (lead < 0x80)
        return 1;
    size_t length;
    unsigned char low = 0x80, high = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
        length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        length = 3;
        if (lead == 0xE0)
            low = 0xA0;
        if (lead == 0xED)
            high = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        length = 4;
        if (lead == 0xF0)
            low = 0x90;
        if (lead == 0xF4)
            high = 0x8F;
    } else {
        return 0;
    }
    if (available < length)
        return 0;
    if (text[1] < low || text[1] > high)
        return 0;
    for (size_t i = 2; i < length; i++)
        if ((text[i] & 0xC0) != 0x80)
            return 0;
    return length;
}

int tokenizer_utf8_sanitize(tokenizer_scratch *scratch, const char *text, size_t length,
                            size_t *out_length, bmoe_error *err)
{
    if (length > (SIZE_MAX - 1) / 3)
        return error_set(err, "tokenizer: text of %zu bytes is too long", length);
    if (tokenizer_grow((void **)&scratch->clean, &scratch->clean_capacity, length * 3 + 1, 1) != 0)
        return error_set(err, "tokenizer: out of memory for %zu bytes of text", length);
    const unsigned char *in = (const unsigned char *)text;
    char *out = scratch->clean;
    size_t used = 0;
    for (size_t i = 0; i < length;) {
        size_t n = utf8_valid_length(in + i, length - i);
        if (n == 0) {
            memcpy(out + used, "\xEF\xBF\xBD", 3);
            used += 3;
            i++;
        } else {
            memcpy(out + used, in + i, n);
            used += n;
            i += n;
        }
    }
    out[used] = '\0';
    *out_length = used;
    return 0;
}
