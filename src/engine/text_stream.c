#include "text_stream.h"

#include <stdlib.h>
#include <string.h>

#include "../base/error.h"
#include "../base/utf8.h"

static int buffer_append(text_buffer *buffer, const char *bytes, size_t length, bmoe_error *err)
{
    if (!text_buffer_append(buffer, bytes, length))
        return error_set_status(err, BMOE_ERR_OUT_OF_MEMORY, "text: out of memory for %zu bytes",
                                buffer->length + length);
    return 0;
}

int text_stream_init(text_stream *stream, const char *const *stops, int n_stops, bmoe_error *err)
{
    memset(stream, 0, sizeof *stream);
    if (n_stops <= 0 || !stops)
        return 0;
    stream->stops = calloc((size_t)n_stops, sizeof *stream->stops);
    stream->stop_lengths = calloc((size_t)n_stops, sizeof *stream->stop_lengths);
    if (!stream->stops || !stream->stop_lengths) {
        text_stream_free(stream);
        return error_set_status(err, BMOE_ERR_OUT_OF_MEMORY, "text: out of memory for %d stop strings", n_stops);
    }
    for (int i = 0; i < n_stops; i++) {
        if (!stops[i] || !stops[i][0])
            continue;
        size_t length = strlen(stops[i]);
        char *copy = malloc(length + 1);
        if (!copy) {
            text_stream_free(stream);
            return error_set_status(err, BMOE_ERR_OUT_OF_MEMORY, "text: out of memory for a stop string");
        }
        memcpy(copy, stops[i], length + 1);
        stream->stops[stream->n_stops] = copy;
        stream->stop_lengths[stream->n_stops] = length;
        stream->n_stops++;
    }
    return 0;
}

void text_stream_free(text_stream *stream)
{
    for (int i = 0; i < stream->n_stops; i++)
        free(stream->stops[i]);
    free(stream->stops);
    free(stream->stop_lengths);
    text_buffer_free(&stream->held);
    text_buffer_free(&stream->delta);
    memset(stream, 0, sizeof *stream);
}

/* Decodes tail + bytes into valid text appended to out; an incomplete
 * sequence at the end goes back into the tail unless finishing. */
static int decode_utf8(text_stream *stream, const char *bytes, size_t length, bool finishing, text_buffer *out,
                       bmoe_error *err)
{
    unsigned char joined[8];
    size_t n_joined = 0;
    /* the tail first, completed from bytes: at most 3 + 4 bytes together */
    while (stream->n_tail > 0) {
        memcpy(joined, stream->tail, stream->n_tail);
        n_joined = stream->n_tail;
        size_t borrowed = 0;
        while (n_joined < sizeof joined && borrowed < length)
            joined[n_joined++] = (unsigned char)bytes[borrowed++];
        size_t sequence;
        enum utf8_scan scan = utf8_scan(joined, n_joined, &sequence);
        if (scan == UTF8_INCOMPLETE && !finishing) {
            memcpy(stream->tail, joined, n_joined); /* still waiting: all of bytes went in */
            stream->n_tail = n_joined;
            return 0;
        }
        if (scan == UTF8_VALID) {
            if (buffer_append(out, (const char *)joined, sequence, err) != 0)
                return -1;
        } else if (buffer_append(out, UTF8_REPLACEMENT, UTF8_REPLACEMENT_BYTES, err) != 0) {
            return -1;
        }
        if (scan == UTF8_INCOMPLETE)
            sequence = n_joined; /* finishing: the whole incomplete tail is one U+FFFD */
        /* what of the joined bytes was not consumed goes back in front */
        if (sequence >= stream->n_tail) {
            size_t used = sequence - stream->n_tail;
            bytes += used;
            length -= used;
            stream->n_tail = 0;
        } else {
            size_t rest = stream->n_tail - sequence;
            memmove(stream->tail, stream->tail + sequence, rest);
            stream->n_tail = rest;
        }
    }
    const unsigned char *cursor = (const unsigned char *)bytes;
    size_t left = length, run_start = 0, done = 0;
    while (done < left) {
        size_t sequence;
        enum utf8_scan scan = utf8_scan(cursor + done, left - done, &sequence);
        if (scan == UTF8_VALID) {
            done += sequence;
            continue;
        }
        if (buffer_append(out, (const char *)cursor + run_start, done - run_start, err) != 0)
            return -1;
        if (scan == UTF8_INCOMPLETE && !finishing) {
            memcpy(stream->tail, cursor + done, sequence);
            stream->n_tail = sequence;
            return 0;
        }
        if (buffer_append(out, UTF8_REPLACEMENT, UTF8_REPLACEMENT_BYTES, err) != 0)
            return -1;
        done += sequence;
        run_start = done;
    }
    return buffer_append(out, (const char *)cursor + run_start, done - run_start, err);
}

/* Moves held text to the delta: all of it up to a stop string, or all but
 * the longest suffix that could still grow into one. */
static int release_held(text_stream *stream, bool finishing, bmoe_error *err)
{
    text_buffer *held = &stream->held;
    size_t stop_at = held->length;
    for (int i = 0; i < stream->n_stops; i++) {
        char *found = held->length >= stream->stop_lengths[i] ? strstr(held->data, stream->stops[i]) : NULL;
        if (found && (size_t)(found - held->data) < stop_at)
            stop_at = (size_t)(found - held->data);
    }
    size_t release = held->length;
    if (stop_at < held->length) {
        release = stop_at;
        stream->stopped = true;
    } else if (!finishing) {
        for (int i = 0; i < stream->n_stops; i++) {
            size_t keep = text_partial_suffix(held->data, held->length, stream->stops[i], stream->stop_lengths[i]);
            if (held->length - keep < release)
                release = held->length - keep;
        }
    }
    if (buffer_append(&stream->delta, held->data ? held->data : "", release, err) != 0)
        return -1;
    if (stream->stopped) {
        held->length = 0;
    } else {
        memmove(held->data, held->data + release, held->length - release);
        held->length -= release;
    }
    if (held->data)
        held->data[held->length] = '\0';
    return stream->stopped ? 1 : 0;
}

int text_stream_push(text_stream *stream, const char *bytes, size_t length, bool check_stops, bmoe_error *err)
{
    if (stream->stopped)
        return 1;
    if (!check_stops || stream->n_stops == 0) {
        /* nothing of it is matched, but earlier held text stays in front */
        if (stream->held.length > 0 && release_held(stream, true, err) < 0)
            return -1;
        return decode_utf8(stream, bytes, length, false, &stream->delta, err);
    }
    if (decode_utf8(stream, bytes, length, false, &stream->held, err) != 0)
        return -1;
    return release_held(stream, false, err);
}

int text_stream_finish(text_stream *stream, bmoe_error *err)
{
    if (stream->stopped)
        return 0;
    text_buffer *target = stream->n_stops > 0 ? &stream->held : &stream->delta;
    if (decode_utf8(stream, "", 0, true, target, err) != 0)
        return -1;
    if (stream->n_stops > 0 && release_held(stream, true, err) < 0)
        return -1;
    return 0;
}

const char *text_stream_take(text_stream *stream, size_t *length)
{
    *length = stream->delta.length;
    const char *text = stream->delta.data ? stream->delta.data : "";
    /* the bytes stay readable until the next append, which starts over */
    stream->delta.length = 0;
    return text;
}
