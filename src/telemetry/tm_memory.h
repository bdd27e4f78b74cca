/* The memory picture of one moment, for the CSV row: this process's
 * resident split from /proc/self/status (VmRSS, RssAnon, RssFile, VmSwap)
 * and what the system claims from /proc/meminfo (MemAvailable, MemFree,
 * SwapFree), in MiB. A figure the platform does not report is 0. */
#ifndef BMOE_TM_MEMORY_H
#define BMOE_TM_MEMORY_H

typedef struct tm_memory {
    double rss_mib, rss_anon_mib, rss_file_mib, swap_mib;
    double mem_available_mib, mem_free_mib, swap_free_mib;
} tm_memory;

/* Reads both files now. */
void tm_memory_sample(tm_memory *memory);
/* The parsers, on the files' text (for tests): fill the fields they find. */
void tm_memory_parse_status(const char *text, tm_memory *memory);
void tm_memory_parse_meminfo(const char *text, tm_memory *memory);

#endif
