/* tests/graph/test_autodiff.c - how autodiff accumulates the gradient of a
 * tensor used many times (src/graph/autodiff.c), above all a tensor cut into
 * slices: the slices' gradients are joined by concatenation instead of
 * summed as zero-padded tensors of the full size.
 *
 * Every case (contiguous pieces, gaps, overlaps, pieces mixed with whole
 * uses and slices along another axis, more pieces than one concat takes)
 * is checked against finite differences, and bit for bit against the
 * padded sums autodiff made before (tg_autodiff_opts.pad_slices): in double
 * through the reference interpreter and in f32 through a compiled session.
 * The backward pass of T slices has O(T) nodes and bytes (it had O(T^2)
 * bytes), and an unrolled LSTM (tests/onnx/fixtures/rnn_lstm_long.onnx, 20
 * steps both ways) trains to the same bits either way.

 * TG_TEST_LABELS: quick */
#include "tg_test.h"

#include "tilegraph/onnx.h"
#include "tilegraph/optim.h"
#include "tilegraph/options.h"
#include "tilegraph/session.h"

#include "core/error.h"
#include "graph/autodiff.h"
#include "runtime/interp.h"

#include <stdlib.h>
#include <string.h>

#define FIXTURES TG_SOURCE_DIR "/tests/onnx/fixtures/"

/* ---- the cases -------------------------------------------------------------- */

enum { MAX_USES = 24, WHOLE = -1 };

/* A parameter w of shape dim, used in order by slices [start, end) along
 * axis, or as it is (axis WHOLE). */
typedef struct slice_use {
    int axis;
    int64_t start, end;
} slice_use;

typedef struct slice_case {
    const char *name;
    int64_t dim[3];
    int n;
    slice_use use[MAX_USES];
} slice_case;

static const slice_case CASES[] = {
    {"contiguous, width 1",
     {3, 8, 2},
     8,
     {{1, 0, 1}, {1, 1, 2}, {1, 2, 3}, {1, 3, 4}, {1, 4, 5}, {1, 5, 6}, {1, 6, 7}, {1, 7, 8}}},
    {"contiguous, widths and order mixed",
     {3, 12, 2},
     4,
     {{1, 4, 9}, {1, 0, 3}, {1, 9, 12}, {1, 3, 4}}},
    {"gaps at the start, between and at the end",
     {3, 12, 2},
     3,
     {{1, 1, 3}, {1, 4, 5}, {1, 7, 10}}},
    {"overlaps and repeats",
     {3, 12, 2},
     6,
     {{1, 0, 4}, {1, 2, 6}, {1, 2, 6}, {1, 5, 12}, {1, 0, 12}, {1, 3, 4}}},
    {"mixed with whole uses and another axis",
     {3, 12, 2},
     8,
     {{1, 0, 4},
      {WHOLE, 0, 0},
      {1, 4, 8},
      {1, 8, 12},
      {0, 0, 1},
      {0, 1, 3},
      {1, 6, 10},
      {WHOLE, 0, 0}}},
    {"a single slice, as before", {3, 12, 2}, 2, {{1, 2, 7}, {WHOLE, 0, 0}}},
    {"an empty slice among others", {3, 12, 2}, 3, {{1, 0, 5}, {1, 5, 5}, {1, 5, 12}}},
    {"20 pieces with gaps: a tree of concats",
     {1, 41, 1},
     20,
     {{1, 1, 2},   {1, 3, 4},   {1, 5, 6},   {1, 7, 8},   {1, 9, 10},  {1, 11, 12}, {1, 13, 14},
      {1, 15, 16}, {1, 17, 18}, {1, 19, 20}, {1, 21, 22}, {1, 23, 24}, {1, 25, 26}, {1, 27, 28},
      {1, 29, 30}, {1, 31, 32}, {1, 33, 34}, {1, 35, 36}, {1, 37, 38}, {1, 39, 40}}},
};
#define N_CASES ((int)(sizeof CASES / sizeof CASES[0]))

/* sum over uses k of (k + 1) * sum(tanh(u) * u), u the used part of w: each
 * element's gradient depends on its value and on which uses read it. */
static tg_tensor *build_case(tg_graph *g, void *ctx)
{
    const slice_case *c = ctx;
    tg_tensor *w = tg_param(g, "w", tg_shape3(c->dim[0], c->dim[1], c->dim[2]),
                            (tg_init){TG_INIT_UNIFORM, -1, 1});
    tg_tensor *sum = NULL;
    for (int k = 0; k < c->n; k++) {
        const slice_use *u = &c->use[k];
        tg_tensor *part = u->axis == WHOLE ? w : tg_slice(g, w, u->axis, u->start, u->end);
        tg_tensor *term = tg_reduce_sum(g, tg_mul(g, tg_tanh(g, part), part), 7u, false);
        term = tg_scale(g, term, (float)(k + 1), 0.0f);
        sum = sum ? tg_add(g, sum, term) : term;
    }
    return tg_reshape(g, sum, tg_shape1(1));
}

/* The case's graph with its loss differentiated by the given rule. */
static tg_graph *case_graph(const slice_case *c, bool pad, tg_tensor **w)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *out = build_case(g, (void *)c);
    tg_autodiff_opts o = {.pad_slices = pad};
    TG_CHECK_OK(tg_graph_backward_opts(g, tg_reduce_sum(g, out, 1u, false), &o));
    *w = tg_graph_find(g, "w");
    return g;
}

static void test_gradients_match_finite_differences(void)
{
    for (int k = 0; k < N_CASES; k++) {
        const slice_case *c = &CASES[k];
        tg_check_opts o = {.max_elems = (int)(c->dim[0] * c->dim[1] * c->dim[2])};
        TG_CHECK(tg_gradcheck(c->name, build_case, (void *)c, o));
    }
}

/* The gradient of w through the reference interpreter, in double. */
static double *interp_grad(const slice_case *c, bool pad)
{
    tg_tensor *w = NULL;
    tg_graph *g = case_graph(c, pad, &w);
    tg_interp *ip = NULL;
    double *grad = NULL;
    TG_CHECK_OK(tg_interp_create(g, 7, &ip));
    if (ip && w && w->grad) {
        TG_CHECK_OK(tg_interp_run(ip, 0));
        grad = malloc((size_t)tg_numel(w) * sizeof *grad);
        memcpy(grad, tg_interp_data(ip, w->grad), (size_t)tg_numel(w) * sizeof *grad);
    }
    tg_interp_destroy(ip);
    tg_graph_destroy(g);
    return grad;
}

/* Values compared with ==: equal bits but for the sign of zero (the padded
 * sum turns -0 into +0). */
static void test_same_values_as_padded_sums_in_double(void)
{
    for (int k = 0; k < N_CASES; k++) {
        const slice_case *c = &CASES[k];
        double *joined = interp_grad(c, false), *padded = interp_grad(c, true);
        int64_t n = c->dim[0] * c->dim[1] * c->dim[2], differ = 0;
        for (int64_t i = 0; joined && padded && i < n; i++)
            differ += !(joined[i] == padded[i]);
        if (!joined || !padded || differ)
            tg_test_fail(__FILE__, __LINE__, "%s: %lld of %lld gradient values differ", c->name,
                         (long long)differ, (long long)n);
        free(joined);
        free(padded);
    }
}

/* ---- the same in f32, compiled ---------------------------------------------- */

/* Run g once in a session (one thread, seed 1) after writing `n_in` inputs
 * from `in`, and read the gradient of every parameter, in creation order,
 * into one array (*n_out floats; free it). The gradients are read from
 * SGD's momentum buffers, which the first step sets to the gradient as it
 * is (a session streams out only forward values). */
static float *session_grads(tg_graph *g, tg_tensor *const *inputs, const float *const *in, int n_in,
                            int64_t *n_out)
{
    tg_optimizer sgd = tg_optimizer_sgd(0.01f, 0.5f);
    TG_CHECK_OK(tg_graph_add_optimizer(g, &sgd));
    int64_t total = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (tg_is_weight_update(g->nodes[i]))
            total += tg_numel(g->nodes[i]->in[1]);
    *n_out = total;
    float *out = calloc((size_t)(total ? total : 1), sizeof *out);
    tg_options *o = tg_options_create();
    TG_CHECK_OK(tg_options_set_int(o, "threadsPerDevice", 1));
    TG_CHECK_OK(tg_options_set_int(o, "randomSeed", 1));
    tg_session *s = NULL;
    tg_status st = tg_session_create(g, o, &s);
    TG_CHECK_OK(st);
    for (int k = 0; st == TG_OK && k < n_in; k++)
        TG_CHECK_OK(st = tg_session_write(s, inputs[k], in[k], tg_nbytes(inputs[k])));
    if (st == TG_OK)
        TG_CHECK_OK(st = tg_session_run(s));
    int64_t at = 0;
    for (int i = 0; st == TG_OK && i < g->n_nodes; i++)
        if (tg_is_weight_update(g->nodes[i])) {
            const tg_tensor *buf = g->nodes[i]->in[1];
            TG_CHECK_OK(st = tg_session_read(s, buf, out + at, tg_nbytes(buf)));
            at += tg_numel(buf);
        }
    tg_session_destroy(s);
    tg_options_destroy(o);
    return out;
}

/* How many of n floats differ in bits, a zero of either sign counting as
 * one value; the first difference goes to *first. */
static int64_t bits_differ(const float *a, const float *b, int64_t n, int64_t *first)
{
    int64_t differ = 0;
    *first = -1;
    for (int64_t i = 0; i < n; i++) {
        bool same = memcmp(&a[i], &b[i], sizeof *a) == 0 || (a[i] == 0 && b[i] == 0);
        if (!same && differ++ == 0)
            *first = i;
    }
    return differ;
}

static void test_same_bits_as_padded_sums_in_f32(void)
{
    for (int k = 0; k < N_CASES; k++) {
        const slice_case *c = &CASES[k];
        tg_tensor *w = NULL;
        int64_t n[2] = {0, 0}, first;
        float *grads[2];
        for (int pad = 0; pad < 2; pad++) {
            tg_graph *g = case_graph(c, pad, &w);
            grads[pad] = session_grads(g, NULL, NULL, 0, &n[pad]);
            tg_graph_destroy(g);
        }
        int64_t differ = n[0] == n[1] ? bits_differ(grads[0], grads[1], n[0], &first) : -1;
        double norm = 0;
        for (int64_t i = 0; i < n[0]; i++)
            norm += fabs(grads[0][i]);
        TG_CHECK(norm > 0.1); /* the gradients are not all zero */
        if (n[0] == 0 || differ != 0)
            tg_test_fail(__FILE__, __LINE__, "%s: %lld of %lld f32 gradient values differ", c->name,
                         (long long)differ, (long long)n[0]);
        free(grads[0]);
        free(grads[1]);
    }
}

/* ---- what the backward pass costs ------------------------------------------- */

typedef struct backward_cost {
    int nodes, slice_bwds, concats;
    double bytes; /* written by the backward ops */
} backward_cost;

static backward_cost cost_of(const tg_graph *g)
{
    backward_cost c = {0};
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        if (!(t->flags & TG_NODE_BACKWARD))
            continue;
        c.nodes++;
        c.bytes += (double)tg_nbytes(t);
        c.slice_bwds += t->op == TG_OP_SLICE_BWD;
        c.concats += t->op == TG_OP_CONCAT;
    }
    return c;
}

/* An unrolled recurrence's shape: x [T * 4, 16] projected once, step t
 * reads rows [4t, 4t + 4) and carries a state through them. */
static backward_cost steps_cost(int T, bool pad, int64_t *full_bytes)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_param(g, "x", tg_shape2(4 * T, 16), (tg_init){TG_INIT_UNIFORM, -1, 1});
    tg_tensor *h = NULL;
    for (int t = 0; t < T; t++) {
        tg_tensor *z = tg_tanh(g, tg_slice(g, x, 0, 4 * t, 4 * t + 4));
        h = h ? tg_mul(g, h, z) : z;
    }
    tg_tensor *loss = tg_reduce_sum(g, h, 3u, false);
    *full_bytes = (int64_t)tg_nbytes(x);
    backward_cost before = cost_of(g);
    tg_autodiff_opts o = {.pad_slices = pad};
    TG_CHECK_OK(tg_graph_backward_opts(g, loss, &o));
    backward_cost c = cost_of(g);
    TG_CHECK(before.nodes == 0);
    tg_graph_destroy(g);
    return c;
}

/* Per step, the joined backward costs the same at T = 8 and T = 64 (up to
 * one more level of the concat tree, which copies x's gradient once); the
 * padded one grows with T. */
static void test_backward_is_linear_in_the_number_of_slices(void)
{
    const int Ts[] = {8, 16, 32, 64};
    double per_step0 = 0;
    for (int k = 0; k < 4; k++) {
        int T = Ts[k];
        int64_t full;
        backward_cost j = steps_cost(T, false, &full), p = steps_cost(T, true, &full);
        double per_step = j.bytes / T, piece = (double)full / T;
        if (k == 0)
            per_step0 = per_step;
        printf("  T = %2d: joined %4d nodes, %8.0f bytes (%d concats); padded %4d nodes, %9.0f "
               "bytes (%d slice_bwd)\n",
               T, j.nodes, j.bytes, j.concats, p.nodes, p.bytes, p.slice_bwds);
        /* no slice_bwd: the pieces tile x; concats: T/8 + T/64 + ... */
        TG_CHECK(j.slice_bwds == 0);
        TG_CHECK(j.concats <= T / 7 + 1);
        TG_CHECK(j.nodes <= p.nodes);
        TG_CHECK(per_step <= per_step0 + 2 * piece);
        /* the padded sum: T slice_bwds and T - 1 adds of x's size */
        TG_CHECK(p.slice_bwds == T);
        TG_CHECK(p.bytes >= (2.0 * T - 1) * (double)full);
    }
}

/* ---- an unrolled LSTM --------------------------------------------------------- */

/* rnn_lstm_long (bidirectional, peepholes, initial states, 20 steps: each
 * direction's per-step slices of the projected inputs make a run of 20,
 * the two directions' runs overlap), loss = sum(Y * r) + sum(Y_h) + sum(Y_c);
 * the gradients of W, R, B, P and the initial states. */
static float *lstm_grads(bool pad, int64_t *n)
{
    tg_onnx_model *m = NULL;
    TG_CHECK_OK(tg_onnx_load(FIXTURES "rnn_lstm_long.onnx", &m));
    if (!m)
        return NULL;
    tg_graph *g = tg_graph_create();
    tg_onnx_outputs io;
    tg_status s = tg_onnx_build(m, g, NULL, &io);
    TG_CHECK_OK(s);
    tg_onnx_model_destroy(m);
    float *grads = NULL;
    if (s == TG_OK && io.n_outputs == 3) {
        tg_tensor *y = io.outputs[0];
        float *r = malloc((size_t)tg_numel(y) * sizeof *r);
        for (int64_t k = 0; k < tg_numel(y); k++)
            r[k] = (float)((k * 37 % 101) - 50) / 50.0f;
        tg_tensor *loss = tg_reduce_sum(g, tg_mul(g, y, tg_constant_data(g, "r", y->shape, r)),
                                        (1u << y->shape.ndim) - 1, false);
        for (int k = 1; k < 3; k++)
            loss = tg_add(
                g, loss,
                tg_reduce_sum(g, io.outputs[k], (1u << io.outputs[k]->shape.ndim) - 1, false));
        free(r);
        tg_autodiff_opts o = {.pad_slices = pad};
        TG_CHECK_OK(tg_graph_backward_opts(g, loss, &o));
        tg_tensor *x = io.inputs[0];
        float *xv = malloc(tg_nbytes(x));
        for (int64_t k = 0; k < tg_numel(x); k++)
            xv[k] = (float)((k * 53 % 97) - 48) / 32.0f;
        const float *in[1] = {xv};
        grads = session_grads(g, &x, in, 1, n);
        free(xv);
        backward_cost c = cost_of(g);
        printf("  %s: %d backward nodes, %.0f bytes, %d slice_bwd, %d concats\n",
               pad ? "padded" : "joined", c.nodes, c.bytes, c.slice_bwds, c.concats);
    }
    tg_graph_destroy(g);
    return grads;
}

static void test_unrolled_lstm_same_bits_as_padded_sums(void)
{
    int64_t n[2] = {0, 0}, first = -1;
    float *joined = lstm_grads(false, &n[0]), *padded = lstm_grads(true, &n[1]);
    TG_CHECK(joined && padded && n[0] == n[1] && n[0] > 0);
    if (joined && padded && n[0] == n[1]) {
        int64_t differ = bits_differ(joined, padded, n[0], &first);
        if (differ)
            tg_test_fail(__FILE__, __LINE__,
                         "%lld of %lld gradient values differ, first [%lld]: "
                         "%.9g joined, %.9g padded",
                         (long long)differ, (long long)n[0], (long long)first, joined[first],
                         padded[first]);
        double norm = 0;
        for (int64_t k = 0; k < n[0]; k++)
            norm += fabs(joined[k]);
        printf("  %lld gradient values, sum of magnitudes %g\n", (long long)n[0], norm);
        TG_CHECK(norm > 1); /* the gradients are not all zero */
    }
    free(joined);
    free(padded);
}

int main(void)
{
    TG_RUN(test_gradients_match_finite_differences);
    TG_RUN(test_same_values_as_padded_sums_in_double);
    TG_RUN(test_same_bits_as_padded_sums_in_f32);
    TG_RUN(test_backward_is_linear_in_the_number_of_slices);
    TG_RUN(test_unrolled_lstm_same_bits_as_padded_sums);
    return tg_test_finish();
}
