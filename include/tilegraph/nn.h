/* tilegraph/nn.h - PyTorch-style layers: parameters plus the op.
 *
 * Each helper creates its parameters with PyTorch's default initialisation
 * (Conv2d and Linear: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weight and bias;
 * norms: weight 1, bias 0) under the scope `name`, and names the op node
 * itself `name`: tg_nn_conv2d(g, x, "conv", ...) inside scope "layer1" makes
 * "layer1/conv/weight", "layer1/conv/bias" and the op "layer1/conv".
 * Checkpoints then carry PyTorch's state_dict names ("layer1.conv.weight").
 */
#ifndef TILEGRAPH_NN_H
#define TILEGRAPH_NN_H

#include "tilegraph/export.h"

#include "tilegraph/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_nn_conv2d_config {
    int in_channels, out_channels;
    int kernel, stride, padding, dilation, groups;
    bool bias;
} tg_nn_conv2d_config;

/* Conv2d(cin, cout, kernel, stride, padding) with bias. */
TG_API tg_tensor *tg_nn_conv2d(tg_graph *g, tg_tensor *x, const char *name, int cin, int cout,
                               int kernel, int stride, int padding);
/* The general form (dilation, groups, no bias). */
TG_API tg_tensor *tg_nn_conv2d_ex(tg_graph *g, tg_tensor *x, const char *name,
                                  const tg_nn_conv2d_config *c);
/* Linear(in, out): x [N, in] -> [N, out]. */
TG_API tg_tensor *tg_nn_linear(tg_graph *g, tg_tensor *x, const char *name, int in, int out,
                               bool bias);
/* BatchNorm2d(channels), eps 1e-5, with running statistics as state. */
TG_API tg_tensor *tg_nn_batch_norm2d(tg_graph *g, tg_tensor *x, const char *name, int channels);
/* GroupNorm(groups, channels), eps 1e-5. */
TG_API tg_tensor *tg_nn_group_norm(tg_graph *g, tg_tensor *x, const char *name, int groups,
                                   int channels);
/* LayerNorm over the last dimension of size `size`, eps 1e-5. */
TG_API tg_tensor *tg_nn_layer_norm(tg_graph *g, tg_tensor *x, const char *name, int size);

#ifdef __cplusplus
}
#endif
#endif
