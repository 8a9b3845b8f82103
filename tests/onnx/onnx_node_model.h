/* tests/onnx/onnx_node_model.h - a model of one ONNX node made in memory
 * (header-only: each test is its own executable), and gradient and kernel
 * checks of what the importer builds for it: the node's float inputs are
 * the checker's parameters (given to tg_onnx_build as the model's inputs),
 * its integer inputs constant initializers.
 *
 *     onnx_node nd = {.op_type = "ScatterElements", .opset = 13, .n_outputs = 1,
 *                     .in = {F32("data", 2, 3, 3), INTS("idx", idx, 2, 2, 3), ...},
 *                     .attr = {INT("axis", 1)}};
 *     onnx_node_check("scatter", &nd, 1e-6);
 */
#ifndef TG_TESTS_ONNX_NODE_MODEL_H
#define TG_TESTS_ONNX_NODE_MODEL_H

#include "tg_test.h"

#include "onnx/onnx_internal.h"
#include "tilegraph/session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ONNX_NODE_MAX_IN = 4, ONNX_NODE_MAX_ATTR = 6 };

/* ONNX_I64_IN, ONNX_BOOL_IN: an int64 or bool input of the model (indices
 * computed at run time, a padding mask); onnx_node_build and the checks
 * take F32 inputs only. */
typedef enum { ONNX_F32, ONNX_INTS, ONNX_I64_IN, ONNX_BOOL_IN } onnx_in_kind;
typedef enum { ONNX_INT, ONNX_INTS_ATTR, ONNX_FLOAT, ONNX_STRING } onnx_attr_kind;

typedef struct onnx_node_input {
    const char *name; /* NULL: no more inputs; "" an absent optional input */
    onnx_in_kind kind;
    int ndim;
    int64_t dim[5];
    const int64_t *values; /* ONNX_INTS: an int64 initializer with these values */
} onnx_node_input;

typedef struct onnx_node_attr {
    const char *name; /* NULL: no more */
    onnx_attr_kind kind;
    int64_t i;
    const int64_t *ints;
    int n_ints;
    float f;
    const char *s;
} onnx_node_attr;

typedef struct onnx_node {
    const char *op_type;
    int opset;
    int n_outputs;
    onnx_node_input in[ONNX_NODE_MAX_IN];
    onnx_node_attr attr[ONNX_NODE_MAX_ATTR];
    int output;   /* which output the checks differentiate */
    float lo, hi; /* the float inputs' uniform range; U(-1, 1) when both are 0 */
} onnx_node;

static inline int64_t onnx_node_numel(const onnx_node_input *in)
{
    int64_t n = 1;
    for (int d = 0; d < in->ndim; d++)
        n *= in->dim[d];
    return n;
}

/* Inputs and attributes: F32("x", ndim, dims...), INTS("i", values, ndim,
 * dims...), INT("axis", 1), INTS_ATTR("perm", values, n), FLOAT("alpha",
 * 0.5f), STR("mode", "add"). */
#define F32(n, nd, ...)                                                                            \
    {                                                                                              \
        .name = n, .kind = ONNX_F32, .ndim = nd, .dim = { __VA_ARGS__ }                            \
    }
#define INTS(n, v, nd, ...)                                                                        \
    {                                                                                              \
        .name = n, .kind = ONNX_INTS, .ndim = nd, .dim = {__VA_ARGS__}, .values = v                \
    }
#define I64_IN(n, nd, ...)                                                                         \
    {                                                                                              \
        .name = n, .kind = ONNX_I64_IN, .ndim = nd, .dim = { __VA_ARGS__ }                         \
    }
#define BOOL_IN(n, nd, ...)                                                                        \
    {                                                                                              \
        .name = n, .kind = ONNX_BOOL_IN, .ndim = nd, .dim = { __VA_ARGS__ }                        \
    }
#define INT(n, v)                                                                                  \
    {                                                                                              \
        .name = n, .kind = ONNX_INT, .i = v                                                        \
    }
#define INTS_ATTR(n, v, c)                                                                         \
    {                                                                                              \
        .name = n, .kind = ONNX_INTS_ATTR, .ints = v, .n_ints = c                                  \
    }
#define FLOAT(n, v)                                                                                \
    {                                                                                              \
        .name = n, .kind = ONNX_FLOAT, .f = v                                                      \
    }
#define STR(n, v)                                                                                  \
    {                                                                                              \
        .name = n, .kind = ONNX_STRING, .s = v                                                     \
    }

/* The model, packed and loaded (NULL and a test failure if it does not
 * load). */
static inline tg_onnx_model *onnx_node_model(const onnx_node *nd)
{
    Onnx__ModelProto model = ONNX__MODEL_PROTO__INIT;
    Onnx__GraphProto graph = ONNX__GRAPH_PROTO__INIT;
    Onnx__OperatorSetIdProto opset = ONNX__OPERATOR_SET_ID_PROTO__INIT, *opsets[1] = {&opset};
    Onnx__NodeProto node = ONNX__NODE_PROTO__INIT, *nodes[1] = {&node};
    Onnx__ValueInfoProto vi[ONNX_NODE_MAX_IN + 4], *ins[ONNX_NODE_MAX_IN], *outs[4];
    Onnx__TypeProto ty[ONNX_NODE_MAX_IN];
    Onnx__TypeProto__Tensor tt[ONNX_NODE_MAX_IN];
    Onnx__TensorShapeProto sh[ONNX_NODE_MAX_IN];
    Onnx__TensorShapeProto__Dimension dims[ONNX_NODE_MAX_IN][5], *dim_ptrs[ONNX_NODE_MAX_IN][5];
    Onnx__TensorProto init[ONNX_NODE_MAX_IN], *inits[ONNX_NODE_MAX_IN];
    Onnx__AttributeProto at[ONNX_NODE_MAX_ATTR], *ats[ONNX_NODE_MAX_ATTR];
    char *in_names[ONNX_NODE_MAX_IN], *out_names[4];
    static char out_buf[4][8];
    size_t n_in = 0, n_graph_in = 0, n_init = 0, n_attr = 0;
    opset.domain = "";
    opset.has_version = 1;
    opset.version = nd->opset;
    model.n_opset_import = 1;
    model.opset_import = opsets;
    model.has_ir_version = 1;
    model.ir_version = 8;
    model.graph = &graph;
    for (; n_in < ONNX_NODE_MAX_IN && nd->in[n_in].name; n_in++) {
        const onnx_node_input *in = &nd->in[n_in];
        in_names[n_in] = (char *)in->name;
        if (!in->name[0])
            continue;
        if (in->kind == ONNX_INTS) {
            Onnx__TensorProto *t = &init[n_init];
            onnx__tensor_proto__init(t);
            t->name = (char *)in->name;
            t->has_data_type = 1;
            t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
            t->n_dims = (size_t)in->ndim;
            t->dims = (int64_t *)in->dim;
            t->n_int64_data = (size_t)onnx_node_numel(in);
            t->int64_data = (int64_t *)in->values;
            inits[n_init++] = t;
            continue;
        }
        size_t k = n_graph_in;
        onnx__value_info_proto__init(&vi[k]);
        onnx__type_proto__init(&ty[k]);
        onnx__type_proto__tensor__init(&tt[k]);
        onnx__tensor_shape_proto__init(&sh[k]);
        for (int d = 0; d < in->ndim; d++) {
            onnx__tensor_shape_proto__dimension__init(&dims[k][d]);
            dims[k][d].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            dims[k][d].dim_value = in->dim[d];
            dim_ptrs[k][d] = &dims[k][d];
        }
        sh[k].n_dim = (size_t)in->ndim;
        sh[k].dim = dim_ptrs[k];
        tt[k].has_elem_type = 1;
        tt[k].elem_type = in->kind == ONNX_I64_IN    ? ONNX__TENSOR_PROTO__DATA_TYPE__INT64
                          : in->kind == ONNX_BOOL_IN ? ONNX__TENSOR_PROTO__DATA_TYPE__BOOL
                                                     : ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
        tt[k].shape = &sh[k];
        ty[k].value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
        ty[k].tensor_type = &tt[k];
        vi[k].name = (char *)in->name;
        vi[k].type = &ty[k];
        ins[n_graph_in++] = &vi[k];
    }
    for (int k = 0; k < nd->n_outputs; k++) {
        snprintf(out_buf[k], sizeof out_buf[k], "y%d", k);
        out_names[k] = out_buf[k];
        onnx__value_info_proto__init(&vi[ONNX_NODE_MAX_IN + k]);
        vi[ONNX_NODE_MAX_IN + k].name = out_names[k];
        outs[k] = &vi[ONNX_NODE_MAX_IN + k];
    }
    for (; n_attr < ONNX_NODE_MAX_ATTR && nd->attr[n_attr].name; n_attr++) {
        const onnx_node_attr *a = &nd->attr[n_attr];
        Onnx__AttributeProto *p = &at[n_attr];
        onnx__attribute_proto__init(p);
        p->name = (char *)a->name;
        p->has_type = 1;
        switch (a->kind) {
        case ONNX_INT:
            p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
            p->has_i = 1;
            p->i = a->i;
            break;
        case ONNX_INTS_ATTR:
            p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
            p->n_ints = (size_t)a->n_ints;
            p->ints = (int64_t *)a->ints;
            break;
        case ONNX_FLOAT:
            p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
            p->has_f = 1;
            p->f = a->f;
            break;
        case ONNX_STRING:
            p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
            p->has_s = 1;
            p->s.data = (uint8_t *)a->s;
            p->s.len = strlen(a->s);
            break;
        }
        ats[n_attr] = p;
    }
    node.op_type = (char *)nd->op_type;
    node.name = "/node";
    node.n_input = n_in;
    node.input = in_names;
    node.n_output = (size_t)nd->n_outputs;
    node.output = out_names;
    node.n_attribute = n_attr;
    node.attribute = ats;
    graph.n_node = 1;
    graph.node = nodes;
    graph.n_input = n_graph_in;
    graph.input = ins;
    graph.n_output = (size_t)nd->n_outputs;
    graph.output = outs;
    graph.n_initializer = n_init;
    graph.initializer = inits;
    size_t n = onnx__model_proto__get_packed_size(&model);
    uint8_t *buf = malloc(n + 1);
    onnx__model_proto__pack(&model, buf);
    tg_onnx_model *m = NULL;
    tg_status s = tg_onnx_load_buffer(buf, n, nd->op_type, &m);
    free(buf);
    if (s != TG_OK)
        tg_test_fail(__FILE__, __LINE__, "%s: %s", nd->op_type, tg_error_message());
    return m;
}

/* Build the node into g with tg_param leaves for its float inputs; the
 * output it checks (NULL and the importer's message on failure). */
static inline tg_tensor *onnx_node_build(tg_graph *g, void *ctx)
{
    const onnx_node *nd = ctx;
    tg_onnx_model *m = onnx_node_model(nd);
    if (!m)
        return NULL;
    tg_tensor *x[ONNX_NODE_MAX_IN];
    int n = 0;
    for (int k = 0; k < ONNX_NODE_MAX_IN && nd->in[k].name; k++) {
        const onnx_node_input *in = &nd->in[k];
        if (in->name[0] && in->kind == ONNX_F32)
            x[n++] = tg_param(g, in->name, tg_shape_of(in->ndim, in->dim),
                              (tg_init){TG_INIT_UNIFORM, nd->lo || nd->hi ? nd->lo : -1,
                                        nd->lo || nd->hi ? nd->hi : 1});
    }
    tg_onnx_build_config c = {.inputs = x, .n_inputs = n};
    tg_onnx_outputs io;
    tg_status s = tg_onnx_build(m, g, &c, &io);
    tg_onnx_model_destroy(m);
    if (s != TG_OK) {
        tg_test_fail(__FILE__, __LINE__, "%s: %s", nd->op_type, tg_error_message());
        return NULL;
    }
    return io.outputs[nd->output];
}

/* The built graph's gradient against finite differences and its fast
 * kernels against the reference (1 and 2 threads). */
static inline void onnx_node_check(const char *label, const onnx_node *nd, double rtol)
{
    tg_check_opts o = {.tol = 1e-5};
    tg_gradcheck(label, onnx_node_build, (void *)nd, o);
    for (int threads = 1; threads <= 2; threads++)
        tg_check_kernels(label, onnx_node_build, (void *)nd, threads, rtol, o);
}

/* The message building the node gives (a refusal), "" when it builds. */
static inline const char *onnx_node_refusal(const onnx_node *nd)
{
    static char msg[1024];
    msg[0] = '\0';
    tg_onnx_model *m = onnx_node_model(nd);
    if (!m)
        return msg;
    tg_graph *g = tg_graph_create();
    tg_onnx_build_config c = {.batch = 1};
    tg_onnx_outputs io;
    if (tg_onnx_build(m, g, &c, &io) != TG_OK)
        snprintf(msg, sizeof msg, "%s", tg_error_message());
    tg_graph_destroy(g);
    tg_onnx_model_destroy(m);
    return msg;
}

#endif
