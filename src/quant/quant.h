/* Tensor data formats: one table row per ggml type id (block size, bytes per
 * block, the activation format it is dotted against, and the scalar reference
 * functions). Code that walks tensors looks a format up here and never switches
 * on the type id. SIMD kernels live in src/kernels and must agree with the
 * scalar vec_dot given here. Adding a format = one file's functions + one row. */
#ifndef BMOE_QUANT_QUANT_H
#define BMOE_QUANT_QUANT_H

#include <stddef.h>
#include <stdint.h>

/* ggml type ids as stored in GGUF tensor-info records (quant-formats.md section 1). */
enum tensor_type {
    TYPE_F32 = 0,
    TYPE_F16 = 1,
    TYPE_Q4_0 = 2,
    TYPE_Q4_1 = 3,
    TYPE_Q5_0 = 6,
    TYPE_Q5_1 = 7,
    TYPE_Q8_0 = 8,
    TYPE_Q8_1 = 9,
    TYPE_Q2_K = 10,
    TYPE_Q3_K = 11,
    TYPE_Q4_K = 12,
    TYPE_Q5_K = 13,
    TYPE_Q6_K = 14,
    TYPE_Q8_K = 15,
    TYPE_IQ2_XXS = 16,
    TYPE_IQ2_XS = 17,
    TYPE_IQ3_XXS = 18,
    TYPE_IQ1_S = 19,
    TYPE_IQ4_NL = 20,
    TYPE_IQ3_S = 21,
    TYPE_IQ2_S = 22,
    TYPE_IQ4_XS = 23,
    TYPE_I8 = 24,
    TYPE_I16 = 25,
    TYPE_I32 = 26,
    TYPE_I64 = 27,
    TYPE_F64 = 28,
    TYPE_IQ1_M = 29,
    TYPE_BF16 = 30,
    TYPE_TQ1_0 = 34,
    TYPE_TQ2_0 = 35,
    TYPE_MXFP4 = 39,
    TYPE_NVFP4 = 40,
    TYPE_Q1_0 = 41,
    TYPE_Q2_0 = 42,
    TYPE_COUNT = 43
};

#define QK_K 256

/* Converts n values (a multiple of block_elems) of this format to f32. */
typedef void (*dequantize_row_fn)(const void *src, float *dst, int64_t n);
/* Converts n f32 values (a multiple of block_elems) to this format. */
typedef void (*quantize_row_fn)(const float *src, void *dst, int64_t n);
/* Dot product of n weights of this format with n activations already in the
 * format's activation_type. Accumulates blocks in increasing order in f32. */
typedef float (*vec_dot_fn)(int64_t n, const void *weights, const void *activations);

typedef struct quant_format {
    const char *name;        /* "Q4_K" */
    enum tensor_type type;
    int block_elems;         /* elements per block */
    int block_bytes;         /* bytes per block */
    enum tensor_type activation_type; /* format activations take for vec_dot */
    dequantize_row_fn dequantize_row; /* NULL: sizes known, data not decodable */
    quantize_row_fn quantize_row;     /* NULL: no quantizer */
    vec_dot_fn vec_dot;               /* scalar reference; NULL when no dot */
} quant_format;

/* The row for a type id, or NULL when the id names no valid type (removed
 * ids 4, 5, 31-33, 36-38 and ids >= TYPE_COUNT). Rows with block sizes exist
 * for every valid id, even those whose data bmoe cannot decode. */
const quant_format *quant_format_of(uint32_t type);

/* Bytes of a row of n elements; 0 if the type is invalid or n is not a
 * multiple of its block size. */
size_t quant_row_bytes(uint32_t type, int64_t n);

/* The type with this name ("Q4_K", case-insensitive), or -1. */
int quant_type_from_name(const char *name);

#endif
