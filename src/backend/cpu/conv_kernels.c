/* backend/cpu/conv_kernels.c - the cpu backend's kernels for the three
 * convolution ops (ops/conv.c is what they are): the choice between the
 * own direct and im2col + sgemm kernels, the oneDNN plan hooks and layout,
 * and their kernel table entries (backend/cpu/kernels.c). */
#include "backend/backend.h"
#include "ops/conv.h"

#include "core/check.h"
#include "core/process.h"

void tg_conv_force_method(tg_conv_method m)
{
    tg_process_set_conv_method((int)m);
}

bool tg_conv_direct_supported(const tg_conv_geom *g)
{
    return g->G == 1 && g->sh == 1 && g->sw == 1;
}

/* The direct kernels compute a "wide" output as broad as the padded input,
 * so they waste (Wp - OW) / Wp of their work, and they want their working
 * set near L1: the forward streams C*R*S x 12 weights per block of output
 * channels, the weight gradient keeps VL partial sums per weight element.
 * Within those bounds they beat im2col + sgemm (bench/bench_kernels.c on an
 * AVX-512 machine: 1.1-2.9x on the tutorial layers and on a 64-channel 3x3
 * layer); beyond them (128 channels and up) OpenBLAS's blocking wins. */
tg_conv_method tg_conv_method_for(tg_op op, const tg_conv_geom *g)
{
    if (!tg_conv_direct_supported(g))
        return TG_CONV_GEMM;
    tg_conv_method forced = (tg_conv_method)tg_process_conv_method();
    if (forced != TG_CONV_AUTO)
        return forced;
    int64_t Wp = g->W + 2 * g->pw;
    if (g->OW * 2 < Wp) /* half the work thrown away: im2col wins */
        return TG_CONV_GEMM;
    if (g->R == 1 && g->S == 1 && g->ph == 0 && g->pw == 0)
        return TG_CONV_GEMM; /* pointwise: the image is the GEMM operand, no im2col */
    int64_t crs = g->C * g->R * g->S;
    switch (op) {
    case TG_OP_CONV2D:
        return crs <= 1024 ? TG_CONV_DIRECT : TG_CONV_GEMM;
    case TG_OP_CONV2D_BWD_DATA:
        return crs * g->K <= 65536 ? TG_CONV_DIRECT : TG_CONV_GEMM;
    case TG_OP_CONV2D_BWD_WEIGHT: /* VL partial sums per weight element: at most 4 MiB per thread */
        return crs * g->K <= 65536 ? TG_CONV_DIRECT : TG_CONV_GEMM;
    default:
        TG_UNREACHABLE_OP(op);
    }
}

static size_t scratch_conv(const tg_tensor *node, int n_threads)
{
    tg_conv_geom g = tg_conv_geom_of(node);
    return tg_conv_method_for(node->op, &g) == TG_CONV_DIRECT
               ? tg_conv_direct_scratch(node->op, &g, n_threads)
               : tg_conv_gemm_scratch(node->op, &g, n_threads);
}

static void fwd_conv(const tg_kernel_args *a)
{
    if (a->plan) {
        tg_conv_dnnl_run(a->plan, a);
        return;
    }
    tg_conv_geom g = tg_conv_geom_of(a->node);
    if (tg_conv_method_for(a->node->op, &g) == TG_CONV_DIRECT)
        tg_conv_direct_run(a->node->op, &g, a);
    else
        tg_conv_gemm_run(a->node->op, &g, a);
}

/* A convolution keeps its 4-D operands blocked only when oneDNN runs it
 * (ungrouped, or depthwise in an inference program, and the plan hook
 * would choose it): oneDNN reads each operand in the layout it is planned
 * with. Own kernels read NCHW. oneDNN's depthwise kernel (jit_dw) reads
 * nChw16c natively: planned plain, mobilenet_v3_large's depthwise
 * convolutions reordered their input in and their output out at every run
 * and kept the 1x1 convolutions around them plain too: its CPU time per
 * run at batch 1 on one thread was 5.96-6.09 ms, 5.20-5.51 blocked
 * (onnxruntime 4.44-4.64; under load, docs/performance.md). */
static tg_op_layout conv_layout(const tg_tensor *node, int n_threads, bool inference)
{
    tg_conv_geom g = tg_conv_geom_of(node);
    bool depthwise = g.G > 1 && g.G == g.C && g.K == g.G;
    return (g.G == 1 || (inference && depthwise)) && tg_conv_dnnl_chosen(node, n_threads, inference)
               ? TG_LAYOUT_OWN
               : TG_LAYOUT_PLAIN;
}

static const tg_op_planner tg_conv_planner = {tg_conv_dnnl_plan, tg_conv_dnnl_free};

const tg_kernel_def tg_cpu_kernel_CONV2D = {.scratch = scratch_conv,
                                            .forward = fwd_conv,
                                            .planner = &tg_conv_planner,
                                            .layout = conv_layout};
const tg_kernel_def tg_cpu_kernel_CONV2D_BWD_DATA = {.scratch = scratch_conv,
                                                     .forward = fwd_conv,
                                                     .planner = &tg_conv_planner,
                                                     .layout = conv_layout};
const tg_kernel_def tg_cpu_kernel_CONV2D_BWD_WEIGHT = {.scratch = scratch_conv,
                                                       .forward = fwd_conv,
                                                       .planner = &tg_conv_planner,
                                                       .layout = conv_layout};
