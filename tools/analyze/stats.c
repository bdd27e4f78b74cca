/* Small statistics: sorting, percentiles by linear interpolation between
 * order statistics, a seedable PRNG (splitmix64) and the percentile
 * bootstrap of a rate. Nothing here knows a file format. */
#include <math.h>
#include <stdlib.h>

#include "analyze.h"

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void stats_sort(double *values, size_t n)
{
    if (n > 1)
        qsort(values, n, sizeof *values, compare_doubles);
}

double stats_percentile(const double *sorted, size_t n, double p)
{
    if (n == 0)
        return NAN;
    double rank = p / 100.0 * (double)(n - 1);
    if (rank <= 0)
        return sorted[0];
    if (rank >= (double)(n - 1))
        return sorted[n - 1];
    size_t below = (size_t)rank;
    double fraction = rank - (double)below;
    return sorted[below] + fraction * (sorted[below + 1] - sorted[below]);
}

uint64_t stats_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [0, n) without modulo bias worth mentioning for n < 2^32. */
static size_t random_index(uint64_t *state, size_t n)
{
    return (size_t)(((stats_random(state) >> 32) * (uint64_t)n) >> 32);
}

int stats_bootstrap_rate(const double *values, size_t n, double scale, int resamples, uint64_t seed,
                         double *low, double *high)
{
    *low = *high = NAN;
    if (n == 0 || resamples <= 0)
        return 0;
    double *rates = malloc((size_t)resamples * sizeof *rates);
    if (!rates)
        return -1;
    uint64_t state = seed;
    for (int r = 0; r < resamples; r++) {
        double sum = 0;
        for (size_t i = 0; i < n; i++)
            sum += values[random_index(&state, n)];
        rates[r] = sum > 0 ? (double)n * scale / sum : NAN;
    }
    stats_sort(rates, (size_t)resamples);
    *low = stats_percentile(rates, (size_t)resamples, 2.5);
    *high = stats_percentile(rates, (size_t)resamples, 97.5);
    free(rates);
    return 0;
}
