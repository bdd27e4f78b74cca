/* bmoe-mkmodel: writes random-weight GGUF models (qwen3moe, gpt-oss, llama,
 * lfm2moe, gemma4, qwen35moe, qwen2moe, olmoe, bailingmoe2, glm4moe, deepseek2, deepseek4)
 * of a chosen shape, seed and weight type, with a small real byte-level BPE
 * tokenizer and the family's chat template; or, with --plan, prints the
 * tensor table and sizes without writing. This file parses the flags; every
 * failure is one line on stderr and a non-zero exit (2 for usage errors). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/text.h"
#include "mkmodel.h"
#include "quant/quant.h"

static void print_usage(FILE *out)
{
    fprintf(out,
            "usage: bmoe-mkmodel [--shape NAME] [options] -o FILE\n"
            "       bmoe-mkmodel [--shape NAME] [options] --plan\n"
            "Writes a random-weight GGUF model with a small byte-level BPE tokenizer.\n"
            "\n"
            "  -o, --output FILE      output file; with --split N the shards are\n"
            "                         FILE-0000i-of-0000N.gguf (a trailing .gguf is dropped)\n"
            "  --plan                 print the tensor table and sizes, write nothing\n"
            "  --quantize FILE        instead of random weights, rewrite the GGUF FILE (F32 or\n"
            "                         any decodable type, e.g. a trained model) in --type with\n"
            "                         the same per-tensor recipe; metadata copied\n"
            "  --shape NAME           start from a preset (flags after it override):\n");
    mkmodel_list_presets(out);
    fprintf(out,
            "  --arch A               qwen3moe | gpt-oss | llama | lfm2moe | gemma4 | qwen35moe |\n"
            "                         qwen2moe | olmoe | bailingmoe2 | glm4moe | deepseek2 |\n"
            "                         deepseek4 (its shapes: the presets only)\n"
            "                         (default: the preset's;\n"
            "                         without --shape, tiny-<arch>)\n"
            "  --layers N  --embd N  --heads N  --kv-heads N  --head-dim N\n"
            "  --experts N  --experts-used N  --expert-ff N   (MoE archs; gemma4 --experts 0:\n"
            "                         the small models' dense MLP only; llama --experts N:\n"
            "                         Mixtral-style experts instead of the dense FFN)\n"
            "  --ff N                 dense FFN width (llama) / feed_forward_length key\n"
            "  --vocab N  --context N  --merges N (most BPE merges learned)\n"
            "  --sliding-window N  --swa-pattern P  --yarn-factor F  --yarn-orig-ctx N  (gpt-oss;\n"
            "                         the YaRN ones also deepseek2)\n"
            "  --attention-interval N layer i attends iff (i + 1) %% N == 0 (lfm2moe, qwen35moe)\n"
            "  --dense-layers N  --conv-taps N  (lfm2moe; conv-taps also qwen35moe; dense-layers\n"
            "                         also deepseek2)\n"
            "  --q-lora N  --kv-lora N  --v-head-dim N  --shared-experts N  (deepseek2: --head-dim\n"
            "                         is qk_nope + --rope-dims; --q-lora 0: attn_q directly)\n"
            "  --head-dim-swa N  --kv-heads-full N  --swa-period P  --sliding-window N  (gemma4:\n"
            "                         P-1 sliding-window layers, then a full one of --head-dim)\n"
            "  --shared-kv N  --per-layer-input D  (gemma4: the last N layers without K/V of\n"
            "                         their own, attending over the last earlier layer's cache of\n"
            "                         their kind; per-layer embeddings of D per layer)\n"
            "  --rope-dims N  --ssm-state N  --ssm-k-heads N  --ssm-v-heads N  --shared-ff N\n"
            "                         (qwen35moe; --shared-ff also qwen2moe, --rope-dims deepseek2)\n"
            "  --groups N  --groups-used N  --nextn-layers N  --weights-scale F  --qk-norm 0|1\n"
            "                         (bailingmoe2, glm4moe: N expert groups of which the best\n"
            "                         N are eligible; N trailing MTP blocks (--mtp); the routed\n"
            "                         weights' scale; glm4moe's head norms; --dense-layers,\n"
            "                         --rope-dims and, bailingmoe2, --shared-ff apply too;\n"
            "                         --nextn-layers also qwen35moe and deepseek2)\n"
            "  --rope-base F  --eps F  --name TEXT\n"
            "  --type T               f32 f16 bf16 q8_0 q4_k q5_k q6_k mxfp4, or a recipe:\n"
            "                         q4_k_m   Q4_K; Q6_K for output, and for attn_v and\n"
            "                                  ffn_down(_exps) of layers i < n/8, i >= 7n/8\n"
            "                                  or (i - n/8) %% 3 == 2 (gpt-oss experts: MXFP4)\n"
            "                         mxfp4_moe experts MXFP4, other matrices Q8_0\n"
            "                         iq2_xxs iq2_xs iq2_s iq3_xxs iq3_s iq1_s iq1_m tq1_0\n"
            "                         tq2_0    experts in that format (random valid blocks:\n"
            "                                  there is no quantizer), other matrices Q8_0\n"
            "                         Norms, biases, sinks and the router ffn_gate_inp are\n"
            "                         always F32. A matrix whose rows are not whole blocks\n"
            "                         of the type falls back to 32-element blocks (rows of\n"
            "                         32k: IQ4_NL for an i-quant, else Q8_0), else F32.\n"
            "  --expert-type T        type of the expert tensors (overrides the recipe)\n"
            "  --fill quantize|blocks quantize random floats (default for small shapes), or\n"
            "                         write random valid blocks directly (fast; default for\n"
            "                         the full-size presets)\n"
            "  --seed N               PRNG seed (default 1); same seed, same bytes\n"
            "  --split N              write N shards with split.* keys\n"
            "  --quiet                no progress lines\n"
            "  -h, --help             this text\n");
}

/* The argument echoed is escaped (text_escape_message): it came from the
 * command line and may hold any byte. */
static int usage_error(const char *fmt, const char *arg)
{
    char escaped[4096];
    fprintf(stderr, "bmoe-mkmodel: ");
    fprintf(stderr, fmt, text_escape_message(arg, escaped, sizeof escaped));
    fprintf(stderr, " (see --help)\n");
    return 2;
}

static bool parse_u64(const char *text, uint64_t max, uint64_t *out)
{
    if (!text || !*text || *text == '-' || *text == '+' || *text == ' ')
        return false;
    errno = 0;
    char *end = NULL;
    unsigned long long value = strtoull(text, &end, 10);
    if (errno != 0 || *end != '\0' || value > max)
        return false;
    *out = value;
    return true;
}

static bool parse_float(const char *text, float *out)
{
    if (!text || !*text)
        return false;
    errno = 0;
    char *end = NULL;
    float value = strtof(text, &end);
    if (errno != 0 || *end != '\0' || !isfinite(value))
        return false;
    *out = value;
    return true;
}

typedef struct u32_flag {
    const char *flag;
    size_t offset;
} u32_flag;

#define FIELD(name) offsetof(mkmodel_config, name)

static const u32_flag u32_flags[] = {
    {"--layers", FIELD(n_layer)},
    {"--embd", FIELD(n_embd)},
    {"--heads", FIELD(n_head)},
    {"--kv-heads", FIELD(n_head_kv)},
    {"--head-dim", FIELD(head_dim)},
    {"--experts", FIELD(n_expert)},
    {"--experts-used", FIELD(n_expert_used)},
    {"--expert-ff", FIELD(n_ff_expert)},
    {"--ff", FIELD(n_ff)},
    {"--vocab", FIELD(n_vocab)},
    {"--context", FIELD(n_ctx)},
    {"--sliding-window", FIELD(sliding_window)},
    {"--swa-pattern", FIELD(sliding_window_pattern)},
    {"--yarn-orig-ctx", FIELD(yarn_original_ctx)},
    {"--merges", FIELD(n_merges)},
    {"--split", FIELD(n_split)},
    {"--attention-interval", FIELD(attention_interval)},
    {"--dense-layers", FIELD(n_leading_dense)},
    {"--conv-taps", FIELD(conv_taps)},
    {"--head-dim-swa", FIELD(head_dim_swa)},
    {"--kv-heads-full", FIELD(n_head_kv_full)},
    {"--swa-period", FIELD(swa_period)},
    {"--shared-kv", FIELD(shared_kv_layers)},
    {"--per-layer-input", FIELD(per_layer_input)},
    {"--rope-dims", FIELD(n_rot)},
    {"--ssm-state", FIELD(ssm_dk)},
    {"--ssm-k-heads", FIELD(ssm_k_heads)},
    {"--ssm-v-heads", FIELD(ssm_v_heads)},
    {"--shared-ff", FIELD(n_ff_shared)},
    {"--groups", FIELD(n_expert_group)},
    {"--groups-used", FIELD(n_expert_group_used)},
    {"--nextn-layers", FIELD(n_nextn)},
    {"--qk-norm", FIELD(qk_norm)},
    {"--q-lora", FIELD(q_lora_rank)},
    {"--kv-lora", FIELD(kv_lora_rank)},
    {"--v-head-dim", FIELD(v_head_dim)},
    {"--shared-experts", FIELD(n_expert_shared)},
};

static const u32_flag *find_u32_flag(const char *flag)
{
    for (size_t i = 0; i < sizeof u32_flags / sizeof u32_flags[0]; i++)
        if (strcmp(u32_flags[i].flag, flag) == 0)
            return &u32_flags[i];
    return NULL;
}

/* Flags that take a value (all but --plan, --quiet and --help). */
static bool takes_value(const char *flag)
{
    static const char *const others[] = {"-o",     "--output", "--shape", "--arch",
                                         "--type", "--expert-type", "--fill", "--seed",
                                         "--rope-base", "--eps", "--yarn-factor", "--name",
                                         "--quantize", "--weights-scale"};
    if (find_u32_flag(flag))
        return true;
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++)
        if (strcmp(others[i], flag) == 0)
            return true;
    return false;
}

int main(int argc, char **argv)
{
    const char *output = NULL, *shape = NULL, *arch = NULL, *quantize = NULL;
    bool plan = false, quiet = false;
    bmoe_error err;
    error_clear(&err);

    /* Pass 1: find the preset and check every flag is known and has its value. */
    for (int i = 1; i < argc; i++) {
        const char *flag = argv[i];
        if (strcmp(flag, "-h") == 0 || strcmp(flag, "--help") == 0) {
            print_usage(stdout);
            return 0;
        }
        if (strcmp(flag, "--plan") == 0 || strcmp(flag, "--quiet") == 0)
            continue;
        if (!takes_value(flag))
            return usage_error("unknown option '%s'", flag);
        if (i + 1 >= argc)
            return usage_error("%s needs a value", flag);
        if (strcmp(flag, "--shape") == 0)
            shape = argv[i + 1];
        if (strcmp(flag, "--arch") == 0)
            arch = argv[i + 1];
        i++;
    }

    mkmodel_config config;
    memset(&config, 0, sizeof config);
    config.seed = 1;
    config.n_split = 1;
    config.n_merges = 100000;
    if (arch && mkmodel_arch_from_name(arch) < 0)
        return usage_error("unknown --arch '%s' (qwen3moe, gpt-oss, llama, lfm2moe, gemma4, qwen35moe, qwen2moe, olmoe, "
                           "bailingmoe2, glm4moe, deepseek2, deepseek4)", arch);
    char default_shape[32];
    if (!shape) {
        snprintf(default_shape, sizeof default_shape, "tiny-%s", arch ? arch : "qwen3moe");
        shape = default_shape;
    }
    if (mkmodel_preset(shape, &config, &err) != 0) {
        fprintf(stderr, "bmoe-mkmodel: %s\n", err.message);
        return 2;
    }
    if (arch && mkmodel_arch_from_name(arch) != (int)config.arch) {
        fprintf(stderr, "bmoe-mkmodel: --arch %s contradicts --shape %s (see --help)\n", arch, shape);
        return 2;
    }

    /* Pass 2: the values, in order (later flags win). */
    for (int i = 1; i < argc; i++) {
        const char *flag = argv[i];
        if (strcmp(flag, "--plan") == 0) {
            plan = true;
            continue;
        }
        if (strcmp(flag, "--quiet") == 0) {
            quiet = true;
            continue;
        }
        const char *value = argv[++i];
        const u32_flag *u32 = find_u32_flag(flag);
        if (u32) {
            uint64_t number;
            if (!parse_u64(value, UINT32_MAX, &number)) {
                char escaped[4096];
                fprintf(stderr, "bmoe-mkmodel: %s needs a non-negative integer, got '%s'\n", flag,
                        text_escape_message(value, escaped, sizeof escaped));
                return 2;
            }
            *(uint32_t *)((char *)&config + u32->offset) = (uint32_t)number;
        } else if (strcmp(flag, "-o") == 0 || strcmp(flag, "--output") == 0) {
            output = value;
        } else if (strcmp(flag, "--quantize") == 0) {
            quantize = value;
        } else if (strcmp(flag, "--seed") == 0) {
            if (!parse_u64(value, UINT64_MAX, &config.seed))
                return usage_error("--seed needs a non-negative integer, got '%s'", value);
        } else if (strcmp(flag, "--type") == 0) {
            if (mkmodel_parse_type(value, &config.recipe, &config.type, &err) != 0) {
                fprintf(stderr, "bmoe-mkmodel: %s\n", err.message);
                return 2;
            }
        } else if (strcmp(flag, "--expert-type") == 0) {
            enum mkmodel_recipe recipe;
            uint32_t type;
            if (mkmodel_parse_type(value, &recipe, &type, &err) != 0 ||
                (recipe != MKMODEL_RECIPE_PLAIN && recipe != MKMODEL_RECIPE_EXPERTS))
                return usage_error("unsupported --expert-type '%s' (a plain type such as mxfp4, an "
                                   "i-quant or tq1_0/tq2_0)", value);
            config.expert_type = (int32_t)type;
        } else if (strcmp(flag, "--fill") == 0) {
            if (strcmp(value, "quantize") == 0)
                config.fill = MKMODEL_FILL_QUANTIZE;
            else if (strcmp(value, "blocks") == 0)
                config.fill = MKMODEL_FILL_BLOCKS;
            else
                return usage_error("unknown --fill '%s' (quantize, blocks)", value);
        } else if (strcmp(flag, "--rope-base") == 0) {
            if (!parse_float(value, &config.rope_freq_base))
                return usage_error("--rope-base needs a number, got '%s'", value);
        } else if (strcmp(flag, "--eps") == 0) {
            if (!parse_float(value, &config.rms_eps))
                return usage_error("--eps needs a number, got '%s'", value);
        } else if (strcmp(flag, "--yarn-factor") == 0) {
            if (!parse_float(value, &config.yarn_factor))
                return usage_error("--yarn-factor needs a number, got '%s'", value);
        } else if (strcmp(flag, "--weights-scale") == 0) {
            if (!parse_float(value, &config.expert_weights_scale))
                return usage_error("--weights-scale needs a number, got '%s'", value);
        } else if (strcmp(flag, "--name") == 0) {
            if (strlen(value) >= sizeof config.name)
                return usage_error("--name '%s' is too long (63 bytes at most)", value);
            snprintf(config.name, sizeof config.name, "%s", value);
        }
        /* --shape and --arch were taken in pass 1. */
    }
    if (!output && !plan)
        return usage_error("%s", "no output file: give -o FILE or --plan");
    if (quantize) {
        if (plan)
            return usage_error("%s", "--quantize writes a file: --plan does not apply");
        if (mkmodel_quantize(quantize, output, &config, quiet, &err) != 0) {
            fprintf(stderr, "bmoe-mkmodel: %s\n", err.message);
            return 1;
        }
        return 0;
    }
    if (mkmodel_validate(&config, &err) != 0) {
        fprintf(stderr, "bmoe-mkmodel: %s\n", err.message);
        return 2;
    }

    mkmodel_model model;
    if (mkmodel_build(&model, &config, &err) != 0) {
        fprintf(stderr, "bmoe-mkmodel: %s\n", err.message);
        return 1;
    }
    uint64_t *sizes = calloc(config.n_split, sizeof *sizes);
    int status = 0;
    if (!sizes) {
        fprintf(stderr, "bmoe-mkmodel: out of memory\n");
        status = 1;
    } else if (mkmodel_assign_shards(&model, sizes, &err) != 0) {
        fprintf(stderr, "bmoe-mkmodel: %s\n", err.message);
        status = 2;
    } else if (plan) {
        mkmodel_print_plan(&model, sizes, stdout);
    }
    if (status == 0 && !plan && mkmodel_write(&model, output, quiet, &err) != 0) {
        fprintf(stderr, "bmoe-mkmodel: %s\n", err.message);
        status = 1;
    }
    free(sizes);
    mkmodel_free(&model);
    return status;
}
