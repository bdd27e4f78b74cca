/* The simple MoE architectures (qwen2moe, llama with experts, olmoe,
 * bailingmoe2, glm4moe, deepseek2) on tiny models bmoe-mkmodel generates: the
 * logits of the prompt as one
 * prefill batch, then of each greedy id as a single-token decode (teacher
 * forcing), against llama.cpp's within shared/oracle/README.md's tolerances,
 * and every greedy step's argmax equal to llama.cpp's greedy id (F32; the
 * quantized models count their greedy steps among the rows whose argmax must
 * agree 97 % of the time: a routing near-tie in a quantized model resolves
 * by the last bit, which differs with the SIMD kernels of either engine, so
 * that one step's row moves by whole units on one CPU and not on another:
 * tiny-deepseek2's Q4_K_M step 8 matches llama.cpp's AVX-512 reference
 * on an AVX-512 host (the suite passed there), not with bmoe's scalar or
 * AVX2 kernels); the same
 * logits bit for bit with the experts streamed through a small cache; and
 * the --info summary's lines.
 * Usage: test_simple_archs MODEL_NAME (a name of simple_archs.h). */
#include <stdbool.h>
#include <string.h>

#include "bmoe.h"
#include "simple_archs.h"

/* Small enough that the experts do not all fit (F32: 0.75 MiB an expert,
 * 16 or 8 per layer; Q4_K_M: about a seventh of it), so the streamed run
 * reads, evicts and reads again. */
#define STREAM_CACHE_MB_F32 6
#define STREAM_CACHE_MB_QUANTIZED 1

/* What the route callback saw of a grouped router: every routing's experts
 * must lie in at most n_group_used of the groups. */
typedef struct group_watch {
    int per_group, n_group_used;
    int routings, spread_too_wide;
} group_watch;

static void watch_groups(void *user, const bmoe_route_event *event)
{
    group_watch *w = user;
    bool used[64] = {false};
    int n_used = 0;
    for (int k = 0; k < event->n_experts_used; k++) {
        int g = event->experts[k] / w->per_group;
        if (g >= 0 && g < 64 && !used[g]) {
            used[g] = true;
            n_used++;
        }
    }
    w->routings++;
    w->spread_too_wide += n_used > w->n_group_used;
}

/* The prefill and teacher-forced decode steps; NULL (with a failed check)
 * if the model does not load or evaluate. */
static float *evaluate(const simple_arch_model *m, const char *path, const oracle_case *c, bool streamed,
                       bool quantized)
{
    bmoe_error error = {0};
    bmoe_model_params model_params = bmoe_model_default_params();
    if (streamed) {
        model_params.stream.enabled = true;
        model_params.stream.cache_mb = quantized ? STREAM_CACHE_MB_QUANTIZED : STREAM_CACHE_MB_F32;
        model_params.stream.overlap = true;
    }
    bmoe_model *model = bmoe_model_load(path, &model_params, &error);
    CHECK_MSG(model != NULL, "load %s: %s", path, error.message);
    if (!model)
        return NULL;
    CHECK(bmoe_model_n_vocab(model) == c->n_vocab);
    bmoe_context_params params = bmoe_context_default_params();
    params.n_ctx = c->rows > 128 ? c->rows : 128; /* deepseek4-long's 316 rows */
    params.n_threads = 2;
    params.kv_type = BMOE_KV_F32;
    group_watch watch = {0};
    if (m->n_group > 0) {
        watch = (group_watch){m->n_expert / m->n_group, m->n_group_used, 0, 0};
        params.route_callback = watch_groups;
        params.route_user = &watch;
    }
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
    if (m->n_group > 0)
        CHECK_MSG(watch.routings > 0 && watch.spread_too_wide == 0, "%s: %d of %d routings span more than %d groups",
                  m->name, watch.spread_too_wide, watch.routings, m->n_group_used);
    if (streamed) {
        bmoe_stream_state state;
        bmoe_model_get_stream_state(model, &state);
        CHECK_MSG(state.streaming && state.misses > 0 && state.evictions > 0,
                  "%s: streamed %d, %llu misses, %llu evictions", path, state.streaming,
                  (unsigned long long)state.misses, (unsigned long long)state.evictions);
    }
    bmoe_context_free(context);
    bmoe_model_free(model);
    if (!ok) {
        free(logits);
        return NULL;
    }
    return logits;
}

static void compare(const char *name, const oracle_case *c, const float *logits, bool quantized)
{
    float *d = calloc((size_t)c->rows, sizeof(float));
    float worst = 0;
    int worst_row = 0, margin_rows = 0, agree = 0;
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
        if (step >= 0 && step < c->n_greedy && !quantized)
            CHECK_MSG(oracle_argmax(mine, c->n_vocab) == c->greedy_ids[step], "%s: greedy step %d: %d, llama.cpp %d",
                      name, step, oracle_argmax(mine, c->n_vocab), c->greedy_ids[step]);
    }
    qsort(d, (size_t)c->rows, sizeof(float), compare_floats);
    float median = d[c->rows / 2];
    printf("%s: rows %d, max d %.3g (row %d), median d %.3g, argmax %d/%d on margin rows\n", name, c->rows, worst,
           worst_row, median, agree, margin_rows);
    if (quantized) {
        CHECK_MSG(median <= 0.4f, "%s: median d %g > 0.4", name, median);
        CHECK_MSG(margin_rows > 0 && agree * 100 >= 97 * margin_rows, "%s: argmax agreement %d/%d < 97%%", name,
                  agree, margin_rows);
    } else {
        CHECK_MSG(worst <= 1e-3f, "%s: max d %g > 1e-3 at row %d", name, worst, worst_row);
    }
    free(d);
}

/* bmoe-cli --info: the summary names the architecture and the experts. */
static void check_info(const simple_arch_model *m, const char *path)
{
    int status = mk_run_tool("bmoe-cli", "--info '%s'", path);
    CHECK_MSG(status == 0, "%s: bmoe-cli --info exited %d", m->name, status);
    char *out = test_read_file(mk_stdout, NULL);
    char line[128];
    snprintf(line, sizeof line, "\narchitecture: %s\n", m->architecture);
    CHECK_MSG(out && strstr(out, line), "%s: --info lacks '%s'", m->name, line + 1);
    snprintf(line, sizeof line, "\nexperts: %d (%d used)\n", m->n_expert, m->n_expert_used);
    CHECK_MSG(out && strstr(out, line), "%s: --info lacks '%s'", m->name, line + 1);
    if (m->n_group > 0) {
        snprintf(line, sizeof line, "\nexpert groups: %d (%d used)\n", m->n_group, m->n_group_used);
        CHECK_MSG(out && strstr(out, line), "%s: --info lacks '%s'", m->name, line + 1);
    }
    free(out);
}

int main(int argc, char **argv)
{
    const simple_arch_model *m = argc == 2 ? simple_arch_find(argv[1]) : NULL;
    if (!m) {
        fprintf(stderr, "usage: test_simple_archs MODEL_NAME (qwen2moe-tiny-f32, ...)\n");
        return 2;
    }
    oracle_case c;
    if (simple_arch_case_load(&c, m->name) != 0)
        return test_finish();
    CHECK(c.rows == c.n_prompt + c.n_greedy);
    char scratch[160], path[1200];
    snprintf(scratch, sizeof scratch, "simple_archs_%s", m->name);
    mk_setup(scratch);
    bool quantized = strstr(m->name, "f32") == NULL;
    if (simple_arch_write(m, path, sizeof path)) {
        check_info(m, path);
        float *resident = evaluate(m, path, &c, false, quantized);
        if (resident)
            compare(m->name, &c, resident, quantized);
        float *streamed = evaluate(m, path, &c, true, quantized);
        CHECK_MSG(resident && streamed &&
                      memcmp(resident, streamed, (size_t)c.rows * (size_t)c.n_vocab * sizeof(float)) == 0,
                  "%s: streamed logits differ from resident ones", m->name);
        free(resident);
        free(streamed);
        remove(path);
    }
    oracle_case_free(&c);
    return test_finish();
}
