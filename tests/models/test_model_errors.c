/* Bad models and bad calls give one clear error line, never a crash: models
 * are written here with the GGUF writer (a small valid qwen3moe, then copies
 * with one defect each), loaded through the public API, and the message is
 * checked for what failed and where. */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "bmoe.h"
#include "gguf/gguf.h"
#include "quant/quant.h"
#include "test.h"

enum { EMBD = 32, HEADS = 2, HEADS_KV = 1, HEAD_DIM = 16, EXPERTS = 4, USED = 2, FF = 32, VOCAB = 16, LAYERS = 2 };

typedef struct defects {
    const char *architecture; /* NULL: qwen3moe */
    uint32_t expert_used_count;
    const char *missing;      /* tensor left out */
    const char *wrong_shape;  /* tensor with ne[1] one larger (or ne[0] for vectors) */
    const char *wrong_type;   /* tensor stored as F16 */
    uint32_t block_count;     /* 0: LAYERS */
    uint32_t nextn;           /* nextn_predict_layers, written when not 0 */
    uint32_t embedding_length; /* the key only (0: EMBD); the tensors keep EMBD */
    bool no_head_size;        /* attention.key_length and value_length left out */
    const char *extra;        /* one more F32 {EMBD} tensor of this name */
    uint32_t alignment;       /* general.alignment (0: the default) */
    uint32_t pad;             /* bytes of an extra string key, to move the data section */
    bool q8_0;                /* matrices (2-D and 3-D tensors) in Q8_0 */
} defects;

typedef struct tensor_spec {
    char name[64];
    int n_dims;
    int64_t ne[3];
    uint32_t type; /* as written */
} tensor_spec;

static int tensor_specs(tensor_spec *specs)
{
    int n = 0;
#define ADD(dims, a, b, c, ...)                                          \
    do {                                                                 \
        snprintf(specs[n].name, sizeof specs[n].name, __VA_ARGS__);      \
        specs[n].n_dims = dims;                                          \
        specs[n].ne[0] = a;                                              \
        specs[n].ne[1] = b;                                              \
        specs[n].ne[2] = c;                                              \
        n++;                                                             \
    } while (0)
    ADD(2, EMBD, VOCAB, 1, "token_embd.weight");
    ADD(1, EMBD, 1, 1, "output_norm.weight");
    for (int il = 0; il < LAYERS; il++) {
        ADD(1, EMBD, 1, 1, "blk.%d.attn_norm.weight", il);
        ADD(2, EMBD, HEADS * HEAD_DIM, 1, "blk.%d.attn_q.weight", il);
        ADD(2, EMBD, HEADS_KV * HEAD_DIM, 1, "blk.%d.attn_k.weight", il);
        ADD(2, EMBD, HEADS_KV * HEAD_DIM, 1, "blk.%d.attn_v.weight", il);
        ADD(1, HEAD_DIM, 1, 1, "blk.%d.attn_q_norm.weight", il);
        ADD(1, HEAD_DIM, 1, 1, "blk.%d.attn_k_norm.weight", il);
        ADD(2, HEADS * HEAD_DIM, EMBD, 1, "blk.%d.attn_output.weight", il);
        ADD(1, EMBD, 1, 1, "blk.%d.ffn_norm.weight", il);
        ADD(2, EMBD, EXPERTS, 1, "blk.%d.ffn_gate_inp.weight", il);
        ADD(3, EMBD, FF, EXPERTS, "blk.%d.ffn_gate_exps.weight", il);
        ADD(3, EMBD, FF, EXPERTS, "blk.%d.ffn_up_exps.weight", il);
        ADD(3, FF, EMBD, EXPERTS, "blk.%d.ffn_down_exps.weight", il);
    }
#undef ADD
    return n;
}

static bool write_model(const char *path, const defects *d)
{
    bmoe_error err;
    gguf_writer *w = gguf_writer_create(path, &err);
    if (!w)
        return false;
    const char *arch = d->architecture ? d->architecture : "qwen3moe";
    char key[128];
#define KEY(suffix) (snprintf(key, sizeof key, "%s.%s", arch, suffix), key)
    if (d->alignment)
        gguf_writer_set_alignment(w, d->alignment);
    if (d->pad) {
        char pad[64] = "";
        memset(pad, 'p', d->pad < sizeof pad ? d->pad : sizeof pad - 1);
        gguf_writer_add_string(w, "test.pad", pad);
    }
    gguf_writer_add_string(w, "general.architecture", arch);
    gguf_writer_add_uint32(w, KEY("block_count"), d->block_count ? d->block_count : LAYERS);
    if (d->nextn)
        gguf_writer_add_uint32(w, KEY("nextn_predict_layers"), d->nextn);
    gguf_writer_add_uint32(w, KEY("context_length"), 64);
    gguf_writer_add_uint32(w, KEY("embedding_length"), d->embedding_length ? d->embedding_length : EMBD);
    gguf_writer_add_uint32(w, KEY("attention.head_count"), HEADS);
    gguf_writer_add_uint32(w, KEY("attention.head_count_kv"), HEADS_KV);
    if (!d->no_head_size) {
        gguf_writer_add_uint32(w, KEY("attention.key_length"), HEAD_DIM);
        gguf_writer_add_uint32(w, KEY("attention.value_length"), HEAD_DIM);
    }
    gguf_writer_add_uint32(w, KEY("rope.dimension_count"), HEAD_DIM);
    gguf_writer_add_float32(w, KEY("rope.freq_base"), 10000.0f);
    gguf_writer_add_float32(w, KEY("attention.layer_norm_rms_epsilon"), 1e-6f);
    gguf_writer_add_uint32(w, KEY("expert_count"), EXPERTS);
    gguf_writer_add_uint32(w, KEY("expert_used_count"), d->expert_used_count ? d->expert_used_count : USED);
    gguf_writer_add_uint32(w, KEY("expert_feed_forward_length"), FF);
#undef KEY
    static tensor_spec specs[64];
    int n = tensor_specs(specs);
    if (d->extra) {
        snprintf(specs[n].name, sizeof specs[n].name, "%s", d->extra);
        specs[n].n_dims = 1;
        specs[n].ne[0] = EMBD;
        specs[n].ne[1] = specs[n].ne[2] = 1;
        n++;
    }
    for (int i = 0; i < n; i++) {
        tensor_spec *s = &specs[i];
        if (d->missing && strcmp(s->name, d->missing) == 0)
            continue;
        int64_t ne[3] = {s->ne[0], s->ne[1], s->ne[2]};
        if (d->wrong_shape && strcmp(s->name, d->wrong_shape) == 0)
            ne[s->n_dims == 1 ? 0 : 1] += 1;
        uint32_t type = d->wrong_type && strcmp(s->name, d->wrong_type) == 0 ? TYPE_F16 : TYPE_F32;
        if (d->q8_0 && s->n_dims >= 2)
            type = TYPE_Q8_0;
        gguf_writer_add_tensor_info(w, s->name, type, (uint32_t)s->n_dims, ne);
        s->ne[0] = ne[0]; /* remember the written shape and type for the data */
        s->ne[1] = ne[1];
        s->ne[2] = ne[2];
        s->type = type;
    }
    gguf_writer_begin_data(w);
    for (int i = 0; i < n; i++) {
        tensor_spec *s = &specs[i];
        if (d->missing && strcmp(s->name, d->missing) == 0)
            continue;
        int64_t count = s->ne[0] * s->ne[1] * s->ne[2];
        float row[EMBD];
        uint8_t block[sizeof row];
        for (int64_t j = 0; j < count; j++) {
            /* small deterministic weights; norms near 1 */
            float value = strstr(s->name, "norm") ? 1.0f : 0.1f * sinf((float)(j * 7 + i * 13));
            if (s->type == TYPE_F16) {
                uint16_t h = 0x3c00;
                gguf_writer_write_data(w, &h, sizeof h);
            } else if (s->type == TYPE_Q8_0) {
                row[j % s->ne[0]] = value;
                if ((j + 1) % s->ne[0] == 0) {
                    quant_format_of(TYPE_Q8_0)->quantize_row(row, block, s->ne[0]);
                    gguf_writer_write_data(w, block, quant_row_bytes(TYPE_Q8_0, s->ne[0]));
                }
            } else {
                gguf_writer_write_data(w, &value, sizeof value);
            }
        }
    }
    bool ok = gguf_writer_finish(w, &err) == 0;
    if (!ok)
        fprintf(stderr, "writer: %s\n", err.message);
    return ok;
}

/* Loading fails and the message contains every one of the given fragments. */
static void expect_load_error(const char *label, const defects *d, const char *fragment1, const char *fragment2)
{
    char path[1024];
    bmoe_error error = {0};
    snprintf(path, sizeof path, "%s/model-errors-%s.gguf", test_tmp_dir(), label);
    CHECK_MSG(write_model(path, d), "%s: cannot write the model", label);
    bmoe_model *model = bmoe_model_load(path, NULL, &error);
    CHECK_MSG(model == NULL, "%s: a broken model loaded", label);
    bmoe_model_free(model);
    CHECK_MSG(strstr(error.message, fragment1) != NULL, "%s: message '%s' lacks '%s'", label, error.message, fragment1);
    if (fragment2)
        CHECK_MSG(strstr(error.message, fragment2) != NULL, "%s: message '%s' lacks '%s'", label, error.message, fragment2);
    CHECK_MSG(strchr(error.message, '\n') == NULL, "%s: message is not one line", label);
    remove(path);
}

static void test_valid_model(void)
{
    char path[1024];
    bmoe_error error = {0};
    snprintf(path, sizeof path, "%s/model-errors-valid.gguf", test_tmp_dir());
    defects none = {0};
    CHECK(write_model(path, &none));
    bmoe_model *model = bmoe_model_load(path, NULL, &error);
    CHECK_MSG(model != NULL, "valid model: %s", error.message);
    if (!model)
        return;
    CHECK(strcmp(bmoe_model_architecture(model), "qwen3moe") == 0);
    CHECK(bmoe_model_n_vocab(model) == VOCAB);
    CHECK(bmoe_model_n_layer(model) == LAYERS);
    CHECK(bmoe_model_n_ctx_train(model) == 64);

    bmoe_context_params params = bmoe_context_default_params();
    params.n_threads = 2;
    bmoe_context *context = bmoe_context_create(model, &params, &error);
    CHECK_MSG(context != NULL, "context: %s", error.message);
    if (context) {
        CHECK(bmoe_context_n_ctx(context) == 64); /* the model's, below the 4096 cap */
        int32_t tokens[70];
        for (int i = 0; i < 70; i++)
            tokens[i] = i % VOCAB;
        float logits[VOCAB * 70];
        CHECK(bmoe_eval(context, tokens, 10, logits, true, NULL, &error) == 0);
        bool finite = true;
        for (int i = 0; i < VOCAB * 10; i++)
            finite &= isfinite(logits[i]);
        CHECK(finite);
        /* a token outside the vocabulary: error, and the cache is untouched */
        int32_t bad[2] = {1, VOCAB};
        CHECK(bmoe_eval(context, bad, 2, logits, false, NULL, &error) == BMOE_ERR_INVALID_ARGUMENT);
        CHECK_MSG(strstr(error.message, "vocabulary") != NULL, "message: %s", error.message);
        CHECK(bmoe_context_position(context) == 10);
        /* past the context size */
        CHECK(bmoe_eval(context, tokens, 55, logits, false, NULL, &error) == BMOE_ERR_CONTEXT_FULL);
        CHECK(error.status == BMOE_ERR_CONTEXT_FULL);
        CHECK_MSG(strstr(error.message, "context overflow") != NULL, "message: %s", error.message);
        CHECK(bmoe_context_position(context) == 10);
        CHECK(bmoe_eval(context, tokens, 0, logits, false, NULL, &error) == BMOE_ERR_INVALID_ARGUMENT);
        /* truncating makes room again */
        bmoe_context_truncate(context, 4);
        CHECK(bmoe_context_position(context) == 4);
        CHECK(bmoe_eval(context, tokens, 60, logits, false, NULL, &error) == 0);
        CHECK(bmoe_context_position(context) == 64);
        bmoe_context_free(context);
    }
    params.n_ctx = -1;
    CHECK(bmoe_context_create(model, &params, &error) == NULL);
    CHECK(strstr(error.message, "invalid") != NULL);
    bmoe_model_free(model);
    remove(path);
}

/* The layers nextn_predict_layers declares are in the file but not run:
 * their tensors are no contradiction. */
static void test_nextn_layers(void)
{
    char path[1024];
    bmoe_error error = {0};
    snprintf(path, sizeof path, "%s/model-errors-nextn.gguf", test_tmp_dir());
    defects d = {.block_count = LAYERS, .nextn = 1};
    CHECK(write_model(path, &d));
    bmoe_model *model = bmoe_model_load(path, NULL, &error);
    CHECK_MSG(model != NULL, "nextn: %s", error.message);
    if (model)
        CHECK(bmoe_model_n_layer(model) == LAYERS - 1);
    bmoe_model_free(model);
    remove(path);
}

/* The first tensor whose data is not aligned for its type in the file at
 * path (f32 values: 4 bytes, f16 and Q8_0 blocks: 2), or NULL. */
static const char *misaligned_tensor(const char *path, char *name, size_t size)
{
    bmoe_error err;
    gguf_model *file = gguf_open(path, &err);
    if (!file)
        return NULL;
    const char *found = NULL;
    for (uint64_t i = 0; i < gguf_tensor_count(file) && !found; i++) {
        const gguf_tensor *t = gguf_tensor_at(file, i);
        uint64_t needed = t->type == TYPE_F32 ? 4 : 2;
        if (t->file_offset % needed != 0) {
            snprintf(name, size, "%s", t->name);
            found = name;
        }
    }
    gguf_close(file);
    return found;
}

/* general.alignment 1, 2 and 4, with the data section moved by 0..3 bytes:
 * a file whose tensors are misaligned for their types is refused with the
 * tensor named, in both dense-weight modes; every file that loads runs a
 * forward pass, which the sanitizer build checks for misaligned loads. */
static void test_alignment(void)
{
    int refused = 0, loaded = 0;
    for (uint32_t alignment = 1; alignment <= 4; alignment *= 2) {
        for (uint32_t pad = 0; pad < 4; pad++) {
            for (int q8_0 = 0; q8_0 < 2; q8_0++) {
                char path[1024], name[128];
    bmoe_error error = {0};
                snprintf(path, sizeof path, "%s/model-errors-align-%u-%u-%d.gguf", test_tmp_dir(), alignment, pad,
                         q8_0);
                defects d = {.alignment = alignment, .pad = pad + 1, .q8_0 = q8_0};
                CHECK_MSG(write_model(path, &d), "cannot write %s", path);
                const char *bad = misaligned_tensor(path, name, sizeof name);
                for (int mode = 0; mode < 2; mode++) {
                    bmoe_model_params params = {.dense_weights = mode ? BMOE_DENSE_WEIGHTS_ANON
                                                                      : BMOE_DENSE_WEIGHTS_MMAP};
                    bmoe_model *model = bmoe_model_load(path, &params, &error);
                    if (bad) {
                        char alignment_text[64];
                        snprintf(alignment_text, sizeof alignment_text, "(general.alignment is %u)", alignment);
                        CHECK_MSG(!model && strstr(error.message, "starts at file offset") && strstr(error.message, alignment_text),
                                  "%s (%s misaligned): %s", path, bad, model ? "loaded" : error.message);
                        refused++;
                    } else {
                        CHECK_MSG(model != NULL, "%s: %s", path, error.message);
                        loaded++;
                    }
                    if (!model)
                        continue;
                    bmoe_context_params context_params = bmoe_context_default_params();
                    context_params.n_threads = 2;
                    bmoe_context *context = bmoe_context_create(model, &context_params, &error);
                    CHECK_MSG(context != NULL, "context: %s", error.message);
                    int32_t tokens[4] = {1, 5, 9, 3};
                    float logits[VOCAB * 4];
                    bool finite = context && bmoe_eval(context, tokens, 4, logits, true, NULL, &error) == 0;
                    for (int i = 0; finite && i < VOCAB * 4; i++)
                        finite = isfinite(logits[i]);
                    CHECK_MSG(finite, "%s: forward pass: %s", path, error.message);
                    bmoe_context_free(context);
                    bmoe_model_free(model);
                }
                remove(path);
            }
        }
    }
    /* both outcomes happened: misaligned files exist and aligned ones run */
    CHECK_MSG(refused > 0 && loaded > 0, "%d refused, %d loaded", refused, loaded);
}

int main(void)
{
    bmoe_error error = {0};
    test_valid_model();

    CHECK(bmoe_model_load("/nonexistent/model.gguf", NULL, &error) == NULL);
    CHECK(error.message[0] != '\0');

    defects unknown = {.architecture = "notanarch"};
    expect_load_error("unknown-arch", &unknown, "unknown architecture", "notanarch");
    defects missing = {.missing = "blk.1.ffn_down_exps.weight"};
    expect_load_error("missing", &missing, "missing tensor", "blk.1.ffn_down_exps.weight");
    defects shape = {.wrong_shape = "blk.0.attn_q.weight"};
    expect_load_error("shape", &shape, "blk.0.attn_q.weight", "shape");
    defects vector_shape = {.wrong_shape = "blk.1.attn_k_norm.weight"};
    expect_load_error("vector-shape", &vector_shape, "blk.1.attn_k_norm.weight", "shape");
    defects type = {.wrong_type = "blk.0.ffn_norm.weight"};
    expect_load_error("type", &type, "blk.0.ffn_norm.weight", "F16");
    defects used = {.expert_used_count = EXPERTS + 1};
    expect_load_error("expert-used", &used, "expert_used_count", "expert_count");
    defects no_embedding = {.missing = "token_embd.weight"};
    expect_load_error("no-embedding", &no_embedding, "missing tensor", "token_embd.weight");

    /* keys that contradict the tensors: the layers past block_count, a
     * tensor the architecture has no use for (12 tensors per layer here) */
    defects fewer_layers = {.block_count = 1};
    expect_load_error("fewer-layers", &fewer_layers,
                      "tensor 'blk.1.attn_norm.weight' belongs to layer 1, but qwen3moe.block_count is 1",
                      "(and 11 more unused tensors)");
    defects extra = {.extra = "blk.0.ffn_gate_shexp.weight"};
    expect_load_error("extra", &extra, "tensor 'blk.0.ffn_gate_shexp.weight' is not used by the qwen3moe", NULL);
    defects odd_name = {.extra = "blk.0.odd\nname"};
    expect_load_error("odd-name", &odd_name, "tensor 'blk.0.odd\\nname' is not used", NULL);

    /* the message blames the keys that are there, not the absent default */
    defects head_size = {.embedding_length = 33, .no_head_size = true};
    expect_load_error("head-size", &head_size, "qwen3moe.attention.key_length is absent",
                      "qwen3moe.embedding_length 33 is not a multiple of qwen3moe.attention.head_count 2");
    defects control_arch = {.architecture = "qwen\n3\x01"};
    expect_load_error("control-arch", &control_arch, "unknown architecture 'qwen\\n3\\x01'", NULL);

    test_nextn_layers();
    test_alignment();
    return test_finish();
}
