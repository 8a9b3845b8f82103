/* tests/ops/test_binary.c - ADD, SUB, MUL, DIV, POW, MAXIMUM, MINIMUM with
 * broadcasting (and POW_BWD, MINMAX_BWD), SUM_TO and EXPAND: gradients
 * against finite differences, fast kernels against the reference at 1 and 2
 * threads, hand-computed and PyTorch values, and shape errors.
 * TG_TEST_LABELS: quick isa */
#include "backend/backend.h"
#include "tg_test.h"

#include "ops/broadcast.h"
#include "ops/op.h"
#include "runtime/interp.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    tg_op op;
    tg_shape a, b;
    bool a_input; /* a is a tg_input (no gradient) rather than a parameter */
} bin_case;

static tg_tensor *build_binary(tg_graph *g, void *ctx)
{
    const bin_case *c = ctx;
    tg_init u = {TG_INIT_UNIFORM, -1, 1};
    /* pow's base stays positive: its exponent's gradient takes log(a) */
    tg_init ua = c->op == TG_OP_POW ? (tg_init){TG_INIT_UNIFORM, 0.5, 2} : u;
    tg_tensor *a = c->a_input ? tg_input(g, "a", TG_F32, c->a) : tg_param(g, "a", c->a, ua);
    /* keep divisors away from 0 so finite differences stay accurate */
    tg_tensor *b = c->op == TG_OP_DIV ? tg_param(g, "b", c->b, (tg_init){TG_INIT_UNIFORM, 0.5, 2})
                                      : tg_param(g, "b", c->b, u);
    switch (c->op) {
    case TG_OP_ADD:
        return tg_add(g, a, b);
    case TG_OP_SUB:
        return tg_sub(g, a, b);
    case TG_OP_MUL:
        return tg_mul(g, a, b);
    case TG_OP_POW:
        return tg_pow(g, a, b);
    case TG_OP_MAXIMUM:
        return tg_maximum(g, a, b);
    case TG_OP_MINIMUM:
        return tg_minimum(g, a, b);
    default:
        return tg_div(g, a, b);
    }
}

static const tg_op arith_ops[] = {TG_OP_ADD, TG_OP_SUB,     TG_OP_MUL,    TG_OP_DIV,
                                  TG_OP_POW, TG_OP_MAXIMUM, TG_OP_MINIMUM};
#define N_ARITH (int)(sizeof arith_ops / sizeof arith_ops[0])

/* Shape pairs: same, scalar (both ways), row, column, middle axis, both
 * sides broadcast, rank-0 scalar, and leading-dim broadcast. */
static void shape_pairs(tg_shape *as, tg_shape *bs, int *n)
{
    int k = 0;
    as[k] = tg_shape2(3, 4), bs[k++] = tg_shape2(3, 4);
    as[k] = tg_shape2(3, 4), bs[k++] = tg_shape1(1);
    as[k] = tg_shape_of(0, NULL), bs[k++] = tg_shape2(3, 4);
    as[k] = tg_shape2(5, 4), bs[k++] = tg_shape1(4);
    as[k] = tg_shape2(5, 4), bs[k++] = tg_shape2(5, 1);
    as[k] = tg_shape3(2, 3, 4), bs[k++] = tg_shape3(1, 3, 1);
    as[k] = tg_shape3(4, 1, 3), bs[k++] = tg_shape2(5, 1);
    as[k] = tg_shape2(1, 4), bs[k++] = tg_shape2(3, 1);
    as[k] = tg_shape4(2, 3, 2, 2), bs[k++] = tg_shape3(3, 1, 1);
    *n = k;
}

static void test_gradcheck_arith(void)
{
    tg_shape as[16], bs[16];
    int n;
    shape_pairs(as, bs, &n);
    for (int o = 0; o < N_ARITH; o++)
        for (int k = 0; k < n; k++) {
            bin_case c = {arith_ops[o], as[k], bs[k], false};
            char label[64];
            snprintf(label, sizeof label, "%s pair %d", tg_op_name(c.op), k);
            tg_gradcheck(label, build_binary, &c, (tg_check_opts){0});
        }
}

static void test_kernels_arith(void)
{
    tg_shape as[16], bs[16];
    int n;
    shape_pairs(as, bs, &n);
    for (int o = 0; o < N_ARITH; o++)
        for (int k = 0; k < n; k++)
            for (int threads = 1; threads <= 2; threads++) {
                bin_case c = {arith_ops[o], as[k], bs[k], false};
                char label[64];
                snprintf(label, sizeof label, "%s pair %d", tg_op_name(c.op), k);
                tg_check_kernels(label, build_binary, &c, threads, 1e-5, (tg_check_opts){0});
            }
}

/* Big enough to take the pool path (> TG_PARALLEL_MIN elements): same
 * shape, bias row, column and middle-axis broadcasts. */
static void test_kernels_large(void)
{
    bin_case cases[] = {
        {TG_OP_ADD, tg_shape2(256, 160), tg_shape2(256, 160), true},
        {TG_OP_ADD, tg_shape2(256, 160), tg_shape1(160), true},
        {TG_OP_MUL, tg_shape2(256, 160), tg_shape2(256, 1), true},
        {TG_OP_DIV, tg_shape4(8, 16, 16, 17), tg_shape3(16, 1, 1), true},
        {TG_OP_SUB, tg_shape_of(0, NULL), tg_shape3(40, 30, 30), true},
        {TG_OP_POW, tg_shape2(256, 160), tg_shape1(160), false},
        {TG_OP_MAXIMUM, tg_shape4(8, 16, 16, 17), tg_shape3(16, 1, 1), false},
        {TG_OP_MINIMUM, tg_shape2(256, 160), tg_shape2(256, 160), false},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        for (int threads = 1; threads <= 2; threads++) {
            char label[64];
            snprintf(label, sizeof label, "large case %zu", k);
            tg_check_kernels(label, build_binary, &cases[k], threads, 1e-5, (tg_check_opts){0});
        }
    /* and one gradient check through the big shapes */
    tg_gradcheck("large bias gradient", build_binary, &cases[1], (tg_check_opts){.max_elems = 8});
}

/* ---- SUM_TO and EXPAND -------------------------------------------------------- */

typedef struct {
    tg_shape from, to;
    bool expand;
} move_case;

static tg_tensor *build_move(tg_graph *g, void *ctx)
{
    const move_case *c = ctx;
    tg_tensor *x = tg_param(g, "x", c->from, (tg_init){TG_INIT_UNIFORM, -1, 1});
    return c->expand ? tg_expand(g, x, c->to) : tg_sum_to(g, x, c->to);
}

static void test_sum_to_expand(void)
{
    move_case cases[] = {
        {tg_shape2(5, 4), tg_shape1(4), false},
        {tg_shape2(5, 4), tg_shape2(5, 1), false},
        {tg_shape3(2, 3, 4), tg_shape3(1, 3, 1), false},
        {tg_shape3(2, 3, 4), tg_shape_of(0, NULL), false},
        {tg_shape4(2, 3, 2, 2), tg_shape3(3, 1, 1), false},
        {tg_shape4(64, 8, 10, 10), tg_shape3(8, 1, 1), false}, /* conv bias, 51200 elements */
        {tg_shape2(512, 100), tg_shape1(100), false},          /* linear bias */
        {tg_shape2(100, 512), tg_shape2(100, 1), false},       /* row sums */
        {tg_shape1(4), tg_shape2(5, 4), true},
        {tg_shape2(5, 1), tg_shape2(5, 4), true},
        {tg_shape_of(0, NULL), tg_shape3(2, 3, 4), true},
        {tg_shape3(3, 1, 1), tg_shape4(2, 3, 2, 2), true},
        {tg_shape3(8, 1, 1), tg_shape4(64, 8, 10, 10), true},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char label[64];
        snprintf(label, sizeof label, "%s case %zu", cases[k].expand ? "expand" : "sum_to", k);
        tg_gradcheck(label, build_move, &cases[k], (tg_check_opts){.max_elems = 12});
        for (int threads = 1; threads <= 2; threads++)
            tg_check_kernels(label, build_move, &cases[k], threads, 1e-5, (tg_check_opts){0});
    }
}

/* ---- exact values ------------------------------------------------------------------- */

static void test_values(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *a = tg_input(g, "a", TG_F32, tg_shape2(2, 3));
    tg_tensor *b = tg_input(g, "b", TG_F32, tg_shape1(3));
    tg_tensor *c = tg_input(g, "c", TG_F32, tg_shape2(2, 1));
    tg_tensor *add = tg_add(g, a, b);              /* row broadcast */
    tg_tensor *sub = tg_sub(g, c, a);              /* column broadcast */
    tg_tensor *mul = tg_mul(g, b, c);              /* outer product [2, 3] */
    tg_tensor *dv = tg_div(g, a, c);               /* column divide */
    tg_tensor *st = tg_sum_to(g, a, tg_shape1(3)); /* column sums */
    tg_tensor *sr = tg_sum_to(g, a, tg_shape2(2, 1));
    TG_CHECK_OK(tg_graph_status(g));
    const float av[] = {1, 2, 3, 4, 5, 6}, bv[] = {10, 20, 30}, cv[] = {2, 4};
    tg_tensor *ins[] = {a, b, c};
    const float *vals[] = {av, bv, cv};
    for (int threads = 1; threads <= 2; threads++) {
        float r[6];
        tg_test_run_fast(g, ins, vals, 3, add, r, threads);
        const float want_add[] = {11, 22, 33, 14, 25, 36};
        for (int k = 0; k < 6; k++)
            TG_CHECK_NEAR(r[k], want_add[k], 0);
        tg_test_run_fast(g, ins, vals, 3, sub, r, threads);
        const float want_sub[] = {1, 0, -1, 0, -1, -2};
        for (int k = 0; k < 6; k++)
            TG_CHECK_NEAR(r[k], want_sub[k], 0);
        tg_test_run_fast(g, ins, vals, 3, mul, r, threads);
        const float want_mul[] = {20, 40, 60, 40, 80, 120};
        for (int k = 0; k < 6; k++)
            TG_CHECK_NEAR(r[k], want_mul[k], 0);
        tg_test_run_fast(g, ins, vals, 3, dv, r, threads);
        const float want_div[] = {0.5f, 1, 1.5f, 1, 1.25f, 1.5f};
        for (int k = 0; k < 6; k++)
            TG_CHECK_NEAR(r[k], want_div[k], 0);
        tg_test_run_fast(g, ins, vals, 3, st, r, threads);
        TG_CHECK_NEAR(r[0], 5, 0);
        TG_CHECK_NEAR(r[1], 7, 0);
        TG_CHECK_NEAR(r[2], 9, 0);
        tg_test_run_fast(g, ins, vals, 3, sr, r, threads);
        TG_CHECK_NEAR(r[0], 6, 0);
        TG_CHECK_NEAR(r[1], 15, 0);
    }
    TG_CHECK(tg_shape_equal(mul->shape, tg_shape2(2, 3)));
    TG_CHECK(tg_shape_equal(st->shape, tg_shape1(3)));
    tg_graph_destroy(g);
}

/* PyTorch 1.13's values and gradients of torch.maximum, torch.minimum and
 * torch.pow (float64) at a tie, a NaN, and the pow edge cases at a = 0 and
 * b = 0, each differentiated by itself (sum of the output). */
static void test_pow_minmax_values(void)
{
    const double av[5] = {1, 2, 3, NAN, -1}, bv[5] = {2, 2, 1, 0, 0};
    const double want[2][5] = {{2, 2, 3, NAN, 0}, {1, 2, 1, NAN, -1}};
    const double want_da[2][5] = {{0, 0.5, 1, 1, 0}, {1, 0.5, 0, 1, 1}};
    const double pa[4] = {0, 2, 0, 4}, pb[4] = {0, 3, 2, 0.5};
    const double want_pow[4] = {1, 8, 0, 2}, want_pa[4] = {0, 12, 0, 0.25};
    const double want_pb[4] = {0, 5.545177444479562, 0, 2.772588722239781};
    for (int o = 0; o < 3; o++) {
        int n = o < 2 ? 5 : 4;
        tg_graph *g = tg_graph_create();
        tg_tensor *a = tg_param(g, "a", tg_shape1(n), (tg_init){TG_INIT_ZEROS, 0, 0});
        tg_tensor *b = tg_param(g, "b", tg_shape1(n), (tg_init){TG_INIT_ZEROS, 0, 0});
        tg_tensor *y = o == 0   ? tg_maximum(g, a, b)
                       : o == 1 ? tg_minimum(g, a, b)
                                : tg_pow(g, a, b);
        TG_CHECK_OK(tg_graph_backward(g, tg_reduce_sum(g, y, 1, false)));
        tg_interp *ip = NULL;
        TG_CHECK_OK(tg_interp_create(g, 1, &ip));
        memcpy(tg_interp_data(ip, a), o < 2 ? av : pa, (size_t)n * sizeof(double));
        memcpy(tg_interp_data(ip, b), o < 2 ? bv : pb, (size_t)n * sizeof(double));
        TG_CHECK_OK(tg_interp_run(ip, 0));
        const double *yv = tg_interp_data(ip, y), *da = tg_interp_data(ip, tg_tensor_grad(a)),
                     *db = tg_interp_data(ip, tg_tensor_grad(b));
        for (int k = 0; k < n; k++) {
            double w = o < 2 ? want[o][k] : want_pow[k];
            TG_CHECK(isnan(w) ? isnan(yv[k]) : fabs(yv[k] - w) < 1e-12);
            TG_CHECK_NEAR(da[k], o < 2 ? want_da[o][k] : want_pa[k], 1e-12);
            /* max/min: b's gradient mirrors a's, except both get all of it at a NaN */
            double wb = o < 2 ? (k == 3 ? 1 : 1 - want_da[o][k]) : want_pb[k];
            TG_CHECK_NEAR(db[k], wb, 1e-12);
        }
        /* the fast kernels agree, NaN included */
        float af[5], bf[5], out[5];
        for (int k = 0; k < n; k++)
            af[k] = (float)(o < 2 ? av[k] : pa[k]), bf[k] = (float)(o < 2 ? bv[k] : pb[k]);
        tg_kernel_args ka = {.node = y, .in = {af, bf}, .out = out};
        tg_backend_cpu.kernel(y->op)->forward(&ka);
        for (int k = 0; k < n; k++)
            TG_CHECK(isnan(yv[k]) ? isnan(out[k]) : fabs(out[k] - yv[k]) < 1e-6);
        tg_interp_destroy(ip);
        tg_graph_destroy(g);
    }
}

/* pow_bwd has a gradient in dy only: asking for more is a clear error. */
static tg_tensor *build_pow_second(tg_graph *g, void *ctx)
{
    tg_init u = {TG_INIT_UNIFORM, 0.5, 2};
    tg_tensor *a = tg_param(g, "a", tg_shape1(3), u), *b = tg_param(g, "b", tg_shape1(3), u);
    tg_tensor *y = tg_pow(g, a, b);
    return tg_node_create(g, TG_OP_POW_BWD, 3, (tg_tensor *[]){y, a, b}, &(tg_node_params){0});
}

static void test_pow_second_order(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *out = build_pow_second(g, NULL);
    TG_CHECK(tg_graph_backward(g, tg_reduce_sum(g, out, 1, false)) == TG_ERR_UNSUPPORTED);
    TG_CHECK(strstr(tg_error_message(), "second derivative of pow") != NULL);
    tg_graph_destroy(g);
}

/* ---- build errors -------------------------------------------------------------------- */

static void test_bad_shapes(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *a = tg_input(g, "a", TG_F32, tg_shape2(3, 4));
    tg_tensor *b = tg_input(g, "b", TG_F32, tg_shape1(5));
    TG_CHECK(tg_add(g, a, b) == NULL);
    TG_CHECK(tg_graph_status(g) == TG_ERR_SHAPE);
    TG_CHECK(strstr(tg_graph_error(g), "add: cannot broadcast [3, 4] with [5]") != NULL);
    TG_CHECK(tg_mul(g, a, a) == NULL); /* sticky */
    tg_graph_destroy(g);

    g = tg_graph_create();
    a = tg_input(g, "a", TG_F32, tg_shape3(2, 3, 4));
    b = tg_input(g, "b", TG_F32, tg_shape2(2, 4));
    TG_CHECK(tg_div(g, a, b) == NULL);
    TG_CHECK(strstr(tg_graph_error(g), "div: cannot broadcast [2, 3, 4] with [2, 4]") != NULL);
    tg_graph_destroy(g);

    g = tg_graph_create();
    a = tg_input(g, "a", TG_F32, tg_shape2(3, 4));
    TG_CHECK(tg_sum_to(g, a, tg_shape1(3)) == NULL);
    TG_CHECK(tg_graph_status(g) == TG_ERR_SHAPE);
    TG_CHECK(strstr(tg_graph_error(g), "sum_to: cannot sum [3, 4] down to [3]") != NULL);
    tg_graph_destroy(g);

    g = tg_graph_create();
    a = tg_input(g, "a", TG_F32, tg_shape2(3, 4));
    TG_CHECK(tg_expand(g, a, tg_shape2(3, 5)) == NULL);
    TG_CHECK(strstr(tg_graph_error(g), "expand: cannot expand [3, 4] to [3, 5]") != NULL);
    tg_graph_destroy(g);

    g = tg_graph_create();
    a = tg_input(g, "a", TG_F32, tg_shape1(4));
    b = tg_input(g, "labels", TG_I32, tg_shape1(4));
    TG_CHECK(tg_sub(g, a, b) == NULL);
    TG_CHECK(tg_graph_status(g) == TG_ERR_DTYPE);
    TG_CHECK(strstr(tg_graph_error(g), "('labels') is i32") != NULL);
    tg_graph_destroy(g);

    g = tg_graph_create();
    a = tg_input(g, "a", TG_F32, tg_shape2(3, 4));
    b = tg_input(g, "b", TG_F32, tg_shape2(2, 4));
    TG_CHECK(tg_maximum(g, a, b) == NULL);
    TG_CHECK(strstr(tg_graph_error(g), "maximum: cannot broadcast [3, 4] with [2, 4]") != NULL);
    tg_graph_destroy(g);

    g = tg_graph_create();
    a = tg_input(g, "a", TG_F32, tg_shape1(4));
    TG_CHECK(tg_add(g, a, NULL) == NULL);
    TG_CHECK(tg_graph_status(g) == TG_ERR_INVALID_ARG);
    tg_graph_destroy(g);
}

/* The merged views that select the fast loops. */
static void test_bcast_views(void)
{
    tg_bcast bc;
    tg_shape in[2] = {tg_shape3(8, 5, 4), tg_shape3(8, 5, 4)};
    tg_bcast_init(&bc, in[0], 2, in);
    TG_CHECK(bc.ndim == 1 && bc.dim[0] == 160 && bc.stride[0][0] == 1 && bc.stride[1][0] == 1);
    in[1] = tg_shape1(4); /* bias row */
    tg_bcast_init(&bc, in[0], 2, in);
    TG_CHECK(bc.ndim == 2 && bc.dim[0] == 40 && bc.dim[1] == 4);
    TG_CHECK(bc.stride[1][0] == 0 && bc.stride[1][1] == 1);
    in[1] = tg_shape_of(0, NULL); /* scalar */
    tg_bcast_init(&bc, in[0], 2, in);
    TG_CHECK(bc.ndim == 1 && bc.stride[1][0] == 0);
    in[1] = tg_shape3(1, 5, 1); /* middle axis */
    tg_bcast_init(&bc, in[0], 2, in);
    TG_CHECK(bc.ndim == 3 && bc.stride[1][0] == 0 && bc.stride[1][1] == 1 && bc.stride[1][2] == 0);
}

int main(void)
{
    TG_RUN(test_values);
    TG_RUN(test_pow_minmax_values);
    TG_RUN(test_pow_second_order);
    TG_RUN(test_bad_shapes);
    TG_RUN(test_bcast_views);
    TG_RUN(test_gradcheck_arith);
    TG_RUN(test_kernels_arith);
    TG_RUN(test_kernels_large);
    TG_RUN(test_sum_to_expand);
    return tg_test_finish();
}
