/* The scalar kernel set (each row one call of the quant table's reference
 * vec_dot) and the run-time choice of the best set. The choice is made once
 * per process and cached; BMOE_ISA overrides it for tests and benchmarks. */
#include "kernels_dispatch.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fp16.h"

/* Row loop over the scalar reference; one wrapper per type id because the
 * kernel signature carries no type. */
static inline void scalar_dot_rows(uint32_t type, int64_t n, const void *weights, size_t row_bytes,
                                   int64_t n_rows, const void *activation, float *out)
{
    vec_dot_fn vec_dot = quant_format_of(type)->vec_dot;
    const uint8_t *row = weights;
    for (int64_t r = 0; r < n_rows; r++, row += row_bytes)
        out[r] = vec_dot(n, row, activation);
}

#define SCALAR_WRAPPER(id)                                                                  \
    static void scalar_dot_rows_##id(int64_t n, const void *weights, size_t row_bytes,      \
                                     int64_t n_rows, const void *activation, float *out)    \
    {                                                                                       \
        scalar_dot_rows(id, n, weights, row_bytes, n_rows, activation, out);                \
    }

SCALAR_WRAPPER(0) SCALAR_WRAPPER(1) SCALAR_WRAPPER(2) SCALAR_WRAPPER(3) SCALAR_WRAPPER(4)
SCALAR_WRAPPER(5) SCALAR_WRAPPER(6) SCALAR_WRAPPER(7) SCALAR_WRAPPER(8) SCALAR_WRAPPER(9)
SCALAR_WRAPPER(10) SCALAR_WRAPPER(11) SCALAR_WRAPPER(12) SCALAR_WRAPPER(13) SCALAR_WRAPPER(14)
SCALAR_WRAPPER(15) SCALAR_WRAPPER(16) SCALAR_WRAPPER(17) SCALAR_WRAPPER(18) SCALAR_WRAPPER(19)
SCALAR_WRAPPER(20) SCALAR_WRAPPER(21) SCALAR_WRAPPER(22) SCALAR_WRAPPER(23) SCALAR_WRAPPER(24)
SCALAR_WRAPPER(25) SCALAR_WRAPPER(26) SCALAR_WRAPPER(27) SCALAR_WRAPPER(28) SCALAR_WRAPPER(29)
SCALAR_WRAPPER(30) SCALAR_WRAPPER(31) SCALAR_WRAPPER(32) SCALAR_WRAPPER(33) SCALAR_WRAPPER(34)
SCALAR_WRAPPER(35) SCALAR_WRAPPER(36) SCALAR_WRAPPER(37) SCALAR_WRAPPER(38) SCALAR_WRAPPER(39)
SCALAR_WRAPPER(40) SCALAR_WRAPPER(41) SCALAR_WRAPPER(42)

_Static_assert(TYPE_COUNT == 43, "one scalar wrapper per type id");

static const dot_rows_fn scalar_wrappers[TYPE_COUNT] = {
    scalar_dot_rows_0,  scalar_dot_rows_1,  scalar_dot_rows_2,  scalar_dot_rows_3,
    scalar_dot_rows_4,  scalar_dot_rows_5,  scalar_dot_rows_6,  scalar_dot_rows_7,
    scalar_dot_rows_8,  scalar_dot_rows_9,  scalar_dot_rows_10, scalar_dot_rows_11,
    scalar_dot_rows_12, scalar_dot_rows_13, scalar_dot_rows_14, scalar_dot_rows_15,
    scalar_dot_rows_16, scalar_dot_rows_17, scalar_dot_rows_18, scalar_dot_rows_19,
    scalar_dot_rows_20, scalar_dot_rows_21, scalar_dot_rows_22, scalar_dot_rows_23,
    scalar_dot_rows_24, scalar_dot_rows_25, scalar_dot_rows_26, scalar_dot_rows_27,
    scalar_dot_rows_28, scalar_dot_rows_29, scalar_dot_rows_30, scalar_dot_rows_31,
    scalar_dot_rows_32, scalar_dot_rows_33, scalar_dot_rows_34, scalar_dot_rows_35,
    scalar_dot_rows_36, scalar_dot_rows_37, scalar_dot_rows_38, scalar_dot_rows_39,
    scalar_dot_rows_40, scalar_dot_rows_41, scalar_dot_rows_42,
};

/* Filled once from the quant table: a type gets a wrapper only if the table
 * gives it a vec_dot, so a NULL entry always means "no dot product". */
static kernel_set scalar_set = {.name = "scalar"};

static void scalar_axpy_f32(int64_t n, int64_t n_rows, const float *a, const void *x, size_t x_stride, float *y)
{
    const uint8_t *row = x;
    for (int64_t r = 0; r < n_rows; r++, row += x_stride) {
        const float *values = (const float *)row;
        for (int64_t i = 0; i < n; i++)
            y[i] += a[r] * values[i];
    }
}

static void scalar_axpy_f16(int64_t n, int64_t n_rows, const float *a, const void *x, size_t x_stride, float *y)
{
    const uint8_t *row = x;
    for (int64_t r = 0; r < n_rows; r++, row += x_stride) {
        const uint16_t *values = (const uint16_t *)row;
        for (int64_t i = 0; i < n; i++)
            y[i] += a[r] * fp16_to_fp32(values[i]);
    }
}
static pthread_once_t scalar_once = PTHREAD_ONCE_INIT;

static void scalar_set_init(void)
{
    for (uint32_t type = 0; type < TYPE_COUNT; type++) {
        const quant_format *format = quant_format_of(type);
        if (format && format->vec_dot)
            scalar_set.dot_rows[type] = scalar_wrappers[type];
    }
    scalar_set.axpy[TYPE_F32] = scalar_axpy_f32;
    scalar_set.axpy[TYPE_F16] = scalar_axpy_f16;
    scalar_set.attend[TYPE_F32] = scalar_attend_f32;
    scalar_set.attend[TYPE_F16] = scalar_attend_f16;
    scalar_set.exponential = scalar_exponential;
    scalar_set.silu_glu = scalar_silu_glu;
    scalar_set.swiglu_oai = scalar_swiglu_oai;
    scalar_set.softmax = scalar_softmax;
    scalar_set.rmsnorm = scalar_rmsnorm;
}

const kernel_set *kernels_scalar(void)
{
    pthread_once(&scalar_once, scalar_set_init);
    return &scalar_set;
}

/* Sets for other architectures exist as functions that say "not compiled". */
#if !defined(__x86_64__)
const kernel_set *kernels_avx2(void) { return NULL; }
const kernel_set *kernels_avx512(void) { return NULL; }
#endif
#if !defined(__aarch64__)
const kernel_set *kernels_neon(void) { return NULL; }
#endif

int kernels_set_supported(const kernel_set *set, const cpu_features *features)
{
    if (!set)
        return 0;
    if (set == kernels_scalar())
        return 1;
    if (set == kernels_avx2())
        return features->avx2 && features->fma && features->f16c;
    if (set == kernels_avx512())
        return features->avx2 && features->fma && features->f16c && features->avx512f &&
               features->avx512bw && features->avx512vl && features->avx512vnni;
    if (set == kernels_neon())
        return features->neon && features->neon_dotprod;
    return 0;
}

const kernel_set *kernels_select(const char *isa, const cpu_features *features)
{
    /* Best first. */
    const kernel_set *candidates[] = {kernels_avx512(), kernels_avx2(), kernels_neon(),
                                      kernels_scalar()};
    int count = (int)(sizeof candidates / sizeof candidates[0]);
    if (isa && *isa) {
        for (int i = 0; i < count; i++) {
            if (candidates[i] && strcmp(candidates[i]->name, isa) == 0 &&
                kernels_set_supported(candidates[i], features))
                return candidates[i];
        }
    }
    for (int i = 0; i < count; i++) {
        if (kernels_set_supported(candidates[i], features))
            return candidates[i];
    }
    return kernels_scalar();
}

static const kernel_set *best_set;
static pthread_once_t best_once = PTHREAD_ONCE_INIT;

static void best_set_init(void)
{
    cpu_features features;
    cpu_features_detect(&features);
    const char *isa = getenv("BMOE_ISA");
    best_set = kernels_select(isa, &features);
    if (isa && *isa && strcmp(isa, best_set->name) != 0)
        fprintf(stderr, "bmoe: BMOE_ISA=%s is not available on this CPU or build; using %s\n", isa,
                best_set->name);
}

const kernel_set *kernels_best(void)
{
    pthread_once(&best_once, best_set_init);
    return best_set;
}

dot_rows_fn kernels_dot_rows(const kernel_set *set, uint32_t type)
{
    if (type >= TYPE_COUNT)
        return NULL;
    if (set && set->dot_rows[type])
        return set->dot_rows[type];
    return kernels_scalar()->dot_rows[type];
}

dot_rows_fn kernels_dot_decode(const kernel_set *set, uint32_t type)
{
    if (type < TYPE_COUNT && set && set->dot_decode[type])
        return set->dot_decode[type];
    return kernels_dot_rows(set, type);
}

dot_tile_fn kernels_dot_tile(const kernel_set *set, uint32_t type)
{
    if (type >= TYPE_COUNT || !set)
        return NULL;
    return set->dot_tile[type];
}

quantize_row_fn kernels_quantize_row(const kernel_set *set, uint32_t type)
{
    if (type >= TYPE_COUNT)
        return NULL;
    if (set && set->quantize_row[type])
        return set->quantize_row[type];
    const quant_format *format = quant_format_of(type);
    return format ? format->quantize_row : NULL;
}

axpy_fn kernels_axpy(const kernel_set *set, uint32_t type)
{
    if (type >= TYPE_COUNT)
        return NULL;
    if (set && set->axpy[type])
        return set->axpy[type];
    return kernels_scalar()->axpy[type];
}

attend_fn kernels_attend(const kernel_set *set, uint32_t type)
{
    if (type != TYPE_F32 && type != TYPE_F16)
        return NULL;
    if (set && set->attend[type])
        return set->attend[type];
    return kernels_scalar()->attend[type];
}

/* The set's elementwise kernel, or the scalar set's. */
#define ELEMENTWISE_ACCESSOR(type, field)                  \
    type kernels_##field(const kernel_set *set)            \
    {                                                      \
        if (set && set->field)                             \
            return set->field;                             \
        return kernels_scalar()->field;                    \
    }

ELEMENTWISE_ACCESSOR(exponential_fn, exponential)
ELEMENTWISE_ACCESSOR(silu_glu_fn, silu_glu)
ELEMENTWISE_ACCESSOR(swiglu_oai_fn, swiglu_oai)
ELEMENTWISE_ACCESSOR(softmax_fn, softmax)
ELEMENTWISE_ACCESSOR(rmsnorm_fn, rmsnorm)
