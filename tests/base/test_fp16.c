/* fp16/bf16 conversions: exhaustive round trip of every half, rounding of
 * values between halves, and the bf16 rules of quant-formats.md 2.3. */
#include "base/fp16.h"
#include "test.h"

#include <math.h>

int main(void)
{
    int round_trip_failures = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = fp16_to_fp32((uint16_t)h);
        if (isnan(f))
            continue;
        if (fp32_to_fp16(f) != h)
            round_trip_failures++;
    }
    CHECK_MSG(round_trip_failures == 0, "%d halves do not round-trip", round_trip_failures);

    CHECK(fp16_to_fp32(0x3c00) == 1.0f);
    CHECK(fp16_to_fp32(0xc000) == -2.0f);
    CHECK(fp16_to_fp32(0x0001) == ldexpf(1.0f, -24));
    CHECK(fp16_to_fp32(0x7bff) == 65504.0f);
    CHECK(isinf(fp16_to_fp32(0x7c00)));
    /* 1 + 2^-11 is exactly between 1 and the next half: ties go to even (1). */
    CHECK(fp32_to_fp16(1.0f + ldexpf(1.0f, -11)) == 0x3c00);
    /* 1 + 3*2^-11 is between 0x3c01 and 0x3c02: tie to even (0x3c02). */
    CHECK(fp32_to_fp16(1.0f + 3 * ldexpf(1.0f, -11)) == 0x3c02);
    CHECK(fp32_to_fp16(65520.0f) == 0x7c00);
    CHECK(fp32_to_fp16(65519.0f) == 0x7bff);
    CHECK(fp32_to_fp16(ldexpf(1.0f, -25)) == 0x0000); /* tie to even: zero */
    CHECK(fp32_to_fp16(ldexpf(1.5f, -25)) == 0x0001);
    CHECK((fp32_to_fp16(NAN) & 0x7e00) == 0x7e00);

    CHECK(bf16_to_fp32(0x3f80) == 1.0f);
    CHECK(fp32_to_bf16(1.0f) == 0x3f80);
    CHECK(fp32_to_bf16(fp32_from_bits(0x3f808000u)) == 0x3f80); /* tie to even */
    CHECK(fp32_to_bf16(fp32_from_bits(0x3f818000u)) == 0x3f82);
    CHECK(fp32_to_bf16(fp32_from_bits(0x7fc00001u)) == 0x7fc0);
    return test_finish();
}
