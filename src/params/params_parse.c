/* Values from text, one rule for every program: the whole string, decimal
 * digits and an optional leading '-', no spaces, '+' or hex, in the row's
 * range. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "params.h"

static int params_error(char *error, size_t size, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static int params_error(char *error, size_t size, const char *fmt, ...)
{
    if (error && size) {
        va_list args;
        va_start(args, fmt);
        vsnprintf(error, size, fmt, args);
        va_end(args);
    }
    return -1;
}

/* Optional '-', then a digit (or '.' and a digit): what strtoll and strtod
 * would otherwise also take with leading spaces or '+'. */
static bool params_number_shape(const char *text)
{
    const char *c = text;
    if (*c == '-')
        c++;
    return (*c >= '0' && *c <= '9') || (*c == '.' && c[1] >= '0' && c[1] <= '9');
}

int params_parse_int(const param_def *param, const char *name, const char *text, int32_t *value, char *error,
                     size_t error_size)
{
    errno = 0;
    char *end = NULL;
    long long parsed = params_number_shape(text) ? strtoll(text, &end, 10) : 0;
    if (!params_number_shape(text) || *end)
        return params_error(error, error_size, "%s: '%s' is not an integer", name, text);
    if (errno == ERANGE || parsed < param->low || parsed > param->high)
        return params_error(error, error_size, "%s: %s is out of range [%lld, %lld]", name, text, param->low,
                            param->high);
    *value = (int32_t)parsed;
    return 0;
}

/* A decimal number's characters only: strtod also reads hex (0x1p1), inf and nan. */
static bool params_decimal_text(const char *text)
{
    return params_number_shape(text) && strspn(text, "0123456789.eE+-") == strlen(text);
}

int params_parse_float(const param_def *param, const char *name, const char *text, float *value, char *error,
                       size_t error_size)
{
    errno = 0;
    char *end = NULL;
    double parsed = params_decimal_text(text) ? strtod(text, &end) : 0.0;
    if (!params_decimal_text(text) || *end || !isfinite(parsed))
        return params_error(error, error_size, "%s: '%s' is not a finite number", name, text);
    if (errno == ERANGE && fabs(parsed) < 1.0)
        return params_error(error, error_size, "%s: %s is too small to represent (underflow)", name, text);
    if (errno == ERANGE || parsed < (double)param->low || parsed > (double)param->high ||
        fabsf((float)parsed) > 3e38f)
        return params_error(error, error_size, "%s: %s is out of range [%lld, %lld]", name, text, param->low,
                            param->high);
    if (parsed != 0.0 && (float)parsed == 0.0f)
        return params_error(error, error_size, "%s: %s is too small to represent (underflow)", name, text);
    *value = (float)parsed;
    return 0;
}

int params_parse_u64(const char *name, const char *text, uint64_t *value, char *error, size_t error_size)
{
    errno = 0;
    char *end = NULL;
    if (!params_number_shape(text) || *text == '-')
        return params_error(error, error_size, "%s: '%s' is not an unsigned integer", name, text);
    unsigned long long parsed = strtoull(text, &end, 10);
    if (*end || errno)
        return params_error(error, error_size, "%s: '%s' is not an unsigned 64-bit integer", name, text);
    *value = (uint64_t)parsed;
    return 0;
}

int params_parse_choice(const param_def *param, const char *name, const char *text, int *index, char *error,
                        size_t error_size)
{
    size_t length = strlen(text);
    int position = 0;
    for (const char *c = param->choices; *c; position++) {
        const char *bar = strchr(c, '|');
        size_t choice_length = bar ? (size_t)(bar - c) : strlen(c);
        if (choice_length == length && strncmp(c, text, length) == 0) {
            *index = position;
            return 0;
        }
        c += choice_length + (bar ? 1 : 0);
    }
    /* "a|b|c" as "a, b or c" */
    char alternatives[128];
    size_t used = 0;
    int n_choices = 1;
    for (const char *c = param->choices; *c; c++)
        n_choices += *c == '|';
    int seen = 0;
    for (const char *c = param->choices; *c && used + 5 < sizeof alternatives; c++) {
        if (*c != '|') {
            alternatives[used++] = *c;
            continue;
        }
        seen++;
        const char *joint = seen == n_choices - 1 ? " or " : ", ";
        size_t joint_length = strlen(joint);
        memcpy(alternatives + used, joint, joint_length);
        used += joint_length;
    }
    alternatives[used] = '\0';
    return params_error(error, error_size, "%s: '%s' is not %s", name, text, alternatives);
}

int params_parse_switch(const char *name, const char *text, char *error, size_t error_size)
{
    char *end = NULL;
    errno = 0;
    long long value = params_number_shape(text) ? strtoll(text, &end, 10) : 0;
    if (!params_number_shape(text) || *end || errno)
        return params_error(error, error_size, "%s: '%s' is not an integer (0: off, any other: on)", name, text);
    return value != 0;
}
