/* target/tiny.c - a tile processor of two tiles of 2 MiB (4 MiB a device),
 * small enough that a small model fills it: tests compile, run and analyse
 * through it, so the tiled machinery is checked against a second target's
 * numbers, and it shows what adding a target takes (this file and one line
 * in target/targets.c). Its other numbers are the Mk2's (target/mk2.c):
 * only the size differs. Its numbers are fixed: targetDescription describes
 * tiles for target mk2 only.
 */
#include "target/tiled.h"

#include "core/error.h"

#include <stdio.h>

static void tiny_numbers(tg_target_desc *out)
{
    tg_target_mk2(out);
    snprintf(out->name, sizeof out->name, "tiny");
    out->tiles = 2;
    out->tile_memory = 2 << 20;
    out->workers = 2;
}

static tg_status tiny_describe(tg_target_info *out)
{
    tg_target_desc d;
    tiny_numbers(&d);
    tg_tiled_describe(&d, out);
    out->description = "a tile processor of two tiles of 2 MiB, for tests of small models on "
                       "the tile model (otherwise the Mk2's numbers)";
    return TG_OK;
}

static tg_status tiny_limits(const tg_config *c, tg_target_desc *out)
{
    tiny_numbers(out);
    if (*c->target.description)
        return tg_error(TG_ERR_CONFIG,
                        "targetDescription '%s': target tiny has fixed numbers; a description "
                        "file describes target mk2's tiles (set target mk2, or drop the file)",
                        c->target.description);
    return tg_tiled_set_io_tiles(c, out);
}

/* Like the Mk2: computed on the host, planned and timed by the tile model. */
const tg_target_ops tg_target_tiny_ops = {
    .name = "tiny",
    .backend = &tg_backend_cpu,
    .plan_kernels = false,
    .describe = tiny_describe,
    .limits = tiny_limits,
    .device_memory = tg_tiled_device_memory,
    .plan = tg_tile_plan_build,
    .check = tg_tile_plan_check,
    .simulate = tg_tile_simulate,
};
