/* The recurrent mixers' math: the causal depthwise convolution of the
 * short-convolution and Gated-DeltaNet mixers, and the DeltaNet recurrence
 * with its L2 norm and softplus. Scalar: per token they cost a few flops per
 * state element, little next to the projections around them. */
#include <math.h>
#include <string.h>

#include "ops.h"

void causal_conv1d(float *out, int64_t out_stride, const float *in, int64_t in_stride, int n_tokens,
                   int64_t n_channels, const float *taps, int n_taps, float *state)
{
    int history = n_taps - 1;
    for (int t = 0; t < n_tokens; t++) {
        const float *x = in + (int64_t)t * in_stride;
        float *y = out + (int64_t)t * out_stride;
        for (int64_t ch = 0; ch < n_channels; ch++) {
            const float *w = taps + ch * n_taps;
            float *window = state + ch * history;
            float current = x[ch];
            float sum = 0.0f;
            for (int k = 0; k < history; k++)
                sum += w[k] * window[k];
            sum += w[history] * current;
            /* the oldest input leaves the window, this one enters it */
            if (history > 0) {
                memmove(window, window + 1, (size_t)(history - 1) * sizeof *window);
                window[history - 1] = current;
            }
            y[ch] = sum;
        }
    }
}

void l2norm(float *x, int64_t n, float eps)
{
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)(x[i] * x[i]);
    float norm = sqrtf((float)sum);
    float scale = 1.0f / (norm > eps ? norm : eps);
    for (int64_t i = 0; i < n; i++)
        x[i] *= scale;
}

float softplus(float z)
{
    return z > 20.0f ? z : logf(1.0f + expf(z));
}

void deltanet_step(float *state, const float *q, const float *k, const float *v, float beta, float decay, int dk,
                   int dv, float *out)
{
    /* with S' = decay S + k delta^T, S'^T q = decay S^T q + (k.q) delta: one
     * read-only pass gives S^T k and S^T q, one read-write pass updates S
     * (the state is larger than the caches: three passes over it, not four) */
    float sk[DELTANET_MAX_HEAD], sq[DELTANET_MAX_HEAD];
    for (int b = 0; b < dv; b++)
        sk[b] = sq[b] = 0.0f;
    float kq = 0.0f;
    for (int a = 0; a < dk; a++) {
        const float *row = state + (int64_t)a * dv;
        for (int b = 0; b < dv; b++) {
            sk[b] += row[b] * k[a];
            sq[b] += row[b] * q[a];
        }
        kq += k[a] * q[a];
    }
    float scale = 1.0f / sqrtf((float)dk);
    float delta[DELTANET_MAX_HEAD];
    for (int b = 0; b < dv; b++) {
        delta[b] = (v[b] - decay * sk[b]) * beta;
        out[b] = (decay * sq[b] + kq * delta[b]) * scale;
    }
    for (int a = 0; a < dk; a++) {
        float *row = state + (int64_t)a * dv;
        for (int b = 0; b < dv; b++)
            row[b] = row[b] * decay + k[a] * delta[b];
    }
}
