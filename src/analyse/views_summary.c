/* analyse/views_summary.c - the "Program Information" summary: what was
 * compiled for which target, memory per device and replica, graph
 * statistics, and which tilegraph wrote the profile. */
#include "analyse/analyse.h"

#include "core/error.h"
#include "profile/reader.h"

#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

static double meta_num(tg_profile_reader *r, const char *key)
{
    return atof(tg_profile_reader_meta(r, key));
}

typedef struct {
    tg_an_table *t;
    int device;
} dev_ctx;

static int device_row(sqlite3_stmt *st, void *p)
{
    dev_ctx *c = p;
    int d = sqlite3_column_int(st, 0);
    if (c->device < 0 || c->device == d)
        tg_an_row(c->t, (double)d, sqlite3_column_double(st, 1), (double)sqlite3_column_int(st, 2),
                  sqlite3_column_double(st, 3),
                  sqlite3_column_double(st, 4) + sqlite3_column_double(st, 5));
    return 0;
}

/* Tiled targets (mk2), as PopVision's summary shows an IPU: tiles per
 * device, memory per tile, the memory of a device and of all devices, and
 * the graph's compute sets, vertices and edges from the profile. */
static tg_status tiled_summary(tg_profile_reader *r, tg_an_view *v)
{
    int tiles = 0;
    TG_TRY(tg_an_tiles_per_device(r, &tiles));
    if (tiles <= 0)
        return TG_OK;
    double per_tile = meta_num(r, "memory_per_tile"), devices = meta_num(r, "devices");
    double replicas = meta_num(r, "replicas");
    replicas = replicas > 0 ? replicas : 1;
    static const char *const cols[] = {"item", "value"};
    static const tg_an_kind bytes[] = {TG_AN_TEXT, TG_AN_BYTES};
    static const tg_an_kind counts[] = {TG_AN_TEXT, TG_AN_COUNT};
    tg_an_table *t = tg_an_table_add(v, "Target (tiles)", 2, cols, counts);
    tg_an_row(t, "tiles per device", (double)tiles);
    tg_an_row(t, "tiles in all", tiles * devices * replicas);
    tg_an_row(t, "worker threads per tile", meta_num(r, "workers_per_tile"));
    tg_an_row(t, "compute sets", meta_num(r, "compute_sets"));
    tg_an_row(t, "vertices", meta_num(r, "vertices"));
    tg_an_row(t, "edges", meta_num(r, "edges"));
    t = tg_an_table_add(v, "Target memory", 2, cols, bytes);
    tg_an_row(t, "memory per tile", per_tile);
    tg_an_row(t, "memory per device", tiles * per_tile);
    tg_an_row(t, "memory of all devices", tiles * per_tile * devices * replicas);
    return TG_OK;
}

tg_status tg_an_view_summary(tg_profile_reader *r, const tg_an_filter *f, tg_an_view *v)
{
    static const char *const info_cols[] = {"item", "value"};
    static const tg_an_kind info_kinds[] = {TG_AN_TEXT, TG_AN_LABEL};
    tg_an_table *t = tg_an_table_add(v, "Program information", 2, info_cols, info_kinds);
    static const char *const keys[][2] = {
        {"program", "program"},
        {"target", "target"},
        {"strategy", "strategy"},
        {"schedule", "schedule"},
        {"tilegraph version", "tilegraph_version"},
        {"created", "created"},
        {"profile", NULL},
    };
    bool one_device = meta_num(r, "devices") == 1;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        /* a pipeline schedule means nothing on one device: do not name one */
        if (one_device && !strcmp(keys[i][0], "schedule"))
            tg_an_row(t, keys[i][0], "none (one device)");
        else
            tg_an_row(t, keys[i][0],
                      keys[i][1] ? tg_profile_reader_meta(r, keys[i][1])
                                 : tg_profile_reader_path(r));
    }

    if (meta_num(r, "instances") > 1)
        tg_an_note(v,
                   "instance %d of an MPI job of %d instances, replicas from %d of %d in all; "
                   "the instances view shows them together, --instance K another",
                   (int)meta_num(r, "instance"), (int)meta_num(r, "instances"),
                   (int)meta_num(r, "replica_offset"), (int)meta_num(r, "global_replicas"));
    static const char *const n_cols[] = {"item", "value"};
    static const tg_an_kind n_kinds[] = {TG_AN_TEXT, TG_AN_COUNT};
    t = tg_an_table_add(v, "Configuration and graph statistics", 2, n_cols, n_kinds);
    static const char *const counts[][2] = {
        {"devices", "devices"},
        {"replicas", "replicas"},
        {"micro-batches", "micro_batches"},
        {"device iterations", "iterations"},
        {"threads per device", "threads_per_device"},
        {"ops", "ops"},
        {"tensors", "tensors"},
        {"program steps", "steps"},
        {"inter-device transfers", "transfers"},
    };
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
        tg_an_row(t, counts[i][0], meta_num(r, counts[i][1]));

    static const char *const m_cols[] = {"item", "value"};
    static const tg_an_kind m_kinds[] = {TG_AN_TEXT, TG_AN_BYTES};
    t = tg_an_table_add(v, "Memory", 2, m_cols, m_kinds);
    double replica = meta_num(r, "arena_bytes"), replicas = meta_num(r, "replicas");
    double limit = meta_num(r, "memory_per_device");
    tg_an_row(t, "per replica (all devices)", replica);
    tg_an_row(t, "total (all replicas)", replica * (replicas > 0 ? replicas : 1));
    tg_an_row(t, "memory per device (limit)", limit > 0 ? limit : NAN);

    static const char *const d_cols[] = {"device", "memory", "stash depth", "scratch peak",
                                         "MFLOP per micro-batch"};
    static const tg_an_kind d_kinds[] = {TG_AN_ID, TG_AN_BYTES, TG_AN_COUNT, TG_AN_BYTES,
                                         TG_AN_NUM};
    dev_ctx c = {tg_an_table_add(v, "Per device", 5, d_cols, d_kinds), f->device};
    TG_TRY(tg_an_query(r,
                       "SELECT device, arena_bytes, stash_depth, scratch_peak, "
                       "flops_forward / 1e6, flops_backward / 1e6 FROM devices ORDER BY device",
                       device_row, &c));
    char mflop[48];
    tg_an_note(v, "MFLOP per host step: %s",
               tg_an_format_fixed(meta_num(r, "flops_per_run") / 1e6, -1, mflop, sizeof mflop));
    return tiled_summary(r, v);
}
