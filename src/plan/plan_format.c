/* plan_format of plan.h: the plan as the lines --plan and --plan-explain
 * print. */
#include "plan.h"

#include <stdarg.h>
#include <stdio.h>

typedef struct text_out {
    char *data;
    size_t size;
    size_t length; /* of the whole text, written or not */
} text_out;

static void put(text_out *out, const char *format, ...) __attribute__((format(printf, 2, 3)));

static void put(text_out *out, const char *format, ...)
{
    size_t room = out->length < out->size ? out->size - out->length : 0;
    va_list args;
    va_start(args, format);
    int wrote = vsnprintf(room ? out->data + out->length : NULL, room, format, args);
    va_end(args);
    if (wrote > 0)
        out->length += (size_t)wrote;
}

size_t plan_format(const plan *p, bool explain, char *data, size_t size)
{
    text_out out = {data, size, 0};
    if (size > 0)
        data[0] = '\0';
    if (p->regime == PLAN_REGIME_DENSE_OVERSIZED)
        put(&out, "plan: %s: %s\n", plan_regime_name(p->regime), p->refusal);
    else if (p->predicted_seconds_per_token > 0)
        put(&out, "plan: %s, predicted %.4g s/token: %s\n", plan_regime_name(p->regime),
            p->predicted_seconds_per_token, p->flags);
    else
        put(&out, "plan: %s, no prediction: %s\n", plan_regime_name(p->regime), p->flags);
    for (int i = 0; explain && i < p->n_decisions; i++) {
        const plan_decision *d = &p->decisions[i];
        put(&out, "  %s = %s (%s): %s\n", d->key, d->value, plan_tag_name(d->tag), d->reason);
    }
    return out.length;
}
