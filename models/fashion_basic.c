/* models/fashion_basic.c - the profiling talk's Fashion-MNIST classifier:
 * Conv 1->5 k3, ReLU, MaxPool 2; Conv 5->12 k5, ReLU, GroupNorm(3 groups);
 * Linear 972->100, ReLU; Linear 100->10, LogSoftmax; NLL loss. */
#include "tilegraph/models.h"
#include "tilegraph/nn.h"

static tg_status build(tg_graph *g, tg_tensor *x, tg_tensor *labels, tg_tensor **out,
                       tg_tensor **loss)
{
    x = tg_nn_conv2d(g, x, "conv1", 1, 5, 3, 1, 0);
    x = tg_maxpool2d(g, tg_relu(g, x), 2, 2, 0);
    x = tg_nn_conv2d(g, x, "conv2", 5, 12, 5, 1, 0);
    x = tg_nn_group_norm(g, tg_relu(g, x), "norm", 3, 12);
    x = tg_flatten(g, x, 1);
    x = tg_relu(g, tg_nn_linear(g, x, "fc1", 972, 100, true));
    x = tg_nn_linear(g, x, "fc2", 100, 10, true);
    *out = tg_log_softmax(g, x, 1);
    if (labels)
        *loss = tg_nll_loss(g, *out, labels);
    return tg_graph_status(g);
}

const tg_model_spec tg_model_fashion_basic = {
    .name = "fashion-basic",
    .description = "Fashion-MNIST classifier of the profiling talk (2 conv, group norm, 2 linear)",
    .channels = 1,
    .height = 28,
    .width = 28,
    .classes = 10,
    .mean = 0.2860f,
    .std = 0.3530f,
    .build = build,
};
