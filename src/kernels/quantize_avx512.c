/* AVX-512 activation quantizers: Q8_K (the K-quants' activations) and F16
 * (f16 KV-cache queries and entries). Each gives exactly the bytes of the
 * quant table's reference quantize_row (quant_kquants.c, quant_float.c):
 * decode quantizes every activation row on the main thread between parallel
 * steps, and the scalar reference spent 1-2 ms per qwen3-30b-a3b token there.
 * Private to src/kernels; tested against the reference in test_kernels. */
#include <immintrin.h>

#include "dot_common.h"
#include "kernels_dispatch.h"

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
            __m512 v = _mm512_roundscale_ps(_mm512_mul_ps(_mm512_loadu_ps(x + j), scale),
                                            _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
            v = _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(-128.0f)), _mm512_set1_ps(127.0f));
            __m512i q = _mm512_maskz_cvtps_epi32((__mmask16)~nan, v);
            _mm_storeu_si128((__m128i *)(block->qs + j), _mm512_cvtepi32_epi8(q));
            block->bsums[j / 16] = (int16_t)_mm512_reduce_add_epi32(q);
        }
        block->d = 1.0f / iscale;
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
