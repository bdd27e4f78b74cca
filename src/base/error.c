#include "error.h"

#include <stdarg.h>
#include <stdio.h>

static void error_format(bmoe_error *err, bmoe_status status, const char *fmt, va_list args)
{
    vsnprintf(err->message, sizeof err->message, fmt, args);
    err->status = status;
}

int error_set(bmoe_error *err, const char *fmt, ...)
{
    if (err) {
        va_list args;
        va_start(args, fmt);
        error_format(err, BMOE_OK, fmt, args);
        va_end(args);
    }
    return -1;
}

int error_set_status(bmoe_error *err, bmoe_status status, const char *fmt, ...)
{
    if (err) {
        va_list args;
        va_start(args, fmt);
        error_format(err, status, fmt, args);
        va_end(args);
    }
    return -1;
}

void error_clear(bmoe_error *err)
{
    if (err) {
        err->message[0] = '\0';
        err->status = BMOE_OK;
    }
}

bmoe_status error_classify(bmoe_error *err, bmoe_status fallback)
{
    if (err->status == BMOE_OK)
        err->status = fallback;
    return err->status;
}
