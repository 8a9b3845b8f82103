/* tests/tg_matmul_case.h - one product as the matmul tests describe it
 * (ops/test_matmul.c for the project's kernels,
 * backend/cpu/test_matmul_dnnl.c for oneDNN's), and the graph of that
 * single matmul (or linear layer) for tg_check_kernels. */
#ifndef TG_TESTS_MATMUL_CASE_H
#define TG_TESTS_MATMUL_CASE_H

#include "tilegraph/graph.h"

#include <stdbool.h>
#include <stdint.h>

static const tg_init U11 = {TG_INIT_UNIFORM, -1, 1};

typedef struct mm_case {
    int64_t batch_a[2], batch_b[2]; /* up to 2 batch dims; 0 = none */
    int64_t M, N, K;
    bool ta, tb;
} mm_case;

static tg_shape operand(const int64_t *batch, int64_t r, int64_t c)
{
    tg_shape s = tg_shape_of(0, NULL);
    for (int i = 0; i < 2 && batch[i]; i++)
        s.dim[s.ndim++] = batch[i];
    s.dim[s.ndim++] = r;
    s.dim[s.ndim++] = c;
    return s;
}

/* ctx: an mm_case; both operands are parameters, so both gradients run. */
static tg_tensor *build_mm(tg_graph *g, void *ctx)
{
    const mm_case *c = ctx;
    tg_tensor *a =
        tg_param(g, "a", operand(c->batch_a, c->ta ? c->K : c->M, c->ta ? c->M : c->K), U11);
    tg_tensor *b =
        tg_param(g, "b", operand(c->batch_b, c->tb ? c->N : c->K, c->tb ? c->K : c->N), U11);
    return tg_matmul(g, a, b, c->ta, c->tb);
}

/* A linear layer: x [lead..., in] (x, w and the bias all parameters). */
typedef struct lin_case {
    int64_t lead[2]; /* leading dims of x before the feature dim */
    int64_t in, out;
    bool bias;
} lin_case;

static tg_tensor *build_linear(tg_graph *g, void *ctx)
{
    const lin_case *c = ctx;
    tg_shape xs = tg_shape_of(0, NULL);
    for (int i = 0; i < 2 && c->lead[i]; i++)
        xs.dim[xs.ndim++] = c->lead[i];
    xs.dim[xs.ndim++] = c->in;
    tg_tensor *x = tg_param(g, "x", xs, U11);
    tg_tensor *w = tg_param(g, "w", tg_shape2(c->out, c->in), U11);
    tg_tensor *b = c->bias ? tg_param(g, "b", tg_shape1(c->out), U11) : NULL;
    return tg_linear(g, x, w, b);
}

#endif
