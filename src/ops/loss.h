/* ops/loss.h - the params of the class losses (ops/loss.c: CROSS_ENTROPY,
 * NLL_LOSS and their gradients), named once here. */
#ifndef TG_OPS_LOSS_H
#define TG_OPS_LOSS_H

#include "ops/op.h"

#include "core/check.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

/* The reduction (tg_loss_reduction): the mean over the rows' weights, the
 * sum, or none (one loss per row, the labels' shape). */
TG_PARAM_I(loss, reduce, 0)
/* An ignore_index: rows with that label add nothing to the loss, to the
 * mean's denominator or to the gradient. */
TG_PARAM_I(loss, has_ignore_index, 1)
TG_PARAM_I(loss, ignore_index, 2)
/* NLL_LOSS_BWD: the class count C (not derivable from its inputs). */
TG_PARAM_I(loss, classes, 3)

/* ---- what the class losses' references (ops/loss.c) and every backend's
 * kernels read alike: the rows, their classes and weights, the mean's scale. */

/* A row's class, or one of these. */
enum { TG_LOSS_ROW_IGNORED = -1, TG_LOSS_ROW_BAD = -2 };

/* The scores' (or gradient's) tensor of a class loss node. */
static inline const tg_tensor *tg_loss_scores_of(const tg_tensor *node)
{
    switch (node->op) {
    case TG_OP_CROSS_ENTROPY_BWD:
    case TG_OP_MSE_LOSS_BWD:
        return node->in[1];
    case TG_OP_NLL_LOSS_BWD:
        return node;
    case TG_OP_CROSS_ENTROPY:
    case TG_OP_NLL_LOSS:
    case TG_OP_MSE_LOSS:
        return node->in[0];
    default:
        TG_UNREACHABLE_OP(node->op);
    }
}

/* The geometry and labels of a class loss, shared by both kinds of kernel. */
typedef struct tg_loss_rows {
    int64_t C, D, R; /* classes, positions per sample (d1 * d2 ...), rows N * D */
    int red;
    bool has_ii;
    int64_t ii;
} tg_loss_rows;

static inline tg_loss_rows tg_loss_rows_of(const tg_tensor *node)
{
    const tg_tensor *l = node->op == TG_OP_NLL_LOSS_BWD        ? node->in[1]
                         : node->op == TG_OP_CROSS_ENTROPY_BWD ? node->in[2]
                                                               : node->in[1];
    tg_loss_rows r = {.R = tg_numel(l),
                      .red = (int)tg_loss_reduce(node),
                      .has_ii = tg_loss_has_ignore_index(node) != 0,
                      .ii = tg_loss_ignore_index(node)};
    r.C = node->op == TG_OP_NLL_LOSS_BWD ? tg_loss_classes(node)
                                         : tg_loss_scores_of(node)->shape.dim[1];
    r.D = 1;
    for (int d = 1; d < l->shape.ndim; d++)
        r.D *= l->shape.dim[d];
    return r;
}

/* The class of label value l, TG_LOSS_ROW_IGNORED or TG_LOSS_ROW_BAD (outside [0, C), or
 * not an integer). */
static inline int64_t tg_loss_row_class(const tg_loss_rows *g, double l)
{
    if (g->has_ii && l == (double)g->ii)
        return TG_LOSS_ROW_IGNORED;
    if (!(l >= 0 && l < (double)g->C) || l != floor(l))
        return TG_LOSS_ROW_BAD;
    return (int64_t)l;
}

/* A row's weight: w[class], 1 without weights; 0 ignored, 1 bad (its NaN
 * decides anyway). */
static inline double tg_loss_row_weight(int64_t cls, const float *wf, const double *wd)
{
    if (cls == TG_LOSS_ROW_IGNORED)
        return 0;
    if (cls == TG_LOSS_ROW_BAD)
        return 1;
    return wf ? (double)wf[cls] : wd ? wd[cls] : 1.0;
}

/* Sum of the rows' weights: the mean's denominator. */
static inline double tg_loss_weight_sum(const tg_loss_rows *g, const int32_t *li, const float *lf,
                                        const float *wf, const double *ld, const double *wd)
{
    double s = 0;
    for (int64_t r = 0; r < g->R; r++) {
        double l = li ? (double)li[r] : lf ? (double)lf[r] : ld[r];
        s += tg_loss_row_weight(tg_loss_row_class(g, l), wf, wd);
    }
    return s;
}

/* dloss / wsum, 0 over no weight (the loss is 0 there, not NaN). */
static inline double tg_loss_mean_scale(double dloss, double wsum)
{
    return wsum != 0 ? dloss / wsum : 0.0;
}

#endif
