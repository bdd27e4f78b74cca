/* Streaming text output. A token's piece may end inside a UTF-8 sequence
 * (byte-fallback tokens, byte-level BPE tokens that split a character), so
 * the last incomplete sequence is held back until the next piece completes
 * it; anything that cannot become a valid sequence is printed as it is,
 * never swallowed. */
#include <string.h>

#include "cli/cli.h"

void cli_text_output_init(cli_text_output *output, FILE *stream)
{
    output->stream = stream;
    output->n_pending = 0;
}

/* The length of the sequence a lead byte starts: 0 for a continuation or
 * an invalid byte, 1 for ASCII. */
static int cli_utf8_sequence_length(unsigned char byte)
{
    if (byte < 0x80)
        return 1;
    if (byte >= 0xc2 && byte <= 0xdf)
        return 2;
    if (byte >= 0xe0 && byte <= 0xef)
        return 3;
    if (byte >= 0xf0 && byte <= 0xf4)
        return 4;
    return 0;
}

void cli_text_output_write(cli_text_output *output, const char *bytes, size_t length)
{
    size_t total = (size_t)output->n_pending + length;
    /* byte i of pending followed by bytes */
#define CLI_BYTE_AT(i) ((i) < (size_t)output->n_pending ? output->pending[(i)] \
                                                         : (unsigned char)bytes[(i) - (size_t)output->n_pending])
    size_t hold = 0;
    for (size_t back = 1; back <= 3 && back <= total; back++) {
        unsigned char byte = CLI_BYTE_AT(total - back);
        if ((byte & 0xc0) == 0x80)
            continue; /* a continuation byte: look further back for its lead */
        int needed = cli_utf8_sequence_length(byte);
        if (needed > (int)back)
            hold = back;
        break;
    }
    size_t emit = total - hold;
    size_t from_pending = emit < (size_t)output->n_pending ? emit : (size_t)output->n_pending;
    if (from_pending)
        fwrite(output->pending, 1, from_pending, output->stream);
    if (emit > from_pending)
        fwrite(bytes, 1, emit - from_pending, output->stream);
    unsigned char kept[4];
    for (size_t i = 0; i < hold; i++)
        kept[i] = CLI_BYTE_AT(emit + i);
#undef CLI_BYTE_AT
    memcpy(output->pending, kept, hold);
    output->n_pending = (int)hold;
    fflush(output->stream);
}

void cli_text_output_finish(cli_text_output *output)
{
    if (output->n_pending)
        fwrite(output->pending, 1, (size_t)output->n_pending, output->stream);
    output->n_pending = 0;
    fflush(output->stream);
}
