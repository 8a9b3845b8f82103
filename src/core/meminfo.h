/* core/meminfo.h - how much memory the machine has and how much a process
 * could still take without swapping (/proc/meminfo). */
#ifndef TG_CORE_MEMINFO_H
#define TG_CORE_MEMINFO_H

#include <stdint.h>

/* MemTotal and MemAvailable in bytes; without /proc/meminfo the physical
 * pages for the total and 0 (unknown) for what is available. */
void tg_meminfo(int64_t *total, int64_t *available);

/* The bytes this process may still allocate and touch: MemAvailable, or
 * less under an address-space limit (ulimit -v) less what it maps now;
 * 0 when neither is known. */
int64_t tg_mem_room(void);

#endif
