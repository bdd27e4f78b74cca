/* Scale searches for the weight quantizers: for a small group of values, find
 * the scale (and offset) that minimizes the squared reconstruction error on a
 * given integer grid. Each search tries a few dozen candidate scales around
 * the obvious one (the largest value mapped to an end of the grid), refines
 * each by least squares for its rounding, and keeps the best. Callers then
 * quantize the scales themselves and re-round the values against the stored
 * scales, so what is searched here is only a starting point. */
#include "quant_blocks.h"

#include <float.h>
#include <math.h>

int quant_round_clamp(float x, int low, int high)
{
    if (!(x > (float)low))
        return low; /* also NaN */
    if (x >= (float)high)
        return high;
    return (int)nearbyintf(x);
}

float quant_search_symmetric(const float *x, int n, int qmin, int qmax, int8_t *q)
{
    float max = 0.0f, amax = 0.0f;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    if (amax == 0.0f) {
        memset(q, 0, (size_t)n);
        return 0.0f;
    }
    float best_scale = max / (float)qmax, best_error = FLT_MAX;
    const int ends[2] = {qmin, qmax};
    for (int e = 0; e < 2; e++) {
        float end = (float)ends[e];
        float direction = end < 0 ? -1.0f : 1.0f;
        for (int k = -10; k <= 10; k++) {
            float target = end + direction * 0.1f * (float)k;
            float inverse = target / max;
            double sum_xq = 0, sum_qq = 0;
            for (int i = 0; i < n; i++) {
                int v = quant_round_clamp(x[i] * inverse, qmin, qmax);
                sum_xq += (double)x[i] * v;
                sum_qq += (double)v * v;
            }
            if (sum_qq == 0)
                continue;
            float scale = (float)(sum_xq / sum_qq);
            if (scale == 0.0f)
                continue;
            /* Re-round against the refined scale: never worse per element. */
            double error = 0;
            for (int i = 0; i < n; i++) {
                int v = quant_round_clamp(x[i] / scale, qmin, qmax);
                double diff = (double)x[i] - (double)scale * v;
                error += diff * diff;
            }
            if (error < best_error) {
                best_error = (float)error;
                best_scale = scale;
            }
        }
    }
    for (int i = 0; i < n; i++)
        q[i] = (int8_t)quant_round_clamp(x[i] / best_scale, qmin, qmax);
    return best_scale;
}

/* Squared error of x against a*q + c with q re-rounded into [0, qmax]. */
static double affine_error(const float *x, int n, int qmax, float a, float c)
{
    double error = 0;
    for (int i = 0; i < n; i++) {
        int v = a > 0.0f ? quant_round_clamp((x[i] - c) / a, 0, qmax) : 0;
        double diff = (double)x[i] - ((double)a * v + c);
        error += diff * diff;
    }
    return error;
}

void quant_search_affine(const float *x, int n, int qmax, float *scale, float *offset)
{
    float low = 0.0f, high = -FLT_MAX;
    for (int i = 0; i < n; i++) {
        if (x[i] < low)
            low = x[i];
        if (x[i] > high)
            high = x[i];
    }
    /* The offset can only shift values down (b >= 0), so the grid starts at
     * min(x, 0). A constant group needs no steps at all. */
    if (!(high > low)) {
        *scale = 0.0f;
        *offset = low < 0.0f ? -low : 0.0f;
        return;
    }
    float best_a = (high - low) / (float)qmax, best_c = low;
    double best_error = affine_error(x, n, qmax, best_a, best_c);
    for (int k = -10; k <= 10; k++) {
        float inverse = ((float)qmax + 0.1f * (float)k) / (high - low);
        double s = n, sq = 0, sqq = 0, sx = 0, sxq = 0;
        for (int i = 0; i < n; i++) {
            int v = quant_round_clamp((x[i] - low) * inverse, 0, qmax);
            sq += v;
            sqq += (double)v * v;
            sx += x[i];
            sxq += (double)x[i] * v;
        }
        double det = s * sqq - sq * sq;
        if (det <= 0)
            continue;
        double a = (s * sxq - sq * sx) / det;
        double c = (sx - a * sq) / s;
        if (c > 0) { /* offset must be <= 0: refit the scale alone */
            c = 0;
            a = sqq > 0 ? sxq / sqq : 0;
        }
        if (!(a > 0))
            continue;
        double error = affine_error(x, n, qmax, (float)a, (float)c);
        if (error < best_error) {
            best_error = error;
            best_a = (float)a;
            best_c = (float)c;
        }
    }
    *scale = best_a;
    *offset = -best_c;
}

int quant_nearest_grid(const int8_t *sorted_grid, float value)
{
    int index = 0;
    while (index < 15 && value > 0.5f * (float)(sorted_grid[index] + sorted_grid[index + 1]))
        index++;
    return index;
}

float quant_search_grid(const float *x, int n, const int8_t *sorted_grid, uint8_t *codes)
{
    float max = 0.0f, amax = 0.0f;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    if (amax == 0.0f) {
        int zero = quant_nearest_grid(sorted_grid, 0.0f);
        memset(codes, zero, (size_t)n);
        return 0.0f;
    }
    float best_scale = max / (float)sorted_grid[0];
    double best_error = DBL_MAX;
    const int ends[2] = {sorted_grid[0], sorted_grid[15]};
    for (int e = 0; e < 2; e++) {
        for (int k = -10; k <= 10; k++) {
            float target = (float)ends[e] * (1.0f + 0.01f * (float)k);
            if (target == 0.0f)
                continue;
            float inverse = target / max;
            double sum_xg = 0, sum_gg = 0;
            for (int i = 0; i < n; i++) {
                int g = sorted_grid[quant_nearest_grid(sorted_grid, x[i] * inverse)];
                sum_xg += (double)x[i] * g;
                sum_gg += (double)g * g;
            }
            if (sum_gg == 0)
                continue;
            float scale = (float)(sum_xg / sum_gg);
            if (scale == 0.0f)
                continue;
            double error = 0;
            for (int i = 0; i < n; i++) {
                int g = sorted_grid[quant_nearest_grid(sorted_grid, x[i] / scale)];
                double diff = (double)x[i] - (double)scale * g;
                error += diff * diff;
            }
            if (error < best_error) {
                best_error = error;
                best_scale = scale;
            }
        }
    }
    for (int i = 0; i < n; i++)
        codes[i] = (uint8_t)quant_nearest_grid(sorted_grid, x[i] / best_scale);
    return best_scale;
}
