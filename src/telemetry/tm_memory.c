/* /proc sampling of tm_memory.h. Lines are "Key:   <n> kB". */
#include "tm_memory.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The value of "key:" at the start of a line of text, in MiB; false when
 * absent. */
static int tm_field_mib(const char *text, const char *key, double *mib)
{
    size_t key_length = strlen(key);
    for (const char *line = text; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
        if (strncmp(line, key, key_length) != 0 || line[key_length] != ':')
            continue;
        char *end = NULL;
        unsigned long long kib = strtoull(line + key_length + 1, &end, 10);
        if (end == line + key_length + 1)
            return 0;
        *mib = (double)kib / 1024.0;
        return 1;
    }
    return 0;
}

void tm_memory_parse_status(const char *text, tm_memory *memory)
{
    tm_field_mib(text, "VmRSS", &memory->rss_mib);
    tm_field_mib(text, "RssAnon", &memory->rss_anon_mib);
    tm_field_mib(text, "RssFile", &memory->rss_file_mib);
    tm_field_mib(text, "VmSwap", &memory->swap_mib);
}

void tm_memory_parse_meminfo(const char *text, tm_memory *memory)
{
    tm_field_mib(text, "MemAvailable", &memory->mem_available_mib);
    tm_field_mib(text, "MemFree", &memory->mem_free_mib);
    tm_field_mib(text, "SwapFree", &memory->swap_free_mib);
}

/* Reads a small /proc file into text (NUL-terminated); false when it cannot. */
static int tm_read_proc(const char *path, char *text, size_t size)
{
    FILE *file = fopen(path, "r");
    if (!file)
        return 0;
    size_t got = fread(text, 1, size - 1, file);
    fclose(file);
    text[got] = '\0';
    return 1;
}

void tm_memory_sample(tm_memory *memory)
{
    memset(memory, 0, sizeof *memory);
    char text[8192];
    if (tm_read_proc("/proc/self/status", text, sizeof text))
        tm_memory_parse_status(text, memory);
    if (tm_read_proc("/proc/meminfo", text, sizeof text))
        tm_memory_parse_meminfo(text, memory);
}
