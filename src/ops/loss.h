/* ops/loss.h - the params of the class losses (ops/loss.c: CROSS_ENTROPY,
 * NLL_LOSS and their gradients), named once here. */
#ifndef TG_OPS_LOSS_H
#define TG_OPS_LOSS_H

#include "ops/op.h"

/* The reduction (tg_loss_reduction): the mean over the rows' weights, the
 * sum, or none (one loss per row, the labels' shape). */
TG_PARAM_I(loss, reduce, 0)
/* An ignore_index: rows with that label add nothing to the loss, to the
 * mean's denominator or to the gradient. */
TG_PARAM_I(loss, has_ignore_index, 1)
TG_PARAM_I(loss, ignore_index, 2)
/* NLL_LOSS_BWD: the class count C (not derivable from its inputs). */
TG_PARAM_I(loss, classes, 3)

#endif
