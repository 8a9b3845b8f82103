/* bench/bench_kernels.c - GFLOP/s of the dense kernels against OpenBLAS
 * sgemm measured in the same run.
 *
 * One JSON line per case:
 *   {"bench":"conv2d_fwd","shape":"...","method":"direct","threads":1,
 *    "gflops":..., "sgemm_gflops":..., "ratio":...}
 * sgemm_gflops is single-precision GEMM of the shape the im2col method
 * would multiply for the whole batch (same FLOPs as the conv), on the same
 * number of threads: the best an im2col + GEMM convolution could do. The
 * "auto" method line is what the library runs; "gemm" and "direct" lines
 * show both methods where both apply, which is how the heuristic in
 * ops/conv.c was chosen.
 *
 * Usage: bench_kernels [seconds per case, default 0.3] [threads: 1 or 2, default both]
 */
#include "backend/backend.h"
#include "bench_util.h"
#include "core/alloc.h"
#include "core/pool.h"
#include "backend/cpu/blas.h"
#include "ops/conv.h"
#include "ops/op.h"
#include "backend/cpu/simd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double min_seconds = 0.3;

typedef void (*run_fn)(void *ctx);

/* Seconds per call: the best of 5 timed batches after a warm-up. */
static double time_it(run_fn fn, void *ctx)
{
    fn(ctx);
    int reps = 1;
    double t;
    for (;;) {
        double t0 = bench_now();
        for (int r = 0; r < reps; r++)
            fn(ctx);
        t = bench_now() - t0;
        if (t > min_seconds / 5 || reps > (1 << 20))
            break;
        reps *= 2;
    }
    double best = t / reps;
    for (int k = 0; k < 4; k++) {
        double t0 = bench_now();
        for (int r = 0; r < reps; r++)
            fn(ctx);
        double s = (bench_now() - t0) / reps;
        if (s < best)
            best = s;
    }
    return best;
}

static float *rand_buf(int64_t n)
{
    float *p = tg_malloc_aligned((size_t)(n ? n : 1) * sizeof(float));
    uint32_t s = 12345;
    for (int64_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        p[i] = (float)(s >> 8) / (float)(1u << 24) - 0.5f;
    }
    return p;
}

/* ---- sgemm --------------------------------------------------------------------------- */

typedef struct gemm_ctx {
    tg_pool *pool;
    bool ta, tb;
    int M, N, K;
    float *A, *B, *C;
} gemm_ctx;

static void run_gemm(void *ctx)
{
    gemm_ctx *g = ctx;
    tg_sgemm_pool(g->pool, g->ta, g->tb, g->M, g->N, g->K, 1.0f, g->A, g->ta ? g->M : g->K, g->B,
                  g->tb ? g->K : g->N, 0.0f, g->C, g->N);
}

static double sgemm_gflops(tg_pool *pool, bool ta, bool tb, int M, int N, int K)
{
    gemm_ctx g = {pool,
                  ta,
                  tb,
                  M,
                  N,
                  K,
                  rand_buf((int64_t)M * K),
                  rand_buf((int64_t)K * N),
                  rand_buf((int64_t)M * N)};
    double s = time_it(run_gemm, &g);
    tg_free(g.A);
    tg_free(g.B);
    tg_free(g.C);
    return 2.0 * M * N * K / s / 1e9;
}

/* ---- one op node ------------------------------------------------------------------------ */

typedef struct node_ctx {
    const tg_op_def *def;
    const tg_kernel_def *kd;
    tg_kernel_args a;
} node_ctx;

static void run_node(void *ctx)
{
    node_ctx *n = ctx;
    n->kd->forward(&n->a);
}

static double node_gflops(tg_tensor *t, tg_pool *pool)
{
    node_ctx n;
    memset(&n, 0, sizeof n);
    n.def = tg_op_get(t->op);
    n.kd = tg_backend_cpu.kernel(t->op);
    n.a.node = t;
    n.a.pool = pool;
    for (int k = 0; k < t->n_in; k++)
        n.a.in[k] = rand_buf(tg_numel(t->in[k]));
    n.a.out = rand_buf(tg_numel(t));
    n.a.scratch_bytes = n.kd->scratch ? n.kd->scratch(t, tg_pool_threads(pool)) : 0;
    n.a.scratch = tg_malloc_aligned(n.a.scratch_bytes ? n.a.scratch_bytes : 1);
    double s = time_it(run_node, &n);
    for (int k = 0; k < t->n_in; k++)
        tg_free(n.a.in[k]);
    tg_free(n.a.out);
    tg_free(n.a.scratch);
    return n.def->flops(t) / s / 1e9;
}

/* ---- convolutions ------------------------------------------------------------------------- */

typedef struct conv_shape {
    const char *name;
    int64_t N, C, H, W, K, R, S, pad;
} conv_shape;

static const char *method_name(tg_conv_method m)
{
    return m == TG_CONV_GEMM ? "gemm" : m == TG_CONV_DIRECT ? "direct" : "auto";
}

static void bench_conv(const conv_shape *cs, tg_pool *pool)
{
    int T = tg_pool_threads(pool);
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape4(cs->N, cs->C, cs->H, cs->W));
    tg_tensor *w = tg_input(g, "w", TG_F32, tg_shape4(cs->K, cs->C, cs->R, cs->S));
    tg_conv2d_params p = {1, 1, (int)cs->pad, (int)cs->pad, 1, 1, 1};
    tg_tensor *y = tg_conv2d(g, x, w, NULL, p);
    if (!y) {
        fprintf(stderr, "%s\n", tg_graph_error(g));
        tg_graph_destroy(g);
        return;
    }
    tg_node_params np = y->p;
    tg_conv_set_extent_h(&np, cs->H), tg_conv_set_extent_w(&np, cs->W);
    tg_tensor *dx = tg_node_create(g, TG_OP_CONV2D_BWD_DATA, 2, (tg_tensor *[]){y, w}, &np);
    tg_conv_set_extent_h(&np, cs->R), tg_conv_set_extent_w(&np, cs->S);
    tg_tensor *dw = tg_node_create(g, TG_OP_CONV2D_BWD_WEIGHT, 2, (tg_tensor *[]){y, x}, &np);
    tg_conv_geom geo = tg_conv_geom_of(y);
    int P = (int)(geo.OH * geo.OW), NP = (int)geo.N * P, CRS = (int)(cs->C * cs->R * cs->S);
    struct {
        const char *bench;
        tg_tensor *t;
        double sg;
    } ops[3] = {
        {"conv2d_fwd", y, sgemm_gflops(pool, false, false, (int)cs->K, NP, CRS)},
        {"conv2d_bwd_data", dx, sgemm_gflops(pool, true, false, CRS, NP, (int)cs->K)},
        {"conv2d_bwd_weight", dw, sgemm_gflops(pool, false, true, (int)cs->K, CRS, NP)},
    };
    char shape[160];
    snprintf(shape, sizeof shape, "%s x[%lld,%lld,%lld,%lld] w[%lld,%lld,%lld,%lld] pad %lld",
             cs->name, (long long)cs->N, (long long)cs->C, (long long)cs->H, (long long)cs->W,
             (long long)cs->K, (long long)cs->C, (long long)cs->R, (long long)cs->S,
             (long long)cs->pad);
    for (int o = 0; o < 3; o++)
        for (int m = TG_CONV_AUTO; m <= TG_CONV_DIRECT; m++) {
            tg_conv_force_method((tg_conv_method)m);
            tg_conv_method used = tg_conv_method_for(ops[o].t->op, &geo);
            double gf = node_gflops(ops[o].t, pool);
            printf("{\"bench\":\"%s\",\"shape\":\"%s\",\"method\":\"%s\",\"runs\":\"%s\","
                   "\"threads\":%d,\"gflops\":%.2f,\"sgemm_gflops\":%.2f,\"ratio\":%.3f}\n",
                   ops[o].bench, shape, method_name((tg_conv_method)m), method_name(used), T, gf,
                   ops[o].sg, gf / ops[o].sg);
            fflush(stdout);
        }
    tg_conv_force_method(TG_CONV_AUTO);
    tg_graph_destroy(g);
}

static void bench_linear(tg_pool *pool, int64_t N, int64_t in, int64_t out)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape2(N, in));
    tg_tensor *w = tg_input(g, "w", TG_F32, tg_shape2(out, in));
    tg_tensor *b = tg_input(g, "b", TG_F32, tg_shape1(out));
    tg_tensor *y = tg_linear(g, x, w, b);
    double gf = node_gflops(y, pool);
    double sg = sgemm_gflops(pool, false, true, (int)N, (int)out, (int)in);
    printf("{\"bench\":\"linear_fwd\",\"shape\":\"x[%lld,%lld] w[%lld,%lld] + bias\","
           "\"threads\":%d,\"gflops\":%.2f,\"sgemm_gflops\":%.2f,\"ratio\":%.3f}\n",
           (long long)N, (long long)in, (long long)out, (long long)in, tg_pool_threads(pool), gf,
           sg, gf / sg);
    fflush(stdout);
    tg_graph_destroy(g);
}

int main(int argc, char **argv)
{
    int usage = bench_usage(
        argc, argv, 2,
        "usage: bench_kernels [seconds per case] [threads]\nGFLOP/s of the dense kernels against "
        "OpenBLAS sgemm measured in the same run. One JSON line per case.\n");
    if (usage >= 0)
        return usage;
    if (argc > 1)
        min_seconds = atof(argv[1]);
    int t_lo = 1, t_hi = 2;
    if (argc > 2)
        t_lo = t_hi = atoi(argv[2]) > 0 ? atoi(argv[2]) : 1;
    tg_blas_init();
    static const conv_shape convs[] = {
        {"tutorial conv1", 40, 1, 28, 28, 10, 5, 5, 0},
        {"tutorial conv2", 40, 10, 12, 12, 20, 5, 5, 0},
        {"resnet 3x3", 8, 64, 32, 32, 64, 3, 3, 1},
    };
    fprintf(stderr, "simd level: %s\n", tg_simd_level_name(tg_simd_level_get()));
    for (int T = t_lo; T <= t_hi; T++) {
        tg_pool *pool = tg_pool_create(T);
        double sq = sgemm_gflops(pool, false, false, 512, 512, 512);
        printf("{\"bench\":\"sgemm\",\"shape\":\"512x512x512\",\"threads\":%d,\"gflops\":%.2f,"
               "\"sgemm_gflops\":%.2f,\"ratio\":1.000}\n",
               T, sq, sq);
        fflush(stdout);
        for (size_t i = 0; i < sizeof convs / sizeof *convs; i++)
            bench_conv(&convs[i], pool);
        bench_linear(pool, 40, 320, 256);
        tg_pool_destroy(pool);
    }
    return 0;
}
