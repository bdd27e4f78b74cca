/* Calendar arithmetic (days to civil date, Howard Hinnant's well-known
 * algorithm) and the strftime directives of the C locale. */
#include "chat/time_format.h"

#include <stdbool.h>
#include <stdio.h>

struct civil_time {
    int64_t year;
    int month, day, hour, minute, second, weekday, year_day;
};

static const char *const weekday_names[] = {"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"};
static const char *const month_names[] = {"January", "February", "March",     "April",   "May",      "June",
                                          "July",    "August",   "September", "October", "November", "December"};

static bool is_leap(int64_t year)
{
    return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
}

static struct civil_time civil_from_seconds(int64_t seconds)
{
    struct civil_time time;
    int64_t days = seconds / 86400, rest = seconds % 86400;
    if (rest < 0) {
        rest += 86400;
        days--;
    }
    time.hour = (int)(rest / 3600);
    time.minute = (int)(rest / 60 % 60);
    time.second = (int)(rest % 60);
    time.weekday = (int)(((days % 7) + 11) % 7); /* 1970-01-01 was a Thursday */
    int64_t z = days + 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t day_of_era = z - era * 146097;
    int64_t year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36524 - day_of_era / 146096) / 365;
    int64_t day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    int64_t month_index = (5 * day_of_year + 2) / 153;
    time.day = (int)(day_of_year - (153 * month_index + 2) / 5 + 1);
    time.month = (int)(month_index < 10 ? month_index + 3 : month_index - 9);
    time.year = year_of_era + era * 400 + (time.month <= 2);
    static const int before_month[] = {0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334};
    time.year_day = before_month[time.month - 1] + time.day - 1 + (time.month > 2 && is_leap(time.year));
    return time;
}

static void number(struct string_builder *builder, int64_t value, int width, bool padded)
{
    char text[32];
    if (padded)
        snprintf(text, sizeof text, "%0*lld", width, (long long)value);
    else
        snprintf(text, sizeof text, "%lld", (long long)value);
    builder_append_cstring(builder, text);
}

static void append_directive(struct string_builder *builder, const struct civil_time *t, char directive, bool padded,
                             int64_t seconds)
{
    int hour12 = t->hour % 12 == 0 ? 12 : t->hour % 12;
    switch (directive) {
    case 'a': builder_append(builder, weekday_names[t->weekday], 3); break;
    case 'A': builder_append_cstring(builder, weekday_names[t->weekday]); break;
    case 'b':
    case 'h': builder_append(builder, month_names[t->month - 1], 3); break;
    case 'B': builder_append_cstring(builder, month_names[t->month - 1]); break;
    case 'C': number(builder, t->year / 100, 2, padded); break;
    case 'd': number(builder, t->day, 2, padded); break;
    case 'e': {
        char text[8];
        if (padded)
            snprintf(text, sizeof text, "%2d", t->day);
        else
            snprintf(text, sizeof text, "%d", t->day);
        builder_append_cstring(builder, text);
        break;
    }
    case 'H': number(builder, t->hour, 2, padded); break;
    case 'I': number(builder, hour12, 2, padded); break;
    case 'j': number(builder, t->year_day + 1, 3, padded); break;
    case 'm': number(builder, t->month, 2, padded); break;
    case 'M': number(builder, t->minute, 2, padded); break;
    case 'n': builder_append_char(builder, '\n'); break;
    case 'p': builder_append_cstring(builder, t->hour < 12 ? "AM" : "PM"); break;
    case 'S': number(builder, t->second, 2, padded); break;
    case 's': number(builder, seconds, 1, false); break;
    case 't': builder_append_char(builder, '\t'); break;
    case 'u': number(builder, t->weekday == 0 ? 7 : t->weekday, 1, padded); break;
    case 'w': number(builder, t->weekday, 1, padded); break;
    case 'U': number(builder, (t->year_day + 7 - t->weekday) / 7, 2, padded); break;
    case 'W': number(builder, (t->year_day + 7 - (t->weekday + 6) % 7) / 7, 2, padded); break;
    case 'y': number(builder, ((t->year % 100) + 100) % 100, 2, padded); break;
    case 'Y': number(builder, t->year, 1, false); break;
    case 'z': builder_append_cstring(builder, "+0000"); break;
    case 'Z': builder_append_cstring(builder, "UTC"); break;
    case '%': builder_append_char(builder, '%'); break;
    case 'D':
        append_directive(builder, t, 'm', true, seconds);
        builder_append_char(builder, '/');
        append_directive(builder, t, 'd', true, seconds);
        builder_append_char(builder, '/');
        append_directive(builder, t, 'y', true, seconds);
        break;
    case 'F':
        append_directive(builder, t, 'Y', true, seconds);
        builder_append_char(builder, '-');
        append_directive(builder, t, 'm', true, seconds);
        builder_append_char(builder, '-');
        append_directive(builder, t, 'd', true, seconds);
        break;
    case 'T':
    case 'X':
    case 'R':
        append_directive(builder, t, 'H', true, seconds);
        builder_append_char(builder, ':');
        append_directive(builder, t, 'M', true, seconds);
        if (directive != 'R') {
            builder_append_char(builder, ':');
            append_directive(builder, t, 'S', true, seconds);
        }
        break;
    case 'x': append_directive(builder, t, 'D', true, seconds); break;
    case 'c':
        append_directive(builder, t, 'a', true, seconds);
        builder_append_char(builder, ' ');
        append_directive(builder, t, 'b', true, seconds);
        builder_append_char(builder, ' ');
        append_directive(builder, t, 'e', true, seconds);
        builder_append_char(builder, ' ');
        append_directive(builder, t, 'T', true, seconds);
        builder_append_char(builder, ' ');
        append_directive(builder, t, 'Y', true, seconds);
        break;
    default:
        builder_append_char(builder, '%');
        if (!padded)
            builder_append_char(builder, '-');
        builder_append_char(builder, directive);
        break;
    }
}

void format_time(struct string_builder *builder, const char *format, size_t length, int64_t seconds)
{
    struct civil_time time = civil_from_seconds(seconds);
    for (size_t i = 0; i < length; i++) {
        if (format[i] != '%' || i + 1 >= length) {
            builder_append_char(builder, format[i]);
            continue;
        }
        bool padded = true;
        if (format[i + 1] == '-' && i + 2 < length) {
            padded = false;
            i++;
        }
        append_directive(builder, &time, format[++i], padded, seconds);
    }
}
