/* Elementwise kernels (kernels.h): the scalar exponential against double exp
 * (within one ulp over its range, special values exact), the scalar silu_glu,
 * swiglu_oai, softmax and rmsnorm against double formulas; and every SIMD set
 * the CPU runs bit-identical to the scalar set for every function, lengths 0
 * to 4097 (the vector tails), random and special inputs, in place and out of
 * place, nothing written past the end. */
#include "kernels/kernels.h"
#include "kernels/kernels_dispatch.h"
#include "test.h"

#include <math.h>
#include <stdint.h>

#define MAX_N 4100
#define GUARD 8
#define SENTINEL 12345.0f

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static uint32_t rng_next(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 32);
}

static float rng_float(float lo, float hi)
{
    return lo + (hi - lo) * (float)(rng_next() >> 8) * (1.0f / 16777216.0f);
}

static float float_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Error of got against the exact value in units of the float spacing at the
 * exact value (subnormal spacing below 2^-126). */
static double ulp_error(float got, double exact)
{
    if (isinf(got) && exact > 0x1.fffffep127)
        return 0.0;
    double spacing = 0x1p-149;
    if (exact >= 0x1p-126) {
        int exponent;
        frexp(exact, &exponent);
        spacing = ldexp(1.0, exponent - 24);
    }
    return fabs((double)got - exact) / spacing;
}

/* Bits equal, or both NaN (the sets may give NaNs of different payloads). */
static int same_float(float a, float b)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b);
    return memcmp(&a, &b, sizeof a) == 0;
}

static int same_floats(const float *a, const float *b, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!same_float(a[i], b[i]))
            return 0;
    return 1;
}

static void test_exponential_accuracy(void)
{
    exponential_fn exponential = kernels_scalar()->exponential;
    /* every 1009th float of both signs inside [-104, 89] (2.2 million values;
     * all of them measured once: at most 0.91 ulp where the result is a
     * normal float); results below the smallest normal are flushed to 0 */
    double worst = 0.0;
    float worst_x = 0.0f;
    long long checked = 0, rounded = 0;
    int flushed_ok = 1;
    enum { BATCH = 4096 };
    static float x[BATCH], y[BATCH];
    int count = 0;
    for (uint64_t u = 0; u <= 0xffffffffull; u += 1009) {
        float v = float_from_bits((uint32_t)u);
        if (!(v >= -104.0f && v <= 89.0f))
            continue;
        x[count++] = v;
        if (count < BATCH && u + 1009 <= 0xffffffffull)
            continue;
        exponential(y, x, count);
        for (int i = 0; i < count; i++) {
            double exact = exp((double)x[i]);
            if (x[i] < -87.3365402f) {
                flushed_ok &= y[i] == 0.0f;
                continue;
            }
            double error = ulp_error(y[i], exact);
            if (error > worst) {
                worst = error;
                worst_x = x[i];
            }
            rounded += y[i] == (float)exact;
        }
        checked += count;
        count = 0;
    }
    printf("exponential: %lld values, max error %.3f ulp (at %a), %.2f %% correctly rounded\n", checked, worst,
           (double)worst_x, 100.0 * (double)rounded / (double)checked);
    CHECK_MSG(worst <= 1.0, "max error %.3f ulp at %a", worst, (double)worst_x);
    CHECK((double)rounded / (double)checked > 0.99);
    CHECK(flushed_ok);

    float special[] = {0.0f, -0.0f, 1.0f, -1.0f, -INFINITY, INFINITY, NAN, 89.0f, 88.72283f, 88.7229f, -104.0f,
                       -87.3365402f, -87.3365479f, -87.3365f, -200.0f, 200.0f, 1e-30f, -1e-30f};
    float out[sizeof special / sizeof special[0]];
    int n = (int)(sizeof special / sizeof special[0]);
    exponential(out, special, n);
    CHECK(out[0] == 1.0f && out[1] == 1.0f);
    CHECK(fabs(out[2] - M_E) < 2.5e-7 && fabs(out[3] - 1.0 / M_E) < 1e-7);
    CHECK(out[4] == 0.0f && !signbit(out[4]));
    CHECK(isinf(out[5]) && out[5] > 0);
    CHECK(isnan(out[6]));
    CHECK(isinf(out[7]));
    CHECK(isfinite(out[8]) && out[8] > 3.4e38f); /* just below the overflow threshold */
    CHECK(isinf(out[9]));
    CHECK(out[10] == 0.0f);
    /* the smallest normal result, then the first flushed one */
    CHECK(out[11] >= 0x1p-126f && ulp_error(out[11], exp((double)special[11])) <= 1.0);
    CHECK(out[12] == 0.0f);
    CHECK(ulp_error(out[13], exp((double)special[13])) <= 1.0);
    CHECK(out[14] == 0.0f && isinf(out[15]));
    CHECK(out[16] == 1.0f && out[17] == 1.0f);
}

/* Random inputs of a few magnitudes, with zeros, infinities and NaNs now and
 * then (kind 1), or plain finite numbers (kind 0). */
static void fill(float *x, int64_t n, float scale, int kind)
{
    for (int64_t i = 0; i < n; i++) {
        x[i] = rng_float(-1.0f, 1.0f) * scale;
        if (kind == 1) {
            switch (rng_next() % 40) {
            case 0: x[i] = 0.0f; break;
            case 1: x[i] = -0.0f; break;
            case 2: x[i] = INFINITY; break;
            case 3: x[i] = -INFINITY; break;
            case 4: x[i] = NAN; break;
            case 5: x[i] = rng_float(-150.0f, 150.0f); break;
            case 6: x[i] = 1e-40f; break;
            default: break;
            }
        }
    }
}

/* A maximum without fmax: gcc 12 for aarch64 fails (internal compiler error)
 * vectorizing an fmax reduction loop. */
static double larger(double a, double b)
{
    return b > a ? b : a;
}

static void test_scalar_formulas(void)
{
    const kernel_set *s = kernels_scalar();
    enum { N = 1000 };
    static float gate[N], up[N], out[N], x[N], weight[N];
    fill(gate, N, 12.0f, 0);
    fill(up, N, 12.0f, 0);
    fill(weight, N, 2.0f, 0);
    double worst = 0.0;
    s->silu_glu(out, gate, up, N);
    for (int i = 0; i < N; i++) {
        double g = gate[i], expected = g / (1.0 + exp(-g)) * up[i];
        worst = larger(worst, fabs(out[i] - expected) / (fabs(expected) + 1e-30));
    }
    CHECK_MSG(worst < 1e-6, "silu_glu relative error %g", worst);

    worst = 0.0;
    s->swiglu_oai(out, gate, up, N, 1.702f, 7.0f);
    for (int i = 0; i < N; i++) {
        double g = fmin(gate[i], 7.0), u = fmax(fmin(up[i], 7.0), -7.0);
        double expected = g / (1.0 + exp(-1.702 * g)) * (u + 1.0);
        worst = larger(worst, fabs(out[i] - expected) / (fabs(expected) + 1e-6));
    }
    /* a few roundings (exp, 1 + e, the division, u + 1, the product): some ulps */
    CHECK_MSG(worst < 2e-6, "swiglu_oai relative error %g", worst);

    fill(x, N, 20.0f, 0);
    double max = -INFINITY, sum = 0.0;
    for (int i = 0; i < N; i++)
        max = larger(max, x[i]);
    for (int i = 0; i < N; i++)
        sum += exp(x[i] - max);
    memcpy(out, x, sizeof x);
    s->softmax(out, N);
    worst = 0.0;
    double total = 0.0;
    for (int i = 0; i < N; i++) {
        double expected = exp(x[i] - max) / sum;
        worst = larger(worst, fabs(out[i] - expected) / (expected + 1e-30));
        total += out[i];
    }
    /* x - max is rounded in float: |x - max| up to 40 loses up to 2e-6 of the exponent */
    CHECK_MSG(worst < 4e-6, "softmax relative error %g", worst);
    CHECK(fabs(total - 1.0) < 1e-5);

    double squares = 0.0;
    for (int i = 0; i < N; i++)
        squares += (double)x[i] * x[i];
    double inverse = 1.0 / sqrt(squares / N + 1e-6);
    s->rmsnorm(out, x, weight, N, 1e-6f);
    worst = 0.0;
    for (int i = 0; i < N; i++) {
        double expected = x[i] * inverse * weight[i];
        worst = larger(worst, fabs(out[i] - expected) / (fabs(expected) + 1e-30));
    }
    CHECK_MSG(worst < 1e-6, "rmsnorm relative error %g", worst);

    /* the sum-of-squares lanes reach the result: 17 elements use lanes 0..15 and 0 again */
    float seventeen[17], normalized[17];
    for (int i = 0; i < 17; i++)
        seventeen[i] = (float)(i + 1);
    s->rmsnorm(normalized, seventeen, NULL, 17, 0.0f);
    double mean = 0.0;
    for (int i = 0; i < 17; i++)
        mean += (double)(i + 1) * (i + 1) / 17.0;
    CHECK(fabs(normalized[16] - 17.0 / sqrt(mean)) < 1e-6);

    /* an all -inf softmax row is NaN, as the reference engine's; a NaN element is skipped by the maximum */
    float row[3] = {-INFINITY, -INFINITY, -INFINITY};
    s->softmax(row, 3);
    CHECK(isnan(row[0]));
    float with_nan[3] = {1.0f, NAN, 2.0f};
    s->softmax(with_nan, 3);
    CHECK(isnan(with_nan[1]) && isnan(with_nan[0]));
}

/* One SIMD set against the scalar set, bit for bit. */
static int compare_set(const kernel_set *set, int64_t n, int kind, float scale)
{
    const kernel_set *scalar = kernels_scalar();
    static float a[MAX_N + GUARD], b[MAX_N + GUARD], x[MAX_N], y[MAX_N], weight[MAX_N];
    int ok = 1;
    fill(x, n, scale, kind);
    fill(y, n, scale, kind);
    fill(weight, n, 2.0f, kind);
    for (int i = 0; i < GUARD; i++)
        a[n + i] = b[n + i] = SENTINEL;
#define GUARDS_INTACT() (a[n] == SENTINEL && a[n + GUARD - 1] == SENTINEL && b[n] == SENTINEL)

    scalar->exponential(a, x, n);
    set->exponential(b, x, n);
    ok &= same_floats(a, b, n) && GUARDS_INTACT();
    memcpy(b, x, (size_t)n * sizeof(float));
    set->exponential(b, b, n); /* in place */
    ok &= same_floats(a, b, n);

    scalar->silu_glu(a, x, y, n);
    set->silu_glu(b, x, y, n);
    ok &= same_floats(a, b, n) && GUARDS_INTACT();
    memcpy(b, x, (size_t)n * sizeof(float));
    set->silu_glu(b, b, y, n); /* out aliases gate, as the MoE calls it */
    ok &= same_floats(a, b, n);

    scalar->swiglu_oai(a, x, y, n, 1.702f, 7.0f);
    set->swiglu_oai(b, x, y, n, 1.702f, 7.0f);
    ok &= same_floats(a, b, n) && GUARDS_INTACT();
    memcpy(b, y, (size_t)n * sizeof(float));
    set->swiglu_oai(b, x, b, n, 1.702f, 7.0f); /* out aliases up */
    ok &= same_floats(a, b, n);

    memcpy(a, x, (size_t)n * sizeof(float));
    memcpy(b, x, (size_t)n * sizeof(float));
    scalar->softmax(a, n);
    set->softmax(b, n);
    ok &= same_floats(a, b, n) && GUARDS_INTACT();

    scalar->rmsnorm(a, x, weight, n, 1e-6f);
    set->rmsnorm(b, x, weight, n, 1e-6f);
    ok &= same_floats(a, b, n) && GUARDS_INTACT();
    scalar->rmsnorm(a, x, NULL, n, 1e-5f);
    memcpy(b, x, (size_t)n * sizeof(float));
    set->rmsnorm(b, b, NULL, n, 1e-5f); /* in place, no weight */
    ok &= same_floats(a, b, n);
#undef GUARDS_INTACT
    return ok;
}

static void test_set(const kernel_set *set)
{
    static const int64_t lengths[] = {0,  1,  2,  3,  4,  5,   7,   8,   9,   15,   16,   17,  23, 24,
                                      31, 32, 33, 47, 63, 64, 65, 100, 127, 128, 129, 768, 1000, 2048, 4097};
    int cases = 0;
    for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++)
        for (int kind = 0; kind < 2; kind++)
            for (int s = 0; s < 3; s++) {
                float scale = s == 0 ? 1.0f : s == 1 ? 12.0f : 120.0f;
                CHECK_MSG(compare_set(set, lengths[l], kind, scale), "set %s: n %lld kind %d scale %g differs from scalar",
                          set->name, (long long)lengths[l], kind, (double)scale);
                cases++;
            }
    /* the exponential over a dense sweep of its whole range, every 4999th float */
    static float x[MAX_N], a[MAX_N], b[MAX_N];
    int count = 0, ok = 1;
    for (uint64_t u = 0; u <= 0xffffffffull; u += 4999) {
        x[count++] = float_from_bits((uint32_t)u);
        if (count == MAX_N || u + 4999 > 0xffffffffull) {
            kernels_scalar()->exponential(a, x, count);
            set->exponential(b, x, count);
            ok &= same_floats(a, b, count);
            count = 0;
        }
    }
    CHECK_MSG(ok, "set %s: exponential sweep differs from scalar", set->name);
    CHECK(kernels_exponential(set) == set->exponential && kernels_softmax(set) == set->softmax);
    printf("set %s: %d elementwise cases bit-identical to scalar\n", set->name, cases);
}

int main(void)
{
    cpu_features features;
    cpu_features_detect(&features);
    test_exponential_accuracy();
    test_scalar_formulas();
    const kernel_set *scalar = kernels_scalar();
    CHECK(kernels_silu_glu(NULL) == scalar->silu_glu && kernels_rmsnorm(NULL) == scalar->rmsnorm &&
          kernels_swiglu_oai(NULL) == scalar->swiglu_oai);

    const kernel_set *sets[] = {kernels_avx2(), kernels_avx512(), kernels_neon()};
    const char *names[] = {"avx2", "avx512", "neon"};
    for (int i = 0; i < 3; i++) {
        if (!sets[i]) {
            printf("set %s: not compiled for this architecture\n", names[i]);
            continue;
        }
        if (!kernels_set_supported(sets[i], &features)) {
            printf("set %s: NOT RUN on this CPU (lacks the instructions); not counted as passed\n", names[i]);
            continue;
        }
        test_set(sets[i]);
    }
    return test_finish();
}
