/* compile/cost.h - the predicted time of each op on a target.
 *
 * On the cpu target an op's time is an overhead per kernel call plus its
 * FLOPs at the rate of its kind (matrix products, convolutions) or its bytes
 * read and written at the rate of pooling (windows) or of the memory-bound
 * rest (element-wise, losses, updates). The rates are measured
 * once per machine by a short calibration (a few milliseconds per kind, on
 * the device's thread count) and cached in $XDG_CACHE_HOME/tilegraph or
 * ~/.cache/tilegraph, keyed by CPU model, thread count and tilegraph version,
 * written atomically. TILEGRAPH_CALIBRATION=off (for tests and reproducible
 * plans) uses fixed defaults instead and touches no file.
 *
 * On tiled targets (mk2) an op's time is the cycle model's
 * (tg_tile_step_cycles) over the tiles its output spans, at the clock rate,
 * and a copy between devices runs at the link rate.
 */
#ifndef TG_COMPILE_COST_H
#define TG_COMPILE_COST_H

#include "graph/node.h"
#include "target/target.h"
#include "core/config.h"

typedef enum tg_cost_kind {
    TG_COST_GEMM,   /* matmul, linear */
    TG_COST_CONV,   /* conv2d and its two backward ops */
    TG_COST_POOL,   /* pooling and its backward: bytes moved, at a window's pace */
    TG_COST_MEMORY, /* everything else: bound by bytes moved */
    TG_COST_KIND_COUNT
} tg_cost_kind;

typedef struct tg_cost_rates {
    double flops_per_s[TG_COST_KIND_COUNT]; /* GEMM and CONV */
    double pool_bytes_per_s;                /* POOL */
    double bytes_per_s;                     /* MEMORY and device-to-device copies */
    double op_overhead_s;                   /* per kernel call */
    int threads;
    bool calibrated; /* measured on this machine (now or from the cache) */
    bool from_cache;
} tg_cost_rates;

typedef struct tg_cost_model {
    bool tiled;
    tg_target_desc target; /* tiled targets */
    tg_cost_rates rates;   /* cpu */
} tg_cost_model;

const char *tg_cost_kind_name(tg_cost_kind k);
tg_cost_kind tg_cost_kind_of(tg_op op);

/* Fixed rates of a modest core, scaled by threads (no measurement). */
void tg_cost_rates_default(int threads, tg_cost_rates *out);
/* The cached calibration for this CPU, thread count and version, or a new
 * one (then cached); the defaults when TILEGRAPH_CALIBRATION=off. A cache
 * that cannot be written is not an error: the measured rates are used. */
tg_status tg_cost_rates_get(int threads, tg_cost_rates *out);

/* The model for compiling with `c` over n_devices devices (threads per
 * device as the session will use them). */
tg_status tg_cost_model_from_config(const tg_config *c, int n_devices, tg_cost_model *out);

/* Seconds for one run of node t (0 for leaves and aliases). */
double tg_cost_node_seconds(const tg_cost_model *m, const tg_tensor *t);
/* Seconds to copy `bytes` from one device to the next. */
double tg_cost_copy_seconds(const tg_cost_model *m, double bytes);
/* Bytes a kernel reads and writes: its inputs and its output. */
double tg_cost_node_bytes(const tg_tensor *t);

#endif
