/* bench/bench_elementwise.c - throughput of the elementwise fast kernels
 * (same-shape add, bias add, relu, softmax over rows, bias gradient sum_to,
 * 2-D transpose) on 1 and 2 threads, against a plain single-threaded add
 * loop measured in the same run. Prints one JSON line: GB/s moved per kernel and thread count,
 * and the 2-thread speed-up. */
#include "core/pool.h"
#include "graph/node.h"
#include "ops/broadcast.h"
#include "ops/op.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

enum { ROWS = 2048, COLS = 512, N = ROWS * COLS };

/* Best of `reps` runs of the node's kernel, in seconds. */
static double time_node(const tg_tensor *t, void *const *in, float *out, tg_pool *pool, int reps)
{
    tg_kernel_args a = {.node = t, .out = out, .pool = pool};
    for (int k = 0; k < t->n_in; k++)
        a.in[k] = in[k];
    const tg_op_def *def = tg_op_get(t->op);
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        def->forward(&a);
        double dt = now() - t0;
        best = dt < best ? dt : best;
    }
    return best;
}

__attribute__((noinline)) static void plain_add(const float *a, const float *b, float *o, int n)
{
    for (int i = 0; i < n; i++)
        o[i] = a[i] + b[i];
}

int main(void)
{
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
    };
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
        double t0 = now();
        plain_add(a, b, o, N);
        double dt = now() - t0;
        base = dt < base ? dt : base;
    }
    printf("{\"bench\":\"elementwise\",\"elements\":%d,\"plain_add_gbs\":%.2f", N, 12.0 * N / base / 1e9);
    double t1[6];
    for (int threads = 1; threads <= 2; threads++) {
        tg_pool *pool = tg_pool_create(threads);
        for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
            tg_tensor *t = k[i].node;
            void *in[2] = {a, b}; /* b is long enough for the bias too */
            double s = time_node(t, in, o, pool, 20);
            if (threads == 1)
                t1[i] = s;
            printf(",\"%s_t%d_gbs\":%.2f", k[i].name, threads, k[i].bytes / s / 1e9);
            if (threads == 2)
                printf(",\"%s_speedup_2t\":%.2f", k[i].name, t1[i] / s);
        }
        tg_pool_destroy(pool);
    }
    printf("}\n");
    free(a);
    free(b);
    free(o);
    tg_graph_destroy(g);
    return 0;
}
