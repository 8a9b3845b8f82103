/* core/meminfo.c - MemTotal and MemAvailable (see meminfo.h). */
#include "core/meminfo.h"

#include <stdio.h>
#include <sys/resource.h>
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

int64_t tg_mem_room(void)
{
    int64_t total, room;
    tg_meminfo(&total, &room);
    struct rlimit lim;
    if (getrlimit(RLIMIT_AS, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY)
        return room;
    long long pages = 0; /* the first field of statm: the mapped size */
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%lld", &pages) != 1)
        pages = 0;
    if (f)
        fclose(f);
    int64_t left = (int64_t)lim.rlim_cur - (int64_t)pages * sysconf(_SC_PAGESIZE);
    if (left < 0)
        left = 0;
    return room > 0 && room < left ? room : left;
}
