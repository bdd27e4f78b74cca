/* bmoe-mkmodel output checked through the GGUF reader: for each architecture
 * the tensor names and shapes of architectures.md (and nothing else), the
 * types each recipe promises (q4_k_m "more bits" layers, the block-size
 * fallback, mxfp4_moe), the metadata keys and values, the tokenizer (GPT-2
 * byte tokens, merges that compose existing tokens, the family's specials
 * and ids, placeholders, the real chat template), the exact size --plan
 * predicts, and weight statistics of both fill modes. */
#include "../tokenizer/byte_level.h"
#include "mkmodel_run.h"

typedef struct expected_tensor {
    char name[64];
    uint32_t n_dims;
    int64_t ne[3];
} expected_tensor;

typedef struct shape {
    const char *arch;
    int layers, embd, heads, kv_heads, head_dim, experts, used, expert_ff, ff, vocab;
    int shared_ff; /* qwen2moe's shared expert */
} shape;

static int add_expected(expected_tensor *list, int count, const char *name, uint32_t n_dims,
                        int64_t a, int64_t b, int64_t c)
{
    snprintf(list[count].name, sizeof list[count].name, "%s", name);
    list[count].n_dims = n_dims;
    list[count].ne[0] = a;
    list[count].ne[1] = b;
    list[count].ne[2] = c;
    return count + 1;
}

/* The tensor list of architectures.md sections 2 (qwen3moe), 3 (qwen2moe),
 * 4 (olmoe), 5 (gpt-oss) and llama's (dense, or Mixtral-style experts with
 * experts > 0), written out independently of the tool. */
static int expected_tensors(const shape *s, expected_tensor *list)
{
    int n = 0;
    char name[64];
    int64_t E = s->embd, Q = (int64_t)s->heads * s->head_dim, KV = (int64_t)s->kv_heads * s->head_dim;
    bool gpt = strcmp(s->arch, "gpt-oss") == 0, qwen = strcmp(s->arch, "qwen3moe") == 0;
    bool qwen2 = strcmp(s->arch, "qwen2moe") == 0, olmoe = strcmp(s->arch, "olmoe") == 0;
    n = add_expected(list, n, "token_embd.weight", 2, E, s->vocab, 1);
    n = add_expected(list, n, "output_norm.weight", 1, E, 1, 1);
    n = add_expected(list, n, "output.weight", 2, E, s->vocab, 1);
    for (int il = 0; il < s->layers; il++) {
#define T(suffix, dims, a, b, c)                                   \
    do {                                                           \
        snprintf(name, sizeof name, "blk.%d.%s", il, suffix);      \
        n = add_expected(list, n, name, dims, a, b, c);            \
    } while (0)
        T("attn_norm.weight", 1, E, 1, 1);
        T("attn_q.weight", 2, E, Q, 1);
        T("attn_k.weight", 2, E, KV, 1);
        T("attn_v.weight", 2, E, KV, 1);
        T("attn_output.weight", 2, Q, E, 1);
        if (qwen) {
            T("attn_q_norm.weight", 1, s->head_dim, 1, 1);
            T("attn_k_norm.weight", 1, s->head_dim, 1, 1);
        }
        if (olmoe) { /* over the whole projection */
            T("attn_q_norm.weight", 1, Q, 1, 1);
            T("attn_k_norm.weight", 1, KV, 1, 1);
        }
        if (qwen2) {
            T("attn_q.bias", 1, Q, 1, 1);
            T("attn_k.bias", 1, KV, 1, 1);
            T("attn_v.bias", 1, KV, 1, 1);
            T("ffn_gate_inp_shexp.weight", 1, E, 1, 1);
            T("ffn_gate_shexp.weight", 2, E, s->shared_ff, 1);
            T("ffn_up_shexp.weight", 2, E, s->shared_ff, 1);
            T("ffn_down_shexp.weight", 2, s->shared_ff, E, 1);
        }
        if (gpt) {
            T("attn_q.bias", 1, Q, 1, 1);
            T("attn_k.bias", 1, KV, 1, 1);
            T("attn_v.bias", 1, KV, 1, 1);
            T("attn_output.bias", 1, E, 1, 1);
            T("attn_sinks.weight", 1, s->heads, 1, 1);
            T("post_attention_norm.weight", 1, E, 1, 1);
            T("ffn_gate_inp.bias", 1, s->experts, 1, 1);
            T("ffn_gate_exps.bias", 2, s->expert_ff, s->experts, 1);
            T("ffn_up_exps.bias", 2, s->expert_ff, s->experts, 1);
            T("ffn_down_exps.bias", 2, E, s->experts, 1);
        } else {
            T("ffn_norm.weight", 1, E, 1, 1);
        }
        if (strcmp(s->arch, "llama") == 0 && s->experts == 0) {
            T("ffn_gate.weight", 2, E, s->ff, 1);
            T("ffn_up.weight", 2, E, s->ff, 1);
            T("ffn_down.weight", 2, s->ff, E, 1);
        } else {
            T("ffn_gate_inp.weight", 2, E, s->experts, 1);
            T("ffn_gate_exps.weight", 3, E, s->expert_ff, s->experts);
            T("ffn_up_exps.weight", 3, E, s->expert_ff, s->experts);
            T("ffn_down_exps.weight", 3, s->expert_ff, E, s->experts);
        }
#undef T
    }
    return n;
}

static int generate(const shape *s, const char *type, const char *extra, const char *file)
{
    return mk_run("--arch %s --layers %d --embd %d --heads %d --kv-heads %d --head-dim %d "
                  "--experts %d --experts-used %d --expert-ff %d --ff %d --vocab %d --type %s %s "
                  "--quiet -o '%s'",
                  s->arch, s->layers, s->embd, s->heads, s->kv_heads, s->head_dim, s->experts,
                  s->used, s->expert_ff, s->ff, s->vocab, type, extra, file);
}

static bool is_vector(const char *name)
{
    return strstr(name, "norm") || strstr(name, ".bias") || strstr(name, "sinks") ||
           strstr(name, "ffn_gate_inp");
}

static int64_t get_int(const gguf_model *m, const char *key)
{
    int64_t value = -12345;
    gguf_get_int(m, key, &value);
    return value;
}

/* Names, shapes, the absence of other tensors, and one type rule. */
typedef uint32_t (*type_rule)(const char *name, const gguf_tensor *t);

static void check_tensors(const gguf_model *m, const shape *s, type_rule rule, const char *label)
{
    expected_tensor *list = calloc(16 + 24 * (size_t)s->layers, sizeof *list);
    int n = expected_tensors(s, list);
    CHECK_MSG(gguf_tensor_count(m) == (uint64_t)n, "%s: %llu tensors, expected %d", label,
              (unsigned long long)gguf_tensor_count(m), n);
    for (int i = 0; i < n; i++) {
        const gguf_tensor *t = gguf_find_tensor(m, list[i].name);
        CHECK_MSG(t != NULL, "%s: tensor %s missing", label, list[i].name);
        if (!t)
            continue;
        CHECK_MSG(t->n_dims == list[i].n_dims && t->ne[0] == list[i].ne[0] &&
                      t->ne[1] == list[i].ne[1] && t->ne[2] == list[i].ne[2],
                  "%s: %s has shape {%lld, %lld, %lld} (%u dims)", label, list[i].name,
                  (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], t->n_dims);
        uint32_t want = is_vector(list[i].name) ? TYPE_F32 : rule(list[i].name, t);
        CHECK_MSG(t->type == want, "%s: %s is type %u, expected %u", label, list[i].name, t->type,
                  want);
    }
    free(list);
}

static uint32_t rule_f32(const char *name, const gguf_tensor *t)
{
    (void)name, (void)t;
    return TYPE_F32;
}
static uint32_t rule_f16(const char *name, const gguf_tensor *t)
{
    (void)name, (void)t;
    return TYPE_F16;
}
static uint32_t rule_bf16(const char *name, const gguf_tensor *t)
{
    (void)name, (void)t;
    return TYPE_BF16;
}
static uint32_t rule_q8_0(const char *name, const gguf_tensor *t)
{
    (void)name, (void)t;
    return TYPE_Q8_0;
}
static uint32_t rule_q5_k(const char *name, const gguf_tensor *t)
{
    (void)name, (void)t;
    return TYPE_Q5_K;
}
static uint32_t rule_q6_k(const char *name, const gguf_tensor *t)
{
    (void)name, (void)t;
    return TYPE_Q6_K;
}
static uint32_t rule_mxfp4(const char *name, const gguf_tensor *t)
{
    (void)name, (void)t;
    return TYPE_MXFP4;
}
/* mxfp4_moe: experts MXFP4, the other matrices Q8_0. */
static uint32_t rule_mxfp4_moe(const char *name, const gguf_tensor *t)
{
    (void)t;
    return strstr(name, "_exps.weight") ? TYPE_MXFP4 : TYPE_Q8_0;
}
/* q4_k with rows of 96 (embd 96): Q8_0 fallback where ne0 = 96, Q4_K where
 * ne0 = 256 (attn_output: 4 heads x 64, ffn_down: ff 256). */
static uint32_t rule_q4_k_fallback(const char *name, const gguf_tensor *t)
{
    (void)name;
    return t->ne[0] % 256 == 0 ? TYPE_Q4_K : TYPE_Q8_0;
}
/* iq2_xxs with experts 96 wide: their down projections (rows of 96) fall
 * back to IQ4_NL, as published i-quant files store such rows; the other
 * matrices are Q8_0 as the recipe says. */
static uint32_t rule_iq2_xxs_fallback(const char *name, const gguf_tensor *t)
{
    if (!strstr(name, "_exps.weight"))
        return TYPE_Q8_0;
    return t->ne[0] % 256 == 0 ? TYPE_IQ2_XXS : TYPE_IQ4_NL;
}
/* q4_k with rows of 40: neither K-quants nor Q8_0 fit, F32. */
static uint32_t rule_q4_k_f32_fallback(const char *name, const gguf_tensor *t)
{
    (void)name;
    return t->ne[0] % 256 == 0 ? TYPE_Q4_K : t->ne[0] % 32 == 0 ? TYPE_Q8_0 : TYPE_F32;
}
/* q4_k_m over 8 layers: the "more bits" layers are 0, 3, 6, 7 (i < 1,
 * i >= 7, (i - 1) % 3 == 2), worked out by hand from the rule. */
static uint32_t rule_q4_k_m_8(const char *name, const gguf_tensor *t)
{
    (void)t;
    if (strcmp(name, "output.weight") == 0)
        return TYPE_Q6_K;
    int layer = -1;
    sscanf(name, "blk.%d.", &layer);
    bool more = layer == 0 || layer == 3 || layer == 6 || layer == 7;
    if (more && (strstr(name, "attn_v.weight") || strstr(name, "ffn_down")))
        return TYPE_Q6_K;
    return TYPE_Q4_K;
}
/* q4_k_m over 2 layers: only layer 1 is a "more bits" layer (i >= 7*2/8 = 1). */
static uint32_t rule_q4_k_m_2(const char *name, const gguf_tensor *t)
{
    (void)t;
    if (strcmp(name, "output.weight") == 0)
        return TYPE_Q6_K;
    bool more = strncmp(name, "blk.1.", 6) == 0;
    if (more && (strstr(name, "attn_v.weight") || strstr(name, "ffn_down")))
        return TYPE_Q6_K;
    return TYPE_Q4_K;
}
/* gpt-oss q4_k_m: experts stay MXFP4 (its recipe). */
static uint32_t rule_q4_k_m_gpt_oss_8(const char *name, const gguf_tensor *t)
{
    if (strstr(name, "_exps.weight"))
        return TYPE_MXFP4;
    return rule_q4_k_m_8(name, t);
}

static bool string_is(gguf_string s, const char *text)
{
    return s.length == strlen(text) && memcmp(s.data, text, s.length) == 0;
}

static int64_t find_token(const gguf_string *tokens, uint64_t count, const char *text)
{
    for (uint64_t i = 0; i < count; i++)
        if (string_is(tokens[i], text))
            return (int64_t)i;
    return -1;
}

static void check_tokenizer(const gguf_model *m, const char *arch, int vocab)
{
    bool gpt = strcmp(arch, "gpt-oss") == 0, qwen = strcmp(arch, "qwen3moe") == 0;
    gguf_string text;
    CHECK(gguf_get_string(m, "tokenizer.ggml.model", &text) && string_is(text, "gpt2"));
    CHECK(gguf_get_string(m, "tokenizer.ggml.pre", &text) &&
          string_is(text, qwen ? "qwen2" : gpt ? "gpt-4o" : "llama-bpe"));
    const gguf_kv *tokens_kv = gguf_find_kv(m, "tokenizer.ggml.tokens");
    const gguf_kv *types_kv = gguf_find_kv(m, "tokenizer.ggml.token_type");
    const gguf_kv *merges_kv = gguf_find_kv(m, "tokenizer.ggml.merges");
    CHECK(tokens_kv && types_kv && merges_kv);
    if (!tokens_kv || !types_kv || !merges_kv)
        return;
    CHECK(tokens_kv->array_count == (uint64_t)vocab && types_kv->array_count == (uint64_t)vocab);
    CHECK(types_kv->array_type == GGUF_TYPE_INT32);
    gguf_string *tokens = calloc((size_t)vocab, sizeof *tokens);
    gguf_string *merges = calloc(merges_kv->array_count + 1, sizeof *merges);
    CHECK(gguf_array_strings(tokens_kv, tokens) && gguf_array_strings(merges_kv, merges));

    int byte_failures = 0;
    for (int b = 0; b < 256; b++) {
        char expected[4];
        byte_text(b, expected);
        if (!string_is(tokens[b], expected) || gguf_array_int(types_kv, (uint64_t)b) != 1)
            byte_failures++;
    }
    CHECK_MSG(byte_failures == 0, "%s: %d byte tokens differ from GPT-2's byte-to-unicode", arch,
              byte_failures);
    CHECK(string_is(tokens[32], "\xc4\xa0") && string_is(tokens[10], "\xc4\x8a")); /* Ġ, Ċ */

    /* Merges: "A B", both parts tokens, A+B a normal token, no repeats. */
    CHECK_MSG(merges_kv->array_count >= 100, "%s: only %llu merges", arch,
              (unsigned long long)merges_kv->array_count);
    int merge_failures = 0;
    for (uint64_t i = 0; i < merges_kv->array_count; i++) {
        char merge[256], joined[256];
        if (merges[i].length >= sizeof merge) {
            merge_failures++;
            continue;
        }
        memcpy(merge, merges[i].data, merges[i].length);
        merge[merges[i].length] = 0;
        char *space = strchr(merge + 1, ' ');
        if (!space || strchr(space + 1, ' ')) {
            merge_failures++;
            continue;
        }
        *space = 0;
        snprintf(joined, sizeof joined, "%s%s", merge, space + 1);
        int64_t id = find_token(tokens, (uint64_t)vocab, joined);
        if (find_token(tokens, (uint64_t)vocab, merge) < 0 ||
            find_token(tokens, (uint64_t)vocab, space + 1) < 0 || id < 256 ||
            gguf_array_int(types_kv, (uint64_t)id) != 1)
            merge_failures++;
        for (uint64_t j = 0; j < i; j++)
            if (merges[j].length == merges[i].length &&
                memcmp(merges[j].data, merges[i].data, merges[i].length) == 0)
                merge_failures++;
    }
    CHECK_MSG(merge_failures == 0, "%s: %d bad merges", arch, merge_failures);
    /* English: the sample's most common word became a token. */
    CHECK(find_token(tokens, (uint64_t)vocab, "\xc4\xa0the") >= 256);

    /* Specials, their types and ids. */
    int64_t bos = get_int(m, "tokenizer.ggml.bos_token_id"), eos = get_int(m, "tokenizer.ggml.eos_token_id");
    if (qwen) {
        CHECK(bos == find_token(tokens, (uint64_t)vocab, "<|endoftext|>") && bos > 0);
        CHECK(eos == find_token(tokens, (uint64_t)vocab, "<|im_end|>") && eos > 0);
        int64_t start = find_token(tokens, (uint64_t)vocab, "<|im_start|>");
        int64_t think = find_token(tokens, (uint64_t)vocab, "<think>");
        CHECK(start > 0 && gguf_array_int(types_kv, (uint64_t)start) == 3);
        CHECK(think > 0 && gguf_array_int(types_kv, (uint64_t)think) == 4);
        CHECK(find_token(tokens, (uint64_t)vocab, "</think>") == think + 1);
    } else if (gpt) {
        CHECK(bos == find_token(tokens, (uint64_t)vocab, "<|startoftext|>") && bos > 0);
        CHECK(eos == find_token(tokens, (uint64_t)vocab, "<|return|>") && eos > 0);
        CHECK(get_int(m, "tokenizer.ggml.eot_token_id") == find_token(tokens, (uint64_t)vocab, "<|end|>"));
        const char *harmony[] = {"<|start|>", "<|message|>", "<|channel|>", "<|call|>", "<|constrain|>"};
        for (int i = 0; i < 5; i++) {
            int64_t id = find_token(tokens, (uint64_t)vocab, harmony[i]);
            CHECK_MSG(id > 0 && gguf_array_int(types_kv, (uint64_t)id) == 3, "%s missing", harmony[i]);
        }
    } else {
        CHECK(bos == find_token(tokens, (uint64_t)vocab, "<|begin_of_text|>") && bos > 0);
        CHECK(eos == find_token(tokens, (uint64_t)vocab, "<|eot_id|>") && eos > 0);
    }
    bool add_bos = true;
    CHECK(gguf_get_bool(m, "tokenizer.ggml.add_bos_token", &add_bos) &&
          add_bos == (strcmp(arch, "llama") == 0));

    /* Placeholders fill the rest: the last id is one, of type unused; the
     * specials sit right after the merged tokens. */
    int64_t first_placeholder = vocab;
    while (first_placeholder > 0 && gguf_array_int(types_kv, (uint64_t)first_placeholder - 1) == 5)
        first_placeholder--;
    CHECK_MSG(first_placeholder < vocab && gguf_array_int(types_kv, (uint64_t)first_placeholder - 1) >= 3,
              "%s: placeholders do not follow the specials", arch);
    char last[48];
    snprintf(last, sizeof last, "<|placeholder_%d|>", vocab - 1);
    CHECK_MSG(string_is(tokens[vocab - 1], last), "%s: last token is not %s", arch, last);
    CHECK(gguf_array_int(types_kv, (uint64_t)vocab - 1) == 5);

    /* The family's real chat template, byte for byte. */
    char path[1024];
    const char *file = qwen ? "data/chat-templates/Qwen-Qwen3-0.6B.jinja"
                     : gpt  ? "data/chat-templates/openai-gpt-oss-120b.jinja"
                            : "data/chat-templates/meta-llama-Llama-3.1-8B-Instruct.jinja";
    size_t template_size = 0;
    char *expected = test_read_file(test_shared_path(path, sizeof path, file), &template_size);
    CHECK(expected != NULL);
    CHECK_MSG(gguf_get_string(m, "tokenizer.chat_template", &text) && expected &&
                  text.length == template_size && memcmp(text.data, expected, template_size) == 0,
              "%s: chat template differs from %s", arch, file);
    free(expected);
    free(tokens);
    free(merges);
}

static void check_metadata(const gguf_model *m, const shape *s)
{
    char key[128];
    gguf_string text;
    CHECK(gguf_get_string(m, "general.architecture", &text) && string_is(text, s->arch));
#define KEY(suffix) (snprintf(key, sizeof key, "%s.%s", s->arch, suffix), key)
    CHECK(get_int(m, KEY("block_count")) == s->layers);
    CHECK(get_int(m, KEY("embedding_length")) == s->embd);
    CHECK(get_int(m, KEY("attention.head_count")) == s->heads);
    CHECK(get_int(m, KEY("attention.head_count_kv")) == s->kv_heads);
    CHECK(get_int(m, KEY("attention.key_length")) == s->head_dim);
    CHECK(get_int(m, KEY("attention.value_length")) == s->head_dim);
    CHECK(get_int(m, KEY("context_length")) > 0);
    float eps = 0, base = 0;
    CHECK(gguf_get_float(m, KEY("attention.layer_norm_rms_epsilon"), &eps) && eps > 0 && eps < 1e-3f);
    CHECK(gguf_get_float(m, KEY("rope.freq_base"), &base) && base >= 10000.0f);
    if (strcmp(s->arch, "llama") == 0 && s->experts == 0) {
        CHECK(get_int(m, KEY("feed_forward_length")) == s->ff);
        CHECK(get_int(m, KEY("rope.dimension_count")) == s->head_dim);
        CHECK(gguf_find_kv(m, KEY("expert_count")) == NULL);
    } else if (strcmp(s->arch, "llama") == 0 || strcmp(s->arch, "olmoe") == 0) {
        /* Mixtral's and OLMoE's files: feed_forward_length is the experts' width */
        CHECK(get_int(m, KEY("feed_forward_length")) == s->expert_ff);
        CHECK(gguf_find_kv(m, KEY("expert_feed_forward_length")) == NULL);
        CHECK(get_int(m, KEY("expert_count")) == s->experts);
        CHECK(get_int(m, KEY("expert_used_count")) == s->used);
    } else {
        CHECK(get_int(m, KEY("expert_count")) == s->experts);
        CHECK(get_int(m, KEY("expert_used_count")) == s->used);
        CHECK(get_int(m, KEY("expert_feed_forward_length")) == s->expert_ff);
    }
    if (strcmp(s->arch, "qwen2moe") == 0)
        CHECK(get_int(m, KEY("expert_shared_feed_forward_length")) == s->shared_ff);
    if (strcmp(s->arch, "gpt-oss") == 0) {
        float factor = 0;
        CHECK(get_int(m, KEY("attention.sliding_window")) > 0);
        CHECK(gguf_get_string(m, KEY("rope.scaling.type"), &text) && string_is(text, "yarn"));
        CHECK(gguf_get_float(m, KEY("rope.scaling.factor"), &factor) && factor == 32.0f);
        CHECK(get_int(m, KEY("rope.scaling.original_context_length")) == 4096);
    }
#undef KEY
    CHECK(get_int(m, "general.quantization_version") == 2);
    CHECK(get_int(m, "general.file_type") >= 0);
}

/* Writes one model, reopens it, checks everything; returns the model
 * (caller closes) so more checks can follow. */
static gguf_model *make_and_check(const shape *s, const char *type, const char *extra, type_rule rule,
                                  const char *file_name)
{
    char file[1200], label[160];
    mk_path(file, sizeof file, file_name);
    snprintf(label, sizeof label, "%s/%s%s", s->arch, type, extra);
    int status = generate(s, type, extra, file);
    char *errors = test_read_file(mk_stderr, NULL);
    CHECK_MSG(status == 0, "%s: bmoe-mkmodel exited %d: %s", label, status, errors ? errors : "");
    free(errors);
    /* --plan predicts the file size exactly. */
    status = mk_run("--arch %s --layers %d --embd %d --heads %d --kv-heads %d --head-dim %d "
                    "--experts %d --experts-used %d --expert-ff %d --ff %d --vocab %d --type %s %s "
                    "--plan",
                    s->arch, s->layers, s->embd, s->heads, s->kv_heads, s->head_dim, s->experts,
                    s->used, s->expert_ff, s->ff, s->vocab, type, extra);
    char *plan = test_read_file(mk_stdout, NULL);
    const char *total = plan ? strstr(plan, "file_bytes=") : NULL;
    unsigned long long planned = total ? strtoull(total + 11, NULL, 10) : 0;
    CHECK_MSG(status == 0 && planned == mk_file_size(file), "%s: plan says %llu bytes, file has %llu",
              label, planned, (unsigned long long)mk_file_size(file));
    free(plan);

    bmoe_error err;
    error_clear(&err);
    gguf_model *m = gguf_open(file, &err);
    CHECK_MSG(m != NULL, "%s: gguf_open: %s", label, err.message);
    if (!m)
        return NULL;
    check_tensors(m, s, rule, label);
    check_metadata(m, s);
    return m;
}

static void check_statistics(const gguf_model *m, const shape *s, const char *label)
{
    /* Matrices: mean ~0, deviation ~1/sqrt(fan_in); norms near 1; the
     * router spread 4/sqrt(n_embd); every value finite. */
    struct {
        const char *name;
        double deviation;
    } cases[] = {
        {"blk.0.attn_q.weight", 1.0 / sqrt(s->embd)},
        {"blk.0.ffn_gate_exps.weight", 1.0 / sqrt(s->embd)},
        {"blk.0.ffn_down_exps.weight", 1.0 / sqrt(s->expert_ff)},
        {"blk.0.ffn_gate_inp.weight", 4.0 / sqrt(s->embd)},
        {"token_embd.weight", 1.0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const gguf_tensor *t = gguf_find_tensor(m, cases[i].name);
        int64_t n = 0;
        float *values = t ? mk_dequantize(t, 64, &n) : NULL;
        double mean = 0, deviation = 0;
        CHECK_MSG(values && mk_stats(values, n, &mean, &deviation), "%s: %s not decodable/finite",
                  label, cases[i].name);
        CHECK_MSG(deviation > 0.6 * cases[i].deviation && deviation < 1.6 * cases[i].deviation &&
                      fabs(mean) < 0.25 * cases[i].deviation,
                  "%s: %s mean %g deviation %g, expected ~0 and ~%g", label, cases[i].name, mean,
                  deviation, cases[i].deviation);
        free(values);
    }
    const gguf_tensor *norm = gguf_find_tensor(m, "blk.0.attn_norm.weight");
    int64_t n = 0;
    float *values = norm ? mk_dequantize(norm, 1, &n) : NULL;
    int outside = 0;
    for (int64_t i = 0; values && i < n; i++)
        if (!(values[i] >= 0.9f && values[i] <= 1.1f))
            outside++;
    CHECK_MSG(values && outside == 0, "%s: %d norm weights outside [0.9, 1.1]", label, outside);
    free(values);
}

int main(void)
{
    mk_setup("mkmodel_files");
    /* Vocabularies of 1000: more room than the sample text has merges, so
     * placeholders fill the end. */
    shape qwen = {"qwen3moe", 2, 256, 4, 2, 64, 4, 2, 256, 1024, 1000, 0};
    shape gpt = {"gpt-oss", 2, 256, 4, 2, 64, 4, 2, 256, 256, 1000, 0};
    shape llama = {"llama", 2, 256, 4, 2, 64, 0, 0, 0, 512, 1000, 0};
    const shape *shapes[] = {&qwen, &gpt, &llama};
    for (int i = 0; i < 3; i++) {
        gguf_model *m = make_and_check(shapes[i], "f32", "", rule_f32, "f32.gguf");
        if (m) {
            check_tokenizer(m, shapes[i]->arch, shapes[i]->vocab);
            if (i < 2)
                check_statistics(m, shapes[i], shapes[i]->arch);
            gguf_close(m);
        }
        /* The K-quants from floats are slow to quantize: those layouts are
         * written with random blocks (their quantizer runs in the q4_k_m and
         * split tests). */
        struct {
            const char *type;
            const char *fill;
            type_rule rule;
        } plain[] = {{"f16", "", rule_f16},      {"bf16", "", rule_bf16},
                     {"q8_0", "", rule_q8_0},    {"mxfp4", "", rule_mxfp4},
                     {"q5_k", " --fill blocks", rule_q5_k}, {"q6_k", " --fill blocks", rule_q6_k}};
        for (size_t p = 0; p < sizeof plain / sizeof plain[0]; p++) {
            m = make_and_check(shapes[i], plain[p].type, plain[p].fill, plain[p].rule, "plain.gguf");
            if (m && i < 2 && p >= 2)
                check_statistics(m, shapes[i], plain[p].type);
            gguf_close(m);
        }
    }

    /* The simple MoE architectures: Mixtral-style llama, qwen2moe, olmoe. */
    shape mixtral = {"llama", 2, 256, 4, 2, 64, 4, 2, 256, 512, 1000, 0};
    shape qwen2moe = {"qwen2moe", 2, 256, 4, 2, 64, 4, 2, 256, 1024, 1000, 384};
    shape olmoe = {"olmoe", 2, 256, 4, 4, 64, 4, 2, 256, 256, 1000, 0};
    const shape *simple[] = {&mixtral, &qwen2moe, &olmoe};
    for (int i = 0; i < 3; i++) {
        const char *extra = simple[i] == &qwen2moe ? " --shared-ff 384" : "";
        gguf_close(make_and_check(simple[i], "f32", extra, rule_f32, "simple-f32.gguf"));
        gguf_close(make_and_check(simple[i], "q8_0", extra, rule_q8_0, "simple-q8_0.gguf"));
    }

    /* Recipes over 8 layers (q4_k_m's layer pattern; written with random
     * blocks, which is quick), and q4_k_m quantized from floats. */
    shape qwen8 = {"qwen3moe", 8, 256, 2, 1, 128, 2, 1, 256, 1024, 300, 0};
    shape gpt8 = {"gpt-oss", 8, 256, 2, 1, 128, 2, 1, 256, 256, 300, 0};
    shape llama8 = {"llama", 8, 256, 2, 1, 128, 0, 0, 0, 256, 300, 0};
    gguf_model *m = make_and_check(&qwen8, "q4_k_m", " --fill blocks", rule_q4_k_m_8, "q4km-blocks.gguf");
    if (m)
        check_statistics(m, &qwen8, "q4_k_m blocks");
    gguf_close(m);
    gguf_close(make_and_check(&llama8, "q4_k_m", " --fill blocks", rule_q4_k_m_8, "llama-q4km.gguf"));
    gguf_close(make_and_check(&gpt8, "q4_k_m", " --fill blocks", rule_q4_k_m_gpt_oss_8, "gpt-q4km.gguf"));
    shape qwen2 = {"qwen3moe", 2, 256, 2, 1, 128, 2, 1, 256, 1024, 300, 0};
    m = make_and_check(&qwen2, "q4_k_m", "", rule_q4_k_m_2, "q4km.gguf");
    if (m)
        check_statistics(m, &qwen2, "q4_k_m quantize");
    gguf_close(m);
    const char *block_types[] = {"q8_0", "mxfp4"};
    for (int i = 0; i < 2; i++) {
        m = make_and_check(&qwen, block_types[i], " --fill blocks", i == 0 ? rule_q8_0 : rule_mxfp4,
                           "blocks.gguf");
        if (m)
            check_statistics(m, &qwen, block_types[i]);
        gguf_close(m);
    }
    m = make_and_check(&gpt, "mxfp4_moe", "", rule_mxfp4_moe, "gpt-mxfp4moe.gguf");
    if (m)
        check_statistics(m, &gpt, "mxfp4_moe");
    gguf_close(m);
    m = make_and_check(&gpt, "mxfp4_moe", " --fill blocks", rule_mxfp4_moe, "gpt-mxfp4moe-b.gguf");
    if (m)
        check_statistics(m, &gpt, "mxfp4_moe blocks");
    gguf_close(m);

    /* Rows that are not whole blocks fall back: embd 96 -> Q8_0, 40 -> F32. */
    shape narrow = {"qwen3moe", 1, 96, 4, 2, 64, 4, 2, 256, 384, 300, 0};
    gguf_close(make_and_check(&narrow, "q4_k", "", rule_q4_k_fallback, "narrow.gguf"));
    shape narrower = {"llama", 1, 40, 4, 2, 64, 0, 0, 0, 256, 300, 0};
    gguf_close(make_and_check(&narrower, "q4_k", "", rule_q4_k_f32_fallback, "narrower.gguf"));
    shape narrow_experts = {"qwen3moe", 1, 256, 4, 2, 64, 4, 2, 96, 256, 300, 0};
    m = make_and_check(&narrow_experts, "iq2_xxs", " --fill blocks", rule_iq2_xxs_fallback, "iq-narrow.gguf");
    if (m)
        check_statistics(m, &narrow_experts, "iq2_xxs blocks, IQ4_NL down");
    gguf_close(m);

    /* At the real vocabulary size the specials sit at their real ids. */
    shape full_vocab = {"qwen3moe", 1, 64, 1, 1, 64, 2, 1, 32, 64, 151936, 0};
    char file[1200];
    CHECK(generate(&full_vocab, "q8_0", "", mk_path(file, sizeof file, "vocab.gguf")) == 0);
    bmoe_error err;
    m = gguf_open(file, &err);
    CHECK(m != NULL);
    if (m) {
        const gguf_kv *kv = gguf_find_kv(m, "tokenizer.ggml.tokens");
        gguf_string *tokens = calloc(151936, sizeof *tokens);
        CHECK(kv && gguf_array_strings(kv, tokens));
        CHECK(string_is(tokens[151643], "<|endoftext|>") && string_is(tokens[151645], "<|im_end|>"));
        CHECK(string_is(tokens[151667], "<think>") && string_is(tokens[151668], "</think>"));
        CHECK(get_int(m, "tokenizer.ggml.eos_token_id") == 151645);
        CHECK(get_int(m, "tokenizer.ggml.bos_token_id") == 151643);
        free(tokens);
        gguf_close(m);
    }
    return test_finish();
}
