/* bmoe-mkmodel vocabulary: a small but real byte-level BPE tokenizer
 * (tokenizer.ggml.model "gpt2"). Ids 0..255 are the 256 GPT-2 byte tokens in
 * byte order, then the merges learned from a built-in English sample (the
 * most frequent adjacent pair first, so the file tokenizes English into
 * fewer tokens than bytes), then the family's special tokens, then
 * "<|placeholder_N|>" fillers up to the requested size. When the requested
 * size reaches the family's real vocabulary, the special tokens sit at their
 * real ids (e.g. Qwen3 <|im_end|> = 151645) and placeholders fill the gap.
 * Owns the token and merge strings. */
#include <stdlib.h>
#include <string.h>

#include "mkmodel.h"

enum {
    TOKEN_NORMAL = 1,
    TOKEN_CONTROL = 3,
    TOKEN_USER_DEFINED = 4,
    TOKEN_UNUSED = 5
};

typedef struct special_token {
    uint32_t real_id;
    const char *text;
    int32_t type;
} special_token;

/* Added tokens of each family with their ids in the real vocabulary. HF
 * "special" added tokens are CONTROL; the non-special ones (Qwen3's <think>,
 * <tool_call>, FIM markers) are USER_DEFINED, as the GGUF converter marks them. */
static const special_token qwen3_specials[] = {
    {151643, "<|endoftext|>", TOKEN_CONTROL},      {151644, "<|im_start|>", TOKEN_CONTROL},
    {151645, "<|im_end|>", TOKEN_CONTROL},         {151646, "<|object_ref_start|>", TOKEN_CONTROL},
    {151647, "<|object_ref_end|>", TOKEN_CONTROL}, {151648, "<|box_start|>", TOKEN_CONTROL},
    {151649, "<|box_end|>", TOKEN_CONTROL},        {151650, "<|quad_start|>", TOKEN_CONTROL},
    {151651, "<|quad_end|>", TOKEN_CONTROL},       {151652, "<|vision_start|>", TOKEN_CONTROL},
    {151653, "<|vision_end|>", TOKEN_CONTROL},     {151654, "<|vision_pad|>", TOKEN_CONTROL},
    {151655, "<|image_pad|>", TOKEN_CONTROL},      {151656, "<|video_pad|>", TOKEN_CONTROL},
    {151657, "<tool_call>", TOKEN_USER_DEFINED},   {151658, "</tool_call>", TOKEN_USER_DEFINED},
    {151659, "<|fim_prefix|>", TOKEN_USER_DEFINED}, {151660, "<|fim_middle|>", TOKEN_USER_DEFINED},
    {151661, "<|fim_suffix|>", TOKEN_USER_DEFINED}, {151662, "<|fim_pad|>", TOKEN_USER_DEFINED},
    {151663, "<|repo_name|>", TOKEN_USER_DEFINED}, {151664, "<|file_sep|>", TOKEN_USER_DEFINED},
    {151665, "<tool_response>", TOKEN_USER_DEFINED}, {151666, "</tool_response>", TOKEN_USER_DEFINED},
    {151667, "<think>", TOKEN_USER_DEFINED},       {151668, "</think>", TOKEN_USER_DEFINED},
};

static const special_token gpt_oss_specials[] = {
    {199998, "<|startoftext|>", TOKEN_CONTROL}, {199999, "<|endoftext|>", TOKEN_CONTROL},
    {200002, "<|return|>", TOKEN_CONTROL},      {200003, "<|constrain|>", TOKEN_CONTROL},
    {200005, "<|channel|>", TOKEN_CONTROL},     {200006, "<|start|>", TOKEN_CONTROL},
    {200007, "<|end|>", TOKEN_CONTROL},         {200008, "<|message|>", TOKEN_CONTROL},
    {200012, "<|call|>", TOKEN_CONTROL},        {200018, "<|endofprompt|>", TOKEN_CONTROL},
};

static const special_token llama3_specials[] = {
    {128000, "<|begin_of_text|>", TOKEN_CONTROL},  {128001, "<|end_of_text|>", TOKEN_CONTROL},
    {128006, "<|start_header_id|>", TOKEN_CONTROL}, {128007, "<|end_header_id|>", TOKEN_CONTROL},
    {128008, "<|eom_id|>", TOKEN_CONTROL},         {128009, "<|eot_id|>", TOKEN_CONTROL},
    {128010, "<|python_tag|>", TOKEN_CONTROL},
};

typedef struct family {
    const special_token *specials;
    uint32_t special_count;
    const char *pre;
    const char *bos, *eos, *eot, *pad; /* texts of the special ids; NULL = none */
    bool add_bos;
    const char *chat_template;
} family;

static family family_of(enum mkmodel_arch arch)
{
    family f;
    memset(&f, 0, sizeof f);
    switch (arch) {
    case MKMODEL_QWEN3MOE:
    case MKMODEL_QWEN35MOE:
    case MKMODEL_LFM2MOE:
    case MKMODEL_QWEN2MOE:
    case MKMODEL_OLMOE:
    case MKMODEL_BAILINGMOE2:
    case MKMODEL_GLM4MOE:
    case MKMODEL_DEEPSEEK2:
    case MKMODEL_DEEPSEEK4:
        /* Qwen3.5, LFM2 and Qwen2-MoE chat in ChatML too; their ids and
         * templates here are Qwen3's, and OLMoE, Ling, GLM and DeepSeek get the same (a
         * random model needs a working tokenizer, not theirs) */
        f.specials = qwen3_specials;
        f.special_count = sizeof qwen3_specials / sizeof qwen3_specials[0];
        f.pre = "qwen2";
        f.bos = "<|endoftext|>";
        f.eos = "<|im_end|>";
        f.pad = "<|endoftext|>";
        f.chat_template = mkmodel_template_qwen3;
        if (arch == MKMODEL_QWEN35MOE)
            f.pre = "qwen35";
        break;
    case MKMODEL_GEMMA4:
        /* Gemma's own tokenizer is not byte-level BPE; the oracle's gemma4
         * files use this one, with a BOS and no template */
        f.specials = qwen3_specials;
        f.special_count = sizeof qwen3_specials / sizeof qwen3_specials[0];
        f.pre = "default";
        f.bos = "<|endoftext|>";
        f.eos = "<|im_end|>";
        f.add_bos = true;
        break;
    case MKMODEL_GPT_OSS:
        f.specials = gpt_oss_specials;
        f.special_count = sizeof gpt_oss_specials / sizeof gpt_oss_specials[0];
        f.pre = "gpt-4o";
        f.bos = "<|startoftext|>";
        f.eos = "<|return|>";
        f.eot = "<|end|>";
        f.pad = "<|endoftext|>";
        f.chat_template = mkmodel_template_gpt_oss;
        break;
    case MKMODEL_LLAMA:
        f.specials = llama3_specials;
        f.special_count = sizeof llama3_specials / sizeof llama3_specials[0];
        f.pre = "llama-bpe";
        f.bos = "<|begin_of_text|>";
        f.eos = "<|eot_id|>";
        f.eot = "<|eot_id|>";
        f.add_bos = true;
        f.chat_template = mkmodel_template_llama3;
        break;
    }
    return f;
}

/* The text the merges are learned from (original prose, ASCII only). */
static const char sample_text[] =
    "The little town woke slowly on the morning of the fair. The baker was the first to open his "
    "door, and the smell of warm bread went down the street before him. Children ran between the "
    "carts, and their parents called after them to stay close. In the square the men were putting "
    "up the last of the tents, while the women laid out cloth, apples, honey and cheese on the long "
    "tables. An old man with a grey beard sat under the tree and played a song that everyone in the "
    "town knew. When the sun was high, the mayor stood on the steps of the hall and thanked the "
    "people for coming. He said that the harvest had been good this year, that the river had not "
    "flooded the fields, and that there would be enough for the winter. The people clapped and "
    "cheered, and then they went back to their buying and selling.\n"
    "A computer program is a list of instructions that a machine follows one after another. The "
    "instructions are written in a language that people can read, and then they are turned into "
    "the simple operations that the processor can carry out. A good program is clear: each part "
    "does one thing, and it says what it does. When something goes wrong, the program should tell "
    "the user what happened and where, in one line, instead of printing nothing or crashing. "
    "Programs that read files must never trust the contents of those files, because a file can be "
    "damaged, cut short, or written by someone who wants to cause trouble.\n"
    "Learning to cook is a lot like learning to write. You start by following the recipe exactly, "
    "measuring every spoon of salt and every cup of flour. After a while you begin to understand "
    "why the recipe works, and then you can change it. You learn that the onions should be soft "
    "before the garlic goes in, that the pan must be hot before the meat touches it, and that the "
    "sauce needs time. The best cooks taste their food all the time, and they are not afraid to "
    "throw away something that did not turn out well and start again.\n"
    "The weather in the mountains changes quickly. In the morning the sky can be clear and blue, "
    "and by the afternoon the clouds come down over the peaks and the rain begins. Walkers who know "
    "the mountains always carry a warm coat, some water and a little food, even on a sunny day. "
    "They tell someone where they are going and when they expect to be back. If the path becomes "
    "hard to see, they stop, they wait, and they do not take chances. The mountains will still be "
    "there tomorrow, and so will the walkers who were careful today.\n"
    "Reading is one of the few things that can take you to another place without moving from your "
    "chair. A story can show you how other people think and feel, what they want and what they are "
    "afraid of. Some of the best stories are very short, and some of the longest are the easiest to "
    "read. There is no right way to read: some people read every word, some skip to the end to see "
    "how it turns out, and some read the same book again and again, finding something new each "
    "time.\n";

/* GPT-2 byte-to-unicode (tokenizers.md 5.2): the code point a byte becomes. */
static uint32_t byte_to_codepoint(uint32_t byte)
{
    if ((byte >= 0x21 && byte <= 0x7e) || (byte >= 0xa1 && byte <= 0xac) || (byte >= 0xae))
        return byte;
    if (byte <= 0x20)
        return 0x100 + byte;
    if (byte == 0x7f)
        return 0x121;
    if (byte >= 0x80 && byte <= 0xa0)
        return 0x122 + (byte - 0x80);
    return 0x143; /* 0xad */
}

static size_t utf8_encode(uint32_t codepoint, char *out)
{
    if (codepoint < 0x80) {
        out[0] = (char)codepoint;
        return 1;
    }
    /* The byte table only reaches U+0143: two bytes suffice. */
    out[0] = (char)(0xc0 | (codepoint >> 6));
    out[1] = (char)(0x80 | (codepoint & 0x3f));
    return 2;
}

static char *string_copy(const char *text)
{
    size_t length = strlen(text);
    char *copy = malloc(length + 1);
    if (copy)
        memcpy(copy, text, length + 1);
    return copy;
}

static char *string_join(const char *left, const char *separator, const char *right)
{
    size_t a = strlen(left), b = strlen(separator), c = strlen(right);
    char *joined = malloc(a + b + c + 1);
    if (!joined)
        return NULL;
    memcpy(joined, left, a);
    memcpy(joined + a, separator, b);
    memcpy(joined + a + b, right, c + 1);
    return joined;
}

static bool is_letter(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* The training text cut roughly as the qwen2 / gpt-4o pre-tokenizers cut it
 * (an optional space followed by letters, single digits, an optional space
 * followed by punctuation, whitespace runs), so that merges never span what
 * the tokenizer keeps apart. Each piece is a list of token ids; pieces are
 * separated by -1. */
static bool is_punctuation(char c)
{
    return c != ' ' && c != '\n' && !is_letter(c) && !(c >= '0' && c <= '9');
}

static int split_sample(int32_t **out_symbols, size_t *out_count)
{
    size_t length = sizeof sample_text - 1;
    int32_t *symbols = malloc((2 * length + 1) * sizeof *symbols);
    if (!symbols)
        return -1;
    size_t count = 0;
    size_t i = 0;
    while (i < length) {
        size_t start = i;
        char c = sample_text[i];
        char next = i + 1 < length ? sample_text[i + 1] : '\0';
        if (c == ' ' && is_letter(next)) {
            i++;
            while (i < length && is_letter(sample_text[i]))
                i++;
        } else if (c == ' ' && next != '\0' && is_punctuation(next)) {
            i++;
            while (i < length && is_punctuation(sample_text[i]))
                i++;
        } else if (is_letter(c)) {
            while (i < length && is_letter(sample_text[i]))
                i++;
        } else if (c >= '0' && c <= '9') {
            i++;
        } else if (c == ' ' || c == '\n') {
            while (i < length && sample_text[i] == c)
                i++;
        } else {
            while (i < length && is_punctuation(sample_text[i]))
                i++;
        }
        for (size_t j = start; j < i; j++)
            symbols[count++] = (unsigned char)sample_text[j] /* byte tokens are ids 0..255 */;
        symbols[count++] = -1;
    }
    *out_symbols = symbols;
    *out_count = count;
    return 0;
}

static int add_token(mkmodel_vocab *vocab, uint32_t capacity, char *text, int32_t type)
{
    if (!text || vocab->count >= capacity) {
        free(text);
        return -1;
    }
    vocab->tokens[vocab->count] = text;
    vocab->types[vocab->count] = type;
    vocab->count++;
    return 0;
}

static int32_t find_token(const mkmodel_vocab *vocab, const char *text)
{
    for (uint32_t i = 0; i < vocab->count; i++)
        if (strcmp(vocab->tokens[i], text) == 0)
            return (int32_t)i;
    return -1;
}

static int compare_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Learns up to max_merges merges from the sample: repeatedly the adjacent
 * pair seen most often (at least twice; ties to the smallest ids), which
 * becomes a new token unless its text already is one. */
static int learn_merges(mkmodel_vocab *vocab, uint32_t capacity, uint32_t max_merges,
                        bmoe_error *err)
{
    int32_t *symbols = NULL;
    size_t count = 0;
    uint64_t *pairs = NULL;
    if (split_sample(&symbols, &count) != 0)
        goto out_of_memory;
    pairs = malloc(count * sizeof *pairs + 1);
    vocab->merges = calloc(max_merges ? max_merges : 1, sizeof *vocab->merges);
    if (!pairs || !vocab->merges)
        goto out_of_memory;
    while (vocab->merge_count < max_merges) {
        size_t n_pairs = 0;
        for (size_t i = 0; i + 1 < count; i++)
            if (symbols[i] >= 0 && symbols[i + 1] >= 0)
                pairs[n_pairs++] = (uint64_t)symbols[i] << 32 | (uint32_t)symbols[i + 1];
        qsort(pairs, n_pairs, sizeof *pairs, compare_u64);
        size_t best = 0;
        uint64_t best_pair = 0;
        for (size_t i = 0; i < n_pairs;) {
            size_t j = i;
            while (j < n_pairs && pairs[j] == pairs[i])
                j++;
            if (j - i > best) { /* strictly greater: ties keep the smallest pair */
                best = j - i;
                best_pair = pairs[i];
            }
            i = j;
        }
        if (best < 2)
            break;
        int32_t left = (int32_t)(best_pair >> 32), right = (int32_t)(best_pair & 0xffffffffu);
        char *text = string_join(vocab->tokens[left], "", vocab->tokens[right]);
        char *merge = string_join(vocab->tokens[left], " ", vocab->tokens[right]);
        if (!text || !merge) {
            free(text);
            free(merge);
            goto out_of_memory;
        }
        vocab->merges[vocab->merge_count++] = merge;
        int32_t merged = find_token(vocab, text);
        if (merged < 0) {
            merged = (int32_t)vocab->count;
            if (add_token(vocab, capacity, text, TOKEN_NORMAL) != 0)
                goto out_of_memory;
        } else {
            free(text);
        }
        size_t w = 0;
        for (size_t r = 0; r < count; r++) {
            if (r + 1 < count && symbols[r] == left && symbols[r + 1] == right) {
                symbols[w++] = merged;
                r++;
            } else {
                symbols[w++] = symbols[r];
            }
        }
        count = w;
    }
    free(symbols);
    free(pairs);
    return 0;

out_of_memory:
    free(symbols);
    free(pairs);
    return error_set(err, "out of memory learning merges");
}

static char *placeholder_text(uint32_t id)
{
    char buffer[48];
    snprintf(buffer, sizeof buffer, "<|placeholder_%u|>", id);
    return string_copy(buffer);
}

int mkmodel_vocab_build(mkmodel_vocab *vocab, const mkmodel_config *config, bmoe_error *err)
{
    memset(vocab, 0, sizeof *vocab);
    vocab->bos = vocab->eos = vocab->eot = vocab->pad = -1;
    family fam = family_of(config->arch);
    uint32_t n_vocab = config->n_vocab;
    if (n_vocab < 256 + fam.special_count)
        return error_set(err, "--vocab %u is too small: the %s tokenizer needs at least %u",
                         n_vocab, mkmodel_arch_name(config->arch), 256 + fam.special_count);
    vocab->model = "gpt2";
    vocab->pre = fam.pre;
    vocab->add_bos = fam.add_bos;
    vocab->chat_template = fam.chat_template;
    vocab->tokens = calloc(n_vocab, sizeof *vocab->tokens);
    vocab->types = calloc(n_vocab, sizeof *vocab->types);
    if (!vocab->tokens || !vocab->types) {
        mkmodel_vocab_free(vocab);
        return error_set(err, "out of memory for a vocabulary of %u tokens", n_vocab);
    }
    for (uint32_t byte = 0; byte < 256; byte++) {
        char text[4];
        size_t length = utf8_encode(byte_to_codepoint(byte), text);
        text[length] = '\0';
        if (add_token(vocab, n_vocab, string_copy(text), TOKEN_NORMAL) != 0) {
            mkmodel_vocab_free(vocab);
            return error_set(err, "out of memory building the vocabulary");
        }
    }
    /* Specials at their real ids when the vocabulary is big enough to hold
     * them there, else packed right after the merges. */
    uint32_t last_real = fam.specials[fam.special_count - 1].real_id;
    bool real_ids = n_vocab > last_real;
    uint32_t room = real_ids ? fam.specials[0].real_id - 256 : n_vocab - 256 - fam.special_count;
    uint32_t max_merges = config->n_merges < room ? config->n_merges : room;
    if (learn_merges(vocab, n_vocab, max_merges, err) != 0) {
        mkmodel_vocab_free(vocab);
        return -1;
    }
    for (uint32_t s = 0; s < fam.special_count; s++) {
        uint32_t id = real_ids ? fam.specials[s].real_id : vocab->count;
        while (vocab->count < id)
            if (add_token(vocab, n_vocab, placeholder_text(vocab->count), TOKEN_UNUSED) != 0)
                goto out_of_memory;
        if (add_token(vocab, n_vocab, string_copy(fam.specials[s].text), fam.specials[s].type) != 0)
            goto out_of_memory;
    }
    while (vocab->count < n_vocab)
        if (add_token(vocab, n_vocab, placeholder_text(vocab->count), TOKEN_UNUSED) != 0)
            goto out_of_memory;
    vocab->bos = fam.bos ? find_token(vocab, fam.bos) : -1;
    vocab->eos = fam.eos ? find_token(vocab, fam.eos) : -1;
    vocab->eot = fam.eot ? find_token(vocab, fam.eot) : -1;
    vocab->pad = fam.pad ? find_token(vocab, fam.pad) : -1;
    return 0;

out_of_memory:
    mkmodel_vocab_free(vocab);
    return error_set(err, "out of memory building the vocabulary");
}

void mkmodel_vocab_free(mkmodel_vocab *vocab)
{
    if (vocab->tokens)
        for (uint32_t i = 0; i < vocab->count; i++)
            free(vocab->tokens[i]);
    free(vocab->tokens);
    free(vocab->types);
    if (vocab->merges)
        for (uint32_t i = 0; i < vocab->merge_count; i++)
            free(vocab->merges[i]);
    free(vocab->merges);
    memset(vocab, 0, sizeof *vocab);
}
