/* onnx/onnx_ops_norm.c - ONNX pooling and normalisation ops (MaxPool,
 * AveragePool, GlobalAveragePool, BatchNormalization, LayerNormalization,
 * InstanceNormalization (also PyTorch's GroupNorm export),
 * GroupNormalization, LRN, Dropout) mapped onto the graph builder.
 */
#include "onnx/onnx_build.h"

#include "core/alloc.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- pooling ------------------------------------------------------------- */

/* kernel_shape, strides, pads (per side), dilations, ceil_mode and auto_pad
 * into the builder's pooling parameters; x2 is the input as 2-D. */
static tg_status pool_params(onnx_builder *b, tg_tensor *x2, int nsp, tg_pool2d_params *p)
{
    int n;
    const int64_t *ks = ob_attr_ints(b, "kernel_shape", &n);
    if (!ks || n != nsp)
        return ob_fail(b, TG_ERR_INVALID_ARG, "kernel_shape must have %d value%s (%d-D pooling)",
                       nsp, nsp > 1 ? "s" : "", nsp);
    int64_t kernel[2] = {1, 1};
    TG_TRY(ob_spatial_ints(b, "kernel_shape", nsp, kernel));
    ob_window w;
    TG_TRY(ob_read_window(b, tg_tensor_shape(x2), nsp, kernel, &w));
    tg_pool2d_params q = {(int)w.k[0],  (int)w.k[1],  (int)w.s[0],  (int)w.s[1],
                          (int)w.lo[0], (int)w.lo[1], (int)w.hi[0], (int)w.hi[1],
                          (int)w.d[0],  (int)w.d[1],  false,        false};
    q.ceil_mode = ob_attr_int(b, "ceil_mode", 0) != 0;
    *p = q;
    return TG_OK;
}

/* The builder refuses pads over half the window; ONNX allows them but
 * PyTorch never exports them: refuse as unsupported, naming the values. */
static tg_status check_pool_pads(onnx_builder *b, const tg_pool2d_params *p)
{
    int kh = (p->kernel_h - 1) * p->dilation_h + 1, kw = (p->kernel_w - 1) * p->dilation_w + 1;
    if (2 * p->pad_top > kh || 2 * p->pad_bottom > kh || 2 * p->pad_left > kw ||
        2 * p->pad_right > kw)
        return ob_fail(b, TG_ERR_UNSUPPORTED,
                       "pads [%d, %d, %d, %d] with a %dx%d window (at "
                       "most half the window, as PyTorch allows)",
                       p->pad_top, p->pad_left, p->pad_bottom, p->pad_right, kh, kw);
    return TG_OK;
}

/* MaxPool's and AveragePool's input x of 1 or 2 spatial dims (nsp) as the
 * 2-D x2 the builders take, and their params p, pads checked. */
static tg_status pool_2d_of(onnx_builder *b, tg_tensor *x, tg_tensor **x2, int *nsp,
                            tg_pool2d_params *p)
{
    TG_TRY(ob_spatial_dims(b, x, nsp));
    *x2 = ob_as_2d(b, x);
    TG_TRY(pool_params(b, *x2, *nsp, p));
    return check_pool_pads(b, p);
}

/* A constant [1, 1, OD, OH, OW] of the flat index within its volume
 * ((d * H + h) * W + w) of window element at at each output position. */
static tg_tensor *window_positions(onnx_builder *b, tg_shape x, tg_shape y, const int64_t *s,
                                   const int64_t *d, const int64_t *lo, const int64_t *at)
{
    int64_t od = y.dim[2], oh = y.dim[3], ow = y.dim[4];
    float *v = tg_malloc((size_t)(od * oh * ow) * sizeof *v);
    if (!v) {
        ob_fail(b, TG_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (int64_t z = 0; z < od; z++)
        for (int64_t r = 0; r < oh; r++)
            for (int64_t c = 0; c < ow; c++)
                v[(z * oh + r) * ow + c] = (float)(((z * s[0] + at[0] * d[0] - lo[0]) * x.dim[3] +
                                                    r * s[1] + at[1] * d[1] - lo[1]) *
                                                       x.dim[4] +
                                                   c * s[2] + at[2] * d[2] - lo[2]);
    tg_tensor *t = tg_constant_data(b->g, "window positions",
                                    tg_shape_of(5, (int64_t[]){1, 1, od, oh, ow}), v);
    tg_free(v);
    return t;
}

/* MaxPool's Indices output (PyTorch's return_indices, which SegNet's
 * unpooling scatters back) for x [N, C, D, H, W] pooled into y by a
 * window of k (strides s, dilations d, begin pads lo): the flat index into
 * x (row-major) of the first element of each window, in scan order, equal
 * to the window's maximum y, as PyTorch picks it. Built from strided
 * slices of x (padded with -inf), one per window element, compared with y:
 * the indices are exact in f32 while x has at most 2^24 elements, and carry
 * no gradient. 2-D pooling passes a depth of 1. */
tg_tensor *ob_maxpool_indices(onnx_builder *b, tg_tensor *x, tg_tensor *y, const int64_t *k,
                              const int64_t *s, const int64_t *d, const int64_t *lo)
{
    tg_graph *g = b->g;
    tg_shape xs = tg_tensor_shape(x), ys = tg_tensor_shape(y);
    if (tg_shape_numel(xs) > ((int64_t)1 << 24)) {
        ob_fail(b, TG_ERR_UNSUPPORTED,
                "the Indices of an input of %lld elements (exact to 2^24: "
                "export with a smaller batch or input)",
                (long long)tg_shape_numel(xs));
        return NULL;
    }
    /* pad so that every window, ceil_mode's last ones too, lies inside */
    int64_t pads[10] = {0};
    for (int i = 0; i < 3; i++) {
        int64_t need = (ys.dim[2 + i] - 1) * s[i] + (k[i] - 1) * d[i] + 1;
        int64_t end = need - xs.dim[2 + i] - lo[i];
        pads[2 + i] = lo[i];
        pads[7 + i] = end > 0 ? end : 0;
    }
    tg_tensor *xp = tg_pad(g, x, pads, TG_PAD_CONSTANT, -INFINITY);
    float vol = (float)(xs.dim[2] * xs.dim[3] * xs.dim[4]);
    float *base = tg_malloc((size_t)(xs.dim[0] * xs.dim[1]) * sizeof *base);
    if (!base) {
        ob_fail(b, TG_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (int64_t q = 0; q < xs.dim[0] * xs.dim[1]; q++)
        base[q] = (float)q * vol;
    tg_tensor *planes = tg_constant_data(
        g, "plane offsets", tg_shape_of(5, (int64_t[]){xs.dim[0], xs.dim[1], 1, 1, 1}), base);
    tg_free(base);
    tg_tensor *idx = NULL;
    /* backwards, so that the first window element equal to the maximum is
     * the last one written */
    int64_t at[3];
    for (at[0] = k[0] - 1; at[0] >= 0; at[0]--)
        for (at[1] = k[1] - 1; at[1] >= 0; at[1]--)
            for (at[2] = k[2] - 1; at[2] >= 0; at[2]--) {
                tg_tensor *pos = window_positions(b, xs, ys, s, d, lo, at), *v = xp;
                if (!pos)
                    return NULL;
                for (int i = 0; i < 3; i++)
                    v = tg_slice_ex(g, v, 2 + i, at[i] * d[i],
                                    at[i] * d[i] + (ys.dim[2 + i] - 1) * s[i] + 1, s[i]);
                pos = tg_add(g, planes, pos); /* [N, C, OD, OH, OW] */
                idx = idx ? tg_where(g, tg_equal(g, v, y), pos, idx) : pos;
            }
    return tg_cast(g, idx, TG_I32);
}

/* 2-D (and 1-D) MaxPool's Indices: ob_maxpool_indices over a depth of 1. */
static tg_tensor *maxpool_indices(onnx_builder *b, tg_tensor *x, tg_tensor *y, tg_pool2d_params p)
{
    tg_shape xs = tg_tensor_shape(x), ys = tg_tensor_shape(y);
    tg_tensor *x5 = tg_reshape(
        b->g, x, tg_shape_of(5, (int64_t[]){xs.dim[0], xs.dim[1], 1, xs.dim[2], xs.dim[3]}));
    tg_tensor *y5 = tg_reshape(
        b->g, y, tg_shape_of(5, (int64_t[]){ys.dim[0], ys.dim[1], 1, ys.dim[2], ys.dim[3]}));
    tg_tensor *idx = ob_maxpool_indices(b, x5, y5, (const int64_t[]){1, p.kernel_h, p.kernel_w},
                                        (const int64_t[]){1, p.stride_h, p.stride_w},
                                        (const int64_t[]){1, p.dilation_h, p.dilation_w},
                                        (const int64_t[]){0, p.pad_top, p.pad_left});
    return idx ? tg_reshape(b->g, idx, ys) : NULL;
}

static tg_status map_maxpool(onnx_builder *b)
{
    tg_tensor *x = ob_tensor(b, 0);
    if (x && tg_tensor_shape(x).ndim == 5)
        return ob_pool3d(b, true);
    int nsp = 0;
    tg_tensor *x2 = NULL;
    tg_pool2d_params p;
    TG_TRY(pool_2d_of(b, x, &x2, &nsp, &p));
    if (ob_attr_int(b, "storage_order", 0))
        return ob_fail(b, TG_ERR_UNSUPPORTED, "storage_order=1 is not supported");
    tg_tensor *y = tg_maxpool2d_ex(b->g, x2, p);
    if (b->node->n_output > 1 && b->node->output[1][0]) {
        tg_tensor *idx = y ? maxpool_indices(b, x2, y, p) : NULL;
        TG_TRY(ob_set(b, 1, idx ? ob_from_2d(b, idx, nsp) : NULL));
    }
    return ob_set(b, 0, ob_from_2d(b, y, nsp));
}

static tg_status map_avgpool(onnx_builder *b)
{
    tg_tensor *x = ob_tensor(b, 0);
    if (x && tg_tensor_shape(x).ndim == 5)
        return ob_pool3d(b, false);
    int nsp = 0;
    tg_tensor *x2 = NULL;
    tg_pool2d_params p;
    TG_TRY(pool_2d_of(b, x, &x2, &nsp, &p));
    if (p.dilation_h != 1 || p.dilation_w != 1)
        return ob_fail(b, TG_ERR_UNSUPPORTED,
                       "dilated average pooling is not supported (dilations must be "
                       "1, as PyTorch's average pools have)");
    p.count_include_pad = ob_attr_int(b, "count_include_pad", 0) != 0;
    return ob_set(b, 0, ob_from_2d(b, tg_avgpool2d_ex(b->g, x2, p), nsp));
}

static tg_status map_global_avgpool(onnx_builder *b)
{
    tg_tensor *x = ob_tensor(b, 0);
    if (x && tg_tensor_shape(x).ndim == 5)
        return ob_global_avgpool3d(b);
    int nsp = 0;
    TG_TRY(ob_spatial_dims(b, x, &nsp));
    return ob_set(b, 0, ob_from_2d(b, tg_global_avgpool(b->g, ob_as_2d(b, x)), nsp));
}

/* ---- normalisation ------------------------------------------------------- */

/* "bn1.running_mean" -> "bn1.running_stats": the [2, C] state tg_batch_norm
 * keeps, named after the module. */
static void stats_name(const char *mean_name, char *buf, size_t cap)
{
    const char *suffix = "running_mean";
    size_t n = strlen(mean_name), s = strlen(suffix);
    if (n >= s && !strcmp(mean_name + n - s, suffix))
        snprintf(buf, cap, "%.*srunning_stats", (int)(n - s), mean_name);
    else
        snprintf(buf, cap, "%s.running_stats", mean_name);
}

/* BatchNormalization's older forms: is_test (before 7) says the mode, which
 * the graph's decides here as training_mode does from 14; spatial=1 (before
 * 9, the default) is the only form; spatial=0 (statistics per activation,
 * not per channel) is not implemented. */
static tg_status batch_norm_old_forms(onnx_builder *b)
{
    TG_TRY(ob_attr_in_opsets(b, "is_test", 1, 7));
    TG_TRY(ob_attr_in_opsets(b, "spatial", 1, 9));
    TG_TRY(ob_attr_in_opsets(b, "training_mode", 14, 1 << 30));
    if (ob_attr_int(b, "spatial", 1) != 1)
        return ob_fail(b, TG_ERR_UNSUPPORTED,
                       "spatial=0 (opset %d: statistics per activation rather than per channel) "
                       "is not implemented",
                       ob_opset(b));
    return TG_OK;
}

static tg_status map_batch_norm(onnx_builder *b)
{
    TG_TRY(batch_norm_old_forms(b));
    tg_tensor *x = ob_tensor(b, 0);
    tg_tensor *gamma = x ? ob_tensor(b, 1) : NULL, *beta = gamma ? ob_tensor(b, 2) : NULL;
    if (!beta)
        return TG_ERR_UNSUPPORTED;
    if (!ob_is_const(b, 3) || !ob_is_const(b, 4))
        return ob_fail(b, TG_ERR_UNSUPPORTED,
                       "the running mean and variance must be "
                       "initializers (they become the batch norm's state)");
    const tg_onnx_data *mean = ob_const(b, 3), *var = mean ? ob_const(b, 4) : NULL;
    if (!var)
        return TG_ERR_UNSUPPORTED;
    int64_t c = tg_tensor_shape(x).ndim > 1 ? tg_tensor_shape(x).dim[1] : 0;
    if (!mean->f || !var->f || mean->n != c || var->n != c)
        return ob_fail(b, TG_ERR_SHAPE, "mean and variance must be %lld floats each", (long long)c);
    /* ONNX's momentum weighs the old statistics, tg_batch_norm_ex's (as
     * PyTorch's) the new ones: PyTorch's momentum m exports as 1 - m */
    float momentum = ob_attr_float(b, "momentum", 0.9f);
    if (!(momentum >= 0 && momentum <= 1))
        return ob_fail(b, TG_ERR_INVALID_ARG, "momentum %g is outside [0, 1]", (double)momentum);
    float *stats = tg_malloc((size_t)(2 * c) * sizeof(float));
    if (!stats)
        return ob_fail(b, TG_ERR_NOMEM, "out of memory");
    memcpy(stats, mean->f, (size_t)c * sizeof(float));
    memcpy(stats + c, var->f, (size_t)c * sizeof(float));
    char name[512];
    stats_name(b->node->input[3], name, sizeof name);
    tg_tensor *running = ob_param(b, name, tg_shape2(2, c), stats, true);
    tg_free(stats);
    return ob_set(b, 0,
                  tg_batch_norm_ex(b->g, x, gamma, beta, running,
                                   ob_attr_float(b, "epsilon", 1e-5f),
                                   (float)(1.0 - (double)momentum)));
}

/* LayerNormalization's optional outputs, when asked for: Mean and
 * InvStdDev = 1 / sqrt(Var + epsilon) over the normalised dims (kept as
 * ones), from reductions of their own. tg_layer_norm keeps its statistics
 * inside; these agree with them to float32's rounding. */
static tg_status layer_norm_stats(onnx_builder *b, tg_tensor *x, int axis, float eps)
{
    if (!ob_output_used(b, 1) && !ob_output_used(b, 2))
        return TG_OK;
    tg_graph *g = b->g;
    int nd = tg_tensor_shape(x).ndim;
    unsigned mask = ((1u << nd) - 1) & ~((1u << axis) - 1);
    tg_tensor *mean = tg_reduce_mean(g, x, mask, true);
    tg_tensor *d = tg_sub(g, x, mean);
    tg_tensor *var = tg_reduce_mean(g, tg_mul(g, d, d), mask, true);
    tg_tensor *inv = tg_reciprocal(g, tg_sqrt(g, tg_scale(g, var, 1.0f, eps)));
    if (ob_output_used(b, 1))
        TG_TRY(ob_set(b, 1, mean));
    return ob_output_used(b, 2) ? ob_set(b, 2, inv) : TG_OK;
}

static tg_status map_layer_norm(onnx_builder *b)
{
    tg_tensor *x = ob_tensor(b, 0);
    tg_tensor *gamma = x ? ob_tensor(b, 1) : NULL;
    tg_tensor *beta = gamma && ob_has_input(b, 2) ? ob_tensor(b, 2) : NULL;
    if (!gamma || (ob_has_input(b, 2) && !beta))
        return TG_ERR_UNSUPPORTED;
    int axis = 0, nd = tg_tensor_shape(x).ndim;
    TG_TRY(ob_axis(b, ob_attr_int(b, "axis", -1), nd, &axis));
    if (ob_attr_int(b, "stash_type", 1) != 1)
        return ob_fail(b, TG_ERR_UNSUPPORTED, "stash_type other than float");
    float eps = ob_attr_float(b, "epsilon", 1e-5f);
    TG_TRY(ob_set(b, 0, tg_layer_norm(b->g, x, nd - axis, gamma, beta, eps)));
    return layer_norm_stats(b, x, axis, eps);
}

/* Dropout: ratio an attribute before opset 12, an input after; is_test
 * (before 7) names the mode, which the graph's decides. */
static tg_status map_dropout(onnx_builder *b)
{
    TG_TRY(ob_attr_in_opsets(b, "is_test", 1, 7));
    TG_TRY(ob_attr_in_opsets(b, "ratio", 1, 12));
    tg_tensor *x = ob_tensor(b, 0);
    if (!x)
        return TG_ERR_UNSUPPORTED;
    float ratio = ob_attr_float(b, "ratio", 0.5f);
    if (ob_has_input(b, 1)) {
        const tg_onnx_data *r = ob_const(b, 1);
        if (!r || r->n != 1)
            return r ? ob_fail(b, TG_ERR_FORMAT, "ratio must be one value") : TG_ERR_UNSUPPORTED;
        ratio = r->f ? r->f[0] : (float)r->i[0];
    }
    /* the graph's mode decides (tg_graph_set_training), not the file's
     * training_mode input: the same export trains and infers */
    if (ratio < 0.0f || ratio >= 1.0f)
        return ob_fail(b, TG_ERR_INVALID_ARG, "ratio %g is outside [0, 1)", (double)ratio);
    TG_TRY(ob_set(b, 0, tg_dropout(b->g, x, ratio)));
    if (!ob_output_used(b, 1))
        return TG_OK;
    /* the mask: every element kept in inference; in training tg_dropout
     * keeps its mask inside (y != 0 would miss the kept zeros of x) */
    if (tg_graph_training(b->g))
        return ob_fail(b, TG_ERR_UNSUPPORTED,
                       "the mask output is read, in training (the mask stays inside the "
                       "dropout op)");
    tg_tensor *one = tg_constant(b->g, tg_tensor_shape(x), 1.0f);
    return ob_set(b, 1, tg_cast(b->g, one, TG_I32));
}

/* ---- InstanceNormalization, GroupNormalization, LRN
 * ----------------------------------------------------- */

/* Whether input i is a constant whose every element is v (the exporter's
 * ones and zeros around GroupNorm's InstanceNormalization). */
static bool constant_all(onnx_builder *b, int i, double v)
{
    if (!ob_is_foldable(b, i))
        return false;
    const tg_onnx_data *d = ob_const(b, i);
    for (int64_t k = 0; d && k < d->n; k++)
        if (ob_get(d, k) != v)
            return false;
    return d != NULL;
}

/* Per sample and channel over the spatial axes: group norm with one group
 * per channel. PyTorch exports GroupNorm as this over [N, G, -1] with
 * constant ones and zeros (left out here), then its own affine. */
static tg_status map_instance_norm(onnx_builder *b)
{
    tg_tensor *x = ob_tensor(b, 0);
    if (!x)
        return TG_ERR_UNSUPPORTED;
    tg_shape s = tg_tensor_shape(x);
    if (s.ndim < 3)
        return ob_fail(b, TG_ERR_SHAPE, "the input has %d dims ([N, C, D1, ...] is taken)", s.ndim);
    tg_tensor *gamma = NULL, *beta = NULL;
    if (!constant_all(b, 1, 1.0) && !(gamma = ob_tensor(b, 1)))
        return TG_ERR_UNSUPPORTED;
    if (!constant_all(b, 2, 0.0) && !(beta = ob_tensor(b, 2)))
        return TG_ERR_UNSUPPORTED;
    for (int k = 0; k < 2; k++) {
        tg_tensor *t = k ? beta : gamma;
        if (t && (tg_tensor_shape(t).ndim != 1 || tg_tensor_shape(t).dim[0] != s.dim[1]))
            return ob_fail(b, TG_ERR_SHAPE, "%s must be [%lld]", k ? "B" : "scale",
                           (long long)s.dim[1]);
    }
    float eps = ob_attr_float(b, "epsilon", 1e-5f);
    return ob_set(b, 0, tg_group_norm(b->g, x, (int)s.dim[1], gamma, beta, eps));
}

/* GroupNormalization (opset 18, 21): tg_group_norm. Opset 18's scale and
 * bias are per group ([num_groups]: each repeated over its C / G
 * channels), 21's per channel ([C]); statistics in float32 (stash_type 1,
 * the only one: the devices have no f64). */
static tg_status map_group_norm(onnx_builder *b)
{
    tg_tensor *x = ob_tensor(b, 0);
    tg_tensor *gamma = x ? ob_tensor(b, 1) : NULL, *beta = gamma ? ob_tensor(b, 2) : NULL;
    if (!beta)
        return TG_ERR_UNSUPPORTED;
    TG_TRY(ob_attr_in_opsets(b, "stash_type", 21, 1 << 30));
    tg_shape s = tg_tensor_shape(x);
    int64_t groups = ob_attr_int(b, "num_groups", 0), stash = ob_attr_int(b, "stash_type", 1);
    if (stash != 1)
        return ob_fail(b, TG_ERR_UNSUPPORTED, "stash_type %lld (1, float32 statistics, is taken)",
                       (long long)stash);
    if (s.ndim < 3)
        return ob_fail(b, TG_ERR_SHAPE, "the input has %d dims ([N, C, D1, ...] is taken)", s.ndim);
    int64_t c = s.dim[1];
    if (groups < 1 || c % groups)
        return ob_fail(b, TG_ERR_INVALID_ARG, "num_groups %lld does not divide %lld channels",
                       (long long)groups, (long long)c);
    int64_t per = ob_opset(b) < 21 ? groups : c; /* the affine's length */
    tg_graph *g = b->g;
    for (int k = 0; k < 2; k++) {
        tg_tensor **t = k ? &beta : &gamma;
        tg_shape ts = tg_tensor_shape(*t);
        if (ts.ndim != 1 || ts.dim[0] != per)
            return ob_fail(b, TG_ERR_SHAPE, "%s must be [%lld] at opset %d", k ? "bias" : "scale",
                           (long long)per, ob_opset(b));
        if (per != c) /* [G] -> [G, C/G] -> [C] */
            *t = tg_reshape(g,
                            tg_expand(g, tg_reshape(g, *t, tg_shape2(groups, 1)),
                                      tg_shape2(groups, c / groups)),
                            tg_shape1(c));
    }
    float eps = ob_attr_float(b, "epsilon", 1e-5f);
    return ob_set(b, 0, tg_group_norm(g, x, (int)groups, gamma, beta, eps));
}

/* LRN: x / (bias + alpha / size * sum of x^2 over `size` channels about
 * each)^beta, the window floor((size-1)/2) channels before and
 * ceil((size-1)/2) after. The sum is an average pool of x^2 laid out as
 * [N, 1, C, rest] with a (size, 1) window, zeros padded and counted, times
 * size; so y = x * (bias + alpha * mean)^-beta, from ops with gradients. */
static tg_status map_lrn(onnx_builder *b)
{
    tg_tensor *x = ob_tensor(b, 0);
    if (!x)
        return TG_ERR_UNSUPPORTED;
    tg_shape s = tg_tensor_shape(x);
    int64_t size = ob_attr_int(b, "size", 0);
    if (s.ndim < 3)
        return ob_fail(b, TG_ERR_SHAPE, "the input has %d dims ([N, C, D1, ...] is taken)", s.ndim);
    if (size < 1 || size > 2 * s.dim[1] + 1 || size > 1 << 20)
        return ob_fail(b, TG_ERR_INVALID_ARG, "size %lld (give an odd or even window of 1 to %lld)",
                       (long long)size, (long long)(2 * s.dim[1] + 1));
    float alpha = ob_attr_float(b, "alpha", 1e-4f), beta = ob_attr_float(b, "beta", 0.75f);
    float bias = ob_attr_float(b, "bias", 1.0f);
    int64_t rest = tg_shape_numel(s) / (s.dim[0] * s.dim[1]);
    tg_graph *g = b->g;
    tg_tensor *sq = tg_reshape(g, tg_mul(g, x, x), tg_shape4(s.dim[0], 1, s.dim[1], rest));
    int lo = (int)((size - 1) / 2), hi = (int)(size - 1 - lo);
    tg_pool2d_params p = {(int)size, 1, 1, 1, lo, 0, hi, 0, 1, 1, false, true};
    tg_tensor *mean = tg_reshape(g, tg_avgpool2d_ex(g, sq, p), s);
    float one = -beta;
    tg_tensor *e = tg_constant_data(g, "lrn_exponent", tg_shape1(1), &one);
    tg_tensor *d = tg_pow(g, tg_scale(g, mean, alpha, bias), e);
    return ob_set(b, 0, tg_mul(g, x, d));
}

const ob_op tg_onnx_norm_ops[] = {
    {"MaxPool", map_maxpool, OB_WINDOW_ATTRS ",ceil_mode,dilations,storage_order"},
    {"AveragePool", map_avgpool, OB_WINDOW_ATTRS ",ceil_mode,count_include_pad,dilations"},
    {"GlobalAveragePool", map_global_avgpool, ""},
    {"BatchNormalization", map_batch_norm, "epsilon,is_test,momentum,spatial,training_mode"},
    {"LayerNormalization", map_layer_norm, "axis,epsilon,stash_type"},
    {"Dropout", map_dropout, "is_test,ratio,seed"},
    {"GroupNormalization", map_group_norm, "epsilon,num_groups,stash_type"},
    {"InstanceNormalization", map_instance_norm, "epsilon"},
    {"LRN", map_lrn, "alpha,beta,bias,size"},
};
const int tg_onnx_norm_op_count = (int)(sizeof tg_onnx_norm_ops / sizeof tg_onnx_norm_ops[0]);
