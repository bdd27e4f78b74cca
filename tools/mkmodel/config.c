/* bmoe-mkmodel model description: presets, type recipes, the tensor table of
 * each architecture (names and shapes of architectures.md), the metadata
 * records, shard assignment and the --plan printout. Owns the tensor and
 * metadata arrays of a mkmodel_model. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "mkmodel.h"
#include "quant/quant.h"

#define MKMODEL_ALIGNMENT GGUF_DEFAULT_ALIGNMENT

typedef struct preset {
    const char *name;
    const char *description;
    mkmodel_config config;
} preset;

/* Shapes: the tiny ones are like the oracle's quantized models (rows of 256
 * so every K-quant fits); the full-size ones are the public models'. */
static const preset presets[] = {
    {"tiny-qwen3moe", "qwen3moe, 3 layers, n_embd 256, 4/2 heads of 64, 16 experts top-4, ff 256, vocab 512",
     {.arch = MKMODEL_QWEN3MOE, .n_layer = 3, .n_embd = 256, .n_head = 4, .n_head_kv = 2,
      .head_dim = 64, .n_expert = 16, .n_expert_used = 4, .n_ff_expert = 256, .n_ff = 1024,
      .n_vocab = 512, .n_ctx = 4096, .rope_freq_base = 1e6f, .rms_eps = 1e-6f,
      .recipe = MKMODEL_RECIPE_PLAIN, .type = TYPE_F32}},
    {"tiny-gpt-oss", "gpt-oss, 3 layers (SWA 8 on even layers), n_embd 256, 4/2 heads of 64, 16 experts top-4, ff 256, vocab 512",
     {.arch = MKMODEL_GPT_OSS, .n_layer = 3, .n_embd = 256, .n_head = 4, .n_head_kv = 2,
      .head_dim = 64, .n_expert = 16, .n_expert_used = 4, .n_ff_expert = 256, .n_ff = 256,
      .n_vocab = 512, .n_ctx = 131072, .sliding_window = 8, .rope_freq_base = 150000.0f,
      .rms_eps = 1e-5f, .yarn_factor = 32.0f, .yarn_original_ctx = 4096,
      .recipe = MKMODEL_RECIPE_PLAIN, .type = TYPE_F32}},
    {"tiny-llama", "llama (dense), 4 layers, n_embd 256, 4/2 heads of 64, ff 512, vocab 512",
     {.arch = MKMODEL_LLAMA, .n_layer = 4, .n_embd = 256, .n_head = 4, .n_head_kv = 2,
      .head_dim = 64, .n_ff = 512, .n_vocab = 512, .n_ctx = 4096, .rope_freq_base = 500000.0f,
      .rms_eps = 1e-5f, .recipe = MKMODEL_RECIPE_PLAIN, .type = TYPE_F32}},
    {"tiny-mixtral", "llama with experts (Mixtral-style), 3 layers, n_embd 256, 4/2 heads of 64, 8 experts top-2, "
     "ff 256, vocab 512",
     {.arch = MKMODEL_LLAMA, .n_layer = 3, .n_embd = 256, .n_head = 4, .n_head_kv = 2, .head_dim = 64,
      .n_expert = 8, .n_expert_used = 2, .n_ff_expert = 256, .n_ff = 512, .n_vocab = 512, .n_ctx = 4096,
      .rope_freq_base = 1e6f, .rms_eps = 1e-5f, .recipe = MKMODEL_RECIPE_PLAIN, .type = TYPE_F32}},
    {"tiny-qwen2moe", "qwen2moe, 3 layers, n_embd 256, 4/2 heads of 64 with q/k/v biases, 16 experts top-4, ff 256, "
     "gated shared expert ff 512, vocab 512",
     {.arch = MKMODEL_QWEN2MOE, .n_layer = 3, .n_embd = 256, .n_head = 4, .n_head_kv = 2, .head_dim = 64,
      .n_expert = 16, .n_expert_used = 4, .n_ff_expert = 256, .n_ff = 1024, .n_ff_shared = 512,
      .n_vocab = 512, .n_ctx = 4096, .rope_freq_base = 1e6f, .rms_eps = 1e-6f,
      .recipe = MKMODEL_RECIPE_PLAIN, .type = TYPE_F32}},
    {"tiny-olmoe", "olmoe, 3 layers, n_embd 256, 4/4 heads of 64, q/k norms over the whole projection, "
     "16 experts top-8, ff 256, vocab 512",
     {.arch = MKMODEL_OLMOE, .n_layer = 3, .n_embd = 256, .n_head = 4, .n_head_kv = 4, .head_dim = 64,
      .n_expert = 16, .n_expert_used = 8, .n_ff_expert = 256, .n_vocab = 512, .n_ctx = 4096,
      .rope_freq_base = 10000.0f, .rms_eps = 1e-5f, .recipe = MKMODEL_RECIPE_PLAIN, .type = TYPE_F32}},
    {"tiny-lfm2moe", "lfm2moe, 4 layers (1 and 3 attention, 0 and 2 short convolution L 3; 0 dense), n_embd 256, "
     "4/2 heads of 64, 16 experts top-4 (sigmoid), ff 256, dense ff 512, vocab 512",
     {.arch = MKMODEL_LFM2MOE, .n_layer = 4, .n_embd = 256, .n_head = 4, .n_head_kv = 2, .head_dim = 64,
      .n_expert = 16, .n_expert_used = 4, .n_ff_expert = 256, .n_ff = 512, .n_vocab = 512, .n_ctx = 4096,
      .rope_freq_base = 1e6f, .rms_eps = 1e-5f, .attention_interval = 2, .n_leading_dense = 1,
      .conv_taps = 3, .recipe = MKMODEL_RECIPE_PLAIN, .type = TYPE_F32}},
    {"tiny-gemma4", "gemma4, 4 layers (0-2 SWA 8 with 2 KV heads of 64, 3 full with 1 KV head of 128, V = K), "
     "n_embd 256, 4 heads, dense ff 256 beside 16 experts top-4 (fused gate_up), ff 256, vocab 512",
     {.arch = MKMODEL_GEMMA4, .n_layer = 4, .n_embd = 256, .n_head = 4, .n_head_kv = 2, .head_dim = 128,
      .head_dim_swa = 64, .n_head_kv_full = 1, .swa_period = 4, .sliding_window = 8, .n_expert = 16,
      .n_expert_used = 4, .n_ff_expert = 256, .n_ff = 256, .n_vocab = 512, .n_ctx = 8192,
      .rope_freq_base = 1e6f, .rms_eps = 1e-6f, .recipe = MKMODEL_RECIPE_PLAIN, .type = TYPE_F32}},
    {"tiny-qwen35moe", "qwen35moe, 4 layers (0-2 Gated DeltaNet, conv 4, 2 K heads / 4 V heads of 64; 3 gated "
     "attention 4/2 heads of 64, IMROPE 16 dims), n_embd 256, 16 experts top-4 + shared expert, ff 256, vocab 512",
     {.arch = MKMODEL_QWEN35MOE, .n_layer = 4, .n_embd = 256, .n_head = 4, .n_head_kv = 2, .head_dim = 64,
      .n_rot = 16, .attention_interval = 4, .conv_taps = 4, .ssm_dk = 64, .ssm_k_heads = 2, .ssm_v_heads = 4,
      .n_expert = 16, .n_expert_used = 4, .n_ff_expert = 256, .n_ff_shared = 256, .n_vocab = 512,
      .n_ctx = 8192, .rope_freq_base = 1e7f, .rms_eps = 1e-6f, .recipe = MKMODEL_RECIPE_PLAIN,
      .type = TYPE_F32}},
    {"tiny-bailingmoe2", "bailingmoe2, 3 layers (0 dense) + 1 MTP block, n_embd 256, fused qkv 4/2 heads of 64 with "
     "head norms, RoPE 32 dims, 16 experts in 4 groups (2 used) top-4 (sigmoid, bias, x2.5), ff 256, shared expert "
     "256, dense ff 512, vocab 512",
     {.arch = MKMODEL_BAILINGMOE2, .n_layer = 3, .n_nextn = 1, .n_embd = 256, .n_head = 4, .n_head_kv = 2,
      .head_dim = 64, .n_rot = 32, .n_expert = 16, .n_expert_used = 4, .n_expert_group = 4,
      .n_expert_group_used = 2, .n_ff_expert = 256, .n_ff_shared = 256, .n_ff = 512, .n_leading_dense = 1,
      .expert_weights_scale = 2.5f, .n_vocab = 512, .n_ctx = 4096, .rope_freq_base = 600000.0f, .rms_eps = 1e-6f,
      .recipe = MKMODEL_RECIPE_PLAIN, .type = TYPE_F32}},
    {"tiny-glm4moe", "glm4moe, 3 layers (0 dense) + 1 MTP block, n_embd 256, 4/2 heads of 64 with q/k/v biases "
     "and head norms, RoPE 32 dims, 16 experts in 4 groups (2 used) top-4 (sigmoid, bias, x1.5), ff 256, "
     "shared expert, dense ff 512, vocab 512",
     {.arch = MKMODEL_GLM4MOE, .n_layer = 3, .n_nextn = 1, .n_embd = 256, .n_head = 4, .n_head_kv = 2,
      .head_dim = 64, .n_rot = 32, .qk_norm = 1, .n_expert = 16, .n_expert_used = 4, .n_expert_group = 4,
      .n_expert_group_used = 2, .n_ff_expert = 256, .n_ff = 512, .n_leading_dense = 1,
      .expert_weights_scale = 1.5f, .n_vocab = 512, .n_ctx = 4096, .rope_freq_base = 1e6f, .rms_eps = 1e-5f,
      .recipe = MKMODEL_RECIPE_PLAIN, .type = TYPE_F32}},
    {"tiny-deepseek2", "deepseek2, 4 layers (0 dense ff 512), n_embd 256, 4 heads, MLA: q_lora 256, kv_lora 256, "
     "qk 64+32 rope, v 64 (attn_k_b/attn_v_b), YaRN 40, 16 experts top-4 sigmoid + bias, normalized, x2.5, "
     "2 shared, ff 256, vocab 512",
     {.arch = MKMODEL_DEEPSEEK2, .n_layer = 4, .n_embd = 256, .n_head = 4, .n_head_kv = 1, .head_dim = 96,
      .n_rot = 32, .q_lora_rank = 256, .kv_lora_rank = 256, .v_head_dim = 64, .n_expert = 16, .n_expert_used = 4,
      .n_ff_expert = 256, .n_expert_shared = 2, .n_ff = 512, .n_leading_dense = 1, .sigmoid_routing = true,
      .expert_weights_norm = true, .expert_weights_scale = 2.5f, .n_vocab = 512, .n_ctx = 163840,
      .rope_freq_base = 10000.0f, .rms_eps = 1e-6f, .yarn_factor = 40.0f, .yarn_original_ctx = 4096,
      .yarn_log_multiplier = 0.0707f, .recipe = MKMODEL_RECIPE_PLAIN, .type = TYPE_F32}},
    {"tiny-deepseek3", "deepseek2 as DeepSeek-V3 files: tiny-deepseek2 with its 16 experts in 4 groups, the best 2 "
     "eligible",
     {.arch = MKMODEL_DEEPSEEK2, .n_layer = 4, .n_embd = 256, .n_head = 4, .n_head_kv = 1, .head_dim = 96,
      .n_rot = 32, .q_lora_rank = 256, .kv_lora_rank = 256, .v_head_dim = 64, .n_expert = 16, .n_expert_used = 4,
      .n_expert_group = 4, .n_expert_group_used = 2, .n_ff_expert = 256, .n_expert_shared = 1, .n_ff = 512,
      .n_leading_dense = 1, .sigmoid_routing = true, .expert_weights_norm = true, .expert_weights_scale = 2.5f,
      .n_vocab = 512, .n_ctx = 163840, .rope_freq_base = 10000.0f, .rms_eps = 1e-6f, .yarn_factor = 40.0f,
      .yarn_original_ctx = 4096, .yarn_log_multiplier = 0.0707f, .recipe = MKMODEL_RECIPE_PLAIN,
      .type = TYPE_F32}},
    {"tiny-deepseek3-mtp", "deepseek2 as DeepSeek-V3 files with their MTP block kept: tiny-deepseek3 + 1 MTP "
     "block (an MoE layer of its kind with nextn.eh_proj, enorm, hnorm, shared_head_norm, embed_tokens and "
     "shared_head_head)",
     {.arch = MKMODEL_DEEPSEEK2, .n_layer = 4, .n_nextn = 1, .n_embd = 256, .n_head = 4, .n_head_kv = 1,
      .head_dim = 96, .n_rot = 32, .q_lora_rank = 256, .kv_lora_rank = 256, .v_head_dim = 64, .n_expert = 16,
      .n_expert_used = 4, .n_expert_group = 4, .n_expert_group_used = 2, .n_ff_expert = 256, .n_expert_shared = 1,
      .n_ff = 512, .n_leading_dense = 1, .sigmoid_routing = true, .expert_weights_norm = true,
      .expert_weights_scale = 2.5f, .n_vocab = 512, .n_ctx = 163840, .rope_freq_base = 10000.0f, .rms_eps = 1e-6f,
      .yarn_factor = 40.0f, .yarn_original_ctx = 4096, .yarn_log_multiplier = 0.0707f,
      .recipe = MKMODEL_RECIPE_PLAIN, .type = TYPE_F32}},
    {"tiny-deepseek2-lite", "deepseek2 as older Lite files: 3 layers (0 dense ff 512), n_embd 256, 4 heads, "
     "attn_q, kv_lora 256, qk 64+32 rope, v 64 (one attn_kv_b), YaRN 40, 16 experts top-4 softmax, 1 shared, "
     "ff 256, vocab 512",
     {.arch = MKMODEL_DEEPSEEK2, .n_layer = 3, .n_embd = 256, .n_head = 4, .n_head_kv = 4, .head_dim = 96,
      .n_rot = 32, .kv_lora_rank = 256, .v_head_dim = 64, .fused_kv_b = true, .n_expert = 16, .n_expert_used = 4,
      .n_ff_expert = 256, .n_expert_shared = 1, .n_ff = 512, .n_leading_dense = 1, .expert_weights_scale = 1.0f,
      .n_vocab = 512, .n_ctx = 163840, .rope_freq_base = 10000.0f, .rms_eps = 1e-6f, .yarn_factor = 40.0f,
      .yarn_original_ctx = 4096, .yarn_log_multiplier = 0.0707f, .recipe = MKMODEL_RECIPE_PLAIN,
      .type = TYPE_F32}},
    {"tiny-deepseek4", "deepseek4, 3 layers (sliding window 16; layer 0 compresses its KV by 4), n_embd 256, "
     "4 heads of 128 (32 rope) over one KV head, q_lora 256, sinks, output in 2 groups of rank 128, "
     "4 hyper-connection streams (3 Sinkhorn iterations), 16 experts top-4 sqrt-softplus + bias, normalized, "
     "x2.5, SwiGLU clamps 1.0 / 1.5, 1 shared, ff 256, vocab 512",
     {.arch = MKMODEL_DEEPSEEK4, .n_layer = 3, .n_embd = 256, .n_head = 4, .n_head_kv = 1, .head_dim = 128,
      .n_rot = 32, .q_lora_rank = 256, .sliding_window = 16, .o_groups = 2, .o_lora_rank = 128, .hc_count = 4,
      .sinkhorn_iterations = 3, .compressed_layers = 1, .n_expert = 16, .n_expert_used = 4, .n_ff_expert = 256,
      .n_expert_shared = 1, .expert_weights_norm = true, .expert_weights_scale = 2.5f, .swiglu_clamp = 1.0f,
      .swiglu_clamp_shared = 1.5f,
      .n_vocab = 512, .n_ctx = 4096, .rope_freq_base = 10000.0f, .rms_eps = 1e-6f, .recipe = MKMODEL_RECIPE_PLAIN,
      .type = TYPE_F32}},
    {"tiny-deepseek4-hash", "deepseek4 as tiny-deepseek4, its first 2 layers routed by a token-id table",
     {.arch = MKMODEL_DEEPSEEK4, .n_layer = 3, .n_embd = 256, .n_head = 4, .n_head_kv = 1, .head_dim = 128,
      .n_rot = 32, .q_lora_rank = 256, .sliding_window = 16, .o_groups = 2, .o_lora_rank = 128, .hc_count = 4,
      .sinkhorn_iterations = 3, .compressed_layers = 1, .hash_layers = 2, .n_expert = 16, .n_expert_used = 4,
      .n_ff_expert = 256, .n_expert_shared = 1, .expert_weights_norm = true, .expert_weights_scale = 2.5f,
      .swiglu_clamp = 1.0f,
      .swiglu_clamp_shared = 1.5f, .n_vocab = 512, .n_ctx = 4096, .rope_freq_base = 10000.0f, .rms_eps = 1e-6f,
      .recipe = MKMODEL_RECIPE_PLAIN, .type = TYPE_F32}},
    {"tiny-deepseek4-long", "deepseek4 as tiny-deepseek4 for prompts past a 128-token block: layer 0 compresses "
     "its KV by 4 (its indexer keeps the top 8), layer 1 by 128, layer 2 not; YaRN 16 over 256 positions",
     {.arch = MKMODEL_DEEPSEEK4, .n_layer = 3, .n_embd = 256, .n_head = 4, .n_head_kv = 1, .head_dim = 128,
      .n_rot = 32, .q_lora_rank = 256, .sliding_window = 16, .o_groups = 2, .o_lora_rank = 128, .hc_count = 4,
      .sinkhorn_iterations = 3, .compressed_layers = 1, .hca_layers = 1, .indexer_top_k = 8, .n_expert = 16,
      .n_expert_used = 4, .n_ff_expert = 256, .n_expert_shared = 1, .expert_weights_norm = true,
      .expert_weights_scale = 2.5f, .swiglu_clamp = 1.0f, .swiglu_clamp_shared = 1.5f, .n_vocab = 512,
      .n_ctx = 4096, .rope_freq_base = 10000.0f, .rms_eps = 1e-6f, .yarn_factor = 16.0f, .yarn_original_ctx = 256,
      .recipe = MKMODEL_RECIPE_PLAIN, .type = TYPE_F32}},
    {"qwen3-30b-a3b", "Qwen3-30B-A3B as Q4_K_M: 48 layers, 128 experts top-8, vocab 151936, ~18.5 GB",
     {.arch = MKMODEL_QWEN3MOE, .n_layer = 48, .n_embd = 2048, .n_head = 32, .n_head_kv = 4,
      .head_dim = 128, .n_expert = 128, .n_expert_used = 8, .n_ff_expert = 768, .n_ff = 6144,
      .n_vocab = 151936, .n_ctx = 40960, .rope_freq_base = 1e6f, .rms_eps = 1e-6f,
      .recipe = MKMODEL_RECIPE_Q4_K_M, .type = TYPE_Q4_K, .fill = MKMODEL_FILL_BLOCKS}},
    {"gpt-oss-20b", "gpt-oss-20b as MXFP4 (experts) + Q8_0: 24 layers, 32 experts top-4, vocab 201088, ~12 GB",
     {.arch = MKMODEL_GPT_OSS, .n_layer = 24, .n_embd = 2880, .n_head = 64, .n_head_kv = 8,
      .head_dim = 64, .n_expert = 32, .n_expert_used = 4, .n_ff_expert = 2880, .n_ff = 2880,
      .n_vocab = 201088, .n_ctx = 131072, .sliding_window = 128, .rope_freq_base = 150000.0f,
      .rms_eps = 1e-5f, .yarn_factor = 32.0f, .yarn_original_ctx = 4096,
      .recipe = MKMODEL_RECIPE_MXFP4_MOE, .type = TYPE_Q8_0, .fill = MKMODEL_FILL_BLOCKS}},
    {"gpt-oss-120b", "gpt-oss-120b as MXFP4 (experts) + Q8_0: 36 layers, 128 experts top-4, vocab 201088, ~63 GB",
     {.arch = MKMODEL_GPT_OSS, .n_layer = 36, .n_embd = 2880, .n_head = 64, .n_head_kv = 8,
      .head_dim = 64, .n_expert = 128, .n_expert_used = 4, .n_ff_expert = 2880, .n_ff = 2880,
      .n_vocab = 201088, .n_ctx = 131072, .sliding_window = 128, .rope_freq_base = 150000.0f,
      .rms_eps = 1e-5f, .yarn_factor = 32.0f, .yarn_original_ctx = 4096,
      .recipe = MKMODEL_RECIPE_MXFP4_MOE, .type = TYPE_Q8_0, .fill = MKMODEL_FILL_BLOCKS}},
    {"deepseek-v2-lite", "DeepSeek-V2-Lite as Q4_K_M: 27 layers (1 dense), MLA (kv_lora 512), 64 experts top-6 "
     "+ 2 shared, vocab 102400, ~15.7 B parameters",
     {.arch = MKMODEL_DEEPSEEK2, .n_layer = 27, .n_embd = 2048, .n_head = 16, .n_head_kv = 1, .head_dim = 192,
      .n_rot = 64, .kv_lora_rank = 512, .v_head_dim = 128, .n_expert = 64, .n_expert_used = 6,
      .n_ff_expert = 1408, .n_expert_shared = 2, .n_ff = 10944, .n_leading_dense = 1,
      .expert_weights_scale = 1.0f, .n_vocab = 102400, .n_ctx = 163840, .rope_freq_base = 10000.0f,
      .rms_eps = 1e-6f, .yarn_factor = 40.0f, .yarn_original_ctx = 4096, .yarn_log_multiplier = 0.0707f,
      .recipe = MKMODEL_RECIPE_Q4_K_M, .type = TYPE_Q4_K, .fill = MKMODEL_FILL_BLOCKS}},
    /* The three hybrids' shapes as their public configurations describe them
     * (layer counts, widths, heads, experts); the layer patterns follow the
     * architectures' rules (an attention layer every 4th, 5 SWA layers per
     * full one), not each release's exact list. */
    {"lfm2-8b-a1b", "LFM2-8B-A1B as Q4_K_M: 24 layers (6 attention, 18 short convolution, 2 dense), 32 experts "
     "top-4, vocab 65536, ~5 GB",
     {.arch = MKMODEL_LFM2MOE, .n_layer = 24, .n_embd = 2048, .n_head = 32, .n_head_kv = 8, .head_dim = 64,
      .n_expert = 32, .n_expert_used = 4, .n_ff_expert = 1792, .n_ff = 7168, .n_vocab = 65536,
      .n_ctx = 128000, .rope_freq_base = 1e6f, .rms_eps = 1e-5f, .attention_interval = 4,
      .n_leading_dense = 2, .conv_taps = 3, .recipe = MKMODEL_RECIPE_Q4_K_M, .type = TYPE_Q4_K,
      .fill = MKMODEL_FILL_BLOCKS}},
    {"gemma-4-26b-a4b", "Gemma-4-26B-A4B as Q4_K_M: 30 layers (5 SWA per full), dense MLP beside 128 experts "
     "top-8, vocab 262144, ~16 GB",
     {.arch = MKMODEL_GEMMA4, .n_layer = 30, .n_embd = 2816, .n_head = 16, .n_head_kv = 8, .head_dim = 512,
      .head_dim_swa = 256, .n_head_kv_full = 2, .swa_period = 6, .sliding_window = 1024, .n_expert = 128,
      .n_expert_used = 8, .n_ff_expert = 704, .n_ff = 2112, .n_vocab = 262144, .n_ctx = 262144,
      .rope_freq_base = 1e6f, .rms_eps = 1e-6f, .recipe = MKMODEL_RECIPE_Q4_K_M, .type = TYPE_Q4_K,
      .fill = MKMODEL_FILL_BLOCKS}},
    {"qwen3.5-35b-a3b", "Qwen3.5-35B-A3B as Q4_K_M: 40 layers (30 Gated DeltaNet, 10 gated attention) + 1 MTP block, "
     "256 experts top-8 + shared, vocab 248320, ~21 GB",
     {.arch = MKMODEL_QWEN35MOE, .n_layer = 40, .n_embd = 2048, .n_head = 16, .n_head_kv = 2, .head_dim = 256,
      .n_rot = 64, .attention_interval = 4, .conv_taps = 4, .ssm_dk = 128, .ssm_k_heads = 16,
      .ssm_v_heads = 32, .n_expert = 256, .n_expert_used = 8, .n_ff_expert = 512, .n_ff_shared = 512,
      .n_vocab = 248320, .n_ctx = 262144, .rope_freq_base = 1e7f, .rms_eps = 1e-6f,
      .n_nextn = 1, .recipe = MKMODEL_RECIPE_Q4_K_M, .type = TYPE_Q4_K, .fill = MKMODEL_FILL_BLOCKS}},
    /* The public configurations of Ling-mini-2.0 (16.3B parameters) and
     * GLM-4.5-Air (106B, and its MTP block: 110B in the checkpoint). */
    {"ling-mini-2.0", "Ling-mini-2.0 as Q4_K_M: 20 layers (1 dense), 256 experts in 8 groups (4 used) top-8 + "
     "shared, vocab 157184, ~10 GB",
     {.arch = MKMODEL_BAILINGMOE2, .n_layer = 20, .n_embd = 2048, .n_head = 16, .n_head_kv = 4, .head_dim = 128,
      .n_rot = 64, .n_expert = 256, .n_expert_used = 8, .n_expert_group = 8, .n_expert_group_used = 4,
      .n_ff_expert = 512, .n_ff_shared = 512, .n_ff = 5120, .n_leading_dense = 1, .expert_weights_scale = 2.5f,
      .n_vocab = 157184, .n_ctx = 32768, .rope_freq_base = 600000.0f, .rms_eps = 1e-6f,
      .recipe = MKMODEL_RECIPE_Q4_K_M, .type = TYPE_Q4_K, .fill = MKMODEL_FILL_BLOCKS}},
    {"glm-4.5-air", "GLM-4.5-Air as Q4_K_M: 46 layers (1 dense) + 1 MTP block, 128 experts top-8 + shared, "
     "vocab 151552, ~80 GB (its 1408-wide rows fall back to Q8_0; with an i-quant --type, to IQ4_NL)",
     {.arch = MKMODEL_GLM4MOE, .n_layer = 46, .n_nextn = 1, .n_embd = 4096, .n_head = 96, .n_head_kv = 8,
      .head_dim = 128, .n_rot = 64, .n_expert = 128, .n_expert_used = 8, .n_ff_expert = 1408, .n_ff = 10944,
      .n_leading_dense = 1, .expert_weights_scale = 1.0f, .n_vocab = 151552, .n_ctx = 131072,
      .rope_freq_base = 1e6f, .rms_eps = 1e-5f, .recipe = MKMODEL_RECIPE_Q4_K_M, .type = TYPE_Q4_K,
      .fill = MKMODEL_FILL_BLOCKS}},
};

#define PRESET_COUNT (sizeof presets / sizeof presets[0])

int mkmodel_preset(const char *name, mkmodel_config *config, bmoe_error *err)
{
    for (size_t i = 0; i < PRESET_COUNT; i++) {
        if (strcmp(presets[i].name, name) == 0) {
            uint64_t seed = config->seed;
            uint32_t n_split = config->n_split;
            uint32_t n_merges = config->n_merges;
            *config = presets[i].config;
            config->seed = seed;
            config->n_split = n_split;
            config->n_merges = n_merges;
            config->expert_type = -1;
            snprintf(config->name, sizeof config->name, "bmoe-mkmodel %s", name);
            return 0;
        }
    }
    return error_set(err, "unknown --shape '%s' (see --help)", name);
}

void mkmodel_list_presets(FILE *out)
{
    for (size_t i = 0; i < PRESET_COUNT; i++)
        fprintf(out, "  %-15s %s\n", presets[i].name, presets[i].description);
}

const char *mkmodel_arch_name(enum mkmodel_arch arch)
{
    switch (arch) {
    case MKMODEL_QWEN3MOE:
        return "qwen3moe";
    case MKMODEL_GPT_OSS:
        return "gpt-oss";
    case MKMODEL_LLAMA:
        return "llama";
    case MKMODEL_LFM2MOE:
        return "lfm2moe";
    case MKMODEL_GEMMA4:
        return "gemma4";
    case MKMODEL_QWEN35MOE:
        return "qwen35moe";
    case MKMODEL_QWEN2MOE:
        return "qwen2moe";
    case MKMODEL_OLMOE:
        return "olmoe";
    case MKMODEL_BAILINGMOE2:
        return "bailingmoe2";
    case MKMODEL_GLM4MOE:
        return "glm4moe";
    case MKMODEL_DEEPSEEK2:
        return "deepseek2";
    case MKMODEL_DEEPSEEK4:
        return "deepseek4";
    }
    return "?";
}

int mkmodel_arch_from_name(const char *name)
{
    if (strcmp(name, "qwen3moe") == 0)
        return MKMODEL_QWEN3MOE;
    if (strcmp(name, "gpt-oss") == 0)
        return MKMODEL_GPT_OSS;
    if (strcmp(name, "llama") == 0)
        return MKMODEL_LLAMA;
    if (strcmp(name, "lfm2moe") == 0)
        return MKMODEL_LFM2MOE;
    if (strcmp(name, "gemma4") == 0)
        return MKMODEL_GEMMA4;
    if (strcmp(name, "qwen35moe") == 0)
        return MKMODEL_QWEN35MOE;
    if (strcmp(name, "qwen2moe") == 0)
        return MKMODEL_QWEN2MOE;
    if (strcmp(name, "olmoe") == 0)
        return MKMODEL_OLMOE;
    if (strcmp(name, "bailingmoe2") == 0)
        return MKMODEL_BAILINGMOE2;
    if (strcmp(name, "glm4moe") == 0)
        return MKMODEL_GLM4MOE;
    if (strcmp(name, "deepseek2") == 0)
        return MKMODEL_DEEPSEEK2;
    if (strcmp(name, "deepseek4") == 0)
        return MKMODEL_DEEPSEEK4;
    return -1;
}

/* The plain types a model may be written in (each has a random-block
 * generator in fill.c). */
static const uint32_t plain_types[] = {TYPE_F32,  TYPE_F16,  TYPE_BF16, TYPE_Q8_0,
                                       TYPE_Q4_K, TYPE_Q5_K, TYPE_Q6_K, TYPE_MXFP4};

static bool is_plain_type(int type)
{
    for (size_t i = 0; i < sizeof plain_types / sizeof plain_types[0]; i++)
        if ((int)plain_types[i] == type)
            return true;
    return false;
}

/* The grid i-quants and the ternary formats: no quantizer, so only experts
 * are written in them (random valid blocks), as the low-bit files of large
 * MoE models do. */
static const uint32_t expert_only_types[] = {TYPE_IQ2_XXS, TYPE_IQ2_XS, TYPE_IQ2_S, TYPE_IQ3_XXS, TYPE_IQ3_S,
                                             TYPE_IQ1_S,   TYPE_IQ1_M,  TYPE_TQ1_0, TYPE_TQ2_0};

static bool is_expert_only_type(int type)
{
    for (size_t i = 0; i < sizeof expert_only_types / sizeof expert_only_types[0]; i++)
        if ((int)expert_only_types[i] == type)
            return true;
    return false;
}

int mkmodel_parse_type(const char *name, enum mkmodel_recipe *recipe, uint32_t *type,
                       bmoe_error *err)
{
    if (strcasecmp(name, "q4_k_m") == 0) {
        *recipe = MKMODEL_RECIPE_Q4_K_M;
        *type = TYPE_Q4_K;
        return 0;
    }
    if (strcasecmp(name, "mxfp4_moe") == 0) {
        *recipe = MKMODEL_RECIPE_MXFP4_MOE;
        *type = TYPE_Q8_0;
        return 0;
    }
    int t = quant_type_from_name(name);
    if (is_expert_only_type(t)) {
        *recipe = MKMODEL_RECIPE_EXPERTS;
        *type = (uint32_t)t;
        return 0;
    }
    if (!is_plain_type(t))
        return error_set(err, "unsupported --type '%s' (f32 f16 bf16 q8_0 q4_k q5_k q6_k "
                         "mxfp4 q4_k_m mxfp4_moe iq2_xxs iq2_xs iq2_s iq3_xxs iq3_s iq1_s iq1_m tq1_0 tq2_0)",
                         name);
    *recipe = MKMODEL_RECIPE_PLAIN;
    *type = (uint32_t)t;
    return 0;
}

/* gemma4's layer pattern (architectures.md 6.3). */
static bool layer_is_swa(const mkmodel_config *c, uint32_t il)
{
    return (il + 1) % c->swa_period != 0;
}

#define LIMIT(field, low, high, flag)                                                     \
    do {                                                                                  \
        if (config->field < (low) || config->field > (high))                              \
            return error_set(err, "%s %u out of range [%u, %u]", flag,                    \
                             (unsigned)config->field, (unsigned)(low), (unsigned)(high)); \
    } while (0)

int mkmodel_validate(const mkmodel_config *config, bmoe_error *err)
{
    LIMIT(n_layer, 1, 512, "--layers");
    LIMIT(n_embd, 1, 65536, "--embd");
    LIMIT(n_head, 1, 1024, "--heads");
    LIMIT(n_head_kv, 1, 1024, "--kv-heads");
    LIMIT(head_dim, 2, 1024, "--head-dim");
    LIMIT(n_vocab, 1, 1u << 22, "--vocab");
    LIMIT(n_ctx, 1, 1u << 24, "--context");
    LIMIT(n_split, 1, 99999, "--split");
    if (config->head_dim % 2 != 0)
        return error_set(err, "--head-dim %u must be even (RoPE rotates pairs)",
                         config->head_dim);
    if (config->n_head % config->n_head_kv != 0)
        return error_set(err, "--heads %u is not a multiple of --kv-heads %u",
                         config->n_head, config->n_head_kv);
    if (config->arch == MKMODEL_LLAMA && config->n_expert == 0) {
        LIMIT(n_ff, 1, 1u << 20, "--ff");
    } else if (config->arch == MKMODEL_GEMMA4 && config->n_expert == 0) {
        /* the small Gemma 4 models: the dense MLP in every layer, no experts
         * (--experts-used and --expert-ff then unused) */
    } else {
        LIMIT(n_expert, 1, 512, "--experts");
        LIMIT(n_expert_used, 1, config->n_expert, "--experts-used");
        LIMIT(n_ff_expert, 1, 1u << 20, "--expert-ff");
    }
    if (config->arch == MKMODEL_GPT_OSS) {
        LIMIT(sliding_window, 1, 1u << 24, "--sliding-window");
        if (!(config->yarn_factor >= 1.0f && config->yarn_factor <= 1024.0f))
            return error_set(err, "--yarn-factor %g out of range [1, 1024]",
                             (double)config->yarn_factor);
    }
    if (config->arch == MKMODEL_LFM2MOE || config->arch == MKMODEL_QWEN35MOE) {
        LIMIT(attention_interval, 1, config->n_layer, "--attention-interval");
        LIMIT(conv_taps, 2, 64, "--conv-taps");
    }
    if (config->arch == MKMODEL_LFM2MOE) {
        if (config->n_leading_dense > config->n_layer)
            return error_set(err, "--dense-layers %u exceeds --layers %u", config->n_leading_dense, config->n_layer);
        if (config->n_leading_dense > 0)
            LIMIT(n_ff, 1, 1u << 20, "--ff");
    }
    if (config->arch == MKMODEL_GEMMA4) {
        LIMIT(head_dim_swa, 2, 1024, "--head-dim-swa");
        LIMIT(n_head_kv_full, 1, config->n_head, "--kv-heads-full");
        LIMIT(swa_period, 1, config->n_layer, "--swa-period");
        LIMIT(sliding_window, 1, 1u << 24, "--sliding-window");
        LIMIT(n_ff, 1, 1u << 20, "--ff");
        if (config->head_dim_swa % 2 != 0 || config->n_head % config->n_head_kv_full != 0)
            return error_set(err, "--head-dim-swa %u must be even and --heads %u a multiple of --kv-heads-full %u",
                             config->head_dim_swa, config->n_head, config->n_head_kv_full);
        if (config->shared_kv_layers >= config->n_layer || config->per_layer_input > 1u << 16)
            return error_set(err, "--shared-kv %u must be below --layers %u and --per-layer-input %u at most %u",
                             config->shared_kv_layers, config->n_layer, config->per_layer_input, 1u << 16);
        /* the engine's rule (architectures.md 6.4): each shared layer reads
         * the last unshared layer of its kind, which must be of that kind */
        for (uint32_t il = config->n_layer - config->shared_kv_layers; il < config->n_layer; il++) {
            bool swa = layer_is_swa(config, il);
            int64_t source = (int64_t)config->n_layer - config->shared_kv_layers - (swa ? 2 : 1);
            if (source < 0 || layer_is_swa(config, (uint32_t)source) != swa)
                return error_set(err, "--shared-kv %u: layer %u would attend over layer %lld's KV cache, which is "
                                 "not a %s layer (see --swa-period)", config->shared_kv_layers, il,
                                 (long long)source, swa ? "sliding-window" : "full-attention");
        }
    }
    if (config->arch == MKMODEL_QWEN2MOE)
        LIMIT(n_ff_shared, 1, 1u << 20, "--shared-ff");
    if (config->arch == MKMODEL_DEEPSEEK2) {
        LIMIT(n_rot, 2, config->head_dim - 1, "--rope-dims");
        LIMIT(kv_lora_rank, 1, 65536, "--kv-lora");
        LIMIT(v_head_dim, 1, 1024, "--v-head-dim");
        LIMIT(n_expert_shared, 1, 64, "--shared-experts");
        if (config->q_lora_rank > 65536 || config->n_leading_dense > config->n_layer)
            return error_set(err, "--q-lora %u must be at most 65536 and --dense-layers %u at most --layers %u",
                             config->q_lora_rank, config->n_leading_dense, config->n_layer);
        if (config->n_leading_dense > 0)
            LIMIT(n_ff, 1, 1u << 20, "--ff");
        if (config->n_rot % 2 != 0)
            return error_set(err, "--rope-dims %u must be even", config->n_rot);
        if (config->yarn_factor != 0.0f &&
            !(config->yarn_factor >= 1.0f && config->yarn_factor <= 1024.0f && config->yarn_original_ctx >= 1))
            return error_set(err, "--yarn-factor %g must be 0 (no YaRN) or in [1, 1024] with a positive "
                             "--yarn-orig-ctx (%u)", (double)config->yarn_factor, config->yarn_original_ctx);
    }
    if (config->arch == MKMODEL_DEEPSEEK4) {
        LIMIT(n_rot, 2, config->head_dim - 1, "--rope-dims");
        LIMIT(q_lora_rank, 1, 65536, "--q-lora");
        LIMIT(n_expert_shared, 1, 64, "--shared-experts");
        LIMIT(sliding_window, 1, 1u << 24, "--sliding-window");
        LIMIT(hc_count, 1, 8, "hyper-connection count");
        LIMIT(sinkhorn_iterations, 1, 100, "Sinkhorn iterations");
        LIMIT(o_groups, 1, config->n_head, "output groups");
        LIMIT(o_lora_rank, 1, 65536, "output rank");
        if (config->compressed_layers + config->hca_layers > config->n_layer)
            return error_set(err, "deepseek4: %u layers compressing by 4 and %u by 128 of --layers %u",
                             config->compressed_layers, config->hca_layers, config->n_layer);
        if (config->hash_layers > config->n_layer || config->n_expert > 1024)
            return error_set(err, "deepseek4: %u hash layers of --layers %u, and at most 1024 --experts (%u)",
                             config->hash_layers, config->n_layer, config->n_expert);
        if (config->n_head_kv != 1 || config->n_rot % 2 != 0 || config->n_head % config->o_groups != 0)
            return error_set(err, "deepseek4: --kv-heads %u must be 1, --rope-dims %u even and the output groups "
                             "(%u) must divide --heads %u", config->n_head_kv, config->n_rot, config->o_groups,
                             config->n_head);
    }
    if (config->arch == MKMODEL_OLMOE && config->n_head_kv != config->n_head)
        return error_set(err, "olmoe: --kv-heads %u must equal --heads %u (its k norm spans the whole projection)",
                         config->n_head_kv, config->n_head);
    if (config->arch == MKMODEL_QWEN35MOE) {
        if (config->n_rot > config->head_dim)
            return error_set(err, "--rope-dims %u exceeds --head-dim %u", config->n_rot, config->head_dim);
        LIMIT(ssm_dk, 2, 512, "--ssm-state");
        LIMIT(ssm_k_heads, 1, 1024, "--ssm-k-heads");
        LIMIT(ssm_v_heads, 1, 1024, "--ssm-v-heads");
        LIMIT(n_ff_shared, 1, 1u << 20, "--shared-ff");
        if (config->n_rot % 2 != 0 || config->ssm_v_heads % config->ssm_k_heads != 0)
            return error_set(err, "--rope-dims %u must be even and --ssm-v-heads %u a multiple of --ssm-k-heads %u",
                             config->n_rot, config->ssm_v_heads, config->ssm_k_heads);
    }
    if (config->n_layer + config->n_nextn > 512 || config->n_nextn > 8)
        return error_set(err, "--nextn-layers %u: at most 8, and with --layers %u at most 512 blocks",
                         config->n_nextn, config->n_layer);
    if (config->arch == MKMODEL_BAILINGMOE2 || config->arch == MKMODEL_GLM4MOE) {
        if (config->n_leading_dense > config->n_layer)
            return error_set(err, "--dense-layers %u exceeds --layers %u", config->n_leading_dense, config->n_layer);
        if (config->n_leading_dense > 0)
            LIMIT(n_ff, 1, 1u << 20, "--ff");
        if (config->n_rot > config->head_dim || config->n_rot % 2 != 0)
            return error_set(err, "--rope-dims %u must be even and at most --head-dim %u", config->n_rot,
                             config->head_dim);
        uint32_t groups = config->n_expert_group, used = config->n_expert_group_used;
        if (groups > 1 && (config->n_expert % groups != 0 || config->n_expert / groups < 2 || used < 1 ||
                           used >= groups || config->n_expert_used > used * (config->n_expert / groups)))
            return error_set(err, "--groups %u --groups-used %u: the groups must split --experts %u into groups of "
                             "2 or more, fewer used than there are, holding --experts-used %u", groups, used,
                             config->n_expert, config->n_expert_used);
        if (!(config->expert_weights_scale >= 0.0f && config->expert_weights_scale <= 100.0f))
            return error_set(err, "--weights-scale %g out of range [0, 100]", (double)config->expert_weights_scale);
    }
    if (config->arch == MKMODEL_BAILINGMOE2) {
        LIMIT(n_ff_shared, 1, 1u << 20, "--shared-ff");
        /* llama.cpp sizes the fused qkv as n_embd + 2 x the KV width */
        if (config->n_head * config->head_dim != config->n_embd)
            return error_set(err, "bailingmoe2: --heads %u x --head-dim %u must equal --embd %u", config->n_head,
                             config->head_dim, config->n_embd);
    }
    if (!(config->rope_freq_base > 0.0f && config->rope_freq_base < 1e12f))
        return error_set(err, "--rope-base %g out of range", (double)config->rope_freq_base);
    if (!(config->rms_eps > 0.0f && config->rms_eps < 1.0f))
        return error_set(err, "--eps %g out of range (0, 1)", (double)config->rms_eps);
    if (config->expert_type >= 0 && !is_plain_type(config->expert_type) &&
        !is_expert_only_type(config->expert_type))
        return error_set(err, "unsupported --expert-type");
    return 0;
}

/* ---- Tensor table ---- */

enum role {
    ROLE_VECTOR,     /* norms, biases, sinks: always F32 */
    ROLE_ROUTER,     /* ffn_gate_inp: always F32 */
    ROLE_EMBED,
    ROLE_OUTPUT,
    ROLE_MATRIX,     /* attention q/k/output, dense gate/up */
    ROLE_ATTN_V,
    ROLE_FFN_DOWN,
    ROLE_EXPERT,     /* ffn_gate_exps, ffn_up_exps */
    ROLE_EXPERT_DOWN, /* ffn_down_exps */
    ROLE_TABLE       /* ffn_gate_tid2eid: always I32 */
};

/* The "more bits" layers of the Q4_K_M recipe. */
static bool use_more_bits(uint32_t layer, uint32_t n_layer)
{
    return layer < n_layer / 8 || layer >= 7 * n_layer / 8 ||
           (layer >= n_layer / 8 && (layer - n_layer / 8) % 3 == 2);
}

static uint32_t choose_type(const mkmodel_config *config, enum role role, uint32_t layer, int64_t ne0)
{
    if (role == ROLE_VECTOR || role == ROLE_ROUTER)
        return TYPE_F32;
    if (role == ROLE_TABLE)
        return TYPE_I32;
    bool expert = role == ROLE_EXPERT || role == ROLE_EXPERT_DOWN;
    uint32_t type = config->type;
    if (config->recipe == MKMODEL_RECIPE_Q4_K_M) {
        type = TYPE_Q4_K;
        if (role == ROLE_OUTPUT)
            type = TYPE_Q6_K;
        if ((role == ROLE_ATTN_V || role == ROLE_FFN_DOWN || role == ROLE_EXPERT_DOWN) &&
            use_more_bits(layer, config->n_layer))
            type = TYPE_Q6_K;
        if (expert && config->arch == MKMODEL_GPT_OSS)
            type = TYPE_MXFP4; /* gpt-oss experts keep their native format */
    } else if (config->recipe == MKMODEL_RECIPE_MXFP4_MOE) {
        type = expert ? TYPE_MXFP4 : TYPE_Q8_0;
    } else if (config->recipe == MKMODEL_RECIPE_EXPERTS) {
        type = expert ? config->type : TYPE_Q8_0;
    }
    if (expert && config->expert_type >= 0)
        type = (uint32_t)config->expert_type;
    /* A row must be whole blocks: fall back to a format of 32-element
     * blocks, else F32. The grid i-quants fall back to IQ4_NL, as the
     * published files of those types store such rows (GLM-4.5-Air's
     * 1408-wide down projections); the others to Q8_0. */
    const quant_format *format = quant_format_of(type);
    if (!format || ne0 % format->block_elems != 0) {
        bool grid_iquant = is_expert_only_type((int)type) && type != TYPE_TQ1_0 && type != TYPE_TQ2_0;
        type = ne0 % 32 != 0 ? TYPE_F32 : grid_iquant ? TYPE_IQ4_NL : TYPE_Q8_0;
    }
    return type;
}

/* The role of a tensor named as this generator names them, for --quantize. */
static enum role role_of(const char *name, uint32_t n_dims, bool tied_output)
{
    const char *base = name;
    if (strncmp(name, "blk.", 4) == 0 && (base = strchr(name + 4, '.')) != NULL)
        base++;
    else
        base = name;
    if (n_dims < 2 || strstr(base, ".bias") || strstr(base, "conv"))
        return ROLE_VECTOR;
    if (strcmp(base, "ffn_gate_tid2eid.weight") == 0)
        return ROLE_TABLE;
    if (strcmp(base, "ffn_gate_inp.weight") == 0 || strncmp(base, "hc_", 3) == 0 ||
        strcmp(base, "output_hc_fn.weight") == 0)
        return ROLE_ROUTER; /* deepseek4's hyper-connection mixes: F32 too */
    /* a tied embedding is also the output head: it gets the head's type */
    if (strcmp(base, "token_embd.weight") == 0)
        return tied_output ? ROLE_OUTPUT : ROLE_EMBED;
    if (strcmp(base, "per_layer_token_embd.weight") == 0 || strcmp(base, "nextn.embed_tokens.weight") == 0)
        return ROLE_EMBED;
    if (strcmp(base, "output.weight") == 0 || strcmp(base, "nextn.shared_head_head.weight") == 0)
        return ROLE_OUTPUT;
    if (strcmp(base, "attn_v.weight") == 0)
        return ROLE_ATTN_V;
    if (strcmp(base, "ffn_down_exps.weight") == 0)
        return ROLE_EXPERT_DOWN;
    if (strstr(base, "_exps.weight"))
        return ROLE_EXPERT;
    if (strcmp(base, "ffn_down.weight") == 0 || strcmp(base, "ffn_down_shexp.weight") == 0 ||
        strcmp(base, "ssm_out.weight") == 0)
        return ROLE_FFN_DOWN;
    return ROLE_MATRIX;
}

uint32_t mkmodel_type_for_tensor(const mkmodel_config *config, const char *name, uint32_t n_dims, int64_t ne0,
                                 bool tied_output)
{
    uint32_t layer = 0;
    if (strncmp(name, "blk.", 4) == 0)
        layer = (uint32_t)strtoul(name + 4, NULL, 10);
    return choose_type(config, role_of(name, n_dims, tied_output), layer, ne0);
}

static int add_tensor(mkmodel_model *model, uint32_t capacity, enum role role, uint32_t layer,
                      const char *name, uint32_t n_dims, int64_t ne0, int64_t ne1, int64_t ne2,
                      enum mkmodel_noise noise, float offset, float scale, bmoe_error *err)
{
    if (model->tensor_count >= capacity)
        return error_set(err, "internal error: tensor table full at %s", name);
    mkmodel_tensor *t = &model->tensors[model->tensor_count++];
    memset(t, 0, sizeof *t);
    if (layer == UINT32_MAX)
        snprintf(t->name, sizeof t->name, "%s", name);
    else
        snprintf(t->name, sizeof t->name, "blk.%u.%s", layer, name);
    t->n_dims = n_dims;
    t->ne[0] = ne0;
    t->ne[1] = n_dims > 1 ? ne1 : 1;
    t->ne[2] = n_dims > 2 ? ne2 : 1;
    t->ne[3] = 1;
    t->type = choose_type(&model->config, role, layer, ne0);
    t->nbytes = (uint64_t)quant_row_bytes(t->type, ne0) * (uint64_t)(t->ne[1] * t->ne[2]);
    if (t->nbytes == 0)
        return error_set(err, "internal error: no size for %s", t->name);
    t->noise = noise;
    t->offset = offset;
    t->scale = scale;
    return 0;
}

static float inverse_sqrt(uint32_t n)
{
    /* sqrt is correctly rounded (IEEE), so the scales are the same everywhere. */
    return 1.0f / __builtin_sqrtf((float)n);
}

#define NORMAL(scale) MKMODEL_NOISE_NORMAL, 0.0f, (scale)
#define NORM_WEIGHT MKMODEL_NOISE_UNIFORM, 1.0f, 0.1f
#define BIAS MKMODEL_NOISE_NORMAL, 0.0f, 0.1f
#define GLOBAL UINT32_MAX

/* Router logits spread ~4 units so that top-k near-ties are rare. */
#define ROUTER_SPREAD 4.0f
/* Output logits spread ~3 units so that greedy choices are clear. */
#define OUTPUT_SPREAD 3.0f

/* The hybrids' layer patterns (architectures.md 6.3, 7.1, 8). */
static bool layer_attends(const mkmodel_config *c, uint32_t il)
{
    /* an MTP block after the layers is a full-attention block (qwen35moe) */
    return il >= c->n_layer || (il + 1) % c->attention_interval == 0;
}

/* A constant tensor: every value `value` (noise scale 0). */
#define CONSTANT(value) MKMODEL_NOISE_UNIFORM, (value), 0.0f
/* deepseek4's lightning indexer: heads, key size and top-k (at least the
 * 14 compressed entries the test prompt's last token sees) */
#define DEEPSEEK4_INDEXER_HEADS 2
#define DEEPSEEK4_INDEXER_DIM 64
#define DEEPSEEK4_INDEXER_TOP_K 16
/* deepseek4's KV compression ratio of layer il */
static uint32_t deepseek4_ratio(const mkmodel_config *c, uint32_t il)
{
    return il < c->compressed_layers ? 4 : il < c->compressed_layers + c->hca_layers ? 128 : 0;
}
/* deepseek4's hyper-connection scales, in [0.25, 1.25) */
#define HC_SCALE MKMODEL_NOISE_UNIFORM, 0.75f, 0.5f
/* deepseek4's hash table: rows of distinct expert ids in [0, n) */
#define EXPERT_IDS(n) MKMODEL_NOISE_EXPERT_IDS, 0.0f, (float)(n)
/* DeltaNet's A = -exp(A_log) in [-1.5, -0.5): negative, so the state decays. */
#define DECAY_RATE MKMODEL_NOISE_UNIFORM, -1.0f, 0.5f

/* The multi-token-prediction blocks after the layers run (the architectures
 * that have them). */
static uint32_t mtp_blocks(const mkmodel_config *c)
{
    return c->arch == MKMODEL_BAILINGMOE2 || c->arch == MKMODEL_GLM4MOE || c->arch == MKMODEL_QWEN35MOE ||
                   c->arch == MKMODEL_DEEPSEEK2
               ? c->n_nextn
               : 0;
}

static int build_tensors(mkmodel_model *model, bmoe_error *err)
{
    const mkmodel_config *c = &model->config;
    uint32_t per_layer = 32;
    uint32_t n_blocks = c->n_layer + mtp_blocks(c);
    uint32_t capacity = 8 + per_layer * n_blocks;
    model->tensors = calloc(capacity, sizeof *model->tensors);
    if (!model->tensors)
        return error_set(err, "out of memory for the tensor table");
    int64_t E = c->n_embd, V = c->n_vocab, Q = (int64_t)c->n_head * c->head_dim,
            KV = (int64_t)c->n_head_kv * c->head_dim, X = c->n_expert, F = c->n_ff_expert;
    float s_embd = inverse_sqrt(c->n_embd), s_q = inverse_sqrt((uint32_t)Q);

#define ADD(role, layer, name, dims, a, b, cc, init)                                            \
    do {                                                                                     \
        if (add_tensor(model, capacity, role, layer, name, dims, a, b, cc, init, err) != 0) \
            return -1;                                                                       \
    } while (0)

    ADD(ROLE_EMBED, GLOBAL, "token_embd.weight", 2, E, V, 1, NORMAL(1.0f));
    if (c->arch == MKMODEL_GEMMA4) /* proportional RoPE on the full layers: every pair rotated here */
        ADD(ROLE_VECTOR, GLOBAL, "rope_freqs.weight", 1, c->head_dim / 2, 1, 1, CONSTANT(1.0f));
    int64_t per_layer_input = c->arch == MKMODEL_GEMMA4 ? c->per_layer_input : 0, P = per_layer_input;
    if (per_layer_input > 0) {
        /* the token rows are scaled by sqrt(Dp) in the forward pass: drawn
         * at 1/sqrt(Dp), they weigh as much as the projection's normalized part */
        ADD(ROLE_EMBED, GLOBAL, "per_layer_token_embd.weight", 2, P * c->n_layer, V, 1,
            NORMAL(inverse_sqrt((uint32_t)P)));
        ADD(ROLE_MATRIX, GLOBAL, "per_layer_model_proj.weight", 2, E, P * c->n_layer, 1, NORMAL(s_embd));
        ADD(ROLE_VECTOR, GLOBAL, "per_layer_proj_norm.weight", 1, P, 1, 1, NORM_WEIGHT);
    }
    for (uint32_t il = 0; il < n_blocks; il++) {
        if (c->arch == MKMODEL_BAILINGMOE2 || c->arch == MKMODEL_GLM4MOE) {
            /* architectures.md 10.2, and llama.cpp's glm4moe loader */
            bool bailing = c->arch == MKMODEL_BAILINGMOE2;
            int64_t fs = bailing ? c->n_ff_shared : c->n_ff_expert;
            ADD(ROLE_VECTOR, il, "attn_norm.weight", 1, E, 1, 1, NORM_WEIGHT);
            if (bailing) {
                ADD(ROLE_MATRIX, il, "attn_qkv.weight", 2, E, Q + 2 * KV, 1, NORMAL(s_embd));
            } else {
                ADD(ROLE_MATRIX, il, "attn_q.weight", 2, E, Q, 1, NORMAL(s_embd));
                ADD(ROLE_VECTOR, il, "attn_q.bias", 1, Q, 1, 1, BIAS);
                ADD(ROLE_MATRIX, il, "attn_k.weight", 2, E, KV, 1, NORMAL(s_embd));
                ADD(ROLE_VECTOR, il, "attn_k.bias", 1, KV, 1, 1, BIAS);
                ADD(ROLE_ATTN_V, il, "attn_v.weight", 2, E, KV, 1, NORMAL(s_embd));
                ADD(ROLE_VECTOR, il, "attn_v.bias", 1, KV, 1, 1, BIAS);
            }
            if (bailing || c->qk_norm) {
                ADD(ROLE_VECTOR, il, "attn_q_norm.weight", 1, c->head_dim, 1, 1, NORM_WEIGHT);
                ADD(ROLE_VECTOR, il, "attn_k_norm.weight", 1, c->head_dim, 1, 1, NORM_WEIGHT);
            }
            ADD(ROLE_MATRIX, il, "attn_output.weight", 2, Q, E, 1, NORMAL(s_q));
            ADD(ROLE_VECTOR, il, bailing ? "ffn_norm.weight" : "post_attention_norm.weight", 1, E, 1, 1,
                NORM_WEIGHT);
            if (il < c->n_leading_dense) {
                ADD(ROLE_MATRIX, il, "ffn_gate.weight", 2, E, c->n_ff, 1, NORMAL(s_embd));
                ADD(ROLE_MATRIX, il, "ffn_up.weight", 2, E, c->n_ff, 1, NORMAL(s_embd));
                ADD(ROLE_FFN_DOWN, il, "ffn_down.weight", 2, c->n_ff, E, 1, NORMAL(inverse_sqrt(c->n_ff)));
            } else {
                ADD(ROLE_ROUTER, il, "ffn_gate_inp.weight", 2, E, X, 1, NORMAL(ROUTER_SPREAD * s_embd));
                ADD(ROLE_VECTOR, il, "exp_probs_b.bias", 1, X, 1, 1, BIAS);
                ADD(ROLE_EXPERT, il, "ffn_gate_exps.weight", 3, E, F, X, NORMAL(s_embd));
                ADD(ROLE_EXPERT, il, "ffn_up_exps.weight", 3, E, F, X, NORMAL(s_embd));
                ADD(ROLE_EXPERT_DOWN, il, "ffn_down_exps.weight", 3, F, E, X, NORMAL(inverse_sqrt(c->n_ff_expert)));
                ADD(ROLE_MATRIX, il, "ffn_gate_shexp.weight", 2, E, fs, 1, NORMAL(s_embd));
                ADD(ROLE_MATRIX, il, "ffn_up_shexp.weight", 2, E, fs, 1, NORMAL(s_embd));
                ADD(ROLE_FFN_DOWN, il, "ffn_down_shexp.weight", 2, fs, E, 1, NORMAL(inverse_sqrt((uint32_t)fs)));
            }
            if (il >= c->n_layer) {
                /* the MTP block's own tensors, those the released files
                 * carry: GLM-4.5's its own norm, embedding and output
                 * matrix (drawn apart from the model's here, so that using
                 * the wrong one shows); Ling 2.0's its final_layernorm */
                ADD(ROLE_MATRIX, il, "nextn.eh_proj.weight", 2, 2 * E, E, 1, NORMAL(inverse_sqrt(2 * c->n_embd)));
                ADD(ROLE_VECTOR, il, "nextn.enorm.weight", 1, E, 1, 1, NORM_WEIGHT);
                ADD(ROLE_VECTOR, il, "nextn.hnorm.weight", 1, E, 1, 1, NORM_WEIGHT);
                if (bailing) {
                    ADD(ROLE_VECTOR, il, "layer_output_norm.weight", 1, E, 1, 1, NORM_WEIGHT);
                } else {
                    ADD(ROLE_VECTOR, il, "nextn.shared_head_norm.weight", 1, E, 1, 1, NORM_WEIGHT);
                    ADD(ROLE_EMBED, il, "nextn.embed_tokens.weight", 2, E, V, 1, NORMAL(1.0f));
                    ADD(ROLE_OUTPUT, il, "nextn.shared_head_head.weight", 2, E, V, 1, NORMAL(OUTPUT_SPREAD * s_embd));
                }
            }
            continue;
        }
        if (c->arch == MKMODEL_LFM2MOE) {
            ADD(ROLE_VECTOR, il, "attn_norm.weight", 1, E, 1, 1, NORM_WEIGHT);
            if (layer_attends(c, il)) {
                ADD(ROLE_MATRIX, il, "attn_q.weight", 2, E, Q, 1, NORMAL(s_embd));
                ADD(ROLE_MATRIX, il, "attn_k.weight", 2, E, KV, 1, NORMAL(s_embd));
                ADD(ROLE_ATTN_V, il, "attn_v.weight", 2, E, KV, 1, NORMAL(s_embd));
                ADD(ROLE_VECTOR, il, "attn_q_norm.weight", 1, c->head_dim, 1, 1, NORM_WEIGHT);
                ADD(ROLE_VECTOR, il, "attn_k_norm.weight", 1, c->head_dim, 1, 1, NORM_WEIGHT);
                ADD(ROLE_MATRIX, il, "attn_output.weight", 2, Q, E, 1, NORMAL(s_q));
            } else {
                ADD(ROLE_MATRIX, il, "shortconv.in_proj.weight", 2, E, 3 * E, 1, NORMAL(s_embd));
                ADD(ROLE_VECTOR, il, "shortconv.conv.weight", 2, c->conv_taps, E, 1, NORMAL(0.5f));
                ADD(ROLE_MATRIX, il, "shortconv.out_proj.weight", 2, E, E, 1, NORMAL(s_embd));
            }
            ADD(ROLE_VECTOR, il, "ffn_norm.weight", 1, E, 1, 1, NORM_WEIGHT);
            if (il < c->n_leading_dense) {
                ADD(ROLE_MATRIX, il, "ffn_gate.weight", 2, E, c->n_ff, 1, NORMAL(s_embd));
                ADD(ROLE_MATRIX, il, "ffn_up.weight", 2, E, c->n_ff, 1, NORMAL(s_embd));
                ADD(ROLE_FFN_DOWN, il, "ffn_down.weight", 2, c->n_ff, E, 1, NORMAL(inverse_sqrt(c->n_ff)));
                continue;
            }
            ADD(ROLE_ROUTER, il, "ffn_gate_inp.weight", 2, E, X, 1, NORMAL(ROUTER_SPREAD * s_embd));
            ADD(ROLE_VECTOR, il, "exp_probs_b.bias", 1, X, 1, 1, BIAS);
            ADD(ROLE_EXPERT, il, "ffn_gate_exps.weight", 3, E, F, X, NORMAL(s_embd));
            ADD(ROLE_EXPERT, il, "ffn_up_exps.weight", 3, E, F, X, NORMAL(s_embd));
            ADD(ROLE_EXPERT_DOWN, il, "ffn_down_exps.weight", 3, F, E, X, NORMAL(inverse_sqrt(c->n_ff_expert)));
            continue;
        }
        if (c->arch == MKMODEL_GEMMA4) {
            bool swa = layer_is_swa(c, il);
            /* the last shared_kv_layers attend over earlier layers' caches: no K/V of their own */
            bool own_kv = il < c->n_layer - c->shared_kv_layers;
            int64_t d = swa ? c->head_dim_swa : c->head_dim;
            int64_t q = (int64_t)c->n_head * d, kv = (int64_t)(swa ? c->n_head_kv : c->n_head_kv_full) * d;
            ADD(ROLE_VECTOR, il, "attn_norm.weight", 1, E, 1, 1, NORM_WEIGHT);
            ADD(ROLE_MATRIX, il, "attn_q.weight", 2, E, q, 1, NORMAL(s_embd));
            if (own_kv)
                ADD(ROLE_MATRIX, il, "attn_k.weight", 2, E, kv, 1, NORMAL(s_embd));
            if (own_kv && swa) /* full layers have V = K */
                ADD(ROLE_ATTN_V, il, "attn_v.weight", 2, E, kv, 1, NORMAL(s_embd));
            ADD(ROLE_VECTOR, il, "attn_q_norm.weight", 1, d, 1, 1, NORM_WEIGHT);
            if (own_kv)
                ADD(ROLE_VECTOR, il, "attn_k_norm.weight", 1, d, 1, 1, NORM_WEIGHT);
            ADD(ROLE_MATRIX, il, "attn_output.weight", 2, q, E, 1, NORMAL(inverse_sqrt((uint32_t)q)));
            ADD(ROLE_VECTOR, il, "post_attention_norm.weight", 1, E, 1, 1, NORM_WEIGHT);
            ADD(ROLE_VECTOR, il, "ffn_norm.weight", 1, E, 1, 1, NORM_WEIGHT);
            ADD(ROLE_MATRIX, il, "ffn_gate.weight", 2, E, c->n_ff, 1, NORMAL(s_embd));
            ADD(ROLE_MATRIX, il, "ffn_up.weight", 2, E, c->n_ff, 1, NORMAL(s_embd));
            ADD(ROLE_FFN_DOWN, il, "ffn_down.weight", 2, c->n_ff, E, 1, NORMAL(inverse_sqrt(c->n_ff)));
            ADD(ROLE_VECTOR, il, "post_ffw_norm.weight", 1, E, 1, 1, NORM_WEIGHT);
            if (X > 0) { /* MoE beside the MLP; the small models have none */
                ADD(ROLE_ROUTER, il, "ffn_gate_inp.weight", 2, E, X, 1, NORMAL(ROUTER_SPREAD));
                ADD(ROLE_VECTOR, il, "ffn_gate_inp.scale", 1, E, 1, 1, NORM_WEIGHT);
                ADD(ROLE_VECTOR, il, "pre_ffw_norm_2.weight", 1, E, 1, 1, NORM_WEIGHT);
                ADD(ROLE_VECTOR, il, "post_ffw_norm_1.weight", 1, E, 1, 1, NORM_WEIGHT);
                ADD(ROLE_VECTOR, il, "post_ffw_norm_2.weight", 1, E, 1, 1, NORM_WEIGHT);
                ADD(ROLE_EXPERT, il, "ffn_gate_up_exps.weight", 3, E, 2 * F, X, NORMAL(s_embd));
                ADD(ROLE_EXPERT_DOWN, il, "ffn_down_exps.weight", 3, F, E, X, NORMAL(inverse_sqrt(c->n_ff_expert)));
                ADD(ROLE_VECTOR, il, "ffn_down_exps.scale", 1, X, 1, 1, NORM_WEIGHT);
            }
            if (per_layer_input > 0) {
                ADD(ROLE_MATRIX, il, "inp_gate.weight", 2, E, P, 1, NORMAL(s_embd));
                ADD(ROLE_MATRIX, il, "proj.weight", 2, P, E, 1, NORMAL(inverse_sqrt((uint32_t)P)));
                ADD(ROLE_VECTOR, il, "post_norm.weight", 1, E, 1, 1, NORM_WEIGHT);
            }
            ADD(ROLE_VECTOR, il, "layer_output_scale.weight", 1, 1, 1, 1, NORM_WEIGHT);
            continue;
        }
        if (c->arch == MKMODEL_QWEN35MOE) {
            int64_t kd = (int64_t)c->ssm_k_heads * c->ssm_dk, vd = (int64_t)c->ssm_v_heads * c->ssm_dk;
            int64_t channels = 2 * kd + vd, hv = c->ssm_v_heads;
            ADD(ROLE_VECTOR, il, "attn_norm.weight", 1, E, 1, 1, NORM_WEIGHT);
            ADD(ROLE_VECTOR, il, "post_attention_norm.weight", 1, E, 1, 1, NORM_WEIGHT);
            if (layer_attends(c, il)) {
                ADD(ROLE_MATRIX, il, "attn_q.weight", 2, E, 2 * Q, 1, NORMAL(s_embd)); /* query and gate per head */
                ADD(ROLE_MATRIX, il, "attn_k.weight", 2, E, KV, 1, NORMAL(s_embd));
                ADD(ROLE_ATTN_V, il, "attn_v.weight", 2, E, KV, 1, NORMAL(s_embd));
                ADD(ROLE_VECTOR, il, "attn_q_norm.weight", 1, c->head_dim, 1, 1, NORM_WEIGHT);
                ADD(ROLE_VECTOR, il, "attn_k_norm.weight", 1, c->head_dim, 1, 1, NORM_WEIGHT);
                ADD(ROLE_MATRIX, il, "attn_output.weight", 2, Q, E, 1, NORMAL(s_q));
            } else {
                ADD(ROLE_MATRIX, il, "attn_qkv.weight", 2, E, channels, 1, NORMAL(s_embd));
                ADD(ROLE_MATRIX, il, "attn_gate.weight", 2, E, vd, 1, NORMAL(s_embd));
                ADD(ROLE_VECTOR, il, "ssm_conv1d.weight", 2, c->conv_taps, channels, 1, NORMAL(0.5f));
                ADD(ROLE_VECTOR, il, "ssm_dt.bias", 1, hv, 1, 1, BIAS);
                ADD(ROLE_VECTOR, il, "ssm_a", 1, hv, 1, 1, DECAY_RATE);
                ADD(ROLE_MATRIX, il, "ssm_beta.weight", 2, E, hv, 1, NORMAL(s_embd));
                ADD(ROLE_MATRIX, il, "ssm_alpha.weight", 2, E, hv, 1, NORMAL(s_embd));
                ADD(ROLE_VECTOR, il, "ssm_norm.weight", 1, c->ssm_dk, 1, 1, NORM_WEIGHT);
                ADD(ROLE_FFN_DOWN, il, "ssm_out.weight", 2, vd, E, 1, NORMAL(inverse_sqrt((uint32_t)vd)));
            }
            ADD(ROLE_ROUTER, il, "ffn_gate_inp.weight", 2, E, X, 1, NORMAL(ROUTER_SPREAD * s_embd));
            ADD(ROLE_EXPERT, il, "ffn_gate_exps.weight", 3, E, F, X, NORMAL(s_embd));
            ADD(ROLE_EXPERT, il, "ffn_up_exps.weight", 3, E, F, X, NORMAL(s_embd));
            ADD(ROLE_EXPERT_DOWN, il, "ffn_down_exps.weight", 3, F, E, X, NORMAL(inverse_sqrt(c->n_ff_expert)));
            ADD(ROLE_VECTOR, il, "ffn_gate_inp_shexp.weight", 1, E, 1, 1, NORMAL(s_embd));
            ADD(ROLE_MATRIX, il, "ffn_gate_shexp.weight", 2, E, c->n_ff_shared, 1, NORMAL(s_embd));
            ADD(ROLE_MATRIX, il, "ffn_up_shexp.weight", 2, E, c->n_ff_shared, 1, NORMAL(s_embd));
            ADD(ROLE_FFN_DOWN, il, "ffn_down_shexp.weight", 2, c->n_ff_shared, E, 1,
                NORMAL(inverse_sqrt(c->n_ff_shared)));
            if (il >= c->n_layer) { /* the MTP block (Qwen3.5's mtp.fc, pre_fc_norm_*, mtp.norm) */
                ADD(ROLE_MATRIX, il, "nextn.eh_proj.weight", 2, 2 * E, E, 1, NORMAL(inverse_sqrt(2 * c->n_embd)));
                ADD(ROLE_VECTOR, il, "nextn.enorm.weight", 1, E, 1, 1, NORM_WEIGHT);
                ADD(ROLE_VECTOR, il, "nextn.hnorm.weight", 1, E, 1, 1, NORM_WEIGHT);
                ADD(ROLE_VECTOR, il, "nextn.shared_head_norm.weight", 1, E, 1, 1, NORM_WEIGHT);
            }
            continue;
        }
        if (c->arch == MKMODEL_DEEPSEEK4) {
            /* architectures.md 11; the one KV head is RMS-normalized */
            int64_t H = c->n_head, D = c->head_dim, q_lora = c->q_lora_rank, G = c->o_groups;
            int64_t o_lora = c->o_lora_rank, hc = c->hc_count, mix = (2 + hc) * hc, shared = F * c->n_expert_shared;
            ADD(ROLE_VECTOR, il, "attn_norm.weight", 1, E, 1, 1, NORM_WEIGHT);
            ADD(ROLE_VECTOR, il, "attn_sinks.weight", 1, H, 1, 1, NORMAL(1.0f));
            ADD(ROLE_MATRIX, il, "attn_q_a.weight", 2, E, q_lora, 1, NORMAL(s_embd));
            ADD(ROLE_VECTOR, il, "attn_q_a_norm.weight", 1, q_lora, 1, 1, NORM_WEIGHT);
            ADD(ROLE_MATRIX, il, "attn_q_b.weight", 2, q_lora, H * D, 1, NORMAL(inverse_sqrt(c->q_lora_rank)));
            ADD(ROLE_ATTN_V, il, "attn_kv.weight", 2, E, D, 1, NORMAL(s_embd));
            ADD(ROLE_VECTOR, il, "attn_kv_a_norm.weight", 1, D, 1, 1, NORM_WEIGHT);
            ADD(ROLE_MATRIX, il, "attn_output_a.weight", 2, H * D / G, G * o_lora, 1,
                NORMAL(inverse_sqrt((uint32_t)(H * D / G))));
            ADD(ROLE_MATRIX, il, "attn_output_b.weight", 2, G * o_lora, E, 1,
                NORMAL(inverse_sqrt((uint32_t)(G * o_lora))));
            if (deepseek4_ratio(c, il) == 128) { /* the KV compressor, pooling each block alone */
                ADD(ROLE_MATRIX, il, "attn_compressor_kv.weight", 2, E, D, 1, NORMAL(s_embd));
                ADD(ROLE_MATRIX, il, "attn_compressor_gate.weight", 2, E, D, 1, NORMAL(s_embd));
                ADD(ROLE_VECTOR, il, "attn_compressor_ape.weight", 2, D, 128, 1, NORMAL(0.5f));
                ADD(ROLE_VECTOR, il, "attn_compressor_norm.weight", 1, D, 1, 1, NORM_WEIGHT);
            }
            if (deepseek4_ratio(c, il) == 4) { /* the KV compressor and the lightning indexer */
                int64_t hi = DEEPSEEK4_INDEXER_HEADS, di = DEEPSEEK4_INDEXER_DIM;
                ADD(ROLE_MATRIX, il, "attn_compressor_kv.weight", 2, E, 2 * D, 1, NORMAL(s_embd));
                ADD(ROLE_MATRIX, il, "attn_compressor_gate.weight", 2, E, 2 * D, 1, NORMAL(s_embd));
                ADD(ROLE_VECTOR, il, "attn_compressor_ape.weight", 2, 2 * D, 4, 1, NORMAL(0.5f));
                ADD(ROLE_VECTOR, il, "attn_compressor_norm.weight", 1, D, 1, 1, NORM_WEIGHT);
                ADD(ROLE_MATRIX, il, "indexer.proj.weight", 2, E, hi, 1, NORMAL(s_embd));
                ADD(ROLE_MATRIX, il, "indexer.attn_q_b.weight", 2, q_lora, hi * di, 1,
                    NORMAL(inverse_sqrt(c->q_lora_rank)));
                ADD(ROLE_MATRIX, il, "indexer_compressor_kv.weight", 2, E, 2 * di, 1, NORMAL(s_embd));
                ADD(ROLE_MATRIX, il, "indexer_compressor_gate.weight", 2, E, 2 * di, 1, NORMAL(s_embd));
                ADD(ROLE_VECTOR, il, "indexer_compressor_ape.weight", 2, 2 * di, 4, 1, NORMAL(0.5f));
                ADD(ROLE_VECTOR, il, "indexer_compressor_norm.weight", 1, di, 1, 1, NORM_WEIGHT);
            }
            /* the mixes of the hc streams: about N(0, 1) each from the normalized streams */
            const char *mixes[2] = {"attn", "ffn"};
            for (int i = 0; i < 2; i++) {
                char name[48];
                snprintf(name, sizeof name, "hc_%s_fn.weight", mixes[i]);
                ADD(ROLE_ROUTER, il, name, 2, hc * E, mix, 1, NORMAL(inverse_sqrt((uint32_t)(hc * E))));
                snprintf(name, sizeof name, "hc_%s_base.weight", mixes[i]);
                ADD(ROLE_VECTOR, il, name, 1, mix, 1, 1, NORMAL(0.5f));
                snprintf(name, sizeof name, "hc_%s_scale.weight", mixes[i]);
                ADD(ROLE_VECTOR, il, name, 1, 3, 1, 1, HC_SCALE);
            }
            ADD(ROLE_VECTOR, il, "ffn_norm.weight", 1, E, 1, 1, NORM_WEIGHT);
            ADD(ROLE_ROUTER, il, "ffn_gate_inp.weight", 2, E, X, 1, NORMAL(ROUTER_SPREAD * s_embd));
            if (il < c->hash_layers) /* each token id's experts */
                ADD(ROLE_TABLE, il, "ffn_gate_tid2eid.weight", 2, c->n_expert_used, V, 1, EXPERT_IDS(X));
            else
                ADD(ROLE_VECTOR, il, "exp_probs_b.bias", 1, X, 1, 1, BIAS);
            ADD(ROLE_EXPERT, il, "ffn_gate_exps.weight", 3, E, F, X, NORMAL(s_embd));
            ADD(ROLE_EXPERT, il, "ffn_up_exps.weight", 3, E, F, X, NORMAL(s_embd));
            ADD(ROLE_EXPERT_DOWN, il, "ffn_down_exps.weight", 3, F, E, X, NORMAL(inverse_sqrt(c->n_ff_expert)));
            ADD(ROLE_MATRIX, il, "ffn_gate_shexp.weight", 2, E, shared, 1, NORMAL(s_embd));
            ADD(ROLE_MATRIX, il, "ffn_up_shexp.weight", 2, E, shared, 1, NORMAL(s_embd));
            ADD(ROLE_FFN_DOWN, il, "ffn_down_shexp.weight", 2, shared, E, 1, NORMAL(inverse_sqrt((uint32_t)shared)));
            continue;
        }
        if (c->arch == MKMODEL_DEEPSEEK2) {
            /* multi-head latent attention (architectures.md 9.2); the latent is
             * RMS-normalized, so the matrices reading it are drawn at 1/sqrt(kv_lora) */
            int64_t r = c->n_rot, nope = c->head_dim - r, vd = c->v_head_dim, H = c->n_head;
            int64_t q_lora = c->q_lora_rank, kv_lora = c->kv_lora_rank, shared = F * c->n_expert_shared;
            float s_latent = inverse_sqrt(c->kv_lora_rank);
            ADD(ROLE_VECTOR, il, "attn_norm.weight", 1, E, 1, 1, NORM_WEIGHT);
            if (q_lora > 0) {
                ADD(ROLE_MATRIX, il, "attn_q_a.weight", 2, E, q_lora, 1, NORMAL(s_embd));
                ADD(ROLE_VECTOR, il, "attn_q_a_norm.weight", 1, q_lora, 1, 1, NORM_WEIGHT);
                ADD(ROLE_MATRIX, il, "attn_q_b.weight", 2, q_lora, Q, 1, NORMAL(inverse_sqrt(c->q_lora_rank)));
            } else {
                ADD(ROLE_MATRIX, il, "attn_q.weight", 2, E, Q, 1, NORMAL(s_embd));
            }
            ADD(ROLE_MATRIX, il, "attn_kv_a_mqa.weight", 2, E, kv_lora + r, 1, NORMAL(s_embd));
            ADD(ROLE_VECTOR, il, "attn_kv_a_norm.weight", 1, kv_lora, 1, 1, NORM_WEIGHT);
            if (c->fused_kv_b) {
                ADD(ROLE_MATRIX, il, "attn_kv_b.weight", 2, kv_lora, H * (nope + vd), 1, NORMAL(s_latent));
            } else {
                ADD(ROLE_MATRIX, il, "attn_k_b.weight", 3, nope, kv_lora, H, NORMAL(s_latent));
                ADD(ROLE_MATRIX, il, "attn_v_b.weight", 3, kv_lora, vd, H, NORMAL(s_latent));
            }
            ADD(ROLE_MATRIX, il, "attn_output.weight", 2, H * vd, E, 1, NORMAL(inverse_sqrt((uint32_t)(H * vd))));
            ADD(ROLE_VECTOR, il, "ffn_norm.weight", 1, E, 1, 1, NORM_WEIGHT);
            if (il < c->n_leading_dense) {
                ADD(ROLE_MATRIX, il, "ffn_gate.weight", 2, E, c->n_ff, 1, NORMAL(s_embd));
                ADD(ROLE_MATRIX, il, "ffn_up.weight", 2, E, c->n_ff, 1, NORMAL(s_embd));
                ADD(ROLE_FFN_DOWN, il, "ffn_down.weight", 2, c->n_ff, E, 1, NORMAL(inverse_sqrt(c->n_ff)));
                continue;
            }
            ADD(ROLE_ROUTER, il, "ffn_gate_inp.weight", 2, E, X, 1, NORMAL(ROUTER_SPREAD * s_embd));
            if (c->sigmoid_routing)
                ADD(ROLE_VECTOR, il, "exp_probs_b.bias", 1, X, 1, 1, BIAS);
            ADD(ROLE_EXPERT, il, "ffn_gate_exps.weight", 3, E, F, X, NORMAL(s_embd));
            ADD(ROLE_EXPERT, il, "ffn_up_exps.weight", 3, E, F, X, NORMAL(s_embd));
            ADD(ROLE_EXPERT_DOWN, il, "ffn_down_exps.weight", 3, F, E, X, NORMAL(inverse_sqrt(c->n_ff_expert)));
            ADD(ROLE_MATRIX, il, "ffn_gate_shexp.weight", 2, E, shared, 1, NORMAL(s_embd));
            ADD(ROLE_MATRIX, il, "ffn_up_shexp.weight", 2, E, shared, 1, NORMAL(s_embd));
            ADD(ROLE_FFN_DOWN, il, "ffn_down_shexp.weight", 2, shared, E, 1, NORMAL(inverse_sqrt((uint32_t)shared)));
            if (il >= c->n_layer) {
                /* the MTP block's own tensors, as DeepSeek-V3's layer 61
                 * carries them (embed_tokens, enorm, hnorm, eh_proj,
                 * shared_head.norm, shared_head.head) and a conversion
                 * names them; the embedding and output matrix drawn apart
                 * from the model's, so that using the wrong one shows */
                ADD(ROLE_MATRIX, il, "nextn.eh_proj.weight", 2, 2 * E, E, 1, NORMAL(inverse_sqrt(2 * c->n_embd)));
                ADD(ROLE_VECTOR, il, "nextn.enorm.weight", 1, E, 1, 1, NORM_WEIGHT);
                ADD(ROLE_VECTOR, il, "nextn.hnorm.weight", 1, E, 1, 1, NORM_WEIGHT);
                ADD(ROLE_VECTOR, il, "nextn.shared_head_norm.weight", 1, E, 1, 1, NORM_WEIGHT);
                ADD(ROLE_EMBED, il, "nextn.embed_tokens.weight", 2, E, V, 1, NORMAL(1.0f));
                ADD(ROLE_OUTPUT, il, "nextn.shared_head_head.weight", 2, E, V, 1, NORMAL(OUTPUT_SPREAD * s_embd));
            }
            continue;
        }
        ADD(ROLE_VECTOR, il, "attn_norm.weight", 1, E, 1, 1, NORM_WEIGHT);
        bool qkv_bias = c->arch == MKMODEL_GPT_OSS || c->arch == MKMODEL_QWEN2MOE;
        ADD(ROLE_MATRIX, il, "attn_q.weight", 2, E, Q, 1, NORMAL(s_embd));
        if (qkv_bias)
            ADD(ROLE_VECTOR, il, "attn_q.bias", 1, Q, 1, 1, BIAS);
        ADD(ROLE_MATRIX, il, "attn_k.weight", 2, E, KV, 1, NORMAL(s_embd));
        if (qkv_bias)
            ADD(ROLE_VECTOR, il, "attn_k.bias", 1, KV, 1, 1, BIAS);
        ADD(ROLE_ATTN_V, il, "attn_v.weight", 2, E, KV, 1, NORMAL(s_embd));
        if (qkv_bias)
            ADD(ROLE_VECTOR, il, "attn_v.bias", 1, KV, 1, 1, BIAS);
        if (c->arch == MKMODEL_QWEN3MOE) {
            ADD(ROLE_VECTOR, il, "attn_q_norm.weight", 1, c->head_dim, 1, 1, NORM_WEIGHT);
            ADD(ROLE_VECTOR, il, "attn_k_norm.weight", 1, c->head_dim, 1, 1, NORM_WEIGHT);
        }
        if (c->arch == MKMODEL_OLMOE) { /* over the whole projection, not per head */
            ADD(ROLE_VECTOR, il, "attn_q_norm.weight", 1, Q, 1, 1, NORM_WEIGHT);
            ADD(ROLE_VECTOR, il, "attn_k_norm.weight", 1, KV, 1, 1, NORM_WEIGHT);
        }
        ADD(ROLE_MATRIX, il, "attn_output.weight", 2, Q, E, 1, NORMAL(s_q));
        if (c->arch == MKMODEL_GPT_OSS) {
            ADD(ROLE_VECTOR, il, "attn_output.bias", 1, E, 1, 1, BIAS);
            ADD(ROLE_VECTOR, il, "attn_sinks.weight", 1, c->n_head, 1, 1, NORMAL(1.0f));
            ADD(ROLE_VECTOR, il, "post_attention_norm.weight", 1, E, 1, 1, NORM_WEIGHT);
        } else {
            ADD(ROLE_VECTOR, il, "ffn_norm.weight", 1, E, 1, 1, NORM_WEIGHT);
        }
        if (c->arch == MKMODEL_LLAMA && X == 0) {
            int64_t D = c->n_ff;
            ADD(ROLE_MATRIX, il, "ffn_gate.weight", 2, E, D, 1, NORMAL(s_embd));
            ADD(ROLE_MATRIX, il, "ffn_up.weight", 2, E, D, 1, NORMAL(s_embd));
            ADD(ROLE_FFN_DOWN, il, "ffn_down.weight", 2, D, E, 1, NORMAL(inverse_sqrt(c->n_ff)));
            continue;
        }
        ADD(ROLE_ROUTER, il, "ffn_gate_inp.weight", 2, E, X, 1, NORMAL(ROUTER_SPREAD * s_embd));
        if (c->arch == MKMODEL_GPT_OSS)
            ADD(ROLE_VECTOR, il, "ffn_gate_inp.bias", 1, X, 1, 1, BIAS);
        ADD(ROLE_EXPERT, il, "ffn_gate_exps.weight", 3, E, F, X, NORMAL(s_embd));
        if (c->arch == MKMODEL_GPT_OSS)
            ADD(ROLE_VECTOR, il, "ffn_gate_exps.bias", 2, F, X, 1, BIAS);
        ADD(ROLE_EXPERT, il, "ffn_up_exps.weight", 3, E, F, X, NORMAL(s_embd));
        if (c->arch == MKMODEL_GPT_OSS)
            ADD(ROLE_VECTOR, il, "ffn_up_exps.bias", 2, F, X, 1, BIAS);
        ADD(ROLE_EXPERT_DOWN, il, "ffn_down_exps.weight", 3, F, E, X,
            NORMAL(inverse_sqrt(c->n_ff_expert)));
        if (c->arch == MKMODEL_GPT_OSS)
            ADD(ROLE_VECTOR, il, "ffn_down_exps.bias", 2, E, X, 1, BIAS);
        if (c->arch == MKMODEL_QWEN2MOE) {
            ADD(ROLE_VECTOR, il, "ffn_gate_inp_shexp.weight", 1, E, 1, 1, NORMAL(s_embd));
            ADD(ROLE_MATRIX, il, "ffn_gate_shexp.weight", 2, E, c->n_ff_shared, 1, NORMAL(s_embd));
            ADD(ROLE_MATRIX, il, "ffn_up_shexp.weight", 2, E, c->n_ff_shared, 1, NORMAL(s_embd));
            ADD(ROLE_FFN_DOWN, il, "ffn_down_shexp.weight", 2, c->n_ff_shared, E, 1,
                NORMAL(inverse_sqrt(c->n_ff_shared)));
        }
    }
    /* lfm2moe's final norm keeps its historical name */
    ADD(ROLE_VECTOR, GLOBAL, c->arch == MKMODEL_LFM2MOE ? "token_embd_norm.weight" : "output_norm.weight", 1, E, 1,
        1, NORM_WEIGHT);
    if (c->arch != MKMODEL_GEMMA4) /* gemma4's head is tied to token_embd */
        ADD(ROLE_OUTPUT, GLOBAL, "output.weight", 2, E, V, 1, NORMAL(OUTPUT_SPREAD * s_embd));
    if (c->arch == MKMODEL_DEEPSEEK4) { /* the head's collapse of the streams */
        int64_t hc = c->hc_count;
        ADD(ROLE_ROUTER, GLOBAL, "output_hc_fn.weight", 2, hc * E, hc, 1, NORMAL(inverse_sqrt((uint32_t)(hc * E))));
        ADD(ROLE_VECTOR, GLOBAL, "output_hc_base.weight", 1, hc, 1, 1, NORMAL(0.5f));
        ADD(ROLE_VECTOR, GLOBAL, "output_hc_scale.weight", 1, 1, 1, 1, HC_SCALE);
    }
#undef ADD
    return 0;
}

/* ---- Metadata ---- */

static mkmodel_kv *new_kv(mkmodel_model *model, const char *prefix, const char *key,
                          enum gguf_value_type type)
{
    if (model->kv_count == model->kv_capacity) {
        uint32_t capacity = model->kv_capacity ? 2 * model->kv_capacity : 64;
        mkmodel_kv *kvs = realloc(model->kvs, capacity * sizeof *kvs);
        if (!kvs)
            return NULL;
        model->kvs = kvs;
        model->kv_capacity = capacity;
    }
    mkmodel_kv *kv = &model->kvs[model->kv_count++];
    memset(kv, 0, sizeof *kv);
    if (prefix)
        snprintf(kv->key, sizeof kv->key, "%s.%s", prefix, key);
    else
        snprintf(kv->key, sizeof kv->key, "%s", key);
    kv->type = type;
    return kv;
}

uint32_t mkmodel_file_type(const mkmodel_config *config)
{
    if (config->recipe == MKMODEL_RECIPE_Q4_K_M)
        return 15;
    if (config->recipe == MKMODEL_RECIPE_MXFP4_MOE)
        return 38;
    if (config->recipe == MKMODEL_RECIPE_EXPERTS) {
        /* the reference engine's "mostly" file types of these formats */
        switch (config->type) {
        case TYPE_IQ2_XXS:
            return 19;
        case TYPE_IQ2_XS:
            return 20;
        case TYPE_IQ3_XXS:
            return 23;
        case TYPE_IQ1_S:
            return 24;
        case TYPE_IQ3_S:
            return 26;
        case TYPE_IQ2_S:
            return 28;
        case TYPE_TQ1_0:
            return 36;
        case TYPE_TQ2_0:
            return 37;
        default:
            return 31; /* IQ1_M */
        }
    }
    switch (config->type) {
    case TYPE_F32:
        return 0;
    case TYPE_F16:
        return 1;
    case TYPE_BF16:
        return 32;
    case TYPE_Q8_0:
        return 7;
    case TYPE_Q4_K:
        return 14;
    case TYPE_Q5_K:
        return 16;
    case TYPE_Q6_K:
        return 18;
    default:
        return 38; /* MXFP4 */
    }
}

static int build_metadata(mkmodel_model *model, bmoe_error *err)
{
    const mkmodel_config *c = &model->config;
    const mkmodel_vocab *v = &model->vocab;
    const char *a = mkmodel_arch_name(c->arch);
    mkmodel_kv *kv;
#define KV(prefix, key, gtype, member, number)                        \
    do {                                                             \
        if (!(kv = new_kv(model, prefix, key, gtype)))               \
            return error_set(err, "out of memory for metadata"); \
        kv->value.member = (number);                                 \
    } while (0)
#define KV_STRING(prefix, key, text)                                 \
    do {                                                             \
        if (!(kv = new_kv(model, prefix, key, GGUF_TYPE_STRING)))    \
            return error_set(err, "out of memory for metadata"); \
        kv->string = (text);                                         \
    } while (0)
#define KV_U32(key, number) KV(a, key, GGUF_TYPE_UINT32, u32, (uint32_t)(number))
#define KV_F32(key, number) KV(a, key, GGUF_TYPE_FLOAT32, f32, (float)(number))
#define KV_ARRAY(key, element, n, values)                            \
    do {                                                             \
        if (!(kv = new_kv(model, a, key, GGUF_TYPE_ARRAY)))          \
            return error_set(err, "out of memory for metadata"); \
        kv->array_type = (element);                                  \
        kv->count = (n);                                             \
        kv->array = (values);                                        \
    } while (0)

    KV_STRING(NULL, "general.architecture", a);
    KV_STRING(NULL, "general.name", c->name);
    KV(NULL, "general.file_type", GGUF_TYPE_UINT32, u32, mkmodel_file_type(c));
    KV(NULL, "general.quantization_version", GGUF_TYPE_UINT32, u32, 2);

    KV_U32("block_count", c->n_layer + mtp_blocks(c));
    if (mtp_blocks(c) > 0)
        KV_U32("nextn_predict_layers", mtp_blocks(c));
    KV_U32("context_length", c->n_ctx);
    KV_U32("embedding_length", c->n_embd);
    /* Mixtral-style llama and olmoe files give the experts' width as
     * feed_forward_length and have no expert_feed_forward_length */
    bool ff_is_expert_width = (c->arch == MKMODEL_LLAMA && c->n_expert > 0) || c->arch == MKMODEL_OLMOE;
    if (ff_is_expert_width)
        KV_U32("feed_forward_length", c->n_ff_expert);
    else
        KV_U32("feed_forward_length", c->arch == MKMODEL_LLAMA || c->n_ff ? c->n_ff : c->n_ff_expert);
    if (c->n_expert > 0) {
        if (!ff_is_expert_width)
            KV_U32("expert_feed_forward_length", c->n_ff_expert);
        KV_U32("expert_count", c->n_expert);
        KV_U32("expert_used_count", c->n_expert_used);
    }
    if (c->arch == MKMODEL_QWEN2MOE)
        KV_U32("expert_shared_feed_forward_length", c->n_ff_shared);
    KV_U32("attention.head_count", c->n_head);
    if (c->arch == MKMODEL_LFM2MOE || c->arch == MKMODEL_GEMMA4) {
        /* per layer: 0 marks lfm2moe's convolution layers; gemma4's full layers have fewer */
        for (uint32_t il = 0; il < c->n_layer; il++) {
            bool attends = c->arch == MKMODEL_GEMMA4 || layer_attends(c, il);
            bool full = c->arch == MKMODEL_GEMMA4 && !layer_is_swa(c, il);
            model->layer_kv_heads[il] = (int32_t)(!attends ? 0 : full ? c->n_head_kv_full : c->n_head_kv);
        }
        KV_ARRAY("attention.head_count_kv", GGUF_TYPE_INT32, c->n_layer, model->layer_kv_heads);
    } else if (c->arch == MKMODEL_DEEPSEEK2) {
        /* the latent-cache files describe their cache: one KV head of the
         * latent and the rope key, whose values are the latent; older files
         * (attn_kv_b) their decompressed heads */
        bool latent = !c->fused_kv_b;
        KV_U32("attention.head_count_kv", latent ? 1 : c->n_head);
        KV_U32("attention.key_length", latent ? c->kv_lora_rank + c->n_rot : c->head_dim);
        KV_U32("attention.value_length", latent ? c->kv_lora_rank : c->v_head_dim);
        if (latent) {
            KV_U32("attention.key_length_mla", c->head_dim);
            KV_U32("attention.value_length_mla", c->v_head_dim);
        }
        /* the reference reads q_lora_rank on every layer count but the Lite ones */
        if (c->q_lora_rank > 0 || (c->n_layer != 26 && c->n_layer != 27))
            KV_U32("attention.q_lora_rank", c->q_lora_rank);
        KV_U32("attention.kv_lora_rank", c->kv_lora_rank);
        KV_U32("leading_dense_block_count", c->n_leading_dense);
        KV_U32("expert_shared_count", c->n_expert_shared);
        KV_U32("expert_gating_func", c->sigmoid_routing ? 2 : 1);
        KV(a, "expert_weights_norm", GGUF_TYPE_BOOL, b, c->expert_weights_norm);
        if (c->expert_weights_scale != 0.0f)
            KV_F32("expert_weights_scale", c->expert_weights_scale);
        KV_U32("expert_group_count", c->n_expert_group > 0 ? c->n_expert_group : 1);
        KV_U32("expert_group_used_count", c->n_expert_group > 0 ? c->n_expert_group_used : 1);
        KV_U32("rope.dimension_count", c->n_rot);
        if (c->yarn_factor > 0.0f) {
            KV_STRING(a, "rope.scaling.type", "yarn");
            KV_F32("rope.scaling.factor", c->yarn_factor);
            KV_U32("rope.scaling.original_context_length", c->yarn_original_ctx);
            KV_F32("rope.scaling.yarn_log_multiplier", c->yarn_log_multiplier);
        }
    } else {
        KV_U32("attention.head_count_kv", c->n_head_kv);
    }
    if (c->arch != MKMODEL_DEEPSEEK2) {
        KV_U32("attention.key_length", c->head_dim);
        KV_U32("attention.value_length", c->head_dim);
    }
    KV_F32("attention.layer_norm_rms_epsilon", c->rms_eps);
    KV_F32("rope.freq_base", c->rope_freq_base);
    if (c->arch == MKMODEL_QWEN35MOE) {
        uint32_t n_rot = c->n_rot ? c->n_rot : c->head_dim, pairs = n_rot / 2;
        /* Qwen3.5's [11, 11, 10, 0] of 32 pairs, scaled to the pairs rotated */
        model->rope_sections[0] = model->rope_sections[1] = (int32_t)((pairs * 11 + 16) / 32);
        model->rope_sections[2] = (int32_t)pairs - 2 * model->rope_sections[0];
        model->rope_sections[3] = 0;
        KV_U32("rope.dimension_count", n_rot);
        KV_ARRAY("rope.dimension_sections", GGUF_TYPE_INT32, 4, model->rope_sections);
        KV_U32("full_attention_interval", c->attention_interval);
        KV_U32("ssm.conv_kernel", c->conv_taps);
        KV_U32("ssm.state_size", c->ssm_dk);
        KV_U32("ssm.group_count", c->ssm_k_heads);
        KV_U32("ssm.time_step_rank", c->ssm_v_heads);
        KV_U32("ssm.inner_size", c->ssm_v_heads * c->ssm_dk);
        KV_U32("expert_shared_feed_forward_length", c->n_ff_shared);
    } else if (c->arch == MKMODEL_BAILINGMOE2 || c->arch == MKMODEL_GLM4MOE) {
        KV_U32("rope.dimension_count", c->n_rot ? c->n_rot : c->head_dim);
        KV_U32("leading_dense_block_count", c->n_leading_dense);
        KV_U32("expert_shared_count", 1);
        if (c->arch == MKMODEL_BAILINGMOE2)
            KV_U32("expert_shared_feed_forward_length", c->n_ff_shared);
        KV_U32("expert_gating_func", 2); /* sigmoid */
        KV(a, "expert_weights_norm", GGUF_TYPE_BOOL, b, true);
        if (c->expert_weights_scale != 0.0f)
            KV_F32("expert_weights_scale", c->expert_weights_scale);
        if (c->n_expert_group > 0) {
            KV_U32("expert_group_count", c->n_expert_group);
            KV_U32("expert_group_used_count", c->n_expert_group_used);
        }
    } else if (c->arch == MKMODEL_DEEPSEEK4) {
        KV_U32("rope.dimension_count", c->n_rot);
        KV_U32("attention.q_lora_rank", c->q_lora_rank);
        KV_U32("attention.sliding_window", c->sliding_window);
        KV_U32("attention.output_group_count", c->o_groups);
        KV_U32("attention.output_lora_rank", c->o_lora_rank);
        KV_F32("attention.compress_rope_freq_base", 160000.0f);
        /* the lightning indexer's keys (read by the reference whatever the ratios) */
        KV_U32("attention.indexer.head_count", DEEPSEEK4_INDEXER_HEADS);
        KV_U32("attention.indexer.key_length", DEEPSEEK4_INDEXER_DIM);
        KV_U32("attention.indexer.top_k", c->indexer_top_k > 0 ? c->indexer_top_k : DEEPSEEK4_INDEXER_TOP_K);
        for (uint32_t il = 0; il < c->n_layer; il++)
            model->compress_ratios[il] = deepseek4_ratio(c, il);
        KV_ARRAY("attention.compress_ratios", GGUF_TYPE_UINT32, c->n_layer, model->compress_ratios);
        KV_U32("hyper_connection.count", c->hc_count);
        KV_U32("hyper_connection.sinkhorn_iterations", c->sinkhorn_iterations);
        KV_F32("hyper_connection.epsilon", 1e-6f);
        KV_U32("hash_layer_count", c->hash_layers);
        KV_U32("expert_shared_count", c->n_expert_shared);
        KV_U32("expert_gating_func", 4); /* sqrt(softplus) */
        KV(a, "expert_weights_norm", GGUF_TYPE_BOOL, b, c->expert_weights_norm);
        KV_F32("expert_weights_scale", c->expert_weights_scale);
        KV_F32("swiglu_clamp_exp", c->swiglu_clamp);
        KV_F32("swiglu_clamp_shexp", c->swiglu_clamp_shared);
        if (c->yarn_factor > 0.0f) { /* the compressed layers' RoPE */
            KV_STRING(a, "rope.scaling.type", "yarn");
            KV_F32("rope.scaling.factor", c->yarn_factor);
            KV_U32("rope.scaling.original_context_length", c->yarn_original_ctx);
        }
    } else if (c->arch != MKMODEL_GPT_OSS && c->arch != MKMODEL_DEEPSEEK2) {
        KV_U32("rope.dimension_count", c->head_dim);
    }
    if (c->arch == MKMODEL_LFM2MOE) {
        KV_U32("shortconv.l_cache", c->conv_taps);
        KV_U32("leading_dense_block_count", c->n_leading_dense);
        KV_U32("expert_gating_func", 2); /* sigmoid */
    }
    if (c->arch == MKMODEL_GEMMA4) {
        KV_U32("attention.key_length_swa", c->head_dim_swa);
        KV_U32("attention.value_length_swa", c->head_dim_swa);
        KV_U32("rope.dimension_count_swa", c->head_dim_swa);
        KV_F32("rope.freq_base_swa", 10000.0f);
        KV_U32("attention.sliding_window", c->sliding_window);
        for (uint32_t il = 0; il < c->n_layer; il++)
            model->layer_swa[il] = layer_is_swa(c, il);
        KV_ARRAY("attention.sliding_window_pattern", GGUF_TYPE_BOOL, c->n_layer, model->layer_swa);
        KV_F32("final_logit_softcapping", 30.0f);
        /* written only when used, so the plain files stay as they were */
        if (c->shared_kv_layers > 0)
            KV_U32("attention.shared_kv_layers", c->shared_kv_layers);
        if (c->per_layer_input > 0)
            KV_U32("embedding_length_per_layer_input", c->per_layer_input);
    }
    if (c->arch == MKMODEL_GPT_OSS) {
        KV_U32("attention.sliding_window", c->sliding_window);
        if (c->sliding_window_pattern)
            KV_U32("attention.sliding_window_pattern", c->sliding_window_pattern);
        KV_STRING(a, "rope.scaling.type", "yarn");
        KV_F32("rope.scaling.factor", c->yarn_factor);
        KV_U32("rope.scaling.original_context_length", c->yarn_original_ctx);
    }
    if (c->arch == MKMODEL_LLAMA)
        KV_U32("vocab_size", c->n_vocab);

    KV_STRING(NULL, "tokenizer.ggml.model", v->model);
    KV_STRING(NULL, "tokenizer.ggml.pre", v->pre);
    if (!(kv = new_kv(model, NULL, "tokenizer.ggml.tokens", GGUF_TYPE_ARRAY)))
        return error_set(err, "out of memory for metadata");
    kv->array_type = GGUF_TYPE_STRING;
    kv->count = v->count;
    kv->strings = (const char *const *)v->tokens;
    if (!(kv = new_kv(model, NULL, "tokenizer.ggml.token_type", GGUF_TYPE_ARRAY)))
        return error_set(err, "out of memory for metadata");
    kv->array_type = GGUF_TYPE_INT32;
    kv->count = v->count;
    kv->array = v->types;
    if (!(kv = new_kv(model, NULL, "tokenizer.ggml.merges", GGUF_TYPE_ARRAY)))
        return error_set(err, "out of memory for metadata");
    kv->array_type = GGUF_TYPE_STRING;
    kv->count = v->merge_count;
    kv->strings = (const char *const *)v->merges;
    if (v->bos >= 0)
        KV(NULL, "tokenizer.ggml.bos_token_id", GGUF_TYPE_UINT32, u32, (uint32_t)v->bos);
    if (v->eos >= 0)
        KV(NULL, "tokenizer.ggml.eos_token_id", GGUF_TYPE_UINT32, u32, (uint32_t)v->eos);
    if (v->eot >= 0)
        KV(NULL, "tokenizer.ggml.eot_token_id", GGUF_TYPE_UINT32, u32, (uint32_t)v->eot);
    if (v->pad >= 0)
        KV(NULL, "tokenizer.ggml.padding_token_id", GGUF_TYPE_UINT32, u32, (uint32_t)v->pad);
    KV(NULL, "tokenizer.ggml.add_bos_token", GGUF_TYPE_BOOL, b, v->add_bos);
    KV(NULL, "tokenizer.ggml.add_eos_token", GGUF_TYPE_BOOL, b, false);
    if (v->chat_template)
        KV_STRING(NULL, "tokenizer.chat_template", v->chat_template);
#undef KV
#undef KV_STRING
#undef KV_U32
#undef KV_F32
#undef KV_ARRAY
    return 0;
}

int mkmodel_build(mkmodel_model *model, const mkmodel_config *config, bmoe_error *err)
{
    memset(model, 0, sizeof *model);
    model->config = *config;
    if (mkmodel_validate(config, err) != 0)
        return -1;
    if (mkmodel_vocab_build(&model->vocab, config, err) != 0 || build_tensors(model, err) != 0 ||
        build_metadata(model, err) != 0) {
        mkmodel_free(model);
        return -1;
    }
    return 0;
}

void mkmodel_free(mkmodel_model *model)
{
    mkmodel_vocab_free(&model->vocab);
    free(model->tensors);
    free(model->kvs);
    memset(model, 0, sizeof *model);
}

/* ---- Sizes, shards and the plan ---- */

uint64_t mkmodel_kv_bytes(const mkmodel_kv *kv)
{
    uint64_t bytes = 8 + strlen(kv->key) + 4;
    if (kv->type == GGUF_TYPE_STRING)
        return bytes + 8 + strlen(kv->string);
    if (kv->type != GGUF_TYPE_ARRAY)
        return bytes + gguf_scalar_size(kv->type);
    bytes += 4 + 8;
    if (kv->array_type != GGUF_TYPE_STRING)
        return bytes + kv->count * gguf_scalar_size(kv->array_type);
    for (uint64_t i = 0; i < kv->count; i++)
        bytes += 8 + strlen(kv->strings[i]);
    return bytes;
}

static uint64_t align_up(uint64_t x)
{
    return (x + MKMODEL_ALIGNMENT - 1) / MKMODEL_ALIGNMENT * MKMODEL_ALIGNMENT;
}

/* The three split keys every shard carries: split.no (u16), split.count (u16),
 * split.tensors.count (i32). */
static uint64_t split_keys_bytes(void)
{
    return (8 + strlen("split.no") + 4 + 2) + (8 + strlen("split.count") + 4 + 2) +
           (8 + strlen("split.tensors.count") + 4 + 4);
}

int mkmodel_assign_shards(mkmodel_model *model, uint64_t *sizes, bmoe_error *err)
{
    uint32_t n = model->config.n_split, count = model->tensor_count;
    if (count < n)
        return error_set(err, "--split %u exceeds the %u tensors of the model", n, count);
    uint64_t total = 0;
    for (uint32_t i = 0; i < count; i++)
        total += align_up(model->tensors[i].nbytes);
    /* Contiguous ranges of about total/n bytes; every shard gets a tensor. */
    uint64_t before = 0;
    uint32_t previous = 0;
    for (uint32_t i = 0; i < count; i++) {
        uint64_t wanted = (uint64_t)((double)before * n / (double)total);
        uint32_t shard = wanted > n - 1 ? n - 1 : (uint32_t)wanted;
        uint32_t lowest = previous;
        if (n > count - i && n - (count - i) > lowest)
            lowest = n - (count - i);
        uint32_t highest = i == 0 ? 0 : previous + 1;
        if (shard < lowest)
            shard = lowest;
        if (shard > highest)
            shard = highest;
        model->tensors[i].shard = shard;
        previous = shard;
        before += align_up(model->tensors[i].nbytes);
    }
    for (uint32_t s = 0; s < n; s++) {
        uint64_t header = 4 + 4 + 8 + 8;
        if (s == 0)
            for (uint32_t k = 0; k < model->kv_count; k++)
                header += mkmodel_kv_bytes(&model->kvs[k]);
        if (n > 1)
            header += split_keys_bytes();
        uint64_t data = 0;
        for (uint32_t i = 0; i < count; i++) {
            const mkmodel_tensor *t = &model->tensors[i];
            if (t->shard != s)
                continue;
            header += 8 + strlen(t->name) + 4 + 8ull * t->n_dims + 4 + 8;
            data += align_up(t->nbytes);
        }
        sizes[s] = align_up(header) + data;
    }
    return 0;
}

int mkmodel_shard_path(const char *output, uint32_t shard, uint32_t n_split, char *buffer,
                       size_t size, bmoe_error *err)
{
    int written;
    if (n_split <= 1) {
        written = snprintf(buffer, size, "%s", output);
    } else {
        size_t length = strlen(output);
        if (length > 5 && strcmp(output + length - 5, ".gguf") == 0)
            length -= 5;
        written = snprintf(buffer, size, "%.*s-%05u-of-%05u.gguf", (int)length, output, shard + 1,
                           n_split);
    }
    if (written < 0 || (size_t)written >= size)
        return error_set(err, "output name too long: %s", output);
    return 0;
}

void mkmodel_print_plan(const mkmodel_model *model, const uint64_t *shard_sizes, FILE *out)
{
    const mkmodel_config *c = &model->config;
    uint64_t data = 0, expert = 0, params = 0, file = 0;
    fprintf(out, "# bmoe-mkmodel plan: %s, %u layers, %u experts (%u used), vocab %u, seed %llu\n",
            mkmodel_arch_name(c->arch), c->n_layer, c->n_expert, c->n_expert ? c->n_expert_used : 0, c->n_vocab,
            (unsigned long long)c->seed);
    fprintf(out, "# tensor name type ne0 ne1 ne2 bytes shard\n");
    for (uint32_t i = 0; i < model->tensor_count; i++) {
        const mkmodel_tensor *t = &model->tensors[i];
        fprintf(out, "tensor %s %s %lld %lld %lld %llu %u\n", t->name, quant_format_of(t->type)->name,
                (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                (unsigned long long)t->nbytes, t->shard);
        data += t->nbytes;
        params += (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2]);
        if (strstr(t->name, "_exps.weight"))
            expert += t->nbytes;
    }
    for (uint32_t s = 0; s < c->n_split; s++) {
        fprintf(out, "shard %u bytes=%llu\n", s, (unsigned long long)shard_sizes[s]);
        file += shard_sizes[s];
    }
    fprintf(out,
            "total tensors=%u layers=%u experts=%u used=%u params=%llu data_bytes=%llu "
            "expert_bytes=%llu file_bytes=%llu (%.2f GiB, %.2f GB)\n",
            model->tensor_count, c->n_layer, c->n_expert, c->n_expert ? c->n_expert_used : 0,
            (unsigned long long)params, (unsigned long long)data, (unsigned long long)expert,
            (unsigned long long)file, (double)file / (1024.0 * 1024.0 * 1024.0), (double)file / 1e9);
}
