/* tests/tg_conv_case.h - one convolution geometry as the conv tests
 * describe it (ops/test_conv.c for the project's kernels,
 * backend/cpu/test_conv_dnnl.c for oneDNN's), and the graph of that single
 * conv for tg_check_kernels. */
#ifndef TG_TESTS_CONV_CASE_H
#define TG_TESTS_CONV_CASE_H

#include "tilegraph/graph.h"

#include <stdbool.h>
#include <stdint.h>

static const tg_init U11 = {TG_INIT_UNIFORM, -1, 1};

typedef struct conv_case {
    int64_t N, C, H, W, K, R, S;
    tg_conv2d_params p;
    bool bias;
    bool x_param; /* differentiate x too (exercises CONV2D_BWD_DATA) */
} conv_case;

#define P(sh, sw, ph, pw, dh, dw, g) ((tg_conv2d_params){sh, sw, ph, pw, dh, dw, g})

/* x (an input, or a parameter with x_param), w and the optional bias
 * uniform in [-1, 1], into one conv2d: ctx is a conv_case. */
static inline tg_tensor *build_conv(tg_graph *g, void *ctx)
{
    const conv_case *c = ctx;
    tg_shape xs = tg_shape4(c->N, c->C, c->H, c->W);
    tg_tensor *x = c->x_param ? tg_param(g, "x", xs, U11) : tg_input(g, "x", TG_F32, xs);
    tg_tensor *w = tg_param(g, "w", tg_shape4(c->K, c->C / c->p.groups, c->R, c->S), U11);
    tg_tensor *b = c->bias ? tg_param(g, "b", tg_shape1(c->K), U11) : NULL;
    return tg_conv2d(g, x, w, b, c->p);
}

#endif
