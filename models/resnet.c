/* models/resnet.c - torchvision's ResNet-18, 34, 50 and 101 (ResNet v1.5:
 * in a bottleneck the stride is on the 3x3 conv).
 *
 *   stem     conv1, bn1, relu[, maxpool]
 *   layer1   blocks of 64 planes, stride 1
 *   layer2   128 planes, the first block with stride 2
 *   layer3   256 planes, stride 2
 *   layer4   512 planes, stride 2
 *   head     avgpool (global), flatten, fc; cross-entropy loss
 *
 * BasicBlock (18, 34: 2,2,2,2 and 3,4,6,3 blocks): conv1 3x3 (stride), bn1,
 * relu, conv2 3x3, bn2, add the shortcut, relu. Bottleneck (50, 101:
 * 3,4,6,3 and 3,4,23,3 blocks): conv1 1x1, bn1, relu, conv2 3x3 (stride),
 * bn2, relu, conv3 1x1 to 4x planes, bn3, add, relu. The shortcut is
 * `downsample` (1x1 conv with the block's stride, then batch norm) when the
 * shape changes, else the block's input.
 *
 * Names are torchvision's module names as scopes, so a block is
 * "layer3/8" (the split point "layer3.8" means the 9th block of layer3, as
 * `model.layer3[8]` does) and checkpoints carry torchvision's state_dict
 * keys: conv1.weight, bn1.weight, layer1.0.conv1.weight,
 * layer2.0.downsample.0.weight, layer2.0.downsample.1.bias, fc.weight, ...
 * One difference: batch norm keeps its running mean and variance as one
 * state tensor "<bn>.running_stats" [2, C] (row 0 the mean, row 1 the
 * variance) where torchvision has running_mean, running_var and
 * num_batches_tracked.
 *
 * The stem follows the input size: images of at least 64x64 get torchvision's
 * stem (7x7 conv with stride 2 and padding 3, then 3x3 max pool with stride 2
 * and padding 1, so 4x smaller); smaller ones, like CIFAR's 32x32, get the
 * usual CIFAR stem (3x3 conv with stride 1 and padding 1, no max pool), since
 * downsampling a 32x32 image 32 times leaves a 1x1 map by layer4. The
 * input's `stem` overrides the choice: seed 003 trains torchvision's
 * unmodified resnet101 (the ImageNet stem) on 32x32 CIFAR-10. conv1.weight
 * is then [64, C, 3, 3] instead of [64, C, 7, 7]; every other tensor keeps
 * its shape.
 *
 * Initialisation is torchvision's: convolutions N(0, 2 / (out channels x
 * kernel area)) (Kaiming normal, fan-out, ReLU gain), batch norm weight 1 and
 * bias 0, fc PyTorch's Linear default. Convolutions have no bias.
 */
#include "tilegraph/models.h"
#include "tilegraph/nn.h"

#include <math.h>
#include <stdio.h>

/* Images this size and larger (in both dimensions) get torchvision's stem. */
#define IMAGENET_STEM_MIN 64

typedef struct resnet_arch {
    bool bottleneck;
    int blocks[4];
} resnet_arch;

/* A bias-free convolution named `name` with torchvision's initialisation. */
static tg_tensor *conv(tg_graph *g, tg_tensor *x, const char *name, int cin, int cout, int kernel,
                       int stride)
{
    double fan_out = (double)cout * kernel * kernel;
    tg_scope_push(g, name);
    tg_tensor *w = tg_param(g, "weight", tg_shape4(cout, cin, kernel, kernel),
                            (tg_init){TG_INIT_NORMAL, 0.0, sqrt(2.0 / fan_out)});
    int pad = kernel / 2;
    tg_tensor *y = tg_conv2d(g, x, w, NULL, (tg_conv2d_params){stride, stride, pad, pad, 1, 1, 1});
    tg_scope_pop(g);
    /* created inside the scope so a shape error names the layer; then named
     * as the layer itself, like tg_nn_conv2d */
    if (y)
        tg_graph_rename(g, y, name);
    return y;
}

static tg_tensor *conv_bn(tg_graph *g, tg_tensor *x, int n, int cin, int cout, int kernel,
                          int stride)
{
    char cname[8], bname[8];
    snprintf(cname, sizeof cname, "conv%d", n);
    snprintf(bname, sizeof bname, "bn%d", n);
    x = conv(g, x, cname, cin, cout, kernel, stride);
    return tg_nn_batch_norm2d(g, x, bname, cout);
}

/* One block in scope "layer<L>/<index>"; *cin becomes its output channels. */
static tg_tensor *block(tg_graph *g, tg_tensor *x, const resnet_arch *a, int *cin, int planes,
                        int stride)
{
    int cout = a->bottleneck ? planes * 4 : planes;
    tg_tensor *y;
    if (a->bottleneck) {
        y = tg_relu(g, conv_bn(g, x, 1, *cin, planes, 1, 1));
        y = tg_relu(g, conv_bn(g, y, 2, planes, planes, 3, stride));
        y = conv_bn(g, y, 3, planes, cout, 1, 1);
    } else {
        y = tg_relu(g, conv_bn(g, x, 1, *cin, planes, 3, stride));
        y = conv_bn(g, y, 2, planes, planes, 3, 1);
    }
    tg_tensor *shortcut = x;
    if (stride != 1 || *cin != cout) {
        tg_scope_push(g, "downsample"); /* nn.Sequential(conv1x1, BatchNorm2d) */
        shortcut = conv(g, x, "0", *cin, cout, 1, stride);
        shortcut = tg_nn_batch_norm2d(g, shortcut, "1", cout);
        tg_scope_pop(g);
    }
    *cin = cout;
    return tg_relu(g, tg_add(g, y, shortcut));
}

static tg_status build(const resnet_arch *a, tg_graph *g, const tg_model_input *in, tg_tensor *x,
                       tg_tensor *labels, tg_tensor **out, tg_tensor **loss)
{
    int cin = 64;
    bool imagenet_stem = in->stem == TG_STEM_AUTO
                             ? in->height >= IMAGENET_STEM_MIN && in->width >= IMAGENET_STEM_MIN
                             : in->stem == TG_STEM_IMAGENET;
    x = conv(g, x, "conv1", in->channels, 64, imagenet_stem ? 7 : 3, imagenet_stem ? 2 : 1);
    x = tg_relu(g, tg_nn_batch_norm2d(g, x, "bn1", 64));
    if (imagenet_stem) {
        x = tg_maxpool2d(g, x, 3, 2, 1);
        if (x)
            tg_graph_rename(g, x, "maxpool");
    }
    for (int l = 0; l < 4; l++) {
        char lname[8], bname[12];
        snprintf(lname, sizeof lname, "layer%d", l + 1);
        tg_scope_push(g, lname);
        for (int b = 0; b < a->blocks[l]; b++) {
            snprintf(bname, sizeof bname, "%d", b);
            tg_scope_push(g, bname);
            x = block(g, x, a, &cin, 64 << l, b == 0 && l > 0 ? 2 : 1);
            tg_scope_pop(g);
        }
        tg_scope_pop(g);
    }
    x = tg_global_avgpool(g, x);
    if (x)
        tg_graph_rename(g, x, "avgpool");
    x = tg_flatten(g, x, 1);
    *out = tg_nn_linear(g, x, "fc", cin, in->classes, true);
    if (labels)
        *loss = tg_cross_entropy(g, *out, labels);
    return tg_graph_status(g);
}

/* CIFAR-10's per-channel statistics (of the training set, pixels in [0, 1]). */
static const float cifar10_mean[3] = {0.4914f, 0.4822f, 0.4465f};
static const float cifar10_std[3] = {0.2470f, 0.2435f, 0.2616f};

#define RESNET(depth, is_bottleneck, b1, b2, b3, b4, what)                                         \
    static tg_status build_##depth(tg_graph *g, const tg_model_input *in, tg_tensor *x,            \
                                   tg_tensor *labels, tg_tensor **out, tg_tensor **loss)           \
    {                                                                                              \
        static const resnet_arch arch = {is_bottleneck, {b1, b2, b3, b4}};                         \
        return build(&arch, g, in, x, labels, out, loss);                                          \
    }                                                                                              \
    const tg_model_spec tg_model_resnet##depth = {                                                 \
        .name = "resnet" #depth,                                                                   \
        .description = "torchvision's ResNet-" #depth " (" what "), any CxHxW input",              \
        .channels = 3,                                                                             \
        .height = 32,                                                                              \
        .width = 32,                                                                               \
        .classes = 10,                                                                             \
        .mean = (0.4914f + 0.4822f + 0.4465f) / 3,                                                 \
        .std = (0.2470f + 0.2435f + 0.2616f) / 3,                                                  \
        .channel_mean = cifar10_mean,                                                              \
        .channel_std = cifar10_std,                                                                \
        .build_for = build_##depth,                                                                \
    };

RESNET(18, false, 2, 2, 2, 2, "basic blocks 2,2,2,2")
RESNET(34, false, 3, 4, 6, 3, "basic blocks 3,4,6,3")
RESNET(50, true, 3, 4, 6, 3, "bottlenecks 3,4,6,3")
RESNET(101, true, 3, 4, 23, 3, "bottlenecks 3,4,23,3")
