/* ops/pad.c - PAD (ONNX Pad, torch.nn.functional.pad) and its gradient
 * PAD_BWD, over any number of dimensions.
 *
 * Params (ops/pad.h): the mode (tg_pad_mode), the padding before and after
 * each axis (ONNX's order: all begins, then all ends), the constant. A
 * negative padding crops. PAD_BWD keeps the
 * forward node's params; its input is dy (PAD's output shape) and its output
 * has PAD's input shape.
 *
 * Every output element reads one input element or the constant: along each
 * axis, output index o reads input index j = o - begin when 0 <= j < n, and
 * otherwise nothing (constant), the nearest end (edge: clamp) or the mirror
 * image without repeating the border (reflect: -j, or 2(n-1) - j, as numpy's
 * and PyTorch's "reflect"). The gradient sums dy over the output elements
 * that read each input element; with edge and reflect several do, so
 * PAD_BWD scatters and adds.
 */
#include "ops/broadcast.h"
#include "ops/pad.h"

#include "core/error.h"

/* ---- shape rules ---------------------------------------------------------------- */

/* Check the padding of axis d of an input of length n; set *out_len. */
static tg_status check_axis(const tg_node_params *p, int ndim, int d, int64_t n, int64_t *out_len)
{
    int64_t b = tg_pad_get_begin(p, d), e = tg_pad_get_end(p, ndim, d), mode = tg_pad_get_kind(p);
    if (n + b + e < 1)
        return tg_error(TG_ERR_SHAPE,
                        "padding %lld before and %lld after axis %d of length %lld leaves "
                        "nothing; a negative padding may crop less than the axis",
                        (long long)b, (long long)e, d, (long long)n);
    if (mode == TG_PAD_REFLECT && (b >= n || e >= n))
        return tg_error(TG_ERR_SHAPE,
                        "reflect padding %lld before and %lld after axis %d of length %lld: each "
                        "must be less than the length (as PyTorch); use edge or constant mode",
                        (long long)b, (long long)e, d, (long long)n);
    if (b > (1 << 24) || e > (1 << 24))
        return tg_error(TG_ERR_INVALID_ARG, "padding %lld/%lld of axis %d is too large",
                        (long long)b, (long long)e, d);
    *out_len = n + b + e;
    return TG_OK;
}

static tg_status infer_pad(tg_tensor *node)
{
    if (node->n_in != 1)
        return tg_error(TG_ERR_INVALID_ARG, "takes 1 input, got %d", node->n_in);
    const tg_tensor *x = node->in[0];
    if (x->dtype != TG_F32)
        return tg_error(TG_ERR_DTYPE, "input '%s' is %s; this op takes f32", x->name,
                        tg_dtype_name(x->dtype));
    int64_t mode = tg_pad_kind(node);
    if (mode != TG_PAD_CONSTANT && mode != TG_PAD_REFLECT && mode != TG_PAD_EDGE)
        return tg_error(TG_ERR_INVALID_ARG,
                        "mode %lld is not TG_PAD_CONSTANT, TG_PAD_REFLECT or TG_PAD_EDGE",
                        (long long)mode);
    bool bwd = node->op == TG_OP_PAD_BWD;
    tg_shape in = x->shape, out = in;
    for (int d = 0; d < in.ndim; d++) {
        const tg_node_params *p = &node->p;
        int64_t len = in.dim[d];
        if (bwd) /* in is dy: the forward input had len - begin - end elements */
            len -= tg_pad_get_begin(p, d) + tg_pad_get_end(p, in.ndim, d);
        int64_t padded = 0;
        if (bwd && len < 1)
            return tg_error(TG_ERR_SHAPE,
                            "dy has %lld elements along axis %d, fewer than "
                            "its padding %lld + %lld",
                            (long long)in.dim[d], d, (long long)tg_pad_get_begin(p, d),
                            (long long)tg_pad_get_end(p, in.ndim, d));
        TG_TRY(check_axis(p, in.ndim, d, len, &padded));
        out.dim[d] = bwd ? len : padded;
    }
    node->dtype = TG_F32;
    node->shape = out;
    return TG_OK;
}

static double flops_none(const tg_tensor *node)
{
    return 0;
}
static double flops_bwd(const tg_tensor *node)
{
    return (double)tg_numel(node->in[0]);
}

/* Plain loops over every padded element with its full multi-index. */
static void ref_pad(const tg_ref_args *a)
{
    const tg_tensor *node = a->node;
    tg_pad_view v = tg_pad_make_view(node);
    bool bwd = node->op == TG_OP_PAD_BWD;
    int64_t total = v.rows * v.big[v.ndim - 1], small_total = 1;
    for (int d = 0; d < v.ndim; d++)
        small_total *= v.small[d];
    if (bwd)
        for (int64_t k = 0; k < small_total; k++)
            a->out[k] = 0;
    for (int64_t k = 0; k < total; k++) {
        int64_t rem = k, src = 0, stride = 1;
        for (int d = v.ndim - 1; d >= 0 && src >= 0; d--) {
            int64_t j = tg_pad_source_index(rem % v.big[d], v.begin[d], v.small[d], v.mode);
            rem /= v.big[d];
            src = j < 0 ? -1 : src + j * stride;
            stride *= v.small[d];
        }
        if (bwd && src >= 0)
            a->out[src] += a->in[0][k];
        else if (!bwd)
            a->out[k] = src >= 0 ? a->in[0][src] : tg_pad_value(node);
    }
}

/* ---- builder and gradient rules --------------------------------------------------------- */

tg_tensor *tg_pad(tg_graph *g, tg_tensor *x, const int64_t *pads, tg_pad_mode mode, float value)
{
    if (!x)
        return tg_node_create(g, TG_OP_PAD, 1, &x, NULL); /* records the NULL input */
    if (!pads)
        return tg_graph_fail(g, TG_ERR_INVALID_ARG,
                             "pad: no pads given for '%s' (give 2 * %d "
                             "values: the begins, then the ends)",
                             x->name, x->shape.ndim);
    tg_node_params p = {0};
    tg_pad_set_kind(&p, mode);
    tg_pad_set_pads(&p, x->shape.ndim, pads);
    tg_pad_set_value(&p, value);
    return tg_node_create(g, TG_OP_PAD, 1, &x, &p);
}

/* PAD is linear in x: its gradient is the transpose, PAD_BWD. */
static tg_status bwd_pad(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                         tg_tensor **din)
{
    tg_node_params p = node->p;
    din[0] = tg_node_create(g, TG_OP_PAD_BWD, 1, &dout, &p);
    return din[0] ? TG_OK : tg_graph_status(g);
}

/* PAD_BWD is linear: its gradient is PAD with a zero constant. */
static tg_status bwd_pad_bwd(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                             tg_tensor **din)
{
    tg_node_params p = node->p;
    tg_pad_set_value(&p, 0.0f);
    din[0] = tg_node_create(g, TG_OP_PAD, 1, &dout, &p);
    return din[0] ? TG_OK : tg_graph_status(g);
}

const tg_op_def tg_opdef_PAD = {.infer = infer_pad,
                                .flops = flops_none,
                                .reference = ref_pad,
                                .backward = bwd_pad,
                                .memory = TG_OP_OWN_STORAGE};
const tg_op_def tg_opdef_PAD_BWD = {.infer = infer_pad,
                                    .flops = flops_bwd,
                                    .reference = ref_pad,
                                    .backward = bwd_pad_bwd,
                                    .memory = TG_OP_OWN_STORAGE};
