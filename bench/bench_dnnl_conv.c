/* bench/bench_dnnl_conv.c - the oneDNN convolutions (planned as a compiled
 * program plans them, reorders to and from oneDNN's layout included)
 * against the project's own kernels, in the same run, on the convolution
 * shapes of ResNet-18 (32x32 input, batch 64) and ResNet-50 (64x64, batch
 * 32) and on the tutorial network's two layers.
 *
 * One JSON line per shape and kind:
 *   {"bench":"dnnl_conv","net":"resnet18","kind":"conv2d_bwd_data",
 *    "shape":"N64 C64 16x16 K128 3x3 s2 p1","threads":1,
 *    "own_kernel":"own im2col+sgemm","own_gflops":..,
 *    "dnnl_kernel":"oneDNN jit:avx512_core","dnnl_gflops":..,"ratio":..,
 *    "auto":"oneDNN ..."}
 * bf16_* is oneDNN multiplying in bf16 (f32 accumulation, f32 in and out).
 * ratio = dnnl / own; blocked_* is oneDNN with x, y and their gradients in
 * nChw16c as the compiler keeps them between convolutions (no reorders
 * but the weights'), blocked_ratio = blocked / own; "auto" is what
 * TG_KERNELS=auto (the default) picks for blocked operands, as a compiled
 * ResNet runs it, and auto_gflops its speed (auto_bf16: the same in bf16;
 * weight gradients over maps of at most 4 pixels are a matmul there).
 * Figures taken on a loaded machine are not claims.
 *
 * Usage: bench_dnnl_conv [seconds per case, default 0.2] [threads, default 1]
 *                        [net: resnet18 | resnet50 | tutorial | all, default all]
 */
#include "backend/backend.h"
#include "bench_util.h"
#include "core/alloc.h"
#include "core/pool.h"
#include "ops/conv.h"
#include "backend/cpu/dnnl_util.h"
#include "ops/op.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double min_seconds = 0.2;

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

/* Activation operands blocked (nChw16c, as the compiler's layout pass
 * keeps them between oneDNN convolutions) where their channels allow:
 * x, y and their gradients, never the weights. */
static void block_operands(const tg_tensor *t, tg_plan_opts *o)
{
    for (int k = 0; k < t->n_in; k++) {
        bool weights = t->op != TG_OP_CONV2D_BWD_WEIGHT && k == 1;
        o->in_blocked[k] = !weights && t->in[k]->shape.dim[1] % TG_CHANNEL_BLOCK == 0;
    }
    o->out_blocked = t->op != TG_OP_CONV2D_BWD_WEIGHT && t->shape.dim[1] % TG_CHANNEL_BLOCK == 0;
}

/* GFLOP/s of node t's kernel planned in `mode`: the best of 3 timed
 * batches after a warm-up; the kernel's name into `kernel`. */
static double node_gflops(tg_tensor *t, tg_pool *pool, tg_dnnl_mode mode, tg_dtype compute,
                          bool blocked, char *kernel, size_t cap)
{
    const tg_op_def *def = tg_op_get(t->op);
    const tg_kernel_def *kd = tg_backend_cpu.kernel(t->op);
    const tg_op_planner *pl = tg_op_planner_get(t->op);
    int threads = tg_pool_threads(pool);
    tg_dnnl_force_mode(mode, true);
    tg_kernel_plan plan = {0};
    tg_plan_opts po = {.n_threads = threads, .compute = compute};
    if (blocked)
        block_operands(t, &po);
    if (pl->plan(t, &po, &plan) != TG_OK) {
        fprintf(stderr, "bench_dnnl_conv: planning %s: %s\n", t->name, tg_error_message());
        exit(1);
    }
    tg_dnnl_force_mode(TG_DNNL_AUTO, false);
    snprintf(kernel, cap, "%s", plan.kernel);
    tg_kernel_args a = {.node = t, .pool = pool, .plan = plan.state};
    for (int k = 0; k < t->n_in; k++)
        a.in[k] = rand_buf(tg_numel(t->in[k]));
    a.out = rand_buf(tg_numel(t));
    a.scratch_bytes = plan.state ? plan.scratch : kd->scratch(t, threads);
    a.scratch = tg_malloc_aligned(a.scratch_bytes ? a.scratch_bytes : 1);
    kd->forward(&a);
    int reps = 1;
    double best = 1e30;
    for (int round = 0; round < 4; round++) {
        double t0 = bench_now();
        for (int r = 0; r < reps; r++)
            kd->forward(&a);
        double s = (bench_now() - t0) / reps;
        if (round == 0 && s * reps < min_seconds / 4 && reps < (1 << 16)) {
            reps *= 2;
            round--;
            continue;
        }
        best = s < best ? s : best;
    }
    for (int k = 0; k < t->n_in; k++)
        tg_free(a.in[k]);
    tg_free(a.out);
    tg_free(a.scratch);
    if (plan.state)
        pl->plan_free(plan.state);
    return def->flops(t) / best / 1e9;
}

typedef struct conv_shape {
    const char *net;
    int64_t N, C, H, W, K, R, S;
    int stride, pad;
} conv_shape;

/* The distinct convolutions of each network (torchvision's layouts). */
static const conv_shape shapes[] = {
    {"tutorial", 40, 1, 28, 28, 10, 5, 5, 1, 0},    {"tutorial", 40, 10, 12, 12, 20, 5, 5, 1, 0},
    {"resnet18", 64, 3, 32, 32, 64, 7, 7, 2, 3},    {"resnet18", 64, 64, 8, 8, 64, 3, 3, 1, 1},
    {"resnet18", 64, 64, 8, 8, 128, 3, 3, 2, 1},    {"resnet18", 64, 64, 8, 8, 128, 1, 1, 2, 0},
    {"resnet18", 64, 128, 4, 4, 128, 3, 3, 1, 1},   {"resnet18", 64, 128, 4, 4, 256, 3, 3, 2, 1},
    {"resnet18", 64, 256, 2, 2, 256, 3, 3, 1, 1},   {"resnet18", 64, 256, 2, 2, 512, 3, 3, 2, 1},
    {"resnet18", 64, 512, 1, 1, 512, 3, 3, 1, 1},   {"resnet50", 32, 3, 64, 64, 64, 7, 7, 2, 3},
    {"resnet50", 32, 64, 16, 16, 64, 1, 1, 1, 0},   {"resnet50", 32, 64, 16, 16, 64, 3, 3, 1, 1},
    {"resnet50", 32, 64, 16, 16, 256, 1, 1, 1, 0},  {"resnet50", 32, 256, 16, 16, 128, 1, 1, 1, 0},
    {"resnet50", 32, 128, 16, 16, 128, 3, 3, 2, 1}, {"resnet50", 32, 128, 8, 8, 512, 1, 1, 1, 0},
    {"resnet50", 32, 512, 8, 8, 256, 1, 1, 1, 0},   {"resnet50", 32, 256, 8, 8, 256, 3, 3, 2, 1},
    {"resnet50", 32, 256, 4, 4, 1024, 1, 1, 1, 0},  {"resnet50", 32, 1024, 4, 4, 512, 1, 1, 1, 0},
    {"resnet50", 32, 512, 4, 4, 512, 3, 3, 2, 1},   {"resnet50", 32, 512, 2, 2, 512, 3, 3, 1, 1},
    {"resnet50", 32, 512, 2, 2, 2048, 1, 1, 1, 0},  {"resnet50", 32, 1024, 4, 4, 2048, 1, 1, 2, 0},
};

static void bench_shape(const conv_shape *cs, tg_pool *pool)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape4(cs->N, cs->C, cs->H, cs->W));
    tg_tensor *w = tg_input(g, "w", TG_F32, tg_shape4(cs->K, cs->C, cs->R, cs->S));
    tg_conv2d_params p = {cs->stride, cs->stride, cs->pad, cs->pad, 1, 1, 1};
    tg_tensor *y = tg_conv2d(g, x, w, NULL, p);
    tg_node_params np = y ? y->p : (tg_node_params){0};
    tg_conv_set_extent_h(&np, cs->H), tg_conv_set_extent_w(&np, cs->W);
    tg_tensor *dx = tg_node_create(g, TG_OP_CONV2D_BWD_DATA, 2, (tg_tensor *[]){y, w}, &np);
    tg_conv_set_extent_h(&np, cs->R), tg_conv_set_extent_w(&np, cs->S);
    tg_tensor *dw = tg_node_create(g, TG_OP_CONV2D_BWD_WEIGHT, 2, (tg_tensor *[]){y, x}, &np);
    if (tg_graph_status(g) != TG_OK) {
        fprintf(stderr, "bench_dnnl_conv: %s\n", tg_graph_error(g));
        exit(1);
    }
    char shape[96];
    snprintf(shape, sizeof shape, "N%lld C%lld %lldx%lld K%lld %lldx%lld s%d p%d", (long long)cs->N,
             (long long)cs->C, (long long)cs->H, (long long)cs->W, (long long)cs->K,
             (long long)cs->R, (long long)cs->S, cs->stride, cs->pad);
    tg_tensor *nodes[3] = {y, dx, dw};
    for (int k = 0; k < 3; k++) {
        char own_k[96], dnnl_k[96], bf_k[96], bl_k[96];
        tg_tensor *t = nodes[k];
        double own = node_gflops(t, pool, TG_DNNL_NEVER, TG_F32, false, own_k, sizeof own_k);
        double dnnl = node_gflops(t, pool, TG_DNNL_ALWAYS, TG_F32, false, dnnl_k, sizeof dnnl_k);
        double bl = node_gflops(t, pool, TG_DNNL_ALWAYS, TG_F32, true, bl_k, sizeof bl_k);
        double bf = node_gflops(t, pool, TG_DNNL_ALWAYS, TG_BF16, false, bf_k, sizeof bf_k);
        /* what a compiled ResNet runs: the default choice, operands blocked */
        char auto_k[96], auto_bf_k[96];
        double au = node_gflops(t, pool, TG_DNNL_AUTO, TG_F32, true, auto_k, sizeof auto_k);
        double au_bf =
            node_gflops(t, pool, TG_DNNL_AUTO, TG_BF16, true, auto_bf_k, sizeof auto_bf_k);
        printf("{\"bench\":\"dnnl_conv\",\"net\":\"%s\",\"kind\":\"%s\",\"shape\":\"%s\","
               "\"threads\":%d,\"own_kernel\":\"%s\",\"own_gflops\":%.2f,\"dnnl_kernel\":\"%s\","
               "\"dnnl_gflops\":%.2f,\"ratio\":%.3f,\"blocked_kernel\":\"%s\","
               "\"blocked_gflops\":%.2f,\"blocked_ratio\":%.3f,\"bf16_kernel\":\"%s\","
               "\"bf16_gflops\":%.2f,\"auto\":\"%s\",\"auto_gflops\":%.2f,"
               "\"auto_bf16\":\"%s\",\"auto_bf16_gflops\":%.2f,\"isa\":\"%s\"}\n",
               cs->net, tg_op_name(t->op), shape, tg_pool_threads(pool), own_k, own, dnnl_k, dnnl,
               dnnl / own, bl_k, bl, bl / own, bf_k, bf, auto_k, au, auto_bf_k, au_bf,
               tg_dnnl_isa_name());
        fflush(stdout);
    }
    tg_graph_destroy(g);
}

int main(int argc, char **argv)
{
    if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        printf("usage: bench_dnnl_conv [seconds per case, default 0.2] [threads, default 1] "
               "[resnet18 | resnet50 | tutorial | all]\n"
               "One JSON line per convolution shape and kind: oneDNN against the own kernels, "
               "same run.\n");
        return 0;
    }
    if (argc > 1)
        min_seconds = atof(argv[1]);
    int threads = argc > 2 ? atoi(argv[2]) : 1;
    const char *net = argc > 3 ? argv[3] : "all";
    if (!(min_seconds > 0) || threads < 1 || threads > 256) {
        fprintf(stderr, "bench_dnnl_conv: seconds must be positive and threads 1..256 "
                        "(see --help)\n");
        return 2;
    }
    tg_pool *pool = tg_pool_create(threads);
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
        if (strcmp(net, "all") == 0 || strcmp(net, shapes[i].net) == 0)
            bench_shape(&shapes[i], pool);
    tg_pool_destroy(pool);
    return 0;
}
