/* Parallel products of quantized weight matrices with activation vectors.
 * y[t][r] = W[r] . x[t]. Activations are first converted to the weight
 * type's activation format (Q8_K for K-quants and IQ4_XS, Q8_0 for Q8_0, Q4_x,
 * Q5_x, IQ4_NL and MXFP4, F16 for F16, BF16 for BF16, F32 for F32), once per
 * input row, and reused by every matrix that reads that input.
 *
 * Every output element is one call of the type's dot kernel, so results do not
 * depend on the number of tokens in the batch nor on the thread count. */
#ifndef BMOE_KERNELS_MATMUL_H
#define BMOE_KERNELS_MATMUL_H

#include <stddef.h>
#include <stdint.h>

#include "kernels.h"
#include "thread_pool.h"

/* Bytes of one row of n activations converted for weights of weight_type. */
size_t activation_row_bytes(uint32_t weight_type, int64_t n);

/* Converts n f32 values to weight_type's activation format with the kernel
 * set's quantizer (NULL: the best set); the bytes do not depend on the set. */
void activation_convert(const kernel_set *kernels, uint32_t weight_type, const float *x, int64_t n, void *dst);

/* One matrix times a batch of already converted activation rows. */
typedef struct matmul_job {
    const void *weights;        /* n_out rows of n_in elements */
    uint32_t type;              /* weight type */
    int64_t n_in;
    int64_t n_out;
    size_t weight_row_bytes;
    const void *activations;    /* n_tokens rows in the activation format */
    size_t activation_stride;   /* bytes between activation rows */
    int64_t n_tokens;
    float *out;                 /* out[t * out_stride + r] */
    int64_t out_stride;
    void *ready;                /* NULL, or a handle the waiter blocks on until the weights are in */
} matmul_job;

/* How a thread waits for a job's weights (streamed experts): wait(user,
 * ready) returns 0 once they are in, -1 when they will never be (the job's
 * output is then left unwritten). */
typedef struct matmul_waiter {
    int (*wait)(void *user, void *ready);
    void *user;
} matmul_waiter;

/* Runs all jobs as one parallel step (one barrier), splitting the rows of all
 * jobs over the pool's threads. */
void matmul_run(thread_pool *pool, const kernel_set *kernels, const matmul_job *jobs, int n_jobs);
/* The same with jobs whose weights may still be arriving: each piece of a
 * job with a ready handle waits on it first (jobs whose weights are in should
 * come first). Returns how many pieces were skipped because their weights
 * never arrived. */
int64_t matmul_run_waiting(thread_pool *pool, const kernel_set *kernels, const matmul_job *jobs, int n_jobs,
                           const matmul_waiter *waiter);

#endif
