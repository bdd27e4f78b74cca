/* bmoe-mkmodel: shared declarations of the random-model generator. The tool
 * is split into the model description (config.c: shapes, presets, type
 * recipes, tensor table, metadata), the vocabulary (vocab.c), the weight
 * generator (fill.c: PRNG, random floats and random quant blocks) and the
 * file writer (write.c: shards through gguf_writer). main.c parses flags. */
#ifndef BMOE_TOOLS_MKMODEL_H
#define BMOE_TOOLS_MKMODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/error.h"
#include "gguf/gguf.h"

enum mkmodel_arch {
    MKMODEL_QWEN3MOE,
    MKMODEL_GPT_OSS,
    MKMODEL_LLAMA, /* dense, or Mixtral-style experts with --experts */
    MKMODEL_LFM2MOE,
    MKMODEL_GEMMA4,
    MKMODEL_QWEN35MOE,
    MKMODEL_QWEN2MOE,
    MKMODEL_OLMOE,
    MKMODEL_BAILINGMOE2,
    MKMODEL_GLM4MOE,
    MKMODEL_DEEPSEEK2,
    MKMODEL_DEEPSEEK4
};

/* A weight recipe: one plain type for every matrix, or a named mix. */
enum mkmodel_recipe {
    MKMODEL_RECIPE_PLAIN, /* every matrix in `type` */
    MKMODEL_RECIPE_Q4_K_M, /* Q4_K, Q6_K for attn_v/ffn_down on "more bits" layers and output */
    MKMODEL_RECIPE_MXFP4_MOE, /* experts MXFP4, other matrices Q8_0 (the public gpt-oss files) */
    MKMODEL_RECIPE_EXPERTS    /* experts in `type` (a grid i-quant or ternary), other matrices Q8_0 */
};

/* How tensor data is produced. */
enum mkmodel_fill {
    MKMODEL_FILL_QUANTIZE, /* random floats, quantized with the format's quantize_row */
    MKMODEL_FILL_BLOCKS    /* random valid quant blocks written directly (fast, full-size) */
};

typedef struct mkmodel_config {
    enum mkmodel_arch arch;
    uint32_t n_layer;
    uint32_t n_embd;
    uint32_t n_head;
    uint32_t n_head_kv;
    uint32_t head_dim;
    uint32_t n_expert;      /* MoE archs; llama: 0 dense, else Mixtral-style experts */
    uint32_t n_expert_used;
    uint32_t n_ff_expert;
    uint32_t n_ff;          /* dense llama: the FFN; MoE archs: feed_forward_length key (olmoe and
                               llama with experts write the expert width there instead) */
    uint32_t n_vocab;
    uint32_t n_ctx;
    uint32_t sliding_window;         /* gpt-oss */
    uint32_t sliding_window_pattern; /* gpt-oss; 0 = key not written (default 2) */
    float rope_freq_base;
    float rms_eps;
    float yarn_factor;          /* gpt-oss, deepseek2, deepseek4 (0: no YaRN keys) */
    uint32_t yarn_original_ctx; /* gpt-oss, deepseek2, deepseek4 */
    /* the hybrid architectures (see the presets) */
    uint32_t attention_interval; /* lfm2moe, qwen35moe: layer il attends iff (il + 1) % interval == 0 */
    uint32_t n_leading_dense;    /* lfm2moe, bailingmoe2, glm4moe, deepseek2: dense FFN layers before the MoE ones */
    uint32_t conv_taps;          /* lfm2moe shortconv.l_cache, qwen35moe ssm.conv_kernel */
    uint32_t head_dim_swa;       /* gemma4: sliding-window layers' head size (head_dim: full layers') */
    uint32_t n_head_kv_full;     /* gemma4: full layers' KV heads (n_head_kv: sliding-window layers') */
    uint32_t swa_period;         /* gemma4: swa_period - 1 sliding-window layers, then a full one */
    uint32_t shared_kv_layers;   /* gemma4: the last N layers attend over earlier layers' KV caches */
    uint32_t per_layer_input;    /* gemma4: per-layer embedding width Dp; 0: none */
    uint32_t n_rot;              /* qwen35moe, bailingmoe2, glm4moe: rotated dims (partial RoPE); 0: head_dim */
    uint32_t ssm_dk, ssm_k_heads, ssm_v_heads; /* qwen35moe Gated DeltaNet */
    uint32_t n_ff_shared;        /* qwen35moe, qwen2moe, bailingmoe2 shared expert (glm4moe's: n_ff_expert) */
    /* bailingmoe2, glm4moe: */
    uint32_t n_expert_group, n_expert_group_used; /* grouped routing; 0: keys not written */
    uint32_t n_nextn;            /* trailing multi-token-prediction blocks after n_layer (the first: --mtp's head;
                                  * also qwen35moe, deepseek2) */
    uint32_t qk_norm;            /* glm4moe: per-head q/k norms (bailingmoe2 always has them) */
    float expert_weights_scale;  /* bailingmoe2, glm4moe, deepseek2 (0: key not written) */
    /* deepseek2's multi-head latent attention: head_dim is each head's query
     * and key (qk_nope + n_rot), n_rot their rotated part */
    uint32_t q_lora_rank;        /* 0: attn_q directly (the Lite models) */
    uint32_t kv_lora_rank;
    uint32_t v_head_dim;         /* each head's value */
    bool fused_kv_b;             /* older files' attn_kv_b instead of attn_k_b and attn_v_b */
    uint32_t n_expert_shared;    /* deepseek2: shared experts, n_ff_expert wide each */
    bool sigmoid_routing;        /* deepseek2: expert_gating_func sigmoid with exp_probs_b (else softmax) */
    bool expert_weights_norm;    /* deepseek2 */
    float yarn_log_multiplier;   /* deepseek2: 0.1 * mscale_all_dim */
    /* deepseek4 (also q_lora_rank, n_rot, n_expert_shared, sliding_window,
     * expert_weights_scale; head_dim is the one KV head's, key and value) */
    uint32_t hc_count;           /* hyper-connection streams */
    uint32_t sinkhorn_iterations;
    uint32_t o_groups, o_lora_rank; /* grouped low-rank output projection */
    float swiglu_clamp, swiglu_clamp_shared; /* routed and shared experts' SwiGLU limits */
    uint32_t hash_layers;        /* the first layers route by a token-id table */
    uint32_t compressed_layers;  /* the first layers compress their KV cache by 4 (the others: 0) */
    uint32_t hca_layers;         /* the layers after those compress theirs by 128 */
    uint32_t indexer_top_k;      /* the lightning indexer's top-k (0: DEEPSEEK4_INDEXER_TOP_K) */
    uint32_t n_merges;          /* BPE merges wanted (fewer if the vocab or text lacks room) */
    enum mkmodel_recipe recipe;
    uint32_t type;        /* enum tensor_type of matrices (PLAIN), or ignored (Q4_K_M) */
    int32_t expert_type;  /* -1: recipe default */
    enum mkmodel_fill fill;
    uint64_t seed;
    uint32_t n_split;     /* 1 = one file */
    char name[64];        /* general.name */
} mkmodel_config;

/* How one tensor's values are drawn: offset + scale * noise, noise being an
 * approximately normal N(0,1) or a uniform [-1,1) variable. */
enum mkmodel_noise {
    MKMODEL_NOISE_NORMAL,
    MKMODEL_NOISE_UNIFORM,
    MKMODEL_NOISE_EXPERT_IDS /* an I32 table: each row distinct ids in [0, scale) (deepseek4's hash layers) */
};

typedef struct mkmodel_tensor {
    char name[64];
    uint32_t type;
    uint32_t n_dims;
    int64_t ne[GGUF_MAX_DIMS];
    uint64_t nbytes;
    uint32_t shard;
    enum mkmodel_noise noise;
    float offset;
    float scale;
} mkmodel_tensor;

/* One metadata record, kept by value so its serialized size can be computed
 * (for --plan) and replayed into a gguf_writer. Strings and arrays point at
 * storage that outlives the list (constants, the config or the vocabulary). */
typedef struct mkmodel_kv {
    char key[96];
    enum gguf_value_type type; /* GGUF_TYPE_ARRAY for arrays */
    enum gguf_value_type array_type;
    uint64_t count;            /* array elements */
    union {
        uint32_t u32;
        int32_t i32;
        uint16_t u16;
        float f32;
        bool b;
    } value;
    const char *string;          /* GGUF_TYPE_STRING */
    const void *array;           /* scalar array */
    const char *const *strings;  /* string array */
} mkmodel_kv;

typedef struct mkmodel_vocab {
    uint32_t count;
    char **tokens;     /* count NUL-terminated texts, owned */
    int32_t *types;    /* count token types */
    uint32_t merge_count;
    char **merges;     /* merge_count "left right" strings, owned */
    int32_t bos, eos, eot, pad; /* -1 = none */
    bool add_bos;
    const char *model;
    const char *pre;
    const char *chat_template; /* NULL: none */
} mkmodel_vocab;

typedef struct mkmodel_model {
    mkmodel_config config;
    /* storage of the per-layer metadata arrays */
    int32_t layer_kv_heads[512];
    uint8_t layer_swa[512];
    int32_t rope_sections[4];
    uint32_t compress_ratios[512]; /* deepseek4: per block */
    mkmodel_vocab vocab;
    mkmodel_tensor *tensors;
    uint32_t tensor_count;
    mkmodel_kv *kvs;
    uint32_t kv_count;
    uint32_t kv_capacity;
} mkmodel_model;

/* ---- config.c ---- */
/* Fills config with the defaults of a preset name; -1 if the name is unknown. */
int mkmodel_preset(const char *name, mkmodel_config *config, bmoe_error *err);
/* Writes the preset names, one per line with a description, to out. */
void mkmodel_list_presets(FILE *out);
const char *mkmodel_arch_name(enum mkmodel_arch arch);
int mkmodel_arch_from_name(const char *name); /* -1 if unknown */
/* Parses a --type value ("q4_k", "q4_k_m", "f32", ...) into recipe and type. */
int mkmodel_parse_type(const char *name, enum mkmodel_recipe *recipe, uint32_t *type,
                       bmoe_error *err);
/* Checks the shape for consistency (one line naming the offending flag). */
int mkmodel_validate(const mkmodel_config *config, bmoe_error *err);
/* The type the config's --type gives a tensor of this name (its role read
 * from the name; tied_output: token_embd is also the output head). */
uint32_t mkmodel_type_for_tensor(const mkmodel_config *config, const char *name, uint32_t n_dims, int64_t ne0,
                                 bool tied_output);
/* general.file_type of the config's --type (llama.cpp's LLAMA_FTYPE numbers). */
uint32_t mkmodel_file_type(const mkmodel_config *config);
/* Builds the tensor table, vocabulary and metadata of a model. */
int mkmodel_build(mkmodel_model *model, const mkmodel_config *config, bmoe_error *err);
void mkmodel_free(mkmodel_model *model);
/* Bytes a metadata record takes in a file. */
uint64_t mkmodel_kv_bytes(const mkmodel_kv *kv);
/* The shard file names: PREFIX-0000i-of-0000N.gguf from -o PREFIX[.gguf]
 * (or the name itself when not split). */
int mkmodel_shard_path(const char *output, uint32_t shard, uint32_t n_split, char *buffer,
                       size_t size, bmoe_error *err);
/* Assigns tensors to shards and returns each shard's predicted file size
 * (sizes[n_split]); -1 if there are fewer tensors than shards. */
int mkmodel_assign_shards(mkmodel_model *model, uint64_t *sizes, bmoe_error *err);
/* Prints the tensor table and totals (the --plan output). */
void mkmodel_print_plan(const mkmodel_model *model, const uint64_t *shard_sizes, FILE *out);

/* ---- vocab.c ---- */
int mkmodel_vocab_build(mkmodel_vocab *vocab, const mkmodel_config *config, bmoe_error *err);
void mkmodel_vocab_free(mkmodel_vocab *vocab);

/* ---- fill.c ---- */
typedef struct mkmodel_rng {
    uint64_t state[4];
} mkmodel_rng;

void mkmodel_rng_seed(mkmodel_rng *rng, uint64_t seed);
uint64_t mkmodel_rng_next(mkmodel_rng *rng);
/* The stream of one tensor: depends on the model seed and the tensor name
 * only, so the same seed gives the same values whatever the types or order. */
void mkmodel_rng_for_tensor(mkmodel_rng *rng, uint64_t seed, const char *name);

/* Produces a tensor's data piece by piece: fills buffer (capacity bytes,
 * at least one row) with the next whole rows and returns their byte count,
 * 0 at the end, or -1 with err. */
typedef struct mkmodel_filler {
    const mkmodel_tensor *tensor;
    enum mkmodel_fill fill;
    mkmodel_rng rng;
    int64_t row_elems;
    int64_t rows_total;
    int64_t rows_done;
    size_t row_bytes;
    float *scratch; /* row_elems floats (FILL_QUANTIZE) */
} mkmodel_filler;

int mkmodel_filler_init(mkmodel_filler *filler, const mkmodel_tensor *tensor, enum mkmodel_fill fill,
                        uint64_t seed, bmoe_error *err);
int64_t mkmodel_filler_next(mkmodel_filler *filler, void *buffer, size_t capacity, bmoe_error *err);
void mkmodel_filler_destroy(mkmodel_filler *filler);

/* ---- write.c ---- */
/* Writes every shard; removes what it wrote on failure. */
int mkmodel_write(const mkmodel_model *model, const char *output, bool quiet, bmoe_error *err);

/* ---- quantize.c ---- */
/* --quantize: rewrites the GGUF at input (F32 or any decodable type) into
 * output with config's --type recipe, the metadata copied (file_type set). */
int mkmodel_quantize(const char *input, const char *output, const mkmodel_config *config, bool quiet,
                     bmoe_error *err);

/* ---- templates.c ---- */
extern const char mkmodel_template_qwen3[];
extern const char mkmodel_template_gpt_oss[];
extern const char mkmodel_template_llama3[];

#endif
