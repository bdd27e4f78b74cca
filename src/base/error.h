/* Error reporting: every fallible function returns a status and fills a bmoe_error
 * (the public struct of include/bmoe.h) with one line naming what failed and
 * where (file, offset, tensor, key). Most internal failures leave the status
 * unclassified (BMOE_OK) and the public function that reports them gives the
 * class its operation implies (a failed load: a bad model); failures whose
 * class differs from that (out of memory, I/O, an abort) say so with
 * error_set_status. Owns nothing; an error is a plain value the caller keeps
 * on its stack. */
#ifndef BMOE_BASE_ERROR_H
#define BMOE_BASE_ERROR_H

#include <stddef.h>

#include "bmoe.h"

/* Formats the message into err (if err is not NULL) as one line of
 * printable ASCII (text_escape_message: what it quotes from outside cannot
 * reach a terminal raw), leaves the status unclassified and returns -1, so
 * that `return error_set(err, "...")` reads as "fail with this message". */
int error_set(bmoe_error *err, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* error_set with a status class. Returns -1. */
int error_set_status(bmoe_error *err, bmoe_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Clears the message and the status. */
void error_clear(bmoe_error *err);

/* Gives an unclassified error the status fallback; returns the error's status
 * (negative). */
bmoe_status error_classify(bmoe_error *err, bmoe_status fallback);

#endif
