/* ops/matmul.c - MATMUL (batched, optional transposes) and LINEAR (x w^T + b).
 *
 * MATMUL: a [..., M, K] (or [..., K, M] with trans_a) times b [..., K, N]
 * (or [..., N, K] with trans_b) gives [..., M, N]. Operand modes, by which
 * inputs carry the batch dims (all dims but the last two):
 *   - both, with equal batch dims: one product per batch element;
 *   - only a (b 2-D): b is shared by every batch element;
 *   - only b (a 2-D): a is shared (made by gradient rules);
 *   - both, with sum set (ops/matmul.h): the products are summed over the batch
 *     and the output is 2-D [M, N] (the gradient of a shared operand).
 * Params (ops/matmul.h): trans_a, trans_b, sum over the batch.
 * With these four modes the gradient of every mode is again a MATMUL, so the
 * gradient rules close on themselves (higher derivatives work).
 *
 * Gradients: with opA = op(A), dopA = dC opB^T and dopB = opA^T dC, each
 * written as a single MATMUL with the transposes folded into the flags. The
 * input gradient and the weight gradient are separate ops (as llm.c keeps
 * them), so a scheduler may run them apart.
 *
 * LINEAR: x [..., in], w [out, in] (PyTorch's layout), optional b [out]:
 * out = x w^T + b, the bias written first and the GEMM accumulated onto it.
 *
 * The cpu backend's kernels are backend/cpu/matmul_kernels.c: oneDNN's
 * matmul primitive, planned at compile time where it takes the product
 * (backend/cpu/matmul_dnnl.c); else OpenBLAS sgemm, single-threaded per
 * call and split over the device's pool (backend/cpu/blas.h), which is
 * also what runs without a plan.
 */
#include "ops/matmul.h"
#include "ops/matmul_geom.h"
#include "ops/op.h"

#include "core/error.h"
#include "ops/ref_blas.h"

#include <string.h>

/* ---- MATMUL geometry ------------------------------------------------------------ */

typedef tg_mm_dims mm_dims;

tg_mm_dims tg_mm_dims_of(const tg_tensor *node)
{
    const tg_tensor *a = node->in[0], *b = node->in[1];
    mm_dims d;
    d.ta = tg_matmul_trans_a(node) != 0;
    d.tb = tg_matmul_trans_b(node) != 0;
    d.sum = tg_matmul_sum(node) != 0;
    int na = a->shape.ndim, nb = b->shape.ndim;
    d.M = d.ta ? a->shape.dim[na - 1] : a->shape.dim[na - 2];
    d.K = d.ta ? a->shape.dim[na - 2] : a->shape.dim[na - 1];
    d.N = d.tb ? b->shape.dim[nb - 2] : b->shape.dim[nb - 1];
    d.a_batched = na > 2;
    d.b_batched = nb > 2;
    const tg_tensor *bt = d.a_batched ? a : b;
    d.batch = 1;
    for (int i = 0; i < bt->shape.ndim - 2; i++)
        d.batch *= bt->shape.dim[i];
    return d;
}

static tg_status infer_matmul(tg_tensor *node)
{
    if (node->n_in != 2)
        return tg_error(TG_ERR_INVALID_ARG, "takes 2 inputs, got %d", node->n_in);
    const tg_tensor *a = node->in[0], *b = node->in[1];
    char sa[96], sb[96];
    tg_shape_str(a->shape, sa, sizeof sa);
    tg_shape_str(b->shape, sb, sizeof sb);
    for (int k = 0; k < 2; k++)
        if (node->in[k]->dtype != TG_F32)
            return tg_error(TG_ERR_DTYPE, "input %d ('%s') is %s; matmul takes f32", k,
                            node->in[k]->name, tg_dtype_name(node->in[k]->dtype));
    if (a->shape.ndim < 2 || b->shape.ndim < 2)
        return tg_error(TG_ERR_SHAPE, "a %s and b %s: both need at least 2 dimensions", sa, sb);
    mm_dims d = tg_mm_dims_of(node);
    int64_t kb = d.tb ? b->shape.dim[b->shape.ndim - 1] : b->shape.dim[b->shape.ndim - 2];
    if (d.K != kb)
        return tg_error(TG_ERR_SHAPE, "a %s%s and b %s%s: inner dimensions %lld and %lld differ",
                        sa, d.ta ? " (transposed)" : "", sb, d.tb ? " (transposed)" : "",
                        (long long)d.K, (long long)kb);
    if (d.a_batched && d.b_batched) {
        bool same = a->shape.ndim == b->shape.ndim;
        for (int i = 0; same && i < a->shape.ndim - 2; i++)
            same = a->shape.dim[i] == b->shape.dim[i];
        if (!same)
            return tg_error(TG_ERR_SHAPE,
                            "a %s and b %s: batch dimensions differ (they must be equal, or b "
                            "must be 2-D)",
                            sa, sb);
    }
    if (d.sum && !(d.a_batched && d.b_batched))
        return tg_error(TG_ERR_INVALID_ARG,
                        "a %s and b %s: summing over the batch needs both "
                        "operands batched",
                        sa, sb);
    node->dtype = TG_F32;
    if (d.sum) {
        node->shape = tg_shape2(d.M, d.N);
        return TG_OK;
    }
    const tg_tensor *bt = d.a_batched ? a : b;
    tg_shape s = bt->shape;
    s.dim[s.ndim - 2] = d.M;
    s.dim[s.ndim - 1] = d.N;
    node->shape = s;
    return TG_OK;
}

static double flops_matmul(const tg_tensor *node)
{
    mm_dims d = tg_mm_dims_of(node);
    return 2.0 * (double)d.batch * (double)d.M * (double)d.N * (double)d.K;
}

/* ---- MATMUL reference kernel ---------------------------------------------------- */

static void ref_matmul(const tg_ref_args *a)
{
    mm_dims d = tg_mm_dims_of(a->node);
    int64_t M = d.M, N = d.N, K = d.K;
    int64_t n_out = d.sum ? M * N : d.batch * M * N;
    for (int64_t i = 0; i < n_out; i++)
        a->out[i] = 0;
    /* double-precision GEMM (OpenBLAS's dgemm): the triple loop it replaces
     * took most of a BERT-large check's minutes; in double, its other
     * summation order is far below any tolerance the checker applies */
    for (int64_t bi = 0; bi < d.batch; bi++) {
        const double *A = a->in[0] + (d.a_batched ? bi * M * K : 0);
        const double *B = a->in[1] + (d.b_batched ? bi * K * N : 0);
        double *C = a->out + (d.sum ? 0 : bi * M * N);
        tg_dgemm(d.ta, d.tb, M, N, K, 1.0, A, d.ta ? M : K, B, d.tb ? K : N, 1.0, C, N);
    }
}

/* ---- MATMUL builders and gradient ----------------------------------------------------- */

static tg_tensor *matmul_op(tg_graph *g, tg_tensor *a, tg_tensor *b, bool ta, bool tb, bool sum)
{
    tg_node_params p = {0};
    tg_matmul_set_trans_a(&p, ta);
    tg_matmul_set_trans_b(&p, tb);
    tg_matmul_set_sum(&p, sum);
    return tg_node_create(g, TG_OP_MATMUL, 2, (tg_tensor *[]){a, b}, &p);
}

tg_tensor *tg_matmul(tg_graph *g, tg_tensor *a, tg_tensor *b, bool trans_a, bool trans_b)
{
    return matmul_op(g, a, b, trans_a, trans_b, false);
}

/* x y (with flags), summed over the batch when the target is 2-D but both
 * factors are batched. */
static tg_tensor *product_for(tg_graph *g, const tg_tensor *target, tg_tensor *x, tg_tensor *y,
                              bool tx, bool ty)
{
    bool sum = target->shape.ndim == 2 && x->shape.ndim > 2 && y->shape.ndim > 2;
    return matmul_op(g, x, y, tx, ty, sum);
}

static tg_status bwd_matmul(tg_graph *g, tg_tensor *node, tg_tensor *dc, const bool *need,
                            tg_tensor **din)
{
    tg_tensor *A = node->in[0], *B = node->in[1];
    bool ta = tg_matmul_trans_a(node) != 0, tb = tg_matmul_trans_b(node) != 0;
    if (need[0]) /* dopA = dC opB^T */
        din[0] = ta ? product_for(g, A, B, dc, tb, true) : product_for(g, A, dc, B, false, !tb);
    if (need[1]) /* dopB = opA^T dC */
        din[1] = tb ? product_for(g, B, dc, A, true, ta) : product_for(g, B, A, dc, !ta, false);
    return TG_OK;
}

const tg_op_def tg_opdef_MATMUL = {.infer = infer_matmul,
                                   .flops = flops_matmul,
                                   .reference = ref_matmul,
                                   .backward = bwd_matmul,
                                   .cost = TG_COST_GEMM,
                                   .memory = TG_OP_OWN_STORAGE};

/* ---- LINEAR ------------------------------------------------------------------------- */

static tg_status infer_linear(tg_tensor *node)
{
    if (node->n_in != 2 && node->n_in != 3)
        return tg_error(TG_ERR_INVALID_ARG, "takes 2 or 3 inputs (x, w, bias), got %d", node->n_in);
    for (int k = 0; k < node->n_in; k++)
        if (node->in[k]->dtype != TG_F32)
            return tg_error(TG_ERR_DTYPE, "input %d ('%s') is %s; linear takes f32", k,
                            node->in[k]->name, tg_dtype_name(node->in[k]->dtype));
    const tg_tensor *x = node->in[0], *w = node->in[1];
    char sx[96], sw[96], sbias[96];
    tg_shape_str(x->shape, sx, sizeof sx);
    tg_shape_str(w->shape, sw, sizeof sw);
    if (x->shape.ndim < 2)
        return tg_error(TG_ERR_SHAPE, "x %s must have at least 2 dimensions ([N, in])", sx);
    if (w->shape.ndim != 2)
        return tg_error(TG_ERR_SHAPE, "weight %s must be 2-D [out, in]", sw);
    int64_t in = x->shape.dim[x->shape.ndim - 1];
    if (w->shape.dim[1] != in)
        return tg_error(TG_ERR_SHAPE, "x %s has %lld input features but weight %s expects %lld", sx,
                        (long long)in, sw, (long long)w->shape.dim[1]);
    if (node->n_in == 3) {
        const tg_tensor *b = node->in[2];
        if (b->shape.ndim != 1 || b->shape.dim[0] != w->shape.dim[0])
            return tg_error(TG_ERR_SHAPE, "bias %s must be [%lld] for weight %s",
                            tg_shape_str(b->shape, sbias, sizeof sbias), (long long)w->shape.dim[0],
                            sw);
    }
    node->dtype = TG_F32;
    node->shape = x->shape;
    node->shape.dim[node->shape.ndim - 1] = w->shape.dim[0];
    return TG_OK;
}

static double flops_linear(const tg_tensor *node)
{
    const tg_tensor *w = node->in[1];
    double rows = (double)tg_numel(node) / (double)(w->shape.dim[0] ? w->shape.dim[0] : 1);
    return 2.0 * rows * (double)w->shape.dim[0] * (double)w->shape.dim[1] +
           (node->n_in == 3 ? (double)tg_numel(node) : 0.0);
}

static void ref_linear(const tg_ref_args *a)
{
    const tg_tensor *w = a->node->in[1];
    int64_t out_f = w->shape.dim[0], in_f = w->shape.dim[1];
    int64_t rows = out_f ? tg_numel(a->node) / out_f : 0;
    const double *x = a->in[0], *W = a->in[1], *b = a->node->n_in == 3 ? a->in[2] : NULL;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t o = 0; o < out_f; o++) {
            double s = b ? b[o] : 0.0;
            for (int64_t i = 0; i < in_f; i++)
                s += x[r * in_f + i] * W[o * in_f + i];
            a->out[r * out_f + o] = s;
        }
}

/* dx = dy w; dw = dy^T x (summed over leading batch dims); db = sum of dy
 * over every dim but the last. */
static tg_status bwd_linear(tg_graph *g, tg_tensor *node, tg_tensor *dy, const bool *need,
                            tg_tensor **din)
{
    tg_tensor *x = node->in[0], *w = node->in[1];
    if (need[0])
        din[0] = matmul_op(g, dy, w, false, false, false);
    if (need[1])
        din[1] = matmul_op(g, dy, x, true, false, x->shape.ndim > 2);
    if (node->n_in == 3 && need[2]) {
        unsigned mask = (1u << (dy->shape.ndim - 1)) - 1u;
        din[2] = tg_reduce_sum(g, dy, mask, false);
    }
    return TG_OK;
}

tg_tensor *tg_linear(tg_graph *g, tg_tensor *x, tg_tensor *w, tg_tensor *b)
{
    tg_tensor *in[3] = {x, w, b};
    return tg_node_create(g, TG_OP_LINEAR, b ? 3 : 2, in, NULL);
}

const tg_op_def tg_opdef_LINEAR = {.infer = infer_linear,
                                   .flops = flops_linear,
                                   .reference = ref_linear,
                                   .backward = bwd_linear,
                                   .cost = TG_COST_GEMM,
                                   .memory = TG_OP_OWN_STORAGE};
