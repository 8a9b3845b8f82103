/* graph/autodiff.h - the choices tg_graph_backward makes, for the tests that
 * compare them (the public entry point is tg_graph_backward in
 * tilegraph/graph.h, which takes the defaults).
 */
#ifndef TG_GRAPH_AUTODIFF_H
#define TG_GRAPH_AUTODIFF_H

#include "graph/node.h"

#include <stdbool.h>

typedef struct tg_autodiff_opts {
    /* Add every slice's gradient as the slice op's own rule makes it (a
     * slice_bwd: dy in zeros of the input's size), as autodiff did before it
     * joined the gradients of a tensor's slices: T slices of one tensor then
     * cost O(T^2) bytes. Kept as the reference the joined gradients are
     * checked against, bit for bit. */
    bool pad_slices;
} tg_autodiff_opts;

/* tg_graph_backward with the choices in o (NULL: the defaults). */
tg_status tg_graph_backward_opts(tg_graph *g, tg_tensor *loss, const tg_autodiff_opts *o);

#endif
