/* Dot-product kernels per instruction set, behind one dispatch decided once at
 * start-up from the CPU features found at run time. The scalar set is the
 * definition (built from quant_format.vec_dot); AVX2, AVX-512 and NEON sets
 * are optimisations tested against it. A set may leave a type NULL, in which
 * case the dispatch falls back to the scalar kernel for that type.
 *
 * Batch invariance: a kernel computes each output row with a fixed
 * accumulation order that does not depend on n_rows or on which rows are
 * grouped together, so a row's result is the same whether it is computed
 * alone, in a group of rows, or on another thread. */
#ifndef BMOE_KERNELS_KERNELS_H
#define BMOE_KERNELS_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "../quant/quant.h"

/* out[r] = dot(row r of weights, activation) for r in [0, n_rows).
 * Rows are row_bytes apart; each row holds n elements of the weight type; the
 * activation holds n elements in the weight type's activation format. */
typedef void (*dot_rows_fn)(int64_t n, const void *weights, size_t row_bytes, int64_t n_rows,
                            const void *activation, float *out);

/* A tile of a batch product: out[t * out_stride + r] = dot(row r of weights,
 * activation row t) for r < n_rows, t < n_tokens; activation rows are
 * activation_stride bytes apart. Each element must be bit-identical to what
 * the same set's dot_rows gives for that row and activation, so that a token's
 * result does not depend on the batch it is computed in; a tile kernel only
 * shares the unpacking of weight blocks across tokens. */
typedef void (*dot_tile_fn)(int64_t n, const void *weights, size_t row_bytes, int64_t n_rows,
                            const void *activations, size_t activation_stride, int64_t n_tokens,
                            float *out, int64_t out_stride);

/* y[i] += a[r] * x_r[i] for r = 0 .. n_rows - 1 in that order and i < n; row
 * r of x starts r * x_stride bytes after x and holds values of the kernel's
 * type (F32 or F16): the value sum of attention over a KV cache. y stays in
 * registers across the rows (one call per head, not one per position), and
 * each element still takes its rows' multiply-adds one after the other, so the
 * result equals n_rows single-row calls. */
typedef void (*axpy_fn)(int64_t n, int64_t n_rows, const float *a, const void *x, size_t x_stride, float *y);

/* ---- Elementwise float kernels ------------------------------------------
 * Each is bit-identical in every set to the scalar definition in
 * elementwise.c (the same float operations in the same order, lane by lane),
 * so an op's result does not depend on the set that computes it. */

/* y[i] = e^x[i] to within one ulp, 0 where that is below the smallest normal
 * float (elementwise_common.h); y may alias x. */
typedef void (*exponential_fn)(float *y, const float *x, int64_t n);

/* out[i] = (gate[i] / (1 + e^-gate[i])) * up[i]; out may alias gate or up. */
typedef void (*silu_glu_fn)(float *out, const float *gate, const float *up, int64_t n);

/* gpt-oss clamped SwiGLU: g = min(gate, limit), u = clamp(up, -limit, limit),
 * out = (g / (1 + e^(alpha * -g))) * (u + 1). */
typedef void (*swiglu_oai_fn)(float *out, const float *gate, const float *up, int64_t n, float alpha,
                              float limit);

/* In-place softmax: exps in float, their sum in double over 16 interleaved
 * lanes (element i in lane i mod 16) combined in a fixed tree. */
typedef void (*softmax_fn)(float *x, int64_t n);

/* out = (x * (1 / sqrt(mean(x^2) + eps))) * weight (weight may be NULL); the
 * squares in float, their sum in double over the same 16 lanes as softmax;
 * out may alias x. */
typedef void (*rmsnorm_fn)(float *out, const float *x, const float *weight, int64_t n, float eps);

/* ---- Attention ------------------------------------------------------------ */

/* Queries one attend call takes: the accumulators of that many query heads
 * stay in registers while each value row is loaded once for all of them. */
#define ATTEND_MAX_QUERIES 8

/* Keys per tile of the tiled kernels. Tiles start at multiples of this
 * absolute position, so a query's tiles depend only on its own key range. */
#define ATTEND_TILE_KEYS 32

/* The KV cache format attend reads, f16 or f32. Per KV head, the keys are
 * tiles of ATTEND_TILE_KEYS positions, each stored dimension by dimension
 * (dimension d of the tile's keys side by side), so that one vector load
 * holds one dimension of many keys and a tile's scores need neither a
 * transpose nor a reduction; a head's tiles follow each other. The values
 * are one row of head_dim_v per position. */
static inline int64_t attend_key_head_elements(int64_t n_ctx, int head_dim_k)
{
    return (n_ctx + ATTEND_TILE_KEYS - 1) / ATTEND_TILE_KEYS * ATTEND_TILE_KEYS * head_dim_k;
}

/* Where dimension dim of the key at position sits in its head's keys. */
static inline int64_t attend_key_index(int64_t position, int64_t dim, int head_dim_k)
{
    return position / ATTEND_TILE_KEYS * ATTEND_TILE_KEYS * head_dim_k + dim * ATTEND_TILE_KEYS +
           position % ATTEND_TILE_KEYS;
}

/* One query head of an attend job: its row, where its output goes, and the
 * positions it sees. */
typedef struct attend_query {
    const float *q;        /* head_dim_k values; rounded to f16 by the kernel for an f16 cache */
    float *out;            /* head_dim_v values */
    int32_t first, last;   /* visible positions, first <= last */
    float sink;            /* extra logit (probability mass dropped), when the job has sinks */
} attend_query;

/* Softmax attention of up to ATTEND_MAX_QUERIES query heads that share one KV
 * head: the heads of a GQA group, of one token or of a few consecutive ones. */
typedef struct attend_job {
    int n_queries;
    int head_dim_k, head_dim_v;
    attend_query queries[ATTEND_MAX_QUERIES];
    const void *keys;      /* this KV head's keys (tile 0), in the format above */
    const void *values;    /* its value at index 0; value_stride bytes per index */
    size_t value_stride;
    /* 0: position p at index p; else the cache holds ring positions (a
     * multiple of ATTEND_TILE_KEYS, a sliding window's), p at index p % ring */
    int32_t ring;
    float scale;           /* multiplies q.k */
    int sinks;             /* the queries' sink logits count */
    float *scratch;        /* attend_scratch_floats() floats */
} attend_job;

/* Runs one job on an F32 or F16 cache. Reads cache rows only between the
 * smallest first and the largest last of its queries. Batch invariance: a
 * query's result depends only on its own row, sink and keys first..last,
 * never on the other queries of the job or how many there are; the scalar
 * set computes the two-pass softmax in position order, the SIMD sets an
 * online softmax over ATTEND_TILE_KEYS-aligned tiles in position order. */
typedef void (*attend_fn)(const attend_job *job);

/* The index at which a job's cache keeps position. A ring's tiles do not
 * wrap (ring is a multiple of ATTEND_TILE_KEYS), so a tile's positions sit
 * at consecutive indices from its first one's. */
static inline int32_t attend_index(const attend_job *job, int32_t position)
{
    return job->ring ? position % job->ring : position;
}

/* Floats of scratch any set's attend needs for caches of up to n_ctx
 * positions and keys of head_dim_k. */
int64_t attend_scratch_floats(int64_t n_ctx, int head_dim_k);

typedef struct kernel_set {
    const char *name;                 /* "scalar", "avx2", "avx512", "neon" */
    dot_rows_fn dot_rows[TYPE_COUNT]; /* NULL: use the scalar kernel */
    dot_tile_fn dot_tile[TYPE_COUNT]; /* NULL: dot_rows once per token */
    /* One token over many rows (decode), bit-identical to dot_rows but
     * reading the rows in the order that streams best from memory; NULL:
     * dot_rows. */
    dot_rows_fn dot_decode[TYPE_COUNT];
    axpy_fn axpy[TYPE_COUNT];         /* NULL: use the scalar kernel (F32, F16) */
    /* Activation quantizers (Q8_K, F16, ...), byte-identical to the quant
     * table's quantize_row for the type; NULL: use that reference. */
    quantize_row_fn quantize_row[TYPE_COUNT];
    attend_fn attend[TYPE_COUNT];     /* F32 and F16 caches; NULL: use the scalar kernel */
    /* NULL: use the scalar kernel (same bits) */
    exponential_fn exponential;
    silu_glu_fn silu_glu;
    swiglu_oai_fn swiglu_oai;
    softmax_fn softmax;
    rmsnorm_fn rmsnorm;
} kernel_set;

/* CPU features found at run time. */
typedef struct cpu_features {
    int avx2, fma, f16c, avx512f, avx512bw, avx512vl, avx512vnni, avx512bf16, avxvnni;
    int neon, neon_dotprod;
} cpu_features;

void cpu_features_detect(cpu_features *features);

/* Kernel sets compiled into this binary; NULL when the ISA was not compiled
 * in (e.g. avx2 on aarch64). */
const kernel_set *kernels_scalar(void);
const kernel_set *kernels_avx2(void);
const kernel_set *kernels_avx512(void);
const kernel_set *kernels_neon(void);

/* The best set this CPU runs. BMOE_ISA=scalar|avx2|avx512|neon in the
 * environment forces a set (for tests and benchmarks); an unavailable choice
 * falls back to the best available one. Decided once, cached. */
const kernel_set *kernels_best(void);

/* The kernel for a type from a set, falling back to scalar; NULL when the
 * type has no dot product at all. */
dot_rows_fn kernels_dot_rows(const kernel_set *set, uint32_t type);

/* The set's decode kernel for a type, falling back to kernels_dot_rows. */
dot_rows_fn kernels_dot_decode(const kernel_set *set, uint32_t type);

/* The set's tile kernel for a type, or NULL (then run dot_rows per token:
 * the results are the same). */
dot_tile_fn kernels_dot_tile(const kernel_set *set, uint32_t type);

/* The axpy kernel for F32 or F16 from a set, falling back to scalar; NULL
 * for other types. */
axpy_fn kernels_axpy(const kernel_set *set, uint32_t type);

/* The quantizer of a type from a set, falling back to the quant table's
 * reference; NULL when the type has none. */
quantize_row_fn kernels_quantize_row(const kernel_set *set, uint32_t type);

/* The attention kernel for an F32 or F16 cache from a set, falling back to
 * scalar; NULL for other types. */
attend_fn kernels_attend(const kernel_set *set, uint32_t type);

/* The elementwise kernels of a set (NULL: the scalar set), falling back to
 * scalar ones. */
exponential_fn kernels_exponential(const kernel_set *set);
silu_glu_fn kernels_silu_glu(const kernel_set *set);
swiglu_oai_fn kernels_swiglu_oai(const kernel_set *set);
softmax_fn kernels_softmax(const kernel_set *set);
rmsnorm_fn kernels_rmsnorm(const kernel_set *set);

#endif
