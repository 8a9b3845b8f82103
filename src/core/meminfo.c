/* core/meminfo.c - MemTotal and MemAvailable (see meminfo.h). */
#include "core/meminfo.h"

#include <stdio.h>
#include <unistd.h>

void tg_meminfo(int64_t *total, int64_t *available)
{
    *total = *available = 0;
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) {
        long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
        if (pages > 0 && size > 0)
            *total = (int64_t)pages * size;
        return;
    }
    char line[128];
    long long kib;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "MemTotal: %lld kB", &kib) == 1)
            *total = (int64_t)kib * 1024;
        else if (sscanf(line, "MemAvailable: %lld kB", &kib) == 1)
            *available = (int64_t)kib * 1024;
    }
    fclose(f);
}
