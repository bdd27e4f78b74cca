/* Tokenizer object: building the vocabulary (from a GGUF or from parts),
 * its lookup tables and load-time fix-ups (spec/tokenizers.md sections 2, 6,
 * 9), special-token partitioning (section 4), the encode pipeline (section 3)
 * and detokenization (section 10). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/hash.h"
#include "../base/text.h"
#include "tokenizer_internal.h"

static uint64_t hash_bytes(const char *text, size_t length)
{
    uint64_t hash = fnv1a(FNV1A_START, text, length);
    return hash ^ (hash >> 29);
}

static uint32_t table_size_for(size_t count)
{
    uint32_t size = 16;
    while (size < count * 2)
        size *= 2;
    return size;
}

int32_t tokenizer_lookup(const tokenizer *tok, const char *text, size_t length)
{
    uint32_t slot = (uint32_t)hash_bytes(text, length) & tok->text_mask;
    for (;;) {
        int32_t id = tok->text_slots[slot];
        if (id < 0)
            return TOKENIZER_NO_TOKEN;
        if (tok->tokens[id].length == length && memcmp(tokenizer_text_of(tok, id), text, length) == 0)
            return id;
        slot = (slot + 1) & tok->text_mask;
    }
}

void tokenizer_parts_init(tokenizer_parts *parts)
{
    memset(parts, 0, sizeof(*parts));
    parts->bos_id = parts->eos_id = parts->eot_id = parts->eom_id = TOKENIZER_DEFAULT;
    parts->unknown_id = parts->padding_id = TOKENIZER_DEFAULT;
    parts->add_bos = parts->add_eos = parts->add_space_prefix = TOKENIZER_DEFAULT;
    parts->ignore_merges = TOKENIZER_DEFAULT;
}

static int build_vocabulary(tokenizer *tok, const tokenizer_parts *parts, bmoe_error *err)
{
    int32_t n = parts->n_vocab;
    size_t arena_size = 0;
    char empty_name[32];
    for (int32_t i = 0; i < n; i++) {
        size_t length = parts->tokens[i].length;
        if (length == 0)
            length = (size_t)snprintf(empty_name, sizeof(empty_name), "[EMPTY_%d]", (int)i);
        else if (!parts->tokens[i].data)
            return error_set(err, "tokenizer: token %d has no text", (int)i);
        if (length > 65536)
            return error_set(err, "tokenizer: token %d is %zu bytes long", (int)i, length);
        arena_size += length + 1;
    }
    if (arena_size > UINT32_MAX)
        return error_set(err, "tokenizer: %zu bytes of token text is too much", arena_size);
    tok->text_arena = malloc(arena_size ? arena_size : 1);
    tok->tokens = calloc((size_t)n, sizeof(tokenizer_token));
    tok->text_mask = table_size_for((size_t)n) - 1;
    tok->text_slots = malloc(((size_t)tok->text_mask + 1) * sizeof(int32_t));
    if (!tok->text_arena || !tok->tokens || !tok->text_slots)
        return error_set(err, "tokenizer: out of memory for a vocabulary of %d tokens", (int)n);
    memset(tok->text_slots, 0xff, ((size_t)tok->text_mask + 1) * sizeof(int32_t));

    size_t used = 0;
    for (int32_t i = 0; i < n; i++) {
        tokenizer_token *token = &tok->tokens[i];
        const char *text = parts->tokens[i].data;
        size_t length = parts->tokens[i].length;
        if (length == 0) {
            length = (size_t)snprintf(empty_name, sizeof(empty_name), "[EMPTY_%d]", (int)i);
            text = empty_name;
        }
        memcpy(tok->text_arena + used, text, length);
        tok->text_arena[used + length] = '\0';
        token->offset = (uint32_t)used;
        token->length = (uint32_t)length;
        used += length + 1;
        token->score = parts->scores ? parts->scores[i] : 0.0f;
        int type = parts->token_types ? parts->token_types[i] : TOKENIZER_TOKEN_NORMAL;
        static const uint8_t attr_of_type[7] = {
            0, TOKEN_ATTR_NORMAL, TOKEN_ATTR_UNKNOWN, TOKEN_ATTR_CONTROL,
            TOKEN_ATTR_USER_DEFINED, TOKEN_ATTR_UNUSED, TOKEN_ATTR_BYTE,
        };
        if (type < 0 || type > 6)
            return error_set(err, "tokenizer: token %d has type %d (valid: 0..6)", (int)i, type);
        token->attr = attr_of_type[type];

        /* Later duplicates win, as in the reference loader. */
        uint32_t slot = (uint32_t)hash_bytes(text, length) & tok->text_mask;
        for (;;) {
            int32_t id = tok->text_slots[slot];
            if (id < 0) {
                tok->text_slots[slot] = i;
                break;
            }
            if (tok->tokens[id].length == length &&
                memcmp(tokenizer_text_of(tok, id), text, length) == 0) {
                tok->text_slots[slot] = i;
                break;
            }
            slot = (slot + 1) & tok->text_mask;
        }
    }
    return 0;
}

static int build_merges(tokenizer *tok, const tokenizer_parts *parts, bmoe_error *err)
{
    if (parts->n_merges <= 0)
        return 0;
    if (!parts->merges)
        return error_set(err, "tokenizer: %d merges announced but none given", (int)parts->n_merges);
    tok->merge_mask = table_size_for((size_t)parts->n_merges) - 1;
    tok->merge_slots = calloc((size_t)tok->merge_mask + 1, sizeof(tokenizer_merge_slot));
    if (!tok->merge_slots)
        return error_set(err, "tokenizer: out of memory for %d merges", (int)parts->n_merges);
    char *joined = NULL;
    size_t joined_capacity = 0;
    for (int32_t rank = 0; rank < parts->n_merges; rank++) {
        const char *text = parts->merges[rank].data;
        size_t length = parts->merges[rank].length;
        /* Split at the first space at index >= 1 (a token may be a space). */
        size_t split = 0;
        for (size_t k = 1; k < length; k++)
            if (text[k] == ' ') {
                split = k;
                break;
            }
        if (split == 0 || split + 1 >= length) {
            free(joined);
            char shown[96];
            return error_set(err, "tokenizer: merge %d ('%s') is not 'LEFT RIGHT'", (int)rank,
                             text_escape(text ? text : "", text ? length : 0, shown, sizeof shown));
        }
        int32_t left = tokenizer_lookup(tok, text, split);
        int32_t right = tokenizer_lookup(tok, text + split + 1, length - split - 1);
        if (tokenizer_grow((void **)&joined, &joined_capacity, length, 1) != 0) {
            free(joined);
            return error_set(err, "tokenizer: out of memory reading merges");
        }
        memcpy(joined, text, split);
        memcpy(joined + split, text + split + 1, length - split - 1);
        int32_t merged = tokenizer_lookup(tok, joined, length - 1);
        /* A merge whose parts or result are not tokens can never apply to
         * symbols that are tokens; leave it out. */
        if (left < 0 || right < 0 || merged < 0)
            continue;
        uint64_t key = ((uint64_t)(uint32_t)(left + 1) << 32) | (uint32_t)(right + 1);
        uint64_t hash = key * 0x9E3779B97F4A7C15ull;
        uint32_t slot = (uint32_t)(hash >> 32) & tok->merge_mask;
        while (tok->merge_slots[slot].key != 0 && tok->merge_slots[slot].key != key)
            slot = (slot + 1) & tok->merge_mask;
        if (tok->merge_slots[slot].key == key)
            continue; /* duplicate pair: the first rank stays */
        tok->merge_slots[slot] = (tokenizer_merge_slot){key, rank, merged};
    }
    free(joined);
    return 0;
}

/* ---- Special tokens: trie of the texts that partitioning looks for ---- */

static int32_t trie_child(const tokenizer *tok, int32_t node, unsigned char byte)
{
    uint64_t key = ((uint64_t)(uint32_t)(node + 1) << 8) | byte;
    uint32_t slot = (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 32) & tok->trie_mask;
    for (;;) {
        const tokenizer_trie_slot *entry = &tok->trie_slots[slot];
        if (entry->key == 0)
            return -1;
        if (entry->key == key)
            return entry->child;
        slot = (slot + 1) & tok->trie_mask;
    }
}

static int build_special_trie(tokenizer *tok, bmoe_error *err)
{
    size_t total_bytes = 0;
    for (int32_t i = 0; i < tok->n_vocab; i++)
        if (tok->tokens[i].attr & (TOKEN_ATTR_CONTROL | TOKEN_ATTR_USER_DEFINED | TOKEN_ATTR_UNKNOWN))
            total_bytes += tok->tokens[i].length;
    tok->trie_mask = table_size_for(total_bytes + 1) - 1;
    tok->trie_slots = calloc((size_t)tok->trie_mask + 1, sizeof(tokenizer_trie_slot));
    tok->trie_nodes = malloc((total_bytes + 1) * sizeof(tokenizer_trie_node));
    if (!tok->trie_slots || !tok->trie_nodes)
        return error_set(err, "tokenizer: out of memory for the special-token table");
    tok->trie_nodes[0] = (tokenizer_trie_node){-1, -1};
    tok->n_trie_nodes = 1;
    for (int32_t id = 0; id < tok->n_vocab; id++) {
        uint8_t attr = tok->tokens[id].attr;
        if (!(attr & (TOKEN_ATTR_CONTROL | TOKEN_ATTR_USER_DEFINED | TOKEN_ATTR_UNKNOWN)))
            continue;
        const unsigned char *text = (const unsigned char *)tokenizer_text_of(tok, id);
        int32_t node = 0;
        for (uint32_t k = 0; k < tok->tokens[id].length; k++) {
            int32_t child = trie_child(tok, node, text[k]);
            if (child < 0) {
                child = tok->n_trie_nodes++;
                tok->trie_nodes[child] = (tokenizer_trie_node){-1, -1};
                uint64_t key = ((uint64_t)(uint32_t)(node + 1) << 8) | text[k];
                uint32_t slot = (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 32) & tok->trie_mask;
                while (tok->trie_slots[slot].key != 0)
                    slot = (slot + 1) & tok->trie_mask;
                tok->trie_slots[slot] = (tokenizer_trie_slot){key, child};
            }
            node = child;
        }
        tok->special_first_byte[text[0]] = 1;
        if (tok->trie_nodes[node].token_any < 0)
            tok->trie_nodes[node].token_any = id;
        if ((attr & TOKEN_ATTR_USER_DEFINED) && tok->trie_nodes[node].token_user < 0)
            tok->trie_nodes[node].token_user = id;
    }
    return 0;
}

/* ---- Special ids and end-of-generation (spec 2.1, 9) ---- */

static int32_t find_text(const tokenizer *tok, const char *text)
{
    return tokenizer_lookup(tok, text, strlen(text));
}

static void make_control(tokenizer *tok, int32_t id)
{
    if (!(tok->tokens[id].attr & TOKEN_ATTR_CONTROL))
        tok->tokens[id].attr = TOKEN_ATTR_CONTROL;
}

/* The id of the first text of list that is a token (list order is the
 * preference); TOKENIZER_NO_TOKEN if none. */
static int32_t find_any(const tokenizer *tok, const char *const *list)
{
    for (size_t i = 0; list[i]; i++) {
        int32_t id = find_text(tok, list[i]);
        if (id >= 0)
            return id;
    }
    return TOKENIZER_NO_TOKEN;
}

static void apply_fixups(tokenizer *tok)
{
    static const char *const eot_texts[] = {
        "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
        "<EOT>", "_<EOT>", "[EOT]", "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
        "<end_of_utterance>", NULL};
    static const char *const eom_texts[] = {"<|eom_id|>", NULL};
    static const char *const fim_prefix[] = {
        "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>",
        "<PRE>", "\xE2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>", NULL};
    static const char *const fim_suffix[] = {
        "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81hole\xEF\xBD\x9C>",
        "<SUF>", "\xE2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>", NULL};
    static const char *const fim_middle[] = {
        "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>",
        "<MID>", "\xE2\x96\x81<MID>", "<|code_middle|>", "<|middle|>", NULL};
    static const char *const fim_pad[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL};
    static const char *const fim_repo[] = {
        "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", NULL};
    static const char *const fim_sep[] = {"<|file_sep|>", NULL};
    static const char *const eog_texts[] = {
        "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
        "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
        "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
        "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>", "[e~[", NULL};
    static const char *const always_rendered[] = {
        "<|channel|>", "<|message|>", "<|start|>", "<|constrain|>", NULL};

    for (int32_t id = 0; id < tok->n_vocab; id++)
        if ((tok->tokens[id].attr & TOKEN_ATTR_CONTROL) &&
            strstr(tokenizer_text_of(tok, id), "unused"))
            tok->tokens[id].attr |= TOKEN_ATTR_UNUSED;
    for (size_t i = 0; always_rendered[i]; i++) {
        int32_t id = find_text(tok, always_rendered[i]);
        if (id >= 0)
            tok->tokens[id].attr = TOKEN_ATTR_USER_DEFINED;
    }

    if (tok->eot < 0) {
        tok->eot = find_any(tok, eot_texts);
        if (tok->eot >= 0)
            make_control(tok, tok->eot);
    }
    if (tok->eom < 0) {
        tok->eom = find_any(tok, eom_texts);
        if (tok->eom >= 0)
            make_control(tok, tok->eom);
    }
    const char *const *fim_lists[] = {fim_prefix, fim_suffix, fim_middle, fim_pad, fim_repo, fim_sep};
    int32_t fim_ids[6];
    for (int k = 0; k < 6; k++) {
        fim_ids[k] = find_any(tok, fim_lists[k]);
        if (fim_ids[k] >= 0)
            make_control(tok, fim_ids[k]);
    }

    for (size_t i = 0; eog_texts[i]; i++) {
        int32_t id = find_text(tok, eog_texts[i]);
        if (id >= 0) {
            tok->tokens[id].is_end_of_generation = 1;
            make_control(tok, id);
        }
    }
    for (int k = 3; k < 6; k++)
        if (fim_ids[k] >= 0)
            tok->tokens[fim_ids[k]].is_end_of_generation = 1;
    int32_t ends[3] = {tok->eos, tok->eot, tok->eom};
    for (int k = 0; k < 3; k++)
        if (ends[k] >= 0)
            tok->tokens[ends[k]].is_end_of_generation = 1;

    /* Harmony: <|end|> separates messages, <|return|>/<|call|> stop. */
    int32_t end = find_text(tok, "<|end|>");
    int32_t ret = find_text(tok, "<|return|>"), call = find_text(tok, "<|call|>");
    int32_t calls = find_text(tok, "<|calls|>"), flush = find_text(tok, "<|flush|>");
    bool is_eog_end = end >= 0 && tok->tokens[end].is_end_of_generation;
    bool harmony = ret >= 0 && call >= 0 && tok->tokens[ret].is_end_of_generation &&
                   tok->tokens[call].is_end_of_generation;
    bool harmony_calls = calls >= 0 && flush >= 0 && tok->tokens[calls].is_end_of_generation &&
                         tok->tokens[flush].is_end_of_generation;
    if (is_eog_end && (harmony || harmony_calls)) {
        tok->tokens[end].is_end_of_generation = 0;
        tok->tokens[end].attr = TOKEN_ATTR_USER_DEFINED;
    }
    /* Gemma 4: </s> is an ordinary token there. */
    int32_t tool_response = find_text(tok, "<|tool_response>"), close_s = find_text(tok, "</s>");
    if (tool_response >= 0 && close_s >= 0 && tok->tokens[tool_response].is_end_of_generation &&
        tok->tokens[close_s].is_end_of_generation) {
        tok->tokens[close_s].is_end_of_generation = 0;
        tok->tokens[close_s].attr = TOKEN_ATTR_NORMAL;
    }
}

/* A special id: the one given, or the model's default when none is given
 * (a default the vocabulary is too small for means none). */
static int32_t resolve_id(int32_t given, int32_t fallback, int32_t n_vocab)
{
    int32_t id = given == TOKENIZER_DEFAULT ? fallback : given;
    if (id < 0 || id >= n_vocab)
        return TOKENIZER_NO_TOKEN;
    return id;
}

/* A given special id must be a token (or none): one outside the
 * vocabulary is an error, never quietly dropped. name is the GGUF key. */
static int check_special_id(int32_t id, const char *name, int32_t n_vocab, bmoe_error *err)
{
    if (id == TOKENIZER_DEFAULT || id == TOKENIZER_NO_TOKEN || (id >= 0 && id < n_vocab))
        return 0;
    return error_set(err, "tokenizer: %s = %d is outside the vocabulary of %d tokens", name, (int)id,
                     (int)n_vocab);
}

tokenizer *tokenizer_create(const tokenizer_parts *parts, bmoe_error *err)
{
    if (!parts || !parts->model) {
        error_set(err, "tokenizer: no tokenizer model given (tokenizer.ggml.model)");
        return NULL;
    }
    enum tokenizer_kind kind;
    if (strcmp(parts->model, "gpt2") == 0)
        kind = TOKENIZER_KIND_BPE;
    else if (strcmp(parts->model, "llama") == 0)
        kind = TOKENIZER_KIND_SPM;
    else if (strcmp(parts->model, "gemma4") == 0)
        kind = TOKENIZER_KIND_GEMMA4;
    else {
        char shown[96];
        error_set(err, "tokenizer: unsupported tokenizer model '%s' (tokenizer.ggml.model)",
                  text_escape_string(parts->model, shown, sizeof shown));
        return NULL;
    }
    if (parts->n_vocab <= 0 || parts->n_vocab > (1 << 24) || !parts->tokens) {
        error_set(err, "tokenizer: vocabulary of %d tokens (need 1..%d)", (int)parts->n_vocab, 1 << 24);
        return NULL;
    }
    if (parts->n_merges < 0) {
        error_set(err, "tokenizer: negative merge count %d", (int)parts->n_merges);
        return NULL;
    }
    const struct {
        int32_t id;
        const char *name;
    } specials[] = {
        {parts->bos_id, "tokenizer.ggml.bos_token_id"},     {parts->eos_id, "tokenizer.ggml.eos_token_id"},
        {parts->eot_id, "tokenizer.ggml.eot_token_id"},     {parts->eom_id, "tokenizer.ggml.eom_token_id"},
        {parts->unknown_id, "tokenizer.ggml.unknown_token_id"},
        {parts->padding_id, "tokenizer.ggml.padding_token_id"},
    };
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++)
        if (check_special_id(specials[i].id, specials[i].name, parts->n_vocab, err) != 0)
            return NULL;
    tokenizer *tok = calloc(1, sizeof(*tok));
    if (!tok) {
        error_set(err, "tokenizer: out of memory");
        return NULL;
    }
    tok->kind = kind;
    tok->n_vocab = parts->n_vocab;
    if (build_vocabulary(tok, parts, err) != 0 || build_merges(tok, parts, err) != 0)
        goto fail;

    int32_t default_bos = TOKENIZER_NO_TOKEN, default_eos = TOKENIZER_NO_TOKEN;
    int32_t default_unknown = TOKENIZER_NO_TOKEN;
    if (kind == TOKENIZER_KIND_SPM) {
        tok->add_bos = true;
        tok->add_space_prefix = true;
        tok->clean_spaces = false;
        default_bos = 1;
        default_eos = 2;
        default_unknown = 0;
    } else {
        const char *pre = kind == TOKENIZER_KIND_GEMMA4 ? "gemma4" : parts->pre;
        if (tokenizer_pre_setup(tok, pre, err) != 0)
            goto fail;
        if (kind == TOKENIZER_KIND_BPE)
            default_bos = default_eos = 11; /* the reference loader's gpt2 default */
    }
    if (parts->add_bos != TOKENIZER_DEFAULT)
        tok->add_bos = parts->add_bos != 0;
    if (parts->add_eos != TOKENIZER_DEFAULT)
        tok->add_eos = parts->add_eos != 0;
    if (parts->add_space_prefix != TOKENIZER_DEFAULT)
        tok->add_space_prefix = parts->add_space_prefix != 0;
    if (parts->ignore_merges != TOKENIZER_DEFAULT)
        tok->ignore_merges = parts->ignore_merges != 0;
    if (kind == TOKENIZER_KIND_GEMMA4)
        tok->add_bos = true;

    tok->bos = resolve_id(parts->bos_id, default_bos, tok->n_vocab);
    tok->eos = resolve_id(parts->eos_id, default_eos, tok->n_vocab);
    tok->eot = resolve_id(parts->eot_id, TOKENIZER_NO_TOKEN, tok->n_vocab);
    tok->eom = resolve_id(parts->eom_id, TOKENIZER_NO_TOKEN, tok->n_vocab);
    tok->unknown = resolve_id(parts->unknown_id, default_unknown, tok->n_vocab);
    tok->padding = resolve_id(parts->padding_id, TOKENIZER_NO_TOKEN, tok->n_vocab);

    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof(name), "<0x%02X>", b);
        tok->byte_tokens[b] = find_text(tok, name);
    }
    /* GPT-2 byte-to-unicode: printable bytes keep their value, the other 68
     * take U+0100.. in byte order. */
    memset(tok->codepoint_to_byte, 0xff, sizeof(tok->codepoint_to_byte));
    uint16_t next = 0x100;
    for (int b = 0; b < 256; b++) {
        bool keeps = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        uint16_t codepoint = keeps ? (uint16_t)b : next++;
        tok->byte_to_codepoint[b] = codepoint;
        tok->codepoint_to_byte[codepoint] = (int16_t)b;
    }

    apply_fixups(tok);
    if (build_special_trie(tok, err) != 0)
        goto fail;
    return tok;
fail:
    tokenizer_destroy(tok);
    return NULL;
}

void tokenizer_destroy(tokenizer *tok)
{
    if (!tok)
        return;
    tokenizer_pre_release(tok);
    free(tok->text_arena);
    free(tok->tokens);
    free(tok->text_slots);
    free(tok->merge_slots);
    free(tok->trie_slots);
    free(tok->trie_nodes);
    free(tok);
}

/* ---- Reading tokenizer.ggml.* from a GGUF ---- */

/* Published files write "no such token" as the u32 -1 (stories260K, made
 * by the reference converter from llama2.c, sets its separator and padding
 * ids so): that value means none. Any other id must be a token. */
#define GGUF_NO_TOKEN_U32 4294967295ll

static int gguf_special_id(const gguf_model *model, const char *key, int32_t n_vocab, int32_t *out,
                           bmoe_error *err)
{
    *out = TOKENIZER_DEFAULT;
    if (!gguf_find_kv(model, key))
        return 0;
    int64_t value;
    if (!gguf_get_int(model, key, &value))
        return error_set(err, "tokenizer: key %s is not an integer", key);
    if (value == GGUF_NO_TOKEN_U32 || value == -1) {
        *out = TOKENIZER_NO_TOKEN;
        return 0;
    }
    if (value < 0 || value >= n_vocab)
        return error_set(err, "tokenizer: %s = %lld is outside the vocabulary of %d tokens", key, (long long)value,
                         (int)n_vocab);
    *out = (int32_t)value;
    return 0;
}

static int gguf_flag(const gguf_model *model, const char *key, int *out, bmoe_error *err)
{
    *out = TOKENIZER_DEFAULT;
    if (!gguf_find_kv(model, key))
        return 0;
    bool value;
    if (!gguf_get_bool(model, key, &value))
        return error_set(err, "tokenizer: key %s is not a boolean", key);
    *out = value ? 1 : 0;
    return 0;
}

/* A name key (tokenizer.ggml.model, .pre) as a C string: NUL bytes inside
 * would make "gpt2\0junk" pass for "gpt2". */
static int gguf_name(gguf_string text, const char *key, char **out, bmoe_error *err)
{
    if (memchr(text.data, 0, text.length)) {
        char shown[96];
        return error_set(err, "tokenizer: %s '%s' contains a NUL byte", key,
                         text_escape(text.data, (size_t)text.length, shown, sizeof shown));
    }
    *out = malloc(text.length + 1);
    if (!*out)
        return error_set(err, "tokenizer: out of memory");
    memcpy(*out, text.data, text.length);
    (*out)[text.length] = '\0';
    return 0;
}

tokenizer *tokenizer_create_from_gguf(const gguf_model *model, bmoe_error *err)
{
    tokenizer_parts parts;
    tokenizer_parts_init(&parts);
    tokenizer *tok = NULL;
    char *model_name = NULL, *pre_name = NULL;
    gguf_string *strings = NULL;
    tokenizer_string *tokens = NULL, *merges = NULL;
    int32_t *types = NULL;
    float *scores = NULL;

    gguf_string text;
    if (!gguf_get_string(model, "tokenizer.ggml.model", &text)) {
        error_set(err, "tokenizer: key tokenizer.ggml.model is missing or not a string");
        return NULL;
    }
    if (gguf_name(text, "tokenizer.ggml.model", &model_name, err) != 0)
        goto done;
    if (gguf_find_kv(model, "tokenizer.ggml.pre")) {
        if (!gguf_get_string(model, "tokenizer.ggml.pre", &text)) {
            error_set(err, "tokenizer: key tokenizer.ggml.pre is not a string");
            goto done;
        }
        if (gguf_name(text, "tokenizer.ggml.pre", &pre_name, err) != 0)
            goto done;
    }
    const gguf_kv *token_kv = gguf_find_kv(model, "tokenizer.ggml.tokens");
    if (!token_kv || token_kv->type != GGUF_TYPE_ARRAY || token_kv->array_type != GGUF_TYPE_STRING ||
        token_kv->array_count == 0 || token_kv->array_count > (1u << 24)) {
        error_set(err, "tokenizer: key tokenizer.ggml.tokens is missing, empty or not a string array");
        goto done;
    }
    int32_t n_vocab = (int32_t)token_kv->array_count;
    const gguf_kv *merge_kv = gguf_find_kv(model, "tokenizer.ggml.merges");
    uint64_t n_merges = 0;
    if (merge_kv) {
        if (merge_kv->type != GGUF_TYPE_ARRAY || merge_kv->array_type != GGUF_TYPE_STRING ||
            merge_kv->array_count > INT32_MAX) {
            error_set(err, "tokenizer: key tokenizer.ggml.merges is not a string array");
            goto done;
        }
        n_merges = merge_kv->array_count;
    } else if (strcmp(model_name, "gpt2") == 0) {
        error_set(err, "tokenizer: key tokenizer.ggml.merges is missing (needed by a gpt2 tokenizer)");
        goto done;
    }
    size_t most = (size_t)n_vocab > n_merges ? (size_t)n_vocab : (size_t)n_merges;
    strings = malloc(most * sizeof(gguf_string));
    tokens = malloc((size_t)n_vocab * sizeof(tokenizer_string));
    merges = n_merges ? malloc(n_merges * sizeof(tokenizer_string)) : NULL;
    if (!strings || !tokens || (n_merges && !merges)) {
        error_set(err, "tokenizer: out of memory reading %d tokens", (int)n_vocab);
        goto done;
    }
    if (!gguf_array_strings(token_kv, strings)) {
        error_set(err, "tokenizer: cannot read tokenizer.ggml.tokens");
        goto done;
    }
    for (int32_t i = 0; i < n_vocab; i++)
        tokens[i] = (tokenizer_string){strings[i].data, (size_t)strings[i].length};
    if (n_merges) {
        if (!gguf_array_strings(merge_kv, strings)) {
            error_set(err, "tokenizer: cannot read tokenizer.ggml.merges");
            goto done;
        }
        for (uint64_t i = 0; i < n_merges; i++)
            merges[i] = (tokenizer_string){strings[i].data, (size_t)strings[i].length};
    }

    const gguf_kv *type_kv = gguf_find_kv(model, "tokenizer.ggml.token_type");
    if (type_kv) {
        if (type_kv->type != GGUF_TYPE_ARRAY || type_kv->array_count != (uint64_t)n_vocab ||
            type_kv->array_type == GGUF_TYPE_STRING || type_kv->array_type == GGUF_TYPE_ARRAY ||
            type_kv->array_type == GGUF_TYPE_FLOAT32 || type_kv->array_type == GGUF_TYPE_FLOAT64) {
            error_set(err, "tokenizer: key tokenizer.ggml.token_type must be %d integers", (int)n_vocab);
            goto done;
        }
        types = malloc((size_t)n_vocab * sizeof(int32_t));
        if (!types) {
            error_set(err, "tokenizer: out of memory");
            goto done;
        }
        for (int32_t i = 0; i < n_vocab; i++) {
            int64_t type = gguf_array_int(type_kv, (uint64_t)i);
            if (type < TOKENIZER_TOKEN_UNDEFINED || type > TOKENIZER_TOKEN_BYTE) {
                error_set(err, "tokenizer: tokenizer.ggml.token_type[%d] = %lld is not a token type (0..6)",
                          (int)i, (long long)type);
                goto done;
            }
            types[i] = (int32_t)type;
        }
    }
    const gguf_kv *score_kv = gguf_find_kv(model, "tokenizer.ggml.scores");
    if (score_kv) {
        if (score_kv->type != GGUF_TYPE_ARRAY || score_kv->array_count != (uint64_t)n_vocab ||
            (score_kv->array_type != GGUF_TYPE_FLOAT32 && score_kv->array_type != GGUF_TYPE_FLOAT64)) {
            error_set(err, "tokenizer: key tokenizer.ggml.scores must be %d floats", (int)n_vocab);
            goto done;
        }
        scores = malloc((size_t)n_vocab * sizeof(float));
        if (!scores) {
            error_set(err, "tokenizer: out of memory");
            goto done;
        }
        for (int32_t i = 0; i < n_vocab; i++)
            scores[i] = (float)gguf_array_float(score_kv, (uint64_t)i);
    }

    parts.model = model_name;
    parts.pre = pre_name;
    parts.n_vocab = n_vocab;
    parts.tokens = tokens;
    parts.token_types = types;
    parts.scores = scores;
    parts.n_merges = (int32_t)n_merges;
    parts.merges = merges;
    if (gguf_special_id(model, "tokenizer.ggml.bos_token_id", n_vocab, &parts.bos_id, err) ||
        gguf_special_id(model, "tokenizer.ggml.eos_token_id", n_vocab, &parts.eos_id, err) ||
        gguf_special_id(model, "tokenizer.ggml.eot_token_id", n_vocab, &parts.eot_id, err) ||
        gguf_special_id(model, "tokenizer.ggml.eom_token_id", n_vocab, &parts.eom_id, err) ||
        gguf_special_id(model, "tokenizer.ggml.unknown_token_id", n_vocab, &parts.unknown_id, err) ||
        gguf_special_id(model, "tokenizer.ggml.padding_token_id", n_vocab, &parts.padding_id, err) ||
        gguf_flag(model, "tokenizer.ggml.add_bos_token", &parts.add_bos, err) ||
        gguf_flag(model, "tokenizer.ggml.add_eos_token", &parts.add_eos, err) ||
        gguf_flag(model, "tokenizer.ggml.add_space_prefix", &parts.add_space_prefix, err))
        goto done;
    tok = tokenizer_create(&parts, err);
done:
    free(model_name);
    free(pre_name);
    free(strings);
    free(tokens);
    free(merges);
    free(types);
    free(scores);
    return tok;
}

/* ---- Encoding ---- */

typedef struct special_match {
    size_t start;
    uint32_t length;
    int32_t id;
    bool taken;
} special_match;

static int compare_priority(const void *a, const void *b)
{
    const special_match *x = a, *y = b;
    if (x->length != y->length)
        return x->length > y->length ? -1 : 1;
    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    return x->start < y->start ? -1 : x->start > y->start;
}

static int compare_start(const void *a, const void *b)
{
    const special_match *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

static int push_fragment(tokenizer_scratch *scratch, size_t start, size_t length, int32_t token)
{
    if (tokenizer_grow((void **)&scratch->fragments, &scratch->fragments_capacity,
                       scratch->n_fragments + 1, sizeof(tokenizer_span)) != 0)
        return -1;
    scratch->fragments[scratch->n_fragments++] = (tokenizer_span){start, length, token};
    return 0;
}

/* Splits text into raw and special-token fragments. Candidates are taken
 * longest first (then by id), each leftmost-first and never overlapping a
 * token already taken, which is what scanning fragment lists longest token
 * first does (spec 4). */
static int partition_specials(const tokenizer *tok, tokenizer_scratch *scratch, const char *text,
                              size_t length, bool parse_special, bmoe_error *err)
{
    scratch->n_fragments = 0;
    special_match *matches = NULL;
    size_t n_matches = 0, capacity = 0;
    uint8_t *taken = NULL;
    int status = -1;
    for (size_t p = 0; p < length; p++) {
        if (!tok->special_first_byte[(unsigned char)text[p]])
            continue;
        int32_t node = 0;
        for (size_t q = p; q < length; q++) {
            node = trie_child(tok, node, (unsigned char)text[q]);
            if (node < 0)
                break;
            int32_t id = parse_special ? tok->trie_nodes[node].token_any : tok->trie_nodes[node].token_user;
            if (id < 0)
                continue;
            if (tokenizer_grow((void **)&matches, &capacity, n_matches + 1, sizeof(special_match)) != 0)
                goto out_of_memory;
            matches[n_matches++] = (special_match){p, (uint32_t)(q - p + 1), id, false};
        }
    }
    if (n_matches > 0) {
        qsort(matches, n_matches, sizeof(special_match), compare_priority);
        taken = calloc(length, 1);
        if (!taken)
            goto out_of_memory;
        for (size_t i = 0; i < n_matches; i++) {
            special_match *m = &matches[i];
            bool free_range = true;
            for (uint32_t k = 0; k < m->length && free_range; k++)
                free_range = !taken[m->start + k];
            if (!free_range)
                continue;
            memset(taken + m->start, 1, m->length);
            m->taken = true;
        }
        size_t kept = 0;
        for (size_t i = 0; i < n_matches; i++)
            if (matches[i].taken)
                matches[kept++] = matches[i];
        n_matches = kept;
        qsort(matches, n_matches, sizeof(special_match), compare_start);
    }
    size_t cursor = 0;
    for (size_t i = 0; i < n_matches; i++) {
        if (matches[i].start > cursor &&
            push_fragment(scratch, cursor, matches[i].start - cursor, -1) != 0)
            goto out_of_memory;
        if (push_fragment(scratch, matches[i].start, matches[i].length, matches[i].id) != 0)
            goto out_of_memory;
        cursor = matches[i].start + matches[i].length;
    }
    if (cursor < length && push_fragment(scratch, cursor, length - cursor, -1) != 0)
        goto out_of_memory;
    status = 0;
    goto done;
out_of_memory:
    error_set(err, "tokenizer: out of memory matching special tokens in %zu bytes", length);
done:
    free(matches);
    free(taken);
    return status;
}

/* Copies text with every " " replaced by U+2581, after an optional " " prefix. */
static int escape_spaces(tokenizer_scratch *scratch, const char *text, size_t length, bool prefix,
                         size_t *out_length)
{
    if (length > (SIZE_MAX - 4) / 3)
        return -1;
    if (tokenizer_grow((void **)&scratch->escaped, &scratch->escaped_capacity, length * 3 + 4, 1) != 0)
        return -1;
    char *out = scratch->escaped;
    size_t used = 0;
    if (prefix) {
        memcpy(out, "\xE2\x96\x81", 3);
        used = 3;
    }
    for (size_t i = 0; i < length; i++) {
        if (text[i] == ' ') {
            memcpy(out + used, "\xE2\x96\x81", 3);
            used += 3;
        } else {
            out[used++] = text[i];
        }
    }
    *out_length = used;
    return 0;
}

static bool all_newlines(const char *text, size_t length)
{
    for (size_t i = 0; i < length; i++)
        if (text[i] != '\n')
            return false;
    return true;
}

static int encode_bpe_fragment(const tokenizer *tok, tokenizer_scratch *scratch, const char *text,
                               size_t length, tokenizer_output *output, bmoe_error *err)
{
    if (tok->escape_whitespaces) {
        size_t escaped_length;
        if (escape_spaces(scratch, text, length, false, &escaped_length) != 0)
            return error_set(err, "tokenizer: out of memory for %zu bytes of text", length);
        text = scratch->escaped;
        length = escaped_length;
    }
    if (tokenizer_pre_split(tok, scratch, text, length, err) != 0)
        return -1;
    for (size_t p = 0; p < scratch->n_pieces; p++) {
        const char *piece = text + scratch->pieces[p].start;
        size_t piece_length = scratch->pieces[p].length;
        if (tok->byte_level) {
            if (tokenizer_grow((void **)&scratch->encoded, &scratch->encoded_capacity,
                               piece_length * 2, 1) != 0)
                return error_set(err, "tokenizer: out of memory for %zu bytes of text", length);
            size_t used = 0;
            for (size_t i = 0; i < piece_length; i++) {
                uint16_t codepoint = tok->byte_to_codepoint[(unsigned char)piece[i]];
                if (codepoint < 0x80) {
                    scratch->encoded[used++] = (char)codepoint;
                } else {
                    scratch->encoded[used++] = (char)(0xC0 | (codepoint >> 6));
                    scratch->encoded[used++] = (char)(0x80 | (codepoint & 0x3F));
                }
            }
            piece = scratch->encoded;
            piece_length = used;
        }
        if (tok->ignore_merges || (tok->newline_split && all_newlines(piece, piece_length))) {
            int32_t id = tokenizer_lookup(tok, piece, piece_length);
            if (id >= 0) {
                tokenizer_output_push(output, id);
                continue;
            }
        }
        if (tokenizer_bpe_piece(tok, scratch, piece, piece_length, output, err) != 0)
            return -1;
    }
    return 0;
}

int32_t tokenizer_encode(const tokenizer *tok, const char *text, size_t length, bool add_special,
                         bool parse_special, int32_t *out, int32_t max_out, bmoe_error *err)
{
    if (!tok || (!text && length > 0) || max_out < 0 || (!out && max_out > 0))
        return error_set(err, "tokenizer_encode: invalid arguments");
    tokenizer_scratch scratch;
    if (tokenizer_scratch_init(tok, &scratch, err) != 0) {
        tokenizer_scratch_free(&scratch);
        return -1;
    }
    tokenizer_output output = {out, max_out, 0, false};
    int status = -1;
    if (tok->kind != TOKENIZER_KIND_SPM) {
        /* Regexes and merges see valid UTF-8 only (spec 3). */
        size_t clean_length;
        if (tokenizer_utf8_sanitize(&scratch, text ? text : "", length, &clean_length, err) != 0)
            goto done;
        text = scratch.clean;
        length = clean_length;
    }
    if (partition_specials(tok, &scratch, text, length, parse_special, err) != 0)
        goto done;
    if (add_special && tok->add_bos && tok->bos >= 0)
        tokenizer_output_push(&output, tok->bos);
    bool previous_special = true;
    for (size_t f = 0; f < scratch.n_fragments; f++) {
        tokenizer_span fragment = scratch.fragments[f];
        if (fragment.token >= 0) {
            tokenizer_output_push(&output, fragment.token);
            previous_special = true;
            continue;
        }
        const char *fragment_text = text + fragment.start;
        if (tok->kind == TOKENIZER_KIND_SPM) {
            size_t escaped_length;
            if (escape_spaces(&scratch, fragment_text, fragment.length,
                              tok->add_space_prefix && previous_special, &escaped_length) != 0) {
                error_set(err, "tokenizer: out of memory for %zu bytes of text", length);
                goto done;
            }
            if (tokenizer_spm_fragment(tok, &scratch, scratch.escaped, escaped_length, &output, err) != 0)
                goto done;
        } else if (encode_bpe_fragment(tok, &scratch, fragment_text, fragment.length, &output, err) != 0) {
            goto done;
        }
        previous_special = false;
    }
    if (add_special && tok->add_eos && tok->eos >= 0)
        tokenizer_output_push(&output, tok->eos);
    if (output.overflow) {
        error_set(err, "tokenizer: more than %d tokens", (int)INT32_MAX);
        goto done;
    }
    status = 0;
done:
    tokenizer_scratch_free(&scratch);
    return status == 0 ? output.count : -1;
}

/* ---- Decoding ---- */

/* Writes the piece of id into buf (at most capacity bytes) and returns its
 * full length. lstrip: leading spaces to drop. */
static size_t piece_of(const tokenizer *tok, int32_t id, bool render_special, int lstrip, char *buf,
                       size_t capacity)
{
    const tokenizer_token *token = &tok->tokens[id];
    const char *text = tokenizer_text_of(tok, id);
    size_t used = 0;
#define PUT(byte)                                  \
    do {                                           \
        if (lstrip > 0 && (byte) == ' ') {         \
            lstrip--;                              \
        } else {                                   \
            lstrip = 0;                            \
            if (used < capacity)                   \
                buf[used] = (char)(byte);          \
            used++;                                \
        }                                          \
    } while (0)
    uint8_t attr = token->attr;
    if ((attr & (TOKEN_ATTR_CONTROL | TOKEN_ATTR_UNKNOWN)) && !render_special)
        return 0;
    /* Gemma's user-defined whitespace tokens ("▁▁", ...) spell spaces, as
     * the tokenizer's own decoder renders them. */
    bool user_escaped = (attr & TOKEN_ATTR_USER_DEFINED) && tok->escape_whitespaces;
    if ((attr & (TOKEN_ATTR_CONTROL | TOKEN_ATTR_UNKNOWN | TOKEN_ATTR_USER_DEFINED)) && !user_escaped) {
        for (uint32_t i = 0; i < token->length; i++)
            PUT((unsigned char)text[i]);
    } else if (attr & TOKEN_ATTR_BYTE) {
        unsigned value = 0;
        if (token->length == 6 && sscanf(text, "<0x%2X>", &value) == 1)
            PUT((unsigned char)value);
    } else if (attr & (TOKEN_ATTR_NORMAL | TOKEN_ATTR_USER_DEFINED)) {
        bool space_escaped = tok->kind == TOKENIZER_KIND_SPM || tok->escape_whitespaces;
        for (uint32_t i = 0; i < token->length;) {
            const unsigned char *at = (const unsigned char *)text + i;
            size_t char_length = tokenizer_utf8_length(at[0]);
            if (char_length > token->length - i)
                char_length = token->length - i;
            if (space_escaped) {
                if (char_length == 3 && at[0] == 0xE2 && at[1] == 0x96 && at[2] == 0x81) {
                    PUT(' ');
                } else {
                    for (size_t k = 0; k < char_length; k++)
                        PUT(at[k]);
                }
            } else {
                uint32_t codepoint = 0x110000;
                if (char_length == 1)
                    codepoint = at[0];
                else if (char_length == 2)
                    codepoint = ((uint32_t)(at[0] & 0x1F) << 6) | (at[1] & 0x3F);
                if (codepoint < 0x144 && tok->codepoint_to_byte[codepoint] >= 0) {
                    PUT((unsigned char)tok->codepoint_to_byte[codepoint]);
                } else {
                    static const char hex[] = "0123456789abcdef";
                    const char *prefix = "[UNK_BYTE_0x";
                    for (const char *c = prefix; *c; c++)
                        PUT((unsigned char)*c);
                    for (size_t k = 0; k < char_length; k++) {
                        PUT((unsigned char)hex[at[k] >> 4]);
                        PUT((unsigned char)hex[at[k] & 15]);
                    }
                    PUT(']');
                }
            }
            i += (uint32_t)char_length;
        }
    }
#undef PUT
    return used;
}

int32_t tokenizer_token_to_piece(const tokenizer *tok, int32_t id, bool render_special, char *buf,
                                 int32_t size)
{
    if (!tok || id < 0 || id >= tok->n_vocab || size < 0 || (!buf && size > 0))
        return -1;
    size_t length = piece_of(tok, id, render_special, 0, NULL, 0);
    if (length > (size_t)size)
        return (int32_t)length;
    piece_of(tok, id, render_special, 0, buf, length);
    return (int32_t)length;
}

/* clean_up_tokenization_spaces (spec 10.2), in place; returns the new length. */
static size_t clean_spaces(char *text, size_t length)
{
    size_t out = 0;
    for (size_t i = 0; i < length; i++) {
        if (text[i] == ' ' && i + 1 < length &&
            (text[i + 1] == '?' || text[i + 1] == '!' || text[i + 1] == '.' || text[i + 1] == ','))
            continue;
        text[out++] = text[i];
    }
    length = out;
    out = 0;
    for (size_t i = 0; i < length; i++) {
        if (text[i] == ' ' && i + 2 < length && text[i + 1] == '\'' && text[i + 2] == ' ') {
            text[out++] = '\'';
            i += 2;
            continue;
        }
        text[out++] = text[i];
    }
    length = out;
    out = 0;
    for (size_t i = 0; i < length; i++) {
        if (text[i] == ' ' && i + 2 < length && text[i + 1] == '\'') {
            char a = text[i + 2], b = i + 3 < length ? text[i + 3] : '\0';
            if (a == 's' || a == 'm' || (a == 'r' && b == 'e') || (a == 'v' && b == 'e'))
                continue;
        }
        text[out++] = text[i];
    }
    return out;
}

int32_t tokenizer_detokenize(const tokenizer *tok, const int32_t *tokens, int32_t n_tokens,
                             bool remove_special, bool unparse_special, char *buf, int32_t size,
                             bmoe_error *err)
{
    if (!tok || n_tokens < 0 || (!tokens && n_tokens > 0) || size < 0 || (!buf && size > 0))
        return error_set(err, "tokenizer_detokenize: invalid arguments");
    for (int32_t i = 0; i < n_tokens; i++)
        if (tokens[i] < 0 || tokens[i] >= tok->n_vocab)
            return error_set(err, "tokenizer_detokenize: token %d at position %d is outside the vocabulary of %d",
                             (int)tokens[i], (int)i, (int)tok->n_vocab);
    bool remove_space = tok->add_space_prefix;
    if (remove_special && tok->add_bos && n_tokens > 0 && tokens[0] == tok->bos) {
        remove_space = false;
        tokens++;
        n_tokens--;
    }
    if (remove_special && tok->add_eos && n_tokens > 0 && tokens[n_tokens - 1] == tok->eos)
        n_tokens--;
    size_t total = 0;
    for (int32_t i = 0; i < n_tokens; i++)
        total += piece_of(tok, tokens[i], unparse_special, i == 0 && remove_space, NULL, 0);
    char *text = malloc(total + 1);
    if (!text)
        return error_set(err, "tokenizer_detokenize: out of memory for %zu bytes", total);
    size_t used = 0;
    for (int32_t i = 0; i < n_tokens; i++)
        used += piece_of(tok, tokens[i], unparse_special, i == 0 && remove_space, text + used,
                         total - used);
    if (tok->clean_spaces)
        used = clean_spaces(text, used);
    if (used > INT32_MAX) {
        free(text);
        return error_set(err, "tokenizer_detokenize: text of %zu bytes is too long", used);
    }
    if (used < (size_t)size) {
        memcpy(buf, text, used);
        buf[used] = '\0';
    }
    free(text);
    return (int32_t)used;
}

size_t tokenizer_utf8_incomplete_tail(const char *text, size_t length)
{
    /* Look back over at most 3 continuation bytes for a lead byte. */
    for (size_t back = 1; back <= 4 && back <= length; back++) {
        unsigned char byte = (unsigned char)text[length - back];
        if ((byte & 0xC0) == 0x80)
            continue;
        size_t need = byte >= 0xF0 ? 4 : byte >= 0xE0 ? 3 : byte >= 0xC0 ? 2 : 1;
        return need > back ? back : 0;
    }
    return 0;
}

/* ---- Accessors ---- */

int32_t tokenizer_n_vocab(const tokenizer *tok) { return tok->n_vocab; }
int32_t tokenizer_bos(const tokenizer *tok) { return tok->bos; }
int32_t tokenizer_eos(const tokenizer *tok) { return tok->eos; }
int32_t tokenizer_eot(const tokenizer *tok) { return tok->eot; }
bool tokenizer_add_bos(const tokenizer *tok) { return tok->add_bos; }
bool tokenizer_add_eos(const tokenizer *tok) { return tok->add_eos; }

bool tokenizer_is_end_of_generation(const tokenizer *tok, int32_t id)
{
    return id >= 0 && id < tok->n_vocab && tok->tokens[id].is_end_of_generation;
}

const char *tokenizer_token_text(const tokenizer *tok, int32_t id, size_t *length)
{
    if (id < 0 || id >= tok->n_vocab)
        return NULL;
    if (length)
        *length = tok->tokens[id].length;
    return tokenizer_text_of(tok, id);
}

int tokenizer_token_type(const tokenizer *tok, int32_t id)
{
    if (id < 0 || id >= tok->n_vocab)
        return -1;
    uint8_t attr = tok->tokens[id].attr;
    if (attr & TOKEN_ATTR_CONTROL)
        return TOKENIZER_TOKEN_CONTROL;
    if (attr & TOKEN_ATTR_USER_DEFINED)
        return TOKENIZER_TOKEN_USER_DEFINED;
    if (attr & TOKEN_ATTR_UNKNOWN)
        return TOKENIZER_TOKEN_UNKNOWN;
    if (attr & TOKEN_ATTR_BYTE)
        return TOKENIZER_TOKEN_BYTE;
    if (attr & TOKEN_ATTR_UNUSED)
        return TOKENIZER_TOKEN_UNUSED;
    if (attr & TOKEN_ATTR_NORMAL)
        return TOKENIZER_TOKEN_NORMAL;
    return TOKENIZER_TOKEN_UNDEFINED;
}

int32_t tokenizer_find_token(const tokenizer *tok, const char *text, size_t length)
{
    return tokenizer_lookup(tok, text, length);
}
