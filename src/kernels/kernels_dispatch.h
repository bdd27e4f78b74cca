/* Pieces of the kernel dispatch that kernels_best() decides with, exposed so
 * tests can check the choice for a given BMOE_ISA value and feature set
 * without the process-wide cache getting in the way. Private to src/kernels
 * and its tests. */
#ifndef BMOE_KERNELS_KERNELS_DISPATCH_H
#define BMOE_KERNELS_KERNELS_DISPATCH_H

#include "kernels.h"

/* 1 if a CPU with these features runs every instruction the set uses. */
int kernels_set_supported(const kernel_set *set, const cpu_features *features);

/* The set kernels_best() picks for a BMOE_ISA value (NULL or "" means no
 * preference) on a CPU with these features: the requested set if compiled
 * in and supported, otherwise the best supported one. Never NULL. */
const kernel_set *kernels_select(const char *isa, const cpu_features *features);

/* Activation quantizers of the x86 sets (quantize_avx2.c, quantize_avx512.c)... */
void avx2_quantize_row_q8_k(const float *src, void *dst, int64_t n);
void avx2_quantize_row_q8_0(const float *src, void *dst, int64_t n);
void avx2_quantize_row_f16(const float *src, void *dst, int64_t n);
void avx512_quantize_row_q8_k(const float *src, void *dst, int64_t n);
void avx512_quantize_row_q8_0(const float *src, void *dst, int64_t n);
void avx512_quantize_row_f16(const float *src, void *dst, int64_t n);

/* ... and of the NEON set (quantize_neon.c). */
void neon_quantize_row_q8_k(const float *src, void *dst, int64_t n);
void neon_quantize_row_q8_0(const float *src, void *dst, int64_t n);
void neon_quantize_row_f16(const float *src, void *dst, int64_t n);

/* Dot products of the grid i-quants (dot_iq_avx2.c, which the AVX-512 set
 * lists too, and dot_iq_neon.c), named here for the sets' tables. */
#define KERNELS_IQ_DECLARE(isa)                                                                           \
    void isa##_dot_rows_iq2_xxs(int64_t n, const void *w, size_t rb, int64_t nr, const void *a, float *out);   \
    void isa##_dot_rows_iq2_xs(int64_t n, const void *w, size_t rb, int64_t nr, const void *a, float *out);    \
    void isa##_dot_rows_iq2_s(int64_t n, const void *w, size_t rb, int64_t nr, const void *a, float *out);     \
    void isa##_dot_rows_iq3_xxs(int64_t n, const void *w, size_t rb, int64_t nr, const void *a, float *out);   \
    void isa##_dot_rows_iq3_s(int64_t n, const void *w, size_t rb, int64_t nr, const void *a, float *out);     \
    void isa##_dot_decode_iq2_xxs(int64_t n, const void *w, size_t rb, int64_t nr, const void *a, float *out); \
    void isa##_dot_decode_iq2_xs(int64_t n, const void *w, size_t rb, int64_t nr, const void *a, float *out);  \
    void isa##_dot_decode_iq2_s(int64_t n, const void *w, size_t rb, int64_t nr, const void *a, float *out);   \
    void isa##_dot_decode_iq3_xxs(int64_t n, const void *w, size_t rb, int64_t nr, const void *a, float *out); \
    void isa##_dot_decode_iq3_s(int64_t n, const void *w, size_t rb, int64_t nr, const void *a, float *out);   \
    void isa##_dot_rows_iq1_s(int64_t n, const void *w, size_t rb, int64_t nr, const void *a, float *out);     \
    void isa##_dot_rows_iq1_m(int64_t n, const void *w, size_t rb, int64_t nr, const void *a, float *out);     \
    void isa##_dot_decode_iq1_s(int64_t n, const void *w, size_t rb, int64_t nr, const void *a, float *out);   \
    void isa##_dot_decode_iq1_m(int64_t n, const void *w, size_t rb, int64_t nr, const void *a, float *out);
KERNELS_IQ_DECLARE(avx2)
KERNELS_IQ_DECLARE(neon)

/* The entries of a set's dot_rows and dot_decode tables for them. */
#define KERNELS_IQ_ROWS(isa)                                                                        \
    [TYPE_IQ2_XXS] = isa##_dot_rows_iq2_xxs, [TYPE_IQ2_XS] = isa##_dot_rows_iq2_xs,                 \
    [TYPE_IQ2_S] = isa##_dot_rows_iq2_s, [TYPE_IQ3_XXS] = isa##_dot_rows_iq3_xxs,                   \
    [TYPE_IQ3_S] = isa##_dot_rows_iq3_s, [TYPE_IQ1_S] = isa##_dot_rows_iq1_s,                         \
    [TYPE_IQ1_M] = isa##_dot_rows_iq1_m
#define KERNELS_IQ_DECODE(isa)                                                                      \
    [TYPE_IQ2_XXS] = isa##_dot_decode_iq2_xxs, [TYPE_IQ2_XS] = isa##_dot_decode_iq2_xs,             \
    [TYPE_IQ2_S] = isa##_dot_decode_iq2_s, [TYPE_IQ3_XXS] = isa##_dot_decode_iq3_xxs,               \
    [TYPE_IQ3_S] = isa##_dot_decode_iq3_s, [TYPE_IQ1_S] = isa##_dot_decode_iq1_s,                     \
    [TYPE_IQ1_M] = isa##_dot_decode_iq1_m

/* Dot products of the ternary formats (dot_ternary_avx2.c, which the
 * AVX-512 set lists too, and dot_ternary_neon.c). */
#define KERNELS_TERNARY_DECLARE(isa)                                                                      \
    void isa##_dot_rows_tq1_0(int64_t n, const void *w, size_t rb, int64_t nr, const void *a, float *out);     \
    void isa##_dot_rows_tq2_0(int64_t n, const void *w, size_t rb, int64_t nr, const void *a, float *out);     \
    void isa##_dot_decode_tq1_0(int64_t n, const void *w, size_t rb, int64_t nr, const void *a, float *out);   \
    void isa##_dot_decode_tq2_0(int64_t n, const void *w, size_t rb, int64_t nr, const void *a, float *out);
KERNELS_TERNARY_DECLARE(avx2)
KERNELS_TERNARY_DECLARE(neon)
#define KERNELS_TERNARY_ROWS(isa) [TYPE_TQ1_0] = isa##_dot_rows_tq1_0, [TYPE_TQ2_0] = isa##_dot_rows_tq2_0
#define KERNELS_TERNARY_DECODE(isa) [TYPE_TQ1_0] = isa##_dot_decode_tq1_0, [TYPE_TQ2_0] = isa##_dot_decode_tq2_0

/* Elementwise kernels: the scalar definitions (elementwise.c) and their
 * SIMD forms (elementwise_*.c), and the attention kernels (attend.c,
 * attend_*.c), named here for the sets' tables. */
void scalar_exponential(float *y, const float *x, int64_t n);
void scalar_silu_glu(float *out, const float *gate, const float *up, int64_t n);
void scalar_swiglu_oai(float *out, const float *gate, const float *up, int64_t n, float alpha, float limit);
void scalar_softmax(float *x, int64_t n);
void scalar_rmsnorm(float *out, const float *x, const float *weight, int64_t n, float eps);
void scalar_attend_f32(const attend_job *job);
void scalar_attend_f16(const attend_job *job);

void avx2_exponential(float *y, const float *x, int64_t n);
void avx2_silu_glu(float *out, const float *gate, const float *up, int64_t n);
void avx2_swiglu_oai(float *out, const float *gate, const float *up, int64_t n, float alpha, float limit);
void avx2_softmax(float *x, int64_t n);
void avx2_rmsnorm(float *out, const float *x, const float *weight, int64_t n, float eps);
void avx2_attend_f32(const attend_job *job);
void avx2_attend_f16(const attend_job *job);

void avx512_exponential(float *y, const float *x, int64_t n);
void avx512_silu_glu(float *out, const float *gate, const float *up, int64_t n);
void avx512_swiglu_oai(float *out, const float *gate, const float *up, int64_t n, float alpha, float limit);
void avx512_softmax(float *x, int64_t n);
void avx512_rmsnorm(float *out, const float *x, const float *weight, int64_t n, float eps);
void avx512_attend_f32(const attend_job *job);
void avx512_attend_f16(const attend_job *job);

void neon_exponential(float *y, const float *x, int64_t n);
void neon_silu_glu(float *out, const float *gate, const float *up, int64_t n);
void neon_swiglu_oai(float *out, const float *gate, const float *up, int64_t n, float alpha, float limit);
void neon_softmax(float *x, int64_t n);
void neon_rmsnorm(float *out, const float *x, const float *weight, int64_t n, float eps);
void neon_attend_f32(const attend_job *job);
void neon_attend_f16(const attend_job *job);

#endif
