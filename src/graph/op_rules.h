/* graph/op_rules.h - what the graph layer asks of an op kind: its name, its
 * shape rule (when a node is created) and its gradient rule (autodiff).
 *
 * Declared here and defined by the op table (ops/registry.c), so that the
 * includes point one way: ops include graph headers, graph includes none of
 * ops'. The op table (ops/op.h) holds these rules with the rest of an op's
 * definition (FLOPs, scratch, kernels).
 */
#ifndef TG_GRAPH_OP_RULES_H
#define TG_GRAPH_OP_RULES_H

#include "graph/node.h"

#include <stdbool.h>

/* Check the inputs and parameters of node, set its shape and dtype; on failure return a status with
 * a message saying what is wrong (the caller prefixes the node's name). */
typedef tg_status (*tg_infer_rule)(tg_tensor *node);

/* Given node and the gradient of its output (dout), append ops computing the
 * gradient of each input i with need[i] set into din[i]; din[i] may stay NULL
 * for an input with no gradient (labels, indices). */
typedef tg_status (*tg_backward_rule)(tg_graph *g, tg_tensor *node, tg_tensor *dout,
                                      const bool *need, tg_tensor **din);

/* The op's name ("?" for a value outside tg_op). */
const char *tg_op_name(tg_op op);
/* The op's shape rule, or NULL when it has none (leaves) or op is unknown. */
tg_infer_rule tg_op_infer_rule(tg_op op);
/* The op's gradient rule, or NULL when it has none or op is unknown. */
tg_backward_rule tg_op_backward_rule(tg_op op);
/* Whether the op's output is its in[0]'s bytes reinterpreted (its def's
 * memory, TG_OP_VIEWS_INPUT): tg_node_create then marks each node of it TG_NODE_ALIAS. */
bool tg_op_aliases_input(tg_op op);

#endif
