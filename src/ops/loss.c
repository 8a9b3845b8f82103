/* ops/loss.c - losses and their backward ops:
 *   CROSS_ENTROPY(scores [N, C, d...], labels [N, d...] [, weights [C]])
 *        fused log-softmax over axis 1 + NLL: PyTorch's CrossEntropyLoss,
 *        ONNX's SoftmaxCrossEntropyLoss
 *   NLL_LOSS(log_probs [N, C, d...], labels [N, d...] [, weights [C]])
 *        -w[l] log_probs[n, l, ...]: NLLLoss, NegativeLogLikelihoodLoss
 *   MSE_LOSS(a, b)   mean((a - b)^2), equal shapes
 * and their backward ops:
 *   CROSS_ENTROPY_BWD(dloss, scores, labels [, weights]) = (softmax - onehot) * s
 *   NLL_LOSS_BWD(dloss, labels [, weights]), C classes  = -onehot * s
 *   MSE_LOSS_BWD(dloss, a, b)                = 2 (a - b) * dloss / numel
 * where a row is one (n, d...) position (classes D = prod(d...) apart) and
 * s = w[l] * dloss / sum(w) (mean), w[l] * dloss (sum) or w[l] * dloss[row]
 * (none); w is 1 without weights.
 *
 * Params of the class losses (ops/loss.h): the reduction (tg_loss_reduction:
 * mean over the rows' weights, sum, or none: one loss per row, labels'
 * shape) and an ignore_index: rows with that label
 * add nothing to the loss, to the mean's denominator or to the gradient.
 * Labels are i32, or f32 holding integers (constant labels folded at ONNX
 * import).
 *
 * A mean over no weight (every row ignored: a masked LM's micro-batch with
 * no masked token) is 0 with a zero gradient, where PyTorch's 0/0 gives
 * NaN: the loss is a mean over the labels that count, and a micro-batch
 * with none has nothing to learn from; NaN would stop the run as diverged
 * (docs/numerics.md).
 *
 * Labels out of [0, C) (and not ignored) are an error, as in PyTorch: the
 * op's check (tg_op_def.check) stops the run naming the labels, the value
 * and its position before the kernel runs. The kernels read no memory for
 * them (the row's loss and gradient are NaN), for callers without the
 * check.
 *
 * The forward kernels split the rows over the pool and add per-thread
 * partial sums (in double, in `scratch`) at the end.
 */
#include "ops/broadcast.h"
#include "ops/loss.h"
#include "ops/unary.h"

#include "core/error.h"

#include <math.h>
#include <stdio.h>

static bool is_class_loss(tg_op op)
{
    return op != TG_OP_MSE_LOSS && op != TG_OP_MSE_LOSS_BWD;
}

/* ---- shape rules ------------------------------------------------------------------ */

static tg_status expect(const tg_tensor *node, int k, tg_dtype dt, const char *what)
{
    const tg_tensor *x = node->in[k];
    if (x->dtype != dt)
        return tg_error(TG_ERR_DTYPE, "%s '%s' is %s, expected %s", what, x->name,
                        tg_dtype_name(x->dtype), tg_dtype_name(dt));
    return TG_OK;
}

static tg_status check_labels_dtype(const tg_tensor *node, int k)
{
    const tg_tensor *l = node->in[k];
    if (l->dtype != TG_I32 && l->dtype != TG_F32)
        return tg_error(TG_ERR_DTYPE, "labels '%s' is %s, expected i32", l->name,
                        tg_dtype_name(l->dtype));
    return TG_OK;
}

/* Optional class weights at input k: f32 [C]. */
static tg_status check_weights(const tg_tensor *node, int k, int64_t C)
{
    if (node->n_in <= k)
        return TG_OK;
    const tg_tensor *w = node->in[k];
    TG_TRY(expect(node, k, TG_F32, "weights"));
    if (w->shape.ndim != 1 || w->shape.dim[0] != C) {
        char a[96];
        return tg_error(TG_ERR_SHAPE, "weights %s must be [%lld], one per class",
                        tg_shape_str(w->shape, a, sizeof a), (long long)C);
    }
    return TG_OK;
}

/* (scores [N, C, d...], labels [N, d...] [, weights [C]]) starting at input k. */
static tg_status check_scores_labels(const tg_tensor *node, int k, const char *what)
{
    const tg_tensor *x = node->in[k], *l = node->in[k + 1];
    char a[96], b[96], c[96];
    TG_TRY(expect(node, k, TG_F32, what));
    TG_TRY(check_labels_dtype(node, k + 1));
    if (x->shape.ndim < 2 || x->shape.dim[1] < 1)
        return tg_error(TG_ERR_SHAPE, "%s %s must be [N, C] or [N, C, d1, ...] with C >= 1", what,
                        tg_shape_str(x->shape, a, sizeof a));
    bool fit = l->shape.ndim == x->shape.ndim - 1 && l->shape.dim[0] == x->shape.dim[0];
    tg_shape want = x->shape;
    for (int d = 1; d < l->shape.ndim && fit; d++)
        fit = l->shape.dim[d] == x->shape.dim[d + 1];
    for (int d = 1; d + 1 < want.ndim; d++)
        want.dim[d] = want.dim[d + 1];
    want.ndim--;
    if (!fit)
        return tg_error(TG_ERR_SHAPE, "labels %s do not match %s %s (expected %s)",
                        tg_shape_str(l->shape, a, sizeof a), what,
                        tg_shape_str(x->shape, b, sizeof b), tg_shape_str(want, c, sizeof c));
    return check_weights(node, k + 2, x->shape.dim[1]);
}

/* dloss: a scalar, or for reduction none one value per row (labels' shape). */
static tg_status check_dloss(const tg_tensor *node, tg_shape rows)
{
    TG_TRY(expect(node, 0, TG_F32, "dloss"));
    bool none = is_class_loss(node->op) && tg_loss_reduce(node) == TG_LOSS_NONE;
    if (none ? !tg_shape_equal(node->in[0]->shape, rows) : tg_numel(node->in[0]) != 1) {
        char a[96], b[96];
        if (none)
            return tg_error(TG_ERR_SHAPE, "dloss %s must be the labels' shape %s (reduction none)",
                            tg_shape_str(node->in[0]->shape, a, sizeof a),
                            tg_shape_str(rows, b, sizeof b));
        return tg_error(TG_ERR_SHAPE, "dloss %s must be a scalar",
                        tg_shape_str(node->in[0]->shape, a, sizeof a));
    }
    return TG_OK;
}

static tg_status check_same(const tg_tensor *node, int k)
{
    const tg_tensor *a = node->in[k], *b = node->in[k + 1];
    TG_TRY(expect(node, k, TG_F32, "input"));
    TG_TRY(expect(node, k + 1, TG_F32, "target"));
    if (!tg_shape_equal(a->shape, b->shape)) {
        char sa[96], sb[96];
        return tg_error(TG_ERR_SHAPE, "input %s and target %s differ in shape (no broadcasting)",
                        tg_shape_str(a->shape, sa, sizeof sa),
                        tg_shape_str(b->shape, sb, sizeof sb));
    }
    return TG_OK;
}

/* The loss's shape: a scalar, or the labels' for reduction none. */
static tg_shape reduced(const tg_tensor *node, tg_shape labels)
{
    return tg_loss_reduce(node) == TG_LOSS_NONE ? labels : tg_shape_of(0, NULL);
}

/* [N, d...] labels and C classes -> [N, C, d...]. */
static tg_shape with_classes(tg_shape labels, int64_t C)
{
    tg_shape s = labels;
    for (int d = s.ndim; d > 1; d--)
        s.dim[d] = s.dim[d - 1];
    s.dim[1] = C;
    s.ndim++;
    return s;
}

static tg_status infer_loss(tg_tensor *node)
{
    int lo = 2, hi = 3, have = node->n_in; /* class losses: optional weights */
    switch (node->op) {
    case TG_OP_CROSS_ENTROPY_BWD:
        lo = 3, hi = 4;
        break;
    case TG_OP_MSE_LOSS:
        hi = 2;
        break;
    case TG_OP_MSE_LOSS_BWD:
        lo = hi = 3;
        break;
    case TG_OP_CROSS_ENTROPY:
    case TG_OP_NLL_LOSS:
    case TG_OP_NLL_LOSS_BWD:
        break;
    default:
        TG_UNREACHABLE_OP(node->op);
    }
    if (have < lo || have > hi)
        return tg_error(TG_ERR_INVALID_ARG, "takes %d%s inputs, got %d", lo,
                        hi > lo ? " or more" : "", have);
    if (is_class_loss(node->op) &&
        (tg_loss_reduce(node) < TG_LOSS_MEAN || tg_loss_reduce(node) > TG_LOSS_NONE))
        return tg_error(TG_ERR_INVALID_ARG, "reduction %lld is not mean, sum or none",
                        (long long)tg_loss_reduce(node));
    node->dtype = TG_F32;
    switch (node->op) {
    case TG_OP_CROSS_ENTROPY:
        TG_TRY(check_scores_labels(node, 0, "logits"));
        node->shape = reduced(node, node->in[1]->shape);
        return TG_OK;
    case TG_OP_NLL_LOSS:
        TG_TRY(check_scores_labels(node, 0, "log_probs"));
        node->shape = reduced(node, node->in[1]->shape);
        return TG_OK;
    case TG_OP_MSE_LOSS:
        TG_TRY(check_same(node, 0));
        node->shape = tg_shape_of(0, NULL);
        return TG_OK;
    case TG_OP_CROSS_ENTROPY_BWD:
        TG_TRY(check_scores_labels(node, 1, "logits"));
        TG_TRY(check_dloss(node, node->in[2]->shape));
        node->shape = node->in[1]->shape;
        return TG_OK;
    case TG_OP_NLL_LOSS_BWD: {
        TG_TRY(check_labels_dtype(node, 1));
        tg_shape l = node->in[1]->shape;
        if (l.ndim < 1 || l.ndim >= TG_MAX_DIMS || tg_loss_classes(node) < 1) {
            char a[96];
            return tg_error(TG_ERR_SHAPE,
                            "labels %s must be [N, d...] and classes (%lld) at least 1",
                            tg_shape_str(l, a, sizeof a), (long long)tg_loss_classes(node));
        }
        TG_TRY(check_weights(node, 2, tg_loss_classes(node)));
        TG_TRY(check_dloss(node, l));
        node->shape = with_classes(l, tg_loss_classes(node));
        return TG_OK;
    }
    case TG_OP_MSE_LOSS_BWD:
        TG_TRY(check_dloss(node, node->in[1]->shape));
        TG_TRY(check_same(node, 1));
        node->shape = node->in[1]->shape;
        return TG_OK;
    default:
        TG_UNREACHABLE_OP(node->op);
    }
}

static double flops(const tg_tensor *node)
{
    double n = (double)tg_numel(tg_loss_scores_of(node));
    switch (node->op) {
    case TG_OP_CROSS_ENTROPY:
        return 7 * n; /* max, sub, exp (4), sum */
    case TG_OP_CROSS_ENTROPY_BWD:
        return 9 * n;
    case TG_OP_NLL_LOSS:
        return (double)tg_numel(node->in[1]);
    case TG_OP_NLL_LOSS_BWD:
        return (double)tg_numel(node);
    case TG_OP_MSE_LOSS:
    case TG_OP_MSE_LOSS_BWD:
        return 3 * n;
    default:
        TG_UNREACHABLE_OP(node->op);
    }
}

/* ---- reference kernels ------------------------------------------------------------------ */

static void ref_fwd(const tg_ref_args *a)
{
    const tg_tensor *node = a->node;
    if (node->op == TG_OP_MSE_LOSS) {
        int64_t count = tg_numel(node->in[0]);
        double total = 0;
        for (int64_t k = 0; k < count; k++)
            total += (a->in[0][k] - a->in[1][k]) * (a->in[0][k] - a->in[1][k]);
        a->out[0] = total / (double)count;
        return;
    }
    tg_loss_rows g = tg_loss_rows_of(node);
    const double *w = node->n_in > 2 ? a->in[2] : NULL;
    double total = 0, wsum = 0;
    for (int64_t r = 0; r < g.R; r++) {
        int64_t cls = tg_loss_row_class(&g, a->in[1][r]);
        double wt = tg_loss_row_weight(cls, NULL, w), v = 0;
        if (cls == TG_LOSS_ROW_BAD) {
            v = NAN;
        } else if (cls >= 0) {
            const double *row = a->in[0] + (r / g.D) * g.C * g.D + r % g.D;
            v = -row[cls * g.D];
            if (node->op == TG_OP_CROSS_ENTROPY) {
                double m = row[0], s = 0;
                for (int64_t c = 1; c < g.C; c++)
                    m = fmax(m, row[c * g.D]);
                for (int64_t c = 0; c < g.C; c++)
                    s += exp(row[c * g.D] - m);
                v += m + log(s);
            }
            v *= wt;
        }
        if (g.red == TG_LOSS_NONE)
            a->out[r] = v;
        total += v;
        wsum += wt;
    }
    if (g.red != TG_LOSS_NONE)
        a->out[0] = g.red == TG_LOSS_MEAN ? tg_loss_mean_scale(total, wsum) : total;
}

static void ref_bwd(const tg_ref_args *a)
{
    const tg_tensor *node = a->node;
    if (node->op == TG_OP_MSE_LOSS_BWD) {
        int64_t n = tg_numel(node);
        for (int64_t k = 0; k < n; k++)
            a->out[k] = 2.0 * (a->in[1][k] - a->in[2][k]) * a->in[0][0] / (double)n;
        return;
    }
    bool ce = node->op == TG_OP_CROSS_ENTROPY_BWD;
    int kl = ce ? 2 : 1;
    tg_loss_rows g = tg_loss_rows_of(node);
    const double *labels = a->in[kl], *w = node->n_in > kl + 1 ? a->in[kl + 1] : NULL;
    double dscale =
        g.red == TG_LOSS_NONE ? 0
        : g.red == TG_LOSS_SUM
            ? a->in[0][0]
            : tg_loss_mean_scale(a->in[0][0], tg_loss_weight_sum(&g, NULL, NULL, NULL, labels, w));
    for (int64_t r = 0; r < g.R; r++) {
        int64_t cls = tg_loss_row_class(&g, labels[r]), at = (r / g.D) * g.C * g.D + r % g.D;
        double *o = a->out + at;
        double s =
            (g.red == TG_LOSS_NONE ? a->in[0][r] : dscale) * tg_loss_row_weight(cls, NULL, w);
        if (cls < 0) {
            for (int64_t c = 0; c < g.C; c++)
                o[c * g.D] = cls == TG_LOSS_ROW_BAD ? NAN : 0.0;
            continue;
        }
        if (ce) {
            const double *row = a->in[1] + at;
            double m = row[0], sum = 0;
            for (int64_t c = 1; c < g.C; c++)
                m = fmax(m, row[c * g.D]);
            for (int64_t c = 0; c < g.C; c++)
                sum += exp(row[c * g.D] - m);
            for (int64_t c = 0; c < g.C; c++)
                o[c * g.D] = exp(row[c * g.D] - m) / sum * s;
        } else {
            for (int64_t c = 0; c < g.C; c++)
                o[c * g.D] = 0;
        }
        o[cls * g.D] -= s;
    }
}

/* ---- the labels' check ------------------------------------------------------------------- */

/* Every label a class (or the ignore_index) before the kernel runs
 * (tg_op_def.check); the first that is not is named with its position. */
static bool check_labels(const tg_kernel_args *a, char *msg, size_t cap)
{
    const tg_tensor *node = a->node;
    int kl = node->op == TG_OP_CROSS_ENTROPY_BWD ? 2 : 1;
    const tg_tensor *l = node->in[kl];
    const int32_t *li = l->dtype == TG_I32 ? a->in[kl] : NULL;
    const float *lf = l->dtype == TG_I32 ? NULL : a->in[kl];
    tg_loss_rows g = tg_loss_rows_of(node);
    for (int64_t r = 0; (li || lf) && r < g.R; r++) {
        double v = li ? (double)li[r] : (double)lf[r];
        if (tg_loss_row_class(&g, v) != TG_LOSS_ROW_BAD)
            continue;
        char ii[64] = "", at[64];
        if (g.has_ii)
            snprintf(ii, sizeof ii, ", or the ignore_index %lld", (long long)g.ii);
        if (g.D > 1)
            snprintf(at, sizeof at, "sample %lld, position %lld", (long long)(r / g.D),
                     (long long)(r % g.D));
        else
            snprintf(at, sizeof at, "sample %lld", (long long)r);
        snprintf(msg, cap,
                 "labels '%s' hold %.9g at %s: there are %lld classes, so labels must be integers "
                 "in [0, %lld)%s",
                 l->name, v, at, (long long)g.C, (long long)g.C, ii);
        return false;
    }
    return true;
}

/* ---- builders --------------------------------------------------------------------------- */

static tg_node_params loss_params(tg_loss_params lp)
{
    tg_node_params p = {0};
    tg_loss_set_reduce(&p, lp.reduction);
    tg_loss_set_has_ignore_index(&p, lp.has_ignore_index);
    tg_loss_set_ignore_index(&p, lp.ignore_index);
    return p;
}

tg_tensor *tg_cross_entropy_ex(tg_graph *g, tg_tensor *scores, tg_tensor *labels,
                               tg_tensor *weights, tg_loss_params lp)
{
    tg_node_params p = loss_params(lp);
    return tg_node_create(g, TG_OP_CROSS_ENTROPY, weights ? 3 : 2,
                          (tg_tensor *[]){scores, labels, weights}, &p);
}

tg_tensor *tg_nll_loss_ex(tg_graph *g, tg_tensor *log_probs, tg_tensor *labels, tg_tensor *weights,
                          tg_loss_params lp)
{
    tg_node_params p = loss_params(lp);
    return tg_node_create(g, TG_OP_NLL_LOSS, weights ? 3 : 2,
                          (tg_tensor *[]){log_probs, labels, weights}, &p);
}

tg_tensor *tg_cross_entropy(tg_graph *g, tg_tensor *logits, tg_tensor *labels)
{
    return tg_cross_entropy_ex(g, logits, labels, NULL, (tg_loss_params){TG_LOSS_MEAN, false, 0});
}

tg_tensor *tg_nll_loss(tg_graph *g, tg_tensor *log_probs, tg_tensor *labels)
{
    return tg_nll_loss_ex(g, log_probs, labels, NULL, (tg_loss_params){TG_LOSS_MEAN, false, 0});
}

tg_tensor *tg_mse_loss(tg_graph *g, tg_tensor *a, tg_tensor *b)
{
    return tg_node_create(g, TG_OP_MSE_LOSS, 2, (tg_tensor *[]){a, b}, NULL);
}

/* NLL_LOSS_BWD of a class loss node whose labels are input kl (weights after
 * them, if any), with C classes: -onehot * s per row. */
static tg_tensor *nll_bwd(tg_graph *g, const tg_tensor *node, tg_tensor *dloss, int kl, int64_t C)
{
    tg_node_params p = node->p;
    tg_loss_set_classes(&p, C);
    bool w = node->n_in > kl + 1;
    return tg_node_create(g, TG_OP_NLL_LOSS_BWD, w ? 3 : 2,
                          (tg_tensor *[]){dloss, node->in[kl], w ? node->in[kl + 1] : NULL}, &p);
}

/* ---- gradient rules ----------------------------------------------------------------------- */

/* Class weights are constants of the loss: refuse to differentiate them. */
static tg_status no_weight_grad(const tg_tensor *node, const bool *need, int k)
{
    if (node->n_in > k && need[k])
        return tg_error(TG_ERR_UNSUPPORTED,
                        "%s: the gradient of the class weights '%s' is not supported (make the "
                        "weights a constant)",
                        tg_op_name(node->op), node->in[k]->name);
    return TG_OK;
}

static tg_status bwd_cross_entropy(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                                   tg_tensor **din)
{
    TG_TRY(no_weight_grad(node, need, 2));
    din[0] = tg_node_create(
        g, TG_OP_CROSS_ENTROPY_BWD, node->n_in + 1,
        (tg_tensor *[]){dout, node->in[0], node->in[1], node->n_in > 2 ? node->in[2] : NULL},
        &node->p);
    return TG_OK;
}

static tg_status bwd_nll(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                         tg_tensor **din)
{
    TG_TRY(no_weight_grad(node, need, 2));
    din[0] = nll_bwd(g, node, dout, 1, node->in[0]->shape.dim[1]);
    return TG_OK;
}

static tg_status bwd_mse(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                         tg_tensor **din)
{
    tg_tensor *d = tg_node_create(g, TG_OP_MSE_LOSS_BWD, 3,
                                  (tg_tensor *[]){dout, node->in[0], node->in[1]}, NULL);
    if (need[0])
        din[0] = d;
    if (need[1])
        din[1] = tg_scale(g, d, -1.0f, 0.0f);
    return TG_OK;
}

/* The backward ops are linear in dloss: their adjoint in dloss is
 * sum(g * op(1, ...)) over what one dloss value scales: everything for a
 * scalar dloss, the classes (axis 1) of its row for reduction none. */
static tg_tensor *adjoint_dloss(tg_graph *g, tg_tensor *node, tg_tensor *dout)
{
    tg_tensor *dl = node->in[0];
    tg_tensor *in[4] = {tg_constant(g, dl->shape, 1.0f), node->in[1],
                        node->n_in > 2 ? node->in[2] : NULL, node->n_in > 3 ? node->in[3] : NULL};
    tg_tensor *unit = tg_node_create(g, node->op, node->n_in, in, &node->p);
    tg_tensor *prod = tg_mul(g, dout, unit);
    if (is_class_loss(node->op) && tg_loss_reduce(node) == TG_LOSS_NONE)
        return tg_reduce_sum(g, prod, 1u << 1, false);
    return tg_sum_to(g, prod, dl->shape);
}

/* In the logits, cross_entropy_bwd moves like softmax scaled per row by s:
 * the adjoint is softmax_bwd(g, softmax(logits)) * s, and s (the row's
 * weight times its dloss scale) is -sum over the classes of nll_bwd. */
static tg_status bwd_cross_entropy_bwd(tg_graph *g, tg_tensor *node, tg_tensor *dout,
                                       const bool *need, tg_tensor **din)
{
    TG_TRY(no_weight_grad(node, need, 3));
    tg_tensor *dl = node->in[0], *logits = node->in[1];
    if (need[0])
        din[0] = adjoint_dloss(g, node, dout);
    if (need[1]) {
        tg_node_params p = {0};
        tg_softmax_set_axis(&p, 1);
        tg_tensor *sm = tg_softmax(g, logits, 1);
        tg_tensor *j = tg_node_create(g, TG_OP_SOFTMAX_BWD, 2, (tg_tensor *[]){dout, sm}, &p);
        tg_tensor *s =
            tg_reduce_sum(g, nll_bwd(g, node, dl, 2, logits->shape.dim[1]), 1u << 1, true);
        din[1] = tg_mul(g, j, tg_scale(g, s, -1.0f, 0.0f));
    }
    return TG_OK;
}

static tg_status bwd_nll_bwd(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                             tg_tensor **din)
{
    TG_TRY(no_weight_grad(node, need, 2));
    din[0] = adjoint_dloss(g, node, dout);
    return TG_OK;
}

/* 2 (a - b) dloss / n: in a it is g * 2 dloss / n, in b the negative. */
static tg_status bwd_mse_bwd(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                             tg_tensor **din)
{
    if (need[0])
        din[0] = adjoint_dloss(g, node, dout);
    if (need[1] || need[2]) {
        float k = 2.0f / (float)tg_numel(node);
        tg_tensor *da = tg_scale(g, tg_mul(g, dout, node->in[0]), k, 0.0f);
        if (need[1])
            din[1] = da;
        if (need[2])
            din[2] = tg_scale(g, da, -1.0f, 0.0f);
    }
    return TG_OK;
}

#define LOSS_DEF(E, REF, BWD, CHECK)                                                               \
    const tg_op_def tg_opdef_##E = {.infer = infer_loss,                                           \
                                    .flops = flops,                                                \
                                    .reference = REF,                                              \
                                    .backward = BWD,                                               \
                                    .memory = TG_OP_OWN_STORAGE,                                   \
                                    .check = CHECK}

/* The backward ops read the labels their forward op has checked. */
LOSS_DEF(CROSS_ENTROPY, ref_fwd, bwd_cross_entropy, check_labels);
LOSS_DEF(NLL_LOSS, ref_fwd, bwd_nll, check_labels);
LOSS_DEF(MSE_LOSS, ref_fwd, bwd_mse, NULL);
LOSS_DEF(CROSS_ENTROPY_BWD, ref_bwd, bwd_cross_entropy_bwd, NULL);
LOSS_DEF(NLL_LOSS_BWD, ref_bwd, bwd_nll_bwd, NULL);
LOSS_DEF(MSE_LOSS_BWD, ref_bwd, bwd_mse_bwd, NULL);
