/* graph/shape_params.h - the params of SLICE, SLICE_BWD and CONCAT
 * (ops/shape.c), named once here: in the graph layer because autodiff reads
 * them when it joins the gradients of adjacent slices (graph/autodiff.c). */
#ifndef TG_GRAPH_SHAPE_PARAMS_H
#define TG_GRAPH_SHAPE_PARAMS_H

#include "graph/node.h"

/* Rows [start, end) along axis (normalised to >= 0 by the shape rule). */
TG_PARAM_I(slice, axis, 0)
TG_PARAM_I(slice, start, 1)
TG_PARAM_I(slice, end, 2)
/* SLICE_BWD: the sliced input's length along axis, which dy is placed into. */
TG_PARAM_I(slice, len, 3)
/* CONCAT: the axis (normalised to >= 0). */
TG_PARAM_I(concat, axis, 0)

#endif
