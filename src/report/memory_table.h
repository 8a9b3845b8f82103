/* report/memory_table.h - the memory table that `tilegraph compile` and
 * `tilegraph analyse memory` share: per device the bytes of each region of
 * its arena, the kernel scratch within the activations, the total, what is
 * offloaded to the host, and beside them the stash depth and the FLOPs of a
 * micro-batch.
 *
 * The compiled program (plan.c) and the profile reader (views_memory.c)
 * each fill a tg_an_memory, and tg_an_memory_tables makes the view's tables
 * from it, so both commands print the same rows with the same figures (the
 * profile holds what the program planned: docs/profile-format.md, tables
 * `memory` and `devices`), through the same renderer, in text and JSON.
 */
#ifndef TG_REPORT_MEMORY_TABLE_H
#define TG_REPORT_MEMORY_TABLE_H

#include "compile/program.h"
#include "report/table.h"

/* One device's figures; NaN where the source has none (a profile written
 * before a row existed), printed as a dash. */
typedef struct tg_an_device_memory {
    double region[TG_REGION_COUNT]; /* bytes per tg_region; TG_REGION_NONE unused */
    double scratch_peak;            /* kernel scratch, counted within activations */
    double total;                   /* the device's arena */
    double offloaded;               /* kept in host memory, streamed in for the update */
    double weight_cache; /* host memory beside the arena: weights in the kernels' layout */
    double stash_depth;  /* slots of stash, input and exchange buffers */
    double flops;        /* forward and backward of one micro-batch */
} tg_an_device_memory;

typedef struct tg_an_memory {
    int n_devices; /* at most TG_AN_MAX_DEVICES */
    tg_an_device_memory devices[TG_AN_MAX_DEVICES];
} tg_an_memory;

/* The titles of the two tables tg_an_memory_tables adds. */
#define TG_AN_MEMORY_TITLE "Memory per device"
#define TG_AN_MEMORY_STASH_TITLE "Stash depth and work per device"

/* The name of region `region` (a tg_region), as the profile's `memory`
 * table and the memory table call it: "weights", "pipeline stash". */
const char *tg_an_memory_region_name(int region);

/* From the program's plan (plan.c); the analyse layer fills one from a
 * profile's `devices` and `memory` tables (views_memory.c). */
void tg_an_memory_from_program(const tg_program *p, tg_an_memory *out);

/* Add to v the memory table (a row per region, then "of which kernel
 * scratch", "total", "offloaded to host" and "weight cache"; a column per
 * device) and the
 * stash-depth-and-work table ("stash depth (slots)", "MFLOP per
 * micro-batch"): every device, or only `device` when it is >= 0. */
void tg_an_memory_tables(const tg_an_memory *m, int device, tg_an_view *v);

#endif
