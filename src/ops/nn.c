/* ops/nn.c - PyTorch-style layer helpers over the op builders. */
#include "tilegraph/nn.h"

#include "graph/node.h"

static tg_init fan_in(double n)
{
    return (tg_init){TG_INIT_FAN_IN_UNIFORM, n, 0};
}

/* The op is created inside the layer's scope, so a shape error names the
 * layer ("layer1/conv/conv2d: x [...] has 3 channels ..."); then, with the
 * scope popped, it is renamed to the layer's own name ("layer1/conv"). */
static tg_tensor *named(tg_graph *g, tg_tensor *t, const char *name)
{
    tg_scope_pop(g);
    if (t)
        tg_graph_rename(g, t, name);
    return t;
}

tg_tensor *tg_nn_conv2d_ex(tg_graph *g, tg_tensor *x, const char *name,
                           const tg_nn_conv2d_config *c)
{
    int groups = c->groups > 0 ? c->groups : 1;
    if (c->in_channels <= 0 || c->out_channels <= 0 || c->kernel <= 0 || c->in_channels % groups ||
        c->out_channels % groups)
        return tg_graph_fail(g, TG_ERR_INVALID_ARG,
                             "%s: Conv2d(%d, %d, kernel %d, groups %d) is not a valid layer", name,
                             c->in_channels, c->out_channels, c->kernel, groups);
    double fan = (double)(c->in_channels / groups) * c->kernel * c->kernel;
    tg_scope_push(g, name);
    tg_tensor *w = tg_param(
        g, "weight", tg_shape4(c->out_channels, c->in_channels / groups, c->kernel, c->kernel),
        fan_in(fan));
    tg_tensor *b = c->bias ? tg_param(g, "bias", tg_shape1(c->out_channels), fan_in(fan)) : NULL;
    int dil = c->dilation > 0 ? c->dilation : 1, stride = c->stride > 0 ? c->stride : 1;
    tg_conv2d_params p = {stride, stride, c->padding, c->padding, dil, dil, groups};
    return named(g, tg_conv2d(g, x, w, b, p), name);
}

tg_tensor *tg_nn_conv2d(tg_graph *g, tg_tensor *x, const char *name, int cin, int cout, int kernel,
                        int stride, int padding)
{
    tg_nn_conv2d_config c = {cin, cout, kernel, stride, padding, 1, 1, true};
    return tg_nn_conv2d_ex(g, x, name, &c);
}

tg_tensor *tg_nn_linear(tg_graph *g, tg_tensor *x, const char *name, int in, int out, bool bias)
{
    if (in <= 0 || out <= 0)
        return tg_graph_fail(g, TG_ERR_INVALID_ARG, "%s: Linear(%d, %d) is not a valid layer", name,
                             in, out);
    tg_scope_push(g, name);
    tg_tensor *w = tg_param(g, "weight", tg_shape2(out, in), fan_in(in));
    tg_tensor *b = bias ? tg_param(g, "bias", tg_shape1(out), fan_in(in)) : NULL;
    return named(g, tg_linear(g, x, w, b), name);
}

static void affine(tg_graph *g, int64_t n, tg_tensor **gamma, tg_tensor **beta)
{
    *gamma = tg_param(g, "weight", tg_shape1(n), (tg_init){TG_INIT_ONES, 0, 0});
    *beta = tg_param(g, "bias", tg_shape1(n), (tg_init){TG_INIT_ZEROS, 0, 0});
}

tg_tensor *tg_nn_batch_norm2d(tg_graph *g, tg_tensor *x, const char *name, int channels)
{
    tg_tensor *gamma, *beta;
    tg_scope_push(g, name);
    affine(g, channels, &gamma, &beta);
    tg_tensor *running =
        tg_state(g, "running_stats", tg_shape2(2, channels), (tg_init){TG_INIT_NORM_STATS, 0, 0});
    return named(g, tg_batch_norm(g, x, gamma, beta, running, 1e-5f), name);
}

tg_tensor *tg_nn_group_norm(tg_graph *g, tg_tensor *x, const char *name, int groups, int channels)
{
    tg_tensor *gamma, *beta;
    tg_scope_push(g, name);
    affine(g, channels, &gamma, &beta);
    return named(g, tg_group_norm(g, x, groups, gamma, beta, 1e-5f), name);
}

tg_tensor *tg_nn_layer_norm(tg_graph *g, tg_tensor *x, const char *name, int size)
{
    tg_tensor *gamma, *beta;
    tg_scope_push(g, name);
    affine(g, size, &gamma, &beta);
    return named(g, tg_layer_norm(g, x, 1, gamma, beta, 1e-5f), name);
}
