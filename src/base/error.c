#include "error.h"

#include <stdarg.h>
#include <stdio.h>

int error_set(bmoe_error *err, const char *fmt, ...)
{
    if (err) {
        va_list args;
        va_start(args, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, args);
        va_end(args);
    }
    return -1;
}

void error_clear(bmoe_error *err)
{
    if (err)
        err->message[0] = '\0';
}
