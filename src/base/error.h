/* Error reporting: every fallible function returns a status and fills a bmoe_error
 * with one line naming what failed and where (file, offset, tensor, key).
 * Owns nothing; an error is a plain value the caller keeps on its stack. */
#ifndef BMOE_BASE_ERROR_H
#define BMOE_BASE_ERROR_H

#include <stddef.h>

#define BMOE_ERROR_MAX 512

typedef struct bmoe_error {
    char message[BMOE_ERROR_MAX];
} bmoe_error;

/* Formats the message into err (if err is not NULL) and returns -1, so that
 * `return error_set(err, "...")` reads as "fail with this message". */
int error_set(bmoe_error *err, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Clears the message. */
void error_clear(bmoe_error *err);

#endif
