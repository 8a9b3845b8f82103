/* ops/random.h - the params of the random ops: RANDOM_UNIFORM (ops/random.c)
 * and DROPOUT (ops/dropout.c). */
#ifndef TG_OPS_RANDOM_H
#define TG_OPS_RANDOM_H

#include "ops/op.h"

/* Both: a salt from the node's name, so that two random nodes of one graph
 * draw different streams. */
TG_PARAM_I(random, salt, 0)
/* RANDOM_UNIFORM: uniform in [low, high), or normal (mean low, scale high). */
TG_PARAM_I(random, normal, 1) /* 0 uniform, 1 normal */
TG_PARAM_F(random, low, 0)
TG_PARAM_F(random, high, 1)
/* DROPOUT: the probability an element is dropped. */
TG_PARAM_F(dropout, p, 0)
TG_PARAM_I(dropout, salt, 0)

#endif
