/* onnx/onnx_ops_loss.c - ONNX losses (SoftmaxCrossEntropyLoss,
 * NegativeLogLikelihoodLoss) mapped onto the graph builder; its table also
 * lists the recurrent ops (onnx_rnn.c), last, as the supported list names
 * them.
 */
#include "onnx/onnx_build.h"

#include "core/alloc.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- losses --------------------------------------------------------------- */

/* reduction and ignore_index of SoftmaxCrossEntropyLoss and
 * NegativeLogLikelihoodLoss (opset 12+; PyTorch's CrossEntropyLoss and
 * NLLLoss export to them). */
static tg_status read_loss_params(onnx_builder *b, tg_loss_params *p)
{
    char buf[32];
    const char *r = ob_attr_string(b, "reduction", buf, sizeof buf);
    if (!r[0] || !strcmp(r, "mean"))
        p->reduction = TG_LOSS_MEAN;
    else if (!strcmp(r, "sum"))
        p->reduction = TG_LOSS_SUM;
    else if (!strcmp(r, "none"))
        p->reduction = TG_LOSS_NONE;
    else
        return ob_fail(b, TG_ERR_UNSUPPORTED, "reduction '%s' (mean, sum and none are)", r);
    p->has_ignore_index = ob_attr(b, "ignore_index") != NULL;
    p->ignore_index = ob_attr_int(b, "ignore_index", 0);
    return TG_OK;
}

/* Labels known at import (a constant, a bound input) become an f32 constant
 * of their integer values, which the loss ops take; a graph input is i32. */
static tg_tensor *loss_labels(onnx_builder *b)
{
    if (!ob_is_const(b, 1))
        return ob_tensor(b, 1);
    const tg_onnx_data *d = ob_const(b, 1);
    if (!d)
        return NULL;
    if (!d->i) {
        ob_fail(b, TG_ERR_DTYPE, "the labels are %s (integer labels are taken)",
                tg_onnx_elem_name(d->elem_type));
        return NULL;
    }
    float *f = tg_malloc((size_t)(d->n ? d->n : 1) * sizeof(float));
    if (!f) {
        ob_fail(b, TG_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (int64_t k = 0; k < d->n; k++) {
        if (d->i[k] > (1 << 24) || d->i[k] < -(1 << 24)) {
            ob_fail(b, TG_ERR_UNSUPPORTED, "label %lld is beyond the integers f32 holds exactly",
                    (long long)d->i[k]);
            tg_free(f);
            return NULL;
        }
        f[k] = (float)d->i[k];
    }
    tg_tensor *t = tg_constant_data(b->g, "labels", tg_shape_of(d->ndim, d->dim), f);
    tg_free(f);
    return t;
}

/* Optional class weights (input 2): a constant stays a constant (the loss's
 * weights are not trained, unlike a float initializer elsewhere). */
static tg_status loss_weights(onnx_builder *b, tg_tensor **out)
{
    *out = NULL;
    if (!ob_has_input(b, 2))
        return TG_OK;
    if (!ob_is_const(b, 2))
        return (*out = ob_tensor(b, 2)) ? TG_OK : TG_ERR_UNSUPPORTED;
    const tg_onnx_data *d = ob_const(b, 2);
    if (!d)
        return TG_ERR_UNSUPPORTED;
    if (!d->f)
        return ob_fail(b, TG_ERR_DTYPE, "the class weights are %s (float weights are taken)",
                       tg_onnx_elem_name(d->elem_type));
    *out = tg_constant_data(b->g, "weights", tg_shape_of(d->ndim, d->dim), d->f);
    return *out ? TG_OK : TG_ERR_UNSUPPORTED;
}

static tg_status class_loss(onnx_builder *b, bool softmax)
{
    tg_loss_params p;
    TG_TRY(read_loss_params(b, &p));
    tg_tensor *x = ob_tensor(b, 0), *labels = x ? loss_labels(b) : NULL, *w;
    if (!labels)
        return TG_ERR_UNSUPPORTED;
    TG_TRY(loss_weights(b, &w));
    tg_tensor *loss = softmax ? tg_cross_entropy_ex(b->g, x, labels, w, p)
                              : tg_nll_loss_ex(b->g, x, labels, w, p);
    TG_TRY(ob_set(b, 0, loss));
    /* SoftmaxCrossEntropyLoss's optional log_prob output */
    if (softmax && b->node->n_output > 1 && b->node->output[1][0])
        return ob_set(b, 1, tg_log_softmax(b->g, x, 1));
    return TG_OK;
}

static tg_status map_softmax_cross_entropy(onnx_builder *b)
{
    return class_loss(b, true);
}
static tg_status map_nll_loss(onnx_builder *b)
{
    return class_loss(b, false);
}

const ob_op tg_onnx_loss_ops[] = {
    {"SoftmaxCrossEntropyLoss", map_softmax_cross_entropy, "ignore_index,reduction"},
    {"NegativeLogLikelihoodLoss", map_nll_loss, "ignore_index,reduction"},
    {"LSTM", ob_map_lstm, OB_RNN_ATTRS ",input_forget"},
    {"GRU", ob_map_gru, OB_RNN_ATTRS ",linear_before_reset"},
    {"RNN", ob_map_rnn, OB_RNN_ATTRS},
};
const int tg_onnx_loss_op_count = (int)(sizeof tg_onnx_loss_ops / sizeof tg_onnx_loss_ops[0]);
