/* AVX-512 activation quantizers: Q8_K (the K-quants' activations), Q8_0 (the
 * 32-element formats' and MXFP4's) and F16 (f16 KV-cache queries and
 * entries). Each gives exactly the bytes of the quant table's reference
 * quantize_row (quant_kquants.c, quant_legacy.c, quant_float.c):
 * decode quantizes every activation row on the main thread between parallel
 * steps, and the scalar reference spent 1-2 ms per qwen3-30b-a3b token there.
 * Private to src/kernels; tested against the reference in test_kernels. */
#include <immintrin.h>

#include "dot_common.h"
#include "kernels_dispatch.h"

/* Rounded values to int8 quants with the reference's clamp: NaN -> 0, then
 * [-128, 127]. */
static inline __m128i avx512_clamp_quant(__m512 rounded)
{
    __mmask16 nan = _mm512_cmp_ps_mask(rounded, rounded, _CMP_UNORD_Q);
    __m512 clamped = _mm512_min_ps(_mm512_max_ps(rounded, _mm512_set1_ps(-128.0f)), _mm512_set1_ps(127.0f));
    return _mm512_cvtepi32_epi8(_mm512_maskz_cvtps_epi32((__mmask16)~nan, clamped));
}

/* Q8_K, per block of 256: the largest magnitude and the first value that has
 * it (its sign sets the scale's sign), then round-half-even of x * iscale,
 * clamped to [-128, 127] with NaN -> 0, and the sums of each 16 quants. */
void avx512_quantize_row_q8_k(const float *src, void *dst, int64_t n)
{
    block_q8_k *blocks = dst;
    const __m512 sign_off = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float *x = src + QK_K * b;
        block_q8_k *block = &blocks[b];
        /* max_ps(v, acc) returns acc when v is NaN: NaNs are skipped, as
         * the reference's strict comparison skips them. */
        __m512 amax_v = _mm512_setzero_ps();
        for (int j = 0; j < QK_K; j += 16)
            amax_v = _mm512_max_ps(_mm512_and_ps(_mm512_loadu_ps(x + j), sign_off), amax_v);
        float amax = _mm512_reduce_max_ps(amax_v);
        if (amax == 0.0f) {
            memset(block, 0, sizeof *block);
            continue;
        }
        float max = 0.0f;
        for (int j = 0; j < QK_K; j += 16) {
            __mmask16 hit = _mm512_cmp_ps_mask(_mm512_and_ps(_mm512_loadu_ps(x + j), sign_off),
                                               _mm512_set1_ps(amax), _CMP_EQ_OQ);
            if (hit) {
                max = x[j + __builtin_ctz(hit)];
                break;
            }
        }
        float iscale = -127.0f / max;
        const __m512 scale = _mm512_set1_ps(iscale);
        for (int j = 0; j < QK_K; j += 16) {
            __m128i q = avx512_clamp_quant(_mm512_roundscale_ps(_mm512_mul_ps(_mm512_loadu_ps(x + j), scale),
                                                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
            _mm_storeu_si128((__m128i *)(block->qs + j), q);
            block->bsums[j / 16] = (int16_t)_mm512_reduce_add_epi32(_mm512_cvtepi8_epi32(q));
        }
        block->d = 1.0f / iscale;
    }
}

/* Q8_0, per block of 32: d = max|x| / 127, quants round(x / d) half away
 * from zero (roundf) with the reference's clamp, d stored as f16. */
void avx512_quantize_row_q8_0(const float *src, void *dst, int64_t n)
{
    block_q8_0 *blocks = dst;
    const __m512 sign_off = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    const __m512 sign_bit = _mm512_castsi512_ps(_mm512_set1_epi32((int)0x80000000u));
    for (int64_t b = 0; b < n / 32; b++) {
        const float *x = src + 32 * b;
        __m512 v[2] = {_mm512_loadu_ps(x), _mm512_loadu_ps(x + 16)};
        /* max_ps(v, acc) returns acc when v is NaN: NaNs are skipped. */
        __m512 amax_v = _mm512_max_ps(_mm512_and_ps(v[1], sign_off),
                                      _mm512_max_ps(_mm512_and_ps(v[0], sign_off), _mm512_setzero_ps()));
        float d = _mm512_reduce_max_ps(amax_v) / 127.0f;
        const __m512 inverse = _mm512_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
        for (int k = 0; k < 2; k++) {
            __m512 s = _mm512_mul_ps(v[k], inverse);
            /* roundf: truncate, then a step away from zero when the dropped
             * part is at least one half (exact: |s - trunc(s)| < 1) */
            __m512 t = _mm512_roundscale_ps(s, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
            __mmask16 up = _mm512_cmp_ps_mask(_mm512_and_ps(_mm512_sub_ps(s, t), sign_off), _mm512_set1_ps(0.5f),
                                              _CMP_GE_OQ);
            __m512 one = _mm512_or_ps(_mm512_set1_ps(1.0f), _mm512_and_ps(s, sign_bit));
            _mm_storeu_si128((__m128i *)(blocks[b].qs + 16 * k), avx512_clamp_quant(_mm512_mask_add_ps(t, up, t, one)));
        }
        blocks[b].d = fp32_to_fp16(d);
    }
}

/* F16: the hardware conversion rounds to nearest even and quiets NaNs by
 * setting the top mantissa bit, as fp32_to_fp16 does. */
void avx512_quantize_row_f16(const float *src, void *dst, int64_t n)
{
    uint16_t *h = dst;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(h + i),
                            _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    if (i < n) {
        __mmask16 tail = (__mmask16)((1u << (n - i)) - 1);
        __m256i half = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(tail, src + i),
                                       _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm256_mask_storeu_epi16(h + i, tail, half);
    }
}
