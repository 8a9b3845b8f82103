/* tests/onnx/onnx_run.h - running an imported ONNX model once in inference
 * on the cpu target, through the public session API (shared by the ONNX
 * tests; header-only since each test is its own executable). */
#ifndef TG_TESTS_ONNX_RUN_H
#define TG_TESTS_ONNX_RUN_H

#include "tilegraph/onnx.h"
#include "tilegraph/options.h"
#include "tilegraph/session.h"

#include "core/alloc.h"
#include "core/error.h"
#include "onnx/onnx_internal.h"

#include <math.h>
#include <string.h>

/* Whether any op of g reads t (an input only shape arithmetic used is not
 * stored by the program, so there is nothing to write). */
static bool onnx_input_used(tg_graph *g, const tg_tensor *t)
{
    for (int i = 0; i < tg_graph_tensor_count(g); i++) {
        const tg_tensor *n = tg_graph_tensor(g, i);
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] == t)
                return true;
    }
    return false;
}

/* Write input k from d (floats as f32, integers as i32). */
static tg_status onnx_write_input(tg_session *s, const tg_tensor *t, const tg_onnx_data *d)
{
    if (d->n == 0)
        return TG_OK; /* an empty tensor is not stored */
    if (tg_shape_numel(tg_tensor_shape(t)) != d->n)
        return tg_error(TG_ERR_SHAPE, "input '%s' takes %lld values, the data has %lld",
                        tg_tensor_name(t), (long long)tg_shape_numel(tg_tensor_shape(t)),
                        (long long)d->n);
    if (tg_tensor_dtype(t) == TG_F32 && d->f)
        return tg_session_write(s, t, d->f, (size_t)d->n * sizeof(float));
    if (tg_tensor_dtype(t) != TG_I32 || !d->i)
        return tg_error(TG_ERR_DTYPE, "input '%s': data of another type", tg_tensor_name(t));
    int32_t *v = tg_malloc((size_t)(d->n ? d->n : 1) * sizeof *v);
    if (!v)
        return TG_ERR_NOMEM;
    for (int64_t k = 0; k < d->n; k++)
        v[k] = (int32_t)d->i[k];
    tg_status st = tg_session_write(s, t, v, (size_t)d->n * sizeof *v);
    tg_free(v);
    return st;
}

/* Read output t into d->f (n floats): i32 outputs (comparisons, casts to
 * integers, booleans) are read as they are and widened, exactly. */
static tg_status onnx_read_output(tg_session *s, const tg_tensor *t, tg_onnx_data *d)
{
    if (tg_tensor_dtype(t) != TG_I32)
        return tg_session_read(s, t, d->f, (size_t)d->n * sizeof(float));
    int32_t *v = tg_malloc((size_t)d->n * sizeof *v);
    if (!v)
        return TG_ERR_NOMEM;
    tg_status st = tg_session_read(s, t, v, (size_t)d->n * sizeof *v);
    for (int64_t k = 0; st == TG_OK && k < d->n; k++)
        d->f[k] = (float)v[k];
    tg_free(v);
    return st;
}

/* Whether model input `name` feeds a position the importer needs known at
 * import: a batch norm's statistics, scale and bias, Clip's bounds, Pad's
 * constant value, Resize's and Upsample's scales, OneHot's depth and
 * values, Dropout's ratio or Range's bounds (the backend tests feed them as
 * inputs; exported models have initializers or constants). */
static bool onnx_input_is_parameter(const tg_onnx_model *m, const char *name)
{
    const Onnx__GraphProto *g = m->graph;
    for (size_t k = 0; k < g->n_node; k++) {
        const Onnx__NodeProto *n = g->node[k];
        bool bn = !strcmp(n->op_type, "BatchNormalization"),
             clip = !strcmp(n->op_type, "Clip") || !strcmp(n->op_type, "Pad") ||
                    !strcmp(n->op_type, "Resize") || !strcmp(n->op_type, "Upsample") ||
                    !strcmp(n->op_type, "OneHot") || !strcmp(n->op_type, "Dropout");
        for (size_t i = 1; (bn || clip) && i < n->n_input; i++)
            if (!strcmp(n->input[i], name))
                return true;
        for (size_t i = 0; !strcmp(n->op_type, "Range") && i < n->n_input; i++)
            if (!strcmp(n->input[i], name))
                return true;
    }
    return false;
}

/* Build m (inference, batch for a dynamic batch dim), feed inputs, run once
 * and read every output into outs[k] (float, with the output's shape).
 * Integer inputs (shape and axes) and the inputs onnx_input_is_parameter
 * names are bound as constants. *built
 * says whether the failure, if any, came after the import. */
static tg_status onnx_run(const tg_onnx_model *m, int64_t batch, const tg_onnx_data *inputs,
                          int n_in, tg_onnx_data *outs, int *n_out, bool *built)
{
    const tg_onnx_data *bound[TG_ONNX_MAX_IO] = {NULL};
    for (int k = 0; k < n_in && k < TG_ONNX_MAX_IO; k++)
        bound[k] =
            inputs[k].i || onnx_input_is_parameter(m, tg_onnx_input(m, k).name) ? &inputs[k] : NULL;
    *built = false;
    tg_graph *g = tg_graph_create();
    tg_graph_set_training(g, false);
    tg_onnx_build_config c = {.batch = batch};
    tg_onnx_outputs io;
    tg_session *s = NULL;
    tg_options *o = tg_options_create();
    tg_options_set_int(o, "threadsPerDevice", 1);
    tg_status st = n_in == tg_onnx_input_count(m)
                       ? tg_onnx_build_bound(m, g, &c, bound, &io)
                       : tg_error(TG_ERR_INVALID_ARG, "the model has %d inputs, the test data %d",
                                  tg_onnx_input_count(m), n_in);
    *built = st == TG_OK;
    if (st == TG_OK)
        st = tg_session_create(g, o, &s);
    for (int k = 0; st == TG_OK && k < n_in; k++)
        if (io.inputs[k] && onnx_input_used(g, io.inputs[k]))
            st = onnx_write_input(s, io.inputs[k], &inputs[k]);
    if (st == TG_OK)
        st = tg_session_run(s);
    *n_out = 0;
    for (int k = 0; st == TG_OK && k < io.n_outputs; k++) {
        tg_shape sh = tg_tensor_shape(io.outputs[k]);
        tg_onnx_data *d = &outs[k];
        memset(d, 0, sizeof *d);
        d->elem_type = 1;
        d->ndim = sh.ndim;
        memcpy(d->dim, sh.dim, sizeof d->dim);
        d->n = tg_shape_numel(sh);
        d->f = tg_malloc((size_t)(d->n ? d->n : 1) * sizeof(float));
        if (!d->f)
            st = TG_ERR_NOMEM;
        else if (d->n > 0) /* an empty output has nothing to read */
            st = onnx_read_output(s, io.outputs[k], d);
        (*n_out)++;
    }
    tg_session_destroy(s);
    tg_options_destroy(o);
    tg_graph_destroy(g);
    return st;
}

/* numpy.allclose: |a - b| <= atol + rtol * |b|, shapes equal; the worst
 * element's excess in *worst (for messages). */
static bool onnx_allclose(const tg_onnx_data *a, const tg_onnx_data *b, double rtol, double atol,
                          double *worst)
{
    *worst = 0;
    if (a->n != b->n || !a->f || !b->f)
        return false;
    bool ok = true;
    for (int64_t k = 0; k < a->n; k++) {
        double d = fabs((double)a->f[k] - (double)b->f[k]);
        double lim = atol + rtol * fabs((double)b->f[k]);
        bool nan_both = isnan(a->f[k]) && isnan(b->f[k]);
        if (!(d <= lim) && !nan_both) {
            ok = false;
            if (!(d - lim <= *worst))
                *worst = d - lim;
        }
    }
    return ok;
}

#endif
