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

#include <string.h>

/* The input index that output index o reads along an axis of length n, or -1
 * for the constant. */
static inline int64_t source_index(int64_t o, int64_t begin, int64_t n, int mode)
{
    int64_t j = o - begin;
    if (j >= 0 && j < n)
        return j;
    switch (mode) {
    case TG_PAD_EDGE:
        return j < 0 ? 0 : n - 1;
    case TG_PAD_REFLECT:
        return j < 0 ? -j : 2 * (n - 1) - j;
    case TG_PAD_CONSTANT:
        return -1;
    default:
        TG_UNREACHABLE("pad mode", mode);
    }
}

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

/* ---- kernels ------------------------------------------------------------------------ */

/* The padded (big) and unpadded (small) shapes seen as rows of the last
 * axis; a 0-d tensor is one row of one element. */
typedef struct pad_view {
    int ndim, mode;
    int64_t big[TG_MAX_DIMS], small[TG_MAX_DIMS], begin[TG_MAX_DIMS];
    int64_t rows; /* rows of the padded tensor */
} pad_view;

static pad_view make_view(const tg_tensor *node)
{
    bool bwd = node->op == TG_OP_PAD_BWD;
    tg_shape big = bwd ? node->in[0]->shape : node->shape;
    tg_shape small = bwd ? node->shape : node->in[0]->shape;
    pad_view v = {.ndim = big.ndim > 0 ? big.ndim : 1, .mode = (int)tg_pad_kind(node), .rows = 1};
    for (int d = 0; d < v.ndim; d++) {
        v.big[d] = big.ndim > 0 ? big.dim[d] : 1;
        v.small[d] = big.ndim > 0 ? small.dim[d] : 1;
        v.begin[d] = big.ndim > 0 ? tg_pad_get_begin(&node->p, d) : 0;
    }
    for (int d = 0; d < v.ndim - 1; d++)
        v.rows *= v.big[d];
    return v;
}

/* The offset of the small tensor's row read by padded row r, or -1 if the
 * row is all constant. */
static int64_t source_row(const pad_view *v, int64_t r)
{
    int64_t off = 0, stride = 1;
    for (int d = v->ndim - 2; d >= 0; d--) {
        int64_t o = r % v->big[d];
        r /= v->big[d];
        int64_t j = source_index(o, v->begin[d], v->small[d], v->mode);
        if (j < 0)
            return -1;
        off += j * stride;
        stride *= v->small[d];
    }
    return off * v->small[v->ndim - 1];
}

typedef struct pad_job {
    pad_view v;
    const float *in;
    float *out;
    float value;
    int64_t rows_per_unit; /* PAD_BWD: padded rows per independent unit */
} pad_job;

static void pad_rows(void *ctx, int64_t begin, int64_t end, int t)
{
    const pad_job *j = ctx;
    const pad_view *v = &j->v;
    int last = v->ndim - 1;
    int64_t w = v->big[last], n = v->small[last], b = v->begin[last];
    for (int64_t r = begin; r < end; r++) {
        float *o = j->out + r * w;
        int64_t src = source_row(v, r);
        if (src < 0) {
            for (int64_t q = 0; q < w; q++)
                o[q] = j->value;
            continue;
        }
        const float *x = j->in + src;
        /* the middle part is a plain copy; only the ends need the mapping */
        int64_t lo = b < 0 ? 0 : b < w ? b : w, hi = b + n < w ? b + n : w;
        hi = hi < lo ? lo : hi;
        for (int64_t q = 0; q < lo; q++) {
            int64_t s = source_index(q, b, n, v->mode);
            o[q] = s < 0 ? j->value : x[s];
        }
        if (hi > lo)
            memcpy(o + lo, x + (lo - b), (size_t)(hi - lo) * sizeof(float));
        for (int64_t q = hi; q < w; q++) {
            int64_t s = source_index(q, b, n, v->mode);
            o[q] = s < 0 ? j->value : x[s];
        }
    }
    (void)t;
}

static void fwd_pad(const tg_kernel_args *a)
{
    pad_job j = {make_view(a->node), a->in[0], a->out, tg_pad_value(a->node), 0};
    tg_par_for(a->pool, j.v.rows, tg_numel(a->node), pad_rows, &j);
}

/* Units [begin, end) of PAD_BWD: each unit owns a contiguous part of dx
 * (zeroed here) that no other unit's dy rows reach. */
static void pad_bwd_units(void *ctx, int64_t begin, int64_t end, int t)
{
    const pad_job *j = ctx;
    const pad_view *v = &j->v;
    int last = v->ndim - 1;
    int64_t w = v->big[last], n = v->small[last], b = v->begin[last];
    int64_t small_total = 1;
    for (int d = 0; d < v->ndim; d++)
        small_total *= v->small[d];
    int64_t units = v->rows / j->rows_per_unit, per_unit = small_total / units;
    memset(j->out + begin * per_unit, 0, (size_t)((end - begin) * per_unit) * sizeof(float));
    for (int64_t r = begin * j->rows_per_unit; r < end * j->rows_per_unit; r++) {
        int64_t src = source_row(v, r);
        if (src < 0)
            continue;
        const float *dy = j->in + r * w;
        float *dx = j->out + src;
        for (int64_t q = 0; q < w; q++) {
            int64_t s = source_index(q, b, n, v->mode);
            if (s >= 0)
                dx[s] += dy[q];
        }
    }
    (void)t;
}

static void fwd_pad_bwd(const tg_kernel_args *a)
{
    pad_job j = {make_view(a->node), a->in[0], a->out, 0.0f, 0};
    /* Rows with different indices on an unpadded first axis write disjoint
     * parts of dx, so those slices run in parallel; otherwise one unit. */
    bool split = j.v.ndim >= 2 && j.v.begin[0] == 0 && j.v.big[0] == j.v.small[0];
    int64_t units = split ? j.v.big[0] : 1;
    j.rows_per_unit = j.v.rows / units;
    tg_par_for(a->pool, units, tg_numel(a->node->in[0]), pad_bwd_units, &j);
}

/* Plain loops over every padded element with its full multi-index. */
static void ref_pad(const tg_ref_args *a)
{
    const tg_tensor *node = a->node;
    pad_view v = make_view(node);
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
            int64_t j = source_index(rem % v.big[d], v.begin[d], v.small[d], v.mode);
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
const tg_kernel_def tg_cpu_kernel_PAD = {.forward = fwd_pad};
const tg_op_def tg_opdef_PAD_BWD = {.infer = infer_pad,
                                    .flops = flops_bwd,
                                    .reference = ref_pad,
                                    .backward = bwd_pad_bwd,
                                    .memory = TG_OP_OWN_STORAGE};
const tg_kernel_def tg_cpu_kernel_PAD_BWD = {.forward = fwd_pad_bwd};
