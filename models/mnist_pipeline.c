/* models/mnist_pipeline.c - the pipelining tutorial's network, in blocks:
 *   B1: layer1 = Conv 1->10 k5, MaxPool 2, ReLU
 *   B2: layer2 = Conv 10->20 k5, MaxPool 2, ReLU
 *   B3: flatten to 320, layer3 = Linear 320->256, ReLU
 *   B4: layer4 = Linear 256->10, and the cross-entropy loss
 * Scopes follow the PyTorch module names (layer1.conv.weight, ...). */
#include "tilegraph/models.h"
#include "tilegraph/nn.h"

static tg_tensor *conv_layer(tg_graph *g, tg_tensor *x, const char *name, int cin, int cout)
{
    tg_scope_push(g, name);
    x = tg_nn_conv2d(g, x, "conv", cin, cout, 5, 1, 0);
    x = tg_relu(g, tg_maxpool2d(g, x, 2, 2, 0));
    tg_scope_pop(g);
    return x;
}

static tg_status build(tg_graph *g, tg_tensor *x, tg_tensor *labels, tg_tensor **out,
                       tg_tensor **loss)
{
    tg_block_begin(g, "B1");
    x = conv_layer(g, x, "layer1", 1, 10);
    tg_block_begin(g, "B2");
    x = conv_layer(g, x, "layer2", 10, 20);
    tg_block_begin(g, "B3");
    x = tg_flatten(g, x, 1);
    x = tg_relu(g, tg_nn_linear(g, x, "layer3", 320, 256, true));
    tg_block_begin(g, "B4");
    *out = tg_nn_linear(g, x, "layer4", 256, 10, true);
    if (labels)
        *loss = tg_cross_entropy(g, *out, labels);
    tg_block_end(g);
    return tg_graph_status(g);
}

const tg_model_spec tg_model_mnist_pipeline = {
    .name = "mnist-pipeline",
    .description = "the pipelining tutorial's network in blocks B1..B4 (2 conv, 2 linear)",
    .channels = 1,
    .height = 28,
    .width = 28,
    .classes = 10,
    .mean = 0.2860f,
    .std = 0.3530f,
    .build = build,
};
