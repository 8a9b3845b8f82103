/* compile/cost.c - op costs from FLOPs and bytes, with rates calibrated on
 * this machine and cached, or from the tile processor's cycle model. */
#include "backend/backend.h"
#include "compile/cost.h"

#include "core/alloc.h"
#include "core/clock.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/pool.h"
#include "ops/op.h"
#include "tilegraph/graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef TG_VERSION
#define TG_VERSION "0"
#endif
/* the caches' version: the build's, and the clock one-thread kernels are
 * timed on (the thread's CPU time: a cache of wall-clock times, taken
 * under whatever load there was, is timed again) */
#define CACHE_VERSION TG_VERSION "+cpu-clock"

static const char *const kind_names[TG_COST_KIND_COUNT] = {[TG_COST_GEMM] = "gemm",
                                                           [TG_COST_CONV] = "conv",
                                                           [TG_COST_POOL] = "pool",
                                                           [TG_COST_MEMORY] = "memory"};

const char *tg_cost_kind_name(tg_cost_kind k)
{
    return (unsigned)k < TG_COST_KIND_COUNT ? kind_names[k] : "?";
}

tg_cost_kind tg_cost_kind_of(tg_op op)
{
    const tg_op_def *def = tg_op_get(op);
    return def ? def->cost : TG_COST_MEMORY;
}

void tg_cost_rates_default(int threads, tg_cost_rates *r)
{
    /* a modest core: 8 GFLOP/s in GEMM, 5 in convolution, 5 GB/s for
     * memory-bound kernels, 2 us per kernel call; threads help the compute
     * kinds, not the bandwidth */
    if (threads < 1)
        threads = 1;
    memset(r, 0, sizeof *r);
    r->flops_per_s[TG_COST_GEMM] = 8e9 * threads;
    r->flops_per_s[TG_COST_CONV] = 5e9 * threads;
    r->bytes_per_s = 5e9;
    r->pool_bytes_per_s = 2e9;
    r->op_overhead_s = 2e-6;
    r->threads = threads;
}

/* ---- calibration ----------------------------------------------------------------- */

/* Made-up values for input x: floats in [-1, 1) in no order (a kernel
 * that branches on values, as max pooling's gradient or ReLU's, runs at
 * the pace it has on real data, not on a predictable ramp), and integers 0
 * (in range as an index or a label); NULL when out of memory. */
static void *made_up_input(const tg_tensor *x)
{
    size_t n = (size_t)tg_numel(x);
    /* kernels read f32 unless planned on the stored type: room for either */
    size_t bytes = n * sizeof(float) > tg_nbytes(x) ? n * sizeof(float) : tg_nbytes(x);
    void *p = tg_calloc(bytes + 64, 1);
    if (p && (x->dtype == TG_F32 || x->dtype == TG_F16 || x->dtype == TG_BF16))
        for (size_t i = 0; i < n; i++) {
            /* murmur3's finaliser: the low bits of a plain multiplicative
             * hash repeat in a pattern a branch predictor learns */
            uint32_t h = (uint32_t)i;
            h = (h ^ (h >> 16)) * 0x85ebca6bu;
            h = (h ^ (h >> 13)) * 0xc2b2ae35u;
            h ^= h >> 16;
            ((float *)p)[i] = (float)(h >> 16) / 32768.0f - 1.0f;
        }
    return p;
}

/* The clock a kernel is timed on: with one thread the kernel runs on the
 * caller alone (core/pool.c), and the thread's CPU time leaves out the
 * time other processes take on a shared machine, which the fastest of a
 * few rounds cannot when a run of a large kernel is longer than the
 * scheduler's slice (automatic stages then balanced the load's noise:
 * ResNet-50 over 2 devices split at layer2.1 under load against layer3.3
 * on the same model otherwise). With more threads, the wall clock. */
static double kernel_clock(const tg_kernel_args *a)
{
    return tg_pool_threads(a->pool) == 1 ? tg_clock_thread_seconds() : tg_clock_seconds();
}

/* The fastest of five rounds of `budget` / 5 seconds (at least one run
 * each) after one warm-up run: on a shared machine the slow rounds are
 * other processes' time, not the kernel's. */
static double fastest_run(const tg_kernel_args *a, double budget)
{
    double per_run = -1;
    tg_op_forward(a);
    for (int round = 0; round < 5; round++) {
        int runs = 0;
        double t0 = kernel_clock(a), t1 = t0;
        while ((runs == 0 || t1 - t0 < budget / 5) && runs < 20000) {
            tg_op_forward(a);
            runs++;
            t1 = kernel_clock(a);
        }
        double r = (t1 - t0) / runs;
        per_run = per_run < 0 || r < per_run ? r : per_run;
    }
    return per_run;
}

/* Whether a backward op finds x in the stash: a forward value (through
 * its views) or a host input. */
static bool stashed_value(const tg_tensor *x)
{
    while (x->flags & TG_NODE_ALIAS)
        x = x->in[0];
    if (x->n_in == 0)
        return x->role == TG_ROLE_INPUT;
    return !(x->flags & (TG_NODE_BACKWARD | TG_NODE_OPTIMIZER));
}

bool tg_cost_reads_stash(const tg_tensor *t)
{
    if (!(t->flags & TG_NODE_BACKWARD))
        return false;
    for (int k = 0; k < t->n_in; k++)
        if (stashed_value(t->in[k]))
            return true;
    return false;
}

/* Read `bytes` at p, so that they are in cache. */
static float touch(const void *p, size_t bytes)
{
    const float *f = p;
    float sum = 0;
    for (size_t i = 0; i < bytes / sizeof(float); i += 16) /* a cache line each */
        sum += f[i];
    return sum;
}

/* The fastest of three runs, each after `evict` has pushed everything out
 * of the caches and the inputs that are not stashed (just made by the
 * steps before: in cache in the program too) have been read back. */
static double fastest_cold_run(const tg_kernel_args *a, const tg_cost_evict *evict)
{
    double per_run = -1;
    volatile float sink = 0;
    tg_op_forward(a); /* warm-up: page faults, plans */
    for (int round = 0; round < 3; round++) {
        /* read, not memset: a large memset streams past the caches */
        sink += touch(evict->buf, evict->bytes);
        for (int k = 0; k < a->node->n_in; k++)
            if (!stashed_value(a->node->in[k]))
                sink += touch(a->in[k], (size_t)tg_numel(a->node->in[k]) * sizeof(float));
        double t0 = kernel_clock(a);
        tg_op_forward(a);
        double r = kernel_clock(a) - t0;
        per_run = per_run < 0 || r < per_run ? r : per_run;
    }
    (void)sink;
    return per_run;
}

double tg_cost_time_kernel(const tg_tensor *t, tg_pool *pool, double budget,
                           const tg_cost_evict *evict)
{
    const tg_op_def *def = tg_op_get(t->op);
    if (!def || !tg_op_has_kernel(t->op) || t->n_in == 0)
        return -1;
    int threads = tg_pool_threads(pool);
    const tg_op_planner *planner = tg_node_planner(t);
    tg_kernel_plan kp = {0};
    tg_plan_opts po = {.n_threads = threads, .compute = TG_F32};
    tg_status planned = planner ? planner->plan(t, &po, &kp) : TG_OK;
    if (planned == TG_ERR_NOMEM)
        return TG_COST_NO_MEMORY;
    if (planned != TG_OK)
        memset(&kp, 0, sizeof kp); /* the op's own kernel, as the program falls back */
    size_t scratch = kp.state ? kp.scratch : tg_op_scratch(t, threads);
    tg_kernel_args a = {.node = t, .pool = pool, .scratch_bytes = scratch, .plan = kp.state};
    a.step = 1; /* an optimizer's first update: no division by 1 - beta^0 */
    bool ok = (a.out = tg_calloc(tg_nbytes(t) + (size_t)tg_numel(t) * sizeof(float) + 64, 1));
    ok = ok && (!scratch || (a.scratch = tg_calloc(scratch, 1)) != NULL);
    for (int k = 0; ok && k < t->n_in; k++)
        ok = (a.in[k] = made_up_input(t->in[k])) != NULL;
    double per_run = !ok     ? TG_COST_NO_MEMORY
                     : evict ? fastest_cold_run(&a, evict)
                             : fastest_run(&a, budget);
    for (int k = 0; k < t->n_in; k++)
        tg_free(a.in[k]);
    tg_free(a.out);
    tg_free(a.scratch);
    if (kp.state && planner->plan_free)
        planner->plan_free(kp.state);
    return per_run;
}

/* The backward op of `fwd` (its op's gradient rule), for an output gradient
 * fed as an input; NULL on failure. */
static tg_tensor *backward_of(tg_graph *g, tg_tensor *fwd)
{
    tg_tensor *dy = tg_input(g, "dy", TG_F32, tg_tensor_shape(fwd)), *din[TG_MAX_INPUTS] = {0};
    bool need[TG_MAX_INPUTS] = {true};
    const tg_op_def *def = tg_op_get(fwd->op);
    if (!dy || !def->backward || def->backward(g, fwd, dy, need, din) != TG_OK)
        return NULL;
    return din[0];
}

/* Representative ops of each kind at the sizes of small networks' layers
 * (in cache, as they run between their producers and consumers). */
typedef struct calib_set {
    tg_tensor *tiny, *gemm, *conv, *pool, *pool_bwd, *memory;
} calib_set;

static tg_status calib_graph(tg_graph *g, calib_set *c)
{
    c->gemm = tg_matmul(g, tg_input(g, "a", TG_F32, tg_shape2(128, 256)),
                        tg_input(g, "b", TG_F32, tg_shape2(256, 256)), false, false);
    tg_conv2d_params cp = {1, 1, 1, 1, 1, 1, 1};
    c->conv = tg_conv2d(g, tg_input(g, "x", TG_F32, tg_shape4(4, 16, 28, 28)),
                        tg_input(g, "w", TG_F32, tg_shape4(32, 16, 3, 3)), NULL, cp);
    tg_tensor *pooled =
        tg_maxpool2d(g, tg_input(g, "y", TG_F32, tg_shape4(8, 16, 24, 24)), 2, 2, 0);
    c->pool = pooled;
    c->pool_bwd = pooled ? backward_of(g, pooled) : NULL;
    c->memory = tg_add(g, tg_input(g, "u", TG_F32, tg_shape1(1 << 16)),
                       tg_input(g, "v", TG_F32, tg_shape1(1 << 16)));
    c->tiny =
        tg_add(g, tg_input(g, "p", TG_F32, tg_shape1(16)), tg_input(g, "q", TG_F32, tg_shape1(16)));
    tg_status s = tg_graph_status(g);
    if (s == TG_OK && !c->pool_bwd)
        s = tg_error(TG_ERR_INTERNAL, "cost calibration: no backward for maxpool2d");
    return s;
}

static tg_status calibrate(int threads, tg_cost_rates *r)
{
    tg_cost_rates_default(threads, r);
    tg_graph *g = tg_graph_create();
    tg_pool *pool = tg_pool_create(threads);
    calib_set c = {0};
    tg_status s =
        g && pool ? calib_graph(g, &c) : tg_error(TG_ERR_NOMEM, "cost calibration: out of memory");
    if (s == TG_OK) {
        double t_tiny = tg_cost_time_kernel(c.tiny, pool, 0.002, NULL);
        double t_gemm = tg_cost_time_kernel(c.gemm, pool, 0.004, NULL);
        double t_conv = tg_cost_time_kernel(c.conv, pool, 0.004, NULL);
        /* forward and backward pooling differ per byte: one rate for both */
        double t_pool = tg_cost_time_kernel(c.pool, pool, 0.004, NULL) +
                        tg_cost_time_kernel(c.pool_bwd, pool, 0.004, NULL);
        double t_mem = tg_cost_time_kernel(c.memory, pool, 0.004, NULL);
        if (t_tiny < 0 || t_gemm <= 0 || t_conv <= 0 || t_pool <= 0 || t_mem <= 0) {
            s = tg_error(TG_ERR_NOMEM, "cost calibration: out of memory");
        } else {
            /* the tiny call is all overhead; the rest is work at the rate
             * (half the overhead taken off, so that noise leaves time for work) */
            double over = t_tiny * 0.5;
            r->op_overhead_s = t_tiny;
            r->flops_per_s[TG_COST_GEMM] = tg_op_get(c.gemm->op)->flops(c.gemm) / (t_gemm - over);
            r->flops_per_s[TG_COST_CONV] = tg_op_get(c.conv->op)->flops(c.conv) / (t_conv - over);
            r->pool_bytes_per_s =
                (tg_cost_node_bytes(c.pool) + tg_cost_node_bytes(c.pool_bwd)) / (t_pool - 2 * over);
            r->bytes_per_s = tg_cost_node_bytes(c.memory) / (t_mem - over);
            r->calibrated = true;
        }
    }
    tg_pool_destroy(pool);
    tg_graph_destroy(g);
    return s;
}

/* ---- the cache ------------------------------------------------------------------- */

void tg_cost_cpu_model(char *buf, size_t cap)
{
    snprintf(buf, cap, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "model name", 10) == 0) {
            const char *v = strchr(line, ':');
            if (v) {
                snprintf(buf, cap, "%s", v + 1 + (v[1] == ' '));
                buf[strcspn(buf, "\n")] = '\0';
                for (char *c = buf; *c; c++)
                    if (*c == '"' || *c == '\\')
                        *c = '_'; /* kept out of the JSON string */
            }
            break;
        }
    if (f)
        fclose(f);
}

bool tg_cost_cache_dir(char *buf, size_t cap)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && *xdg == '/')
        snprintf(buf, cap, "%s/tilegraph", xdg);
    else if (home && *home)
        snprintf(buf, cap, "%s/.cache/tilegraph", home);
    else
        return false;
    return true;
}

/* one line of JSON; read back with the same layout (a file in another
 * layout is simply measured again) */
#define CACHE_READ                                                                                 \
    "{\"version\":\"%63[^\"]\",\"cpu\":\"%255[^\"]\",\"threads\":%d,\"gemm_flops_per_s\":%lf,"     \
    "\"conv_flops_per_s\":%lf,\"pool_bytes_per_s\":%lf,\"bytes_per_s\":%lf,"                       \
    "\"op_overhead_s\":%lf}"
#define CACHE_WRITE                                                                                \
    "{\"version\":\"%s\",\"cpu\":\"%s\",\"threads\":%d,\"gemm_flops_per_s\":%.6g,"                 \
    "\"conv_flops_per_s\":%.6g,\"pool_bytes_per_s\":%.6g,\"bytes_per_s\":%.6g,"                    \
    "\"op_overhead_s\":%.6g}\n"

static bool cache_read(const char *path, const char *cpu, int threads, tg_cost_rates *r)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    char version[64] = "", model[256] = "";
    int th = 0;
    tg_cost_rates c;
    tg_cost_rates_default(threads, &c);
    int n =
        fscanf(f, CACHE_READ, version, model, &th, &c.flops_per_s[TG_COST_GEMM],
               &c.flops_per_s[TG_COST_CONV], &c.pool_bytes_per_s, &c.bytes_per_s, &c.op_overhead_s);
    fclose(f);
    bool ok = n == 8 && strcmp(version, CACHE_VERSION) == 0 && strcmp(model, cpu) == 0 &&
              th == threads && c.flops_per_s[TG_COST_GEMM] > 0 && c.flops_per_s[TG_COST_CONV] > 0 &&
              c.pool_bytes_per_s > 0 && c.bytes_per_s > 0 && c.op_overhead_s >= 0;
    if (ok) {
        c.calibrated = c.from_cache = true;
        *r = c;
    }
    return ok;
}

static void cache_write(const char *dir, const char *path, const char *cpu, const tg_cost_rates *r)
{
    tg_atomic_file af;
    if (tg_probe_writable_dir("cost cache", dir) != TG_OK ||
        tg_atomic_file_open(path, &af) != TG_OK)
        return; /* the rates are still good for this run */
    fprintf(af.f, CACHE_WRITE, CACHE_VERSION, cpu, r->threads, r->flops_per_s[TG_COST_GEMM],
            r->flops_per_s[TG_COST_CONV], r->pool_bytes_per_s, r->bytes_per_s, r->op_overhead_s);
    tg_atomic_file_commit(&af);
}

tg_status tg_cost_rates_get(int threads, tg_cost_rates *r)
{
    if (threads < 1)
        threads = 1;
    const char *env = getenv("TILEGRAPH_CALIBRATION");
    if (env && strcmp(env, "off") == 0) {
        tg_cost_rates_default(threads, r);
        return TG_OK;
    }
    if (env && *env && strcmp(env, "on") != 0)
        return tg_error(TG_ERR_CONFIG,
                        "TILEGRAPH_CALIBRATION is '%s': use 'on' (measure once, cached) or 'off' "
                        "(fixed default rates)",
                        env);
    char cpu[256], dir[768], path[1024];
    tg_cost_cpu_model(cpu, sizeof cpu);
    bool cached = tg_cost_cache_dir(dir, sizeof dir);
    if (cached) {
        snprintf(path, sizeof path, "%s/cost-rates-%dt.json", dir, threads);
        if (cache_read(path, cpu, threads, r))
            return TG_OK;
    }
    TG_TRY(calibrate(threads, r));
    if (cached)
        cache_write(dir, path, cpu, r);
    return TG_OK;
}

/* ---- costs ----------------------------------------------------------------------- */

tg_status tg_cost_model_from_config(const tg_config *c, int n_devices, tg_cost_model *m)
{
    memset(m, 0, sizeof *m);
    m->tiled = tg_target_tiled(tg_target_of_config(c));
    TG_TRY(tg_target_from_config(c, &m->target));
    int threads = c->threads.per_device;
    if (threads <= 0) /* as the session shares the machine's CPUs */
        threads = tg_cpu_count() / (n_devices > 0 ? n_devices : 1);
    if (threads < 1)
        threads = 1;
    if (m->tiled) {
        tg_cost_rates_default(threads, &m->rates);
        return TG_OK;
    }
    return tg_cost_rates_get(threads, &m->rates);
}

double tg_cost_node_bytes(const tg_tensor *t)
{
    double b = (double)tg_nbytes(t);
    for (int k = 0; k < t->n_in; k++)
        b += (double)tg_nbytes(t->in[k]);
    return b;
}

static double tiled_seconds(const tg_cost_model *m, const tg_tensor *t, double flops)
{
    const tg_target_desc *tg = &m->target;
    /* the output's linear mapping decides the tiles the step runs on, and
     * its inputs are assumed to arrive from elsewhere (the plan's upper bound) */
    double grains = (double)tg_nbytes(t) / (double)(tg->grain_bytes > 0 ? tg->grain_bytes : 1);
    int tiles = grains >= tg->tiles ? tg->tiles : (int)grains + 1;
    double in_bytes = tg_cost_node_bytes(t) - (double)tg_nbytes(t);
    double cycles = tg_tile_step_cycles(tg, flops, t->dtype == TG_F16, tiles, in_bytes, NULL, NULL);
    return cycles / tg->clock_hz;
}

double tg_cost_node_seconds(const tg_cost_model *m, const tg_tensor *t)
{
    if (t->n_in == 0 || (t->flags & TG_NODE_ALIAS))
        return 0;
    const tg_op_def *def = tg_op_get(t->op);
    double flops = def && def->flops ? def->flops(t) : 0;
    if (m->tiled)
        return tiled_seconds(m, t, flops);
    double timed = tg_cost_kernels_find(m->kernels, tg_cost_kernel_signature(t));
    if (timed >= 0)
        return timed;
    tg_cost_kind k = tg_cost_kind_of(t->op);
    double work = k == TG_COST_MEMORY ? tg_cost_node_bytes(t) / m->rates.bytes_per_s
                  : k == TG_COST_POOL ? tg_cost_node_bytes(t) / m->rates.pool_bytes_per_s
                                      : flops / m->rates.flops_per_s[k];
    return m->rates.op_overhead_s + work;
}

double tg_cost_copy_seconds(const tg_cost_model *m, double bytes)
{
    if (m->tiled)
        return (bytes / m->target.link_bytes_per_cycle + m->target.sync_cycles) /
               m->target.clock_hz;
    return bytes / m->rates.bytes_per_s;
}
