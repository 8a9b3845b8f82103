/* graph/node.h - the node (tensor) and graph structures, for the modules
 * behind the public API: ops, autodiff, compile passes, the engine.
 *
 * Invariants:
 *  - A node's inputs were created before it, so creation order is a valid
 *    topological order and node ids index g->nodes.
 *  - Every node has exactly one output, described by (dtype, shape).
 *  - A node with TG_NODE_ALIAS has no storage of its own: its output is its
 *    first input's buffer seen with another shape (reshape).
 *  - A node with n_mutated > 0 writes into its first n_mutated inputs (the
 *    optimizer updates, the running-statistics update); its own output is
 *    empty. The scheduler orders it after every other reader of those inputs.
 */
#ifndef TG_GRAPH_NODE_H
#define TG_GRAPH_NODE_H

#include "tilegraph/graph.h"

#include "core/arena.h"
#include "graph/op_list.h"

#define TG_MAX_INPUTS 8
#define TG_MAX_IPARAMS 16
#define TG_MAX_FPARAMS 8

typedef enum tg_role {
    TG_ROLE_ACTIVATION, /* a value computed in a step and dead after its last use */
    TG_ROLE_INPUT,      /* fed from the host each run */
    TG_ROLE_PARAM,      /* trainable weight */
    TG_ROLE_STATE,      /* persistent, not trained: running stats, optimizer state */
    TG_ROLE_CONSTANT,   /* filled once */
    TG_ROLE_GRADIENT,   /* the gradient of a parameter */
    TG_ROLE_UPDATE,     /* a side effect with an empty output */
    TG_ROLE_COUNT
} tg_role;

enum {
    TG_NODE_OUTPUT = 1u << 0,     /* readable after the run */
    TG_NODE_BACKWARD = 1u << 1,   /* made by autodiff */
    TG_NODE_ALIAS = 1u << 2,      /* shares in[0]'s storage */
    TG_NODE_OPTIMIZER = 1u << 3,  /* made by the optimizer */
    TG_NODE_CHECKPOINT = 1u << 4, /* kept for the backward pass when recomputing */
    TG_NODE_LOSS_SEED = 1u << 5   /* d(loss)/d(loss): the loss scale goes here */
};

typedef struct tg_node_params {
    int64_t i[TG_MAX_IPARAMS];
    float f[TG_MAX_FPARAMS];
} tg_node_params;

struct tg_tensor {
    int id;
    tg_op op;
    tg_role role;
    tg_dtype dtype;
    tg_shape shape;
    int n_in;
    tg_tensor *in[TG_MAX_INPUTS];
    int n_mutated;
    tg_node_params p;
    unsigned flags;
    const char *name;
    int name_next;          /* holding a name others asked for: the next suffix to try */
    int block;              /* index into g->blocks, -1 for none */
    tg_tensor *grad;        /* gradient node, after autodiff */
    tg_tensor *forward_of;  /* for backward nodes: the forward node they derive from */
    tg_init init;           /* leaves: how to fill */
    const float *init_data; /* TG_INIT_DATA: numel floats in the graph's arena */
};

typedef struct tg_block_info {
    const char *name;
    int device_id; /* -1: placed by stages */
} tg_block_info;

#define TG_MAX_SCOPE_DEPTH 32

struct tg_graph {
    tg_arena *arena;
    tg_tensor **nodes;
    int n_nodes, cap_nodes;
    const char *scope[TG_MAX_SCOPE_DEPTH];
    int scope_depth;
    tg_block_info *blocks;
    int n_blocks, cap_blocks;
    int current_block;
    bool training;
    tg_status status;
    char *error;
    /* name -> node, open addressing; capacity a power of two */
    tg_tensor **names;
    int names_cap, names_used;
};

/* A named param of an op family, declared once in the family's header:
 * TG_PARAM_I(conv, stride_h, 0) defines tg_conv_stride_h(node), which reads
 * node->p.i[0], tg_conv_get_stride_h(&p) and tg_conv_set_stride_h(&p, v),
 * which read and write a params struct being built, so that the place each
 * param is kept in is written in exactly one line and the builders, shape
 * rules and kernels call it by name. TG_PARAM_F is the same for p.f[]. */
#define TG_PARAM_I(family, name, index) TG_PARAM_(family, name, index, int64_t, i)
#define TG_PARAM_F(family, name, index) TG_PARAM_(family, name, index, float, f)
#define TG_PARAM_(family, name, index, type, field)                                                \
    static inline type tg_##family##_##name(const tg_tensor *node)                                 \
    {                                                                                              \
        return node->p.field[index];                                                               \
    }                                                                                              \
    static inline type tg_##family##_get_##name(const tg_node_params *p)                           \
    {                                                                                              \
        return p->field[index];                                                                    \
    }                                                                                              \
    static inline void tg_##family##_set_##name(tg_node_params *p, type v)                         \
    {                                                                                              \
        p->field[index] = v;                                                                       \
    }

/* Append a node of kind `op` with the given inputs and parameters, run its
 * shape rule, name it from the scope and record it. Returns NULL (and records
 * the error in the graph) on a NULL input, a failed shape rule or no memory. */
tg_tensor *tg_node_create(tg_graph *g, tg_op op, int n_in, tg_tensor *const *in,
                          const tg_node_params *p);

/* Record a sticky error in the graph (first one wins); returns NULL. */
tg_tensor *tg_graph_fail(tg_graph *g, tg_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static inline int64_t tg_numel(const tg_tensor *t)
{
    return tg_shape_numel(t->shape);
}
static inline size_t tg_nbytes(const tg_tensor *t)
{
    return (size_t)tg_numel(t) * tg_dtype_size(t->dtype);
}

const char *tg_role_name(tg_role r);

/* A weight update (SGD_UPDATE, ADAM_UPDATE, made by the optimizer): it
 * rewrites the parameter in[0] and its state in[1..n_mutated-1], and reads
 * the gradient in[n_in - 1]. */
static inline bool tg_is_weight_update(const tg_tensor *t)
{
    return (t->flags & TG_NODE_OPTIMIZER) && t->n_mutated > 0;
}

#endif
