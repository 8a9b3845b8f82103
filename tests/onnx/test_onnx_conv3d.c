/* tests/onnx/test_onnx_conv3d.c - src/onnx/onnx_conv3d.c: ONNX Conv on
 * [N, C, D, H, W] (built from 2-D convolutions over the depth slices)
 * against a direct 3-D convolution written here in double, for strides,
 * dilation, asymmetric padding and groups; its gradient against finite
 * differences and its kernels against the reference; GlobalAveragePool,
 * MaxPool and AveragePool on 5-D (gradients and kernels; their values
 * against PyTorch in tests/python/test_conv3d.py and ONNX's cases); what
 * they refuse. (3-D convolution was refused: "3-D convolution and
 * pooling are not implemented".)
 *
 * TG_TEST_LABELS: onnx
 */
#include "onnx_node_model.h"

#include "runtime/interp.h"

#include <math.h>
#include <string.h>

static const int64_t s122[] = {1, 2, 2}, d211[] = {2, 1, 1}, pads[] = {1, 0, 1, 0, 1, 0};

/* y = conv3d(x, w) + bias, plain loops. */
static double direct(const double *x, const double *w, const double *bias, const int64_t *xd,
                     const int64_t *wd, int group, const int64_t *s, const int64_t *d,
                     const int64_t *p, const int64_t *at)
{
    int64_t n = at[0], o = at[1], cg = wd[1], og = wd[0] / group, c0 = (o / og) * cg;
    double acc = bias ? bias[o] : 0;
    for (int64_t c = 0; c < cg; c++)
        for (int64_t i = 0; i < wd[2]; i++)
            for (int64_t j = 0; j < wd[3]; j++)
                for (int64_t k = 0; k < wd[4]; k++) {
                    int64_t z = at[2] * s[0] + i * d[0] - p[0], h = at[3] * s[1] + j * d[1] - p[1],
                            v = at[4] * s[2] + k * d[2] - p[2];
                    if (z < 0 || z >= xd[2] || h < 0 || h >= xd[3] || v < 0 || v >= xd[4])
                        continue;
                    acc += x[(((n * xd[1] + c0 + c) * xd[2] + z) * xd[3] + h) * xd[4] + v] *
                           w[(((o * cg + c) * wd[2] + i) * wd[3] + j) * wd[4] + k];
                }
    return acc;
}

typedef double (*direct_fn)(const double *x, const double *w, const double *bias, const int64_t *xd,
                            const int64_t *wd, int group, const int64_t *s, const int64_t *d,
                            const int64_t *p, const int64_t *at);

/* The node built and run in double against fn (direct or
 * direct_transposed) at every output position; and its shape against
 * want_shape when given. */
static void check_direct(const onnx_node *nd, direct_fn fn, int group, const int64_t *s,
                         const int64_t *d, const int64_t *p, const int64_t *want_shape)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *y = onnx_node_build(g, (void *)nd);
    tg_interp *ip = NULL;
    TG_CHECK(y != NULL);
    TG_CHECK_OK(y ? tg_interp_create(g, 5, &ip) : TG_ERR_INVALID_ARG);
    TG_CHECK_OK(ip ? tg_interp_run(ip, 0) : TG_ERR_INVALID_ARG);
    if (ip) {
        tg_tensor *x = tg_graph_find(g, "x"), *w = tg_graph_find(g, "w"),
                  *bias = tg_graph_find(g, "b");
        TG_CHECK(x && w);
        tg_shape ys = tg_tensor_shape(y);
        for (int k = 0; want_shape && k < 5; k++)
            TG_CHECK(ys.ndim == 5 && ys.dim[k] == want_shape[k]);
        double worst = 0;
        int64_t at[5];
        for (int64_t e = 0; x && w && e < tg_shape_numel(ys); e++) {
            int64_t r = e;
            for (int k = 4; k >= 0; k--) {
                at[k] = r % ys.dim[k];
                r /= ys.dim[k];
            }
            double want = fn(tg_interp_data(ip, x), tg_interp_data(ip, w),
                             bias ? tg_interp_data(ip, bias) : NULL, nd->in[0].dim, nd->in[1].dim,
                             group, s, d, p, at);
            worst = fmax(worst, fabs(tg_interp_data(ip, y)[e] - want));
        }
        TG_CHECK(worst < 1e-12);
    }
    tg_interp_destroy(ip);
    tg_graph_destroy(g);
}

static void check_against_direct(const onnx_node *nd, int group, const int64_t *s, const int64_t *d,
                                 const int64_t *p)
{
    check_direct(nd, direct, group, s, d, p, NULL);
}

static void test_conv3d(void)
{
    onnx_node nd = {.op_type = "Conv",
                    .opset = 13,
                    .n_outputs = 1,
                    .in = {F32("x", 5, 2, 2, 5, 7, 6), F32("w", 5, 4, 1, 2, 3, 2), F32("b", 1, 4)},
                    .attr = {INTS_ATTR("strides", s122, 3), INTS_ATTR("dilations", d211, 3),
                             INTS_ATTR("pads", pads, 6), INT("group", 2)}};
    const int64_t p3[3] = {1, 0, 1};
    check_against_direct(&nd, 2, s122, d211, p3);
    onnx_node_check("Conv 3-D, strided, dilated, padded, 2 groups", &nd, 1e-5);
    onnx_node plain = {.op_type = "Conv",
                       .opset = 13,
                       .n_outputs = 1,
                       .in = {F32("x", 5, 1, 3, 3, 4, 4), F32("w", 5, 2, 3, 3, 3, 3)}};
    const int64_t ones[3] = {1, 1, 1}, none[3] = {0, 0, 0};
    check_against_direct(&plain, 1, ones, ones, none);
    static const int64_t s222[] = {2, 2, 2};
    onnx_node same = {.op_type = "Conv",
                      .opset = 13,
                      .n_outputs = 1,
                      .in = {F32("x", 5, 1, 2, 5, 7, 6), F32("w", 5, 2, 2, 3, 3, 3)},
                      .attr = {INTS_ATTR("strides", s222, 3), STR("auto_pad", "SAME_UPPER")}};
    /* pads (total 2, 2, 1) begin 1, 1, 0: the odd one at the end */
    check_against_direct(&same, 1, s222, ones, (const int64_t[]){1, 1, 0});
    onnx_node gap = {.op_type = "GlobalAveragePool",
                     .opset = 13,
                     .n_outputs = 1,
                     .in = {F32("x", 5, 2, 3, 2, 3, 4)}};
    onnx_node_check("GlobalAveragePool 5-D", &gap, 1e-6);
    static const int64_t k233[] = {2, 3, 3}, s122b[] = {1, 2, 2}, pd[] = {1, 1, 0, 0, 1, 1};
    onnx_node maxp = {.op_type = "MaxPool",
                      .opset = 13,
                      .n_outputs = 1,
                      .in = {F32("x", 5, 2, 2, 3, 5, 4)},
                      .attr = {INTS_ATTR("kernel_shape", k233, 3), INTS_ATTR("strides", s122b, 3),
                               INTS_ATTR("pads", pd, 6)}};
    onnx_node_check("MaxPool 3-D, strided, padded", &maxp, 1e-6);
    onnx_node avgp = maxp;
    avgp.op_type = "AveragePool";
    avgp.attr[3] = (onnx_node_attr)INT("count_include_pad", 1);
    onnx_node_check("AveragePool 3-D, strided, padded, counting the pads", &avgp, 1e-6);
}

/* y = conv_transpose3d(x, w) + bias at output position at, plain loops:
 * every (input position, tap) whose full-output position, less the begin
 * pads p, is at. w is [Cin, Cout/group, KD, KH, KW]. */
static double direct_transposed(const double *x, const double *w, const double *bias,
                                const int64_t *xd, const int64_t *wd, int group, const int64_t *s,
                                const int64_t *d, const int64_t *p, const int64_t *at)
{
    int64_t n = at[0], o = at[1], og = wd[1], cg = xd[1] / group, c0 = (o / og) * cg;
    double acc = bias ? bias[o] : 0;
    for (int64_t c = c0; c < c0 + cg; c++)
        for (int64_t i = 0; i < wd[2]; i++)
            for (int64_t j = 0; j < wd[3]; j++)
                for (int64_t k = 0; k < wd[4]; k++) {
                    int64_t z = at[2] + p[0] - i * d[0], h = at[3] + p[1] - j * d[1],
                            v = at[4] + p[2] - k * d[2];
                    if (z % s[0] || h % s[1] || v % s[2])
                        continue;
                    z /= s[0], h /= s[1], v /= s[2];
                    if (z < 0 || z >= xd[2] || h < 0 || h >= xd[3] || v < 0 || v >= xd[4])
                        continue;
                    acc += x[(((n * xd[1] + c) * xd[2] + z) * xd[3] + h) * xd[4] + v] *
                           w[(((c * og + o % og) * wd[2] + i) * wd[3] + j) * wd[4] + k];
                }
    return acc;
}

static void test_conv_transpose3d(void)
{
    static const int64_t s212[] = {2, 1, 2}, d112[] = {1, 1, 2}, p[] = {1, 0, 1, 0, 1, 2},
                         op[] = {1, 0, 1};
    onnx_node nd = {.op_type = "ConvTranspose",
                    .opset = 13,
                    .n_outputs = 1,
                    .in = {F32("x", 5, 2, 4, 3, 2, 3), F32("w", 5, 4, 3, 3, 2, 2), F32("b", 1, 6)},
                    .attr = {INTS_ATTR("strides", s212, 3), INTS_ATTR("dilations", d112, 3),
                             INTS_ATTR("pads", p, 6), INTS_ATTR("output_padding", op, 3),
                             INT("group", 2)}};
    /* (in - 1) * s - lo - hi + (k - 1) * d + 1 + op: 7, 2, 5 */
    check_direct(&nd, direct_transposed, 2, s212, d112, (const int64_t[]){1, 0, 1},
                 (const int64_t[]){2, 6, 7, 2, 5});
    onnx_node_check("ConvTranspose 3-D, strided, dilated, padded, 2 groups", &nd, 1e-5);
    static const int64_t s222[] = {2, 2, 2};
    onnx_node same = {.op_type = "ConvTranspose",
                      .opset = 13,
                      .n_outputs = 1,
                      .in = {F32("x", 5, 1, 2, 2, 3, 2), F32("w", 5, 2, 1, 3, 2, 3)},
                      .attr = {INTS_ATTR("strides", s222, 3), STR("auto_pad", "SAME_UPPER")}};
    /* outputs in * s = 4, 6, 4 of 5, 6, 5: one cropped at the start (UPPER) */
    check_direct(&same, direct_transposed, 1, s222, (const int64_t[]){1, 1, 1},
                 (const int64_t[]){0, 0, 0}, (const int64_t[]){1, 1, 4, 6, 4});
}

/* 3-D average pooling at `at` over the window of k (strides s, begin pads
 * lo) clipped to x, divided by the elements it covers: ONNX's AveragePool
 * without count_include_pad. */
static double direct_avg(const double *x, const int64_t *xd, const int64_t *k, const int64_t *s,
                         const int64_t *lo, const int64_t *at)
{
    double sum = 0;
    int count = 0;
    for (int64_t i = 0; i < k[0]; i++)
        for (int64_t j = 0; j < k[1]; j++)
            for (int64_t l = 0; l < k[2]; l++) {
                int64_t z = at[2] * s[0] + i - lo[0], h = at[3] * s[1] + j - lo[1],
                        v = at[4] * s[2] + l - lo[2];
                if (z < 0 || z >= xd[2] || h < 0 || h >= xd[3] || v < 0 || v >= xd[4])
                    continue;
                sum += x[((at[0] * xd[1] + at[1]) * xd[2] + z) * xd[3] * xd[4] + h * xd[4] + v];
                count++;
            }
    return sum / count;
}

static void test_pool3d_same_and_ceil(void)
{
    static const int64_t k323[] = {3, 2, 3}, s222[] = {2, 2, 2};
    onnx_node avg = {.op_type = "AveragePool",
                     .opset = 13,
                     .n_outputs = 1,
                     .in = {F32("x", 5, 1, 2, 5, 4, 6)},
                     .attr = {INTS_ATTR("kernel_shape", k323, 3), INTS_ATTR("strides", s222, 3),
                              STR("auto_pad", "SAME_LOWER")}};
    /* outputs ceil(in / 2) = 3, 2, 3; pads (total 2, 0, 1) begin 1, 0, 1 */
    tg_graph *g = tg_graph_create();
    tg_tensor *y = onnx_node_build(g, (void *)&avg);
    tg_interp *ip = NULL;
    TG_CHECK_OK(y ? tg_interp_create(g, 5, &ip) : TG_ERR_INVALID_ARG);
    TG_CHECK_OK(ip ? tg_interp_run(ip, 0) : TG_ERR_INVALID_ARG);
    if (ip) {
        tg_shape ys = tg_tensor_shape(y);
        TG_CHECK(ys.ndim == 5 && ys.dim[2] == 3 && ys.dim[3] == 2 && ys.dim[4] == 3);
        double worst = 0;
        int64_t at[5];
        for (int64_t e = 0; e < tg_shape_numel(ys); e++) {
            int64_t r = e;
            for (int k = 4; k >= 0; k--) {
                at[k] = r % ys.dim[k];
                r /= ys.dim[k];
            }
            double want = direct_avg(tg_interp_data(ip, tg_graph_find(g, "x")), avg.in[0].dim, k323,
                                     s222, (const int64_t[]){1, 0, 1}, at);
            worst = fmax(worst, fabs(tg_interp_data(ip, y)[e] - want));
        }
        TG_CHECK(worst < 1e-12);
    }
    tg_interp_destroy(ip);
    tg_graph_destroy(g);
    onnx_node_check("AveragePool 3-D, SAME_LOWER", &avg, 1e-5);
    static const int64_t pd[] = {1, 0, 1, 1, 0, 0};
    onnx_node ceil = {.op_type = "MaxPool",
                      .opset = 13,
                      .n_outputs = 1,
                      .in = {F32("x", 5, 2, 2, 6, 5, 6)},
                      .attr = {INTS_ATTR("kernel_shape", k323, 3), INTS_ATTR("strides", s222, 3),
                               INTS_ATTR("pads", pd, 6), INT("ceil_mode", 1)}};
    onnx_node_check("MaxPool 3-D, ceil_mode, padded", &ceil, 1e-6);
    onnx_node ceil_avg = ceil;
    ceil_avg.op_type = "AveragePool";
    onnx_node_check("AveragePool 3-D, ceil_mode, padded, not counting the pads", &ceil_avg, 1e-5);
}

static void test_refused(void)
{
    static const int64_t s2[] = {2, 2, 2}, op2[] = {0, 2, 0};
    onnx_node nd = {.op_type = "ConvTranspose",
                    .opset = 13,
                    .n_outputs = 1,
                    .in = {F32("x", 5, 1, 2, 3, 3, 3), F32("w", 5, 2, 2, 3, 3, 3)},
                    .attr = {INTS_ATTR("strides", s2, 3), INTS_ATTR("output_padding", op2, 3)}};
    const char *msg = onnx_node_refusal(&nd);
    if (!strstr(msg, "an output padding of 2 with stride 2"))
        tg_test_fail(__FILE__, __LINE__, "message: %s", msg);
    static const int64_t k3[] = {3, 3, 3};
    onnx_node pool = {.op_type = "MaxPool",
                      .opset = 13,
                      .n_outputs = 1,
                      .in = {F32("x", 5, 1, 2, 4, 4, 4)},
                      .attr = {INTS_ATTR("kernel_shape", k3, 3), STR("auto_pad", "SAME")}};
    msg = onnx_node_refusal(&pool);
    if (!strstr(msg, "auto_pad 'SAME' is unknown (NOTSET, VALID, SAME_UPPER, SAME_LOWER)"))
        tg_test_fail(__FILE__, __LINE__, "message: %s", msg);
    static const int64_t d2[] = {1, 2, 1};
    onnx_node avg = {.op_type = "AveragePool",
                     .opset = 19,
                     .n_outputs = 1,
                     .in = {F32("x", 5, 1, 2, 4, 4, 4)},
                     .attr = {INTS_ATTR("kernel_shape", k3, 3), INTS_ATTR("dilations", d2, 3)}};
    msg = onnx_node_refusal(&avg);
    if (!strstr(msg, "dilated average pooling is not supported"))
        tg_test_fail(__FILE__, __LINE__, "message: %s", msg);
}

int main(void)
{
    TG_RUN(test_conv3d);
    TG_RUN(test_conv_transpose3d);
    TG_RUN(test_pool3d_same_and_ceil);
    TG_RUN(test_refused);
    return tg_test_finish();
}
