/* Sampler tests with crafted logits: greedy argmax and its tie rule, the
 * repeat penalty's divide/multiply rule and window, the frequency and
 * presence penalties (per use, once, after the repeat penalty), top-k, top-p, min-p and
 * temperature (each one alone and in the fixed chain order), the draw's
 * frequencies against the exact softmax, seed reproducibility, and logit
 * biases. */
#include <math.h>
#include <stdint.h>

#include "bmoe.h"
#include "test.h"

#define DRAWS 20000

static bmoe_sampler_params params_with(float temperature, int32_t top_k, float top_p, float min_p)
{
    bmoe_sampler_params params = bmoe_sampler_default_params();
    params.temperature = temperature;
    params.top_k = top_k;
    params.top_p = top_p;
    params.min_p = min_p;
    params.seed = 1234;
    return params;
}

/* Draws DRAWS tokens from the same row and counts them per id. */
static void count_draws_n(const bmoe_sampler_params *params, const float *logits, int32_t n_vocab,
                          int32_t *counts, int draws)
{
    bmoe_sampler *sampler = bmoe_sampler_create(params, n_vocab, NULL);
    CHECK(sampler != NULL);
    if (!sampler)
        return;
    memset(counts, 0, (size_t)n_vocab * sizeof *counts);
    int bad = 0;
    for (int i = 0; i < draws; i++) {
        int32_t token = bmoe_sampler_sample(sampler, logits, NULL, 0);
        if (token >= 0 && token < n_vocab)
            counts[token]++;
        else
            bad++;
    }
    CHECK_MSG(bad == 0, "%d draws out of the vocabulary", bad);
    bmoe_sampler_free(sampler);
}

static void count_draws(const bmoe_sampler_params *params, const float *logits, int32_t n_vocab,
                        int32_t *counts)
{
    count_draws_n(params, logits, n_vocab, counts, DRAWS);
}

static void test_greedy(void)
{
    bmoe_sampler_params params = bmoe_sampler_default_params();
    CHECK(params.temperature <= 0.0f);
    float logits[6] = {0.5f, 3.0f, -1.0f, 3.0f, NAN, 2.9f};
    float copy[6];
    memcpy(copy, logits, sizeof copy);
    bmoe_sampler *sampler = bmoe_sampler_create(&params, 6, NULL);
    CHECK(sampler != NULL);
    /* two equal maxima: the lower id wins; NaN is never chosen */
    CHECK(bmoe_sampler_sample(sampler, logits, NULL, 0) == 1);
    /* the row is read, never written */
    for (int i = 0; i < 6; i++)
        if (i != 4)
            CHECK(copy[i] == logits[i]);
    CHECK(isnan(logits[4]));
    bmoe_sampler_free(sampler);
    sampler = bmoe_sampler_create(&params, 3, NULL);
    CHECK(sampler != NULL);
    float all_nan_but_last[3] = {NAN, NAN, -5.0f};
    CHECK(bmoe_sampler_sample(sampler, all_nan_but_last, NULL, 0) == 2);
    /* nothing above -inf: id 0, as if every NaN were -inf */
    float all_nan[3] = {NAN, NAN, NAN};
    CHECK(bmoe_sampler_sample(sampler, all_nan, NULL, 0) == 0);
    float nan_first[3] = {NAN, -INFINITY, -INFINITY};
    CHECK(bmoe_sampler_sample(sampler, nan_first, NULL, 0) == 0);
    float infinite[3] = {1.0f, INFINITY, INFINITY};
    CHECK(bmoe_sampler_sample(sampler, infinite, NULL, 0) == 1);
    bmoe_sampler_free(sampler);

    /* A vocabulary-sized row: the maximum near the end, tied once more after. */
    enum { VOCAB = 151936 };
    float *row = malloc(sizeof(float) * VOCAB);
    sampler = bmoe_sampler_create(&params, VOCAB, NULL);
    CHECK(row != NULL && sampler != NULL);
    if (row && sampler) {
        for (int i = 0; i < VOCAB; i++)
            row[i] = (float)((i * 7919) % 1000) * 0.01f;
        row[150001] = 11.0f;
        row[150002] = NAN;
        row[151000] = 11.0f;
        CHECK(bmoe_sampler_sample(sampler, row, NULL, 0) == 150001);
    }
    free(row);
    bmoe_sampler_free(sampler);
}

static void test_repeat_penalty(void)
{
    bmoe_sampler_params params = bmoe_sampler_default_params();
    params.repeat_penalty = 1.5f;
    params.repeat_last_n = 3;
    bmoe_sampler *sampler = bmoe_sampler_create(&params, 4, NULL);
    CHECK(sampler != NULL);

    /* positive logit divided: 2.0 / 1.5 = 1.33 < 1.9 */
    float positive[4] = {2.0f, 1.9f, 0.0f, -3.0f};
    int32_t history_zero[1] = {0};
    CHECK(bmoe_sampler_sample(sampler, positive, NULL, 0) == 0);
    CHECK(bmoe_sampler_sample(sampler, positive, history_zero, 1) == 1);

    /* negative logit multiplied: -1.0 * 1.5 = -1.5 < -1.2 */
    float negative[4] = {-1.0f, -1.2f, -9.0f, -9.0f};
    CHECK(bmoe_sampler_sample(sampler, negative, NULL, 0) == 0);
    CHECK(bmoe_sampler_sample(sampler, negative, history_zero, 1) == 1);

    /* a repeated token is penalized once: 2.0 / 1.5 = 1.33 > 1.0 (three
     * times would be 0.59 < 1.0) */
    float once[4] = {2.0f, 1.0f, 0.0f, 0.0f};
    int32_t history_repeated[3] = {0, 0, 0};
    CHECK(bmoe_sampler_sample(sampler, once, history_repeated, 3) == 0);

    /* only the last repeat_last_n (3) tokens count */
    int32_t history_old[4] = {0, 2, 3, 2};
    CHECK(bmoe_sampler_sample(sampler, positive, history_old, 4) == 0);
    int32_t history_recent[4] = {3, 0, 2, 2};
    CHECK(bmoe_sampler_sample(sampler, positive, history_recent, 4) == 1);

    /* ids outside the vocabulary are ignored, not read */
    int32_t history_bad[3] = {-7, 4, 1000000};
    CHECK(bmoe_sampler_sample(sampler, positive, history_bad, 3) == 0);

    /* the penalty does not leak into the next call */
    CHECK(bmoe_sampler_sample(sampler, positive, NULL, 0) == 0);
    bmoe_sampler_free(sampler);

    /* repeat_last_n < 0: the whole history */
    params.repeat_last_n = -1;
    sampler = bmoe_sampler_create(&params, 4, NULL);
    CHECK(sampler != NULL);
    CHECK(bmoe_sampler_sample(sampler, positive, history_old, 4) == 1);
    bmoe_sampler_free(sampler);
}

/* Greedy picks under frequency and presence penalties (the repeat penalty
 * off unless a case sets it); expected ids worked out by hand. */
static int32_t penalized_pick(float repeat, float frequency, float presence, int32_t last_n, const float *logits,
                              const int32_t *history, int32_t n_history)
{
    bmoe_sampler_params params = bmoe_sampler_default_params();
    params.repeat_penalty = repeat;
    params.frequency_penalty = frequency;
    params.presence_penalty = presence;
    params.repeat_last_n = last_n;
    bmoe_sampler *sampler = bmoe_sampler_create(&params, 4, NULL);
    CHECK(sampler != NULL);
    if (!sampler)
        return -1;
    int32_t token = bmoe_sampler_sample(sampler, logits, history, n_history);
    /* the counts of one call never reach the next */
    CHECK(bmoe_sampler_sample(sampler, logits, history, n_history) == token);
    bmoe_sampler_free(sampler);
    return token;
}

static void test_frequency_presence_penalties(void)
{
    float logits[4] = {2.0f, 1.5f, 1.0f, 0.0f};
    int32_t once[1] = {0}, twice[2] = {0, 0}, thrice[3] = {0, 0, 0};
    /* frequency: per use. 2.0 - 0.3 = 1.7 > 1.5; 2.0 - 2 x 0.3 = 1.4 < 1.5 */
    CHECK(penalized_pick(1.0f, 0.3f, 0.0f, 64, logits, once, 1) == 0);
    CHECK(penalized_pick(1.0f, 0.3f, 0.0f, 64, logits, twice, 2) == 1);
    /* presence: once however often. 2.0 - 0.4 = 1.6 > 1.5 (x3 would be 0.8) */
    CHECK(penalized_pick(1.0f, 0.0f, 0.4f, 64, logits, thrice, 3) == 0);
    CHECK(penalized_pick(1.0f, 0.0f, 0.6f, 64, logits, once, 1) == 1);
    /* both add up: 2.0 - 0.2 - 0.2 = 1.6 > 1.5; 2.0 - 0.2 - 0.4 = 1.4 < 1.5 */
    CHECK(penalized_pick(1.0f, 0.2f, 0.2f, 64, logits, once, 1) == 0);
    CHECK(penalized_pick(1.0f, 0.2f, 0.2f, 64, logits, twice, 2) == 1);
    /* negative values favour a token: 1.0 + 0.3 = 1.3 > 1.2 */
    float close[4] = {1.0f, 1.2f, 0.0f, 0.0f};
    CHECK(penalized_pick(1.0f, -0.3f, 0.0f, 64, close, once, 1) == 0);
    CHECK(penalized_pick(1.0f, 0.0f, -0.3f, 64, close, once, 1) == 0);
    /* the window is repeat_last_n: {0, 1} of {0, 0, 0, 1} leaves 0 one use:
     * 2.0 - 0.3 = 1.7 > 1.5 - 0.3; all of it: 2.0 - 0.9 = 1.1 < 1.2 */
    int32_t history[4] = {0, 0, 0, 1};
    CHECK(penalized_pick(1.0f, 0.3f, 0.0f, 2, logits, history, 4) == 0);
    CHECK(penalized_pick(1.0f, 0.3f, 0.0f, -1, logits, history, 4) == 1);
    /* after the repeat penalty: 2.0 / 2 - 0.1 = 0.9 < 0.95 (subtracting
     * first would give (2.0 - 0.1) / 2 = 0.95, a tie the lower id wins) */
    float order[4] = {2.0f, 0.95f, 0.0f, 0.0f};
    CHECK(penalized_pick(2.0f, 0.0f, 0.1f, 64, order, once, 1) == 1);
    /* off (0, 0) with a history: the plain argmax */
    CHECK(penalized_pick(1.0f, 0.0f, 0.0f, 64, logits, thrice, 3) == 0);
}

/* bmoe_logprobs on rows whose softmax is known: logits log 1, log 2, log 5
 * give 1/8, 2/8 and 5/8. */
static void test_logprobs(void)
{
    float row[6] = {logf(1.0f), logf(2.0f), logf(5.0f), -INFINITY, NAN, logf(2.0f)};
    /* with token 5 also at log 2: the shares are 1, 2, 5, 0, 0, 2 of 10 */
    bmoe_token_logprob top[4];
    float lp = bmoe_logprobs(row, 6, 2, 4, top);
    CHECK(fabsf(lp - logf(0.5f)) < 1e-6f);
    CHECK(top[0].token == 2 && fabsf(top[0].logprob - logf(0.5f)) < 1e-6f);
    /* equal logits: the lower id first */
    CHECK(top[1].token == 1 && top[2].token == 5 && fabsf(top[1].logprob - logf(0.2f)) < 1e-6f &&
          top[1].logprob == top[2].logprob);
    CHECK(top[3].token == 0 && fabsf(top[3].logprob - logf(0.1f)) < 1e-6f);
    /* ruled out: -inf and NaN */
    CHECK(bmoe_logprobs(row, 6, 3, 0, NULL) == -INFINITY && bmoe_logprobs(row, 6, 4, 0, NULL) == -INFINITY);
    /* outside the vocabulary; more top tokens than the vocabulary has */
    CHECK(isnan(bmoe_logprobs(row, 6, 6, 0, NULL)) && isnan(bmoe_logprobs(row, 6, -1, 0, NULL)));
    bmoe_token_logprob all[8];
    bmoe_logprobs(row, 3, 0, 8, all);
    CHECK(all[0].token == 2 && all[1].token == 1 && all[2].token == 0 && fabsf(all[2].logprob - logf(0.125f)) < 1e-6f);
    /* a row that rules out everything */
    float none[2] = {-INFINITY, NAN};
    CHECK(bmoe_logprobs(none, 2, 0, 1, top) == -INFINITY && top[0].token == 0 && top[0].logprob == -INFINITY);
    /* the row's total: log(1 + 2 + 5) */
    CHECK(fabs(bmoe_log_sum_exp(row, 3) - log(8.0)) < 1e-6);
    float infinite[2] = {INFINITY, 0.0f};
    CHECK(bmoe_log_sum_exp(none, 2) == -INFINITY && isnan(bmoe_log_sum_exp(infinite, 2)) &&
          isnan(bmoe_log_sum_exp(row, 0)));
    /* large logits do not overflow */
    float large[2] = {1000.0f, 1000.0f};
    CHECK(fabsf(bmoe_logprobs(large, 2, 1, 0, NULL) - logf(0.5f)) < 1e-6f);
}

static void test_top_k(void)
{
    float logits[5] = {1.0f, 3.0f, 2.5f, 0.0f, 2.0f};
    int32_t counts[5];
    bmoe_sampler_params params = params_with(1.0f, 1, 1.0f, 0.0f);
    count_draws(&params, logits, 5, counts);
    CHECK(counts[1] == DRAWS);

    /* top-2 keeps ids 1 and 2, in the ratio of their softmax */
    params = params_with(1.0f, 2, 1.0f, 0.0f);
    count_draws(&params, logits, 5, counts);
    CHECK(counts[0] == 0 && counts[3] == 0 && counts[4] == 0);
    double expected = 1.0 / (1.0 + exp(-0.5));
    double observed = (double)counts[1] / DRAWS;
    CHECK_MSG(fabs(observed - expected) < 0.02, "top-2 share %.4f, expected %.4f", observed, expected);
}

static void test_top_p(void)
{
    float logits[4] = {logf(0.5f), logf(0.3f), logf(0.15f), logf(0.05f)};
    int32_t counts[4];
    /* 0.5 < 0.7 <= 0.8: the two best stay, renormalized to 0.625 / 0.375 */
    bmoe_sampler_params params = params_with(1.0f, 0, 0.7f, 0.0f);
    count_draws(&params, logits, 4, counts);
    CHECK(counts[2] == 0 && counts[3] == 0);
    double observed = (double)counts[0] / DRAWS;
    CHECK_MSG(fabs(observed - 0.625) < 0.02, "top-p share %.4f, expected 0.625", observed);

    /* top-p 0.99 over a distribution that needs all four */
    params = params_with(1.0f, 0, 0.99f, 0.0f);
    count_draws(&params, logits, 4, counts);
    CHECK(counts[3] > 0);

    /* a flat row of 3000 tokens: top-p 0.5 keeps exactly the 1500 lowest
     * ids (ties broken by id), which needs the sorted prefix to grow many
     * times */
    enum { FLAT = 3000 };
    static float flat[FLAT];
    static int32_t flat_counts[FLAT];
    for (int i = 0; i < FLAT; i++)
        flat[i] = 0.25f;
    params = params_with(1.0f, 0, 0.5f, 0.0f);
    count_draws_n(&params, flat, FLAT, flat_counts, 3000);
    int32_t outside = 0, highest = -1;
    for (int i = 0; i < FLAT; i++) {
        if (flat_counts[i] && i >= FLAT / 2)
            outside++;
        if (flat_counts[i])
            highest = i;
    }
    CHECK(outside == 0);
    CHECK_MSG(highest >= FLAT / 2 - 50, "highest kept id %d", highest);
}

static void test_min_p(void)
{
    float logits[5] = {logf(0.5f), logf(0.3f), logf(0.1f), logf(0.04f), logf(0.06f)};
    int32_t counts[5];
    /* min_p 0.15: keep p >= 0.075 -> ids 0, 1, 2 */
    bmoe_sampler_params params = params_with(1.0f, 0, 1.0f, 0.15f);
    count_draws(&params, logits, 5, counts);
    CHECK(counts[3] == 0 && counts[4] == 0);
    CHECK(counts[0] > 0 && counts[1] > 0 && counts[2] > 0);
    double observed = (double)counts[2] / DRAWS;
    CHECK_MSG(fabs(observed - 0.1 / 0.9) < 0.02, "min-p share %.4f, expected %.4f", observed, 0.1 / 0.9);
}

static void test_temperature(void)
{
    float logits[2] = {1.0f, 0.0f};
    int32_t counts[2];
    bmoe_sampler_params params = params_with(2.0f, 0, 1.0f, 0.0f);
    count_draws(&params, logits, 2, counts);
    double expected = 1.0 / (1.0 + exp(-0.5));
    double observed = (double)counts[0] / DRAWS;
    CHECK_MSG(fabs(observed - expected) < 0.02, "T=2 share %.4f, expected %.4f", observed, expected);

    params = params_with(0.5f, 0, 1.0f, 0.0f);
    count_draws(&params, logits, 2, counts);
    expected = 1.0 / (1.0 + exp(-2.0));
    observed = (double)counts[0] / DRAWS;
    CHECK_MSG(fabs(observed - expected) < 0.02, "T=0.5 share %.4f, expected %.4f", observed, expected);
}

/* The chain order: top-k renormalizes before top-p; min-p and top-p look at
 * the logits before temperature. */
static void test_order(void)
{
    float logits[4] = {logf(0.4f), logf(0.3f), logf(0.2f), logf(0.1f)};
    int32_t counts[4];
    /* without top-k, top-p 0.75 needs three tokens (0.4, 0.7, 0.9) */
    bmoe_sampler_params params = params_with(1.0f, 0, 0.75f, 0.0f);
    count_draws(&params, logits, 4, counts);
    CHECK(counts[2] > 0 && counts[3] == 0);
    /* after top-3 the shares are 0.44, 0.33, 0.22: two tokens reach 0.75 */
    params = params_with(1.0f, 3, 0.75f, 0.0f);
    count_draws(&params, logits, 4, counts);
    CHECK(counts[0] > 0 && counts[1] > 0 && counts[2] == 0 && counts[3] == 0);

    /* p1/p0 = 0.08 < min_p 0.1 at temperature 1, so id 1 is gone even though
     * temperature 10 would make it almost as likely as id 0 */
    float pair[2] = {0.0f, logf(0.08f)};
    int32_t pair_counts[2];
    params = params_with(10.0f, 0, 1.0f, 0.1f);
    count_draws(&params, pair, 2, pair_counts);
    CHECK(pair_counts[0] == DRAWS);
    params = params_with(10.0f, 0, 1.0f, 0.0f);
    count_draws(&params, pair, 2, pair_counts);
    CHECK(pair_counts[1] > DRAWS / 3);
}

static void test_seed(void)
{
    enum { VOCAB = 100, STEPS = 200 };
    float logits[VOCAB];
    for (int i = 0; i < VOCAB; i++)
        logits[i] = 0.01f * (float)i;
    bmoe_sampler_params params = params_with(1.0f, 0, 1.0f, 0.0f);
    int32_t first[STEPS], second[STEPS], other[STEPS];
    bmoe_sampler *a = bmoe_sampler_create(&params, VOCAB, NULL);
    bmoe_sampler *b = bmoe_sampler_create(&params, VOCAB, NULL);
    params.seed = 1235;
    bmoe_sampler *c = bmoe_sampler_create(&params, VOCAB, NULL);
    CHECK(a && b && c);
    if (!a || !b || !c)
        return;
    int differences = 0, distinct = 0;
    int seen[VOCAB] = {0};
    for (int i = 0; i < STEPS; i++) {
        first[i] = bmoe_sampler_sample(a, logits, NULL, 0);
        second[i] = bmoe_sampler_sample(b, logits, NULL, 0);
        other[i] = bmoe_sampler_sample(c, logits, NULL, 0);
        differences += first[i] != other[i];
        if (first[i] >= 0 && first[i] < VOCAB && !seen[first[i]]++)
            distinct++;
    }
    CHECK(memcmp(first, second, sizeof first) == 0);
    CHECK(differences > STEPS / 2);
    CHECK(distinct > 50);
    bmoe_sampler_free(a);
    bmoe_sampler_free(b);
    bmoe_sampler_free(c);
}

static void test_bad_params(void)
{
    bmoe_sampler_params params = bmoe_sampler_default_params();
    CHECK(bmoe_sampler_create(&params, 0, NULL) == NULL);
    CHECK(bmoe_sampler_create(&params, -5, NULL) == NULL);
    CHECK(bmoe_sampler_create(NULL, 10, NULL) == NULL);
    params.repeat_penalty = 0.0f;
    bmoe_error error = {0};
    CHECK(bmoe_sampler_create(&params, 10, &error) == NULL);
    CHECK(error.status == BMOE_ERR_INVALID_ARGUMENT && strstr(error.message, "repeat penalty") != NULL);
    params = bmoe_sampler_default_params();
    params.temperature = NAN;
    CHECK(bmoe_sampler_create(&params, 10, &error) == NULL);
    CHECK(error.status == BMOE_ERR_INVALID_ARGUMENT && strstr(error.message, "temperature") != NULL);
    params = bmoe_sampler_default_params();
    params.frequency_penalty = NAN;
    CHECK(bmoe_sampler_create(&params, 10, &error) == NULL);
    CHECK(error.status == BMOE_ERR_INVALID_ARGUMENT && strstr(error.message, "frequency") != NULL);
    params = bmoe_sampler_default_params();
    params.presence_penalty = INFINITY;
    CHECK(bmoe_sampler_create(&params, 10, &error) == NULL);
    CHECK(error.status == BMOE_ERR_INVALID_ARGUMENT && strstr(error.message, "presence") != NULL);
    bmoe_sampler_free(NULL);
    /* infinite logits never produce NaN probabilities */
    params = params_with(1.0f, 0, 0.9f, 0.05f);
    bmoe_sampler *sampler = bmoe_sampler_create(&params, 3, NULL);
    CHECK(sampler != NULL);
    float infinite[3] = {0.0f, INFINITY, -INFINITY};
    CHECK(bmoe_sampler_sample(sampler, infinite, NULL, 0) == 1);
    float all_minus[3] = {-INFINITY, -INFINITY, -INFINITY};
    int32_t token = bmoe_sampler_sample(sampler, all_minus, NULL, 0);
    CHECK(token >= 0 && token < 3);
    bmoe_sampler_free(sampler);
}

/* Logit biases come first: a bias turns greedy's choice, -inf bans a token,
 * biases of one token add up, penalties apply to the biased logit, a
 * sampled draw follows the biased softmax; the sampler keeps its own copy;
 * bad biases are refused. */
static void test_logit_bias(void)
{
    float logits[4] = {1.0f, 3.0f, 2.0f, 0.0f};
    bmoe_logit_bias biases[3] = {{2, 1.5f}, {0, 1.0f}, {0, 1.5f}};
    bmoe_sampler_params params = bmoe_sampler_default_params();
    params.logit_bias = biases;
    params.n_logit_bias = 1;
    bmoe_sampler *sampler = bmoe_sampler_create(&params, 4, NULL);
    biases[0].token = 3; /* the sampler's copy is what counts */
    CHECK(sampler && bmoe_sampler_sample(sampler, logits, NULL, 0) == 2); /* 2 + 1.5 > 3 */
    bmoe_sampler_free(sampler);
    params.logit_bias = biases + 1; /* 1 + 1 + 1.5 = 3.5 > 3 */
    params.n_logit_bias = 2;
    sampler = bmoe_sampler_create(&params, 4, NULL);
    CHECK(sampler && bmoe_sampler_sample(sampler, logits, NULL, 0) == 0);
    bmoe_sampler_free(sampler);
    params.n_logit_bias = 1; /* 1 + 1 = 2 < 3 */
    sampler = bmoe_sampler_create(&params, 4, NULL);
    CHECK(sampler && bmoe_sampler_sample(sampler, logits, NULL, 0) == 1);
    bmoe_sampler_free(sampler);

    /* -inf bans the best token, even from a draw at a high temperature */
    bmoe_logit_bias ban = {1, -INFINITY};
    params = params_with(2.0f, 0, 1.0f, 0.0f);
    params.logit_bias = &ban;
    params.n_logit_bias = 1;
    int32_t counts[4];
    count_draws(&params, logits, 4, counts);
    CHECK_MSG(counts[1] == 0 && counts[0] > 0 && counts[2] > 0 && counts[3] > 0, "banned token drawn %d times",
              counts[1]);

    /* the draw follows the biased softmax: logits {1, 3, 2, 0} + {0, 0, 0, 3} = {1, 3, 2, 3} */
    bmoe_logit_bias raise = {3, 3.0f};
    params = params_with(1.0f, 0, 1.0f, 0.0f);
    params.logit_bias = &raise;
    params.n_logit_bias = 1;
    count_draws(&params, logits, 4, counts);
    double total = exp(1.0) + 2 * exp(3.0) + exp(2.0);
    for (int i = 0; i < 4; i++) {
        double expected = exp((double)(i == 0 ? 1 : i == 2 ? 2 : 3)) / total * DRAWS;
        CHECK_MSG(fabs(counts[i] - expected) < 5 * sqrt(expected) + 5, "token %d: %d draws, expected %.0f", i,
                  counts[i], expected);
    }

    /* the repeat penalty divides the biased logit: (2 + 4) / 2 = 3 ties token 1's 3, the lower id wins */
    bmoe_logit_bias lift = {2, 4.0f};
    params = bmoe_sampler_default_params();
    params.logit_bias = &lift;
    params.n_logit_bias = 1;
    params.repeat_penalty = 2.0f;
    int32_t history[1] = {2};
    sampler = bmoe_sampler_create(&params, 4, NULL);
    CHECK(sampler && bmoe_sampler_sample(sampler, logits, history, 1) == 1);
    bmoe_sampler_free(sampler);

    bmoe_logit_bias bad[3] = {{4, 1.0f}, {-1, 1.0f}, {0, NAN}};
    for (int i = 0; i < 3; i++) {
        params = bmoe_sampler_default_params();
        params.logit_bias = &bad[i];
        params.n_logit_bias = 1;
        bmoe_error error = {0};
        CHECK_MSG(bmoe_sampler_create(&params, 4, &error) == NULL && error.status == BMOE_ERR_INVALID_ARGUMENT,
                  "bad bias %d accepted", i);
    }
    params = bmoe_sampler_default_params();
    params.n_logit_bias = 1;
    CHECK(bmoe_sampler_create(&params, 4, NULL) == NULL);
}

int main(void)
{
    test_greedy();
    test_repeat_penalty();
    test_frequency_presence_penalties();
    test_logprobs();
    test_top_k();
    test_top_p();
    test_min_p();
    test_temperature();
    test_order();
    test_seed();
    test_bad_params();
    test_logit_bias();
    return test_finish();
}
