/* target/tiled.h - the types of a tiled target (target/mk2.c, target/tiny.c):
 * a tile processor's description (its numbers, or a JSON file's, option
 * "targetDescription"), the tile plan of a compiled program and the cycle
 * model over it (target/tileplan.c, target/tilesim.c).
 *
 * A tiled target is a compile-time model over the ordinary program: the
 * numbers are still computed on the host by the cpu engine, while the
 * compiler maps every buffer of every device over the device's tiles, checks
 * memory per tile and estimates cycles per step (docs/targets.md has the
 * formulas; what is exact and what is estimated is said there).
 */
#ifndef TG_TARGET_TILED_H
#define TG_TARGET_TILED_H

#include "target/target.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One tile processor. Every field is a key of the description JSON file
 * (option "targetDescription"); the names in comments are those keys. */
struct tg_target_desc {
    char name[32];                   /* "name" */
    int tiles;                       /* "tiles": per device */
    int64_t tile_memory;             /* "memoryPerTile": bytes */
    int workers;                     /* "workersPerTile": hardware threads per tile */
    double clock_hz;                 /* "clockHz" */
    double exchange_bytes_per_cycle; /* "exchangeBytesPerCycle": per tile, on-device exchange */
    double link_bytes_per_cycle;     /* "linkBytesPerCycle": device to device, per device */
    double host_bytes_per_cycle;     /* "hostBytesPerCycle": host streams, per device */
    double flops_per_cycle_f32;      /* "flopsPerCyclePerTileF32" */
    double flops_per_cycle_f16;      /* "flopsPerCyclePerTileF16" */
    double sync_cycles;              /* "syncCycles": one bulk-synchronous barrier */
    /* the pod (target/collective.h): devices joined by IPU-Links, devices
     * per machine (they share its gateway), the gateway's bytes per cycle
     * per machine and the cost of one all-reduce ring step through it */
    int64_t link_domain_devices;    /* "linkDomainDevices" */
    int64_t devices_per_machine;    /* "devicesPerMachine" */
    double gateway_bytes_per_cycle; /* "gatewayBytesPerCycle" */
    double gateway_step_cycles;     /* "gatewayStepCycles" */
    int64_t grain_bytes;            /* "grainBytes": unit of the linear tile mapping */
    /* the estimated code and state model, per tile */
    int64_t vertex_state_bytes;   /* "vertexStateBytes": per vertex (one per worker per step) */
    int64_t vertex_code_bytes;    /* "vertexCodeBytes": per distinct op kind run on the tile */
    int64_t control_code_bytes;   /* "controlCodeBytesPerStep": per step, on every tile */
    int64_t exchange_code_bytes;  /* "exchangeCodeBytesPerStep": per step the tile takes part in */
    double exchange_code_per_kib; /* "exchangeCodeBytesPerKiB": per KiB the tile receives */
    /* numIOTiles (an option, not a description key): the last io_tiles tiles
     * of each device hold the host-stream inputs, and their copy overlaps the
     * previous micro-batch's compute (docs/targets.md, I/O tiles) */
    int io_tiles;
};

/* The documents' Mk2 tile processor. */
void tg_target_mk2(tg_target_desc *out);

/* Read a description: starts from the mk2 numbers and overrides the keys the
 * object has. Unknown keys, wrong types and values out of range fail with a
 * message naming the source and the key. */
tg_status tg_target_desc_parse(const char *text, size_t len, const char *source,
                               tg_target_desc *out);
tg_status tg_target_desc_load(const char *path, tg_target_desc *out);

/* What every tiled target's describe and limits hooks share (tileplan.c):
 * the tiles of d in `tilegraph devices` terms (out->description is left for
 * the target), and option numIOTiles applied to out, refused when it leaves
 * no tile to compute. */
void tg_tiled_describe(const tg_target_desc *d, tg_target_info *out);
tg_status tg_tiled_set_io_tiles(const tg_config *c, tg_target_desc *out);
/* A tiled device holds what its tiles hold (the device_memory hook). */
int64_t tg_tiled_device_memory(const tg_target_desc *t);

/* Per tile memory categories. Variables are exact (the bytes of buffers
 * mapped there; activations at the tile's own peak over live ranges); the
 * code and state categories are estimates. */
#define TG_TILE_CAT_LIST(X)                                                                        \
    X(ALWAYS_LIVE, "always-live variables")                                                        \
    X(ACTIVATIONS, "activations (tile peak)")                                                      \
    X(VERTEX_STATE, "vertex state")                                                                \
    X(VERTEX_CODE, "vertex code")                                                                  \
    X(CONTROL_CODE, "control code")                                                                \
    X(EXCHANGE_CODE, "exchange code")

typedef enum tg_tile_cat {
#define TG_TILE_CAT_ENUM(e, name) TG_TILE_##e,
    TG_TILE_CAT_LIST(TG_TILE_CAT_ENUM)
#undef TG_TILE_CAT_ENUM
        TG_TILE_CAT_COUNT
} tg_tile_cat;

const char *tg_tile_cat_name(tg_tile_cat c);

/* Where a buffer lives on its device's tiles: `used` consecutive tiles
 * (modulo the tile count) from `start`, `chunk` bytes on each but the last,
 * which holds the rest. */
typedef struct tg_tile_span {
    int start, used;
    int64_t chunk;
} tg_tile_span;

/* The linear mapping of `bytes` over `tiles` tiles with a grain, from tile
 * `start`: ceil(grains / tiles) grains per tile. */
tg_tile_span tg_tile_map_linear(int64_t bytes, int64_t grain, int tiles, int start);
/* Bytes of a span on tile t (0 when the span does not cover it). */
int64_t tg_tile_span_bytes(const tg_tile_span *sp, int64_t bytes, int tiles, int t);

typedef struct tg_tile_device {
    int64_t *bytes; /* [tile * TG_TILE_CAT_COUNT + category] */
    int *peak_step; /* per tile: timeline step of its activation peak */
    int max_tile;   /* the tile with the most bytes */
    int64_t max_bytes;
    int64_t total[TG_TILE_CAT_COUNT]; /* summed over tiles */
    double *step_cycles[3];           /* per phase, per step */
    double cycles[3];                 /* per phase: one micro-batch (F, B) or one update (U) */
    double copy_cycles[3];            /* of which host streams and device-to-device copies */
    /* of copy_cycles[update]: the gradient all-reduce between replicas
     * (target/collective.h), of its gradients' bytes, and of that the part
     * over the gateways */
    double allreduce_cycles, allreduce_gateway_cycles, allreduce_bytes;
    /* graph statistics in the tile processor's terms: a compute set per step,
     * a vertex per worker on each tile a step runs on, an edge per operand
     * (inputs and output) of each vertex */
    int64_t compute_sets, vertices, edges;
    /* per op type (ops/op.h's tg_op_kind), [type * 3 + k]: k = 0 its vertices,
     * 1 their vertex state bytes, 2 its vertex code bytes (one copy on each
     * tile that runs it); the sums are the tiles' vertex state and code */
    int64_t *vertex_types;
} tg_tile_device;

typedef struct tg_tile_plan {
    tg_target_desc target;
    int n_devices;
    tg_tile_span *span; /* per program buffer */
    tg_tile_device *devices;
} tg_tile_plan;

/* Map the program's buffers over tiles, estimate code and cycles. Called by
 * the compiler after the memory plan; sets p->tile_plan. */
tg_status tg_tile_plan_build(struct tg_program *p, const tg_target_desc *t);
void tg_tile_plan_destroy(tg_tile_plan *tp);

/* Bytes of tile t of device d (all categories). */
int64_t tg_tile_bytes(const tg_tile_plan *tp, int d, int t);

/* The cycle model's timeline of one host step (target.h, tg_tile_event_fn,
 * says what fn receives); the simulate hook of tiled targets. */
tg_status tg_tile_simulate(const struct tg_program *p, tg_tile_event_fn fn, void *ctx);

/* Cycles of device d's host streams in for one micro-batch (its inputs at
 * hostBytesPerCycle). */
double tg_tile_stream_in_cycles(const struct tg_program *p, int d);

/* Streaming memory and gathers (target/tilestream.c). With I/O tiles:
 * *pass, the cycles of device d's pass of phase ph with its streamed copies
 * on the I/O tiles beside the compute (*stream_cycles: the copies' own).
 * The gathers of sharded weights: their cycles into td's copy cycles and
 * their exchange code onto the tiles. The cycles of phase ph that ran
 * beside others (copies overlapped by compute), from a finished plan. */
tg_status tg_tile_io_pass(const struct tg_program *p, const tg_tile_plan *tp, int d, int ph,
                          double *pass, double *stream_cycles);
void tg_tile_gathers(const struct tg_program *p, const tg_tile_plan *tp, int d, tg_tile_device *td);
double tg_tile_hidden_cycles(const struct tg_program *p, int d, int ph);

/* Capacity: on a tile over memoryPerTile, TG_ERR_NOMEM with a message naming
 * the device and tile, needed against available, the largest categories and
 * tensors on that tile. */
tg_status tg_tile_plan_check(const struct tg_program *p);

/* Cycles of one compute step: compute + exchange + sync, bulk-synchronous.
 * `tiles_used` tiles share `flops` (at the dtype's rate); `exchange_bytes`
 * arrive spread over the same tiles. */
double tg_tile_step_cycles(const tg_target_desc *t, double flops, bool f16, int tiles_used,
                           double exchange_bytes, double *compute, double *exchange);

#endif
