/* tm_reasoning.h: the last deltas of a reasoning split. */
#include "tm_reasoning.h"

#include <stdio.h>

int tm_reasoning_finish(bmoe_reasoning *reasoning, const char *text, size_t length, tm_buffer *thinking,
                        tm_buffer *answer, tm_deltas *deltas, bmoe_error *error)
{
    bmoe_reasoning_delta fed, held;
    if (bmoe_reasoning_feed(reasoning, text ? text : "", text ? length : 0, &fed, error) != 0)
        return -1;
    /* the feed's deltas are copied before the finish reuses its buffers */
    tm_buffer_clear(thinking);
    tm_buffer_clear(answer);
    tm_buffer_append(thinking, fed.reasoning, fed.reasoning_length);
    tm_buffer_append(answer, fed.text, fed.text_length);
    bool reset = fed.reset;
    if (bmoe_reasoning_finish(reasoning, &held, error) != 0)
        return -1;
    if (reset || held.reset) { /* a snapshot replaces everything: the whole state after the finish */
        tm_buffer_clear(thinking);
        tm_buffer_clear(answer);
        size_t n;
        const char *all = bmoe_reasoning_thinking(reasoning, &n);
        tm_buffer_append(thinking, all, n);
        all = bmoe_reasoning_answer(reasoning, &n);
        tm_buffer_append(answer, all, n);
        reset = true;
    } else {
        tm_buffer_append(thinking, held.reasoning, held.reasoning_length);
        tm_buffer_append(answer, held.text, held.text_length);
    }
    if (thinking->failed || answer->failed) {
        snprintf(error->message, sizeof error->message, "out of memory for the reasoning's last text");
        error->status = BMOE_ERR_OUT_OF_MEMORY;
        return -1;
    }
    *deltas = (tm_deltas){tm_buffer_text(thinking), thinking->length, tm_buffer_text(answer), answer->length, reset};
    return 0;
}
