/* target/mk2.c - the Mk2 tile processor's numbers and descriptions of other
 * tile processors read from JSON (option "targetDescription").
 *
 * The Mk2 numbers come from the reference documents (1472 tiles, 624 KiB per
 * tile, 6 workers, 1.33 GHz) and public figures (62.5 TFLOP/s f32 and
 * 250 TFLOP/s f16 per device give 32 and 128 FLOPs per cycle per tile;
 * 47.5 TB/s of exchange gives about 24 bytes per cycle per tile). The code
 * model constants are estimates, documented in docs/targets.md.
 */
#include "target/tiled.h"

#include "core/alloc.h"
#include "core/atomic_file.h"
#include "core/arena.h"
#include "core/error.h"
#include "core/json.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

void tg_target_mk2(tg_target_desc *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "mk2");
    out->tiles = 1472;
    out->tile_memory = 624 * 1024;
    out->workers = 6;
    out->clock_hz = 1.33e9;
    out->exchange_bytes_per_cycle = 24;
    out->link_bytes_per_cycle = 48; /* ~64 GB/s between two devices */
    out->host_bytes_per_cycle = 16; /* ~21 GB/s host streams */
    out->flops_per_cycle_f32 = 32;
    out->flops_per_cycle_f16 = 128; /* 4x f32 */
    out->sync_cycles = 200;
    /* IPU-Links join the 16 machines of an IPU-POD64 rack; GW-Links (2 x
     * 100 Gbps per machine: 25 GB/s) join racks; a ring step through the
     * gateway is assumed to cost 5 us (not published); docs/distributed.md */
    out->link_domain_devices = 64;
    out->devices_per_machine = 4;
    out->gateway_bytes_per_cycle = 25e9 / 1.33e9;
    out->gateway_step_cycles = 5e-6 * 1.33e9;
    out->grain_bytes = 64;
    out->vertex_state_bytes = 32;
    out->vertex_code_bytes = 1024;
    out->control_code_bytes = 16;
    out->exchange_code_bytes = 32;
    out->exchange_code_per_kib = 16;
}

typedef enum { K_INT, K_NUM, K_STR } key_kind;

typedef struct {
    const char *key;
    key_kind kind;
    size_t offset;
    double min, max;
} desc_key;

#define KEY(k, kind, field, lo, hi)                                                                \
    {                                                                                              \
        k, kind, offsetof(tg_target_desc, field), lo, hi                                           \
    }

static const desc_key keys[] = {
    KEY("name", K_STR, name, 0, 0),
    KEY("tiles", K_INT, tiles, 1, 1 << 20),
    KEY("memoryPerTile", K_INT, tile_memory, 1, 1e12),
    KEY("workersPerTile", K_INT, workers, 1, 1024),
    KEY("clockHz", K_NUM, clock_hz, 1, 1e12),
    KEY("exchangeBytesPerCycle", K_NUM, exchange_bytes_per_cycle, 1e-6, 1e9),
    KEY("linkBytesPerCycle", K_NUM, link_bytes_per_cycle, 1e-6, 1e9),
    KEY("hostBytesPerCycle", K_NUM, host_bytes_per_cycle, 1e-6, 1e9),
    KEY("flopsPerCyclePerTileF32", K_NUM, flops_per_cycle_f32, 1e-6, 1e9),
    KEY("flopsPerCyclePerTileF16", K_NUM, flops_per_cycle_f16, 1e-6, 1e9),
    KEY("syncCycles", K_NUM, sync_cycles, 0, 1e12),
    KEY("linkDomainDevices", K_INT, link_domain_devices, 1, 1 << 20),
    KEY("devicesPerMachine", K_INT, devices_per_machine, 1, 1 << 20),
    KEY("gatewayBytesPerCycle", K_NUM, gateway_bytes_per_cycle, 1e-6, 1e9),
    KEY("gatewayStepCycles", K_NUM, gateway_step_cycles, 0, 1e12),
    KEY("grainBytes", K_INT, grain_bytes, 1, 1 << 20),
    KEY("vertexStateBytes", K_INT, vertex_state_bytes, 0, 1e9),
    KEY("vertexCodeBytes", K_INT, vertex_code_bytes, 0, 1e9),
    KEY("controlCodeBytesPerStep", K_INT, control_code_bytes, 0, 1e9),
    KEY("exchangeCodeBytesPerStep", K_INT, exchange_code_bytes, 0, 1e9),
    KEY("exchangeCodeBytesPerKiB", K_NUM, exchange_code_per_kib, 0, 1e9),
};

#define N_KEYS ((int)(sizeof keys / sizeof keys[0]))

static tg_status set_key(const desc_key *k, const tg_json *root, const char *source,
                         tg_target_desc *out)
{
    char *field = (char *)out + k->offset;
    if (k->kind == K_STR) {
        const char *s;
        TG_TRY(tg_json_get_string(root, k->key, &s));
        if (strlen(s) == 0 || strlen(s) >= sizeof out->name)
            return tg_error(TG_ERR_CONFIG, "%s: key '%s' must be 1 to %zu characters", source,
                            k->key, sizeof out->name - 1);
        snprintf(out->name, sizeof out->name, "%s", s);
        return TG_OK;
    }
    double v;
    if (k->kind == K_INT) {
        int64_t i;
        TG_TRY(tg_json_get_int(root, k->key, &i));
        v = (double)i;
    } else {
        TG_TRY(tg_json_get_number(root, k->key, &v));
    }
    if (v < k->min || v > k->max)
        return tg_error(TG_ERR_CONFIG, "%s: key '%s' is %g, must be between %g and %g", source,
                        k->key, v, k->min, k->max);
    if (k->kind == K_NUM)
        *(double *)field = v;
    else if (k->offset == offsetof(tg_target_desc, tiles) ||
             k->offset == offsetof(tg_target_desc, workers))
        *(int *)field = (int)v;
    else
        *(int64_t *)field = (int64_t)v;
    return TG_OK;
}

tg_status tg_target_desc_parse(const char *text, size_t len, const char *source,
                               tg_target_desc *out)
{
    if (!source)
        source = "target description";
    tg_target_desc d;
    tg_target_mk2(&d);
    tg_arena *arena = tg_arena_create(0);
    if (!arena)
        return tg_error(TG_ERR_NOMEM, "%s: out of memory", source);
    tg_json *root = NULL;
    tg_status s = tg_json_parse(arena, text, len, source, &root);
    if (s == TG_OK && root->type != TG_JSON_OBJECT)
        s = tg_error(TG_ERR_FORMAT, "%s: a target description is a JSON object, found %s", source,
                     tg_json_type_name(root->type));
    for (size_t i = 0; s == TG_OK && i < root->count; i++) {
        int k = 0;
        while (k < N_KEYS && strcmp(keys[k].key, root->keys[i]) != 0)
            k++;
        if (k == N_KEYS) {
            char known[1024];
            size_t used = 0;
            for (int j = 0; j < N_KEYS && used < sizeof known; j++)
                used += (size_t)snprintf(known + used, sizeof known - used, "%s%s", j ? ", " : "",
                                         keys[j].key);
            s = tg_error(TG_ERR_CONFIG, "%s:%d:%d: unknown key '%s' (known: %s)", source,
                         root->items[i]->line, root->items[i]->col, root->keys[i], known);
        } else {
            s = set_key(&keys[k], root, source, &d);
        }
    }
    if (s == TG_OK && d.flops_per_cycle_f16 < d.flops_per_cycle_f32)
        s = tg_error(TG_ERR_CONFIG,
                     "%s: key 'flopsPerCyclePerTileF16' (%g) is below "
                     "'flopsPerCyclePerTileF32' (%g)",
                     source, d.flops_per_cycle_f16, d.flops_per_cycle_f32);
    tg_arena_destroy(arena);
    if (s == TG_OK)
        *out = d;
    return s;
}

tg_status tg_target_desc_load(const char *path, tg_target_desc *out)
{
    FILE *f;
    tg_status so = tg_fopen_regular(path, &f);
    if (so != TG_OK)
        return tg_error_prefix(TG_ERR_IO, "targetDescription");
    char *buf = NULL;
    size_t len = 0, cap = 0;
    tg_status s = TG_OK;
    for (;;) {
        if (len == cap) {
            cap = cap ? 2 * cap : 4096;
            char *b = cap > ((size_t)1 << 24) ? NULL : tg_realloc(buf, cap);
            if (!b) {
                s = tg_error(TG_ERR_FORMAT, "targetDescription: '%s' is too large", path);
                break;
            }
            buf = b;
        }
        size_t n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (n == 0)
            break;
    }
    if (s == TG_OK && ferror(f))
        s = tg_error(TG_ERR_IO, "targetDescription: cannot read '%s'", path);
    fclose(f);
    if (s == TG_OK)
        s = tg_target_desc_parse(buf, len, path, out);
    tg_free(buf);
    return s;
}

static tg_status mk2_describe(tg_target_info *out)
{
    tg_target_desc d;
    tg_target_mk2(&d);
    tg_tiled_describe(&d, out);
    out->description = "the simulated tile processor: computed on the host, memory checked per "
                       "tile, time from a cycle model";
    return TG_OK;
}

/* The file named by targetDescription when set, else the Mk2's numbers. */
static tg_status mk2_limits(const tg_config *c, tg_target_desc *out)
{
    tg_target_mk2(out);
    const char *path = c->target.description;
    if (*path)
        TG_TRY(tg_target_desc_load(path, out));
    return tg_tiled_set_io_tiles(c, out);
}

/* The host computes the numbers; the tiles are a model (tileplan.c, tilesim.c),
 * so the ops' plan hooks (host kernels) do not run. */
const tg_target_ops tg_target_mk2_ops = {
    .name = "mk2",
    .backend = &tg_backend_cpu,
    .plan_kernels = false,
    .takes_description = true,
    .describe = mk2_describe,
    .limits = mk2_limits,
    .device_memory = tg_tiled_device_memory,
    .plan = tg_tile_plan_build,
    .check = tg_tile_plan_check,
    .simulate = tg_tile_simulate,
};
