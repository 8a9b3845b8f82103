/* examples/c/spirals.h - what both examples share: the two-spirals data set
 * (a classic that a linear model cannot separate) and the MLP that learns it,
 * built with the public graph API. */
#ifndef EXAMPLES_SPIRALS_H
#define EXAMPLES_SPIRALS_H

#include <tilegraph/tilegraph.h>

#include <math.h>
#include <stdint.h>

enum { SPIRAL_BATCH = 64, SPIRAL_HIDDEN = 32 };

/* Sample k of the two spirals: a point (x, y) and its class, 0 or 1. The same
 * k always gives the same sample, so training and evaluation agree. */
static inline void spiral_sample(uint32_t k, float xy[2], int32_t *label)
{
    uint32_t h = k * 2654435761u;
    double t = (h % 10000) / 10000.0 * 3.0 * 3.14159265358979; /* angle */
    double r = 0.2 + t / 3.0;
    int c = (int)(k & 1);
    double s = c ? -1.0 : 1.0;
    xy[0] = (float)(s * r * cos(t));
    xy[1] = (float)(s * r * sin(t));
    *label = c;
}

/* input "points" [batch, 2] -> Linear(2, 32) Tanh Linear(32, 32) Tanh
 * Linear(32, 2): the class scores. Parameters are named like a PyTorch
 * nn.Sequential's (fc1.weight, ...), so the checkpoint loads into one. */
static inline tg_tensor *spiral_mlp(tg_graph *g, tg_tensor *points)
{
    tg_tensor *h = tg_tanh(g, tg_nn_linear(g, points, "fc1", 2, SPIRAL_HIDDEN, true));
    h = tg_tanh(g, tg_nn_linear(g, h, "fc2", SPIRAL_HIDDEN, SPIRAL_HIDDEN, true));
    return tg_nn_linear(g, h, "fc3", SPIRAL_HIDDEN, 2, true);
}

#endif
