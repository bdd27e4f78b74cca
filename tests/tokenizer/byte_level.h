/* GPT-2 byte-to-unicode (spec 5.2), written out for the tests: the text a
 * byte-level BPE vocabulary stores for each of the 256 byte tokens. */
#ifndef BMOE_TESTS_TOKENIZER_BYTE_LEVEL_H
#define BMOE_TESTS_TOKENIZER_BYTE_LEVEL_H

/* The UTF-8 text of byte's token, NUL-terminated (1 or 2 bytes). Printable
 * bytes stand for themselves; the other 68 take U+0100.. in byte order. */
static inline void byte_text(int byte, char out[4])
{
    int codepoint;
    if ((byte >= 0x21 && byte <= 0x7E) || (byte >= 0xA1 && byte <= 0xAC) || byte >= 0xAE)
        codepoint = byte;
    else if (byte <= 0x20)
        codepoint = 0x100 + byte;
    else if (byte == 0x7F)
        codepoint = 0x121;
    else if (byte <= 0xA0)
        codepoint = 0x122 + (byte - 0x80);
    else
        codepoint = 0x143; /* 0xAD */
    if (codepoint < 0x80) {
        out[0] = (char)codepoint;
        out[1] = 0;
    } else {
        out[0] = (char)(0xC0 | (codepoint >> 6));
        out[1] = (char)(0x80 | (codepoint & 0x3F));
        out[2] = 0;
    }
}

#endif
