/* bmoe-mkmodel command line: every usage error is one line on stderr, a
 * non-zero exit and no file; --help works; and --plan of the full-size
 * presets gives the public models' tensor counts, shapes, types and sizes
 * (the sizes recomputed here from the block sizes of quant-formats.md),
 * without writing anything. */
#include "mkmodel_run.h"

static void expect_failure(const char *output, const char *args)
{
    int status = mk_run("%s -o '%s'", args, output);
    char *errors = test_read_file(mk_stderr, NULL);
    CHECK_MSG(status > 0, "'%s' exited %d", args, status);
    CHECK_MSG(errors && mk_count_lines(errors) == 1 && strncmp(errors, "bmoe-mkmodel: ", 14) == 0,
              "'%s' printed: %s", args, errors ? errors : "(nothing)");
    CHECK_MSG(mk_file_size(output) == 0, "'%s' left a file behind", args);
    remove(output);
    free(errors);
}

/* Bytes of a row of n elements for the types the presets use. */
static uint64_t row_bytes(const char *type, uint64_t n)
{
    if (strcmp(type, "F32") == 0)
        return 4 * n;
    if (strcmp(type, "Q8_0") == 0)
        return n / 32 * 34;
    if (strcmp(type, "MXFP4") == 0)
        return n / 32 * 17;
    if (strcmp(type, "Q4_K") == 0)
        return n / 256 * 144;
    if (strcmp(type, "Q6_K") == 0)
        return n / 256 * 210;
    return 0;
}

static unsigned long long plan_value(const char *plan, const char *key)
{
    const char *at = strstr(plan, key);
    return at ? strtoull(at + strlen(key), NULL, 10) : 0;
}

static bool plan_has(const char *plan, const char *line)
{
    return strstr(plan, line) != NULL;
}

static int count_tensor_lines(const char *plan)
{
    int count = 0;
    for (const char *p = plan; (p = strstr(p, "\ntensor ")) != NULL; p++)
        count++;
    return count;
}

static void check_qwen3_30b(void)
{
    CHECK(mk_run("--shape qwen3-30b-a3b --plan") == 0);
    char *plan = test_read_file(mk_stdout, NULL);
    CHECK(plan != NULL);
    if (!plan)
        return;
    CHECK(count_tensor_lines(plan) == 579);
    CHECK(plan_value(plan, "tensors=") == 579 && plan_value(plan, "layers=") == 48);
    CHECK(plan_value(plan, "experts=") == 128 && plan_value(plan, "used=") == 8);
    /* Q4_K_M of Qwen3-30B-A3B: n_embd 2048, 32/4 heads of 128, 128 experts of
     * 768, vocab 151936. Q6_K for attn_v and ffn_down_exps on layers
     * i < 6, i >= 42, (i - 6) % 3 == 2, and the output head. */
    uint64_t expected = row_bytes("Q4_K", 2048) * 151936 + row_bytes("F32", 2048) +
                        row_bytes("Q6_K", 2048) * 151936;
    for (int i = 0; i < 48; i++) {
        bool more = i < 6 || i >= 42 || (i >= 6 && (i - 6) % 3 == 2);
        expected += 2 * row_bytes("F32", 2048) + 2 * row_bytes("F32", 128);
        expected += row_bytes("Q4_K", 2048) * (4096 + 512) + row_bytes("Q4_K", 4096) * 2048;
        expected += row_bytes(more ? "Q6_K" : "Q4_K", 2048) * 512;
        expected += row_bytes("F32", 2048) * 128;
        expected += 2 * row_bytes("Q4_K", 2048) * 768 * 128;
        expected += row_bytes(more ? "Q6_K" : "Q4_K", 768) * 2048 * 128;
    }
    CHECK_MSG(plan_value(plan, "data_bytes=") == expected, "data bytes %llu, expected %llu",
              plan_value(plan, "data_bytes="), (unsigned long long)expected);
    double gib = (double)plan_value(plan, "file_bytes=") / (1024.0 * 1024 * 1024);
    CHECK_MSG(gib > 17.2 && gib < 17.4, "qwen3-30b-a3b is %.2f GiB", gib);
    CHECK(plan_has(plan, "\ntensor token_embd.weight Q4_K 2048 151936 1 "));
    CHECK(plan_has(plan, "\ntensor output.weight Q6_K 2048 151936 1 "));
    CHECK(plan_has(plan, "\ntensor blk.0.ffn_gate_exps.weight Q4_K 2048 768 128 113246208 "));
    CHECK(plan_has(plan, "\ntensor blk.7.ffn_down_exps.weight Q4_K 768 2048 128 "));
    CHECK(plan_has(plan, "\ntensor blk.8.ffn_down_exps.weight Q6_K 768 2048 128 "));
    CHECK(plan_has(plan, "\ntensor blk.47.attn_v.weight Q6_K 2048 512 1 "));
    CHECK(plan_has(plan, "\ntensor blk.0.ffn_gate_inp.weight F32 2048 128 1 "));
    CHECK(plan_has(plan, "\ntensor blk.12.attn_q_norm.weight F32 128 1 1 "));
    free(plan);
}

/* The grouped-routing presets against their public parameter counts:
 * Ling-mini-2.0 16.26B (20 layers, the first dense); GLM-4.5-Air 106.85B in
 * the 46 layers run and 109.23B with its MTP block (the checkpoint's 110B).
 * The counts are exact sums of the public shapes. */
static void check_grouped_preset(const char *shape, int tensors, int layers, int experts,
                                 unsigned long long params, const char *const *lines, double low_gb, double high_gb)
{
    CHECK(mk_run("--shape %s --plan", shape) == 0);
    char *plan = test_read_file(mk_stdout, NULL);
    CHECK(plan != NULL);
    if (!plan)
        return;
    CHECK_MSG(count_tensor_lines(plan) == tensors, "%s: %d tensors", shape, count_tensor_lines(plan));
    CHECK(plan_value(plan, "layers=") == (unsigned long long)layers);
    CHECK(plan_value(plan, "experts=") == (unsigned long long)experts && plan_value(plan, "used=") == 8);
    CHECK_MSG(plan_value(plan, "params=") == params, "%s: %llu parameters, expected %llu", shape,
              plan_value(plan, "params="), params);
    for (int i = 0; lines[i]; i++)
        CHECK_MSG(plan_has(plan, lines[i]), "%s: no line %s", shape, lines[i] + 1);
    double gb = (double)plan_value(plan, "file_bytes=") / 1e9;
    CHECK_MSG(gb > low_gb && gb < high_gb, "%s is %.2f GB", shape, gb);
    free(plan);
}

static void check_gpt_oss(const char *shape, int layers, int experts, int tensors, double low_gb,
                          double high_gb)
{
    CHECK(mk_run("--shape %s --plan", shape) == 0);
    char *plan = test_read_file(mk_stdout, NULL);
    CHECK(plan != NULL);
    if (!plan)
        return;
    CHECK_MSG(count_tensor_lines(plan) == tensors, "%s: %d tensors", shape, count_tensor_lines(plan));
    CHECK(plan_value(plan, "layers=") == (unsigned long long)layers);
    CHECK(plan_value(plan, "experts=") == (unsigned long long)experts && plan_value(plan, "used=") == 4);
    /* Experts MXFP4 {2880, 2880, E}; the other matrices Q8_0; router F32. */
    char line[160];
    uint64_t expert_bytes = row_bytes("MXFP4", 2880) * 2880 * (uint64_t)experts;
    snprintf(line, sizeof line, "\ntensor blk.0.ffn_up_exps.weight MXFP4 2880 2880 %d %llu ", experts,
             (unsigned long long)expert_bytes);
    CHECK_MSG(plan_has(plan, line), "%s: no line %s", shape, line + 1);
    CHECK(plan_value(plan, "expert_bytes=") == 3ull * layers * expert_bytes);
    CHECK(plan_has(plan, "\ntensor blk.0.attn_q.weight Q8_0 2880 4096 1 "));
    CHECK(plan_has(plan, "\ntensor blk.0.attn_sinks.weight F32 64 1 1 "));
    CHECK(plan_has(plan, "\ntensor token_embd.weight Q8_0 2880 201088 1 "));
    CHECK(plan_has(plan, "\ntensor output.weight Q8_0 2880 201088 1 "));
    snprintf(line, sizeof line, "\ntensor blk.%d.ffn_down_exps.bias F32 2880 %d 1 ", layers - 1, experts);
    CHECK(plan_has(plan, line));
    double gb = (double)plan_value(plan, "file_bytes=") / 1e9;
    CHECK_MSG(gb > low_gb && gb < high_gb, "%s is %.2f GB", shape, gb);
    free(plan);
}

/* DeepSeek-V2-Lite: 15.7 B parameters (27 layers, the first dense; MLA
 * without low-rank queries; 64 experts of 1408 + 2 shared). */
static void check_deepseek_v2_lite(void)
{
    CHECK(mk_run("--shape deepseek-v2-lite --plan") == 0);
    char *plan = test_read_file(mk_stdout, NULL);
    CHECK(plan != NULL);
    if (!plan)
        return;
    /* globals 3; per layer 8 attention and norm tensors, then 3 dense or 7 MoE */
    CHECK_MSG(count_tensor_lines(plan) == 3 + 27 * 8 + 3 + 26 * 7, "%d tensors", count_tensor_lines(plan));
    unsigned long long attention = 2048 + 2048ull * 16 * 192 + 2048ull * 576 + 512 + 2ull * 128 * 512 * 16 +
                                   2048ull * 2048 + 2048;
    unsigned long long moe = 2048ull * 64 + 3ull * 2048 * 1408 * 64 + 3ull * 2048 * 2816;
    unsigned long long params = 2ull * 2048 * 102400 + 2048 + 27 * attention + 3ull * 2048 * 10944 + 26 * moe;
    CHECK_MSG(plan_value(plan, "params=") == params, "params %llu, expected %llu", plan_value(plan, "params="),
              params);
    CHECK(params > 15600000000ull && params < 15800000000ull);
    CHECK(plan_has(plan, "\ntensor blk.1.attn_k_b.weight Q8_0 128 512 16 "));
    CHECK(plan_has(plan, "\ntensor blk.1.attn_v_b.weight Q4_K 512 128 16 "));
    CHECK(plan_has(plan, "\ntensor blk.3.ffn_gate_exps.weight Q4_K 2048 1408 64 "));
    CHECK(plan_has(plan, "\ntensor blk.3.ffn_down_exps.weight Q8_0 1408 2048 64 "));
    CHECK(plan_has(plan, "\ntensor blk.0.ffn_up.weight Q4_K 2048 10944 1 "));
    CHECK(!plan_has(plan, "attn_q_a"));
    free(plan);
}

/* tiny-deepseek3-mtp: tiny-deepseek3 (every tensor the same line: name,
 * type, shape, bytes) and its MTP block 4 as DeepSeek-V3's layer 61 with
 * its nextn tensors: an MoE layer's 18 and eh_proj, enorm, hnorm,
 * shared_head_norm, embed_tokens and shared_head_head. */
static void check_deepseek3_mtp(void)
{
    CHECK(mk_run("--shape tiny-deepseek3 --plan") == 0);
    char *base = test_read_file(mk_stdout, NULL);
    CHECK(mk_run("--shape tiny-deepseek3-mtp --plan") == 0);
    char *plan = test_read_file(mk_stdout, NULL);
    CHECK(base != NULL && plan != NULL);
    if (!base || !plan) {
        free(base);
        free(plan);
        return;
    }
    CHECK_MSG(count_tensor_lines(plan) == count_tensor_lines(base) + 24, "%d tensors, tiny-deepseek3 %d",
              count_tensor_lines(plan), count_tensor_lines(base));
    CHECK(plan_value(plan, "layers=") == 4 && plan_value(base, "layers=") == 4);
    for (const char *line = strstr(base, "\ntensor "); line; line = strstr(line + 1, "\ntensor ")) {
        const char *end = strchr(line + 1, '\n');
        char one[256];
        int length = end ? (int)(end - line) + 1 : (int)strlen(line);
        snprintf(one, sizeof one, "%.*s", length, line);
        CHECK_MSG(plan_has(plan, one), "tiny-deepseek3-mtp lacks%s", one);
    }
    CHECK(!plan_has(base, "nextn"));
    const char *block[] = {"\ntensor blk.4.nextn.eh_proj.weight F32 512 256 1 ",
                           "\ntensor blk.4.nextn.enorm.weight F32 256 1 1 ",
                           "\ntensor blk.4.nextn.hnorm.weight F32 256 1 1 ",
                           "\ntensor blk.4.nextn.shared_head_norm.weight F32 256 1 1 ",
                           "\ntensor blk.4.nextn.embed_tokens.weight F32 256 512 1 ",
                           "\ntensor blk.4.nextn.shared_head_head.weight F32 256 512 1 ",
                           "\ntensor blk.4.attn_k_b.weight F32 64 256 4 ",
                           "\ntensor blk.4.exp_probs_b.bias F32 16 1 1 ",
                           "\ntensor blk.4.ffn_down_shexp.weight F32 256 256 1 ",
                           NULL};
    for (int i = 0; block[i]; i++)
        CHECK_MSG(plan_has(plan, block[i]), "tiny-deepseek3-mtp: no line%s", block[i]);
    free(base);
    free(plan);
}

int main(void)
{
    mk_setup("mkmodel_cli");
    char output[1200];
    mk_path(output, sizeof output, "never.gguf");
    remove(output);

    CHECK(mk_run("--help") == 0);
    char *help = test_read_file(mk_stdout, NULL);
    CHECK(help && strstr(help, "usage: bmoe-mkmodel") && strstr(help, "qwen3-30b-a3b") &&
          strstr(help, "falls back"));
    free(help);

    /* No output at all. */
    CHECK(mk_run("--shape tiny-llama") == 2);
    char *errors = test_read_file(mk_stderr, NULL);
    CHECK(errors && mk_count_lines(errors) == 1);
    free(errors);

    const char *bad[] = {
        "--bogus",
        "--layers",
        "--layers abc",
        "--layers -1",
        "--layers 99999999999",
        "--layers 0",
        "--layers 513",
        "--heads 3 --kv-heads 2",
        "--head-dim 63",
        "--type q3_k",
        "--type nonsense",
        "--expert-type q4_k_m",
        "--shape nope",
        "--arch llama --shape tiny-qwen3moe",
        "--arch mamba",
        "--experts 16 --experts-used 20",
        "--experts 0",
        "--vocab 100",
        "--split 1000",
        "--split 0",
        "--fill sometimes",
        "--seed -5",
        "--seed 12x",
        "--eps 0",
        "--rope-base nan",
        "--shape tiny-gpt-oss --sliding-window 0",
        "--shape tiny-deepseek2 --rope-dims 33",
        "--shape tiny-deepseek2 --kv-lora 0",
        "--name 0123456789012345678901234567890123456789012345678901234567890123456789",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_failure(output, bad[i]);

    /* An unwritable path: one line, exit 1. */
    CHECK(mk_run("--shape tiny-llama -o /nonexistent-dir/x.gguf") == 1);
    errors = test_read_file(mk_stderr, NULL);
    CHECK_MSG(errors && mk_count_lines(errors) == 1, "unwritable path printed: %s", errors);
    free(errors);

    check_qwen3_30b();
    check_gpt_oss("gpt-oss-20b", 24, 32, 459, 11.9, 12.3);
    check_gpt_oss("gpt-oss-120b", 36, 128, 687, 62.0, 64.5);
    const char *ling[] = {"\ntensor blk.0.attn_qkv.weight Q4_K 2048 3072 1 ",
                          "\ntensor blk.0.ffn_down.weight Q6_K 5120 2048 1 ",
                          "\ntensor blk.1.exp_probs_b.bias F32 256 1 1 ",
                          "\ntensor blk.19.ffn_gate_shexp.weight Q4_K 2048 512 1 ",
                          "\ntensor blk.19.ffn_gate_exps.weight Q4_K 2048 512 256 ", NULL};
    check_grouped_preset("ling-mini-2.0", 278, 20, 256, 16255643392ull, ling, 9.0, 11.0);
    const char *air[] = {"\ntensor blk.0.attn_q.bias F32 12288 1 1 ",
                         "\ntensor blk.45.post_attention_norm.weight F32 4096 1 1 ",
                         "\ntensor blk.46.nextn.eh_proj.weight Q4_K 8192 4096 1 ",
                         "\ntensor blk.46.nextn.embed_tokens.weight Q4_K 4096 151552 1 ",
                         "\ntensor blk.46.nextn.shared_head_head.weight Q6_K 4096 151552 1 ",
                         "\ntensor blk.46.ffn_up_exps.weight Q4_K 4096 1408 128 ", NULL};
    /* 803 tensors and 110B parameters, as the released file and checkpoint */
    check_grouped_preset("glm-4.5-air", 803, 46, 128, 110468824832ull, air, 76.0, 82.0);
    check_deepseek_v2_lite();
    check_deepseek3_mtp();

    /* --plan with a split: shard lines that add up to the file total. */
    CHECK(mk_run("--shape qwen3-30b-a3b --split 4 --plan") == 0);
    char *plan = test_read_file(mk_stdout, NULL);
    unsigned long long sum = 0;
    for (int s = 0; plan && s < 4; s++) {
        char key[32];
        snprintf(key, sizeof key, "shard %d bytes=", s);
        unsigned long long bytes = plan_value(plan, key);
        CHECK(bytes > 2000000000ull && bytes < 7000000000ull);
        sum += bytes;
    }
    CHECK(plan && sum == plan_value(plan, "file_bytes="));
    free(plan);
    return test_finish();
}
