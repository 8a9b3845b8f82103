/* ops/conv.h - 2-D convolution internals shared by conv.c (op definitions),
 * conv_gemm.c (im2col + sgemm kernels) and conv_direct.c (SIMD direct
 * kernels for stride-1 convolutions with few channels).
 *
 * Node params of CONV2D, CONV2D_BWD_DATA and CONV2D_BWD_WEIGHT: the named
 * accessors below (tg_conv_stride_h(node), tg_conv_set_stride_h(&p, v), ...).
 *
 * Method: every kernel picks, from the geometry alone (so the scratch size
 * and the kernel agree), either the direct SIMD kernels or im2col + sgemm.
 */
#ifndef TG_OPS_CONV_H
#define TG_OPS_CONV_H

#include "ops/op.h"

#include <stdbool.h>
#include <stddef.h>

/* The params of the three conv ops. extent_h, extent_w: BWD_DATA's are the
 * H, W of the input x (not derivable from dy when the stride is above 1);
 * BWD_WEIGHT's the KH, KW of the weight; CONV2D's 0. */
TG_PARAM_I(conv, stride_h, 0)
TG_PARAM_I(conv, stride_w, 1)
TG_PARAM_I(conv, pad_h, 2)
TG_PARAM_I(conv, pad_w, 3)
TG_PARAM_I(conv, dilation_h, 4)
TG_PARAM_I(conv, dilation_w, 5)
TG_PARAM_I(conv, groups, 6)
TG_PARAM_I(conv, extent_h, 8)
TG_PARAM_I(conv, extent_w, 9)

/* A builder's settings into a node's params. */
static inline void tg_conv_params_put(tg_node_params *p, const tg_conv2d_params *cp)
{
    tg_conv_set_stride_h(p, cp->stride_h);
    tg_conv_set_stride_w(p, cp->stride_w);
    tg_conv_set_pad_h(p, cp->pad_h);
    tg_conv_set_pad_w(p, cp->pad_w);
    tg_conv_set_dilation_h(p, cp->dilation_h);
    tg_conv_set_dilation_w(p, cp->dilation_w);
    tg_conv_set_groups(p, cp->groups);
}

typedef struct tg_conv_geom {
    int64_t N, C, H, W; /* input x [N, C, H, W] */
    int64_t K, R, S;    /* weight [K, C/G, R, S] */
    int64_t OH, OW;     /* output y [N, K, OH, OW] */
    int64_t sh, sw, ph, pw, dh, dw, G;
} tg_conv_geom;

/* Geometry of a conv node of any of the three kinds (shapes already inferred). */
tg_conv_geom tg_conv_geom_of(const tg_tensor *node);

typedef enum tg_conv_method {
    TG_CONV_AUTO = 0,
    TG_CONV_GEMM,
    TG_CONV_DIRECT,
} tg_conv_method;

/* The method `op` (one of the three conv ops) uses for this geometry. */
tg_conv_method tg_conv_method_for(tg_op op, const tg_conv_geom *g);
/* Whether the direct kernels can run this geometry at all. */
bool tg_conv_direct_supported(const tg_conv_geom *g);
/* For tests and benchmarks only: make every conv use `m` where it can
 * (TG_CONV_AUTO restores the heuristic). Process-wide (core/process.h): set
 * it before building scratch plans or running kernels, so both see one method. */
void tg_conv_force_method(tg_conv_method m);

/* Scratch bytes and kernels of each method. `which` is the op kind; the
 * kernel reads in[] / writes out as the op's tg_kernel_args say. */
size_t tg_conv_gemm_scratch(tg_op which, const tg_conv_geom *g, int n_threads);
void tg_conv_gemm_run(tg_op which, const tg_conv_geom *g, const tg_kernel_args *a);
size_t tg_conv_direct_scratch(tg_op which, const tg_conv_geom *g, int n_threads);
void tg_conv_direct_run(tg_op which, const tg_conv_geom *g, const tg_kernel_args *a);

/* The oneDNN path (conv_dnnl.c): the op table's plan hook for the three
 * ops, its state's destructor, and the kernel running a planned node. */
tg_status tg_conv_dnnl_plan(const tg_tensor *node, const tg_plan_opts *opts, tg_kernel_plan *plan);
void tg_conv_dnnl_free(void *state);
void tg_conv_dnnl_run(const void *state, const tg_kernel_args *a);
/* Whether the plan hook makes a oneDNN primitive for node with n_threads
 * threads in an inference program or not (TG_KERNELS, the own kernels'
 * rule, the thread rule), before trying: the compiler's layout pass keeps
 * a tensor blocked only between ops that will read it so. */
bool tg_conv_dnnl_chosen(const tg_tensor *node, int n_threads, bool inference);

/* Scratch is carved into 64-byte aligned pieces. */
static inline size_t tg_conv_align(size_t bytes)
{
    return (bytes + 63) & ~(size_t)63;
}

#endif
