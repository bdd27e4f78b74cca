#include "utf8.h"

enum utf8_scan utf8_scan(const unsigned char *bytes, size_t length, size_t *sequence_length)
{
    unsigned char lead = bytes[0];
    if (lead < 0x80) {
        *sequence_length = 1;
        return UTF8_VALID;
    }
    size_t needed;
    unsigned char second_low = 0x80, second_high = 0xbf;
    if (lead >= 0xc2 && lead <= 0xdf) {
        needed = 2;
    } else if (lead >= 0xe0 && lead <= 0xef) {
        needed = 3;
        if (lead == 0xe0)
            second_low = 0xa0; /* no overlong forms */
        else if (lead == 0xed)
            second_high = 0x9f; /* no surrogates */
    } else if (lead >= 0xf0 && lead <= 0xf4) {
        needed = 4;
        if (lead == 0xf0)
            second_low = 0x90;
        else if (lead == 0xf4)
            second_high = 0x8f; /* nothing above U+10FFFF */
    } else {
        *sequence_length = 1; /* a continuation byte, C0, C1 or F5..FF */
        return UTF8_INVALID;
    }
    for (size_t i = 1; i < needed; i++) {
        if (i == length) {
            *sequence_length = length;
            return UTF8_INCOMPLETE;
        }
        unsigned char low = i == 1 ? second_low : 0x80, high = i == 1 ? second_high : 0xbf;
        if (bytes[i] < low || bytes[i] > high) {
            *sequence_length = i;
            return UTF8_INVALID;
        }
    }
    *sequence_length = needed;
    return UTF8_VALID;
}
