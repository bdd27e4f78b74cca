/* AVX2 (+F16C) activation quantizers: Q8_K, Q8_0 and F16, byte-identical to the
 * quant table's reference quantize_row; see quantize_avx512.c for why they
 * exist. Private to src/kernels; tested against the reference in
 * test_kernels. */
#include <immintrin.h>

#include "dot_common.h"
#include "kernels_dispatch.h"

static inline float avx2_hmax(__m256 v)
{
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

/* Rounded values to int32 quants with the reference's clamp: NaN -> 0, then
 * [-128, 127]. */
static inline __m256i avx2_clamp_quant(__m256 rounded)
{
    __m256 ordered = _mm256_cmp_ps(rounded, rounded, _CMP_ORD_Q);
    __m256 clamped = _mm256_min_ps(_mm256_max_ps(rounded, _mm256_set1_ps(-128.0f)), _mm256_set1_ps(127.0f));
    return _mm256_and_si256(_mm256_cvtps_epi32(clamped), _mm256_castps_si256(ordered));
}

/* Sixteen int32 quants (already in int8 range) stored as int8, in order:
 * the packs work per 128-bit lane. */
static inline void avx2_store_quants(int8_t *out, __m256i q0, __m256i q1)
{
    __m256i words = _mm256_permute4x64_epi64(_mm256_packs_epi32(q0, q1), 0xd8);
    _mm_storeu_si128((__m128i *)out,
                     _mm_packs_epi16(_mm256_castsi256_si128(words), _mm256_extracti128_si256(words, 1)));
}

void avx2_quantize_row_q8_k(const float *src, void *dst, int64_t n)
{
    block_q8_k *blocks = dst;
    const __m256 sign_off = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float *x = src + QK_K * b;
        block_q8_k *block = &blocks[b];
        /* max_ps(v, acc) returns acc when v is NaN: NaNs are skipped. */
        __m256 amax_v = _mm256_setzero_ps();
        for (int j = 0; j < QK_K; j += 8)
            amax_v = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + j), sign_off), amax_v);
        float amax = avx2_hmax(amax_v);
        if (amax == 0.0f) {
            memset(block, 0, sizeof *block);
            continue;
        }
        float max = 0.0f;
        for (int j = 0; j < QK_K; j += 8) {
            __m256 eq = _mm256_cmp_ps(_mm256_and_ps(_mm256_loadu_ps(x + j), sign_off), _mm256_set1_ps(amax),
                                      _CMP_EQ_OQ);
            int hit = _mm256_movemask_ps(eq);
            if (hit) {
                max = x[j + __builtin_ctz((unsigned)hit)];
                break;
            }
        }
        float iscale = -127.0f / max;
        const __m256 scale = _mm256_set1_ps(iscale);
        for (int j = 0; j < QK_K; j += 16) {
            __m256i q[2];
            for (int k = 0; k < 2; k++)
                q[k] = avx2_clamp_quant(_mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + j + 8 * k), scale),
                                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
            avx2_store_quants(block->qs + j, q[0], q[1]);
            __m256i sum = _mm256_add_epi32(q[0], q[1]);
            __m128i s = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
            s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
            s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
            block->bsums[j / 16] = (int16_t)_mm_cvtsi128_si32(s);
        }
        block->d = 1.0f / iscale;
    }
}

/* Q8_0: see avx512_quantize_row_q8_0. */
void avx2_quantize_row_q8_0(const float *src, void *dst, int64_t n)
{
    block_q8_0 *blocks = dst;
    const __m256 sign_off = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 sign_bit = _mm256_castsi256_ps(_mm256_set1_epi32((int)0x80000000u));
    for (int64_t b = 0; b < n / 32; b++) {
        const float *x = src + 32 * b;
        __m256 v[4];
        __m256 amax_v = _mm256_setzero_ps();
        for (int k = 0; k < 4; k++) {
            v[k] = _mm256_loadu_ps(x + 8 * k);
            amax_v = _mm256_max_ps(_mm256_and_ps(v[k], sign_off), amax_v); /* NaN: keeps amax_v */
        }
        float d = avx2_hmax(amax_v) / 127.0f;
        const __m256 inverse = _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
        __m256i q[4];
        for (int k = 0; k < 4; k++) {
            __m256 s = _mm256_mul_ps(v[k], inverse);
            __m256 t = _mm256_round_ps(s, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
            __m256 up = _mm256_cmp_ps(_mm256_and_ps(_mm256_sub_ps(s, t), sign_off), _mm256_set1_ps(0.5f), _CMP_GE_OQ);
            __m256 one = _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_and_ps(s, sign_bit));
            q[k] = avx2_clamp_quant(_mm256_add_ps(t, _mm256_and_ps(up, one)));
        }
        avx2_store_quants(blocks[b].qs, q[0], q[1]);
        avx2_store_quants(blocks[b].qs + 16, q[2], q[3]);
        blocks[b].d = fp32_to_fp16(d);
    }
}

void avx2_quantize_row_f16(const float *src, void *dst, int64_t n)
{
    uint16_t *h = dst;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(h + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    if (i < n) {
        float tail[8] = {0};
        uint16_t half[8];
        memcpy(tail, src + i, (size_t)(n - i) * sizeof(float));
        _mm_storeu_si128((__m128i *)half,
                         _mm256_cvtps_ph(_mm256_loadu_ps(tail), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        memcpy(h + i, half, (size_t)(n - i) * sizeof(uint16_t));
    }
}
