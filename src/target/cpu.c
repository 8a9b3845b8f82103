/* target/cpu.c - the cpu target: a device is a group of host threads and its
 * memory is host RAM. The host runs the kernels as the ops planned them, so
 * the program needs no target plan, no per-tile check and no cycle model:
 * the profile's trace is what the engine recorded.
 */
#include "target/tiled.h" /* the description its limits hook fills */

#include "core/cpus.h"

#include <stdio.h>
#include <string.h>

static tg_status cpu_describe(tg_target_info *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "cpu");
    out->threads_per_device = tg_cpu_count();
    out->description = "a device is a group of host threads; memory is host RAM "
                       "(memoryPerDevice sets a capacity)";
    return TG_OK;
}

/* No tiles: the description only names the target (tg_target_from_config). */
static tg_status cpu_limits(const tg_config *c, tg_target_desc *out)
{
    (void)c; /* numIOTiles, like targetDescription, is for tiled targets only */
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "cpu");
    return TG_OK;
}

/* Host RAM is not planned against: only memoryPerDevice limits a device. */
static int64_t cpu_device_memory(const tg_target_desc *t)
{
    (void)t;
    return 0;
}

const tg_target_ops tg_target_cpu_ops = {
    .name = "cpu",
    .backend = &tg_backend_cpu,
    .plan_kernels = true,
    .describe = cpu_describe,
    .limits = cpu_limits,
    .device_memory = cpu_device_memory,
};
