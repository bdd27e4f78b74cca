/* The grid i-quants and the ternary formats end to end: a tiny qwen3moe
 * whose experts bmoe-mkmodel writes in one of them (random valid blocks;
 * the other matrices Q8_0), evaluated by bmoe (the prompt as one prefill
 * batch, then each greedy id as a single-token decode, teacher forcing)
 * against llama.cpp's logits of the same file in data/ (written by
 * data/regenerate.sh). Checked with the quantized-model tolerances of
 * shared/oracle/README.md (median over rows of the row's largest difference
 * <= 0.4, argmax agreement >= 97 % on rows with a clear top-2 margin, and
 * there every greedy step's argmax equal to llama.cpp's greedy id) and,
 * since both engines quantize activations the same way and sum the same
 * integers, every row within IQ_MAX_D and some of them within IQ_CLOSE_D.
 * (Greedy steps without a clear margin can flip: TQ2_0's first step and
 * IQ2_XXS's sixth have llama.cpp's top two 0.026 apart, and the AVX-512
 * and NEON sets round differently enough to swap them.)
 * Usage: test_quant_iq_logits MODEL_NAME (qwen3moe-tiny-iq2_xxs, ...). */
#include <stdbool.h>
#include <string.h>

#include "../mkmodel/mkmodel_run.h"
#include "../models/oracle_support.h"
#include "bmoe.h"

/* Largest difference allowed on any row: what is left when the two engines
 * run the same integer sums is float rounding in the other operations
 * (attention, norms, the f32 order of block sums), which the router and
 * the 8-bit activations amplify only now and then (measured: at most 0.16
 * with the scalar, AVX2 and AVX-512 kernels, 0.26 with NEON under qemu).
 * A sanity bound: one wrong grid point gave 0.36 to 0.6, which the rows
 * within IQ_CLOSE_D catch. */
#define IQ_MAX_D 0.5f

/* The float models' tolerance (shared/oracle/README.md), which some rows
 * must meet. Every row does until a rounding difference elsewhere (the
 * order of f32 sums) flips an 8-bit activation or a routing choice, which
 * attention then carries to every later position: on these models that
 * leaves between 7 and all 56 rows within it, depending on the kernel set
 * (scalar, AVX2, AVX-512, and NEON under qemu).
 * A single wrong grid point (measured: one level of one of IQ2_XXS's 256
 * points, or of IQ1's 2048) leaves none, as every token meets it. */
#define IQ_CLOSE_D 1e-3f
#define IQ_CLOSE_ROWS 2

static const struct {
    const char *name;
    const char *type; /* bmoe-mkmodel --type */
} models[] = {
    {"qwen3moe-tiny-iq2_xxs", "iq2_xxs"}, {"qwen3moe-tiny-iq2_xs", "iq2_xs"},
    {"qwen3moe-tiny-iq2_s", "iq2_s"},     {"qwen3moe-tiny-iq3_xxs", "iq3_xxs"},
    {"qwen3moe-tiny-iq3_s", "iq3_s"},     {"qwen3moe-tiny-iq1_s", "iq1_s"},
    {"qwen3moe-tiny-iq1_m", "iq1_m"},     {"qwen3moe-tiny-tq1_0", "tq1_0"},
    {"qwen3moe-tiny-tq2_0", "tq2_0"},
};

/* The prefill rows, then one row per teacher-forced decode step; NULL (with
 * a failed check) if the model does not load or evaluate. */
static float *evaluate(const char *path, const oracle_case *c)
{
    bmoe_error error = {0};
    bmoe_model_params model_params = bmoe_model_default_params();
    bmoe_model *model = bmoe_model_load(path, &model_params, &error);
    CHECK_MSG(model != NULL, "load %s: %s", path, error.message);
    if (!model)
        return NULL;
    CHECK(bmoe_model_n_vocab(model) == c->n_vocab);
    bmoe_context_params params = bmoe_context_default_params();
    params.n_ctx = 128;
    params.n_threads = 2;
    params.kv_type = BMOE_KV_F32;
    bmoe_context *context = bmoe_context_create(model, &params, &error);
    CHECK_MSG(context != NULL, "context: %s", error.message);
    float *logits = calloc((size_t)c->rows * (size_t)c->n_vocab, sizeof(float));
    bool ok = context && bmoe_eval(context, c->prompt_ids, c->n_prompt, logits, true, NULL, &error) == 0;
    CHECK_MSG(ok, "prefill: %s", error.message);
    for (int s = 0; ok && s < c->n_greedy; s++) {
        ok = bmoe_eval(context, &c->greedy_ids[s], 1, logits + (size_t)(c->n_prompt + s) * (size_t)c->n_vocab,
                       false, NULL, &error) == 0;
        CHECK_MSG(ok, "decode step %d: %s", s, error.message);
    }
    bmoe_context_free(context);
    bmoe_model_free(model);
    if (!ok) {
        free(logits);
        return NULL;
    }
    return logits;
}

static void compare(const char *name, const oracle_case *c, const float *logits)
{
    float *d = calloc((size_t)c->rows, sizeof(float));
    float worst = 0;
    int worst_row = 0, margin_rows = 0, agree = 0, greedy_same = 0;
    for (int r = 0; r < c->rows; r++) {
        const float *mine = logits + (size_t)r * (size_t)c->n_vocab;
        const float *theirs = c->logits + (size_t)r * (size_t)c->n_vocab;
        d[r] = oracle_row_max_diff(mine, theirs, c->n_vocab);
        if (d[r] > worst) {
            worst = d[r];
            worst_row = r;
        }
        bool clear = oracle_top2_margin(theirs, c->n_vocab) >= 0.5f;
        if (clear) {
            margin_rows++;
            agree += oracle_argmax(mine, c->n_vocab) == oracle_argmax(theirs, c->n_vocab);
        }
        /* row n_prompt - 1 + s chose greedy id s */
        int step = r - (c->n_prompt - 1);
        if (step >= 0 && step < c->n_greedy) {
            bool same = oracle_argmax(mine, c->n_vocab) == c->greedy_ids[step];
            greedy_same += same;
            if (clear)
                CHECK_MSG(same, "%s: greedy step %d: %d, llama.cpp %d", name, step, oracle_argmax(mine, c->n_vocab),
                          c->greedy_ids[step]);
        }
    }
    int close_rows = 0;
    for (int r = 0; r < c->rows; r++)
        close_rows += d[r] <= IQ_CLOSE_D;
    qsort(d, (size_t)c->rows, sizeof(float), compare_floats);
    float median = d[c->rows / 2];
    printf("%s: rows %d, max d %.3g (row %d), median d %.3g, %d rows within %g, argmax %d/%d on margin rows, "
           "greedy ids %d/%d\n",
           name, c->rows, worst, worst_row, median, close_rows, (double)IQ_CLOSE_D, agree, margin_rows, greedy_same,
           c->n_greedy);
    CHECK_MSG(median <= 0.4f, "%s: median d %g > 0.4", name, median);
    CHECK_MSG(margin_rows > 0 && agree * 100 >= 97 * margin_rows, "%s: argmax agreement %d/%d < 97%%", name, agree,
              margin_rows);
    CHECK_MSG(worst <= IQ_MAX_D, "%s: max d %g > %g at row %d", name, worst, IQ_MAX_D, worst_row);
    CHECK_MSG(close_rows >= IQ_CLOSE_ROWS, "%s: only %d of %d rows within %g", name, close_rows, c->rows,
              (double)IQ_CLOSE_D);
    free(d);
}

int main(int argc, char **argv)
{
    int which = -1;
    for (int i = 0; argc == 2 && i < (int)(sizeof models / sizeof models[0]); i++)
        if (strcmp(models[i].name, argv[1]) == 0)
            which = i;
    if (which < 0) {
        fprintf(stderr, "usage: test_quant_iq_logits MODEL_NAME (qwen3moe-tiny-iq2_xxs, ...)\n");
        return 2;
    }
    const char *name = models[which].name;
    oracle_case c;
    if (oracle_data_case_load(&c, BMOE_TEST_DATA_DIR, name) != 0)
        return test_finish();
    CHECK(c.rows == c.n_prompt + c.n_greedy);
    char scratch[160], file[160], path[1200];
    snprintf(scratch, sizeof scratch, "quant_iq_logits_%s", name);
    mk_setup(scratch);
    snprintf(file, sizeof file, "%s.gguf", name);
    mk_path(path, sizeof path, file);
    int status = mk_run("--shape tiny-qwen3moe --type %s --quiet -o '%s'", models[which].type, path);
    CHECK_MSG(status == 0, "%s: bmoe-mkmodel exited %d", name, status);
    if (status == 0) {
        /* the experts are in the format under test, the rest is not */
        bmoe_error error = {0};
        gguf_model *file_model = gguf_open(path, &error);
        CHECK_MSG(file_model != NULL, "%s: %s", path, error.message);
        if (file_model) {
            const gguf_tensor *experts = gguf_find_tensor(file_model, "blk.0.ffn_down_exps.weight");
            const gguf_tensor *attention = gguf_find_tensor(file_model, "blk.0.attn_q.weight");
            CHECK(experts && (int)experts->type == quant_type_from_name(models[which].type));
            CHECK(attention && attention->type == TYPE_Q8_0);
            gguf_close(file_model);
        }
        float *logits = evaluate(path, &c);
        if (logits)
            compare(name, &c, logits);
        free(logits);
        remove(path);
    }
    oracle_case_free(&c);
    return test_finish();
}
