/* tests/ops/test_gather.c - GATHER (embedding) and its scatter-add gradient,
 * CAST, COMPARE, LOGICAL and WHERE: fast kernels (the gradients' too) against
 * the reference at 1 and 2 threads, gradients against finite differences, negative and
 * out-of-range indices, and the inputs each op refuses. */
#include "backend/backend.h"
#include "tg_test.h"

#include "compile/program.h"
#include "core/bf16.h"
#include "ops/broadcast.h"
#include "ops/gather.h"
#include "ops/op.h"
#include "runtime/interp.h"
#include "runtime/session_internal.h"
#include "tilegraph/session.h"

#include <math.h>
#include <string.h>

typedef struct {
    tg_shape data, idx;
    int axis;
} gather_case;

/* ids are i32 inputs the checkers fill with (7k + 3) % int_range, int_range
 * being the gathered axis's length */
static tg_tensor *build_gather(tg_graph *g, void *ctx)
{
    const gather_case *c = ctx;
    tg_tensor *table = tg_param(g, "table", c->data, (tg_init){TG_INIT_UNIFORM, -1, 1});
    tg_tensor *ids = tg_input(g, "ids", TG_I32, c->idx);
    return tg_gather(g, table, ids, c->axis);
}

static const gather_case gathers[] = {
    {{2, {7, 5}}, {2, {3, 4}}, 0},         /* embedding, repeated ids */
    {{3, {3, 6, 4}}, {2, {2, 2}}, 1},      /* a middle axis */
    {{3, {2, 3, 5}}, {1, {4}}, 2},         /* the last axis */
    {{3, {2, 3, 5}}, {1, {4}}, -1},        /* negative axis */
    {{2, {9, 3}}, {0, {0}}, 0},            /* a scalar index: one row, no dim */
    {{2, {50, 40}}, {2, {64, 90}}, 0},     /* large enough for two threads */
    {{3, {6, 300, 37}}, {2, {2, 150}}, 1}, /* outer > 1, odd columns */
};
#define N_GATHERS (int)(sizeof gathers / sizeof gathers[0])

static void test_gather_kernels_and_gradients(void)
{
    for (int i = 0; i < N_GATHERS; i++) {
        gather_case c = gathers[i];
        int axis = c.axis < 0 ? c.axis + c.data.ndim : c.axis;
        tg_check_opts o = {.int_range = (int)c.data.dim[axis], .max_elems = 40};
        char label[64];
        snprintf(label, sizeof label, "gather case %d", i);
        if (tg_shape_numel(c.data) < 1000)
            tg_gradcheck(label, build_gather, &c, o);
        for (int threads = 1; threads <= 2; threads++)
            tg_check_kernels(label, build_gather, &c, threads, 1e-6, o);
    }
}

/* Scatter-add (gather's gradient op as an op of its own): against the
 * reference and its gradient (a gather) against finite differences. */
static tg_tensor *build_scatter(tg_graph *g, void *ctx)
{
    const gather_case *c = ctx;
    tg_tensor *ids = tg_input(g, "ids", TG_I32, c->idx);
    tg_shape us = c->data;
    int axis = c->axis < 0 ? c->axis + c->data.ndim : c->axis;
    us.ndim = c->data.ndim - 1 + c->idx.ndim;
    for (int d = 0, k = 0; d < c->data.ndim; d++) {
        if (d != axis) {
            us.dim[k++] = c->data.dim[d];
            continue;
        }
        for (int j = 0; j < c->idx.ndim; j++)
            us.dim[k++] = c->idx.dim[j];
    }
    tg_tensor *u = tg_param(g, "updates", us, (tg_init){TG_INIT_UNIFORM, -1, 1});
    return tg_scatter_add(g, u, ids, c->axis, c->data);
}

static void test_scatter_add(void)
{
    for (int i = 0; i < N_GATHERS; i++) {
        gather_case c = gathers[i];
        int axis = c.axis < 0 ? c.axis + c.data.ndim : c.axis;
        tg_check_opts o = {.int_range = (int)c.data.dim[axis], .max_elems = 40};
        char label[64];
        snprintf(label, sizeof label, "scatter_add case %d", i);
        if (tg_shape_numel(c.data) < 1000)
            tg_gradcheck(label, build_scatter, &c, o);
        for (int threads = 1; threads <= 2; threads++)
            tg_check_kernels(label, build_scatter, &c, threads, 1e-6, o);
    }
    tg_graph *g = tg_graph_create();
    tg_tensor *u = tg_input(g, "u", TG_F32, tg_shape1(3));
    tg_tensor *ids = tg_input(g, "ids", TG_I32, tg_shape1(3));
    TG_CHECK(tg_scatter_add(g, u, ids, 0, tg_shape_of(0, NULL)) == NULL);
    TG_CHECK(strstr(tg_graph_error(g), "scatter_add: the result has 0 dims") != NULL);
    tg_graph_destroy(g);
}

/* Negative ids count from the end; an id out of range reads nothing: a NaN
 * row forward, no contribution backward. Fast kernel and reference agree. */
static void test_index_edges(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *table = tg_input(g, "table", TG_F32, tg_shape2(3, 2));
    tg_tensor *ids = tg_input(g, "ids", TG_I32, tg_shape1(4));
    tg_tensor *y = tg_gather(g, table, ids, 0);
    TG_CHECK(y && tg_shape_equal(y->shape, tg_shape2(4, 2)));
    const float tv[] = {1, 2, 3, 4, 5, 6};
    const int32_t iv[] = {-1, 0, 3, -4};
    float out[8];
    tg_kernel_args a = {.node = y, .in = {(void *)tv, (void *)iv}, .out = out};
    tg_backend_cpu.kernel(TG_OP_GATHER)->forward(&a);
    TG_CHECK(out[0] == 5 && out[1] == 6 && out[2] == 1 && out[3] == 2);
    TG_CHECK(isnan(out[4]) && isnan(out[5]) && isnan(out[6]) && isnan(out[7]));

    tg_node_params p = {{0}, {0}};
    tg_gather_set_axis(&p, 0);
    tg_params_put_shape(&p, TG_GATHER_SHAPE_AT, tg_shape2(3, 2));
    tg_tensor *dy = tg_input(g, "dy", TG_F32, tg_shape2(4, 2));
    tg_tensor *dt = tg_node_create(g, TG_OP_GATHER_BWD, 2, (tg_tensor *[]){dy, ids}, &p);
    TG_CHECK(dt != NULL);
    const float dv[] = {1, 1, 10, 10, 100, 100, 1000, 1000};
    float grad[6];
    double acc[3 * 16];
    TG_CHECK(tg_backend_cpu.kernel(TG_OP_GATHER_BWD)->scratch(dt, 1) == sizeof acc);
    tg_kernel_args b = {.node = dt,
                        .in = {(void *)dv, (void *)iv},
                        .out = grad,
                        .scratch = acc,
                        .scratch_bytes = sizeof acc};
    tg_backend_cpu.kernel(TG_OP_GATHER_BWD)->forward(&b);
    const float want[] = {10, 10, 0, 0, 1, 1};
    for (int k = 0; k < 6; k++)
        TG_CHECK_NEAR(grad[k], want[k], 0);

    tg_interp *ip = NULL;
    TG_CHECK_OK(tg_interp_create(g, 1, &ip));
    for (int k = 0; k < 6; k++)
        tg_interp_data(ip, table)[k] = tv[k];
    for (int k = 0; k < 4; k++)
        tg_interp_data(ip, ids)[k] = iv[k];
    for (int k = 0; k < 8; k++)
        tg_interp_data(ip, dy)[k] = dv[k];
    TG_CHECK_OK(tg_interp_run(ip, 0));
    TG_CHECK(tg_interp_data(ip, y)[0] == 5 && isnan(tg_interp_data(ip, y)[4]));
    for (int k = 0; k < 6; k++)
        TG_CHECK_NEAR(tg_interp_data(ip, dt)[k], want[k], 0);
    tg_interp_destroy(ip);
    tg_graph_destroy(g);
}

/* ---- cast, compare, logic, where ---------------------------------------------------- */

typedef struct {
    int kind; /* 0 cast f32->i32->f32, 1 compare, 2 logic, 3 where (f32), 4 where (i32) */
    int which;
    tg_shape a, b, c;
} select_case;

static tg_tensor *build_select(tg_graph *g, void *ctx)
{
    const select_case *c = ctx;
    tg_tensor *x = tg_param(g, "x", c->a, (tg_init){TG_INIT_UNIFORM, -3, 3});
    tg_tensor *y = tg_param(g, "y", c->b, (tg_init){TG_INIT_UNIFORM, -3, 3});
    tg_tensor *m = tg_input(g, "m", TG_I32, c->c);
    typedef tg_tensor *(*bin)(tg_graph *, tg_tensor *, tg_tensor *);
    static const bin cmp[] = {tg_equal, tg_less, tg_less_equal, tg_greater, tg_greater_equal};
    static const bin logic[] = {tg_logical_and, tg_logical_or, tg_logical_xor};
    switch (c->kind) {
    case 0: /* truncation, and back: no gradient, so add x to have one */
        return tg_add(g, tg_mul(g, x, y),
                      tg_cast(g, tg_cast(g, tg_scale(g, x, 2.5f, 0.0f), TG_I32), TG_F32));
    case 1:
        return tg_where(g, cmp[c->which](g, x, y), x, y);
    case 2: {
        tg_tensor *l = tg_greater(g, x, y);
        tg_tensor *r = c->which == 3 ? tg_logical_not(g, m) : logic[c->which](g, l, m);
        return tg_where(g, r, x, y);
    }
    case 3:
        return tg_where(g, m, x, y);
    default: /* i32 selected, then cast: integers on both sides of where */
        return tg_add(g, tg_mul(g, x, y),
                      tg_cast(g, tg_where(g, m, tg_cast(g, x, TG_I32), m), TG_F32));
    }
}

/* A table stored in bf16 (precision 32.bf16) is read in place, only the
 * rows asked for: every storage pairing gives the rows the f32 kernel gives
 * on the widened table, rounded as staging rounds; an out-of-range row is
 * NaN; and a 32.bf16 inference program's gather step reads its operands
 * natively (the engine stages no f32 copy of the table). */
static void test_bf16_table_read_in_place(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *table = tg_input(g, "table", TG_F32, tg_shape2(5, 19));
    tg_tensor *ids = tg_input(g, "ids", TG_I32, tg_shape1(4));
    tg_tensor *y = tg_gather(g, table, ids, 0);
    float tf[5 * 19], wide[5 * 19];
    uint16_t tb[5 * 19];
    for (int k = 0; k < 5 * 19; k++) {
        tf[k] = (float)sin(k * 0.37) * 3.3f;
        tb[k] = tg_bf16_narrow(tf[k]);
        wide[k] = tg_bf16_widen(tb[k]);
    }
    const int32_t iv[] = {4, 0, 7, 2};
    for (int pair = 0; pair < 3; pair++) {
        /* (table, out): (bf16, bf16), (bf16, f32), (f32, bf16) */
        tg_dtype in_t = pair < 2 ? TG_BF16 : TG_F32, out_t = pair == 1 ? TG_F32 : TG_BF16;
        float of[4 * 19];
        uint16_t ob[4 * 19];
        tg_kernel_args a = {.node = y,
                            .in = {in_t == TG_BF16 ? (void *)tb : (void *)tf, (void *)iv},
                            .out = out_t == TG_BF16 ? (void *)ob : (void *)of,
                            .in_type = {in_t, TG_I32},
                            .out_type = out_t};
        tg_backend_cpu.kernel(TG_OP_GATHER)->forward(&a);
        for (int r = 0; r < 4; r++)
            for (int c = 0; c < 19; c++) {
                float got = out_t == TG_BF16 ? tg_bf16_widen(ob[r * 19 + c]) : of[r * 19 + c];
                if (iv[r] >= 5) {
                    TG_CHECK(isnan(got));
                    continue;
                }
                float want = in_t == TG_BF16 ? wide[iv[r] * 19 + c]
                                             : tg_bf16_widen(tg_bf16_narrow(tf[iv[r] * 19 + c]));
                if (got != want)
                    tg_test_fail(__FILE__, __LINE__, "pair %d: row %d col %d: %g, not %g", pair, r,
                                 c, got, want);
            }
    }
    tg_graph_destroy(g);

    g = tg_graph_create();
    table = tg_param(g, "table", tg_shape2(64, 32), (tg_init){TG_INIT_UNIFORM, -1, 1});
    ids = tg_input(g, "ids", TG_I32, tg_shape1(8));
    y = tg_relu(g, tg_gather(g, table, ids, 0));
    tg_tensor_mark_output(y);
    tg_options *o = tg_options_create();
    TG_CHECK_OK(tg_options_set(o, "precision", "32.bf16"));
    tg_session *s = NULL;
    TG_CHECK_OK(tg_session_create(g, o, &s));
    const tg_program *p = s ? tg_session_program(s) : NULL;
    int native = 0;
    for (int k = 0; p && k < p->devices[0].n_steps[TG_PHASE_FORWARD]; k++) {
        const tg_step *st = &p->devices[0].steps[TG_PHASE_FORWARD][k];
        if (p->graph->nodes[st->node]->op == TG_OP_GATHER) {
            TG_CHECK(p->buffers[st->in[0]].dtype == TG_BF16);
            native += !st->staged && tg_step_reads_native(p, st);
        }
    }
    TG_CHECK(native == 1);
    int32_t idv[8] = {3, 63, 0, 5, 5, 17, 40, 2};
    float out[8 * 32];
    TG_CHECK_OK(tg_session_write(s, ids, idv, sizeof idv));
    TG_CHECK_OK(tg_session_run(s));
    TG_CHECK_OK(tg_session_read(s, y, out, sizeof out));
    float tv[64 * 32];
    TG_CHECK_OK(tg_session_read(s, table, tv, sizeof tv));
    for (int r = 0; r < 8; r++)
        for (int c = 0; c < 32; c++)
            TG_CHECK(out[r * 32 + c] == fmaxf(tv[idv[r] * 32 + c], 0.0f));
    tg_session_destroy(s);
    tg_options_destroy(o);
    tg_graph_destroy(g);
}

static void test_select_ops(void)
{
    const select_case cases[] = {
        {0, 0, {2, {3, 4}}, {2, {3, 4}}, {1, {4}}},
        {1, 0, {2, {3, 4}}, {2, {3, 4}}, {1, {4}}},
        {1, 1, {2, {3, 4}}, {1, {4}}, {1, {4}}},       /* y broadcast over rows */
        {1, 2, {3, {2, 3, 1}}, {2, {1, 5}}, {1, {4}}}, /* both broadcast */
        {1, 3, {2, {3, 4}}, {0, {0}}, {1, {4}}},       /* a scalar y */
        {1, 4, {2, {3, 4}}, {2, {3, 4}}, {1, {4}}},
        {2, 0, {2, {3, 4}}, {2, {3, 4}}, {1, {4}}},
        {2, 1, {2, {3, 4}}, {2, {3, 4}}, {2, {3, 1}}},
        {2, 2, {2, {3, 4}}, {2, {3, 4}}, {2, {3, 4}}},
        {2, 3, {2, {3, 4}}, {2, {3, 4}}, {2, {1, 4}}},
        {3, 0, {4, {2, 1, 3, 4}}, {2, {3, 1}}, {4, {2, 2, 1, 4}}}, /* attention-mask shapes */
        {4, 0, {2, {3, 4}}, {2, {3, 4}}, {2, {3, 4}}},
        {3, 0, {3, {8, 64, 128}}, {0, {0}}, {3, {8, 1, 128}}}, /* two threads */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char label[64];
        snprintf(label, sizeof label, "select case %zu", i);
        tg_check_opts o = {.int_range = 2, .max_elems = 24};
        if (tg_shape_numel(cases[i].a) < 1000)
            tg_gradcheck(label, build_select, (void *)&cases[i], o);
        for (int threads = 1; threads <= 2; threads++)
            tg_check_kernels(label, build_select, (void *)&cases[i], threads, 1e-5, o);
    }
}

/* Values: truncation toward zero, saturation, NaN to 0. */
static void test_cast_values(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape1(7));
    tg_tensor *i = tg_cast(g, x, TG_I32);
    TG_CHECK(i && tg_tensor_dtype(i) == TG_I32);
    TG_CHECK(tg_cast(g, i, TG_I32) == i);
    const float xv[] = {2.7f, -2.7f, 0.5f, 3e9f, -3e9f, NAN, 16777216.0f};
    int32_t out[7];
    tg_kernel_args a = {.node = i, .in = {(void *)xv}, .out = out};
    tg_backend_cpu.kernel(TG_OP_CAST)->forward(&a);
    const int32_t want[] = {2, -2, 0, INT32_MAX, INT32_MIN, 0, 16777216};
    for (int k = 0; k < 7; k++)
        TG_CHECK(out[k] == want[k]);
    tg_graph_destroy(g);
}

static void expect_refused(tg_tensor *t, tg_graph *g, const char *part)
{
    TG_CHECK(t == NULL);
    TG_CHECK(tg_graph_status(g) != TG_OK && strstr(tg_graph_error(g), part) != NULL);
    if (tg_graph_error(g) && !strstr(tg_graph_error(g), part))
        printf("  message: %s\n", tg_graph_error(g));
}

static void test_refused(void)
{
    struct {
        int which;
        const char *part;
    } bad[] = {{0, "i32 indices"},  {1, "out of range"}, {2, "f32 or i32"},
               {3, "expected i32"}, {4, "expected f32"}, {5, "cannot broadcast"}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        tg_graph *g = tg_graph_create();
        tg_tensor *f = tg_input(g, "f", TG_F32, tg_shape2(3, 4));
        tg_tensor *ids = tg_input(g, "ids", TG_I32, tg_shape1(4));
        tg_tensor *u = tg_input(g, "u", TG_U8, tg_shape1(4));
        tg_tensor *ids3 = tg_input(g, "ids3", TG_I32, tg_shape1(3));
        tg_tensor *t = NULL;
        switch (bad[k].which) {
        case 0:
            t = tg_gather(g, f, f, 0);
            break;
        case 1:
            t = tg_gather(g, f, ids, 2);
            break;
        case 2:
            t = tg_equal(g, u, u);
            break;
        case 3:
            t = tg_where(g, f, f, f);
            break;
        case 4:
            t = tg_where(g, ids, f, ids);
            break;
        default:
            t = tg_where(g, ids3, f, f);
            break;
        }
        expect_refused(t, g, bad[k].part);
        tg_graph_destroy(g);
    }
}

#define CHECK_HAS(msg, part)                                                                       \
    do {                                                                                           \
        if (!strstr((msg), (part)))                                                                \
            tg_test_fail(__FILE__, __LINE__, "\"%s\" does not say \"%s\"", (msg), (part));         \
    } while (0)

/* The op's check (tg_op_def.check), which the engine runs before the
 * kernel: an index outside [-dim, dim) along the gathered axis (not the
 * whole tensor: 7 is an element of a [3, 5] table but no column of it) is
 * named with its position and the range; ids into an embedding
 * (tg_embedding) are refused negative, as nn.Embedding refuses them, and
 * the kernels read nothing for them. The gradient op checks the same. */
static void test_index_check(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *table = tg_input(g, "table", TG_F32, tg_shape2(3, 5));
    tg_tensor *cols = tg_input(g, "cols", TG_I32, tg_shape2(1, 3));
    tg_tensor *y = tg_gather(g, table, cols, 1);
    const tg_op_def *def = tg_op_get(TG_OP_GATHER);
    const tg_kernel_def *kd = tg_backend_cpu.kernel(TG_OP_GATHER);
    TG_CHECK(def->check != NULL && y != NULL);
    char msg[320] = "";
    const int32_t fine[] = {4, -5, 0}, past[] = {4, 7, 0}, below[] = {0, 1, -6};
    tg_kernel_args a = {.node = y, .in = {NULL, (void *)fine}};
    TG_CHECK(def->check(&a, msg, sizeof msg));
    a.in[1] = (void *)past;
    TG_CHECK(!def->check(&a, msg, sizeof msg));
    CHECK_HAS(msg, "indices 'cols' hold 7 at [0, 1]: axis 1 of 'table' has size 5, "
                   "so indices must be in [-5, 5)");
    a.in[1] = (void *)below;
    TG_CHECK(!def->check(&a, msg, sizeof msg));
    CHECK_HAS(msg, "hold -6 at [0, 2]");

    tg_tensor *ids = tg_input(g, "ids", TG_I32, tg_shape1(3));
    tg_tensor *e = tg_embedding(g, table, ids);
    TG_CHECK(e != NULL && tg_gather_ids(e));
    const int32_t neg[] = {0, -1, 2};
    tg_kernel_args b = {.node = e, .in = {NULL, (void *)neg}};
    TG_CHECK(!def->check(&b, msg, sizeof msg));
    CHECK_HAS(msg, "ids 'ids' hold -1 at [1]: 'table' has 3 rows, so ids must be in "
                   "[0, 3) (negative ids are refused, as by nn.Embedding)");
    const float tv[15] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    float out[15];
    b.in[0] = (void *)tv;
    b.out = out;
    kd->forward(&b);
    TG_CHECK(out[0] == 1 && isnan(out[5]) && out[10] == 11); /* -1 is not the last row */

    /* the gradient op of an embedding keeps the ids' rule */
    tg_tensor *dy = tg_input(g, "dy", TG_F32, tg_shape2(3, 5));
    bool need = true;
    tg_tensor *din = NULL;
    TG_CHECK_OK(def->backward(g, e, dy, &need, &din));
    TG_CHECK(din && din->op == TG_OP_GATHER_BWD && tg_gather_ids(din));
    tg_kernel_args c = {.node = din, .in = {NULL, (void *)neg}};
    TG_CHECK(!tg_op_get(TG_OP_GATHER_BWD)->check(&c, msg, sizeof msg));
    CHECK_HAS(msg, "ids 'ids' hold -1 at [1]");
    tg_graph_destroy(g);
}

int main(void)
{
    TG_RUN(test_gather_kernels_and_gradients);
    TG_RUN(test_scatter_add);
    TG_RUN(test_index_edges);
    TG_RUN(test_index_check);
    TG_RUN(test_bf16_table_read_in_place);
    TG_RUN(test_select_ops);
    TG_RUN(test_cast_values);
    TG_RUN(test_refused);
    return tg_test_finish();
}
