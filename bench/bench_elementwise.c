/* bench/bench_elementwise.c - throughput of the elementwise fast kernels
 * (same-shape add, bias add, relu, softmax over rows, bias gradient sum_to,
 * 2-D transpose, 8-bit normalisation) on 1 and 2 threads, against a plain
 * single-threaded add loop measured in the same run; and the half-precision
 * storage conversions (f32 <-> f16 with F16C, f32 <-> bf16) against memcpy of
 * the same bytes. Prints one JSON line: GB/s moved per kernel and thread
 * count, and the 2-thread speed-up. */
#include "backend/backend.h"
#include "bench_util.h"
#include "core/pool.h"
#include "graph/node.h"
#include "ops/broadcast.h"
#include "ops/op.h"

#include "core/convert.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { ROWS = 2048, COLS = 512, N = ROWS * COLS };

/* Best of `reps` runs of the node's kernel, in seconds. */
static double time_node(const tg_tensor *t, void *const *in, float *out, tg_pool *pool, int reps)
{
    tg_kernel_args a = {.node = t, .out = out, .pool = pool};
    for (int k = 0; k < t->n_in; k++)
        a.in[k] = in[k];
    const tg_kernel_def *def = tg_backend_cpu.kernel(t->op);
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = bench_now();
        def->forward(&a);
        double dt = bench_now() - t0;
        best = dt < best ? dt : best;
    }
    return best;
}

__attribute__((noinline)) static void plain_add(const float *a, const float *b, float *o, int n)
{
    for (int i = 0; i < n; i++)
        o[i] = a[i] + b[i];
}

/* The storage conversions of half-precision training (runtime/staging.c)
 * beside memcpy of the bytes they read and write. */
static void print_conversions(const float *f, float *back)
{
    uint16_t *h = malloc(N * sizeof(uint16_t));
    struct {
        const char *name;
        tg_dtype from, to;
    } c[] = {{"f32_to_f16", TG_F32, TG_F16},
             {"f16_to_f32", TG_F16, TG_F32},
             {"f32_to_bf16", TG_F32, TG_BF16},
             {"bf16_to_f32", TG_BF16, TG_F32}};
    double copy = 1e30;
    for (int r = 0; r < 20; r++) {
        double t0 = bench_now();
        memcpy(back, f, (size_t)N * 6 / 4); /* 6 bytes per element, as a conversion moves */
        double dt = bench_now() - t0;
        copy = dt < copy ? dt : copy;
    }
    printf(",\"memcpy_6B_per_element_gbs\":%.2f", 6.0 * N / copy / 1e9);
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        const void *src = c[i].from == TG_F32 ? (const void *)f : (const void *)h;
        void *dst = c[i].to == TG_F32 ? (void *)back : (void *)h;
        if (c[i].from != TG_F32)
            tg_convert(f, TG_F32, h, c[i].from, N);
        double best = 1e30;
        for (int r = 0; r < 20; r++) {
            double t0 = bench_now();
            tg_convert(src, c[i].from, dst, c[i].to, N);
            double dt = bench_now() - t0;
            best = dt < best ? dt : best;
        }
        printf(",\"%s_gbs\":%.2f", c[i].name, 6.0 * N / best / 1e9);
    }
    free(h);
}

int main(int argc, char **argv)
{
    int usage =
        bench_usage(argc, argv, 0,
                    "usage: bench_elementwise\nThroughput (GB/s) of the elementwise fast kernels "
                    "on 1 and 2 threads against a plain add loop, and the f16/bf16 storage "
                    "conversions against memcpy, in the same run. One JSON line.\n");
    if (usage >= 0)
        return usage;
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape2(ROWS, COLS));
    tg_tensor *y = tg_input(g, "y", TG_F32, tg_shape2(ROWS, COLS));
    tg_tensor *bias = tg_input(g, "bias", TG_F32, tg_shape1(COLS));
    struct {
        const char *name;
        tg_tensor *node;
        double bytes;
    } k[] = {
        {"add", tg_add(g, x, y), 12.0 * N},
        {"bias_add", tg_add(g, x, bias), 8.0 * N},
        {"relu", tg_relu(g, x), 8.0 * N},
        {"softmax_rows", tg_softmax(g, x, -1), 8.0 * N},
        {"bias_grad_sum_to", NULL, 4.0 * N},
        {"transpose", tg_transpose(g, x, (int[]){1, 0}), 8.0 * N},
        {"normalize_u8", NULL, 5.0 * N},
    };
    /* CIFAR-like images: [N/3072, 3, 32, 32] bytes to floats */
    tg_tensor *img = tg_input(g, "img", TG_U8, tg_shape4(N / 3072, 3, 32, 32));
    k[6].node = tg_normalize_u8(g, img, (const float[]){0.49f, 0.48f, 0.45f},
                                (const float[]){0.25f, 0.24f, 0.26f});
    k[4].node = tg_sum_to(g, x, tg_shape1(COLS));
    if (tg_graph_status(g) != TG_OK) {
        fprintf(stderr, "bench_elementwise: %s\n", tg_graph_error(g));
        return 1;
    }
    float *a = malloc(N * sizeof(float)), *b = malloc(N * sizeof(float)),
          *o = malloc(N * sizeof(float));
    for (int i = 0; i < N; i++) {
        a[i] = (float)(i % 97) * 0.01f - 0.5f;
        b[i] = (float)(i % 89) * 0.02f + 0.1f;
    }
    /* a plain single-threaded loop for the same-shape add, as the baseline */
    double base = 1e30;
    for (int r = 0; r < 20; r++) {
        double t0 = bench_now();
        plain_add(a, b, o, N);
        double dt = bench_now() - t0;
        base = dt < base ? dt : base;
    }
    printf("{\"bench\":\"elementwise\",\"elements\":%d,\"plain_add_gbs\":%.2f", N,
           12.0 * N / base / 1e9);
    double t1[sizeof k / sizeof k[0]];
    for (int threads = 1; threads <= 2; threads++) {
        tg_pool *pool = tg_pool_create(threads);
        for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
            tg_tensor *t = k[i].node;
            void *in[2] = {a, b}; /* b is long enough for the bias and the bytes too */
            double s = time_node(t, in, o, pool, 20);
            if (threads == 1)
                t1[i] = s;
            printf(",\"%s_t%d_gbs\":%.2f", k[i].name, threads, k[i].bytes / s / 1e9);
            if (threads == 2)
                printf(",\"%s_speedup_2t\":%.2f", k[i].name, t1[i] / s);
        }
        tg_pool_destroy(pool);
    }
    print_conversions(a, o);
    printf("}\n");
    free(a);
    free(b);
    free(o);
    tg_graph_destroy(g);
    return 0;
}
