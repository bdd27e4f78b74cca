/* Sampler: turns one row of logits into the next token. Owns its scratch
 * buffers (sized once at create, so sampling never allocates) and its PRNG
 * state. The chain is fixed: logit biases, penalties (repeat, frequency, presence), top-k,
 * top-p, min-p, temperature, draw; a temperature <= 0 skips the filters and takes the
 * argmax of the penalized logits. Ties are broken towards the lower token id
 * so that results never depend on sort stability. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bmoe.h"

typedef struct sampler_candidate {
    float logit;
    int32_t id;
} sampler_candidate;

struct bmoe_sampler {
    bmoe_sampler_params params;
    int32_t n_vocab;
    float *logits;                  /* [n_vocab] penalized copy of the row */
    sampler_candidate *candidates;  /* [n_vocab] the surviving tokens */
    int32_t *counts;                /* [n_vocab] a token's uses in the penalty window, 0 between calls */
    bmoe_logit_bias *biases;        /* params.logit_bias's copy (params points here) */
    uint64_t rng_state;             /* splitmix64 */
};

bmoe_sampler_params bmoe_sampler_default_params(void)
{
    bmoe_sampler_params params;
    params.temperature = 0.0f;
    params.top_k = 40;
    params.top_p = 0.95f;
    params.min_p = 0.05f;
    params.repeat_penalty = 1.0f;
    params.repeat_last_n = 64;
    params.frequency_penalty = 0.0f;
    params.presence_penalty = 0.0f;
    params.seed = 0;
    params.logit_bias = NULL;
    params.n_logit_bias = 0;
    return params;
}

/* splitmix64: small, fast and good enough for drawing tokens; the same seed
 * always gives the same sequence on every platform. */
static uint64_t sampler_next_random(bmoe_sampler *sampler)
{
    uint64_t z = (sampler->rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A uniform double in [0, 1) with 53 random bits. */
static double sampler_uniform(bmoe_sampler *sampler)
{
    return (double)(sampler_next_random(sampler) >> 11) * (1.0 / 9007199254740992.0);
}

/* Fills error (this file stands alone: its test compiles it without the rest
 * of the engine). Returns NULL. */
static bmoe_sampler *sampler_fail(bmoe_error *error, bmoe_status status, const char *message)
{
    if (error) {
        snprintf(error->message, sizeof error->message, "sampler: %s", message);
        error->status = status;
    }
    return NULL;
}

bmoe_sampler *bmoe_sampler_create(const bmoe_sampler_params *params, int32_t n_vocab, bmoe_error *error)
{
    if (!params)
        return sampler_fail(error, BMOE_ERR_INVALID_ARGUMENT, "no parameters");
    if (n_vocab <= 0)
        return sampler_fail(error, BMOE_ERR_INVALID_ARGUMENT, "the vocabulary is empty");
    if (isnan(params->temperature) || isnan(params->top_p) || isnan(params->min_p))
        return sampler_fail(error, BMOE_ERR_INVALID_ARGUMENT, "temperature, top-p and min-p must be numbers");
    if (!isfinite(params->repeat_penalty) || params->repeat_penalty <= 0.0f)
        return sampler_fail(error, BMOE_ERR_INVALID_ARGUMENT, "the repeat penalty must be a positive number");
    if (!isfinite(params->frequency_penalty) || !isfinite(params->presence_penalty))
        return sampler_fail(error, BMOE_ERR_INVALID_ARGUMENT, "the frequency and presence penalties must be numbers");
    if (params->n_logit_bias < 0 || (params->n_logit_bias > 0 && !params->logit_bias))
        return sampler_fail(error, BMOE_ERR_INVALID_ARGUMENT, "the logit biases are missing");
    for (int32_t i = 0; i < params->n_logit_bias; i++) {
        const bmoe_logit_bias *b = &params->logit_bias[i];
        if (b->token < 0 || b->token >= n_vocab)
            return sampler_fail(error, BMOE_ERR_INVALID_ARGUMENT, "a logit bias names a token not in the vocabulary");
        if (isnan(b->bias) || b->bias == INFINITY)
            return sampler_fail(error, BMOE_ERR_INVALID_ARGUMENT, "a logit bias must be a number (or -infinity)");
    }
    bmoe_sampler *sampler = calloc(1, sizeof *sampler);
    if (!sampler)
        return sampler_fail(error, BMOE_ERR_OUT_OF_MEMORY, "out of memory");
    sampler->params = *params;
    sampler->n_vocab = n_vocab;
    sampler->logits = malloc((size_t)n_vocab * sizeof *sampler->logits);
    sampler->candidates = malloc((size_t)n_vocab * sizeof *sampler->candidates);
    sampler->counts = calloc((size_t)n_vocab, sizeof *sampler->counts);
    size_t bias_bytes = (size_t)params->n_logit_bias * sizeof *sampler->biases;
    sampler->biases = bias_bytes ? malloc(bias_bytes) : NULL;
    if (sampler->biases)
        memcpy(sampler->biases, params->logit_bias, bias_bytes);
    sampler->params.logit_bias = sampler->biases;
    if (!sampler->logits || !sampler->candidates || !sampler->counts || (bias_bytes && !sampler->biases)) {
        bmoe_sampler_free(sampler);
        return sampler_fail(error, BMOE_ERR_OUT_OF_MEMORY, "out of memory for the vocabulary's buffers");
    }
    sampler->rng_state = params->seed;
    return sampler;
}

void bmoe_sampler_free(bmoe_sampler *sampler)
{
    if (!sampler)
        return;
    free(sampler->logits);
    free(sampler->candidates);
    free(sampler->counts);
    free(sampler->biases);
    free(sampler);
}

/* Copies the row, mapping NaN to -inf so that a broken row can never be
 * chosen over a real one. */
static void sampler_copy_logits(bmoe_sampler *sampler, const float *logits)
{
    for (int32_t i = 0; i < sampler->n_vocab; i++)
        sampler->logits[i] = isnan(logits[i]) ? -INFINITY : logits[i];
}

static void sampler_apply_biases(bmoe_sampler *sampler)
{
    for (int32_t i = 0; i < sampler->params.n_logit_bias; i++)
        sampler->logits[sampler->biases[i].token] += sampler->biases[i].bias;
}

/* The penalties look at the last repeat_last_n history entries (< 0: the
 * whole history). Each distinct token there is penalized once: the repeat
 * penalty divides a positive logit and multiplies a negative one (both make
 * the token less likely), then count * frequency_penalty + presence_penalty
 * is subtracted (OpenAI's and llama.cpp's rule; negative values favour the
 * token). */
static bool sampler_penalizes(const bmoe_sampler *sampler, const int32_t *history, int32_t n_history)
{
    const bmoe_sampler_params *params = &sampler->params;
    bool any = params->repeat_penalty != 1.0f || params->frequency_penalty != 0.0f || params->presence_penalty != 0.0f;
    return any && history && n_history > 0 && params->repeat_last_n != 0;
}

static void sampler_apply_penalties(bmoe_sampler *sampler, const int32_t *history, int32_t n_history)
{
    const bmoe_sampler_params *params = &sampler->params;
    if (!sampler_penalizes(sampler, history, n_history))
        return;
    int32_t window = params->repeat_last_n < 0 ? n_history : params->repeat_last_n;
    if (window > n_history)
        window = n_history;
    const int32_t *recent = history + (n_history - window);
    for (int32_t i = 0; i < window; i++)
        if (recent[i] >= 0 && recent[i] < sampler->n_vocab)
            sampler->counts[recent[i]]++;
    for (int32_t i = 0; i < window; i++) {
        int32_t token = recent[i];
        if (token < 0 || token >= sampler->n_vocab || sampler->counts[token] == 0)
            continue;
        float *logit = &sampler->logits[token];
        if (*logit <= 0.0f)
            *logit *= params->repeat_penalty;
        else
            *logit /= params->repeat_penalty;
        *logit -= (float)sampler->counts[token] * params->frequency_penalty + params->presence_penalty;
        sampler->counts[token] = 0; /* done, and clean for the next call */
    }
}

/* Greedy: NaN counts as -inf (as sampler_copy_logits makes it) and the first
 * of equal maxima wins. Two plain passes (the
 * maximum, then where it first occurs) that the compiler vectorizes: decode
 * takes one per token over the whole vocabulary (152k logits for Qwen3). */
static int32_t sampler_argmax_of(const float *logits, int32_t n)
{
    float max = -INFINITY;
    for (int32_t i = 0; i < n; i++)
        max = logits[i] > max ? logits[i] : max;
    if (max == -INFINITY)
        return 0;
    for (int32_t i = 0; i < n; i++)
        if (logits[i] == max)
            return i;
    return 0;
}

static int32_t sampler_argmax(const bmoe_sampler *sampler)
{
    return sampler_argmax_of(sampler->logits, sampler->n_vocab);
}

/* Orders candidates by logit, highest first, then by id. */
static int sampler_candidate_before(const sampler_candidate *a, const sampler_candidate *b)
{
    if (a->logit != b->logit)
        return a->logit > b->logit;
    return a->id < b->id;
}

static int sampler_compare_candidates(const void *left, const void *right)
{
    const sampler_candidate *a = left, *b = right;
    if (sampler_candidate_before(a, b))
        return -1;
    if (sampler_candidate_before(b, a))
        return 1;
    return 0;
}

static void sampler_swap(sampler_candidate *a, sampler_candidate *b)
{
    sampler_candidate t = *a;
    *a = *b;
    *b = t;
}

/* Rearranges candidates[0..n) so that the k best come first (in no
 * particular order): quickselect with a median-of-three pivot, in place. */
static void sampler_select_best(sampler_candidate *candidates, int32_t n, int32_t k)
{
    int32_t low = 0, high = n - 1;
    while (low < high) {
        int32_t middle = low + (high - low) / 2;
        if (sampler_candidate_before(&candidates[middle], &candidates[low]))
            sampler_swap(&candidates[middle], &candidates[low]);
        if (sampler_candidate_before(&candidates[high], &candidates[low]))
            sampler_swap(&candidates[high], &candidates[low]);
        if (sampler_candidate_before(&candidates[high], &candidates[middle]))
            sampler_swap(&candidates[high], &candidates[middle]);
        sampler_candidate pivot = candidates[middle];
        int32_t i = low, j = high;
        while (i <= j) {
            while (sampler_candidate_before(&candidates[i], &pivot))
                i++;
            while (sampler_candidate_before(&pivot, &candidates[j]))
                j--;
            if (i <= j) {
                sampler_swap(&candidates[i], &candidates[j]);
                i++;
                j--;
            }
        }
        if (k - 1 <= j)
            high = j;
        else if (k - 1 >= i)
            low = i;
        else
            return;
    }
}

/* Makes the first `count` candidates the best ones, sorted; returns count
 * clamped to n. Sorting only a prefix keeps large vocabularies cheap. */
static int32_t sampler_sort_prefix(sampler_candidate *candidates, int32_t n, int32_t count)
{
    if (count > n)
        count = n;
    if (count < n)
        sampler_select_best(candidates, n, count);
    qsort(candidates, (size_t)count, sizeof *candidates, sampler_compare_candidates);
    return count;
}

/* Keeps the smallest sorted prefix whose probability (softmax of the
 * current candidates at temperature 1) reaches top_p. The prefix is sorted
 * in growing steps so that a peaked distribution never sorts the whole
 * vocabulary. Returns the new candidate count; candidates come back sorted. */
static int32_t sampler_top_p(sampler_candidate *candidates, int32_t n, int32_t n_sorted, float top_p)
{
    float max_logit = candidates[0].logit;
    if (!isfinite(max_logit))
        return 1; /* an infinite best logit takes all the probability */
    double total = 0.0;
    for (int32_t i = 0; i < n; i++)
        total += exp((double)(candidates[i].logit - max_logit));
    double target = (double)top_p * total;
    double cumulative = 0.0;
    int32_t i = 0;
    for (;;) {
        for (; i < n_sorted; i++) {
            cumulative += exp((double)(candidates[i].logit - max_logit));
            if (cumulative >= target)
                return i + 1;
        }
        if (n_sorted >= n)
            return n;
        /* The unsorted rest is all ranked after the sorted prefix, so
         * extending the prefix keeps the first n_sorted entries in place. */
        int32_t grow = n_sorted < 64 ? 64 : n_sorted;
        int32_t extra = sampler_sort_prefix(candidates + n_sorted, n - n_sorted, grow);
        n_sorted += extra;
    }
}

double bmoe_log_sum_exp(const float *logits, int32_t n_vocab)
{
    if (!logits || n_vocab <= 0)
        return NAN;
    float max = -INFINITY;
    for (int32_t i = 0; i < n_vocab; i++)
        if (logits[i] > max)
            max = logits[i];
    if (!isfinite(max)) /* -inf: no token is possible; +inf: the shares are not numbers */
        return max == INFINITY ? NAN : -INFINITY;
    double total = 0.0;
    for (int32_t i = 0; i < n_vocab; i++)
        if (logits[i] > -INFINITY) /* NaN fails this too */
            total += exp((double)logits[i] - (double)max);
    return (double)max + log(total);
}

/* Whether (logit, id) ranks before other (its logit still in logprob):
 * the sampler's order. */
static bool ranks_before(float logit, int32_t id, const bmoe_token_logprob *other)
{
    sampler_candidate a = {logit, id}, b = {other->logprob, other->token};
    return sampler_candidate_before(&a, &b);
}

/* logit's log-probability given the log of the row's softmax total
 * (-inf: a row without a possible token, where every one is -inf) */
static float logprob_of(float logit, double log_total)
{
    return log_total == -INFINITY ? -INFINITY : (float)((double)logit - log_total);
}

float bmoe_logprobs(const float *logits, int32_t n_vocab, int32_t token, int32_t n_top, bmoe_token_logprob *top)
{
    if (!logits || n_vocab <= 0)
        return NAN;
    if (n_top > n_vocab)
        n_top = n_vocab;
    if (!top || n_top < 0)
        n_top = 0;
    double log_total = bmoe_log_sum_exp(logits, n_vocab);
    /* the best n_top, kept sorted by insertion: a few compares per logit */
    int32_t kept = 0;
    for (int32_t i = 0; i < n_vocab && n_top > 0; i++) {
        float logit = isnan(logits[i]) ? -INFINITY : logits[i];
        if (kept == n_top && !ranks_before(logit, i, &top[kept - 1]))
            continue;
        int32_t at = kept < n_top ? kept++ : kept - 1;
        while (at > 0 && ranks_before(logit, i, &top[at - 1])) {
            top[at] = top[at - 1];
            at--;
        }
        top[at].token = i;
        top[at].logprob = logit;
    }
    for (int32_t k = 0; k < kept; k++)
        top[k].logprob = logprob_of(top[k].logprob, log_total);
    if (token < 0 || token >= n_vocab)
        return NAN;
    return logprob_of(isnan(logits[token]) ? -INFINITY : logits[token], log_total);
}

int32_t bmoe_sampler_sample(bmoe_sampler *sampler, const float *logits,
                            const int32_t *history, int32_t n_history)
{
    if (!sampler || !logits)
        return -1;
    const bmoe_sampler_params *params = &sampler->params;
    if (params->temperature <= 0.0f && !sampler_penalizes(sampler, history, n_history) && params->n_logit_bias == 0)
        return sampler_argmax_of(logits, sampler->n_vocab);
    sampler_copy_logits(sampler, logits);
    sampler_apply_biases(sampler);
    sampler_apply_penalties(sampler, history, n_history);
    if (params->temperature <= 0.0f)
        return sampler_argmax(sampler);

    sampler_candidate *candidates = sampler->candidates;
    int32_t n = sampler->n_vocab;
    for (int32_t i = 0; i < n; i++) {
        candidates[i].logit = sampler->logits[i];
        candidates[i].id = i;
    }

    /* top-k; afterwards the first n_sorted candidates are the best, sorted. */
    int32_t n_sorted;
    if (params->top_k > 0 && params->top_k < n) {
        n = sampler_sort_prefix(candidates, n, params->top_k);
        n_sorted = n;
    } else {
        n_sorted = sampler_sort_prefix(candidates, n, 64);
    }
    if (params->top_p < 1.0f)
        n = sampler_top_p(candidates, n, n_sorted, params->top_p > 0.0f ? params->top_p : 0.0f);
    if (params->min_p > 0.0f) {
        /* p_i >= min_p * p_max  <=>  logit_i >= max_logit + log(min_p); the
         * best candidate always stays. Candidates are not necessarily all
         * sorted here, so this is a filter, not a cut. */
        float threshold = candidates[0].logit + logf(params->min_p);
        int32_t kept = 1;
        for (int32_t i = 1; i < n; i++)
            if (candidates[i].logit >= threshold)
                candidates[kept++] = candidates[i];
        n = kept;
    }

    /* Temperature, then one draw from the softmax of what is left. */
    double inverse_temperature = 1.0 / (double)params->temperature;
    float max_logit = candidates[0].logit;
    if (!isfinite(max_logit))
        return candidates[0].id;
    double total = 0.0;
    for (int32_t i = 0; i < n; i++)
        total += exp((double)(candidates[i].logit - max_logit) * inverse_temperature);
    double target = sampler_uniform(sampler) * total;
    double cumulative = 0.0;
    for (int32_t i = 0; i < n; i++) {
        cumulative += exp((double)(candidates[i].logit - max_logit) * inverse_temperature);
        if (target < cumulative)
            return candidates[i].id;
    }
    return candidates[n - 1].id;
}
