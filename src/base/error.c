#include "error.h"

#include <stdarg.h>
#include <stdio.h>

#include "text.h"

/* Escaped as a whole: whatever a message quotes (a path, a flag, a
 * template's own text) reaches whoever prints it as one printable line. */
static void error_format(bmoe_error *err, bmoe_status status, const char *fmt, va_list args)
{
    char message[sizeof err->message];
    vsnprintf(message, sizeof message, fmt, args);
    text_escape_message(message, err->message, sizeof err->message);
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
