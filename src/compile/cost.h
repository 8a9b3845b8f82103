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
 * Those rates come from large, well-behaved kernels; a program's real ops
 * are small shapes with fixed costs, other kernels (direct convolution,
 * oneDNN, im2col) and data out of cache, and took 2.5-3.6x the rates'
 * time. So once the program is known, tg_cost_model_time_kernels times
 * each of its distinct kernels (op, shapes, integer parameters: the
 * signature) on the device's thread count and keeps the time per
 * signature, cached beside the rates as cost-kernels-<threads>t.json (same
 * keys, written atomically). An op whose signature was timed costs its
 * time; the rest fall back to the rates. The timing is bounded (a budget
 * in all, a progress line on stderr after a second); with
 * TILEGRAPH_CALIBRATION=off nothing is timed.
 *
 * On tiled targets (mk2) an op's time is the cycle model's
 * (tg_tile_step_cycles) over the tiles its output spans, at the clock rate,
 * and a copy between devices runs at the link rate.
 */
#ifndef TG_COMPILE_COST_H
#define TG_COMPILE_COST_H

#include "graph/node.h"
#include "ops/op.h"
#include "target/tiled.h"
#include "core/config.h"

#include <stdint.h>

struct tg_pool;

/* tg_cost_kind (an op's kind of cost) is the op table's: ops/op.h. */

typedef struct tg_cost_rates {
    double flops_per_s[TG_COST_KIND_COUNT]; /* GEMM and CONV */
    double pool_bytes_per_s;                /* POOL */
    double bytes_per_s;                     /* MEMORY and device-to-device copies */
    double op_overhead_s;                   /* per kernel call */
    int threads;
    bool calibrated; /* measured on this machine (now or from the cache) */
    bool from_cache;
} tg_cost_rates;

/* Seconds per kernel signature (tg_cost_kernel_signature), sorted. */
typedef struct tg_cost_kernels {
    int n, cap;
    uint64_t *sig;
    double *seconds;
    char (*op)[32];              /* the op of each, for the cache file's reader */
    int timed, from_cache, left; /* the last timing: new, cached, out of budget */
} tg_cost_kernels;

typedef struct tg_cost_model {
    bool tiled;
    tg_target_desc target;    /* tiled targets */
    tg_cost_rates rates;      /* cpu */
    tg_cost_kernels *kernels; /* cpu, owned: the program's own kernels timed; NULL: rates only */
} tg_cost_model;

const char *tg_cost_kind_name(tg_cost_kind k);
/* The op's kind of cost (its tg_op_def's; TG_COST_MEMORY outside tg_op). */
tg_cost_kind tg_cost_kind_of(tg_op op);

/* Fixed rates of a modest core, scaled by threads (no measurement). */
void tg_cost_rates_default(int threads, tg_cost_rates *out);
/* The cached calibration for this CPU, thread count and version, or a new
 * one (then cached); the defaults when TILEGRAPH_CALIBRATION=off. A cache
 * that cannot be written is not an error: the measured rates are used. */
tg_status tg_cost_rates_get(int threads, tg_cost_rates *out);

/* The CPU's model name (kept out of JSON strings' way), and the cache
 * directory ($XDG_CACHE_HOME/tilegraph or ~/.cache/tilegraph; false when
 * there is neither). */
void tg_cost_cpu_model(char *buf, size_t cap);
bool tg_cost_cache_dir(char *buf, size_t cap);

/* The model for compiling with `c` over n_devices devices (threads per
 * device as the session will use them). */
tg_status tg_cost_model_from_config(const tg_config *c, int n_devices, tg_cost_model *out);

/* The seconds kept for signature sig in k (may be NULL), or -1. */
double tg_cost_kernels_find(const tg_cost_kernels *k, uint64_t sig);
/* Time the distinct kernels of g's `needed` nodes (those not in the cache)
 * and keep their seconds in m (cpu with calibration on; otherwise nothing
 * is done). A kernel that cannot run on made-up inputs, or that the time
 * budget leaves out, keeps the rates; running out of memory is
 * TG_ERR_NOMEM (m stays usable, with what was timed). */
tg_status tg_cost_model_time_kernels(tg_cost_model *m, const tg_graph *g, const bool *needed);
/* Frees what tg_cost_model_time_kernels kept; m stays usable (rates only). */
void tg_cost_model_free(tg_cost_model *m);
/* The signature a kernel's time is kept under: op, types, shapes,
 * integer parameters and the kernel choice TG_KERNELS forces (what decides
 * the kernel and its work), and whether it reads the stash (timed cold). */
uint64_t tg_cost_kernel_signature(const tg_tensor *t);
/* A buffer written over to push a kernel's data out of the caches. */
typedef struct tg_cost_evict {
    void *buf;
    size_t bytes;
} tg_cost_evict;

/* Seconds per run of t's kernel, planned as the program plans it (the op's
 * plan hook, f32), on `pool`'s threads, on inputs made up for it (integers
 * 0, so that indices and labels are in range). Without `evict`, the fastest
 * of five rounds over about `budget` seconds after a warm-up run, data in
 * cache; with it, the fastest of three runs each after the caches are
 * flushed and the inputs t does not read from the stash read back (see
 * tg_cost_reads_stash). TG_COST_NO_MEMORY when out of memory, another
 * value < 0 when it cannot be run. */
#define TG_COST_NO_MEMORY (-2.0)
double tg_cost_time_kernel(const tg_tensor *t, struct tg_pool *pool, double budget,
                           const tg_cost_evict *evict);
/* Whether t is a backward op reading a value stashed since the forward
 * pass (a forward value or a host input): in a pipeline other
 * micro-batches run in between, so it comes from memory, not the cache.
 * Such kernels are timed with cold caches, under a signature of their own. */
bool tg_cost_reads_stash(const tg_tensor *t);

/* Seconds for one run of node t (0 for leaves and aliases). */
double tg_cost_node_seconds(const tg_cost_model *m, const tg_tensor *t);
/* Seconds to copy `bytes` from one device to the next. */
double tg_cost_copy_seconds(const tg_cost_model *m, double bytes);
/* Bytes a kernel reads and writes: its inputs and its output. */
double tg_cost_node_bytes(const tg_tensor *t);

#endif
