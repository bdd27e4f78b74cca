/* The clocks and process counters around an evaluation: wall time, process
 * CPU time and major page faults (getrusage), taken when a window opens and
 * closes. Owns nothing. */
#ifndef BMOE_ENGINE_PROCESS_STATS_H
#define BMOE_ENGINE_PROCESS_STATS_H

#include <stdint.h>

#include "bmoe.h"

typedef struct stats_window {
    double wall_start; /* monotonic seconds */
    double cpu_start;  /* process CPU seconds, -1 when unmeasured */
    int64_t majflt_start;
} stats_window;

/* Monotonic seconds. */
double engine_now_seconds(void);

void stats_window_open(stats_window *window);
/* Adds the window's wall, CPU and fault counts to stats; returns the
 * monotonic time at the close. */
double stats_window_close(const stats_window *window, bmoe_stats *stats);

#endif
