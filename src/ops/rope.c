/* Rotary position embedding, NORM and NEOX pairings, with YaRN. Angles are
 * computed like the reference engine: incrementally in float (t *= theta_scale
 * per pair, not pow per pair), so that positions far from 0 agree to float
 * precision (architectures.md 1.5). */
#include <math.h>

#include "ops.h"

rope_config rope_config_default(enum rope_type type, int n_rot, float freq_base)
{
    rope_config config = {
        .type = type,
        .n_rot = n_rot,
        .freq_base = freq_base,
        .freq_scale = 1.0f,
        .ext_factor = 0.0f,
        .attn_factor = 1.0f,
        .beta_fast = 32.0f,
        .beta_slow = 1.0f,
        .n_ctx_orig = 0,
        .freq_factors = NULL,
    };
    return config;
}

/* Dimension (in pairs * 2) where the wavelength reaches n_ctx_orig / beta. */
static float rope_yarn_correction_dim(int n_rot, int n_ctx_orig, float beta, float base)
{
    return (float)n_rot * logf((float)n_ctx_orig / (beta * 2.0f * (float)M_PI)) / (2.0f * logf(base));
}

void rope_cache_fill(const rope_config *config, int32_t position, float *cache)
{
    int half = config->n_rot / 2;
    float theta_scale = powf(config->freq_base, -2.0f / (float)config->n_rot);
    float low = 0.0f, high = 0.0f;
    float magnitude = config->attn_factor;
    if (config->ext_factor != 0.0f) {
        low = floorf(rope_yarn_correction_dim(config->n_rot, config->n_ctx_orig, config->beta_fast,
                                              config->freq_base));
        high = ceilf(rope_yarn_correction_dim(config->n_rot, config->n_ctx_orig, config->beta_slow,
                                              config->freq_base));
        if (low < 0.0f)
            low = 0.0f;
        if (high > (float)(config->n_rot - 1))
            high = (float)(config->n_rot - 1);
        magnitude *= 1.0f + 0.1f * logf(1.0f / config->freq_scale);
    }
    float t = (float)position;
    for (int i = 0; i < half; i++) {
        float divisor = config->freq_factors ? config->freq_factors[i] : 1.0f;
        float theta_extrap = t / divisor;
        float theta_interp = config->freq_scale * theta_extrap;
        float theta = theta_interp;
        if (config->ext_factor != 0.0f) {
            float span = high - low;
            if (span < 0.001f)
                span = 0.001f;
            float y = ((float)i - low) / span;
            float ramp = 1.0f - fminf(1.0f, fmaxf(0.0f, y));
            float mix = ramp * config->ext_factor;
            theta = theta_interp * (1.0f - mix) + theta_extrap * mix;
        }
        cache[i] = cosf(theta) * magnitude;
        cache[half + i] = sinf(theta) * magnitude;
        t *= theta_scale;
    }
}

/* The rotation by the cache row's angles, or by minus them (inverse). */
static inline void rope_rotate(const rope_config *config, float *x, int head_dim, int n_heads, const float *cache,
                               bool inverse)
{
    int half = config->n_rot / 2;
    const float *cosines = cache;
    const float *sines = cache + half;
    for (int h = 0; h < n_heads; h++) {
        float *head = x + (int64_t)h * head_dim;
        for (int i = 0; i < half; i++) {
            int first = config->type == ROPE_NEOX ? i : 2 * i;
            int second = config->type == ROPE_NEOX ? i + half : 2 * i + 1;
            float a = head[first];
            float b = head[second];
            float sine = inverse ? -sines[i] : sines[i];
            head[first] = a * cosines[i] - b * sine;
            head[second] = a * sine + b * cosines[i];
        }
    }
}

void rope_apply(const rope_config *config, float *x, int head_dim, int n_heads, const float *cache)
{
    rope_rotate(config, x, head_dim, n_heads, cache, false);
}

void rope_undo(const rope_config *config, float *x, int head_dim, int n_heads, const float *cache)
{
    rope_rotate(config, x, head_dim, n_heads, cache, true);
}
