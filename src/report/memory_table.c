/* report/memory_table.c - the memory table of `compile` and `analyse
 * memory` (report/memory_table.h): its rows, built once from either
 * source's figures. */
#include "report/memory_table.h"

#include <stdio.h>

/* A table with the label column `label` and a column per chosen device. */
static tg_an_table *device_table(tg_an_view *v, const char *title, const char *label,
                                 tg_an_kind kind, const int *devs, int n)
{
    char names[TG_AN_MAX_DEVICES + 1][24];
    const char *cols[TG_AN_MAX_DEVICES + 1];
    tg_an_kind kinds[TG_AN_MAX_DEVICES + 1];
    cols[0] = label;
    kinds[0] = TG_AN_TEXT;
    for (int k = 0; k < n; k++) {
        snprintf(names[k + 1], sizeof names[k + 1], "device %d", devs[k]);
        cols[k + 1] = names[k + 1];
        kinds[k + 1] = kind;
    }
    return tg_an_table_add(v, title, n + 1, cols, kinds);
}

/* The regions' names from the compiler's list itself (compile/program.h),
 * not through tg_region_name: the profile reader, which fuzzers build
 * without the compiler, links this file. */
static const char *const region_names[TG_REGION_COUNT] = {
#define TG_REGION_NAME(e, name) name,
    TG_REGION_LIST(TG_REGION_NAME)
#undef TG_REGION_NAME
};

const char *tg_an_memory_region_name(int region)
{
    return region >= 0 && region < TG_REGION_COUNT ? region_names[region] : "?";
}

/* The rows of the memory table after the regions, and of the second table. */
enum { EXTRA_BYTE_ROWS = 4, BYTE_ROWS = TG_REGION_COUNT - TG_REGION_PARAM + EXTRA_BYTE_ROWS };
static const char *const extra_byte_labels[EXTRA_BYTE_ROWS] = {
    "of which kernel scratch", "total", "offloaded to host", TG_WEIGHT_CACHE_CATEGORY};
static const char *const work_labels[2] = {"stash depth (slots)", "MFLOP per micro-batch"};

/* Device k's figures into column k of the rows. */
static void fill_column(const tg_an_device_memory *dm, int k, double bytes[][TG_AN_MAX_DEVICES],
                        double work[][TG_AN_MAX_DEVICES])
{
    int row = 0;
    for (int r = TG_REGION_PARAM; r < TG_REGION_COUNT; r++)
        bytes[row++][k] = dm->region[r];
    bytes[row++][k] = dm->scratch_peak;
    bytes[row++][k] = dm->total;
    bytes[row++][k] = dm->offloaded;
    bytes[row][k] = dm->weight_cache;
    work[0][k] = dm->stash_depth;
    work[1][k] = dm->flops / 1e6;
}

void tg_an_memory_tables(const tg_an_memory *m, int device, tg_an_view *v)
{
    int devs[TG_AN_MAX_DEVICES] = {0}, n = 0;
    double bytes[BYTE_ROWS][TG_AN_MAX_DEVICES], work[2][TG_AN_MAX_DEVICES];
    for (int d = 0; d < m->n_devices && d < TG_AN_MAX_DEVICES; d++)
        if (device < 0 || d == device) {
            fill_column(&m->devices[d], n, bytes, work);
            devs[n++] = d;
        }
    tg_an_table *t = device_table(v, TG_AN_MEMORY_TITLE, "memory", TG_AN_BYTES, devs, n);
    if (n == 0) { /* no such device: the tables say "(none)" */
        device_table(v, TG_AN_MEMORY_STASH_TITLE, "measure", TG_AN_NUM, devs, n);
        return;
    }
    for (int row = 0; row < BYTE_ROWS; row++)
        tg_an_row_numbers(t,
                          row < BYTE_ROWS - EXTRA_BYTE_ROWS
                              ? region_names[TG_REGION_PARAM + row]
                              : extra_byte_labels[row - (BYTE_ROWS - EXTRA_BYTE_ROWS)],
                          bytes[row]);
    /* counts and FLOPs are no bytes: a table of their own (a column has one kind) */
    t = device_table(v, TG_AN_MEMORY_STASH_TITLE, "measure", TG_AN_NUM, devs, n);
    for (int row = 0; row < 2; row++)
        tg_an_row_numbers(t, work_labels[row], work[row]);
}
