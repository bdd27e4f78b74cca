#include "process_stats.h"

#include <sys/resource.h>
#include <time.h>

double engine_now_seconds(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
}

/* Process CPU seconds and major faults; false when the platform cannot say. */
static bool process_counters(double *cpu_seconds, int64_t *majflt)
{
    struct rusage usage;
    if (getrusage(RUSAGE_SELF, &usage) != 0)
        return false;
    *cpu_seconds = (double)usage.ru_utime.tv_sec + (double)usage.ru_utime.tv_usec * 1e-6 +
                   (double)usage.ru_stime.tv_sec + (double)usage.ru_stime.tv_usec * 1e-6;
    *majflt = usage.ru_majflt;
    return true;
}

void stats_window_open(stats_window *window)
{
    if (!process_counters(&window->cpu_start, &window->majflt_start)) {
        window->cpu_start = -1.0;
        window->majflt_start = 0;
    }
    window->wall_start = engine_now_seconds();
}

double stats_window_close(const stats_window *window, bmoe_stats *stats)
{
    double end = engine_now_seconds();
    stats->wall_ms += (end - window->wall_start) * 1e3;
    double cpu;
    int64_t majflt;
    if (window->cpu_start >= 0.0 && process_counters(&cpu, &majflt)) {
        stats->cpu_ms += (cpu - window->cpu_start) * 1e3;
        stats->majflt += majflt - window->majflt_start;
    }
    return end;
}
